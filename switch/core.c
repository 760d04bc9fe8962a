/* SPDX-License-Identifier: MIT */
/*
 * The switch process core: configuration, the listening sockets, the epoll
 * loop, and the NIU connections with their frame reassembly and handshake.
 * Each loop iteration reads what the sockets hold (one recv() per readable
 * socket fills a 32 KiB buffer, hundreds of frames), lets the router model
 * move packets, then writes every connection's output with one send(), so
 * system calls are amortised over many packets.  A connection that breaks
 * the link protocol is closed after what was queued for it is flushed; it
 * never disturbs other ports.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib-unix.h>

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

G_GNUC_PRINTF(2, 3)
static void sw_log(ArcticSwitch *sw, const char *fmt, ...)
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

void arctic_switch_config_init(ArcticSwitchConfig *config)
{
    memset(config, 0, sizeof(*config));
    config->ports = 16;
    config->credits = ARCTIC_LINK_DEFAULT_CREDITS;
    config->router_buffers = ARCTIC_SWITCH_DEFAULT_ROUTER_BUFFERS;
    config->link_mbytes_per_s = ARCTIC_SWITCH_DEFAULT_LINK_MBYTES;
    config->hop_latency_ns = ARCTIC_SWITCH_DEFAULT_HOP_LATENCY_NS;
    config->seed = 1;
    config->handshake_timeout_ms = ARCTIC_SWITCH_DEFAULT_HANDSHAKE_TIMEOUT_MS;
    config->credit_delay_us = ARCTIC_SWITCH_DEFAULT_CREDIT_DELAY_US;
}

const char *arctic_disconnect_reason_name(enum arctic_disconnect_reason r)
{
    static const char *const names[ARCTIC_DISCONNECT_REASONS] = {
        [ARCTIC_DISCONNECT_PEER_CLOSED] = "peer_closed",
        [ARCTIC_DISCONNECT_REJECTED] = "rejected",
        [ARCTIC_DISCONNECT_BAD_FRAME_TYPE] = "bad_frame_type",
        [ARCTIC_DISCONNECT_BAD_FRAME_FLAGS] = "bad_frame_flags",
        [ARCTIC_DISCONNECT_BAD_FRAME_LENGTH] = "bad_frame_length",
        [ARCTIC_DISCONNECT_UNEXPECTED_FRAME] = "unexpected_frame",
        [ARCTIC_DISCONNECT_CREDIT_OVERRUN] = "credit_overrun",
        [ARCTIC_DISCONNECT_CREDIT_OVERFLOW] = "credit_overflow",
        [ARCTIC_DISCONNECT_HANDSHAKE_TIMEOUT] = "handshake_timeout",
        [ARCTIC_DISCONNECT_IO_ERROR] = "io_error",
        [ARCTIC_DISCONNECT_SHUTDOWN] = "shutdown",
        [ARCTIC_DISCONNECT_EVICTED] = "evicted",
    };

    return r < ARCTIC_DISCONNECT_REASONS ? names[r] : "unknown";
}

static void epoll_watch(ArcticSwitch *sw, int fd, struct sw_watch *watch,
                        uint32_t events, int op)
{
    struct epoll_event ev = { .events = events, .data.ptr = watch };

    if (epoll_ctl(sw->epoll_fd, op, fd, &ev) < 0) {
        g_error("epoll_ctl(%d): %s", fd, g_strerror(errno));
    }
}

void sw_arm_timer(ArcticSwitch *sw, uint64_t deadline_ns)
{
    struct itimerspec its = { 0 };

    if (sw->timer_armed_ns && sw->timer_armed_ns <= deadline_ns) {
        return;
    }
    sw->timer_armed_ns = deadline_ns;
    its.it_value.tv_sec = deadline_ns / 1000000000ull;
    its.it_value.tv_nsec = deadline_ns % 1000000000ull;
    timerfd_settime(sw->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* --- connection output ------------------------------------------------ */

bool sw_conn_output_room(const struct sw_conn *conn, size_t bytes)
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
size_t sw_conn_unread(const struct sw_conn *conn)
{
    int queued = 0;

    if (ioctl(conn->fd, SIOCOUTQ, &queued) < 0) {
        queued = 0;
    }
    return conn->output_end - conn->output_start + MAX(queued, 0);
}

/* Caller checked the room (or is writing a handshake reply into an
 * empty buffer). */
uint8_t *sw_conn_output_reserve(struct sw_conn *conn, size_t bytes)
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

void sw_conn_queue_flush(ArcticSwitch *sw, struct sw_conn *conn)
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
        epoll_watch(sw, conn->fd, &conn->watch,
                    EPOLLIN | (on ? EPOLLOUT : 0), EPOLL_CTL_MOD);
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
                           struct sw_port *port)
{
    unsigned p;

    if (!sw->config.credit_delay_us || conn->output_end > conn->output_start ||
        (port->credit_due_ns && port->credit_due_ns <= sw->now_ns)) {
        return true;
    }
    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        if (port->credit_return_pending[p] * 2 >= sw->config.credits) {
            return true;
        }
    }
    if (!port->credit_due_ns) {
        port->credit_due_ns = sw->now_ns +
                              sw->config.credit_delay_us * 1000ull;
        sw_arm_timer(sw, port->credit_due_ns);
    }
    return false;
}

/* Append a CREDIT frame for the buffers freed since the last one. */
static void conn_return_credits(ArcticSwitch *sw, struct sw_conn *conn)
{
    struct sw_port *port;
    uint8_t *frame;
    unsigned low, high;

    if (conn->state != SW_CONN_LIVE) {
        return;
    }
    port = &sw->port[conn->port];
    low = port->credit_return_pending[ARCTIC_PRIORITY_LOW];
    high = port->credit_return_pending[ARCTIC_PRIORITY_HIGH];
    if ((!low && !high) || !sw_conn_output_room(conn, SW_CREDIT_FRAME) ||
        !credits_go_now(sw, conn, port)) {
        return;
    }
    port->credit_due_ns = 0;
    frame = sw_conn_output_reserve(conn, SW_CREDIT_FRAME);
    arctic_frame_header_encode(frame, ARCTIC_FRAME_CREDIT, ARCTIC_CREDIT_SIZE);
    arctic_put_le16(frame + ARCTIC_LINK_HEADER_SIZE, low);
    arctic_put_le16(frame + ARCTIC_LINK_HEADER_SIZE + 2, high);
    port->ingress_credits[ARCTIC_PRIORITY_LOW] += low;
    port->ingress_credits[ARCTIC_PRIORITY_HIGH] += high;
    port->credit_return_pending[ARCTIC_PRIORITY_LOW] = 0;
    port->credit_return_pending[ARCTIC_PRIORITY_HIGH] = 0;
}

void sw_flush_all(ArcticSwitch *sw)
{
    do {
        struct sw_conn *conn;

        sw_schedule(sw);
        while ((conn = sw->flush_list)) {
            bool was_full;

            sw->flush_list = conn->next_flush;
            conn->flush_queued = false;
            if (conn->state == SW_CONN_CLOSING) {
                continue;
            }
            conn_return_credits(sw, conn);
            was_full = !sw_conn_output_room(conn, SW_PACKET_FRAME_MAX +
                                                  SW_CREDIT_FRAME);
            if (!conn_send(sw, conn)) {
                sw_conn_close(sw, conn, ARCTIC_DISCONNECT_IO_ERROR);
                continue;
            }
            /* Room came back without an EPOLLOUT to announce it. */
            if (was_full && conn->state == SW_CONN_LIVE &&
                sw_conn_output_room(conn, SW_PACKET_FRAME_MAX +
                                          SW_CREDIT_FRAME)) {
                sw_port_egress_ready(sw, conn->port);
            }
        }
    } while (sw->dirty_list);
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
    conn->watch.kind = SW_WATCH_CONN;
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
    if (sw->epoll_fd >= 0) {
        epoll_watch(sw, fd, &conn->watch, EPOLLIN, EPOLL_CTL_ADD);
    }
    if (sw->timer_fd >= 0) {
        sw_arm_timer(sw, conn->handshake_deadline_ns);
    }
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

        port->stats.disconnects[reason]++;
        port->conn = NULL;
        sw_log(sw, "port %d disconnected (%s)", conn->port,
               arctic_disconnect_reason_name(reason));
        conn->state = SW_CONN_CLOSING;
        sw_port_detach(sw, conn->port);
    } else {
        sw->unattached_disconnects[reason]++;
        sw->pending_conns--;
        sw_log(sw, "connection closed before HELLO was accepted (%s)",
               arctic_disconnect_reason_name(reason));
    }
    conn->state = SW_CONN_CLOSING;
    if (sw->epoll_fd >= 0) {
        epoll_ctl(sw->epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
    }
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

static void bury_closed_connections(ArcticSwitch *sw)
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
    frame = sw_conn_output_reserve(conn, ARCTIC_LINK_HEADER_SIZE +
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
    struct sw_input *in;
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
    if (port->conn && conn_still_alive(port->conn)) {
        reject(sw, conn, ARCTIC_REJECT_NODE_BUSY, ARCTIC_DISCONNECT_REJECTED,
               "node %u is held by a live connection", hello.node_id);
        return;
    }
    if (port->conn) {
        sw_conn_close(sw, port->conn, ARCTIC_DISCONNECT_PEER_CLOSED);
    }

    sw->pending_conns--;
    conn->port = hello.node_id;
    conn->state = SW_CONN_LIVE;
    port->conn = conn;
    port->stats.connects++;
    in = &port->leaf->in[port->leaf_input];
    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        port->egress_credits[prio] = hello.credits[prio];
        /* Packets of an earlier connection may still occupy the input:
         * their credits come back by CREDIT frames as they drain. */
        port->ingress_credits[prio] = sw->config.credits -
                                      in->queue[prio].count;
        port->credit_return_pending[prio] = 0;
        welcome.credits[prio] = port->ingress_credits[prio];
    }
    port->credit_due_ns = 0;
    port->last_frame_ns = sw->now_ns;     /* its HELLO */
    port->last_credit_ns = 0;
    welcome.magic = ARCTIC_LINK_MAGIC;
    welcome.version_major = ARCTIC_LINK_VERSION_MAJOR;
    welcome.version_minor = ARCTIC_LINK_VERSION_MINOR;
    welcome.node_id = hello.node_id;
    welcome.num_nodes = sw->ports;
    welcome.levels = sw->levels;
    frame = sw_conn_output_reserve(conn, ARCTIC_LINK_HEADER_SIZE +
                                         ARCTIC_WELCOME_SIZE);
    arctic_frame_header_encode(frame, ARCTIC_FRAME_WELCOME,
                               ARCTIC_WELCOME_SIZE);
    arctic_welcome_encode(frame + ARCTIC_LINK_HEADER_SIZE, &welcome);
    sw_conn_queue_flush(sw, conn);
    sw_port_egress_ready(sw, conn->port);
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

    port->last_frame_ns = sw->now_ns;
    switch (h->type) {
    case ARCTIC_FRAME_PACKET: {
        /* The frame, not the packet, says whose credit it uses. */
        unsigned prio = ARCTIC_FIELD_GET(ARCTIC_FRAME_FLAGS, PRIORITY,
                                         h->flags);

        if (port->ingress_credits[prio] == 0) {
            sw_log(sw, "port %d sent a %s priority packet without credit",
                   conn->port, prio ? "high" : "low");
            sw_conn_close(sw, conn, ARCTIC_DISCONNECT_CREDIT_OVERRUN);
            return;
        }
        if (--port->ingress_credits[prio] == 0) {
            port->stats.prio[prio].rx_credit_exhausted++;
        }
        sw_ingress(sw, conn->port, prio, body, h->length);
        return;
    }
    case ARCTIC_FRAME_CREDIT: {
        unsigned low = arctic_get_le16(body);
        unsigned high = arctic_get_le16(body + 2);

        port->last_credit_ns = sw->now_ns;
        port->egress_credits[ARCTIC_PRIORITY_LOW] += low;
        port->egress_credits[ARCTIC_PRIORITY_HIGH] += high;
        if (port->egress_credits[ARCTIC_PRIORITY_LOW] > ARCTIC_LINK_MAX_CREDITS ||
            port->egress_credits[ARCTIC_PRIORITY_HIGH] >
            ARCTIC_LINK_MAX_CREDITS) {
            /* No window can be wider than a HELLO can express. */
            sw_conn_close(sw, conn, ARCTIC_DISCONNECT_CREDIT_OVERFLOW);
            return;
        }
        sw_port_egress_ready(sw, conn->port);
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

void sw_conn_input(ArcticSwitch *sw, struct sw_conn *conn)
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

static void conn_event(ArcticSwitch *sw, struct sw_conn *conn,
                       uint32_t events)
{
    if (conn->state == SW_CONN_CLOSING) {
        return;
    }
    if (events & EPOLLOUT) {
        if (!conn_send(sw, conn)) {
            sw_conn_close(sw, conn, ARCTIC_DISCONNECT_IO_ERROR);
            return;
        }
        sw_conn_queue_flush(sw, conn);      /* credits held back */
        if (conn->state == SW_CONN_LIVE) {
            sw_port_egress_ready(sw, conn->port);
        }
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        sw_conn_input(sw, conn);
    }
}

void arctic_switch_adopt_fd(ArcticSwitch *sw, int fd)
{
    g_unix_set_fd_nonblocking(fd, TRUE, NULL);
    sw_conn_new(sw, fd);
}

static void check_handshake_deadlines(ArcticSwitch *sw)
{
    struct sw_conn *conn, *next;

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

/* --- listeners -------------------------------------------------------- */

static void accept_connections(ArcticSwitch *sw, int listen_fd, bool tcp)
{
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                errno != ECONNABORTED) {
                sw_log(sw, "accept: %s", g_strerror(errno));
            }
            return;
        }
        if (tcp) {
            int one = 1;

            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
        sw_conn_new(sw, fd);
    }
}

/*
 * Bind a UNIX stream socket at @path.  A socket file left by a switch that
 * died is replaced; one that a live process answers on is not.
 */
int sw_unix_listen(const char *path, GError **errp)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    struct stat st;
    int fd;

    if (strlen(path) >= sizeof(addr.sun_path)) {
        g_set_error(errp, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "socket path \"%s\" is longer than %zu bytes", path,
                    sizeof(addr.sun_path) - 1);
        return -1;
    }
    strcpy(addr.sun_path, path);
    if (lstat(path, &st) == 0) {
        int probe;

        if (!S_ISSOCK(st.st_mode)) {
            g_set_error(errp, G_IO_ERROR, G_IO_ERROR_EXISTS,
                        "%s exists and is not a socket", path);
            return -1;
        }
        probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && connect(probe, (struct sockaddr *)&addr,
                                  sizeof(addr)) == 0) {
            close(probe);
            g_set_error(errp, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE,
                        "another process is listening on %s", path);
            return -1;
        }
        if (probe >= 0) {
            close(probe);
        }
        unlink(path);
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        listen(fd, 128) < 0) {
        g_set_error(errp, G_IO_ERROR, g_io_error_from_errno(errno),
                    "cannot listen on %s: %s", path, g_strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

static int tcp_listen(const char *address, GError **errp)
{
    g_autofree char *host = NULL;
    const char *colon = strrchr(address, ':');
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC,
        .ai_socktype = SOCK_STREAM,
        .ai_flags = AI_PASSIVE,
    };
    struct addrinfo *res = NULL, *ai;
    int fd = -1, rc, saved = 0;

    if (!colon || !colon[1]) {
        g_set_error(errp, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "TCP address \"%s\": want HOST:PORT (e.g. 0.0.0.0:7000)",
                    address);
        return -1;
    }
    host = g_strndup(address, colon - address);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host) - 2);
        host[strlen(host) - 2] = 0;
    }
    rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
    if (rc != 0) {
        g_set_error(errp, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "TCP address \"%s\": %s", address, gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai; ai = ai->ai_next) {
        int one = 1;

        fd = socket(ai->ai_family,
                    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            listen(fd, 128) == 0) {
            break;
        }
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        g_set_error(errp, G_IO_ERROR, g_io_error_from_errno(saved),
                    "cannot listen on TCP %s: %s", address,
                    g_strerror(saved));
    }
    return fd;
}

/* --- the switch ------------------------------------------------------- */

static bool config_check(const ArcticSwitchConfig *c, GError **errp)
{
    unsigned min_levels;

    if (c->ports < 1 || c->ports > ARCTIC_LINK_MAX_NODES) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--ports %u: want 1..%d", c->ports,
                    ARCTIC_LINK_MAX_NODES);
        return false;
    }
    min_levels = arctic_tree_levels(c->ports);
    if (c->levels && (c->levels < min_levels ||
                      c->levels > ARCTIC_MAX_LEVELS)) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--levels %u: %u ports need %u..%d levels", c->levels,
                    c->ports, min_levels, ARCTIC_MAX_LEVELS);
        return false;
    }
    if (c->credits < 1 || c->credits > ARCTIC_SWITCH_MAX_CREDITS) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--credits %u: want 1..%d", c->credits,
                    ARCTIC_SWITCH_MAX_CREDITS);
        return false;
    }
    if (c->router_buffers < 2 || c->router_buffers > 1024) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--buffers %u: want 2..1024 (one is kept for high "
                    "priority)", c->router_buffers);
        return false;
    }
    if (!(c->link_mbytes_per_s > 0) || c->link_mbytes_per_s > 1e6) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--link-mbytes %g: want a positive bandwidth",
                    c->link_mbytes_per_s);
        return false;
    }
    if (c->hop_latency_ns > 1000000000u) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--hop-latency-ns %u: at most 1 s", c->hop_latency_ns);
        return false;
    }
    return true;
}

ArcticSwitch *arctic_switch_new(const ArcticSwitchConfig *config,
                                GError **errp)
{
    ArcticSwitch *sw;

    if (!config_check(config, errp)) {
        return NULL;
    }
    sw = g_new0(ArcticSwitch, 1);
    sw->config = *config;
    sw->socket_path = g_strdup(config->socket_path);
    sw->tcp_address = g_strdup(config->tcp_address);
    sw->control_path = g_strdup(config->control_path);
    sw->config.socket_path = sw->socket_path;
    sw->config.tcp_address = sw->tcp_address;
    sw->config.control_path = sw->control_path;
    sw->config.pcap_path = NULL;
    sw->ports = config->ports;
    sw->levels = config->levels ? config->levels
                                : arctic_tree_levels(config->ports);
    sw->ns_per_byte = 1000.0 / config->link_mbytes_per_s;
    sw->epoll_fd = sw->wakeup_fd = sw->timer_fd = -1;
    sw->read_buf = g_malloc(SW_CONN_INPUT_BUFFER);
    sw->unix_listen_fd = sw->tcp_listen_fd = sw->control_listen_fd = -1;
    sw->port = g_new0(struct sw_port, sw->ports);
    g_mutex_init(&sw->invoke_lock);
    g_cond_init(&sw->invoke_done);
    g_queue_init(&sw->invoke_queue);
    sw->start_ns = sw->now_ns = sw_clock_ns();
    sw_tree_init(sw, NULL);
    sw_faults_init(sw);

    sw->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    sw->wakeup_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    sw->timer_fd = timerfd_create(CLOCK_MONOTONIC,
                                  TFD_NONBLOCK | TFD_CLOEXEC);
    if (sw->epoll_fd < 0 || sw->wakeup_fd < 0 || sw->timer_fd < 0) {
        g_set_error(errp, G_IO_ERROR, g_io_error_from_errno(errno),
                    "cannot create the event loop: %s", g_strerror(errno));
        goto fail;
    }
    sw->wakeup_watch.kind = SW_WATCH_WAKEUP;
    epoll_watch(sw, sw->wakeup_fd, &sw->wakeup_watch, EPOLLIN, EPOLL_CTL_ADD);
    sw->timer_watch.kind = SW_WATCH_TIMER;
    epoll_watch(sw, sw->timer_fd, &sw->timer_watch, EPOLLIN, EPOLL_CTL_ADD);

    if (sw->socket_path) {
        sw->unix_listen_fd = sw_unix_listen(sw->socket_path, errp);
        if (sw->unix_listen_fd < 0) {
            g_clear_pointer(&sw->socket_path, g_free);
            goto fail;
        }
        sw->unix_watch.kind = SW_WATCH_LISTENER;
        epoll_watch(sw, sw->unix_listen_fd, &sw->unix_watch, EPOLLIN,
                    EPOLL_CTL_ADD);
    }
    if (sw->tcp_address) {
        sw->tcp_listen_fd = tcp_listen(sw->tcp_address, errp);
        if (sw->tcp_listen_fd < 0) {
            goto fail;
        }
        sw->tcp_watch.kind = SW_WATCH_LISTENER;
        sw->tcp_watch.object = sw;      /* marks the TCP listener */
        epoll_watch(sw, sw->tcp_listen_fd, &sw->tcp_watch, EPOLLIN,
                    EPOLL_CTL_ADD);
    }
    if (sw->control_path && !sw_control_listen(sw, errp)) {
        g_clear_pointer(&sw->control_path, g_free);
        goto fail;
    }
    if (config->pcap_path && !arctic_switch_pcap_open(sw, config->pcap_path,
                                                      errp)) {
        goto fail;
    }
    return sw;

fail:
    arctic_switch_free(sw);
    return NULL;
}

static void run_invokes(ArcticSwitch *sw)
{
    struct invoke_request *req;

    g_mutex_lock(&sw->invoke_lock);
    while ((req = g_queue_pop_head(&sw->invoke_queue))) {
        g_mutex_unlock(&sw->invoke_lock);
        req->fn(sw, req->opaque);
        g_mutex_lock(&sw->invoke_lock);
        req->done = true;
        g_cond_broadcast(&sw->invoke_done);
    }
    g_mutex_unlock(&sw->invoke_lock);
}

void arctic_switch_invoke(ArcticSwitch *sw,
                          void (*fn)(ArcticSwitch *sw, void *opaque),
                          void *opaque)
{
    struct invoke_request req = { .fn = fn, .opaque = opaque };
    uint64_t one = 1;

    g_mutex_lock(&sw->invoke_lock);
    if (!sw->running || sw->loop_thread == g_thread_self()) {
        g_mutex_unlock(&sw->invoke_lock);
        fn(sw, opaque);
        return;
    }
    g_queue_push_tail(&sw->invoke_queue, &req);
    if (write(sw->wakeup_fd, &one, sizeof(one)) < 0) {
        /* The counter cannot overflow in practice; the loop still runs
         * the request on its next wake-up. */
    }
    while (!req.done) {
        g_cond_wait(&sw->invoke_done, &sw->invoke_lock);
    }
    g_mutex_unlock(&sw->invoke_lock);
}

void arctic_switch_stop(ArcticSwitch *sw)
{
    uint64_t one = 1;

    sw->stop_requested = 1;
    if (write(sw->wakeup_fd, &one, sizeof(one)) < 0) {
        /* Only EAGAIN is possible, and then a wake-up is pending anyway. */
    }
}

static void dispatch(ArcticSwitch *sw, struct sw_watch *watch,
                     uint32_t events)
{
    uint64_t value;

    switch (watch->kind) {
    case SW_WATCH_LISTENER:
        accept_connections(sw, watch->object ? sw->tcp_listen_fd
                                             : sw->unix_listen_fd,
                           watch->object != NULL);
        break;
    case SW_WATCH_CONN:
        conn_event(sw, watch->object, events);
        break;
    case SW_WATCH_CONTROL_LISTENER:
        sw_control_accept(sw);
        break;
    case SW_WATCH_CONTROL_CLIENT:
        sw_control_event(sw, watch->object, events);
        break;
    case SW_WATCH_WAKEUP:
        if (read(sw->wakeup_fd, &value, sizeof(value)) < 0) {
            /* EAGAIN: another event already consumed it. */
        }
        run_invokes(sw);
        break;
    case SW_WATCH_TIMER:
        if (read(sw->timer_fd, &value, sizeof(value)) < 0) {
            /* Spurious: the deadline check below is harmless. */
        }
        sw->timer_armed_ns = 0;
        sw_timer_expired(sw);
        check_handshake_deadlines(sw);
        break;
    }
}

void arctic_switch_run(ArcticSwitch *sw)
{
    struct epoll_event events[128];

    g_mutex_lock(&sw->invoke_lock);
    sw->loop_thread = g_thread_self();
    sw->running = 1;
    g_mutex_unlock(&sw->invoke_lock);
    run_invokes(sw);

    while (!sw->stop_requested) {
        int n = epoll_wait(sw->epoll_fd, events, G_N_ELEMENTS(events), -1);
        int i;

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            g_error("epoll_wait: %s", g_strerror(errno));
        }
        sw->now_ns = sw_clock_ns();
        for (i = 0; i < n; i++) {
            dispatch(sw, events[i].data.ptr, events[i].events);
        }
        sw_flush_all(sw);
        bury_closed_connections(sw);
    }

    g_mutex_lock(&sw->invoke_lock);
    sw->running = 0;
    sw->loop_thread = NULL;
    g_mutex_unlock(&sw->invoke_lock);
    run_invokes(sw);
    sw->stop_requested = 0;
}

int arctic_switch_tcp_port(ArcticSwitch *sw)
{
    struct sockaddr_storage addr;
    socklen_t len = sizeof(addr);

    if (sw->tcp_listen_fd < 0 ||
        getsockname(sw->tcp_listen_fd, (struct sockaddr *)&addr, &len) < 0) {
        return -1;
    }
    return addr.ss_family == AF_INET6
           ? ntohs(((struct sockaddr_in6 *)&addr)->sin6_port)
           : ntohs(((struct sockaddr_in *)&addr)->sin_port);
}

void arctic_switch_free(ArcticSwitch *sw)
{
    if (!sw) {
        return;
    }
    while (sw->conns) {
        sw_conn_close(sw, sw->conns, ARCTIC_DISCONNECT_SHUTDOWN);
    }
    bury_closed_connections(sw);
    sw_control_close_all(sw);
    arctic_switch_pcap_close(sw);
    if (sw->unix_listen_fd >= 0) {
        close(sw->unix_listen_fd);
        unlink(sw->socket_path);
    }
    if (sw->tcp_listen_fd >= 0) {
        close(sw->tcp_listen_fd);
    }
    if (sw->control_listen_fd >= 0) {
        close(sw->control_listen_fd);
        unlink(sw->control_path);
    }
    if (sw->epoll_fd >= 0) {
        close(sw->epoll_fd);
    }
    if (sw->wakeup_fd >= 0) {
        close(sw->wakeup_fd);
    }
    if (sw->timer_fd >= 0) {
        close(sw->timer_fd);
    }
    sw_tree_free(sw);
    sw_faults_free(sw);
    g_free(sw->port);
    g_free(sw->read_buf);
    g_mutex_clear(&sw->invoke_lock);
    g_cond_clear(&sw->invoke_done);
    g_free(sw->socket_path);
    g_free(sw->tcp_address);
    g_free(sw->control_path);
    g_free(sw);
}
