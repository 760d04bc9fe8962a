# SPDX-License-Identifier: MIT
# Sourced by the shell unit tests: check DESCRIPTION GOT WANTED prints
# "ok: DESCRIPTION", or "FAIL: ..." with both values and sets fail=1; the
# test ends with exit "$fail".
fail=0
check() {
    if [ "$2" = "$3" ]; then
        echo "ok: $1"
    else
        echo "FAIL: $1: got '$2', wanted '$3'"
        fail=1
    fi
}
