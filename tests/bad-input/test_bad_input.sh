#!/bin/sh
# The README's table of bad input ("Bad input and failed writes"), run row
# by row: each row's command (in the first column, run by
# sh in a scratch directory with the four programs on PATH) must exit with
# the row's status and print exactly one line on stderr, holding the row's
# words in double quotes and no control byte; a refusal (status 2) prints
# nothing on stdout. The files the rows name are made here first.
#   test_bad_input.sh README CHAPTER_DIR...
set -u
readme=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
path=
for chapter in "$@"; do path="$path$(cd "$chapter" && pwd):"; done
work=$(mktemp -d /tmp/test_bad_input.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

# A version 1.0 .npy file: the magic, the version, the header length (118,
# little-endian: \166\000), the header padded with spaces to 117 bytes and a
# newline (so the data starts at byte 128), then the data given as printf
# escapes.
npy() {
    printf '\223NUMPY\001\000\166\000' > "$1"
    printf "%-117s\n" "{'descr': '$2', 'fortran_order': False, 'shape': $3, }" >> "$1"
    printf "$4" >> "$1"
}
one='\000\000\200\077'  # 1.0f
nan='\000\000\300\177'  # a quiet NaN, float32
npy logits.npy '<f4' '(2, 4)' "$one$one$one$one$one$one$one$one"
npy nonfinite.npy '<f4' '(2, 4)' "$one$one$one$one$one$nan$one$one"
npy float64.npy '<f8' '(1, 1)' '\000\000\000\000\000\000\360\077'
# bfloat16 bits of 1 and 2 (0x3f80, 0x4000) in a uint16 file.
npy bf16.npy '<u2' '(1, 2)' '\200\077\000\100'
two=$(printf '%s' "$one$one")
# Layer norm inputs (x, dy: 2 x 2; gamma, beta: 2) whose second row of x holds a NaN.
mkdir ln-nonfinite
npy ln-nonfinite/x.npy '<f4' '(2, 2)' "$one\000\000\000\100$one$nan"
npy ln-nonfinite/dy.npy '<f4' '(2, 2)' "$two$two"
npy ln-nonfinite/gamma.npy '<f4' '(2,)' "$two"
npy ln-nonfinite/beta.npy '<f4' '(2,)' "$two"
# Attention inputs (q: 1 x 2 x 4; k, v: 1 x 2 x 2 x 4; lens: 2) with one key
# of 3e38 (\346\261\141\177): finite, but its dot product with q overflows.
mkdir kv-overflow
four=$(printf '%s' "$two$two")
npy kv-overflow/q.npy '<f4' '(1, 2, 4)' "$four$four"
npy kv-overflow/k.npy '<f4' '(1, 2, 2, 4)' "\346\261\141\177$one$one$one$four$four$four"
npy kv-overflow/v.npy '<f4' '(1, 2, 2, 4)' "$four$four$four$four"
npy kv-overflow/lens.npy '<i4' '(1,)' '\002\000\000\000'
# A q.npy with no elements but a dimension of 3e9, more than an int holds.
mkdir kv-huge-dimension
npy kv-huge-dimension/q.npy '<f4' '(0, 3000000000, 4)' ''
npy kv-huge-dimension/k.npy '<f4' '(0, 1, 1, 4)' ''
npy kv-huge-dimension/v.npy '<f4' '(0, 1, 1, 4)' ''
npy kv-huge-dimension/lens.npy '<i4' '(0,)' ''
printf 'hello, not an array\n' > text.npy
mkfifo fifo.npy
# A header that holds a newline and the escape sequence that clears a terminal.
printf '\223NUMPY\001\000\166\000%-117s\n' "{'descr': '<f4', 'shape': (1,
1), '$(printf '\033')[2J': 0}" > control-bytes.npy

gpu_here=$(nvidia-smi -L 2>/dev/null | grep '^GPU' || true)
rows=0
failures=0
fail() {
    failures=$((failures + 1))
    printf 'FAIL %s\n     %s\n' "$command" "$1"
    sed 's/^/     stderr: /' err
}
# The rows: "| `program command` | what, "words" | status |"
table=$(grep -E '^\| `(cancellation|layernorm|softmax_topk|kv_cache)[ `][^`]*` \|' "$readme")
[ -n "$table" ] || { echo "FAIL: no table rows found in $readme"; exit 1; }
while IFS= read -r row; do
    command=$(printf '%s\n' "$row" | sed -E 's/^\| `([^`]+)` \|.*/\1/')
    words=$(printf '%s\n' "$row" | awk -F'|' '{print $3}' | sed -nE 's/[^"]*"([^"]*)".*/\1/p')
    status_cell=$(printf '%s\n' "$row" | awk -F'|' '{print $4}')
    expected=$(printf '%s\n' "$status_cell" | tr -dc '0-9')
    if [ -n "$gpu_here" ] && printf '%s' "$status_cell" | grep -q 'without a GPU'; then
        echo "skip $command: a row for machines without a GPU, and this one has one"
        continue
    fi
    rows=$((rows + 1))
    rm -rf out
    PATH="$path$PATH" timeout --foreground 60 sh -c "$command" > out.txt 2> err
    status=$?
    lines=$(wc -l < err)
    if [ "$status" != "$expected" ]; then
        fail "exit status $status, the table says $expected"
    elif [ "$lines" -ne 1 ]; then
        fail "$lines lines on stderr, want exactly one"
    elif [ -n "$words" ] && ! grep -qF -- "$words" err; then
        fail "stderr does not hold \"$words\""
    elif tr -d '\n' < err | LC_ALL=C grep -q '[[:cntrl:]]'; then
        fail "a control byte on stderr"
    elif [ "$expected" = 2 ] && [ -s out.txt ]; then
        fail "a refusal that printed on stdout"
    else
        printf 'ok   %s -> %s: %s' "$command" "$status" "$(cat err)"
        echo
    fi
done <<ROWS
$table
ROWS
echo "$rows rows, $failures failed"
[ "$rows" -gt 0 ] && [ "$failures" -eq 0 ]
