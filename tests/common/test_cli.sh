#!/bin/sh
# Drive cli_demo with good and bad arguments. Good ones must print the parsed
# values; every bad one must print nothing on stdout, exactly one line
# "cli_demo: error: ..." on stderr, and exit with status 2.
set -u
checks=0 failed=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

fail() {
    failed=$((failed + 1))
    echo "FAIL: $*"
    sed 's/^/    stdout: /' "$out"
    sed 's/^/    stderr: /' "$err"
}

# accept EXPECTED_STDOUT ARGS...: exit 0, stdout as expected, stderr empty
accept() {
    expected=$1
    shift
    checks=$((checks + 1))
    ./cli_demo "$@" > "$out" 2> "$err"
    status=$?
    if [ $status -ne 0 ] || [ "$(cat "$out")" != "$expected" ] || [ -s "$err" ]; then
        fail "cli_demo $* (status $status): expected '$expected'"
    fi
}

# reject EXPECTED_MESSAGE ARGS...: exit 2, stdout empty, stderr exactly
# "cli_demo: error: EXPECTED_MESSAGE"
reject() {
    expected="cli_demo: error: $1"
    shift
    checks=$((checks + 1))
    ./cli_demo "$@" > "$out" 2> "$err"
    status=$?
    if [ $status -ne 2 ] || [ -s "$out" ] || [ "$(wc -l < "$err")" -ne 1 ] || [ "$(cat "$err")" != "$expected" ]; then
        fail "cli_demo $* (status $status): expected status 2 and '$expected'"
    fi
}

default='n=1000 x=0.5 name=demo verbose=0'
accept "$default"
accept 'n=5 x=0.5 name=demo verbose=0' --n 5
accept 'n=5 x=0.5 name=demo verbose=0' --n=5
accept 'n=2 x=0.5 name=demo verbose=0' --n 2
accept 'n=100000000 x=0.5 name=demo verbose=0' --n 100000000
accept 'n=7 x=0.5 name=demo verbose=0' --n=+7
accept 'n=1000 x=100000000 name=demo verbose=0' --x 1e8
accept 'n=1000 x=-3.5 name=demo verbose=0' --x -3.5
accept 'n=1000 x=-3.5 name=demo verbose=0' --x=-3.5
accept 'n=1000 x=-10 name=demo verbose=0' --x -10
accept 'n=1000 x=0.5 name=hello world verbose=0' --name 'hello world'
accept 'n=1000 x=0.5 name=a=b verbose=0' --name=a=b
accept 'n=1000 x=0.5 name=demo verbose=1' --verbose
accept 'n=9 x=2 name=last verbose=1' --n 3 --x 1 --name first --n 9 --verbose --x 2 --name last --verbose

reject "unknown option '--m' (see --help)" --m 3
reject "unknown option '--nn' (see --help)" --nn=3
reject "unknown option '--' (see --help)" --
reject "unexpected argument 'extra' (options start with --; see --help)" extra
reject "unexpected argument '-n' (options start with --; see --help)" -n 5
reject "unexpected argument '7' (options start with --; see --help)" --verbose 7
reject "--n expects a value" --n
reject "--n expects a value" --n --verbose
reject "--verbose takes no value, got '1'" --verbose=1
reject "--verbose takes no value, got ''" --verbose=
reject "--n expects an integer in [2, 100000000], got 'abc'" --n abc
reject "--n expects an integer in [2, 100000000], got '12x'" --n 12x
reject "--n expects an integer in [2, 100000000], got '1.5'" --n 1.5
reject "--n expects an integer in [2, 100000000], got '1e3'" --n 1e3
reject "--n expects an integer in [2, 100000000], got ''" --n=
reject "--n expects an integer in [2, 100000000], got ' 5'" --n ' 5'
reject "--n expects an integer in [2, 100000000], got '-3'" --n -3
reject "--n expects an integer in [2, 100000000], got '1'" --n 1
reject "--n expects an integer in [2, 100000000], got '100000001'" --n 100000001
reject "--n expects an integer in [2, 100000000], got '99999999999999999999'" --n 99999999999999999999
reject "--x expects a finite number in [-10, 1e+09], got 'abc'" --x abc
reject "--x expects a finite number in [-10, 1e+09], got '1.5junk'" --x 1.5junk
reject "--x expects a finite number in [-10, 1e+09], got 'nan'" --x nan
reject "--x expects a finite number in [-10, 1e+09], got 'inf'" --x inf
reject "--x expects a finite number in [-10, 1e+09], got '1e999'" --x 1e999
reject "--x expects a finite number in [-10, 1e+09], got '1e-400'" --x 1e-400
reject "--x expects a finite number in [-10, 1e+09], got '2e9'" --x 2e9
reject "--x expects a finite number in [-10, 1e+09], got '-10.5'" --x -10.5
reject "--name expects a non-empty value" --name=
reject "--name expects a value" --name

# --help: exit 0, the summary, then one line per option with its default,
# wherever --help stands and whatever else is there.
expected_help='cli_demo: parse options and print them
  --n <int>      number of samples (default 1000)
  --x <number>   a value (default 0.5)
  --name <text>  a label (default '"'demo'"')
  --verbose      say more (default off)
  --help         print this help and exit'
for args in "--help" "--n 5 --help" "--bogus --help"; do
    checks=$((checks + 1))
    # shellcheck disable=SC2086 # split the arguments on purpose
    ./cli_demo $args > "$out" 2> "$err"
    status=$?
    if [ $status -ne 0 ] || [ "$(cat "$out")" != "$expected_help" ] || [ -s "$err" ]; then
        fail "cli_demo $args (status $status)"
        echo "$expected_help" | sed 's/^/    expected: /'
    fi
done

echo "$checks checks, $failed failed"
[ $failed -eq 0 ]
