/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arctic-niu qtests: raw FIFO mode.
 */

#include "qemu/osdep.h"
#include "arctic-niu-test.h"

/*
 * RxCtrl OFF with RAW is dMPI mode (seed 002 §4.1.2, §6.1): packets pile
 * up in the receive FIFO, read word by word with route words and CRC
 * (§2.3.1, §3.4.2); once the FIFO is full they are refused and retried.
 */
/*
 * @count messages of the peer's low stream (seq 0.., command 0xc0 + seq,
 * 0xc1, @payload), each acked: raw mode's receive FIFO takes them.
 */
void peer_send_run(Niu *n, uint8_t (*wire)[ARCTIC_WIRE_MAX_SIZE],
                     size_t *size, unsigned count, const uint32_t *payload,
                     unsigned words)
{
    unsigned i;

    for (i = 0; i < count; i++) {
        size[i] = peer_data(n, wire[i], PEER, ARCTIC_PRIORITY_LOW,
                            n->peer_epoch, i, 5, 0xc0 + i, 0xc1, payload,
                            words);
        link_send_packet(n, wire[i], size[i]);
        expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW,
                       n->peer_epoch, i, 0);
    }
}

static void test_raw_receive(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[8][ARCTIC_WIRE_MAX_SIZE];
    size_t size[8];
    uint32_t payload[3] = { 7, 8, 9 };
    unsigned i, w;

    mark_rx_slots(n);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_RAW_MASK);
    g_assert_cmphex(reg_r(n, A_NIU_RX_CTRL), ==, R_NIU_CTRL_RAW_MASK);
    g_assert_cmphex(user_r(n, A_USER_RX_STATUS), ==,
                    R_USER_RX_STATUS_HI_EMPTY_MASK |
                    R_USER_RX_STATUS_LO_EMPTY_MASK);
    peer_send_run(n, wire, size, 8, payload, 3);
    g_assert_cmphex(user_r(n, A_USER_RX_STATUS), ==,
                    R_USER_RX_STATUS_HI_EMPTY_MASK);
    /* The FIFO is full: the ninth waits in the network. */
    {
        uint8_t ninth[ARCTIC_WIRE_MAX_SIZE];
        size_t nsize = peer_data(n, ninth, PEER, ARCTIC_PRIORITY_LOW,
                                 n->peer_epoch, 8, 5, 0xc8, 0xc1, payload, 3);

        link_send_packet(n, ninth, nsize);
        expect_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_LOW,
                       n->peer_epoch, 8, ARCTIC_NACK_RX_OFF);
        /* Read the first packet: exactly what the network carried. */
        for (w = 0; w < (size[0] - ARCTIC_WIRE_WORDS_OFFSET) / 4; w++) {
            g_assert_cmphex(user_r(n, A_USER_LO_RX_FIFO), ==,
                            arctic_get_le32(wire[0] + 16 + 4 * w));
        }
        link_send_packet(n, ninth, nsize);
        expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW,
                       n->peer_epoch, 8, 0);
    }
    /* Seed 002 §3.4.2's reader: route words, header, body (and the CRC). */
    for (i = 1; i < 8; i++) {
        uint32_t header;

        g_assert_false(user_r(n, A_USER_RX_STATUS) &
                       R_USER_RX_STATUS_LO_EMPTY_MASK);
        user_r(n, A_USER_LO_RX_FIFO);
        header = user_r(n, A_USER_LO_RX_FIFO);
        g_assert_cmpint(ARCTIC_FIELD_GET(ARCTIC_W1, TYPE, header), ==, 5);
        g_assert_cmpint(ARCTIC_FIELD_GET(ARCTIC_W1, LENGTH, header) - 4, ==,
                        3);
        g_assert_cmphex(user_r(n, A_USER_LO_RX_FIFO), ==, 0xc0 + i);
        g_assert_cmphex(user_r(n, A_USER_LO_RX_FIFO), ==, 0xc1);
        for (w = 0; w < 3; w++) {
            g_assert_cmphex(user_r(n, A_USER_LO_RX_FIFO), ==, payload[w]);
        }
        g_assert_cmphex(user_r(n, A_USER_LO_RX_FIFO), ==,
                        arctic_get_le32(wire[i] + size[i] - 4));
    }
    for (w = 0; w < 8; w++) {
        user_r(n, A_USER_LO_RX_FIFO);       /* the ninth */
    }
    g_assert_cmphex(user_r(n, A_USER_RX_STATUS), ==,
                    R_USER_RX_STATUS_HI_EMPTY_MASK |
                    R_USER_RX_STATUS_LO_EMPTY_MASK);
    g_assert_cmpint(qtest_readl(n->qts, rx_slot_addr(ARCTIC_RXQ_LO, 0)), ==,
                    0);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    user_r(n, A_USER_HI_RX_FIFO);           /* empty */
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    /* Back on: delivery to the queues resumes. */
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    n->peer_seq[ARCTIC_PRIORITY_LOW] = 9;
    peer_send_acked(n, ARCTIC_PRIORITY_LOW, 6, 1, 2, NULL, 0);
    guest_expect_rx(n, ARCTIC_RXQ_LO, PEER, 6, 1, 2, NULL, 0);
    niu_stop(n);
}

/*
 * TxCtrl OFF is dMPI transmit: seed 002 §3.4.1's TransmitHiDirect, and
 * the packet on the network is exactly the one MPI mode builds for the
 * same message, so raw and MPI nodes interoperate.
 */
static void test_raw_transmit(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[4] = { 0x11, 0x22, 0x33, 0x44 };
    uint32_t route = arctic_route_entry(NIU_NODE, 2, true, false);
    uint32_t epoch;
    unsigned i;

    reg_w(n, A_NIU_TX_CTRL, 0);
    g_assert_cmphex(user_r(n, A_USER_TX_STATUS), ==, 0);
    user_w(n, A_USER_HI_TX_FIFO, route & 0xffff);
    user_w(n, A_USER_HI_TX_FIFO, (route & 0xffff0000) | (9 << 6) | (4 + 4));
    user_w(n, A_USER_HI_TX_FIFO, 0xaaaa);
    user_w(n, A_USER_HI_TX_FIFO, 0xbbbb);
    for (i = 0; i < 3; i++) {
        user_w(n, A_USER_HI_TX_FIFO, payload[i]);
    }
    user_w(n, A_USER_HI_TX_FIFO_LAST, payload[3]);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 9, 0xaaaa, 0xbbbb,
                        payload, 4);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 0, 0);
    /* A length field that does not match the words pushed is refused. */
    user_w(n, A_USER_LO_TX_FIFO,
           arctic_route_entry(NIU_NODE, 2, false, false) & 0xffff);
    user_w(n, A_USER_LO_TX_FIFO_LAST, 7);
    link_expect_silence(n);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    /*
     * Route bits climbing 15 levels name node 0xffff, which no network
     * of 256 nodes has: refused, nothing sent, nothing else touched.
     */
    user_w(n, A_USER_HI_TX_FIFO, 0x8000 | ARCTIC_FIELD_PREP(UPROUTE, HOPS, 15));
    user_w(n, A_USER_HI_TX_FIFO_LAST, 0xffff0000 | 2);
    user_w(n, A_USER_HI_TX_FIFO, 0x8000 | ARCTIC_FIELD_PREP(UPROUTE, HOPS, 8));
    user_w(n, A_USER_HI_TX_FIFO_LAST, 0x01ff0000 | 2);
    link_expect_silence(n);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    /*
     * A packet longer than 31 words is discarded whole, up to its last
     * word; the next one starts clean.
     */
    for (i = 0; i < 40; i++) {
        user_w(n, A_USER_HI_TX_FIFO, i);
    }
    user_w(n, A_USER_HI_TX_FIFO_LAST, 99);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    user_w(n, A_USER_HI_TX_FIFO, route & 0xffff);
    user_w(n, A_USER_HI_TX_FIFO, (route & 0xffff0000) | (9 << 6) | (0 + 4));
    user_w(n, A_USER_HI_TX_FIFO, 1);
    user_w(n, A_USER_HI_TX_FIFO_LAST, 2);
    expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 1, 9, 1, 2, NULL, 0);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 1, 0);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    /* With the datapath on, the FIFOs refuse (dMPI and MPI do not mix). */
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    user_w(n, A_USER_HI_TX_FIFO, route & 0xffff);
    expect_errors(n, 1u << ARCTIC_ERR_BUSY);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_HI_PACKETS), ==, 2);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_ERRORS), ==, 4);
    niu_stop(n);
}

/*
 * Raw packets that wait for link credit hold nothing else up: later
 * packets are taken, and TxCtrl still reads OFF.
 */
static void test_raw_transmit_waits_for_credit(void)
{
    Niu *n = niu_start_linked(1, 8);
    uint32_t route = arctic_route_entry(NIU_NODE, 3, true, false);
    uint32_t epoch = 0;
    unsigned k;

    n->hold_credits[ARCTIC_PRIORITY_HIGH] = true;
    reg_w(n, A_NIU_TX_CTRL, 0);
    for (k = 0; k < 3; k++) {
        g_assert_cmphex(user_r(n, A_USER_TX_STATUS), ==, 0);
        user_w(n, A_USER_HI_TX_FIFO, route & 0xffff);
        user_w(n, A_USER_HI_TX_FIFO, (route & 0xffff0000) | (k << 6) | 4);
        user_w(n, A_USER_HI_TX_FIFO, k);
        user_w(n, A_USER_HI_TX_FIFO_LAST, ~k);
    }
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, 0);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    for (k = 0; k < 3; k++) {
        epoch = expect_data(n, 3, ARCTIC_PRIORITY_HIGH, k, k, k, ~k, NULL, 0);
        link_send_credit(n, 1, 0);
    }
    peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 2, 0);
    niu_stop(n);
}

/*
 * Seed 002 §3.4.1: a dMPI sender waits while USER_TX_STATUS says the FIFO
 * is full.  With every retransmit line taken (nothing acked), the next
 * complete packet cannot leave the FIFO: HI_FULL must read 1 then, and a
 * word pushed regardless is refused, not silently lost among the others;
 * once a line frees the packet goes and the bit clears.  Every packet
 * arrives once, in order.
 */
static void test_raw_transmit_full(void)
{
    Niu *n = niu_start_linked_props("lines=8,retry-timeout-ns=8000000000",
                                    8, 8);
    uint32_t route = arctic_route_entry(NIU_NODE, 2, true, false);
    uint8_t ack_now = ARCTIC_FIELD_PREP(ARCTIC_E2E_FLAGS, ACK_NOW, 1);
    uint32_t epoch = 0;
    unsigned k;

    reg_w(n, A_NIU_TX_CTRL, 0);
    for (k = 0; k < 9; k++) {
        g_assert_cmphex(user_r(n, A_USER_TX_STATUS) &
                        R_USER_TX_STATUS_HI_FULL_MASK, ==, 0);
        user_w(n, A_USER_HI_TX_FIFO, route & 0xffff);
        user_w(n, A_USER_HI_TX_FIFO, (route & 0xffff0000) | (k << 6) | 4);
        user_w(n, A_USER_HI_TX_FIFO, k);
        user_w(n, A_USER_HI_TX_FIFO_LAST, ~k);
        if (k < 8) {
            /* With 4 lines left or fewer a packet asks for its ack now. */
            epoch = expect_data_flags(n, 2, ARCTIC_PRIORITY_HIGH,
                                      k >= 4 ? ack_now : 0, k, k, k, ~k,
                                      NULL, 0);
            link_send_credit(n, 1, 0);      /* the switch passed it on */
        }
    }
    /* Eight lines hold eight unacked packets: the ninth waits, whole. */
    g_assert_cmphex(user_r(n, A_USER_TX_STATUS), ==,
                    R_USER_TX_STATUS_HI_FULL_MASK);
    link_expect_silence(n);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    /* A word pushed now is refused: BAD_VALUE, DETAIL = the FIFO. */
    user_w(n, A_USER_HI_TX_FIFO, route & 0xffff);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    g_assert_cmphex(user_r(n, A_USER_TX_STATUS), ==,
                    R_USER_TX_STATUS_HI_FULL_MASK);
    /* One ack frees a line: the ninth goes, the FIFO is free again. */
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 0, 0);
    expect_data_flags(n, 2, ARCTIC_PRIORITY_HIGH, ack_now, 8, 8, 8, ~8u,
                      NULL, 0);
    link_send_credit(n, 1, 0);
    g_assert_cmphex(user_r(n, A_USER_TX_STATUS), ==, 0);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 8, 0);
    link_expect_silence(n);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_HI_PACKETS), ==, 9);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RETRANSMITS), ==, 0);
    niu_stop(n);
}

void niu_test_add_raw(void)
{
    qtest_add_func("/arctic-niu/raw/transmit-full", test_raw_transmit_full);
    qtest_add_func("/arctic-niu/raw/receive", test_raw_receive);
    qtest_add_func("/arctic-niu/raw/transmit", test_raw_transmit);
    qtest_add_func("/arctic-niu/raw/transmit-waits-for-credit",
                   test_raw_transmit_waits_for_credit);
}
