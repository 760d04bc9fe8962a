#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/qtest: one qtest by its short path runs that test alone; a
# path that names no test is an error (g_test -p would run nothing and
# say ok); a bad transport is refused.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
fail=0
say() { if [ "$1" = 0 ]; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }

if ! "$root/scripts/qtest" --list >/dev/null 2>&1; then
    echo "skip: QEMU's qtest is not built (scripts/build-qemu)"
    exit 77
fi
out=$("$root/scripts/qtest" --link thread time/stamp 2>&1)
[ "$(grep -c '^ok ' <<<"$out")" = 1 ] &&
    grep -q '^ok 1 /x86_64/arctic-niu/time/stamp$' <<<"$out"
say $? "time/stamp alone runs one test, and passes"
out=$("$root/scripts/qtest" time/no-such-test 2>&1)
[ $? != 0 ] && grep -q 'no qtest at /x86_64/arctic-niu/time/no-such-test' <<<"$out"
say $? "a path that names no test is an error"
out=$("$root/scripts/qtest" tim 2>&1)
[ $? != 0 ]
say $? "a part of a path component is no test (g_test -p matches whole ones)"
out=$("$root/scripts/qtest" --link carrier-pigeon 2>&1)
[ $? != 0 ] && grep -q 'chardev, thread or rings' <<<"$out"
say $? "an unknown transport is refused"
[ "$("$root/scripts/qtest" --list | grep -c '^/x86_64/arctic-niu/')" -ge 80 ]
say $? "--list lists the tests"
exit "$fail"
