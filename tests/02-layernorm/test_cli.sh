#!/bin/sh
# The layernorm program: its table of subcommands, each subcommand's own
# options, and bad input. A refusal prints nothing on stdout, exactly one
# line "layernorm SUB: error: ..." on stderr, and exits 2. Good invocations
# exit 0, and `apply` reads and writes the .npy files of its interface.
set -u
. ../cli-checks.sh
cli_program ../../chapters/02-layernorm/layernorm

# A .npy file by hand: npy FILE DESCR SHAPE DATA_BYTES (header padded to
# 128 bytes), its data zeros, or the float32 values that DATA_COMMAND prints.
npy() {
    printf '\223NUMPY\001\000\166\000%-117s\n' "{'descr': '$2', 'fortran_order': False, 'shape': $3, }" > "$1"
    head -c "$4" /dev/zero >> "$1"
}
npy_of() {
    printf '\223NUMPY\001\000\166\000%-117s\n' "{'descr': '<f4', 'fortran_order': False, 'shape': $2, }" > "$1"
    $3 "$4" >> "$1"
}
# COUNT float32 values 1, 2, 3, 1, 2, 3, ... (little-endian): rows that vary.
one_two_three() {
    i=0
    while [ $i -lt "$1" ]; do
        case $((i % 3)) in
        0) printf '\000\000\200\077' ;;
        1) printf '\000\000\000\100' ;;
        2) printf '\000\000\100\100' ;;
        esac
        i=$((i + 1))
    done
}

commands='run apply gradcheck edge-cases complexity cache-memory failure bench gpu-check gpu-apply gpu-bench gpu-results'

# A build with CUDA parses the GPU subcommands' options (a GPU or not); a
# build without it says so, whatever they are given.
if "$program" gpu-check --help > /dev/null 2>&1; then cuda=yes; else cuda=no; fi
without_cuda='this program was built without CUDA (./configure found no nvcc), so it has no GPU'
# gpu_rejects_saying MESSAGE ARGS...: MESSAGE with CUDA, else the line without it.
gpu_rejects_saying() {
    if [ $cuda = yes ]; then
        rejects_saying "$@"
    else
        shift
        rejects_saying "$without_cuda" "$@"
    fi
}

# The table of subcommands.
accepts --help
for sub in $commands; do
    grep -q "^  $sub  " "$out" || fail "--help does not list $sub"
done
accepts help
for sub in $commands; do
    name="layernorm $sub"
    case $cuda-$sub in
    no-gpu-check | no-gpu-apply | no-gpu-bench) rejects_saying "$without_cuda" "$sub" --help ;;
    *)
        accepts "$sub" --help
        grep -q "^layernorm $sub: " "$out" || fail "$sub --help does not start with its summary"
        ;;
    esac
done
name=layernorm
rejects_saying "no command given (see layernorm --help)"
rejects_saying "unknown command 'frobnicate' (see layernorm --help)" frobnicate
rejects_saying "'--n': give a command first (see layernorm --help)" --n 3 run
rejects_saying "'--gradcheck': give a command first (see layernorm --help)" --gradcheck
fails_writing --help

name='layernorm run'
rejects run --d 0
rejects run --d -5
rejects run --n 0
rejects run --n -1
rejects run --n abc
rejects run --n 12x
rejects run --d 1e3
rejects_saying "--n x --d = 100000 x 100000 is more than 2^28 elements" run --n 100000 --d 100000
accepts run --n 3 --d 5 --eps 0
# A positive eps below float's smallest normal number would lose digits in
# the kernels' float, or become 0 (1e-46): refused, where 1.2e-38 is taken.
rejects_mentioning "below float's smallest normal number" run --n 3 --d 5 --eps 1e-46
accepts run --n 3 --d 5 --eps 1.2e-38
rejects run --eps -1e-5
rejects run --eps inf
rejects run --eps nan
# Rows whose squares overflow float are rescaled: the check against the double reference passes.
accepts run --n 4 --d 300 --scale 1e30
# x beyond fp16's range is inf, and constant rows with eps 0 get rstd inf
# and y NaN: status 0 and the one note of the README's "Non-finite values",
# as apply gives, not FAIL lines against the reference.
for case in "--scale 1e35 --storage fp16" "--scale 0 --eps 0"; do
    # shellcheck disable=SC2086 # the case is several words
    run_program run --n 2 --d 4 $case
    if [ $status -ne 0 ] || [ "$(wc -l < "$err")" -ne 1 ] || ! grep -q "2 of 2 rows held inf or NaN" "$err" ||
       grep -q FAIL "$out"; then
        fail "run --n 2 --d 4 $case (status $status): expected status 0 and one note on non-finite rows"
    fi
done
rejects run --scale -1
rejects run --scale 1e36
rejects run --eps abc
rejects run --seed -1
rejects_saying "unknown option '--frobnicate' (see --help)" run --frobnicate
rejects_saying "unexpected argument 'positional' (options start with --; see --help)" run positional
rejects_saying "--n expects a value" run --n
# An option of another subcommand is refused like any unknown one.
rejects_saying "unknown option '--version' (see --help)" run --version 1
rejects_saying "unknown option '--quick' (see --help)" run --quick
rejects_saying "unknown option '--results' (see --help)" run --results r.md
rejects_saying "unknown option '--load' (see --help)" run --load "$scratch"
rejects_saying "unknown option '--save' (see --help)" run --save "$scratch"
accepts run --n 7 --d 13
accepts run
fails_writing run --n 3 --d 5

name='layernorm gradcheck'
rejects_saying "unknown option '--save' (see --help)" gradcheck --save "$scratch"
rejects_saying "unexpected argument 'edge-cases' (options start with --; see --help)" gradcheck edge-cases
rejects gradcheck --seed -1

name='layernorm edge-cases'
rejects_saying "--markdown takes no value, got 'yes'" edge-cases --markdown=yes

name='layernorm complexity'
accepts complexity --markdown
rejects_saying "unknown option '--n' (see --help)" complexity --n 3
fails_writing complexity

name='layernorm cache-memory'
accepts cache-memory

name='layernorm bench'
rejects_saying "unknown option '--complexity' (see --help)" bench --complexity
rejects_saying "unknown option '--commit' (see --help)" bench --commit abc

name='layernorm failure'
rejects_saying "needs --mode, one of zero-variance, huge-mean, tiny-eps, overflow, rsqrt" failure
rejects_saying "--mode expects a value" failure --mode
rejects_saying "--mode expects one of zero-variance, huge-mean, tiny-eps, overflow, rsqrt, got 'bogus'" \
    failure --mode bogus
accepts failure --mode zero-variance
accepts failure --mode rsqrt
fails_writing failure --mode overflow

# apply: exactly --load DIR --save DIR [--eps E] [--norm layer|rms].
name='layernorm apply'
rejects_mentioning "below float's smallest normal number" apply --load in --save out --eps 1e-40
mkdir -p "$scratch/good"
npy_of "$scratch/good/x.npy" '(3, 5)' one_two_three 15
npy_of "$scratch/good/gamma.npy" '(5,)' one_two_three 5
npy "$scratch/good/beta.npy" '<f4' '(5,)' 20
npy_of "$scratch/good/dy.npy" '(3, 5)' one_two_three 15
accepts apply --load "$scratch/good" --save "$scratch/out"
for result in y mean rstd dx dgamma dbeta; do
    if [ ! -s "$scratch/out/$result.npy" ]; then
        checks=$((checks + 1)); fail "apply wrote no $result.npy"
    fi
done
if [ "$(ls "$scratch/out" 2>/dev/null | wc -l)" -ne 6 ]; then
    checks=$((checks + 1)); fail "apply wrote more than the six results: $(ls "$scratch/out")"
fi
accepts apply --load "$scratch/good" --save "$scratch/out" --eps 1e-3
# --norm rms: no beta to read; y, rstd, dx, dgamma to write, and nothing else.
mkdir -p "$scratch/rms"
cp "$scratch/good/x.npy" "$scratch/good/gamma.npy" "$scratch/good/dy.npy" "$scratch/rms/"
accepts apply --norm rms --load "$scratch/rms" --save "$scratch/rms-out"
if [ "$(ls "$scratch/rms-out" 2>/dev/null | tr '\n' ' ')" != "dgamma.npy dx.npy rstd.npy y.npy " ]; then
    checks=$((checks + 1)); fail "apply --norm rms wrote $(ls "$scratch/rms-out"), not y, rstd, dx, dgamma"
fi
accepts apply --norm layer --load "$scratch/good" --save "$scratch/out"
# A long path (here 1,200 bytes, within PATH_MAX) is named whole, and the
# reason still follows it on the error line.
deep="$scratch"
for part in 1 2 3 4 5 6; do deep="$deep/$(printf 'd%.0s' $(seq 199))"; done
mkdir -p "$deep"
cp -r "$scratch/good/." "$deep/"
echo 'x,y' > "$deep/x.npy"
rejects_mentioning "$deep/x.npy: not a .npy file" apply --load "$deep" --save "$scratch/out"
rejects_saying "--norm expects one of layer, rms, got 'group'" apply --norm group --load "$scratch/good" --save "$scratch/out"
rejects apply --norm layer --load "$scratch/rms" --save "$scratch/out"
rejects_saying "needs --load DIR and --save DIR" apply --load "$scratch/good"
rejects_saying "needs --load DIR and --save DIR" apply --save "$scratch/out"
rejects_saying "needs --load DIR and --save DIR" apply
rejects_saying "unknown option '--n' (see --help)" apply --load "$scratch/good" --save "$scratch/out" --n 3
# What PyTorch accepts: eps = 0 (a constant row gets rstd inf and y NaN:
# test_npy_roundtrip checks the values), and no rows.
accepts apply --load "$scratch/good" --save "$scratch/out" --eps 0
rejects_saying "--eps expects a finite decimal number in [0, 1], got '-1e-05'" apply --load "$scratch/good" --save "$scratch/out" --eps -1e-05
rejects apply --load "$scratch/good" --save "$scratch/out" --eps nan
rejects apply --load "$scratch/good" --save "$scratch/out" --eps inf
mkdir -p "$scratch/no-rows"
npy "$scratch/no-rows/x.npy" '<f4' '(0, 5)' 0
npy "$scratch/no-rows/dy.npy" '<f4' '(0, 5)' 0
cp "$scratch/good/gamma.npy" "$scratch/good/beta.npy" "$scratch/no-rows/"
accepts apply --load "$scratch/no-rows" --save "$scratch/no-rows-out"
accepts apply --norm rms --load "$scratch/no-rows" --save "$scratch/no-rows-out"
fails_writing apply --load "$scratch/good" --save "$scratch/out"
# A directory that cannot be made: exit 1 (not the user's syntax) and one line.
run_program apply --load "$scratch/good" --save /nonexistent-directory/out
if [ $status -ne 1 ] || [ "$(wc -l < "$err")" -ne 1 ] || ! grep -q "^$name: error: /nonexistent-directory/out: cannot create the directory" "$err"; then
    fail "apply --save into a missing parent (status $status): expected status 1 and one error line"
fi

# .npy input: a missing directory, another dtype, shapes that do not fit.
rejects apply --load /nonexistent-directory --save "$scratch/out"
# rejects_input FILE DESCR SHAPE DATA_BYTES: apply refuses the good inputs
# with FILE replaced by that npy file. Copying the good ones first undoes the
# previous call's replacement, so each call breaks one file only.
mkdir -p "$scratch/bad"
rejects_input() {
    cp "$scratch/good/"*.npy "$scratch/bad/"
    npy "$scratch/bad/$1" "$2" "$3" "$4"
    rejects apply --load "$scratch/bad" --save "$scratch/out"
}
rejects_input x.npy '<f8' '(3, 5)' 120
rejects_input gamma.npy '<f4' '(4,)' 16
rejects_input dy.npy '<f4' '(3, 6)' 72
rejects_input x.npy '<f4' '(0, 5)' 0
# Rows of no columns: no mean, no rstd, nothing PyTorch would normalise over.
mkdir -p "$scratch/no-columns"
npy "$scratch/no-columns/x.npy" '<f4' '(3, 0)' 0
npy "$scratch/no-columns/dy.npy" '<f4' '(3, 0)' 0
npy "$scratch/no-columns/gamma.npy" '<f4' '(0,)' 0
npy "$scratch/no-columns/beta.npy" '<f4' '(0,)' 0
rejects_saying "$scratch/no-columns/x.npy: need at least one column, got 3 x 0" apply --load "$scratch/no-columns" --save "$scratch/out"
printf 'not a numpy file' > "$scratch/bad/x.npy"
rejects apply --load "$scratch/bad" --save "$scratch/out"

# The GPU subcommands: bad input first, then the device (or its absence).
name='layernorm gpu-check'
gpu_rejects_saying "--version expects an integer in [0, 3], got '4'" gpu-check --version 4
gpu_rejects_saying "--n x --d = 100000 x 100000 is more than 2^28 elements" gpu-check --n 100000 --d 100000
gpu_rejects_saying "unknown option '--quick' (see --help)" gpu-check --quick
runs_on_gpu_or_says_why gpu-check --n 8 --d 8
name='layernorm gpu-apply'
gpu_rejects_saying "needs --load DIR and --save DIR" gpu-apply --load "$scratch/good"
gpu_rejects_saying "unknown option '--version' (see --help)" gpu-apply --load "$scratch/good" --save "$scratch/gpu" --version 1
gpu_rejects_saying "--norm expects one of layer, rms, got 'batch'" gpu-apply --load "$scratch/good" --save "$scratch/gpu" --norm batch
runs_on_gpu_or_says_why gpu-apply --load "$scratch/good" --save "$scratch/gpu"
runs_on_gpu_or_says_why gpu-apply --load "$scratch/good" --save "$scratch/gpu-rms" --norm rms
name='layernorm gpu-bench'
gpu_rejects_saying "unknown option '--n' (see --help)" gpu-bench --n 8
gpu_rejects_saying "unknown option '--version' (see --help)" gpu-bench --version 1
gpu_rejects_saying "--results expects a value" gpu-bench --results
name='layernorm gpu-results'
accepts gpu-results --file "$scratch/none.md"
grep -q 'No results recorded yet' "$out" || fail "gpu-results does not say there are no results"
rejects_saying "unknown option '--markdown' (see --help)" gpu-results --markdown
accepts gpu-results --goals --file "$scratch/none.md"
grep -q 'No results recorded yet' "$out" || fail "gpu-results --goals does not say there are no results"
rejects_saying "$scratch: not a regular file" gpu-results --goals --file "$scratch"
# The goals of the committed results file: one verdict per goal, none lost.
accepts gpu-results --goals --file ../../chapters/02-layernorm/gpu-results.md
[ "$(grep -cE '\| (met|missed by [0-9]+ points) *\|$' "$out")" = 12 ] || fail "gpu-results --goals does not give 12 verdicts"
# The chapter's prose reads these verdicts off the file: only layer norm's
# forward pass at d = 768 and 1024 misses. A file that changes them must
# change the prose too.
[ "$(grep -c 'missed' "$out")" = 2 ] && grep -qE 'layer norm forward, d = 768 .*missed' "$out" &&
    grep -qE 'layer norm forward, d = 1024 .*missed' "$out" ||
    fail "the committed results no longer give the verdicts the chapter states"

cli_finish
