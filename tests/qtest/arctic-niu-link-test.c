/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arctic-niu qtests: the link session: going down and up, the send order,
 * rejection, busy polling, the shared-memory rings.
 */

#include "qemu/osdep.h"
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include "qemu/futex.h"
#include "arctic-niu-test.h"

/*
 * USER_LINK_POLL: with the link thread, a read takes the input in the
 * reader's time, and the thread leaves input to the reader for
 * x-link-busy-poll-ns (60 s here): a packet stays in the socket until
 * the next read, which says it took something and delivers it.  A
 * chardev link and no link read NONE, and a chardev still delivers.
 */
static void test_link_busy_poll(void)
{
    const uint8_t hi = ARCTIC_PRIORITY_HIGH;
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t v = 0xb5b5, val = 0;
    size_t size;
    unsigned i;
    Niu *n;

    n = niu_start(false);
    g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==,
                    R_USER_LINK_POLL_NONE_MASK);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);

    n = niu_start_linked_props("x-link-busy-poll-ns=60000000000", 8, 8);
    mark_rx_slots(n);
    if (!link_thread()) {
        g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==,
                        R_USER_LINK_POLL_NONE_MASK);
        size = peer_data(n, wire, PEER, hi, n->peer_epoch, 0, 3, 1, 2, &v, 1);
        link_send_packet(n, wire, size);
        guest_wait_rx(n, ARCTIC_RXQ_HI);
        guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 1, 2, &v, 1);
        niu_stop(n);
        return;
    }
    /* Nothing waits yet; the read starts the busy polling. */
    g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==, 0);
    g_usleep(100 * 1000);               /* the thread stops reading */
    size = peer_data(n, wire, PEER, hi, n->peer_epoch, 0, 3, 1, 2, &v, 1);
    link_send_packet(n, wire, size);
    g_usleep(QUIET_MS * 1000);
    g_assert_false(FIELD_EX32(qtest_readl(n->qts, rx_tail_slot(n,
                                                   ARCTIC_RXQ_HI)),
                              MPI_HEADER, VALID));
    for (i = 0; i < 100 && !FIELD_EX32(val, USER_LINK_POLL, TOOK); i++) {
        val = user_r(n, A_USER_LINK_POLL);  /* the bytes may come in parts */
    }
    g_assert_cmphex(val, ==, R_USER_LINK_POLL_TOOK_MASK);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 1, 2, &v, 1);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RX_HI_PACKETS), ==, 1);
    /*
     * Its ack waited x-ack-delay-ns for company; with the thread asleep,
     * the next poll after that sends it.
     */
    g_usleep(10 * 1000);
    g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==, 0);
    expect_control(n, PEER, ARCTIC_E2E_ACK, hi, n->peer_epoch, 0, 0);

    /*
     * Arming the receive interrupt ends the polling: the thread takes
     * the next packet by itself, and the interrupt says so.
     */
    user_w(n, A_USER_IRQ_ARM, R_USER_IRQ_ARM_RX_MASK);
    size = peer_data(n, wire, PEER, hi, n->peer_epoch, 1, 3, 1, 2, &v, 1);
    link_send_packet(n, wire, size);
    guest_wait_rx(n, ARCTIC_RXQ_HI);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 1, 2, &v, 1);
    g_assert_cmphex(reg_r(n, A_NIU_IRQ_STATUS), ==, 1u << R_NIU_IRQ_RX_SHIFT);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);
}

static void test_link_down_up_loses_nothing(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t v[5] = { 50, 51, 52, 53, 54 };
    uint32_t epoch = 0;
    unsigned i;

    mark_rx_slots(n);
    for (i = 0; i < 3; i++) {
        guest_send(n, ARCTIC_TXQ_HI, 2, 1, i, 0, &v[i], 1);
    }
    doorbell(n);
    for (i = 0; i < 3; i++) {
        epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, i, 1, i, 0, &v[i], 1);
    }
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 0, 0);
    /* An incoming packet is acked too, then the cable is pulled. */
    peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 9, 9, 9, NULL, 0);
    link_close(n);
    for (i = 3; i < 5; i++) {
        guest_send(n, ARCTIC_TXQ_HI, 2, 1, i, 0, &v[i], 1);
    }
    doorbell(n);
    wait_link_dropped(n, 0);
    g_assert_cmpint(FIELD_EX32(reg_r(n, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                               UP), ==, 0);
    /*
     * The device reconnects; 1 and 2 were never acked, 3 and 4 never
     * sent: all four go out, in order, on the new session.
     */
    link_handshake(n, 8, 8);
    for (i = 1; i < 5; i++) {
        expect_data(n, 2, ARCTIC_PRIORITY_HIGH, i, 1, i, 0, &v[i], 1);
    }
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 4, 0);
    qtest_clock_step(n->qts, 100 * RETRY_NS);
    link_expect_silence(n);
    /* The receive stream survived too: its next packet is taken. */
    peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 9, 10, 10, NULL, 0);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 9, 9, 9, NULL, 0);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 9, 10, 10, NULL, 0);
    g_assert_cmpint(FIELD_EX32(reg_r(n, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                               UP_COUNT), ==, 2);
    g_assert_cmpint(counter(n, ARCTIC_CNT_LINK_DOWNS), ==, 1);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_HI_PACKETS), ==, 5);
    niu_stop(n);
}

/*
 * The send order survives many sessions without credit: every link-up
 * queues every waiting line again (the old entries of the send order go
 * stale), far more often than the ring of the send order holds, so it is
 * rebuilt; the packets still go out once each, in order.
 */
static void test_link_send_order_kept(void)
{
    enum { MSGS = 28, CYCLES = 40 };
    Niu *n;
    uint32_t v;
    unsigned i;

    n = niu_start_linked_props("lines=32", 0, 0);
    for (i = 0; i < MSGS; i++) {
        v = 1000 + i;
        guest_send(n, ARCTIC_TXQ_HI, 2, 1, i, 0, &v, 1);
    }
    doorbell(n);
    link_expect_silence(n);             /* no credit: all 28 wait */
    for (i = 0; i < CYCLES; i++) {
        link_close(n);
        wait_link_dropped(n, i);
        link_handshake(n, 0, 0);
    }
    link_send_credit(n, 64, 0);
    for (i = 0; i < MSGS; i++) {
        v = 1000 + i;
        expect_data(n, 2, ARCTIC_PRIORITY_HIGH, i, 1, i, 0, &v, 1);
    }
    link_expect_silence(n);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_HI_PACKETS), ==, MSGS);
    niu_stop(n);
}

static void test_link_rejected_then_accepted(void)
{
    Niu *n = niu_start(true);
    uint8_t body[ARCTIC_REJECT_SIZE] = { 0 };
    uint16_t type;
    uint32_t len;
    uint8_t buf[ARCTIC_LINK_MAX_BODY];

    niu_setup(n);
    link_accept(n);
    link_expect_hello(n);
    arctic_put_le32(body, ARCTIC_REJECT_NODE_BUSY);
    strcpy((char *)body + 4, "node 1 is taken");
    link_write(n, ARCTIC_FRAME_REJECT, body, sizeof(body));
    g_assert_cmpint(link_read(n, &type, buf, &len, WAIT_MS), ==, -1);
    link_close(n);
    g_assert_true(FIELD_EX32(reg_r(n, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                             REJECTED));
    g_assert_cmpint(FIELD_EX32(reg_r(n, A_NIU_ERROR_INFO), NIU_ERROR_INFO,
                               DETAIL), ==, ARCTIC_REJECT_NODE_BUSY);
    expect_errors(n, 1u << ARCTIC_ERR_LINK_REJECTED);
    link_handshake(n, 8, 8);
    g_assert_false(FIELD_EX32(reg_r(n, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                              REJECTED));
    niu_stop(n);
}

/* Is @fd one end of a UNIX stream socket? */
static bool is_wake_socket(int fd)
{
    int domain = 0, type = 0;
    socklen_t len = sizeof(domain);

    g_assert_cmpint(getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len), ==,
                    0);
    len = sizeof(type);
    g_assert_cmpint(getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len), ==, 0);
    return domain == AF_UNIX && type == SOCK_STREAM;
}

/* Start an NIU with @props and take its HELLO. */
static Niu *start_to_hello(const char *props)
{
    Niu *n = niu_start_node("listen", NIU_NODE, props);

    niu_setup(n);
    link_accept(n);
    link_expect_hello(n);
    return n;
}

/*
 * What the HELLO carries: with the link thread on a UNIX socket the
 * rings' descriptors (a memfd sealed against any change of size, holding
 * a valid area, and the switch's end of the link's wake-up socket pair);
 * with link-rings=off or a chardev none.
 */
static void test_link_rings_offer(void)
{
    Niu *n = start_to_hello("");
    int area_fd, seals;

    if (!link_thread()) {
        g_assert_cmpuint(n->offered, ==, 0);
        niu_stop(n);
        return;
    }
    g_assert_cmpuint(n->offered, ==, ARCTIC_RING_FDS);
    area_fd = n->offered_fds[ARCTIC_RING_FD_AREA];
    seals = fcntl(area_fd, F_GET_SEALS);
    g_assert_cmpint(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), ==,
                    F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    g_assert_true(is_wake_socket(n->offered_fds[ARCTIC_RING_FD_WAKE]));
    link_adopt_rings(n);            /* checks the area's header */
    g_assert_cmpuint(n->ring_in.size, ==, ARCTIC_RING_DATA_SIZE);
    niu_stop(n);

    n = start_to_hello("link-rings=off");
    g_assert_cmpuint(n->offered, ==, 0);
    niu_stop(n);
}

/* A WELCOME that takes rings nobody offered breaks the link protocol. */
static void test_link_rings_unoffered(void)
{
    Niu *n = start_to_hello("link-rings=off");
    uint8_t buf[ARCTIC_LINK_MAX_BODY];
    uint16_t type;
    uint32_t len;

    g_assert_cmpuint(n->offered, ==, 0);
    link_send_welcome_flags(n, R_ARCTIC_WELCOME_FLAGS_RINGS_MASK, 8, 8);
    g_assert_cmpint(link_read(n, &type, buf, &len, WAIT_MS), ==, -1);
    link_close(n);
    expect_errors(n, 1u << ARCTIC_ERR_LINK_PROTOCOL);
    link_handshake(n, 8, 8);
    g_assert_false(n->rings);
    niu_stop(n);
}

/*
 * Once the rings carry the link, a switch that breaks them (@head_skew:
 * a head that many bytes beyond a whole ring; 0: a byte on the socket
 * instead) ends the connection with a protocol error, and the NIU comes
 * back and carries a message.
 */
static void rings_broken(uint32_t head_skew)
{
    Niu *n;
    uint32_t v = 0x5151;

    if (!link_thread()) {
        g_test_skip("the rings need the link thread");
        return;
    }
    n = start_to_hello("");
    link_adopt_rings(n);
    link_send_welcome_flags(n, R_ARCTIC_WELCOME_FLAGS_RINGS_MASK, 8, 8);
    wait_link_status(n, R_NIU_LINK_STATUS_UP_MASK, true);
    mark_rx_slots(n);
    peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 4, 5, 6, &v, 1);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 4, 5, 6, &v, 1);
    if (head_skew) {
        struct arctic_ring_area *area = n->ring_area;

        area->ctl[ARCTIC_RING_TO_NIU].head = n->ring_out.own +
                                             n->ring_out.size + head_skew;
        ring_kick(n);
    } else {
        g_assert_cmpint(send(n->fd, "x", 1, MSG_NOSIGNAL), ==, 1);
    }
    wait_link_dropped(n, 0);
    link_close(n);
    expect_errors(n, 1u << ARCTIC_ERR_LINK_PROTOCOL);
    link_handshake(n, 8, 8);
    peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 4, 7, 8, &v, 1);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 4, 7, 8, &v, 1);
    niu_stop(n);
}

static void test_link_rings_bad_head(void)
{
    rings_broken(1);
}

static void test_link_rings_socket_bytes(void)
{
    rings_broken(0);
}

/*
 * Direct rings (link 1.5, link-protocol.md §6.8): this test plays the
 * switch that hands them out and node PEER at their other end.
 */

/* A direct area, as arctic-switch makes one: a sealed memfd, mapped. */
static int direct_area(struct arctic_ring_area **area, size_t *size)
{
    int fd = memfd_create("arctic-test-direct", MFD_CLOEXEC |
                                                MFD_ALLOW_SEALING);

    *size = arctic_ring_area_size(ARCTIC_DIRECT_DATA_SIZE);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, *size), ==, 0);
    g_assert_cmpint(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW),
                    ==, 0);
    *area = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    g_assert_true(*area != MAP_FAILED);
    arctic_ring_area_init(*area, ARCTIC_DIRECT_DATA_SIZE);
    return fd;
}

/* DIRECT_RING (with @fd) or DIRECT_STOP (@fd -1) on the link's socket. */
static void direct_tell(Niu *n, uint16_t type, unsigned peer,
                        enum arctic_direct_role role, int fd)
{
    uint8_t buf[ARCTIC_LINK_HEADER_SIZE + ARCTIC_DIRECT_SIZE];
    struct arctic_direct d = { .peer = peer, .role = role };
    struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };

    arctic_frame_header_encode_flags(buf, type, 0, ARCTIC_DIRECT_SIZE);
    arctic_direct_encode(buf + ARCTIC_LINK_HEADER_SIZE, &d);
    g_assert_cmpint(qio_channel_writev_full(QIO_CHANNEL(n->sioc), &iov, 1,
                                            fd >= 0 ? &fd : NULL,
                                            fd >= 0 ? 1 : 0, 0,
                                            &error_abort), ==, sizeof(buf));
}

/* The PACKET frame of @wire for a direct ring of priority @prio. */
static size_t direct_frame(uint8_t *frame, uint8_t prio, const uint8_t *wire,
                           size_t size)
{
    arctic_frame_header_encode_flags(frame, ARCTIC_FRAME_PACKET,
                                     FIELD_DP32(0, ARCTIC_FRAME_FLAGS,
                                                PRIORITY, prio), size);
    memcpy(frame + ARCTIC_LINK_HEADER_SIZE, wire, size);
    return ARCTIC_LINK_HEADER_SIZE + size;
}

/* PEER writes @wire into its direct ring of priority @prio, and kicks. */
static void direct_put(struct arctic_ring_area *a, uint8_t prio,
                       const uint8_t *wire, size_t size)
{
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MAX_SIZE];
    size_t len = direct_frame(frame, prio, wire, size);
    struct arctic_ring r;

    arctic_direct_attach(&r, a, ARCTIC_DIRECT_DATA_SIZE, prio);
    r.own = a->ctl[prio].head;
    g_assert_cmpuint(arctic_ring_write(&r, frame, len), ==, len);
    if (arctic_ring_wake_consumer(&r)) {
        qatomic_inc(&a->kicks.niu);
        qemu_futex_wake(&a->kicks.niu, INT_MAX);
    }
}

/* The next packet the NIU wrote into direct ring @prio, within @ms. */
static size_t direct_take(struct arctic_ring_area *a, uint8_t prio,
                          uint8_t *wire, int ms)
{
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MAX_SIZE];
    struct arctic_frame_header h;
    struct arctic_ring r;
    int i;

    arctic_direct_attach(&r, a, ARCTIC_DIRECT_DATA_SIZE, prio);
    r.own = a->ctl[prio].tail;
    for (i = 0; i < ms && !arctic_ring_used(&r); i++) {
        g_usleep(1000);
    }
    if (!arctic_ring_used(&r)) {
        return 0;
    }
    g_assert_true(arctic_ring_peek(&r, frame, ARCTIC_LINK_HEADER_SIZE));
    arctic_frame_header_decode(frame, &h);
    g_assert_cmpint(h.type, ==, ARCTIC_FRAME_PACKET);
    g_assert_cmpint(h.flags, ==, FIELD_DP32(0, ARCTIC_FRAME_FLAGS, PRIORITY,
                                            prio));
    g_assert_cmpuint(arctic_ring_read(&r, frame,
                                      ARCTIC_LINK_HEADER_SIZE + h.length),
                     ==, ARCTIC_LINK_HEADER_SIZE + h.length);
    g_assert_cmpint(arctic_wire_check(frame + ARCTIC_LINK_HEADER_SIZE,
                                      h.length), ==, ARCTIC_WIRE_OK);
    memcpy(wire, frame + ARCTIC_LINK_HEADER_SIZE, h.length);
    return h.length;
}

static uint64_t state_count(Niu *n, const char *name)
{
    QDict *rsp, *state = niu_state(n, &rsp);
    uint64_t v = qdict_get_int(state, name);

    qobject_unref(rsp);
    return v;
}

/*
 * An NIU that offered direct rings, its link on rings and its WELCOME
 * saying DIRECT, Rx slots marked; NULL (the test skipped) when the link
 * cannot have rings.
 */
static Niu *direct_start(void)
{
    Niu *n;

    if (!link_rings_wanted()) {
        g_test_skip("direct rings come with the rings");
        return NULL;
    }
    n = start_to_hello("x-ack-delay-ns=0,retry-timeout-ns=10000000000");
    g_assert_cmphex(n->in_flags, ==, R_ARCTIC_HELLO_FLAGS_DIRECT_MASK);
    link_adopt_rings(n);
    link_send_welcome_flags(n, R_ARCTIC_WELCOME_FLAGS_RINGS_MASK |
                               R_ARCTIC_WELCOME_FLAGS_DIRECT_MASK, 8, 8);
    wait_link_status(n, R_NIU_LINK_STATUS_UP_MASK, true);
    mark_rx_slots(n);
    return n;
}

/*
 * Given the pair to and from PEER, the NIU takes PEER's message from its
 * ring and answers there, sends its own there and takes PEER's ack from
 * the ring; a packet in PEER's ring that names another source is dropped
 * and counted; once the pair to PEER is taken back, the NIU sends through
 * the switch again.  A switch that sends a direct ring to an NIU whose
 * WELCOME did not say DIRECT breaks the link (rings_broken(0), above,
 * sends bytes on the socket; that is what those are).
 */
static void test_link_direct(void)
{
    const uint8_t hi = ARCTIC_PRIORITY_HIGH;
    struct arctic_ring_area *to_peer, *from_peer;
    size_t to_size, from_size, size;
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header h;
    uint32_t v = 0xd12ec7, w = 0xface;
    int to_fd, from_fd;
    Niu *n;

    n = direct_start();
    if (!n) {
        return;
    }
    from_fd = direct_area(&from_peer, &from_size);
    to_fd = direct_area(&to_peer, &to_size);
    /* The ring to PEER first, so that the answer to PEER finds it. */
    direct_tell(n, ARCTIC_FRAME_DIRECT_RING, PEER, ARCTIC_DIRECT_SEND, to_fd);
    direct_tell(n, ARCTIC_FRAME_DIRECT_RING, PEER, ARCTIC_DIRECT_RECEIVE,
                from_fd);
    close(from_fd);
    close(to_fd);

    /* PEER's message comes from its ring; the ack goes back the same way. */
    size = peer_data(n, wire, PEER, hi, n->peer_epoch, 0, 3, 1, 2, &v, 1);
    direct_put(from_peer, hi, wire, size);
    guest_wait_rx(n, ARCTIC_RXQ_HI);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 1, 2, &v, 1);
    size = direct_take(to_peer, hi, wire, WAIT_MS);
    g_assert_cmpuint(size, >, 0);
    arctic_e2e_decode(wire, &h);
    g_assert_cmpuint(h.kind, ==, ARCTIC_E2E_ACK);
    g_assert_cmpuint(h.src_node, ==, NIU_NODE);
    g_assert_cmpuint(h.dst_node, ==, PEER);
    g_assert_cmpuint(h.seq, ==, 0);

    /* Forged: PEER's ring says node 2 sent it.  Dropped, counted. */
    size = peer_data(n, wire, 2, hi, n->peer_epoch, 0, 3, 1, 2, &w, 1);
    direct_put(from_peer, hi, wire, size);
    for (int i = 0; i < WAIT_MS &&
         !state_count(n, "link-direct-refused"); i++) {
        g_usleep(1000);
    }
    g_assert_cmpuint(state_count(n, "link-direct-refused"), ==, 1);

    /* The NIU's own message goes into the ring to PEER, not the switch's. */
    guest_send(n, ARCTIC_TXQ_LO, PEER, 5, 6, 7, &w, 1);
    doorbell(n);
    size = direct_take(to_peer, ARCTIC_PRIORITY_LOW, wire, WAIT_MS);
    g_assert_cmpuint(size, >, 0);
    arctic_e2e_decode(wire, &h);
    g_assert_cmpuint(h.kind, ==, ARCTIC_E2E_DATA);
    g_assert_cmpuint(h.dst_node, ==, PEER);
    peer_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, h.epoch,
                 h.seq, 0);
    link_expect_silence(n);
    g_assert_cmpuint(state_count(n, "link-direct-received"), ==, 1);
    g_assert_cmpuint(state_count(n, "link-direct-sent"), ==, 2);
    g_assert_cmpuint(to_peer->sent_packets[hi], ==, 1);
    g_assert_cmpuint(to_peer->sent_packets[ARCTIC_PRIORITY_LOW], ==, 1);

    /* Taken back: through the switch again. */
    g_assert_cmpuint(state_count(n, "link-direct-to"), ==, 1);
    direct_tell(n, ARCTIC_FRAME_DIRECT_STOP, PEER, ARCTIC_DIRECT_SEND, -1);
    /* The NIU reads its socket every 10 ms: not a time, the ring gone. */
    for (int i = 0; i < WAIT_MS && state_count(n, "link-direct-to"); i++) {
        g_usleep(1000);
    }
    g_assert_cmpuint(state_count(n, "link-direct-to"), ==, 0);
    guest_send(n, ARCTIC_TXQ_LO, PEER, 5, 6, 8, &w, 1);
    doorbell(n);
    expect_data(n, PEER, ARCTIC_PRIORITY_LOW, h.seq + 1, 5, 6, 8, &w, 1);
    g_assert_cmpuint(direct_take(to_peer, ARCTIC_PRIORITY_LOW, wire, 100),
                     ==, 0);
    munmap(to_peer, to_size);
    munmap(from_peer, from_size);
    niu_stop(n);
}

/*
 * A direct ring whose head is one past its end: head - tail is the
 * ring's size + 1, the first count of bytes it cannot hold
 * (arctic_ring_used(), link-ring.h; the switch's rings have the same
 * case in tests/unit/link-ring-test.c and switch/tests/test-rings.c).
 * The NIU drops that ring unread, though a whole valid packet from PEER
 * sits at its start (and for good: a head put right later brings
 * nothing), and its link goes on: a new ring from PEER carries another
 * packet, which is the one delivered.
 */
static void test_link_direct_head_past_end(void)
{
    const uint8_t hi = ARCTIC_PRIORITY_HIGH;
    const unsigned hi_rx = ARCTIC_RXQ_HI;
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MAX_SIZE];
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_ring_area *broken, *good;
    size_t broken_size, good_size, size, len;
    uint32_t unread = 0xbad, taken = 0x600d;
    struct arctic_ring r;
    int fd;
    Niu *n;

    n = direct_start();
    if (!n) {
        return;
    }
    fd = direct_area(&broken, &broken_size);
    direct_tell(n, ARCTIC_FRAME_DIRECT_RING, PEER, ARCTIC_DIRECT_RECEIVE, fd);
    close(fd);

    /* The packet's bytes first, then the head, published once. */
    size = peer_data(n, wire, PEER, hi, n->peer_epoch, 0, 3, 1, 2,
                     &unread, 1);
    len = direct_frame(frame, hi, wire, size);
    arctic_direct_attach(&r, broken, ARCTIC_DIRECT_DATA_SIZE, hi);
    memcpy(r.data, frame, len);
    qatomic_store_release(&r.ctl->head,
                          qatomic_read(&r.ctl->tail) + r.size + 1);
    qatomic_inc(&broken->kicks.niu);
    qemu_futex_wake(&broken->kicks.niu, INT_MAX);
    g_usleep(20 * ARCTIC_RING_LOOK_MS * 1000);  /* it looks every 10 ms */
    g_assert_cmpuint(state_count(n, "link-direct-received"), ==, 0);
    g_assert_false(FIELD_EX32(qtest_readl(n->qts, rx_tail_slot(n, hi_rx)),
                              MPI_HEADER, VALID));
    g_assert_true(reg_r(n, A_NIU_LINK_STATUS) & R_NIU_LINK_STATUS_UP_MASK);
    expect_errors(n, 0);
    /* Dropped, not waited on: a head put right later brings nothing. */
    qatomic_store_release(&r.ctl->head, qatomic_read(&r.ctl->tail) + len);
    qatomic_inc(&broken->kicks.niu);
    qemu_futex_wake(&broken->kicks.niu, INT_MAX);
    g_usleep(20 * ARCTIC_RING_LOOK_MS * 1000);
    g_assert_cmpuint(state_count(n, "link-direct-received"), ==, 0);

    /* A new ring from PEER: its packet is the one delivered, and acked. */
    fd = direct_area(&good, &good_size);
    direct_tell(n, ARCTIC_FRAME_DIRECT_RING, PEER, ARCTIC_DIRECT_RECEIVE, fd);
    close(fd);
    size = peer_data(n, wire, PEER, hi, n->peer_epoch, 0, 3, 1, 2, &taken, 1);
    direct_put(good, hi, wire, size);
    guest_wait_rx(n, hi_rx);
    guest_expect_rx(n, hi_rx, PEER, 3, 1, 2, &taken, 1);
    expect_control(n, PEER, ARCTIC_E2E_ACK, hi, n->peer_epoch, 0, 0);
    g_assert_cmpuint(state_count(n, "link-direct-received"), ==, 1);
    munmap(broken, broken_size);
    munmap(good, good_size);
    niu_stop(n);
}

/* This switch goes to sleep on its empty ring, as arctic-switch does. */
static void ring_switch_sleeps(Niu *n)
{
    uint8_t buf[ARCTIC_LINK_MAX_BODY];
    uint16_t type;
    uint32_t len;

    while (!arctic_ring_consumer_sleep(&n->ring_in)) {
        g_assert_cmpint(link_read(n, &type, buf, &len, QUIET_MS), ==, 1);
    }
}

/*
 * With x-link-kick-yield=on (off by default: a register read does not
 * yield unless the launcher says the host's cores are all taken) a vCPU
 * whose busy poll wakes the sleeping switch gives its CPU away right
 * after; a doorbell that wakes it does not.  The state view counts the
 * kicks and the yields.  With from_poll a packet from the peer waits in
 * the ring and a read of USER_LINK_POLL (here from the qtest, the main
 * loop) delivers it and sends its ack at once (x-ack-delay-ns=0) to this
 * switch, asleep on its ring; without, polling runs (60 s after a read)
 * and a doorbell sends.
 */
typedef struct {
    const char *path, *props;
    bool from_poll, yields;
} KickYieldCase;

static void rings_kick_yield(const void *data)
{
    const KickYieldCase *c = data;
    g_autofree char *all = g_strdup_printf("x-link-busy-poll-ns=60000000000,"
                                           "x-ack-delay-ns=0%s%s",
                                           *c->props ? "," : "", c->props);
    const uint8_t hi = ARCTIC_PRIORITY_HIGH;
    uint32_t v = 0x7e1d, val = 0;
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint64_t kicks, yielded, want = c->yields ? 1 : 0;
    QDict *rsp, *state;
    unsigned i;
    size_t size;
    Niu *n;

    if (!link_thread()) {
        g_test_skip("the rings need the link thread");
        return;
    }
    n = start_to_hello(all);
    link_adopt_rings(n);
    link_send_welcome_flags(n, R_ARCTIC_WELCOME_FLAGS_RINGS_MASK, 8, 8);
    wait_link_status(n, R_NIU_LINK_STATUS_UP_MASK, true);
    mark_rx_slots(n);
    g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==, 0);
    g_usleep(100 * 1000);               /* the thread stops reading */
    state = niu_state(n, &rsp);
    kicks = qdict_get_int(state, "link-switch-kicks");
    yielded = qdict_get_int(state, "link-kick-yields");
    qobject_unref(rsp);
    g_assert_cmpuint(yielded, ==, 0);

    ring_switch_sleeps(n);
    if (c->from_poll) {
        size = peer_data(n, wire, PEER, hi, n->peer_epoch, 0, 3, 1, 2, &v, 1);
        link_send_packet(n, wire, size);
        for (i = 0; i < 100 && !FIELD_EX32(val, USER_LINK_POLL, TOOK); i++) {
            val = user_r(n, A_USER_LINK_POLL);
        }
        g_assert_cmphex(val, ==, R_USER_LINK_POLL_TOOK_MASK);
    } else {
        guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v, 1);
        doorbell(n);
    }
    state = niu_state(n, &rsp);
    g_assert_cmpuint(qdict_get_int(state, "link-switch-kicks"), >, kicks);
    g_assert_cmpuint(qdict_get_int(state, "link-kick-yields"), ==, want);
    qobject_unref(rsp);
    arctic_ring_consumer_awake(&n->ring_in);
    if (c->from_poll) {
        guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 1, 2, &v, 1);
        expect_control(n, PEER, ARCTIC_E2E_ACK, hi, n->peer_epoch, 0, 0);
    } else {
        expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 1, 0, 0, &v, 1);
    }
    niu_stop(n);
}

static const KickYieldCase kick_yield_cases[] = {
    { "/arctic-niu/link/rings-kick-yield", "x-link-kick-yield=on",
      true, true },
    { "/arctic-niu/link/rings-kick-no-yield", "", true, false },
    { "/arctic-niu/link/rings-kick-doorbell", "x-link-kick-yield=on",
      false, false },
};

enum cpu_wake_kind {
    CPU_WAKE_GOOD,          /* WELCOME says CPU_WAKE */
    CPU_WAKE_WITH_FDS,      /* ... and carries descriptors anyway */
    CPU_WAKE_NO_FLAG,       /* no CPU_WAKE */
};

/*
 * x-link-poll-yield: a read of USER_LINK_POLL that takes nothing says
 * YIELDS and gives the host core away (link-poll-yields counts it); one
 * that takes input says TOOK and YIELDS and does not yield; a link that
 * cannot be polled reads NONE alone and never yields.
 */
static uint64_t poll_yields(Niu *n)
{
    QDict *rsp, *state = niu_state(n, &rsp);
    uint64_t yields = qdict_get_int(state, "link-poll-yields");

    qobject_unref(rsp);
    return yields;
}

static void test_link_poll_yield(void)
{
    const uint32_t both = R_USER_LINK_POLL_TOOK_MASK |
                          R_USER_LINK_POLL_YIELDS_MASK;
    const uint8_t hi = ARCTIC_PRIORITY_HIGH;
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t v = 0x91e1d, val = 0;
    uint64_t before;
    size_t size;
    unsigned i;
    Niu *n;

    n = niu_start_node(NULL, NIU_NODE, "x-link-poll-yield=on");
    g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==,
                    R_USER_LINK_POLL_NONE_MASK);
    g_assert_cmpuint(poll_yields(n), ==, 0);
    niu_stop(n);

    n = niu_start_linked_props("x-link-busy-poll-ns=60000000000,"
                               "x-link-poll-yield=on", 8, 8);
    mark_rx_slots(n);
    if (!link_thread()) {
        g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==,
                        R_USER_LINK_POLL_NONE_MASK);
        g_assert_cmpuint(poll_yields(n), ==, 0);
        niu_stop(n);
        return;
    }
    g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==,
                    R_USER_LINK_POLL_YIELDS_MASK);
    g_usleep(100 * 1000);               /* the thread stops reading */
    before = poll_yields(n);
    g_assert_cmpuint(before, >=, 1);
    for (i = 0; i < 3; i++) {
        g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==,
                        R_USER_LINK_POLL_YIELDS_MASK);
    }
    g_assert_cmpuint(poll_yields(n), ==, before + 3);

    size = peer_data(n, wire, PEER, hi, n->peer_epoch, 0, 3, 1, 2, &v, 1);
    link_send_packet(n, wire, size);
    g_usleep(QUIET_MS * 1000);
    for (i = 0; i < 100 && !FIELD_EX32(val, USER_LINK_POLL, TOOK); i++) {
        val = user_r(n, A_USER_LINK_POLL);  /* the bytes may come in parts */
    }
    g_assert_cmphex(val, ==, both);
    g_assert_cmpuint(poll_yields(n), ==, before + 3 + i - 1);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 1, 2, &v, 1);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);

    /* Off (the default): no YIELDS, nothing given away. */
    n = niu_start_linked_props("x-link-busy-poll-ns=60000000000", 8, 8);
    g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==, 0);
    g_assert_cmpuint(poll_yields(n), ==, 0);
    niu_stop(n);
}

/*
 * A switch that runs per-CPU threads says CPU_WAKE in its WELCOME: the
 * device then kicks the thread of the CPU it runs on, through that CPU's
 * counter in its ring area (a FUTEX_WAKE, link 1.3), not the ring's
 * socket, and counts it (link-cpu-kicks).  Descriptors such a WELCOME
 * brings anyway are dropped.  Without the flag, or with
 * x-link-cpu-wake=off (the case's props), the kick goes to the ring's
 * socket.  Here a doorbell sends (from the qtest, the main loop) to the
 * switch, asleep on its ring; the packet arrives either way.
 */
typedef struct {
    const char *path, *props;
    enum cpu_wake_kind kind;
    bool taken;
} CpuWakeCase;

/* Every per-CPU kick counter of @n's area, added up. */
static uint64_t cpu_kick_counters(Niu *n)
{
    struct arctic_ring_area *area = n->ring_area;
    uint64_t sum = 0;
    unsigned i;

    for (i = 0; i < ARCTIC_CPU_WAKE_MAX; i++) {
        sum += __atomic_load_n(&area->kicks.cpu[i], __ATOMIC_ACQUIRE);
    }
    return sum;
}

static void rings_cpu_wake(const void *data)
{
    const CpuWakeCase *c = data;
    g_autofree char *all = g_strdup_printf("x-link-busy-poll-ns=0%s%s",
                                           *c->props ? "," : "", c->props);
    uint64_t kicks, before, counted;
    int pair[2] = { -1, -1 };
    QDict *rsp, *state;
    uint32_t v = 0xc9a0;
    Niu *n;

    if (!link_thread()) {
        g_test_skip("the rings need the link thread");
        return;
    }
    n = start_to_hello(all);
    link_adopt_rings(n);
    if (c->kind == CPU_WAKE_WITH_FDS) {
        g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
                                   pair), ==, 0);
        link_send_welcome_fds(n, R_ARCTIC_WELCOME_FLAGS_RINGS_MASK |
                                 R_ARCTIC_WELCOME_FLAGS_CPU_WAKE_MASK,
                              pair, 2);
    } else {
        link_send_welcome_flags(n, R_ARCTIC_WELCOME_FLAGS_RINGS_MASK |
                                   (c->kind == CPU_WAKE_NO_FLAG ? 0 :
                                    R_ARCTIC_WELCOME_FLAGS_CPU_WAKE_MASK),
                                8, 8);
    }
    wait_link_status(n, R_NIU_LINK_STATUS_UP_MASK, true);
    state = niu_state(n, &rsp);
    before = qdict_get_int(state, "link-switch-kicks");
    g_assert_cmpuint(qdict_get_int(state, "link-cpu-kicks"), ==, 0);
    qobject_unref(rsp);
    ring_kicks_take(n->ring_wake_fd);
    counted = cpu_kick_counters(n);

    ring_switch_sleeps(n);
    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v, 1);
    doorbell(n);
    state = niu_state(n, &rsp);
    kicks = qdict_get_int(state, "link-switch-kicks") - before;
    g_assert_cmpuint(kicks, ==, 1);
    g_assert_cmpuint(qdict_get_int(state, "link-cpu-kicks"), ==, c->taken);
    qobject_unref(rsp);
    g_assert_cmpuint(cpu_kick_counters(n) - counted, ==, c->taken);
    g_assert_cmpuint(ring_kicks_take(n->ring_wake_fd), ==, !c->taken);
    arctic_ring_consumer_awake(&n->ring_in);
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 1, 0, 0, &v, 1);
    niu_stop(n);
    if (pair[0] >= 0) {
        close(pair[0]);
        close(pair[1]);
    }
}

static const CpuWakeCase cpu_wake_cases[] = {
    { "/arctic-niu/link/rings-cpu-wake", "", CPU_WAKE_GOOD, true },
    { "/arctic-niu/link/rings-cpu-wake-fds", "", CPU_WAKE_WITH_FDS, true },
    { "/arctic-niu/link/rings-cpu-wake-off", "x-link-cpu-wake=off",
      CPU_WAKE_GOOD, false },
    { "/arctic-niu/link/rings-cpu-wake-no-flag", "", CPU_WAKE_NO_FLAG, false },
};

/*
 * A hostile switch: it never reads its end of the link's wake-up socket
 * and asks for a kick for room after every frame it writes.  With link
 * 1.2's eventfds it could also clear O_NONBLOCK on the file description
 * both held, and once the counter was full the device's write() blocked
 * the vCPU that kicked, holding the device lock and the BQL: QEMU
 * answered nothing.  The device's end of the socket is its own, and
 * kicks are send(MSG_DONTWAIT): 2000 of them (the socket is full after a
 * few hundred), and QEMU still answers, counts every kick, and carries a
 * message.  (Kicks of the switch's per-CPU threads are FUTEX_WAKEs, which
 * nothing can block: x-link-cpu-wake=off sends them all to the socket.)
 */
static void test_link_rings_hostile_switch(void)
{
    enum { FRAMES = 2000 };
    uint8_t credit[ARCTIC_LINK_HEADER_SIZE + ARCTIC_CREDIT_SIZE] = { 0 };
    uint64_t before, kicks;
    QDict *rsp, *state;
    uint32_t v = 0x4057;
    unsigned i;
    Niu *n;

    if (!link_thread()) {
        g_test_skip("the rings need the link thread");
        return;
    }
    n = start_to_hello("x-link-busy-poll-ns=60000000000,x-link-cpu-wake=off");
    link_adopt_rings(n);
    g_assert_cmpint(fcntl(n->ring_wake_fd, F_SETFL, 0), ==, 0);
    link_send_welcome_flags(n, R_ARCTIC_WELCOME_FLAGS_RINGS_MASK |
                               R_ARCTIC_WELCOME_FLAGS_CPU_WAKE_MASK, 8, 8);
    wait_link_status(n, R_NIU_LINK_STATUS_UP_MASK, true);
    state = niu_state(n, &rsp);
    before = qdict_get_int(state, "link-switch-kicks");
    qobject_unref(rsp);
    arctic_frame_header_encode(credit, ARCTIC_FRAME_CREDIT,
                               ARCTIC_CREDIT_SIZE);
    for (i = 0; i < FRAMES; i++) {
        g_assert_cmpuint(arctic_ring_write(&n->ring_out, credit,
                                           sizeof(credit)), ==,
                         sizeof(credit));
        __atomic_store_n(&n->ring_out.ctl->producer_waiting, 1,
                         __ATOMIC_SEQ_CST);
        /*
         * A busy poll takes it in this thread (the main loop's, under
         * the BQL); the link thread, if it looks first, kicks as well.
         */
        user_r(n, A_USER_LINK_POLL);
        while (__atomic_load_n(&n->ring_out.ctl->producer_waiting,
                               __ATOMIC_SEQ_CST)) {
            g_usleep(100);
        }
    }
    state = niu_state(n, &rsp);
    kicks = qdict_get_int(state, "link-switch-kicks") - before;
    qobject_unref(rsp);
    g_test_message("%" PRIu64 " kicks into a socket nobody reads", kicks);
    g_assert_cmpuint(kicks, ==, FRAMES);
    ring_switch_sleeps(n);
    guest_send(n, ARCTIC_TXQ_HI, 2, 1, 0, 0, &v, 1);
    doorbell(n);
    arctic_ring_consumer_awake(&n->ring_in);
    expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 1, 0, 0, &v, 1);
    niu_stop(n);
}

/* --- authenticated joins (link-protocol.md §6.6) ----------------------- */

#define AUTH_KEY "qtest-key-of-the-cluster-0123456789"

/* HMAC-SHA256 of arctic_auth_message()'s bytes, with @key (GLib's). */
static void auth_mac(const char *key, enum arctic_auth_role role,
                     const uint8_t *their, const uint8_t *ours,
                     const uint8_t *hello, uint8_t *mac)
{
    uint8_t msg[ARCTIC_AUTH_MESSAGE_SIZE];
    GHmac *h = g_hmac_new(G_CHECKSUM_SHA256, (const guchar *)key,
                          strlen(key));
    gsize len = ARCTIC_AUTH_MAC_SIZE;

    g_hmac_update(h, msg, arctic_auth_message(msg, role, their, ours, hello));
    g_hmac_get_digest(h, mac, &len);
    g_hmac_unref(h);
}

/* An NIU with link-secret= the key, and its HELLO's body. */
static Niu *auth_start(bool with_key, uint8_t *hello)
{
    Niu *n = niu_start_node_args("listen", NIU_NODE,
                                 with_key ? "link-secret=key" : "",
                                 "-object secret,id=key,data=" AUTH_KEY);
    uint8_t body[ARCTIC_LINK_MAX_BODY];
    struct arctic_hello h = {
        .magic = ARCTIC_LINK_MAGIC,
        .version_major = ARCTIC_LINK_VERSION_MAJOR,
        .version_minor = ARCTIC_LINK_VERSION_MINOR,
        .node_id = NIU_NODE,
        .credits = { ARCTIC_LINK_DEFAULT_CREDITS,
                     ARCTIC_LINK_DEFAULT_CREDITS },
    };

    niu_setup(n);
    link_accept(n);
    link_expect_hello(n);
    arctic_hello_encode(body, &h);
    memcpy(hello, body, ARCTIC_HELLO_SIZE);
    return n;
}

/* The switch's challenge, the NIU's answer: its nonce, its MAC checked. */
static void auth_challenge(Niu *n, const uint8_t *hello, uint8_t *ns,
                           uint8_t *nn)
{
    uint8_t body[ARCTIC_LINK_MAX_BODY], want[ARCTIC_AUTH_MAC_SIZE];
    uint16_t type;
    uint32_t len;
    unsigned i;

    for (i = 0; i < ARCTIC_AUTH_NONCE_SIZE; i++) {
        ns[i] = g_test_rand_int_range(0, 256);
    }
    link_write(n, ARCTIC_FRAME_AUTH_CHALLENGE, ns, ARCTIC_AUTH_NONCE_SIZE);
    g_assert_cmpint(link_read(n, &type, body, &len, WAIT_MS), ==, 1);
    g_assert_cmpint(type, ==, ARCTIC_FRAME_AUTH_RESPONSE);
    g_assert_cmpint(len, ==, ARCTIC_AUTH_RESPONSE_SIZE);
    memcpy(nn, body, ARCTIC_AUTH_NONCE_SIZE);
    auth_mac(AUTH_KEY, ARCTIC_AUTH_NIU, ns, nn, hello, want);
    g_assert_cmpmem(body + ARCTIC_AUTH_NONCE_SIZE, ARCTIC_AUTH_MAC_SIZE,
                    want, ARCTIC_AUTH_MAC_SIZE);
}

/* The link refused for AUTH, and not up. */
static void expect_auth_refused(Niu *n)
{
    uint8_t buf[ARCTIC_LINK_MAX_BODY];
    uint16_t type;
    uint32_t len;

    g_assert_cmpint(link_read(n, &type, buf, &len, WAIT_MS), ==, -1);
    link_close(n);
    g_assert_false(FIELD_EX32(reg_r(n, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                              UP));
    g_assert_true(FIELD_EX32(reg_r(n, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                             REJECTED));
    g_assert_cmpint(FIELD_EX32(reg_r(n, A_NIU_ERROR_INFO), NIU_ERROR_INFO,
                               DETAIL), ==, ARCTIC_REJECT_AUTH);
    expect_errors(n, 1u << ARCTIC_ERR_LINK_REJECTED);
}

/* With the key: the NIU answers the challenge right, takes the proof. */
static void test_link_auth_good(void)
{
    uint8_t hello[ARCTIC_HELLO_SIZE], ns[ARCTIC_AUTH_NONCE_SIZE];
    uint8_t nn[ARCTIC_AUTH_NONCE_SIZE], proof[ARCTIC_AUTH_MAC_SIZE];
    Niu *n = auth_start(true, hello);

    auth_challenge(n, hello, ns, nn);
    auth_mac(AUTH_KEY, ARCTIC_AUTH_SWITCH, nn, ns, hello, proof);
    link_write(n, ARCTIC_FRAME_AUTH_PROOF, proof, sizeof(proof));
    link_send_welcome(n, 8, 8);
    wait_link_status(n, R_NIU_LINK_STATUS_UP_MASK, true);
    niu_stop(n);
}

/*
 * A switch that does not know the key: no proof (a WELCOME at once), or a
 * wrong one.  The NIU takes neither; a switch that asks an NIU without a
 * key is refused by it too.
 */
static void test_link_auth_fake_switch(void)
{
    uint8_t hello[ARCTIC_HELLO_SIZE], ns[ARCTIC_AUTH_NONCE_SIZE];
    uint8_t nn[ARCTIC_AUTH_NONCE_SIZE], proof[ARCTIC_AUTH_MAC_SIZE];
    Niu *n = auth_start(true, hello);

    link_send_welcome_flags(n, 0, 8, 8);
    expect_auth_refused(n);
    niu_stop(n);

    n = auth_start(true, hello);
    auth_challenge(n, hello, ns, nn);
    auth_mac("not the cluster's key at all, no", ARCTIC_AUTH_SWITCH, nn, ns,
             hello, proof);
    link_write(n, ARCTIC_FRAME_AUTH_PROOF, proof, sizeof(proof));
    expect_auth_refused(n);
    niu_stop(n);

    n = auth_start(false, hello);
    memset(ns, 7, sizeof(ns));
    link_write(n, ARCTIC_FRAME_AUTH_CHALLENGE, ns, sizeof(ns));
    expect_auth_refused(n);
    niu_stop(n);
}

void niu_test_add_link(void)
{
    unsigned i;

    qtest_add_func("/arctic-niu/link/busy-poll", test_link_busy_poll);
    qtest_add_func("/arctic-niu/link/busy-poll-yield", test_link_poll_yield);
    qtest_add_func("/arctic-niu/link/down-up", test_link_down_up_loses_nothing);
    qtest_add_func("/arctic-niu/link/send-order-kept",
                   test_link_send_order_kept);
    qtest_add_func("/arctic-niu/link/rejected",
                   test_link_rejected_then_accepted);
    qtest_add_func("/arctic-niu/link/rings-offer", test_link_rings_offer);
    qtest_add_func("/arctic-niu/link/rings-unoffered",
                   test_link_rings_unoffered);
    qtest_add_func("/arctic-niu/link/rings-bad-head",
                   test_link_rings_bad_head);
    qtest_add_func("/arctic-niu/link/rings-socket-bytes",
                   test_link_rings_socket_bytes);
    qtest_add_func("/arctic-niu/link/direct", test_link_direct);
    qtest_add_func("/arctic-niu/link/direct-head-past-end",
                   test_link_direct_head_past_end);
    qtest_add_func("/arctic-niu/link/rings-hostile-switch",
                   test_link_rings_hostile_switch);
    qtest_add_func("/arctic-niu/link/auth-good", test_link_auth_good);
    qtest_add_func("/arctic-niu/link/auth-fake-switch",
                   test_link_auth_fake_switch);
    for (i = 0; i < G_N_ELEMENTS(kick_yield_cases); i++) {
        qtest_add_data_func(kick_yield_cases[i].path, &kick_yield_cases[i],
                            rings_kick_yield);
    }
    for (i = 0; i < G_N_ELEMENTS(cpu_wake_cases); i++) {
        qtest_add_data_func(cpu_wake_cases[i].path, &cpu_wake_cases[i],
                            rings_cpu_wake);
    }
}
