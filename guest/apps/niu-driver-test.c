/* SPDX-License-Identifier: MIT */
/*
 * Checks that the arctic_niu driver answers bad requests from user space
 * with the right error codes and good ones with the right values: unknown
 * ioctls, reserved fields, out-of-range routes, private or misplaced
 * mappings, running out of endpoints, the route override and its restore,
 * the counters, messages kept for the next program (unread, and given
 * back by a library that read ahead), and the remote-DMA window (its ioctl, its mapping, and a
 * DMA request from the window to itself).  Run as root on one node (route override needs
 * CAP_NET_ADMIN).  Prints one line per check; exit status 0 when all pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * Endpoints open() hands out: all but the last, which the driver keeps
 * for the niu0 network interface (its ipnet parameter, on by default).
 */
#define USER_ENDPOINTS (ARCTIC_ENDPOINTS - 1)

#include "arctic/niu-hw.h"
#include "arctic/route.h"
#include "uapi/arctic_niu.h"

static const char *device = "/dev/arctic-niu0";
/* The PCI device of /dev/arctic-niu0, whose attributes the driver adds. */
#define TX_POLLED_SYSFS "/sys/class/misc/arctic-niu0/device/tx_polled"
static int failures;

static void check(int ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok" : "FAIL", what);
	failures += !ok;
}

/* ioctl() result as 0 or -errno. */
static int do_ioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
}

static int do_mmap(int fd, size_t size, int flags, off_t offset)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, flags, fd, offset);

	if (p == MAP_FAILED)
		return -errno;
	munmap(p, size);
	return 0;
}

static void check_ioctls(int fd)
{
	struct arctic_niu_node_info node;
	struct arctic_niu_endpoint_info info;
	struct arctic_niu_counters counters;
	struct arctic_niu_route route;
	uint32_t expected;

	check(do_ioctl(fd, _IO(ARCTIC_NIU_IOC_MAGIC, 0x7f), NULL) == -ENOTTY,
	      "unknown ioctl: ENOTTY");
	check(do_ioctl(fd, ARCTIC_NIU_IOC_NODE_INFO, NULL) == -EFAULT,
	      "node info to NULL: EFAULT");
	check(do_ioctl(fd, ARCTIC_NIU_IOC_NODE_INFO, &node) == 0 &&
	      node.endpoints == USER_ENDPOINTS && node.num_nodes >= 1 &&
	      node.node_id < node.num_nodes &&
	      (node.link_status & R_NIU_LINK_STATUS_UP_MASK) &&
	      node.reserved[0] == 0, "node info");
	check(do_ioctl(fd, ARCTIC_NIU_IOC_ENDPOINT_INFO, &info) == 0 &&
	      info.endpoint == 0 && info.slots == ARCTIC_N &&
	      info.slot_size == ARCTIC_SLOT_SIZE &&
	      info.queues_size == 4 * ARCTIC_QUEUE_SIZE &&
	      info.dma_tx_offset == ARCTIC_MMAP_DMA_TX,
	      "endpoint info: endpoint 0, seed layout");
	check(do_ioctl(fd, ARCTIC_NIU_IOC_COUNTERS, &counters) == 0 &&
	      counters.num_counters == ARCTIC_NUM_COUNTERS &&
	      counters.error_cause == 0, "counters, no error cause");

	memset(&route, 0, sizeof(route));
	route.reserved = 1;
	check(do_ioctl(fd, ARCTIC_NIU_IOC_GET_ROUTE, &route) == -EINVAL,
	      "route with reserved bits: EINVAL");
	memset(&route, 0, sizeof(route));
	route.table = 2;
	check(do_ioctl(fd, ARCTIC_NIU_IOC_SET_ROUTE, &route) == -EINVAL,
	      "route table 2: EINVAL");
	memset(&route, 0, sizeof(route));
	route.node = ARCTIC_S;
	check(do_ioctl(fd, ARCTIC_NIU_IOC_GET_ROUTE, &route) == -EINVAL,
	      "route to node 256: EINVAL");
	memset(&route, 0, sizeof(route));
	route.flags = 2;
	check(do_ioctl(fd, ARCTIC_NIU_IOC_SET_ROUTE, &route) == -EINVAL,
	      "route with unknown flag: EINVAL");

	/* The loaded table is the one route.h computes. */
	expected = arctic_route_entry(node.node_id, 0, true, false);
	memset(&route, 0, sizeof(route));
	check(do_ioctl(fd, ARCTIC_NIU_IOC_GET_ROUTE, &route) == 0 &&
	      route.entry == expected, "route to node 0 as route.h computes");
	route.entry = expected | ARCTIC_FIELD_PREP(UPROUTE, RANDOM, 1);
	check(do_ioctl(fd, ARCTIC_NIU_IOC_SET_ROUTE, &route) == 0,
	      "route override accepted");
	route.entry = 0;
	check(do_ioctl(fd, ARCTIC_NIU_IOC_GET_ROUTE, &route) == 0 &&
	      route.entry == (expected |
			      ARCTIC_FIELD_PREP(UPROUTE, RANDOM, 1)),
	      "route override reads back");
	route.flags = ARCTIC_NIU_ROUTE_DEFAULT;
	check(do_ioctl(fd, ARCTIC_NIU_IOC_SET_ROUTE, &route) == 0,
	      "route restore accepted");
	route.flags = 0;
	route.entry = 0;
	check(do_ioctl(fd, ARCTIC_NIU_IOC_GET_ROUTE, &route) == 0 &&
	      route.entry == expected, "route restored");
	check(do_ioctl(fd, ARCTIC_NIU_IOC_COUNTERS, &counters) == 0 &&
	      counters.error_cause == 0, "still no error cause");
}

static void check_mmap(int fd)
{
	check(do_mmap(fd, ARCTIC_NIU_MMAP_QUEUES_SIZE, MAP_SHARED, 0) == 0,
	      "map the queues");
	check(do_mmap(fd, ARCTIC_NIU_MMAP_QUEUES_SIZE +
		      ARCTIC_NIU_MMAP_DMA_TX_SIZE, MAP_SHARED, 0) == 0,
	      "map the queues and DMATx at once");
	check(do_mmap(fd, ARCTIC_NIU_MMAP_DMA_TX_SIZE, MAP_SHARED,
		      ARCTIC_NIU_MMAP_DMA_TX) == 0, "map DMATx alone");
	check(do_mmap(fd, ARCTIC_NIU_MMAP_QUEUES_SIZE, MAP_PRIVATE, 0) ==
	      -EINVAL, "private mapping: EINVAL");
	check(do_mmap(fd, ARCTIC_NIU_MMAP_QUEUES_SIZE +
		      ARCTIC_NIU_MMAP_DMA_TX_SIZE + 4096, MAP_SHARED, 0) ==
	      -EINVAL, "mapping past DMATx: EINVAL");
	check(do_mmap(fd, 4096, MAP_SHARED, 0x30000) == -EINVAL,
	      "mapping the gap: EINVAL");
	check(do_mmap(fd, 4096, MAP_SHARED, ARCTIC_NIU_MMAP_USER_PAGE) == 0,
	      "map the user page");
	check(do_mmap(fd, 8192, MAP_SHARED, ARCTIC_NIU_MMAP_USER_PAGE) ==
	      -EINVAL, "two pages at the user page: EINVAL");
	check(do_mmap(fd, ARCTIC_NIU_DMA_WINDOW_SIZE, MAP_SHARED,
		      ARCTIC_NIU_MMAP_DMA_WINDOW) == -EINVAL,
	      "DMA window before asking for one: EINVAL");
}

/* Map the queue view of @fd, or NULL. */
static char *map_queues(int fd)
{
	char *q = mmap(NULL, ARCTIC_NIU_MMAP_QUEUES_SIZE,
		       PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	return q == MAP_FAILED ? NULL : q;
}

/* The Rx queues of the view are the ones the NIU writes: a message sent
 * to ourselves must appear in HiRx at slot 0. */
static void check_loopback(int fd, uint32_t me)
{
	char *q = map_queues(fd);
	volatile struct arctic_mpi_slot *tx, *rx;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	if (!q) {
		check(0, "map for loopback");
		return;
	}
	tx = (void *)(q + ARCTIC_MMAP_HI_TX);
	rx = (void *)(q + ARCTIC_MMAP_HI_RX);
	/* Nothing has arrived: poll() sleeps its whole timeout. */
	check(poll(&pfd, 1, 200) == 0, "poll() on an empty endpoint times out");
	tx->command[0] = 0xfeed;
	tx->payload[0] = 0xbeef;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	tx->header = ARCTIC_MPI_VALID |
		     ARCTIC_FIELD_PREP(MPI_HEADER, DEST, me) |
		     ARCTIC_FIELD_PREP(MPI_HEADER, LENGTH, 1);
	/*
	 * poll() arms the receive interrupt and sleeps: only the interrupt
	 * can wake it before its 5 s run out, since the message lands after
	 * it looked (the device takes the slot on its next polling pass).
	 */
	check(poll(&pfd, 1, 5000) == 1 && (pfd.revents & POLLIN),
	      "poll() wakes when the message arrives");
	check((rx->header & ARCTIC_MPI_VALID) && tx->header == 0 &&
	      rx->command[0] == 0xfeed && rx->payload[0] == 0xbeef &&
	      ARCTIC_FIELD_GET(MPI_HEADER, DEST, rx->header) == me,
	      "loopback message lands in HiRx slot 0");
	munmap(q, ARCTIC_NIU_MMAP_QUEUES_SIZE);
}

/*
 * The window's ioctl and mapping, then a DMA request to ourselves: block 0
 * of the window must arrive as block 1, followed by its notification.
 */
static void check_dma_window(int fd, uint32_t me, unsigned int rx_slot)
{
	const uint64_t base = 0x40000000;	/* our name for the window */
	struct arctic_niu_dma_window window = {
		.size = ARCTIC_NIU_DMA_WINDOW_SIZE,
		.base_vir = base + 0x1000,
	};
	volatile struct arctic_dma_request *dma_tx;
	volatile struct arctic_mpi_slot *rx;
	uint32_t *data, i, same = 0;
	char *q;
	int spins;

	check(do_ioctl(fd, ARCTIC_NIU_IOC_DMA_WINDOW, &window) == -EINVAL,
	      "DMA window at an unaligned base: EINVAL");
	window.base_vir = base;
	window.size = 2 * ARCTIC_NIU_DMA_WINDOW_SIZE;
	check(do_ioctl(fd, ARCTIC_NIU_IOC_DMA_WINDOW, &window) == -EINVAL,
	      "DMA window of another size: EINVAL");
	window.size = ARCTIC_NIU_DMA_WINDOW_SIZE;
	window.reserved[1] = 1;
	check(do_ioctl(fd, ARCTIC_NIU_IOC_DMA_WINDOW, &window) == -EINVAL,
	      "DMA window with reserved bits: EINVAL");
	window.reserved[1] = 0;
	check(do_ioctl(fd, ARCTIC_NIU_IOC_DMA_WINDOW, &window) == 0 &&
	      window.mmap_offset == ARCTIC_NIU_MMAP_DMA_WINDOW,
	      "DMA window");
	check(do_ioctl(fd, ARCTIC_NIU_IOC_DMA_WINDOW, &window) == -EBUSY,
	      "a second DMA window: EBUSY");
	check(do_mmap(fd, 4096, MAP_SHARED, ARCTIC_NIU_MMAP_DMA_WINDOW) ==
	      -EINVAL, "part of the DMA window: EINVAL");

	data = mmap(NULL, ARCTIC_NIU_DMA_WINDOW_SIZE, PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, ARCTIC_NIU_MMAP_DMA_WINDOW);
	q = mmap(NULL, ARCTIC_NIU_MMAP_DMA_TX + ARCTIC_NIU_MMAP_DMA_TX_SIZE,
		 PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (data == MAP_FAILED || q == MAP_FAILED) {
		check(0, "map the DMA window and DMATx");
		return;
	}
	for (i = 0; i < ARCTIC_D / 4; i++)
		data[i] = 0xd0000000 + i;
	dma_tx = (void *)(q + ARCTIC_MMAP_DMA_TX);
	rx = (void *)(q + ARCTIC_MMAP_HI_RX + rx_slot * ARCTIC_SLOT_SIZE);
	dma_tx->command = 0xc0de;
	dma_tx->target = base + ARCTIC_D;
	dma_tx->source = base;
	dma_tx->payload[0] = 0xbeef;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	dma_tx->header = ARCTIC_MPI_VALID |
			 ARCTIC_FIELD_PREP(MPI_HEADER, DEST, me) |
			 ARCTIC_FIELD_PREP(MPI_HEADER, TYPE, 5) |
			 ARCTIC_FIELD_PREP(MPI_HEADER, MODE, ARCTIC_MODE_DMA) |
			 ARCTIC_FIELD_PREP(MPI_HEADER, LENGTH, 1);
	for (spins = 0; spins < 5000 && !(rx->header & ARCTIC_MPI_VALID);
	     spins++)
		usleep(1000);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	for (i = 0; i < ARCTIC_D / 4; i++)
		same += data[ARCTIC_D / 4 + i] == 0xd0000000 + i;
	check((rx->header & ARCTIC_MPI_VALID) &&
	      ARCTIC_FIELD_GET(MPI_HEADER, MODE, rx->header) ==
	      ARCTIC_MODE_MPI &&
	      ARCTIC_FIELD_GET(MPI_HEADER, TYPE, rx->header) == 5 &&
	      rx->command[0] == 0xc0de &&
	      rx->command[1] == (uint32_t)(base + ARCTIC_D) &&
	      rx->payload[0] == 0xbeef, "DMA notification in HiRx");
	check(same == ARCTIC_D / 4 && data[ARCTIC_D / 2] == 0,
	      "DMA block copied within the window, nothing beyond");
	munmap(q, ARCTIC_NIU_MMAP_DMA_TX + ARCTIC_NIU_MMAP_DMA_TX_SIZE);
	munmap(data, ARCTIC_NIU_DMA_WINDOW_SIZE);
}

/* Fill HiTx slot @slot with a message for @endpoint of node @me. */
static void put_hi_tx(volatile struct arctic_mpi_slot *slot, uint32_t command,
		      uint32_t me, uint32_t endpoint)
{
	slot->command[0] = command;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	slot->header = ARCTIC_MPI_VALID |
		       ARCTIC_FIELD_PREP(MPI_HEADER, DEST, me) |
		       ARCTIC_FIELD_PREP(MPI_HEADER, ENDPOINT, endpoint);
}

/*
 * A program that sends and exits at once: close() must let the NIU take
 * what is still in the Tx queue, not clear it away.  Endpoint @from fills
 * HiTx with messages for endpoint @to of this node, rings no doorbell and
 * closes; every message must then reach @to, in order.
 */
static void check_close_drains(uint32_t me)
{
	enum { MESSAGES = 32 };
	struct arctic_niu_endpoint_info info;
	int from = open(device, O_RDWR), to = open(device, O_RDWR);
	volatile struct arctic_mpi_slot *tx, *rx;
	char *txq = from >= 0 ? map_queues(from) : NULL;
	char *rxq = to >= 0 ? map_queues(to) : NULL;
	unsigned int i, got = 0, waited_ms = 0;

	if (!txq || !rxq ||
	    do_ioctl(to, ARCTIC_NIU_IOC_ENDPOINT_INFO, &info)) {
		check(0, "two endpoints for the close test");
		return;
	}
	tx = (void *)(txq + ARCTIC_MMAP_HI_TX);
	for (i = 0; i < MESSAGES; i++)
		put_hi_tx(&tx[i], 0xc105e000 + i, me, info.endpoint);
	munmap(txq, ARCTIC_NIU_MMAP_QUEUES_SIZE);
	close(from);

	rx = (void *)(rxq + ARCTIC_MMAP_HI_RX);
	for (i = 0; i < MESSAGES; i++) {
		while (waited_ms < 5000 && !(rx[i].header & ARCTIC_MPI_VALID)) {
			usleep(1000);
			waited_ms++;
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		got += (rx[i].header & ARCTIC_MPI_VALID) &&
		       rx[i].command[0] == 0xc105e000 + i;
		rx[i].header = 0;	/* read: not kept for the next test */
	}
	printf("close test: %u of %u messages arrived\n", got, MESSAGES);
	check(got == MESSAGES,
	      "messages still in HiTx at close() are sent, not dropped");
	munmap(rxq, ARCTIC_NIU_MMAP_QUEUES_SIZE);
	close(to);
}

/*
 * Open the device again: it must hand out endpoint @endpoint, whose queues
 * are returned mapped (NULL, with @what failed, otherwise); *@fd is the
 * file, or -1.
 */
static char *reopen_endpoint(uint32_t endpoint, int *fd, const char *what)
{
	struct arctic_niu_endpoint_info info;
	char *q;

	*fd = open(device, O_RDWR);
	q = *fd >= 0 ? map_queues(*fd) : NULL;
	if (q && !do_ioctl(*fd, ARCTIC_NIU_IOC_ENDPOINT_INFO, &info) &&
	    info.endpoint == endpoint)
		return q;
	if (q)
		munmap(q, ARCTIC_NIU_MMAP_QUEUES_SIZE);
	check(0, what);
	return NULL;
}

/*
 * Slots 0..@n-1 of @rx that hold, valid and on lap 0, the messages whose
 * command[0] counts up from @first: what a close kept for the next program.
 */
static unsigned int kept_in_order(volatile struct arctic_mpi_slot *rx,
				  unsigned int n, uint32_t first)
{
	unsigned int i, kept = 0;

	for (i = 0; i < n; i++)
		kept += (rx[i].header & ARCTIC_MPI_VALID) &&
			!ARCTIC_FIELD_GET(MPI_HEADER, LAP, rx[i].header) &&
			rx[i].command[0] == first + i;
	return kept;
}

/* Wait up to 5 s for @slot's header to be valid. */
static bool wait_valid(volatile struct arctic_mpi_slot *slot)
{
	unsigned int ms;

	for (ms = 0; ms < 5000 && !(slot->header & ARCTIC_MPI_VALID); ms++)
		usleep(1000);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return slot->header & ARCTIC_MPI_VALID;
}

/*
 * close() with a full HiRx: all N messages are kept, on lap 0, for the
 * next program, and the NIU writes the next message into slot 0 with
 * MPI_HEADER.LAP = 1, the parity of the lap the next program reads it on.
 */
static void check_full_queue_kept(uint32_t me)
{
	struct arctic_niu_endpoint_info info;
	int from = open(device, O_RDWR), to = open(device, O_RDWR), again;
	volatile struct arctic_mpi_slot *tx, *rx;
	char *txq = from >= 0 ? map_queues(from) : NULL, *rxq, *q;
	unsigned int i, kept;

	if (!txq || to < 0 || do_ioctl(to, ARCTIC_NIU_IOC_ENDPOINT_INFO, &info)) {
		check(0, "two endpoints for the full-queue test");
		return;
	}
	tx = (void *)(txq + ARCTIC_MMAP_HI_TX);
	for (i = 0; i < ARCTIC_N; i++)
		put_hi_tx(&tx[i], 0xf0110000 + i, me, info.endpoint);
	rxq = map_queues(to);
	rx = rxq ? (void *)(rxq + ARCTIC_MMAP_HI_RX) : NULL;
	check(rx && wait_valid(&rx[ARCTIC_N - 1]), "HiRx fills up");
	if (rxq)
		munmap(rxq, ARCTIC_NIU_MMAP_QUEUES_SIZE);
	close(to);

	q = reopen_endpoint(info.endpoint, &again,
			    "the full endpoint is handed out again");
	if (!q)
		goto out;
	rx = (void *)(q + ARCTIC_MMAP_HI_RX);
	kept = kept_in_order(rx, ARCTIC_N, 0xf0110000);
	printf("full queue test: %u of %u kept on lap 0\n", kept, ARCTIC_N);
	check(kept == ARCTIC_N, "a full HiRx is kept whole, in order, lap 0");

	rx[0].header = 0;			/* read the first one */
	/* The NIU took tx[0] long ago. */
	put_hi_tx(&tx[0], 0xf011ffff, me, info.endpoint);
	check(wait_valid(&rx[0]) && rx[0].command[0] == 0xf011ffff &&
	      ARCTIC_FIELD_GET(MPI_HEADER, LAP, rx[0].header) == 1,
	      "the next message lands in slot 0 with LAP 1");
	for (i = 0; i < ARCTIC_N; i++)	/* leave the endpoint empty */
		rx[i].header = 0;
out:
	if (q)
		munmap(q, ARCTIC_NIU_MMAP_QUEUES_SIZE);
	if (again >= 0)
		close(again);
	munmap(txq, ARCTIC_NIU_MMAP_QUEUES_SIZE);
	close(from);
}

/*
 * ARCTIC_NIU_IOC_KEEP_UNREAD: what a library read ahead and its program
 * never took goes back, at close, in front of the unread messages, for
 * the next program.  Endpoint @to receives three messages; the test reads
 * the first two as a library would (copies the slots, clears them) and
 * gives them back; the third stays unread.  The next open of that
 * endpoint must find all three in slots 0-2, in order, on lap 0.
 */
static void check_keep_unread(uint32_t me)
{
	struct arctic_niu_endpoint_info info;
	struct arctic_mpi_slot back[2], bad;
	struct arctic_niu_keep_unread req = { .priority = 0 };
	int from = open(device, O_RDWR), to = open(device, O_RDWR), again = -1;
	volatile struct arctic_mpi_slot *tx, *rx;
	char *txq = from >= 0 ? map_queues(from) : NULL, *rxq = NULL, *q = NULL;
	unsigned int i, kept;

	if (!txq || to < 0 || do_ioctl(to, ARCTIC_NIU_IOC_ENDPOINT_INFO, &info)) {
		check(0, "two endpoints for the keep-unread test");
		return;
	}
	memset(&bad, 0, sizeof(bad));
	req.count = 1;
	req.slots = (uintptr_t)&bad;
	check(do_ioctl(to, ARCTIC_NIU_IOC_KEEP_UNREAD, &req) == -EINVAL,
	      "keep unread: a slot without VALID: EINVAL");
	bad.header = ARCTIC_MPI_VALID;
	req.priority = 2;
	check(do_ioctl(to, ARCTIC_NIU_IOC_KEEP_UNREAD, &req) == -EINVAL,
	      "keep unread: priority 2: EINVAL");
	req.priority = 0;
	req.count = ARCTIC_N + 1;
	check(do_ioctl(to, ARCTIC_NIU_IOC_KEEP_UNREAD, &req) == -EINVAL,
	      "keep unread: more than a queue: EINVAL");
	req.count = 1;
	req.flags = 1;
	check(do_ioctl(to, ARCTIC_NIU_IOC_KEEP_UNREAD, &req) == -EINVAL,
	      "keep unread: flags: EINVAL");
	req.flags = 0;
	req.slots = 8;
	check(do_ioctl(to, ARCTIC_NIU_IOC_KEEP_UNREAD, &req) == -EFAULT,
	      "keep unread: a bad address: EFAULT");

	tx = (void *)(txq + ARCTIC_MMAP_HI_TX);
	for (i = 0; i < 3; i++)
		put_hi_tx(&tx[i], 0x6ee70000 + i, me, info.endpoint);
	rxq = map_queues(to);
	rx = rxq ? (void *)(rxq + ARCTIC_MMAP_HI_RX) : NULL;
	if (!rx || !wait_valid(&rx[2])) {
		check(0, "three messages arrive for the keep-unread test");
		if (rxq)
			munmap(rxq, ARCTIC_NIU_MMAP_QUEUES_SIZE);
		close(to);
		goto out;
	}
	for (i = 0; i < 2; i++) {	/* read ahead, as libniu's stash does */
		memcpy(back + i, (const void *)&rx[i], sizeof(back[i]));
		rx[i].header = 0;
	}
	/* A first call is replaced by the second. */
	req.slots = (uintptr_t)&bad;
	check(do_ioctl(to, ARCTIC_NIU_IOC_KEEP_UNREAD, &req) == 0,
	      "keep unread: one slot taken");
	req.count = 2;
	req.slots = (uintptr_t)back;
	check(do_ioctl(to, ARCTIC_NIU_IOC_KEEP_UNREAD, &req) == 0,
	      "keep unread: two slots taken, replacing the first call");
	munmap(rxq, ARCTIC_NIU_MMAP_QUEUES_SIZE);
	close(to);

	q = reopen_endpoint(info.endpoint, &again,
			    "the endpoint is handed out again");
	if (!q)
		goto out;
	rx = (void *)(q + ARCTIC_MMAP_HI_RX);
	kept = kept_in_order(rx, 3, 0x6ee70000);
	printf("keep unread test: %u of 3 in order on lap 0, slot 3 %s\n",
	       kept, rx[3].header ? "taken" : "empty");
	check(kept == 3 && !rx[3].header,
	      "read-ahead messages given back come first, then the unread one");
	for (i = 0; i < 3; i++)		/* leave the endpoint empty */
		rx[i].header = 0;
out:
	if (q)
		munmap(q, ARCTIC_NIU_MMAP_QUEUES_SIZE);
	if (again >= 0)
		close(again);
	munmap(txq, ARCTIC_NIU_MMAP_QUEUES_SIZE);
	close(from);
}

/* NIU_TX_POLLED as the driver's sysfs shows it, or -1. */
static long tx_polled(void)
{
	long value = -1;
	FILE *f = fopen(TX_POLLED_SYSFS, "r");

	if (f) {
		if (fscanf(f, "%ld", &value) != 1)
			value = -1;
		fclose(f);
	}
	return value;
}

/*
 * ARCTIC_NIU_IOC_TX_POLL: open has the NIU poll the endpoint (seed 002's
 * program only writes slots), 0 stops that, 1 brings it back, anything
 * else is refused.  @fd owns endpoint 0.
 */
static void check_tx_poll(int fd)
{
	uint32_t poll = 2;

	check(tx_polled() == 1, "TX_POLLED after open: endpoint 0 polled");
	check(do_ioctl(fd, ARCTIC_NIU_IOC_TX_POLL, &poll) == -EINVAL,
	      "Tx poll 2: EINVAL");
	poll = 0;
	check(do_ioctl(fd, ARCTIC_NIU_IOC_TX_POLL, &poll) == 0 &&
	      tx_polled() == 0, "Tx poll 0: endpoint 0 not polled");
	poll = 1;
	check(do_ioctl(fd, ARCTIC_NIU_IOC_TX_POLL, &poll) == 0 &&
	      tx_polled() == 1, "Tx poll 1: endpoint 0 polled again");
}

int main(int argc, char **argv)
{
	struct arctic_niu_endpoint_info info;
	struct arctic_niu_node_info node;
	int fds[ARCTIC_ENDPOINTS], fd, i, got = 0;

	if (argc > 1)
		device = argv[1];
	fd = open(device, O_RDWR);
	if (fd < 0) {
		perror(device);
		return 2;
	}
	check_ioctls(fd);
	check_tx_poll(fd);
	check_mmap(fd);
	if (do_ioctl(fd, ARCTIC_NIU_IOC_NODE_INFO, &node) == 0)
		check_loopback(fd, node.node_id);

	/* Six more endpoints, then none: the kernel keeps the last for niu0. */
	for (i = 1; i < USER_ENDPOINTS; i++) {
		fds[i] = open(device, O_RDWR);
		if (fds[i] >= 0 &&
		    do_ioctl(fds[i], ARCTIC_NIU_IOC_ENDPOINT_INFO, &info) == 0 &&
		    info.endpoint == (uint32_t)i)
			got++;
	}
	check(got == USER_ENDPOINTS - 1, "seven opens get endpoints 0-6");
	check(open(device, O_RDWR) < 0 && errno == EBUSY,
	      "eighth open (the kernel's endpoint 7): EBUSY");
	close(fds[3]);
	fds[3] = open(device, O_RDWR);
	check(fds[3] >= 0 &&
	      do_ioctl(fds[3], ARCTIC_NIU_IOC_ENDPOINT_INFO, &info) == 0 &&
	      info.endpoint == 3, "a closed endpoint is handed out again");
	for (i = 1; i < USER_ENDPOINTS; i++)
		close(fds[i]);
	close(fd);
	check(tx_polled() == 0, "TX_POLLED with no endpoint open: 0");

	/*
	 * The loopback left its message unread: release keeps it, at the
	 * front of HiRx, for the next program (a peer's next program may
	 * already be talking to it); the rest of the queue is empty.
	 */
	fd = open(device, O_RDWR);
	if (fd >= 0) {
		char *q = mmap(NULL, ARCTIC_NIU_MMAP_QUEUES_SIZE, PROT_READ,
			       MAP_SHARED, fd, 0);
		volatile struct arctic_mpi_slot *rx = (void *)(q +
							      ARCTIC_MMAP_HI_RX);

		check(q != MAP_FAILED && (rx[0].header & ARCTIC_MPI_VALID) &&
		      rx[0].command[0] == 0xfeed && rx[0].payload[0] == 0xbeef &&
		      rx[1].header == 0,
		      "an unread message is kept for the next program");
		if (q != MAP_FAILED)
			munmap(q, ARCTIC_NIU_MMAP_QUEUES_SIZE);
		if (do_ioctl(fd, ARCTIC_NIU_IOC_NODE_INFO, &node) == 0)
			check_dma_window(fd, node.node_id, 1);
		close(fd);
	}
	check_close_drains(node.node_id);
	check_full_queue_kept(node.node_id);
	check_keep_unread(node.node_id);
	/* Closing the file gave the window back. */
	fd = open(device, O_RDWR);
	if (fd >= 0) {
		struct arctic_niu_dma_window window = {
			.size = ARCTIC_NIU_DMA_WINDOW_SIZE,
		};

		check(do_ioctl(fd, ARCTIC_NIU_IOC_ENDPOINT_INFO, &info) == 0 &&
		      info.endpoint == 0 &&
		      do_ioctl(fd, ARCTIC_NIU_IOC_DMA_WINDOW, &window) == 0,
		      "endpoint 0 gets a DMA window again after close");
		close(fd);
	}
	printf("niu-driver-test: %d failure(s): %s\n", failures,
	       failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}
