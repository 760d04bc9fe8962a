/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU receive side of the queue engine: RCVFSM of seed 002 §6.3.1
 * and the remote-DMA writes of §6.3.2.
 *
 * The end-to-end protocol (niu-e2e.c) hands up each data packet that
 * arrives in sequence (niu_rx_deliver()); it is delivered (into a
 * queue, a DMA window, or with RxCtrl OFF the dMPI FIFO), refused with a
 * nack reason (queue or FIFO full, endpoint not served, wrong job), or
 * dropped when no retry could deliver it, and the protocol answers the
 * sender accordingly.  Delivery writes the body of the Rx slot before the
 * header that carries the valid bit.
 */

#include "qemu/osdep.h"
#include "qemu/cutils.h"
#include "system/dma.h"
#include "migration/vmstate.h"
#include "trace.h"

#include "niu-queues.h"

static const RxVerdict rx_delivered = { .outcome = RX_DELIVERED };
static const RxVerdict rx_dropped = { .outcome = RX_DROPPED };

static RxVerdict rx_refused(uint8_t reason)
{
    return (RxVerdict) { .outcome = RX_REFUSED, .nack_reason = reason };
}

void niu_rx_reset(NiuQueues *qs)
{
    memset(qs->rx.dma_failed, 0, sizeof(qs->rx.dma_failed));
    qs->rx.report_head = 0;
    qs->rx.report_count = 0;
}

/*
 * The requesting endpoint of a transfer whose data this NIU refused is
 * owed a report (sent by niu-tx.c send_reports()).  Best effort, as every
 * notice: with 16 already waiting, the oldest is given up.
 */
static void owe_report(NiuQueues *qs, uint16_t src, uint8_t flags,
                       uint16_t job, uint32_t w1, uint32_t command)
{
    unsigned n = ARRAY_SIZE(qs->rx.reports);
    ArcticReport *r;

    if (qs->rx.report_count == n) {
        trace_arctic_niu_report_lost(qs->node_id,
                                     qs->rx.reports[qs->rx.report_head].node);
        qs->rx.report_head = (qs->rx.report_head + 1) % n;
        qs->rx.report_count--;
    }
    r = &qs->rx.reports[(qs->rx.report_head + qs->rx.report_count) % n];
    r->node = src;
    r->endpoint = FIELD_EX32(flags, ARCTIC_E2E_FLAGS, SOURCE_ENDPOINT);
    r->type = FIELD_EX32(w1, ARCTIC_W1, TYPE);
    r->job = job;
    r->command = command;
    qs->rx.report_count++;
    trace_arctic_niu_report(qs->node_id, src, r->endpoint, command);
    niu_tx_kick(qs);
}

/* Write one remote-DMA data packet into the endpoint's window (§6.3.2). */
static RxVerdict deliver_dma(NiuQueues *qs, uint16_t src, unsigned epn,
                             const uint8_t *words)
{
    ArcticEndpoint *ep = &qs->ep[epn];
    uint64_t target = arctic_get_le64(words + 8);
    uint32_t data[ARCTIC_DMA_DATA_WORDS];
    uint64_t phys;
    unsigned i;

    if (target % sizeof(data) ||
        !niu_dma_translate(&ep->dma, target, sizeof(data), &phys)) {
        /*
         * The sender named memory this endpoint never registered: no byte
         * is written, and retrying cannot help, so the packet is dropped
         * (and acked); the receiver's ERROR_CAUSE says why.
         */
        niu_error(qs->status, ARCTIC_ERR_DMA_RANGE, epn, ARCTIC_RXQ_HI,
                  (uint32_t)target >> 6,
                  "endpoint %u refused DMA to 0x%" PRIx64
                  " outside its window", epn, target);
        niu_count(qs->status, ARCTIC_CNT_BAD_PACKETS);
        qs->rx.dma_failed[src] |= 1u << epn;
        return rx_dropped;
    }
    for (i = 0; i < ARRAY_SIZE(data); i++) {
        data[i] = cpu_to_le32(arctic_get_le32(words + 16 + 4 * i));
    }
    if (niu_dma_write(qs->dma, phys, data, sizeof(data)) != MEMTX_OK) {
        niu_error(qs->status, ARCTIC_ERR_DMA, epn, ARCTIC_RXQ_HI, 0,
                  "remote DMA to 0x%" PRIx64 " of endpoint %u failed",
                  (uint64_t)phys, epn);
        return rx_refused(ARCTIC_NACK_RX_ERROR);
    }
    trace_arctic_niu_rx_dma(qs->node_id, epn, target, phys);
    niu_count(qs->status, ARCTIC_CNT_DMA_RX_PACKETS);
    return rx_delivered;
}

/* An Rx head counts INDEX and LAP as one number modulo 2N (EP_RX_HD). */
QEMU_BUILD_BUG_ON((int)R_EP_RX_HD_LAP_SHIFT != (int)ARCTIC_LOG2_N);

/* The receive slot @idx of (@epn, @q), at @addr, could not be reached. */
static RxVerdict rx_slot_dma_failed(NiuQueues *qs, unsigned epn,
                                    unsigned q, unsigned idx, dma_addr_t addr)
{
    niu_error(qs->status, ARCTIC_ERR_DMA, epn, q, idx,
              "endpoint %u receive queue %u slot %u at 0x%" PRIx64
              " is not guest memory", epn, q, idx, (uint64_t)addr);
    return rx_refused(ARCTIC_NACK_RX_ERROR);
}

/*
 * Write a whole receive slot, body before the header that makes it valid
 * (§6.3.1 steps 4-6).  Delivered, or refused with a nack reason.
 */
static RxVerdict write_rx_slot(NiuQueues *qs, unsigned epn, unsigned q,
                               uint32_t header, const uint32_t *body,
                              unsigned payload_words)
{
    ArcticEndpoint *ep = &qs->ep[epn];
    unsigned idx = FIELD_EX32(ep->rx_head[q], EP_RX_HD, INDEX);
    dma_addr_t addr = ep->rx_qbase +
        (q == ARCTIC_RXQ_HI ? ARCTIC_HI_RX_OFFSET : ARCTIC_LO_RX_OFFSET) +
        (dma_addr_t)idx * ARCTIC_SLOT_SIZE;
    uint32_t old;

    if (niu_dma_load_header(qs->dma, addr, &old) != MEMTX_OK) {
        return rx_slot_dma_failed(qs, epn, q, idx, addr);
    }
    if (FIELD_EX32(old, MPI_HEADER, VALID)) {
        trace_arctic_niu_rx_queue_full(qs->node_id, epn, q, idx);
        return rx_refused(ARCTIC_NACK_QUEUE_FULL);
    }
    if (niu_dma_write(qs->dma, addr + ARCTIC_SLOT_COMMAND0, body,
                      4 * ARCTIC_COMMAND_WORDS) != MEMTX_OK ||
        niu_dma_write(qs->dma, addr + ARCTIC_SLOT_PAYLOAD,
                      body + ARCTIC_COMMAND_WORDS,
                      4 * payload_words) != MEMTX_OK) {
        return rx_slot_dma_failed(qs, epn, q, idx, addr);
    }
    /* The body is visible before the valid bit: one store, after it. */
    header = FIELD_DP32(header, MPI_HEADER, LAP,
                        FIELD_EX32(ep->rx_head[q], EP_RX_HD, LAP));
    header = FIELD_DP32(header, MPI_HEADER, VALID, 1);
    if (niu_dma_store_header(qs->dma, addr, header) != MEMTX_OK) {
        return rx_slot_dma_failed(qs, epn, q, idx, addr);
    }
    /* INDEX and LAP count on together: LAP flips as INDEX wraps. */
    ep->rx_head[q] = (ep->rx_head[q] + 1) % (2 * ARCTIC_N);
    niu_irq_event(qs->status, 1u << (R_NIU_IRQ_RX_SHIFT + epn));
    return rx_delivered;
}

/* Deliver a data packet (§6.3.1 steps 1-7, §6.3.2) from @src. */
RxVerdict niu_rx_deliver(NiuQueues *qs, uint8_t prio, uint16_t src,
                         uint16_t job, uint8_t flags, const uint8_t *pkt,
                         size_t size)
{
    const uint8_t *words = pkt + ARCTIC_WIRE_WORDS_OFFSET;
    uint32_t w1 = arctic_get_le32(words + 4);
    unsigned epn = FIELD_EX32(w1, ARCTIC_W1, ENDPOINT);
    unsigned q = prio == ARCTIC_PRIORITY_HIGH ? ARCTIC_RXQ_HI : ARCTIC_RXQ_LO;
    unsigned arctic_len = FIELD_EX32(w1, ARCTIC_W1, LENGTH);
    bool dma = FIELD_EX32(w1, ARCTIC_W1, MODE) == ARCTIC_MODE_DMA;
    int len = (int)arctic_len - ARCTIC_MPI_LENGTH_EXTRA;
    uint32_t header, body[ARCTIC_COMMAND_WORDS + ARCTIC_MAX_PAYLOAD];
    RxVerdict verdict;
    bool failed;
    int i;

    if (!qs->rx_enabled) {
        /*
         * dMPI mode, when asked for: the raw receive FIFO takes any packet
         * (§6.1).  Otherwise nothing is taken that a reset would lose.
         */
        return qs->rx_raw && niu_raw_rx_push(qs, prio, pkt, size)
               ? rx_delivered : rx_refused(ARCTIC_NACK_RX_OFF);
    }
    if (dma ? arctic_len != ARCTIC_DMA_PACKET_LENGTH
            : (len < 0 || len > ARCTIC_MAX_PAYLOAD)) {
        /*
         * A packet of a shape no slot or DMA block holds is the sender's
         * error; it can never be delivered, so it is acked and dropped
         * rather than retried forever.
         */
        niu_error(qs->status, ARCTIC_ERR_BAD_PACKET, epn, q, w1 & 0xffff,
                  "%s packet of length %u from node %u dropped",
                  dma ? "DMA" : "MPI", arctic_len, src);
        niu_count(qs->status, ARCTIC_CNT_BAD_PACKETS);
        return rx_dropped;
    }
    if ((epn & qs->vmask) != epn) {
        return rx_refused(ARCTIC_NACK_BAD_ENDPOINT);
    }
    if (job != qs->ep[epn].job) {
        /*
         * Seeds 000 Ch. 4, 003 §3.2.1: the packet belongs to a job that
         * is not running on this endpoint now; it is retried until it is.
         */
        niu_count(qs->status, ARCTIC_CNT_WRONG_JOB);
        return rx_refused(ARCTIC_NACK_WRONG_JOB);
    }
    if (dma) {
        return deliver_dma(qs, src, epn, words);
    }
    for (i = 0; i < ARCTIC_COMMAND_WORDS + len; i++) {
        body[i] = cpu_to_le32(arctic_get_le32(words + 8 + 4 * i));
    }
    /*
     * In a receive slot the dest field (unused by the seed there, §3.2.2
     * step 3) holds the source node.
     */
    header = w1 & ARCTIC_MPI_HEADER_WIRE_MASK;
    header = FIELD_DP32(header, MPI_HEADER, LENGTH, len);
    header = FIELD_DP32(header, MPI_HEADER, DEST, src);
    failed = FIELD_EX32(flags, ARCTIC_E2E_FLAGS, NOTIFY) &&
             (qs->rx.dma_failed[src] & (1u << epn));
    if (failed || FIELD_EX32(flags, ARCTIC_E2E_FLAGS, NOTICE)) {
        /*
         * The notification of a transfer whose data this NIU refused
         * (some of it, at least), or another NIU's report that it refused
         * ours: MODE 1 tells the program it is no plain message.
         */
        header = FIELD_DP32(header, MPI_HEADER, MODE, ARCTIC_MODE_DMA);
    }
    verdict = write_rx_slot(qs, epn, q, header, body, len);
    if (verdict.outcome == RX_DELIVERED && failed) {
        qs->rx.dma_failed[src] &= ~(1u << epn);
        owe_report(qs, src, flags, job, w1, le32_to_cpu(body[0]));
    }
    if (verdict.outcome == RX_DELIVERED) {
        trace_arctic_niu_rx_deliver(qs->node_id, epn, q,
                                    (FIELD_EX32(qs->ep[epn].rx_head[q],
                                                EP_RX_HD, INDEX) +
                                     ARCTIC_N - 1) % ARCTIC_N,
                                    src, len, le32_to_cpu(body[0]));
        niu_count(qs->status, q == ARCTIC_RXQ_HI ? ARCTIC_CNT_RX_HI_PACKETS
                                               : ARCTIC_CNT_RX_LO_PACKETS);
    }
    return verdict;
}

/*
 * The error notice for a refused DMA request (niu-hw.h, enum
 * arctic_dma_status), in the requester's own HiRx when there is room.
 */
bool niu_rx_local_notice(NiuQueues *qs, unsigned epn, uint32_t header,
                         uint32_t command, uint32_t status)
{
    uint32_t body[ARCTIC_COMMAND_WORDS] = {
        cpu_to_le32(command), cpu_to_le32(status)
    };
    uint32_t notice = header & (R_MPI_HEADER_TYPE_MASK |
                                R_MPI_HEADER_ENDPOINT_MASK);

    notice = FIELD_DP32(notice, MPI_HEADER, MODE, ARCTIC_MODE_DMA);
    notice = FIELD_DP32(notice, MPI_HEADER, DEST, qs->node_id);
    if (!qs->rx_enabled ||
        write_rx_slot(qs, epn, ARCTIC_RXQ_HI, notice, body, 0).outcome !=
        RX_DELIVERED) {
        return false;
    }
    return true;
}

/* --- migration (docs/device-internals.md §8) ---------------------------- */

static const VMStateDescription vmstate_niu_report = {
    .name = "arctic-niu/report",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT16(node, ArcticReport),
        VMSTATE_UINT8(endpoint, ArcticReport),
        VMSTATE_UINT8(type, ArcticReport),
        VMSTATE_UINT16(job, ArcticReport),
        VMSTATE_UINT32(command, ArcticReport),
        VMSTATE_END_OF_LIST()
    },
};

/* Sent only while a refused transfer is owed a report or a notice. */
bool niu_rx_reports_needed(NiuQueues *qs)
{
    return qs->rx.report_count ||
           !buffer_is_zero(qs->rx.dma_failed, sizeof(qs->rx.dma_failed));
}

static int rx_reports_post_load(void *opaque, int version_id)
{
    NiuQueues *qs = opaque;
    unsigned i, n = ARRAY_SIZE(qs->rx.reports);

    for (i = 0; i < qs->rx.report_count && qs->rx.report_head < n; i++) {
        if (qs->rx.reports[(qs->rx.report_head + i) % n].endpoint >=
            ARCTIC_ENDPOINTS) {
            break;
        }
    }
    if (qs->rx.report_head >= n || qs->rx.report_count > n ||
        i < qs->rx.report_count) {
        /* niu_post_load() refuses the stream */
        qs->loaded_fault = qs->loaded_fault ?:
                           "remote-DMA reports out of range";
        niu_rx_reset(qs);
    }
    return 0;
}

/* The fields of the subsection "arctic-niu/rx-reports" (arctic-niu.c). */
const VMStateDescription vmstate_niu_queues_reports = {
    .name = "arctic-niu/rx-report-list",
    .version_id = 1,
    .minimum_version_id = 1,
    .post_load = rx_reports_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT8_ARRAY(rx.dma_failed, NiuQueues, ARCTIC_S),
        VMSTATE_STRUCT_ARRAY(rx.reports, NiuQueues, ARCTIC_RX_REPORTS, 1,
                             vmstate_niu_report, ArcticReport),
        VMSTATE_UINT32(rx.report_head, NiuQueues),
        VMSTATE_UINT32(rx.report_count, NiuQueues),
        VMSTATE_END_OF_LIST()
    },
};
