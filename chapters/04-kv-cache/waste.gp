# The waste experiment: share of reserved KV-cache slots that hold tokens.
set terminal svg size 760,440 dynamic font "sans,12" background rgb "white"
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.8 relative
set bmargin 7
set rmargin 8
set yrange [0:105]
set ylabel "reserved slots holding tokens (%)"
set xtics rotate by 30 right nomirror
set grid ytics
unset key
plot "waste.dat" using 2:xtic(1) linecolor rgb "#4878a8", \
     "" using 0:($2 + 3):(sprintf("%.1f", $2)) with labels notitle
