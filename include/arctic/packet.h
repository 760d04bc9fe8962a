/* SPDX-License-Identifier: MIT */
/*
 * The Arctic packet as the NIU builds it (seed 002 §3.4.1, §6.2.1 step 5,
 * Figure 2) and as it crosses the emulated network, with the NIU's
 * end-to-end header and the CRC trailer.
 *
 * A packet on the emulated wire is, in this order:
 *
 *   struct arctic_e2e_header   16 bytes, the NIU-to-NIU reliability header
 *   uint32_t word[len]         the Arctic packet proper, len = ARCTIC_W1.LENGTH
 *                              word 0: 16 zero bits, then the low half of the
 *                                      route entry (priority, uproute)
 *                              word 1: downroute in the upper half, the low
 *                                      half of the MPI header (endpoint,
 *                                      type, mode) and length = words in
 *                                      the packet (payload words + 4)
 *                              word 2, 3: command0, command1 (MPI) or
 *                                      target address low, high (DMA data)
 *                              word 4..: payload
 *   uint32_t crc               CRC-32C (arctic/crc.h) of everything above
 *
 * All words are little-endian.  The e2e header lives below the dMPI FIFOs
 * (a raw-mode reader sees word 0 onwards plus the CRC), the way FUNi's
 * ack/retry logic sat below its user interface.
 */
#ifndef ARCTIC_PACKET_H
#define ARCTIC_PACKET_H

#include "arctic/types.h"
#include "arctic/crc.h"

/*
 * Route table entry (seed 002 §4.4): downroute:16 | priority:1 |
 * valid:1 | uproute:14.  The spec leaves bit 14 unused; the NIU uses it to
 * mark an entry as programmed, so a destination with no route is refused
 * rather than sent down route 0.  See arctic/route.h for the encoding of
 * the route bits themselves.
 */
FIELD(ROUTE_ENTRY, UPROUTE, 0, 14)
FIELD(ROUTE_ENTRY, VALID, 14, 1)
FIELD(ROUTE_ENTRY, PRIORITY, 15, 1)
FIELD(ROUTE_ENTRY, DOWNROUTE, 16, 16)

/* Arctic word 0: the low half of the route entry, upper 16 bits zero. */
FIELD(ARCTIC_W0, UPROUTE, 0, 14)
FIELD(ARCTIC_W0, VALID, 14, 1)
FIELD(ARCTIC_W0, PRIORITY, 15, 1)
FIELD(ARCTIC_W0, ZERO, 16, 16)

/*
 * Arctic word 1: downroute and the low half of the MPI header, with the
 * length counting the words of the packet rather than payload words.
 */
FIELD(ARCTIC_W1, LENGTH, 0, 5)
FIELD(ARCTIC_W1, MODE, 5, 1)
FIELD(ARCTIC_W1, TYPE, 6, 7)
FIELD(ARCTIC_W1, ENDPOINT, 13, 3)
FIELD(ARCTIC_W1, DOWNROUTE, 16, 16)

enum {
    ARCTIC_PRIORITY_HIGH = 1,         /* value of the priority bit */
    ARCTIC_PRIORITY_LOW = 0,
    ARCTIC_NUM_PRIORITIES = 2,

    ARCTIC_ROUTE_WORDS = 2,           /* word 0 and word 1 */
    ARCTIC_COMMAND_WORDS = 2,
    /*
     * Arctic length = payload + route words + command words (seed §6.2.1
     * footnote 7: "incremented by 4").
     */
    ARCTIC_MPI_LENGTH_EXTRA = ARCTIC_ROUTE_WORDS + ARCTIC_COMMAND_WORDS,
    ARCTIC_MAX_PAYLOAD_WORDS = 20,
    /*
     * A remote-DMA data packet: route words, a 64-bit target address (two
     * words; the 32-bit original used one and length 19) and 16 data
     * words.
     */
    ARCTIC_DMA_DATA_WORDS = 16,
    ARCTIC_DMA_PACKET_LENGTH = ARCTIC_ROUTE_WORDS + 2 + ARCTIC_DMA_DATA_WORDS,
    /*
     * Acks and nacks carry the route words and one more, the answering
     * receiver's incarnation (arctic_control_incarnation()).
     */
    ARCTIC_CONTROL_PACKET_LENGTH = ARCTIC_ROUTE_WORDS + 1,
    ARCTIC_MIN_PACKET_WORDS = ARCTIC_ROUTE_WORDS,
    ARCTIC_MAX_PACKET_WORDS = 31,     /* the 5-bit length field */
};

/* The NIU end-to-end header (docs/link-protocol.md, "Ack/retry"). */
enum arctic_e2e_kind {
    ARCTIC_E2E_DATA = 1,   /* a user message or DMA packet, seq numbered */
    ARCTIC_E2E_ACK = 2,    /* cumulative: every seq <= ack_seq arrived */
    ARCTIC_E2E_NACK = 3,   /* seq ack_seq and later were refused: retry */
};

/* Why a receiver refused a packet, in ARCTIC_E2E_FLAGS.REASON of a NACK. */
enum arctic_nack_reason {
    ARCTIC_NACK_QUEUE_FULL = 1,     /* the receive queue slot was valid */
    /* RxCtrl is OFF, without RAW or with the dMPI receive FIFO full */
    ARCTIC_NACK_RX_OFF = 2,
    ARCTIC_NACK_OUT_OF_ORDER = 3,   /* an earlier seq is missing */
    ARCTIC_NACK_BAD_ENDPOINT = 4,   /* endpoint not enabled (VMASK) */
    ARCTIC_NACK_WRONG_JOB = 5,      /* job tag does not match (GID) */
    /*
     * The receiver holds no state for this epoch.  If nothing of the
     * epoch was acked, the sender goes back to seq 0 of it; if a receiver
     * of another incarnation acked it, the receiver was reset and the
     * sender numbers its unacked packets again from 0 in a new epoch,
     * later than the receiver's current one, which the NACK's seq field
     * carries.  Otherwise the NACK is stale and ignored.
     */
    ARCTIC_NACK_RESYNC = 6,
    ARCTIC_NACK_RX_ERROR = 7,       /* the receive queue is not reachable */
};

/*
 * e2e flags: the priority of the stream a DATA packet belongs to, or that
 * an ACK/NACK refers to, and a NACK's REASON.  On a DATA packet: NOTIFY,
 * the notification that ends a remote DMA, with the requesting endpoint in
 * SOURCE_ENDPOINT (so that a receiver which refused some of that
 * transfer's data can say so, to both programs); NOTICE, such a report
 * from the receiving NIU, delivered as a notice (MODE 1); ACK_NOW, the
 * sender is short of retransmit lines: the receiver acks at once instead
 * of letting the ack wait for data going back.  SOURCE_ENDPOINT shares
 * bits with REASON, which only a NACK has.
 */
FIELD(ARCTIC_E2E_FLAGS, PRIORITY, 0, 1)
FIELD(ARCTIC_E2E_FLAGS, NOTIFY, 1, 1)
FIELD(ARCTIC_E2E_FLAGS, NOTICE, 2, 1)
FIELD(ARCTIC_E2E_FLAGS, ACK_NOW, 3, 1)
FIELD(ARCTIC_E2E_FLAGS, REASON, 4, 4)
FIELD(ARCTIC_E2E_FLAGS, SOURCE_ENDPOINT, 5, 3)

struct arctic_e2e_header {
    uint8_t kind;        /* enum arctic_e2e_kind */
    uint8_t flags;       /* ARCTIC_E2E_FLAGS */
    uint16_t src_node;   /* sender of this packet */
    uint16_t dst_node;   /* node the route leads to: checked on arrival */
    /*
     * Bytes 6-7: one field on the wire, named for what each kind puts
     * there.
     */
    union {
        /* DATA: job tag (GID) stamped by the sending NIU */
        uint16_t job;
        /*
         * ACK/NACK: the low 16 bits of the answering receiver's incarnation
         * (the whole of it is word 2 of the packet,
         * arctic_control_incarnation())
         */
        uint16_t incarnation_lo;
    };
    /* DATA: sender's session; ACK/NACK: the session answered */
    uint32_t epoch;
    /* Bytes 12-15, likewise. */
    union {
        /*
         * DATA: sequence number per (src, dst, priority); ACK: the last one
         * taken; NACK: the first one refused
         */
        uint32_t seq;
        /*
         * NACK with ARCTIC_NACK_RESYNC: the receiver's current epoch of the
         * stream (0: it holds none)
         */
        uint32_t resync_epoch;
    };
};

enum {
    ARCTIC_E2E_HEADER_SIZE = 16,
    ARCTIC_CRC_SIZE = 4,
    /* Bytes of a whole wire packet of a given Arctic length. */
    ARCTIC_WIRE_MIN_SIZE = ARCTIC_E2E_HEADER_SIZE +
                           4 * ARCTIC_MIN_PACKET_WORDS + ARCTIC_CRC_SIZE,
    ARCTIC_WIRE_MAX_SIZE = ARCTIC_E2E_HEADER_SIZE +
                           4 * ARCTIC_MAX_PACKET_WORDS + ARCTIC_CRC_SIZE,
    /* Byte offsets within a wire packet. */
    ARCTIC_WIRE_WORDS_OFFSET = ARCTIC_E2E_HEADER_SIZE,
};

static inline size_t arctic_wire_size(unsigned arctic_length)
{
    return ARCTIC_E2E_HEADER_SIZE + 4u * arctic_length + ARCTIC_CRC_SIZE;
}

/* Serialise and parse the e2e header (little-endian, packed as declared). */
static inline void arctic_e2e_encode(void *buf,
                                     const struct arctic_e2e_header *h)
{
    uint8_t *b = (uint8_t *)buf;

    b[0] = h->kind;
    b[1] = h->flags;
    arctic_put_le16(b + 2, h->src_node);
    arctic_put_le16(b + 4, h->dst_node);
    arctic_put_le16(b + 6, h->job);
    arctic_put_le32(b + 8, h->epoch);
    arctic_put_le32(b + 12, h->seq);
}

static inline void arctic_e2e_decode(const void *buf,
                                     struct arctic_e2e_header *h)
{
    const uint8_t *b = (const uint8_t *)buf;

    h->kind = b[0];
    h->flags = b[1];
    h->src_node = arctic_get_le16(b + 2);
    h->dst_node = arctic_get_le16(b + 4);
    h->job = arctic_get_le16(b + 6);
    h->epoch = arctic_get_le32(b + 8);
    h->seq = arctic_get_le32(b + 12);
}

/*
 * Word 2 of an ACK or NACK: the answering receiver's incarnation, 32 bits
 * that change at each of its resets and never repeat in practice (its
 * epoch base, from the host clock in ms), so a sender tells a receiver
 * reset since it acked from a reordered answer of the same one.
 */
static inline uint32_t arctic_control_incarnation(const void *pkt)
{
    return arctic_get_le32((const uint8_t *)pkt + ARCTIC_WIRE_WORDS_OFFSET +
                           4 * ARCTIC_ROUTE_WORDS);
}

static inline void arctic_control_set_incarnation(void *pkt,
                                                  uint32_t incarnation)
{
    arctic_put_le32((uint8_t *)pkt + ARCTIC_WIRE_WORDS_OFFSET +
                    4 * ARCTIC_ROUTE_WORDS, incarnation);
}

/* Why a wire packet is malformed; 0 when it is well formed. */
enum arctic_wire_error {
    ARCTIC_WIRE_OK = 0,
    ARCTIC_WIRE_TOO_SHORT,     /* smaller than header + 2 words + CRC */
    ARCTIC_WIRE_BAD_LENGTH,    /* W1.LENGTH disagrees with the byte count */
    ARCTIC_WIRE_BAD_CRC,
    ARCTIC_WIRE_BAD_KIND,      /* e2e kind is none of enum arctic_e2e_kind */
    ARCTIC_WIRE_NOT_ZERO,      /* upper half of word 0 not zero */
    /*
     * Well formed, but wrong where it arrived; only the NIU, which knows
     * its node, finds these (not arctic_wire_check()).
     */
    ARCTIC_WIRE_MISROUTED,     /* dst_node not this node, or src_node >= S */
    ARCTIC_WIRE_BAD_ANSWER,    /* an ack or nack without its incarnation */
    ARCTIC_WIRE_BAD_PRIORITY,  /* data off its stream's priority network */
};

/*
 * Check a whole wire packet of @size bytes: length field, CRC, header
 * kind.  The NIU and the switch both use it, so a packet gets the same
 * verdict (and drop reason) from both.
 */
static inline enum arctic_wire_error arctic_wire_check(const uint8_t *pkt,
                                                       size_t size)
{
    uint32_t w0, w1;
    unsigned len;

    if (size < ARCTIC_WIRE_MIN_SIZE || size > ARCTIC_WIRE_MAX_SIZE) {
        return ARCTIC_WIRE_TOO_SHORT;
    }
    w0 = arctic_get_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET);
    w1 = arctic_get_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET + 4);
    len = ARCTIC_FIELD_GET(ARCTIC_W1, LENGTH, w1);
    if (len < ARCTIC_MIN_PACKET_WORDS || arctic_wire_size(len) != size) {
        return ARCTIC_WIRE_BAD_LENGTH;
    }
    if (arctic_get_le32(pkt + size - ARCTIC_CRC_SIZE) !=
        arctic_crc32c(pkt, size - ARCTIC_CRC_SIZE)) {
        return ARCTIC_WIRE_BAD_CRC;
    }
    if (ARCTIC_FIELD_GET(ARCTIC_W0, ZERO, w0) != 0) {
        return ARCTIC_WIRE_NOT_ZERO;
    }
    if (pkt[0] < ARCTIC_E2E_DATA || pkt[0] > ARCTIC_E2E_NACK) {
        return ARCTIC_WIRE_BAD_KIND;
    }
    return ARCTIC_WIRE_OK;
}

/* Write the CRC trailer of a wire packet whose other bytes are final. */
static inline void arctic_wire_seal(uint8_t *pkt, size_t size)
{
    arctic_put_le32(pkt + size - ARCTIC_CRC_SIZE,
                    arctic_crc32c(pkt, size - ARCTIC_CRC_SIZE));
}

#endif /* ARCTIC_PACKET_H */
