/* SPDX-License-Identifier: MIT */
/*
 * libniu: endpoint set-up through the arctic_niu driver, the send and
 * receive protocol of seed 002 section 3.2 with the doorbell fast path, a
 * side buffer for messages that arrive while the library waits for its own,
 * and a dissemination barrier.  niu.h documents the interface.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "niu.h"
#include "uapi/arctic_niu.h"

enum {
	NIU_TYPE_BARRIER = NIU_TYPE_LIBRARY_MIN,
	/* Spins on an empty queue before yielding the CPU once. */
	NIU_SPINS_BEFORE_YIELD = 256,
};

static const uint32_t queue_view_offset[2][NIU_NUM_PRIORITIES] = {
	{ ARCTIC_MMAP_HI_TX, ARCTIC_MMAP_LO_TX },	/* tx */
	{ ARCTIC_MMAP_HI_RX, ARCTIC_MMAP_LO_RX },	/* rx */
};

uint64_t niu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int niu_open(struct niu_endpoint *ep, const char *path)
{
	struct arctic_niu_node_info node;
	struct arctic_niu_endpoint_info info;
	int p, err;

	memset(ep, 0, sizeof(*ep));
	ep->fd = open(path ? path : "/dev/arctic-niu0", O_RDWR | O_CLOEXEC);
	if (ep->fd < 0)
		return -errno;
	if (ioctl(ep->fd, ARCTIC_NIU_IOC_NODE_INFO, &node) < 0 ||
	    ioctl(ep->fd, ARCTIC_NIU_IOC_ENDPOINT_INFO, &info) < 0)
		goto fail_errno;
	ep->node = node.node_id;
	ep->num_nodes = node.num_nodes;
	ep->endpoint = info.endpoint;

	ep->queues = mmap(NULL, info.queues_size, PROT_READ | PROT_WRITE,
			  MAP_SHARED, ep->fd, (off_t)info.queues_offset);
	if (ep->queues == MAP_FAILED)
		goto fail_errno;
	ep->user_page = mmap(NULL, info.user_page_size, PROT_WRITE,
			     MAP_SHARED, ep->fd, (off_t)info.user_page_offset);
	if (ep->user_page == MAP_FAILED) {
		ep->user_page = NULL;
		goto fail_errno;
	}
	ep->doorbell = (volatile uint32_t *)((char *)ep->user_page +
					     A_USER_DOORBELL);
	for (p = 0; p < NIU_NUM_PRIORITIES; p++) {
		ep->tx[p] = (volatile struct arctic_mpi_slot *)
			((char *)ep->queues + queue_view_offset[0][p]);
		ep->rx[p] = (volatile struct arctic_mpi_slot *)
			((char *)ep->queues + queue_view_offset[1][p]);
		ep->stash[p].msgs = calloc(NIU_STASH_SLOTS,
					   sizeof(struct niu_msg));
		if (!ep->stash[p].msgs) {
			errno = ENOMEM;
			goto fail_errno;
		}
	}
	return 0;

fail_errno:
	err = -errno;
	niu_close(ep);
	return err;
}

void niu_close(struct niu_endpoint *ep)
{
	int p;

	for (p = 0; p < NIU_NUM_PRIORITIES; p++)
		free(ep->stash[p].msgs);
	if (ep->user_page)
		munmap(ep->user_page, ARCTIC_NIU_MMAP_USER_PAGE_SIZE);
	if (ep->queues && ep->queues != MAP_FAILED)
		munmap(ep->queues, ARCTIC_NIU_MMAP_QUEUES_SIZE);
	if (ep->fd >= 0)
		close(ep->fd);
	memset(ep, 0, sizeof(*ep));
	ep->fd = -1;
}

/* Seed 002 section 3.2.1, TransmitHi/TransmitLo. */
static void send_slot(struct niu_endpoint *ep, enum niu_priority prio,
		      uint32_t header, uint32_t command0, uint32_t command1,
		      const uint32_t *payload, unsigned int length)
{
	volatile struct arctic_mpi_slot *slot = &ep->tx[prio][ep->tx_head[prio]];
	unsigned int i, spins = 0;

	while (slot->header & ARCTIC_MPI_VALID) {		/* step 1 */
		if (++spins % NIU_SPINS_BEFORE_YIELD == 0)
			sched_yield();
	}
	atomic_thread_fence(memory_order_acquire);
	slot->command[0] = command0;				/* step 2 */
	slot->command[1] = command1;
	for (i = 0; i < length; i++)
		slot->payload[i] = payload[i];
	atomic_thread_fence(memory_order_release);		/* step 4 */
	slot->header = header;					/* step 5 */
	ep->tx_head[prio] = (ep->tx_head[prio] + 1) % ARCTIC_N;	/* step 6 */

	/* The header store must reach memory before the NIU looks. */
	atomic_thread_fence(memory_order_seq_cst);
	*ep->doorbell = prio == NIU_HI ? R_USER_DOORBELL_HI_TX_MASK :
					 R_USER_DOORBELL_LO_TX_MASK;
}

static int send_any_type(struct niu_endpoint *ep, enum niu_priority prio,
			 uint32_t dest, uint32_t dest_endpoint, uint32_t type,
			 uint32_t command0, uint32_t command1,
			 const uint32_t *payload, unsigned int length)
{
	uint32_t header;

	if ((unsigned int)prio >= NIU_NUM_PRIORITIES || dest >= ARCTIC_S ||
	    dest_endpoint >= ARCTIC_ENDPOINTS || type > NIU_MAX_TYPE ||
	    length > NIU_MAX_PAYLOAD || (length && !payload))
		return -EINVAL;
	header = ARCTIC_MPI_VALID |				/* step 3 */
		 ARCTIC_FIELD_PREP(MPI_HEADER, DEST, dest) |
		 ARCTIC_FIELD_PREP(MPI_HEADER, ENDPOINT, dest_endpoint) |
		 ARCTIC_FIELD_PREP(MPI_HEADER, TYPE, type) |
		 ARCTIC_FIELD_PREP(MPI_HEADER, MODE, ARCTIC_MODE_MPI) |
		 ARCTIC_FIELD_PREP(MPI_HEADER, LENGTH, length);
	send_slot(ep, prio, header, command0, command1, payload, length);
	return 0;
}

int niu_send(struct niu_endpoint *ep, enum niu_priority prio, uint32_t dest,
	     uint32_t dest_endpoint, uint32_t type, uint32_t command0,
	     uint32_t command1, const uint32_t *payload, unsigned int length)
{
	if (type >= NIU_TYPE_LIBRARY_MIN)
		return -EINVAL;
	return send_any_type(ep, prio, dest, dest_endpoint, type, command0,
			     command1, payload, length);
}

/* Seed 002 section 3.2.2, ReceiveHi/ReceiveLo, without waiting. */
static int take_slot(struct niu_endpoint *ep, enum niu_priority prio,
		     struct niu_msg *msg)
{
	volatile struct arctic_mpi_slot *slot = &ep->rx[prio][ep->rx_tail[prio]];
	uint32_t header = slot->header;
	unsigned int i;

	if (!(header & ARCTIC_MPI_VALID))			/* step 1 */
		return 0;
	atomic_thread_fence(memory_order_acquire);		/* step 2 */
	msg->type = ARCTIC_FIELD_GET(MPI_HEADER, TYPE, header);	/* step 3 */
	msg->length = ARCTIC_FIELD_GET(MPI_HEADER, LENGTH, header);
	msg->source = ARCTIC_FIELD_GET(MPI_HEADER, DEST, header);
	msg->endpoint = ARCTIC_FIELD_GET(MPI_HEADER, ENDPOINT, header);
	if (msg->length > NIU_MAX_PAYLOAD)	/* the NIU never does this */
		msg->length = NIU_MAX_PAYLOAD;
	msg->command[0] = slot->command[0];			/* step 4 */
	msg->command[1] = slot->command[1];
	for (i = 0; i < msg->length; i++)
		msg->payload[i] = slot->payload[i];
	atomic_thread_fence(memory_order_release);
	slot->header = 0;					/* step 5 */
	ep->rx_tail[prio] = (ep->rx_tail[prio] + 1) % ARCTIC_N;	/* step 6 */
	return 1;
}

static int stash_put(struct niu_stash *stash, const struct niu_msg *msg)
{
	if (stash->count == NIU_STASH_SLOTS)
		return -ENOSPC;
	stash->msgs[(stash->head + stash->count) % NIU_STASH_SLOTS] = *msg;
	stash->count++;
	return 0;
}

/*
 * Remove and return the oldest stashed message that @match accepts.
 * Later messages move up one place so the order is kept.
 */
static int stash_take(struct niu_stash *stash,
		      int (*match)(const struct niu_msg *, const void *),
		      const void *arg, struct niu_msg *msg)
{
	unsigned int i, j, at, next;

	for (i = 0; i < stash->count; i++) {
		at = (stash->head + i) % NIU_STASH_SLOTS;
		if (!match(&stash->msgs[at], arg))
			continue;
		*msg = stash->msgs[at];
		for (j = i; j + 1 < stash->count; j++) {
			at = (stash->head + j) % NIU_STASH_SLOTS;
			next = (stash->head + j + 1) % NIU_STASH_SLOTS;
			stash->msgs[at] = stash->msgs[next];
		}
		stash->count--;
		return 1;
	}
	return 0;
}

static int is_user_msg(const struct niu_msg *msg, const void *unused)
{
	(void)unused;
	return msg->type < NIU_TYPE_LIBRARY_MIN;
}

int niu_try_recv(struct niu_endpoint *ep, enum niu_priority prio,
		 struct niu_msg *msg)
{
	if (stash_take(&ep->stash[prio], is_user_msg, NULL, msg))
		return 1;
	while (take_slot(ep, prio, msg)) {
		if (is_user_msg(msg, NULL))
			return 1;
		/* A library message for a later barrier: keep it. */
		if (stash_put(&ep->stash[prio], msg))
			abort();
	}
	return 0;
}

int niu_recv(struct niu_endpoint *ep, enum niu_priority prio,
	     struct niu_msg *msg)
{
	unsigned int spins = 0;

	while (!niu_try_recv(ep, prio, msg)) {
		if (++spins % NIU_SPINS_BEFORE_YIELD == 0)
			sched_yield();
	}
	return 0;
}

int niu_recv_any(struct niu_endpoint *ep, struct niu_msg *msg,
		 enum niu_priority *prio)
{
	unsigned int spins = 0;
	enum niu_priority p;

	for (;;) {
		for (p = NIU_HI; p < NIU_NUM_PRIORITIES; p++) {
			if (niu_try_recv(ep, p, msg)) {
				if (prio)
					*prio = p;
				return 0;
			}
		}
		if (++spins % NIU_SPINS_BEFORE_YIELD == 0)
			sched_yield();
	}
}

struct barrier_wait {
	uint32_t source, epoch, round;
};

static int is_barrier_msg(const struct niu_msg *msg, const void *arg)
{
	const struct barrier_wait *want = arg;

	return msg->type == NIU_TYPE_BARRIER && msg->source == want->source &&
	       msg->command[0] == want->epoch &&
	       msg->command[1] == want->round;
}

/* Wait for one barrier message, keeping whatever else arrives. */
static int barrier_wait(struct niu_endpoint *ep,
			const struct barrier_wait *want)
{
	struct niu_stash *stash = &ep->stash[NIU_HI];
	unsigned int spins = 0;
	struct niu_msg msg;

	if (stash_take(stash, is_barrier_msg, want, &msg))
		return 0;
	for (;;) {
		while (take_slot(ep, NIU_HI, &msg)) {
			if (is_barrier_msg(&msg, want))
				return 0;
			if (stash_put(stash, &msg))
				return -ENOSPC;
		}
		if (++spins % NIU_SPINS_BEFORE_YIELD == 0)
			sched_yield();
	}
}

int niu_barrier(struct niu_endpoint *ep)
{
	uint32_t n = ep->num_nodes, me = ep->node, distance, round = 0;
	struct barrier_wait want;
	int ret;

	if (n < 2)
		return 0;
	ep->barrier_epoch++;
	for (distance = 1; distance < n; distance *= 2, round++) {
		ret = send_any_type(ep, NIU_HI, (me + distance) % n,
				    ep->endpoint, NIU_TYPE_BARRIER,
				    ep->barrier_epoch, round, NULL, 0);
		if (ret)
			return ret;
		want.source = (me + n - distance) % n;
		want.epoch = ep->barrier_epoch;
		want.round = round;
		ret = barrier_wait(ep, &want);
		if (ret)
			return ret;
	}
	return 0;
}
