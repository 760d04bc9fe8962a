/* SPDX-License-Identifier: MIT */
/*
 * niu-ipnet-junk NODE: send the kernel's endpoint of NODE (the one its
 * niu0 interface uses, docs/guest.md "IP over the NIU") what a user
 * program or a broken sender could: one message of each kind niu0 must
 * drop and count, never take for a packet.  In order, on the low
 * priority unless said:
 *   1. TYPE 5, not niu0's                  -> rx_foreign
 *   2. niu0's TYPE on the high priority    -> rx_foreign
 *   3. a frame longer than the largest     -> rx_too_long
 *   4. a payload length that does not fit  -> rx_bad_size
 *   5. fragment 5 of nothing               -> rx_unexpected_fragment
 *   6. fragment 0 of a 200-byte packet, then
 *   7. a whole 20-byte packet that is not IP (version 0)
 *                                          -> rx_incomplete, rx_not_ip
 * Prints what it sent; exit status 0 if every send was accepted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "arctic_ipnet.h"
#include "niu.h"
#include "uapi/arctic_niu.h"

int main(int argc, char **argv)
{
	struct arctic_niu_node_info info;
	struct niu_endpoint ep;
	uint32_t payload[ARCTIC_MAX_PAYLOAD], dest, kernel_ep;
	int ret, failures = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: niu-ipnet-junk NODE\n");
		return 2;
	}
	dest = (uint32_t)strtoul(argv[1], NULL, 0);
	ret = niu_open(&ep, NULL);
	if (ret) {
		fprintf(stderr, "niu-ipnet-junk: niu_open: %s\n", strerror(-ret));
		return 1;
	}
	/* The kernel's endpoint is the one after those open() hands out. */
	if (ioctl(ep.fd, ARCTIC_NIU_IOC_NODE_INFO, &info) < 0) {
		perror("niu-ipnet-junk: node info");
		return 1;
	}
	kernel_ep = info.endpoints;
	memset(payload, 0x45, sizeof(payload));
#define SEND(prio, type, word, words) \
	do { \
		if (niu_send(&ep, prio, dest, kernel_ep, type, word, 0, \
			     payload, words)) \
			failures++; \
	} while (0)
	SEND(NIU_LO, 5, 0, 3);
	SEND(NIU_HI, ARCTIC_IPNET_TYPE, arctic_ipnet_word(60, 0, 0), 14);
	SEND(NIU_LO, ARCTIC_IPNET_TYPE,
	     arctic_ipnet_word(ARCTIC_IPNET_MAX_MTU + 1, 0, 0), 20);
	SEND(NIU_LO, ARCTIC_IPNET_TYPE, arctic_ipnet_word(1500, 0, 0), 3);
	SEND(NIU_LO, ARCTIC_IPNET_TYPE, arctic_ipnet_word(1500, 0, 5), 20);
	SEND(NIU_LO, ARCTIC_IPNET_TYPE, arctic_ipnet_word(200, 1, 0), 20);
	memset(payload, 0, sizeof(payload));
	SEND(NIU_LO, ARCTIC_IPNET_TYPE, arctic_ipnet_word(20, 2, 0), 4);
	printf("niu-ipnet-junk: 7 messages to node %u endpoint %u, %d refused\n",
	       dest, kernel_ep, failures);
	niu_close(&ep);
	return failures ? 1 : 0;
}
