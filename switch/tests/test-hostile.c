/* SPDX-License-Identifier: MIT */
/*
 * The switch against hostile parties (docs/switch.md, "What the switch
 * promises"): an NIU process that makes its end of its wake-up sockets
 * blocking, reads everything it holds, floods its ring or its kicks,
 * offers rings and vanishes, sends descriptors by the hundred or packets
 * that name another source; idle control clients; a process out of
 * descriptors; and strangers over TCP, who must prove the cluster's key.
 * Each test plays the hostile party itself through the harness and checks
 * what the switch promises: every other link keeps working, nothing
 * leaks, nothing blocks, and nobody joins or speaks for another node.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "harness.h"
#include "switch-internal.h"

enum { PORTS = 8, D = 0, A = 1, B = 2, C = 3, ROUND_TRIPS = 300 };

/* --- helpers ----------------------------------------------------------- */

/* Descriptors this process holds (the embedded switch's among them). */
static unsigned open_fds(void)
{
    GDir *dir = g_dir_open("/proc/self/fd", 0, NULL);
    unsigned n = 0;

    g_assert_nonnull(dir);
    while (g_dir_read_name(dir)) {
        n++;
    }
    g_dir_close(dir);
    return n;
}

/* Mappings of the harness's ring areas in this process. */
static unsigned ring_mappings(void)
{
    g_autofree char *maps = NULL;
    const char *p;
    unsigned n = 0;

    g_assert_true(g_file_get_contents("/proc/self/maps", &maps, NULL, NULL));
    for (p = maps; (p = strstr(p, "memfd:arctic-test-rings")); p++) {
        n++;
    }
    return n;
}

/* Until open_fds() is at most @limit (the switch closes lazily). */
static unsigned wait_fds_at_most(unsigned limit)
{
    gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    unsigned n;

    while ((n = open_fds()) > limit && g_get_monotonic_time() < deadline) {
        g_usleep(10 * 1000);
    }
    return n;
}

/*
 * @rounds round trips between @a and @b, each packet's credit given back;
 * false if one did not come within 5 s.
 */
static bool ping_pong(TestClient *a, TestClient *b, unsigned rounds)
{
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    unsigned i;

    for (i = 0; i < rounds; i++) {
        TestClient *from = i & 1 ? b : a, *to = i & 1 ? a : b;
        size_t size = test_build_packet(pkt, from->node, to->node, i & 2,
                                        false, i, i % 21);
        g_autoptr(GBytes) got = NULL;

        if (!test_client_send_packet(from, pkt, size, 5000)) {
            return false;
        }
        got = test_client_recv_packet(to, 5000);
        if (!got) {
            return false;
        }
        g_assert_cmpmem(g_bytes_get_data(got, NULL), g_bytes_get_size(got),
                        pkt, size);
        test_client_return_credits(to, !(i & 2), !!(i & 2));
    }
    return true;
}

static TestSwitch *start_switch(void)
{
    ArcticSwitchConfig config;

    arctic_switch_config_init(&config);
    config.ports = PORTS;
    return test_switch_start(&config);
}

static TestClient *connect_rings(TestSwitch *ts, unsigned node)
{
    TestClient *c = NULL;

    g_assert_cmpuint(test_client_try_connect_offer(ts->socket_path, node, 8,
                                                   8, TEST_OFFER_RINGS, &c),
                     ==, 0);
    g_assert_true(c->rings);
    return c;
}

/* A switch with A, B and C on rings, and an attacker playing A. */
typedef struct {
    TestSwitch *ts;
    TestClient *a, *b, *c;
} ThreeRings;

static void three_rings_start(ThreeRings *t)
{
    t->ts = start_switch();
    t->a = connect_rings(t->ts, A);
    t->b = connect_rings(t->ts, B);
    t->c = connect_rings(t->ts, C);
}

static void three_rings_stop(ThreeRings *t)
{
    test_client_free(t->a);
    test_client_free(t->b);
    test_client_free(t->c);
    test_switch_stop(t->ts);
}

/* A control request answered within 5 s: its reply's "ok". */
static bool control_ok(const char *path, const char *line)
{
    int fd = test_connect_unix(path);
    GString *reply = g_string_new(NULL);
    gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    char buf[4096];
    bool ok;

    g_assert_cmpint(send(fd, line, strlen(line), MSG_NOSIGNAL), ==,
                    (ssize_t)strlen(line));
    while (!strchr(reply->str, '\n') && g_get_monotonic_time() < deadline) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        ssize_t n;

        if (poll(&pfd, 1, 100) <= 0) {
            continue;
        }
        n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) {
            break;
        }
        g_string_append_len(reply, buf, n);
    }
    close(fd);
    ok = strstr(reply->str, "\"ok\" : true") || strstr(reply->str,
                                                       "\"ok\":true");
    g_string_free(reply, TRUE);
    return ok;
}

static void make_blocking(int fd)
{
    g_assert_cmpint(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK), ==,
                    0);
}

/* A thread that plays the hostile side of one client until told to stop. */
typedef struct {
    TestClient *c;
    volatile int stop;
    uint64_t count;
} Attacker;

/* --- 1. kicks that cannot block ---------------------------------------- */

/*
 * The NIU of A makes its end of every wake-up socket blocking, never reads
 * them nor its ring, and says it sleeps again as soon as the switch takes
 * the flag: each packet to it costs the switch a kick until the socket is
 * full.  With link 1.2's shared eventfds the switch's write() then
 * blocked, holding the model lock; kicks are send(MSG_DONTWAIT) now: B and
 * C keep talking, and the control socket answers.
 */
static gpointer always_sleeping(gpointer opaque)
{
    Attacker *at = opaque;

    while (!at->stop) {
        __atomic_store_n(&at->c->ring_in.ctl->consumer_sleeping, 1,
                         __ATOMIC_RELEASE);
        at->count++;
    }
    return NULL;
}

static void test_blocking_wake_end(void)
{
    TestSwitch *ts = start_switch();
    TestClient *a = connect_rings(ts, A);
    TestClient *b = test_client_connect(ts->socket_path, B, 8, 8);
    TestClient *c = test_client_connect(ts->socket_path, C, 8, 8);
    TestClient *d = test_client_connect(ts->socket_path, D, 8, 8);
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    Attacker at = { .c = a };
    GThread *thread;
    unsigned i;

    make_blocking(a->wake_fd);
    /* As many packets as the switch will take for A: its ring fills. */
    test_client_return_credits(a, ARCTIC_LINK_MAX_CREDITS - 8,
                               ARCTIC_LINK_MAX_CREDITS - 8);
    thread = g_thread_new("always-sleeping", always_sleeping, &at);
    for (i = 0; i < 2000; i++) {
        size_t size = test_build_packet(pkt, D, A, false, false, i, 20);

        /* Sent until D's credits stop coming back: A's ring is full. */
        if (!test_client_send_packet(d, pkt, size, 200)) {
            break;
        }
    }
    g_test_message("%u packets sent towards the hostile NIU", i);
    g_assert_cmpuint(i, >, 300);
    g_assert_true(ping_pong(c, b, ROUND_TRIPS));
    g_assert_true(control_ok(ts->control_path, "{\"command\":\"stats\"}\n"));
    at.stop = 1;
    g_thread_join(thread);
    test_client_free(a);
    test_client_free(b);
    test_client_free(c);
    test_client_free(d);
    test_switch_stop(ts);
}

/* --- 2. wake-ups nobody else holds ------------------------------------- */

/*
 * Reads everything its client's wake-up socket holds, as fast as it can,
 * and waits on its own per-CPU kick counters as the switch does, to catch
 * a FUTEX_WAKE meant for the switch.
 */
static gpointer thief(gpointer opaque)
{
    Attacker *at = opaque;
    struct arctic_ring_area *area = at->c->ring_area;
    struct timespec tick = { .tv_nsec = 100 * 1000 };
    char buf[256];
    unsigned cpu = 0;

    while (!at->stop) {
        uint32_t *word = &area->kicks.cpu[cpu++ % ARCTIC_CPU_WAKE_MAX];

        at->count += recv(at->c->wake_fd, buf, sizeof(buf), MSG_DONTWAIT) > 0;
        at->count += syscall(SYS_futex, word, FUTEX_WAIT,
                             __atomic_load_n(word, __ATOMIC_ACQUIRE), &tick,
                             NULL, 0) == 0;
    }
    return NULL;
}

/*
 * The NIU of A reads every wake-up object it holds, all the time, and
 * makes its socket blocking: with link 1.2 it held the switch's per-CPU
 * eventfds, shared by every NIU, stole the kicks of B and C and stalled
 * them.  Now a link's wake-ups are its own (its socket pair, the counters
 * in its area), and B and C, on rings, kick a sleeping switch through
 * theirs.
 */
static void test_steal_wakeups(void)
{
    ThreeRings t;
    Attacker at;
    GThread *thread;

    three_rings_start(&t);
    at = (Attacker) { .c = t.a };
    g_assert_true(t.b->cpu_wake && t.c->cpu_wake);
    make_blocking(t.a->wake_fd);
    thread = g_thread_new("thief", thief, &at);
    g_assert_true(ping_pong(t.b, t.c, ROUND_TRIPS));
    at.stop = 1;
    g_thread_join(thread);
    g_test_message("the thief read %" G_GUINT64_FORMAT " times", at.count);
    three_rings_stop(&t);
}

/* --- 3. offers of the vanished ----------------------------------------- */

/*
 * An NIU says HELLO with rings and closes at once, 200 times: the switch
 * adopts the area, cannot send the WELCOME, and must still let go of the
 * mapping and every descriptor (it kept them all before: 64 MiB areas
 * made that a gigabyte of shared memory).
 */
static void test_offer_and_close(void)
{
    TestSwitch *ts = start_switch();
    unsigned fds_before, maps_before, i;

    fds_before = open_fds();
    maps_before = ring_mappings();
    for (i = 0; i < 200; i++) {
        TestClient *c = test_client_hello(test_connect_unix(ts->socket_path),
                                          A, 8, 8, TEST_OFFER_RINGS,
                                          ARCTIC_LINK_VERSION_MINOR);

        test_client_free(c);
    }
    g_assert_cmpuint(wait_fds_at_most(fds_before), <=, fds_before);
    g_assert_cmpuint(ring_mappings(), <=, maps_before);
    test_switch_stop(ts);
}

/* --- 4. descriptors by the hundred ------------------------------------- */

/*
 * Frames sent with 1 to 253 descriptors attached, on a link already up:
 * the switch keeps none of them (it leaked one of each message of 8 or
 * more, until accept() failed for want of descriptors).
 */
static void test_many_fds(void)
{
    static const unsigned counts[] = { 1, 2, 3, 7, 8, 9, 16, 64, 253 };
    TestSwitch *ts = start_switch();
    TestClient *a = test_client_connect(ts->socket_path, A, 8, 8);
    TestClient *b = test_client_connect(ts->socket_path, B, 8, 8);
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_CREDIT_SIZE] = { 0 };
    int fds[SW_FDS_MAX];
    unsigned fds_before, i, k;

    arctic_frame_header_encode(frame, ARCTIC_FRAME_CREDIT, ARCTIC_CREDIT_SIZE);
    for (k = 0; k < SW_FDS_MAX; k++) {
        fds[k] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        g_assert_cmpint(fds[k], >=, 0);
    }
    fds_before = open_fds();
    for (i = 0; i < 300; i++) {
        ssize_t n;

        /* The kernel bounds descriptors in flight: wait for the switch. */
        while ((n = sw_send_fds(a->fd, frame, sizeof(frame), fds,
                                counts[i % G_N_ELEMENTS(counts)])) < 0 &&
               (errno == EAGAIN || errno == ETOOMANYREFS)) {
            g_usleep(1000);
        }
        g_assert_cmpint(n, ==, sizeof(frame));
    }
    /* Every frame was taken before this round trip comes back. */
    g_assert_true(ping_pong(a, b, 2));
    g_assert_cmpuint(wait_fds_at_most(fds_before), <=, fds_before);
    for (k = 0; k < SW_FDS_MAX; k++) {
        close(fds[k]);
    }
    test_client_free(a);
    test_client_free(b);
    test_switch_stop(ts);
}

/* --- 5. out of descriptors --------------------------------------------- */

static int thread_stat_try(const char *name);

/*
 * The stat file of this process's thread named @name, opened now: read
 * later with thread_cpu_ns() when no descriptor may be left to open it.
 */
static int thread_stat_open(const char *name)
{
    gint64 deadline = g_get_monotonic_time() + G_USEC_PER_SEC;
    int fd;

    /* The thread names itself once it runs. */
    while ((fd = thread_stat_try(name)) < 0 &&
           g_get_monotonic_time() < deadline) {
        g_usleep(1000);
    }
    g_assert_cmpint(fd, >=, 0);
    return fd;
}

static int thread_stat_try(const char *name)
{
    GDir *dir = g_dir_open("/proc/self/task", 0, NULL);
    const char *tid;
    int fd = -1;

    while (fd < 0 && (tid = g_dir_read_name(dir))) {
        g_autofree char *path = g_strdup_printf("/proc/self/task/%s/stat",
                                                tid);
        g_autofree char *stat = NULL;

        g_autofree char *comm = g_strdup_printf("(%s)", name);

        if (g_file_get_contents(path, &stat, NULL, NULL) &&
            strstr(stat, comm)) {
            fd = open(path, O_RDONLY | O_CLOEXEC);
        }
    }
    g_dir_close(dir);
    return fd;
}

/* CPU time (ns) of the thread whose stat file @fd is. */
static uint64_t thread_cpu_ns(int fd)
{
    char stat[1024], *close_paren;
    unsigned long utime, stime;
    ssize_t n = pread(fd, stat, sizeof(stat) - 1, 0);

    g_assert_cmpint(n, >, 0);
    stat[n] = 0;
    close_paren = strrchr(stat, ')');
    g_assert_nonnull(close_paren);
    /* Fields after the name: state is 3rd, utime 14th, stime 15th. */
    g_assert_cmpint(sscanf(close_paren + 2,
                           "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                           "%lu %lu", &utime, &stime), ==, 2);
    return (uint64_t)(utime + stime) * (1000000000ull / sysconf(_SC_CLK_TCK));
}

/*
 * The switch runs out of descriptors: a connection it cannot accept is
 * taken with the descriptor kept in reserve and closed (counted), instead
 * of waking the level-triggered listener for ever (86 % of a core, and
 * the control socket unanswered); once descriptors are free, NIUs join
 * again.
 */
static void out_of_fds_child(void)
{
    TestSwitch *ts = start_switch();
    struct rlimit lim;
    GPtrArray *held = g_ptr_array_new();
    TestClient *a, *b;
    ArcticSwitchStats *st;
    uint64_t cpu0, cpu1;
    unsigned i;
    int stat_fd = thread_stat_open("test-switch");

    a = test_client_connect(ts->socket_path, A, 8, 8);
    /*
     * The switch shares this process's descriptor limit.  Our 40 sockets
     * exist before the limit comes down, so only the switch's accepts can
     * run out: it has room for 8 more, and must refuse the others.  (With
     * the sockets made after it, which side ran out first was a race, and
     * when ours did the switch never refused.)
     */
    for (i = 0; i < 40; i++) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        g_assert_cmpint(fd, >=, 0);
        g_ptr_array_add(held, GINT_TO_POINTER(fd));
    }
    g_assert_cmpint(getrlimit(RLIMIT_NOFILE, &lim), ==, 0);
    lim.rlim_cur = open_fds() + 8;
    g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &lim), ==, 0);
    for (i = 0; i < held->len; i++) {
        struct sockaddr_un addr = { .sun_family = AF_UNIX };

        g_strlcpy(addr.sun_path, ts->socket_path, sizeof(addr.sun_path));
        /* The listener's backlog (128) takes them all. */
        g_assert_cmpint(connect(GPOINTER_TO_INT(g_ptr_array_index(held, i)),
                                (struct sockaddr *)&addr, sizeof(addr)),
                        ==, 0);
    }
    g_usleep(200 * 1000);
    cpu0 = thread_cpu_ns(stat_fd);
    g_usleep(1000 * 1000);
    cpu1 = thread_cpu_ns(stat_fd);
    g_test_message("%u connections held, switch thread %.0f ms of CPU in "
                   "1 s", held->len, (cpu1 - cpu0) / 1e6);
    /* A spinning loop takes nearly all of that second. */
    g_assert_cmpuint(cpu1 - cpu0, <, 300 * 1000 * 1000ull);
    st = test_switch_stats(ts);
    g_assert_cmpuint(st->refused_no_fd, >, 0);
    arctic_switch_stats_free(st);
    for (i = 0; i < held->len; i++) {
        close(GPOINTER_TO_INT(g_ptr_array_index(held, i)));
    }
    g_ptr_array_free(held, TRUE);
    lim.rlim_cur = lim.rlim_max;
    g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &lim), ==, 0);
    close(stat_fd);
    g_usleep(100 * 1000);
    b = test_client_connect(ts->socket_path, B, 8, 8);
    g_assert_true(ping_pong(a, b, 10));
    test_client_free(a);
    test_client_free(b);
    test_switch_stop(ts);
}

static void test_out_of_fds(void)
{
    if (g_test_subprocess()) {
        out_of_fds_child();
        return;
    }
    g_test_trap_subprocess(NULL, 60 * G_USEC_PER_SEC,
                           G_TEST_SUBPROCESS_INHERIT_STDERR);
    g_test_trap_assert_passed();
}

/* --- 6. a packet that names another source ----------------------------- */

/*
 * A's NIU sends a packet whose end-to-end header says it comes from B:
 * the switch, which knows the link it came in on, drops it (forged_source)
 * and returns its credit; A's honest packets still go.
 */
static void test_forged_source(void)
{
    TestSwitch *ts = start_switch();
    TestClient *a = test_client_connect(ts->socket_path, A, 8, 8);
    TestClient *c = test_client_connect(ts->socket_path, C, 8, 8);
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    ArcticSwitchStats *st;
    size_t size;
    unsigned i;

    for (i = 0; i < 20; i++) {
        /* Route from A, header from B: more than A's 8 credits, so each
         * credit must come back. */
        size = test_build_packet(pkt, B, C, false, false, i, 3);
        arctic_put_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET,
                        arctic_route_entry(A, C, false, false) & 0xffff);
        arctic_put_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET + 4,
                        (arctic_route_entry(A, C, false, false) &
                         0xffff0000) |
                        (arctic_get_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET + 4) &
                         0xffff));
        arctic_wire_seal(pkt, size);
        g_assert_true(test_client_send_packet(a, pkt, size, 2000));
    }
    g_assert_null(test_client_recv_packet(c, 300));
    st = test_switch_stats(ts);
    g_assert_cmpuint(st->port[A].prio[0].drops[ARCTIC_DROP_FORGED_SOURCE], ==,
                     20);
    arctic_switch_stats_free(st);
    g_assert_true(ping_pong(a, c, 4));
    test_client_free(a);
    test_client_free(c);
    test_switch_stop(ts);
}

/* --- 7. a ring that is never empty ------------------------------------- */

/* Keeps A's ring full of CREDIT(0,0) frames, which need no credit. */
static gpointer ring_flooder(gpointer opaque)
{
    Attacker *at = opaque;
    g_autofree uint8_t *frames = g_malloc(ARCTIC_RING_DATA_SIZE);
    size_t off;

    for (off = 0; off + ARCTIC_LINK_HEADER_SIZE + ARCTIC_CREDIT_SIZE <=
                  ARCTIC_RING_DATA_SIZE;
         off += ARCTIC_LINK_HEADER_SIZE + ARCTIC_CREDIT_SIZE) {
        arctic_frame_header_encode(frames + off, ARCTIC_FRAME_CREDIT,
                                   ARCTIC_CREDIT_SIZE);
        arctic_put_le32(frames + off + ARCTIC_LINK_HEADER_SIZE, 0);
    }
    while (!at->stop) {
        /* Whole frames only (the only producer: the room can only grow). */
        size_t room = arctic_ring_room(&at->c->ring_out);
        size_t want = MIN(room, off) / (ARCTIC_LINK_HEADER_SIZE +
                                        ARCTIC_CREDIT_SIZE) *
                      (ARCTIC_LINK_HEADER_SIZE + ARCTIC_CREDIT_SIZE);

        if (!want) {
            continue;
        }
        g_assert_cmpuint(arctic_ring_write(&at->c->ring_out, frames, want),
                         ==, want);
        if (arctic_ring_wake_consumer(&at->c->ring_out)) {
            sw_kick(at->c->wake_fd);
        }
        at->count += want;
    }
    return NULL;
}

/*
 * A's ring always has bytes: the switch once read it until it was empty,
 * which it seldom was, and B and C (one on rings, one on its socket)
 * waited behind it: their round trips took 360 times as long beside the
 * flood as without it (5.96 s against 16.5 ms for 300).  Each ring gets
 * one read per pass now.  The bound is a share, not a speed: 20 times
 * the same round trips' time without the flood, in the same run, plus
 * a second for a busy host.
 */
static void test_ring_flood(void)
{
    TestSwitch *ts = start_switch();
    TestClient *a = connect_rings(ts, A);
    TestClient *b = connect_rings(ts, B);
    TestClient *c = test_client_connect(ts->socket_path, C, 8, 8);
    Attacker at = { .c = a };
    GThread *thread;
    gint64 t0, alone, flooded;

    t0 = g_get_monotonic_time();
    g_assert_true(ping_pong(b, c, ROUND_TRIPS));
    alone = g_get_monotonic_time() - t0;
    thread = g_thread_new("ring-flooder", ring_flooder, &at);
    t0 = g_get_monotonic_time();
    g_assert_true(ping_pong(b, c, ROUND_TRIPS));
    flooded = g_get_monotonic_time() - t0;
    g_assert_true(control_ok(ts->control_path, "{\"command\":\"info\"}\n"));
    g_test_message("%u round trips in %.1f ms alone, %.1f ms beside %"
                   G_GUINT64_FORMAT " bytes of flood", ROUND_TRIPS,
                   alone / 1e3, flooded / 1e3, at.count);
    g_assert_cmpint(flooded, <, 20 * alone + G_USEC_PER_SEC);
    at.stop = 1;
    g_thread_join(thread);
    test_client_free(a);
    test_client_free(b);
    test_client_free(c);
    test_switch_stop(ts);
}

/* --- 8. kicks nobody asked for ----------------------------------------- */

/*
 * A kicks the switch through every socket it holds, as fast as it can,
 * never asked to: beyond SW_KICK_SLACK kicks more than the switch's sleep
 * flags allowed, its sockets are ignored for a while (kick_floods), and B
 * and C go on meanwhile.
 */
static gpointer kick_flooder(gpointer opaque)
{
    Attacker *at = opaque;
    unsigned i;

    while (!at->stop) {
        sw_kick(at->c->wake_fd);
        for (i = 0; i < ARCTIC_CPU_WAKE_MAX; i++) {
            test_kick_cpu(at->c, i);
        }
        at->count++;
    }
    return NULL;
}

/* @port's kick floods counted so far. */
static uint64_t kick_floods_of(TestSwitch *ts, int port)
{
    ArcticSwitchStats *st = test_switch_stats(ts);
    uint64_t n = st->port[port].kick_floods;

    arctic_switch_stats_free(st);
    return n;
}

/*
 * The flooder needs the CPU to flood: on a busy host one exchange of
 * ROUND_TRIPS can end before it kicked SW_KICK_SLACK times, so B and C
 * go on exchanging until the switch muted A (at most 10 s).
 */
static void test_kick_flood(void)
{
    ThreeRings t;
    Attacker at;
    GThread *thread;
    ArcticSwitchStats *st;
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    unsigned rounds = 0;

    three_rings_start(&t);
    at = (Attacker) { .c = t.a };
    thread = g_thread_new("kick-flooder", kick_flooder, &at);
    do {
        g_assert_true(ping_pong(t.b, t.c, ROUND_TRIPS));
        rounds++;
    } while (!kick_floods_of(t.ts, A) && g_get_monotonic_time() < deadline);
    at.stop = 1;
    g_thread_join(thread);
    st = test_switch_stats(t.ts);
    g_test_message("%" G_GUINT64_FORMAT " rounds of kicks, %" G_GUINT64_FORMAT
                   " floods, %u exchanges of %u round trips meanwhile",
                   at.count, st->port[A].kick_floods, rounds, ROUND_TRIPS);
    g_assert_cmpuint(st->port[A].kick_floods, >, 0);
    g_assert_cmpuint(st->port[B].kick_floods, ==, 0);
    g_assert_cmpuint(st->port[C].kick_floods, ==, 0);
    arctic_switch_stats_free(st);
    /* A's link itself still works once it stops. */
    g_assert_true(ping_pong(t.a, t.b, 4));
    three_rings_stop(&t);
}

/*
 * A wakes the switch's CPU threads through every kick counter in its
 * area (FUTEX_WAKE, a shared futex) without ever raising one: nothing
 * to read, nothing counted as a kick, and each wake-up cost the switch a
 * pass over every ring (179 k in 3 s, 54 % of a core, never muted).
 */
static gpointer bare_waker(gpointer opaque)
{
    Attacker *at = opaque;
    struct arctic_ring_area *area = at->c->ring_area;
    unsigned i;

    while (!at->stop) {
        for (i = 0; i < ARCTIC_CPU_WAKE_MAX; i++) {
            at->count += syscall(SYS_futex, &area->kicks.cpu[i], FUTEX_WAKE,
                                 INT_MAX, NULL, NULL, 0) > 0;
        }
    }
    return NULL;
}

/* CPU time (ns) of the switch's threads: its loop and its wake-ups. */
static uint64_t switch_threads_cpu_ns(void)
{
    GDir *dir = g_dir_open("/proc/self/task", 0, NULL);
    const char *tid;
    uint64_t ns = 0;

    while ((tid = g_dir_read_name(dir))) {
        g_autofree char *path = g_strdup_printf("/proc/self/task/%s/stat",
                                                tid);
        g_autofree char *stat = NULL;
        int fd;

        if (!g_file_get_contents(path, &stat, NULL, NULL) ||
            (!strstr(stat, "(test-switch)") &&
             !strstr(stat, "(arctic-wake)"))) {
            continue;
        }
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ns += thread_cpu_ns(fd);
            close(fd);
        }
    }
    g_dir_close(dir);
    return ns;
}

/*
 * Wake-ups that raised no counter count against the link whose word
 * woke the thread: beyond SW_KICK_SLACK more of them than its kicks, it
 * is muted as a kick flood is (kick_floods), and the flood costs the
 * switch's threads a bounded share of a core (under 10 %, where it took
 * 54 %); B and C go on meanwhile.
 */
static void test_bare_wake_flood(void)
{
    ThreeRings t;
    Attacker at;
    GThread *thread;
    ArcticSwitchStats *st;
    uint64_t cpu0, cpu1;
    gint64 t0, t1;

    three_rings_start(&t);
    g_assert_true(t.a->cpu_wake);
    at = (Attacker) { .c = t.a };
    thread = g_thread_new("bare-waker", bare_waker, &at);
    g_usleep(100 * 1000);
    cpu0 = switch_threads_cpu_ns();
    t0 = g_get_monotonic_time();
    g_usleep(2 * G_USEC_PER_SEC);
    cpu1 = switch_threads_cpu_ns();
    t1 = g_get_monotonic_time();
    g_assert_true(ping_pong(t.b, t.c, ROUND_TRIPS));
    at.stop = 1;
    g_thread_join(thread);
    st = test_switch_stats(t.ts);
    g_test_message("%" G_GUINT64_FORMAT " wake-ups that woke a thread, %"
                   G_GUINT64_FORMAT " mutes; the switch's threads took "
                   "%.0f ms of CPU in %.0f ms", at.count,
                   st->port[A].kick_floods, (cpu1 - cpu0) / 1e6,
                   (t1 - t0) / 1e3);
    g_assert_cmpuint(st->port[A].kick_floods, >, 0);
    g_assert_cmpuint(st->port[B].kick_floods, ==, 0);
    g_assert_cmpuint(st->port[C].kick_floods, ==, 0);
    g_assert_cmpuint(cpu1 - cpu0, <, (uint64_t)(t1 - t0) * 1000 / 10);
    arctic_switch_stats_free(st);
    /* A's link itself still works once it stops. */
    g_assert_true(ping_pong(t.a, t.b, 4));
    three_rings_stop(&t);
}

/* --- 9. control clients that say nothing -------------------------------- */

/*
 * 16 control clients connect and stay silent: a 17th is still answered
 * (it was closed at once before), and the one quiet longest made room.
 */
static void test_control_idle_clients(void)
{
    TestSwitch *ts = start_switch();
    int idle[16];
    char byte;
    unsigned i;

    for (i = 0; i < G_N_ELEMENTS(idle); i++) {
        idle[i] = test_connect_unix(ts->control_path);
        /* Accepted in this order: a request each would say so. */
        g_usleep(2000);
    }
    g_assert_true(control_ok(ts->control_path, "{\"command\":\"info\"}\n"));
    /* The first one's socket ends; the last one's is still open. */
    g_assert_cmpint(recv(idle[0], &byte, 1, 0), ==, 0);
    g_assert_cmpint(recv(idle[15], &byte, 1, MSG_DONTWAIT), ==, -1);
    g_assert_cmpint(errno, ==, EAGAIN);
    for (i = 0; i < G_N_ELEMENTS(idle); i++) {
        close(idle[i]);
    }
    test_switch_stop(ts);
}

/* --- 10. strangers over TCP -------------------------------------------- */

static const char test_key[] = "the cluster's key, 32 bytes long";

static TestSwitch *start_tcp_switch(int *port)
{
    ArcticSwitchConfig config;
    TestSwitch *ts;

    arctic_switch_config_init(&config);
    config.ports = PORTS;
    config.tcp_address = ":0";
    config.secret = (const uint8_t *)test_key;
    config.secret_len = strlen(test_key);
    config.handshake_timeout_ms = 500;
    ts = test_switch_start(&config);
    *port = arctic_switch_tcp_port(ts->sw);
    g_assert_cmpint(*port, >, 0);
    return ts;
}

/* What the switch answers @c's HELLO with, until it is a WELCOME, a
 * REJECT (its reason in *@reason) or the end. */
static uint16_t handshake_end(TestClient *c, uint32_t *reason)
{
    uint8_t body[ARCTIC_LINK_MAX_BODY];
    uint16_t type = 0;
    gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;

    while (!type && !c->closed && g_get_monotonic_time() < deadline) {
        test_client_read(c, 100, &type, body);
    }
    *reason = type == ARCTIC_FRAME_REJECT ? arctic_get_le32(body) : 0;
    return type;
}

/* The right key joins; the switch proves it knows it (harness.c). */
static void test_auth_good(void)
{
    int port;
    TestSwitch *ts = start_tcp_switch(&port);
    TestClient *c = NULL;

    test_auth_key = g_bytes_new_static(test_key, strlen(test_key));
    g_assert_cmpuint(test_client_try_connect_fd(test_connect_tcp(port), A, 8,
                                                8, TEST_OFFER_NONE, &c),
                     ==, 0);
    g_assert_true(c->challenged && c->proved);
    g_clear_pointer(&test_auth_key, g_bytes_unref);
    test_client_free(c);
    test_switch_stop(ts);
}

/* A wrong key, no answer, another frame instead, an old NIU: no port. */
static void test_auth_refused(void)
{
    int port;
    TestSwitch *ts = start_tcp_switch(&port);
    TestClient *c;
    ArcticSwitchStats *st;
    uint8_t pkt[ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MAX_SIZE];
    uint32_t reason;

    test_auth_key = g_bytes_new_static("not the cluster's key, at all",
                                       strlen("not the cluster's key, at "
                                              "all"));
    c = test_client_hello(test_connect_tcp(port), A, 8, 8, TEST_OFFER_NONE,
                          ARCTIC_LINK_VERSION_MINOR);
    g_assert_cmpuint(handshake_end(c, &reason), ==, ARCTIC_FRAME_REJECT);
    g_assert_cmpuint(reason, ==, ARCTIC_REJECT_AUTH);
    g_assert_false(c->proved);
    test_client_free(c);
    g_clear_pointer(&test_auth_key, g_bytes_unref);

    /* No key: challenged, silent, closed by the handshake timeout. */
    c = test_client_hello(test_connect_tcp(port), A, 8, 8, TEST_OFFER_NONE,
                          ARCTIC_LINK_VERSION_MINOR);
    g_assert_cmpuint(handshake_end(c, &reason), ==, 0);
    g_assert_true(c->challenged && c->closed);
    test_client_free(c);

    /* A packet where the answer belongs. */
    c = test_client_hello(test_connect_tcp(port), A, 8, 8, TEST_OFFER_NONE,
                          ARCTIC_LINK_VERSION_MINOR);
    while (!c->challenged && test_client_read(c, 1000, NULL, NULL)) {
    }
    arctic_packet_frame_encode(pkt, 0, ARCTIC_WIRE_MIN_SIZE);
    memset(pkt + ARCTIC_LINK_HEADER_SIZE, 0, ARCTIC_WIRE_MIN_SIZE);
    test_client_write(c, pkt, ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MIN_SIZE);
    g_assert_cmpuint(handshake_end(c, &reason), ==, ARCTIC_FRAME_REJECT);
    g_assert_cmpuint(reason, ==, ARCTIC_REJECT_AUTH);
    test_client_free(c);

    /* An NIU of link 1.2 cannot answer. */
    c = test_client_hello(test_connect_tcp(port), A, 8, 8, TEST_OFFER_NONE,
                          2);
    g_assert_cmpuint(handshake_end(c, &reason), ==, ARCTIC_FRAME_REJECT);
    g_assert_cmpuint(reason, ==, ARCTIC_REJECT_AUTH);
    test_client_free(c);

    st = test_switch_stats(ts);
    g_assert_cmpuint(st->auth_failures, ==, 1);
    g_assert_cmpuint(st->port[A].connects, ==, 0);
    arctic_switch_stats_free(st);
    test_switch_stop(ts);
}

/*
 * An answer recorded from one connection, replayed on another with the
 * same HELLO: the new challenge's nonce makes it worthless.
 */
static void test_auth_replay(void)
{
    int port;
    TestSwitch *ts = start_tcp_switch(&port);
    TestClient *c = NULL, *replayer;
    uint8_t response[sizeof(c->response)];
    uint32_t reason;

    test_auth_key = g_bytes_new_static(test_key, strlen(test_key));
    g_assert_cmpuint(test_client_try_connect_fd(test_connect_tcp(port), A, 8,
                                                8, TEST_OFFER_NONE, &c),
                     ==, 0);
    g_clear_pointer(&test_auth_key, g_bytes_unref);
    memcpy(response, c->response, sizeof(response));
    test_client_free(c);

    replayer = test_client_hello(test_connect_tcp(port), A, 8, 8,
                                 TEST_OFFER_NONE, ARCTIC_LINK_VERSION_MINOR);
    while (!replayer->challenged &&
           test_client_read(replayer, 1000, NULL, NULL)) {
    }
    g_assert_true(replayer->challenged);
    test_client_write(replayer, response, sizeof(response));
    g_assert_cmpuint(handshake_end(replayer, &reason), ==,
                     ARCTIC_FRAME_REJECT);
    g_assert_cmpuint(reason, ==, ARCTIC_REJECT_AUTH);
    test_client_free(replayer);
    test_switch_stop(ts);
}

/*
 * Answer the challenge of a new connection with the right proof of the
 * cluster's key, but for one bit of its byte @flip (-1: none), and see
 * what the switch answers (its REJECT reason in *@reason).
 */
static uint16_t auth_answer_flipped(int port, int flip, uint32_t *reason)
{
    g_autoptr(GBytes) key = g_bytes_new_static(test_key, strlen(test_key));
    TestClient *c = test_client_hello(test_connect_tcp(port), A, 8, 8,
                                      TEST_OFFER_NONE,
                                      ARCTIC_LINK_VERSION_MINOR);
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_AUTH_RESPONSE_SIZE];
    uint8_t *nonce = frame + ARCTIC_LINK_HEADER_SIZE;
    uint8_t *mac = nonce + ARCTIC_AUTH_NONCE_SIZE;
    uint16_t type;
    unsigned i;

    while (!c->challenged && test_client_read(c, 1000, NULL, NULL)) {
    }
    g_assert_true(c->challenged);
    for (i = 0; i < ARCTIC_AUTH_NONCE_SIZE; i++) {
        nonce[i] = g_random_int_range(0, 256);
    }
    arctic_frame_header_encode(frame, ARCTIC_FRAME_AUTH_RESPONSE,
                               ARCTIC_AUTH_RESPONSE_SIZE);
    test_auth_mac(key, ARCTIC_AUTH_NIU, c->switch_nonce, nonce,
                  c->hello_body, mac);
    if (flip >= 0) {
        mac[flip] ^= 0x01;
    }
    /* Should the switch take it, its proof is checked as any other. */
    c->key = g_bytes_ref(key);
    memcpy(c->nonce, nonce, ARCTIC_AUTH_NONCE_SIZE);
    test_client_write(c, frame, sizeof(frame));
    type = handshake_end(c, reason);
    test_client_free(c);
    return type;
}

/*
 * A proof that differs from the right one only in its last byte, or only
 * in one in the middle, is refused: a compare that stopped at the first
 * byte (which a wrong key's proof almost always differs in) would take
 * it.  The same proof unchanged joins, so the one bit is what was
 * refused.
 */
static void test_auth_one_byte_off(void)
{
    static const int flips[] = { ARCTIC_AUTH_MAC_SIZE - 1,
                                 ARCTIC_AUTH_MAC_SIZE / 2 };
    int port;
    TestSwitch *ts = start_tcp_switch(&port);
    ArcticSwitchStats *st;
    uint32_t reason;
    unsigned i;

    for (i = 0; i < G_N_ELEMENTS(flips); i++) {
        g_assert_cmpuint(auth_answer_flipped(port, flips[i], &reason), ==,
                         ARCTIC_FRAME_REJECT);
        g_assert_cmpuint(reason, ==, ARCTIC_REJECT_AUTH);
    }
    g_assert_cmpuint(auth_answer_flipped(port, -1, &reason), ==,
                     ARCTIC_FRAME_WELCOME);
    st = test_switch_stats(ts);
    g_assert_cmpuint(st->auth_failures, ==, G_N_ELEMENTS(flips));
    g_assert_cmpuint(st->port[A].connects, ==, 1);
    arctic_switch_stats_free(st);
    test_switch_stop(ts);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/switch/hostile/blocking-wake-end",
                    test_blocking_wake_end);
    g_test_add_func("/switch/hostile/steal-wakeups", test_steal_wakeups);
    g_test_add_func("/switch/hostile/offer-and-close", test_offer_and_close);
    g_test_add_func("/switch/hostile/many-fds", test_many_fds);
    g_test_add_func("/switch/hostile/out-of-fds", test_out_of_fds);
    g_test_add_func("/switch/hostile/forged-source", test_forged_source);
    g_test_add_func("/switch/hostile/ring-flood", test_ring_flood);
    g_test_add_func("/switch/hostile/kick-flood", test_kick_flood);
    g_test_add_func("/switch/hostile/bare-wake-flood", test_bare_wake_flood);
    g_test_add_func("/switch/hostile/control-idle-clients",
                    test_control_idle_clients);
    g_test_add_func("/switch/auth/good", test_auth_good);
    g_test_add_func("/switch/auth/refused", test_auth_refused);
    g_test_add_func("/switch/auth/replay", test_auth_replay);
    g_test_add_func("/switch/auth/one-byte-off", test_auth_one_byte_off);
    return g_test_run();
}
