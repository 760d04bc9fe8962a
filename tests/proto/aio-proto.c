/* SPDX-License-Identifier: MIT */
/*
 * aio-proto: how the NIU's link thread should sleep between packets.
 *
 * The device's link thread (hw/net/arctic-niu/niu-link-thread.c) is a
 * thread of its own that sleeps in futex_waitv() on a counter in the
 * memory it shares with the switch; QEMU's way would be an IOThread: an
 * AioContext whose aio_poll() waits on an eventfd, after busy-polling a
 * handler's io_poll() for up to poll-max-ns (adaptive polling, 32 us by
 * default for an IOThread).  This program measures the two wake-ups side
 * by side, under the same load, on the host.
 *
 * A "switch" process and an "NIU" thread play ping-pong through a shared
 * page: the switch bumps a counter and kicks, the NIU wakes, answers by
 * bumping the switch's counter and kicking it; the switch sleeps on a
 * futex in every mode, so only the NIU's side changes:
 *
 *   futex     futex_waitv()-style sleep on the shared counter (FUTEX_WAIT
 *             on a shared word; the switch's kick is FUTEX_WAKE)
 *   aio-N     an AioContext in the NIU thread, aio_poll(ctx, true) on an
 *             EventNotifier the switch writes, with an io_poll() that
 *             reads the counter, poll-max-ns N (0: no polling)
 *
 * Load: L threads spinning in their own process, as busy vCPUs do.  For
 * each mode the round trip (median, mean, p99, us) over R round trips,
 * and the CPU time the NIU thread used per round trip.
 *
 * Built against QEMU's own util and QOM objects (tests/proto/meson.build
 * with -Dqemu_build=...; or see README.md).
 */
#include "qemu/osdep.h"
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "block/aio.h"
#include "qapi/error.h"
#include "qemu/event_notifier.h"
#include "qemu/main-loop.h"

typedef struct Shared {
    uint32_t to_niu;            /* bumped by the switch */
    uint32_t to_switch;         /* bumped by the NIU */
    uint32_t niu_sleeps;        /* futex mode: the NIU waits in the kernel */
    uint32_t stop;
} Shared;

static Shared *sh;
static EventNotifier kick;      /* aio modes: the switch writes it */
static uint32_t seen;           /* the NIU thread's last to_niu */

static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

static void wake(uint32_t *word)
{
    futex(word, FUTEX_WAKE, INT_MAX, NULL);
}

/* Sleep until *@word is no longer @old (shared, not private: two processes). */
static void wait_change(uint32_t *word, uint32_t old)
{
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == old) {
        futex(word, FUTEX_WAIT, old, NULL);
    }
}

static void niu_answer(void)
{
    __atomic_add_fetch(&sh->to_switch, 1, __ATOMIC_RELEASE);
    wake(&sh->to_switch);
}

/* --- the NIU in futex mode ---------------------------------------------- */

static void niu_futex(void)
{
    while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
        wait_change(&sh->to_niu, seen);
        seen = __atomic_load_n(&sh->to_niu, __ATOMIC_ACQUIRE);
        niu_answer();
    }
}

/* --- the NIU in an AioContext ------------------------------------------- */

static bool take_input(void)
{
    uint32_t now = __atomic_load_n(&sh->to_niu, __ATOMIC_ACQUIRE);

    if (now == seen) {
        return false;
    }
    seen = now;
    niu_answer();
    return true;
}

static void kick_read(EventNotifier *e)
{
    event_notifier_test_and_clear(e);
    take_input();
}

static bool kick_poll(void *opaque)
{
    return __atomic_load_n(&sh->to_niu, __ATOMIC_ACQUIRE) != seen;
}

static void kick_poll_ready(EventNotifier *e)
{
    take_input();
}

static void niu_aio(int64_t poll_max_ns)
{
    AioContext *ctx = aio_context_new(&error_abort);

    qemu_set_current_aio_context(ctx);
    aio_context_set_poll_params(ctx, poll_max_ns, 0, 0, &error_abort);
    aio_set_event_notifier(ctx, &kick, kick_read,
                           poll_max_ns ? kick_poll : NULL,
                           poll_max_ns ? kick_poll_ready : NULL);
    while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
        aio_poll(ctx, true);
    }
    aio_set_event_notifier(ctx, &kick, NULL, NULL, NULL);
    aio_context_unref(ctx);
}

/*
 * The NIU runs in a thread of its own, as the link thread or an IOThread
 * does; it returns the CPU time it used (ns).
 */
typedef struct NiuRun {
    const char *mode;
    int64_t cpu_ns;
} NiuRun;

static void *niu_thread(void *opaque)
{
    NiuRun *run = opaque;
    struct timespec ts;

    if (!strncmp(run->mode, "aio-", 4)) {
        niu_aio(strtoll(run->mode + 4, NULL, 0));
    } else {
        niu_futex();
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    run->cpu_ns = ts.tv_sec * 1000000000LL + ts.tv_nsec;
    return NULL;
}

/* --- the switch ----------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The switch process: @rounds round trips; their times go to @out. */
static void switch_run(bool eventfd_kick, unsigned rounds, int64_t *out)
{
    unsigned i;

    for (i = 0; i < rounds; i++) {
        uint32_t back = __atomic_load_n(&sh->to_switch, __ATOMIC_ACQUIRE);
        int64_t t0 = now_ns();

        __atomic_add_fetch(&sh->to_niu, 1, __ATOMIC_RELEASE);
        if (eventfd_kick) {
            event_notifier_set(&kick);
        } else {
            wake(&sh->to_niu);
        }
        wait_change(&sh->to_switch, back);
        out[i] = now_ns() - t0;
    }
}

static pid_t start_load(unsigned threads)
{
    pid_t pid = threads ? fork() : 0;

    if (pid == 0 && threads) {
        volatile unsigned long spin = 0;
        unsigned i;

        setpgid(0, 0);
        for (i = 1; i < threads; i++) {
            if (fork() == 0) {
                break;
            }
        }
        for (;;) {
            spin++;
        }
    }
    return pid;
}

static void usage(FILE *f)
{
    fprintf(f,
"usage: aio-proto [-r ROUNDS] [-l LOAD] [-m MODE]...\n"
"  -r ROUNDS  round trips per mode (default 20000, after 2000 warm-up)\n"
"  -l LOAD    spinning load processes beside it (default 0)\n"
"  -m MODE    futex, or aio-N for an AioContext with poll-max-ns N;\n"
"             repeatable (default: futex aio-0 aio-32768 aio-200000)\n"
"Prints one row per mode: round trip median, mean, p99 (us) and the NIU\n"
"thread's CPU time per round trip (us).\n");
}

int main(int argc, char **argv)
{
    const char *modes[16];
    unsigned nmodes = 0, rounds = 20000, load = 0, m;
    int opt;

    while ((opt = getopt(argc, argv, "r:l:m:h")) != -1) {
        switch (opt) {
        case 'r': rounds = strtoul(optarg, NULL, 0); break;
        case 'l': load = strtoul(optarg, NULL, 0); break;
        case 'm':
            if (nmodes < ARRAY_SIZE(modes)) {
                modes[nmodes++] = optarg;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!nmodes) {
        modes[nmodes++] = "futex";
        modes[nmodes++] = "aio-0";
        modes[nmodes++] = "aio-32768";
        modes[nmodes++] = "aio-200000";
    }
    for (m = 0; m < nmodes; m++) {
        if (strcmp(modes[m], "futex") && strncmp(modes[m], "aio-", 4)) {
            fprintf(stderr, "aio-proto: unknown mode '%s'\n", modes[m]);
            return 2;
        }
    }
    qemu_init_main_loop(&error_abort);
    printf("%-12s %4s %10s %10s %10s %12s\n", "mode", "load", "median_us",
           "mean_us", "p99_us", "niu_cpu_us");
    for (m = 0; m < nmodes; m++) {
        bool aio = !strncmp(modes[m], "aio-", 4);
        unsigned warm = 2000, total = warm + rounds, i;
        int64_t *t = mmap(NULL, total * sizeof(int64_t), PROT_READ |
                          PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        NiuRun run = { .mode = modes[m] };
        QemuThread niu;
        double sum = 0, cpu_us;
        pid_t sw, loader;
        int status;

        sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        memset(sh, 0, sizeof(*sh));
        seen = 0;
        event_notifier_init(&kick, false);
        loader = start_load(load);
        sw = fork();
        if (sw == 0) {
            switch_run(aio, total, t);
            __atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
            /* One more kick, so the NIU sees the stop. */
            __atomic_add_fetch(&sh->to_niu, 1, __ATOMIC_RELEASE);
            if (aio) {
                event_notifier_set(&kick);
            } else {
                wake(&sh->to_niu);
            }
            _exit(0);
        }
        qemu_thread_create(&niu, "niu", niu_thread, &run,
                           QEMU_THREAD_JOINABLE);
        qemu_thread_join(&niu);
        waitpid(sw, &status, 0);
        if (loader > 0) {
            kill(-loader, SIGKILL);
            waitpid(loader, NULL, 0);
        }
        qsort(t + warm, rounds, sizeof(*t), cmp_i64);
        for (i = warm; i < total; i++) {
            sum += t[i];
        }
        cpu_us = run.cpu_ns / 1e3;
        printf("%-12s %4u %10.2f %10.2f %10.2f %12.2f\n", modes[m], load,
               t[warm + rounds / 2] / 1e3, sum / rounds / 1e3,
               t[warm + rounds * 99 / 100] / 1e3, cpu_us / total);
        fflush(stdout);
        event_notifier_cleanup(&kick);
        munmap(t, total * sizeof(int64_t));
        munmap(sh, sizeof(*sh));
    }
    return 0;
}
