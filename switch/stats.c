/* SPDX-License-Identifier: MIT */
/*
 * Counters the way network simulators report them (SST Merlin, BookSim):
 * per port and priority packets, bytes, credit stalls, drops by reason and
 * queue depths, plus a per-priority latency histogram (switch entry to
 * delivery, log2 microsecond buckets).  A snapshot copies everything out
 * of the loop thread; the same snapshot is rendered as the control
 * socket's JSON and as the table arctic-switch prints on exit.
 */
#include <json-glib/json-glib.h>
#include <string.h>

#include "switch-internal.h"

/* One named member of the object being built. */
void sw_json_int(JsonBuilder *b, const char *name, gint64 value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, value);
}

void sw_json_double(JsonBuilder *b, const char *name, double value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_double_value(b, value);
}

void sw_json_string(JsonBuilder *b, const char *name, const char *value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_string_value(b, value);
}

void sw_json_bool(JsonBuilder *b, const char *name, bool value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_boolean_value(b, value);
}

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
    };

    return reason < ARCTIC_DROP_REASONS ? names[reason] : "unknown";
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

static void snapshot_in_loop(ArcticSwitch *sw, void *opaque)
{
    ArcticSwitchStats *st = opaque;
    size_t r, n = (size_t)sw->levels * sw->routers_per_level;
    unsigned i, prio;

    /* What can move, moves first: a request read in the same batch as the
     * credit that frees a packet must not show that packet as stuck. */
    sw_schedule(sw);
    st->ports = sw->ports;
    st->levels = sw->levels;
    st->routers = n;
    st->uptime_ns = sw_clock_ns() - sw->start_ns;
    st->port = g_new0(struct arctic_port_stats, sw->ports);
    for (i = 0; i < sw->ports; i++) {
        struct sw_port *port = &sw->port[i];
        struct sw_input *in = &port->leaf->in[port->leaf_input];

        st->port[i] = port->stats;
        st->port[i].connected = port->conn &&
                                port->conn->state == SW_CONN_LIVE;
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            st->port[i].prio[prio].ingress_depth = in->queue[prio].count;
            st->port[i].prio[prio].egress_depth =
                sw_port_egress_depth(sw, i, prio);
        }
    }
    memcpy(st->unattached_disconnects, sw->unattached_disconnects,
           sizeof(st->unattached_disconnects));
    memcpy(st->latency, sw->latency, sizeof(st->latency));
    for (r = 0; r < n; r++) {
        st->router_stalls += sw->routers[r].stalls;
    }
    st->packets_in_use = sw->packets_in_use;
    st->packets_in_use_max = sw->packets_in_use_max;
    st->packet_bound = sw->packet_bound;
    sw_find_oldest(sw, sw_clock_ns(), st->oldest);
}

ArcticSwitchStats *arctic_switch_stats_snapshot(ArcticSwitch *sw)
{
    ArcticSwitchStats *st = g_new0(ArcticSwitchStats, 1);

    arctic_switch_invoke(sw, snapshot_in_loop, st);
    return st;
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

static const char *const priority_names[ARCTIC_NUM_PRIORITIES] = {
    [ARCTIC_PRIORITY_LOW] = "low",
    [ARCTIC_PRIORITY_HIGH] = "high",
};

void arctic_switch_stats_print(const ArcticSwitchStats *st, FILE *out)
{
    uint64_t drops_by_reason[ARCTIC_DROP_REASONS] = { 0 };
    uint64_t duplicated = 0, corrupted = 0, delayed = 0;
    unsigned i, prio, r, b;
    bool any_drop = false;

    fprintf(out, "arctic-switch: %u ports, %u levels, %u routers, up %.3f s\n",
            st->ports, st->levels, st->routers, st->uptime_ns / 1e9);
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
                    i, priority_names[prio], q->rx_packets, q->rx_bytes,
                    q->tx_packets, q->tx_bytes, q->tx_credit_stalls,
                    q->network_stalls, total_drops(q));
            for (r = 0; r < ARCTIC_DROP_REASONS; r++) {
                drops_by_reason[r] += q->drops[r];
            }
            duplicated += q->duplicated;
            corrupted += q->corrupted;
            delayed += q->delayed;
        }
    }
    fprintf(out, "drops:");
    for (r = 0; r < ARCTIC_DROP_REASONS; r++) {
        if (drops_by_reason[r]) {
            fprintf(out, " %s=%" G_GUINT64_FORMAT,
                    arctic_drop_reason_name(r), drops_by_reason[r]);
            any_drop = true;
        }
    }
    fprintf(out, "%s\n", any_drop ? "" : " none");
    if (duplicated || corrupted || delayed) {
        /* What fault injection did besides dropping (--fault). */
        fprintf(out, "faults: duplicated=%" G_GUINT64_FORMAT " corrupted=%"
                G_GUINT64_FORMAT " delayed=%" G_GUINT64_FORMAT "\n",
                duplicated, corrupted, delayed);
    }
    for (prio = ARCTIC_NUM_PRIORITIES; prio-- > 0;) {
        fprintf(out, "latency %s:", priority_names[prio]);
        for (b = 0; b < ARCTIC_LATENCY_BUCKETS; b++) {
            if (st->latency[prio][b]) {
                fprintf(out, " <%uus=%" G_GUINT64_FORMAT, 1u << b,
                        st->latency[prio][b]);
            }
        }
        fputc('\n', out);
    }
    fprintf(out, "router stalls %" G_GUINT64_FORMAT ", packets in use %"
            G_GUINT64_FORMAT " (max %" G_GUINT64_FORMAT ", bound %"
            G_GUINT64_FORMAT ")\n", st->router_stalls, st->packets_in_use,
            st->packets_in_use_max, st->packet_bound);
    for (prio = ARCTIC_NUM_PRIORITIES; prio-- > 0;) {
        const struct arctic_oldest_packet *o = &st->oldest[prio];

        if (o->present) {
            fprintf(out, "oldest %s packet: %u -> %u, %.3f ms, at %s; "
                    "waits for %s\n", priority_names[prio], o->src, o->dst,
                    o->age_ns / 1e6, o->where, o->waits_for);
        }
    }
}

static void json_prio(JsonBuilder *b, const struct arctic_port_prio_stats *q)
{
    unsigned r;

    json_builder_begin_object(b);
#define MEMBER(name) sw_json_int(b, #name, (gint64)q->name)
    MEMBER(rx_packets);
    MEMBER(rx_bytes);
    MEMBER(tx_packets);
    MEMBER(tx_bytes);
    MEMBER(tx_credit_stalls);
    MEMBER(rx_credit_exhausted);
    MEMBER(network_stalls);
    MEMBER(duplicated);
    MEMBER(corrupted);
    MEMBER(delayed);
    MEMBER(ingress_depth);
    MEMBER(ingress_depth_max);
    MEMBER(egress_depth);
#undef MEMBER
    json_builder_set_member_name(b, "drops");
    json_builder_begin_object(b);
    for (r = 0; r < ARCTIC_DROP_REASONS; r++) {
        sw_json_int(b, arctic_drop_reason_name(r), (gint64)q->drops[r]);
    }
    json_builder_end_object(b);
    json_builder_end_object(b);
}

static void json_disconnects(JsonBuilder *b, const uint64_t *counts)
{
    unsigned r;

    json_builder_begin_object(b);
    for (r = 0; r < ARCTIC_DISCONNECT_REASONS; r++) {
        sw_json_int(b, arctic_disconnect_reason_name(r), (gint64)counts[r]);
    }
    json_builder_end_object(b);
}

/* Fill the "stats" object of a control reply into @b. */
void sw_stats_build_json(JsonBuilder *b, const ArcticSwitchStats *st)
{
    unsigned i, prio, bucket;

    json_builder_begin_object(b);
    sw_json_int(b, "ports", st->ports);
    sw_json_int(b, "levels", st->levels);
    sw_json_int(b, "routers", st->routers);
    sw_json_int(b, "uptime_ns", (gint64)st->uptime_ns);
    sw_json_int(b, "router_stalls", (gint64)st->router_stalls);
    sw_json_int(b, "packets_in_use", (gint64)st->packets_in_use);
    sw_json_int(b, "packets_in_use_max", (gint64)st->packets_in_use_max);
    sw_json_int(b, "packet_bound", (gint64)st->packet_bound);
    json_builder_set_member_name(b, "unattached_disconnects");
    json_disconnects(b, st->unattached_disconnects);
    json_builder_set_member_name(b, "latency_us_log2");
    json_builder_begin_object(b);
    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        json_builder_set_member_name(b, priority_names[prio]);
        json_builder_begin_array(b);
        for (bucket = 0; bucket < ARCTIC_LATENCY_BUCKETS; bucket++) {
            json_builder_add_int_value(b, (gint64)st->latency[prio][bucket]);
        }
        json_builder_end_array(b);
    }
    json_builder_end_object(b);
    json_builder_set_member_name(b, "oldest");
    json_builder_begin_object(b);
    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        const struct arctic_oldest_packet *o = &st->oldest[prio];

        json_builder_set_member_name(b, priority_names[prio]);
        if (!o->present) {
            json_builder_add_null_value(b);
            continue;
        }
        json_builder_begin_object(b);
        sw_json_int(b, "age_us", (gint64)(o->age_ns / 1000));
        sw_json_int(b, "src", o->src);
        sw_json_int(b, "dst", o->dst);
        sw_json_string(b, "where", o->where);
        sw_json_string(b, "waits_for", o->waits_for);
        json_builder_end_object(b);
    }
    json_builder_end_object(b);
    json_builder_set_member_name(b, "port");
    json_builder_begin_array(b);
    for (i = 0; i < st->ports; i++) {
        const struct arctic_port_stats *p = &st->port[i];

        json_builder_begin_object(b);
        sw_json_int(b, "port", i);
        sw_json_bool(b, "connected", p->connected);
        sw_json_int(b, "connects", (gint64)p->connects);
        json_builder_set_member_name(b, "disconnects");
        json_disconnects(b, p->disconnects);
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            json_builder_set_member_name(b, priority_names[prio]);
            json_prio(b, &p->prio[prio]);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
}

char *arctic_switch_stats_to_json(const ArcticSwitchStats *st)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;

    sw_stats_build_json(b, st);
    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    return json_generator_to_data(gen, NULL);
}
