/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU timed mode (timed=on; docs/timed-mode.md): the NIU keeps the
 * cluster's virtual time with arctic-switch over a timed link (link 1.4,
 * arctic/link.h).
 *
 * QEMU runs with instruction counting (-icount shift=N,sleep=off), so the
 * guest's clock, QEMU_CLOCK_VIRTUAL, advances with the instructions it
 * executes and jumps over idle time.  The cluster's clock is that clock
 * less the instant TIME_CTRL.START returned (every node starts at once).
 * This layer
 *   - stamps each packet the NIU sends with the virtual time its head
 *     leaves the NIU, charging the transmit engine's costs
 *     (arctic/timing.h);
 *   - holds each packet the switch delivers until the time it carries,
 *     and hands it to the end-to-end protocol then, from a timer on the
 *     virtual clock;
 *   - never lets the virtual clock pass the switch's grant: a timer at
 *     the grant reports the time reached (TIME_SYNC) and waits, in the
 *     thread that runs the guest, for the next grant.  While it waits
 *     the guest does not run, and no virtual time passes.
 * Every change the guest can see then happens at an instant of virtual
 * time that the program and its inputs decide, whatever the host does:
 * the device's deferred work runs from timers on the virtual clock, never
 * from bottom halves or host timers, and the link thread reads nothing.
 * Everything here runs under the device lock.
 */
#ifndef HW_NET_ARCTIC_NIU_TIME_H
#define HW_NET_ARCTIC_NIU_TIME_H

#include "qemu/queue.h"
#include "qemu/timer.h"
#include "arctic/link.h"
#include "arctic/timing.h"

#include "niu-e2e.h"
#include "niu-link.h"
#include "niu-status.h"

typedef enum NiuTimeState {
    NIU_TIME_OFF,           /* timed=off: the host's time */
    NIU_TIME_STOPPED,       /* timed, the cluster's clock not started */
    NIU_TIME_RUNNING,
    NIU_TIME_BROKEN,        /* the cluster's time was lost: runs alone */
} NiuTimeState;

/* A packet the switch delivered, waiting for its time. */
typedef struct NiuTimedPacket {
    uint64_t at;            /* cluster ns the NIU takes it */
    uint8_t prio;
    uint16_t size;
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    QTAILQ_ENTRY(NiuTimedPacket) next;
} NiuTimedPacket;

/*
 * What timed mode tells its owner, who hands it on to the transmit side
 * of the queue engine.
 */
typedef struct NiuTimeOps {
    /* Deliveries went to the protocol: what their acks freed goes on. */
    void (*resume)(void *opaque);
    /* The cluster's clock started: what the guest queued before goes. */
    void (*started)(void *opaque);
} NiuTimeOps;

typedef struct NiuTime {
    /* what it works with, given at niu_time_init() */
    uint16_t node_id;           /* for the log and the trace events */
    QemuRecMutex *lock;         /* the device lock, let go while it waits */
    NiuLink *link;              /* the timed link to the switch */
    NiuE2E *e2e;                /* takes the packets whose time came */
    NiuStatus *status;          /* errors of TIME_CTRL */
    const NiuTimeOps *ops;
    void *opaque;

    /* properties (docs/timed-mode.md, arctic/timing.h) */
    bool enabled;               /* timed= */
    uint32_t tx_ns;             /* time-tx-ns */
    uint32_t rx_ns;             /* time-rx-ns */
    uint32_t pci_mbytes;        /* time-pci-mbytes */
    uint32_t irq_ns;            /* time-irq-ns */

    uint32_t pci_ps_per_byte;
    uint32_t tick_ns;           /* the clock's step: an instruction */
    NiuTimeState state;
    bool ready_sent;            /* TIME_READY went: waiting for TIME_START */
    bool sync_sent;             /* TIME_SYNC went: waiting for TIME_GRANT */
    int64_t epoch;              /* QEMU_CLOCK_VIRTUAL ns at cluster 0 */
    uint64_t granted;           /* the switch's last grant */
    /* the clock stops here: the grant, or earlier after a send (link.h) */
    uint64_t limit;
    uint64_t lookahead_ns;      /* from TIME_START */
    uint64_t return_ns;
    uint64_t tx_free;           /* the transmit engine is free from then */
    uint32_t now_hi;            /* TIME_NOW_HI latched by a read of LO */
    QTAILQ_HEAD(, NiuTimedPacket) inbox;    /* by time, then arrival */
    unsigned inbox_count;
    QEMUTimer *grant_timer;
    QEMUTimer *deliver_timer;

    /* counters, for the state view and traces */
    uint64_t syncs;
    uint64_t sync_wait_ns;      /* host ns spent waiting for grants */
    uint64_t packets_out, packets_in;
    const char *loaded_fault;   /* its check of what was loaded */
} NiuTime;

bool niu_time_init(NiuTime *t, uint16_t node_id, QemuRecMutex *lock,
                   NiuLink *link, NiuE2E *e2e, NiuStatus *status,
                   const NiuTimeOps *ops, void *opaque, Error **errp);
void niu_time_cleanup(NiuTime *t);
void niu_time_restored(NiuTime *t);
bool niu_time_on(const NiuTime *t);
bool niu_time_running(const NiuTime *t);
uint64_t niu_time_now(NiuTime *t);
bool niu_time_may_pause(NiuTime *t);
void niu_time_start(NiuTime *t);
uint32_t niu_time_status(NiuTime *t);
uint32_t niu_time_read_now(NiuTime *t, bool high);
uint64_t niu_time_stamp(NiuTime *t, const uint8_t *wire, size_t size);
void niu_time_packet(NiuTime *t, uint8_t prio, uint64_t at,
                     const uint8_t *wire, size_t size);
void niu_time_on_start(NiuTime *t, const struct arctic_time_start *st);
void niu_time_on_grant(NiuTime *t, uint64_t until);

/* Its state, the body of the subsection arctic-niu/time (arctic-niu.c) */
extern const VMStateDescription vmstate_niu_time;

#endif /* HW_NET_ARCTIC_NIU_TIME_H */
