/* SPDX-License-Identifier: MIT */
/*
 * The switch's side of the shared-memory rings (arctic/link-ring.h): an
 * NIU that offers good rings gets a WELCOME that says RINGS and its
 * packets go both ways through them, beside a port on its socket; an
 * offer that will not do (an area the NIU could shrink, an eventfd for
 * the wake-up socket, an NIU of link 1.2, a switch run with --no-rings)
 * leaves the link on its socket;
 * a ring with impossible indices, or bytes on the socket once the rings
 * carry the link, end that link alone.  With the rings comes one
 * wake-up socket per CPU for this link alone (link 1.3): a kick of any
 * one of them alone gets a packet through the sleeping switch, also when
 * two CPUs' threads are kicked at once.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "switch-internal.h"

enum { PORTS = 4, RING_NODE = 1, SOCKET_NODE = 2, PACKETS = 2000 };

typedef struct {
    TestSwitch *ts;
    TestClient *ring, *sock;
    uint32_t seq;
    uint64_t handovers_mark;    /* hand-overs when the last kick_one() began */
} Fixture;

static void start_config(Fixture *f, bool rings, bool cpu_wake)
{
    ArcticSwitchConfig config;

    arctic_switch_config_init(&config);
    config.ports = PORTS;
    config.rings = rings;
    config.cpu_wake = cpu_wake;
    config.verbose = getenv("V") != NULL;
    f->ts = test_switch_start(&config);
    f->sock = NULL;
    g_assert_cmpuint(test_client_try_connect_offer(f->ts->socket_path,
                                                   SOCKET_NODE, 8, 8,
                                                   TEST_OFFER_NONE, &f->sock),
                     ==, 0);
}

static void start(Fixture *f, bool rings)
{
    start_config(f, rings, true);
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
    start(f, true);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    test_client_free(f->ring);
    test_client_free(f->sock);
    test_switch_stop(f->ts);
}

static TestClient *connect_offer(Fixture *f, TestOffer offer)
{
    TestClient *c = NULL;

    g_assert_cmpuint(test_client_try_connect_offer(f->ts->socket_path,
                                                   RING_NODE, 8, 8, offer,
                                                   &c), ==, 0);
    return c;
}

/* One packet from @a to @b, checked, and its credit given back. */
static void one_packet(Fixture *f, TestClient *a, TestClient *b, bool high)
{
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size = test_build_packet(pkt, a->node, b->node, high, false,
                                    f->seq, f->seq % 21);
    g_autoptr(GBytes) got = NULL;
    unsigned src, dst;
    uint32_t seq;
    bool was_high;

    g_assert_true(test_client_send_packet(a, pkt, size, 2000));
    got = test_client_recv_packet(b, 2000);
    g_assert_nonnull(got);
    g_assert_true(test_packet_valid(g_bytes_get_data(got, NULL),
                                    g_bytes_get_size(got), &src, &dst, &seq,
                                    &was_high));
    g_assert_cmpuint(src, ==, a->node);
    g_assert_cmpuint(dst, ==, b->node);
    g_assert_cmpuint(seq, ==, f->seq);
    g_assert_cmpint(was_high, ==, high);
    test_client_return_credits(b, !high, high);
    f->seq++;
}

static bool port_uses_rings(Fixture *f, unsigned port)
{
    ArcticSwitchStats *st = test_switch_stats(f->ts);
    bool rings = st->port[port].rings;

    arctic_switch_stats_free(st);
    return rings;
}

/* Good rings are taken; packets cross between a ring port and a socket
 * port, both ways, at both priorities, many times round each ring. */
static void test_rings_adopted(Fixture *f, gconstpointer data)
{
    unsigned i;

    f->ring = connect_offer(f, TEST_OFFER_RINGS);
    g_assert_true(f->ring->rings);
    g_assert_false(f->sock->rings);
    g_assert_true(port_uses_rings(f, RING_NODE));
    g_assert_false(port_uses_rings(f, SOCKET_NODE));
    for (i = 0; i < PACKETS; i++) {
        one_packet(f, f->ring, f->sock, i & 1);
        one_packet(f, f->sock, f->ring, i & 2);
    }
    /* 2 * PACKETS frames of up to 128 bytes: each ring wrapped. */
    g_assert_cmpuint(f->ring->ring_out.own, >, 2 * ARCTIC_RING_DATA_SIZE);
    g_assert_cmpuint(f->ring->ring_in.own, >, 2 * ARCTIC_RING_DATA_SIZE);
}

/* Offers that will not do leave the link on its socket, working. */
static void expect_refused(Fixture *f, TestOffer offer)
{
    f->ring = connect_offer(f, offer);
    g_assert_false(f->ring->rings);
    g_assert_cmpuint(f->ring->welcome_flags, ==, 0);
    g_assert_false(port_uses_rings(f, RING_NODE));
    one_packet(f, f->ring, f->sock, false);
    one_packet(f, f->sock, f->ring, true);
}

static void test_rings_unsealed(Fixture *f, gconstpointer data)
{
    expect_refused(f, TEST_OFFER_UNSEALED);
}

static void test_rings_not_socket(Fixture *f, gconstpointer data)
{
    expect_refused(f, TEST_OFFER_NOT_SOCKET);
}

/* An NIU of link 1.2 would kick eventfds either side can block. */
static void test_rings_link_1_2(Fixture *f, gconstpointer data)
{
    expect_refused(f, TEST_OFFER_RINGS_1_2);
}

static void test_rings_switched_off(Fixture *f, gconstpointer data)
{
    test_client_free(f->sock);
    test_switch_stop(f->ts);
    start(f, false);
    expect_refused(f, TEST_OFFER_RINGS);
}

/* The link ended @why, and the socket port still works. */
static void expect_closed(Fixture *f, enum arctic_disconnect_reason why)
{
    TestClient *other = NULL;
    ArcticSwitchStats *st;

    g_assert_true(test_client_wait_closed(f->ring, 5000));
    st = test_switch_stats(f->ts);
    g_assert_cmpuint(st->port[RING_NODE].disconnects[why], ==, 1);
    g_assert_false(st->port[RING_NODE].connected);
    g_assert_true(st->port[SOCKET_NODE].connected);
    arctic_switch_stats_free(st);
    /* A new NIU takes the port and talks with the bystander. */
    g_assert_cmpuint(test_client_try_connect_offer(f->ts->socket_path,
                                                   RING_NODE, 8, 8,
                                                   TEST_OFFER_RINGS, &other),
                     ==, 0);
    one_packet(f, other, f->sock, false);
    one_packet(f, f->sock, other, false);
    test_client_free(other);
}

/* An NIU that writes a head more than a ring ahead of the switch's tail. */
static void test_rings_broken(Fixture *f, gconstpointer data)
{
    struct arctic_ring_area *area;

    f->ring = connect_offer(f, TEST_OFFER_RINGS);
    one_packet(f, f->ring, f->sock, false);
    area = f->ring->ring_area;
    area->ctl[ARCTIC_RING_TO_SWITCH].head = f->ring->ring_out.own +
                                            ARCTIC_RING_DATA_SIZE + 1;
    test_client_kick(f->ring);
    expect_closed(f, ARCTIC_DISCONNECT_BROKEN_RING);
}

/* Once the rings carry the link, the socket must carry nothing. */
static void test_rings_socket_bytes(Fixture *f, gconstpointer data)
{
    f->ring = connect_offer(f, TEST_OFFER_RINGS);
    g_assert_cmpint(send(f->ring->fd, "x", 1, MSG_NOSIGNAL), ==, 1);
    expect_closed(f, ARCTIC_DISCONNECT_UNEXPECTED_FRAME);
}

/* The per-CPU wake-up threads the switch runs: one per CPU, at most 64. */
static unsigned expected_cpu_fds(void)
{
    return CLAMP(sysconf(_SC_NPROCESSORS_CONF), 1, ARCTIC_CPU_WAKE_MAX);
}

/* Until the switch says in @c's ring that it sleeps (or 5 s pass). */
static void wait_switch_sleeps(TestClient *c)
{
    gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;

    while (!__atomic_load_n(&c->ring_out.ctl->consumer_sleeping,
                            __ATOMIC_ACQUIRE)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(100);
    }
}

/* CPU @cpu's thread's wake-ups, and the kicks handed over so far. */
static uint64_t cpu_wakeups(Fixture *f, unsigned cpu, uint64_t *handovers)
{
    ArcticSwitchStats *st = test_switch_stats(f->ts);
    uint64_t n = st->cpu_wakeups[cpu];

    g_assert_cmpuint(st->cpu_wakers, ==, expected_cpu_fds());
    if (handovers) {
        *handovers = st->cpu_handovers;
    }
    arctic_switch_stats_free(st);
    return n;
}

/*
 * Until the thread of @cpu has been woken more than @before times: true.
 * False, without waiting for it, once a kick has been handed over since
 * the previous kick_one() began: a thread that left its kick to the
 * lock's holder has its counters taken again by that holder, who may
 * find this kick there already and serve it (the packet crossed), so
 * this kick may never wake the thread (loop.c, cpu_wake_serve()).
 */
static bool wait_cpu_woken(Fixture *f, unsigned cpu, uint64_t before,
                           uint64_t mark)
{
    gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    uint64_t handovers;

    while (cpu_wakeups(f, cpu, &handovers) <= before) {
        if (handovers > mark) {
            return false;
        }
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(100);
    }
    return true;
}

/*
 * One packet from @from to @to, sent once the switch said in @from's ring
 * that it sleeps: true if @from kicked the thread of @cpu for it, once,
 * and that woke it.  False if the switch was awake again when the packet
 * went (a pass of its own: a credit deadline, the statistics asked for
 * just before): then no kick was owed and none was made; false too if a
 * hand-over meanwhile may have served the kick (wait_cpu_woken()).
 */
static bool kick_one(Fixture *f, TestClient *from, TestClient *to,
                     unsigned cpu, bool high)
{
    uint64_t handovers;
    uint64_t woken = cpu_wakeups(f, cpu, &handovers);
    uint64_t mark = f->handovers_mark;
    unsigned kicks;

    f->handovers_mark = handovers;      /* for the next kick_one() */
    from->cpu_kick = cpu;
    wait_switch_sleeps(from);
    kicks = from->kicks;
    one_packet(f, from, to, high);
    if (from->kicks == kicks) {
        return false;
    }
    g_assert_cmpuint(from->kicks, ==, kicks + 1);
    return wait_cpu_woken(f, cpu, woken, mark);
}

/*
 * An NIU on the rings gets CPU_WAKE, and kicks CPU i's thread through the
 * counter of its own area; a packet whose only kick went to one CPU's
 * thread (each in turn, the switch asleep each time) crosses the switch,
 * both ways, many times, and each kick woke the thread of that CPU (but
 * for those a hand-over may have served: wait_cpu_woken()).
 */
static void test_rings_cpu_wake(Fixture *f, gconstpointer data)
{
    enum { KICKED = 400 };
    TestClient *other = NULL;
    unsigned i, cpu, kicked = 0;

    f->ring = connect_offer(f, TEST_OFFER_RINGS);
    g_assert_cmpuint(test_client_try_connect_offer(f->ts->socket_path,
                                                   RING_NODE + 2, 8, 8,
                                                   TEST_OFFER_RINGS, &other),
                     ==, 0);
    g_assert_cmphex(f->ring->welcome_flags, ==,
                    R_ARCTIC_WELCOME_FLAGS_RINGS_MASK |
                    R_ARCTIC_WELCOME_FLAGS_CPU_WAKE_MASK);
    g_assert_true(f->ring->cpu_wake && other->cpu_wake);
    /* Packets the switch took while awake are not counted. */
    for (i = 0; kicked < KICKED; i++) {
        g_assert_cmpuint(i, <, KICKED);
        cpu = i % expected_cpu_fds();
        kicked += kick_one(f, f->ring, other, cpu, i & 1);
        kicked += kick_one(f, other, f->ring, cpu, i & 2);
    }
    g_test_message("%u packets, %u kicked", 2 * i, kicked);
    test_client_free(other);
}

/*
 * The hand-over of a kick, step by step: a thread serving a kick holds
 * the model lock; a second kick meanwhile is left to it (counted), and
 * it is told so when it lets go, once; then the lock is free.
 */
static void test_rings_kick_handover(void)
{
    struct sw_loop loop = { 0 };

    g_mutex_init(&loop.model_lock);
    g_assert_true(sw_kick_claim(&loop));
    g_assert_false(sw_kick_claim(&loop));
    g_assert_cmpuint(loop.cpu_handovers, ==, 1);
    g_assert_true(sw_kick_release(&loop));
    g_assert_false(sw_kick_release(&loop));
    g_assert_true(g_mutex_trylock(&loop.model_lock));
    g_mutex_unlock(&loop.model_lock);
    /* A kick with nobody holding the lock is served by its own thread. */
    g_assert_true(sw_kick_claim(&loop));
    g_assert_false(sw_kick_release(&loop));
    g_assert_cmpuint(loop.cpu_handovers, ==, 1);
    g_mutex_clear(&loop.model_lock);
}

/* One NIU of test_rings_cpu_wake_contended(), in a thread of its own. */
typedef struct {
    TestClient *me, *peer;
    unsigned cpu;
} ContendedSide;

/*
 * Bound to its CPU and kicking that CPU's thread: send a packet to the
 * peer, take the peer's, CONTENDED_ROUNDS rounds, both sides at once and
 * in step, so that a packet a lost kick left in a ring stays there (no
 * later round's kick can take it along) and its receiver times out.
 */
enum { CONTENDED_ROUNDS = 5000 };
static pthread_barrier_t contended_round;

static gpointer contended_side(gpointer opaque)
{
    ContendedSide *c = opaque;
    cpu_set_t set;
    unsigned i;

    CPU_ZERO(&set);
    CPU_SET(c->cpu, &set);
    g_assert_cmpint(pthread_setaffinity_np(pthread_self(), sizeof(set),
                                           &set), ==, 0);
    c->me->cpu_kick = c->cpu;
    for (i = 0; i < CONTENDED_ROUNDS; i++) {
        uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
        size_t size = test_build_packet(pkt, c->me->node, c->peer->node,
                                        false, false, i, i % 21);
        g_autoptr(GBytes) got = NULL;
        unsigned src, dst;
        uint32_t seq;
        bool high;

        g_assert_true(test_client_send_packet(c->me, pkt, size, 2000));
        got = test_client_recv_packet(c->me, 2000);
        g_assert_nonnull(got);
        g_assert_true(test_packet_valid(g_bytes_get_data(got, NULL),
                                        g_bytes_get_size(got), &src, &dst,
                                        &seq, &high));
        g_assert_cmpuint(src, ==, c->peer->node);
        g_assert_cmpuint(seq, ==, i);
        test_client_return_credits(c->me, true, false);
        /* The next round only once both packets are through. */
        pthread_barrier_wait(&contended_round);
    }
    return NULL;
}

/*
 * Two NIUs on two CPUs kick their CPUs' threads at the same moments, so
 * one thread is now and then kicked while the other holds the model
 * lock: it leaves that kick to the holder (cpu_handovers), and every
 * packet still arrives (each side waits at most 2 s for each).
 */
static void test_rings_cpu_wake_contended(Fixture *f, gconstpointer data)
{
    TestClient *other = NULL;
    ContendedSide side[2];
    GThread *thread[2];
    ArcticSwitchStats *st;
    unsigned i;

    if (expected_cpu_fds() < 2) {
        g_test_skip("one CPU: no other CPU's thread to contend with");
        return;
    }
    f->ring = connect_offer(f, TEST_OFFER_RINGS);
    g_assert_cmpuint(test_client_try_connect_offer(f->ts->socket_path,
                                                   RING_NODE + 2, 8, 8,
                                                   TEST_OFFER_RINGS, &other),
                     ==, 0);
    pthread_barrier_init(&contended_round, NULL, 2);
    side[0] = (ContendedSide) { f->ring, other, 0 };
    side[1] = (ContendedSide) { other, f->ring, 1 };
    for (i = 0; i < 2; i++) {
        thread[i] = g_thread_new("contended", contended_side, &side[i]);
    }
    for (i = 0; i < 2; i++) {
        g_thread_join(thread[i]);
    }
    pthread_barrier_destroy(&contended_round);
    st = test_switch_stats(f->ts);
    /* Some 60-110 on a quiet 2-CPU host; none is no failure. */
    g_test_message("kicks handed over: %" G_GUINT64_FORMAT
                   " (wake-ups cpu0=%" G_GUINT64_FORMAT " cpu1=%"
                   G_GUINT64_FORMAT ")", st->cpu_handovers,
                   st->cpu_wakeups[0], st->cpu_wakeups[1]);
    arctic_switch_stats_free(st);
    test_client_free(other);
}

/*
 * A switch run with --no-cpu-wake: rings alone, and no per-CPU thread is
 * woken (there are @wakers of them).
 */
static void expect_rings_alone(Fixture *f, TestOffer offer, unsigned wakers)
{
    ArcticSwitchStats *st;
    unsigned i;

    f->ring = connect_offer(f, offer);
    g_assert_cmphex(f->ring->welcome_flags, ==,
                    R_ARCTIC_WELCOME_FLAGS_RINGS_MASK);
    g_assert_false(f->ring->cpu_wake);
    for (i = 0; i < 100; i++) {
        one_packet(f, f->ring, f->sock, false);
        one_packet(f, f->sock, f->ring, true);
    }
    st = test_switch_stats(f->ts);
    g_assert_cmpuint(st->cpu_wakers, ==, wakers);
    for (i = 0; i < ARCTIC_CPU_WAKE_MAX; i++) {
        g_assert_cmpuint(st->cpu_wakeups[i], ==, 0);
    }
    arctic_switch_stats_free(st);
}

static void test_rings_cpu_wake_off(Fixture *f, gconstpointer data)
{
    test_client_free(f->sock);
    test_switch_stop(f->ts);
    start_config(f, true, false);
    expect_rings_alone(f, TEST_OFFER_RINGS, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
#define ADD(path, fn) \
    g_test_add("/switch/rings/" path, Fixture, NULL, fixture_setup, fn, \
               fixture_teardown)
    ADD("adopted", test_rings_adopted);
    ADD("refused-unsealed", test_rings_unsealed);
    ADD("refused-not-socket", test_rings_not_socket);
    ADD("refused-link-1-2", test_rings_link_1_2);
    ADD("refused-switched-off", test_rings_switched_off);
    ADD("cpu-wake", test_rings_cpu_wake);
    ADD("cpu-wake-contended", test_rings_cpu_wake_contended);
    g_test_add_func("/switch/rings/kick-handover", test_rings_kick_handover);
    ADD("cpu-wake-off", test_rings_cpu_wake_off);
    ADD("broken", test_rings_broken);
    ADD("socket-bytes", test_rings_socket_bytes);
#undef ADD
    return g_test_run();
}
