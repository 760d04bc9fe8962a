#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The qtest reproducer of the stale receive headers (docs/guest.md):
# cluster/2-nodes-stream, three copies at once (link thread twice, rings
# once) so that two cores are oversubscribed, RUNS times each.  Before the
# header stores were single stores it failed about 1 run in 30 here.
# Needs QTEST_QEMU_BINARY, ARCTIC_SWITCH_BINARY and the test binary as $1;
# ARCTIC_STREAM_RUNS sets RUNS (default 30).
set -uo pipefail

case "${1:-}" in
    -h|--help|"")
        echo "usage: $0 ARCTIC-NIU-TEST-BINARY   (env: QTEST_QEMU_BINARY," \
             "ARCTIC_SWITCH_BINARY, ARCTIC_STREAM_RUNS=30)"
        [ -n "${1:-}" ]; exit $? ;;
esac
test_bin=$1
runs=${ARCTIC_STREAM_RUNS:-30}
out=$(mktemp -d /tmp/arctic-stream-loop.XXXXXX)

loop() {
    local link=$1 tag=$2 i fails=0
    for i in $(seq 1 "$runs"); do
        if ! ARCTIC_NIU_TEST_LINK=$link timeout 600 "$test_bin" --tap -k \
                -p /x86_64/arctic-niu/cluster/2-nodes-stream \
                > "$out/$tag-$i.log" 2>&1; then
            fails=$((fails + 1))
            echo "$tag run $i FAILED: $(grep -a -m1 'ERROR' "$out/$tag-$i.log")"
        else
            rm -f "$out/$tag-$i.log"
        fi
    done
    echo "$fails" > "$out/$tag.fails"
}

loop thread a & loop thread b & loop rings c &
wait
failed=$(( $(cat "$out/a.fails") + $(cat "$out/b.fails") + $(cat "$out/c.fails") ))
total=$((3 * runs))
echo "$((total - failed)) passed, $failed failed (logs of failed runs in $out)"
[ "$failed" -eq 0 ] && rm -rf "$out"
[ "$failed" -eq 0 ]
