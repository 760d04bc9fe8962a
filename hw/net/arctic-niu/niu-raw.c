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

#include "niu-queues.h"

void niu_raw_reset(NiuQueues *qs)
{
    memset(qs->raw.tx_len, 0, sizeof(qs->raw.tx_len));
    memset(qs->raw.tx_ready, 0, sizeof(qs->raw.tx_ready));
    memset(qs->raw.tx_overrun, 0, sizeof(qs->raw.tx_overrun));
    memset(qs->raw.rx_head, 0, sizeof(qs->raw.rx_head));
    memset(qs->raw.rx_count, 0, sizeof(qs->raw.rx_count));
    memset(qs->raw.rx_word, 0, sizeof(qs->raw.rx_word));
}

bool niu_raw_rx_push(NiuQueues *qs, uint8_t prio, const uint8_t *pkt,
                     size_t size)
{
    unsigned tail;

    if (qs->raw.rx_count[prio] == ARCTIC_RAW_RX_PACKETS) {
        return false;
    }
    tail = (qs->raw.rx_head[prio] + qs->raw.rx_count[prio]) %
           ARCTIC_RAW_RX_PACKETS;
    memcpy(qs->raw.rx[prio][tail].wire, pkt, size);
    qs->raw.rx[prio][tail].size = size;
    qs->raw.rx_count[prio]++;
    trace_arctic_niu_raw_rx(qs->node_id, prio, qs->raw.rx_count[prio]);
    return true;
}

/* Pop the next word of the packet at the head of a receive FIFO. */
static uint32_t raw_rx_pop(NiuQueues *qs, uint8_t prio)
{
    unsigned head = qs->raw.rx_head[prio];
    const uint8_t *wire = qs->raw.rx[prio][head].wire;
    unsigned words = (qs->raw.rx[prio][head].size -
                      ARCTIC_WIRE_WORDS_OFFSET) / 4;    /* with the CRC */
    uint32_t val;

    if (qs->raw.rx_count[prio] == 0) {
        niu_error(qs->status, ARCTIC_ERR_BAD_VALUE, 0,
                  prio == ARCTIC_PRIORITY_HIGH ? ARCTIC_RXQ_HI
                                                      : ARCTIC_RXQ_LO,
                         0, "read of an empty receive FIFO");
        return 0;
    }
    val = arctic_get_le32(wire + ARCTIC_WIRE_WORDS_OFFSET +
                          4 * qs->raw.rx_word[prio]);
    if (++qs->raw.rx_word[prio] == words) {
        qs->raw.rx_word[prio] = 0;
        qs->raw.rx_head[prio] = (head + 1) % ARCTIC_RAW_RX_PACKETS;
        qs->raw.rx_count[prio]--;
    }
    return val;
}

/* Check a whole raw packet and hand it to the transmit side. */
static void raw_tx_commit(NiuQueues *qs, uint8_t prio)
{
    const uint32_t *w = qs->raw.tx[prio];
    unsigned count = qs->raw.tx_len[prio];

    if (niu_tx_send_raw(qs, prio, w, count)) {
        qs->raw.tx_len[prio] = 0;
        qs->raw.tx_ready[prio] = false;
    } else {
        qs->raw.tx_ready[prio] = true;   /* TxStatus shows it full */
    }
}

void niu_raw_tx_flush(NiuQueues *qs)
{
    unsigned p;

    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        if (qs->raw.tx_ready[p]) {
            raw_tx_commit(qs, p);
        }
    }
}

static bool raw_tx_push(NiuQueues *qs, uint8_t prio, uint32_t val,
                        bool last, hwaddr reg)
{
    if (qs->tx_enabled) {
        /* dMPI and MPI do not mix on one datapath (§2.3). */
        niu_error(qs->status, ARCTIC_ERR_BUSY, 0, 0, reg,
                  "raw transmit while the transmit datapath is on");
        return true;
    }
    if (qs->raw.tx_ready[prio]) {
        /* TxStatus said full: the word is refused, and says so. */
        niu_error(qs->status, ARCTIC_ERR_BAD_VALUE, 0, 0, reg,
                  "raw transmit FIFO written while full");
        return true;
    }
    if (qs->raw.tx_overrun[prio] ||
        qs->raw.tx_len[prio] == ARCTIC_MAX_PACKET_WORDS) {
        /*
         * Longer than any packet: the whole packet is discarded, up to
         * and including its *Last word, so the next one starts clean.
         */
        if (!qs->raw.tx_overrun[prio]) {
            niu_error(qs->status, ARCTIC_ERR_BAD_VALUE, 0, 0, reg,
                      "raw packet longer than %d words discarded",
                      ARCTIC_MAX_PACKET_WORDS);
            niu_count(qs->status, ARCTIC_CNT_TX_ERRORS);
        }
        qs->raw.tx_overrun[prio] = !last;
        qs->raw.tx_len[prio] = 0;
        return true;
    }
    qs->raw.tx[prio][qs->raw.tx_len[prio]++] = val;
    if (last) {
        raw_tx_commit(qs, prio);
    }
    return true;
}

/* Accesses to endpoint 0's FIFO registers; false for any other offset. */
bool niu_raw_access(NiuQueues *qs, hwaddr reg, bool write,
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
        return raw_tx_push(qs, reg <= A_USER_HI_TX_FIFO_LAST
                              ? ARCTIC_PRIORITY_HIGH : ARCTIC_PRIORITY_LOW,
                           *val, reg == A_USER_HI_TX_FIFO_LAST ||
                                 reg == A_USER_LO_TX_FIFO_LAST, reg);
    case A_USER_HI_RX_FIFO:
    case A_USER_LO_RX_FIFO:
        if (write) {
            return false;
        }
        *val = raw_rx_pop(qs, reg == A_USER_HI_RX_FIFO ? ARCTIC_PRIORITY_HIGH
                                                      : ARCTIC_PRIORITY_LOW);
        return true;
    case A_USER_RX_STATUS:
        if (write) {
            return false;
        }
        *val = FIELD_DP32(0, USER_RX_STATUS, HI_EMPTY,
                          !qs->raw.rx_count[ARCTIC_PRIORITY_HIGH]);
        *val = FIELD_DP32(*val, USER_RX_STATUS, LO_EMPTY,
                          !qs->raw.rx_count[ARCTIC_PRIORITY_LOW]);
        return true;
    case A_USER_TX_STATUS:
        if (write) {
            return false;
        }
        *val = FIELD_DP32(0, USER_TX_STATUS, HI_FULL,
                          qs->raw.tx_ready[ARCTIC_PRIORITY_HIGH]);
        *val = FIELD_DP32(*val, USER_TX_STATUS, LO_FULL,
                          qs->raw.tx_ready[ARCTIC_PRIORITY_LOW]);
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
bool niu_raw_needed(NiuQueues *qs)
{
    unsigned p;

    for (p = 0; p < ARCTIC_NUM_PRIORITIES; p++) {
        if (qs->raw.tx_len[p] || qs->raw.tx_ready[p] || qs->raw.tx_overrun[p] ||
            qs->raw.rx_count[p]) {
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
    NiuQueues *qs = opaque;
    const char *fault = raw_loaded_fault(&qs->raw);

    if (fault) {
        qs->loaded_fault = qs->loaded_fault ?: fault;
        niu_raw_reset(qs);       /* no register indexes past the FIFOs */
    }
    return 0;
}

/* The fields of the subsection "arctic-niu/raw" (arctic-niu.c). */
const VMStateDescription vmstate_niu_queues_raw = {
    .name = "arctic-niu/raw-fifos",
    .version_id = 1,
    .minimum_version_id = 1,
    .post_load = raw_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32_2DARRAY(raw.tx, NiuQueues, ARCTIC_NUM_PRIORITIES,
                               ARCTIC_MAX_PACKET_WORDS),
        VMSTATE_UINT32_ARRAY(raw.tx_len, NiuQueues, ARCTIC_NUM_PRIORITIES),
        VMSTATE_BOOL_ARRAY(raw.tx_ready, NiuQueues, ARCTIC_NUM_PRIORITIES),
        VMSTATE_BOOL_ARRAY(raw.tx_overrun, NiuQueues, ARCTIC_NUM_PRIORITIES),
        VMSTATE_STRUCT_2DARRAY(raw.rx, NiuQueues, ARCTIC_NUM_PRIORITIES,
                               ARCTIC_RAW_RX_PACKETS, 1,
                               vmstate_niu_raw_packet, NiuRawPacket),
        VMSTATE_UINT32_ARRAY(raw.rx_head, NiuQueues, ARCTIC_NUM_PRIORITIES),
        VMSTATE_UINT32_ARRAY(raw.rx_count, NiuQueues, ARCTIC_NUM_PRIORITIES),
        VMSTATE_UINT32_ARRAY(raw.rx_word, NiuQueues, ARCTIC_NUM_PRIORITIES),
        VMSTATE_END_OF_LIST()
    },
};
