#!/bin/sh
# The cancellation program on bad input: each case must print nothing on
# stdout, exactly one line "cancellation: error: ..." on stderr, and exit 2
# (1 for a file it cannot write). --help and a few good invocations must
# exit 0.
set -u
program=../../chapters/01-cancellation/cancellation
checks=0 failed=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

fail() {
    failed=$((failed + 1))
    echo "FAIL: $*"
    sed 's/^/    stdout: /' "$out"
    sed 's/^/    stderr: /' "$err"
}

# stops STATUS ARGS...: that status, empty stdout, one stderr line naming the program
stops() {
    expected=$1
    shift
    checks=$((checks + 1))
    "$program" "$@" > "$out" 2> "$err"
    status=$?
    if [ $status -ne "$expected" ] || [ -s "$out" ] || [ "$(wc -l < "$err")" -ne 1 ] ||
       ! grep -q '^cancellation: error: ' "$err"; then
        fail "cancellation $* (status $status): expected status $expected and one error line"
    fi
}

# Bad input is a usage error: status 2.
reject() {
    stops 2 "$@"
}

# accept ARGS...: status 0, something on stdout, nothing on stderr
accept() {
    checks=$((checks + 1))
    "$program" "$@" > "$out" 2> "$err"
    status=$?
    if [ $status -ne 0 ] || [ ! -s "$out" ] || [ -s "$err" ]; then
        fail "cancellation $* (status $status): expected status 0 and output"
    fi
}

reject --bogus
reject positional
reject --n
reject --n -3
reject --n 0
reject --n 1
reject --n abc
reject --n 12x
reject --n 1e3
reject --n 10000001
reject --offset abc
reject --offset nan
reject --offset inf
reject --offset -inf
reject --offset 1e31
reject --offset ''
reject --precision half
reject --precision ''
reject --seed -1
reject --markdown=yes
reject --bench --gpu
reject --offset-sweep --layernorm-demo
reject --offset-sweep --blocked-sweep
reject --theory-data a.dat --derivative-data b.dat
# A file that cannot be written is not the user's syntax: status 1, as in common/.
stops 1 --theory-data /nonexistent-directory/x.dat

accept --help
accept --n 2
accept --offset 1e20
accept --n 2 --offset=-1e4 --precision=float
accept --offset-sweep --precision float --n 64 --markdown
accept --blocked-sweep --precision float --n 64 --markdown

# --gpu: the comparison where a GPU is, else exactly one line and status 2.
checks=$((checks + 1))
"$program" --gpu > "$out" 2> "$err"
status=$?
if [ $status -eq 0 ]; then
    :
elif [ $status -ne 2 ] || [ -s "$out" ] || [ "$(wc -l < "$err")" -ne 1 ] ||
     ! grep -q -e 'no CUDA device' -e 'built without CUDA' "$err"; then
    fail "cancellation --gpu (status $status): expected success, or status 2 and one line saying why"
fi

echo "$checks checks, $failed failed"
[ $failed -eq 0 ]
