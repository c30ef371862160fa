#!/bin/sh
# The cancellation program's command line: the table of subcommands and its
# --help, each subcommand's own options (an option of another one is bad
# input), bad input refused with one line "cancellation SUB: error: ..." and
# status 2 (1 for a file that cannot be written), a full disk noticed, and a
# few good invocations of each subcommand.
set -u
. ../cli-checks.sh
cli_program ../../chapters/01-cancellation/cancellation

commands='show offset-sweep blocked-sweep theory-data layernorm-demo merge-demo derivative derivative-data bench
gpu-check gpu-bench gpu-results'

# printed PATTERN: the last run printed a line matching PATTERN (a grep regex).
printed() {
    checks=$((checks + 1))
    grep -q -e "$1" "$out" || fail "no line matching '$1'"
}

# writes FILE ARGS...: status 0, nothing on stdout or stderr, and FILE written.
writes() {
    file=$1
    shift
    run_program "$@"
    if [ $status -ne 0 ] || [ -s "$out" ] || [ -s "$err" ] || [ ! -s "$file" ]; then
        fail "$name $* (status $status): expected status 0, no output, and $file written"
    fi
}

# keeps_on_failed_write FILE ARGS...: with writes failing after 2 KiB (a
# file-size limit, its signal ignored so that write() fails instead), status
# 1, one error line, and FILE (made before) as it was, with no partial file
# beside it.
keeps_on_failed_write() {
    file=$1
    shift
    echo "the older file" > "$file"
    checks=$((checks + 1))
    (trap '' XFSZ; ulimit -f 4; exec "$program" "$@") > "$out" 2> "$err"
    status=$?
    if [ $status -ne 1 ] || ! is_one_error_line || [ "$(cat "$file")" != "the older file" ] ||
       [ -n "$(find "$(dirname "$file")" -name '*.partial')" ]; then
        fail "$name $* (status $status): expected status 1, one error line, and $file as it was"
    fi
}

# The table: --help lists every subcommand, one line each.
accepts --help
for command in $commands; do
    printed "^  $command  "
done
accepts help

# Every subcommand explains itself; without CUDA the GPU ones say so instead.
for command in $commands; do
    name="cancellation $command"
    case $command in
    gpu-check | gpu-bench) runs_on_gpu_or_says_why "$command" --help ;;
    *)
        accepts "$command" --help
        printed "^cancellation $command: "
        ;;
    esac
done
name=cancellation
# Each default is stated once, by the option table.
accepts show --help
printed '^  --n <int>  *values in the data set (default 4096)$'
accepts theory-data --help
printed "^  --output <text>  *the file to write (default 'offset-error.dat')$"

rejects_saying 'no command given (see cancellation --help)'
rejects_saying "unknown command 'bogus' (see cancellation --help)" bogus
rejects_saying "unknown command 'positional' (see cancellation --help)" positional
# The old mode flags are options no more.
rejects_saying "'--offset-sweep': give a command first (see cancellation --help)" --offset-sweep
rejects_saying "'--n': give a command first (see cancellation --help)" --n 2 show
fails_writing --help

name='cancellation show'
rejects_saying "unknown option '--bogus' (see --help)" show --bogus
rejects_saying "unexpected argument 'positional' (options start with --; see --help)" show positional
rejects_saying '--n expects a value' show --n
rejects_saying "--n expects an integer in [2, 10000000], got '-3'" show --n -3
rejects show --n 0
rejects show --n 1
rejects show --n abc
rejects show --n 12x
rejects show --n 1e3
rejects show --n 10000001
rejects show --offset abc
rejects show --offset nan
rejects show --offset inf
rejects show --offset -inf
rejects_saying "--offset expects a finite decimal number in [-1e+30, 1e+30], got '1e31'" show --offset 1e31
rejects show --offset ''
rejects_saying "--precision expects float or double, got 'half'" show --precision half
rejects show --precision ''
rejects show --seed -1
rejects_saying "--markdown takes no value, got 'yes'" show --markdown=yes
accepts show --n 2
accepts show --offset 1e20
accepts show --n 2 --offset=-1e4 --precision=float
fails_writing show
fails_writing show --help

# An option of another subcommand is refused like any unknown one.
name='cancellation offset-sweep'
rejects_saying "unknown option '--offset' (see --help)" offset-sweep --offset 1e4
rejects_saying "unknown option '--layernorm-demo' (see --help)" offset-sweep --layernorm-demo
rejects offset-sweep --blocked-sweep
rejects_saying "--precision expects float or double, got 'half'" offset-sweep --precision half
accepts offset-sweep --precision float --n 64 --markdown
fails_writing offset-sweep --precision float --n 64

name='cancellation blocked-sweep'
rejects blocked-sweep --n 1
rejects blocked-sweep --offset 1e4
accepts blocked-sweep --precision float --n 64 --markdown

# The figure data go to a file; one that cannot be written is not the
# user's syntax: status 1, as in common/.
name='cancellation theory-data'
rejects_saying "unknown option '--derivative-data' (see --help)" theory-data --output a.dat --derivative-data b.dat
rejects_saying "unknown option '--markdown' (see --help)" theory-data --markdown
rejects theory-data --n 0
rejects theory-data --n 1000001
rejects theory-data --output ''
rejects_with 1 theory-data --output /nonexistent-directory/x.dat
writes "$scratch/theory.dat" theory-data --n 64 --output "$scratch/theory.dat"
keeps_on_failed_write "$scratch/theory.dat" theory-data --output "$scratch/theory.dat"
rejects_with 1 theory-data --n 64 --output /dev/full

name='cancellation derivative-data'
rejects derivative-data --n 64
rejects_with 1 derivative-data --output /nonexistent-directory/x.dat
writes "$scratch/derivative.dat" derivative-data --output "$scratch/derivative.dat"
keeps_on_failed_write "$scratch/derivative.dat" derivative-data --output "$scratch/derivative.dat"

name='cancellation layernorm-demo'
rejects_saying "unknown option '--precision' (see --help)" layernorm-demo --precision float
rejects layernorm-demo --n 1
accepts layernorm-demo --n 64

name='cancellation merge-demo'
rejects merge-demo --precision float
rejects merge-demo --offset nan
accepts merge-demo --n 64 --offset 1e4
# Two values that round to one double: a variance of 0, an error relative to
# it undefined, said in words in the sentence as in the table.
accepts merge-demo --n 2 --offset 1e20
printed "relative error undefined\."
fails_writing merge-demo --n 64

name='cancellation derivative'
rejects_saying "unknown option '--seed' (see --help)" derivative --seed 2
accepts derivative
fails_writing derivative

name='cancellation bench'
rejects_saying "unknown option '--n' (see --help)" bench --n 64
rejects_saying "unknown option '--gpu' (see --help)" bench --gpu
rejects bench --seed -1

name='cancellation gpu-results'
rejects gpu-results --markdown
accepts gpu-results --file "$scratch/none.md"
rejects gpu-results --file /proc/self/mem
rejects_saying "--goals: this chapter sets no GPU goals" gpu-results --goals

# A record that holds no kernel, or does not read: refused (in a build
# without CUDA, --record is no option: refused too).
name='cancellation gpu-resources'
: > "$scratch/empty.resources"
rejects gpu-resources --record "$scratch/empty.resources"
rejects gpu-resources --record /proc/self/mem
# A record named with --record is read where it was named: the error line
# says what is wrong with it, and no hint about where the program runs.
if ! grep -q "unknown option '--record'" "$err"; then
    grep -q 'read error' "$err" || fail "cancellation gpu-resources --record /proc/self/mem should say 'read error'"
    grep -q "give --record" "$err" && fail "cancellation gpu-resources --record FILE should not suggest giving --record"
fi

# The GPU subcommands: the work where a GPU is, else exactly one line and
# status 2; bad input is refused either way.
name='cancellation gpu-check'
rejects gpu-check --markdown
rejects gpu-check --seed -1
runs_on_gpu_or_says_why gpu-check
name='cancellation gpu-bench'
rejects gpu-bench --n 64
rejects gpu-bench --results ''
runs_on_gpu_or_says_why gpu-bench --quick --results "$scratch/gpu-results.md"

cli_finish
