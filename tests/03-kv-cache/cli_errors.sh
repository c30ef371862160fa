#!/bin/sh
# Bad input to kv_cache: every case must print nothing on stdout, exactly one
# line "kv_cache: error: ..." on stderr naming the problem, and exit 2.
set -u
. ../cli-checks.sh
cli_program ../../chapters/03-kv-cache/kv_cache

rejects_mentioning "--bogus" --bogus
rejects_mentioning "--layers" --layers abc
rejects_mentioning "--layers" --layers 3x
rejects_mentioning "--block-size" --block-size 0
rejects_mentioning "--block-size" --block-size -4
rejects_mentioning "multiple of --kv-heads" --heads 6 --kv-heads 4
rejects_mentioning "even" --head-dim 15
rejects_mentioning "longer than the model's maximum" --prompt-len 3000
rejects_mentioning "need 2099 positions" --prompt-len 2000 --new-tokens 100
rejects_mentioning "choose one of" --verify --cost
rejects_mentioning "--bench only" --quick
rejects_mentioning "larger than the vocabulary" --top-k 500
rejects_mentioning "--temperature" --temperature -1
rejects_mentioning "--vocab" --vocab 3
rejects_mentioning "at least 381" --verify --max-len 200
rejects_mentioning "q.npy" --attend /nonexistent-directory

accepts --help
if ! grep -q -- "--block-size" "$out"; then
    fail "kv_cache --help should list the options"
fi

cli_finish
