/* SPDX-License-Identifier: MIT */
/*
 * The link protocol between an NIU (the QEMU device) and arctic-switch,
 * carried over a byte stream (UNIX or TCP socket).  docs/link-protocol.md is
 * the prose version of this header.
 *
 * Every message is a frame: an 8-byte header then `length` bytes of body.
 *
 *   NIU                                   switch
 *    | -- HELLO (node id, rx credits) -->   |   [+ ring fds, link-ring.h]
 *    | <-- AUTH_CHALLENGE (nonce) --------- |   [a switch with a secret]
 *    | -- AUTH_RESPONSE (nonce, MAC) -----> |
 *    | <-- AUTH_PROOF (MAC) --------------- |
 *    | <-- WELCOME (nodes, levels, credits) |   or REJECT (reason, text)
 *    | <== PACKET / CREDIT both ways ==>    |   [in the rings if WELCOME
 *                                                 says RINGS]
 *
 * A timed link (link 1.4, HELLO and WELCOME flag TIMED; docs/timed-mode.md)
 * carries virtual time instead of credits, once the guest starts the
 * cluster's clock:
 *    | -- TIME_READY (its costs) -------->  |   when the guest asks
 *    | <-- TIME_START (grant, lookahead) -- |   once every node is ready
 *    | == TIMED_PACKET (stamp) ==========>  |   as the guest runs
 *    | -- TIME_SYNC (reached, promise) -->  |   at the end of each grant
 *    | <== TIMED_PACKET (delivery time) === |
 *    | <-- TIME_GRANT (until) ------------- |   the next grant
 *
 * Nothing but HELLO (and, when challenged, AUTH_RESPONSE) may be sent
 * before WELCOME.  Flow control is by credits
 * per priority: each side may have at most as many PACKET frames of a
 * priority outstanding as the other side granted (in HELLO / WELCOME, then
 * by CREDIT frames as buffers are freed).  A frame that breaks these rules
 * ends the connection: the stream cannot be trusted to be in step after it.
 */
#ifndef ARCTIC_LINK_H
#define ARCTIC_LINK_H

#include "arctic/types.h"
#include "arctic/packet.h"

enum {
    ARCTIC_LINK_MAGIC = 0x4c435241,     /* "ARCL" as little-endian bytes */
    ARCTIC_LINK_VERSION_MAJOR = 1,      /* must match exactly */
    /*
     * Additions a peer may ignore; 1: shared-memory rings (link-ring.h);
     * 2: per-CPU wake-ups of the switch (link-ring.h, WELCOME's CPU_WAKE);
     * 3: wake-ups on per-link sockets instead of shared eventfds
     * (link-ring.h; a switch takes rings only from an NIU of 1.3 or
     * later), and authenticated joins over TCP (AUTH_CHALLENGE,
     * AUTH_RESPONSE, AUTH_PROOF below); 4: timed links (TIME_* and
     * TIMED_PACKET below); 5: direct rings between the NIUs of one host
     * (DIRECT_RING and DIRECT_STOP below, arctic/link-ring.h).
     */
    ARCTIC_LINK_VERSION_MINOR = 5,
    ARCTIC_LINK_HEADER_SIZE = 8,
    /*
     * No frame body is larger than this; a bigger length is a protocol
     * error, which bounds what a receiver ever has to buffer.
     */
    ARCTIC_LINK_MAX_BODY = 256,
    ARCTIC_LINK_MAX_NODES = 256,        /* S of seed 002 */
    /*
     * Credits an NIU grants the switch and the switch grants an NIU, per
     * priority, unless configured otherwise: sized for the host, so that
     * remote DMA is not bound by the credit loop through the switch
     * (docs/datapath.md §3.15).  ARCTIC_LINK_SEED_CREDITS is the small
     * buffer of the seeds' NIU, which timed mode keeps.
     */
    ARCTIC_LINK_DEFAULT_CREDITS = 64,
    ARCTIC_LINK_SEED_CREDITS = 8,
    /*
     * The most credits one side may hold for one priority; granting more
     * (in HELLO, WELCOME or CREDIT) ends the connection.
     */
    ARCTIC_LINK_MAX_CREDITS = 4096,
    ARCTIC_LINK_REJECT_TEXT_SIZE = 64,
};

enum arctic_frame_type {
    ARCTIC_FRAME_HELLO = 1,     /* NIU -> switch, first frame */
    ARCTIC_FRAME_WELCOME = 2,   /* switch -> NIU, accepts HELLO */
    ARCTIC_FRAME_REJECT = 3,    /* switch -> NIU, refuses HELLO, then closes */
    ARCTIC_FRAME_PACKET = 4,    /* a wire packet (arctic/packet.h), both ways */
    ARCTIC_FRAME_CREDIT = 5,    /* returns credits, both ways */
    /*
     * Link 1.3: a switch that has a cluster secret proves it and asks
     * for the same proof (below).
     */
    ARCTIC_FRAME_AUTH_CHALLENGE = 6,    /* switch -> NIU, after HELLO */
    ARCTIC_FRAME_AUTH_RESPONSE = 7,     /* NIU -> switch */
    ARCTIC_FRAME_AUTH_PROOF = 8,        /* switch -> NIU, before WELCOME */
    /* Link 1.4: timed links only (below). */
    ARCTIC_FRAME_TIME_READY = 9,        /* NIU -> switch */
    ARCTIC_FRAME_TIME_START = 10,       /* switch -> NIU */
    ARCTIC_FRAME_TIMED_PACKET = 11,     /* a stamped packet, both ways */
    ARCTIC_FRAME_TIME_SYNC = 12,        /* NIU -> switch */
    ARCTIC_FRAME_TIME_GRANT = 13,       /* switch -> NIU */
    /*
     * Link 1.5: direct rings (below, and arctic/link-ring.h), on the
     * socket of a link whose frames go through the rings, the ring's
     * memfd attached to DIRECT_RING (SCM_RIGHTS).
     */
    ARCTIC_FRAME_DIRECT_RING = 14,      /* switch -> NIU */
    ARCTIC_FRAME_DIRECT_STOP = 15,      /* switch -> NIU */
};

/*
 * Frame header: le16 type, le16 flags, le32 body length.  PACKET frames
 * have flags: the priority whose credit the packet uses.  It is kept out
 * of the packet itself so that a packet corrupted in the network (fault
 * injection flips bits anywhere in it) cannot upset the credits.
 */
FIELD(ARCTIC_FRAME_FLAGS, PRIORITY, 0, 1)
/*
 * WELCOME's one flag: the switch took the rings the HELLO offered, and
 * every later frame goes through them (arctic/link-ring.h).  A switch
 * sets it only for an NIU that offered rings.
 */
FIELD(ARCTIC_WELCOME_FLAGS, RINGS, 0, 1)
/*
 * With RINGS, to an NIU whose HELLO says minor version 2 or more: the
 * WELCOME carries the switch's per-CPU wake-up eventfds (link-ring.h).
 */
FIELD(ARCTIC_WELCOME_FLAGS, CPU_WAKE, 1, 1)
/*
 * Link 1.4: the NIU keeps virtual time (HELLO), and the switch does too
 * (WELCOME); a switch refuses an NIU of the other kind (REJECT TIMING).
 */
FIELD(ARCTIC_HELLO_FLAGS, TIMED, 0, 1)
FIELD(ARCTIC_WELCOME_FLAGS, TIMED, 2, 1)
/*
 * Link 1.5, with rings only: the NIU takes direct rings (HELLO), and the
 * switch may send it some (WELCOME): DIRECT_RING, DIRECT_STOP.
 */
FIELD(ARCTIC_HELLO_FLAGS, DIRECT, 1, 1)
FIELD(ARCTIC_WELCOME_FLAGS, DIRECT, 3, 1)

/*
 * DIRECT_RING and DIRECT_STOP body: le32 peer node, le16 role, le16 0.
 * DIRECT_RING: the attached area is a ring pair from this NIU to @peer
 * (SEND: write the packets routed to @peer there) or from @peer to it
 * (RECEIVE: read it; every packet in it is @peer's).  DIRECT_STOP: SEND,
 * write no more to @peer's ring, send through the switch again (and
 * unmap it); RECEIVE, read what @peer's ring holds and unmap it.
 */
enum arctic_direct_role {
    ARCTIC_DIRECT_SEND = 0,
    ARCTIC_DIRECT_RECEIVE = 1,
    ARCTIC_DIRECT_ROLES,
};

enum { ARCTIC_DIRECT_SIZE = 8 };

struct arctic_direct {
    uint32_t peer;
    uint16_t role;              /* enum arctic_direct_role */
};

struct arctic_frame_header {
    uint16_t type;
    uint16_t flags;
    uint32_t length;
};

/* HELLO body. */
struct arctic_hello {
    uint32_t magic;             /* ARCTIC_LINK_MAGIC */
    uint16_t version_major;
    uint16_t version_minor;
    uint32_t node_id;           /* the port the NIU claims */
    /* Granted to the switch, [ARCTIC_PRIORITY_LOW/HIGH] */
    uint16_t credits[ARCTIC_NUM_PRIORITIES];
};
enum { ARCTIC_HELLO_SIZE = 16 };

/* WELCOME body. */
struct arctic_welcome {
    uint32_t magic;
    uint16_t version_major;
    uint16_t version_minor;
    uint32_t node_id;           /* echoes HELLO */
    uint32_t num_nodes;         /* ports of the network */
    uint32_t levels;            /* router levels of the fat tree (route.h) */
    uint16_t credits[ARCTIC_NUM_PRIORITIES]; /* granted to the NIU */
};
enum { ARCTIC_WELCOME_SIZE = 24 };

enum arctic_reject_reason {
    ARCTIC_REJECT_VERSION = 1,      /* major version differs */
    ARCTIC_REJECT_BAD_NODE = 2,     /* node id beyond the switch's ports */
    ARCTIC_REJECT_NODE_BUSY = 3,    /* another live NIU holds that node id */
    ARCTIC_REJECT_MALFORMED = 4,    /* HELLO was not a valid HELLO */
    /*
     * the NIU did not prove it knows the cluster's secret (an NIU also
     * says this of a switch that did not prove it)
     */
    ARCTIC_REJECT_AUTH = 5,
    /*
     * a timed NIU and a switch that is not (or the other way round), or
     * a timed cluster whose clock has started already
     */
    ARCTIC_REJECT_TIMING = 6,
};

/*
 * Timed links (link 1.4, docs/timed-mode.md).  Times are virtual
 * nanoseconds of the cluster's clock, which TIME_START starts at 0 on
 * every node at once.  After its WELCOME (flag TIMED) an NIU sends
 * nothing until its guest asks to start; then TIME_READY, with the costs
 * of its engines (arctic/timing.h), which the switch uses for the
 * packets it delivers to that NIU.  Once every port is ready the switch
 * sends each TIME_START: the first grant, the lookahead (no packet sent
 * at t is delivered anywhere before t + lookahead) and the return time
 * (none is delivered before its stamp + return).  From then on:
 *   - the NIU's clock never passes its grant by a tick: there it sends
 *     TIME_SYNC (the time reached, and the earliest time it could send
 *     unless a packet reaches it first: its promise; the time reached
 *     while its processor runs) and waits for TIME_GRANT;
 *   - each packet goes as TIMED_PACKET stamped with the time its head
 *     leaves the NIU, never before the NIU's earliest plus its cheapest
 *     transmit cost: the promise of its last TIME_SYNC, or the time of a
 *     packet delivered to it since if sooner (one for a time less than a
 *     tick before the time reached counts: the NIU takes it as it goes
 *     on), and never within that cost of its packet before; an NIU that
 *     sends one stamped s runs no further than s + return before its next
 *     TIME_SYNC (it may hear an answer then), and the grant it gets next
 *     may be below the one before (never below the time it reached);
 *   - the switch delivers packets as TIMED_PACKET stamped with the time
 *     the NIU takes them, never earlier than the grant sent before them,
 *     and the NIU takes each at that time of its clock (the first tick
 *     at or past it).
 * No credits: a timed link's frames are bounded by virtual time (the
 * engines' costs), and the switch takes every frame.
 */
struct arctic_time_ready {
    uint32_t tx_ns;             /* transmit engine, per packet */
    uint32_t rx_ns;             /* receive engine, per packet */
    uint32_t pci_ps_per_byte;   /* both, per byte across PCI */
    /*
     * The step of the NIU's clock, >= 1: a processor's clock moves by
     * whole instructions, so the NIU stops at the first step at or past
     * its grant, and takes a packet at the first one at or past its time
     * (by less than tick_ns, the same on every run).
     */
    uint32_t tick_ns;
};

struct arctic_time_start {
    uint64_t grant;             /* run up to this time */
    uint64_t lookahead_ns;
    uint64_t return_ns;
};

struct arctic_time_sync {
    uint64_t reached;
    uint64_t promise;           /* >= reached; ARCTIC_TIME_NEVER: none */
};

enum {
    ARCTIC_TIME_READY_SIZE = 16,
    ARCTIC_TIME_START_SIZE = 24,
    ARCTIC_TIME_SYNC_SIZE = 16,
    ARCTIC_TIME_GRANT_SIZE = 8,
    /* TIMED_PACKET: le64 time, then the wire packet */
    ARCTIC_TIMED_PACKET_HEADER = 8,
};

static inline void arctic_time_ready_encode(void *buf,
                                            const struct arctic_time_ready *m)
{
    uint8_t *b = (uint8_t *)buf;

    arctic_put_le32(b, m->tx_ns);
    arctic_put_le32(b + 4, m->rx_ns);
    arctic_put_le32(b + 8, m->pci_ps_per_byte);
    arctic_put_le32(b + 12, m->tick_ns);
}

static inline void arctic_time_ready_decode(const void *buf,
                                            struct arctic_time_ready *m)
{
    const uint8_t *b = (const uint8_t *)buf;

    m->tx_ns = arctic_get_le32(b);
    m->rx_ns = arctic_get_le32(b + 4);
    m->pci_ps_per_byte = arctic_get_le32(b + 8);
    m->tick_ns = arctic_get_le32(b + 12);
}

static inline void arctic_time_start_encode(void *buf,
                                            const struct arctic_time_start *m)
{
    uint8_t *b = (uint8_t *)buf;

    arctic_put_le64(b, m->grant);
    arctic_put_le64(b + 8, m->lookahead_ns);
    arctic_put_le64(b + 16, m->return_ns);
}

static inline void arctic_time_start_decode(const void *buf,
                                            struct arctic_time_start *m)
{
    const uint8_t *b = (const uint8_t *)buf;

    m->grant = arctic_get_le64(b);
    m->lookahead_ns = arctic_get_le64(b + 8);
    m->return_ns = arctic_get_le64(b + 16);
}

static inline void arctic_time_sync_encode(void *buf,
                                           const struct arctic_time_sync *m)
{
    uint8_t *b = (uint8_t *)buf;

    arctic_put_le64(b, m->reached);
    arctic_put_le64(b + 8, m->promise);
}

static inline void arctic_time_sync_decode(const void *buf,
                                           struct arctic_time_sync *m)
{
    const uint8_t *b = (const uint8_t *)buf;

    m->reached = arctic_get_le64(b);
    m->promise = arctic_get_le64(b + 8);
}

/*
 * Authenticated joins (link 1.3).  A switch given a cluster secret (a key
 * of at least ARCTIC_AUTH_KEY_MIN bytes, the same file for the switch and
 * every NIU) answers each HELLO with AUTH_CHALLENGE, a fresh random nonce
 * Ns; the NIU answers AUTH_RESPONSE, its own fresh nonce Nn and
 * HMAC-SHA256(key, arctic_auth_message(NIU, Ns, Nn, HELLO body)); the
 * switch checks it (REJECT AUTH if wrong) and proves it knows the key in
 * turn, AUTH_PROOF = HMAC-SHA256(key, arctic_auth_message(SWITCH, Nn, Ns,
 * HELLO body)), before its WELCOME.  No secret crosses the wire; each
 * side's nonce makes an answer recorded from another connection useless;
 * the HELLO (node id, credits) is bound to the answer.  An NIU that has a
 * secret takes a WELCOME only after a good AUTH_PROOF; one that has none
 * cannot answer a challenge.  The stream is not encrypted, and frames
 * after WELCOME are not authenticated: the secret decides who may join.
 */
enum {
    ARCTIC_AUTH_NONCE_SIZE = 32,
    ARCTIC_AUTH_MAC_SIZE = 32,          /* HMAC-SHA256 */
    ARCTIC_AUTH_KEY_MIN = 16,
    ARCTIC_AUTH_KEY_MAX = 1024,
    ARCTIC_AUTH_CHALLENGE_SIZE = ARCTIC_AUTH_NONCE_SIZE,
    ARCTIC_AUTH_RESPONSE_SIZE = ARCTIC_AUTH_NONCE_SIZE + ARCTIC_AUTH_MAC_SIZE,
    ARCTIC_AUTH_PROOF_SIZE = ARCTIC_AUTH_MAC_SIZE,
};

/* Who computes a MAC: the label that starts its message. */
enum arctic_auth_role {
    ARCTIC_AUTH_NIU,
    ARCTIC_AUTH_SWITCH,
};

enum {
    ARCTIC_AUTH_LABEL_SIZE = 16,
    ARCTIC_AUTH_MESSAGE_SIZE = ARCTIC_AUTH_LABEL_SIZE +
                               2 * ARCTIC_AUTH_NONCE_SIZE + 16,
};

/*
 * The bytes a MAC covers: a label naming the role (so that a switch's
 * proof can never pass as an NIU's answer), the nonce of the other side,
 * then one's own, then the 16 bytes of the HELLO body.  Returns
 * ARCTIC_AUTH_MESSAGE_SIZE.
 */
static inline unsigned arctic_auth_message(uint8_t *out,
                                           enum arctic_auth_role role,
                                           const uint8_t *their_nonce,
                                           const uint8_t *our_nonce,
                                           const uint8_t *hello_body)
{
    static const char label[2][ARCTIC_AUTH_LABEL_SIZE + 1] = {
        [ARCTIC_AUTH_NIU] = "ARCL-auth-1-NIU ",
        [ARCTIC_AUTH_SWITCH] = "ARCL-auth-1-SWCH",
    };
    unsigned i, n = 0;

    for (i = 0; i < ARCTIC_AUTH_LABEL_SIZE; i++) {
        out[n++] = (uint8_t)label[role][i];
    }
    for (i = 0; i < ARCTIC_AUTH_NONCE_SIZE; i++) {
        out[n++] = their_nonce[i];
    }
    for (i = 0; i < ARCTIC_AUTH_NONCE_SIZE; i++) {
        out[n++] = our_nonce[i];
    }
    for (i = 0; i < ARCTIC_HELLO_SIZE; i++) {
        out[n++] = hello_body[i];
    }
    return n;
}

/* Compare two MACs in time that does not depend on where they differ. */
static inline bool arctic_auth_mac_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0;
    unsigned i;

    for (i = 0; i < ARCTIC_AUTH_MAC_SIZE; i++) {
        diff |= a[i] ^ b[i];
    }
    return diff == 0;
}

/* REJECT body: le32 reason, then a NUL-padded human-readable text. */
enum { ARCTIC_REJECT_SIZE = 4 + ARCTIC_LINK_REJECT_TEXT_SIZE };

/* CREDIT body: le16 credits returned [LOW], [HIGH]. */
enum { ARCTIC_CREDIT_SIZE = 4 };

enum arctic_frame_error {
    ARCTIC_FRAME_OK = 0,
    ARCTIC_FRAME_BAD_TYPE,
    ARCTIC_FRAME_BAD_FLAGS,
    ARCTIC_FRAME_BAD_LENGTH,    /* wrong size for its type, or too large */
};

static inline void arctic_frame_header_encode_flags(void *buf, uint16_t type,
                                                    uint16_t flags,
                                                    uint32_t length)
{
    uint8_t *b = (uint8_t *)buf;

    arctic_put_le16(b, type);
    arctic_put_le16(b + 2, flags);
    arctic_put_le32(b + 4, length);
}

static inline void arctic_frame_header_encode(void *buf, uint16_t type,
                                              uint32_t length)
{
    arctic_frame_header_encode_flags(buf, type, 0, length);
}

/* The header of a PACKET frame carrying a packet of priority @prio. */
static inline void arctic_packet_frame_encode(void *buf, unsigned prio,
                                              uint32_t length)
{
    arctic_frame_header_encode_flags(buf, ARCTIC_FRAME_PACKET,
                                     ARCTIC_FIELD_PREP(ARCTIC_FRAME_FLAGS,
                                                       PRIORITY, prio),
                                     length);
}

static inline void arctic_frame_header_decode(const void *buf,
                                              struct arctic_frame_header *h)
{
    const uint8_t *b = (const uint8_t *)buf;

    h->type = arctic_get_le16(b);
    h->flags = arctic_get_le16(b + 2);
    h->length = arctic_get_le32(b + 4);
}

/*
 * Validate a frame header before reading its body, so that a receiver
 * never buffers more than ARCTIC_LINK_MAX_BODY bytes for one frame.
 * PACKET bodies are checked further by arctic_wire_check().
 */
static inline enum arctic_frame_error
arctic_frame_header_check(const struct arctic_frame_header *h)
{
    uint16_t allowed = h->type == ARCTIC_FRAME_PACKET ||
                       h->type == ARCTIC_FRAME_TIMED_PACKET
                       ? R_ARCTIC_FRAME_FLAGS_PRIORITY_MASK
                       : h->type == ARCTIC_FRAME_WELCOME
                       ? R_ARCTIC_WELCOME_FLAGS_RINGS_MASK |
                         R_ARCTIC_WELCOME_FLAGS_CPU_WAKE_MASK |
                         R_ARCTIC_WELCOME_FLAGS_TIMED_MASK |
                         R_ARCTIC_WELCOME_FLAGS_DIRECT_MASK
                       : h->type == ARCTIC_FRAME_HELLO
                       ? R_ARCTIC_HELLO_FLAGS_TIMED_MASK |
                         R_ARCTIC_HELLO_FLAGS_DIRECT_MASK : 0;

    if (h->flags & ~allowed) {
        return ARCTIC_FRAME_BAD_FLAGS;
    }
    switch (h->type) {
    case ARCTIC_FRAME_HELLO:
        return h->length == ARCTIC_HELLO_SIZE ? ARCTIC_FRAME_OK
                                              : ARCTIC_FRAME_BAD_LENGTH;
    case ARCTIC_FRAME_WELCOME:
        return h->length == ARCTIC_WELCOME_SIZE ? ARCTIC_FRAME_OK
                                                : ARCTIC_FRAME_BAD_LENGTH;
    case ARCTIC_FRAME_REJECT:
        return h->length == ARCTIC_REJECT_SIZE ? ARCTIC_FRAME_OK
                                               : ARCTIC_FRAME_BAD_LENGTH;
    case ARCTIC_FRAME_CREDIT:
        return h->length == ARCTIC_CREDIT_SIZE ? ARCTIC_FRAME_OK
                                               : ARCTIC_FRAME_BAD_LENGTH;
    case ARCTIC_FRAME_PACKET:
        return (h->length >= ARCTIC_WIRE_MIN_SIZE &&
                h->length <= ARCTIC_WIRE_MAX_SIZE) ? ARCTIC_FRAME_OK
                                                   : ARCTIC_FRAME_BAD_LENGTH;
    case ARCTIC_FRAME_AUTH_CHALLENGE:
        return h->length == ARCTIC_AUTH_CHALLENGE_SIZE
               ? ARCTIC_FRAME_OK : ARCTIC_FRAME_BAD_LENGTH;
    case ARCTIC_FRAME_AUTH_RESPONSE:
        return h->length == ARCTIC_AUTH_RESPONSE_SIZE
               ? ARCTIC_FRAME_OK : ARCTIC_FRAME_BAD_LENGTH;
    case ARCTIC_FRAME_AUTH_PROOF:
        return h->length == ARCTIC_AUTH_PROOF_SIZE
               ? ARCTIC_FRAME_OK : ARCTIC_FRAME_BAD_LENGTH;
    case ARCTIC_FRAME_TIME_READY:
        return h->length == ARCTIC_TIME_READY_SIZE
               ? ARCTIC_FRAME_OK : ARCTIC_FRAME_BAD_LENGTH;
    case ARCTIC_FRAME_TIME_START:
        return h->length == ARCTIC_TIME_START_SIZE
               ? ARCTIC_FRAME_OK : ARCTIC_FRAME_BAD_LENGTH;
    case ARCTIC_FRAME_TIME_SYNC:
        return h->length == ARCTIC_TIME_SYNC_SIZE
               ? ARCTIC_FRAME_OK : ARCTIC_FRAME_BAD_LENGTH;
    case ARCTIC_FRAME_TIME_GRANT:
        return h->length == ARCTIC_TIME_GRANT_SIZE
               ? ARCTIC_FRAME_OK : ARCTIC_FRAME_BAD_LENGTH;
    case ARCTIC_FRAME_DIRECT_RING:
    case ARCTIC_FRAME_DIRECT_STOP:
        return h->length == ARCTIC_DIRECT_SIZE
               ? ARCTIC_FRAME_OK : ARCTIC_FRAME_BAD_LENGTH;
    case ARCTIC_FRAME_TIMED_PACKET:
        return (h->length >= ARCTIC_TIMED_PACKET_HEADER +
                             ARCTIC_WIRE_MIN_SIZE &&
                h->length <= ARCTIC_TIMED_PACKET_HEADER +
                             ARCTIC_WIRE_MAX_SIZE) ? ARCTIC_FRAME_OK
                                                   : ARCTIC_FRAME_BAD_LENGTH;
    default:
        return ARCTIC_FRAME_BAD_TYPE;
    }
}

static inline void arctic_direct_encode(void *buf,
                                        const struct arctic_direct *m)
{
    uint8_t *b = (uint8_t *)buf;

    arctic_put_le32(b, m->peer);
    arctic_put_le16(b + 4, m->role);
    arctic_put_le16(b + 6, 0);
}

/* False if the body breaks its rules (a role unknown, a reserved bit). */
static inline bool arctic_direct_decode(const void *buf,
                                        struct arctic_direct *m)
{
    const uint8_t *b = (const uint8_t *)buf;

    m->peer = arctic_get_le32(b);
    m->role = arctic_get_le16(b + 4);
    return m->role < ARCTIC_DIRECT_ROLES && arctic_get_le16(b + 6) == 0 &&
           m->peer < ARCTIC_LINK_MAX_NODES;
}

static inline void arctic_hello_encode(void *buf, const struct arctic_hello *m)
{
    uint8_t *b = (uint8_t *)buf;

    arctic_put_le32(b, m->magic);
    arctic_put_le16(b + 4, m->version_major);
    arctic_put_le16(b + 6, m->version_minor);
    arctic_put_le32(b + 8, m->node_id);
    arctic_put_le16(b + 12, m->credits[ARCTIC_PRIORITY_LOW]);
    arctic_put_le16(b + 14, m->credits[ARCTIC_PRIORITY_HIGH]);
}

static inline void arctic_hello_decode(const void *buf, struct arctic_hello *m)
{
    const uint8_t *b = (const uint8_t *)buf;

    m->magic = arctic_get_le32(b);
    m->version_major = arctic_get_le16(b + 4);
    m->version_minor = arctic_get_le16(b + 6);
    m->node_id = arctic_get_le32(b + 8);
    m->credits[ARCTIC_PRIORITY_LOW] = arctic_get_le16(b + 12);
    m->credits[ARCTIC_PRIORITY_HIGH] = arctic_get_le16(b + 14);
}

static inline void arctic_welcome_encode(void *buf,
                                         const struct arctic_welcome *m)
{
    uint8_t *b = (uint8_t *)buf;

    arctic_put_le32(b, m->magic);
    arctic_put_le16(b + 4, m->version_major);
    arctic_put_le16(b + 6, m->version_minor);
    arctic_put_le32(b + 8, m->node_id);
    arctic_put_le32(b + 12, m->num_nodes);
    arctic_put_le32(b + 16, m->levels);
    arctic_put_le16(b + 20, m->credits[ARCTIC_PRIORITY_LOW]);
    arctic_put_le16(b + 22, m->credits[ARCTIC_PRIORITY_HIGH]);
}

static inline void arctic_welcome_decode(const void *buf,
                                         struct arctic_welcome *m)
{
    const uint8_t *b = (const uint8_t *)buf;

    m->magic = arctic_get_le32(b);
    m->version_major = arctic_get_le16(b + 4);
    m->version_minor = arctic_get_le16(b + 6);
    m->node_id = arctic_get_le32(b + 8);
    m->num_nodes = arctic_get_le32(b + 12);
    m->levels = arctic_get_le32(b + 16);
    m->credits[ARCTIC_PRIORITY_LOW] = arctic_get_le16(b + 20);
    m->credits[ARCTIC_PRIORITY_HIGH] = arctic_get_le16(b + 22);
}

/*
 * Room for a REJECT text once escaped: every byte may become four
 * ("\\xHH"), plus the terminating NUL.
 */
enum { ARCTIC_REJECT_TEXT_ESCAPED_SIZE = 4 * ARCTIC_LINK_REJECT_TEXT_SIZE + 1 };

/*
 * Decode a REJECT body: its reason, and its text made safe to print.  The
 * text comes from the peer, so it may hold anything: it stops at the first
 * NUL or after ARCTIC_LINK_REJECT_TEXT_SIZE bytes, printable ASCII other
 * than the backslash is kept, and every other byte is written as \xHH, so
 * no terminal escape sequence reaches a log.
 */
static inline uint32_t
arctic_reject_decode(const void *buf,
                     char text[ARCTIC_REJECT_TEXT_ESCAPED_SIZE])
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *b = (const uint8_t *)buf;
    const uint8_t *in = b + 4;
    unsigned i, n = 0;

    for (i = 0; i < ARCTIC_LINK_REJECT_TEXT_SIZE && in[i]; i++) {
        if (in[i] >= 0x20 && in[i] < 0x7f && in[i] != '\\') {
            text[n++] = (char)in[i];
        } else {
            text[n++] = '\\';
            text[n++] = 'x';
            text[n++] = hex[in[i] >> 4];
            text[n++] = hex[in[i] & 0xf];
        }
    }
    text[n] = '\0';
    return arctic_get_le32(b);
}

/*
 * The one frame reader of the project (the device, the switch, the test
 * harness and the qtests use it), in the manner of QEMU's SocketReadState:
 * bytes go in as the stream delivers them, cut anywhere; whole frames come
 * out.  A frame that arrives whole in one piece is handed out in place,
 * without a copy; only a frame split between two pieces is gathered in
 * buf, so a reader never holds more than one frame.
 */
struct arctic_frame_reader {
    uint32_t len;                       /* bytes of a split frame in buf */
    struct arctic_frame_header header;  /* of the frame read or refused */
    const uint8_t *body;                /* ARCTIC_FRAME_WHOLE: its body */
    enum arctic_frame_error error;      /* ARCTIC_FRAME_MALFORMED: why */
    uint8_t buf[ARCTIC_LINK_HEADER_SIZE + ARCTIC_LINK_MAX_BODY];
};

enum arctic_frame_status {
    ARCTIC_FRAME_NEED_MORE,     /* every byte taken, no frame whole yet */
    ARCTIC_FRAME_WHOLE,         /* header and body set */
    /*
     * Bad header (header, error set): past it the stream cannot be framed
     * again
     */
    ARCTIC_FRAME_MALFORMED,
};

/* Forget any split frame: a new connection starts a new stream. */
static inline void arctic_frame_reader_reset(struct arctic_frame_reader *r)
{
    r->len = 0;
    r->header.type = r->header.flags = 0;
    r->header.length = 0;
    r->body = NULL;
    r->error = ARCTIC_FRAME_OK;
}

/*
 * Take bytes from (*data, *size), advancing both, until a frame is whole
 * or the header is refused (arctic_frame_header_check()).  A body handed
 * out points into the caller's bytes or into @r: it is valid until the
 * next call or until those bytes go.
 */
static inline enum arctic_frame_status
arctic_frame_read(struct arctic_frame_reader *r, const uint8_t **data,
                  size_t *size)
{
    const uint8_t *p = *data;
    size_t n = *size;
    enum arctic_frame_status status = ARCTIC_FRAME_NEED_MORE;

    if (r->len == 0 && n >= ARCTIC_LINK_HEADER_SIZE) {
        arctic_frame_header_decode(p, &r->header);
        r->error = arctic_frame_header_check(&r->header);
        if (r->error != ARCTIC_FRAME_OK) {
            *data = p + ARCTIC_LINK_HEADER_SIZE;
            *size = n - ARCTIC_LINK_HEADER_SIZE;
            return ARCTIC_FRAME_MALFORMED;
        }
        if (n >= ARCTIC_LINK_HEADER_SIZE + r->header.length) {
            r->body = p + ARCTIC_LINK_HEADER_SIZE;
            *data = p + ARCTIC_LINK_HEADER_SIZE + r->header.length;
            *size = n - ARCTIC_LINK_HEADER_SIZE - r->header.length;
            return ARCTIC_FRAME_WHOLE;
        }
    }
    while (n > 0) {
        uint32_t want = ARCTIC_LINK_HEADER_SIZE;
        uint32_t take, i;

        if (r->len >= ARCTIC_LINK_HEADER_SIZE) {
            want += r->header.length;
        }
        take = want - r->len < n ? want - r->len : (uint32_t)n;
        for (i = 0; i < take; i++) {    /* no libc: see types.h */
            r->buf[r->len + i] = p[i];
        }
        r->len += take;
        p += take;
        n -= take;
        if (r->len == ARCTIC_LINK_HEADER_SIZE) {
            arctic_frame_header_decode(r->buf, &r->header);
            r->error = arctic_frame_header_check(&r->header);
            if (r->error != ARCTIC_FRAME_OK) {
                r->len = 0;
                status = ARCTIC_FRAME_MALFORMED;
                break;
            }
        }
        if (r->len == ARCTIC_LINK_HEADER_SIZE + r->header.length) {
            r->body = r->buf + ARCTIC_LINK_HEADER_SIZE;
            r->len = 0;
            status = ARCTIC_FRAME_WHOLE;
            break;
        }
    }
    *data = p;
    *size = n;
    return status;
}

#endif /* ARCTIC_LINK_H */
