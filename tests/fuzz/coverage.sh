#!/bin/sh
# The line coverage of common/npy.c that a fuzzing run reaches; not a test,
# a measurement (for the figure a closing note or the README quotes).
#   sh tests/fuzz/coverage.sh [SECONDS]      from the top of a built tree
# Fuzzes for SECONDS (default 30) from the seeds, as `tup test` does, keeping
# the corpus; then runs that corpus through a build instrumented for
# source-based coverage and prints llvm-cov's report for common/npy.c.
set -eu
seconds=${1:-30}
top=$(pwd)
work=$(mktemp -d /tmp/fuzz_npy_coverage.XXXXXX)
trap 'rm -rf "$work"' EXIT
sources="tests/fuzz/fuzz_npy.c common/npy.c common/alloc.c common/files.c common/cli.c"
flags="-std=c11 -g -O1 -D_POSIX_C_SOURCE=200809L -I$top"
tests/fuzz/make_npy_seeds "$work/seeds" > /dev/null
mkdir "$work/corpus"
tests/fuzz/fuzz_npy -max_total_time="$seconds" -max_len=8192 -print_final_stats=1 "$work/corpus" "$work/seeds" 2>&1 |
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec)'
# shellcheck disable=SC2086
clang $flags -fsanitize=fuzzer -fprofile-instr-generate -fcoverage-mapping $sources -o "$work/covered" -lm
LLVM_PROFILE_FILE="$work/npy.profraw" "$work/covered" -runs=0 "$work/corpus" "$work/seeds" > /dev/null 2>&1
llvm-profdata merge -sparse "$work/npy.profraw" -o "$work/npy.profdata"
llvm-cov report "$work/covered" -instr-profile="$work/npy.profdata" common/npy.c
