#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/lib.sh arctic_run_dir_of and arctic_run_pids: a test finds its
# own cluster's processes by the run directory its niu-cluster printed,
# never another cluster's.  Two stand-in "clusters" run at once, each a
# process whose command line names its own run directory as QEMU's does
# (-qmp unix:DIR/node0.qmp); each lookup must give exactly its own.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

base=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$base"' EXIT
. "$(dirname "$0")/check.sh"

one=$base/arctic-cluster.aB3xYz
two=$base/arctic-cluster.aB3xYzz        # one's name is a prefix of it
mkdir "$one" "$two"
# Stand-ins for two clusters' QEMUs: one process each, whose command line
# holds QEMU's arguments.
stand_in() {
    python3 -c 'import time; time.sleep(60)' qemu-system-x86_64 \
        -qmp "unix:$1/node0.qmp,server=on" </dev/null >/dev/null 2>&1 &
    pids+=($!)
}
stand_in "$one"
stand_in "$two"
sleep 0.2

printf '%s\n' "==> starting arctic-switch (-s $one/switch.sock -c $one/control.sock -n 4)" \
    '[node 0] ARCTIC-RESULT node=0 status=0' >"$base/out"
check "the run directory is read from niu-cluster's output" \
    "$(arctic_run_dir_of "$base/out")" "$one"
# A lookup, and on a mismatch what each process found is (a test that
# failed once in the unit suite, with one process too many, unexplained).
lookup() {
    local found
    found=$(arctic_run_pids "$1" | tr '\n' ' ')
    if [ "$found" != "$2" ]; then
        # shellcheck disable=SC2086  # the PIDs, a word each
        ps -o pid=,ppid=,args= -p ${found:-0} | sed 's/^/found: /' >&2 || true
    fi
    echo "$found"
}
check "the first cluster's lookup finds its process alone" \
    "$(lookup "$one" "${pids[0]} ")" "${pids[0]} "
check "the second cluster's lookup finds its process alone" \
    "$(arctic_run_pids "$two" | tr '\n' ' ')" "${pids[1]} "
kill "${pids[0]}"
wait "${pids[0]}" 2>/dev/null || true
check "a cluster that ended has no process left" \
    "$(arctic_run_pids "$one" | wc -l)" 0
check "while the other's is still found" \
    "$(arctic_run_pids "$two" | tr '\n' ' ')" "${pids[1]} "
exit "$fail"
