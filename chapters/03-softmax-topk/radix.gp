# The four passes of radix select on one row: each counts, by their next
# 8 bits, the keys that start with the digits chosen so far. Blue bins lie
# above the chosen digit (their keys add to a), the orange one is where the
# count from the top reaches K, grey ones lie below. The legends, under each
# panel's title, come from the data (radix.dat): drawn by a plot of
# invisible points, so that they have no sample.
set terminal svg size 760,640 font "sans,11" background rgb "white"
set output 'radix.svg'
set datafile missing "?"
set key at graph 0.5, graph 1.02 center bottom samplen 0
set style fill solid 1.0 noborder
set boxwidth 1.0
set logscale y
set xrange [-2:257]
set xtics 0,32,255 format "%02X"
set xtics add ("FF" 255)
set title offset 0,1.2
colour(where) = where == 0 ? 0x3c78b4 : where == 1 ? 0xe0701a : 0xbdbdbd
set multiplot layout 2,2 margins 0.1,0.98,0.08,0.9 spacing 0.09,0.2
do for [p = 0:3] {
    stats 'radix.dat' index p using 2 nooutput
    set yrange [0.5:(STATS_max < 10 ? 10 : 2 * STATS_max)]
    set title sprintf("pass %d: bits %d-%d of the key", p + 1, 31 - 8 * p, 24 - 8 * p)
    set xlabel "digit (hex)"
    set ylabel (p % 2 == 0 ? "keys" : "")
    plot 'radix.dat' index p using 1:2:(colour($3)) with boxes lc rgb variable notitle, \
         '' index p using 1:2 with points pt -1 title columnheader(2)
}
unset multiplot
