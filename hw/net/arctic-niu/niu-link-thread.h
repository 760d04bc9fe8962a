/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU link transport link-socket= (niu-link.h): the link thread's
 * state, shared by the transport's two files and included by nothing else.
 *   niu-link-thread.c  the thread: the connection, its sleep and
 *                      wake-ups, the input it takes or leaves to a
 *                      vCPU, the transport's operations
 *   niu-link-rings.c   what rides beside the socket of a UNIX link: the
 *                      shared-memory rings offered with the HELLO (link
 *                      1.3) and the socket's frames that hand out the
 *                      direct rings (link 1.5); it calls nothing in
 *                      niu-link-thread.c
 * Locking is niu-link-thread.c's (its head comment).
 */
#ifndef HW_NET_ARCTIC_NIU_LINK_THREAD_H
#define HW_NET_ARCTIC_NIU_LINK_THREAD_H

#include "qemu/event_notifier.h"
#include "qemu/futex.h"
#include "qemu/thread.h"
#include "qapi/qapi-types-sockets.h"
#include "io/channel-socket.h"

#include "niu-link.h"         /* before arctic/: QEMU's registerfields */
#include "niu-link-direct.h"
#include "arctic/link-ring.h"

/*
 * Descriptors the socket may bring at once once the rings carry the link:
 * one per DIRECT_RING frame (link 1.5); more is a protocol error.
 */
enum { NIU_LINK_CONTROL_FDS = 16, NIU_LINK_CONTROL_READ = 512 };

/* The shared-memory rings offered with one connection's HELLO. */
typedef struct NiuRings {
    void *area;
    size_t size;
    int area_fd;                /* -1 once it went with the HELLO */
    /*
     * The link's wake-up socket pair: we kick the switch's loop thread
     * through @wake_fd (the switch kicks us through the area: see
     * NiuLinkThread.kick_word); @offer_fd, the switch's end, goes with
     * the HELLO (-1 after).
     */
    int wake_fd;
    int offer_fd;
    struct arctic_ring out;     /* ARCTIC_RING_TO_SWITCH, under the lock */
    struct arctic_ring in;      /* ARCTIC_RING_TO_NIU, under rx_lock */
    /*
     * The WELCOME said CPU_WAKE (and x-link-cpu-wake=on): the switch's
     * thread of our CPU is kicked through the area's counter for it
     * (arctic/link-ring.h).
     */
    bool cpu_wake;
} NiuRings;

struct NiuLinkThread {
    NiuLink *link;
    QemuThread thread;
    char *path;             /* as given, for traces */
    SocketAddress *addr;    /* the switch's: UNIX, or tcp:HOST:PORT */
    uint32_t reconnect_ms;
    EventNotifier wake;
    /*
     * The connection, set and closed under the device lock only: @sioc
     * owns it (connect, descriptor passing, close); the data path reads
     * and writes @fd, its socket, with one call each.
     */
    QIOChannelSocket *sioc;
    int fd;
    bool quit;              /* atomic: the device is going away */
    bool want_out;          /* atomic: the session waits for room */
    bool hold_input;        /* atomic: the session takes no input now */
    /*
     * Atomic: the device's state is saved or loaded (niu_link_pause()):
     * nothing is read, not even the socket's end, until it resumes.
     */
    bool paused;
    int64_t deadline;       /* atomic: CLOCK_MONOTONIC ns of a deferral */
    bool posted;            /* atomic: niu_link_post() work is waiting */
    /*
     * Held from a recv() until its bytes are in the session, so that the
     * thread and a busy-polling vCPU never take the stream out of order;
     * taken before the device lock, or tried under it
     * (thread_poll_input()).
     */
    QemuMutex rx_lock;
    uint8_t *poll_buf;      /* thread_poll_input()'s, under rx_lock */
    /*
     * Input read as the device paused (the pause came between the
     * decision to read and the device lock): it waits here, under the
     * device lock, for the resume, which hands it on before anything read
     * later.  @held_due (atomic) also says direct-ring frames wait in
     * control_buf.
     */
    GByteArray *held;
    bool held_due;
    /*
     * After a vCPU busy-polled the link, the thread leaves the input to
     * it this long (ns, x-link-busy-poll-ns), instead of being woken for
     * every packet only to find the socket read.
     */
    uint64_t busy_poll_ns;
    int64_t polled_until;   /* atomic: a vCPU busy-polls until then */
    bool connect_failed;    /* the last attempt failed (for traces) */
    bool rings_wanted;      /* link-rings=on, and a UNIX socket */
    NiuRings *rings;        /* offered with this connection's HELLO */
    bool rings_offer;       /* the next write carries the offer */
    bool rings_on;          /* atomic: the WELCOME took the rings */
    bool kick_yield;        /* x-link-kick-yield: niu-link-rings.c */
    bool cpu_wake;          /* x-link-cpu-wake: take per-CPU wake-ups */
    bool in_poll;           /* under the lock: a busy poll hands input up */
    /*
     * With the rings on, the thread sleeps on futexes (futex_waitv): this
     * word, which the device's other threads raise to kick it, and the
     * switch's kick counter in the area (arctic/link-ring.h); without,
     * in poll(), on @wake and the socket.
     */
    uint32_t kick_word;
    bool fd_shut;           /* atomic: the device dropped the link */
    /*
     * Atomic: a timed link is up (link 1.4): the device's vCPU reads the
     * input at instants of virtual time (thread_read_input(),
     * thread_wait_input()); the thread watches only the socket's end.
     */
    bool timed_reader;
    int64_t socket_looked;  /* with the rings: when the socket was */
    /*
     * With the rings: looks in a row that the look's own timeout ended
     * and that found nothing; the next look waits 2^idle_looks times as
     * long (at most NIU_LINK_THREAD_IDLE_SHIFT doublings).
     */
    unsigned idle_looks;
    bool rings_asleep;      /* the thread sleeps on the futexes now */
    /*
     * Link 1.5: the direct rings of this connection (its WELCOME said
     * DIRECT), and the frames the switch sends on the socket to hand
     * them out, with their descriptors, under rx_lock.
     */
    NiuDirectRings *direct;
    struct arctic_frame_reader control;
    uint8_t control_buf[NIU_LINK_CONTROL_READ];
    size_t control_len;
    int control_fds[NIU_LINK_CONTROL_FDS];
    unsigned n_control_fds;
};

/* Wake the thread: through its futex word with the rings on, else @wake. */
static inline void niu_link_thread_kick(NiuLinkThread *t)
{
    if (qatomic_read(&t->rings_on)) {
        qatomic_inc(&t->kick_word);
        qemu_futex_wake(&t->kick_word, INT_MAX);
    } else {
        event_notifier_set(&t->wake);
    }
}

/* niu-link-rings.c: the shared-memory rings */
NiuRings *niu_link_rings_new(NiuLinkThread *t);
void niu_link_rings_free(NiuRings *r);
void niu_link_rings_adopt_cpu_wake(NiuLinkThread *t, bool offered);
ssize_t niu_link_rings_send_offer(NiuLinkThread *t, const uint8_t *buf,
                                  size_t len);
size_t niu_link_rings_write(NiuLinkThread *t, const uint8_t *buf,
                            size_t len);
size_t niu_link_rings_read(NiuLinkThread *t, uint8_t *buf, size_t max);

/* niu-link-rings.c: the socket's frames that hand out direct rings */
void niu_link_control_reset(NiuLinkThread *t);
ssize_t niu_link_control_read(NiuLinkThread *t, const char **broken);
bool niu_link_control_take(NiuLinkThread *t, const char **broken);

#endif /* HW_NET_ARCTIC_NIU_LINK_THREAD_H */
