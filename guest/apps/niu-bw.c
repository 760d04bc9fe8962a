/* SPDX-License-Identifier: MIT */
/*
 * niu-bw: one-way message-passing bandwidth between nodes 0 and 1 against
 * message size, through libniu (doorbell fast path, polled receive).  For
 * each payload size node 0 streams a train of messages to node 1 as fast
 * as its Tx queue takes them; node 1 checks every word and answers the
 * last one with a single acknowledgment, and node 0 times from the first
 * send to that acknowledgment.  It prints payload bytes per second (MB/s,
 * 10^6) and messages per second.  Other nodes only take part in the
 * barriers.  Then remote DMA: both nodes get a DMA window from the driver,
 * node 0 queues 2048-byte requests into node 1's window, node 1 counts the
 * notifications, checks every word that arrived and acknowledges; node 0
 * prints MB/s.  Without DMA windows (an older driver) it says why.
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

/* Node 0 sends @blocks blocks into node 1's window; returns wrong words. */
static unsigned int dma_bandwidth(struct niu_endpoint *ep,
				  unsigned int blocks)
{
	const unsigned int words = ARCTIC_D / 4;
	int ret = niu_dma_window(ep);
	uint32_t addr[2], *window = ep->dma_window, go;
	unsigned int k, i, bad = 0;
	struct niu_msg msg;
	uint64_t remote, start, ns;

	if (ep->node == 1) {
		addr[0] = (uint32_t)(uintptr_t)window;
		addr[1] = (uint32_t)((uint64_t)(uintptr_t)window >> 32);
		niu_send(ep, NIU_HI, 0, ep->endpoint, TYPE_WINDOW, -ret, 0,
			 addr, 2);
		niu_recv(ep, NIU_HI, &msg);
		if (msg.type != TYPE_GO || !msg.command[0])
			return msg.type != TYPE_GO;
		for (k = 0; k < blocks; k++) {
			niu_recv(ep, NIU_HI, &msg);
			/* mode 1: the NIU refused that block's data. */
			bad += msg.type != TYPE_DMA || msg.command[0] != k ||
			       msg.mode != 0;
		}
		for (k = 0; k < DMA_SLOTS && k < blocks; k++)
			for (i = 0; i < words; i++)
				bad += window[k * words + i] !=
				       dma_pattern(k, i);
		niu_send(ep, NIU_HI, 0, ep->endpoint, TYPE_ACK, bad, 0,
			 NULL, 0);
		return bad;
	}

	niu_recv(ep, NIU_HI, &msg);
	go = msg.type == TYPE_WINDOW && !ret && !msg.command[0];
	niu_send(ep, NIU_HI, 1, ep->endpoint, TYPE_GO, go, 0, NULL, 0);
	if (!go) {
		printf("niu-bw: DMA bandwidth: not available (window: %s)\n",
		       strerror(ret ? -ret : (int)msg.command[0]));
		return msg.type != TYPE_WINDOW;
	}
	remote = msg.payload[0] | (uint64_t)msg.payload[1] << 32;
	for (k = 0; k < DMA_SLOTS; k++)
		for (i = 0; i < words; i++)
			window[k * words + i] = dma_pattern(k, i);
	start = niu_now_ns();
	for (k = 0; k < blocks; k++) {
		ret = niu_dma_send(ep, 1, ep->endpoint, TYPE_DMA, k,
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

int main(int argc, char **argv)
{
	unsigned int messages = 2000, dma_blocks = 256, s, m, i, size;
	unsigned int wrong = 0, sleep_us = 0;
	enum niu_priority prio = NIU_LO;
	uint32_t payload[NIU_MAX_PAYLOAD];
	const char *device = NULL;
	struct niu_endpoint ep;
	struct niu_msg msg;
	uint64_t start, ns;
	int opt, ret;

	while ((opt = getopt(argc, argv, "n:b:Hs:d:h")) != -1) {
		switch (opt) {
		case 's':
			sleep_us = (unsigned int)atoi(optarg);
			break;
		case 'b':
			dma_blocks = (unsigned int)atoi(optarg);
			break;
		case 'n':
			messages = (unsigned int)atoi(optarg);
			break;
		case 'H':
			prio = NIU_HI;
			break;
		case 'd':
			device = optarg;
			break;
		default:
			fprintf(stderr, "Usage: niu-bw [-n MESSAGES per size] "
				"[-b DMA BLOCKS] [-H high priority] "
				"[-s USEC sleep in poll() when idle] "
				"[-d DEVICE]\n");
			return 2;
		}
	}
	ret = niu_open(&ep, device);
	if (ret) {
		fprintf(stderr, "niu-bw: open: %s\n", strerror(-ret));
		return 1;
	}
	if (ep.num_nodes < 2) {
		fprintf(stderr, "niu-bw: needs 2 nodes\n");
		return 1;
	}
	niu_set_idle_sleep(&ep, sleep_us);
	if (ep.node == 0)
		printf("niu-bw: node 0 -> node 1, %u messages per size, %s "
		       "priority\n words    MB/s   msgs/s\n", messages,
		       prio == NIU_HI ? "high" : "low");
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size = sizes[s];
		niu_barrier(&ep);
		if (ep.node == 0) {
			start = niu_now_ns();
			for (m = 0; m < messages; m++) {
				for (i = 0; i < size; i++)
					payload[i] = pattern(size, m, i);
				niu_send(&ep, prio, 1, ep.endpoint, TYPE_DATA,
					 m, 0, payload, size);
			}
			niu_recv(&ep, NIU_HI, &msg);
			ns = niu_now_ns() - start;
			wrong += msg.type != TYPE_ACK || msg.command[0] != 0;
			printf("%6u %7.3f %8.0f\n", size,
			       messages * size * 4.0 * 1e3 / ns,
			       messages * 1e9 / ns);
		} else if (ep.node == 1) {
			unsigned int bad = 0;

			for (m = 0; m < messages; m++) {
				unsigned int was = bad;

				niu_recv(&ep, prio, &msg);
				bad += msg.type != TYPE_DATA ||
				       msg.command[0] != m ||
				       msg.length != size;
				for (i = 0; i < msg.length; i++)
					bad += msg.payload[i] !=
					       pattern(size, m, i);
				/* The first wrong message says most. */
				if (bad && !was)
					printf("niu-bw: size %u message %u: "
					       "got type %u number %u length "
					       "%u from %u\n", size, m,
					       msg.type, msg.command[0],
					       msg.length, msg.source);
			}
			niu_send(&ep, NIU_HI, 0, ep.endpoint, TYPE_ACK, bad, 0,
				 NULL, 0);
			wrong += bad;
		}
	}
	niu_barrier(&ep);
	if (ep.node <= 1)
		wrong += dma_bandwidth(&ep, dma_blocks);
	niu_barrier(&ep);
	if (ep.stale_headers)	/* docs/guest.md, Known problems */
		printf("niu-bw: node %u: %llu stale receive header(s) of a "
		       "past lap cleared again\n", ep.node,
		       (unsigned long long)ep.stale_headers);
	if (ep.node == 0)	/* programming guide section 10.1 */
		printf("niu-bw: node 0: %llu doorbell(s) skipped behind a "
		       "slot the NIU had not taken yet\n",
		       (unsigned long long)ep.doorbells_skipped);
	if (ep.node <= 1)
		printf("niu-bw: node %u: %u wrong: %s\n", ep.node, wrong,
		       wrong ? "FAIL" : "PASS");
	niu_close(&ep);
	return wrong != 0;
}
