/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arctic-niu qtests: the link session: going down and up, the send order,
 * rejection, busy polling, the shared-memory rings.
 */

#include "qemu/osdep.h"
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
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
     * Its ack waited ack-delay-ns for company; with the thread asleep,
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
    wait_link_status(n, R_NIU_LINK_STATUS_CONNECTED_MASK, false);
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
        wait_link_status(n, R_NIU_LINK_STATUS_CONNECTED_MASK, false);
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

/* Is @fd an eventfd? */
static bool is_eventfd(int fd)
{
    g_autofree char *path = g_strdup_printf("/proc/self/fd/%d", fd);
    g_autofree char *target = g_file_read_link(path, NULL);

    return g_strcmp0(target, "anon_inode:[eventfd]") == 0;
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
 * a valid area, and two eventfds); with link-rings=off or a chardev none.
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
    g_assert_true(is_eventfd(n->offered_fds[ARCTIC_RING_FD_SWITCH_WAKE]));
    g_assert_true(is_eventfd(n->offered_fds[ARCTIC_RING_FD_NIU_WAKE]));
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
        uint64_t one = 1;

        area->ctl[ARCTIC_RING_TO_NIU].head = n->ring_out.own +
                                             n->ring_out.size + head_skew;
        g_assert_cmpint(write(n->ring_kick_fd, &one, sizeof(one)), ==,
                        sizeof(one));
    } else {
        g_assert_cmpint(send(n->fd, "x", 1, MSG_NOSIGNAL), ==, 1);
    }
    wait_link_status(n, R_NIU_LINK_STATUS_CONNECTED_MASK, false);
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
 * A vCPU whose busy poll wakes the sleeping switch gives its CPU away
 * right after (x-link-kick-yield, on by default); a doorbell that wakes it
 * does not.  The state view counts the kicks and the yields.  With
 * from_poll a packet from the peer waits in the ring and a read of
 * USER_LINK_POLL (here from the qtest, the main loop) delivers it and
 * sends its ack at once (ack-delay-ns=0) to this switch, asleep on its
 * ring; without, polling runs (60 s after a read) and a doorbell sends.
 */
typedef struct {
    const char *path, *props;
    bool from_poll, yields;
} KickYieldCase;

static void rings_kick_yield(const void *data)
{
    const KickYieldCase *c = data;
    g_autofree char *all = g_strdup_printf("x-link-busy-poll-ns=60000000000,"
                                           "ack-delay-ns=0%s%s",
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
    { "/arctic-niu/link/rings-kick-yield", "", true, true },
    { "/arctic-niu/link/rings-kick-no-yield", "x-link-kick-yield=off",
      true, false },
    { "/arctic-niu/link/rings-kick-doorbell", "", false, false },
};

/* What @fd's eventfd counter held (0 if nothing), emptied; never blocks. */
static uint64_t eventfd_take(int fd)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    uint64_t value = 0;

    if (poll(&pfd, 1, 0) != 1) {
        return 0;
    }
    g_assert_cmpint(read(fd, &value, sizeof(value)), ==, sizeof(value));
    return value;
}

enum cpu_fds_kind {
    CPU_FDS_GOOD,
    CPU_FDS_A_PIPE,         /* one of them a pipe */
    CPU_FDS_BLOCKING,       /* eventfds without O_NONBLOCK */
    CPU_FDS_NO_FLAG,        /* good ones, but the WELCOME says no CPU_WAKE */
    CPU_FDS_NONE,           /* CPU_WAKE, but no descriptors came */
};

/*
 * A switch of link 1.2 sends its per-CPU wake-up eventfds with a WELCOME
 * that says CPU_WAKE: the device then kicks the one of the CPU it runs
 * on, not the ring's own, and counts it (link-cpu-kicks).  With
 * descriptors that will not do (a pipe, a blocking eventfd), without the
 * flag or without the descriptors, or with x-link-cpu-wake=off (the
 * case's kind and props), the kick goes to the ring's eventfd.
 * Here a doorbell sends (from the qtest, the main loop) to the switch,
 * asleep on its ring; the packet arrives either way.
 */
typedef struct {
    const char *path, *props;
    enum cpu_fds_kind kind;
    bool taken;
} CpuWakeCase;

static void rings_cpu_wake(const void *data)
{
    const CpuWakeCase *c = data;
    g_autofree char *all = g_strdup_printf("x-link-busy-poll-ns=0%s%s",
                                           *c->props ? "," : "", c->props);
    unsigned i, count = CLAMP(sysconf(_SC_NPROCESSORS_CONF), 1,
                              ARCTIC_CPU_WAKE_MAX);
    uint64_t kicks, cpu_kicks = 0, before;
    int fds[ARCTIC_CPU_WAKE_MAX], pipe_fds[2] = { -1, -1 };
    QDict *rsp, *state;
    uint32_t v = 0xc9a0;
    Niu *n;

    if (!link_thread()) {
        g_test_skip("the rings need the link thread");
        return;
    }
    n = start_to_hello(all);
    link_adopt_rings(n);
    for (i = 0; i < count; i++) {
        fds[i] = eventfd(0, EFD_CLOEXEC |
                            (c->kind == CPU_FDS_BLOCKING ? 0 : EFD_NONBLOCK));
        g_assert_cmpint(fds[i], >=, 0);
    }
    if (c->kind == CPU_FDS_A_PIPE) {
        g_assert_cmpint(pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC), ==, 0);
        close(fds[count - 1]);
        fds[count - 1] = pipe_fds[1];
    }
    if (c->kind == CPU_FDS_NONE) {
        link_send_welcome_flags(n, R_ARCTIC_WELCOME_FLAGS_RINGS_MASK |
                                   R_ARCTIC_WELCOME_FLAGS_CPU_WAKE_MASK, 8, 8);
    } else {
        link_send_welcome_fds(n, R_ARCTIC_WELCOME_FLAGS_RINGS_MASK |
                                 (c->kind == CPU_FDS_NO_FLAG ? 0 :
                                  R_ARCTIC_WELCOME_FLAGS_CPU_WAKE_MASK),
                              fds, count);
    }
    wait_link_status(n, R_NIU_LINK_STATUS_UP_MASK, true);
    state = niu_state(n, &rsp);
    before = qdict_get_int(state, "link-switch-kicks");
    g_assert_cmpuint(qdict_get_int(state, "link-cpu-kicks"), ==, 0);
    qobject_unref(rsp);
    eventfd_take(n->ring_wake_fd);

    ring_switch_sleeps(n);
    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v, 1);
    doorbell(n);
    state = niu_state(n, &rsp);
    kicks = qdict_get_int(state, "link-switch-kicks") - before;
    g_assert_cmpuint(kicks, ==, 1);
    g_assert_cmpuint(qdict_get_int(state, "link-cpu-kicks"), ==, c->taken);
    qobject_unref(rsp);
    for (i = 0; i < count; i++) {
        cpu_kicks += c->kind == CPU_FDS_A_PIPE && i == count - 1
                     ? 0 : eventfd_take(fds[i]);
    }
    g_assert_cmpuint(cpu_kicks, ==, c->taken);
    g_assert_cmpuint(eventfd_take(n->ring_wake_fd), ==, !c->taken);
    arctic_ring_consumer_awake(&n->ring_in);
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 1, 0, 0, &v, 1);
    niu_stop(n);
    for (i = 0; i < count; i++) {
        close(fds[i]);
    }
    if (pipe_fds[0] >= 0) {
        close(pipe_fds[0]);
    }
}

static const CpuWakeCase cpu_wake_cases[] = {
    { "/arctic-niu/link/rings-cpu-wake", "", CPU_FDS_GOOD, true },
    { "/arctic-niu/link/rings-cpu-wake-pipe", "", CPU_FDS_A_PIPE, false },
    { "/arctic-niu/link/rings-cpu-wake-blocking", "", CPU_FDS_BLOCKING,
      false },
    { "/arctic-niu/link/rings-cpu-wake-off", "x-link-cpu-wake=off",
      CPU_FDS_GOOD, false },
    { "/arctic-niu/link/rings-cpu-wake-no-flag", "", CPU_FDS_NO_FLAG, false },
    { "/arctic-niu/link/rings-cpu-wake-no-fds", "", CPU_FDS_NONE, false },
};

void niu_test_add_link(void)
{
    unsigned i;

    qtest_add_func("/arctic-niu/link/busy-poll", test_link_busy_poll);
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
    for (i = 0; i < G_N_ELEMENTS(kick_yield_cases); i++) {
        qtest_add_data_func(kick_yield_cases[i].path, &kick_yield_cases[i],
                            rings_kick_yield);
    }
    for (i = 0; i < G_N_ELEMENTS(cpu_wake_cases); i++) {
        qtest_add_data_func(cpu_wake_cases[i].path, &cpu_wake_cases[i],
                            rings_cpu_wake);
    }
}
