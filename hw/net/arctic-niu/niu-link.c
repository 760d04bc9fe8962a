/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU link to arctic-switch over a chardev socket (UNIX or TCP; use
 * reconnect-ms= on the chardev so a restarted switch is found again).
 *
 * Implements include/arctic/link.h: a HELLO/WELCOME handshake, frames
 * reassembled from whatever pieces the socket delivers, per-priority
 * credits both ways, and an output buffer drained as the socket allows so
 * the main loop never blocks on a slow switch.  The link going down loses
 * nothing: packets stay in their retransmit lines and go out again when a
 * new session is up.  A frame that breaks the protocol drops the
 * connection, since the stream cannot be trusted after it.
 */

#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "qemu/log.h"
#include "qapi/error.h"
#include "trace.h"

#include "arctic-niu.h"

/* For traces and the device's state view. */
const char *arctic_link_state_name(ArcticLinkState state)
{
    static const char *const names[] = {
        [ARCTIC_LINK_DOWN] = "down",
        [ARCTIC_LINK_HELLO_SENT] = "handshake",
        [ARCTIC_LINK_UP] = "up",
    };

    return names[state];
}

static void link_set_state(ArcticNiuState *s, ArcticLinkState state)
{
    trace_arctic_niu_link_state(s->node_id,
                                arctic_link_state_name(s->link_state),
                                arctic_link_state_name(state));
    s->link_state = state;
}

bool arctic_link_is_up(ArcticNiuState *s)
{
    return s->link_state == ARCTIC_LINK_UP;
}

static void link_append_frame(ArcticNiuState *s, uint16_t type,
                              uint16_t flags, const uint8_t *body,
                              uint32_t len)
{
    uint8_t header[ARCTIC_LINK_HEADER_SIZE];

    arctic_frame_header_encode_flags(header, type, flags, len);
    g_byte_array_append(s->out_buf, header, sizeof(header));
    g_byte_array_append(s->out_buf, body, len);
}

static gboolean link_out_ready(void *do_not_use, GIOCondition cond,
                               void *opaque);

static void link_flush(ArcticNiuState *s)
{
    while (s->out_buf->len) {
        int n = qemu_chr_fe_write(&s->chr, s->out_buf->data,
                                  s->out_buf->len);
        if (n <= 0) {
            if (!s->out_watch) {
                s->out_watch = qemu_chr_fe_add_watch(&s->chr,
                                                     G_IO_OUT | G_IO_HUP,
                                                     link_out_ready, s);
            }
            return;
        }
        g_byte_array_remove_range(s->out_buf, 0, n);
    }
    /* Room again: take input that was held back while we could not answer. */
    qemu_chr_fe_accept_input(&s->chr);
}

static gboolean link_out_ready(void *do_not_use, GIOCondition cond,
                               void *opaque)
{
    ArcticNiuState *s = opaque;
    bool guarded = arctic_niu_guard_enter(s);

    s->out_watch = 0;
    link_flush(s);
    arctic_link_pump(s);
    arctic_niu_guard_leave(s, guarded);
    return G_SOURCE_REMOVE;
}

static void link_send_packet(ArcticNiuState *s, uint8_t prio,
                             const uint8_t *wire, size_t size)
{
    s->tx_credits[prio]--;
    link_append_frame(s, ARCTIC_FRAME_PACKET,
                      FIELD_DP32(0, ARCTIC_FRAME_FLAGS, PRIORITY, prio),
                      wire, size);
}

/*
 * Move what is ready onto the link, as far as credits and the output
 * buffer allow: owed acks and nacks first (they free the peers' lines),
 * then high-priority data, then low.  Credits are per priority, so a
 * stalled low-priority network never holds back the high one.
 */
void arctic_link_pump(ArcticNiuState *s)
{
    bool stalled = false;
    unsigned p;

    if (s->link_state != ARCTIC_LINK_UP) {
        return;
    }
    if (s->credits_to_return[ARCTIC_PRIORITY_LOW] ||
        s->credits_to_return[ARCTIC_PRIORITY_HIGH]) {
        uint8_t body[ARCTIC_CREDIT_SIZE];

        arctic_put_le16(body, s->credits_to_return[ARCTIC_PRIORITY_LOW]);
        arctic_put_le16(body + 2, s->credits_to_return[ARCTIC_PRIORITY_HIGH]);
        for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
            s->rx_outstanding[p] += s->credits_to_return[p];
            s->credits_to_return[p] = 0;
        }
        link_append_frame(s, ARCTIC_FRAME_CREDIT, 0, body, sizeof(body));
    }
    while (s->out_buf->len < ARCTIC_OUT_LIMIT) {
        uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
        size_t size;
        ArcticLine *line;

        if (s->tx_credits[ARCTIC_PRIORITY_HIGH]) {
            if (arctic_rx_next_control(s, wire, &size)) {
                link_send_packet(s, ARCTIC_PRIORITY_HIGH, wire, size);
                continue;
            }
            line = arctic_tx_next_line(s, ARCTIC_PRIORITY_HIGH);
            if (line) {
                link_send_packet(s, ARCTIC_PRIORITY_HIGH, line->wire,
                                 line->size);
                arctic_tx_line_sent(s, line);
                continue;
            }
        } else if (s->ctrl_count ||
                   arctic_tx_next_line(s, ARCTIC_PRIORITY_HIGH)) {
            stalled = true;
        }
        line = arctic_tx_next_line(s, ARCTIC_PRIORITY_LOW);
        if (line && s->tx_credits[ARCTIC_PRIORITY_LOW]) {
            link_send_packet(s, ARCTIC_PRIORITY_LOW, line->wire, line->size);
            arctic_tx_line_sent(s, line);
            continue;
        }
        stalled |= line != NULL;
        break;
    }
    if (stalled) {
        arctic_niu_count(s, ARCTIC_CNT_CREDIT_STALLS);
        trace_arctic_niu_link_credit_stall(
            s->node_id, s->tx_credits[ARCTIC_PRIORITY_HIGH],
            s->tx_credits[ARCTIC_PRIORITY_LOW]);
    }
    link_flush(s);
}

static void link_protocol_error(ArcticNiuState *s, const char *what,
                                uint32_t value)
{
    qemu_log_mask(LOG_GUEST_ERROR, "arctic-niu: node %u: link protocol "
                  "error: %s (0x%x); reconnecting\n", s->node_id, what, value);
    trace_arctic_niu_link_protocol_error(s->node_id, what, value);
    arctic_niu_set_error(s, ARCTIC_ERR_LINK_PROTOCOL, 0, 0, value);
    s->in_len = 0;
    qemu_chr_fe_disconnect(&s->chr);
}

static void link_handle_welcome(ArcticNiuState *s, const uint8_t *body)
{
    struct arctic_welcome w;
    unsigned p;

    arctic_welcome_decode(body, &w);
    if (w.magic != ARCTIC_LINK_MAGIC ||
        w.version_major != ARCTIC_LINK_VERSION_MAJOR) {
        link_protocol_error(s, "WELCOME with bad magic or version",
                            w.version_major);
        return;
    }
    if (w.node_id != s->node_id || w.num_nodes == 0 ||
        w.num_nodes > ARCTIC_LINK_MAX_NODES || w.node_id >= w.num_nodes ||
        w.levels == 0 || w.levels > ARCTIC_MAX_LEVELS) {
        link_protocol_error(s, "WELCOME with inconsistent network",
                            w.node_id);
        return;
    }
    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        /* 0 is fine: credits can follow in CREDIT frames (a switch
         * whose buffers still hold packets of our last session). */
        if (w.credits[p] > ARCTIC_LINK_MAX_CREDITS) {
            link_protocol_error(s, "WELCOME with bad credits", w.credits[p]);
            return;
        }
        s->tx_credits[p] = w.credits[p];
    }
    s->num_nodes = w.num_nodes;
    s->net_levels = w.levels;
    s->link_rejected = false;
    s->link_up_count++;
    arctic_niu_count(s, ARCTIC_CNT_LINK_UPS);
    link_set_state(s, ARCTIC_LINK_UP);
    trace_arctic_niu_link_welcome(s->node_id, w.num_nodes, w.levels,
                                  w.credits[ARCTIC_PRIORITY_HIGH],
                                  w.credits[ARCTIC_PRIORITY_LOW]);
    arctic_tx_link_up(s);
    arctic_link_pump(s);
}

static void link_handle_reject(ArcticNiuState *s, const uint8_t *body)
{
    char text[ARCTIC_REJECT_TEXT_ESCAPED_SIZE];
    uint32_t reason = arctic_reject_decode(body, text);

    if (!s->link_rejected) {
        /* Said once per refusal streak: the chardev keeps reconnecting. */
        warn_report("arctic-niu: switch refused node %u: %s (reason %u)",
                    s->node_id, text, reason);
    }
    s->link_rejected = true;
    arctic_niu_set_error(s, ARCTIC_ERR_LINK_REJECTED, 0, 0, reason);
    trace_arctic_niu_link_reject(s->node_id, reason, text);
    qemu_chr_fe_disconnect(&s->chr);
}

static void link_handle_packet(ArcticNiuState *s, uint8_t prio,
                               const uint8_t *body, uint32_t len)
{
    if (s->rx_outstanding[prio] == 0) {
        link_protocol_error(s, "PACKET beyond the credits granted", prio);
        return;
    }
    s->rx_outstanding[prio]--;
    /* The NIU answers every packet at once, so the buffer is free again. */
    s->credits_to_return[prio]++;
    arctic_rx_packet(s, body, len);
}

static void link_handle_credit(ArcticNiuState *s, const uint8_t *body)
{
    uint32_t lo = arctic_get_le16(body), hi = arctic_get_le16(body + 2);

    if (s->tx_credits[ARCTIC_PRIORITY_LOW] + lo > ARCTIC_LINK_MAX_CREDITS ||
        s->tx_credits[ARCTIC_PRIORITY_HIGH] + hi > ARCTIC_LINK_MAX_CREDITS) {
        link_protocol_error(s, "CREDIT beyond any sane window", lo + hi);
        return;
    }
    s->tx_credits[ARCTIC_PRIORITY_LOW] += lo;
    s->tx_credits[ARCTIC_PRIORITY_HIGH] += hi;
}

static void link_dispatch(ArcticNiuState *s, uint16_t type, uint16_t flags,
                          const uint8_t *body, uint32_t len)
{
    trace_arctic_niu_link_frame_in(s->node_id, type, len);
    if (s->link_state == ARCTIC_LINK_HELLO_SENT) {
        if (type == ARCTIC_FRAME_WELCOME) {
            link_handle_welcome(s, body);
        } else if (type == ARCTIC_FRAME_REJECT) {
            link_handle_reject(s, body);
        } else {
            link_protocol_error(s, "frame before WELCOME", type);
        }
        return;
    }
    switch (type) {
    case ARCTIC_FRAME_PACKET:
        link_handle_packet(s, FIELD_EX32(flags, ARCTIC_FRAME_FLAGS, PRIORITY),
                           body, len);
        break;
    case ARCTIC_FRAME_CREDIT:
        link_handle_credit(s, body);
        break;
    default:
        link_protocol_error(s, "unexpected frame", type);
        break;
    }
}

static int link_can_read(void *opaque)
{
    ArcticNiuState *s = opaque;

    /* Every packet may owe an answer: stop reading while the answers
     * cannot be written, and let the socket push back on the switch. */
    if (s->link_state == ARCTIC_LINK_DOWN || s->out_buf->len >= ARCTIC_OUT_LIMIT) {
        return 0;
    }
    return 4096;
}

static void link_read(void *opaque, const uint8_t *buf, int size)
{
    ArcticNiuState *s = opaque;
    bool guarded = arctic_niu_guard_enter(s);

    while (size > 0 && s->link_state != ARCTIC_LINK_DOWN) {
        struct arctic_frame_header h;
        uint32_t want = ARCTIC_LINK_HEADER_SIZE;
        uint32_t take;
        enum arctic_frame_error err;

        if (s->in_len >= ARCTIC_LINK_HEADER_SIZE) {
            arctic_frame_header_decode(s->in_buf, &h);
            want += h.length;
        }
        take = MIN((uint32_t)size, want - s->in_len);
        memcpy(s->in_buf + s->in_len, buf, take);
        s->in_len += take;
        buf += take;
        size -= take;
        if (s->in_len < want) {
            continue;
        }
        if (want == ARCTIC_LINK_HEADER_SIZE) {
            arctic_frame_header_decode(s->in_buf, &h);
            err = arctic_frame_header_check(&h);
            if (err != ARCTIC_FRAME_OK) {
                link_protocol_error(s, "malformed frame header", err);
                goto out;
            }
            if (h.length) {
                continue;
            }
        }
        s->in_len = 0;
        link_dispatch(s, h.type, h.flags, s->in_buf + ARCTIC_LINK_HEADER_SIZE,
                      h.length);
    }
    arctic_link_pump(s);
out:
    arctic_niu_guard_leave(s, guarded);
}

static void link_event(void *opaque, QEMUChrEvent event)
{
    ArcticNiuState *s = opaque;
    uint8_t body[ARCTIC_HELLO_SIZE];
    struct arctic_hello hello = {
        .magic = ARCTIC_LINK_MAGIC,
        .version_major = ARCTIC_LINK_VERSION_MAJOR,
        .version_minor = ARCTIC_LINK_VERSION_MINOR,
        .node_id = s->node_id,
    };
    unsigned p;

    switch (event) {
    case CHR_EVENT_OPENED:
        g_byte_array_set_size(s->out_buf, 0);
        s->in_len = 0;
        for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
            s->tx_credits[p] = 0;
            s->credits_to_return[p] = 0;
            s->rx_outstanding[p] = s->rx_credits;
            hello.credits[p] = s->rx_credits;
        }
        link_set_state(s, ARCTIC_LINK_HELLO_SENT);
        arctic_hello_encode(body, &hello);
        link_append_frame(s, ARCTIC_FRAME_HELLO, 0, body, sizeof(body));
        link_flush(s);
        break;
    case CHR_EVENT_CLOSED:
        if (s->link_state == ARCTIC_LINK_UP) {
            arctic_niu_count(s, ARCTIC_CNT_LINK_DOWNS);
        }
        link_set_state(s, ARCTIC_LINK_DOWN);
        g_byte_array_set_size(s->out_buf, 0);
        if (s->out_watch) {
            g_source_remove(s->out_watch);
            s->out_watch = 0;
        }
        break;
    default:
        break;
    }
}

void arctic_link_init(ArcticNiuState *s, Error **errp)
{
    s->out_buf = g_byte_array_new();
    s->link_state = ARCTIC_LINK_DOWN;
    if (!qemu_chr_fe_backend_connected(&s->chr)) {
        return;     /* no link: a standalone NIU, useful for register tests */
    }
    qemu_chr_fe_set_handlers(&s->chr, link_can_read, link_read, link_event,
                             NULL, s, NULL, true);
}

void arctic_link_cleanup(ArcticNiuState *s)
{
    if (s->out_watch) {
        g_source_remove(s->out_watch);
        s->out_watch = 0;
    }
    qemu_chr_fe_deinit(&s->chr, false);
    g_byte_array_free(s->out_buf, true);
}
