/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU: the NIU's bus-master access to guest memory.
 *
 * The queue engine (niu-tx.c, niu-rx.c) reads and writes guest RAM only
 * through this: slots and their header words, and remote-DMA windows
 * (seed 002 §3.3), translated from the endpoint's window registers by
 * niu_dma_translate().  It reaches guest RAM and nothing else, so that no
 * delivery runs MMIO side effects and the link thread, which holds the
 * device lock but not the BQL, never needs the BQL; and it maps each page
 * it reaches once, until a memory map changes.  It knows nothing of the
 * device above it but the PCI function it masters for.  Every call runs
 * under the lock it is given, which its memory listener takes too.
 */
#ifndef HW_NET_ARCTIC_NIU_DMA_H
#define HW_NET_ARCTIC_NIU_DMA_H

#include "qemu/thread.h"
#include "exec/memory.h"
#include "hw/pci/pci_device.h"
#include "system/dma.h"

/*
 * A guest page that the NIU's DMA reached, mapped once (niu_dma_map()):
 * a DMA block's 32 data packets, or a queue's slots, then translate
 * their address once per page instead of twice per 64-byte access.
 */
typedef struct NiuDmaPage {
    MemoryRegionCache cache;
    dma_addr_t base;            /* bus address of the page */
    bool mapped;
} NiuDmaPage;

enum {
    /*
     * Pages mapped for each direction, by a hash of their address into
     * sets of four: the Tx scan reads the head slot of each endpoint's
     * three queues, each queue in pages of its own, then a DMA request's
     * block; a delivery writes a window and a queue's slot.  Some twenty
     * pages in all, which two ways a set did not hold without thrashing.
     */
    NIU_DMA_SETS = 32,
    NIU_DMA_WAYS = 4,
};

/*
 * An endpoint's remote-DMA window (EP_DMA_BASE_PHY, EP_DMA_BASE_VIR,
 * EP_DMA_RANGE_MASK; seed 002 §3.3): a range mask of 0 is no window.
 */
typedef struct NiuDmaWindow {
    uint64_t base_phy;
    uint64_t base_vir;
    uint64_t range_mask;
} NiuDmaWindow;

typedef struct NiuDma {
    PCIDevice *pdev;            /* the bus master */
    QemuRecMutex *lock;
    uint16_t node_id;           /* for trace events */
    /*
     * Pages read and pages written ([false] and [true]), by a hash of
     * their address.  Each is mapped while it is guest RAM in the memory
     * map it was mapped in: the listener drops them all when any memory
     * map changes (a BAR moves, bus mastering is turned off).
     */
    NiuDmaPage page[2][NIU_DMA_SETS][NIU_DMA_WAYS];
    uint8_t page_next[2][NIU_DMA_SETS];     /* way to replace next */
    MemoryListener listener;
} NiuDma;

void niu_dma_init(NiuDma *d, PCIDevice *pdev, QemuRecMutex *lock,
                  uint16_t node_id);
void niu_dma_cleanup(NiuDma *d);

MemTxResult niu_dma_rw(NiuDma *d, dma_addr_t addr, void *buf,
                       dma_addr_t len, DMADirection dir);

static inline MemTxResult niu_dma_read(NiuDma *d, dma_addr_t addr,
                                       void *buf, dma_addr_t len)
{
    return niu_dma_rw(d, addr, buf, len, DMA_DIRECTION_TO_DEVICE);
}

static inline MemTxResult niu_dma_write(NiuDma *d, dma_addr_t addr,
                                        const void *buf, dma_addr_t len)
{
    return niu_dma_rw(d, addr, (void *)buf, len, DMA_DIRECTION_FROM_DEVICE);
}

/* A slot's header word, as one 32-bit access (host order). */
MemTxResult niu_dma_load_header(NiuDma *d, dma_addr_t addr, uint32_t *val);
MemTxResult niu_dma_store_header(NiuDma *d, dma_addr_t addr, uint32_t val);

bool niu_dma_translate(const NiuDmaWindow *w, uint64_t vaddr,
                       uint64_t len, uint64_t *phys);

#endif /* HW_NET_ARCTIC_NIU_DMA_H */
