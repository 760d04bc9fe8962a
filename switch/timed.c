/* SPDX-License-Identifier: MIT */
/*
 * Timed mode (--timed; docs/timed-mode.md): the network of a cluster that
 * keeps one virtual time.  Each NIU stamps its packets with the virtual
 * time they leave it (TIMED_PACKET) and reports how far its clock went
 * (TIME_SYNC); this file computes when each packet reaches its receiver,
 * by the model of arctic/timing.h (link rate, cut-through hops, contention
 * on every link, the receiving NIU's engine), and grants each NIU the time
 * it may run to without missing a packet: conservative synchronisation.
 *
 * What a node may still send.  A node's TIME_SYNC says the time it
 * reached and its promise: the earliest time it could send unless a
 * packet reaches it first (the time reached while its processor runs; its
 * next timer while it is halted).  Its "earliest" is that promise, or the
 * earliest delivery the switch has handed it that it has not taken yet
 * (not reached, or reached by less than one of its ticks).
 * A packet a node creates at or after its earliest carries a stamp of
 * at least earliest + its cheapest transmit cost, and reaches anyone at
 * least return_ns after its stamp (two cables, one router, the shortest
 * packet on the wire, the cheapest receive): lookahead = that transmit
 * cost + return_ns.
 *
 * Order.  The network is a discrete-event model (below, "the network":
 * Arctic's input buffers and priorities), run only as far as it is
 * final: the horizon is every node's earliest + cheapest transmit cost,
 * before which no packet can still be stamped, and each link and engine
 * runs to the horizon plus the least time such a packet takes to reach
 * it (server_limit()).  A delivery is
 * handed over when the receive engine starts on it; packets still in the
 * network bound the grants of their receivers (network_bounds()), so a
 * delivery never precedes the time its receiver reached, which the NIU
 * checks.
 *
 * Grants.  A node that waits is granted up to the least earliest of the
 * other nodes plus the lookahead (an earliest lowered to the time a packet
 * in the network can reach that node: it wakes the node, whose answer
 * comes a lookahead later), no further than the stamp of any
 * packet not yet in the network plus return_ns, nor than the earliest
 * delivery to it of a packet in the network; it stops sooner by itself after
 * it sends (link.h).  One that is halted with nothing to do before that
 * grant keeps waiting instead, without a useless wake-up (its earliest is
 * what the others' grants need, not its clock).  The node whose earliest
 * is least always gets a grant beyond it, so the cluster never stalls
 * while every node answers.
 *
 * Everything here is a function of the frames' contents in the order
 * each link delivers them: the same program gives the same times,
 * whatever the host does.  It runs in the thread that holds the model
 * lock, like the rest of the switch.
 */
#include <inttypes.h>
#include <string.h>

#include "arctic/timing.h"
#include "switch-internal.h"

enum {
    /*
     * Packets of one node not yet on its cable (their stamps run ahead
     * of the others' clocks, or a full input holds them back): an NIU's
     * retransmit lines bound them far below this, so more is a node that
     * floods the switch.  Past its cable a packet holds a buffer.
     */
    SW_TIMED_PENDING_MAX = 8192,
    /*
     * Bytes that wait for a node's connection (its socket and the
     * switch's output buffer full).  An honest NIU that reads slowly
     * holds the cluster's clock within a lookahead of its own, so what
     * can wait for it is a few grants and the packets its peers' lines
     * may send in that time: kilobytes.  A node that leaves a mebibyte
     * unread does not read its link, and is cut off.
     */
    SW_TIMED_BACKLOG_MAX = 1024 * 1024,
    /* Router outputs on a packet's path: up the tree and down again. */
    SW_TIMED_PATH_MAX = 64,
    /* A packet in its sender's NIU holds no buffer of the network. */
    SW_TIMED_NO_LINK = ~0u,
};

enum sw_timed_node_state {
    SW_TIMED_ABSENT,        /* no NIU yet, or it left before the start */
    SW_TIMED_JOINED,        /* a timed NIU is connected */
    SW_TIMED_READY,         /* it sent TIME_READY */
    SW_TIMED_RUNNING,       /* the clock started */
    SW_TIMED_GONE,          /* it left after the start: sends nothing */
};

struct sw_timed_packet {
    uint64_t stamp;
    uint64_t order;         /* arrival at the switch, for ties */
    uint16_t src;
    uint16_t size;
    uint8_t prio;
    uint8_t bytes[ARCTIC_WIRE_MAX_SIZE];
};

struct sw_timed_node {
    enum sw_timed_node_state state;
    struct arctic_time_ready costs;
    uint64_t tx_min;            /* its cheapest transmit cost */
    uint64_t reached, promise, granted;
    bool waiting;               /* TIME_SYNC at its grant, no new grant */
    bool unread;                /* its backlog went past the bound */
    uint64_t next_stamp;        /* its transmit engine is busy until then */
    uint64_t rx_free;           /* its receive engine */
    GArray *deliveries;         /* min-heap: times it has not reached */
    unsigned pending;           /* its packets not on their cable yet */
    GByteArray *backlog;        /* frames its connection has no room for */
    uint64_t syncs;
};

/* A packet in the network: from its stamp until its receive engine. */
struct sw_timed_flight {
    struct sw_timed_packet *p;
    struct sw_packet *sp;       /* routed, its faults decided */
    unsigned dst;
    uint64_t ser;               /* its serialisation on a link */
    unsigned hops;              /* router outputs on its path */
    unsigned path[SW_TIMED_PATH_MAX];   /* their link numbers */
    int pos;                    /* -1: its NIU's cable, then path[pos],
                                   then hops: in its receiver */
    unsigned held;              /* the link whose input buffer it holds */
    uint64_t ready;             /* when it waits (or waited) at pos */
};

/*
 * Links are numbered router * ARCTIC_ROUTER_PORTS + output, then the NIUs'
 * cables (router_links + port); a "server" is a link or, from links on,
 * a node's receive engine.
 */
struct sw_timed {
    struct sw_timed_node *node;
    GPtrArray *pending;         /* min-heap of struct sw_timed_packet */
    uint64_t order;
    bool started;
    uint64_t lookahead_ns, return_ns;
    uint32_t link_ps_per_byte;
    unsigned router_links, links;
    uint64_t *link_busy;        /* [link]: sending until then */
    unsigned *link_buffers;     /* [link]: free in the input it feeds */
    GPtrArray **waiting;        /* [link]: packets waiting for it */
    GPtrArray **arrived;        /* [node]: tails in, for the engine */
    GPtrArray *flights;         /* every struct sw_timed_flight */
    GArray *events;             /* min-heap of struct sw_timed_event */
    bool *dirty;                /* [server] */
    GArray *dirty_list;         /* servers to look at, this instant */
    uint64_t horizon;           /* nothing can be stamped before it */
    uint64_t rx_min;            /* the cheapest receive */
    GArray *later;              /* events not final yet, this run */
    uint64_t *bound;            /* [node]: no delivery in flight before */
    uint64_t syncs, grants, packets, deliveries;
};

/* Saturating a + b for times that may be ARCTIC_TIME_NEVER. */
static uint64_t time_add(uint64_t a, uint64_t b)
{
    return a > ARCTIC_TIME_NEVER - b ? ARCTIC_TIME_NEVER : a + b;
}

/* --- heaps ------------------------------------------------------------ */

static bool packet_before(const struct sw_timed_packet *a,
                          const struct sw_timed_packet *b)
{
    if (a->stamp != b->stamp) {
        return a->stamp < b->stamp;
    }
    if (a->src != b->src) {
        return a->src < b->src;
    }
    return a->order < b->order;
}

static void pending_push(struct sw_timed *tm, struct sw_timed_packet *p)
{
    GPtrArray *h = tm->pending;
    guint i = h->len;

    g_ptr_array_add(h, p);
    while (i > 0) {
        guint parent = (i - 1) / 2;

        if (!packet_before(h->pdata[i], h->pdata[parent])) {
            break;
        }
        h->pdata[i] = h->pdata[parent];
        h->pdata[parent] = p;
        i = parent;
    }
}

static struct sw_timed_packet *pending_top(struct sw_timed *tm)
{
    return tm->pending->len ? tm->pending->pdata[0] : NULL;
}

static struct sw_timed_packet *pending_pop(struct sw_timed *tm)
{
    GPtrArray *h = tm->pending;
    struct sw_timed_packet *top = h->pdata[0];
    guint i = 0;

    h->pdata[0] = h->pdata[h->len - 1];
    g_ptr_array_set_size(h, h->len - 1);
    for (;;) {
        guint l = 2 * i + 1, r = l + 1, m = i;
        gpointer t;

        if (l < h->len && packet_before(h->pdata[l], h->pdata[m])) {
            m = l;
        }
        if (r < h->len && packet_before(h->pdata[r], h->pdata[m])) {
            m = r;
        }
        if (m == i) {
            break;
        }
        t = h->pdata[i];
        h->pdata[i] = h->pdata[m];
        h->pdata[m] = t;
        i = m;
    }
    return top;
}

static void times_push(GArray *h, uint64_t t)
{
    guint i = h->len;

    g_array_append_val(h, t);
    while (i > 0 && g_array_index(h, uint64_t, (i - 1) / 2) > t) {
        g_array_index(h, uint64_t, i) = g_array_index(h, uint64_t,
                                                      (i - 1) / 2);
        i = (i - 1) / 2;
    }
    g_array_index(h, uint64_t, i) = t;
}

static uint64_t times_min(GArray *h)
{
    return h->len ? g_array_index(h, uint64_t, 0) : ARCTIC_TIME_NEVER;
}

static void times_pop(GArray *h)
{
    uint64_t last = g_array_index(h, uint64_t, h->len - 1);
    guint i = 0, n = h->len - 1;

    for (;;) {
        guint l = 2 * i + 1, m = l;

        if (l >= n) {
            break;
        }
        if (l + 1 < n && g_array_index(h, uint64_t, l + 1) <
                         g_array_index(h, uint64_t, l)) {
            m = l + 1;
        }
        if (g_array_index(h, uint64_t, m) >= last) {
            break;
        }
        g_array_index(h, uint64_t, i) = g_array_index(h, uint64_t, m);
        i = m;
    }
    if (n) {
        g_array_index(h, uint64_t, i) = last;
    }
    g_array_set_size(h, n);
}

/* --- frames to the NIUs ----------------------------------------------- */

/* Move what waits for @port_no's connection into it, as room allows. */
static void timed_pump(ArcticSwitch *sw, unsigned port_no)
{
    struct sw_timed_node *n = &sw->timed->node[port_no];
    size_t taken;

    if (!n->backlog->len) {
        return;
    }
    taken = sw_port_write(sw, port_no, n->backlog->data, n->backlog->len);
    g_byte_array_remove_range(n->backlog, 0, taken);
}

/* A frame for @port_no: it follows everything sent to it before. */
static void timed_send(ArcticSwitch *sw, unsigned port_no, uint16_t type,
                       uint16_t flags, const uint8_t *body, uint32_t len)
{
    struct sw_timed_node *n = &sw->timed->node[port_no];
    uint8_t header[ARCTIC_LINK_HEADER_SIZE];

    if (n->state != SW_TIMED_RUNNING && n->state != SW_TIMED_READY) {
        return;
    }
    if (n->unread) {
        return;                 /* cut off once the model lets go */
    }
    if (n->backlog->len > SW_TIMED_BACKLOG_MAX) {
        n->unread = true;
        return;
    }
    arctic_frame_header_encode_flags(header, type, flags, len);
    g_byte_array_append(n->backlog, header, sizeof(header));
    g_byte_array_append(n->backlog, body, len);
    timed_pump(sw, port_no);
}

static void timed_grant(ArcticSwitch *sw, unsigned port_no, uint64_t until)
{
    struct sw_timed_node *n = &sw->timed->node[port_no];
    uint8_t body[ARCTIC_TIME_GRANT_SIZE];

    n->granted = until;
    n->waiting = false;
    sw->timed->grants++;
    arctic_put_le64(body, until);
    timed_send(sw, port_no, ARCTIC_FRAME_TIME_GRANT, 0, body, sizeof(body));
}

/* --- the network ------------------------------------------------------ */

/*
 * The network is a discrete-event model in virtual time (docs/timed-mode.md,
 * "The model").  Its servers are the links: each NIU's cable to its leaf
 * router and each router output.  A link sends one packet at a time (busy
 * for its serialisation: cut-through, the tail follows the head) and keeps
 * Arctic's count of the free buffers of the input section it feeds (seed
 * 000 §5.6.1, §6.1.4): a high-priority packet may take any buffer, a
 * low-priority one only while two are free, so the last is kept for high
 * priority.  A buffer is held from the moment the link feeding it starts
 * the packet's head until its tail has left on the next link (a router's
 * input) or the receive engine has delivered it (an NIU's input).  Among
 * the packets waiting for a link, the link takes a high one first, then
 * the one that waited longest (ties: stamp, source port, arrival).  Each
 * NIU's receive engine takes the packets whose tails are in its input the
 * same way, one at a time.
 *
 * All events before the horizon (no packet can still be stamped before
 * it) are final: the model runs to there, and a delivery is handed to its
 * receiver when the engine starts on it.
 */

enum sw_timed_event_kind {
    SW_TIMED_WAITS,         /* a packet waits for its next link or engine */
    SW_TIMED_LINK_FREE,     /* a link sent a packet's tail */
    SW_TIMED_RELEASE,       /* a buffer in the input a link feeds is free */
    SW_TIMED_ENGINE_FREE,   /* a receive engine is done */
};

struct sw_timed_event {
    uint64_t time;
    unsigned kind;
    unsigned index;         /* a link, or a node's engine */
    struct sw_timed_flight *f;
};

static void event_push(struct sw_timed *tm, uint64_t time, unsigned kind,
                       unsigned index, struct sw_timed_flight *f)
{
    struct sw_timed_event e = { time, kind, index, f };
    GArray *h = tm->events;
    guint i = h->len;

    g_array_append_val(h, e);
    while (i > 0) {
        struct sw_timed_event *parent = &g_array_index(h, struct sw_timed_event,
                                                       (i - 1) / 2);
        if (parent->time <= time) {
            break;
        }
        g_array_index(h, struct sw_timed_event, i) = *parent;
        i = (i - 1) / 2;
    }
    g_array_index(h, struct sw_timed_event, i) = e;
}

static uint64_t event_next(struct sw_timed *tm)
{
    return tm->events->len ? g_array_index(tm->events, struct sw_timed_event,
                                           0).time : ARCTIC_TIME_NEVER;
}

static struct sw_timed_event event_pop(struct sw_timed *tm)
{
    GArray *h = tm->events;
    struct sw_timed_event top = g_array_index(h, struct sw_timed_event, 0);
    struct sw_timed_event last = g_array_index(h, struct sw_timed_event,
                                               h->len - 1);
    guint i = 0, n = h->len - 1;

    for (;;) {
        guint l = 2 * i + 1, m = l;

        if (l >= n) {
            break;
        }
        if (l + 1 < n && g_array_index(h, struct sw_timed_event, l + 1).time <
                         g_array_index(h, struct sw_timed_event, l).time) {
            m = l + 1;
        }
        if (g_array_index(h, struct sw_timed_event, m).time >= last.time) {
            break;
        }
        g_array_index(h, struct sw_timed_event, i) =
            g_array_index(h, struct sw_timed_event, m);
        i = m;
    }
    if (n) {
        g_array_index(h, struct sw_timed_event, i) = last;
    }
    g_array_set_size(h, n);
    return top;
}

/* The earliest time @n may create a packet (see the top of the file). */
static uint64_t node_earliest(struct sw_timed_node *n)
{
    if (n->state != SW_TIMED_RUNNING) {
        return ARCTIC_TIME_NEVER;
    }
    /*
     * Taken already, unless within a tick of its clock: a clock that
     * stopped less than an instruction past its grant takes a packet for
     * the grant after it reported, as it goes on (niu_time_packet()).
     */
    while (n->deliveries->len &&
           time_add(times_min(n->deliveries), n->costs.tick_ns) <=
           n->reached) {
        times_pop(n->deliveries);
    }
    return MIN(n->promise, times_min(n->deliveries));
}

static size_t router_number(ArcticSwitch *sw, const struct sw_router *r)
{
    return (size_t)(r - sw->routers);
}

/* The link number of output @o of router @r; then the NIUs' cables. */
static unsigned router_link(ArcticSwitch *sw, const struct sw_router *r,
                            unsigned o)
{
    return (unsigned)(router_number(sw, r) * ARCTIC_ROUTER_PORTS + o);
}

static unsigned cable_link(ArcticSwitch *sw, unsigned port_no)
{
    return sw->timed->router_links + port_no;
}

/* Something at @link (a link, or links + a node's engine) may go at once. */
static void mark_dirty(struct sw_timed *tm, unsigned server)
{
    if (!tm->dirty[server]) {
        tm->dirty[server] = true;
        g_array_append_val(tm->dirty_list, server);
    }
}

static unsigned engine_server(struct sw_timed *tm, unsigned node)
{
    return tm->links + node;
}

/* Is @a to go before @b, both waiting for one link or engine? */
static bool flight_before(const struct sw_timed_flight *a,
                          const struct sw_timed_flight *b)
{
    if (a->p->prio != b->p->prio) {
        return a->p->prio > b->p->prio;
    }
    if (a->ready != b->ready) {
        return a->ready < b->ready;
    }
    return packet_before(a->p, b->p);
}

/* The receive cost of @f's packet at its receiver. */
static uint64_t flight_rx_cost(struct sw_timed *tm,
                               const struct sw_timed_flight *f)
{
    const struct sw_timed_node *rx = &tm->node[f->dst];

    return arctic_time_niu_cost(rx->costs.rx_ns, rx->costs.pci_ps_per_byte,
                                f->p->bytes, f->p->size);
}

/*
 * @f leaves on @link at @t: the link is busy for its serialisation, it
 * takes a buffer of the input the link feeds, and gives back the one it
 * held once its tail is out.
 */
static void link_start(ArcticSwitch *sw, unsigned link,
                       struct sw_timed_flight *f, uint64_t t)
{
    struct sw_timed *tm = sw->timed;
    const ArcticSwitchConfig *c = &sw->config;
    uint64_t delay;

    g_ptr_array_remove_fast(tm->waiting[link], f);
    tm->link_busy[link] = t + f->ser;
    event_push(tm, t + f->ser, SW_TIMED_LINK_FREE, link, NULL);
    tm->link_buffers[link]--;
    if (f->held != SW_TIMED_NO_LINK) {
        event_push(tm, t + f->ser, SW_TIMED_RELEASE, f->held, NULL);
    }
    f->held = link;
    if (f->pos < 0) {
        delay = c->time_wire_ns + c->time_hop_ns;   /* cable, router */
        tm->node[f->p->src].pending--;  /* in the tree: its buffers bound */
    } else if ((unsigned)f->pos + 1 < f->hops) {
        delay = c->time_hop_ns;                     /* the next router */
    } else {
        delay = c->time_wire_ns + f->ser;           /* its tail in the NIU */
    }
    f->pos++;
    f->ready = t + delay;
    event_push(tm, f->ready, SW_TIMED_WAITS, 0, f);
}

/* Send on @link the first packet waiting that may take a buffer. */
static void link_arbitrate(ArcticSwitch *sw, unsigned link, uint64_t t)
{
    struct sw_timed *tm = sw->timed;
    GPtrArray *w = tm->waiting[link];
    struct sw_timed_flight *best = NULL;
    guint i;

    if (tm->link_busy[link] > t || !tm->link_buffers[link]) {
        return;
    }
    for (i = 0; i < w->len; i++) {
        struct sw_timed_flight *f = w->pdata[i];

        if (!best || flight_before(f, best)) {
            best = f;
        }
    }
    /* High first; a low one only while the high priority's buffer stays. */
    if (best && (best->p->prio || tm->link_buffers[link] >= 2)) {
        link_start(sw, link, best, t);
    }
}

/* Hand @p to @dst, to be taken at @at; recorded as a delivery it owes. */
static void timed_deliver(ArcticSwitch *sw, unsigned dst,
                          const struct sw_timed_packet *p, uint64_t at,
                          const uint8_t *bytes, unsigned flags)
{
    struct sw_timed *tm = sw->timed;
    struct arctic_port_prio_stats *st = &sw->port[dst].stats.prio[p->prio];
    uint8_t body[ARCTIC_TIMED_PACKET_HEADER + ARCTIC_WIRE_MAX_SIZE];

    arctic_put_le64(body, at);
    memcpy(body + ARCTIC_TIMED_PACKET_HEADER, bytes, p->size);
    timed_send(sw, dst, ARCTIC_FRAME_TIMED_PACKET,
               ARCTIC_FIELD_PREP(ARCTIC_FRAME_FLAGS, PRIORITY, p->prio),
               body, ARCTIC_TIMED_PACKET_HEADER + p->size);
    times_push(tm->node[dst].deliveries, at);
    st->tx_packets++;
    st->tx_bytes += p->size;
    tm->deliveries++;
    sw_stats_latency(sw, p->prio, at - p->stamp);
    sw->pcap_time = at;
    sw_pcap_record(sw, SW_PCAP_EGRESS, -1, flags, p->src, dst, bytes,
                   p->size);
}

static void flight_free(ArcticSwitch *sw, struct sw_timed_flight *f)
{
    g_ptr_array_remove_fast(sw->timed->flights, f);
    sw_packet_free(sw, f->sp);
    g_free(f->p);
    g_free(f);
}

/*
 * @node's receive engine takes the first packet whose tail is in, at @t:
 * the faults of its receiving port apply, it is delivered, and its buffer
 * is free once the engine is done with it.
 */
static void engine_arbitrate(ArcticSwitch *sw, unsigned node, uint64_t t)
{
    struct sw_timed *tm = sw->timed;
    struct sw_timed_node *rx = &tm->node[node];
    GPtrArray *w = tm->arrived[node];
    struct sw_timed_flight *f = NULL;
    struct sw_timed_packet *p;
    struct sw_packet *sp;
    unsigned flags = 0;
    uint64_t at;
    guint i;

    if (rx->rx_free > t) {
        return;
    }
    for (i = 0; i < w->len; i++) {
        if (!f || flight_before(w->pdata[i], f)) {
            f = w->pdata[i];
        }
    }
    if (!f) {
        return;
    }
    g_ptr_array_remove_fast(w, f);
    p = f->p;
    sp = f->sp;
    rx->rx_free = t + flight_rx_cost(tm, f);
    at = rx->rx_free;
    if (rx->state != SW_TIMED_RUNNING) {
        sw_count_drop(sw, node, p->prio, ARCTIC_DROP_PORT_DOWN);
        sw->pcap_time = at;
        sw_pcap_record(sw, SW_PCAP_DROP, ARCTIC_DROP_PORT_DOWN, 0, p->src,
                       node, p->bytes, p->size);
    } else if (sp->flags & SW_FAULT_DROP) {
        sw_count_drop(sw, node, p->prio, ARCTIC_DROP_FAULT);
        sw->pcap_time = at;
        sw_pcap_record(sw, SW_PCAP_DROP, ARCTIC_DROP_FAULT, 0, p->src, node,
                       p->bytes, p->size);
    } else {
        if (sp->flags & SW_FAULT_CORRUPT) {
            sp->bytes[(sp->corrupt_bit / 8) % sp->size] ^=
                1u << (sp->corrupt_bit % 8);
            flags |= SW_PCAP_FLAG_CORRUPTED;
        }
        if (sp->flags & SW_FAULT_DELAY) {
            struct arctic_fault_params params;

            arctic_switch_get_faults(sw, node, p->prio, &params);
            at += (uint64_t)params.delay_us * 1000;
            flags |= SW_PCAP_FLAG_DELAYED;
        }
        timed_deliver(sw, node, p, at, sp->bytes, flags);
        /* Its receiver may answer from then on. */
        tm->horizon = MIN(tm->horizon, time_add(at, rx->tx_min));
        while (sp->copies_left > 1) {
            /* A duplicate: the engine takes it again after the first. */
            sp->copies_left--;
            at = MAX(at, rx->rx_free) + flight_rx_cost(tm, f);
            rx->rx_free = at;
            timed_deliver(sw, node, p, at, sp->bytes,
                          flags | SW_PCAP_FLAG_DUPLICATE);
        }
    }
    event_push(tm, rx->rx_free, SW_TIMED_RELEASE, f->held, NULL);
    event_push(tm, rx->rx_free, SW_TIMED_ENGINE_FREE, node, NULL);
    flight_free(sw, f);
}

/*
 * @p enters the network at its stamp: checked, captured, routed through
 * the tree (its path is fixed now, in the order of the stamps, like its
 * faults), and waiting for its NIU's cable.
 */
static void timed_inject(ArcticSwitch *sw, struct sw_timed_packet *p)
{
    struct sw_timed *tm = sw->timed;
    struct sw_port *port = &sw->port[p->src];
    struct sw_router *r = port->leaf;
    unsigned in = port->leaf_input, dst;
    struct sw_timed_flight *f;
    struct sw_packet *sp;
    int reason;

    port->stats.prio[p->prio].rx_packets++;
    port->stats.prio[p->prio].rx_bytes += p->size;
    reason = sw_packet_check(sw, p->src, p->bytes, p->size, &dst);
    if (reason < 0 && tm->node[dst].state != SW_TIMED_RUNNING) {
        reason = ARCTIC_DROP_PORT_DOWN;
    }
    sw->pcap_time = p->stamp;
    sw_pcap_record(sw, reason < 0 ? SW_PCAP_INGRESS : SW_PCAP_DROP, reason,
                   0, p->src, dst, p->bytes, p->size);
    if (reason >= 0) {
        sw_count_drop(sw, p->src, p->prio, reason);
        tm->node[p->src].pending--;
        g_free(p);
        return;
    }
    sp = sw_packet_alloc(sw);
    memcpy(sp->bytes, p->bytes, p->size);
    sp->size = p->size;
    sp->src_port = p->src;
    sp->dst_port = dst;
    sp->priority = p->prio;
    sp->flags = 0;
    sp->copies_left = 1;
    sw_packet_route(sp);

    f = g_new0(struct sw_timed_flight, 1);
    f->p = p;
    f->sp = sp;
    f->dst = dst;
    f->ser = arctic_time_serialise(p->size, tm->link_ps_per_byte);
    f->pos = -1;
    f->held = SW_TIMED_NO_LINK;
    f->ready = p->stamp;
    for (;;) {
        unsigned o = sw_route_output(sw, r, in, sp);
        struct sw_output *out = &r->out[o];

        g_assert(f->hops < SW_TIMED_PATH_MAX);
        f->path[f->hops++] = router_link(sw, r, o);
        if (!out->next) {
            break;
        }
        in = out->next_input;
        r = out->next;
    }
    sw_fault_decide(sw, dst, p->prio, sp);
    g_ptr_array_add(tm->flights, f);
    g_ptr_array_add(tm->waiting[cable_link(sw, p->src)], f);
    mark_dirty(tm, cable_link(sw, p->src));
}

/* Apply @e, at its time. */
static void event_apply(ArcticSwitch *sw, const struct sw_timed_event *e)
{
    struct sw_timed *tm = sw->timed;
    struct sw_timed_flight *f = e->f;

    switch (e->kind) {
    case SW_TIMED_WAITS:
        if ((unsigned)f->pos < f->hops) {
            g_ptr_array_add(tm->waiting[f->path[f->pos]], f);
            mark_dirty(tm, f->path[f->pos]);
        } else {
            g_ptr_array_add(tm->arrived[f->dst], f);
            mark_dirty(tm, engine_server(tm, f->dst));
        }
        break;
    case SW_TIMED_RELEASE:
        tm->link_buffers[e->index]++;
        mark_dirty(tm, e->index);
        break;
    case SW_TIMED_LINK_FREE:
        mark_dirty(tm, e->index);
        break;
    case SW_TIMED_ENGINE_FREE:
        mark_dirty(tm, engine_server(tm, e->index));
        break;
    }
}

static gint server_cmp(gconstpointer a, gconstpointer b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

    return x < y ? -1 : x > y;
}

/*
 * How far the events of @server are final.  A packet not yet in the
 * network is stamped at the horizon or later: it may wait for its cable
 * from then on, for a router's output a cable and a router later, and its
 * tail may be in a receiving NIU two cables, a router and the shortest
 * packet's serialisation after its stamp.  A server's state changes only
 * by its own events, and nothing a server does before its limit depends
 * on another's after that one's, so every event before its server's
 * limit is final.
 */
static uint64_t server_limit(ArcticSwitch *sw, unsigned server)
{
    struct sw_timed *tm = sw->timed;
    const ArcticSwitchConfig *c = &sw->config;

    if (server < tm->router_links) {
        return time_add(tm->horizon, c->time_wire_ns + c->time_hop_ns);
    }
    if (server < tm->links) {
        return tm->horizon;
    }
    return time_add(tm->horizon, tm->return_ns - tm->rx_min);
}

static unsigned event_server(struct sw_timed *tm,
                             const struct sw_timed_event *e)
{
    switch (e->kind) {
    case SW_TIMED_WAITS:
        return (unsigned)e->f->pos < e->f->hops ? e->f->path[e->f->pos]
                                                : engine_server(tm, e->f->dst);
    case SW_TIMED_ENGINE_FREE:
        return engine_server(tm, e->index);
    default:
        return e->index;
    }
}

/*
 * Run the network as far as it is final: inject the packets stamped
 * before the horizon, apply every event before its server's limit (the
 * others wait for a later run).  The events of one instant are applied
 * together, then every link and engine they touched chooses, in the
 * order of their numbers; choices that make events at the same instant
 * (zero delays) are followed by another such round.
 */
static void network_run(ArcticSwitch *sw)
{
    struct sw_timed *tm = sw->timed;
    struct sw_timed_packet *p;
    GArray *later = tm->later;
    guint i;

    for (;;) {
        uint64_t t = event_next(tm);

        p = pending_top(tm);
        if (p && p->stamp < t && p->stamp < tm->horizon) {
            t = p->stamp;
        }
        if (t >= server_limit(sw, tm->links)) {
            break;              /* the largest limit: an engine's */
        }
        while ((p = pending_top(tm)) && p->stamp == t &&
               p->stamp < tm->horizon) {
            pending_pop(tm);
            timed_inject(sw, p);
        }
        do {
            while (event_next(tm) == t) {
                struct sw_timed_event e = event_pop(tm);

                if (t < server_limit(sw, event_server(tm, &e))) {
                    event_apply(sw, &e);
                } else {
                    g_array_append_val(later, e);
                }
            }
            g_array_sort(tm->dirty_list, server_cmp);
            for (i = 0; i < tm->dirty_list->len; i++) {
                unsigned s = g_array_index(tm->dirty_list, unsigned, i);

                tm->dirty[s] = false;
                if (s < tm->links) {
                    link_arbitrate(sw, s, t);
                } else {
                    engine_arbitrate(sw, s - tm->links, t);
                }
            }
            g_array_set_size(tm->dirty_list, 0);
        } while (event_next(tm) == t);
    }
    for (i = 0; i < later->len; i++) {
        struct sw_timed_event *e = &g_array_index(later, struct sw_timed_event,
                                                  i);

        event_push(tm, e->time, e->kind, e->index, e->f);
    }
    g_array_set_size(later, 0);
}

/*
 * The earliest time any packet now in the network can be delivered to
 * each node, into @bound (one per port): from where it is, as if nothing
 * were in its way from the limit of the server it waits for on.
 */
static void network_bounds(ArcticSwitch *sw, uint64_t *bound)
{
    struct sw_timed *tm = sw->timed;
    const ArcticSwitchConfig *c = &sw->config;
    guint i;

    for (i = 0; i < sw->ports; i++) {
        bound[i] = ARCTIC_TIME_NEVER;
    }
    for (i = 0; i < tm->flights->len; i++) {
        struct sw_timed_flight *f = tm->flights->pdata[i];
        uint64_t rest = flight_rx_cost(tm, f), from;

        if (f->pos < 0) {
            from = server_limit(sw, cable_link(sw, f->p->src));
            rest += 2 * (uint64_t)c->time_wire_ns + f->ser +
                    (uint64_t)f->hops * c->time_hop_ns;
        } else if ((unsigned)f->pos < f->hops) {
            from = server_limit(sw, f->path[f->pos]);
            rest += (uint64_t)c->time_wire_ns + f->ser +
                    (uint64_t)(f->hops - 1 - f->pos) * c->time_hop_ns;
        } else {
            from = MAX(server_limit(sw, engine_server(tm, f->dst)),
                       tm->node[f->dst].rx_free);
        }
        from = MAX(from, f->ready);
        bound[f->dst] = MIN(bound[f->dst], time_add(from, rest));
    }
}

/*
 * Route every packet no earlier one can overtake any more, then grant
 * every waiting node what it may have: after every TIME_SYNC, packet,
 * start or departure.
 */
static void timed_advance(ArcticSwitch *sw)
{
    struct sw_timed *tm = sw->timed;
    uint64_t least = ARCTIC_TIME_NEVER, second = ARCTIC_TIME_NEVER;
    uint64_t pending_stamp;
    unsigned i, least_port = SW_NO_PORT;
    struct sw_timed_packet *p;

    if (!tm->started) {
        return;
    }
    tm->horizon = ARCTIC_TIME_NEVER;
    for (i = 0; i < sw->ports; i++) {
        struct sw_timed_node *n = &tm->node[i];

        tm->horizon = MIN(tm->horizon, time_add(node_earliest(n), n->tx_min));
    }
    network_run(sw);
    network_bounds(sw, tm->bound);

    for (i = 0; i < sw->ports; i++) {
        uint64_t e = node_earliest(&tm->node[i]);

        /*
         * A packet still in the network may wake a running node sooner
         * than it promised (it was handed no delivery for it yet), and its
         * answer reach the others a lookahead later.
         */
        if (tm->node[i].state == SW_TIMED_RUNNING) {
            e = MIN(e, tm->bound[i]);
        }
        if (e < least) {
            second = least;
            least = e;
            least_port = i;
        } else if (e < second) {
            second = e;
        }
    }
    p = pending_top(tm);
    pending_stamp = p ? time_add(p->stamp, tm->return_ns) : ARCTIC_TIME_NEVER;
    for (i = 0; i < sw->ports; i++) {
        struct sw_timed_node *n = &tm->node[i];
        uint64_t others = i == least_port ? second : least;
        uint64_t grant = MIN(MIN(time_add(others, tm->lookahead_ns),
                                 pending_stamp), tm->bound[i]);

        if (n->state != SW_TIMED_RUNNING || !n->waiting ||
            grant <= n->reached) {
            continue;
        }
        /*
         * Halted, with nothing to take before the grant: it would only
         * wake to report the same promise at the grant.
         */
        if (n->promise > n->reached && grant < node_earliest(n) &&
            grant != ARCTIC_TIME_NEVER) {
            continue;
        }
        timed_grant(sw, i, grant);
    }
}

/* --- what the NIUs say ---------------------------------------------- */

/* Every port's NIU is ready: the clock starts at 0 for all. */
static void timed_start(ArcticSwitch *sw)
{
    struct sw_timed *tm = sw->timed;
    uint64_t tx_min = ARCTIC_TIME_NEVER, rx_min = ARCTIC_TIME_NEVER;
    uint8_t body[ARCTIC_TIME_START_SIZE];
    unsigned i;

    for (i = 0; i < sw->ports; i++) {
        struct sw_timed_node *n = &tm->node[i];

        tx_min = MIN(tx_min, n->tx_min);
        rx_min = MIN(rx_min, arctic_time_niu_min_cost(
                                 n->costs.rx_ns, n->costs.pci_ps_per_byte));
    }
    tm->return_ns = 2 * sw->config.time_wire_ns + sw->config.time_hop_ns +
                    arctic_time_serialise(ARCTIC_WIRE_MIN_SIZE,
                                          tm->link_ps_per_byte) + rx_min;
    tm->lookahead_ns = tx_min + tm->return_ns;
    tm->rx_min = rx_min;
    tm->started = true;
    for (i = 0; i < sw->ports; i++) {
        struct sw_timed_node *n = &tm->node[i];
        struct arctic_time_start start = {
            /* Every node at 0, running: the others' 0 + lookahead. */
            .grant = sw->ports > 1 ? tm->lookahead_ns : ARCTIC_TIME_NEVER,
            .lookahead_ns = tm->lookahead_ns,
            .return_ns = tm->return_ns,
        };

        n->state = SW_TIMED_RUNNING;
        n->reached = n->promise = 0;
        n->next_stamp = 0;
        n->granted = start.grant;
        n->waiting = false;
        arctic_time_start_encode(body, &start);
        timed_send(sw, i, ARCTIC_FRAME_TIME_START, 0, body, sizeof(body));
    }
    sw_log(sw, "timed: the clock of %u node(s) started: lookahead %" PRIu64
           " ns, return %" PRIu64 " ns", sw->ports, tm->lookahead_ns,
           tm->return_ns);
}

/* A port that broke the timed protocol (@what): its link ends. */
static bool timed_violation(ArcticSwitch *sw, unsigned port_no,
                            const char *what, uint64_t value)
{
    sw_log(sw, "port %u broke the timed protocol: %s (%" PRIu64 ")",
           port_no, what, value);
    sw_port_drop(sw, port_no, ARCTIC_DISCONNECT_TIME_PROTOCOL);
    return false;
}

static bool timed_ready(ArcticSwitch *sw, unsigned port_no,
                        const uint8_t *body)
{
    struct sw_timed *tm = sw->timed;
    struct sw_timed_node *n = &tm->node[port_no];
    unsigned i;

    if (n->state != SW_TIMED_JOINED) {
        return timed_violation(sw, port_no, "TIME_READY twice", 0);
    }
    arctic_time_ready_decode(body, &n->costs);
    if (!n->costs.tick_ns || n->costs.tick_ns > 1000000 ||
        n->costs.pci_ps_per_byte == 0) {
        return timed_violation(sw, port_no, "TIME_READY with bad costs",
                               n->costs.pci_ps_per_byte);
    }
    n->tx_min = arctic_time_niu_min_cost(n->costs.tx_ns,
                                         n->costs.pci_ps_per_byte);
    n->state = SW_TIMED_READY;
    for (i = 0; i < sw->ports; i++) {
        if (tm->node[i].state != SW_TIMED_READY) {
            return true;
        }
    }
    timed_start(sw);
    timed_advance(sw);
    return true;
}

static bool timed_packet(ArcticSwitch *sw, unsigned port_no, uint16_t flags,
                         const uint8_t *body, uint32_t len)
{
    struct sw_timed *tm = sw->timed;
    struct sw_timed_node *n = &tm->node[port_no];
    struct sw_timed_packet *p;
    uint64_t stamp = arctic_get_le64(body);

    if (n->state != SW_TIMED_RUNNING) {
        return timed_violation(sw, port_no, "TIMED_PACKET before the start",
                               stamp);
    }
    /*
     * Made no sooner than its promise or a packet it was handed (not just
     * the clock it reported: a halted node promised to send nothing
     * before its timer, and the others ran on that), and transmitted
     * after that, one packet at a time.
     */
    if (stamp < time_add(node_earliest(n), n->tx_min)) {
        return timed_violation(sw, port_no, "a packet stamped before the "
                               "time it promised and its cheapest "
                               "transmission", stamp);
    }
    if (stamp < n->next_stamp) {
        return timed_violation(sw, port_no, "a packet stamped within the "
                               "cheapest transmission of the one before",
                               stamp);
    }
    n->next_stamp = time_add(stamp, n->tx_min);
    if (n->pending >= SW_TIMED_PENDING_MAX) {
        return timed_violation(sw, port_no, "too many packets ahead of the "
                               "cluster's time or waiting for its cable",
                               n->pending);
    }
    p = g_new(struct sw_timed_packet, 1);
    p->stamp = stamp;
    p->order = tm->order++;
    p->src = port_no;
    p->prio = ARCTIC_FIELD_GET(ARCTIC_FRAME_FLAGS, PRIORITY, flags);
    p->size = len - ARCTIC_TIMED_PACKET_HEADER;
    memcpy(p->bytes, body + ARCTIC_TIMED_PACKET_HEADER, p->size);
    n->pending++;
    tm->packets++;
    pending_push(tm, p);
    /* Routed once the node's TIME_SYNC shows nothing earlier can come. */
    return true;
}

static bool timed_sync(ArcticSwitch *sw, unsigned port_no,
                       const uint8_t *body)
{
    struct sw_timed *tm = sw->timed;
    struct sw_timed_node *n = &tm->node[port_no];
    struct arctic_time_sync sync;

    arctic_time_sync_decode(body, &sync);
    if (n->state != SW_TIMED_RUNNING) {
        return timed_violation(sw, port_no, "TIME_SYNC before the start",
                               sync.reached);
    }
    /* A processor's clock may pass its grant by less than a tick. */
    if (sync.reached < n->reached ||
        sync.reached >= time_add(n->granted, n->costs.tick_ns) ||
        sync.promise < sync.reached || n->waiting) {
        return timed_violation(sw, port_no, "TIME_SYNC beyond its grant, "
                               "back in time or twice", sync.reached);
    }
    n->reached = sync.reached;
    n->promise = sync.promise;
    n->waiting = true;
    n->syncs++;
    tm->syncs++;
    timed_advance(sw);
    return true;
}

/*
 * Cut off every node whose backlog went past SW_TIMED_BACKLOG_MAX, once
 * the model is between two steps (timed_send() only marks them: the
 * departure runs timed_advance() again).
 */
static void timed_cut_unread(ArcticSwitch *sw)
{
    struct sw_timed *tm = sw->timed;
    unsigned i;

    for (i = 0; i < sw->ports; i++) {
        struct sw_timed_node *n = &tm->node[i];

        if (!n->unread) {
            continue;
        }
        n->unread = false;
        sw_log(sw, "port %u does not read its link: more than %u bytes wait "
               "for it at %" PRIu64 " ns; it is cut off", i,
               (unsigned)SW_TIMED_BACKLOG_MAX, n->reached);
        sw_port_drop(sw, i, ARCTIC_DISCONNECT_NOT_READING);
        i = -1u;                /* its departure may have marked others */
    }
}

static bool timed_frame(ArcticSwitch *sw, unsigned port_no,
                        const struct arctic_frame_header *h,
                        const uint8_t *body)
{
    switch (h->type) {
    case ARCTIC_FRAME_TIME_READY:
        return timed_ready(sw, port_no, body);
    case ARCTIC_FRAME_TIMED_PACKET:
        return timed_packet(sw, port_no, h->flags, body, h->length);
    case ARCTIC_FRAME_TIME_SYNC:
        return timed_sync(sw, port_no, body);
    default:
        return timed_violation(sw, port_no, "an unexpected frame type",
                               h->type);
    }
}

/* --- what the ports report ------------------------------------------ */

/* A frame of a timed link: the port hands every frame after WELCOME here. */
static void timed_port_frame(ArcticSwitch *sw, unsigned port_no,
                             const struct arctic_frame_header *h,
                             const uint8_t *body)
{
    timed_frame(sw, port_no, h, body);
    timed_cut_unread(sw);
}

/*
 * May the NIU of @port_no join?  NULL if so, else why not: once the
 * clock runs, no node can join (it could not catch up with the others'
 * time).
 */
static const char *timed_port_refuses(const ArcticSwitch *sw,
                                      unsigned port_no)
{
    return sw->timed->started ? "the timed cluster's clock has started"
                              : NULL;
}

static void timed_port_ready(ArcticSwitch *sw, unsigned port_no)
{
    struct sw_timed_node *n = &sw->timed->node[port_no];

    if (n->state == SW_TIMED_ABSENT) {
        n->state = SW_TIMED_JOINED;     /* a new connection */
    }
    timed_pump(sw, port_no);
}

static void timed_port_detached(ArcticSwitch *sw, unsigned port_no)
{
    struct sw_timed *tm = sw->timed;
    struct sw_timed_node *n = &tm->node[port_no];

    g_byte_array_set_size(n->backlog, 0);
    g_array_set_size(n->deliveries, 0);
    n->waiting = false;
    if (!tm->started) {
        n->state = SW_TIMED_ABSENT;
        return;
    }
    if (n->state == SW_TIMED_RUNNING) {
        sw_log(sw, "timed: node %u left at %" PRIu64 " ns; the others run "
               "on without it", port_no, n->reached);
    }
    n->state = SW_TIMED_GONE;
    timed_advance(sw);
    timed_cut_unread(sw);
}

const struct sw_port_ops sw_timed_port_ops = {
    .ready = timed_port_ready,
    .detached = timed_port_detached,
    .frame = timed_port_frame,
    .refuses = timed_port_refuses,
};

/* --- life cycle and counters ------------------------------------------ */

void sw_timed_init(ArcticSwitch *sw)
{
    struct sw_timed *tm = g_new0(struct sw_timed, 1);
    unsigned i;

    tm->node = g_new0(struct sw_timed_node, sw->ports);
    for (i = 0; i < sw->ports; i++) {
        tm->node[i].deliveries = g_array_new(false, false, sizeof(uint64_t));
        tm->node[i].backlog = g_byte_array_new();
    }
    tm->pending = g_ptr_array_new();   /* the heap moves its pointers */
    tm->link_ps_per_byte = (uint32_t)(1e6 / sw->config.link_mbytes_per_s +
                                      0.5);
    tm->router_links = sw->levels * sw->routers_per_level *
                       ARCTIC_ROUTER_PORTS;
    tm->links = tm->router_links + sw->ports;
    tm->link_busy = g_new0(uint64_t, tm->links);
    tm->link_buffers = g_new0(unsigned, tm->links);
    tm->waiting = g_new0(GPtrArray *, tm->links);
    for (i = 0; i < tm->links; i++) {
        tm->link_buffers[i] = sw->config.time_buffers;
        tm->waiting[i] = g_ptr_array_new();
    }
    tm->arrived = g_new0(GPtrArray *, sw->ports);
    for (i = 0; i < sw->ports; i++) {
        tm->arrived[i] = g_ptr_array_new();
    }
    tm->flights = g_ptr_array_new();
    tm->events = g_array_new(false, false, sizeof(struct sw_timed_event));
    tm->dirty = g_new0(bool, tm->links + sw->ports);
    tm->dirty_list = g_array_new(false, false, sizeof(unsigned));
    tm->later = g_array_new(false, false, sizeof(struct sw_timed_event));
    tm->bound = g_new0(uint64_t, sw->ports);
    sw->timed = tm;
}

void sw_timed_free(ArcticSwitch *sw)
{
    struct sw_timed *tm = sw->timed;
    unsigned i;

    if (!tm) {
        return;
    }
    for (i = 0; i < sw->ports; i++) {
        g_array_free(tm->node[i].deliveries, true);
        g_byte_array_free(tm->node[i].backlog, true);
    }
    for (i = 0; i < tm->pending->len; i++) {
        g_free(tm->pending->pdata[i]);
    }
    g_ptr_array_free(tm->pending, true);
    while (tm->flights->len) {
        flight_free(sw, tm->flights->pdata[0]);
    }
    g_ptr_array_free(tm->flights, true);
    for (i = 0; i < tm->links; i++) {
        g_ptr_array_free(tm->waiting[i], true);
    }
    for (i = 0; i < sw->ports; i++) {
        g_ptr_array_free(tm->arrived[i], true);
    }
    g_free(tm->waiting);
    g_free(tm->arrived);
    g_free(tm->link_busy);
    g_free(tm->link_buffers);
    g_array_free(tm->events, true);
    g_free(tm->dirty);
    g_array_free(tm->dirty_list, true);
    g_array_free(tm->later, true);
    g_free(tm->bound);
    g_free(tm->node);
    g_free(tm);
    sw->timed = NULL;
}

void sw_timed_stats(ArcticSwitch *sw, ArcticSwitchStats *st)
{
    struct sw_timed *tm = sw->timed;
    unsigned i;

    if (!tm) {
        return;
    }
    st->timed = true;
    st->time_started = tm->started;
    st->time_lookahead_ns = tm->lookahead_ns;
    st->time_syncs = tm->syncs;
    st->time_grants = tm->grants;
    st->time_packets = tm->packets;
    st->time_deliveries = tm->deliveries;
    for (i = 0; i < sw->ports; i++) {
        struct sw_timed_node *n = &tm->node[i];

        st->port[i].time_reached = n->reached;
        st->port[i].time_granted = n->granted;
        st->port[i].time_promise = n->promise;
        st->port[i].time_waiting = n->waiting;
        st->port[i].time_syncs = n->syncs;
    }
}
