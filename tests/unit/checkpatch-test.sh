#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every file that would go to QEMU (the device, its qtests, include/arctic)
# is clean under QEMU's checkpatch.pl, but for the warnings
# scripts/checkpatch-allow accepts with a reason.
exec "$(dirname "$0")/../../scripts/checkpatch"
