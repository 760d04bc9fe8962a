/* SPDX-License-Identifier: MIT */
/*
 * libniu: endpoint set-up through the arctic_niu driver, the send and
 * receive protocol of seed 002 section 3.2 with the doorbell fast path, a
 * side buffer for messages that arrive while the library waits for its own,
 * the waits, and a dissemination barrier.  Collectives (niu-coll.c),
 * active messages (niu-am.c), remote DMA (niu-dma.c) and raw mode
 * (niu-raw.c) are built on what niu-internal.h shares.  niu.h documents
 * the interface.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "niu.h"
#include "uapi/arctic_niu.h"
#include "niu-internal.h"


static const uint32_t queue_view_offset[2][NIU_NUM_PRIORITIES] = {
	{ ARCTIC_MMAP_HI_TX, ARCTIC_MMAP_LO_TX },	/* tx */
	{ ARCTIC_MMAP_HI_RX, ARCTIC_MMAP_LO_RX },	/* rx */
};

static void send_probes(struct niu_endpoint *ep);


/*
 * How long an idle wait sleeps in poll(): for a free Tx slot, which no
 * interrupt announces, the idle sleep; for a message, until the next probe
 * is due, at most NIU_RX_SLEEP_MAX_MS, since the interrupt ends the sleep
 * as soon as one arrives.
 */
static int sleep_ms(const struct niu_endpoint *ep, enum niu_wait what,
		    uint64_t now)
{
	int ms = (int)((ep->idle_sleep_us + 999) / 1000), rx_ms;
	uint64_t until = now + NIU_RX_SLEEP_MAX_MS * 1000000ull;

	if (what != NIU_WAIT_RX)
		return ms;
	if (ep->probe_after_ns && ep->next_probe_ns < until)
		until = ep->next_probe_ns > now ? ep->next_probe_ns : now;
	rx_ms = (int)((until - now + 999999) / 1000000);
	return rx_ms > ms ? rx_ms : ms;
}

/* Whether an empty poll of a wait reads USER_LINK_POLL: niu_lib_idle(). */
static bool wait_polls_link(const struct niu_endpoint *ep)
{
	return ep->link_poll && (!ep->idle_sleep_us || ep->link_poll_yields);
}

/*
 * One empty poll.  Every NIU_SPINS_BEFORE_YIELD of them give the CPU
 * away: by sched_yield(), or, when niu_set_idle_sleep() asked (more
 * programs than host CPUs), by sleeping in poll() on the endpoint (the
 * driver arms the receive interrupt, so the sleep ends as soon as a
 * message arrives; sleep_ms() says how long it may last).  Each time it
 * also looks for a peer-down notice, and a wait longer than a second
 * probes the other nodes (niu_peer_down() in niu.h).
 *
 * Without an idle sleep each empty poll first has the NIU take what the
 * network brought it (USER_LINK_POLL: busy polling, in this CPU's time,
 * instead of waiting for the NIU's own link thread to be scheduled on a
 * host whose cores the spinning guests hold).  With one it does so only
 * if the NIU gives the host core away after each empty poll (YIELDS, which
 * the launcher asks for when nodes outnumber cores): a waiting CPU that
 * polled without yielding would take the core from the nodes that compute
 * (a node waiting with busy polling and 1 ms sleeps cost 41 % of a host
 * core, without them 23 %, with the long sleep for a message 1 %;
 * docs/scale.md).  So a wait polls, yielding, for its first
 * NIU_SPINS_BEFORE_YIELD polls and only then sleeps: a reply that comes
 * within a round trip is taken without an interrupt and a wake-up.
 */
void niu_lib_idle(struct niu_endpoint *ep, unsigned int *spins,
		 enum niu_wait what)
{
	struct pollfd pfd = { .fd = ep->fd, .events = POLLIN };
	uint64_t now;
	int ms;

	niu_lib_time_enter(ep, NIU_TIME_WAIT);
	if (*spins == 0)
		ep->wait_start_ns = 0;	/* a new wait */
	if (wait_polls_link(ep))
		(void)*ep->link_poll;
	if (++*spins % NIU_SPINS_BEFORE_YIELD)
		return;
	niu_peer_down(ep);
	now = niu_now_ns();
	if (!ep->wait_start_ns) {
		ep->wait_start_ns = now;
		ep->next_probe_ns = now + ep->probe_after_ns;
	} else if (ep->probe_after_ns && now >= ep->next_probe_ns &&
		   !ep->probing) {
		ep->next_probe_ns = now + ep->probe_every_ns;
		send_probes(ep);
	}
	if (!ep->idle_sleep_us) {
		sched_yield();
		return;
	}
	ms = sleep_ms(ep, what, now);
	/* Readable at once means a message is waiting, perhaps not the one
	 * wanted yet: give the CPU away then rather than spin. */
	if (poll(&pfd, 1, ms) != 0)
		sched_yield();
}

/*
 * A 0-or-1 switch in the environment, for comparisons: NIU_LINK_POLL=0
 * turns busy polling of the link off (as before it existed), NIU_TX_POLL=1
 * has the NIU poll this endpoint's Tx queues as seed 002's does.  Unset:
 * @unset; anything else is said and counts as unset.
 */
static bool env_switch(const char *name, bool unset, const char *what)
{
	const char *value = getenv(name);

	if (!value)
		return unset;
	if (!strcmp(value, "1") || !strcmp(value, "0"))
		return value[0] == '1';
	fprintf(stderr, "libniu: %s='%s' is neither 0 nor 1; %s stays %s\n",
		name, value, what, unset ? "on" : "off");
	return unset;
}

void niu_set_idle_sleep(struct niu_endpoint *ep, unsigned int microseconds)
{
	ep->idle_sleep_us = microseconds;
}

void niu_set_probes(struct niu_endpoint *ep, bool on)
{
	ep->probe_after_ns = on ? NIU_PROBE_AFTER_MS * 1000000ull : 0;
}

uint64_t niu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool niu_timed(void)
{
	char line[4096] = "";
	/* guest/init's line: the kernel's, or a clone's (docs/snapshots.md) */
	FILE *f = fopen("/run/arctic-cmdline", "r") ?: fopen("/proc/cmdline", "r");

	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = 0;
		fclose(f);
	}
	return strstr(line, "arctic.timed=1");
}

#ifndef NIU_LIB_NOW_NS		/* test-libniu.c's clock */
#define NIU_LIB_NOW_NS() niu_now_ns()
#endif

void niu_stats_time_on(struct niu_endpoint *ep, bool on)
{
	struct niu_time_account *t = &ep->time;

	if (on) {
		memset(t, 0, sizeof(*t));
		t->start_ticks = t->since = NIU_LIB_TICKS();
		t->start_ns = NIU_LIB_NOW_NS();
		t->on = true;
	} else if (t->on) {
		niu_lib_time_switch(ep, (enum niu_time_kind)t->kind);
		t->stop_ticks = t->since;
		t->stop_ns = NIU_LIB_NOW_NS();
		t->on = false;
	}
}

/*
 * Ticks become nanoseconds at the rate the two clocks kept since the
 * accounting began (the TSC's rate is the guest kernel's to know; one
 * tick per ns in timed mode, where the ratio comes out as 1).
 */
void niu_stats_time(struct niu_endpoint *ep, uint64_t ns[NIU_TIME_KINDS])
{
	struct niu_time_account *t = &ep->time;
	uint64_t ticks, span_ns;
	int k;

	if (t->on) {
		niu_lib_time_switch(ep, (enum niu_time_kind)t->kind);
		ticks = t->since - t->start_ticks;
		span_ns = NIU_LIB_NOW_NS() - t->start_ns;
	} else {
		ticks = t->stop_ticks - t->start_ticks;
		span_ns = t->stop_ns - t->start_ns;
	}
	for (k = 0; k < NIU_TIME_KINDS; k++)
		ns[k] = ticks ? (uint64_t)((unsigned __int128)t->ticks[k] *
					   span_ns / ticks) : 0;
}

/*
 * NIU_IDLE_SLEEP_US in the environment: the idle sleep every endpoint
 * starts with (niu_set_idle_sleep()), so that a launcher can make every
 * program of a cluster with more nodes than host cores halt while it
 * waits (scripts/niu-cluster -I).  Anything but 0..1000000 is refused
 * with a message and taken as 0.
 */
static unsigned int idle_sleep_from_env(const char *value)
{
	unsigned long us;
	char *end;

	if (!value || !*value)
		return 0;
	errno = 0;
	us = strtoul(value, &end, 10);
	if (*end || errno || value[0] < '0' || value[0] > '9' ||
	    us > 1000000) {
		fprintf(stderr, "libniu: NIU_IDLE_SLEEP_US=%s is not a number of "
			"microseconds (0..1000000); spinning instead\n", value);
		return 0;
	}
	return (unsigned int)us;
}

int niu_open(struct niu_endpoint *ep, const char *path)
{
	struct arctic_niu_node_info node;
	struct arctic_niu_endpoint_info info;
	uint32_t poll;
	int p, err;

	memset(ep, 0, sizeof(*ep));
	ep->fd = open(path ? path : "/dev/arctic-niu0", O_RDWR | O_CLOEXEC);
	if (ep->fd < 0)
		return -errno;
	if (ioctl(ep->fd, ARCTIC_NIU_IOC_NODE_INFO, &node) < 0 ||
	    ioctl(ep->fd, ARCTIC_NIU_IOC_ENDPOINT_INFO, &info) < 0)
		goto fail_errno;
	ep->node = node.node_id;
	ep->num_nodes = node.num_nodes;
	err = niu_lib_endpoint_set(ep, info.endpoint);
	if (err) {
		niu_close(ep);
		return err;
	}
	ep->idle_sleep_us = idle_sleep_from_env(getenv("NIU_IDLE_SLEEP_US"));
	niu_set_probes(ep, true);
	ep->probe_every_ns = NIU_PROBE_EVERY_MS * 1000000ull;

	/* HiTx LoTx HiRx LoRx and DMATx right after them, in one view. */
	ep->queues = mmap(NULL, NIU_QUEUES_VIEW_SIZE, PROT_READ | PROT_WRITE,
			  MAP_SHARED, ep->fd, (off_t)info.queues_offset);
	if (ep->queues == MAP_FAILED)
		goto fail_errno;
	ep->user_page = mmap(NULL, info.user_page_size, PROT_READ | PROT_WRITE,
			     MAP_SHARED, ep->fd, (off_t)info.user_page_offset);
	if (ep->user_page == MAP_FAILED) {
		ep->user_page = NULL;
		goto fail_errno;
	}
	ep->doorbell = (volatile uint32_t *)((char *)ep->user_page +
					     A_USER_DOORBELL);
	ep->link_poll = (volatile uint32_t *)((char *)ep->user_page +
					      A_USER_LINK_POLL);
	poll = env_switch("NIU_LINK_POLL", true, "busy polling") ?
		*ep->link_poll : R_USER_LINK_POLL_NONE_MASK;
	if (poll & R_USER_LINK_POLL_NONE_MASK)
		ep->link_poll = NULL;
	else
		ep->link_poll_yields = poll & R_USER_LINK_POLL_YIELDS_MASK;
	/*
	 * Every slot this library writes behind a taken one is rung for
	 * (niu_lib_ring_doorbell()): the NIU need not poll the endpoint.  A
	 * driver without the request (ENOTTY) polls it all the same.
	 */
	poll = env_switch("NIU_TX_POLL", false, "Tx polling");
	if (ioctl(ep->fd, ARCTIC_NIU_IOC_TX_POLL, &poll) < 0 && errno != ENOTTY)
		goto fail_errno;
	ep->dma_tx = (volatile struct arctic_dma_request *)
		((char *)ep->queues + ARCTIC_MMAP_DMA_TX);
	for (p = 0; p < NIU_NUM_PRIORITIES; p++) {
		ep->tx[p] = (volatile struct arctic_mpi_slot *)
			((char *)ep->queues + queue_view_offset[0][p]);
		ep->rx[p] = (volatile struct arctic_mpi_slot *)
			((char *)ep->queues + queue_view_offset[1][p]);
	}
	niu_lib_queues_set(ep);
	err = niu_lib_stashes_ready(ep);
	if (err) {
		niu_close(ep);
		return err;
	}
	return 0;

fail_errno:
	err = -errno;
	niu_close(ep);
	return err;
}

/*
 * Messages the library read ahead (the stash) that the program never took
 * go back to the driver, which puts them in front of the receive queue
 * for the endpoint's next program, as it keeps the unread ones: a peer's
 * next program may already have sent them (a barrier of its own), and no
 * NIU would send them again (ARCTIC_NIU_IOC_KEEP_UNREAD).
 */
#ifndef NIU_LIB_KEEP_UNREAD	/* test-libniu.c looks at what goes back */
#define NIU_LIB_KEEP_UNREAD(fd, req) ioctl(fd, ARCTIC_NIU_IOC_KEEP_UNREAD, req)
#endif

static void give_back_stash(struct niu_endpoint *ep, enum niu_priority prio)
{
	struct niu_stash *stash = &ep->stash[prio];
	struct arctic_niu_keep_unread req = { .priority = prio };
	struct arctic_mpi_slot *slots;
	unsigned int i, n = stash->count;

	if (!n || ep->fd < 0)
		return;
	if (n > ARCTIC_N) {
		fprintf(stderr, "libniu: %u message(s) read ahead and never "
			"taken; the oldest %u lost at close\n", n, n - ARCTIC_N);
		n = ARCTIC_N;
	}
	slots = calloc(n, sizeof(*slots));
	if (!slots)
		goto lost;
	for (i = 0; i < n; i++) {
		const struct niu_msg *msg = &stash->msgs[
			(stash->head + stash->count - n + i) % stash->capacity];

		slots[i].header = niu_lib_header(msg->source, msg->endpoint,
						 msg->type, msg->mode,
						 msg->length);
		slots[i].command[0] = msg->command[0];
		slots[i].command[1] = msg->command[1];
		memcpy(slots[i].payload, msg->payload,
		       msg->length * sizeof(msg->payload[0]));
	}
	req.count = n;
	req.slots = (uintptr_t)slots;
	if (NIU_LIB_KEEP_UNREAD(ep->fd, &req) == 0) {
		free(slots);
		return;
	}
	free(slots);
lost:
	fprintf(stderr, "libniu: %u message(s) read ahead and never taken "
		"could not be kept for the next program: %s\n", n,
		strerror(errno));
}

void niu_close(struct niu_endpoint *ep)
{
	int p;

	for (p = 0; p < NIU_NUM_PRIORITIES; p++) {
		give_back_stash(ep, p);
		free(ep->stash[p].msgs);
	}
	if (ep->user_page)
		munmap(ep->user_page, ARCTIC_NIU_MMAP_USER_PAGE_SIZE);
	if (ep->queues && ep->queues != MAP_FAILED)
		munmap(ep->queues, NIU_QUEUES_VIEW_SIZE);
	if (ep->dma_window)
		munmap(ep->dma_window, ARCTIC_NIU_DMA_WINDOW_SIZE);
	if (ep->fd >= 0)
		close(ep->fd);
	memset(ep, 0, sizeof(*ep));
	ep->fd = -1;
}


/*
 * Up to @most messages waiting in @prio's receive queue into its stash;
 * returns whether it took any.
 */
static bool keep_queue(struct niu_endpoint *ep, enum niu_priority prio,
		       unsigned int most)
{
	struct niu_msg msg;
	unsigned int kept = 0;

	while (kept < most && niu_lib_take_slot(ep, prio, &msg)) {
		if (niu_lib_stash_put(&ep->stash[prio], &msg))
			abort();	/* a million unread messages */
		kept++;
	}
	return kept;
}

/*
 * Take whatever has arrived at both priorities and keep it aside, so that
 * a peer blocked sending to us can go on while we wait for the NIU.
 */
void niu_lib_keep_incoming(struct niu_endpoint *ep)
{
	int p;

	for (p = NIU_HI; p < NIU_NUM_PRIORITIES; p++)
		keep_queue(ep, p, UINT_MAX);
}

/*
 * A wait that reads one priority's queue keeps the other's messages
 * aside, so that queue never fills while nobody reads it.  A full
 * receive queue makes the NIU refuse (nack) what comes, and the senders
 * retry: with 64 nodes, a node in a low-priority collective left its
 * high-priority queue full of the next barrier's messages, and the
 * high-priority retries and nacks that followed kept the switch's
 * buffers from the low-priority packets the collective waited for
 * (docs/scale.md).  Every reader of a priority looks in its stash first.
 *
 * One message a call: the waiter looks at its own queue between two, so
 * a stream at the other priority that comes faster than the stash takes
 * it cannot keep the waiter from what it waits for (a barrier's
 * high-priority message waited 10 ms behind a gather's low-priority
 * stream while its node stashed, docs/timed-mode.md "One clock").  The
 * other queue still drains as fast: a wait calls this every turn.
 */
void niu_lib_keep_other(struct niu_endpoint *ep, enum niu_priority reading)
{
	keep_queue(ep, reading == NIU_HI ? NIU_LO : NIU_HI, 1);
}

/*
 * Wait for our next Tx slot (seed 002 section 3.2.1 step 1), which a send
 * found still valid, and keep receiving meanwhile (footnote 3).  A
 * low-priority send outside a handler runs active-message handlers, whose
 * replies go out at high priority; a reply, or anything sent from inside
 * a handler, only keeps messages aside, so handlers never nest.
 */
void niu_lib_wait_tx_slot(struct niu_endpoint *ep, enum niu_priority prio)
{
	enum niu_time_kind was = (enum niu_time_kind)ep->time.kind;
	unsigned int spins = 0;

	while (!niu_lib_tx_slot_free(ep, prio)) {
		if (prio == NIU_LO && ep->am_handler_count && !ep->am_depth)
			niu_am_poll(ep);
		else
			niu_lib_keep_incoming(ep);
		niu_lib_idle(ep, &spins, NIU_WAIT_TX);
	}
	niu_lib_time_leave(ep, was);
}

/* Out of line, even here, where niu_send() would take it in. */
__attribute__((noinline))
void niu_lib_send_after_wait(struct niu_endpoint *ep, enum niu_priority prio,
			     uint32_t header, uint32_t command0,
			     uint32_t command1, const uint32_t *payload,
			     unsigned int length)
{
	niu_lib_wait_tx_slot(ep, prio);
	niu_lib_send_slot(ep, prio, header, command0, command1, payload,
			  length);
}

int niu_send(struct niu_endpoint *ep, enum niu_priority prio, uint32_t dest,
	     uint32_t dest_endpoint, uint32_t type, uint32_t command0,
	     uint32_t command1, const uint32_t *payload, unsigned int length)
{
	NIU_REFUSE_IF(type >= NIU_TYPE_LIBRARY_MIN);
	/*
	 * A copy of the send for each priority, a constant in each: no
	 * register holds it, no index scales by it, the doorbell's bit is an
	 * immediate (six pushes and pops fewer, docs/guest.md).
	 */
	if (prio == NIU_HI)
		return niu_lib_send_any_type(ep, NIU_HI, dest, dest_endpoint,
					     type, command0, command1, payload,
					     length);
	NIU_REFUSE_IF(prio != NIU_LO);
	return niu_lib_send_any_type(ep, NIU_LO, dest, dest_endpoint, type,
				     command0, command1, payload, length);
}

/*
 * Clear a header that still holds @stale, atomically: if the NIU has
 * meanwhile written the slot's next message, that header stays.
 */
static bool clear_stale_header(volatile uint32_t *header, uint32_t stale)
{
	return __atomic_compare_exchange_n(header, &stale, 0, false,
					   __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/*
 * What a peer-down notice (from our NIU) or message (from another node's
 * libniu) says: the node, or -1 if it is neither.  *@from_niu tells which.
 */
static int64_t peer_down_in(uint32_t header, uint32_t command0,
			    uint32_t command1, bool *from_niu)
{
	uint32_t type = ARCTIC_FIELD_GET(MPI_HEADER, TYPE, header);

	*from_niu = ARCTIC_FIELD_GET(MPI_HEADER, MODE, header) ==
		    ARCTIC_MODE_DMA;
	if (*from_niu)
		return command1 == ARCTIC_NOTICE_PEER_DEAD ? (int64_t)command0
							   : -1;
	return type == NIU_TYPE_PEER_DOWN ? (int64_t)command0 : -1;
}

/*
 * A node stopped answering: remember which.  When our own NIU found out,
 * tell every other node once: one may be waiting for a message that node
 * will never send, with nothing in flight to it that its NIU could time
 * out.  What another node tells us is not passed on again.
 */
static void note_peer_down(struct niu_endpoint *ep, uint32_t node,
			   bool tell_others)
{
	uint32_t p;

	if (!ep->peer_down) {
		ep->peer_down = true;
		ep->down_node = node;
	}
	if (!tell_others || ep->abort_sent)
		return;
	ep->abort_sent = true;		/* the sends below may take slots */
	for (p = 0; p < ep->num_nodes; p++)
		if (p != ep->node && p != node)
			niu_lib_send_any_type(ep, NIU_HI, p, ep->endpoint,
				      NIU_TYPE_PEER_DOWN, node, 0, NULL, 0);
}

/*
 * A wait that lasts: put a probe in flight to every other node.  A node
 * that died then leaves a probe unanswered, and its own NIU's peer timeout
 * tells us, even when we only wait for that node and sent it nothing.
 * The receiving libniu drops probes; a live NIU acknowledges them.
 */
static void send_probes(struct niu_endpoint *ep)
{
	uint32_t p;

	ep->probing = true;	/* the sends below may wait, and idle */
	for (p = 0; p < ep->num_nodes && !ep->peer_down; p++)
		if (p != ep->node)
			niu_lib_send_any_type(ep, NIU_HI, p, ep->endpoint,
				      NIU_TYPE_PROBE, 0, 0, NULL, 0);
	ep->probing = false;
}

int niu_peer_down(struct niu_endpoint *ep)
{
	volatile struct arctic_mpi_slot *rx = ep->rx[NIU_HI];
	uint32_t i, at, lap, header;
	bool from_niu;
	int64_t node;

	/* A notice may wait in HiRx behind messages nobody reads yet. */
	for (i = 0; !ep->peer_down && i < ARCTIC_N; i++) {
		at = (ep->rx_tail[NIU_HI] + i) % ARCTIC_N;
		lap = ep->rx_lap[NIU_HI] ^ (at < ep->rx_tail[NIU_HI]);
		header = rx[at].header;
		if (!(header & ARCTIC_MPI_VALID) ||
		    ARCTIC_FIELD_GET(MPI_HEADER, LAP, header) != lap)
			break;
		atomic_thread_fence(memory_order_acquire);
		node = peer_down_in(header, rx[at].command[0],
				    rx[at].command[1], &from_niu);
		if (node >= 0)
			note_peer_down(ep, (uint32_t)node, from_niu);
	}
	return ep->peer_down ? (int)ep->down_node : -1;
}

/* Seed 002 section 3.2.2, ReceiveHi/ReceiveLo, without waiting. */
int niu_lib_take_slot(struct niu_endpoint *ep, enum niu_priority prio,
		      struct niu_msg *msg)
{
	volatile struct arctic_mpi_slot *slot = ep->rx_next[prio];
	uint32_t header = slot->header, length;
	bool from_niu;
	int64_t node;

	if (!(header & ARCTIC_MPI_VALID))			/* step 1 */
		return 0;
	if (ARCTIC_FIELD_GET(MPI_HEADER, LAP, header) != ep->rx_lap[prio]) {
		/*
		 * The header of the message this slot held a lap ago, back
		 * after we cleared it: not a message.  Clear it again, or
		 * the NIU would find the slot still taken.
		 */
		ep->stale_headers++;
		clear_stale_header(&slot->header, header);
		return 0;
	}
	length = ARCTIC_FIELD_GET(MPI_HEADER, LENGTH, header);
	if (length > NIU_MAX_PAYLOAD)		/* the NIU never does this */
		length = NIU_MAX_PAYLOAD;
	niu_lib_copy_slot(ep, prio, slot, header,		/* 2-6 */
			  ARCTIC_FIELD_GET(MPI_HEADER, MODE, header), length,
			  ARCTIC_FIELD_GET(MPI_HEADER, ENDPOINT, header), msg);
	niu_lib_time_taken(ep);
	node = peer_down_in(header, msg->command[0], msg->command[1],
			    &from_niu);
	if (node >= 0) {
		/* Not a message for the program: it learns from the error. */
		note_peer_down(ep, (uint32_t)node, from_niu);
		return niu_lib_take_slot(ep, prio, msg);
	}
	if (!from_niu && msg->type == NIU_TYPE_PROBE)
		return niu_lib_take_slot(ep, prio, msg);	/* its job is done */
	return 1;
}

/* Double the stash, unwrapping it so that head is 0 again. */
static int stash_grow(struct niu_stash *stash)
{
	unsigned int capacity = stash->capacity ? stash->capacity * 2 :
				NIU_STASH_SLOTS, i;
	struct niu_msg *msgs;

	if (capacity > NIU_STASH_MAX)
		return -ENOSPC;
	msgs = malloc(capacity * sizeof(*msgs));
	if (!msgs)
		return -ENOSPC;
	for (i = 0; i < stash->count; i++)
		msgs[i] = stash->msgs[(stash->head + i) % stash->capacity];
	free(stash->msgs);
	stash->msgs = msgs;
	stash->head = 0;
	stash->capacity = capacity;
	return 0;
}

/*
 * Both stashes at their first size with every page touched, at open: the
 * first message kept aside then costs what every later one costs.  Grown
 * on first use, the stash cost 25-86 us of a timed window (glibc's malloc
 * of 112 KiB, whose work depends on what the heap held before: the
 * kernels that ran earlier), inside whichever window first received a
 * message out of turn, so a kernel's time moved with what ran before it
 * (docs/timed-mode.md, "One clock").
 */
int niu_lib_stashes_ready(struct niu_endpoint *ep)
{
	int p;

	for (p = 0; p < NIU_NUM_PRIORITIES; p++) {
		struct niu_stash *stash = &ep->stash[p];

		if (stash->capacity)
			continue;
		if (stash_grow(stash))
			return -ENOMEM;
		memset(stash->msgs, 0, stash->capacity * sizeof(*stash->msgs));
	}
	return 0;
}

int niu_lib_stash_put(struct niu_stash *stash, const struct niu_msg *msg)
{
	if (stash->count == stash->capacity && stash_grow(stash))
		return -ENOSPC;
	stash->msgs[(stash->head + stash->count) % stash->capacity] = *msg;
	stash->count++;
	return 0;
}

/*
 * Remove and return the oldest stashed message that @match accepts.  The
 * older messages it skipped move down one place and the head past it, so
 * the order is kept and taking the oldest moves nothing: a program that
 * reads a stash of tens of thousands of messages (a fast peer's stream,
 * kept while its own sends waited for slots) reads it in linear time,
 * where moving every later message made each read cost the whole stash.
 */
int niu_lib_stash_take(struct niu_stash *stash,
		      int (*match)(const struct niu_msg *, const void *),
		      const void *arg, struct niu_msg *msg)
{
	unsigned int i, j, at, prev;

	for (i = 0; i < stash->count; i++) {
		at = (stash->head + i) % stash->capacity;
		if (!match(&stash->msgs[at], arg))
			continue;
		*msg = stash->msgs[at];
		for (j = i; j > 0; j--) {
			at = (stash->head + j) % stash->capacity;
			prev = (stash->head + j - 1) % stash->capacity;
			stash->msgs[at] = stash->msgs[prev];
		}
		stash->head = (stash->head + 1) % stash->capacity;
		stash->count--;
		return 1;
	}
	return 0;
}

/*
 * Hand every stashed message that @match accepts to @consume, oldest
 * first, and close up the rest in one pass; @consume must not touch the
 * stash.  niu_lib_stash_take() would be quadratic in the thousands of messages a
 * fast peer can send for the next collective.
 */
void niu_lib_stash_drain(struct niu_stash *stash,
			int (*match)(const struct niu_msg *, const void *),
			void (*consume)(const struct niu_msg *, void *),
			void *arg)
{
	unsigned int i, kept = 0, from, to;

	for (i = 0; i < stash->count; i++) {
		from = (stash->head + i) % stash->capacity;
		if (match(&stash->msgs[from], arg)) {
			consume(&stash->msgs[from], arg);
			continue;
		}
		to = (stash->head + kept++) % stash->capacity;
		if (to != from)
			stash->msgs[to] = stash->msgs[from];
	}
	stash->count = kept;
}

static int is_user_msg(const struct niu_msg *msg, const void *unused)
{
	(void)unused;
	return msg->type < NIU_TYPE_LIBRARY_MIN;
}

/* niu_try_recv() past its common path (niu_lib_take_user()). */
static __attribute__((noinline)) int try_recv_other(struct niu_endpoint *ep,
						    enum niu_priority prio,
						    struct niu_msg *msg)
{
	if (niu_lib_stash_take(&ep->stash[prio], is_user_msg, NULL, msg))
		return 1;
	while (niu_lib_take_slot(ep, prio, msg)) {
		if (is_user_msg(msg, NULL))
			return 1;
		/* A library message for a later barrier: keep it. */
		if (niu_lib_stash_put(&ep->stash[prio], msg))
			abort();
	}
	return 0;
}

/*
 * With nothing kept aside at @prio, a program's message at the tail is
 * the next one the program gets: niu_lib_take_user() takes it.
 */
int niu_try_recv(struct niu_endpoint *ep, enum niu_priority prio,
		 struct niu_msg *msg)
{
	if (!ep->stash[prio].count) {
		enum niu_slot found = niu_lib_take_user(ep, prio, msg);

		if (found != NIU_SLOT_OTHER)
			return found == NIU_SLOT_TAKEN;
	}
	return try_recv_other(ep, prio, msg);
}

/* niu_recv() past its common path: the wait. */
static __attribute__((noinline)) int recv_wait(struct niu_endpoint *ep,
					       enum niu_priority prio,
					       struct niu_msg *msg)
{
	enum niu_time_kind was = niu_lib_time_enter(ep, NIU_TIME_RECV);
	unsigned int spins = 0;
	int ret = 0;

	while (!niu_try_recv(ep, prio, msg)) {
		if (ep->peer_down) {
			ret = -EHOSTDOWN;
			break;
		}
		niu_lib_keep_other(ep, prio);
		niu_lib_idle(ep, &spins, NIU_WAIT_RX);
	}
	niu_lib_time_leave(ep, was);
	return ret;
}

/* niu_recv()'s common path at a constant @prio. */
NIU_INLINE int recv_common(struct niu_endpoint *ep, enum niu_priority prio,
			   struct niu_msg *msg)
{
	if (!ep->stash[prio].count &&
	    niu_lib_take_user(ep, prio, msg) == NIU_SLOT_TAKEN)
		return 0;
	return recv_wait(ep, prio, msg);
}

/* One copy per priority, as niu_send(). */
int niu_recv(struct niu_endpoint *ep, enum niu_priority prio,
	     struct niu_msg *msg)
{
	if (prio == NIU_HI)
		return recv_common(ep, NIU_HI, msg);
	NIU_REFUSE_IF(prio != NIU_LO);
	return recv_common(ep, NIU_LO, msg);
}

int niu_recv_any(struct niu_endpoint *ep, struct niu_msg *msg,
		 enum niu_priority *prio)
{
	enum niu_time_kind was = niu_lib_time_enter(ep, NIU_TIME_RECV);
	unsigned int spins = 0;
	enum niu_priority p;
	int ret = 0;

	for (;;) {
		for (p = NIU_HI; p < NIU_NUM_PRIORITIES; p++) {
			if (niu_try_recv(ep, p, msg)) {
				if (prio)
					*prio = p;
				goto out;
			}
		}
		if (ep->peer_down) {
			ret = -EHOSTDOWN;
			goto out;
		}
		niu_lib_idle(ep, &spins, NIU_WAIT_RX);
	}
out:
	niu_lib_time_leave(ep, was);
	return ret;
}

struct barrier_wait {
	uint32_t source, epoch, round;
};

static int is_barrier_msg(const struct niu_msg *msg, const void *arg)
{
	const struct barrier_wait *want = arg;

	return msg->type == NIU_TYPE_BARRIER && msg->source == want->source &&
	       msg->command[0] == want->epoch &&
	       msg->command[1] == want->round;
}

/* Wait for one barrier message, keeping whatever else arrives. */
static int barrier_wait(struct niu_endpoint *ep,
			const struct barrier_wait *want)
{
	struct niu_stash *stash = &ep->stash[NIU_HI];
	unsigned int spins = 0;
	struct niu_msg msg;

	if (niu_lib_stash_take(stash, is_barrier_msg, want, &msg))
		return 0;
	for (;;) {
		niu_lib_keep_other(ep, NIU_HI);
		while (niu_lib_take_slot(ep, NIU_HI, &msg)) {
			if (is_barrier_msg(&msg, want))
				return 0;
			if (niu_lib_stash_put(stash, &msg))
				return -ENOSPC;
		}
		if (ep->peer_down)
			return -EHOSTDOWN;
		niu_lib_idle(ep, &spins, NIU_WAIT_RX);
	}
}

int niu_barrier(struct niu_endpoint *ep)
{
	uint32_t n = ep->num_nodes, me = ep->node, distance, round = 0;
	enum niu_time_kind was;
	struct barrier_wait want;
	int ret = 0;

	if (n < 2)
		return 0;
	was = niu_lib_time_enter(ep, NIU_TIME_BARRIER);
	ep->barrier_epoch++;
	for (distance = 1; distance < n; distance *= 2, round++) {
		ret = niu_lib_send_any_type(ep, NIU_HI, (me + distance) % n,
				    ep->endpoint, NIU_TYPE_BARRIER,
				    ep->barrier_epoch, round, NULL, 0);
		if (ret)
			break;
		want.source = (me + n - distance) % n;
		want.epoch = ep->barrier_epoch;
		want.round = round;
		ret = barrier_wait(ep, &want);
		if (ret)
			break;
	}
	niu_lib_time_leave(ep, was);
	return ret;
}

