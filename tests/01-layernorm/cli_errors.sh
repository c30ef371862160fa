#!/bin/sh
# The layernorm program on bad input: each case must print nothing on
# stdout, exactly one line "layernorm: error: ..." on stderr, and exit 2.
# Good invocations must exit 0, and --save / --load must round-trip.
set -u
program=../../chapters/01-layernorm/layernorm
checks=0 failed=0
out=$(mktemp) err=$(mktemp) dir=$(mktemp -d)
trap 'rm -f "$out" "$err"; rm -rf "$dir"' EXIT

fail() {
    failed=$((failed + 1))
    echo "FAIL: $*"
    sed 's/^/    stdout: /' "$out"
    sed 's/^/    stderr: /' "$err"
}

# reject ARGS...: status 2, empty stdout, one stderr line naming the program
reject() {
    checks=$((checks + 1))
    "$program" "$@" > "$out" 2> "$err"
    status=$?
    if [ $status -ne 2 ] || [ -s "$out" ] || [ "$(wc -l < "$err")" -ne 1 ] ||
       ! grep -q '^layernorm: error: ' "$err"; then
        fail "layernorm $* (status $status): expected status 2 and one error line"
    fi
}

# accept ARGS...: status 0, something on stdout, nothing on stderr
accept() {
    checks=$((checks + 1))
    "$program" "$@" > "$out" 2> "$err"
    status=$?
    if [ $status -ne 0 ] || [ ! -s "$out" ] || [ -s "$err" ]; then
        fail "layernorm $* (status $status): expected status 0 and output"
    fi
}

# A .npy file by hand: npy FILE DESCR SHAPE DATA_BYTES (header padded to 128 bytes)
npy() {
    printf '\223NUMPY\001\000\166\000%-117s\n' "{'descr': '$2', 'fortran_order': False, 'shape': $3, }" > "$1"
    head -c "$4" /dev/zero >> "$1"
}

reject --d 0
reject --d -5
reject --n 0
reject --n -1
reject --n abc
reject --n 12x
reject --d 1e3
reject --n 100000 --d 100000
reject --eps 0
reject --eps -1e-5
reject --eps nan
reject --eps abc
reject --seed -1
reject --frobnicate
reject positional
reject --n
reject --kernel 4
reject --kernel 1
reject --quick
reject --results r.md
reject --commit abc
reject --gradcheck --edge-cases
reject --bench --complexity
reject --failure
reject --failure bogus
reject --gradcheck --save "$dir"
reject --markdown=yes

# .npy input: a missing directory, another dtype, shapes that do not fit.
reject --load /nonexistent-directory
accept --n 3 --d 5 --save "$dir/good"
if [ ! -s "$dir/good/dx.npy" ]; then
    checks=$((checks + 1)); fail "--save wrote no dx.npy"
fi
accept --load "$dir/good"
mkdir -p "$dir/f64" "$dir/shape" "$dir/empty"
cp "$dir/good/"*.npy "$dir/f64/"
npy "$dir/f64/x.npy" '<f8' '(3, 5)' 120
reject --load "$dir/f64"
cp "$dir/good/"*.npy "$dir/shape/"
npy "$dir/shape/gamma.npy" '<f4' '(4,)' 16
reject --load "$dir/shape"
cp "$dir/good/"*.npy "$dir/shape/"
npy "$dir/shape/dy.npy" '<f4' '(3, 6)' 72
reject --load "$dir/shape"
cp "$dir/good/"*.npy "$dir/empty/"
npy "$dir/empty/x.npy" '<f4' '(0, 5)' 0
reject --load "$dir/empty"
printf 'not a numpy file' > "$dir/empty/x.npy"
reject --load "$dir/empty"

accept --help
accept --n 7 --d 13
accept --complexity --markdown
accept --cache-memory
accept --failure zero-variance
accept --failure rsqrt

# --gpu: the validation where a GPU is, else one line and status 2.
checks=$((checks + 1))
"$program" --gpu --n 8 --d 8 > "$out" 2> "$err"
status=$?
if [ $status -eq 0 ]; then
    :
elif [ $status -ne 2 ] || [ -s "$out" ] || [ "$(wc -l < "$err")" -ne 1 ] ||
     ! grep -q -e 'no CUDA device' -e 'built without CUDA' "$err"; then
    fail "layernorm --gpu (status $status): expected success, or status 2 and one line saying why"
fi

echo "$checks checks, $failed failed"
[ $failed -eq 0 ]
