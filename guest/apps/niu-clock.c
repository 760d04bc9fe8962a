/* SPDX-License-Identifier: MIT */
/*
 * niu-clock: does the guest's clock keep the cluster's time?  In timed
 * mode (docs/timed-mode.md) the NIU's TIME_NOW is the cluster's virtual
 * time and the guest's TSC counts the same virtual nanoseconds, so the
 * clock programs time with (CLOCK_MONOTONIC) must move with both, to an
 * instruction.  This program samples the three side by side for a while,
 * on every node at once (a barrier starts it), with messages flowing
 * between the nodes meanwhile (-m: a barrier of all nodes every 64
 * samples).  Each sample reads the TSC, the clock, the TSC: if the clock
 * is the TSC plus a constant, that constant lies between clock - (TSC
 * after) and clock - (TSC before), whatever interrupts the read; the
 * clocks agree if one constant fits every sample (within -t ns).  It also
 * compares how far CLOCK_MONOTONIC and TIME_NOW moved from the first
 * sample to the last.  Exit 0 if both agree, 1 if not.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "niu.h"

static inline uint64_t read_tsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

static clockid_t clock_id = CLOCK_MONOTONIC;
static bool by_cluster, by_syscall, by_rdtscp;

static inline uint64_t read_tscp(void)
{
	uint32_t lo, hi, aux;

	__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
	return (uint64_t)hi << 32 | lo;
}

/*
 * NIU_CLOCK_SKEW_PPM=N: the clock reads run N ppm fast from the first
 * one on, a clock that does not keep the cluster's time, so that a test
 * can show the check catches one.
 */
static int64_t skew_ppm, skew_base;

static int64_t skewed(int64_t ns)
{
	if (!skew_ppm)
		return ns;
	if (!skew_base)
		skew_base = ns;
	return ns + (ns - skew_base) * skew_ppm / 1000000;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	if (by_rdtscp)
		return (int64_t)read_tscp();
	if (by_syscall)
		syscall(SYS_clock_gettime, clock_id, &ts);
	else
		clock_gettime(clock_id, &ts);
	return skewed((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
}

/* The NIU's TIME_NOW through sysfs, from a file kept open. */
static int cluster_fd = -1;

static int64_t cluster_ns(void)
{
	char text[32];
	ssize_t n = pread(cluster_fd, text, sizeof(text) - 1, 0);

	if (n <= 0)
		return -1;
	text[n] = 0;
	return strtoll(text, NULL, 10);
}

static void usage(void)
{
	fprintf(stderr,
		"Usage: niu-clock [-d DEVICE] [-n SAMPLES] [-m] [-r|-c|-s|-p] [-t NS]\n"
		"Samples CLOCK_MONOTONIC beside the TSC and the cluster's\n"
		"clock (TIME_NOW) on every node of a timed cluster.\n"
		"  -d  device file (default /dev/arctic-niu0)\n"
		"  -n  samples (default 20000)\n"
		"  -m  a barrier of every node per 64 samples\n"
		"  -r  CLOCK_MONOTONIC_RAW instead (no frequency slewing)\n"
		"  -c  the cluster's clock (TIME_NOW) instead, against the TSC\n"
		"  -s  CLOCK_MONOTONIC through the system call, not the vDSO\n"
		"  -p  RDTSCP instead, against RDTSC\n"
		"NIU_CLOCK_SKEW_PPM=N runs the clock reads N ppm fast (a\n"
		"self-test: the check must then fail).\n"
		"  -t  tolerance in ns beyond the reads' own time (default 0)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct niu_endpoint ep;
	const char *device = NULL;
	unsigned long samples = 20000, i;
	int64_t tolerance = 0, max_low = 0, min_high = 0, gap, broken_at = 0;
	int64_t first_mono, first_cluster, first_after, end_mono, end_cluster;
	int64_t end_after, least, most, moved;
	bool messages = false, broken = false;
	glob_t g;
	int opt, ret;

	while ((opt = getopt(argc, argv, "d:n:mrcspt:h")) != -1) {
		switch (opt) {
		case 'r':
			clock_id = CLOCK_MONOTONIC_RAW;
			break;
		case 'c':
			by_cluster = true;
			break;
		case 's':
			by_syscall = true;
			break;
		case 'p':
			by_rdtscp = true;
			break;
		case 'd':
			device = optarg;
			break;
		case 'n':
			samples = strtoul(optarg, NULL, 0);
			break;
		case 'm':
			messages = true;
			break;
		case 't':
			tolerance = strtoll(optarg, NULL, 0);
			break;
		default:
			usage();
		}
	}
	if (optind != argc || !samples)
		usage();
	if (getenv("NIU_CLOCK_SKEW_PPM"))
		skew_ppm = strtoll(getenv("NIU_CLOCK_SKEW_PPM"), NULL, 0);
	ret = niu_open(&ep, device);
	if (ret) {
		fprintf(stderr, "niu-clock: open: %s\n", strerror(-ret));
		return 1;
	}
	if (glob("/sys/bus/pci/drivers/arctic_niu/*/time_now", 0, NULL, &g) ||
	    g.gl_pathc < 1 ||
	    (cluster_fd = open(g.gl_pathv[0], O_RDONLY)) < 0) {
		fprintf(stderr, "niu-clock: no time_now in sysfs\n");
		return 1;
	}
	globfree(&g);
	if (cluster_ns() <= 0) {
		fprintf(stderr, "niu-clock: the cluster's clock does not run "
			"(not a timed cluster?)\n");
		return 1;
	}
	ret = niu_barrier(&ep);
	if (ret) {
		fprintf(stderr, "niu-clock: barrier: %s\n", strerror(-ret));
		return 1;
	}
	/*
	 * TIME_NOW between two clock reads, at the start and at the end:
	 * how far the cluster's time moved lies between the least and the
	 * most the clock can have moved between the reads.
	 */
	first_mono = mono_ns();
	first_cluster = cluster_ns();
	first_after = mono_ns();
	for (i = 0; i < samples; i++) {
		uint64_t before = read_tsc();
		int64_t clock = by_cluster ? cluster_ns() : mono_ns();
		uint64_t after = read_tsc();
		/* The offset clock - TSC lies in [low, high] for this read. */
		int64_t low = clock - (int64_t)after;
		int64_t high = clock - (int64_t)before;

		if (getenv("NIU_CLOCK_TRACE") && i < 64)
			printf("niu-clock: sample %lu: offset in [%" PRId64
			       ", %" PRId64 "]\n", i, low, high);
		if (!i || low > max_low)
			max_low = low;
		if (!i || high < min_high)
			min_high = high;
		if (max_low > min_high && !broken) {
			broken = true;
			broken_at = clock;
		}
		if (messages && i % 64 == 63) {
			ret = niu_barrier(&ep);
			if (ret) {
				fprintf(stderr, "niu-clock: barrier: %s\n",
					strerror(-ret));
				return 1;
			}
		}
	}
	end_mono = mono_ns();
	end_cluster = cluster_ns();
	end_after = mono_ns();
	least = end_mono - first_after;
	most = end_after - first_mono;
	moved = end_cluster - first_cluster;
	gap = max_low - min_high;
	printf("niu-clock: node %u: %lu samples of %s against the TSC over "
	       "%" PRId64 " ns: one offset fits every sample %s (%" PRId64
	       " ns %s)\n", ep.node, samples,
	       by_cluster ? "TIME_NOW" : clock_id == CLOCK_MONOTONIC_RAW ?
	       "CLOCK_MONOTONIC_RAW" : "CLOCK_MONOTONIC",
	       end_mono - first_mono, gap <= tolerance ? "yes" : "NO",
	       gap > 0 ? gap : -gap, gap > 0 ? "apart" : "to spare");
	if (broken)
		printf("niu-clock: node %u: first sample that fits no common "
		       "offset at %+" PRId64 " ns\n", ep.node,
		       broken_at - first_mono);
	printf("niu-clock: node %u: the cluster's time moved %" PRId64 " ns, "
	       "CLOCK_MONOTONIC between %" PRId64 " and %" PRId64 " ns around "
	       "it: %s\n", ep.node, moved, least, most,
	       moved >= least - tolerance && moved <= most + tolerance ?
	       "alike" : "NOT ALIKE");
	niu_close(&ep);
	return gap <= tolerance && moved >= least - tolerance &&
	       moved <= most + tolerance ? 0 : 1;
}
