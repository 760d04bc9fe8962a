/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU: interrupts, errors and counters (niu-status.h).
 */

#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "qemu/lockable.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "hw/pci/msix.h"
#include "migration/vmstate.h"
#include "trace.h"

#include "niu-status.h"

/*
 * Whose fault each cause is, which decides how it is logged: the guest's
 * mistakes go to '-d guest_errors'; the network's and the switch's to a
 * warning, once per cause until the link is next up (the trace event
 * arctic_niu_error has every one); a peer given up is said each time.
 */
typedef enum {
    NIU_BLAME_GUEST,
    NIU_BLAME_NETWORK,
    NIU_BLAME_PEER,
} NiuBlame;

static const NiuBlame niu_error_blame[ARCTIC_NUM_ERRORS] = {
    [ARCTIC_ERR_LINK_REJECTED] = NIU_BLAME_NETWORK,
    [ARCTIC_ERR_LINK_PROTOCOL] = NIU_BLAME_NETWORK,
    [ARCTIC_ERR_BAD_PACKET] = NIU_BLAME_NETWORK,
    [ARCTIC_ERR_PEER_DEAD] = NIU_BLAME_PEER,
};

void niu_irq_update_intx(NiuStatus *st)
{
    assert(bql_locked());
    pci_set_irq(st->pdev, !msix_enabled(st->pdev) && st->irq_status != 0);
}

/* Under the BQL: fire the vectors of @fire and follow IRQ_STATUS on INTx. */
static void niu_irq_signal(NiuStatus *st, uint32_t fire)
{
    unsigned bit;

    trace_arctic_niu_irq(st->node_id, fire, msix_enabled(st->pdev));
    if (msix_enabled(st->pdev)) {
        for (bit = 0; bit < 32; bit++) {
            if (!(fire & (1u << bit))) {
                continue;
            }
            /* Status bit n maps to vector n: RX, TX, then ERROR. */
            msix_notify(st->pdev, bit);
        }
    }
    niu_irq_update_intx(st);
}

/*
 * What was fired without the BQL, signalled under it: irq_bh's and
 * irq_timer's callback in the main loop, and niu_status_flush().
 */
static void niu_irq_bh(void *opaque)
{
    NiuStatus *st = opaque;
    QEMU_LOCK_GUARD(st->lock);
    uint32_t fire = st->irq_fired;

    st->irq_fired = 0;
    if (fire) {
        niu_irq_signal(st, fire);
    }
}

void niu_status_flush(NiuStatus *st)
{
    if (!qatomic_read(&st->irq_fired)) {
        return;
    }
    bql_lock();
    niu_irq_bh(st);
    bql_unlock();
}

/*
 * Raise the causes in @cause_mask (NIU_IRQ bits) that are enabled: set
 * their status, fire their vectors, and disarm the one-shot ones.  The
 * vectors and INTx need the BQL: without it they are left to the link
 * thread once it has let go of the device lock, or else to irq_bh, which
 * the main loop runs as soon as it gets the BQL; the status is set at
 * once either way.
 */
void niu_irq_event(NiuStatus *st, uint32_t cause_mask)
{
    uint32_t fire = cause_mask & st->irq_enable;

    if (!fire) {
        return;
    }
    st->irq_status |= fire;
    st->irq_enable &= ~(fire & ~R_NIU_IRQ_ERROR_MASK);
    /* The interrupt may wake a halted vCPU without the main loop. */
    st->raised(st->opaque);
    if (st->timed) {
        /*
         * Timed: the message signalling the interrupt costs time-irq-ns
         * of virtual time (arctic/timing.h), and is sent from a timer on
         * the virtual clock, at an instant the program decides.
         */
        st->irq_fired |= fire;
        if (!timer_pending(st->irq_timer)) {
            timer_mod(st->irq_timer, qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) +
                                     st->timed_irq_ns);
        }
        return;
    }
    if (bql_locked()) {
        niu_irq_signal(st, fire);
        return;
    }
    st->irq_fired |= fire;
    /*
     * The link thread signals it itself once it lets go of the device
     * lock (niu_status_flush()): a main-loop wake-up less per interrupt,
     * which a sleeping program waits for.
     */
    if (!niu_link_thread_is_self(st->link)) {
        qemu_bh_schedule(st->irq_bh);
    }
}

void niu_irq_ack(NiuStatus *st, uint32_t mask)
{
    st->irq_status &= ~mask;
    niu_irq_update_intx(st);
}

/* The causes IRQ_STATUS and IRQ_ENABLE have bits for. */
#define NIU_IRQ_CAUSES \
    (R_NIU_IRQ_RX_MASK | R_NIU_IRQ_TX_MASK | R_NIU_IRQ_ERROR_MASK)

void niu_irq_set_enable(NiuStatus *st, uint32_t value)
{
    st->irq_enable = value & NIU_IRQ_CAUSES;
}

void niu_irq_arm(NiuStatus *st, uint32_t mask)
{
    st->irq_enable |= mask;
}

void niu_error_ack(NiuStatus *st, uint32_t mask)
{
    st->error_cause &= ~mask;
}

static G_GNUC_PRINTF(3, 0)
void niu_log_error(NiuStatus *st, enum arctic_error cause,
                   const char *fmt, va_list ap)
{
    g_autofree char *what = NULL;

    switch (niu_error_blame[cause]) {
    case NIU_BLAME_GUEST:
        if (!qemu_loglevel_mask(LOG_GUEST_ERROR)) {
            return;
        }
        what = g_strdup_vprintf(fmt, ap);
        qemu_log("arctic-niu: node %u: %s\n", st->node_id, what);
        break;
    case NIU_BLAME_NETWORK:
        if (st->error_warned & (1u << cause)) {
            return;
        }
        st->error_warned |= 1u << cause;
        /* fall through */
    case NIU_BLAME_PEER:
        what = g_strdup_vprintf(fmt, ap);
        warn_report("arctic-niu: node %u: %s", st->node_id, what);
        break;
    }
}

/*
 * Every error the NIU finds comes here: the error registers and the
 * ERROR interrupt (seed 002 §4.1.4), the trace event, and the log line
 * @fmt, in the class niu_error_blame gives the cause.
 */
void niu_verror(NiuStatus *st, enum arctic_error cause,
                unsigned ep, unsigned queue, uint32_t detail,
                const char *fmt, va_list ap)
{
    bool new_cause = !(st->error_cause & (1u << cause));
    uint32_t info;

    niu_log_error(st, cause, fmt, ap);

    st->error_cause |= 1u << cause;
    info = FIELD_DP32(0, NIU_ERROR_INFO, CAUSE, cause);
    info = FIELD_DP32(info, NIU_ERROR_INFO, ENDPOINT, ep);
    info = FIELD_DP32(info, NIU_ERROR_INFO, QUEUE, queue);
    st->error_info = FIELD_DP32(info, NIU_ERROR_INFO, DETAIL, detail);
    trace_arctic_niu_error(st->node_id, arctic_error_name(cause), ep, queue,
                           detail);
    if (new_cause) {
        niu_irq_event(st, R_NIU_IRQ_ERROR_MASK);
    }
}

void niu_error(NiuStatus *st, enum arctic_error cause,
               unsigned ep, unsigned queue, uint32_t detail,
               const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    niu_verror(st, cause, ep, queue, detail, fmt, ap);
    va_end(ap);
}

void niu_count(NiuStatus *st, enum arctic_counter c)
{
    st->counters[c]++;
}

void niu_count_n(NiuStatus *st, enum arctic_counter c, uint32_t n)
{
    st->counters[c] += n;
}

void niu_status_link_up(NiuStatus *st)
{
    niu_count(st, ARCTIC_CNT_LINK_UPS);
    st->error_warned = 0;
}

void niu_status_reset(NiuStatus *st)
{
    st->error_cause = 0;
    st->error_info = 0;
    st->irq_status = 0;
    st->irq_enable = 0;
    st->irq_fired = 0;
    qemu_bh_cancel(st->irq_bh);
    timer_del(st->irq_timer);
    niu_irq_update_intx(st);
    memset(st->counters, 0, sizeof(st->counters));
}

/*
 * Interrupts fired before the state was saved and not yet signalled are
 * signalled once the device accepted the load: by their timer in timed
 * mode (it migrates with its deadline), else by irq_bh.
 */
void niu_status_restored(NiuStatus *st)
{
    if (st->irq_fired && !timer_pending(st->irq_timer)) {
        qemu_bh_schedule(st->irq_bh);
    }
    niu_irq_update_intx(st);
}

/* What a loaded state holds that no register write or event could. */
const char *niu_status_loaded_fault(const NiuStatus *st)
{
    if ((st->irq_status | st->irq_enable | st->irq_fired) & ~NIU_IRQ_CAUSES) {
        return "an interrupt cause this device does not have";
    }
    return NULL;
}

const VMStateDescription vmstate_niu_status = {
    .name = "arctic-niu/status",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(irq_status, NiuStatus),
        VMSTATE_UINT32(irq_enable, NiuStatus),
        VMSTATE_UINT32(error_cause, NiuStatus),
        VMSTATE_UINT32(error_info, NiuStatus),
        VMSTATE_UINT32_ARRAY(counters, NiuStatus, ARCTIC_NUM_COUNTERS),
        VMSTATE_UINT32(irq_fired, NiuStatus),
        VMSTATE_UINT32(error_warned, NiuStatus),
        VMSTATE_TIMER_PTR(irq_timer, NiuStatus),
        VMSTATE_END_OF_LIST()
    },
};

void niu_status_init(NiuStatus *st, PCIDevice *pdev, QemuRecMutex *lock,
                     NiuLink *link, uint16_t node_id, bool timed,
                     uint32_t timed_irq_ns, void (*raised)(void *opaque),
                     void *opaque)
{
    st->pdev = pdev;
    st->lock = lock;
    st->link = link;
    st->node_id = node_id;
    st->timed = timed;
    st->timed_irq_ns = timed_irq_ns;
    st->raised = raised;
    st->opaque = opaque;
    st->irq_bh = qemu_bh_new_guarded(niu_irq_bh, st,
                                     &DEVICE(pdev)->mem_reentrancy_guard);
    st->irq_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, niu_irq_bh, st);
}

void niu_status_cleanup(NiuStatus *st)
{
    qemu_bh_delete(st->irq_bh);
    timer_free(st->irq_timer);
    st->irq_bh = NULL;
    st->irq_timer = NULL;
}
