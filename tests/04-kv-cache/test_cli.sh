#!/bin/sh
# Bad input to kv_cache: every case must print nothing on stdout, exactly one
# line "kv_cache: error: ..." on stderr naming the problem, and exit 2.
set -u
. ../cli-checks.sh
cli_program ../../chapters/04-kv-cache/kv_cache

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
rejects_mentioning "--int4-group must be 32 or 64" --accuracy --int4-group 48
rejects_mentioning "--int4-group" --int4-group 0
rejects_mentioning "choose one of" --accuracy --memory
rejects_mentioning "--accuracy needs --max-len" --accuracy --max-len 100
rejects_mentioning "--gpu goes alone" --gpu --memory
rejects_mentioning "--results and --commit go with --gpu --bench" --results out.md
rejects_mentioning "--results and --commit go with --gpu --bench" --gpu --commit abc123
rejects_mentioning "--show-results" --show-results
rejects_mentioning "--formats goes with --bench" --formats
rejects_mentioning "--formats goes with --bench" --gpu --bench --formats
runs_on_gpu_or_says_why --gpu

accepts --memory
if ! grep -q "Llama-3.1-405B" "$out"; then
    fail "kv_cache --memory should list the real models"
fi
accepts --show-results "$scratch/none.md"
if ! grep -q "No results recorded yet" "$out"; then
    fail "kv_cache --show-results on a missing file should say there are none"
fi

accepts --help
if ! grep -q -- "--block-size" "$out"; then
    fail "kv_cache --help should list the options"
fi

cli_finish
