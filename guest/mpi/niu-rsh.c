/* SPDX-License-Identifier: MIT */
/*
 * niu-rsh: the remote shell MPICH's process manager (Hydra) starts its
 * proxies with on the other nodes of the cluster, over the NIU's network
 * interface.  Hydra's ssh and rsh launchers run "LAUNCHER HOST COMMAND"; the
 * image has neither ssh nor rsh, and Hydra's own persist server crashes in
 * Debian's MPICH 4.0.2 (a NULL call at start), so this program is the
 * launcher (-launcher rsh -launcher-exec niu-rsh).
 *
 *   niu-rsh --serve [--port P]            serve commands until told to stop
 *   niu-rsh [--port P] [--wait S] HOST COMMAND...
 *                                         run COMMAND on HOST with /bin/sh
 *   niu-rsh [--port P] [--wait S] --stop STATUS HOST
 *                                         make HOST's server exit with STATUS
 *
 * The protocol, on one TCP connection per request: the client sends one
 * byte ('x' run, 'q' stop), a 32-bit length in network order and that many
 * bytes (the command, or the status in decimal).  For 'x' the server runs
 * "/bin/sh -c COMMAND" with stdin from /dev/null and stdout and stderr into
 * a pipe it relays as frames (32-bit length, bytes); the last frame has the
 * length 0xffffffff and carries the command's status (its exit code, or
 * 128 + the signal that ended it) as 32 bits.  The client writes the frames
 * to its stdout and exits with that status.  If the client goes away while
 * the command runs, the server kills the command's process group (Hydra
 * kills its launchers when a job aborts).  For 'q' the server answers with
 * the same final frame and exits with the status given.
 *
 * There is no authentication, as with rsh: anyone who reaches the port is
 * root on the node.  The emulated network is private to the cluster's
 * guests (docs/guest.md, "MPI programs").
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PORT 9898
#define DEFAULT_WAIT_S 60
#define MAX_REQUEST 65536
#define FINAL_FRAME 0xffffffffu
#define OP_RUN 'x'
#define OP_STOP 'q'

static const char *prog = "niu-rsh";

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: niu-rsh --serve [--port P]\n"
		"       niu-rsh [--port P] [--wait S] HOST COMMAND...\n"
		"       niu-rsh [--port P] [--wait S] --stop STATUS HOST\n"
		"\n"
		"A remote shell for the cluster's nodes (MPICH's Hydra launches its\n"
		"proxies with it: mpiexec -launcher rsh -launcher-exec niu-rsh).\n"
		"  --serve      run commands sent to port P until a --stop arrives,\n"
		"               then exit with the status it carries\n"
		"  HOST CMD     run CMD with /bin/sh -c on HOST; its output comes to\n"
		"               stdout, and niu-rsh exits with its status\n"
		"  --stop N     make HOST's server exit with status N (0..255)\n"
		"  --port P     TCP port (default %d)\n"
		"  --wait S     keep trying to reach HOST for S seconds while nothing\n"
		"               listens there yet (default %d)\n"
		"No authentication: only for the cluster's private network.\n",
		DEFAULT_PORT, DEFAULT_WAIT_S);
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* 1: all read; 0: end of stream before the first byte; -1: error or short. */
static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return got ? -1 : 0;
		got += (size_t)n;
	}
	return 1;
}

static int send_u32(int fd, uint32_t v)
{
	v = htonl(v);
	return write_all(fd, &v, sizeof(v));
}

static int send_final(int fd, int status)
{
	return send_u32(fd, FINAL_FRAME) || send_u32(fd, (uint32_t)status);
}

static int wait_status(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 255;
}

/* The client went away: its command's process group goes too. */
static void __attribute__((noreturn)) abandon_command(pid_t child)
{
	kill(-child, SIGKILL);
	waitpid(child, NULL, 0);
	_exit(0);
}

/* Runs one 'x' request on connection fd; never returns. */
static void serve_command(int fd, const char *cmd)
{
	int pipefd[2], devnull, st = 0;
	char buf[4096];
	pid_t child;

	if (pipe(pipefd) < 0) {
		fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
		send_final(fd, 255);
		_exit(1);
	}
	child = fork();
	if (child < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
		send_final(fd, 255);
		_exit(1);
	}
	if (child == 0) {
		setpgid(0, 0);
		devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		close(pipefd[0]);
		close(pipefd[1]);
		close(fd);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		fprintf(stderr, "%s: /bin/sh: %s\n", prog, strerror(errno));
		_exit(127);
	}
	setpgid(child, child);
	close(pipefd[1]);
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = pipefd[0], .events = POLLIN },
			{ .fd = fd, .events = POLLIN },
		};
		ssize_t n;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents) {
			/* The client sends nothing after its request: this
			 * is its end (Hydra killed it). */
			abandon_command(child);
		}
		if (!p[0].revents)
			continue;
		n = read(pipefd[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (send_u32(fd, (uint32_t)n) || write_all(fd, buf, (size_t)n))
			abandon_command(child);
	}
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	send_final(fd, wait_status(st));
	_exit(0);
}

/* Reads one request; returns its op, or 0 after a bad one (said why). */
static int read_request(int fd, char **payload)
{
	unsigned char op;
	uint32_t len;
	char *buf;

	*payload = NULL;
	if (read_all(fd, &op, 1) != 1 || read_all(fd, &len, sizeof(len)) != 1) {
		fprintf(stderr, "%s: a request ended early\n", prog);
		return 0;
	}
	len = ntohl(len);
	if ((op != OP_RUN && op != OP_STOP) || len == 0 || len > MAX_REQUEST) {
		fprintf(stderr, "%s: a bad request (op 0x%02x, %u bytes): ignored\n",
			prog, op, len);
		return 0;
	}
	buf = malloc(len + 1);
	if (!buf)
		return 0;
	if (read_all(fd, buf, len) != 1) {
		fprintf(stderr, "%s: a request ended early\n", prog);
		free(buf);
		return 0;
	}
	buf[len] = '\0';
	if (strlen(buf) != len) {
		fprintf(stderr, "%s: a request with a NUL byte: ignored\n", prog);
		free(buf);
		return 0;
	}
	*payload = buf;
	return op;
}

/* A decimal number in lo..hi from @s into *@v: 0, or -1 if it is none. */
static int parse_range(const char *s, int lo, int hi, int *v)
{
	char *end;
	long l;

	errno = 0;
	l = strtol(s, &end, 10);
	if (errno || end == s || *end || l < lo || l > hi)
		return -1;
	*v = (int)l;
	return 0;
}

static int parse_status(const char *s, int *status)
{
	return parse_range(s, 0, 255, status);
}

static int serve(int port)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};
	int lfd, one = 1;

	signal(SIGCHLD, SIG_DFL);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(lfd, 64) < 0) {
		fprintf(stderr, "%s: cannot listen on port %d: %s\n", prog, port,
			strerror(errno));
		return 1;
	}
	for (;;) {
		char *payload;
		int fd, op, status;
		pid_t pid;

		/* Reap the sessions that ended. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			fprintf(stderr, "%s: accept: %s\n", prog, strerror(errno));
			return 1;
		}
		op = read_request(fd, &payload);
		if (op == OP_STOP) {
			if (parse_status(payload, &status)) {
				fprintf(stderr, "%s: a stop with status '%s': ignored\n",
					prog, payload);
				send_final(fd, 2);
				free(payload);
				close(fd);
				continue;
			}
			/* No longer listening before the answer: a client that
			 * connects again at once (the next mpiexec) is refused
			 * and tries again until the next server listens,
			 * instead of waiting in this one's backlog. */
			close(lfd);
			send_final(fd, status);
			close(fd);
			free(payload);
			return status;
		}
		if (op == OP_RUN) {
			pid = fork();
			if (pid == 0) {
				close(lfd);
				serve_command(fd, payload);
			}
			if (pid < 0) {
				fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
				send_final(fd, 255);
			}
		}
		free(payload);
		close(fd);
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Connects to HOST:port, trying again while nothing listens there yet. */
static int connect_host(const char *host, int port, int wait_s)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	char service[16];
	double until = now_s() + wait_s;
	int err, fd = -1, last = 0;

	snprintf(service, sizeof(service), "%d", port);
	err = getaddrinfo(host, service, &hints, &res);
	if (err) {
		fprintf(stderr, "%s: %s: %s\n", prog, host, gai_strerror(err));
		return -1;
	}
	for (;;) {
		for (ai = res; ai; ai = ai->ai_next) {
			fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
				    ai->ai_protocol);
			if (fd < 0)
				continue;
			if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
				freeaddrinfo(res);
				return fd;
			}
			last = errno;
			close(fd);
			fd = -1;
		}
		if ((last != ECONNREFUSED && last != EHOSTUNREACH &&
		     last != ENETUNREACH && last != ETIMEDOUT) ||
		    now_s() >= until)
			break;
		usleep(100 * 1000);
	}
	freeaddrinfo(res);
	fprintf(stderr, "%s: cannot reach %s port %d: %s\n", prog, host, port,
		strerror(last));
	return -1;
}

static int request(const char *host, int port, int wait_s, char op,
		   const char *payload)
{
	char buf[4096];
	uint32_t len;
	int fd, r;

	fd = connect_host(host, port, wait_s);
	if (fd < 0)
		return 255;
	if (write_all(fd, &op, 1) || send_u32(fd, (uint32_t)strlen(payload)) ||
	    write_all(fd, payload, strlen(payload))) {
		fprintf(stderr, "%s: %s: sending the request failed: %s\n", prog,
			host, strerror(errno));
		return 255;
	}
	for (;;) {
		r = read_all(fd, &len, sizeof(len));
		if (r != 1)
			break;
		len = ntohl(len);
		if (len == FINAL_FRAME) {
			uint32_t status;

			if (read_all(fd, &status, sizeof(status)) != 1)
				break;
			close(fd);
			return (int)(ntohl(status) & 0xff);
		}
		while (len) {
			size_t chunk = len < sizeof(buf) ? len : sizeof(buf);

			if (read_all(fd, buf, chunk) != 1 ||
			    write_all(1, buf, chunk)) {
				r = -1;
				break;
			}
			len -= (uint32_t)chunk;
		}
		if (r != 1)
			break;
	}
	fprintf(stderr, "%s: %s closed the connection before the command's status\n",
		prog, host);
	close(fd);
	return 255;
}

/* An option's number in lo..hi, or a line saying why and exit 2. */
static int parse_int(const char *what, const char *s, int lo, int hi)
{
	int v;

	if (parse_range(s, lo, hi, &v)) {
		fprintf(stderr, "%s: %s wants %d..%d, not '%s'\n", prog, what, lo,
			hi, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "serve", no_argument, NULL, 's' },
		{ "stop", required_argument, NULL, 'q' },
		{ "port", required_argument, NULL, 'p' },
		{ "wait", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int port = DEFAULT_PORT, wait_s = DEFAULT_WAIT_S, serving = 0, c;
	const char *stop = NULL;
	char *cmd;
	size_t len = 0;

	/* "+": options end at HOST, so COMMAND keeps its own. */
	while ((c = getopt_long(argc, argv, "+hp:w:", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			serving = 1;
			break;
		case 'q':
			stop = optarg;
			break;
		case 'p':
			port = parse_int("--port", optarg, 1, 65535);
			break;
		case 'w':
			wait_s = parse_int("--wait", optarg, 0, 3600);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (serving) {
		if (optind != argc || stop) {
			usage(stderr);
			return 2;
		}
		return serve(port);
	}
	if (stop) {
		int status;

		if (optind + 1 != argc || parse_status(stop, &status)) {
			fprintf(stderr, "%s: --stop wants a status 0..255 and one HOST\n",
				prog);
			return 2;
		}
		return request(argv[optind], port, wait_s, OP_STOP, stop) == status
			       ? 0 : 1;
	}
	if (argc - optind < 2) {
		usage(stderr);
		return 2;
	}
	/* The command: the remaining words joined by spaces, as rsh does. */
	for (c = optind + 1; c < argc; c++)
		len += strlen(argv[c]) + 1;
	cmd = calloc(1, len);
	if (!cmd)
		return 255;
	for (c = optind + 1; c < argc; c++) {
		strcat(cmd, argv[c]);
		if (c + 1 < argc)
			strcat(cmd, " ");
	}
	return request(argv[optind], port, wait_s, OP_RUN, cmd);
}
