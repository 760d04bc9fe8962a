/* SPDX-License-Identifier: MIT */
/*
 * The Arctic NIU as a PCI device: identity, BARs, the privileged register
 * file (seed 002 §4 plus identity, status, test and per-endpoint registers),
 * the user pages, and the layout of the queues and slots in guest memory
 * (seed 002 §2).  This is the single definition used by the QEMU device, the
 * qtests, the Linux driver and libniu; docs/programming-guide.md explains
 * it for driver authors.
 *
 * The seed's `unsigned long` is a 32-bit SPARC word: every word here is a
 * uint32_t, little-endian in guest memory.  Guest physical addresses are
 * 64-bit, split into _LO/_HI register pairs and, in the DMA request slot,
 * held in 64-bit fields.
 */
#ifndef ARCTIC_NIU_HW_H
#define ARCTIC_NIU_HW_H

#include "arctic/types.h"

/*
 * PCI identity: Red Hat / virtio vendor, device from the range 0x10f0-0x10ff
 * that is kept for experimental devices.
 */
#define ARCTIC_NIU_PCI_VENDOR_ID    0x1af4
#define ARCTIC_NIU_PCI_DEVICE_ID    0x10f0
#define ARCTIC_NIU_PCI_REVISION     0x01
#define ARCTIC_NIU_PCI_CLASS        0x0280  /* network, other */

/* Values of the ID and VERSION registers. */
#define ARCTIC_NIU_ID_VALUE         0x41524354u  /* "ARCT" */
#define ARCTIC_NIU_VERSION_MAJOR    1
/* 1.1: DMA, dMPI, IRQs, jobs; 1.2: the cluster's clock */
#define ARCTIC_NIU_VERSION_MINOR    2

/* Design constants (seed 002 Table 1). */
enum {
    ARCTIC_N = 256,                 /* slots per queue */
    ARCTIC_LOG2_N = 8,
    ARCTIC_S = 256,                 /* nodes */
    ARCTIC_D = 2048,                /* bytes per remote DMA */
    ARCTIC_SLOT_SIZE = 128,
    ARCTIC_LOG2_SLOT_SIZE = 7,
    ARCTIC_QUEUE_SIZE = ARCTIC_N * ARCTIC_SLOT_SIZE,         /* 32 KiB */
    ARCTIC_ENDPOINTS = 8,           /* virtual endpoints (Appendix A) */
    ARCTIC_MAX_PAYLOAD = 20,        /* payload words of an MPI message */
    ARCTIC_DMA_PACKETS = ARCTIC_D / 64,  /* 32 packets of 16 words */
};

/*
 * Queue regions in guest memory (seed 002 §2.1.1, §4.2).  The Tx region
 * holds HiTx, LoTx and DMATx and is 4*N*128 aligned; the Rx region holds
 * HiRx and LoRx and is 2*N*128 aligned.
 */
enum {
    ARCTIC_TX_REGION_SIZE = 4 * ARCTIC_QUEUE_SIZE,   /* 128 KiB */
    ARCTIC_TX_REGION_ALIGN = 4 * ARCTIC_QUEUE_SIZE,
    ARCTIC_RX_REGION_SIZE = 2 * ARCTIC_QUEUE_SIZE,   /* 64 KiB */
    ARCTIC_RX_REGION_ALIGN = 2 * ARCTIC_QUEUE_SIZE,
    ARCTIC_HI_TX_OFFSET = 0 * ARCTIC_QUEUE_SIZE,     /* in the Tx region */
    ARCTIC_LO_TX_OFFSET = 1 * ARCTIC_QUEUE_SIZE,
    ARCTIC_DMA_TX_OFFSET = 2 * ARCTIC_QUEUE_SIZE,
    ARCTIC_HI_RX_OFFSET = 0 * ARCTIC_QUEUE_SIZE,     /* in the Rx region */
    ARCTIC_LO_RX_OFFSET = 1 * ARCTIC_QUEUE_SIZE,
    /*
     * The user's view through mmap() of the device file (seed §2.1.1,
     * §2.2.1): HiTx, LoTx, HiRx, LoRx at offset 0, DMATx at 4*N*128.
     */
    ARCTIC_MMAP_HI_TX = 0 * ARCTIC_QUEUE_SIZE,
    ARCTIC_MMAP_LO_TX = 1 * ARCTIC_QUEUE_SIZE,
    ARCTIC_MMAP_HI_RX = 2 * ARCTIC_QUEUE_SIZE,
    ARCTIC_MMAP_LO_RX = 3 * ARCTIC_QUEUE_SIZE,
    ARCTIC_MMAP_DMA_TX = 4 * ARCTIC_QUEUE_SIZE,
    /* DMA window (seed §4.3): 4 MiB aligned, power-of-two size >= 4 MiB. */
    ARCTIC_DMA_WINDOW_ALIGN = 4 * 1024 * 1024,
};

/* The transmit queues, in service order (high before low). */
enum arctic_tx_queue {
    ARCTIC_TXQ_HI = 0,
    ARCTIC_TXQ_LO = 1,
    ARCTIC_TXQ_DMA = 2,
    ARCTIC_NUM_TX_QUEUES = 3,
};

enum arctic_rx_queue {
    ARCTIC_RXQ_HI = 0,
    ARCTIC_RXQ_LO = 1,
    ARCTIC_NUM_RX_QUEUES = 2,
};

/*
 * ------------------------------------------------------------------------
 * Slots (seed 002 §2.1.2, §2.2.2)
 */

/* MPI header word, in Tx and Rx slots alike. */
FIELD(MPI_HEADER, LENGTH, 0, 5)      /* payload words, 0..20 */
FIELD(MPI_HEADER, MODE, 5, 1)        /* 0 MPI, 1 DMA request */
FIELD(MPI_HEADER, TYPE, 6, 7)        /* user packet type */
FIELD(MPI_HEADER, ENDPOINT, 13, 3)   /* destination virtual endpoint */
FIELD(MPI_HEADER, DEST, 16, 8)       /* destination virtual node */
FIELD(MPI_HEADER, RESERVED, 24, 6)
/*
 * Rx slots only, an emulator addition in bits seed 002 reserves: the
 * parity of the lap of the queue the NIU was on when it wrote the slot
 * (EP_RX_HD.LAP, below).  A consumer that tracks its own lap can tell a
 * header left over from the previous lap from a new one, as NVMe's phase
 * tag does.  Tx slots leave it 0; seed 002 code may ignore it.
 */
FIELD(MPI_HEADER, LAP, 30, 1)
FIELD(MPI_HEADER, VALID, 31, 1)

#define ARCTIC_MPI_VALID            R_MPI_HEADER_VALID_MASK
/* The low half of the header travels in Arctic word 1. */
#define ARCTIC_MPI_HEADER_WIRE_MASK 0xffffu

enum { ARCTIC_MODE_MPI = 0, ARCTIC_MODE_DMA = 1 };

/* An MPI slot: the seed's MPIPacket with 32-bit words. */
struct arctic_mpi_slot {
    uint32_t header;
    uint32_t command[2];
    uint32_t reserved;
    uint32_t payload[ARCTIC_MAX_PAYLOAD];
    uint32_t pad[8];
};

/*
 * A DMA request slot: the seed's DMARequest with 64-bit addresses.  The
 * notification delivered to the receiver's HiRx has command[0] = command,
 * command[1] = low 32 bits of target, and the payload.
 */
struct arctic_dma_request {
    uint32_t header;
    uint32_t command;
    uint64_t target;      /* remote virtual address, D-aligned */
    uint64_t source;      /* local virtual address, D-aligned */
    uint32_t payload[ARCTIC_MAX_PAYLOAD];
    uint32_t pad[6];
};

/*
 * A DMA request the NIU refuses (seed 002 §6.2.2 would turn the transmit
 * datapath OFF; this NIU keeps going) is answered by an error notice in
 * the requesting endpoint's own HiRx: a receive slot whose header has MODE
 * = 1 (a normal notification always has MODE = 0), TYPE of the request,
 * LENGTH 0, ENDPOINT of the request (the endpoint it was meant for at the
 * destination), DEST = this node; command[0] = the slot's word at offset 4
 * (a request's command) and command[1] = one of these codes.
 */
enum arctic_dma_status {
    ARCTIC_DMA_ERR_ALIGN = 1,     /* source or target not D-aligned */
    ARCTIC_DMA_ERR_RANGE = 2,     /* source outside the endpoint's window */
    ARCTIC_DMA_ERR_ROUTE = 3,     /* no route to the destination */
    ARCTIC_DMA_ERR_LENGTH = 4,    /* notification payload over 20 words */
    ARCTIC_DMA_ERR_MEMORY = 5,    /* reading the source failed */
    /* A DMA request in LoTx, or an MPI packet in DMATx */
    ARCTIC_DMA_ERR_QUEUE = 6,
    /*
     * Not about a DMA request: the node in command[0] stopped answering
     * (ERROR_CAUSE.PEER_DEAD) and packets this endpoint had sent to it
     * were dropped; TYPE 0 and ENDPOINT = this endpoint in the header.
     */
    ARCTIC_NOTICE_PEER_DEAD = 7,
    /*
     * From the node in DEST, not this NIU: that node's NIU refused some of
     * the data of the request with this TYPE and command[0] (its target
     * was outside the window there); its notification says so too.
     */
    ARCTIC_DMA_ERR_TARGET = 8,
    /*
     * Not about a DMA request: the node in command[0] refused a message
     * this endpoint sent, for its job tag (NACK WRONG_JOB), for the NIU's
     * refused-timeout-ms; the message was dropped and the messages after
     * it went on.  TYPE 0 and ENDPOINT = this endpoint in the header.
     */
    ARCTIC_NOTICE_REFUSED = 9,
};

/* Byte offsets within a slot, for DMA engines that read fields one by one. */
enum {
    ARCTIC_SLOT_HEADER = 0,
    ARCTIC_SLOT_COMMAND0 = 4,
    ARCTIC_SLOT_COMMAND1 = 8,
    ARCTIC_SLOT_PAYLOAD = 16,
    ARCTIC_DMA_SLOT_COMMAND = 4,
    ARCTIC_DMA_SLOT_TARGET = 8,
    ARCTIC_DMA_SLOT_SOURCE = 16,
    ARCTIC_DMA_SLOT_PAYLOAD = 24,
};

#ifndef __cplusplus
_Static_assert(sizeof(struct arctic_mpi_slot) == ARCTIC_SLOT_SIZE,
               "MPI slot must be 128 bytes");
_Static_assert(sizeof(struct arctic_dma_request) == ARCTIC_SLOT_SIZE,
               "DMA request slot must be 128 bytes");
_Static_assert(offsetof(struct arctic_mpi_slot, payload) == ARCTIC_SLOT_PAYLOAD,
               "MPI payload offset");
_Static_assert(offsetof(struct arctic_dma_request, payload) ==
               ARCTIC_DMA_SLOT_PAYLOAD, "DMA payload offset");
#endif

/*
 * ------------------------------------------------------------------------
 * BARs
 */
enum {
    ARCTIC_BAR_CONTROL = 0,         /* privileged registers, 16 KiB */
    ARCTIC_BAR_CONTROL_SIZE = 0x4000,
    ARCTIC_BAR_USER = 2,            /* one 4 KiB page per endpoint */
    ARCTIC_USER_PAGE_SIZE = 0x1000,
    ARCTIC_BAR_USER_SIZE = ARCTIC_ENDPOINTS * ARCTIC_USER_PAGE_SIZE,
    ARCTIC_BAR_MSIX = 4,            /* MSI-X table and pending bits */
};

/*
 * ------------------------------------------------------------------------
 * Control BAR: identity and status (read-only unless noted)
 */
REG32(NIU_ID, 0x000)                 /* ARCTIC_NIU_ID_VALUE */
REG32(NIU_VERSION, 0x004)
    FIELD(NIU_VERSION, MINOR, 0, 16)
    FIELD(NIU_VERSION, MAJOR, 16, 16)
REG32(NIU_CAPS, 0x008)
    FIELD(NIU_CAPS, ENDPOINTS, 0, 8)     /* virtual endpoints */
    FIELD(NIU_CAPS, LOG2_N, 8, 8)        /* slots per queue */
    FIELD(NIU_CAPS, LINES, 16, 8)        /* retransmit buffer lines */
    FIELD(NIU_CAPS, HI_LINES, 24, 8)     /* of which kept for high prio */
/*
 * CAPS.LINES unless the device's "lines" property says otherwise: sized
 * for the host (docs/datapath.md §3.15).  The seeds call the retransmit
 * buffer "small" without a size; ARCTIC_SEED_LINES is the small one that
 * timed mode keeps.
 */
enum {
    ARCTIC_DEFAULT_LINES = 128,
    ARCTIC_SEED_LINES = 16,
};
REG32(NIU_NODE_ID, 0x00c)            /* this NIU's node (device property) */
REG32(NIU_NUM_NODES, 0x010)          /* from the switch; 0 before link up */
REG32(NIU_NET_LEVELS, 0x014)         /* fat tree levels, from the switch */
REG32(NIU_LINK_STATUS, 0x018)
    FIELD(NIU_LINK_STATUS, UP, 0, 1)         /* handshake done */
    FIELD(NIU_LINK_STATUS, CONNECTED, 1, 1)  /* socket open */
    FIELD(NIU_LINK_STATUS, REJECTED, 2, 1)   /* last HELLO refused */
    FIELD(NIU_LINK_STATUS, UP_COUNT, 16, 16) /* times the link came up */
REG32(NIU_ERROR_CAUSE, 0x01c)        /* sticky, write 1 to clear */
REG32(NIU_ERROR_INFO, 0x020)         /* detail of the latest error */
    FIELD(NIU_ERROR_INFO, DETAIL, 0, 16)     /* offset, slot or value */
    FIELD(NIU_ERROR_INFO, QUEUE, 16, 4)      /* enum arctic_tx/rx_queue */
    FIELD(NIU_ERROR_INFO, ENDPOINT, 20, 4)
    FIELD(NIU_ERROR_INFO, CAUSE, 24, 5)      /* bit number in ERROR_CAUSE */
REG32(NIU_SCRATCH, 0x024)            /* read/write, for driver self-test */

/*
 * Test DMA engine, rocker style: the driver's probe self-test has the device
 * fill a buffer with a pattern, or check one the driver filled.
 */
REG32(NIU_TEST_DMA_ADDR_LO, 0x028)
REG32(NIU_TEST_DMA_ADDR_HI, 0x02c)
REG32(NIU_TEST_DMA_SIZE, 0x030)      /* bytes, multiple of 4, <= 64 KiB */
REG32(NIU_TEST_DMA_SEED, 0x034)
REG32(NIU_TEST_DMA_CTRL, 0x038)      /* write a command to start */
    FIELD(NIU_TEST_DMA_CTRL, CMD, 0, 2)
REG32(NIU_TEST_DMA_STATUS, 0x03c)
    FIELD(NIU_TEST_DMA_STATUS, DONE, 0, 1)
    FIELD(NIU_TEST_DMA_STATUS, MISMATCH, 1, 1)
    FIELD(NIU_TEST_DMA_STATUS, DMA_ERROR, 2, 1)
    FIELD(NIU_TEST_DMA_STATUS, BAD_ARGS, 3, 1)

enum arctic_test_dma_cmd {
    ARCTIC_TEST_DMA_FILL = 1,        /* write the pattern to guest memory */
    ARCTIC_TEST_DMA_CHECK = 2,       /* compare guest memory to the pattern */
};
enum { ARCTIC_TEST_DMA_MAX_SIZE = 64 * 1024 };

/* Word i of the test pattern for a seed. */
static inline uint32_t arctic_test_pattern(uint32_t seed, uint32_t i)
{
    return (seed ^ (i * 0x9e3779b9u)) + i;
}

/*
 * The cluster's clock (timed mode, docs/timed-mode.md; an emulator
 * addition).  An NIU made with timed=on keeps virtual time with its
 * cluster; until its guest writes TIME_CTRL.START that time stands still
 * at 0.  The write returns once every node of the cluster has written it
 * (it holds the writing CPU until then: the cluster's nodes start their
 * clocks at the same instant), with TIME_STATUS.RUNNING set, or without
 * it if the cluster could not start (no switch, a shutdown).
 * TIME_CTRL.PAUSE, written before START: on an NIU made with
 * start-pause=on the machine stops right after the write, at that instant
 * of its virtual time, for a launcher to save the cluster at its start
 * barrier (docs/snapshots.md §5); on any other timed NIU it does nothing.
 * TIME_NOW_LO/HI: the cluster's time in ns (a read of LO latches HI).
 */
REG32(NIU_TIME_STATUS, 0x040)        /* RO */
    FIELD(NIU_TIME_STATUS, TIMED, 0, 1)      /* timed=on */
    FIELD(NIU_TIME_STATUS, RUNNING, 1, 1)    /* the clock started */
    /*
     * The cluster's time was lost (the switch went away): the node runs on
     * alone
     */
    FIELD(NIU_TIME_STATUS, BROKEN, 2, 1)
REG32(NIU_TIME_CTRL, 0x044)          /* write */
    FIELD(NIU_TIME_CTRL, START, 0, 1)
    FIELD(NIU_TIME_CTRL, PAUSE, 1, 1)
REG32(NIU_TIME_NOW_LO, 0x048)        /* RO */
REG32(NIU_TIME_NOW_HI, 0x04c)        /* RO */

/* Counters: 32-bit, read-only, wrapping, cleared by reset. */
REG32(NIU_COUNTER_BASE, 0x080)
enum arctic_counter {
    ARCTIC_CNT_TX_HI_PACKETS,        /* user messages sent, first try */
    ARCTIC_CNT_TX_LO_PACKETS,
    ARCTIC_CNT_RX_HI_PACKETS,        /* messages delivered to a queue */
    ARCTIC_CNT_RX_LO_PACKETS,
    ARCTIC_CNT_RETRANSMITS,          /* packets sent again */
    ARCTIC_CNT_TIMEOUTS,             /* retransmit timer expiries */
    ARCTIC_CNT_NACKS_SENT,
    ARCTIC_CNT_NACKS_RECEIVED,
    ARCTIC_CNT_ACKS_SENT,
    ARCTIC_CNT_ACKS_RECEIVED,
    ARCTIC_CNT_DUPLICATES,           /* data already delivered, re-acked */
    ARCTIC_CNT_BAD_PACKETS,          /* CRC, length, misrouted: dropped */
    ARCTIC_CNT_TX_ERRORS,            /* slots refused (error cause set) */
    ARCTIC_CNT_LINK_UPS,
    ARCTIC_CNT_LINK_DOWNS,
    ARCTIC_CNT_CREDIT_STALLS,        /* a packet waited for link credit */
    ARCTIC_CNT_DMA_REQUESTS,         /* DMA requests fully sent */
    ARCTIC_CNT_DMA_RX_PACKETS,       /* DMA data packets written to memory */
    ARCTIC_CNT_WRONG_JOB,            /* data refused: job tag mismatch */
    /* Packets dropped: their destination stopped answering (PEER_DEAD) */
    ARCTIC_CNT_PEER_DROPPED,
    /* Messages dropped: refused for their job tag too long (WRONG_JOB) */
    ARCTIC_CNT_REFUSED_DROPPED,
    ARCTIC_NUM_COUNTERS,
};
#define ARCTIC_COUNTER_OFFSET(c)    (A_NIU_COUNTER_BASE + 4 * (c))

/*
 * Names of the counters, for sysfs and tools (the kernel's style, as in
 * statistics/rx_packets); the device's state view writes them with dashes.
 */
static inline const char *arctic_counter_name(unsigned c)
{
    static const char *const names[ARCTIC_NUM_COUNTERS] = {
        [ARCTIC_CNT_TX_HI_PACKETS] = "tx_hi_packets",
        [ARCTIC_CNT_TX_LO_PACKETS] = "tx_lo_packets",
        [ARCTIC_CNT_RX_HI_PACKETS] = "rx_hi_packets",
        [ARCTIC_CNT_RX_LO_PACKETS] = "rx_lo_packets",
        [ARCTIC_CNT_RETRANSMITS] = "retransmits",
        [ARCTIC_CNT_TIMEOUTS] = "timeouts",
        [ARCTIC_CNT_NACKS_SENT] = "nacks_sent",
        [ARCTIC_CNT_NACKS_RECEIVED] = "nacks_received",
        [ARCTIC_CNT_ACKS_SENT] = "acks_sent",
        [ARCTIC_CNT_ACKS_RECEIVED] = "acks_received",
        [ARCTIC_CNT_DUPLICATES] = "duplicates",
        [ARCTIC_CNT_BAD_PACKETS] = "bad_packets",
        [ARCTIC_CNT_TX_ERRORS] = "tx_errors",
        [ARCTIC_CNT_LINK_UPS] = "link_ups",
        [ARCTIC_CNT_LINK_DOWNS] = "link_downs",
        [ARCTIC_CNT_CREDIT_STALLS] = "credit_stalls",
        [ARCTIC_CNT_DMA_REQUESTS] = "dma_requests",
        [ARCTIC_CNT_DMA_RX_PACKETS] = "dma_rx_packets",
        [ARCTIC_CNT_WRONG_JOB] = "wrong_job",
        [ARCTIC_CNT_PEER_DROPPED] = "peer_dropped",
        [ARCTIC_CNT_REFUSED_DROPPED] = "refused_dropped",
    };

    return c < ARCTIC_NUM_COUNTERS ? names[c] : "unknown";
}

/*
 * ------------------------------------------------------------------------
 * Control BAR: datapath control (seed 002 §4.1)
 */
REG32(NIU_TX_CTRL, 0x100)
REG32(NIU_RX_CTRL, 0x104)
    /*
     * Both: ENABLE reads back 1 while the datapath is on or still draining
     * after an OFF was written; RESET is write-only.
     */
    FIELD(NIU_CTRL, ENABLE, 0, 1)
    FIELD(NIU_CTRL, RESET, 1, 1)
    /*
     * RxCtrl only: with ENABLE clear, take packets into the dMPI receive
     * FIFOs (seed 002 §6.1).  Clear (the reset value), an OFF receive
     * datapath refuses packets (NACK RX_OFF) so that none is acknowledged
     * and then lost before a driver has set the NIU up.
     */
    FIELD(NIU_CTRL, RAW, 2, 1)
REG32(NIU_VMASK, 0x108)              /* endpoints served (Appendix A) */
    FIELD(NIU_VMASK, MASK, 0, 3)
REG32(NIU_DOORBELL_ALL, 0x10c)       /* write: poll every endpoint now */
/*
 * The endpoints whose Tx queues MPFSM and DMAFSM poll, an extension: seed
 * 002's FSMs poll every served endpoint, and that is the reset value.  An
 * endpoint whose bit is 0 has its queues read only by a service pass that
 * something else started (a doorbell, an ack freeing a line, a batch
 * continued): for a producer that rings USER_DOORBELL for every slot it
 * writes behind a taken one (programming guide §10.1), or for queues
 * nobody writes.  With no served endpoint's bit set the poll stops.
 */
REG32(NIU_TX_POLLED, 0x11c)
    FIELD(NIU_TX_POLLED, MASK, 0, 8)     /* bit e: endpoint e polled */
/*
 * Emulator only, on an NIU made with template=on (docs/snapshots.md §6):
 * any write stops the machine right after it, at an instant of the
 * guest's own time, for the launcher to save it there; a clone goes on
 * from the write.  Not a use of the template.  Elsewhere a write is
 * refused (BAD_VALUE); reads 0.
 */
REG32(NIU_TEMPLATE_PAUSE, 0x120)

/*
 * Interrupts, an extension seed 002 lacks: one MSI-X vector per cause
 * (enum arctic_msix_vector), or INTx A asserted while any IRQ_STATUS bit
 * is set when MSI-X is off.  A cause sets its IRQ_STATUS bit, and fires,
 * only while its IRQ_ENABLE bit is set.  The receive and transmit causes
 * are one-shot: firing clears their enable bit, so a process that polls
 * its queues takes no interrupts; it arms them (USER_IRQ_ARM) before it
 * sleeps and then looks at its queue once more, since anything that
 * arrived before the arming raises nothing.  ERROR stays enabled.
 * IRQ_STATUS bits are cleared by writing 1.
 */
/* RO: packets sent or queued and not yet acknowledged */
REG32(NIU_TX_PENDING, 0x118)
REG32(NIU_IRQ_STATUS, 0x110)
REG32(NIU_IRQ_ENABLE, 0x114)
    FIELD(NIU_IRQ, RX, 0, 8)         /* bit e: endpoint e received */
    FIELD(NIU_IRQ, TX, 8, 8)         /* bit e: endpoint e's Tx slots freed */
    FIELD(NIU_IRQ, ERROR, 16, 1)     /* a new ERROR_CAUSE bit */

enum arctic_msix_vector {
    ARCTIC_MSIX_RX = 0,              /* + endpoint */
    ARCTIC_MSIX_TX = ARCTIC_MSIX_RX + ARCTIC_ENDPOINTS,   /* + endpoint */
    ARCTIC_MSIX_ERROR = ARCTIC_MSIX_TX + ARCTIC_ENDPOINTS,
    ARCTIC_MSIX_VECTORS,
};

/*
 * Route table (seed 002 §4.4): RouteTable[2][S], index 0 high priority.
 * Entries are ROUTE_ENTRY values (arctic/packet.h).
 */
REG32(NIU_ROUTE_TABLE, 0x800)
#define ARCTIC_ROUTE_OFFSET(table, node) \
    (A_NIU_ROUTE_TABLE + 4 * ((table) * ARCTIC_S + (node)))
enum { ARCTIC_ROUTE_TABLE_SIZE = 2 * ARCTIC_S * 4 };

/*
 * Per-endpoint privileged registers (seed 002 §4.2, §4.3), one block per
 * endpoint.  Bases and indices may only be written while the datapath they
 * belong to is OFF (Tx: TX_QBASE, *_TX_TL; Rx: RX_QBASE, *_RX_HD), the
 * DMA window and the job tag only while both are.
 */
enum {
    ARCTIC_EP_BLOCK_BASE = 0x1000,
    ARCTIC_EP_BLOCK_STRIDE = 0x100,
};
#define ARCTIC_EP_OFFSET(ep, reg) \
    (ARCTIC_EP_BLOCK_BASE + (ep) * ARCTIC_EP_BLOCK_STRIDE + (reg))

REG32(EP_TX_QBASE_LO, 0x00)
REG32(EP_TX_QBASE_HI, 0x04)
REG32(EP_RX_QBASE_LO, 0x08)
REG32(EP_RX_QBASE_HI, 0x0c)
REG32(EP_HI_TX_TL, 0x10)
REG32(EP_LO_TX_TL, 0x14)
REG32(EP_DMA_TX_TL, 0x18)
REG32(EP_HI_RX_HD, 0x1c)
REG32(EP_LO_RX_HD, 0x20)
/*
 * Both Rx head registers: the slot the NIU writes next, and the parity of
 * its lap, which flips each time INDEX wraps to 0 and goes into
 * MPI_HEADER.LAP of every slot written (an emulator addition).  Reset: 0.
 */
FIELD(EP_RX_HD, INDEX, 0, 8)
FIELD(EP_RX_HD, LAP, 8, 1)
REG32(EP_DMA_BASE_PHY_LO, 0x28)
REG32(EP_DMA_BASE_PHY_HI, 0x2c)
REG32(EP_DMA_BASE_VIR_LO, 0x30)
REG32(EP_DMA_BASE_VIR_HI, 0x34)
REG32(EP_DMA_RANGE_MASK_LO, 0x38)
REG32(EP_DMA_RANGE_MASK_HI, 0x3c)
REG32(EP_JOB, 0x40)                  /* job tag (GID), both datapaths OFF */
    FIELD(EP_JOB, TAG, 0, 16)

/*
 * ------------------------------------------------------------------------
 * User pages (BAR 2): page e belongs to endpoint e and is what the driver
 * maps into the process that owns the endpoint.
 */
/* Write: a service pass now (every served endpoint; the bits are hints) */
REG32(USER_DOORBELL, 0x000)
    FIELD(USER_DOORBELL, HI_TX, 0, 1)
    FIELD(USER_DOORBELL, LO_TX, 1, 1)
    FIELD(USER_DOORBELL, DMA_TX, 2, 1)
/*
 * A stream of doorbells: after this many, each within the device's
 * x-doorbell-coalesce-ns of the one before, the next one's pass waits that
 * long and takes every slot written meanwhile (programming guide §10.1).
 */
enum { ARCTIC_DOORBELL_STREAK = 8 };
/* Arm this endpoint's one-shot interrupts (see NIU_IRQ_ENABLE). */
REG32(USER_IRQ_ARM, 0x004)
    FIELD(USER_IRQ_ARM, RX, 0, 1)
    FIELD(USER_IRQ_ARM, TX, 1, 1)
/*
 * read: the NIU takes what the network has brought it now, in the
 * reading CPU's time (busy polling: delivers, takes acks, sends on).
 * TOOK: it found input.  NONE: this NIU's link cannot be busy-polled
 * (a chardev link), reading again is of no use.  YIELDS: a read that
 * takes nothing gives the reading CPU's host core away (the device's
 * x-link-poll-yield, set on hosts with more nodes than cores), so that
 * polling costs the nodes that compute little.
 */
REG32(USER_LINK_POLL, 0x008)
    FIELD(USER_LINK_POLL, TOOK, 0, 1)
    FIELD(USER_LINK_POLL, YIELDS, 1, 1)
    FIELD(USER_LINK_POLL, NONE, 31, 1)
/* dMPI raw FIFO access points (seed 002 §2.3), endpoint 0's page only. */
REG32(USER_HI_TX_FIFO, 0x040)
REG32(USER_HI_TX_FIFO_LAST, 0x044)
REG32(USER_LO_TX_FIFO, 0x048)
REG32(USER_LO_TX_FIFO_LAST, 0x04c)
REG32(USER_HI_RX_FIFO, 0x050)
REG32(USER_LO_RX_FIFO, 0x054)
REG32(USER_RX_STATUS, 0x058)
    FIELD(USER_RX_STATUS, LO_EMPTY, 0, 1)
    FIELD(USER_RX_STATUS, HI_EMPTY, 1, 1)
REG32(USER_TX_STATUS, 0x05c)
    FIELD(USER_TX_STATUS, LO_FULL, 2, 1)
    FIELD(USER_TX_STATUS, HI_FULL, 3, 1)

/*
 * ------------------------------------------------------------------------
 * Error causes: bit numbers in NIU_ERROR_CAUSE and ERROR_INFO.CAUSE.
 */
enum arctic_error {
    ARCTIC_ERR_RO_WRITE = 0,     /* write to a read-only register */
    /*
     * Access to no register (accesses other than 4 or 8 bytes never reach it)
     */
    ARCTIC_ERR_BAD_REGISTER = 1,
    ARCTIC_ERR_BUSY = 2,         /* write needs its datapath OFF */
    ARCTIC_ERR_BAD_ALIGN = 3,    /* queue base or DMA window misaligned */
    ARCTIC_ERR_BAD_INDEX = 4,    /* queue index >= N */
    ARCTIC_ERR_BAD_LENGTH = 5,   /* slot length > 20 words: slot dropped */
    ARCTIC_ERR_NO_ROUTE = 6,     /* route entry not valid: slot dropped */
    ARCTIC_ERR_DMA = 7,          /* guest memory access failed */
    /* DMA request where none may be, or not a DMA request in DMATx */
    ARCTIC_ERR_BAD_MODE = 8,
    ARCTIC_ERR_LINK_REJECTED = 9,/* the switch refused the handshake */
    ARCTIC_ERR_LINK_PROTOCOL = 10,/* malformed frame from the switch */
    ARCTIC_ERR_BAD_PACKET = 11,  /* malformed packet from the network */
    ARCTIC_ERR_DMA_RANGE = 12,   /* DMA outside the endpoint's window */
    ARCTIC_ERR_BAD_VALUE = 13,   /* reserved bits or an invalid value */
    /*
     * A node did not answer for the peer timeout: what was sent to it dropped
     */
    ARCTIC_ERR_PEER_DEAD = 14,
    ARCTIC_NUM_ERRORS
};

/*
 * What each cause means, in words: for logs (the device's warnings and
 * trace events, the driver's messages) and tools.
 */
static inline const char *arctic_error_name(unsigned cause)
{
    static const char *const names[ARCTIC_NUM_ERRORS] = {
        [ARCTIC_ERR_RO_WRITE] = "read-only register",
        [ARCTIC_ERR_BAD_REGISTER] = "no such register",
        [ARCTIC_ERR_BUSY] = "datapath must be OFF",
        [ARCTIC_ERR_BAD_ALIGN] = "misaligned base",
        [ARCTIC_ERR_BAD_INDEX] = "index out of range",
        [ARCTIC_ERR_BAD_LENGTH] = "length over 20 words",
        [ARCTIC_ERR_NO_ROUTE] = "no route to destination",
        [ARCTIC_ERR_DMA] = "guest memory access failed",
        [ARCTIC_ERR_BAD_MODE] = "DMA request not supported here",
        [ARCTIC_ERR_LINK_REJECTED] = "switch rejected the link",
        [ARCTIC_ERR_LINK_PROTOCOL] = "link protocol violation",
        [ARCTIC_ERR_BAD_PACKET] = "malformed packet from the network",
        [ARCTIC_ERR_DMA_RANGE] = "DMA outside the window",
        [ARCTIC_ERR_BAD_VALUE] = "invalid value",
        [ARCTIC_ERR_PEER_DEAD] = "peer did not answer",
    };

    return cause < ARCTIC_NUM_ERRORS && names[cause] ? names[cause]
                                                     : "unknown";
}

#endif /* ARCTIC_NIU_HW_H */
