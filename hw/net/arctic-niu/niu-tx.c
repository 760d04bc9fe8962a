/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU transmit side of the queue engine: MPFSM and DMAFSM of seed
 * 002 §6.2.1-6.2.2.
 *
 * MPFSM polls the Tx queues of the served endpoints (high before low),
 * takes each valid slot, builds its Arctic packet and hands it to the
 * end-to-end protocol (niu-e2e.c), which keeps it in a retransmit line
 * until it is acknowledged, and releases the slot by clearing its header.
 * DMAFSM cuts a remote-DMA request into its data packets and its
 * notification the same way.  The poll timer runs on the virtual clock
 * with adaptive back-off: fast after activity, backing off when it finds
 * nothing, and a doorbell skips the wait.  While every vCPU is halted
 * nothing can write a slot, so the poll parks until one can run again
 * (tx_poll_park()).
 */

#include "qemu/osdep.h"
#include "qemu/lockable.h"
#include "qemu/main-loop.h"
#include "system/cpus.h"
#include "system/dma.h"
#include "trace.h"

#include "niu-queues.h"

/*
 * Migration froze the device (docs/device-internals.md §8): the queues
 * are not served, and a raw packet waits in its FIFO.
 */
static bool tx_frozen(NiuQueues *qs)
{
    return qs->ops->frozen(qs->opaque);
}

/*
 * TxCtrl written OFF, and a packet taken from the queues has not entered
 * the network yet (seed 002 §4.1.2: it reads back ON until then).
 */
bool niu_tx_draining(NiuQueues *qs)
{
    return !qs->tx_enabled && niu_e2e_unsent(qs->e2e);
}

/* A free line for @prio; with none, the work waits for niu_tx_resume(). */
static ArcticLine *tx_line(NiuQueues *qs, uint8_t prio)
{
    ArcticLine *line = niu_e2e_line_alloc(qs->e2e, prio);

    if (!line) {
        qs->tx.line_wait = true;
    }
    return line;
}

/*
 * ------------------------------------------------------------------------
 * MPFSM
 */

/* The Tx slot at the tail of (@epn, @q), at @addr, could not be reached. */
static void tx_slot_dma_failed(NiuQueues *qs, unsigned epn, unsigned q,
                               dma_addr_t addr)
{
    niu_error(qs->status, ARCTIC_ERR_DMA, epn, q, qs->ep[epn].tx_tail[q],
              "endpoint %u transmit queue %u slot %u at 0x%" PRIx64
              " is not guest memory", epn, q, qs->ep[epn].tx_tail[q],
              (uint64_t)addr);
}

/*
 * Release a slot by clearing its header (seed 002 §6.2.1 step 8).  The
 * tail moves on even if the write fails: the slot's packet is already in
 * a line, and sending it again would deliver it twice.
 */
static void release_slot(NiuQueues *qs, unsigned epn, unsigned q,
                         dma_addr_t addr)
{
    ArcticEndpoint *ep = &qs->ep[epn];

    /*
     * One store: the program may write the slot's next header as soon as
     * it reads this one clear, and a second store of 0 would erase it.
     */
    if (niu_dma_store_header(qs->dma, addr, 0) != MEMTX_OK) {
        tx_slot_dma_failed(qs, epn, q, addr);
    }
    /*
     * The clear is visible before the next header is read: a producer
     * that stores a header and then finds the one before still valid may
     * skip the doorbell (programming guide §10.1), because this NIU is
     * then bound to read the new header after its clear.
     */
    smp_mb();
    trace_arctic_niu_tx_slot_release(qs->node_id, epn, q, ep->tx_tail[q]);
    ep->tx_tail[q] = (ep->tx_tail[q] + 1) % ARCTIC_N;
    niu_irq_event(qs->status, 1u << (R_NIU_IRQ_TX_SHIFT + epn));
}

/* Refuse a slot: record why, drop it so the queue keeps moving. */
static void refuse_slot(NiuQueues *qs, unsigned epn, unsigned q,
                        dma_addr_t addr, enum arctic_error cause,
                        uint32_t header)
{
    niu_error(qs->status, cause, epn, q, qs->ep[epn].tx_tail[q],
              "endpoint %u queue %u slot %u header 0x%08x refused",
              epn, q, qs->ep[epn].tx_tail[q], header);
    niu_count(qs->status, ARCTIC_CNT_TX_ERRORS);
    qs->tx.refused++;
    release_slot(qs, epn, q, addr);
}

/*
 * An MPI packet (§6.2.1 steps 5-7), or a DMA notification (§6.2.2 step 8,
 * with the mode cleared and the target's low word as command 1).
 */
static void build_mpi(NiuQueues *qs, ArcticLine *line, unsigned epn,
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
    niu_e2e_send(qs->e2e, line, epn, qs->ep[epn].job,
                 FIELD_EX32(header, MPI_HEADER, DEST), route, w1,
                 body, ARCTIC_COMMAND_WORDS + len);
}

static void dma_refuse(NiuQueues *qs, unsigned epn, unsigned q,
                       dma_addr_t addr, enum arctic_error cause,
                       enum arctic_dma_status status, uint32_t header,
                       uint32_t command)
{
    qs->ep[epn].dma_progress[q == ARCTIC_TXQ_HI ? 0 : 1] = 0;
    refuse_slot(qs, epn, q, addr, cause, header);
    trace_arctic_niu_dma_refused(qs->node_id, epn, q, status);
    niu_rx_local_notice(qs, epn, header, command, status);
}

/*
 * DMAFSM (§6.2.2) for the request at the tail of HiTx or DMATx: checks it,
 * then builds as many of its 32 data packets and its notification as
 * there are lines for.  Returns true once the slot is released, false
 * while the request still holds its queue.
 */
static bool dma_step(NiuQueues *qs, unsigned epn, unsigned q,
                     dma_addr_t addr)
{
    ArcticEndpoint *ep = &qs->ep[epn];
    uint32_t *progress = &ep->dma_progress[q == ARCTIC_TXQ_HI ? 0 : 1];
    struct arctic_dma_request req;
    uint32_t header, command, route;
    uint64_t target, source, phys;

    if (niu_dma_read(qs->dma, addr, &req, sizeof(req)) != MEMTX_OK) {
        tx_slot_dma_failed(qs, epn, q, addr);
        return false;
    }
    header = le32_to_cpu(req.header);
    command = le32_to_cpu(req.command);
    target = le64_to_cpu(req.target);
    source = le64_to_cpu(req.source);
    route = qs->route_table[ARCTIC_ROUTE_TABLE_HIGH]
                          [FIELD_EX32(header, MPI_HEADER, DEST)];
    if (FIELD_EX32(header, MPI_HEADER, LENGTH) > ARCTIC_MAX_PAYLOAD) {
        dma_refuse(qs, epn, q, addr, ARCTIC_ERR_BAD_LENGTH,
                   ARCTIC_DMA_ERR_LENGTH, header, command);
        return true;
    }
    if (!FIELD_EX32(route, ROUTE_ENTRY, VALID)) {
        dma_refuse(qs, epn, q, addr, ARCTIC_ERR_NO_ROUTE,
                   ARCTIC_DMA_ERR_ROUTE, header, command);
        return true;
    }
    if ((source | target) & (ARCTIC_D - 1)) {
        dma_refuse(qs, epn, q, addr, ARCTIC_ERR_BAD_ALIGN,
                   ARCTIC_DMA_ERR_ALIGN, header, command);
        return true;
    }
    if (!niu_dma_translate(&ep->dma, source, ARCTIC_D, &phys)) {
        dma_refuse(qs, epn, q, addr, ARCTIC_ERR_DMA_RANGE,
                   ARCTIC_DMA_ERR_RANGE, header, command);
        return true;
    }
    /* DMA always travels at high priority (§2.2.1). */
    route = FIELD_DP32(route, ROUTE_ENTRY, PRIORITY, ARCTIC_PRIORITY_HIGH);

    while (*progress <= ARCTIC_DMA_PACKETS) {
        ArcticLine *line;

        line = niu_e2e_dma_line_alloc(qs->e2e);
        if (!line) {
            qs->tx.line_wait = true;
            trace_arctic_niu_tx_lines_full(qs->node_id, epn, q);
            return false;
        }
        if (*progress < ARCTIC_DMA_PACKETS) {
            uint64_t off = (uint64_t)*progress * 4 * ARCTIC_DMA_DATA_WORDS;
            uint32_t body[2 + ARCTIC_DMA_DATA_WORDS];
            uint32_t w1 = header & (R_ARCTIC_W1_ENDPOINT_MASK |
                                    R_ARCTIC_W1_TYPE_MASK);
            unsigned i;

            if (niu_dma_read(qs->dma, phys + off, body + 2,
                             4 * ARCTIC_DMA_DATA_WORDS) != MEMTX_OK) {
                dma_refuse(qs, epn, q, addr, ARCTIC_ERR_DMA,
                           ARCTIC_DMA_ERR_MEMORY, header, command);
                return true;
            }
            for (i = 2; i < ARRAY_SIZE(body); i++) {
                body[i] = le32_to_cpu(body[i]);
            }
            body[0] = (uint32_t)(target + off);
            body[1] = (target + off) >> 32;
            w1 = FIELD_DP32(w1, ARCTIC_W1, MODE, ARCTIC_MODE_DMA);
            niu_e2e_send(qs->e2e, line, epn, qs->ep[epn].job,
                         FIELD_EX32(header, MPI_HEADER, DEST),
                         route, w1, body, ARRAY_SIZE(body));
        } else {
            build_mpi(qs, line, epn, route, header, command, (uint32_t)target,
                      req.payload);
            /*
             * Marked, so that a receiver that refused some of the data
             * can tell both programs (niu-rx.c).
             */
            niu_e2e_mark(line, FIELD_DP32(R_ARCTIC_E2E_FLAGS_NOTIFY_MASK,
                                          ARCTIC_E2E_FLAGS, SOURCE_ENDPOINT,
                                       epn), qs->ep[epn].job);
        }
        (*progress)++;
    }
    *progress = 0;
    niu_count(qs->status, ARCTIC_CNT_DMA_REQUESTS);
    trace_arctic_niu_dma_done(qs->node_id, epn, q, target);
    release_slot(qs, epn, q, addr);
    return true;
}

/*
 * A raw packet from the dMPI transmit FIFO (niu-raw.c): words in the
 * skewed format of seed 002 Figure 2.  Returns false when no line is free
 * (the FIFO then shows full); a malformed packet is refused and dropped.
 */
bool niu_tx_send_raw(NiuQueues *qs, uint8_t prio, const uint32_t *words,
                     unsigned count)
{
    uint32_t w0 = words[0], w1 = count > 1 ? words[1] : 0;
    unsigned dest = arctic_route_destination(qs->node_id, w0, w1);
    ArcticLine *line;

    /*
     * Route bits can name nodes no network of S nodes has (up to 15 hops):
     * such a destination has no stream, and would index past them.
     */
    if (count < ARCTIC_MIN_PACKET_WORDS ||
        count != FIELD_EX32(w1, ARCTIC_W1, LENGTH) ||
        FIELD_EX32(w0, ARCTIC_W0, ZERO) != 0 ||
        FIELD_EX32(w0, ARCTIC_W0, PRIORITY) != prio || dest >= ARCTIC_S) {
        niu_error(qs->status, ARCTIC_ERR_BAD_VALUE, 0, 0, count,
                  "raw packet of %u words (0x%08x 0x%08x) refused",
                  count, w0, w1);
        niu_count(qs->status, ARCTIC_CNT_TX_ERRORS);
        return true;
    }
    /* Frozen (a failed load), it waits in the FIFO like a full line. */
    line = tx_frozen(qs) ? NULL : tx_line(qs, prio);
    if (!line) {
        return false;
    }
    niu_e2e_send(qs->e2e, line, 0, qs->ep[0].job, dest,
                 (w1 & R_ROUTE_ENTRY_DOWNROUTE_MASK) | (w0 & 0xffff), w1,
                 words + ARCTIC_ROUTE_WORDS, count - ARCTIC_ROUTE_WORDS);
    line->raw = true;
    niu_count(qs->status, prio == ARCTIC_PRIORITY_HIGH ?
                        ARCTIC_CNT_TX_HI_PACKETS : ARCTIC_CNT_TX_LO_PACKETS);
    niu_e2e_pump(qs->e2e, false);
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
static unsigned service_queue(NiuQueues *qs, unsigned epn, unsigned q,
                              bool *left)
{
    ArcticEndpoint *ep = &qs->ep[epn];
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

        if (!tx_line(qs, queue_prio)) {
            trace_arctic_niu_tx_lines_full(qs->node_id, epn, q);
            break;
        }
        if (niu_dma_load_header(qs->dma, addr, &header) != MEMTX_OK) {
            tx_slot_dma_failed(qs, epn, q, addr);
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
            niu_dma_read(qs->dma, addr + ARCTIC_DMA_SLOT_COMMAND,
                         &command, 4);
            refuse_slot(qs, epn, q, addr, ARCTIC_ERR_BAD_MODE, header);
            niu_rx_local_notice(qs, epn, header, le32_to_cpu(command),
                                ARCTIC_DMA_ERR_QUEUE);
            taken++;
            continue;
        }
        if (dma) {
            /*
             * A request in HiTx holds back later HiTx traffic until all
             * of it is sent (§2.2.2).
             */
            if (!dma_step(qs, epn, q, addr)) {
                break;
            }
            taken++;
            continue;
        }
        taken++;
        if (FIELD_EX32(header, MPI_HEADER, LENGTH) > ARCTIC_MAX_PAYLOAD) {
            refuse_slot(qs, epn, q, addr, ARCTIC_ERR_BAD_LENGTH, header);
            continue;
        }
        route = qs->route_table[table][FIELD_EX32(header, MPI_HEADER, DEST)];
        if (!FIELD_EX32(route, ROUTE_ENTRY, VALID)) {
            refuse_slot(qs, epn, q, addr, ARCTIC_ERR_NO_ROUTE, header);
            continue;
        }
        /*
         * The route entry decides the network priority (§4.4); it can
         * differ from the queue's if the driver loaded it so.
         */
        line = tx_line(qs, FIELD_EX32(route, ROUTE_ENTRY, PRIORITY));
        if (!line) {
            taken--;
            break;
        }
        if (niu_dma_read(qs->dma, addr, &slot, sizeof(slot)) !=
            MEMTX_OK) {
            tx_slot_dma_failed(qs, epn, q, addr);
            break;
        }
        build_mpi(qs, line, epn, route, header,
                  le32_to_cpu(slot.command[0]), le32_to_cpu(slot.command[1]),
                  slot.payload);
        niu_count(qs->status, q == ARCTIC_TXQ_HI ? ARCTIC_CNT_TX_HI_PACKETS
                                               : ARCTIC_CNT_TX_LO_PACKETS);
        release_slot(qs, epn, q, addr);
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
static void send_reports(NiuQueues *qs)
{
    while (qs->rx.report_count) {
        ArcticReport *r = &qs->rx.reports[qs->rx.report_head];
        uint32_t route = qs->route_table[ARCTIC_ROUTE_TABLE_HIGH][r->node];
        uint32_t body[ARCTIC_COMMAND_WORDS] = {
            r->command, ARCTIC_DMA_ERR_TARGET
        };
        uint32_t w1 = FIELD_DP32(0, ARCTIC_W1, ENDPOINT, r->endpoint);
        ArcticLine *line;

        w1 = FIELD_DP32(w1, ARCTIC_W1, TYPE, r->type);
        if (FIELD_EX32(route, ROUTE_ENTRY, VALID)) {
            line = tx_line(qs, ARCTIC_PRIORITY_HIGH);
            if (!line) {
                return;     /* when lines come free */
            }
            route = FIELD_DP32(route, ROUTE_ENTRY, PRIORITY,
                               ARCTIC_PRIORITY_HIGH);
            niu_e2e_send(qs->e2e, line, 0, qs->ep[0].job, r->node, route,
                         w1, body, ARRAY_SIZE(body));
            niu_e2e_mark(line, R_ARCTIC_E2E_FLAGS_NOTICE_MASK, r->job);
        } else {
            niu_error(qs->status, ARCTIC_ERR_NO_ROUTE, 0, 0, r->node,
                      "no route to node %u for a DMA report",
                      r->node);
        }
        qs->rx.report_head = (qs->rx.report_head + 1) %
                             ARRAY_SIZE(qs->rx.reports);
        qs->rx.report_count--;
    }
}

/*
 * The endpoints served this cycle, in Appendix A's COUNT & VMASK order,
 * of those in @only.
 */
static unsigned served_endpoints(NiuQueues *qs, unsigned *order,
                                 uint32_t only)
{
    unsigned c, n = 0, seen = 0;

    for (c = 0; c < ARCTIC_ENDPOINTS; c++) {
        unsigned epn = (qs->tx.count + c) & qs->vmask;
        if (!(seen & (1u << epn))) {
            seen |= 1u << epn;
            if (only & (1u << epn)) {
                order[n++] = epn;
            }
        }
    }
    qs->tx.count++;
    return n;
}

/*
 * Serve queue @q of the endpoints in @order; returns the slots taken, and
 * adds to @unannounced those of endpoints that rang no doorbell since the
 * last poll and had no announced work waiting (tx_rung).  Endpoints that
 * leave work behind (no line free) are added to @waiting.
 */
static unsigned serve_queues(NiuQueues *qs, const unsigned *order,
                             unsigned n, unsigned q, bool *more,
                             unsigned *unannounced, uint32_t *waiting)
{
    unsigned i, taken = 0;

    for (i = 0; i < n; i++) {
        bool left;
        unsigned t = service_queue(qs, order[i], q, &left);

        *more |= t == ARCTIC_TX_BATCH;
        taken += t;
        if (!(qs->tx.rung & (1u << order[i]))) {
            *unannounced += t;
        }
        if (left) {
            *waiting |= 1u << order[i];
        }
    }
    return taken;
}

/*
 * Another pass soon, from the main loop; timed, at this instant of
 * virtual time (a bottom half runs whenever the host gets to it).
 */
static void tx_schedule(NiuQueues *qs)
{
    if (qs->tx.cfg.timed) {
        timer_mod(qs->tx.kick_timer, qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL));
    } else {
        qemu_bh_schedule(qs->tx.bh);
    }
}

/*
 * The served endpoints (e & VMASK == e) that TX_POLLED has polled.  Read
 * without the lock by the main loop's notifier: each word is read once.
 */
static uint32_t tx_polled_served(NiuQueues *qs)
{
    uint32_t vmask = qatomic_read(&qs->vmask);
    uint32_t polled = qatomic_read(&qs->tx_polled);
    uint32_t served = 0;
    unsigned e;

    for (e = 0; e < ARCTIC_ENDPOINTS; e++) {
        if ((e & vmask) == e) {
            served |= 1u << e;
        }
    }
    return polled & served;
}

/* The next poll in one poll interval. */
static void tx_poll_arm(NiuQueues *qs)
{
    qs->tx.poll_parked = false;
    timer_mod(qs->tx.poll_timer,
              qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) + qs->tx.poll_interval_ns);
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
 * still waits at most x-poll-max-ns, idle or not.
 */
static void tx_poll_park(NiuQueues *qs, const char *why)
{
    timer_del(qs->tx.poll_timer);
    qs->tx.poll_parked = true;
    trace_arctic_niu_tx_poll_park(qs->node_id, why);
}

void niu_tx_unpark(NiuQueues *qs)
{
    if (qs->tx.poll_parked && qs->tx_enabled && tx_polled_served(qs)) {
        trace_arctic_niu_tx_poll_unpark(qs->node_id);
        tx_poll_arm(qs);
    }
}

/* Before the main loop sleeps: unpark once a vCPU can run. */
static void tx_main_loop_poll(Notifier *notifier, void *data)
{
    NiuQueues *qs = container_of(notifier, NiuQueues,
                                 tx.main_loop_notifier);
    MainLoopPoll *mlpoll = data;

    /*
     * Only this thread parks the poll (tx_poll_park() runs from its
     * timer), so a parked poll is never missed by this look without the
     * lock; the lock, which the link thread and the vCPUs take per
     * packet, is taken only when there is something to do.
     */
    if (mlpoll->state != MAIN_LOOP_POLL_FILL ||
        !qatomic_read(&qs->tx.poll_parked) || !tx_polled_served(qs) ||
        all_cpu_threads_idle() || qs->tx.cfg.timed) {
        return;
    }
    QEMU_LOCK_GUARD(qs->lock);
    niu_tx_unpark(qs);
}

/*
 * One service pass over the Tx queues.  @polled: the poll timer or its
 * bottom half asked, and the poll interval adapts to what the pass found.
 * A doorbell's pass leaves the interval alone: a guest that rings will
 * ring again, and polling fast after each of its doorbells would wake the
 * main loop every x-poll-min-ns for nothing (on a 2-core host that wake-up
 * takes the core from the vCPU that rang).  For the same reason only work
 * the doorbells did not announce makes the poll fast again: a poll that
 * finds the slot a guest wrote just before ringing for it would otherwise
 * keep itself at x-poll-min-ns for as long as that guest streams (a trace of
 * niu-bw: some 6000 main-loop wake-ups a second, each taking the BQL from
 * the vCPU and the link thread).  Polling stays armed for the guests that
 * only write slots (seed 002).  @only: the endpoints to serve (the poll
 * timer's: TX_POLLED's; every other pass: all).
 */
static void tx_pass(NiuQueues *qs, bool polled, uint32_t only)
{
    unsigned order[ARCTIC_ENDPOINTS];
    unsigned n, taken = 0, unannounced = 0;
    uint32_t waiting = 0;
    bool more = false;
    /*
     * Whether every vCPU was halted before this pass read a queue.  Timed,
     * the poll never parks: what would unpark it (the main loop) runs at
     * no instant of virtual time.
     */
    bool cpus_idle = polled && !qs->tx.cfg.timed && all_cpu_threads_idle();

    if (tx_frozen(qs)) {
        return;     /* its state is saved or loaded: niu_thaw() kicks it */
    }

    /*
     * Order the queue reads below after the read of the vCPUs' halted
     * state: a slot a vCPU wrote before it halted is then seen, and a
     * pass that parks has found everything written before the halt.
     */
    smp_mb();
    qs->tx.held_until = 0;    /* this pass takes a held doorbell's slots */
    niu_raw_tx_flush(qs);     /* lines may have come free */
    if (qs->tx_enabled) {
        send_reports(qs);
        qs->tx.refused = 0;
        n = served_endpoints(qs, order, only);
        /*
         * High before low across every endpoint, so low-priority work of
         * one endpoint never delays another's high-priority slots; DMATx
         * last: MPI traffic bypasses long DMA operations (§2.2.2).
         */
        taken += serve_queues(qs, order, n, ARCTIC_TXQ_HI, &more,
                              &unannounced, &waiting);
        taken += serve_queues(qs, order, n, ARCTIC_TXQ_LO, &more,
                              &unannounced, &waiting);
        taken += serve_queues(qs, order, n, ARCTIC_TXQ_DMA, &more,
                              &unannounced, &waiting);
        /*
         * Refused slots are work but not progress.  A guest can make each
         * refusal feed the next (its error notice lands in HiRx, which it
         * placed over a Tx queue): such a pass backs off like an idle poll
         * and does not reschedule itself, so the NIU's work per unit of
         * virtual time stays bounded whatever the guest programs.
         */
        if (!polled) {
            if (!timer_pending(qs->tx.poll_timer) && tx_polled_served(qs)) {
                tx_poll_arm(qs);
            }
        } else {
            if (unannounced && taken > qs->tx.refused) {
                qs->tx.poll_interval_ns = qs->tx.cfg.poll_min_ns;
            } else {
                qs->tx.poll_interval_ns = MIN(qs->tx.poll_interval_ns * 2,
                                              qs->tx.cfg.poll_max_ns);
            }
            trace_arctic_niu_tx_poll(qs->node_id, taken, unannounced,
                                     qs->tx.poll_interval_ns);
            /* Work a doorbell announced stays announced until taken. */
            qs->tx.rung &= waiting;
            if (!tx_polled_served(qs)) {
                tx_poll_park(qs, "no endpoint polled (TX_POLLED)");
            } else if (cpus_idle && !taken && !waiting && !more) {
                tx_poll_park(qs, "every vCPU idle, the Tx queues empty");
            } else {
                tx_poll_arm(qs);
            }
        }
        if (more && taken > qs->tx.refused) {
            tx_schedule(qs);
        }
    }
    niu_e2e_pump(qs->e2e, false);
}

static void tx_service(NiuQueues *qs, bool polled)
{
    tx_pass(qs, polled, MAKE_64BIT_MASK(0, ARCTIC_ENDPOINTS));
}

static void tx_poll_timer_cb(void *opaque)
{
    NiuQueues *qs = opaque;
    QEMU_LOCK_GUARD(qs->lock);

    tx_pass(qs, true, qs->tx_polled);
}

static void tx_bh_cb(void *opaque)
{
    NiuQueues *qs = opaque;
    QEMU_LOCK_GUARD(qs->lock);

    tx_service(qs, true);
}

void niu_tx_kick(NiuQueues *qs)
{
    if (qs->tx.poll_parked) {
        trace_arctic_niu_tx_poll_unpark(qs->node_id);
    }

    qs->tx.poll_interval_ns = qs->tx.cfg.poll_min_ns;
    qs->tx.poll_parked = false;
    tx_schedule(qs);
}

/*
 * Is this doorbell one of a stream, whose pass waits?  A program that
 * sends faster than its NIU needs lines rings for nearly every message
 * (libniu rings only when the slot before was taken), and a pass per
 * doorbell sends one or two packets per write: the switch is woken and
 * the receiver acks per few messages, so the sender never runs short of
 * lines, which is what would batch it (docs/datapath.md §3.9).  From
 * the ARCTIC_DOORBELL_STREAK'th doorbell that follows the one before
 * within x-doorbell-coalesce-ns, the pass waits that long for the slots
 * written meanwhile (libniu rings for none of them: their predecessor is
 * not taken).  A lone message, a round trip or a short burst never waits.
 */
static bool tx_doorbell_held(NiuQueues *qs)
{
    int64_t now;

    if (!qs->tx.cfg.doorbell_coalesce_ns) {
        return false;
    }
    now = get_clock();
    if (qs->tx.held_until) {
        /* A pass is due: it takes this slot too, or runs now if late. */
        return now < qs->tx.held_until;
    }
    if (now - qs->tx.doorbell_ns < qs->tx.cfg.doorbell_coalesce_ns) {
        qs->tx.doorbell_streak = MIN(qs->tx.doorbell_streak + 1,
                                     ARCTIC_DOORBELL_STREAK);
    } else {
        qs->tx.doorbell_streak = 0;
    }
    qs->tx.doorbell_ns = now;
    if (qs->tx.doorbell_streak < ARCTIC_DOORBELL_STREAK ||
        !niu_link_wake_at(qs->link, qs->tx.cfg.doorbell_coalesce_ns)) {
        return false;
    }
    qs->tx.held_until = now + qs->tx.cfg.doorbell_coalesce_ns;
    trace_arctic_niu_tx_doorbell_held(qs->node_id,
                                      qs->tx.cfg.doorbell_coalesce_ns);
    return true;
}

/*
 * A doorbell serves the queues at once, in the ringing vCPU's thread
 * (under the device lock like every device callback): the slot the guest just
 * wrote is on the link before the store returns, instead of after a hop
 * to the main loop.  In a stream of doorbells the pass may wait instead
 * (tx_doorbell_held()).
 */
void niu_tx_doorbell(NiuQueues *qs, uint32_t endpoints)
{
    qs->tx.rung |= endpoints;
    if (qs->tx.cfg.doorbell_posted && niu_link_post(qs->link)) {
        return;
    }
    if (tx_doorbell_held(qs)) {
        return;
    }
    tx_service(qs, false);
}

/*
 * The program goes to sleep (it arms its interrupt): it writes no more
 * slots for a held pass to wait for, which runs now instead of from the
 * link's timer, a thread that a loaded host may wake late.
 */
void niu_tx_release_held(NiuQueues *qs)
{
    if (qs->tx.held_until) {
        tx_service(qs, false);
    }
}

/*
 * The link's timer (or a busy-polling vCPU serving it): a held doorbell's
 * pass runs once its time has come, else it is asked for again.
 */
void niu_tx_wake(NiuQueues *qs)
{
    int64_t now;

    if (!qs->tx.held_until) {
        return;
    }
    now = get_clock();
    if (now < qs->tx.held_until &&
        niu_link_wake_at(qs->link, qs->tx.held_until - now)) {
        return;
    }
    qs->tx.held_until = 0;
    tx_service(qs, false);
}

/* A doorbell handed to the link thread (x-doorbell-posted). */
void niu_tx_posted(NiuQueues *qs)
{
    tx_service(qs, false);
}

/*
 * The link has taken a batch of input (acks among it) or has room again.
 * If the Tx side stopped for want of a line and acks have freed some, it
 * goes on here, in the thread that took the acks, instead of waking the
 * main loop for it; otherwise only what is queued goes out.
 */
void niu_tx_resume(NiuQueues *qs)
{
    if (qs->tx.line_wait && niu_e2e_pending(qs->e2e) < qs->e2e->cfg.lines) {
        qs->tx.line_wait = false;
        tx_service(qs, false);
        return;
    }
    niu_e2e_pump(qs->e2e, true);
}

/*
 * TX_POLLED written.  An endpoint polled anew is looked at now and then
 * polled; an endpoint left out is read only by passes something else
 * starts (include/arctic/niu-hw.h), and with none left the poll parks at
 * its next pass.
 */
void niu_tx_set_polled(NiuQueues *qs, uint32_t polled)
{
    uint32_t added = polled & ~qs->tx_polled;

    qatomic_set(&qs->tx_polled, polled);
    trace_arctic_niu_tx_polled(qs->node_id, polled);
    if (added && qs->tx_enabled) {
        niu_tx_kick(qs);
    }
}

void niu_tx_enable_changed(NiuQueues *qs)
{
    if (qs->tx_enabled) {
        niu_tx_kick(qs);
    } else {
        timer_del(qs->tx.poll_timer);
        qs->tx.poll_parked = false;
    }
}

/*
 * ------------------------------------------------------------------------
 * Life cycle
 */

void niu_tx_init(NiuQueues *qs, MemReentrancyGuard *guard)
{
    qs->tx.poll_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, tx_poll_timer_cb,
                                     qs);
    qs->tx.bh = qemu_bh_new_guarded(tx_bh_cb, qs, guard);
    qs->tx.kick_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, tx_bh_cb, qs);
    qs->tx.main_loop_notifier.notify = tx_main_loop_poll;
    main_loop_poll_add_notifier(&qs->tx.main_loop_notifier);
}

void niu_tx_cleanup(NiuQueues *qs)
{
    main_loop_poll_remove_notifier(&qs->tx.main_loop_notifier);
    timer_free(qs->tx.poll_timer);
    timer_free(qs->tx.kick_timer);
    qemu_bh_delete(qs->tx.bh);
}

void niu_tx_reset(NiuQueues *qs)
{
    timer_del(qs->tx.poll_timer);
    timer_del(qs->tx.kick_timer);
    qs->tx.count = 0;
    qs->tx.line_wait = false;
    qs->tx.poll_interval_ns = qs->tx.cfg.poll_min_ns;
    qs->tx.poll_parked = false;
    qs->tx.rung = 0;
    qs->tx.doorbell_ns = 0;
    qs->tx.doorbell_streak = 0;
    qs->tx.held_until = 0;
}
