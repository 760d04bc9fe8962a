/* SPDX-License-Identifier: MIT */
/*
 * arctic-switch --timed (docs/timed-mode.md): synthetic timed NIUs join,
 * start the cluster's clock, send stamped packets and report their
 * clocks; the switch must deliver each packet at the virtual time the
 * model of arctic/timing.h gives, grant no node past a packet it could
 * still receive, refuse what breaks the protocol, and give the same times
 * whatever order the host interleaves the NIUs' frames in.
 */
#include <string.h>

#include <glib/gstdio.h>

#include "arctic/route.h"
#include "arctic/timing.h"
#include "harness.h"

enum { WAIT_MS = 5000 };

/* The default costs of arctic/timing.h, on a clock that ticks per ns. */
static const struct arctic_time_ready default_costs = {
    .tx_ns = ARCTIC_TIME_TX_NS,
    .rx_ns = ARCTIC_TIME_RX_NS,
    .pci_ps_per_byte = ARCTIC_TIME_PCI_PS_PER_BYTE,
    .tick_ns = 1,
};

static TestSwitch *timed_switch(unsigned ports)
{
    ArcticSwitchConfig config;

    arctic_switch_config_init(&config);
    config.ports = ports;
    config.timed = true;
    return test_switch_start(&config);
}

/* @n timed clients, ready with @costs, and the clock started for all. */
static void timed_clients_costs(TestSwitch *ts, TestClient **c, unsigned n,
                                const struct arctic_time_ready *costs)
{
    unsigned i;

    test_hello_flags = R_ARCTIC_HELLO_FLAGS_TIMED_MASK;
    for (i = 0; i < n; i++) {
        g_assert_cmpuint(test_client_try_connect(ts->socket_path, i, 0, 0,
                                                 &c[i]), ==, 0);
        g_assert_true(c[i]->welcome_flags & R_ARCTIC_WELCOME_FLAGS_TIMED_MASK);
    }
    test_hello_flags = 0;
    for (i = 0; i < n; i++) {
        test_client_time_ready(c[i], costs);
    }
    for (i = 0; i < n; i++) {
        g_assert_true(test_client_wait_start(c[i], WAIT_MS));
    }
}

static void timed_clients(TestSwitch *ts, TestClient **c, unsigned n)
{
    timed_clients_costs(ts, c, n, &default_costs);
}

/*
 * Every node, waiting at @reached with a grant beyond it, runs to its
 * grant sending nothing; then each has its next grant.  The network model
 * runs as far as the clocks let it.
 */
static void timed_round(TestClient **c, uint64_t *reached, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        g_assert_cmpuint(c[i]->granted, >, reached[i]);
        test_client_time_sync(c[i], c[i]->granted, c[i]->granted);
        reached[i] = c[i]->granted;
    }
    for (i = 0; i < n; i++) {
        g_assert_true(test_client_wait_grant(c[i], reached[i], WAIT_MS));
    }
}

/* The next packet for @c, the clocks of all @n going on until it comes. */
static TestTimedPacket *timed_recv(TestClient **c, uint64_t *reached,
                                   unsigned n, unsigned to)
{
    unsigned rounds;

    for (rounds = 0; rounds < 100; rounds++) {
        TestTimedPacket *p = test_client_recv_timed(c[to], 0);

        if (p) {
            return p;
        }
        timed_round(c, reached, n);
    }
    return NULL;
}

/* How often the link of @port_no ended for @reason. */
static uint64_t disconnects(TestSwitch *ts, unsigned port_no,
                            enum arctic_disconnect_reason reason)
{
    ArcticSwitchStats *st = test_switch_stats(ts);
    uint64_t n = st->port[port_no].disconnects[reason];

    arctic_switch_stats_free(st);
    return n;
}

static void timed_stop(TestSwitch *ts, TestClient **c, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        test_client_free(c[i]);
    }
    test_switch_stop(ts);
}

/* A timed NIU and a switch that is not, and the other way round. */
static void test_refuse(void)
{
    TestSwitch *ts = timed_switch(2);
    ArcticSwitchConfig config;
    TestClient *c = NULL;

    g_assert_cmpuint(test_client_try_connect(ts->socket_path, 0, 8, 8, &c),
                     ==, ARCTIC_REJECT_TIMING);
    test_switch_stop(ts);

    arctic_switch_config_init(&config);
    config.ports = 2;
    ts = test_switch_start(&config);
    test_hello_flags = R_ARCTIC_HELLO_FLAGS_TIMED_MASK;
    g_assert_cmpuint(test_client_try_connect(ts->socket_path, 0, 8, 8, &c),
                     ==, ARCTIC_REJECT_TIMING);
    test_hello_flags = 0;
    test_switch_stop(ts);
}

/*
 * The clock starts once every port is ready, at a grant of one lookahead:
 * 500 ns to transmit, two 50 ns cables, a 150 ns router, the 28 bytes of
 * the shortest packet at 160 MB/s (175 ns), 500 ns to receive.  Once it
 * runs, no NIU can join any more.
 */
static void test_start(void)
{
    TestSwitch *ts = timed_switch(2);
    TestClient *c[2], *late = NULL;
    ArcticSwitchStats *st;

    test_hello_flags = R_ARCTIC_HELLO_FLAGS_TIMED_MASK;
    g_assert_cmpuint(test_client_try_connect(ts->socket_path, 0, 0, 0, &c[0]),
                     ==, 0);
    g_assert_cmpuint(test_client_try_connect(ts->socket_path, 1, 0, 0, &c[1]),
                     ==, 0);
    test_client_time_ready(c[0], &default_costs);
    g_assert_false(test_client_wait_start(c[0], 300));
    test_client_time_ready(c[1], &default_costs);
    g_assert_true(test_client_wait_start(c[0], WAIT_MS));
    g_assert_true(test_client_wait_start(c[1], WAIT_MS));
    g_assert_cmpuint(c[0]->start.lookahead_ns, ==, 1425);
    g_assert_cmpuint(c[0]->start.return_ns, ==, 925);
    g_assert_cmpuint(c[0]->start.grant, ==, 1425);
    g_assert_cmpuint(c[1]->start.grant, ==, 1425);

    test_client_free(c[1]);
    g_assert_cmpuint(test_client_try_connect(ts->socket_path, 1, 0, 0, &late),
                     ==, ARCTIC_REJECT_TIMING);
    test_hello_flags = 0;
    st = test_switch_stats(ts);
    g_assert_true(st->timed);
    g_assert_true(st->time_started);
    g_assert_cmpuint(st->time_lookahead_ns, ==, 1425);
    arctic_switch_stats_free(st);
    test_client_free(c[0]);
    test_switch_stop(ts);
}

/*
 * One packet, alone in the network: it arrives at the time the model
 * gives, to the nanosecond.  A 0-word message is 36 bytes on the wire (225
 * ns at 160 MB/s) and 8 across PCI (100 ns at 80 MB/s): stamped at 1000,
 * its head reaches the router at 1050, leaves it at 1200, its tail is in
 * the NIU at 1200 + 50 + 225 = 1475, taken at 1475 + 500 + 100 = 2075.
 */
static void test_latency(void)
{
    TestSwitch *ts = timed_switch(2);
    TestClient *c[2];
    TestTimedPacket *p;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size = test_build_packet(pkt, 0, 1, true, false, 0, 0);
    unsigned src, dst;
    uint32_t seq;
    bool high;

    g_assert_cmpuint(size, ==, 36);
    timed_clients(ts, c, 2);
    test_client_send_timed(c[0], 1000, true, pkt, size);
    test_client_time_sync(c[0], 1425, 1425);
    /* Not routed while node 1 could still send something earlier. */
    g_assert_null(test_client_recv_timed(c[1], 200));
    test_client_time_sync(c[1], 1425, 1425);
    p = test_client_recv_timed(c[1], WAIT_MS);
    g_assert_nonnull(p);
    g_assert_cmpuint(p->at, ==, 2075);
    g_assert_true(p->prio);
    g_assert_true(test_packet_valid(p->bytes, p->size, &src, &dst, &seq,
                                    &high));
    g_assert_cmpuint(src, ==, 0);
    g_assert_cmpuint(dst, ==, 1);
    g_free(p);
    /* Each may now run one lookahead past the other's clock. */
    g_assert_true(test_client_wait_grant(c[0], 1425, WAIT_MS));
    g_assert_true(test_client_wait_grant(c[1], 1425, WAIT_MS));
    g_assert_cmpuint(c[0]->granted, ==, 1425 + 1425);
    g_assert_cmpuint(c[1]->granted, ==, 1425 + 1425);
    test_client_free(c[0]);
    test_client_free(c[1]);
    test_switch_stop(ts);
}

/*
 * Two senders into one receiver, same stamp: both cross their own cable
 * and the router at once, then share the link to the receiver (the second
 * waits 225 ns for it) and its receive engine (600 ns each), which sets
 * the pace: 2075, then 2675.  Ties go to the lower port.  The second is
 * handed over once no packet can reach the engine before it is free of
 * the first (timed_recv() runs the clocks on until it is).
 */
static void test_contention(void)
{
    TestSwitch *ts = timed_switch(4);
    TestClient *c[4];
    TestTimedPacket *p;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size;
    unsigned i, src, dst, router_hops;
    uint32_t seq;
    bool high;
    uint64_t first, reached[4] = { 1425, 1425, 1425, 1425 };

    timed_clients(ts, c, 4);
    /* Node 0 and node 1 share a leaf router; node 3 is two hops away. */
    size = test_build_packet(pkt, 0, 1, true, false, 0, 0);
    test_client_send_timed(c[0], 1000, true, pkt, size);
    size = test_build_packet(pkt, 3, 1, true, false, 0, 0);
    test_client_send_timed(c[3], 1000, true, pkt, size);
    for (i = 0; i < 4; i++) {
        test_client_time_sync(c[i], 1425, 1425);
    }
    p = test_client_recv_timed(c[1], WAIT_MS);
    g_assert_nonnull(p);
    g_assert_true(test_packet_valid(p->bytes, p->size, &src, &dst, &seq,
                                    &high));
    g_assert_cmpuint(src, ==, 0);
    g_assert_cmpuint(p->at, ==, 2075);
    first = p->at;
    g_free(p);
    for (i = 0; i < 4; i++) {
        g_assert_true(test_client_wait_grant(c[i], 1425, WAIT_MS));
    }
    p = timed_recv(c, reached, 4, 1);
    g_assert_nonnull(p);
    g_assert_true(test_packet_valid(p->bytes, p->size, &src, &dst, &seq,
                                    &high));
    g_assert_cmpuint(src, ==, 3);
    /*
     * From node 3: up two levels and down again, three routers, 450 ns:
     * its tail is in at 1000 + 50 + 450 + 50 + 225 = 1775, before the
     * engine is free of the first (2075), which it then takes 600 ns.
     */
    router_hops = 3;
    g_assert_cmpuint(1000 + 50 + 150 * router_hops + 50 + 225, <, first);
    g_assert_cmpuint(p->at, ==, first + 600);
    g_free(p);
    for (i = 0; i < 4; i++) {
        test_client_free(c[i]);
    }
    test_switch_stop(ts);
}

/*
 * A hot spot backs up into the tree (seed 000 §6.1.4: three buffers at
 * each input section, one kept for high priority; an output stops while
 * the input it feeds has none a packet may take).  Nodes 0 and 2 each
 * send four low-priority 0-word packets (36 bytes: 225 ns on a link, 600
 * ns in the receive engine) to node 1, stamped 1000, 1500, 2000, 2500;
 * node 1's engine takes one per 600 ns, so its input and the router
 * inputs before it fill.  Then node 0 sends one packet to node 3,
 * stamped 3000, unrelated but for node 0's cable and the leaf router's
 * input that cable feeds.  By hand (H: node 0's, G: node 2's; a low
 * packet needs two free buffers; "in0": leaf router 0's input from node
 * 0, counted at node 0's cable):
 *   H1 leaves 1000, through the leaf at 1200, node 1 takes it 1475-2075;
 *   G1 (three routers) at the leaf's output to node 1 at 1500, node 1's
 *   input has two free: it goes, taken 2075-2675; H2 ready there at 1700
 *   finds one free (low may not take it) and waits, holding in0; H3
 *   leaves node 0 at 2000 (in0 had two), waits behind H2.  At 2075 node
 *   1 frees H1's buffer: H2 goes (it waited longest), taken 2675-3275;
 *   H4 leaves node 0 at 2500 (H2's in0 buffer free at 2300).  At 2675 G2
 *   goes (ready at 2000), taken 3275-3875.  At 3000 in0 holds H3 and H4:
 *   one free, so the packet for node 3 waits in node 0; at 3275 H3 goes,
 *   its in0 buffer is free at 3500 (its tail out), and the packet for
 *   node 3 leaves then: 3500 + 50 + 3 * 150 + 50 + 225 + 600 = 4875,
 *   500 ns later than alone (4375).
 */
static void hot_spot_run(bool hot, uint64_t *to_node3, uint64_t *to_node1,
                         unsigned *n1)
{
    TestSwitch *ts = timed_switch(4);
    TestClient *c[4];
    TestTimedPacket *p;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    uint64_t reached[4] = { 0 };
    size_t size;
    unsigned i, k;

    timed_clients(ts, c, 4);
    for (k = 0; hot && k < 4; k++) {
        size = test_build_packet(pkt, 0, 1, false, false, k, 0);
        test_client_send_timed(c[0], 1000 + 500 * k, false, pkt, size);
        size = test_build_packet(pkt, 2, 1, false, false, 10 + k, 0);
        test_client_send_timed(c[2], 1000 + 500 * k, false, pkt, size);
    }
    size = test_build_packet(pkt, 0, 3, false, false, 99, 0);
    test_client_send_timed(c[0], 3000, false, pkt, size);
    for (i = 0; i < 4; i++) {
        test_client_time_sync(c[i], 0, 0);
        g_assert_true(test_client_wait_grant(c[i], 0, WAIT_MS));
    }
    p = timed_recv(c, reached, 4, 3);
    g_assert_nonnull(p);
    *to_node3 = p->at;
    g_free(p);
    *n1 = 0;
    while (hot && *n1 < 5) {
        p = timed_recv(c, reached, 4, 1);
        g_assert_nonnull(p);
        to_node1[(*n1)++] = p->at;
        g_free(p);
    }
    timed_stop(ts, c, 4);
}

static void test_hot_spot(void)
{
    uint64_t alone, behind, to_node1[5];
    const uint64_t want_node1[5] = { 2075, 2675, 3275, 3875, 4475 };
    unsigned n1, i;

    hot_spot_run(false, &alone, to_node1, &n1);
    g_assert_cmpuint(alone, ==, 3000 + 50 + 3 * 150 + 50 + 225 + 600);
    hot_spot_run(true, &behind, to_node1, &n1);
    for (i = 0; i < n1; i++) {
        g_assert_cmpuint(to_node1[i], ==, want_node1[i]);
    }
    g_assert_cmpuint(behind, >, alone);
    g_assert_cmpuint(behind, ==, 3500 + 50 + 3 * 150 + 50 + 225 + 600);
}

/*
 * High priority never waits behind low: node 0 streams low-priority
 * 0-word packets to node 1, one per 500 ns from 1000, faster than node
 * 1's engine takes them (600 ns), so they back up into node 0.  A
 * high-priority packet stamped among them (11000, after 20 low ones)
 * goes first at every link and at the engine: it waits at most for one
 * low packet's serialisation on each of its two links (225 ns each, a
 * packet being sent is not pre-empted) and one low packet in the engine
 * (600 ns), and finds a buffer at each input (the one kept for it):
 * delivered by 11000 + 1075 + 2 * 225 + 600.  In arrival order it would
 * wait for all 20 (node 1 takes the 20th at 13475).
 *
 * Exactly, by hand: the engine takes low j over [1475 + 600 j, 2075 +
 * 600 j], back to back; node 1's input holds the one taken and the next
 * (one buffer free: no low may enter), so the leaf router sends low m to
 * node 1 at 875 + 600 m (m >= 2) and node 0's input to the router (in0)
 * frees its buffer at 1100 + 600 m.  Low 18 left node 0 at 10700 (low
 * 16's buffer free); low 19, stamped 10500, needs two free and waits for
 * low 17's, at 11300.  The high packet, stamped 11000, finds the cable
 * free and one buffer (the kept one): it leaves at 11000, is at the
 * router's output at 11200, where low 17 is being sent until 11300 and
 * low 18 waits since 10900: it goes first at 11300 (node 1's kept
 * buffer), its tail in at 11575; at 11675 the engine is done with low 16
 * and takes it before low 17 (in since 11350): delivered at 12275, the
 * 18th packet, then the lows again, 600 ns apart.
 */
static void test_priority(void)
{
    TestSwitch *ts = timed_switch(2);
    TestClient *c[2];
    TestTimedPacket *p;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    uint64_t reached[2] = { 0 }, stamp = 1000, high_at = 0;
    const uint64_t high_stamp = 1000 + 20 * 500;
    const uint64_t alone = 50 + 150 + 50 + 225 + 600;
    unsigned k, lows_before = 0, got = 0;
    size_t size;

    timed_clients(ts, c, 2);
    for (k = 0; k < 40; k++, stamp += 500) {
        bool high = stamp == high_stamp;

        size = test_build_packet(pkt, 0, 1, high, false, k, 0);
        test_client_send_timed(c[0], stamp, high, pkt, size);
    }
    test_client_time_sync(c[0], 0, 0);
    test_client_time_sync(c[1], 0, 0);
    g_assert_true(test_client_wait_grant(c[0], 0, WAIT_MS));
    g_assert_true(test_client_wait_grant(c[1], 0, WAIT_MS));
    while (got < 40 && (p = timed_recv(c, reached, 2, 1))) {
        /* The engine never idles: the got-th packet at 2075 + 600 got. */
        g_assert_cmpuint(p->at, ==, 2075 + 600 * got);
        if (p->prio) {
            high_at = p->at;
        } else if (!high_at) {
            lows_before++;
        }
        got++;
        g_free(p);
    }
    g_assert_cmpuint(got, ==, 40);
    g_assert_cmpuint(high_at, <=, high_stamp + alone + 2 * 225 + 600);
    g_assert_cmpuint(lows_before, ==, 17);
    g_assert_cmpuint(high_at, ==, 12275);
    timed_stop(ts, c, 2);
}

/*
 * A halted node promises not to send before its next timer: the running
 * node is granted up to that promise plus the lookahead, and the halted
 * one is not woken until it has something to do before its grant.
 */
static void test_promise(void)
{
    TestSwitch *ts = timed_switch(2);
    TestClient *c[2];
    unsigned grants;

    timed_clients(ts, c, 2);
    test_client_time_sync(c[1], 1425, 1000000);    /* halted until 1 ms */
    test_client_time_sync(c[0], 1425, 1425);
    g_assert_true(test_client_wait_grant(c[0], 1425, WAIT_MS));
    g_assert_cmpuint(c[0]->granted, ==, 1000000 + 1425);
    /* Node 1 would only run to 2850 and say the same again: it waits. */
    grants = c[1]->grants;
    g_assert_false(test_client_wait_grant(c[1], 1425, 300));
    g_assert_cmpuint(c[1]->grants, ==, grants);
    /* Node 0 got past node 1's timer: node 1 may run to it and beyond. */
    test_client_time_sync(c[0], 1000000 + 1425, 1000000 + 1425);
    g_assert_true(test_client_wait_grant(c[1], 1425, WAIT_MS));
    g_assert_cmpuint(c[1]->granted, ==, 1000000 + 1425 + 1425);
    test_client_free(c[0]);
    test_client_free(c[1]);
    test_switch_stop(ts);
}

/*
 * A timed capture is in virtual time: nanosecond timestamps, and the
 * capture header (version 2) says the packet's virtual time too: its
 * stamp as it came in, the time its receiver takes it as it went out.
 */
static void test_pcap(void)
{
    ArcticSwitchConfig config;
    g_autofree char *dir = g_dir_make_tmp("arctic-timed-pcap-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "timed.pcap", NULL);
    g_autofree uint8_t *data = NULL;
    TestSwitch *ts;
    TestClient *c[2];
    TestTimedPacket *p;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size = test_build_packet(pkt, 0, 1, true, false, 0, 0), len;
    const uint8_t *rec;
    uint64_t want_time[2] = { 1000, 2075 };
    uint8_t want_event[2] = { 1, 2 };     /* ingress, egress */
    unsigned i;

    arctic_switch_config_init(&config);
    config.ports = 2;
    config.timed = true;
    config.pcap_path = path;
    ts = test_switch_start(&config);
    timed_clients(ts, c, 2);
    test_client_send_timed(c[0], 1000, true, pkt, size);
    test_client_time_sync(c[0], 1425, 1425);
    test_client_time_sync(c[1], 1425, 1425);
    p = test_client_recv_timed(c[1], WAIT_MS);
    g_assert_nonnull(p);
    g_free(p);
    test_client_free(c[0]);
    test_client_free(c[1]);
    test_switch_stop(ts);

    g_assert_true(g_file_get_contents(path, (char **)&data, &len, NULL));
    g_assert_cmpuint(len, ==, 24 + 2 * (16 + 16 + size));
    g_assert_cmphex(arctic_get_le32(data), ==, 0xa1b23c4d);   /* ns */
    rec = data + 24;
    for (i = 0; i < 2; i++) {
        g_assert_cmpuint(arctic_get_le32(rec), ==, 0);
        g_assert_cmpuint(arctic_get_le32(rec + 4), ==, want_time[i]);
        g_assert_cmpuint(arctic_get_le32(rec + 8), ==, 16 + size);
        g_assert_cmpuint(rec[16], ==, 2);
        g_assert_cmpuint(rec[17], ==, want_event[i]);
        g_assert_cmpuint(arctic_get_le64(rec + 24), ==, want_time[i]);
        g_assert_cmpmem(rec + 32, size, pkt, size);
        rec += 16 + 16 + size;
    }
    g_unlink(path);
    g_rmdir(dir);
}

/* Alone, a node is never held: its grant is the end of time. */
static void test_alone(void)
{
    TestSwitch *ts = timed_switch(1);
    TestClient *c[1];

    timed_clients(ts, c, 1);
    g_assert_cmpuint(c[0]->start.grant, ==, ARCTIC_TIME_NEVER);
    test_client_free(c[0]);
    test_switch_stop(ts);
}

/* A clock past its grant, or a packet stamped in its past, ends the link. */
static void test_violation(void)
{
    TestSwitch *ts = timed_switch(2);
    TestClient *c[2];
    ArcticSwitchStats *st;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size = test_build_packet(pkt, 1, 0, true, false, 0, 0);

    timed_clients(ts, c, 2);
    test_client_time_sync(c[0], 1425 + 1, 1425 + 1);
    g_assert_true(test_client_wait_closed(c[0], WAIT_MS));
    test_client_time_sync(c[1], 1425, 1425);
    test_client_send_timed(c[1], 1000, true, pkt, size);
    g_assert_true(test_client_wait_closed(c[1], WAIT_MS));
    st = test_switch_stats(ts);
    g_assert_cmpuint(st->port[0].disconnects[ARCTIC_DISCONNECT_TIME_PROTOCOL],
                     ==, 1);
    g_assert_cmpuint(st->port[1].disconnects[ARCTIC_DISCONNECT_TIME_PROTOCOL],
                     ==, 1);
    arctic_switch_stats_free(st);
    test_client_free(c[0]);
    test_client_free(c[1]);
    test_switch_stop(ts);
}

/*
 * A node that promises to stay halted until 10 ms, lets the others run
 * there, then sends a packet stamped long before: its stamp is past the
 * time it last reported plus its cheapest transmission, so only the
 * promise shows it is a lie.  The liar is cut off and named; the honest
 * node never sees the packet (it would have been delivered in the honest
 * node's past, which its NIU takes as a broken link) and runs on alone.
 */
static void test_broken_promise(void)
{
    TestSwitch *ts = timed_switch(2);
    TestClient *c[2];
    ArcticSwitchStats *st;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size = test_build_packet(pkt, 0, 1, true, false, 0, 0);
    const uint64_t promise = 10000000, honest = 10000553;

    timed_clients(ts, c, 2);
    test_client_time_sync(c[0], 712, promise);
    test_client_time_sync(c[1], 1425, 1425);
    g_assert_true(test_client_wait_grant(c[1], 1425, WAIT_MS));
    g_assert_cmpuint(c[1]->granted, ==, promise + 1425);
    test_client_time_sync(c[1], honest, honest);
    test_client_send_timed(c[0], 1212, true, pkt, size);
    g_assert_true(test_client_wait_closed(c[0], WAIT_MS));

    /* Alone now, the honest node may run for ever, and got nothing. */
    test_client_time_sync(c[1], c[1]->granted, c[1]->granted);
    g_assert_true(test_client_wait_grant(c[1], promise + 1425, WAIT_MS));
    g_assert_cmpuint(c[1]->granted, ==, ARCTIC_TIME_NEVER);
    g_assert_null(test_client_recv_timed(c[1], 200));
    g_assert_false(test_client_wait_closed(c[1], 100));
    g_assert_cmpuint(disconnects(ts, 0, ARCTIC_DISCONNECT_TIME_PROTOCOL), ==,
                     1);
    g_assert_cmpuint(disconnects(ts, 1, ARCTIC_DISCONNECT_TIME_PROTOCOL), ==,
                     0);
    st = test_switch_stats(ts);
    g_assert_cmpuint(st->time_deliveries, ==, 0);
    arctic_switch_stats_free(st);
    timed_stop(ts, c, 2);
}

/*
 * An NIU's transmit engine is serial: each stamp is at least the one
 * before plus the cheapest transmission.  A node that stamps a burst at
 * one instant (a flood no NIU can make) is cut off at its second packet.
 */
static void test_burst(void)
{
    TestSwitch *ts = timed_switch(2);
    TestClient *c[2];
    ArcticSwitchStats *st;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size = test_build_packet(pkt, 0, 1, true, false, 0, 0);

    timed_clients(ts, c, 2);
    test_client_send_timed(c[0], 1000, true, pkt, size);
    test_client_send_timed(c[0], 1000 + ARCTIC_TIME_TX_NS - 1, true, pkt,
                           size);
    g_assert_true(test_client_wait_closed(c[0], WAIT_MS));
    g_assert_cmpuint(disconnects(ts, 0, ARCTIC_DISCONNECT_TIME_PROTOCOL), ==,
                     1);
    st = test_switch_stats(ts);
    g_assert_cmpuint(st->time_packets, ==, 1);
    arctic_switch_stats_free(st);
    timed_stop(ts, c, 2);
}

/*
 * The grant the switch gave @port_no beyond @reached, once it is not
 * waiting any more: what a node that reads nothing would have read
 * (0: its link was cut off for not reading).
 */
static uint64_t unread_grant(TestSwitch *ts, unsigned port_no,
                             uint64_t reached)
{
    gint64 deadline = g_get_monotonic_time() + WAIT_MS * 1000;

    while (g_get_monotonic_time() < deadline) {
        ArcticSwitchStats *st = test_switch_stats(ts);
        const struct arctic_port_stats *p = &st->port[port_no];
        uint64_t granted = p->time_granted;
        bool cut = p->disconnects[ARCTIC_DISCONNECT_NOT_READING] > 0;
        bool ready = !p->time_waiting && granted > reached;

        arctic_switch_stats_free(st);
        if (cut) {
            return 0;
        }
        if (ready) {
            return granted;
        }
        g_usleep(50);
    }
    g_assert_not_reached();
}

/*
 * A node that keeps its clock going (its grants are all it needs to know,
 * and the switch's stats tell them here) but never reads its link: the
 * packets and grants for it pile up in the switch.  At a mebibyte past
 * what its socket holds it is cut off and named; the switch never holds
 * more for it, and the sender's link stays up.
 */
static void test_not_reading(void)
{
    TestSwitch *ts = timed_switch(2);
    TestClient *c[2];
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size = test_build_packet(pkt, 0, 1, false, false, 0, 20);
    uint64_t reached[2] = { 0 }, tx_free = 0, sent = 0;
    const uint64_t bound = 4 * 1024 * 1024;   /* bytes sent to node 1 */

    timed_clients(ts, c, 2);
    while (sent < bound) {
        uint64_t stamp = MAX(reached[0], tx_free) + ARCTIC_TIME_TX_NS;
        uint64_t g1;

        test_client_send_timed(c[0], stamp, false, pkt, size);
        tx_free = stamp;
        sent += ARCTIC_LINK_HEADER_SIZE + ARCTIC_TIMED_PACKET_HEADER + size;
        test_client_time_sync(c[0], c[0]->granted, c[0]->granted);
        reached[0] = c[0]->granted;
        g1 = unread_grant(ts, 1, reached[1]);
        if (!g1) {
            break;
        }
        sent += ARCTIC_LINK_HEADER_SIZE + ARCTIC_TIME_GRANT_SIZE;
        test_client_time_sync(c[1], g1, g1);
        reached[1] = g1;
        g_assert_true(test_client_wait_grant(c[0], reached[0], WAIT_MS));
        /* Node 0 reads: what it was sent is not the switch's to hold. */
        g_free(test_client_recv_timed(c[0], 0));
    }
    g_test_message("node 1 cut off after %" G_GUINT64_FORMAT " bytes were "
                   "sent to it", sent);
    g_assert_cmpuint(sent, <, bound);
    g_assert_cmpuint(sent, >, 1024 * 1024);
    g_assert_true(test_client_wait_closed(c[1], WAIT_MS));
    g_assert_cmpuint(disconnects(ts, 1, ARCTIC_DISCONNECT_NOT_READING), ==, 1);
    g_assert_cmpuint(disconnects(ts, 0, ARCTIC_DISCONNECT_NOT_READING), ==, 0);
    g_assert_cmpuint(disconnects(ts, 0, ARCTIC_DISCONNECT_TIME_PROTOCOL), ==,
                     0);
    g_assert_false(test_client_wait_closed(c[0], 100));
    timed_stop(ts, c, 2);
}

/*
 * Deterministic: random traffic among 4 nodes over many grants, every
 * node always sending what it sends and reporting its clock, in a
 * different host order each run (forward, backward, shuffled, with
 * pauses): the deliveries are the same, to the nanosecond.
 */
enum { ROUNDS = 40, NODES = 4, LOOKAHEAD = 1425 };

/*
 * Every node runs to @target, in the order @perm, each to its grants on
 * the way as they come (which grants come when is the host's order; the
 * network's times may not depend on it).
 */
static void timed_run_to(TestClient **c, uint64_t *reached, unsigned n,
                         const unsigned *perm, uint64_t target)
{
    gint64 deadline = g_get_monotonic_time() + WAIT_MS * 1000ll;
    bool all;

    do {
        unsigned k;

        all = true;
        for (k = 0; k < n; k++) {
            unsigned i = perm[k];

            if (reached[i] >= target) {
                continue;
            }
            all = false;
            if (test_client_wait_grant(c[i], reached[i], 1)) {
                reached[i] = MIN(c[i]->granted, target);
                test_client_time_sync(c[i], reached[i], reached[i]);
            }
        }
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
    } while (!all);
}

static GString *timed_run(unsigned order_seed)
{
    TestSwitch *ts = timed_switch(NODES);
    TestClient *c[NODES];
    GRand *order = g_rand_new_with_seed(order_seed);
    GString *log = g_string_new(NULL);
    uint64_t reached[NODES] = { 0 }, tx_free[NODES] = { 0 };
    unsigned round, i, k;

    timed_clients(ts, c, NODES);
    for (i = 0; i < NODES; i++) {
        reached[i] = c[i]->granted;
        test_client_time_sync(c[i], reached[i], reached[i]);
    }
    for (round = 0; round < ROUNDS; round++) {
        unsigned perm[NODES];
        uint64_t target = (round + 2) * LOOKAHEAD;

        for (i = 0; i < NODES; i++) {
            perm[i] = i;
        }
        for (i = NODES - 1; order_seed && i > 0; i--) {
            unsigned j = g_rand_int_range(order, 0, i + 1), t = perm[i];

            perm[i] = perm[j];
            perm[j] = t;
        }
        /* What each node sends is the traffic's, not the order's. */
        for (k = 0; k < NODES; k++) {
            unsigned n = perm[k];
            GRand *mine = g_rand_new_with_seed(round * NODES + n);
            unsigned sends = g_rand_int_range(mine, 0, 3);

            while (sends--) {
                uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
                unsigned dst = g_rand_int_range(mine, 0, NODES);
                unsigned words = g_rand_int_range(mine, 0, 21);
                /*
                 * As an NIU's: its clock and at least its cheapest cost,
                 * after the packet before (one transmit engine).
                 */
                uint64_t stamp = MAX(target - LOOKAHEAD, tx_free[n]) +
                                 ARCTIC_TIME_TX_NS +
                                 g_rand_int_range(mine, 0, 900);
                size_t size = test_build_packet(pkt, n, dst,
                                                g_rand_boolean(mine),
                                                false, round, words);

                test_client_send_timed(c[n], stamp, true, pkt, size);
                tx_free[n] = stamp;
            }
            g_rand_free(mine);
            if (order_seed && g_rand_int_range(order, 0, 4) == 0) {
                g_usleep(1000);
            }
        }
        timed_run_to(c, reached, NODES, perm, target);
    }
    for (i = 0; i < NODES; i++) {
        TestTimedPacket *p;

        while ((p = test_client_recv_timed(c[i], 200))) {
            unsigned src, dst;
            uint32_t seq;
            bool high;

            g_assert_true(test_packet_valid(p->bytes, p->size, &src, &dst,
                                            &seq, &high));
            g_assert_cmpuint(dst, ==, i);
            g_string_append_printf(log, "%u<-%u seq %u at %" G_GUINT64_FORMAT
                                   "\n", i, src, seq, p->at);
            g_free(p);
        }
        g_string_append_printf(log, "%u reached %" G_GUINT64_FORMAT "\n", i,
                               reached[i]);
        test_client_free(c[i]);
    }
    g_rand_free(order);
    test_switch_stop(ts);
    return log;
}

static void test_deterministic(void)
{
    g_autoptr(GString) first = timed_run(0);
    unsigned seed;

    g_assert_cmpuint(first->len, >, 0);
    g_test_message("%s", first->str);
    for (seed = 1; seed <= 3; seed++) {
        g_autoptr(GString) again = timed_run(seed);

        g_assert_cmpstr(again->str, ==, first->str);
    }
}

/*
 * Honest NIUs, at random: each node runs as niu-time.c's does.  Its
 * processor runs (sending now and then, sometimes a burst its transmit
 * engine queues) or halts until a timer; a packet delivered wakes it and
 * may be answered at once; every send stops its clock at stamp + return
 * (an answer could come from then on).  Its clock moves in whole
 * instructions of @tick ns: it takes each event at the first instruction
 * boundary at or past the event's time, and at its limit reports the
 * boundary it reached and its promise (that clock while the processor
 * runs, else its next timer or delivery), then reads its link until a
 * grant beyond it comes.  Like the NIU, it takes a packet delivered for a
 * time a whole instruction before the clock at which it read it as a
 * broken link.  Whatever the traffic, no node may be handed a packet in
 * its past, and the cluster may not stall.
 */
enum { SIM_NODES_MAX = 16, SIM_STALL_MS = 20000 };

typedef struct {
    TestClient *c;
    GRand *rand;
    uint64_t phase;             /* instruction boundaries: phase + k tick */
    uint64_t now, limit, tx_free, timer, next_send;
    bool running, waiting;
    unsigned grants;            /* the client's grants when it synced */
    GQueue inbox;               /* TestTimedPacket, in order of time */
    unsigned seq, taken, sent;
} SimNode;

/* @n's instruction time, as its TIME_READY said. */
static uint64_t sim_tick(const SimNode *n)
{
    return n->c->time_costs.tick_ns;
}

/* The first instruction boundary of @n at or past @t. */
static uint64_t sim_boundary(const SimNode *n, uint64_t t)
{
    uint64_t tick = sim_tick(n);

    if (t == ARCTIC_TIME_NEVER || t <= n->phase) {
        return MAX(t, n->phase);
    }
    return n->phase + (t - n->phase + tick - 1) / tick * tick;
}

static void sim_send(SimNode *n, unsigned self, unsigned dst, bool high)
{
    const struct arctic_time_ready *costs = &n->c->time_costs;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size = test_build_packet(pkt, self, dst, high,
                                    g_rand_boolean(n->rand), n->seq++,
                                    g_rand_int_range(n->rand, 0, 21));
    uint64_t stamp = MAX(n->now, n->tx_free) +
                     arctic_time_niu_cost(costs->tx_ns,
                                          costs->pci_ps_per_byte, pkt, size);

    n->tx_free = stamp;
    n->limit = MIN(n->limit, stamp + n->c->start.return_ns);
    test_client_send_timed(n->c, stamp, high, pkt, size);
    n->sent++;
}

static void sim_inbox_add(SimNode *n, TestTimedPacket *p)
{
    GList *l;

    for (l = n->inbox.tail; l && ((TestTimedPacket *)l->data)->at > p->at;
         l = l->prev) {
    }
    if (l) {
        g_queue_insert_after(&n->inbox, l, p);
    } else {
        g_queue_push_head(&n->inbox, p);
    }
}

static uint64_t sim_inbox_next(SimNode *n)
{
    TestTimedPacket *p = g_queue_peek_head(&n->inbox);

    return p ? p->at : ARCTIC_TIME_NEVER;
}

/* What @n's processor does next while it runs, from now on. */
static void sim_plan(SimNode *n)
{
    n->next_send = n->now + g_rand_int_range(n->rand, 0, 4000);
}

/* @n's processor halts until a timer. */
static void sim_halt(SimNode *n)
{
    n->running = false;
    n->timer = n->now + g_rand_int_range(n->rand, 1, 60000);
}

/* @n's processor runs again (a timer or a packet woke it). */
static void sim_wake(SimNode *n)
{
    n->running = true;
    n->timer = ARCTIC_TIME_NEVER;
    sim_plan(n);
}

/* Run @n until it reports its clock at its limit. */
static void sim_run(SimNode *n, unsigned self, unsigned nodes)
{
    for (;;) {
        uint64_t in = sim_inbox_next(n);
        uint64_t act = n->running ? n->next_send : n->timer;

        if (in <= act && in <= n->limit) {
            TestTimedPacket *p = g_queue_pop_head(&n->inbox);
            unsigned src, dst;
            uint32_t seq;
            bool high;

            g_assert_true(test_packet_valid(p->bytes, p->size, &src, &dst,
                                            &seq, &high));
            g_assert_cmpuint(dst, ==, self);
            n->now = MAX(n->now, sim_boundary(n, p->at));
            if (!n->running) {
                sim_wake(n);
            }
            n->taken++;
            if (g_rand_int_range(n->rand, 0, 2)) {
                sim_send(n, self, src, p->prio);      /* an answer */
            }
            if (g_rand_int_range(n->rand, 0, 3) == 0) {
                sim_halt(n);    /* handled at once, as an interrupt is */
            }
            g_free(p);
        } else if (act <= n->limit) {
            n->now = MAX(n->now, sim_boundary(n, act));
            if (n->running) {
                unsigned burst = g_rand_int_range(n->rand, 0, 8) ? 1
                                 : g_rand_int_range(n->rand, 2, 12);

                while (burst--) {
                    sim_send(n, self, g_rand_int_range(n->rand, 0, nodes),
                             g_rand_int_range(n->rand, 0, 3) == 0);
                }
                if (g_rand_int_range(n->rand, 0, 3) == 0) {
                    sim_halt(n);
                }
                sim_plan(n);
            } else {
                sim_wake(n);
            }
        } else {
            n->now = MAX(n->now, sim_boundary(n, n->limit));
            test_client_time_sync(n->c, n->now, n->running ? n->now
                                  : MAX(n->now, MIN(n->timer, in)));
            n->grants = n->c->grants;
            n->waiting = true;
            return;
        }
    }
}

/*
 * The packets @n's link brought before its latest grant, read while it
 * waits at its clock: none for a time it left a whole instruction ago.
 */
static void sim_read(SimNode *n)
{
    TestTimedPacket *p;

    while ((p = g_queue_peek_head(&n->c->timed)) &&
           p->grants < n->c->grants) {
        g_queue_pop_head(&n->c->timed);
        if (p->at + sim_tick(n) <= n->now) {
            g_error("node %u: delivered for %" G_GUINT64_FORMAT " ns, its "
                    "clock at %" G_GUINT64_FORMAT " ns", n->c->node, p->at,
                    n->now);
        }
        sim_inbox_add(n, p);
    }
}

static void sim_cluster(unsigned nodes, guint32 seed, unsigned tick,
                        unsigned rx_ns, uint64_t end)
{
    TestSwitch *ts = timed_switch(nodes);
    struct arctic_time_ready costs = default_costs;
    TestClient *c[SIM_NODES_MAX];
    SimNode sim[SIM_NODES_MAX] = { 0 };
    unsigned i, taken = 0, sent = 0;
    gint64 stalled = 0;
    bool all;

    costs.tick_ns = tick;
    costs.rx_ns = rx_ns;
    timed_clients_costs(ts, c, nodes, &costs);
    for (i = 0; i < nodes; i++) {
        SimNode *n = &sim[i];

        n->c = c[i];
        n->rand = g_rand_new_with_seed(seed * SIM_NODES_MAX + i);
        n->phase = g_rand_int_range(n->rand, 0, tick);
        n->limit = c[i]->granted;
        g_queue_init(&n->inbox);
        sim_wake(n);            /* every processor runs at the start */
    }
    do {
        bool moved = false;

        all = true;
        for (i = 0; i < nodes; i++) {
            SimNode *n = &sim[i];

            if (n->c->closed) {
                g_error("node %u: its link ended at %" G_GUINT64_FORMAT
                        " ns (time_protocol %" G_GUINT64_FORMAT ")", i,
                        n->now, disconnects(ts, i,
                                            ARCTIC_DISCONNECT_TIME_PROTOCOL));
            }
            if (n->waiting) {
                test_client_poll(n->c, 0);
            }
            if (n->waiting && n->c->grants > n->grants) {
                /* One grant per report, beyond the clock. */
                g_assert_cmpuint(n->c->grants, ==, n->grants + 1);
                g_assert_cmpuint(n->c->granted, >, n->now);
                sim_read(n);
                n->limit = n->c->granted;
                n->waiting = false;
            }
            if (!n->waiting) {
                sim_run(n, i, nodes);
                moved = true;
            }
            all &= n->now >= end;
        }
        if (moved) {
            stalled = 0;
        } else if (!stalled) {
            stalled = g_get_monotonic_time();
        } else {
            g_assert_cmpint(g_get_monotonic_time() - stalled, <,
                            SIM_STALL_MS * 1000ll);
            g_usleep(100);
        }
    } while (!all);
    for (i = 0; i < nodes; i++) {
        taken += sim[i].taken;
        sent += sim[i].sent;
        g_queue_clear_full(&sim[i].inbox, g_free);
        g_rand_free(sim[i].rand);
    }
    g_test_message("%u nodes, seed %u, %u ns per instruction, receive "
                   "%u ns: %u sent, %u taken by %" G_GUINT64_FORMAT " ns",
                   nodes, seed, tick, rx_ns, sent, taken, end);
    g_assert_cmpuint(taken, >, 0);
    timed_stop(ts, c, nodes);
}

/*
 * Sizes of one leaf router and of a tree, instructions of 1 ns, the
 * Pentium's 8 and the 88100's 128, receivers as fast as senders or slower
 * (packets queue in the network); more seeds with -m thorough.
 */
static void test_honest(void)
{
    static const struct {
        unsigned nodes, rx_ns;
    } shapes[] = {
        { 2, ARCTIC_TIME_RX_NS }, { 3, ARCTIC_TIME_RX_NS },
        { 16, ARCTIC_TIME_RX_NS }, { 2, 1500 }, { 4, 1500 },
    };
    static const unsigned ticks[] = { 1, 8, 128 };
    guint32 seed, seeds = g_test_thorough() ? 100 : 20;
    unsigned k, t;

    for (k = 0; k < G_N_ELEMENTS(shapes); k++) {
        for (t = 0; t < G_N_ELEMENTS(ticks); t++) {
            for (seed = 1; seed <= seeds; seed++) {
                sim_cluster(shapes[k].nodes, seed, ticks[t], shapes[k].rx_ns,
                            300000);
            }
        }
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/switch/timed/refuse", test_refuse);
    g_test_add_func("/switch/timed/start", test_start);
    g_test_add_func("/switch/timed/latency", test_latency);
    g_test_add_func("/switch/timed/contention", test_contention);
    g_test_add_func("/switch/timed/hot-spot", test_hot_spot);
    g_test_add_func("/switch/timed/priority", test_priority);
    g_test_add_func("/switch/timed/promise", test_promise);
    g_test_add_func("/switch/timed/alone", test_alone);
    g_test_add_func("/switch/timed/pcap", test_pcap);
    g_test_add_func("/switch/timed/violation", test_violation);
    g_test_add_func("/switch/timed/broken-promise", test_broken_promise);
    g_test_add_func("/switch/timed/burst", test_burst);
    g_test_add_func("/switch/timed/not-reading", test_not_reading);
    g_test_add_func("/switch/timed/deterministic", test_deterministic);
    g_test_add_func("/switch/timed/honest", test_honest);
    return g_test_run();
}
