/* SPDX-License-Identifier: MIT */
/*
 * window-proto: what the switch process costs a window-limited stream.
 *
 * Host-only (C11 + POSIX/Linux).  A sender S keeps WINDOW 64-byte packets
 * in flight to a receiver R, which answers each batch it reads with a
 * cumulative ack, as a remote DMA stream between two NIUs does.  S and R
 * spin, as busy-polling vCPUs do, and do WORK ns of work per packet (the
 * NIU builds, checks and delivers each one); a party that kicks a
 * sleeping consumer then yields its CPU (the device's x-link-kick-yield).
 * The packets move through single-producer single-consumer rings in
 * shared memory, with an eventfd kick only for a consumer that said it
 * sleeps (the protocol of include/arctic/link-ring.h):
 *
 *   switch: S -> W -> R and R -> W -> S, W a process of its own that
 *           forwards whatever its rings hold and sleeps in poll() when
 *           they are empty (arctic-switch's place on the data path)
 *   direct: S -> R and R -> S (the routing done where the packet is sent)
 *
 * R checks that every packet is the next in sequence, S that every ack
 * moves forward and that the window holds; anything else exits 1.
 *
 * Build:  meson builds it (tests/proto/meson.build), or
 *         cc -O2 -o window-proto window-proto.c
 * Run:    ./window-proto --help
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
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

#define SLOTS 1024              /* packets per ring, a power of two */
#define PKT 64                  /* bytes per packet (an Arctic DMA packet) */
#define MAX_ROUNDS 64

struct ring {
    uint32_t head __attribute__((aligned(64)));     /* producer's */
    uint32_t sleeping __attribute__((aligned(64))); /* consumer sleeps */
    uint32_t tail __attribute__((aligned(64)));     /* consumer's */
    int efd;                                        /* consumer's eventfd */
    uint8_t data[SLOTS][PKT] __attribute__((aligned(64)));
};

/* What R reports back to main (shared memory). */
struct shared {
    uint32_t error;             /* set by R: a packet out of sequence */
    uint64_t bad_seq, want_seq;
};

struct config {
    unsigned window, rounds;
    double seconds;
    uint64_t work_ns;
    int yield;
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The per-packet work of an NIU, as time spent on the CPU. */
static void work(uint64_t ns)
{
    uint64_t end;

    if (!ns) {
        return;
    }
    end = now_ns() + ns;
    while (now_ns() < end) {
    }
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

/* After publishing: kick the consumer if it said it sleeps, once. */
static void ring_kick(struct ring *r, int yield)
{
    uint64_t one = 1;

    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&r->sleeping, __ATOMIC_RELAXED) &&
        __atomic_exchange_n(&r->sleeping, 0, __ATOMIC_RELAXED)) {
        if (write(r->efd, &one, sizeof(one)) < 0 && errno != EAGAIN) {
            perror("window-proto: eventfd write");
            exit(1);
        }
        if (yield) {
            sched_yield();
        }
    }
}

static void ring_put_wait(struct ring *r, const uint8_t *pkt)
{
    while (!ring_put(r, pkt)) {
    }
}

/* W: forward both ways; sleep in poll() when both inputs are empty. */
static void run_switch(struct ring *rg)
{
    uint8_t pkt[PKT];
    struct ring *in[2] = { &rg[0], &rg[2] }, *out[2] = { &rg[1], &rg[3] };
    uint64_t v;
    int i;

    for (;;) {
        for (i = 0; i < 2; i++) {
            int moved = 0;

            while (ring_get(in[i], pkt)) {
                ring_put_wait(out[i], pkt);
                moved = 1;
            }
            if (moved) {
                ring_kick(out[i], 0);
            }
        }
        __atomic_store_n(&in[0]->sleeping, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&in[1]->sleeping, 1, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (ring_empty(in[0]) && ring_empty(in[1])) {
            struct pollfd pfd[2] = {
                { .fd = in[0]->efd, .events = POLLIN },
                { .fd = in[1]->efd, .events = POLLIN },
            };

            if (poll(pfd, 2, -1) < 0 && errno != EINTR) {
                perror("window-proto: poll");
                exit(1);
            }
            for (i = 0; i < 2; i++) {
                if (read(in[i]->efd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
                    perror("window-proto: eventfd read");
                    exit(1);
                }
            }
        }
        __atomic_store_n(&in[0]->sleeping, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&in[1]->sleeping, 0, __ATOMIC_RELAXED);
    }
}

/* R: check each packet's sequence, ack every batch it read. */
static void run_receiver(struct ring *in, struct ring *out,
                         const struct config *c, struct shared *sh)
{
    uint8_t pkt[PKT];
    uint64_t got = 0, seq;

    for (;;) {
        int n = 0;

        while (ring_get(in, pkt)) {
            memcpy(&seq, pkt, sizeof(seq));
            if (seq != got) {
                sh->bad_seq = seq;
                sh->want_seq = got;
                __atomic_store_n(&sh->error, 1, __ATOMIC_RELEASE);
                for (;;) {
                    pause();
                }
            }
            work(c->work_ns);
            got++;
            n++;
        }
        if (n) {
            memset(pkt, 0, sizeof(pkt));
            memcpy(pkt, &got, sizeof(got));
            ring_put_wait(out, pkt);
            ring_kick(out, c->yield);
        }
    }
}

struct result {
    double mbs, acks_per_s, pkts_per_ack;
};

static int run_once(int direct, const struct config *c, struct result *res)
{
    struct ring *rg;
    struct shared *sh;
    struct ring *s_out, *s_in, *r_in, *r_out;
    uint8_t pkt[PKT] = { 0 };
    uint64_t sent = 0, acked = 0, acks = 0, t0, t1, ack;
    pid_t pw = -1, pr;
    int i, status = 0;

    rg = mmap(NULL, 4 * sizeof(*rg), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (rg == MAP_FAILED || sh == MAP_FAILED) {
        perror("window-proto: mmap");
        exit(1);
    }
    for (i = 0; i < 4; i++) {
        rg[i].efd = eventfd(0, EFD_NONBLOCK);
        if (rg[i].efd < 0) {
            perror("window-proto: eventfd");
            exit(1);
        }
    }
    /* rings: 0 S->W (direct: S->R), 1 W->R, 2 R->W (direct: R->S), 3 W->S */
    s_out = &rg[0];
    r_in = direct ? &rg[0] : &rg[1];
    r_out = &rg[2];
    s_in = direct ? &rg[2] : &rg[3];
    if (!direct) {
        pw = fork();
        if (pw == 0) {
            run_switch(rg);
        }
    }
    pr = fork();
    if (pr == 0) {
        run_receiver(r_in, r_out, c, sh);
    }
    if (pr < 0 || (!direct && pw < 0)) {
        perror("window-proto: fork");
        exit(1);
    }

    t0 = now_ns();
    t1 = t0 + (uint64_t)(c->seconds * 1e9);
    while (now_ns() < t1 && !__atomic_load_n(&sh->error, __ATOMIC_ACQUIRE)) {
        int n = 0;

        while (sent - acked < c->window) {
            memcpy(pkt, &sent, sizeof(sent));
            if (!ring_put(s_out, pkt)) {
                break;
            }
            work(c->work_ns);
            sent++;
            n++;
        }
        if (n) {
            ring_kick(s_out, c->yield);
        }
        while (ring_get(s_in, pkt)) {
            memcpy(&ack, pkt, sizeof(ack));
            if (ack < acked || ack > sent) {
                fprintf(stderr, "window-proto: ack %llu outside %llu..%llu\n",
                        (unsigned long long)ack, (unsigned long long)acked,
                        (unsigned long long)sent);
                status = 1;
                goto out;
            }
            acked = ack;
            acks++;
        }
    }
    if (__atomic_load_n(&sh->error, __ATOMIC_ACQUIRE)) {
        fprintf(stderr, "window-proto: packet %llu came where %llu was due\n",
                (unsigned long long)sh->bad_seq,
                (unsigned long long)sh->want_seq);
        status = 1;
    }
    res->mbs = acked * (double)PKT / ((now_ns() - t0) / 1e9) / 1e6;
    res->acks_per_s = acks / ((now_ns() - t0) / 1e9);
    res->pkts_per_ack = acks ? (double)acked / acks : 0;
out:
    kill(pr, SIGKILL);
    if (pw > 0) {
        kill(pw, SIGKILL);
    }
    while (wait(NULL) > 0) {
    }
    for (i = 0; i < 4; i++) {
        close(rg[i].efd);
    }
    munmap(rg, 4 * sizeof(*rg));
    munmap(sh, sizeof(*sh));
    return status;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static void usage(FILE *f)
{
    fprintf(f,
"Usage: window-proto [OPTIONS]\n"
"\n"
"A window-limited stream of 64-byte packets from a spinning sender to a\n"
"spinning receiver, cumulative acks back, through a switch process that\n"
"sleeps when idle (\"switch\") and without one (\"direct\"), over shared-\n"
"memory rings with eventfd kicks for sleepers only.  Runs the two\n"
"interleaved, ROUNDS times each, and prints the medians.\n"
"\n"
"  -w, --window N     packets in flight (default 112: the DMA lines of\n"
"                     an NIU with lines=128, as niu-bench)\n"
"  -W, --work NS      CPU time per packet at each end (default 300)\n"
"  -r, --rounds N     runs of each mode (default 3, at most %d)\n"
"  -s, --seconds S    seconds per run (default 2)\n"
"      --no-yield     a party that kicks a sleeper does not yield\n"
"  -h, --help         this text\n"
"\n"
"Exit status 1 if a packet came out of sequence or an ack went backwards.\n",
            MAX_ROUNDS);
}

static int parse_uint(const char *opt, const char *s, unsigned long long min,
                      unsigned long long max, unsigned long long *out)
{
    char *end;

    errno = 0;
    *out = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || *out < min || *out > max) {
        fprintf(stderr, "window-proto: %s wants a whole number from %llu to "
                "%llu, not '%s'\n", opt, min, max, s);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "window", required_argument, NULL, 'w' },
        { "work", required_argument, NULL, 'W' },
        { "rounds", required_argument, NULL, 'r' },
        { "seconds", required_argument, NULL, 's' },
        { "no-yield", no_argument, NULL, 'Y' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct config c = { .window = 112, .rounds = 3, .seconds = 2,
                        .work_ns = 300, .yield = 1 };
    double mbs[2][MAX_ROUNDS], ppa[2][MAX_ROUNDS];
    unsigned long long v;
    unsigned r;
    int opt, m;
    char *end;

    while ((opt = getopt_long(argc, argv, "w:W:r:s:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'w':
            if (!parse_uint("--window", optarg, 1, SLOTS, &v)) {
                return 2;
            }
            c.window = v;
            break;
        case 'W':
            if (!parse_uint("--work", optarg, 0, 1000000, &v)) {
                return 2;
            }
            c.work_ns = v;
            break;
        case 'r':
            if (!parse_uint("--rounds", optarg, 1, MAX_ROUNDS, &v)) {
                return 2;
            }
            c.rounds = v;
            break;
        case 's':
            c.seconds = strtod(optarg, &end);
            if (*end || end == optarg || !(c.seconds > 0 && c.seconds <= 60)) {
                fprintf(stderr, "window-proto: --seconds wants a number "
                        "above 0 and at most 60, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'Y':
            c.yield = 0;
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
        fprintf(stderr, "window-proto: unexpected argument '%s'\n",
                argv[optind]);
        usage(stderr);
        return 2;
    }
    printf("window %u packets, %llu ns of work per packet at each end, "
           "kick%s yields, %u x %.1f s per mode\n", c.window,
           (unsigned long long)c.work_ns, c.yield ? "" : " never",
           c.rounds, c.seconds);
    for (r = 0; r < c.rounds; r++) {
        for (m = 0; m < 2; m++) {
            struct result res = { 0 };

            if (run_once(m, &c, &res)) {
                return 1;
            }
            mbs[m][r] = res.mbs;
            ppa[m][r] = res.pkts_per_ack;
            printf("  round %u %-6s %8.1f MB/s %8.0f acks/s %6.1f packets "
                   "per ack\n", r + 1, m ? "direct" : "switch", res.mbs,
                   res.acks_per_s, res.pkts_per_ack);
            fflush(stdout);
        }
    }
    for (m = 0; m < 2; m++) {
        qsort(mbs[m], c.rounds, sizeof(double), cmp_double);
        qsort(ppa[m], c.rounds, sizeof(double), cmp_double);
        printf("%-6s median %8.1f MB/s (%.1f-%.1f), %.1f packets per ack\n",
               m ? "direct" : "switch", mbs[m][c.rounds / 2], mbs[m][0],
               mbs[m][c.rounds - 1], ppa[m][c.rounds / 2]);
    }
    return 0;
}
