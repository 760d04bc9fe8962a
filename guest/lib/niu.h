/* SPDX-License-Identifier: MIT */
/*
 * libniu: the user-level interface to an Arctic NIU endpoint, in the terms
 * of seed 002 section 3.  A program opens one endpoint (a virtual NIU of its
 * own, owned through /dev/arctic-niuN), then sends and receives messages of
 * up to 20 words at high or low priority by writing and reading 128-byte
 * slots in its mapped queues: no system call per message.  Sends ring the
 * endpoint's doorbell (the fast path of seed 002 section 3.1.1) so the NIU
 * does not wait for its next poll.  Receives are polls of the valid bit;
 * niu_recv() spins until a message arrives.
 *
 * Message types NIU_TYPE_LIBRARY_MIN..127 are kept for the library itself
 * (barrier, collectives, block transfers); niu_recv() never returns them,
 * and a user message that arrives while the library waits for one of its
 * own is kept aside in order and returned later.  A send that finds its
 * Tx slot still owned by the NIU keeps taking incoming messages meanwhile
 * (seed 002 footnote 3): two nodes that both send more than a queue holds
 * to each other would otherwise wait on each other forever.
 *
 * On top of that: collectives (barrier, broadcast, gather, reduce,
 * all-to-all), which every node of the network calls in the same order,
 * and active messages in the manner of StarT-JR's JAM (seed 003 Table 1):
 * a handler table indexed by message type, requests at low priority,
 * replies at high priority, and block transfers into registered segments
 * whose handler runs when the segment is full.
 *
 * Remote DMA (seed 002 section 3.3): niu_dma_window() gives the endpoint
 * its 4 MiB window, mapped at an address that is also its DMA name, and
 * niu_dma_send() moves 2048-byte blocks from it into a peer's window.
 *
 * Not thread-safe: one thread per endpoint.  The raw FIFO mode of seed 002
 * section 2.3 is not wrapped here.
 */
#ifndef NIU_H
#define NIU_H

#include <stdint.h>

#include "arctic/niu-hw.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Priorities; HI is never blocked by LO anywhere in the network. */
enum niu_priority {
	NIU_HI = 0,
	NIU_LO = 1,
	NIU_NUM_PRIORITIES = 2,
};

enum {
	NIU_MAX_PAYLOAD = ARCTIC_MAX_PAYLOAD,	/* words per message */
	NIU_MAX_TYPE = 127,			/* TYPE is 7 bits */
	NIU_TYPE_LIBRARY_MIN = 120,		/* 120..127: libniu's own */
	NIU_STASH_SLOTS = 1024,			/* kept aside, at first */
	NIU_STASH_MAX = 1 << 20,		/* kept aside, at most */
	NIU_AM_SEGMENTS = 16,			/* block-transfer targets */
};

/* A received message (seed 002 section 3.2.2's outputs). */
struct niu_msg {
	uint32_t source;		/* node that sent it */
	uint32_t endpoint;		/* endpoint it was sent to (ours) */
	uint32_t type;
	uint32_t command[2];
	uint32_t length;		/* payload words, 0..20 */
	uint32_t payload[NIU_MAX_PAYLOAD];
};

/* Messages received while waiting for something else, oldest first. */
struct niu_stash {
	struct niu_msg *msgs;
	unsigned int head, count, capacity;
};

struct niu_endpoint;

/*
 * An active-message handler: @msg is the request or reply (its source,
 * type, command words and up to 20 argument words in payload).  A request
 * handler may send one reply with niu_am_reply(); a reply handler must not
 * send at all, which is what keeps the two priorities free of deadlock.
 */
typedef void (*niu_am_handler)(struct niu_endpoint *ep,
			       const struct niu_msg *msg);

/*
 * Runs on the receiving node when a segment has received all the words it
 * was opened for (CMAM's transfer counter reaching zero).
 */
typedef void (*niu_am_segment_handler)(struct niu_endpoint *ep,
				       unsigned int segment, void *arg);

/* A block-transfer target (seed 003 Table 1, JAM_xfer/JAM_mfer). */
struct niu_am_segment {
	uint32_t *base;			/* NULL: not open */
	uint32_t words;			/* size */
	uint32_t remaining;		/* words still expected */
	niu_am_segment_handler done;
	void *arg;
};

/* An open endpoint.  Fields are read-only for the caller. */
struct niu_endpoint {
	int fd;
	uint32_t node;			/* this node */
	uint32_t num_nodes;		/* nodes in the network */
	uint32_t endpoint;		/* our endpoint number */
	volatile struct arctic_mpi_slot *tx[NIU_NUM_PRIORITIES];
	volatile struct arctic_mpi_slot *rx[NIU_NUM_PRIORITIES];
	volatile struct arctic_dma_request *dma_tx;
	volatile uint32_t *doorbell;	/* NULL: rely on the NIU's polling */
	uint32_t dma_tx_head;		/* next DMATx slot we fill */
	void *dma_window;		/* NULL until niu_dma_window() */
	uint32_t tx_head[NIU_NUM_PRIORITIES];	/* next slot we fill */
	uint32_t rx_tail[NIU_NUM_PRIORITIES];	/* next slot we read */
	struct niu_stash stash[NIU_NUM_PRIORITIES];
	unsigned int idle_sleep_us;	/* see niu_set_idle_sleep() */
	uint32_t barrier_epoch;
	uint32_t collective_epoch;	/* collectives called so far */
	niu_am_handler am_handlers[NIU_TYPE_LIBRARY_MIN];
	unsigned int am_handler_count;	/* handlers and open segments */
	unsigned int am_depth;		/* >0 while a handler runs */
	struct niu_am_segment am_segments[NIU_AM_SEGMENTS];
	uint64_t am_errors;		/* transfers refused (bad segment) */
	void *queues;			/* the mmap()ed queue view */
	void *user_page;		/* the mmap()ed doorbell page */
};

/*
 * Open an endpoint of the NIU behind @path (NULL: /dev/arctic-niu0) and map
 * its queues and doorbell.  Returns 0 or a negative errno (-EBUSY when all
 * endpoints are taken, -ENOLINK when the switch is not reachable).
 */
int niu_open(struct niu_endpoint *ep, const char *path);

/* Unmap and release the endpoint; the driver empties its queues. */
void niu_close(struct niu_endpoint *ep);

/*
 * Send @length (0..20) payload words to endpoint @dest_endpoint of node
 * @dest at priority @prio, with a user @type (0..119) and two command
 * words.  Waits while the next Tx slot is still owned by the NIU (seed 002
 * section 3.2.1 step 1).  Returns 0 or -EINVAL for a bad argument.
 */
int niu_send(struct niu_endpoint *ep, enum niu_priority prio, uint32_t dest,
	     uint32_t dest_endpoint, uint32_t type, uint32_t command0,
	     uint32_t command1, const uint32_t *payload, unsigned int length);

/* Take the next user message of @prio if there is one: 1 taken, 0 none. */
int niu_try_recv(struct niu_endpoint *ep, enum niu_priority prio,
		 struct niu_msg *msg);

/* Wait for the next user message of @prio. Returns 0. */
int niu_recv(struct niu_endpoint *ep, enum niu_priority prio,
	     struct niu_msg *msg);

/*
 * Wait for the next user message of either priority, high first; stores
 * the priority it came on in @prio if not NULL.
 */
int niu_recv_any(struct niu_endpoint *ep, struct niu_msg *msg,
		 enum niu_priority *prio);

/*
 * Wait until every node 0..num_nodes-1 has entered the barrier (the same
 * endpoint number on every node takes part).  Dissemination algorithm:
 * ceil(log2 n) rounds of one high-priority message each.  Returns 0, or
 * -ENOSPC when too many user messages arrived meanwhile to keep aside.
 */
int niu_barrier(struct niu_endpoint *ep);

/*
 * Collectives.  Every node 0..num_nodes-1 calls the same ones in the same
 * order with matching sizes; their data travels at low priority in
 * messages of 20 words tagged with a per-collective number, so messages of
 * a later collective that arrive early are kept aside, not mistaken.
 * Each returns 0, -EINVAL for a bad argument or -EPROTO when a message did
 * not fit the sizes given (a peer called with other sizes).
 */

/*
 * The general exchange: send @send_words[p] words from @send[p] to every
 * node p and receive @recv_words[p] words from every node p into @recv[p]
 * (arrays of num_nodes entries; a zero count needs no buffer).  The node's
 * own block is copied and must have equal counts.  Sends go round-robin
 * over the peers while incoming messages are taken, so no pair of nodes
 * waits on each other whatever the sizes.
 */
int niu_alltoallv(struct niu_endpoint *ep, const uint32_t *const send[],
		  const size_t send_words[], uint32_t *const recv[],
		  const size_t recv_words[]);

/*
 * All-to-all personalised exchange of @words words per pair: block p of
 * @send (words p*@words..) goes to node p, block p of @recv comes from it.
 */
int niu_alltoall(struct niu_endpoint *ep, const uint32_t *send,
		 uint32_t *recv, size_t words);

/* Copy @words words of @buf on node @root into @buf on every node. */
int niu_bcast(struct niu_endpoint *ep, uint32_t root, uint32_t *buf,
	      size_t words);

/*
 * Collect @words words of @send from every node into @recv on @root,
 * node p's at @recv + p * @words (@recv is ignored elsewhere).
 */
int niu_gather(struct niu_endpoint *ep, uint32_t root, const uint32_t *send,
	       uint32_t *recv, size_t words);

/* Element types and operators of niu_reduce(). */
enum niu_reduce_op {
	NIU_SUM_F64,	/* double */
	NIU_MAX_F64,
	NIU_SUM_I64,	/* int64_t */
	NIU_MAX_I64,
};

/*
 * Combine the @count 8-byte elements of @buf element-wise over all nodes
 * with @op; the result replaces @buf on @root (elsewhere @buf is kept).
 * Contributions are combined in node order, so a floating-point sum is the
 * same on every run.
 */
int niu_reduce(struct niu_endpoint *ep, uint32_t root, enum niu_reduce_op op,
	       void *buf, size_t count);

/* niu_reduce() with the result on every node. */
int niu_allreduce(struct niu_endpoint *ep, enum niu_reduce_op op, void *buf,
		  size_t count);

/*
 * Active messages.  A message whose type has a handler is an active
 * message: niu_am_poll() runs the handler instead of leaving it to
 * niu_recv().  command[0] of a request carries the sender's endpoint, so
 * the reply finds it.
 */

/* Set (or with NULL clear) the handler of user @type (0..119). */
int niu_am_register(struct niu_endpoint *ep, uint32_t type,
		    niu_am_handler handler);

/*
 * Send a request (low priority) to node @dest, same endpoint number as
 * ours, running handler @type there with @nargs (0..20) argument words.
 * While the Tx queue is full it runs incoming handlers.  Returns 0 or
 * -EINVAL.
 */
int niu_am_request(struct niu_endpoint *ep, uint32_t dest, uint32_t type,
		   const uint32_t *args, unsigned int nargs);

/* Reply (high priority) to the sender of request @to: handler @type. */
int niu_am_reply(struct niu_endpoint *ep, const struct niu_msg *to,
		 uint32_t type, const uint32_t *args, unsigned int nargs);

/*
 * Run the handlers of every active message and block transfer that has
 * arrived (replies first); others are kept for niu_recv().  Returns how
 * many ran.
 */
int niu_am_poll(struct niu_endpoint *ep);

/*
 * Open segment @segment (0..15) on this node: @words words at @base,
 * expecting @words words of transfers, after which @done(@arg) runs from
 * niu_am_poll().  Opening an open segment starts its count again.
 */
int niu_am_segment_open(struct niu_endpoint *ep, unsigned int segment,
			uint32_t *base, uint32_t words,
			niu_am_segment_handler done, void *arg);

/* Close @segment: later transfers to it are counted in am_errors. */
void niu_am_segment_close(struct niu_endpoint *ep, unsigned int segment);

/*
 * Block transfer (JAM_xfer_n/JAM_mfer_n): copy @words words from @src into
 * segment @segment of node @dest at word @offset, in messages of 20 words
 * at @prio (NIU_LO as a request, NIU_HI from a request handler as a
 * reply).  Returns 0 or -EINVAL.
 */
int niu_am_xfer(struct niu_endpoint *ep, enum niu_priority prio,
		uint32_t dest, unsigned int segment, uint32_t offset,
		const uint32_t *src, size_t words);

/*
 * How waits give the CPU away after a run of empty polls: 0 (the default)
 * yields; otherwise sleep this many microseconds, which lets a guest's
 * virtual CPU halt, so a node that only waits leaves the host's cores to
 * the nodes that compute (several TCG guests on few cores).
 */
void niu_set_idle_sleep(struct niu_endpoint *ep, unsigned int microseconds);

/*
 * Remote DMA.  niu_dma_window() asks the driver for this endpoint's DMA
 * window (ARCTIC_NIU_DMA_WINDOW_SIZE bytes) and maps it at
 * ep->dma_window, whose address is also the name the NIU knows it by.
 * Returns 0, -EBUSY (already has one), -ENOMEM, or -ENOTTY from a driver
 * without DMA windows.
 */
int niu_dma_window(struct niu_endpoint *ep);

/*
 * Queue a remote DMA request (seed 002 section 3.3, TransmitDMA): the
 * ARCTIC_D (2048) bytes at @source, which must lie in our window, go to
 * address @target in the window of endpoint @dest_endpoint of node @dest
 * (its ep->dma_window value there); both ARCTIC_D aligned.  Afterwards
 * that endpoint's high-priority queue receives a message of user @type
 * with command[0] = @command, command[1] = the low half of @target and the
 * @length payload words: the sign that the whole block is there.  Returns
 * 0 or -EINVAL.
 */
int niu_dma_send(struct niu_endpoint *ep, uint32_t dest,
		 uint32_t dest_endpoint, uint32_t type, uint32_t command,
		 uint64_t target, const void *source,
		 const uint32_t *payload, unsigned int length);

/* Monotonic time in nanoseconds, for benchmarks. */
uint64_t niu_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* NIU_H */
