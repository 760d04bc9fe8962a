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
 */
#include <errno.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib-unix.h>

#include "switch-internal.h"

static void conn_ready(ArcticSwitch *sw, void *object, uint32_t events);

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

    if (ioctl(conn->fd, SIOCOUTQ, &queued) < 0) {
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

/* Write what is queued; false if the connection failed. */
static bool conn_send(ArcticSwitch *sw, struct sw_conn *conn)
{
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
            sw_conn_close(sw, conn, ARCTIC_DISCONNECT_IO_ERROR);
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
    if (conn->output_start < conn->output_end) {
        (void)send(conn->fd, conn->output + conn->output_start,
                   conn->output_end - conn->output_start,
                   MSG_NOSIGNAL | MSG_DONTWAIT);
    }
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

static void handle_hello(ArcticSwitch *sw, struct sw_conn *conn,
                         const uint8_t *body)
{
    struct arctic_hello hello;
    struct arctic_welcome welcome = { 0 };
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
    frame = conn_output_reserve(conn, ARCTIC_LINK_HEADER_SIZE +
                                         ARCTIC_WELCOME_SIZE);
    arctic_frame_header_encode(frame, ARCTIC_FRAME_WELCOME,
                               ARCTIC_WELCOME_SIZE);
    arctic_welcome_encode(frame + ARCTIC_LINK_HEADER_SIZE, &welcome);
    conn_queue_flush(sw, conn);
    sw->port_ops->ready(sw, conn->port);
    sw_log(sw, "port %u connected (credits low %u high %u)", hello.node_id,
           hello.credits[0], hello.credits[1]);
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

static void conn_input(ArcticSwitch *sw, struct sw_conn *conn)
{
    ssize_t n = recv(conn->fd, sw->read_buf, SW_CONN_INPUT_BUFFER,
                     MSG_DONTWAIT);

    if (n > 0) {
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
            sw_conn_close(sw, conn, ARCTIC_DISCONNECT_IO_ERROR);
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
