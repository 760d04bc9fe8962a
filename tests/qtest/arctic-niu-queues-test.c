/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arctic-niu qtests: transmit and receive queues: every size, polling and
 * doorbells, laps, virtual endpoints and context switch, the two priorities.
 */

#include "qemu/osdep.h"
#include "arctic-niu-test.h"

/* A payload word that names its message and position. */
static uint32_t pattern(uint32_t msg, unsigned i)
{
    return 0xa5000000u ^ (msg << 8) ^ i;
}

static void test_tx_all_sizes(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[ARCTIC_MAX_PAYLOAD];
    unsigned q, len, i;

    for (q = ARCTIC_TXQ_HI; q <= ARCTIC_TXQ_LO; q++) {
        uint8_t prio = q == ARCTIC_TXQ_HI ? ARCTIC_PRIORITY_HIGH
                                          : ARCTIC_PRIORITY_LOW;
        uint32_t epoch = 0;

        for (len = 0; len <= ARCTIC_MAX_PAYLOAD; len++) {
            for (i = 0; i < len; i++) {
                payload[i] = pattern(len, i);
            }
            guest_send(n, q, PEER, 0x40 + len, 0xc0000000 | len,
                       0xc1000000 | len, payload, len);
            doorbell(n);
            epoch = expect_data(n, PEER, prio, len, 0x40 + len,
                                0xc0000000 | len, 0xc1000000 | len, payload,
                                len);
            peer_control(n, PEER, ARCTIC_E2E_ACK, prio, epoch, len, 0);
            /* The slot was released by clearing its header. */
            g_assert_cmphex(qtest_readl(n->qts, tx_slot_addr(q, len)), ==, 0);
        }
        g_assert_cmpint(ep_r(n, 0, q == ARCTIC_TXQ_HI ? A_EP_HI_TX_TL
                                                      : A_EP_LO_TX_TL),
                        ==, ARCTIC_MAX_PAYLOAD + 1);
    }
    link_expect_silence(n);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_HI_PACKETS), ==, 21);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_LO_PACKETS), ==, 21);
    g_assert_cmpint(counter(n, ARCTIC_CNT_ACKS_RECEIVED), ==, 42);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RETRANSMITS), ==, 0);
    niu_stop(n);
}

/* A program that only writes slots and valid bits is served by polling. */
static void test_tx_polled_without_doorbell(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[3] = { 1, 2, 3 };
    uint32_t epoch;

    qtest_clock_step(n->qts, 50 * 1000 * 1000);   /* idle: back-off grows */
    guest_send(n, ARCTIC_TXQ_LO, 2, 9, 10, 11, payload, 3);
    link_expect_silence(n);         /* virtual time stands still */
    qtest_clock_step(n->qts, 1000 * 1000);        /* x-poll-max-ns */
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 9, 10, 11, payload, 3);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0, 0);
    link_expect_silence(n);
    niu_stop(n);
}

/*
 * TX_POLLED (reset: every endpoint, seed 002's FSMs) leaves an endpoint out
 * of the poll: its slot waits for a doorbell however long the clock runs,
 * with the poll parked, and polling it again looks at once.  A value with
 * bits outside the mask is refused and changes nothing.
 */
static void test_tx_unpolled_endpoint(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[2] = { 5, 6 };
    uint32_t epoch;
    QDict *rsp, *st;

    g_assert_cmphex(reg_r(n, A_NIU_TX_POLLED), ==, R_NIU_TX_POLLED_MASK_MASK);
    reg_w(n, A_NIU_TX_POLLED, 0);
    g_assert_cmphex(reg_r(n, A_NIU_TX_POLLED), ==, 0);
    guest_send(n, ARCTIC_TXQ_LO, 2, 9, 10, 11, payload, 2);
    qtest_clock_step(n->qts, 100 * 1000 * 1000);  /* 100x x-poll-max-ns */
    link_expect_silence(n);
    g_assert_cmphex(qtest_readl(n->qts, tx_slot_addr(ARCTIC_TXQ_LO, 0)) &
                    ARCTIC_MPI_VALID, ==, ARCTIC_MPI_VALID);
    st = niu_state(n, &rsp);
    g_assert_true(qdict_get_bool(st, "tx-poll-parked"));
    g_assert_cmpint(qdict_get_int(st, "tx-polled"), ==, 0);
    qobject_unref(rsp);

    /* A doorbell still serves it, and the poll stays parked. */
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 9, 10, 11, payload, 2);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0, 0);
    g_assert_true(qdict_get_bool(niu_state(n, &rsp), "tx-poll-parked"));
    qobject_unref(rsp);

    /* Refused: endpoint 8 does not exist. */
    reg_w(n, A_NIU_TX_POLLED, 1u << ARCTIC_ENDPOINTS);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    g_assert_cmphex(reg_r(n, A_NIU_TX_POLLED), ==, 0);

    /* Polled again: the slot written meanwhile goes without a step. */
    guest_send(n, ARCTIC_TXQ_LO, 2, 9, 10, 11, payload, 1);
    link_expect_silence(n);
    reg_w(n, A_NIU_TX_POLLED, 1);
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 1, 9, 10, 11, payload, 1);
    g_assert_false(qdict_get_bool(niu_state(n, &rsp), "tx-poll-parked"));
    qobject_unref(rsp);
    niu_stop(n);
}

/*
 * A doorbell serves the queues itself and leaves the poll interval as it
 * was: a guest that rings will ring again.  (Polling fast after every
 * doorbell woke the main loop every x-poll-min-ns while a ringing guest
 * talked, taking the core from its vCPU.)  A slot written after the
 * doorbell, without one, still goes out at the next idle poll.
 */
static void test_tx_doorbell_keeps_poll_interval(void)
{
    Niu *n;
    uint32_t v = 1;
    uint32_t epoch;

    n = niu_start_linked_props("x-poll-max-ns=100000000", 8, 8);   /* 100 ms */
    qtest_clock_step(n->qts, 1000ull * 1000 * 1000);  /* idle: at max */
    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v, 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 1, 0, 0, &v, 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0, 0);
    v = 2;
    guest_send(n, ARCTIC_TXQ_LO, 2, 2, 0, 0, &v, 1);  /* no doorbell */
    qtest_clock_step(n->qts, 1000 * 1000);        /* 500x x-poll-min-ns */
    link_expect_silence(n);
    qtest_clock_step(n->qts, 100 * 1000 * 1000);  /* x-poll-max-ns */
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 1, 2, 0, 0, &v, 1);
    niu_stop(n);
}

/* The CPU time QEMU's main thread (@pid's own) has used, in ns. */
static uint64_t main_thread_cpu_ns(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/task/%d/schedstat",
                                            (int)pid, (int)pid);
    g_autofree char *text = NULL;

    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    return g_ascii_strtoull(text, NULL, 10);
}

/*
 * Under qtest the virtual clock moves only when the test steps it, and
 * the step runs the timers itself: a pending poll must not make the main
 * loop poll with a timeout of x-poll-min-ns on a clock that stands still
 * (it then spun, a whole host core for as long as a test waited on a
 * socket; scripts/qemu-patches/0003-util-qemu-timer-*.patch).  Checked as the
 * main thread's CPU time over a quarter of a second of waiting: nearly
 * all of it when it spins, well under a millisecond when it sleeps; the
 * bound, a tenth, holds on a loaded host either way.
 */
static void test_tx_pending_poll_sleeps(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t v = 7;
    uint64_t before, used;

    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v, 1);
    doorbell(n);    /* its pass arms the poll, x-poll-min-ns ahead */
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 1, 0, 0, &v, 1);
    before = main_thread_cpu_ns(qtest_pid(n->qts));
    g_usleep(250 * 1000);
    used = main_thread_cpu_ns(qtest_pid(n->qts)) - before;
    g_assert_cmpuint(used, <, 25 * 1000 * 1000);
    /* The poll still runs when the clock is stepped. */
    v = 8;
    guest_send(n, ARCTIC_TXQ_LO, 2, 2, 0, 0, &v, 1);     /* no doorbell */
    qtest_clock_step(n->qts, 1000 * 1000);        /* x-poll-max-ns */
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 1, 2, 0, 0, &v, 1);
    niu_stop(n);
}

/*
 * Step virtual time from deadline to deadline until the NIU has taken
 * the slot last written to Tx queue @q.
 */
static void step_until_taken(Niu *n, unsigned q)
{
    uint64_t slot = tx_slot_addr(q, (n->tx_head[q] + ARCTIC_N - 1) %
                                    ARCTIC_N);
    unsigned i;

    for (i = 0; i < 100 && FIELD_EX32(qtest_readl(n->qts, slot), MPI_HEADER,
                                      VALID); i++) {
        qtest_clock_step_next(n->qts);
    }
    g_assert_false(FIELD_EX32(qtest_readl(n->qts, slot), MPI_HEADER, VALID));
}

/*
 * Work a poll finds on an endpoint that rang since the last poll was the
 * doorbells' to serve (the slot written just before its ring): it does
 * not make polling fast.  Work nobody announced (a seed 002 program that
 * only writes slots) does, as before (/arctic-niu/tx/polled).
 */
static void test_tx_poll_announced_work(void)
{
    Niu *n;
    uint32_t v[3] = { 1, 2, 3 };
    uint32_t epoch;

    /* Polls every 100 ms at most; no retransmission in a 100 ms step. */
    n = niu_start_linked_props("x-poll-max-ns=100000000,"
                               "retry-timeout-ns=1000000000", 8, 8);
    qtest_clock_step(n->qts, 1000ull * 1000 * 1000);  /* idle: at max */
    guest_send(n, ARCTIC_TXQ_LO, 2, 0, 0, 0, &v[0], 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 0, 0, 0, &v[0], 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0, 0);
    /* Written after the ring, found by the next poll: announced. */
    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v[1], 1);
    step_until_taken(n, ARCTIC_TXQ_LO);
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 1, 1, 0, 0, &v[1], 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 1, 0);
    /* So the poll after it is no faster than before. */
    guest_send(n, ARCTIC_TXQ_LO, 2, 2, 0, 0, &v[2], 1);
    qtest_clock_step(n->qts, 1000 * 1000);        /* 500x x-poll-min-ns */
    link_expect_silence(n);
    qtest_clock_step(n->qts, 100 * 1000 * 1000);
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 2, 2, 0, 0, &v[2], 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 2, 0);
    link_expect_silence(n);
    niu_stop(n);
}

/*
 * x-doorbell-posted: the link thread serves the doorbell (the vCPU only
 * posts it); with a chardev link there is no such thread and the vCPU
 * serves it as always.  Either way the slots go out, in order.
 */
static void test_tx_doorbell_posted(void)
{
    uint32_t v[3] = { 31, 32, 33 };
    uint32_t epoch = 0;
    unsigned i;
    Niu *n;

    n = niu_start_linked_props("x-doorbell-posted=on,x-poll-max-ns=100000000",
                               8, 8);
    qtest_clock_step(n->qts, 1000ull * 1000 * 1000);  /* polls are rare */
    for (i = 0; i < 3; i++) {
        guest_send(n, ARCTIC_TXQ_HI, 2, 1, i, 0, &v[i], 1);
        doorbell(n);
    }
    for (i = 0; i < 3; i++) {
        epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, i, 1, i, 0, &v[i], 1);
    }
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 2, 0);
    link_expect_silence(n);
    niu_stop(n);
}

static void test_rx_all_sizes(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[ARCTIC_MAX_PAYLOAD];
    unsigned q, len, i;

    mark_rx_slots(n);
    for (q = ARCTIC_RXQ_HI; q <= ARCTIC_RXQ_LO; q++) {
        uint8_t prio = q == ARCTIC_RXQ_HI ? ARCTIC_PRIORITY_HIGH
                                          : ARCTIC_PRIORITY_LOW;

        for (len = 0; len <= ARCTIC_MAX_PAYLOAD; len++) {
            for (i = 0; i < len; i++) {
                payload[i] = pattern(100 + len, i);
            }
            peer_send_acked(n, prio, 0x7f - len, 0xe0000000 | len, len,
                            payload, len);
            guest_expect_rx(n, q, PEER, 0x7f - len, 0xe0000000 | len, len,
                            payload, len);
        }
    }
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_RX_HD), ==, 21);
    g_assert_cmpint(ep_r(n, 0, A_EP_LO_RX_HD), ==, 21);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RX_HI_PACKETS), ==, 21);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RX_LO_PACKETS), ==, 21);
    g_assert_cmpint(counter(n, ARCTIC_CNT_ACKS_SENT), ==, 42);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);
}

/*
 * A driver that hands a full queue of kept messages to the next program
 * sets the head to slot 0 of the next lap: the LAP written with the head
 * is the one the next headers carry, and it flips as INDEX wraps.
 */
static void test_rx_lap_from_head(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[2] = { 0x1a9, 0x2a9 };
    uint32_t m;

    mark_rx_slots(n);
    reg_w(n, A_NIU_RX_CTRL, 0);
    n->rx_tail[ARCTIC_RXQ_LO] = R_EP_RX_HD_LAP_MASK | (ARCTIC_N - 1);
    ep_w(n, 0, A_EP_LO_RX_HD, n->rx_tail[ARCTIC_RXQ_LO]);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    for (m = 0; m < 3; m++) {
        peer_send_acked(n, ARCTIC_PRIORITY_LOW, 9, m, ~m, payload, 2);
        /* slot N-1 with LAP 1, then slots 0 and 1 with LAP 0 */
        guest_expect_rx(n, ARCTIC_RXQ_LO, PEER, 9, m, ~m, payload, 2);
    }
    g_assert_cmphex(ep_r(n, 0, A_EP_LO_RX_HD), ==, 2);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);
}

#define LAPS_MESSAGES (3 * ARCTIC_N + 7)

static void test_wraparound(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[4];
    uint32_t m, epoch;

    mark_rx_slots(n);
    for (m = 0; m < LAPS_MESSAGES; m++) {
        payload[0] = m;
        payload[1] = ~m;
        payload[2] = pattern(m, 2);
        payload[3] = pattern(m, 3);
        guest_send(n, ARCTIC_TXQ_HI, 3, m & 0x7f, m, 0, payload, 4);
        doorbell(n);
        epoch = expect_data(n, 3, ARCTIC_PRIORITY_HIGH, m, m & 0x7f, m, 0,
                            payload, 4);
        peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, m, 0);

        peer_send_acked(n, ARCTIC_PRIORITY_LOW, m & 0x7f, m, ~m, payload, 4);
        guest_expect_rx(n, ARCTIC_RXQ_LO, PEER, m & 0x7f, m, ~m, payload, 4);
    }
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_TX_TL), ==, LAPS_MESSAGES % ARCTIC_N);
    /*
     * Three laps and a bit: the head's LAP, like every header's on the
     * way (guest_expect_rx), has flipped three times.
     */
    g_assert_cmphex(ep_r(n, 0, A_EP_LO_RX_HD), ==,
                    R_EP_RX_HD_LAP_MASK | LAPS_MESSAGES % ARCTIC_N);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RETRANSMITS), ==, 0);
    niu_stop(n);
}

/*
 * A receive queue that the guest points at the NIU's own registers: the
 * delivery must not reach them (a remote message would otherwise program
 * the test DMA engine from its payload).  The device's memory re-entrancy
 * guard makes it a DMA error, and the packet is refused.
 */
static void test_rx_queue_on_own_bar_refused(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t payload[ARCTIC_MAX_PAYLOAD] = { 0 };
    uint64_t bar = n->ctrl.addr;
    uint64_t base = bar & ~(uint64_t)(ARCTIC_RX_REGION_ALIGN - 1);
    unsigned q = bar - base < ARCTIC_LO_RX_OFFSET ? ARCTIC_RXQ_HI
                                                   : ARCTIC_RXQ_LO;
    uint8_t prio = q == ARCTIC_RXQ_HI ? ARCTIC_PRIORITY_HIGH
                                      : ARCTIC_PRIORITY_LOW;
    uint32_t idx = (bar - base - (q == ARCTIC_RXQ_HI ? ARCTIC_HI_RX_OFFSET
                                                     : ARCTIC_LO_RX_OFFSET)) /
                   ARCTIC_SLOT_SIZE;
    size_t size;

    g_assert_false(n->ctrl.is_io);
    reg_w(n, A_NIU_RX_CTRL, 0);
    ep_w(n, 0, A_EP_RX_QBASE_LO, (uint32_t)base);
    ep_w(n, 0, A_EP_RX_QBASE_HI, base >> 32);
    ep_w(n, 0, q == ARCTIC_RXQ_HI ? A_EP_HI_RX_HD : A_EP_LO_RX_HD, idx);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    /*
     * Slot idx is the register block: payload word i would land on the
     * register at ARCTIC_SLOT_PAYLOAD + 4 i, and program a FILL of 64
     * bytes at SCRATCH_MEM.
     */
#define PAYLOAD_AT(reg) payload[((reg) - ARCTIC_SLOT_PAYLOAD) / 4]
    PAYLOAD_AT(A_NIU_TEST_DMA_ADDR_LO) = (uint32_t)SCRATCH_MEM;
    PAYLOAD_AT(A_NIU_TEST_DMA_ADDR_HI) = SCRATCH_MEM >> 32;
    PAYLOAD_AT(A_NIU_TEST_DMA_SIZE) = 64;
    PAYLOAD_AT(A_NIU_TEST_DMA_SEED) = 0x5eed;
    PAYLOAD_AT(A_NIU_TEST_DMA_CTRL) = ARCTIC_TEST_DMA_FILL;
    PAYLOAD_AT(A_NIU_SCRATCH) = 0xbadc0de;
#undef PAYLOAD_AT
    reg_w(n, A_NIU_SCRATCH, 0x600d);
    qtest_memset(n->qts, SCRATCH_MEM, 0xee, 64);
    size = peer_data(n, wire, PEER, prio, n->peer_epoch, 0, 5, 6, 7, payload,
                     ARCTIC_MAX_PAYLOAD);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_NACK, prio, n->peer_epoch, 0,
                   ARCTIC_NACK_RX_ERROR);
    qtest_clock_step(n->qts, 1000000);
    g_assert_cmphex(reg_r(n, A_NIU_SCRATCH), ==, 0x600d);
    g_assert_cmphex(reg_r(n, A_NIU_TEST_DMA_SIZE), ==, 0);
    g_assert_cmphex(reg_r(n, A_NIU_TEST_DMA_STATUS), ==, 0);
    g_assert_cmphex(qtest_readl(n->qts, SCRATCH_MEM), ==, 0xeeeeeeee);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RX_HI_PACKETS) +
                    counter(n, ARCTIC_CNT_RX_LO_PACKETS), ==, 0);
    expect_errors(n, 1u << ARCTIC_ERR_DMA);
    niu_stop(n);
}

#define EP_TX_BASE(e)   (0x1100000ull + (uint64_t)(e) * ARCTIC_TX_REGION_SIZE)
#define EP_RX_BASE(e)   (0x1300000ull + (uint64_t)(e) * ARCTIC_RX_REGION_SIZE)

static void ep_set_queues(Niu *n, unsigned e, uint64_t tx, uint64_t rx)
{
    qtest_memset(n->qts, tx, 0, ARCTIC_TX_REGION_SIZE);
    qtest_memset(n->qts, rx, 0, ARCTIC_RX_REGION_SIZE);
    ep_w(n, e, A_EP_TX_QBASE_LO, (uint32_t)tx);
    ep_w(n, e, A_EP_TX_QBASE_HI, tx >> 32);
    ep_w(n, e, A_EP_RX_QBASE_LO, (uint32_t)rx);
    ep_w(n, e, A_EP_RX_QBASE_HI, rx >> 32);
}

static void ep_put_slot(Niu *n, uint64_t slot, uint32_t header, uint32_t cmd0,
                        uint32_t v)
{
    qtest_writel(n->qts, slot + ARCTIC_SLOT_COMMAND0, cmd0);
    qtest_writel(n->qts, slot + ARCTIC_SLOT_PAYLOAD, v);
    qtest_writel(n->qts, slot, header);
}

static void test_virtual_endpoints(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t v[3] = { 0x100, 0x200, 0x300 };
    uint32_t e1, e2, saved_tail, saved_base;
    size_t size;
    unsigned e;

    mark_rx_slots(n);
    reg_w(n, A_NIU_TX_CTRL, 0);
    reg_w(n, A_NIU_RX_CTRL, 0);
    for (e = 1; e < 4; e++) {
        ep_set_queues(n, e, EP_TX_BASE(e), EP_RX_BASE(e));
    }
    reg_w(n, A_NIU_VMASK, 3);               /* endpoints 0..3 */
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);

    /* Endpoints 1 and 2 send from their own queues. */
    ep_put_slot(n, EP_TX_BASE(1) + ARCTIC_HI_TX_OFFSET,
                mpi_header(2, 1, 1), 11, v[0]);
    ep_put_slot(n, EP_TX_BASE(2) + ARCTIC_HI_TX_OFFSET,
                mpi_header(2, 2, 1), 22, v[1]);
    doorbell(n);
    e1 = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 1, 11, 0, &v[0], 1);
    e2 = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 1, 2, 22, 0, &v[1], 1);
    g_assert_cmphex(e1, ==, e2);            /* one stream per node pair */
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, e1, 1, 0);
    g_assert_cmpint(ep_r(n, 1, A_EP_HI_TX_TL), ==, 1);
    g_assert_cmpint(ep_r(n, 2, A_EP_HI_TX_TL), ==, 1);
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_TX_TL), ==, 0);

    /* A message for endpoint 2 lands in endpoint 2's HiRx only. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0,
                     4, 44, 0, &v[2], 1);
    wire[21] |= 2 << 5;                     /* W1.ENDPOINT, bits 15:13 */
    arctic_wire_seal(wire, size);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, 0);
    g_assert_cmphex(qtest_readl(n->qts, EP_RX_BASE(2)), ==,
                    FIELD_DP32(mpi_header(PEER, 4, 1), MPI_HEADER, ENDPOINT,
                               2));
    g_assert_cmphex(qtest_readl(n->qts, EP_RX_BASE(2) + 16), ==, v[2]);
    g_assert_cmphex(qtest_readl(n->qts, rx_slot_addr(ARCTIC_RXQ_HI, 0)), ==,
                    0);
    g_assert_cmpint(ep_r(n, 2, A_EP_HI_RX_HD), ==, 1);
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_RX_HD), ==, 0);

    /* Endpoint 5 is not served under VMASK 3: refused and retried. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 1,
                     4, 45, 0, NULL, 0);
    wire[21] |= 5 << 5;
    arctic_wire_seal(wire, size);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 1, ARCTIC_NACK_BAD_ENDPOINT);

    /*
     * Context switch of endpoint 1: stop, save its queue state, run
     * another process's queues on it, restore, go on where it was.
     */
    reg_w(n, A_NIU_TX_CTRL, 0);
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, 0);
    saved_tail = ep_r(n, 1, A_EP_HI_TX_TL);
    saved_base = ep_r(n, 1, A_EP_TX_QBASE_LO);
    ep_w(n, 1, A_EP_TX_QBASE_LO, (uint32_t)EP_TX_BASE(5));
    ep_w(n, 1, A_EP_HI_TX_TL, 7);
    qtest_memset(n->qts, EP_TX_BASE(5), 0, ARCTIC_TX_REGION_SIZE);
    ep_put_slot(n, EP_TX_BASE(5) + 7 * ARCTIC_SLOT_SIZE, mpi_header(2, 5, 1),
                55, v[2]);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    doorbell(n);
    expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 2, 5, 55, 0, &v[2], 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, e1, 2, 0);
    reg_w(n, A_NIU_TX_CTRL, 0);
    ep_w(n, 1, A_EP_TX_QBASE_LO, saved_base);
    ep_w(n, 1, A_EP_HI_TX_TL, saved_tail);
    ep_put_slot(n, EP_TX_BASE(1) + ARCTIC_HI_TX_OFFSET + ARCTIC_SLOT_SIZE,
                mpi_header(2, 1, 1), 12, v[0]);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    doorbell(n);
    expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 3, 1, 12, 0, &v[0], 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, e1, 3, 0);
    g_assert_cmpint(ep_r(n, 1, A_EP_HI_TX_TL), ==, 2);
    link_expect_silence(n);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);
}

static void test_rx_high_flows_while_low_full(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    size_t size;
    unsigned i;

    mark_rx_slots(n);
    qtest_writel(n->qts, rx_slot_addr(ARCTIC_RXQ_LO, 0), mpi_header(0, 0, 0));
    size = peer_data(n, wire, 2, ARCTIC_PRIORITY_LOW, n->peer_epoch, 0, 1, 1,
                     1, NULL, 0);
    link_send_packet(n, wire, size);
    expect_control(n, 2, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_LOW, n->peer_epoch,
                   0, ARCTIC_NACK_QUEUE_FULL);
    for (i = 0; i < 10; i++) {
        uint32_t v = i;
        peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 4, i, 0, &v, 1);
        guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 4, i, 0, &v, 1);
    }
    niu_stop(n);
}

/* No low-priority credit: low waits, high goes; credit releases low. */
static void test_tx_high_passes_blocked_low(void)
{
    Niu *n = niu_start_linked(8, 1);
    uint32_t v[3] = { 1, 2, 3 };
    uint32_t elo, ehi;

    n->hold_credits[ARCTIC_PRIORITY_LOW] = true;

    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v[0], 1);
    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v[1], 1);
    doorbell(n);
    elo = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 1, 0, 0, &v[0], 1);
    link_expect_silence(n);     /* the second waits for a credit */
    guest_send(n, ARCTIC_TXQ_HI, 2, 5, 0, 0, &v[2], 1);
    doorbell(n);
    ehi = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 5, 0, 0, &v[2], 1);
    g_assert_cmpint(counter(n, ARCTIC_CNT_CREDIT_STALLS), >, 0);
    link_send_credit(n, 0, 1);
    doorbell(n);
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 1, 1, 0, 0, &v[1], 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, elo, 1, 0);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, ehi, 0, 0);
    niu_stop(n);
}

/* Unacked low-priority packets can hold only the low share of the lines. */
/*
 * Low priority takes at most LINES - HI_LINES lines (what CAPS says), and
 * a high-priority message still goes out while they are all busy.
 */
static void check_high_lines_reserved(const char *props, unsigned lines)
{
    Niu *n;
    unsigned lo_lines = lines - HI_LINES;
    uint32_t v, elo = 0, ehi, caps;
    unsigned i;

    n = niu_start_linked_props(props, lines * 2, lines * 2);
    caps = reg_r(n, A_NIU_CAPS);
    g_assert_cmpint(FIELD_EX32(caps, NIU_CAPS, LINES), ==, lines);
    g_assert_cmpint(FIELD_EX32(caps, NIU_CAPS, HI_LINES), ==, HI_LINES);

    for (i = 0; i <= lo_lines; i++) {
        v = i;
        guest_send(n, ARCTIC_TXQ_LO, 3, 2, 0, 0, &v, 1);
    }
    doorbell(n);
    /* The last 4 of the low share ask for their acks at once. */
    for (i = 0; i < lo_lines; i++) {
        v = i;
        elo = expect_data_flags(n, 3, ARCTIC_PRIORITY_LOW,
                                ack_now_if_left(lo_lines - i - 1), i, 2, 0, 0,
                                &v, 1);
    }
    link_expect_silence(n);
    /* The last low slot is still in the queue, not taken. */
    g_assert_cmphex(qtest_readl(n->qts, tx_slot_addr(ARCTIC_TXQ_LO,
                                                     lo_lines)), !=, 0);
    v = 99;
    guest_send(n, ARCTIC_TXQ_HI, 3, 6, 0, 0, &v, 1);
    doorbell(n);
    /* It leaves 3 of the 4 high lines. */
    ehi = expect_data_flags(n, 3, ARCTIC_PRIORITY_HIGH,
                            ack_now_if_left(HI_LINES - 1), 0, 6, 0, 0, &v, 1);
    peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, elo, 0, 0);
    v = lo_lines;
    expect_data_flags(n, 3, ARCTIC_PRIORITY_LOW, ack_now_if_left(0),
                      lo_lines, 2, 0, 0, &v, 1);
    peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, elo, lo_lines, 0);
    peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, ehi, 0, 0);
    niu_stop(n);
}

static void test_tx_high_lines_reserved(void)
{
    check_high_lines_reserved("", ARCTIC_DEFAULT_LINES);
}

/* The "lines" property sizes the retransmit buffer. */
static void test_tx_lines_property(void)
{
    check_high_lines_reserved("lines=40", 40);
    check_high_lines_reserved("lines=8", 8);
}

/*
 * Writing OFF completes only once what was taken has entered the network
 * (seed 002 §4.1.2).
 */
static void test_tx_off_drains(void)
{
    Niu *n = niu_start_linked(1, 8);
    uint32_t v = 7, epoch;

    n->hold_credits[ARCTIC_PRIORITY_HIGH] = true;

    guest_send(n, ARCTIC_TXQ_HI, 2, 1, 0, 0, &v, 1);
    guest_send(n, ARCTIC_TXQ_HI, 2, 1, 0, 0, &v, 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 1, 0, 0, &v, 1);
    link_expect_silence(n);
    reg_w(n, A_NIU_TX_CTRL, 0);
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, R_NIU_CTRL_ENABLE_MASK);
    ep_w(n, 0, A_EP_HI_TX_TL, 0);
    expect_errors(n, 1u << ARCTIC_ERR_BUSY);
    link_send_credit(n, 1, 0);
    expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 1, 1, 0, 0, &v, 1);
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, 0);
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_TX_TL), ==, 2);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 1, 0);
    niu_stop(n);
}

void niu_test_add_queues(void)
{
    qtest_add_func("/arctic-niu/tx/all-sizes", test_tx_all_sizes);
    qtest_add_func("/arctic-niu/tx/polled", test_tx_polled_without_doorbell);
    qtest_add_func("/arctic-niu/tx/unpolled-endpoint",
                   test_tx_unpolled_endpoint);
    qtest_add_func("/arctic-niu/tx/poll-announced-work",
                   test_tx_poll_announced_work);
    qtest_add_func("/arctic-niu/tx/doorbell-keeps-poll-interval",
                   test_tx_doorbell_keeps_poll_interval);
    qtest_add_func("/arctic-niu/tx/doorbell-posted", test_tx_doorbell_posted);
    qtest_add_func("/arctic-niu/tx/pending-poll-sleeps",
                   test_tx_pending_poll_sleeps);
    qtest_add_func("/arctic-niu/rx/all-sizes", test_rx_all_sizes);
    qtest_add_func("/arctic-niu/queues/wraparound", test_wraparound);
    qtest_add_func("/arctic-niu/queues/lap-from-head", test_rx_lap_from_head);
    qtest_add_func("/arctic-niu/queues/rx-on-own-bar-refused",
                   test_rx_queue_on_own_bar_refused);
    qtest_add_func("/arctic-niu/endpoints/isolation-and-switch",
                   test_virtual_endpoints);
    qtest_add_func("/arctic-niu/priority/rx-high-passes",
                   test_rx_high_flows_while_low_full);
    qtest_add_func("/arctic-niu/priority/tx-high-passes",
                   test_tx_high_passes_blocked_low);
    qtest_add_func("/arctic-niu/priority/lines-reserved",
                   test_tx_high_lines_reserved);
    qtest_add_func("/arctic-niu/priority/lines-property",
                   test_tx_lines_property);
    qtest_add_func("/arctic-niu/tx/off-drains", test_tx_off_drains);
}
