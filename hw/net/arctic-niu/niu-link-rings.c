/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU link transport link-socket=: what rides beside the socket of
 * a UNIX link (niu-link-thread.h).
 *
 * The shared-memory rings (link 1.3, arctic/link-ring.h): the sealed
 * memfd and the wake-up socket pair offered with the HELLO, the frames
 * the session writes into the switch's ring and reads from its own, and
 * the kicks of the switch when it sleeps.  Once they carry the link, the
 * socket brings only the frames that hand out the direct rings of other
 * nodes (link 1.5), with their memfds, which this file gathers and hands
 * to niu-link-direct.c.  The thread (niu-link-thread.c) calls in here;
 * nothing here calls the thread.
 */

#include "qemu/osdep.h"
#include <sched.h>
#include "qemu/memfd.h"
#include "qemu/sockets.h"
#include "qapi/error.h"
#include "trace.h"

#include "niu-link-thread.h"

/* --- descriptors and wake-up sockets --------------------------------- */

/* A kick: one byte, never blocking whatever the switch did to its end. */
static void link_kick(int fd)
{
    static const char byte = 1;

    if (send(fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        /* EAGAIN: a kick waits to be read already; EPIPE: the link ends. */
    }
}

/* --- shared-memory rings ---------------------------------------------- */

/*
 * Under the device lock, as the WELCOME is taken: kick the switch's
 * per-CPU threads if it says it runs them and we want to.
 */
void niu_link_rings_adopt_cpu_wake(NiuLinkThread *t, bool offered)
{
    NiuRings *r = t->rings;

    r->cpu_wake = offered && t->cpu_wake;
    if (offered) {
        trace_arctic_niu_link_cpu_wake(t->link->node_id,
                                       r->cpu_wake ? "taken"
                                                   : "x-link-cpu-wake=off");
    }
}

void niu_link_rings_free(NiuRings *r)
{
    if (!r) {
        return;
    }
    qemu_memfd_free(r->area, r->size, r->area_fd);
    close(r->wake_fd);
    if (r->offer_fd >= 0) {
        close(r->offer_fd);
    }
    g_free(r);
}

/*
 * Under the device lock, in the thread, for a new connection: the area and
 * the eventfds to offer with the HELLO.  NULL if they cannot be made; the
 * link then stays on its socket.
 */
NiuRings *niu_link_rings_new(NiuLinkThread *t)
{
    NiuRings *r = g_new0(NiuRings, 1);
    Error *err = NULL;
    int pair[2];
    int ret;

    r->size = arctic_ring_area_size(ARCTIC_RING_DATA_SIZE);
    r->area = qemu_memfd_alloc("arctic-niu-link", r->size,
                               F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL,
                               &r->area_fd, &err);
    if (!r->area) {
        ret = -ENOMEM;
        error_free(err);
        goto fail_area;
    }
    ret = qemu_socketpair(AF_UNIX, SOCK_STREAM, 0, pair);
    if (ret < 0) {
        ret = -errno;
        goto fail_wake;
    }
    r->wake_fd = pair[0];
    r->offer_fd = pair[1];
    arctic_ring_area_init(r->area, ARCTIC_RING_DATA_SIZE);
    arctic_ring_attach(&r->out, r->area, ARCTIC_RING_DATA_SIZE,
                       ARCTIC_RING_TO_SWITCH);
    arctic_ring_attach(&r->in, r->area, ARCTIC_RING_DATA_SIZE,
                       ARCTIC_RING_TO_NIU);
    trace_arctic_niu_link_rings_offer(t->link->node_id, 0);
    return r;

fail_wake:
    qemu_memfd_free(r->area, r->size, r->area_fd);
fail_area:
    trace_arctic_niu_link_rings_offer(t->link->node_id, -ret);
    g_free(r);
    return NULL;
}

/*
 * What a call of the socket's QIOChannel returned (@n, @err): the bytes,
 * or -1 with errno EAGAIN (it would block) or EPIPE (an error, traced).
 */
static ssize_t channel_done(NiuLinkThread *t, ssize_t n, Error *err)
{
    if (n == QIO_CHANNEL_ERR_BLOCK) {
        errno = EAGAIN;
        return -1;
    }
    if (n < 0) {
        trace_arctic_niu_link_thread_error(t->link->node_id,
                                           error_get_pretty(err));
        error_free(err);
        errno = EPIPE;
        return -1;
    }
    return n;
}

/*
 * Send @buf with the rings' descriptors attached; they go with the first
 * byte that leaves.
 */
ssize_t niu_link_rings_send_offer(NiuLinkThread *t, const uint8_t *buf,
                                  size_t len)
{
    NiuRings *r = t->rings;
    int fds[ARCTIC_RING_FDS] = {
        [ARCTIC_RING_FD_AREA] = r->area_fd,
        [ARCTIC_RING_FD_WAKE] = r->offer_fd,
    };
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    Error *err = NULL;
    ssize_t n;

    /* SCM_RIGHTS, by QIOChannelSocket; never blocks (non-blocking). */
    n = qio_channel_writev_full(QIO_CHANNEL(t->sioc), &iov, 1, fds,
                                ARCTIC_RING_FDS, 0, &err);
    n = channel_done(t, n, err);
    if (n > 0) {
        t->rings_offer = false;
        /*
         * The switch has its own copies: the mapping keeps our memory,
         * and its end of the wake-up socket is its alone.
         */
        close(r->area_fd);
        r->area_fd = -1;
        close(r->offer_fd);
        r->offer_fd = -1;
    }
    return n;
}

/*
 * Kick the switch, which said in a ring that it sleeps.  When the kick
 * comes from input that a vCPU's busy poll hands up (the poll took acks
 * and sent what they freed, or delivered and acked), that vCPU then gives
 * its CPU away at once (x-link-kick-yield): the switch is on the path of
 * every packet, and on a host whose cores the spinning vCPUs hold, a
 * woken switch otherwise waits for the scheduler to preempt one of them
 * (docs/datapath.md §3.6).  Not otherwise: the yield is not
 * directed, and a vCPU that computes would hand its slice to another
 * guest's vCPU rather than to the switch (more nodes than cores); after a
 * doorbell, a switch woken late lets the messages that follow gather into
 * one batch (a prompt one feeds MPI's slow mode, §10); and the link
 * thread sleeps once its work is done anyway.
 */
static void rings_kick_switch(NiuLinkThread *t)
{
    NiuRings *r = t->rings;
    int cpu = r->cpu_wake ? sched_getcpu() : -1;

    /*
     * The switch's thread of this CPU, woken here: no IPI.  A FUTEX_WAKE
     * cannot block, whatever the switch does (link 1.3); all waiters are
     * woken, so that none can take the wake-up from the switch's thread.
     */
    if (cpu >= 0 && cpu < ARCTIC_CPU_WAKE_MAX) {
        struct arctic_ring_area *area = r->area;

        qatomic_inc(&area->kicks.cpu[cpu]);
        qemu_futex_wake(&area->kicks.cpu[cpu], INT_MAX);
        stat64_add(&t->link->cpu_kicks, 1);
    } else {
        link_kick(r->wake_fd);
    }
    stat64_add(&t->link->switch_kicks, 1);
    /* The link thread reads its ring without the lock: not in_poll's. */
    if (t->kick_yield && !qemu_thread_is_self(&t->thread) && t->in_poll) {
        sched_yield();
        stat64_add(&t->link->kick_yields, 1);
    }
}

/* Under the device lock: the session's frames into the switch's ring. */
size_t niu_link_rings_write(NiuLinkThread *t, const uint8_t *buf, size_t len)
{
    NiuRings *r = t->rings;
    size_t n = arctic_ring_write(&r->out, buf, len);

    if (n == ARCTIC_RING_BROKEN) {
        /* The thread sees the end and closes; what was sent is re-sent. */
        trace_arctic_niu_link_rings_broken(t->link->node_id,
                                           "the switch's tail");
        shutdown(t->fd, SHUT_RDWR);
        qatomic_set(&t->fd_shut, true);
        niu_link_thread_kick(t);
        return len;
    }
    if (n && arctic_ring_wake_consumer(&r->out)) {
        rings_kick_switch(t);
    }
    if (n < len) {
        /*
         * Full: the switch kicks our eventfd once it has read (and the
         * thread then retries), unless room came meanwhile.
         */
        qatomic_set(&t->want_out, true);
        if (!arctic_ring_producer_wait(&r->out, 1)) {
            niu_link_thread_kick(t);
        }
    }
    return n;
}

/*
 * Under rx_lock: up to @max bytes of the switch's ring into @buf; kicks
 * the switch if it waits for room.  ARCTIC_RING_BROKEN if its head is
 * impossible.
 */
size_t niu_link_rings_read(NiuLinkThread *t, uint8_t *buf, size_t max)
{
    NiuRings *r = t->rings;
    size_t n = arctic_ring_read(&r->in, buf, max);

    if (n && n != ARCTIC_RING_BROKEN && arctic_ring_wake_producer(&r->in)) {
        rings_kick_switch(t);
    }
    return n;
}

/* --- direct rings (link 1.5) ----------------------------------------- */

/* Under the device lock and rx_lock: the connection's direct rings go. */
void niu_link_control_reset(NiuLinkThread *t)
{
    unsigned i;

    niu_direct_free(t->direct);
    t->direct = NULL;
    for (i = 0; i < t->n_control_fds; i++) {
        close(t->control_fds[i]);
    }
    t->n_control_fds = 0;
    t->control_len = 0;
    arctic_frame_reader_reset(&t->control);
}

/*
 * Under rx_lock: once the rings carry the link, the socket brings only
 * DIRECT_RING and DIRECT_STOP frames, each DIRECT_RING with its memfd.
 * Their bytes and descriptors wait in @control_buf and @control_fds for
 * niu_link_control_take() under the device lock.  Returns the bytes read (0:
 * none), -1 at the socket's end, -2 (with *@broken) for what the link
 * must not carry.
 */
ssize_t niu_link_control_read(NiuLinkThread *t, const char **broken)
{
    struct iovec iov = {
        .iov_base = t->control_buf + t->control_len,
        .iov_len = sizeof(t->control_buf) - t->control_len,
    };
    g_autofree int *fds = NULL;
    size_t nfds = 0, i;
    Error *err = NULL;
    ssize_t n;

    if (!iov.iov_len) {
        return 0;       /* the last batch waits for niu_link_control_take() */
    }
    n = qio_channel_readv_full(QIO_CHANNEL(t->sioc), &iov, 1, &fds, &nfds,
                               0, &err);
    n = channel_done(t, n, err);
    if (n < 0) {
        return errno == EAGAIN ? 0 : -1;
    }
    for (i = 0; i < nfds; i++) {
        if (t->n_control_fds < NIU_LINK_CONTROL_FDS) {
            t->control_fds[t->n_control_fds++] = fds[i];
        } else {
            close(fds[i]);
            *broken = "more descriptors than direct-ring frames";
        }
    }
    if (*broken) {
        return -2;
    }
    if (n == 0) {
        errno = 0;      /* an orderly end */
        return -1;
    }
    t->control_len += n;
    return n;
}

/*
 * Under the device lock and rx_lock: the frames niu_link_control_read()
 * gathered, each DIRECT_RING with the oldest descriptor that came; false
 * (with *@broken) when the switch broke the rules.
 */
bool niu_link_control_take(NiuLinkThread *t, const char **broken)
{
    const uint8_t *buf = t->control_buf;
    size_t size = t->control_len;
    bool ok = true;

    if (!t->link->direct) {
        *broken = "bytes on the socket after the rings took over";
        return false;
    }
    if (!t->direct) {
        t->direct = niu_direct_new(t->link);
    }
    while (ok) {
        struct arctic_frame_reader *r = &t->control;
        enum arctic_frame_status st = arctic_frame_read(r, &buf, &size);
        int fd = -1;

        if (st == ARCTIC_FRAME_NEED_MORE) {
            break;
        }
        if (st == ARCTIC_FRAME_MALFORMED ||
            (r->header.type != ARCTIC_FRAME_DIRECT_RING &&
             r->header.type != ARCTIC_FRAME_DIRECT_STOP)) {
            *broken = "bytes on the socket after the rings took over";
            ok = false;
            break;
        }
        if (r->header.type == ARCTIC_FRAME_DIRECT_RING && t->n_control_fds) {
            fd = t->control_fds[0];
            t->n_control_fds--;
            memmove(t->control_fds, t->control_fds + 1,
                    t->n_control_fds * sizeof(int));
        }
        ok = niu_direct_control(t->direct, r->header.type, r->body, fd,
                                broken);
    }
    /* The reader holds a frame split between reads, if any. */
    t->control_len = 0;
    return ok;
}
