/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU end-to-end protocol (niu-e2e.h): the sender's and the
 * receiver's halves of the ack/retry protocol of seeds 003 §3.2.2-3.2.4
 * and 000 §2.8-2.10 (docs/link-protocol.md §8).
 *
 * A packet the queue engine hands over (niu_e2e_send()) takes a
 * retransmit line and the next sequence number of its stream, and is
 * queued in the send order of its priority; niu_e2e_pump() moves the
 * acks and nacks owed, then high-priority lines, then low, onto the link
 * as its credits allow.  A line is freed only when the receiver
 * acknowledges it; a nack or a timeout sends it again.  Every data packet
 * from the network is answered: the one a stream expects goes up to the
 * queue engine (NiuE2EOps.deliver), and is acked if it was delivered or
 * dropped, nacked if refused; a duplicate is acked again; one out of
 * order is nacked.  What the NIU owes its peers is kept per stream (one
 * ack and one nack at most), so it is bounded whatever the network does.
 */

#include "qemu/osdep.h"
#include "qemu/lockable.h"
#include "migration/vmstate.h"
#include "trace.h"

#include "niu-e2e.h"

static void e2e_count(NiuE2E *e, enum arctic_counter c, uint32_t n)
{
    e->ops->count(e, c, n);
}

static void G_GNUC_PRINTF(4, 5) e2e_error(NiuE2E *e, enum arctic_error cause,
                                          uint32_t detail, const char *fmt,
                                          ...)
{
    va_list ap;

    va_start(ap, fmt);
    e->ops->error(e, cause, detail, fmt, ap);
    va_end(ap);
}

static inline bool seq_before_eq(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) <= 0;
}

static inline bool seq_after(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) > 0;
}

/*
 * ------------------------------------------------------------------------
 * Retransmit lines and the send order
 */

static unsigned lines_busy(NiuE2E *e, int prio)
{
    if (prio < 0) {
        return e->lines_busy[ARCTIC_PRIORITY_LOW] +
               e->lines_busy[ARCTIC_PRIORITY_HIGH];
    }
    return e->lines_busy[prio];
}

static void line_mark_free(NiuE2E *e, ArcticLine *line, bool free)
{
    unsigned i = line - e->lines;

    if (free) {
        e->lines_free[i / 64] |= 1ull << (i % 64);
    } else {
        e->lines_free[i / 64] &= ~(1ull << (i % 64));
    }
}

/* A line leaves the buffer (acknowledged, or its peer given up). */
static void line_free(NiuE2E *e, ArcticLine *line)
{
    assert(line->busy);
    line->busy = false;
    line->queued = false;
    line_mark_free(e, line, true);
    e->lines_busy[line->prio]--;
    e->dma_lines_busy -= line->dma;
}

/*
 * The lines a packet of @prio may still take (of the DMA share if @dma):
 * low priority leaves ARCTIC_HI_RESERVED_LINES to high, DMA data leaves
 * the rest of niu_dma_lines() to messages.
 */
static unsigned lines_left(NiuE2E *e, uint8_t prio, bool dma)
{
    unsigned left = e->cfg.lines - lines_busy(e, -1);
    unsigned share, busy;

    if (prio == ARCTIC_PRIORITY_LOW) {
        share = e->cfg.lines - ARCTIC_HI_RESERVED_LINES;
        busy = lines_busy(e, ARCTIC_PRIORITY_LOW);
        left = MIN(left, share > busy ? share - busy : 0);
    }
    if (dma) {
        share = niu_dma_lines(e->cfg.lines);
        busy = e->dma_lines_busy;
        left = MIN(left, share > busy ? share - busy : 0);
    }
    return left;
}

/* A free line within lines_left(), or NULL; free until niu_e2e_send(). */
static ArcticLine *line_alloc(NiuE2E *e, uint8_t prio, bool dma)
{
    unsigned i;

    if (!lines_left(e, prio, dma)) {
        return NULL;
    }
    for (i = 0; i < ARRAY_SIZE(e->lines_free); i++) {
        if (e->lines_free[i]) {
            return &e->lines[i * 64 + ctz64(e->lines_free[i])];
        }
    }
    return NULL;
}

/*
 * A free line for a packet of @prio, honouring the high-priority reserve,
 * or NULL.  It stays free until niu_e2e_send() fills it.
 */
ArcticLine *niu_e2e_line_alloc(NiuE2E *e, uint8_t prio)
{
    return line_alloc(e, prio, false);
}

/*
 * Whether a packet of @prio (DMA data if @dma) about to take its line
 * leaves fewer than ARCTIC_ACK_EVERY for its kind: it then asks for its
 * ack at once (ACK_NOW), since a sender short of lines must not wait for
 * acks that wait for replies (x-ack-delay-ns) -- a sender spread over many
 * receivers, each holding fewer deliveries than ARCTIC_ACK_EVERY.
 */
static bool lines_short(NiuE2E *e, uint8_t prio, bool dma)
{
    return lines_left(e, prio, dma) <= ARCTIC_ACK_EVERY;
}

/*
 * The send order of each priority is a FIFO of (line, queued_order):
 * lines are queued with increasing orders, so its head is the oldest.
 * An entry whose line has since been sent, acked or queued again is stale
 * and skipped at the head (next_line()); when stale entries
 * fill the ring it is rebuilt from the lines.
 */
static void sendq_push(NiuE2E *e, ArcticLine *line)
{
    ArcticSendQueue *q = &e->sendq[line->prio];

    q->entry[(q->head + q->count) % ARCTIC_SENDQ_SIZE] = (ArcticSendEntry) {
        .line = line - e->lines,
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

static void sendq_rebuild(NiuE2E *e, uint8_t prio)
{
    ArcticLine *v[ARCTIC_MAX_LINES];
    unsigned i, n = 0;

    for (i = 0; i < e->cfg.lines; i++) {
        ArcticLine *l = &e->lines[i];
        if (l->busy && l->queued && l->prio == prio) {
            v[n++] = l;
        }
    }
    qsort(v, n, sizeof(v[0]), compare_order);
    e->sendq[prio].head = e->sendq[prio].count = 0;
    for (i = 0; i < n; i++) {
        sendq_push(e, v[i]);
    }
}

static void line_queue(NiuE2E *e, ArcticLine *line)
{
    if (e->sendq[line->prio].count == ARCTIC_SENDQ_SIZE) {
        sendq_rebuild(e, line->prio);
    }
    line->queued = true;
    line->nack_wait = false;
    line->parked = false;
    line->queued_order = ++e->queue_counter;
    sendq_push(e, line);
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
static int64_t peer_deadline(NiuE2E *e, const ArcticLine *l)
{
    int64_t since = e->peer_waiting_since[l->dst];

    if (!e->cfg.peer_timeout_ms || !since) {
        return INT64_MAX;
    }
    return since + (int64_t)e->cfg.peer_timeout_ms * SCALE_MS;
}

static void retry_timer_rearm(NiuE2E *e)
{
    int64_t next = INT64_MAX;
    unsigned i;

    for (i = 0; i < e->cfg.lines; i++) {
        ArcticLine *l = &e->lines[i];

        if (!l->busy) {
            continue;
        }
        if (!l->queued && l->deadline < next) {
            next = l->deadline;
        }
        /* The peer timeout has a deadline of its own. */
        next = MIN(next, peer_deadline(e, l));
    }
    /*
     * Only ever earlier: a timer left at an older deadline fires, finds
     * nothing due and comes back here.  Moving it on every send and ack
     * would wake the main loop (a timer_mod that makes the deadline
     * earlier notifies it) twice per packet; this wakes it at most once
     * per retry timeout.
     */
    if (next != INT64_MAX) {
        timer_mod_anticipate(e->retry_timer, next);
    }
}

/*
 * Packets taken in and not yet acknowledged: what a node must wait for
 * before it powers off if it wants them delivered.
 */
unsigned niu_e2e_pending(NiuE2E *e)
{
    return lines_busy(e, -1);
}

/*
 * Whether a packet taken from a Tx queue has not entered the network yet
 * (seed 002 §4.1.2: TxCtrl reads back OFF only once none has).
 */
bool niu_e2e_unsent(NiuE2E *e)
{
    unsigned i;

    for (i = 0; i < e->cfg.lines; i++) {
        const ArcticLine *l = &e->lines[i];

        if (l->busy && !l->sent_once && !l->raw) {
            return true;
        }
    }
    return false;
}

/*
 * Stream pair (@prio, @node) for the state view: false when neither side
 * has seen traffic (nothing to show).
 */
bool niu_e2e_stream_view(NiuE2E *e, uint8_t prio, uint16_t node,
                         NiuE2EStreamView *v)
{
    const ArcticTxStream *st = &e->tx_stream[prio][node];
    const ArcticRxStream *rs = &e->rx_stream[prio][node];
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    unsigned i;

    memset(v, 0, sizeof(*v));
    v->next_deadline_ns = -1;
    for (i = 0; i < e->cfg.lines; i++) {
        const ArcticLine *l = &e->lines[i];

        if (!l->busy || l->dst != node || l->prio != prio) {
            continue;
        }
        v->lines_busy++;
        v->lines_queued += l->queued;
        v->max_retries = MAX(v->max_retries, l->retries);
        if (l->sent_once) {
            v->oldest_wait_ns = MAX(v->oldest_wait_ns, now - l->sent_ns);
        }
        if (!l->queued && (v->next_deadline_ns < 0 ||
                           l->deadline - now < v->next_deadline_ns)) {
            v->next_deadline_ns = MAX(l->deadline - now, 0);
        }
    }
    v->tx_epoch = st->epoch;
    v->tx_next_seq = st->next_seq;
    v->tx_acked = st->acked;
    v->tx_paused = st->paused;
    v->tx_backoff = st->backoff;
    v->rx_known = rs->known;
    v->rx_epoch = rs->epoch;
    v->rx_expected = rs->expected;
    v->rx_ack_due = rs->ack_due;
    v->rx_nack_due = rs->nack_due;
    return v->lines_busy || st->next_seq || rs->known;
}

/* Virtual ns until the retry timer fires, -1 if it is not armed. */
int64_t niu_e2e_retry_due_ns(NiuE2E *e)
{
    if (!timer_pending(e->retry_timer)) {
        return -1;
    }
    return MAX((int64_t)timer_expire_time_ns(e->retry_timer) -
               qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL), 0);
}

/*
 * Put one packet of stream (@prio, @dest) into @line: e2e header, Arctic
 * words 0 and 1 (word 1's LENGTH is set here from @body_words), the body,
 * the CRC.  Every packet the NIU originates is built here.
 */
void niu_e2e_send(NiuE2E *e, ArcticLine *line, unsigned epn, uint16_t job,
                  unsigned dest, uint32_t route, uint32_t w1,
                  const uint32_t *body, unsigned body_words)
{
    uint8_t prio = FIELD_EX32(route, ROUTE_ENTRY, PRIORITY);
    ArcticTxStream *st;
    unsigned len = ARCTIC_ROUTE_WORDS + body_words;
    struct arctic_e2e_header h = {
        .kind = ARCTIC_E2E_DATA,
        .flags = FIELD_DP32(0, ARCTIC_E2E_FLAGS, PRIORITY, prio),
        .src_node = e->node_id,
        .dst_node = dest,
        .job = job,
    };
    uint8_t *words = line->wire + ARCTIC_WIRE_WORDS_OFFSET;
    bool dma = FIELD_EX32(w1, ARCTIC_W1, MODE) == ARCTIC_MODE_DMA;
    unsigned i;

    /*
     * Every caller checked the destination; a wrong one here would write
     * outside the stream table.
     */
    assert(dest < ARCTIC_S);
    st = &e->tx_stream[prio][dest];
    h.epoch = st->epoch;
    h.seq = st->next_seq++;
    if (lines_short(e, prio, dma)) {
        h.flags = FIELD_DP32(h.flags, ARCTIC_E2E_FLAGS, ACK_NOW, 1);
    }

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
    line_mark_free(e, line, false);
    line->sent_once = false;
    line->dma = dma;
    line->raw = false;
    line->prio = prio;
    e->lines_busy[prio]++;
    e->dma_lines_busy += line->dma;
    line->epn = epn;
    line->dst = dest;
    line->seq = h.seq;
    line->retries = 0;
    line->timeouts = 0;
    line->refused = false;
    if (st->paused) {
        line_park(line);
    } else {
        line_queue(e, line);
    }
    trace_arctic_niu_tx_packet(e->node_id, epn, dest, prio, h.epoch, h.seq,
                               FIELD_EX32(w1, ARCTIC_W1, MODE), body_words,
                               body_words ? body[0] : 0);
}

/* Add e2e @flags to a line niu_e2e_send() built, with job tag @job; reseal. */
void niu_e2e_mark(ArcticLine *line, uint8_t flags, uint16_t job)
{
    struct arctic_e2e_header h;

    arctic_e2e_decode(line->wire, &h);
    h.flags |= flags;
    h.job = job;
    arctic_e2e_encode(line->wire, &h);
    arctic_wire_seal(line->wire, line->size);
}

/*
 * A free line for the next DMA data packet or notification (high
 * priority), within the DMA share (niu_dma_lines()), or NULL.
 */
ArcticLine *niu_e2e_dma_line_alloc(NiuE2E *e)
{
    return line_alloc(e, ARCTIC_PRIORITY_HIGH, true);
}

/*
 * ------------------------------------------------------------------------
 * What the receiver owes: acks and nacks
 */

static void owe_control(NiuE2E *e, uint8_t prio, uint16_t src)
{
    ArcticRxStream *st = &e->rx_stream[prio][src];

    if (!st->in_ctrl_fifo) {
        unsigned tail = (e->ctrl_head + e->ctrl_count) %
                        ARRAY_SIZE(e->ctrl_fifo);
        e->ctrl_fifo[tail] = prio << 8 | src;
        e->ctrl_count++;
        st->in_ctrl_fifo = true;
    }
}

static void owe_ack(NiuE2E *e, uint8_t prio, uint16_t src)
{
    e->rx_stream[prio][src].ack_due = true;
    e->acks_held++;
    owe_control(e, prio, src);
}

static void owe_nack(NiuE2E *e, uint8_t prio, uint16_t src,
                     uint32_t epoch, uint32_t seq, uint8_t reason)
{
    ArcticRxStream *st = &e->rx_stream[prio][src];

    st->nack_due = true;
    e->nack_owed = true;        /* nacks never wait (niu_e2e_pump()) */
    st->nack_epoch = epoch;
    st->nack_seq = seq;
    st->nack_reason = reason;
    owe_control(e, prio, src);
}

/*
 * The next ack or nack the NIU owes, as a wire packet on the
 * high-priority network (acks must never wait behind the traffic they
 * release).  Returns false when nothing is owed or it cannot be routed.
 */
static bool next_control(NiuE2E *e, uint8_t *wire, size_t *size)
{
    while (e->ctrl_count) {
        uint16_t entry = e->ctrl_fifo[e->ctrl_head];
        uint8_t prio = entry >> 8;
        uint16_t src = entry & 0xff;
        ArcticRxStream *st = &e->rx_stream[prio][src];
        uint32_t route = e->ops->route(e, src);
        struct arctic_e2e_header h = {
            .flags = FIELD_DP32(0, ARCTIC_E2E_FLAGS, PRIORITY, prio),
            .src_node = e->node_id,
            .dst_node = src,
            /*
             * Which incarnation of this receiver answers (all of it in
             * word 2): a sender tells a reset receiver from a reordered
             * answer by it.
             */
            .incarnation_lo = e->epoch_base & 0xffff,
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
            e->ctrl_head = (e->ctrl_head + 1) %
                               ARRAY_SIZE(e->ctrl_fifo);
            e->ctrl_count--;
        }
        if (!h.kind) {
            continue;
        }
        if (!FIELD_EX32(route, ROUTE_ENTRY, VALID)) {
            /* The sender will time out and retry once a route exists. */
            e2e_error(e, ARCTIC_ERR_NO_ROUTE, src,
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
        arctic_control_set_incarnation(wire, e->epoch_base);
        *size = arctic_wire_size(ARCTIC_CONTROL_PACKET_LENGTH);
        arctic_wire_seal(wire, *size);
        e2e_count(e, h.kind == ARCTIC_E2E_ACK ? ARCTIC_CNT_ACKS_SENT
                                              : ARCTIC_CNT_NACKS_SENT, 1);
        trace_arctic_niu_tx_control(e->node_id, h.kind, src, prio, h.epoch,
                                    h.seq);
        return true;
    }
    return false;
}

/*
 * ------------------------------------------------------------------------
 * Sending lines, acks, nacks, timeouts
 */

/* The oldest queued line of @prio (the send order), or NULL. */
static ArcticLine *next_line(NiuE2E *e, uint8_t prio)
{
    ArcticSendQueue *q = &e->sendq[prio];

    while (q->count) {
        ArcticSendEntry *ent = &q->entry[q->head];
        ArcticLine *l = &e->lines[ent->line];

        if (l->busy && l->queued && l->prio == prio &&
            l->queued_order == ent->order) {
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
static int64_t stream_rto(NiuE2E *e, const ArcticTxStream *st)
{
    int64_t rto = e->cfg.retry_timeout_ns;

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
 * is still asked several times before it is given up.  Only timeouts
 * count: a copy sent because the receiver refused the line (a nack) had
 * an answer, and a line refused out of order a few times behind a lost
 * packet must not then wait 2^n timeouts when its own copy is lost.
 */
static int64_t line_timeout(NiuE2E *e, const ArcticLine *line)
{
    const ArcticTxStream *st = &e->tx_stream[line->prio][line->dst];
    int64_t cap = e->cfg.peer_timeout_ms ?
                  (int64_t)e->cfg.peer_timeout_ms * SCALE_MS / 4 :
                  NIU_PEERLESS_MAX_TIMEOUT_NS;

    return line_backoff(stream_rto(e, st), MAX(line->timeouts, st->backoff),
                        cap);
}

/* A round trip measured on a packet sent once (RFC 6298 §2). */
static void stream_rtt_sample(NiuE2E *e, uint8_t prio, uint16_t dst,
                              int64_t rtt)
{
    ArcticTxStream *st = &e->tx_stream[prio][dst];

    if (!st->srtt_ns) {
        st->srtt_ns = MAX(rtt, 1);
        st->rttvar_ns = rtt / 2;
    } else {
        st->rttvar_ns += (ABS(st->srtt_ns - rtt) - st->rttvar_ns) / 4;
        st->srtt_ns = MAX(st->srtt_ns + (rtt - st->srtt_ns) / 8, 1);
    }
    st->backoff = 0;
    trace_arctic_niu_tx_rtt(e->node_id, dst, prio, rtt, st->srtt_ns,
                            st->rttvar_ns);
}

/* A timeout of the stream's packets at @now doubles its timeout once. */
static void stream_timed_out(NiuE2E *e, uint8_t prio, uint16_t dst,
                             int64_t now)
{
    ArcticTxStream *st = &e->tx_stream[prio][dst];

    if (st->backoff_at != now) {
        st->backoff_at = now;
        st->backoff = MIN(st->backoff + 1, ARCTIC_MAX_BACKOFF);
    }
}

/*
 * @line went out at @now, one clock reading for a whole pump (a burst
 * leaves at once): it waits for its ack until its deadline, which
 * lowers *@earliest, the retry timer's next deadline.
 */
static void line_sent(NiuE2E *e, ArcticLine *line, int64_t now,
                      int64_t *earliest)
{
    line->queued = false;
    if (!line->sent_once) {
        line->sent_ns = now;
    }
    line->sent_once = true;
    line->deadline = now + line_timeout(e, line);
    if (!e->peer_waiting_since[line->dst]) {
        e->peer_waiting_since[line->dst] = now;
    }
    *earliest = MIN(*earliest, line->deadline);
}

static bool lines_to(NiuE2E *e, uint16_t node)
{
    unsigned i;

    for (i = 0; i < e->cfg.lines; i++) {
        if (e->lines[i].busy && e->lines[i].dst == node) {
            return true;
        }
    }
    return false;
}

/*
 * Any answer from @node, an ack or a nack, stale or not, shows it is
 * alive: what is still sent to it waits from now on.
 */
static void peer_answered(NiuE2E *e, uint16_t node)
{
    e->peer_waiting_since[node] = lines_to(e, node)
                                  ? qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) : 0;
}

/*
 * @node has answered nothing for peer-timeout-ms while packets waited for
 * it: drop them, tell each endpoint that lost some with a notice in its
 * HiRx, and start its streams afresh in a newer epoch, so that a node that
 * answers again (restarted, or its link back) takes what comes next as a
 * new session (RESYNC) instead of waiting for the dropped sequence.
 */
static void peer_dead(NiuE2E *e, uint16_t node)
{
    unsigned i, p, dropped = 0, endpoints = 0;

    for (i = 0; i < e->cfg.lines; i++) {
        ArcticLine *l = &e->lines[i];

        if (l->busy && l->dst == node) {
            if (!l->raw) {
                endpoints |= 1u << l->epn;
            }
            line_free(e, l);
            dropped++;
        }
    }
    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        ArcticTxStream *st = &e->tx_stream[p][node];

        st->epoch++;
        st->next_seq = 0;
        st->acked = false;
        st->paused = false;
        st->srtt_ns = st->rttvar_ns = 0;    /* a new peer, maybe */
        st->backoff = 0;
    }
    e->peer_waiting_since[node] = 0;
    e2e_count(e, ARCTIC_CNT_PEER_DROPPED, dropped);
    trace_arctic_niu_peer_dead(e->node_id, node, dropped, endpoints);
    e2e_error(e, ARCTIC_ERR_PEER_DEAD, node,
              "node %u answered nothing for %u ms; %u packet(s) to it "
              "dropped", node, e->cfg.peer_timeout_ms, dropped);
    e->ops->peer_lost(e, node, endpoints);
}

/* Declare dead every node that has left packets unanswered too long. */
static void check_peers(NiuE2E *e, int64_t now)
{
    unsigned i;

    for (i = 0; i < e->cfg.lines; i++) {
        ArcticLine *l = &e->lines[i];

        if (l->busy && now >= peer_deadline(e, l)) {
            peer_dead(e, l->dst);
        }
    }
}

/* Requeue lines in sequence order so each stream goes out in order. */
static void requeue_sorted(NiuE2E *e, ArcticLine **v, unsigned n,
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
            v[i]->timeouts++;
            e2e_count(e, ARCTIC_CNT_TIMEOUTS, 1);
        }
        if (v[i]->sent_once) {
            v[i]->retries++;
            e2e_count(e, ARCTIC_CNT_RETRANSMITS, 1);
        }
        trace_arctic_niu_tx_retransmit(e->node_id, v[i]->dst, v[i]->prio,
                                       v[i]->seq, v[i]->retries,
                                       v[i]->nack_wait);
        line_queue(e, v[i]);
    }
}

static void retry_timer_cb(void *opaque)
{
    NiuE2E *e = opaque;
    QEMU_LOCK_GUARD(e->lock);
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    ArcticLine *due[ARCTIC_MAX_LINES];
    unsigned i, n = 0;

    if (!niu_link_is_up(e->link)) {
        return;     /* everything unacked goes out again at link up */
    }
    check_peers(e, now);
    for (i = 0; i < e->cfg.lines; i++) {
        ArcticLine *l = &e->lines[i];
        if (l->busy && !l->queued && l->deadline <= now) {
            if (!l->nack_wait) {
                stream_timed_out(e, l->prio, l->dst, now);
            }
            due[n++] = l;
        }
    }
    requeue_sorted(e, due, n, true);
    retry_timer_rearm(e);
    niu_e2e_pump(e, false);
}

/* A queued line could go out now. */
static bool data_ready(NiuE2E *e)
{
    unsigned p;

    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        if (niu_link_can_send(e->link, p) && next_line(e, p)) {
            return true;
        }
    }
    return false;
}

/*
 * Acks may wait (up to the link's x-ack-delay-ns) for data going the same
 * way, so that a request's ack travels in one write with its reply
 * instead of waking the switch and the sender once more on its own.
 * They go at once when data goes anyway, when a nack is owed, when
 * ARCTIC_ACK_EVERY deliveries are waiting for them (a stream's sender
 * must not run out of lines), or when the caller is not @lazy.
 */
static bool controls_go_now(NiuE2E *e, bool lazy)
{
    return !lazy || !e->link->defer_ns || e->nack_owed ||
           e->ack_now || e->acks_held >= ARCTIC_ACK_EVERY ||
           data_ready(e);
}

/* The virtual clock, read once per pump: *@now, -1 until then. */
static int64_t pump_clock(int64_t *now)
{
    if (*now < 0) {
        *now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    }
    return *now;
}

/*
 * The send order: move what is ready onto the link, as far as its credits
 * and output room allow: owed acks and nacks first (they free the peers'
 * lines), then high-priority data, then low.  Credits are per priority,
 * so a stalled low-priority network never holds back the high one.
 */
void niu_e2e_pump(NiuE2E *e, bool lazy)
{
    NiuLink *link = e->link;
    bool stalled = false;
    bool controls;
    int64_t now = -1, earliest = INT64_MAX;

    if (!niu_link_is_up(link)) {
        return;
    }
    controls = controls_go_now(e, lazy);
    for (;;) {
        uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
        size_t size;
        ArcticLine *line;

        if (niu_link_can_send(link, ARCTIC_PRIORITY_HIGH)) {
            if (controls && next_control(e, wire, &size)) {
                niu_link_send(link, ARCTIC_PRIORITY_HIGH, wire, size);
                continue;
            }
            line = next_line(e, ARCTIC_PRIORITY_HIGH);
            if (line) {
                niu_link_send(link, ARCTIC_PRIORITY_HIGH, line->wire,
                              line->size);
                line_sent(e, line, pump_clock(&now), &earliest);
                continue;
            }
        } else if (!link->tx_credits[ARCTIC_PRIORITY_HIGH] &&
                   ((controls && e->ctrl_count) ||
                    next_line(e, ARCTIC_PRIORITY_HIGH))) {
            stalled = true;
        }
        line = next_line(e, ARCTIC_PRIORITY_LOW);
        if (line && niu_link_can_send(link, ARCTIC_PRIORITY_LOW)) {
            niu_link_send(link, ARCTIC_PRIORITY_LOW, line->wire, line->size);
            line_sent(e, line, pump_clock(&now), &earliest);
            continue;
        }
        stalled |= line && !link->tx_credits[ARCTIC_PRIORITY_LOW];
        break;
    }
    /*
     * The retry timer is never later than any deadline (see
     * retry_timer_rearm()), so only the lines sent now can move it: no
     * scan of the lines, and one timer update per pump, not per packet.
     */
    if (earliest != INT64_MAX) {
        timer_mod_anticipate(e->retry_timer, earliest);
    }
    if (stalled) {
        e2e_count(e, ARCTIC_CNT_CREDIT_STALLS, 1);
        trace_arctic_niu_link_credit_stall(
            e->node_id, link->tx_credits[ARCTIC_PRIORITY_HIGH],
            link->tx_credits[ARCTIC_PRIORITY_LOW]);
    }
    if (!e->ctrl_count) {
        e->acks_held = 0;
        e->nack_owed = false;
        e->ack_now = false;
    } else if (!controls) {
        niu_link_defer(link);
    }
    niu_link_flush(link);
}

void niu_e2e_link_up(NiuE2E *e)
{
    ArcticLine *all[ARCTIC_MAX_LINES];
    unsigned i, n = 0;

    /*
     * Unacked and never-sent lines alike, so each stream resumes in
     * sequence order on the new session.  Time with the link down is not
     * the peers' silence: they wait for an answer from now on.
     */
    memset(e->peer_waiting_since, 0, sizeof(e->peer_waiting_since));
    for (i = 0; i < e->cfg.lines; i++) {
        if (e->lines[i].busy) {
            all[n++] = &e->lines[i];
        }
    }
    for (i = 0; i < ARCTIC_NUM_PRIORITIES * ARCTIC_S; i++) {
        e->tx_stream[i / ARCTIC_S][i % ARCTIC_S].paused = false;
    }
    requeue_sorted(e, all, n, false);
    retry_timer_rearm(e);
}

static void handle_ack(NiuE2E *e, const struct arctic_e2e_header *h,
                       uint32_t incarnation)
{
    uint8_t prio = FIELD_EX32(h->flags, ARCTIC_E2E_FLAGS, PRIORITY);
    ArcticTxStream *st = &e->tx_stream[prio][h->src_node];
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    ArcticLine *rest[ARCTIC_MAX_LINES];
    ArcticLine *sampled = NULL;
    unsigned i, n = 0, freed = 0;
    bool resume;

    if (h->epoch != st->epoch) {
        trace_arctic_niu_tx_stale(e->node_id, "ack", h->src_node, h->epoch);
        return;
    }
    if (!st->acked) {
        st->acked = true;
        st->peer_incarnation = incarnation;
    }
    resume = st->paused && seq_before_eq(st->probe_seq, h->seq);
    for (i = 0; i < e->cfg.lines; i++) {
        ArcticLine *l = &e->lines[i];

        if (!l->busy || l->dst != h->src_node || l->prio != prio) {
            continue;
        }
        if (seq_before_eq(l->seq, h->seq)) {
            /* The newest packet the ack covers that went only once. */
            if (l->sent_once && !l->retries &&
                (!sampled || !seq_before_eq(l->seq, sampled->seq))) {
                sampled = l;
            }
            line_free(e, l);
            freed++;
        } else if (resume && l->parked) {
            rest[n++] = l;
        }
    }
    if (sampled) {
        stream_rtt_sample(e, prio, h->src_node, now - sampled->sent_ns);
    }
    /*
     * The retry timeout measures a receiver that makes no progress, not
     * the age of each packet (as TCP restarts its timer on every ack that
     * advances): a receiver that takes a long stream slowly, or whose link
     * thread waited a few milliseconds for a core, is not silent, and
     * resending what it will ack anyway only adds to its load.
     */
    for (i = 0; freed && i < e->cfg.lines; i++) {
        ArcticLine *l = &e->lines[i];

        if (l->busy && l->dst == h->src_node && l->prio == prio &&
            !l->queued && !l->nack_wait) {
            l->deadline = MAX(l->deadline, now + line_timeout(e, l));
        }
    }
    if (resume) {
        /* The probe got through: the rest of the stream goes again. */
        st->paused = false;
        requeue_sorted(e, rest, n, false);
    }
    trace_arctic_niu_tx_ack(e->node_id, h->src_node, prio, h->seq, freed);
    /*
     * What waited for these lines goes on when the link has dispatched
     * the whole batch the ack came in (NiuLinkOps.ready).
     */
}

/*
 * The receiver lost its state for our epoch: number the stream's unacked
 * packets again from 0 in an epoch newer than both sides have seen.
 */
static void resync(NiuE2E *e, uint8_t prio, uint16_t dst,
                   uint32_t receiver_epoch)
{
    ArcticTxStream *st = &e->tx_stream[prio][dst];
    ArcticLine *v[ARCTIC_MAX_LINES];
    unsigned i, n = 0;

    st->epoch = ((int32_t)(receiver_epoch - st->epoch) > 0 ? receiver_epoch
                                                           : st->epoch) + 1;
    st->acked = false;
    st->paused = false;         /* everything goes again, renumbered */
    for (i = 0; i < e->cfg.lines; i++) {
        ArcticLine *l = &e->lines[i];
        if (l->busy && l->dst == dst && l->prio == prio) {
            v[n++] = l;
        }
    }
    requeue_sorted(e, v, n, false);
    st->next_seq = 0;
    for (i = 0; i < n; i++) {
        struct arctic_e2e_header h;

        arctic_e2e_decode(v[i]->wire, &h);
        h.epoch = st->epoch;
        h.seq = v[i]->seq = st->next_seq++;
        arctic_e2e_encode(v[i]->wire, &h);
        arctic_wire_seal(v[i]->wire, v[i]->size);
    }
    trace_arctic_niu_tx_resync(e->node_id, dst, prio, st->epoch, n);
}

/*
 * @dst has refused @probe, the head of its stream, for its job tag for
 * refused-timeout-ms: a refusal no retry will change while the receiving
 * endpoint keeps its job.  Give it up, as packets to a dead peer are, so
 * that the messages behind it (to other endpoints of @dst, whose jobs may
 * match) go on: the lines before it are delivered (the receiver takes a
 * stream in order and refused only this one), the probe is dropped and
 * its endpoint told, and what follows is numbered again from 0 in a new
 * epoch, which the receiver adopts.
 */
static void give_up_refused(NiuE2E *e, uint8_t prio, uint16_t dst,
                            ArcticLine *probe)
{
    ArcticTxStream *st = &e->tx_stream[prio][dst];
    uint32_t seq = probe->seq;
    unsigned i, epn = probe->epn;
    bool raw = probe->raw;

    for (i = 0; i < e->cfg.lines; i++) {
        ArcticLine *l = &e->lines[i];

        if (l->busy && l->dst == dst && l->prio == prio &&
            seq_after(seq, l->seq)) {
            line_free(e, l);
        }
    }
    line_free(e, probe);
    e2e_count(e, ARCTIC_CNT_REFUSED_DROPPED, 1);
    trace_arctic_niu_tx_refused_dropped(e->node_id, dst, prio, seq, epn,
                                        e->cfg.refused_timeout_ms);
    resync(e, prio, dst, st->epoch);
    if (!raw) {
        e->ops->refused(e, dst, epn);
    }
    niu_e2e_pump(e, false);
}

/*
 * A RESYNC refusal (the receiver does not hold this epoch): renumber the
 * stream, or take it as stale, and say true (done); or false with
 * *@go_back_from the seq to send again from (0: the whole epoch).
 */
static bool nack_resync(NiuE2E *e, const struct arctic_e2e_header *h,
                        uint32_t incarnation, uint8_t prio,
                        uint32_t *go_back_from)
{
    ArcticTxStream *st = &e->tx_stream[prio][h->src_node];

    if (!st->acked && (int32_t)(h->resync_epoch - st->epoch) >= 0) {
        /*
         * The receiver holds an epoch of ours at least as new (from
         * before this NIU's reset): it can never adopt this one, and
         * never took any of it, so renumbering is safe.
         */
        resync(e, prio, h->src_node, h->resync_epoch);
        niu_e2e_pump(e, false);
        return true;
    }
    if (!st->acked) {
        /*
         * Nothing of this epoch was acked, so every packet of it is still
         * in a line: sending again from seq 0 lets the receiver adopt the
         * epoch, and cannot deliver anything twice (a seq 0 it already
         * took is a duplicate to it).
         */
        *go_back_from = 0;
        return false;
    }
    if (incarnation != st->peer_incarnation) {
        /*
         * A receiver that acked this epoch was reset since: its old
         * deliveries went to a guest that is gone, so number what is left
         * again in a new epoch.
         */
        resync(e, prio, h->src_node, h->resync_epoch);
        niu_e2e_pump(e, false);
        return true;
    }
    /*
     * The receiver that acked this epoch still holds it: this refusal was
     * overtaken by the ack (reordering) and is stale.
     */
    trace_arctic_niu_tx_stale(e->node_id, "resync", h->src_node, h->epoch);
    return true;
}

/* The busy line to @dst at @prio with the lowest seq from @from on. */
static ArcticLine *stream_first_line(NiuE2E *e, uint16_t dst, uint8_t prio,
                                     uint32_t from)
{
    ArcticLine *first = NULL;
    unsigned i;

    for (i = 0; i < e->cfg.lines; i++) {
        ArcticLine *l = &e->lines[i];

        if (l->busy && l->dst == dst && l->prio == prio &&
            seq_before_eq(from, l->seq) &&
            (!first || seq_before_eq(l->seq, first->seq))) {
            first = l;
        }
    }
    return first;
}

/*
 * The refusal's clock for @probe: true if a wrong job has refused it for
 * refused-timeout-ms, and it was given up (give_up_refused()).
 */
static bool probe_refused(NiuE2E *e, const struct arctic_e2e_header *h,
                          uint8_t prio, uint8_t reason, ArcticLine *probe,
                          int64_t now)
{
    if (reason == ARCTIC_NACK_WRONG_JOB && probe->seq == h->seq &&
        e->cfg.refused_timeout_ms) {
        if (!probe->refused) {
            probe->refused = true;
            probe->refused_since = now;
        } else if (now - probe->refused_since >=
                   (int64_t)e->cfg.refused_timeout_ms * SCALE_MS) {
            give_up_refused(e, prio, h->src_node, probe);
            return true;
        }
    } else if (probe->seq == h->seq && reason != ARCTIC_NACK_OUT_OF_ORDER) {
        /*
         * Refused for a reason that passes (a full queue): the clock
         * starts again.  Out of order says nothing of it (the packets
         * behind it, refused while it was).
         */
        probe->refused = false;
    }
    return false;
}

static void handle_nack(NiuE2E *e,
                        const struct arctic_e2e_header *h,
                        uint32_t incarnation)
{
    uint8_t prio = FIELD_EX32(h->flags, ARCTIC_E2E_FLAGS, PRIORITY);
    uint8_t reason = FIELD_EX32(h->flags, ARCTIC_E2E_FLAGS, REASON);
    ArcticTxStream *st = &e->tx_stream[prio][h->src_node];
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    uint32_t go_back_from = h->seq;
    ArcticLine *probe;
    unsigned i;

    if (h->epoch != st->epoch) {
        trace_arctic_niu_tx_stale(e->node_id, "nack", h->src_node, h->epoch);
        return;
    }
    trace_arctic_niu_tx_nack(e->node_id, h->src_node, prio, h->seq, reason);
    if (reason == ARCTIC_NACK_RESYNC &&
        nack_resync(e, h, incarnation, prio, &go_back_from)) {
        return;
    }
    /*
     * Everything from the refused packet on would be refused too (the
     * receiver takes each stream in order).  So only the refused packet,
     * the probe, goes again after a back-off; the rest of the stream,
     * sent or not, is parked until the probe is acked
     * (handle_ack()), instead of going out only to be refused
     * behind it while the receiver's queue is still full.
     */
    probe = stream_first_line(e, h->src_node, prio, go_back_from);
    if (!probe) {
        return;         /* all acked since: a stale refusal */
    }
    if (probe_refused(e, h, prio, reason, probe, now)) {
        return;
    }
    for (i = 0; i < e->cfg.lines; i++) {
        ArcticLine *l = &e->lines[i];

        if (l->busy && l->dst == h->src_node && l->prio == prio &&
            l != probe && seq_before_eq(go_back_from, l->seq)) {
            line_park(l);
        }
    }
    st->paused = true;
    st->probe_seq = probe->seq;
    if (!probe->queued) {
        /* A refusal is retried at most once per round trip. */
        int64_t when = now + line_backoff(e->cfg.nack_backoff_ns,
                                          probe->retries,
                                          stream_rto(e, st));

        if (!probe->nack_wait || probe->parked || when < probe->deadline) {
            probe->deadline = when;
        }
        probe->nack_wait = true;
        probe->parked = false;
    }
    retry_timer_rearm(e);
}

/*
 * ------------------------------------------------------------------------
 * Receiving: sequence checks, answers
 */

static void rx_data(NiuE2E *e, const struct arctic_e2e_header *h,
                    const uint8_t *pkt, size_t size)
{
    uint8_t prio = FIELD_EX32(h->flags, ARCTIC_E2E_FLAGS, PRIORITY);
    ArcticRxStream *st = &e->rx_stream[prio][h->src_node];
    RxVerdict verdict;

    /* Its ack (or nack) goes at once: the sender is short of lines. */
    e->ack_now |= FIELD_EX32(h->flags, ARCTIC_E2E_FLAGS, ACK_NOW);
    if (!st->known || h->epoch != st->epoch) {
        /*
         * A new session starts at seq 0 with a newer epoch; anything else
         * from an epoch we do not hold asks the sender to start one.
         */
        if (h->seq == 0 && (!st->known || seq_after(h->epoch, st->epoch))) {
            st->known = true;
            st->epoch = h->epoch;
            st->expected = 0;
            trace_arctic_niu_rx_new_epoch(e->node_id, h->src_node, prio,
                                          h->epoch);
        } else {
            owe_nack(e, prio, h->src_node, h->epoch,
                     st->known ? st->epoch : 0, ARCTIC_NACK_RESYNC);
            return;
        }
    }
    if (h->seq == st->expected) {
        verdict = e->ops->deliver(e, prio, h->src_node, h->job,
                                      h->flags, pkt, size);
        if (verdict.outcome != RX_REFUSED) {
            st->expected++;
            owe_ack(e, prio, h->src_node);
        } else {
            trace_arctic_niu_rx_refuse(e->node_id, h->src_node, prio, h->seq,
                                       verdict.nack_reason);
            owe_nack(e, prio, h->src_node, h->epoch, h->seq,
                     verdict.nack_reason);
        }
    } else if (seq_after(st->expected, h->seq)) {
        /* Already delivered: the ack was lost or the packet duplicated. */
        e2e_count(e, ARCTIC_CNT_DUPLICATES, 1);
        trace_arctic_niu_rx_duplicate(e->node_id, h->src_node, prio, h->seq);
        owe_ack(e, prio, h->src_node);
    } else {
        trace_arctic_niu_rx_refuse(e->node_id, h->src_node, prio, h->seq,
                                   ARCTIC_NACK_OUT_OF_ORDER);
        owe_nack(e, prio, h->src_node, h->epoch, st->expected,
                 ARCTIC_NACK_OUT_OF_ORDER);
    }
}

void niu_e2e_packet(NiuE2E *e, const uint8_t *pkt, size_t size)
{
    enum arctic_wire_error err = arctic_wire_check(pkt, size);
    const uint8_t *words = pkt + ARCTIC_WIRE_WORDS_OFFSET;
    struct arctic_e2e_header h;

    if (err == ARCTIC_WIRE_OK) {
        arctic_e2e_decode(pkt, &h);
        if (h.dst_node != e->node_id || h.src_node >= ARCTIC_S) {
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
        e2e_error(e, ARCTIC_ERR_BAD_PACKET, err,
                  "dropped a malformed packet (reason %d)", err);
        e2e_count(e, ARCTIC_CNT_BAD_PACKETS, 1);
        return;
    }
    trace_arctic_niu_rx_packet(e->node_id, h.kind, h.src_node, h.flags,
                               h.epoch, h.seq);
    switch (h.kind) {
    case ARCTIC_E2E_DATA:
        rx_data(e, &h, pkt, size);
        break;
    case ARCTIC_E2E_ACK:
        e2e_count(e, ARCTIC_CNT_ACKS_RECEIVED, 1);
        handle_ack(e, &h, arctic_control_incarnation(pkt));
        peer_answered(e, h.src_node);
        break;
    case ARCTIC_E2E_NACK:
        e2e_count(e, ARCTIC_CNT_NACKS_RECEIVED, 1);
        handle_nack(e, &h, arctic_control_incarnation(pkt));
        peer_answered(e, h.src_node);
        break;
    }
}

/*
 * ------------------------------------------------------------------------
 * Migration (docs/device-internals.md §8): the lines with their packets,
 * both halves of every stream and the answers owed.  What follows from
 * the lines (the free map, the counts, the send order) is rebuilt on
 * load rather than trusted from the stream.
 */

static const VMStateDescription vmstate_arctic_line = {
    .name = "arctic-niu/line",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_BOOL(busy, ArcticLine),
        VMSTATE_BOOL(queued, ArcticLine),
        VMSTATE_BOOL(sent_once, ArcticLine),
        VMSTATE_BOOL(nack_wait, ArcticLine),
        VMSTATE_BOOL(parked, ArcticLine),
        VMSTATE_BOOL(dma, ArcticLine),
        VMSTATE_BOOL(raw, ArcticLine),
        VMSTATE_UINT64(queued_order, ArcticLine),
        VMSTATE_UINT8(prio, ArcticLine),
        VMSTATE_UINT8(epn, ArcticLine),
        VMSTATE_UINT16(dst, ArcticLine),
        VMSTATE_UINT32(seq, ArcticLine),
        VMSTATE_UINT32(retries, ArcticLine),
        VMSTATE_UINT32(timeouts, ArcticLine),
        VMSTATE_INT64(deadline, ArcticLine),
        VMSTATE_INT64(sent_ns, ArcticLine),
        VMSTATE_BOOL(refused, ArcticLine),
        VMSTATE_INT64(refused_since, ArcticLine),
        VMSTATE_UINT16(size, ArcticLine),
        VMSTATE_UINT8_ARRAY(wire, ArcticLine, ARCTIC_WIRE_MAX_SIZE),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_arctic_tx_stream = {
    .name = "arctic-niu/tx-stream",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(epoch, ArcticTxStream),
        VMSTATE_UINT32(next_seq, ArcticTxStream),
        VMSTATE_BOOL(acked, ArcticTxStream),
        VMSTATE_UINT32(peer_incarnation, ArcticTxStream),
        VMSTATE_BOOL(paused, ArcticTxStream),
        VMSTATE_UINT32(probe_seq, ArcticTxStream),
        VMSTATE_INT64(srtt_ns, ArcticTxStream),
        VMSTATE_INT64(rttvar_ns, ArcticTxStream),
        VMSTATE_UINT32(backoff, ArcticTxStream),
        VMSTATE_INT64(backoff_at, ArcticTxStream),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_arctic_rx_stream = {
    .name = "arctic-niu/rx-stream",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_BOOL(known, ArcticRxStream),
        VMSTATE_BOOL(ack_due, ArcticRxStream),
        VMSTATE_BOOL(nack_due, ArcticRxStream),
        VMSTATE_BOOL(in_ctrl_fifo, ArcticRxStream),
        VMSTATE_UINT8(nack_reason, ArcticRxStream),
        VMSTATE_UINT32(epoch, ArcticRxStream),
        VMSTATE_UINT32(expected, ArcticRxStream),
        VMSTATE_UINT32(nack_epoch, ArcticRxStream),
        VMSTATE_UINT32(nack_seq, ArcticRxStream),
        VMSTATE_END_OF_LIST()
    },
};

/* What a loaded stream must hold for the code to be safe with it. */
static const char *e2e_loaded_fault(const NiuE2E *e)
{
    bool listed[ARCTIC_NUM_PRIORITIES][ARCTIC_S] = {};
    unsigned i, flagged = 0;

    for (i = 0; i < ARCTIC_MAX_LINES; i++) {
        const ArcticLine *l = &e->lines[i];

        if (!l->busy) {
            continue;
        }
        if (i >= e->cfg.lines) {
            return "a busy line beyond the device's lines";
        }
        if (l->prio >= ARCTIC_NUM_PRIORITIES || l->dst >= ARCTIC_S ||
            l->epn >= ARCTIC_ENDPOINTS) {
            return "a line with a priority, node or endpoint out of range";
        }
        if (l->size < ARCTIC_WIRE_MIN_SIZE ||
            l->size > ARCTIC_WIRE_MAX_SIZE) {
            return "a line whose packet size is out of range";
        }
    }
    if (e->ctrl_head >= ARRAY_SIZE(e->ctrl_fifo) ||
        e->ctrl_count > ARRAY_SIZE(e->ctrl_fifo)) {
        return "answers owed beyond their FIFO";
    }
    /* Each stream with answers owed is in the FIFO once (owe_control()). */
    for (i = 0; i < e->ctrl_count; i++) {
        unsigned at = (e->ctrl_head + i) % ARRAY_SIZE(e->ctrl_fifo);
        unsigned prio = e->ctrl_fifo[at] >> 8, src = e->ctrl_fifo[at] & 0xff;

        if (prio >= ARCTIC_NUM_PRIORITIES) {
            return "an answer owed on a priority out of range";
        }
        if (!e->rx_stream[prio][src].in_ctrl_fifo || listed[prio][src]) {
            return "answers owed that do not match their streams";
        }
        listed[prio][src] = true;
    }
    for (i = 0; i < ARCTIC_NUM_PRIORITIES * ARCTIC_S; i++) {
        flagged += e->rx_stream[i / ARCTIC_S][i % ARCTIC_S].in_ctrl_fifo;
    }
    if (flagged != e->ctrl_count) {
        return "answers owed that do not match their streams";
    }
    return NULL;
}

/* The state that follows from the lines, as niu_e2e_send() keeps it. */
static void e2e_rebuild(NiuE2E *e)
{
    unsigned i;

    memset(e->lines_busy, 0, sizeof(e->lines_busy));
    memset(e->lines_free, 0, sizeof(e->lines_free));
    e->dma_lines_busy = 0;
    for (i = 0; i < e->cfg.lines; i++) {
        ArcticLine *l = &e->lines[i];

        line_mark_free(e, l, !l->busy);
        if (l->busy) {
            e->lines_busy[l->prio]++;
            e->dma_lines_busy += l->dma;
        }
    }
    for (i = 0; i < ARCTIC_NUM_PRIORITIES; i++) {
        sendq_rebuild(e, i);
    }
}

/* No retransmission runs on lines being loaded. */
static int e2e_pre_load(void *opaque)
{
    NiuE2E *e = opaque;

    timer_del(e->retry_timer);
    e->loaded_fault = NULL;
    return 0;
}

/*
 * A fault is left for the device to refuse the stream with
 * (loaded_fault), and the protocol starts afresh rather than keep lines
 * no code may index with.
 */
static int e2e_post_load(void *opaque, int version_id)
{
    NiuE2E *e = opaque;

    e->loaded_fault = e2e_loaded_fault(e);
    if (e->loaded_fault) {
        niu_e2e_reset(e);
        return 0;
    }
    e2e_rebuild(e);
    return 0;
}

const VMStateDescription vmstate_niu_e2e = {
    .name = "arctic-niu/e2e",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_load = e2e_pre_load,
    .post_load = e2e_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_STRUCT_ARRAY(lines, NiuE2E, ARCTIC_MAX_LINES, 1,
                             vmstate_arctic_line, ArcticLine),
        VMSTATE_UINT64(queue_counter, NiuE2E),
        VMSTATE_STRUCT_2DARRAY(tx_stream, NiuE2E, ARCTIC_NUM_PRIORITIES,
                               ARCTIC_S, 1, vmstate_arctic_tx_stream,
                               ArcticTxStream),
        VMSTATE_UINT32(epoch_base, NiuE2E),
        VMSTATE_INT64_ARRAY(peer_waiting_since, NiuE2E, ARCTIC_S),
        VMSTATE_STRUCT_2DARRAY(rx_stream, NiuE2E, ARCTIC_NUM_PRIORITIES,
                               ARCTIC_S, 1, vmstate_arctic_rx_stream,
                               ArcticRxStream),
        VMSTATE_UINT16_ARRAY(ctrl_fifo, NiuE2E,
                             ARCTIC_NUM_PRIORITIES * ARCTIC_S),
        VMSTATE_UINT32(ctrl_head, NiuE2E),
        VMSTATE_UINT32(ctrl_count, NiuE2E),
        VMSTATE_UINT32(acks_held, NiuE2E),
        VMSTATE_BOOL(nack_owed, NiuE2E),
        VMSTATE_BOOL(ack_now, NiuE2E),
        VMSTATE_END_OF_LIST()
    },
};

/*
 * After a load the device accepted (nothing runs on the lines before):
 * the retry timer, and with the link up (a session that outlived the
 * load) every line goes again, in sequence order, as at a WELCOME; a
 * session not up yet does the same at its WELCOME.
 */
void niu_e2e_restored(NiuE2E *e)
{
    retry_timer_rearm(e);
    if (niu_link_is_up(e->link)) {
        niu_e2e_link_up(e);
        niu_e2e_pump(e, false);
    }
}

/*
 * ------------------------------------------------------------------------
 * Life cycle
 */

bool niu_e2e_check(const NiuE2EConfig *cfg, Error **errp)
{
    if (cfg->lines < ARCTIC_MIN_LINES || cfg->lines > ARCTIC_MAX_LINES) {
        error_setg(errp, "arctic-niu: lines must be %d..%d",
                   ARCTIC_MIN_LINES, ARCTIC_MAX_LINES);
        return false;
    }
    if (cfg->retry_timeout_ns == 0 || cfg->nack_backoff_ns == 0) {
        error_setg(errp, "arctic-niu: retry-timeout-ns and nack-backoff-ns "
                   "must be positive");
        return false;
    }
    return true;
}

void niu_e2e_init(NiuE2E *e, uint16_t node_id, bool timed, NiuLink *link,
                  QemuRecMutex *lock, const NiuE2EOps *ops)
{
    e->node_id = node_id;
    e->timed = timed;
    e->link = link;
    e->lock = lock;
    e->ops = ops;
    e->retry_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, retry_timer_cb, e);
}

void niu_e2e_cleanup(NiuE2E *e)
{
    timer_free(e->retry_timer);
}

/*
 * A state loaded from a template (docs/snapshots.md §6) becomes a new
 * NIU's: streams in the first epoch a node booted in this mode would use
 * (timed: the same on every run).
 */
void niu_e2e_renew(NiuE2E *e)
{
    e->epoch_base = 0;
    niu_e2e_reset(e);
}

/* Every line dropped, every stream afresh in a new epoch. */
void niu_e2e_reset(NiuE2E *e)
{
    uint32_t epoch;
    unsigned p, d, i;

    timer_del(e->retry_timer);
    memset(e->lines, 0, sizeof(e->lines));
    memset(e->lines_busy, 0, sizeof(e->lines_busy));
    memset(e->lines_free, 0, sizeof(e->lines_free));
    for (i = 0; i < e->cfg.lines; i++) {
        line_mark_free(e, &e->lines[i], true);
    }
    e->dma_lines_busy = 0;
    memset(e->sendq, 0, sizeof(e->sendq));
    memset(e->peer_waiting_since, 0, sizeof(e->peer_waiting_since));
    e->acks_held = 0;
    e->nack_owed = false;
    e->ack_now = false;
    /*
     * A new epoch for every stream, later than any this NIU used before,
     * and (from the host clock) most likely later than any a receiver
     * remembers from an earlier run of this node; timed, the next one, so
     * that a run's packets are the same every time.
     */
    epoch = e->timed ? e->epoch_base + 1
                           : (uint32_t)qemu_clock_get_ms(QEMU_CLOCK_HOST);
    if ((int32_t)(epoch - e->epoch_base) <= 0) {
        epoch = e->epoch_base + 1;
    }
    e->epoch_base = epoch;
    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        for (d = 0; d < ARCTIC_S; d++) {
            e->tx_stream[p][d] = (ArcticTxStream) { .epoch = epoch };
        }
    }
    memset(e->rx_stream, 0, sizeof(e->rx_stream));
    e->ctrl_head = 0;
    e->ctrl_count = 0;
}
