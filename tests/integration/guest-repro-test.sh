#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The guest image is reproducible (docs/timed-mode.md, "Which image"):
# this checkout's guest/, include/ and scripts/, copied to two directories
# of different names and lengths, each build its image with
# scripts/build-guest, one inside its copy and one outside, the second
# under another umask and time zone, and later.  The two images must have
# the same hash (of vmlinuz and initramfs.cpio.gz, the one niu-cluster
# prints beside timed figures) and the same MPI layer (mpi.cpio.gz, whose
# hash joins it when a run uses it), no file of either may name the directory
# it was built in, and every file in the initramfs must be root's with the
# fixed time.  The unpacked kernel in $ARCTIC_CACHE is reused: about a
# minute, two builds of the driver, libniu, the programs and the
# initramfs.  Exits 77 (skip) where scripts/build-guest has not run (no
# guest kernel headers).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/scripts/lib.sh"

if [ ! -r "$ARCTIC_GUEST_DIR/kdir" ] || [ ! -d "$(cat "$ARCTIC_GUEST_DIR/kdir")" ]; then
    echo "SKIP: the guest kernel's headers are not installed; run scripts/build-guest"
    exit 77
fi
work=$(mktemp -d /tmp/arctic-repro.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

ok() { echo "ok: $1"; }
fail() { echo "FAIL: $1"; failures=$((failures + 1)); }

# Copy the sources to $1 and build the image into $2 (an explicit
# directory: an ARCTIC_GUEST_DIR of the caller's must not be overwritten),
# under umask $3 in time zone $4.
build_copy() {
    local checkout=$1 image=$2
    mkdir -p "$checkout" "$image"
    if (umask "$3" &&
        cp -r "$root/guest" "$root/include" "$root/scripts" "$checkout/" &&
        TZ=$4 ARCTIC_GUEST_DIR="$image" "$checkout/scripts/build-guest") \
           >"$image.log" 2>&1; then
        ok "built in $checkout into $image (umask $3, TZ $4)"
    else
        tail -n 30 "$image.log"
        fail "scripts/build-guest in $checkout"
        exit 1
    fi
}

a_src=$work/a a_img=$work/a/build/guest
b_src=$work/another-checkout/arctic b_img=$work/elsewhere/images/guest
build_copy "$a_src" "$a_img" 022 UTC
sleep 1     # a second later: any build time that leaks differs
build_copy "$b_src" "$b_img" 077 Pacific/Auckland

# The initramfs of image $1, unpacked into $2.
unpack() {
    mkdir -p "$2"
    (cd "$2" && zcat "$1/initramfs.cpio.gz" | cpio -id --quiet --no-absolute-filenames)
}
unpack "$a_img" "$work/unpacked-a"
unpack "$b_img" "$work/unpacked-b"

sha_a=$(arctic_guest_image_sha "$a_img")
sha_b=$(arctic_guest_image_sha "$b_img")
if [ "$sha_a" = "$sha_b" ]; then
    ok "both images have the same hash, ${sha_a:0:12}"
else
    fail "the images differ (${sha_a:0:12} and ${sha_b:0:12}); files that differ:"
    differ=$(diff -rq "$work/unpacked-a" "$work/unpacked-b")
    cmp -s "$a_img/vmlinuz" "$b_img/vmlinuz" || differ+=$'\n''vmlinuz'
    head -n 20 <<<"${differ:-none: the archives differ in what cpio keeps of them (mode, owner, time, order)}"
fi

# The MPI layer (niu-cluster --mpi) names timed MPI figures too (its hash
# joins the image's in the report): the same bytes from both builds.
if cmp -s "$a_img/mpi.cpio.gz" "$b_img/mpi.cpio.gz"; then
    ok "both MPI layers are the same bytes, $(sha256sum <"$a_img/mpi.cpio.gz" | cut -c1-12)"
else
    fail "the MPI layers differ; files that differ:"
    mkdir -p "$work/mpi-a" "$work/mpi-b"
    (cd "$work/mpi-a" && zcat "$a_img/mpi.cpio.gz" | cpio -id --quiet --no-absolute-filenames)
    (cd "$work/mpi-b" && zcat "$b_img/mpi.cpio.gz" | cpio -id --quiet --no-absolute-filenames)
    diff -rq "$work/mpi-a" "$work/mpi-b" | head -n 20
fi

# Every build directory is under $work: a file that names it leaks one.
leaks=$(grep -rlF "$work" "$work/unpacked-a" "$work/unpacked-b")
if [ -z "$leaks" ]; then
    ok "no file of either image names its build directory"
else
    fail "build paths in $(wc -l <<<"$leaks") file(s) of the images, e.g.:"
    while read -r file; do
        echo "  $file: $(strings "$file" | grep -F "$work" | sort -u | head -n 3 | paste -sd' ')"
    done < <(head -n 4 <<<"$leaks")
fi

# What cpio keeps of each file: owner, group and time, from the newc
# headers (110 bytes each, fields in hexadecimal).
owners=$(zcat "$b_img/initramfs.cpio.gz" | python3 -c '
import sys
data, at, bad, count = sys.stdin.buffer.read(), 0, [], 0
while True:
    head = data[at:at + 110]
    assert head[:6] == b"070701", "not a newc archive at %d" % at
    field = lambda i: int(head[6 + 8 * i:14 + 8 * i], 16)
    mode, uid, gid, mtime, size, namesize = (field(1), field(2), field(3),
                                             field(5), field(6), field(11))
    name = data[at + 110:at + 110 + namesize - 1].decode()
    if name == "TRAILER!!!":
        break
    count += 1
    if (uid, gid, mtime) != (0, 0, 0):
        bad.append("%s uid %d gid %d mtime %d" % (name, uid, gid, mtime))
    at = (at + 110 + namesize + 3) & ~3
    at = (at + size + 3) & ~3
print("%d files" % count if not bad else "\n".join(bad[:10]))
')
if [[ "$owners" =~ ^[0-9]+\ files$ ]]; then
    ok "every file in the initramfs is root's, dated at the epoch ($owners)"
else
    fail "files with a builder's owner or time:"
    echo "$owners"
fi
[ "$failures" = 0 ]
