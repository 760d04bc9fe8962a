/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU transmit datapath: MPFSM of seed 002 §6.2.1 and the sender's
 * half of the end-to-end ack/retry protocol (seeds 003 §3.2.2-3.2.4 and
 * 000 §2.8-2.10).
 *
 * MPFSM polls the Tx queues of the served endpoints (high before low),
 * takes each valid slot, builds its Arctic packet into a retransmit line,
 * and releases the slot by clearing its header.  A line is freed only when
 * the receiver acknowledges it; a nack or a timeout sends it again.  The
 * poll timer runs on the virtual clock with adaptive back-off: fast after
 * activity, backing off when it finds nothing, and a doorbell skips the
 * wait.  While every vCPU is halted nothing can write a slot, so the poll
 * parks until one can run again (tx_poll_park()).
 */

#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "qemu/lockable.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "system/cpus.h"
#include "system/dma.h"
#include "trace.h"

#include "arctic-niu.h"

static inline bool seq_before_eq(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) <= 0;
}

static unsigned lines_busy(ArcticNiuState *s, int prio)
{
    if (prio < 0) {
        return s->lines_busy[ARCTIC_PRIORITY_LOW] +
               s->lines_busy[ARCTIC_PRIORITY_HIGH];
    }
    return s->lines_busy[prio];
}

static void line_mark_free(ArcticNiuState *s, ArcticLine *line, bool free)
{
    unsigned i = line - s->lines;

    if (free) {
        s->lines_free[i / 64] |= 1ull << (i % 64);
    } else {
        s->lines_free[i / 64] &= ~(1ull << (i % 64));
    }
}

/* A line leaves the buffer (acknowledged, or its peer given up). */
static void line_free(ArcticNiuState *s, ArcticLine *line)
{
    assert(line->busy);
    line->busy = false;
    line->queued = false;
    line_mark_free(s, line, true);
    s->lines_busy[line->prio]--;
    s->dma_lines_busy -= line->dma;
}

/* A free line for a packet of @prio, honouring the high-priority reserve. */
static ArcticLine *line_alloc(ArcticNiuState *s, uint8_t prio)
{
    unsigned i;

    if (prio == ARCTIC_PRIORITY_LOW &&
        lines_busy(s, ARCTIC_PRIORITY_LOW) >=
        s->num_lines - ARCTIC_HI_RESERVED_LINES) {
        s->tx_line_wait = true;
        return NULL;
    }
    for (i = 0; i < ARRAY_SIZE(s->lines_free); i++) {
        if (s->lines_free[i]) {
            return &s->lines[i * 64 + ctz64(s->lines_free[i])];
        }
    }
    s->tx_line_wait = true;     /* niu_tx_resume() serves it again */
    return NULL;
}

/*
 * The send order of each priority is a FIFO of (line, queued_order):
 * lines are queued with increasing orders, so its head is the oldest.
 * An entry whose line has since been sent, acked or queued again is stale
 * and skipped at the head (niu_tx_next_line()); when stale entries
 * fill the ring it is rebuilt from the lines.
 */
static void sendq_push(ArcticNiuState *s, ArcticLine *line)
{
    ArcticSendQueue *q = &s->sendq[line->prio];

    q->entry[(q->head + q->count) % ARCTIC_SENDQ_SIZE] = (ArcticSendEntry) {
        .line = line - s->lines,
        .order = line->queued_order,
    };
    q->count++;
}

static int compare_order(const void *a, const void *b)
{
    const ArcticLine *x = *(ArcticLine *const *)a;
    const ArcticLine *y = *(ArcticLine *const *)b;

    return x->queued_order < y->queued_order ? -1 :
           x->queued_order > y->queued_order;
}

static void sendq_rebuild(ArcticNiuState *s, uint8_t prio)
{
    ArcticLine *v[ARCTIC_MAX_LINES];
    unsigned i, n = 0;

    for (i = 0; i < s->num_lines; i++) {
        ArcticLine *l = &s->lines[i];
        if (l->busy && l->queued && l->prio == prio) {
            v[n++] = l;
        }
    }
    qsort(v, n, sizeof(v[0]), compare_order);
    s->sendq[prio].head = s->sendq[prio].count = 0;
    for (i = 0; i < n; i++) {
        sendq_push(s, v[i]);
    }
}

static void line_queue(ArcticNiuState *s, ArcticLine *line)
{
    if (s->sendq[line->prio].count == ARCTIC_SENDQ_SIZE) {
        sendq_rebuild(s, line->prio);
    }
    line->queued = true;
    line->nack_wait = false;
    line->parked = false;
    line->queued_order = ++s->queue_counter;
    sendq_push(s, line);
}

/*
 * Out of the send order until its stream's probe is acked: it would only
 * be refused, as out of order, behind the packet the receiver refused.
 */
static void line_park(ArcticLine *line)
{
    line->queued = false;
    line->nack_wait = true;
    line->parked = true;
    line->deadline = INT64_MAX;
}

/*
 * When the node a busy line waits for is declared dead (check_peers()):
 * INT64_MAX if never (no peer timeout, or it has answered since).
 */
static int64_t peer_deadline(ArcticNiuState *s, const ArcticLine *l)
{
    int64_t since = s->peer_waiting_since[l->dst];

    if (!s->peer_timeout_ms || !since) {
        return INT64_MAX;
    }
    return since + (int64_t)s->peer_timeout_ms * SCALE_MS;
}

static void retry_timer_rearm(ArcticNiuState *s)
{
    int64_t next = INT64_MAX;
    unsigned i;

    for (i = 0; i < s->num_lines; i++) {
        ArcticLine *l = &s->lines[i];

        if (!l->busy) {
            continue;
        }
        if (!l->queued && l->deadline < next) {
            next = l->deadline;
        }
        /* The peer timeout has a deadline of its own. */
        next = MIN(next, peer_deadline(s, l));
    }
    /*
     * Only ever earlier: a timer left at an older deadline fires, finds
     * nothing due and comes back here.  Moving it on every send and ack
     * would wake the main loop (a timer_mod that makes the deadline
     * earlier notifies it) twice per packet; this wakes it at most once
     * per retry timeout.
     */
    if (next != INT64_MAX) {
        timer_mod_anticipate(s->retry_timer, next);
    }
}

/*
 * Packets taken in and not yet acknowledged: what a node must wait for
 * before it powers off if it wants them delivered.
 */
unsigned niu_tx_pending(ArcticNiuState *s)
{
    return lines_busy(s, -1);
}

bool niu_tx_draining(ArcticNiuState *s)
{
    unsigned i;

    if (s->tx_enabled) {
        return false;
    }
    /*
     * Seed 002 §4.1.2: OFF reads back only once every packet taken from
     * the queues has entered the network.
     */
    for (i = 0; i < s->num_lines; i++) {
        if (s->lines[i].busy && !s->lines[i].sent_once && !s->lines[i].raw) {
            return true;
        }
    }
    return false;
}

/*
 * ------------------------------------------------------------------------
 * MPFSM
 */

/* The Tx slot at the tail of (@epn, @q), at @addr, could not be reached. */
static void tx_slot_dma_failed(ArcticNiuState *s, unsigned epn, unsigned q,
                               dma_addr_t addr)
{
    niu_error(s, ARCTIC_ERR_DMA, epn, q, s->ep[epn].tx_tail[q],
              "endpoint %u transmit queue %u slot %u at 0x%" PRIx64
              " is not guest memory", epn, q, s->ep[epn].tx_tail[q],
              (uint64_t)addr);
}

/*
 * Release a slot by clearing its header (seed 002 §6.2.1 step 8).  The
 * tail moves on even if the write fails: the slot's packet is already in
 * a line, and sending it again would deliver it twice.
 */
static void release_slot(ArcticNiuState *s, unsigned epn, unsigned q,
                         dma_addr_t addr)
{
    ArcticEndpoint *ep = &s->ep[epn];

    /*
     * One store: the program may write the slot's next header as soon as
     * it reads this one clear, and a second store of 0 would erase it.
     */
    if (niu_dma_store_header(s, addr, 0) != MEMTX_OK) {
        tx_slot_dma_failed(s, epn, q, addr);
    }
    trace_arctic_niu_tx_slot_release(s->node_id, epn, q, ep->tx_tail[q]);
    ep->tx_tail[q] = (ep->tx_tail[q] + 1) % ARCTIC_N;
    niu_irq_event(s, 1u << (R_NIU_IRQ_TX_SHIFT + epn));
}

/* Refuse a slot: record why, drop it so the queue keeps moving. */
static void refuse_slot(ArcticNiuState *s, unsigned epn, unsigned q,
                        dma_addr_t addr, enum arctic_error cause,
                        uint32_t header)
{
    niu_error(s, cause, epn, q, s->ep[epn].tx_tail[q],
              "endpoint %u queue %u slot %u header 0x%08x refused",
              epn, q, s->ep[epn].tx_tail[q], header);
    niu_count(s, ARCTIC_CNT_TX_ERRORS);
    s->tx_refused++;
    release_slot(s, epn, q, addr);
}

/*
 * Put one packet of stream (@prio, @dest) into @line: e2e header, Arctic
 * words 0 and 1 (word 1's LENGTH is set here from @body_words), the body,
 * the CRC.  Every packet the NIU originates is built here.
 */
static void line_fill(ArcticNiuState *s, ArcticLine *line, unsigned epn,
                      unsigned dest, uint32_t route, uint32_t w1,
                      const uint32_t *body, unsigned body_words)
{
    uint8_t prio = FIELD_EX32(route, ROUTE_ENTRY, PRIORITY);
    ArcticTxStream *st;
    unsigned len = ARCTIC_ROUTE_WORDS + body_words;
    struct arctic_e2e_header h = {
        .kind = ARCTIC_E2E_DATA,
        .flags = FIELD_DP32(0, ARCTIC_E2E_FLAGS, PRIORITY, prio),
        .src_node = s->node_id,
        .dst_node = dest,
        .job = s->ep[epn].job,
    };
    uint8_t *words = line->wire + ARCTIC_WIRE_WORDS_OFFSET;
    unsigned i;

    /*
     * Every caller checked the destination; a wrong one here would write
     * outside the stream table.
     */
    assert(dest < ARCTIC_S);
    st = &s->tx_stream[prio][dest];
    h.epoch = st->epoch;
    h.seq = st->next_seq++;

    w1 = (w1 & ~R_ARCTIC_W1_DOWNROUTE_MASK) |
         (route & R_ROUTE_ENTRY_DOWNROUTE_MASK);
    w1 = FIELD_DP32(w1, ARCTIC_W1, LENGTH, len);
    arctic_e2e_encode(line->wire, &h);
    arctic_put_le32(words, route & (R_ROUTE_ENTRY_UPROUTE_MASK |
                                    R_ROUTE_ENTRY_VALID_MASK |
                                    R_ROUTE_ENTRY_PRIORITY_MASK));
    arctic_put_le32(words + 4, w1);
    for (i = 0; i < body_words; i++) {
        arctic_put_le32(words + 8 + 4 * i, body[i]);
    }
    line->size = arctic_wire_size(len);
    arctic_wire_seal(line->wire, line->size);
    assert(!line->busy);
    line->busy = true;
    line_mark_free(s, line, false);
    line->sent_once = false;
    line->dma = FIELD_EX32(w1, ARCTIC_W1, MODE) == ARCTIC_MODE_DMA;
    line->raw = false;
    line->prio = prio;
    s->lines_busy[prio]++;
    s->dma_lines_busy += line->dma;
    line->epn = epn;
    line->dst = dest;
    line->seq = h.seq;
    line->retries = 0;
    if (st->paused) {
        line_park(line);
    } else {
        line_queue(s, line);
    }
    trace_arctic_niu_tx_packet(s->node_id, epn, dest, prio, h.epoch, h.seq,
                               FIELD_EX32(w1, ARCTIC_W1, MODE), body_words,
                               body_words ? body[0] : 0);
}

/* Add e2e @flags to a line line_fill() built, with job tag @job; reseal. */
static void line_mark(ArcticLine *line, uint8_t flags, uint16_t job)
{
    struct arctic_e2e_header h;

    arctic_e2e_decode(line->wire, &h);
    h.flags |= flags;
    h.job = job;
    arctic_e2e_encode(line->wire, &h);
    arctic_wire_seal(line->wire, line->size);
}

/*
 * An MPI packet (§6.2.1 steps 5-7), or a DMA notification (§6.2.2 step 8,
 * with the mode cleared and the target's low word as command 1).
 */
static void build_mpi(ArcticNiuState *s, ArcticLine *line, unsigned epn,
                      uint32_t route, uint32_t header, uint32_t cmd0,
                      uint32_t cmd1, const uint32_t *payload_le)
{
    unsigned len = FIELD_EX32(header, MPI_HEADER, LENGTH);
    uint32_t body[ARCTIC_COMMAND_WORDS + ARCTIC_MAX_PAYLOAD];
    uint32_t w1 = header & ARCTIC_MPI_HEADER_WIRE_MASK;
    unsigned i;

    body[0] = cmd0;
    body[1] = cmd1;
    for (i = 0; i < len; i++) {
        body[2 + i] = le32_to_cpu(payload_le[i]);
    }
    w1 = FIELD_DP32(w1, ARCTIC_W1, MODE, ARCTIC_MODE_MPI);
    line_fill(s, line, epn, FIELD_EX32(header, MPI_HEADER, DEST), route, w1,
              body, ARCTIC_COMMAND_WORDS + len);
}

bool niu_dma_translate(const ArcticEndpoint *ep, uint64_t vaddr,
                       uint64_t len, uint64_t *phys)
{
    uint64_t off = vaddr - ep->dma_base_vir;

    /* A mask of 0 means no window was registered (the smallest is 4 MiB). */
    if (ep->dma_range_mask == 0 || len == 0 || vaddr < ep->dma_base_vir ||
        off > ep->dma_range_mask || len - 1 > ep->dma_range_mask - off ||
        off + (len - 1) > UINT64_MAX - ep->dma_base_phy) {
        /*
         * The last check never fails for a window the registers took
         * (they refuse one that wraps); it keeps the sum below honest.
         */
        return false;
    }
    *phys = ep->dma_base_phy + off;
    return true;
}

/*
 * A line for the next DMA data packet, within the DMA share
 * (niu_dma_lines()).
 */
static bool dma_line_available(ArcticNiuState *s)
{
    if (s->dma_lines_busy >= niu_dma_lines(s->num_lines)) {
        s->tx_line_wait = true;
        return false;
    }
    return line_alloc(s, ARCTIC_PRIORITY_HIGH) != NULL;
}

static void dma_refuse(ArcticNiuState *s, unsigned epn, unsigned q,
                       dma_addr_t addr, enum arctic_error cause,
                       enum arctic_dma_status status, uint32_t header,
                       uint32_t command)
{
    s->ep[epn].dma_progress[q == ARCTIC_TXQ_HI ? 0 : 1] = 0;
    refuse_slot(s, epn, q, addr, cause, header);
    trace_arctic_niu_dma_refused(s->node_id, epn, q, status);
    niu_rx_local_notice(s, epn, header, command, status);
}

/*
 * DMAFSM (§6.2.2) for the request at the tail of HiTx or DMATx: checks it,
 * then builds as many of its 32 data packets and its notification as
 * there are lines for.  Returns true once the slot is released, false
 * while the request still holds its queue.
 */
static bool dma_step(ArcticNiuState *s, unsigned epn, unsigned q,
                     dma_addr_t addr)
{
    ArcticEndpoint *ep = &s->ep[epn];
    uint32_t *progress = &ep->dma_progress[q == ARCTIC_TXQ_HI ? 0 : 1];
    struct arctic_dma_request req;
    uint32_t header, command, route;
    uint64_t target, source, phys;

    if (niu_dma_read(s, addr, &req, sizeof(req)) != MEMTX_OK) {
        tx_slot_dma_failed(s, epn, q, addr);
        return false;
    }
    header = le32_to_cpu(req.header);
    command = le32_to_cpu(req.command);
    target = le64_to_cpu(req.target);
    source = le64_to_cpu(req.source);
    route = s->route_table[ARCTIC_ROUTE_TABLE_HIGH]
                          [FIELD_EX32(header, MPI_HEADER, DEST)];
    if (FIELD_EX32(header, MPI_HEADER, LENGTH) > ARCTIC_MAX_PAYLOAD) {
        dma_refuse(s, epn, q, addr, ARCTIC_ERR_BAD_LENGTH,
                   ARCTIC_DMA_ERR_LENGTH, header, command);
        return true;
    }
    if (!FIELD_EX32(route, ROUTE_ENTRY, VALID)) {
        dma_refuse(s, epn, q, addr, ARCTIC_ERR_NO_ROUTE,
                   ARCTIC_DMA_ERR_ROUTE, header, command);
        return true;
    }
    if ((source | target) & (ARCTIC_D - 1)) {
        dma_refuse(s, epn, q, addr, ARCTIC_ERR_BAD_ALIGN,
                   ARCTIC_DMA_ERR_ALIGN, header, command);
        return true;
    }
    if (!niu_dma_translate(ep, source, ARCTIC_D, &phys)) {
        dma_refuse(s, epn, q, addr, ARCTIC_ERR_DMA_RANGE,
                   ARCTIC_DMA_ERR_RANGE, header, command);
        return true;
    }
    /* DMA always travels at high priority (§2.2.1). */
    route = FIELD_DP32(route, ROUTE_ENTRY, PRIORITY, ARCTIC_PRIORITY_HIGH);

    while (*progress <= ARCTIC_DMA_PACKETS) {
        ArcticLine *line;

        if (!dma_line_available(s)) {
            trace_arctic_niu_tx_lines_full(s->node_id, epn, q);
            return false;
        }
        line = line_alloc(s, ARCTIC_PRIORITY_HIGH);
        if (*progress < ARCTIC_DMA_PACKETS) {
            uint64_t off = (uint64_t)*progress * 4 * ARCTIC_DMA_DATA_WORDS;
            uint32_t body[2 + ARCTIC_DMA_DATA_WORDS];
            uint32_t w1 = header & (R_ARCTIC_W1_ENDPOINT_MASK |
                                    R_ARCTIC_W1_TYPE_MASK);
            unsigned i;

            if (niu_dma_read(s, phys + off, body + 2,
                             4 * ARCTIC_DMA_DATA_WORDS) != MEMTX_OK) {
                dma_refuse(s, epn, q, addr, ARCTIC_ERR_DMA,
                           ARCTIC_DMA_ERR_MEMORY, header, command);
                return true;
            }
            for (i = 2; i < ARRAY_SIZE(body); i++) {
                body[i] = le32_to_cpu(body[i]);
            }
            body[0] = (uint32_t)(target + off);
            body[1] = (target + off) >> 32;
            w1 = FIELD_DP32(w1, ARCTIC_W1, MODE, ARCTIC_MODE_DMA);
            line_fill(s, line, epn, FIELD_EX32(header, MPI_HEADER, DEST),
                      route, w1, body, ARRAY_SIZE(body));
        } else {
            build_mpi(s, line, epn, route, header, command, (uint32_t)target,
                      req.payload);
            /*
             * Marked, so that a receiver that refused some of the data
             * can tell both programs (niu-rx.c).
             */
            line_mark(line, FIELD_DP32(R_ARCTIC_E2E_FLAGS_NOTIFY_MASK,
                                       ARCTIC_E2E_FLAGS, SOURCE_ENDPOINT,
                                       epn), s->ep[epn].job);
        }
        (*progress)++;
    }
    *progress = 0;
    niu_count(s, ARCTIC_CNT_DMA_REQUESTS);
    trace_arctic_niu_dma_done(s->node_id, epn, q, target);
    release_slot(s, epn, q, addr);
    return true;
}

/*
 * A raw packet from the dMPI transmit FIFO (niu-raw.c): words in the
 * skewed format of seed 002 Figure 2.  Returns false when no line is free
 * (the FIFO then shows full); a malformed packet is refused and dropped.
 */
bool niu_tx_send_raw(ArcticNiuState *s, uint8_t prio, const uint32_t *words,
                     unsigned count)
{
    uint32_t w0 = words[0], w1 = count > 1 ? words[1] : 0;
    unsigned dest = arctic_route_destination(s->node_id, w0, w1);
    ArcticLine *line;

    /*
     * Route bits can name nodes no network of S nodes has (up to 15 hops):
     * such a destination has no stream, and would index past them.
     */
    if (count < ARCTIC_MIN_PACKET_WORDS ||
        count != FIELD_EX32(w1, ARCTIC_W1, LENGTH) ||
        FIELD_EX32(w0, ARCTIC_W0, ZERO) != 0 ||
        FIELD_EX32(w0, ARCTIC_W0, PRIORITY) != prio || dest >= ARCTIC_S) {
        niu_error(s, ARCTIC_ERR_BAD_VALUE, 0, 0, count,
                  "raw packet of %u words (0x%08x 0x%08x) refused",
                  count, w0, w1);
        niu_count(s, ARCTIC_CNT_TX_ERRORS);
        return true;
    }
    line = line_alloc(s, prio);
    if (!line) {
        return false;
    }
    line_fill(s, line, 0, dest,
              (w1 & R_ROUTE_ENTRY_DOWNROUTE_MASK) | (w0 & 0xffff), w1,
              words + ARCTIC_ROUTE_WORDS, count - ARCTIC_ROUTE_WORDS);
    line->raw = true;
    niu_count(s, prio == ARCTIC_PRIORITY_HIGH ?
                        ARCTIC_CNT_TX_HI_PACKETS : ARCTIC_CNT_TX_LO_PACKETS);
    niu_tx_pump(s, false);
    return true;
}

static hwaddr tx_queue_offset(unsigned q)
{
    switch (q) {
    case ARCTIC_TXQ_HI:
        return ARCTIC_HI_TX_OFFSET;
    case ARCTIC_TXQ_LO:
        return ARCTIC_LO_TX_OFFSET;
    default:
        return ARCTIC_DMA_TX_OFFSET;
    }
}

/*
 * Serve one Tx queue of one endpoint; returns the slots taken.  *@left:
 * it stopped with work still in the queue (no line, or the batch done).
 */
static unsigned service_queue(ArcticNiuState *s, unsigned epn, unsigned q,
                              bool *left)
{
    ArcticEndpoint *ep = &s->ep[epn];
    uint8_t queue_prio = q == ARCTIC_TXQ_LO ? ARCTIC_PRIORITY_LOW
                                            : ARCTIC_PRIORITY_HIGH;
    unsigned table = q == ARCTIC_TXQ_LO ? ARCTIC_ROUTE_TABLE_LOW
                                        : ARCTIC_ROUTE_TABLE_HIGH;
    unsigned taken = 0;

    *left = true;
    while (taken < ARCTIC_TX_BATCH) {
        dma_addr_t addr = ep->tx_qbase + tx_queue_offset(q) +
                          (dma_addr_t)ep->tx_tail[q] * ARCTIC_SLOT_SIZE;
        struct arctic_mpi_slot slot;
        uint32_t header, route;
        bool dma;
        ArcticLine *line;

        if (!line_alloc(s, queue_prio)) {
            trace_arctic_niu_tx_lines_full(s->node_id, epn, q);
            break;
        }
        if (niu_dma_load_header(s, addr, &header) != MEMTX_OK) {
            tx_slot_dma_failed(s, epn, q, addr);
            break;
        }
        if (!FIELD_EX32(header, MPI_HEADER, VALID)) {
            *left = false;
            break;
        }
        /*
         * The producer wrote the body before setting valid (seed §3.2.1
         * step 4): read it only after seeing the header.
         */
        smp_rmb();
        dma = FIELD_EX32(header, MPI_HEADER, MODE) == ARCTIC_MODE_DMA;
        if (dma != (q == ARCTIC_TXQ_DMA) && q != ARCTIC_TXQ_HI) {
            /* DMATx holds only DMA requests, LoTx none (§2.2.1). */
            uint32_t command = 0;

            /* Both slot layouts keep a command word at offset 4. */
            niu_dma_read(s, addr + ARCTIC_DMA_SLOT_COMMAND,
                         &command, 4);
            refuse_slot(s, epn, q, addr, ARCTIC_ERR_BAD_MODE, header);
            niu_rx_local_notice(s, epn, header, le32_to_cpu(command),
                                ARCTIC_DMA_ERR_QUEUE);
            taken++;
            continue;
        }
        if (dma) {
            /*
             * A request in HiTx holds back later HiTx traffic until all
             * of it is sent (§2.2.2).
             */
            if (!dma_step(s, epn, q, addr)) {
                break;
            }
            taken++;
            continue;
        }
        taken++;
        if (FIELD_EX32(header, MPI_HEADER, LENGTH) > ARCTIC_MAX_PAYLOAD) {
            refuse_slot(s, epn, q, addr, ARCTIC_ERR_BAD_LENGTH, header);
            continue;
        }
        route = s->route_table[table][FIELD_EX32(header, MPI_HEADER, DEST)];
        if (!FIELD_EX32(route, ROUTE_ENTRY, VALID)) {
            refuse_slot(s, epn, q, addr, ARCTIC_ERR_NO_ROUTE, header);
            continue;
        }
        /*
         * The route entry decides the network priority (§4.4); it can
         * differ from the queue's if the driver loaded it so.
         */
        line = line_alloc(s, FIELD_EX32(route, ROUTE_ENTRY, PRIORITY));
        if (!line) {
            taken--;
            break;
        }
        if (niu_dma_read(s, addr, &slot, sizeof(slot)) !=
            MEMTX_OK) {
            tx_slot_dma_failed(s, epn, q, addr);
            break;
        }
        build_mpi(s, line, epn, route, header,
                  le32_to_cpu(slot.command[0]), le32_to_cpu(slot.command[1]),
                  slot.payload);
        niu_count(s, q == ARCTIC_TXQ_HI ? ARCTIC_CNT_TX_HI_PACKETS
                                               : ARCTIC_CNT_TX_LO_PACKETS);
        release_slot(s, epn, q, addr);
    }
    return taken;
}

/*
 * Tell requesters whose remote DMA this NIU refused in part (niu-rx.c
 * queues the reports): one high-priority data packet each, to the
 * requesting endpoint, with the job tag of its request, delivered there as
 * a notice (NOTICE flag): command[0] its command, command[1]
 * ARCTIC_DMA_ERR_TARGET.  Reliable like any data; sent as lines allow.
 */
static void send_reports(ArcticNiuState *s)
{
    while (s->report_count) {
        ArcticReport *r = &s->reports[s->report_head];
        uint32_t route = s->route_table[ARCTIC_ROUTE_TABLE_HIGH][r->node];
        uint32_t body[ARCTIC_COMMAND_WORDS] = {
            r->command, ARCTIC_DMA_ERR_TARGET
        };
        uint32_t w1 = FIELD_DP32(0, ARCTIC_W1, ENDPOINT, r->endpoint);
        ArcticLine *line;

        w1 = FIELD_DP32(w1, ARCTIC_W1, TYPE, r->type);
        if (FIELD_EX32(route, ROUTE_ENTRY, VALID)) {
            line = line_alloc(s, ARCTIC_PRIORITY_HIGH);
            if (!line) {
                return;     /* when lines come free */
            }
            route = FIELD_DP32(route, ROUTE_ENTRY, PRIORITY,
                               ARCTIC_PRIORITY_HIGH);
            line_fill(s, line, 0, r->node, route, w1, body, ARRAY_SIZE(body));
            line_mark(line, R_ARCTIC_E2E_FLAGS_NOTICE_MASK, r->job);
        } else {
            niu_error(s, ARCTIC_ERR_NO_ROUTE, 0, 0, r->node,
                      "no route to node %u for a DMA report",
                      r->node);
        }
        s->report_head = (s->report_head + 1) % ARRAY_SIZE(s->reports);
        s->report_count--;
    }
}

/* The endpoints served this cycle, in Appendix A's COUNT & VMASK order. */
static unsigned served_endpoints(ArcticNiuState *s, unsigned *order)
{
    unsigned c, n = 0, seen = 0;

    for (c = 0; c < ARCTIC_ENDPOINTS; c++) {
        unsigned epn = (s->tx_count + c) & s->vmask;
        if (!(seen & (1u << epn))) {
            seen |= 1u << epn;
            order[n++] = epn;
        }
    }
    s->tx_count++;
    return n;
}

/*
 * Serve queue @q of the endpoints in @order; returns the slots taken, and
 * adds to @unannounced those of endpoints that rang no doorbell since the
 * last poll and had no announced work waiting (tx_rung).  Endpoints that
 * leave work behind (no line free) are added to @waiting.
 */
static unsigned serve_queues(ArcticNiuState *s, const unsigned *order,
                             unsigned n, unsigned q, bool *more,
                             unsigned *unannounced, uint32_t *waiting)
{
    unsigned i, taken = 0;

    for (i = 0; i < n; i++) {
        bool left;
        unsigned t = service_queue(s, order[i], q, &left);

        *more |= t == ARCTIC_TX_BATCH;
        taken += t;
        if (!(s->tx_rung & (1u << order[i]))) {
            *unannounced += t;
        }
        if (left) {
            *waiting |= 1u << order[i];
        }
    }
    return taken;
}

/* The next poll in one poll interval. */
static void tx_poll_arm(ArcticNiuState *s)
{
    s->tx_poll_parked = false;
    timer_mod(s->tx_poll_timer,
              qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) + s->tx_poll_interval_ns);
}

/*
 * Seed 002's MPFSM polls the Tx queues forever; polling while no vCPU can
 * store would only wake the main loop (an idle guest's QEMU spent half its
 * CPU time on it).  A pass that began with every vCPU halted and found
 * nothing parks the poll.  Whatever makes a vCPU runnable again runs
 * first in the main loop (a timer, an fd handler raising an interrupt;
 * tx_main_loop_poll() unparks on the next iteration), in another vCPU
 * (then not every vCPU was idle), or in this device (niu_tx_unpark()
 * from its interrupts).  So a slot a guest writes without a doorbell
 * still waits at most poll-max-ns, idle or not.
 */
static void tx_poll_park(ArcticNiuState *s)
{
    timer_del(s->tx_poll_timer);
    s->tx_poll_parked = true;
    trace_arctic_niu_tx_poll_park(s->node_id);
}

void niu_tx_unpark(ArcticNiuState *s)
{
    if (s->tx_poll_parked && s->tx_enabled) {
        trace_arctic_niu_tx_poll_unpark(s->node_id);
        tx_poll_arm(s);
    }
}

/* Before the main loop sleeps: unpark once a vCPU can run. */
static void tx_main_loop_poll(Notifier *notifier, void *data)
{
    ArcticNiuState *s = container_of(notifier, ArcticNiuState,
                                     tx_main_loop_notifier);
    MainLoopPoll *mlpoll = data;

    /*
     * Only this thread parks the poll (tx_poll_park() runs from its
     * timer), so a parked poll is never missed by this look without the
     * lock; the lock, which the link thread and the vCPUs take per
     * packet, is taken only when there is something to do.
     */
    if (mlpoll->state != MAIN_LOOP_POLL_FILL ||
        !qatomic_read(&s->tx_poll_parked) || all_cpu_threads_idle()) {
        return;
    }
    QEMU_LOCK_GUARD(&s->lock);
    niu_tx_unpark(s);
}

/*
 * One service pass over the Tx queues.  @polled: the poll timer or its
 * bottom half asked, and the poll interval adapts to what the pass found.
 * A doorbell's pass leaves the interval alone: a guest that rings will
 * ring again, and polling fast after each of its doorbells would wake the
 * main loop every poll-min-ns for nothing (on a 2-core host that wake-up
 * takes the core from the vCPU that rang).  For the same reason only work
 * the doorbells did not announce makes the poll fast again: a poll that
 * finds the slot a guest wrote just before ringing for it would otherwise
 * keep itself at poll-min-ns for as long as that guest streams (a trace of
 * niu-bw: some 6000 main-loop wake-ups a second, each taking the BQL from
 * the vCPU and the link thread).  Polling stays armed for the guests that
 * only write slots (seed 002).
 */
static void tx_service(ArcticNiuState *s, bool polled)
{
    unsigned order[ARCTIC_ENDPOINTS];
    unsigned n, taken = 0, unannounced = 0;
    uint32_t waiting = 0;
    bool more = false;
    /* Whether every vCPU was halted before this pass read a queue. */
    bool cpus_idle = polled && all_cpu_threads_idle();

    /*
     * Order the queue reads below after the read of the vCPUs' halted
     * state: a slot a vCPU wrote before it halted is then seen, and a
     * pass that parks has found everything written before the halt.
     */
    smp_mb();
    niu_raw_tx_flush(s);     /* lines may have come free */
    if (s->tx_enabled) {
        send_reports(s);
        s->tx_refused = 0;
        n = served_endpoints(s, order);
        /*
         * High before low across every endpoint, so low-priority work of
         * one endpoint never delays another's high-priority slots; DMATx
         * last: MPI traffic bypasses long DMA operations (§2.2.2).
         */
        taken += serve_queues(s, order, n, ARCTIC_TXQ_HI, &more,
                              &unannounced, &waiting);
        taken += serve_queues(s, order, n, ARCTIC_TXQ_LO, &more,
                              &unannounced, &waiting);
        taken += serve_queues(s, order, n, ARCTIC_TXQ_DMA, &more,
                              &unannounced, &waiting);
        /*
         * Refused slots are work but not progress.  A guest can make each
         * refusal feed the next (its error notice lands in HiRx, which it
         * placed over a Tx queue): such a pass backs off like an idle poll
         * and does not reschedule itself, so the NIU's work per unit of
         * virtual time stays bounded whatever the guest programs.
         */
        if (!polled) {
            if (!timer_pending(s->tx_poll_timer)) {
                tx_poll_arm(s);
            }
        } else {
            if (unannounced && taken > s->tx_refused) {
                s->tx_poll_interval_ns = s->poll_min_ns;
            } else {
                s->tx_poll_interval_ns = MIN(s->tx_poll_interval_ns * 2,
                                             s->poll_max_ns);
            }
            trace_arctic_niu_tx_poll(s->node_id, taken, unannounced,
                                     s->tx_poll_interval_ns);
            /* Work a doorbell announced stays announced until taken. */
            s->tx_rung &= waiting;
            if (cpus_idle && !taken && !waiting && !more) {
                tx_poll_park(s);
            } else {
                tx_poll_arm(s);
            }
        }
        if (more && taken > s->tx_refused) {
            qemu_bh_schedule(s->tx_bh);
        }
    }
    niu_tx_pump(s, false);
}

static void tx_poll_timer_cb(void *opaque)
{
    ArcticNiuState *s = opaque;
    QEMU_LOCK_GUARD(&s->lock);

    tx_service(s, true);
}

static void tx_bh_cb(void *opaque)
{
    ArcticNiuState *s = opaque;
    QEMU_LOCK_GUARD(&s->lock);

    tx_service(s, true);
}

void niu_tx_kick(ArcticNiuState *s)
{
    s->tx_poll_interval_ns = s->poll_min_ns;
    s->tx_poll_parked = false;
    qemu_bh_schedule(s->tx_bh);
}

/*
 * A doorbell serves the queues at once, in the ringing vCPU's thread
 * (under the device lock like every device callback): the slot the guest just
 * wrote is on the link before the store returns, instead of after a hop
 * to the main loop.
 */
void niu_tx_doorbell(ArcticNiuState *s, uint32_t endpoints)
{
    s->tx_rung |= endpoints;
    if (s->doorbell_posted && niu_link_post(&s->link)) {
        return;
    }
    tx_service(s, false);
}

/* A doorbell handed to the link thread (doorbell=posted). */
void niu_tx_posted(ArcticNiuState *s)
{
    tx_service(s, false);
}

/*
 * The link has taken a batch of input (acks among it) or has room again.
 * If the Tx side stopped for want of a line and acks have freed some, it
 * goes on here, in the thread that took the acks, instead of waking the
 * main loop for it; otherwise only what is queued goes out.
 */
void niu_tx_resume(ArcticNiuState *s)
{
    if (s->tx_line_wait && lines_busy(s, -1) < s->num_lines) {
        s->tx_line_wait = false;
        tx_service(s, false);
        return;
    }
    niu_tx_pump(s, true);
}

void niu_tx_enable_changed(ArcticNiuState *s)
{
    if (s->tx_enabled) {
        niu_tx_kick(s);
    } else {
        timer_del(s->tx_poll_timer);
        s->tx_poll_parked = false;
    }
}

/*
 * ------------------------------------------------------------------------
 * Sending lines, acks, nacks, timeouts
 */

/* The oldest queued line of @prio (the send order), or NULL. */
ArcticLine *niu_tx_next_line(ArcticNiuState *s, uint8_t prio)
{
    ArcticSendQueue *q = &s->sendq[prio];

    while (q->count) {
        ArcticSendEntry *e = &q->entry[q->head];
        ArcticLine *l = &s->lines[e->line];

        if (l->busy && l->queued && l->prio == prio &&
            l->queued_order == e->order) {
            return l;
        }
        q->head = (q->head + 1) % ARCTIC_SENDQ_SIZE;
        q->count--;
    }
    return NULL;
}

/*
 * @base doubled @retries times, but no longer than @cap (nor shorter than
 * @base).  The cap is in time, not in doublings: a receiver held off for
 * a second (64 guests on two cores) must not be asked hundreds of times
 * meanwhile, while on an idle host the first retries stay as quick as
 * @base makes them.
 */
static int64_t line_backoff(int64_t base, uint32_t retries, int64_t cap)
{
    return MIN(base << MIN(retries, ARCTIC_MAX_BACKOFF), MAX(base, cap));
}

/*
 * The stream's retransmit timeout before back-off: its smoothed round
 * trip plus four times its variation, never less than retry-timeout-ns
 * nor more than ARCTIC_MAX_RTO_NS (RFC 6298 §2).
 */
static int64_t stream_rto(ArcticNiuState *s, const ArcticTxStream *st)
{
    int64_t rto = s->retry_timeout_ns;

    if (st->srtt_ns) {
        rto = MAX(rto, MIN(st->srtt_ns + 4 * st->rttvar_ns,
                           ARCTIC_MAX_RTO_NS));
    }
    return rto;
}

/*
 * How long @line may go unanswered before it is sent again: the stream's
 * timeout, doubled for each timeout of the line or, for a line not yet
 * timed out, of its stream since the last sample (RFC 6298 §5.5, Karn's
 * algorithm), up to a quarter of the peer timeout so that a silent peer
 * is still asked several times before it is given up.
 */
static int64_t line_timeout(ArcticNiuState *s, const ArcticLine *line)
{
    const ArcticTxStream *st = &s->tx_stream[line->prio][line->dst];
    int64_t cap = s->peer_timeout_ms ?
                  (int64_t)s->peer_timeout_ms * SCALE_MS / 4 :
                  NIU_PEERLESS_MAX_TIMEOUT_NS;

    return line_backoff(stream_rto(s, st), MAX(line->retries, st->backoff),
                        cap);
}

/* A round trip measured on a packet sent once (RFC 6298 §2). */
static void stream_rtt_sample(ArcticNiuState *s, uint8_t prio, uint16_t dst,
                              int64_t rtt)
{
    ArcticTxStream *st = &s->tx_stream[prio][dst];

    if (!st->srtt_ns) {
        st->srtt_ns = MAX(rtt, 1);
        st->rttvar_ns = rtt / 2;
    } else {
        st->rttvar_ns += (ABS(st->srtt_ns - rtt) - st->rttvar_ns) / 4;
        st->srtt_ns = MAX(st->srtt_ns + (rtt - st->srtt_ns) / 8, 1);
    }
    st->backoff = 0;
    trace_arctic_niu_tx_rtt(s->node_id, dst, prio, rtt, st->srtt_ns,
                            st->rttvar_ns);
}

/* A timeout of the stream's packets at @now doubles its timeout once. */
static void stream_timed_out(ArcticNiuState *s, uint8_t prio, uint16_t dst,
                             int64_t now)
{
    ArcticTxStream *st = &s->tx_stream[prio][dst];

    if (st->backoff_at != now) {
        st->backoff_at = now;
        st->backoff = MIN(st->backoff + 1, ARCTIC_MAX_BACKOFF);
    }
}

void niu_tx_line_sent(ArcticNiuState *s, ArcticLine *line)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);

    line->queued = false;
    if (!line->sent_once) {
        line->sent_ns = now;
    }
    line->sent_once = true;
    line->deadline = now + line_timeout(s, line);
    if (!s->peer_waiting_since[line->dst]) {
        s->peer_waiting_since[line->dst] = now;
    }
    /*
     * The retry timer is never later than any deadline (see
     * retry_timer_rearm()), so only this new one can move it: no scan of
     * the lines per packet sent.
     */
    timer_mod_anticipate(s->retry_timer, line->deadline);
}

static bool lines_to(ArcticNiuState *s, uint16_t node)
{
    unsigned i;

    for (i = 0; i < s->num_lines; i++) {
        if (s->lines[i].busy && s->lines[i].dst == node) {
            return true;
        }
    }
    return false;
}

/*
 * Any answer from @node, an ack or a nack, stale or not, shows it is
 * alive: what is still sent to it waits from now on.
 */
void niu_tx_peer_answered(ArcticNiuState *s, uint16_t node)
{
    s->peer_waiting_since[node] = lines_to(s, node)
                                  ? qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) : 0;
}

/*
 * @node has answered nothing for peer-timeout-ms while packets waited for
 * it: drop them, tell each endpoint that lost some with a notice in its
 * HiRx, and start its streams afresh in a newer epoch, so that a node that
 * answers again (restarted, or its link back) takes what comes next as a
 * new session (RESYNC) instead of waiting for the dropped sequence.
 */
static void peer_dead(ArcticNiuState *s, uint16_t node)
{
    unsigned i, p, dropped = 0, endpoints = 0;

    for (i = 0; i < s->num_lines; i++) {
        ArcticLine *l = &s->lines[i];

        if (l->busy && l->dst == node) {
            if (!l->raw) {
                endpoints |= 1u << l->epn;
            }
            line_free(s, l);
            dropped++;
        }
    }
    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        ArcticTxStream *st = &s->tx_stream[p][node];

        st->epoch++;
        st->next_seq = 0;
        st->acked = false;
        st->paused = false;
        st->srtt_ns = st->rttvar_ns = 0;    /* a new peer, maybe */
        st->backoff = 0;
    }
    s->peer_waiting_since[node] = 0;
    s->counters[ARCTIC_CNT_PEER_DROPPED] += dropped;
    trace_arctic_niu_peer_dead(s->node_id, node, dropped, endpoints);
    niu_error(s, ARCTIC_ERR_PEER_DEAD, 0, 0, node,
              "node %u answered nothing for %u ms; %u packet(s) to it "
              "dropped", node, s->peer_timeout_ms, dropped);
    for (i = 0; i < ARCTIC_ENDPOINTS; i++) {
        if (endpoints & (1u << i)) {
            niu_rx_local_notice(s, i,
                                FIELD_DP32(0, MPI_HEADER, ENDPOINT, i),
                                node, ARCTIC_NOTICE_PEER_DEAD);
        }
    }
    niu_tx_kick(s);
}

/* Declare dead every node that has left packets unanswered too long. */
static void check_peers(ArcticNiuState *s, int64_t now)
{
    unsigned i;

    for (i = 0; i < s->num_lines; i++) {
        ArcticLine *l = &s->lines[i];

        if (l->busy && now >= peer_deadline(s, l)) {
            peer_dead(s, l->dst);
        }
    }
}

/* Requeue lines in sequence order so each stream goes out in order. */
static void requeue_sorted(ArcticNiuState *s, ArcticLine **v, unsigned n,
                           bool count_timeouts)
{
    unsigned i, j;

    for (i = 1; i < n; i++) {
        for (j = i; j > 0 && !seq_before_eq(v[j - 1]->seq, v[j]->seq); j--) {
            ArcticLine *t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    }
    for (i = 0; i < n; i++) {
        if (count_timeouts && !v[i]->nack_wait) {
            niu_count(s, ARCTIC_CNT_TIMEOUTS);
        }
        if (v[i]->sent_once) {
            v[i]->retries++;
            niu_count(s, ARCTIC_CNT_RETRANSMITS);
        }
        trace_arctic_niu_tx_retransmit(s->node_id, v[i]->dst, v[i]->prio,
                                       v[i]->seq, v[i]->retries,
                                       v[i]->nack_wait);
        line_queue(s, v[i]);
    }
}

static void retry_timer_cb(void *opaque)
{
    ArcticNiuState *s = opaque;
    QEMU_LOCK_GUARD(&s->lock);
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    ArcticLine *due[ARCTIC_MAX_LINES];
    unsigned i, n = 0;

    if (!niu_link_is_up(&s->link)) {
        return;     /* everything unacked goes out again at link up */
    }
    check_peers(s, now);
    for (i = 0; i < s->num_lines; i++) {
        ArcticLine *l = &s->lines[i];
        if (l->busy && !l->queued && l->deadline <= now) {
            if (!l->nack_wait) {
                stream_timed_out(s, l->prio, l->dst, now);
            }
            due[n++] = l;
        }
    }
    requeue_sorted(s, due, n, true);
    retry_timer_rearm(s);
    niu_tx_pump(s, false);
}

/* A queued line could go out now. */
static bool data_ready(ArcticNiuState *s)
{
    unsigned p;

    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        if (niu_link_can_send(&s->link, p) && niu_tx_next_line(s, p)) {
            return true;
        }
    }
    return false;
}

/*
 * Acks may wait (up to the link's ack-delay-ns) for data going the same
 * way, so that a request's ack travels in one write with its reply
 * instead of waking the switch and the sender once more on its own.
 * They go at once when data goes anyway, when a nack is owed, when
 * ARCTIC_ACK_EVERY deliveries are waiting for them (a stream's sender
 * must not run out of lines), or when the caller is not @lazy.
 */
static bool controls_go_now(ArcticNiuState *s, bool lazy)
{
    return !lazy || !s->link.defer_ns || s->nack_owed ||
           s->acks_held >= ARCTIC_ACK_EVERY || data_ready(s);
}

/*
 * The send order: move what is ready onto the link, as far as its credits
 * and output room allow: owed acks and nacks first (they free the peers'
 * lines), then high-priority data, then low.  Credits are per priority,
 * so a stalled low-priority network never holds back the high one.
 */
void niu_tx_pump(ArcticNiuState *s, bool lazy)
{
    NiuLink *link = &s->link;
    bool stalled = false;
    bool controls;

    if (!niu_link_is_up(link)) {
        return;
    }
    controls = controls_go_now(s, lazy);
    for (;;) {
        uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
        size_t size;
        ArcticLine *line;

        if (niu_link_can_send(link, ARCTIC_PRIORITY_HIGH)) {
            if (controls && niu_rx_next_control(s, wire, &size)) {
                niu_link_send(link, ARCTIC_PRIORITY_HIGH, wire, size);
                continue;
            }
            line = niu_tx_next_line(s, ARCTIC_PRIORITY_HIGH);
            if (line) {
                niu_link_send(link, ARCTIC_PRIORITY_HIGH, line->wire,
                              line->size);
                niu_tx_line_sent(s, line);
                continue;
            }
        } else if (!link->tx_credits[ARCTIC_PRIORITY_HIGH] &&
                   ((controls && s->ctrl_count) ||
                    niu_tx_next_line(s, ARCTIC_PRIORITY_HIGH))) {
            stalled = true;
        }
        line = niu_tx_next_line(s, ARCTIC_PRIORITY_LOW);
        if (line && niu_link_can_send(link, ARCTIC_PRIORITY_LOW)) {
            niu_link_send(link, ARCTIC_PRIORITY_LOW, line->wire, line->size);
            niu_tx_line_sent(s, line);
            continue;
        }
        stalled |= line && !link->tx_credits[ARCTIC_PRIORITY_LOW];
        break;
    }
    if (stalled) {
        niu_count(s, ARCTIC_CNT_CREDIT_STALLS);
        trace_arctic_niu_link_credit_stall(
            s->node_id, link->tx_credits[ARCTIC_PRIORITY_HIGH],
            link->tx_credits[ARCTIC_PRIORITY_LOW]);
    }
    if (!s->ctrl_count) {
        s->acks_held = 0;
        s->nack_owed = false;
    } else if (!controls) {
        niu_link_defer(link);
    }
    niu_link_flush(link);
}

void niu_tx_link_up(ArcticNiuState *s)
{
    ArcticLine *all[ARCTIC_MAX_LINES];
    unsigned i, n = 0;

    /*
     * Unacked and never-sent lines alike, so each stream resumes in
     * sequence order on the new session.  Time with the link down is not
     * the peers' silence: they wait for an answer from now on.
     */
    memset(s->peer_waiting_since, 0, sizeof(s->peer_waiting_since));
    for (i = 0; i < s->num_lines; i++) {
        if (s->lines[i].busy) {
            all[n++] = &s->lines[i];
        }
    }
    for (i = 0; i < ARCTIC_NUM_PRIORITIES * ARCTIC_S; i++) {
        s->tx_stream[i / ARCTIC_S][i % ARCTIC_S].paused = false;
    }
    requeue_sorted(s, all, n, false);
    retry_timer_rearm(s);
    niu_tx_kick(s);
}

void niu_tx_handle_ack(ArcticNiuState *s, const struct arctic_e2e_header *h,
                       uint32_t incarnation)
{
    uint8_t prio = FIELD_EX32(h->flags, ARCTIC_E2E_FLAGS, PRIORITY);
    ArcticTxStream *st = &s->tx_stream[prio][h->src_node];
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    ArcticLine *rest[ARCTIC_MAX_LINES];
    ArcticLine *sampled = NULL;
    unsigned i, n = 0, freed = 0;
    bool resume;

    if (h->epoch != st->epoch) {
        trace_arctic_niu_tx_stale(s->node_id, "ack", h->src_node, h->epoch);
        return;
    }
    if (!st->acked) {
        st->acked = true;
        st->peer_incarnation = incarnation;
    }
    resume = st->paused && seq_before_eq(st->probe_seq, h->seq);
    for (i = 0; i < s->num_lines; i++) {
        ArcticLine *l = &s->lines[i];

        if (!l->busy || l->dst != h->src_node || l->prio != prio) {
            continue;
        }
        if (seq_before_eq(l->seq, h->seq)) {
            /* The newest packet the ack covers that went only once. */
            if (l->sent_once && !l->retries &&
                (!sampled || !seq_before_eq(l->seq, sampled->seq))) {
                sampled = l;
            }
            line_free(s, l);
            freed++;
        } else if (resume && l->parked) {
            rest[n++] = l;
        }
    }
    if (sampled) {
        stream_rtt_sample(s, prio, h->src_node, now - sampled->sent_ns);
    }
    /*
     * The retry timeout measures a receiver that makes no progress, not
     * the age of each packet (as TCP restarts its timer on every ack that
     * advances): a receiver that takes a long stream slowly, or whose link
     * thread waited a few milliseconds for a core, is not silent, and
     * resending what it will ack anyway only adds to its load.
     */
    for (i = 0; freed && i < s->num_lines; i++) {
        ArcticLine *l = &s->lines[i];

        if (l->busy && l->dst == h->src_node && l->prio == prio &&
            !l->queued && !l->nack_wait) {
            l->deadline = MAX(l->deadline, now + line_timeout(s, l));
        }
    }
    if (resume) {
        /* The probe got through: the rest of the stream goes again. */
        st->paused = false;
        requeue_sorted(s, rest, n, false);
    }
    trace_arctic_niu_tx_ack(s->node_id, h->src_node, prio, h->seq, freed);
    /*
     * What waited for these lines goes on in niu_tx_resume(), when
     * the link has dispatched the whole batch the ack came in.
     */
}

/*
 * The receiver lost its state for our epoch: number the stream's unacked
 * packets again from 0 in an epoch newer than both sides have seen.
 */
static void tx_resync(ArcticNiuState *s, uint8_t prio, uint16_t dst,
                      uint32_t receiver_epoch)
{
    ArcticTxStream *st = &s->tx_stream[prio][dst];
    ArcticLine *v[ARCTIC_MAX_LINES];
    unsigned i, n = 0;

    st->epoch = ((int32_t)(receiver_epoch - st->epoch) > 0 ? receiver_epoch
                                                           : st->epoch) + 1;
    st->acked = false;
    st->paused = false;         /* everything goes again, renumbered */
    for (i = 0; i < s->num_lines; i++) {
        ArcticLine *l = &s->lines[i];
        if (l->busy && l->dst == dst && l->prio == prio) {
            v[n++] = l;
        }
    }
    requeue_sorted(s, v, n, false);
    st->next_seq = 0;
    for (i = 0; i < n; i++) {
        struct arctic_e2e_header h;

        arctic_e2e_decode(v[i]->wire, &h);
        h.epoch = st->epoch;
        h.seq = v[i]->seq = st->next_seq++;
        arctic_e2e_encode(v[i]->wire, &h);
        arctic_wire_seal(v[i]->wire, v[i]->size);
    }
    trace_arctic_niu_tx_resync(s->node_id, dst, prio, st->epoch, n);
}

void niu_tx_handle_nack(ArcticNiuState *s,
                        const struct arctic_e2e_header *h,
                        uint32_t incarnation)
{
    uint8_t prio = FIELD_EX32(h->flags, ARCTIC_E2E_FLAGS, PRIORITY);
    uint8_t reason = FIELD_EX32(h->flags, ARCTIC_E2E_FLAGS, REASON);
    ArcticTxStream *st = &s->tx_stream[prio][h->src_node];
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    uint32_t go_back_from = h->seq;
    ArcticLine *probe = NULL;
    unsigned i;

    if (h->epoch != st->epoch) {
        trace_arctic_niu_tx_stale(s->node_id, "nack", h->src_node, h->epoch);
        return;
    }
    trace_arctic_niu_tx_nack(s->node_id, h->src_node, prio, h->seq, reason);
    if (reason == ARCTIC_NACK_RESYNC) {
        if (!st->acked && (int32_t)(h->resync_epoch - st->epoch) >= 0) {
            /*
             * The receiver holds an epoch of ours at least as new (from
             * before this NIU's reset): it can never adopt this one, and
             * never took any of it, so renumbering is safe.
             */
            tx_resync(s, prio, h->src_node, h->resync_epoch);
            niu_tx_pump(s, false);
            return;
        }
        if (!st->acked) {
            /*
             * Nothing of this epoch was acked, so every packet of it is
             * still in a line: sending again from seq 0 lets the receiver
             * adopt the epoch, and cannot deliver anything twice (a seq 0
             * it already took is a duplicate to it).
             */
            go_back_from = 0;
        } else if (incarnation != st->peer_incarnation) {
            /*
             * A receiver that acked this epoch was reset since: its old
             * deliveries went to a guest that is gone, so number what is
             * left again in a new epoch.
             */
            tx_resync(s, prio, h->src_node, h->resync_epoch);
            niu_tx_pump(s, false);
            return;
        } else {
            /*
             * The receiver that acked this epoch still holds it: this
             * refusal was overtaken by the ack (reordering) and is stale.
             */
            trace_arctic_niu_tx_stale(s->node_id, "resync", h->src_node,
                                      h->epoch);
            return;
        }
    }
    /*
     * Everything from the refused packet on would be refused too (the
     * receiver takes each stream in order).  So only the refused packet,
     * the probe, goes again after a back-off; the rest of the stream,
     * sent or not, is parked until the probe is acked
     * (niu_tx_handle_ack()), instead of going out only to be refused
     * behind it while the receiver's queue is still full.
     */
    for (i = 0; i < s->num_lines; i++) {
        ArcticLine *l = &s->lines[i];

        if (l->busy && l->dst == h->src_node && l->prio == prio &&
            seq_before_eq(go_back_from, l->seq) &&
            (!probe || seq_before_eq(l->seq, probe->seq))) {
            probe = l;
        }
    }
    if (!probe) {
        return;         /* all acked since: a stale refusal */
    }
    for (i = 0; i < s->num_lines; i++) {
        ArcticLine *l = &s->lines[i];

        if (l->busy && l->dst == h->src_node && l->prio == prio &&
            l != probe && seq_before_eq(go_back_from, l->seq)) {
            line_park(l);
        }
    }
    st->paused = true;
    st->probe_seq = probe->seq;
    if (!probe->queued) {
        /* A refusal is retried at most once per round trip. */
        int64_t when = now + line_backoff(s->nack_backoff_ns, probe->retries,
                                          stream_rto(s, st));

        if (!probe->nack_wait || probe->parked || when < probe->deadline) {
            probe->deadline = when;
        }
        probe->nack_wait = true;
        probe->parked = false;
    }
    retry_timer_rearm(s);
}

/*
 * ------------------------------------------------------------------------
 * Life cycle
 */

void niu_tx_init(ArcticNiuState *s)
{
    s->tx_poll_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, tx_poll_timer_cb, s);
    s->retry_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, retry_timer_cb, s);
    s->tx_bh = qemu_bh_new_guarded(tx_bh_cb, s,
                                   &DEVICE(s)->mem_reentrancy_guard);
    s->tx_main_loop_notifier.notify = tx_main_loop_poll;
    main_loop_poll_add_notifier(&s->tx_main_loop_notifier);
}

void niu_tx_cleanup(ArcticNiuState *s)
{
    main_loop_poll_remove_notifier(&s->tx_main_loop_notifier);
    timer_free(s->tx_poll_timer);
    timer_free(s->retry_timer);
    qemu_bh_delete(s->tx_bh);
}

void niu_tx_reset(ArcticNiuState *s)
{
    uint32_t epoch;
    unsigned p, d, i;

    timer_del(s->tx_poll_timer);
    timer_del(s->retry_timer);
    memset(s->lines, 0, sizeof(s->lines));
    memset(s->lines_busy, 0, sizeof(s->lines_busy));
    memset(s->lines_free, 0, sizeof(s->lines_free));
    for (i = 0; i < s->num_lines; i++) {
        line_mark_free(s, &s->lines[i], true);
    }
    s->dma_lines_busy = 0;
    memset(s->sendq, 0, sizeof(s->sendq));
    memset(s->peer_waiting_since, 0, sizeof(s->peer_waiting_since));
    s->tx_count = 0;
    s->tx_line_wait = false;
    s->acks_held = 0;
    s->nack_owed = false;
    s->tx_poll_interval_ns = s->poll_min_ns;
    s->tx_poll_parked = false;
    s->tx_rung = 0;
    /*
     * A new epoch for every stream, later than any this NIU used before,
     * and (from the host clock) most likely later than any a receiver
     * remembers from an earlier run of this node.
     */
    epoch = (uint32_t)qemu_clock_get_ms(QEMU_CLOCK_HOST);
    if ((int32_t)(epoch - s->epoch_base) <= 0) {
        epoch = s->epoch_base + 1;
    }
    s->epoch_base = epoch;
    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        for (d = 0; d < ARCTIC_S; d++) {
            s->tx_stream[p][d] = (ArcticTxStream) { .epoch = epoch };
        }
    }
}
