#!/bin/sh
# The book's gradient-check tables against the program's full one (--all),
# for both norms: every check in one of the two, and in bold exactly the row
# of each check that used the largest share of its tolerance, found here from
# the full table by awk rather than by the program's own code.
set -u
. ../cli-checks.sh
cli_program ../../chapters/02-layernorm/layernorm

# KIND GRADIENT SHARE of each row of a Markdown table, the check's name cut
# to its kind ("complex step", without ", every element"); the header and
# rule rows left out. The full table has 9 columns, the book's 5 and 7.
rows() {
    awk -F'|' '
        function trim(s) { gsub(/^ +| +$/, "", s); gsub(/\*\*/, "", s); return s }
        $2 ~ /^ *(check|:-)/ || NF < 7 { next }
        NF == 11 { kind = trim($2); sub(/, .*/, "", kind); print kind "|" trim($4) "|" trim($8) "|" trim($3) }
        NF == 7 { print trim($2) "|" trim($4) "|" trim($6) "|" trim($3) }
        NF == 9 { print trim($2) "|" trim($3) "|" trim($6) "|directions" }' "$1"
}

# KIND|GRADIENT|SHARE of the row of each check with the largest share: the
# full table's check names tell the checks apart (every element and random
# directions of the same kind).
worst_of_each_check() {
    awk -F'|' '
        function trim(s) { gsub(/^ +| +$/, "", s); return s }
        $2 ~ /^ *(check|:-)/ || NF != 11 { next }
        { check = trim($2); share = trim($8); value = share + 0
          if (!(check in best) || value > best[check]) { best[check] = value; row[check] = trim($4) "|" share } }
        END { for (c in row) { kind = c; sub(/, .*/, "", kind); print kind "|" row[c] } }' "$1" | sort
}

for norm in layer rms; do
    name="layernorm gradcheck --norm $norm"
    run_program gradcheck --norm $norm --all --markdown
    [ $status -eq 0 ] || fail "--all: status $status"
    cp "$out" "$scratch/all.md"
    run_program gradcheck --norm $norm --markdown
    [ $status -eq 0 ] || fail "book tables: status $status"
    cp "$out" "$scratch/book.md"

    full=$(rows "$scratch/all.md" | cut -d'|' -f1-3 | sort)
    book=$(rows "$scratch/book.md" | cut -d'|' -f1-3 | sort)
    [ -n "$full" ] && [ "$full" = "$book" ] || fail "the book's tables do not hold the checks of --all:
$full
---
$book"
    expected=$(worst_of_each_check "$scratch/all.md")
    grep -F '**' "$scratch/book.md" > "$scratch/bold.md"
    bold=$(rows "$scratch/bold.md" | cut -d'|' -f1-3 | sort)
    checks=$((checks + 1))
    [ -n "$expected" ] && [ "$expected" = "$bold" ] || fail "bold is not the worst row of each check:
expected
$expected
got
$bold"
done
cli_finish
