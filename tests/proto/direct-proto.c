/* SPDX-License-Identifier: MIT */
/*
 * direct-proto: the designs for taking the switch process off the
 * same-host data path, measured side by side (docs/datapath.md §6).
 *
 * Host-only (C11 + POSIX/Linux).  NODES processes ping-pong in pairs
 * (node 2k pings node 2k+1), all pairs at once, as niu-bench-nodes runs
 * niu-ping; each packet costs WORK ns of CPU at each end it passes (the
 * NIU's per-packet work).  Packets move through single-producer
 * single-consumer rings in shared memory with a kick only for a consumer
 * that said it sleeps (include/arctic/link-ring.h's protocol).  Paths:
 *
 *   switch  node -> W -> node: W, a process of its own, forwards what its
 *           rings hold and sleeps on a futex word per inbound ring
 *           (futex_waitv) when they are empty: arctic-switch today
 *   futex   per ordered pair of nodes a ring of its own, written only by
 *           its sender; a receiver sleeps in futex_waitv() on the wake-up
 *           word of each ring it reads, a sender wakes the word of its
 *           own ring only: no peer can block or take another's wake-up
 *   efd     per ordered pair a ring and an eventfd of its own; a
 *           receiver sleeps in poll() on its peers' eventfds
 *
 * How a node waits for its reply or its next ping:
 *
 *   spin    polls its rings without pause (a busy-polling vCPU)
 *   yield   sched_yield() after every empty poll (x-link-poll-yield)
 *   sleep   says it sleeps, then blocks until kicked (a sleeping guest's
 *           link thread, without the guest's own interrupt and wake-up)
 *
 * Every node checks that each packet is its peer's next; anything else
 * exits 1.  Prints per mode the round trip's median, mean and p99 over
 * every pair, and the CPU time per round trip of all processes.
 *
 * Build:  meson builds it (tests/proto/meson.build), or
 *         cc -O2 -o direct-proto direct-proto.c
 * Run:    ./direct-proto --help
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 256               /* packets per ring, a power of two */
#define PKT 64                  /* bytes per packet */
#define MAX_NODES 16
#define MAX_ITER 200000

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

enum path { PATH_SWITCH, PATH_FUTEX, PATH_EFD, NUM_PATHS };
enum wait { WAIT_SPIN, WAIT_YIELD, WAIT_SLEEP, NUM_WAITS };
static const char *const path_name[] = { "switch", "futex", "efd" };
static const char *const wait_name[] = { "spin", "yield", "sleep" };

struct ring {
    uint32_t head __attribute__((aligned(64)));     /* producer's */
    uint32_t sleeping __attribute__((aligned(64))); /* consumer sleeps */
    uint32_t wake;                                  /* futex word */
    uint32_t tail __attribute__((aligned(64)));     /* consumer's */
    int efd;
    uint8_t data[SLOTS][PKT] __attribute__((aligned(64)));
};

struct config {
    unsigned nodes, iterations;
    uint64_t work_ns;
    enum path path;
    enum wait wait;
};

/* Results, in shared memory: each pinging node's round trips. */
struct shared {
    uint32_t error;
    uint32_t done;
    uint64_t rtt[MAX_NODES / 2][MAX_ITER];
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void work(uint64_t ns)
{
    uint64_t end = now_ns() + ns;

    while (ns && now_ns() < end) {
    }
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static int ring_put(struct ring *r, const uint8_t *pkt)
{
    uint32_t h = r->head;

    if (h - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) >= SLOTS) {
        return 0;
    }
    memcpy(r->data[h % SLOTS], pkt, PKT);
    __atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
    return 1;
}

static int ring_get(struct ring *r, uint8_t *pkt)
{
    uint32_t t = r->tail;

    if (__atomic_load_n(&r->head, __ATOMIC_ACQUIRE) == t) {
        return 0;
    }
    memcpy(pkt, r->data[t % SLOTS], PKT);
    __atomic_store_n(&r->tail, t + 1, __ATOMIC_RELEASE);
    return 1;
}

static int ring_empty(struct ring *r)
{
    return __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) == r->tail;
}

/* After publishing: wake the consumer if it said it sleeps. */
static void ring_kick(struct ring *r, int use_efd)
{
    uint64_t one = 1;

    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&r->sleeping, __ATOMIC_RELAXED) ||
        !__atomic_exchange_n(&r->sleeping, 0, __ATOMIC_RELAXED)) {
        return;
    }
    if (use_efd) {
        if (write(r->efd, &one, sizeof(one)) < 0 && errno != EAGAIN) {
            die("direct-proto: eventfd write");
        }
        return;
    }
    __atomic_fetch_add(&r->wake, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &r->wake, FUTEX_WAKE, 1, NULL, NULL, 0);
}

struct futex_waitv_arg {
    uint64_t val;
    uint64_t uaddr;
    uint32_t flags;
    uint32_t reserved;
};

/*
 * Sleep until one of the rings in[0..n-1] is kicked or not empty: say so
 * on each, look again, then block on their futex words or eventfds.
 */
static void rings_sleep(struct ring **in, unsigned n, int use_efd)
{
    struct futex_waitv_arg wv[MAX_NODES];
    struct pollfd pfd[MAX_NODES];
    uint64_t v;
    unsigned i;

    for (i = 0; i < n; i++) {
        wv[i].val = __atomic_load_n(&in[i]->wake, __ATOMIC_SEQ_CST);
        wv[i].uaddr = (uintptr_t)&in[i]->wake;
        wv[i].flags = 2 /* FUTEX2_SIZE_U32 */;
        wv[i].reserved = 0;
        pfd[i].fd = in[i]->efd;
        pfd[i].events = POLLIN;
        __atomic_store_n(&in[i]->sleeping, 1, __ATOMIC_RELAXED);
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (i = 0; i < n; i++) {
        if (!ring_empty(in[i])) {
            goto awake;
        }
    }
    if (use_efd) {
        if (poll(pfd, n, -1) < 0 && errno != EINTR) {
            die("direct-proto: poll");
        }
        for (i = 0; i < n; i++) {
            if (read(in[i]->efd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
                die("direct-proto: eventfd read");
            }
        }
    } else if (syscall(SYS_futex_waitv, wv, n, 0, NULL, CLOCK_MONOTONIC) < 0 &&
               errno != EAGAIN && errno != EINTR) {
        die("direct-proto: futex_waitv");
    }
awake:
    for (i = 0; i < n; i++) {
        __atomic_store_n(&in[i]->sleeping, 0, __ATOMIC_RELAXED);
    }
}

/* The rings: [from][to], to == nodes meaning the switch W. */
static struct ring *rings;
static unsigned ring_stride;

static struct ring *ring_of(unsigned from, unsigned to)
{
    return &rings[from * ring_stride + to];
}

/* W: forward by destination; sleep when every input is empty. */
static void run_switch(const struct config *c)
{
    struct ring *in[MAX_NODES];
    uint8_t pkt[PKT];
    unsigned i;

    for (i = 0; i < c->nodes; i++) {
        in[i] = ring_of(i, c->nodes);
    }
    for (;;) {
        int moved = 0;

        for (i = 0; i < c->nodes; i++) {
            while (ring_get(in[i], pkt)) {
                struct ring *out = ring_of(c->nodes, pkt[8]);

                while (!ring_put(out, pkt)) {
                }
                ring_kick(out, 0);
                moved = 1;
            }
        }
        if (!moved) {
            rings_sleep(in, c->nodes, 0);
        }
    }
}

/* The rings a node reads: from its peer, or from W. */
static struct ring *node_in(const struct config *c, unsigned me)
{
    return c->path == PATH_SWITCH ? ring_of(c->nodes, me) : ring_of(me ^ 1, me);
}

static struct ring *node_out(const struct config *c, unsigned me)
{
    return c->path == PATH_SWITCH ? ring_of(me, c->nodes) : ring_of(me, me ^ 1);
}

/* Wait for the next packet, as the mode says; check it came in order. */
static void node_recv(const struct config *c, unsigned me, uint64_t want,
                      struct shared *sh)
{
    struct ring *in = node_in(c, me);
    uint8_t pkt[PKT];
    uint64_t seq;

    while (!ring_get(in, pkt)) {
        if (__atomic_load_n(&sh->error, __ATOMIC_RELAXED)) {
            exit(1);
        }
        if (c->wait == WAIT_YIELD) {
            sched_yield();
        } else if (c->wait == WAIT_SLEEP) {
            rings_sleep(&in, 1, c->path == PATH_EFD);
        }
    }
    work(c->work_ns);
    memcpy(&seq, pkt, sizeof(seq));
    if (seq != want || pkt[8] != me || pkt[9] != (me ^ 1)) {
        fprintf(stderr, "direct-proto: node %u got packet %llu from %u to "
                "%u, wanted %llu from %u\n", me, (unsigned long long)seq,
                pkt[9], pkt[8], (unsigned long long)want, me ^ 1);
        __atomic_store_n(&sh->error, 1, __ATOMIC_RELAXED);
        exit(1);
    }
}

static void node_send(const struct config *c, unsigned me, uint64_t seq)
{
    struct ring *out = node_out(c, me);
    uint8_t pkt[PKT] = { 0 };

    work(c->work_ns);
    memcpy(pkt, &seq, sizeof(seq));
    pkt[8] = me ^ 1;            /* to */
    pkt[9] = me;                /* from */
    while (!ring_put(out, pkt)) {
    }
    ring_kick(out, c->path == PATH_EFD);
}

static void run_node(const struct config *c, unsigned me, struct shared *sh)
{
    uint64_t i, t;

    for (i = 0; i < c->iterations; i++) {
        if (me & 1) {
            node_recv(c, me, i, sh);
            node_send(c, me, i);
        } else {
            t = now_ns();
            node_send(c, me, i);
            node_recv(c, me, i, sh);
            sh->rtt[me / 2][i] = now_ns() - t;
        }
    }
    exit(0);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

struct result {
    double median_us, mean_us, p99_us, cpu_us_per_rtt;
};

static int run_once(const struct config *c, struct result *res)
{
    size_t n_rings = (size_t)(c->nodes + 1) * (c->nodes + 1);
    struct shared *sh;
    struct rusage ru;
    pid_t pid[MAX_NODES + 1];
    uint64_t *all, sum = 0;
    size_t count = (size_t)c->nodes / 2 * c->iterations, k = 0;
    unsigned i, j;
    int status, failed = 0, pw = -1;

    ring_stride = c->nodes + 1;
    rings = mmap(NULL, n_rings * sizeof(*rings), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (rings == MAP_FAILED || sh == MAP_FAILED) {
        die("direct-proto: mmap");
    }
    for (i = 0; i < n_rings; i++) {
        rings[i].efd = eventfd(0, EFD_NONBLOCK);
        if (rings[i].efd < 0) {
            die("direct-proto: eventfd");
        }
    }
    if (c->path == PATH_SWITCH) {
        pw = fork();
        if (pw == 0) {
            run_switch(c);
        }
    }
    for (i = 0; i < c->nodes; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            run_node(c, i, sh);
        }
        if (pid[i] < 0) {
            die("direct-proto: fork");
        }
    }
    for (i = 0; i < c->nodes; i++) {
        if (waitpid(pid[i], &status, 0) < 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status)) {
            failed = 1;
        }
    }
    if (pw > 0) {
        kill(pw, SIGKILL);
        waitpid(pw, NULL, 0);
    }
    getrusage(RUSAGE_CHILDREN, &ru);
    all = malloc(count * sizeof(*all));
    if (!all) {
        die("direct-proto: malloc");
    }
    for (i = 0; i < c->nodes / 2; i++) {
        for (j = 0; j < c->iterations; j++) {
            all[k++] = sh->rtt[i][j];
            sum += sh->rtt[i][j];
        }
    }
    qsort(all, count, sizeof(*all), cmp_u64);
    res->median_us = all[count / 2] / 1e3;
    res->mean_us = sum / (double)count / 1e3;
    res->p99_us = all[count * 99 / 100] / 1e3;
    /* RUSAGE_CHILDREN accumulates: the caller takes differences. */
    res->cpu_us_per_rtt = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
                          ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
    free(all);
    for (i = 0; i < n_rings; i++) {
        close(rings[i].efd);
    }
    munmap(rings, n_rings * sizeof(*rings));
    munmap(sh, sizeof(*sh));
    return failed;
}

static void usage(FILE *f)
{
    fprintf(f,
"Usage: direct-proto [OPTIONS]\n"
"\n"
"NODES processes ping-pong in pairs, all pairs at once, through a switch\n"
"process (\"switch\") or over rings per ordered pair of nodes woken by\n"
"futexes (\"futex\") or eventfds (\"efd\"); each node waits spinning,\n"
"yielding after each empty poll, or sleeping.  Runs every path and wait\n"
"interleaved, ROUNDS times, and prints each one's round trip (median,\n"
"mean, p99 over all pairs, us; range over the rounds) and CPU time per\n"
"round trip.\n"
"\n"
"  -n, --nodes N        nodes, even, 2..%d (default 4)\n"
"  -i, --iterations N   round trips per pair per run (default 20000)\n"
"  -W, --work NS        CPU time per packet at each end (default 300)\n"
"  -r, --rounds N       runs of each combination (default 3)\n"
"  -p, --paths LIST     of switch,futex,efd (default all)\n"
"  -w, --waits LIST     of spin,yield,sleep (default all)\n"
"  -h, --help           this text\n"
"\n"
"Exit status 1 if a packet came out of order, 2 for bad arguments.\n",
            MAX_NODES);
}

static int parse_uint(const char *opt, const char *s, unsigned long long min,
                      unsigned long long max, unsigned long long *out)
{
    char *end;

    errno = 0;
    *out = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || *out < min || *out > max) {
        fprintf(stderr, "direct-proto: %s wants a whole number from %llu to "
                "%llu, not '%s'\n", opt, min, max, s);
        return 0;
    }
    return 1;
}

/* A comma-separated list of names into a bit mask; 0 on a bad name. */
static unsigned parse_list(const char *opt, const char *s,
                           const char *const *names, unsigned n)
{
    char *copy = strdup(s), *tok, *save = NULL;
    unsigned mask = 0, i;

    for (tok = strtok_r(copy, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        for (i = 0; i < n && strcmp(tok, names[i]); i++) {
        }
        if (i == n) {
            fprintf(stderr, "direct-proto: %s: no '%s'\n", opt, tok);
            free(copy);
            return 0;
        }
        mask |= 1u << i;
    }
    free(copy);
    if (!mask) {
        fprintf(stderr, "direct-proto: %s: empty list\n", opt);
    }
    return mask;
}

static void span(const double *v, unsigned n, double *lo, double *hi)
{
    unsigned i;

    *lo = *hi = v[0];
    for (i = 1; i < n; i++) {
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "nodes", required_argument, NULL, 'n' },
        { "iterations", required_argument, NULL, 'i' },
        { "work", required_argument, NULL, 'W' },
        { "rounds", required_argument, NULL, 'r' },
        { "paths", required_argument, NULL, 'p' },
        { "waits", required_argument, NULL, 'w' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct config c = { .nodes = 4, .iterations = 20000, .work_ns = 300 };
    unsigned paths = 7, waits = 7, rounds = 3, r, p, w;
    static double med[NUM_PATHS][NUM_WAITS][64], mean[NUM_PATHS][NUM_WAITS][64];
    static double p99[NUM_PATHS][NUM_WAITS][64], cpu[NUM_PATHS][NUM_WAITS][64];
    unsigned long long v;
    double cpu_before = 0;
    int opt;

    while ((opt = getopt_long(argc, argv, "n:i:W:r:p:w:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            if (!parse_uint("--nodes", optarg, 2, MAX_NODES, &v) || v % 2) {
                fprintf(stderr, "direct-proto: --nodes wants an even "
                        "number\n");
                return 2;
            }
            c.nodes = v;
            break;
        case 'i':
            if (!parse_uint("--iterations", optarg, 1, MAX_ITER, &v)) {
                return 2;
            }
            c.iterations = v;
            break;
        case 'W':
            if (!parse_uint("--work", optarg, 0, 1000000, &v)) {
                return 2;
            }
            c.work_ns = v;
            break;
        case 'r':
            if (!parse_uint("--rounds", optarg, 1, 64, &v)) {
                return 2;
            }
            rounds = v;
            break;
        case 'p':
            paths = parse_list("--paths", optarg, path_name, NUM_PATHS);
            if (!paths) {
                return 2;
            }
            break;
        case 'w':
            waits = parse_list("--waits", optarg, wait_name, NUM_WAITS);
            if (!waits) {
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
        fprintf(stderr, "direct-proto: unexpected argument '%s'\n",
                argv[optind]);
        return 2;
    }
    printf("%u nodes (%u pairs at once) on %ld CPUs, %u round trips per "
           "pair, %llu ns of work per packet at each end, %u round(s)\n",
           c.nodes, c.nodes / 2, sysconf(_SC_NPROCESSORS_ONLN), c.iterations,
           (unsigned long long)c.work_ns, rounds);
    for (r = 0; r < rounds; r++) {
        for (w = 0; w < NUM_WAITS; w++) {
            for (p = 0; p < NUM_PATHS; p++) {
                struct result res;

                if (!(paths & (1u << p)) || !(waits & (1u << w))) {
                    continue;
                }
                c.path = p;
                c.wait = w;
                if (run_once(&c, &res)) {
                    fprintf(stderr, "direct-proto: %s/%s failed\n",
                            path_name[p], wait_name[w]);
                    return 1;
                }
                med[p][w][r] = res.median_us;
                mean[p][w][r] = res.mean_us;
                p99[p][w][r] = res.p99_us;
                cpu[p][w][r] = (res.cpu_us_per_rtt - cpu_before) /
                               (c.nodes / 2 * (double)c.iterations);
                cpu_before = res.cpu_us_per_rtt;
                fprintf(stderr, "  round %u %-6s %-5s median %8.1f mean "
                        "%8.1f p99 %8.1f us, CPU %6.1f us per round trip\n",
                        r + 1, path_name[p], wait_name[w], res.median_us,
                        res.mean_us, res.p99_us, cpu[p][w][r]);
            }
        }
    }
    printf("path   wait  | median us     | mean us       | p99 us          "
           "| CPU us per round trip\n");
    for (w = 0; w < NUM_WAITS; w++) {
        for (p = 0; p < NUM_PATHS; p++) {
            double a, b, c2, d, e, f, g, h;

            if (!(paths & (1u << p)) || !(waits & (1u << w))) {
                continue;
            }
            span(med[p][w], rounds, &a, &b);
            span(mean[p][w], rounds, &c2, &d);
            span(p99[p][w], rounds, &e, &f);
            span(cpu[p][w], rounds, &g, &h);
            printf("%-6s %-5s | %6.1f-%-6.1f | %6.1f-%-6.1f | %7.1f-%-7.1f "
                   "| %5.1f-%-5.1f\n", path_name[p], wait_name[w], a, b, c2,
                   d, e, f, g, h);
        }
    }
    return 0;
}
