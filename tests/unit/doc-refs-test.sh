#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every cross-reference of the form "NAME.md §N" or "NAME.md §N.M" anywhere
# in the tree (docs, code comments, scripts, tests) names a document in
# docs/ (or the README) that has a heading numbered N or N.M, and every
# "docs/<name>.md" names a file that exists.  A document that is split,
# renumbered or removed cannot leave a reference behind it.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
fail=0
checked=0
files=$(git ls-files 2>/dev/null || find . -type f -not -path './build/*' -not -path './.git/*')
[ -n "$files" ] || { echo "FAIL: no files to read"; exit 1; }

doc_path() {
    if [ -f "docs/$1" ]; then echo "docs/$1"
    elif [ -f "$1" ]; then echo "$1"
    fi
}

while IFS= read -r hit; do
    [ -n "$hit" ] || continue
    where=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; ref=${rest#*:}
    name=${ref%% *}; name=${name%,}
    sec=${ref##*§}
    doc=$(doc_path "$name")
    checked=$((checked + 1))
    if [ -z "$doc" ]; then
        echo "FAIL: $where:$line refers to $name, which does not exist"
        fail=1
        continue
    fi
    re="^#+ ${sec//./\\.}(\\.|[[:space:]])"
    if ! grep -Eq "$re" "$doc"; then
        echo "FAIL: $where:$line refers to $name §$sec, which has no such section"
        fail=1
    fi
done < <(grep -noE '[A-Za-z-]+\.md,? §[0-9]+(\.[0-9]+)*' $files 2>/dev/null)

while IFS= read -r hit; do
    [ -n "$hit" ] || continue
    where=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; ref=${rest#*:}
    checked=$((checked + 1))
    if [ ! -f "$ref" ]; then
        echo "FAIL: $where:$line names $ref, which does not exist"
        fail=1
    fi
done < <(grep -noE 'docs/[A-Za-z0-9_-]+\.md' $files 2>/dev/null)

if [ "$checked" -lt 20 ]; then
    echo "FAIL: only $checked references found: the pattern no longer matches"
    fail=1
fi
[ "$fail" = 0 ] && echo "ok: $checked documentation references resolve"
exit "$fail"
