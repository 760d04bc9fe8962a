/* SPDX-License-Identifier: MIT */
/*
 * Link-protocol tests of arctic-switch: every kind of bad input (refused
 * HELLOs, bad packets, bad frames, credit abuse, garbage, a silent client)
 * is counted under its reason and dropped or disconnected without
 * affecting a bystander port; frames split at every byte still parse;
 * clients reconnect under the same node id; a restarted switch takes over
 * a stale socket and its clients reconnect.
 */
#include <poll.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

#include "harness.h"

enum { PORTS = 8, VICTIM = 1, BYSTANDER_TX = 4, BYSTANDER_RX = 6 };

typedef struct {
    TestSwitch *ts;
    TestClient *tx, *rx;            /* the bystander pair */
    uint32_t seq;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
    ArcticSwitchConfig config;

    arctic_switch_config_init(&config);
    config.ports = PORTS;
    config.handshake_timeout_ms = 300;
    f->ts = test_switch_start(&config);
    f->tx = test_client_connect(f->ts->socket_path, BYSTANDER_TX, 8, 8);
    f->rx = test_client_connect(f->ts->socket_path, BYSTANDER_RX, 8, 8);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    test_client_free(f->tx);
    test_client_free(f->rx);
    test_switch_stop(f->ts);
}

/* The bystander pair still works: one packet each way round. */
static void bystander_ok(Fixture *f)
{
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size = test_build_packet(pkt, BYSTANDER_TX, BYSTANDER_RX, false,
                                    false, f->seq, 3);
    g_autoptr(GBytes) got = NULL;
    unsigned src, dst;
    uint32_t seq;
    bool high;
    gsize got_size;

    g_assert_true(test_client_send_packet(f->tx, pkt, size, 2000));
    got = test_client_recv_packet(f->rx, 2000);
    g_assert_nonnull(got);
    g_assert_true(test_packet_valid(g_bytes_get_data(got, &got_size),
                                    g_bytes_get_size(got), &src, &dst, &seq,
                                    &high));
    g_assert_cmpuint(src, ==, BYSTANDER_TX);
    g_assert_cmpuint(seq, ==, f->seq);
    test_client_return_credits(f->rx, 1, 0);
    f->seq++;
}

static void send_hello(TestClient *c, uint32_t magic, uint16_t major,
                       uint32_t node)
{
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_HELLO_SIZE];
    struct arctic_hello hello = {
        .magic = magic, .version_major = major, .node_id = node,
        .credits = { 8, 8 },
    };

    arctic_frame_header_encode(frame, ARCTIC_FRAME_HELLO, ARCTIC_HELLO_SIZE);
    arctic_hello_encode(frame + ARCTIC_LINK_HEADER_SIZE, &hello);
    test_client_write(c, frame, sizeof(frame));
}

static TestClient *raw_client(Fixture *f)
{
    TestClient *c = g_new0(TestClient, 1);

    c->fd = test_connect_unix(f->ts->socket_path);
    g_queue_init(&c->packets);
    return c;
}

/* Read until close; returns the REJECT reason seen (0 if none). */
static uint32_t expect_reject(TestClient *c)
{
    uint8_t buf[512];
    size_t len = 0;
    ssize_t n;
    struct arctic_frame_header h;

    while ((n = recv(c->fd, buf + len, sizeof(buf) - len, 0)) > 0) {
        len += n;
    }
    if (len < ARCTIC_LINK_HEADER_SIZE + ARCTIC_REJECT_SIZE) {
        return 0;
    }
    arctic_frame_header_decode(buf, &h);
    g_assert_cmpuint(h.type, ==, ARCTIC_FRAME_REJECT);
    g_assert_cmpuint(h.length, ==, ARCTIC_REJECT_SIZE);
    /* The text is NUL-terminated and says something. */
    g_assert_cmpuint(buf[ARCTIC_LINK_HEADER_SIZE + ARCTIC_REJECT_SIZE - 1],
                     ==, 0);
    g_assert_cmpuint(buf[ARCTIC_LINK_HEADER_SIZE + 4], !=, 0);
    return arctic_get_le32(buf + ARCTIC_LINK_HEADER_SIZE);
}

static void test_handshake_rejects(Fixture *f, gconstpointer data)
{
    TestClient *c, *holder;
    ArcticSwitchStats *st;
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_CREDIT_SIZE] = { 0 };

    g_assert_cmpuint(test_client_try_connect(f->ts->socket_path, 2, 8, 8, &c),
                     ==, 0);
    holder = c;

    c = raw_client(f);
    send_hello(c, ARCTIC_LINK_MAGIC, ARCTIC_LINK_VERSION_MAJOR + 1, 3);
    g_assert_cmpuint(expect_reject(c), ==, ARCTIC_REJECT_VERSION);
    test_client_free(c);

    c = raw_client(f);
    send_hello(c, ARCTIC_LINK_MAGIC, ARCTIC_LINK_VERSION_MAJOR, PORTS);
    g_assert_cmpuint(expect_reject(c), ==, ARCTIC_REJECT_BAD_NODE);
    test_client_free(c);

    c = raw_client(f);
    send_hello(c, ARCTIC_LINK_MAGIC, ARCTIC_LINK_VERSION_MAJOR, 2);
    g_assert_cmpuint(expect_reject(c), ==, ARCTIC_REJECT_NODE_BUSY);
    test_client_free(c);

    c = raw_client(f);
    send_hello(c, 0x12345678, ARCTIC_LINK_VERSION_MAJOR, 3);
    g_assert_cmpuint(expect_reject(c), ==, ARCTIC_REJECT_MALFORMED);
    test_client_free(c);

    /* More credits than the contract allows (ARCTIC_LINK_MAX_CREDITS). */
    g_assert_cmpuint(test_client_try_connect(f->ts->socket_path, 3,
                                             ARCTIC_LINK_MAX_CREDITS + 1, 8,
                                             &c), ==, ARCTIC_REJECT_MALFORMED);
    test_client_free(c);

    /* A well-framed CREDIT before HELLO. */
    c = raw_client(f);
    arctic_frame_header_encode(frame, ARCTIC_FRAME_CREDIT, ARCTIC_CREDIT_SIZE);
    test_client_write(c, frame, sizeof(frame));
    g_assert_cmpuint(expect_reject(c), ==, ARCTIC_REJECT_MALFORMED);
    test_client_free(c);

    /* A HELLO header with the wrong length. */
    c = raw_client(f);
    arctic_frame_header_encode(frame, ARCTIC_FRAME_HELLO, 4);
    test_client_write(c, frame, sizeof(frame));
    g_assert_cmpuint(expect_reject(c), ==, ARCTIC_REJECT_MALFORMED);
    test_client_free(c);

    /* Saying nothing at all: closed after the handshake timeout. */
    c = raw_client(f);
    g_assert_true(test_client_wait_closed(c, 5000));
    test_client_free(c);

    bystander_ok(f);
    st = test_switch_stats(f->ts);
    g_assert_cmpuint(st->unattached_disconnects[ARCTIC_DISCONNECT_REJECTED],
                     ==, 5);
    g_assert_cmpuint(
        st->unattached_disconnects[ARCTIC_DISCONNECT_UNEXPECTED_FRAME], ==, 1);
    g_assert_cmpuint(
        st->unattached_disconnects[ARCTIC_DISCONNECT_BAD_FRAME_LENGTH], ==, 1);
    g_assert_cmpuint(
        st->unattached_disconnects[ARCTIC_DISCONNECT_HANDSHAKE_TIMEOUT], ==,
        1);
    g_assert_true(st->port[2].connected);
    g_assert_cmpuint(st->port[2].connects, ==, 1);
    arctic_switch_stats_free(st);
    test_client_free(holder);
}

/* Bad packets are dropped and counted; the link stays up and its credits
 * come back. */
static void test_bad_packets(Fixture *f, gconstpointer data)
{
    TestClient *c = test_client_connect(f->ts->socket_path, VICTIM, 8, 8);
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size;
    uint32_t w;
    ArcticSwitchStats *st;
    const struct arctic_port_prio_stats *q;
    unsigned r;

    /* bad CRC */
    size = test_build_packet(pkt, VICTIM, BYSTANDER_RX, false, false, 1, 4);
    pkt[ARCTIC_WIRE_WORDS_OFFSET + 20] ^= 0x40;
    g_assert_true(test_client_send_packet(c, pkt, size, 2000));
    /* W1.LENGTH disagreeing with the frame (resealed so the CRC is good) */
    size = test_build_packet(pkt, VICTIM, BYSTANDER_RX, false, false, 2, 4);
    w = arctic_get_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET + 4);
    arctic_put_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET + 4, w + 1);
    arctic_wire_seal(pkt, size);
    g_assert_true(test_client_send_packet(c, pkt, size, 2000));
    /* unknown e2e kind */
    size = test_build_packet(pkt, VICTIM, BYSTANDER_RX, false, false, 3, 4);
    pkt[0] = 9;
    arctic_wire_seal(pkt, size);
    g_assert_true(test_client_send_packet(c, pkt, size, 2000));
    /* upper half of word 0 not zero */
    size = test_build_packet(pkt, VICTIM, BYSTANDER_RX, false, false, 4, 4);
    pkt[ARCTIC_WIRE_WORDS_OFFSET + 3] = 0x80;
    arctic_wire_seal(pkt, size);
    g_assert_true(test_client_send_packet(c, pkt, size, 2000));
    /* a route climbing above the 3-level tree */
    size = test_build_packet(pkt, VICTIM, BYSTANDER_RX, false, false, 5, 4);
    w = arctic_get_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET);
    w = (w & ~(uint32_t)R_ARCTIC_W0_UPROUTE_MASK) |
        ARCTIC_FIELD_PREP(UPROUTE, HOPS, 3);
    arctic_put_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET, w);
    arctic_wire_seal(pkt, size);
    g_assert_true(test_client_send_packet(c, pkt, size, 2000));
    /* to a port nobody holds (at high priority) */
    size = test_build_packet(pkt, VICTIM, 7, true, false, 6, 4);
    g_assert_true(test_client_send_packet(c, pkt, size, 2000));
    /* and then a good one from the victim still arrives */
    size = test_build_packet(pkt, VICTIM, BYSTANDER_RX, false, false, 7, 4);
    g_assert_true(test_client_send_packet(c, pkt, size, 2000));
    {
        g_autoptr(GBytes) got = test_client_recv_packet(f->rx, 2000);
        unsigned src, dst;
        uint32_t seq;
        bool high;

        g_assert_nonnull(got);
        g_assert_true(test_packet_valid(g_bytes_get_data(got, NULL),
                                        g_bytes_get_size(got), &src, &dst,
                                        &seq, &high));
        g_assert_cmpuint(src, ==, VICTIM);
        g_assert_cmpuint(seq, ==, 7);
        test_client_return_credits(f->rx, 1, 0);
    }
    bystander_ok(f);
    /* Every credit the switch granted (its default) came back. */
    while (c->send_credits[0] < ARCTIC_LINK_DEFAULT_CREDITS ||
           c->send_credits[1] < ARCTIC_LINK_DEFAULT_CREDITS) {
        g_assert_true(test_client_poll(c, 2000));
    }
    g_assert_cmpuint(c->send_credits[0], ==, ARCTIC_LINK_DEFAULT_CREDITS);
    g_assert_cmpuint(c->send_credits[1], ==, ARCTIC_LINK_DEFAULT_CREDITS);

    st = test_switch_stats(f->ts);
    q = &st->port[VICTIM].prio[ARCTIC_PRIORITY_LOW];
    g_assert_cmpuint(q->rx_packets, ==, 6);
    g_assert_cmpuint(q->drops[ARCTIC_DROP_BAD_CRC], ==, 1);
    g_assert_cmpuint(q->drops[ARCTIC_DROP_BAD_LENGTH], ==, 1);
    g_assert_cmpuint(q->drops[ARCTIC_DROP_BAD_KIND], ==, 1);
    g_assert_cmpuint(q->drops[ARCTIC_DROP_NOT_ZERO], ==, 1);
    g_assert_cmpuint(q->drops[ARCTIC_DROP_UNKNOWN_ROUTE], ==, 1);
    g_assert_cmpuint(st->port[VICTIM].prio[ARCTIC_PRIORITY_HIGH]
                     .drops[ARCTIC_DROP_PORT_DOWN], ==, 1);
    g_assert_true(st->port[VICTIM].connected);
    for (r = 0; r < ARCTIC_DROP_REASONS; r++) {
        g_assert_cmpuint(st->port[BYSTANDER_TX].prio[0].drops[r], ==, 0);
    }
    arctic_switch_stats_free(st);
    test_client_free(c);
}

/* Frames that break the protocol close the offender, only it, with the
 * reason counted; the port can be taken again afterwards. */
static void check_disconnect(Fixture *f, const void *bytes, size_t len,
                             enum arctic_disconnect_reason reason,
                             unsigned hello_low_credits)
{
    TestClient *c = test_client_connect(f->ts->socket_path, VICTIM,
                                        hello_low_credits, 8);
    ArcticSwitchStats *before = test_switch_stats(f->ts), *after;

    test_client_write(c, bytes, len);
    g_assert_true(test_client_wait_closed(c, 5000));
    test_client_free(c);
    bystander_ok(f);
    after = test_switch_stats(f->ts);
    g_assert_cmpuint(after->port[VICTIM].disconnects[reason], ==,
                     before->port[VICTIM].disconnects[reason] + 1);
    g_assert_false(after->port[VICTIM].connected);
    arctic_switch_stats_free(before);
    arctic_switch_stats_free(after);
}

static void test_bad_frames(Fixture *f, gconstpointer data)
{
    enum { OVERRUN = ARCTIC_LINK_DEFAULT_CREDITS + 8 };
    uint8_t buf[OVERRUN * (ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MAX_SIZE)];
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t off = 0, size;
    unsigned i;
    struct arctic_hello hello = { .magic = ARCTIC_LINK_MAGIC,
                                  .version_major = 1, .node_id = VICTIM };

    arctic_frame_header_encode(buf, ARCTIC_FRAME_CREDIT, ARCTIC_CREDIT_SIZE);
    buf[2] = 1;     /* flags */
    check_disconnect(f, buf, 12, ARCTIC_DISCONNECT_BAD_FRAME_FLAGS, 8);

    arctic_frame_header_encode(buf, 77, 4);
    check_disconnect(f, buf, 12, ARCTIC_DISCONNECT_BAD_FRAME_TYPE, 8);

    arctic_frame_header_encode(buf, ARCTIC_FRAME_PACKET, 100000);
    check_disconnect(f, buf, 8, ARCTIC_DISCONNECT_BAD_FRAME_LENGTH, 8);

    arctic_frame_header_encode(buf, ARCTIC_FRAME_PACKET, 5);
    check_disconnect(f, buf, 13, ARCTIC_DISCONNECT_BAD_FRAME_LENGTH, 8);

    arctic_frame_header_encode(buf, ARCTIC_FRAME_HELLO, ARCTIC_HELLO_SIZE);
    arctic_hello_encode(buf + 8, &hello);
    check_disconnect(f, buf, 8 + ARCTIC_HELLO_SIZE,
                     ARCTIC_DISCONNECT_UNEXPECTED_FRAME, 8);

    memset(buf, 0, sizeof(buf));
    arctic_frame_header_encode(buf, ARCTIC_FRAME_WELCOME, ARCTIC_WELCOME_SIZE);
    check_disconnect(f, buf, 8 + ARCTIC_WELCOME_SIZE,
                     ARCTIC_DISCONNECT_UNEXPECTED_FRAME, 8);

    /*
     * More packets in one write than the switch's credits (sent to itself,
     * so no other port sees them).
     */
    for (i = 0; i < OVERRUN; i++) {
        size = test_build_packet(pkt, VICTIM, VICTIM, false, false, i, 20);
        arctic_frame_header_encode(buf + off, ARCTIC_FRAME_PACKET, size);
        memcpy(buf + off + 8, pkt, size);
        off += 8 + size;
    }
    check_disconnect(f, buf, off, ARCTIC_DISCONNECT_CREDIT_OVERRUN, 8);

    arctic_frame_header_encode(buf, ARCTIC_FRAME_CREDIT, ARCTIC_CREDIT_SIZE);
    arctic_put_le16(buf + 8, 65535);
    arctic_put_le16(buf + 10, 0);
    check_disconnect(f, buf, 12, ARCTIC_DISCONNECT_CREDIT_OVERFLOW, 8);

    /* Plain garbage after the handshake. */
    for (i = 0; i < 512; i++) {
        buf[i] = (uint8_t)(i * 37 + 11);
    }
    /* (its first header has non-zero flags, checked first) */
    check_disconnect(f, buf, 512, ARCTIC_DISCONNECT_BAD_FRAME_FLAGS, 8);
}

/* Frames split at every byte boundary reassemble into the same packets. */
static void test_split_frames(Fixture *f, gconstpointer data)
{
    TestClient *c = test_client_connect(f->ts->socket_path, VICTIM, 8, 8);
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MAX_SIZE];
    unsigned i, k;

    for (k = 0; k < 3; k++) {
        size_t size = test_build_packet(frame + 8, VICTIM, BYSTANDER_RX,
                                        false, false, k, 20);
        g_autoptr(GBytes) got = NULL;
        unsigned src, dst;
        uint32_t seq;
        bool high;

        arctic_frame_header_encode(frame, ARCTIC_FRAME_PACKET, size);
        for (i = 0; i < 8 + size; i++) {
            test_client_write(c, frame + i, 1);
            if (i % 16 == 0) {
                g_usleep(200);
            }
        }
        got = test_client_recv_packet(f->rx, 2000);
        g_assert_nonnull(got);
        g_assert_true(test_packet_valid(g_bytes_get_data(got, NULL),
                                        g_bytes_get_size(got), &src, &dst,
                                        &seq, &high));
        g_assert_cmpuint(seq, ==, k);
        test_client_return_credits(f->rx, 1, 0);
    }
    test_client_free(c);
}

static void test_reconnect(Fixture *f, gconstpointer data)
{
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size;
    TestClient *c = test_client_connect(f->ts->socket_path, VICTIM, 0, 8);
    TestClient *again;
    ArcticSwitchStats *st;
    unsigned i;

    /* Packets parked for the victim (it grants no low credit) are dropped
     * when it goes, and the sender gets its credits back. */
    for (i = 0; i < 5; i++) {
        size = test_build_packet(pkt, BYSTANDER_TX, VICTIM, false, false, i,
                                 2);
        g_assert_true(test_client_send_packet(f->tx, pkt, size, 2000));
    }
    test_client_free(c);
    while (f->tx->send_credits[0] < ARCTIC_LINK_DEFAULT_CREDITS) {
        g_assert_true(test_client_poll(f->tx, 2000));
    }
    /* Down: a packet to it is dropped as port_down. */
    size = test_build_packet(pkt, BYSTANDER_TX, VICTIM, false, false, 5, 2);
    g_assert_true(test_client_send_packet(f->tx, pkt, size, 2000));
    bystander_ok(f);

    /* The same node id again, and traffic flows to it. */
    c = test_client_connect(f->ts->socket_path, VICTIM, 8, 8);
    size = test_build_packet(pkt, BYSTANDER_TX, VICTIM, false, false, 6, 2);
    g_assert_true(test_client_send_packet(f->tx, pkt, size, 2000));
    {
        g_autoptr(GBytes) got = test_client_recv_packet(c, 2000);

        g_assert_nonnull(got);
    }
    /* A restarted QEMU: close and reconnect at once, before the switch
     * may have seen the end of file. */
    for (i = 0; i < 20; i++) {
        test_client_free(c);
        g_assert_cmpuint(test_client_try_connect(f->ts->socket_path, VICTIM,
                                                 8, 8, &again), ==, 0);
        c = again;
    }
    st = test_switch_stats(f->ts);
    g_assert_cmpuint(st->port[VICTIM].connects, ==, 22);
    g_assert_cmpuint(st->port[VICTIM].disconnects[
                         ARCTIC_DISCONNECT_PEER_CLOSED], ==, 21);
    g_assert_cmpuint(st->port[BYSTANDER_TX].prio[0]
                     .drops[ARCTIC_DROP_PORT_DOWN], ==, 6);
    g_assert_cmpuint(st->port[VICTIM].prio[0].tx_packets, ==, 1);
    g_assert_cmpuint(st->packets_in_use, ==, 0);
    arctic_switch_stats_free(st);
    test_client_free(c);
}

/* A socket file left by a dead switch is taken over; a live one is not.
 * Clients reconnect to the new switch. */
static void test_switch_restart(void)
{
    ArcticSwitchConfig config;
    g_autofree char *dir = g_dir_make_tmp("arctic-restart-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "sw.sock", NULL);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    int stale = socket(AF_UNIX, SOCK_STREAM, 0);
    ArcticSwitch *sw, *second;
    GError *err = NULL;
    GThread *thread;
    TestClient *c;

    /* A socket bound and abandoned, as by a crashed switch. */
    g_strlcpy(addr.sun_path, path, sizeof(addr.sun_path));
    g_assert_cmpint(bind(stale, (struct sockaddr *)&addr, sizeof(addr)), ==,
                    0);
    close(stale);

    arctic_switch_config_init(&config);
    config.ports = 4;
    config.socket_path = path;
    sw = arctic_switch_new(&config, &err);
    g_assert_no_error(err);
    second = arctic_switch_new(&config, &err);
    g_assert_null(second);
    g_assert_error(err, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE);
    g_clear_error(&err);

    thread = test_switch_run_thread(sw);
    c = test_client_connect(path, 2, 8, 8);
    test_client_free(c);
    arctic_switch_stop(sw);
    g_thread_join(thread);
    arctic_switch_free(sw);
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));

    sw = arctic_switch_new(&config, &err);
    g_assert_no_error(err);
    thread = test_switch_run_thread(sw);
    c = test_client_connect(path, 2, 8, 8);
    test_client_free(c);
    arctic_switch_stop(sw);
    g_thread_join(thread);
    arctic_switch_free(sw);
    g_rmdir(dir);
}

/*
 * An NIU on another host connects over TCP, proves it knows the cluster's
 * key (and checks the switch's proof, harness.c), and talks to a local
 * one, which the switch challenges too.
 */
static void test_tcp_listener(void)
{
    static const char key[] = "0123456789abcdef-tcp-listener";
    ArcticSwitchConfig config;
    TestSwitch *ts;
    TestClient *local, *remote = NULL;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size;
    int port;

    arctic_switch_config_init(&config);
    config.ports = 4;
    config.tcp_address = "127.0.0.1:0";
    config.secret = (const uint8_t *)key;
    config.secret_len = strlen(key);
    ts = test_switch_start(&config);
    port = arctic_switch_tcp_port(ts->sw);
    g_assert_cmpint(port, >, 0);
    test_auth_key = g_bytes_new_static(key, strlen(key));
    local = test_client_connect(ts->socket_path, 0, 8, 8);
    g_assert_true(local->challenged && local->proved);
    g_assert_cmpuint(test_client_try_connect_fd(test_connect_tcp(port), 3, 8,
                                                8, TEST_OFFER_NONE, &remote),
                     ==, 0);
    g_assert_true(remote->challenged && remote->proved);
    g_clear_pointer(&test_auth_key, g_bytes_unref);

    size = test_build_packet(pkt, 3, 0, true, false, 5, 7);
    g_assert_true(test_client_send_packet(remote, pkt, size, 2000));
    {
        g_autoptr(GBytes) got = test_client_recv_packet(local, 2000);

        g_assert_nonnull(got);
        g_assert_cmpmem(g_bytes_get_data(got, NULL), g_bytes_get_size(got),
                        pkt, size);
    }
    size = test_build_packet(pkt, 0, 3, false, false, 6, 1);
    g_assert_true(test_client_send_packet(local, pkt, size, 2000));
    {
        g_autoptr(GBytes) got = test_client_recv_packet(remote, 2000);

        g_assert_nonnull(got);
        g_assert_cmpmem(g_bytes_get_data(got, NULL), g_bytes_get_size(got),
                        pkt, size);
    }
    test_client_free(local);
    test_client_free(remote);
    test_switch_stop(ts);
}

/*
 * Connections that never say HELLO cannot lock a real NIU out: with the
 * switch's 64 pending places taken, the one that has waited longest makes
 * room for each new connection, and a real NIU joins at once.
 */
static void test_idle_connections_evicted(void)
{
    enum { IDLE = 80 };
    ArcticSwitchConfig config;
    TestSwitch *ts;
    TestClient *niu;
    int idle[IDLE];
    unsigned i, closed = 0;
    gint64 start, took_us;

    arctic_switch_config_init(&config);
    config.ports = 4;
    ts = test_switch_start(&config);
    for (i = 0; i < IDLE; i++) {
        idle[i] = test_connect_unix(ts->socket_path);
    }
    start = g_get_monotonic_time();
    niu = test_client_connect(ts->socket_path, 1, 8, 8);
    took_us = g_get_monotonic_time() - start;
    g_test_message("joined in %" G_GINT64_FORMAT " us with %d idle "
                   "connections open", took_us, IDLE);
    g_assert_cmpint(took_us, <, G_USEC_PER_SEC);
    g_assert_cmpuint(niu->num_nodes, ==, 4);
    /* The oldest idle ones were closed; the newest 63 still wait. */
    for (i = 0; i < IDLE; i++) {
        struct pollfd pfd = { .fd = idle[i], .events = POLLIN };
        char byte;

        if (poll(&pfd, 1, 0) == 1 && recv(idle[i], &byte, 1, 0) == 0) {
            closed++;
        }
        close(idle[i]);
    }
    g_assert_cmpuint(closed, ==, IDLE + 1 - 64);
    test_client_free(niu);
    test_switch_stop(ts);
}

/* Poll @c for @ms and return its low-priority send credits. */
static unsigned low_credits_after(TestClient *c, int ms)
{
    gint64 deadline = g_get_monotonic_time() + ms * 1000ll;

    while (g_get_monotonic_time() < deadline) {
        test_client_poll(c, 10);
    }
    return c->send_credits[ARCTIC_PRIORITY_LOW];
}

/*
 * Freed credits ride with frames going to the NIU anyway; alone they wait
 * for half a window or --credit-delay-us.
 */
static void test_credits_coalesced(void)
{
    ArcticSwitchConfig config;
    TestSwitch *ts;
    TestClient *a, *b;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    g_autoptr(GBytes) got = NULL;
    size_t size;
    uint32_t seq = 0;
    unsigned i;

    arctic_switch_config_init(&config);
    config.ports = 2;
    config.credits = 8;
    config.credit_delay_us = 1000 * 1000;           /* 1 s */
    ts = test_switch_start(&config);
    a = test_client_connect(ts->socket_path, 0, 8, 8);
    b = test_client_connect(ts->socket_path, 1, 8, 8);

    /* One packet: its credit waits... */
    size = test_build_packet(pkt, 0, 1, false, false, seq++, 3);
    g_assert_true(test_client_send_packet(a, pkt, size, 2000));
    got = test_client_recv_packet(b, 2000);
    g_assert_nonnull(got);
    g_clear_pointer(&got, g_bytes_unref);
    test_client_return_credits(b, 1, 0);
    g_assert_cmpuint(low_credits_after(a, 200), ==, 7);
    /* ...and comes with the answer. */
    size = test_build_packet(pkt, 1, 0, false, false, 0, 3);
    g_assert_true(test_client_send_packet(b, pkt, size, 2000));
    got = test_client_recv_packet(a, 2000);
    g_assert_nonnull(got);
    g_clear_pointer(&got, g_bytes_unref);
    g_assert_cmpuint(a->send_credits[ARCTIC_PRIORITY_LOW], ==, 8);
    test_client_return_credits(a, 1, 0);

    /* Half the window: back at once. */
    for (i = 0; i < 4; i++) {
        size = test_build_packet(pkt, 0, 1, false, false, seq++, 3);
        g_assert_true(test_client_send_packet(a, pkt, size, 2000));
    }
    g_assert_cmpuint(low_credits_after(a, 200), ==, 8);

    /* Alone: when the delay has passed. */
    size = test_build_packet(pkt, 0, 1, false, false, seq++, 3);
    g_assert_true(test_client_send_packet(a, pkt, size, 2000));
    g_assert_cmpuint(low_credits_after(a, 300), ==, 7);
    g_assert_cmpuint(low_credits_after(a, 1500), ==, 8);

    test_client_free(a);
    test_client_free(b);
    test_switch_stop(ts);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
#define ADD(path, fn) \
    g_test_add("/switch/protocol/" path, Fixture, NULL, fixture_setup, fn, \
               fixture_teardown)
    ADD("handshake-rejects", test_handshake_rejects);
    ADD("bad-packets", test_bad_packets);
    ADD("bad-frames", test_bad_frames);
    ADD("split-frames", test_split_frames);
    ADD("reconnect", test_reconnect);
#undef ADD
    g_test_add_func("/switch/protocol/switch-restart", test_switch_restart);
    g_test_add_func("/switch/protocol/tcp-listener", test_tcp_listener);
    g_test_add_func("/switch/protocol/idle-connections-evicted",
                    test_idle_connections_evicted);
    g_test_add_func("/switch/protocol/credits-coalesced",
                    test_credits_coalesced);
    return g_test_run();
}
