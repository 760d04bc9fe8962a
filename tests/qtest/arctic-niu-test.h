/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Shared by the arctic-niu qtests (arctic-niu-test.c registers them all):
 * the NIU under test, QEMU started with it, its BARs and guest memory,
 * the switch side of its link and the peer NIUs the tests play.
 * Defined in arctic-niu-common.c.
 */

#ifndef ARCTIC_NIU_TEST_H
#define ARCTIC_NIU_TEST_H

#include "libqtest.h"
#include "libqos/pci-pc.h"
#include "hw/registerfields.h"
#include "standard-headers/linux/pci_regs.h"
#include "qobject/qdict.h"
#include "qobject/qlist.h"
#include "qapi/error.h"
#include "io/channel-socket.h"

#include "arctic/niu-hw.h"
#include "arctic/packet.h"
#include "arctic/link.h"
#include "arctic/link-ring.h"
#include "arctic/route.h"
/* generated from tests/qtest/meson.build */
#include "arctic-niu/arctic-niu-topics.h"

#define NIU_NODE        1
#define NET_NODES       4
#define PEER            0           /* the node the test usually plays */
#define TX_BASE         0x1000000ull
#define RX_BASE         0x1040000ull
#define SCRATCH_MEM     0x2000000ull
#define RETRY_NS        2000000ull  /* device default retry-timeout-ns */
#define NACK_NS         10000ull    /* device default nack-backoff-ns */
#define WAIT_MS         5000        /* for frames the device must send */
#define QUIET_MS        300         /* to check the device sends nothing */
#define LINES_DEFAULT   ARCTIC_DEFAULT_LINES    /* device default lines */
#define HI_LINES        4           /* NIU_CAPS.HI_LINES */
/* A DMA window (EP_WIN_*): guest physical and virtual base, mask */
#define WIN_PHYS        0x2000000ull    /* 4 MiB aligned, inside 64 MiB */
#define WIN_VIRT        0x40000000ull
#define WIN_MASK        0x3fffffull     /* 4 MiB */

typedef struct Niu {
    QTestState *qts;
    QPCIBus *bus;
    QPCIDevice *dev;
    QPCIBar ctrl, user;
    char *dir;
    char *sock_path;
    int listen_fd;
    int fd;                     /* the connection's socket ... */
    QIOChannelSocket *sioc;     /* ... which this owns (descriptors, close) */
    struct arctic_frame_reader reader;  /* the device's frames */
    uint8_t in[4096];               /* what one recv() took ... */
    size_t in_off, in_len;          /* ... and what is left of it */
    uint16_t in_flags;              /* flags of the last frame read */
    uint32_t niu_credits[2];        /* what the device let us send */
    uint32_t credits_seen[2];       /* CREDIT frames received, summed */
    bool hold_credits[2];           /* play a congested switch */
    uint32_t tx_head[2];            /* guest producer indices: HiTx, LoTx */
    /* guest consumer, HiRx and LoRx: the index and its lap, as EP_RX_HD */
    uint32_t rx_tail[2];
    uint32_t dma_head;              /* guest producer index: DMATx */
    uint32_t peer_epoch;            /* epoch the test uses as a sender */
    uint32_t peer_seq[2];
    uint32_t peer_incarnation;      /* stamped in the test's acks/nacks */
    uint32_t niu_incarnation;       /* seen in the device's */
    bool niu_incarnation_known;
    /* Descriptors the device's HELLO brought (arctic/link-ring.h). */
    int offered_fds[ARCTIC_RING_FDS];
    unsigned offered;
    /* Its shared-memory rings, once our WELCOME took them. */
    bool rings;
    void *ring_area;
    size_t ring_area_size;
    struct arctic_ring ring_in;     /* ARCTIC_RING_TO_SWITCH */
    struct arctic_ring ring_out;    /* ARCTIC_RING_TO_NIU */
    /*
     * Our end of the link's wake-up socket: we sleep on it, and kick the
     * device through it.
     */
    int ring_wake_fd;
} Niu;

/* Registers and guest memory */
/*
 * The e2e flags of a DATA packet that left its sender @left lines for its
 * kind once it took one: ACK_NOW below 4 (link-protocol.md §8.2 rule 1).
 */
static inline uint8_t ack_now_if_left(unsigned left)
{
    return left < 4 ? ARCTIC_FIELD_PREP(ARCTIC_E2E_FLAGS, ACK_NOW, 1) : 0;
}

void ring_kick(Niu *n);
unsigned ring_kicks_take(int fd);
uint32_t reg_r(Niu *n, uint64_t off);
void reg_w(Niu *n, uint64_t off, uint32_t v);
uint32_t counter(Niu *n, enum arctic_counter c);
void wait_counter(Niu *n, enum arctic_counter c, uint32_t want);
void wait_link_dropped(Niu *n, uint32_t before);
QDict *niu_state(Niu *n, QDict **rsp);
char *niu_run_state(Niu *n);
void ep_w(Niu *n, unsigned ep, uint64_t reg, uint32_t v);
uint32_t ep_r(Niu *n, unsigned ep, uint64_t reg);
void doorbell(Niu *n);
void expect_errors(Niu *n, uint32_t want);
uint64_t tx_slot_addr(unsigned q, uint32_t idx);
uint64_t rx_slot_addr(unsigned q, uint32_t idx);
uint64_t rx_tail_slot(Niu *n, unsigned q);
uint32_t rx_tail_header(Niu *n, unsigned q, uint32_t header);
void rx_tail_advance(Niu *n, unsigned q);
void guest_send_raw(Niu *n, unsigned q, uint32_t header, uint32_t cmd0,
                    uint32_t cmd1, const uint32_t *payload,
                    unsigned words);
uint32_t mpi_header(unsigned dest, unsigned type, unsigned len);
void guest_send(Niu *n, unsigned q, unsigned dest, unsigned type,
                uint32_t cmd0, uint32_t cmd1, const uint32_t *payload,
                unsigned len);

/* The switch side of the link */
void link_write_bytes(Niu *n, const void *buf, size_t len);
void link_write_flags(Niu *n, uint16_t type, uint16_t flags,
                      const void *body, uint32_t len);
void link_write(Niu *n, uint16_t type, const void *body, uint32_t len);
int link_read(Niu *n, uint16_t *type, uint8_t *body, uint32_t *len,
              int timeout_ms);
void link_accept(Niu *n);
void link_close(Niu *n);
void wait_link_status(Niu *n, uint32_t mask, bool want);
void link_send_welcome(Niu *n, uint16_t hi_credits, uint16_t lo_credits);
void link_send_welcome_flags(Niu *n, uint16_t flags, uint16_t hi_credits,
                             uint16_t lo_credits);
void link_send_welcome_fds(Niu *n, uint16_t flags, const int *fds,
                           unsigned count);
void link_adopt_rings(Niu *n);
void link_expect_hello(Niu *n);
void link_handshake(Niu *n, uint16_t hi_credits, uint16_t lo_credits);
size_t link_expect_packet_within(Niu *n, uint8_t *wire, int ms);
size_t link_expect_packet(Niu *n, uint8_t *wire);
void link_expect_silence(Niu *n);
void link_send_packet(Niu *n, const uint8_t *wire, size_t size);
void link_send_credit(Niu *n, uint16_t hi, uint16_t lo);
size_t build_wire(uint8_t *wire, const struct arctic_e2e_header *h,
                  uint32_t route, uint32_t header_low16, uint32_t cmd0,
                  uint32_t cmd1, const uint32_t *payload, int len);
size_t peer_data(Niu *n, uint8_t *wire, unsigned src, uint8_t prio,
                 uint32_t epoch, uint32_t seq, unsigned type,
                 uint32_t cmd0, uint32_t cmd1, const uint32_t *payload,
                 int len);
/* arctic-niu-raw-test.c: messages of the peer, sent and acked */
void peer_send_run(Niu *n, uint8_t (*wire)[ARCTIC_WIRE_MAX_SIZE],
                     size_t *size, unsigned count, const uint32_t *payload,
                     unsigned words);
/*
 * An ACK or NACK from the peer, and the one expected from the NIU: @seq
 * fills the header's seq field, which a RESYNC nack names resync_epoch.
 */
void peer_control(Niu *n, unsigned src, uint8_t kind, uint8_t prio,
                  uint32_t epoch, uint32_t seq, uint8_t reason);
void expect_control_within(Niu *n, int ms, unsigned src, uint8_t kind,
                           uint8_t prio, uint32_t epoch, uint32_t seq,
                           uint8_t reason);
void expect_control(Niu *n, unsigned src, uint8_t kind, uint8_t prio,
                    uint32_t epoch, uint32_t seq, uint8_t reason);
void peer_send_acked(Niu *n, uint8_t prio, unsigned type, uint32_t cmd0,
                     uint32_t cmd1, const uint32_t *payload, int len);
uint32_t expect_data_flags(Niu *n, unsigned dest, uint8_t prio,
                           uint8_t flags, uint32_t seq, unsigned type,
                           uint32_t cmd0, uint32_t cmd1,
                           const uint32_t *payload, int len);
uint32_t expect_data(Niu *n, unsigned dest, uint8_t prio,
                     uint32_t seq, unsigned type, uint32_t cmd0,
                     uint32_t cmd1, const uint32_t *payload, int len);

/* Set-up */
bool link_thread(void);
bool link_rings_wanted(void);
Niu *niu_start_node_args(const char *link, unsigned node, const char *props,
                         const char *qemu_args);
Niu *niu_start_node(const char *link, unsigned node, const char *props);
Niu *niu_start(bool with_link);
void niu_setup(Niu *n);
Niu *niu_start_linked_props(const char *props, uint16_t hi_credits,
                            uint16_t lo_credits);
Niu *niu_start_linked(uint16_t hi_credits, uint16_t lo_credits);
void niu_stop(Niu *n);
void guest_expect_rx(Niu *n, unsigned q, unsigned src, unsigned type,
                     uint32_t cmd0, uint32_t cmd1,
                     const uint32_t *payload, unsigned len);
void mark_rx_slots(Niu *n);

/* The guest side, as more than one topic uses it */
void guest_wait_rx(Niu *n, unsigned q);
uint32_t user_r(Niu *n, uint64_t reg);
void user_w(Niu *n, uint64_t reg, uint32_t v);
void guest_dma(Niu *n, unsigned q, unsigned dest, unsigned type,
               uint32_t command, uint64_t target, uint64_t source,
               const uint32_t *payload, unsigned len);
void guest_expect_notice(Niu *n, unsigned type, uint32_t command,
                         uint32_t status);
void set_window_and_job(Niu *n, uint64_t phys, uint64_t virt,
                        uint64_t mask, uint32_t job);
void fill_block(Niu *n, uint64_t phys, uint32_t *block, uint32_t seed);
void peer_dma_data_acked(Niu *n, uint64_t target, const uint32_t *words);
bool niu_migrate_save_try(Niu *n, const char *path);
void niu_migrate_save(Niu *n, const char *path);
bool niu_migrate_load(Niu *n, const char *path);

/*
 * Each topic file adds its tests: arctic-niu-NAME-test.c defines
 * niu_test_add_NAME().  ARCTIC_NIU_TEST_TOPICS is X(NAME) for each topic
 * of tests/qtest/meson.build, generated into arctic-niu/arctic-niu-topics.h.
 */
#define X(name) void niu_test_add_##name(void);
ARCTIC_NIU_TEST_TOPICS
#undef X

/*
 * For tests that must have the link thread whatever ARCTIC_NIU_TEST_LINK
 * says (timed mode), and that must serve the link while QEMU starts
 * (called with the listening socket made, before qtest_init()).
 */
extern bool niu_test_force_thread;
extern void (*niu_test_before_qemu)(Niu *n);

#endif
