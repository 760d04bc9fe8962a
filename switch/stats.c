/* SPDX-License-Identifier: MIT */
/*
 * Counters the way network simulators report them (SST Merlin, BookSim):
 * per port and priority packets, bytes, credit stalls, drops by reason and
 * queue depths, plus a per-priority latency histogram (switch entry to
 * delivery, log2 microsecond buckets).  A snapshot copies everything out
 * of the loop thread; the same snapshot is rendered as the control
 * socket's JSON and as the table arctic-switch prints on exit.
 */
#include <string.h>

#include "switch-internal.h"

const char *arctic_drop_reason_name(enum arctic_drop_reason reason)
{
    static const char *const names[ARCTIC_DROP_REASONS] = {
        [ARCTIC_DROP_BAD_CRC] = "bad_crc",
        [ARCTIC_DROP_BAD_LENGTH] = "bad_length",
        [ARCTIC_DROP_BAD_KIND] = "bad_kind",
        [ARCTIC_DROP_NOT_ZERO] = "not_zero",
        [ARCTIC_DROP_UNKNOWN_ROUTE] = "unknown_route",
        [ARCTIC_DROP_PORT_DOWN] = "port_down",
        [ARCTIC_DROP_FAULT] = "fault",
        [ARCTIC_DROP_FORGED_SOURCE] = "forged_source",
    };

    return reason < ARCTIC_DROP_REASONS ? names[reason] : "unknown";
}

const char *arctic_disconnect_reason_name(enum arctic_disconnect_reason r)
{
    static const char *const names[ARCTIC_DISCONNECT_REASONS] = {
        [ARCTIC_DISCONNECT_PEER_CLOSED] = "peer_closed",
        [ARCTIC_DISCONNECT_REJECTED] = "rejected",
        [ARCTIC_DISCONNECT_BAD_FRAME_TYPE] = "bad_frame_type",
        [ARCTIC_DISCONNECT_BAD_FRAME_FLAGS] = "bad_frame_flags",
        [ARCTIC_DISCONNECT_BAD_FRAME_LENGTH] = "bad_frame_length",
        [ARCTIC_DISCONNECT_UNEXPECTED_FRAME] = "unexpected_frame",
        [ARCTIC_DISCONNECT_CREDIT_OVERRUN] = "credit_overrun",
        [ARCTIC_DISCONNECT_CREDIT_OVERFLOW] = "credit_overflow",
        [ARCTIC_DISCONNECT_HANDSHAKE_TIMEOUT] = "handshake_timeout",
        [ARCTIC_DISCONNECT_IO_ERROR] = "io_error",
        [ARCTIC_DISCONNECT_SHUTDOWN] = "shutdown",
        [ARCTIC_DISCONNECT_EVICTED] = "evicted",
        [ARCTIC_DISCONNECT_BROKEN_RING] = "broken_ring",
        [ARCTIC_DISCONNECT_TIME_PROTOCOL] = "time_protocol",
        [ARCTIC_DISCONNECT_NOT_READING] = "not_reading",
    };

    return r < ARCTIC_DISCONNECT_REASONS ? names[r] : "unknown";
}

void sw_count_drop(ArcticSwitch *sw, unsigned port_no, unsigned priority,
                   enum arctic_drop_reason reason)
{
    sw->port[port_no].stats.prio[priority].drops[reason]++;
}

void sw_stats_latency(ArcticSwitch *sw, unsigned priority, uint64_t ns)
{
    uint64_t us = ns / 1000;
    unsigned bucket = 0;

    while (us && bucket < ARCTIC_LATENCY_BUCKETS - 1) {
        us >>= 1;
        bucket++;
    }
    sw->latency[priority][bucket]++;
}

void arctic_switch_stats_free(ArcticSwitchStats *stats)
{
    unsigned prio;

    if (stats) {
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            g_free(stats->oldest[prio].where);
            g_free(stats->oldest[prio].waits_for);
        }
        g_free(stats->port);
        g_free(stats);
    }
}

void arctic_switch_stats_reset(ArcticSwitch *sw)
{
    size_t r, n = (size_t)sw->levels * sw->routers_per_level;
    unsigned i;

    for (i = 0; i < sw->ports; i++) {
        memset(&sw->port[i].stats, 0, sizeof(sw->port[i].stats));
    }
    for (r = 0; r < n; r++) {
        sw->routers[r].stalls = 0;
    }
    memset(sw->unattached_disconnects, 0, sizeof(sw->unattached_disconnects));
    memset(sw->latency, 0, sizeof(sw->latency));
    sw->packets_in_use_max = sw->packets_in_use;
    if (sw->hooks.stats_reset) {
        sw->hooks.stats_reset(sw);
    }
}

static uint64_t total_drops(const struct arctic_port_prio_stats *p)
{
    uint64_t sum = 0;
    unsigned r;

    for (r = 0; r < ARCTIC_DROP_REASONS; r++) {
        sum += p->drops[r];
    }
    return sum;
}

static bool port_is_quiet(const struct arctic_port_stats *p)
{
    unsigned prio;

    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        if (p->prio[prio].rx_packets || p->prio[prio].tx_packets ||
            total_drops(&p->prio[prio])) {
            return false;
        }
    }
    return !p->connected && !p->connects;
}

const char *sw_priority_name(unsigned priority)
{
    static const char *const names[ARCTIC_NUM_PRIORITIES] = {
        [ARCTIC_PRIORITY_LOW] = "low",
        [ARCTIC_PRIORITY_HIGH] = "high",
    };

    return priority < ARCTIC_NUM_PRIORITIES ? names[priority] : "unknown";
}

/* What the port table adds up for the lines below it. */
struct stats_totals {
    uint64_t drops_by_reason[ARCTIC_DROP_REASONS];
    uint64_t duplicated, corrupted, delayed;
};

/* One line per port and priority that carried anything. */
static void print_port_table(const ArcticSwitchStats *st, FILE *out,
                             struct stats_totals *t)
{
    unsigned i, prio, r;

    fprintf(out, "%4s %4s %12s %14s %12s %14s %10s %10s %10s\n", "port",
            "prio", "rx_packets", "rx_bytes", "tx_packets", "tx_bytes",
            "tx_stalls", "net_stalls", "drops");
    for (i = 0; i < st->ports; i++) {
        const struct arctic_port_stats *p = &st->port[i];

        if (port_is_quiet(p)) {
            continue;
        }
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            const struct arctic_port_prio_stats *q = &p->prio[prio];

            fprintf(out, "%4u %4s %12" G_GUINT64_FORMAT " %14"
                    G_GUINT64_FORMAT " %12" G_GUINT64_FORMAT " %14"
                    G_GUINT64_FORMAT " %10" G_GUINT64_FORMAT " %10"
                    G_GUINT64_FORMAT " %10" G_GUINT64_FORMAT "\n",
                    i, sw_priority_name(prio), q->rx_packets, q->rx_bytes,
                    q->tx_packets, q->tx_bytes, q->tx_credit_stalls,
                    q->network_stalls, total_drops(q));
            for (r = 0; r < ARCTIC_DROP_REASONS; r++) {
                t->drops_by_reason[r] += q->drops[r];
            }
            t->duplicated += q->duplicated;
            t->corrupted += q->corrupted;
            t->delayed += q->delayed;
        }
    }
}

/* Drops by reason, what fault injection did, and latency by priority. */
static void print_drops_and_latency(const ArcticSwitchStats *st, FILE *out,
                                    const struct stats_totals *t)
{
    bool any_drop = false;
    unsigned r, prio, b;

    fprintf(out, "drops:");
    for (r = 0; r < ARCTIC_DROP_REASONS; r++) {
        if (t->drops_by_reason[r]) {
            fprintf(out, " %s=%" G_GUINT64_FORMAT,
                    arctic_drop_reason_name(r), t->drops_by_reason[r]);
            any_drop = true;
        }
    }
    fprintf(out, "%s\n", any_drop ? "" : " none");
    if (t->duplicated || t->corrupted || t->delayed) {
        /* What fault injection did besides dropping (--fault). */
        fprintf(out, "faults: duplicated=%" G_GUINT64_FORMAT " corrupted=%"
                G_GUINT64_FORMAT " delayed=%" G_GUINT64_FORMAT "\n",
                t->duplicated, t->corrupted, t->delayed);
    }
    for (prio = ARCTIC_NUM_PRIORITIES; prio-- > 0;) {
        fprintf(out, "latency %s:", sw_priority_name(prio));
        for (b = 0; b < ARCTIC_LATENCY_BUCKETS; b++) {
            if (st->latency[prio][b]) {
                fprintf(out, " <%uus=%" G_GUINT64_FORMAT, 1u << b,
                        st->latency[prio][b]);
            }
        }
        fputc('\n', out);
    }
}

/* The switch's own resources: router packets, wake-ups, refusals. */
static void print_resources(const ArcticSwitchStats *st, FILE *out)
{
    unsigned c;

    fprintf(out, "router stalls %" G_GUINT64_FORMAT ", packets in use %"
            G_GUINT64_FORMAT " (max %" G_GUINT64_FORMAT ", bound %"
            G_GUINT64_FORMAT ")\n", st->router_stalls, st->packets_in_use,
            st->packets_in_use_max, st->packet_bound);
    if (st->cpu_wakers) {
        fprintf(out, "per-CPU wake-ups");
        for (c = 0; c < st->cpu_wakers; c++) {
            fprintf(out, " cpu%u=%" G_GUINT64_FORMAT, c, st->cpu_wakeups[c]);
        }
        fprintf(out, ", handed over %" G_GUINT64_FORMAT "\n",
                st->cpu_handovers);
    }
    if (st->auth_failures) {
        fprintf(out, "joins refused for a wrong secret %" G_GUINT64_FORMAT
                "\n", st->auth_failures);
    }
}

/* Timed mode's account: the clock, and how far each port got. */
static void print_timed(const ArcticSwitchStats *st, FILE *out)
{
    unsigned i;

    fprintf(out, "timed: clock %s, lookahead %" G_GUINT64_FORMAT " ns; %"
            G_GUINT64_FORMAT " syncs, %" G_GUINT64_FORMAT " grants, %"
            G_GUINT64_FORMAT " packets routed, %" G_GUINT64_FORMAT
            " deliveries\n", st->time_started ? "started" : "not started",
            st->time_lookahead_ns, st->time_syncs, st->time_grants,
            st->time_packets, st->time_deliveries);
    for (i = 0; i < st->ports; i++) {
        const struct arctic_port_stats *p = &st->port[i];

        fprintf(out, "timed: port %u reached %" G_GUINT64_FORMAT
                " ns in %" G_GUINT64_FORMAT " syncs%s\n", i,
                p->time_reached, p->time_syncs,
                p->time_waiting ? ", waits for a grant" : "");
    }
}

/* Per port, what only some ports have: direct rings, kick floods. */
static void print_port_notes(const ArcticSwitchStats *st, FILE *out)
{
    unsigned i;

    for (i = 0; i < st->ports; i++) {
        const struct arctic_port_stats *p = &st->port[i];
        uint64_t sent = p->prio[ARCTIC_PRIORITY_LOW].direct_packets +
                        p->prio[ARCTIC_PRIORITY_HIGH].direct_packets;
        uint64_t taken = p->prio[ARCTIC_PRIORITY_LOW].direct_in_packets +
                         p->prio[ARCTIC_PRIORITY_HIGH].direct_in_packets;

        if (sent || taken) {
            /* Counted in the table too: the share no router saw. */
            fprintf(out, "port %u: direct rings: sent %" G_GUINT64_FORMAT
                    ", received %" G_GUINT64_FORMAT "\n", i, sent, taken);
        }
    }
    if (st->refused_no_fd) {
        fprintf(out, "connections refused out of descriptors %"
                G_GUINT64_FORMAT "\n", st->refused_no_fd);
    }
    for (i = 0; i < st->ports; i++) {
        if (st->port[i].kick_floods) {
            /* An NIU that kicked far more than asked (port.c). */
            fprintf(out, "port %u: kick floods %" G_GUINT64_FORMAT "\n", i,
                    st->port[i].kick_floods);
        }
    }
}

void arctic_switch_stats_print(const ArcticSwitchStats *st, FILE *out)
{
    struct stats_totals totals = { { 0 } };
    unsigned prio;

    fprintf(out, "arctic-switch: %u ports, %u levels, %u routers, up %.3f s\n",
            st->ports, st->levels, st->routers, st->uptime_ns / 1e9);
    print_port_table(st, out, &totals);
    print_drops_and_latency(st, out, &totals);
    print_resources(st, out);
    if (st->timed) {
        print_timed(st, out);
    }
    print_port_notes(st, out);
    for (prio = ARCTIC_NUM_PRIORITIES; prio-- > 0;) {
        const struct arctic_oldest_packet *o = &st->oldest[prio];

        if (o->present) {
            fprintf(out, "oldest %s packet: %u -> %u, %.3f ms, at %s; "
                    "waits for %s\n", sw_priority_name(prio), o->src, o->dst,
                    o->age_ns / 1e6, o->where, o->waits_for);
        }
    }
}

