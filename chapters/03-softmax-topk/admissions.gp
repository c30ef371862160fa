# Logits admitted to the top K along a row: measured (points) and the
# expectation for random order, K (1 + ln(i / K)) (lines).
set terminal svg size 720,430 font "sans,13" background rgb "white"
set output 'admissions.svg'
set logscale xy
set xlabel "logits read, i"
set ylabel "logits admitted so far"
set key top left
set grid
plot 'admissions.dat' using 1:2 with points pt 7 lc 1 title "K = 1", \
     '' using 1:3 with lines lc 1 notitle, \
     '' using 1:4 with points pt 5 lc 2 title "K = 16 (sorted list)", \
     '' using 1:5 with lines lc 2 notitle, \
     '' using 1:6 with points pt 9 lc 3 title "K = 256 (buffer + selection)", \
     '' using 1:7 with lines lc 3 notitle, \
     x with lines dt 2 lc rgb "gray" title "every logit"
