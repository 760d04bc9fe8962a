/* SPDX-License-Identifier: MIT */
/*
 * The network model: a binary fat tree of 4x4 Arctic routers (route.h),
 * packets moving hop by hop by their route bits, one FIFO per priority at
 * every router input, credit flow control between routers (a shared pool
 * of buffers whose last one only a high-priority packet may take) and on
 * the NIU links (per-priority credits of the link protocol), and the
 * egress to each NIU where faults are applied.  Routers that may be able
 * to move a packet sit on a dirty list; sw_schedule() drains it, so the
 * cost of a packet is proportional to its hops, not to the tree size.
 */
#include <string.h>

#include "switch-internal.h"

static struct sw_router *router_at(ArcticSwitch *sw, unsigned level,
                                   unsigned index)
{
    return &sw->routers[level * sw->routers_per_level + index];
}

bool sw_tree_init(ArcticSwitch *sw, GError **errp)
{
    unsigned level, index, i;
    unsigned internal_inputs = 0;

    sw->routers_per_level = arctic_tree_routers_per_level(sw->levels);
    sw->routers = g_new0(struct sw_router,
                         (size_t)sw->levels * sw->routers_per_level);
    for (level = 0; level < sw->levels; level++) {
        for (index = 0; index < sw->routers_per_level; index++) {
            struct sw_router *r = router_at(sw, level, index);

            r->level = level;
            r->index = index;
            for (i = 0; i < SW_ROUTER_INPUTS; i++) {
                r->in[i].node = -1;
                r->in[i].capacity = sw->config.router_buffers;
                r->out[i].node = -1;
            }
        }
    }
    for (level = 0; level < sw->levels; level++) {
        for (index = 0; index < sw->routers_per_level; index++) {
            struct sw_router *r = router_at(sw, level, index);
            unsigned d, p;

            for (d = 0; d < ARCTIC_ROUTER_DOWN_PORTS; d++) {
                struct sw_output *out = &r->out[d];

                if (level == 0) {
                    /* Leaf: down port d is node 2r + d, both ways. */
                    unsigned node = 2 * index + d;

                    if (node < sw->ports) {
                        out->node = (int)node;
                        r->in[d].node = (int)node;
                        r->in[d].capacity = sw->config.credits;
                        sw->port[node].leaf = r;
                        sw->port[node].leaf_input = d;
                    }
                    continue;
                }
                /* Down port d leads to the child with bit level-1 = d; we
                 * arrive at that child's up input named by our own bit. */
                out->next = router_at(sw, level - 1,
                                      (index & ~(1u << (level - 1))) |
                                      (d << (level - 1)));
                out->next_input = ARCTIC_ROUTER_DOWN_PORTS +
                                  ((index >> (level - 1)) & 1);
            }
            for (p = 0; p < ARCTIC_ROUTER_UP_PORTS; p++) {
                struct sw_output *out = &r->out[ARCTIC_ROUTER_DOWN_PORTS + p];

                if (level + 1 == sw->levels) {
                    continue;       /* the top has no parents */
                }
                out->next = router_at(sw, level + 1,
                                      (index & ~(1u << level)) | (p << level));
                out->next_input = (index >> level) & 1;
            }
            for (i = 0; i < ARCTIC_ROUTER_PORTS; i++) {
                struct sw_output *out = &r->out[i];

                if (out->next) {
                    out->next->in[out->next_input].upstream = r;
                    out->next->in[out->next_input].upstream_output = i;
                    internal_inputs++;
                }
            }
        }
    }
    /* Every packet is in exactly one bounded place: an NIU input (its
     * credits), an internal router input, or a delay line. */
    sw->packet_bound = (uint64_t)sw->ports * ARCTIC_NUM_PRIORITIES *
                       sw->config.credits +
                       (uint64_t)internal_inputs * sw->config.router_buffers +
                       (uint64_t)sw->ports * ARCTIC_NUM_PRIORITIES *
                       SW_DELAY_LINE_MAX;
    return true;
}

static void queue_free_all(ArcticSwitch *sw, struct sw_queue *q)
{
    struct sw_packet *p;

    while ((p = sw_queue_pop(q))) {
        sw_packet_free(sw, p);
    }
}

void sw_tree_free(ArcticSwitch *sw)
{
    size_t n = (size_t)sw->levels * sw->routers_per_level, r;
    unsigned i, prio;
    struct sw_packet *p;

    for (r = 0; sw->routers && r < n; r++) {
        for (i = 0; i < SW_ROUTER_INPUTS; i++) {
            for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
                queue_free_all(sw, &sw->routers[r].in[i].queue[prio]);
            }
        }
    }
    for (i = 0; sw->port && i < sw->ports; i++) {
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            queue_free_all(sw, &sw->port[i].delay_line[prio]);
        }
    }
    while ((p = sw->free_packets)) {
        sw->free_packets = p->next;
        g_free(p);
    }
    g_free(sw->routers);
    sw->routers = NULL;
}

struct sw_packet *sw_packet_alloc(ArcticSwitch *sw)
{
    struct sw_packet *p = sw->free_packets;

    if (p) {
        sw->free_packets = p->next;
    } else {
        p = g_new(struct sw_packet, 1);
        sw->packets_allocated++;
    }
    sw->packets_in_use++;
    if (sw->packets_in_use > sw->packets_in_use_max) {
        sw->packets_in_use_max = sw->packets_in_use;
    }
    return p;
}

void sw_packet_free(ArcticSwitch *sw, struct sw_packet *p)
{
    p->next = sw->free_packets;
    sw->free_packets = p;
    sw->packets_in_use--;
}

void sw_mark_dirty(ArcticSwitch *sw, struct sw_router *router)
{
    if (!router->dirty) {
        router->dirty = true;
        router->next_dirty = sw->dirty_list;
        sw->dirty_list = router;
    }
}

/*
 * Where the route bits lead from @src: up HOPS levels, then down along
 * DOWNROUTE bits HOPS..0.  The bits above the turn level are the source's,
 * because climbing never changes them.  False when the route climbs above
 * the tree or ends on a node that is not a port.
 */
bool sw_route_destination(const ArcticSwitch *sw, unsigned src, uint32_t w0,
                          uint32_t w1, unsigned *dst)
{
    return arctic_route_in_tree(src, sw->levels, w0, w1, dst) &&
           *dst < sw->ports;
}

/* The output a packet takes at @router, having come in on @input. */
unsigned sw_route_output(ArcticSwitch *sw, const struct sw_router *router,
                         unsigned input, const struct sw_packet *p)
{
    unsigned level = router->level, up;

    if (input >= ARCTIC_ROUTER_DOWN_PORTS || level == p->hops) {
        return (p->downroute >> level) & 1;
    }
    if (p->random_up) {
        up = g_rand_int(sw->route_rand) & 1;
    } else {
        up = (p->up_choice >> level) & 1;
    }
    return ARCTIC_ROUTER_DOWN_PORTS + up;
}

static enum arctic_drop_reason wire_error_reason(enum arctic_wire_error e)
{
    switch (e) {
    case ARCTIC_WIRE_BAD_CRC:
        return ARCTIC_DROP_BAD_CRC;
    case ARCTIC_WIRE_BAD_KIND:
        return ARCTIC_DROP_BAD_KIND;
    case ARCTIC_WIRE_NOT_ZERO:
        return ARCTIC_DROP_NOT_ZERO;
    default:                    /* arctic_wire_check() finds no others */
        return ARCTIC_DROP_BAD_LENGTH;
    }
}

/* A buffer of @input became free: tell whoever fills it. */
static void input_released(ArcticSwitch *sw, struct sw_router *router,
                           unsigned input, unsigned prio)
{
    struct sw_input *in = &router->in[input];

    if (in->node >= 0) {
        sw_port_credit_freed(sw, in->node, prio);
    } else if (in->upstream) {
        struct sw_output *out = &in->upstream->out[in->upstream_output];

        if (out->blocked) {
            out->blocked = false;
            sw_mark_dirty(sw, in->upstream);
        }
    }
}

/*
 * Does the end-to-end header of a well-formed packet from the NIU on
 * @port_no name that port as its source?  A receiving NIU trusts the
 * source (and so the job) a packet names: the switch, which knows which
 * link a packet came in on, is the one place that can check it.
 */
static bool source_is_port(const uint8_t *bytes, unsigned port_no)
{
    struct arctic_e2e_header h;

    arctic_e2e_decode(bytes, &h);
    return h.src_node == port_no;
}

/*
 * Why a packet from the NIU on @port_no is dropped at the door (enum
 * arctic_drop_reason), or -1: it is well formed, names its port as its
 * source and leads to a live port, *@dst.
 */
int sw_packet_check(const ArcticSwitch *sw, unsigned port_no,
                    const uint8_t *bytes, size_t size, unsigned *dst)
{
    uint32_t w0 = arctic_get_le32(bytes + ARCTIC_WIRE_WORDS_OFFSET);
    uint32_t w1 = arctic_get_le32(bytes + ARCTIC_WIRE_WORDS_OFFSET + 4);
    enum arctic_wire_error error = arctic_wire_check(bytes, size);

    *dst = SW_NO_PORT;
    if (error != ARCTIC_WIRE_OK) {
        return wire_error_reason(error);
    }
    if (!source_is_port(bytes, port_no)) {
        return ARCTIC_DROP_FORGED_SOURCE;
    }
    if (!sw_route_destination(sw, port_no, w0, w1, dst)) {
        *dst = SW_NO_PORT;
        return ARCTIC_DROP_UNKNOWN_ROUTE;
    }
    if (!sw_port_live(sw, *dst)) {
        return ARCTIC_DROP_PORT_DOWN;
    }
    return -1;
}

/* A packet's route fields, from its words 0 and 1. */
void sw_packet_route(struct sw_packet *p)
{
    uint32_t w0 = arctic_get_le32(p->bytes + ARCTIC_WIRE_WORDS_OFFSET);
    uint32_t w1 = arctic_get_le32(p->bytes + ARCTIC_WIRE_WORDS_OFFSET + 4);
    uint32_t up = ARCTIC_FIELD_GET(ARCTIC_W0, UPROUTE, w0);

    p->hops = ARCTIC_FIELD_GET(UPROUTE, HOPS, up);
    p->random_up = ARCTIC_FIELD_GET(UPROUTE, RANDOM, up);
    p->up_choice = ARCTIC_FIELD_GET(UPROUTE, CHOICE, up);
    p->downroute = ARCTIC_FIELD_GET(ARCTIC_W1, DOWNROUTE, w1);
}

/*
 * A PACKET frame from the NIU on @port_no, its credit already taken.
 * Valid packets enter the leaf router's input; the others are counted,
 * captured and their credit returned at once.
 */
static void router_packet(ArcticSwitch *sw, unsigned port_no, unsigned prio,
                          const uint8_t *bytes, size_t size)
{
    struct sw_port *port = &sw->port[port_no];
    struct arctic_port_prio_stats *st = &port->stats.prio[prio];
    struct sw_router *leaf = port->leaf;
    struct sw_input *in = &leaf->in[port->leaf_input];
    unsigned dst;
    int reason = sw_packet_check(sw, port_no, bytes, size, &dst);
    struct sw_packet *p;

    st->rx_packets++;
    st->rx_bytes += size;
    sw_pcap_record(sw, reason < 0 ? SW_PCAP_INGRESS : SW_PCAP_DROP, reason,
                   0, port_no, dst, bytes, size);
    if (reason >= 0) {
        sw_count_drop(sw, port_no, prio, reason);
        sw_port_credit_freed(sw, port_no, prio);
        return;
    }

    if (sw->hooks.routed) {
        sw->hooks.routed(sw, port_no, dst);
    }
    p = sw_packet_alloc(sw);
    memcpy(p->bytes, bytes, size);
    p->size = size;
    p->src_port = port_no;
    p->dst_port = dst;
    p->priority = prio;
    sw_packet_route(p);
    p->flags = 0;
    p->copies_left = 1;
    p->ingress_ns = sw->now_ns;
    p->ready_ns = sw->config.timing ? sw->now_ns + sw->config.hop_latency_ns
                                    : 0;
    p->out_port = sw_route_output(sw, leaf, port->leaf_input, p);
    sw_queue_push(&in->queue[prio], p);
    if (in->queue[prio].count > st->ingress_depth_max) {
        st->ingress_depth_max = in->queue[prio].count;
    }
    sw_mark_dirty(sw, leaf);
}

static void router_wake_at(ArcticSwitch *sw, struct sw_router *router,
                           uint64_t when)
{
    if (!router->wake_ns || when < router->wake_ns) {
        router->wake_ns = when;
    }
    sw_arm_timer(sw, when);
}

/* Internal links: a low-priority packet may not take the last buffer. */
static bool input_can_accept(const struct sw_input *in, unsigned prio)
{
    unsigned used = in->queue[0].count + in->queue[1].count;
    unsigned needed = prio == ARCTIC_PRIORITY_HIGH ? 1 : 2;

    return used + needed <= in->capacity;
}

static void count_stall(ArcticSwitch *sw, struct sw_router *router,
                        struct sw_packet *p, bool egress)
{
    struct arctic_port_prio_stats *st;

    if (p->flags & SW_PACKET_STALL_COUNTED) {
        return;
    }
    p->flags |= SW_PACKET_STALL_COUNTED;
    if (egress) {
        st = &sw->port[p->dst_port].stats.prio[p->priority];
        st->tx_credit_stalls++;
    } else {
        st = &sw->port[p->src_port].stats.prio[p->priority];
        st->network_stalls++;
        router->stalls++;
    }
}

/*
 * Send the remaining copies of @p to the NIU of @port_no.  True when every
 * copy went out; false when the NIU's credits or the socket buffer ran out
 * first (the packet keeps its place and the output is marked blocked).
 */
static bool egress_transmit(ArcticSwitch *sw, unsigned port_no,
                            struct sw_packet *p, bool *blocked)
{
    struct sw_port *port = &sw->port[port_no];
    struct arctic_port_prio_stats *st = &port->stats.prio[p->priority];
    unsigned prio = p->priority;

    while (p->copies_left > 0) {
        unsigned flags = 0;

        if (!sw_port_can_send(sw, port_no, prio, p->size)) {
            *blocked = true;
            return false;
        }
        if ((p->flags & SW_FAULT_CORRUPT) &&
            !(p->flags & SW_FAULT_CORRUPTED)) {
            p->bytes[(p->corrupt_bit / 8) % p->size] ^=
                1u << (p->corrupt_bit % 8);
            p->flags |= SW_FAULT_CORRUPTED;
        }
        sw_port_send(sw, port_no, prio, p->bytes, p->size);
        st->tx_packets++;
        st->tx_bytes += p->size;
        if (!(p->flags & SW_PACKET_DELIVERED_ONCE)) {
            p->flags |= SW_PACKET_DELIVERED_ONCE;
            sw_stats_latency(sw, prio, sw->now_ns - p->ingress_ns);
        } else {
            flags |= SW_PCAP_FLAG_DUPLICATE;
        }
        if (p->flags & SW_FAULT_CORRUPTED) {
            flags |= SW_PCAP_FLAG_CORRUPTED;
        }
        if (p->flags & SW_FAULT_DELAY) {
            flags |= SW_PCAP_FLAG_DELAYED;
        }
        sw_pcap_record(sw, SW_PCAP_EGRESS, -1, flags, p->src_port, port_no,
                       p->bytes, p->size);
        p->copies_left--;
    }
    return true;
}

static void drop_packet(ArcticSwitch *sw, struct sw_packet *p,
                        unsigned count_port, enum arctic_drop_reason reason)
{
    sw_count_drop(sw, count_port, p->priority, reason);
    sw_pcap_record(sw, SW_PCAP_DROP, reason, 0, p->src_port, p->dst_port,
                   p->bytes, p->size);
    sw_packet_free(sw, p);
}

/* Release the delayed packets of @port_no that are due, oldest first. */
static void release_delayed(ArcticSwitch *sw, unsigned port_no)
{
    struct sw_port *port = &sw->port[port_no];
    unsigned prio;

    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        struct sw_queue *line = &port->delay_line[prio];
        bool blocked = false;

        while (line->head) {
            struct sw_packet *p = line->head;

            if (!sw_port_live(sw, port_no)) {
                drop_packet(sw, sw_queue_pop(line), p->src_port,
                            ARCTIC_DROP_PORT_DOWN);
                continue;
            }
            if (p->ready_ns > sw->now_ns) {
                sw_arm_timer(sw, p->ready_ns);
                break;
            }
            if (!egress_transmit(sw, port_no, p, &blocked)) {
                break;
            }
            sw_packet_free(sw, sw_queue_pop(line));
        }
    }
}

/*
 * Hand the head packet of a leaf input to its NIU.  Returns true when the
 * packet left the input (delivered, dropped or moved to the delay line).
 */
static bool egress_forward(ArcticSwitch *sw, struct sw_router *router,
                           struct sw_output *out, struct sw_packet *p)
{
    unsigned port_no = out->node;
    struct sw_port *port = &sw->port[port_no];
    bool blocked = false;

    if (!sw_port_live(sw, port_no)) {
        return true;    /* caller drops it as PORT_DOWN */
    }
    if (!(p->flags & SW_FAULT_DECIDED)) {
        sw_fault_decide(sw, port_no, p->priority, p);
    }
    if (p->flags & SW_FAULT_DROP) {
        return true;
    }
    if ((p->flags & SW_FAULT_DELAY) &&
        !(p->flags & SW_PACKET_DELIVERED_ONCE)) {
        /* A full delay line holds the packet back rather than skipping
         * the delay, so a packet's fate never depends on timing. */
        if (port->delay_line[p->priority].count >= SW_DELAY_LINE_MAX) {
            out->blocked = true;
            return false;
        }
        port->stats.prio[p->priority].delayed++;
        return true;
    }
    /* Delayed packets that are due go before newer ones. */
    release_delayed(sw, port_no);
    if (!egress_transmit(sw, port_no, p, &blocked)) {
        out->blocked = true;
        count_stall(sw, router, p, true);
        return false;
    }
    return true;
}

/* Try to move the head packet of @router's input @i at @prio one hop. */
static bool forward_head(ArcticSwitch *sw, struct sw_router *router,
                         unsigned i, unsigned prio)
{
    struct sw_queue *q = &router->in[i].queue[prio];
    struct sw_packet *p = q->head;
    struct sw_output *out = &router->out[p->out_port];
    uint64_t start = sw->now_ns;

    if (sw->config.timing) {
        if (p->ready_ns > sw->now_ns) {
            router_wake_at(sw, router, p->ready_ns);
            return false;
        }
        if (out->busy_until_ns > sw->now_ns) {
            router_wake_at(sw, router, out->busy_until_ns);
            return false;
        }
    }
    if (out->node >= 0) {
        unsigned port_no = out->node;

        if (!egress_forward(sw, router, out, p)) {
            return false;
        }
        sw_queue_pop(q);
        input_released(sw, router, i, prio);
        if (!sw_port_live(sw, port_no)) {
            drop_packet(sw, p, p->src_port, ARCTIC_DROP_PORT_DOWN);
        } else if ((p->flags & SW_FAULT_DROP)) {
            drop_packet(sw, p, port_no, ARCTIC_DROP_FAULT);
        } else if (p->flags & SW_FAULT_DELAY && p->copies_left &&
                   !(p->flags & SW_PACKET_DELIVERED_ONCE)) {
            uint32_t delay_us =
                sw->port[port_no].fault[prio].params.delay_us;

            p->ready_ns = sw->now_ns + (uint64_t)delay_us * 1000;
            sw_queue_push(&sw->port[port_no].delay_line[prio], p);
            sw_arm_timer(sw, p->ready_ns);
        } else {
            sw_packet_free(sw, p);
        }
        if (sw->config.timing) {
            out->busy_until_ns = start + (uint64_t)(p->size *
                                                    sw->ns_per_byte);
        }
        return true;
    }
    if (!out->next) {
        /* Only reachable through a route check gap; never wedge on it. */
        sw_queue_pop(q);
        input_released(sw, router, i, prio);
        drop_packet(sw, p, p->src_port, ARCTIC_DROP_UNKNOWN_ROUTE);
        return true;
    }
    {
        struct sw_router *next = out->next;
        struct sw_input *next_in = &next->in[out->next_input];

        if (!input_can_accept(next_in, prio)) {
            out->blocked = true;
            count_stall(sw, router, p, false);
            return false;
        }
        sw_queue_pop(q);
        input_released(sw, router, i, prio);
        p->flags &= ~SW_PACKET_STALL_COUNTED;
        p->out_port = sw_route_output(sw, next, out->next_input, p);
        if (sw->config.timing) {
            uint64_t wire_ns = (uint64_t)(p->size * sw->ns_per_byte);

            out->busy_until_ns = start + wire_ns;
            p->ready_ns = start + wire_ns + sw->config.hop_latency_ns;
        }
        sw_queue_push(&next_in->queue[prio], p);
        sw_mark_dirty(sw, next);
        return true;
    }
}

/*
 * Move whatever can move out of @router: high priority first, then low,
 * one packet per input per round with a rotating start so no input
 * starves another; repeat while anything moved.
 */
static void router_process(ArcticSwitch *sw, struct sw_router *router)
{
    bool progress;

    do {
        unsigned prio, k;

        progress = false;
        for (prio = ARCTIC_NUM_PRIORITIES; prio-- > 0;) {
            for (k = 0; k < SW_ROUTER_INPUTS; k++) {
                unsigned i = (router->round_robin + k) % SW_ROUTER_INPUTS;

                if (router->in[i].queue[prio].head &&
                    forward_head(sw, router, i, prio)) {
                    progress = true;
                }
            }
        }
        router->round_robin++;
    } while (progress);
}

/* Has a router work that sw_schedule() has not done? */
bool sw_schedule_pending(const ArcticSwitch *sw)
{
    return sw->dirty_list != NULL;
}

void sw_schedule(ArcticSwitch *sw)
{
    struct sw_router *router;

    while ((router = sw->dirty_list)) {
        sw->dirty_list = router->next_dirty;
        router->dirty = false;
        router_process(sw, router);
    }
}

/* The NIU on @port_no gave credits or drained its socket. */
/* The NIU on @port_no gave credits or drained its socket. */
static void router_port_ready(ArcticSwitch *sw, unsigned port_no)
{
    struct sw_port *port = &sw->port[port_no];
    struct sw_output *out = &port->leaf->out[port->leaf_input];

    release_delayed(sw, port_no);
    if (out->blocked) {
        out->blocked = false;
        sw_mark_dirty(sw, port->leaf);
    }
}

/*
 * The NIU of @port_no is gone: what waits for it is dropped when the leaf
 * next runs; what it sent before leaving is still delivered.
 */
static void router_port_detached(ArcticSwitch *sw, unsigned port_no)
{
    struct sw_port *port = &sw->port[port_no];
    unsigned prio;

    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        struct sw_packet *p;

        while ((p = sw_queue_pop(&port->delay_line[prio]))) {
            drop_packet(sw, p, p->src_port, ARCTIC_DROP_PORT_DOWN);
        }
    }
    port->leaf->out[port->leaf_input].blocked = false;
    sw_mark_dirty(sw, port->leaf);
}

const struct sw_port_ops sw_router_port_ops = {
    .packet = router_packet,
    .ready = router_port_ready,
    .detached = router_port_detached,
};

/* The loop's timer fired: routers whose time came, delay lines. */
void sw_router_timer(ArcticSwitch *sw)
{
    size_t n = (size_t)sw->levels * sw->routers_per_level, r;
    unsigned port_no;

    for (r = 0; r < n; r++) {
        struct sw_router *router = &sw->routers[r];

        if (router->wake_ns && router->wake_ns <= sw->now_ns) {
            router->wake_ns = 0;
            sw_mark_dirty(sw, router);
        } else if (router->wake_ns) {
            sw_arm_timer(sw, router->wake_ns);
        }
    }
    for (port_no = 0; port_no < sw->ports; port_no++) {
        struct sw_port *port = &sw->port[port_no];

        if (port->delay_line[0].head || port->delay_line[1].head) {
            router_port_ready(sw, port_no);
        }
    }
}

/* Packets of the NIU on @port_no waiting in its leaf router input. */
unsigned sw_port_ingress_depth(const ArcticSwitch *sw, unsigned port_no,
                               unsigned priority)
{
    const struct sw_port *port = &sw->port[port_no];

    return port->leaf->in[port->leaf_input].queue[priority].count;
}

unsigned sw_port_egress_depth(const ArcticSwitch *sw, unsigned port_no,
                              unsigned priority)
{
    const struct sw_port *port = &sw->port[port_no];
    const struct sw_router *leaf = port->leaf;
    unsigned depth = port->delay_line[priority].count, i;

    for (i = 0; i < SW_ROUTER_INPUTS; i++) {
        const struct sw_packet *p;

        for (p = leaf->in[i].queue[priority].head; p; p = p->next) {
            depth += p->out_port == port->leaf_input;
        }
    }
    return depth;
}

/* A new step of a wait's explanation starts after "; ". */
static void begin_step(GString *s)
{
    if (s->len) {
        g_string_append(s, "; ");
    }
}

static void append_step(GString *s, const char *fmt, ...)
    G_GNUC_PRINTF(2, 3);

static void append_step(GString *s, const char *fmt, ...)
{
    va_list ap;

    begin_step(s);
    va_start(ap, fmt);
    g_string_append_vprintf(s, fmt, ap);
    va_end(ap);
}

/*
 * Why @p, at input @i of @router, has not moved on: from the head of its
 * queue to the output the head wants and, while that leads to a full
 * router input, on to the head packet there, until what holds the chain
 * up: an NIU without credit or whose socket is full, or a buffer with room
 * (the packet then only waits for the next pass or the timing model).
 * For an NIU, when it last returned credit and last sent anything, and
 * how many bytes sent to it it has not read, tell a stalled NIU (nothing
 * read) from one that reads but keeps its credits.
 */
static char *explain_wait(ArcticSwitch *sw, uint64_t now_ns,
                          const struct sw_router *router, unsigned i,
                          const struct sw_packet *p)
{
    GString *s = g_string_new(NULL);
    unsigned step;

    for (step = 0; step <= 2 * sw->levels; step++) {
        const struct sw_queue *q = &router->in[i].queue[p->priority];
        const struct sw_output *out;
        const struct sw_input *next_in;

        if (q->head != p) {
            p = q->head;
            append_step(s, "behind a packet %u -> %u at the head",
                        p->src_port, p->dst_port);
        }
        out = &router->out[p->out_port];
        if (out->node >= 0) {
            begin_step(s);
            sw_port_describe(sw, out->node, p->priority, p->size, now_ns, s);
            g_string_append_printf(s, ", delay line %u",
                                   sw->port[out->node].delay_line[p->priority]
                                   .count);
            break;
        }
        if (!out->next) {
            append_step(s, "output %u leads nowhere", p->out_port);
            break;
        }
        next_in = &out->next->in[out->next_input];
        append_step(s, "router %u.%u input %u: %u high + %u low of %u",
                    out->next->level, out->next->index, out->next_input,
                    next_in->queue[ARCTIC_PRIORITY_HIGH].count,
                    next_in->queue[ARCTIC_PRIORITY_LOW].count,
                    next_in->capacity);
        if (input_can_accept(next_in, p->priority)) {
            g_string_append(s, ", room");
            break;
        }
        i = out->next_input;
        router = out->next;
        p = next_in->queue[p->priority].head ?:
            next_in->queue[!p->priority].head;
    }
    return g_string_free(s, FALSE);
}

/* Where the oldest packet of a priority found so far is. */
struct oldest_candidate {
    const struct sw_packet *p;
    const struct sw_router *router;     /* NULL: in a delay line */
    unsigned input;                     /* router input, or the port */
    unsigned ahead;                     /* packets ahead of it in its queue */
};

static void consider_oldest(struct oldest_candidate *c,
                            const struct sw_packet *p,
                            const struct sw_router *router, unsigned input,
                            unsigned ahead)
{
    if (!c->p || p->ingress_ns < c->p->ingress_ns) {
        *c = (struct oldest_candidate) { p, router, input, ahead };
    }
}

/* The oldest packet of each priority in the routers and delay lines. */
void sw_find_oldest(ArcticSwitch *sw, uint64_t now_ns,
                    struct arctic_oldest_packet *oldest)
{
    size_t n = (size_t)sw->levels * sw->routers_per_level, r;
    struct oldest_candidate best[ARCTIC_NUM_PRIORITIES] = { { NULL } };
    unsigned i, prio;

    for (r = 0; r < n; r++) {
        for (i = 0; i < SW_ROUTER_INPUTS; i++) {
            for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
                const struct sw_packet *p;
                unsigned k = 0;

                for (p = sw->routers[r].in[i].queue[prio].head; p;
                     p = p->next, k++) {
                    consider_oldest(&best[prio], p, &sw->routers[r], i, k);
                }
            }
        }
    }
    for (i = 0; i < sw->ports; i++) {
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            const struct sw_packet *p = sw->port[i].delay_line[prio].head;

            if (p) {
                consider_oldest(&best[prio], p, NULL, i, 0);
            }
        }
    }
    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        const struct oldest_candidate *c = &best[prio];
        struct arctic_oldest_packet *o = &oldest[prio];

        memset(o, 0, sizeof(*o));
        if (!c->p) {
            continue;
        }
        o->present = true;
        o->age_ns = now_ns > c->p->ingress_ns ? now_ns - c->p->ingress_ns : 0;
        o->src = c->p->src_port;
        o->dst = c->p->dst_port;
        if (!c->router) {
            o->where = g_strdup_printf("delay line of port %u", c->input);
            o->waits_for = g_strdup("its delay");
            continue;
        }
        o->where = g_strdup_printf("router %u.%u input %u, %u packet(s) "
                                   "ahead", c->router->level, c->router->index,
                                   c->input, c->ahead);
        o->waits_for = explain_wait(sw, now_ns, c->router, c->input, c->p);
    }
}
