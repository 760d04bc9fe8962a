/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU timed mode: the cluster's virtual time (niu-time.h,
 * docs/timed-mode.md).
 */

#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "qemu/config-file.h"
#include "qemu/main-loop.h"
#include "qemu/option.h"
#include "qapi/error.h"
#include "hw/core/cpu.h"
#include "system/cpu-timers.h"
#include "system/qtest.h"
#include "system/runstate.h"
#include "migration/vmstate.h"
#include "trace.h"

#include "hw/registerfields.h"
#include "arctic/niu-hw.h"

#include "niu-time.h"

enum {
    /* A wait for the switch looks at shutdown requests this often. */
    NIU_TIME_WAIT_SLICE_MS = 100,
    /* ... and says it still waits this often. */
    NIU_TIME_WAIT_WARN_S = 10,
};

/* timed=on (from realize on: the device's whole life is timed). */
bool niu_time_on(const NiuTime *t)
{
    return t->enabled;
}

bool niu_time_running(const NiuTime *t)
{
    return t->state == NIU_TIME_RUNNING;
}

/* The cluster's time now: 0 until the clock started. */
uint64_t niu_time_now(NiuTime *t)
{
    if (t->state == NIU_TIME_STOPPED || t->state == NIU_TIME_OFF) {
        return 0;
    }
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) - t->epoch;
}

/* A cluster time on the virtual clock, for a timer. */
static int64_t time_local(NiuTime *t, uint64_t cluster)
{
    return cluster >= (uint64_t)INT64_MAX - t->epoch
           ? INT64_MAX : t->epoch + (int64_t)cluster;
}

/*
 * The cluster's time is lost (@why): the NIU stops waiting for it and the
 * node runs on with its own clock, sending no more (the link is down or
 * QEMU goes away).  Said once; TIME_STATUS.BROKEN tells the guest.
 */
static void time_broken(NiuTime *t, const char *why)
{
    if (t->state == NIU_TIME_BROKEN) {
        return;
    }
    trace_arctic_niu_time_broken(t->node_id, why);
    if (!qemu_shutdown_requested_get()) {
        warn_report("arctic-niu: node %u: the cluster's time is lost (%s); "
                    "this node runs on alone", t->node_id, why);
    }
    t->state = NIU_TIME_BROKEN;
    timer_del(t->grant_timer);
}

/*
 * Wait, in the thread that runs the guest (so the guest and its clock
 * stand still), until @done says so, reading the link's input meanwhile:
 * false if the cluster's time was lost instead.  The device lock is held
 * once by the caller; it is let go while the thread sleeps.
 */
static bool time_wait(NiuTime *t, bool (*done)(NiuTime *t),
                      const char *what)
{
    NiuLink *link = t->link;
    int64_t start = get_clock(), said = start;

    while (!done(t)) {
        int64_t now;

        if (link->state != NIU_LINK_UP) {
            time_broken(t, "the link to the switch went down");
            return false;
        }
        if (qemu_shutdown_requested_get()) {
            time_broken(t, "QEMU is shutting down");
            return false;
        }
        if (link->out_blocked) {
            niu_link_writable(link);    /* the wait is the only writer */
        }
        if (niu_link_read_input(link)) {
            continue;
        }
        qemu_rec_mutex_unlock(t->lock);
        niu_link_wait_input(link, NIU_TIME_WAIT_SLICE_MS * SCALE_MS);
        qemu_rec_mutex_lock(t->lock);
        now = get_clock();
        if (now - said >= NIU_TIME_WAIT_WARN_S * NANOSECONDS_PER_SECOND) {
            said = now;
            warn_report("arctic-niu: node %u: still waiting for %s "
                        "(%d s)", t->node_id, what,
                        (int)((now - start) / NANOSECONDS_PER_SECOND));
        }
    }
    t->sync_wait_ns += get_clock() - start;
    return true;
}

/* --- delivery --------------------------------------------------------- */

static void time_arm_delivery(NiuTime *t)
{
    NiuTimedPacket *p = QTAILQ_FIRST(&t->inbox);

    if (p) {
        timer_mod(t->deliver_timer, time_local(t, p->at));
    } else {
        timer_del(t->deliver_timer);
    }
}

/* The packets whose time has come go to the end-to-end protocol. */
static void time_deliver_cb(void *opaque)
{
    NiuTime *t = opaque;
    QEMU_LOCK_GUARD(t->lock);
    uint64_t now = niu_time_now(t);
    NiuTimedPacket *p;
    bool any = false;

    while ((p = QTAILQ_FIRST(&t->inbox)) && p->at <= now) {
        QTAILQ_REMOVE(&t->inbox, p, next);
        t->inbox_count--;
        trace_arctic_niu_time_deliver(t->node_id, p->at, p->size);
        if (niu_link_is_up(t->link)) {
            niu_e2e_packet(t->e2e, p->wire, p->size);
            any = true;
        }
        g_free(p);
    }
    if (any) {
        /* As after a batch of input: what acks freed goes on. */
        t->ops->resume(t->opaque);
        niu_link_flush(t->link);
    }
    time_arm_delivery(t);
}

/*
 * A packet the switch delivered, to be taken at cluster time @at: never
 * before the time this NIU reached (the switch knows it from TIME_SYNC).
 * Kept in order of time, then of arrival.
 */
void niu_time_packet(NiuTime *t, uint8_t prio, uint64_t at,
                     const uint8_t *wire, size_t size)
{
    NiuTimedPacket *p, *q, *after = NULL;
    uint64_t now;

    if (t->state != NIU_TIME_RUNNING) {
        return;
    }
    /* At most a tick past: the clock passed the grant by that much. */
    now = niu_time_now(t);
    if (at + t->tick_ns <= now) {
        trace_arctic_niu_time_packet_past(t->node_id, at, now, t->limit);
        niu_link_broken(t->link, "TIMED_PACKET for a time already past",
                        (uint32_t)at);
        return;
    }
    p = g_new(NiuTimedPacket, 1);
    p->at = at;
    p->prio = prio;
    p->size = size;
    memcpy(p->wire, wire, size);
    QTAILQ_FOREACH(q, &t->inbox, next) {
        if (q->at > at) {
            break;
        }
        after = q;
    }
    if (after) {
        QTAILQ_INSERT_AFTER(&t->inbox, after, p, next);
    } else {
        QTAILQ_INSERT_HEAD(&t->inbox, p, next);
    }
    t->inbox_count++;
    t->packets_in++;
    trace_arctic_niu_time_packet_in(t->node_id, at, size, t->inbox_count);
    time_arm_delivery(t);
}

/* --- sending ---------------------------------------------------------- */

/*
 * The stamp of a packet leaving now: after the transmit engine has
 * finished the one before, plus what this one costs it.  An answer to it
 * could be delivered here from stamp + return on (TIME_START): the clock
 * stops there, for the switch to hear of the packet first.
 */
uint64_t niu_time_stamp(NiuTime *t, const uint8_t *wire, size_t size)
{
    uint64_t stamp = MAX(niu_time_now(t), t->tx_free) +
                     arctic_time_niu_cost(t->tx_ns, t->pci_ps_per_byte,
                                          wire, size);

    t->tx_free = stamp;
    t->packets_out++;
    if (stamp + t->return_ns < t->limit) {
        t->limit = stamp + t->return_ns;
        timer_mod(t->grant_timer, time_local(t, t->limit));
    }
    trace_arctic_niu_time_stamp(t->node_id, stamp, size, t->limit);
    return stamp;
}

/* --- the grant -------------------------------------------------------- */

/*
 * The earliest time this node could send unless a packet reaches it
 * first: now while a processor runs; while every one is halted with
 * nothing pending, the next event on the virtual clock (a timer of the
 * guest's or of a device); never, if there is none.
 */
static uint64_t time_promise(uint64_t now)
{
    CPUState *cpu;
    int64_t next;

    if (!first_cpu || qtest_enabled()) {
        return now;
    }
    CPU_FOREACH(cpu) {
        if (!cpu->halted || cpu_has_work(cpu)) {
            return now;
        }
    }
    next = qemu_clock_deadline_ns_all(QEMU_CLOCK_VIRTUAL, QEMU_TIMER_ATTR_ALL);
    return next < 0 ? ARCTIC_TIME_NEVER : now + next;
}

static bool time_granted(NiuTime *t)
{
    return t->state != NIU_TIME_RUNNING || !t->sync_sent;
}

/*
 * The clock reached the limit: say so, and wait for a grant beyond it
 * (the packets delivered before it arrive first).
 */
static void time_grant_cb(void *opaque)
{
    NiuTime *t = opaque;
    QEMU_LOCK_GUARD(t->lock);
    uint64_t now, promise;

    if (t->state != NIU_TIME_RUNNING) {
        return;
    }
    now = niu_time_now(t);
    if (now < t->limit) {
        /* A timer moved later than the limit: not yet. */
        timer_mod(t->grant_timer, time_local(t, t->limit));
        return;
    }
    if (now >= t->limit + t->tick_ns) {
        /*
         * The clock passed the limit by more than the instruction that
         * crossed it: what the switch delivers for the time between may
         * come too late (QEMU's patch 0005 closed the one way known).
         */
        trace_arctic_niu_time_overshoot(t->node_id, now, t->limit);
        warn_report_once("arctic-niu: node %u: the clock passed its limit "
                         "%" PRIu64 " ns by %" PRIu64 " ns", t->node_id,
                         t->limit, now - t->limit);
    }
    promise = time_promise(now);
    t->limit = now;
    t->syncs++;
    t->sync_sent = true;
    trace_arctic_niu_time_sync(t->node_id, now, promise);
    niu_link_time_sync(t->link, now, promise);
    if (!time_wait(t, time_granted, "the cluster's next grant")) {
        return;
    }
    t->limit = t->granted;
    trace_arctic_niu_time_grant(t->node_id, now, t->granted);
    timer_mod(t->grant_timer, time_local(t, t->limit));
}

void niu_time_on_grant(NiuTime *t, uint64_t until)
{
    if (t->state != NIU_TIME_RUNNING) {
        return;
    }
    if (!t->sync_sent) {
        niu_link_broken(t->link, "TIME_GRANT without a TIME_SYNC", 0);
        return;
    }
    /*
     * Only beyond where the clock stopped; it may be below the grant
     * before it, if the NIU stopped sooner after a send (link.h): what it
     * sent can bring an answer before that old grant.
     */
    if (until <= t->limit) {
        niu_link_broken(t->link, "TIME_GRANT not beyond the time reached",
                        (uint32_t)until);
        return;
    }
    t->granted = until;
    t->sync_sent = false;
}

/* --- the start ---------------------------------------------------------- */

static bool time_started(NiuTime *t)
{
    return t->state != NIU_TIME_STOPPED;
}

void niu_time_on_start(NiuTime *t, const struct arctic_time_start *st)
{
    if (t->state != NIU_TIME_STOPPED || !t->ready_sent) {
        niu_link_broken(t->link, "TIME_START nobody asked for", 0);
        return;
    }
    t->epoch = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    t->granted = t->limit = st->grant;
    t->lookahead_ns = st->lookahead_ns;
    t->return_ns = st->return_ns;
    t->tx_free = 0;
    t->state = NIU_TIME_RUNNING;
    trace_arctic_niu_time_start(t->node_id, st->grant, st->lookahead_ns,
                                st->return_ns);
    timer_mod(t->grant_timer, time_local(t, t->limit));
}

/*
 * TIME_CTRL's bits act only on a timed NIU before it said it is ready; a
 * BAD_VALUE error naming @bit and, on a timed NIU, @late if not.
 */
static bool time_ctrl_before_ready(NiuTime *t, const char *bit,
                                   const char *late)
{
    if (t->state != NIU_TIME_STOPPED || t->ready_sent) {
        niu_error(t->status, ARCTIC_ERR_BAD_VALUE, 0, 0, A_NIU_TIME_CTRL,
                  "TIME_CTRL.%s %s", bit, t->state == NIU_TIME_OFF
                  ? "on an NIU made without timed=on" : late);
        return false;
    }
    return true;
}

/*
 * TIME_CTRL.PAUSE: only before this node said it is ready (a pause after
 * would hold every other node at the barrier).
 */
bool niu_time_may_pause(NiuTime *t)
{
    return time_ctrl_before_ready(t, "PAUSE", "after TIME_CTRL.START");
}

/*
 * TIME_CTRL.START: this node is ready; the write returns once the whole
 * cluster is (the guest does not run meanwhile), with the clock at 0.
 */
void niu_time_start(NiuTime *t)
{
    struct arctic_time_ready ready = {
        .tx_ns = t->tx_ns,
        .rx_ns = t->rx_ns,
        .pci_ps_per_byte = t->pci_ps_per_byte,
        .tick_ns = t->tick_ns,
    };

    if (!time_ctrl_before_ready(t, "START",
                                "once the cluster's clock started")) {
        return;
    }
    if (!niu_link_is_up(t->link)) {
        niu_error(t->status, ARCTIC_ERR_BAD_VALUE, 0, 0, A_NIU_TIME_CTRL,
                  "TIME_CTRL.START with the link to the switch down");
        return;
    }
    t->ready_sent = true;
    trace_arctic_niu_time_ready(t->node_id);
    niu_link_time_ready(t->link, &ready);
    if (time_wait(t, time_started, "the other nodes to start the clock")) {
        /* What the guest queued before the start goes now. */
        t->ops->started(t->opaque);
    }
}

uint32_t niu_time_status(NiuTime *t)
{
    uint32_t v = FIELD_DP32(0, NIU_TIME_STATUS, TIMED, niu_time_on(t));

    v = FIELD_DP32(v, NIU_TIME_STATUS, RUNNING,
                   t->state == NIU_TIME_RUNNING);
    return FIELD_DP32(v, NIU_TIME_STATUS, BROKEN,
                      t->state == NIU_TIME_BROKEN);
}

/* TIME_NOW_LO latches the high half for TIME_NOW_HI. */
uint32_t niu_time_read_now(NiuTime *t, bool high)
{
    uint64_t now;

    if (high) {
        return t->now_hi;
    }
    now = niu_time_now(t);
    t->now_hi = now >> 32;
    return (uint32_t)now;
}

/* --- life cycle --------------------------------------------------------- */

/*
 * timed=on needs a guest clock that only instructions move: icount with a
 * fixed shift and no sleeping (or the qtest accelerator's clock), and a
 * link the device reads itself.
 */
bool niu_time_init(NiuTime *t, uint16_t node_id, QemuRecMutex *lock,
                   NiuLink *link, NiuE2E *e2e, NiuStatus *status,
                   const NiuTimeOps *ops, void *opaque, Error **errp)
{
    QemuOpts *icount;

    t->node_id = node_id;
    t->lock = lock;
    t->link = link;
    t->e2e = e2e;
    t->status = status;
    t->ops = ops;
    t->opaque = opaque;
    QTAILQ_INIT(&t->inbox);
    if (!t->enabled) {
        t->state = NIU_TIME_OFF;
        return true;
    }
    if (!qtest_enabled()) {
        icount = qemu_opts_find(qemu_find_opts("icount"), NULL);
        if (icount_enabled() != ICOUNT_PRECISE || !icount ||
            qemu_opt_get_bool(icount, "sleep", true)) {
            error_setg(errp, "arctic-niu: timed=on needs -icount "
                       "shift=N,sleep=off (the guest's clock must follow "
                       "its instructions alone)");
            return false;
        }
    }
    if (t->pci_mbytes == 0 || t->pci_mbytes > 1000000) {
        error_setg(errp, "arctic-niu: time-pci-mbytes must be 1..1000000");
        return false;
    }
    t->pci_ps_per_byte = 1000000 / t->pci_mbytes;
    /* An instruction's time; the qtest clock steps by the nanosecond. */
    t->tick_ns = qtest_enabled() ? 1 : icount_to_ns(1);
    t->state = NIU_TIME_STOPPED;
    t->grant_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, time_grant_cb, t);
    t->deliver_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, time_deliver_cb, t);
    niu_link_set_timed(t->link);
    return true;
}

static void time_inbox_clear(NiuTime *t)
{
    NiuTimedPacket *p;

    while ((p = QTAILQ_FIRST(&t->inbox))) {
        QTAILQ_REMOVE(&t->inbox, p, next);
        g_free(p);
    }
    t->inbox_count = 0;
}

void niu_time_cleanup(NiuTime *t)
{
    time_inbox_clear(t);
    if (t->grant_timer) {
        timer_free(t->grant_timer);
        timer_free(t->deliver_timer);
        t->grant_timer = t->deliver_timer = NULL;
    }
}

/* --- migration (docs/device-internals.md §8) ---------------------------- */

static const VMStateDescription vmstate_niu_timed_packet = {
    .name = "arctic-niu/timed-packet",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64(at, NiuTimedPacket),
        VMSTATE_UINT8(prio, NiuTimedPacket),
        VMSTATE_UINT16(size, NiuTimedPacket),
        VMSTATE_UINT8_ARRAY(wire, NiuTimedPacket, ARCTIC_WIRE_MAX_SIZE),
        VMSTATE_END_OF_LIST()
    },
};

/* The pending deliveries come from the stream alone. */
static int time_pre_load(void *opaque)
{
    NiuTime *t = opaque;

    timer_del(t->grant_timer);
    timer_del(t->deliver_timer);
    time_inbox_clear(t);
    return 0;
}

static const char *time_loaded_fault(const NiuTime *t)
{
    const NiuTimedPacket *p;
    uint64_t at = 0;

    if (t->state == NIU_TIME_OFF || t->state > NIU_TIME_BROKEN) {
        return "a timed mode state this device does not know";
    }
    QTAILQ_FOREACH(p, &t->inbox, next) {
        if (p->size > ARCTIC_WIRE_MAX_SIZE ||
            p->prio >= ARCTIC_NUM_PRIORITIES || p->at < at) {
            return "a pending delivery out of range or out of order";
        }
        at = p->at;
    }
    return NULL;
}

/* Checked; niu_post_load() refuses the stream for a fault. */
static int time_post_load(void *opaque, int version_id)
{
    NiuTime *t = opaque;
    NiuTimedPacket *p;

    t->loaded_fault = time_loaded_fault(t);
    if (t->loaded_fault) {
        time_inbox_clear(t);    /* niu_post_load() refuses the stream */
        return 0;
    }
    QTAILQ_FOREACH(p, &t->inbox, next) {
        t->inbox_count++;
    }
    return 0;
}

/*
 * Once the device accepted the load, the clock and what waits for it go
 * on as they were saved.  A clock that ran cannot rejoin its cluster: the
 * switch and the other nodes went on without this node (or are not the
 * ones it left), and the time this NIU reached went back.  It runs on
 * alone (TIME_STATUS.BROKEN); restoring a whole timed cluster with its
 * switch is the cluster's business.  A clock not started yet is taken up
 * by the next session's TIME_CTRL.START.
 */
void niu_time_restored(NiuTime *t)
{
    if (!niu_time_on(t)) {
        return;
    }
    if (t->state == NIU_TIME_RUNNING) {
        time_broken(t, "the node was restored from saved state");
    }
    time_arm_delivery(t);
}

/*
 * Loaded inside a subsection, then QEMU looks for subsections of its own
 * in what follows: its name must not begin the name of a later
 * subsection of the device's (qtest time/restore).
 */
const VMStateDescription vmstate_niu_time = {
    .name = "arctic-niu/time-state",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_load = time_pre_load,
    .post_load = time_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_SINGLE(state, NiuTime, 1, vmstate_info_uint32,
                       NiuTimeState),
        VMSTATE_BOOL(ready_sent, NiuTime),
        VMSTATE_BOOL(sync_sent, NiuTime),
        VMSTATE_INT64(epoch, NiuTime),
        VMSTATE_UINT64(granted, NiuTime),
        VMSTATE_UINT64(limit, NiuTime),
        VMSTATE_UINT64(lookahead_ns, NiuTime),
        VMSTATE_UINT64(return_ns, NiuTime),
        VMSTATE_UINT64(tx_free, NiuTime),
        VMSTATE_UINT32(now_hi, NiuTime),
        VMSTATE_QTAILQ_V(inbox, NiuTime, 1,
                         vmstate_niu_timed_packet, NiuTimedPacket, next),
        VMSTATE_UINT64(syncs, NiuTime),
        VMSTATE_UINT64(packets_out, NiuTime),
        VMSTATE_UINT64(packets_in, NiuTime),
        VMSTATE_END_OF_LIST()
    },
};
