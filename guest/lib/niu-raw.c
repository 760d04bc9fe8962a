/* SPDX-License-Identifier: MIT */
/*
 * libniu's dMPI raw mode (seed 002 sections 2.3, 3.4, 4.1.2, 6.1): the
 * driver's ARCTIC_NIU_IOC_RAW_MODE turns the NIU's datapaths OFF, and
 * packets then go through the FIFO access points of endpoint 0's user
 * page, word by word, in the skewed Arctic format of the seed's Figure 2.
 * Sending builds words 0 and 1 from the route table, as the seed's
 * TransmitHiDirect() does from UpRoute[] and DownRoute[]; receiving pops
 * the route words, the body and the CRC trailer as its ReceiveHi() does.
 * Every offset, bit and field comes from include/arctic/; niu.h documents
 * the interface.
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "arctic/packet.h"
#include "arctic/route.h"
#include "niu.h"
#include "uapi/arctic_niu.h"

enum {
	/* Status reads on a busy FIFO between two yields of the CPU. */
	RAW_SPINS_BEFORE_YIELD = 64,
	/* How long niu_raw_enter() waits for queued messages to go. */
	RAW_TX_DRAIN_TIMEOUT_MS = 10000,
	RAW_NS_PER_MS = 1000000,
};

/* The access points and status bits of each priority, by niu_priority. */
static const struct {
	unsigned int route_table;	/* RouteTable row */
	uint32_t wire_priority;		/* word 0's PRIORITY */
	uint32_t tx_fifo, tx_fifo_last, rx_fifo;	/* user page offsets */
	uint32_t tx_full, rx_empty;	/* USER_TX/RX_STATUS masks */
} raw_fifo[NIU_NUM_PRIORITIES] = {
	[NIU_HI] = {
		ARCTIC_ROUTE_TABLE_HIGH, ARCTIC_PRIORITY_HIGH,
		A_USER_HI_TX_FIFO, A_USER_HI_TX_FIFO_LAST, A_USER_HI_RX_FIFO,
		R_USER_TX_STATUS_HI_FULL_MASK, R_USER_RX_STATUS_HI_EMPTY_MASK,
	},
	[NIU_LO] = {
		ARCTIC_ROUTE_TABLE_LOW, ARCTIC_PRIORITY_LOW,
		A_USER_LO_TX_FIFO, A_USER_LO_TX_FIFO_LAST, A_USER_LO_RX_FIFO,
		R_USER_TX_STATUS_LO_FULL_MASK, R_USER_RX_STATUS_LO_EMPTY_MASK,
	},
};

/* The page is mapped uncached: each access is one 4-byte bus cycle. */
static uint32_t reg_read(const struct niu_raw *raw, uint32_t offset)
{
	return raw->page[offset / sizeof(uint32_t)];
}

static void reg_write(struct niu_raw *raw, uint32_t offset, uint32_t value)
{
	raw->page[offset / sizeof(uint32_t)] = value;
}

static bool raw_usable(const struct niu_raw *raw, enum niu_priority prio)
{
	return raw->ep && (unsigned int)prio < NIU_NUM_PRIORITIES;
}

/* A status poll that found nothing: now and then give the CPU away. */
static void raw_idle(unsigned int *spins)
{
	if (++*spins % RAW_SPINS_BEFORE_YIELD == 0)
		sched_yield();
}

static bool slot_valid(volatile const uint32_t *header)
{
	return *header & ARCTIC_MPI_VALID;
}

/*
 * Whether the NIU still has to take a message @ep queued: it takes slots
 * in order, so the last one filled of each Tx queue tells.
 */
static bool tx_queued(const struct niu_endpoint *ep)
{
	uint32_t last;
	int p;

	for (p = 0; p < NIU_NUM_PRIORITIES; p++) {
		last = (ep->tx_head[p] + ARCTIC_N - 1) % ARCTIC_N;
		if (slot_valid(&ep->tx[p][last].header))
			return true;
	}
	last = (ep->dma_tx_head + ARCTIC_N - 1) % ARCTIC_N;
	return slot_valid(&ep->dma_tx[last].header);
}

static int wait_tx_taken(const struct niu_endpoint *ep)
{
	uint64_t deadline = niu_now_ns() +
			    (uint64_t)RAW_TX_DRAIN_TIMEOUT_MS * RAW_NS_PER_MS;
	unsigned int spins = 0;

	while (tx_queued(ep)) {
		if (niu_now_ns() > deadline)
			return -ETIMEDOUT;
		raw_idle(&spins);
	}
	return 0;
}

/* The seed's UpRoute[] and DownRoute[]: entries for every node, read once. */
static int read_routes(struct niu_raw *raw, const struct niu_endpoint *ep)
{
	struct arctic_niu_route route;
	uint32_t node;
	int p;

	for (p = 0; p < NIU_NUM_PRIORITIES; p++) {
		for (node = 0; node < ep->num_nodes && node < ARCTIC_S;
		     node++) {
			memset(&route, 0, sizeof(route));
			route.table = raw_fifo[p].route_table;
			route.node = node;
			if (ioctl(ep->fd, ARCTIC_NIU_IOC_GET_ROUTE, &route) < 0)
				return -errno;
			raw->route[p][node] = route.entry;
		}
	}
	return 0;
}

int niu_raw_enter(struct niu_raw *raw, struct niu_endpoint *ep)
{
	struct arctic_niu_raw_mode mode = { .mode = ARCTIC_NIU_MODE_RAW };
	struct arctic_niu_endpoint_info info;
	void *page;
	int err;

	memset(raw, 0, sizeof(*raw));
	err = wait_tx_taken(ep);
	if (err)
		return err;
	err = read_routes(raw, ep);
	if (err)
		return err;
	if (ioctl(ep->fd, ARCTIC_NIU_IOC_ENDPOINT_INFO, &info) < 0)
		return -errno;
	/*
	 * niu_open() maps the page write-only, for the doorbell; the receive
	 * FIFOs and the status registers are read, so map it again readable.
	 */
	page = mmap(NULL, info.user_page_size, PROT_READ | PROT_WRITE,
		    MAP_SHARED, ep->fd, (off_t)info.user_page_offset);
	if (page == MAP_FAILED)
		return -errno;
	if (ioctl(ep->fd, ARCTIC_NIU_IOC_RAW_MODE, &mode) < 0) {
		err = -errno;
		munmap(page, info.user_page_size);
		return err;
	}
	raw->ep = ep;
	raw->page = page;
	raw->page_size = (uint32_t)info.user_page_size;
	return 0;
}

int niu_raw_leave(struct niu_raw *raw)
{
	struct arctic_niu_raw_mode mode = { .mode = ARCTIC_NIU_MODE_MPI };
	int ret;

	if (!raw->ep)
		return -EINVAL;
	/* The driver is back in MPI mode whatever it answers. */
	ret = ioctl(raw->ep->fd, ARCTIC_NIU_IOC_RAW_MODE, &mode) < 0 ?
	      -errno : (int)mode.discarded;
	munmap((void *)raw->page, raw->page_size);
	memset(raw, 0, sizeof(*raw));
	return ret;
}

/* Push one whole packet, waiting first until the FIFO has room. */
static void push_packet(struct niu_raw *raw, enum niu_priority prio,
			const uint32_t *words, unsigned int count)
{
	unsigned int i, spins = 0;

	while (reg_read(raw, A_USER_TX_STATUS) & raw_fifo[prio].tx_full)
		raw_idle(&spins);
	for (i = 0; i + 1 < count; i++)
		reg_write(raw, raw_fifo[prio].tx_fifo, words[i]);
	reg_write(raw, raw_fifo[prio].tx_fifo_last, words[i]);
}

int niu_raw_send_words(struct niu_raw *raw, enum niu_priority prio,
		       const uint32_t *words, unsigned int count)
{
	if (!raw_usable(raw, prio) || !words ||
	    count < ARCTIC_MIN_PACKET_WORDS || count > ARCTIC_MAX_PACKET_WORDS ||
	    ARCTIC_FIELD_GET(ARCTIC_W1, LENGTH, words[1]) != count ||
	    ARCTIC_FIELD_GET(ARCTIC_W0, ZERO, words[0]) != 0 ||
	    ARCTIC_FIELD_GET(ARCTIC_W0, PRIORITY, words[0]) !=
	    raw_fifo[prio].wire_priority)
		return -EINVAL;
	push_packet(raw, prio, words, count);
	return 0;
}

int niu_raw_send(struct niu_raw *raw, enum niu_priority prio, uint32_t dest,
		 uint32_t dest_endpoint, uint32_t type, uint32_t command0,
		 uint32_t command1, const uint32_t *payload,
		 unsigned int length)
{
	uint32_t words[ARCTIC_MAX_PACKET_WORDS], route;
	unsigned int i;

	if (!raw_usable(raw, prio) || dest >= ARCTIC_S ||
	    dest_endpoint >= ARCTIC_ENDPOINTS || type > NIU_MAX_TYPE ||
	    length > NIU_MAX_PAYLOAD || (length && !payload))
		return -EINVAL;
	route = raw->route[prio][dest];
	if (!ARCTIC_FIELD_GET(ROUTE_ENTRY, VALID, route) ||
	    ARCTIC_FIELD_GET(ROUTE_ENTRY, PRIORITY, route) !=
	    raw_fifo[prio].wire_priority)
		return -EHOSTUNREACH;

	/* Figure 2: 16 zero bits, then the entry's low half ... */
	words[0] = ARCTIC_FIELD_PREP(ARCTIC_W0, UPROUTE,
			ARCTIC_FIELD_GET(ROUTE_ENTRY, UPROUTE, route)) |
		   ARCTIC_FIELD_PREP(ARCTIC_W0, VALID,
			ARCTIC_FIELD_GET(ROUTE_ENTRY, VALID, route)) |
		   ARCTIC_FIELD_PREP(ARCTIC_W0, PRIORITY,
			ARCTIC_FIELD_GET(ROUTE_ENTRY, PRIORITY, route));
	/* ... its high half, and the low half of an MPI header whose
	 * length counts every word of the packet. */
	words[1] = ARCTIC_FIELD_PREP(ARCTIC_W1, DOWNROUTE,
			ARCTIC_FIELD_GET(ROUTE_ENTRY, DOWNROUTE, route)) |
		   ARCTIC_FIELD_PREP(ARCTIC_W1, ENDPOINT, dest_endpoint) |
		   ARCTIC_FIELD_PREP(ARCTIC_W1, TYPE, type) |
		   ARCTIC_FIELD_PREP(ARCTIC_W1, MODE, ARCTIC_MODE_MPI) |
		   ARCTIC_FIELD_PREP(ARCTIC_W1, LENGTH,
				     length + ARCTIC_MPI_LENGTH_EXTRA);
	words[ARCTIC_ROUTE_WORDS] = command0;
	words[ARCTIC_ROUTE_WORDS + 1] = command1;
	for (i = 0; i < length; i++)
		words[ARCTIC_MPI_LENGTH_EXTRA + i] = payload[i];
	push_packet(raw, prio, words, length + ARCTIC_MPI_LENGTH_EXTRA);
	return 0;
}

/* Word 1 and the body as the seed's ReceiveHi() reads them. */
static void decode_packet(struct niu_raw_packet *pkt)
{
	uint32_t w1 = pkt->word[1];
	unsigned int i;

	pkt->mode = ARCTIC_FIELD_GET(ARCTIC_W1, MODE, w1);
	pkt->endpoint = ARCTIC_FIELD_GET(ARCTIC_W1, ENDPOINT, w1);
	pkt->type = ARCTIC_FIELD_GET(ARCTIC_W1, TYPE, w1);
	for (i = 0; i < ARCTIC_COMMAND_WORDS; i++)
		pkt->command[i] = ARCTIC_ROUTE_WORDS + i < pkt->words ?
				  pkt->word[ARCTIC_ROUTE_WORDS + i] : 0;
	pkt->length = pkt->words > ARCTIC_MPI_LENGTH_EXTRA ?
		      pkt->words - ARCTIC_MPI_LENGTH_EXTRA : 0;
	for (i = 0; i < pkt->length; i++)
		pkt->payload[i] = pkt->word[ARCTIC_MPI_LENGTH_EXTRA + i];
}

int niu_raw_try_recv(struct niu_raw *raw, enum niu_priority prio,
		     struct niu_raw_packet *pkt)
{
	uint32_t fifo;
	unsigned int i;

	if (!raw_usable(raw, prio) || !pkt)
		return -EINVAL;
	if (reg_read(raw, A_USER_RX_STATUS) & raw_fifo[prio].rx_empty)
		return 0;
	fifo = raw_fifo[prio].rx_fifo;
	memset(pkt, 0, sizeof(*pkt));
	pkt->word[0] = reg_read(raw, fifo);
	pkt->word[1] = reg_read(raw, fifo);
	pkt->words = ARCTIC_FIELD_GET(ARCTIC_W1, LENGTH, pkt->word[1]);
	if (pkt->words < ARCTIC_MIN_PACKET_WORDS)
		return -EPROTO;
	for (i = ARCTIC_ROUTE_WORDS; i < pkt->words; i++)
		pkt->word[i] = reg_read(raw, fifo);
	/* Reading the trailer removes the packet from the FIFO. */
	pkt->crc = reg_read(raw, fifo);
	decode_packet(pkt);
	return 1;
}

int niu_raw_recv(struct niu_raw *raw, enum niu_priority prio,
		 struct niu_raw_packet *pkt, int timeout_ms)
{
	uint64_t deadline = niu_now_ns() +
			    (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) *
			    RAW_NS_PER_MS;
	unsigned int spins = 0;
	int ret;

	while ((ret = niu_raw_try_recv(raw, prio, pkt)) == 0) {
		if (timeout_ms >= 0 && niu_now_ns() > deadline)
			return -ETIMEDOUT;
		raw_idle(&spins);
	}
	return ret < 0 ? ret : 0;
}
