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
 * (barrier, later active messages and collectives); niu_recv() never
 * returns them, and a user message that arrives while the library waits
 * for one of its own is kept aside in order and returned later.
 *
 * Not thread-safe: one thread per endpoint.  Remote DMA and the raw FIFO
 * mode of seed 002 section 2.3 come with the device support for them.
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
	NIU_STASH_SLOTS = 1024,			/* kept-aside messages */
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
	unsigned int head, count;
};

/* An open endpoint.  Fields are read-only for the caller. */
struct niu_endpoint {
	int fd;
	uint32_t node;			/* this node */
	uint32_t num_nodes;		/* nodes in the network */
	uint32_t endpoint;		/* our endpoint number */
	volatile struct arctic_mpi_slot *tx[NIU_NUM_PRIORITIES];
	volatile struct arctic_mpi_slot *rx[NIU_NUM_PRIORITIES];
	volatile uint32_t *doorbell;	/* NULL: rely on the NIU's polling */
	uint32_t tx_head[NIU_NUM_PRIORITIES];	/* next slot we fill */
	uint32_t rx_tail[NIU_NUM_PRIORITIES];	/* next slot we read */
	struct niu_stash stash[NIU_NUM_PRIORITIES];
	uint32_t barrier_epoch;
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

/* Monotonic time in nanoseconds, for benchmarks. */
uint64_t niu_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* NIU_H */
