#!/bin/sh
# kv_cache's command line: the subcommands and their --help; bad input, which
# must print nothing on stdout, exactly one line "kv_cache SUB: error: ..."
# on stderr naming the problem, and exit 2; and output that cannot be written.
set -u
. ../cli-checks.sh
cli_program ../../chapters/04-kv-cache/kv_cache

commands="generate verify cost waste waste-data bench bench-formats attend block-diagram layout-diagram cow-demo prefix-demo preempt-demo
accuracy memory tokens-data gpu-check gpu-bench gpu-results"

accepts --help
for command in $commands; do
    grep -q "^  $command  " "$out" || fail "kv_cache --help should list $command"
done
for command in $commands; do
    name="kv_cache $command"
    if [ "$command" = gpu-check ] || [ "$command" = gpu-bench ]; then
        # Without CUDA these refuse everything, --help included.
        runs_on_gpu_or_says_why "$command" --help
    else
        accepts "$command" --help
        grep -q "^$name: " "$out" || fail "$name --help should start with its summary"
    fi
done
name=kv_cache
accepts generate --help
grep -q -- "--block-size <int> .*(default 16)" "$out" || fail "kv_cache generate --help should list --block-size"

rejects_saying "no command given (see kv_cache --help)"
rejects_saying "unknown command 'gpu' (see kv_cache --help)" gpu
rejects_saying "'--verify': give a command first (see kv_cache --help)" --verify

name="kv_cache generate"
rejects_mentioning "--bogus" generate --bogus
rejects_mentioning "--layers" generate --layers abc
rejects_mentioning "--layers" generate --layers 3x
rejects_mentioning "--block-size" generate --block-size 0
rejects_mentioning "--block-size" generate --block-size -4
name="kv_cache accuracy"
rejects_mentioning "--head-dim 2 is too small" accuracy --head-dim 2
name="kv_cache preempt-demo"
rejects_mentioning "--block-size 3 is too small" preempt-demo --block-size 3
accepts preempt-demo --block-size 4
name="kv_cache generate"
rejects_mentioning "multiple of --kv-heads" generate --heads 6 --kv-heads 4
rejects_mentioning "even" generate --head-dim 15
rejects_mentioning "longer than the model's maximum" generate --prompt-len 3000
rejects_mentioning "need 2099 positions" generate --prompt-len 2000 --new-tokens 100
rejects_mentioning "larger than the vocabulary" generate --top-k 500
rejects_mentioning "--temperature" generate --temperature -1
rejects_mentioning "--vocab" generate --vocab 3
# Options of other subcommands.
rejects_saying "unknown option '--quick' (see --help)" generate --quick
rejects_saying "unknown option '--markdown' (see --help)" generate --markdown
rejects_saying "unexpected argument 'verify' (options start with --; see --help)" generate verify

name="kv_cache verify"
rejects_mentioning "at least 381" verify --max-len 200
rejects_saying "unknown option '--prompt-len' (see --help)" verify --prompt-len 5
rejects_saying "unknown option '--top-k' (see --help)" verify --top-k 5
# Every claim holds ("NO" in none), and the status says so: a claim that
# fails is status 1 (test_claims_status). At block size 1 a pool of 40
# blocks held 40 positions, less than one prefix-cached request needs.
for block_size in 16 1; do
    accepts verify --block-size $block_size
    grep -q -w NO "$out" && fail "$name --block-size $block_size: expected every claim to hold"
done
# The other quick runs that print a verdict.
name=kv_cache
for run in preempt-demo "generate --prompt-len 64 --new-tokens 16" "cost --prompt-len 64 --new-tokens 16"; do
    # shellcheck disable=SC2086 # $run is the subcommand and its options
    accepts $run
    grep -q -w NO "$out" && fail "kv_cache $run: expected every claim to hold"
done
name="kv_cache cost"
rejects_saying "unknown option '--block-size' (see --help)" cost --block-size 16
# A prefill of 2^20 positions would take about a day: the length is capped.
rejects cost --prompt-len 16385 --max-len 20000
name="kv_cache generate"
rejects generate --new-tokens 16385 --max-len 20000
name="kv_cache cow-demo"
rejects_mentioning "at least 381" cow-demo --max-len 200
# Blocks of one position are always full: nothing to share or copy.
rejects_mentioning "at least 2" cow-demo --block-size 1
rejects_mentioning "larger than the vocabulary" cow-demo --vocab 30

name="kv_cache accuracy"
rejects_mentioning "--int4-group must be 32 or 64" accuracy --int4-group 48
rejects_mentioning "--int4-group" accuracy --int4-group 0
rejects_mentioning "needs --max-len of at least 320" accuracy --max-len 100
rejects_saying "unknown option '--memory' (see --help)" accuracy --memory
name="kv_cache memory"
rejects_saying "unknown option '--int4-group' (see --help)" memory --int4-group 32
rejects_saying "--context expects an integer in [1, 16777216], got '0'" memory --context 0

name="kv_cache bench"
rejects_saying "unknown option '--formats' (see --help)" bench --formats
rejects_saying "unknown option '--results' (see --help)" bench --results out.md
name="kv_cache bench-formats"
rejects_saying "unknown option '--commit' (see --help)" bench-formats --commit abc123
name="kv_cache waste"
rejects_mentioning "--requests" waste --requests 0
name="kv_cache waste-data"
rejects_saying "unknown option '--markdown' (see --help)" waste-data --markdown
name="kv_cache tokens-data"
rejects_saying "unexpected argument 'memory' (options start with --; see --help)" tokens-data memory

name="kv_cache attend"
rejects_mentioning "q.npy" attend --load /nonexistent-directory --save "$scratch"
rejects_saying "give both --load DIR and --save DIR" attend --load "$scratch"
rejects_saying "give both --load DIR and --save DIR" attend --save "$scratch"
rejects_saying "unknown option '--block-size' (see --help)" attend --load "$scratch" --save "$scratch" --block-size 8
rejects_saying "--fp8-scales expects tensor or head, got 'layer'" attend --load "$scratch" --save "$scratch" --fp8-scales layer

name="kv_cache gpu-results"
rejects_saying "--file expects a value" gpu-results --file
rejects_saying "unknown option '--results' (see --help)" gpu-results --results gpu-results.md
# In a build without CUDA, gpu-check and gpu-bench refuse everything alike.
name="kv_cache gpu-check"
rejects gpu-check --bench
name="kv_cache gpu-bench"
rejects gpu-bench --formats
rejects gpu-bench --results
name="kv_cache gpu-check"
runs_on_gpu_or_says_why gpu-check
name=kv_cache

accepts memory
if ! grep -q "Llama-3.1-405B" "$out"; then
    fail "kv_cache memory should list the real models"
fi
accepts memory --all
if [ "$(grep -c '^Mistral-7B ' "$out")" -ne 6 ]; then
    fail "kv_cache memory --all should list every model in all six tables"
fi
accepts memory --context 32768
if ! grep -q "sequences of 32768 tokens" "$out"; then
    fail "kv_cache memory --context 32768 should give the batch at that context"
fi
accepts gpu-results --file "$scratch/none.md"
if ! grep -q "No results recorded yet" "$out"; then
    fail "kv_cache gpu-results on a missing file should say there are none"
fi
# The chapter's prose reads the verdicts off the committed results file:
# only float32 meets the goal. A file that changes that must change the prose.
accepts gpu-results --goals --file ../../chapters/04-kv-cache/gpu-results.md
if [ "$(grep -c '| met ' "$out")" != 1 ] || ! grep -qE '^\| float32 .*\| met ' "$out" ||
    [ "$(grep -c '| missed' "$out")" != 6 ]; then
    fail "the committed results no longer give the verdicts the chapter states"
fi

# The chapter's first exercise: greedy continuations of one prompt write the
# same key and value into the shared slot, so writing it in place changes
# nothing: no token in bold, every error 0.
name="kv_cache cow-demo"
accepts cow-demo --temperature 0
grep -q '\*\*' "$out" && fail "kv_cache cow-demo --temperature 0 should show no differing token"
[ "$(grep -c ' 0\.0e+00$' "$out")" = 6 ] || fail "kv_cache cow-demo --temperature 0 should show an error of 0 in all six rows"
grep -q '^written in place: continuation 0 matches its run alone; continuation 1 matches its run alone$' "$out" ||
    fail "kv_cache cow-demo --temperature 0 should say that both continuations written in place match their runs alone"
# Sampling, as the chapter runs it: copy-on-write holds (its claim, which
# sets the exit status), and the shared block written in place shows the
# bug in the first continuation only.
accepts cow-demo
grep -q 'bit-identical to its run alone: yes$' "$out" || fail "kv_cache cow-demo should say copy-on-write holds"
grep -q '^written in place: continuation 0 differs from its run alone from token [0-9]* on; continuation 1 matches its run alone$' "$out" ||
    fail "kv_cache cow-demo should say that only the first continuation written in place differs"

name="kv_cache block-diagram"
rejects_mentioning "--after" block-diagram --after both
rejects_mentioning "partly full" block-diagram --prompt 8 --block-size 4
rejects_mentioning "--blocks" block-diagram --prompt 30 --block-size 4 --blocks 8
# The figures are the block manager's state: after the fork no copy, after
# both continuations wrote exactly one, and A (which wrote first) no longer
# shares its last block while B does not need to.
accepts block-diagram --after fork
[ "$(grep -c 'copy' "$out")" = 0 ] || fail "kv_cache block-diagram --after fork should draw no copy"
grep -q '2 users' "$out" || fail "kv_cache block-diagram --after fork should show blocks with two users"
accepts block-diagram --after writes
[ "$(grep -c 'label="copy"' "$out")" = 1 ] || fail "kv_cache block-diagram --after writes should draw one copy"
[ "$(grep -c '1 user<' "$out")" = 2 ] || fail "kv_cache block-diagram --after writes should show the old last block and its copy with one user each"

# The layout figure's offsets are kv_quant.h's: at the defaults (INT4, blocks
# of 4, 2 kv heads of 64 channels, a scale per 32) a head's part is 4 rows of
# 32 bytes, then 4 x 2 scales of 2 bytes: 144 bytes, a block 288.
name="kv_cache layout-diagram"
rejects_mentioning "--head-dim" layout-diagram --head-dim 6
accepts layout-diagram
grep -q 'physical block 1<BR/><FONT POINT-SIZE="8">bytes 288&#8211;575' "$out" ||
    fail "kv_cache layout-diagram should put physical block 1 at bytes 288-575"
grep -q 'fp16 scales<BR/><FONT POINT-SIZE="8">bytes 560&#8211;575' "$out" ||
    fail "kv_cache layout-diagram should put the scales of block 1, head 1 at bytes 560-575"

for command in memory waste-data gpu-results block-diagram layout-diagram; do
    name="kv_cache $command"
    fails_writing "$command"
done
name="kv_cache generate"
fails_writing generate --prompt-len 4 --new-tokens 2
fails_writing generate --help
name=kv_cache
fails_writing --help

cli_finish
