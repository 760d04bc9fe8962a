# SPDX-License-Identifier: MIT
# Shared shell helpers for the project's scripts: where the cache lives,
# progress messages, and the QEMU version the project pins.  Sourced, never
# run.  What is the same for every checkout (Debian's QEMU source, the
# firmware, the guest kernel) lives under $ARCTIC_CACHE, outside the work
# tree, so a fresh clone reuses it.  What a checkout builds from its own
# sources lives apart, so two checkouts never overwrite each other's: its
# QEMU (patched with its device) under $ARCTIC_CACHE/qemu/$ARCTIC_QEMU_KEY,
# its guest image (driver, programs) in $ARCTIC_GUEST_DIR, under build/.
# A second run only rebuilds what changed.

ARCTIC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${ARCTIC_CACHE:=/var/cache/arctic-niu}"
# The checkout's name and a hash of its path: stable for one checkout,
# different for two (docs/developing.md).
arctic_checkout_key() {
    local sum
    sum=$(printf '%s' "$ARCTIC_ROOT" | sha256sum)
    printf '%s-%s\n' "$(basename "$ARCTIC_ROOT" | tr -c 'A-Za-z0-9_.\n-' _)" "${sum:0:8}"
}
: "${ARCTIC_QEMU_KEY:=$(arctic_checkout_key)}"
[[ "$ARCTIC_QEMU_KEY" =~ ^[A-Za-z0-9_.+-]+$ ]] ||
    { echo "error: ARCTIC_QEMU_KEY '$ARCTIC_QEMU_KEY': letters, digits and _.+- only" >&2; exit 1; }
ARCTIC_QEMU_DIR="$ARCTIC_CACHE/qemu/$ARCTIC_QEMU_KEY"
: "${ARCTIC_GUEST_DIR:=$ARCTIC_ROOT/build/guest}"
# The QEMU series the device is written for; the newest Debian source
# package of this series is used.
ARCTIC_QEMU_SERIES=10.0
# The guest kernel's series (Debian bookworm's): scripts/build-guest takes
# its newest image, scripts/checkpatch the kernel's checkpatch.pl from it.
ARCTIC_LINUX_SERIES=6.1
# The machine every guest of a cluster or a benchmark runs on.  No HPET:
# Linux leaves its HPET timer in periodic mode with the interrupt off once
# the local APIC timer takes over, and QEMU's HPET, true to the HPET spec
# ("the timer will still operate"), then wakes the main loop 250 times a
# second for nothing; an idle node cost 1.6 % of a host core with it and
# 0.4 % without (docs/scale.md).  The guests keep the TSC as clocksource.
ARCTIC_MACHINE=q35,hpet=off
# The seed-sized retransmit buffer and link credits (ARCTIC_SEED_LINES in
# include/arctic/niu-hw.h, ARCTIC_LINK_SEED_CREDITS in
# include/arctic/link.h; tests/unit/niu-cluster-args-test.sh checks they
# agree): timed mode's, and niu-cluster --seed-buffers'.
ARCTIC_SEED_LINES=16
ARCTIC_SEED_CREDITS=8

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The run directory a niu-cluster output (file $1) names: its switch's
# socket lives there ("==> starting arctic-switch (-s DIR/switch.sock").
arctic_run_dir_of() {
    sed -nE 's|^==> starting arctic-switch \(-s (/[^ ]+)/switch\.sock .*|\1|p' "$1" |
        head -n 1
}

# The PIDs of one cluster's processes (QEMUs, switch, host launchers):
# those whose command line names its run directory $1, which no other
# cluster's does; a pattern such as 'qemu-system-x86_64 .*arctic-cluster'
# would also find another cluster running on the machine.
arctic_run_pids() {
    local dir=${1:?arctic_run_pids: no run directory}
    pgrep -f -- "${dir//./\\.}/" || true
}

# Timed mode copies a --share directory into every guest's memory
# (scripts/niu-cluster-host): refuse one over a quarter of it.  Sets
# ARCTIC_SHARE_KIB to the directory's size.
arctic_share_copy_fits() {
    local dir=$1 memory_mb=$2 kib limit
    kib=$(du -sk "$dir" | cut -f1)
    ARCTIC_SHARE_KIB=$kib
    limit=$((memory_mb * 1024 / 4))
    [ "$kib" -le "$limit" ] ||
        die "--share $dir holds $((kib / 1024)) MiB; timed mode copies it into the memory of every guest ($memory_mb MiB), at most a quarter of it ($((limit / 1024)) MiB): share a smaller directory, give more --memory, or use the fast mode, whose /host is 9p"
}

# The MPI layer of guest image directory $1 (scripts/build-guest's
# mpi.cpio.gz, docs/guest.md "MPI programs"): its path, or a line naming
# $2 (the option that wants it) and how to get it, and exit.
arctic_mpi_layer() {
    local layer="$1/mpi.cpio.gz"
    [ -r "$layer" ] ||
        die "$2: no MPI layer ($layer) on $(hostname): scripts/build-guest builds it (an image copied to another host carries none)"
    echo "$layer"
}

# Run "$@" with its output in a log file; on failure show the log's tail.
run_logged() {
    local logfile=$1; shift
    if ! "$@" >"$logfile" 2>&1; then
        tail -n 40 "$logfile" >&2
        die "'$*' failed; full log in $logfile"
    fi
}

# Set ARCTIC_QEMU_SRC, _BUILD, _BIN and ARCTIC_FIRMWARE_DIR from the
# version recorded by scripts/build-qemu.
arctic_qemu_paths() {
    local version_file="$ARCTIC_QEMU_DIR/current-version"
    [ -r "$version_file" ] ||
        die "QEMU is not built for this checkout yet ($ARCTIC_QEMU_DIR): run scripts/build-qemu"
    ARCTIC_QEMU_VERSION=$(cat "$version_file")
    ARCTIC_QEMU_SRC="$ARCTIC_QEMU_DIR/src-$ARCTIC_QEMU_VERSION"
    ARCTIC_QEMU_BUILD="$ARCTIC_QEMU_DIR/build-$ARCTIC_QEMU_VERSION"
    ARCTIC_QEMU_BIN="$ARCTIC_QEMU_BUILD/qemu-system-x86_64"
    ARCTIC_FIRMWARE_DIR="$ARCTIC_CACHE/firmware"
}

# Run this project's QMP script $1 (niu-snapshot, niu-state) with the rest
# as its arguments, on QEMU's own QMP library (python/ in the source tree
# arctic_qemu_paths found).
arctic_qmp_script() {
    local script=$1
    shift
    PYTHONPATH="$ARCTIC_QEMU_SRC/python" "$ARCTIC_ROOT/scripts/$script" "$@"
}

# Build (when $1 is yes) what a cluster needs, or find it: this checkout's
# QEMU (arctic_qemu_paths), arctic-switch unless $ARCTIC_SWITCH names one
# (with the project's meson targets given after $1), and the guest image.
# Sets switch_bin and guest; dies naming the script to run for anything
# missing.  Shared by niu-cluster and niu-bench.
arctic_cluster_prepare() {
    local build=$1
    shift
    switch_bin=${ARCTIC_SWITCH:-$ARCTIC_ROOT/build/switch/arctic-switch}
    guest="$ARCTIC_GUEST_DIR"
    if [ "$build" = yes ]; then
        "$ARCTIC_ROOT/scripts/setup-deps"
        log "QEMU with the arctic-niu device"
        "$ARCTIC_ROOT/scripts/build-qemu" >/dev/null
        arctic_qemu_paths
        if [ -z "${ARCTIC_SWITCH:-}" ]; then
            if [ ! -f "$ARCTIC_ROOT/build/build.ninja" ]; then
                log "configuring the project in $ARCTIC_ROOT/build"
                meson setup "$ARCTIC_ROOT/build" "$ARCTIC_ROOT" \
                    "-Dqemu_build=$ARCTIC_QEMU_BUILD" >/dev/null
            fi
            log "building arctic-switch${1:+ and the host helpers}"
            run_logged "$ARCTIC_CACHE/niu-cluster-switch.log" \
                meson compile -C "$ARCTIC_ROOT/build" switch/arctic-switch "$@"
        fi
        log "guest image"
        "$ARCTIC_ROOT/scripts/build-guest" >/dev/null
    else
        arctic_qemu_paths
    fi
    [ -x "$ARCTIC_QEMU_BIN" ] || die "no QEMU at $ARCTIC_QEMU_BIN (run scripts/build-qemu)"
    [ -x "$switch_bin" ] || die "no arctic-switch at $switch_bin (run meson compile -C build)"
    [ -r "$guest/vmlinuz" ] && [ -r "$guest/initramfs.cpio.gz" ] ||
        die "no guest image in $guest (run scripts/build-guest)"
}

# The one teardown of every script that starts processes: on its exit,
# and on INT, TERM and HUP (with the shell's statuses 130, 143, 129), the
# function named $1 runs once (it stops what the script started), then the
# script exits with the status it had.
arctic_on_exit() {
    # shellcheck disable=SC2064  # $1 now, by design
    trap "arctic_exit_with $1" EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
}
arctic_exit_with() {
    local status=$?
    trap - EXIT INT TERM HUP
    "$1" || true        # a teardown that fails does not change the status
    exit "$status"
}

# A run directory $1 at the end: removed, or kept if $2 is "yes", and
# then said (on standard error, or with the words $3 on standard output).
arctic_leave_run_dir() {
    local dir=$1 keep=$2 said=${3:-}
    [ -n "$dir" ] || return 0
    if [ "$keep" != yes ]; then
        rm -rf "$dir"
    elif [ -n "$said" ]; then
        echo "$said $dir"
    else
        log "run directory kept: $dir"
    fi
}

# The device property that makes a vCPU give its core away after its busy
# poll woke the switch (x-link-kick-yield, off by default), for $1 nodes of
# one host on link transport $2, unless the properties $3 set it already:
# on when the nodes' spinning vCPUs can take every core, so that no core
# is idle for the switch they woke; never with fewer nodes than cores, nor
# on a chardev link, which is not polled (docs/device-internals.md §2.1).
arctic_kick_yield_prop() {
    if [ "$1" -ge "$(nproc)" ] && [ "$2" != chardev ] &&
       [[ "$3" != *x-link-kick-yield=* ]]; then
        echo ",x-link-kick-yield=on"
    fi
}

# Stop the child processes given: a TERM to each, then wait for each.
arctic_stop_children() {
    local pid
    for pid in "$@"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "$@"; do
        wait "$pid" 2>/dev/null || true
    done
}

# Set link_args (QEMU options before -device) and link_prop (the
# arctic-niu property) for link transport $1 to the switch at $2: its UNIX
# socket's path, or tcp:HOST:PORT.  Transports: thread (the NIU's link
# thread; on a UNIX socket it offers the switch shared-memory rings),
# socket (the same thread kept on its socket, link-rings=off) and chardev
# (a -chardev socket served by QEMU's main loop).
arctic_link_args() {
    local hostport=${2#tcp:}
    if [ "$1" = thread ]; then
        link_args=()
        link_prop="link-socket=$2"
    elif [ "$1" = socket ]; then
        link_args=()
        link_prop="link-socket=$2,link-rings=off"
    elif [ "$hostport" != "$2" ]; then
        link_args=(-chardev "socket,id=link,host=${hostport%:*},port=${hostport##*:},reconnect-ms=200")
        link_prop="chardev=link"
    else
        link_args=(-chardev "socket,id=link,path=$2,reconnect-ms=200")
        link_prop="chardev=link"
    fi
}

# Does a process listen on the UNIX socket path $1?  The file alone says
# nothing: a switch killed with SIGKILL leaves it behind, and the next one
# unlinks it before binding its own (/proc/net/unix lists only sockets a
# process holds; flags 00010000: listening).
arctic_unix_listening() {
    awk -v path="$1" 'NR > 1 && $4 == "00010000" && $8 == path { found = 1 }
                      END { exit !found }' /proc/net/unix
}

# Wait up to 10 s for the arctic-switch of pid $1 to listen on its UNIX
# socket $2 and, if $4 is "tcp", to say in its log $3 which TCP port it
# listens on; set ARCTIC_SWITCH_TCP_PORT to it.  Dies with the log if the
# switch exits or says nothing in time.
arctic_wait_switch() {
    local pid=$1 sock=$2 logfile=$3 tcp=${4:-} said= up=
    ARCTIC_SWITCH_TCP_PORT=
    for _ in $(seq 100); do
        # The log may not exist yet: "switch >log &" opens it in the child.
        [ "$tcp" != tcp ] || [ ! -e "$logfile" ] ||
            said=$(sed -n 's/.*listening for NIUs on TCP port \([1-9][0-9]*\)$/\1/p' "$logfile")
        arctic_unix_listening "$sock" && up=yes
        [ -n "$up" ] && { [ "$tcp" != tcp ] || [ -n "$said" ]; } && break
        kill -0 "$pid" 2>/dev/null || { cat "$logfile" >&2 2>/dev/null; die "arctic-switch did not start"; }
        sleep 0.1
    done
    [ -n "$up" ] || die "arctic-switch did not create its socket"
    [ "$tcp" != tcp ] || [ -n "$said" ] || die "arctic-switch did not say its TCP port"
    ARCTIC_SWITCH_TCP_PORT=$said
}

# The name a guest image (directory $1) is cached under on other hosts:
# the SHA-256 of its kernel and initramfs, in that order.
arctic_guest_image_sha() {
    local sum
    sum=$(cat "$1/vmlinuz" "$1/initramfs.cpio.gz" | sha256sum)
    echo "${sum%% *}"
}

# What names the figures of a timed run on guest image $1 (docs/timed-mode.md,
# "Which image"): "image <hash>, kernel <release> (Debian <version>)", the
# hash the first 12 digits of arctic_guest_image_sha, the kernel's version
# read from its bzImage: the setup header (magic "HdrS" at 0x202) holds at
# 0x20e the offset, less 0x200, of the version string.
arctic_guest_image_id() {
    local sha vmlinuz="$1/vmlinuz" offset banner release debian
    sha=$(arctic_guest_image_sha "$1")
    release=unknown
    if [ "$(dd if="$vmlinuz" bs=1 skip=$((0x202)) count=4 status=none | tr -d '\0')" = HdrS ]; then
        offset=$(od -An -tu2 --endian=little -j $((0x20e)) -N 2 "$vmlinuz")
        # The string ends at its NUL (read's delimiter).
        IFS= read -r -d '' banner < <(dd if="$vmlinuz" bs=1 count=256 \
            skip=$((offset + 0x200)) status=none) || true
        release=${banner%% *}
        debian=$(sed -n 's/.* Debian \([^ ]*\).*/\1/p' <<<"$banner")
        [ -z "$debian" ] || release+=" (Debian $debian)"
    fi
    echo "image ${sha:0:12}, kernel $release"
}
