/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU receive datapath: RCVFSM of seed 002 §6.3.1 and the
 * receiver's half of the end-to-end ack/retry protocol.
 *
 * Every data packet from the network is answered: delivered and acked
 * (into a queue, a DMA window, or with RxCtrl OFF the dMPI FIFO), refused
 * and nacked (queue or FIFO full, endpoint not served, wrong job, packet
 * out of order), or recognised as a duplicate and acked again.
 * Delivery writes the body of the Rx slot before the header that carries
 * the valid bit.  What the NIU owes its peers is kept per stream (one ack
 * and one nack at most), so it is bounded whatever the network does.
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "system/dma.h"
#include "trace.h"

#include "arctic-niu.h"

/*
 * What became of a data packet: delivered; dropped, because no retry could
 * ever deliver it (acked either way, and the stream moves on); or refused
 * with a nack reason (enum arctic_nack_reason), for its sender to retry.
 */
typedef enum {
    RX_DELIVERED,
    RX_DROPPED,
    RX_REFUSED,
} RxOutcome;

typedef struct RxVerdict {
    RxOutcome outcome;
    uint8_t nack_reason;        /* RX_REFUSED only */
} RxVerdict;

static const RxVerdict rx_delivered = { .outcome = RX_DELIVERED };
static const RxVerdict rx_dropped = { .outcome = RX_DROPPED };

static RxVerdict rx_refused(uint8_t reason)
{
    return (RxVerdict) { .outcome = RX_REFUSED, .nack_reason = reason };
}

static inline bool seq_after(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) > 0;
}

void niu_rx_reset(ArcticNiuState *s)
{
    memset(s->rx_stream, 0, sizeof(s->rx_stream));
    memset(s->rx_dma_failed, 0, sizeof(s->rx_dma_failed));
    s->report_head = 0;
    s->report_count = 0;
    s->ctrl_head = 0;
    s->ctrl_count = 0;
}

static void owe_control(ArcticNiuState *s, uint8_t prio, uint16_t src)
{
    ArcticRxStream *st = &s->rx_stream[prio][src];

    if (!st->in_ctrl_fifo) {
        unsigned tail = (s->ctrl_head + s->ctrl_count) %
                        ARRAY_SIZE(s->ctrl_fifo);
        s->ctrl_fifo[tail] = prio << 8 | src;
        s->ctrl_count++;
        st->in_ctrl_fifo = true;
    }
}

static void owe_ack(ArcticNiuState *s, uint8_t prio, uint16_t src)
{
    s->rx_stream[prio][src].ack_due = true;
    s->acks_held++;
    owe_control(s, prio, src);
}

static void owe_nack(ArcticNiuState *s, uint8_t prio, uint16_t src,
                     uint32_t epoch, uint32_t seq, uint8_t reason)
{
    ArcticRxStream *st = &s->rx_stream[prio][src];

    st->nack_due = true;
    s->nack_owed = true;        /* nacks never wait (niu_tx_pump()) */
    st->nack_epoch = epoch;
    st->nack_seq = seq;
    st->nack_reason = reason;
    owe_control(s, prio, src);
}

/*
 * The requesting endpoint of a transfer whose data this NIU refused is
 * owed a report (sent by niu-tx.c send_reports()).  Best effort, as every
 * notice: with 16 already waiting, the oldest is given up.
 */
static void owe_report(ArcticNiuState *s, uint16_t src, uint8_t flags,
                       uint16_t job, uint32_t w1, uint32_t command)
{
    unsigned n = ARRAY_SIZE(s->reports);
    ArcticReport *r;

    if (s->report_count == n) {
        trace_arctic_niu_report_lost(s->node_id,
                                     s->reports[s->report_head].node);
        s->report_head = (s->report_head + 1) % n;
        s->report_count--;
    }
    r = &s->reports[(s->report_head + s->report_count) % n];
    r->node = src;
    r->endpoint = FIELD_EX32(flags, ARCTIC_E2E_FLAGS, SOURCE_ENDPOINT);
    r->type = FIELD_EX32(w1, ARCTIC_W1, TYPE);
    r->job = job;
    r->command = command;
    s->report_count++;
    trace_arctic_niu_report(s->node_id, src, r->endpoint, command);
    niu_tx_kick(s);
}

/* Write one remote-DMA data packet into the endpoint's window (§6.3.2). */
static RxVerdict deliver_dma(ArcticNiuState *s, uint16_t src, unsigned epn,
                            const uint8_t *words)
{
    ArcticEndpoint *ep = &s->ep[epn];
    uint64_t target = arctic_get_le64(words + 8);
    uint32_t data[ARCTIC_DMA_DATA_WORDS];
    uint64_t phys;
    unsigned i;

    if (target % sizeof(data) ||
        !niu_dma_translate(ep, target, sizeof(data), &phys)) {
        /*
         * The sender named memory this endpoint never registered: no byte
         * is written, and retrying cannot help, so the packet is dropped
         * (and acked); the receiver's ERROR_CAUSE says why.
         */
        niu_error(s, ARCTIC_ERR_DMA_RANGE, epn, ARCTIC_RXQ_HI,
                  (uint32_t)target >> 6,
                  "endpoint %u refused DMA to 0x%" PRIx64
                  " outside its window", epn, target);
        niu_count(s, ARCTIC_CNT_BAD_PACKETS);
        s->rx_dma_failed[src] |= 1u << epn;
        return rx_dropped;
    }
    for (i = 0; i < ARRAY_SIZE(data); i++) {
        data[i] = cpu_to_le32(arctic_get_le32(words + 16 + 4 * i));
    }
    if (niu_dma_write(s, phys, data, sizeof(data)) != MEMTX_OK) {
        niu_error(s, ARCTIC_ERR_DMA, epn, ARCTIC_RXQ_HI, 0,
                  "remote DMA to 0x%" PRIx64 " of endpoint %u failed",
                  (uint64_t)phys, epn);
        return rx_refused(ARCTIC_NACK_RX_ERROR);
    }
    trace_arctic_niu_rx_dma(s->node_id, epn, target, phys);
    niu_count(s, ARCTIC_CNT_DMA_RX_PACKETS);
    return rx_delivered;
}

/* An Rx head counts INDEX and LAP as one number modulo 2N (EP_RX_HD). */
QEMU_BUILD_BUG_ON((int)R_EP_RX_HD_LAP_SHIFT != (int)ARCTIC_LOG2_N);

/* The receive slot @idx of (@epn, @q), at @addr, could not be reached. */
static RxVerdict rx_slot_dma_failed(ArcticNiuState *s, unsigned epn,
                                   unsigned q, unsigned idx, dma_addr_t addr)
{
    niu_error(s, ARCTIC_ERR_DMA, epn, q, idx,
              "endpoint %u receive queue %u slot %u at 0x%" PRIx64
              " is not guest memory", epn, q, idx, (uint64_t)addr);
    return rx_refused(ARCTIC_NACK_RX_ERROR);
}

/*
 * Write a whole receive slot, body before the header that makes it valid
 * (§6.3.1 steps 4-6).  Delivered, or refused with a nack reason.
 */
static RxVerdict write_rx_slot(ArcticNiuState *s, unsigned epn, unsigned q,
                              uint32_t header, const uint32_t *body,
                              unsigned payload_words)
{
    ArcticEndpoint *ep = &s->ep[epn];
    unsigned idx = FIELD_EX32(ep->rx_head[q], EP_RX_HD, INDEX);
    dma_addr_t addr = ep->rx_qbase +
        (q == ARCTIC_RXQ_HI ? ARCTIC_HI_RX_OFFSET : ARCTIC_LO_RX_OFFSET) +
        (dma_addr_t)idx * ARCTIC_SLOT_SIZE;
    uint32_t old;

    if (niu_dma_load_header(s, addr, &old) != MEMTX_OK) {
        return rx_slot_dma_failed(s, epn, q, idx, addr);
    }
    if (FIELD_EX32(old, MPI_HEADER, VALID)) {
        trace_arctic_niu_rx_queue_full(s->node_id, epn, q, idx);
        return rx_refused(ARCTIC_NACK_QUEUE_FULL);
    }
    if (niu_dma_write(s, addr + ARCTIC_SLOT_COMMAND0, body,
                      4 * ARCTIC_COMMAND_WORDS) != MEMTX_OK ||
        niu_dma_write(s, addr + ARCTIC_SLOT_PAYLOAD,
                      body + ARCTIC_COMMAND_WORDS,
                      4 * payload_words) != MEMTX_OK) {
        return rx_slot_dma_failed(s, epn, q, idx, addr);
    }
    /* The body is visible before the valid bit: one store, after it. */
    header = FIELD_DP32(header, MPI_HEADER, LAP,
                        FIELD_EX32(ep->rx_head[q], EP_RX_HD, LAP));
    header = FIELD_DP32(header, MPI_HEADER, VALID, 1);
    if (niu_dma_store_header(s, addr, header) != MEMTX_OK) {
        return rx_slot_dma_failed(s, epn, q, idx, addr);
    }
    /* INDEX and LAP count on together: LAP flips as INDEX wraps. */
    ep->rx_head[q] = (ep->rx_head[q] + 1) % (2 * ARCTIC_N);
    niu_irq_event(s, 1u << (R_NIU_IRQ_RX_SHIFT + epn));
    return rx_delivered;
}

/* Deliver a data packet (§6.3.1 steps 1-7, §6.3.2) from @src. */
static RxVerdict deliver(ArcticNiuState *s, uint8_t prio, uint16_t src,
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

    if (!s->rx_enabled) {
        /*
         * dMPI mode, when asked for: the raw receive FIFO takes any packet
         * (§6.1).  Otherwise nothing is taken that a reset would lose.
         */
        return s->rx_raw && niu_raw_rx_push(s, prio, pkt, size)
               ? rx_delivered : rx_refused(ARCTIC_NACK_RX_OFF);
    }
    if (dma ? arctic_len != ARCTIC_DMA_PACKET_LENGTH
            : (len < 0 || len > ARCTIC_MAX_PAYLOAD)) {
        /*
         * A packet of a shape no slot or DMA block holds is the sender's
         * error; it can never be delivered, so it is acked and dropped
         * rather than retried forever.
         */
        niu_error(s, ARCTIC_ERR_BAD_PACKET, epn, q, w1 & 0xffff,
                  "%s packet of length %u from node %u dropped",
                  dma ? "DMA" : "MPI", arctic_len, src);
        niu_count(s, ARCTIC_CNT_BAD_PACKETS);
        return rx_dropped;
    }
    if ((epn & s->vmask) != epn) {
        return rx_refused(ARCTIC_NACK_BAD_ENDPOINT);
    }
    if (job != s->ep[epn].job) {
        /*
         * Seeds 000 Ch. 4, 003 §3.2.1: the packet belongs to a job that
         * is not running on this endpoint now; it is retried until it is.
         */
        niu_count(s, ARCTIC_CNT_WRONG_JOB);
        return rx_refused(ARCTIC_NACK_WRONG_JOB);
    }
    if (dma) {
        return deliver_dma(s, src, epn, words);
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
             (s->rx_dma_failed[src] & (1u << epn));
    if (failed || FIELD_EX32(flags, ARCTIC_E2E_FLAGS, NOTICE)) {
        /*
         * The notification of a transfer whose data this NIU refused
         * (some of it, at least), or another NIU's report that it refused
         * ours: MODE 1 tells the program it is no plain message.
         */
        header = FIELD_DP32(header, MPI_HEADER, MODE, ARCTIC_MODE_DMA);
    }
    verdict = write_rx_slot(s, epn, q, header, body, len);
    if (verdict.outcome == RX_DELIVERED && failed) {
        s->rx_dma_failed[src] &= ~(1u << epn);
        owe_report(s, src, flags, job, w1, le32_to_cpu(body[0]));
    }
    if (verdict.outcome == RX_DELIVERED) {
        trace_arctic_niu_rx_deliver(s->node_id, epn, q,
                                    (FIELD_EX32(s->ep[epn].rx_head[q],
                                                EP_RX_HD, INDEX) +
                                     ARCTIC_N - 1) % ARCTIC_N,
                                    src, len, le32_to_cpu(body[0]));
        niu_count(s, q == ARCTIC_RXQ_HI ? ARCTIC_CNT_RX_HI_PACKETS
                                               : ARCTIC_CNT_RX_LO_PACKETS);
    }
    return verdict;
}

/*
 * The error notice for a refused DMA request (niu-hw.h, enum
 * arctic_dma_status), in the requester's own HiRx when there is room.
 */
bool niu_rx_local_notice(ArcticNiuState *s, unsigned epn, uint32_t header,
                         uint32_t command, uint32_t status)
{
    uint32_t body[ARCTIC_COMMAND_WORDS] = {
        cpu_to_le32(command), cpu_to_le32(status)
    };
    uint32_t notice = header & (R_MPI_HEADER_TYPE_MASK |
                                R_MPI_HEADER_ENDPOINT_MASK);

    notice = FIELD_DP32(notice, MPI_HEADER, MODE, ARCTIC_MODE_DMA);
    notice = FIELD_DP32(notice, MPI_HEADER, DEST, s->node_id);
    if (!s->rx_enabled ||
        write_rx_slot(s, epn, ARCTIC_RXQ_HI, notice, body, 0).outcome !=
        RX_DELIVERED) {
        return false;
    }
    return true;
}

static void rx_data(ArcticNiuState *s, const struct arctic_e2e_header *h,
                    const uint8_t *pkt, size_t size)
{
    uint8_t prio = FIELD_EX32(h->flags, ARCTIC_E2E_FLAGS, PRIORITY);
    ArcticRxStream *st = &s->rx_stream[prio][h->src_node];
    RxVerdict verdict;

    if (!st->known || h->epoch != st->epoch) {
        /*
         * A new session starts at seq 0 with a newer epoch; anything else
         * from an epoch we do not hold asks the sender to start one.
         */
        if (h->seq == 0 && (!st->known || seq_after(h->epoch, st->epoch))) {
            st->known = true;
            st->epoch = h->epoch;
            st->expected = 0;
            trace_arctic_niu_rx_new_epoch(s->node_id, h->src_node, prio,
                                          h->epoch);
        } else {
            owe_nack(s, prio, h->src_node, h->epoch,
                     st->known ? st->epoch : 0, ARCTIC_NACK_RESYNC);
            return;
        }
    }
    if (h->seq == st->expected) {
        verdict = deliver(s, prio, h->src_node, h->job, h->flags, pkt,
                          size);
        if (verdict.outcome != RX_REFUSED) {
            st->expected++;
            owe_ack(s, prio, h->src_node);
        } else {
            trace_arctic_niu_rx_refuse(s->node_id, h->src_node, prio, h->seq,
                                       verdict.nack_reason);
            owe_nack(s, prio, h->src_node, h->epoch, h->seq,
                     verdict.nack_reason);
        }
    } else if (seq_after(st->expected, h->seq)) {
        /* Already delivered: the ack was lost or the packet duplicated. */
        niu_count(s, ARCTIC_CNT_DUPLICATES);
        trace_arctic_niu_rx_duplicate(s->node_id, h->src_node, prio, h->seq);
        owe_ack(s, prio, h->src_node);
    } else {
        trace_arctic_niu_rx_refuse(s->node_id, h->src_node, prio, h->seq,
                                   ARCTIC_NACK_OUT_OF_ORDER);
        owe_nack(s, prio, h->src_node, h->epoch, st->expected,
                 ARCTIC_NACK_OUT_OF_ORDER);
    }
}

void niu_rx_packet(ArcticNiuState *s, const uint8_t *pkt, size_t size)
{
    enum arctic_wire_error err = arctic_wire_check(pkt, size);
    const uint8_t *words = pkt + ARCTIC_WIRE_WORDS_OFFSET;
    struct arctic_e2e_header h;

    if (err == ARCTIC_WIRE_OK) {
        arctic_e2e_decode(pkt, &h);
        if (h.dst_node != s->node_id || h.src_node >= ARCTIC_S) {
            err = ARCTIC_WIRE_MISROUTED;    /* or forged */
        } else if (h.kind != ARCTIC_E2E_DATA &&
                   FIELD_EX32(arctic_get_le32(words + 4), ARCTIC_W1, LENGTH) !=
                   ARCTIC_CONTROL_PACKET_LENGTH) {
            /* An answer without its incarnation word. */
            err = ARCTIC_WIRE_BAD_ANSWER;
        } else if (h.kind == ARCTIC_E2E_DATA &&
                   FIELD_EX32(h.flags, ARCTIC_E2E_FLAGS, PRIORITY) !=
                   FIELD_EX32(arctic_get_le32(words), ARCTIC_W0, PRIORITY)) {
            /*
             * Data travels on the network of its stream's priority; acks
             * and nacks always travel high.
             */
            err = ARCTIC_WIRE_BAD_PRIORITY;
        }
    }
    if (err != ARCTIC_WIRE_OK) {
        niu_error(s, ARCTIC_ERR_BAD_PACKET, 0, 0, err,
                  "dropped a malformed packet (reason %d)", err);
        niu_count(s, ARCTIC_CNT_BAD_PACKETS);
        return;
    }
    trace_arctic_niu_rx_packet(s->node_id, h.kind, h.src_node, h.flags,
                               h.epoch, h.seq);
    switch (h.kind) {
    case ARCTIC_E2E_DATA:
        rx_data(s, &h, pkt, size);
        break;
    case ARCTIC_E2E_ACK:
        niu_count(s, ARCTIC_CNT_ACKS_RECEIVED);
        niu_tx_handle_ack(s, &h, arctic_control_incarnation(pkt));
        niu_tx_peer_answered(s, h.src_node);
        break;
    case ARCTIC_E2E_NACK:
        niu_count(s, ARCTIC_CNT_NACKS_RECEIVED);
        niu_tx_handle_nack(s, &h, arctic_control_incarnation(pkt));
        niu_tx_peer_answered(s, h.src_node);
        break;
    }
}

/*
 * The next ack or nack the NIU owes, as a wire packet on the
 * high-priority network (acks must never wait behind the traffic they
 * release).  Returns false when nothing is owed or it cannot be routed.
 */
bool niu_rx_next_control(ArcticNiuState *s, uint8_t *wire, size_t *size)
{
    while (s->ctrl_count) {
        uint16_t entry = s->ctrl_fifo[s->ctrl_head];
        uint8_t prio = entry >> 8;
        uint16_t src = entry & 0xff;
        ArcticRxStream *st = &s->rx_stream[prio][src];
        uint32_t route = s->route_table[ARCTIC_ROUTE_TABLE_HIGH][src];
        struct arctic_e2e_header h = {
            .flags = FIELD_DP32(0, ARCTIC_E2E_FLAGS, PRIORITY, prio),
            .src_node = s->node_id,
            .dst_node = src,
            /*
             * Which incarnation of this receiver answers (all of it in
             * word 2): a sender tells a reset receiver from a reordered
             * answer by it.
             */
            .incarnation_lo = s->epoch_base & 0xffff,
        };
        uint32_t w1;

        if (st->ack_due) {
            st->ack_due = false;
            h.kind = ARCTIC_E2E_ACK;
            h.epoch = st->epoch;
            h.seq = st->expected - 1;
        } else if (st->nack_due) {
            st->nack_due = false;
            h.kind = ARCTIC_E2E_NACK;
            h.flags = FIELD_DP32(h.flags, ARCTIC_E2E_FLAGS, REASON,
                                 st->nack_reason);
            h.epoch = st->nack_epoch;
            if (st->nack_reason == ARCTIC_NACK_RESYNC) {
                h.resync_epoch = st->nack_seq;
            } else {
                h.seq = st->nack_seq;
            }
        }
        if (!st->ack_due && !st->nack_due) {
            st->in_ctrl_fifo = false;
            s->ctrl_head = (s->ctrl_head + 1) % ARRAY_SIZE(s->ctrl_fifo);
            s->ctrl_count--;
        }
        if (!h.kind) {
            continue;
        }
        if (!FIELD_EX32(route, ROUTE_ENTRY, VALID)) {
            /* The sender will time out and retry once a route exists. */
            niu_error(s, ARCTIC_ERR_NO_ROUTE, 0, 0, src,
                      "no route to node %u for an ack", src);
            continue;
        }
        route = FIELD_DP32(route, ROUTE_ENTRY, PRIORITY, ARCTIC_PRIORITY_HIGH);
        w1 = (route & R_ROUTE_ENTRY_DOWNROUTE_MASK);
        w1 = FIELD_DP32(w1, ARCTIC_W1, LENGTH, ARCTIC_CONTROL_PACKET_LENGTH);
        h.flags = FIELD_DP32(h.flags, ARCTIC_E2E_FLAGS, PRIORITY, prio);
        arctic_e2e_encode(wire, &h);
        arctic_put_le32(wire + ARCTIC_WIRE_WORDS_OFFSET,
                        route & ~R_ROUTE_ENTRY_DOWNROUTE_MASK);
        arctic_put_le32(wire + ARCTIC_WIRE_WORDS_OFFSET + 4, w1);
        arctic_control_set_incarnation(wire, s->epoch_base);
        *size = arctic_wire_size(ARCTIC_CONTROL_PACKET_LENGTH);
        arctic_wire_seal(wire, *size);
        niu_count(s, h.kind == ARCTIC_E2E_ACK ? ARCTIC_CNT_ACKS_SENT
                                                     : ARCTIC_CNT_NACKS_SENT);
        trace_arctic_niu_tx_control(s->node_id, h.kind, src, prio, h.epoch,
                                    h.seq);
        return true;
    }
    return false;
}
