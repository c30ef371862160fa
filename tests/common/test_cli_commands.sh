#!/bin/sh
# Drive cli_commands_demo: the subcommand table, its --help, the error lines
# that name the subcommand, and the exit status of a failed write.
set -u
. ../cli-checks.sh
cli_program ./cli_commands_demo

accepts_printing 'line 0
line 1' show --n 2
accepts show --help
grep -q '^cli_commands_demo show: print --n lines$' "$out" || fail "show --help does not start with its summary"
accepts --help
grep -q '^  show  *print --n lines$' "$out" || fail "--help does not list show"
grep -q '^  exit  *exit with --status$' "$out" || fail "--help does not list exit"
accepts help
rejects_saying "help takes nothing after it, got 'show' (a command's options: cli_commands_demo COMMAND --help)" help show
rejects_saying "--help takes nothing after it, got '--junk' (a command's options: cli_commands_demo COMMAND --help)" --help --junk
run_program exit --status 1
[ $status -eq 1 ] || fail "exit --status 1 returned $status"

rejects_saying "no command given (see cli_commands_demo --help)"
rejects_saying "unknown command 'shw' (see cli_commands_demo --help)" shw
rejects_saying "'--n': give a command first (see cli_commands_demo --help)" --n 2 show
# Inside a subcommand, the error line names it.
name='cli_commands_demo show'
rejects_saying "unknown option '--status' (see --help)" show --status 1
rejects_saying "--n expects an integer in [1, 100], got '0'" show --n 0
fails_writing show --n 100
fails_writing show --help
name=cli_commands_demo
fails_writing --help

# An error line stays one line, whatever it quotes.
escape=$(printf '\033')
rejects_saying "unknown command 'x\\x1b[2J' (see cli_commands_demo --help)" "x${escape}[2J"

# The results files: shown when there, a note when missing, refused (not
# read without end, not silently empty) when not a regular file.
name='cli_commands_demo results'
printf 'device: a GPU\n' > "$scratch/results.md"
accepts_printing 'device: a GPU' results --file "$scratch/results.md"
accepts results --file "$scratch/missing.md"
grep -q '^No results recorded yet' "$out" || fail "a missing results file is not reported as missing"
rejects_saying "$scratch: not a regular file" results --file "$scratch"
rejects_saying "/dev/zero: not a regular file" results --file /dev/zero
fails_writing results --file "$scratch/results.md"

cli_finish
