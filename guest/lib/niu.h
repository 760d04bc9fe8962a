/* SPDX-License-Identifier: MIT */
/*
 * libniu: the user-level interface to an Arctic NIU endpoint, in the terms
 * of seed 002 section 3.  A program opens one endpoint (a virtual NIU of its
 * own, owned through /dev/arctic-niuN), then sends and receives messages of
 * up to 20 words at high or low priority by writing and reading 128-byte
 * slots in its mapped queues: no system call per message.  Sends ring the
 * endpoint's doorbell (the fast path of seed 002 section 3.1.1) so the NIU
 * does not wait for its next poll.  Receives are polls of the valid bit;
 * niu_recv() spins until a message arrives.
 *
 * Message types NIU_TYPE_LIBRARY_MIN..127 are kept for the library itself
 * (barrier, collectives, block transfers); niu_recv() never returns them,
 * and a user message that arrives while the library waits for one of its
 * own is kept aside in order and returned later.  A send that finds its
 * Tx slot still owned by the NIU keeps taking incoming messages meanwhile
 * (seed 002 footnote 3): two nodes that both send more than a queue holds
 * to each other would otherwise wait on each other forever.
 *
 * On top of that: collectives (barrier, broadcast, gather, reduce,
 * all-to-all), which every node of the network calls in the same order,
 * and active messages in the manner of StarT-JR's JAM (seed 003 Table 1):
 * a handler table indexed by message type, requests at low priority,
 * replies at high priority, and block transfers into registered segments
 * whose handler runs when the segment is full.
 *
 * Remote DMA (seed 002 section 3.3): niu_dma_window() gives the endpoint
 * its 4 MiB window, mapped at an address that is also its DMA name, and
 * niu_dma_send() moves 2048-byte blocks from it into a peer's window.
 *
 * dMPI raw mode (seed 002 sections 2.3, 3.4; niu-raw.c): the owner of
 * endpoint 0 may turn the whole NIU's datapaths OFF and send and receive
 * raw Arctic packets through the FIFO access points of its user page.
 *
 * Not thread-safe: one thread per endpoint.
 */
#ifndef NIU_H
#define NIU_H

#include <stdbool.h>
#include <stdint.h>

#include "arctic/niu-hw.h"
#include "arctic/packet.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Priorities; HI is never blocked by LO anywhere in the network. */
enum niu_priority {
	NIU_HI = 0,
	NIU_LO = 1,
	NIU_NUM_PRIORITIES = 2,
};

enum {
	NIU_MAX_PAYLOAD = ARCTIC_MAX_PAYLOAD,	/* words per message */
	NIU_MAX_TYPE = 127,			/* TYPE is 7 bits */
	NIU_TYPE_LIBRARY_MIN = 120,		/* 120..127: libniu's own */
	NIU_STASH_SLOTS = 1024,			/* kept aside, at first */
	NIU_STASH_MAX = 1 << 20,		/* kept aside, at most */
	NIU_AM_SEGMENTS = 16,			/* block-transfer targets */
};

/* A received message (seed 002 section 3.2.2's outputs). */
struct niu_msg {
	uint32_t source;		/* node that sent it */
	uint32_t endpoint;		/* endpoint it was sent to (ours) */
	uint32_t type;
	/*
	 * 0 for a message.  1 (ARCTIC_MODE_DMA) for what is not a plain
	 * message: a DMA error notice of our own NIU (source = this node,
	 * command[1] = enum arctic_dma_status), or the notification of a
	 * remote DMA into our window whose data our NIU refused, some or all
	 * of it (target outside the window): the block is not there.
	 */
	uint32_t mode;
	uint32_t command[2];
	uint32_t length;		/* payload words, 0..20 */
	uint32_t payload[NIU_MAX_PAYLOAD];
};

/* Messages received while waiting for something else, oldest first. */
struct niu_stash {
	struct niu_msg *msgs;
	unsigned int head, count, capacity;
};

struct niu_endpoint;

/*
 * Where an endpoint's time goes (niu_stats_time()): what the processor
 * did inside the library, by kind, and the rest.
 */
enum niu_time_kind {
	/*
	 * Outside the library's accounted paths: the program's own work, and
	 * the common path of niu_send(), niu_recv(), niu_try_recv() and the
	 * active messages (a free slot, a message waiting), which takes no
	 * time stamp so as to stay lean (docs/guest.md, "The instruction
	 * budget"; niu-ping -c counts its instructions).
	 */
	NIU_TIME_OUTSIDE,
	NIU_TIME_SEND,		/* writing messages and DMA requests */
	NIU_TIME_RECV,		/* taking messages and placing them, the
				 * collectives' own work */
	NIU_TIME_WAIT,		/* empty polls: for a message, a Tx slot */
	NIU_TIME_BARRIER,	/* all of niu_barrier(), its sends and waits */
	NIU_TIME_KINDS,
};

/* The accounting's state (niu_stats_time_on()); read-only for programs. */
struct niu_time_account {
	bool on;
	uint8_t kind;			/* enum niu_time_kind now */
	uint64_t since;			/* ticks when it began */
	uint64_t ticks[NIU_TIME_KINDS];	/* so far, in the clock's ticks */
	uint64_t start_ticks, start_ns;	/* at niu_stats_time_on(): */
	uint64_t stop_ticks, stop_ns;	/* ticks to ns (0: still on) */
};

/*
 * An active-message handler: @msg is the request or reply (its source,
 * type, command words and up to 20 argument words in payload).  A request
 * handler may send one reply with niu_am_reply(); a reply handler must not
 * send at all, which is what keeps the two priorities free of deadlock.
 */
typedef void (*niu_am_handler)(struct niu_endpoint *ep,
			       const struct niu_msg *msg);

/*
 * Runs on the receiving node when a segment has received all the words it
 * was opened for (CMAM's transfer counter reaching zero).
 */
typedef void (*niu_am_segment_handler)(struct niu_endpoint *ep,
				       unsigned int segment, void *arg);

/* A block-transfer target (seed 003 Table 1, JAM_xfer/JAM_mfer). */
struct niu_am_segment {
	uint32_t *base;			/* NULL: not open */
	uint32_t words;			/* size */
	uint32_t remaining;		/* words still expected */
	niu_am_segment_handler done;
	void *arg;
};

/* An open endpoint.  Fields are read-only for the caller. */
struct niu_endpoint {
	int fd;
	uint32_t node;			/* this node */
	uint32_t num_nodes;		/* nodes in the network */
	uint32_t endpoint;		/* our endpoint number */
	volatile struct arctic_mpi_slot *tx[NIU_NUM_PRIORITIES];
	volatile struct arctic_mpi_slot *rx[NIU_NUM_PRIORITIES];
	volatile struct arctic_dma_request *dma_tx;
	volatile uint32_t *doorbell;	/* NULL: rely on the NIU's polling */
	volatile uint32_t *link_poll;	/* USER_LINK_POLL, read by every empty
					 * poll of a wait; NULL: not busy
					 * polling (NIU_LINK_POLL=0, or a
					 * link that cannot) */
	bool link_poll_yields;		/* an empty poll gives the host
					 * core away (YIELDS): polled even
					 * with an idle sleep */
	uint32_t dma_tx_head;		/* next DMATx slot we fill */
	void *dma_window;		/* NULL until niu_dma_window() */
	uint32_t tx_head[NIU_NUM_PRIORITIES];	/* next slot we fill */
	volatile uint32_t *tx_last[NIU_NUM_PRIORITIES];	/* the header of
					 * the slot before it (the doorbell) */
	uint32_t rx_tail[NIU_NUM_PRIORITIES];	/* next slot we read */
	volatile struct arctic_mpi_slot *rx_next[NIU_NUM_PRIORITIES];
					/* the same slot, its address */
	uint32_t rx_lap[NIU_NUM_PRIORITIES];	/* its lap's parity (0, 1) */
	uint32_t rx_lap_header[NIU_NUM_PRIORITIES];	/* the same as a slot
					 * header's LAP field, for the
					 * common receive's one test */
	uint32_t am_request_header;	/* VALID, our endpoint, MODE MPI: the
					 * part of a request's header that
					 * never changes, made at open */
	uint64_t doorbells_skipped;	/* sends whose doorbell the NIU did
					 * not need
					 * (niu_lib_ring_doorbell()) */
	uint64_t stale_headers;		/* valid headers of a past lap found
					 * and cleared again (docs/guest.md,
					 * Known problems); normally 0 */
	struct niu_stash stash[NIU_NUM_PRIORITIES];
	unsigned int idle_sleep_us;	/* see niu_set_idle_sleep() */
	uint32_t barrier_epoch;
	uint32_t collective_epoch;	/* collectives called so far */
	/* By message type; the library's types (120..127) stay NULL, so
	 * the type indexes the table with no range check. */
	niu_am_handler am_handlers[NIU_MAX_TYPE + 1];
	unsigned int am_handler_count;	/* handlers and open segments */
	unsigned int am_depth;		/* >0 while a handler runs */
	struct niu_am_segment am_segments[NIU_AM_SEGMENTS];
	uint64_t am_errors;		/* transfers refused (bad segment) */
	bool peer_down;			/* a node stopped answering: */
	uint32_t down_node;		/* which (niu_peer_down()) */
	bool abort_sent;		/* the others were told */
	uint64_t wait_start_ns;		/* of the current wait, or 0 */
	uint64_t next_probe_ns;		/* see send_probes() in niu.c */
	uint64_t probe_after_ns;	/* 0: never probe */
	uint64_t probe_every_ns;
	bool probing;
	struct niu_time_account time;	/* niu_stats_time() */
	void *queues;			/* the mmap()ed queue view */
	void *user_page;		/* the mmap()ed doorbell page */
};

/*
 * Open an endpoint of the NIU behind @path (NULL: /dev/arctic-niu0) and map
 * its queues and doorbell.  Returns 0 or a negative errno (-EBUSY when all
 * endpoints are taken, -ENOLINK when the switch is not reachable).
 */
int niu_open(struct niu_endpoint *ep, const char *path);

/* Unmap and release the endpoint; the driver empties its queues. */
void niu_close(struct niu_endpoint *ep);

/*
 * Send @length (0..20) payload words to endpoint @dest_endpoint of node
 * @dest at priority @prio, with a user @type (0..119) and two command
 * words.  Waits while the next Tx slot is still owned by the NIU (seed 002
 * section 3.2.1 step 1).  Returns 0 or -EINVAL for a bad argument.
 */
int niu_send(struct niu_endpoint *ep, enum niu_priority prio, uint32_t dest,
	     uint32_t dest_endpoint, uint32_t type, uint32_t command0,
	     uint32_t command1, const uint32_t *payload, unsigned int length);

/* Take the next user message of @prio if there is one: 1 taken, 0 none. */
int niu_try_recv(struct niu_endpoint *ep, enum niu_priority prio,
		 struct niu_msg *msg);

/*
 * Wait for the next user message of @prio.  Returns 0, -EINVAL for a
 * @prio that is neither NIU_HI nor NIU_LO, or -EHOSTDOWN once a node has
 * stopped answering (niu_peer_down()).
 */
int niu_recv(struct niu_endpoint *ep, enum niu_priority prio,
	     struct niu_msg *msg);

/*
 * Wait for the next user message of either priority, high first; stores
 * the priority it came on in @prio if not NULL.  Returns 0 or -EHOSTDOWN,
 * as niu_recv().
 */
int niu_recv_any(struct niu_endpoint *ep, struct niu_msg *msg,
		 enum niu_priority *prio);

/*
 * Wait until every node 0..num_nodes-1 has entered the barrier (the same
 * endpoint number on every node takes part).  Dissemination algorithm:
 * ceil(log2 n) rounds of one high-priority message each.  Returns 0,
 * -ENOSPC when too many user messages arrived meanwhile to keep aside, or
 * -EHOSTDOWN as niu_recv().
 */
int niu_barrier(struct niu_endpoint *ep);

/*
 * A dead node.  When a node answers nothing for the NIU's peer timeout
 * (device property peer-timeout-ms, 10 s by default), the NIU drops what
 * this endpoint had sent it and leaves a notice in HiRx
 * (ARCTIC_NOTICE_PEER_DEAD).  libniu then tells every other node (a
 * library message, as MPI_Abort does), and from then on every call that
 * waits for a message (niu_recv(), niu_recv_any(), the barrier and the
 * collectives) returns -EHOSTDOWN instead of waiting for ever.  So that
 * a node that only waits for a dead one learns it too, a wait longer than
 * a second puts a small library message (a probe, dropped by the
 * receiving libniu) in flight to every other node, and again every 5 s.
 * Returns the node that stopped answering, or -1 while none has.
 */
int niu_peer_down(struct niu_endpoint *ep);

/*
 * Collectives.  Every node 0..num_nodes-1 calls the same ones in the same
 * order with matching sizes; their data travels at low priority in
 * messages of 20 words tagged with a per-collective number, so messages of
 * a later collective that arrive early are kept aside, not mistaken.
 * Each returns 0, -EINVAL for a bad argument, -EPROTO when a message did
 * not fit the sizes given (a peer called with other sizes), or -EHOSTDOWN
 * once a node has stopped answering (niu_peer_down()).
 */

/*
 * The general exchange: send @send_words[p] words from @send[p] to every
 * node p and receive @recv_words[p] words from every node p into @recv[p]
 * (arrays of num_nodes entries; a zero count needs no buffer).  The node's
 * own block is copied and must have equal counts.  Sends go round-robin
 * over the peers while incoming messages are taken, so no pair of nodes
 * waits on each other whatever the sizes.
 */
int niu_alltoallv(struct niu_endpoint *ep, const uint32_t *const send[],
		  const size_t send_words[], uint32_t *const recv[],
		  const size_t recv_words[]);

/*
 * All-to-all personalised exchange of @words words per pair: block p of
 * @send (words p*@words..) goes to node p, block p of @recv comes from it.
 */
int niu_alltoall(struct niu_endpoint *ep, const uint32_t *send,
		 uint32_t *recv, size_t words);

/* Copy @words words of @buf on node @root into @buf on every node. */
int niu_bcast(struct niu_endpoint *ep, uint32_t root, uint32_t *buf,
	      size_t words);

/*
 * Collect @words words of @send from every node into @recv on @root,
 * node p's at @recv + p * @words (@recv is ignored elsewhere).
 */
int niu_gather(struct niu_endpoint *ep, uint32_t root, const uint32_t *send,
	       uint32_t *recv, size_t words);

/* Element types and operators of niu_reduce(). */
enum niu_reduce_op {
	NIU_SUM_F64,	/* double */
	NIU_MAX_F64,
	NIU_SUM_I64,	/* int64_t */
	NIU_MAX_I64,
};

/*
 * Combine the @count 8-byte elements of @buf element-wise over all nodes
 * with @op; the result replaces @buf on @root (elsewhere @buf is kept).
 * Contributions are combined in node order, so a floating-point sum is the
 * same on every run.
 */
int niu_reduce(struct niu_endpoint *ep, uint32_t root, enum niu_reduce_op op,
	       void *buf, size_t count);

/* niu_reduce() with the result on every node. */
int niu_allreduce(struct niu_endpoint *ep, enum niu_reduce_op op, void *buf,
		  size_t count);

/*
 * Active messages.  A message whose type has a handler is an active
 * message: niu_am_poll() runs the handler instead of leaving it to
 * niu_recv().  command[0] of a request carries the sender's endpoint, so
 * the reply finds it.
 */

/* Set (or with NULL clear) the handler of user @type (0..119). */
int niu_am_register(struct niu_endpoint *ep, uint32_t type,
		    niu_am_handler handler);

/*
 * Send a request (low priority) to node @dest, same endpoint number as
 * ours, running handler @type there with @nargs (0..20) argument words.
 * While the Tx queue is full it runs incoming handlers.  Returns 0 or
 * -EINVAL.
 */
int niu_am_request(struct niu_endpoint *ep, uint32_t dest, uint32_t type,
		   const uint32_t *args, unsigned int nargs);

/* Reply (high priority) to the sender of request @to: handler @type. */
int niu_am_reply(struct niu_endpoint *ep, const struct niu_msg *to,
		 uint32_t type, const uint32_t *args, unsigned int nargs);

/*
 * Run the handlers of every active message and block transfer that has
 * arrived (replies first); others are kept for niu_recv().  Returns how
 * many ran.
 */
int niu_am_poll(struct niu_endpoint *ep);

/*
 * Open segment @segment (0..15) on this node: @words words at @base,
 * expecting @words words of transfers, after which @done(@arg) runs from
 * niu_am_poll().  Opening an open segment starts its count again.
 */
int niu_am_segment_open(struct niu_endpoint *ep, unsigned int segment,
			uint32_t *base, uint32_t words,
			niu_am_segment_handler done, void *arg);

/* Close @segment: later transfers to it are counted in am_errors. */
void niu_am_segment_close(struct niu_endpoint *ep, unsigned int segment);

/*
 * Block transfer (JAM_xfer_n/JAM_mfer_n): copy @words words from @src into
 * segment @segment of node @dest at word @offset, in messages of 20 words
 * at @prio (NIU_LO as a request, NIU_HI from a request handler as a
 * reply).  Returns 0 or -EINVAL.
 */
int niu_am_xfer(struct niu_endpoint *ep, enum niu_priority prio,
		uint32_t dest, unsigned int segment, uint32_t offset,
		const uint32_t *src, size_t words);

/*
 * How waits give the CPU away after a run of empty polls: 0 (the default)
 * yields; otherwise sleep this many microseconds, which lets a guest's
 * virtual CPU halt, so a node that only waits leaves the host's cores to
 * the nodes that compute (several TCG guests on few cores).  niu_open()
 * starts from $NIU_IDLE_SLEEP_US when it is set (0..1000000).
 */
void niu_set_idle_sleep(struct niu_endpoint *ep, unsigned int microseconds);

/*
 * Whether long waits probe the other nodes (niu_peer_down(); on by
 * default).  A program whose peers are not libniu programs (a node in raw
 * mode, a seed 002 program reading its queues itself) turns it off: they
 * would take a probe for a message.
 */
void niu_set_probes(struct niu_endpoint *ep, bool on);

/*
 * Remote DMA.  niu_dma_window() asks the driver for this endpoint's DMA
 * window (ARCTIC_NIU_DMA_WINDOW_SIZE bytes) and maps it at
 * ep->dma_window, whose address is also the name the NIU knows it by.
 * Returns 0, -EBUSY (already has one), -ENOMEM, or -ENOTTY from a driver
 * without DMA windows.
 */
int niu_dma_window(struct niu_endpoint *ep);

/*
 * Queue a remote DMA request (seed 002 section 3.3, TransmitDMA): the
 * ARCTIC_D (2048) bytes at @source, which must lie in our window, go to
 * address @target in the window of endpoint @dest_endpoint of node @dest
 * (its ep->dma_window value there); both ARCTIC_D aligned.  Afterwards
 * that endpoint's high-priority queue receives a message of user @type
 * with command[0] = @command, command[1] = the low half of @target and the
 * @length payload words: the sign that the whole block is there.  Returns
 * 0 or -EINVAL.
 */
int niu_dma_send(struct niu_endpoint *ep, uint32_t dest,
		 uint32_t dest_endpoint, uint32_t type, uint32_t command,
		 uint64_t target, const void *source,
		 const uint32_t *payload, unsigned int length);

/*
 * dMPI raw mode (seed 002 sections 2.3, 3.4, 4.1.2, 6.1).  niu_raw_enter()
 * asks the driver to turn both datapaths OFF with RxCtrl.RAW set; from
 * then on the NIU reads and writes no queue in memory, for any endpoint,
 * and the program talks to the network through the FIFO access points of
 * endpoint 0's user page: it pushes whole Arctic packets in the skewed
 * format of the seed's Figure 2 (niu_raw_send() builds them from the route
 * table) and pops what the network delivers, route words and CRC trailer
 * included.  The NIU still adds its end-to-end header and CRC and still
 * retries, so peers in MPI mode receive raw packets with niu_recv() and
 * their niu_send() messages arrive in the raw FIFOs.  Raw receives raise
 * no interrupt: waits spin on the status register.  Messages already in
 * the endpoint's receive queues stay there for niu_try_recv().
 */

/* A raw-mode session of an open endpoint.  Fields are read-only. */
struct niu_raw {
	struct niu_endpoint *ep;	/* NULL: not in raw mode */
	volatile uint32_t *page;	/* endpoint 0's user page, read-write */
	uint32_t page_size;
	/* Route table entries by priority and node, read at entry. */
	uint32_t route[NIU_NUM_PRIORITIES][ARCTIC_S];
};

/* A packet popped from a raw receive FIFO (seed 002 section 3.4.2). */
struct niu_raw_packet {
	uint32_t words;			/* Arctic words, word 1's LENGTH */
	uint32_t word[ARCTIC_MAX_PACKET_WORDS];	/* word 0, word 1, body */
	uint32_t crc;			/* the trailer; it also covers the
					   NIU's end-to-end header, which is
					   not shown, so it cannot be checked
					   here (the NIU has) */
	/* Word 1 and the body read as an MPI message: */
	uint32_t mode;			/* ARCTIC_MODE_MPI or _DMA */
	uint32_t endpoint;		/* the endpoint it was sent to */
	uint32_t type;
	uint32_t command[2];		/* zero where the packet is shorter */
	uint32_t length;		/* payload words: words - 4, or 0 */
	uint32_t payload[ARCTIC_MAX_PACKET_WORDS - ARCTIC_MPI_LENGTH_EXTRA];
};

/*
 * Put the NIU in raw mode for @ep, which must own endpoint 0 and be the
 * only open endpoint.  Waits (up to 10 s) until the NIU has taken every
 * message @ep queued before, so none is sent after raw packets, then reads
 * the route table and maps the user page readable.  Returns 0, -EACCES
 * (@ep is not endpoint 0), -EBUSY (another endpoint is open), -ETIMEDOUT
 * (queued messages or the transmit datapath did not drain), -ENOTTY (a
 * driver without raw mode), or another negative errno.
 */
int niu_raw_enter(struct niu_raw *raw, struct niu_endpoint *ep);

/*
 * Back to MPI mode; @raw is then closed.  Returns the number of words the
 * driver found unread in the receive FIFOs and dropped (0 when the program
 * read everything that arrived), or a negative errno (-EINVAL: @raw is not
 * in raw mode).  Closing the endpoint leaves raw mode too.
 */
int niu_raw_leave(struct niu_raw *raw);

/*
 * Send one message to endpoint @dest_endpoint of node @dest at @prio as a
 * raw packet, built as the seed's TransmitHiDirect() builds it: the route
 * entry for @dest at @prio gives word 0 (its low half) and word 1's
 * DOWNROUTE; word 1 also carries @dest_endpoint, @type (0..127), MODE 0
 * and LENGTH = @length + 4; then the two command words and @length (0..20)
 * payload words.  Waits while the FIFO is full.  Returns 0, -EINVAL (bad
 * argument, or @raw not in raw mode) or -EHOSTUNREACH (no valid route).
 */
int niu_raw_send(struct niu_raw *raw, enum niu_priority prio, uint32_t dest,
		 uint32_t dest_endpoint, uint32_t type, uint32_t command0,
		 uint32_t command1, const uint32_t *payload,
		 unsigned int length);

/*
 * Push @count ready-made words of one packet at @prio (words 0 and 1 and
 * the body; the NIU adds the CRC).  The NIU drops a packet it cannot send
 * without telling the sender, so this refuses what it would drop: -EINVAL
 * unless 2 <= @count <= 31, word 1's LENGTH is @count, word 0's upper half
 * is zero and its PRIORITY bit is that of @prio.  Waits while the FIFO is
 * full.
 */
int niu_raw_send_words(struct niu_raw *raw, enum niu_priority prio,
		       const uint32_t *words, unsigned int count);

/*
 * Pop the next packet of @prio if one is waiting: 1 taken, 0 none,
 * -EINVAL (@raw not in raw mode), or -EPROTO when word 1's LENGTH is not
 * a packet's (the FIFO was read by someone else mid-packet; what is left
 * of the packet stays in the FIFO).
 */
int niu_raw_try_recv(struct niu_raw *raw, enum niu_priority prio,
		     struct niu_raw_packet *pkt);

/*
 * Wait for the next packet of @prio, at most @timeout_ms milliseconds (a
 * negative value waits for ever).  Returns 0, -ETIMEDOUT, or an error of
 * niu_raw_try_recv().
 */
int niu_raw_recv(struct niu_raw *raw, enum niu_priority prio,
		 struct niu_raw_packet *pkt, int timeout_ms);

/* Monotonic time in nanoseconds, for benchmarks. */
uint64_t niu_now_ns(void);

/*
 * Whether this node runs in timed mode (the kernel parameter
 * arctic.timed=1 of scripts/niu-cluster --timed, or a clone's command line
 * in /run/arctic-cmdline): its clock is then the cluster's virtual time
 * (docs/timed-mode.md), otherwise the host's.
 */
bool niu_timed(void);

/*
 * Time accounting, off by default.  niu_stats_time_on(@ep, true) starts
 * it from zero: from then on the library adds the time it spends in its
 * send, receive, wait and barrier paths (enum niu_time_kind) to one
 * counter each, reading the processor's cycle counter (the TSC, which
 * counts virtual nanoseconds in timed mode: docs/timed-mode.md, "One
 * clock") only where it changes from one kind to another, never on the
 * common path of a single send or receive.  Off, each such place costs a
 * test of a flag.  niu_stats_time_on(@ep, false) stops it; the counters
 * keep their values.
 */
void niu_stats_time_on(struct niu_endpoint *ep, bool on);

/*
 * The time of each kind since niu_stats_time_on(), in nanoseconds of
 * CLOCK_MONOTONIC (the counter's ticks scaled by how far the two clocks
 * moved since then: in timed mode one tick is one nanosecond), into
 * @ns[NIU_TIME_KINDS]; all zero if it was never on.  The time of an
 * interval is the difference of two calls; its computing is the interval
 * minus the library's kinds (NIU_TIME_OUTSIDE also counts the calls'
 * own cost).
 */
void niu_stats_time(struct niu_endpoint *ep, uint64_t ns[NIU_TIME_KINDS]);

#ifdef __cplusplus
}
#endif

#endif /* NIU_H */
