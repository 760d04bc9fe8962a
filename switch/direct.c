/* SPDX-License-Identifier: MIT */
/*
 * Direct rings (link 1.5, docs/link-protocol.md §6.8): the control plane of
 * the same-host data path that skips the switch process.  When a packet
 * from one NIU to another passes the routers, both links are on rings and
 * said DIRECT, and nothing asks the switch to see every packet (no fault
 * injection, no capture, no timing model, not timed), the switch makes a
 * ring pair from the sender to the receiver (arctic/link-ring.h) and sends
 * it to both over their sockets (DIRECT_RING).  From then on the sender
 * writes what it routes to that node into the pair; the switch keeps a
 * mapping only to read the sender's counters for its statistics.
 *
 * The switch takes the pairs back (DIRECT_STOP to both ends) when one end
 * leaves, or when faults, capture or the timing model are turned on: the
 * senders go back to the switch, and what they wrote before is read by
 * the receivers.  A pair is made again, on a later packet, once nothing
 * asks for every packet any more.  The end-to-end protocol puts back in
 * order the few packets the change of path reorders.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "switch-internal.h"

enum {
    /*
     * Pairs live at once at most (each maps an area of about 64 KiB here
     * and at both ends): 4096 is all-to-all among 64 nodes.
     */
    SW_DIRECT_PAIRS_MAX = 4096,
    /*
     * Pairs into one node at most: below what its link thread sleeps on
     * at once (the NIU looks at any beyond that only every
     * ARCTIC_RING_LOOK_MS).
     */
    SW_DIRECT_IN_MAX = 120,
};

struct sw_direct_pair {
    void *area;
    size_t size;
    /* The sender's counts when the statistics were last reset. */
    uint64_t base_packets[ARCTIC_NUM_PRIORITIES];
    uint64_t base_bytes[ARCTIC_NUM_PRIORITIES];
};

/*
 * What @pair carried since the last reset, into the ports' counts: the
 * sender's (@src) in its rx_, the receiver's (@dst) in its tx_,
 * and in the direct_ counters that say how much of those skipped the
 * routers.  The sender's counters are only counters: a lying NIU
 * misleads its own statistics, nothing else.
 */
static void pair_count(const struct sw_direct_pair *pair,
                       struct arctic_port_stats *src,
                       struct arctic_port_stats *dst)
{
    const struct arctic_ring_area *area = pair->area;
    unsigned prio;

    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        uint64_t n = __atomic_load_n(&area->sent_packets[prio],
                                     __ATOMIC_RELAXED) -
                     pair->base_packets[prio];
        uint64_t b = __atomic_load_n(&area->sent_bytes[prio],
                                     __ATOMIC_RELAXED) -
                     pair->base_bytes[prio];
        struct arctic_port_prio_stats *out = &src->prio[prio];
        struct arctic_port_prio_stats *in = &dst->prio[prio];

        out->rx_packets += n;
        out->rx_bytes += b;
        out->direct_packets += n;
        in->tx_packets += n;
        in->tx_bytes += b;
        in->direct_in_packets += n;
    }
}

/* Does anything ask the switch to see every packet? */
static bool direct_wanted(const ArcticSwitch *sw)
{
    unsigned i, prio;

    if (!sw->config.direct || sw->config.timed || sw->config.timing ||
        sw->pcap) {
        return false;
    }
    for (i = 0; i < sw->ports; i++) {
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            if (sw->port[i].fault[prio].active) {
                return false;
            }
        }
    }
    return true;
}

static struct sw_direct_pair **pair_slot(ArcticSwitch *sw, unsigned src,
                                         unsigned dst)
{
    return &sw->direct_pairs[src * sw->ports + dst];
}

/* A DIRECT_RING (with @fd) or DIRECT_STOP on @port's socket. */
static bool direct_tell(ArcticSwitch *sw, unsigned port, uint16_t type,
                        unsigned peer, enum arctic_direct_role role, int fd)
{
    struct sw_conn *conn = sw->port[port].link.conn;
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_DIRECT_SIZE];
    struct arctic_direct d = { .peer = peer, .role = role };
    ssize_t n;

    if (!conn || conn->state != SW_CONN_LIVE || !conn->direct) {
        return false;
    }
    arctic_frame_header_encode_flags(frame, type, 0, ARCTIC_DIRECT_SIZE);
    arctic_direct_encode(frame + ARCTIC_LINK_HEADER_SIZE, &d);
    n = sw_send_fds(conn->fd, frame, sizeof(frame), &fd, fd >= 0 ? 1 : 0);
    if (n == (ssize_t)sizeof(frame)) {
        return true;
    }
    /*
     * An NIU that leaves its socket full (it reads it at least every
     * ARCTIC_RING_LOOK_MS) or a short write: the frames after could not
     * be framed; the link ends.
     */
    sw_log(sw, "port %u: cannot send a direct-ring frame (%s); closing",
           port, n < 0 ? g_strerror(errno) : "a short write");
    sw_conn_close(sw, conn, ARCTIC_DISCONNECT_IO_ERROR);
    return false;
}

static void pair_free(ArcticSwitch *sw, unsigned src, unsigned dst)
{
    struct sw_direct_pair **slot = pair_slot(sw, src, dst);
    struct sw_direct_pair *pair = *slot;

    if (!pair) {
        return;
    }
    /* What it carried stays in the ports' counts. */
    pair_count(pair, &sw->port[src].stats, &sw->port[dst].stats);
    munmap(pair->area, pair->size);
    g_free(pair);
    *slot = NULL;
    sw->direct_live--;
    sw->direct_in[dst]--;
}

/* Take back the pair from @src to @dst: both ends are told, if up. */
static void pair_stop(ArcticSwitch *sw, unsigned src, unsigned dst)
{
    if (!*pair_slot(sw, src, dst)) {
        return;
    }
    pair_free(sw, src, dst);
    direct_tell(sw, src, ARCTIC_FRAME_DIRECT_STOP, dst, ARCTIC_DIRECT_SEND,
                -1);
    direct_tell(sw, dst, ARCTIC_FRAME_DIRECT_STOP, src,
                ARCTIC_DIRECT_RECEIVE, -1);
}

/* A sealed memfd holding a direct area; -1 and a log line if not. */
static int direct_area_new(ArcticSwitch *sw, void **area, size_t *size)
{
    size_t n = arctic_ring_area_size(ARCTIC_DIRECT_DATA_SIZE);
    int fd = memfd_create("arctic-direct", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    void *p;

    if (fd < 0 || ftruncate(fd, n) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
                               F_SEAL_SEAL) < 0) {
        sw_log(sw, "cannot create a direct ring: %s", g_strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        sw_log(sw, "cannot map a direct ring: %s", g_strerror(errno));
        close(fd);
        return -1;
    }
    arctic_ring_area_init(p, ARCTIC_DIRECT_DATA_SIZE);
    *area = p;
    *size = n;
    return fd;
}

/*
 * A valid packet from @src to @dst entered the routers: if the two may
 * have a direct pair and have none, make one.  Under the model lock.
 */
void sw_direct_packet(ArcticSwitch *sw, unsigned src, unsigned dst)
{
    struct sw_direct_pair *pair;
    struct sw_conn *a, *b;
    void *area;
    size_t size;
    int fd;

    if (!sw->direct_pairs || src == dst || *pair_slot(sw, src, dst)) {
        return;
    }
    a = sw->port[src].link.conn;
    b = sw->port[dst].link.conn;
    if (!a || !b || !a->direct || !b->direct || !sw->direct_open ||
        sw->direct_live >= SW_DIRECT_PAIRS_MAX ||
        sw->direct_in[dst] >= SW_DIRECT_IN_MAX) {
        return;
    }
    fd = direct_area_new(sw, &area, &size);
    if (fd < 0) {
        return;
    }
    pair = g_new0(struct sw_direct_pair, 1);
    pair->area = area;
    pair->size = size;
    *pair_slot(sw, src, dst) = pair;
    sw->direct_live++;
    sw->direct_in[dst]++;
    /*
     * The receiver first: a sender that writes before the receiver has
     * the ring delays its packets by a look (ARCTIC_RING_LOOK_MS), no
     * more.
     */
    if (!direct_tell(sw, dst, ARCTIC_FRAME_DIRECT_RING, src,
                     ARCTIC_DIRECT_RECEIVE, fd) ||
        !direct_tell(sw, src, ARCTIC_FRAME_DIRECT_RING, dst,
                     ARCTIC_DIRECT_SEND, fd)) {
        pair_stop(sw, src, dst);
    } else if (sw->config.verbose) {
        sw_log(sw, "direct ring %u -> %u", src, dst);
    }
    close(fd);
}

/* @port's NIU is gone: every pair it was an end of goes. */
void sw_direct_port_down(ArcticSwitch *sw, unsigned port)
{
    unsigned i;

    if (!sw->direct_live) {
        return;
    }
    for (i = 0; i < sw->ports; i++) {
        pair_stop(sw, port, i);
        pair_stop(sw, i, port);
    }
}

/*
 * Faults or a capture were turned on or off: whether pairs may be made
 * from now on (so that a packet need not look at every port's faults);
 * if not, every pair goes, and every packet crosses the switch again.
 */
void sw_direct_revise(ArcticSwitch *sw)
{
    unsigned i, j;

    sw->direct_open = direct_wanted(sw);
    if (!sw->direct_live || sw->direct_open) {
        return;
    }
    sw_log(sw, "direct rings taken back: the switch must see every packet");
    for (i = 0; i < sw->ports; i++) {
        for (j = 0; j < sw->ports; j++) {
            pair_stop(sw, i, j);
        }
    }
}

/* Add what the live pairs carried to the ports' statistics @st. */
void sw_direct_stats(const ArcticSwitch *sw, struct arctic_port_stats *st)
{
    unsigned src, dst;

    for (src = 0; sw->direct_live && src < sw->ports; src++) {
        for (dst = 0; dst < sw->ports; dst++) {
            const struct sw_direct_pair *pair =
                sw->direct_pairs[src * sw->ports + dst];

            if (pair) {
                pair_count(pair, &st[src], &st[dst]);
            }
        }
    }
}

/* The statistics start again: the live pairs count from here. */
void sw_direct_stats_reset(ArcticSwitch *sw)
{
    unsigned i, prio;

    for (i = 0; sw->direct_live && i < sw->ports * sw->ports; i++) {
        struct sw_direct_pair *pair = sw->direct_pairs[i];
        const struct arctic_ring_area *area;

        if (!pair) {
            continue;
        }
        area = pair->area;
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            pair->base_packets[prio] =
                __atomic_load_n(&area->sent_packets[prio], __ATOMIC_RELAXED);
            pair->base_bytes[prio] =
                __atomic_load_n(&area->sent_bytes[prio], __ATOMIC_RELAXED);
        }
    }
}

void sw_direct_init(ArcticSwitch *sw)
{
    if (sw->config.direct) {
        sw->direct_pairs = g_new0(struct sw_direct_pair *,
                                  (size_t)sw->ports * sw->ports);
        sw->direct_in = g_new0(unsigned, sw->ports);
    }
    sw_direct_revise(sw);
}

void sw_direct_cleanup(ArcticSwitch *sw)
{
    unsigned i, j;

    if (!sw->direct_pairs) {
        return;
    }
    for (i = 0; i < sw->ports; i++) {
        for (j = 0; j < sw->ports; j++) {
            pair_free(sw, i, j);
        }
    }
    g_clear_pointer(&sw->direct_pairs, g_free);
    g_clear_pointer(&sw->direct_in, g_free);
}
