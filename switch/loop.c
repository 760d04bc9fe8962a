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
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
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

bool sw_loop_init(ArcticSwitch *sw, void (*on_timer)(ArcticSwitch *sw),
                  void (*after_batch)(ArcticSwitch *sw),
                  bool (*may_sleep)(ArcticSwitch *sw), GError **errp)
{
    struct sw_loop *loop = &sw->loop;

    loop->on_timer = on_timer;
    loop->after_batch = after_batch;
    loop->may_sleep = may_sleep;
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
    run_invokes(sw);

    while (!loop->stop_requested) {
        int n = epoll_wait(loop->epoll_fd, events, G_N_ELEMENTS(events),
                           loop->may_sleep(sw) ? -1 : 0);
        int i;

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

    g_mutex_lock(&loop->invoke_lock);
    loop->running = 0;
    loop->thread = NULL;
    g_mutex_unlock(&loop->invoke_lock);
    run_invokes(sw);
    loop->stop_requested = 0;
}
