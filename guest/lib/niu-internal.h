/* SPDX-License-Identifier: MIT */
/*
 * libniu's internals, shared by its files (niu.c, niu-coll.c, niu-am.c,
 * niu-dma.c) and its unit test; not installed, not for programs.  The
 * functions are niu_lib_* so that they clash with no program's names in
 * the static library.
 */
#ifndef NIU_INTERNAL_H
#define NIU_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

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

/* What a wait waits for: the receive interrupt ends a sleep for a message. */
enum niu_wait { NIU_WAIT_RX, NIU_WAIT_TX };

/* niu.c: waiting */
void niu_lib_idle(struct niu_endpoint *ep, unsigned int *spins,
		  enum niu_wait what);
void niu_lib_keep_incoming(struct niu_endpoint *ep);
void niu_lib_keep_other(struct niu_endpoint *ep, enum niu_priority reading);

/* niu.c: sending */
bool niu_lib_tx_slot_free(struct niu_endpoint *ep, enum niu_priority prio);
uint32_t niu_lib_slot_before_filled(uint32_t head);

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
void niu_lib_ring_doorbell(struct niu_endpoint *ep,
			   volatile uint32_t *prev_header, uint32_t queues);
void niu_lib_send_slot(struct niu_endpoint *ep, enum niu_priority prio,
		       uint32_t header, uint32_t command0, uint32_t command1,
		       const uint32_t *payload, unsigned int length);
int niu_lib_send_any_type(struct niu_endpoint *ep, enum niu_priority prio,
			  uint32_t dest, uint32_t dest_endpoint, uint32_t type,
			  uint32_t command0, uint32_t command1,
			  const uint32_t *payload, unsigned int length);

/* niu.c: receiving, and the side buffer of messages kept for later */
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
