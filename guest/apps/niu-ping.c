/* SPDX-License-Identifier: MIT */
/*
 * niu-ping: round-trip latency between pairs of nodes against message
 * size, through libniu (doorbell fast path, polled receive).  Nodes pair
 * up as (0,1), (2,3), ...; the even node of each pair sends a message, the
 * odd one returns it unchanged, and the even node checks every word of the
 * reply and times the round trip.  For each size it prints the median and
 * the 99th percentile in microseconds.  Exit status 0 means every reply
 * came back right; an odd node out just takes part in the barriers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "niu.h"

static const unsigned int default_sizes[] = { 0, 1, 2, 4, 8, 16, 20 };

static void usage(void)
{
	fprintf(stderr,
		"Usage: niu-ping [-n ITERATIONS] [-l] [-s USEC] [-e NSEC] "
		"[-x MASK] "
		"[-d DEVICE]\n"
		"  -n  round trips per message size (default 200)\n"
		"  -l  use the low-priority queues (default high)\n"
		"  -x  pair node n with node n ^ MASK, a power of two\n"
		"      (default 1): MASK 2^k crosses 2k+1 routers of the\n"
		"      fat tree (docs/network.md)\n"
		"  -s  wait in poll() (interrupts), up to USEC at a time,\n"
		"      instead of spinning; -s 0 spins (default: the idle\n"
		"      sleep of NIU_IDLE_SLEEP_US, which scripts/niu-cluster\n"
		"      sets when a host has more nodes than CPUs; else spin)\n"
		"  -e  each side waits NSEC (its clock) before it sends,\n"
		"      outside the time measured on the pinging side, so\n"
		"      that its NIU's ack of the last message has left: a\n"
		"      round trip then holds NSEC, two one-way latencies\n"
		"      and the programs' own time (default 0)\n"
		"  -d  device file (default /dev/arctic-niu0)\n");
	exit(2);
}

/* Spin for @ns of this node's clock (niu-ping -e). */
static void pause_ns(uint64_t ns)
{
	uint64_t t0 = niu_now_ns();

	while (ns && niu_now_ns() - t0 < ns)
		;
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint32_t pattern(unsigned int iteration, unsigned int size,
			unsigned int i)
{
	return (iteration * 2654435761u) ^ (size << 16) ^ i;
}

int main(int argc, char **argv)
{
	unsigned int iterations = 200, s, it, i;
	enum niu_priority prio = NIU_HI;
	const char *device = NULL;
	struct niu_endpoint ep;
	struct niu_msg msg;
	uint64_t *rtt;
	int sleep_us = -1;		/* -1: the launcher's (libniu's) */
	unsigned int mask = 1;
	uint64_t send_pause_ns = 0;
	int opt, ret, errors = 0;

	while ((opt = getopt(argc, argv, "n:ls:e:x:d:h")) != -1) {
		switch (opt) {
		case 's':
			sleep_us = atoi(optarg);
			if (sleep_us < 0)
				usage();
			break;
		case 'e':
			send_pause_ns = strtoull(optarg, NULL, 0);
			break;
		case 'n':
			iterations = (unsigned int)atoi(optarg);
			break;
		case 'l':
			prio = NIU_LO;
			break;
		case 'x':
			mask = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'd':
			device = optarg;
			break;
		default:
			usage();
		}
	}
	if (iterations == 0 || mask == 0 || (mask & (mask - 1)) ||
	    mask > 0x80)
		usage();
	ret = niu_open(&ep, device);
	if (ret) {
		fprintf(stderr, "niu-ping: cannot open the NIU: %s\n",
			strerror(-ret));
		return 2;
	}
	if (sleep_us >= 0)
		niu_set_idle_sleep(&ep, (unsigned int)sleep_us);
	rtt = calloc(iterations, sizeof(*rtt));
	if (!rtt)
		return 2;

	uint32_t peer = ep.node ^ mask;
	int pinger = !(ep.node & mask) && peer < ep.num_nodes;
	int echoer = (ep.node & mask) != 0;

	printf("niu-ping: node %u of %u, %s, %u round trips per size, %s priority, idle sleep %u us\n",
	       ep.node, ep.num_nodes,
	       pinger ? "pinging" : echoer ? "echoing" : "idle",
	       iterations, prio == NIU_HI ? "high" : "low", ep.idle_sleep_us);
	if (pinger || echoer)
		printf("niu-ping: node %u: peer node %u\n", ep.node, peer);
	if (niu_barrier(&ep)) {
		fprintf(stderr, "niu-ping: barrier failed\n");
		return 2;
	}
	if (pinger)
		printf("%6s %12s %12s %12s %12s\n", "words", "median_us",
		       "p99_us", "min_us", "mean_us");

	for (s = 0; s < sizeof(default_sizes) / sizeof(default_sizes[0]); s++) {
		unsigned int size = default_sizes[s];
		uint32_t payload[NIU_MAX_PAYLOAD];

		for (it = 0; it < iterations; it++) {
			if (echoer) {
				niu_recv(&ep, prio, &msg);
				pause_ns(send_pause_ns);
				niu_send(&ep, prio, msg.source, msg.endpoint,
					 msg.type, msg.command[0],
					 msg.command[1], msg.payload,
					 msg.length);
				continue;
			}
			if (!pinger)
				continue;
			for (i = 0; i < size; i++)
				payload[i] = pattern(it, size, i);
			pause_ns(send_pause_ns);
			uint64_t start = niu_now_ns();

			niu_send(&ep, prio, peer, ep.endpoint, 1, it, size,
				 payload, size);
			niu_recv(&ep, prio, &msg);
			rtt[it] = niu_now_ns() - start;

			int bad = msg.source != peer || msg.type != 1 ||
				  msg.command[0] != it ||
				  msg.command[1] != size || msg.length != size;
			for (i = 0; !bad && i < size; i++)
				bad = msg.payload[i] != pattern(it, size, i);
			if (bad && errors++ < 10)
				fprintf(stderr,
					"niu-ping: bad reply to %u words #%u\n",
					size, it);
		}
		if (!pinger)
			continue;
		uint64_t sum = 0;

		for (it = 0; it < iterations; it++)
			sum += rtt[it];
		qsort(rtt, iterations, sizeof(*rtt), compare_u64);
		printf("%6u %12.3f %12.3f %12.3f %12.3f\n", size,
		       rtt[iterations / 2] / 1e3,
		       rtt[(iterations * 99 + 99) / 100 - 1] / 1e3,
		       rtt[0] / 1e3, sum / 1e3 / iterations);
	}
	if (niu_barrier(&ep)) {
		fprintf(stderr, "niu-ping: barrier failed\n");
		return 2;
	}
	if (pinger)
		printf("niu-ping: %u replies checked, %d wrong: %s\n",
		       iterations *
		       (unsigned int)(sizeof(default_sizes) /
				      sizeof(default_sizes[0])),
		       errors, errors ? "FAIL" : "PASS");
	niu_close(&ep);
	free(rtt);
	return errors ? 1 : 0;
}
