/* SPDX-License-Identifier: MIT */
/*
 * wake-proto: what it costs to wake a sleeping thread on this CPU or on
 * another one.
 *
 * Host-only (C11 + POSIX/Linux).  A kicker bound to CPU 0 spins, as a
 * busy-polling vCPU does, and wakes a sleeper by writing its eventfd each
 * time the sleeper says (in shared memory) that it sleeps; the sleeper
 * answers on an eventfd of the kicker's and sleeps again.  The sleeper is
 * bound to CPU 0 (the kicker's: "local") or to CPU 1 ("remote"), where
 * another process spins all the time (the other vCPU).  It prints, per
 * placement, the median and 90th percentile of the kicker's write() (what
 * the kick costs the kicker) and of the time from the kick to the
 * sleeper's first instruction (what it costs the packet).  Waking a
 * thread on another CPU takes an inter-processor interrupt, which on a
 * virtual machine is an exit to the hypervisor; the switch's per-CPU
 * wake-up threads (docs/link-protocol.md §6.5) exist because of the
 * difference this measures (docs/performance.md §14).
 *
 * Build:  meson builds it (tests/proto/meson.build), or
 *         cc -O2 -o wake-proto wake-proto.c
 * Run:    ./wake-proto --help
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
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

static void must_read(int fd)
{
    uint64_t value;

    if (read(fd, &value, sizeof(value)) != sizeof(value)) {
        perror("wake-proto: eventfd read");
        exit(1);
    }
}

static void run_sleeper(int cpu, int wake_fd, int answer_fd,
                        struct shared *sh)
{
    bind_cpu(cpu);
    for (;;) {
        __atomic_store_n(&sh->sleeping, 1, __ATOMIC_SEQ_CST);
        must_read(wake_fd);
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
static void measure(const char *name, int cpu, unsigned kicks)
{
    uint64_t *cost = calloc(kicks, sizeof(*cost));
    uint64_t *wake = calloc(kicks, sizeof(*wake));
    struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int wake_fd = eventfd(0, EFD_CLOEXEC);
    int answer_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pid_t sleeper, spinner;
    unsigned i;

    if (!cost || !wake || sh == MAP_FAILED || wake_fd < 0 || answer_fd < 0) {
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
        run_sleeper(cpu, wake_fd, answer_fd, sh);
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
        must_write(wake_fd);
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
        wake[i] = __atomic_load_n(&sh->woke_ns, __ATOMIC_ACQUIRE) - t0;
    }
    kill(sleeper, SIGKILL);
    kill(spinner, SIGKILL);
    while (wait(NULL) > 0) {
    }
    printf("%-7s sleeper on CPU %d: kick costs the kicker %6.2f us "
           "(p90 %6.2f), kick to sleeper running %7.2f us (p90 %7.2f)\n",
           name, cpu, pct(cost, kicks, 50), pct(cost, kicks, 90),
           pct(wake, kicks, 50), pct(wake, kicks, 90));
    close(wake_fd);
    close(answer_fd);
    munmap(sh, sizeof(*sh));
    free(cost);
    free(wake);
}

static void usage(FILE *f)
{
    fprintf(f,
"Usage: wake-proto [OPTIONS]\n"
"\n"
"The cost of waking a thread that sleeps on an eventfd, from a spinning\n"
"kicker bound to CPU 0, when the sleeper is bound to the same CPU\n"
"(\"local\") and to CPU 1 (\"remote\"), where another process spins.\n"
"Needs two CPUs.  Prints the median and 90th percentile of the\n"
"kicker's write() and of the time until the sleeper runs.\n"
"\n"
"  -n, --kicks N      kicks per placement (default 20000, at most %d)\n"
"  -h, --help         this text\n",
            MAX_KICKS);
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        { "kicks", required_argument, NULL, 'n' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    unsigned long kicks = 20000;
    char *end;
    int c;

    while ((c = getopt_long(argc, argv, "n:h", options, NULL)) != -1) {
        switch (c) {
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
    measure("local", 0, kicks);
    measure("remote", 1, kicks);
    return 0;
}
