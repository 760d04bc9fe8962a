#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One integration case: run a program on a small cluster through
# scripts/niu-cluster and check what every node printed, not only the exit
# status.  Cases:
#   ping-2  niu-ping between 2 nodes launched with an idle sleep (-I
#           700): spinning (-s 0), sleeping in poll() (-s 1000), then
#           keeping the launcher's 700 us (no -s): each run says which,
#           every size reported, every echoed word checked by the
#           pinger, no wrong reply
#   spec-2  niu-spec-test (seed 002 section 3 code only, no doorbell) on
#           2 nodes after 4 s idle: 600 messages each way at both
#           priorities, all correct, and the NIUs' Tx polls parked for at
#           least 2 s of the idle time (their traces)
#   raw-2   niu-raw-test on 2 nodes: node 0 in dMPI raw mode, node 1 in
#           MPI mode, 42 messages per priority each way with every word
#           and the raw route words checked, the driver's refusals, then
#           an MPI exchange after node 0 leaves raw mode
#   driver-1  niu-driver-test on 1 node, then the module unloaded and
#           loaded again and the test repeated: error codes for bad
#           requests, route override, endpoints, sysfs counters, the
#           DMA window and a DMA request to itself, close() sending
#           what was still queued, and messages kept for the next program
#           (a full queue; a library's read-ahead given back first)
#   bw-2    niu-bw on 2 nodes with 64 lines and 32 link credits (-L, -C):
#           a bandwidth row per message size, every word checked by the
#           receiver, then remote DMA between the driver's DMA windows,
#           every word of the blocks checked
#   suite-4  niu-suite (seed 001's dmm, fft, gauss, jacobi, sort at the
#           Table 6.2 sizes) on 4 nodes: every kernel's result equal to
#           node 0's serial run, times and speedup reported; then a 4096-
#           point FFT, whose transpose goes by remote DMA
#   collectives-8  niu-coll-test on 8 nodes with 128 MB each: barrier,
#           all-to-all, broadcast from every root, reduce and allreduce,
#           active messages and a block transfer, every value checked
#   collectives-16  the same on 16 nodes (more than the host's cores):
#           every node booted before the program starts, all values right,
#           every guest given the host's TSC frequency and its clock
#           within the run's wall time
#   collectives-64 (suite 'slow')  the same on 64 nodes with 128 MB each,
#           clones of one template (docs/snapshots.md section 6; the
#           16-node case boots cold): every node ok and no node given up
#           by a peer's NIU (docs/scale.md: a full high-priority queue left
#           unread during a collective made them give up on each other)
#   direct-4  niu-coll-test on 4 nodes whose NIUs write to each other
#           through direct rings (link 1.5): every port sent 90% or more
#           of its packets that way; --no-direct keeps them in the switch
#   hosts-4  niu-coll-test on 4 nodes placed on two "hosts"
#           (--hosts, with tests/integration/local-rsh as the remote
#           shell): the guest image copied once to each, the NIUs on TCP,
#           each host choosing its nodes' idle sleep by its own node and
#           CPU counts, every console back with its prefix, every value
#           right; then a
#           second run that finds the image cached, and nothing left behind
#   switch-restart-4  the switch is killed (SIGKILL) in the middle of
#           niu-coll-test's traffic (600 rounds) and a new one started; every
#           value must still be right, and both switches must carry traffic
#   peer-dead-4  node 3's QEMU is killed (SIGKILL) in the middle of
#           niu-coll-test on 4 nodes with a 3 s peer timeout: every survivor
#           names node 3 and stops with status 3 within the timeout plus
#           a margin, a NIU says it gave up on node 3, and no QEMU is left
#   soak-4  niu-soak on 4 nodes through 1% drop, duplicate, corrupt and
#           delay on every port: 10^5 messages of both priorities and 2000
#           remote-DMA blocks around the ring, every one received once, in
#           order, every word right; the switch reports each kind of fault
#   stale-2  niu-stale-test on 2 nodes with 255 lines and 128 credits:
#           60000 messages taken by seed 002's own receive loop (no LAP
#           check), the receiver pausing so its queue fills and the NIUs
#           refuse and retry; every message right, and the refusals and
#           retransmissions really happened
#   stale-loop (suite 'slow')  scripts/niu-stale-loop: the same stream
#           ARCTIC_STALE_RUNS times (default 20) with a busy loop on one
#           host core; every run must pass (docs/guest.md, Known problems)
#   faults-4  the switch drops and duplicates 2% of packets each way;
#           niu-coll-test and three suite kernels must still be right,
#           and the switch must report that it did drop packets
#   slurm-4  niu-cluster inside a Slurm allocation (salloc -N1
#           --ntasks-per-node=2 on a one-host Slurm that
#           tests/integration/slurm-local starts, with auth/none: for
#           tests only): the host found in the allocation, two parts of two
#           nodes started as job steps, niu-coll-test right on all four,
#           no QEMU and no job step left; skipped, with the reason, where
#           Slurm cannot start
#   chain-4  40 programs in a row on 4 nodes through 15% drops: what
#           a program's library read ahead of it and never took (the next
#           program's first barrier message) is given back at close and
#           reaches the next program; every node runs all 40
#   stuck-2  a program that never ends on 2 nodes: niu-cluster times out
#           (124) and first prints each node's NIU state (scripts/niu-state
#           over QMP): links up, nothing unacknowledged, and each stream's
#           sender and receiver agreeing on epoch and sequence; the whole
#           state kept in the run directory as JSON; and a node given
#           2 s to boot fails (124), named as one that did not boot
#   develop-2  the loops of docs/developing.md on 2 nodes: a copy of the
#           driver changed and built out of the tree (scripts/guest-module),
#           a data file and a script put in a directory shared with the
#           guests (--share), both nodes booted with that module
#           (--module) running the script: the module loaded is the
#           copy's (a parameter only it has), the data read, results written back
#           to the host, niu-ping right through that driver; and gdb in
#           batch mode attached to node 1 (--gdb) reads the kernel's
#           banner at its address in a guest's kallsyms (scripts/
#           guest-symbols --kallsyms), detaches, and the program
#           still passes; then docs/developing.md's "QEMU by hand" block
#           run as printed: the node's driver test passes; last, a
#           --module that is not one: both nodes fail with status 126 and
#           the kernel's reason, and no program starts
#   snapshot-2  a 2-node cluster saved at the start barrier
#           (--save-at-start) and started from the snapshot (--from):
#           the save ends before the program, DIR holds every node and
#           cluster.json; niu-coll-test from the snapshot prints the same
#           lines as a cold run, every value right; a snapshot of another
#           PROGRAM, cluster size or image is refused with a line naming
#           the difference, timed mode is refused, a state file cut
#           short fails the run cleanly, and nothing is left;
#           prints the boot time saved
#   snapshot-running-4  a 4-node cluster cut while niu-soak runs through
#           the switch's faults (--save-after, docs/snapshots.md section
#           7): the saving run goes on to PASS on every node; restored
#           from the cut (--from, no -f) the program goes on, not anew,
#           under the faults saved with it, to every message and DMA
#           block once, in order and right; a cut after the program
#           ended saves nothing and fails the run
#   timed-snapshot-2  2 timed nodes saved at the start barrier
#           (--timed --save-at-start: each guest stops itself at its
#           NIU's TIME_CTRL.PAUSE) and started from the snapshot: niu-ping
#           prints every virtual time a cold boot's run prints
#   clone-16  16 nodes started as clones of one template
#           (--clone, docs/snapshots.md section 6) in a template cache of
#           the test's own: the first run boots and saves the template,
#           the second takes it; both run niu-coll-test with every value
#           right on every node, each node a clone of its own id, and
#           report the clones' memory; a template whose saved state was
#           cut short ends the run cleanly naming it, nothing left; two
#           timed runs of 2 clones print the same niu-ping lines;
#           prints the boot times
#   timed-2  timed mode (docs/timed-mode.md) on 2 nodes: niu-ping and
#           niu-bw right, the clock started on both, and the switch
#           routed, synchronised and granted; the report names the
#           processor (StarT's Pentium by default) and the image's hash
#           and kernel; no node powers off (the launcher ends the cluster)
#   timed-fidelity-2  scripts/niu-timed-fidelity on 2 nodes: the one-way
#           latency of every message size and the DMA bandwidth measured
#           in timed mode within 5 % of the model of the hardware
#   timed-fidelity-16 (suite 'slow')  the same on 16 nodes, across seven
#           routers, and two senders into one receiver getting half each
#   timed-determinism-4 (suite 'slow')  niu-suite in timed mode on 4
#           nodes twice, the second time with a busy loop on a host core:
#           every kernel's virtual times equal to the nanosecond, and
#           every node's console the same (its time breakdowns too)
#   timed-faults-4 (suite 'slow')  niu-soak through seeded drops,
#           duplicates and corruption in timed mode, twice: every message
#           right, and the same retransmissions, the same rates and the
#           same switch counters both times
#   timed-clock-4  niu-clock on 4 timed nodes of seed 001's processor,
#           with and without an unused kernel argument: CLOCK_MONOTONIC
#           and the NIU's TIME_NOW each fit the TSC plus one constant,
#           and a clock made 1000 ppm fast does not
#   timed-fft-4  fft on 4 timed nodes alone, alone with an unused kernel
#           argument and inside the whole suite: parallel times within 2 %
#           of each other, serial times within 0.01 %
#   timed-share-2  niu-ping run from a --share directory on 2 timed
#           nodes, twice, the second beside a busy loop: the guests get a
#           copy of the directory (no 9p), both runs print the same lines
#           to the nanosecond, and what a guest writes to /host stays in
#           it; then the same with --share given and niu-ping the image's
#   ip-4    niu0, IP over the NIU, on 4 nodes: every node pings every
#           node by name over IPv4 and IPv6; a ping to an address that
#           names no node is dropped and counted; the 7 bad messages of
#           niu-ipnet-junk on node 0's kernel endpoint each dropped and
#           counted where they must be, and node 0 still answers
#   ip-down-3  niu0 to a node whose QEMU is killed while two others ping
#           it (3 s peer timeout): no answer and no hang, each NIU's
#           giving up counted in niu0's tx_peer_dead and tx_errors, and
#           the survivors still ping each other
#   tcp-faults-2  a 2 MiB file made in the guest from a fixed seed moved
#           with busybox nc over niu0 through 1% drops, duplicates and
#           corruption: the same sha256 at both ends, retransmissions by
#           the NIUs, no bad TCP checksum
#   mpi-4  MPI programs built with Debian's mpicc run by mpiexec on 4
#           nodes over niu0 (the MPI layer): cpi with one rank on each
#           node and pi right, mpi-pingpong between two nodes with every
#           byte checked, and a job that aborts ending every node with
#           its status
#   timed-mpi-2  mpi-pingpong over niu0 on 2 timed nodes, twice, the
#           second beside a busy loop: every node's lines the same
# Exits 77 (skip) when QEMU or the guest image is not built.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/scripts/lib.sh"

case_name=${1:?usage: cluster-test.sh clone-16|ping-2|spec-2|raw-2|driver-1|bw-2|suite-4|collectives-8|collectives-16|collectives-64|direct-4|hosts-4|faults-4|switch-restart-4|peer-dead-4|soak-4|stale-2|stale-loop|chain-4|stuck-2|develop-2|slurm-4|snapshot-2|snapshot-running-4|timed-2|timed-snapshot-2|timed-fidelity-2|timed-fidelity-16|timed-determinism-4|timed-faults-4|timed-clock-4|timed-fft-4|timed-share-2|ip-4|ip-down-3|tcp-faults-2|mpi-4|timed-mpi-2}
if [ ! -r "$ARCTIC_GUEST_DIR/initramfs.cpio.gz" ] ||
   [ ! -r "$ARCTIC_GUEST_DIR/vmlinuz" ]; then
    echo "SKIP: no guest image in $ARCTIC_GUEST_DIR; run scripts/build-guest (or scripts/niu-cluster once)"
    exit 77
fi
if [ ! -r "$ARCTIC_QEMU_DIR/current-version" ]; then
    echo "SKIP: QEMU is not built; run scripts/build-qemu"
    exit 77
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
failures=0
expect() {
    local what=$1 pattern=$2 count=${3:-1} got
    got=$(grep -aEc -- "$pattern" "$out")
    if [ "$got" = "$count" ]; then
        echo "ok: $what"
    else
        echo "FAIL: $what: expected $count line(s) matching '$pattern', got $got"
        failures=$((failures + 1))
    fi
}

# "ok: $1" if the command after it succeeds, else a failure.
check() {
    local what=$1
    shift
    if "$@"; then
        echo "ok: $what"
    else
        echo "FAIL: $what"
        failures=$((failures + 1))
    fi
}

# Snapshot directory $1 holds every file named after it, not empty.
expect_snapshot_files() {
    local dir=$1 f
    shift
    for f in "$@"; do
        check "the snapshot has $f" test -s "$dir/$f"
    done
}

# Whether the numbers after $1 and $2 (a limit in percent) are all there
# and lie within that of each other (largest over smallest).
within() {
    local what=$1 limit=$2 verdict
    shift 2
    verdict=$(printf '%s\n' "$@" | awk -v want="$#" -v limit="$limit" '
        /^[0-9]+$/ && $1 > 0 { n++; if (!lo || $1 < lo) lo = $1; if ($1 > hi) hi = $1 }
        END { if (n != want) { print "missing"; exit }
              spread = (hi / lo - 1) * 100
              printf "%s %.3f", spread <= limit ? "ok" : "FAIL", spread }')
    case "$verdict" in
    ok\ *) echo "ok: $what within $limit %: $* (${verdict#ok } % apart)" ;;
    FAIL\ *) echo "FAIL: $what not within $limit %: $* (${verdict#FAIL } % apart)"
            failures=$((failures + 1)) ;;
    *) echo "FAIL: $what: not every run printed one ($*)"
       failures=$((failures + 1)) ;;
    esac
}

# The lines of file $1 that match pattern $3 (default: all), of nodes 0 to
# $2 - 1 node after node, each in its own order (nodes interleave as the
# host schedules them); QEMU's own warnings carry host times and are left
# out.  What two runs that must agree are compared by.
node_lines() {
    local file=$1 nodes=$2 keep=${3:-.} n
    for ((n = 0; n < nodes; n++)); do
        grep -aE -- "$keep" "$file" | grep -a "^\[node $n\]" |
            grep -av 'qemu-system'
    done
}

# The lines matching $3 of $2 nodes are the same in $out and in file $1,
# and there are at least $4 of them (default 1); $5 names the two runs.
same_node_lines() {
    local other=$1 nodes=$2 pattern=$3 least=${4:-1} what=$5 n
    n=$(node_lines "$out" "$nodes" "$pattern" | wc -l)
    if [ "$n" -ge "$least" ] &&
       diff <(node_lines "$out" "$nodes" "$pattern") \
            <(node_lines "$other" "$nodes" "$pattern") >"$out.diff"; then
        echo "ok: $what print the same $n lines"
    else
        echo "FAIL: $what differ (or printed $n lines, fewer than $least):"
        cat "$out.diff"
        failures=$((failures + 1))
    fi
    rm -f "$out.diff"
}

# Run niu-cluster with these arguments; its output goes to $out and here.
# niu-cluster as run_cluster, whose exit status must be $1 (then the
# options): a run that is meant to end badly.
run_cluster_expecting() {
    local want=$1 status
    shift
    "$root/scripts/niu-cluster" --no-build "$@" >"$out" 2>&1
    status=$?
    cat "$out"
    if [ "$status" = "$want" ]; then
        echo "ok: niu-cluster exited $want"
    else
        echo "FAIL: niu-cluster exited $status, not $want"
        failures=$((failures + 1))
    fi
}

run_cluster() {
    local status
    "$root/scripts/niu-cluster" --no-build -t 170 "$@" >"$out" 2>&1
    status=$?
    cat "$out"
    if [ "$status" != 0 ]; then
        echo "FAIL: niu-cluster exited $status"
        failures=$((failures + 1))
    fi
}

# Write stdin to file $1 of a temporary directory, $share, for the
# guests' /host (niu-cluster --share "$share"), removed at exit: a script
# of the case's, which niu-cluster's check of PROGRAM's commands does not
# read.
guest_script() {
    if [ -z "${share:-}" ]; then
        share=$(mktemp -d)
        trap 'rm -f "$out"; rm -rf "$share"' EXIT
    fi
    cat >"$share/$1"
}

# Run "$@" (run $1 of a pair); run 2 has a busy loop on a host core beside
# it, so that the timed cases show that the host's load changes nothing.
beside_busy_loop_if_2() {
    local run=$1 busy= status
    shift
    if [ "$run" = 2 ]; then
        (while :; do :; done) &
        busy=$!
    fi
    "$@"
    status=$?
    [ -z "$busy" ] || kill "$busy"
    return "$status"
}

# With more nodes than cores the launcher has the NIUs yield after empty
# busy polls, except on a chardev link, which cannot be polled.
yields=", empty polls yield the core"
[ "${ARCTIC_LINK:-thread}" != chardev ] || yields=
case "$case_name" in
ping-2)
    # Launched with an idle sleep (-I): spinning (-s 0), then sleeping in
    # poll() between messages (-s 1000), then the launcher's (no -s).
    # And without -L/-C, fast mode's buffers are the device's and the
    # switch's defaults, sized for the host (no --credits, 128 lines).
    lines=/sys/bus/pci/drivers/arctic_niu/0*/lines
    run_cluster -n 2 -I 700 -- "echo lines=\$(cat $lines) && niu-ping -n 100 -s 0 && niu-ping -n 100 -s 1000 && niu-ping -n 20"
    expect "fast mode leaves the switch its default credits" '^==> starting arctic-switch \(.* --credits [0-9]+.*\)$' 0
    expect "both NIUs have the default 128 lines (sysfs)" '^\[node [01]\] lines=128$' 2
    expect "node 0 pings, node 1 echoes, three times" '^\[node 0\] niu-ping: node 0 of 2, pinging|^\[node 1\] niu-ping: node 1 of 2, echoing' 6
    expect "-s 0 spins, -s 1000 sleeps, no -s keeps the launcher's 700" '^\[node 0\] niu-ping: node 0 of 2, pinging, (100 round trips per size, high priority, idle sleep (0|1000)|20 round trips per size, high priority, idle sleep 700) us$' 3
    expect "a latency row per size (median, p99, min, mean), three times" '^\[node 0\] +(0|1|2|4|8|16|20) +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$' 21
    expect "every reply right, twice" '^\[node 0\] niu-ping: 700 replies checked, 0 wrong: PASS$' 2
    expect "and the third time" '^\[node 0\] niu-ping: 140 replies checked, 0 wrong: PASS$'
    expect "both nodes ok" '^node [01]: ok$' 2
    ;;
spec-2)
    # Both nodes idle 4 s first, holding endpoint 0 open (so polled, as
    # for a seed 002 program): the NIU's Tx poll must park because the
    # vCPU is halted (at least 2 s of the 4), and must still take the
    # slots niu-spec-test then writes without a doorbell.
    run_cluster -n 2 -T 'arctic_niu_tx_poll*' -- "sleep 4 3</dev/arctic-niu0; niu-spec-test"
    run_dir=$(sed -n 's/^==> run directory kept: //p' "$out" | tail -1)
    for node in 0 1; do
        parked=$(awk -F'[@:]' '
            /:arctic_niu_tx_poll_park .*vCPU idle/ { since = $2 }
            /:arctic_niu_tx_poll_unpark / && since { sum += $2 - since; since = 0 }
            END { printf "%.0f", sum * 1000 }' "$run_dir/node$node.trace" 2>/dev/null)
        if [ "${parked:-0}" -ge 2000 ]; then
            echo "ok: node $node's Tx poll parked ${parked} ms for idle vCPUs (of the 4 s sleep, endpoint 0 open)"
        else
            echo "FAIL: node $node's Tx poll parked ${parked:-no} ms of its 4 s idle (at least 2000 expected)"
            failures=$((failures + 1))
        fi
    done
    [ -z "$run_dir" ] || rm -rf "$run_dir"
    expect "ring neighbours" '^\[node 0\] niu-spec-test: node 0 of 2, endpoint 0: 600 rounds to 1, from 1$|^\[node 1\] niu-spec-test: node 1 of 2, endpoint 0: 600 rounds to 0, from 0$' 2
    expect "every message right on both nodes" '^\[node [01]\] niu-spec-test: 600 messages sent and 600 received per priority, 0 wrong$' 2
    expect "both nodes ok" '^node [01]: ok$' 2
    ;;
raw-2)
    run_cluster -n 2 -- niu-raw-test
    expect "node 0 raw, node 1 MPI" '^\[node 0\] niu-raw-test: node 0 of 2, endpoint 0: raw side, 42 messages per priority each way$|^\[node 1\] niu-raw-test: node 1 of 2, endpoint 0: MPI side, 42 messages per priority each way$' 2
    expect "driver and libniu refuse what they must" '^\[node 0\] niu-raw-test: refusals: 16 checked, 0 wrong$'
    expect "raw packets reach the MPI node intact" '^\[node 1\] niu-raw-test: MPI receive from the raw node: 42 high, 42 low, 0 wrong$'
    expect "MPI messages reach the raw FIFOs intact" '^\[node 0\] niu-raw-test: raw receive: 42 high, 42 low, 0 wrong$'
    expect "nothing left unread in raw mode" '^\[node 0\] niu-raw-test: raw mode left, 0 words dropped$'
    expect "MPI works again after raw mode" '^\[node 0\] niu-raw-test: MPI after raw mode: 42 round trips, 0 wrong$|^\[node 1\] niu-raw-test: MPI echoes after raw mode: 42, 0 wrong$' 2
    expect "no check failed" 'niu-raw-test: FAIL' 0
    expect "both nodes pass" '^\[node [01]\] niu-raw-test: node [01]: 0 failure\(s\): PASS$' 2
    expect "both nodes ok" '^node [01]: ok$' 2
    ;;
driver-1)
    counter=/sys/bus/pci/drivers/arctic_niu/0*/counters/rx_hi_packets
    run_cluster -n 1 -- "niu-driver-test && echo rx-hi=\$(cat $counter) && rmmod arctic_niu && insmod /lib/modules/arctic_niu.ko && niu-driver-test"
    expect "no check failed" '^\[node 0\] FAIL' 0
    expect "both runs pass" '^\[node 0\] niu-driver-test: 0 failure\(s\): PASS$' 2
    # The loopback message, the notification of the DMA to itself, the
    # 32 messages left in HiTx when their endpoint was closed, the full
    # queue's 256 and one more, and the keep-unread test's 3.
    expect "every HiRx arrival counted in sysfs" '^\[node 0\] rx-hi=294$'
    expect "close() sent what was queued, both runs" '^\[node 0\] close test: 32 of 32 messages arrived$' 2
    expect "a full queue kept over close(), both runs" '^\[node 0\] full queue test: 256 of 256 kept on lap 0$' 2
    expect "read-ahead given back, then the unread, both runs" '^\[node 0\] keep unread test: 3 of 3 in order on lap 0, slot 3 empty$' 2
    expect "the node is ok" '^node 0: ok$'
    ;;
bw-2)
    # With the launcher's -L/-C: 64 lines in each NIU, 32 credits each way.
    lines=/sys/bus/pci/drivers/arctic_niu/0*/lines
    run_cluster -n 2 -L 64 -C 32 -- "echo lines=\$(cat $lines) && niu-bw -n 300 -b 128"
    expect "the switch grants 32 credits" '^==> starting arctic-switch \(.* --credits 32\)$'
    expect "both NIUs have 64 lines (sysfs)" '^\[node [01]\] lines=64$' 2
    expect "a bandwidth row per size" '^\[node 0\] +(1|2|4|8|12|16|20) +[0-9]+\.[0-9]{3} +[0-9]+$' 7
    expect "remote DMA between the windows" '^\[node 0\] niu-bw: DMA: 128 blocks of 2048 bytes: [0-9]+\.[0-9]{3} MB/s$'
    expect "every word right on both nodes" '^\[node [01]\] niu-bw: node [01]: 0 wrong: PASS$' 2
    expect "both nodes ok" '^node [01]: ok$' 2
    ;;
suite-4)
    run_cluster -n 4 -- "niu-suite && niu-suite -s fft=4096 fft && niu-suite -s jacobi=31 jacobi"
    # Every kernel waits as the launcher says (docs/datapath.md §3.17),
    # also after the serial runs, when the other nodes slept.
    waits='0 us'
    [ 4 -le "$(nproc)" ] || waits="1000 us$yields"
    expect "every kernel waits as the launcher says" "^\\[node 0\\] niu-suite: [a-z]+ +\\.\\.\\. \\(waits: idle sleep $waits\\)\$" 7
    expect "every kernel verified, with times" '^\[node 0\] niu-suite: (dmm|fft|gauss|jacobi|sort) +[0-9].* nodes=4 parallel=[0-9]+\.[0-9]{3}s serial=[0-9]+\.[0-9]{3}s speedup=[0-9]+\.[0-9]{2} PASS$' 7
    # 1024 points over 4 nodes leave blocks under ARCTIC_D: messages;
    # 4096 points fill whole DMA units.
    expect "the small FFT's transpose by messages" '^\[node 0\] niu-suite: fft +1024 complex points, msgs +nodes=4 .* PASS$'
    expect "the larger FFT's transpose by remote DMA" '^\[node 0\] niu-suite: fft +4096 complex points, DMA +nodes=4 .* PASS$'
    # An odd order: tiles of 15 and 16 rows and columns on the 2 x 2 grid.
    expect "Jacobi's uneven tiles" '^\[node 0\] niu-suite: jacobi +31x31 floats, 100 iter +nodes=4 .* PASS$'
    expect "no kernel failed" '^\[node 0\] niu-suite: 0 failure\(s\): PASS$' 3
    expect "every node says where each kernel's time went, in host time" '^\[node ([0-3])\] niu-suite: (dmm|fft|gauss|jacobi|sort) +node=\1 breakdown parallel_ns=[0-9]+ compute_ns=[0-9]+ send_ns=[1-9][0-9]* recv_ns=[0-9]+ wait_ns=[0-9]+ barrier_ns=[0-9]+ \(host time\)$' 28
    expect "all nodes ok" '^node [0-3]: ok$' 4
    ;;
collectives-16|collectives-64)
    # More nodes than host cores: the launcher's start barrier and idle
    # sleep (-I, 1000 us by default here) keep the waiting nodes halted.
    # loglevel=6: the guest kernels' command lines on the consoles.
    nodes=${case_name#collectives-}
    # 64 nodes start as clones of one template (its own cache): about
    # 1 minute instead of 4-9 (docs/snapshots.md section 6).
    clone=()
    if [ "$nodes" = 64 ]; then
        ARCTIC_TEMPLATES=$(mktemp -d)
        export ARCTIC_TEMPLATES
        clone=(--clone)
    fi
    start=$SECONDS
    run_cluster -n "$nodes" -m 128 -t 1500 -A loglevel=6 "${clone[@]}" -- niu-coll-test
    wall=$((SECONDS - start))
    if [ "${#clone[@]}" = 0 ]; then
        expect "every guest told the host's TSC frequency" '^\[node [0-9]+\] \[ *[0-9.]+\] Kernel command line: .* tsc_early_khz=[0-9]+$' "$nodes"
        # A guest that calibrated its TSC wrong on the busy cores ran its
        # clock 30 times too fast (docs/scale.md): no console time stamp
        # may pass the run's wall time.
        late=$(grep -aoE '^\[node [0-9]+\] \[ *[0-9]+' "$out" | tr -d '[]' |
               awk -v wall="$wall" '$3 > wall + 5 { print $2 }' | sort -u | tr '\n' ' ')
        if [ -z "$late" ]; then
            echo "ok: every guest clock within the run's $wall s"
        else
            echo "FAIL: guest clocks ahead of the run's $wall s on node(s) $late"
            failures=$((failures + 1))
        fi
    else
        expect "every node a clone" '^\[node [0-9]+\] ARCTIC: a clone, started from its template$' "$nodes"
        rm -rf "$ARCTIC_TEMPLATES"
    fi
    expect "every node booted before the start" "^==> all $nodes nodes booted in [0-9]+s; starting the program on every node\$"
    if [ "$nodes" -gt "$(nproc)" ]; then
        expect "waits poll, yielding, before they sleep" "^==> .*: $nodes node\\(s\\) here on $(nproc) CPU\\(s\\): idle sleep 1000 us$yields\$"
    fi
    expect "$nodes nodes take part" "^\\[node 0\\] niu-coll-test: $nodes nodes, 3 rounds, 50 words per all-to-all block\$"
    expect "no wrong value in any primitive" '^\[node 0\] niu-coll-test: (all-to-all|broadcast|reduce|allreduce|active messages|block transfer|failed calls) +0 wrong$' 7
    expect "the verdict" '^\[node 0\] niu-coll-test: PASS$'
    expect "all nodes ok" '^node [0-9]+: ok$' "$nodes"
    expect "no node given up by a peer" 'answered nothing for' 0
    ;;
hosts-4)
    # Two "hosts" on this machine (tests/integration/local-rsh: a
    # directory and a cache of its own each), nodes joining the switch
    # over TCP, consoles streamed back through the remote shell.
    export ARCTIC_LOCAL_HOSTS
    ARCTIC_LOCAL_HOSTS=$(mktemp -d /tmp/arctic-local-hosts.XXXXXX)
    run_cluster -n 4 -m 128 --hosts hosta,hostb:1 \
        --rsh "$root/tests/integration/local-rsh" -- niu-coll-test
    expect "the guest image copied to each host once" '^==> copying the guest image to host[ab] ' 2
    expect "three nodes on the first host, one on the second" '^==> host hosta: nodes 0,1,2$|^==> host hostb: nodes 3$' 2
    # Each host sleeps idle nodes by its own node and CPU counts.
    # With more nodes than CPUs, their NIUs' empty polls yield the core.
    cpus=$(nproc)
    sleep3='0 us' sleep1='0 us'
    [ 3 -le "$cpus" ] || sleep3="1000 us$yields"
    [ 1 -le "$cpus" ] || sleep1="1000 us$yields"
    expect "each host chose its nodes' idle sleep" "^==> .*: 3 node\\(s\\) here on $cpus CPU\\(s\\): idle sleep $sleep3\$|^==> .*: 1 node\\(s\\) here on $cpus CPU\\(s\\): idle sleep $sleep1\$" 2
    # Where the hosts reach it, not on every address, and with the run's key.
    expect "the switch listens on TCP with a key" '^==> starting arctic-switch \(.* --tcp [0-9a-zA-Z.:-]+:0 --secret /tmp/arctic-cluster\.[A-Za-z0-9]+/cluster\.key\)$'
    expect "every console came back" '^\[node [0-3]\] ARCTIC-RESULT node=[0-3] status=0$' 4
    expect "no wrong value in any primitive" '^\[node 0\] niu-coll-test: (all-to-all|broadcast|reduce|allreduce|active messages|block transfer|failed calls) +0 wrong$' 7
    expect "the verdict" '^\[node 0\] niu-coll-test: PASS$'
    expect "all nodes ok" '^node [0-3]: ok$' 4
    # A second run finds the images cached.
    run_cluster -n 2 -m 128 --hosts hosta:1,hostb:1 \
        --rsh "$root/tests/integration/local-rsh" -- "niu-ping -n 50"
    expect "the image not copied again" '^==> copying the guest image' 0
    expect "every reply right" '^\[node 0\] niu-ping: 350 replies checked, 0 wrong: PASS$'
    left=$(find "$ARCTIC_LOCAL_HOSTS" -name 'node*.in' | wc -l)
    if [ "$left" = 0 ] && ! pgrep -f "$ARCTIC_LOCAL_HOSTS" >/dev/null; then
        echo "ok: nothing left running or behind on the hosts"
    else
        echo "FAIL: $left FIFO(s) or a process left on the hosts"
        failures=$((failures + 1))
    fi
    rm -rf "$ARCTIC_LOCAL_HOSTS"
    ;;
collectives-8)
    run_cluster -n 8 -m 128 -- niu-coll-test
    expect "8 nodes take part" '^\[node 0\] niu-coll-test: 8 nodes, 3 rounds, 50 words per all-to-all block$'
    expect "no wrong value in any primitive" '^\[node 0\] niu-coll-test: (all-to-all|broadcast|reduce|allreduce|active messages|block transfer|failed calls) +0 wrong$' 7
    expect "the verdict" '^\[node 0\] niu-coll-test: PASS$'
    expect "all nodes ok" '^node [0-7]: ok$' 8
    ;;
direct-4)
    # In the fast mode the NIUs of one host on rings write to each other
    # through the direct rings the switch hands out (link 1.5): the
    # collectives are right, every port sent and received most of its
    # packets that way, and --no-direct keeps every packet in the switch.
    run_cluster -k -n 4 -- "niu-coll-test -r 100"
    expect "the switch may hand out direct rings" '^==> starting arctic-switch \(.* --direct( .*)?\)$'
    expect "no wrong value in any primitive" '^\[node 0\] niu-coll-test: (all-to-all|broadcast|reduce|allreduce|active messages|block transfer|failed calls) +0 wrong$' 7
    expect "the verdict" '^\[node 0\] niu-coll-test: PASS$'
    expect "all nodes ok" '^node [0-3]: ok$' 4
    run_dir=$(sed -n 's/^==> run directory kept: //p' "$out" | tail -1)
    # The exit summary: per port, packets in (rx) of both priorities, and
    # how many of them went through direct rings.
    share=$(awk '$1 ~ /^[0-3]$/ && ($2 == "low" || $2 == "high") { rx[$1] += $3 }
                 /^port [0-3]: direct rings: sent / {
                     p = $2; sub(":", "", p); sent[p] = $6 + 0
                 }
                 END {
                     for (p = 0; p < 4; p++) {
                         printf "%d:%d/%d ", p, sent[p], rx[p]
                     }
                 }' "$run_dir/switch.log" 2>/dev/null)
    low=$(awk -v s="$share" 'BEGIN {
              n = split(s, a, " "); bad = 0
              for (i = 1; i <= n; i++) {
                  split(a[i], f, "[:/]")
                  if (f[3] == 0 || f[2] < 0.9 * f[3]) bad++
              }
              print (n == 4 ? bad : 4)
          }')
    if [ "$low" = 0 ]; then
        echo "ok: every port sent 90% or more of its packets direct (port:direct/all: $share)"
    else
        echo "FAIL: direct share below 90% on $low port(s) (port:direct/all: ${share:-no summary})"
        failures=$((failures + 1))
    fi
    [ -z "$run_dir" ] || rm -rf "$run_dir"
    run_cluster -k -n 4 --no-direct -- "niu-coll-test -r 20"
    expect "--no-direct: a switch without --direct" '^==> starting arctic-switch \(.* --direct( .*)?\)$' 0
    expect "the verdict without direct rings" '^\[node 0\] niu-coll-test: PASS$'
    run_dir=$(sed -n 's/^==> run directory kept: //p' "$out" | tail -1)
    if grep -q 'direct rings' "$run_dir/switch.log" 2>/dev/null; then
        echo "FAIL: --no-direct: the switch handed out direct rings"
        failures=$((failures + 1))
    else
        echo "ok: --no-direct: no direct rings"
    fi
    [ -z "$run_dir" ] || rm -rf "$run_dir"
    ;;
switch-restart-4)
    # The switch is killed mid-run and a new one started: the NIUs reconnect
    # and resend what was not acknowledged; nothing may be lost or doubled.
    # -r counts from the program's start (all nodes booted).  600 rounds
    # outlast the kill (2-3 s in) on the fastest link: 150 took 2 s once
    # kicks woke the switch on their own CPU, and the program had ended.
    run_cluster -n 4 -r 2 -- "niu-coll-test -r 600"
    expect "the first switch had carried traffic when killed" '^==> killing arctic-switch after [0-9]+s, when it had taken [1-9][0-9]* packets'
    expect "no wrong value in any primitive" '^\[node 0\] niu-coll-test: (all-to-all|broadcast|reduce|allreduce|active messages|block transfer|failed calls) +0 wrong$' 7
    expect "the verdict" '^\[node 0\] niu-coll-test: PASS$'
    expect "the new switch carried traffic too" '^ +[0-3] +(low|high) +[1-9][0-9]* ' 8
    expect "all nodes ok" '^node [0-3]: ok$' 4
    ;;
faults-4)
    run_cluster -n 4 -f '*:drop=0.02,dup=0.02' -- "niu-coll-test && niu-suite fft jacobi sort"
    expect "collectives right despite faults" '^\[node 0\] niu-coll-test: (all-to-all|broadcast|reduce|allreduce|active messages|block transfer|failed calls) +0 wrong$' 7
    expect "kernels right despite faults" '^\[node 0\] niu-suite: (fft|jacobi|sort) +[0-9].* PASS$' 3
    expect "no kernel failed" '^\[node 0\] niu-suite: 0 failure\(s\): PASS$'
    expect "the switch did drop packets" '^drops: fault=[1-9][0-9]*'
    expect "all nodes ok" '^node [0-3]: ok$' 4
    ;;
peer-dead-4)
    # Rounds enough to outlast the kill (2-3 s in) on the fastest link;
    # the survivors stop 3 s after it whatever the count.
    # niu-cluster exits with the survivors' status.
    run_cluster_expecting 3 -t 170 -n 4 -P 3000 -K 3:2 -- \
        "niu-coll-test -r 1600"
    expect "node 3 was killed mid-run" "^==> killing node 3's QEMU after [0-9]+s, when the switch had taken [0-9]+ packets"
    expect "every survivor names node 3" '^\[node [0-2]\] niu-coll-test: node [0-2]: node 3 stopped answering: FAIL$' 3
    expect "the survivors stopped with status 3" '^node [0-2]: FAILED \(status 3\)$' 3
    expect "the killed node did not finish" '^node 3: FAILED \(status 124\)$'
    if grep -aqE 'arctic-niu: node [0-2]: node 3 answered nothing for 3000 ms; [0-9]+ packet\(s\) to it dropped' "$out"; then
        echo "ok: a NIU gave up on node 3 after its 3 s timeout"
    else
        echo "FAIL: no NIU said it gave up on node 3"
        failures=$((failures + 1))
    fi
    killed=$(sed -nE "s/^==> killing node 3's QEMU after ([0-9]+)s.*/\1/p" "$out")
    ended=$(sed -nE 's/^=== summary: .* ([0-9]+)s ===$/\1/p' "$out")
    if [ -n "$killed" ] && [ -n "$ended" ] && [ $((ended - killed)) -le 20 ]; then
        echo "ok: the run ended $((ended - killed)) s after the kill (3 s timeout, 20 s allowed)"
    else
        echo "FAIL: the run ended ${ended:-?} s, the kill was at ${killed:-?} s"
        failures=$((failures + 1))
    fi
    # This cluster's processes only: another may run on the machine.
    run_dir=$(arctic_run_dir_of "$out")
    left=$(arctic_run_pids "${run_dir:-/nonexistent}" | wc -l)
    if [ -z "$run_dir" ] || [ "$left" != 0 ]; then
        echo "FAIL: ${left} process(es) of the cluster in '${run_dir}' still running"
        failures=$((failures + 1))
    else
        echo "ok: no process of the cluster left"
    fi
    ;;
ip-4)
    # niu0 (docs/guest.md, "IP over the NIU") on 4 nodes: every node pings
    # every node by name over IPv4 and IPv6, a packet to an address that
    # names no node is dropped and counted, and node 1 sends node 0's
    # kernel endpoint one message of each kind niu0 must refuse
    # (niu-ipnet-junk): each dropped and counted, and node 0 still
    # answers afterwards.
    guest_script ip.sh <<'SCRIPT'
me=$(hostname)
for k in 0 1 2 3; do
    if ping -c 2 -W 20 "node$k" >/dev/null; then r=ok; else r=FAILED; fi
    echo "$me ping node$k $r"
    if ping6 -c 2 -W 20 "node$k-6" >/dev/null; then r=ok; else r=FAILED; fi
    echo "$me ping6 node$k-6 $r"
done
if ping -c 2 -W 2 10.77.0.200 >/dev/null; then r=answered; else r="no answer"; fi
echo "$me ping 10.77.0.200 $r"
if [ "$me" = node1 ]; then
    niu-ipnet-junk 0
fi
if [ "$me" = node0 ]; then
    i=0
    while [ $i -lt 200 ] && ! niu-ifstats | grep -q ' rx_not_ip: 1$'; do
        sleep 0.1
        i=$((i + 1))
    done
    if ping -c 2 -W 20 node1 >/dev/null; then r=ok; else r=FAILED; fi
    echo "$me after the junk: ping node1 $r"
fi
niu-ifstats | sed "s/^ */$me /"
for f in rx_errors rx_length_errors rx_frame_errors; do
    echo "$me $f=$(cat /sys/class/net/niu0/statistics/$f)"
done
# tx_dropped also counts IPv6's multicast (router solicitations, MLD),
# which niu0 never sends: there is no broadcast on the fat tree.
multicast=$(niu-ifstats | sed -n 's/^ *tx_not_unicast: //p')
echo "$me tx_dropped=$(cat /sys/class/net/niu0/statistics/tx_dropped) of which not unicast $multicast"
SCRIPT
    run_cluster -n 4 --share "$share" -- "sh /host/ip.sh"
    expect "every node pings every node over IPv4" '^\[node ([0-3])\] node\1 ping node[0-3] ok$' 16
    expect "and over IPv6" '^\[node ([0-3])\] node\1 ping6 node[0-3]-6 ok$' 16
    expect "an address that names no node gets no answer" '^\[node ([0-3])\] node\1 ping 10.77.0.200 no answer$' 4
    expect "its 2 packets dropped and counted on every node" '^\[node ([0-3])\] node\1 tx_no_node: 2$' 4
    expect "and in the interface's tx_dropped, beside IPv6's multicast" '^\[node ([0-3])\] node\1 tx_dropped=(2 of which not unicast 0|3 of which not unicast 1|4 of which not unicast 2|5 of which not unicast 3|6 of which not unicast 4)$' 4
    expect "node 1 sent its 7 bad messages" '^\[node 1\] niu-ipnet-junk: 7 messages to node 0 endpoint 7, 0 refused$'
    expect "another TYPE, or on HiRx: dropped, counted" '^\[node 0\] node0 rx_foreign: 2$'
    expect "a frame too long: dropped, counted" '^\[node 0\] node0 rx_too_long: 1$'
    expect "a payload length that does not fit" '^\[node 0\] node0 rx_bad_size: 1$'
    expect "a fragment of nothing" '^\[node 0\] node0 rx_unexpected_fragment: 1$'
    expect "a packet cut short" '^\[node 0\] node0 rx_incomplete: 1$'
    expect "a packet that is not IP" '^\[node 0\] node0 rx_not_ip: 1$'
    expect "in ip -s link's counters too" '^\[node 0\] node0 rx_errors=7$|^\[node 0\] node0 rx_length_errors=2$|^\[node 0\] node0 rx_frame_errors=5$' 3
    expect "no other node saw an error" '^\[node [123]\] node[123] rx_errors=0$' 3
    expect "node 0 still answers" '^\[node 0\] node0 after the junk: ping node1 ok$'
    expect "all nodes ok" '^node [0-3]: ok$' 4
    ;;
ip-down-3)
    # niu0 to a node that dies: node 2's QEMU is killed while nodes 0
    # and 1 ping it (3 s peer timeout).  Pings to it then get no answer,
    # never a hang: each NIU gives up on node 2, drops what it held for
    # it and says so in niu0's tx_peer_dead (and tx_errors); the two
    # survivors still ping each other afterwards.
    guest_script down.sh <<'SCRIPT'
me=$(hostname)
if [ "$me" = node2 ]; then
    sleep 120
    exit 0
fi
other=node1
[ "$me" = node1 ] && other=node0
i=0
while [ $i -lt 1000 ] && ping -c 1 -W 2 node2 >/dev/null; do
    i=$((i + 1))
done
echo "$me node2 answered $i pings, then stopped"
ping -c 3 -W 1 node2 >/dev/null || echo "$me node2 gives no answer"
i=0
while [ $i -lt 200 ] && niu-ifstats | grep -q ' tx_peer_dead: 0$'; do
    sleep 0.1
    i=$((i + 1))
done
niu-ifstats | grep -E ' (tx_peer_dead|niu_peer_dropped):' | sed "s/^ */$me /"
echo "$me tx_errors=$(cat /sys/class/net/niu0/statistics/tx_errors)"
if ping -c 2 -W 10 $other >/dev/null; then r=ok; else r=FAILED; fi
echo "$me then ping $other $r"
SCRIPT
    run_cluster_expecting 124 -t 170 -n 3 -P 3000 -K 2:3 --share "$share" -- \
        "sh /host/down.sh"
    expect "node 2 was killed mid-run" "^==> killing node 2's QEMU after [0-9]+s, when the switch had taken [0-9]+ packets"
    expect "it answered pings until then" '^\[node ([01])\] node\1 node2 answered [1-9][0-9]* pings, then stopped$' 2
    expect "then none, and no hang" '^\[node ([01])\] node\1 node2 gives no answer$' 2
    expect "each NIU gave up on it, in niu0's counters" '^\[node ([01])\] node\1 tx_peer_dead: [1-9][0-9]*$' 2
    expect "and in tx_errors" '^\[node ([01])\] node\1 tx_errors=[1-9][0-9]*$' 2
    expect "what it held for node 2 was dropped" '^\[node ([01])\] node\1 niu_peer_dropped: [1-9][0-9]*$' 2
    expect "the survivors still reach each other" '^\[node 0\] node0 then ping node1 ok$|^\[node 1\] node1 then ping node0 ok$' 2
    expect "both survivors ok" '^node [01]: ok$' 2
    expect "the killed node did not finish" '^node 2: FAILED \(status 124\)$'
    ;;
tcp-faults-2)
    # A 2 MiB file, made in the guest from a fixed seed, moved with TCP
    # (busybox nc) over niu0 through 1% drops, duplicates and corruption
    # in the switch: the same sha256 at both ends, the NIUs resent what
    # was lost, and TCP saw no bad checksum (the NIU repaired it all).
    guest_script tcp.sh <<'SCRIPT'
me=$(hostname)
if [ "$me" = node0 ]; then
    awk 'BEGIN { srand(51); for (i = 0; i < 131072; i++)
        printf "%08x%08x", int(rand() * 4294967296), int(rand() * 4294967296) }' >/tmp/file
    sleep 1
    nc node1 5000 </tmp/file
else
    nc -l -p 5000 >/tmp/file
fi
echo "$me file $(wc -c </tmp/file) bytes sha256 $(sha256sum </tmp/file | cut -d' ' -f1)"
# The second Tcp: line holds the values; InCsumErrors is the last.
echo "$me tcp-csum-errors=$(grep '^Tcp:' /proc/net/snmp | tail -n 1 | cut -d' ' -f16)"
niu-ifstats | grep -E ' (niu_retransmits|niu_duplicates|rx_packets|tx_packets|rx_errors):' | sed "s/^ */$me /"
SCRIPT
    run_cluster -n 2 -f '*:drop=0.01,dup=0.01,corrupt=0.01' --share "$share" -- "sh /host/tcp.sh"
    expect "the file has its 2 MiB at both ends" '^\[node ([01])\] node\1 file 2097152 bytes sha256 [0-9a-f]{64}$' 2
    sums=$(sed -n 's/^\[node [01]\] node[01] file 2097152 bytes sha256 //p' "$out" | sort -u)
    if [ -n "$sums" ] && [ "$(echo "$sums" | wc -l)" = 1 ]; then
        echo "ok: the same sha256 at both ends ($sums)"
    else
        echo "FAIL: the sha256 differs between the ends: $sums"
        failures=$((failures + 1))
    fi
    expect "TCP saw no bad checksum on either node" '^\[node ([01])\] node\1 tcp-csum-errors=0$' 2
    expect "the NIUs resent what the switch lost" '^\[node [01]\] node[01] niu_retransmits: [1-9][0-9]*$' 2
    expect "the switch dropped packets" '^drops: fault=[1-9][0-9]*'
    expect "and duplicated and corrupted others" '^faults: duplicated=[1-9][0-9]* corrupted=[1-9][0-9]*'
    expect "both nodes ok" '^node [01]: ok$' 2
    ;;
soak-4)
    run_cluster -n 4 -f '*:drop=0.01,dup=0.01,corrupt=0.01,delay=0.01' -- \
        "niu-soak -n 25000"
    expect "every message and block once, in order, right, on every node" '^\[node [0-3]\] niu-soak: node [0-3]: from node [0-3]: high 8334, low 16666, DMA 500; wrong 0, missing 0, repeated 0, DMA wrong 0, DMA out of order 0: PASS$' 4
    expect "each node's rate" '^\[node [0-3]\] niu-soak: node [0-3]: 25000 messages and 500 DMA blocks to node [0-3] in [0-9.]+ s \([0-9]+ messages/s\)$' 4
    expect "the switch dropped packets" '^drops: fault=[1-9][0-9]*'
    expect "and duplicated, corrupted and delayed others" '^faults: duplicated=[1-9][0-9]* corrupted=[1-9][0-9]* delayed=[1-9][0-9]*$'
    expect "all nodes ok" '^node [0-3]: ok$' 4
    ;;
stale-2)
    run_cluster -n 2 -L 255 -C 128 -- "niu-stale-test -n 60000 -p 2000"
    expect "every message right" '^\[node 1\] niu-stale-test: node 1: 60000 messages, 0 wrong: PASS$'
    expect "the sender saw it" '^\[node 0\] niu-stale-test: node 0: 60000 messages in [0-9.]+ s; node 1 found 0 wrong: PASS$'
    expect "the full queue refused packets" '^\[node 1\] niu-stale-test: node 1: .* nacks_sent=[1-9][0-9]* '
    expect "the sender sent them again" '^\[node 0\] niu-stale-test: node 0: retransmits=[1-9][0-9]* .* nacks_received=[1-9][0-9]* '
    expect "both nodes ok" '^node [01]: ok$' 2
    ;;
slurm-4)
    slurm=$(mktemp -d)
    trap 'rm -f "$out"; "$root/tests/integration/slurm-local" stop "$slurm"; rm -rf "$slurm"' EXIT
    if ! "$root/tests/integration/slurm-local" start "$slurm" >"$out" 2>&1; then
        cat "$out"
        echo "SKIP: Slurm could not start on this machine (above)"
        exit 77
    fi
    echo "ok: a one-host Slurm cluster is up (tests/integration/slurm-local, auth/none)"
    export SLURM_CONF="$slurm/slurm.conf"
    salloc -N1 --ntasks-per-node=2 -t 15 "$root/scripts/niu-cluster" \
        --no-build -t 300 -n 4 -- niu-coll-test >"$out" 2>&1
    status=$?
    cat "$out"
    if [ "$status" != 0 ]; then
        echo "FAIL: salloc ... niu-cluster exited $status"
        failures=$((failures + 1))
    fi
    expect "the hosts came from the allocation" '^==> Slurm job [0-9]+: 1 host\(s\) \([^)]+\), 2 part\(s\) on each, each a job step \(srun\)$'
    expect "two parts of two nodes" '^==> host [^ ]+: nodes (0,1|2,3)$' 2
    # Both parts count the host's four nodes, not their own two.
    sleep4='0 us'
    [ 4 -le "$(nproc)" ] || sleep4="1000 us$yields"
    expect "each part chose the idle sleep of the host's 4 nodes" "^==> .*: 4 node\\(s\\) here on $(nproc) CPU\\(s\\): idle sleep $sleep4\$" 2
    expect "4 nodes take part" '^\[node 0\] niu-coll-test: 4 nodes, 3 rounds, 50 words per all-to-all block$'
    expect "no wrong value in any primitive" '^\[node 0\] niu-coll-test: (all-to-all|broadcast|reduce|allreduce|active messages|block transfer|failed calls) +0 wrong$' 7
    expect "the verdict" '^\[node 0\] niu-coll-test: PASS$'
    expect "all nodes ok" '^node [0-3]: ok$' 4
    steps=$(squeue -h -s 2>/dev/null | wc -l)
    run_dir=$(arctic_run_dir_of "$out")
    left=$(arctic_run_pids "${run_dir:-/nonexistent}" | wc -l)
    [ -n "$run_dir" ] || left="no run directory named, so unknown"
    if [ "$steps" = 0 ] && [ "$left" = 0 ]; then
        echo "ok: no job step and no QEMU left"
    else
        echo "FAIL: $steps job step(s) and $left QEMU(s) left"
        failures=$((failures + 1))
    fi
    ;;
chain-4)
    # Forty programs in a row on every node (as "mpirun a && mpirun b"),
    # through a network that drops 15% of packets: a node that finishes
    # one program's last barrier starts the next and sends its first
    # barrier message while a slower node is still in the last one, whose
    # library reads it ahead.  libniu gives what it read ahead back to the
    # driver at close (ARCTIC_NIU_IOC_KEEP_UNREAD), for the next program:
    # before, it was lost and the next program waited for it for ever.
    share=$(mktemp -d)
    trap 'rm -f "$out"; rm -rf "$share"' EXIT
    cat >"$share/chain.sh" <<'SCRIPT'
i=0
while [ $i -lt 40 ]; do
    i=$((i + 1))
    niu-coll-test -r 1 >/tmp/coll.out 2>&1 || { cat /tmp/coll.out; exit 1; }
done
echo "chain: $i programs in a row: PASS"
SCRIPT
    run_cluster -n 4 --share "$share" -f '*:drop=0.15,dup=0.05' -- sh /host/chain.sh
    expect "every node ran all forty" '^\[node [0-3]\] chain: 40 programs in a row: PASS$' 4
    expect "the switch dropped packets" '^drops: fault=[1-9][0-9]*'
    expect "all nodes ok" '^node [0-3]: ok$' 4
    ;;
stuck-2)
    # A program that never ends: at the timeout niu-cluster prints each
    # running node's NIU state (scripts/niu-state over the node's QMP
    # socket) before it tears the cluster down.
    # 124: the timeout.
    run_cluster_expecting 124 -k -t 60 -n 2 -- "niu-ping -n 20 && sleep 1000"
    expect "the ping ran" '^\[node 0\] niu-ping: 140 replies checked, 0 wrong: PASS$'
    expect "the timeout names the nodes still running" "^==> timeout after 60s with 2 node\(s\) still running; their NIUs' state:$"
    expect "each node's link, up once" '^\[node [01]\] niu-state: link up \([a-z]+\), up 1 time\(s\);' 2
    expect "nothing left unacknowledged or owed" '^\[node [01]\] niu-state: unacked lines: high 0 low 0; acks/nacks owed 0; retry timer ' 2
    # Each direction's stream: the sender's next sequence number is the
    # one the receiver expects, in the same epoch, 140 pings and more.
    for pair in "0 1" "1 0"; do
        set -- $pair
        tx=$(sed -nE "s/^\[node $1\] niu-state: stream node $2 high: tx epoch ([0-9]+) next ([0-9]+), 0 unacked .*/\1 \2/p" "$out")
        rx=$(sed -nE "s/^\[node $2\] niu-state: stream node $1 high: .*; rx epoch ([0-9]+) expects ([0-9]+)$/\1 \2/p" "$out")
        if [ -n "$tx" ] && [ "$tx" = "$rx" ] && [ "${tx#* }" -ge 140 ]; then
            echo "ok: node $1 -> $2: sent and expected agree (epoch, next: $tx)"
        else
            echo "FAIL: node $1 -> $2: sender '$tx', receiver '$rx'"
            failures=$((failures + 1))
        fi
    done
    run_dir=$(sed -n 's/^==> run directory kept: //p' "$out" | tail -1)
    next=$(python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
print([t["tx-next-seq"] for t in s["streams"]
       if t["node"] == 1 and t["priority"] == "high"][0])' \
        "$run_dir/node0.state.json" 2>&1)
    tx=$(sed -nE 's/^\[node 0\] niu-state: stream node 1 high: tx epoch [0-9]+ next ([0-9]+),.*/\1/p' "$out")
    if [ -n "$tx" ] && [ "$next" = "$tx" ]; then
        echo "ok: node0.state.json holds the whole state (next $next)"
    else
        echo "FAIL: node0.state.json: '$next'"
        failures=$((failures + 1))
    fi
    [ -z "$run_dir" ] || rm -rf "$run_dir"
    # A node that had no time to boot is a failure too, not a pass.
    run_cluster_expecting 124 -t 2 -n 1 --fast true
    expect "the node that did not boot is named" '^node 0: FAILED \(status 124\): the guest did not boot'
    ;;
develop-2)
    share=$(mktemp -d)
    trap 'rm -f "$out"; rm -rf "$share"' EXIT
    # A driver of one's own: a copy of the project's, changed, built out
    # of the tree against the guest's headers.
    mkdir -p "$share/out"
    cp -r "$root/guest/driver" "$share/mydriver"
    # The change: a parameter the image's driver does not have.
    printf '%s\n' 'static int develop_mark = 4242;' \
        'module_param(develop_mark, int, 0444);' >>"$share/mydriver/arctic_niu.c"
    ko=$("$root/scripts/guest-module" "$share/mydriver" 2>"$out.build")
    if [ "$ko" = "$share/mydriver/arctic_niu.ko" ]; then
        echo "ok: scripts/guest-module built $ko"
    else
        cat "$out.build"
        echo "FAIL: scripts/guest-module printed '$ko'"
        failures=$((failures + 1))
    fi
    head -c 100000 /dev/urandom >"$share/data"
    cat >"$share/run.sh" <<'SCRIPT'
node=$(cat /sys/bus/pci/drivers/arctic_niu/*/node_id)
cat /sys/module/arctic_niu/parameters/develop_mark >/host/out/mark.$node
wc -c </host/data >/host/out/size.$node
sha256sum </host/data >/host/out/sha.$node
niu-ping -n 50
SCRIPT
    # The kernel's symbols without the debug package: a guest's kallsyms.
    kallsyms=$("$root/scripts/guest-symbols" --kallsyms 2>"$out.build")
    if [ "$kallsyms" = "$ARCTIC_GUEST_DIR/kallsyms" ] &&
       grep -q ' linux_banner$' "$kallsyms"; then
        echo "ok: scripts/guest-symbols --kallsyms gave the kernel's symbols"
    else
        cat "$out.build"
        echo "FAIL: scripts/guest-symbols --kallsyms printed '$kallsyms'"
        failures=$((failures + 1))
    fi
    # Node 1 gets a gdb stub; once it has booted (it waits for the start),
    # gdb attaches, reads the kernel's banner and detaches.
    port=$((20000 + RANDOM % 20000))
    "$root/scripts/niu-cluster" --no-build -t 170 -n 2 --share "$share" \
        --module "$ko" --gdb "1:$port" -- sh /host/run.sh >"$out" 2>&1 &
    cluster=$!
    for _ in $(seq 600); do
        grep -q '^\[node 1\] ARCTIC: node 1 ready' "$out" && break
        kill -0 "$cluster" 2>/dev/null || break
        sleep 0.2
    done
    banner=$(awk '$3 == "linux_banner" { print $1 }' "$kallsyms")
    gdb_out=$(timeout 60 gdb -batch -nx -ex "target remote 127.0.0.1:$port" \
        -ex "x/s 0x$banner" -ex detach 2>&1)
    printf '%s\n' "$gdb_out" | sed 's/^/gdb: /'
    status=0
    wait "$cluster" || status=$?
    cat "$out"
    if [ "$status" != 0 ]; then
        echo "FAIL: niu-cluster exited $status"
        failures=$((failures + 1))
    fi
    if grep -Eq "0x$banner( <[a-z_]*>)?:[[:space:]]*\"Linux version $(cat "$ARCTIC_GUEST_DIR/current-abi")-amd64" <<<"$gdb_out" &&
       grep -q 'detached' <<<"$gdb_out"; then
        echo "ok: gdb attached to node 1, read linux_banner at 0x$banner and detached"
    else
        echo "FAIL: gdb did not read the banner from node 1"
        failures=$((failures + 1))
    fi
    expect "the gdb command line printed" "gdb .*-ex 'target remote 127.0.0.1:$port'"
    expect "both nodes mounted the share" '^\[node [01]\] ARCTIC: /host is the host.s shared directory$' 2
    expect "both nodes loaded the module from it" '^\[node [01]\] ARCTIC: loaded /host/mydriver/arctic_niu.ko$' 2
    expect "every reply right" '^\[node 0\] niu-ping: 350 replies checked, 0 wrong: PASS$'
    expect "both nodes ok" '^node [01]: ok$' 2
    for node in 0 1; do
        if [ "$(cat "$share/out/mark.$node" 2>/dev/null)" = 4242 ]; then
            echo "ok: node $node ran the module built here (its develop_mark parameter)"
        else
            echo "FAIL: node $node did not run the module built here"
            failures=$((failures + 1))
        fi
        if [ "$(cat "$share/out/size.$node" 2>/dev/null)" = 100000 ] &&
           [ "$(cat "$share/out/sha.$node" 2>/dev/null)" = "$(sha256sum <"$share/data")" ]; then
            echo "ok: node $node read the data file whole and wrote its results back"
        else
            echo "FAIL: node $node's results in the share are wrong or missing"
            failures=$((failures + 1))
        fi
    done
    rm -f "$out.build"
    # docs/developing.md's QEMU by hand, run as printed.
    by_hand() {
        awk '/^<!-- by-hand -->$/ { on = 1; next }
             on && /^```$/ { if (started) exit; started = 1; next }
             on && started' "$1"
    }
    block=$(by_hand "$root/docs/developing.md")
    if [ -n "$block" ] && [ "$(by_hand "$root/README.md")" = "$block" ]; then
        echo "ok: the README's by-hand block is docs/developing.md's"
    else
        echo "FAIL: the README's by-hand block differs from docs/developing.md's"
        failures=$((failures + 1))
    fi
    (cd "$root" && timeout 300 bash -e -c "$block" </dev/null) >"$out" 2>&1
    status=$?
    sed 's/^/by hand: /' "$out"
    if [ "$status" = 0 ]; then
        echo "ok: docs/developing.md's QEMU by hand ran"
    else
        echo "FAIL: docs/developing.md's QEMU by hand exited $status"
        failures=$((failures + 1))
    fi
    expect "the driver test passed on the node started by hand" '^ARCTIC-RESULT node=0 status=0'
    expect "the switch carried its packets" '"rx_packets" : [1-9]'
    # A module that does not load fails the run with the kernel's reason,
    # and no program starts on the other node.
    echo "not a module" >"$share/fake.ko"
    run_cluster_expecting 126 -t 170 -n 2 --share "$share" \
        --module "$share/fake.ko" -- niu-ping
    expect "the node says why its module did not load" \
        "^node [01]: FAILED \\(status 126\\): insmod /host/fake.ko failed: insmod: can't insert '/host/fake.ko': " 2
    expect "and no program started" 'not starting the program$' 1
    expect "nothing ran" 'ARCTIC: node [01] running:' 0
    ;;
snapshot-2)
    # docs/snapshots.md §5.  The QEMUs of this test are the ones whose
    # command line names its snapshot directory.
    snap=$(mktemp -d)
    program="niu-coll-test"
    # What a refused run left: any process naming its run directory.
    left=0 started=0
    left_of_run() {
        local dir
        dir=$(arctic_run_dir_of "$out")
        [ -z "$dir" ] || left=$((left + $(arctic_run_pids "$dir" | wc -l)))
        ! grep -aq '^==> starting the QEMUs of ' "$out" || started=$((started + 1))
    }
    run_cluster -n 2 --save-at-start "$snap/s" -- "$program"
    expect "saved at the start, before the program ran" "^=== saved 2 nodes at the start to $snap/s: boot [0-9]+s, save [0-9]+s, "
    expect "no node started its program" 'ARCTIC: node [01] running: ' 0
    expect_snapshot_files "$snap/s" cluster.json node0.state node1.state
    cold_boot=$(sed -n 's/^=== saved 2 nodes .*: boot \([0-9]*\)s,.*/\1/p' "$out")
    # Refused, each with one line naming the difference.
    run_cluster_expecting 1 -n 2 --from "$snap/s" -- niu-ping
    left_of_run
    expect "another PROGRAM is refused" "^error: --from $snap/s: saved with program 'niu-coll-test', this run has 'niu-ping'\$"
    run_cluster_expecting 1 -n 3 --from "$snap/s" -- "$program"
    left_of_run
    expect "another cluster size is refused" "^error: --from $snap/s: saved with nodes '2', this run has '3'\$"
    cp -r "$snap/s" "$snap/other"
    sed -i 's/"image": "[0-9a-f]*"/"image": "0123"/' "$snap/other/cluster.json"
    run_cluster_expecting 1 -n 2 --from "$snap/other" -- "$program"
    left_of_run
    expect "another image is refused" "^error: --from $snap/other: saved with image '0123', this run has '[0-9a-f]{64}'\$"
    run_cluster_expecting 1 -n 2 --timed --save-after 5:"$snap/t" -- "$program"
    expect "a timed cut while the program runs is refused, with the reason" '^error: --save-after: fast mode only: a timed node saved with its clock running cannot rejoin a cluster'
    if [ "$started" = 0 ]; then
        echo "ok: no QEMU started for a refused snapshot"
    else
        echo "FAIL: QEMUs started for $started refused snapshot(s)"
        failures=$((failures + 1))
    fi
    # A state file cut short: QEMU refuses it, the run ends cleanly.
    cp -r "$snap/s" "$snap/short"
    truncate -s 50000000 "$snap/short/node1.state"
    run_cluster_expecting 1 -n 2 --from "$snap/short" -- "$program"
    started=0
    left_of_run
    expect "a state file cut short fails its node's load" '^\[node 1\] qemu-system-x86_64: load of migration failed: '
    expect "and ends the run, naming the snapshot" "^error: --from $snap/short: a node did not load its state \(above\)\$"
    if [ "$left" = 0 ]; then
        echo "ok: no process left by the refusals"
    else
        echo "FAIL: $left process(es) left by the refusals"
        failures=$((failures + 1))
    fi
    # From the snapshot, then cold: the same lines.
    run_cluster -n 2 --from "$snap/s" -- "$program"
    cp "$out" "$out.restored"
    expect "restored, not booted" "^==> all 2 nodes restored from $snap/s in [0-9]+s; starting the program on every node\$"
    expect "the restored NIUs joined the new switch: every value right" '^\[node 0\] niu-coll-test: (all-to-all|broadcast|reduce|allreduce|active messages|block transfer|failed calls) +0 wrong$' 7
    expect "the verdict" '^\[node 0\] niu-coll-test: PASS$'
    expect "both nodes ok" '^node [01]: ok$' 2
    restore_boot=$(sed -n 's/^=== summary: .* boot \([0-9]*\)s, .*/\1/p' "$out")
    run_cluster -n 2 -- "$program"
    same_node_lines "$out.restored" 2 \
        'niu-coll-test: ([0-9]+ nodes|.* wrong$|PASS)|ARCTIC-RESULT' 1 \
        "cold and restored runs"
    echo "boot: cold ${cold_boot:-?} s, from the snapshot ${restore_boot:-?} s (this host, shared: one run each)"
    rm -rf "$snap" "$out.restored" "$out.diff"
    ;;
snapshot-running-4)
    # docs/snapshots.md §7.
    snap=$(mktemp -d)
    # About 6 s through the switch's faults (direct rings off): cut at 2.
    program="niu-soak -n 150000"
    pass='niu-soak: node [0-3]: from node [0-3]: high 50000, low 100000, DMA 3000; wrong 0, missing 0, repeated 0, DMA wrong 0, DMA out of order 0: PASS$'
    run_cluster -n 4 -f '*:drop=0.01,dup=0.01,corrupt=0.01' \
        --save-after 2:"$snap/r" -- "$program"
    expect "cut while the program ran" "^=== saved 4 nodes [2-9]s into the program to $snap/r: save [0-9]+s, .*; the switch held [0-9]+ packet\\(s\\)"
    expect "and the saving run went on to the end" "^\\[node [0-3]\\] $pass" 4
    expect_snapshot_files "$snap/r" cluster.json switch.json node0.state node3.state
    check "cluster.json says where it was cut" \
        grep -q '"cut": "running"' "$snap/r/cluster.json"
    check "switch.json holds the faults" \
        grep -Eq '"drop" *: *0.01' "$snap/r/switch.json"
    # Restored without -f: the faults saved go on, the program goes on.
    run_cluster -n 4 --from "$snap/r" -- "$program"
    expect "restored where it was cut" "^==> all 4 nodes restored from $snap/r in [0-9]+s; the program goes on from [2-9] s in\$"
    expect "the faults saved went on" '^==> the faults in force at the cut go on '
    expect "no node started its program anew" 'ARCTIC: node [0-3] (ready|running)' 0
    expect "every message and block once, in order, right, on every node" "^\\[node [0-3]\\] $pass" 4
    expect "the switch dropped packets" '^drops: (.* )?fault=[1-9][0-9]*'
    expect "and no packet went past the faults" '^port [0-3]: direct rings: ' 0
    expect "all nodes ok" '^node [0-3]: ok$' 4
    # A cut the program does not reach: nothing saved, the run fails.
    run_cluster_expecting 1 -n 2 --save-after 60:"$snap/late" -- true
    expect "a cut after the end is an error" "^error: --save-after 60:$snap/late: the program ended [0-9]+ s in, before the cut: nothing saved "
    check "nothing saved" test -z "$(ls -A "$snap/late")"
    rm -rf "$snap"
    ;;
clone-16)
    # docs/snapshots.md section 6, in a template cache of the test's own.
    ARCTIC_TEMPLATES=$(mktemp -d)
    export ARCTIC_TEMPLATES
    run_cluster -n 16 --clone -- niu-coll-test
    expect "the first run boots the template" '^==> [^ ]+: booting a template to clone the nodes from '
    expect "and saves it" '^==> [^ ]+: template booted in [0-9]+s and saved '
    first_boot=$(sed -n 's/^==> all 16 nodes booted in \([0-9]*\)s.*/\1/p' "$out")
    run_cluster -n 16 --clone -- niu-coll-test
    expect "the second run takes it" '^==> [^ ]+: cloning every node here from template [0-9a-f]{16} '
    expect "and boots none" 'booting a template' 0
    expect "every node a clone" '^\[node [0-9]+\] ARCTIC: a clone, started from its template$' 16
    for n in 0 9 15; do
        expect "node $n is node $n" "^\\[node $n\\] ARCTIC: node $n ready, waiting for the start\$"
    done
    expect "every value right" '^\[node 0\] niu-coll-test: (all-to-all|broadcast|reduce|allreduce|active messages|block transfer|failed calls) +0 wrong$' 7
    expect "the verdict" '^\[node 0\] niu-coll-test: PASS$'
    expect "every node ok" '^node [0-9]+: ok$' 16
    expect "the clones' memory reported" '^==> [^ ]+: memory of the 16 clones here before their program: RSS [1-9][0-9]* MiB each, PSS [1-9][0-9]* MiB each, '
    clone_boot=$(sed -n 's/^==> all 16 nodes booted in \([0-9]*\)s.*/\1/p' "$out")
    # A template cut short: every clone's load fails, the run ends.
    for state in "$ARCTIC_TEMPLATES"/*/state; do
        truncate -s 1000 "$state"
    done
    # (124: no node booted, as niu-cluster says of nodes that did not)
    run_cluster_expecting 124 -n 2 --clone -- niu-coll-test
    expect "QEMU refuses the state" '^\[node [01]\] qemu-system-x86_64: load of migration failed: ' 2
    expect "the summary says why for each node" "^node [01]: FAILED \\(status 124\\): the template's state did not load into this node's QEMU \\(remove $ARCTIC_TEMPLATES/[0-9a-f]{16} to boot it again\\)\$" 2
    expect "a template cut short ends the run, naming it" "^error: --clone: a node did not load the template \\(above\\); remove $ARCTIC_TEMPLATES/[0-9a-f]{16} to boot it again\$"
    dir=$(arctic_run_dir_of "$out")
    left=0
    [ -z "$dir" ] || left=$(arctic_run_pids "$dir" | wc -l)
    if [ "$left" = 0 ]; then
        echo "ok: nothing left of the refused run"
    else
        echo "FAIL: $left process(es) left of the refused run"
        failures=$((failures + 1))
    fi
    # Timed clones repeat themselves (the first run makes their template).
    run_cluster -n 2 --timed --clone -- niu-ping -n 50
    cp "$out" "$out.first"
    run_cluster -n 2 --timed --clone -- niu-ping -n 50
    expect "timed clones of a timed template" '^==> [^ ]+: cloning every node here from template '
    same_node_lines "$out.first" 2 \
        'niu-ping: [0-9]+ replies checked|^\[node 0\] +[0-9]+ +[0-9.]+ ' 8 \
        "two timed runs of clones"
    # Another template of the same image, made beside a busy loop: it
    # stops itself at the same instant of its virtual time (NIU_TEMPLATE_PAUSE,
    # scripts/qemu-patches/0006), so its clones print the same lines.
    first_templates=$ARCTIC_TEMPLATES
    ARCTIC_TEMPLATES=$(mktemp -d)
    sh -c 'while :; do :; done' &
    hog=$!
    run_cluster -n 2 --timed --clone -- true
    kill "$hog"
    wait "$hog" 2>/dev/null || true
    expect "a second template, made beside a busy loop" '^==> [^ ]+: template booted in [0-9]+s and saved '
    run_cluster -n 2 --timed --clone -- niu-ping -n 50
    same_node_lines "$out.first" 2 \
        'niu-ping: [0-9]+ replies checked|^\[node 0\] +[0-9]+ +[0-9.]+ ' 8 \
        "timed clones of two templates of one image"
    rm -rf "$ARCTIC_TEMPLATES"
    ARCTIC_TEMPLATES=$first_templates
    echo "boot of 16 nodes: making the template and cloning ${first_boot:-?} s, cloning ${clone_boot:-?} s (this host, shared: one run each)"
    rm -rf "$ARCTIC_TEMPLATES" "$out.first"
    ;;
timed-2)
    lines=/sys/bus/pci/drivers/arctic_niu/0*/lines
    image_sha=$(arctic_guest_image_sha "$ARCTIC_GUEST_DIR")
    run_cluster -n 2 --timed -- \
        "echo lines=\$(cat $lines) && niu-ping -n 50 -s 1000000 && niu-bw -n 200 -b 32"
    expect "timed mode takes the seed's 8 credits" '^==> starting arctic-switch \(.* --credits 8( .*)?\)$'
    expect "and the seed's 16 lines (sysfs)" '^\[node [01]\] lines=16$' 2
    expect "the cluster's clock started on both nodes" '^\[node [01]\] ARCTIC: node [01] running: ' 2
    expect "every reply right" '^\[node 0\] niu-ping: 350 replies checked, 0 wrong: PASS$'
    expect "every message and block right" '^\[node [01]\] niu-bw: node [01]: 0 wrong: PASS$' 2
    expect "the switch kept the time" '^timed: clock started, lookahead 1425 ns; [1-9][0-9]* syncs, [1-9][0-9]* grants, [1-9][0-9]* packets routed, [1-9][0-9]* deliveries$'
    expect "no node lost the cluster's time" "cluster's time is lost" 0
    expect "both nodes ok" '^node [01]: ok$' 2
    expect "no node lingered and powered off: each waited, halted, until the launcher ended the cluster" 'reboot: Power down' 0
    expect "the report names StarT's processor, the default" '^processor: pentium \(seed 003 §2\.1\.1\), 8 ns per instruction$'
    expect "and the image the figures belong to" "^image ${image_sha:0:12}, kernel [0-9]+\.[0-9]+\.[0-9]+-[0-9]+-amd64 \(Debian [^ )]+\)$"
    ;;
timed-snapshot-2)
    # docs/snapshots.md §5: a timed cluster saved at its start barrier
    # (each guest stopped at TIME_CTRL.PAUSE) and started from it gives
    # the virtual times of a cold boot, to the nanosecond.
    snap=$(mktemp -d)
    program="niu-ping -n 50"
    run_cluster -n 2 --timed --save-at-start "$snap/t" -- "$program"
    expect "saved at the start" "^=== saved 2 nodes at the start to $snap/t: boot [0-9]+s, save [0-9]+s, "
    expect "before the cluster's clock started" 'ARCTIC: node [01] running: ' 0
    expect_snapshot_files "$snap/t" cluster.json node0.state node1.state
    run_cluster -n 2 --timed --from "$snap/t" -- "$program"
    cp "$out" "$out.restored"
    expect "restored, not booted" "^==> all 2 nodes restored from $snap/t in [0-9]+s; starting the program on every node\$"
    expect "the clock started on both restored nodes" '^\[node [01]\] ARCTIC: node [01] running: ' 2
    expect "every reply right" '^\[node 0\] niu-ping: 350 replies checked, 0 wrong: PASS$'
    expect "no node lost the cluster's time" "cluster's time is lost" 0
    run_cluster -n 2 --timed -- "$program"
    same_node_lines "$out.restored" 2 \
        'niu-ping: |\] +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$|ARCTIC-RESULT' 9 \
        "a cold boot and the run from its start (every virtual time)"
    rm -rf "$snap" "$out.restored" "$out.diff"
    ;;
timed-fidelity-2|timed-fidelity-16)
    nodes=${case_name#timed-fidelity-}
    "$root/scripts/niu-timed-fidelity" -n "$nodes" --log "$out.runs" \
        >"$out" 2>&1
    cat "$out"
    rm -f "$out.runs"
    expect "every measure within 5 % of the model" '^niu-timed-fidelity: [0-9]+ measure\(s\), PASS$'
    if [ "$nodes" = 16 ]; then
        expect "across seven routers" '^latency: niu-ping node 0 <-> node 8 \(7 router\(s\)\)'
        expect "two senders into one" '^DMA, two senders into one, node [12], MB/s ' 2
    fi
    ;;
timed-clock-4)
    # One clock (docs/timed-mode.md, "One clock"): on 4 timed nodes of
    # seed 001's processor, with barriers flowing, every read of
    # CLOCK_MONOTONIC and of the NIU's TIME_NOW fits the TSC plus one
    # constant, and both clocks move alike end to end; the same with an
    # unused kernel argument, which moved fft's printed time by 57 %.
    for pad in "" "padx=1"; do
        extra=()
        [ -z "$pad" ] || extra=(-A "$pad")
        run_cluster -n 4 --timed --cpu 88100 "${extra[@]}" -- \
            "niu-clock -n 10000 -m && niu-clock -n 50 -c -m && ! NIU_CLOCK_SKEW_PPM=1000 niu-clock -n 2000 -m"
        expect "CLOCK_MONOTONIC fits the TSC on every node ${pad:+($pad)}" '^\[node [0-3]\] niu-clock: node [0-3]: 10000 samples of CLOCK_MONOTONIC against the TSC over [0-9]+ ns: one offset fits every sample yes' 4
        expect "TIME_NOW fits the TSC on every node ${pad:+($pad)}" '^\[node [0-3]\] niu-clock: node [0-3]: 50 samples of TIME_NOW against the TSC over [0-9]+ ns: one offset fits every sample yes' 4
        # The check can fail: a clock 1000 ppm fast fits no one offset.
        expect "a clock 1000 ppm fast is caught ${pad:+($pad)}" '^\[node [0-3]\] niu-clock: node [0-3]: 2000 samples of CLOCK_MONOTONIC against the TSC over [0-9]+ ns: one offset fits every sample NO' 4
        expect "and only that one" 'first sample that fits no common offset' 4
        expect "the cluster's time and the clock move alike ${pad:+($pad)}" '^\[node [0-3]\] niu-clock: node [0-3]: the cluster.s time moved [0-9]+ ns, CLOCK_MONOTONIC between [0-9]+ and [0-9]+ ns around it: alike$' 12
        expect "every node ok ${pad:+($pad)}" '^node [0-3]: ok$' 4
    done
    ;;
timed-fft-4)
    # One program in three settings that change nothing it models: fft
    # on 4 timed nodes of StarT's processor (the main job's) alone, alone
    # with an unused kernel argument, and inside the whole suite (the main
    # job).  Its parallel times agree within 2 % and its serial times
    # within 0.01 % (docs/timed-mode.md, "One clock"); 9 % and 5 % apart
    # when the cluster's clock started at whatever phase of the guest's
    # timer tick the boot left, and 8.9 % apart when libniu made its
    # stash on first use (inside the suite, inside fft's closing barrier).
    parallel=() serial=()
    for how in alone padx suite; do
        extra=()
        program="niu-suite fft"
        [ "$how" != padx ] || extra=(-A padx=1)
        [ "$how" != suite ] || program=niu-suite
        run_cluster -n 4 --timed "${extra[@]}" -- "$program"
        expect "fft right ($how)" '^\[node 0\] niu-suite: fft .* PASS$'
        times=$(grep -aoE '^\[node 0\] niu-suite: fft +times parallel_ns=[0-9]+ serial_ns=[0-9]+$' "$out" |
                sed -E 's/.*parallel_ns=([0-9]+) serial_ns=([0-9]+)/\1 \2/')
        parallel+=("${times% *}")
        serial+=("${times#* }")
    done
    within "fft's parallel times (alone, padx=1, in the suite)" 2 "${parallel[@]}"
    within "fft's serial times (alone, padx=1, in the suite)" 0.01 "${serial[@]}"
    ;;
timed-share-2)
    # A program brought in with --share, as docs/developing.md says: in
    # timed mode a 9p read is served at host time (two runs of the same
    # niu-ping from a 9p /host differed), so every guest gets a copy.
    # Each pair of runs: the second beside a busy loop taking a host core;
    # every node's lines must be the same.
    share=$(mktemp -d)
    trap 'rm -f "$out" "$out".*; rm -rf "$share"' EXIT
    cp "$ARCTIC_GUEST_DIR/build/root/bin/niu-ping" "$share/"
    printf '%s\n' 'echo written >/host/from-guest' 'exec /host/niu-ping -n 30' \
        >"$share/run.sh"
    for program in "sh /host/run.sh" "niu-ping -n 30"; do
        for run in 1 2; do
            beside_busy_loop_if_2 "$run" \
                run_cluster -n 2 --timed --share "$share" -- "$program"
            expect "the directory is copied, not shared ($program, run $run)" \
                'timed mode: .* \(2 files, [0-9]+ KiB\) is copied into every guest as /host at boot' 1
            expect "every guest has its copy ($program, run $run)" \
                '^\[node [01]\] ARCTIC: /host is a copy of the host.s shared directory, taken at boot$' 2
            expect "no 9p device ($program, run $run)" 'sharing .* as /host|9p' 0
            expect "niu-ping passed ($program, run $run)" \
                '^\[node 0\] niu-ping: [0-9]+ replies checked, 0 wrong: PASS$'
            node_lines "$out" 2 >"$out.run$run"
        done
        rows=$(grep -acE '^\[node 0\] +[0-9]+ +[0-9.]+ ' "$out.run1")
        if [ "$rows" = 7 ] && cmp -s "$out.run1" "$out.run2"; then
            echo "ok: '$program': both runs printed the same $(wc -l <"$out.run1") lines, niu-ping's 7 rows among them"
        else
            echo "FAIL: '$program': the two runs differ (or niu-ping printed $rows rows, not 7)"
            diff "$out.run1" "$out.run2"
            failures=$((failures + 1))
        fi
    done
    if [ ! -e "$share/from-guest" ]; then
        echo "ok: what a guest wrote to /host stayed in the guest"
    else
        echo "FAIL: a guest's write reached the host's directory"
        failures=$((failures + 1))
    fi
    ;;
timed-determinism-4|timed-faults-4)
    # The same run twice, the second with a host core taken.
    if [ "$case_name" = timed-faults-4 ]; then
        args=(-n 4 --timed -L 64 -f '*:drop=0.01,dup=0.01,corrupt=0.01' --
              "niu-soak -n 3000")
        keep='niu-soak:|^(drops|faults):'
    else
        args=(-n 4 --timed)
        keep='^\[node'
    fi
    for run in 1 2; do
        beside_busy_loop_if_2 "$run" "$root/scripts/niu-cluster" --no-build \
            -t 1700 "${args[@]}" >"$out.$run" 2>&1
        echo "run $run: niu-cluster exited $?"
        node_lines "$out.$run" 4 "$keep" >"$out.$run.nodes"
        grep -aE '^(drops|faults):' "$out.$run" >>"$out.$run.nodes" || true
    done
    cat "$out.1"
    echo "--- the second run, with a busy loop ---"
    cat "$out.2"
    cat "$out.1" >"$out"
    if cmp -s "$out.1.nodes" "$out.2.nodes" && [ -s "$out.1.nodes" ]; then
        echo "ok: both runs printed the same, line for line ($(wc -l <"$out.1.nodes") lines)"
    else
        echo "FAIL: the runs differ:"
        diff "$out.1.nodes" "$out.2.nodes" | head -40
        failures=$((failures + 1))
    fi
    if [ "$case_name" = timed-faults-4 ]; then
        expect "every message right, on every node" '^\[node [0-3]\] niu-soak: node [0-3]: from node [0-3]: .*wrong 0, missing 0, repeated 0, DMA wrong 0, DMA out of order 0: PASS$' 4
        expect "the switch dropped packets" '^drops: fault=[1-9][0-9]*'
    else
        expect "every kernel verified, with virtual times" '^\[node 0\] niu-suite: (dmm|fft|gauss|jacobi|sort) +times parallel_ns=[0-9]+ serial_ns=[0-9]+$' 5
        expect "every node's breakdown, in virtual time (the same both runs: above)" '^\[node ([0-3])\] niu-suite: (dmm|fft|gauss|jacobi|sort) +node=\1 breakdown parallel_ns=[0-9]+ compute_ns=[0-9]+ send_ns=[1-9][0-9]* recv_ns=[1-9][0-9]* wait_ns=[0-9]+ barrier_ns=[0-9]+ \(virtual time\)$' 20
    fi
    expect "all nodes ok" '^node [0-3]: ok$' 4
    rm -f "$out".[12] "$out".[12].nodes
    ;;
timed-mpi-2)
    # MPI over niu0 in timed mode: MPICH, UCX's TCP and the guest
    # kernel's IP stack all run on virtual time, so the same job twice,
    # the second beside a busy loop, prints the same round trips to the
    # tenth of a microsecond on both nodes.
    for run in 1 2; do
        beside_busy_loop_if_2 "$run" \
            run_cluster -n 2 --timed -- "mpiexec -n 2 mpi-pingpong -n 10 -m 1024"
        expect "a ping-pong row per size, 0 to 1 KiB (run $run)" '^\[node 0\] +[0-9]+ +[0-9]+\.[0-9] +[0-9]+\.[0-9] +[0-9]+\.[0-9] +[0-9]+\.[0-9]{2}$' 12
        expect "every byte right (run $run)" '^\[node 0\] mpi-pingpong: every byte right \(0 wrong messages\)$'
        expect "both nodes ok (run $run)" '^node [01]: ok$' 2
        node_lines "$out" 2 >"$out.run$run"
    done
    if cmp -s "$out.run1" "$out.run2"; then
        echo "ok: both runs printed the same $(wc -l <"$out.run1") lines"
    else
        echo "FAIL: the two timed runs differ"
        diff "$out.run1" "$out.run2" | head -40
        failures=$((failures + 1))
    fi
    rm -f "$out".run[12]
    ;;
mpi-4)
    # An MPI program built with Debian's mpicc, unchanged, launched by
    # MPICH's mpiexec (Hydra, through guest/mpi/mpiexec) on 4 nodes over
    # niu0: one rank per node, each on its own node, pi right; then a
    # ping-pong between ranks on two nodes with every byte checked; then
    # a program that aborts: every node ends with the job's status.
    run_cluster -n 4 -- "mpiexec -n 4 cpi && mpiexec -n 2 mpi-pingpong -n 50 -m 65536"
    expect "the MPI layer comes with mpiexec" '^==> .*MPI layer' 1
    for k in 0 1 2 3; do
        expect "rank $k runs on node$k" "^\[node 0\] cpi: rank $k of 4 on node$k\$"
    done
    expect "pi right to 1e-9" '^\[node 0\] cpi: pi is approximately 3\.14159265358[0-9]+, error [0-9.]+e-(1[0-9]|[2-9][0-9]), 1000000 intervals, 4 ranks, [0-9.]+ s$'
    expect "a ping-pong row per size, 0 to 64 KiB" '^\[node 0\] +[0-9]+ +[0-9]+\.[0-9] +[0-9]+\.[0-9] +[0-9]+\.[0-9] +[0-9]+\.[0-9]{2}$' 18
    expect "every byte of every echo right" '^\[node 0\] mpi-pingpong: every byte right \(0 wrong messages\)$'
    expect "every node ok" '^node [0-3]: ok$' 4
    run_cluster_expecting 2 --no-build -t 170 -n 2 -- "mpiexec -n 2 cpi 0"
    expect "the program says why" '^\[node 0\] cpi: INTERVALS must be at least 1, not .0.$'
    expect "every node ends with the job's status" '^node [01]: FAILED \(status 2\)' 2
    ;;
stale-loop)
    runs=${ARCTIC_STALE_RUNS:-20}
    "$root/scripts/niu-stale-loop" -r "$runs" >"$out" 2>&1
    cat "$out"
    expect "every run passed" "^niu-stale-loop: 0 of $runs runs failed "
    ;;
*)
    echo "unknown case '$case_name'"
    exit 2
    ;;
esac
[ "$failures" = 0 ]
