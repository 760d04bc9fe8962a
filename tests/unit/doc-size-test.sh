#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The documents stay readable: docs/datapath.md describes the design in
# under 500 lines (run reports go to docs/figures.md, docs/scale.md or the
# commit messages, not into the design), every row of a table in README.md
# fits on one screen line (at most 160 characters: details go to the
# document the row points to), and the README keeps its picture of a
# message's path.  Usage: doc-size-test.sh [DATAPATH.md [README.md]], by
# default this tree's files.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/unit/check.sh"
datapath=${1:-$root/docs/datapath.md}
readme=${2:-$root/README.md}
max_lines=500
max_row=160

[ -s "$datapath" ] && [ -s "$readme" ] || { echo "FAIL: cannot read $datapath or $readme"; exit 1; }

lines=$(wc -l < "$datapath")
check "docs/datapath.md has fewer than $max_lines lines ($lines)" \
    "$([ "$lines" -lt "$max_lines" ] && echo yes || echo "no, $lines")" yes

rows=$(grep -c '^|' "$readme")
check "README.md has tables to measure ($rows rows)" "$([ "$rows" -gt 0 ] && echo yes)" yes
long=$(awk -v max="$max_row" '/^\|/ && length($0) > max { printf "%sline %d (%d chars)", sep, NR, length($0); sep = ", " }' "$readme")
check "every README.md table row is at most $max_row characters" "$long" ""

picture=$(awk '/^```/ { inside = !inside; next } inside' "$readme")
for word in doorbell arctic-switch DMA 'direct ring' ack; do
    check "README.md's picture of the path shows '$word'" \
        "$(grep -qiw -- "$word" <<<"$picture" && echo yes)" yes
done
exit "$fail"
