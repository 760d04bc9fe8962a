/* SPDX-License-Identifier: MIT */
/*
 * Flow-control tests of arctic-switch: high priority keeps flowing through
 * a tree whose low-priority buffers are full; a receiver that withholds
 * credits, or stops reading its socket, back-pressures its senders with no
 * loss and with the switch's packet memory within its computed bound.
 */
#include <string.h>
#include <unistd.h>

#include "harness.h"

enum { RECEIVER = 0 };

/* Send up to @max packets without waiting for credit; returns how many.
 * @seq counts the packets already sent from this client to @dst. */
static unsigned send_burst(TestClient *c, unsigned dst, bool high,
                           unsigned max, uint32_t *seq)
{
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    unsigned sent = 0;

    test_client_poll(c, 0);
    while (sent < max && c->send_credits[high] > 0) {
        size_t size = test_build_packet(pkt, c->node, dst, high, false,
                                        (*seq)++, 8);

        g_assert_true(test_client_send_packet(c, pkt, size, 0));
        sent++;
        test_client_poll(c, 0);
    }
    return sent;
}

/* Flood low priority until nothing moves any more. */
static unsigned flood_until_stalled(TestClient **senders, unsigned n,
                                    unsigned quota, unsigned *sent_by,
                                    uint32_t *seq)
{
    unsigned total = 0, quiet_rounds = 0, i;

    while (quiet_rounds < 20) {
        unsigned round = 0;

        for (i = 0; i < n; i++) {
            unsigned k = send_burst(senders[i], RECEIVER, false,
                                    quota - sent_by[i], &seq[i]);

            sent_by[i] += k;
            round += k;
        }
        total += round;
        quiet_rounds = round ? 0 : quiet_rounds + 1;
        g_usleep(10000);
    }
    return total;
}

/* Receive one packet, checking it is intact and for us. */
static bool receive_one(TestClient *rx, int timeout_ms, unsigned *src,
                        bool *high, uint32_t *seq)
{
    g_autoptr(GBytes) b = test_client_recv_packet(rx, timeout_ms);
    unsigned dst;
    gsize size;
    const uint8_t *pkt;

    if (!b) {
        return false;
    }
    pkt = g_bytes_get_data(b, &size);
    g_assert_true(test_packet_valid(pkt, size, src, &dst, seq, high));
    g_assert_cmpuint(dst, ==, rx->node);
    return true;
}

static void test_high_passes_congested_low(void)
{
    enum { PORTS = 16, SENDERS = PORTS - 1, QUOTA = 300, HIGH_COUNT = 200 };
    ArcticSwitchConfig config;
    TestSwitch *ts;
    TestClient *rx, *senders[SENDERS];
    unsigned sent_by[SENDERS] = { 0 }, i, low_received = 0, high_received = 0;
    uint32_t seq[SENDERS] = { 0 }, high_seq[PORTS] = { 0 };
    uint32_t next_low[PORTS] = { 0 }, next_high[PORTS] = { 0 };
    unsigned total_low, high_sent = 0;
    ArcticSwitchStats *st;
    gint64 deadline;

    arctic_switch_config_init(&config);
    config.ports = PORTS;
    ts = test_switch_start(&config);
    /* The receiver grants 2 low credits and never returns them. */
    rx = test_client_connect(ts->socket_path, RECEIVER, 2, 8);
    for (i = 0; i < SENDERS; i++) {
        senders[i] = test_client_connect(ts->socket_path, i + 1, 8, 8);
    }

    total_low = flood_until_stalled(senders, SENDERS, QUOTA, sent_by, seq);
    /* Back-pressure: far fewer than the quota got in. */
    g_assert_cmpuint(total_low, <, SENDERS * QUOTA / 2);
    st = test_switch_stats(ts);
    g_assert_cmpuint(st->packets_in_use, <=, st->packet_bound);
    g_assert_cmpuint(st->port[RECEIVER].prio[0].tx_packets, ==, 2);
    g_assert_cmpuint(st->port[RECEIVER].prio[0].tx_credit_stalls, >, 0);
    g_assert_cmpuint(st->router_stalls, >, 0);
    /* Everything sent is either delivered (2) or held in the tree. */
    g_assert_cmpuint(st->packets_in_use, ==, total_low - 2);
    /* The oldest packet waits on a chain of full buffers that ends at the
     * receiver's missing credit. */
    g_test_message("oldest low packet at %s; waits for %s",
                   st->oldest[ARCTIC_PRIORITY_LOW].where,
                   st->oldest[ARCTIC_PRIORITY_LOW].waits_for);
    g_assert_false(st->oldest[ARCTIC_PRIORITY_HIGH].present);
    g_assert_true(st->oldest[ARCTIC_PRIORITY_LOW].present);
    g_assert_cmpuint(st->oldest[ARCTIC_PRIORITY_LOW].dst, ==, RECEIVER);
    g_assert_cmpuint(st->oldest[ARCTIC_PRIORITY_LOW].age_ns, >, 0);
    g_assert_true(g_str_has_prefix(st->oldest[ARCTIC_PRIORITY_LOW].where,
                                   "router "));
    /* The receiver never returned a credit and has not read the two
     * packets it was sent. */
    g_assert_true(g_regex_match_simple(
        "port 0: 0 credit\\(s\\), last credit never, last frame [0-9.]+ ms "
        "ago, [1-9][0-9]* byte\\(s\\) unread, socket has room, delay line 0$",
        st->oldest[ARCTIC_PRIORITY_LOW].waits_for, 0, 0));
    arctic_switch_stats_free(st);

    /* High priority from the far side of the tree (port 9 climbs to the
     * top) and from port 3, whose own low credits are all spent. */
    deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
    while (high_received < HIGH_COUNT &&
           g_get_monotonic_time() < deadline) {
        unsigned src;
        bool high;
        uint32_t s;

        if (high_sent < HIGH_COUNT) {
            TestClient *from = senders[(high_sent & 1) ? 8 : 2];

            high_sent += send_burst(from, RECEIVER, true, 1,
                                    &high_seq[from->node]);
        }
        while (receive_one(rx, high_sent < HIGH_COUNT ? 0 : 50, &src,
                           &high, &s)) {
            if (high) {
                g_assert_cmpuint(s, ==, next_high[src]);
                next_high[src]++;
                high_received++;
                test_client_return_credits(rx, 0, 1);
            } else {
                g_assert_cmpuint(s, ==, next_low[src]);
                next_low[src]++;
                low_received++;
            }
        }
    }
    g_assert_cmpuint(high_received, ==, HIGH_COUNT);
    g_assert_cmpuint(low_received, ==, 2);

    /* Release the low credits: everything flows, nothing was lost. */
    test_client_return_credits(rx, 2, 0);
    deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
    while (low_received < SENDERS * QUOTA &&
           g_get_monotonic_time() < deadline) {
        unsigned src;
        bool high;
        uint32_t s;

        for (i = 0; i < SENDERS; i++) {
            sent_by[i] += send_burst(senders[i], RECEIVER, false,
                                     QUOTA - sent_by[i], &seq[i]);
        }
        while (receive_one(rx, 5, &src, &high, &s)) {
            g_assert_false(high);
            g_assert_cmpuint(s, ==, next_low[src]);
            next_low[src]++;
            low_received++;
            test_client_return_credits(rx, 1, 0);
        }
    }
    g_assert_cmpuint(low_received, ==, SENDERS * QUOTA);
    for (i = 0; i < SENDERS; i++) {
        g_assert_cmpuint(next_low[i + 1], ==, QUOTA);
    }
    st = test_switch_stats(ts);
    for (i = 0; i < PORTS; i++) {
        unsigned r;

        for (r = 0; r < ARCTIC_DROP_REASONS; r++) {
            g_assert_cmpuint(st->port[i].prio[0].drops[r], ==, 0);
            g_assert_cmpuint(st->port[i].prio[1].drops[r], ==, 0);
        }
    }
    g_assert_cmpuint(st->packets_in_use, ==, 0);
    g_assert_cmpuint(st->packets_in_use_max, <=, st->packet_bound);
    g_assert_false(st->oldest[ARCTIC_PRIORITY_LOW].present);
    arctic_switch_stats_free(st);

    test_client_free(rx);
    for (i = 0; i < SENDERS; i++) {
        test_client_free(senders[i]);
    }
    test_switch_stop(ts);
}

/* A receiver that grants the most credit it may but stops reading its socket:
 * the switch's output buffer and the socket fill, then the sender stops
 * getting credits.  Nothing is dropped once the receiver reads again. */
static void test_stalled_socket_backpressure(void)
{
    enum { ATTEMPTS = 40000 };
    ArcticSwitchConfig config;
    TestSwitch *ts;
    TestClient *rx, *tx;
    unsigned sent = 0, received = 0, quiet = 0;
    uint32_t seq = 0, expect = 0;
    ArcticSwitchStats *st;
    gint64 deadline;

    arctic_switch_config_init(&config);
    config.ports = 4;
    ts = test_switch_start(&config);
    rx = test_client_connect(ts->socket_path, 3, ARCTIC_LINK_MAX_CREDITS, 8);
    tx = test_client_connect(ts->socket_path, 0, 8, 8);
    while (sent < ATTEMPTS && quiet < 30) {
        unsigned k = send_burst(tx, 3, false, ATTEMPTS - sent, &seq);

        sent += k;
        quiet = k ? 0 : quiet + 1;
        if (!k) {
            g_usleep(10000);
        }
    }
    g_assert_cmpuint(sent, <, ATTEMPTS);
    st = test_switch_stats(ts);
    g_assert_cmpuint(st->packets_in_use, <=, st->packet_bound);
    g_assert_cmpuint(st->port[3].prio[0].tx_credit_stalls, >, 0);
    arctic_switch_stats_free(st);

    deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
    while (received < ATTEMPTS && g_get_monotonic_time() < deadline) {
        unsigned src;
        bool high;
        uint32_t s;

        bool got = false;

        if (sent < ATTEMPTS) {
            sent += send_burst(tx, 3, false, ATTEMPTS - sent, &seq);
        }
        while (receive_one(rx, 0, &src, &high, &s)) {
            g_assert_cmpuint(s, ==, expect);
            expect++;
            received++;
            got = true;
            /* Reading again, it hands buffers back as an NIU does (its
             * window is finite: ARCTIC_LINK_MAX_CREDITS). */
            test_client_return_credits(rx, 1, 0);
        }
        if (!got) {
            test_client_poll(rx, 1);
        }
    }
    g_assert_cmpuint(received, ==, ATTEMPTS);
    st = test_switch_stats(ts);
    g_assert_cmpuint(st->port[0].prio[0].rx_packets, ==, ATTEMPTS);
    g_assert_cmpuint(st->port[3].prio[0].tx_packets, ==, ATTEMPTS);
    g_assert_cmpuint(st->port[0].prio[0].drops[ARCTIC_DROP_PORT_DOWN], ==, 0);
    g_assert_cmpuint(st->packets_in_use_max, <=, st->packet_bound);
    arctic_switch_stats_free(st);
    test_client_free(rx);
    test_client_free(tx);
    test_switch_stop(ts);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/switch/flow/high-passes-congested-low",
                    test_high_passes_congested_low);
    g_test_add_func("/switch/flow/stalled-socket-backpressure",
                    test_stalled_socket_backpressure);
    return g_test_run();
}
