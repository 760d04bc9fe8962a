/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note OR MIT */
/*
 * User-space ABI of the arctic_niu driver: the ioctls of /dev/arctic-niuN
 * and the layout of its mmap() offsets.  Every open() of the device file
 * owns one virtual endpoint of the NIU; the process maps that endpoint's
 * queues (seed 002 section 2.1.1: HiTx, LoTx, HiRx, LoRx contiguous at
 * offset 0, DMATx at 4*N*128) and its user page (doorbell) and then sends
 * and receives without system calls.  Structures hold only fixed-width
 * types, are multiples of 8 bytes, and carry reserved fields that must be
 * zero so that they can grow.
 */
#ifndef _UAPI_ARCTIC_NIU_H
#define _UAPI_ARCTIC_NIU_H

#include <linux/types.h>
#include <linux/ioctl.h>

/* mmap() offsets of the device file (bytes, page aligned). */
#define ARCTIC_NIU_MMAP_QUEUES		0x00000	/* HiTx LoTx HiRx LoRx */
#define ARCTIC_NIU_MMAP_QUEUES_SIZE	0x20000	/* 4 * 256 * 128 */
#define ARCTIC_NIU_MMAP_DMA_TX		0x20000	/* DMATx, right after */
#define ARCTIC_NIU_MMAP_DMA_TX_SIZE	0x08000
#define ARCTIC_NIU_MMAP_USER_PAGE	0x40000	/* doorbell page, uncached */
#define ARCTIC_NIU_MMAP_USER_PAGE_SIZE	0x01000
#define ARCTIC_NIU_MMAP_DMA_WINDOW	0x80000	/* after ARCTIC_NIU_IOC_DMA_WINDOW */

/* ARCTIC_NIU_IOC_NODE_INFO: where this NIU sits in the network. */
struct arctic_niu_node_info {
	__u32 node_id;		/* this NIU's node number */
	__u32 num_nodes;	/* ports of the network (from the switch) */
	__u32 net_levels;	/* fat-tree levels */
	__u32 link_status;	/* NIU_LINK_STATUS register */
	__u32 endpoints;	/* virtual endpoints of the NIU */
	__u32 reserved[3];	/* zero */
};

/* ARCTIC_NIU_IOC_ENDPOINT_INFO: the endpoint this open file owns. */
struct arctic_niu_endpoint_info {
	__u32 endpoint;		/* 0..endpoints-1 */
	__u32 slots;		/* slots per queue (N) */
	__u32 slot_size;	/* bytes per slot */
	__u32 flags;		/* none defined yet: zero */
	__u64 queues_offset;	/* mmap offset and size of the queues */
	__u64 queues_size;
	__u64 dma_tx_offset;
	__u64 dma_tx_size;
	__u64 user_page_offset;
	__u64 user_page_size;
	__u64 reserved[2];	/* zero */
};

/*
 * ARCTIC_NIU_IOC_GET_ROUTE / SET_ROUTE: one route table entry (seed 002
 * section 4.4; the ROUTE_ENTRY layout of include/arctic/packet.h).  SET
 * needs CAP_NET_ADMIN and briefly stops the transmit datapath of the whole
 * NIU.  With ARCTIC_NIU_ROUTE_DEFAULT set, SET restores the entry computed
 * from the node's position and ignores @entry; GET returns the entry in use.
 * SET fails with EBUSY while the NIU is in raw mode (ARCTIC_NIU_IOC_RAW_MODE).
 */
struct arctic_niu_route {
	__u32 table;		/* 0 high priority (HiTx), 1 low (LoTx) */
	__u32 node;		/* destination node, < 256 */
	__u32 entry;		/* ROUTE_ENTRY value */
	__u32 flags;
	__u64 reserved;		/* zero */
};

/* arctic_niu_route.flags */
#define ARCTIC_NIU_ROUTE_DEFAULT	0x1

/*
 * ARCTIC_NIU_IOC_COUNTERS: the NIU's counters (enum arctic_counter of
 * include/arctic/niu-hw.h) and sticky error causes.  Room for 32; the
 * device's number is in @num_counters and the rest reads 0.
 */
#define ARCTIC_NIU_MAX_COUNTERS		32
struct arctic_niu_counters {
	__u32 num_counters;	/* out: counters the device has */
	__u32 error_cause;	/* out: NIU_ERROR_CAUSE */
	__u32 error_info;	/* out: NIU_ERROR_INFO */
	__u32 reserved;		/* zero */
	__u32 counter[ARCTIC_NIU_MAX_COUNTERS];
};

/*
 * ARCTIC_NIU_IOC_DMA_WINDOW: give this endpoint a remote-DMA window (seed
 * 002 section 4.3): @size bytes of memory contiguous in bus space, which
 * the NIU reads the source of this endpoint's DMA requests from and writes
 * the data of DMA packets for it into.  @base_vir is the address the
 * process will name the window's first byte by in DMA requests, normally
 * where it maps the window (mmap() at ARCTIC_NIU_MMAP_DMA_WINDOW, @size
 * bytes, MAP_SHARED).  Once per open file; freed when the file is closed.
 * Errors: EINVAL (size other than ARCTIC_NIU_DMA_WINDOW_SIZE, base_vir not
 * a multiple of it, reserved fields not zero), EBUSY (already has one, or
 * the NIU is in raw mode), ENOMEM.
 */
#define ARCTIC_NIU_DMA_WINDOW_SIZE	0x400000	/* 4 MiB, the minimum */
struct arctic_niu_dma_window {
	__u64 size;		/* in: ARCTIC_NIU_DMA_WINDOW_SIZE */
	__u64 base_vir;		/* in: multiple of the size */
	__u64 mmap_offset;	/* out: ARCTIC_NIU_MMAP_DMA_WINDOW */
	__u64 reserved[2];	/* zero */
};

/*
 * ARCTIC_NIU_IOC_RAW_MODE: switch the whole NIU between MPI mode and dMPI
 * raw mode (seed 002 sections 2.3, 4.1.2, 6.1).  In raw mode both
 * datapaths are OFF, with RxCtrl's RAW bit set: the queues in memory are
 * neither read nor written, and the process sends and receives raw Arctic
 * packets through the FIFO access points of endpoint 0's user page, which
 * it has mapped at ARCTIC_NIU_MMAP_USER_PAGE (map it readable as well as
 * writable: the receive FIFOs and status registers are read).  Only the
 * owner of endpoint 0 may switch, and only while no other endpoint is
 * open; while the NIU is raw, open() of another endpoint fails with EBUSY.
 * Switching to the mode the NIU is in does nothing.  Leaving raw mode,
 * explicitly or by closing the file, turns both datapaths on again; what
 * was still in the raw receive FIFOs then (acknowledged to its senders,
 * so lost) is read out and dropped, and @discarded says how many words.
 * Errors: EINVAL (unknown mode, flags or reserved fields not zero), EACCES
 * (the file does not own endpoint 0), EBUSY (another endpoint is open, or
 * a route or DMA window change, which restarts the datapaths, was asked
 * for in raw mode: see SET_ROUTE, DMA_WINDOW), ETIMEDOUT (the transmit
 * datapath did not drain, link down: the NIU stays in MPI mode), EIO (the
 * device refused a register write).
 */
#define ARCTIC_NIU_MODE_MPI		0
#define ARCTIC_NIU_MODE_RAW		1
struct arctic_niu_raw_mode {
	__u32 mode;		/* in: ARCTIC_NIU_MODE_MPI or _RAW */
	__u32 flags;		/* in: zero */
	__u32 discarded;	/* out: receive FIFO words dropped on leaving */
	__u32 reserved;		/* zero */
};

/*
 * ARCTIC_NIU_IOC_KEEP_UNREAD: messages a program's library took from a
 * receive queue ahead of the program (waiting for one message, it keeps
 * the others aside) and the program never took.  When the file is closed
 * they go back to the front of that queue for the endpoint's next
 * program, ahead of the messages the NIU delivered and nobody read, which
 * stay too: a peer's next program may already be talking to ours, and
 * the NIU acknowledged its messages, so nothing else would send them
 * again.  @slots points to @count receive slots (struct arctic_mpi_slot,
 * 128 bytes each, as the NIU wrote them: VALID set, LAP ignored), oldest
 * first, at most ARCTIC_N (a queue's slots); a later call for the same
 * priority replaces the earlier one.  If they and the unread messages are
 * more than a queue holds, the oldest are dropped, with a kernel warning.
 * Errors: EINVAL (priority not 0 or 1, count above ARCTIC_N, a slot
 * without VALID, flags not zero), EFAULT, ENOMEM.
 */
struct arctic_niu_keep_unread {
	__u32 priority;		/* in: 0 high (HiRx), 1 low (LoRx) */
	__u32 count;		/* in: slots at @slots */
	__u64 slots;		/* in: user address of the slots */
	__u32 flags;		/* in: zero */
	__u32 reserved;		/* zero */
};

/*
 * ARCTIC_NIU_IOC_TX_POLL: whether the NIU polls this endpoint's Tx queues
 * (a __u32, 1 or 0).  Open sets 1: a program of seed 002's kind only writes
 * slots and valid bits, and the NIU finds them by polling, within the
 * device's x-poll-max-ns.  A program that rings USER_DOORBELL for every
 * slot it writes behind a taken one (docs/programming-guide.md §10.1;
 * libniu does) sets 0: its slots are read when it rings, and a node whose
 * programs all do so has a poll that stops, so its QEMU is not woken every
 * millisecond while the guest computes.  A program that sets 0 and then
 * writes a slot without ringing waits until something else rings.
 * Errors: EINVAL (not 0 or 1), EFAULT.
 */

#define ARCTIC_NIU_IOC_MAGIC		0xA7
#define ARCTIC_NIU_IOC_NODE_INFO \
	_IOR(ARCTIC_NIU_IOC_MAGIC, 0x00, struct arctic_niu_node_info)
#define ARCTIC_NIU_IOC_ENDPOINT_INFO \
	_IOR(ARCTIC_NIU_IOC_MAGIC, 0x01, struct arctic_niu_endpoint_info)
#define ARCTIC_NIU_IOC_GET_ROUTE \
	_IOWR(ARCTIC_NIU_IOC_MAGIC, 0x02, struct arctic_niu_route)
#define ARCTIC_NIU_IOC_SET_ROUTE \
	_IOW(ARCTIC_NIU_IOC_MAGIC, 0x03, struct arctic_niu_route)
#define ARCTIC_NIU_IOC_COUNTERS \
	_IOR(ARCTIC_NIU_IOC_MAGIC, 0x04, struct arctic_niu_counters)
#define ARCTIC_NIU_IOC_DMA_WINDOW \
	_IOWR(ARCTIC_NIU_IOC_MAGIC, 0x05, struct arctic_niu_dma_window)
#define ARCTIC_NIU_IOC_RAW_MODE \
	_IOWR(ARCTIC_NIU_IOC_MAGIC, 0x06, struct arctic_niu_raw_mode)
#define ARCTIC_NIU_IOC_KEEP_UNREAD \
	_IOW(ARCTIC_NIU_IOC_MAGIC, 0x07, struct arctic_niu_keep_unread)
#define ARCTIC_NIU_IOC_TX_POLL \
	_IOW(ARCTIC_NIU_IOC_MAGIC, 0x08, __u32)

#endif /* _UAPI_ARCTIC_NIU_H */
