/* SPDX-License-Identifier: MIT */
/*
 * The timed mode's model of the hardware's costs (docs/timed-mode.md): what
 * each part of the emulated StarT machine charges, in virtual nanoseconds,
 * for a packet.  The NIU charges its transmit side when it stamps a packet
 * (hw/net/arctic-niu/niu-time.c); the switch charges the links and routers
 * of the fat tree and the receiving NIU's receive side, whose costs the NIU
 * announces in TIME_READY (arctic/link.h), when it computes the packet's
 * delivery time (switch/timed.c).  The defaults come from the seeds, each
 * named beside its value; every one is a property of the device or an
 * option of the switch.
 *
 * Model, for a packet the NIU takes at virtual time t:
 *   stamp   = max(t, NIU transmit engine free) + tx_cost       (NIU)
 *   head    = from stamp on: serialised on each link at the link rate,
 *             wire_ns to the leaf router, hop_ns through each router
 *             (cut-through: the head goes on, the tail follows it by the
 *             packet's serialisation time), wire_ns to the NIU; a link
 *             starts a packet once it is free and the input it feeds has
 *             a buffer the packet may take (ARCTIC_TIME_BUFFERS, the last
 *             for high priority), a waiting high packet first
 *   arrival = when the tail reaches the receiving NIU
 *   deliver = engine start (free, high first) + rx_cost        (switch)
 * docs/timed-mode.md, "The model", has the buffer rule.
 */
#ifndef ARCTIC_TIMING_H
#define ARCTIC_TIMING_H

#include "arctic/types.h"
#include "arctic/packet.h"
#include "arctic/niu-hw.h"

enum {
    /*
     * NIU transmit engine, per packet it builds from a queue slot: the
     * header read and the releasing write, two PCI transactions of about
     * 250 ns each (seed 002 §6.2.1 steps 2 and 8; the seeds give no PCI
     * latency, 8 clocks of the 33 MHz bus of §5.1 is this model's).  An
     * ack or a nack, which the NIU builds itself, takes the engine as
     * long (arctic_time_niu_cost()).
     */
    ARCTIC_TIME_TX_NS = 500,
    /*
     * NIU receive engine, per packet it delivers: the slot header's read
     * (the full check) and its write (seed 002 §6.3.1 steps 2 and 6).
     */
    ARCTIC_TIME_RX_NS = 500,
    /*
     * Bytes the NIU moves across PCI (a slot's command words and payload,
     * a remote-DMA packet's 64 data bytes): 80 MB/s, the DMA rate seed
     * 002 §8 asks of the design (64-bit at 33 MHz).
     */
    ARCTIC_TIME_PCI_PS_PER_BYTE = 12500,
    /*
     * An interrupt: one PCI write, the MSI (seed 002 has no interrupts;
     * seed 000 §3.3.2 says they cost more than polling, with no figure).
     */
    ARCTIC_TIME_IRQ_NS = 250,
    /*
     * Arctic links: 160 MB/s each way ("160 MBytes per link", seed 003
     * §2.1.2; two halfwords per cycle at the 40 MHz backend clock of
     * seed 002 §5.1.4 and seed 000 §6.1.4).
     */
    ARCTIC_TIME_LINK_PS_PER_BYTE = 6250,
    /*
     * Through one router: five network cycles of flow-through plus one
     * of wire at 40 MHz (seed 000 §6.1.4; seed 002 §5.1.4).
     */
    ARCTIC_TIME_HOP_NS = 150,
    /*
     * The cable between an NIU and its leaf router, and the NIU's clock
     * crossing FIFO: two cycles at 40 MHz (seed 000 §6.1.4, seed 002
     * §5.1.4).
     */
    ARCTIC_TIME_WIRE_NS = 50,
    /*
     * Packet buffers at each input section of a router (and of an NIU,
     * whose input port buffer is one), the last of them kept for high
     * priority: "three buffers at each input section, with one reserved
     * for high priority packets" (seed 000 §6.1.4; §5.6.1).
     */
    ARCTIC_TIME_BUFFERS = 3,
    /*
     * The guest's processor: 128 ns per instruction (QEMU's -icount
     * shift=7), next to the 163 ns of seed 001's 20 MHz 88100 at its
     * measured 3.25 cycles per instruction (seed 001 §5.6, Tables
     * B.1-B.16).
     */
    ARCTIC_TIME_ICOUNT_SHIFT = 7,
};

/* A virtual time no event has: nothing is promised before it. */
#define ARCTIC_TIME_NEVER UINT64_MAX

/* Is @pkt (a whole wire packet) remote-DMA data rather than a message? */
static inline bool arctic_time_is_dma_data(const uint8_t *pkt)
{
    uint32_t w1 = arctic_get_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET + 4);

    return pkt[0] == ARCTIC_E2E_DATA &&
           ARCTIC_FIELD_GET(ARCTIC_W1, MODE, w1) == ARCTIC_MODE_DMA &&
           ARCTIC_FIELD_GET(ARCTIC_W1, LENGTH, w1) ==
           ARCTIC_DMA_PACKET_LENGTH;
}

/*
 * Bytes an NIU moves across PCI for @pkt (@size bytes): a message's
 * command words and payload (everything after its route words), a DMA
 * packet's 64 data bytes (its target address comes from the request);
 * none for an ack or a nack, which the NIU makes and takes itself.
 */
static inline unsigned arctic_time_pci_bytes(const uint8_t *pkt, size_t size)
{
    size_t head = ARCTIC_WIRE_WORDS_OFFSET + 4 * ARCTIC_ROUTE_WORDS;

    if (pkt[0] != ARCTIC_E2E_DATA || size < head + ARCTIC_CRC_SIZE) {
        return 0;
    }
    if (arctic_time_is_dma_data(pkt)) {
        return 4 * ARCTIC_DMA_DATA_WORDS;
    }
    return (unsigned)(size - head - ARCTIC_CRC_SIZE);
}

/*
 * What one NIU engine charges for @pkt: its fixed cost per packet, except
 * for remote-DMA data, which the DMA engine streams without a slot of its
 * own (seed 002 §6.2.2, §6.3.1), and the PCI bytes at @pci_ps_per_byte.
 */
static inline uint64_t arctic_time_niu_cost(uint32_t fixed_ns,
                                            uint32_t pci_ps_per_byte,
                                            const uint8_t *pkt, size_t size)
{
    uint64_t ps = (uint64_t)arctic_time_pci_bytes(pkt, size) *
                  pci_ps_per_byte;

    return (arctic_time_is_dma_data(pkt) ? 0 : fixed_ns) +
           (ps + 999) / 1000;
}

/* The cheapest packet an engine of these costs handles. */
static inline uint64_t arctic_time_niu_min_cost(uint32_t fixed_ns,
                                                uint32_t pci_ps_per_byte)
{
    uint64_t dma = ((uint64_t)4 * ARCTIC_DMA_DATA_WORDS * pci_ps_per_byte +
                    999) / 1000;

    return dma < fixed_ns ? dma : fixed_ns;
}

/* Serialisation of @bytes at @ps_per_byte, rounded up to a nanosecond. */
static inline uint64_t arctic_time_serialise(size_t bytes,
                                             uint32_t ps_per_byte)
{
    return ((uint64_t)bytes * ps_per_byte + 999) / 1000;
}

#endif /* ARCTIC_TIMING_H */
