/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU: what the NIU reports to its guest: the interrupts
 * (IRQ_STATUS, IRQ_ENABLE, the MSI-X vectors and INTx; seed 002 §4.1.4),
 * the errors (ERROR_CAUSE, ERROR_INFO) and the counters.
 *
 * Every part of the device reports through this, from any thread that
 * holds the device lock: a count, an error (the registers, the trace
 * event, the log line by whose fault it is, the ERROR interrupt), an
 * interrupt cause.  It knows nothing of the device above it: its
 * settings are copied in at realize, and it tells its owner that an
 * interrupt was raised through one callback.  The vectors and INTx need
 * the BQL; a cause raised without it waits in irq_fired for
 * niu_status_flush() (the link thread's, once it lets go of the lock) or
 * for the bottom half.
 */
#ifndef HW_NET_ARCTIC_NIU_STATUS_H
#define HW_NET_ARCTIC_NIU_STATUS_H

#include "qemu/thread.h"
#include "qemu/timer.h"
#include "hw/pci/pci_device.h"

#include "arctic/niu-hw.h"
#include "niu-link.h"

typedef struct NiuStatus {
    /* settings, copied at realize (niu_status_init()) */
    PCIDevice *pdev;            /* whose vectors and INTx */
    QemuRecMutex *lock;         /* the device lock */
    NiuLink *link;              /* whose thread flushes what it fired */
    uint16_t node_id;           /* for the log and the trace events */
    bool timed;                 /* timed mode: interrupts on the virtual */
    uint32_t timed_irq_ns;      /* clock, time-irq-ns after their cause */
    /* told, under the lock, whenever an enabled cause is raised */
    void (*raised)(void *opaque);
    void *opaque;

    /* registers */
    uint32_t irq_status;
    uint32_t irq_enable;
    uint32_t error_cause;
    uint32_t error_info;
    uint32_t counters[ARCTIC_NUM_COUNTERS];

    uint32_t irq_fired;         /* fired causes not signalled yet */
    uint32_t error_warned;      /* network causes warned about this session */
    QEMUBH *irq_bh;             /* signals what was fired without the BQL */
    QEMUTimer *irq_timer;       /* timed mode: the same, time-irq-ns on */
} NiuStatus;

void niu_status_init(NiuStatus *st, PCIDevice *pdev, QemuRecMutex *lock,
                     NiuLink *link, uint16_t node_id, bool timed,
                     uint32_t timed_irq_ns, void (*raised)(void *opaque),
                     void *opaque);
void niu_status_cleanup(NiuStatus *st);
/* Power-on values, and INTx down; the counters too. */
void niu_status_reset(NiuStatus *st);
/* The link is up: the network's faults are news again. */
void niu_status_link_up(NiuStatus *st);

void niu_count(NiuStatus *st, enum arctic_counter c);
void niu_count_n(NiuStatus *st, enum arctic_counter c, uint32_t n);
void niu_error(NiuStatus *st, enum arctic_error cause,
               unsigned ep, unsigned queue, uint32_t detail,
               const char *fmt, ...) G_GNUC_PRINTF(6, 7);
void niu_verror(NiuStatus *st, enum arctic_error cause,
                unsigned ep, unsigned queue, uint32_t detail,
                const char *fmt, va_list ap) G_GNUC_PRINTF(6, 0);

/* Raise the enabled causes of @cause_mask (NIU_IRQ bits). */
void niu_irq_event(NiuStatus *st, uint32_t cause_mask);
/*
 * Register writes: IRQ_STATUS and ERROR_CAUSE (write 1 to clear),
 * IRQ_ENABLE (the whole register), USER_IRQ_ARM (causes added).
 */
void niu_irq_ack(NiuStatus *st, uint32_t mask);
void niu_irq_set_enable(NiuStatus *st, uint32_t value);
void niu_irq_arm(NiuStatus *st, uint32_t mask);
void niu_error_ack(NiuStatus *st, uint32_t mask);
/* INTx follows IRQ_STATUS when MSI-X is off.  Under the BQL. */
void niu_irq_update_intx(NiuStatus *st);
/* Signal what was fired without the BQL; the caller holds neither lock. */
void niu_status_flush(NiuStatus *st);

/* The status registers' part of the device's migration stream. */
extern const VMStateDescription vmstate_niu_status;
const char *niu_status_loaded_fault(const NiuStatus *st);
void niu_status_restored(NiuStatus *st);

#endif /* HW_NET_ARCTIC_NIU_STATUS_H */
