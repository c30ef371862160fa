#!/bin/sh
# Summarise test logs: print the log of every failing test, one line per
# skipped test, then "N passed, N failed, N skipped". Exit 1 if any failed.
#   summarize.sh OUTPUT LOG...
set -u
out=$1
shift
passed=0 failed=0 skipped=0
for log in "$@"; do
    name=$(basename "$log" .log)
    verdict=$(tail -n 1 "$log")
    case $verdict in
        PASS) passed=$((passed + 1)) ;;
        SKIP) skipped=$((skipped + 1))
              echo "skipped $name: $(grep -m 1 '^skipped:' "$log" | sed 's/^skipped: *//')" ;;
        *) failed=$((failed + 1))
           echo "---- FAILED $name ($log) ----"
           cat "$log"
           echo "---- end of $name ----" ;;
    esac
done
summary="$passed passed, $failed failed, $skipped skipped"
echo "$summary"
echo "$summary" > "$out"
[ $failed -eq 0 ]
