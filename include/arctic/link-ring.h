/* SPDX-License-Identifier: MIT */
/*
 * Shared-memory rings for the NIU link on one host (link protocol 1.1,
 * docs/link-protocol.md §6.4).  The frames of arctic/link.h are the same;
 * only the bytes move differently.  An NIU that reaches the switch over a
 * UNIX socket may send its HELLO with two descriptors attached
 * (SCM_RIGHTS): a sealed memfd holding one area of this layout and one end
 * of a UNIX socket pair, the link's wake-up socket, whose other end the
 * NIU keeps.  A switch that takes them answers WELCOME with
 * ARCTIC_WELCOME_FLAG_RINGS; from the next frame on, every frame both ways
 * travels through the area's two byte rings, and the link's own socket
 * carries nothing but its end (either side closing it ends the link).  A
 * switch that does not (an older one, or --no-rings) answers a plain
 * WELCOME and the link stays on the socket.
 *
 * Each ring has one producer and one consumer.  Writing is a copy and one
 * release store; reading, one acquire load and a copy: no system call on a
 * busy link.  A party that has found its ring empty and wants to sleep
 * says so in the ring (consumer_sleeping) before it looks a last time, and
 * a producer that has just written kicks the consumer only if that flag
 * was set, taking it back as it kicks; room to write is waited for the
 * same way (producer_waiting).
 *
 * Kicks cannot block, whatever the other side does (link 1.3).  A kick
 * of the NIU, and of a switch's per-CPU thread, raises a counter in this
 * link's area and makes a FUTEX_WAKE on it (struct arctic_ring_kicks):
 * the kicked side waits on the counter (futex_waitv).  A kick of the
 * switch's loop thread (a switch without per-CPU threads, or a CPU beyond
 * its table) is one byte sent on the wake-up socket (a stream socket
 * pair) with send(MSG_DONTWAIT); the loop drains what came with one
 * recv(MSG_DONTWAIT).  Those flags are per call: whatever the NIU does to
 * its end (clears O_NONBLOCK, stops reading), a kick and a drain never
 * block, and only the two ends of one link hold its socket and its area,
 * so no third party can read or block its wake-ups.  (Link 1.2 kicked
 * eventfds, whose O_NONBLOCK belongs to the one file description both
 * sides share: a peer that cleared it and filled the counter blocked the
 * other side's write().)  A kick that finds the socket full is not
 * needed: the other side has one to read.
 *
 * The other party is not trusted: each side keeps its own index in private
 * memory (struct arctic_ring) and only publishes it; what it reads of the
 * other's index is checked, and a ring whose indices say more bytes than
 * it holds is a protocol error that ends the link.  Each side also looks
 * at its ring now and then (ARCTIC_RING_LOOK_MS) without a kick, so a
 * lost wake-up delays a link, never stalls it.
 *
 * Like every header here it needs no libc; it uses GCC's __atomic builtins
 * (QEMU's own atomics are the same builtins).
 */
#ifndef ARCTIC_LINK_RING_H
#define ARCTIC_LINK_RING_H

#include "arctic/types.h"

enum {
    ARCTIC_RING_MAGIC = 0x474e5241,     /* "ARNG" as little-endian bytes */
    ARCTIC_RING_VERSION = 2,            /* 2: the per-CPU kick counters */
    /*
     * Bytes of each ring: two credit windows of the largest frames of
     * both priorities at the most credits a switch grants by default
     * (256 credits of 128-byte frames is 32 KiB) with room to spare.  A
     * power of two, so that the free-running indices wrap with it.
     */
    ARCTIC_RING_DATA_SIZE = 64 * 1024,
    ARCTIC_RING_ALIGN = 64,             /* a cache line */
};

/* The descriptors attached to HELLO, in this order (link 1.3). */
enum arctic_ring_fd {
    ARCTIC_RING_FD_AREA,        /* memfd, sealed: F_SEAL_SHRINK at least */
    /* The switch's end of the wake-up socket pair (AF_UNIX, SOCK_STREAM) */
    ARCTIC_RING_FD_WAKE,
    ARCTIC_RING_FDS,
};

enum {
    /*
     * Kick bytes one drain takes at most (one recv()): a peer that floods
     * its wake-up socket costs the drainer one call per wake-up.
     */
    ARCTIC_RING_DRAIN_MAX = 64,
    /*
     * How often each side looks at its rings without being kicked, so
     * that a lost or withheld wake-up delays a link by this much at most.
     */
    ARCTIC_RING_LOOK_MS = 10,
};

/*
 * Per-CPU wake-ups (link 1.2; since 1.3 through the area).  Waking a
 * sleeping thread on another CPU costs the waker an inter-processor
 * interrupt, which on a virtual machine is an exit to the hypervisor
 * (docs/datapath.md §3.3); waking one bound to the waker's own CPU
 * costs a local enqueue.  So a switch may run one wake-up thread per
 * CPU, bound to it.  To an NIU that offered rings and says minor version
 * 3 or more, its WELCOME then says CPU_WAKE: the NIU kicks the thread of
 * the CPU it runs on (sched_getcpu() = i, below ARCTIC_CPU_WAKE_MAX)
 * through its own area, adding one to kicks.cpu[i] with release order and
 * then FUTEX_WAKE on that word (a shared futex); CPU i's thread waits on
 * that word of every link (futex_waitv).  A FUTEX_WAKE never blocks, the
 * word is in this link's area alone, and a peer that writes its own words
 * wakes only the switch, in vain (counted: it is a flood beyond what the
 * switch's sleep flags asked for).  A CPU beyond the table, or a switch
 * without CPU_WAKE, is kicked through the ring's wake-up socket.  The
 * flag protocol is unchanged: a kick still answers consumer_sleeping.
 */
enum { ARCTIC_CPU_WAKE_MAX = 64 };

/*
 * The kick counters: cpu[], written by the NIU and waited on by the
 * switch's per-CPU threads; niu, written by the switch and waited on by
 * the NIU's link thread (every kick of the NIU goes there).
 */
struct arctic_ring_kicks {
    uint32_t cpu[ARCTIC_CPU_WAKE_MAX];
    uint32_t niu;
    /*
     * The switch sets it to 1, then kicks the NIU, as it closes the link:
     * the NIU then looks at the socket at once (it looks at least every
     * ARCTIC_RING_LOOK_MS anyway).
     */
    uint32_t closing;
    uint8_t pad[ARCTIC_RING_ALIGN - 8];
};

/* The two directions. */
enum arctic_ring_dir {
    ARCTIC_RING_TO_SWITCH = 0,  /* NIU produces, switch consumes */
    ARCTIC_RING_TO_NIU = 1,     /* switch produces, NIU consumes */
    ARCTIC_RING_DIRS,
};

/*
 * The shared control words of one ring.  The producer writes the first
 * cache line, the consumer the second.  Indices are free-running byte
 * counts; head - tail is what the ring holds.
 */
struct arctic_ring_ctl {
    uint32_t head;              /* bytes written so far (producer) */
    uint32_t producer_waiting;  /* 1: the producer sleeps for room */
    uint8_t pad0[ARCTIC_RING_ALIGN - 8];
    uint32_t tail;              /* bytes read so far (consumer) */
    uint32_t consumer_sleeping; /* 1: the consumer sleeps for data */
    uint8_t pad1[ARCTIC_RING_ALIGN - 8];
};

/* The start of the area; then ctl[2], then data[2][data_size]. */
struct arctic_ring_area {
    uint32_t magic;             /* ARCTIC_RING_MAGIC */
    uint32_t version;           /* ARCTIC_RING_VERSION */
    uint32_t data_size;         /* bytes of each ring, a power of two */
    uint32_t reserved;          /* 0 */
    /*
     * A direct area's sender counts the packets and bytes it wrote, per
     * priority, for the switch's statistics (which trust them no further
     * than a counter); 0 in a link's area.
     */
    uint64_t sent_packets[2];
    uint64_t sent_bytes[2];
    uint8_t pad[ARCTIC_RING_ALIGN - 48];
    struct arctic_ring_ctl ctl[ARCTIC_RING_DIRS];
    struct arctic_ring_kicks kicks;     /* version 2 */
};

/*
 * Direct rings (link 1.5, docs/link-protocol.md §6.8).  On one host the
 * switch may join two NIUs whose links use rings with an area of this
 * same layout, written by one of them only: the sender puts the PACKET
 * frames it routes to the other in ring ARCTIC_PRIORITY_LOW or _HIGH
 * (ctl[] and data[] by priority), raises kicks.niu and makes a FUTEX_WAKE
 * on it when the receiver said it sleeps, and counts what it wrote in
 * sent_packets[] and sent_bytes[].  kicks.cpu[] and kicks.closing are not
 * used.  The switch creates the area (a sealed memfd), sends it to both
 * (DIRECT_RING) and keeps a mapping for its statistics; it never writes
 * to it again.  Nobody waits for room: a sender that finds too little
 * sends through the switch.  The receiver knows who wrote every packet
 * (one writer per area) and drops one that names another source, or
 * whose route does not lead to it.
 */
enum {
    /*
     * Bytes of each ring of a direct area: more than the frames of the
     * most retransmit lines an NIU holds (128) and their acks.
     */
    ARCTIC_DIRECT_DATA_SIZE = 32 * 1024,
};

/* Bytes of an area with rings of @data_size bytes. */
static inline size_t arctic_ring_area_size(uint32_t data_size)
{
    return sizeof(struct arctic_ring_area) +
           (size_t)ARCTIC_RING_DIRS * data_size;
}

/* Set up an area of arctic_ring_area_size(@data_size) zeroed bytes. */
static inline void arctic_ring_area_init(void *area, uint32_t data_size)
{
    struct arctic_ring_area *a = (struct arctic_ring_area *)area;

    a->magic = ARCTIC_RING_MAGIC;
    a->version = ARCTIC_RING_VERSION;
    a->data_size = data_size;
    a->reserved = 0;
}

/*
 * Is the area of @size bytes (what the memfd holds) one the receiver can
 * use?  The ring size is read once and returned in *@data_size: the peer
 * may change the shared copy later, and nobody reads it again.
 */
static inline bool arctic_ring_area_check(const void *area, size_t size,
                                          uint32_t *data_size)
{
    const struct arctic_ring_area *a = (const struct arctic_ring_area *)area;
    uint32_t n;

    if (size < sizeof(*a)) {
        return false;
    }
    n = __atomic_load_n(&a->data_size, __ATOMIC_RELAXED);
    if (__atomic_load_n(&a->magic, __ATOMIC_RELAXED) != ARCTIC_RING_MAGIC ||
        __atomic_load_n(&a->version, __ATOMIC_RELAXED) !=
        ARCTIC_RING_VERSION ||
        n < ARCTIC_RING_ALIGN || (n & (n - 1)) ||
        n > ARCTIC_RING_DATA_SIZE * 16 || size < arctic_ring_area_size(n)) {
        return false;
    }
    *data_size = n;
    return true;
}

/*
 * One side's view of one ring: pointers into the area, computed from what
 * this side checked, and its own index (head for a producer, tail for a
 * consumer), which it never reads back from shared memory.
 */
struct arctic_ring {
    struct arctic_ring_ctl *ctl;
    uint8_t *data;
    uint32_t size;
    uint32_t own;
};

static inline void arctic_ring_attach(struct arctic_ring *r, void *area,
                                      uint32_t data_size,
                                      enum arctic_ring_dir dir)
{
    struct arctic_ring_area *a = (struct arctic_ring_area *)area;

    r->ctl = &a->ctl[dir];
    r->data = (uint8_t *)(a + 1) + (size_t)dir * data_size;
    r->size = data_size;
    r->own = 0;
}

/* A direct area's ring of priority @prio (ARCTIC_PRIORITY_LOW or _HIGH). */
static inline void arctic_direct_attach(struct arctic_ring *r, void *area,
                                        uint32_t data_size, unsigned prio)
{
    arctic_ring_attach(r, area, data_size, (enum arctic_ring_dir)prio);
}

/* Returned by the calls below when the peer's index is impossible. */
#define ARCTIC_RING_BROKEN ((size_t)-1)

/*
 * Producer: copy up to @len bytes in; returns how many went (0 when the
 * ring is full), or ARCTIC_RING_BROKEN.
 */
static inline size_t arctic_ring_write(struct arctic_ring *r,
                                       const void *buf, size_t len)
{
    uint32_t tail = __atomic_load_n(&r->ctl->tail, __ATOMIC_ACQUIRE);
    uint32_t used = r->own - tail;
    uint32_t room, at, first;

    if (used > r->size) {
        return ARCTIC_RING_BROKEN;
    }
    room = r->size - used;
    if (len > room) {
        len = room;
    }
    at = r->own & (r->size - 1);
    first = r->size - at < len ? r->size - at : (uint32_t)len;
    __builtin_memcpy(r->data + at, buf, first);
    __builtin_memcpy(r->data, (const uint8_t *)buf + first, len - first);
    r->own += (uint32_t)len;
    __atomic_store_n(&r->ctl->head, r->own, __ATOMIC_RELEASE);
    return len;
}

/* Consumer: bytes waiting, or ARCTIC_RING_BROKEN. */
static inline size_t arctic_ring_used(const struct arctic_ring *r)
{
    uint32_t used = __atomic_load_n(&r->ctl->head, __ATOMIC_ACQUIRE) - r->own;

    return used > r->size ? ARCTIC_RING_BROKEN : used;
}

/*
 * Consumer: copy up to @max bytes out; returns how many (0 when empty), or
 * ARCTIC_RING_BROKEN.
 */
static inline size_t arctic_ring_read(struct arctic_ring *r, void *buf,
                                      size_t max)
{
    size_t len = arctic_ring_used(r);
    uint32_t at, first;

    if (len == ARCTIC_RING_BROKEN) {
        return len;
    }
    if (len > max) {
        len = max;
    }
    at = r->own & (r->size - 1);
    first = r->size - at < len ? r->size - at : (uint32_t)len;
    __builtin_memcpy(buf, r->data + at, first);
    __builtin_memcpy((uint8_t *)buf + first, r->data, len - first);
    r->own += (uint32_t)len;
    __atomic_store_n(&r->ctl->tail, r->own, __ATOMIC_RELEASE);
    return len;
}

/*
 * Consumer: copy the first @len bytes waiting to @buf without taking them;
 * false if fewer wait (or the ring is broken: arctic_ring_used() says
 * which).
 */
static inline bool arctic_ring_peek(const struct arctic_ring *r, void *buf,
                                    size_t len)
{
    size_t used = arctic_ring_used(r);
    uint32_t at, first;

    if (used == ARCTIC_RING_BROKEN || used < len) {
        return false;
    }
    at = r->own & (r->size - 1);
    first = r->size - at < len ? r->size - at : (uint32_t)len;
    __builtin_memcpy(buf, r->data + at, first);
    __builtin_memcpy((uint8_t *)buf + first, r->data, len - first);
    return true;
}

/*
 * After publishing an index: is the other side's sleep flag set?  If so it
 * is taken back (at most one kick per sleep).  The fence orders the index
 * just published before the flag is read, against the sleeper's flag
 * store before its last look.
 */
static inline bool arctic_ring_take_flag(uint32_t *flag)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return __atomic_load_n(flag, __ATOMIC_RELAXED) &&
           __atomic_exchange_n(flag, 0, __ATOMIC_RELAXED);
}

/*
 * Producer, after writing: must the consumer be kicked?  True at most once
 * per sleep: the flag is taken back here.  The fence orders the head just
 * published before the flag is read, against the consumer's flag store
 * before its last look (arctic_ring_consumer_sleep()).
 */
static inline bool arctic_ring_wake_consumer(struct arctic_ring *r)
{
    return arctic_ring_take_flag(&r->ctl->consumer_sleeping);
}

/*
 * Consumer, before sleeping: say so, then look a last time.  True: the
 * ring is still empty and the consumer may sleep until kicked.  False:
 * bytes came (or the ring is broken); the flag is taken back.
 */
static inline bool arctic_ring_consumer_sleep(struct arctic_ring *r)
{
    __atomic_store_n(&r->ctl->consumer_sleeping, 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (arctic_ring_used(r) == 0) {
        return true;
    }
    __atomic_store_n(&r->ctl->consumer_sleeping, 0, __ATOMIC_RELAXED);
    return false;
}

/* Consumer, awake and reading: no kicks wanted. */
static inline void arctic_ring_consumer_awake(struct arctic_ring *r)
{
    __atomic_store_n(&r->ctl->consumer_sleeping, 0, __ATOMIC_RELAXED);
}

/*
 * The same, for a consumer that keeps count of the kicks it asked for:
 * true if the flag was taken back already (by the producer, which kicks
 * for it, if the consumer had set it).
 */
static inline bool arctic_ring_consumer_awake_taken(struct arctic_ring *r)
{
    return __atomic_exchange_n(&r->ctl->consumer_sleeping, 0,
                               __ATOMIC_RELAXED) == 0;
}

/* Producer: the same for its wait flag (arctic_ring_producer_wait()). */
static inline bool arctic_ring_producer_awake_taken(struct arctic_ring *r)
{
    return __atomic_exchange_n(&r->ctl->producer_waiting, 0,
                               __ATOMIC_RELAXED) == 0;
}

/* Producer: bytes of room (0 when the ring is broken: see write). */
static inline size_t arctic_ring_room(const struct arctic_ring *r)
{
    uint32_t used = r->own - __atomic_load_n(&r->ctl->tail, __ATOMIC_ACQUIRE);

    return used > r->size ? 0 : r->size - used;
}

/*
 * Producer, before sleeping for room: say so, then look a last time.  True:
 * still fewer than @want bytes of room, sleep until kicked.  False: room
 * came; the flag is taken back.
 */
static inline bool arctic_ring_producer_wait(struct arctic_ring *r,
                                             size_t want)
{
    __atomic_store_n(&r->ctl->producer_waiting, 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (arctic_ring_room(r) < want) {
        return true;
    }
    __atomic_store_n(&r->ctl->producer_waiting, 0, __ATOMIC_RELAXED);
    return false;
}

/* Consumer, after reading: must the producer be kicked (it waits for room)? */
static inline bool arctic_ring_wake_producer(struct arctic_ring *r)
{
    return arctic_ring_take_flag(&r->ctl->producer_waiting);
}

#endif /* ARCTIC_LINK_RING_H */
