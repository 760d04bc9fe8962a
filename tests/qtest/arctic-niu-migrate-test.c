/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arctic-niu qtests: migration (docs/device-internals.md §8).  An NIU with
 * messages in flight both ways and remote DMA under way is saved to a
 * file (`migrate` "file:") and loaded into a new QEMU (`-incoming defer`,
 * `migrate-incoming`); the test, which plays the switch and the peers,
 * then checks that every message arrives once and in order.  Streams the
 * device cannot take (another node, a version or a subsection it does not
 * know) are refused with a message and leave it frozen.
 */

#include "qemu/osdep.h"
#include <glib/gstdio.h>
#include "arctic-niu-test.h"

#define MIG_DEST        2               /* the node the NIU sends to */
#define MIG_TARGET      0x7f0000002000ull
#define MIG_SCRATCH     0x5eed1234u
#define MIG_TX_POLLED   0x05u       /* endpoint 0, which sends, and 2 */
#define MIG_WINDOW_PHY  0x5eed00000000ull   /* a DMA window's base */
#define MIG_IN_BLOCK    (WIN_PHYS + 0x10000)
#define MIG_OUT_BLOCK   (WIN_PHYS + 0x800)
#define MIG_LINES       16              /* DMA may hold 8 of them */
#define MIG_DMA_BYTES   (4 * ARCTIC_DMA_DATA_WORDS) /* of a data packet */

/* The NIU's migration state, as its state view says it: @key. */
static char *mig_state_of(Niu *n, const char *key)
{
    QDict *rsp;
    char *st = g_strdup(qdict_get_str(niu_state(n, &rsp), key));

    qobject_unref(rsp);
    return st;
}

static char *mig_state(Niu *n)
{
    return mig_state_of(n, "migration");
}

/*
 * A QEMU for the saved state: the same machine and NIU, waiting for it;
 * its stderr in @errlog (NULL: the test's).  @link as for
 * niu_start_node_args().
 */
static Niu *mig_start_dest(const char *link, unsigned node,
                           const char *errlog)
{
    g_autofree char *args = g_strdup_printf("-incoming defer %s%s",
                                            errlog ? "2>" : "",
                                            errlog ? errlog : "");
    g_autofree char *props = g_strdup_printf("lines=%d", MIG_LINES);

    return niu_start_node_args(link, node, props, args);
}

/* What the test knows of the guest's queues and the streams goes along. */
static void mig_follow(Niu *to, const Niu *from)
{
    memcpy(to->tx_head, from->tx_head, sizeof(to->tx_head));
    memcpy(to->rx_tail, from->rx_tail, sizeof(to->rx_tail));
    to->dma_head = from->dma_head;
    to->peer_epoch = from->peer_epoch;
    memcpy(to->peer_seq, from->peer_seq, sizeof(to->peer_seq));
    to->peer_incarnation = from->peer_incarnation;
    to->niu_incarnation = from->niu_incarnation;
    to->niu_incarnation_known = from->niu_incarnation_known;
}

/* Quit the source's QEMU but keep the test's switch socket for the next. */
static void mig_stop_source(Niu *n, int *listen_fd, char **path, char **dir)
{
    *listen_fd = n->listen_fd;
    *path = n->sock_path;
    *dir = n->dir;
    n->listen_fd = -1;
    n->sock_path = n->dir = NULL;
    niu_stop(n);
}

/*
 * The saved state @path of @a loaded into a new QEMU that takes over its
 * switch socket and what the test knows; @a is gone.
 */
static Niu *mig_move(Niu *a, const char *path)
{
    Niu *b = mig_start_dest(a->sock_path, NIU_NODE, NULL);

    mig_follow(b, a);
    mig_stop_source(a, &b->listen_fd, &b->sock_path, &b->dir);
    g_assert_true(niu_migrate_load(b, path));
    return b;
}

/*
 * The NIU's packets to MIG_DEST: LoTx messages 0x10 + seq, a HiTx message
 * 0x20, then the 32 data packets of one DMA request and its notification.
 * Each is checked whole, its flags (ACK_NOW comes and goes with the lines
 * left) aside.
 */
static void mig_expect_out(Niu *n, const uint8_t *wire, size_t size,
                           const uint32_t *block)
{
    uint8_t want[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header got, h;
    uint8_t prio;
    uint32_t w1, cmd0, cmd1, payload = 0xfeed;
    const uint32_t *body;
    int len;
    size_t want_size;

    arctic_e2e_decode(wire, &got);
    prio = FIELD_EX32(got.flags, ARCTIC_E2E_FLAGS, PRIORITY);
    h = (struct arctic_e2e_header) {
        .kind = ARCTIC_E2E_DATA, .flags = got.flags, .src_node = NIU_NODE,
        .dst_node = MIG_DEST, .epoch = got.epoch, .seq = got.seq,
    };
    g_assert_cmpint(got.job, ==, 0);
    if (prio == ARCTIC_PRIORITY_LOW) {
        payload = 0x10 + got.seq;
        w1 = ARCTIC_FIELD_PREP(ARCTIC_W1, TYPE, 1);
        cmd0 = 0x100, cmd1 = 0, body = &payload, len = 1;
    } else if (got.seq == 0) {
        payload = 0x20;
        w1 = ARCTIC_FIELD_PREP(ARCTIC_W1, TYPE, 2);
        cmd0 = 0x200, cmd1 = 0, body = &payload, len = 1;
    } else if (got.seq <= ARCTIC_DMA_PACKETS) {
        uint64_t t = MIG_TARGET + MIG_DMA_BYTES * (got.seq - 1);

        w1 = ARCTIC_FIELD_PREP(ARCTIC_W1, TYPE, 5) |
             ARCTIC_FIELD_PREP(ARCTIC_W1, MODE, 1);
        cmd0 = (uint32_t)t, cmd1 = t >> 32;
        body = block + ARCTIC_DMA_DATA_WORDS * (got.seq - 1);
        len = ARCTIC_DMA_DATA_WORDS;
    } else {
        g_assert_cmpint(got.seq, ==, ARCTIC_DMA_PACKETS + 1);
        g_assert_true(FIELD_EX32(got.flags, ARCTIC_E2E_FLAGS, NOTIFY));
        w1 = ARCTIC_FIELD_PREP(ARCTIC_W1, TYPE, 5);
        cmd0 = 0xc0de, cmd1 = (uint32_t)MIG_TARGET, body = &payload, len = 1;
    }
    want_size = build_wire(want, &h, arctic_route_entry(NIU_NODE, MIG_DEST,
                                                        prio, false),
                           w1, cmd0, cmd1, body, len);
    g_assert_cmpint(size, ==, want_size);
    g_assert_cmpmem(wire, size, want, want_size);
}

/*
 * Read the NIU's packets until @want_next[p] of both priorities is
 * reached: each the next of its stream (nothing lost, repeated or out of
 * order) and of @epoch[p]; high ones acked as they come (the DMA engine
 * needs their lines), low ones once all came.
 */
static void mig_drain_out(Niu *n, const uint32_t *block, uint32_t *next,
                          const uint32_t *want_next, uint32_t *epoch,
                          bool ack_hi_through)
{
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header got;
    uint8_t p;

    while (next[0] < want_next[0] || next[1] < want_next[1]) {
        size_t size = link_expect_packet(n, wire);

        arctic_e2e_decode(wire, &got);
        p = FIELD_EX32(got.flags, ARCTIC_E2E_FLAGS, PRIORITY);
        g_assert_cmpint(got.kind, ==, ARCTIC_E2E_DATA);
        g_assert_cmpint(got.seq, ==, next[p]);
        if (epoch[p]) {
            g_assert_cmphex(got.epoch, ==, epoch[p]);
        }
        epoch[p] = got.epoch;
        mig_expect_out(n, wire, size, block);
        next[p]++;
        if (p == ARCTIC_PRIORITY_HIGH && ack_hi_through) {
            peer_control(n, MIG_DEST, ARCTIC_E2E_ACK, p, got.epoch, got.seq,
                         0);
        }
    }
}

/* A message of the peer's low stream (payload 0x40 + seq), not acked. */
static void mig_peer_lo(Niu *n, uint32_t seq)
{
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t v = 0x40 + seq;
    size_t size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_LOW,
                            n->peer_epoch, seq, 3, 0x300 + seq, 0, &v, 1);

    link_send_packet(n, wire, size);
}

/* ... and its ack (a duplicate is acked again). */
static void mig_peer_lo_acked(Niu *n, uint32_t seq)
{
    mig_peer_lo(n, seq);
    expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW,
                   n->peer_epoch, seq, 0);
}

/* Nothing more in the guest's LoRx: no message came twice. */
static void mig_expect_lo_empty(Niu *n)
{
    g_assert_false(FIELD_EX32(qtest_readl(n->qts, rx_tail_slot(n,
                                                  ARCTIC_RXQ_LO)),
                              MPI_HEADER, VALID));
}

/*
 * Before the cut: the peer's low messages 0-3 delivered (the ack of 3 is
 * the one "lost"), two of its DMA data packets written; the NIU's two low
 * messages and its high one sent, its DMA request started: 8 lines of data
 * taken (the DMA share of 16 lines), 3 sent with the 4 high credits the
 * switch grants and does not give back.
 * The peer acks the high stream through seq 1, which frees a DMA line.
 */
static void mig_before_cut(Niu *n, uint32_t *block, uint32_t *in_block,
                           uint32_t *epoch)
{
    uint32_t next[2] = { 0, 0 }, want_next[2] = { 2, 4 };
    uint32_t payload, seq;
    unsigned i;

    set_window_and_job(n, WIN_PHYS, WIN_VIRT, WIN_MASK, 0);
    mark_rx_slots(n);
    reg_w(n, A_NIU_SCRATCH, MIG_SCRATCH);
    reg_w(n, A_NIU_TX_POLLED, MIG_TX_POLLED);
    for (seq = 0; seq < 4; seq++) {
        mig_peer_lo_acked(n, seq);
    }
    n->peer_seq[ARCTIC_PRIORITY_LOW] = 4;
    for (i = 0; i < ARCTIC_D / 4; i++) {
        in_block[i] = 0xd3000000 | i;
    }
    peer_dma_data_acked(n, WIN_VIRT + 0x10000, in_block);
    peer_dma_data_acked(n, WIN_VIRT + 0x10000 + MIG_DMA_BYTES,
                        in_block + ARCTIC_DMA_DATA_WORDS);

    fill_block(n, MIG_OUT_BLOCK, block, 1);
    for (i = 0; i < 2; i++) {
        payload = 0x10 + i;
        guest_send(n, ARCTIC_TXQ_LO, MIG_DEST, 1, 0x100, 0, &payload, 1);
    }
    payload = 0x20;
    guest_send(n, ARCTIC_TXQ_HI, MIG_DEST, 2, 0x200, 0, &payload, 1);
    payload = 0xfeed;
    guest_dma(n, ARCTIC_TXQ_DMA, MIG_DEST, 5, 0xc0de, MIG_TARGET,
              WIN_VIRT + 0x800, &payload, 1);
    n->hold_credits[ARCTIC_PRIORITY_HIGH] = true;   /* 4 high, no more */
    doorbell(n);
    mig_drain_out(n, block, next, want_next, epoch, false);
    link_expect_silence(n);                 /* out of high credits */
    peer_control(n, MIG_DEST, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                 epoch[ARCTIC_PRIORITY_HIGH], 1, 0);
}

/*
 * After the load, on a new session: the NIU sends again, in order, every
 * line not acked (low 0-1, high 2-9) and goes on with the DMA request
 * (high 10-32, the notification 33), each once; the peer sends its low
 * message 3 again (a duplicate, acked again) and 4 (which the source
 * never read), and the rest of its DMA transfer.
 */
static void mig_after_load(Niu *n, const uint32_t *block,
                           const uint32_t *in_block, uint32_t *epoch)
{
    uint32_t next[2] = { 0, 2 };
    uint32_t want_next[2] = { 2, ARCTIC_DMA_PACKETS + 2 };
    uint32_t got[ARCTIC_D / 4], v, seq;
    unsigned p, i;

    mig_drain_out(n, block, next, want_next, epoch, true);
    peer_control(n, MIG_DEST, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW,
                 epoch[ARCTIC_PRIORITY_LOW], 1, 0);
    link_expect_silence(n);
    for (seq = 3; seq < 5; seq++) {
        mig_peer_lo_acked(n, seq);
    }
    n->peer_seq[ARCTIC_PRIORITY_LOW] = 5;
    for (p = 2; p < ARCTIC_DMA_PACKETS; p++) {
        peer_dma_data_acked(n, WIN_VIRT + 0x10000 + MIG_DMA_BYTES * p,
                            in_block + ARCTIC_DMA_DATA_WORDS * p);
    }
    v = 9;
    peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 3, 0xc0de, WIN_VIRT + 0x10000,
                    &v, 1);

    for (seq = 0; seq < 5; seq++) {
        v = 0x40 + seq;
        guest_expect_rx(n, ARCTIC_RXQ_LO, PEER, 3, 0x300 + seq, 0, &v, 1);
    }
    mig_expect_lo_empty(n);
    v = 9;
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 0xc0de, WIN_VIRT + 0x10000,
                    &v, 1);
    qtest_memread(n->qts, MIG_IN_BLOCK, got, sizeof(got));
    for (i = 0; i < ARRAY_SIZE(got); i++) {
        g_assert_cmphex(le32_to_cpu(got[i]), ==, in_block[i]);
    }
}

/*
 * Frozen at the cut, when the guest stopped (before RAM's last pass, not
 * at the device's own save after it): what the switch sends now, the
 * peer's message 4, is not taken.
 */
static void mig_expect_frozen_source(Niu *a)
{
    char *st = mig_state_of(a, "migration-frozen-by");

    g_assert_cmpstr(st, ==, "finish-migrate");
    g_free(st);
    g_assert_cmpint(counter(a, ARCTIC_CNT_RX_LO_PACKETS), ==, 4);
    mig_peer_lo(a, 4);
    link_expect_silence(a);
    g_assert_cmpint(counter(a, ARCTIC_CNT_RX_LO_PACKETS), ==, 4);
    g_assert_false(FIELD_EX32(qtest_readl(a->qts, rx_slot_addr(ARCTIC_RXQ_LO,
                                                                4)),
                              MPI_HEADER, VALID));
}

static void test_migrate_in_flight(void)
{
    g_autofree char *lines = g_strdup_printf("lines=%d", MIG_LINES);
    Niu *a = niu_start_linked_props(lines, 4, 4), *b;
    g_autofree char *dir = g_dir_make_tmp("arctic-niu-mig-XXXXXX", NULL);
    g_autofree char *state = g_build_filename(dir, "state", NULL);
    uint32_t block[ARCTIC_D / 4], in_block[ARCTIC_D / 4], epoch[2] = { 0 };
    uint32_t up_count;
    char *st;
    QDict *rsp;

    mig_before_cut(a, block, in_block, epoch);
    g_assert_cmpint(qdict_get_int(niu_state(a, &rsp), "tx-pending"), ==,
                    2 + 8);
    qobject_unref(rsp);
    up_count = FIELD_EX32(reg_r(a, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                          UP_COUNT);
    niu_migrate_save(a, state);

    mig_expect_frozen_source(a);
    b = mig_move(a, state);
    st = mig_state(b);
    g_assert_cmpstr(st, ==, "running");
    g_free(st);

    link_handshake(b, 64, 64);
    g_assert_cmpint(FIELD_EX32(reg_r(b, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                               UP_COUNT), ==, up_count + 1);
    g_assert_cmphex(reg_r(b, A_NIU_SCRATCH), ==, MIG_SCRATCH);
    g_assert_cmphex(reg_r(b, A_NIU_TX_POLLED), ==, MIG_TX_POLLED);
    mig_after_load(b, block, in_block, epoch);
    g_assert_cmpint(counter(b, ARCTIC_CNT_DUPLICATES), ==, 1);
    g_assert_cmpint(counter(b, ARCTIC_CNT_RX_LO_PACKETS), ==, 5);
    g_assert_cmpint(counter(b, ARCTIC_CNT_DMA_RX_PACKETS), ==,
                    ARCTIC_DMA_PACKETS);
    g_assert_cmpint(counter(b, ARCTIC_CNT_DMA_REQUESTS), ==, 1);
    g_assert_cmpint(qdict_get_int(niu_state(b, &rsp), "tx-pending"), ==, 0);
    qobject_unref(rsp);
    g_assert_cmphex(reg_r(b, A_NIU_ERROR_CAUSE), ==, 0);
    link_expect_silence(b);
    niu_stop(b);
    g_unlink(state);
    g_rmdir(dir);
}

/*
 * dMPI raw mode's receive FIFO goes along (the subsection "arctic-niu/raw",
 * fields of the queue engine's NiuQueues): a packet half read and one
 * waiting are read on the destination word for word as the network
 * carried them.
 */
static void test_migrate_raw_fifo(void)
{
    g_autofree char *lines = g_strdup_printf("lines=%d", MIG_LINES);
    Niu *a = niu_start_linked_props(lines, 8, 8), *b;
    g_autofree char *dir = g_dir_make_tmp("arctic-niu-mig-XXXXXX", NULL);
    g_autofree char *state = g_build_filename(dir, "state", NULL);
    uint8_t wire[2][ARCTIC_WIRE_MAX_SIZE];
    size_t size[2];
    uint32_t payload[3] = { 7, 8, 9 };
    unsigned i, w;

    reg_w(a, A_NIU_RX_CTRL, R_NIU_CTRL_RAW_MASK);
    peer_send_run(a, wire, size, 2, payload, 3);
    /* The first packet's two route words are read before the cut. */
    for (w = 0; w < 2; w++) {
        g_assert_cmphex(user_r(a, A_USER_LO_RX_FIFO), ==,
                        arctic_get_le32(wire[0] + ARCTIC_WIRE_WORDS_OFFSET +
                                        4 * w));
    }
    niu_migrate_save(a, state);

    b = mig_move(a, state);
    g_assert_cmphex(reg_r(b, A_NIU_RX_CTRL), ==, R_NIU_CTRL_RAW_MASK);
    for (i = 0; i < 2; i++) {
        for (w = i ? 0 : 2;
             w < (size[i] - ARCTIC_WIRE_WORDS_OFFSET) / 4; w++) {
            g_assert_false(user_r(b, A_USER_RX_STATUS) &
                           R_USER_RX_STATUS_LO_EMPTY_MASK);
            g_assert_cmphex(user_r(b, A_USER_LO_RX_FIFO), ==,
                            arctic_get_le32(wire[i] +
                                            ARCTIC_WIRE_WORDS_OFFSET + 4 * w));
        }
    }
    g_assert_cmphex(user_r(b, A_USER_RX_STATUS), ==,
                    R_USER_RX_STATUS_HI_EMPTY_MASK |
                    R_USER_RX_STATUS_LO_EMPTY_MASK);
    g_assert_cmphex(reg_r(b, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(b);
    g_unlink(state);
    g_rmdir(dir);
}

/* Wait for block job @id to conclude, and dismiss it. */
static void mig_block_job(Niu *n, const char *id)
{
    gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;

    for (;;) {
        QDict *rsp = qtest_qmp(n->qts, "{'execute': 'query-jobs'}");
        QList *jobs = qdict_get_qlist(rsp, "return");
        QDict *job = qobject_to(QDict, qlist_peek(jobs));
        bool done = job && !strcmp(qdict_get_str(job, "status"),
                                   "concluded");

        g_assert_null(job ? qdict_get_try_str(job, "error") : NULL);
        qobject_unref(rsp);
        if (done) {
            break;
        }
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(10 * 1000);
    }
    qtest_qmp_assert_success(n->qts, "{'execute': 'job-dismiss', "
                             "'arguments': {'id': %s}}", id);
}

/*
 * A qcow2 image in @path, added as a block node, for savevm and loadvm
 * (made with QMP: the qtest has no qemu-img).
 */
static void mig_snapshot_disk(Niu *n, const char *path)
{
    qtest_qmp_assert_success(n->qts, "{'execute': 'blockdev-create', "
                             "'arguments': {'job-id': 'file', 'options': {"
                             "'driver': 'file', 'filename': %s, "
                             "'size': 0}}}", path);
    mig_block_job(n, "file");
    qtest_qmp_assert_success(n->qts, "{'execute': 'blockdev-add', "
                             "'arguments': {'driver': 'file', "
                             "'node-name': 'snapfile', 'filename': %s}}",
                             path);
    qtest_qmp_assert_success(n->qts, "{'execute': 'blockdev-create', "
                             "'arguments': {'job-id': 'qcow2', 'options': {"
                             "'driver': 'qcow2', 'file': 'snapfile', "
                             "'size': 1048576}}}");
    mig_block_job(n, "qcow2");
    qtest_qmp_assert_success(n->qts, "{'execute': 'blockdev-add', "
                             "'arguments': {'driver': 'qcow2', "
                             "'node-name': 'snap', 'file': 'snapfile'}}");
}

static void mig_hmp_ok(Niu *n, const char *cmd)
{
    g_autofree char *out = qtest_hmp(n->qts, "%s", cmd);

    g_assert_cmpstr(out, ==, "");
}

/*
 * Snapshot s1 in a qcow2 image at @disk, taken with the scratch register
 * written and low message 0 (0x10) sent and not acked: its epoch, and the
 * link's UP_COUNT then in @up_count.
 */
static uint32_t mig_savevm_unacked(Niu *n, const char *disk,
                                   uint32_t *up_count)
{
    uint32_t v = 0x10, epoch;

    mig_snapshot_disk(n, disk);
    reg_w(n, A_NIU_SCRATCH, MIG_SCRATCH);
    guest_send(n, ARCTIC_TXQ_LO, MIG_DEST, 1, 0x100, 0, &v, 1);
    doorbell(n);
    epoch = expect_data(n, MIG_DEST, ARCTIC_PRIORITY_LOW, 0, 1, 0x100, 0,
                        &v, 1);
    *up_count = FIELD_EX32(reg_r(n, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                           UP_COUNT);
    mig_hmp_ok(n, "savevm s1");
    return epoch;
}

/*
 * savevm and loadvm in one QEMU: the session to the switch is kept.
 * After savevm the NIU goes on (its message 0 acked, message 1 sent and
 * acked, the peer's message delivered); loadvm takes it back to message 0
 * sent and not acked, and on the session it kept it sends message 0 again
 * at once, counting one more link up.  The peer, taken back too, sends its
 * message again, and the guest finds it once.
 */
static void test_migrate_loadvm_same_session(void)
{
    g_autofree char *lines = g_strdup_printf("lines=%d", MIG_LINES);
    g_autofree char *dir = g_dir_make_tmp("arctic-niu-mig-XXXXXX", NULL);
    g_autofree char *disk = g_build_filename(dir, "snap.qcow2", NULL);
    Niu *n = niu_start_linked_props(lines, 8, 8);
    uint32_t v = 0x10, up_count, epoch;
    QDict *rsp;
    char *st;

    mark_rx_slots(n);
    epoch = mig_savevm_unacked(n, disk, &up_count);
    st = mig_state(n);
    g_assert_cmpstr(st, ==, "running");
    g_free(st);

    peer_control(n, MIG_DEST, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0,
                 0);
    v = 0x11;
    guest_send(n, ARCTIC_TXQ_LO, MIG_DEST, 1, 0x100, 0, &v, 1);
    doorbell(n);
    expect_data(n, MIG_DEST, ARCTIC_PRIORITY_LOW, 1, 1, 0x100, 0, &v, 1);
    peer_control(n, MIG_DEST, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 1,
                 0);
    mig_peer_lo_acked(n, 0);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RX_LO_PACKETS), ==, 1);

    mig_hmp_ok(n, "loadvm s1");
    v = 0x10;
    g_assert_cmphex(expect_data(n, MIG_DEST, ARCTIC_PRIORITY_LOW, 0, 1,
                                0x100, 0, &v, 1), ==, epoch);
    g_assert_cmpint(FIELD_EX32(reg_r(n, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                               UP_COUNT), ==, up_count + 1);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RX_LO_PACKETS), ==, 0);
    mig_expect_lo_empty(n);
    peer_control(n, MIG_DEST, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0,
                 0);
    mig_peer_lo_acked(n, 0);
    v = 0x40;
    guest_expect_rx(n, ARCTIC_RXQ_LO, PEER, 3, 0x300, 0, &v, 1);
    mig_expect_lo_empty(n);
    g_assert_cmpint(qdict_get_int(niu_state(n, &rsp), "tx-pending"), ==, 0);
    qobject_unref(rsp);
    link_expect_silence(n);
    niu_stop(n);
    g_unlink(disk);
    g_rmdir(dir);
}

/*
 * -loadvm as QEMU starts: the snapshot, taken with message 0 sent and not
 * acked, is loaded before the main loop runs (the NIU takes nothing
 * before it: docs/device-internals.md §8); on its new session the NIU
 * sends message 0 again, on the same epoch, and has the saved registers.
 */
static void test_migrate_loadvm_at_start(void)
{
    g_autofree char *lines = g_strdup_printf("lines=%d", MIG_LINES);
    g_autofree char *dir = g_dir_make_tmp("arctic-niu-mig-XXXXXX", NULL);
    g_autofree char *disk = g_build_filename(dir, "snap.qcow2", NULL);
    g_autofree char *args = NULL;
    Niu *n = niu_start_linked_props(lines, 8, 8), *m, known;
    uint32_t v = 0x10, up_count, epoch;
    char *sock_path, *sock_dir, *st;
    int listen_fd;

    epoch = mig_savevm_unacked(n, disk, &up_count);
    args = g_strdup_printf("-blockdev driver=file,node-name=snapfile,"
                           "filename=%s -blockdev driver=qcow2,"
                           "node-name=snap,file=snapfile -loadvm s1", disk);
    known = *n;                 /* the image is QEMU's until it quits */
    mig_stop_source(n, &listen_fd, &sock_path, &sock_dir);
    m = niu_start_node_args(sock_path, NIU_NODE, lines, args);
    mig_follow(m, &known);
    m->listen_fd = listen_fd;
    m->sock_path = sock_path;
    m->dir = sock_dir;
    st = mig_state(m);
    g_assert_cmpstr(st, ==, "running");
    g_free(st);
    link_handshake(m, 8, 8);
    g_assert_cmphex(expect_data(m, MIG_DEST, ARCTIC_PRIORITY_LOW, 0, 1,
                                0x100, 0, &v, 1), ==, epoch);
    g_assert_cmpint(FIELD_EX32(reg_r(m, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                               UP_COUNT), ==, up_count + 1);
    g_assert_cmphex(reg_r(m, A_NIU_SCRATCH), ==, MIG_SCRATCH);
    peer_control(m, MIG_DEST, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0,
                 0);
    link_expect_silence(m);
    niu_stop(m);
    g_unlink(disk);
    g_rmdir(dir);
}

/*
 * A stream the device cannot take.  Saved from an NIU without a link,
 * whose scratch register, test DMA seed and endpoint 0's DMA window base
 * were written, then changed by @patch (NULL: left alone) and loaded into
 * a new QEMU whose NIU is node @node.  The load must fail with @message in
 * QEMU's log and leave the NIU's migration state @state_want; returns
 * the NIU, linked to the test's switch, for the test to look at.
 */
static Niu *mig_refused(unsigned node, void (*patch)(char *buf, size_t len),
                        const char *state_want, const char *message)
{
    g_autofree char *dir = g_dir_make_tmp("arctic-niu-mig-XXXXXX", NULL);
    g_autofree char *state = g_build_filename(dir, "state", NULL);
    g_autofree char *errlog = g_build_filename(dir, "stderr", NULL);
    g_autofree char *buf = NULL, *log = NULL, *st = NULL;
    Niu *a = niu_start_node_args(NULL, NIU_NODE, "lines=16", ""), *b;
    size_t len;

    reg_w(a, A_NIU_SCRATCH, MIG_SCRATCH);
    reg_w(a, A_NIU_TEST_DMA_SEED, 7);
    ep_w(a, 0, A_EP_DMA_BASE_PHY_HI, MIG_WINDOW_PHY >> 32);
    g_assert_cmphex(reg_r(a, A_NIU_ERROR_CAUSE), ==, 0);
    niu_migrate_save(a, state);
    niu_stop(a);
    if (patch) {
        g_assert_true(g_file_get_contents(state, &buf, &len, NULL));
        patch(buf, len);
        g_assert_true(g_file_set_contents(state, buf, len, NULL));
    }
    b = mig_start_dest("listen", node, errlog);
    g_assert_false(niu_migrate_load(b, state));
    g_assert_true(g_file_get_contents(errlog, &log, NULL, NULL));
    g_test_message("QEMU said: %s", log);
    g_assert_nonnull(strstr(log, message));
    st = mig_state(b);
    g_assert_cmpstr(st, ==, state_want);
    g_unlink(state);
    g_unlink(errlog);
    g_rmdir(dir);
    return b;
}

/* Where the NIU's section starts in a stream: its id string. */
static char *mig_find(char *buf, size_t len, const char *what)
{
    char *p = memmem(buf, len, what, strlen(what));

    g_assert_nonnull(p);
    return p;
}

static void mig_patch_version(char *buf, size_t len)
{
    const char *id = "0000:00:04.0/arctic-niu";
    /* the id, then be32 instance_id and be32 version_id (savevm.c) */
    char *version = mig_find(buf, len, id) + strlen(id) + 4;

    g_assert_cmpint(ldl_be_p(version), ==, 1);
    stl_be_p(version, 2);
}

static void mig_patch_subsection(char *buf, size_t len)
{
    memcpy(mig_find(buf, len, "arctic-niu/test-dma"), "arctic-niu/test-dmx",
           strlen("arctic-niu/test-dmx"));
}

/* The one place @value (@size bytes, big-endian as vmstate puts it) is. */
static char *mig_find_value(char *buf, size_t len, uint64_t value,
                            unsigned size)
{
    uint8_t be[8];
    char *at;

    stq_be_p(be, value);
    at = memmem(buf, len, be + 8 - size, size);
    g_assert_nonnull(at);
    g_assert_null(memmem(at + 1, len - (at + 1 - buf), be + 8 - size, size));
    return at;
}

/*
 * VMASK with bits outside its mask: the field just before the scratch
 * register (VMSTATE_UINT32), whose value finds it.
 */
static void mig_patch_vmask(char *buf, size_t len)
{
    char *at = mig_find_value(buf, len, MIG_SCRATCH, 4);

    g_assert_cmphex(ldl_be_p(at - 4), ==, 0);
    stl_be_p(at - 4, 0xffffffff);
}

/* Endpoint 0's DMA window based at an address its register refuses. */
static void mig_patch_window(char *buf, size_t len)
{
    stq_be_p(mig_find_value(buf, len, MIG_WINDOW_PHY, 8), MIG_WINDOW_PHY + 64);
}

/*
 * A value no register write could leave: the device's own check refuses
 * the stream, names what is wrong, and the NIU stays frozen.
 */
static void test_migrate_refused_value(void)
{
    niu_stop(mig_refused(NIU_NODE, mig_patch_vmask, "load-failed",
                         "arctic-niu: node 1: saved state refused: VMASK "
                         "has bits outside its mask"));
}

/* The same for a register of an endpoint (niu_loaded_fault()). */
static void test_migrate_refused_window(void)
{
    niu_stop(mig_refused(NIU_NODE, mig_patch_window, "load-failed",
                         "arctic-niu: node 1: saved state refused: a DMA "
                         "window no register write could set"));
}

/* Nothing of another node's state is loaded: refused at the first field. */
static void test_migrate_refused_node(void)
{
    Niu *b = mig_refused(NIU_NODE + 1, NULL, "load-failed",
                         "arctic-niu: saved state of node-id=1 cannot load "
                         "into this device's node-id=2");

    g_assert_cmphex(reg_r(b, A_NIU_SCRATCH), ==, 0);
    niu_stop(b);
}

/* A newer version of the device's section is refused before any field. */
static void test_migrate_refused_version(void)
{
    Niu *b = mig_refused(NIU_NODE, mig_patch_version, "frozen",
                         "unsupported version 2 for "
                         "'0000:00:04.0/arctic-niu' v1");

    g_assert_cmphex(reg_r(b, A_NIU_SCRATCH), ==, 0);
    niu_stop(b);
}

/*
 * A subsection the device does not know comes after its fields: the
 * load fails, and the NIU, frozen, runs nothing of what it took: it does
 * not even take its switch's WELCOME.
 */
static void test_migrate_refused_subsection(void)
{
    Niu *b = mig_refused(NIU_NODE, mig_patch_subsection, "load-failed",
                         "error while loading state for instance 0x0 of "
                         "device '0000:00:04.0/arctic-niu'");

    link_accept(b);
    link_expect_hello(b);
    link_send_welcome(b, 8, 8);
    g_usleep(QUIET_MS * 1000);
    g_assert_false(FIELD_EX32(reg_r(b, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                              UP));
    niu_stop(b);
}

/*
 * A template (template=on: no node, no link) saved before its guest
 * touched the NIU loads into a node of any id and becomes that node.  Two
 * clones from one file: node NIU_NODE, whose link says HELLO as it and
 * whose first message goes out from it, and node 4.
 */

/*
 * A template's guest stops its machine with NIU_TEMPLATE_PAUSE (not a use
 * of the template: it saves); its clones, any node, start from it; the
 * register is refused on an NIU that is not a template.
 */
static void test_migrate_template_clones(void)
{
    g_autofree char *dir = g_dir_make_tmp("arctic-niu-mig-XXXXXX", NULL);
    g_autofree char *state = g_build_filename(dir, "state", NULL);
    g_autofree char *props = g_strdup_printf("lines=%d,template=on",
                                             MIG_LINES);
    Niu *t = niu_start_node_args(NULL, 0, props, "");
    const unsigned clones[] = { NIU_NODE, 4 };
    uint32_t v = 0xc10e;
    QDict *rsp;
    unsigned i;

    g_assert_true(qdict_get_bool(niu_state(t, &rsp), "template"));
    qobject_unref(rsp);
    {
        g_autofree char *before = niu_run_state(t), *after = NULL;

        g_assert_cmpstr(before, ==, "running");
        reg_w(t, A_NIU_TEMPLATE_PAUSE, 1);
        after = niu_run_state(t);
        g_assert_cmpstr(after, ==, "paused");
    }
    niu_migrate_save(t, state);
    niu_stop(t);
    for (i = 0; i < ARRAY_SIZE(clones); i++) {
        Niu *c = mig_start_dest("listen", clones[i], NULL);
        g_autofree char *st = NULL;

        g_assert_true(niu_migrate_load(c, state));
        st = mig_state(c);
        g_assert_cmpstr(st, ==, "running");
        g_assert_false(qdict_get_bool(niu_state(c, &rsp), "template"));
        qobject_unref(rsp);
        g_assert_cmpuint(reg_r(c, A_NIU_NODE_ID), ==, clones[i]);
        if (clones[i] == NIU_NODE) {
            link_handshake(c, 8, 8);        /* its HELLO says NIU_NODE */
            niu_setup(c);
            guest_send(c, ARCTIC_TXQ_HI, MIG_DEST, 1, 2, 3, &v, 1);
            doorbell(c);
            expect_data(c, MIG_DEST, ARCTIC_PRIORITY_HIGH, 0, 1, 2, 3,
                        &v, 1);
        } else {
            g_autofree char *loaded = niu_run_state(c), *run = NULL;

            /* Saved paused, so loaded paused: the launcher says cont. */
            g_assert_cmpstr(loaded, ==, "paused");
            qobject_unref(qtest_qmp(c->qts, "{'execute': 'cont'}"));
            reg_w(c, A_NIU_TEMPLATE_PAUSE, 1);
            expect_errors(c, 1u << ARCTIC_ERR_BAD_VALUE);
            run = niu_run_state(c);
            g_assert_cmpstr(run, ==, "running");
        }
        niu_stop(c);
    }
    g_unlink(state);
    g_rmdir(dir);
}

/*
 * A template whose guest read a register may have taken an identity it
 * does not have: the save is refused, naming why, and nothing is written
 * that a clone could load.
 */
static void test_migrate_template_used(void)
{
    g_autofree char *dir = g_dir_make_tmp("arctic-niu-mig-XXXXXX", NULL);
    g_autofree char *state = g_build_filename(dir, "state", NULL);
    g_autofree char *errlog = g_build_filename(dir, "stderr", NULL);
    g_autofree char *args = g_strdup_printf("2>%s", errlog);
    g_autofree char *log = NULL, *st = NULL;
    Niu *t = niu_start_node_args(NULL, 0, "template=on", args);

    g_assert_cmpuint(reg_r(t, A_NIU_NODE_ID), ==, 0);
    g_assert_false(niu_migrate_save_try(t, state));
    niu_stop(t);
    /* Only BAR 0's TEMPLATE_PAUSE is exempt, not its offset elsewhere. */
    t = niu_start_node_args(NULL, 0, "template=on", "");
    user_r(t, A_NIU_TEMPLATE_PAUSE);
    g_assert_false(niu_migrate_save_try(t, state));
    niu_stop(t);
    g_assert_true(g_file_get_contents(errlog, &log, NULL, NULL));
    g_test_message("QEMU said: %s", log);
    g_assert_nonnull(strstr(log, "arctic-niu: template=on: the guest has "
                            "used this NIU"));
    g_unlink(state);
    g_unlink(errlog);
    g_rmdir(dir);
}

void niu_test_add_migrate(void)
{
    qtest_add_func("/arctic-niu/migrate/in-flight", test_migrate_in_flight);
    qtest_add_func("/arctic-niu/migrate/raw-fifo", test_migrate_raw_fifo);
    qtest_add_func("/arctic-niu/migrate/loadvm-same-session",
                   test_migrate_loadvm_same_session);
    qtest_add_func("/arctic-niu/migrate/loadvm-at-start",
                   test_migrate_loadvm_at_start);
    qtest_add_func("/arctic-niu/migrate/refused-node",
                   test_migrate_refused_node);
    qtest_add_func("/arctic-niu/migrate/refused-value",
                   test_migrate_refused_value);
    qtest_add_func("/arctic-niu/migrate/refused-window",
                   test_migrate_refused_window);
    qtest_add_func("/arctic-niu/migrate/refused-version",
                   test_migrate_refused_version);
    qtest_add_func("/arctic-niu/migrate/refused-subsection",
                   test_migrate_refused_subsection);
    qtest_add_func("/arctic-niu/migrate/template-clones",
                   test_migrate_template_clones);
    qtest_add_func("/arctic-niu/migrate/template-used",
                   test_migrate_template_used);
}
