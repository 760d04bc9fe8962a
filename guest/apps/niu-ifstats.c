/* SPDX-License-Identifier: MIT */
/*
 * niu-ifstats [IFACE]: print an interface's ethtool statistics, as
 * "ethtool -S IFACE" does (the image has busybox, not ethtool): one
 * "     name: value" line each, under "NIC statistics:".  IFACE defaults to
 * niu0, the IP interface of the arctic_niu driver (docs/guest.md, "IP
 * over the NIU").  Exit status 1 if the interface has no statistics.
 */
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int ethtool(int fd, const char *name, void *cmd)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	ifr.ifr_data = cmd;
	return ioctl(fd, SIOCETHTOOL, &ifr);
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "niu0";
	struct {
		struct ethtool_sset_info info;
		uint32_t len;
	} sset = { .info = { .cmd = ETHTOOL_GSSET_INFO,
			     .sset_mask = 1ull << ETH_SS_STATS } };
	struct ethtool_gstrings *strings;
	struct ethtool_stats *stats;
	uint32_t n, i;
	int fd;

	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || ethtool(fd, name, &sset) < 0 || !sset.info.sset_mask) {
		fprintf(stderr, "niu-ifstats: %s: no statistics\n", name);
		return 1;
	}
	n = sset.len;
	strings = calloc(1, sizeof(*strings) + (size_t)n * ETH_GSTRING_LEN);
	stats = calloc(1, sizeof(*stats) + (size_t)n * sizeof(uint64_t));
	if (!strings || !stats)
		return 1;
	strings->cmd = ETHTOOL_GSTRINGS;
	strings->string_set = ETH_SS_STATS;
	strings->len = n;
	stats->cmd = ETHTOOL_GSTATS;
	stats->n_stats = n;
	if (ethtool(fd, name, strings) < 0 || ethtool(fd, name, stats) < 0) {
		perror("niu-ifstats: SIOCETHTOOL");
		return 1;
	}
	printf("NIC statistics:\n");
	for (i = 0; i < n; i++)
		printf("     %.*s: %llu\n", ETH_GSTRING_LEN,
		       (const char *)strings->data + i * ETH_GSTRING_LEN,
		       (unsigned long long)stats->data[i]);
	close(fd);
	return 0;
}
