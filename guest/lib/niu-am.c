/* SPDX-License-Identifier: MIT */
/*
 * libniu: JAM-style active messages: handlers by message type, and
 * transfers into registered segments (niu.h documents the interface; niu-internal.h the
 * endpoint's internals that the library's files share).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "niu-internal.h"

/* --- active messages -------------------------------------------------- */

int niu_am_register(struct niu_endpoint *ep, uint32_t type,
		    niu_am_handler handler)
{
	if (type >= NIU_TYPE_LIBRARY_MIN)
		return -EINVAL;
	ep->am_handler_count += (handler != NULL) -
				(ep->am_handlers[type] != NULL);
	ep->am_handlers[type] = handler;
	return 0;
}

/*
 * Our endpoint, in the header and in command[0], was checked once, at
 * open (niu_lib_endpoint_set()); the header's fixed part was made there.
 */
int niu_am_request(struct niu_endpoint *ep, uint32_t dest, uint32_t type,
		   const uint32_t *args, unsigned int nargs)
{
	if (type >= NIU_TYPE_LIBRARY_MIN || dest >= ARCTIC_S ||
	    nargs > NIU_MAX_PAYLOAD || niu_lib_no_payload(args, nargs))
		return -EINVAL;
	niu_lib_send_slot(ep, NIU_LO, ep->am_request_header |
			  ARCTIC_FIELD_PREP(MPI_HEADER, DEST, dest) |
			  ARCTIC_FIELD_PREP(MPI_HEADER, TYPE, type) |
			  ARCTIC_FIELD_PREP(MPI_HEADER, LENGTH, nargs),
			  ep->endpoint, 0, args, nargs);
	return 0;
}

int niu_am_reply(struct niu_endpoint *ep, const struct niu_msg *to,
		 uint32_t type, const uint32_t *args, unsigned int nargs)
{
	if (type >= NIU_TYPE_LIBRARY_MIN)
		return -EINVAL;
	return niu_lib_send_any_type(ep, NIU_HI, to->source, to->command[0], type,
			     ep->endpoint, 0, args, nargs);
}

int niu_am_segment_open(struct niu_endpoint *ep, unsigned int segment,
			uint32_t *base, uint32_t words,
			niu_am_segment_handler done, void *arg)
{
	struct niu_am_segment *seg;

	if (segment >= NIU_AM_SEGMENTS || !base)
		return -EINVAL;
	seg = &ep->am_segments[segment];
	if (!seg->base)
		ep->am_handler_count++;
	seg->base = base;
	seg->words = seg->remaining = words;
	seg->done = done;
	seg->arg = arg;
	return 0;
}

void niu_am_segment_close(struct niu_endpoint *ep, unsigned int segment)
{
	if (segment >= NIU_AM_SEGMENTS || !ep->am_segments[segment].base)
		return;
	memset(&ep->am_segments[segment], 0, sizeof(ep->am_segments[0]));
	ep->am_handler_count--;
}

int niu_am_xfer(struct niu_endpoint *ep, enum niu_priority prio,
		uint32_t dest, unsigned int segment, uint32_t offset,
		const uint32_t *src, size_t words)
{
	size_t done, length;
	int ret;

	if (segment >= NIU_AM_SEGMENTS || (words && !src))
		return -EINVAL;
	for (done = 0; done < words; done += length) {
		length = words - done;
		if (length > NIU_MAX_PAYLOAD)
			length = NIU_MAX_PAYLOAD;
		ret = niu_lib_send_any_type(ep, prio, dest, ep->endpoint,
				    NIU_TYPE_AM_XFER, segment,
				    offset + (uint32_t)done, src + done,
				    (unsigned int)length);
		if (ret)
			return ret;
	}
	return 0;
}

static int is_am_msg(const struct niu_msg *msg, const void *arg)
{
	const struct niu_endpoint *ep = arg;

	return msg->type == NIU_TYPE_AM_XFER ||
	       (msg->type < NIU_TYPE_LIBRARY_MIN && ep->am_handlers[msg->type]);
}

/* Copy one transfer into its segment; a full segment runs its handler. */
static void am_xfer_take(struct niu_endpoint *ep, const struct niu_msg *msg)
{
	uint32_t segment = msg->command[0], offset = msg->command[1];
	struct niu_am_segment *seg;

	seg = segment < NIU_AM_SEGMENTS ? &ep->am_segments[segment] : NULL;
	if (!seg || !seg->base || offset > seg->words ||
	    msg->length > seg->words - offset ||
	    msg->length > seg->remaining) {
		ep->am_errors++;
		return;
	}
	memcpy(seg->base + offset, msg->payload,
	       msg->length * sizeof(uint32_t));
	seg->remaining -= msg->length;
	if (!seg->remaining && seg->done)
		seg->done(ep, segment, seg->arg);
}

static void am_run(struct niu_endpoint *ep, const struct niu_msg *msg)
{
	ep->am_depth++;
	if (msg->type == NIU_TYPE_AM_XFER)
		am_xfer_take(ep, msg);
	else
		ep->am_handlers[msg->type](ep, msg);
	ep->am_depth--;
}

/*
 * niu_am_poll() with something kept aside at either priority.  Handlers
 * may stash (a blocked reply), so one at a time.  The messages kept aside
 * come first, then the queue's; niu_lib_take_user() takes a program's
 * message with no per-message check of what only library messages and
 * notices need (niu_lib_take_slot()).
 */
static __attribute__((noinline)) int am_poll_stashed(struct niu_endpoint *ep)
{
	struct niu_msg msg;
	int ran = 0, p;
	enum niu_slot found;

	for (p = NIU_HI; p < NIU_NUM_PRIORITIES; p++) {
		while (ep->stash[p].count &&
		       niu_lib_stash_take(&ep->stash[p], is_am_msg, ep, &msg)) {
			am_run(ep, &msg);
			ran++;
		}
		for (;;) {
			found = niu_lib_take_user(ep, p, &msg);
			if (found == NIU_SLOT_EMPTY)
				break;
			if (found == NIU_SLOT_OTHER &&
			    !niu_lib_take_slot(ep, p, &msg))
				break;
			if (is_am_msg(&msg, ep)) {
				am_run(ep, &msg);
				ran++;
			} else if (niu_lib_stash_put(&ep->stash[p], &msg)) {
				abort();	/* a million unread messages */
			}
		}
	}
	return ran;
}

/*
 * The common poll of @prio's queue: while its tail holds a program's
 * message (of this lap, MPI mode, LENGTH at most 20: one compare, see
 * niu_lib_rx_length()) whose type has a handler (the table has 128
 * entries and NULL for the library's types, so the type indexes it with
 * no range check), take it from its slot and run the handler.  Returns
 * false once the queue is empty, true when the rest of the poll is
 * am_poll_stashed()'s: another kind of message at the tail, or one that
 * a handler kept aside (a blocked reply), which comes before what
 * follows in the queue.  The caller found both stashes empty before the
 * first message, so only a handler can have filled them: they are looked
 * at again after one has run, before the next message (and, at HI, when
 * the queue is empty: LO's first message comes next).  am_depth counts
 * the handler running, which is where a send can come back into a poll
 * (niu_lib_wait_tx_slot()).
 */
NIU_INLINE bool am_poll_queue(struct niu_endpoint *ep, enum niu_priority prio,
			      int *ran)
{
	volatile struct arctic_mpi_slot *slot;
	niu_am_handler handler;
	uint32_t header, length;
	struct niu_msg msg;

	slot = &ep->rx[prio][ep->rx_tail[prio]];
	header = slot->header;
	if (!(header & ARCTIC_MPI_VALID))
		return false;
	for (;;) {
		length = niu_lib_rx_length(ep, prio, header);
		handler = ep->am_handlers[ARCTIC_FIELD_GET(MPI_HEADER, TYPE,
							   header)];
		if (length > NIU_MAX_PAYLOAD || !handler)
			return true;
		niu_lib_copy_slot(ep, prio, slot, header, ARCTIC_MODE_MPI,
				  length, ep->endpoint, &msg);
		ep->am_depth++;
		handler(ep, &msg);
		ep->am_depth--;
		(*ran)++;
		slot = &ep->rx[prio][ep->rx_tail[prio]];
		header = slot->header;
		if (!(header & ARCTIC_MPI_VALID))
			return prio == NIU_HI && niu_lib_stashed(ep);
		if (niu_lib_stashed(ep))
			return true;
	}
}

int niu_am_poll(struct niu_endpoint *ep)
{
	int ran = 0;

	if (niu_lib_stashed(ep) || am_poll_queue(ep, NIU_HI, &ran) ||
	    am_poll_queue(ep, NIU_LO, &ran))
		return ran + am_poll_stashed(ep);
	return ran;
}
