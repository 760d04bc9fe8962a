/* SPDX-License-Identifier: MIT */
/*
 * net-udp-ping: the virtio-net baseline for niu-ping.  UDP round-trip
 * latency between two guests over their ordinary network link against
 * payload size (0..80 bytes, the same sizes as niu-ping's 0..20 words).
 * "net-udp-ping -s" echoes every datagram back until it receives the one
 * byte 'Q' (or nothing for 30 s once started); "net-udp-ping -c PEER" sends
 * each size -n times, waits for the echo, checks every byte and prints the
 * median, 99th percentile and minimum round trip in microseconds, in
 * niu-ping's table layout with a bytes column.  The client retries its
 * first datagram until the server answers, so both may start together.
 * Exit status 0 means every echo came back right.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define PORT 5201

static const unsigned int sizes[] = { 0, 4, 8, 16, 32, 64, 80 };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void set_timeout(int fd, unsigned int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void usage(void)
{
	fprintf(stderr, "Usage: net-udp-ping -s | -c PEER [-n ITERATIONS]\n");
	exit(2);
}

static int server(int fd)
{
	struct sockaddr_in from;
	socklen_t len;
	char buf[2048];
	unsigned long echoed = 0;

	set_timeout(fd, 120000);
	for (;;) {
		len = sizeof(from);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), 0,
				     (struct sockaddr *)&from, &len);
		if (n < 0) {
			fprintf(stderr, "net-udp-ping: server: %s\n",
				strerror(errno));
			return echoed ? 0 : 1;
		}
		if (n == 1 && buf[0] == 'Q')
			break;
		sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, len);
		echoed++;
		set_timeout(fd, 30000);
	}
	printf("net-udp-ping: server echoed %lu datagrams\n", echoed);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned int iterations = 200, s, it, i;
	const char *peer = NULL;
	int serve = 0, opt, errors = 0;
	struct sockaddr_in addr = { .sin_family = AF_INET };
	unsigned char out[128], in[2048];
	uint64_t *rtt;

	while ((opt = getopt(argc, argv, "sc:n:h")) != -1) {
		switch (opt) {
		case 's':
			serve = 1;
			break;
		case 'c':
			peer = optarg;
			break;
		case 'n':
			iterations = (unsigned int)atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (serve == !!peer || iterations == 0)
		usage();
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("net-udp-ping: socket");
		return 2;
	}
	addr.sin_port = htons(PORT);
	if (serve) {
		addr.sin_addr.s_addr = htonl(INADDR_ANY);
		if (bind(fd, (struct sockaddr *)&addr, sizeof(addr))) {
			perror("net-udp-ping: bind");
			return 2;
		}
		return server(fd);
	}
	if (inet_pton(AF_INET, peer, &addr.sin_addr) != 1)
		usage();
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		perror("net-udp-ping: connect");
		return 2;
	}
	/* Wait for the server: retry a probe every 200 ms for 60 s. */
	set_timeout(fd, 200);
	for (i = 0; i < 300; i++) {
		send(fd, "P", 1, 0);
		if (recv(fd, in, sizeof(in), 0) == 1)
			break;
	}
	if (i == 300) {
		fprintf(stderr, "net-udp-ping: no answer from %s\n", peer);
		return 2;
	}
	set_timeout(fd, 2000);
	rtt = calloc(iterations, sizeof(*rtt));
	if (!rtt)
		return 2;
	printf("net-udp-ping: to %s, UDP, %u round trips per size\n", peer,
	       iterations);
	printf("%6s %12s %12s %12s %12s\n", "bytes", "median_us", "p99_us",
	       "min_us", "mean_us");
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		unsigned int size = sizes[s];

		for (it = 0; it < iterations; it++) {
			for (i = 0; i < size; i++)
				out[i] = (unsigned char)(it * 131 + i * 7 + size);
			uint64_t start = now_ns();
			ssize_t n;

			send(fd, out, size, 0);
			do
				n = recv(fd, in, sizeof(in), 0);
			while (n == 1 && in[0] == 'P' && size != 1);
			rtt[it] = now_ns() - start;
			if (n != (ssize_t)size || memcmp(in, out, size)) {
				if (errors++ < 10)
					fprintf(stderr, "net-udp-ping: bad or no "
						"echo of %u bytes #%u\n",
						size, it);
			}
		}
		uint64_t sum = 0;

		for (it = 0; it < iterations; it++)
			sum += rtt[it];
		qsort(rtt, iterations, sizeof(*rtt), compare_u64);
		printf("%6u %12.1f %12.1f %12.1f %12.1f\n", size,
		       rtt[iterations / 2] / 1e3,
		       rtt[(iterations * 99 + 99) / 100 - 1] / 1e3,
		       rtt[0] / 1e3, sum / 1e3 / iterations);
	}
	for (i = 0; i < 3; i++)
		send(fd, "Q", 1, 0);
	printf("net-udp-ping: %u echoes checked, %d wrong: %s\n",
	       iterations * (unsigned int)(sizeof(sizes) / sizeof(sizes[0])),
	       errors, errors ? "FAIL" : "PASS");
	free(rtt);
	return errors ? 1 : 0;
}
