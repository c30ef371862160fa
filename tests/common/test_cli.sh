#!/bin/sh
# Drive cli_demo with good and bad arguments. Good ones must print the parsed
# values; every bad one must print nothing on stdout, exactly one line
# "cli_demo: error: ..." on stderr, and exit with status 2.
set -u
. ../cli-checks.sh
cli_program ./cli_demo

default='n=1000 x=0.5 t=1 name=demo verbose=0'
accepts_printing "$default"
accepts_printing 'n=5 x=0.5 t=1 name=demo verbose=0' --n 5
accepts_printing 'n=5 x=0.5 t=1 name=demo verbose=0' --n=5
accepts_printing 'n=2 x=0.5 t=1 name=demo verbose=0' --n 2
accepts_printing 'n=100000000 x=0.5 t=1 name=demo verbose=0' --n 100000000
accepts_printing 'n=7 x=0.5 t=1 name=demo verbose=0' --n=+7
accepts_printing 'n=1000 x=100000000 t=1 name=demo verbose=0' --x 1e8
accepts_printing 'n=1000 x=-3.5 t=1 name=demo verbose=0' --x -3.5
accepts_printing 'n=1000 x=-3.5 t=1 name=demo verbose=0' --x=-3.5
accepts_printing 'n=1000 x=-10 t=1 name=demo verbose=0' --x -10
accepts_printing 'n=1000 x=0.5 t=1 name=hello world verbose=0' --name 'hello world'
accepts_printing 'n=1000 x=0.5 t=1 name=a=b verbose=0' --name=a=b
accepts_printing 'n=1000 x=0.5 t=1 name=demo verbose=1' --verbose
accepts_printing 'n=9 x=2 t=1 name=last verbose=1' --x 2 --name last --n 9 --verbose
accepts_printing 'n=1000 x=9.9998886718268301e-321 t=1 name=demo verbose=0' --x 1e-320

rejects_saying "unknown option '--m' (see --help)" --m 3
rejects_saying "unknown option '--nn' (see --help)" --nn=3
rejects_saying "unknown option '--' (see --help)" --
rejects_saying "unexpected argument 'extra' (options start with --; see --help)" extra
rejects_saying "unexpected argument '-n' (options start with --; see --help)" -n 5
rejects_saying "unexpected argument '7' (options start with --; see --help)" --verbose 7
rejects_saying "--n expects a value" --n
rejects_saying "--n expects a value" --n --verbose
rejects_saying "--verbose takes no value, got '1'" --verbose=1
rejects_saying "--verbose takes no value, got ''" --verbose=
rejects_saying "--n expects an integer in [2, 100000000], got 'abc'" --n abc
rejects_saying "--n expects an integer in [2, 100000000], got '12x'" --n 12x
rejects_saying "--n expects an integer in [2, 100000000], got '1.5'" --n 1.5
rejects_saying "--n expects an integer in [2, 100000000], got '1e3'" --n 1e3
rejects_saying "--n expects an integer in [2, 100000000], got ''" --n=
rejects_saying "--n expects an integer in [2, 100000000], got ' 5'" --n ' 5'
rejects_saying "--n expects an integer in [2, 100000000], got '-3'" --n -3
rejects_saying "--n expects an integer in [2, 100000000], got '1'" --n 1
rejects_saying "--n expects an integer in [2, 100000000], got '100000001'" --n 100000001
rejects_saying "--n expects an integer in [2, 100000000], got '99999999999999999999'" --n 99999999999999999999
rejects_saying "--x expects a finite decimal number in [-10, 1e+09], got 'abc'" --x abc
rejects_saying "--x expects a finite decimal number in [-10, 1e+09], got '1.5junk'" --x 1.5junk
rejects_saying "--x expects a finite decimal number in [-10, 1e+09], got 'nan'" --x nan
rejects_saying "--x expects a finite decimal number in [-10, 1e+09], got 'inf'" --x inf
rejects_saying "--x expects a finite decimal number in [-10, 1e+09], got '1e999'" --x 1e999
rejects_saying "--x: '1e-400' is too small for a double: it would become 0" --x 1e-400
# Decimal only, as the integers are: strtod would also read hexadecimal.
rejects_saying "--x expects a finite decimal number in [-10, 1e+09], got '0x1p3'" --x 0x1p3
# A range open at its lower end says so, and refuses the end itself.
accepts_printing 'n=1000 x=0.5 t=10 name=demo verbose=0' --t 10
accepts_printing 'n=1000 x=0.5 t=9.8813129168249309e-324 name=demo verbose=0' --t 1e-323
rejects_saying "--t expects a finite decimal number in (0, 10], got '0'" --t 0
rejects_saying "--t expects a finite decimal number in (0, 10], got '-0'" --t -0
rejects_saying "--help takes no value, got 'x'" --help=x
# An error line is as long as its message: the reason after a long value is kept.
long_value=$(printf 'v%.0s' $(seq 3000))
rejects_saying "--x expects a finite decimal number in [-10, 1e+09], got '$long_value'" --x "$long_value"
rejects_saying "--n is given twice" --n 3 --x 1 --n 9
rejects_saying "--name is given twice" --name=first --name last
rejects_saying "--verbose is given twice" --verbose --verbose
rejects_saying "--x expects a finite decimal number in [-10, 1e+09], got '2e9'" --x 2e9
rejects_saying "--x expects a finite decimal number in [-10, 1e+09], got '-10.5'" --x -10.5
rejects_saying "--name expects a non-empty value" --name=
rejects_saying "--name expects a value" --name
# Options whose default is a "not given" marker: given, they print.
accepts_printing "$default
seed=0 p=0.25 label=x" --seed 0 --p 0.25 --label x
rejects_saying "--p expects a finite decimal number in (0, 1], got '0'" --p 0

# --help: exit 0, the summary, then one line per option with its default,
# wherever --help stands and whatever else is there.
expected_help='cli_demo: parse options and print them
  --n <int>       number of samples (default 1000)
  --x <number>    a value (default 0.5)
  --t <number>    a value above 0 (default 1)
  --name <text>   a label (default '"'demo'"')
  --verbose       say more (default off)
  --seed <int>    a seed (optional)
  --p <number>    a probability (optional)
  --label <text>  a second label (optional)
  --help          print this help and exit'
for args in "--help" "--n 5 --help" "--bogus --help"; do
    checks=$((checks + 1))
    # shellcheck disable=SC2086 # split the arguments on purpose
    "$program" $args > "$out" 2> "$err"
    status=$?
    if [ $status -ne 0 ] || [ "$(cat "$out")" != "$expected_help" ] || [ -s "$err" ]; then
        fail "cli_demo $args (status $status)"
        echo "$expected_help" | sed 's/^/    expected: /'
    fi
done

cli_finish
