/* SPDX-License-Identifier: MIT */
/*
 * libniu: collectives built on one all-to-all exchange, each a
 * message pattern over the endpoint's queues (niu.h documents the interface; niu-internal.h the
 * endpoint's internals that the library's files share).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "niu-internal.h"

/* --- collectives ------------------------------------------------------ */

/* One niu_alltoallv() call as its incoming messages see it. */
struct exchange {
	uint32_t epoch, num_nodes;
	uint32_t *const *recv;
	const size_t *recv_words;
	size_t *received;		/* words so far, per source */
	size_t remaining;		/* words still expected in all */
	int errors;
};

static int is_exchange_msg(const struct niu_msg *msg, const void *arg)
{
	const struct exchange *x = arg;

	return msg->type == NIU_TYPE_COLLECTIVE && msg->command[0] == x->epoch;
}

static void exchange_take(const struct niu_msg *msg, void *arg)
{
	struct exchange *x = arg;
	uint32_t source = msg->source, offset = msg->command[1];

	if (source >= x->num_nodes || offset > x->recv_words[source] ||
	    msg->length > x->recv_words[source] - offset ||
	    msg->length > x->recv_words[source] - x->received[source]) {
		x->errors++;
		return;
	}
	memcpy(x->recv[source] + offset, msg->payload,
	       msg->length * sizeof(uint32_t));
	x->received[source] += msg->length;
	x->remaining -= msg->length;
}

static int check_counts(const void *const bufs[], const size_t words[],
			uint32_t n)
{
	uint32_t p;

	for (p = 0; p < n; p++) {
		if (words[p] && !bufs[p])
			return -EINVAL;
	}
	return 0;
}

/*
 * The exchange of one collective, @epoch (ep->collective_epoch when it
 * began): send[p] to each node p, recv[p] from each, checked by the
 * caller.  A collective may run several exchanges under one epoch
 * (niu_bcast()'s steps down its tree).
 */
static int exchange(struct niu_endpoint *ep, uint32_t epoch,
		    const uint32_t *const send[], const size_t send_words[],
		    uint32_t *const recv[], const size_t recv_words[])
{
	uint32_t n = ep->num_nodes, me = ep->node, p, cursor, header;
	struct exchange x = { .num_nodes = n, .recv = recv,
			      .recv_words = recv_words, .epoch = epoch };
	size_t *sent, unsent = 0, length;
	enum niu_time_kind was;
	unsigned int spins = 0;
	struct niu_msg msg;
	bool progress;

	/* All of it is the library's: receiving, but for sends and waits. */
	was = niu_lib_time_enter(ep, NIU_TIME_RECV);
	sent = calloc(2 * (size_t)n, sizeof(size_t));
	if (!sent) {
		niu_lib_time_leave(ep, was);
		return -ENOMEM;
	}
	x.received = sent + n;
	for (p = 0; p < n; p++) {
		if (p == me)
			continue;
		unsent += send_words[p];
		x.remaining += recv_words[p];
	}
	if (send_words[me] && recv[me] != send[me])
		memcpy(recv[me], send[me], send_words[me] * sizeof(uint32_t));

	niu_lib_stash_drain(&ep->stash[NIU_LO], is_exchange_msg, exchange_take, &x);
	cursor = (me + 1) % n;
	while (unsent || x.remaining) {
		progress = false;
		/* One message to the next peer with words left, if room. */
		for (p = 0; unsent && p < n && niu_lib_tx_slot_free(ep, NIU_LO); p++) {
			uint32_t to = (cursor + p) % n;

			if (to == me || sent[to] == send_words[to])
				continue;
			length = send_words[to] - sent[to];
			if (length > NIU_MAX_PAYLOAD)
				length = NIU_MAX_PAYLOAD;
			niu_lib_time_enter(ep, NIU_TIME_SEND);
			header = niu_lib_header(to, ep->endpoint,
						NIU_TYPE_COLLECTIVE,
						ARCTIC_MODE_MPI, length);
			niu_lib_send_slot(ep, NIU_LO, header, x.epoch,
				  (uint32_t)sent[to], send[to] + sent[to],
				  (unsigned int)length);
			niu_lib_time_enter(ep, NIU_TIME_RECV);
			sent[to] += length;
			unsent -= length;
			cursor = (to + 1) % n;
			progress = true;
			break;
		}
		niu_lib_keep_other(ep, NIU_LO);
		while (niu_lib_take_slot(ep, NIU_LO, &msg)) {
			progress = true;
			if (is_exchange_msg(&msg, &x))
				exchange_take(&msg, &x);
			else if (niu_lib_stash_put(&ep->stash[NIU_LO], &msg))
				abort();	/* a million unread messages */
		}
		if (!progress && ep->peer_down)
			break;
		if (!progress)
			niu_lib_idle(ep, &spins, NIU_WAIT_RX);
	}
	free(sent);
	niu_lib_time_leave(ep, was);
	if (unsent || x.remaining)
		return -EHOSTDOWN;
	return x.errors ? -EPROTO : 0;
}

int niu_alltoallv(struct niu_endpoint *ep, const uint32_t *const send[],
		  const size_t send_words[], uint32_t *const recv[],
		  const size_t recv_words[])
{
	uint32_t n = ep->num_nodes, me = ep->node;

	if (!send || !send_words || !recv || !recv_words ||
	    check_counts((const void *const *)send, send_words, n) ||
	    check_counts((const void *const *)recv, recv_words, n) ||
	    send_words[me] != recv_words[me])
		return -EINVAL;
	return exchange(ep, ++ep->collective_epoch, send, send_words, recv,
			recv_words);
}

/* The four per-node arrays of an alltoallv call, all zero. */
struct exchange_plan {
	const uint32_t **send;
	uint32_t **recv;
	size_t *send_words, *recv_words;
};

/* @root: the collective's root, checked here; num_nodes - 1 if none. */
static int plan_alloc(struct exchange_plan *plan, uint32_t n, uint32_t root)
{
	if (root >= n)
		return -EINVAL;
	plan->send = calloc(n, sizeof(*plan->send));
	plan->recv = calloc(n, sizeof(*plan->recv));
	plan->send_words = calloc(n, sizeof(size_t));
	plan->recv_words = calloc(n, sizeof(size_t));
	if (plan->send && plan->recv && plan->send_words && plan->recv_words)
		return 0;
	free(plan->send);
	free(plan->recv);
	free(plan->send_words);
	free(plan->recv_words);
	return -ENOMEM;
}

static void plan_free(struct exchange_plan *plan)
{
	free(plan->send);
	free(plan->recv);
	free(plan->send_words);
	free(plan->recv_words);
}

static int plan_run(struct niu_endpoint *ep, struct exchange_plan *plan)
{
	int ret = niu_alltoallv(ep, plan->send, plan->send_words, plan->recv,
				plan->recv_words);

	plan_free(plan);
	return ret;
}

int niu_alltoall(struct niu_endpoint *ep, const uint32_t *send,
		 uint32_t *recv, size_t words)
{
	enum niu_time_kind was = niu_lib_time_enter(ep, NIU_TIME_RECV);
	struct exchange_plan plan;
	uint32_t p;
	int ret = -ENOMEM;

	if (!plan_alloc(&plan, ep->num_nodes, ep->num_nodes - 1)) {
		for (p = 0; p < ep->num_nodes; p++) {
			plan.send[p] = send + p * words;
			plan.recv[p] = recv + p * words;
			plan.send_words[p] = plan.recv_words[p] = words;
		}
		ret = plan_run(ep, &plan);
	}
	niu_lib_time_leave(ep, was);
	return ret;
}

/* One step of niu_bcast(): @words of @buf from @peer, or to it (@send). */
static int bcast_step(struct niu_endpoint *ep, uint32_t epoch,
		      struct exchange_plan *plan, uint32_t peer, uint32_t *buf,
		      size_t words, bool send)
{
	int ret;

	if (send) {
		plan->send[peer] = buf;
		plan->send_words[peer] = words;
	} else {
		plan->recv[peer] = buf;
		plan->recv_words[peer] = words;
	}
	ret = exchange(ep, epoch, plan->send, plan->send_words, plan->recv,
		       plan->recv_words);
	plan->send[peer] = NULL;
	plan->recv[peer] = NULL;
	plan->send_words[peer] = plan->recv_words[peer] = 0;
	return ret;
}

/*
 * A binomial tree rooted at @root, in ranks relative to it: rank r takes
 * the words from r minus its lowest set bit, then hands them on to r + m
 * for each power of two m below that bit, the largest subtree first, one
 * child after the other (each child starts handing on while the next is
 * served).  Every step of the tree runs under the one epoch.  At 16 nodes
 * the root sends 4 copies instead of 15, and the last node has the words
 * after 4 copies' time instead of 15.
 */
int niu_bcast(struct niu_endpoint *ep, uint32_t root, uint32_t *buf,
	      size_t words)
{
	uint32_t n = ep->num_nodes, me = ep->node, rel, mask, m, epoch;
	enum niu_time_kind was = niu_lib_time_enter(ep, NIU_TIME_RECV);
	struct exchange_plan plan;
	int ret = plan_alloc(&plan, n, root);

	if (!ret && words && !buf) {
		plan_free(&plan);
		ret = -EINVAL;
	}
	if (ret) {
		niu_lib_time_leave(ep, was);
		return ret;
	}
	epoch = ++ep->collective_epoch;
	rel = (me + n - root) % n;
	for (mask = 1; mask < n && !(rel & mask); mask <<= 1)
		;
	if (rel)
		ret = bcast_step(ep, epoch, &plan, (me + n - mask) % n, buf,
				 words, false);
	for (m = mask >> 1; !ret && m; m >>= 1) {
		if (rel + m < n)
			ret = bcast_step(ep, epoch, &plan, (me + m) % n, buf,
					 words, true);
	}
	plan_free(&plan);
	niu_lib_time_leave(ep, was);
	return ret;
}

int niu_gather(struct niu_endpoint *ep, uint32_t root, const uint32_t *send,
	       uint32_t *recv, size_t words)
{
	enum niu_time_kind was = niu_lib_time_enter(ep, NIU_TIME_RECV);
	struct exchange_plan plan;
	uint32_t p;
	int ret = plan_alloc(&plan, ep->num_nodes, root);

	if (!ret) {
		plan.send[root] = send;
		plan.send_words[root] = words;
		if (ep->node == root) {
			for (p = 0; p < ep->num_nodes; p++) {
				plan.recv[p] = recv + p * words;
				plan.recv_words[p] = words;
			}
		}
		ret = plan_run(ep, &plan);
	}
	niu_lib_time_leave(ep, was);
	return ret;
}

/* @into[i] = @into[i] op @from[i] for @count elements of 8 bytes. */
static void combine(enum niu_reduce_op op, void *into, const void *from,
		    size_t count)
{
	size_t i;

	for (i = 0; i < count; i++) {
		double d, e;
		int64_t a, b;

		switch (op) {
		case NIU_SUM_F64:
		case NIU_MAX_F64:
			memcpy(&d, (char *)into + 8 * i, 8);
			memcpy(&e, (const char *)from + 8 * i, 8);
			d = op == NIU_SUM_F64 ? d + e : (e > d ? e : d);
			memcpy((char *)into + 8 * i, &d, 8);
			break;
		case NIU_SUM_I64:
		case NIU_MAX_I64:
			memcpy(&a, (char *)into + 8 * i, 8);
			memcpy(&b, (const char *)from + 8 * i, 8);
			/* Wrap like the hardware would, not undefined. */
			a = op == NIU_SUM_I64 ?
			    (int64_t)((uint64_t)a + (uint64_t)b) :
			    (b > a ? b : a);
			memcpy((char *)into + 8 * i, &a, 8);
			break;
		}
	}
}

int niu_reduce(struct niu_endpoint *ep, uint32_t root, enum niu_reduce_op op,
	       void *buf, size_t count)
{
	size_t words = 2 * count;
	uint32_t *all = NULL, p;
	int ret;

	if (root >= ep->num_nodes || (unsigned int)op > NIU_MAX_I64)
		return -EINVAL;
	if (ep->node == root) {
		all = malloc(ep->num_nodes * words * sizeof(uint32_t) + 1);
		if (!all)
			return -ENOMEM;
	}
	ret = niu_gather(ep, root, buf, all, words);
	if (!ret && all) {
		/* Node order, so a sum of doubles is reproducible. */
		memcpy(buf, all, words * sizeof(uint32_t));
		for (p = 1; p < ep->num_nodes; p++)
			combine(op, buf, all + p * words, count);
	}
	free(all);
	return ret;
}

int niu_allreduce(struct niu_endpoint *ep, enum niu_reduce_op op, void *buf,
		  size_t count)
{
	int ret = niu_reduce(ep, 0, op, buf, count);

	return ret ? ret : niu_bcast(ep, 0, buf, 2 * count);
}

