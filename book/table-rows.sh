#!/bin/sh
# The rows of a table that a chapter quotes:
#     sh ../../book/table-rows.sh REGEX COMMAND [ARGUMENTS...]
# runs the command and prints the lines of its output that match REGEX
# (extended). When the command prints no Markdown table at all (a build
# without CUDA, or without the machine code the instruction budget needs),
# its own one-line explanation is printed instead. When it prints a table
# and no line matches, the build fails: a row the prose quotes has gone.
set -eu
pattern=$1
shift
output=$("$@")
if ! printf '%s\n' "$output" | grep -q '^[|]'; then
    printf '%s\n' "$output"
    exit 0
fi
printf '%s\n' "$output" | grep -E "$pattern" ||
    { echo "table-rows.sh: no line of '$*' matches $pattern" >&2; exit 1; }
