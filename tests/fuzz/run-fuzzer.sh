#!/bin/sh
# SPDX-License-Identifier: MIT
# Run a libFuzzer target for a bounded time from its seed corpus, writing
# new inputs to a scratch directory (never into the source tree).
# Usage: run-fuzzer.sh FUZZER SEED_DIR SECONDS
set -eu
fuzzer=$(readlink -f "$1") seeds=$(readlink -f "$2") seconds=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/arctic-fuzz-XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
exec "$fuzzer" -max_total_time="$seconds" -runs=100000000 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 "$work" "$seeds"
