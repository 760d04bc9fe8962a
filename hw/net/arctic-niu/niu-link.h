/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU link layer: one session with arctic-switch (include/arctic/
 * link.h: HELLO/WELCOME, frames, per-priority credits), independent of
 * how the bytes move.
 *
 * Three parties meet here:
 *   - the owner above (the end-to-end protocol of niu-e2e.c),
 *     told of packets, of the link going up or down, and of room to send
 *     through NiuLinkOps; it sends with niu_link_can_send()/niu_link_send()
 *     and ends a burst with niu_link_flush();
 *   - the session itself (niu-link.c): framing, handshake, credits, the
 *     output buffer;
 *   - a transport below, which moves bytes and tells the session of
 *     input, of room to write and of the connection opening or closing
 *     (NiuTransportOps).  Two exist:
 *       niu-link-chr.c     a chardev (UNIX or TCP socket, reconnect-ms=),
 *                          served by QEMU's main loop; the fallback, and
 *                          the one for switches on other hosts;
 *       niu-link-thread.c  a UNIX or TCP socket of the NIU's own,
 *                          served by a link thread that sleeps in poll()
 *                          and is woken by the switch, taking the device
 *                          lock (never the BQL) to hand a batch of input
 *                          to the session; on a UNIX socket it offers the
 *                          switch shared-memory rings with its HELLO
 *                          (arctic/link-ring.h), and once the WELCOME
 *                          takes them the frames go through those.
 *
 * Everything here runs under the owner's lock (@lock, the device lock),
 * whichever thread calls it: the owner holds it when it calls in, and a
 * transport takes it before it reports anything.  Nothing here may take
 * the BQL; a transport's own thread calls niu_link_released() each time
 * it has let go of the lock, where the owner may.
 */
#ifndef HW_NET_ARCTIC_NIU_LINK_H
#define HW_NET_ARCTIC_NIU_LINK_H

#include "chardev/char-fe.h"
#include "qemu/stats64.h"
#include "qemu/thread.h"
#include "qemu/timer.h"
#include "hw/registerfields.h"
#include "arctic/niu-hw.h"
#include "arctic/packet.h"
#include "arctic/link.h"
#include "arctic/route.h"

typedef struct NiuLink NiuLink;
typedef struct NiuLinkThread NiuLinkThread;

typedef enum NiuLinkState {
    NIU_LINK_DOWN,          /* no connection */
    /* connected, waiting for WELCOME (or a challenge, then its proof) */
    NIU_LINK_HELLO_SENT,
    NIU_LINK_UP,
} NiuLinkState;

/* What the link reports to its owner. */
typedef struct NiuLinkOps {
    /* WELCOME taken: num_nodes, levels and the credits are set. */
    void (*up)(NiuLink *link);
    /* A session ended (it was up). */
    void (*down)(NiuLink *link);
    /* A packet arrived; its credit goes back to the switch by itself. */
    void (*packet)(NiuLink *link, uint8_t prio, const uint8_t *wire,
                   size_t size);
    /*
     * Credits or output room came back, or a batch of input was
     * dispatched: the owner may send again.
     */
    void (*ready)(NiuLink *link);
    /* What the owner held back (niu_link_defer()) must go now. */
    void (*deferred)(NiuLink *link);
    /*
     * The time the owner asked for with niu_link_wake_at() may have come
     * (it is also called at other deferrals: the owner checks the clock).
     */
    void (*wake)(NiuLink *link);
    /* Work the owner handed to the transport's thread (niu_link_post()). */
    void (*posted)(NiuLink *link);
    /*
     * The transport's own thread let go of the owner's lock after
     * reporting: called without it and without the BQL, so the owner
     * may take the BQL here to finish what it could not do under its
     * lock (raise an interrupt).  NULL: nothing to finish.
     */
    void (*released)(NiuLink *link);
    /*
     * Something for the device's error registers and log (a protocol
     * error, a refusal), said in @what; the link has traced it.
     */
    void (*error)(NiuLink *link, enum arctic_error cause, uint32_t detail,
                  const char *what);
    /*
     * A timed link (link 1.4, niu_link_set_timed()): the virtual time the
     * head of a packet about to go leaves the NIU (its stamp); a packet
     * the switch delivers, for the NIU to take at virtual time @at; the
     * cluster's clock started; the next grant.
     */
    uint64_t (*stamp)(NiuLink *link, uint8_t prio, const uint8_t *wire,
                      size_t size);
    void (*timed_packet)(NiuLink *link, uint8_t prio, uint64_t at,
                         const uint8_t *wire, size_t size);
    void (*time_start)(NiuLink *link, const struct arctic_time_start *start);
    void (*time_grant)(NiuLink *link, uint64_t until);
} NiuLinkOps;

/* What a transport does for the session. */
typedef struct NiuTransportOps {
    const char *name;
    /*
     * Write up to @len bytes; returns how many were taken.  Fewer than
     * @len means the transport is full: it calls niu_link_writable()
     * when it has room again.
     */
    size_t (*write)(NiuLink *link, const uint8_t *buf, size_t len);
    /* The session takes input again after holding it back. */
    void (*accept_input)(NiuLink *link);
    /*
     * Drop the connection (a protocol error or a refusal); the session
     * is already down and ignores what still arrives.
     */
    void (*disconnect)(NiuLink *link);
    /*
     * Call niu_link_deferred_due() in @delay_ns (host time) or sooner;
     * a pending call is not put off.
     */
    void (*defer)(NiuLink *link, int64_t delay_ns);
    /*
     * Call niu_link_posted_due() from the transport's own thread soon;
     * false if the transport has no thread (the owner does the work).
     */
    bool (*post)(NiuLink *link);
    /*
     * Hand the input waiting now to the session, in the caller's thread,
     * without blocking; true if there was some.  NULL: the transport's
     * own reader is the only one.
     */
    bool (*poll_input)(NiuLink *link);
    /*
     * The readers stopped polling (one sleeps until an interrupt): the
     * transport's own reader takes the input again now.
     */
    void (*poll_end)(NiuLink *link);
    /*
     * The owner stops (@paused) or resumes taking input: while paused the
     * transport reads nothing, neither frames nor ring descriptors nor
     * direct rings, and sends what the session writes.  NULL: the session's
     * niu_link_input_room() is all the transport looks at.
     */
    void (*pause)(NiuLink *link, bool paused);
    /*
     * The WELCOME says the switch took the rings this connection's HELLO
     * offered: every later frame goes through them.  False if none were
     * offered (NULL: the transport never offers any).
     */
    bool (*rings_up)(NiuLink *link, bool cpu_wake);
    /*
     * Direct rings (link 1.5): write the PACKET frame @frame of @len
     * bytes into the ring to node @dst of priority @prio; false if there
     * is none or it has too little room (the frame then goes through the
     * switch).  NULL: the transport takes no direct rings.
     */
    bool (*direct_write)(NiuLink *link, unsigned dst, uint8_t prio,
                         const uint8_t *frame, size_t len);
    /*
     * A timed link is up: from now on only the owner's thread reads the
     * input (niu_link_read_input(), niu_link_wait_input()), at the
     * instants of virtual time it chooses; the transport's own reader
     * watches the connection's end only.  NULL: no timed links.
     */
    void (*timed)(NiuLink *link);
    /* Hand the input waiting now to the session, in the caller's thread. */
    bool (*read_input)(NiuLink *link);
    /*
     * Without the owner's lock: sleep until input may have come, or
     * @timeout_ns pass.
     */
    void (*wait_input)(NiuLink *link, int64_t timeout_ns);
    void (*cleanup)(NiuLink *link);
} NiuTransportOps;

/*
 * The link's settings: the device's properties (docs/programming-guide.md
 * §14), handed to niu_link_init() and niu_link_init_thread().
 */
typedef struct NiuLinkConfig {
    char *socket;               /* link-socket: served by the link thread */
    char *secret;               /* link-secret: id of the key's object */
    uint32_t reconnect_ms;
    uint64_t busy_poll_ns;      /* the thread leaves input to a polling vCPU */
    bool rings;                 /* offer the switch shared-memory rings */
    bool kick_yield;            /* give the CPU to a switch just kicked */
    bool cpu_wake;              /* kick the switch's thread of our CPU */
    bool direct;                /* take direct rings (link 1.5) */
    uint32_t rx_credits;        /* granted to the switch per priority */
    uint64_t ack_delay_ns;      /* acks and credits wait for company */
} NiuLinkConfig;

struct NiuLink {
    const NiuLinkOps *ops;
    void *opaque;                       /* the owner's */
    QemuRecMutex *lock;                 /* the owner's: see below */
    const NiuTransportOps *transport;
    uint32_t node_id;
    uint32_t rx_credits;                /* granted to the switch */
    uint64_t defer_ns;                  /* ack and credit coalescing */

    NiuLinkState state;
    /*
     * The owner's state is being saved or loaded (niu_link_pause()): no
     * input is taken, so nothing the switch sends can change it.
     */
    bool paused;
    bool resume_due;                    /* a report waits for the resume */
    bool rejected;                      /* the last answer was REJECT */
    uint16_t up_count;
    /*
     * The cluster's key (link-secret=, link 1.3), or none: with one, the
     * NIU answers a switch's challenge and takes a WELCOME only after the
     * switch proved the key.  Per session: the HELLO sent, both nonces,
     * and how far the proof went.
     */
    uint8_t *secret;
    size_t secret_len;
    uint8_t hello_body[ARCTIC_HELLO_SIZE];
    uint8_t switch_nonce[ARCTIC_AUTH_NONCE_SIZE];
    uint8_t own_nonce[ARCTIC_AUTH_NONCE_SIZE];
    bool challenged, proved;
    bool rings;                         /* this session runs over rings */
    /*
     * Direct rings (link 1.5): the HELLO offers to take them (@direct_ok)
     * and the WELCOME said the switch may send some (@direct).  Counted:
     * packets written to and read from them, packets that found a ring
     * too full and went through the switch, and packets dropped as read
     * from a peer's ring that named another source or led elsewhere.
     * @direct_to: how many nodes this NIU writes into directly now (set
     * under the device lock, by the transport that owns the rings).
     */
    bool direct_ok, direct;
    Stat64 direct_sent, direct_received, direct_full, direct_refused;
    unsigned direct_to;
    /*
     * A timed link (link 1.4): the HELLO says TIMED; packets go stamped
     * (NiuLinkOps.stamp) and without credits once the switch started the
     * cluster's clock (TIME_START).
     */
    bool timed;
    bool time_started;
    Stat64 switch_kicks;                /* eventfd kicks of a sleeping switch */
    Stat64 kick_yields;                 /* ... after which the CPU was given */
    Stat64 cpu_kicks;                   /* ... to our CPU's (link 1.2) */
    uint32_t num_nodes;
    uint32_t levels;
    uint32_t tx_credits[ARCTIC_NUM_PRIORITIES];     /* we may send */
    uint32_t rx_outstanding[ARCTIC_NUM_PRIORITIES]; /* switch may send */
    uint32_t credits_to_return[ARCTIC_NUM_PRIORITIES];
    struct arctic_frame_reader reader;  /* a frame split between reads */
    GByteArray *out_buf;
    bool out_blocked;                   /* the transport is full */
    bool credits_due;                   /* the deferral ran out */
    int64_t own_due_ns;                 /* host ns niu_link_defer() ends */

    /* transports' own */
    CharBackend *chr;
    guint out_watch;
    QEMUTimer *defer_timer;
    NiuLinkThread *thread;
};

enum {
    /*
     * Bytes waiting for the transport beyond which the owner stops
     * sending and the session stops taking input (every packet may owe
     * an answer).
     */
    NIU_LINK_OUT_LIMIT = 16 * 1024,
};

/* link-socket=tcp:HOST:PORT: the link thread's switch is on TCP. */
#define NIU_LINK_TCP_PREFIX "tcp:"

/* For the owner */
void niu_link_init(NiuLink *link, const NiuLinkOps *ops, void *opaque,
                   QemuRecMutex *lock, uint32_t node_id, uint32_t rx_credits,
                   uint64_t defer_ns);
bool niu_link_init_chr(NiuLink *link, CharBackend *chr, Error **errp);
bool niu_link_init_thread(NiuLink *link, const char *path,
                          uint32_t reconnect_ms, uint64_t busy_poll_ns,
                          bool rings, bool kick_yield, bool cpu_wake,
                          bool direct, Error **errp);
void niu_link_set_secret(NiuLink *link, const uint8_t *key, size_t len);
void niu_link_set_timed(NiuLink *link);
void niu_link_time_ready(NiuLink *link, const struct arctic_time_ready *ready);
void niu_link_time_sync(NiuLink *link, uint64_t reached, uint64_t promise);
bool niu_link_read_input(NiuLink *link);
void niu_link_wait_input(NiuLink *link, int64_t timeout_ns);
void niu_link_cleanup(NiuLink *link);
bool niu_link_is_up(const NiuLink *link);
bool niu_link_can_send(const NiuLink *link, uint8_t prio);
void niu_link_send(NiuLink *link, uint8_t prio, const uint8_t *wire,
                   size_t size);
void niu_link_flush(NiuLink *link);
void niu_link_defer(NiuLink *link);
bool niu_link_wake_at(NiuLink *link, int64_t delay_ns);
bool niu_link_post(NiuLink *link);
bool niu_link_can_poll(const NiuLink *link);
bool niu_link_poll(NiuLink *link);
void niu_link_poll_end(NiuLink *link);
void niu_link_pause(NiuLink *link, bool paused);
const char *niu_link_state_name(NiuLinkState state);
const char *niu_link_transport_name(const NiuLink *link);

/* For transports */
void niu_link_opened(NiuLink *link);
void niu_link_closed(NiuLink *link);
size_t niu_link_input_room(const NiuLink *link);
void niu_link_input(NiuLink *link, const uint8_t *buf, size_t size);
void niu_link_writable(NiuLink *link);
void niu_link_deferred_due(NiuLink *link);
void niu_link_posted_due(NiuLink *link);
void niu_link_released(NiuLink *link);
bool niu_link_thread_is_self(NiuLink *link);
void niu_link_broken(NiuLink *link, const char *what, uint32_t value);
void niu_link_direct_packet(NiuLink *link, unsigned src, uint8_t prio,
                            const uint8_t *wire, size_t size);
void niu_link_direct_done(NiuLink *link);

#endif /* HW_NET_ARCTIC_NIU_LINK_H */
