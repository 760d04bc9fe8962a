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
	NIU_REFUSE_IF(type >= NIU_TYPE_LIBRARY_MIN);
	NIU_REFUSE_IF(dest >= ARCTIC_S);
	NIU_REFUSE_IF(nargs > NIU_MAX_PAYLOAD);
	NIU_REFUSE_NO_PAYLOAD(args, nargs);
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
 * Take the program's message at @prio's tail, whose valid @header has
 * been read, into @msg and return its handler, when it is a message (of
 * this lap, MPI mode, LENGTH at most 20: one compare, see
 * niu_lib_rx_length()) whose type has one (the table has 128 entries and
 * NULL for the library's types, so the type indexes it with no range
 * check); else NULL, the slot left for am_poll_stashed().
 */
NIU_INLINE niu_am_handler am_take(struct niu_endpoint *ep,
				  enum niu_priority prio, uint32_t header,
				  struct niu_msg *msg)
{
	uint32_t length = niu_lib_rx_length(ep, prio, header);
	niu_am_handler handler =
		ep->am_handlers[ARCTIC_FIELD_GET(MPI_HEADER, TYPE, header)];

	if (length > NIU_MAX_PAYLOAD || !handler)
		return NULL;
	niu_lib_copy_slot(ep, prio, ep->rx_next[prio], header,
			  ARCTIC_MODE_MPI, length, ep->endpoint, msg);
	return handler;
}

/*
 * Run a handler.  am_depth counts the handlers running: a send from one
 * must not come back into a poll (niu_lib_wait_tx_slot()).
 */
NIU_INLINE void am_call(struct niu_endpoint *ep, niu_am_handler handler,
			const struct niu_msg *msg)
{
	ep->am_depth++;
	handler(ep, msg);
	ep->am_depth--;
}

/*
 * The rest of a poll after a handler has run, from @prio's tail with the
 * valid @header: a handler may have kept messages aside (a blocked
 * reply), which come before what follows in the queue, so the stashes are
 * looked at before each message.  Returns how many handlers ran.
 */
static __attribute__((noinline)) int am_poll_more(struct niu_endpoint *ep,
						  enum niu_priority prio,
						  uint32_t header)
{
	niu_am_handler handler;
	struct niu_msg msg;
	int ran = 0;

	for (;;) {
		if (niu_lib_stashed(ep))
			break;
		handler = am_take(ep, prio, header, &msg);
		if (!handler)
			break;
		am_call(ep, handler, &msg);
		ran++;
		header = ep->rx_next[prio]->header;
		if (header & ARCTIC_MPI_VALID)
			continue;
		if (prio == NIU_LO)
			return ran;
		prio = NIU_LO;
		header = ep->rx_next[prio]->header;
		if (!(header & ARCTIC_MPI_VALID))
			return ran + (niu_lib_stashed(ep) ?
				      am_poll_stashed(ep) : 0);
	}
	return ran + am_poll_stashed(ep);
}

/*
 * The common poll's first message, at @prio's tail with the valid
 * @header, both stashes found empty (so one look, one OR), HiRx empty
 * when @prio is LO: take it and run its handler; anything else is the
 * general loop's.  The messages after it are am_poll_more()'s, so this
 * keeps no count in a register and makes the frame of one message.
 */
NIU_INLINE int am_poll_first(struct niu_endpoint *ep, enum niu_priority prio,
			     uint32_t header)
{
	niu_am_handler handler;
	struct niu_msg msg;

	handler = am_take(ep, prio, header, &msg);
	if (!handler)
		return am_poll_stashed(ep);
	am_call(ep, handler, &msg);
	header = ep->rx_next[prio]->header;
	if (header & ARCTIC_MPI_VALID)
		return 1 + am_poll_more(ep, prio, header);
	if (prio == NIU_HI) {
		header = ep->rx_next[NIU_LO]->header;
		if (header & ARCTIC_MPI_VALID)
			return 1 + am_poll_more(ep, NIU_LO, header);
		if (niu_lib_stashed(ep))
			return 1 + am_poll_stashed(ep);
	}
	return 1;
}

static __attribute__((noinline)) int am_poll_hi(struct niu_endpoint *ep,
						uint32_t header)
{
	return am_poll_first(ep, NIU_HI, header);
}

static __attribute__((noinline)) int am_poll_lo(struct niu_endpoint *ep,
						uint32_t header)
{
	return am_poll_first(ep, NIU_LO, header);
}

/*
 * Only the looks that find nothing are here, so that a poll of empty
 * queues saves no register and makes no frame: the functions above take
 * what it found.
 */
int niu_am_poll(struct niu_endpoint *ep)
{
	uint32_t header;

	if (niu_lib_stashed(ep))
		return am_poll_stashed(ep);
	header = ep->rx_next[NIU_HI]->header;
	if (header & ARCTIC_MPI_VALID)
		return am_poll_hi(ep, header);
	header = ep->rx_next[NIU_LO]->header;
	if (header & ARCTIC_MPI_VALID)
		return am_poll_lo(ep, header);
	return 0;
}
