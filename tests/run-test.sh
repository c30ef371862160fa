#!/bin/sh
# Run one test and write its log, ending with a line PASS, FAIL or SKIP.
#   run-test.sh LOG COMMAND [ARGS...]
#   run-test.sh --skip REASON LOG        (a test that cannot run in this build)
# Exit codes of test programs: 0 pass, 1 fail, 2 waived. A waived test must
# also have printed a line starting "skipped:", so that a crash or a usage
# error that happens to exit 2 is counted as a failure, not a skip.
# This script itself always exits 0: the summary decides.
set -u
if [ "$1" = --skip ]; then
    printf 'skipped: %s\nSKIP\n' "$2" > "$3"
    exit 0
fi
log=$1
shift
# Leak checks on; the CUDA runtime needs the shadow-memory gap unprotected.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:protect_shadow_gap=0:abort_on_error=0}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS UBSAN_OPTIONS
# --foreground: without it timeout makes its own process group, which fails under tup.
timeout --foreground 1200 "$@" > "$log" 2>&1
status=$?
if [ $status -eq 0 ]; then
    verdict=PASS
elif [ $status -eq 2 ] && grep -q '^skipped:' "$log"; then
    verdict=SKIP
else
    verdict=FAIL
    if [ $status -eq 124 ]; then echo "timed out after 1200 s" >> "$log"; fi
    echo "exit status $status" >> "$log"
fi
echo $verdict >> "$log"
exit 0
