#!/bin/sh
# The layernorm program on bad input: each case must print nothing on
# stdout, exactly one line "layernorm: error: ..." on stderr, and exit 2.
# Good invocations must exit 0, and --save / --load must round-trip.
set -u
. ../cli-checks.sh
cli_program ../../chapters/02-layernorm/layernorm

# A .npy file by hand: npy FILE DESCR SHAPE DATA_BYTES (header padded to 128 bytes)
npy() {
    printf '\223NUMPY\001\000\166\000%-117s\n' "{'descr': '$2', 'fortran_order': False, 'shape': $3, }" > "$1"
    head -c "$4" /dev/zero >> "$1"
}

rejects --d 0
rejects --d -5
rejects --n 0
rejects --n -1
rejects --n abc
rejects --n 12x
rejects --d 1e3
rejects --n 100000 --d 100000
rejects --eps 0
rejects --eps -1e-5
rejects --eps nan
rejects --eps abc
rejects --seed -1
rejects --frobnicate
rejects positional
rejects --n
rejects --kernel 4
rejects --kernel 1
rejects --quick
rejects --results r.md
rejects --commit abc
rejects --gradcheck --edge-cases
rejects --bench --complexity
rejects --failure
rejects --failure bogus
rejects --gradcheck --save "$scratch"
rejects --markdown=yes

# .npy input: a missing directory, another dtype, shapes that do not fit.
rejects --load /nonexistent-directory
accepts --n 3 --d 5 --save "$scratch/good"
if [ ! -s "$scratch/good/dx.npy" ]; then
    checks=$((checks + 1)); fail "--save wrote no dx.npy"
fi
accepts --load "$scratch/good"
mkdir -p "$scratch/f64" "$scratch/shape" "$scratch/empty"
cp "$scratch/good/"*.npy "$scratch/f64/"
npy "$scratch/f64/x.npy" '<f8' '(3, 5)' 120
rejects --load "$scratch/f64"
cp "$scratch/good/"*.npy "$scratch/shape/"
npy "$scratch/shape/gamma.npy" '<f4' '(4,)' 16
rejects --load "$scratch/shape"
cp "$scratch/good/"*.npy "$scratch/shape/"
npy "$scratch/shape/dy.npy" '<f4' '(3, 6)' 72
rejects --load "$scratch/shape"
cp "$scratch/good/"*.npy "$scratch/empty/"
npy "$scratch/empty/x.npy" '<f4' '(0, 5)' 0
rejects --load "$scratch/empty"
printf 'not a numpy file' > "$scratch/empty/x.npy"
rejects --load "$scratch/empty"

accepts --help
accepts --n 7 --d 13
accepts --complexity --markdown
accepts --cache-memory
accepts --failure zero-variance
accepts --failure rsqrt

# --gpu: the validation where a GPU is, else one line and status 2.
runs_on_gpu_or_says_why --gpu --n 8 --d 8

cli_finish
