/* SPDX-License-Identifier: MIT */
/*
 * niu-ping: round-trip latency between pairs of nodes against message
 * size, through libniu (doorbell fast path, polled receive).  Nodes pair
 * up as (0,1), (2,3), ...; the even node of each pair sends a message, the
 * odd one returns it unchanged, and the even node checks every word of the
 * reply and times the round trip.  For each size it prints the median and
 * the 99th percentile in microseconds.  Exit status 0 means every reply
 * came back right; an odd node out just takes part in the barriers.
 *
 * With -c it counts instead the guest instructions of libniu's calls on
 * both nodes of a pair (count_calls()): exact in timed mode, where each
 * instruction takes the same virtual time (docs/timed-mode.md).
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
		"[-c] [-d DEVICE]\n"
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
		"  -c  count the guest instructions of each call instead,\n"
		"      on both nodes of a pair: niu_send and niu_recv of 1\n"
		"      and 20 words, niu_am_request and the niu_am_poll that\n"
		"      runs its handler (1 word), niu_recv_any with libniu's\n"
		"      time accounting off and on, niu_now_ns, niu_stats_time\n"
		"      and a TSC read; the median of -n calls of\n"
		"      each, the reading of the clock taken off; exact only in\n"
		"      timed mode (scripts/niu-cluster --timed)\n"
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

/* --- niu-ping -c: instructions per call -------------------------------- */

enum {
	ROW_SEND_1, ROW_RECV_1, ROW_SEND_20, ROW_RECV_20, ROW_AM_REQUEST,
	ROW_AM_POLL, ROW_RECV_ANY, ROW_RECV_ANY_TIMED, ROW_NOW_NS,
	ROW_STATS_TIME, ROWS
};

static const struct {
	const char *call;
	unsigned int words;
} count_row[ROWS] = {
	[ROW_SEND_1] = { "niu_send", 1 },
	[ROW_RECV_1] = { "niu_recv", 1 },
	[ROW_SEND_20] = { "niu_send", 20 },
	[ROW_RECV_20] = { "niu_recv", 20 },
	[ROW_AM_REQUEST] = { "niu_am_request", 1 },
	[ROW_AM_POLL] = { "niu_am_poll", 1 },
	[ROW_RECV_ANY] = { "niu_recv_any", 1 },
	[ROW_RECV_ANY_TIMED] = { "niu_recv_any, accounting on", 1 },
	[ROW_NOW_NS] = { "niu_now_ns", 0 },
	[ROW_STATS_TIME] = { "niu_stats_time", 0 },
};

/*
 * The guest's clock in its finest unit: the TSC, which counts virtual
 * nanoseconds in timed mode (the guest image is x86-64 only).
 */
static inline uint64_t ticks(void)
{
	return __builtin_ia32_rdtsc();
}

/* Ticks of a loop of 2 * @n instructions (sub, jnz). */
static uint64_t loop_ticks(unsigned long n)
{
	uint64_t t0 = ticks();

	__asm__ volatile("1: sub $1, %0\n\tjnz 1b" : "+r"(n) : : "cc");
	return ticks() - t0;
}

static unsigned int count_handled;

static void count_handler(struct niu_endpoint *ep, const struct niu_msg *msg)
{
	count_handled += msg->length == 1;
}

/* Spin, outside the calls measured, until @prio's next slot is valid. */
static void wait_arrival(struct niu_endpoint *ep, enum niu_priority prio)
{
	while (!(ep->rx[prio][ep->rx_tail[prio]].header & ARCTIC_MPI_VALID))
		if (ep->link_poll)
			(void)*ep->link_poll;
}

/*
 * niu-ping -c: every call measured between two reads of the TSC, with
 * the message it receives already in its slot, so that no wait is
 * counted; the median over @iterations calls (a timer interrupt inside
 * one call adds to that one only), less what two reads back to back
 * take, divided by the ticks of one instruction (measured on a loop of
 * known length: 2^shift in timed mode, docs/timed-mode.md "The
 * processor").  Returns the number of wrong messages.
 */
static int count_calls(struct niu_endpoint *ep, enum niu_priority prio,
		       uint32_t peer, bool pinger, unsigned int iterations)
{
	uint64_t *sample[ROWS], overhead = UINT64_MAX, loop = UINT64_MAX, t;
	uint32_t payload[NIU_MAX_PAYLOAD];
	unsigned int it, r, i, words;
	double per_insn, insns[ROWS];
	struct niu_msg msg;
	int errors = 0;

	for (i = 0; i < 100; i++) {
		t = ticks();
		t = ticks() - t;
		overhead = t < overhead ? t : overhead;
	}
	for (i = 0; i < 5; i++) {
		t = loop_ticks(100000);
		loop = t < loop ? t : loop;
	}
	per_insn = (double)(loop - overhead) / 200000;
	for (r = 0; r < ROWS; r++) {
		sample[r] = calloc(iterations, sizeof(*sample[r]));
		if (!sample[r])
			return 1;
	}
	for (r = ROW_SEND_1; r <= ROW_SEND_20; r += 2) {
		words = count_row[r].words;
		for (it = 0; it < iterations; it++) {
			for (i = 0; i < words; i++)
				payload[i] = pattern(it, words, i);
			if (pinger) {
				t = ticks();
				niu_send(ep, prio, peer, ep->endpoint, 1, it,
					 words, payload, words);
				sample[r][it] = ticks() - t;
			}
			wait_arrival(ep, prio);
			t = ticks();
			niu_recv(ep, prio, &msg);
			sample[r + 1][it] = ticks() - t;
			errors += msg.length != words || msg.command[0] != it ||
				  memcmp(msg.payload, payload,
					 words * sizeof(payload[0]));
			if (!pinger) {
				t = ticks();
				niu_send(ep, prio, peer, ep->endpoint, 1, it,
					 words, payload, words);
				sample[r][it] = ticks() - t;
			}
		}
	}
	niu_am_register(ep, 1, count_handler);
	for (it = 0; it < iterations; it++) {
		payload[0] = it;
		if (pinger) {
			t = ticks();
			niu_am_request(ep, peer, 1, payload, 1);
			sample[ROW_AM_REQUEST][it] = ticks() - t;
		}
		wait_arrival(ep, NIU_LO);
		t = ticks();
		niu_am_poll(ep);
		sample[ROW_AM_POLL][it] = ticks() - t;
		if (!pinger) {
			t = ticks();
			niu_am_request(ep, peer, 1, payload, 1);
			sample[ROW_AM_REQUEST][it] = ticks() - t;
		}
	}
	niu_am_register(ep, 1, NULL);
	errors += count_handled != iterations;
	/*
	 * What libniu's time accounting costs: a call that switches kinds
	 * twice (niu_recv_any(): receiving, then back), off and on; a clock
	 * read; and a look at the counters.
	 */
	for (r = ROW_RECV_ANY; r <= ROW_RECV_ANY_TIMED; r++) {
		niu_stats_time_on(ep, r == ROW_RECV_ANY_TIMED);
		for (it = 0; it < iterations; it++) {
			payload[0] = it;
			if (pinger)
				niu_send(ep, prio, peer, ep->endpoint, 1, it,
					 1, payload, 1);
			wait_arrival(ep, prio);
			t = ticks();
			niu_recv_any(ep, &msg, NULL);
			sample[r][it] = ticks() - t;
			errors += msg.length != 1 || msg.command[0] != it;
			if (!pinger)
				niu_send(ep, prio, peer, ep->endpoint, 1, it,
					 1, payload, 1);
		}
	}
	for (it = 0; it < iterations; it++) {
		uint64_t ns[NIU_TIME_KINDS];

		t = ticks();
		(void)niu_now_ns();
		sample[ROW_NOW_NS][it] = ticks() - t;
		t = ticks();
		niu_stats_time(ep, ns);
		sample[ROW_STATS_TIME][it] = ticks() - t;
	}
	niu_stats_time_on(ep, false);

	printf("niu-ping: node %u (%s): guest instructions per call, median of %u, %.3f ticks per instruction%s\n",
	       ep->node, pinger ? "pinging" : "echoing", iterations, per_insn,
	       niu_timed() ? "" : " (not timed mode: not exact)");
	printf("%-28s %6s %13s\n", "call", "words", "instructions");
	for (r = 0; r < ROWS; r++) {
		qsort(sample[r], iterations, sizeof(*sample[r]), compare_u64);
		insns[r] = (double)(sample[r][iterations / 2] - overhead) /
			   per_insn;
		printf("%-28s %6u %13.1f\n", count_row[r].call,
		       count_row[r].words, insns[r]);
		free(sample[r]);
	}
	printf("%-28s %6u %13.1f\n", "niu_send+niu_recv", 1,
	       insns[ROW_SEND_1] + insns[ROW_RECV_1]);
	printf("%-28s %6u %13.1f\n", "niu_send+niu_recv", 20,
	       insns[ROW_SEND_20] + insns[ROW_RECV_20]);
	printf("%-28s %6u %13.1f\n", "niu_am_request+niu_am_poll", 1,
	       insns[ROW_AM_REQUEST] + insns[ROW_AM_POLL]);
	printf("%-28s %6u %13.1f\n", "a TSC read (rdtsc)", 0,
	       (double)overhead / per_insn);
	return errors;
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
	bool count = false;

	while ((opt = getopt(argc, argv, "n:ls:e:x:cd:h")) != -1) {
		switch (opt) {
		case 'c':
			count = true;
			break;
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
	if (count && (pinger || echoer))
		errors = count_calls(&ep, prio, peer, pinger, iterations);
	else if (pinger)
		printf("%6s %12s %12s %12s %12s\n", "words", "median_us",
		       "p99_us", "min_us", "mean_us");

	for (s = 0; !count && s < sizeof(default_sizes) / sizeof(default_sizes[0]); s++) {
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
	if (count && (pinger || echoer))
		printf("niu-ping: node %u: %d message(s) wrong: %s\n",
		       ep.node, errors, errors ? "FAIL" : "PASS");
	else if (pinger)
		printf("niu-ping: %u replies checked, %d wrong: %s\n",
		       iterations *
		       (unsigned int)(sizeof(default_sizes) /
				      sizeof(default_sizes[0])),
		       errors, errors ? "FAIL" : "PASS");
	niu_close(&ep);
	free(rtt);
	return errors ? 1 : 0;
}
