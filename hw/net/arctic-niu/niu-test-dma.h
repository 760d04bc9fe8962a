/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU: the test DMA engine (docs/programming-guide.md), the
 * driver's self-test of the NIU's bus-master path, rocker style: fills
 * guest memory with arctic_test_pattern() or checks it against it.
 *
 * Its registers and the work they start are its own; it reaches guest
 * memory through niu-dma.c and reports a refused command or a failed
 * transfer through niu-status.c, and knows nothing else of the device.
 * Its owner runs the work (niu_test_dma_run()) from the bottom half or
 * the timer it gives at init, under the device lock, and holds it back
 * while the device is frozen (niu_test_dma_resume() then).
 */
#ifndef HW_NET_ARCTIC_NIU_TEST_DMA_H
#define HW_NET_ARCTIC_NIU_TEST_DMA_H

#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "exec/hwaddr.h"

#include "niu-dma.h"
#include "niu-status.h"

typedef struct NiuTestDma {
    /* settings, copied at init (niu_test_dma_init()) */
    uint16_t node_id;           /* for the trace event */
    bool timed;                 /* done on the virtual clock, at PCI speed */
    uint32_t pci_ps_per_byte;   /* timed mode's PCI speed */
    NiuDma *dma;                /* how it reaches guest memory */
    NiuStatus *errors;          /* where it reports */

    /* registers: NIU_TEST_DMA_ADDR_LO/HI, _SIZE, _SEED, _CTRL, _STATUS */
    uint64_t addr;
    uint32_t size;
    uint32_t seed;
    uint32_t cmd;
    uint32_t status;

    QEMUBH *bh;                 /* runs the command */
    QEMUTimer *timer;           /* timed mode: the same on the virtual clock */
} NiuTestDma;

void niu_test_dma_init(NiuTestDma *t, NiuDma *dma, NiuStatus *errors,
                       uint16_t node_id, bool timed, uint32_t pci_ps_per_byte,
                       QEMUBHFunc *run, void *opaque,
                       MemReentrancyGuard *guard);
void niu_test_dma_cleanup(NiuTestDma *t);
void niu_test_dma_reset(NiuTestDma *t);
uint32_t niu_test_dma_read(NiuTestDma *t, hwaddr addr);
void niu_test_dma_write(NiuTestDma *t, hwaddr addr, uint32_t val);
void niu_test_dma_run(NiuTestDma *t);
void niu_test_dma_resume(NiuTestDma *t);
bool niu_test_dma_used(const NiuTestDma *t);

/* Its registers and timer, the body of the subsection arctic-niu/test-dma */
extern const VMStateDescription vmstate_niu_test_dma_regs;

#endif /* HW_NET_ARCTIC_NIU_TEST_DMA_H */
