/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU: state shared by the device's parts.
 *
 * From the top, and the prefix of each part's functions:
 *   arctic-niu.c  registers and QOM (niu_*): properties, the register
 *                 file (MMIO), reset, the state view, and the glue that
 *                 hands what the layers below report (niu_on_link_*,
 *                 niu_on_e2e_*) to the ones that act on it
 *   the queue engine, the only code that reads or writes guest memory
 *   (through niu-dma.c), in three structures of ArcticNiuState (tx, rx,
 *   raw):
 *   niu-tx.c      MPFSM and DMAFSM (seed 002 §6.2.1-6.2.2; niu_tx_*):
 *                 polls the Tx queues, builds packets and hands them to
 *                 the end-to-end protocol
 *   niu-rx.c      RCVFSM (§6.3.1; niu_rx_*): delivery into the Rx queues
 *                 and DMA windows, the notices
 *   niu-raw.c     dMPI raw mode (niu_raw_*): the FIFO access points of
 *                 endpoint 0
 *   niu-dma.c     the NIU's access to guest RAM (niu-dma.h; niu_dma_*):
 *                 reads, writes, header loads and stores, the page map,
 *                 window translation; state ArcticNiuState.dma; calls
 *                 nothing in the device
 *   niu-test-dma.c  the test DMA engine (niu-test-dma.h; niu_test_dma_*):
 *                 the driver's self-test of DMA, its registers and work;
 *                 state ArcticNiuState.test_dma; calls only DMA and status
 *   niu-status.c  interrupts, errors and counters (niu-status.h;
 *                 niu_irq_*, niu_error, niu_count): what every part
 *                 reports to the guest; its state ArcticNiuState.status;
 *                 tells the device of a raised interrupt by one callback
 *                 and calls nothing in it but the link's thread test
 *   niu-e2e.c     the end-to-end protocol (niu-e2e.h; niu_e2e_*): lines,
 *                 streams, acks, nacks, timeouts, the send order; its
 *                 state and settings are ArcticNiuState.e2e, it calls only
 *                 the link, and it reports upward only through NiuE2EOps
 *   niu-time.c    timed mode (niu-time.h; niu_time_*): the cluster's
 *                 virtual time, the stamps of packets sent, the times
 *                 packets delivered are taken, the grants of the switch;
 *                 state ArcticNiuState.time; calls the link, the
 *                 protocol and status, reports through NiuTimeOps
 *   niu-link*.c   the link to arctic-switch (niu-link.h; niu_link_*): the
 *                 session (framing, handshake, credits) and its two
 *                 transports, a chardev or a socket served by a link
 *                 thread; settings in link_cfg; it reports upward only
 *                 through NiuLinkOps
 * docs/device-internals.md says the same for reviewers, with the threads
 * and the lock.
 * The hardware contract (registers, slots, packet, link) is in
 * include/arctic/, shared with the switch, the qtests and the guest; only
 * its names start with arctic_.
 */
#ifndef HW_NET_ARCTIC_NIU_H
#define HW_NET_ARCTIC_NIU_H

#include "hw/pci/pci_device.h"
#include "hw/registerfields.h"
#include "chardev/char-fe.h"
#include "qemu/thread.h"
#include "qemu/notify.h"
#include "qemu/timer.h"
#include "qom/object.h"

#include "arctic/niu-hw.h"
#include "arctic/packet.h"
#include "arctic/link.h"
#include "arctic/route.h"

#include "niu-dma.h"
#include "niu-e2e.h"
#include "niu-link.h"
#include "niu-status.h"
#include "niu-test-dma.h"
#include "niu-time.h"

#define TYPE_ARCTIC_NIU "arctic-niu"
OBJECT_DECLARE_SIMPLE_TYPE(ArcticNiuState, ARCTIC_NIU)

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

struct ArcticNiuState {
    PCIDevice parent_obj;

    /*
     * The device lock: everything below, the link session and its
     * transport.  Every way into the device takes it: MMIO, timers,
     * bottom halves, the chardev's handlers, reset, the state view, and
     * the link thread, which takes it instead of the BQL, so that the
     * NIU's input, its deliveries into guest RAM, its acks and its
     * credits never wait for a vCPU that holds the BQL.  Lock order: the
     * BQL, then this lock.  Nothing that holds it takes the BQL: the
     * NIU's DMA reaches RAM only (niu_dma_rw()), and an interrupt raised
     * without the BQL waits in status.irq_fired for the link thread to
     * let go of this lock (niu_status_flush()) or for irq_bh.  Recursive,
     * because a chardev may report a disconnect from inside the write
     * the device made.
     */
    QemuRecMutex lock;

    MemoryRegion control_bar;
    MemoryRegion user_bar;

    /* The NIU's bus-master access to guest RAM (niu-dma.c) */
    NiuDma dma;
    /* Interrupts, errors and counters (niu-status.c) */
    NiuStatus status;
    /* The driver's self-test of DMA (niu-test-dma.c) */
    NiuTestDma test_dma;

    /* properties */
    CharBackend chr;
    uint32_t node_id;

    /* register file */
    bool tx_enabled;            /* TxCtrl ON written */
    bool rx_enabled;
    bool rx_raw;                /* RxCtrl.RAW: OFF means dMPI receive */
    uint32_t vmask;
    uint32_t scratch;
    uint32_t route_table[2][ARCTIC_S];
    ArcticEndpoint ep[ARCTIC_ENDPOINTS];

    /* MPFSM and DMAFSM (niu-tx.c) */
    NiuMpfsm tx;
    /* dMPI raw mode (niu-raw.c) */
    NiuRawFifos raw;
    /* RCVFSM (niu-rx.c) */
    NiuRcvfsm rx;

    /* the end-to-end protocol (niu-e2e.c) */
    NiuE2E e2e;

    /* timed mode (niu-time.c) */
    NiuTime time;

    /* link (niu-link.h) */
    NiuLink link;
    NiuLinkConfig link_cfg;     /* its properties */
    bool poll_yield;            /* x-link-poll-yield: USER_LINK_POLL */
    Stat64 poll_yields;         /* empty busy polls that gave the core */

    /*
     * Migration (docs/device-internals.md §8): frozen while the state is
     * saved or loaded (no input, no queue service); a load that began and
     * did not finish keeps it so until reset.  What the stream carries
     * beside the state: the properties it must match, the link's facts.
     */
    bool frozen;
    const char *frozen_by;      /* what froze it (a static string) */
    bool restore_failed;
    const char *loaded_fault;   /* a part's check of what it loaded */
    struct {
        uint32_t node_id, lines, timed;
    } vm_identity;
    struct {
        uint16_t up_count;
        uint32_t num_nodes, levels;
    } vm_link;
    VMChangeStateEntry *vm_change;
    NotifierWithReturn precopy_notifier;
};

/* arctic-niu.c */
void niu_full_reset(ArcticNiuState *s);

/* niu-tx.c */
void niu_tx_init(ArcticNiuState *s);
void niu_tx_reset(ArcticNiuState *s);
void niu_tx_kick(ArcticNiuState *s);
void niu_tx_unpark(ArcticNiuState *s);
void niu_tx_doorbell(ArcticNiuState *s, uint32_t endpoints);
void niu_tx_enable_changed(ArcticNiuState *s);
bool niu_tx_draining(ArcticNiuState *s);
void niu_tx_resume(ArcticNiuState *s);
void niu_tx_posted(ArcticNiuState *s);
void niu_tx_wake(ArcticNiuState *s);
void niu_tx_release_held(ArcticNiuState *s);
void niu_tx_cleanup(ArcticNiuState *s);

/* niu-rx.c */
void niu_rx_reset(ArcticNiuState *s);
RxVerdict niu_rx_deliver(ArcticNiuState *s, uint8_t prio, uint16_t src,
                         uint16_t job, uint8_t flags, const uint8_t *pkt,
                         size_t size);
bool niu_rx_local_notice(ArcticNiuState *s, unsigned epn, uint32_t header,
                         uint32_t command, uint32_t status);

/* niu-raw.c */
void niu_raw_reset(ArcticNiuState *s);
bool niu_raw_access(ArcticNiuState *s, hwaddr reg, bool write,
                    uint32_t *val);
bool niu_raw_rx_push(ArcticNiuState *s, uint8_t prio, const uint8_t *pkt,
                     size_t size);
void niu_raw_tx_flush(ArcticNiuState *s);

/* The optional parts of the migration stream (subsections) */
extern const VMStateDescription vmstate_niu_raw;     /* niu-raw.c */
extern const VMStateDescription vmstate_niu_rx_reports;  /* niu-rx.c */

/* niu-tx.c, for niu-raw.c */
bool niu_tx_send_raw(ArcticNiuState *s, uint8_t prio, const uint32_t *words,
                     unsigned count);

#endif /* HW_NET_ARCTIC_NIU_H */
