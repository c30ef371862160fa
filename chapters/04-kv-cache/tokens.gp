# Tokens of KV cache that fit beside the fp16 weights (kv_cache tokens-data):
# one panel per card, a cluster of bars per model, a bar per cache format.
stats "tokens.dat" using 0 nooutput
cards = STATS_blocks
set terminal svg size 760,(230 * cards + 120) dynamic font "sans,12" background rgb "white"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set format y "10^{%T}"
# The axis starts at the power of ten below the fewest tokens of any bar
# (fp16's) and leaves room above the most (INT4's).
stats "tokens.dat" using 2 nooutput
bottom_tokens = 10 ** floor(log10(STATS_min))
stats "tokens.dat" using 4 nooutput
set yrange [bottom_tokens:1.6 * STATS_max]
set grid ytics
set ylabel "tokens of cache"
# The first line of each card's block names the card and the formats.
set key autotitle columnheader
set key outside right top vertical Left reverse samplen 2
# Panels of one height, the model names under the last; the key to the right.
set multiplot layout cards,1 margins 0.09,0.78,0.13,0.98 spacing 0.03
do for [c = 0:cards - 1] {
    bottom = c == cards - 1
    if (bottom) { set xtics rotate by 30 right nomirror } else { unset xtics }
    plot "tokens.dat" index c using 0:(NaN) title columnheader(1) with points pointtype -1, \
         "" index c using 2:xtic(1) title columnheader(2) linecolor rgb "#4878a8", \
         "" index c using 3 title columnheader(3) linecolor rgb "#e49444", \
         "" index c using 4 title columnheader(4) linecolor rgb "#6a9f58", \
         "" index c using 0:(bottom_tokens * 1.3):(strcol(2) eq "NaN" ? "weights do not fit" : "") \
            with labels rotate by 90 left notitle
}
unset multiplot
