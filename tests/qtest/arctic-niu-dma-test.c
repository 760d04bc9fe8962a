/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arctic-niu qtests: remote DMA (seed 002 §2.2, §6.2.2, §6.3.2) and job
 * tags.
 */

#include "qemu/osdep.h"
#include "arctic-niu-test.h"

static QDict *niu_state_endpoint0(Niu *n, QDict **rsp)
{
    return qobject_to(QDict, qlist_peek(qdict_get_qlist(niu_state(n, rsp),
                                                        "endpoints")));
}

#define REMOTE_TARGET   0x7f0000001800ull

/*
 * Expect the 32 data packets and the notification of one DMA request,
 * acking as they come so the engine never runs out of lines.
 */
static void expect_dma(Niu *n, unsigned dest, uint32_t first_seq,
                       unsigned type, uint32_t command, uint64_t target,
                       const uint32_t *block, const uint32_t *payload,
                       unsigned len)
{
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE], want[ARCTIC_WIRE_MAX_SIZE];
    uint32_t route = arctic_route_entry(NIU_NODE, dest, true, false);
    unsigned p;

    for (p = 0; p < ARCTIC_DMA_PACKETS; p++) {
        uint64_t t = target + 64 * p;
        size_t size = link_expect_packet(n, wire), want_size;
        struct arctic_e2e_header got, h = {
            .kind = ARCTIC_E2E_DATA,
            .flags = FIELD_DP32(0, ARCTIC_E2E_FLAGS, PRIORITY, 1),
            .src_node = NIU_NODE,
            .dst_node = dest,
            .seq = first_seq + p,
        };

        arctic_e2e_decode(wire, &got);
        h.epoch = got.epoch;
        h.job = got.job;
        want_size = build_wire(want, &h, route,
                               ARCTIC_FIELD_PREP(ARCTIC_W1, TYPE, type) |
                               ARCTIC_FIELD_PREP(ARCTIC_W1, MODE, 1),
                               (uint32_t)t, t >> 32, block + 16 * p,
                               ARCTIC_DMA_DATA_WORDS);
        g_assert_cmpint(size, ==, want_size);
        g_assert_cmpmem(wire, size, want, want_size);
        peer_control(n, dest, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, got.epoch,
                     got.seq, 0);
    }
    /*
     * The notification: command, target's low word, payload; mode 0,
     * marked as a notification in the e2e flags.
     */
    peer_control(n, dest, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                 expect_data_flags(n, dest, ARCTIC_PRIORITY_HIGH,
                                   R_ARCTIC_E2E_FLAGS_NOTIFY_MASK,
                                   first_seq + ARCTIC_DMA_PACKETS, type,
                                   command, (uint32_t)target, payload, len),
                 first_seq + ARCTIC_DMA_PACKETS, 0);
}

static void test_dma_send(void)
{
    /* Lines enough that no packet asks for its ack at once (ACK_NOW). */
    Niu *n = niu_start_linked_props("lines=128", 8, 8);
    uint32_t block[ARCTIC_D / 4], block2[ARCTIC_D / 4];
    uint32_t payload[2] = { 0xfeed, 0xbeef };

    set_window_and_job(n, WIN_PHYS, WIN_VIRT, WIN_MASK, 0);
    fill_block(n, WIN_PHYS + 0x800, block, 1);
    fill_block(n, WIN_PHYS + WIN_MASK + 1 - ARCTIC_D, block2, 2);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 5, 0xc0de, REMOTE_TARGET,
              WIN_VIRT + 0x800, payload, 2);
    /* The last block of the window is inside it too. */
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 6, 0xc0df, REMOTE_TARGET + ARCTIC_D,
              WIN_VIRT + WIN_MASK + 1 - ARCTIC_D, NULL, 0);
    doorbell(n);
    expect_dma(n, 2, 0, 5, 0xc0de, REMOTE_TARGET, block, payload, 2);
    expect_dma(n, 2, ARCTIC_DMA_PACKETS + 1, 6, 0xc0df,
               REMOTE_TARGET + ARCTIC_D, block2, NULL, 0);
    link_expect_silence(n);
    g_assert_cmphex(qtest_readl(n->qts, TX_BASE + ARCTIC_DMA_TX_OFFSET), ==,
                    0);
    g_assert_cmpint(ep_r(n, 0, A_EP_DMA_TX_TL), ==, 2);
    g_assert_cmpint(counter(n, ARCTIC_CNT_DMA_REQUESTS), ==, 2);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);
}

/*
 * DMA data may take all the lines but max(8, LINES / 8): with 64 lines,
 * 56 data packets of two unacked transfers go out (and the first one's
 * notification), then nothing, and an MPI message still finds a line
 * (seed 002 §2.2.2).
 */
static void test_dma_share_leaves_mpi_lines(void)
{
    uint32_t block[ARCTIC_D / 4], v = 77;
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header h;
    uint16_t type;
    uint32_t len;
    unsigned data = 0, other = 0, asked = 0;
    Niu *n;

    n = niu_start_linked_props("lines=64", 128, 8);
    set_window_and_job(n, WIN_PHYS, WIN_VIRT, WIN_MASK, 0);
    fill_block(n, WIN_PHYS, block, 1);
    fill_block(n, WIN_PHYS + ARCTIC_D, block, 2);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 5, 1, REMOTE_TARGET, WIN_VIRT, NULL, 0);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 5, 2, REMOTE_TARGET + ARCTIC_D,
              WIN_VIRT + ARCTIC_D, NULL, 0);
    doorbell(n);
    while (link_read(n, &type, wire, &len, QUIET_MS) == 1) {
        if (type != ARCTIC_FRAME_PACKET) {
            continue;
        }
        arctic_e2e_decode(wire, &h);
        if (ARCTIC_FIELD_GET(ARCTIC_W1, MODE, arctic_get_le32(
                wire + ARCTIC_WIRE_WORDS_OFFSET + 4)) == ARCTIC_MODE_DMA) {
            data++;
            asked += ARCTIC_FIELD_GET(ARCTIC_E2E_FLAGS, ACK_NOW, h.flags);
        } else {
            other++;
            g_assert_false(ARCTIC_FIELD_GET(ARCTIC_E2E_FLAGS, ACK_NOW,
                                            h.flags));
        }
    }
    /* The first transfer whole with its notification, 24 of the second. */
    g_assert_cmpint(data, ==, 64 - 8);
    g_assert_cmpint(other, ==, 1);
    /* The last 4 of the DMA share asked for their acks at once. */
    g_assert_cmpint(asked, ==, 4);
    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 3, 4, &v, 1);
    doorbell(n);
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 1, 3, 4, &v, 1);
    niu_stop(n);
}

/*
 * A DMA request in HiTx holds back the HiTx messages behind it, while
 * LoTx traffic goes on (seed 002 §2.2.2).
 */
static void test_dma_in_hitx_blocks_hitx(void)
{
    /*
     * The seed-sized buffer (niu_start_linked()): 8 lines for DMA data,
     * so that the request cannot be taken whole while the switch holds
     * its credits.
     */
    Niu *n = niu_start_linked(8, 8);
    uint32_t block[ARCTIC_D / 4];
    uint32_t v = 0x55, w = 0x66;
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header h;
    unsigned i;

    set_window_and_job(n, WIN_PHYS, WIN_VIRT, WIN_MASK, 0);
    fill_block(n, WIN_PHYS, block, 3);
    n->hold_credits[ARCTIC_PRIORITY_HIGH] = true;
    guest_dma(n, ARCTIC_TXQ_HI, 3, 1, 0xd0, REMOTE_TARGET, WIN_VIRT, NULL, 0);
    guest_send(n, ARCTIC_TXQ_HI, 3, 2, 0, 0, &v, 1);
    doorbell(n);
    /* The switch takes 8 high packets and stalls: the engine stops. */
    for (i = 0; i < 8; i++) {
        link_expect_packet(n, wire);
        arctic_e2e_decode(wire, &h);
        g_assert_cmpint(h.seq, ==, i);
    }
    guest_send(n, ARCTIC_TXQ_LO, 3, 4, 0, 0, &w, 1);
    doorbell(n);
    expect_data(n, 3, ARCTIC_PRIORITY_LOW, 0, 4, 0, 0, &w, 1);
    g_assert_cmphex(qtest_readl(n->qts, tx_slot_addr(ARCTIC_TXQ_HI, 0)), !=,
                    0);
    n->hold_credits[ARCTIC_PRIORITY_HIGH] = false;
    link_send_credit(n, 8, 0);
    peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, h.epoch, 7, 0);
    for (i = 8; i < ARCTIC_DMA_PACKETS; i++) {
        link_expect_packet(n, wire);
        arctic_e2e_decode(wire, &h);
        g_assert_cmpint(h.seq, ==, i);
        g_assert_cmpint(ARCTIC_FIELD_GET(ARCTIC_W1, MODE,
                            arctic_get_le32(wire + 20)), ==, 1);
        peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, h.epoch, i,
                     0);
    }
    /* Notification, then at last the HiTx message behind the request. */
    expect_data_flags(n, 3, ARCTIC_PRIORITY_HIGH,
                      R_ARCTIC_E2E_FLAGS_NOTIFY_MASK, ARCTIC_DMA_PACKETS, 1,
                      0xd0, (uint32_t)REMOTE_TARGET, NULL, 0);
    expect_data(n, 3, ARCTIC_PRIORITY_HIGH, ARCTIC_DMA_PACKETS + 1, 2, 0, 0,
                &v, 1);
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_TX_TL), ==, 2);
    niu_stop(n);
}

/*
 * A context switch that moves the DMATx tail restarts the request there
 * from its first packet; the state view shows the progress.
 */
static void test_dma_progress_and_context_switch(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t block[ARCTIC_D / 4];
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    QDict *rsp, *ep0;
    unsigned i;

    set_window_and_job(n, WIN_PHYS, WIN_VIRT, WIN_MASK, 0);
    fill_block(n, WIN_PHYS, block, 4);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 1, 0xe0, REMOTE_TARGET, WIN_VIRT, NULL, 0);
    doorbell(n);
    /* Unacked, the engine stops at its share of the lines. */
    for (i = 0; i < 8; i++) {
        link_expect_packet(n, wire);
    }
    link_expect_silence(n);
    reg_w(n, A_NIU_TX_CTRL, 0);
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, 0);
    ep0 = niu_state_endpoint0(n, &rsp);
    g_assert_cmpint(qdict_get_int(ep0, "dma-tx-dma-packets-sent"), ==, 8);
    qobject_unref(rsp);
    ep_w(n, 0, A_EP_DMA_TX_TL, 0);
    ep0 = niu_state_endpoint0(n, &rsp);
    g_assert_cmpint(qdict_get_int(ep0, "dma-tx-dma-packets-sent"), ==, 0);
    qobject_unref(rsp);
    niu_stop(n);
}

/* Receive: data lands in the window, the notification in HiRx. */
/*
 * The peer sends a message on its high stream with e2e @flags beyond the
 * priority; the NIU acks it, and its HiRx slot must hold it with MODE
 * @mode (checked, then put back to 0 as the program would see it) and all
 * else as sent.
 */
static void peer_flagged_to_hirx(Niu *n, uint8_t flags, unsigned type,
                                 uint32_t cmd0, uint32_t cmd1,
                                 const uint32_t *payload, int len,
                                 unsigned mode)
{
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header h = {
        .kind = ARCTIC_E2E_DATA,
        .flags = FIELD_DP32(flags, ARCTIC_E2E_FLAGS, PRIORITY,
                            ARCTIC_PRIORITY_HIGH),
        .src_node = PEER, .dst_node = NIU_NODE,
        .epoch = n->peer_epoch,
        .seq = n->peer_seq[ARCTIC_PRIORITY_HIGH]++,
    };
    size_t size = build_wire(wire, &h,
                             arctic_route_entry(PEER, NIU_NODE, true, false),
                             ARCTIC_FIELD_PREP(ARCTIC_W1, TYPE, type), cmd0,
                             cmd1, payload, len);
    uint64_t slot = rx_tail_slot(n, ARCTIC_RXQ_HI);

    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, h.seq, 0);
    g_assert_cmpuint(FIELD_EX32(qtest_readl(n->qts, slot), MPI_HEADER, MODE),
                     ==, mode);
    qtest_writel(n->qts, slot,
                 FIELD_DP32(qtest_readl(n->qts, slot), MPI_HEADER, MODE, 0));
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, type, cmd0, cmd1, payload, len);
}

static void test_dma_receive(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t block[ARCTIC_D / 4], got[ARCTIC_D / 4], payload[1] = { 9 };
    uint64_t target = WIN_VIRT + 0x10000;
    uint32_t before;
    unsigned p, i;

    set_window_and_job(n, WIN_PHYS, WIN_VIRT, WIN_MASK, 0);
    mark_rx_slots(n);
    for (i = 0; i < ARRAY_SIZE(block); i++) {
        block[i] = 0xd3000000 | i;
    }
    qtest_memset(n->qts, WIN_PHYS + 0x10000 - 64, 0xee, ARCTIC_D + 128);
    for (p = 0; p < ARCTIC_DMA_PACKETS; p++) {
        peer_dma_data_acked(n, target + 64 * p, block + 16 * p);
    }
    peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 3, 0xc0de, (uint32_t)target,
                    payload, 1);
    qtest_memread(n->qts, WIN_PHYS + 0x10000, got, sizeof(got));
    for (i = 0; i < ARRAY_SIZE(block); i++) {
        g_assert_cmphex(le32_to_cpu(got[i]), ==, block[i]);
    }
    /* Not a byte before or after the block. */
    g_assert_cmphex(qtest_readl(n->qts, WIN_PHYS + 0x10000 - 4), ==,
                    0xeeeeeeee);
    g_assert_cmphex(qtest_readl(n->qts, WIN_PHYS + 0x10000 + ARCTIC_D), ==,
                    0xeeeeeeee);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 0xc0de, (uint32_t)target,
                    payload, 1);
    g_assert_cmpint(counter(n, ARCTIC_CNT_DMA_RX_PACKETS), ==, 32);

    /*
     * Outside the window (one byte past its end): dropped, acked, and
     * nothing written anywhere.
     */
    before = qtest_readl(n->qts, WIN_PHYS + WIN_MASK + 1);
    peer_dma_data_acked(n, WIN_VIRT + WIN_MASK + 1, block);
    g_assert_cmphex(qtest_readl(n->qts, WIN_PHYS + WIN_MASK + 1), ==, before);
    g_assert_cmpint(counter(n, ARCTIC_CNT_DMA_RX_PACKETS), ==, 32);
    expect_errors(n, 1u << ARCTIC_ERR_DMA_RANGE);

    /*
     * That transfer's notification says it failed: delivered with MODE 1,
     * all else as sent.  The next transfer's notification is plain again,
     * and a message that is no notification is never marked.
     */
    for (i = 0; i < 2; i++) {
        peer_flagged_to_hirx(n, R_ARCTIC_E2E_FLAGS_NOTIFY_MASK, 4, 0xbad0 + i,
                             (uint32_t)target, payload, 1, i == 0);
        if (i == 0) {
            /*
             * The requester (endpoint 0, job 0) is told too, reliably:
             * a data packet it will take as a notice.
             */
            uint32_t epoch = expect_data_flags(n, PEER, ARCTIC_PRIORITY_HIGH,
                                               R_ARCTIC_E2E_FLAGS_NOTICE_MASK,
                                               0, 4, 0xbad0,
                                               ARCTIC_DMA_ERR_TARGET, NULL, 0);

            peer_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                         epoch, 0, 0);
        }
    }
    link_expect_silence(n);

    /*
     * Such a report from another NIU arrives here as a notice: MODE 1,
     * DEST the node that refused, command[1] ARCTIC_DMA_ERR_TARGET.
     */
    peer_flagged_to_hirx(n, R_ARCTIC_E2E_FLAGS_NOTICE_MASK, 6, 0x77,
                         ARCTIC_DMA_ERR_TARGET, NULL, 0, ARCTIC_MODE_DMA);
    niu_stop(n);
}

static void test_dma_refused(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t v = 1, epoch;

    mark_rx_slots(n);
    /* No window registered yet. */
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 1, 0xa1, REMOTE_TARGET, WIN_VIRT, NULL,
              0);
    doorbell(n);
    link_expect_silence(n);
    guest_expect_notice(n, 1, 0xa1, ARCTIC_DMA_ERR_RANGE);
    expect_errors(n, 1u << ARCTIC_ERR_DMA_RANGE);
    set_window_and_job(n, WIN_PHYS, WIN_VIRT, WIN_MASK, 0);
    /*
     * Unaligned source, unaligned target, source past the window,
     * a source block straddling the window's end, no route.
     */
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 2, 0xa2, REMOTE_TARGET, WIN_VIRT + 64,
              NULL, 0);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 3, 0xa3, REMOTE_TARGET + 8, WIN_VIRT,
              NULL, 0);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 4, 0xa4, REMOTE_TARGET,
              WIN_VIRT + WIN_MASK + 1, NULL, 0);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 5, 0xa5, REMOTE_TARGET, WIN_VIRT - 2048,
              NULL, 0);
    guest_dma(n, ARCTIC_TXQ_DMA, 200, 6, 0xa6, REMOTE_TARGET, WIN_VIRT, NULL,
              0);
    doorbell(n);
    link_expect_silence(n);
    guest_expect_notice(n, 2, 0xa2, ARCTIC_DMA_ERR_ALIGN);
    guest_expect_notice(n, 3, 0xa3, ARCTIC_DMA_ERR_ALIGN);
    guest_expect_notice(n, 4, 0xa4, ARCTIC_DMA_ERR_RANGE);
    guest_expect_notice(n, 5, 0xa5, ARCTIC_DMA_ERR_RANGE);
    guest_expect_notice(n, 6, 0xa6, ARCTIC_DMA_ERR_ROUTE);
    g_assert_cmpint(ep_r(n, 0, A_EP_DMA_TX_TL), ==, 6);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_ALIGN | 1u << ARCTIC_ERR_DMA_RANGE |
                  1u << ARCTIC_ERR_NO_ROUTE);
    /* An MPI packet in DMATx is refused too; MPI traffic still flows. */
    {
        uint64_t slot = TX_BASE + ARCTIC_DMA_TX_OFFSET +
                        (uint64_t)n->dma_head * ARCTIC_SLOT_SIZE;
        qtest_writel(n->qts, slot, mpi_header(2, 7, 0));
        n->dma_head++;
    }
    guest_send(n, ARCTIC_TXQ_HI, 2, 8, 0, 0, &v, 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 8, 0, 0, &v, 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 0, 0);
    link_expect_silence(n);
    guest_expect_notice(n, 7, 0, ARCTIC_DMA_ERR_QUEUE);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_MODE);
    g_assert_cmpint(counter(n, ARCTIC_CNT_DMA_REQUESTS), ==, 0);
    niu_stop(n);
}

/*
 * HiRx placed over DMATx, ahead of its tail: each refused request leaves
 * an error notice that is a new request, refused in turn.  The NIU's work
 * stays bounded: it stops after one pass until virtual time passes, then
 * goes on at the idle poll's pace (a doorbell used to burn a host core
 * until Tx went off).
 */
static void test_tx_refusals_bounded(void)
{
    Niu *n = niu_start(false);
    uint64_t rx_base = TX_BASE + ARCTIC_DMA_TX_OFFSET;
    uint32_t first, later, paced;

    qtest_memset(n->qts, TX_BASE, 0, ARCTIC_TX_REGION_SIZE);
    ep_w(n, 0, A_EP_TX_QBASE_LO, (uint32_t)TX_BASE);
    ep_w(n, 0, A_EP_TX_QBASE_HI, TX_BASE >> 32);
    ep_w(n, 0, A_EP_RX_QBASE_LO, (uint32_t)rx_base);
    ep_w(n, 0, A_EP_RX_QBASE_HI, rx_base >> 32);
    ep_w(n, 0, A_EP_HI_RX_HD, 1);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    /* A misaligned target: refused, and its notice lands in DMATx[1]. */
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 1, 0xa1, REMOTE_TARGET + 8, WIN_VIRT,
              NULL, 0);
    doorbell(n);
    g_usleep(100 * 1000);
    first = counter(n, ARCTIC_CNT_TX_ERRORS);
    g_usleep(100 * 1000);
    later = counter(n, ARCTIC_CNT_TX_ERRORS);
    g_assert_cmpuint(first, >=, 2);     /* the notices did feed it */
    g_assert_cmpuint(first, <=, ARCTIC_N);
    g_assert_cmpuint(later, ==, first);
    qtest_clock_step(n->qts, 10 * 1000 * 1000);
    paced = counter(n, ARCTIC_CNT_TX_ERRORS);
    g_assert_cmpuint(paced, >, later);
    g_assert_cmpuint(paced - later, <=, 4 * ARCTIC_N);
    reg_w(n, A_NIU_ERROR_CAUSE, reg_r(n, A_NIU_ERROR_CAUSE));
    niu_stop(n);
}

/*
 * A window whose memory would wrap past 2^64 is refused when it is
 * loaded, in whichever order its registers are written, and the window
 * the registers held stays.
 */
static void test_dma_window_wrap_refused(void)
{
    Niu *n = niu_start(false);
    const uint64_t top = 0xffffffffffc00000ull;     /* 4 MiB below 2^64 */
    const uint64_t mask8m = 8 * 1024 * 1024 - 1;

    reg_w(n, A_NIU_TX_CTRL, 0);
    reg_w(n, A_NIU_RX_CTRL, 0);
    /* Base first, then a mask too large for it. */
    ep_w(n, 0, A_EP_DMA_BASE_PHY_LO, (uint32_t)top);
    ep_w(n, 0, A_EP_DMA_BASE_PHY_HI, top >> 32);
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_LO, (uint32_t)mask8m);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    g_assert_cmphex(ep_r(n, 0, A_EP_DMA_RANGE_MASK_LO), ==, 0);
    /* 4 MiB fits exactly below 2^64. */
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_LO, (uint32_t)(mask8m >> 1));
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    g_assert_cmphex(ep_r(n, 0, A_EP_DMA_RANGE_MASK_LO), ==, mask8m >> 1);
    /* Mask first, then a base too high for it. */
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_LO, 0);
    ep_w(n, 0, A_EP_DMA_BASE_PHY_HI, 0);
    ep_w(n, 0, A_EP_DMA_BASE_PHY_LO, 0);
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_LO, (uint32_t)mask8m);
    ep_w(n, 0, A_EP_DMA_BASE_PHY_HI, top >> 32);
    ep_w(n, 0, A_EP_DMA_BASE_PHY_LO, (uint32_t)top);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    g_assert_cmphex(ep_r(n, 0, A_EP_DMA_BASE_PHY_LO), ==, 0);
    g_assert_cmphex(ep_r(n, 0, A_EP_DMA_BASE_PHY_HI), ==, top >> 32);
    niu_stop(n);
}

/*
 * Job tags (GID): stamped on every packet; data for another job is
 * refused and retried until that job runs.
 */
static void test_job_tags(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header h;
    uint32_t v = 3;
    size_t size;

    set_window_and_job(n, 0, 0, 0, 7);
    mark_rx_slots(n);
    guest_send(n, ARCTIC_TXQ_HI, 2, 1, 0, 0, &v, 1);
    doorbell(n);
    size = link_expect_packet(n, wire);
    arctic_e2e_decode(wire, &h);
    g_assert_cmpint(h.job, ==, 7);
    g_assert_cmpint(size, ==, arctic_wire_size(5));
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, h.epoch, 0, 0);

    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0,
                     1, 2, 3, NULL, 0);      /* job 0 */
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, ARCTIC_NACK_WRONG_JOB);
    g_assert_cmpint(qtest_readl(n->qts, rx_slot_addr(ARCTIC_RXQ_HI, 0)), ==,
                    0);
    wire[6] = 7;                            /* the running job's tag */
    arctic_wire_seal(wire, size);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, 0);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 1, 2, 3, NULL, 0);
    g_assert_cmpint(counter(n, ARCTIC_CNT_WRONG_JOB), ==, 1);
    niu_stop(n);
}

void niu_test_add_dma(void)
{
    qtest_add_func("/arctic-niu/dma/send", test_dma_send);
    qtest_add_func("/arctic-niu/dma/hitx-blocks", test_dma_in_hitx_blocks_hitx);
    qtest_add_func("/arctic-niu/dma/receive", test_dma_receive);
    qtest_add_func("/arctic-niu/dma/context-switch",
                   test_dma_progress_and_context_switch);
    qtest_add_func("/arctic-niu/dma/refused", test_dma_refused);
    qtest_add_func("/arctic-niu/dma/share-leaves-mpi-lines",
                   test_dma_share_leaves_mpi_lines);
    qtest_add_func("/arctic-niu/dma/refusals-bounded",
                   test_tx_refusals_bounded);
    qtest_add_func("/arctic-niu/dma/window-wrap-refused",
                   test_dma_window_wrap_refused);
    qtest_add_func("/arctic-niu/protection/job-tags", test_job_tags);
}
