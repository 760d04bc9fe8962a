/*
 * Arctic NIU: direct rings to and from the other NIUs of this host (link
 * 1.5; niu-link-direct.h, docs/link-protocol.md §6.8).
 *
 * A ring pair from node A to node B is written by A alone: B knows that
 * every packet in it is A's, and drops one that says otherwise
 * (niu_link_direct_packet()).  Nothing read from the peer's half is
 * trusted: its indices are checked (a broken ring is dropped, with what
 * it held), a frame header that breaks the rules drops the ring, and the
 * wake-up word B sleeps on is in this pair's area, which only A and the
 * switch hold: a peer can wake B in vain, never keep another from waking
 * it.  A sender never waits for room: a frame that does not fit goes
 * through the switch.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include <sys/mman.h>
#include "qemu/futex.h"
#include "qemu/memfd.h"
#include "trace.h"

#include "niu-link-direct.h"
#include "arctic/link-ring.h"

enum {
    /* Frames one niu_direct_deliver() takes from one ring at most. */
    NIU_DIRECT_BATCH = 256,
};

typedef struct NiuDirect {
    struct arctic_ring_area *area;
    size_t size;
    struct arctic_ring ring[ARCTIC_NUM_PRIORITIES];
    bool broken;            /* found so by a vCPU: the thread drops it */
} NiuDirect;

struct NiuDirectRings {
    NiuLink *link;
    NiuDirect *to[ARCTIC_LINK_MAX_NODES];
    NiuDirect *from[ARCTIC_LINK_MAX_NODES];
    /* The nodes @from holds rings of, in the order they came. */
    uint16_t from_nodes[ARCTIC_LINK_MAX_NODES];
    unsigned n_from;
};

static const char *const role_name[ARCTIC_DIRECT_ROLES] = {
    [ARCTIC_DIRECT_SEND] = "to",
    [ARCTIC_DIRECT_RECEIVE] = "from",
};

static void direct_unmap(NiuDirect *r)
{
    if (r) {
        munmap(r->area, r->size);
        g_free(r);
    }
}

/* The area the switch sent, checked and mapped; NULL if it will not do. */
static NiuDirect *direct_map(int fd, const char **why)
{
    NiuDirect *r;
    uint32_t data_size;
    struct stat st;
    void *area;
    int seals = fcntl(fd, F_GET_SEALS);
    unsigned p;

    /* Sealed, so that nobody can shrink it under our loads. */
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || seals < 0 ||
        !(seals & F_SEAL_SHRINK) || st.st_size <= 0) {
        *why = "not a sealed memfd";
        return NULL;
    }
    area = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (area == MAP_FAILED) {
        *why = "cannot be mapped";
        return NULL;
    }
    if (!arctic_ring_area_check(area, st.st_size, &data_size)) {
        munmap(area, st.st_size);
        *why = "not a ring area";
        return NULL;
    }
    r = g_new0(NiuDirect, 1);
    r->area = area;
    r->size = st.st_size;
    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        arctic_direct_attach(&r->ring[p], area, data_size, p);
    }
    return r;
}

NiuDirectRings *niu_direct_new(NiuLink *link)
{
    NiuDirectRings *d = g_new0(NiuDirectRings, 1);

    d->link = link;
    return d;
}

void niu_direct_free(NiuDirectRings *d)
{
    unsigned i;

    if (!d) {
        return;
    }
    for (i = 0; i < ARCTIC_LINK_MAX_NODES; i++) {
        direct_unmap(d->to[i]);
        direct_unmap(d->from[i]);
    }
    d->link->direct_to = 0;
    g_free(d);
}

/*
 * Take the frames waiting in ring @prio of @peer's pair to the link, at
 * most NIU_DIRECT_BATCH; false if the ring is broken (the caller drops it).
 */
static bool direct_read_ring(NiuDirectRings *d, unsigned peer, unsigned prio,
                             bool *any)
{
    struct arctic_ring *ring = &d->from[peer]->ring[prio];
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MAX_SIZE];
    struct arctic_frame_header h;
    unsigned n;

    for (n = 0; n < NIU_DIRECT_BATCH; n++) {
        if (arctic_ring_used(ring) == ARCTIC_RING_BROKEN) {
            return false;
        }
        if (!arctic_ring_peek(ring, frame, ARCTIC_LINK_HEADER_SIZE)) {
            break;          /* empty (a writer publishes whole frames) */
        }
        arctic_frame_header_decode(frame, &h);
        if (arctic_frame_header_check(&h) != ARCTIC_FRAME_OK ||
            h.type != ARCTIC_FRAME_PACKET ||
            FIELD_EX32(h.flags, ARCTIC_FRAME_FLAGS, PRIORITY) != prio) {
            return false;
        }
        if (arctic_ring_used(ring) < ARCTIC_LINK_HEADER_SIZE + h.length) {
            break;          /* a writer that publishes halves waits */
        }
        arctic_ring_read(ring, frame, ARCTIC_LINK_HEADER_SIZE + h.length);
        niu_link_direct_packet(d->link, peer, prio,
                               frame + ARCTIC_LINK_HEADER_SIZE, h.length);
        *any = true;
        if (!niu_link_input_room(d->link)) {
            break;          /* its answers wait for room: so does the rest */
        }
    }
    return true;
}

static void direct_drop_from(NiuDirectRings *d, unsigned peer)
{
    unsigned i;

    direct_unmap(d->from[peer]);
    d->from[peer] = NULL;
    for (i = 0; i < d->n_from; i++) {
        if (d->from_nodes[i] == peer) {
            d->from_nodes[i] = d->from_nodes[--d->n_from];
            break;
        }
    }
}

/*
 * Under rx_lock and the device lock.  A broken ring is dropped by the
 * link thread (@owner), which alone changes the set (it sleeps on the
 * rings without the locks); a busy-polling vCPU only marks it.
 */
bool niu_direct_deliver(NiuDirectRings *d, bool owner)
{
    bool any = false;
    unsigned i = 0;

    while (i < d->n_from && niu_link_input_room(d->link)) {
        unsigned peer = d->from_nodes[i];
        NiuDirect *r = d->from[peer];

        /* High priority first, as a router serves it. */
        if (!r->broken &&
            (!direct_read_ring(d, peer, ARCTIC_PRIORITY_HIGH, &any) ||
             !direct_read_ring(d, peer, ARCTIC_PRIORITY_LOW, &any))) {
            trace_arctic_niu_link_direct_ring(d->link->node_id, "from", peer,
                                              "broken: dropped");
            r->broken = true;
        }
        if (r->broken && owner) {
            direct_drop_from(d, peer);
            continue;       /* the last node moved into slot i */
        }
        i++;
    }
    if (any) {
        niu_link_direct_done(d->link);
    }
    return any;
}

bool niu_direct_input_waits(const NiuDirectRings *d)
{
    unsigned i, p;

    for (i = 0; i < d->n_from; i++) {
        const NiuDirect *r = d->from[d->from_nodes[i]];

        if (r->broken) {
            return true;            /* for the thread to drop */
        }
        for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
            if (arctic_ring_used(&r->ring[p])) {
                return true;        /* or broken: the reader drops it */
            }
        }
    }
    return false;
}

/* Under the device lock. */
bool niu_direct_write(NiuDirectRings *d, unsigned dst, uint8_t prio,
                      const uint8_t *frame, size_t len)
{
    NiuDirect *r = d->to[dst];
    struct arctic_ring *ring;
    size_t n;

    if (!r) {
        return false;
    }
    ring = &r->ring[prio];
    if (arctic_ring_room(ring) < len) {
        /* Full, or the reader's index is impossible (room 0). */
        if (arctic_ring_write(ring, frame, 0) == ARCTIC_RING_BROKEN) {
            trace_arctic_niu_link_direct_ring(d->link->node_id, "to", dst,
                                              "broken: dropped");
            direct_unmap(r);
            d->to[dst] = NULL;
        } else {
            stat64_add(&d->link->direct_full, 1);
        }
        return false;
    }
    n = arctic_ring_write(ring, frame, len);
    assert(n == len);
    /* Only we write them; the switch reads them for its statistics. */
    qatomic_set(&r->area->sent_packets[prio],
                qatomic_read(&r->area->sent_packets[prio]) + 1);
    qatomic_set(&r->area->sent_bytes[prio],
                qatomic_read(&r->area->sent_bytes[prio]) +
                len - ARCTIC_LINK_HEADER_SIZE);
    if (arctic_ring_wake_consumer(ring)) {
        qatomic_inc(&r->area->kicks.niu);
        qemu_futex_wake(&r->area->kicks.niu, INT_MAX);
    }
    return true;
}

unsigned niu_direct_waiters(const NiuDirectRings *d, struct futex_waitv *w,
                            unsigned max)
{
    unsigned i, n = MIN(d->n_from, max);

    for (i = 0; i < n; i++) {
        struct arctic_ring_area *area = d->from[d->from_nodes[i]]->area;

        w[i] = (struct futex_waitv) {
            .uaddr = (uintptr_t)&area->kicks.niu,
            .val = qatomic_load_acquire(&area->kicks.niu),
            .flags = FUTEX_32,
        };
    }
    return n;
}

bool niu_direct_sleep(NiuDirectRings *d)
{
    unsigned i, p;

    for (i = 0; i < d->n_from; i++) {
        NiuDirect *r = d->from[d->from_nodes[i]];

        for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
            if (r->broken || !arctic_ring_consumer_sleep(&r->ring[p])) {
                return false;
            }
        }
    }
    return true;
}

void niu_direct_awake(NiuDirectRings *d)
{
    unsigned i, p;

    for (i = 0; i < d->n_from; i++) {
        NiuDirect *r = d->from[d->from_nodes[i]];

        for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
            arctic_ring_consumer_awake(&r->ring[p]);
        }
    }
}

/* Under rx_lock and the device lock. */
bool niu_direct_control(NiuDirectRings *d, uint16_t type,
                        const uint8_t *body, int fd, const char **broken)
{
    struct arctic_direct m;
    NiuDirect *r = NULL;
    const char *why = NULL;
    bool any = false;

    if (!arctic_direct_decode(body, &m) || m.peer == d->link->node_id ||
        m.peer >= d->link->num_nodes) {
        *broken = "a direct-ring frame naming no other node";
        goto fail;
    }
    if (type == ARCTIC_FRAME_DIRECT_RING) {
        if (fd < 0) {
            *broken = "DIRECT_RING without its descriptor";
            return false;
        }
        r = direct_map(fd, &why);
        close(fd);
        fd = -1;
        if (!r) {
            trace_arctic_niu_link_direct_ring(d->link->node_id,
                                              role_name[m.role], m.peer, why);
            *broken = "DIRECT_RING with an area that will not do";
            return false;
        }
    }
    if (m.role == ARCTIC_DIRECT_SEND) {
        d->link->direct_to += !!r - !!d->to[m.peer];
        direct_unmap(d->to[m.peer]);
        d->to[m.peer] = r;
    } else {
        if (d->from[m.peer]) {
            /* What the old ring holds was written before: it goes first. */
            direct_read_ring(d, m.peer, ARCTIC_PRIORITY_HIGH, &any);
            direct_read_ring(d, m.peer, ARCTIC_PRIORITY_LOW, &any);
            direct_drop_from(d, m.peer);
        }
        if (r) {
            d->from[m.peer] = r;
            d->from_nodes[d->n_from++] = m.peer;
        }
        if (any) {
            niu_link_direct_done(d->link);
        }
    }
    trace_arctic_niu_link_direct_ring(d->link->node_id, role_name[m.role],
                                      m.peer, r ? "taken" : "stopped");
    return true;

fail:
    if (fd >= 0) {
        close(fd);
    }
    return false;
}
