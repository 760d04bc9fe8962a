#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/niu-cluster refuses what cannot work before it boots anything:
# too little guest memory, a program the guest image does not have (each
# word that starts a command of PROGRAM), a --share directory too big to
# copy into timed guests, a snapshot or --clone option that cannot work,
# and it says so in one line.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/scripts/lib.sh"
guest=$ARCTIC_GUEST_DIR
fail=0

# $1: what; $2: the error wanted; the rest: niu-cluster's arguments.
refused() {
    local desc=$1 want=$2 out status
    shift 2
    out=$("$root/scripts/niu-cluster" --no-build -t 30 "$@" 2>&1)
    status=$?
    if [ "$status" != 0 ] && grep -qF -- "$want" <<<"$out" &&
       ! grep -q '^==> booting' <<<"$out"; then
        echo "ok: $desc"
    else
        echo "FAIL: $desc (exit $status): $out"
        fail=1
    fi
}

# The launcher's seed-sized buffers are the C constants'.
seed_lines=$(sed -n 's/^ *ARCTIC_SEED_LINES = \([0-9]*\),.*/\1/p' \
             "$root/include/arctic/niu-hw.h")
seed_credits=$(sed -n 's/^ *ARCTIC_LINK_SEED_CREDITS = \([0-9]*\),.*/\1/p' \
               "$root/include/arctic/link.h")
if [ "$seed_lines" = "$ARCTIC_SEED_LINES" ] &&
   [ "$seed_credits" = "$ARCTIC_SEED_CREDITS" ]; then
    echo "ok: lib.sh's seed buffers are niu-hw.h's and link.h's ($seed_lines, $seed_credits)"
else
    echo "FAIL: lib.sh's seed buffers ($ARCTIC_SEED_LINES, $ARCTIC_SEED_CREDITS) are not niu-hw.h's and link.h's ('$seed_lines', '$seed_credits')"
    fail=1
fi

refused "64 MB is too little" "the guest wants at least 128 MB" -m 64 -- niu-ping
refused "memory in words" "--memory wants megabytes" -m lots -- niu-ping
# The processor: a seed's by name, or --shift, never both, and only in
# timed mode.
refused "a processor of no seed" "--cpu wants 88100 or pentium, not '68000'" \
    --timed --cpu 68000 -- niu-ping
refused "--cpu with --shift" "--cpu and --shift both set the time of an instruction" \
    --timed --cpu 88100 --shift 3 -- niu-ping
refused "--cpu for a fast-mode program" "give --timed too" \
    --cpu pentium -- niu-ping
refused "--shift in the fast mode" "give --timed too" --fast --shift 5
refused "--shift out of range" "--shift wants 0..10, not '11'" --timed --shift 11
# A /host path the share lacks, or no share at all, is said before a boot.
refused "a /host program the share lacks" \
    "PROGRAM: /host/nosuch is not in the --share directory" \
    -n 1 --share "$root/tests" -- "/host/nosuch -x"
refused "a /host script with no share" \
    "PROGRAM: /host/run.sh is under /host, but no --share directory was given" \
    -n 1 -- "sh /host/run.sh"
refused "an unknown option in one line" \
    "unknown option '--frobnicate' (scripts/niu-cluster --help lists them)" \
    --frobnicate -- niu-ping
# A cluster saved at the start or cut while it runs (docs/snapshots.md
# §5, §7): this host, a new directory, a cut in the fast mode only;
# --from wants a snapshot.
snap=$(mktemp -d)
touch "$snap/something"
refused "--save-at-start and --from together" "--save-at-start and --from: give one" \
    --save-at-start "$snap/new" --from "$snap" -- niu-ping
refused "a timed cut while the program runs" "--save-after: fast mode only: a timed node saved with its clock running cannot rejoin a cluster" \
    --timed --save-after 5:"$snap/new" -- niu-ping
refused "--save-after without a directory" "--save-after wants SECONDS:DIR, not '5'" \
    --save-after 5 -- niu-ping
refused "--save-after in minutes" "--save-after wants SECONDS:DIR with whole seconds, not '1m'" \
    --save-after 1m:"$snap/new" -- niu-ping
refused "--save-after and --save-at-start" "--save-at-start and --save-after: give one" \
    --save-after 5:"$snap/new" --save-at-start "$snap/new2" -- niu-ping
refused "a cut while a node is killed" "--save-after: not with --restart-switch or --kill" \
    --save-after 5:"$snap/new" -K 1:3 -- niu-ping
refused "--clone --save-after" "--clone: not with --save-after or --from" \
    --clone --save-after 5:"$snap/new" -- niu-ping
refused "a save over a directory in use" "--save-at-start $snap: not empty (a snapshot is never overwritten)" \
    --save-at-start "$snap" -- niu-ping
refused "a save across hosts" "--save-at-start: every node on this host (--launcher local); not with --hosts or Slurm" \
    --hosts a,b --save-at-start "$snap/new" -- niu-ping
refused "a save with 9p" "--save-at-start: not with --share or --module (QEMU's 9p does not migrate while mounted)" \
    --share "$root/tests" --save-at-start "$snap/new" -- niu-ping
refused "--from a directory that is no snapshot" "--from $snap: no cluster.json there" \
    --from "$snap" -- niu-ping
# --clone: a template has no terminal, gdb stub or share of a node.
refused "--clone with a console" "--clone: not with --console, --gdb, --share or --module" \
    --clone -c 0 -- niu-ping
refused "--clone with a share" "--clone: not with --console, --gdb, --share or --module" \
    --clone --share "$root/tests" -- niu-ping
refused "--clone --from" "--clone: not with --save-at-start or --from" \
    --clone --from "$snap" -- niu-ping
refused "--clone and --cold" "--clone and --cold: give one" \
    --clone --cold -- niu-ping
refused "--cold and --clone" "--clone and --cold: give one" \
    --cold --clone
rm -rf "$snap"
# Timed mode copies --share into every guest's memory: at most a quarter.
big=$(mktemp -d)
head -c $((33 * 1024 * 1024)) /dev/zero >"$big/data"
refused "a --share over a quarter of a timed guest's memory" \
    "holds 33 MiB; timed mode copies it into the memory of every guest (128 MiB), at most a quarter of it (32 MiB)" \
    -n 2 -m 128 --timed --share "$big" -- niu-ping
rm -rf "$big"
if [ -r "$guest/initramfs.cpio.gz" ]; then
    refused "a program the image lacks" "the guest image has no niu-pong" \
        -n 1 -- niu-pong
    refused "the second command of a list" "the guest image has no frob" \
        -n 1 -- "niu-ping -n 1 && frob -x; echo done"
    refused "a command after a pipe" "the guest image has no nosuch" \
        -n 1 -- "niu-ping -n 1 | nosuch"
    refused "a command after an assignment" "the guest image has no nosuch" \
        -n 1 -- "FOO=1 BAR=2 nosuch -x"
    if [ -r "$guest/mpi.cpio.gz" ]; then
        # mpiexec, even after an assignment, brings in the MPI layer, whose
        # cpi is then found: only nosuch is missing.
        refused "mpiexec after an assignment brings the MPI layer" \
            "the guest image has no nosuch (" \
            -n 1 -- "UCX_TLS=tcp mpiexec -n 1 cpi; nosuch"
        refused "without mpiexec, no MPI layer: cpi is missing" \
            "the guest image has no cpi nosuch (" -n 1 -- "cpi; nosuch"
    fi
else
    echo "skip: no guest image in $guest (scripts/build-guest)"
fi
exit "$fail"
