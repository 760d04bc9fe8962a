/* SPDX-License-Identifier: MIT */
/*
 * niu-bw: one-way message-passing bandwidth from node 0 to node 1 (or
 * from -k senders at once into the node of -r, or pairs at once with
 * -x MASK: node n to n ^ MASK) against message size,
 * through libniu (doorbell fast path, polled receive).  For each payload
 * size each sender streams a train of messages to the receiver as fast
 * as its Tx queue takes them; the receiver checks every word and answers
 * each sender's last one with a single acknowledgment, and each sender
 * times from its first send to that acknowledgment.  It prints payload
 * bytes per second (MB/s, 10^6) and messages per second.  Other nodes only take part in the
 * barriers.  Then remote DMA: every node taking part gets a DMA window
 * from the driver, each sender queues 2048-byte requests into blocks of
 * the receiver's window of its own, the receiver counts the
 * notifications, checks every word that arrived and acknowledges each
 * sender; each sender prints MB/s.  Without DMA windows (an older
 * driver) it says why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "niu.h"

enum {
	TYPE_DATA = 1,
	TYPE_ACK = 2,
	TYPE_WINDOW = 3,	/* node 1 -> 0: error, window address */
	TYPE_GO = 4,		/* node 0 -> 1: whether DMA runs */
	TYPE_DMA = 5,		/* notification of one block */
	DMA_SLOTS = 64,		/* blocks of the window used, round-robin */
};

static const unsigned int sizes[] = { 1, 2, 4, 8, 12, 16, 20 };

static uint32_t pattern(unsigned int size, unsigned int message,
			unsigned int i)
{
	return (message * 2654435761u) ^ (size << 24) ^ i;
}

static uint32_t dma_pattern(unsigned int block, unsigned int i)
{
	return (block << 16) ^ (i * 40503u) ^ 0xd3a0000u;
}

/*
 * Who takes part: the receiver, and the senders, the lowest-numbered
 * nodes other than it (node 0 -> node 1 by default).  Each sender's index
 * among them (-1: not a sender).
 */
struct roles {
	unsigned int receiver, senders;
	int pair_sender;	/* -x: this pair's one sender, else -1 */
};

static int sender_index(const struct roles *r, unsigned int node)
{
	unsigned int index = node - (node > r->receiver);

	if (r->pair_sender >= 0)
		return node == (unsigned int)r->pair_sender ? 0 : -1;
	return node != r->receiver && index < r->senders ? (int)index : -1;
}

static unsigned int sender_node(const struct roles *r, unsigned int index)
{
	if (r->pair_sender >= 0)
		return (unsigned int)r->pair_sender;
	return index + (index >= r->receiver);
}

/*
 * Each sender sends @blocks blocks into the receiver's window (DMA_SLOTS
 * blocks of its own there, round-robin); returns wrong words.
 */
static unsigned int dma_bandwidth(struct niu_endpoint *ep,
				  const struct roles *r, unsigned int blocks)
{
	const unsigned int words = ARCTIC_D / 4;
	int ret = niu_dma_window(ep);
	uint32_t addr[2], *window = ep->dma_window, go;
	unsigned int k, i, j, bad = 0, got = 0, *count;
	int me = sender_index(r, ep->node);
	struct niu_msg msg;
	uint64_t remote, start, ns;

	if (ep->node == r->receiver) {
		addr[0] = (uint32_t)(uintptr_t)window;
		addr[1] = (uint32_t)((uint64_t)(uintptr_t)window >> 32);
		for (j = 0; j < r->senders; j++)
			niu_send(ep, NIU_HI, sender_node(r, j), ep->endpoint,
				 TYPE_WINDOW, -ret, 0, addr, 2);
		for (j = 0; j < r->senders; j++) {
			niu_recv(ep, NIU_HI, &msg);
			if (msg.type != TYPE_GO || !msg.command[0])
				return msg.type != TYPE_GO;
		}
		count = calloc(r->senders, sizeof(*count));
		while (got < blocks * r->senders) {
			niu_recv(ep, NIU_HI, &msg);
			j = sender_index(r, msg.source);
			/* mode 1: the NIU refused that block's data. */
			bad += msg.type != TYPE_DMA || (int)j < 0 ||
			       msg.command[0] != count[j] || msg.mode != 0;
			got++;
			if ((int)j < 0)
				continue;
			if (++count[j] == blocks)
				niu_send(ep, NIU_HI, msg.source, ep->endpoint,
					 TYPE_ACK, 0, 0, NULL, 0);
		}
		for (j = 0; j < r->senders; j++)
			for (k = 0; k < DMA_SLOTS && k < blocks; k++)
				for (i = 0; i < words; i++)
					bad += window[(j * DMA_SLOTS + k) *
						      words + i] !=
					       dma_pattern(k, i);
		free(count);
		return bad;
	}

	niu_recv(ep, NIU_HI, &msg);
	go = msg.type == TYPE_WINDOW && !ret && !msg.command[0];
	niu_send(ep, NIU_HI, r->receiver, ep->endpoint, TYPE_GO, go, 0, NULL,
		 0);
	if (!go) {
		printf("niu-bw: DMA bandwidth: not available (window: %s)\n",
		       strerror(ret ? -ret : (int)msg.command[0]));
		return msg.type != TYPE_WINDOW;
	}
	remote = (msg.payload[0] | (uint64_t)msg.payload[1] << 32) +
		 (uint64_t)me * DMA_SLOTS * ARCTIC_D;
	for (k = 0; k < DMA_SLOTS; k++)
		for (i = 0; i < words; i++)
			window[k * words + i] = dma_pattern(k, i);
	start = niu_now_ns();
	for (k = 0; k < blocks; k++) {
		ret = niu_dma_send(ep, r->receiver, ep->endpoint, TYPE_DMA, k,
				   remote + (k % DMA_SLOTS) * ARCTIC_D,
				   window + (k % DMA_SLOTS) * words, NULL, 0);
		bad += ret != 0;
	}
	niu_recv(ep, NIU_HI, &msg);
	ns = niu_now_ns() - start;
	bad += msg.type != TYPE_ACK || msg.command[0] != 0;
	printf("niu-bw: DMA: %u blocks of %u bytes: %.3f MB/s\n", blocks,
	       ARCTIC_D, blocks * (double)ARCTIC_D * 1e3 / ns);
	return bad;
}

static void usage(void)
{
	fprintf(stderr,
		"Usage: niu-bw [-n MESSAGES] [-b BLOCKS] [-r NODE] [-k SENDERS] "
		"[-x MASK] [-H] [-s USEC] [-d DEVICE]\n"
		"  -n  messages per size (default 2000; 0: no message trains)\n"
		"  -b  remote-DMA blocks of 2048 bytes (default 256; 0: none)\n"
		"  -r  the receiving node (default 1)\n"
		"  -k  senders, the lowest-numbered other nodes, all at once\n"
		"      into the receiver (default 1: node 0)\n"
		"  -x  pairs instead, all at once: node n sends to n ^ MASK\n"
		"      for every n without MASK (a power of two; with -x 1\n"
		"      on 4 nodes, 0 -> 1 and 2 -> 3)\n"
		"  -H  high priority (default low)\n"
		"  -s  sleep up to USEC in poll() when a wait finds nothing;\n"
		"      -s 0 spins (default: NIU_IDLE_SLEEP_US, which\n"
		"      scripts/niu-cluster sets when a host has more nodes\n"
		"      than CPUs; else spin)\n"
		"  -d  device file (default /dev/arctic-niu0)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned int messages = 2000, dma_blocks = 256, s, m, i, j, size;
	unsigned int wrong = 0;
	int sleep_us = -1;		/* -1: the launcher's (libniu's) */
	enum niu_priority prio = NIU_LO;
	struct roles roles = { .receiver = 1, .senders = 1, .pair_sender = -1 };
	unsigned int mask = 0;
	uint32_t payload[NIU_MAX_PAYLOAD];
	const char *device = NULL;
	struct niu_endpoint ep;
	struct niu_msg msg;
	uint64_t start, ns;
	int opt, ret, me;

	while ((opt = getopt(argc, argv, "n:b:r:k:x:Hs:d:h")) != -1) {
		switch (opt) {
		case 's':
			sleep_us = atoi(optarg);
			if (sleep_us < 0)
				usage();
			break;
		case 'b':
			dma_blocks = (unsigned int)atoi(optarg);
			break;
		case 'n':
			messages = (unsigned int)atoi(optarg);
			break;
		case 'r':
			roles.receiver = (unsigned int)atoi(optarg);
			break;
		case 'k':
			roles.senders = (unsigned int)atoi(optarg);
			break;
		case 'x':
			mask = (unsigned int)strtoul(optarg, NULL, 0);
			if (!mask || (mask & (mask - 1)) || mask > 0x80)
				usage();
			break;
		case 'H':
			prio = NIU_HI;
			break;
		case 'd':
			device = optarg;
			break;
		default:
			usage();
		}
	}
	ret = niu_open(&ep, device);
	if (ret) {
		fprintf(stderr, "niu-bw: open: %s\n", strerror(-ret));
		return 1;
	}
	if (mask) {
		/* Pairs: node n sends to n ^ mask, for every n without it. */
		if (ep.num_nodes % (2 * mask)) {
			fprintf(stderr, "niu-bw: -x %u pairs %u nodes unevenly\n",
				mask, ep.num_nodes);
			return 1;
		}
		roles.receiver = ep.node | mask;
		roles.pair_sender = (int)(ep.node & ~mask);
	}
	if (roles.senders < 1 || roles.receiver >= ep.num_nodes ||
	    roles.senders + 1 > ep.num_nodes) {
		fprintf(stderr, "niu-bw: needs the receiver and %u sender(s) "
			"among the %u nodes\n", roles.senders, ep.num_nodes);
		return 1;
	}
	me = sender_index(&roles, ep.node);
	if (sleep_us >= 0)
		niu_set_idle_sleep(&ep, (unsigned int)sleep_us);
	if (me >= 0 && messages)
		printf("niu-bw: node %u -> node %u, %u messages per size, %s "
		       "priority, idle sleep %u us\n words    MB/s   msgs/s\n",
		       ep.node, roles.receiver, messages,
		       prio == NIU_HI ? "high" : "low", ep.idle_sleep_us);
	for (s = 0; messages && s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size = sizes[s];
		niu_barrier(&ep);
		if (me >= 0) {
			start = niu_now_ns();
			for (m = 0; m < messages; m++) {
				for (i = 0; i < size; i++)
					payload[i] = pattern(size, m, i);
				niu_send(&ep, prio, roles.receiver,
					 ep.endpoint, TYPE_DATA, m, 0,
					 payload, size);
			}
			niu_recv(&ep, NIU_HI, &msg);
			ns = niu_now_ns() - start;
			wrong += msg.type != TYPE_ACK || msg.command[0] != 0;
			printf("%6u %7.3f %8.0f\n", size,
			       messages * size * 4.0 * 1e3 / ns,
			       messages * 1e9 / ns);
		} else if (ep.node == roles.receiver) {
			unsigned int *count = calloc(roles.senders,
						     sizeof(*count));
			unsigned int *bad = calloc(roles.senders,
						   sizeof(*bad));

			for (m = 0; m < messages * roles.senders; m++) {
				unsigned int was;

				niu_recv(&ep, prio, &msg);
				j = sender_index(&roles, msg.source);
				if ((int)j < 0) {
					wrong++;
					continue;
				}
				was = bad[j];
				bad[j] += msg.type != TYPE_DATA ||
					  msg.command[0] != count[j] ||
					  msg.length != size;
				for (i = 0; i < msg.length; i++)
					bad[j] += msg.payload[i] !=
						  pattern(size, count[j], i);
				/* The first wrong message says most. */
				if (bad[j] && !was)
					printf("niu-bw: size %u message %u: "
					       "got type %u number %u length "
					       "%u from %u\n", size, count[j],
					       msg.type, msg.command[0],
					       msg.length, msg.source);
				if (++count[j] == messages) {
					niu_send(&ep, NIU_HI, msg.source,
						 ep.endpoint, TYPE_ACK, bad[j],
						 0, NULL, 0);
					wrong += bad[j];
				}
			}
			free(count);
			free(bad);
		}
	}
	niu_barrier(&ep);
	if (dma_blocks && (me >= 0 || ep.node == roles.receiver))
		wrong += dma_bandwidth(&ep, &roles, dma_blocks);
	niu_barrier(&ep);
	if (ep.stale_headers)	/* docs/guest.md, Known problems */
		printf("niu-bw: node %u: %llu stale receive header(s) of a "
		       "past lap cleared again\n", ep.node,
		       (unsigned long long)ep.stale_headers);
	if (me >= 0)	/* programming guide section 10.1 */
		printf("niu-bw: node %u: %llu doorbell(s) skipped behind a "
		       "slot the NIU had not taken yet\n", ep.node,
		       (unsigned long long)ep.doorbells_skipped);
	if (me >= 0 || ep.node == roles.receiver)
		printf("niu-bw: node %u: %u wrong: %s\n", ep.node, wrong,
		       wrong ? "FAIL" : "PASS");
	niu_close(&ep);
	return wrong != 0;
}
