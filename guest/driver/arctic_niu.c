// SPDX-License-Identifier: GPL-2.0
/*
 * Driver for the Arctic NIU, the QEMU model of the MIT StarT network
 * interface unit (CSG Memo 389, "seed 002").  The driver owns the
 * privileged side of the NIU: it tests the device at probe, allocates the
 * queue regions of every virtual endpoint in coherent DMA memory, loads the
 * route table computed from the node's position in the fat tree, and turns
 * the datapaths on.  User programs then get one endpoint per open() of
 * /dev/arctic-niuN and map its queues and doorbell page, so messages are
 * sent and received with plain loads and stores, as the seed intends.
 * The owner of endpoint 0 may also turn the whole NIU into dMPI raw mode
 * and back.  docs/programming-guide.md describes the registers used here.
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/ethtool.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/if_arp.h>
#include <linux/inetdevice.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/iopoll.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/u64_stats_sync.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/wait.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/pkt_sched.h>
#include <net/route.h>

#include "arctic/niu-hw.h"
#include "arctic/route.h"
#include "arctic_ipnet.h"
#include "uapi/arctic_niu.h"

#define DRV_NAME "arctic_niu"

static unsigned int link_timeout_ms = 10000;
module_param(link_timeout_ms, uint, 0444);
MODULE_PARM_DESC(link_timeout_ms,
		 "how long probe waits for the link to the switch (ms)");

static bool ipnet = true;
module_param(ipnet, bool, 0444);
MODULE_PARM_DESC(ipnet,
		 "register the niuN network interface, on the NIU's last endpoint, which user programs then cannot open");

/* Draining Tx waits for the link; a switch restart takes about a second. */
#define ARCTIC_TX_DRAIN_TIMEOUT_US	(5 * USEC_PER_SEC)
#define ARCTIC_SELFTEST_SIZE		PAGE_SIZE
#define ARCTIC_TEST_DMA_TIMEOUT_US	USEC_PER_SEC

static DEFINE_IDA(arctic_niu_ida);

struct arctic_niu;
struct niu_ipnet;

struct arctic_niu_endpoint {
	struct arctic_niu *niu;
	unsigned int index;
	bool in_use;
	bool needs_clear;	/* the last owner's slots are still there */
	void *tx_region;		/* HiTx, LoTx, DMATx */
	dma_addr_t tx_region_dma;
	void *rx_region;		/* HiRx, LoRx */
	dma_addr_t rx_region_dma;
	void *dma_window;		/* NULL until asked for */
	dma_addr_t dma_window_dma;
	wait_queue_head_t rx_wait;	/* poll() sleepers, woken by the IRQ */
	/*
	 * Per receive queue (0 HiRx, 1 LoRx): slots the owner's library read
	 * ahead and its program never took (ARCTIC_NIU_IOC_KEEP_UNREAD),
	 * oldest first; they go back in front at the next clear.  Under
	 * niu->lock.
	 */
	void *kept[2];
	unsigned int kept_count[2];
};

struct arctic_niu {
	struct pci_dev *pdev;
	void __iomem *regs;		/* BAR 0 */
	void __iomem *user;		/* BAR 2, to arm interrupts */
	resource_size_t user_bar_phys;	/* BAR 2 */
	unsigned int num_endpoints;
	/* open() hands out 0..user_endpoints-1; the rest is the kernel's */
	unsigned int user_endpoints;
	/* The niuN interface, on endpoint user_endpoints, or NULL */
	struct niu_ipnet *ipnet;
	int minor_index;
	char name[32];
	struct miscdevice misc;
	/* Serialises endpoint ownership and datapath start/stop. */
	struct mutex lock;
	bool routes_loaded;
	/* dMPI raw mode: both datapaths OFF, only endpoint 0 open. */
	bool raw_mode;
	/*
	 * NIU_TX_POLLED: the open endpoints whose program has not said it
	 * rings the doorbell (ARCTIC_NIU_IOC_TX_POLL); under @lock.
	 */
	u32 tx_polled;
	u32 node_id;
	u32 num_nodes;
	struct arctic_niu_endpoint ep[ARCTIC_ENDPOINTS];
};

static u32 niu_read(struct arctic_niu *niu, unsigned int offset)
{
	return readl(niu->regs + offset);
}

static void niu_write(struct arctic_niu *niu, unsigned int offset, u32 value)
{
	writel(value, niu->regs + offset);
}

static void niu_write64(struct arctic_niu *niu, unsigned int lo_offset,
			u64 value)
{
	niu_write(niu, lo_offset, lower_32_bits(value));
	niu_write(niu, lo_offset + 4, upper_32_bits(value));
}

static void niu_reset(struct arctic_niu *niu)
{
	niu_write(niu, A_NIU_TX_CTRL, R_NIU_CTRL_RESET_MASK);
}

/* Stop the transmit datapath and wait until the device reads it OFF. */
static int niu_tx_stop(struct arctic_niu *niu)
{
	u32 ctrl;
	int ret;

	niu_write(niu, A_NIU_TX_CTRL, 0);
	ret = readl_poll_timeout(niu->regs + A_NIU_TX_CTRL, ctrl,
				 !(ctrl & R_NIU_CTRL_ENABLE_MASK), 10,
				 ARCTIC_TX_DRAIN_TIMEOUT_US);
	if (ret)
		dev_err(&niu->pdev->dev, "transmit datapath did not drain\n");
	return ret;
}

/* Receive first, so answers to the first messages find their queues. */
static void niu_datapaths_start(struct arctic_niu *niu)
{
	niu_write(niu, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
	niu_write(niu, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
}

/*
 * Causes that mean the device refused what the driver programmed.  The
 * others come from the network and from peers that booted first (an
 * answer owed to a node before our routes are loaded is dropped as
 * NO_ROUTE, a packet arriving with Rx off is refused): those are logged,
 * not failures of ours.
 */
#define ARCTIC_DRIVER_ERRORS (BIT(ARCTIC_ERR_RO_WRITE) | \
			      BIT(ARCTIC_ERR_BAD_REGISTER) | \
			      BIT(ARCTIC_ERR_BUSY) | \
			      BIT(ARCTIC_ERR_BAD_ALIGN) | \
			      BIT(ARCTIC_ERR_BAD_INDEX) | \
			      BIT(ARCTIC_ERR_BAD_VALUE))

/* The names of the causes in @cause (arctic_error_name()), comma-separated. */
static void niu_error_names(u32 cause, char *buf, size_t size)
{
	unsigned long bits = cause;
	unsigned int bit;
	int len = 0;

	buf[0] = '\0';
	for_each_set_bit(bit, &bits, 32)
		len += scnprintf(buf + len, size - len, "%s%s", len ? ", " : "",
				 arctic_error_name(bit));
}

static int niu_check_errors(struct arctic_niu *niu, const char *when)
{
	u32 cause = niu_read(niu, A_NIU_ERROR_CAUSE);
	u32 info = niu_read(niu, A_NIU_ERROR_INFO);
	char names[160];

	if (!cause)
		return 0;
	niu_write(niu, A_NIU_ERROR_CAUSE, cause);
	niu_error_names(cause, names, sizeof(names));
	if (!(cause & ARCTIC_DRIVER_ERRORS)) {
		dev_info(&niu->pdev->dev,
			 "%s: network error cause %#x (%s), info %#x\n",
			 when, cause, names, info);
		return 0;
	}
	dev_err(&niu->pdev->dev, "%s: error cause %#x (%s), info %#x\n", when,
		cause, names, info);
	return -EIO;
}

/* ---------------------------------------------------------------------
 * Probe-time self-test: registers and the test DMA engine.
 */

static int niu_selftest_scratch(struct arctic_niu *niu)
{
	static const u32 patterns[] = { 0xa5a5a5a5, 0x5a5a5a5a, 0, ~0u };
	unsigned int i;
	u32 got;

	for (i = 0; i < ARRAY_SIZE(patterns); i++) {
		niu_write(niu, A_NIU_SCRATCH, patterns[i]);
		got = niu_read(niu, A_NIU_SCRATCH);
		if (got != patterns[i]) {
			dev_err(&niu->pdev->dev,
				"scratch register: wrote %#x, read %#x\n",
				patterns[i], got);
			return -EIO;
		}
	}
	return 0;
}

/* Returns the final TEST_DMA_STATUS, or 0 if DONE never came. */
static u32 niu_test_dma_run(struct arctic_niu *niu, dma_addr_t addr,
			    u32 size, u32 seed, u32 cmd)
{
	u32 status;

	niu_write64(niu, A_NIU_TEST_DMA_ADDR_LO, addr);
	niu_write(niu, A_NIU_TEST_DMA_SIZE, size);
	niu_write(niu, A_NIU_TEST_DMA_SEED, seed);
	niu_write(niu, A_NIU_TEST_DMA_CTRL, cmd);
	/* The command runs after the write returns; DONE says it ended. */
	if (readl_poll_timeout(niu->regs + A_NIU_TEST_DMA_STATUS, status,
			       status & R_NIU_TEST_DMA_STATUS_DONE_MASK, 10,
			       ARCTIC_TEST_DMA_TIMEOUT_US))
		return 0;
	return status;
}

/*
 * FILL proves device writes reach our memory, CHECK proves device reads see
 * what the CPU wrote, and a deliberately corrupted word proves CHECK can
 * fail at all.
 */
static int niu_selftest_dma(struct arctic_niu *niu)
{
	struct device *dev = &niu->pdev->dev;
	const u32 words = ARCTIC_SELFTEST_SIZE / 4, seed = 0x5eed0001;
	dma_addr_t buf_dma;
	u32 *buf, status, pattern, i;
	int ret = -EIO;

	buf = dma_alloc_coherent(dev, ARCTIC_SELFTEST_SIZE, &buf_dma,
				 GFP_KERNEL);
	if (!buf)
		return -ENOMEM;

	memset(buf, 0, ARCTIC_SELFTEST_SIZE);
	status = niu_test_dma_run(niu, buf_dma, ARCTIC_SELFTEST_SIZE, seed,
				  ARCTIC_TEST_DMA_FILL);
	if (status != R_NIU_TEST_DMA_STATUS_DONE_MASK) {
		dev_err(dev, "test DMA fill: status %#x\n", status);
		goto free_buf;
	}
	for (i = 0; i < words; i++) {
		if (le32_to_cpu((__force __le32)buf[i]) !=
		    arctic_test_pattern(seed, i)) {
			dev_err(dev, "test DMA fill: word %u is %#x\n", i,
				buf[i]);
			goto free_buf;
		}
	}

	for (i = 0; i < words; i++) {
		pattern = arctic_test_pattern(~seed, i);
		buf[i] = (__force u32)cpu_to_le32(pattern);
	}
	status = niu_test_dma_run(niu, buf_dma, ARCTIC_SELFTEST_SIZE, ~seed,
				  ARCTIC_TEST_DMA_CHECK);
	if (status != R_NIU_TEST_DMA_STATUS_DONE_MASK) {
		dev_err(dev, "test DMA check: status %#x\n", status);
		goto free_buf;
	}

	buf[words / 2] ^= 1;
	status = niu_test_dma_run(niu, buf_dma, ARCTIC_SELFTEST_SIZE, ~seed,
				  ARCTIC_TEST_DMA_CHECK);
	if (!(status & R_NIU_TEST_DMA_STATUS_MISMATCH_MASK)) {
		dev_err(dev, "test DMA check missed a corrupted word\n");
		goto free_buf;
	}
	ret = niu_check_errors(niu, "self-test");

free_buf:
	dma_free_coherent(dev, ARCTIC_SELFTEST_SIZE, buf, buf_dma);
	return ret;
}

/* ---------------------------------------------------------------------
 * Queues and routes
 */

static int niu_alloc_endpoints(struct arctic_niu *niu)
{
	struct device *dev = &niu->pdev->dev;
	struct arctic_niu_endpoint *ep;
	unsigned int e;

	for (e = 0; e < niu->num_endpoints; e++) {
		ep = &niu->ep[e];
		ep->niu = niu;
		ep->index = e;
		init_waitqueue_head(&ep->rx_wait);
		/* The DMA API aligns a coherent buffer to its size order. */
		ep->tx_region = dmam_alloc_coherent(dev, ARCTIC_TX_REGION_SIZE,
						    &ep->tx_region_dma,
						    GFP_KERNEL);
		ep->rx_region = dmam_alloc_coherent(dev, ARCTIC_RX_REGION_SIZE,
						    &ep->rx_region_dma,
						    GFP_KERNEL);
		if (!ep->tx_region || !ep->rx_region)
			return -ENOMEM;
		if (!IS_ALIGNED(ep->tx_region_dma, ARCTIC_TX_REGION_ALIGN) ||
		    !IS_ALIGNED(ep->rx_region_dma, ARCTIC_RX_REGION_ALIGN)) {
			dev_err(dev, "endpoint %u: queue regions misaligned\n",
				e);
			return -ENOMEM;
		}
		memset(ep->tx_region, 0, ARCTIC_TX_REGION_SIZE);
		memset(ep->rx_region, 0, ARCTIC_RX_REGION_SIZE);
		niu_write64(niu, ARCTIC_EP_OFFSET(e, A_EP_TX_QBASE_LO),
			    ep->tx_region_dma);
		niu_write64(niu, ARCTIC_EP_OFFSET(e, A_EP_RX_QBASE_LO),
			    ep->rx_region_dma);
	}
	return 0;
}

/*
 * Point endpoint @ep's DMA window at @phys, named @vir by its user, of
 * @mask + 1 bytes (0: no window).  Called with Tx and Rx OFF.  The mask
 * shrinks high half first and grows low half first, so no half-written
 * value is ever refused.
 */
static void niu_dma_window_load(struct arctic_niu_endpoint *ep,
				dma_addr_t phys, u64 vir, u64 mask)
{
	struct arctic_niu *niu = ep->niu;
	unsigned int e = ep->index;

	if (!mask) {
		niu_write(niu, ARCTIC_EP_OFFSET(e, A_EP_DMA_RANGE_MASK_HI), 0);
		niu_write(niu, ARCTIC_EP_OFFSET(e, A_EP_DMA_RANGE_MASK_LO), 0);
	}
	niu_write64(niu, ARCTIC_EP_OFFSET(e, A_EP_DMA_BASE_PHY_LO), phys);
	niu_write64(niu, ARCTIC_EP_OFFSET(e, A_EP_DMA_BASE_VIR_LO), vir);
	if (mask)
		niu_write64(niu, ARCTIC_EP_OFFSET(e, A_EP_DMA_RANGE_MASK_LO),
			    mask);
}

/* Is slot @index of the queue at @queue valid (header read once)? */
static bool niu_slot_valid(const void *queue, unsigned int index)
{
	const __le32 *hdr = queue + (size_t)index * ARCTIC_SLOT_SIZE;

	return le32_to_cpu(READ_ONCE(*hdr)) & ARCTIC_MPI_VALID;
}

/* Does any slot of a queue region hold a valid header? */
static bool niu_region_has_valid(const void *region, size_t size)
{
	unsigned int i;

	for (i = 0; i < size / ARCTIC_SLOT_SIZE; i++)
		if (niu_slot_valid(region, i))
			return true;
	return false;
}

/*
 * A program that sends and exits at once closes its endpoint with its
 * last messages still in the Tx queues (seed 002 section 3.2.1: the NIU
 * takes a slot when it gets to it).  Let the NIU take them before the
 * queues are cleared; give up only if it cannot (link down for long, a
 * peer that never answers), and say so.
 */
static void niu_tx_queues_drain(struct arctic_niu_endpoint *ep)
{
	unsigned long deadline = jiffies +
		usecs_to_jiffies(ARCTIC_TX_DRAIN_TIMEOUT_US);

	while (niu_region_has_valid(ep->tx_region, ARCTIC_TX_REGION_SIZE)) {
		if (time_after(jiffies, deadline)) {
			dev_warn(&ep->niu->pdev->dev,
				 "endpoint %u closed with messages the NIU did not send\n",
				 ep->index);
			return;
		}
		usleep_range(50, 200);
	}
}

/*
 * Messages the last program did not read stay for the next one: a peer's
 * next program may already be talking to ours (mpirun a && mpirun b), and
 * the NIU has acknowledged them, so clearing would lose them for good.
 * They are the valid slots just behind the NIU's head, in order; move them
 * to the front of @buf (a copy of the queue), on lap 0 as the next program
 * starts, and return how many.  Called with Rx OFF.
 */
static unsigned int niu_rx_unread_to_front(struct arctic_niu_endpoint *ep,
					   unsigned int q, unsigned int offset,
					   u32 head, u8 *buf)
{
	const u8 *queue = (const u8 *)ep->rx_region + offset;
	unsigned int n = 0, first, i, kept = ep->kept_count[q], skip = 0;
	__le32 *hdr;

	while (n < ARCTIC_N &&
	       niu_slot_valid(queue, (head + ARCTIC_N - 1 - n) % ARCTIC_N))
		n++;
	first = (head + ARCTIC_N - n) % ARCTIC_N;
	/* The library's read-ahead is older than what waits in the queue. */
	if (kept + n > ARCTIC_N) {
		skip = kept + n - ARCTIC_N;
		dev_warn(&ep->niu->pdev->dev,
			 "endpoint %u: %u unread message(s) for receive queue %u of %u slots; the oldest %u dropped\n",
			 ep->index, kept + n, q, ARCTIC_N, skip);
	}
	memset(buf, 0, ARCTIC_QUEUE_SIZE);
	if (kept > skip)
		memcpy(buf, (u8 *)ep->kept[q] + (size_t)skip * ARCTIC_SLOT_SIZE,
		       (size_t)(kept - skip) * ARCTIC_SLOT_SIZE);
	for (i = 0; i < n; i++)
		memcpy(buf + (kept - skip + i) * ARCTIC_SLOT_SIZE,
		       queue + ((first + i) % ARCTIC_N) * ARCTIC_SLOT_SIZE,
		       ARCTIC_SLOT_SIZE);
	for (i = 0; i < kept - skip + n; i++) {
		hdr = (__le32 *)(buf + i * ARCTIC_SLOT_SIZE);
		*hdr &= ~cpu_to_le32(R_MPI_HEADER_LAP_MASK);
	}
	return kept - skip + n;
}

static void niu_kept_free(struct arctic_niu_endpoint *ep, unsigned int q)
{
	kfree(ep->kept[q]);
	ep->kept[q] = NULL;
	ep->kept_count[q] = 0;
}

/*
 * Leave a released endpoint with empty Tx queues and its unread messages
 * at the front of its Rx queues: the Tx indices at 0 and each Rx head just
 * after what was kept, which is where the next seed 002 program starts
 * (its first receive looks at slot 0).  The device's pointers can only be
 * written with the datapaths OFF, so every endpoint pauses for a moment;
 * the senders of packets refused meanwhile retry them.
 */
static int niu_endpoint_clear(struct arctic_niu_endpoint *ep)
{
	static const struct {
		unsigned int offset, reg;
	} rxq[] = {
		{ ARCTIC_HI_RX_OFFSET, A_EP_HI_RX_HD },
		{ ARCTIC_LO_RX_OFFSET, A_EP_LO_RX_HD },
	};
	struct arctic_niu *niu = ep->niu;
	unsigned int e = ep->index, q, kept;
	u8 *buf;
	int ret;

	buf = kmalloc(ARCTIC_QUEUE_SIZE, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;

	ret = niu_tx_stop(niu);
	if (ret) {
		kfree(buf);
		return ret;
	}
	niu_write(niu, A_NIU_RX_CTRL, 0);

	niu_write(niu, ARCTIC_EP_OFFSET(e, A_EP_HI_TX_TL), 0);
	niu_write(niu, ARCTIC_EP_OFFSET(e, A_EP_LO_TX_TL), 0);
	niu_write(niu, ARCTIC_EP_OFFSET(e, A_EP_DMA_TX_TL), 0);
	niu_dma_window_load(ep, 0, 0, 0);
	memset(ep->tx_region, 0, ARCTIC_TX_REGION_SIZE);
	for (q = 0; q < ARRAY_SIZE(rxq); q++) {
		u32 head = niu_read(niu, ARCTIC_EP_OFFSET(e, rxq[q].reg));

		kept = niu_rx_unread_to_front(ep, q, rxq[q].offset,
					      ARCTIC_FIELD_GET(EP_RX_HD, INDEX,
							       head), buf);
		niu_kept_free(ep, q);
		memcpy((u8 *)ep->rx_region + rxq[q].offset, buf,
		       ARCTIC_QUEUE_SIZE);
		/* A full queue kept: the NIU goes on at slot 0 of lap 1. */
		niu_write(niu, ARCTIC_EP_OFFSET(e, rxq[q].reg),
			  ARCTIC_FIELD_PREP(EP_RX_HD, INDEX, kept % ARCTIC_N) |
			  ARCTIC_FIELD_PREP(EP_RX_HD, LAP, kept / ARCTIC_N));
	}
	kfree(buf);
	/* The device must see the slots before it looks at them again. */
	wmb();

	niu_datapaths_start(niu);
	return niu_check_errors(niu, "endpoint reset");
}

/*
 * NUM_NODES is 0 until the switch's WELCOME, so the table can only be
 * computed once the link is up.  Called with Tx OFF.
 */
static void niu_load_routes(struct arctic_niu *niu)
{
	u32 *table;
	unsigned int t, node, n = niu->num_nodes;

	table = kcalloc(2 * n, sizeof(*table), GFP_KERNEL);
	if (!table)
		return;
	arctic_route_table_fill(table, niu->node_id, n);
	for (t = 0; t < 2; t++)
		for (node = 0; node < ARCTIC_S; node++)
			niu_write(niu, ARCTIC_ROUTE_OFFSET(t, node),
				  node < n ? table[t * n + node] : 0);
	kfree(table);
	niu->routes_loaded = true;
}

static bool niu_link_up(struct arctic_niu *niu)
{
	u32 status = niu_read(niu, A_NIU_LINK_STATUS);

	return (status & R_NIU_LINK_STATUS_UP_MASK) &&
	       niu_read(niu, A_NIU_NUM_NODES) > 0;
}

static int niu_wait_link(struct arctic_niu *niu, unsigned int timeout_ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	u32 status, info;

	while (!niu_link_up(niu)) {
		if (time_after(jiffies, deadline)) {
			status = niu_read(niu, A_NIU_LINK_STATUS);
			info = niu_read(niu, A_NIU_ERROR_INFO);
			if (status & R_NIU_LINK_STATUS_REJECTED_MASK)
				dev_err(&niu->pdev->dev,
					"switch rejected node %u (reason %u)\n",
					niu_read(niu, A_NIU_NODE_ID),
					ARCTIC_FIELD_GET(NIU_ERROR_INFO, DETAIL,
							 info));
			return -ENOLINK;
		}
		msleep(20);
	}
	niu->node_id = niu_read(niu, A_NIU_NODE_ID);
	niu->num_nodes = min_t(u32, niu_read(niu, A_NIU_NUM_NODES), ARCTIC_S);
	return 0;
}

/* Load the routes if probe could not; called with niu->lock held. */
static int niu_ensure_routes(struct arctic_niu *niu)
{
	int ret;

	if (niu->routes_loaded)
		return 0;
	ret = niu_wait_link(niu, 0);
	if (ret)
		return ret;
	ret = niu_tx_stop(niu);
	if (ret)
		return ret;
	niu_load_routes(niu);
	niu_datapaths_start(niu);
	return niu->routes_loaded ? 0 : -ENOMEM;
}

/* ---------------------------------------------------------------------
 * dMPI raw mode (seed 002 sections 2.3, 4.1.2, 6.1): both datapaths OFF,
 * RxCtrl.RAW set, and endpoint 0's owner moves raw packets through the
 * FIFO access points of its user page.
 */

/*
 * Bound on the words a drain reads: the FIFOs hold a few packets each
 * (programming guide 11.2), far fewer than a queue of the longest packets
 * with their CRC trailers.
 */
#define ARCTIC_RAW_DRAIN_MAX_WORDS \
	(ARCTIC_N * (ARCTIC_MAX_PACKET_WORDS + ARCTIC_CRC_SIZE / 4))

/*
 * Read out and drop what is left in both raw receive FIFOs, with RxCtrl
 * already written 0 so that nothing more arrives.  A FIFO reads empty only
 * once the last word of its last packet is gone, so popping word by word
 * until then also finishes a packet the process left half read.
 */
static int niu_raw_drain(struct arctic_niu *niu, u32 *discarded)
{
	static const struct {
		u32 empty;		/* USER_RX_STATUS bit */
		unsigned int fifo;	/* its access point */
	} fifos[] = {
		{ R_USER_RX_STATUS_HI_EMPTY_MASK, A_USER_HI_RX_FIFO },
		{ R_USER_RX_STATUS_LO_EMPTY_MASK, A_USER_LO_RX_FIFO },
	};
	unsigned int i;

	*discarded = 0;
	for (i = 0; i < ARRAY_SIZE(fifos); i++) {
		while (!(readl(niu->user + A_USER_RX_STATUS) &
			 fifos[i].empty)) {
			if (*discarded == ARCTIC_RAW_DRAIN_MAX_WORDS) {
				dev_err(&niu->pdev->dev,
					"raw receive FIFO does not empty\n");
				return -EIO;
			}
			readl(niu->user + fifos[i].fifo);
			(*discarded)++;
		}
	}
	return 0;
}

/* Called with niu->lock held, by endpoint 0's owner. */
static int niu_raw_enter(struct arctic_niu *niu)
{
	unsigned int e;
	int ret;

	if (niu->raw_mode)
		return 0;
	for (e = 1; e < niu->num_endpoints; e++)
		if (niu->ep[e].in_use)
			return -EBUSY;
	ret = niu_tx_stop(niu);
	if (ret) {
		/* Stay in MPI mode rather than half switched. */
		niu_datapaths_start(niu);
		return ret;
	}
	niu_write(niu, A_NIU_RX_CTRL, R_NIU_CTRL_RAW_MASK);
	niu->raw_mode = true;
	return niu_check_errors(niu, "raw mode on");
}

/*
 * Back to MPI mode, with niu->lock held.  The packets left in the receive
 * FIFOs were acknowledged to their senders: they are lost, and @discarded
 * says how many words they had.  Errors the device latched meanwhile are
 * most likely the raw program's own (a malformed packet): logged only.
 */
static int niu_raw_leave(struct arctic_niu *niu, u32 *discarded)
{
	int ret;

	*discarded = 0;
	if (!niu->raw_mode)
		return 0;
	niu_write(niu, A_NIU_RX_CTRL, 0);
	ret = niu_raw_drain(niu, discarded);
	if (*discarded)
		dev_info(&niu->pdev->dev,
			 "raw mode off: %u unread words dropped\n", *discarded);
	niu->raw_mode = false;
	niu_datapaths_start(niu);
	niu_check_errors(niu, "raw mode off");
	return ret;
}

/* ---------------------------------------------------------------------
 * The character device: one endpoint per open file.
 */

static struct arctic_niu *file_to_niu(struct file *file)
{
	return container_of(file->private_data, struct arctic_niu, misc);
}

/*
 * Only after a successful clear: until then the device may still write
 * DMA data into the window.
 */
static void niu_free_dma_window(struct arctic_niu_endpoint *ep)
{
	if (!ep->dma_window)
		return;
	dma_free_coherent(&ep->niu->pdev->dev, ARCTIC_NIU_DMA_WINDOW_SIZE,
			  ep->dma_window, ep->dma_window_dma);
	ep->dma_window = NULL;
}

/*
 * Whether the NIU polls endpoint @e's Tx queues, with niu->lock held.  An
 * endpoint nobody has open is not polled (nothing writes its slots; the
 * kernel's niuN rings for its own), so a guest that runs no program of
 * seed 002's kind has its NIU read its queues only when a doorbell asks.
 */
static void niu_tx_poll(struct arctic_niu *niu, unsigned int e, bool on)
{
	if (on)
		niu->tx_polled |= BIT(e);
	else
		niu->tx_polled &= ~BIT(e);
	niu_write(niu, A_NIU_TX_POLLED, niu->tx_polled);
}

static int arctic_niu_open(struct inode *inode, struct file *file)
{
	struct arctic_niu *niu = file_to_niu(file);
	struct arctic_niu_endpoint *ep = NULL;
	unsigned int e;
	int ret;

	mutex_lock(&niu->lock);
	/* Raw mode has the datapaths OFF: no other endpoint would be served. */
	ret = -EBUSY;
	if (niu->raw_mode)
		goto unlock;
	ret = niu_ensure_routes(niu);
	if (ret)
		goto unlock;
	for (e = 0; e < niu->user_endpoints; e++) {
		if (!niu->ep[e].in_use) {
			ep = &niu->ep[e];
			break;
		}
	}
	if (!ep) {
		ret = -EBUSY;
		goto unlock;
	}
	if (ep->needs_clear) {
		ret = niu_endpoint_clear(ep);
		if (ret)
			goto unlock;
		ep->needs_clear = false;
		niu_free_dma_window(ep);
	}
	ep->in_use = true;
	/* Seed 002's program writes slots and nothing else, until it says. */
	niu_tx_poll(niu, ep->index, true);
	/* From here on the file stands for its endpoint. */
	file->private_data = ep;
unlock:
	mutex_unlock(&niu->lock);
	return ret;
}

static int arctic_niu_release(struct inode *inode, struct file *file)
{
	struct arctic_niu_endpoint *ep = file->private_data;
	u32 discarded;

	mutex_lock(&ep->niu->lock);
	/* Only endpoint 0's owner can have put the NIU in raw mode. */
	if (ep->index == 0)
		niu_raw_leave(ep->niu, &discarded);
	niu_tx_queues_drain(ep);
	/*
	 * Clear now rather than at the next open: messages that peers send
	 * to a program which has not opened its endpoint yet must survive.
	 */
	ep->needs_clear = niu_endpoint_clear(ep) != 0;
	if (!ep->needs_clear)
		niu_free_dma_window(ep);
	ep->in_use = false;
	niu_tx_poll(ep->niu, ep->index, false);
	mutex_unlock(&ep->niu->lock);
	return 0;
}

static unsigned long coherent_pfn(void *cpu_addr)
{
	if (is_vmalloc_addr(cpu_addr))
		return vmalloc_to_pfn(cpu_addr);
	return PHYS_PFN(virt_to_phys(cpu_addr));
}

/* Map @size bytes of a coherent region at @uaddr, page by page. */
static int map_coherent(struct vm_area_struct *vma, unsigned long uaddr,
			void *cpu_addr, unsigned long size)
{
	unsigned long done;
	int ret;

	for (done = 0; done < size; done += PAGE_SIZE) {
		ret = remap_pfn_range(vma, uaddr + done,
				      coherent_pfn(cpu_addr + done), PAGE_SIZE,
				      vma->vm_page_prot);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * The queue part of the view (offsets below ARCTIC_NIU_MMAP_QUEUES_SIZE +
 * DMA_TX_SIZE) may be mapped whole or in part; each page comes from the
 * Tx or Rx region as seed 002 section 2.1.1 orders them.
 */
static int mmap_queues(struct arctic_niu_endpoint *ep,
		       struct vm_area_struct *vma, unsigned long offset)
{
	static const struct {
		unsigned long view;	/* offset in the user's view */
		bool rx;		/* from the Rx region, else Tx */
		unsigned long region;	/* offset in that region */
	} parts[] = {
		{ ARCTIC_MMAP_HI_TX, false, ARCTIC_HI_TX_OFFSET },
		{ ARCTIC_MMAP_LO_TX, false, ARCTIC_LO_TX_OFFSET },
		{ ARCTIC_MMAP_HI_RX, true, ARCTIC_HI_RX_OFFSET },
		{ ARCTIC_MMAP_LO_RX, true, ARCTIC_LO_RX_OFFSET },
		{ ARCTIC_MMAP_DMA_TX, false, ARCTIC_DMA_TX_OFFSET },
	};
	unsigned long end = offset + vma->vm_end - vma->vm_start;
	unsigned long from, to;
	unsigned int i;
	void *region;
	int ret;

	for (i = 0; i < ARRAY_SIZE(parts); i++) {
		from = max(offset, parts[i].view);
		to = min(end, parts[i].view + ARCTIC_QUEUE_SIZE);
		if (from >= to)
			continue;
		region = parts[i].rx ? ep->rx_region : ep->tx_region;
		ret = map_coherent(vma, vma->vm_start + from - offset,
				   region + parts[i].region + from -
				   parts[i].view, to - from);
		if (ret)
			return ret;
	}
	return 0;
}

static int arctic_niu_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct arctic_niu_endpoint *ep = file->private_data;
	unsigned long size = vma->vm_end - vma->vm_start;
	unsigned long offset = vma->vm_pgoff << PAGE_SHIFT;
	phys_addr_t page;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (vma->vm_pgoff > (ULONG_MAX >> PAGE_SHIFT))
		return -EINVAL;
	vma->vm_flags |= VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP;

	if (offset < ARCTIC_NIU_MMAP_DMA_TX + ARCTIC_NIU_MMAP_DMA_TX_SIZE) {
		if (size > ARCTIC_NIU_MMAP_DMA_TX +
			   ARCTIC_NIU_MMAP_DMA_TX_SIZE - offset)
			return -EINVAL;
		return mmap_queues(ep, vma, offset);
	}
	if (offset == ARCTIC_NIU_MMAP_USER_PAGE) {
		if (size != ARCTIC_NIU_MMAP_USER_PAGE_SIZE)
			return -EINVAL;
		page = ep->niu->user_bar_phys +
		       (phys_addr_t)ep->index * ARCTIC_USER_PAGE_SIZE;
		vma->vm_flags |= VM_IO;
		vma->vm_page_prot = pgprot_noncached(vma->vm_page_prot);
		return io_remap_pfn_range(vma, vma->vm_start, PHYS_PFN(page),
					  size, vma->vm_page_prot);
	}
	if (offset == ARCTIC_NIU_MMAP_DMA_WINDOW) {
		if (!ep->dma_window || size != ARCTIC_NIU_DMA_WINDOW_SIZE)
			return -EINVAL;
		return map_coherent(vma, vma->vm_start, ep->dma_window, size);
	}
	return -EINVAL;
}

static_assert(ARCTIC_NUM_COUNTERS <= ARCTIC_NIU_MAX_COUNTERS);

static void niu_read_counters(struct arctic_niu *niu,
			      struct arctic_niu_counters *counters)
{
	unsigned int c;

	memset(counters, 0, sizeof(*counters));
	counters->num_counters = ARCTIC_NUM_COUNTERS;
	counters->error_cause = niu_read(niu, A_NIU_ERROR_CAUSE);
	counters->error_info = niu_read(niu, A_NIU_ERROR_INFO);
	for (c = 0; c < ARCTIC_NUM_COUNTERS; c++)
		counters->counter[c] = niu_read(niu, ARCTIC_COUNTER_OFFSET(c));
}

static long ioctl_node_info(struct arctic_niu *niu, void __user *arg)
{
	struct arctic_niu_node_info info = {
		.node_id = niu_read(niu, A_NIU_NODE_ID),
		.num_nodes = niu_read(niu, A_NIU_NUM_NODES),
		.net_levels = niu_read(niu, A_NIU_NET_LEVELS),
		.link_status = niu_read(niu, A_NIU_LINK_STATUS),
		.endpoints = niu->user_endpoints,
	};

	return copy_to_user(arg, &info, sizeof(info)) ? -EFAULT : 0;
}

static long ioctl_endpoint_info(struct arctic_niu_endpoint *ep,
				void __user *arg)
{
	struct arctic_niu_endpoint_info info = {
		.endpoint = ep->index,
		.slots = ARCTIC_N,
		.slot_size = ARCTIC_SLOT_SIZE,
		.queues_offset = ARCTIC_NIU_MMAP_QUEUES,
		.queues_size = ARCTIC_NIU_MMAP_QUEUES_SIZE,
		.dma_tx_offset = ARCTIC_NIU_MMAP_DMA_TX,
		.dma_tx_size = ARCTIC_NIU_MMAP_DMA_TX_SIZE,
		.user_page_offset = ARCTIC_NIU_MMAP_USER_PAGE,
		.user_page_size = ARCTIC_NIU_MMAP_USER_PAGE_SIZE,
	};

	return copy_to_user(arg, &info, sizeof(info)) ? -EFAULT : 0;
}

static long ioctl_route(struct arctic_niu *niu, unsigned int cmd,
			void __user *arg)
{
	struct arctic_niu_route route;
	long ret;

	if (copy_from_user(&route, arg, sizeof(route)))
		return -EFAULT;
	if (route.reserved || route.flags & ~ARCTIC_NIU_ROUTE_DEFAULT ||
	    route.table > ARCTIC_ROUTE_TABLE_LOW || route.node >= ARCTIC_S)
		return -EINVAL;

	if (cmd == ARCTIC_NIU_IOC_GET_ROUTE) {
		if (route.flags)
			return -EINVAL;
		route.entry = niu_read(niu, ARCTIC_ROUTE_OFFSET(route.table,
								route.node));
		return copy_to_user(arg, &route, sizeof(route)) ? -EFAULT : 0;
	}

	if (!capable(CAP_NET_ADMIN))
		return -EPERM;
	mutex_lock(&niu->lock);
	/* Loading the entry turns the datapaths on again. */
	ret = -EBUSY;
	if (niu->raw_mode)
		goto unlock;
	if (route.flags & ARCTIC_NIU_ROUTE_DEFAULT) {
		ret = -ENOLINK;
		if (route.node >= niu->num_nodes)
			goto unlock;
		route.entry = arctic_route_entry(niu->node_id, route.node,
						 route.table ==
						 ARCTIC_ROUTE_TABLE_HIGH,
						 false);
	}
	ret = niu_tx_stop(niu);
	if (ret)
		goto unlock;
	niu_write(niu, ARCTIC_ROUTE_OFFSET(route.table, route.node),
		  route.entry);
	niu_datapaths_start(niu);
	ret = niu_check_errors(niu, "route override");
unlock:
	mutex_unlock(&niu->lock);
	return ret;
}

/*
 * The window is 4 MiB of coherent memory: the DMA API returns it aligned
 * to its size order, which is the NIU's 4 MiB base alignment.  Loading it
 * stops both datapaths for a moment, as the device requires.
 */
static long ioctl_dma_window(struct arctic_niu_endpoint *ep, void __user *arg)
{
	struct arctic_niu *niu = ep->niu;
	struct device *dev = &niu->pdev->dev;
	struct arctic_niu_dma_window window;
	dma_addr_t window_dma;
	void *buf;
	long ret;

	if (copy_from_user(&window, arg, sizeof(window)))
		return -EFAULT;
	if (window.reserved[0] || window.reserved[1] ||
	    window.size != ARCTIC_NIU_DMA_WINDOW_SIZE ||
	    !IS_ALIGNED(window.base_vir, ARCTIC_NIU_DMA_WINDOW_SIZE))
		return -EINVAL;

	mutex_lock(&niu->lock);
	/* Loading the window turns the datapaths on again. */
	ret = -EBUSY;
	if (ep->dma_window || niu->raw_mode)
		goto unlock;
	ret = -ENOMEM;
	buf = dma_alloc_coherent(dev, ARCTIC_NIU_DMA_WINDOW_SIZE, &window_dma,
				 GFP_KERNEL);
	if (!buf)
		goto unlock;
	if (!IS_ALIGNED(window_dma, ARCTIC_NIU_DMA_WINDOW_SIZE)) {
		dev_err(dev, "endpoint %u: DMA window misaligned\n",
			ep->index);
		goto free_buf;
	}
	memset(buf, 0, ARCTIC_NIU_DMA_WINDOW_SIZE);
	ret = niu_tx_stop(niu);
	if (ret)
		goto free_buf;
	niu_write(niu, A_NIU_RX_CTRL, 0);
	niu_dma_window_load(ep, window_dma, window.base_vir,
			    ARCTIC_NIU_DMA_WINDOW_SIZE - 1);
	niu_datapaths_start(niu);
	/* The device may point at it now: only a clear may free it. */
	ep->dma_window = buf;
	ep->dma_window_dma = window_dma;
	ret = niu_check_errors(niu, "DMA window");
	mutex_unlock(&niu->lock);
	if (ret)
		return ret;

	window.mmap_offset = ARCTIC_NIU_MMAP_DMA_WINDOW;
	return copy_to_user(arg, &window, sizeof(window)) ? -EFAULT : 0;

free_buf:
	dma_free_coherent(dev, ARCTIC_NIU_DMA_WINDOW_SIZE, buf, window_dma);
unlock:
	mutex_unlock(&niu->lock);
	return ret;
}

/* ARCTIC_NIU_IOC_KEEP_UNREAD: see the uapi header. */
static long ioctl_keep_unread(struct arctic_niu_endpoint *ep,
			      void __user *arg)
{
	struct arctic_niu_keep_unread req;
	unsigned int i;
	void *slots = NULL;

	if (copy_from_user(&req, arg, sizeof(req)))
		return -EFAULT;
	if (req.priority > 1 || req.count > ARCTIC_N || req.flags ||
	    req.reserved)
		return -EINVAL;
	if (req.count) {
		slots = memdup_user(u64_to_user_ptr(req.slots),
				    (size_t)req.count * ARCTIC_SLOT_SIZE);
		if (IS_ERR(slots))
			return PTR_ERR(slots);
	}
	for (i = 0; i < req.count; i++) {
		const __le32 *hdr = slots + (size_t)i * ARCTIC_SLOT_SIZE;

		if (!(le32_to_cpu(*hdr) & ARCTIC_MPI_VALID)) {
			kfree(slots);
			return -EINVAL;
		}
	}
	mutex_lock(&ep->niu->lock);
	niu_kept_free(ep, req.priority);
	ep->kept[req.priority] = slots;
	ep->kept_count[req.priority] = req.count;
	mutex_unlock(&ep->niu->lock);
	return 0;
}

static long ioctl_raw_mode(struct arctic_niu_endpoint *ep, void __user *arg)
{
	struct arctic_niu *niu = ep->niu;
	struct arctic_niu_raw_mode req;
	long ret;

	if (copy_from_user(&req, arg, sizeof(req)))
		return -EFAULT;
	if (req.flags || req.reserved || req.mode > ARCTIC_NIU_MODE_RAW)
		return -EINVAL;
	/* The FIFO access points are in endpoint 0's user page only. */
	if (ep->index != 0)
		return -EACCES;

	mutex_lock(&niu->lock);
	if (req.mode == ARCTIC_NIU_MODE_RAW) {
		req.discarded = 0;
		ret = niu_raw_enter(niu);
	} else {
		ret = niu_raw_leave(niu, &req.discarded);
	}
	mutex_unlock(&niu->lock);
	if (ret)
		return ret;
	return copy_to_user(arg, &req, sizeof(req)) ? -EFAULT : 0;
}

static long ioctl_tx_poll(struct arctic_niu_endpoint *ep, u32 __user *uarg)
{
	u32 poll;

	if (get_user(poll, uarg))
		return -EFAULT;
	if (poll > 1)
		return -EINVAL;
	mutex_lock(&ep->niu->lock);
	niu_tx_poll(ep->niu, ep->index, poll);
	mutex_unlock(&ep->niu->lock);
	return 0;
}

static long arctic_niu_ioctl(struct file *file, unsigned int cmd,
			     unsigned long arg)
{
	struct arctic_niu_endpoint *ep = file->private_data;
	struct arctic_niu *niu = ep->niu;
	void __user *uarg = (void __user *)arg;
	struct arctic_niu_counters counters;

	switch (cmd) {
	case ARCTIC_NIU_IOC_NODE_INFO:
		return ioctl_node_info(niu, uarg);
	case ARCTIC_NIU_IOC_ENDPOINT_INFO:
		return ioctl_endpoint_info(ep, uarg);
	case ARCTIC_NIU_IOC_GET_ROUTE:
	case ARCTIC_NIU_IOC_SET_ROUTE:
		return ioctl_route(niu, cmd, uarg);
	case ARCTIC_NIU_IOC_DMA_WINDOW:
		return ioctl_dma_window(ep, uarg);
	case ARCTIC_NIU_IOC_RAW_MODE:
		return ioctl_raw_mode(ep, uarg);
	case ARCTIC_NIU_IOC_KEEP_UNREAD:
		return ioctl_keep_unread(ep, uarg);
	case ARCTIC_NIU_IOC_TX_POLL:
		return ioctl_tx_poll(ep, uarg);
	case ARCTIC_NIU_IOC_COUNTERS:
		niu_read_counters(niu, &counters);
		return copy_to_user(uarg, &counters, sizeof(counters)) ?
		       -EFAULT : 0;
	default:
		return -ENOTTY;
	}
}

/* ---------------------------------------------------------------------
 * niuN: IPv4 and IPv6 over NIU messages (docs/guest.md, "IP over the
 * NIU"; the framing is arctic_ipnet.h).  The kernel keeps the NIU's last
 * endpoint for it.  Packets go out through its LoTx, one message per 84
 * bytes, and come in on its LoRx; its HiRx takes the NIU's notices (a
 * peer that stopped answering) and whatever else other nodes send there,
 * which is dropped and counted.  There is no link-layer header and no
 * neighbour discovery: the next hop's address names the node (IPv4: the
 * host part within niuN's subnet, minus 1; IPv6: the low 32 bits, minus
 * 1), so nothing is ever broadcast.
 */

/* Counters of the interface, in ethtool -S order. */
enum niu_ipnet_stat {
	IPNET_RX_PACKETS,
	IPNET_RX_BYTES,
	IPNET_RX_MESSAGES,
	IPNET_RX_NOMEM,
	IPNET_RX_NOT_IP,
	IPNET_RX_DOWN,
	IPNET_RX_BAD_TYPE,
	IPNET_RX_TOO_LONG,
	IPNET_RX_BAD_SIZE,
	IPNET_RX_UNEXPECTED,
	IPNET_RX_INCOMPLETE,
	IPNET_RX_STALE_HEADERS,
	IPNET_RX_NUM,
	IPNET_TX_PACKETS = IPNET_RX_NUM,
	IPNET_TX_BYTES,
	IPNET_TX_MESSAGES,
	IPNET_TX_NO_NODE,
	IPNET_TX_NOT_UNICAST,
	IPNET_TX_QUEUE_FULL,
	IPNET_TX_PEER_DEAD,
	IPNET_TX_NIU_NOTICES,
	IPNET_NUM_STATS,
};

static const char niu_ipnet_stat_names[IPNET_NUM_STATS][ETH_GSTRING_LEN] = {
	[IPNET_RX_PACKETS] = "rx_packets",
	[IPNET_RX_BYTES] = "rx_bytes",
	[IPNET_RX_MESSAGES] = "rx_messages",
	[IPNET_RX_NOMEM] = "rx_nomem",
	[IPNET_RX_NOT_IP] = "rx_not_ip",
	[IPNET_RX_DOWN] = "rx_while_down",
	[IPNET_RX_BAD_TYPE] = "rx_foreign",
	[IPNET_RX_TOO_LONG] = "rx_too_long",
	[IPNET_RX_BAD_SIZE] = "rx_bad_size",
	[IPNET_RX_UNEXPECTED] = "rx_unexpected_fragment",
	[IPNET_RX_INCOMPLETE] = "rx_incomplete",
	[IPNET_RX_STALE_HEADERS] = "rx_stale_headers",
	[IPNET_TX_PACKETS] = "tx_packets",
	[IPNET_TX_BYTES] = "tx_bytes",
	[IPNET_TX_MESSAGES] = "tx_messages",
	[IPNET_TX_NO_NODE] = "tx_no_node",
	[IPNET_TX_NOT_UNICAST] = "tx_not_unicast",
	[IPNET_TX_QUEUE_FULL] = "tx_queue_full",
	[IPNET_TX_PEER_DEAD] = "tx_peer_dead",
	[IPNET_TX_NIU_NOTICES] = "tx_niu_notices",
};

/* The NIU's own counters follow, as niu_<counter name>, then its node. */
#define IPNET_ETHTOOL_STATS (IPNET_NUM_STATS + ARCTIC_NUM_COUNTERS + 1)

struct niu_ipnet {
	struct arctic_niu *niu;
	struct net_device *dev;
	struct arctic_niu_endpoint *ep;
	void __iomem *user_page;
	struct napi_struct napi;
	struct delayed_work link_work;
	/* Transmit side, under the device's transmit lock. */
	unsigned int tx_head;		/* the LoTx slot written next */
	bool tx_unrung;			/* slots written since the doorbell */
	u8 tx_seq[ARCTIC_S];
	/* Receive side, in NAPI only. */
	unsigned int rx_tail[ARCTIC_NUM_RX_QUEUES];
	unsigned int rx_lap[ARCTIC_NUM_RX_QUEUES];
	struct arctic_ipnet_rx rx[ARCTIC_S];
	struct sk_buff *rx_skb[ARCTIC_S];
	/* [0, IPNET_RX_NUM) by NAPI, the rest by transmit */
	u64 stats[IPNET_NUM_STATS];
	struct u64_stats_sync rx_syncp, tx_syncp;
};

static void ipnet_count(struct niu_ipnet *ipn, enum niu_ipnet_stat stat,
			u64 n)
{
	struct u64_stats_sync *syncp = stat < IPNET_RX_NUM ? &ipn->rx_syncp :
				       &ipn->tx_syncp;

	u64_stats_update_begin(syncp);
	ipn->stats[stat] += n;
	u64_stats_update_end(syncp);
}

static void ipnet_read_stats(struct niu_ipnet *ipn, u64 *out)
{
	unsigned int start, i;

	do {
		start = u64_stats_fetch_begin(&ipn->rx_syncp);
		for (i = 0; i < IPNET_RX_NUM; i++)
			out[i] = ipn->stats[i];
	} while (u64_stats_fetch_retry(&ipn->rx_syncp, start));
	do {
		start = u64_stats_fetch_begin(&ipn->tx_syncp);
		for (i = IPNET_RX_NUM; i < IPNET_NUM_STATS; i++)
			out[i] = ipn->stats[i];
	} while (u64_stats_fetch_retry(&ipn->tx_syncp, start));
}

static void __iomem *ipnet_user_reg(struct niu_ipnet *ipn, unsigned int reg)
{
	return ipn->user_page + reg;
}

static struct arctic_mpi_slot *ipnet_slot(void *region, unsigned int queue,
					  unsigned int index)
{
	return region + queue + (size_t)index * ARCTIC_SLOT_SIZE;
}

/* ---- transmit ---- */

/*
 * What ipnet_dest_node() returns when the packet goes to no node:
 * multicast or broadcast (never sent: there is no broadcast on the fat
 * tree), or an address that names no node of the cluster.
 */
enum { IPNET_NOT_UNICAST = -1, IPNET_NO_NODE = -2 };

/*
 * The node whose kernel endpoint takes an IPv4 packet to next hop @nh:
 * its host part in the subnet of one of the interface's addresses, minus
 * 1 (10.77.0.1 is node 0 in 10.77.0.0/16).
 */
static int ipnet_node_v4(struct net_device *dev, __be32 nh)
{
	struct in_device *in_dev = __in_dev_get_rcu(dev);
	const struct in_ifaddr *ifa;
	u32 host;

	if (ipv4_is_multicast(nh) || ipv4_is_lbcast(nh))
		return IPNET_NOT_UNICAST;
	if (!in_dev)
		return IPNET_NO_NODE;
	in_dev_for_each_ifa_rcu(ifa, in_dev) {
		if ((ifa->ifa_local ^ nh) & ifa->ifa_mask)
			continue;
		host = ntohl(nh & ~ifa->ifa_mask);
		/* all ones is the subnet's broadcast, 0 the network */
		if (host == ntohl(~ifa->ifa_mask))
			return IPNET_NOT_UNICAST;
		return host >= 1 && host - 1 < ARCTIC_S ? host - 1 :
		       IPNET_NO_NODE;
	}
	return IPNET_NO_NODE;
}

/* IPv6: the low 32 bits of the next hop, minus 1 (fd77::1 is node 0). */
static int ipnet_node_v6(const struct in6_addr *nh)
{
	u32 host = ntohl(nh->s6_addr32[3]);

	if (ipv6_addr_is_multicast(nh))
		return IPNET_NOT_UNICAST;
	return host >= 1 && host - 1 < ARCTIC_S ? host - 1 : IPNET_NO_NODE;
}

/* The destination node of @skb, or IPNET_NOT_UNICAST or IPNET_NO_NODE. */
static int ipnet_dest_node(struct net_device *dev, struct sk_buff *skb)
{
	struct dst_entry *dst = skb_dst(skb);

	switch (skb->protocol) {
	case htons(ETH_P_IP): {
		__be32 nh;

		if (!pskb_network_may_pull(skb, sizeof(struct iphdr)))
			return IPNET_NO_NODE;
		nh = ip_hdr(skb)->daddr;
		if (dst)
			nh = rt_nexthop(skb_rtable(skb), nh);
		return ipnet_node_v4(dev, nh);
	}
	case htons(ETH_P_IPV6): {
		const struct in6_addr *nh;

		if (!pskb_network_may_pull(skb, sizeof(struct ipv6hdr)))
			return IPNET_NO_NODE;
		nh = &ipv6_hdr(skb)->daddr;
		if (dst)
			nh = rt6_nexthop(container_of(dst, struct rt6_info,
						      dst), nh);
		return ipnet_node_v6(nh);
	}
	}
	return IPNET_NO_NODE;
}

/* Are the @frags LoTx slots from tx_head on free (the NIU took them)? */
static bool ipnet_tx_room(struct niu_ipnet *ipn, unsigned int frags)
{
	/* The NIU takes slots in order: the last one free means all are. */
	unsigned int last = (ipn->tx_head + frags - 1) % ARCTIC_N;

	return !niu_slot_valid(ipn->ep->tx_region + ARCTIC_LO_TX_OFFSET, last);
}

/*
 * Stop the queue unless the largest packet fits; the one-shot transmit
 * interrupt wakes it once the NIU took slots.  The queue is looked at
 * again after the arming, which raises nothing for slots freed before.
 */
static void ipnet_tx_maybe_stop(struct niu_ipnet *ipn)
{
	unsigned int frags = arctic_ipnet_frags(ipn->dev->mtu);

	if (ipnet_tx_room(ipn, frags))
		return;
	netif_stop_queue(ipn->dev);
	ipnet_count(ipn, IPNET_TX_QUEUE_FULL, 1);
	writel(R_USER_IRQ_ARM_TX_MASK, ipnet_user_reg(ipn, A_USER_IRQ_ARM));
	/* The arming must reach the device before the slots are read. */
	mb();
	if (ipnet_tx_room(ipn, frags))
		netif_start_queue(ipn->dev);
}

/* Write one fragment into the next LoTx slot; the header goes last. */
static void ipnet_tx_fragment(struct niu_ipnet *ipn, struct sk_buff *skb,
			      unsigned int node, unsigned int frag)
{
	struct arctic_mpi_slot *slot = ipnet_slot(ipn->ep->tx_region,
						  ARCTIC_LO_TX_OFFSET,
						  ipn->tx_head);
	unsigned int bytes = arctic_ipnet_frag_bytes(skb->len, frag);
	unsigned int at = frag * ARCTIC_IPNET_CHUNK;
	unsigned int words = arctic_ipnet_payload_words(bytes);
	u32 word = arctic_ipnet_word(skb->len, ipn->tx_seq[node], frag);
	u32 header;

	slot->command[0] = (__force u32)cpu_to_le32(word);
	slot->command[1] = 0;
	/* A short last fragment's tail words are sent as they are. */
	skb_copy_bits(skb, at, &slot->command[1], min(bytes, 4u));
	if (bytes > 4)
		skb_copy_bits(skb, at + 4, slot->payload, bytes - 4);
	header = ARCTIC_MPI_VALID |
		 ARCTIC_FIELD_PREP(MPI_HEADER, DEST, node) |
		 ARCTIC_FIELD_PREP(MPI_HEADER, ENDPOINT,
				   ipn->niu->user_endpoints) |
		 ARCTIC_FIELD_PREP(MPI_HEADER, TYPE, ARCTIC_IPNET_TYPE) |
		 ARCTIC_FIELD_PREP(MPI_HEADER, MODE, ARCTIC_MODE_MPI) |
		 ARCTIC_FIELD_PREP(MPI_HEADER, LENGTH, words);
	/* The NIU must see the body before the valid header. */
	dma_wmb();
	WRITE_ONCE(slot->header, (__force u32)cpu_to_le32(header));
	ipn->tx_head = (ipn->tx_head + 1) % ARCTIC_N;
}

/* Ring LoTx's doorbell if slots were written since it last rang. */
static void ipnet_tx_doorbell(struct niu_ipnet *ipn)
{
	if (!ipn->tx_unrung)
		return;
	ipn->tx_unrung = false;
	/* The slots before the doorbell. */
	wmb();
	writel(R_USER_DOORBELL_LO_TX_MASK, ipnet_user_reg(ipn, A_USER_DOORBELL));
}

static netdev_tx_t niu_ipnet_xmit(struct sk_buff *skb, struct net_device *dev)
{
	struct niu_ipnet *ipn = netdev_priv(dev);
	unsigned int frags, frag;
	int node;

	node = ipnet_dest_node(dev, skb);
	if (node == IPNET_NOT_UNICAST) {
		ipnet_count(ipn, IPNET_TX_NOT_UNICAST, 1);
		goto drop;
	}
	/* The stack never gives more than the MTU; a bad frame is dropped. */
	if (node < 0 || (u32)node >= ipn->niu->num_nodes || skb->len == 0 ||
	    skb->len > ARCTIC_IPNET_MAX_MTU) {
		ipnet_count(ipn, IPNET_TX_NO_NODE, 1);
		goto drop;
	}
	frags = arctic_ipnet_frags(skb->len);
	if (!ipnet_tx_room(ipn, frags)) {
		/* Only after an MTU change: the queue stops for the largest. */
		ipnet_tx_maybe_stop(ipn);
		ipnet_tx_doorbell(ipn);
		return NETDEV_TX_BUSY;
	}
	for (frag = 0; frag < frags; frag++)
		ipnet_tx_fragment(ipn, skb, node, frag);
	ipn->tx_seq[node]++;
	ipn->tx_unrung = true;
	u64_stats_update_begin(&ipn->tx_syncp);
	ipn->stats[IPNET_TX_PACKETS]++;
	ipn->stats[IPNET_TX_BYTES] += skb->len;
	ipn->stats[IPNET_TX_MESSAGES] += frags;
	u64_stats_update_end(&ipn->tx_syncp);
	dev_consume_skb_any(skb);
	ipnet_tx_maybe_stop(ipn);
	goto out;

drop:
	dev_kfree_skb_any(skb);
out:
	/*
	 * One doorbell for a batch: at its last packet, whether that one was
	 * sent or dropped, or when the queue stops.
	 */
	if (!netdev_xmit_more() || netif_queue_stopped(dev))
		ipnet_tx_doorbell(ipn);
	return NETDEV_TX_OK;
}

/*
 * The transmit vector: the NIU took a LoTx slot.  It fires once, at the
 * first slot taken after the arming: until the largest packet fits, arm
 * it again (and look again, for a slot taken before the arming).
 */
static void niu_ipnet_tx_irq(struct niu_ipnet *ipn)
{
	unsigned int frags = arctic_ipnet_frags(ipn->dev->mtu);

	if (!netif_queue_stopped(ipn->dev))
		return;
	if (!ipnet_tx_room(ipn, frags)) {
		writel(R_USER_IRQ_ARM_TX_MASK,
		       ipnet_user_reg(ipn, A_USER_IRQ_ARM));
		/* As in ipnet_tx_maybe_stop(). */
		mb();
		if (!ipnet_tx_room(ipn, frags))
			return;
	}
	netif_wake_queue(ipn->dev);
}

/* ---- receive ---- */

/* A notice from our own NIU (MODE 1, in HiRx): count it. */
static void ipnet_rx_notice(struct niu_ipnet *ipn,
			    const struct arctic_mpi_slot *slot)
{
	u32 why = le32_to_cpu((__force __le32)READ_ONCE(slot->command[1]));

	if (why == ARCTIC_NOTICE_PEER_DEAD) {
		ipnet_count(ipn, IPNET_TX_PEER_DEAD, 1);
		net_warn_ratelimited("%s: node %u stopped answering; packets to it were dropped\n",
				     ipn->dev->name,
				     le32_to_cpu((__force __le32)
						 READ_ONCE(slot->command[0])));
	} else {
		ipnet_count(ipn, IPNET_TX_NIU_NOTICES, 1);
	}
}

static void ipnet_rx_abandon(struct niu_ipnet *ipn, unsigned int src)
{
	if (!ipn->rx_skb[src])
		return;
	dev_kfree_skb_any(ipn->rx_skb[src]);
	ipn->rx_skb[src] = NULL;
}

static void ipnet_rx_deliver(struct niu_ipnet *ipn, unsigned int src)
{
	struct sk_buff *skb = ipn->rx_skb[src];

	ipn->rx_skb[src] = NULL;
	switch (skb->data[0] >> 4) {
	case 4:
		skb->protocol = htons(ETH_P_IP);
		break;
	case 6:
		skb->protocol = htons(ETH_P_IPV6);
		break;
	default:
		ipnet_count(ipn, IPNET_RX_NOT_IP, 1);
		dev_kfree_skb_any(skb);
		return;
	}
	u64_stats_update_begin(&ipn->rx_syncp);
	ipn->stats[IPNET_RX_PACKETS]++;
	ipn->stats[IPNET_RX_BYTES] += skb->len;
	u64_stats_update_end(&ipn->rx_syncp);
	skb_reset_network_header(skb);
	skb->pkt_type = PACKET_HOST;
	napi_gro_receive(&ipn->napi, skb);
}

/* One message from LoRx (@header read, the body not yet). */
static void ipnet_rx_message(struct niu_ipnet *ipn, u32 header,
			     const struct arctic_mpi_slot *slot)
{
	static const enum niu_ipnet_stat why[] = {
		[ARCTIC_IPNET_TOO_LONG] = IPNET_RX_TOO_LONG,
		[ARCTIC_IPNET_BAD_SIZE] = IPNET_RX_BAD_SIZE,
		[ARCTIC_IPNET_UNEXPECTED] = IPNET_RX_UNEXPECTED,
	};
	unsigned int src = ARCTIC_FIELD_GET(MPI_HEADER, DEST, header);
	unsigned int words = ARCTIC_FIELD_GET(MPI_HEADER, LENGTH, header);
	unsigned int offset = 0, bytes = 0;
	enum arctic_ipnet_verdict verdict;
	bool abandoned;
	u32 word;

	ipnet_count(ipn, IPNET_RX_MESSAGES, 1);
	if (ARCTIC_FIELD_GET(MPI_HEADER, TYPE, header) != ARCTIC_IPNET_TYPE) {
		ipnet_count(ipn, IPNET_RX_BAD_TYPE, 1);
		return;
	}
	word = le32_to_cpu((__force __le32)READ_ONCE(slot->command[0]));
	verdict = arctic_ipnet_rx_step(&ipn->rx[src], word, words,
				       ARCTIC_IPNET_MAX_MTU, &abandoned,
				       &offset, &bytes);
	if (abandoned || (verdict != ARCTIC_IPNET_MORE &&
			  verdict != ARCTIC_IPNET_DONE)) {
		if (ipn->rx_skb[src])
			ipnet_count(ipn, IPNET_RX_INCOMPLETE, 1);
		ipnet_rx_abandon(ipn, src);
	}
	if (verdict != ARCTIC_IPNET_MORE && verdict != ARCTIC_IPNET_DONE) {
		ipnet_count(ipn, why[verdict], 1);
		return;
	}
	if (offset == 0) {
		ipn->rx_skb[src] = napi_alloc_skb(&ipn->napi,
						  ipn->rx[src].len);
		if (!ipn->rx_skb[src]) {
			ipn->rx[src].active = false;
			ipnet_count(ipn, IPNET_RX_NOMEM, 1);
			return;
		}
	}
	if (!ipn->rx_skb[src])
		return;		/* the first fragment found no memory */
	memcpy(skb_put(ipn->rx_skb[src], min(bytes, 4u)), &slot->command[1],
	       min(bytes, 4u));
	if (bytes > 4)
		memcpy(skb_put(ipn->rx_skb[src], bytes - 4), slot->payload,
		       bytes - 4);
	if (verdict == ARCTIC_IPNET_DONE)
		ipnet_rx_deliver(ipn, src);
}

/*
 * Take the next message of receive queue @q, as libniu does (seed 002
 * §3.2.2 with the LAP check): false if there is none.
 */
static bool ipnet_rx_take(struct niu_ipnet *ipn, unsigned int q)
{
	static const unsigned int offset[] = {
		[ARCTIC_RXQ_HI] = ARCTIC_HI_RX_OFFSET,
		[ARCTIC_RXQ_LO] = ARCTIC_LO_RX_OFFSET,
	};
	struct arctic_mpi_slot *slot = ipnet_slot(ipn->ep->rx_region,
						  offset[q], ipn->rx_tail[q]);
	u32 header = le32_to_cpu((__force __le32)READ_ONCE(slot->header));

	if (!(header & ARCTIC_MPI_VALID))
		return false;
	if (ARCTIC_FIELD_GET(MPI_HEADER, LAP, header) != ipn->rx_lap[q]) {
		/* A header of the last lap, back after we cleared it. */
		cmpxchg(&slot->header, (__force u32)cpu_to_le32(header), 0);
		ipnet_count(ipn, IPNET_RX_STALE_HEADERS, 1);
		return false;
	}
	dma_rmb();
	if (ARCTIC_FIELD_GET(MPI_HEADER, MODE, header) == ARCTIC_MODE_DMA)
		ipnet_rx_notice(ipn, slot);
	else if (q == ARCTIC_RXQ_HI)	/* packets come on LoRx only */
		ipnet_count(ipn, IPNET_RX_BAD_TYPE, 1);
	else if (!netif_running(ipn->dev))
		ipnet_count(ipn, IPNET_RX_DOWN, 1);
	else
		ipnet_rx_message(ipn, header, slot);
	/* The body is read before the slot is given back. */
	dma_mb();
	WRITE_ONCE(slot->header, 0);
	if (++ipn->rx_tail[q] == ARCTIC_N) {
		ipn->rx_tail[q] = 0;
		ipn->rx_lap[q] ^= 1;
	}
	return true;
}

static bool ipnet_rx_pending(struct niu_ipnet *ipn)
{
	unsigned int q;

	for (q = 0; q < ARCTIC_NUM_RX_QUEUES; q++)
		if (niu_slot_valid(ipnet_slot(ipn->ep->rx_region,
					      q == ARCTIC_RXQ_HI ?
					      ARCTIC_HI_RX_OFFSET :
					      ARCTIC_LO_RX_OFFSET, 0),
				   ipn->rx_tail[q]))
			return true;
	return false;
}

/*
 * NAPI runs from probe to remove, also while the interface is down, so
 * that packets sent to a node whose niuN is down are dropped here rather
 * than left to fill LoRx, which would hold up the low-priority stream of
 * user programs from the same sender.
 */
static int niu_ipnet_poll(struct napi_struct *napi, int budget)
{
	struct niu_ipnet *ipn = container_of(napi, struct niu_ipnet, napi);
	int done = 0;

	while (done < budget && ipnet_rx_take(ipn, ARCTIC_RXQ_HI))
		done++;
	while (done < budget && ipnet_rx_take(ipn, ARCTIC_RXQ_LO))
		done++;
	if (done < budget && napi_complete_done(napi, done)) {
		writel(R_USER_IRQ_ARM_RX_MASK,
		       ipnet_user_reg(ipn, A_USER_IRQ_ARM));
		/* The arming must reach the device before the queues are read. */
		mb();
		if (ipnet_rx_pending(ipn))
			napi_schedule(napi);
	}
	return done;
}

/* ---- link, device operations, ethtool ---- */

/*
 * Carrier follows the link to the switch (and is off in raw mode, when
 * the NIU's datapaths are off); routes that probe could not load are
 * loaded once the link is up.  Checked every second.
 */
static void niu_ipnet_link_work(struct work_struct *work)
{
	struct niu_ipnet *ipn = container_of(to_delayed_work(work),
					     struct niu_ipnet, link_work);
	struct arctic_niu *niu = ipn->niu;
	bool up = niu_link_up(niu);

	if (up && !READ_ONCE(niu->routes_loaded)) {
		mutex_lock(&niu->lock);
		if (!niu->raw_mode)
			niu_ensure_routes(niu);
		mutex_unlock(&niu->lock);
	}
	up = up && READ_ONCE(niu->routes_loaded) && !READ_ONCE(niu->raw_mode);
	if (up && !netif_carrier_ok(ipn->dev))
		netif_carrier_on(ipn->dev);
	else if (!up && netif_carrier_ok(ipn->dev))
		netif_carrier_off(ipn->dev);
	schedule_delayed_work(&ipn->link_work, HZ);
}

static int niu_ipnet_open(struct net_device *dev)
{
	netif_start_queue(dev);
	return 0;
}

static int niu_ipnet_stop(struct net_device *dev)
{
	netif_stop_queue(dev);
	return 0;
}

static void niu_ipnet_get_stats64(struct net_device *dev,
				  struct rtnl_link_stats64 *stats)
{
	struct niu_ipnet *ipn = netdev_priv(dev);
	u64 s[IPNET_NUM_STATS];

	ipnet_read_stats(ipn, s);
	stats->rx_packets = s[IPNET_RX_PACKETS];
	stats->rx_bytes = s[IPNET_RX_BYTES];
	stats->tx_packets = s[IPNET_TX_PACKETS];
	stats->tx_bytes = s[IPNET_TX_BYTES];
	stats->rx_length_errors = s[IPNET_RX_TOO_LONG] + s[IPNET_RX_BAD_SIZE];
	stats->rx_frame_errors = s[IPNET_RX_UNEXPECTED] +
				 s[IPNET_RX_INCOMPLETE] + s[IPNET_RX_BAD_TYPE] +
				 s[IPNET_RX_NOT_IP];
	stats->rx_errors = stats->rx_length_errors + stats->rx_frame_errors;
	stats->rx_dropped = s[IPNET_RX_NOMEM] + s[IPNET_RX_DOWN];
	stats->tx_dropped = s[IPNET_TX_NO_NODE] + s[IPNET_TX_NOT_UNICAST];
	stats->tx_errors = s[IPNET_TX_PEER_DEAD];
	stats->tx_carrier_errors = s[IPNET_TX_PEER_DEAD];
}

static const struct net_device_ops niu_ipnet_ops = {
	.ndo_open = niu_ipnet_open,
	.ndo_stop = niu_ipnet_stop,
	.ndo_start_xmit = niu_ipnet_xmit,
	.ndo_get_stats64 = niu_ipnet_get_stats64,
};

static void niu_ipnet_get_drvinfo(struct net_device *dev,
				  struct ethtool_drvinfo *info)
{
	struct niu_ipnet *ipn = netdev_priv(dev);

	strscpy(info->driver, DRV_NAME, sizeof(info->driver));
	strscpy(info->bus_info, pci_name(ipn->niu->pdev),
		sizeof(info->bus_info));
}

static int niu_ipnet_get_sset_count(struct net_device *dev, int sset)
{
	return sset == ETH_SS_STATS ? IPNET_ETHTOOL_STATS : -EOPNOTSUPP;
}

static void niu_ipnet_get_strings(struct net_device *dev, u32 sset, u8 *data)
{
	unsigned int i;

	if (sset != ETH_SS_STATS)
		return;
	for (i = 0; i < IPNET_NUM_STATS; i++)
		ethtool_sprintf(&data, "%s", niu_ipnet_stat_names[i]);
	for (i = 0; i < ARCTIC_NUM_COUNTERS; i++)
		ethtool_sprintf(&data, "niu_%s", arctic_counter_name(i));
	ethtool_sprintf(&data, "node_id");
}

static void niu_ipnet_get_ethtool_stats(struct net_device *dev,
					struct ethtool_stats *stats, u64 *data)
{
	struct niu_ipnet *ipn = netdev_priv(dev);
	unsigned int i;

	ipnet_read_stats(ipn, data);
	data += IPNET_NUM_STATS;
	for (i = 0; i < ARCTIC_NUM_COUNTERS; i++)
		*data++ = niu_read(ipn->niu, ARCTIC_COUNTER_OFFSET(i));
	*data = ipn->niu->node_id;
}

static const struct ethtool_ops niu_ipnet_ethtool_ops = {
	.get_drvinfo = niu_ipnet_get_drvinfo,
	.get_link = ethtool_op_get_link,
	.get_sset_count = niu_ipnet_get_sset_count,
	.get_strings = niu_ipnet_get_strings,
	.get_ethtool_stats = niu_ipnet_get_ethtool_stats,
};

/* No link-layer header, no ARP, no broadcast: see the section's comment. */
static void niu_ipnet_setup(struct net_device *dev)
{
	dev->netdev_ops = &niu_ipnet_ops;
	dev->ethtool_ops = &niu_ipnet_ethtool_ops;
	dev->type = ARPHRD_NONE;
	dev->hard_header_len = 0;
	dev->addr_len = 0;
	dev->mtu = ARCTIC_IPNET_DEFAULT_MTU;
	dev->min_mtu = IPV4_MIN_MTU;
	dev->max_mtu = ARCTIC_IPNET_MAX_MTU;
	dev->flags = IFF_NOARP;
	/*
	 * A queue discipline holds what waits while LoTx is full (without
	 * a length the kernel would take niuN for a device that never
	 * queues, and drop those packets).
	 */
	dev->tx_queue_len = DEFAULT_TX_QUEUE_LEN;
	/* The route's next hop names the node: keep it until transmit. */
	netif_keep_dst(dev);
}

/* Interrupts of the kernel's endpoint, MSI-X or INTx. */
static void niu_ipnet_irq(struct arctic_niu *niu, bool rx, bool tx)
{
	struct niu_ipnet *ipn = READ_ONCE(niu->ipnet);

	if (!ipn)
		return;
	if (rx)
		napi_schedule(&ipn->napi);
	if (tx)
		niu_ipnet_tx_irq(ipn);
}

static irqreturn_t niu_ipnet_rx_vector(int irq, void *data)
{
	niu_ipnet_irq(data, true, false);
	return IRQ_HANDLED;
}

static irqreturn_t niu_ipnet_tx_vector(int irq, void *data)
{
	niu_ipnet_irq(data, false, true);
	return IRQ_HANDLED;
}

/* Register niuN on the endpoint after the users' (probe's last step). */
static int niu_ipnet_create(struct arctic_niu *niu)
{
	unsigned int e = niu->user_endpoints;
	struct net_device *dev;
	struct niu_ipnet *ipn;
	int ret;

	if (e == niu->num_endpoints)
		return 0;	/* ipnet=0, or a single endpoint */
	dev = alloc_netdev(sizeof(*ipn), "niu%d", NET_NAME_ENUM,
			   niu_ipnet_setup);
	if (!dev)
		return -ENOMEM;
	SET_NETDEV_DEV(dev, &niu->pdev->dev);
	ipn = netdev_priv(dev);
	ipn->niu = niu;
	ipn->dev = dev;
	ipn->ep = &niu->ep[e];
	ipn->user_page = niu->user + e * ARCTIC_USER_PAGE_SIZE;
	u64_stats_init(&ipn->rx_syncp);
	u64_stats_init(&ipn->tx_syncp);
	INIT_DELAYED_WORK(&ipn->link_work, niu_ipnet_link_work);
	netif_napi_add(dev, &ipn->napi, niu_ipnet_poll);
	netif_carrier_off(dev);
	ret = register_netdev(dev);
	if (ret) {
		netif_napi_del(&ipn->napi);
		free_netdev(dev);
		return ret;
	}
	napi_enable(&ipn->napi);
	WRITE_ONCE(niu->ipnet, ipn);
	/* Whatever came before the interrupts were ours. */
	napi_schedule(&ipn->napi);
	niu_ipnet_link_work(&ipn->link_work.work);
	return 0;
}

static void niu_ipnet_destroy(struct arctic_niu *niu)
{
	struct niu_ipnet *ipn = niu->ipnet;
	unsigned int src;

	if (!ipn)
		return;
	unregister_netdev(ipn->dev);
	cancel_delayed_work_sync(&ipn->link_work);
	WRITE_ONCE(niu->ipnet, NULL);
	if (niu->pdev->msix_enabled) {
		synchronize_irq(pci_irq_vector(niu->pdev, ARCTIC_MSIX_RX +
					       niu->user_endpoints));
		synchronize_irq(pci_irq_vector(niu->pdev, ARCTIC_MSIX_TX +
					       niu->user_endpoints));
	} else {
		synchronize_irq(pci_irq_vector(niu->pdev, 0));
	}
	napi_disable(&ipn->napi);
	netif_napi_del(&ipn->napi);
	for (src = 0; src < ARCTIC_S; src++)
		ipnet_rx_abandon(ipn, src);
	free_netdev(ipn->dev);
}

/*
 * The INTx line lands here: take the causes, clear them (the line follows
 * IRQ_STATUS), and wake whoever sleeps in poll() on those endpoints.
 */
static irqreturn_t arctic_niu_irq(int irq, void *data)
{
	struct arctic_niu *niu = data;
	u32 status = niu_read(niu, A_NIU_IRQ_STATUS);
	unsigned int e;

	if (!status)
		return IRQ_NONE;	/* a shared INTx line, not ours */
	niu_write(niu, A_NIU_IRQ_STATUS, status);
	for (e = 0; e < niu->user_endpoints; e++)
		if (status & BIT(R_NIU_IRQ_RX_SHIFT + e))
			wake_up_interruptible(&niu->ep[e].rx_wait);
	e = niu->user_endpoints;
	niu_ipnet_irq(niu, status & BIT(R_NIU_IRQ_RX_SHIFT + e),
		      status & BIT(R_NIU_IRQ_TX_SHIFT + e));
	return IRQ_HANDLED;
}

/*
 * An endpoint's receive vector (MSI-X): the vector is the cause, and it
 * fires on every armed event whatever IRQ_STATUS holds, so nothing is
 * read or cleared.  Under TCG each register access is a trip through
 * QEMU (docs/datapath.md §3.13).  The
 * reset in remove clears the status bits left set.
 */
static irqreturn_t arctic_niu_rx_vector(int irq, void *data)
{
	struct arctic_niu_endpoint *ep = data;

	wake_up_interruptible(&ep->rx_wait);
	return IRQ_HANDLED;
}

/* Any message waiting in the endpoint's receive queues? */
static bool niu_rx_pending(struct arctic_niu_endpoint *ep)
{
	return niu_region_has_valid(ep->rx_region, ARCTIC_RX_REGION_SIZE);
}

/*
 * Readable while a receive slot of the endpoint is valid.  If none is,
 * the one-shot receive interrupt is armed and the queues looked at again,
 * so a message that lands after the first look still wakes the sleeper
 * (programming guide, interrupts); a woken poll() that finds its message
 * arms nothing.
 */
static __poll_t arctic_niu_poll(struct file *file, poll_table *wait)
{
	struct arctic_niu_endpoint *ep = file->private_data;
	struct arctic_niu *niu = ep->niu;

	poll_wait(file, &ep->rx_wait, wait);
	if (niu_rx_pending(ep))
		return EPOLLIN | EPOLLRDNORM;
	writel(R_USER_IRQ_ARM_RX_MASK, niu->user +
	       ep->index * ARCTIC_USER_PAGE_SIZE + A_USER_IRQ_ARM);
	/* The arming must reach the device before the queues are read. */
	mb();
	return niu_rx_pending(ep) ? EPOLLIN | EPOLLRDNORM : 0;
}

/* MSI-X with a vector per cause, or else the INTx line, shared. */
static int niu_setup_irqs(struct arctic_niu *niu)
{
	struct pci_dev *pdev = niu->pdev;
	unsigned int e;
	int ret;

	ret = pci_alloc_irq_vectors(pdev, ARCTIC_MSIX_VECTORS,
				    ARCTIC_MSIX_VECTORS, PCI_IRQ_MSIX);
	if (ret < 0) {
		ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_LEGACY);
		if (ret < 0)
			return ret;
		return devm_request_irq(&pdev->dev, pci_irq_vector(pdev, 0),
					arctic_niu_irq, IRQF_SHARED, DRV_NAME,
					niu);
	}
	for (e = 0; e < niu->user_endpoints; e++) {
		ret = devm_request_irq(&pdev->dev,
				       pci_irq_vector(pdev, ARCTIC_MSIX_RX + e),
				       arctic_niu_rx_vector, 0, DRV_NAME,
				       &niu->ep[e]);
		if (ret)
			return ret;
	}
	if (e == niu->num_endpoints)
		return 0;
	/* The kernel's endpoint: niuN's receive and transmit. */
	ret = devm_request_irq(&pdev->dev,
			       pci_irq_vector(pdev, ARCTIC_MSIX_RX + e),
			       niu_ipnet_rx_vector, 0, DRV_NAME, niu);
	if (ret)
		return ret;
	return devm_request_irq(&pdev->dev,
				pci_irq_vector(pdev, ARCTIC_MSIX_TX + e),
				niu_ipnet_tx_vector, 0, DRV_NAME, niu);
}

static const struct file_operations arctic_niu_fops = {
	.owner = THIS_MODULE,
	.open = arctic_niu_open,
	.release = arctic_niu_release,
	.mmap = arctic_niu_mmap,
	.poll = arctic_niu_poll,
	.unlocked_ioctl = arctic_niu_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

/* ---------------------------------------------------------------------
 * sysfs: identity, link and counters, under the PCI device.
 */

struct niu_reg_attribute {
	struct device_attribute attr;
	unsigned int offset;
};

static ssize_t niu_reg_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	struct arctic_niu *niu = dev_get_drvdata(dev);
	struct niu_reg_attribute *reg =
		container_of(attr, struct niu_reg_attribute, attr);

	return sysfs_emit(buf, "%u\n", niu_read(niu, reg->offset));
}

#define NIU_REG_ATTR(_name, _offset) \
	struct niu_reg_attribute niu_attr_##_name = { \
		.attr = __ATTR(_name, 0444, niu_reg_show, NULL), \
		.offset = (_offset), \
	}

static NIU_REG_ATTR(node_id, A_NIU_NODE_ID);
static NIU_REG_ATTR(num_nodes, A_NIU_NUM_NODES);
static NIU_REG_ATTR(net_levels, A_NIU_NET_LEVELS);
static NIU_REG_ATTR(link_status, A_NIU_LINK_STATUS);
static NIU_REG_ATTR(error_cause, A_NIU_ERROR_CAUSE);
static NIU_REG_ATTR(error_info, A_NIU_ERROR_INFO);
static NIU_REG_ATTR(tx_polled, A_NIU_TX_POLLED);

/* The retransmit lines the NIU has (its "lines" property): packets in flight. */
static ssize_t lines_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	struct arctic_niu *niu = dev_get_drvdata(dev);

	return sysfs_emit(buf, "%u\n", ARCTIC_FIELD_GET(NIU_CAPS, LINES,
				niu_read(niu, A_NIU_CAPS)));
}
static DEVICE_ATTR_RO(lines);

/*
 * Timed mode starts the cluster's time just after one of this kernel's
 * timer ticks, on every node and in every run.  Ticks fall on multiples of
 * the tick period of CLOCK_MONOTONIC, and how long the boot took (an
 * unused kernel argument is enough) shifts those multiples against the
 * instructions the guest runs: started at a phase such noise chose, the
 * same program met its ticks, and the kernel work they wake, at other
 * points and printed other times (docs/timed-mode.md, "One clock").
 * Preemption stays off from the tick to the start, so that nothing the
 * tick wakes runs in between; a tick that does not come within three
 * periods (it always does: the CPU is busy) lets the start go anyway.
 */
static void niu_wait_for_tick(struct arctic_niu *niu)
{
	unsigned long seen = READ_ONCE(jiffies);
	ktime_t give_up = ktime_add_ns(ktime_get(), 3 * TICK_NSEC);

	while (READ_ONCE(jiffies) == seen) {
		if (ktime_after(ktime_get(), give_up)) {
			dev_warn(&niu->pdev->dev,
				 "no timer tick in 3 periods: the clock starts at another phase\n");
			return;
		}
		cpu_relax();
	}
}

/*
 * Timed mode (docs/timed-mode.md): writing 1 to time_start says this node
 * is ready; the write returns once every node of the cluster has said so
 * and the cluster's clock runs (the CPU does not run meanwhile).  EIO: the
 * cluster could not start; EOPNOTSUPP: the NIU keeps no cluster time.
 */
static ssize_t time_start_store(struct device *dev,
				struct device_attribute *attr,
				const char *buf, size_t count)
{
	struct arctic_niu *niu = dev_get_drvdata(dev);
	bool start;
	u32 status;

	if (kstrtobool(buf, &start) || !start)
		return -EINVAL;
	status = niu_read(niu, A_NIU_TIME_STATUS);
	if (!(status & R_NIU_TIME_STATUS_TIMED_MASK))
		return -EOPNOTSUPP;
	if (status & R_NIU_TIME_STATUS_RUNNING_MASK)
		return -EALREADY;
	/*
	 * Where a launcher saving the cluster at its start stops the machine
	 * (start-pause=on; nothing otherwise): every run of the image, saved
	 * or not, runs the same instructions to the start.
	 */
	niu_write(niu, A_NIU_TIME_CTRL, R_NIU_TIME_CTRL_PAUSE_MASK);
	preempt_disable();
	niu_wait_for_tick(niu);
	niu_write(niu, A_NIU_TIME_CTRL, R_NIU_TIME_CTRL_START_MASK);
	preempt_enable();
	status = niu_read(niu, A_NIU_TIME_STATUS);
	return (status & R_NIU_TIME_STATUS_RUNNING_MASK) ? count : -EIO;
}
static DEVICE_ATTR_WO(time_start);

/* The cluster's time in ns (0 before the start). */
static ssize_t time_now_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	struct arctic_niu *niu = dev_get_drvdata(dev);
	u64 lo = niu_read(niu, A_NIU_TIME_NOW_LO);
	u64 hi = niu_read(niu, A_NIU_TIME_NOW_HI);

	return sysfs_emit(buf, "%llu\n", (unsigned long long)(hi << 32 | lo));
}
static DEVICE_ATTR_RO(time_now);
static NIU_REG_ATTR(time_status, A_NIU_TIME_STATUS);

static struct attribute *niu_attrs[] = {
	&niu_attr_node_id.attr.attr,
	&niu_attr_num_nodes.attr.attr,
	&niu_attr_net_levels.attr.attr,
	&niu_attr_link_status.attr.attr,
	&niu_attr_error_cause.attr.attr,
	&niu_attr_error_info.attr.attr,
	&niu_attr_tx_polled.attr.attr,
	&dev_attr_lines.attr,
	&dev_attr_time_start.attr,
	&dev_attr_time_now.attr,
	&niu_attr_time_status.attr.attr,
	NULL,
};

static const struct attribute_group niu_attr_group = {
	.attrs = niu_attrs,
};

/*
 * One file per counter under counters/, named by arctic_counter_name()
 * (underscores, as the kernel names its statistics files).
 */
static struct niu_reg_attribute counter_attrs[ARCTIC_NUM_COUNTERS];
static struct attribute *counter_attr_list[ARCTIC_NUM_COUNTERS + 1];

static const struct attribute_group niu_counter_group = {
	.name = "counters",
	.attrs = counter_attr_list,
};

static const struct attribute_group *niu_groups[] = {
	&niu_attr_group,
	&niu_counter_group,
	NULL,
};

static void niu_counter_attrs_init(void)
{
	unsigned int c;

	for (c = 0; c < ARCTIC_NUM_COUNTERS; c++) {
		sysfs_attr_init(&counter_attrs[c].attr.attr);
		counter_attrs[c].attr.attr.name = arctic_counter_name(c);
		counter_attrs[c].attr.attr.mode = 0444;
		counter_attrs[c].attr.show = niu_reg_show;
		counter_attrs[c].offset = ARCTIC_COUNTER_OFFSET(c);
		counter_attr_list[c] = &counter_attrs[c].attr.attr;
	}
}

/* ---------------------------------------------------------------------
 * PCI probe and remove
 */

static void niu_release_minor(void *data)
{
	struct arctic_niu *niu = data;

	ida_free(&arctic_niu_ida, niu->minor_index);
}

static int niu_identify(struct arctic_niu *niu)
{
	struct device *dev = &niu->pdev->dev;
	u32 id = niu_read(niu, A_NIU_ID);
	u32 version = niu_read(niu, A_NIU_VERSION);
	u32 caps = niu_read(niu, A_NIU_CAPS);

	if (id != ARCTIC_NIU_ID_VALUE ||
	    ARCTIC_FIELD_GET(NIU_VERSION, MAJOR, version) !=
	    ARCTIC_NIU_VERSION_MAJOR) {
		dev_err(dev, "not an Arctic NIU v1 (id %#x, version %#x)\n",
			id, version);
		return -ENODEV;
	}
	if (ARCTIC_FIELD_GET(NIU_CAPS, LOG2_N, caps) != ARCTIC_LOG2_N) {
		dev_err(dev, "unsupported queue size (caps %#x)\n", caps);
		return -ENODEV;
	}
	niu->num_endpoints = min_t(u32, ARCTIC_FIELD_GET(NIU_CAPS, ENDPOINTS,
							 caps),
				   ARCTIC_ENDPOINTS);
	if (!niu->num_endpoints) {
		dev_err(dev, "device has no endpoints\n");
		return -ENODEV;
	}
	/* The last endpoint carries niuN's packets, if there are two. */
	niu->user_endpoints = niu->num_endpoints;
	if (ipnet && niu->num_endpoints > 1)
		niu->user_endpoints--;
	return 0;
}

static int arctic_niu_probe(struct pci_dev *pdev,
			    const struct pci_device_id *id)
{
	struct device *dev = &pdev->dev;
	struct arctic_niu *niu;
	int ret;

	niu = devm_kzalloc(dev, sizeof(*niu), GFP_KERNEL);
	if (!niu)
		return -ENOMEM;
	niu->pdev = pdev;
	mutex_init(&niu->lock);
	pci_set_drvdata(pdev, niu);

	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	ret = pcim_iomap_regions(pdev, BIT(ARCTIC_BAR_CONTROL) |
				 BIT(ARCTIC_BAR_USER), DRV_NAME);
	if (ret)
		return ret;
	if (pci_resource_len(pdev, ARCTIC_BAR_CONTROL) <
	    ARCTIC_BAR_CONTROL_SIZE ||
	    pci_resource_len(pdev, ARCTIC_BAR_USER) < ARCTIC_BAR_USER_SIZE) {
		dev_err(dev, "BARs smaller than the register map\n");
		return -ENODEV;
	}
	niu->regs = pcim_iomap_table(pdev)[ARCTIC_BAR_CONTROL];
	niu->user = pcim_iomap_table(pdev)[ARCTIC_BAR_USER];
	niu->user_bar_phys = pci_resource_start(pdev, ARCTIC_BAR_USER);
	ret = dma_set_mask_and_coherent(dev, DMA_BIT_MASK(64));
	if (ret)
		return ret;
	pci_set_master(pdev);

	ret = niu_identify(niu);
	if (ret)
		return ret;
	niu_reset(niu);
	ret = niu_selftest_scratch(niu);
	if (!ret)
		ret = niu_selftest_dma(niu);
	if (ret) {
		dev_err(dev, "self-test failed\n");
		return ret;
	}

	/* The DMA engine now targets only memory that outlives the device. */
	ret = niu_alloc_endpoints(niu);
	if (ret)
		goto reset_device;
	niu_write(niu, A_NIU_VMASK, niu->num_endpoints - 1);
	niu_write(niu, A_NIU_TX_POLLED, niu->tx_polled);	/* none open */
	ret = niu_setup_irqs(niu);
	if (ret) {
		dev_err(dev, "no interrupt: %d\n", ret);
		goto reset_device;
	}

	if (niu_wait_link(niu, link_timeout_ms))
		dev_warn(dev, "link to the switch is down; routes load at open\n");
	else
		niu_load_routes(niu);
	niu_datapaths_start(niu);
	ret = niu_check_errors(niu, "bring-up");
	if (ret)
		goto reset_device;

	ret = ida_alloc(&arctic_niu_ida, GFP_KERNEL);
	if (ret < 0)
		goto reset_device;
	niu->minor_index = ret;
	ret = devm_add_action_or_reset(dev, niu_release_minor, niu);
	if (ret)
		goto reset_device;
	snprintf(niu->name, sizeof(niu->name), "arctic-niu%d",
		 niu->minor_index);
	niu->misc.minor = MISC_DYNAMIC_MINOR;
	niu->misc.name = niu->name;
	niu->misc.fops = &arctic_niu_fops;
	niu->misc.parent = dev;
	ret = misc_register(&niu->misc);
	if (ret)
		goto reset_device;
	ret = niu_ipnet_create(niu);
	if (ret)
		dev_warn(dev, "no network interface: %d\n", ret);

	dev_info(dev, "%s: node %u of %u, %u endpoints, %s\n", niu->name,
		 niu->node_id, niu->num_nodes, niu->num_endpoints,
		 niu->pdev->msix_enabled ? "MSI-X" : "INTx");
	return 0;

reset_device:
	/* Stop all DMA before the managed queue memory is freed. */
	niu_reset(niu);
	return ret;
}

static void arctic_niu_remove(struct pci_dev *pdev)
{
	struct arctic_niu *niu = pci_get_drvdata(pdev);
	unsigned int e;

	niu_ipnet_destroy(niu);
	misc_deregister(&niu->misc);
	niu_reset(niu);
	pci_clear_master(pdev);
	for (e = 0; e < ARCTIC_ENDPOINTS; e++) {
		niu_kept_free(&niu->ep[e], 0);
		niu_kept_free(&niu->ep[e], 1);
	}
}

static const struct pci_device_id arctic_niu_ids[] = {
	{ PCI_DEVICE(ARCTIC_NIU_PCI_VENDOR_ID, ARCTIC_NIU_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, arctic_niu_ids);

static struct pci_driver arctic_niu_driver = {
	.name = DRV_NAME,
	.id_table = arctic_niu_ids,
	.probe = arctic_niu_probe,
	.remove = arctic_niu_remove,
	.dev_groups = niu_groups,
};

static int __init arctic_niu_init(void)
{
	niu_counter_attrs_init();
	return pci_register_driver(&arctic_niu_driver);
}
module_init(arctic_niu_init);

static void __exit arctic_niu_exit(void)
{
	pci_unregister_driver(&arctic_niu_driver);
	ida_destroy(&arctic_niu_ida);
}
module_exit(arctic_niu_exit);

MODULE_DESCRIPTION("Arctic NIU (MIT StarT network interface unit) driver");
MODULE_LICENSE("GPL");
