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
 *
 * Those frames go on sockets the NIUs read when they look (at least every
 * ARCTIC_RING_LOOK_MS), and others decide how many there are: nodes that
 * make and drop pairs with one node send it two frames per pair, and a
 * socket holds a few hundred (issue 48 item 5: the switch's write found
 * it full, EAGAIN, and closed the link of the node that had done
 * nothing).  So a node gets no new pair while it has not read the
 * DIRECT_RINGs it was sent (SW_DIRECT_UNREAD_MAX), a DIRECT_RING that
 * does not go (a full socket, or the kernel's budget of descriptors in
 * flight) means no pair now, never a closed link, and a DIRECT_STOP that
 * does not fit is owed and sent once the node has read (the loop's
 * timer, sw_direct_timer()).
 *
 * The layers below know nothing of this file.  The router (each packet
 * routed), the ports (each NIU that leaves), fault injection and the
 * capture (turned on or off) and the counters (reset) tell it through
 * sw->hooks, which core.c fills with sw_direct_hooks under --direct, as
 * the ports tell the router through sw->port_ops.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/sockios.h>

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
    /*
     * DIRECT_RINGs a node may have unread on its socket: no pair is made
     * with it beyond that until it has read them.  Each holds room in its
     * socket, a descriptor in flight (which the kernel counts against the
     * switch's user) and an area of 64 KiB.  Far more than an honest NIU
     * is sent between two looks at its socket.
     */
    SW_DIRECT_UNREAD_MAX = 32,
    /*
     * The fastest a sender could fill a ring: a packet every 10 ns (a copy
     * of at least ARCTIC_WIRE_MIN_SIZE bytes and two atomic stores; NIUs
     * carry about a packet per 2 us per pair, docs/scale.md §1).
     * The switch believes no count of a sender beyond that.
     */
    SW_DIRECT_PACKET_NS_MIN = 10,
    /* Frames a ring holds at once at most: a burst not yet read. */
    SW_DIRECT_RING_FRAMES_MAX = ARCTIC_DIRECT_DATA_SIZE /
                                (ARCTIC_LINK_HEADER_SIZE +
                                 ARCTIC_WIRE_MIN_SIZE),
    /* Not to fill the log: a held-back node is named this often at most. */
    SW_DIRECT_LOG_NS = 1000000000,
};

/*
 * One priority's counts of a pair: what its sender's words in the area
 * said when last read, and what the switch believed of them, which the
 * statistics show.
 */
struct sw_direct_count {
    uint64_t said_packets, said_bytes;
    uint64_t packets, bytes;
    /* What was believed when the statistics were last reset. */
    uint64_t base_packets, base_bytes;
};

struct sw_direct_pair {
    void *area;
    size_t size;
    uint64_t made_ns;
    struct sw_direct_count count[ARCTIC_NUM_PRIORITIES];
};

/* What the switch knows of one port's direct-ring frames. */
struct sw_direct_port {
    unsigned in;                /* live pairs into it */
    /* DIRECT_RINGs sent since its socket was last seen read to the end */
    unsigned unread;
    /* DIRECT_STOPs its full socket did not take: [role], peers' bits */
    uint64_t owed[ARCTIC_DIRECT_ROLES][ARCTIC_LINK_MAX_NODES / 64];
    unsigned owed_count;
    uint64_t logged_ns;         /* when it was last named held back */
};

/* The rise from *@said to @now, at most @room; *@said becomes @now. */
static uint64_t believe(uint64_t now, uint64_t *said, uint64_t room)
{
    uint64_t rise = now >= *said ? now - *said : 0;

    *said = now;
    return MIN(rise, room);
}

/*
 * Take in what @pair's sender says it wrote since its words were last
 * read.  They are a peer's, so input, not truth (issue 48 item 9): a
 * count that goes back brings nothing (counting goes on from there), the
 * packets of a ring never exceed what it could have carried since the
 * pair was made, nor its bytes that many of the largest packets.  An
 * honest sender is never cut short: it adds a packet's count before its
 * bytes, so reading the bytes first never sees bytes without packets.
 */
static void pair_read(struct sw_direct_pair *pair, uint64_t now_ns)
{
    const struct arctic_ring_area *area = pair->area;
    uint64_t most = SW_DIRECT_RING_FRAMES_MAX +
                    (now_ns - pair->made_ns) / SW_DIRECT_PACKET_NS_MIN;
    unsigned prio;

    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        struct sw_direct_count *c = &pair->count[prio];
        uint64_t bytes = __atomic_load_n(&area->sent_bytes[prio],
                                         __ATOMIC_ACQUIRE);
        uint64_t packets = __atomic_load_n(&area->sent_packets[prio],
                                           __ATOMIC_ACQUIRE);

        c->packets += believe(packets, &c->said_packets, most - c->packets);
        c->bytes += believe(bytes, &c->said_bytes,
                            c->packets * ARCTIC_WIRE_MAX_SIZE - c->bytes);
    }
}

/*
 * What @pair carried since the last reset, into the ports' counts: the
 * sender's (@src) in its rx_, the receiver's (@dst) in its tx_,
 * and in the direct_ counters that say how much of those skipped the
 * routers.  The sender's counters are only counters, read bounded
 * (pair_read()): a lying NIU misleads its own statistics, and the
 * receiver's no further than its ring could have carried.
 */
static void pair_count(const struct sw_direct_pair *pair,
                       struct arctic_port_stats *src,
                       struct arctic_port_stats *dst)
{
    unsigned prio;

    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        const struct sw_direct_count *c = &pair->count[prio];
        uint64_t n = c->packets - c->base_packets;
        uint64_t b = c->bytes - c->base_bytes;
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

/* What became of a frame for a port's socket (direct_tell()). */
enum direct_told {
    DIRECT_TOLD,
    DIRECT_NO_ROOM,         /* not now: its socket, or the fds in flight */
    DIRECT_NOBODY,          /* no live direct link there, or it is ending */
};

/* A DIRECT_RING (with @fd) or DIRECT_STOP on @port's socket. */
static enum direct_told direct_tell(ArcticSwitch *sw, unsigned port,
                                    uint16_t type, unsigned peer,
                                    enum arctic_direct_role role, int fd)
{
    struct sw_conn *conn = sw->port[port].link.conn;
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_DIRECT_SIZE];
    struct arctic_direct d = { .peer = peer, .role = role };
    ssize_t n;

    if (!conn || conn->state != SW_CONN_LIVE || !conn->direct) {
        return DIRECT_NOBODY;
    }
    arctic_frame_header_encode_flags(frame, type, 0, ARCTIC_DIRECT_SIZE);
    arctic_direct_encode(frame + ARCTIC_LINK_HEADER_SIZE, &d);
    n = sw_send_fds(conn->fd, frame, sizeof(frame), &fd, fd >= 0 ? 1 : 0);
    if (n == (ssize_t)sizeof(frame)) {
        sw->direct_port[port].unread += fd >= 0;
        sw_conn_kick_niu(conn);
        return DIRECT_TOLD;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
                  errno == ETOOMANYREFS || errno == ENOBUFS ||
                  errno == ENOMEM)) {
        /*
         * The NIU has not read its socket yet (kicked, or at its next
         * look), or the kernel holds as many descriptors
         * in flight for the switch's user as it allows: nothing went.
         */
        return DIRECT_NO_ROOM;
    }
    if (n < 0) {
        return DIRECT_NOBODY;   /* EPIPE and the like: its input ends it */
    }
    /* Part of a frame went: the frames after it could not be framed. */
    sw_log(sw, "port %u: a direct-ring frame went in part; closing", port);
    sw_conn_close(sw, conn, ARCTIC_DISCONNECT_IO_ERROR);
    return DIRECT_NOBODY;
}

/* Name @port held back from new pairs (@why), once a SW_DIRECT_LOG_NS. */
static void direct_held(ArcticSwitch *sw, unsigned port, const char *why)
{
    struct sw_direct_port *p = &sw->direct_port[port];
    uint64_t now = sw_clock_ns();

    if (!p->logged_ns || now - p->logged_ns >= SW_DIRECT_LOG_NS) {
        p->logged_ns = now;
        sw_log(sw, "port %u: no new direct ring with it until it reads its "
               "socket (%s)", port, why);
    }
}

/* May @port get a DIRECT_RING now?  Not while it has not read the last. */
static bool direct_room(ArcticSwitch *sw, unsigned port)
{
    const struct sw_direct_port *p = &sw->direct_port[port];

    if (p->owed_count) {
        direct_held(sw, port, "direct-ring stops wait to go");
        return false;
    }
    if (p->unread >= SW_DIRECT_UNREAD_MAX) {
        direct_held(sw, port, "direct rings unread");
        return false;
    }
    return true;
}

static void stop_owe(ArcticSwitch *sw, unsigned port, unsigned peer,
                     enum arctic_direct_role role)
{
    struct sw_direct_port *p = &sw->direct_port[port];
    uint64_t bit = 1ull << (peer % 64);

    if (!(p->owed[role][peer / 64] & bit)) {
        p->owed[role][peer / 64] |= bit;
        p->owed_count++;
    }
}

/* DIRECT_STOP to @port: now, or owed until its socket has room. */
static void stop_tell(ArcticSwitch *sw, unsigned port, unsigned peer,
                      enum arctic_direct_role role)
{
    if (direct_tell(sw, port, ARCTIC_FRAME_DIRECT_STOP, peer, role, -1) ==
        DIRECT_NO_ROOM) {
        stop_owe(sw, port, peer, role);
    }
}

/* Send what @port is owed, as far as its socket takes it. */
static void stop_flush(ArcticSwitch *sw, unsigned port)
{
    struct sw_direct_port *p = &sw->direct_port[port];
    unsigned role, peer;

    for (role = 0; role < ARCTIC_DIRECT_ROLES; role++) {
        for (peer = 0; p->owed_count && peer < sw->ports; peer++) {
            uint64_t bit = 1ull << (peer % 64);

            if (!(p->owed[role][peer / 64] & bit)) {
                continue;
            }
            switch (direct_tell(sw, port, ARCTIC_FRAME_DIRECT_STOP, peer,
                                role, -1)) {
            case DIRECT_NO_ROOM:
                return;
            case DIRECT_NOBODY:     /* its link ends, and its rings */
                memset(p->owed, 0, sizeof(p->owed));
                p->owed_count = 0;
                return;
            case DIRECT_TOLD:
                p->owed[role][peer / 64] &= ~bit;
                p->owed_count--;
                break;
            }
        }
    }
}

/* Has @port's NIU read everything sent on its socket? */
static bool socket_read(const ArcticSwitch *sw, unsigned port)
{
    const struct sw_conn *conn = sw->port[port].link.conn;
    int queued = 0;

    /* SIOCOUTQ on a UNIX socket: what the peer has not taken. */
    return !conn || (ioctl(conn->fd, SIOCOUTQ, &queued) == 0 && !queued);
}

static void pair_free(ArcticSwitch *sw, unsigned src, unsigned dst)
{
    struct sw_direct_pair **slot = pair_slot(sw, src, dst);
    struct sw_direct_pair *pair = *slot;

    if (!pair) {
        return;
    }
    /* What it carried stays in the ports' counts. */
    pair_read(pair, sw_clock_ns());
    pair_count(pair, &sw->port[src].stats, &sw->port[dst].stats);
    munmap(pair->area, pair->size);
    g_free(pair);
    *slot = NULL;
    sw->direct_live--;
    sw->direct_port[dst].in--;
}

/* Take back the pair from @src to @dst: both ends are told, if up. */
static void pair_stop(ArcticSwitch *sw, unsigned src, unsigned dst)
{
    if (!*pair_slot(sw, src, dst)) {
        return;
    }
    pair_free(sw, src, dst);
    stop_tell(sw, src, dst, ARCTIC_DIRECT_SEND);
    stop_tell(sw, dst, src, ARCTIC_DIRECT_RECEIVE);
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
 * A DIRECT_RING to @port did not go (@told): no pair now, and none with
 * it until it has read its socket (sw_direct_timer()), so that a node
 * that does not read costs no more areas made in vain.
 */
static void ring_not_told(ArcticSwitch *sw, unsigned port,
                          enum direct_told told, int err)
{
    if (told == DIRECT_NO_ROOM) {
        sw->direct_port[port].unread = SW_DIRECT_UNREAD_MAX;
        direct_held(sw, port, g_strerror(err));
    }
}

/*
 * A valid packet from @src to @dst entered the routers: if the two may
 * have a direct pair and have none, make one.  Under the model lock.
 */
static void direct_routed(ArcticSwitch *sw, unsigned src, unsigned dst)
{
    struct sw_direct_pair *pair;
    struct sw_conn *a, *b;
    enum direct_told told;
    void *area;
    size_t size;
    int fd, err;

    if (!sw->direct_pairs || src == dst || *pair_slot(sw, src, dst)) {
        return;
    }
    a = sw->port[src].link.conn;
    b = sw->port[dst].link.conn;
    if (!a || !b || !a->direct || !b->direct || !sw->direct_open ||
        sw->direct_live >= SW_DIRECT_PAIRS_MAX ||
        sw->direct_port[dst].in >= SW_DIRECT_IN_MAX ||
        !direct_room(sw, dst) || !direct_room(sw, src)) {
        return;
    }
    fd = direct_area_new(sw, &area, &size);
    if (fd < 0) {
        return;
    }
    pair = g_new0(struct sw_direct_pair, 1);
    pair->area = area;
    pair->size = size;
    pair->made_ns = sw_clock_ns();
    *pair_slot(sw, src, dst) = pair;
    sw->direct_live++;
    sw->direct_port[dst].in++;
    /*
     * The receiver first: a sender that writes before the receiver has
     * the ring delays its packets by a look (ARCTIC_RING_LOOK_MS), no
     * more.  If either does not go, there is no pair: the receiver that
     * has its ring is told to drop it.
     */
    told = direct_tell(sw, dst, ARCTIC_FRAME_DIRECT_RING, src,
                       ARCTIC_DIRECT_RECEIVE, fd);
    if (told != DIRECT_TOLD) {
        err = errno;
        pair_free(sw, src, dst);
        ring_not_told(sw, dst, told, err);
    } else if ((told = direct_tell(sw, src, ARCTIC_FRAME_DIRECT_RING, dst,
                                   ARCTIC_DIRECT_SEND, fd)) != DIRECT_TOLD) {
        err = errno;
        pair_free(sw, src, dst);
        stop_tell(sw, dst, src, ARCTIC_DIRECT_RECEIVE);
        ring_not_told(sw, src, told, err);
    } else if (sw->config.verbose) {
        sw_log(sw, "direct ring %u -> %u", src, dst);
    }
    close(fd);
}

/* @port's NIU is gone: every pair it was an end of goes. */
static void direct_port_down(ArcticSwitch *sw, unsigned port)
{
    unsigned i;

    if (!sw->direct_port) {
        return;
    }
    for (i = 0; sw->direct_live && i < sw->ports; i++) {
        pair_stop(sw, port, i);
        pair_stop(sw, i, port);
    }
    /* A new link there starts with nothing sent and nothing owed. */
    memset(&sw->direct_port[port], 0, sizeof(sw->direct_port[port]));
}

/*
 * The loop's timer (every ARCTIC_RING_LOOK_MS while links are on rings):
 * what ports are owed goes as far as their sockets take it, and a port
 * that has read every frame may have new pairs again.
 */
void sw_direct_timer(ArcticSwitch *sw)
{
    unsigned i;

    for (i = 0; sw->direct_port && i < sw->ports; i++) {
        struct sw_direct_port *p = &sw->direct_port[i];

        if (p->owed_count) {
            stop_flush(sw, i);
        }
        if (p->unread && socket_read(sw, i)) {
            p->unread = 0;
        }
    }
}

/*
 * Faults or a capture were turned on or off: whether pairs may be made
 * from now on (so that a packet need not look at every port's faults);
 * if not, every pair goes, and every packet crosses the switch again.
 */
static void direct_revise(ArcticSwitch *sw)
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
void sw_direct_stats(ArcticSwitch *sw, struct arctic_port_stats *st)
{
    uint64_t now = sw_clock_ns();
    unsigned src, dst;

    for (src = 0; sw->direct_live && src < sw->ports; src++) {
        for (dst = 0; dst < sw->ports; dst++) {
            struct sw_direct_pair *pair = *pair_slot(sw, src, dst);

            if (pair) {
                pair_read(pair, now);
                pair_count(pair, &st[src], &st[dst]);
            }
        }
    }
}

/* The statistics start again: the live pairs count from here. */
static void direct_stats_reset(ArcticSwitch *sw)
{
    uint64_t now = sw_clock_ns();
    unsigned i, prio;

    for (i = 0; sw->direct_live && i < sw->ports * sw->ports; i++) {
        struct sw_direct_pair *pair = sw->direct_pairs[i];

        if (!pair) {
            continue;
        }
        pair_read(pair, now);
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            pair->count[prio].base_packets = pair->count[prio].packets;
            pair->count[prio].base_bytes = pair->count[prio].bytes;
        }
    }
}

const struct sw_hooks sw_direct_hooks = {
    .routed = direct_routed,
    .port_down = direct_port_down,
    .watching_changed = direct_revise,
    .stats_reset = direct_stats_reset,
};

void sw_direct_init(ArcticSwitch *sw)
{
    if (sw->config.direct) {
        sw->direct_pairs = g_new0(struct sw_direct_pair *,
                                  (size_t)sw->ports * sw->ports);
        sw->direct_port = g_new0(struct sw_direct_port, sw->ports);
    }
    direct_revise(sw);
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
    g_clear_pointer(&sw->direct_port, g_free);
}
