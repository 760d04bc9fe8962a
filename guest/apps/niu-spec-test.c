/* SPDX-License-Identifier: MIT */
/*
 * Spec fidelity test: a program written only against seed 002 section 3.
 * TransmitHi/ReceiveHi (and their Lo twins) below are the seed's examples,
 * as docs/programming-guide.md section 16 transcribes them: slots, valid
 * bits and fences, no library, no doorbell, no register.  The driver is
 * used only as the seed's operating system is: open the device and mmap()
 * the queues (section 2.1.1), and learn this node's number.
 *
 * Every node sends ROUNDS messages at each priority to the next node of a
 * ring and receives as many from the previous one, checking source,
 * endpoint, type, command words, length and every payload word.  ROUNDS
 * exceeds N so every queue wraps.  Exit status 0 means all were right.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arctic/niu-hw.h"
#include "uapi/arctic_niu.h"

enum { ROUNDS = 600 };

static volatile struct arctic_mpi_slot *HiTx, *LoTx, *HiRx, *LoRx;
static uint32_t HiTxHd, LoTxHd, HiRxTl, LoRxTl;

/* Seed 002 section 3.2.1, for either queue. */
static void Transmit(volatile struct arctic_mpi_slot *Tx, uint32_t *TxHd,
		     uint32_t dest, uint32_t endpoint, uint32_t type,
		     uint32_t command0, uint32_t command1,
		     const uint32_t *payload, int length)
{
	volatile struct arctic_mpi_slot *slot = &Tx[*TxHd];
	uint32_t header;
	int i;

	while (slot->header & ARCTIC_MPI_VALID)			/* step 1 */
		;
	atomic_thread_fence(memory_order_acquire);

	slot->command[0] = command0;				/* step 2 */
	slot->command[1] = command1;
	for (i = 0; i < length; i++)
		slot->payload[i] = payload[i];

	header = ARCTIC_MPI_VALID |				/* step 3 */
		 ARCTIC_FIELD_PREP(MPI_HEADER, DEST, dest) |
		 ARCTIC_FIELD_PREP(MPI_HEADER, ENDPOINT, endpoint) |
		 ARCTIC_FIELD_PREP(MPI_HEADER, TYPE, type) |
		 ARCTIC_FIELD_PREP(MPI_HEADER, MODE, ARCTIC_MODE_MPI) |
		 ARCTIC_FIELD_PREP(MPI_HEADER, LENGTH, length);

	atomic_thread_fence(memory_order_release);		/* step 4 */

	slot->header = header;					/* step 5 */

	*TxHd = (*TxHd + 1) % ARCTIC_N;				/* step 6 */
}

/* Seed 002 section 3.2.2, for either queue. */
static void Receive(volatile struct arctic_mpi_slot *Rx, uint32_t *RxTl,
		    uint32_t *source, uint32_t *endpoint, uint32_t *type,
		    uint32_t *command0, uint32_t *command1,
		    uint32_t *payload, int *length)
{
	volatile struct arctic_mpi_slot *slot = &Rx[*RxTl];
	uint32_t header;
	int i;

	while (!((header = slot->header) & ARCTIC_MPI_VALID))	/* step 1 */
		;
	atomic_thread_fence(memory_order_acquire);		/* step 2 */

	*type = ARCTIC_FIELD_GET(MPI_HEADER, TYPE, header);	/* step 3 */
	*length = ARCTIC_FIELD_GET(MPI_HEADER, LENGTH, header);
	*source = ARCTIC_FIELD_GET(MPI_HEADER, DEST, header);	/* sender */
	*endpoint = ARCTIC_FIELD_GET(MPI_HEADER, ENDPOINT, header);

	*command0 = slot->command[0];				/* step 4 */
	*command1 = slot->command[1];
	for (i = 0; i < *length; i++)
		payload[i] = slot->payload[i];

	atomic_thread_fence(memory_order_release);
	slot->header = 0;					/* step 5 */

	*RxTl = (*RxTl + 1) % ARCTIC_N;				/* step 6 */
}

static uint32_t word(uint32_t node, int prio, int round, int i)
{
	return (node << 24) ^ ((uint32_t)prio << 20) ^ ((uint32_t)round << 5) ^
	       (uint32_t)i ^ 0xa5000000u;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/dev/arctic-niu0";
	struct arctic_niu_node_info node;
	struct arctic_niu_endpoint_info info;
	uint32_t me, n, next, prev, ep;
	int fd, round, prio, i, errors = 0;
	char *q;

	fd = open(path, O_RDWR);
	if (fd < 0 || ioctl(fd, ARCTIC_NIU_IOC_NODE_INFO, &node) < 0 ||
	    ioctl(fd, ARCTIC_NIU_IOC_ENDPOINT_INFO, &info) < 0) {
		perror(path);
		return 2;
	}
	q = mmap(NULL, ARCTIC_NIU_MMAP_QUEUES_SIZE, PROT_READ | PROT_WRITE,
		 MAP_SHARED, fd, ARCTIC_NIU_MMAP_QUEUES);
	if (q == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	/* Seed 002 section 2.1.1: the four queues are contiguous. */
	HiTx = (void *)(q + ARCTIC_MMAP_HI_TX);
	LoTx = (void *)(q + ARCTIC_MMAP_LO_TX);
	HiRx = (void *)(q + ARCTIC_MMAP_HI_RX);
	LoRx = (void *)(q + ARCTIC_MMAP_LO_RX);

	me = node.node_id;
	n = node.num_nodes;
	ep = info.endpoint;
	next = (me + 1) % n;
	prev = (me + n - 1) % n;
	printf("niu-spec-test: node %u of %u, endpoint %u: %d rounds to %u, from %u\n",
	       me, n, ep, ROUNDS, next, prev);

	for (round = 0; round < ROUNDS; round++) {
		for (prio = 0; prio < 2; prio++) {
			uint32_t payload[ARCTIC_MAX_PAYLOAD];
			int length = round % (ARCTIC_MAX_PAYLOAD + 1);

			for (i = 0; i < length; i++)
				payload[i] = word(me, prio, round, i);
			Transmit(prio ? LoTx : HiTx, prio ? &LoTxHd : &HiTxHd,
				 next, ep, (round + prio) % 120,
				 round, ~(uint32_t)round, payload, length);
		}
		for (prio = 0; prio < 2; prio++) {
			uint32_t payload[ARCTIC_MAX_PAYLOAD];
			uint32_t source, endpoint, type, c0, c1;
			int length, want = round % (ARCTIC_MAX_PAYLOAD + 1);
			int bad = 0;

			Receive(prio ? LoRx : HiRx, prio ? &LoRxTl : &HiRxTl,
				&source, &endpoint, &type, &c0, &c1, payload,
				&length);
			bad |= source != prev || endpoint != ep;
			bad |= type != (uint32_t)(round + prio) % 120;
			bad |= c0 != (uint32_t)round ||
			       c1 != ~(uint32_t)round;
			bad |= length != want;
			for (i = 0; !bad && i < length; i++)
				bad |= payload[i] != word(prev, prio, round, i);
			if (bad && errors++ < 10)
				printf("round %d %s: got source %u ep %u type %u cmd %#x %#x length %d\n",
				       round, prio ? "lo" : "hi", source,
				       endpoint, type, c0, c1, length);
		}
	}
	printf("niu-spec-test: %d messages sent and %d received per priority, %d wrong\n",
	       ROUNDS, ROUNDS, errors);
	printf("niu-spec-test: %s\n", errors ? "FAIL" : "PASS");
	return errors ? 1 : 0;
}
