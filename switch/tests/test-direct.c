/* SPDX-License-Identifier: MIT */
/*
 * Direct rings (link 1.5, docs/link-protocol.md §6.8): with --direct, the
 * first packet from one NIU on rings to another makes a ring pair that
 * both get on their sockets (DIRECT_RING, one memfd, the receiver told
 * that every packet in it is the sender's); what the sender writes there
 * reaches the receiver without the switch, and the switch's counters add
 * it from the sender's count.  The pair is taken back (DIRECT_STOP) when
 * an end leaves and when fault injection or a capture starts, none is
 * made while they are on, and pairs are made again once they stop; a
 * reset of the counters restarts a live pair's counts; a switch without
 * --direct, or an NIU that did not ask, gets none; --direct refuses --timed.  Hostile parties
 * (issue 48): nodes that churn pairs with a victim that does not read
 * its socket do not close the victim's link, stops its socket cannot
 * take wait and go, and a sender's counts are believed only as far as
 * its ring could have carried, never shown negative.
 */
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-glib/json-glib.h>

#include "harness.h"
#include "switch-internal.h"

enum { PORTS = 4, A = 1, B = 2, C = 3 };

typedef struct {
    TestSwitch *ts;
    TestClient *a, *b;
    uint32_t seq;
} Fixture;

/* A DIRECT_RING or DIRECT_STOP frame from @c's socket. */
typedef struct {
    uint16_t type;
    struct arctic_direct body;
    int fd;                     /* DIRECT_RING's, or -1 */
} DirectFrame;

static bool direct_recv(TestClient *c, DirectFrame *f, int timeout_ms)
{
    uint8_t buf[ARCTIC_LINK_HEADER_SIZE + ARCTIC_DIRECT_SIZE];
    struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
    struct arctic_frame_header h;
    unsigned nfds = 0;
    ssize_t n;

    f->fd = -1;
    if (poll(&pfd, 1, timeout_ms) <= 0) {
        return false;
    }
    /* The switch writes each frame whole, with its descriptor. */
    n = sw_recv_fds(c->fd, buf, sizeof(buf), &f->fd, 1, &nfds);
    g_assert_cmpint(n, ==, sizeof(buf));
    arctic_frame_header_decode(buf, &h);
    g_assert_cmpint(arctic_frame_header_check(&h), ==, ARCTIC_FRAME_OK);
    f->type = h.type;
    g_assert_true(arctic_direct_decode(buf + ARCTIC_LINK_HEADER_SIZE,
                                       &f->body));
    g_assert_cmpuint(nfds, ==, h.type == ARCTIC_FRAME_DIRECT_RING ? 1 : 0);
    return true;
}

static void *map_area(int fd, size_t *size)
{
    struct stat st;
    void *p;
    uint32_t data_size = 0;

    g_assert_cmpint(fstat(fd, &st), ==, 0);
    /* Sealed: neither end can shrink it under the other. */
    g_assert_true(fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK);
    p = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    g_assert_true(p != MAP_FAILED);
    g_assert_true(arctic_ring_area_check(p, st.st_size, &data_size));
    g_assert_cmpuint(data_size, ==, ARCTIC_DIRECT_DATA_SIZE);
    *size = st.st_size;
    return p;
}

static TestClient *join(Fixture *f, unsigned node)
{
    TestClient *c = NULL;

    g_assert_cmpuint(test_client_try_connect_offer(f->ts->socket_path, node,
                                                   8, 8, TEST_OFFER_RINGS,
                                                   &c), ==, 0);
    return c;
}

static void start_ports(Fixture *f, bool direct, unsigned ports)
{
    ArcticSwitchConfig config;

    arctic_switch_config_init(&config);
    config.ports = ports;
    config.direct = direct;
    config.verbose = getenv("V") != NULL;
    f->ts = test_switch_start(&config);
    test_hello_flags = R_ARCTIC_HELLO_FLAGS_DIRECT_MASK;
    f->a = join(f, A);
    f->b = join(f, B);
    f->seq = 0;
}

static void start(Fixture *f, bool direct)
{
    start_ports(f, direct, PORTS);
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
    start(f, true);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    test_client_free(f->a);
    test_client_free(f->b);
    test_switch_stop(f->ts);
    test_hello_flags = 0;
}

/* A packet from @from to @to through the switch's rings, received. */
static void through_switch(Fixture *f, TestClient *from, TestClient *to)
{
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size = test_build_packet(pkt, from->node, to->node, true, false,
                                    f->seq++, 4);
    GBytes *got;

    g_assert_true(test_client_send_packet(from, pkt, size, 2000));
    got = test_client_recv_packet(to, 2000);
    g_assert_nonnull(got);
    g_bytes_unref(got);
}

/* The pair from a to b, as both ends got it: their mappings. */
typedef struct {
    void *send_area, *recv_area;
    size_t send_size, recv_size;
} Pair;

static void expect_pair(Fixture *f, Pair *p)
{
    DirectFrame fa, fb;

    g_assert_true(direct_recv(f->b, &fb, 2000));
    g_assert_cmpuint(fb.type, ==, ARCTIC_FRAME_DIRECT_RING);
    g_assert_cmpuint(fb.body.role, ==, ARCTIC_DIRECT_RECEIVE);
    g_assert_cmpuint(fb.body.peer, ==, A);
    g_assert_true(direct_recv(f->a, &fa, 2000));
    g_assert_cmpuint(fa.type, ==, ARCTIC_FRAME_DIRECT_RING);
    g_assert_cmpuint(fa.body.role, ==, ARCTIC_DIRECT_SEND);
    g_assert_cmpuint(fa.body.peer, ==, B);
    p->send_area = map_area(fa.fd, &p->send_size);
    p->recv_area = map_area(fb.fd, &p->recv_size);
    close(fa.fd);
    close(fb.fd);
}

static void unmap_pair(Pair *p)
{
    munmap(p->send_area, p->send_size);
    munmap(p->recv_area, p->recv_size);
}

static void expect_stop(TestClient *c, unsigned peer,
                        enum arctic_direct_role role)
{
    DirectFrame fr;

    g_assert_true(direct_recv(c, &fr, 2000));
    g_assert_cmpuint(fr.type, ==, ARCTIC_FRAME_DIRECT_STOP);
    g_assert_cmpuint(fr.body.peer, ==, peer);
    g_assert_cmpuint(fr.body.role, ==, role);
    g_assert_cmpint(fr.fd, ==, -1);
}

static void test_pair(Fixture *f, gconstpointer data)
{
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MAX_SIZE];
    uint8_t got[sizeof(frame)];
    struct arctic_ring out, in;
    struct arctic_ring_area *sa;
    g_autoptr(GBytes) none = NULL;
    ArcticSwitchStats *st;
    size_t size;
    Pair p;
    unsigned src, dst;
    uint32_t seq;
    bool high;

    g_assert_true(f->a->welcome_flags & R_ARCTIC_WELCOME_FLAGS_DIRECT_MASK);
    through_switch(f, f->a, f->b);
    expect_pair(f, &p);
    /* Only the first packet makes it: a second one makes none. */
    through_switch(f, f->a, f->b);
    g_assert_false(direct_recv(f->a, &(DirectFrame){ 0 }, 100));

    /* The sender writes a frame; the receiver's mapping has it. */
    sa = p.send_area;
    arctic_direct_attach(&out, p.send_area, ARCTIC_DIRECT_DATA_SIZE,
                         ARCTIC_PRIORITY_HIGH);
    arctic_direct_attach(&in, p.recv_area, ARCTIC_DIRECT_DATA_SIZE,
                         ARCTIC_PRIORITY_HIGH);
    size = test_build_packet(frame + ARCTIC_LINK_HEADER_SIZE, A, B, true,
                             false, 77, 6);
    arctic_frame_header_encode_flags(frame, ARCTIC_FRAME_PACKET,
                                     R_ARCTIC_FRAME_FLAGS_PRIORITY_MASK,
                                     size);
    g_assert_cmpuint(arctic_ring_write(&out, frame,
                                       ARCTIC_LINK_HEADER_SIZE + size), ==,
                     ARCTIC_LINK_HEADER_SIZE + size);
    sa->sent_packets[ARCTIC_PRIORITY_HIGH] = 1;
    sa->sent_bytes[ARCTIC_PRIORITY_HIGH] = size;
    g_assert_cmpuint(arctic_ring_read(&in, got, sizeof(got)), ==,
                     ARCTIC_LINK_HEADER_SIZE + size);
    g_assert_true(test_packet_valid(got + ARCTIC_LINK_HEADER_SIZE, size,
                                    &src, &dst, &seq, &high));
    g_assert_cmpuint(src, ==, A);
    g_assert_cmpuint(seq, ==, 77);
    /* ... and the switch did not see it. */
    none = test_client_recv_packet(f->b, 100);
    g_assert_null(none);

    /* Counted: two through the routers, one direct. */
    st = test_switch_stats(f->ts);
    g_assert_cmpuint(st->port[A].prio[ARCTIC_PRIORITY_HIGH].rx_packets, ==,
                     3);
    g_assert_cmpuint(st->port[A].prio[ARCTIC_PRIORITY_HIGH].direct_packets,
                     ==, 1);
    g_assert_cmpuint(st->port[B].prio[ARCTIC_PRIORITY_HIGH].tx_packets, ==,
                     3);
    g_assert_cmpuint(
        st->port[B].prio[ARCTIC_PRIORITY_HIGH].direct_in_packets, ==, 1);
    g_assert_cmpuint(st->port[B].prio[ARCTIC_PRIORITY_HIGH].direct_packets,
                     ==, 0);
    arctic_switch_stats_free(st);

    /* B leaves: A is told to stop writing to it; the counts stay. */
    test_client_free(f->b);
    f->b = NULL;
    expect_stop(f->a, B, ARCTIC_DIRECT_SEND);
    st = test_switch_stats(f->ts);
    g_assert_cmpuint(st->port[A].prio[ARCTIC_PRIORITY_HIGH].direct_packets,
                     ==, 1);
    g_assert_cmpuint(st->port[A].prio[ARCTIC_PRIORITY_HIGH].rx_packets, ==,
                     3);
    arctic_switch_stats_free(st);
    unmap_pair(&p);
}

/*
 * Port @port's high-priority count @name in the switch's JSON statistics
 * (arctic_switch_stats_to_json(), as the control socket sends them).
 */
static gint64 json_count(const ArcticSwitchStats *st, unsigned port,
                         const char *name)
{
    g_autofree char *text = arctic_switch_stats_to_json(st);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *stats, *high;

    g_assert_true(json_parser_load_from_data(parser, text, -1, NULL));
    stats = json_node_get_object(json_parser_get_root(parser));
    high = json_object_get_object_member(
        json_array_get_object_element(
            json_object_get_array_member(stats, "port"), port), "high");
    return json_object_get_int_member(high, name);
}

/*
 * The counts of A -> B are what a ring could have carried since @since_us
 * (g_get_monotonic_time()) besides the @switched packets the routers
 * saw: at most a packet a nanosecond, beyond what the ring holds at once
 * (the switch believes less: one every SW_DIRECT_PACKET_NS_MIN), never
 * more bytes than that many of the largest packets, and never negative
 * where the control socket shows them.
 */
static void expect_counts_plausible(Fixture *f, gint64 since_us,
                                    uint64_t switched)
{
    const unsigned hi = ARCTIC_PRIORITY_HIGH;
    uint64_t most = switched + ARCTIC_DIRECT_DATA_SIZE /
                    (ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MIN_SIZE) +
                    (uint64_t)(g_get_monotonic_time() - since_us) * 1000;
    ArcticSwitchStats *st = test_switch_stats(f->ts);
    const struct arctic_port_prio_stats *a = &st->port[A].prio[hi];
    const struct arctic_port_prio_stats *b = &st->port[B].prio[hi];

    g_assert_cmpuint(b->tx_packets, >=, switched);
    g_assert_cmpuint(b->tx_packets, <=, most);
    g_assert_cmpuint(b->direct_in_packets, <=, b->tx_packets);
    g_assert_cmpuint(b->tx_bytes, <=, b->tx_packets * ARCTIC_WIRE_MAX_SIZE);
    g_assert_cmpuint(a->rx_packets, ==, b->tx_packets);
    g_assert_cmpuint(a->rx_bytes, ==, b->tx_bytes);
    g_assert_cmpint(json_count(st, B, "tx_packets"), ==,
                    (gint64)b->tx_packets);
    g_assert_cmpint(json_count(st, B, "tx_bytes"), >=, 0);
    g_assert_cmpint(json_count(st, A, "direct_packets"), >=, 0);
    arctic_switch_stats_free(st);
}

/*
 * Counts a sender writes in its area are its word, not the truth
 * (issue 48 item 9): a sender that claims 10^15 packets, then 2^63 + 5,
 * then goes back to 5, leaves its receiver's (and its own) counts within
 * what its ring could have carried, and none negative; honest counting
 * goes on after, and what the pair carried stays when it goes.
 */
static void test_counts_bounded(Fixture *f, gconstpointer data)
{
    const unsigned hi = ARCTIC_PRIORITY_HIGH;
    gint64 since = g_get_monotonic_time();
    struct arctic_ring_area *sa;
    ArcticSwitchStats *st;
    uint64_t before;
    Pair p;

    through_switch(f, f->a, f->b);
    expect_pair(f, &p);
    sa = p.send_area;
    expect_counts_plausible(f, since, 1);

    sa->sent_packets[hi] = 1000000000000000ull;
    sa->sent_bytes[hi] = 1000000000000000ull * ARCTIC_WIRE_MAX_SIZE;
    expect_counts_plausible(f, since, 1);
    sa->sent_packets[hi] = (1ull << 63) + 5;
    sa->sent_bytes[hi] = UINT64_MAX;
    expect_counts_plausible(f, since, 1);
    sa->sent_packets[hi] = 5;
    sa->sent_bytes[hi] = 5;
    expect_counts_plausible(f, since, 1);

    /* From there on, what it writes counts as it should. */
    st = test_switch_stats(f->ts);
    before = st->port[B].prio[hi].tx_packets;
    arctic_switch_stats_free(st);
    sa->sent_packets[hi] = 8;
    sa->sent_bytes[hi] = 5 + 3 * ARCTIC_WIRE_MIN_SIZE;
    st = test_switch_stats(f->ts);
    g_assert_cmpuint(st->port[B].prio[hi].tx_packets, ==, before + 3);
    arctic_switch_stats_free(st);

    /* B leaves: the pair's counts stay in the ports', as bounded. */
    test_client_free(f->b);
    f->b = NULL;
    expect_stop(f->a, B, ARCTIC_DIRECT_SEND);
    expect_counts_plausible(f, since, 1);
    unmap_pair(&p);
}

static void stats_reset(ArcticSwitch *sw, void *opaque)
{
    arctic_switch_stats_reset(sw);
}

/*
 * The counters reset (arctic-ctl reset-stats) while a pair lives: what it
 * carried before is gone from both ports' counts, what it carries after
 * is counted from there.
 */
static void test_stats_reset(Fixture *f, gconstpointer data)
{
    const unsigned hi = ARCTIC_PRIORITY_HIGH;
    struct arctic_ring_area *sa;
    ArcticSwitchStats *st;
    Pair p;

    through_switch(f, f->a, f->b);
    expect_pair(f, &p);
    sa = p.send_area;
    sa->sent_packets[hi] = 5;
    sa->sent_bytes[hi] = 5 * ARCTIC_WIRE_MIN_SIZE;
    st = test_switch_stats(f->ts);
    g_assert_cmpuint(st->port[A].prio[hi].direct_packets, ==, 5);
    g_assert_cmpuint(st->port[B].prio[hi].direct_in_packets, ==, 5);
    g_assert_cmpuint(st->port[B].prio[hi].tx_packets, ==, 6);
    arctic_switch_stats_free(st);

    arctic_switch_invoke(f->ts->sw, stats_reset, NULL);
    st = test_switch_stats(f->ts);
    g_assert_cmpuint(st->port[A].prio[hi].direct_packets, ==, 0);
    g_assert_cmpuint(st->port[A].prio[hi].rx_packets, ==, 0);
    g_assert_cmpuint(st->port[B].prio[hi].direct_in_packets, ==, 0);
    g_assert_cmpuint(st->port[B].prio[hi].tx_bytes, ==, 0);
    arctic_switch_stats_free(st);

    sa->sent_packets[hi] = 7;
    sa->sent_bytes[hi] = 7 * ARCTIC_WIRE_MIN_SIZE;
    st = test_switch_stats(f->ts);
    g_assert_cmpuint(st->port[A].prio[hi].direct_packets, ==, 2);
    g_assert_cmpuint(st->port[B].prio[hi].direct_in_packets, ==, 2);
    g_assert_cmpuint(st->port[B].prio[hi].tx_bytes, ==,
                     2 * ARCTIC_WIRE_MIN_SIZE);
    arctic_switch_stats_free(st);
    unmap_pair(&p);
}

/*
 * However a count got there, the JSON the control socket sends never
 * shows a uint64_t at or above 2^63 as negative: it says 2^63 - 1.
 */
static void test_json_unsigned(void)
{
    ArcticSwitchStats *st = g_new0(ArcticSwitchStats, 1);
    struct arctic_port_prio_stats *q;

    st->ports = PORTS;
    st->port = g_new0(struct arctic_port_stats, PORTS);
    q = &st->port[B].prio[ARCTIC_PRIORITY_HIGH];
    q->tx_packets = (1ull << 63) + 5;
    q->tx_bytes = UINT64_MAX;
    q->direct_in_packets = 1ull << 63;
    q->rx_packets = G_MAXINT64;
    g_assert_cmpint(json_count(st, B, "tx_packets"), ==, G_MAXINT64);
    g_assert_cmpint(json_count(st, B, "tx_bytes"), ==, G_MAXINT64);
    g_assert_cmpint(json_count(st, B, "direct_in_packets"), ==, G_MAXINT64);
    g_assert_cmpint(json_count(st, B, "rx_packets"), ==, G_MAXINT64);
    g_assert_cmpint(json_count(st, A, "tx_packets"), ==, 0);
    arctic_switch_stats_free(st);
}

/* In the switch's loop, as its control socket does. */
static void faults_on(ArcticSwitch *sw, void *opaque)
{
    struct arctic_fault_params delay = { .delay = 1, .delay_us = 1 };

    g_assert_true(arctic_switch_set_faults(sw, C, -1, &delay, NULL));
}

static void faults_off(ArcticSwitch *sw, void *opaque)
{
    struct arctic_fault_params none = { 0 };

    g_assert_true(arctic_switch_set_faults(sw, -1, -1, &none, NULL));
}

static void capture_on(ArcticSwitch *sw, void *opaque)
{
    g_assert_true(arctic_switch_pcap_open(sw, opaque, NULL));
}

static void capture_off(ArcticSwitch *sw, void *opaque)
{
    arctic_switch_pcap_close(sw);
}

/* Faults, then a capture: the pairs go, and none is made meanwhile. */
static void test_taken_back(Fixture *f, gconstpointer data)
{
    g_autofree char *pcap = g_build_filename(f->ts->dir, "cap.pcap", NULL);
    Pair p;

    through_switch(f, f->a, f->b);
    expect_pair(f, &p);
    unmap_pair(&p);
    arctic_switch_invoke(f->ts->sw, faults_on, NULL);
    expect_stop(f->a, B, ARCTIC_DIRECT_SEND);
    expect_stop(f->b, A, ARCTIC_DIRECT_RECEIVE);
    through_switch(f, f->a, f->b);
    g_assert_false(direct_recv(f->a, &(DirectFrame){ 0 }, 200));
    g_assert_false(direct_recv(f->b, &(DirectFrame){ 0 }, 0));

    /* No fault left: the next packet makes a pair again. */
    arctic_switch_invoke(f->ts->sw, faults_off, NULL);
    through_switch(f, f->a, f->b);
    expect_pair(f, &p);
    unmap_pair(&p);

    arctic_switch_invoke(f->ts->sw, capture_on, pcap);
    expect_stop(f->a, B, ARCTIC_DIRECT_SEND);
    expect_stop(f->b, A, ARCTIC_DIRECT_RECEIVE);
    through_switch(f, f->a, f->b);
    g_assert_false(direct_recv(f->a, &(DirectFrame){ 0 }, 200));

    /* The capture stopped: the next packet makes a pair again. */
    arctic_switch_invoke(f->ts->sw, capture_off, NULL);
    through_switch(f, f->a, f->b);
    expect_pair(f, &p);
    unmap_pair(&p);
}

/*
 * Churn (issue 48 item 5): hostile nodes that make and drop pairs with a
 * victim, which reads its ring but leaves its socket unread meanwhile, as
 * an NIU that looks at it only every ARCTIC_RING_LOOK_MS does when the
 * switch runs faster.  Every pair made costs the victim a DIRECT_RING
 * and a DIRECT_STOP on its socket.
 */
enum {
    CHURN_PORTS = 16,
    HOSTILE_FIRST = 4,          /* nodes 4..4+HOSTILES-1 */
    HOSTILES = 8,
    /* Pairs tried: their frames are more than the victim's socket holds. */
    CHURN_ROUNDS = 200,
};

/* A packet from @from to @to through the switch: whether it arrived. */
static bool packet_arrives(Fixture *f, TestClient *from, TestClient *to)
{
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size = test_build_packet(pkt, from->node, to->node, true, false,
                                    f->seq++, 4);
    GBytes *got;

    if (!test_client_send_packet(from, pkt, size, 2000)) {
        return false;
    }
    got = test_client_recv_packet(to, 2000);
    if (got) {
        g_bytes_unref(got);
        test_client_return_credits(to, 0, 1);
    }
    return got != NULL;
}

/* The direct-ring frames waiting on @c's socket, counted by type. */
static void drain_direct(TestClient *c, unsigned *rings, unsigned *stops)
{
    DirectFrame fr;

    *rings = *stops = 0;
    while (direct_recv(c, &fr, 0)) {
        if (fr.type == ARCTIC_FRAME_DIRECT_RING) {
            (*rings)++;
            close(fr.fd);
        } else {
            g_assert_cmpuint(fr.type, ==, ARCTIC_FRAME_DIRECT_STOP);
            (*stops)++;
        }
        g_assert_cmpuint(fr.body.role, ==, ARCTIC_DIRECT_RECEIVE);
    }
}

/* The victim's link is up and was never closed for a failed write. */
static void expect_victim_up(Fixture *f, TestClient *victim)
{
    ArcticSwitchStats *st = test_switch_stats(f->ts);
    const struct arctic_port_stats *p = &st->port[victim->node];

    g_assert_cmpuint(p->disconnects[ARCTIC_DISCONNECT_IO_ERROR], ==, 0);
    g_assert_true(p->connected);
    arctic_switch_stats_free(st);
}

static void test_churn_victim(void)
{
    TestClient *victim, *late;
    unsigned i, delivered = 0, honest = 0, honest_sent = 0;
    unsigned rings, stops;
    DirectFrame fr;
    Fixture f;

    start_ports(&f, true, CHURN_PORTS);
    victim = f.a;
    for (i = 0; i < CHURN_ROUNDS && delivered == i; i++) {
        TestClient *h = join(&f, HOSTILE_FIRST + i % HOSTILES);

        /* The pair is made as the packet passes the routers. */
        delivered += packet_arrives(&f, h, victim);
        test_client_free(h);
        if (i % 10 == 0) {
            honest_sent++;
            honest += packet_arrives(&f, f.b, victim);
        }
    }
    /* Every packet arrived, and the victim's link stayed up. */
    g_assert_cmpuint(delivered, ==, CHURN_ROUNDS);
    g_assert_cmpuint(honest, ==, honest_sent);
    g_assert_true(packet_arrives(&f, f.b, victim));
    expect_victim_up(&f, victim);

    /*
     * What its socket holds is whole: no pair was made into it beyond
     * what it had not read, and each it was told of was taken back (the
     * honest node's pair is still live).
     */
    drain_direct(victim, &rings, &stops);
    g_assert_cmpuint(rings, >, 0);
    g_assert_cmpuint(rings, <, CHURN_ROUNDS / 2);
    g_assert_cmpuint(stops + 1, ==, rings);

    /* Read: a later packet makes a pair into it again. */
    late = join(&f, HOSTILE_FIRST + HOSTILES);
    g_usleep(3 * ARCTIC_RING_LOOK_MS * 1000);
    g_assert_true(packet_arrives(&f, late, victim));
    g_assert_true(direct_recv(victim, &fr, 2000));
    g_assert_cmpuint(fr.type, ==, ARCTIC_FRAME_DIRECT_RING);
    g_assert_cmpuint(fr.body.peer, ==, late->node);
    close(fr.fd);
    expect_victim_up(&f, victim);
    test_client_free(late);
    fixture_teardown(&f, NULL);
}

/* In the switch's loop: port @opaque's socket takes only a few frames. */
static void socket_shrink(ArcticSwitch *sw, void *opaque)
{
    struct sw_conn *conn = sw->port[GPOINTER_TO_UINT(opaque)].link.conn;
    int least = 1;      /* the kernel makes it its least: 6 frames here */

    g_assert_cmpint(setsockopt(conn->fd, SOL_SOCKET, SO_SNDBUF, &least,
                               sizeof(least)), ==, 0);
}

/* Wait until the switch has seen nodes @first.. @first + @n - 1 go. */
static void wait_gone(Fixture *f, unsigned first, unsigned n)
{
    unsigned i, tries, up = n;

    for (tries = 0; up && tries < 200; tries++) {
        ArcticSwitchStats *st = test_switch_stats(f->ts);

        for (i = 0, up = 0; i < n; i++) {
            up += st->port[first + i].connected;
        }
        arctic_switch_stats_free(st);
        if (up) {
            g_usleep(10 * 1000);
        }
    }
    g_assert_cmpuint(up, ==, 0);
}

/*
 * More DIRECT_STOPs at once than the victim's socket takes (12 pairs
 * into it whose senders leave together; its socket made small here so
 * that 12 do not fit): the victim's link stays up, and every stop comes,
 * those that did not fit once it has read the others.
 */
static void test_stops_owed(void)
{
    enum { LEAVERS = 12 };
    TestClient *h[LEAVERS], *victim;
    bool told[CHURN_PORTS] = { false };
    unsigned i, stops = 0;
    DirectFrame fr;
    Fixture f;

    start_ports(&f, true, CHURN_PORTS);
    victim = f.a;
    arctic_switch_invoke(f.ts->sw, socket_shrink,
                         GUINT_TO_POINTER(victim->node));
    for (i = 0; i < LEAVERS; i++) {
        h[i] = join(&f, HOSTILE_FIRST + i);
        g_assert_true(packet_arrives(&f, h[i], victim));
        /* The victim takes each ring: its socket is empty again. */
        g_assert_true(direct_recv(victim, &fr, 2000));
        g_assert_cmpuint(fr.type, ==, ARCTIC_FRAME_DIRECT_RING);
        g_assert_cmpuint(fr.body.peer, ==, h[i]->node);
        close(fr.fd);
    }
    for (i = 0; i < LEAVERS; i++) {
        test_client_free(h[i]);
    }
    wait_gone(&f, HOSTILE_FIRST, LEAVERS);
    expect_victim_up(&f, victim);

    while (stops < LEAVERS && direct_recv(victim, &fr, 2000)) {
        g_assert_cmpuint(fr.type, ==, ARCTIC_FRAME_DIRECT_STOP);
        g_assert_cmpuint(fr.body.role, ==, ARCTIC_DIRECT_RECEIVE);
        g_assert_cmpuint(fr.body.peer, >=, HOSTILE_FIRST);
        g_assert_cmpuint(fr.body.peer, <, HOSTILE_FIRST + LEAVERS);
        g_assert_false(told[fr.body.peer]);
        told[fr.body.peer] = true;
        stops++;
    }
    g_assert_cmpuint(stops, ==, LEAVERS);
    g_assert_true(packet_arrives(&f, f.b, victim));
    expect_victim_up(&f, victim);
    fixture_teardown(&f, NULL);
}

/* Without --direct, or for an NIU that did not ask: no pair. */
static void test_not_asked(void)
{
    Fixture f;
    TestClient *c = NULL;

    start(&f, false);
    g_assert_false(f.a->welcome_flags & R_ARCTIC_WELCOME_FLAGS_DIRECT_MASK);
    through_switch(&f, f.a, f.b);
    g_assert_false(direct_recv(f.a, &(DirectFrame){ 0 }, 200));
    g_assert_false(direct_recv(f.b, &(DirectFrame){ 0 }, 0));
    fixture_teardown(&f, NULL);

    start(&f, true);
    test_hello_flags = 0;
    c = join(&f, C);
    g_assert_false(c->welcome_flags & R_ARCTIC_WELCOME_FLAGS_DIRECT_MASK);
    through_switch(&f, f.a, c);
    through_switch(&f, c, f.a);
    g_assert_false(direct_recv(f.a, &(DirectFrame){ 0 }, 200));
    g_assert_false(direct_recv(c, &(DirectFrame){ 0 }, 0));
    test_client_free(c);
    fixture_teardown(&f, NULL);
}

static void test_refuses_timed(void)
{
    ArcticSwitchConfig config;
    GError *err = NULL;
    ArcticSwitch *sw;

    arctic_switch_config_init(&config);
    config.ports = PORTS;
    config.direct = true;
    config.timed = true;
    config.socket_path = "/nonexistent/direct.sock";
    sw = arctic_switch_new(&config, &err);
    g_assert_null(sw);
    g_assert_nonnull(strstr(err->message, "--timed"));
    g_error_free(err);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add("/switch/direct/pair", Fixture, NULL, fixture_setup,
               test_pair, fixture_teardown);
    g_test_add("/switch/direct/taken-back", Fixture, NULL, fixture_setup,
               test_taken_back, fixture_teardown);
    g_test_add("/switch/direct/counts-bounded", Fixture, NULL,
               fixture_setup, test_counts_bounded, fixture_teardown);
    g_test_add_func("/switch/direct/not-asked", test_not_asked);
    g_test_add("/switch/direct/stats-reset", Fixture, NULL, fixture_setup,
               test_stats_reset, fixture_teardown);
    g_test_add_func("/switch/direct/json-unsigned", test_json_unsigned);
    g_test_add_func("/switch/direct/churn-victim", test_churn_victim);
    g_test_add_func("/switch/direct/stops-owed", test_stops_owed);
    g_test_add_func("/switch/direct/refuses-timed", test_refuses_timed);
    return g_test_run();
}
