/* SPDX-License-Identifier: MIT */
/*
 * Routing tests of arctic-switch: every (source, destination) pair at both
 * priorities delivered to the right port, intact and in order, in 16-, 64-
 * and 256-port trees (and with random up-routes, where order is not
 * promised but delivery is); the route-bit arithmetic against
 * arctic_route_entry().  The wire check the switch runs on every packet
 * is the contract's (tests/unit/contract-test.c).
 */
#include <string.h>

#include "harness.h"
#include "switch-internal.h"

struct all_pairs {
    unsigned ports;
    unsigned rounds;            /* packets per (src, dst, priority) */
    bool random_up;
    unsigned *next_index;       /* [src] packets generated so far */
    uint32_t *expect_seq;       /* [dst][src][prio] next seq expected */
    uint64_t *count;            /* [dst][src][prio] packets received */
    uint64_t bad, misrouted, out_of_order;
};

static size_t pair_index(const struct all_pairs *ap, unsigned dst,
                         unsigned src, unsigned prio)
{
    return ((size_t)dst * ap->ports + src) * ARCTIC_NUM_PRIORITIES + prio;
}

/* Client @src's k-th packet: destinations rotate fastest, then priority,
 * then the round, so every link of the tree is busy at once. */
static bool all_pairs_next(void *opaque, unsigned src, uint8_t *buf,
                           size_t *size)
{
    struct all_pairs *ap = opaque;
    unsigned k = ap->next_index[src];
    unsigned per_round = ap->ports * ARCTIC_NUM_PRIORITIES;
    unsigned dst, prio, round;

    if (k >= per_round * ap->rounds) {
        return false;
    }
    ap->next_index[src]++;
    dst = (src + k) % ap->ports;
    prio = (k / ap->ports) % ARCTIC_NUM_PRIORITIES;
    round = k / per_round;
    /* Vary the size too: 0..20 payload words. */
    *size = test_build_packet(buf, src, dst, prio, ap->random_up, round,
                              (src + dst + round) % 21);
    return true;
}

static void all_pairs_received(void *opaque, unsigned client,
                               const uint8_t *pkt, size_t size)
{
    struct all_pairs *ap = opaque;
    unsigned src, dst;
    uint32_t seq;
    bool high;
    size_t idx;

    if (!test_packet_valid(pkt, size, &src, &dst, &seq, &high) ||
        src >= ap->ports) {
        ap->bad++;
        return;
    }
    if (dst != client) {
        ap->misrouted++;
        return;
    }
    idx = pair_index(ap, dst, src, high);
    if (!ap->random_up && seq != ap->expect_seq[idx]) {
        ap->out_of_order++;
    }
    ap->expect_seq[idx] = seq + 1;
    ap->count[idx]++;
}

static void run_all_pairs(unsigned ports, unsigned rounds, bool random_up)
{
    ArcticSwitchConfig config;
    TestSwitch *ts;
    TestClient **clients = g_new0(TestClient *, ports);
    struct all_pairs ap = {
        .ports = ports,
        .rounds = rounds,
        .random_up = random_up,
    };
    TestTraffic t = {
        .clients = clients,
        .num_clients = ports,
        .next_packet = all_pairs_next,
        .received = all_pairs_received,
        .opaque = &ap,
        .idle_timeout_ms = 5000,
    };
    size_t pairs = (size_t)ports * ports * ARCTIC_NUM_PRIORITIES, i;
    ArcticSwitchStats *st;
    uint64_t tx = 0, rx = 0;
    unsigned p;

    arctic_switch_config_init(&config);
    config.ports = ports;
    ts = test_switch_start(&config);
    for (p = 0; p < ports; p++) {
        clients[p] = test_client_connect(ts->socket_path, p, 8, 8);
        g_assert_cmpuint(clients[p]->num_nodes, ==, ports);
        g_assert_cmpuint(clients[p]->levels, ==, arctic_tree_levels(ports));
    }
    ap.next_index = g_new0(unsigned, ports);
    ap.expect_seq = g_new0(uint32_t, pairs);
    ap.count = g_new0(uint64_t, pairs);
    t.expected = pairs * rounds;

    g_assert_cmpuint(test_traffic_run(&t), ==, pairs * rounds);
    g_assert_cmpuint(ap.bad, ==, 0);
    g_assert_cmpuint(ap.misrouted, ==, 0);
    g_assert_cmpuint(ap.out_of_order, ==, 0);
    for (i = 0; i < pairs; i++) {
        g_assert_cmpuint(ap.count[i], ==, rounds);
    }

    st = test_switch_stats(ts);
    for (p = 0; p < ports; p++) {
        unsigned prio, r;

        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            const struct arctic_port_prio_stats *q = &st->port[p].prio[prio];

            g_assert_cmpuint(q->rx_packets, ==, (uint64_t)ports * rounds);
            g_assert_cmpuint(q->tx_packets, ==, (uint64_t)ports * rounds);
            for (r = 0; r < ARCTIC_DROP_REASONS; r++) {
                g_assert_cmpuint(q->drops[r], ==, 0);
            }
            tx += q->tx_bytes;
            rx += q->rx_bytes;
        }
    }
    g_assert_cmpuint(tx, ==, rx);
    g_assert_cmpuint(st->packets_in_use_max, <=, st->packet_bound);
    arctic_switch_stats_free(st);

    for (p = 0; p < ports; p++) {
        test_client_free(clients[p]);
    }
    test_switch_stop(ts);
    g_free(clients);
    g_free(ap.next_index);
    g_free(ap.expect_seq);
    g_free(ap.count);
}

static void test_all_pairs_16(void)
{
    run_all_pairs(16, 4, false);
}

static void test_all_pairs_64(void)
{
    run_all_pairs(64, 2, false);
}

static void test_all_pairs_256(void)
{
    run_all_pairs(256, 1, false);
}

static void test_all_pairs_random_up(void)
{
    run_all_pairs(64, 2, true);
}

/* Odd port counts leave holes in the tree; every real pair still works. */
static void test_all_pairs_13(void)
{
    run_all_pairs(13, 3, false);
}

/* The destination the switch computes from route bits is the one
 * arctic_route_entry() was asked for, for every pair and tree size. */
static void test_route_destination(void)
{
    unsigned sizes[] = { 1, 2, 3, 16, 64, 100, 256 }, s;

    /* The worked example of docs/network.md. */
    g_assert_cmphex(arctic_route_entry(5, 12, true, false), ==, 0x000ccc05);

    for (s = 0; s < G_N_ELEMENTS(sizes); s++) {
        ArcticSwitchConfig config;
        ArcticSwitch *sw;
        unsigned src, dst;

        arctic_switch_config_init(&config);
        config.ports = sizes[s];
        sw = arctic_switch_new(&config, NULL);
        g_assert_nonnull(sw);
        for (src = 0; src < sizes[s]; src++) {
            for (dst = 0; dst < sizes[s]; dst++) {
                uint32_t route = arctic_route_entry(src, dst, dst & 1,
                                                    src & 1);
                uint32_t w0 = route & 0xffff;
                uint32_t w1 = ARCTIC_FIELD_PREP(ARCTIC_W1, DOWNROUTE,
                    ARCTIC_FIELD_GET(ROUTE_ENTRY, DOWNROUTE, route));
                unsigned got = ~0u;

                g_assert_true(sw_route_destination(sw, src, w0, w1, &got));
                g_assert_cmpuint(got, ==, dst);
            }
        }
        /* Climbing above the top, or landing beyond the last port. */
        {
            unsigned got;
            uint32_t w0 = ARCTIC_FIELD_PREP(UPROUTE, HOPS, sw->levels);

            g_assert_false(sw_route_destination(sw, 0, w0, 0, &got));
            if (sizes[s] < (1u << sw->levels)) {
                uint32_t up = ARCTIC_FIELD_PREP(UPROUTE, HOPS, sw->levels - 1);
                uint32_t w1 = ARCTIC_FIELD_PREP(ARCTIC_W1, DOWNROUTE,
                                                (1u << sw->levels) - 1);

                g_assert_false(sw_route_destination(sw, 0, up, w1, &got));
            }
        }
        arctic_switch_free(sw);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/switch/route/destination", test_route_destination);
    g_test_add_func("/switch/route/all-pairs-13", test_all_pairs_13);
    g_test_add_func("/switch/route/all-pairs-16", test_all_pairs_16);
    g_test_add_func("/switch/route/all-pairs-64", test_all_pairs_64);
    g_test_add_func("/switch/route/all-pairs-256", test_all_pairs_256);
    g_test_add_func("/switch/route/all-pairs-random-up",
                    test_all_pairs_random_up);
    return g_test_run();
}
