#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every file that would go to QEMU (the device, its qtests, include/arctic)
# is clean under QEMU's checkpatch.pl, and the guest driver under the
# kernel's checkpatch.pl --strict, but for the warnings
# scripts/checkpatch-allow accepts with a reason.  First, that each
# checker does catch what it should: a file of each kind with a fault only
# that checker reports must fail.
set -uo pipefail
checkpatch="$(dirname "$0")/../../scripts/checkpatch"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/guest/driver" "$tmp/hw"

# The kernel's --strict: braces around one statement, which QEMU's style
# asks for and the kernel's refuses, and a comparison with NULL.
cat >"$tmp/guest/driver/bad.c" <<'C'
// SPDX-License-Identifier: GPL-2.0
int g(int *p)
{
	if (p == NULL) {
		return 0;
	}
	return *p;
}
C
# QEMU's: a tab where QEMU indents with spaces ("ERROR: code indent
# should never use tabs").
cat >"$tmp/hw/bad.c" <<'C'
/* SPDX-License-Identifier: GPL-2.0-or-later */
int g(void)
{
	return 1;
}
C
for f in "$tmp/guest/driver/bad.c" "$tmp/hw/bad.c"; do
    if out=$("$checkpatch" "$f" 2>&1); then
        echo "FAIL: scripts/checkpatch passed $f:"
        echo "$out"
        exit 1
    fi
    echo "caught, as it should: $(echo "$out" | head -n 1)"
done
exec "$checkpatch"
