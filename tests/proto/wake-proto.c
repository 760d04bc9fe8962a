/* SPDX-License-Identifier: MIT */
/*
 * wake-proto: what it costs to wake a sleeping thread on this CPU or on
 * another one, and what the kind of wake-up object changes.
 *
 * Host-only (C11 + POSIX/Linux).  A kicker bound to CPU 0 spins, as a
 * busy-polling vCPU does, and wakes a sleeper through a wake-up object
 * each time the sleeper says (in shared memory) that it sleeps; the
 * sleeper, in poll() as the switch and the link thread sleep, drains the
 * object without blocking, answers on an eventfd of the kicker's and
 * sleeps again.  The objects (-m): an eventfd written with write() (what
 * link 1.2 used: a peer holding the same file description can clear its
 * O_NONBLOCK and fill it, and then the write blocks), or one end of a
 * UNIX socket pair written with send(MSG_DONTWAIT) and drained with
 * recv(MSG_DONTWAIT) (link 1.3: the flag is per call, so nothing the peer
 * does to its end can make either side block), or a pipe.  The sleeper is
 * bound to CPU 0 (the kicker's: "local") or to CPU 1 ("remote"), where
 * another process spins all the time (the other vCPU).  It prints, per
 * placement, the median and 90th percentile of the kicker's write() (what
 * the kick costs the kicker) and of the time from the kick to the
 * sleeper's first instruction (what it costs the packet).  Waking a
 * thread on another CPU takes an inter-processor interrupt, which on a
 * virtual machine is an exit to the hypervisor; the switch's per-CPU
 * wake-up threads (docs/link-protocol.md §6.5) exist because of the
 * difference this measures (docs/datapath.md §3.3).
 *
 * Build:  meson builds it (tests/proto/meson.build), or
 *         cc -O2 -o wake-proto wake-proto.c
 * Run:    ./wake-proto --help
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_KICKS 1000000

/* Shared between the kicker and the sleeper. */
struct shared {
    uint32_t sleeping __attribute__((aligned(64)));  /* sleeper's flag */
    uint64_t woke_ns __attribute__((aligned(64)));   /* sleeper's clock */
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void bind_cpu(int cpu)
{
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0) {
        fprintf(stderr, "wake-proto: cannot bind to CPU %d: %s\n", cpu,
                strerror(errno));
        exit(1);
    }
}

static void must_write(int fd)
{
    uint64_t one = 1;

    if (write(fd, &one, sizeof(one)) != sizeof(one)) {
        perror("wake-proto: eventfd write");
        exit(1);
    }
}

/*
 * The futex mechanism's word, in the memory kicker and sleeper share: a
 * kick adds one and wakes (FUTEX_WAKE never blocks); the sleeper waits
 * while the word holds what it saw before its last look.
 */
static uint32_t *futex_word;

/* A kind of wake-up object: fd[0] is the sleeper's end, fd[1] the kicker's. */
struct mechanism {
    const char *name;
    int (*make)(int fd[2]);
    ssize_t (*kick)(int fd);
    void (*drain)(int fd);
};

static int make_eventfd(int fd[2])
{
    fd[0] = fd[1] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return fd[0] < 0 ? -1 : 0;
}

static ssize_t kick_eventfd(int fd)
{
    uint64_t one = 1;

    return write(fd, &one, sizeof(one));
}

static void drain_eventfd(int fd)
{
    uint64_t value;

    if (read(fd, &value, sizeof(value)) < 0 && errno != EAGAIN) {
        perror("wake-proto: eventfd read");
        exit(1);
    }
}

static int make_socket(int fd[2])
{
    return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd);
}

static ssize_t kick_socket(int fd)
{
    char byte = 1;

    return send(fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void drain_socket(int fd)
{
    char buf[64];

    if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno != EAGAIN) {
        perror("wake-proto: recv");
        exit(1);
    }
}

static int make_pipe(int fd[2])
{
    return pipe2(fd, O_CLOEXEC | O_NONBLOCK);
}

static ssize_t kick_pipe(int fd)
{
    char byte = 1;

    return write(fd, &byte, 1);
}

static void drain_pipe(int fd)
{
    char buf[64];

    if (read(fd, buf, sizeof(buf)) < 0 && errno != EAGAIN) {
        perror("wake-proto: read");
        exit(1);
    }
}

static int make_futex(int fd[2])
{
    fd[0] = fd[1] = -1;
    return 0;
}

static ssize_t kick_futex(int fd)
{
    __atomic_fetch_add(futex_word, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, futex_word, FUTEX_WAKE, 1, NULL, NULL, 0);
    return 1;
}

static void drain_futex(int fd)
{
}

static const struct mechanism mechanisms[] = {
    { "eventfd", make_eventfd, kick_eventfd, drain_eventfd },
    { "socket", make_socket, kick_socket, drain_socket },
    { "pipe", make_pipe, kick_pipe, drain_pipe },
    { "futex", make_futex, kick_futex, drain_futex },
};

static void run_sleeper(const struct mechanism *m, int cpu, int wake_fd,
                        int answer_fd, struct shared *sh)
{
    struct pollfd pfd = { .fd = wake_fd, .events = POLLIN };

    bind_cpu(cpu);
    for (;;) {
        uint32_t seen = futex_word ? __atomic_load_n(futex_word,
                                                     __ATOMIC_SEQ_CST) : 0;

        __atomic_store_n(&sh->sleeping, 1, __ATOMIC_SEQ_CST);
        if (m->kick == kick_futex) {
            syscall(SYS_futex, futex_word, FUTEX_WAIT, seen, NULL, NULL, 0);
        } else if (poll(&pfd, 1, -1) < 0) {
            continue;
        }
        m->drain(wake_fd);
        __atomic_store_n(&sh->woke_ns, now_ns(), __ATOMIC_RELEASE);
        must_write(answer_fd);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static double pct(uint64_t *v, unsigned n, unsigned p)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    return v[(uint64_t)(n - 1) * p / 100] / 1e3;
}

/* @kicks kicks of a sleeper bound to @cpu; prints one line. */
static void measure(const struct mechanism *m, const char *name, int cpu,
                    unsigned kicks)
{
    uint64_t *cost = calloc(kicks, sizeof(*cost));
    uint64_t *woke = calloc(kicks, sizeof(*woke));
    struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int wake[2] = { -1, -1 };
    int answer_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pid_t sleeper, spinner;
    unsigned i;

    futex_word = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!cost || !woke || sh == MAP_FAILED || futex_word == MAP_FAILED ||
        m->make(wake) < 0 || answer_fd < 0) {
        perror("wake-proto: setting up");
        exit(1);
    }
    spinner = fork();
    if (spinner == 0) {
        bind_cpu(1);
        for (;;) {
            __asm__ volatile("" ::: "memory");
        }
    }
    sleeper = fork();
    if (sleeper == 0) {
        run_sleeper(m, cpu, wake[0], answer_fd, sh);
    }
    if (sleeper < 0 || spinner < 0) {
        perror("wake-proto: fork");
        exit(1);
    }
    bind_cpu(0);
    for (i = 0; i < kicks; i++) {
        uint64_t t0, t1, value;
        int n;

        /* Spin until it sleeps, and a little more so that it really does. */
        while (!__atomic_load_n(&sh->sleeping, __ATOMIC_ACQUIRE)) {
        }
        t0 = now_ns() + 20000;
        while (now_ns() < t0) {
        }
        __atomic_store_n(&sh->sleeping, 0, __ATOMIC_SEQ_CST);
        t0 = now_ns();
        if (m->kick(wake[1]) != (m->kick == kick_eventfd ? 8 : 1)) {
            perror("wake-proto: kick");
            exit(1);
        }
        t1 = now_ns();
        /* Spin for its answer, as a vCPU polls, never sleeping. */
        while ((n = read(answer_fd, &value, sizeof(value))) < 0 &&
               errno == EAGAIN) {
        }
        if (n != sizeof(value)) {
            perror("wake-proto: eventfd read");
            exit(1);
        }
        cost[i] = t1 - t0;
        woke[i] = __atomic_load_n(&sh->woke_ns, __ATOMIC_ACQUIRE) - t0;
    }
    kill(sleeper, SIGKILL);
    kill(spinner, SIGKILL);
    while (wait(NULL) > 0) {
    }
    printf("%-8s %-7s sleeper on CPU %d: kick costs the kicker %6.2f us "
           "(p90 %6.2f), kick to sleeper running %7.2f us (p90 %7.2f)\n",
           m->name, name, cpu, pct(cost, kicks, 50), pct(cost, kicks, 90),
           pct(woke, kicks, 50), pct(woke, kicks, 90));
    if (wake[0] >= 0) {
        close(wake[0]);
    }
    if (wake[1] != wake[0]) {
        close(wake[1]);
    }
    munmap(futex_word, 4096);
    futex_word = NULL;
    close(answer_fd);
    munmap(sh, sizeof(*sh));
    free(cost);
    free(woke);
}

static void usage(FILE *f)
{
    fprintf(f,
"Usage: wake-proto [OPTIONS]\n"
"\n"
"The cost of waking a thread that sleeps in poll() on a wake-up object,\n"
"from a spinning kicker bound to CPU 0, when the sleeper is bound to the\n"
"same CPU (\"local\") and to CPU 1 (\"remote\"), where another process\n"
"spins.  Needs two CPUs.  Prints the median and 90th percentile of the\n"
"kick (the kicker's system call) and of the time until the sleeper runs.\n"
"\n"
"  -m, --mechanism M  eventfd, socket (a UNIX socket pair, send() with\n"
"                     MSG_DONTWAIT), pipe, futex (a word in shared memory,\n"
"                     FUTEX_WAKE), or all (default: all, in turn)\n"
"  -r, --rounds N     rounds of every placement and mechanism (default 1)\n"
"  -n, --kicks N      kicks per placement (default 20000, at most %d)\n"
"  -h, --help         this text\n",
            MAX_KICKS);
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        { "mechanism", required_argument, NULL, 'm' },
        { "rounds", required_argument, NULL, 'r' },
        { "kicks", required_argument, NULL, 'n' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    unsigned long kicks = 20000, rounds = 1, r;
    const char *only = "all";
    char *end;
    size_t i;
    int c;

    while ((c = getopt_long(argc, argv, "m:r:n:h", options, NULL)) != -1) {
        switch (c) {
        case 'm':
            only = optarg;
            for (i = 0; i < sizeof(mechanisms) / sizeof(mechanisms[0]); i++) {
                if (!strcmp(only, mechanisms[i].name)) {
                    break;
                }
            }
            if (strcmp(only, "all") &&
                i == sizeof(mechanisms) / sizeof(mechanisms[0])) {
                fprintf(stderr, "wake-proto: --mechanism '%s': want eventfd, "
                        "socket, pipe, futex or all\n", optarg);
                return 2;
            }
            break;
        case 'r':
            errno = 0;
            rounds = strtoul(optarg, &end, 10);
            if (errno || *end || !*optarg || rounds < 1 || rounds > 100) {
                fprintf(stderr, "wake-proto: --rounds '%s': want 1..100\n",
                        optarg);
                return 2;
            }
            break;
        case 'n':
            errno = 0;
            kicks = strtoul(optarg, &end, 10);
            if (errno || *end || !*optarg || kicks < 1 ||
                kicks > MAX_KICKS) {
                fprintf(stderr, "wake-proto: --kicks '%s': want 1..%d\n",
                        optarg, MAX_KICKS);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "wake-proto: unexpected argument '%s'\n",
                argv[optind]);
        usage(stderr);
        return 2;
    }
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        fprintf(stderr, "wake-proto: needs two CPUs\n");
        return 2;
    }
    for (r = 0; r < rounds; r++) {
        for (i = 0; i < sizeof(mechanisms) / sizeof(mechanisms[0]); i++) {
            if (strcmp(only, "all") && strcmp(only, mechanisms[i].name)) {
                continue;
            }
            measure(&mechanisms[i], "local", 0, kicks);
            measure(&mechanisms[i], "remote", 1, kicks);
        }
    }
    return 0;
}
