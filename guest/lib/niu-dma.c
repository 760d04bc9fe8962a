/* SPDX-License-Identifier: MIT */
/*
 * libniu: remote DMA: the endpoint's window and its requests (niu.h documents the interface; niu-internal.h the
 * endpoint's internals that the library's files share).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "niu-internal.h"

/* --- remote DMA -------------------------------------------------------- */

int niu_dma_window(struct niu_endpoint *ep)
{
	const size_t size = ARCTIC_NIU_DMA_WINDOW_SIZE;
	struct arctic_niu_dma_window window = { .size = size };
	char *reserved, *aligned;
	void *mapped;
	int err;

	if (ep->dma_window)
		return -EBUSY;
	/*
	 * The NIU wants the window's virtual base 4 MiB aligned; map it at
	 * such an address so that pointers into it are its DMA addresses.
	 */
	reserved = mmap(NULL, 2 * size, PROT_NONE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (reserved == MAP_FAILED)
		return -errno;
	aligned = (char *)(((uintptr_t)reserved + size - 1) & ~(size - 1));
	window.base_vir = (uintptr_t)aligned;
	if (ioctl(ep->fd, ARCTIC_NIU_IOC_DMA_WINDOW, &window) < 0) {
		err = -errno;
		munmap(reserved, 2 * size);
		return err;
	}
	mapped = mmap(aligned, size, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_FIXED, ep->fd,
		      (off_t)window.mmap_offset);
	if (mapped == MAP_FAILED) {
		err = -errno;
		munmap(reserved, 2 * size);
		return err;
	}
	if (aligned > reserved)
		munmap(reserved, aligned - reserved);
	if (aligned + size < reserved + 2 * size)
		munmap(aligned + size, reserved + 2 * size - (aligned + size));
	ep->dma_window = mapped;
	return 0;
}

static int is_in_window(const struct niu_endpoint *ep, const void *p)
{
	const char *base = ep->dma_window;

	return base && (const char *)p >= base &&
	       (const char *)p + ARCTIC_D <= base + ARCTIC_NIU_DMA_WINDOW_SIZE;
}

int niu_dma_send(struct niu_endpoint *ep, uint32_t dest,
		 uint32_t dest_endpoint, uint32_t type, uint32_t command,
		 uint64_t target, const void *source,
		 const uint32_t *payload, unsigned int length)
{
	volatile struct arctic_dma_request *slot;
	unsigned int i, spins = 0;
	enum niu_time_kind was;

	if (dest >= ARCTIC_S || dest_endpoint >= ARCTIC_ENDPOINTS ||
	    type >= NIU_TYPE_LIBRARY_MIN || length > NIU_MAX_PAYLOAD ||
	    (length && !payload) || target % ARCTIC_D ||
	    (uintptr_t)source % ARCTIC_D || !is_in_window(ep, source))
		return -EINVAL;
	was = niu_lib_time_enter(ep, NIU_TIME_SEND);
	slot = &ep->dma_tx[ep->dma_tx_head];
	while (slot->header & ARCTIC_MPI_VALID) {
		niu_lib_keep_incoming(ep);
		niu_lib_idle(ep, &spins, NIU_WAIT_TX);
	}
	niu_lib_time_enter(ep, NIU_TIME_SEND);	/* after a wait */
	atomic_thread_fence(memory_order_acquire);
	slot->command = command;
	slot->target = target;
	slot->source = (uintptr_t)source;
	for (i = 0; i < length; i++)
		slot->payload[i] = payload[i];
	niu_lib_publish(&slot->header, niu_lib_header(dest, dest_endpoint,
						      type, ARCTIC_MODE_DMA,
						      length));
	ep->dma_tx_head = (ep->dma_tx_head + 1) % ARCTIC_N;
	niu_lib_ring_doorbell(ep,
		      &ep->dma_tx[niu_lib_slot_before_filled(ep->dma_tx_head)].header,
		      R_USER_DOORBELL_DMA_TX_MASK);
	niu_lib_time_leave(ep, was);
	return 0;
}
