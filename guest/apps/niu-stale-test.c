/* SPDX-License-Identifier: MIT */
/*
 * niu-stale-test: a long one-way message stream whose receiver is the
 * receive loop of seed 002 section 3.2.2 exactly as the seed writes it
 * (wait for the valid bit, read the body, clear the header, move on): no
 * LAP check, no compare-and-swap, nothing libniu adds.  It is the
 * reproducer of the stale-receive-header fault (docs/guest.md, "Known
 * problems"): a receive slot that shows, one lap later, the message it
 * held a lap before.
 *
 * Node 0 streams MESSAGES messages to node 1 through libniu (doorbell
 * path, as niu-bw does), in trains that node 1 acknowledges at high
 * priority as niu-bw's sizes are; message m carries command0 = m,
 * command1 = ~m, and 1 + m % 20 payload words of a pattern of m.  Node 1
 * checks every message it takes; while it waits it yields the CPU as
 * libniu does, and it can pause now and then so that its queue fills and
 * the NIUs' refusals and retransmissions are exercised.  The first wrong one is described in full: the slot
 * and lap the receive loop was at, the header and body it read, and, when
 * command0 names an earlier message, how many laps old that message is.
 * A receiver that sees no message for WAIT seconds says which message,
 * slot and header it waits at, and exits 3: a lost message, not a stale
 * one.  The last line of each node is "niu-stale-test: node N: ... PASS"
 * or "... FAIL"; the exit status is 0 only for PASS.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "niu.h"
#include "uapi/arctic_niu.h"

enum {
	TYPE_DATA = 1,
	TYPE_DONE = 2,		/* node 1 -> 0: command0 = wrong or lost */
	TYPE_TRAIN = 3,		/* node 1 -> 0: a train was received */
};

static uint32_t pattern(uint32_t message, unsigned int i)
{
	return (message * 2654435761u) ^ (i << 26) ^ 0x5a17e000u;
}

static unsigned int length_of(uint32_t message)
{
	return 1 + message % NIU_MAX_PAYLOAD;
}

static uint64_t now_s(void)
{
	return niu_now_ns() / 1000000000u;
}

/* Empty polls between two sched_yield() calls, as libniu's idle(). */
static unsigned int yield_every = 256;
/* The receiver stops taking messages for pause_us every pause_every
 * messages, so its queue fills and the NIU refuses and retries. */
static unsigned int pause_us, pause_every = 300;

/* What the NIU's end-to-end protocol did meanwhile. */
static void print_counters(struct niu_endpoint *ep)
{
	static const enum arctic_counter shown[] = {
		ARCTIC_CNT_RETRANSMITS, ARCTIC_CNT_TIMEOUTS,
		ARCTIC_CNT_NACKS_SENT, ARCTIC_CNT_NACKS_RECEIVED,
		ARCTIC_CNT_DUPLICATES,
	};
	struct arctic_niu_counters counters = { 0 };
	unsigned int i;

	if (ioctl(ep->fd, ARCTIC_NIU_IOC_COUNTERS, &counters) < 0)
		return;
	printf("niu-stale-test: node %u:", ep->node);
	for (i = 0; i < sizeof(shown) / sizeof(shown[0]); i++)
		printf(" %s=%u", arctic_counter_name(shown[i]),
		       counters.counter[shown[i]]);
	printf("\n");
}

/*
 * Seed 002 section 3.2.2, ReceiveHi/ReceiveLo, with the seed's variable
 * names, waiting at most @wait_s seconds for the valid bit.  Returns the
 * header read, or 0 when nothing came.
 */
static uint32_t Receive(volatile struct arctic_mpi_slot *Rx, uint32_t *RxTl,
			uint32_t *command0, uint32_t *command1,
			uint32_t *payload, uint64_t wait_s)
{
	volatile struct arctic_mpi_slot *slot = &Rx[*RxTl];
	uint64_t deadline = now_s() + wait_s;
	unsigned int spins = 0, i, length;
	uint32_t header;

	while (!((header = slot->header) & ARCTIC_MPI_VALID)) {	/* step 1 */
		if (++spins % 4096 == 0 && now_s() > deadline)
			return 0;
		if (yield_every && spins % yield_every == 0)
			sched_yield();
	}
	atomic_thread_fence(memory_order_acquire);		/* step 2 */

	length = ARCTIC_FIELD_GET(MPI_HEADER, LENGTH, header);	/* step 3 */
	if (length > NIU_MAX_PAYLOAD)
		length = NIU_MAX_PAYLOAD;
	*command0 = slot->command[0];				/* step 4 */
	*command1 = slot->command[1];
	for (i = 0; i < length; i++)
		payload[i] = slot->payload[i];

	atomic_thread_fence(memory_order_release);
	slot->header = 0;					/* step 5 */

	*RxTl = (*RxTl + 1) % ARCTIC_N;				/* step 6 */
	return header;
}

/* Is this message m as node 0 sent it? */
static bool message_right(uint32_t m, uint32_t header, uint32_t command0,
			  uint32_t command1, const uint32_t *payload)
{
	unsigned int i, length = ARCTIC_FIELD_GET(MPI_HEADER, LENGTH, header);

	if (ARCTIC_FIELD_GET(MPI_HEADER, TYPE, header) != TYPE_DATA ||
	    ARCTIC_FIELD_GET(MPI_HEADER, DEST, header) != 0 ||
	    length != length_of(m) || command0 != m || command1 != ~m)
		return false;
	for (i = 0; i < length; i++)
		if (payload[i] != pattern(m, i))
			return false;
	return true;
}

static void describe(uint32_t m, unsigned int slot, uint32_t header,
		     uint32_t command0, uint32_t command1,
		     const uint32_t *payload)
{
	printf("niu-stale-test: message %u wrong at slot %u lap %u: header "
	       "%#010x command %#x %#x payload[0] %#x (want command %#x, "
	       "payload[0] %#x)\n", m, slot, m / ARCTIC_N, header, command0,
	       command1, payload[0], m, pattern(m, 0));
	if (command1 == ~command0 && command0 < m &&
	    (m - command0) % ARCTIC_N == 0 &&
	    message_right(command0, header, command0, command1, payload))
		printf("niu-stale-test: it is message %u whole, %u lap(s) "
		       "old: a stale header\n", command0,
		       (m - command0) / ARCTIC_N);
}

static int receiver(struct niu_endpoint *ep, enum niu_priority prio,
		    uint32_t messages, uint32_t train, unsigned int wait_s)
{
	volatile struct arctic_mpi_slot *Rx = ep->rx[prio];
	uint32_t RxTl = 0, m, header, command0, command1;
	uint32_t payload[NIU_MAX_PAYLOAD], wrong = 0;

	for (m = 0; m < messages; m++) {
		unsigned int slot = RxTl;

		header = Receive(Rx, &RxTl, &command0, &command1, payload,
				 wait_s);
		if (!header) {
			printf("niu-stale-test: node %u: no message %u for "
			       "%u s at slot %u (header there %#010x); %u "
			       "wrong before: FAIL\n", ep->node, m, wait_s,
			       slot, Rx[slot].header, wrong);
			niu_send(ep, NIU_HI, 0, ep->endpoint, TYPE_DONE,
				 wrong + 1, 0, NULL, 0);
			return 3;
		}
		if (!message_right(m, header, command0, command1, payload) &&
		    !wrong++)
			describe(m, slot, header, command0, command1, payload);
		if (pause_us && (m + 1) % pause_every == 0)
			usleep(pause_us);
		if ((m + 1) % train == 0 && m + 1 < messages)
			niu_send(ep, NIU_HI, 0, ep->endpoint, TYPE_TRAIN, m, 0,
				 NULL, 0);
	}
	niu_send(ep, NIU_HI, 0, ep->endpoint, TYPE_DONE, wrong, 0, NULL, 0);
	printf("niu-stale-test: node %u: %u messages, %u wrong: %s\n",
	       ep->node, messages, wrong, wrong ? "FAIL" : "PASS");
	return wrong ? 1 : 0;
}

static int sender(struct niu_endpoint *ep, enum niu_priority prio,
		  uint32_t messages, uint32_t train)
{
	uint32_t payload[NIU_MAX_PAYLOAD], m;
	uint64_t start = niu_now_ns();
	struct niu_msg done;
	unsigned int i;

	for (m = 0; m < messages; m++) {
		for (i = 0; i < length_of(m); i++)
			payload[i] = pattern(m, i);
		niu_send(ep, prio, 1, ep->endpoint, TYPE_DATA, m, ~m, payload,
			 length_of(m));
		if ((m + 1) % train == 0 && m + 1 < messages) {
			niu_recv(ep, NIU_HI, &done);
			if (done.type != TYPE_TRAIN) {
				printf("niu-stale-test: node 0: node 1 gave "
				       "up at message %u: FAIL\n", m);
				return 1;
			}
		}
	}
	niu_recv(ep, NIU_HI, &done);
	printf("niu-stale-test: node 0: %u messages in %.2f s; node 1 found "
	       "%u wrong: %s\n", messages, (niu_now_ns() - start) / 1e9,
	       done.command[0], done.command[0] ? "FAIL" : "PASS");
	return done.type != TYPE_DONE || done.command[0] != 0;
}

static void usage(FILE *to)
{
	fprintf(to, "Usage: niu-stale-test [-n MESSAGES] [-t TRAIN] [-y SPINS] "
		"[-p USEC] [-H] [-w WAIT] [-d DEVICE]\n"
		"Node 0 streams MESSAGES (default 20000) messages to node 1, "
		"at low priority\n(-H: high), in trains of TRAIN (default "
		"2000) that node 1 acknowledges;\nnode 1 takes them with seed "
		"002's receive loop and checks each, calling\nsched_yield() "
		"every SPINS empty polls (default 256, 0: never) and pausing "
		"USEC\nmicroseconds every 300 messages (default 0), so that its "
		"queue fills and\nthe NIUs refuse and retry.  A receiver "
		"that waits WAIT seconds (default 60)\nfor one message gives "
		"up.  Each node ends with its NIU's protocol counters.\n");
}

int main(int argc, char **argv)
{
	uint32_t messages = 20000, train = 2000;
	unsigned int wait_s = 60;
	enum niu_priority prio = NIU_LO;
	const char *device = NULL;
	struct niu_endpoint ep;
	int opt, ret;

	while ((opt = getopt(argc, argv, "n:t:y:p:Hw:d:h")) != -1) {
		switch (opt) {
		case 'p':
			pause_us = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 't':
			train = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'y':
			yield_every = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'n':
			messages = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'H':
			prio = NIU_HI;
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
	if (!train || !messages) {
		usage(stderr);
		return 2;
	}
	ret = niu_open(&ep, device);
	if (ret) {
		fprintf(stderr, "niu-stale-test: open: %s\n", strerror(-ret));
		return 2;
	}
	if (ep.num_nodes < 2) {
		fprintf(stderr, "niu-stale-test: needs 2 nodes\n");
		return 2;
	}
	if (ep.node == 0)
		ret = sender(&ep, prio, messages, train);
	else if (ep.node == 1)
		ret = receiver(&ep, prio, messages, train, wait_s);
	else
		ret = 0;
	print_counters(&ep);
	niu_close(&ep);
	return ret;
}
