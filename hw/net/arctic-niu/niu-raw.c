/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Arctic NIU dMPI raw mode (seed 002 §2.3, §3.4, §6.1): with a datapath
 * OFF, its FIFO access points in endpoint 0's user page move raw Arctic
 * packets.
 *
 * Transmit: the words pushed into HiTxFIFO or LoTxFIFO, the last one into
 * the *Last register, form one packet in the 16-bit-skewed format of
 * Figure 2 (word 0 = 16 zero bits and the route's low half, word 1 =
 * downroute and mode/type/length, then the body).  The NIU checks it,
 * adds its end-to-end header and the CRC, and sends it like any other, so
 * a raw node interoperates with MPI-mode peers.  Receive: with RxCtrl OFF
 * and its RAW bit set, packets pile up in a receive FIFO per priority
 * (seed 002 §4.1.2) and are
 * read word by word: both route words, the body, and the CRC trailer.
 * When a FIFO is full the NIU refuses further packets (NACK RX_OFF) and
 * the senders retry: they back up into the network.
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "migration/vmstate.h"
#include "trace.h"

#include "arctic-niu.h"

void niu_raw_reset(ArcticNiuState *s)
{
    memset(s->raw.tx_len, 0, sizeof(s->raw.tx_len));
    memset(s->raw.tx_ready, 0, sizeof(s->raw.tx_ready));
    memset(s->raw.tx_overrun, 0, sizeof(s->raw.tx_overrun));
    memset(s->raw.rx_head, 0, sizeof(s->raw.rx_head));
    memset(s->raw.rx_count, 0, sizeof(s->raw.rx_count));
    memset(s->raw.rx_word, 0, sizeof(s->raw.rx_word));
}

bool niu_raw_rx_push(ArcticNiuState *s, uint8_t prio, const uint8_t *pkt,
                     size_t size)
{
    unsigned tail;

    if (s->raw.rx_count[prio] == ARCTIC_RAW_RX_PACKETS) {
        return false;
    }
    tail = (s->raw.rx_head[prio] + s->raw.rx_count[prio]) %
           ARCTIC_RAW_RX_PACKETS;
    memcpy(s->raw.rx[prio][tail].wire, pkt, size);
    s->raw.rx[prio][tail].size = size;
    s->raw.rx_count[prio]++;
    trace_arctic_niu_raw_rx(s->node_id, prio, s->raw.rx_count[prio]);
    return true;
}

/* Pop the next word of the packet at the head of a receive FIFO. */
static uint32_t raw_rx_pop(ArcticNiuState *s, uint8_t prio)
{
    unsigned head = s->raw.rx_head[prio];
    const uint8_t *wire = s->raw.rx[prio][head].wire;
    unsigned words = (s->raw.rx[prio][head].size -
                      ARCTIC_WIRE_WORDS_OFFSET) / 4;    /* with the CRC */
    uint32_t val;

    if (s->raw.rx_count[prio] == 0) {
        niu_error(&s->status, ARCTIC_ERR_BAD_VALUE, 0,
                  prio == ARCTIC_PRIORITY_HIGH ? ARCTIC_RXQ_HI
                                                      : ARCTIC_RXQ_LO,
                         0, "read of an empty receive FIFO");
        return 0;
    }
    val = arctic_get_le32(wire + ARCTIC_WIRE_WORDS_OFFSET +
                          4 * s->raw.rx_word[prio]);
    if (++s->raw.rx_word[prio] == words) {
        s->raw.rx_word[prio] = 0;
        s->raw.rx_head[prio] = (head + 1) % ARCTIC_RAW_RX_PACKETS;
        s->raw.rx_count[prio]--;
    }
    return val;
}

/* Check a whole raw packet and hand it to the transmit side. */
static void raw_tx_commit(ArcticNiuState *s, uint8_t prio)
{
    const uint32_t *w = s->raw.tx[prio];
    unsigned count = s->raw.tx_len[prio];

    if (niu_tx_send_raw(s, prio, w, count)) {
        s->raw.tx_len[prio] = 0;
        s->raw.tx_ready[prio] = false;
    } else {
        s->raw.tx_ready[prio] = true;   /* TxStatus shows it full */
    }
}

void niu_raw_tx_flush(ArcticNiuState *s)
{
    unsigned p;

    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        if (s->raw.tx_ready[p]) {
            raw_tx_commit(s, p);
        }
    }
}

static bool raw_tx_push(ArcticNiuState *s, uint8_t prio, uint32_t val,
                        bool last, hwaddr reg)
{
    if (s->tx_enabled) {
        /* dMPI and MPI do not mix on one datapath (§2.3). */
        niu_error(&s->status, ARCTIC_ERR_BUSY, 0, 0, reg,
                  "raw transmit while the transmit datapath is on");
        return true;
    }
    if (s->raw.tx_ready[prio]) {
        /* TxStatus said full: the word is refused, and says so. */
        niu_error(&s->status, ARCTIC_ERR_BAD_VALUE, 0, 0, reg,
                  "raw transmit FIFO written while full");
        return true;
    }
    if (s->raw.tx_overrun[prio] ||
        s->raw.tx_len[prio] == ARCTIC_MAX_PACKET_WORDS) {
        /*
         * Longer than any packet: the whole packet is discarded, up to
         * and including its *Last word, so the next one starts clean.
         */
        if (!s->raw.tx_overrun[prio]) {
            niu_error(&s->status, ARCTIC_ERR_BAD_VALUE, 0, 0, reg,
                      "raw packet longer than %d words discarded",
                      ARCTIC_MAX_PACKET_WORDS);
            niu_count(&s->status, ARCTIC_CNT_TX_ERRORS);
        }
        s->raw.tx_overrun[prio] = !last;
        s->raw.tx_len[prio] = 0;
        return true;
    }
    s->raw.tx[prio][s->raw.tx_len[prio]++] = val;
    if (last) {
        raw_tx_commit(s, prio);
    }
    return true;
}

/* Accesses to endpoint 0's FIFO registers; false for any other offset. */
bool niu_raw_access(ArcticNiuState *s, hwaddr reg, bool write,
                    uint32_t *val)
{
    switch (reg) {
    case A_USER_HI_TX_FIFO:
    case A_USER_HI_TX_FIFO_LAST:
    case A_USER_LO_TX_FIFO:
    case A_USER_LO_TX_FIFO_LAST:
        if (!write) {
            return false;               /* write-only */
        }
        return raw_tx_push(s, reg <= A_USER_HI_TX_FIFO_LAST
                              ? ARCTIC_PRIORITY_HIGH : ARCTIC_PRIORITY_LOW,
                           *val, reg == A_USER_HI_TX_FIFO_LAST ||
                                 reg == A_USER_LO_TX_FIFO_LAST, reg);
    case A_USER_HI_RX_FIFO:
    case A_USER_LO_RX_FIFO:
        if (write) {
            return false;
        }
        *val = raw_rx_pop(s, reg == A_USER_HI_RX_FIFO ? ARCTIC_PRIORITY_HIGH
                                                      : ARCTIC_PRIORITY_LOW);
        return true;
    case A_USER_RX_STATUS:
        if (write) {
            return false;
        }
        *val = FIELD_DP32(0, USER_RX_STATUS, HI_EMPTY,
                          !s->raw.rx_count[ARCTIC_PRIORITY_HIGH]);
        *val = FIELD_DP32(*val, USER_RX_STATUS, LO_EMPTY,
                          !s->raw.rx_count[ARCTIC_PRIORITY_LOW]);
        return true;
    case A_USER_TX_STATUS:
        if (write) {
            return false;
        }
        *val = FIELD_DP32(0, USER_TX_STATUS, HI_FULL,
                          s->raw.tx_ready[ARCTIC_PRIORITY_HIGH]);
        *val = FIELD_DP32(*val, USER_TX_STATUS, LO_FULL,
                          s->raw.tx_ready[ARCTIC_PRIORITY_LOW]);
        return true;
    default:
        return false;
    }
}

/* --- migration (docs/device-internals.md §8) ---------------------------- */

static const VMStateDescription vmstate_niu_raw_packet = {
    .name = "arctic-niu/raw-packet",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT8_ARRAY(wire, NiuRawPacket, ARCTIC_WIRE_MAX_SIZE),
        VMSTATE_UINT16(size, NiuRawPacket),
        VMSTATE_END_OF_LIST()
    },
};

/* Only a FIFO that holds something, or a packet being written, is sent. */
static bool raw_needed(void *opaque)
{
    ArcticNiuState *s = opaque;
    unsigned p;

    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        if (s->raw.tx_len[p] || s->raw.tx_ready[p] || s->raw.tx_overrun[p] ||
            s->raw.rx_count[p]) {
            return true;
        }
    }
    return false;
}

static const char *raw_loaded_fault(NiuRawFifos *r)
{
    unsigned p, i;

    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        if (r->tx_len[p] > ARCTIC_MAX_PACKET_WORDS ||
            r->rx_head[p] >= ARCTIC_RAW_RX_PACKETS ||
            r->rx_count[p] > ARCTIC_RAW_RX_PACKETS) {
            return "a raw FIFO index out of range";
        }
        for (i = 0; i < r->rx_count[p]; i++) {
            const NiuRawPacket *k =
                &r->rx[p][(r->rx_head[p] + i) % ARCTIC_RAW_RX_PACKETS];

            if (k->size < ARCTIC_WIRE_MIN_SIZE ||
                k->size > ARCTIC_WIRE_MAX_SIZE) {
                return "a raw receive FIFO packet of an impossible size";
            }
        }
        if (r->rx_count[p] ?
            r->rx_word[p] >= (r->rx[p][r->rx_head[p]].size -
                              ARCTIC_WIRE_WORDS_OFFSET) / 4 :
            r->rx_word[p] != 0) {
            return "a raw receive FIFO read past its packet";
        }
    }
    return NULL;
}

/* niu_post_load() refuses the stream for a fault. */
static int raw_post_load(void *opaque, int version_id)
{
    ArcticNiuState *s = opaque;
    const char *fault = raw_loaded_fault(&s->raw);

    if (fault) {
        s->loaded_fault = s->loaded_fault ?: fault;
        niu_raw_reset(s);       /* no register indexes past the FIFOs */
    }
    return 0;
}

const VMStateDescription vmstate_niu_raw = {
    .name = "arctic-niu/raw",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = raw_needed,
    .post_load = raw_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32_2DARRAY(raw.tx, ArcticNiuState, ARCTIC_NUM_PRIORITIES,
                               ARCTIC_MAX_PACKET_WORDS),
        VMSTATE_UINT32_ARRAY(raw.tx_len, ArcticNiuState,
                             ARCTIC_NUM_PRIORITIES),
        VMSTATE_BOOL_ARRAY(raw.tx_ready, ArcticNiuState,
                           ARCTIC_NUM_PRIORITIES),
        VMSTATE_BOOL_ARRAY(raw.tx_overrun, ArcticNiuState,
                           ARCTIC_NUM_PRIORITIES),
        VMSTATE_STRUCT_2DARRAY(raw.rx, ArcticNiuState, ARCTIC_NUM_PRIORITIES,
                               ARCTIC_RAW_RX_PACKETS, 1,
                               vmstate_niu_raw_packet, NiuRawPacket),
        VMSTATE_UINT32_ARRAY(raw.rx_head, ArcticNiuState,
                             ARCTIC_NUM_PRIORITIES),
        VMSTATE_UINT32_ARRAY(raw.rx_count, ArcticNiuState,
                             ARCTIC_NUM_PRIORITIES),
        VMSTATE_UINT32_ARRAY(raw.rx_word, ArcticNiuState,
                             ARCTIC_NUM_PRIORITIES),
        VMSTATE_END_OF_LIST()
    },
};
