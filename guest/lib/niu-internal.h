/* SPDX-License-Identifier: MIT */
/*
 * libniu's internals, shared by its files (niu.c, niu-coll.c, niu-am.c,
 * niu-dma.c) and its unit test; not installed, not for programs.  The
 * functions are niu_lib_* so that they clash with no program's names in
 * the static library.
 */
#ifndef NIU_INTERNAL_H
#define NIU_INTERNAL_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "niu.h"
#include "uapi/arctic_niu.h"

/* Message types the library sends itself, above the programs' types. */
enum {
	NIU_TYPE_BARRIER = NIU_TYPE_LIBRARY_MIN,
	NIU_TYPE_COLLECTIVE,	/* command0: collective number, 1: offset */
	NIU_TYPE_AM_XFER,	/* command0: segment, 1: word offset */
	NIU_TYPE_PEER_DOWN,	/* command0: the node that stopped answering */
	NIU_TYPE_PROBE,		/* nothing: something in flight to a peer */
	NIU_QUEUES_VIEW_SIZE = ARCTIC_NIU_MMAP_DMA_TX +
			       ARCTIC_NIU_MMAP_DMA_TX_SIZE,
	/* Spins on an empty queue before yielding the CPU once. */
	NIU_SPINS_BEFORE_YIELD = 256,
	/* A wait this long probes every other node, then again this often. */
	NIU_PROBE_AFTER_MS = 1000,
	NIU_PROBE_EVERY_MS = 5000,
	/* The longest sleep of a wait for a message (see niu_lib_idle()). */
	NIU_RX_SLEEP_MAX_MS = 100,
};

/*
 * Copy @n words between a slot and the program's memory: up to
 * NIU_COPY_LOOP_MAX words one 32-bit move each, unrolled (a loop's
 * counting cost more than the moves for one word), more by the C
 * library's memcpy (a handful of wide moves).  One word, an active
 * message's usual argument, is tested for first: a compare, where the
 * switch's jump table takes five instructions.  The queues are ordinary
 * (coherent) memory, and the fences around every copy order it against
 * the header's store or load.
 */
enum { NIU_COPY_LOOP_MAX = 4 };

/* The common path's helpers go inline even where the compiler would not. */
#define NIU_INLINE static inline __attribute__((always_inline))

/*
 * Refuse a call whose @cond holds: a compare and a branch per check, and
 * the next check after it (the empty asm keeps the compiler from joining
 * two checks into SETcc, SETcc, OR and a branch, two instructions more).
 */
#define NIU_REFUSE_IF(cond) do {					\
	if (__builtin_expect(!!(cond), 0))				\
		return -EINVAL;						\
	__asm__ volatile("");						\
} while (0)

NIU_INLINE void niu_lib_copy_words(volatile uint32_t *to,
				   const volatile uint32_t *from,
				   unsigned int n)
{
	if (n == 1) {
		to[0] = from[0];
		return;
	}
	switch (n) {
	case 4:
		to[3] = from[3];
		/* fall through */
	case 3:
		to[2] = from[2];
		/* fall through */
	case 2:
		to[1] = from[1];
		/* fall through */
	case 1:
		to[0] = from[0];
		/* fall through */
	case 0:
		break;
	default:
		memcpy((uint32_t *)to, (const uint32_t *)from,
		       n * sizeof(*to));
	}
}

/*
 * Time accounting (niu_stats_time() in niu.h).  The clock is the TSC: one
 * instruction (and two to join its halves), where a CLOCK_MONOTONIC read
 * takes dozens; test-libniu.c gives a clock of its own.
 */
#ifndef NIU_LIB_TICKS
#if defined(__x86_64__) || defined(__i386__)
#define NIU_LIB_TICKS() __builtin_ia32_rdtsc()
#else
#define NIU_LIB_TICKS() niu_now_ns()
#endif
#endif

/* The time since the last switch was of the kind now; @kind from now. */
NIU_INLINE void niu_lib_time_switch(struct niu_endpoint *ep,
				    enum niu_time_kind kind)
{
	uint64_t now = NIU_LIB_TICKS();

	ep->time.ticks[ep->time.kind] += now - ep->time.since;
	ep->time.since = now;
	ep->time.kind = (uint8_t)kind;
}

/*
 * From now on, time is of @kind; returns the kind it was, for
 * niu_lib_time_leave().  Inside a barrier everything is the barrier's.
 */
NIU_INLINE enum niu_time_kind niu_lib_time_enter(struct niu_endpoint *ep,
						 enum niu_time_kind kind)
{
	enum niu_time_kind was = (enum niu_time_kind)ep->time.kind;

	if (ep->time.on && was != kind && was != NIU_TIME_BARRIER)
		niu_lib_time_switch(ep, kind);
	return was;
}

/* Back to the kind @was that niu_lib_time_enter() returned. */
NIU_INLINE void niu_lib_time_leave(struct niu_endpoint *ep,
				   enum niu_time_kind was)
{
	if (ep->time.on && ep->time.kind != was)
		niu_lib_time_switch(ep, was);
}

/* A message taken ends a wait: what follows is receiving. */
NIU_INLINE void niu_lib_time_taken(struct niu_endpoint *ep)
{
	if (ep->time.kind == NIU_TIME_WAIT && ep->time.on)
		niu_lib_time_switch(ep, NIU_TIME_RECV);
}

/* What a wait waits for: the receive interrupt ends a sleep for a message. */
enum niu_wait { NIU_WAIT_RX, NIU_WAIT_TX };

/* niu.c: waiting */
void niu_lib_idle(struct niu_endpoint *ep, unsigned int *spins,
		  enum niu_wait what);
void niu_lib_keep_incoming(struct niu_endpoint *ep);
void niu_lib_keep_other(struct niu_endpoint *ep, enum niu_priority reading);

/*
 * niu.c: sending.  The common path (a free slot) is inline in every
 * caller: its checks, the slot, the doorbell; a full queue calls
 * niu_lib_wait_tx_slot() (docs/guest.md, "The instruction budget").
 */
void niu_lib_wait_tx_slot(struct niu_endpoint *ep, enum niu_priority prio);
void niu_lib_send_after_wait(struct niu_endpoint *ep, enum niu_priority prio,
			     uint32_t header, uint32_t command0,
			     uint32_t command1, const uint32_t *payload,
			     unsigned int length);

static inline bool niu_lib_tx_slot_free(struct niu_endpoint *ep,
					enum niu_priority prio)
{
	return !(ep->tx[prio][ep->tx_head[prio]].header & ARCTIC_MPI_VALID);
}

/* The slot before the one just filled, @head having moved past that one. */
static inline uint32_t niu_lib_slot_before_filled(uint32_t head)
{
	return (head + ARCTIC_N - 2) % ARCTIC_N;
}

/* A valid MPI slot header (seed 002 section 3.2.1 step 3; LAP left 0). */
static inline uint32_t niu_lib_header(uint32_t node, uint32_t endpoint,
				      uint32_t type, uint32_t mode,
				      uint32_t length)
{
	return ARCTIC_MPI_VALID |
	       ARCTIC_FIELD_PREP(MPI_HEADER, DEST, node) |
	       ARCTIC_FIELD_PREP(MPI_HEADER, ENDPOINT, endpoint) |
	       ARCTIC_FIELD_PREP(MPI_HEADER, TYPE, type) |
	       ARCTIC_FIELD_PREP(MPI_HEADER, MODE, mode) |
	       ARCTIC_FIELD_PREP(MPI_HEADER, LENGTH, length);
}

/*
 * Ring the doorbell for a slot just made valid, unless the slot before it
 * in the same queue (@prev_header) is still valid: the NIU has not taken
 * that one yet, so it stopped at it (for want of a retransmit line, or at
 * its batch limit) and comes back to the queue by itself, taking this
 * slot after it; the doorbell would only cost an exit into the NIU for
 * nothing, as a virtio driver skips the kick while the device is busy.
 * The NIU clears a header, then (full barrier) reads the next; we have
 * stored a header with niu_lib_publish() (a full barrier), and read the
 * one before: one of the two sees the other's store (programming guide
 * section 10.1).
 */
NIU_INLINE void niu_lib_ring_doorbell(struct niu_endpoint *ep,
				      volatile uint32_t *prev_header,
				      uint32_t queues)
{
	if (*prev_header & ARCTIC_MPI_VALID) {
		ep->doorbells_skipped++;
		return;
	}
	*ep->doorbell = queues;
}

/*
 * Seed 002 section 3.2.1 steps 4-5: make a slot valid, its words stored
 * before, with a full barrier after (for niu_lib_ring_doorbell()): one
 * exchange, which is both on x86, where a store and a fence are two.
 */
NIU_INLINE void niu_lib_publish(volatile uint32_t *header, uint32_t value)
{
	(void)__atomic_exchange_n(header, value, __ATOMIC_SEQ_CST);
}

_Static_assert(R_USER_DOORBELL_LO_TX_MASK ==
	       R_USER_DOORBELL_HI_TX_MASK << NIU_LO &&
	       R_USER_DOORBELL_HI_TX_MASK << NIU_HI ==
	       R_USER_DOORBELL_HI_TX_MASK,
	       "a priority's doorbell bit is HI_TX's shifted by the priority");

/*
 * Seed 002 section 3.2.1, TransmitHi/TransmitLo, of a header made.  A
 * slot still valid goes out of line, as the tail of the send, so that
 * the common path calls nothing and saves no register.  The slot before
 * the one filled, which decides the doorbell, is the one the last send
 * filled: tx_last keeps it, where computing it from the head took four
 * instructions.
 */
NIU_INLINE void niu_lib_send_slot(struct niu_endpoint *ep,
				  enum niu_priority prio, uint32_t header,
				  uint32_t command0, uint32_t command1,
				  const uint32_t *payload, unsigned int length)
{
	uint32_t head = ep->tx_head[prio];
	volatile struct arctic_mpi_slot *slot = &ep->tx[prio][head];
	volatile uint32_t *prev;

	if (slot->header & ARCTIC_MPI_VALID) {			/* step 1 */
		niu_lib_send_after_wait(ep, prio, header, command0, command1,
					payload, length);
		return;
	}
	atomic_thread_fence(memory_order_acquire);
	slot->command[0] = command0;				/* step 2 */
	slot->command[1] = command1;
	niu_lib_copy_words(slot->payload, payload, length);
	niu_lib_publish(&slot->header, header);			/* steps 4-5 */
	ep->tx_head[prio] = (head + 1) % ARCTIC_N;		/* step 6 */
	prev = ep->tx_last[prio];
	ep->tx_last[prio] = &slot->header;
	niu_lib_ring_doorbell(ep, prev, R_USER_DOORBELL_HI_TX_MASK << prio);
}

/*
 * A payload pointer missing for @length words: NULL is tested first, so
 * the common send (a pointer) pays one test, not two.
 */
#define NIU_REFUSE_NO_PAYLOAD(payload, length) do {			\
	if (__builtin_expect(!(payload), 0)) {				\
		__asm__ volatile("");					\
		if (length)						\
			return -EINVAL;					\
	}								\
} while (0)

/*
 * Check a send's arguments (a bad one is -EINVAL, nothing sent), make its
 * header and send it.  The callers check the type's range: user types
 * for niu_send() and the active messages, any for the library.
 */
NIU_INLINE int niu_lib_send_any_type(struct niu_endpoint *ep,
				     enum niu_priority prio, uint32_t dest,
				     uint32_t dest_endpoint, uint32_t type,
				     uint32_t command0, uint32_t command1,
				     const uint32_t *payload,
				     unsigned int length)
{
	uint32_t header;

	NIU_REFUSE_IF((unsigned int)prio >= NIU_NUM_PRIORITIES);
	NIU_REFUSE_IF(dest >= ARCTIC_S);
	NIU_REFUSE_IF(dest_endpoint >= ARCTIC_ENDPOINTS);
	NIU_REFUSE_IF(type > NIU_MAX_TYPE);
	NIU_REFUSE_IF(length > NIU_MAX_PAYLOAD);
	NIU_REFUSE_NO_PAYLOAD(payload, length);
	header = niu_lib_header(dest, dest_endpoint, type,	/* step 3 */
				ARCTIC_MODE_MPI, length);
	niu_lib_send_slot(ep, prio, header, command0, command1, payload,
			  length);
	return 0;
}

/* niu.c: receiving, and the side buffer of messages kept for later */

/*
 * Seed 002 section 3.2.2 steps 2-6 for the slot at @prio's tail, whose
 * @header is valid and of this lap, with its @mode, @length (at most 20)
 * and the @endpoint it was sent to taken out: copy the message out, give
 * the slot back to the NIU, move the tail.
 */
NIU_INLINE void niu_lib_copy_slot(struct niu_endpoint *ep,
				  enum niu_priority prio,
				  volatile struct arctic_mpi_slot *slot,
				  uint32_t header, uint32_t mode,
				  uint32_t length, uint32_t endpoint,
				  struct niu_msg *msg)
{
	uint32_t tail = ep->rx_tail[prio] + 1;

	atomic_thread_fence(memory_order_acquire);		/* step 2 */
	msg->type = ARCTIC_FIELD_GET(MPI_HEADER, TYPE, header);	/* step 3 */
	msg->mode = mode;
	msg->length = length;
	msg->source = ARCTIC_FIELD_GET(MPI_HEADER, DEST, header);
	msg->command[0] = slot->command[0];			/* step 4 */
	msg->command[1] = slot->command[1];
	niu_lib_copy_words(msg->payload, slot->payload, length);
	/* Apart from source: the two went by SSE, five moves for two. */
	msg->endpoint = endpoint;
	atomic_thread_fence(memory_order_release);
	slot->header = 0;					/* step 5 */
	if (tail == ARCTIC_N) {					/* step 6 */
		tail = 0;
		ep->rx_lap[prio] ^= 1;
		ep->rx_lap_header[prio] ^= R_MPI_HEADER_LAP_MASK;
		ep->rx_next[prio] = ep->rx[prio];
	} else {
		ep->rx_next[prio] = slot + 1;
	}
	ep->rx_tail[prio] = tail;
}

/*
 * Our endpoint's number, checked once (the driver's word for it), and what
 * the sends and receives derive from it once, not per message: the fixed
 * part of an active-message request's header.  Returns 0 or -EPROTO.
 */
static inline int niu_lib_endpoint_set(struct niu_endpoint *ep,
				       uint32_t endpoint)
{
	if (endpoint >= ARCTIC_ENDPOINTS)
		return -EPROTO;
	ep->endpoint = endpoint;
	ep->am_request_header = niu_lib_header(0, endpoint, 0,
					       ARCTIC_MODE_MPI, 0);
	return 0;
}

/*
 * The slots the common paths go to straight (no index to scale and add):
 * made once the queues are mapped (ep->tx[], ep->rx[] set), kept along
 * with the indexes.
 */
static inline void niu_lib_queues_set(struct niu_endpoint *ep)
{
	int p;

	for (p = 0; p < NIU_NUM_PRIORITIES; p++) {
		ep->tx_last[p] = &ep->tx[p][niu_lib_slot_before_filled(
						ep->tx_head[p] + 1)].header;
		ep->rx_next[p] = &ep->rx[p][ep->rx_tail[p]];
	}
}

/* What niu_lib_take_user() found at the tail of a receive queue. */
enum niu_slot { NIU_SLOT_EMPTY, NIU_SLOT_TAKEN, NIU_SLOT_OTHER };

_Static_assert(R_MPI_HEADER_LENGTH_SHIFT == 0 &&
	       (uint32_t)R_MPI_HEADER_LENGTH_MASK > (uint32_t)NIU_MAX_PAYLOAD,
	       "a header's LENGTH is its low bits, wide enough for 20");

/*
 * Of a valid @header at @prio's tail: its LENGTH when it is a message
 * (MODE MPI) of this lap; else a value above NIU_MAX_PAYLOAD, as for a
 * LENGTH the NIU never writes (past 20), so one compare refuses all
 * three: the LAP and MODE bits, cleared in a header that has what we
 * expect, lie above LENGTH.
 */
NIU_INLINE uint32_t niu_lib_rx_length(struct niu_endpoint *ep,
				      enum niu_priority prio, uint32_t header)
{
	return (header ^ ep->rx_lap_header[prio]) &
	       (R_MPI_HEADER_LAP_MASK | R_MPI_HEADER_MODE_MASK |
		R_MPI_HEADER_LENGTH_MASK);
}

/*
 * The common receive: when @prio's next slot holds a program's message
 * of this lap (valid, MPI mode, a user type, a length the NIU writes),
 * take it into @msg.  Anything else (a header of the last lap, a notice,
 * a library message) is NIU_SLOT_OTHER, left for niu_lib_take_slot(),
 * whose checks thus cost nothing per message of a program.  The
 * message's ENDPOINT is ours: the NIU puts a message in the queues of the
 * endpoint it names.
 */
NIU_INLINE enum niu_slot niu_lib_take_user(struct niu_endpoint *ep,
					   enum niu_priority prio,
					   struct niu_msg *msg)
{
	volatile struct arctic_mpi_slot *slot = ep->rx_next[prio];
	uint32_t header = slot->header, length;

	if (!(header & ARCTIC_MPI_VALID))			/* step 1 */
		return NIU_SLOT_EMPTY;
	length = niu_lib_rx_length(ep, prio, header);
	if (length > NIU_MAX_PAYLOAD ||
	    ARCTIC_FIELD_GET(MPI_HEADER, TYPE, header) >= NIU_TYPE_LIBRARY_MIN)
		return NIU_SLOT_OTHER;
	niu_lib_copy_slot(ep, prio, slot, header, ARCTIC_MODE_MPI, length,
			  ep->endpoint, msg);
	return NIU_SLOT_TAKEN;
}

/* Anything kept aside, at either priority: one load and one OR. */
NIU_INLINE bool niu_lib_stashed(const struct niu_endpoint *ep)
{
	return ep->stash[NIU_HI].count | ep->stash[NIU_LO].count;
}

int niu_lib_take_slot(struct niu_endpoint *ep, enum niu_priority prio,
		      struct niu_msg *msg);
int niu_lib_stashes_ready(struct niu_endpoint *ep);
int niu_lib_stash_put(struct niu_stash *stash, const struct niu_msg *msg);
int niu_lib_stash_take(struct niu_stash *stash,
		       int (*match)(const struct niu_msg *, const void *),
		       const void *arg, struct niu_msg *msg);
void niu_lib_stash_drain(struct niu_stash *stash,
			 int (*match)(const struct niu_msg *, const void *),
			 void (*consume)(const struct niu_msg *, void *),
			 void *arg);

#endif /* NIU_INTERNAL_H */
