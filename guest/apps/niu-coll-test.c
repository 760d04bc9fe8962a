/* SPDX-License-Identifier: MIT */
/*
 * niu-coll-test: every libniu collective and active-message primitive on
 * all nodes at once, with values each node can predict, so every word
 * received is checked.  Rounds of: barrier; all-to-all (block p of node q
 * is a function of q, p, the round and the word index); broadcast from
 * every root in turn; reduce and allreduce of doubles and int64 (sum and
 * max, whose exact results follow from the node numbers); an active-
 * message request to the next node answered by a reply; a block transfer
 * into the next node's segment, whose completion handler checks it.  Node
 * 0 prints one line per primitive with the count of wrong values; exit
 * status 0 means none anywhere.  A node that stops answering ends the run
 * on every other node with "node N stopped answering: FAIL", status 3.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "niu.h"

enum {
	AM_PING = 1,		/* request: args are a pattern to echo */
	AM_PONG = 2,		/* reply: the pattern back */
	XFER_SEGMENT = 0,
	XFER_WORDS = 250,	/* 13 messages, the last one short */
};

static unsigned int pings, pongs, pong_wrong, xfer_done, current_round;

static uint32_t value(uint32_t from, uint32_t to, uint32_t round, size_t i)
{
	return (from << 24) ^ (to << 16) ^ (round * 2654435761u) ^ (uint32_t)i;
}

static void ping_handler(struct niu_endpoint *ep, const struct niu_msg *msg)
{
	pings++;
	niu_am_reply(ep, msg, AM_PONG, msg->payload, msg->length);
}

static void pong_handler(struct niu_endpoint *ep, const struct niu_msg *msg)
{
	unsigned int i;

	if (msg->length != NIU_MAX_PAYLOAD)
		pong_wrong++;
	for (i = 0; i < msg->length; i++)
		pong_wrong += msg->payload[i] != value(ep->node, msg->source,
						       current_round, i);
	pongs++;
}

static void xfer_complete(struct niu_endpoint *ep, unsigned int segment,
			  void *arg)
{
	xfer_done++;
}

/*
 * A node that stopped answering makes every later call fail (libniu
 * returns -EHOSTDOWN and tells the other nodes): say which and stop.
 */
static void stop_if_peer_down(struct niu_endpoint *ep)
{
	int down = niu_peer_down(ep);

	if (down < 0)
		return;
	printf("niu-coll-test: node %u: node %d stopped answering: FAIL\n",
	       ep->node, down);
	fflush(stdout);
	exit(3);
}

/* Count @what's failures per primitive, over all nodes at the end. */
enum check { ALLTOALL, BCAST, REDUCE, ALLREDUCE, ACTIVE, XFER, CALLS,
	     NUM_CHECKS };
static const char *const check_name[NUM_CHECKS] = {
	"all-to-all", "broadcast", "reduce", "allreduce",
	"active messages", "block transfer", "failed calls",
};

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * What a round of every collective took on node 0 (its clock, from the
 * round's first call to its closing barrier): median, mean, p99, max.
 */
static void print_round_times(uint64_t *ns, unsigned int rounds)
{
	uint64_t sum = 0;
	unsigned int i;

	if (!rounds)
		return;
	for (i = 0; i < rounds; i++)
		sum += ns[i];
	qsort(ns, rounds, sizeof(*ns), compare_u64);
	printf("niu-coll-test: round ms: median %.3f mean %.3f p99 %.3f "
	       "max %.3f over %u rounds\n", ns[rounds / 2] / 1e6,
	       sum / 1e6 / rounds, ns[(rounds * 99 + 99) / 100 - 1] / 1e6,
	       ns[rounds - 1] / 1e6, rounds);
}

int main(int argc, char **argv)
{
	unsigned int rounds = 3, round, i;
	int64_t wrong[NUM_CHECKS] = { 0 };
	const char *device = NULL;
	struct niu_endpoint ep;
	uint32_t n, me, p, words = 50, *send, *recv, *seg;
	uint64_t *round_ns, round_start;
	int opt, ret;

	while ((opt = getopt(argc, argv, "r:w:d:h")) != -1) {
		switch (opt) {
		case 'r':
			rounds = (unsigned int)atoi(optarg);
			break;
		case 'w':
			words = (uint32_t)atoi(optarg);
			break;
		case 'd':
			device = optarg;
			break;
		default:
			fprintf(stderr, "Usage: niu-coll-test [-r ROUNDS] "
				"[-w WORDS per all-to-all block] [-d DEVICE]\n");
			return 2;
		}
	}
	ret = niu_open(&ep, device);
	if (ret) {
		fprintf(stderr, "niu-coll-test: open: %s\n", strerror(-ret));
		return 1;
	}
	n = ep.num_nodes;
	me = ep.node;
	/* send also carries the block transfer's XFER_WORDS. */
	send = calloc((size_t)n * words + 1 > XFER_WORDS ?
		      (size_t)n * words + 1 : XFER_WORDS, sizeof(uint32_t));
	recv = calloc((size_t)n * words + 1, sizeof(uint32_t));
	seg = calloc(XFER_WORDS, sizeof(uint32_t));
	round_ns = calloc(rounds + 1, sizeof(*round_ns));
	if (!send || !recv || !seg || !round_ns)
		return 1;
	niu_am_register(&ep, AM_PING, ping_handler);
	niu_am_register(&ep, AM_PONG, pong_handler);
	if (me == 0)
		printf("niu-coll-test: %u nodes, %u rounds, %u words per "
		       "all-to-all block\n", n, rounds, words);
	wrong[CALLS] += niu_barrier(&ep) != 0;
	stop_if_peer_down(&ep);

	for (round = 0; round < rounds; round++) {
		double d[3];
		uint64_t now;
		int64_t v[2];
		uint32_t args[NIU_MAX_PAYLOAD];

		round_start = niu_now_ns();

		for (p = 0; p < n; p++)
			for (i = 0; i < words; i++)
				send[p * words + i] = value(me, p, round, i);
		memset(recv, 0, (size_t)n * words * sizeof(uint32_t));
		wrong[CALLS] += niu_alltoall(&ep, send, recv, words) != 0;
		stop_if_peer_down(&ep);
		for (p = 0; p < n; p++)
			for (i = 0; i < words; i++)
				wrong[ALLTOALL] += recv[p * words + i] !=
						   value(p, me, round, i);

		for (p = 0; p < n; p++) {
			for (i = 0; i < words; i++)
				recv[i] = me == p ? value(p, 99, round, i) : 0;
			wrong[CALLS] += niu_bcast(&ep, p, recv, words) != 0;
			stop_if_peer_down(&ep);
			for (i = 0; i < words; i++)
				wrong[BCAST] += recv[i] !=
						value(p, 99, round, i);
		}

		/* Sums and maxima of me + 1 and me * round over 0..n-1. */
		d[0] = me + 1.0;
		d[1] = -(double)me;
		d[2] = 0.5 * me;
		v[0] = (int64_t)me * round - 3;
		v[1] = ((int64_t)me << 40) + round;
		wrong[CALLS] += niu_reduce(&ep, n - 1, NIU_SUM_F64, d, 3) != 0;
		stop_if_peer_down(&ep);
		wrong[CALLS] += niu_allreduce(&ep, NIU_MAX_I64, v, 2) != 0;
		stop_if_peer_down(&ep);
		if (me == n - 1)
			wrong[REDUCE] += d[0] != n * (n + 1) / 2.0 ||
					 d[1] != -(n * (n - 1) / 2.0) ||
					 d[2] != n * (n - 1) / 4.0;
		else
			wrong[REDUCE] += d[0] != me + 1.0;
		wrong[ALLREDUCE] += v[0] != (int64_t)(n - 1) * round - 3 ||
				    v[1] != ((int64_t)(n - 1) << 40) + round;
		v[0] = me;
		v[1] = -1;
		wrong[CALLS] += niu_allreduce(&ep, NIU_SUM_I64, v, 2) != 0;
		stop_if_peer_down(&ep);
		wrong[ALLREDUCE] += v[0] != (int64_t)n * (n - 1) / 2 ||
				    v[1] != -(int64_t)n;

		/* Active messages: a request to the next node, its reply. */
		for (i = 0; i < NIU_MAX_PAYLOAD; i++)
			args[i] = value(me, (me + 1) % n, round, i);
		memset(seg, 0, XFER_WORDS * sizeof(uint32_t));
		niu_am_segment_open(&ep, XFER_SEGMENT, seg, XFER_WORDS,
				    xfer_complete, NULL);
		current_round = round;
		wrong[CALLS] += niu_barrier(&ep) != 0;	/* segments open */
		stop_if_peer_down(&ep);
		wrong[CALLS] += niu_am_request(&ep, (me + 1) % n, AM_PING,
					       args, NIU_MAX_PAYLOAD) != 0;
		stop_if_peer_down(&ep);
		for (i = 0; i < XFER_WORDS; i++)
			send[i] = value(me, 77, round, i);
		wrong[CALLS] += niu_am_xfer(&ep, NIU_LO, (me + 1) % n,
					    XFER_SEGMENT, 0, send,
					    XFER_WORDS) != 0;
		stop_if_peer_down(&ep);
		/*
		 * Serve the previous node's request too before the barrier,
		 * which runs no handlers.
		 */
		while (pongs <= round || xfer_done <= round || pings <= round) {
			niu_am_poll(&ep);
			stop_if_peer_down(&ep);
		}
		for (i = 0; i < XFER_WORDS; i++)
			wrong[XFER] += seg[i] != value((me + n - 1) % n, 77,
						       round, i);
		wrong[CALLS] += niu_barrier(&ep) != 0;
		stop_if_peer_down(&ep);
		now = niu_now_ns();
		round_ns[round] = now - round_start;
	}
	wrong[ACTIVE] = pong_wrong + (pongs != rounds);
	wrong[XFER] += ep.am_errors + (xfer_done != rounds);

	wrong[CALLS] += niu_reduce(&ep, 0, NIU_SUM_I64, wrong, NUM_CHECKS) != 0;
	stop_if_peer_down(&ep);
	ret = 0;
	if (me == 0) {
		for (i = 0; i < NUM_CHECKS; i++) {
			printf("niu-coll-test: %-16s %lld wrong\n",
			       check_name[i], (long long)wrong[i]);
			ret |= wrong[i] != 0;
		}
		print_round_times(round_ns, rounds);
		printf("niu-coll-test: %s\n", ret ? "FAIL" : "PASS");
	}
	niu_close(&ep);
	return ret;
}
