#!/bin/sh
# Every page of the book, as a reader's browser lays it out:
#   test_pages.sh CHROMIUM HTML_DIR CHECK_JS FRAME_HTML
# loads each HTML_DIR/*.html (all of them, so a page added later is checked
# too) in headless Chromium at a reader's width and at a phone's, runs
# CHECK_JS in it (check-page.js says what it checks, and what is acceptable;
# FRAME_HTML holds the page at the width to check),
# and prints each problem on one line: page, width, element, what is wrong.
# Exit 0 if there is none, 1 if there is any, 2 (with a "skipped:" line)
# where no Chromium is installed (CHROMIUM empty: ./configure found none).
set -u
browser=$1
html_dir=$2
check_js=$3
frame_html=$4
WIDTHS="900 420"

if [ -z "$browser" ] || ! [ -x "$browser" ]; then
    echo "skipped: no chromium installed (Debian's chromium package; run ./configure again after installing it), so the pages were not checked in a browser"
    exit 2
fi

# Chromium writes a profile, caches and crash reports: all of it in a
# directory of its own under /tmp, removed at the end.
scratch=$(mktemp -d /tmp/book-pages.XXXXXX) || exit 1
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/pages" "$scratch/home"
export HOME="$scratch/home" XDG_CONFIG_HOME="$scratch/home" XDG_CACHE_HOME="$scratch/home"
# As root Chromium refuses to start in its sandbox.
sandbox=
if [ "$(id -u)" = 0 ]; then sandbox=--no-sandbox; fi

# A copy of every page with the check at the end of its body; copies of all
# of them, side by side, so that links between pages resolve as in book/html.
cp "$check_js" "$scratch/pages/check-page.js"
cp "$frame_html" "$scratch/pages/frame.html"
pages=0
for page in "$html_dir"/*.html; do
    [ -e "$page" ] || continue
    sed 's|</body>|<script src="check-page.js"></script></body>|' "$page" > "$scratch/pages/${page##*/}"
    pages=$((pages + 1))
done
if [ "$pages" -eq 0 ]; then
    echo "no pages in $html_dir"
    exit 1
fi

failed=0
for page in "$html_dir"/*.html; do
    page=${page##*/}
    for width in $WIDTHS; do
        dom="$scratch/dom.html"
        timeout 120 "$browser" --headless $sandbox --disable-gpu --no-first-run \
            --user-data-dir="$scratch/profile" --allow-file-access-from-files \
            --window-size="$((width + 100)),1100" --virtual-time-budget=15000 \
            --dump-dom "file://$scratch/pages/frame.html?page=$page&width=$width" \
            > "$dom" 2> "$scratch/browser.log"
        # The result block, unescaped from HTML.
        sed -n '/<pre id="book-check">/,/<\/pre>/p' "$dom" \
            | sed 's|<pre id="book-check">||; s|</pre>.*||; s|&lt;|<|g; s|&gt;|>|g; s|&quot;|"|g; s|&amp;|\&|g' \
            > "$scratch/result"
        if ! grep -q '^checked ' "$scratch/result"; then
            echo "$page	${width}px	page	the check did not run (Chromium said:)"
            sed 's/^/    /' "$scratch/browser.log" | tail -5
            failed=1
            continue
        fi
        if grep -q '^problem	' "$scratch/result"; then
            grep '^problem	' "$scratch/result" | cut -f2-
            failed=1
        fi
        grep '^checked ' "$scratch/result"
    done
done
exit $failed
