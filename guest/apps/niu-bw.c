/* SPDX-License-Identifier: MIT */
/*
 * niu-bw: one-way message-passing bandwidth between nodes 0 and 1 against
 * message size, through libniu (doorbell fast path, polled receive).  For
 * each payload size node 0 streams a train of messages to node 1 as fast
 * as its Tx queue takes them; node 1 checks every word and answers the
 * last one with a single acknowledgment, and node 0 times from the first
 * send to that acknowledgment.  It prints payload bytes per second (MB/s,
 * 10^6) and messages per second.  Other nodes only take part in the
 * barriers.  Remote DMA bandwidth needs a DMA window mapped by the driver,
 * which it does not map yet; the program says so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "niu.h"

enum { TYPE_DATA = 1, TYPE_ACK = 2 };

static const unsigned int sizes[] = { 1, 2, 4, 8, 12, 16, 20 };

static uint32_t pattern(unsigned int size, unsigned int message,
			unsigned int i)
{
	return (message * 2654435761u) ^ (size << 24) ^ i;
}

int main(int argc, char **argv)
{
	unsigned int messages = 2000, s, m, i, size, wrong = 0;
	enum niu_priority prio = NIU_LO;
	uint32_t payload[NIU_MAX_PAYLOAD];
	const char *device = NULL;
	struct niu_endpoint ep;
	struct niu_msg msg;
	uint64_t start, ns;
	int opt, ret;

	while ((opt = getopt(argc, argv, "n:Hd:h")) != -1) {
		switch (opt) {
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
				"[-H high priority] [-d DEVICE]\n");
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
				niu_recv(&ep, prio, &msg);
				bad += msg.type != TYPE_DATA ||
				       msg.command[0] != m ||
				       msg.length != size;
				for (i = 0; i < msg.length; i++)
					bad += msg.payload[i] !=
					       pattern(size, m, i);
			}
			niu_send(&ep, NIU_HI, 0, ep.endpoint, TYPE_ACK, bad, 0,
				 NULL, 0);
			wrong += bad;
		}
	}
	niu_barrier(&ep);
	if (ep.node == 0)
		printf("niu-bw: DMA bandwidth: not available (the driver "
		       "maps no DMA window yet)\n");
	if (ep.node <= 1)
		printf("niu-bw: node %u: %u wrong: %s\n", ep.node, wrong,
		       wrong ? "FAIL" : "PASS");
	niu_close(&ep);
	return wrong != 0;
}
