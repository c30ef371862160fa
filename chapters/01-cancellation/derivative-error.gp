# Central difference against complex step for exp(x) on [0, 1]: the worst
# relative error over 101 points (points) and the error model (lines), as the
# step h shrinks. Data: ./cancellation --derivative-data.
set terminal svg size 660,460 font "sans,12" background rgb "white"
set output "derivative-error.svg"

set logscale xy
set format x "10^{%T}"
set format y "10^{%T}"
set xlabel "step h"
set ylabel "relative error of the derivative"
set grid xtics ytics lc rgb "#dddddd"
set key bottom right reverse Left samplen 2 font "sans,11" opaque
set xrange [1e-16:1]
set yrange [1e-17:10]

u = 2.0**-53
best_step = (3 * u)**(1.0 / 3)
set arrow from best_step, graph 0 to best_step, graph 1 nohead dt 3 lc rgb "#888888"
set label "h = (3u)^{1/3}" at best_step, graph 0.93 offset 0.5, 0 font "sans,11"

positive(e) = e > 0 ? e : 1/0
plot "derivative-error.dat" using 1:(positive($2)) with points pt 7 ps 0.6 lc rgb "#d62728" title "central difference", \
     "" using 1:4 with lines lw 1 lc rgb "#000000" title "h²/6 + u/h", \
     "" using 1:(positive($3)) with points pt 5 ps 0.35 lc rgb "#1f77b4" title "complex step", \
     "" using 1:5 with lines dt 2 lw 1.5 lc rgb "#1f77b4" title "h²/6 (truncation)", \
     "" using 1:6 with lines dt 3 lw 1.5 lc rgb "#555555" title "u"
