/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU link session with arctic-switch (see niu-link.h): a
 * HELLO/WELCOME handshake, frames reassembled from whatever pieces the
 * transport delivers, per-priority credits both ways, and an output
 * buffer drained as the transport allows so no thread ever blocks on a
 * slow switch.  The link going down loses nothing: packets stay in the
 * owner's retransmit lines and go out again when a new session is up.  A
 * frame that breaks the protocol drops the connection, since the stream
 * cannot be trusted after it.
 */

#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "qemu/log.h"
#include "qapi/error.h"
#include "crypto/hmac.h"
#include "crypto/random.h"
#include "trace.h"

#include "niu-link.h"

const char *niu_link_state_name(NiuLinkState state)
{
    static const char *const names[] = {
        [NIU_LINK_DOWN] = "down",
        [NIU_LINK_HELLO_SENT] = "handshake",
        [NIU_LINK_UP] = "up",
    };

    return names[state];
}

const char *niu_link_transport_name(const NiuLink *link)
{
    return link->transport ? link->transport->name : "none";
}

static void link_set_state(NiuLink *link, NiuLinkState state)
{
    trace_arctic_niu_link_state(link->node_id,
                                niu_link_state_name(link->state),
                                niu_link_state_name(state));
    link->state = state;
}

bool niu_link_is_up(const NiuLink *link)
{
    return link->state == NIU_LINK_UP;
}

static void link_append_frame(NiuLink *link, uint16_t type, uint16_t flags,
                              const uint8_t *body, uint32_t len)
{
    uint8_t header[ARCTIC_LINK_HEADER_SIZE];

    arctic_frame_header_encode_flags(header, type, flags, len);
    g_byte_array_append(link->out_buf, header, sizeof(header));
    g_byte_array_append(link->out_buf, body, len);
}

/*
 * A timed link sends once the cluster's clock runs, without credits: what
 * it sends is bounded by the virtual time its engine charges per packet,
 * and the output buffer holds what the transport cannot take yet (the
 * switch reads it before it answers the next TIME_SYNC).
 */
bool niu_link_can_send(const NiuLink *link, uint8_t prio)
{
    if (link->timed) {
        return link->state == NIU_LINK_UP && link->time_started;
    }
    return link->state == NIU_LINK_UP && link->tx_credits[prio] &&
           link->out_buf->len < NIU_LINK_OUT_LIMIT;
}

/* Where the route of @wire, a packet from @src, leads in this network. */
static bool link_route(const NiuLink *link, unsigned src, const uint8_t *wire,
                       unsigned *dst)
{
    return arctic_route_in_tree(src, link->levels,
                                arctic_get_le32(wire +
                                                ARCTIC_WIRE_WORDS_OFFSET),
                                arctic_get_le32(wire +
                                                ARCTIC_WIRE_WORDS_OFFSET + 4),
                                dst);
}

/*
 * Link 1.5: a packet whose route leads to a node a direct ring reaches
 * goes into that ring, with no credit (the ring's room is the window).
 * Whatever the switch would drop (a route out of the tree, to no node or
 * back to us) goes to the switch, which drops and counts it.
 */
static bool link_send_direct(NiuLink *link, uint16_t flags, uint8_t prio,
                             const uint8_t *wire, size_t size)
{
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MAX_SIZE];
    unsigned dst;

    if (size > ARCTIC_WIRE_MAX_SIZE ||
        !link_route(link, link->node_id, wire, &dst) ||
        dst >= link->num_nodes || dst == link->node_id) {
        return false;
    }
    arctic_frame_header_encode_flags(frame, ARCTIC_FRAME_PACKET, flags, size);
    memcpy(frame + ARCTIC_LINK_HEADER_SIZE, wire, size);
    if (!link->transport->direct_write(link, dst, prio, frame,
                                       ARCTIC_LINK_HEADER_SIZE + size)) {
        return false;
    }
    stat64_add(&link->direct_sent, 1);
    return true;
}

void niu_link_send(NiuLink *link, uint8_t prio, const uint8_t *wire,
                   size_t size)
{
    uint16_t flags = FIELD_DP32(0, ARCTIC_FRAME_FLAGS, PRIORITY, prio);

    assert(niu_link_can_send(link, prio));
    if (link->direct && link_send_direct(link, flags, prio, wire, size)) {
        return;
    }
    if (link->timed) {
        uint8_t body[ARCTIC_TIMED_PACKET_HEADER + ARCTIC_WIRE_MAX_SIZE];

        assert(size <= ARCTIC_WIRE_MAX_SIZE);
        arctic_put_le64(body, link->ops->stamp(link, prio, wire, size));
        memcpy(body + ARCTIC_TIMED_PACKET_HEADER, wire, size);
        link_append_frame(link, ARCTIC_FRAME_TIMED_PACKET, flags, body,
                          ARCTIC_TIMED_PACKET_HEADER + size);
        return;
    }
    link->tx_credits[prio]--;
    link_append_frame(link, ARCTIC_FRAME_PACKET, flags, wire, size);
}

/* Ask the owner to be told (NiuLinkOps.deferred) within defer_ns. */
void niu_link_defer(NiuLink *link)
{
    if (link->state == NIU_LINK_UP && link->transport && !link->timed) {
        int64_t now = get_clock();

        if (!link->own_due_ns) {
            link->own_due_ns = now + link->defer_ns;
        }
        link->transport->defer(link, MAX(link->own_due_ns - now, 0));
    }
}

/*
 * Ask for NiuLinkOps.wake in @delay_ns (host time), through the same
 * timer as the deferral: the link thread's deadline, which a busy-polling
 * vCPU serves, or the chardev's timer.  False when the link is down: the
 * owner does its work now.
 */
bool niu_link_wake_at(NiuLink *link, int64_t delay_ns)
{
    if (link->state != NIU_LINK_UP || !link->transport || link->timed) {
        return false;
    }
    link->transport->defer(link, delay_ns);
    return true;
}

/*
 * Credits go back with other frames, or alone once half the window of a
 * priority waits for them, or when the deferral runs out: a CREDIT frame
 * alone per packet would wake the switch once more per packet.
 */
static bool link_credits_go_now(NiuLink *link)
{
    unsigned p;

    if (link->out_buf->len || link->credits_due || !link->defer_ns) {
        return true;
    }
    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        if (link->credits_to_return[p] * 2 >= link->rx_credits) {
            return true;
        }
    }
    return false;
}

/*
 * Hand the output buffer to the transport, with the credits of the
 * packets taken since the last CREDIT frame.  One flush is one write
 * however many frames a burst made.
 */
void niu_link_flush(NiuLink *link)
{
    size_t n;

    if (link->state == NIU_LINK_UP &&
        (link->credits_to_return[ARCTIC_PRIORITY_LOW] ||
         link->credits_to_return[ARCTIC_PRIORITY_HIGH])) {
        uint8_t body[ARCTIC_CREDIT_SIZE];
        unsigned p;

        if (!link_credits_go_now(link)) {
            niu_link_defer(link);
            return;
        }
        link->credits_due = false;
        arctic_put_le16(body, link->credits_to_return[ARCTIC_PRIORITY_LOW]);
        arctic_put_le16(body + 2,
                        link->credits_to_return[ARCTIC_PRIORITY_HIGH]);
        for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
            link->rx_outstanding[p] += link->credits_to_return[p];
            link->credits_to_return[p] = 0;
        }
        link_append_frame(link, ARCTIC_FRAME_CREDIT, 0, body, sizeof(body));
    }
    if (link->out_blocked || !link->out_buf->len || !link->transport) {
        return;
    }
    trace_arctic_niu_link_flush(link->node_id, link->out_buf->len);
    n = link->transport->write(link, link->out_buf->data, link->out_buf->len);
    trace_arctic_niu_link_write(link->node_id, link->out_buf->len, n);
    g_byte_array_remove_range(link->out_buf, 0, n);
    if (link->out_buf->len) {
        link->out_blocked = true;       /* until niu_link_writable() */
        return;
    }
    /* Room again: take input that was held back while we could not answer. */
    link->transport->accept_input(link);
}

/* Hand work to the transport's thread; false: do it yourself. */
bool niu_link_post(NiuLink *link)
{
    return link->state == NIU_LINK_UP && link->transport &&
           link->transport->post && link->transport->post(link);
}

void niu_link_posted_due(NiuLink *link)
{
    if (link->paused) {
        link->resume_due = true;
    } else if (link->state == NIU_LINK_UP) {
        link->ops->posted(link);
    }
}

/*
 * Without the owner's lock, in the transport's own thread, after each of
 * its reports: the owner finishes what needs the BQL.
 */
void niu_link_released(NiuLink *link)
{
    if (link->ops->released) {
        link->ops->released(link);
    }
}

/*
 * The transport's timer ran out: the link's own deferral, if its time has
 * come (what was held back goes now), and the owner's wake-up, which
 * checks its own time.  A deferral not yet due is asked for again.
 */
void niu_link_deferred_due(NiuLink *link)
{
    int64_t now;

    if (link->state != NIU_LINK_UP) {
        return;
    }
    if (link->paused) {
        link->resume_due = true;
        return;
    }
    now = get_clock();
    if (link->own_due_ns && now >= link->own_due_ns) {
        link->own_due_ns = 0;
        link->credits_due = true;
        link->ops->deferred(link);
    }
    link->ops->wake(link);
    niu_link_flush(link);
    if (link->own_due_ns) {
        niu_link_defer(link);       /* keeps its deadline */
    }
}

void niu_link_writable(NiuLink *link)
{
    link->out_blocked = false;
    niu_link_flush(link);
    if (link->paused) {
        link->resume_due = true;
    } else if (link->state == NIU_LINK_UP) {
        link->ops->ready(link);
    }
}

/*
 * The connection broke the link protocol (@what, with @value): the device
 * says so and the transport drops the connection.  Transports call it too,
 * for what only they can see (a shared ring with impossible indices).
 */
void niu_link_broken(NiuLink *link, const char *what, uint32_t value)
{
    g_autofree char *text = g_strdup_printf("link protocol error: %s (0x%x); "
                                            "reconnecting", what, value);

    trace_arctic_niu_link_protocol_error(link->node_id, what, value);
    link->ops->error(link, ARCTIC_ERR_LINK_PROTOCOL, value, text);
    niu_link_closed(link);
    link->transport->disconnect(link);
}

/* --- authentication (arctic/link.h, link 1.3) ------------------------ */

/*
 * The switch or its answer did not prove the cluster's key (@what): the
 * device reports a refusal for the reason AUTH, and the session ends; the
 * transport tries again at its reconnect interval.
 */
static void link_auth_refused(NiuLink *link, const char *what)
{
    g_autofree char *text = g_strdup_printf("link authentication: %s", what);

    link->rejected = true;
    trace_arctic_niu_link_auth(link->node_id, what);
    link->ops->error(link, ARCTIC_ERR_LINK_REJECTED, ARCTIC_REJECT_AUTH,
                     text);
    niu_link_closed(link);
    link->transport->disconnect(link);
}

/* HMAC-SHA256 with the key of arctic_auth_message()'s bytes. */
static bool link_auth_mac(NiuLink *link, enum arctic_auth_role role,
                          const uint8_t *their_nonce,
                          const uint8_t *our_nonce,
                          uint8_t mac[ARCTIC_AUTH_MAC_SIZE])
{
    uint8_t message[ARCTIC_AUTH_MESSAGE_SIZE];
    unsigned len = arctic_auth_message(message, role, their_nonce, our_nonce,
                                       link->hello_body);
    g_autoptr(QCryptoHmac) hmac = NULL;
    g_autofree uint8_t *result = NULL;
    size_t result_len = 0;
    Error *err = NULL;

    hmac = qcrypto_hmac_new(QCRYPTO_HASH_ALGO_SHA256, link->secret,
                            link->secret_len, &err);
    if (!hmac || qcrypto_hmac_bytes(hmac, (const char *)message, len,
                                    &result, &result_len, &err) < 0 ||
        result_len != ARCTIC_AUTH_MAC_SIZE) {
        error_free(err);
        return false;
    }
    memcpy(mac, result, ARCTIC_AUTH_MAC_SIZE);
    return true;
}

/* AUTH_CHALLENGE: our nonce and our MAC of both nonces and the HELLO. */
static void link_handle_challenge(NiuLink *link, const uint8_t *body)
{
    uint8_t answer[ARCTIC_AUTH_RESPONSE_SIZE];
    Error *err = NULL;

    if (!link->secret) {
        link_auth_refused(link, "the switch asks for the cluster's secret "
                          "(link-secret=)");
        return;
    }
    if (link->challenged) {
        niu_link_broken(link, "a second AUTH_CHALLENGE", 0);
        return;
    }
    link->challenged = true;
    memcpy(link->switch_nonce, body, ARCTIC_AUTH_NONCE_SIZE);
    if (qcrypto_random_bytes(link->own_nonce, ARCTIC_AUTH_NONCE_SIZE,
                             &err) < 0) {
        error_free(err);
        link_auth_refused(link, "no randomness for a nonce");
        return;
    }
    memcpy(answer, link->own_nonce, ARCTIC_AUTH_NONCE_SIZE);
    if (!link_auth_mac(link, ARCTIC_AUTH_NIU, link->switch_nonce,
                       link->own_nonce, answer + ARCTIC_AUTH_NONCE_SIZE)) {
        link_auth_refused(link, "HMAC-SHA256 is not available");
        return;
    }
    link_append_frame(link, ARCTIC_FRAME_AUTH_RESPONSE, 0, answer,
                      sizeof(answer));
}

/* AUTH_PROOF: the switch's MAC of the nonces (its view) and our HELLO. */
static void link_handle_proof(NiuLink *link, const uint8_t *body)
{
    uint8_t want[ARCTIC_AUTH_MAC_SIZE];

    if (!link->challenged || link->proved) {
        niu_link_broken(link, "AUTH_PROOF without a challenge answered", 0);
        return;
    }
    if (!link_auth_mac(link, ARCTIC_AUTH_SWITCH, link->own_nonce,
                       link->switch_nonce, want) ||
        !arctic_auth_mac_equal(want, body)) {
        link_auth_refused(link, "the switch did not prove it knows the "
                          "cluster's secret");
        return;
    }
    link->proved = true;
}

void niu_link_set_secret(NiuLink *link, const uint8_t *key, size_t len)
{
    g_free(link->secret);
    link->secret = len ? g_memdup2(key, len) : NULL;
    link->secret_len = len;
}

static void link_handle_welcome(NiuLink *link, uint16_t flags,
                                const uint8_t *body)
{
    struct arctic_welcome w;
    unsigned p;

    if (link->secret && !link->proved) {
        /* A switch that does not know the key is not the cluster's. */
        link_auth_refused(link, "a WELCOME from a switch that did not "
                          "prove the cluster's secret");
        return;
    }
    arctic_welcome_decode(body, &w);
    if (w.magic != ARCTIC_LINK_MAGIC ||
        w.version_major != ARCTIC_LINK_VERSION_MAJOR) {
        niu_link_broken(link, "WELCOME with bad magic or version",
                            w.version_major);
        return;
    }
    if (w.node_id != link->node_id || w.num_nodes == 0 ||
        w.num_nodes > ARCTIC_LINK_MAX_NODES || w.node_id >= w.num_nodes ||
        w.levels == 0 || w.levels > ARCTIC_MAX_LEVELS) {
        niu_link_broken(link, "WELCOME with inconsistent network",
                            w.node_id);
        return;
    }
    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        /*
         * 0 is fine: credits can follow in CREDIT frames (a switch
         * whose buffers still hold packets of our last session).
         */
        if (w.credits[p] > ARCTIC_LINK_MAX_CREDITS) {
            niu_link_broken(link, "WELCOME with bad credits",
                                w.credits[p]);
            return;
        }
        link->tx_credits[p] = w.credits[p];
    }
    if (FIELD_EX32(flags, ARCTIC_WELCOME_FLAGS, TIMED) != link->timed) {
        g_autofree char *text = g_strdup_printf(
            "the switch %s virtual time and this NIU %s (timed=)",
            link->timed ? "does not keep" : "keeps",
            link->timed ? "does" : "does not");

        /* As the switch's own REJECT TIMING would say: a refusal. */
        link->rejected = true;
        trace_arctic_niu_link_reject(link->node_id, ARCTIC_REJECT_TIMING,
                                     text);
        link->ops->error(link, ARCTIC_ERR_LINK_REJECTED, ARCTIC_REJECT_TIMING,
                         text);
        niu_link_closed(link);
        link->transport->disconnect(link);
        return;
    }
    if (FIELD_EX32(flags, ARCTIC_WELCOME_FLAGS, CPU_WAKE) &&
        !FIELD_EX32(flags, ARCTIC_WELCOME_FLAGS, RINGS)) {
        niu_link_broken(link, "WELCOME with CPU_WAKE but no rings", flags);
        return;
    }
    if (FIELD_EX32(flags, ARCTIC_WELCOME_FLAGS, RINGS)) {
        if (!link->transport->rings_up ||
            !link->transport->rings_up(link,
                    FIELD_EX32(flags, ARCTIC_WELCOME_FLAGS, CPU_WAKE))) {
            niu_link_broken(link, "WELCOME took rings nobody offered", flags);
            return;
        }
        link->rings = true;
    }
    if (FIELD_EX32(flags, ARCTIC_WELCOME_FLAGS, DIRECT)) {
        if (!link->rings || !link->direct_ok || link->timed) {
            niu_link_broken(link, "WELCOME with DIRECT the HELLO did not "
                            "offer", flags);
            return;
        }
        link->direct = true;
    }
    link->num_nodes = w.num_nodes;
    link->levels = w.levels;
    link->rejected = false;
    link->up_count++;
    link_set_state(link, NIU_LINK_UP);
    if (link->timed) {
        link->transport->timed(link);
    }
    trace_arctic_niu_link_welcome(link->node_id, w.num_nodes, w.levels,
                                  w.credits[ARCTIC_PRIORITY_HIGH],
                                  w.credits[ARCTIC_PRIORITY_LOW],
                                  link->rings);
    link->ops->up(link);
}

static void link_handle_reject(NiuLink *link, const uint8_t *body)
{
    char text[ARCTIC_REJECT_TEXT_ESCAPED_SIZE];
    uint32_t reason = arctic_reject_decode(body, text);
    g_autofree char *what = g_strdup_printf("the switch refused the link: %s "
                                            "(reason %u)", text, reason);

    link->rejected = true;
    trace_arctic_niu_link_reject(link->node_id, reason, text);
    link->ops->error(link, ARCTIC_ERR_LINK_REJECTED, reason, what);
    niu_link_closed(link);
    link->transport->disconnect(link);
}

static void link_handle_packet(NiuLink *link, uint8_t prio,
                               const uint8_t *body, uint32_t len)
{
    if (link->rx_outstanding[prio] == 0) {
        niu_link_broken(link, "PACKET beyond the credits granted", prio);
        return;
    }
    link->rx_outstanding[prio]--;
    /* The NIU answers every packet at once, so the buffer is free again. */
    link->credits_to_return[prio]++;
    link->ops->packet(link, prio, body, len);
}

/*
 * Link 1.5: a packet read from the direct ring of node @src.  Only @src
 * writes that ring, so a packet that names another source is forged and
 * one whose route does not lead here was not routed; both are dropped and
 * counted, as the switch drops them on its path.  No credit: the room the
 * reader makes is the sender's window.
 */
void niu_link_direct_packet(NiuLink *link, unsigned src, uint8_t prio,
                            const uint8_t *wire, size_t size)
{
    struct arctic_e2e_header h;
    unsigned dst;

    if (link->state != NIU_LINK_UP || !link->direct) {
        return;
    }
    arctic_e2e_decode(wire, &h);
    if (h.src_node != src || !link_route(link, src, wire, &dst) ||
        dst != link->node_id) {
        stat64_add(&link->direct_refused, 1);
        trace_arctic_niu_link_direct_refused(link->node_id, src, h.src_node);
        return;
    }
    stat64_add(&link->direct_received, 1);
    link->ops->packet(link, prio, wire, size);
}

/* After a batch of direct packets: the answers go in one write. */
void niu_link_direct_done(NiuLink *link)
{
    if (link->state == NIU_LINK_UP) {
        link->ops->ready(link);
    }
    niu_link_flush(link);
}

static void link_handle_credit(NiuLink *link, const uint8_t *body)
{
    uint32_t lo = arctic_get_le16(body), hi = arctic_get_le16(body + 2);

    if (link->tx_credits[ARCTIC_PRIORITY_LOW] + lo > ARCTIC_LINK_MAX_CREDITS ||
        link->tx_credits[ARCTIC_PRIORITY_HIGH] + hi >
        ARCTIC_LINK_MAX_CREDITS) {
        niu_link_broken(link, "CREDIT beyond any sane window", lo + hi);
        return;
    }
    link->tx_credits[ARCTIC_PRIORITY_LOW] += lo;
    link->tx_credits[ARCTIC_PRIORITY_HIGH] += hi;
}

/* --- timed links (link 1.4) ------------------------------------------ */

/*
 * A timed link: every HELLO says TIMED.  Before a transport is set up:
 * only one that lets the owner read the input at its own instants
 * (NiuTransportOps.timed) can carry it.
 */
void niu_link_set_timed(NiuLink *link)
{
    assert(!link->transport);
    link->timed = true;
}

void niu_link_time_ready(NiuLink *link, const struct arctic_time_ready *ready)
{
    uint8_t body[ARCTIC_TIME_READY_SIZE];

    arctic_time_ready_encode(body, ready);
    link_append_frame(link, ARCTIC_FRAME_TIME_READY, 0, body, sizeof(body));
    niu_link_flush(link);
}

void niu_link_time_sync(NiuLink *link, uint64_t reached, uint64_t promise)
{
    uint8_t body[ARCTIC_TIME_SYNC_SIZE];
    struct arctic_time_sync sync = {
        .reached = reached,
        .promise = promise,
    };

    arctic_time_sync_encode(body, &sync);
    link_append_frame(link, ARCTIC_FRAME_TIME_SYNC, 0, body, sizeof(body));
    niu_link_flush(link);
}

/* The frames of a timed link once it is up. */
static void link_dispatch_timed(NiuLink *link, uint16_t type, uint16_t flags,
                                const uint8_t *body, uint32_t len)
{
    struct arctic_time_start start;

    switch (type) {
    case ARCTIC_FRAME_TIME_START:
        if (link->time_started) {
            niu_link_broken(link, "a second TIME_START", 0);
            return;
        }
        arctic_time_start_decode(body, &start);
        link->time_started = true;
        link->ops->time_start(link, &start);
        break;
    case ARCTIC_FRAME_TIMED_PACKET:
        if (!link->time_started) {
            niu_link_broken(link, "TIMED_PACKET before TIME_START", 0);
            return;
        }
        link->ops->timed_packet(link,
                                FIELD_EX32(flags, ARCTIC_FRAME_FLAGS,
                                           PRIORITY),
                                arctic_get_le64(body),
                                body + ARCTIC_TIMED_PACKET_HEADER,
                                len - ARCTIC_TIMED_PACKET_HEADER);
        break;
    case ARCTIC_FRAME_TIME_GRANT:
        if (!link->time_started) {
            niu_link_broken(link, "TIME_GRANT before TIME_START", 0);
            return;
        }
        link->ops->time_grant(link, arctic_get_le64(body));
        break;
    default:
        niu_link_broken(link, "unexpected frame on a timed link", type);
        break;
    }
}

/*
 * The owner's thread takes the input of a timed link itself, at the
 * instants of virtual time it chooses (under the lock), or sleeps until
 * some may have come (without it).
 */
bool niu_link_read_input(NiuLink *link)
{
    return link->state != NIU_LINK_DOWN && !link->paused &&
           link->transport->read_input(link);
}

void niu_link_wait_input(NiuLink *link, int64_t timeout_ns)
{
    link->transport->wait_input(link, timeout_ns);
}

static void link_dispatch(NiuLink *link, uint16_t type, uint16_t flags,
                          const uint8_t *body, uint32_t len)
{
    trace_arctic_niu_link_frame_in(link->node_id, type, len);
    if (link->state == NIU_LINK_HELLO_SENT) {
        if (type == ARCTIC_FRAME_WELCOME) {
            link_handle_welcome(link, flags, body);
        } else if (type == ARCTIC_FRAME_REJECT) {
            link_handle_reject(link, body);
        } else if (type == ARCTIC_FRAME_AUTH_CHALLENGE) {
            link_handle_challenge(link, body);
        } else if (type == ARCTIC_FRAME_AUTH_PROOF) {
            link_handle_proof(link, body);
        } else {
            niu_link_broken(link, "frame before WELCOME", type);
        }
        return;
    }
    if (link->timed) {
        link_dispatch_timed(link, type, flags, body, len);
        return;
    }
    switch (type) {
    case ARCTIC_FRAME_PACKET:
        link_handle_packet(link,
                           FIELD_EX32(flags, ARCTIC_FRAME_FLAGS, PRIORITY),
                           body, len);
        break;
    case ARCTIC_FRAME_CREDIT:
        link_handle_credit(link, body);
        break;
    default:
        niu_link_broken(link, "unexpected frame", type);
        break;
    }
}

/*
 * How much input the session takes now: none while its answers cannot be
 * written, so the transport pushes back on the switch.
 */
size_t niu_link_input_room(const NiuLink *link)
{
    /* A timed link's answers cannot hold back virtual time. */
    if (link->state == NIU_LINK_DOWN || link->paused ||
        (link->out_buf->len >= NIU_LINK_OUT_LIMIT && !link->timed)) {
        return 0;
    }
    return 4096;
}

/*
 * Frames from bytes, in whatever pieces they come (a stream cuts them
 * anywhere; arctic/link.h's reader gathers the split ones).  All of @buf
 * is dispatched before the owner is told it may send, so the answers to a
 * burst leave in one write.
 */
void niu_link_input(NiuLink *link, const uint8_t *buf, size_t size)
{
    struct arctic_frame_reader *r = &link->reader;

    while (link->state != NIU_LINK_DOWN) {
        enum arctic_frame_status st = arctic_frame_read(r, &buf, &size);

        if (st == ARCTIC_FRAME_NEED_MORE) {
            break;
        }
        if (st == ARCTIC_FRAME_MALFORMED) {
            niu_link_broken(link, "malformed frame header", r->error);
            return;
        }
        link_dispatch(link, r->header.type, r->header.flags, r->body,
                      r->header.length);
    }
    if (link->state == NIU_LINK_UP) {
        link->ops->ready(link);
    }
    niu_link_flush(link);
}

/*
 * Busy polling: the owner, in a thread that would otherwise wait for the
 * transport's reader to be scheduled, takes the input now.
 */
bool niu_link_can_poll(const NiuLink *link)
{
    return link->transport && link->transport->poll_input;
}

bool niu_link_poll(NiuLink *link)
{
    if (!niu_link_can_poll(link) || link->state == NIU_LINK_DOWN ||
        !niu_link_input_room(link)) {
        return false;
    }
    return link->transport->poll_input(link);
}

void niu_link_poll_end(NiuLink *link)
{
    if (link->transport && link->transport->poll_end) {
        link->transport->poll_end(link);
    }
}

/*
 * The owner's state is saved or loaded (docs/device-internals.md §8):
 * until it resumes, no input, whatever the transport, so that what the
 * switch sends meanwhile waits in the socket or the rings, or is lost
 * with the connection, and never reaches a state already saved; and no
 * call up into the owner, whose state a load is writing.  What fell due
 * meanwhile (a deferral, posted work, room to write) runs at the resume.
 */
void niu_link_pause(NiuLink *link, bool paused)
{
    if (link->paused == paused) {
        return;
    }
    link->paused = paused;
    trace_arctic_niu_link_pause(link->node_id, paused);
    if (link->transport && link->transport->pause) {
        link->transport->pause(link, paused);
    }
    if (paused || !link->transport) {
        return;
    }
    link->transport->accept_input(link);
    if (link->resume_due && link->state == NIU_LINK_UP) {
        link->resume_due = false;
        link->ops->posted(link);
        link->ops->ready(link);
        niu_link_deferred_due(link);
    }
}

/* A new connection: a new session starts with HELLO. */
void niu_link_opened(NiuLink *link)
{
    uint8_t body[ARCTIC_HELLO_SIZE];
    struct arctic_hello hello = {
        .magic = ARCTIC_LINK_MAGIC,
        .version_major = ARCTIC_LINK_VERSION_MAJOR,
        .version_minor = ARCTIC_LINK_VERSION_MINOR,
        .node_id = link->node_id,
    };
    uint32_t flags;
    unsigned p;

    g_byte_array_set_size(link->out_buf, 0);
    link->out_blocked = false;
    link->credits_due = false;
    link->own_due_ns = 0;
    link->rings = false;
    link->direct = false;
    link->time_started = false;
    link->challenged = link->proved = false;
    arctic_frame_reader_reset(&link->reader);
    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        link->tx_credits[p] = 0;
        link->credits_to_return[p] = 0;
        link->rx_outstanding[p] = link->rx_credits;
        hello.credits[p] = link->rx_credits;
    }
    link_set_state(link, NIU_LINK_HELLO_SENT);
    arctic_hello_encode(body, &hello);
    memcpy(link->hello_body, body, sizeof(body));
    flags = FIELD_DP32(0, ARCTIC_HELLO_FLAGS, TIMED, link->timed);
    flags = FIELD_DP32(flags, ARCTIC_HELLO_FLAGS, DIRECT,
                       link->direct_ok && !link->timed);
    link_append_frame(link, ARCTIC_FRAME_HELLO, flags, body, sizeof(body));
    niu_link_flush(link);
}

/* The connection is gone (or is being dropped); idempotent. */
void niu_link_closed(NiuLink *link)
{
    bool was_up = link->state == NIU_LINK_UP;

    if (link->state == NIU_LINK_DOWN) {
        return;
    }
    link_set_state(link, NIU_LINK_DOWN);
    g_byte_array_set_size(link->out_buf, 0);
    link->out_blocked = false;
    link->direct = false;
    if (was_up) {
        link->ops->down(link);
    }
}

void niu_link_init(NiuLink *link, const NiuLinkOps *ops, void *opaque,
                   QemuRecMutex *lock, uint32_t node_id, uint32_t rx_credits,
                   uint64_t defer_ns)
{
    link->defer_ns = defer_ns;
    link->ops = ops;
    link->opaque = opaque;
    link->lock = lock;
    link->node_id = node_id;
    link->rx_credits = rx_credits;
    link->out_buf = g_byte_array_new();
    link->state = NIU_LINK_DOWN;
}

void niu_link_cleanup(NiuLink *link)
{
    if (link->transport) {
        link->transport->cleanup(link);
        link->transport = NULL;
    }
    g_byte_array_free(link->out_buf, true);
    link->out_buf = NULL;
    niu_link_set_secret(link, NULL, 0);
}
