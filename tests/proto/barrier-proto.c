/* SPDX-License-Identifier: MIT */
/*
 * barrier-proto.c - conservative time-sync barrier prototypes for a QEMU cluster
 * emulator: N node processes (fork) + 1 coordinator ("switch") process.
 *
 * Modes:
 *   a  UNIX stream socketpair per node, coordinator epoll()s, 16-byte
 *      report / 16-byte grant messages, node blocks in read().
 *   b  per-node shared-memory mailbox; node bumps its own "reported" word and
 *      FUTEX_WAKEs it; coordinator sleeps in futex_waitv() over all N words;
 *      coordinator writes each node's grant word + N separate FUTEX_WAKEs.
 *   c  shared arrival counter: only the LAST node to arrive wakes the
 *      coordinator (one word); grant is ONE shared generation word, all nodes
 *      FUTEX_WAIT on it, coordinator wakes them with one FUTEX_WAKE(INT_MAX).
 *      Wakes are unconditional (always issued).
 *   d  (c) + bounded spin (default 3 us) before FUTEX_WAIT on both sides,
 *      + "sleeper" counters so the waker only issues FUTEX_WAKE when someone
 *      actually went to sleep (otherwise spinning cannot save a syscall).
 *   e  (d) with spin = 0, i.e. (c) + skip-wake-if-nobody-sleeps.  Separates
 *      the effect of spinning from the effect of the skip-wake trick.
 *
 * usage: barrier-proto MODE N WORK_US SECONDS [SPIN_NS]
 * prints one CSV line:
 * mode,N,work_us,spin_ns,secs,barriers,barriers_per_s,us_per_barrier,
 *   cpu_us_per_barrier,coord_cpu_us_per_barrier,node_cpu_us_per_barrier,
 *   csw_per_barrier,vcsw_per_barrier,ivcsw_per_barrier
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef FUTEX2_SIZE_U32
#define FUTEX2_SIZE_U32 0x02
#endif

#define MAXN 64
#define CL 64

struct slot {                       /* one per node, own cache line(s) */
    _Atomic uint64_t reached;       /* "I reached time R" */
    _Atomic uint32_t reported;      /* (b) quantum number last reported */
    _Atomic uint32_t grant;         /* (b) quantum number last granted */
    /* per-node rusage delta over the measured run */
    uint64_t utime_us, stime_us, nvcsw, nivcsw;
    char pad[CL * 2 - 48];
} __attribute__((aligned(CL)));

struct shared {
    _Atomic uint32_t arrive __attribute__((aligned(CL))); /* (c,d) arrivals */
    _Atomic uint32_t coord_word __attribute__((aligned(CL))); /* last-arriver -> coord */
    _Atomic uint32_t coord_sleeping;                          /* (d) */
    _Atomic uint32_t gen __attribute__((aligned(CL)));        /* (c,d) grant generation */
    _Atomic uint32_t gen_waiters;                             /* (d) */
    _Atomic uint64_t grant_time;
    _Atomic uint32_t stop __attribute__((aligned(CL)));
    struct slot s[MAXN];
};

static char mode;
static int N;
static uint64_t work_iters, coord_iters;
static long spin_ns = 3000;
static struct shared *sh;

/* ---------- helpers ---------- */
static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint64_t sink;
static void __attribute__((noinline)) burn(uint64_t iters)
{
    uint64_t x = sink;
    for (uint64_t i = 0; i < iters; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x));
    }
    sink = x;
}

/* iterations per microsecond: minimum time over several trials so that a
 * preemption during calibration does not distort it. */
static double calibrate(void)
{
    const uint64_t it = 200000;
    uint64_t best = UINT64_MAX;
    for (int k = 0; k < 30; k++) {
        uint64_t t0 = now_ns();
        burn(it);
        uint64_t d = now_ns() - t0;
        if (d < best) best = d;
    }
    return (double)it * 1000.0 / (double)best;
}

static inline long futex_wait(_Atomic uint32_t *a, uint32_t val)
{
    return syscall(SYS_futex, a, FUTEX_WAIT, val, NULL, NULL, 0);
}
static inline long futex_wake(_Atomic uint32_t *a, int n)
{
    return syscall(SYS_futex, a, FUTEX_WAKE, n, NULL, NULL, 0);
}

struct fwaitv { uint64_t val, uaddr; uint32_t flags, reserved; };

static inline void cpu_relax(void) { __builtin_ia32_pause(); }

/* spin until *a != old, at most spin_ns; returns 1 if it changed */
static inline int spin_until_ne(_Atomic uint32_t *a, uint32_t old)
{
    if (spin_ns <= 0) return atomic_load(a) != old;
    uint64_t dl = now_ns() + spin_ns;
    for (;;) {
        for (int k = 0; k < 32; k++) {
            if (atomic_load_explicit(a, memory_order_acquire) != old) return 1;
            cpu_relax();
        }
        if (now_ns() >= dl) return atomic_load(a) != old;
    }
}

static void rusage_delta(struct rusage *r0, struct rusage *r1, uint64_t *ut,
                         uint64_t *st, uint64_t *nv, uint64_t *niv)
{
    *ut = (r1->ru_utime.tv_sec - r0->ru_utime.tv_sec) * 1000000ull +
          (r1->ru_utime.tv_usec - r0->ru_utime.tv_usec);
    *st = (r1->ru_stime.tv_sec - r0->ru_stime.tv_sec) * 1000000ull +
          (r1->ru_stime.tv_usec - r0->ru_stime.tv_usec);
    *nv = r1->ru_nvcsw - r0->ru_nvcsw;
    *niv = r1->ru_nivcsw - r0->ru_nivcsw;
}

static int full_read(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r; n -= r;
    }
    return 0;
}
static int full_write(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r; n -= r;
    }
    return 0;
}

struct msg { uint64_t time; uint32_t q; uint32_t stop; }; /* 16 bytes */

/* ---------- node side ---------- */
static void node_main(int id, int fd)
{
    struct slot *me = &sh->s[id];
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    uint64_t vtime = 0;
    for (uint32_t q = 1;; q++) {
        burn(work_iters);            /* simulated guest execution */
        vtime += 1000;               /* "I reached time R" */
        int stop = 0;
        switch (mode) {
        case 'a': {
            struct msg m = { vtime, q, 0 }, g;
            if (full_write(fd, &m, sizeof m)) _exit(2);
            if (full_read(fd, &g, sizeof g)) _exit(3);
            stop = g.stop;
            break;
        }
        case 'b': {
            atomic_store(&me->reached, vtime);
            atomic_store(&me->reported, q);
            futex_wake(&me->reported, 1);
            uint32_t g;
            while ((g = atomic_load(&me->grant)) != q)
                futex_wait(&me->grant, g);
            stop = atomic_load(&sh->stop);
            break;
        }
        case 'c': {
            atomic_store(&me->reached, vtime);
            if (atomic_fetch_add(&sh->arrive, 1) + 1 == (uint32_t)N) {
                atomic_store(&sh->coord_word, q);
                futex_wake(&sh->coord_word, 1);
            }
            while (atomic_load(&sh->gen) != q)
                futex_wait(&sh->gen, q - 1);
            stop = atomic_load(&sh->stop);
            break;
        }
        case 'd': case 'e': {
            atomic_store(&me->reached, vtime);
            if (atomic_fetch_add(&sh->arrive, 1) + 1 == (uint32_t)N) {
                atomic_store(&sh->coord_word, q);          /* seq_cst */
                if (atomic_load(&sh->coord_sleeping))      /* Dekker */
                    futex_wake(&sh->coord_word, 1);
            }
            if (!spin_until_ne(&sh->gen, q - 1)) {
                while (atomic_load(&sh->gen) != q) {
                    atomic_fetch_add(&sh->gen_waiters, 1);
                    futex_wait(&sh->gen, q - 1);
                    atomic_fetch_sub(&sh->gen_waiters, 1);
                }
            }
            stop = atomic_load(&sh->stop);
            break;
        }
        }
        if (stop) break;
    }
    getrusage(RUSAGE_SELF, &r1);
    rusage_delta(&r0, &r1, &me->utime_us, &me->stime_us, &me->nvcsw, &me->nivcsw);
    _exit(0);
}

/* ---------- coordinator side ---------- */
int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODE(a|b|c|d|e) N WORK_US SECONDS [SPIN_NS]\n", argv[0]);
        return 1;
    }
    mode = argv[1][0];
    N = atoi(argv[2]);
    double work_us = atof(argv[3]);
    double secs = atof(argv[4]);
    if (argc > 5) spin_ns = atol(argv[5]);
    if (mode == 'e') spin_ns = 0;
    if (mode != 'd' && mode != 'e') spin_ns = 0;
    if (N < 1 || N > MAXN) return 1;

    double ipus = calibrate();
    work_iters = (uint64_t)(ipus * work_us);
    coord_iters = (uint64_t)(ipus * 1.0);   /* ~1 us of coordinator work */

    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) { perror("mmap"); return 1; }
    memset(sh, 0, sizeof *sh);

    int fds[MAXN][2];
    if (mode == 'a')
        for (int i = 0; i < N; i++)
            if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds[i])) { perror("socketpair"); return 1; }

    struct rusage r0, r1;
    pid_t pids[MAXN];
    uint64_t t0 = now_ns();
    getrusage(RUSAGE_SELF, &r0);
    for (int i = 0; i < N; i++) {
        pid_t p = fork();
        if (p == 0) {
            if (mode == 'a') {
                for (int j = 0; j <= i; j++) close(fds[j][0]);
                node_main(i, fds[i][1]);
            }
            node_main(i, -1);
        }
        pids[i] = p;
        if (mode == 'a') close(fds[i][1]);
    }

    int ep = -1;
    struct epoll_event evs[MAXN];
    if (mode == 'a') {
        ep = epoll_create1(0);
        for (int i = 0; i < N; i++) {
            struct epoll_event e = { .events = EPOLLIN, .data.u32 = i };
            epoll_ctl(ep, EPOLL_CTL_ADD, fds[i][0], &e);
        }
    }

    uint64_t deadline = t0 + (uint64_t)(secs * 1e9);
    uint64_t barriers = 0;
    uint64_t mintime = 0;
    for (uint32_t q = 1;; q++) {
        /* ---- wait until all N nodes reported quantum q ---- */
        switch (mode) {
        case 'a': {
            int got = 0;
            while (got < N) {
                int n = epoll_wait(ep, evs, MAXN, -1);
                if (n < 0) { if (errno == EINTR) continue; perror("epoll_wait"); return 1; }
                for (int k = 0; k < n; k++) {
                    struct msg m;
                    int i = evs[k].data.u32;
                    if (full_read(fds[i][0], &m, sizeof m)) { fprintf(stderr, "read fail\n"); return 1; }
                    atomic_store(&sh->s[i].reached, m.time);
                    got++;
                }
            }
            break;
        }
        case 'b': {
            struct fwaitv w[MAXN];
            for (;;) {
                int n = 0;
                for (int i = 0; i < N; i++) {
                    uint32_t v = atomic_load(&sh->s[i].reported);
                    if (v != q) {
                        w[n].val = v; w[n].uaddr = (uintptr_t)&sh->s[i].reported;
                        w[n].flags = FUTEX2_SIZE_U32; w[n].reserved = 0; n++;
                    }
                }
                if (!n) break;
                long r = syscall(SYS_futex_waitv, w, n, 0, NULL, 0);
                if (r < 0 && errno != EAGAIN && errno != EINTR) { perror("futex_waitv"); return 1; }
            }
            break;
        }
        case 'c':
            while (atomic_load(&sh->coord_word) != q)
                futex_wait(&sh->coord_word, q - 1);
            atomic_store(&sh->arrive, 0);
            break;
        case 'd': case 'e':
            if (!spin_until_ne(&sh->coord_word, q - 1)) {
                while (atomic_load(&sh->coord_word) != q) {
                    atomic_store(&sh->coord_sleeping, 1);
                    if (atomic_load(&sh->coord_word) != q - 1) { atomic_store(&sh->coord_sleeping, 0); break; }
                    futex_wait(&sh->coord_word, q - 1);
                    atomic_store(&sh->coord_sleeping, 0);
                }
            }
            atomic_store(&sh->arrive, 0);
            break;
        }

        /* ---- coordinator work: ~1 us + compute safe horizon ---- */
        burn(coord_iters);
        uint64_t m = UINT64_MAX;
        for (int i = 0; i < N; i++) {
            uint64_t t = atomic_load(&sh->s[i].reached);
            if (t < m) m = t;
        }
        mintime = m;
        barriers++;
        int stop = now_ns() >= deadline;
        if (stop) atomic_store(&sh->stop, 1);

        /* ---- grant ---- */
        switch (mode) {
        case 'a': {
            struct msg g = { m + 1000, q, (uint32_t)stop };
            for (int i = 0; i < N; i++)
                if (full_write(fds[i][0], &g, sizeof g)) { fprintf(stderr, "write fail\n"); return 1; }
            break;
        }
        case 'b':
            atomic_store(&sh->grant_time, m + 1000);
            for (int i = 0; i < N; i++) {
                atomic_store(&sh->s[i].grant, q);
                futex_wake(&sh->s[i].grant, 1);
            }
            break;
        case 'c':
            atomic_store(&sh->grant_time, m + 1000);
            atomic_store(&sh->gen, q);
            futex_wake(&sh->gen, INT_MAX);
            break;
        case 'd': case 'e':
            atomic_store(&sh->grant_time, m + 1000);
            atomic_store(&sh->gen, q);                 /* seq_cst */
            if (atomic_load(&sh->gen_waiters))         /* Dekker */
                futex_wake(&sh->gen, INT_MAX);
            break;
        }
        if (stop) break;
    }
    uint64_t t1 = now_ns();
    getrusage(RUSAGE_SELF, &r1);
    for (int i = 0; i < N; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) { fprintf(stderr, "child %d failed\n", i); return 1; }
    }

    uint64_t cut, cst, cnv, cniv;
    rusage_delta(&r0, &r1, &cut, &cst, &cnv, &cniv);
    uint64_t nut = 0, nst = 0, nnv = 0, nniv = 0;
    for (int i = 0; i < N; i++) {
        nut += sh->s[i].utime_us; nst += sh->s[i].stime_us;
        nnv += sh->s[i].nvcsw; nniv += sh->s[i].nivcsw;
    }
    double wall = (t1 - t0) / 1e9, B = (double)barriers;
    (void)mintime;
    printf("%c,%d,%g,%ld,%.3f,%llu,%.1f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n",
           mode, N, work_us, spin_ns, wall, (unsigned long long)barriers, B / wall,
           wall * 1e6 / B,
           (cut + cst + nut + nst) / B, (cut + cst) / B, (nut + nst) / B,
           (cnv + cniv + nnv + nniv) / B, (cnv + nnv) / B, (cniv + nniv) / B);
    fflush(stdout);
    return 0;
}
