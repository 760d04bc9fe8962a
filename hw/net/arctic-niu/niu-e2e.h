/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU end-to-end protocol (seeds 003 §3.2.2-3.2.4, 000 §2.8-2.10;
 * docs/link-protocol.md §8): between the queue engine above and the link
 * below.
 *
 * It owns the retransmit lines and the send order, both halves of every
 * stream (sender: epoch, sequence numbers, the adaptive retransmit
 * timeout, the pause after a refusal; receiver: the sequence it expects
 * and the ack or nack it owes), the peer timeout, and what goes on the
 * link in which order (niu_e2e_pump()).
 *
 * The queue engine (niu-tx.c, niu-rx.c, niu-raw.c) hands it packets to
 * send (niu_e2e_line_alloc(), niu_e2e_send()); it hands the queue engine
 * each data packet that arrives in sequence, and tells it of peers given
 * up, only through NiuE2EOps.  It knows nothing of the device above it:
 * its settings are its own (NiuE2EConfig, the device's properties point
 * into it), and what it needs of the register file (a route for an ack,
 * a counter, an error) it asks for through NiuE2EOps.  Below it is the
 * link (niu-link.h).  Everything here runs under the lock it is given.
 */
#ifndef HW_NET_ARCTIC_NIU_E2E_H
#define HW_NET_ARCTIC_NIU_E2E_H

#include "qemu/thread.h"
#include "qemu/timer.h"
#include "qapi/error.h"
#include "hw/registerfields.h"
#include "arctic/niu-hw.h"
#include "arctic/packet.h"
#include "arctic/route.h"

#include "niu-link.h"

/*
 * Retransmit buffer: lines hold packets until acknowledged (seed 003
 * §3.2.2); some lines are kept for high priority so low-priority traffic
 * can never take them all.  The seeds call it "small" without a size:
 * the "lines" property picks it (NIU_CAPS.LINES tells the driver;
 * ARCTIC_DEFAULT_LINES, niu-hw.h, is its default).
 * Remote-DMA data leaves MPI messages at least ARCTIC_MPI_MIN_LINES or
 * an eighth of them, so MPI messages of both priorities pass a long DMA
 * operation (seed 002 §2.2.2) while DMA gets the window it needs: the
 * lines bound its bandwidth (niu_dma_lines()).
 */
enum {
    ARCTIC_MAX_LINES = R_NIU_CAPS_LINES_MASK >> R_NIU_CAPS_LINES_SHIFT,
    ARCTIC_HI_RESERVED_LINES = 4,
    ARCTIC_MIN_LINES = 2 * ARCTIC_HI_RESERVED_LINES,
    ARCTIC_MPI_MIN_LINES = 8,
    /*
     * Entries of a priority's send order, queued lines and stale ones
     * together (rebuilt when full).
     */
    ARCTIC_SENDQ_SIZE = 4 * ARCTIC_MAX_LINES,
    /*
     * Deliveries whose acks may wait for data going back (x-ack-delay-ns)
     * before they go at once; and a sender with fewer lines than this
     * left for a packet's kind asks for its ack at once (ACK_NOW).
     */
    ARCTIC_ACK_EVERY = 4,
};

/* The lines remote-DMA data may hold at once, of @lines. */
static inline unsigned niu_dma_lines(unsigned lines)
{
    return lines - MAX(ARCTIC_MPI_MIN_LINES, lines / 8);
}

typedef struct ArcticLine {
    bool busy;
    bool queued;            /* in the send order, not on the wire yet */
    bool sent_once;         /* has entered the network at least once */
    bool nack_wait;         /* deadline is a nack back-off, not a timeout */
    bool parked;            /* waits for its paused stream's probe */
    bool dma;               /* carries remote-DMA data */
    bool raw;               /* from the dMPI FIFO, not a queue */
    uint64_t queued_order;  /* send order among queued lines */
    uint8_t prio;           /* ARCTIC_PRIORITY_HIGH / _LOW */
    uint8_t epn;            /* endpoint whose queue it came from */
    uint16_t dst;
    uint32_t seq;
    uint32_t retries;       /* times sent again, for any reason */
    uint32_t timeouts;      /* ... of them for want of any answer */
    int64_t deadline;       /* virtual ns: retransmit if not acked by then */
    int64_t sent_ns;        /* virtual ns of its first send */
    bool refused;           /* refused for its job tag (WRONG_JOB) ... */
    int64_t refused_since;  /* ... since this virtual ns */
    uint16_t size;          /* bytes of wire[] */
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
} ArcticLine;

/* One place in the send order of a priority (niu-e2e.c sendq_push()). */
typedef struct ArcticSendEntry {
    uint16_t line;
    uint64_t order;         /* the line's queued_order when queued */
} ArcticSendEntry;

typedef struct ArcticSendQueue {
    ArcticSendEntry entry[ARCTIC_SENDQ_SIZE];
    unsigned head, count;
} ArcticSendQueue;

/*
 * Retransmit timeouts and nack back-offs (niu-e2e.c line_timeout(),
 * line_backoff()): doubled for each retry, at most ARCTIC_MAX_BACKOFF
 * times, up to a cap in time (a quarter of the peer timeout; the round
 * trip for a nack), from a base that follows the round trips measured but
 * stays under a second.
 */
#define ARCTIC_MAX_BACKOFF 20
#define ARCTIC_MAX_RTO_NS (1000 * SCALE_MS)
/* The longest retransmit timeout when no peer is ever given up. */
#define NIU_PEERLESS_MAX_TIMEOUT_NS (60 * NANOSECONDS_PER_SECOND)

/* Sender side of one (destination, priority) stream. */
typedef struct ArcticTxStream {
    uint32_t epoch;
    uint32_t next_seq;
    bool acked;                 /* an ack of this epoch has arrived */
    uint32_t peer_incarnation;  /* the receiver that sent it */
    /*
     * Refused: only the probe (the refused packet) goes again until it is
     * acked; the rest of the stream is parked (niu-e2e.c).
     */
    bool paused;
    uint32_t probe_seq;
    /*
     * The retransmit timeout adapts to the round trips the stream sees
     * (RFC 6298): smoothed round trip and its variation from packets acked
     * without having been sent again (0: no sample yet), and the doublings
     * its timeouts have added since the last sample.  A network whose
     * queues hold packets longer than retry-timeout-ns (64 nodes on two
     * cores) is then not flooded with copies of what it still carries.
     */
    int64_t srtt_ns, rttvar_ns;
    uint32_t backoff;
    int64_t backoff_at;         /* when the last timeout doubled it */
} ArcticTxStream;

/*
 * Receiver side of one (source, priority) stream, and what it owes the
 * sender: at most one ack and one nack are pending per stream, so the
 * control traffic the NIU owes is bounded however the network behaves.
 */
typedef struct ArcticRxStream {
    bool known;
    bool ack_due;
    bool nack_due;
    bool in_ctrl_fifo;
    uint8_t nack_reason;
    uint32_t epoch;
    uint32_t expected;
    uint32_t nack_epoch;    /* epoch the nack refers to */
    uint32_t nack_seq;      /* RESYNC: the epoch we hold (resync_epoch) */
} ArcticRxStream;

/*
 * What the queue engine made of a data packet: delivered; dropped,
 * because no retry could ever deliver it (acked either way, and the
 * stream moves on); or refused with a nack reason (enum
 * arctic_nack_reason), for its sender to retry.
 */
typedef enum {
    RX_DELIVERED,
    RX_DROPPED,
    RX_REFUSED,
} RxOutcome;

typedef struct RxVerdict {
    RxOutcome outcome;
    uint8_t nack_reason;        /* RX_REFUSED only */
} RxVerdict;

typedef struct NiuE2E NiuE2E;

/*
 * The protocol's settings: device properties ("lines", "retry-timeout-ns",
 * "nack-backoff-ns", "peer-timeout-ms", "refused-timeout-ms";
 * docs/programming-guide.md §14), checked by niu_e2e_check().
 */
typedef struct NiuE2EConfig {
    uint32_t lines;             /* retransmit lines */
    uint64_t retry_timeout_ns;  /* first retransmit timeout */
    uint64_t nack_backoff_ns;   /* first delay before retrying a nack */
    uint32_t peer_timeout_ms;   /* silence after which a node is dead */
    uint32_t refused_timeout_ms; /* WRONG_JOB refusals before a give-up */
} NiuE2EConfig;

/* What the protocol hands up to the queue engine. */
typedef struct NiuE2EOps {
    /*
     * The next data packet of stream (@prio, @src), in sequence, with its
     * e2e @job tag and @flags; @pkt is the whole wire packet.
     */
    RxVerdict (*deliver)(NiuE2E *e2e, uint8_t prio, uint16_t src,
                         uint16_t job, uint8_t flags, const uint8_t *pkt,
                         size_t size);
    /*
     * @node was given up (peer timeout): packets to it from the endpoints
     * in @endpoints (a mask) were dropped, and its streams start afresh.
     */
    void (*peer_lost)(NiuE2E *e2e, uint16_t node, uint32_t endpoints);
    /*
     * A message of endpoint @epn that @node refused for its job tag for
     * refused-timeout-ms was given up (dropped).
     */
    void (*refused)(NiuE2E *e2e, uint16_t node, unsigned epn);
    /* The high-priority route table entry for @node (acks and nacks). */
    uint32_t (*route)(NiuE2E *e2e, uint16_t node);
    /* Counter @c grew by @n. */
    void (*count)(NiuE2E *e2e, enum arctic_counter c, uint32_t n);
    /* Error @cause happened (NIU_ERROR_INFO.DETAIL @detail). */
    void (*error)(NiuE2E *e2e, enum arctic_error cause, uint32_t detail,
                  const char *fmt, va_list ap) G_GNUC_PRINTF(4, 0);
} NiuE2EOps;

struct NiuE2E {
    NiuE2EConfig cfg;
    uint16_t node_id;
    bool timed;                 /* epochs from the run, not the host clock */
    NiuLink *link;
    QemuRecMutex *lock;         /* held by every caller; the timer takes it */
    const NiuE2EOps *ops;

    /* Sender: the retransmit lines and the send order */
    ArcticLine lines[ARCTIC_MAX_LINES];
    /* Bit i set: line i < num_lines is free (the lowest goes first). */
    uint64_t lines_free[DIV_ROUND_UP(ARCTIC_MAX_LINES, 64)];
    unsigned lines_busy[ARCTIC_NUM_PRIORITIES];
    unsigned dma_lines_busy;
    ArcticSendQueue sendq[ARCTIC_NUM_PRIORITIES];
    uint64_t queue_counter;
    ArcticTxStream tx_stream[ARCTIC_NUM_PRIORITIES][ARCTIC_S];
    QEMUTimer *retry_timer;
    /* First epoch of every stream after reset; this NIU's incarnation. */
    uint32_t epoch_base;
    /*
     * Per destination: virtual ns since which packets to it have waited
     * for any answer (0: none waits); see peer_answered().
     */
    int64_t peer_waiting_since[ARCTIC_S];

    /* Receiver: the streams and the acks and nacks owed */
    ArcticRxStream rx_stream[ARCTIC_NUM_PRIORITIES][ARCTIC_S];
    /* FIFO of (priority << 8 | source) streams owing an ack or nack */
    uint16_t ctrl_fifo[ARCTIC_NUM_PRIORITIES * ARCTIC_S];
    unsigned ctrl_head, ctrl_count;
    unsigned acks_held;         /* acks owed since controls last went */
    bool nack_owed;
    bool ack_now;               /* a delivery asked for its ack (ACK_NOW) */

    /* What was wrong with the state last loaded, or NULL */
    const char *loaded_fault;
};

/*
 * One stream pair (to and from @node at @prio) as the device's state view
 * shows it (QOM "state", docs/device-internals.md): what waits for an ack
 * and where each side's sequence stands.
 */
typedef struct NiuE2EStreamView {
    unsigned lines_busy;        /* sent or queued, not yet acked */
    unsigned lines_queued;      /* of those, waiting to (re)enter the link */
    uint32_t max_retries;       /* the most any busy line was resent */
    int64_t oldest_wait_ns;     /* virtual ns the oldest busy line waited */
    int64_t next_deadline_ns;   /* virtual ns to the next retry, or -1 */
    uint32_t tx_epoch, tx_next_seq;
    bool tx_acked, tx_paused;
    uint32_t tx_backoff;
    bool rx_known;
    uint32_t rx_epoch, rx_expected;
    bool rx_ack_due, rx_nack_due;
} NiuE2EStreamView;

bool niu_e2e_check(const NiuE2EConfig *cfg, Error **errp);
void niu_e2e_init(NiuE2E *e, uint16_t node_id, bool timed, NiuLink *link,
                  QemuRecMutex *lock, const NiuE2EOps *ops);
void niu_e2e_cleanup(NiuE2E *e);
void niu_e2e_reset(NiuE2E *e);
void niu_e2e_renew(NiuE2E *e);
ArcticLine *niu_e2e_line_alloc(NiuE2E *e, uint8_t prio);
ArcticLine *niu_e2e_dma_line_alloc(NiuE2E *e);
void niu_e2e_send(NiuE2E *e, ArcticLine *line, unsigned epn, uint16_t job,
                  unsigned dest, uint32_t route, uint32_t w1,
                  const uint32_t *body, unsigned body_words);
void niu_e2e_mark(ArcticLine *line, uint8_t flags, uint16_t job);
unsigned niu_e2e_pending(NiuE2E *e);
bool niu_e2e_unsent(NiuE2E *e);
bool niu_e2e_stream_view(NiuE2E *e, uint8_t prio, uint16_t node,
                         NiuE2EStreamView *v);
int64_t niu_e2e_retry_due_ns(NiuE2E *e);
void niu_e2e_pump(NiuE2E *e, bool lazy);
void niu_e2e_link_up(NiuE2E *e);
void niu_e2e_packet(NiuE2E *e, const uint8_t *pkt, size_t size);
void niu_e2e_restored(NiuE2E *e);

/* The protocol's part of the device's migration stream. */
extern const VMStateDescription vmstate_niu_e2e;

#endif /* HW_NET_ARCTIC_NIU_E2E_H */
