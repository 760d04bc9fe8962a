/* SPDX-License-Identifier: MIT */
/*
 * The switch's ports: the NIU link of each, both directions.  A connection
 * reads frames (arctic/link.h's reader), answers the handshake, takes a
 * credit for each PACKET it hands up and gives it back when the router
 * frees the buffer, and writes PACKET and CREDIT frames into one output
 * buffer that leaves in one send() per loop batch, so system calls are
 * amortised over many packets.  A connection that breaks the link protocol
 * is closed after what was queued for it is flushed; it never disturbs
 * other ports.  What a port learns it reports upward through
 * sw->port_ops (router.c, or timed.c) and sw->hooks (direct.c); it knows
 * nothing of routes or routers.
 *
 * An NIU on this host may offer shared-memory rings with its HELLO
 * (arctic/link-ring.h): the port checks the area and the eventfds, answers
 * a WELCOME that says RINGS, and from then on reads and writes the same
 * frames through the rings, with no system call while both sides are
 * awake.  The loop asks the port before it sleeps (sw_port_may_sleep());
 * each batch reads every ring (sw_port_read_rings()).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <limits.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib-unix.h>

#include "switch-internal.h"

static void conn_ready(ArcticSwitch *sw, void *object, uint32_t events);
static void conn_parse(ArcticSwitch *sw, struct sw_conn *conn,
                       const uint8_t *data, size_t len);

/* --- connection output ------------------------------------------------ */

static bool conn_output_room(const struct sw_conn *conn, size_t bytes)
{
    return conn && conn->state == SW_CONN_LIVE &&
           SW_CONN_OUTPUT_BUFFER - (conn->output_end - conn->output_start) >=
           bytes;
}

/*
 * Bytes written to @conn's NIU that it has not read: those in our output
 * buffer and those its socket holds (SIOCOUTQ: on a UNIX socket the
 * memory of what the peer has not taken, a few hundred bytes per write
 * whatever its size; on TCP the bytes it has not acknowledged).  0 means
 * the NIU has read everything.
 */
static size_t conn_unread(const struct sw_conn *conn)
{
    int queued = 0;

    if (conn->rings) {
        queued = conn->rings->out.size - arctic_ring_room(&conn->rings->out);
    } else if (ioctl(conn->fd, SIOCOUTQ, &queued) < 0) {
        queued = 0;
    }
    return conn->output_end - conn->output_start + MAX(queued, 0);
}

/* Caller checked the room (or is writing a handshake reply into an
 * empty buffer). */
static uint8_t *conn_output_reserve(struct sw_conn *conn, size_t bytes)
{
    uint8_t *p;

    if (!conn->output) {
        /* Only a connection that says something needs one (a flood of
         * silent ones costs no buffers). */
        conn->output = g_malloc(SW_CONN_OUTPUT_BUFFER);
    }
    if (conn->output_end + bytes > SW_CONN_OUTPUT_BUFFER) {
        memmove(conn->output, conn->output + conn->output_start,
                conn->output_end - conn->output_start);
        conn->output_end -= conn->output_start;
        conn->output_start = 0;
    }
    g_assert(conn->output_end + bytes <= SW_CONN_OUTPUT_BUFFER);
    p = conn->output + conn->output_end;
    conn->output_end += bytes;
    return p;
}

static void conn_queue_flush(ArcticSwitch *sw, struct sw_conn *conn)
{
    if (conn && !conn->flush_queued && conn->state != SW_CONN_CLOSING) {
        conn->flush_queued = true;
        conn->next_flush = sw->flush_list;
        sw->flush_list = conn;
    }
}

static void conn_poll_out(ArcticSwitch *sw, struct sw_conn *conn, bool on)
{
    if (conn->polling_out != on) {
        conn->polling_out = on;
        sw_loop_rewatch(sw, conn->fd, &conn->watch,
                        EPOLLIN | (on ? EPOLLOUT : 0));
    }
}

/*
 * Kick the NIU: its counter in the area, and a FUTEX_WAKE of every waiter
 * (arctic/link-ring.h), which nothing the NIU does can block.
 */
static void rings_kick_niu(struct sw_rings *r)
{
    struct arctic_ring_area *area = r->area;

    __atomic_fetch_add(&area->kicks.niu, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &area->kicks.niu, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/*
 * A frame went on @conn's socket that its NIU reads when it looks (a
 * direct ring handed out or taken back): kick it, so that an NIU whose
 * idle looks backed off reads it now.
 */
void sw_conn_kick_niu(struct sw_conn *conn)
{
    if (conn->rings) {
        rings_kick_niu(conn->rings);
    }
}

/*
 * The NIU took back a sleep or wait flag the switch had set: that allows
 * it one kick.  What it allows is bounded, so that a link cannot save up
 * its allowance while busy and flood the switch with it later.
 */
static void rings_invite(struct sw_rings *r)
{
    r->invited = MIN(r->invited + 1, r->kicks + SW_KICK_SLACK);
}

/* The switch looks at @r's ring out again: was its wait flag taken? */
static void rings_wait_over(struct sw_rings *r)
{
    if (r->wait_set && arctic_ring_producer_awake_taken(&r->out)) {
        rings_invite(r);
    }
    r->wait_set = false;
}

/*
 * Copy what is queued into the NIU's ring, kicking it if it sleeps; when
 * the ring is full, say so in it and wait for the NIU's kick.  False if
 * the ring is broken.
 */
static bool conn_send_ring(struct sw_conn *conn)
{
    struct sw_rings *r = conn->rings;

    rings_wait_over(r);
    while (conn->output_start < conn->output_end) {
        size_t n = arctic_ring_write(&r->out,
                                     conn->output + conn->output_start,
                                     conn->output_end - conn->output_start);

        if (n == ARCTIC_RING_BROKEN) {
            conn->send_failure = ARCTIC_DISCONNECT_BROKEN_RING;
            return false;
        }
        if (n) {
            conn->output_start += n;
            if (arctic_ring_wake_consumer(&r->out)) {
                rings_kick_niu(r);
            }
        } else if (arctic_ring_producer_wait(&r->out, 1)) {
            r->wait_set = true;
            conn->waiting_room = true;
            return true;
        }
    }
    conn->output_start = conn->output_end = 0;
    conn->waiting_room = false;
    return true;
}

/* Write what is queued; false if the connection failed (send_failure). */
static bool conn_send(ArcticSwitch *sw, struct sw_conn *conn)
{
    conn->send_failure = ARCTIC_DISCONNECT_IO_ERROR;
    if (conn->rings) {
        return conn_send_ring(conn);
    }
    while (conn->output_start < conn->output_end) {
        ssize_t n = send(conn->fd, conn->output + conn->output_start,
                         conn->output_end - conn->output_start,
                         MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n > 0) {
            conn->output_start += n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            conn_poll_out(sw, conn, true);
            return true;
        } else {
            return false;
        }
    }
    conn->output_start = conn->output_end = 0;
    conn_poll_out(sw, conn, false);
    return true;
}

/*
 * Freed credits go back with frames going to the NIU anyway, or alone
 * once half a priority's window waits for them or the credit delay has
 * passed: a CREDIT frame alone per packet would wake the NIU's link once
 * more per packet it sends.
 */
static bool credits_go_now(ArcticSwitch *sw, struct sw_conn *conn,
                           struct sw_link *link)
{
    unsigned p;

    if (!sw->config.credit_delay_us || conn->output_end > conn->output_start ||
        (link->credit_due_ns && link->credit_due_ns <= sw->now_ns)) {
        return true;
    }
    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        if (link->credit_return_pending[p] * 2 >= sw->config.credits) {
            return true;
        }
    }
    if (!link->credit_due_ns) {
        link->credit_due_ns = sw->now_ns +
                              sw->config.credit_delay_us * 1000ull;
        sw_arm_timer(sw, link->credit_due_ns);
    }
    return false;
}

/* Append a CREDIT frame for the buffers freed since the last one. */
static void conn_return_credits(ArcticSwitch *sw, struct sw_conn *conn)
{
    struct sw_link *link;
    uint8_t *frame;
    unsigned low, high;

    if (conn->state != SW_CONN_LIVE) {
        return;
    }
    link = &sw->port[conn->port].link;
    low = link->credit_return_pending[ARCTIC_PRIORITY_LOW];
    high = link->credit_return_pending[ARCTIC_PRIORITY_HIGH];
    if ((!low && !high) || !conn_output_room(conn, SW_CREDIT_FRAME) ||
        !credits_go_now(sw, conn, link)) {
        return;
    }
    link->credit_due_ns = 0;
    frame = conn_output_reserve(conn, SW_CREDIT_FRAME);
    arctic_frame_header_encode(frame, ARCTIC_FRAME_CREDIT, ARCTIC_CREDIT_SIZE);
    arctic_put_le16(frame + ARCTIC_LINK_HEADER_SIZE, low);
    arctic_put_le16(frame + ARCTIC_LINK_HEADER_SIZE + 2, high);
    link->ingress_credits[ARCTIC_PRIORITY_LOW] += low;
    link->ingress_credits[ARCTIC_PRIORITY_HIGH] += high;
    link->credit_return_pending[ARCTIC_PRIORITY_LOW] = 0;
    link->credit_return_pending[ARCTIC_PRIORITY_HIGH] = 0;
}

/*
 * Write every connection's queued output (with the credits it may carry);
 * a port whose output buffer had no room for another packet and has now
 * is reported ready.
 */
void sw_port_flush(ArcticSwitch *sw)
{
    struct sw_conn *conn;

    while ((conn = sw->flush_list)) {
        bool was_full;

        sw->flush_list = conn->next_flush;
        conn->flush_queued = false;
        if (conn->state == SW_CONN_CLOSING) {
            continue;
        }
        conn_return_credits(sw, conn);
        was_full = !conn_output_room(conn, SW_PACKET_FRAME_MAX +
                                              SW_CREDIT_FRAME);
        if (!conn_send(sw, conn)) {
            sw_conn_close(sw, conn, conn->send_failure);
            continue;
        }
        /* Room came back without an EPOLLOUT to announce it. */
        if (was_full && conn->state == SW_CONN_LIVE &&
            conn_output_room(conn, SW_PACKET_FRAME_MAX +
                                      SW_CREDIT_FRAME)) {
            sw->port_ops->ready(sw, conn->port);
        }
    }
}

/* --- shared-memory rings ---------------------------------------------- */

static void close_offered(struct sw_conn *conn)
{
    unsigned i;

    for (i = 0; i < conn->offered; i++) {
        close(conn->offered_fds[i]);
    }
    conn->offered = 0;
}

static void ring_woken(ArcticSwitch *sw, void *object, uint32_t events);

/*
 * Every CPU thread's set of kick counters anew, after a link joined, left,
 * or was muted or heard again.
 */
static void rings_cpu_sets_changed(ArcticSwitch *sw)
{
    unsigned cpu;

    for (cpu = 0; cpu < sw_loop_cpu_wakers(sw); cpu++) {
        sw_port_cpu_wait(sw, cpu);
    }
}

/*
 * Listen to @r's kicks, or stop: its wake-up socket in the loop's set and,
 * with CPU_WAKE, its kick counters in the CPU threads' sets.
 */
static void rings_watch(ArcticSwitch *sw, struct sw_rings *r, bool on)
{
    if (r->watched == on) {
        return;
    }
    r->watched = on;
    if (on) {
        sw_loop_watch(sw, r->wake_fd, &r->watch.watch, EPOLLIN);
    } else {
        sw_loop_unwatch(sw, r->wake_fd);
    }
    if (r->cpu_wake) {
        rings_cpu_sets_changed(sw);
    }
}

/*
 * Let go of rings, adopted or in use: out of the sets, unmapped, every
 * descriptor closed.  The structure itself stays for the caller to free:
 * events taken before the model lock may still name its watch.
 */
static void rings_release(ArcticSwitch *sw, struct sw_rings *r)
{
    if (!r || !r->area) {
        return;
    }
    rings_watch(sw, r, false);
    if (r->cpu_wake) {
        sw->cpu_wake_links--;
        r->cpu_wake = false;
    }
    munmap(r->area, r->area_size);
    r->area = NULL;
    close(r->wake_fd);
}

/* Rings that were never watched: released and freed at once. */
static void rings_free(ArcticSwitch *sw, struct sw_rings *r)
{
    rings_release(sw, r);
    g_free(r);
}

static void rings_mute(ArcticSwitch *sw, struct sw_conn *conn);

/*
 * CPU @cpu's thread gets the kick counters of every link it serves, with
 * their values now (sw_loop_cpu_wait_on()).  What each counter rose by
 * since it was last looked at is that link's kicks, counted against what
 * the switch asked for; a counter that woke the thread without rising is
 * a bare wake-up, counted against the link's kicks: a link far beyond
 * either is muted, and left out.
 */
void sw_port_cpu_wait(ArcticSwitch *sw, unsigned cpu)
{
    uint32_t *words[SW_CPU_WAIT_MAX];
    uint32_t *woken_by = sw_loop_cpu_woken_by(sw, cpu);
    struct sw_conn *conn;
    unsigned n = 0;

    for (conn = sw->conns; conn; conn = conn->next) {
        struct sw_rings *r = conn->rings;
        struct arctic_ring_area *area;
        uint32_t now;

        if (!r || !r->cpu_wake || !r->watched ||
            conn->state != SW_CONN_LIVE) {
            continue;
        }
        area = r->area;
        now = __atomic_load_n(&area->kicks.cpu[cpu], __ATOMIC_ACQUIRE);
        r->bare_wakes += woken_by == &area->kicks.cpu[cpu] &&
                         now == r->cpu_seen[cpu];
        r->kicks += (uint32_t)(now - r->cpu_seen[cpu]);
        r->cpu_seen[cpu] = now;
        if (r->kicks > r->invited + SW_KICK_SLACK ||
            r->bare_wakes > r->kicks + SW_KICK_SLACK) {
            rings_mute(sw, conn);       /* leaves the other sets too */
            continue;
        }
        g_assert(n < SW_CPU_WAIT_MAX - 1);
        words[n++] = &area->kicks.cpu[cpu];
    }
    sw_loop_cpu_wait_on(sw, cpu, words, n);
}

/*
 * Take the rings @conn's HELLO offered: a memfd sealed against shrinking
 * (so that the NIU cannot take pages from under us) holding a valid area,
 * and the switch's end of the link's wake-up socket pair.  NULL, with the
 * reason in *@why, if they will not do; the NIU then stays on its socket.
 */
static struct sw_rings *rings_adopt(struct sw_conn *conn, const char **why)
{
    int area_fd = conn->offered_fds[ARCTIC_RING_FD_AREA];
    int wake_fd = conn->offered_fds[ARCTIC_RING_FD_WAKE];
    struct sw_rings *r;
    struct stat st;
    uint32_t data_size;
    void *area;
    int seals;

    if (conn->hello_minor < 3) {
        /* 1.1 and 1.2 kick eventfds, which either side can block. */
        *why = "the NIU speaks link 1.2 or older (shared eventfds)";
        return NULL;
    }
    if (conn->offered != ARCTIC_RING_FDS) {
        *why = "HELLO carried the wrong number of descriptors";
        return NULL;
    }
    seals = fcntl(area_fd, F_GET_SEALS);
    if (fstat(area_fd, &st) < 0 || !S_ISREG(st.st_mode) || seals < 0 ||
        !(seals & F_SEAL_SHRINK)) {
        *why = "the ring area is not a memfd sealed against shrinking";
        return NULL;
    }
    if (!sw_is_wake_socket(wake_fd)) {
        *why = "the wake-up descriptor is not a UNIX stream socket";
        return NULL;
    }
    area = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                area_fd, 0);
    if (area == MAP_FAILED) {
        *why = "the ring area cannot be mapped";
        return NULL;
    }
    if (!arctic_ring_area_check(area, st.st_size, &data_size)) {
        munmap(area, st.st_size);
        *why = "the ring area's header is not one this switch knows";
        return NULL;
    }
    r = g_new0(struct sw_rings, 1);
    r->area = area;
    r->area_size = st.st_size;
    arctic_ring_attach(&r->in, area, data_size, ARCTIC_RING_TO_SWITCH);
    arctic_ring_attach(&r->out, area, data_size, ARCTIC_RING_TO_NIU);
    r->wake_fd = wake_fd;
    r->watch.watch.ready = ring_woken;
    r->watch.watch.object = &r->watch;
    r->watch.conn = conn;
    r->watch.fd = wake_fd;
    close(area_fd);             /* the mapping keeps the memory */
    conn->offered = 0;
    return r;
}

/* A kick may say room: output that waited for it goes. */
static void ring_room(ArcticSwitch *sw, struct sw_conn *conn)
{
    if (conn->waiting_room) {
        conn_queue_flush(sw, conn);
        if (conn->state == SW_CONN_LIVE) {
            sw->port_ops->ready(sw, conn->port);
        }
    }
}

/*
 * The NIU sent more kicks than the switch asked for: its wake-up sockets
 * are ignored for a while (the periodic look still reads its ring), so
 * that a flood of kicks costs the switch little more than the flooder.
 */
static void rings_mute(ArcticSwitch *sw, struct sw_conn *conn)
{
    struct sw_rings *r = conn->rings;

    sw_log(sw, "port %d: %" G_GUINT64_FORMAT " kicks, %" G_GUINT64_FORMAT
           " asked for, %" G_GUINT64_FORMAT " bare wake-ups: its "
           "wake-ups are ignored for %d ms", conn->port, r->kicks,
           r->invited, r->bare_wakes, SW_KICK_MUTE_MS);
    sw->port[conn->port].stats.kick_floods++;
    rings_watch(sw, r, false);
    r->muted_until_ns = sw->now_ns + SW_KICK_MUTE_MS * 1000000ull;
    sw_arm_timer(sw, r->muted_until_ns);
}

/*
 * The link's wake-up socket was kicked: its ring has bytes, or ours has
 * room again.  The bytes are read with every ring's after the batch.
 */
static void ring_woken(ArcticSwitch *sw, void *object, uint32_t events)
{
    struct sw_wake_watch *w = object;
    struct sw_conn *conn = w->conn;
    struct sw_rings *r = conn->rings;
    int kicks;

    if (conn->state == SW_CONN_CLOSING || !r) {
        return;
    }
    kicks = sw_drain(w->fd);
    if (kicks < 0) {
        /*
         * The NIU closed its end: its link is going, and its socket says
         * so too.  Until then the periodic look reads its ring; a socket
         * that says "end" for ever must not wake the switch for ever.
         */
        rings_watch(sw, r, false);
        return;
    }
    r->kicks += kicks;
    if (conn->state == SW_CONN_LIVE && r->kicks > r->invited + SW_KICK_SLACK) {
        rings_mute(sw, conn);
    }
    ring_room(sw, conn);
}

/*
 * A per-CPU wake-up thread was kicked (loop.c): it does not say by which
 * NIU, so every ring that waits for room is tried, as ring_woken() tries
 * one; the bytes are read with every ring's after it.
 */
void sw_port_rings_kicked(ArcticSwitch *sw)
{
    struct sw_conn *conn, *next;

    for (conn = sw->conns; conn; conn = next) {
        next = conn->next;
        if (conn->rings && conn->state != SW_CONN_CLOSING) {
            ring_room(sw, conn);
        }
    }
}

/*
 * What @conn's NIU put in its ring goes through the frame reader: one
 * read of at most SW_CONN_INPUT_BUFFER bytes per pass, as a socket gets
 * one recv() per event, so that a ring that is always full cannot take
 * the switch from the others (sw_port_may_sleep() sends the loop round
 * again for what is left).
 */
static void ring_input(ArcticSwitch *sw, struct sw_conn *conn)
{
    struct sw_rings *r = conn->rings;
    size_t n;

    if (conn->state != SW_CONN_LIVE) {
        return;     /* closed meanwhile: its area is gone */
    }
    if (arctic_ring_consumer_awake_taken(&r->in) && r->sleep_set) {
        rings_invite(r);
    }
    r->sleep_set = false;
    n = arctic_ring_read(&r->in, sw->read_buf, SW_CONN_INPUT_BUFFER);
    if (n == ARCTIC_RING_BROKEN) {
        sw_log(sw, "port %d: its ring's indices are impossible", conn->port);
        sw_conn_close(sw, conn, ARCTIC_DISCONNECT_BROKEN_RING);
        return;
    }
    if (!n) {
        return;
    }
    if (arctic_ring_wake_producer(&r->in)) {
        rings_kick_niu(r);
    }
    conn_parse(sw, conn, sw->read_buf, n);
}

/* Each batch: every ring's input (its NIU kicks only a sleeping switch). */
void sw_port_read_rings(ArcticSwitch *sw)
{
    struct sw_conn *conn, *next;

    for (conn = sw->conns; conn; conn = next) {
        next = conn->next;
        if (conn->rings) {
            ring_input(sw, conn);
        }
    }
}

/*
 * Before the loop sleeps: every ring says the switch sleeps, then is
 * looked at a last time.  False if one holds bytes after all.
 */
bool sw_port_may_sleep(ArcticSwitch *sw)
{
    struct sw_conn *conn;

    for (conn = sw->conns; conn; conn = conn->next) {
        if (!conn->rings || conn->state != SW_CONN_LIVE) {
            continue;
        }
        if (!arctic_ring_consumer_sleep(&conn->rings->in)) {
            return false;
        }
        conn->rings->sleep_set = true;
    }
    return true;
}

bool sw_port_uses_rings(const ArcticSwitch *sw, unsigned port_no)
{
    const struct sw_conn *conn = sw->port[port_no].link.conn;

    return conn && conn->rings;
}

/* --- connection lifecycle --------------------------------------------- */

/*
 * Who is at the other end of @fd, to tell a flood's connections from an
 * NIU's: the process on a UNIX socket (SO_PEERCRED), the host over TCP
 * (all of loopback is one); 0 if neither is known.
 */
static uint64_t conn_peer(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    struct sockaddr_storage addr;
    uint64_t halves[2];

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
        cred.pid > 0) {
        return (uint64_t)AF_UNIX << 48 | (uint32_t)cred.pid;
    }
    len = sizeof(addr);
    if (getpeername(fd, (struct sockaddr *)&addr, &len) < 0) {
        return 0;
    }
    if (addr.ss_family == AF_INET) {
        return (uint64_t)AF_INET << 48 |
               ((struct sockaddr_in *)&addr)->sin_addr.s_addr;
    }
    if (addr.ss_family == AF_INET6) {
        /* Folded: a collision only makes two hosts share their fairness. */
        memcpy(halves, &((struct sockaddr_in6 *)&addr)->sin6_addr,
               sizeof(halves));
        return (uint64_t)AF_INET6 << 48 ^ halves[0] ^ halves[1];
    }
    return 0;
}

static bool conn_pending(const struct sw_conn *conn)
{
    return conn->state == SW_CONN_HANDSHAKE || conn->state == SW_CONN_AUTH;
}

/* Between two pending connections of one peer: whether @a goes first. */
static bool evict_before(const struct sw_conn *a, const struct sw_conn *b)
{
    bool a_answering = a->state == SW_CONN_AUTH;
    bool b_answering = b->state == SW_CONN_AUTH;

    if (a_answering != b_answering) {
        return b_answering;
    }
    return a->handshake_deadline_ns < b->handshake_deadline_ns;
}

/*
 * The pending connection to close for a new one, and in *@held how many
 * its peer holds.  It comes from the peer that holds the most: a flood
 * from one process or host pushes out its own connections, never an
 * NIU's, whose one connection may be waiting in the middle of its keyed
 * join (a challenge answered in 5 ms lost to 64 newer connections, at
 * 40 k a second, before).  Of that peer's, the one that has not said a
 * whole HELLO goes before one that answers a challenge, and the oldest
 * first: a real NIU says HELLO at once, so connections that never speak,
 * however often reopened, cannot keep it out.
 */
static struct sw_conn *pending_victim(ArcticSwitch *sw, unsigned *held)
{
    struct sw_conn *pending[SW_MAX_PENDING_CONNECTIONS], *victim = NULL;
    unsigned same[SW_MAX_PENDING_CONNECTIONS];
    struct sw_conn *conn;
    unsigned n = 0, i, j;

    for (conn = sw->conns; conn && n < G_N_ELEMENTS(pending);
         conn = conn->next) {
        if (conn_pending(conn)) {
            pending[n++] = conn;
        }
    }
    /* Each peer counted once, at its first connection: a flood's one
     * peer costs a pass, not one per connection. */
    for (i = 0; i < n; i++) {
        for (j = 0; j < i && pending[j]->peer != pending[i]->peer; j++) {
        }
        if (j < i) {
            same[i] = same[j];
            continue;
        }
        for (same[i] = 1, j = i + 1; j < n; j++) {
            same[i] += pending[j]->peer == pending[i]->peer;
        }
    }
    *held = 0;
    for (i = 0; i < n; i++) {
        if (same[i] > *held ||
            (same[i] == *held && evict_before(pending[i], victim))) {
            victim = pending[i];
            *held = same[i];
        }
    }
    return victim;
}

struct sw_conn *sw_conn_new(ArcticSwitch *sw, int fd)
{
    struct sw_conn *conn;

    if (sw->pending_conns >= SW_MAX_PENDING_CONNECTIONS) {
        /*
         * Make room by closing one (pending_victim()): refusing the new
         * one instead let idle connections, reopened as they time out,
         * lock real NIUs out for ever.
         */
        unsigned held;
        struct sw_conn *victim = pending_victim(sw, &held);

        if (!victim) {
            close(fd);      /* cannot happen: the count says they exist */
            return NULL;
        }
        sw_log(sw, "%d connections without a port: closing one of the %u "
               "of %s %#llx", SW_MAX_PENDING_CONNECTIONS, held,
               victim->peer >> 48 == AF_UNIX ? "process" : "host",
               (unsigned long long)victim->peer & 0xffffffffffffull);
        sw_conn_close(sw, victim, ARCTIC_DISCONNECT_EVICTED);
    }
    conn = g_new0(struct sw_conn, 1);
    conn->watch.ready = conn_ready;
    conn->watch.object = conn;
    conn->fd = fd;
    conn->peer = conn_peer(fd);
    conn->port = -1;
    conn->state = SW_CONN_HANDSHAKE;
    arctic_frame_reader_reset(&conn->reader);
    conn->handshake_deadline_ns = sw_clock_ns() +
        (uint64_t)sw->config.handshake_timeout_ms * 1000000ull;
    conn->next = sw->conns;
    if (sw->conns) {
        sw->conns->prev = conn;
    }
    sw->conns = conn;
    sw->pending_conns++;
    sw_loop_watch(sw, fd, &conn->watch, EPOLLIN);
    sw_arm_timer(sw, conn->handshake_deadline_ns);
    return conn;
}

/*
 * End @conn: flush what was queued (a REJECT, the last credits), then shut
 * the socket down.  The memory goes to a graveyard freed after the current
 * batch of epoll events, which may still name this connection.
 */
void sw_conn_close(ArcticSwitch *sw, struct sw_conn *conn,
                   enum arctic_disconnect_reason reason)
{
    if (conn->state == SW_CONN_CLOSING) {
        return;
    }
    if (conn->output_start < conn->output_end && !conn->rings) {
        (void)send(conn->fd, conn->output + conn->output_start,
                   conn->output_end - conn->output_start,
                   MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    /* Its buffer goes now, not after the batch: a flood's batch closes
     * many. */
    g_clear_pointer(&conn->output, g_free);
    conn->output_start = conn->output_end = 0;
    close_offered(conn);
    if (conn->rings && conn->rings->area) {
        struct arctic_ring_area *area = conn->rings->area;

        /* The NIU, asleep on its counter, looks at the socket now. */
        __atomic_store_n(&area->kicks.closing, 1, __ATOMIC_RELEASE);
        rings_kick_niu(conn->rings);
    }
    /* Freed with the connection, after the batch (its watches). */
    rings_release(sw, conn->rings);
    if (conn->port >= 0) {
        struct sw_port *port = &sw->port[conn->port];
        struct sw_link *link = &port->link;
        unsigned prio;

        port->stats.disconnects[reason]++;
        link->conn = NULL;
        sw_log(sw, "port %d disconnected (%s)", conn->port,
               arctic_disconnect_reason_name(reason));
        conn->state = SW_CONN_CLOSING;
        /* The credits go with the connection; its packets stay held. */
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            link->egress_credits[prio] = 0;
            link->ingress_credits[prio] = 0;
            link->credit_return_pending[prio] = 0;
        }
        link->credit_due_ns = 0;
        /* Its direct rings go: the other ends are told. */
        if (sw->hooks.port_down) {
            sw->hooks.port_down(sw, conn->port);
        }
        sw->port_ops->detached(sw, conn->port);
    } else {
        sw->unattached_disconnects[reason]++;
        sw->pending_conns--;
        sw_log(sw, "connection closed before HELLO was accepted (%s)",
               arctic_disconnect_reason_name(reason));
    }
    conn->state = SW_CONN_CLOSING;
    sw_loop_unwatch(sw, conn->fd);
    shutdown(conn->fd, SHUT_RDWR);
    close(conn->fd);
    conn->fd = -1;
    if (conn->prev) {
        conn->prev->next = conn->next;
    } else {
        sw->conns = conn->next;
    }
    if (conn->next) {
        conn->next->prev = conn->prev;
    }
    conn->next = sw->graveyard;
    sw->graveyard = conn;
}

void sw_port_close_all(ArcticSwitch *sw)
{
    while (sw->conns) {
        sw_conn_close(sw, sw->conns, ARCTIC_DISCONNECT_SHUTDOWN);
    }
    sw_port_bury_closed(sw);
}

/* Free the connections closed during the batch of events just served. */
void sw_port_bury_closed(ArcticSwitch *sw)
{
    struct sw_conn *conn;

    while ((conn = sw->graveyard)) {
        sw->graveyard = conn->next;
        g_free(conn->rings);
        g_free(conn->output);
        g_free(conn);
    }
}

/* --- handshake -------------------------------------------------------- */

static void send_reject(struct sw_conn *conn, enum arctic_reject_reason reason,
                        const char *text)
{
    uint8_t *frame;

    conn->output_start = conn->output_end = 0;
    frame = conn_output_reserve(conn, ARCTIC_LINK_HEADER_SIZE +
                                         ARCTIC_REJECT_SIZE);
    memset(frame, 0, ARCTIC_LINK_HEADER_SIZE + ARCTIC_REJECT_SIZE);
    arctic_frame_header_encode(frame, ARCTIC_FRAME_REJECT, ARCTIC_REJECT_SIZE);
    arctic_put_le32(frame + ARCTIC_LINK_HEADER_SIZE, reason);
    strncpy((char *)frame + ARCTIC_LINK_HEADER_SIZE + 4, text,
            ARCTIC_LINK_REJECT_TEXT_SIZE - 1);
}

/* Is the connection holding a port really alive?  A restarted QEMU's new
 * HELLO may be read before the old socket's end of file. */
static bool conn_still_alive(struct sw_conn *conn)
{
    char byte;
    ssize_t n = recv(conn->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);

    if (n > 0) {
        return true;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
                     errno == EINTR);
}

static void reject(ArcticSwitch *sw, struct sw_conn *conn,
                   enum arctic_reject_reason reason,
                   enum arctic_disconnect_reason why, const char *fmt, ...)
    G_GNUC_PRINTF(5, 6);

static void reject(ArcticSwitch *sw, struct sw_conn *conn,
                   enum arctic_reject_reason reason,
                   enum arctic_disconnect_reason why, const char *fmt, ...)
{
    g_autofree char *text = NULL;
    va_list ap;

    va_start(ap, fmt);
    text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    sw_log(sw, "rejecting HELLO: %s", text);
    send_reject(conn, reason, text);
    sw_conn_close(sw, conn, why);
}

/*
 * The rings @conn's HELLO offered, if the switch takes rings and they will
 * do; NULL otherwise (the link stays on the socket).  Either way the
 * descriptors are the switch's business no longer.
 */
static struct sw_rings *welcome_rings(ArcticSwitch *sw, struct sw_conn *conn)
{
    struct sw_rings *rings = NULL;
    const char *why = "the switch runs with --no-rings";

    if (!conn->offered) {
        return NULL;
    }
    if (sw->config.rings) {
        rings = rings_adopt(conn, &why);
    }
    if (!rings) {
        sw_log(sw, "port %d: shared-memory rings refused: %s", conn->port,
               why);
    }
    close_offered(conn);
    return rings;
}

/* --- authentication (arctic/link.h, link 1.3) ------------------------ */

static void accept_hello(ArcticSwitch *sw, struct sw_conn *conn,
                         const uint8_t *body);

/* HMAC-SHA256 with the cluster's key of arctic_auth_message()'s bytes. */
static void auth_mac(ArcticSwitch *sw, enum arctic_auth_role role,
                     const uint8_t *their_nonce, const uint8_t *our_nonce,
                     const uint8_t *hello_body,
                     uint8_t mac[ARCTIC_AUTH_MAC_SIZE])
{
    uint8_t message[ARCTIC_AUTH_MESSAGE_SIZE];
    unsigned len = arctic_auth_message(message, role, their_nonce, our_nonce,
                                       hello_body);
    gsize key_len, mac_len = ARCTIC_AUTH_MAC_SIZE;
    const uint8_t *key = g_bytes_get_data(sw->secret, &key_len);
    GHmac *hmac = g_hmac_new(G_CHECKSUM_SHA256, key, key_len);

    g_hmac_update(hmac, message, len);
    g_hmac_get_digest(hmac, mac, &mac_len);
    g_hmac_unref(hmac);
}

/*
 * A switch with a secret answers a good HELLO with a fresh nonce and
 * waits for the NIU's proof (the handshake timeout still runs).
 */
static void auth_challenge(ArcticSwitch *sw, struct sw_conn *conn,
                           const struct arctic_hello *hello,
                           const uint8_t *body)
{
    uint8_t *frame;

    if (hello->version_minor < 3) {
        reject(sw, conn, ARCTIC_REJECT_AUTH, ARCTIC_DISCONNECT_REJECTED,
               "this switch wants a secret: link 1.3 or later");
        return;
    }
    if (getrandom(conn->nonce, sizeof(conn->nonce), 0) !=
        sizeof(conn->nonce)) {
        reject(sw, conn, ARCTIC_REJECT_AUTH, ARCTIC_DISCONNECT_REJECTED,
               "the switch has no randomness for a challenge");
        return;
    }
    memcpy(conn->hello_body, body, ARCTIC_HELLO_SIZE);
    frame = conn_output_reserve(conn, ARCTIC_LINK_HEADER_SIZE +
                                         ARCTIC_AUTH_CHALLENGE_SIZE);
    arctic_frame_header_encode(frame, ARCTIC_FRAME_AUTH_CHALLENGE,
                               ARCTIC_AUTH_CHALLENGE_SIZE);
    memcpy(frame + ARCTIC_LINK_HEADER_SIZE, conn->nonce,
           ARCTIC_AUTH_CHALLENGE_SIZE);
    conn->state = SW_CONN_AUTH;
    conn_queue_flush(sw, conn);
}

/*
 * The NIU's answer: its MAC of our nonce, its nonce and its HELLO must be
 * the one the key gives; then the switch proves the key in turn and
 * takes the HELLO.
 */
static void auth_response(ArcticSwitch *sw, struct sw_conn *conn,
                          const uint8_t *body)
{
    const uint8_t *niu_nonce = body;
    uint8_t want[ARCTIC_AUTH_MAC_SIZE];
    uint8_t *frame;

    auth_mac(sw, ARCTIC_AUTH_NIU, conn->nonce, niu_nonce, conn->hello_body,
             want);
    if (!arctic_auth_mac_equal(want, body + ARCTIC_AUTH_NONCE_SIZE)) {
        sw->auth_failures++;
        reject(sw, conn, ARCTIC_REJECT_AUTH, ARCTIC_DISCONNECT_REJECTED,
               "the NIU did not prove it knows the cluster's secret");
        return;
    }
    frame = conn_output_reserve(conn, ARCTIC_LINK_HEADER_SIZE +
                                         ARCTIC_AUTH_PROOF_SIZE);
    arctic_frame_header_encode(frame, ARCTIC_FRAME_AUTH_PROOF,
                               ARCTIC_AUTH_PROOF_SIZE);
    auth_mac(sw, ARCTIC_AUTH_SWITCH, niu_nonce, conn->nonce,
             conn->hello_body, frame + ARCTIC_LINK_HEADER_SIZE);
    conn->state = SW_CONN_HANDSHAKE;
    accept_hello(sw, conn, conn->hello_body);
}

static void handle_hello(ArcticSwitch *sw, struct sw_conn *conn,
                         uint16_t flags, const uint8_t *body)
{
    struct arctic_hello hello;
    unsigned prio;

    arctic_hello_decode(body, &hello);
    conn->hello_flags = flags;
    if (hello.magic != ARCTIC_LINK_MAGIC) {
        reject(sw, conn, ARCTIC_REJECT_MALFORMED, ARCTIC_DISCONNECT_REJECTED,
               "bad magic 0x%08x", hello.magic);
        return;
    }
    if (hello.version_major != ARCTIC_LINK_VERSION_MAJOR) {
        reject(sw, conn, ARCTIC_REJECT_VERSION, ARCTIC_DISCONNECT_REJECTED,
               "link version %u.%u, switch speaks %d.%d",
               hello.version_major, hello.version_minor,
               ARCTIC_LINK_VERSION_MAJOR, ARCTIC_LINK_VERSION_MINOR);
        return;
    }
    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        /* 0 is fine: an NIU may grant its credits later. */
        if (hello.credits[prio] > ARCTIC_LINK_MAX_CREDITS) {
            reject(sw, conn, ARCTIC_REJECT_MALFORMED,
                   ARCTIC_DISCONNECT_REJECTED,
                   "%u credits at priority %u: want 0..%d",
                   hello.credits[prio], prio, ARCTIC_LINK_MAX_CREDITS);
            return;
        }
    }
    if (hello.node_id >= sw->ports) {
        reject(sw, conn, ARCTIC_REJECT_BAD_NODE, ARCTIC_DISCONNECT_REJECTED,
               "node %u: the switch has ports 0..%u", hello.node_id,
               sw->ports - 1);
        return;
    }
    if (ARCTIC_FIELD_GET(ARCTIC_HELLO_FLAGS, TIMED, flags) !=
        sw->config.timed) {
        reject(sw, conn, ARCTIC_REJECT_TIMING, ARCTIC_DISCONNECT_REJECTED,
               sw->config.timed ? "this switch keeps virtual time: give "
                                  "the NIU timed=on"
                                : "a timed NIU needs arctic-switch --timed");
        return;
    }
    if (sw->secret) {
        auth_challenge(sw, conn, &hello, body);
        return;
    }
    accept_hello(sw, conn, body);
}

/*
 * Whether @hello's node may take its port: refused (the owner's rule, or
 * a live connection holds it) with a REJECT, and true; or false, with any
 * dead connection on the port closed.
 */
static bool hello_refused(ArcticSwitch *sw, struct sw_conn *conn,
                          const struct arctic_hello *hello)
{
    struct sw_link *link = &sw->port[hello->node_id].link;
    const char *refused;

    refused = sw->port_ops->refuses ? sw->port_ops->refuses(sw, hello->node_id)
                                    : NULL;
    if (refused) {
        reject(sw, conn, ARCTIC_REJECT_TIMING, ARCTIC_DISCONNECT_REJECTED,
               "node %u: %s", hello->node_id, refused);
        return true;
    }
    if (link->conn && conn_still_alive(link->conn)) {
        reject(sw, conn, ARCTIC_REJECT_NODE_BUSY, ARCTIC_DISCONNECT_REJECTED,
               "node %u is held by a live connection", hello->node_id);
        return true;
    }
    if (link->conn) {
        sw_conn_close(sw, link->conn, ARCTIC_DISCONNECT_PEER_CLOSED);
    }
    return false;
}

/* @conn takes its port's link: live, its credits set, and @welcome's. */
static void link_take(ArcticSwitch *sw, struct sw_conn *conn,
                      const struct arctic_hello *hello,
                      struct arctic_welcome *welcome)
{
    struct sw_port *port = &sw->port[hello->node_id];
    struct sw_link *link = &port->link;
    unsigned prio;

    sw->pending_conns--;
    conn->port = hello->node_id;
    conn->hello_minor = hello->version_minor;
    conn->state = SW_CONN_LIVE;
    link->conn = conn;
    port->stats.connects++;
    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        link->egress_credits[prio] = hello->credits[prio];
        /*
         * Packets of an earlier connection may still hold buffers: their
         * credits come back by CREDIT frames as they drain.
         */
        link->ingress_credits[prio] = sw->config.credits -
                                      link->ingress_held[prio];
        link->credit_return_pending[prio] = 0;
        /* A timed link has no credits (arctic/link.h). */
        welcome->credits[prio] = sw->config.timed ? 0
                                                  : link->ingress_credits[prio];
    }
    link->credit_due_ns = 0;
    link->last_frame_ns = sw->now_ns;     /* its HELLO */
    link->last_credit_ns = 0;
    welcome->magic = ARCTIC_LINK_MAGIC;
    welcome->version_major = ARCTIC_LINK_VERSION_MAJOR;
    welcome->version_minor = ARCTIC_LINK_VERSION_MINOR;
    welcome->node_id = hello->node_id;
    welcome->num_nodes = sw->ports;
    welcome->levels = sw->levels;
}

/* The WELCOME into @conn's output, its flags saying what the link has. */
static void welcome_queue(struct sw_conn *conn,
                          const struct arctic_welcome *welcome, bool rings,
                          bool cpu_wake, bool timed)
{
    uint8_t *frame = conn_output_reserve(conn, ARCTIC_LINK_HEADER_SIZE +
                                               ARCTIC_WELCOME_SIZE);
    uint16_t flags = (rings ? R_ARCTIC_WELCOME_FLAGS_RINGS_MASK : 0) |
                     (cpu_wake ? R_ARCTIC_WELCOME_FLAGS_CPU_WAKE_MASK : 0) |
                     (timed ? R_ARCTIC_WELCOME_FLAGS_TIMED_MASK : 0) |
                     (conn->direct ? R_ARCTIC_WELCOME_FLAGS_DIRECT_MASK : 0);

    arctic_frame_header_encode_flags(frame, ARCTIC_FRAME_WELCOME, flags,
                                     ARCTIC_WELCOME_SIZE);
    arctic_welcome_encode(frame + ARCTIC_LINK_HEADER_SIZE, welcome);
}

/*
 * The WELCOME goes on the socket now, every later frame in @rings; the
 * NIU reads the rings only once it has the WELCOME.  False if the socket
 * failed (then @conn is closed and @rings freed).
 */
static bool rings_start(ArcticSwitch *sw, struct sw_conn *conn,
                        struct sw_rings *rings, bool cpu_wake)
{
    struct arctic_ring_area *area = rings->area;
    unsigned i;

    if (!conn_send(sw, conn) || conn->output_end) {
        rings_free(sw, rings);
        sw_conn_close(sw, conn, ARCTIC_DISCONNECT_IO_ERROR);
        return false;
    }
    conn->rings = rings;
    if (cpu_wake) {
        /* Whatever the counters hold now is no kick. */
        for (i = 0; i < ARCTIC_CPU_WAKE_MAX; i++) {
            rings->cpu_seen[i] = __atomic_load_n(&area->kicks.cpu[i],
                                                 __ATOMIC_ACQUIRE);
        }
        rings->cpu_wake = true;
        sw->cpu_wake_links++;
    }
    rings_watch(sw, rings, true);
    /* The periodic look at every ring (sw_port_timer()). */
    sw_arm_timer(sw, sw->now_ns + ARCTIC_RING_LOOK_MS * 1000000ull);
    return true;
}

/*
 * A HELLO, checked and (with a secret) authenticated: the NIU gets its
 * port and a WELCOME, with the rings it offered if they will do.
 */
static void accept_hello(ArcticSwitch *sw, struct sw_conn *conn,
                         const uint8_t *body)
{
    struct arctic_hello hello;
    struct arctic_welcome welcome = { 0 };
    struct sw_rings *rings;
    bool cpu_wake;

    arctic_hello_decode(body, &hello);
    if (hello_refused(sw, conn, &hello)) {
        return;
    }
    link_take(sw, conn, &hello, &welcome);
    rings = welcome_rings(sw, conn);
    /*
     * An NIU on the rings kicks its CPU's thread through its area, as
     * long as the threads can wait on one more link (SW_CPU_WAIT_MAX).
     */
    cpu_wake = rings && sw_loop_cpu_wakers(sw) &&
               sw->cpu_wake_links < SW_CPU_WAIT_MAX - 1;
    /* Direct rings go on the socket of a link on rings (link 1.5). */
    conn->direct = rings && sw->config.direct &&
                   hello.version_minor >= 5 &&
                   ARCTIC_FIELD_GET(ARCTIC_HELLO_FLAGS, DIRECT,
                                    conn->hello_flags);
    welcome_queue(conn, &welcome, rings, cpu_wake, sw->config.timed);
    if (rings && !rings_start(sw, conn, rings, cpu_wake)) {
        return;
    }
    conn_queue_flush(sw, conn);
    sw->port_ops->ready(sw, conn->port);
    sw_log(sw, "port %u connected (credits low %u high %u%s%s%s)",
           hello.node_id, hello.credits[0], hello.credits[1],
           rings ? ", rings" : "", cpu_wake ? ", per-CPU wake-ups" : "",
           conn->direct ? ", direct rings" : "");
}

/* --- frames ----------------------------------------------------------- */

static enum arctic_disconnect_reason
frame_error_reason(enum arctic_frame_error e)
{
    switch (e) {
    case ARCTIC_FRAME_BAD_TYPE:
        return ARCTIC_DISCONNECT_BAD_FRAME_TYPE;
    case ARCTIC_FRAME_BAD_FLAGS:
        return ARCTIC_DISCONNECT_BAD_FRAME_FLAGS;
    default:
        return ARCTIC_DISCONNECT_BAD_FRAME_LENGTH;
    }
}

static void handle_live_frame(ArcticSwitch *sw, struct sw_conn *conn,
                              const struct arctic_frame_header *h,
                              const uint8_t *body)
{
    struct sw_port *port = &sw->port[conn->port];
    struct sw_link *link = &port->link;

    link->last_frame_ns = sw->now_ns;
    if (sw->port_ops->frame) {
        sw->port_ops->frame(sw, conn->port, h, body);
        return;
    }
    switch (h->type) {
    case ARCTIC_FRAME_PACKET: {
        /* The frame, not the packet, says whose credit it uses. */
        unsigned prio = ARCTIC_FIELD_GET(ARCTIC_FRAME_FLAGS, PRIORITY,
                                         h->flags);

        if (link->ingress_credits[prio] == 0) {
            sw_log(sw, "port %d sent a %s priority packet without credit",
                   conn->port, prio ? "high" : "low");
            sw_conn_close(sw, conn, ARCTIC_DISCONNECT_CREDIT_OVERRUN);
            return;
        }
        if (--link->ingress_credits[prio] == 0) {
            port->stats.prio[prio].rx_credit_exhausted++;
        }
        link->ingress_held[prio]++;
        sw->port_ops->packet(sw, conn->port, prio, body, h->length);
        return;
    }
    case ARCTIC_FRAME_CREDIT: {
        unsigned low = arctic_get_le16(body);
        unsigned high = arctic_get_le16(body + 2);

        link->last_credit_ns = sw->now_ns;
        link->egress_credits[ARCTIC_PRIORITY_LOW] += low;
        link->egress_credits[ARCTIC_PRIORITY_HIGH] += high;
        if (link->egress_credits[ARCTIC_PRIORITY_LOW] >
            ARCTIC_LINK_MAX_CREDITS ||
            link->egress_credits[ARCTIC_PRIORITY_HIGH] >
            ARCTIC_LINK_MAX_CREDITS) {
            /* No window can be wider than a HELLO can express. */
            sw_conn_close(sw, conn, ARCTIC_DISCONNECT_CREDIT_OVERFLOW);
            return;
        }
        sw->port_ops->ready(sw, conn->port);
        return;
    }
    default:
        sw_log(sw, "port %d sent an unexpected frame of type %u",
               conn->port, h->type);
        sw_conn_close(sw, conn, ARCTIC_DISCONNECT_UNEXPECTED_FRAME);
        return;
    }
}

/* Frames from bytes of @conn's stream, as they come (arctic/link.h's
 * reader: whole frames in place, a split one gathered). */
static void conn_parse(ArcticSwitch *sw, struct sw_conn *conn,
                       const uint8_t *data, size_t len)
{
    struct arctic_frame_reader *r = &conn->reader;

    while (conn->state != SW_CONN_CLOSING) {
        switch (arctic_frame_read(r, &data, &len)) {
        case ARCTIC_FRAME_NEED_MORE:
            return;
        case ARCTIC_FRAME_MALFORMED:
            /* Past a bad header the stream cannot be framed again. */
            if (conn->state == SW_CONN_HANDSHAKE ||
                conn->state == SW_CONN_AUTH) {
                reject(sw, conn, ARCTIC_REJECT_MALFORMED,
                       frame_error_reason(r->error),
                       "bad frame header (type %u, flags %u, length %u)",
                       r->header.type, r->header.flags, r->header.length);
            } else {
                sw_log(sw, "port %d: bad frame header (type %u flags %u "
                       "length %u)", conn->port, r->header.type,
                       r->header.flags, r->header.length);
                sw_conn_close(sw, conn, frame_error_reason(r->error));
            }
            return;
        case ARCTIC_FRAME_WHOLE:
            if (conn->state == SW_CONN_AUTH) {
                if (r->header.type != ARCTIC_FRAME_AUTH_RESPONSE) {
                    reject(sw, conn, ARCTIC_REJECT_AUTH,
                           ARCTIC_DISCONNECT_UNEXPECTED_FRAME,
                           "frame type %u instead of AUTH_RESPONSE",
                           r->header.type);
                    return;
                }
                auth_response(sw, conn, r->body);
            } else if (conn->state != SW_CONN_HANDSHAKE) {
                handle_live_frame(sw, conn, &r->header, r->body);
            } else if (r->header.type != ARCTIC_FRAME_HELLO) {
                reject(sw, conn, ARCTIC_REJECT_MALFORMED,
                       ARCTIC_DISCONNECT_UNEXPECTED_FRAME,
                       "frame type %u before HELLO", r->header.type);
                return;
            } else {
                handle_hello(sw, conn, r->header.flags, r->body);
            }
            break;
        }
    }
}

/* Feed bytes as if read from the socket (the fuzzer's entry point). */
void sw_conn_feed(ArcticSwitch *sw, struct sw_conn *conn, const uint8_t *data,
                  size_t len)
{
    conn_parse(sw, conn, data, len);
}

static void conn_input(ArcticSwitch *sw, struct sw_conn *conn)
{
    int fds[ARCTIC_RING_FDS];
    unsigned n_fds, i;
    /*
     * Only the HELLO's descriptors are kept (at most ARCTIC_RING_FDS, of
     * the first message that brings any, before the handshake ends); any
     * others are closed at once.
     */
    bool keep = conn->state == SW_CONN_HANDSHAKE && !conn->offered;
    ssize_t n = sw_recv_fds(conn->fd, sw->read_buf, SW_CONN_INPUT_BUFFER,
                            fds, G_N_ELEMENTS(fds), &n_fds);

    for (i = 0; i < n_fds; i++) {
        if (keep) {
            conn->offered_fds[conn->offered++] = fds[i];
        } else {
            close(fds[i]);
        }
    }
    if (n > 0 && conn->rings) {
        /* Once the rings carry the link, the socket carries nothing. */
        sw_log(sw, "port %d sent bytes on its socket after its rings took "
               "over", conn->port);
        sw_conn_close(sw, conn, ARCTIC_DISCONNECT_UNEXPECTED_FRAME);
    } else if (n > 0) {
        conn_parse(sw, conn, sw->read_buf, n);
    } else if (n == 0) {
        sw_conn_close(sw, conn, ARCTIC_DISCONNECT_PEER_CLOSED);
    } else if (errno == ECONNRESET || errno == EPIPE) {
        sw_conn_close(sw, conn, ARCTIC_DISCONNECT_PEER_CLOSED);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        sw_conn_close(sw, conn, ARCTIC_DISCONNECT_IO_ERROR);
    }
}

static void conn_ready(ArcticSwitch *sw, void *object, uint32_t events)
{
    struct sw_conn *conn = object;

    if (conn->state == SW_CONN_CLOSING) {
        return;
    }
    if (events & EPOLLOUT) {
        if (!conn_send(sw, conn)) {
            sw_conn_close(sw, conn, conn->send_failure);
            return;
        }
        conn_queue_flush(sw, conn);      /* credits held back */
        if (conn->state == SW_CONN_LIVE) {
            sw->port_ops->ready(sw, conn->port);
        }
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        conn_input(sw, conn);
    }
}

void arctic_switch_adopt_fd(ArcticSwitch *sw, int fd)
{
    g_unix_set_fd_nonblocking(fd, TRUE, NULL);
    sw_conn_new(sw, fd);
}

/*
 * The loop's timer fired: credits whose delay ran out go, connections
 * that never said HELLO are closed, a muted link's wake-ups are watched
 * again once its time is up, and while any link is on rings the timer
 * comes back within ARCTIC_RING_LOOK_MS: each timer is a batch, after
 * which every ring is read (sw_port_read_rings()), so a lost or withheld
 * wake-up delays a link, never stalls it.
 */
void sw_port_timer(ArcticSwitch *sw)
{
    struct sw_conn *conn, *next;
    unsigned port_no;
    bool rings = false;
    /* One timerfd_settime() for them all: the list runs newest first, so
     * arming each deadline in turn cost a system call per pending one. */
    uint64_t handshake_due_ns = UINT64_MAX;

    for (port_no = 0; port_no < sw->ports; port_no++) {
        struct sw_link *link = &sw->port[port_no].link;

        if (link->credit_due_ns && link->conn) {
            if (link->credit_due_ns <= sw->now_ns) {
                conn_queue_flush(sw, link->conn);
            } else {
                sw_arm_timer(sw, link->credit_due_ns);
            }
        }
    }

    for (conn = sw->conns; conn; conn = next) {
        next = conn->next;
        if (conn->rings && conn->state == SW_CONN_LIVE) {
            struct sw_rings *r = conn->rings;

            rings = true;
            if (r->muted_until_ns && r->muted_until_ns <= sw->now_ns) {
                r->muted_until_ns = 0;
                r->invited = r->bare_wakes = r->kicks;
                rings_watch(sw, r, true);
            } else if (r->muted_until_ns) {
                sw_arm_timer(sw, r->muted_until_ns);
            }
        }
        if (conn->state != SW_CONN_HANDSHAKE &&
            conn->state != SW_CONN_AUTH) {
            continue;
        }
        if (conn->handshake_deadline_ns <= sw->now_ns) {
            sw_conn_close(sw, conn, ARCTIC_DISCONNECT_HANDSHAKE_TIMEOUT);
        } else {
            handshake_due_ns = MIN(handshake_due_ns,
                                   conn->handshake_deadline_ns);
        }
    }
    if (handshake_due_ns != UINT64_MAX) {
        sw_arm_timer(sw, handshake_due_ns);
    }
    if (rings) {
        sw_arm_timer(sw, sw->now_ns + ARCTIC_RING_LOOK_MS * 1000000ull);
    }
}

/* --- what the router asks of a port ------------------------------------ */

bool sw_port_live(const ArcticSwitch *sw, unsigned port_no)
{
    const struct sw_conn *conn = sw->port[port_no].link.conn;

    return conn && conn->state == SW_CONN_LIVE;
}

/*
 * Room in the output buffer for a packet of @size bytes and for a CREDIT
 * frame (kept so that credits can always go back to an NIU, whatever it
 * is sent).
 */
static bool conn_packet_room(const struct sw_conn *conn, size_t size)
{
    return conn_output_room(conn, ARCTIC_LINK_HEADER_SIZE + size +
                                  SW_CREDIT_FRAME);
}

/* May a packet of @size bytes go to the NIU now: a credit, and room. */
bool sw_port_can_send(const ArcticSwitch *sw, unsigned port_no,
                      unsigned prio, size_t size)
{
    const struct sw_link *link = &sw->port[port_no].link;

    return link->egress_credits[prio] > 0 &&
           conn_packet_room(link->conn, size);
}

/* Queue a PACKET frame to the NIU; the caller checked sw_port_can_send(). */
void sw_port_send(ArcticSwitch *sw, unsigned port_no, unsigned prio,
                  const uint8_t *bytes, size_t size)
{
    struct sw_link *link = &sw->port[port_no].link;
    uint8_t *frame = conn_output_reserve(link->conn,
                                            ARCTIC_LINK_HEADER_SIZE + size);

    arctic_packet_frame_encode(frame, prio, size);
    memcpy(frame + ARCTIC_LINK_HEADER_SIZE, bytes, size);
    link->egress_credits[prio]--;
    conn_queue_flush(sw, link->conn);
}

/*
 * Up to @len bytes of whole frames for the NIU of @port_no into its
 * connection's output, as room allows (a timed link's frames, which wait
 * in timed.c meanwhile); returns how many it took.
 */
size_t sw_port_write(ArcticSwitch *sw, unsigned port_no, const uint8_t *data,
                     size_t len)
{
    struct sw_conn *conn = sw->port[port_no].link.conn;
    size_t room;

    if (!conn || conn->state != SW_CONN_LIVE) {
        return 0;
    }
    room = SW_CONN_OUTPUT_BUFFER - (conn->output_end - conn->output_start);
    len = MIN(len, room);
    if (len) {
        memcpy(conn_output_reserve(conn, len), data, len);
        conn_queue_flush(sw, conn);
    }
    return len;
}

/* End the link of @port_no, for @reason. */
void sw_port_drop(ArcticSwitch *sw, unsigned port_no,
                  enum arctic_disconnect_reason reason)
{
    struct sw_conn *conn = sw->port[port_no].link.conn;

    if (conn) {
        sw_conn_close(sw, conn, reason);
    }
}

/* The buffer of a packet the NIU of @port_no sent is free again. */
void sw_port_credit_freed(ArcticSwitch *sw, unsigned port_no, unsigned prio)
{
    struct sw_link *link = &sw->port[port_no].link;

    g_assert(link->ingress_held[prio] > 0);
    link->ingress_held[prio]--;
    if (link->conn) {
        link->credit_return_pending[prio]++;
        conn_queue_flush(sw, link->conn);
    }
}

/* ", WHAT T ms ago" at @now_ns for a time @when_ns (0: "WHAT never"). */
static void append_age(GString *s, uint64_t now_ns, const char *what,
                       uint64_t when_ns)
{
    if (!when_ns) {
        g_string_append_printf(s, ", %s never", what);
    } else {
        g_string_append_printf(s, ", %s %.1f ms ago", what,
                               (now_ns - when_ns) / 1e6);
    }
}

/*
 * What a packet of @size bytes for the NIU of @port_no waits for, in the
 * stats' words: its credits, when it last returned credit and last sent
 * anything, and how many bytes sent to it it has not read; together they
 * tell a stalled NIU (nothing read) from one that reads but keeps its
 * credits.
 */
void sw_port_describe(const ArcticSwitch *sw, unsigned port_no,
                      unsigned prio, size_t size, uint64_t now_ns,
                      GString *s)
{
    const struct sw_link *link = &sw->port[port_no].link;

    g_string_append_printf(s, "port %u: %u credit(s)", port_no,
                           link->egress_credits[prio]);
    if (!link->conn) {
        g_string_append(s, ", not connected");
        return;
    }
    append_age(s, now_ns, "last credit", link->last_credit_ns);
    append_age(s, now_ns, "last frame", link->last_frame_ns);
    g_string_append_printf(s, ", %zu byte(s) unread, %s",
                           conn_unread(link->conn),
                           conn_packet_room(link->conn, size) ?
                           "socket has room" : "socket output full");
}
