#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The device's layers (docs/device-internals.md §1): each calls only the ones
# below it, measured as scripts/xref-count measures it.  The link
# (niu-link*.c; the socket transport's rings, niu-link-rings.c, call only
# the direct rings, never back into its thread), guest-memory access (niu-dma.c) and the interrupts,
# errors and counters (niu-status.c, which asks the link only whether it
# runs on the link thread) are leaves; the test DMA engine (niu-test-dma.c)
# calls only DMA and status; timed mode (niu-time.c) only the link, the
# protocol and status, and reports to the transmit side through
# NiuTimeOps; the end-to-end protocol (niu-e2e.c)
# knows the link and nothing above it, not even the device's state
# (arctic-niu.h).  No two files call each other but inside the queue
# engine (niu-tx.c, niu-rx.c, niu-raw.c), whose state is NiuQueues
# (niu-queues.h), not flat in the device's; the engine works on that
# alone, without arctic-niu.h: what it needs of the device (is it frozen
# for migration?) it asks through NiuQueuesOps.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dev=$root/hw/net/arctic-niu
fail=0
say() { if [ "$1" = 0 ]; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }

edges=$(python3 "$root/scripts/xref-count" "$dev" | awk '$2 == "->" {print $1, $3}')
[ -n "$edges" ]
say $? "xref-count lists the device's edges"

# callees FILE: the files FILE calls into (headers of its own name aside).
callees() { awk -v f="$1" '$1 == f {print $2}' <<<"$edges" | sort -u | tr '\n' ' '; }

only() {
    local file=$1; shift
    local bad="" c
    for c in $(callees "$file"); do
        case " $* ${file%.c}.h " in *" $c "*) ;; *) bad="$bad $c" ;; esac
    done
    [ -z "$bad" ]
    say $? "$file calls only into: $* (extra:${bad:- none})"
}

only niu-e2e.c niu-link.c
only niu-link.c
only niu-link-chr.c niu-link.c
only niu-link-thread.c niu-link.c niu-link-direct.c niu-link-rings.c
only niu-link-rings.c niu-link-direct.c niu-link-thread.h
only niu-link-direct.c niu-link.c
only niu-dma.c
only niu-status.c niu-link-thread.c
[ -f "$dev/niu-test-dma.c" ] &&
    ! grep -Eq '^ +[A-Za-z0-9_ *]+ \*?test_dma_[a-z_]*;' "$dev/arctic-niu.h"
say $? "the test DMA engine's state is its own (niu-test-dma.c), not flat in ArcticNiuState"
only niu-test-dma.c niu-dma.c niu-dma.h niu-status.c
only niu-time.c niu-link.c niu-e2e.c niu-status.c

engine=" niu-tx.c niu-rx.c niu-raw.c "
mutual=$(while read -r a b; do
             [[ "$a" < "$b" ]] || continue
             grep -qx "$b $a" <<<"$edges" || continue
             [[ "$engine" == *" $a "* && "$engine" == *" $b "* ]] && continue
             printf ' %s<->%s' "$a" "$b"
         done <<<"$edges")
[ -z "$mutual" ]
say $? "no two files call each other outside the queue engine (found:${mutual:- none})"

[ -f "$dev/niu-queues.h" ] &&
    grep -q '^typedef struct NiuQueues {' "$dev/niu-queues.h" &&
    ! grep -Eq '^ +(NiuMpfsm|NiuRcvfsm|NiuRawFifos|ArcticEndpoint) ' \
        "$dev/arctic-niu.h"
say $? "the queue engine's state is its own (NiuQueues, niu-queues.h), not flat in ArcticNiuState"
only niu-raw.c niu-status.c niu-tx.c
only niu-rx.c niu-dma.c niu-dma.h niu-status.c niu-raw.c niu-tx.c
only niu-tx.c niu-dma.c niu-dma.h niu-status.c niu-e2e.c niu-link.c niu-raw.c \
    niu-rx.c

# The queue engine and timed mode reach the device's other parts through
# the pointers and ops their init was given, never the device itself.
whole=$(grep -l 'ArcticNiuState' "$dev"/niu-tx.c "$dev"/niu-rx.c "$dev"/niu-raw.c \
        "$dev"/niu-time.c "$dev"/niu-queues.h "$dev"/niu-time.h 2>/dev/null)
[ -z "$whole" ]
say $? "the queue engine and timed mode never name ArcticNiuState${whole:+: $whole}"

inc=$(grep -l '#include "arctic-niu.h"' "$dev"/niu-e2e.[ch] "$dev"/niu-link*.[ch] \
      "$dev"/niu-dma.[ch] "$dev"/niu-status.[ch] "$dev"/niu-test-dma.[ch] \
      "$dev"/niu-time.[ch] "$dev"/niu-queues.h "$dev"/niu-tx.c \
      "$dev"/niu-rx.c "$dev"/niu-raw.c 2>/dev/null)
[ -z "$inc" ]
say $? "the protocol, the link, DMA, status, the test DMA engine, timed mode and the queue engine do not include arctic-niu.h${inc:+: $inc}"
exit "$fail"
