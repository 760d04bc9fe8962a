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
 * sw->port_ops (router.c); it knows nothing of routes or routers.
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
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib-unix.h>

#include "switch-internal.h"

static void conn_ready(ArcticSwitch *sw, void *object, uint32_t events);
static void ring_ready(ArcticSwitch *sw, void *object, uint32_t events);
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

static void ring_kick(int fd)
{
    uint64_t one = 1;

    if (write(fd, &one, sizeof(one)) < 0) {
        /* EAGAIN: the counter is full, so a wake-up is pending anyway. */
    }
}

/*
 * Copy what is queued into the NIU's ring, kicking it if it sleeps; when
 * the ring is full, say so in it and wait for the NIU's kick.  False if
 * the ring is broken.
 */
static bool conn_send_ring(struct sw_conn *conn)
{
    struct sw_rings *r = conn->rings;

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
                ring_kick(r->kick_fd);
            }
        } else if (arctic_ring_producer_wait(&r->out, 1)) {
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
 * The WELCOME, the first frame on @conn, whole in one message with the
 * per-CPU wake-up eventfds attached (arctic/link-ring.h).  False if it
 * did not all go.
 */
static bool conn_send_welcome_fds(struct sw_conn *conn, const int *fds,
                                  unsigned n)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * ARCTIC_CPU_WAKE_MAX)];
    } control;
    struct iovec iov = {
        .iov_base = conn->output + conn->output_start,
        .iov_len = conn->output_end - conn->output_start,
    };
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = control.buf,
        .msg_controllen = CMSG_SPACE(sizeof(int) * n),
    };
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    ssize_t sent;

    memset(&control, 0, sizeof(control));
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * n);
    memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * n);
    do {
        sent = sendmsg(conn->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (sent < 0 && errno == EINTR);
    if (sent != (ssize_t)iov.iov_len) {
        conn->send_failure = ARCTIC_DISCONNECT_IO_ERROR;
        return false;
    }
    conn->output_start = conn->output_end = 0;
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

static void rings_free(ArcticSwitch *sw, struct sw_conn *conn)
{
    struct sw_rings *r = conn->rings;

    if (!r) {
        return;
    }
    sw_loop_unwatch(sw, r->wake_fd);
    munmap(r->area, r->area_size);
    close(r->wake_fd);
    close(r->kick_fd);
    g_free(r);
    conn->rings = NULL;
}

/* Is @fd an eventfd?  Anything else could block a write or refuse epoll. */
static bool is_eventfd(int fd)
{
    char path[64], target[64];
    ssize_t n;

    g_snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, target, sizeof(target) - 1);
    if (n < 0) {
        return false;
    }
    target[n] = '\0';
    return strcmp(target, "anon_inode:[eventfd]") == 0;
}

/*
 * Take the rings @conn's HELLO offered: a memfd sealed against shrinking
 * (so that the NIU cannot take pages from under us) holding a valid area,
 * and two eventfds.  NULL, with the reason in *@why, if they will not do;
 * the NIU then stays on its socket.
 */
static struct sw_rings *rings_adopt(struct sw_conn *conn, const char **why)
{
    int area_fd = conn->offered_fds[ARCTIC_RING_FD_AREA];
    int wake_fd = conn->offered_fds[ARCTIC_RING_FD_SWITCH_WAKE];
    int kick_fd = conn->offered_fds[ARCTIC_RING_FD_NIU_WAKE];
    struct sw_rings *r;
    struct stat st;
    uint32_t data_size;
    void *area;
    int seals;

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
    if (!is_eventfd(wake_fd) || !is_eventfd(kick_fd)) {
        *why = "a wake-up descriptor is not an eventfd";
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
    r->kick_fd = kick_fd;
    g_unix_set_fd_nonblocking(wake_fd, TRUE, NULL);
    g_unix_set_fd_nonblocking(kick_fd, TRUE, NULL);
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

/* The NIU kicked us: its ring has bytes, or ours has room again. */
static void ring_ready(ArcticSwitch *sw, void *object, uint32_t events)
{
    struct sw_conn *conn = object;
    uint64_t value;

    if (conn->state == SW_CONN_CLOSING || !conn->rings) {
        return;
    }
    if (read(conn->rings->wake_fd, &value, sizeof(value)) < 0) {
        /* EAGAIN: an earlier batch took the count. */
    }
    /* The bytes are read with every ring's after the batch. */
    ring_room(sw, conn);
}

/*
 * A per-CPU wake-up thread was kicked (loop.c): it does not say by which
 * NIU, so every ring that waits for room is tried, as ring_ready() tries
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

/* What @conn's NIU put in its ring goes through the frame reader. */
static void ring_input(ArcticSwitch *sw, struct sw_conn *conn)
{
    struct sw_rings *r = conn->rings;

    arctic_ring_consumer_awake(&r->in);
    while (conn->state == SW_CONN_LIVE) {
        size_t n = arctic_ring_read(&r->in, sw->read_buf,
                                    SW_CONN_INPUT_BUFFER);

        if (n == ARCTIC_RING_BROKEN) {
            sw_log(sw, "port %d: its ring's indices are impossible",
                   conn->port);
            sw_conn_close(sw, conn, ARCTIC_DISCONNECT_BROKEN_RING);
            return;
        }
        if (!n) {
            return;
        }
        if (arctic_ring_wake_producer(&r->in)) {
            ring_kick(r->kick_fd);
        }
        conn_parse(sw, conn, sw->read_buf, n);
    }
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
        if (conn->rings && conn->state == SW_CONN_LIVE &&
            !arctic_ring_consumer_sleep(&conn->rings->in)) {
            return false;
        }
    }
    return true;
}

bool sw_port_uses_rings(const ArcticSwitch *sw, unsigned port_no)
{
    const struct sw_conn *conn = sw->port[port_no].link.conn;

    return conn && conn->rings;
}

/* --- connection lifecycle --------------------------------------------- */

/* The connection still in its handshake that was accepted first. */
static struct sw_conn *oldest_pending_conn(ArcticSwitch *sw)
{
    struct sw_conn *conn, *oldest = NULL;

    for (conn = sw->conns; conn; conn = conn->next) {
        if (conn->state == SW_CONN_HANDSHAKE &&
            (!oldest ||
             conn->handshake_deadline_ns < oldest->handshake_deadline_ns)) {
            oldest = conn;
        }
    }
    return oldest;
}

struct sw_conn *sw_conn_new(ArcticSwitch *sw, int fd)
{
    struct sw_conn *conn;

    if (sw->pending_conns >= SW_MAX_PENDING_CONNECTIONS) {
        /*
         * Make room by closing the connection that has waited longest for
         * its HELLO: refusing the new one instead let idle connections,
         * reopened as they time out, lock real NIUs out for ever.  A real
         * NIU says HELLO at once, so it is never the oldest for long.
         */
        struct sw_conn *oldest = oldest_pending_conn(sw);

        sw_log(sw, "%d connections without HELLO; closing the oldest",
               SW_MAX_PENDING_CONNECTIONS);
        if (!oldest) {
            close(fd);      /* cannot happen: the count says they exist */
            return NULL;
        }
        sw_conn_close(sw, oldest, ARCTIC_DISCONNECT_EVICTED);
    }
    conn = g_new0(struct sw_conn, 1);
    conn->watch.ready = conn_ready;
    conn->watch.object = conn;
    conn->ring_watch.ready = ring_ready;
    conn->ring_watch.object = conn;
    conn->fd = fd;
    conn->port = -1;
    conn->state = SW_CONN_HANDSHAKE;
    arctic_frame_reader_reset(&conn->reader);
    conn->output = g_malloc(SW_CONN_OUTPUT_BUFFER);
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
    close_offered(conn);
    rings_free(sw, conn);
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

static void handle_hello(ArcticSwitch *sw, struct sw_conn *conn,
                         const uint8_t *body)
{
    struct arctic_hello hello;
    struct arctic_welcome welcome = { 0 };
    struct sw_rings *rings;
    const int *cpu_fds;
    unsigned cpu_wake;
    struct sw_port *port;
    struct sw_link *link;
    uint8_t *frame;
    unsigned prio;

    arctic_hello_decode(body, &hello);
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
    port = &sw->port[hello.node_id];
    link = &port->link;
    if (link->conn && conn_still_alive(link->conn)) {
        reject(sw, conn, ARCTIC_REJECT_NODE_BUSY, ARCTIC_DISCONNECT_REJECTED,
               "node %u is held by a live connection", hello.node_id);
        return;
    }
    if (link->conn) {
        sw_conn_close(sw, link->conn, ARCTIC_DISCONNECT_PEER_CLOSED);
    }

    sw->pending_conns--;
    conn->port = hello.node_id;
    conn->state = SW_CONN_LIVE;
    link->conn = conn;
    port->stats.connects++;
    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        link->egress_credits[prio] = hello.credits[prio];
        /*
         * Packets of an earlier connection may still hold buffers: their
         * credits come back by CREDIT frames as they drain.
         */
        link->ingress_credits[prio] = sw->config.credits -
                                      link->ingress_held[prio];
        link->credit_return_pending[prio] = 0;
        welcome.credits[prio] = link->ingress_credits[prio];
    }
    link->credit_due_ns = 0;
    link->last_frame_ns = sw->now_ns;     /* its HELLO */
    link->last_credit_ns = 0;
    welcome.magic = ARCTIC_LINK_MAGIC;
    welcome.version_major = ARCTIC_LINK_VERSION_MAJOR;
    welcome.version_minor = ARCTIC_LINK_VERSION_MINOR;
    welcome.node_id = hello.node_id;
    welcome.num_nodes = sw->ports;
    welcome.levels = sw->levels;
    rings = welcome_rings(sw, conn);
    /* An NIU of link 1.2 or later on the rings kicks the CPU's thread. */
    cpu_wake = rings && hello.version_minor >= 2
               ? sw_loop_cpu_wake_fds(sw, &cpu_fds) : 0;
    if (!cpu_wake) {
        cpu_fds = NULL;
    }
    frame = conn_output_reserve(conn, ARCTIC_LINK_HEADER_SIZE +
                                         ARCTIC_WELCOME_SIZE);
    arctic_frame_header_encode_flags(frame, ARCTIC_FRAME_WELCOME,
                                     (rings ? R_ARCTIC_WELCOME_FLAGS_RINGS_MASK
                                            : 0) |
                                     (cpu_wake ?
                                      R_ARCTIC_WELCOME_FLAGS_CPU_WAKE_MASK
                                      : 0),
                                     ARCTIC_WELCOME_SIZE);
    arctic_welcome_encode(frame + ARCTIC_LINK_HEADER_SIZE, &welcome);
    if (rings) {
        /*
         * The WELCOME goes on the socket now, every later frame in the
         * rings; the NIU reads the rings only once it has the WELCOME.
         */
        if (!(cpu_fds ? conn_send_welcome_fds(conn, cpu_fds, cpu_wake)
                      : conn_send(sw, conn)) || conn->output_end) {
            sw_conn_close(sw, conn, ARCTIC_DISCONNECT_IO_ERROR);
            return;
        }
        conn->rings = rings;
        sw_loop_watch(sw, rings->wake_fd, &conn->ring_watch, EPOLLIN);
    }
    conn_queue_flush(sw, conn);
    sw->port_ops->ready(sw, conn->port);
    sw_log(sw, "port %u connected (credits low %u high %u%s%s)",
           hello.node_id, hello.credits[0], hello.credits[1],
           rings ? ", rings" : "", cpu_wake ? ", per-CPU wake-ups" : "");
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
            if (conn->state == SW_CONN_HANDSHAKE) {
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
            if (conn->state != SW_CONN_HANDSHAKE) {
                handle_live_frame(sw, conn, &r->header, r->body);
            } else if (r->header.type != ARCTIC_FRAME_HELLO) {
                reject(sw, conn, ARCTIC_REJECT_MALFORMED,
                       ARCTIC_DISCONNECT_UNEXPECTED_FRAME,
                       "frame type %u before HELLO", r->header.type);
                return;
            } else {
                handle_hello(sw, conn, r->body);
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

/*
 * Keep the descriptors a message brought, if it is the HELLO's (at most
 * ARCTIC_RING_FDS, once, before the handshake ends); close any others.
 */
static void conn_take_fds(struct sw_conn *conn, struct msghdr *msg)
{
    struct cmsghdr *cmsg;

    for (cmsg = CMSG_FIRSTHDR(msg); cmsg; cmsg = CMSG_NXTHDR(msg, cmsg)) {
        unsigned i, n;
        int fds[ARCTIC_RING_FDS + 4];

        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        n = MIN(n, G_N_ELEMENTS(fds));
        memcpy(fds, CMSG_DATA(cmsg), n * sizeof(int));
        for (i = 0; i < n; i++) {
            if (conn->state == SW_CONN_HANDSHAKE &&
                conn->offered < ARCTIC_RING_FDS) {
                conn->offered_fds[conn->offered++] = fds[i];
            } else {
                close(fds[i]);
            }
        }
    }
}

static void conn_input(ArcticSwitch *sw, struct sw_conn *conn)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * (ARCTIC_RING_FDS + 4))];
    } control;
    struct iovec iov = {
        .iov_base = sw->read_buf,
        .iov_len = SW_CONN_INPUT_BUFFER,
    };
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = control.buf,
        .msg_controllen = sizeof(control.buf),
    };
    ssize_t n = recvmsg(conn->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

    if (n >= 0 && msg.msg_controllen) {
        conn_take_fds(conn, &msg);
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
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
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
 * that never said HELLO are closed.
 */
void sw_port_timer(ArcticSwitch *sw)
{
    struct sw_conn *conn, *next;
    unsigned port_no;

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
        if (conn->state != SW_CONN_HANDSHAKE) {
            continue;
        }
        if (conn->handshake_deadline_ns <= sw->now_ns) {
            sw_conn_close(sw, conn, ARCTIC_DISCONNECT_HANDSHAKE_TIMEOUT);
        } else {
            sw_arm_timer(sw, conn->handshake_deadline_ns);
        }
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
