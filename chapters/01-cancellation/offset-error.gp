# Measured relative error of each variance method (points) against its
# first-order bound (dashed line of the same colour), as the condition number
# grows; float above, double below. Data: ./cancellation --theory-data.
set terminal svg size 660,900 font "sans,12" background rgb "white"
set output "offset-error.svg"

set logscale xy
set format x "10^{%T}"
set format y "10^{%T}"
set xlabel "condition number κ = sqrt(1 + mean²/variance)"
set grid xtics ytics lc rgb "#dddddd"
set key top left reverse Left samplen 2 spacing 1.1 font "sans,11"

# Exact results (error 0) have no place on a log scale: leave them out.
positive(e) = e > 0 ? e : 1/0
colour(m) = word("#d62728 #1f77b4 #2ca02c #9467bd", m)
name(m) = word("naive two-pass Welford corrected", m)

set multiplot layout 2,1
do for [block = 0:1] {
    set title (block == 0 ? "float (u = 2^{-24})" : "double (u = 2^{-53})")
    set ylabel "relative error of the variance"
    plot for [m = 1:4] "offset-error.dat" index block using 1:(positive(column(m + 1))) \
             with points pt 7 ps 0.6 lc rgb colour(m) title name(m), \
         for [m = 1:4] "" index block using 1:(column(m + 5)) \
             with lines dt 2 lw 1.5 lc rgb colour(m) notitle
}
unset multiplot
