/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU link transport served by a thread of its own (niu-link.h).
 *
 * The NIU connects to the switch's socket itself: a UNIX socket
 * (link-socket=PATH) on one host, TCP (link-socket=tcp:HOST:PORT, no
 * Nagle delay) for a switch on another host.  Its link thread
 * sleeps in poll() on the socket and on a wake-up notifier, so the switch's
 * write wakes it directly: no main loop, no timers, no glib sources
 * between the socket and the device.  It reads what the socket holds (up
 * to NIU_LINK_THREAD_READ bytes), takes the device lock once for the
 * whole batch, and hands it to the session, whose answers (acks, nacks,
 * credits) then leave in one write before the lock is dropped.  It never
 * takes the BQL: a vCPU that holds the BQL while its host thread is not
 * scheduled (an interrupt, another device's register) would hold the
 * NIU's input and its credits with it.  Sending needs no thread: whoever
 * holds the device lock (a vCPU ringing the doorbell, a timer) writes
 * straight to the socket without blocking; only when the socket is full
 * does it ask the link thread to wait for room.
 *
 * On a UNIX socket the NIU offers the switch shared-memory rings with its
 * HELLO (link-rings=on, the default; arctic/link-ring.h; niu-link-rings.c,
 * which also takes the direct rings the socket hands out later): a sealed
 * memfd and one end of a socket pair, the link's wake-up socket, go with
 * the first write (SCM_RIGHTS).  A switch that takes them says so in its
 * WELCOME, and from then on every frame goes through the rings: a send is
 * a copy into the ring, and a kick of the switch (one byte, sent with
 * MSG_DONTWAIT) only if the switch said it sleeps; a busy-polling vCPU
 * finds input with one load instead of a recv().  The socket then only
 * tells the end of the link.  A switch that does not take them leaves
 * the link on the socket, as over TCP.  Nothing the switch does to its
 * ends of the wake-up sockets can make a kick or a drain block: the
 * flags are per call (link 1.3).
 *
 * The thread never spins: on a 2-core host every spinning thread takes
 * the core a vCPU or the switch wants.  Locking: the device lock
 * (link->lock) covers the session, the device, the fd and the rings
 * (set up and freed only under it, and only by the thread); the flags the
 * thread reads without it are atomics, and every change of them that
 * needs the thread's attention kicks the notifier.  The ring the switch
 * writes is read under rx_lock, like the socket; the ring the NIU writes
 * only under the device lock.
 */

#include "qemu/osdep.h"
#include <linux/futex.h>
#include <sys/syscall.h>
#include "qemu/error-report.h"
#include "qemu/main-loop.h"
#include "qemu/rcu.h"
#include "qemu/sockets.h"
#include "qapi/error.h"
#include "trace.h"

#include <sys/un.h>

#include "niu-link-thread.h"

enum {
    /*
     * Bytes taken from the socket per hold of the device lock: enough for the
     * packets of a whole credit window of both priorities.
     */
    NIU_LINK_THREAD_READ = 16 * 1024,
};

/* The futex words one sleep of the thread waits on at most. */
enum { NIU_LINK_WAITERS = 128 };

/*
 * An idle link's look at its rings and socket (ARCTIC_RING_LOOK_MS) backs
 * off by doubling up to this many times (16 x 10 ms) while looks find
 * nothing: a booted node that waits costs its host about 6 wake-ups a
 * second instead of 100.  Any kick (the switch kicks after a frame on the
 * socket too) or work brings it back at once; only a lost kick (the ring
 * protocol loses none) or a switch that died without a word waits
 * longer, up to the backed-off look.  A timed link's thread looks every
 * 100 ms, without backing off.
 */
#define NIU_LINK_THREAD_IDLE_SHIFT 4

/* A wait for the device lock longer than this is traced (..._lock_wait). */
#define NIU_LINK_THREAD_SLOW_LOCK_NS (10 * SCALE_MS)


/* With the rings on, the socket has said the link's end (or bytes). */
static bool thread_socket_readable(NiuLinkThread *t)
{
    GPollFD pfd = { .fd = t->fd, .events = G_IO_IN };

    return qemu_poll_ns(&pfd, 1, 0) > 0;
}

/*
 * With the rings on, before the last look at everything: the words the
 * thread sleeps on, with what they hold now: our own kick word, the
 * switch's kick counter in the area (unless @timed), and those of the
 * direct rings from other nodes (at most NIU_LINK_WAITERS in all; more
 * are looked at every ARCTIC_RING_LOOK_MS).  Returns how many.
 */
static unsigned thread_waiters(NiuLinkThread *t, struct futex_waitv *w,
                               bool timed)
{
    struct arctic_ring_area *area = t->rings->area;
    unsigned n = 0;

    w[n++] = (struct futex_waitv) {
        .uaddr = (uintptr_t)&t->kick_word,
        .val = qatomic_load_acquire(&t->kick_word),
        .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG,
    };
    if (!timed) {
        w[n++] = (struct futex_waitv) {
            .uaddr = (uintptr_t)&area->kicks.niu,
            .val = qatomic_load_acquire(&area->kicks.niu),
            .flags = FUTEX_32,
        };
    }
    if (t->direct && !timed) {
        n += niu_direct_waiters(t->direct, w + n, NIU_LINK_WAITERS - n);
    }
    return n;
}

/*
 * Sleep until one of the @n words of @w leaves what was seen before the
 * last look at everything (a kick), or @timeout_ns pass; true if the
 * time ran out.
 */
static bool thread_futex_wait(struct futex_waitv *w, unsigned n,
                              int64_t timeout_ns)
{
    struct timespec ts;
    int64_t deadline;

    if (timeout_ns == 0) {
        return false;
    }
    deadline = get_clock() + timeout_ns;
    ts.tv_sec = deadline / NANOSECONDS_PER_SECOND;
    ts.tv_nsec = deadline % NANOSECONDS_PER_SECOND;
    return syscall(SYS_futex_waitv, w, n, 0, &ts, CLOCK_MONOTONIC) < 0 &&
           errno == ETIMEDOUT;
}

/* Sleep until kicked or @ms pass; false when the device goes away. */
static bool thread_wait(NiuLinkThread *t, int ms)
{
    GPollFD pfd = {
        .fd = event_notifier_get_fd(&t->wake),
        .events = G_IO_IN,
    };

    if (qemu_poll_ns(&pfd, 1, ms * SCALE_MS) > 0) {
        event_notifier_test_and_clear(&t->wake);
    }
    return !qatomic_read(&t->quit);
}

/*
 * Connect to the switch, non-blocking from then on; TCP without Nagle's
 * wait (many frames per write already).  NULL and a reason in @errp when
 * nobody listens yet.
 */
static QIOChannelSocket *thread_connect(NiuLinkThread *t, Error **errp)
{
    QIOChannelSocket *sioc = qio_channel_socket_new();
    QIOChannel *ioc = QIO_CHANNEL(sioc);

    qio_channel_set_name(ioc, "arctic-niu-link");
    if (qio_channel_socket_connect_sync(sioc, t->addr, errp) < 0 ||
        qio_channel_set_blocking(ioc, false, errp) < 0) {
        object_unref(OBJECT(sioc));
        return NULL;
    }
    if (t->addr->type == SOCKET_ADDRESS_TYPE_INET) {
        qio_channel_set_delay(ioc, false);
    }
    return sioc;
}

/* Under the device lock. */
static bool thread_direct_write(NiuLink *link, unsigned dst, uint8_t prio,
                                const uint8_t *frame, size_t len)
{
    NiuLinkThread *t = link->thread;

    return t->direct && niu_direct_write(t->direct, dst, prio, frame, len);
}

/* --- the connection ---------------------------------------------------- */

/* Under the device lock. */
static void thread_close(NiuLinkThread *t)
{
    if (t->fd >= 0) {
        niu_link_closed(t->link);
        object_unref(OBJECT(t->sioc));
        t->sioc = NULL;
        t->fd = -1;
        qatomic_set(&t->want_out, false);
        qatomic_set(&t->hold_input, false);
        qatomic_set(&t->deadline, 0);
        qatomic_set(&t->rings_on, false);
        qatomic_set(&t->fd_shut, false);
        qatomic_set(&t->timed_reader, false);
        t->rings_asleep = false;
        t->rings_offer = false;
        niu_link_rings_free(t->rings);
        t->rings = NULL;
        niu_link_control_reset(t);
        g_byte_array_set_size(t->held, 0);  /* the old session's */
        qatomic_set(&t->held_due, false);
    }
}

/* Under the device lock, in the thread: a new connection says HELLO. */
static void thread_opened(NiuLinkThread *t, QIOChannelSocket *sioc)
{
    t->sioc = sioc;
    t->fd = sioc->fd;
    t->rings = t->rings_wanted ? niu_link_rings_new(t) : NULL;
    t->rings_offer = t->rings != NULL;
    niu_link_opened(t->link);
}

/*
 * The poll timeout for the pending deferral and for the end of a vCPU's
 * busy polling (@polled_until, 0 none), in ns: -1 none.
 */
static int64_t thread_timeout_ns(NiuLinkThread *t, int64_t now,
                                 int64_t polled_until)
{
    int64_t deadline = qatomic_read(&t->deadline);

    if (polled_until && (!deadline || polled_until < deadline)) {
        deadline = polled_until;
    }
    if (!deadline) {
        return -1;
    }
    return MAX(deadline - now, 0);
}

/*
 * Under the device lock and rx_lock: bytes read from the socket or the
 * ring go to the session, after what waited for a resume; if they leave it
 * no room, no more is read until it takes input (thread_accept_input()).
 * Paused, they wait too (NiuLinkThread.held): the pause is seen only under
 * the device lock, after the read.
 */
static void thread_input(NiuLinkThread *t, const uint8_t *buf, size_t n)
{
    if (t->link->paused) {
        g_byte_array_append(t->held, buf, n);
        qatomic_set(&t->held_due, true);
        trace_arctic_niu_link_thread_held(t->link->node_id, t->held->len,
                                          t->control_len);
        return;
    }
    if (t->held->len) {
        niu_link_input(t->link, t->held->data, t->held->len);
        g_byte_array_set_size(t->held, 0);
    }
    if (n) {
        niu_link_input(t->link, buf, n);
    }
    if (t->fd >= 0 && !niu_link_input_room(t->link)) {
        qatomic_set(&t->hold_input, true);
    }
}

/* Under the device lock: the session's deferral, if it has run out by @now. */
static void thread_deferral(NiuLinkThread *t, int64_t now)
{
    int64_t deadline = qatomic_read(&t->deadline);

    if (deadline && now >= deadline) {
        qatomic_set(&t->deadline, 0);
        if (t->fd >= 0) {
            niu_link_deferred_due(t->link);
        }
    }
}

/*
 * Under rx_lock, without the device lock: take a batch of input, from the
 * ring once the rings carry the link, else from the socket.  Returns the
 * bytes (0: none now), -1 at the end of the connection (errno set), or -2
 * for a broken link (*@broken says what).
 */
static ssize_t thread_take_input(NiuLinkThread *t, uint8_t *buf,
                                 const char **broken)
{
    ssize_t n;

    if (qatomic_read(&t->rings_on)) {
        size_t got = niu_link_rings_read(t, buf, NIU_LINK_THREAD_READ);

        if (got == ARCTIC_RING_BROKEN) {
            *broken = "its ring's head is impossible";
            return -2;
        }
        return got;
    }
    /* Descriptors a switch sends anyway are closed by the kernel. */
    n = recv(t->fd, buf, NIU_LINK_THREAD_READ, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return 0;
    }
    if (n == 0) {
        errno = 0;          /* an orderly end */
        return -1;
    }
    return n;
}

/*
 * Before the device lock, what one wake-up found to read, under rx_lock
 * (*@reading once taken; also for @direct_ready's deliveries).  With the
 * rings on (@rings) the socket brings only the frames that hand out the
 * direct rings (*@control), else input.  Returns as thread_take_input().
 */
static ssize_t thread_serve_read(NiuLinkThread *t, bool rings,
                                 bool socket_ready, bool ring_ready,
                                 bool direct_ready, uint8_t *buf,
                                 bool *reading, bool *control,
                                 const char **broken)
{
    ssize_t n = 0;

    if (socket_ready && rings) {
        /*
         * Held while the rings may be freed: a timed vCPU sleeps on them.
         * The socket brings the direct rings, its end, or what it must
         * not carry.
         */
        qemu_mutex_lock(&t->rx_lock);
        *reading = true;
        n = niu_link_control_read(t, broken);
        *control = n > 0;
    } else if (socket_ready || ring_ready) {
        qemu_mutex_lock(&t->rx_lock);
        *reading = true;
        n = thread_take_input(t, buf, broken);
    }
    if (direct_ready && !*reading) {
        qemu_mutex_lock(&t->rx_lock);
        *reading = true;
    }
    return n;
}

/*
 * Take the device lock.  What the thread read (@n bytes) waits with it: a
 * vCPU in one of the NIU's registers whose host thread is not scheduled
 * holds the NIU's input, and its credits.  (The clock is read again only
 * while the event is on; @since is when the thread woke.)
 */
static void thread_lock(NiuLinkThread *t, int64_t since, ssize_t n)
{
    qemu_rec_mutex_lock(t->link->lock);
    if (trace_event_get_state_backends(
            TRACE_ARCTIC_NIU_LINK_THREAD_LOCK_WAIT)) {
        int64_t waited = get_clock() - since;

        if (waited > NIU_LINK_THREAD_SLOW_LOCK_NS) {
            trace_arctic_niu_link_thread_lock_wait(t->link->node_id,
                                                   waited / SCALE_US,
                                                   MAX(n, 0));
        }
    }
}

/*
 * What one wake-up found, handed to the session under one hold of the
 * device lock: posted work, room to write, a batch of input (or the
 * end of the connection), a deferral run out.  Input is read before the
 * lock is taken.
 */
static void thread_serve(NiuLinkThread *t, bool writable, bool socket_ready,
                         bool ring_ready, bool direct_ready, uint8_t *buf)
{
    bool posted = qatomic_xchg(&t->posted, false);
    int64_t deadline = qatomic_read(&t->deadline);
    int64_t now = get_clock();
    bool due = deadline && now >= deadline;
    bool reading = false, rings = qatomic_read(&t->rings_on);
    bool control = false;
    const char *broken = NULL;
    bool resume = qatomic_read(&t->held_due) && !qatomic_read(&t->paused);
    ssize_t n;

    /* A resume hands on what was held, under rx_lock as a read would. */
    n = thread_serve_read(t, rings, socket_ready, ring_ready,
                          direct_ready || resume, buf, &reading, &control,
                          &broken);
    if (writable) {
        qatomic_set(&t->want_out, false);
    }
    if (!posted && !writable && !n && !due && !direct_ready && !resume) {
        if (reading) {
            qemu_mutex_unlock(&t->rx_lock);
        }
        return;
    }
    thread_lock(t, now, n);
    if (posted && t->fd >= 0) {
        niu_link_posted_due(t->link);
    }
    if (writable) {
        niu_link_writable(t->link);
    }
    if (resume) {
        qatomic_set(&t->held_due, false);   /* set again if paused again */
    }
    if (n > 0 && !control) {
        thread_input(t, buf, n);
    } else if (resume) {
        thread_input(t, buf, 0);
    }
    /*
     * Direct-ring frames, just read or held, after the input held: paused,
     * they wait in control_buf (a DIRECT_STOP hands up its ring's input).
     */
    if (t->control_len && t->link->paused) {
        qatomic_set(&t->held_due, true);
    } else if (t->control_len && n >= 0 &&
               !niu_link_control_take(t, &broken)) {
        n = -2;
    }
    if (n == -2) {
        trace_arctic_niu_link_rings_broken(t->link->node_id, broken);
        niu_link_broken(t->link, broken, 0);
    } else if (n < 0) {
        trace_arctic_niu_link_thread_closed(t->link->node_id, errno);
        thread_close(t);
    }
    if (reading && t->direct && t->fd >= 0) {
        niu_direct_deliver(t->direct, true);
    }
    if (reading) {
        qemu_mutex_unlock(&t->rx_lock);
    }
    thread_deferral(t, now);
    qemu_rec_mutex_unlock(t->link->lock);
    niu_link_released(t->link);
}

/*
 * Before sleeping with the rings on: say so in the switch's ring and look a
 * last time (arctic/link-ring.h) -- unless the input is held or left to a
 * busy-polling vCPU, when no kick is wanted.  True if input waits.
 */
static bool thread_ring_input_waits(NiuLinkThread *t, bool take_input)
{
    if (!take_input) {
        arctic_ring_consumer_awake(&t->rings->in);
        return false;
    }
    return !arctic_ring_consumer_sleep(&t->rings->in);
}

/*
 * No link: wait out the reconnect delay (not before the first try), then
 * connect.  False if the thread is to quit.
 */
static bool thread_reconnect(NiuLinkThread *t, bool *first)
{
    QIOChannelSocket *sioc;
    Error *err = NULL;

    if (!*first && !thread_wait(t, t->reconnect_ms)) {
        return false;
    }
    *first = false;
    sioc = thread_connect(t, &err);
    if (!sioc) {
        if (!t->connect_failed) {
            trace_arctic_niu_link_thread_connect(
                t->link->node_id, t->path, error_get_pretty(err));
        }
        error_free(err);
        t->connect_failed = true;
        return true;
    }
    t->connect_failed = false;
    trace_arctic_niu_link_thread_connect(t->link->node_id, t->path,
                                         "connected");
    qemu_rec_mutex_lock(t->link->lock);
    thread_opened(t, sioc);
    qemu_rec_mutex_unlock(t->link->lock);
    niu_link_released(t->link);
    return true;
}

/*
 * With the rings on: sleep on the kick counters @waiters (taken before
 * the last look) for at most @timeout ns, then serve what woke the thread.
 */
static void thread_rings_pass(NiuLinkThread *t, bool take_input,
                              int64_t timeout, struct futex_waitv *waiters,
                              unsigned n_waiters, uint8_t *buf)
{
    /*
     * A timed link's ring and its flags are the vCPU's: the thread
     * looks at the socket's end only, and less often.
     */
    bool timed = qatomic_read(&t->timed_reader);
    int64_t base = (timed ? 10 : 1) * ARCTIC_RING_LOOK_MS * SCALE_MS;
    /* idle_looks stays 0 on a timed link (below) */
    int64_t look = base << MIN(t->idle_looks, NIU_LINK_THREAD_IDLE_SHIFT);
    bool socket_ready = false, ring_ready, direct_ready = false;
    bool looking, timed_out;

    if ((!timed && thread_ring_input_waits(t, take_input)) ||
        (t->direct && take_input && !niu_direct_sleep(t->direct)) ||
        qatomic_read(&t->posted) || qatomic_read(&t->fd_shut)) {
        timeout = 0;
    }
    if (timeout < 0 || timeout > look) {
        /* A kick lost or withheld delays the link, never stalls it. */
        timeout = look;
    }
    looking = timeout == look;
    /*
     * The socket says only that the link ended, or hands out and takes
     * back direct rings (the switch kicks after those): looked at when
     * nothing else woke the thread, when the device dropped the link, and
     * at least every ARCTIC_RING_LOOK_MS however often the thread is
     * woken.  Paused, the socket waits too: a DIRECT_STOP would hand up
     * what its ring holds.
     */
    timed_out = thread_futex_wait(waiters, n_waiters, timeout);
    if ((timed_out || qatomic_read(&t->fd_shut) ||
         qatomic_read(&((struct arctic_ring_area *)
                        t->rings->area)->kicks.closing) ||
         get_clock() - t->socket_looked > base) &&
        !qatomic_read(&t->paused)) {
        t->socket_looked = get_clock();
        socket_ready = thread_socket_readable(t);
    }
    if (!timed) {
        arctic_ring_consumer_awake(&t->rings->in);
    }
    if (t->direct) {
        niu_direct_awake(t->direct);
        direct_ready = take_input && niu_direct_input_waits(t->direct);
    }
    ring_ready = take_input && arctic_ring_used(&t->rings->in);
    if (!timed && looking && timed_out && !socket_ready && !ring_ready &&
        !direct_ready && !qatomic_read(&t->want_out)) {
        t->idle_looks++;
    } else {
        t->idle_looks = 0;
    }
    /*
     * Output that waits is retried at every wake-up: room is said by the
     * switch's kick or, if it came while the writer looked, by our own.
     */
    thread_serve(t, qatomic_read(&t->want_out), socket_ready, ring_ready,
                 direct_ready, buf);
}

/*
 * On the socket alone: poll it and the wake-up notifier for at most
 * @timeout ns, then serve what woke the thread.
 */
static void thread_socket_pass(NiuLinkThread *t, bool take_input,
                               int64_t timeout, uint8_t *buf)
{
    GPollFD pfd[2];

    pfd[0] = (GPollFD) {
        /* Paused: not even a hang-up is read (poll() skips fd -1). */
        .fd = qatomic_read(&t->paused) ? -1 : t->fd,
        .events = (take_input ? G_IO_IN : 0) |
                  (qatomic_read(&t->want_out) ? G_IO_OUT : 0),
    };
    pfd[1] = (GPollFD) {
        .fd = event_notifier_get_fd(&t->wake),
        .events = G_IO_IN,
    };
    if (qemu_poll_ns(pfd, 2, timeout) < 0) {
        return;             /* EINTR */
    }
    if (pfd[1].revents) {
        event_notifier_test_and_clear(&t->wake);
    }
    thread_serve(t, pfd[0].revents & G_IO_OUT,
                 pfd[0].revents & (G_IO_IN | G_IO_HUP | G_IO_ERR),
                 false, false, buf);
}

static void *thread_run(void *opaque)
{
    NiuLinkThread *t = opaque;
    g_autofree uint8_t *buf = g_malloc(NIU_LINK_THREAD_READ);
    bool first = true;

    rcu_register_thread();
    while (!qatomic_read(&t->quit)) {
        int64_t now, polled_until, timeout;
        struct futex_waitv waiters[NIU_LINK_WAITERS];
        unsigned n_waiters = 0;
        bool take_input, rings;

        if (t->fd < 0) {
            if (!thread_reconnect(t, &first)) {
                break;
            }
            continue;
        }
        rings = qatomic_read(&t->rings_on);
        if (rings && !t->rings_asleep) {
            /*
             * The notifier is not watched with the rings on: what
             * rings_up() set on it must not cut the wait short after the
             * link ends.
             */
            event_notifier_test_and_clear(&t->wake);
            t->rings_asleep = true;
        }
        if (rings) {
            /* Seen before the last look: a kick after it ends the sleep. */
            n_waiters = thread_waiters(t, waiters,
                                       qatomic_read(&t->timed_reader));
        }
        now = get_clock();
        polled_until = qatomic_read(&t->polled_until);
        if (polled_until <= now) {
            polled_until = 0;
        }
        take_input = !qatomic_read(&t->hold_input) && !polled_until &&
                     !qatomic_read(&t->timed_reader) &&
                     !qatomic_read(&t->paused);
        timeout = thread_timeout_ns(t, now, polled_until);
        if (rings) {
            thread_rings_pass(t, take_input, timeout, waiters, n_waiters,
                              buf);
        } else {
            thread_socket_pass(t, take_input, timeout, buf);
        }
    }
    rcu_unregister_thread();
    return NULL;
}

/* Under the device lock, from any thread; never blocks. */
static size_t thread_write(NiuLink *link, const uint8_t *buf, size_t len)
{
    NiuLinkThread *t = link->thread;
    ssize_t n;

    if (t->fd < 0) {
        return len;         /* no connection: the session is down */
    }
    if (qatomic_read(&t->rings_on)) {
        return niu_link_rings_write(t, buf, len);
    }
    if (t->rings_offer) {
        n = niu_link_rings_send_offer(t, buf, len);
    } else {
        n = send(t->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) {
            return len;     /* broken: the thread sees it and closes */
        }
        n = 0;
    }
    if (n < len) {
        qatomic_set(&t->want_out, true);
        niu_link_thread_kick(t);
    }
    return n;
}

/*
 * Under the device lock: the WELCOME took the rings this connection's
 * HELLO offered.  The thread is kicked to watch them instead of the
 * socket (a busy-polling vCPU may have read the WELCOME).
 */
static bool thread_rings_up(NiuLink *link, bool cpu_wake)
{
    NiuLinkThread *t = link->thread;

    if (!t->rings || t->rings_offer) {
        return false;
    }
    niu_link_rings_adopt_cpu_wake(t, cpu_wake);
    qatomic_set(&t->rings_on, true);
    /* It may sleep in poll() still, on the notifier, not the futexes. */
    event_notifier_set(&t->wake);
    return true;
}

static void thread_accept_input(NiuLink *link)
{
    NiuLinkThread *t = link->thread;

    if (qatomic_read(&t->hold_input)) {
        qatomic_set(&t->hold_input, false);
        niu_link_thread_kick(t);
    }
}

/* Under the device lock: see NiuLinkThread.paused. */
static void thread_pause(NiuLink *link, bool paused)
{
    NiuLinkThread *t = link->thread;

    qatomic_set(&t->paused, paused);
    niu_link_thread_kick(t);
}

static void thread_disconnect(NiuLink *link)
{
    NiuLinkThread *t = link->thread;

    /* The thread sees the hang-up and closes under the device lock. */
    if (t->fd >= 0) {
        shutdown(t->fd, SHUT_RDWR);
        qatomic_set(&t->fd_shut, true);
        niu_link_thread_kick(t);    /* asleep on futexes, it would miss it */
    }
}

/*
 * Under the device lock.  From another thread, kick the link thread so that it
 * sleeps no longer than the new deadline.
 */
static void thread_defer(NiuLink *link, int64_t delay_ns)
{
    NiuLinkThread *t = link->thread;
    int64_t now = get_clock();
    int64_t deadline = now + delay_ns;
    int64_t old = qatomic_read(&t->deadline);

    if (old && old <= deadline) {
        return;
    }
    qatomic_set(&t->deadline, deadline);
    /*
     * While vCPUs busy-poll, they serve the deadline (thread_poll_input());
     * the thread sleeps until the polling stops and need not be woken.
     */
    if (!qemu_thread_is_self(&t->thread) &&
        qatomic_read(&t->polled_until) <= now) {
        niu_link_thread_kick(t);
    }
}

static bool thread_post(NiuLink *link)
{
    NiuLinkThread *t = link->thread;

    if (!qatomic_xchg(&t->posted, true)) {
        niu_link_thread_kick(t);
    }
    return true;
}

/*
 * Under the device lock, in a vCPU that busy-polls (USER_LINK_POLL): what the
 * socket or the ring holds goes to the session now, without waiting for
 * the link thread to get a core.  If the thread is reading, it delivers.
 * With the rings on, an empty poll costs a load, not a system call.
 */
static bool thread_poll_input(NiuLink *link)
{
    NiuLinkThread *t = link->thread;
    const char *broken = NULL;
    bool direct;
    int64_t now;
    ssize_t n;

    if (t->fd < 0 || qatomic_read(&t->hold_input)) {
        return false;
    }
    /*
     * A new run of busy polling: the thread stops waiting for input now,
     * not after the next packet.
     */
    now = get_clock();
    if (t->busy_poll_ns &&
        qatomic_xchg(&t->polled_until, now + t->busy_poll_ns) <= now) {
        niu_link_thread_kick(t);
    }
    /*
     * The direct rings are the thread's to change, under rx_lock and the
     * lock we hold: read without rx_lock, @direct may only be freed
     * after the thread took both, so it stays for this look.
     */
    direct = t->direct && niu_direct_input_waits(t->direct);
    if ((qatomic_read(&t->rings_on) && !arctic_ring_used(&t->rings->in) &&
         !direct) || qemu_mutex_trylock(&t->rx_lock)) {
        thread_deferral(t, now);
        return false;
    }
    n = thread_take_input(t, t->poll_buf, &broken);
    t->in_poll = true;
    if (n > 0) {
        thread_input(t, t->poll_buf, n);
    } else if (n == -2) {
        trace_arctic_niu_link_rings_broken(t->link->node_id, broken);
        niu_link_broken(t->link, broken, 0);
    }
    if (direct && niu_direct_deliver(t->direct, false)) {
        n = MAX(n, 1);
    }
    t->in_poll = false;
    thread_deferral(t, now);
    qemu_mutex_unlock(&t->rx_lock);
    return n > 0;     /* an end or an error: the thread sees it too */
}

/*
 * A reader is going to sleep until an interrupt says input came: the
 * thread must not leave the input to it until x-link-busy-poll-ns runs
 * out (a sleeping program's round trip grew by that much).
 */
static void thread_poll_end(NiuLink *link)
{
    NiuLinkThread *t = link->thread;

    if (qatomic_xchg(&t->polled_until, 0) > get_clock()) {
        niu_link_thread_kick(t);
    }
}

static void thread_cleanup(NiuLink *link)
{
    NiuLinkThread *t = link->thread;

    qatomic_set(&t->quit, true);
    niu_link_thread_kick(t);
    /*
     * Called without the device lock: the thread may be waiting for it,
     * or for the BQL in niu_link_released() (as cpu_remove_sync() lets a
     * vCPU thread finish).
     */
    if (bql_locked()) {
        bql_unlock();
        qemu_thread_join(&t->thread);
        bql_lock();
    } else {
        qemu_thread_join(&t->thread);
    }
    if (t->sioc) {
        object_unref(OBJECT(t->sioc));
    }
    niu_link_rings_free(t->rings);
    niu_link_control_reset(t);
    event_notifier_cleanup(&t->wake);
    qemu_mutex_destroy(&t->rx_lock);
    g_free(t->poll_buf);
    g_byte_array_unref(t->held);
    qapi_free_SocketAddress(t->addr);
    g_free(t->path);
    g_free(t);
    link->thread = NULL;
}

/*
 * Under the device lock: a timed link is up.  Its input is the vCPU's
 * from now on; the thread is kicked to stop waiting for it.
 */
static void thread_timed(NiuLink *link)
{
    NiuLinkThread *t = link->thread;

    qatomic_set(&t->timed_reader, true);
    niu_link_thread_kick(t);
}

/*
 * Under the device lock, in the vCPU of a timed link: what the ring or
 * the socket holds goes to the session now.  The end of the connection is
 * the thread's to see and close.
 *
 * The thread takes rx_lock before the device lock (thread_serve()), so
 * this side, which holds the device lock, only tries: rx_lock held means
 * the thread is reading (the end of the socket, most likely) and waits
 * for the device lock to hand over what it read, which the caller's wait
 * (thread_wait_input(), without the device lock) lets it do.
 */
static bool thread_read_input(NiuLink *link)
{
    NiuLinkThread *t = link->thread;
    const char *broken = NULL;
    ssize_t n;

    if (t->fd < 0 ||
        (qatomic_read(&t->rings_on) && !arctic_ring_used(&t->rings->in))) {
        return false;
    }
    if (qemu_mutex_trylock(&t->rx_lock) != 0) {
        trace_arctic_niu_link_thread_reading(t->link->node_id);
        return false;
    }
    n = thread_take_input(t, t->poll_buf, &broken);
    if (n > 0) {
        thread_input(t, t->poll_buf, n);
    } else if (n == -2) {
        trace_arctic_niu_link_rings_broken(t->link->node_id, broken);
        niu_link_broken(t->link, broken, 0);
    }
    qemu_mutex_unlock(&t->rx_lock);
    return n > 0;
}

/*
 * Without the device lock, in the vCPU of a timed link: sleep until the
 * switch kicks (it wrote to the ring) or the socket has bytes, or
 * @timeout_ns pass.  rx_lock keeps the rings and the descriptor from
 * being freed meanwhile (the thread closes under it).
 */
static void thread_wait_input(NiuLink *link, int64_t timeout_ns)
{
    NiuLinkThread *t = link->thread;

    qemu_mutex_lock(&t->rx_lock);
    if (t->fd < 0) {
        qemu_mutex_unlock(&t->rx_lock);
        g_usleep(timeout_ns / SCALE_US);
        return;
    }
    if (qatomic_read(&t->rings_on)) {
        struct arctic_ring_area *area = t->rings->area;
        uint32_t seen = qatomic_load_acquire(&area->kicks.niu);

        if (arctic_ring_consumer_sleep(&t->rings->in)) {
            struct futex_waitv w = {
                .uaddr = (uintptr_t)&area->kicks.niu,
                .val = seen,
                .flags = FUTEX_32,
            };
            int64_t deadline = get_clock() + timeout_ns;
            struct timespec ts = {
                .tv_sec = deadline / NANOSECONDS_PER_SECOND,
                .tv_nsec = deadline % NANOSECONDS_PER_SECOND,
            };

            syscall(SYS_futex_waitv, &w, 1, 0, &ts, CLOCK_MONOTONIC);
        }
        arctic_ring_consumer_awake(&t->rings->in);
    } else {
        GPollFD pfd = { .fd = t->fd, .events = G_IO_IN };

        qemu_poll_ns(&pfd, 1, timeout_ns);
    }
    qemu_mutex_unlock(&t->rx_lock);
}

/* Is the caller the link thread (which calls niu_link_released())? */
bool niu_link_thread_is_self(NiuLink *link)
{
    return link->thread && qemu_thread_is_self(&link->thread->thread);
}

static const NiuTransportOps thread_transport = {
    .name = "thread",
    .write = thread_write,
    .accept_input = thread_accept_input,
    .pause = thread_pause,
    .disconnect = thread_disconnect,
    .defer = thread_defer,
    .post = thread_post,
    .poll_input = thread_poll_input,
    .poll_end = thread_poll_end,
    .rings_up = thread_rings_up,
    .direct_write = thread_direct_write,
    .timed = thread_timed,
    .read_input = thread_read_input,
    .wait_input = thread_wait_input,
    .cleanup = thread_cleanup,
};

bool niu_link_init_thread(NiuLink *link, const char *path,
                          uint32_t reconnect_ms, uint64_t busy_poll_ns,
                          bool rings, bool kick_yield, bool cpu_wake,
                          bool direct, Error **errp)
{
    g_autoptr(SocketAddress) addr = g_new0(SocketAddress, 1);
    NiuLinkThread *t;
    char name[32];
    int ret;

    if (g_str_has_prefix(path, NIU_LINK_TCP_PREFIX)) {
        addr->type = SOCKET_ADDRESS_TYPE_INET;
        if (inet_parse(&addr->u.inet, path + strlen(NIU_LINK_TCP_PREFIX),
                       errp) < 0) {
            error_prepend(errp, "arctic-niu: link-socket=%s wants "
                          NIU_LINK_TCP_PREFIX "HOST:PORT: ", path);
            return false;
        }
    } else if (strlen(path) >=
               sizeof(((struct sockaddr_un *)NULL)->sun_path)) {
        error_setg(errp, "arctic-niu: link-socket path is too long: %s",
                   path);
        return false;
    } else {
        addr->type = SOCKET_ADDRESS_TYPE_UNIX;
        addr->u.q_unix.path = g_strdup(path);
    }
    t = g_new0(NiuLinkThread, 1);
    ret = event_notifier_init(&t->wake, false);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "arctic-niu: cannot create the link "
                         "thread's notifier");
        g_free(t);
        return false;
    }
    t->link = link;
    t->path = g_strdup(path);
    t->addr = g_steal_pointer(&addr);
    /* Descriptors cross only a UNIX socket. */
    t->rings_wanted = rings && t->addr->type == SOCKET_ADDRESS_TYPE_UNIX;
    /* Direct rings come on the socket of a link on rings (link 1.5). */
    link->direct_ok = direct && t->rings_wanted;
    t->reconnect_ms = reconnect_ms;
    t->busy_poll_ns = busy_poll_ns;
    t->kick_yield = kick_yield;
    t->cpu_wake = cpu_wake;
    t->fd = -1;
    t->paused = link->paused;   /* an incoming migration's device */
    qemu_mutex_init(&t->rx_lock);
    t->poll_buf = g_malloc(NIU_LINK_THREAD_READ);
    t->held = g_byte_array_new();
    link->thread = t;
    link->transport = &thread_transport;
    snprintf(name, sizeof(name), "arctic-niu-%u", link->node_id);
    qemu_thread_create(&t->thread, name, thread_run, t, QEMU_THREAD_JOINABLE);
    return true;
}
