/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU: the MIT StarT network interface unit of CSG Memo 389 (Hoe,
 * 1996) as a PCI device.  This file is the QEMU glue: type and properties,
 * the privileged register file of seed 002 §4 plus identity, status, test
 * and per-endpoint registers (control BAR), the user pages with the
 * doorbells (user BAR), interrupts, the test DMA engine, the "state"
 * view, and reset.  The queue engine is in niu-tx.c, niu-rx.c and
 * niu-raw.c (dMPI raw mode), the end-to-end protocol in niu-e2e.c, the
 * link to arctic-switch in niu-link*.c (arctic-niu.h has the map).
 * docs/programming-guide.md describes the device for driver authors.
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "qemu/module.h"
#include "qapi/error.h"
#include "hw/qdev-properties.h"
#include "hw/qdev-properties-system.h"
#include "hw/pci/msix.h"
#include "migration/misc.h"
#include "migration/qemu-file-types.h"
#include "migration/vmstate.h"
#include "qemu/error-report.h"
#include "qapi/visitor.h"
#include "qemu/lockable.h"
#include "qemu/main-loop.h"
#include "system/dma.h"
#include "system/runstate.h"
#include "crypto/secret_common.h"
#include "trace.h"

#include "arctic-niu.h"

/*
 * ------------------------------------------------------------------------
 * Control BAR
 */

static bool niu_tx_off(ArcticNiuState *s)
{
    return !s->q.tx_enabled && !niu_tx_draining(&s->q);
}

/* The endpoint a control register belongs to, for ERROR_INFO. */
static unsigned niu_reg_endpoint(hwaddr addr)
{
    if (addr >= ARCTIC_EP_BLOCK_BASE &&
        addr < ARCTIC_EP_OFFSET(ARCTIC_ENDPOINTS, 0)) {
        return (addr - ARCTIC_EP_BLOCK_BASE) / ARCTIC_EP_BLOCK_STRIDE;
    }
    return 0;
}

/* A write that needs its datapath OFF: refuse it otherwise. */
static bool niu_check_off(ArcticNiuState *s, bool off, hwaddr addr)
{
    if (!off) {
        niu_error(&s->status, ARCTIC_ERR_BUSY, niu_reg_endpoint(addr), 0,
                  addr, "write to 0x%" HWADDR_PRIx
                  " while its datapath is on", addr);
        return false;
    }
    return true;
}

static uint32_t niu_ctrl_read_value(ArcticNiuState *s, bool enabled,
                                    bool draining)
{
    return FIELD_DP32(0, NIU_CTRL, ENABLE, enabled || draining);
}

/* Replace the low or high half of a 64-bit register. */
static uint64_t deposit_half(uint64_t old, bool high, uint32_t value)
{
    return high ? deposit64(old, 32, 32, value) : deposit64(old, 0, 32, value);
}

static uint64_t niu_ep_read(ArcticNiuState *s, unsigned epn, hwaddr reg,
                            bool *ok)
{
    ArcticEndpoint *ep = &s->q.ep[epn];

    switch (reg) {
    case A_EP_TX_QBASE_LO:      return (uint32_t)ep->tx_qbase;
    case A_EP_TX_QBASE_HI:      return ep->tx_qbase >> 32;
    case A_EP_RX_QBASE_LO:      return (uint32_t)ep->rx_qbase;
    case A_EP_RX_QBASE_HI:      return ep->rx_qbase >> 32;
    case A_EP_HI_TX_TL:         return ep->tx_tail[ARCTIC_TXQ_HI];
    case A_EP_LO_TX_TL:         return ep->tx_tail[ARCTIC_TXQ_LO];
    case A_EP_DMA_TX_TL:        return ep->tx_tail[ARCTIC_TXQ_DMA];
    case A_EP_HI_RX_HD:         return ep->rx_head[ARCTIC_RXQ_HI];
    case A_EP_LO_RX_HD:         return ep->rx_head[ARCTIC_RXQ_LO];
    case A_EP_DMA_BASE_PHY_LO:  return (uint32_t)ep->dma.base_phy;
    case A_EP_DMA_BASE_PHY_HI:  return ep->dma.base_phy >> 32;
    case A_EP_DMA_BASE_VIR_LO:  return (uint32_t)ep->dma.base_vir;
    case A_EP_DMA_BASE_VIR_HI:  return ep->dma.base_vir >> 32;
    case A_EP_DMA_RANGE_MASK_LO: return (uint32_t)ep->dma.range_mask;
    case A_EP_DMA_RANGE_MASK_HI: return ep->dma.range_mask >> 32;
    case A_EP_JOB:              return ep->job;
    default:
        *ok = false;
        return 0;
    }
}

/* A queue base: the value as a whole must keep the region alignment. */
static void niu_write_qbase(ArcticNiuState *s, unsigned epn, hwaddr addr,
                            uint64_t *base, bool high, uint32_t value,
                            uint64_t align)
{
    uint64_t next = deposit_half(*base, high, value);

    if (next & (align - 1)) {
        niu_error(&s->status, ARCTIC_ERR_BAD_ALIGN, epn, 0, addr,
                  "queue base 0x%" PRIx64 " of endpoint %u is not %"
                  PRIu64 "-byte aligned", next, epn, align);
        return;
    }
    *base = next;
}

/*
 * A queue index below @limit: N for a Tx tail, 2N for an Rx head, whose
 * LAP bit sits just above INDEX (niu-hw.h, EP_RX_HD).
 */
static void niu_write_index(ArcticNiuState *s, unsigned epn,
                            uint32_t *index, uint32_t value, uint32_t limit)
{
    if (value >= limit) {
        niu_error(&s->status, ARCTIC_ERR_BAD_INDEX, epn, 0, value,
                  "queue index 0x%x of endpoint %u is not below 0x%x",
                  value, epn, limit);
        return;
    }
    *index = value;
}

/*
 * DMA window registers (seed 002 §4.3): bases 4 MiB aligned, the mask a
 * power of two minus one, at least 4 MiB - 1, or 0 for no window.  Each
 * half is checked as part of the whole 64-bit value it makes.
 */
/* A DMA window's base or (@is_mask) range mask as its register takes it. */
static bool niu_dma_reg_aligned(uint64_t value, bool is_mask)
{
    if (is_mask) {
        uint64_t size = value + 1;  /* 0 for a window of all 2^64 bytes */

        /* 0, the reset value, withdraws the window. */
        return value == 0 || (value >= ARCTIC_DMA_WINDOW_ALIGN - 1 &&
                              (size == 0 || (size & (size - 1)) == 0));
    }
    return !(value & (ARCTIC_DMA_WINDOW_ALIGN - 1));
}

/* The window's memory would wrap past 2^64 to address 0. */
static bool niu_dma_window_wraps(uint64_t phy, uint64_t mask)
{
    return mask && phy > UINT64_MAX - mask;
}

static void niu_write_dma_reg(ArcticNiuState *s, unsigned epn, hwaddr addr,
                              uint64_t *reg, bool high, uint32_t value,
                              bool is_mask)
{
    uint64_t next = deposit_half(*reg, high, value);
    ArcticEndpoint *ep = &s->q.ep[epn];
    uint64_t phy = reg == &ep->dma.base_phy ? next : ep->dma.base_phy;
    uint64_t mask = is_mask ? next : ep->dma.range_mask;

    if (!niu_dma_reg_aligned(next, is_mask)) {
        niu_error(&s->status, ARCTIC_ERR_BAD_ALIGN, epn, 0, addr,
                  "DMA window register 0x%" HWADDR_PRIx " value 0x%"
                  PRIx64 " refused", addr, next);
        return;
    }
    if (niu_dma_window_wraps(phy, mask)) {
        niu_error(&s->status, ARCTIC_ERR_BAD_VALUE, epn, 0, addr,
                  "DMA window at 0x%" PRIx64 " with mask 0x%" PRIx64
                  " wraps; register 0x%" HWADDR_PRIx " refused",
                  phy, mask, addr);
        return;
    }
    *reg = next;
}

static void niu_ep_write(ArcticNiuState *s, unsigned epn, hwaddr addr,
                         hwaddr reg, uint32_t value, bool *ok)
{
    ArcticEndpoint *ep = &s->q.ep[epn];
    bool tx_off = niu_tx_off(s);
    bool rx_off = !s->q.rx_enabled;

    switch (reg) {
    case A_EP_TX_QBASE_LO:
    case A_EP_TX_QBASE_HI:
        if (niu_check_off(s, tx_off, addr)) {
            niu_write_qbase(s, epn, addr, &ep->tx_qbase,
                            reg == A_EP_TX_QBASE_HI, value,
                            ARCTIC_TX_REGION_ALIGN);
            /* Another process's queues: no DMA request is half sent. */
            memset(ep->dma_progress, 0, sizeof(ep->dma_progress));
        }
        break;
    case A_EP_RX_QBASE_LO:
    case A_EP_RX_QBASE_HI:
        if (niu_check_off(s, rx_off, addr)) {
            niu_write_qbase(s, epn, addr, &ep->rx_qbase,
                            reg == A_EP_RX_QBASE_HI, value,
                            ARCTIC_RX_REGION_ALIGN);
        }
        break;
    case A_EP_HI_TX_TL:
    case A_EP_LO_TX_TL:
    case A_EP_DMA_TX_TL:
        if (niu_check_off(s, tx_off, addr)) {
            niu_write_index(s, epn,
                            &ep->tx_tail[(reg - A_EP_HI_TX_TL) / 4], value,
                            ARCTIC_N);
            /* A new tail starts its DMA request (if any) from the top. */
            if (reg != A_EP_LO_TX_TL) {
                ep->dma_progress[reg == A_EP_HI_TX_TL ? 0 : 1] = 0;
            }
        }
        break;
    case A_EP_HI_RX_HD:
    case A_EP_LO_RX_HD:
        if (niu_check_off(s, rx_off, addr)) {
            niu_write_index(s, epn,
                            &ep->rx_head[(reg - A_EP_HI_RX_HD) / 4], value,
                            2 * ARCTIC_N);
        }
        break;
    case A_EP_DMA_BASE_PHY_LO:
    case A_EP_DMA_BASE_PHY_HI:
        if (niu_check_off(s, tx_off && rx_off, addr)) {
            niu_write_dma_reg(s, epn, addr, &ep->dma.base_phy,
                              reg == A_EP_DMA_BASE_PHY_HI, value, false);
        }
        break;
    case A_EP_DMA_BASE_VIR_LO:
    case A_EP_DMA_BASE_VIR_HI:
        if (niu_check_off(s, tx_off && rx_off, addr)) {
            niu_write_dma_reg(s, epn, addr, &ep->dma.base_vir,
                              reg == A_EP_DMA_BASE_VIR_HI, value, false);
        }
        break;
    case A_EP_DMA_RANGE_MASK_LO:
    case A_EP_DMA_RANGE_MASK_HI:
        if (niu_check_off(s, tx_off && rx_off, addr)) {
            niu_write_dma_reg(s, epn, addr, &ep->dma.range_mask,
                              reg == A_EP_DMA_RANGE_MASK_HI, value, true);
        }
        break;
    case A_EP_JOB:
        if (value & ~R_EP_JOB_TAG_MASK) {
            niu_error(&s->status, ARCTIC_ERR_BAD_VALUE, epn, 0, addr,
                      "EP_JOB 0x%x of endpoint %u has bits outside "
                      "its tag", value, epn);
        } else if (niu_check_off(s, tx_off && rx_off, addr)) {
            ep->job = value;
        }
        break;
    default:
        *ok = false;
        break;
    }
}

static uint32_t niu_link_status_read(ArcticNiuState *s)
{
    uint32_t val;

    val = FIELD_DP32(0, NIU_LINK_STATUS, UP, s->link.state == NIU_LINK_UP);
    val = FIELD_DP32(val, NIU_LINK_STATUS, CONNECTED,
                     s->link.state != NIU_LINK_DOWN);
    val = FIELD_DP32(val, NIU_LINK_STATUS, REJECTED, s->link.rejected);
    return FIELD_DP32(val, NIU_LINK_STATUS, UP_COUNT, s->link.up_count);
}

/*
 * The register arrays: counters, the route table and the endpoints'
 * blocks.  *@ok false for an address in none of them.
 */
static uint64_t niu_array_read(ArcticNiuState *s, hwaddr addr, bool *ok)
{
    if (addr >= A_NIU_COUNTER_BASE &&
        addr < ARCTIC_COUNTER_OFFSET(ARCTIC_NUM_COUNTERS)) {
        return s->status.counters[(addr - A_NIU_COUNTER_BASE) / 4];
    }
    if (addr >= A_NIU_ROUTE_TABLE &&
        addr < A_NIU_ROUTE_TABLE + ARCTIC_ROUTE_TABLE_SIZE) {
        unsigned i = (addr - A_NIU_ROUTE_TABLE) / 4;

        return s->q.route_table[i / ARCTIC_S][i % ARCTIC_S];
    }
    if (addr >= ARCTIC_EP_BLOCK_BASE &&
        addr < ARCTIC_EP_OFFSET(ARCTIC_ENDPOINTS, 0)) {
        unsigned epn = (addr - ARCTIC_EP_BLOCK_BASE) / ARCTIC_EP_BLOCK_STRIDE;

        return niu_ep_read(s, epn,
                           (addr - ARCTIC_EP_BLOCK_BASE) %
                           ARCTIC_EP_BLOCK_STRIDE, ok);
    }
    *ok = false;
    return 0;
}

/*
 * The registers that say what this NIU is and where it sits: true if
 * @addr is one of them, its value in *@val.
 */
static bool niu_identity_read(ArcticNiuState *s, hwaddr addr, uint64_t *val)
{
    switch (addr) {
    case A_NIU_ID:
        *val = ARCTIC_NIU_ID_VALUE;
        return true;
    case A_NIU_VERSION:
        *val = FIELD_DP32(0, NIU_VERSION, MAJOR, ARCTIC_NIU_VERSION_MAJOR);
        *val = FIELD_DP32(*val, NIU_VERSION, MINOR,
                          ARCTIC_NIU_VERSION_MINOR);
        return true;
    case A_NIU_CAPS:
        *val = FIELD_DP32(0, NIU_CAPS, ENDPOINTS, ARCTIC_ENDPOINTS);
        *val = FIELD_DP32(*val, NIU_CAPS, LOG2_N, ARCTIC_LOG2_N);
        *val = FIELD_DP32(*val, NIU_CAPS, LINES, s->e2e.cfg.lines);
        *val = FIELD_DP32(*val, NIU_CAPS, HI_LINES,
                          ARCTIC_HI_RESERVED_LINES);
        return true;
    case A_NIU_NODE_ID:
        *val = s->node_id;
        return true;
    case A_NIU_NUM_NODES:
        *val = s->link.num_nodes;
        return true;
    case A_NIU_NET_LEVELS:
        *val = s->link.levels;
        return true;
    case A_NIU_LINK_STATUS:
        *val = niu_link_status_read(s);
        return true;
    }
    return false;
}

/*
 * The registers of the engines, the status and the arrays; *@ok false if
 * @addr is none of them.
 */
static uint64_t niu_engine_read(ArcticNiuState *s, hwaddr addr, bool *ok)
{
    uint64_t val = 0;

    switch (addr) {
    case A_NIU_ERROR_CAUSE:
        val = s->status.error_cause;
        break;
    case A_NIU_ERROR_INFO:
        val = s->status.error_info;
        break;
    case A_NIU_SCRATCH:
        val = s->scratch;
        break;
    case A_NIU_TIME_STATUS:
        val = niu_time_status(&s->time);
        break;
    case A_NIU_TIME_CTRL:
        val = 0;
        break;
    case A_NIU_TIME_NOW_LO:
    case A_NIU_TIME_NOW_HI:
        val = niu_time_read_now(&s->time, addr == A_NIU_TIME_NOW_HI);
        break;
    case A_NIU_TEST_DMA_ADDR_LO:
    case A_NIU_TEST_DMA_ADDR_HI:
    case A_NIU_TEST_DMA_SIZE:
    case A_NIU_TEST_DMA_SEED:
    case A_NIU_TEST_DMA_CTRL:
    case A_NIU_TEST_DMA_STATUS:
        val = niu_test_dma_read(&s->test_dma, addr);
        break;
    case A_NIU_TX_CTRL:
        val = niu_ctrl_read_value(s, s->q.tx_enabled, niu_tx_draining(&s->q));
        break;
    case A_NIU_RX_CTRL:
        val = niu_ctrl_read_value(s, s->q.rx_enabled, false);
        val = FIELD_DP32(val, NIU_CTRL, RAW, s->q.rx_raw);
        break;
    case A_NIU_TX_PENDING:
        val = niu_e2e_pending(&s->e2e);
        break;
    case A_NIU_VMASK:
        val = s->q.vmask;
        break;
    case A_NIU_DOORBELL_ALL:
        val = 0;
        break;
    case A_NIU_TX_POLLED:
        val = s->q.tx_polled;
        break;
    case A_NIU_TEMPLATE_PAUSE:
        val = 0;
        break;
    case A_NIU_IRQ_STATUS:
        val = s->status.irq_status;
        break;
    case A_NIU_IRQ_ENABLE:
        val = s->status.irq_enable;
        break;
    default:
        val = niu_array_read(s, addr, ok);
        break;
    }
    return val;
}

/*
 * A template's guest touched a register: it may have read the identity it
 * has not got, or started something, so it is no longer one to clone
 * (docs/snapshots.md §6).  Called with the device lock held.
 */
static void niu_template_touch(ArcticNiuState *s, hwaddr addr)
{
    if (s->template && !s->template_used) {
        s->template_used = true;
        trace_arctic_niu_template_used(addr);
    }
}

static uint64_t niu_control_read(void *opaque, hwaddr addr, unsigned size)
{
    ArcticNiuState *s = opaque;
    QEMU_LOCK_GUARD(&s->lock);
    uint64_t val = 0;
    bool ok = true;

    niu_template_touch(s, addr);
    if (!niu_identity_read(s, addr, &val)) {
        val = niu_engine_read(s, addr, &ok);
    }
    if (!ok) {
        niu_error(&s->status, ARCTIC_ERR_BAD_REGISTER, 0, 0, addr,
                  "read of unassigned control register 0x%"
                  HWADDR_PRIx, addr);
    }
    trace_arctic_niu_control_read(s->node_id, addr, val);
    return val;
}


static void niu_ctrl_write(ArcticNiuState *s, bool tx, uint32_t value)
{
    bool enable = FIELD_EX32(value, NIU_CTRL, ENABLE);
    uint32_t valid = R_NIU_CTRL_ENABLE_MASK | R_NIU_CTRL_RESET_MASK |
                     (tx ? 0 : R_NIU_CTRL_RAW_MASK);

    if (value & ~valid) {
        niu_error(&s->status, ARCTIC_ERR_BAD_VALUE, 0, 0,
                  tx ? A_NIU_TX_CTRL : A_NIU_RX_CTRL,
                  "reserved bits set in %s 0x%x",
                  tx ? "TxCtrl" : "RxCtrl", value);
        return;
    }
    if (FIELD_EX32(value, NIU_CTRL, RESET)) {
        /*
         * Seed 002 §4.1.1: a complete low-level reset, restarting
         * disabled; the ENABLE bit of the same write is ignored.
         */
        trace_arctic_niu_ctrl_reset(s->node_id, tx);
        niu_full_reset(s);
        return;
    }
    if (tx) {
        if (s->q.tx_enabled != enable) {
            s->q.tx_enabled = enable;
            trace_arctic_niu_tx_ctrl(s->node_id, enable);
            niu_tx_enable_changed(&s->q);
        }
    } else {
        if (s->q.rx_enabled != enable) {
            s->q.rx_enabled = enable;
            trace_arctic_niu_rx_ctrl(s->node_id, enable);
        }
        s->q.rx_raw = FIELD_EX32(value, NIU_CTRL, RAW);
    }
}

/* A control register the guest may only read: writing it is an error. */
static bool niu_control_read_only(hwaddr addr)
{
    switch (addr) {
    case A_NIU_ID:
    case A_NIU_VERSION:
    case A_NIU_CAPS:
    case A_NIU_NODE_ID:
    case A_NIU_NUM_NODES:
    case A_NIU_NET_LEVELS:
    case A_NIU_LINK_STATUS:
    case A_NIU_ERROR_INFO:
    case A_NIU_TEST_DMA_STATUS:
    case A_NIU_TX_PENDING:
    case A_NIU_TIME_STATUS:
    case A_NIU_TIME_NOW_LO:
    case A_NIU_TIME_NOW_HI:
        return true;
    default:
        return addr >= A_NIU_COUNTER_BASE &&
               addr < ARCTIC_COUNTER_OFFSET(ARCTIC_NUM_COUNTERS);
    }
}

/*
 * The guest stops its machine for a launcher to save it.  Stopped from the
 * vCPU's own thread, the machine stops right after the write (vm_stop()
 * ends the vCPU's run there), so that a timed node is saved at an instant
 * of its virtual time, the same in every run of one image, not at
 * whatever instant the launcher got round to it.  Under icount the clock
 * must not warp between this and the main loop's stop:
 * scripts/qemu-patches/0006.
 */
static void niu_pause_machine(void)
{
    vm_stop(RUN_STATE_PAUSED);
}

/*
 * TIME_CTRL: START starts the cluster's clock (timed mode); PAUSE, before
 * it, stops the machine on an NIU made with start-pause=on, for a save of
 * the cluster at its start barrier.
 */
static void niu_time_ctrl_write(ArcticNiuState *s, uint32_t val)
{
    const uint32_t both = R_NIU_TIME_CTRL_START_MASK |
                          R_NIU_TIME_CTRL_PAUSE_MASK;

    if (val & ~both) {
        niu_error(&s->status, ARCTIC_ERR_BAD_VALUE, 0, 0, A_NIU_TIME_CTRL,
                  "reserved bits set in TIME_CTRL 0x%x", val);
    } else if ((val & both) == both) {
        niu_error(&s->status, ARCTIC_ERR_BAD_VALUE, 0, 0, A_NIU_TIME_CTRL,
                  "TIME_CTRL.PAUSE and START at once (PAUSE goes first)");
    } else if (FIELD_EX32(val, NIU_TIME_CTRL, START)) {
        niu_time_start(&s->time);
    } else if (FIELD_EX32(val, NIU_TIME_CTRL, PAUSE) &&
               niu_time_may_pause(&s->time) && s->start_pause) {
        trace_arctic_niu_start_pause(s->node_id);
        niu_pause_machine();
    }
}

/* VMASK: written only while both datapaths are off. */
static void niu_vmask_write(ArcticNiuState *s, uint32_t val)
{
    if (!niu_check_off(s, niu_tx_off(s) && !s->q.rx_enabled, A_NIU_VMASK)) {
        return;
    }
    if (val & ~R_NIU_VMASK_MASK_MASK) {
        niu_error(&s->status, ARCTIC_ERR_BAD_VALUE, 0, 0, A_NIU_VMASK,
                  "VMASK 0x%x has bits outside its mask", val);
    } else {
        qatomic_set(&s->q.vmask, val);
    }
}

/* TEMPLATE_PAUSE: the template's guest is where its clones start. */
static void niu_template_pause(ArcticNiuState *s)
{
    if (!s->template) {
        niu_error(&s->status, ARCTIC_ERR_BAD_VALUE, 0, 0,
                  A_NIU_TEMPLATE_PAUSE,
                  "TEMPLATE_PAUSE written on an NIU without template=on");
        return;
    }
    trace_arctic_niu_template_pause(s->node_id);
    niu_pause_machine();
}

/* TX_POLLED: which endpoints the Tx poll reads, at any time. */
static void niu_tx_polled_write(ArcticNiuState *s, uint32_t val)
{
    if (val & ~R_NIU_TX_POLLED_MASK_MASK) {
        niu_error(&s->status, ARCTIC_ERR_BAD_VALUE, 0, 0, A_NIU_TX_POLLED,
                  "TX_POLLED 0x%x has bits outside its mask", val);
        return;
    }
    niu_tx_set_polled(&s->q, val);
}

/*
 * A write to the register arrays of niu_array_read() but the counters
 * (read-only): the route table and the endpoints' blocks.  *@ok false for
 * an address in neither.
 */
static void niu_array_write(ArcticNiuState *s, hwaddr addr, uint32_t val,
                            bool *ok)
{
    if (addr >= A_NIU_ROUTE_TABLE &&
        addr < A_NIU_ROUTE_TABLE + ARCTIC_ROUTE_TABLE_SIZE) {
        unsigned i = (addr - A_NIU_ROUTE_TABLE) / 4;

        if (niu_check_off(s, niu_tx_off(s), addr)) {
            s->q.route_table[i / ARCTIC_S][i % ARCTIC_S] = val;
        }
    } else if (addr >= ARCTIC_EP_BLOCK_BASE &&
               addr < ARCTIC_EP_OFFSET(ARCTIC_ENDPOINTS, 0)) {
        unsigned epn = (addr - ARCTIC_EP_BLOCK_BASE) / ARCTIC_EP_BLOCK_STRIDE;

        niu_ep_write(s, epn, addr, (addr - ARCTIC_EP_BLOCK_BASE) %
                     ARCTIC_EP_BLOCK_STRIDE, val, ok);
    } else {
        *ok = false;
    }
}

static void niu_control_write(void *opaque, hwaddr addr, uint64_t val64,
                              unsigned size)
{
    ArcticNiuState *s = opaque;
    QEMU_LOCK_GUARD(&s->lock);
    uint32_t val = val64;
    bool ok = true;

    trace_arctic_niu_control_write(s->node_id, addr, val);
    /* The guest's "save me here" is the one access that is no use. */
    if (addr != A_NIU_TEMPLATE_PAUSE) {
        niu_template_touch(s, addr);
    }

    if (niu_control_read_only(addr)) {
        niu_error(&s->status, ARCTIC_ERR_RO_WRITE, 0, 0, addr,
                  "write to read-only register 0x%" HWADDR_PRIx, addr);
        return;
    }
    switch (addr) {
    case A_NIU_TIME_CTRL:
        niu_time_ctrl_write(s, val);
        break;
    case A_NIU_ERROR_CAUSE:
        niu_error_ack(&s->status, val);
        break;
    case A_NIU_SCRATCH:
        s->scratch = val;
        break;
    case A_NIU_TEST_DMA_ADDR_LO:
    case A_NIU_TEST_DMA_ADDR_HI:
    case A_NIU_TEST_DMA_SIZE:
    case A_NIU_TEST_DMA_SEED:
    case A_NIU_TEST_DMA_CTRL:
        niu_test_dma_write(&s->test_dma, addr, val);
        break;
    case A_NIU_TX_CTRL:
        niu_ctrl_write(s, true, val);
        break;
    case A_NIU_RX_CTRL:
        niu_ctrl_write(s, false, val);
        break;
    case A_NIU_VMASK:
        niu_vmask_write(s, val);
        break;
    case A_NIU_DOORBELL_ALL:
        niu_tx_doorbell(&s->q, MAKE_64BIT_MASK(0, ARCTIC_ENDPOINTS));
        break;
    case A_NIU_TX_POLLED:
        niu_tx_polled_write(s, val);
        break;
    case A_NIU_TEMPLATE_PAUSE:
        niu_template_pause(s);
        break;
    case A_NIU_IRQ_STATUS:
        niu_irq_ack(&s->status, val);
        break;
    case A_NIU_IRQ_ENABLE:
        niu_irq_set_enable(&s->status, val);
        if (s->status.irq_enable & R_NIU_IRQ_RX_MASK) {
            niu_link_poll_end(&s->link);
        }
        break;
    default:
        niu_array_write(s, addr, val, &ok);
        break;
    }
    if (!ok) {
        niu_error(&s->status, ARCTIC_ERR_BAD_REGISTER, 0, 0, addr,
                  "write to unassigned control register 0x%"
                  HWADDR_PRIx, addr);
    }
}

static const MemoryRegionOps arctic_control_ops = {
    .read = niu_control_read,
    .write = niu_control_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 4,
        .max_access_size = 8,   /* 64-bit accesses split into halves */
    },
    .impl = {
        .min_access_size = 4,
        .max_access_size = 4,
    },
};

/*
 * ------------------------------------------------------------------------
 * User pages
 */

/*
 * USER_LINK_POLL, under the device lock.  Timed: the input is taken at its
 * virtual times, not polled.  *yield: the poll took nothing and the host
 * core is to be given away (x-link-poll-yield), once the lock is let go.
 */
static uint32_t niu_user_link_poll(ArcticNiuState *s, bool *yield)
{
    uint32_t val;

    if (!niu_link_can_poll(&s->link) || niu_time_on(&s->time)) {
        return R_USER_LINK_POLL_NONE_MASK;
    }
    val = FIELD_DP32(0, USER_LINK_POLL, TOOK, niu_link_poll(&s->link));
    if (s->poll_yield) {
        val = FIELD_DP32(val, USER_LINK_POLL, YIELDS, 1);
        *yield = !FIELD_EX32(val, USER_LINK_POLL, TOOK);
    }
    return val;
}

static uint64_t niu_user_read_locked(ArcticNiuState *s, hwaddr addr,
                                     bool *yield)
{
    unsigned epn = addr / ARCTIC_USER_PAGE_SIZE;
    hwaddr reg = addr % ARCTIC_USER_PAGE_SIZE;

    uint32_t val = 0;

    if (epn == 0 && niu_raw_access(&s->q, reg, false, &val)) {
        trace_arctic_niu_user_read(s->node_id, epn, reg, val);
        return val;
    }
    if (reg == A_USER_LINK_POLL) {
        val = niu_user_link_poll(s, yield);
        trace_arctic_niu_user_read(s->node_id, epn, reg, val);
        return val;
    }
    niu_error(&s->status, ARCTIC_ERR_BAD_REGISTER, epn, 0, reg,
              "read of user register 0x%" HWADDR_PRIx " of endpoint "
              "%u, which reads nothing", reg, epn);
    trace_arctic_niu_user_read(s->node_id, epn, reg, 0);
    return 0;
}

static uint64_t niu_user_read(void *opaque, hwaddr addr, unsigned size)
{
    ArcticNiuState *s = opaque;
    bool yield = false;
    uint64_t val;

    WITH_QEMU_LOCK_GUARD(&s->lock) {
        niu_template_touch(s, addr);
        val = niu_user_read_locked(s, addr, &yield);
    }
    /*
     * An empty busy poll on a host with more nodes than cores: the vCPU
     * gives its core to whoever else wants it (the other nodes' vCPUs,
     * the switch) now, not when its time slice ends, so that a program
     * may wait by polling without holding the core it waits for
     * (docs/datapath.md §3.17).  The device lock is let go first.
     */
    if (yield) {
        sched_yield();
        stat64_add(&s->poll_yields, 1);
    }
    return val;
}

static void niu_user_write(void *opaque, hwaddr addr, uint64_t val,
                           unsigned size)
{
    ArcticNiuState *s = opaque;
    QEMU_LOCK_GUARD(&s->lock);
    unsigned epn = addr / ARCTIC_USER_PAGE_SIZE;
    hwaddr reg = addr % ARCTIC_USER_PAGE_SIZE;

    trace_arctic_niu_user_write(s->node_id, epn, reg, val);
    niu_template_touch(s, addr);
    if (reg == A_USER_DOORBELL) {
        /*
         * A doorbell is a hint: any value is accepted and a spurious
         * ring costs one pass over the queues.
         */
        niu_tx_doorbell(&s->q, 1u << epn);
        return;
    }
    if (epn == 0) {
        uint32_t v = val;

        if (niu_raw_access(&s->q, reg, true, &v)) {
            return;
        }
    }
    if (reg == A_USER_IRQ_ARM) {
        if (FIELD_EX32(val, USER_IRQ_ARM, RX)) {
            niu_irq_arm(&s->status, 1u << (R_NIU_IRQ_RX_SHIFT + epn));
            /*
             * Whoever waits for an interrupt polls no more, and writes
             * no more slots for a held pass to wait for.
             */
            niu_link_poll_end(&s->link);
            niu_tx_release_held(&s->q);
        }
        if (FIELD_EX32(val, USER_IRQ_ARM, TX)) {
            niu_irq_arm(&s->status, 1u << (R_NIU_IRQ_TX_SHIFT + epn));
        }
        return;
    }
    niu_error(&s->status, ARCTIC_ERR_BAD_REGISTER, epn, 0, reg,
              "write to unassigned user register 0x%" HWADDR_PRIx
              " of endpoint %u", reg, epn);
}

static const MemoryRegionOps arctic_user_ops = {
    .read = niu_user_read,
    .write = niu_user_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 4,
        .max_access_size = 4,
    },
};

/*
 * ------------------------------------------------------------------------
 * Test DMA engine (niu-test-dma.c): its work runs here under the device
 * lock, and not while the device is frozen.
 */
static void niu_test_dma_bh(void *opaque)
{
    ArcticNiuState *s = opaque;
    QEMU_LOCK_GUARD(&s->lock);

    if (s->frozen) {
        return;     /* niu_thaw() runs it */
    }
    niu_test_dma_run(&s->test_dma);
}

/*
 * ------------------------------------------------------------------------
 * Introspection: the read-only QOM property "state", for QMP and HMP
 * `qom-get <device path> state`: link, datapaths, last error, counters and
 * every endpoint's queue state, as a structure.
 */

/*
 * Members of the state view.  @errp is always the caller's local error:
 * after a first failure the remaining members are skipped, as
 * include/qapi/error.h asks (no error may be set twice).
 */
static void visit_u64(Visitor *v, const char *name, uint64_t value,
                      Error **errp)
{
    if (!*errp) {
        visit_type_uint64(v, name, &value, errp);
    }
}

static void visit_bool(Visitor *v, const char *name, bool value,
                       Error **errp)
{
    if (!*errp) {
        visit_type_bool(v, name, &value, errp);
    }
}

static void visit_str(Visitor *v, const char *name, const char *value,
                      Error **errp)
{
    char *copy = (char *)value;

    if (!*errp) {
        visit_type_str(v, name, &copy, errp);
    }
}

/* Close a struct or list that was started: checked only if all went well. */
static void visit_end(Visitor *v, bool list, Error **errp)
{
    if (!*errp) {
        if (list) {
            visit_check_list(v, errp);
        } else {
            visit_check_struct(v, errp);
        }
    }
    if (list) {
        visit_end_list(v, NULL);
    } else {
        visit_end_struct(v, NULL);
    }
}

static void visit_int(Visitor *v, const char *name, int64_t value,
                      Error **errp)
{
    if (!*errp) {
        visit_type_int64(v, name, &value, errp);
    }
}

/* Every stream pair with traffic: "streams", a list. */
static void niu_visit_streams(ArcticNiuState *s, Visitor *v, Error **errp)
{
    NiuE2EStreamView sv;
    unsigned p, node;

    if (*errp || !visit_start_list(v, "streams", NULL, 0, errp)) {
        return;
    }
    for (p = 0; p < ARCTIC_NUM_PRIORITIES && !*errp; p++) {
        for (node = 0; node < ARCTIC_S && !*errp; node++) {
            if (!niu_e2e_stream_view(&s->e2e, p, node, &sv) ||
                !visit_start_struct(v, NULL, NULL, 0, errp)) {
                continue;
            }
            visit_u64(v, "node", node, errp);
            visit_str(v, "priority",
                      p == ARCTIC_PRIORITY_HIGH ? "high" : "low", errp);
            visit_u64(v, "lines-busy", sv.lines_busy, errp);
            visit_u64(v, "lines-queued", sv.lines_queued, errp);
            visit_u64(v, "max-retries", sv.max_retries, errp);
            visit_int(v, "oldest-wait-ns", sv.oldest_wait_ns, errp);
            visit_int(v, "next-deadline-ns", sv.next_deadline_ns, errp);
            visit_u64(v, "tx-epoch", sv.tx_epoch, errp);
            visit_u64(v, "tx-next-seq", sv.tx_next_seq, errp);
            visit_bool(v, "tx-acked", sv.tx_acked, errp);
            visit_bool(v, "tx-paused", sv.tx_paused, errp);
            visit_u64(v, "tx-backoff", sv.tx_backoff, errp);
            visit_bool(v, "rx-known", sv.rx_known, errp);
            visit_u64(v, "rx-epoch", sv.rx_epoch, errp);
            visit_u64(v, "rx-expected", sv.rx_expected, errp);
            visit_bool(v, "rx-ack-due", sv.rx_ack_due, errp);
            visit_bool(v, "rx-nack-due", sv.rx_nack_due, errp);
            visit_end(v, false, errp);
        }
    }
    visit_end(v, true, errp);
}

static const char *const niu_time_state_names[] = {
    [NIU_TIME_OFF] = "off",
    [NIU_TIME_STOPPED] = "stopped",
    [NIU_TIME_RUNNING] = "running",
    [NIU_TIME_BROKEN] = "broken",
};

/* The link's session, transport and counters. */
static void niu_visit_link(ArcticNiuState *s, Visitor *v, Error **errp)
{
    NiuLink *l = &s->link;

    visit_str(v, "link", niu_link_state_name(l->state), errp);
    visit_str(v, "link-transport", niu_link_transport_name(l), errp);
    visit_bool(v, "link-rings", l->rings, errp);
    visit_u64(v, "link-switch-kicks", stat64_get(&l->switch_kicks), errp);
    visit_u64(v, "link-kick-yields", stat64_get(&l->kick_yields), errp);
    visit_u64(v, "link-poll-yields", stat64_get(&s->poll_yields), errp);
    visit_u64(v, "link-cpu-kicks", stat64_get(&l->cpu_kicks), errp);
    visit_bool(v, "link-direct", l->direct, errp);
    visit_u64(v, "link-direct-sent", stat64_get(&l->direct_sent), errp);
    visit_u64(v, "link-direct-received", stat64_get(&l->direct_received),
              errp);
    visit_u64(v, "link-direct-full", stat64_get(&l->direct_full), errp);
    visit_u64(v, "link-direct-refused", stat64_get(&l->direct_refused),
              errp);
    visit_u64(v, "link-direct-to", l->direct_to, errp);
    visit_u64(v, "link-up-count", l->up_count, errp);
}

/* Timed mode's clock and counters. */
static void niu_visit_time(ArcticNiuState *s, Visitor *v, Error **errp)
{
    NiuTime *t = &s->time;

    visit_str(v, "time", niu_time_state_names[t->state], errp);
    visit_u64(v, "time-now-ns", niu_time_now(t), errp);
    visit_u64(v, "time-granted-ns", t->granted, errp);
    visit_u64(v, "time-syncs", t->syncs, errp);
    visit_u64(v, "time-sync-wait-us", t->sync_wait_ns / SCALE_US, errp);
    visit_u64(v, "time-packets-out", t->packets_out, errp);
    visit_u64(v, "time-packets-in", t->packets_in, errp);
    visit_u64(v, "time-inbox", t->inbox_count, errp);
}

/* The counters, by name: "counters", a struct. */
static void niu_visit_counters(ArcticNiuState *s, Visitor *v, Error **errp)
{
    unsigned c;

    if (*errp || !visit_start_struct(v, "counters", NULL, 0, errp)) {
        return;
    }
    for (c = 0; c < ARCTIC_NUM_COUNTERS; c++) {
        /* QOM's names take dashes where sysfs takes underscores. */
        g_autofree char *key = g_strdelimit(
            g_strdup(arctic_counter_name(c)), "_", '-');

        visit_u64(v, key, s->status.counters[c], errp);
    }
    visit_end(v, false, errp);
}

/* Every endpoint's registers: "endpoints", a list. */
static void niu_visit_endpoints(ArcticNiuState *s, Visitor *v, Error **errp)
{
    unsigned e;

    if (*errp || !visit_start_list(v, "endpoints", NULL, 0, errp)) {
        return;
    }
    for (e = 0; e < ARCTIC_ENDPOINTS && !*errp; e++) {
        ArcticEndpoint *ep = &s->q.ep[e];

        if (!visit_start_struct(v, NULL, NULL, 0, errp)) {
            break;
        }
        visit_u64(v, "index", e, errp);
        visit_str(v, "served", (e & s->q.vmask) == e ? "yes" : "no", errp);
        visit_u64(v, "tx-qbase", ep->tx_qbase, errp);
        visit_u64(v, "rx-qbase", ep->rx_qbase, errp);
        visit_u64(v, "hi-tx-tl", ep->tx_tail[ARCTIC_TXQ_HI], errp);
        visit_u64(v, "lo-tx-tl", ep->tx_tail[ARCTIC_TXQ_LO], errp);
        visit_u64(v, "dma-tx-tl", ep->tx_tail[ARCTIC_TXQ_DMA], errp);
        visit_u64(v, "hi-rx-hd", ep->rx_head[ARCTIC_RXQ_HI], errp);
        visit_u64(v, "lo-rx-hd", ep->rx_head[ARCTIC_RXQ_LO], errp);
        visit_u64(v, "job", ep->job, errp);
        visit_u64(v, "dma-base-phy", ep->dma.base_phy, errp);
        visit_u64(v, "dma-base-vir", ep->dma.base_vir, errp);
        visit_u64(v, "dma-range-mask", ep->dma.range_mask, errp);
        visit_u64(v, "hi-tx-dma-packets-sent", ep->dma_progress[0], errp);
        visit_u64(v, "dma-tx-dma-packets-sent", ep->dma_progress[1], errp);
        visit_end(v, false, errp);
    }
    visit_end(v, true, errp);
}

static void niu_get_state(Object *obj, Visitor *v, const char *name,
                          void *opaque, Error **errp)
{
    ArcticNiuState *s = ARCTIC_NIU(obj);
    QEMU_LOCK_GUARD(&s->lock);
    Error *err = NULL;

    if (!visit_start_struct(v, name, NULL, 0, errp)) {
        return;
    }
    visit_u64(v, "node-id", s->node_id, &err);
    visit_bool(v, "template", s->template, &err);
    visit_u64(v, "num-nodes", s->link.num_nodes, &err);
    niu_visit_link(s, v, &err);
    /* docs/device-internals.md §8 */
    visit_str(v, "migration", s->restore_failed ? "load-failed" :
                              s->frozen ? "frozen" : "running", &err);
    visit_str(v, "migration-frozen-by", s->frozen ? s->frozen_by : "", &err);
    niu_visit_time(s, v, &err);
    visit_u64(v, "tx-credits-high", s->link.tx_credits[ARCTIC_PRIORITY_HIGH],
              &err);
    visit_u64(v, "tx-credits-low", s->link.tx_credits[ARCTIC_PRIORITY_LOW],
              &err);
    visit_str(v, "tx", s->q.tx_enabled ? "on" :
                       niu_tx_draining(&s->q) ? "draining" : "off", &err);
    visit_str(v, "rx", s->q.rx_enabled ? "on" : s->q.rx_raw ? "raw" : "off",
              &err);
    visit_u64(v, "tx-pending", niu_e2e_pending(&s->e2e), &err);
    visit_u64(v, "vmask", s->q.vmask, &err);
    visit_u64(v, "tx-polled", s->q.tx_polled, &err);
    visit_bool(v, "tx-poll-parked", s->q.tx.poll_parked, &err);
    visit_u64(v, "error-cause", s->status.error_cause, &err);
    visit_str(v, "last-error",
              s->status.error_cause ? arctic_error_name(FIELD_EX32(
                  s->status.error_info, NIU_ERROR_INFO, CAUSE)) : "none",
              &err);
    visit_u64(v, "error-info", s->status.error_info, &err);
    visit_u64(v, "irq-status", s->status.irq_status, &err);
    niu_visit_counters(s, v, &err);
    visit_u64(v, "e2e-lines-busy-high",
              s->e2e.lines_busy[ARCTIC_PRIORITY_HIGH], &err);
    visit_u64(v, "e2e-lines-busy-low",
              s->e2e.lines_busy[ARCTIC_PRIORITY_LOW], &err);
    visit_u64(v, "e2e-controls-owed", s->e2e.ctrl_count, &err);
    visit_int(v, "e2e-retry-due-ns", niu_e2e_retry_due_ns(&s->e2e), &err);
    niu_visit_streams(s, v, &err);
    niu_visit_endpoints(s, v, &err);
    visit_end(v, false, &err);
    error_propagate(errp, err);
}

/*
 * ------------------------------------------------------------------------
 * Reset, realize, class
 */

/*
 * Everything the guest programs, and every datapath state, back to the
 * power-on values; the link stays connected (it is the cable).
 */
void niu_full_reset(ArcticNiuState *s)
{
    s->q.tx_enabled = false;
    s->q.rx_enabled = false;
    s->q.rx_raw = false;
    s->q.vmask = 0;
    s->q.tx_polled = R_NIU_TX_POLLED_MASK_MASK;    /* seed 002: all */
    niu_status_reset(&s->status);
    s->scratch = 0;
    niu_test_dma_reset(&s->test_dma);
    memset(s->q.route_table, 0, sizeof(s->q.route_table));
    memset(s->q.ep, 0, sizeof(s->q.ep));
    niu_tx_reset(&s->q);
    niu_rx_reset(&s->q);
    niu_e2e_reset(&s->e2e);
    niu_raw_reset(&s->q);
}

/* Turning MSI-X on or off moves pending causes between it and INTx. */
static void niu_config_write(PCIDevice *pdev, uint32_t addr,
                             uint32_t val, int len)
{
    ArcticNiuState *s = ARCTIC_NIU(pdev);
    QEMU_LOCK_GUARD(&s->lock);

    pci_default_write_config(pdev, addr, val, len);    /* MSI-X too */
    niu_irq_update_intx(&s->status);
}

/*
 * ------------------------------------------------------------------------
 * Migration, savevm and loadvm (docs/device-internals.md §8).  The state
 * is saved frozen: from the moment the guest stops for the cut (or the
 * save begins, if it was stopped already) the NIU takes no input and its
 * queue engine no slot, so guest RAM, saved before the device, and the
 * device's state describe the same instant.  A load freezes it first and
 * thaws it once every part was checked; a load that fails leaves it
 * frozen until reset, never running on a half-loaded state.  The link
 * session is not state: the NIU resumes on whatever session its link
 * has, as after a reconnect.
 */

static bool niu_link_wait_timed(ArcticNiuState *s, Error **errp);

/* Under the device lock. */
static void niu_freeze(ArcticNiuState *s, const char *why)
{
    if (!s->frozen) {
        s->frozen = true;
        s->frozen_by = why;
        niu_link_pause(&s->link, true);
        trace_arctic_niu_freeze(s->node_id, true, why);
    }
}

/* Under the device lock: everything the freeze held back goes on. */
static void niu_thaw(ArcticNiuState *s, const char *why)
{
    if (!s->frozen || s->restore_failed) {
        return;
    }
    s->frozen = false;
    trace_arctic_niu_freeze(s->node_id, false, why);
    niu_link_pause(&s->link, false);
    niu_test_dma_resume(&s->test_dma);
    niu_tx_kick(&s->q);
}

/*
 * The guest stops for a migration's cut, a savevm or a loadvm: freeze
 * before RAM's last pass.  A guest merely stopped (`stop`, a debugger)
 * keeps its NIU taking packets, as it always did.
 */
static void niu_vm_state_change(void *opaque, bool running, RunState state)
{
    ArcticNiuState *s = opaque;
    QEMU_LOCK_GUARD(&s->lock);

    if (running) {
        niu_thaw(s, "the guest runs");
    } else if (state == RUN_STATE_FINISH_MIGRATE ||
               state == RUN_STATE_SAVE_VM || state == RUN_STATE_RESTORE_VM) {
        niu_freeze(s, RunState_str(state));
    }
}

/*
 * A save of a guest already stopped changes no run state: freeze when it
 * sets up, and thaw when a savevm ends (a migration that completed leaves
 * the source frozen: its NIU has moved).
 */
static int niu_precopy_notify(NotifierWithReturn *n, void *data,
                              Error **errp)
{
    ArcticNiuState *s = container_of(n, ArcticNiuState, precopy_notifier);
    PrecopyNotifyData *pnd = data;
    QEMU_LOCK_GUARD(&s->lock);

    if (pnd->reason == PRECOPY_NOTIFY_SETUP && !runstate_is_running()) {
        niu_freeze(s, "saved while stopped");
    } else if (pnd->reason == PRECOPY_NOTIFY_CLEANUP &&
               runstate_check(RUN_STATE_SAVE_VM)) {
        niu_thaw(s, "savevm done");
    }
    return 0;
}

/*
 * The properties that shape the state: a stream of another node, another
 * number of lines or the other mode is refused before any of it is
 * loaded, with a message that names the difference.
 */
static const char *niu_identity_str(uint32_t v, char buf[16])
{
    if (v == NIU_VM_TEMPLATE) {
        return "template";
    }
    snprintf(buf, 16, "%u", v);
    return buf;
}

/*
 * A template's state (template=on, no identity) loads into a node of any
 * id and either mode: its node-id comes first, and says so for the rest.
 * (The fields are the device's own, at the top of its section.)
 */
static int niu_get_same(QEMUFile *f, void *pv, size_t size,
                        const VMStateField *field)
{
    ArcticNiuState *s = (ArcticNiuState *)((char *)pv - field->offset);
    uint32_t mine = *(uint32_t *)pv, saved = qemu_get_be32(f);
    char a[16], b[16];

    if (saved == mine) {
        return 0;
    }
    if (saved == NIU_VM_TEMPLATE &&
        (s->loading_template || !strcmp(field->name, "node-id"))) {
        s->loading_template = true;
        return 0;
    }
    trace_arctic_niu_restore_mismatch(field->name, saved, mine);
    error_report("arctic-niu: saved state of %s=%s cannot load into "
                 "this device's %s=%s", field->name,
                 niu_identity_str(saved, a), field->name,
                 niu_identity_str(mine, b));
    return -EINVAL;
}

static int niu_put_same(QEMUFile *f, void *pv, size_t size,
                        const VMStateField *field, JSONWriter *vmdesc)
{
    qemu_put_be32(f, *(uint32_t *)pv);
    return 0;
}

static const VMStateInfo niu_vmstate_info_same = {
    .name = "arctic-niu property",
    .get = niu_get_same,
    .put = niu_put_same,
};

#define NIU_VMSTATE_SAME(_name, _field) {                               \
    .name = (_name),                                                    \
    .size = sizeof(uint32_t),                                           \
    .info = &niu_vmstate_info_same,                                     \
    .flags = VMS_SINGLE,                                                \
    .offset = vmstate_offset_value(ArcticNiuState, _field, uint32_t),   \
}

static void niu_vm_identity(ArcticNiuState *s)
{
    s->vm_identity.node_id = s->template ? NIU_VM_TEMPLATE : s->node_id;
    s->vm_identity.lines = s->e2e.cfg.lines;
    s->vm_identity.timed = s->template ? NIU_VM_TEMPLATE
                                       : niu_time_on(&s->time);
}

static int niu_pre_save(void *opaque)
{
    ArcticNiuState *s = opaque;
    QEMU_LOCK_GUARD(&s->lock);

    if (s->template_used) {
        error_report("arctic-niu: template=on: the guest has used this NIU "
                     "(its registers were read or written): a template is "
                     "saved before its guest loads a driver, or it is not "
                     "one (docs/snapshots.md section 6)");
        return -EPERM;
    }
    niu_freeze(s, "saved");     /* already, unless saved some other way */
    niu_vm_identity(s);
    s->vm_link.up_count = s->link.up_count;
    s->vm_link.num_nodes = s->link.num_nodes;
    s->vm_link.levels = s->link.levels;
    return 0;
}

/*
 * Before any field: frozen, and the state the optional subsections carry
 * at its reset value, which is what their absence means.
 */
static int niu_pre_load(void *opaque)
{
    ArcticNiuState *s = opaque;
    QEMU_LOCK_GUARD(&s->lock);

    niu_freeze(s, "loading");
    s->restore_failed = true;   /* until niu_post_load() says otherwise */
    s->loading_template = false;
    s->q.loaded_fault = s->e2e.loaded_fault = s->time.loaded_fault = NULL;
    niu_vm_identity(s);
    niu_raw_reset(&s->q);
    niu_rx_reset(&s->q);
    niu_test_dma_reset(&s->test_dma);
    s->q.tx_polled = R_NIU_TX_POLLED_MASK_MASK;    /* unless sent */
    return 0;
}

static const char *niu_loaded_fault(ArcticNiuState *s)
{
    unsigned e, q;

    if (s->q.vmask & ~R_NIU_VMASK_MASK_MASK) {
        return "VMASK has bits outside its mask";
    }
    if (s->q.tx_polled & ~R_NIU_TX_POLLED_MASK_MASK) {
        return "TX_POLLED has bits outside its mask";
    }
    for (e = 0; e < ARCTIC_ENDPOINTS; e++) {
        const ArcticEndpoint *ep = &s->q.ep[e];

        if (ep->tx_qbase & (ARCTIC_TX_REGION_ALIGN - 1) ||
            ep->rx_qbase & (ARCTIC_RX_REGION_ALIGN - 1)) {
            return "a queue base not aligned";
        }
        if (!niu_dma_reg_aligned(ep->dma.base_phy, false) ||
            !niu_dma_reg_aligned(ep->dma.base_vir, false) ||
            !niu_dma_reg_aligned(ep->dma.range_mask, true) ||
            niu_dma_window_wraps(ep->dma.base_phy, ep->dma.range_mask)) {
            return "a DMA window no register write could set";
        }
        for (q = 0; q < ARCTIC_NUM_TX_QUEUES; q++) {
            if (ep->tx_tail[q] >= ARCTIC_N) {
                return "a Tx queue index out of range";
            }
        }
        for (q = 0; q < ARCTIC_NUM_RX_QUEUES; q++) {
            if (ep->rx_head[q] >= 2 * ARCTIC_N) {
                return "an Rx queue index out of range";
            }
        }
        if (ep->dma_progress[0] > ARCTIC_DMA_PACKETS ||
            ep->dma_progress[1] > ARCTIC_DMA_PACKETS) {
            return "a remote-DMA request's progress out of range";
        }
    }
    return niu_status_loaded_fault(&s->status);
}

/*
 * Under the device lock, every part loaded: checked, then the link's facts
 * the guest reads, then the lines go again on the session the link has
 * now (a new one repeats this at its WELCOME), and the device thaws.  A
 * restore counts as one more link up for the guest (LINK_STATUS.UP_COUNT):
 * what it sent may have been lost in flight, and is being sent again.
 */
static bool niu_restore(ArcticNiuState *s)
{
    const char *fault = s->e2e.loaded_fault ?: s->time.loaded_fault ?:
                        s->q.loaded_fault ?: niu_loaded_fault(s);

    if (!fault && s->loading_template && niu_e2e_pending(&s->e2e)) {
        fault = "a template with packets to send";
    }

    if (fault) {
        trace_arctic_niu_restore_refused(s->node_id, fault);
        error_report("arctic-niu: node %u: saved state refused: %s",
                     s->node_id, fault);
        return false;
    }
    s->link.up_count = s->vm_link.up_count;
    if (niu_link_is_up(&s->link)) {
        s->link.up_count++;
    } else {
        s->link.num_nodes = s->vm_link.num_nodes;
        s->link.levels = s->vm_link.levels;
    }
    s->q.tx.line_wait = false;
    if (s->loading_template) {
        /* A clone is a new NIU to its cluster: streams as at realize. */
        niu_e2e_renew(&s->e2e);
        trace_arctic_niu_template_loaded(s->node_id);
    }
    niu_status_restored(&s->status);
    niu_time_restored(&s->time);
    s->restore_failed = false;
    trace_arctic_niu_restored(s->node_id, niu_e2e_pending(&s->e2e),
                              s->link.up_count);
    niu_e2e_restored(&s->e2e);
    niu_thaw(s, "loaded");
    return true;
}

/*
 * Timed, a clock not started yet is started by the guest's TIME_CTRL.START,
 * which wants the link up: the load waits for the WELCOME as realize does
 * (without the device lock, which the link thread takes to read it).
 */
static int niu_post_load(void *opaque, int version_id)
{
    ArcticNiuState *s = opaque;
    Error *err = NULL;
    bool wait;

    WITH_QEMU_LOCK_GUARD(&s->lock) {
        if (!niu_restore(s)) {
            return -EINVAL;
        }
        wait = s->time.state == NIU_TIME_STOPPED;
    }
    if (wait && !niu_link_wait_timed(s, &err)) {
        error_report_err(err);
        return -EIO;
    }
    return 0;
}

/* The main loop runs: QEMU's start, -loadvm included, is over. */
static void niu_started_bh(void *opaque)
{
    ArcticNiuState *s = opaque;
    QEMU_LOCK_GUARD(&s->lock);

    if (s->frozen && !strcmp(s->frozen_by, "starting")) {
        niu_thaw(s, "QEMU started");
    }
}

/*
 * At realize, before the link.  An incoming NIU waits for its state.  One
 * made as QEMU starts waits for the main loop, by which time -loadvm has
 * loaded its state: a fresh NIU that took its switch's packets first
 * would answer the peers' retransmissions with RESYNC from a new
 * incarnation, and a peer would then renumber what the restored NIU may
 * have delivered already.  (Timed, realize waits for the WELCOME, and no
 * packet moves before the cluster's clock starts.)
 */
static void niu_migration_init(ArcticNiuState *s)
{
    if (runstate_check(RUN_STATE_INMIGRATE)) {
        niu_freeze(s, "incoming migration");
    } else if (runstate_check(RUN_STATE_PRELAUNCH) && !niu_time_on(&s->time)) {
        niu_freeze(s, "starting");
        aio_bh_schedule_oneshot(qemu_get_aio_context(), niu_started_bh, s);
    }
    s->vm_change = qemu_add_vm_change_state_handler(niu_vm_state_change, s);
    s->precopy_notifier.notify = niu_precopy_notify;
    precopy_add_notifier(&s->precopy_notifier);
}

static const VMStateDescription vmstate_arctic_endpoint = {
    .name = "arctic-niu/endpoint",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT64(tx_qbase, ArcticEndpoint),
        VMSTATE_UINT64(rx_qbase, ArcticEndpoint),
        VMSTATE_UINT32_ARRAY(tx_tail, ArcticEndpoint, ARCTIC_NUM_TX_QUEUES),
        VMSTATE_UINT32_ARRAY(rx_head, ArcticEndpoint, ARCTIC_NUM_RX_QUEUES),
        VMSTATE_UINT64(dma.base_phy, ArcticEndpoint),
        VMSTATE_UINT64(dma.base_vir, ArcticEndpoint),
        VMSTATE_UINT64(dma.range_mask, ArcticEndpoint),
        VMSTATE_UINT32(job, ArcticEndpoint),
        VMSTATE_UINT32_ARRAY(dma_progress, ArcticEndpoint, 2),
        VMSTATE_END_OF_LIST()
    },
};

/*
 * A subsection @_var that carries one part's struct @_field, sent only
 * when @_needed says its state is not its reset value.  A struct's fields
 * go inline: the stream is as when they were flat in ArcticNiuState.
 */
#define NIU_VMSTATE_PART(_var, _name, _field, _type, _vmsd, _needed)     \
    static bool _var##_needed(void *opaque)                             \
    {                                                                   \
        ArcticNiuState *s = opaque;                                     \
                                                                        \
        return _needed(&s->_field);                                     \
    }                                                                   \
    static const VMStateDescription _var = {                            \
        .name = _name,                                                  \
        .version_id = 1,                                                \
        .minimum_version_id = 1,                                        \
        .needed = _var##_needed,                                        \
        .fields = (const VMStateField[]) {                              \
            VMSTATE_STRUCT(_field, ArcticNiuState, 1, _vmsd, _type),    \
            VMSTATE_END_OF_LIST()                                       \
        },                                                              \
    }

/* Timed mode's clock and the deliveries waiting for it: when timed. */
NIU_VMSTATE_PART(vmstate_niu_time_sub, "arctic-niu/time", time, NiuTime,
                 vmstate_niu_time, niu_time_on);
/* dMPI raw mode's FIFOs: only when they hold something. */
NIU_VMSTATE_PART(vmstate_niu_raw, "arctic-niu/raw", q, NiuQueues,
                 vmstate_niu_queues_raw, niu_raw_needed);
/* Remote-DMA reports and refusals owed: only while some are. */
NIU_VMSTATE_PART(vmstate_niu_rx_reports, "arctic-niu/rx-reports", q,
                 NiuQueues, vmstate_niu_queues_reports, niu_rx_reports_needed);
/* TX_POLLED: only when it is not the reset value (seed 002's). */
static bool niu_tx_polled_needed(void *opaque)
{
    ArcticNiuState *s = opaque;

    return s->q.tx_polled != R_NIU_TX_POLLED_MASK_MASK;
}

static const VMStateDescription vmstate_niu_tx_polled = {
    .name = "arctic-niu/tx-polled",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = niu_tx_polled_needed,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(q.tx_polled, ArcticNiuState),
        VMSTATE_END_OF_LIST()
    },
};

/* The test DMA engine: only when it was used since reset. */
NIU_VMSTATE_PART(vmstate_niu_test_dma, "arctic-niu/test-dma", test_dma,
                 NiuTestDma, vmstate_niu_test_dma_regs, niu_test_dma_used);

static const VMStateDescription vmstate_arctic_niu = {
    .name = TYPE_ARCTIC_NIU,
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_save = niu_pre_save,
    .pre_load = niu_pre_load,
    .post_load = niu_post_load,
    .fields = (const VMStateField[]) {
        NIU_VMSTATE_SAME("node-id", vm_identity.node_id),
        NIU_VMSTATE_SAME("lines", vm_identity.lines),
        NIU_VMSTATE_SAME("timed", vm_identity.timed),
        VMSTATE_PCI_DEVICE(parent_obj, ArcticNiuState),
        VMSTATE_MSIX(parent_obj, ArcticNiuState),
        VMSTATE_BOOL(q.tx_enabled, ArcticNiuState),
        VMSTATE_BOOL(q.rx_enabled, ArcticNiuState),
        VMSTATE_BOOL(q.rx_raw, ArcticNiuState),
        VMSTATE_UINT32(q.vmask, ArcticNiuState),
        VMSTATE_UINT32(scratch, ArcticNiuState),
        VMSTATE_UINT32_2DARRAY(q.route_table, ArcticNiuState, 2, ARCTIC_S),
        VMSTATE_STRUCT_ARRAY(q.ep, ArcticNiuState, ARCTIC_ENDPOINTS, 1,
                             vmstate_arctic_endpoint, ArcticEndpoint),
        VMSTATE_UINT32(q.tx.count, ArcticNiuState),
        VMSTATE_STRUCT(status, ArcticNiuState, 1, vmstate_niu_status,
                       NiuStatus),
        VMSTATE_STRUCT(e2e, ArcticNiuState, 1, vmstate_niu_e2e, NiuE2E),
        VMSTATE_UINT16(vm_link.up_count, ArcticNiuState),
        VMSTATE_UINT32(vm_link.num_nodes, ArcticNiuState),
        VMSTATE_UINT32(vm_link.levels, ArcticNiuState),
        VMSTATE_END_OF_LIST()
    },
    .subsections = (const VMStateDescription * const []) {
        &vmstate_niu_time_sub,
        &vmstate_niu_raw,
        &vmstate_niu_rx_reports,
        &vmstate_niu_test_dma,
        &vmstate_niu_tx_polled,
        NULL
    },
};

static void niu_reset_hold(Object *obj, ResetType type)
{
    ArcticNiuState *s = ARCTIC_NIU(obj);
    QEMU_LOCK_GUARD(&s->lock);

    niu_full_reset(s);
    /* A state a failed load left behind is gone: the NIU may run again. */
    if (s->restore_failed) {
        s->restore_failed = false;
        if (runstate_is_running()) {
            niu_thaw(s, "reset after a failed load");
        }
    }
}

/*
 * ------------------------------------------------------------------------
 * What the link reports (niu-link.h), handed to the end-to-end protocol.
 * The transport calls in with the device lock held.
 */

static ArcticNiuState *link_owner(NiuLink *link)
{
    return link->opaque;
}

static void niu_on_link_up(NiuLink *link)
{
    ArcticNiuState *s = link_owner(link);

    niu_status_link_up(&s->status);
    niu_e2e_link_up(&s->e2e);
    niu_tx_kick(&s->q);
    niu_e2e_pump(&s->e2e, false);
}

static void niu_on_link_down(NiuLink *link)
{
    niu_count(&link_owner(link)->status, ARCTIC_CNT_LINK_DOWNS);
}

static void niu_on_link_packet(NiuLink *link, uint8_t prio,
                               const uint8_t *wire, size_t size)
{
    niu_e2e_packet(&link_owner(link)->e2e, wire, size);
}

static void niu_on_link_ready(NiuLink *link)
{
    niu_tx_resume(&link_owner(link)->q);
}

static void niu_on_link_deferred(NiuLink *link)
{
    niu_e2e_pump(&link_owner(link)->e2e, false);
}

static void niu_on_link_wake(NiuLink *link)
{
    niu_tx_wake(&link_owner(link)->q);
}

static void niu_on_link_posted(NiuLink *link)
{
    niu_tx_posted(&link_owner(link)->q);
}

/*
 * The link thread let go of the device lock: raise what it fired.  The
 * BQL is free while the vCPUs halt or run guest code, so this takes no
 * detour through the main loop.
 */
static void niu_on_link_released(NiuLink *link)
{
    niu_status_flush(&link_owner(link)->status);
}

static void niu_on_link_error(NiuLink *link, enum arctic_error cause,
                              uint32_t detail, const char *what)
{
    niu_error(&link_owner(link)->status, cause, 0, 0, detail, "%s", what);
}

static uint64_t niu_on_link_stamp(NiuLink *link, uint8_t prio,
                                  const uint8_t *wire, size_t size)
{
    return niu_time_stamp(&link_owner(link)->time, wire, size);
}

static void niu_on_link_timed_packet(NiuLink *link, uint8_t prio, uint64_t at,
                                     const uint8_t *wire, size_t size)
{
    niu_time_packet(&link_owner(link)->time, prio, at, wire, size);
}

static void niu_on_link_time_start(NiuLink *link,
                                   const struct arctic_time_start *start)
{
    niu_time_on_start(&link_owner(link)->time, start);
}

static void niu_on_link_time_grant(NiuLink *link, uint64_t until)
{
    niu_time_on_grant(&link_owner(link)->time, until);
}

static const NiuLinkOps arctic_niu_link_ops = {
    .up = niu_on_link_up,
    .down = niu_on_link_down,
    .packet = niu_on_link_packet,
    .ready = niu_on_link_ready,
    .deferred = niu_on_link_deferred,
    .wake = niu_on_link_wake,
    .posted = niu_on_link_posted,
    .released = niu_on_link_released,
    .error = niu_on_link_error,
    .stamp = niu_on_link_stamp,
    .timed_packet = niu_on_link_timed_packet,
    .time_start = niu_on_link_time_start,
    .time_grant = niu_on_link_time_grant,
};

/*
 * ------------------------------------------------------------------------
 * What the end-to-end protocol reports (niu-e2e.h), handed to the queue
 * engine.  Called with the device lock held.
 */

static ArcticNiuState *e2e_owner(NiuE2E *e2e)
{
    return container_of(e2e, ArcticNiuState, e2e);
}

static RxVerdict niu_on_e2e_deliver(NiuE2E *e2e, uint8_t prio, uint16_t src,
                                    uint16_t job, uint8_t flags,
                                    const uint8_t *pkt, size_t size)
{
    return niu_rx_deliver(&e2e_owner(e2e)->q, prio, src, job, flags, pkt, size);
}

/* Each endpoint that lost packets to @node gets a notice in its HiRx. */
static void niu_on_e2e_peer_lost(NiuE2E *e2e, uint16_t node,
                                 uint32_t endpoints)
{
    ArcticNiuState *s = e2e_owner(e2e);
    unsigned i;

    for (i = 0; i < ARCTIC_ENDPOINTS; i++) {
        if (endpoints & (1u << i)) {
            niu_rx_local_notice(&s->q, i,
                                FIELD_DP32(0, MPI_HEADER, ENDPOINT, i),
                                node, ARCTIC_NOTICE_PEER_DEAD);
        }
    }
    niu_tx_kick(&s->q);
}

/* A message of @epn refused for good by @node: a notice in its HiRx. */
static void niu_on_e2e_refused(NiuE2E *e2e, uint16_t node, unsigned epn)
{
    ArcticNiuState *s = e2e_owner(e2e);

    niu_rx_local_notice(&s->q, epn, FIELD_DP32(0, MPI_HEADER, ENDPOINT, epn),
                        node, ARCTIC_NOTICE_REFUSED);
    niu_tx_kick(&s->q);
}

static uint32_t niu_on_e2e_route(NiuE2E *e2e, uint16_t node)
{
    return e2e_owner(e2e)->q.route_table[ARCTIC_ROUTE_TABLE_HIGH][node];
}

static void niu_on_e2e_count(NiuE2E *e2e, enum arctic_counter c, uint32_t n)
{
    niu_count_n(&e2e_owner(e2e)->status, c, n);
}

static void G_GNUC_PRINTF(4, 0) niu_on_e2e_error(NiuE2E *e2e,
                                                 enum arctic_error cause,
                                                 uint32_t detail,
                                                 const char *fmt, va_list ap)
{
    niu_verror(&e2e_owner(e2e)->status, cause, 0, 0, detail, fmt, ap);
}

static const NiuE2EOps arctic_niu_e2e_ops = {
    .deliver = niu_on_e2e_deliver,
    .peer_lost = niu_on_e2e_peer_lost,
    .refused = niu_on_e2e_refused,
    .route = niu_on_e2e_route,
    .count = niu_on_e2e_count,
    .error = niu_on_e2e_error,
};

/*
 * link-secret=ID: the cluster's key, the bytes of QEMU's secret object ID
 * (-object secret,id=ID,file=KEY: the file the switch reads with
 * --secret), for the authenticated join of link 1.3.
 */
static bool niu_link_secret(ArcticNiuState *s, Error **errp)
{
    g_autofree uint8_t *key = NULL;
    size_t len;

    if (!s->link_cfg.secret) {
        return true;
    }
    if (qcrypto_secret_lookup(s->link_cfg.secret, &key, &len, errp) < 0) {
        error_prepend(errp, "arctic-niu: link-secret=%s: ", s->link_cfg.secret);
        return false;
    }
    if (len < ARCTIC_AUTH_KEY_MIN || len > ARCTIC_AUTH_KEY_MAX) {
        error_setg(errp, "arctic-niu: link-secret=%s holds %zu bytes: the "
                   "key wants %d..%d", s->link_cfg.secret, len,
                   ARCTIC_AUTH_KEY_MIN, ARCTIC_AUTH_KEY_MAX);
        return false;
    }
    niu_link_set_secret(&s->link, key, len);
    return true;
}

/*
 * Timed: the guest must find the link up from its first instruction on,
 * whenever the host connects it, so realize waits for the WELCOME (or a
 * refusal, or NIU_TIME_CONNECT_S).
 */
enum { NIU_TIME_CONNECT_S = 60 };

static bool niu_link_wait_timed(ArcticNiuState *s, Error **errp)
{
    int64_t deadline = get_clock() +
                       NIU_TIME_CONNECT_S * NANOSECONDS_PER_SECOND;

    /* Frozen, it takes no WELCOME: an incoming NIU waits at its load. */
    if (!s->time.enabled || s->frozen) {
        return true;
    }
    for (;;) {
        bool up, rejected;

        qemu_rec_mutex_lock(&s->lock);
        up = niu_link_is_up(&s->link);
        rejected = s->link.rejected;
        qemu_rec_mutex_unlock(&s->lock);
        if (up) {
            return true;
        }
        if (rejected) {
            error_setg(errp, "arctic-niu: timed=on: the switch at %s "
                       "refused node %u (see the warning above)",
                       s->link_cfg.socket, s->node_id);
            return false;
        }
        if (get_clock() > deadline) {
            error_setg(errp, "arctic-niu: timed=on: no switch welcomed "
                       "node %u at %s within %d s", s->node_id,
                       s->link_cfg.socket, NIU_TIME_CONNECT_S);
            return false;
        }
        g_usleep(10 * 1000);
    }
}

/* No link at all makes a standalone NIU, useful for register tests. */
/*
 * An interrupt was raised (niu-status.c): it may wake a halted vCPU
 * without the main loop, so a parked Tx poll runs again.
 */
static void niu_on_irq_raised(void *opaque)
{
    ArcticNiuState *s = opaque;

    niu_tx_unpark(&s->q);
}

/* Timed mode's reports go to the transmit side of the queue engine. */
static void niu_on_time_resume(void *opaque)
{
    ArcticNiuState *s = opaque;

    niu_tx_resume(&s->q);
}

static void niu_on_time_started(void *opaque)
{
    ArcticNiuState *s = opaque;

    niu_tx_kick(&s->q);
}

/* The queue engine asks whether migration froze the device. */
static bool niu_on_queues_frozen(void *opaque)
{
    ArcticNiuState *s = opaque;

    return s->frozen;
}

static const NiuQueuesOps arctic_niu_queues_ops = {
    .frozen = niu_on_queues_frozen,
};

static const NiuTimeOps arctic_niu_time_ops = {
    .resume = niu_on_time_resume,
    .started = niu_on_time_started,
};

static bool niu_link_setup(ArcticNiuState *s, Error **errp)
{
    if (s->template && (s->link_cfg.socket || s->time.enabled ||
                        qemu_chr_fe_backend_connected(&s->chr))) {
        error_setg(errp, "arctic-niu: template=on is a node without "
                   "identity: no link-socket=, chardev= or timed=on (the "
                   "clones started from it take those)");
        return false;
    }
    /*
     * Timed: acks go at once, as the hardware's would (no host wake-ups
     * to save).
     */
    niu_link_init(&s->link, &arctic_niu_link_ops, s, &s->lock, s->node_id,
                  s->link_cfg.rx_credits,
                  s->time.enabled ? 0 : s->link_cfg.ack_delay_ns);
    if (!niu_link_secret(s, errp) ||
        !niu_time_init(&s->time, s->node_id, &s->lock, &s->link, &s->e2e,
                       &s->status, &arctic_niu_time_ops, s, errp)) {
        return false;
    }
    if (s->link_cfg.socket && qemu_chr_fe_backend_connected(&s->chr)) {
        error_setg(errp, "arctic-niu: give chardev= or link-socket=, "
                   "not both");
        return false;
    }
    if (s->link_cfg.socket) {
        return niu_link_init_thread(&s->link, s->link_cfg.socket,
                                    s->link_cfg.reconnect_ms,
                                    s->time.enabled ? 0
                                        : s->link_cfg.busy_poll_ns,
                                    s->link_cfg.rings, s->link_cfg.kick_yield,
                                    s->link_cfg.cpu_wake,
                                    s->link_cfg.direct, errp) &&
               niu_link_wait_timed(s, errp);
    }
    if (qemu_chr_fe_backend_connected(&s->chr)) {
        return niu_link_init_chr(&s->link, &s->chr, errp);
    }
    if (s->time.enabled) {
        error_setg(errp, "arctic-niu: timed=on needs link-socket=");
        return false;
    }
    return true;
}

static void niu_exit(PCIDevice *pdev);

static void niu_realize(PCIDevice *pdev, Error **errp)
{
    ArcticNiuState *s = ARCTIC_NIU(pdev);

    if (s->node_id >= ARCTIC_S) {
        error_setg(errp, "arctic-niu: node-id %u is out of range (0..%d)",
                   s->node_id, ARCTIC_S - 1);
        return;
    }
    if (s->start_pause && !s->time.enabled) {
        error_setg(errp, "arctic-niu: start-pause=on needs timed=on (it "
                   "stops the machine before the cluster's clock starts)");
        return;
    }
    if (s->link_cfg.rx_credits == 0 ||
        s->link_cfg.rx_credits > ARCTIC_LINK_MAX_CREDITS) {
        error_setg(errp, "arctic-niu: rx-credits must be 1..%d",
                   ARCTIC_LINK_MAX_CREDITS);
        return;
    }
    if (s->q.tx.cfg.poll_min_ns == 0 ||
        s->q.tx.cfg.poll_max_ns < s->q.tx.cfg.poll_min_ns) {
        error_setg(errp, "arctic-niu: need 0 < x-poll-min-ns <= x-poll-max-ns");
        return;
    }
    if (!niu_e2e_check(&s->e2e.cfg, errp)) {
        return;
    }
    if (s->time.enabled) {
        /*
         * Timed: a doorbell's pass runs at once, in the ringing vCPU; the
         * host-time devices that save wake-ups of a loaded host have no
         * place in virtual time (docs/timed-mode.md).
         */
        s->q.tx.cfg.doorbell_coalesce_ns = 0;
        s->q.tx.cfg.doorbell_posted = false;
    }
    s->q.tx.cfg.timed = s->time.enabled;
    if (s->q.tx.cfg.doorbell_coalesce_ns > s->e2e.cfg.retry_timeout_ns / 4) {
        error_setg(errp, "arctic-niu: x-doorbell-coalesce-ns must be at most "
                   "a quarter of retry-timeout-ns (%" PRIu64 ")",
                   s->e2e.cfg.retry_timeout_ns / 4);
        return;
    }
    if (s->link_cfg.ack_delay_ns > s->e2e.cfg.retry_timeout_ns / 4) {
        error_setg(errp, "arctic-niu: x-ack-delay-ns must be at most a "
                   "quarter of retry-timeout-ns (%" PRIu64 ")",
                   s->e2e.cfg.retry_timeout_ns / 4);
        return;
    }

    pci_config_set_interrupt_pin(pdev->config, 1);
    if (msix_init_exclusive_bar(pdev, ARCTIC_MSIX_VECTORS, ARCTIC_BAR_MSIX,
                                errp)) {
        return;
    }
    for (unsigned v = 0; v < ARCTIC_MSIX_VECTORS; v++) {
        msix_vector_use(pdev, v);
    }

    memory_region_init_io(&s->control_bar, OBJECT(s), &arctic_control_ops, s,
                          "arctic-niu-control", ARCTIC_BAR_CONTROL_SIZE);
    pci_register_bar(pdev, ARCTIC_BAR_CONTROL, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->control_bar);
    memory_region_init_io(&s->user_bar, OBJECT(s), &arctic_user_ops, s,
                          "arctic-niu-user", ARCTIC_BAR_USER_SIZE);
    pci_register_bar(pdev, ARCTIC_BAR_USER, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->user_bar);

    niu_status_init(&s->status, pdev, &s->lock, &s->link, s->node_id,
                    niu_time_on(&s->time), s->time.irq_ns, niu_on_irq_raised,
                    s);
    niu_dma_init(&s->dma, pdev, &s->lock, s->node_id);
    niu_queues_init(&s->q, s->node_id, &s->lock, &s->dma, &s->status,
                    &s->e2e, &s->link, &arctic_niu_queues_ops, s);
    niu_tx_init(&s->q, &DEVICE(s)->mem_reentrancy_guard);
    niu_e2e_init(&s->e2e, s->node_id, niu_time_on(&s->time), &s->link, &s->lock,
                 &arctic_niu_e2e_ops);
    niu_full_reset(s);
    niu_migration_init(s);
    if (!niu_link_setup(s, errp)) {
        niu_exit(pdev);
        return;
    }
    /* After niu_time_init() (in niu_link_setup()): the PCI speed is known. */
    niu_test_dma_init(&s->test_dma, &s->dma, &s->status, s->node_id,
                      niu_time_on(&s->time), s->time.pci_ps_per_byte,
                      niu_test_dma_bh, s, &DEVICE(s)->mem_reentrancy_guard);
}

static void niu_exit(PCIDevice *pdev)
{
    ArcticNiuState *s = ARCTIC_NIU(pdev);

    niu_link_cleanup(&s->link);
    niu_time_cleanup(&s->time);
    niu_tx_cleanup(&s->q);
    niu_e2e_cleanup(&s->e2e);
    niu_dma_cleanup(&s->dma);
    niu_test_dma_cleanup(&s->test_dma);
    niu_status_cleanup(&s->status);
    msix_uninit_exclusive_bar(pdev);
    precopy_remove_notifier(&s->precopy_notifier);
    qemu_del_vm_change_state_handler(s->vm_change);
    s->vm_change = NULL;
}

/*
 * Properties (docs/programming-guide.md §14).  Those a user of the model
 * sets: the node, the link, the retransmit buffer and the protocol's
 * timeouts, timed mode's costs.  Those marked x- tune how the emulation
 * uses the host (its polls, wake-ups and batching): they change how fast
 * the model runs on a given host, never what a guest can observe of the
 * NIU, and may change or go without notice.
 */
static const Property arctic_niu_properties[] = {
    DEFINE_PROP_UINT32("node-id", ArcticNiuState, node_id, 0),
    DEFINE_PROP_BOOL("template", ArcticNiuState, template, false),
    DEFINE_PROP_BOOL("start-pause", ArcticNiuState, start_pause, false),
    /* the link to arctic-switch (niu-link.h) */
    DEFINE_PROP_CHR("chardev", ArcticNiuState, chr),
    DEFINE_PROP_STRING("link-socket", ArcticNiuState, link_cfg.socket),
    DEFINE_PROP_UINT32("link-reconnect-ms", ArcticNiuState,
                       link_cfg.reconnect_ms, 200),
    DEFINE_PROP_BOOL("link-rings", ArcticNiuState, link_cfg.rings, true),
    DEFINE_PROP_STRING("link-secret", ArcticNiuState, link_cfg.secret),
    DEFINE_PROP_UINT32("rx-credits", ArcticNiuState, link_cfg.rx_credits,
                       ARCTIC_LINK_DEFAULT_CREDITS),
    /* the end-to-end protocol (niu-e2e.h) */
    DEFINE_PROP_UINT32("lines", ArcticNiuState, e2e.cfg.lines,
                       ARCTIC_DEFAULT_LINES),
    DEFINE_PROP_UINT64("retry-timeout-ns", ArcticNiuState,
                       e2e.cfg.retry_timeout_ns, 2000000),
    DEFINE_PROP_UINT32("peer-timeout-ms", ArcticNiuState,
                       e2e.cfg.peer_timeout_ms, 10000),
    DEFINE_PROP_UINT32("refused-timeout-ms", ArcticNiuState,
                       e2e.cfg.refused_timeout_ms, 2000),
    DEFINE_PROP_UINT64("nack-backoff-ns", ArcticNiuState,
                       e2e.cfg.nack_backoff_ns, 10000),
    /* timed mode (docs/timed-mode.md; the defaults' sources: timing.h) */
    DEFINE_PROP_BOOL("timed", ArcticNiuState, time.enabled, false),
    DEFINE_PROP_UINT32("time-tx-ns", ArcticNiuState, time.tx_ns,
                       ARCTIC_TIME_TX_NS),
    DEFINE_PROP_UINT32("time-rx-ns", ArcticNiuState, time.rx_ns,
                       ARCTIC_TIME_RX_NS),
    DEFINE_PROP_UINT32("time-pci-mbytes", ArcticNiuState, time.pci_mbytes,
                       1000000 / ARCTIC_TIME_PCI_PS_PER_BYTE),
    DEFINE_PROP_UINT32("time-irq-ns", ArcticNiuState, time.irq_ns,
                       ARCTIC_TIME_IRQ_NS),
    /* tuning: the host, not the model */
    DEFINE_PROP_UINT64("x-poll-min-ns", ArcticNiuState, q.tx.cfg.poll_min_ns,
                       2000),
    DEFINE_PROP_UINT64("x-poll-max-ns", ArcticNiuState, q.tx.cfg.poll_max_ns,
                       1000000),
    DEFINE_PROP_UINT64("x-doorbell-coalesce-ns", ArcticNiuState,
                       q.tx.cfg.doorbell_coalesce_ns, 30000),
    DEFINE_PROP_BOOL("x-doorbell-posted", ArcticNiuState,
                     q.tx.cfg.doorbell_posted, false),
    DEFINE_PROP_UINT64("x-ack-delay-ns", ArcticNiuState,
                       link_cfg.ack_delay_ns, 250000),
    DEFINE_PROP_UINT64("x-link-busy-poll-ns", ArcticNiuState,
                       link_cfg.busy_poll_ns, 200000),
    DEFINE_PROP_BOOL("x-link-poll-yield", ArcticNiuState, poll_yield,
                     false),
    DEFINE_PROP_BOOL("x-link-kick-yield", ArcticNiuState,
                     link_cfg.kick_yield, false),
    DEFINE_PROP_BOOL("x-link-cpu-wake", ArcticNiuState, link_cfg.cpu_wake,
                     true),
    DEFINE_PROP_BOOL("x-link-direct", ArcticNiuState, link_cfg.direct, true),
};

static void niu_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);
    ResettableClass *rc = RESETTABLE_CLASS(klass);

    k->realize = niu_realize;
    k->config_write = niu_config_write;
    k->exit = niu_exit;
    k->vendor_id = ARCTIC_NIU_PCI_VENDOR_ID;
    k->device_id = ARCTIC_NIU_PCI_DEVICE_ID;
    k->revision = ARCTIC_NIU_PCI_REVISION;
    k->class_id = ARCTIC_NIU_PCI_CLASS;
    rc->phases.hold = niu_reset_hold;
    dc->vmsd = &vmstate_arctic_niu;
    dc->desc = "MIT StarT Arctic network interface unit";
    device_class_set_props(dc, arctic_niu_properties);
    set_bit(DEVICE_CATEGORY_NETWORK, dc->categories);
}

static void niu_instance_init(Object *obj)
{
    qemu_rec_mutex_init(&ARCTIC_NIU(obj)->lock);
    object_property_add(obj, "state", "ArcticNiuState",
                        niu_get_state, NULL, NULL, NULL);
}

static void niu_instance_finalize(Object *obj)
{
    qemu_rec_mutex_destroy(&ARCTIC_NIU(obj)->lock);
}

static const TypeInfo arctic_niu_info = {
    .name = TYPE_ARCTIC_NIU,
    .parent = TYPE_PCI_DEVICE,
    .instance_size = sizeof(ArcticNiuState),
    .class_init = niu_class_init,
    .instance_init = niu_instance_init,
    .instance_finalize = niu_instance_finalize,
    .interfaces = (InterfaceInfo[]) {
        { INTERFACE_CONVENTIONAL_PCI_DEVICE },
        { },
    },
};

static void niu_register_types(void)
{
    type_register_static(&arctic_niu_info);
}

type_init(niu_register_types)
