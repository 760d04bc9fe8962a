/* SPDX-License-Identifier: MIT */
/*
 * niu-raw-test: dMPI raw mode (seed 002 sections 2.3, 3.4) between a raw
 * node and an MPI node.  Node 0 turns its NIU into raw mode and sends
 * messages to node 1 as raw packets it builds from the route table; node 1
 * stays in MPI mode and takes them with niu_recv(), then answers with
 * niu_send(), which node 0 pops from its raw receive FIFOs: both
 * directions, both priorities, every length from 0 to 20 words, every word
 * checked, the route words and the header fields of each raw packet too.
 * Node 0 then leaves raw mode and the two nodes exchange ordinary MPI
 * messages again.  On the way node 0 checks what the driver and libniu
 * refuse: raw mode from another endpoint or with one open, bad arguments,
 * opening an endpoint, a DMA window or a route change while raw.  Other
 * nodes only take part in the barriers.  Each node prints PASS or FAIL;
 * the exit status is 0 only when every check passed.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "arctic/packet.h"
#include "arctic/route.h"
#include "niu.h"
#include "uapi/arctic_niu.h"

enum {
	RAW_NODE = 0,
	MPI_NODE = 1,
	PEER_ENDPOINT = 0,	/* both nodes' programs own endpoint 0 */
	TIMEOUT_MS = 60000,	/* per message: TCG guests on a busy host */
	MAX_REPORTS = 20,	/* failures described, per node */
	/* Every payload length once per priority after raw mode. */
	ROUNDS_AFTER_RAW = NIU_MAX_PAYLOAD + 1,
	NS_PER_MS = 1000000,
};

static const char *const prio_name[NIU_NUM_PRIORITIES] = {
	[NIU_HI] = "high", [NIU_LO] = "low",
};

static unsigned int failures;

static void fail(const char *fmt, ...)
{
	va_list ap;

	if (failures++ >= MAX_REPORTS)
		return;
	fputs("niu-raw-test: FAIL: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* Check that a call returned @want; counts the check in @checks. */
static void expect_ret(unsigned int *checks, const char *what, int got,
		       int want)
{
	(*checks)++;
	if (got != want)
		fail("%s returned %d (%s), expected %d (%s)", what, got,
		     strerror(got < 0 ? -got : 0), want,
		     strerror(want < 0 ? -want : 0));
}

static void usage(FILE *out, int status)
{
	fprintf(out,
		"Usage: niu-raw-test [-n MESSAGES] [-d DEVICE] [-h]\n"
		"Node 0 goes into dMPI raw mode and exchanges MESSAGES messages\n"
		"per priority each way with node 1, which stays in MPI mode;\n"
		"then node 0 leaves raw mode and both check an MPI exchange.\n"
		"Both programs must own endpoint 0 (run nothing else).\n"
		"  -n  messages per priority and direction, 1..256 (default 42:\n"
		"      every length 0..20 twice)\n"
		"  -d  device file (default /dev/arctic-niu0)\n"
		"  -h  this text\n");
	exit(status);
}

/*
 * Message @seq of the stream from node @from at @prio: its length cycles
 * through 0..20 and every word depends on all four, so a message that
 * arrives in the wrong stream or place is caught.
 */
static void make_message(uint32_t from, enum niu_priority prio, uint32_t seq,
			 struct niu_msg *msg)
{
	uint32_t salt = (from << 24) ^ ((uint32_t)prio << 20) ^ seq;
	unsigned int i;

	memset(msg, 0, sizeof(*msg));
	msg->source = from;
	msg->endpoint = PEER_ENDPOINT;
	msg->type = 1 + seq % (NIU_TYPE_LIBRARY_MIN - 1);
	msg->command[0] = salt;
	msg->command[1] = ~salt * 2654435761u;
	msg->length = seq % (NIU_MAX_PAYLOAD + 1);
	for (i = 0; i < msg->length; i++)
		msg->payload[i] = (salt * 40503u) ^ (i << 8) ^ (i * 0x9e3779b9u);
}

/* The fields both kinds of receive give; false after reporting a miss. */
static bool same_message(const char *what, uint32_t seq, uint32_t type,
			 const uint32_t command[2], uint32_t length,
			 const uint32_t *payload, const struct niu_msg *want)
{
	unsigned int i;

	if (type != want->type || command[0] != want->command[0] ||
	    command[1] != want->command[1] || length != want->length) {
		fail("%s #%u: type %u commands %#x %#x length %u, expected "
		     "type %u commands %#x %#x length %u", what, seq, type,
		     command[0], command[1], length, want->type,
		     want->command[0], want->command[1], want->length);
		return false;
	}
	for (i = 0; i < length; i++) {
		if (payload[i] != want->payload[i]) {
			fail("%s #%u: payload word %u is %#x, expected %#x",
			     what, seq, i, payload[i], want->payload[i]);
			return false;
		}
	}
	return true;
}

/*
 * A message from niu_recv(), sent by node @source, against message @seq of
 * node @author's stream (an echo keeps its author's words).
 */
static bool check_msg(const char *what, enum niu_priority prio,
		      uint32_t source, uint32_t author, uint32_t seq,
		      const struct niu_msg *got)
{
	struct niu_msg want;

	make_message(author, prio, seq, &want);
	if (got->source != source || got->endpoint != PEER_ENDPOINT) {
		fail("%s #%u: from node %u to endpoint %u, expected node %u "
		     "endpoint %u", what, seq, got->source, got->endpoint,
		     source, PEER_ENDPOINT);
		return false;
	}
	return same_message(what, seq, got->type, got->command, got->length,
			    got->payload, &want);
}

/*
 * A raw packet against what @from sent as @seq with niu_send(): the route
 * words must be those of @from's route entry to us at @prio (the default
 * table of route.h), word 1 the low half of an MPI header.
 */
static bool check_raw(enum niu_priority prio, uint32_t from, uint32_t self,
		      uint32_t seq, const struct niu_raw_packet *pkt)
{
	uint32_t entry = arctic_route_entry(from, self, prio == NIU_HI, false);
	uint32_t w0 = pkt->word[0], w1 = pkt->word[1];
	struct niu_msg want;

	make_message(from, prio, seq, &want);
	if (ARCTIC_FIELD_GET(ARCTIC_W0, ZERO, w0) != 0 ||
	    ARCTIC_FIELD_GET(ARCTIC_W0, UPROUTE, w0) !=
	    ARCTIC_FIELD_GET(ROUTE_ENTRY, UPROUTE, entry) ||
	    ARCTIC_FIELD_GET(ARCTIC_W0, PRIORITY, w0) !=
	    ARCTIC_FIELD_GET(ROUTE_ENTRY, PRIORITY, entry) ||
	    ARCTIC_FIELD_GET(ARCTIC_W1, DOWNROUTE, w1) !=
	    ARCTIC_FIELD_GET(ROUTE_ENTRY, DOWNROUTE, entry)) {
		fail("raw %s #%u: route words %#010x %#010x, entry %#010x",
		     prio_name[prio], seq, w0, w1, entry);
		return false;
	}
	if (pkt->words != want.length + ARCTIC_MPI_LENGTH_EXTRA ||
	    pkt->mode != ARCTIC_MODE_MPI || pkt->endpoint != PEER_ENDPOINT) {
		fail("raw %s #%u: %u words, mode %u, endpoint %u",
		     prio_name[prio], seq, pkt->words, pkt->mode,
		     pkt->endpoint);
		return false;
	}
	return same_message(prio == NIU_HI ? "raw high" : "raw low", seq,
			    pkt->type, pkt->command, pkt->length, pkt->payload,
			    &want);
}

/* niu_recv() that gives up after TIMEOUT_MS. */
static int recv_within(struct niu_endpoint *ep, enum niu_priority prio,
		       struct niu_msg *msg)
{
	uint64_t deadline = niu_now_ns() + (uint64_t)TIMEOUT_MS * NS_PER_MS;

	while (!niu_try_recv(ep, prio, msg)) {
		if (niu_now_ns() > deadline)
			return -ETIMEDOUT;
		sched_yield();
	}
	return 0;
}

static int send_message(struct niu_endpoint *ep, struct niu_raw *raw,
			enum niu_priority prio, uint32_t dest,
			const struct niu_msg *m)
{
	if (raw)
		return niu_raw_send(raw, prio, dest, PEER_ENDPOINT, m->type,
				    m->command[0], m->command[1], m->payload,
				    m->length);
	return niu_send(ep, prio, dest, PEER_ENDPOINT, m->type, m->command[0],
			m->command[1], m->payload, m->length);
}

/* Send @count messages of our stream at each priority, high first. */
static int send_streams(struct niu_endpoint *ep, struct niu_raw *raw,
			uint32_t dest, unsigned int count)
{
	struct niu_msg m;
	unsigned int seq;
	int p, ret;

	for (p = NIU_HI; p < NIU_NUM_PRIORITIES; p++) {
		for (seq = 0; seq < count; seq++) {
			make_message(ep->node, p, seq, &m);
			ret = send_message(ep, raw, p, dest, &m);
			if (ret) {
				fail("%s send %s #%u: %s", raw ? "raw" : "MPI",
				     prio_name[p], seq, strerror(-ret));
				return ret;
			}
		}
	}
	return 0;
}

static int raw_mode_ioctl(int fd, uint32_t mode, uint32_t flags,
			  uint32_t reserved)
{
	struct arctic_niu_raw_mode req = {
		.mode = mode, .flags = flags, .reserved = reserved,
	};

	return ioctl(fd, ARCTIC_NIU_IOC_RAW_MODE, &req) < 0 ? -errno : 0;
}

/* What the driver refuses before raw mode; returns the checks made. */
static unsigned int check_refusals_mpi(struct niu_endpoint *ep,
				       const char *device)
{
	struct niu_endpoint other;
	struct niu_raw raw;
	unsigned int checks = 0;
	int ret;

	memset(&raw, 0, sizeof(raw));
	ret = niu_open(&other, device);
	expect_ret(&checks, "opening a second endpoint", ret, 0);
	if (!ret) {
		expect_ret(&checks, "raw mode asked by endpoint 1",
			   raw_mode_ioctl(other.fd, ARCTIC_NIU_MODE_RAW, 0, 0),
			   -EACCES);
		expect_ret(&checks, "niu_raw_enter() with endpoint 1 open",
			   niu_raw_enter(&raw, ep), -EBUSY);
		niu_close(&other);
	}
	expect_ret(&checks, "raw mode 2", raw_mode_ioctl(ep->fd, 2, 0, 0),
		   -EINVAL);
	expect_ret(&checks, "raw mode with flags",
		   raw_mode_ioctl(ep->fd, ARCTIC_NIU_MODE_RAW, 1, 0), -EINVAL);
	expect_ret(&checks, "raw mode with reserved bits",
		   raw_mode_ioctl(ep->fd, ARCTIC_NIU_MODE_RAW, 0, 1), -EINVAL);
	expect_ret(&checks, "MPI mode while in MPI mode",
		   raw_mode_ioctl(ep->fd, ARCTIC_NIU_MODE_MPI, 0, 0), 0);
	expect_ret(&checks, "niu_raw_leave() outside raw mode",
		   niu_raw_leave(&raw), -EINVAL);
	return checks;
}

/* What the driver and libniu refuse in raw mode, before any traffic. */
static unsigned int check_refusals_raw(struct niu_endpoint *ep,
				       struct niu_raw *raw, const char *device)
{
	struct arctic_niu_route route = {
		.table = ARCTIC_ROUTE_TABLE_HIGH, .node = MPI_NODE,
		.flags = ARCTIC_NIU_ROUTE_DEFAULT,
	};
	uint32_t words[ARCTIC_MIN_PACKET_WORDS] = { 0, 0 };
	struct niu_raw_packet pkt;
	struct niu_endpoint other;
	unsigned int checks = 0;
	int ret, p;

	ret = niu_open(&other, device);
	expect_ret(&checks, "opening an endpoint in raw mode", ret, -EBUSY);
	if (!ret)
		niu_close(&other);
	expect_ret(&checks, "a DMA window in raw mode", niu_dma_window(ep),
		   -EBUSY);
	expect_ret(&checks, "a route change in raw mode",
		   ioctl(ep->fd, ARCTIC_NIU_IOC_SET_ROUTE, &route) < 0 ?
		   -errno : 0, -EBUSY);
	expect_ret(&checks, "raw mode while in raw mode",
		   raw_mode_ioctl(ep->fd, ARCTIC_NIU_MODE_RAW, 0, 0), 0);
	/* Word 1 says 0 words: the NIU would drop it without a word. */
	expect_ret(&checks, "a packet whose LENGTH is not its size",
		   niu_raw_send_words(raw, NIU_HI, words, 2), -EINVAL);
	expect_ret(&checks, "a raw send to a node with no route",
		   niu_raw_send(raw, NIU_HI, ep->num_nodes, PEER_ENDPOINT, 1,
				0, 0, NULL, 0), -EHOSTUNREACH);
	/* The MPI node sends nothing before our messages reach it. */
	for (p = NIU_HI; p < NIU_NUM_PRIORITIES; p++)
		expect_ret(&checks, "a raw receive before anything was sent",
			   niu_raw_try_recv(raw, p, &pkt), 0);
	return checks;
}

static int run_raw_node(struct niu_endpoint *ep, const char *device,
			unsigned int count)
{
	unsigned int checks, seq, wrong, received[NIU_NUM_PRIORITIES] = { 0 };
	struct niu_raw_packet pkt;
	struct niu_raw raw;
	struct niu_msg m, echo;
	int p, ret;

	checks = check_refusals_mpi(ep, device);
	if (niu_barrier(ep)) {
		fail("barrier before raw mode");
		return -1;
	}
	ret = niu_raw_enter(&raw, ep);
	if (ret) {
		fail("niu_raw_enter(): %s", strerror(-ret));
		return -1;
	}
	checks += check_refusals_raw(ep, &raw, device);
	printf("niu-raw-test: refusals: %u checked, %u wrong\n", checks,
	       failures);

	if (send_streams(ep, &raw, MPI_NODE, count))
		return -1;
	printf("niu-raw-test: raw send: %u high, %u low\n", count, count);

	wrong = failures;
	for (p = NIU_HI; p < NIU_NUM_PRIORITIES; p++) {
		for (seq = 0; seq < count; seq++) {
			ret = niu_raw_recv(&raw, p, &pkt, TIMEOUT_MS);
			if (ret) {
				fail("raw receive %s #%u: %s", prio_name[p],
				     seq, strerror(-ret));
				return -1;
			}
			received[p]++;
			check_raw(p, MPI_NODE, ep->node, seq, &pkt);
		}
	}
	for (p = NIU_HI; p < NIU_NUM_PRIORITIES; p++) {
		ret = niu_raw_try_recv(&raw, p, &pkt);
		if (ret)
			fail("raw %s FIFO not empty after %u packets (%d)",
			     prio_name[p], count, ret);
	}
	printf("niu-raw-test: raw receive: %u high, %u low, %u wrong\n",
	       received[NIU_HI], received[NIU_LO], failures - wrong);

	ret = niu_raw_leave(&raw);
	if (ret < 0) {
		fail("niu_raw_leave(): %s", strerror(-ret));
		return -1;
	}
	if (ret > 0)
		fail("leaving raw mode dropped %d unread words", ret);
	printf("niu-raw-test: raw mode left, %d words dropped\n", ret);

	/* MPI again: node 1 echoes each message; every length, both ways. */
	wrong = failures;
	for (p = NIU_HI; p < NIU_NUM_PRIORITIES; p++) {
		for (seq = 0; seq < ROUNDS_AFTER_RAW; seq++) {
			make_message(ep->node, p, count + seq, &m);
			ret = send_message(ep, NULL, p, MPI_NODE, &m);
			if (!ret)
				ret = recv_within(ep, p, &echo);
			if (ret) {
				fail("MPI round trip %s #%u after raw mode: %s",
				     prio_name[p], seq, strerror(-ret));
				return -1;
			}
			check_msg("echo after raw mode", p, MPI_NODE,
				  ep->node, count + seq, &echo);
		}
	}
	printf("niu-raw-test: MPI after raw mode: %u round trips, %u wrong\n",
	       NIU_NUM_PRIORITIES * ROUNDS_AFTER_RAW, failures - wrong);
	return 0;
}

static int run_mpi_node(struct niu_endpoint *ep, unsigned int count)
{
	unsigned int seq, wrong = failures;
	struct niu_msg m;
	int p, ret;

	if (niu_barrier(ep)) {
		fail("barrier before raw mode");
		return -1;
	}
	for (p = NIU_HI; p < NIU_NUM_PRIORITIES; p++) {
		for (seq = 0; seq < count; seq++) {
			ret = recv_within(ep, p, &m);
			if (ret) {
				fail("MPI receive %s #%u from the raw node: %s",
				     prio_name[p], seq, strerror(-ret));
				return -1;
			}
			check_msg(p == NIU_HI ? "from raw, high" :
				  "from raw, low", p, RAW_NODE, RAW_NODE, seq,
				  &m);
		}
	}
	printf("niu-raw-test: MPI receive from the raw node: %u high, %u low, "
	       "%u wrong\n", count, count, failures - wrong);

	if (send_streams(ep, NULL, RAW_NODE, count))
		return -1;
	printf("niu-raw-test: MPI send to the raw node: %u high, %u low\n",
	       count, count);

	wrong = failures;
	for (p = NIU_HI; p < NIU_NUM_PRIORITIES; p++) {
		for (seq = 0; seq < ROUNDS_AFTER_RAW; seq++) {
			ret = recv_within(ep, p, &m);
			if (!ret) {
				check_msg("MPI after raw mode", p, RAW_NODE,
					  RAW_NODE, count + seq, &m);
				ret = niu_send(ep, p, m.source, m.endpoint,
					       m.type, m.command[0],
					       m.command[1], m.payload,
					       m.length);
			}
			if (ret) {
				fail("MPI echo %s #%u after raw mode: %s",
				     prio_name[p], seq, strerror(-ret));
				return -1;
			}
		}
	}
	printf("niu-raw-test: MPI echoes after raw mode: %u, %u wrong\n",
	       NIU_NUM_PRIORITIES * ROUNDS_AFTER_RAW, failures - wrong);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned int count = 2 * (NIU_MAX_PAYLOAD + 1);
	const char *device = NULL;
	struct niu_endpoint ep;
	uint32_t node;
	int opt, ret;

	while ((opt = getopt(argc, argv, "n:d:h")) != -1) {
		switch (opt) {
		case 'n':
			count = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'd':
			device = optarg;
			break;
		case 'h':
			usage(stdout, 0);
			break;
		default:
			usage(stderr, 2);
		}
	}
	if (optind != argc || count == 0 || count > ARCTIC_N)
		usage(stderr, 2);
	setvbuf(stdout, NULL, _IOLBF, 0);

	ret = niu_open(&ep, device);
	if (ret) {
		printf("niu-raw-test: cannot open the NIU: %s: FAIL\n",
		       strerror(-ret));
		return 1;
	}
	if (ep.num_nodes < 2 || ep.endpoint != PEER_ENDPOINT) {
		printf("niu-raw-test: needs 2 nodes and endpoint %u; node %u of "
		       "%u has endpoint %u: FAIL\n", PEER_ENDPOINT, ep.node,
		       ep.num_nodes, ep.endpoint);
		niu_close(&ep);
		return 1;
	}
	/* The raw node would take libniu's probes for packets of ours. */
	niu_set_probes(&ep, false);
	printf("niu-raw-test: node %u of %u, endpoint %u: %s, %u messages per "
	       "priority each way\n", ep.node, ep.num_nodes, ep.endpoint,
	       ep.node == RAW_NODE ? "raw side" :
	       ep.node == MPI_NODE ? "MPI side" : "idle", count);

	if (ep.node == RAW_NODE)
		ret = run_raw_node(&ep, device, count);
	else if (ep.node == MPI_NODE)
		ret = run_mpi_node(&ep, count);
	else
		ret = niu_barrier(&ep);
	/* A node that gave up leaves the others to niu-cluster's timeout. */
	if (!ret && niu_barrier(&ep))
		fail("final barrier");
	node = ep.node;
	niu_close(&ep);
	printf("niu-raw-test: node %u: %u failure(s): %s\n", node, failures,
	       failures || ret ? "FAIL" : "PASS");
	return failures || ret ? 1 : 0;
}
