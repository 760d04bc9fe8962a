/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of libniu that need no NIU: the library is compiled in and
 * its endpoint pointed at queues in ordinary memory, so the tests can play
 * the NIU's part (take Tx slots, fill Rx slots) and check what the library
 * writes and returns: slot encoding, queue wrap, the doorbell, argument
 * checks, and the order in which kept-aside messages come back.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "niu.c"

static uint32_t doorbell_word;
static int failures;

#define CHECK(cond) do { \
	if (!(cond)) { \
		printf("not ok: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
		failures++; \
	} \
} while (0)

static void fake_endpoint(struct niu_endpoint *ep, uint32_t node,
			  uint32_t nodes)
{
	int p;

	memset(ep, 0, sizeof(*ep));
	ep->fd = -1;
	ep->node = node;
	ep->num_nodes = nodes;
	ep->endpoint = 3;
	ep->queues = calloc(1, ARCTIC_NIU_MMAP_QUEUES_SIZE);
	assert(ep->queues);
	ep->doorbell = &doorbell_word;
	for (p = 0; p < NIU_NUM_PRIORITIES; p++) {
		ep->tx[p] = (void *)((char *)ep->queues +
				     queue_view_offset[0][p]);
		ep->rx[p] = (void *)((char *)ep->queues +
				     queue_view_offset[1][p]);
		ep->stash[p].msgs = calloc(NIU_STASH_SLOTS,
					   sizeof(struct niu_msg));
	}
}

/* Play RCVFSM: deliver a message into the next free Rx slot. */
static void deliver(struct niu_endpoint *ep, enum niu_priority prio,
		    uint32_t *head, uint32_t source, uint32_t type,
		    uint32_t c0, uint32_t c1, uint32_t length)
{
	volatile struct arctic_mpi_slot *slot = &ep->rx[prio][*head];
	uint32_t i;

	for (i = 0; i < length; i++)
		slot->payload[i] = c0 + i;
	slot->command[0] = c0;
	slot->command[1] = c1;
	slot->header = ARCTIC_MPI_VALID |
		       ARCTIC_FIELD_PREP(MPI_HEADER, DEST, source) |
		       ARCTIC_FIELD_PREP(MPI_HEADER, ENDPOINT, ep->endpoint) |
		       ARCTIC_FIELD_PREP(MPI_HEADER, TYPE, type) |
		       ARCTIC_FIELD_PREP(MPI_HEADER, LENGTH, length);
	*head = (*head + 1) % ARCTIC_N;
}

static void test_send_encoding(void)
{
	struct niu_endpoint ep;
	uint32_t payload[NIU_MAX_PAYLOAD], i, header;

	fake_endpoint(&ep, 1, 4);
	for (i = 0; i < NIU_MAX_PAYLOAD; i++)
		payload[i] = 0x1000 + i;
	CHECK(niu_send(&ep, NIU_LO, 2, 5, 17, 0xc0, 0xc1, payload, 20) == 0);
	header = ep.tx[NIU_LO][0].header;
	CHECK(header & ARCTIC_MPI_VALID);
	CHECK(ARCTIC_FIELD_GET(MPI_HEADER, DEST, header) == 2);
	CHECK(ARCTIC_FIELD_GET(MPI_HEADER, ENDPOINT, header) == 5);
	CHECK(ARCTIC_FIELD_GET(MPI_HEADER, TYPE, header) == 17);
	CHECK(ARCTIC_FIELD_GET(MPI_HEADER, MODE, header) == ARCTIC_MODE_MPI);
	CHECK(ARCTIC_FIELD_GET(MPI_HEADER, LENGTH, header) == 20);
	CHECK(ep.tx[NIU_LO][0].command[0] == 0xc0);
	CHECK(ep.tx[NIU_LO][0].command[1] == 0xc1);
	CHECK(ep.tx[NIU_LO][0].payload[19] == 0x1000 + 19);
	CHECK(ep.tx[NIU_HI][0].header == 0);
	CHECK(ep.tx_head[NIU_LO] == 1);
	CHECK(doorbell_word == R_USER_DOORBELL_LO_TX_MASK);

	/* Bad arguments are refused and leave the queue alone. */
	CHECK(niu_send(&ep, NIU_HI, 256, 0, 1, 0, 0, NULL, 0) == -EINVAL);
	CHECK(niu_send(&ep, NIU_HI, 0, 8, 1, 0, 0, NULL, 0) == -EINVAL);
	CHECK(niu_send(&ep, NIU_HI, 0, 0, NIU_TYPE_BARRIER, 0, 0, NULL, 0) ==
	      -EINVAL);
	CHECK(niu_send(&ep, NIU_HI, 0, 0, 1, 0, 0, payload, 21) == -EINVAL);
	CHECK(niu_send(&ep, NIU_HI, 0, 0, 1, 0, 0, NULL, 1) == -EINVAL);
	CHECK(ep.tx_head[NIU_HI] == 0);

	/* The head wraps after N slots, once the NIU has taken them. */
	for (i = 0; i < ARCTIC_N; i++) {
		ep.tx[NIU_HI][ep.tx_head[NIU_HI]].header = 0;
		CHECK(niu_send(&ep, NIU_HI, 0, 0, 1, i, 0, NULL, 0) == 0);
	}
	CHECK(ep.tx_head[NIU_HI] == 0);
	CHECK(ep.tx[NIU_HI][ARCTIC_N - 1].command[0] == ARCTIC_N - 1);
}

static void test_receive_and_stash(void)
{
	struct niu_endpoint ep;
	struct niu_msg msg;
	uint32_t head = 0, i;

	fake_endpoint(&ep, 0, 2);
	CHECK(niu_try_recv(&ep, NIU_HI, &msg) == 0);

	/* A barrier message ahead of user ones is kept, users come out. */
	deliver(&ep, NIU_HI, &head, 1, NIU_TYPE_BARRIER, 1, 0, 0);
	deliver(&ep, NIU_HI, &head, 1, 7, 100, ~100u, 3);
	deliver(&ep, NIU_HI, &head, 1, 8, 200, ~200u, 20);
	CHECK(niu_try_recv(&ep, NIU_HI, &msg) == 1);
	CHECK(msg.type == 7 && msg.source == 1 && msg.length == 3);
	CHECK(msg.command[0] == 100 && msg.command[1] == ~100u);
	CHECK(msg.payload[2] == 102);
	CHECK(msg.endpoint == 3);
	CHECK(ep.rx[NIU_HI][0].header == 0 && ep.rx[NIU_HI][1].header == 0);
	CHECK(ep.stash[NIU_HI].count == 1);
	CHECK(niu_try_recv(&ep, NIU_HI, &msg) == 1 && msg.type == 8);
	CHECK(msg.payload[19] == 219);

	/* The barrier finds the kept message without a new one. */
	ep.barrier_epoch = 0;
	struct barrier_wait want = { .source = 1, .epoch = 1, .round = 0 };
	CHECK(barrier_wait(&ep, &want) == 0);
	CHECK(ep.stash[NIU_HI].count == 0);

	/* User messages that arrive during a barrier keep their order. */
	deliver(&ep, NIU_HI, &head, 1, 9, 300, ~300u, 0);
	deliver(&ep, NIU_HI, &head, 1, 10, 400, ~400u, 0);
	deliver(&ep, NIU_HI, &head, 1, NIU_TYPE_BARRIER, 2, 0, 0);
	want.epoch = 2;
	CHECK(barrier_wait(&ep, &want) == 0);
	CHECK(ep.stash[NIU_HI].count == 2);
	deliver(&ep, NIU_HI, &head, 1, 11, 500, ~500u, 0);
	CHECK(niu_try_recv(&ep, NIU_HI, &msg) == 1 && msg.command[0] == 300);
	CHECK(niu_try_recv(&ep, NIU_HI, &msg) == 1 && msg.command[0] == 400);
	CHECK(niu_try_recv(&ep, NIU_HI, &msg) == 1 && msg.command[0] == 500);
	CHECK(niu_try_recv(&ep, NIU_HI, &msg) == 0);

	/* The tail wraps with the NIU's head. */
	head = 0;
	for (i = 0; i < ARCTIC_N + 1; i++) {
		deliver(&ep, NIU_LO, &head, 0, 1, i, ~i, 1);
		CHECK(niu_try_recv(&ep, NIU_LO, &msg) == 1);
		CHECK(msg.command[0] == i && msg.payload[0] == i);
	}
	CHECK(ep.rx_tail[NIU_LO] == 1 && head == 1);
}

static void test_barrier_single_node(void)
{
	struct niu_endpoint ep;

	fake_endpoint(&ep, 0, 1);
	CHECK(niu_barrier(&ep) == 0);
	CHECK(ep.tx[NIU_HI][0].header == 0);	/* nothing sent */
}

int main(void)
{
	test_send_encoding();
	test_receive_and_stash();
	test_barrier_single_node();
	printf("%s\n", failures ? "FAIL" : "PASS: libniu unit tests");
	return failures ? 1 : 0;
}
