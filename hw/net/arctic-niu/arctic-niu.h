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
 *   (through niu-dma.c), with its registers in NiuQueues (niu-queues.h),
 *   ArcticNiuState.q; its three files work on it alone, and ask the
 *   device only whether it is frozen (NiuQueuesOps):
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
 *                 thread (niu-link-thread.c, its rings in
 *                 niu-link-rings.c); settings in link_cfg; it reports
 *                 upward only through NiuLinkOps
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
#include "niu-queues.h"
#include "niu-status.h"
#include "niu-test-dma.h"
#include "niu-time.h"

#define TYPE_ARCTIC_NIU "arctic-niu"

/*
 * What a template=on NIU saves for its node-id and mode: it has neither,
 * and its state loads into any node (docs/snapshots.md §6).
 */
#define NIU_VM_TEMPLATE UINT32_MAX
OBJECT_DECLARE_SIMPLE_TYPE(ArcticNiuState, ARCTIC_NIU)

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

    /* register file: the device's own; the queue engine's are in q */
    uint32_t scratch;

    /* the queue engine (niu-queues.h): MPFSM, DMAFSM, RCVFSM, raw mode */
    NiuQueues q;

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
    /*
     * template=on: a node without identity, saved to start clones from
     * (docs/snapshots.md §6); used once its guest touched a register.
     * loading_template: the state being loaded is a template's.
     */
    bool template;
    /* start-pause=on: TIME_CTRL.PAUSE stops the machine (a timed save) */
    bool start_pause;
    bool template_used;
    bool loading_template;
    struct {
        uint32_t node_id, lines, timed;     /* or NIU_VM_TEMPLATE */
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

#endif /* HW_NET_ARCTIC_NIU_H */
