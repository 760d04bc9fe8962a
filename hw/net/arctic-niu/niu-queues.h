/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU queue engine: the state of its three parts, NiuQueues, and
 * what each offers the others and the device.
 *   niu-tx.c   MPFSM and DMAFSM (seed 002 §6.2.1-6.2.2; niu_tx_*)
 *   niu-rx.c   RCVFSM (§6.3.1; niu_rx_*)
 *   niu-raw.c  dMPI raw mode (niu_raw_*)
 * The engine owns the registers it serves (the endpoints, the route
 * table, TxCtrl, RxCtrl, VMASK) and reaches the device's other parts
 * through the pointers set by niu_queues_init(): guest memory (niu-dma.h),
 * status (niu-status.h), the end-to-end protocol that takes the packets
 * it builds (niu-e2e.h), the link that serves posted and held doorbells
 * (niu-link.h) and the device lock its timers take.  The one thing it
 * asks of the device itself, whether migration froze it, goes through
 * NiuQueuesOps; it sees nothing else of the device.
 */
#ifndef HW_NET_ARCTIC_NIU_QUEUES_H
#define HW_NET_ARCTIC_NIU_QUEUES_H

#include "qemu/notify.h"
#include "hw/qdev-core.h"
#include "hw/registerfields.h"
#include "qemu/timer.h"
#include "migration/vmstate.h"

#include "arctic/niu-hw.h"
#include "arctic/packet.h"
#include "arctic/route.h"

#include "niu-dma.h"
#include "niu-e2e.h"
#include "niu-link.h"
#include "niu-status.h"

enum {
    /* Slots MPFSM takes from one queue before letting the main loop run. */
    ARCTIC_TX_BATCH = 32,
    /*
     * Packets the receive FIFO of each priority holds in dMPI mode
     * (RxCtrl OFF) before the NIU refuses more (seed 002 §4.1.2: they
     * "back up into the network").
     */
    ARCTIC_RAW_RX_PACKETS = 8,
    /* Reports of refused remote DMA owed to requesters, at most. */
    ARCTIC_RX_REPORTS = 16,
};

/* A requester to tell that this NIU refused some of its remote DMA. */
typedef struct ArcticReport {
    uint16_t node;
    uint8_t endpoint;
    uint8_t type;
    uint16_t job;
    uint32_t command;
} ArcticReport;

typedef struct ArcticEndpoint {
    uint64_t tx_qbase;
    uint64_t rx_qbase;
    uint32_t tx_tail[ARCTIC_NUM_TX_QUEUES];   /* HiTxTl, LoTxTl, DMATxTl */
    uint32_t rx_head[ARCTIC_NUM_RX_QUEUES];   /* HiRxHd, LoRxHd: EP_RX_HD */
    NiuDmaWindow dma;           /* EP_DMA_BASE_PHY, _VIR, _RANGE_MASK */
    uint32_t job;
    /*
     * Packets of the DMA request at the tail already built, for the two
     * queues that can hold one: [0] HiTx, [1] DMATx (32 data packets,
     * then the notification).
     */
    uint32_t dma_progress[2];
} ArcticEndpoint;

/*
 * The transmit side of the queue engine (niu-tx.c): MPFSM, which takes
 * slots from the Tx queues, and DMAFSM, which turns DMA requests into
 * data packets; with the poll and the doorbells that start them.
 */
typedef struct NiuMpfsm {
    /* properties */
    struct {
        uint64_t poll_min_ns;       /* the Tx poll's interval, adaptive */
        uint64_t poll_max_ns;
        bool doorbell_posted;       /* the link thread serves doorbells */
        bool timed;                 /* timed mode (the property "timed") */
        uint64_t doorbell_coalesce_ns;  /* a stream's doorbells share a pass */
    } cfg;

    QEMUTimer *poll_timer;
    uint64_t poll_interval_ns;
    QEMUBH *bh;
    QEMUTimer *kick_timer;      /* timed mode: bh on the virtual clock */
    unsigned count;             /* Appendix A COUNT */
    unsigned refused;           /* slots refused in this Tx service pass */
    uint32_t rung;              /* rang since the last poll, or left work */
    bool poll_parked;           /* idle: no poll until a vCPU can store */
    Notifier main_loop_notifier;
    bool line_wait;             /* work found no free line */
    int64_t doorbell_ns;        /* host time of the last doorbell */
    unsigned doorbell_streak;   /* doorbells, each close to the last */
    int64_t held_until;         /* host time a held doorbell's pass runs */
} NiuMpfsm;

/* A packet in a raw receive FIFO. */
typedef struct NiuRawPacket {
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint16_t size;
} NiuRawPacket;

/* dMPI raw mode's FIFOs (niu-raw.c), indexed by priority. */
typedef struct NiuRawFifos {
    uint32_t tx[ARCTIC_NUM_PRIORITIES][ARCTIC_MAX_PACKET_WORDS];
    unsigned tx_len[ARCTIC_NUM_PRIORITIES];
    bool tx_ready[ARCTIC_NUM_PRIORITIES];       /* whole, waits a line */
    bool tx_overrun[ARCTIC_NUM_PRIORITIES];     /* discarding to *Last */
    NiuRawPacket rx[ARCTIC_NUM_PRIORITIES][ARCTIC_RAW_RX_PACKETS];
    unsigned rx_head[ARCTIC_NUM_PRIORITIES];
    unsigned rx_count[ARCTIC_NUM_PRIORITIES];
    unsigned rx_word[ARCTIC_NUM_PRIORITIES];    /* next word of the head */
} NiuRawFifos;

/* The receive side of the queue engine (niu-rx.c): RCVFSM. */
typedef struct NiuRcvfsm {
    /*
     * Per source: endpoints whose DMA data from it was refused since
     * their last notification from it (which then says so).
     */
    uint8_t dma_failed[ARCTIC_S];
    /* Reports owed to requesters (FIFO; sent by niu-tx.c) */
    ArcticReport reports[ARCTIC_RX_REPORTS];
    unsigned report_head, report_count;
} NiuRcvfsm;

/* What the queue engine asks of the device that holds it. */
typedef struct NiuQueuesOps {
    /*
     * Migration froze the device (docs/device-internals.md §8): no queue
     * service, and raw packets wait in their FIFO.
     */
    bool (*frozen)(void *opaque);
} NiuQueuesOps;

/* The queue engine: its registers, its three parts, what it reaches. */
typedef struct NiuQueues {
    /* the device's other parts it uses (niu_queues_init()) */
    NiuDma *dma;
    NiuStatus *status;
    NiuE2E *e2e;                /* takes the packets niu-tx.c builds */
    NiuLink *link;              /* serves posted and held doorbells */
    QemuRecMutex *lock;         /* the device lock, for its timers and bh */
    const NiuQueuesOps *ops;
    void *opaque;
    uint32_t node_id;

    /* register file */
    bool tx_enabled;            /* TxCtrl ON written */
    bool rx_enabled;
    bool rx_raw;                /* RxCtrl.RAW: OFF means dMPI receive */
    uint32_t vmask;
    uint32_t tx_polled;         /* NIU_TX_POLLED */
    uint32_t route_table[2][ARCTIC_S];
    ArcticEndpoint ep[ARCTIC_ENDPOINTS];

    /* MPFSM and DMAFSM (niu-tx.c) */
    NiuMpfsm tx;
    /* dMPI raw mode (niu-raw.c) */
    NiuRawFifos raw;
    /* RCVFSM (niu-rx.c) */
    NiuRcvfsm rx;

    /* a part's check of what it loaded (docs/device-internals.md §8) */
    const char *loaded_fault;
} NiuQueues;

static inline void niu_queues_init(NiuQueues *q, uint32_t node_id,
                                   QemuRecMutex *lock, NiuDma *dma,
                                   NiuStatus *status, NiuE2E *e2e,
                                   NiuLink *link, const NiuQueuesOps *ops,
                                   void *opaque)
{
    q->node_id = node_id;
    q->lock = lock;
    q->dma = dma;
    q->status = status;
    q->e2e = e2e;
    q->link = link;
    q->ops = ops;
    q->opaque = opaque;
}

/* niu-rx.c */
void niu_rx_reset(NiuQueues *q);
RxVerdict niu_rx_deliver(NiuQueues *q, uint8_t prio, uint16_t src,
                         uint16_t job, uint8_t flags, const uint8_t *pkt,
                         size_t size);
bool niu_rx_local_notice(NiuQueues *q, unsigned epn, uint32_t header,
                         uint32_t command, uint32_t status);

/* niu-raw.c */
void niu_raw_reset(NiuQueues *q);
bool niu_raw_access(NiuQueues *q, hwaddr reg, bool write, uint32_t *val);
bool niu_raw_rx_push(NiuQueues *q, uint8_t prio, const uint8_t *pkt,
                     size_t size);
void niu_raw_tx_flush(NiuQueues *q);

/* niu-tx.c */
void niu_tx_init(NiuQueues *q, MemReentrancyGuard *guard);
void niu_tx_reset(NiuQueues *q);
void niu_tx_cleanup(NiuQueues *q);
void niu_tx_kick(NiuQueues *q);
void niu_tx_unpark(NiuQueues *q);
void niu_tx_set_polled(NiuQueues *q, uint32_t polled);
void niu_tx_doorbell(NiuQueues *q, uint32_t endpoints);
void niu_tx_enable_changed(NiuQueues *q);
bool niu_tx_draining(NiuQueues *q);
void niu_tx_resume(NiuQueues *q);
void niu_tx_posted(NiuQueues *q);
void niu_tx_wake(NiuQueues *q);
void niu_tx_release_held(NiuQueues *q);
bool niu_tx_send_raw(NiuQueues *q, uint8_t prio, const uint32_t *words,
                     unsigned count);

/*
 * The optional parts of the migration stream: the fields of NiuQueues
 * that the device's subsections "arctic-niu/raw" and
 * "arctic-niu/rx-reports" carry (inline, as VMSTATE_STRUCT does), and
 * whether they are needed.  Their names must not be the start of a
 * subsection that follows them (a struct's load takes such a one for its
 * own).
 */
bool niu_raw_needed(NiuQueues *q);
extern const VMStateDescription vmstate_niu_queues_raw;      /* niu-raw.c */
bool niu_rx_reports_needed(NiuQueues *q);
extern const VMStateDescription vmstate_niu_queues_reports;  /* niu-rx.c */

#endif /* HW_NET_ARCTIC_NIU_QUEUES_H */
