#!/bin/sh
# Bad input to kv_cache: every case must print nothing on stdout, exactly one
# line "kv_cache: error: ..." on stderr naming the problem, and exit 2.
set -u
program=../../chapters/03-kv-cache/kv_cache
checks=0 failed=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# reject TEXT_IN_MESSAGE ARGS...
reject() {
    expected=$1
    shift
    checks=$((checks + 1))
    "$program" "$@" > "$out" 2> "$err"
    status=$?
    if [ $status -ne 2 ] || [ -s "$out" ] || [ "$(wc -l < "$err")" -ne 1 ] \
       || ! grep -q "^kv_cache: error: .*$expected" "$err"; then
        failed=$((failed + 1))
        echo "FAIL: kv_cache $* (status $status): expected status 2 and one line with '$expected'"
        sed 's/^/    stdout: /' "$out"
        sed 's/^/    stderr: /' "$err"
    fi
}

reject "--bogus" --bogus
reject "--layers" --layers abc
reject "--layers" --layers 3x
reject "--block-size" --block-size 0
reject "--block-size" --block-size -4
reject "multiple of --kv-heads" --heads 6 --kv-heads 4
reject "even" --head-dim 15
reject "longer than the model's maximum" --prompt-len 3000
reject "need 2099 positions" --prompt-len 2000 --new-tokens 100
reject "choose one of" --verify --cost
reject "--bench only" --quick
reject "larger than the vocabulary" --top-k 500
reject "--temperature" --temperature -1
reject "--vocab" --vocab 3
reject "at least 381" --verify --max-len 200
reject "q.npy" --attend /nonexistent-directory

if "$program" --help > "$out" 2> "$err" && grep -q -- "--block-size" "$out"; then
    checks=$((checks + 1))
else
    failed=$((failed + 1))
    echo "FAIL: kv_cache --help should list the options and exit 0"
fi
echo "$checks checks, $failed failed"
[ $failed -eq 0 ]
