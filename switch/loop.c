/* SPDX-License-Identifier: MIT */
/*
 * The switch's event loop: one epoll set, one timer, and calls from other
 * threads (arctic_switch_invoke()).  It knows nothing of NIUs or routers:
 * each watched descriptor names the function its events go to, the timer
 * and the end of each batch of events go to the hooks its owner set
 * (core.c), and every batch is stamped with one clock reading (sw->now_ns)
 * that everything run in it uses.  Before it sleeps it asks its owner
 * whether it may: work can wait where no descriptor announces it (bytes
 * in a shared ring whose producer kicks only a consumer that said it
 * sleeps), and then the loop looks at its descriptors without sleeping.
 *
 * Beside it, one wake-up thread per CPU, bound to it, sleeps on the kick
 * counters that NIUs running on that CPU raise in their rings' areas
 * (link 1.3, arctic/link-ring.h): woken there, it serves every ring as the
 * loop does after a batch.  The loop thread holds the model lock except
 * while it sleeps; a wake-up thread holds it while it serves.
 *
 * Atomics: GCC's __atomic builtins with the order each access needs
 * written out, as arctic/link-ring.h uses them for the words shared with
 * the NIUs; the flags the threads share among themselves (a kick
 * pending, a CPU's thread left the lock, the loop about to sleep) are
 * sequentially consistent, since each pairs a store with a load of
 * another flag (a store-buffering pattern that weaker orders break).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <gio/gio.h>

#include "switch-internal.h"

struct invoke_request {
    void (*fn)(ArcticSwitch *sw, void *opaque);
    void *opaque;
    bool done;
};

uint64_t sw_clock_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* With --verbose: a line on stderr. */
void sw_log(ArcticSwitch *sw, const char *fmt, ...)
{
    va_list ap;

    if (!sw->config.verbose) {
        return;
    }
    va_start(ap, fmt);
    fputs("arctic-switch: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void loop_ctl(ArcticSwitch *sw, int op, int fd, struct sw_watch *watch,
                     uint32_t events)
{
    struct epoll_event ev = { .events = events, .data.ptr = watch };

    if (sw->loop.epoll_fd >= 0 &&
        epoll_ctl(sw->loop.epoll_fd, op, fd, &ev) < 0) {
        g_error("epoll_ctl(%d): %s", fd, g_strerror(errno));
    }
}

void sw_loop_watch(ArcticSwitch *sw, int fd, struct sw_watch *watch,
                   uint32_t events)
{
    loop_ctl(sw, EPOLL_CTL_ADD, fd, watch, events);
}

void sw_loop_rewatch(ArcticSwitch *sw, int fd, struct sw_watch *watch,
                     uint32_t events)
{
    loop_ctl(sw, EPOLL_CTL_MOD, fd, watch, events);
}

void sw_loop_unwatch(ArcticSwitch *sw, int fd)
{
    if (sw->loop.epoll_fd >= 0) {
        epoll_ctl(sw->loop.epoll_fd, EPOLL_CTL_DEL, fd, NULL);
    }
}

/* The timer fires at the earliest deadline any caller asked for. */
void sw_arm_timer(ArcticSwitch *sw, uint64_t deadline_ns)
{
    struct itimerspec its = { 0 };

    if (sw->loop.timer_fd < 0 ||
        (sw->loop.timer_armed_ns && sw->loop.timer_armed_ns <= deadline_ns)) {
        return;
    }
    sw->loop.timer_armed_ns = deadline_ns;
    its.it_value.tv_sec = deadline_ns / 1000000000ull;
    its.it_value.tv_nsec = deadline_ns % 1000000000ull;
    timerfd_settime(sw->loop.timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void run_invokes(ArcticSwitch *sw)
{
    struct sw_loop *loop = &sw->loop;
    struct invoke_request *req;

    g_mutex_lock(&loop->invoke_lock);
    while ((req = g_queue_pop_head(&loop->invoke_queue))) {
        g_mutex_unlock(&loop->invoke_lock);
        req->fn(sw, req->opaque);
        g_mutex_lock(&loop->invoke_lock);
        req->done = true;
        g_cond_broadcast(&loop->invoke_done);
    }
    g_mutex_unlock(&loop->invoke_lock);
}

static void wakeup_ready(ArcticSwitch *sw, void *object, uint32_t events)
{
    uint64_t value;

    if (read(sw->loop.wakeup_fd, &value, sizeof(value)) < 0) {
        /* EAGAIN: another event already consumed it. */
    }
    run_invokes(sw);
}

static void timer_ready(ArcticSwitch *sw, void *object, uint32_t events)
{
    uint64_t value;

    if (read(sw->loop.timer_fd, &value, sizeof(value)) < 0) {
        /* Spurious: the owner's deadline checks are harmless. */
    }
    sw->loop.timer_armed_ns = 0;
    sw->loop.on_timer(sw);
}

/* --- per-CPU wake-ups (arctic/link-ring.h, link 1.3) ---------------- */

struct cpu_waker {
    ArcticSwitch *sw;
    unsigned cpu;
};

static long futex_waitv(struct futex_waitv *waiters, unsigned n)
{
    return syscall(SYS_futex_waitv, waiters, n, 0, NULL, CLOCK_MONOTONIC);
}

static void futex_wake(uint32_t *word, bool private)
{
    syscall(SYS_futex, word, FUTEX_WAKE | (private ? FUTEX_PRIVATE_FLAG : 0),
            INT_MAX, NULL, NULL, 0);
}

/*
 * One wake-up thread per CPU (as many as the host has, at most
 * ARCTIC_CPU_WAKE_MAX), if the kernel can wait on several futexes at once
 * (futex_waitv, Linux 5.16); none otherwise, when the links kick each
 * ring's own wake-up socket, which the loop watches.
 */
static void cpu_wake_init(ArcticSwitch *sw)
{
    struct sw_loop *loop = &sw->loop;
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    struct futex_waitv probe = {
        .uaddr = (uintptr_t)&loop->cpu[0].control,
        .val = 1,                       /* it holds 0: returns at once */
        .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG,
    };

    if (futex_waitv(&probe, 1) < 0 && errno == ENOSYS) {
        g_warning("no per-CPU wake-ups: this kernel has no futex_waitv");
        return;
    }
    loop->cpu_wakers = CLAMP(cpus, 1, ARCTIC_CPU_WAKE_MAX);
}

unsigned sw_loop_cpu_wakers(const ArcticSwitch *sw)
{
    return sw->loop.cpu_wakers;
}

/*
 * Model lock: CPU @cpu's thread waits from now on for any of the @n words
 * in @words to leave the value it holds now (a link's kick counter for
 * that CPU: arctic/link-ring.h), and is told so (its control word).  The
 * values are taken here, under the lock, by a thread that reads every
 * ring after it: a kick that raised a counter before is served by that
 * read, any later one wakes the thread.
 */
void sw_loop_cpu_wait_on(ArcticSwitch *sw, unsigned cpu, uint32_t *const *words,
                         unsigned n)
{
    struct sw_cpu_waiter *w = &sw->loop.cpu[cpu];
    unsigned i;

    g_assert(n < SW_CPU_WAIT_MAX);
    g_mutex_lock(&w->lock);
    w->vec[0] = (struct futex_waitv) {
        .uaddr = (uintptr_t)&w->control,
        .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG,
    };
    for (i = 0; i < n; i++) {
        w->vec[1 + i] = (struct futex_waitv) {
            .uaddr = (uintptr_t)words[i],
            .val = __atomic_load_n(words[i], __ATOMIC_ACQUIRE),
            .flags = FUTEX_32,
        };
    }
    w->n = 1 + n;
    g_mutex_unlock(&w->lock);
    /*
     * A thread asleep on the old set takes the new one; the thread itself
     * (serving its own kick) takes it before it sleeps again.
     */
    __atomic_fetch_add(&w->control, 1, __ATOMIC_RELEASE);
    if (sw->loop.cpu_thread[cpu] != g_thread_self()) {
        futex_wake(&w->control, true);
    }
}

/*
 * Model lock: the word in @cpu's set whose FUTEX_WAKE last woke its
 * thread, taken (NULL: none since the last look).  The futex says which
 * word woke it, not whether anything changed: the owner, which knows
 * what the word held, sees whether it rose; if not, the wake-up was a
 * FUTEX_WAKE alone, which costs the switch a pass over every ring and
 * was not counted as a kick.  Only compared, never read: the link may
 * be gone.
 */
uint32_t *sw_loop_cpu_woken_by(ArcticSwitch *sw, unsigned cpu)
{
    return (uint32_t *)__atomic_exchange_n(&sw->loop.cpu[cpu].woken_by, 0,
                                           __ATOMIC_ACQ_REL);
}

/* Take a flag that is 1: true if this caller turned it to 0. */
static bool sw_atomic_claim(int *flag)
{
    int one = 1;

    return __atomic_compare_exchange_n(flag, &one, 0, false,
                                       __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/*
 * Kicks and the model lock.  A kicked thread does not sleep on the lock
 * while another thread holds it: a waiter on another CPU would cost the
 * holder an inter-processor interrupt at every hand-over (some 9 400 a
 * second in a DMA stream, docs/datapath.md §3.4).  It says a kick
 * waits (kick_pending), then tries the lock; whoever lets go of the lock
 * looks at kick_pending after that (sw_kick_release()).  So every kick is
 * served, by the thread kicked or by the one that held the lock, and the
 * flag is cleared before the rings are read, so a kick that sets it again
 * meanwhile is seen at the release.
 */
static bool kick_pending_take(struct sw_loop *loop)
{
    if (__atomic_load_n(&loop->kick_pending, __ATOMIC_SEQ_CST) &&
        g_mutex_trylock(&loop->model_lock)) {
        __atomic_store_n(&loop->kick_pending, 0, __ATOMIC_SEQ_CST);
        return true;
    }
    return false;
}

/* A kick came: true with the model lock held to serve it, or false if it
 * was left to the thread holding the lock. */
bool sw_kick_claim(struct sw_loop *loop)
{
    __atomic_store_n(&loop->kick_pending, 1, __ATOMIC_SEQ_CST);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (kick_pending_take(loop)) {
        return true;
    }
    __atomic_fetch_add(&loop->cpu_handovers, 1, __ATOMIC_RELAXED);
    return false;
}

/* Let go of the model lock: true if a kick came meanwhile, and then the
 * lock is held again, to serve it. */
bool sw_kick_release(struct sw_loop *loop)
{
    g_mutex_unlock(&loop->model_lock);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return kick_pending_take(loop);
}

/*
 * Model lock: one kick's worth of service, by the thread of @self_cpu (-1:
 * the loop thread).  Every CPU thread that woke for a kick and left it to
 * the lock's holder (cpu_left), and the caller's own, has its counters
 * taken again first (the owner's on_cpu_wait hook, which calls
 * sw_loop_cpu_wait_on()): otherwise it would wake again at once for the
 * kick served here.
 */
void sw_loop_serve_kick(ArcticSwitch *sw, int self_cpu)
{
    struct sw_loop *loop = &sw->loop;
    unsigned cpu;

    /* Before the counters: a flood found there is muted from now. */
    sw->now_ns = sw_clock_ns();
    for (cpu = 0; cpu < loop->cpu_wakers; cpu++) {
        if ((int)cpu == self_cpu ||
            sw_atomic_claim(&loop->cpu_left[cpu])) {
            loop->on_cpu_wait(sw, cpu);
        }
    }
    loop->on_kick(sw);
}

/*
 * Serve a kick (and any left to this thread meanwhile), or leave it.  A
 * ring that always has bytes (a flood) must not keep the model lock from
 * the loop thread, which serves sockets and the control socket too: once
 * the loop thread waits for the lock (loop_waiting), this thread lets go
 * of it after the pass, and what is left is the loop's, which serves it
 * beside its sockets (its may_sleep() says the rings have bytes).
 */
static void cpu_wake_serve(ArcticSwitch *sw, unsigned cpu)
{
    struct sw_loop *loop = &sw->loop;

    /* Before the claim: a holder that serves the kick retakes our set. */
    __atomic_store_n(&loop->cpu_left[cpu], 1, __ATOMIC_SEQ_CST);
    if (!sw_kick_claim(loop)) {
        return;
    }
    __atomic_store_n(&loop->cpu_left[cpu], 0, __ATOMIC_SEQ_CST);
    do {
        do {
            sw_loop_serve_kick(sw, cpu);
            if (__atomic_load_n(&loop->loop_waiting, __ATOMIC_SEQ_CST)) {
                g_mutex_unlock(&loop->model_lock);
                return;
            }
        } while (!loop->may_sleep(sw));
    } while (sw_kick_release(loop));
}

/*
 * One CPU's wake-up thread: bound to its CPU, so that an NIU running
 * there wakes it without an inter-processor interrupt.  It sleeps on the
 * kick counters of every link for its CPU (futex_waitv), and on its
 * control word, which lock holders change when they give it a new set
 * (sw_loop_cpu_wait_on()); woken by a kick, it serves every ring under
 * the model lock (the owner's on_kick hook) until the switch may sleep
 * again.  The thread never reads the set's words outside the lock but
 * through the kernel, so a link closed meanwhile costs it at most a
 * fault (EFAULT) and a new set.
 */
static gpointer cpu_wake_thread(gpointer opaque)
{
    struct cpu_waker *cw = opaque;
    ArcticSwitch *sw = cw->sw;
    struct sw_loop *loop = &sw->loop;
    struct sw_cpu_waiter *w = &loop->cpu[cw->cpu];
    struct futex_waitv vec[SW_CPU_WAIT_MAX];
    cpu_set_t set;
    unsigned n;
    long woken;
    int err;

    CPU_ZERO(&set);
    CPU_SET(cw->cpu, &set);
    err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    if (err) {
        /* Outside our cpuset: it still serves, only not CPU-locally. */
        sw_log(sw, "wake-up thread of CPU %u not bound: %s", cw->cpu,
               g_strerror(err));
    }
    while (!__atomic_load_n(&loop->cpu_stop, __ATOMIC_SEQ_CST)) {
        uint32_t control = __atomic_load_n(&w->control, __ATOMIC_ACQUIRE);

        g_mutex_lock(&w->lock);
        n = w->n;
        memcpy(vec, w->vec, n * sizeof(vec[0]));
        g_mutex_unlock(&w->lock);
        vec[0].val = control;
        woken = futex_waitv(vec, n);
        if (__atomic_load_n(&loop->cpu_stop, __ATOMIC_SEQ_CST)) {
            break;
        }
        if (woken == 0 || (woken < 0 && errno != EAGAIN)) {
            /* The control word (a new set) or a link gone: take it. */
            continue;
        }
        if (woken < 0 &&
            __atomic_load_n(&w->control, __ATOMIC_ACQUIRE) != control) {
            continue;
        }
        if (woken > 0) {
            /* A link's word: whoever serves sees whether it rose. */
            __atomic_store_n(&w->woken_by, (uintptr_t)vec[woken].uaddr,
                             __ATOMIC_RELEASE);
        }
        __atomic_fetch_add(&loop->cpu_wakeups[cw->cpu], 1, __ATOMIC_RELAXED);
        cpu_wake_serve(sw, cw->cpu);
        if (__atomic_load_n(&loop->cpu_left[cw->cpu], __ATOMIC_SEQ_CST)) {
            /*
             * Left to the lock's holder, which takes our counters again
             * and changes the control word: until then the old set
             * would wake us at once.
             */
            while (__atomic_load_n(&loop->cpu_left[cw->cpu], __ATOMIC_SEQ_CST) &&
                   !__atomic_load_n(&loop->cpu_stop, __ATOMIC_SEQ_CST)) {
                syscall(SYS_futex, &w->control,
                        FUTEX_WAIT | FUTEX_PRIVATE_FLAG, control, NULL,
                        NULL, 0);
                control = __atomic_load_n(&w->control, __ATOMIC_ACQUIRE);
            }
        }
    }
    g_free(cw);
    return NULL;
}

static void cpu_wake_start(ArcticSwitch *sw)
{
    struct sw_loop *loop = &sw->loop;
    unsigned i;

    loop->cpu_stop = 0;
    for (i = 0; i < loop->cpu_wakers; i++) {
        struct cpu_waker *w = g_new(struct cpu_waker, 1);

        w->sw = sw;
        w->cpu = i;
        loop->cpu_thread[i] = g_thread_new("arctic-wake", cpu_wake_thread, w);
    }
}

static void cpu_wake_stop(ArcticSwitch *sw)
{
    struct sw_loop *loop = &sw->loop;
    unsigned i;

    if (!loop->cpu_wakers) {
        return;
    }
    __atomic_store_n(&loop->cpu_stop, 1, __ATOMIC_SEQ_CST);
    for (i = 0; i < loop->cpu_wakers; i++) {
        __atomic_fetch_add(&loop->cpu[i].control, 1, __ATOMIC_RELEASE);
        futex_wake(&loop->cpu[i].control, true);
    }
    for (i = 0; i < loop->cpu_wakers; i++) {
        g_thread_join(loop->cpu_thread[i]);
        loop->cpu_thread[i] = NULL;
    }
}

bool sw_loop_init(ArcticSwitch *sw, void (*on_timer)(ArcticSwitch *sw),
                  void (*after_batch)(ArcticSwitch *sw),
                  bool (*may_sleep)(ArcticSwitch *sw),
                  void (*on_kick)(ArcticSwitch *sw),
                  void (*on_cpu_wait)(ArcticSwitch *sw, unsigned cpu),
                  GError **errp)
{
    struct sw_loop *loop = &sw->loop;
    unsigned i;

    loop->on_timer = on_timer;
    loop->after_batch = after_batch;
    loop->may_sleep = may_sleep;
    loop->on_kick = on_kick;
    loop->on_cpu_wait = on_cpu_wait;
    g_mutex_init(&loop->model_lock);
    for (i = 0; i < ARCTIC_CPU_WAKE_MAX; i++) {
        g_mutex_init(&loop->cpu[i].lock);
        loop->cpu[i].n = 1;         /* the control word alone */
        loop->cpu[i].vec[0] = (struct futex_waitv) {
            .uaddr = (uintptr_t)&loop->cpu[i].control,
            .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG,
        };
    }
    if (sw->config.rings && sw->config.cpu_wake) {
        cpu_wake_init(sw);
    }
    g_mutex_init(&loop->invoke_lock);
    g_cond_init(&loop->invoke_done);
    g_queue_init(&loop->invoke_queue);
    loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    loop->wakeup_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    loop->timer_fd = timerfd_create(CLOCK_MONOTONIC,
                                    TFD_NONBLOCK | TFD_CLOEXEC);
    if (loop->epoll_fd < 0 || loop->wakeup_fd < 0 || loop->timer_fd < 0) {
        g_set_error(errp, G_IO_ERROR, g_io_error_from_errno(errno),
                    "cannot create the event loop: %s", g_strerror(errno));
        return false;
    }
    loop->wakeup_watch = (struct sw_watch) { .ready = wakeup_ready };
    sw_loop_watch(sw, loop->wakeup_fd, &loop->wakeup_watch, EPOLLIN);
    loop->timer_watch = (struct sw_watch) { .ready = timer_ready };
    sw_loop_watch(sw, loop->timer_fd, &loop->timer_watch, EPOLLIN);
    return true;
}

void sw_loop_cleanup(ArcticSwitch *sw)
{
    struct sw_loop *loop = &sw->loop;
    unsigned i;

    if (loop->epoll_fd >= 0) {
        close(loop->epoll_fd);
    }
    if (loop->wakeup_fd >= 0) {
        close(loop->wakeup_fd);
    }
    if (loop->timer_fd >= 0) {
        close(loop->timer_fd);
    }
    loop->epoll_fd = loop->wakeup_fd = loop->timer_fd = -1;
    loop->cpu_wakers = 0;
    g_mutex_clear(&loop->model_lock);
    for (i = 0; i < ARCTIC_CPU_WAKE_MAX; i++) {
        g_mutex_clear(&loop->cpu[i].lock);
    }
    g_mutex_clear(&loop->invoke_lock);
    g_cond_clear(&loop->invoke_done);
}

void arctic_switch_invoke(ArcticSwitch *sw,
                          void (*fn)(ArcticSwitch *sw, void *opaque),
                          void *opaque)
{
    struct sw_loop *loop = &sw->loop;
    struct invoke_request req = { .fn = fn, .opaque = opaque };
    uint64_t one = 1;

    g_mutex_lock(&loop->invoke_lock);
    if (!loop->running || loop->thread == g_thread_self()) {
        g_mutex_unlock(&loop->invoke_lock);
        fn(sw, opaque);
        return;
    }
    g_queue_push_tail(&loop->invoke_queue, &req);
    if (write(loop->wakeup_fd, &one, sizeof(one)) < 0) {
        /*
         * The counter cannot overflow in practice; the loop still runs
         * the request on its next wake-up.
         */
    }
    while (!req.done) {
        g_cond_wait(&loop->invoke_done, &loop->invoke_lock);
    }
    g_mutex_unlock(&loop->invoke_lock);
}

void arctic_switch_stop(ArcticSwitch *sw)
{
    uint64_t one = 1;

    sw->loop.stop_requested = 1;
    if (write(sw->loop.wakeup_fd, &one, sizeof(one)) < 0) {
        /* Only EAGAIN is possible, and then a wake-up is pending anyway. */
    }
}

void arctic_switch_run(ArcticSwitch *sw)
{
    struct sw_loop *loop = &sw->loop;
    struct epoll_event events[128];

    g_mutex_lock(&loop->invoke_lock);
    loop->thread = g_thread_self();
    loop->running = 1;
    g_mutex_unlock(&loop->invoke_lock);
    g_mutex_lock(&loop->model_lock);
    run_invokes(sw);
    cpu_wake_start(sw);

    while (!loop->stop_requested) {
        bool sleep = loop->may_sleep(sw);
        int n, i;

        /*
         * The per-CPU wake-up threads may serve the rings meanwhile; a
         * kick left to this thread while it held the lock is served now.
         */
        if (sw_kick_release(loop)) {
            sw_loop_serve_kick(sw, -1);
            continue;
        }
        n = epoll_wait(loop->epoll_fd, events, G_N_ELEMENTS(events),
                       sleep ? -1 : 0);
        /* A wake-up thread serving a flood lets go after its pass. */
        __atomic_store_n(&loop->loop_waiting, 1, __ATOMIC_SEQ_CST);
        g_mutex_lock(&loop->model_lock);
        __atomic_store_n(&loop->loop_waiting, 0, __ATOMIC_SEQ_CST);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            g_error("epoll_wait: %s", g_strerror(errno));
        }
        sw->now_ns = sw_clock_ns();
        for (i = 0; i < n; i++) {
            struct sw_watch *watch = events[i].data.ptr;

            watch->ready(sw, watch->object, events[i].events);
        }
        loop->after_batch(sw);
    }

    g_mutex_unlock(&loop->model_lock);
    cpu_wake_stop(sw);
    g_mutex_lock(&loop->invoke_lock);
    loop->running = 0;
    loop->thread = NULL;
    g_mutex_unlock(&loop->invoke_lock);
    run_invokes(sw);
    loop->stop_requested = 0;
}
