# SPDX-License-Identifier: MIT
# Shared shell helpers for the project's scripts: where the cache lives,
# progress messages, and the QEMU version the project pins.  Sourced, never
# run.  Everything expensive (QEMU source and build, firmware, guest kernel)
# lives under $ARCTIC_CACHE, outside the work tree, so a fresh clone reuses
# it and a second run only rebuilds what changed.

ARCTIC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${ARCTIC_CACHE:=/var/cache/arctic-niu}"
# The QEMU series the device is written for; the newest Debian source
# package of this series is used.
ARCTIC_QEMU_SERIES=10.0

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

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
    local version_file="$ARCTIC_CACHE/qemu/current-version"
    [ -r "$version_file" ] || die "QEMU is not built yet: run scripts/build-qemu"
    ARCTIC_QEMU_VERSION=$(cat "$version_file")
    ARCTIC_QEMU_SRC="$ARCTIC_CACHE/qemu/src-$ARCTIC_QEMU_VERSION"
    ARCTIC_QEMU_BUILD="$ARCTIC_CACHE/qemu/build-$ARCTIC_QEMU_VERSION"
    ARCTIC_QEMU_BIN="$ARCTIC_QEMU_BUILD/qemu-system-x86_64"
    ARCTIC_FIRMWARE_DIR="$ARCTIC_CACHE/firmware"
}

# Set link_args (QEMU options before -device) and link_prop (the
# arctic-niu property) for link transport $1 (thread or chardev) to the
# switch at $2: its UNIX socket's path, or tcp:HOST:PORT.
arctic_link_args() {
    local hostport=${2#tcp:}
    if [ "$1" = thread ]; then
        link_args=()
        link_prop="link-socket=$2"
    elif [ "$hostport" != "$2" ]; then
        link_args=(-chardev "socket,id=link,host=${hostport%:*},port=${hostport##*:},reconnect-ms=200")
        link_prop="chardev=link"
    else
        link_args=(-chardev "socket,id=link,path=$2,reconnect-ms=200")
        link_prop="chardev=link"
    fi
}
