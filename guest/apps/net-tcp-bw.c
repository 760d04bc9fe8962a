/* SPDX-License-Identifier: MIT */
/*
 * net-tcp-bw: the virtio-net baseline for niu-bw.  TCP bulk throughput
 * between two guests over their ordinary network link.  "net-tcp-bw -s"
 * accepts one connection per measurement and exits after the last;
 * "net-tcp-bw -c PEER" makes, for each write size (80, 2048 and 65536
 * bytes by default: niu-bw's largest message, its DMA block, and a bulk
 * write), one connection, sends -m megabytes (10^6 bytes, default 8) in
 * writes of that size, and waits for the receiver's one-byte
 * acknowledgment, sent once it has read every byte and checked the
 * pattern; it prints MB/s (10^6 bytes per second) from the first write to
 * the acknowledgment.  The client retries connecting for 60 s, so both may
 * start together.  Exit status 0 means every byte arrived right.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PORT 5202

static const unsigned int sizes[] = { 80, 2048, 65536 };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static unsigned char pattern(uint64_t offset)
{
	return (unsigned char)(offset * 2654435761u >> 13);
}

static void usage(void)
{
	fprintf(stderr, "Usage: net-tcp-bw -s | -c PEER [-m MEGABYTES]\n");
	exit(2);
}

static int full_io(int fd, void *buf, size_t len, int writing)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = writing ? write(fd, (char *)buf + done, len - done)
				    : read(fd, (char *)buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

/* Header: write size, total bytes (0 total: the last connection). */
static int server(void)
{
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1, bad_total = 0;
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_port = htons(PORT) };
	static unsigned char buf[65536];

	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    listen(lfd, 4)) {
		perror("net-tcp-bw: bind/listen");
		return 2;
	}
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		uint64_t header[2], got = 0, bad = 0;

		if (fd < 0) {
			perror("net-tcp-bw: accept");
			return 2;
		}
		if (full_io(fd, header, sizeof(header), 0)) {
			close(fd);
			continue;
		}
		if (header[1] == 0) {
			close(fd);
			break;
		}
		while (got < header[1]) {
			ssize_t n = read(fd, buf, sizeof(buf));

			if (n <= 0)
				break;
			for (ssize_t i = 0; i < n; i++)
				bad += buf[i] != pattern(got + (uint64_t)i);
			got += (uint64_t)n;
		}
		unsigned char ack = bad || got != header[1] ? 'X' : 'K';

		full_io(fd, &ack, 1, 1);
		printf("net-tcp-bw: server: %llu bytes in writes of %llu, "
		       "%llu wrong\n", (unsigned long long)got,
		       (unsigned long long)header[0],
		       (unsigned long long)bad);
		bad_total += ack != 'K';
		close(fd);
	}
	return bad_total ? 1 : 0;
}

static int connect_to(const char *peer)
{
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_port = htons(PORT) };

	if (inet_pton(AF_INET, peer, &addr.sin_addr) != 1)
		usage();
	for (int i = 0; i < 300; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (!connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
			return fd;
		close(fd);
		usleep(200000);
	}
	fprintf(stderr, "net-tcp-bw: cannot connect to %s\n", peer);
	return -1;
}

int main(int argc, char **argv)
{
	const char *peer = NULL;
	int serve = 0, opt, errors = 0;
	unsigned int megabytes = 8, s;
	static unsigned char buf[65536];

	while ((opt = getopt(argc, argv, "sc:m:h")) != -1) {
		switch (opt) {
		case 's':
			serve = 1;
			break;
		case 'c':
			peer = optarg;
			break;
		case 'm':
			megabytes = (unsigned int)atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (serve == !!peer || megabytes == 0)
		usage();
	if (serve)
		return server();
	printf("net-tcp-bw: to %s, TCP, %u MB per write size\n"
	       "%8s %9s\n", peer, megabytes, "bytes", "MB/s");
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint64_t total = (uint64_t)megabytes * 1000000u, sent = 0;
		uint64_t header[2] = { sizes[s], total };
		unsigned char ack = 0;
		int fd = connect_to(peer);

		if (fd < 0)
			return 2;
		full_io(fd, header, sizeof(header), 1);
		uint64_t start = now_ns();

		while (sent < total) {
			size_t n = sizes[s];

			if (n > total - sent)
				n = (size_t)(total - sent);
			for (size_t i = 0; i < n; i++)
				buf[i] = pattern(sent + i);
			if (full_io(fd, buf, n, 1))
				break;
			sent += n;
		}
		if (full_io(fd, &ack, 1, 0) || ack != 'K') {
			fprintf(stderr, "net-tcp-bw: receiver reports an error "
				"at write size %u\n", sizes[s]);
			errors++;
		}
		uint64_t ns = now_ns() - start;

		close(fd);
		printf("%8u %9.3f\n", sizes[s], total * 1e3 / ns);
	}
	uint64_t header[2] = { 0, 0 };
	int fd = connect_to(peer);

	if (fd >= 0) {
		full_io(fd, header, sizeof(header), 1);
		close(fd);
	}
	printf("net-tcp-bw: %s\n", errors ? "FAIL" : "PASS");
	return errors ? 1 : 0;
}
