/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU: the NIU's bus-master access to guest memory (niu-dma.h).
 *
 * Every access the queue engine makes to guest RAM (slots, headers,
 * remote-DMA windows) goes through niu_dma_rw() and the header load and
 * store here.  A page reached once stays mapped (niu_dma_map()) until any
 * memory map changes; anything that is not guest RAM is refused.
 */

#include "qemu/osdep.h"
#include "qemu/lockable.h"
#include "qemu/rcu.h"
#include "exec/target_page.h"
#include "system/dma.h"
#include "trace.h"

#include "niu-dma.h"

/*
 * Whether [@addr, @addr + @len) of the NIU's bus-master view is guest RAM
 * (writable RAM for @write) all along.
 */
static bool niu_dma_is_ram(NiuDma *d, dma_addr_t addr,
                           dma_addr_t len, bool write)
{
    AddressSpace *as = pci_get_address_space(d->pdev);

    RCU_READ_LOCK_GUARD();
    while (len) {
        hwaddr xlat, chunk = len;
        MemoryRegion *mr = address_space_translate(as, addr, &xlat, &chunk,
                                                   write,
                                                   MEMTXATTRS_UNSPECIFIED);

        if (!chunk ||
            !memory_access_is_direct(mr, write, MEMTXATTRS_UNSPECIFIED)) {
            return false;
        }
        addr += chunk;
        len -= chunk;
    }
    return true;
}

/* niu_dma_is_ram(), traced when it is not. */
static bool niu_dma_reaches_ram(NiuDma *d, dma_addr_t addr,
                                dma_addr_t len, bool write)
{
    if (!niu_dma_is_ram(d, addr, len, write)) {
        trace_arctic_niu_dma_not_ram(d->node_id, addr, len, write);
        return false;
    }
    return true;
}

/*
 * The guest physical address of @len bytes at @vaddr in DMA window @w
 * (EP_DMA_BASE_VIR_*, EP_DMA_BASE_PHY_*, EP_DMA_RANGE_MASK_*), or false
 * if they are not all in it.
 */
bool niu_dma_translate(const NiuDmaWindow *w, uint64_t vaddr,
                       uint64_t len, uint64_t *phys)
{
    uint64_t off = vaddr - w->base_vir;

    /* A mask of 0 means no window was registered (the smallest is 4 MiB). */
    if (w->range_mask == 0 || len == 0 || vaddr < w->base_vir ||
        off > w->range_mask || len - 1 > w->range_mask - off ||
        off + (len - 1) > UINT64_MAX - w->base_phy) {
        /*
         * The last check never fails for a window the registers took
         * (they refuse one that wraps); it keeps the sum below honest.
         */
        return false;
    }
    *phys = w->base_phy + off;
    return true;
}

/* Drop @p's mapping, if it holds one. */
static void niu_dma_page_unmap(NiuDmaPage *p)
{
    if (p->mapped) {
        address_space_cache_destroy(&p->cache);
        p->mapped = false;
    }
}

/* Drop every mapped page (dma_page). */
static void niu_dma_unmap(NiuDma *d)
{
    for (unsigned write = 0; write < ARRAY_SIZE(d->page); write++) {
        for (unsigned set = 0; set < NIU_DMA_SETS; set++) {
            for (unsigned way = 0; way < NIU_DMA_WAYS; way++) {
                niu_dma_page_unmap(&d->page[write][set][way]);
            }
        }
    }
}

/*
 * A memory map changed (any: MemoryListener.commit runs for every
 * transaction, under the BQL): a mapped page may no longer be RAM, or no
 * longer the NIU's to reach (bus mastering off).  The next access maps
 * it again, or takes the slow path that refuses it.
 */
static void niu_dma_listener_commit(MemoryListener *listener)
{
    NiuDma *d = container_of(listener, NiuDma, listener);
    QEMU_LOCK_GUARD(d->lock);

    niu_dma_unmap(d);
}

/*
 * The page of @addr in the NIU's bus-master view, mapped for reading or
 * for @write, with @addr's @offset in it: NULL if [@addr, @addr + @len)
 * leaves the page or the page is not guest RAM (writable RAM for
 * @write); the caller then takes the slow path, which checks and
 * translates each access and refuses what is not RAM.
 */
static MemoryRegionCache *niu_dma_map(NiuDma *d, dma_addr_t addr,
                                      dma_addr_t len, bool write,
                                      hwaddr *offset)
{
    unsigned bits = qemu_target_page_bits();
    dma_addr_t size = (dma_addr_t)1 << bits;
    dma_addr_t base = addr & ~(size - 1);
    unsigned set = ((base >> bits) * 0x9e3779b97f4a7c15ull) >>
                   (64 - ctz32(NIU_DMA_SETS));
    NiuDmaPage *ways = d->page[write][set], *p;
    uint8_t *next = &d->page_next[write][set];

    QEMU_BUILD_BUG_ON(NIU_DMA_SETS & (NIU_DMA_SETS - 1));
    if (len > size - (addr - base)) {
        return NULL;
    }
    for (p = ways; p < ways + NIU_DMA_WAYS; p++) {
        if (p->mapped && p->base == base) {
            *offset = addr - base;
            return &p->cache;
        }
    }
    /* Round robin: the way mapped longest ago goes. */
    p = &ways[*next];
    *next = (*next + 1) % NIU_DMA_WAYS;
    niu_dma_page_unmap(p);
    /* Only RAM gets a pointer (cache.ptr): anything else is refused. */
    if (address_space_cache_init(&p->cache,
                                 pci_get_address_space(d->pdev),
                                 base, size, write) < size ||
        !p->cache.ptr) {
        address_space_cache_destroy(&p->cache);
        return NULL;
    }
    p->base = base;
    p->mapped = true;
    trace_arctic_niu_dma_map(d->node_id, base, write);
    *offset = addr - base;
    return &p->cache;
}

/*
 * The NIU's DMA reaches guest RAM only.  A queue, slot or DMA window over
 * anything else (the NIU's own BARs, another device's registers, nothing)
 * fails as an access error, which the callers report as ERROR_CAUSE.DMA:
 * so no delivery can run register side effects of this or another device
 * in its middle, and the link thread, which holds the device lock but not
 * the BQL, never needs the BQL that MMIO dispatch would take.  (A guest
 * that remaps its memory while the NIU's DMA runs can still slip MMIO
 * under a check made just before, or have an access that was under way
 * still reach the RAM it was mapped to; it would only hurt itself.)
 *
 * An access within one page goes through that page's mapping
 * (niu_dma_map()): a memcpy, the dirty bits and the barrier that
 * pci_dma_rw() gives each access, and no address translation.
 */
MemTxResult niu_dma_rw(NiuDma *d, dma_addr_t addr, void *buf,
                       dma_addr_t len, DMADirection dir)
{
    bool write = dir == DMA_DIRECTION_FROM_DEVICE;
    MemoryRegionCache *page;
    hwaddr off;

    if (!len) {
        return MEMTX_OK;
    }
    page = niu_dma_map(d, addr, len, write, &off);
    if (page) {
        /* As dma_barrier() in pci_dma_rw(): ordered with the guest's view. */
        smp_mb();
        if (write) {
            address_space_write_cached(page, off, buf, len);
            address_space_cache_invalidate(page, off, len);
        } else {
            address_space_read_cached(page, off, buf, len);
        }
        return MEMTX_OK;
    }
    if (!niu_dma_reaches_ram(d, addr, len, write)) {
        return MEMTX_ACCESS_ERROR;
    }
    return pci_dma_rw(d->pdev, addr, buf, len, dir,
                      MEMTXATTRS_UNSPECIFIED);
}

/*
 * A slot's header word, loaded or stored as one 32-bit access, as a CPU
 * makes it.  The seed's handshake (§3.1) hands a slot from one side to the
 * other through that word alone, so a store of it must be single-copy
 * atomic: niu_dma_rw() copies with memcpy(), which (glibc, 4 to 7 bytes)
 * stores the word twice, and a consumer that reads and clears the header
 * between the two stores sees it come back valid (docs/guest.md, "Stale
 * receive headers").  stl_le_p(), which address_space_stl_le() and its
 * cached form use for RAM, stores it with one store.
 */
MemTxResult niu_dma_load_header(NiuDma *d, dma_addr_t addr,
                                uint32_t *val)
{
    MemTxResult res = MEMTX_OK;
    MemoryRegionCache *page;
    hwaddr off;

    page = niu_dma_map(d, addr, 4, false, &off);
    if (page) {
        *val = address_space_ldl_le_cached(page, off, MEMTXATTRS_UNSPECIFIED,
                                           &res);
        return res;
    }
    if (!niu_dma_reaches_ram(d, addr, 4, false)) {
        return MEMTX_ACCESS_ERROR;
    }
    *val = address_space_ldl_le(pci_get_address_space(d->pdev), addr,
                                MEMTXATTRS_UNSPECIFIED, &res);
    return res;
}

MemTxResult niu_dma_store_header(NiuDma *d, dma_addr_t addr,
                                 uint32_t val)
{
    MemTxResult res = MEMTX_OK;
    MemoryRegionCache *page;
    hwaddr off;

    page = niu_dma_map(d, addr, 4, true, &off);
    /* Whatever the slot holds must be visible before the header (§3.1). */
    smp_wmb();
    if (page) {
        address_space_stl_le_cached(page, off, val, MEMTXATTRS_UNSPECIFIED,
                                    &res);
        address_space_cache_invalidate(page, off, 4);
        return res;
    }
    if (!niu_dma_reaches_ram(d, addr, 4, true)) {
        return MEMTX_ACCESS_ERROR;
    }
    address_space_stl_le(pci_get_address_space(d->pdev), addr, val,
                         MEMTXATTRS_UNSPECIFIED, &res);
    return res;
}

/*
 * ------------------------------------------------------------------------
 * Life cycle
 */

void niu_dma_init(NiuDma *d, PCIDevice *pdev, QemuRecMutex *lock,
                  uint16_t node_id)
{
    d->pdev = pdev;
    d->lock = lock;
    d->node_id = node_id;
    d->listener = (MemoryListener) {
        .name = "arctic-niu-dma",
        .commit = niu_dma_listener_commit,
    };
    memory_listener_register(&d->listener, pci_get_address_space(pdev));
}

void niu_dma_cleanup(NiuDma *d)
{
    memory_listener_unregister(&d->listener);
    niu_dma_unmap(d);
}
