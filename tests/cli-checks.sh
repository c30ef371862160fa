# Checks of a program's command line, shared by the cli test scripts:
#
#     . ../cli-checks.sh
#     cli_program ../../chapters/01-cancellation/cancellation
#     rejects --n -3          # status 2, nothing on stdout, ONE line "<name>: error: ..." on stderr
#     accepts --help          # status 0, something on stdout, nothing on stderr
#     cli_finish              # prints "N checks, M failed"; the script's exit status
#
# $out and $err hold the last run's stdout and stderr; $scratch is a private
# directory removed at exit. Sourced, not run: POSIX sh.

# A program that misbehaves by writing without end (reading /dev/zero, say)
# fails its check at 64 MiB instead of filling the disk.
ulimit -f 131072

checks=0 failed=0
out=$(mktemp) err=$(mktemp) scratch=$(mktemp -d)
trap 'rm -rf "$out" "$err" "$scratch"' EXIT

# cli_program PATH: the program every check below runs.
cli_program() {
    program=$1
    name=$(basename "$1")
}

fail() {
    failed=$((failed + 1))
    echo "FAIL: $*"
    sed 's/^/    stdout: /' "$out"
    sed 's/^/    stderr: /' "$err"
}

run_program() {
    checks=$((checks + 1))
    "$program" "$@" > "$out" 2> "$err"
    status=$?
}

# The shape of every refusal: nothing on stdout, exactly one line on stderr,
# and that line names the program.
is_one_error_line() {
    [ ! -s "$out" ] && [ "$(wc -l < "$err")" -eq 1 ] && grep -q "^$name: error: " "$err"
}

# rejects_with STATUS ARGS...: a refusal with that exit status.
rejects_with() {
    expected=$1
    shift
    run_program "$@"
    if [ $status -ne "$expected" ] || ! is_one_error_line; then
        fail "$name $* (status $status): expected status $expected and one error line"
    fi
}

# rejects ARGS...: bad input is a usage error, status 2.
rejects() {
    rejects_with 2 "$@"
}

# rejects_saying MESSAGE ARGS...: status 2 and exactly "<name>: error: MESSAGE".
rejects_saying() {
    message="$name: error: $1"
    shift
    run_program "$@"
    if [ $status -ne 2 ] || ! is_one_error_line || [ "$(cat "$err")" != "$message" ]; then
        fail "$name $* (status $status): expected status 2 and '$message'"
    fi
}

# rejects_mentioning TEXT ARGS...: status 2 and one error line that contains TEXT.
rejects_mentioning() {
    text=$1
    shift
    run_program "$@"
    if [ $status -ne 2 ] || ! is_one_error_line || ! grep -q -F -- "$text" "$err"; then
        fail "$name $* (status $status): expected status 2 and one error line mentioning '$text'"
    fi
}

# accepts ARGS...: status 0, something on stdout, nothing on stderr.
accepts() {
    run_program "$@"
    if [ $status -ne 0 ] || [ ! -s "$out" ] || [ -s "$err" ]; then
        fail "$name $* (status $status): expected status 0 and output"
    fi
}

# accepts_printing EXPECTED ARGS...: status 0, stdout exactly EXPECTED, nothing on stderr.
accepts_printing() {
    expected=$1
    shift
    run_program "$@"
    if [ $status -ne 0 ] || [ "$(cat "$out")" != "$expected" ] || [ -s "$err" ]; then
        fail "$name $* (status $status): expected '$expected'"
    fi
}

# runs_on_gpu_or_says_why ARGS...: success where a GPU is; elsewhere status 2
# and one line saying there is no device, or that CUDA was not built.
runs_on_gpu_or_says_why() {
    run_program "$@"
    if [ $status -eq 0 ]; then
        return
    fi
    if [ $status -ne 2 ] || ! is_one_error_line ||
       ! grep -q -e 'no CUDA device' -e 'built without CUDA' "$err"; then
        fail "$name $* (status $status): expected success, or status 2 and one line saying why"
    fi
}

cli_finish() {
    echo "$checks checks, $failed failed"
    [ $failed -eq 0 ]
}

# fails_writing ARGS...: with standard output on a full disk (/dev/full), the
# program must not claim success: status 1 and one line on stderr.
fails_writing() {
    checks=$((checks + 1))
    "$program" "$@" > /dev/full 2> "$err"
    status=$?
    : > "$out"
    if [ $status -ne 1 ] || ! is_one_error_line; then
        fail "$name $* > /dev/full (status $status): expected status 1 and one error line"
    fi
}
