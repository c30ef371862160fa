#!/bin/sh
# Fuzz the .npy reader for a bounded time (FUZZ_SECONDS, 30 s): libFuzzer
# mutates the seed corpus that make_npy_seeds writes, and fuzz_npy checks
# every input (see fuzz_npy.c). Passes when libFuzzer ends its run with no
# finding; a finding fails the test and the log shows the input's bytes.
set -u
seconds=${FUZZ_SECONDS:-30}
work=$(mktemp -d /tmp/fuzz_npy_run.XXXXXX)
trap 'rm -rf "$work"' EXIT
./make_npy_seeds "$work/seeds" || exit 1
mkdir "$work/corpus"
./fuzz_npy -max_total_time="$seconds" -timeout=10 -max_len=8192 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work/corpus" "$work/seeds" > "$work/fuzz.log" 2>&1
status=$?
# The summary libFuzzer prints at the end: executions, their rate, the corpus.
grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)|^Done ' "$work/fuzz.log"
if [ $status -ne 0 ]; then
    tail -n 40 "$work/fuzz.log"
    for artifact in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
        [ -e "$artifact" ] || continue
        echo "input of the finding, ${artifact##*/}:"
        od -A d -t x1 "$artifact" | head -n 64
    done
    echo "libFuzzer exit status $status"
    exit 1
fi
