/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU: the test DMA engine (niu-test-dma.h).
 *
 * The MMIO write only checks and schedules; the DMA runs in a bottom half
 * (as hw/misc/edu.c does), or in timed mode when the bytes crossed PCI,
 * and STATUS.DONE says when it is over.
 */

#include "qemu/osdep.h"
#include "qemu/bitops.h"
#include "qemu/bswap.h"
#include "hw/registerfields.h"
#include "migration/vmstate.h"
#include "arctic/niu-hw.h"
#include "arctic/timing.h"
#include "trace.h"

#include "niu-test-dma.h"

void niu_test_dma_init(NiuTestDma *t, NiuDma *dma, NiuStatus *errors,
                       uint16_t node_id, bool timed, uint32_t pci_ps_per_byte,
                       QEMUBHFunc *run, void *opaque,
                       MemReentrancyGuard *guard)
{
    t->dma = dma;
    t->errors = errors;
    t->node_id = node_id;
    t->timed = timed;
    t->pci_ps_per_byte = pci_ps_per_byte;
    t->bh = qemu_bh_new_guarded(run, opaque, guard);
    t->timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, run, opaque);
}

/* Also when init never ran (the device's realize failed before it). */
void niu_test_dma_cleanup(NiuTestDma *t)
{
    if (t->bh) {
        qemu_bh_delete(t->bh);
        t->bh = NULL;
    }
    if (t->timer) {
        timer_free(t->timer);
        t->timer = NULL;
    }
}

/* The registers back to their power-on values, no command pending. */
void niu_test_dma_reset(NiuTestDma *t)
{
    t->addr = 0;
    t->size = t->seed = 0;
    t->cmd = t->status = 0;
    if (t->bh) {
        qemu_bh_cancel(t->bh);
    }
    if (t->timer) {
        timer_del(t->timer);
    }
}

/* Whether the guest used it since reset (the subsection is needed). */
bool niu_test_dma_used(const NiuTestDma *t)
{
    return t->addr || t->size || t->seed || t->cmd || t->status;
}

uint32_t niu_test_dma_read(NiuTestDma *t, hwaddr addr)
{
    switch (addr) {
    case A_NIU_TEST_DMA_ADDR_LO:
        return (uint32_t)t->addr;
    case A_NIU_TEST_DMA_ADDR_HI:
        return t->addr >> 32;
    case A_NIU_TEST_DMA_SIZE:
        return t->size;
    case A_NIU_TEST_DMA_SEED:
        return t->seed;
    case A_NIU_TEST_DMA_CTRL:
        return t->cmd;
    case A_NIU_TEST_DMA_STATUS:
        return t->status;
    default:
        g_assert_not_reached();
    }
}

/*
 * A size the engine takes, over addresses that do not wrap past 2^64
 * (a wrapping transfer would go on at address 0).
 */
static bool test_dma_args_valid(const NiuTestDma *t)
{
    uint32_t size = t->size;

    return size != 0 && size % 4 == 0 && size <= ARCTIC_TEST_DMA_MAX_SIZE &&
           t->addr <= UINT64_MAX - (size - 1);
}

static void test_dma_start(NiuTestDma *t, uint32_t cmd)
{
    if ((cmd != ARCTIC_TEST_DMA_FILL && cmd != ARCTIC_TEST_DMA_CHECK) ||
        !test_dma_args_valid(t)) {
        niu_error(t->errors, ARCTIC_ERR_BAD_VALUE, 0, 0, A_NIU_TEST_DMA_CTRL,
                  "test DMA command %u at 0x%" PRIx64 " with size %u "
                  "refused", cmd, t->addr, t->size);
        t->status = FIELD_DP32(R_NIU_TEST_DMA_STATUS_DONE_MASK,
                               NIU_TEST_DMA_STATUS, BAD_ARGS, 1);
        return;
    }
    t->cmd = cmd;
    t->status = 0;
    if (t->timed) {
        /* Timed: done when the bytes crossed PCI (arctic/timing.h). */
        timer_mod(t->timer, qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) +
                  arctic_time_serialise(t->size, t->pci_ps_per_byte));
        return;
    }
    qemu_bh_schedule(t->bh);
}

/* A write of one of its registers (STATUS is read-only). */
void niu_test_dma_write(NiuTestDma *t, hwaddr addr, uint32_t val)
{
    switch (addr) {
    case A_NIU_TEST_DMA_ADDR_LO:
        t->addr = deposit64(t->addr, 0, 32, val);
        break;
    case A_NIU_TEST_DMA_ADDR_HI:
        t->addr = deposit64(t->addr, 32, 32, val);
        break;
    case A_NIU_TEST_DMA_SIZE:
        t->size = val;
        break;
    case A_NIU_TEST_DMA_SEED:
        t->seed = val;
        break;
    case A_NIU_TEST_DMA_CTRL:
        test_dma_start(t, FIELD_EX32(val, NIU_TEST_DMA_CTRL, CMD));
        break;
    default:
        g_assert_not_reached();
    }
}

/* The command's transfer; the owner calls it under the device lock. */
void niu_test_dma_run(NiuTestDma *t)
{
    uint32_t size = t->size, cmd = t->cmd;
    g_autofree uint32_t *buf = NULL;
    MemTxResult res;
    uint32_t i, status = 0;

    if (!test_dma_args_valid(t)) {
        /* The size or address changed under a running command. */
        t->status = FIELD_DP32(R_NIU_TEST_DMA_STATUS_DONE_MASK,
                               NIU_TEST_DMA_STATUS, BAD_ARGS, 1);
        return;
    }
    buf = g_malloc(size);
    if (cmd == ARCTIC_TEST_DMA_FILL) {
        for (i = 0; i < size / 4; i++) {
            buf[i] = cpu_to_le32(arctic_test_pattern(t->seed, i));
        }
        res = niu_dma_write(t->dma, t->addr, buf, size);
    } else {
        res = niu_dma_read(t->dma, t->addr, buf, size);
        for (i = 0; res == MEMTX_OK && i < size / 4; i++) {
            if (le32_to_cpu(buf[i]) != arctic_test_pattern(t->seed, i)) {
                status = FIELD_DP32(status, NIU_TEST_DMA_STATUS, MISMATCH, 1);
                break;
            }
        }
    }
    if (res != MEMTX_OK) {
        niu_error(t->errors, ARCTIC_ERR_DMA, 0, 0, A_NIU_TEST_DMA_CTRL,
                  "test DMA at 0x%" PRIx64 " of %u bytes failed",
                  t->addr, size);
        status = FIELD_DP32(status, NIU_TEST_DMA_STATUS, DMA_ERROR, 1);
    }
    t->status = FIELD_DP32(status, NIU_TEST_DMA_STATUS, DONE, 1);
    trace_arctic_niu_test_dma(t->node_id, cmd, t->addr, size, t->status);
}

/* A command the device's freeze held back runs now. */
void niu_test_dma_resume(NiuTestDma *t)
{
    if (!t->cmd || FIELD_EX32(t->status, NIU_TEST_DMA_STATUS, DONE)) {
        return;
    }
    if (!t->timed) {
        qemu_bh_schedule(t->bh);
    } else if (!timer_pending(t->timer)) {
        timer_mod(t->timer, qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL));
    }
}

/*
 * The same fields, in the same order and sizes, as when they were flat.
 * Its name must not begin the name of a later subsection (niu-time.c).
 */
const VMStateDescription vmstate_niu_test_dma_regs = {
    .name = "arctic-niu/test-dma-regs",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64(addr, NiuTestDma),
        VMSTATE_UINT32(size, NiuTestDma),
        VMSTATE_UINT32(seed, NiuTestDma),
        VMSTATE_UINT32(cmd, NiuTestDma),
        VMSTATE_UINT32(status, NiuTestDma),
        VMSTATE_TIMER_PTR(timer, NiuTestDma),
        VMSTATE_END_OF_LIST()
    },
};
