/* SPDX-License-Identifier: MIT */
/*
 * Implementation of the arctic-switch test harness (harness.h): the switch
 * runs in the test process on a thread, exactly the library the daemon
 * uses, and the synthetic clients talk to it over its real UNIX socket so
 * framing, batching and back-pressure are exercised end to end, through
 * the socket or through shared-memory rings (ARCTIC_TEST_LINK=rings).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <limits.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib-unix.h>
#include <glib/gstdio.h>

#include "harness.h"
#include "switch-internal.h"  /* the descriptor and kick helpers */

static gpointer switch_thread(gpointer opaque)
{
    arctic_switch_run(opaque);
    return NULL;
}

GThread *test_switch_run_thread(ArcticSwitch *sw)
{
    return g_thread_new("test-switch", switch_thread, sw);
}

TestSwitch *test_switch_start(ArcticSwitchConfig *config)
{
    TestSwitch *ts = g_new0(TestSwitch, 1);
    GError *err = NULL;

    ts->dir = g_dir_make_tmp("arctic-switch-test-XXXXXX", &err);
    g_assert_no_error(err);
    ts->socket_path = g_build_filename(ts->dir, "switch.sock", NULL);
    ts->control_path = g_build_filename(ts->dir, "control.sock", NULL);
    config->socket_path = ts->socket_path;
    ts->sw = arctic_switch_new(config, &err);
    g_assert_no_error(err);
    g_assert_nonnull(ts->sw);
    ts->control = arctic_switch_control_new(ts->sw, ts->control_path, &err);
    g_assert_no_error(err);
    ts->thread = test_switch_run_thread(ts->sw);
    return ts;
}

void test_switch_stop(TestSwitch *ts)
{
    arctic_switch_stop(ts->sw);
    g_thread_join(ts->thread);
    arctic_switch_control_free(ts->control);
    arctic_switch_free(ts->sw);
    g_rmdir(ts->dir);
    g_free(ts->dir);
    g_free(ts->socket_path);
    g_free(ts->control_path);
    g_free(ts);
}

ArcticSwitchStats *test_switch_stats(TestSwitch *ts)
{
    return arctic_switch_stats_snapshot(ts->sw);
}

int test_connect_unix(const char *path)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    g_assert_cmpint(fd, >=, 0);
    g_strlcpy(addr.sun_path, path, sizeof(addr.sun_path));
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        g_error("connect %s: %s", path, g_strerror(errno));
    }
    return fd;
}

int test_connect_tcp(int port)
{
    struct sockaddr_in addr = {
        .sin_family = AF_INET,
        .sin_port = htons(port),
        .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
    };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    g_assert_cmpint(fd, >=, 0);
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        g_error("connect 127.0.0.1:%d: %s", port, g_strerror(errno));
    }
    return fd;
}

GBytes *test_auth_key;
uint16_t test_hello_flags;

void test_auth_mac(GBytes *key, enum arctic_auth_role role,
                   const uint8_t *their_nonce, const uint8_t *our_nonce,
                   const uint8_t *hello_body, uint8_t *mac)
{
    uint8_t message[ARCTIC_AUTH_MESSAGE_SIZE];
    gsize key_len, mac_len = ARCTIC_AUTH_MAC_SIZE;
    const uint8_t *k = g_bytes_get_data(key, &key_len);
    GHmac *hmac = g_hmac_new(G_CHECKSUM_SHA256, k, key_len);

    g_hmac_update(hmac, message,
                  arctic_auth_message(message, role, their_nonce, our_nonce,
                                      hello_body));
    g_hmac_get_digest(hmac, mac, &mac_len);
    g_assert_cmpuint(mac_len, ==, ARCTIC_AUTH_MAC_SIZE);
    g_hmac_unref(hmac);
}

/* A challenge: answered with the client's key, if it has one. */
static void client_challenged(TestClient *c, const uint8_t *nonce)
{
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_AUTH_RESPONSE_SIZE];
    uint8_t *body = frame + ARCTIC_LINK_HEADER_SIZE;
    unsigned i;

    c->challenged = true;
    memcpy(c->switch_nonce, nonce, ARCTIC_AUTH_NONCE_SIZE);
    if (!c->key) {
        return;
    }
    for (i = 0; i < ARCTIC_AUTH_NONCE_SIZE; i++) {
        c->nonce[i] = g_random_int_range(0, 256);
    }
    arctic_frame_header_encode(frame, ARCTIC_FRAME_AUTH_RESPONSE,
                               ARCTIC_AUTH_RESPONSE_SIZE);
    memcpy(body, c->nonce, ARCTIC_AUTH_NONCE_SIZE);
    test_auth_mac(c->key, ARCTIC_AUTH_NIU, c->switch_nonce, c->nonce,
                  c->hello_body, body + ARCTIC_AUTH_NONCE_SIZE);
    memcpy(c->response, frame, sizeof(frame));
    test_client_write(c, frame, sizeof(frame));
}

/* The switch's proof of the key: checked, it must be right. */
static void client_proof(TestClient *c, const uint8_t *mac)
{
    uint8_t want[ARCTIC_AUTH_MAC_SIZE];

    g_assert_nonnull(c->key);
    g_assert_true(c->challenged);
    test_auth_mac(c->key, ARCTIC_AUTH_SWITCH, c->nonce, c->switch_nonce,
                  c->hello_body, want);
    g_assert_cmpmem(mac, ARCTIC_AUTH_MAC_SIZE, want, ARCTIC_AUTH_MAC_SIZE);
    c->proved = true;
}

void test_client_free(TestClient *c)
{
    if (!c) {
        return;
    }
    if (c->key) {
        g_bytes_unref(c->key);
    }
    if (c->fd >= 0) {
        close(c->fd);
    }
    if (c->ring_area) {
        munmap(c->ring_area, c->ring_area_size);
        close(c->wake_fd);
    }
    g_queue_clear_full(&c->packets, (GDestroyNotify)g_bytes_unref);
    g_queue_clear_full(&c->timed, g_free);
    g_free(c);
}

bool test_rings_wanted(void)
{
    return g_strcmp0(g_getenv("ARCTIC_TEST_LINK"), "rings") == 0;
}

void test_client_kick(TestClient *c)
{
    int cpu = c->cpu_kick == TEST_KICK_MY_CPU ? sched_getcpu() : c->cpu_kick;

    if (c->cpu_wake && cpu >= 0 && cpu < ARCTIC_CPU_WAKE_MAX) {
        test_kick_cpu(c, cpu);
    } else {
        sw_kick(c->wake_fd);
    }
    c->kicks++;
}

/* What an NIU does to kick CPU @cpu's thread: its counter, a FUTEX_WAKE. */
void test_kick_cpu(TestClient *c, unsigned cpu)
{
    struct arctic_ring_area *area = c->ring_area;

    __atomic_fetch_add(&area->kicks.cpu[cpu], 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &area->kicks.cpu[cpu], FUTEX_WAKE, INT_MAX, NULL,
            NULL, 0);
}

/* Send up to @len bytes without blocking: how many went, -1 if closed. */
static ssize_t client_send_some(TestClient *c, const void *data, size_t len)
{
    ssize_t n;

    if (c->rings) {
        size_t put = arctic_ring_write(&c->ring_out, data, len);

        g_assert_cmpuint(put, !=, ARCTIC_RING_BROKEN);
        if (put && arctic_ring_wake_consumer(&c->ring_out)) {
            test_client_kick(c);
        }
        return put;
    }
    n = send(c->fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ?
               0 : -1;
    }
    return n;
}

/* recv() into c->input: the switch sends no descriptors (link 1.3). */
static ssize_t client_recvmsg(TestClient *c)
{
    int fds[1];
    unsigned n_fds;
    ssize_t n = sw_recv_fds(c->fd, c->input, sizeof(c->input), fds, 0,
                            &n_fds);

    g_assert_cmpuint(n_fds, ==, 0);
    return n;
}

/*
 * Take what arrived into c->input without blocking: bytes, 0, -1 closed.
 * The socket is read only if @socket_ready (a poll said so, or the caller
 * has not polled): with rings it only tells the end of the link.
 */
static ssize_t client_recv_some(TestClient *c, bool socket_ready)
{
    ssize_t n;

    if (c->rings) {
        size_t got = arctic_ring_read(&c->ring_in, c->input, sizeof(c->input));
        char byte;

        g_assert_cmpuint(got, !=, ARCTIC_RING_BROKEN);
        if (got) {
            if (arctic_ring_wake_producer(&c->ring_in)) {
                sw_kick(c->wake_fd);
            }
            return got;
        }
        if (!socket_ready) {
            return 0;
        }
        n = recv(c->fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ? -1
                                                                       : 0;
    }
    if (!socket_ready) {
        return 0;
    }
    n = client_recvmsg(c);
    if (n < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ?
               0 : -1;
    }
    return n ? n : -1;
}

/*
 * Wait up to @timeout_ms for input (or room, if @out): on the socket, or,
 * with rings, on our kick counter in the area (the switch raises it and
 * wakes its waiters: arctic/link-ring.h), as an NIU's link thread does,
 * saying so in the rings first; the socket then says only its end, which
 * the caller's next read finds.
 */
/*
 * For a pump of many clients: fill @pfd to watch @c's socket; with rings,
 * say so in them and look a last time: true if something waits already.
 * (Ring clients are not woken through their counters here: the pump
 * sleeps at most a millisecond while any has rings.)
 */
static bool client_pollfd(TestClient *c, struct pollfd *pfd, bool out)
{
    *pfd = (struct pollfd) { .fd = c->fd, .events = POLLIN };
    if (!c->rings) {
        pfd->events |= out ? POLLOUT : 0;
        return false;
    }
    return !arctic_ring_consumer_sleep(&c->ring_in) ||
           (out && !arctic_ring_producer_wait(&c->ring_out, 1));
}

static void client_wait(TestClient *c, int timeout_ms, bool out)
{
    struct pollfd pfd = { .fd = c->fd, .events = POLLIN | (out ? POLLOUT : 0) };
    struct arctic_ring_area *area = c->ring_area;
    struct timespec ts = {
        .tv_sec = timeout_ms / 1000,
        .tv_nsec = (timeout_ms % 1000) * 1000000l,
    };
    uint32_t seen;

    if (!c->rings) {
        poll(&pfd, 1, timeout_ms);
        return;
    }
    seen = __atomic_load_n(&area->kicks.niu, __ATOMIC_ACQUIRE);
    if (arctic_ring_consumer_sleep(&c->ring_in) &&
        (!out || arctic_ring_producer_wait(&c->ring_out, 1))) {
        syscall(SYS_futex, &area->kicks.niu, FUTEX_WAIT, seen, &ts, NULL, 0);
    }
    arctic_ring_consumer_awake(&c->ring_in);
}

void test_client_write(TestClient *c, const void *data, size_t len)
{
    const uint8_t *p = data;

    while (len) {
        ssize_t n = client_send_some(c, p, len);

        if (n < 0) {
            c->closed = true;
            return;
        }
        if (n == 0) {
            client_wait(c, 100, true);
            continue;
        }
        p += n;
        len -= n;
    }
}

/* Take the frames in @data (a piece of the stream): credits are added,
 * packets queued, WELCOME/REJECT reported through @control (type, body). */
static void client_parse(TestClient *c, const uint8_t *data, size_t len,
                         uint16_t *control_type, uint8_t *control_body)
{
    struct arctic_frame_reader *r = &c->reader;
    enum arctic_frame_status st;

    while ((st = arctic_frame_read(r, &data, &len)) == ARCTIC_FRAME_WHOLE) {
        switch (r->header.type) {
        case ARCTIC_FRAME_WELCOME:
            c->welcome_flags = r->header.flags;
            g_assert_nonnull(control_type);
            *control_type = r->header.type;
            memcpy(control_body, r->body, r->header.length);
            break;
        case ARCTIC_FRAME_CREDIT:
            c->send_credits[ARCTIC_PRIORITY_LOW] += arctic_get_le16(r->body);
            c->send_credits[ARCTIC_PRIORITY_HIGH] +=
                arctic_get_le16(r->body + 2);
            break;
        case ARCTIC_FRAME_PACKET:
            g_queue_push_tail(&c->packets,
                              g_bytes_new(r->body, r->header.length));
            break;
        case ARCTIC_FRAME_AUTH_CHALLENGE:
            client_challenged(c, r->body);
            break;
        case ARCTIC_FRAME_AUTH_PROOF:
            client_proof(c, r->body);
            break;
        case ARCTIC_FRAME_TIME_START:
            arctic_time_start_decode(r->body, &c->start);
            c->granted = c->start.grant;
            c->started = true;
            break;
        case ARCTIC_FRAME_TIME_GRANT:
            c->granted = arctic_get_le64(r->body);
            c->grants++;
            break;
        case ARCTIC_FRAME_TIMED_PACKET: {
            TestTimedPacket *p = g_new0(TestTimedPacket, 1);

            p->at = arctic_get_le64(r->body);
            p->grants = c->grants;
            p->prio = ARCTIC_FIELD_GET(ARCTIC_FRAME_FLAGS, PRIORITY,
                                       r->header.flags);
            p->size = r->header.length - ARCTIC_TIMED_PACKET_HEADER;
            memcpy(p->bytes, r->body + ARCTIC_TIMED_PACKET_HEADER, p->size);
            g_queue_push_tail(&c->timed, p);
            break;
        }
        default:
            g_assert_nonnull(control_type);
            *control_type = r->header.type;
            memcpy(control_body, r->body, r->header.length);
            break;
        }
    }
    g_assert_cmpint(st, ==, ARCTIC_FRAME_NEED_MORE);
}

bool test_client_read(TestClient *c, int timeout_ms, uint16_t *control_type,
                      uint8_t *control_body)
{
    ssize_t n;

    if (c->closed) {
        return false;
    }
    n = client_recv_some(c, true);
    if (n == 0) {
        client_wait(c, timeout_ms, false);
        n = client_recv_some(c, true);
    }
    if (n <= 0) {
        c->closed |= n < 0;
        return false;
    }
    client_parse(c, c->input, n, control_type, control_body);
    return true;
}

bool test_client_poll(TestClient *c, int timeout_ms)
{
    return test_client_read(c, timeout_ms, NULL, NULL);
}

/*
 * Make what @offer names: the ring area (a memfd, sealed unless the offer
 * says otherwise) and the wake-up socket pair, whose switch's end goes in
 * @fds with the area, in arctic_ring_fd order.
 */
static void client_make_rings(TestClient *c, TestOffer offer, int *fds)
{
    uint32_t data_size = ARCTIC_RING_DATA_SIZE;
    int pair[2];

    c->ring_area_size = arctic_ring_area_size(data_size);
    fds[ARCTIC_RING_FD_AREA] = memfd_create("arctic-test-rings",
                                            MFD_CLOEXEC | MFD_ALLOW_SEALING);
    g_assert_cmpint(fds[ARCTIC_RING_FD_AREA], >=, 0);
    g_assert_cmpint(ftruncate(fds[ARCTIC_RING_FD_AREA], c->ring_area_size),
                    ==, 0);
    if (offer != TEST_OFFER_UNSEALED) {
        g_assert_cmpint(fcntl(fds[ARCTIC_RING_FD_AREA], F_ADD_SEALS,
                              F_SEAL_SHRINK | F_SEAL_GROW), ==, 0);
    }
    c->ring_area = mmap(NULL, c->ring_area_size, PROT_READ | PROT_WRITE,
                        MAP_SHARED, fds[ARCTIC_RING_FD_AREA], 0);
    g_assert_true(c->ring_area != MAP_FAILED);
    arctic_ring_area_init(c->ring_area, data_size);
    arctic_ring_attach(&c->ring_out, c->ring_area, data_size,
                       ARCTIC_RING_TO_SWITCH);
    arctic_ring_attach(&c->ring_in, c->ring_area, data_size,
                       ARCTIC_RING_TO_NIU);
    g_assert_true(sw_wake_pair(pair));
    c->wake_fd = pair[0];
    fds[ARCTIC_RING_FD_WAKE] = pair[1];
    if (offer == TEST_OFFER_NOT_SOCKET) {
        close(pair[1]);
        fds[ARCTIC_RING_FD_WAKE] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        g_assert_cmpint(fds[ARCTIC_RING_FD_WAKE], >=, 0);
    }
}

/* The HELLO frame, with the ring descriptors attached (SCM_RIGHTS). */
static void client_send_hello_fds(TestClient *c, const uint8_t *frame,
                                  size_t size, const int *fds)
{
    g_assert_cmpint(sw_send_fds(c->fd, frame, size, fds, ARCTIC_RING_FDS),
                    ==, size);
}

uint32_t test_client_try_connect(const char *path, unsigned node,
                                 unsigned credits_low, unsigned credits_high,
                                 TestClient **out)
{
    return test_client_try_connect_offer(path, node, credits_low,
                                         credits_high, TEST_OFFER_ENV, out);
}

uint32_t test_client_try_connect_offer(const char *path, unsigned node,
                                       unsigned credits_low,
                                       unsigned credits_high, TestOffer offer,
                                       TestClient **out)
{
    return test_client_try_connect_fd(test_connect_unix(path), node,
                                      credits_low, credits_high, offer, out);
}

TestClient *test_client_hello(int fd, unsigned node, unsigned credits_low,
                              unsigned credits_high, TestOffer offer,
                              unsigned minor)
{
    TestClient *c = g_new0(TestClient, 1);
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_HELLO_SIZE];
    struct arctic_hello hello = {
        .magic = ARCTIC_LINK_MAGIC,
        .version_major = ARCTIC_LINK_VERSION_MAJOR,
        .version_minor = minor,
        .node_id = node,
        .credits = { credits_low, credits_high },
    };

    c->fd = fd;
    c->node = node;
    c->cpu_kick = TEST_KICK_MY_CPU;
    c->key = test_auth_key ? g_bytes_ref(test_auth_key) : NULL;
    g_queue_init(&c->packets);
    g_queue_init(&c->timed);
    arctic_frame_header_encode_flags(frame, ARCTIC_FRAME_HELLO,
                                     test_hello_flags, ARCTIC_HELLO_SIZE);
    arctic_hello_encode(frame + ARCTIC_LINK_HEADER_SIZE, &hello);
    memcpy(c->hello_body, frame + ARCTIC_LINK_HEADER_SIZE, ARCTIC_HELLO_SIZE);
    if (offer == TEST_OFFER_ENV) {
        offer = test_rings_wanted() ? TEST_OFFER_RINGS : TEST_OFFER_NONE;
    }
    if (offer != TEST_OFFER_NONE) {
        int fds[ARCTIC_RING_FDS];

        client_make_rings(c, offer, fds);
        client_send_hello_fds(c, frame, sizeof(frame), fds);
        close(fds[ARCTIC_RING_FD_WAKE]);
        close(fds[ARCTIC_RING_FD_AREA]);
    } else {
        test_client_write(c, frame, sizeof(frame));
    }
    return c;
}

uint32_t test_client_try_connect_fd(int fd, unsigned node,
                                    unsigned credits_low,
                                    unsigned credits_high, TestOffer offer,
                                    TestClient **out)
{
    TestClient *c;
    uint8_t body[ARCTIC_LINK_MAX_BODY];
    uint16_t type = 0;
    gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;

    c = test_client_hello(fd, node, credits_low, credits_high, offer,
                          offer == TEST_OFFER_RINGS_1_2
                          ? 2 : ARCTIC_LINK_VERSION_MINOR);
    while (!type && !c->closed && g_get_monotonic_time() < deadline) {
        test_client_read(c, 100, &type, body);
    }
    if (type == ARCTIC_FRAME_WELCOME) {
        struct arctic_welcome w;

        arctic_welcome_decode(body, &w);
        g_assert_cmphex(w.magic, ==, ARCTIC_LINK_MAGIC);
        g_assert_cmpuint(w.node_id, ==, node);
        c->num_nodes = w.num_nodes;
        c->levels = w.levels;
        c->send_credits[0] = w.credits[0];
        c->send_credits[1] = w.credits[1];
        /* A challenged client takes a WELCOME only after a good proof. */
        g_assert_true(c->proved == c->challenged);
        /* RINGS only ever answers an offer. */
        g_assert_true(!(c->welcome_flags & R_ARCTIC_WELCOME_FLAGS_RINGS_MASK) ||
                      c->ring_area);
        c->rings = c->welcome_flags & R_ARCTIC_WELCOME_FLAGS_RINGS_MASK;
        c->cpu_wake = c->welcome_flags & R_ARCTIC_WELCOME_FLAGS_CPU_WAKE_MASK;
        *out = c;
        return 0;
    }
    g_assert_cmpuint(type, ==, ARCTIC_FRAME_REJECT);
    test_client_free(c);
    *out = NULL;
    return arctic_get_le32(body);
}

TestClient *test_client_connect(const char *path, unsigned node,
                                unsigned credits_low, unsigned credits_high)
{
    TestClient *c = NULL;
    uint32_t reason = test_client_try_connect(path, node, credits_low,
                                              credits_high, &c);

    g_assert_cmpuint(reason, ==, 0);
    return c;
}

bool test_client_wait_closed(TestClient *c, int timeout_ms)
{
    gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000ll;

    while (!c->closed && g_get_monotonic_time() < deadline) {
        test_client_read(c, 50, NULL, NULL);
    }
    return c->closed;
}

size_t test_build_packet(uint8_t *buf, unsigned src, unsigned dst, bool high,
                         bool random_up, uint32_t seq, unsigned payload_words)
{
    struct arctic_e2e_header e2e = {
        .kind = ARCTIC_E2E_DATA,
        .flags = ARCTIC_FIELD_PREP(ARCTIC_E2E_FLAGS, PRIORITY, high),
        .src_node = src,
        .dst_node = dst,
        .job = 7,
        .epoch = 1,
        .seq = seq,
    };
    uint32_t route = arctic_route_entry(src, dst, high, random_up);
    unsigned length = ARCTIC_MPI_LENGTH_EXTRA + payload_words;
    uint8_t *words = buf + ARCTIC_WIRE_WORDS_OFFSET;
    size_t size = arctic_wire_size(length);
    unsigned i;

    g_assert_cmpuint(length, <=, ARCTIC_MAX_PACKET_WORDS);
    arctic_e2e_encode(buf, &e2e);
    arctic_put_le32(words, route & 0xffff);
    arctic_put_le32(words + 4,
                    ARCTIC_FIELD_PREP(ARCTIC_W1, DOWNROUTE,
                                      ARCTIC_FIELD_GET(ROUTE_ENTRY, DOWNROUTE,
                                                       route)) |
                    ARCTIC_FIELD_PREP(ARCTIC_W1, TYPE, 5) |
                    ARCTIC_FIELD_PREP(ARCTIC_W1, LENGTH, length));
    arctic_put_le32(words + 8, 0xc0de0000 | src);     /* command0 */
    arctic_put_le32(words + 12, dst);                 /* command1 */
    for (i = 0; i < payload_words; i++) {
        arctic_put_le32(words + 16 + 4 * i, seq ^ i);
    }
    arctic_wire_seal(buf, size);
    return size;
}

bool test_packet_valid(const uint8_t *pkt, size_t size, unsigned *src,
                       unsigned *dst, uint32_t *seq, bool *high)
{
    struct arctic_e2e_header e2e;
    uint32_t w0, w1;
    unsigned len, i;

    if (arctic_wire_check(pkt, size) != ARCTIC_WIRE_OK) {
        return false;
    }
    arctic_e2e_decode(pkt, &e2e);
    w0 = arctic_get_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET);
    w1 = arctic_get_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET + 4);
    len = ARCTIC_FIELD_GET(ARCTIC_W1, LENGTH, w1);
    if (len < ARCTIC_MPI_LENGTH_EXTRA ||
        arctic_get_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET + 8) !=
        (0xc0de0000u | e2e.src_node) ||
        arctic_get_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET + 12) !=
        e2e.dst_node) {
        return false;
    }
    for (i = 0; i < len - ARCTIC_MPI_LENGTH_EXTRA; i++) {
        if (arctic_get_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET + 16 + 4 * i) !=
            (e2e.seq ^ i)) {
            return false;
        }
    }
    *src = e2e.src_node;
    *dst = e2e.dst_node;
    *seq = e2e.seq;
    *high = ARCTIC_FIELD_GET(ARCTIC_W0, PRIORITY, w0);
    return true;
}

static void frame_packet(uint8_t *out, const uint8_t *pkt, size_t size)
{
    uint32_t w0 = arctic_get_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET);

    arctic_packet_frame_encode(out, ARCTIC_FIELD_GET(ARCTIC_W0, PRIORITY, w0),
                               size);
    memcpy(out + ARCTIC_LINK_HEADER_SIZE, pkt, size);
}

bool test_client_send_packet(TestClient *c, const uint8_t *pkt, size_t size,
                             int timeout_ms)
{
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MAX_SIZE];
    unsigned prio = ARCTIC_FIELD_GET(ARCTIC_W0, PRIORITY,
                                     arctic_get_le32(pkt +
                                         ARCTIC_WIRE_WORDS_OFFSET));
    gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000ll;

    while (c->send_credits[prio] == 0) {
        if (c->closed || g_get_monotonic_time() >= deadline) {
            return false;
        }
        test_client_read(c, 20, NULL, NULL);
    }
    c->send_credits[prio]--;
    frame_packet(frame, pkt, size);
    test_client_write(c, frame, ARCTIC_LINK_HEADER_SIZE + size);
    return !c->closed;
}

GBytes *test_client_recv_packet(TestClient *c, int timeout_ms)
{
    gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000ll;

    while (g_queue_is_empty(&c->packets)) {
        gint64 left = (deadline - g_get_monotonic_time()) / 1000;

        /* Read at least once, even with no time left. */
        if (c->closed || (!test_client_read(c, (int)CLAMP(left, 0, 100), NULL,
                                       NULL) && left <= 0)) {
            break;
        }
    }
    if (g_queue_is_empty(&c->packets)) {
        return NULL;
    }
    return g_queue_pop_head(&c->packets);
}

/* --- timed links ------------------------------------------------------ */

static void client_frame(TestClient *c, uint16_t type, uint16_t flags,
                         const uint8_t *body, size_t len)
{
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_LINK_MAX_BODY];

    g_assert_cmpuint(len, <=, ARCTIC_LINK_MAX_BODY);
    arctic_frame_header_encode_flags(frame, type, flags, len);
    memcpy(frame + ARCTIC_LINK_HEADER_SIZE, body, len);
    test_client_write(c, frame, ARCTIC_LINK_HEADER_SIZE + len);
}

void test_client_time_ready(TestClient *c,
                            const struct arctic_time_ready *ready)
{
    uint8_t body[ARCTIC_TIME_READY_SIZE];

    c->time_costs = *ready;
    arctic_time_ready_encode(body, ready);
    client_frame(c, ARCTIC_FRAME_TIME_READY, 0, body, sizeof(body));
}

void test_client_time_sync(TestClient *c, uint64_t reached, uint64_t promise)
{
    uint8_t body[ARCTIC_TIME_SYNC_SIZE];
    struct arctic_time_sync sync = { .reached = reached, .promise = promise };

    arctic_time_sync_encode(body, &sync);
    client_frame(c, ARCTIC_FRAME_TIME_SYNC, 0, body, sizeof(body));
}

void test_client_send_timed(TestClient *c, uint64_t stamp, bool high,
                            const uint8_t *pkt, size_t size)
{
    uint8_t body[ARCTIC_TIMED_PACKET_HEADER + ARCTIC_WIRE_MAX_SIZE];

    arctic_put_le64(body, stamp);
    memcpy(body + ARCTIC_TIMED_PACKET_HEADER, pkt, size);
    client_frame(c, ARCTIC_FRAME_TIMED_PACKET,
                 ARCTIC_FIELD_PREP(ARCTIC_FRAME_FLAGS, PRIORITY, high), body,
                 ARCTIC_TIMED_PACKET_HEADER + size);
}

/* Read until @done(c, value) or @timeout_ms pass. */
static bool client_wait_for(TestClient *c, bool (*done)(TestClient *c,
                                                         uint64_t value),
                            uint64_t value, int timeout_ms)
{
    gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000ll;

    while (!done(c, value)) {
        gint64 left = (deadline - g_get_monotonic_time()) / 1000;

        if (c->closed || (!test_client_read(c, (int)CLAMP(left, 0, 100),
                                            NULL, NULL) && left <= 0)) {
            return done(c, value);
        }
    }
    return true;
}

static bool client_started(TestClient *c, uint64_t unused)
{
    return c->started;
}

static bool client_granted_above(TestClient *c, uint64_t above)
{
    return c->started && c->granted > above;
}

static bool client_has_timed(TestClient *c, uint64_t unused)
{
    return !g_queue_is_empty(&c->timed);
}

bool test_client_wait_start(TestClient *c, int timeout_ms)
{
    return client_wait_for(c, client_started, 0, timeout_ms);
}

bool test_client_wait_grant(TestClient *c, uint64_t above, int timeout_ms)
{
    return client_wait_for(c, client_granted_above, above, timeout_ms);
}

TestTimedPacket *test_client_recv_timed(TestClient *c, int timeout_ms)
{
    client_wait_for(c, client_has_timed, 0, timeout_ms);
    return g_queue_pop_head(&c->timed);
}

void test_client_return_credits(TestClient *c, unsigned low, unsigned high)
{
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_CREDIT_SIZE];

    arctic_frame_header_encode(frame, ARCTIC_FRAME_CREDIT, ARCTIC_CREDIT_SIZE);
    arctic_put_le16(frame + ARCTIC_LINK_HEADER_SIZE, low);
    arctic_put_le16(frame + ARCTIC_LINK_HEADER_SIZE + 2, high);
    test_client_write(c, frame, sizeof(frame));
}

/* --- the traffic pump ------------------------------------------------- */

struct pump_client {
    uint8_t pending[ARCTIC_WIRE_MAX_SIZE];
    size_t pending_size;        /* 0: none */
    bool done;
    unsigned owed[ARCTIC_NUM_PRIORITIES];
};

static void pump_flush(TestClient *c)
{
    size_t off = 0;

    while (off < c->output_len) {
        ssize_t n = client_send_some(c, c->output + off, c->output_len - off);

        if (n > 0) {
            off += n;
        } else {
            if (n < 0) {
                c->closed = true;
                c->output_len = 0;
                return;
            }
            break;
        }
    }
    memmove(c->output, c->output + off, c->output_len - off);
    c->output_len -= off;
}

/* Queue packets while credits and buffer room last. */
static bool pump_fill(TestTraffic *t, unsigned i, struct pump_client *pc)
{
    TestClient *c = t->clients[i];
    bool progress = false;

    while (!pc->done) {
        unsigned prio;

        if (!pc->pending_size &&
            !t->next_packet(t->opaque, i, pc->pending, &pc->pending_size)) {
            pc->done = true;
            pc->pending_size = 0;
            break;
        }
        prio = ARCTIC_FIELD_GET(ARCTIC_W0, PRIORITY,
                                arctic_get_le32(pc->pending +
                                                ARCTIC_WIRE_WORDS_OFFSET));
        if (!c->send_credits[prio] ||
            c->output_len + ARCTIC_LINK_HEADER_SIZE + pc->pending_size >
            sizeof(c->output)) {
            break;
        }
        c->send_credits[prio]--;
        frame_packet(c->output + c->output_len, pc->pending,
                     pc->pending_size);
        c->output_len += ARCTIC_LINK_HEADER_SIZE + pc->pending_size;
        pc->pending_size = 0;
        t->sent++;
        progress = true;
    }
    return progress;
}

/* Deliver received packets and give their credits back in one frame. */
static bool pump_drain(TestTraffic *t, unsigned i, struct pump_client *pc)
{
    TestClient *c = t->clients[i];
    bool progress = false;
    GBytes *b;

    while ((b = g_queue_pop_head(&c->packets))) {
        gsize size;
        const uint8_t *pkt = g_bytes_get_data(b, &size);
        unsigned prio = ARCTIC_FIELD_GET(ARCTIC_W0, PRIORITY,
                                         arctic_get_le32(pkt +
                                             ARCTIC_WIRE_WORDS_OFFSET));

        if (t->received) {
            t->received(t->opaque, i, pkt, size);
        }
        pc->owed[prio]++;
        t->received_count++;
        g_bytes_unref(b);
        progress = true;
    }
    if ((pc->owed[0] || pc->owed[1]) &&
        c->output_len + ARCTIC_LINK_HEADER_SIZE + ARCTIC_CREDIT_SIZE <=
        sizeof(c->output)) {
        uint8_t *f = c->output + c->output_len;

        arctic_frame_header_encode(f, ARCTIC_FRAME_CREDIT,
                                   ARCTIC_CREDIT_SIZE);
        arctic_put_le16(f + ARCTIC_LINK_HEADER_SIZE, pc->owed[0]);
        arctic_put_le16(f + ARCTIC_LINK_HEADER_SIZE + 2, pc->owed[1]);
        c->output_len += ARCTIC_LINK_HEADER_SIZE + ARCTIC_CREDIT_SIZE;
        pc->owed[0] = pc->owed[1] = 0;
    }
    return progress;
}

uint64_t test_traffic_run(TestTraffic *t)
{
    struct pump_client *pcs = g_new0(struct pump_client, t->num_clients);
    struct pollfd *pfds = g_new0(struct pollfd, t->num_clients);
    gint64 last_progress = g_get_monotonic_time();
    unsigned i;

    for (i = 0; i < t->num_clients; i++) {
        g_unix_set_fd_nonblocking(t->clients[i]->fd, TRUE, NULL);
    }
    while (t->received_count < t->expected) {
        bool progress = false, ready = false, rings = false;

        for (i = 0; i < t->num_clients; i++) {
            TestClient *c = t->clients[i];

            progress |= pump_fill(t, i, &pcs[i]);
            pump_flush(c);
            ready |= client_pollfd(c, &pfds[i], c->output_len);
            rings |= c->rings;
            if (c->closed) {
                pfds[i].fd = -1;
            }
        }
        poll(pfds, t->num_clients, ready ? 0 : rings ? 1 : 50);
        for (i = 0; i < t->num_clients; i++) {
            TestClient *c = t->clients[i];
            ssize_t got;

            if (c->rings) {
                arctic_ring_consumer_awake(&c->ring_in);
            }
            got = c->closed ? 0 :
                  client_recv_some(c, pfds[i].revents &
                                      (POLLIN | POLLHUP | POLLERR));
            if (got > 0) {
                client_parse(c, c->input, got, NULL, NULL);
                progress = true;
            } else if (got < 0) {
                c->closed = true;
            }
            progress |= pump_drain(t, i, &pcs[i]);
        }
        if (progress) {
            last_progress = g_get_monotonic_time();
        } else if (g_get_monotonic_time() - last_progress >
                   t->idle_timeout_ms * 1000ll) {
            break;
        }
    }
    for (i = 0; i < t->num_clients; i++) {
        pump_flush(t->clients[i]);
    }
    g_free(pcs);
    g_free(pfds);
    return t->received_count;
}
