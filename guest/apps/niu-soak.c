/* SPDX-License-Identifier: MIT */
/*
 * niu-soak: a long run of every kind of traffic around a ring of nodes,
 * every word checked, meant to be run through the switch's fault
 * injection (drop, duplicate, corrupt, delay) to show that the NIUs'
 * end-to-end protocol still delivers each message exactly once and in
 * order per stream.
 *
 * Node i sends MESSAGES messages to node i+1 (mod n): message m goes at
 * high priority when m % 3 == 0, else at low, with m % 21 payload words,
 * command0 = m and command1 = ~m ^ (i << 24); every DMA_EVERY messages it
 * also moves one 2048-byte block by remote DMA into node i+1's window,
 * whose notification carries the block's number.  Node i checks what
 * comes from node i-1: per priority the numbers must follow the sender's
 * order with no gap and no repeat, every word must be right, and every
 * DMA block must hold its pattern when its notification arrives.  Each
 * node prints its figures and "PASS" or "FAIL"; a node that waits WAIT
 * seconds for a message that never comes says what it waits for.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "niu.h"
#include "uapi/arctic_niu.h"

enum {
	TYPE_DATA = 1,
	TYPE_DMA = 2,		/* notification: command0 = block number */
	TYPE_WINDOW = 3,	/* payload: the sender's window address */
	/* The window: blocks it receives below, blocks it sends from above. */
	RX_BLOCKS = ARCTIC_NIU_DMA_WINDOW_SIZE / 2 / ARCTIC_D,
	SOURCE_BLOCKS = 64,
	WORDS_PER_BLOCK = ARCTIC_D / 4,
};

struct stream_check {
	uint32_t expected;	/* next message number of this priority */
	uint64_t received, wrong, gaps, repeats;
};

struct soak {
	struct niu_endpoint ep;
	uint32_t me, next, prev, messages, dma_every;
	uint32_t *window;		/* ours: [0, RX_BLOCKS) receive */
	uint64_t next_window;		/* where to DMA into node next */
	struct stream_check stream[NIU_NUM_PRIORITIES];
	uint64_t dma_sent, dma_received, dma_wrong, dma_order;
	uint32_t dma_expected;
	bool first_reported;
};

static enum niu_priority prio_of(uint32_t m)
{
	return m % 3 == 0 ? NIU_HI : NIU_LO;
}

static uint32_t length_of(uint32_t m)
{
	return m % (NIU_MAX_PAYLOAD + 1);
}

static uint32_t word(uint32_t from, uint32_t m, uint32_t i)
{
	return (from << 26) ^ (m * 2654435761u) ^ (i * 40503u);
}

static uint32_t block_word(uint32_t from, uint32_t source_block, uint32_t i)
{
	return (from << 28) ^ (source_block << 16) ^ (i * 69069u) ^ 0x50a5u;
}

/* The first message number above @m (exclusive) of priority @p. */
static uint32_t next_of_prio(uint32_t m, enum niu_priority p)
{
	do {
		m++;
	} while (prio_of(m) != p);
	return m;
}

static uint32_t first_of_prio(enum niu_priority p)
{
	return p == NIU_HI ? 0 : 1;
}

static void report_first(struct soak *s, const char *what, uint32_t got,
			 uint32_t want)
{
	if (s->first_reported)
		return;
	s->first_reported = true;
	printf("niu-soak: node %u: first problem: %s (got %u, expected %u)\n",
	       s->me, what, got, want);
}

static void check_data(struct soak *s, enum niu_priority p,
		       const struct niu_msg *msg)
{
	struct stream_check *c = &s->stream[p];
	uint32_t m = msg->command[0], i;
	bool right;

	c->received++;
	if (m != c->expected) {
		if (m < c->expected || prio_of(m) != p) {
			c->repeats++;
			report_first(s, p == NIU_HI ? "high message repeated"
						    : "low message repeated",
				     m, c->expected);
			return;
		}
		c->gaps++;
		report_first(s, p == NIU_HI ? "high message missing"
					    : "low message missing",
			     m, c->expected);
	}
	right = msg->source == s->prev && msg->length == length_of(m) &&
		msg->command[1] == (~m ^ (s->prev << 24));
	for (i = 0; right && i < msg->length; i++)
		right = msg->payload[i] == word(s->prev, m, i);
	if (!right) {
		c->wrong++;
		report_first(s, "wrong words in a message", m, m);
	}
	c->expected = next_of_prio(m, p);
}

static void check_dma(struct soak *s, const struct niu_msg *msg)
{
	uint32_t k = msg->command[0], i;
	const uint32_t *block = s->window + (k % RX_BLOCKS) * WORDS_PER_BLOCK;

	s->dma_received++;
	if (msg->mode) {
		/* Our NIU refused some of this block's data (its notice). */
		s->dma_wrong++;
		report_first(s, "DMA block refused by our NIU", k, k);
	}
	if (k != s->dma_expected) {
		s->dma_order++;
		report_first(s, "DMA notification out of order", k,
			     s->dma_expected);
	}
	s->dma_expected = k + 1;
	for (i = 0; i < WORDS_PER_BLOCK; i++) {
		if (block[i] != block_word(s->prev, k % SOURCE_BLOCKS, i)) {
			s->dma_wrong++;
			report_first(s, "wrong words in a DMA block", k, k);
			break;
		}
	}
}

/* Take and check everything that has arrived; false on a peer down. */
static void take_incoming(struct soak *s)
{
	struct niu_msg msg;
	enum niu_priority p;

	for (p = NIU_HI; p < NIU_NUM_PRIORITIES; p++) {
		while (niu_try_recv(&s->ep, p, &msg)) {
			if (msg.type == TYPE_DMA && p == NIU_HI)
				check_dma(s, &msg);
			else if (msg.type == TYPE_DATA)
				check_data(s, p, &msg);
			else
				report_first(s, "unexpected message type",
					     msg.type, TYPE_DATA);
		}
	}
}

static bool all_received(const struct soak *s)
{
	uint64_t hi = (s->messages + 2) / 3, lo = s->messages - hi;

	return s->stream[NIU_HI].received >= hi &&
	       s->stream[NIU_LO].received >= lo &&
	       s->dma_received >= s->dma_sent;
}

/* Tell node prev where our window is; learn node next's. */
static int exchange_windows(struct soak *s)
{
	uint32_t addr[2] = {
		(uint32_t)(uintptr_t)s->window,
		(uint32_t)((uint64_t)(uintptr_t)s->window >> 32),
	};
	struct niu_msg msg;
	int ret;

	ret = niu_send(&s->ep, NIU_HI, s->prev, s->ep.endpoint, TYPE_WINDOW,
		       0, 0, addr, 2);
	if (ret)
		return ret;
	ret = niu_recv(&s->ep, NIU_HI, &msg);
	if (ret)
		return ret;
	if (msg.type != TYPE_WINDOW || msg.source != s->next)
		return -EPROTO;
	s->next_window = msg.payload[0] | (uint64_t)msg.payload[1] << 32;
	return niu_barrier(&s->ep);
}

static int run(struct soak *s, unsigned int wait_s)
{
	uint32_t *source = s->window + RX_BLOCKS * WORDS_PER_BLOCK;
	uint32_t payload[NIU_MAX_PAYLOAD], m, i, b;
	uint64_t start = niu_now_ns(), deadline;
	double seconds;
	int ret;

	for (b = 0; b < SOURCE_BLOCKS; b++)
		for (i = 0; i < WORDS_PER_BLOCK; i++)
			source[b * WORDS_PER_BLOCK + i] = block_word(s->me, b, i);
	for (m = 0; m < s->messages; m++) {
		for (i = 0; i < length_of(m); i++)
			payload[i] = word(s->me, m, i);
		ret = niu_send(&s->ep, prio_of(m), s->next, s->ep.endpoint,
			       TYPE_DATA, m, ~m ^ (s->me << 24), payload,
			       length_of(m));
		if (ret)
			return ret;
		if (s->dma_every && m % s->dma_every == s->dma_every - 1) {
			b = (uint32_t)(s->dma_sent % SOURCE_BLOCKS);
			ret = niu_dma_send(&s->ep, s->next, s->ep.endpoint,
					   TYPE_DMA, (uint32_t)s->dma_sent,
					   s->next_window +
					   (s->dma_sent % RX_BLOCKS) * ARCTIC_D,
					   source + b * WORDS_PER_BLOCK, NULL, 0);
			if (ret)
				return ret;
			s->dma_sent++;
		}
		take_incoming(s);
		if (niu_peer_down(&s->ep) >= 0)
			return -EHOSTDOWN;
	}
	deadline = niu_now_ns() + (uint64_t)wait_s * 1000000000u;
	while (!all_received(s)) {
		take_incoming(s);
		if (niu_peer_down(&s->ep) >= 0)
			return -EHOSTDOWN;
		if (niu_now_ns() > deadline) {
			printf("niu-soak: node %u: after %u s still waiting: "
			       "high %llu, low %llu, DMA %llu received\n",
			       s->me, wait_s,
			       (unsigned long long)s->stream[NIU_HI].received,
			       (unsigned long long)s->stream[NIU_LO].received,
			       (unsigned long long)s->dma_received);
			return -ETIMEDOUT;
		}
		usleep(100);
	}
	seconds = (niu_now_ns() - start) / 1e9;
	printf("niu-soak: node %u: %u messages and %llu DMA blocks to node "
	       "%u in %.2f s (%.0f messages/s)\n", s->me, s->messages,
	       (unsigned long long)s->dma_sent, s->next, seconds,
	       s->messages / seconds);
	return niu_barrier(&s->ep);
}

static void usage(FILE *to)
{
	fprintf(to, "Usage: niu-soak [-n MESSAGES] [-D DMA_EVERY] [-w WAIT] "
		"[-d DEVICE]\n"
		"Every node sends MESSAGES (default 25000) messages to the next "
		"node of a ring,\na third at high priority, 0..20 words, and a "
		"2048-byte remote DMA block every\nDMA_EVERY messages (default "
		"50; 0: none), and checks everything it receives\nfrom the "
		"previous node: no message lost, repeated or out of order, "
		"every word\nright.  A node waits at most WAIT seconds (default "
		"120) for the last ones.\n");
}

int main(int argc, char **argv)
{
	struct soak s = { .messages = 25000, .dma_every = 50 };
	unsigned int wait_s = 120;
	const char *device = NULL;
	uint64_t problems;
	int opt, ret;
	enum niu_priority p;

	while ((opt = getopt(argc, argv, "n:D:w:d:h")) != -1) {
		switch (opt) {
		case 'n':
			s.messages = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'D':
			s.dma_every = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'w':
			wait_s = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'd':
			device = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	ret = niu_open(&s.ep, device);
	if (ret) {
		fprintf(stderr, "niu-soak: open: %s\n", strerror(-ret));
		return 2;
	}
	if (s.ep.num_nodes < 2) {
		fprintf(stderr, "niu-soak: needs 2 nodes or more\n");
		niu_close(&s.ep);
		return 2;
	}
	s.me = s.ep.node;
	s.next = (s.me + 1) % s.ep.num_nodes;
	s.prev = (s.me + s.ep.num_nodes - 1) % s.ep.num_nodes;
	for (p = NIU_HI; p < NIU_NUM_PRIORITIES; p++)
		s.stream[p].expected = first_of_prio(p);
	ret = niu_dma_window(&s.ep);
	if (!ret) {
		s.window = s.ep.dma_window;
		ret = exchange_windows(&s);
	}
	if (!ret)
		ret = run(&s, wait_s);
	problems = s.stream[NIU_HI].wrong + s.stream[NIU_HI].gaps +
		   s.stream[NIU_HI].repeats + s.stream[NIU_LO].wrong +
		   s.stream[NIU_LO].gaps + s.stream[NIU_LO].repeats +
		   s.dma_wrong + s.dma_order;
	printf("niu-soak: node %u: from node %u: high %llu, low %llu, DMA "
	       "%llu; wrong %llu, missing %llu, repeated %llu, DMA wrong "
	       "%llu, DMA out of order %llu%s%s: %s\n", s.me, s.prev,
	       (unsigned long long)s.stream[NIU_HI].received,
	       (unsigned long long)s.stream[NIU_LO].received,
	       (unsigned long long)s.dma_received,
	       (unsigned long long)(s.stream[NIU_HI].wrong +
				    s.stream[NIU_LO].wrong),
	       (unsigned long long)(s.stream[NIU_HI].gaps +
				    s.stream[NIU_LO].gaps),
	       (unsigned long long)(s.stream[NIU_HI].repeats +
				    s.stream[NIU_LO].repeats),
	       (unsigned long long)s.dma_wrong,
	       (unsigned long long)s.dma_order, ret ? "; " : "",
	       ret ? strerror(-ret) : "", ret || problems ? "FAIL" : "PASS");
	niu_close(&s.ep);
	return ret || problems ? 1 : 0;
}
