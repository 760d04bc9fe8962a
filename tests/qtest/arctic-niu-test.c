/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qtests for the Arctic NIU (-device arctic-niu).
 *
 * The test plays both the arctic-switch and the peer NIUs: it listens on a
 * UNIX socket, answers the device's HELLO, and exchanges link frames with
 * it, building and checking every packet byte for byte with the same
 * contract headers the device uses (include/arctic/).  The guest side is
 * played through qtest memory accesses: slots are written and read in
 * guest RAM exactly as seed 002 §3.2 describes.  Device timers run on the
 * virtual clock, which qtest only moves when told to, so every retry and
 * timeout happens exactly when a test steps the clock.
 */

#include "qemu/osdep.h"
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <glib/gstdio.h>
#include "libqtest.h"
#include "libqos/pci-pc.h"
#include "hw/registerfields.h"
#include "standard-headers/linux/pci_regs.h"
#include "qobject/qdict.h"
#include "qobject/qlist.h"

#include "arctic/niu-hw.h"
#include "arctic/packet.h"
#include "arctic/link.h"
#include "arctic/route.h"

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

typedef struct Niu {
    QTestState *qts;
    QPCIBus *bus;
    QPCIDevice *dev;
    QPCIBar ctrl, user;
    char *dir;
    char *sock_path;
    int listen_fd;
    int fd;
    struct arctic_frame_reader reader;  /* the device's frames */
    uint8_t in[4096];               /* what one recv() took ... */
    size_t in_off, in_len;          /* ... and what is left of it */
    uint16_t in_flags;              /* flags of the last frame read */
    uint32_t niu_credits[2];        /* what the device let us send */
    uint32_t credits_seen[2];       /* CREDIT frames received, summed */
    bool hold_credits[2];           /* play a congested switch */
    uint32_t tx_head[2];            /* guest producer indices: HiTx, LoTx */
    uint32_t rx_tail[2];            /* guest consumer, HiRx and LoRx: the
                                       index and its lap, as EP_RX_HD */
    uint32_t dma_head;              /* guest producer index: DMATx */
    uint32_t peer_epoch;            /* epoch the test uses as a sender */
    uint32_t peer_seq[2];
    uint32_t peer_incarnation;      /* stamped in the test's acks/nacks */
    uint32_t niu_incarnation;       /* seen in the device's */
    bool niu_incarnation_known;
} Niu;

/* ------------------------------------------------------------------------
 * Registers and guest memory
 */

static uint32_t reg_r(Niu *n, uint64_t off)
{
    return qpci_io_readl(n->dev, n->ctrl, off);
}

static void reg_w(Niu *n, uint64_t off, uint32_t v)
{
    qpci_io_writel(n->dev, n->ctrl, off, v);
}

static uint32_t counter(Niu *n, enum arctic_counter c)
{
    return reg_r(n, ARCTIC_COUNTER_OFFSET(c));
}

/* The device's state view (QMP qom-get); unref the response when done. */
static QDict *niu_state(Niu *n, QDict **rsp)
{
    *rsp = qtest_qmp(n->qts, "{'execute': 'qom-get', 'arguments': {"
                     "'path': '/machine/peripheral/niu', 'property': 'state'}}");
    g_assert_true(qdict_haskey(*rsp, "return"));
    return qdict_get_qdict(*rsp, "return");
}

static QDict *niu_state_endpoint0(Niu *n, QDict **rsp)
{
    return qobject_to(QDict, qlist_peek(qdict_get_qlist(niu_state(n, rsp),
                                                        "endpoints")));
}

static void ep_w(Niu *n, unsigned ep, uint64_t reg, uint32_t v)
{
    reg_w(n, ARCTIC_EP_OFFSET(ep, reg), v);
}

static uint32_t ep_r(Niu *n, unsigned ep, uint64_t reg)
{
    return reg_r(n, ARCTIC_EP_OFFSET(ep, reg));
}

static void doorbell(Niu *n)
{
    qpci_io_writel(n->dev, n->user, A_USER_DOORBELL,
                   R_USER_DOORBELL_HI_TX_MASK | R_USER_DOORBELL_LO_TX_MASK);
}

/* Take and clear the error causes, checking that exactly @want are set. */
static void expect_errors(Niu *n, uint32_t want)
{
    uint32_t got = reg_r(n, A_NIU_ERROR_CAUSE);

    g_assert_cmphex(got, ==, want);
    reg_w(n, A_NIU_ERROR_CAUSE, got);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
}

static uint64_t tx_slot_addr(unsigned q, uint32_t idx)
{
    return TX_BASE + (q == ARCTIC_TXQ_HI ? ARCTIC_HI_TX_OFFSET
                                         : ARCTIC_LO_TX_OFFSET) +
           (uint64_t)idx * ARCTIC_SLOT_SIZE;
}

static uint64_t rx_slot_addr(unsigned q, uint32_t idx)
{
    return RX_BASE + (q == ARCTIC_RXQ_HI ? ARCTIC_HI_RX_OFFSET
                                         : ARCTIC_LO_RX_OFFSET) +
           (uint64_t)idx * ARCTIC_SLOT_SIZE;
}

/* The guest's next Rx slot of queue @q, the LAP its header must carry,
 * and the step past it (INDEX and LAP together, as the NIU counts). */
static uint64_t rx_tail_slot(Niu *n, unsigned q)
{
    return rx_slot_addr(q, FIELD_EX32(n->rx_tail[q], EP_RX_HD, INDEX));
}

static uint32_t rx_tail_header(Niu *n, unsigned q, uint32_t header)
{
    header = FIELD_DP32(header, MPI_HEADER, LAP,
                        FIELD_EX32(n->rx_tail[q], EP_RX_HD, LAP));
    return FIELD_DP32(header, MPI_HEADER, VALID, 1);
}

static void rx_tail_advance(Niu *n, unsigned q)
{
    n->rx_tail[q] = (n->rx_tail[q] + 1) % (2 * ARCTIC_N);
}

/* Seed 002 §3.2.1 TransmitHi/Lo, with a raw header word. */
static void guest_send_raw(Niu *n, unsigned q, uint32_t header, uint32_t cmd0,
                           uint32_t cmd1, const uint32_t *payload,
                           unsigned words)
{
    uint64_t slot = tx_slot_addr(q, n->tx_head[q]);
    unsigned i;

    g_assert_cmphex(qtest_readl(n->qts, slot), ==, 0);     /* step 1 */
    qtest_writel(n->qts, slot + ARCTIC_SLOT_COMMAND0, cmd0);
    qtest_writel(n->qts, slot + ARCTIC_SLOT_COMMAND1, cmd1);
    for (i = 0; i < words; i++) {
        qtest_writel(n->qts, slot + ARCTIC_SLOT_PAYLOAD + 4 * i, payload[i]);
    }
    qtest_writel(n->qts, slot, header);                     /* step 5 */
    n->tx_head[q] = (n->tx_head[q] + 1) % ARCTIC_N;
}

static uint32_t mpi_header(unsigned dest, unsigned type, unsigned len)
{
    uint32_t h = FIELD_DP32(0, MPI_HEADER, VALID, 1);

    h = FIELD_DP32(h, MPI_HEADER, DEST, dest);
    h = FIELD_DP32(h, MPI_HEADER, TYPE, type);
    return FIELD_DP32(h, MPI_HEADER, LENGTH, len);
}

static void guest_send(Niu *n, unsigned q, unsigned dest, unsigned type,
                       uint32_t cmd0, uint32_t cmd1, const uint32_t *payload,
                       unsigned len)
{
    guest_send_raw(n, q, mpi_header(dest, type, len), cmd0, cmd1, payload,
                   len);
}

/* A payload word that names its message and position. */
static uint32_t pattern(uint32_t msg, unsigned i)
{
    return 0xa5000000u ^ (msg << 8) ^ i;
}

/* ------------------------------------------------------------------------
 * The switch side of the link
 */

static void link_write_flags(Niu *n, uint16_t type, uint16_t flags,
                             const void *body, uint32_t len)
{
    uint8_t buf[ARCTIC_LINK_HEADER_SIZE + ARCTIC_LINK_MAX_BODY];

    arctic_frame_header_encode_flags(buf, type, flags, len);
    memcpy(buf + ARCTIC_LINK_HEADER_SIZE, body, len);
    g_assert_cmpint(send(n->fd, buf, ARCTIC_LINK_HEADER_SIZE + len,
                         MSG_NOSIGNAL), ==, ARCTIC_LINK_HEADER_SIZE + len);
}

static void link_write(Niu *n, uint16_t type, const void *body, uint32_t len)
{
    link_write_flags(n, type, 0, body, len);
}

/*
 * Read one frame; 1 when one arrived, 0 on timeout, -1 when the device
 * closed the connection.
 */
static int link_read(Niu *n, uint16_t *type, uint8_t *body, uint32_t *len,
                     int timeout_ms)
{
    for (;;) {
        const uint8_t *p = n->in + n->in_off;
        size_t left = n->in_len - n->in_off;
        enum arctic_frame_status st = arctic_frame_read(&n->reader, &p, &left);
        struct pollfd pfd = { .fd = n->fd, .events = POLLIN };
        ssize_t got;

        n->in_off = p - n->in;
        g_assert_cmpint(st, !=, ARCTIC_FRAME_MALFORMED);
        if (st == ARCTIC_FRAME_WHOLE) {
            *type = n->reader.header.type;
            *len = n->reader.header.length;
            n->in_flags = n->reader.header.flags;
            memcpy(body, n->reader.body, *len);
            return 1;
        }
        if (poll(&pfd, 1, timeout_ms) == 0) {
            return 0;
        }
        got = recv(n->fd, n->in, sizeof(n->in), 0);
        if (got <= 0) {
            return -1;
        }
        n->in_off = 0;
        n->in_len = got;
    }
}

static void link_accept(Niu *n)
{
    struct pollfd pfd = { .fd = n->listen_fd, .events = POLLIN };

    g_assert_cmpint(poll(&pfd, 1, 10000), ==, 1);
    n->fd = accept(n->listen_fd, NULL, NULL);
    g_assert_cmpint(n->fd, >=, 0);
    n->in_off = n->in_len = 0;
    arctic_frame_reader_reset(&n->reader);
}

static void link_close(Niu *n)
{
    if (n->fd >= 0) {
        close(n->fd);
        n->fd = -1;
    }
}

/* Wait (bounded) until a NIU_LINK_STATUS bit reads @want, and check it. */
static void wait_link_status(Niu *n, uint32_t mask, bool want)
{
    int i;

    for (i = 0; i < WAIT_MS && !(reg_r(n, A_NIU_LINK_STATUS) & mask) == want;
         i++) {
        g_usleep(1000);
    }
    g_assert_cmpint(!!(reg_r(n, A_NIU_LINK_STATUS) & mask), ==, want);
}

static void link_send_welcome(Niu *n, uint16_t hi_credits, uint16_t lo_credits)
{
    uint8_t body[ARCTIC_WELCOME_SIZE];
    struct arctic_welcome w = {
        .magic = ARCTIC_LINK_MAGIC,
        .version_major = ARCTIC_LINK_VERSION_MAJOR,
        .version_minor = ARCTIC_LINK_VERSION_MINOR,
        .node_id = NIU_NODE,
        .num_nodes = NET_NODES,
        .levels = arctic_tree_levels(NET_NODES),
    };

    w.credits[ARCTIC_PRIORITY_HIGH] = hi_credits;
    w.credits[ARCTIC_PRIORITY_LOW] = lo_credits;
    arctic_welcome_encode(body, &w);
    link_write(n, ARCTIC_FRAME_WELCOME, body, sizeof(body));
}

/* Read the device's HELLO and check every field of it. */
static void link_expect_hello(Niu *n)
{
    uint8_t body[ARCTIC_LINK_MAX_BODY];
    struct arctic_hello h;
    uint16_t type;
    uint32_t len;

    g_assert_cmpint(link_read(n, &type, body, &len, WAIT_MS), ==, 1);
    g_assert_cmpint(type, ==, ARCTIC_FRAME_HELLO);
    g_assert_cmpint(len, ==, ARCTIC_HELLO_SIZE);
    arctic_hello_decode(body, &h);
    g_assert_cmphex(h.magic, ==, ARCTIC_LINK_MAGIC);
    g_assert_cmpint(h.version_major, ==, ARCTIC_LINK_VERSION_MAJOR);
    g_assert_cmpint(h.node_id, ==, NIU_NODE);
    g_assert_cmpint(h.credits[ARCTIC_PRIORITY_HIGH], ==,
                    ARCTIC_LINK_DEFAULT_CREDITS);
    g_assert_cmpint(h.credits[ARCTIC_PRIORITY_LOW], ==,
                    ARCTIC_LINK_DEFAULT_CREDITS);
    n->niu_credits[ARCTIC_PRIORITY_HIGH] = h.credits[ARCTIC_PRIORITY_HIGH];
    n->niu_credits[ARCTIC_PRIORITY_LOW] = h.credits[ARCTIC_PRIORITY_LOW];
}

static void link_handshake(Niu *n, uint16_t hi_credits, uint16_t lo_credits)
{
    link_accept(n);
    link_expect_hello(n);
    link_send_welcome(n, hi_credits, lo_credits);
    /* The register shows the link up once the WELCOME was taken in. */
    wait_link_status(n, R_NIU_LINK_STATUS_UP_MASK, true);
    g_assert_cmpint(reg_r(n, A_NIU_NUM_NODES), ==, NET_NODES);
}

/* The next PACKET from the device; CREDIT frames on the way are summed. */
static void link_send_credit(Niu *n, uint16_t hi, uint16_t lo);

/* ... within @ms milliseconds. */
static size_t link_expect_packet_within(Niu *n, uint8_t *wire, int ms)
{
    uint16_t type;
    uint32_t len;
    uint8_t prio;

    for (;;) {
        g_assert_cmpint(link_read(n, &type, wire, &len, ms), ==, 1);
        if (type == ARCTIC_FRAME_CREDIT) {
            n->credits_seen[ARCTIC_PRIORITY_LOW] += arctic_get_le16(wire);
            n->credits_seen[ARCTIC_PRIORITY_HIGH] += arctic_get_le16(wire + 2);
            continue;
        }
        g_assert_cmpint(type, ==, ARCTIC_FRAME_PACKET);
        g_assert_cmpint(arctic_wire_check(wire, len), ==, ARCTIC_WIRE_OK);
        /* The frame names the credit the packet used: its priority. */
        prio = FIELD_EX32(arctic_get_le32(wire + ARCTIC_WIRE_WORDS_OFFSET),
                          ARCTIC_W0, PRIORITY);
        g_assert_cmphex(n->in_flags, ==,
                        FIELD_DP32(0, ARCTIC_FRAME_FLAGS, PRIORITY, prio));
        /* As the switch does once the packet has moved on. */
        if (!n->hold_credits[prio]) {
            link_send_credit(n, prio == ARCTIC_PRIORITY_HIGH,
                             prio == ARCTIC_PRIORITY_LOW);
        }
        return len;
    }
}

static size_t link_expect_packet(Niu *n, uint8_t *wire)
{
    return link_expect_packet_within(n, wire, WAIT_MS);
}

/* Check that the device sends no packet for a while (credits may come). */
static void link_expect_silence(Niu *n)
{
    uint8_t body[ARCTIC_LINK_MAX_BODY];
    uint16_t type;
    uint32_t len;
    int r;

    while ((r = link_read(n, &type, body, &len, QUIET_MS)) == 1) {
        g_assert_cmpint(type, ==, ARCTIC_FRAME_CREDIT);
        n->credits_seen[ARCTIC_PRIORITY_LOW] += arctic_get_le16(body);
        n->credits_seen[ARCTIC_PRIORITY_HIGH] += arctic_get_le16(body + 2);
    }
    g_assert_cmpint(r, ==, 0);
}

static void link_send_packet(Niu *n, const uint8_t *wire, size_t size)
{
    uint32_t w0 = arctic_get_le32(wire + ARCTIC_WIRE_WORDS_OFFSET);

    /* The switch sends a packet on the credit of the priority it
     * travelled at. */
    link_write_flags(n, ARCTIC_FRAME_PACKET,
                     ARCTIC_FIELD_PREP(ARCTIC_FRAME_FLAGS, PRIORITY,
                                       ARCTIC_FIELD_GET(ARCTIC_W0, PRIORITY,
                                                        w0)),
                     wire, size);
}

static void link_send_credit(Niu *n, uint16_t hi, uint16_t lo)
{
    uint8_t body[ARCTIC_CREDIT_SIZE];

    arctic_put_le16(body, lo);
    arctic_put_le16(body + 2, hi);
    link_write(n, ARCTIC_FRAME_CREDIT, body, sizeof(body));
}

/*
 * Build a wire packet the way an NIU does (the test's own encoder); @len
 * < 0 makes an ack or nack, whose incarnation word is @cmd0.
 */
static size_t build_wire(uint8_t *wire, const struct arctic_e2e_header *h,
                         uint32_t route, uint32_t header_low16, uint32_t cmd0,
                         uint32_t cmd1, const uint32_t *payload, int len)
{
    unsigned arctic_len = len < 0 ? ARCTIC_CONTROL_PACKET_LENGTH
                                  : len + ARCTIC_MPI_LENGTH_EXTRA;
    uint32_t w1 = (route & R_ROUTE_ENTRY_DOWNROUTE_MASK) | header_low16;
    size_t size = arctic_wire_size(arctic_len);
    int i;

    w1 = FIELD_DP32(w1, ARCTIC_W1, LENGTH, arctic_len);
    memset(wire, 0, size);
    arctic_e2e_encode(wire, h);
    arctic_put_le32(wire + 16, route & 0xffff);
    arctic_put_le32(wire + 20, w1);
    if (len >= 0) {
        arctic_put_le32(wire + 24, cmd0);
        arctic_put_le32(wire + 28, cmd1);
        for (i = 0; i < len; i++) {
            arctic_put_le32(wire + 32 + 4 * i, payload[i]);
        }
    } else {
        arctic_control_set_incarnation(wire, cmd0);
    }
    arctic_wire_seal(wire, size);
    return size;
}

/* A data packet from peer @src to the NIU on stream (@prio, epoch, seq). */
static size_t peer_data(Niu *n, uint8_t *wire, unsigned src, uint8_t prio,
                        uint32_t epoch, uint32_t seq, unsigned type,
                        uint32_t cmd0, uint32_t cmd1, const uint32_t *payload,
                        int len)
{
    struct arctic_e2e_header h = {
        .kind = ARCTIC_E2E_DATA,
        .flags = FIELD_DP32(0, ARCTIC_E2E_FLAGS, PRIORITY, prio),
        .src_node = src,
        .dst_node = NIU_NODE,
        .epoch = epoch,
        .seq = seq,
    };
    uint32_t route = arctic_route_entry(src, NIU_NODE,
                                        prio == ARCTIC_PRIORITY_HIGH, false);

    return build_wire(wire, &h, route, FIELD_DP32(0, ARCTIC_W1, TYPE, type),
                      cmd0, cmd1, payload, len);
}

/* An ack or nack from peer @src for the NIU's stream to it. */
static void peer_control(Niu *n, unsigned src, uint8_t kind, uint8_t prio,
                         uint32_t epoch, uint32_t seq, uint8_t reason)
{
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header h = {
        .kind = kind,
        .flags = ARCTIC_FIELD_PREP(ARCTIC_E2E_FLAGS, PRIORITY, prio) |
                 ARCTIC_FIELD_PREP(ARCTIC_E2E_FLAGS, REASON, reason),
        .src_node = src,
        .dst_node = NIU_NODE,
        .job = n->peer_incarnation & 0xffff,
        .epoch = epoch,
        .seq = seq,
    };
    size_t size = build_wire(wire, &h, arctic_route_entry(src, NIU_NODE, true,
                                                          false),
                             0, n->peer_incarnation, 0, NULL, -1);
    enum arctic_counter seen = kind == ARCTIC_E2E_ACK
                               ? ARCTIC_CNT_ACKS_RECEIVED
                               : ARCTIC_CNT_NACKS_RECEIVED;
    uint32_t before = counter(n, seen);
    int i;

    link_send_packet(n, wire, size);
    /* Wait until the device has taken it in, so that a clock step that
     * follows cannot overtake it on the other socket. */
    for (i = 0; i < WAIT_MS && counter(n, seen) == before; i++) {
        g_usleep(1000);
    }
    g_assert_cmpint(counter(n, seen), ==, before + 1);
}

/* Expect the NIU's answer to a data packet from @src within @ms, and
 * check it whole. */
static void expect_control_within(Niu *n, int ms, unsigned src, uint8_t kind,
                                  uint8_t prio, uint32_t epoch, uint32_t seq,
                                  uint8_t reason)
{
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE], want[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header h = {
        .kind = kind,
        .flags = ARCTIC_FIELD_PREP(ARCTIC_E2E_FLAGS, PRIORITY, prio) |
                 ARCTIC_FIELD_PREP(ARCTIC_E2E_FLAGS, REASON, reason),
        .src_node = NIU_NODE,
        .dst_node = src,
        .epoch = epoch,
        .seq = seq,
    };
    size_t size = link_expect_packet_within(n, wire, ms);
    struct arctic_e2e_header got;
    size_t want_size;

    /* An answer carries the NIU's incarnation, constant between resets:
     * whole in word 2, its low half in the job field. */
    arctic_e2e_decode(wire, &got);
    if (!n->niu_incarnation_known) {
        n->niu_incarnation = arctic_control_incarnation(wire);
        n->niu_incarnation_known = true;
    }
    h.job = n->niu_incarnation & 0xffff;
    want_size = build_wire(want, &h, arctic_route_entry(NIU_NODE, src, true,
                                                        false),
                           0, n->niu_incarnation, 0, NULL, -1);

    g_assert_cmpint(size, ==, want_size);
    g_assert_cmpmem(wire, size, want, want_size);
}

static void expect_control(Niu *n, unsigned src, uint8_t kind, uint8_t prio,
                           uint32_t epoch, uint32_t seq, uint8_t reason)
{
    expect_control_within(n, WAIT_MS, src, kind, prio, epoch, seq, reason);
}

/* Send the next data packet of the test's stream and expect an ACK. */
static void peer_send_acked(Niu *n, uint8_t prio, unsigned type, uint32_t cmd0,
                            uint32_t cmd1, const uint32_t *payload, int len)
{
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t seq = n->peer_seq[prio]++;
    size_t size = peer_data(n, wire, PEER, prio, n->peer_epoch, seq, type,
                            cmd0, cmd1, payload, len);

    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_ACK, prio, n->peer_epoch, seq, 0);
}

/*
 * Expect the data packet the NIU builds for an MPI message, byte for byte
 * (route words from the NIU's route table, CRC included).  Returns the
 * epoch it carried so a test can follow the stream.
 */
/* The next data packet, checked whole; @flags beyond the priority
 * (ARCTIC_E2E_FLAGS.NOTIFY on a DMA notification). */
static uint32_t expect_data_flags(Niu *n, unsigned dest, uint8_t prio,
                                  uint8_t flags, uint32_t seq, unsigned type,
                                  uint32_t cmd0, uint32_t cmd1,
                                  const uint32_t *payload, int len)
{
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE], want[ARCTIC_WIRE_MAX_SIZE];
    size_t size = link_expect_packet(n, wire);
    struct arctic_e2e_header got, h = {
        .kind = ARCTIC_E2E_DATA,
        .flags = FIELD_DP32(flags, ARCTIC_E2E_FLAGS, PRIORITY, prio),
        .src_node = NIU_NODE,
        .dst_node = dest,
        .seq = seq,
    };
    size_t want_size;

    arctic_e2e_decode(wire, &got);
    h.epoch = got.epoch;
    want_size = build_wire(want, &h,
                           arctic_route_entry(NIU_NODE, dest,
                                              prio == ARCTIC_PRIORITY_HIGH,
                                              false),
                           FIELD_DP32(0, ARCTIC_W1, TYPE, type), cmd0, cmd1,
                           payload, len);
    g_assert_cmpint(size, ==, want_size);
    g_assert_cmpmem(wire, size, want, want_size);
    return got.epoch;
}

static uint32_t expect_data(Niu *n, unsigned dest, uint8_t prio,
                            uint32_t seq, unsigned type, uint32_t cmd0,
                            uint32_t cmd1, const uint32_t *payload, int len)
{
    return expect_data_flags(n, dest, prio, 0, seq, type, cmd0, cmd1,
                             payload, len);
}

/* ------------------------------------------------------------------------
 * Set-up
 */

/*
 * Start QEMU with the NIU as node @node.  @link: "listen" to have the test
 * play the switch on a socket of its own, a socket path to join a real
 * arctic-switch, or NULL for no link.
 */
/*
 * The link transport under test: ARCTIC_NIU_TEST_LINK=thread joins the
 * switch with link-socket= (the NIU's link thread), anything else or
 * nothing with a chardev.  meson runs the suite once with each.
 */
static bool link_thread(void)
{
    return g_strcmp0(g_getenv("ARCTIC_NIU_TEST_LINK"), "thread") == 0;
}

/* @props: extra "-device arctic-niu" properties, or "". */
static Niu *niu_start_node(const char *link, unsigned node, const char *props)
{
    Niu *n = g_new0(Niu, 1);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    GString *args = g_string_new("-M q35 -nodefaults -m 64M ");

    if (g_getenv("ARCTIC_NIU_TEST_TRACE")) {
        /* e.g. ARCTIC_NIU_TEST_TRACE=/tmp/niu.log: trace every device event */
        g_string_append_printf(args, "-trace arctic_niu_*,file=%s.%u ",
                               g_getenv("ARCTIC_NIU_TEST_TRACE"), node);
    }

    n->fd = -1;
    n->listen_fd = -1;
    n->peer_epoch = 0x5eed0000;
    n->peer_incarnation = 0x00011111;
    if (link && strcmp(link, "listen") == 0) {
        n->dir = g_dir_make_tmp("arctic-niu-test-XXXXXX", NULL);
        g_assert_nonnull(n->dir);
        n->sock_path = g_build_filename(n->dir, "switch.sock", NULL);
        n->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
        g_assert_cmpint(n->listen_fd, >=, 0);
        g_strlcpy(addr.sun_path, n->sock_path, sizeof(addr.sun_path));
        g_assert_cmpint(bind(n->listen_fd, (struct sockaddr *)&addr,
                             sizeof(addr)), ==, 0);
        g_assert_cmpint(listen(n->listen_fd, 4), ==, 0);
        link = n->sock_path;
    }
    if (link && link_thread()) {
        g_string_append_printf(args, "-device arctic-niu,link-socket=%s,"
                               "link-reconnect-ms=50,", link);
    } else if (link && g_str_has_prefix(link, "tcp:")) {
        g_autofree char *host = g_strdup(link + strlen("tcp:"));
        char *port = strrchr(host, ':');

        g_assert_nonnull(port);
        *port++ = '\0';
        g_string_append_printf(args, "-chardev socket,id=link,host=%s,"
                               "port=%s,reconnect-ms=50 -device arctic-niu,"
                               "chardev=link,", host, port);
    } else if (link) {
        g_string_append_printf(args, "-chardev socket,id=link,path=%s,"
                               "reconnect-ms=50 -device arctic-niu,"
                               "chardev=link,", link);
    } else {
        g_string_append(args, "-device arctic-niu,");
    }
    g_string_append_printf(args, "id=niu,node-id=%u,addr=04.0%s%s", node,
                           *props ? "," : "", props);
    n->qts = qtest_init(args->str);
    g_string_free(args, true);

    n->bus = qpci_new_pc(n->qts, NULL);
    n->dev = qpci_device_find(n->bus, QPCI_DEVFN(4, 0));
    g_assert_nonnull(n->dev);
    qpci_device_enable(n->dev);
    n->ctrl = qpci_iomap(n->dev, ARCTIC_BAR_CONTROL, NULL);
    n->user = qpci_iomap(n->dev, ARCTIC_BAR_USER, NULL);
    return n;
}

static Niu *niu_start(bool with_link)
{
    return niu_start_node(with_link ? "listen" : NULL, NIU_NODE, "");
}

/* What a driver does: queues, route table, Rx then Tx on. */
static void niu_setup(Niu *n)
{
    uint32_t table[2 * NET_NODES];
    unsigned t, d;

    qtest_memset(n->qts, TX_BASE, 0, ARCTIC_TX_REGION_SIZE);
    qtest_memset(n->qts, RX_BASE, 0, ARCTIC_RX_REGION_SIZE);
    ep_w(n, 0, A_EP_TX_QBASE_LO, (uint32_t)TX_BASE);
    ep_w(n, 0, A_EP_TX_QBASE_HI, TX_BASE >> 32);
    ep_w(n, 0, A_EP_RX_QBASE_LO, (uint32_t)RX_BASE);
    ep_w(n, 0, A_EP_RX_QBASE_HI, RX_BASE >> 32);
    arctic_route_table_fill(table, NIU_NODE, NET_NODES);
    for (t = 0; t < 2; t++) {
        for (d = 0; d < NET_NODES; d++) {
            reg_w(n, ARCTIC_ROUTE_OFFSET(t, d), table[t * NET_NODES + d]);
        }
    }
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
}

/* A set-up NIU with properties @props, its link up with these credits. */
static Niu *niu_start_linked_props(const char *props, uint16_t hi_credits,
                                   uint16_t lo_credits)
{
    Niu *n = niu_start_node("listen", NIU_NODE, props);

    niu_setup(n);
    link_handshake(n, hi_credits, lo_credits);
    return n;
}

static Niu *niu_start_linked(uint16_t hi_credits, uint16_t lo_credits)
{
    return niu_start_linked_props("", hi_credits, lo_credits);
}

static void niu_stop(Niu *n)
{
    link_close(n);
    qpci_free_pc(n->bus);
    g_free(n->dev);
    qtest_quit(n->qts);
    if (n->listen_fd >= 0) {
        close(n->listen_fd);
    }
    if (n->sock_path) {
        g_unlink(n->sock_path);
        g_rmdir(n->dir);
    }
    g_free(n->sock_path);
    g_free(n->dir);
    g_free(n);
}

/* Check a receive slot byte for byte and release it (seed 002 §3.2.2). */
static void guest_expect_rx(Niu *n, unsigned q, unsigned src, unsigned type,
                            uint32_t cmd0, uint32_t cmd1,
                            const uint32_t *payload, unsigned len)
{
    uint64_t slot = rx_tail_slot(n, q);
    uint32_t want[ARCTIC_SLOT_SIZE / 4], got[ARCTIC_SLOT_SIZE / 4];
    unsigned i;

    /* The slot was filled with a marker, so any stray write shows. */
    for (i = 0; i < ARRAY_SIZE(want); i++) {
        want[i] = cpu_to_le32(0xdddddddd);
    }
    want[0] = cpu_to_le32(rx_tail_header(n, q, mpi_header(src, type, len)));
    want[1] = cpu_to_le32(cmd0);
    want[2] = cpu_to_le32(cmd1);
    for (i = 0; i < len; i++) {
        want[4 + i] = cpu_to_le32(payload[i]);
    }
    qtest_memread(n->qts, slot, got, sizeof(got));
    g_assert_cmpmem(got, sizeof(got), want, sizeof(want));
    /* Release: step 5, then refill the marker for the next lap. */
    qtest_memset(n->qts, slot, 0xdd, ARCTIC_SLOT_SIZE);
    qtest_writel(n->qts, slot, 0);
    rx_tail_advance(n, q);
}

static void mark_rx_slots(Niu *n)
{
    unsigned q, i;

    for (q = 0; q < 2; q++) {
        for (i = 0; i < ARCTIC_N; i++) {
            qtest_memset(n->qts, rx_slot_addr(q, i), 0xdd, ARCTIC_SLOT_SIZE);
            qtest_writel(n->qts, rx_slot_addr(q, i), 0);
        }
    }
}

/* ------------------------------------------------------------------------
 * Register file
 */

static void test_identity_and_reset_values(void)
{
    Niu *n = niu_start(false);
    uint32_t caps = reg_r(n, A_NIU_CAPS);
    unsigned ep;

    g_assert_cmphex(qpci_config_readw(n->dev, PCI_VENDOR_ID), ==,
                    ARCTIC_NIU_PCI_VENDOR_ID);
    g_assert_cmphex(qpci_config_readw(n->dev, PCI_DEVICE_ID), ==,
                    ARCTIC_NIU_PCI_DEVICE_ID);
    g_assert_cmphex(reg_r(n, A_NIU_ID), ==, ARCTIC_NIU_ID_VALUE);
    g_assert_cmpint(FIELD_EX32(reg_r(n, A_NIU_VERSION), NIU_VERSION, MAJOR),
                    ==, ARCTIC_NIU_VERSION_MAJOR);
    g_assert_cmpint(FIELD_EX32(caps, NIU_CAPS, ENDPOINTS), ==,
                    ARCTIC_ENDPOINTS);
    g_assert_cmpint(FIELD_EX32(caps, NIU_CAPS, LOG2_N), ==, ARCTIC_LOG2_N);
    g_assert_cmpint(FIELD_EX32(caps, NIU_CAPS, LINES), ==, 16);
    g_assert_cmpint(FIELD_EX32(caps, NIU_CAPS, HI_LINES), ==, 4);
    g_assert_cmpint(reg_r(n, A_NIU_NODE_ID), ==, NIU_NODE);
    g_assert_cmpint(reg_r(n, A_NIU_NUM_NODES), ==, 0);
    g_assert_cmpint(reg_r(n, A_NIU_LINK_STATUS), ==, 0);
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, 0);
    g_assert_cmpint(reg_r(n, A_NIU_RX_CTRL), ==, 0);
    g_assert_cmpint(reg_r(n, A_NIU_VMASK), ==, 0);
    g_assert_cmpint(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    for (ep = 0; ep < ARCTIC_ENDPOINTS; ep++) {
        g_assert_cmpint(ep_r(n, ep, A_EP_TX_QBASE_LO), ==, 0);
        g_assert_cmpint(ep_r(n, ep, A_EP_HI_RX_HD), ==, 0);
    }
    for (unsigned c = 0; c < ARCTIC_NUM_COUNTERS; c++) {
        g_assert_cmpint(counter(n, c), ==, 0);
    }
    niu_stop(n);
}

static void test_register_semantics(void)
{
    Niu *n = niu_start(false);

    /* Scratch reads back what was written. */
    reg_w(n, A_NIU_SCRATCH, 0xdeadbeef);
    g_assert_cmphex(reg_r(n, A_NIU_SCRATCH), ==, 0xdeadbeef);

    /* Read-only registers refuse writes and say which one. */
    reg_w(n, A_NIU_ID, 0);
    g_assert_cmphex(reg_r(n, A_NIU_ID), ==, ARCTIC_NIU_ID_VALUE);
    g_assert_cmpint(FIELD_EX32(reg_r(n, A_NIU_ERROR_INFO), NIU_ERROR_INFO,
                               CAUSE), ==, ARCTIC_ERR_RO_WRITE);
    g_assert_cmphex(FIELD_EX32(reg_r(n, A_NIU_ERROR_INFO), NIU_ERROR_INFO,
                               DETAIL), ==, A_NIU_ID);
    expect_errors(n, 1u << ARCTIC_ERR_RO_WRITE);
    reg_w(n, ARCTIC_COUNTER_OFFSET(ARCTIC_CNT_RETRANSMITS), 7);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RETRANSMITS), ==, 0);
    expect_errors(n, 1u << ARCTIC_ERR_RO_WRITE);

    /* Nothing lives at an unassigned offset. */
    g_assert_cmpint(reg_r(n, 0x0f0), ==, 0);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_REGISTER);
    reg_w(n, 0x3ffc, 1);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_REGISTER);

    /* Queue bases keep their alignment (seed 002 §4.2). */
    ep_w(n, 0, A_EP_TX_QBASE_LO, TX_BASE + ARCTIC_TX_REGION_ALIGN / 2);
    g_assert_cmphex(ep_r(n, 0, A_EP_TX_QBASE_LO), ==, 0);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_ALIGN);
    ep_w(n, 0, A_EP_TX_QBASE_LO, TX_BASE);
    ep_w(n, 0, A_EP_TX_QBASE_HI, 0x1);
    g_assert_cmphex(ep_r(n, 0, A_EP_TX_QBASE_LO), ==, TX_BASE);
    g_assert_cmphex(ep_r(n, 0, A_EP_TX_QBASE_HI), ==, 0x1);
    ep_w(n, 0, A_EP_TX_QBASE_HI, 0);
    ep_w(n, 3, A_EP_RX_QBASE_LO, RX_BASE + ARCTIC_RX_REGION_ALIGN / 2);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_ALIGN);
    ep_w(n, 3, A_EP_RX_QBASE_LO, RX_BASE + ARCTIC_RX_REGION_ALIGN);
    g_assert_cmphex(ep_r(n, 3, A_EP_RX_QBASE_LO), ==,
                    RX_BASE + ARCTIC_RX_REGION_ALIGN);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);

    /* Indices: only 0..N-1. */
    ep_w(n, 0, A_EP_LO_TX_TL, ARCTIC_N);
    g_assert_cmpint(ep_r(n, 0, A_EP_LO_TX_TL), ==, 0);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_INDEX);
    ep_w(n, 0, A_EP_LO_TX_TL, ARCTIC_N - 1);
    ep_w(n, 0, A_EP_HI_RX_HD, 17);
    g_assert_cmpint(ep_r(n, 0, A_EP_LO_TX_TL), ==, ARCTIC_N - 1);
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_RX_HD), ==, 17);
    /* An Rx head carries its lap bit (INDEX 0..N-1, LAP), nothing more. */
    ep_w(n, 0, A_EP_HI_RX_HD, R_EP_RX_HD_LAP_MASK | 3);
    g_assert_cmphex(ep_r(n, 0, A_EP_HI_RX_HD), ==, R_EP_RX_HD_LAP_MASK | 3);
    ep_w(n, 0, A_EP_HI_RX_HD, R_EP_RX_HD_LAP_MASK << 1);
    g_assert_cmphex(ep_r(n, 0, A_EP_HI_RX_HD), ==, R_EP_RX_HD_LAP_MASK | 3);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_INDEX);
    ep_w(n, 0, A_EP_HI_RX_HD, 17);

    /* DMA window: 4 MiB aligned bases, power-of-two mask >= 4 MiB - 1. */
    ep_w(n, 0, A_EP_DMA_BASE_PHY_LO, 0x00400000);
    ep_w(n, 0, A_EP_DMA_BASE_VIR_LO, 0x00801000);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_ALIGN);
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_LO, 0x002fffff);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_ALIGN);
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_LO, 0x005fffff);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_ALIGN);
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_LO, 0x00ffffff);
    g_assert_cmphex(ep_r(n, 0, A_EP_DMA_BASE_PHY_LO), ==, 0x00400000);
    g_assert_cmphex(ep_r(n, 0, A_EP_DMA_BASE_VIR_LO), ==, 0);
    g_assert_cmphex(ep_r(n, 0, A_EP_DMA_RANGE_MASK_LO), ==, 0x00ffffff);

    /* A job tag is 16 bits: wider values are refused, not cut. */
    ep_w(n, 2, A_EP_JOB, 0x10001);
    g_assert_cmpint(ep_r(n, 2, A_EP_JOB), ==, 0);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    ep_w(n, 2, A_EP_JOB, 0xbeef);
    g_assert_cmphex(ep_r(n, 2, A_EP_JOB), ==, 0xbeef);

    /* VMASK is three bits. */
    reg_w(n, A_NIU_VMASK, 8);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    reg_w(n, A_NIU_VMASK, 3);
    g_assert_cmpint(reg_r(n, A_NIU_VMASK), ==, 3);

    /* Reserved control bits are refused. */
    reg_w(n, A_NIU_TX_CTRL, 0x4 | R_NIU_CTRL_ENABLE_MASK);
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, 0);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);

    /* While on, Tx state is frozen (seed 002 §4.1.2); Rx state is not. */
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, R_NIU_CTRL_ENABLE_MASK);
    ep_w(n, 0, A_EP_HI_TX_TL, 5);
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_TX_TL), ==, 0);
    expect_errors(n, 1u << ARCTIC_ERR_BUSY);
    reg_w(n, ARCTIC_ROUTE_OFFSET(0, 2), 0x1234);
    g_assert_cmphex(reg_r(n, ARCTIC_ROUTE_OFFSET(0, 2)), ==, 0);
    expect_errors(n, 1u << ARCTIC_ERR_BUSY);
    ep_w(n, 0, A_EP_LO_RX_HD, 9);
    g_assert_cmpint(ep_r(n, 0, A_EP_LO_RX_HD), ==, 9);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    ep_w(n, 0, A_EP_LO_RX_HD, 10);
    g_assert_cmpint(ep_r(n, 0, A_EP_LO_RX_HD), ==, 9);
    expect_errors(n, 1u << ARCTIC_ERR_BUSY);
    ep_w(n, 6, A_EP_HI_RX_HD, 1);       /* the error names endpoint 6 */
    g_assert_cmpint(FIELD_EX32(reg_r(n, A_NIU_ERROR_INFO), NIU_ERROR_INFO,
                               ENDPOINT), ==, 6);
    expect_errors(n, 1u << ARCTIC_ERR_BUSY);
    /* Nothing in flight: OFF reads back at once. */
    reg_w(n, A_NIU_TX_CTRL, 0);
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, 0);
    reg_w(n, ARCTIC_ROUTE_OFFSET(1, 255), 0xabcd1234);
    g_assert_cmphex(reg_r(n, ARCTIC_ROUTE_OFFSET(1, 255)), ==, 0xabcd1234);

    /* Reset through RxCtrl: everything back to power-on values. */
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_RESET_MASK);
    g_assert_cmpint(reg_r(n, A_NIU_RX_CTRL), ==, 0);
    g_assert_cmpint(reg_r(n, A_NIU_SCRATCH), ==, 0);
    g_assert_cmpint(reg_r(n, A_NIU_VMASK), ==, 0);
    g_assert_cmphex(ep_r(n, 0, A_EP_TX_QBASE_LO), ==, 0);
    g_assert_cmpint(ep_r(n, 0, A_EP_LO_RX_HD), ==, 0);
    g_assert_cmphex(reg_r(n, ARCTIC_ROUTE_OFFSET(1, 255)), ==, 0);
    niu_stop(n);
}

/* Run a test DMA command and wait for DONE. */
static uint32_t test_dma_run(Niu *n, uint32_t cmd)
{
    uint32_t status = 0;
    int i;

    reg_w(n, A_NIU_TEST_DMA_CTRL, cmd);
    for (i = 0; i < WAIT_MS; i++) {
        status = reg_r(n, A_NIU_TEST_DMA_STATUS);
        if (status & R_NIU_TEST_DMA_STATUS_DONE_MASK) {
            break;
        }
        g_usleep(1000);
    }
    return status;
}

static void test_dma_self_test(void)
{
    Niu *n = niu_start(false);
    uint32_t words[64];
    unsigned i;

    reg_w(n, A_NIU_TEST_DMA_ADDR_LO, (uint32_t)SCRATCH_MEM);
    reg_w(n, A_NIU_TEST_DMA_ADDR_HI, SCRATCH_MEM >> 32);
    reg_w(n, A_NIU_TEST_DMA_SIZE, sizeof(words));
    reg_w(n, A_NIU_TEST_DMA_SEED, 0x1234);
    g_assert_cmphex(test_dma_run(n, ARCTIC_TEST_DMA_FILL), ==,
                    R_NIU_TEST_DMA_STATUS_DONE_MASK);
    qtest_memread(n->qts, SCRATCH_MEM, words, sizeof(words));
    for (i = 0; i < ARRAY_SIZE(words); i++) {
        g_assert_cmphex(le32_to_cpu(words[i]), ==,
                        arctic_test_pattern(0x1234, i));
    }
    g_assert_cmphex(test_dma_run(n, ARCTIC_TEST_DMA_CHECK), ==,
                    R_NIU_TEST_DMA_STATUS_DONE_MASK);
    qtest_writel(n->qts, SCRATCH_MEM + 4 * 40, 0);
    g_assert_cmphex(test_dma_run(n, ARCTIC_TEST_DMA_CHECK), ==,
                    R_NIU_TEST_DMA_STATUS_DONE_MASK |
                    R_NIU_TEST_DMA_STATUS_MISMATCH_MASK);
    reg_w(n, A_NIU_TEST_DMA_SIZE, 6);
    g_assert_cmphex(test_dma_run(n, ARCTIC_TEST_DMA_FILL), ==,
                    R_NIU_TEST_DMA_STATUS_DONE_MASK |
                    R_NIU_TEST_DMA_STATUS_BAD_ARGS_MASK);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    /* 64 KiB from 4 KiB below 2^64 would wrap on to address 0: refused
     * before a byte moves (the first 64 KiB of RAM keep their words). */
    for (i = 0; i < ARRAY_SIZE(words); i++) {
        words[i] = cpu_to_le32(0xfeed0000 + i);
    }
    qtest_memwrite(n->qts, 0, words, sizeof(words));
    qtest_memwrite(n->qts, 0xf000, words, sizeof(words));
    reg_w(n, A_NIU_TEST_DMA_ADDR_LO, (uint32_t)(UINT64_MAX - 0xfff));
    reg_w(n, A_NIU_TEST_DMA_ADDR_HI, UINT32_MAX);
    reg_w(n, A_NIU_TEST_DMA_SIZE, ARCTIC_TEST_DMA_MAX_SIZE);
    g_assert_cmphex(test_dma_run(n, ARCTIC_TEST_DMA_FILL), ==,
                    R_NIU_TEST_DMA_STATUS_DONE_MASK |
                    R_NIU_TEST_DMA_STATUS_BAD_ARGS_MASK);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    qtest_memread(n->qts, 0, words, sizeof(words));
    for (i = 0; i < ARRAY_SIZE(words); i++) {
        g_assert_cmphex(le32_to_cpu(words[i]), ==, 0xfeed0000 + i);
    }
    qtest_memread(n->qts, 0xf000, words, sizeof(words));
    for (i = 0; i < ARRAY_SIZE(words); i++) {
        g_assert_cmphex(le32_to_cpu(words[i]), ==, 0xfeed0000 + i);
    }
    /* The last 4 bytes below 2^64 do not wrap: taken (and fail as DMA
     * to no memory, which is another matter). */
    reg_w(n, A_NIU_TEST_DMA_ADDR_LO, (uint32_t)(UINT64_MAX - 3));
    reg_w(n, A_NIU_TEST_DMA_SIZE, 4);
    g_assert_cmphex(test_dma_run(n, ARCTIC_TEST_DMA_FILL) &
                    R_NIU_TEST_DMA_STATUS_BAD_ARGS_MASK, ==, 0);
    reg_w(n, A_NIU_ERROR_CAUSE, reg_r(n, A_NIU_ERROR_CAUSE));
    /* The user page's doorbell takes any value; reads there are errors. */
    qpci_io_writel(n->dev, n->user, A_USER_DOORBELL, 0xffffffff);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    g_assert_cmpint(qpci_io_readl(n->dev, n->user, A_USER_DOORBELL), ==, 0);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_REGISTER);
    niu_stop(n);
}

/* ------------------------------------------------------------------------
 * Transmit and receive
 */

static void test_tx_all_sizes(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[ARCTIC_MAX_PAYLOAD];
    unsigned q, len, i;

    for (q = ARCTIC_TXQ_HI; q <= ARCTIC_TXQ_LO; q++) {
        uint8_t prio = q == ARCTIC_TXQ_HI ? ARCTIC_PRIORITY_HIGH
                                          : ARCTIC_PRIORITY_LOW;
        uint32_t epoch = 0;

        for (len = 0; len <= ARCTIC_MAX_PAYLOAD; len++) {
            for (i = 0; i < len; i++) {
                payload[i] = pattern(len, i);
            }
            guest_send(n, q, PEER, 0x40 + len, 0xc0000000 | len,
                       0xc1000000 | len, payload, len);
            doorbell(n);
            epoch = expect_data(n, PEER, prio, len, 0x40 + len,
                                0xc0000000 | len, 0xc1000000 | len, payload,
                                len);
            peer_control(n, PEER, ARCTIC_E2E_ACK, prio, epoch, len, 0);
            /* The slot was released by clearing its header. */
            g_assert_cmphex(qtest_readl(n->qts, tx_slot_addr(q, len)), ==, 0);
        }
        g_assert_cmpint(ep_r(n, 0, q == ARCTIC_TXQ_HI ? A_EP_HI_TX_TL
                                                      : A_EP_LO_TX_TL),
                        ==, ARCTIC_MAX_PAYLOAD + 1);
    }
    link_expect_silence(n);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_HI_PACKETS), ==, 21);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_LO_PACKETS), ==, 21);
    g_assert_cmpint(counter(n, ARCTIC_CNT_ACKS_RECEIVED), ==, 42);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RETRANSMITS), ==, 0);
    niu_stop(n);
}

/* A program that only writes slots and valid bits is served by polling. */
static void test_tx_polled_without_doorbell(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[3] = { 1, 2, 3 };
    uint32_t epoch;

    qtest_clock_step(n->qts, 50 * 1000 * 1000);   /* idle: back-off grows */
    guest_send(n, ARCTIC_TXQ_LO, 2, 9, 10, 11, payload, 3);
    link_expect_silence(n);         /* virtual time stands still */
    qtest_clock_step(n->qts, 1000 * 1000);        /* poll-max-ns */
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 9, 10, 11, payload, 3);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0, 0);
    link_expect_silence(n);
    niu_stop(n);
}

/*
 * A doorbell serves the queues itself and leaves the poll interval as it
 * was: a guest that rings will ring again.  (Polling fast after every
 * doorbell woke the main loop every poll-min-ns while a ringing guest
 * talked, taking the core from its vCPU.)  A slot written after the
 * doorbell, without one, still goes out at the next idle poll.
 */
static void test_tx_doorbell_keeps_poll_interval(void)
{
    Niu *n;
    uint32_t v = 1;
    uint32_t epoch;

    n = niu_start_linked_props("poll-max-ns=100000000", 8, 8);   /* 100 ms */
    qtest_clock_step(n->qts, 1000ull * 1000 * 1000);  /* idle: at max */
    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v, 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 1, 0, 0, &v, 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0, 0);
    v = 2;
    guest_send(n, ARCTIC_TXQ_LO, 2, 2, 0, 0, &v, 1);  /* no doorbell */
    qtest_clock_step(n->qts, 1000 * 1000);        /* 500x poll-min-ns */
    link_expect_silence(n);
    qtest_clock_step(n->qts, 100 * 1000 * 1000);  /* poll-max-ns */
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 1, 2, 0, 0, &v, 1);
    niu_stop(n);
}

/* Step virtual time from deadline to deadline until the NIU has taken
 * the slot last written to Tx queue @q. */
static void step_until_taken(Niu *n, unsigned q)
{
    uint64_t slot = tx_slot_addr(q, (n->tx_head[q] + ARCTIC_N - 1) %
                                    ARCTIC_N);
    unsigned i;

    for (i = 0; i < 100 && FIELD_EX32(qtest_readl(n->qts, slot), MPI_HEADER,
                                      VALID); i++) {
        qtest_clock_step_next(n->qts);
    }
    g_assert_false(FIELD_EX32(qtest_readl(n->qts, slot), MPI_HEADER, VALID));
}

/*
 * Work a poll finds on an endpoint that rang since the last poll was the
 * doorbells' to serve (the slot written just before its ring): it does
 * not make polling fast.  Work nobody announced (a seed 002 program that
 * only writes slots) does, as before (/arctic-niu/tx/polled).
 */
static void test_tx_poll_announced_work(void)
{
    Niu *n;
    uint32_t v[3] = { 1, 2, 3 };
    uint32_t epoch;

    /* Polls every 100 ms at most; no retransmission in a 100 ms step. */
    n = niu_start_linked_props("poll-max-ns=100000000,"
                               "retry-timeout-ns=1000000000", 8, 8);
    qtest_clock_step(n->qts, 1000ull * 1000 * 1000);  /* idle: at max */
    guest_send(n, ARCTIC_TXQ_LO, 2, 0, 0, 0, &v[0], 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 0, 0, 0, &v[0], 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0, 0);
    /* Written after the ring, found by the next poll: announced. */
    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v[1], 1);
    step_until_taken(n, ARCTIC_TXQ_LO);
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 1, 1, 0, 0, &v[1], 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 1, 0);
    /* So the poll after it is no faster than before. */
    guest_send(n, ARCTIC_TXQ_LO, 2, 2, 0, 0, &v[2], 1);
    qtest_clock_step(n->qts, 1000 * 1000);        /* 500x poll-min-ns */
    link_expect_silence(n);
    qtest_clock_step(n->qts, 100 * 1000 * 1000);
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 2, 2, 0, 0, &v[2], 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 2, 0);
    link_expect_silence(n);
    niu_stop(n);
}

/* Wait until the slot at the tail of Rx queue @q is valid. */
static void guest_wait_rx(Niu *n, unsigned q)
{
    gint64 deadline = g_get_monotonic_time() + WAIT_MS * 1000;

    while (!FIELD_EX32(qtest_readl(n->qts, rx_tail_slot(n, q)), MPI_HEADER,
                       VALID)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
}

/*
 * ack-delay-ns: the ack of a request waits for the reply and leaves in
 * the same write, just before it; with no reply it goes when the delay
 * runs out; ARCTIC_ACK_EVERY (4) deliveries are acked at once.
 */
static void test_ack_waits_for_reply(void)
{
    const uint8_t hi = ARCTIC_PRIORITY_HIGH;
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t v = 7, epoch;
    size_t size;
    Niu *n;
    unsigned i;

    n = niu_start_linked_props("retry-timeout-ns=8000000000,"
                               "ack-delay-ns=2000000000", 8, 8);
    mark_rx_slots(n);

    size = peer_data(n, wire, PEER, hi, n->peer_epoch, 0, 3, 1, 2, &v, 1);
    link_send_packet(n, wire, size);
    guest_wait_rx(n, ARCTIC_RXQ_HI);
    link_expect_silence(n);             /* 300 ms of the 2 s: no ack yet */
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 1, 2, &v, 1);
    guest_send(n, ARCTIC_TXQ_HI, PEER, 4, 5, 6, &v, 1);
    doorbell(n);
    expect_control(n, PEER, ARCTIC_E2E_ACK, hi, n->peer_epoch, 0, 0);
    epoch = expect_data(n, PEER, hi, 0, 4, 5, 6, &v, 1);
    peer_control(n, PEER, ARCTIC_E2E_ACK, hi, epoch, 0, 0);

    /* No reply: the ack comes when the delay runs out. */
    size = peer_data(n, wire, PEER, hi, n->peer_epoch, 1, 3, 1, 2, &v, 1);
    link_send_packet(n, wire, size);
    guest_wait_rx(n, ARCTIC_RXQ_HI);
    link_expect_silence(n);
    expect_control(n, PEER, ARCTIC_E2E_ACK, hi, n->peer_epoch, 1, 0);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 1, 2, &v, 1);

    /* A burst: acked at once, well before the delay. */
    for (i = 2; i < 2 + 4; i++) {       /* ARCTIC_ACK_EVERY */
        size = peer_data(n, wire, PEER, hi, n->peer_epoch, i, 3, 1, 2, &v, 1);
        link_send_packet(n, wire, size);
    }
    expect_control_within(n, QUIET_MS, PEER, ARCTIC_E2E_ACK, hi,
                          n->peer_epoch, i - 1, 0);
    niu_stop(n);
}

/*
 * x-doorbell-posted: the link thread serves the doorbell (the vCPU only
 * posts it); with a chardev link there is no such thread and the vCPU
 * serves it as always.  Either way the slots go out, in order.
 */
static void test_tx_doorbell_posted(void)
{
    uint32_t v[3] = { 31, 32, 33 };
    uint32_t epoch = 0;
    unsigned i;
    Niu *n;

    n = niu_start_linked_props("x-doorbell-posted=on,poll-max-ns=100000000",
                               8, 8);
    qtest_clock_step(n->qts, 1000ull * 1000 * 1000);  /* polls are rare */
    for (i = 0; i < 3; i++) {
        guest_send(n, ARCTIC_TXQ_HI, 2, 1, i, 0, &v[i], 1);
        doorbell(n);
    }
    for (i = 0; i < 3; i++) {
        epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, i, 1, i, 0, &v[i], 1);
    }
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 2, 0);
    link_expect_silence(n);
    niu_stop(n);
}

static void test_rx_all_sizes(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[ARCTIC_MAX_PAYLOAD];
    unsigned q, len, i;

    mark_rx_slots(n);
    for (q = ARCTIC_RXQ_HI; q <= ARCTIC_RXQ_LO; q++) {
        uint8_t prio = q == ARCTIC_RXQ_HI ? ARCTIC_PRIORITY_HIGH
                                          : ARCTIC_PRIORITY_LOW;

        for (len = 0; len <= ARCTIC_MAX_PAYLOAD; len++) {
            for (i = 0; i < len; i++) {
                payload[i] = pattern(100 + len, i);
            }
            peer_send_acked(n, prio, 0x7f - len, 0xe0000000 | len, len,
                            payload, len);
            guest_expect_rx(n, q, PEER, 0x7f - len, 0xe0000000 | len, len,
                            payload, len);
        }
    }
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_RX_HD), ==, 21);
    g_assert_cmpint(ep_r(n, 0, A_EP_LO_RX_HD), ==, 21);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RX_HI_PACKETS), ==, 21);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RX_LO_PACKETS), ==, 21);
    g_assert_cmpint(counter(n, ARCTIC_CNT_ACKS_SENT), ==, 42);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);
}

/*
 * A driver that hands a full queue of kept messages to the next program
 * sets the head to slot 0 of the next lap: the LAP written with the head
 * is the one the next headers carry, and it flips as INDEX wraps.
 */
static void test_rx_lap_from_head(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[2] = { 0x1a9, 0x2a9 };
    uint32_t m;

    mark_rx_slots(n);
    reg_w(n, A_NIU_RX_CTRL, 0);
    n->rx_tail[ARCTIC_RXQ_LO] = R_EP_RX_HD_LAP_MASK | (ARCTIC_N - 1);
    ep_w(n, 0, A_EP_LO_RX_HD, n->rx_tail[ARCTIC_RXQ_LO]);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    for (m = 0; m < 3; m++) {
        peer_send_acked(n, ARCTIC_PRIORITY_LOW, 9, m, ~m, payload, 2);
        /* slot N-1 with LAP 1, then slots 0 and 1 with LAP 0 */
        guest_expect_rx(n, ARCTIC_RXQ_LO, PEER, 9, m, ~m, payload, 2);
    }
    g_assert_cmphex(ep_r(n, 0, A_EP_LO_RX_HD), ==, 2);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);
}

#define LAPS_MESSAGES (3 * ARCTIC_N + 7)

static void test_wraparound(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[4];
    uint32_t m, epoch;

    mark_rx_slots(n);
    for (m = 0; m < LAPS_MESSAGES; m++) {
        payload[0] = m;
        payload[1] = ~m;
        payload[2] = pattern(m, 2);
        payload[3] = pattern(m, 3);
        guest_send(n, ARCTIC_TXQ_HI, 3, m & 0x7f, m, 0, payload, 4);
        doorbell(n);
        epoch = expect_data(n, 3, ARCTIC_PRIORITY_HIGH, m, m & 0x7f, m, 0,
                            payload, 4);
        peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, m, 0);

        peer_send_acked(n, ARCTIC_PRIORITY_LOW, m & 0x7f, m, ~m, payload, 4);
        guest_expect_rx(n, ARCTIC_RXQ_LO, PEER, m & 0x7f, m, ~m, payload, 4);
    }
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_TX_TL), ==, LAPS_MESSAGES % ARCTIC_N);
    /* Three laps and a bit: the head's LAP, like every header's on the
     * way (guest_expect_rx), has flipped three times. */
    g_assert_cmphex(ep_r(n, 0, A_EP_LO_RX_HD), ==,
                    R_EP_RX_HD_LAP_MASK | LAPS_MESSAGES % ARCTIC_N);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RETRANSMITS), ==, 0);
    niu_stop(n);
}

/* ------------------------------------------------------------------------
 * Ack/retry
 */

static void test_rx_queue_full_nack(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t payload[2] = { 0x11, 0x22 };
    size_t size;

    mark_rx_slots(n);
    /* The consumer has not released HiRx[0] yet: the queue is full. */
    qtest_writel(n->qts, rx_slot_addr(ARCTIC_RXQ_HI, 0),
                 mpi_header(3, 1, 0));
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0,
                     5, 6, 7, payload, 2);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, ARCTIC_NACK_QUEUE_FULL);
    g_assert_cmphex(qtest_readl(n->qts, rx_slot_addr(ARCTIC_RXQ_HI, 0) + 4),
                    ==, 0xdddddddd);
    /* Retried while still full: refused again, nothing written. */
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, ARCTIC_NACK_QUEUE_FULL);
    /* The consumer frees the slot; the retry is delivered once. */
    qtest_memset(n->qts, rx_slot_addr(ARCTIC_RXQ_HI, 0), 0xdd,
                 ARCTIC_SLOT_SIZE);
    qtest_writel(n->qts, rx_slot_addr(ARCTIC_RXQ_HI, 0), 0);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, 0);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 5, 6, 7, payload, 2);
    g_assert_cmpint(counter(n, ARCTIC_CNT_NACKS_SENT), ==, 2);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RX_HI_PACKETS), ==, 1);
    g_assert_cmpint(qtest_readl(n->qts, rx_slot_addr(ARCTIC_RXQ_HI, 1)), ==,
                    0);
    niu_stop(n);
}

/*
 * A receive queue that the guest points at the NIU's own registers: the
 * delivery must not reach them (a remote message would otherwise program
 * the test DMA engine from its payload).  The device's memory re-entrancy
 * guard makes it a DMA error, and the packet is refused.
 */
static void test_rx_queue_on_own_bar_refused(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t payload[ARCTIC_MAX_PAYLOAD] = { 0 };
    uint64_t bar = n->ctrl.addr;
    uint64_t base = bar & ~(uint64_t)(ARCTIC_RX_REGION_ALIGN - 1);
    unsigned q = bar - base < ARCTIC_LO_RX_OFFSET ? ARCTIC_RXQ_HI
                                                   : ARCTIC_RXQ_LO;
    uint8_t prio = q == ARCTIC_RXQ_HI ? ARCTIC_PRIORITY_HIGH
                                      : ARCTIC_PRIORITY_LOW;
    uint32_t idx = (bar - base - (q == ARCTIC_RXQ_HI ? ARCTIC_HI_RX_OFFSET
                                                     : ARCTIC_LO_RX_OFFSET)) /
                   ARCTIC_SLOT_SIZE;
    size_t size;

    g_assert_false(n->ctrl.is_io);
    reg_w(n, A_NIU_RX_CTRL, 0);
    ep_w(n, 0, A_EP_RX_QBASE_LO, (uint32_t)base);
    ep_w(n, 0, A_EP_RX_QBASE_HI, base >> 32);
    ep_w(n, 0, q == ARCTIC_RXQ_HI ? A_EP_HI_RX_HD : A_EP_LO_RX_HD, idx);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    /* Slot idx is the register block: payload word i would land on the
     * register at ARCTIC_SLOT_PAYLOAD + 4 i, and program a FILL of 64
     * bytes at SCRATCH_MEM. */
#define PAYLOAD_AT(reg) payload[((reg) - ARCTIC_SLOT_PAYLOAD) / 4]
    PAYLOAD_AT(A_NIU_TEST_DMA_ADDR_LO) = (uint32_t)SCRATCH_MEM;
    PAYLOAD_AT(A_NIU_TEST_DMA_ADDR_HI) = SCRATCH_MEM >> 32;
    PAYLOAD_AT(A_NIU_TEST_DMA_SIZE) = 64;
    PAYLOAD_AT(A_NIU_TEST_DMA_SEED) = 0x5eed;
    PAYLOAD_AT(A_NIU_TEST_DMA_CTRL) = ARCTIC_TEST_DMA_FILL;
    PAYLOAD_AT(A_NIU_SCRATCH) = 0xbadc0de;
#undef PAYLOAD_AT
    reg_w(n, A_NIU_SCRATCH, 0x600d);
    qtest_memset(n->qts, SCRATCH_MEM, 0xee, 64);
    size = peer_data(n, wire, PEER, prio, n->peer_epoch, 0, 5, 6, 7, payload,
                     ARCTIC_MAX_PAYLOAD);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_NACK, prio, n->peer_epoch, 0,
                   ARCTIC_NACK_RX_ERROR);
    qtest_clock_step(n->qts, 1000000);
    g_assert_cmphex(reg_r(n, A_NIU_SCRATCH), ==, 0x600d);
    g_assert_cmphex(reg_r(n, A_NIU_TEST_DMA_SIZE), ==, 0);
    g_assert_cmphex(reg_r(n, A_NIU_TEST_DMA_STATUS), ==, 0);
    g_assert_cmphex(qtest_readl(n->qts, SCRATCH_MEM), ==, 0xeeeeeeee);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RX_HI_PACKETS) +
                    counter(n, ARCTIC_CNT_RX_LO_PACKETS), ==, 0);
    expect_errors(n, 1u << ARCTIC_ERR_DMA);
    niu_stop(n);
}

static uint32_t user_r(Niu *n, uint64_t reg)
{
    return qpci_io_readl(n->dev, n->user, reg);
}

static void user_w(Niu *n, uint64_t reg, uint32_t v)
{
    qpci_io_writel(n->dev, n->user, reg, v);
}

/*
 * USER_LINK_POLL: with the link thread, a read takes the input in the
 * reader's time, and the thread leaves input to the reader for
 * x-link-busy-poll-ns (60 s here): a packet stays in the socket until
 * the next read, which says it took something and delivers it.  A
 * chardev link and no link read NONE, and a chardev still delivers.
 */
static void test_link_busy_poll(void)
{
    const uint8_t hi = ARCTIC_PRIORITY_HIGH;
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t v = 0xb5b5, val = 0;
    size_t size;
    unsigned i;
    Niu *n;

    n = niu_start(false);
    g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==,
                    R_USER_LINK_POLL_NONE_MASK);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);

    n = niu_start_linked_props("x-link-busy-poll-ns=60000000000", 8, 8);
    mark_rx_slots(n);
    if (!link_thread()) {
        g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==,
                        R_USER_LINK_POLL_NONE_MASK);
        size = peer_data(n, wire, PEER, hi, n->peer_epoch, 0, 3, 1, 2, &v, 1);
        link_send_packet(n, wire, size);
        guest_wait_rx(n, ARCTIC_RXQ_HI);
        guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 1, 2, &v, 1);
        niu_stop(n);
        return;
    }
    /* Nothing waits yet; the read starts the busy polling. */
    g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==, 0);
    g_usleep(100 * 1000);               /* the thread stops reading */
    size = peer_data(n, wire, PEER, hi, n->peer_epoch, 0, 3, 1, 2, &v, 1);
    link_send_packet(n, wire, size);
    g_usleep(QUIET_MS * 1000);
    g_assert_false(FIELD_EX32(qtest_readl(n->qts, rx_tail_slot(n,
                                                   ARCTIC_RXQ_HI)),
                              MPI_HEADER, VALID));
    for (i = 0; i < 100 && !FIELD_EX32(val, USER_LINK_POLL, TOOK); i++) {
        val = user_r(n, A_USER_LINK_POLL);  /* the bytes may come in parts */
    }
    g_assert_cmphex(val, ==, R_USER_LINK_POLL_TOOK_MASK);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 1, 2, &v, 1);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RX_HI_PACKETS), ==, 1);
    /*
     * Its ack waited ack-delay-ns for company; with the thread asleep,
     * the next poll after that sends it.
     */
    g_usleep(10 * 1000);
    g_assert_cmphex(user_r(n, A_USER_LINK_POLL), ==, 0);
    expect_control(n, PEER, ARCTIC_E2E_ACK, hi, n->peer_epoch, 0, 0);

    /*
     * Arming the receive interrupt ends the polling: the thread takes
     * the next packet by itself, and the interrupt says so.
     */
    user_w(n, A_USER_IRQ_ARM, R_USER_IRQ_ARM_RX_MASK);
    size = peer_data(n, wire, PEER, hi, n->peer_epoch, 1, 3, 1, 2, &v, 1);
    link_send_packet(n, wire, size);
    guest_wait_rx(n, ARCTIC_RXQ_HI);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 1, 2, &v, 1);
    g_assert_cmphex(reg_r(n, A_NIU_IRQ_STATUS), ==, 1u << R_NIU_IRQ_RX_SHIFT);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);
}

/*
 * RxCtrl OFF is refusal unless raw receive was asked for: nothing is
 * acknowledged that a driver's reset would then throw away.
 */
static void test_rx_off_nack(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    size_t size;

    mark_rx_slots(n);
    reg_w(n, A_NIU_RX_CTRL, 0);
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_LOW, n->peer_epoch, 0,
                     1, 2, 3, NULL, 0);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_LOW,
                   n->peer_epoch, 0, ARCTIC_NACK_RX_OFF);
    g_assert_cmphex(user_r(n, A_USER_RX_STATUS), ==,
                    R_USER_RX_STATUS_HI_EMPTY_MASK |
                    R_USER_RX_STATUS_LO_EMPTY_MASK);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW,
                   n->peer_epoch, 0, 0);
    guest_expect_rx(n, ARCTIC_RXQ_LO, PEER, 1, 2, 3, NULL, 0);
    niu_stop(n);
}

/*
 * RxCtrl OFF with RAW is dMPI mode (seed 002 §4.1.2, §6.1): packets pile
 * up in the receive FIFO, read word by word with route words and CRC
 * (§2.3.1, §3.4.2); once the FIFO is full they are refused and retried.
 */
static void test_raw_receive(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[8][ARCTIC_WIRE_MAX_SIZE];
    size_t size[8];
    uint32_t payload[3] = { 7, 8, 9 };
    unsigned i, w;

    mark_rx_slots(n);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_RAW_MASK);
    g_assert_cmphex(reg_r(n, A_NIU_RX_CTRL), ==, R_NIU_CTRL_RAW_MASK);
    g_assert_cmphex(user_r(n, A_USER_RX_STATUS), ==,
                    R_USER_RX_STATUS_HI_EMPTY_MASK |
                    R_USER_RX_STATUS_LO_EMPTY_MASK);
    for (i = 0; i < 8; i++) {
        size[i] = peer_data(n, wire[i], PEER, ARCTIC_PRIORITY_LOW,
                            n->peer_epoch, i, 5, 0xc0 + i, 0xc1, payload, 3);
        link_send_packet(n, wire[i], size[i]);
        expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW,
                       n->peer_epoch, i, 0);
    }
    g_assert_cmphex(user_r(n, A_USER_RX_STATUS), ==,
                    R_USER_RX_STATUS_HI_EMPTY_MASK);
    /* The FIFO is full: the ninth waits in the network. */
    {
        uint8_t ninth[ARCTIC_WIRE_MAX_SIZE];
        size_t nsize = peer_data(n, ninth, PEER, ARCTIC_PRIORITY_LOW,
                                 n->peer_epoch, 8, 5, 0xc8, 0xc1, payload, 3);

        link_send_packet(n, ninth, nsize);
        expect_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_LOW,
                       n->peer_epoch, 8, ARCTIC_NACK_RX_OFF);
        /* Read the first packet: exactly what the network carried. */
        for (w = 0; w < (size[0] - ARCTIC_WIRE_WORDS_OFFSET) / 4; w++) {
            g_assert_cmphex(user_r(n, A_USER_LO_RX_FIFO), ==,
                            arctic_get_le32(wire[0] + 16 + 4 * w));
        }
        link_send_packet(n, ninth, nsize);
        expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW,
                       n->peer_epoch, 8, 0);
    }
    /* Seed 002 §3.4.2's reader: route words, header, body (and the CRC). */
    for (i = 1; i < 8; i++) {
        uint32_t header;

        g_assert_false(user_r(n, A_USER_RX_STATUS) &
                       R_USER_RX_STATUS_LO_EMPTY_MASK);
        user_r(n, A_USER_LO_RX_FIFO);
        header = user_r(n, A_USER_LO_RX_FIFO);
        g_assert_cmpint(ARCTIC_FIELD_GET(ARCTIC_W1, TYPE, header), ==, 5);
        g_assert_cmpint(ARCTIC_FIELD_GET(ARCTIC_W1, LENGTH, header) - 4, ==,
                        3);
        g_assert_cmphex(user_r(n, A_USER_LO_RX_FIFO), ==, 0xc0 + i);
        g_assert_cmphex(user_r(n, A_USER_LO_RX_FIFO), ==, 0xc1);
        for (w = 0; w < 3; w++) {
            g_assert_cmphex(user_r(n, A_USER_LO_RX_FIFO), ==, payload[w]);
        }
        g_assert_cmphex(user_r(n, A_USER_LO_RX_FIFO), ==,
                        arctic_get_le32(wire[i] + size[i] - 4));
    }
    for (w = 0; w < 8; w++) {
        user_r(n, A_USER_LO_RX_FIFO);       /* the ninth */
    }
    g_assert_cmphex(user_r(n, A_USER_RX_STATUS), ==,
                    R_USER_RX_STATUS_HI_EMPTY_MASK |
                    R_USER_RX_STATUS_LO_EMPTY_MASK);
    g_assert_cmpint(qtest_readl(n->qts, rx_slot_addr(ARCTIC_RXQ_LO, 0)), ==,
                    0);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    user_r(n, A_USER_HI_RX_FIFO);           /* empty */
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    /* Back on: delivery to the queues resumes. */
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    n->peer_seq[ARCTIC_PRIORITY_LOW] = 9;
    peer_send_acked(n, ARCTIC_PRIORITY_LOW, 6, 1, 2, NULL, 0);
    guest_expect_rx(n, ARCTIC_RXQ_LO, PEER, 6, 1, 2, NULL, 0);
    niu_stop(n);
}

/*
 * TxCtrl OFF is dMPI transmit: seed 002 §3.4.1's TransmitHiDirect, and
 * the packet on the network is exactly the one MPI mode builds for the
 * same message, so raw and MPI nodes interoperate.
 */
static void test_raw_transmit(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[4] = { 0x11, 0x22, 0x33, 0x44 };
    uint32_t route = arctic_route_entry(NIU_NODE, 2, true, false);
    uint32_t epoch;
    unsigned i;

    reg_w(n, A_NIU_TX_CTRL, 0);
    g_assert_cmphex(user_r(n, A_USER_TX_STATUS), ==, 0);
    user_w(n, A_USER_HI_TX_FIFO, route & 0xffff);
    user_w(n, A_USER_HI_TX_FIFO, (route & 0xffff0000) | (9 << 6) | (4 + 4));
    user_w(n, A_USER_HI_TX_FIFO, 0xaaaa);
    user_w(n, A_USER_HI_TX_FIFO, 0xbbbb);
    for (i = 0; i < 3; i++) {
        user_w(n, A_USER_HI_TX_FIFO, payload[i]);
    }
    user_w(n, A_USER_HI_TX_FIFO_LAST, payload[3]);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 9, 0xaaaa, 0xbbbb,
                        payload, 4);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 0, 0);
    /* A length field that does not match the words pushed is refused. */
    user_w(n, A_USER_LO_TX_FIFO,
           arctic_route_entry(NIU_NODE, 2, false, false) & 0xffff);
    user_w(n, A_USER_LO_TX_FIFO_LAST, 7);
    link_expect_silence(n);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    /* Route bits climbing 15 levels name node 0xffff, which no network
     * of 256 nodes has: refused, nothing sent, nothing else touched. */
    user_w(n, A_USER_HI_TX_FIFO, 0x8000 | ARCTIC_FIELD_PREP(UPROUTE, HOPS, 15));
    user_w(n, A_USER_HI_TX_FIFO_LAST, 0xffff0000 | 2);
    user_w(n, A_USER_HI_TX_FIFO, 0x8000 | ARCTIC_FIELD_PREP(UPROUTE, HOPS, 8));
    user_w(n, A_USER_HI_TX_FIFO_LAST, 0x01ff0000 | 2);
    link_expect_silence(n);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    /* A packet longer than 31 words is discarded whole, up to its last
     * word; the next one starts clean. */
    for (i = 0; i < 40; i++) {
        user_w(n, A_USER_HI_TX_FIFO, i);
    }
    user_w(n, A_USER_HI_TX_FIFO_LAST, 99);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    user_w(n, A_USER_HI_TX_FIFO, route & 0xffff);
    user_w(n, A_USER_HI_TX_FIFO, (route & 0xffff0000) | (9 << 6) | (0 + 4));
    user_w(n, A_USER_HI_TX_FIFO, 1);
    user_w(n, A_USER_HI_TX_FIFO_LAST, 2);
    expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 1, 9, 1, 2, NULL, 0);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 1, 0);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    /* With the datapath on, the FIFOs refuse (dMPI and MPI do not mix). */
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    user_w(n, A_USER_HI_TX_FIFO, route & 0xffff);
    expect_errors(n, 1u << ARCTIC_ERR_BUSY);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_HI_PACKETS), ==, 2);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_ERRORS), ==, 4);
    niu_stop(n);
}

/* Raw packets that wait for link credit hold nothing else up: later
 * packets are taken, and TxCtrl still reads OFF. */
static void test_raw_transmit_waits_for_credit(void)
{
    Niu *n = niu_start_linked(1, 8);
    uint32_t route = arctic_route_entry(NIU_NODE, 3, true, false);
    uint32_t epoch = 0;
    unsigned k;

    n->hold_credits[ARCTIC_PRIORITY_HIGH] = true;
    reg_w(n, A_NIU_TX_CTRL, 0);
    for (k = 0; k < 3; k++) {
        g_assert_cmphex(user_r(n, A_USER_TX_STATUS), ==, 0);
        user_w(n, A_USER_HI_TX_FIFO, route & 0xffff);
        user_w(n, A_USER_HI_TX_FIFO, (route & 0xffff0000) | (k << 6) | 4);
        user_w(n, A_USER_HI_TX_FIFO, k);
        user_w(n, A_USER_HI_TX_FIFO_LAST, ~k);
    }
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, 0);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    for (k = 0; k < 3; k++) {
        epoch = expect_data(n, 3, ARCTIC_PRIORITY_HIGH, k, k, k, ~k, NULL, 0);
        link_send_credit(n, 1, 0);
    }
    peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 2, 0);
    niu_stop(n);
}

/* The ack was lost: the receiver sees the packet again and must not
 * deliver it twice. */
static void test_rx_duplicate_not_delivered(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t payload[1] = { 42 };
    size_t size;

    mark_rx_slots(n);
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0,
                     3, 4, 5, payload, 1);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, 0);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, 0);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 4, 5, payload, 1);
    g_assert_cmpint(qtest_readl(n->qts, rx_slot_addr(ARCTIC_RXQ_HI, 1)), ==,
                    0);
    g_assert_cmpint(counter(n, ARCTIC_CNT_DUPLICATES), ==, 1);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RX_HI_PACKETS), ==, 1);
    niu_stop(n);
}

/* Reordered and duplicated packets are delivered once, in order. */
static void test_rx_reorder_in_order(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t w[4][ARCTIC_WIRE_MAX_SIZE];
    size_t size[4];
    uint32_t payload[4][1];
    unsigned i;

    mark_rx_slots(n);
    for (i = 0; i < 4; i++) {
        payload[i][0] = 1000 + i;
        size[i] = peer_data(n, w[i], 2, ARCTIC_PRIORITY_LOW, n->peer_epoch, i,
                            i, i, i, payload[i], 1);
    }
    link_send_packet(n, w[0], size[0]);
    expect_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, n->peer_epoch,
                   0, 0);
    /* 2 and 3 overtake 1: refused, pointing at the missing 1. */
    link_send_packet(n, w[2], size[2]);
    expect_control(n, 2, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_LOW, n->peer_epoch,
                   1, ARCTIC_NACK_OUT_OF_ORDER);
    link_send_packet(n, w[3], size[3]);
    expect_control(n, 2, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_LOW, n->peer_epoch,
                   1, ARCTIC_NACK_OUT_OF_ORDER);
    link_send_packet(n, w[1], size[1]);
    expect_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, n->peer_epoch,
                   1, 0);
    link_send_packet(n, w[1], size[1]);     /* a duplicate of 1 */
    expect_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, n->peer_epoch,
                   1, 0);
    link_send_packet(n, w[2], size[2]);
    expect_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, n->peer_epoch,
                   2, 0);
    link_send_packet(n, w[3], size[3]);
    expect_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, n->peer_epoch,
                   3, 0);
    for (i = 0; i < 4; i++) {
        guest_expect_rx(n, ARCTIC_RXQ_LO, 2, i, i, i, payload[i], 1);
    }
    g_assert_cmpint(qtest_readl(n->qts, rx_slot_addr(ARCTIC_RXQ_LO, 4)), ==,
                    0);
    g_assert_cmpint(counter(n, ARCTIC_CNT_DUPLICATES), ==, 1);
    niu_stop(n);
}

/* A stream the receiver holds no state for starts over (RESYNC). */
static void test_rx_unknown_stream_resync(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    size_t size;

    mark_rx_slots(n);
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 5,
                     1, 1, 1, NULL, 0);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, ARCTIC_NACK_RESYNC);
    g_assert_cmpint(qtest_readl(n->qts, rx_slot_addr(ARCTIC_RXQ_HI, 0)), ==,
                    0);
    /* A new session at seq 0 is taken, and an older epoch is not. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0,
                     1, 1, 1, NULL, 0);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, 0);
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch - 1,
                     0, 2, 2, 2, NULL, 0);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch - 1, n->peer_epoch, ARCTIC_NACK_RESYNC);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 1, 1, 1, NULL, 0);
    g_assert_cmpint(qtest_readl(n->qts, rx_slot_addr(ARCTIC_RXQ_HI, 1)), ==,
                    0);
    niu_stop(n);
}

/* The ack is lost: the sender times out, sends again, and stops once
 * acked. */
static void test_tx_timeout_retransmit(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[5] = { 5, 4, 3, 2, 1 };
    uint32_t epoch;

    guest_send(n, ARCTIC_TXQ_HI, 2, 7, 8, 9, payload, 5);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 7, 8, 9, payload, 5);
    g_assert_cmpint(reg_r(n, A_NIU_TX_PENDING), ==, 1);
    link_expect_silence(n);
    qtest_clock_step(n->qts, RETRY_NS - 1000);
    link_expect_silence(n);
    qtest_clock_step(n->qts, 1000);
    g_assert_cmpint(expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 7, 8, 9,
                                payload, 5), ==, epoch);
    /* Second timeout doubles. */
    qtest_clock_step(n->qts, 2 * RETRY_NS);
    expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 7, 8, 9, payload, 5);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 0, 0);
    g_assert_cmpint(reg_r(n, A_NIU_TX_PENDING), ==, 0);
    qtest_clock_step(n->qts, 100 * RETRY_NS);
    link_expect_silence(n);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TIMEOUTS), ==, 2);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RETRANSMITS), ==, 2);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_HI_PACKETS), ==, 1);
    niu_stop(n);
}

/*
 * The guest sends @count one-word messages @payload[i] (type, command0 and
 * command1 i) to @dest from Tx queue @q with one doorbell; each must leave
 * as packet i of the stream.  Returns the stream's epoch.
 */
static uint32_t send_stream(Niu *n, unsigned q, unsigned dest,
                            const uint32_t *payload, unsigned count)
{
    uint8_t prio = q == ARCTIC_TXQ_HI ? ARCTIC_PRIORITY_HIGH
                                      : ARCTIC_PRIORITY_LOW;
    uint32_t epoch = 0;
    unsigned i;

    for (i = 0; i < count; i++) {
        guest_send(n, q, dest, i, i, i, &payload[i], 1);
    }
    doorbell(n);
    for (i = 0; i < count; i++) {
        epoch = expect_data(n, dest, prio, i, i, i, i, &payload[i], 1);
    }
    return epoch;
}

/*
 * A nack sends the stream again from the refused packet, in order: first
 * the refused packet alone after the back-off (the probe), and the rest
 * of the stream, with what the guest queued meanwhile, only once the
 * probe is acked.  A probe refused again backs off longer.
 */
static void test_tx_nack_goes_back(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t p[5] = { 10, 11, 12, 13, 14 };
    uint32_t epoch = send_stream(n, ARCTIC_TXQ_LO, 3, p, 4);
    unsigned i;

    peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0, 0);
    peer_control(n, 3, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_LOW, epoch, 1,
                 ARCTIC_NACK_QUEUE_FULL);
    /* The receiver also refused 2 and 3, as out of order behind 1. */
    peer_control(n, 3, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_LOW, epoch, 1,
                 ARCTIC_NACK_OUT_OF_ORDER);
    /* A message the guest sends now waits behind the refused one. */
    guest_send(n, ARCTIC_TXQ_LO, 3, 4, 4, 4, &p[4], 1);
    doorbell(n);
    link_expect_silence(n);
    qtest_clock_step(n->qts, NACK_NS);
    expect_data(n, 3, ARCTIC_PRIORITY_LOW, 1, 1, 1, 1, &p[1], 1);
    link_expect_silence(n);
    /* Refused again: the probe alone again, after twice the back-off. */
    peer_control(n, 3, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_LOW, epoch, 1,
                 ARCTIC_NACK_QUEUE_FULL);
    qtest_clock_step(n->qts, 2 * NACK_NS - 1000);
    link_expect_silence(n);
    qtest_clock_step(n->qts, 1000);
    expect_data(n, 3, ARCTIC_PRIORITY_LOW, 1, 1, 1, 1, &p[1], 1);
    qtest_clock_step(n->qts, RETRY_NS / 2);
    link_expect_silence(n);
    /* Taken: the rest of the stream follows at once, in order. */
    peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 1, 0);
    for (i = 2; i < 5; i++) {
        expect_data(n, 3, ARCTIC_PRIORITY_LOW, i, i, i, i, &p[i], 1);
    }
    /* A stale nack from another epoch changes nothing. */
    peer_control(n, 3, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_LOW, epoch + 7, 1,
                 ARCTIC_NACK_QUEUE_FULL);
    peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 4, 0);
    qtest_clock_step(n->qts, 100 * RETRY_NS);
    link_expect_silence(n);
    g_assert_cmpint(reg_r(n, A_NIU_TX_PENDING), ==, 0);
    g_assert_cmpint(counter(n, ARCTIC_CNT_NACKS_RECEIVED), ==, 4);
    /* 1 twice, 2 and 3 once; 4 went out for the first time. */
    g_assert_cmpint(counter(n, ARCTIC_CNT_RETRANSMITS), ==, 4);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TIMEOUTS), ==, 0);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_LO_PACKETS), ==, 5);
    niu_stop(n);
}

/*
 * The retry timeout counts from the stream's last progress, not from
 * each packet's send: a packet whose ack comes later than the timeout,
 * while earlier ones are acked in between, is not sent again.
 */
static void test_tx_timeout_counts_progress(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t p[2] = { 20, 21 };
    uint32_t epoch = send_stream(n, ARCTIC_TXQ_HI, 2, p, 2);

    qtest_clock_step(n->qts, RETRY_NS * 3 / 4);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 0, 0);
    /* 1.5 timeouts after packet 1 went, 0.75 after the last progress. */
    qtest_clock_step(n->qts, RETRY_NS * 3 / 4);
    link_expect_silence(n);
    /* A whole timeout without progress: packet 1 goes again. */
    qtest_clock_step(n->qts, RETRY_NS / 4);
    expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 1, 1, 1, 1, &p[1], 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 1, 0);
    qtest_clock_step(n->qts, 100 * RETRY_NS);
    link_expect_silence(n);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TIMEOUTS), ==, 1);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RETRANSMITS), ==, 1);
    niu_stop(n);
}

/* The receiver lost its state: the stream starts over in a newer epoch,
 * renumbered from 0, with nothing lost. */
static void test_tx_resync_renumbers(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t p[2][1] = { { 0xaaa }, { 0xbbb } };
    uint32_t epoch, epoch2;

    guest_send(n, ARCTIC_TXQ_HI, PEER, 1, 1, 1, p[0], 1);
    doorbell(n);
    epoch = expect_data(n, PEER, ARCTIC_PRIORITY_HIGH, 0, 1, 1, 1, p[0], 1);
    peer_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 0, 0);
    guest_send(n, ARCTIC_TXQ_HI, PEER, 2, 2, 2, p[1], 1);
    doorbell(n);
    expect_data(n, PEER, ARCTIC_PRIORITY_HIGH, 1, 2, 2, 2, p[1], 1);
    /* The same receiver refusing the epoch it acked: a stale answer. */
    peer_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_HIGH, epoch,
                 epoch + 100, ARCTIC_NACK_RESYNC);
    link_expect_silence(n);
    /* A reset receiver (another incarnation, here one whose low 16 bits,
     * all an answer carried once, are those of the first): start over,
     * renumbered. */
    n->peer_incarnation += 0x10000;
    peer_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_HIGH, epoch,
                 epoch + 100, ARCTIC_NACK_RESYNC);
    epoch2 = expect_data(n, PEER, ARCTIC_PRIORITY_HIGH, 0, 2, 2, 2, p[1], 1);
    g_assert_cmphex(epoch2, ==, epoch + 101);
    peer_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch2, 0, 0);
    /* The next message continues the new epoch. */
    guest_send(n, ARCTIC_TXQ_HI, PEER, 3, 3, 3, p[0], 1);
    doorbell(n);
    g_assert_cmphex(expect_data(n, PEER, ARCTIC_PRIORITY_HIGH, 1, 3, 3, 3,
                                p[0], 1), ==, epoch2);
    peer_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch2, 1, 0);
    qtest_clock_step(n->qts, 100 * RETRY_NS);
    link_expect_silence(n);
    niu_stop(n);
}

/*
 * Packet 1 overtook packet 0, so the receiver (no state yet) asked for a
 * resync, then took packet 0 and acked it; the resync reaches the sender
 * first.  Renumbering would deliver packet 0's message twice: the sender
 * must go back to seq 0 of the same epoch instead.
 */
static void test_tx_resync_before_first_ack(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t p[2][1] = { { 0x100 }, { 0x101 } };
    uint32_t epoch;

    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, p[0], 1);
    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 1, 0, p[1], 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 1, 0, 0, p[0], 1);
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 1, 1, 1, 0, p[1], 1);
    peer_control(n, 2, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_LOW, epoch, 0,
                 ARCTIC_NACK_RESYNC);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0, 0);
    qtest_clock_step(n->qts, NACK_NS);
    /* Same epoch, same numbers: only the unacked packet 1 goes again. */
    g_assert_cmphex(expect_data(n, 2, ARCTIC_PRIORITY_LOW, 1, 1, 1, 0, p[1],
                                1), ==, epoch);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 1, 0);
    qtest_clock_step(n->qts, 100 * RETRY_NS);
    link_expect_silence(n);
    niu_stop(n);
}


/* ------------------------------------------------------------------------
 * Remote DMA (seed 002 §2.2, §6.2.2, §6.3.2) and job tags
 */

#define WIN_PHYS        0x2000000ull    /* 4 MiB aligned, inside 64 MiB */
#define WIN_VIRT        0x40000000ull
#define WIN_MASK        0x3fffffull     /* 4 MiB */
#define REMOTE_TARGET   0x7f0000001800ull

/* Registers that need both datapaths OFF: switch them off and on again. */
static void set_window_and_job(Niu *n, uint64_t phys, uint64_t virt,
                               uint64_t mask, uint32_t job)
{
    reg_w(n, A_NIU_TX_CTRL, 0);
    reg_w(n, A_NIU_RX_CTRL, 0);
    ep_w(n, 0, A_EP_DMA_BASE_PHY_LO, (uint32_t)phys);
    ep_w(n, 0, A_EP_DMA_BASE_PHY_HI, phys >> 32);
    ep_w(n, 0, A_EP_DMA_BASE_VIR_LO, (uint32_t)virt);
    ep_w(n, 0, A_EP_DMA_BASE_VIR_HI, virt >> 32);
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_LO, (uint32_t)mask);
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_HI, mask >> 32);
    ep_w(n, 0, A_EP_JOB, job);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
}

/* Put a DMA request in HiTx or DMATx (seed 002 §3.3, 64-bit addresses). */
static void guest_dma(Niu *n, unsigned q, unsigned dest, unsigned type,
                      uint32_t command, uint64_t target, uint64_t source,
                      const uint32_t *payload, unsigned len)
{
    uint32_t *head = q == ARCTIC_TXQ_HI ? &n->tx_head[ARCTIC_TXQ_HI]
                                        : &n->dma_head;
    uint64_t slot = TX_BASE + (q == ARCTIC_TXQ_HI ? ARCTIC_HI_TX_OFFSET
                                                  : ARCTIC_DMA_TX_OFFSET) +
                    (uint64_t)*head * ARCTIC_SLOT_SIZE;
    unsigned i;

    qtest_writel(n->qts, slot + ARCTIC_DMA_SLOT_COMMAND, command);
    qtest_writeq(n->qts, slot + ARCTIC_DMA_SLOT_TARGET, target);
    qtest_writeq(n->qts, slot + ARCTIC_DMA_SLOT_SOURCE, source);
    for (i = 0; i < len; i++) {
        qtest_writel(n->qts, slot + ARCTIC_DMA_SLOT_PAYLOAD + 4 * i,
                     payload[i]);
    }
    qtest_writel(n->qts, slot,
                 FIELD_DP32(mpi_header(dest, type, len), MPI_HEADER, MODE,
                            ARCTIC_MODE_DMA));
    *head = (*head + 1) % ARCTIC_N;
}

/* Expect the 32 data packets and the notification of one DMA request,
 * acking as they come so the engine never runs out of lines. */
static void expect_dma(Niu *n, unsigned dest, uint32_t first_seq,
                       unsigned type, uint32_t command, uint64_t target,
                       const uint32_t *block, const uint32_t *payload,
                       unsigned len)
{
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE], want[ARCTIC_WIRE_MAX_SIZE];
    uint32_t route = arctic_route_entry(NIU_NODE, dest, true, false);
    unsigned p;

    for (p = 0; p < ARCTIC_DMA_PACKETS; p++) {
        uint64_t t = target + 64 * p;
        size_t size = link_expect_packet(n, wire), want_size;
        struct arctic_e2e_header got, h = {
            .kind = ARCTIC_E2E_DATA,
            .flags = FIELD_DP32(0, ARCTIC_E2E_FLAGS, PRIORITY, 1),
            .src_node = NIU_NODE,
            .dst_node = dest,
            .seq = first_seq + p,
        };

        arctic_e2e_decode(wire, &got);
        h.epoch = got.epoch;
        h.job = got.job;
        want_size = build_wire(want, &h, route,
                               ARCTIC_FIELD_PREP(ARCTIC_W1, TYPE, type) |
                               ARCTIC_FIELD_PREP(ARCTIC_W1, MODE, 1),
                               (uint32_t)t, t >> 32, block + 16 * p,
                               ARCTIC_DMA_DATA_WORDS);
        g_assert_cmpint(size, ==, want_size);
        g_assert_cmpmem(wire, size, want, want_size);
        peer_control(n, dest, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, got.epoch,
                     got.seq, 0);
    }
    /* The notification: command, target's low word, payload; mode 0,
     * marked as a notification in the e2e flags. */
    peer_control(n, dest, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                 expect_data_flags(n, dest, ARCTIC_PRIORITY_HIGH,
                                   R_ARCTIC_E2E_FLAGS_NOTIFY_MASK,
                                   first_seq + ARCTIC_DMA_PACKETS, type,
                                   command, (uint32_t)target, payload, len),
                 first_seq + ARCTIC_DMA_PACKETS, 0);
}

static void fill_block(Niu *n, uint64_t phys, uint32_t *block, uint32_t seed)
{
    unsigned i;

    for (i = 0; i < ARCTIC_D / 4; i++) {
        block[i] = seed * 0x10000 + i;
        qtest_writel(n->qts, phys + 4 * i, block[i]);
    }
}

static void test_dma_send(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t block[ARCTIC_D / 4], block2[ARCTIC_D / 4];
    uint32_t payload[2] = { 0xfeed, 0xbeef };

    set_window_and_job(n, WIN_PHYS, WIN_VIRT, WIN_MASK, 0);
    fill_block(n, WIN_PHYS + 0x800, block, 1);
    fill_block(n, WIN_PHYS + WIN_MASK + 1 - ARCTIC_D, block2, 2);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 5, 0xc0de, REMOTE_TARGET,
              WIN_VIRT + 0x800, payload, 2);
    /* The last block of the window is inside it too. */
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 6, 0xc0df, REMOTE_TARGET + ARCTIC_D,
              WIN_VIRT + WIN_MASK + 1 - ARCTIC_D, NULL, 0);
    doorbell(n);
    expect_dma(n, 2, 0, 5, 0xc0de, REMOTE_TARGET, block, payload, 2);
    expect_dma(n, 2, ARCTIC_DMA_PACKETS + 1, 6, 0xc0df,
               REMOTE_TARGET + ARCTIC_D, block2, NULL, 0);
    link_expect_silence(n);
    g_assert_cmphex(qtest_readl(n->qts, TX_BASE + ARCTIC_DMA_TX_OFFSET), ==,
                    0);
    g_assert_cmpint(ep_r(n, 0, A_EP_DMA_TX_TL), ==, 2);
    g_assert_cmpint(counter(n, ARCTIC_CNT_DMA_REQUESTS), ==, 2);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);
}

/*
 * DMA data may take all the lines but max(8, LINES / 8): with 64 lines,
 * 56 data packets of two unacked transfers go out (and the first one's
 * notification), then nothing, and an MPI message still finds a line
 * (seed 002 §2.2.2).
 */
static void test_dma_share_leaves_mpi_lines(void)
{
    uint32_t block[ARCTIC_D / 4], v = 77;
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint16_t type;
    uint32_t len;
    unsigned data = 0, other = 0;
    Niu *n;

    n = niu_start_linked_props("lines=64", 128, 8);
    set_window_and_job(n, WIN_PHYS, WIN_VIRT, WIN_MASK, 0);
    fill_block(n, WIN_PHYS, block, 1);
    fill_block(n, WIN_PHYS + ARCTIC_D, block, 2);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 5, 1, REMOTE_TARGET, WIN_VIRT, NULL, 0);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 5, 2, REMOTE_TARGET + ARCTIC_D,
              WIN_VIRT + ARCTIC_D, NULL, 0);
    doorbell(n);
    while (link_read(n, &type, wire, &len, QUIET_MS) == 1) {
        if (type != ARCTIC_FRAME_PACKET) {
            continue;
        }
        if (ARCTIC_FIELD_GET(ARCTIC_W1, MODE, arctic_get_le32(
                wire + ARCTIC_WIRE_WORDS_OFFSET + 4)) == ARCTIC_MODE_DMA) {
            data++;
        } else {
            other++;
        }
    }
    /* The first transfer whole with its notification, 24 of the second. */
    g_assert_cmpint(data, ==, 64 - 8);
    g_assert_cmpint(other, ==, 1);
    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 3, 4, &v, 1);
    doorbell(n);
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 1, 3, 4, &v, 1);
    niu_stop(n);
}

/* A DMA request in HiTx holds back the HiTx messages behind it, while
 * LoTx traffic goes on (seed 002 §2.2.2). */
static void test_dma_in_hitx_blocks_hitx(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t block[ARCTIC_D / 4];
    uint32_t v = 0x55, w = 0x66;
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header h;
    unsigned i;

    set_window_and_job(n, WIN_PHYS, WIN_VIRT, WIN_MASK, 0);
    fill_block(n, WIN_PHYS, block, 3);
    n->hold_credits[ARCTIC_PRIORITY_HIGH] = true;
    guest_dma(n, ARCTIC_TXQ_HI, 3, 1, 0xd0, REMOTE_TARGET, WIN_VIRT, NULL, 0);
    guest_send(n, ARCTIC_TXQ_HI, 3, 2, 0, 0, &v, 1);
    doorbell(n);
    /* The switch takes 8 high packets and stalls: the engine stops. */
    for (i = 0; i < 8; i++) {
        link_expect_packet(n, wire);
        arctic_e2e_decode(wire, &h);
        g_assert_cmpint(h.seq, ==, i);
    }
    guest_send(n, ARCTIC_TXQ_LO, 3, 4, 0, 0, &w, 1);
    doorbell(n);
    expect_data(n, 3, ARCTIC_PRIORITY_LOW, 0, 4, 0, 0, &w, 1);
    g_assert_cmphex(qtest_readl(n->qts, tx_slot_addr(ARCTIC_TXQ_HI, 0)), !=,
                    0);
    n->hold_credits[ARCTIC_PRIORITY_HIGH] = false;
    link_send_credit(n, 8, 0);
    peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, h.epoch, 7, 0);
    for (i = 8; i < ARCTIC_DMA_PACKETS; i++) {
        link_expect_packet(n, wire);
        arctic_e2e_decode(wire, &h);
        g_assert_cmpint(h.seq, ==, i);
        g_assert_cmpint(ARCTIC_FIELD_GET(ARCTIC_W1, MODE,
                            arctic_get_le32(wire + 20)), ==, 1);
        peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, h.epoch, i,
                     0);
    }
    /* Notification, then at last the HiTx message behind the request. */
    expect_data_flags(n, 3, ARCTIC_PRIORITY_HIGH,
                      R_ARCTIC_E2E_FLAGS_NOTIFY_MASK, ARCTIC_DMA_PACKETS, 1,
                      0xd0, (uint32_t)REMOTE_TARGET, NULL, 0);
    expect_data(n, 3, ARCTIC_PRIORITY_HIGH, ARCTIC_DMA_PACKETS + 1, 2, 0, 0,
                &v, 1);
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_TX_TL), ==, 2);
    niu_stop(n);
}

/* A context switch that moves the DMATx tail restarts the request there
 * from its first packet; the state view shows the progress. */
static void test_dma_progress_and_context_switch(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t block[ARCTIC_D / 4];
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    QDict *rsp, *ep0;
    unsigned i;

    set_window_and_job(n, WIN_PHYS, WIN_VIRT, WIN_MASK, 0);
    fill_block(n, WIN_PHYS, block, 4);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 1, 0xe0, REMOTE_TARGET, WIN_VIRT, NULL, 0);
    doorbell(n);
    /* Unacked, the engine stops at its share of the lines. */
    for (i = 0; i < 8; i++) {
        link_expect_packet(n, wire);
    }
    link_expect_silence(n);
    reg_w(n, A_NIU_TX_CTRL, 0);
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, 0);
    ep0 = niu_state_endpoint0(n, &rsp);
    g_assert_cmpint(qdict_get_int(ep0, "dma-tx-dma-packets-sent"), ==, 8);
    qobject_unref(rsp);
    ep_w(n, 0, A_EP_DMA_TX_TL, 0);
    ep0 = niu_state_endpoint0(n, &rsp);
    g_assert_cmpint(qdict_get_int(ep0, "dma-tx-dma-packets-sent"), ==, 0);
    qobject_unref(rsp);
    niu_stop(n);
}

/* Receive: data lands in the window, the notification in HiRx. */
/*
 * The peer sends a message on its high stream with e2e @flags beyond the
 * priority; the NIU acks it, and its HiRx slot must hold it with MODE
 * @mode (checked, then put back to 0 as the program would see it) and all
 * else as sent.
 */
static void peer_flagged_to_hirx(Niu *n, uint8_t flags, unsigned type,
                                 uint32_t cmd0, uint32_t cmd1,
                                 const uint32_t *payload, int len,
                                 unsigned mode)
{
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header h = {
        .kind = ARCTIC_E2E_DATA,
        .flags = FIELD_DP32(flags, ARCTIC_E2E_FLAGS, PRIORITY,
                            ARCTIC_PRIORITY_HIGH),
        .src_node = PEER, .dst_node = NIU_NODE,
        .epoch = n->peer_epoch,
        .seq = n->peer_seq[ARCTIC_PRIORITY_HIGH]++,
    };
    size_t size = build_wire(wire, &h,
                             arctic_route_entry(PEER, NIU_NODE, true, false),
                             ARCTIC_FIELD_PREP(ARCTIC_W1, TYPE, type), cmd0,
                             cmd1, payload, len);
    uint64_t slot = rx_tail_slot(n, ARCTIC_RXQ_HI);

    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, h.seq, 0);
    g_assert_cmpuint(FIELD_EX32(qtest_readl(n->qts, slot), MPI_HEADER, MODE),
                     ==, mode);
    qtest_writel(n->qts, slot,
                 FIELD_DP32(qtest_readl(n->qts, slot), MPI_HEADER, MODE, 0));
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, type, cmd0, cmd1, payload, len);
}

static void test_dma_receive(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t block[ARCTIC_D / 4], got[ARCTIC_D / 4], payload[1] = { 9 };
    uint64_t target = WIN_VIRT + 0x10000;
    uint32_t before;
    unsigned p, i;

    set_window_and_job(n, WIN_PHYS, WIN_VIRT, WIN_MASK, 0);
    mark_rx_slots(n);
    for (i = 0; i < ARRAY_SIZE(block); i++) {
        block[i] = 0xd3000000 | i;
    }
    qtest_memset(n->qts, WIN_PHYS + 0x10000 - 64, 0xee, ARCTIC_D + 128);
    for (p = 0; p < ARCTIC_DMA_PACKETS; p++) {
        uint64_t t = target + 64 * p;
        struct arctic_e2e_header h = {
            .kind = ARCTIC_E2E_DATA,
            .flags = FIELD_DP32(0, ARCTIC_E2E_FLAGS, PRIORITY, 1),
            .src_node = PEER, .dst_node = NIU_NODE,
            .epoch = n->peer_epoch, .seq = n->peer_seq[1]++,
        };
        size_t size = build_wire(wire, &h,
                                 arctic_route_entry(PEER, NIU_NODE, true,
                                                    false),
                                 ARCTIC_FIELD_PREP(ARCTIC_W1, MODE, 1),
                                 (uint32_t)t, t >> 32, block + 16 * p,
                                 ARCTIC_DMA_DATA_WORDS);
        link_send_packet(n, wire, size);
        expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                       n->peer_epoch, h.seq, 0);
    }
    peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 3, 0xc0de, (uint32_t)target,
                    payload, 1);
    qtest_memread(n->qts, WIN_PHYS + 0x10000, got, sizeof(got));
    for (i = 0; i < ARRAY_SIZE(block); i++) {
        g_assert_cmphex(le32_to_cpu(got[i]), ==, block[i]);
    }
    /* Not a byte before or after the block. */
    g_assert_cmphex(qtest_readl(n->qts, WIN_PHYS + 0x10000 - 4), ==,
                    0xeeeeeeee);
    g_assert_cmphex(qtest_readl(n->qts, WIN_PHYS + 0x10000 + ARCTIC_D), ==,
                    0xeeeeeeee);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 0xc0de, (uint32_t)target,
                    payload, 1);
    g_assert_cmpint(counter(n, ARCTIC_CNT_DMA_RX_PACKETS), ==, 32);

    /* Outside the window (one byte past its end): dropped, acked, and
     * nothing written anywhere. */
    before = qtest_readl(n->qts, WIN_PHYS + WIN_MASK + 1);
    {
        uint64_t t = WIN_VIRT + WIN_MASK + 1;
        struct arctic_e2e_header h = {
            .kind = ARCTIC_E2E_DATA,
            .flags = FIELD_DP32(0, ARCTIC_E2E_FLAGS, PRIORITY, 1),
            .src_node = PEER, .dst_node = NIU_NODE,
            .epoch = n->peer_epoch, .seq = n->peer_seq[1]++,
        };
        size_t size = build_wire(wire, &h,
                                 arctic_route_entry(PEER, NIU_NODE, true,
                                                    false),
                                 ARCTIC_FIELD_PREP(ARCTIC_W1, MODE, 1),
                                 (uint32_t)t, t >> 32, block,
                                 ARCTIC_DMA_DATA_WORDS);
        link_send_packet(n, wire, size);
        expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                       n->peer_epoch, h.seq, 0);
    }
    g_assert_cmphex(qtest_readl(n->qts, WIN_PHYS + WIN_MASK + 1), ==, before);
    g_assert_cmpint(counter(n, ARCTIC_CNT_DMA_RX_PACKETS), ==, 32);
    expect_errors(n, 1u << ARCTIC_ERR_DMA_RANGE);

    /*
     * That transfer's notification says it failed: delivered with MODE 1,
     * all else as sent.  The next transfer's notification is plain again,
     * and a message that is no notification is never marked.
     */
    for (i = 0; i < 2; i++) {
        peer_flagged_to_hirx(n, R_ARCTIC_E2E_FLAGS_NOTIFY_MASK, 4, 0xbad0 + i,
                             (uint32_t)target, payload, 1, i == 0);
        if (i == 0) {
            /* The requester (endpoint 0, job 0) is told too, reliably:
             * a data packet it will take as a notice. */
            uint32_t epoch = expect_data_flags(n, PEER, ARCTIC_PRIORITY_HIGH,
                                               R_ARCTIC_E2E_FLAGS_NOTICE_MASK,
                                               0, 4, 0xbad0,
                                               ARCTIC_DMA_ERR_TARGET, NULL, 0);

            peer_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                         epoch, 0, 0);
        }
    }
    link_expect_silence(n);

    /* Such a report from another NIU arrives here as a notice: MODE 1,
     * DEST the node that refused, command[1] ARCTIC_DMA_ERR_TARGET. */
    peer_flagged_to_hirx(n, R_ARCTIC_E2E_FLAGS_NOTICE_MASK, 6, 0x77,
                         ARCTIC_DMA_ERR_TARGET, NULL, 0, ARCTIC_MODE_DMA);
    niu_stop(n);
}

/* Check the error notice a refused request leaves in the own HiRx. */
static void guest_expect_notice(Niu *n, unsigned type, uint32_t command,
                                uint32_t status)
{
    uint64_t slot = rx_tail_slot(n, ARCTIC_RXQ_HI);
    uint32_t want = rx_tail_header(n, ARCTIC_RXQ_HI,
                                   FIELD_DP32(mpi_header(NIU_NODE, type, 0),
                                              MPI_HEADER, MODE,
                                              ARCTIC_MODE_DMA));

    g_assert_cmphex(qtest_readl(n->qts, slot), ==, want);
    g_assert_cmphex(qtest_readl(n->qts, slot + ARCTIC_SLOT_COMMAND0), ==,
                    command);
    g_assert_cmphex(qtest_readl(n->qts, slot + ARCTIC_SLOT_COMMAND1), ==,
                    status);
    qtest_writel(n->qts, slot, 0);
    rx_tail_advance(n, ARCTIC_RXQ_HI);
}

static void test_dma_refused(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t v = 1, epoch;

    mark_rx_slots(n);
    /* No window registered yet. */
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 1, 0xa1, REMOTE_TARGET, WIN_VIRT, NULL,
              0);
    doorbell(n);
    link_expect_silence(n);
    guest_expect_notice(n, 1, 0xa1, ARCTIC_DMA_ERR_RANGE);
    expect_errors(n, 1u << ARCTIC_ERR_DMA_RANGE);
    set_window_and_job(n, WIN_PHYS, WIN_VIRT, WIN_MASK, 0);
    /* Unaligned source, unaligned target, source past the window,
     * a source block straddling the window's end, no route. */
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 2, 0xa2, REMOTE_TARGET, WIN_VIRT + 64,
              NULL, 0);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 3, 0xa3, REMOTE_TARGET + 8, WIN_VIRT,
              NULL, 0);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 4, 0xa4, REMOTE_TARGET,
              WIN_VIRT + WIN_MASK + 1, NULL, 0);
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 5, 0xa5, REMOTE_TARGET, WIN_VIRT - 2048,
              NULL, 0);
    guest_dma(n, ARCTIC_TXQ_DMA, 200, 6, 0xa6, REMOTE_TARGET, WIN_VIRT, NULL,
              0);
    doorbell(n);
    link_expect_silence(n);
    guest_expect_notice(n, 2, 0xa2, ARCTIC_DMA_ERR_ALIGN);
    guest_expect_notice(n, 3, 0xa3, ARCTIC_DMA_ERR_ALIGN);
    guest_expect_notice(n, 4, 0xa4, ARCTIC_DMA_ERR_RANGE);
    guest_expect_notice(n, 5, 0xa5, ARCTIC_DMA_ERR_RANGE);
    guest_expect_notice(n, 6, 0xa6, ARCTIC_DMA_ERR_ROUTE);
    g_assert_cmpint(ep_r(n, 0, A_EP_DMA_TX_TL), ==, 6);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_ALIGN | 1u << ARCTIC_ERR_DMA_RANGE |
                  1u << ARCTIC_ERR_NO_ROUTE);
    /* An MPI packet in DMATx is refused too; MPI traffic still flows. */
    {
        uint64_t slot = TX_BASE + ARCTIC_DMA_TX_OFFSET +
                        (uint64_t)n->dma_head * ARCTIC_SLOT_SIZE;
        qtest_writel(n->qts, slot, mpi_header(2, 7, 0));
        n->dma_head++;
    }
    guest_send(n, ARCTIC_TXQ_HI, 2, 8, 0, 0, &v, 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 8, 0, 0, &v, 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 0, 0);
    link_expect_silence(n);
    guest_expect_notice(n, 7, 0, ARCTIC_DMA_ERR_QUEUE);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_MODE);
    g_assert_cmpint(counter(n, ARCTIC_CNT_DMA_REQUESTS), ==, 0);
    niu_stop(n);
}

/*
 * Take every packet the device has sent by now, returning the credit of
 * each as the switch does: the retransmissions to a peer that is silent,
 * or answered by hand (@answer_nack: a QUEUE_FULL nack to each).
 */
static unsigned link_drain_packets(Niu *n, bool answer_nack)
{
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header h;
    unsigned count = 0;
    uint16_t type;
    uint32_t len;
    uint8_t prio;

    while (link_read(n, &type, wire, &len, QUIET_MS) == 1) {
        if (type == ARCTIC_FRAME_CREDIT) {
            n->credits_seen[ARCTIC_PRIORITY_LOW] += arctic_get_le16(wire);
            n->credits_seen[ARCTIC_PRIORITY_HIGH] += arctic_get_le16(wire + 2);
            continue;
        }
        g_assert_cmpint(type, ==, ARCTIC_FRAME_PACKET);
        prio = FIELD_EX32(arctic_get_le32(wire + ARCTIC_WIRE_WORDS_OFFSET),
                          ARCTIC_W0, PRIORITY);
        link_send_credit(n, prio == ARCTIC_PRIORITY_HIGH,
                         prio == ARCTIC_PRIORITY_LOW);
        arctic_e2e_decode(wire, &h);
        if (answer_nack) {
            peer_control(n, h.dst_node, ARCTIC_E2E_NACK, prio, h.epoch,
                         h.seq, ARCTIC_NACK_QUEUE_FULL);
        }
        count++;
    }
    return count;
}

/*
 * A destination that answers nothing: after peer-timeout-ms (10 s by
 * default) the NIU drops what waits for it, counts it, sets PEER_DEAD
 * naming the node, leaves a notice in the HiRx of the endpoint that sent
 * it, and when the node answers again its stream starts afresh at seq 0
 * of a newer epoch.  A destination that only refuses is alive.
 */
static void test_peer_dead(void)
{
    Niu *n = niu_start_linked(8, 8);
    const uint64_t second = 1000000000ull;
    uint32_t v = 0x5a, epoch, epoch2;
    unsigned i, retries = 0;

    mark_rx_slots(n);
    guest_send(n, ARCTIC_TXQ_LO, 2, 7, 0x77, 0, &v, 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 7, 0x77, 0, &v, 1);
    for (i = 0; i < 9; i++) {
        qtest_clock_step(n->qts, second);
        retries += link_drain_packets(n, false);
    }
    g_assert_cmpuint(retries, >, 9);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    g_assert_cmpint(reg_r(n, A_NIU_TX_PENDING), ==, 1);
    qtest_clock_step(n->qts, 3 * second / 2);
    link_drain_packets(n, false);
    g_assert_cmpint(reg_r(n, A_NIU_TX_PENDING), ==, 0);
    g_assert_cmpint(counter(n, ARCTIC_CNT_PEER_DROPPED), ==, 1);
    g_assert_cmpuint(FIELD_EX32(reg_r(n, A_NIU_ERROR_INFO), NIU_ERROR_INFO,
                                DETAIL), ==, 2);
    expect_errors(n, 1u << ARCTIC_ERR_PEER_DEAD);
    guest_expect_notice(n, 0, 2, ARCTIC_NOTICE_PEER_DEAD);

    /* Node 2 is back: a new session, which it adopts at seq 0. */
    guest_send(n, ARCTIC_TXQ_LO, 2, 8, 0x88, 0, &v, 1);
    doorbell(n);
    epoch2 = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 8, 0x88, 0, &v, 1);
    g_assert_cmphex(epoch2, ==, epoch + 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch2, 0, 0);
    g_assert_cmpint(reg_r(n, A_NIU_TX_PENDING), ==, 0);

    /* Node 3 refuses for 15 s (its queue stays full): never dead. */
    guest_send(n, ARCTIC_TXQ_HI, 3, 9, 0x99, 0, &v, 1);
    doorbell(n);
    for (i = 0; i < 15; i++) {
        link_drain_packets(n, true);
        qtest_clock_step(n->qts, second);
    }
    g_assert_cmpint(reg_r(n, A_NIU_TX_PENDING), ==, 1);
    g_assert_cmpint(counter(n, ARCTIC_CNT_PEER_DROPPED), ==, 1);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);
}

/*
 * HiRx placed over DMATx, ahead of its tail: each refused request leaves
 * an error notice that is a new request, refused in turn.  The NIU's work
 * stays bounded: it stops after one pass until virtual time passes, then
 * goes on at the idle poll's pace (a doorbell used to burn a host core
 * until Tx went off).
 */
static void test_tx_refusals_bounded(void)
{
    Niu *n = niu_start(false);
    uint64_t rx_base = TX_BASE + ARCTIC_DMA_TX_OFFSET;
    uint32_t first, later, paced;

    qtest_memset(n->qts, TX_BASE, 0, ARCTIC_TX_REGION_SIZE);
    ep_w(n, 0, A_EP_TX_QBASE_LO, (uint32_t)TX_BASE);
    ep_w(n, 0, A_EP_TX_QBASE_HI, TX_BASE >> 32);
    ep_w(n, 0, A_EP_RX_QBASE_LO, (uint32_t)rx_base);
    ep_w(n, 0, A_EP_RX_QBASE_HI, rx_base >> 32);
    ep_w(n, 0, A_EP_HI_RX_HD, 1);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    /* A misaligned target: refused, and its notice lands in DMATx[1]. */
    guest_dma(n, ARCTIC_TXQ_DMA, 2, 1, 0xa1, REMOTE_TARGET + 8, WIN_VIRT,
              NULL, 0);
    doorbell(n);
    g_usleep(100 * 1000);
    first = counter(n, ARCTIC_CNT_TX_ERRORS);
    g_usleep(100 * 1000);
    later = counter(n, ARCTIC_CNT_TX_ERRORS);
    g_assert_cmpuint(first, >=, 2);     /* the notices did feed it */
    g_assert_cmpuint(first, <=, ARCTIC_N);
    g_assert_cmpuint(later, ==, first);
    qtest_clock_step(n->qts, 10 * 1000 * 1000);
    paced = counter(n, ARCTIC_CNT_TX_ERRORS);
    g_assert_cmpuint(paced, >, later);
    g_assert_cmpuint(paced - later, <=, 4 * ARCTIC_N);
    reg_w(n, A_NIU_ERROR_CAUSE, reg_r(n, A_NIU_ERROR_CAUSE));
    niu_stop(n);
}

/* A window whose memory would wrap past 2^64 is refused when it is
 * loaded, in whichever order its registers are written, and the window
 * the registers held stays. */
static void test_dma_window_wrap_refused(void)
{
    Niu *n = niu_start(false);
    const uint64_t top = 0xffffffffffc00000ull;     /* 4 MiB below 2^64 */
    const uint64_t mask8m = 8 * 1024 * 1024 - 1;

    reg_w(n, A_NIU_TX_CTRL, 0);
    reg_w(n, A_NIU_RX_CTRL, 0);
    /* Base first, then a mask too large for it. */
    ep_w(n, 0, A_EP_DMA_BASE_PHY_LO, (uint32_t)top);
    ep_w(n, 0, A_EP_DMA_BASE_PHY_HI, top >> 32);
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_LO, (uint32_t)mask8m);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    g_assert_cmphex(ep_r(n, 0, A_EP_DMA_RANGE_MASK_LO), ==, 0);
    /* 4 MiB fits exactly below 2^64. */
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_LO, (uint32_t)(mask8m >> 1));
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    g_assert_cmphex(ep_r(n, 0, A_EP_DMA_RANGE_MASK_LO), ==, mask8m >> 1);
    /* Mask first, then a base too high for it. */
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_LO, 0);
    ep_w(n, 0, A_EP_DMA_BASE_PHY_HI, 0);
    ep_w(n, 0, A_EP_DMA_BASE_PHY_LO, 0);
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_LO, (uint32_t)mask8m);
    ep_w(n, 0, A_EP_DMA_BASE_PHY_HI, top >> 32);
    ep_w(n, 0, A_EP_DMA_BASE_PHY_LO, (uint32_t)top);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    g_assert_cmphex(ep_r(n, 0, A_EP_DMA_BASE_PHY_LO), ==, 0);
    g_assert_cmphex(ep_r(n, 0, A_EP_DMA_BASE_PHY_HI), ==, top >> 32);
    niu_stop(n);
}

/* Job tags (GID): stamped on every packet; data for another job is
 * refused and retried until that job runs. */
static void test_job_tags(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header h;
    uint32_t v = 3;
    size_t size;

    set_window_and_job(n, 0, 0, 0, 7);
    mark_rx_slots(n);
    guest_send(n, ARCTIC_TXQ_HI, 2, 1, 0, 0, &v, 1);
    doorbell(n);
    size = link_expect_packet(n, wire);
    arctic_e2e_decode(wire, &h);
    g_assert_cmpint(h.job, ==, 7);
    g_assert_cmpint(size, ==, arctic_wire_size(5));
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, h.epoch, 0, 0);

    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0,
                     1, 2, 3, NULL, 0);      /* job 0 */
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, ARCTIC_NACK_WRONG_JOB);
    g_assert_cmpint(qtest_readl(n->qts, rx_slot_addr(ARCTIC_RXQ_HI, 0)), ==,
                    0);
    wire[6] = 7;                            /* the running job's tag */
    arctic_wire_seal(wire, size);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, 0);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 1, 2, 3, NULL, 0);
    g_assert_cmpint(counter(n, ARCTIC_CNT_WRONG_JOB), ==, 1);
    niu_stop(n);
}


/* ------------------------------------------------------------------------
 * Interrupts
 */

static bool intx_asserted(Niu *n)
{
    return qpci_config_readw(n->dev, PCI_STATUS) & PCI_STATUS_INTERRUPT;
}

static void arm(Niu *n, unsigned ep, uint32_t what)
{
    qpci_io_writel(n->dev, n->user, ep * ARCTIC_USER_PAGE_SIZE +
                   A_USER_IRQ_ARM, what);
}

/* INTx: a one-shot receive interrupt, so a busy poller takes none. */
static void test_irq_intx_one_shot(void)
{
    Niu *n = niu_start_linked(8, 8);

    mark_rx_slots(n);
    peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 1, 0, 0, NULL, 0);
    g_assert_cmphex(reg_r(n, A_NIU_IRQ_STATUS), ==, 0);   /* not armed */
    g_assert_false(intx_asserted(n));
    arm(n, 0, R_USER_IRQ_ARM_RX_MASK);
    g_assert_cmphex(reg_r(n, A_NIU_IRQ_ENABLE), ==, 1u << R_NIU_IRQ_RX_SHIFT);
    peer_send_acked(n, ARCTIC_PRIORITY_LOW, 2, 0, 0, NULL, 0);
    g_assert_cmphex(reg_r(n, A_NIU_IRQ_STATUS), ==, 1u << R_NIU_IRQ_RX_SHIFT);
    g_assert_cmphex(reg_r(n, A_NIU_IRQ_ENABLE), ==, 0);   /* disarmed */
    g_assert_true(intx_asserted(n));
    reg_w(n, A_NIU_IRQ_STATUS, 1u << R_NIU_IRQ_RX_SHIFT);
    g_assert_false(intx_asserted(n));
    peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 3, 0, 0, NULL, 0);
    g_assert_cmphex(reg_r(n, A_NIU_IRQ_STATUS), ==, 0);
    g_assert_false(intx_asserted(n));
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 1, 0, 0, NULL, 0);
    guest_expect_rx(n, ARCTIC_RXQ_LO, PEER, 2, 0, 0, NULL, 0);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 0, 0, NULL, 0);
    niu_stop(n);
}

/* MSI-X: each cause has its vector (entries start masked, so a fired
 * vector shows as pending). */
static void test_irq_msix_vectors(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t v = 1, epoch;
    unsigned vec;

    qpci_msix_enable(n->dev);
    g_assert_cmpint(qpci_msix_table_size(n->dev), ==, ARCTIC_MSIX_VECTORS);
    mark_rx_slots(n);
    /* Endpoint 2 armed but a message for endpoint 0 arrives: nothing. */
    reg_w(n, A_NIU_TX_CTRL, 0);
    reg_w(n, A_NIU_RX_CTRL, 0);
    reg_w(n, A_NIU_VMASK, 3);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    arm(n, 2, R_USER_IRQ_ARM_RX_MASK);
    arm(n, 0, R_USER_IRQ_ARM_TX_MASK);
    peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 1, 0, 0, NULL, 0);
    for (vec = 0; vec < ARCTIC_MSIX_VECTORS; vec++) {
        g_assert_false(qpci_msix_pending(n->dev, vec));
    }
    /* Endpoint 0 sends: its transmit vector fires once the slot is free. */
    guest_send(n, ARCTIC_TXQ_HI, 2, 1, 0, 0, &v, 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 1, 0, 0, &v, 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 0, 0);
    g_assert_true(qpci_msix_pending(n->dev, ARCTIC_MSIX_TX + 0));
    g_assert_false(qpci_msix_pending(n->dev, ARCTIC_MSIX_RX + 2));
    g_assert_false(intx_asserted(n));       /* MSI-X replaces INTx */
    /* Errors: persistent enable, set by the driver. */
    reg_w(n, A_NIU_IRQ_ENABLE, reg_r(n, A_NIU_IRQ_ENABLE) |
          R_NIU_IRQ_ERROR_MASK);
    reg_w(n, A_NIU_ID, 0);
    g_assert_true(qpci_msix_pending(n->dev, ARCTIC_MSIX_ERROR));
    g_assert_true(reg_r(n, A_NIU_IRQ_ENABLE) & R_NIU_IRQ_ERROR_MASK);
    g_assert_cmphex(reg_r(n, A_NIU_IRQ_STATUS), ==,
                    R_NIU_IRQ_ERROR_MASK | 1u << (R_NIU_IRQ_TX_SHIFT + 0));
    /* MSI-X off: the pending causes show on INTx at once. */
    g_assert_false(intx_asserted(n));
    qpci_msix_disable(n->dev);
    g_assert_true(intx_asserted(n));
    niu_stop(n);
}


/* ------------------------------------------------------------------------
 * Introspection
 */

/* QMP and HMP `qom-get .../niu state`: link, datapaths, last error,
 * counters and each endpoint's queues. */
static void test_state_introspection(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t v = 1, epoch;
    QDict *rsp, *state, *counters, *ep0;
    QList *eps;
    g_autofree char *hmp = NULL;

    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v, 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 1, 0, 0, &v, 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0, 0);
    reg_w(n, A_NIU_ID, 0);          /* leave an error behind */

    state = niu_state(n, &rsp);
    g_assert_cmpint(qdict_get_int(state, "node-id"), ==, NIU_NODE);
    g_assert_cmpint(qdict_get_int(state, "num-nodes"), ==, NET_NODES);
    g_assert_cmpstr(qdict_get_str(state, "link"), ==, "up");
    g_assert_cmpstr(qdict_get_str(state, "link-transport"), ==,
                    link_thread() ? "thread" : "chardev");
    g_assert_cmpstr(qdict_get_str(state, "tx"), ==, "on");
    g_assert_cmpstr(qdict_get_str(state, "last-error"), ==,
                    "read-only register");
    g_assert_cmpint(qdict_get_int(state, "tx-pending"), ==, 0);
    counters = qdict_get_qdict(state, "counters");
    g_assert_cmpint(qdict_get_int(counters, "tx-lo-packets"), ==, 1);
    g_assert_cmpint(qdict_get_int(counters, "acks-received"), ==, 1);
    eps = qdict_get_qlist(state, "endpoints");
    g_assert_cmpint(qlist_size(eps), ==, ARCTIC_ENDPOINTS);
    ep0 = qobject_to(QDict, qlist_peek(eps));
    g_assert_cmpint(qdict_get_int(ep0, "lo-tx-tl"), ==, 1);
    g_assert_cmpint(qdict_get_int(ep0, "tx-qbase"), ==, TX_BASE);
    g_assert_cmpstr(qdict_get_str(ep0, "served"), ==, "yes");
    qobject_unref(rsp);

    hmp = qtest_hmp(n->qts, "qom-get /machine/peripheral/niu state");
    g_assert_nonnull(strstr(hmp, "\"tx-lo-packets\": 1"));
    g_assert_nonnull(strstr(hmp, "\"lo-tx-tl\": 1"));
    niu_stop(n);
}


/* ------------------------------------------------------------------------
 * Virtual endpoints (seed 002 Appendix A) and context switch (§4.1.2, §4.2)
 */

#define EP_TX_BASE(e)   (0x1100000ull + (uint64_t)(e) * ARCTIC_TX_REGION_SIZE)
#define EP_RX_BASE(e)   (0x1300000ull + (uint64_t)(e) * ARCTIC_RX_REGION_SIZE)

static void ep_set_queues(Niu *n, unsigned e, uint64_t tx, uint64_t rx)
{
    qtest_memset(n->qts, tx, 0, ARCTIC_TX_REGION_SIZE);
    qtest_memset(n->qts, rx, 0, ARCTIC_RX_REGION_SIZE);
    ep_w(n, e, A_EP_TX_QBASE_LO, (uint32_t)tx);
    ep_w(n, e, A_EP_TX_QBASE_HI, tx >> 32);
    ep_w(n, e, A_EP_RX_QBASE_LO, (uint32_t)rx);
    ep_w(n, e, A_EP_RX_QBASE_HI, rx >> 32);
}

static void ep_put_slot(Niu *n, uint64_t slot, uint32_t header, uint32_t cmd0,
                        uint32_t v)
{
    qtest_writel(n->qts, slot + ARCTIC_SLOT_COMMAND0, cmd0);
    qtest_writel(n->qts, slot + ARCTIC_SLOT_PAYLOAD, v);
    qtest_writel(n->qts, slot, header);
}

static void test_virtual_endpoints(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t v[3] = { 0x100, 0x200, 0x300 };
    uint32_t e1, e2, saved_tail, saved_base;
    size_t size;
    unsigned e;

    mark_rx_slots(n);
    reg_w(n, A_NIU_TX_CTRL, 0);
    reg_w(n, A_NIU_RX_CTRL, 0);
    for (e = 1; e < 4; e++) {
        ep_set_queues(n, e, EP_TX_BASE(e), EP_RX_BASE(e));
    }
    reg_w(n, A_NIU_VMASK, 3);               /* endpoints 0..3 */
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);

    /* Endpoints 1 and 2 send from their own queues. */
    ep_put_slot(n, EP_TX_BASE(1) + ARCTIC_HI_TX_OFFSET,
                mpi_header(2, 1, 1), 11, v[0]);
    ep_put_slot(n, EP_TX_BASE(2) + ARCTIC_HI_TX_OFFSET,
                mpi_header(2, 2, 1), 22, v[1]);
    doorbell(n);
    e1 = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 1, 11, 0, &v[0], 1);
    e2 = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 1, 2, 22, 0, &v[1], 1);
    g_assert_cmphex(e1, ==, e2);            /* one stream per node pair */
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, e1, 1, 0);
    g_assert_cmpint(ep_r(n, 1, A_EP_HI_TX_TL), ==, 1);
    g_assert_cmpint(ep_r(n, 2, A_EP_HI_TX_TL), ==, 1);
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_TX_TL), ==, 0);

    /* A message for endpoint 2 lands in endpoint 2's HiRx only. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0,
                     4, 44, 0, &v[2], 1);
    wire[21] |= 2 << 5;                     /* W1.ENDPOINT, bits 15:13 */
    arctic_wire_seal(wire, size);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, 0);
    g_assert_cmphex(qtest_readl(n->qts, EP_RX_BASE(2)), ==,
                    FIELD_DP32(mpi_header(PEER, 4, 1), MPI_HEADER, ENDPOINT,
                               2));
    g_assert_cmphex(qtest_readl(n->qts, EP_RX_BASE(2) + 16), ==, v[2]);
    g_assert_cmphex(qtest_readl(n->qts, rx_slot_addr(ARCTIC_RXQ_HI, 0)), ==,
                    0);
    g_assert_cmpint(ep_r(n, 2, A_EP_HI_RX_HD), ==, 1);
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_RX_HD), ==, 0);

    /* Endpoint 5 is not served under VMASK 3: refused and retried. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 1,
                     4, 45, 0, NULL, 0);
    wire[21] |= 5 << 5;
    arctic_wire_seal(wire, size);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 1, ARCTIC_NACK_BAD_ENDPOINT);

    /*
     * Context switch of endpoint 1: stop, save its queue state, run
     * another process's queues on it, restore, go on where it was.
     */
    reg_w(n, A_NIU_TX_CTRL, 0);
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, 0);
    saved_tail = ep_r(n, 1, A_EP_HI_TX_TL);
    saved_base = ep_r(n, 1, A_EP_TX_QBASE_LO);
    ep_w(n, 1, A_EP_TX_QBASE_LO, (uint32_t)EP_TX_BASE(5));
    ep_w(n, 1, A_EP_HI_TX_TL, 7);
    qtest_memset(n->qts, EP_TX_BASE(5), 0, ARCTIC_TX_REGION_SIZE);
    ep_put_slot(n, EP_TX_BASE(5) + 7 * ARCTIC_SLOT_SIZE, mpi_header(2, 5, 1),
                55, v[2]);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    doorbell(n);
    expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 2, 5, 55, 0, &v[2], 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, e1, 2, 0);
    reg_w(n, A_NIU_TX_CTRL, 0);
    ep_w(n, 1, A_EP_TX_QBASE_LO, saved_base);
    ep_w(n, 1, A_EP_HI_TX_TL, saved_tail);
    ep_put_slot(n, EP_TX_BASE(1) + ARCTIC_HI_TX_OFFSET + ARCTIC_SLOT_SIZE,
                mpi_header(2, 1, 1), 12, v[0]);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    doorbell(n);
    expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 3, 1, 12, 0, &v[0], 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, e1, 3, 0);
    g_assert_cmpint(ep_r(n, 1, A_EP_HI_TX_TL), ==, 2);
    link_expect_silence(n);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    niu_stop(n);
}

/* ------------------------------------------------------------------------
 * Priorities
 */

static void test_rx_high_flows_while_low_full(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    size_t size;
    unsigned i;

    mark_rx_slots(n);
    qtest_writel(n->qts, rx_slot_addr(ARCTIC_RXQ_LO, 0), mpi_header(0, 0, 0));
    size = peer_data(n, wire, 2, ARCTIC_PRIORITY_LOW, n->peer_epoch, 0, 1, 1,
                     1, NULL, 0);
    link_send_packet(n, wire, size);
    expect_control(n, 2, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_LOW, n->peer_epoch,
                   0, ARCTIC_NACK_QUEUE_FULL);
    for (i = 0; i < 10; i++) {
        uint32_t v = i;
        peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 4, i, 0, &v, 1);
        guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 4, i, 0, &v, 1);
    }
    niu_stop(n);
}

/* No low-priority credit: low waits, high goes; credit releases low. */
static void test_tx_high_passes_blocked_low(void)
{
    Niu *n = niu_start_linked(8, 1);
    uint32_t v[3] = { 1, 2, 3 };
    uint32_t elo, ehi;

    n->hold_credits[ARCTIC_PRIORITY_LOW] = true;

    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v[0], 1);
    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v[1], 1);
    doorbell(n);
    elo = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 1, 0, 0, &v[0], 1);
    link_expect_silence(n);     /* the second waits for a credit */
    guest_send(n, ARCTIC_TXQ_HI, 2, 5, 0, 0, &v[2], 1);
    doorbell(n);
    ehi = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 5, 0, 0, &v[2], 1);
    g_assert_cmpint(counter(n, ARCTIC_CNT_CREDIT_STALLS), >, 0);
    link_send_credit(n, 0, 1);
    doorbell(n);
    expect_data(n, 2, ARCTIC_PRIORITY_LOW, 1, 1, 0, 0, &v[1], 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, elo, 1, 0);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, ehi, 0, 0);
    niu_stop(n);
}

/* Unacked low-priority packets can hold only the low share of the lines. */
/*
 * Low priority takes at most LINES - HI_LINES lines (what CAPS says), and
 * a high-priority message still goes out while they are all busy.
 */
static void check_high_lines_reserved(const char *props, unsigned lines)
{
    Niu *n;
    unsigned lo_lines = lines - 4;
    uint32_t v, elo = 0, ehi, caps;
    unsigned i;

    n = niu_start_linked_props(props, lines * 2, lines * 2);
    caps = reg_r(n, A_NIU_CAPS);
    g_assert_cmpint(FIELD_EX32(caps, NIU_CAPS, LINES), ==, lines);
    g_assert_cmpint(FIELD_EX32(caps, NIU_CAPS, HI_LINES), ==, 4);

    for (i = 0; i <= lo_lines; i++) {
        v = i;
        guest_send(n, ARCTIC_TXQ_LO, 3, 2, 0, 0, &v, 1);
    }
    doorbell(n);
    for (i = 0; i < lo_lines; i++) {
        v = i;
        elo = expect_data(n, 3, ARCTIC_PRIORITY_LOW, i, 2, 0, 0, &v, 1);
    }
    link_expect_silence(n);
    /* The last low slot is still in the queue, not taken. */
    g_assert_cmphex(qtest_readl(n->qts, tx_slot_addr(ARCTIC_TXQ_LO,
                                                     lo_lines)), !=, 0);
    v = 99;
    guest_send(n, ARCTIC_TXQ_HI, 3, 6, 0, 0, &v, 1);
    doorbell(n);
    ehi = expect_data(n, 3, ARCTIC_PRIORITY_HIGH, 0, 6, 0, 0, &v, 1);
    peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, elo, 0, 0);
    v = lo_lines;
    expect_data(n, 3, ARCTIC_PRIORITY_LOW, lo_lines, 2, 0, 0, &v, 1);
    peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, elo, lo_lines, 0);
    peer_control(n, 3, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, ehi, 0, 0);
    niu_stop(n);
}

static void test_tx_high_lines_reserved(void)
{
    check_high_lines_reserved("", 16);
}

/* The "lines" property sizes the retransmit buffer. */
static void test_tx_lines_property(void)
{
    check_high_lines_reserved("lines=40", 40);
    check_high_lines_reserved("lines=8", 8);
}

/* Writing OFF completes only once what was taken has entered the network
 * (seed 002 §4.1.2). */
static void test_tx_off_drains(void)
{
    Niu *n = niu_start_linked(1, 8);
    uint32_t v = 7, epoch;

    n->hold_credits[ARCTIC_PRIORITY_HIGH] = true;

    guest_send(n, ARCTIC_TXQ_HI, 2, 1, 0, 0, &v, 1);
    guest_send(n, ARCTIC_TXQ_HI, 2, 1, 0, 0, &v, 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 1, 0, 0, &v, 1);
    link_expect_silence(n);
    reg_w(n, A_NIU_TX_CTRL, 0);
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, R_NIU_CTRL_ENABLE_MASK);
    ep_w(n, 0, A_EP_HI_TX_TL, 0);
    expect_errors(n, 1u << ARCTIC_ERR_BUSY);
    link_send_credit(n, 1, 0);
    expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 1, 1, 0, 0, &v, 1);
    g_assert_cmpint(reg_r(n, A_NIU_TX_CTRL), ==, 0);
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_TX_TL), ==, 2);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 1, 0);
    niu_stop(n);
}

/* ------------------------------------------------------------------------
 * Link
 */

static void test_link_down_up_loses_nothing(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t v[5] = { 50, 51, 52, 53, 54 };
    uint32_t epoch = 0;
    unsigned i;

    mark_rx_slots(n);
    for (i = 0; i < 3; i++) {
        guest_send(n, ARCTIC_TXQ_HI, 2, 1, i, 0, &v[i], 1);
    }
    doorbell(n);
    for (i = 0; i < 3; i++) {
        epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, i, 1, i, 0, &v[i], 1);
    }
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 0, 0);
    /* An incoming packet is acked too, then the cable is pulled. */
    peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 9, 9, 9, NULL, 0);
    link_close(n);
    for (i = 3; i < 5; i++) {
        guest_send(n, ARCTIC_TXQ_HI, 2, 1, i, 0, &v[i], 1);
    }
    doorbell(n);
    wait_link_status(n, R_NIU_LINK_STATUS_CONNECTED_MASK, false);
    g_assert_cmpint(FIELD_EX32(reg_r(n, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                               UP), ==, 0);
    /* The device reconnects; 1 and 2 were never acked, 3 and 4 never
     * sent: all four go out, in order, on the new session. */
    link_handshake(n, 8, 8);
    for (i = 1; i < 5; i++) {
        expect_data(n, 2, ARCTIC_PRIORITY_HIGH, i, 1, i, 0, &v[i], 1);
    }
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 4, 0);
    qtest_clock_step(n->qts, 100 * RETRY_NS);
    link_expect_silence(n);
    /* The receive stream survived too: its next packet is taken. */
    peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 9, 10, 10, NULL, 0);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 9, 9, 9, NULL, 0);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 9, 10, 10, NULL, 0);
    g_assert_cmpint(FIELD_EX32(reg_r(n, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                               UP_COUNT), ==, 2);
    g_assert_cmpint(counter(n, ARCTIC_CNT_LINK_DOWNS), ==, 1);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_HI_PACKETS), ==, 5);
    niu_stop(n);
}

/*
 * The send order survives many sessions without credit: every link-up
 * queues every waiting line again (the old entries of the send order go
 * stale), far more often than the ring of the send order holds, so it is
 * rebuilt; the packets still go out once each, in order.
 */
static void test_link_send_order_kept(void)
{
    enum { MSGS = 28, CYCLES = 40 };
    Niu *n;
    uint32_t v;
    unsigned i;

    n = niu_start_linked_props("lines=32", 0, 0);
    for (i = 0; i < MSGS; i++) {
        v = 1000 + i;
        guest_send(n, ARCTIC_TXQ_HI, 2, 1, i, 0, &v, 1);
    }
    doorbell(n);
    link_expect_silence(n);             /* no credit: all 28 wait */
    for (i = 0; i < CYCLES; i++) {
        link_close(n);
        wait_link_status(n, R_NIU_LINK_STATUS_CONNECTED_MASK, false);
        link_handshake(n, 0, 0);
    }
    link_send_credit(n, 64, 0);
    for (i = 0; i < MSGS; i++) {
        v = 1000 + i;
        expect_data(n, 2, ARCTIC_PRIORITY_HIGH, i, 1, i, 0, &v, 1);
    }
    link_expect_silence(n);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_HI_PACKETS), ==, MSGS);
    niu_stop(n);
}

static void test_link_rejected_then_accepted(void)
{
    Niu *n = niu_start(true);
    uint8_t body[ARCTIC_REJECT_SIZE] = { 0 };
    uint16_t type;
    uint32_t len;
    uint8_t buf[ARCTIC_LINK_MAX_BODY];

    niu_setup(n);
    link_accept(n);
    link_expect_hello(n);
    arctic_put_le32(body, ARCTIC_REJECT_NODE_BUSY);
    strcpy((char *)body + 4, "node 1 is taken");
    link_write(n, ARCTIC_FRAME_REJECT, body, sizeof(body));
    g_assert_cmpint(link_read(n, &type, buf, &len, WAIT_MS), ==, -1);
    link_close(n);
    g_assert_true(FIELD_EX32(reg_r(n, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                             REJECTED));
    g_assert_cmpint(FIELD_EX32(reg_r(n, A_NIU_ERROR_INFO), NIU_ERROR_INFO,
                               DETAIL), ==, ARCTIC_REJECT_NODE_BUSY);
    expect_errors(n, 1u << ARCTIC_ERR_LINK_REJECTED);
    link_handshake(n, 8, 8);
    g_assert_false(FIELD_EX32(reg_r(n, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                              REJECTED));
    niu_stop(n);
}

/* ------------------------------------------------------------------------
 * Bad input
 */

static void test_bad_slots_refused(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t v[ARCTIC_MAX_PAYLOAD + 1] = { 0 };
    uint32_t header, epoch;

    /* 21 payload words: refused, released, the queue moves on. */
    header = mpi_header(2, 1, 0);
    header = FIELD_DP32(header, MPI_HEADER, LENGTH, ARCTIC_MAX_PAYLOAD + 1);
    guest_send_raw(n, ARCTIC_TXQ_HI, header, 0, 0, v, ARCTIC_MAX_PAYLOAD);
    /* No route to node 3 at low priority. */
    reg_w(n, A_NIU_TX_CTRL, 0);
    reg_w(n, ARCTIC_ROUTE_OFFSET(ARCTIC_ROUTE_TABLE_LOW, 3), 0);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    guest_send(n, ARCTIC_TXQ_LO, 3, 1, 0, 0, v, 1);
    /* A DMA request in LoTx, where none may be (seed 002 §2.2.1). */
    header = FIELD_DP32(mpi_header(2, 1, 0), MPI_HEADER, MODE, 1);
    guest_send_raw(n, ARCTIC_TXQ_LO, header, 0, 0, v, 0);
    /* A good one after them still goes. */
    v[0] = 77;
    guest_send(n, ARCTIC_TXQ_HI, 2, 3, 4, 5, v, 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 3, 4, 5, v, 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 0, 0);
    link_expect_silence(n);
    g_assert_cmphex(qtest_readl(n->qts, tx_slot_addr(ARCTIC_TXQ_HI, 0)), ==, 0);
    g_assert_cmphex(qtest_readl(n->qts, tx_slot_addr(ARCTIC_TXQ_LO, 0)), ==, 0);
    g_assert_cmphex(qtest_readl(n->qts, tx_slot_addr(ARCTIC_TXQ_LO, 1)), ==, 0);
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_TX_TL), ==, 2);
    g_assert_cmpint(ep_r(n, 0, A_EP_LO_TX_TL), ==, 2);
    g_assert_cmpint(counter(n, ARCTIC_CNT_TX_ERRORS), ==, 3);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_LENGTH | 1u << ARCTIC_ERR_NO_ROUTE |
                  1u << ARCTIC_ERR_BAD_MODE);
    niu_stop(n);
}

/* Queues that point at no memory: errors, never a crash. */
static void test_bad_queue_memory(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    size_t size;

    reg_w(n, A_NIU_RX_CTRL, 0);
    ep_w(n, 0, A_EP_RX_QBASE_LO, 0);
    ep_w(n, 0, A_EP_RX_QBASE_HI, 0xfff00000);    /* far beyond RAM */
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0, 1,
                     1, 1, NULL, 0);
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, ARCTIC_NACK_RX_ERROR);
    expect_errors(n, 1u << ARCTIC_ERR_DMA);
    reg_w(n, A_NIU_TX_CTRL, 0);
    ep_w(n, 0, A_EP_TX_QBASE_HI, 0xfff00000);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    doorbell(n);
    link_expect_silence(n);
    expect_errors(n, 1u << ARCTIC_ERR_DMA);
    niu_stop(n);
}

static void test_bad_packets_from_network(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    size_t size;

    mark_rx_slots(n);
    /* Corrupted in flight: CRC mismatch, dropped without an answer. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0, 1,
                     2, 3, NULL, 0);
    wire[ARCTIC_WIRE_WORDS_OFFSET + 9] ^= 0x40;
    link_send_packet(n, wire, size);
    /* Misrouted: meant for node 2. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0, 1,
                     2, 3, NULL, 0);
    wire[4] = 2;
    arctic_wire_seal(wire, size);
    link_send_packet(n, wire, size);
    /* Length field disagreeing with the frame. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0, 1,
                     2, 3, NULL, 0);
    wire[ARCTIC_WIRE_WORDS_OFFSET + 4] += 1;
    arctic_wire_seal(wire, size);
    link_send_packet(n, wire, size);
    /* An MPI packet claiming 21 payload words is dropped but acked. */
    {
        uint32_t big[ARCTIC_MAX_PAYLOAD + 1] = { 0 };
        size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch,
                         0, 1, 2, 3, big, ARCTIC_MAX_PAYLOAD + 1);
        link_send_packet(n, wire, size);
        expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                       n->peer_epoch, 0, 0);
    }
    g_assert_cmpint(counter(n, ARCTIC_CNT_BAD_PACKETS), ==, 4);
    g_assert_cmpint(qtest_readl(n->qts, rx_slot_addr(ARCTIC_RXQ_HI, 0)), ==,
                    0);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_PACKET);
    /* The link is still good. */
    n->peer_seq[ARCTIC_PRIORITY_HIGH] = 1;
    peer_send_acked(n, ARCTIC_PRIORITY_HIGH, 1, 2, 3, NULL, 0);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 1, 2, 3, NULL, 0);
    niu_stop(n);
}

static void test_bad_frames_reset_link(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t junk[ARCTIC_LINK_HEADER_SIZE + 4];
    uint8_t buf[ARCTIC_LINK_MAX_BODY];
    uint16_t type;
    uint32_t len;

    /* An unknown frame type: the device drops the connection. */
    arctic_frame_header_encode(junk, 77, 4);
    g_assert_cmpint(send(n->fd, junk, sizeof(junk), MSG_NOSIGNAL), ==,
                    sizeof(junk));
    g_assert_cmpint(link_read(n, &type, buf, &len, WAIT_MS), ==, -1);
    link_close(n);
    expect_errors(n, 1u << ARCTIC_ERR_LINK_PROTOCOL);
    /* It comes back; now a frame too large for any buffer. */
    link_handshake(n, 8, 8);
    arctic_frame_header_encode(junk, ARCTIC_FRAME_PACKET, 1u << 30);
    g_assert_cmpint(send(n->fd, junk, ARCTIC_LINK_HEADER_SIZE, MSG_NOSIGNAL),
                    ==, ARCTIC_LINK_HEADER_SIZE);
    g_assert_cmpint(link_read(n, &type, buf, &len, WAIT_MS), ==, -1);
    link_close(n);
    expect_errors(n, 1u << ARCTIC_ERR_LINK_PROTOCOL);
    /* More packets than the credits granted, in one burst so the device
     * has no chance to return credits in between. */
    link_handshake(n, 8, 8);
    {
        enum { BURST = 3 * ARCTIC_LINK_DEFAULT_CREDITS };
        uint8_t burst[BURST * (ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MAX_SIZE)];
        size_t off = 0;

        for (unsigned i = 0; i < BURST; i++) {
            uint8_t *frame = burst + off;
            size_t size = peer_data(n, frame + ARCTIC_LINK_HEADER_SIZE, PEER,
                                    ARCTIC_PRIORITY_LOW, 1, 9, 0, 0, 0,
                                    NULL, -1);
            frame[ARCTIC_LINK_HEADER_SIZE + size - 1] ^= 1;   /* bad CRC */
            arctic_frame_header_encode(frame, ARCTIC_FRAME_PACKET, size);
            off += ARCTIC_LINK_HEADER_SIZE + size;
        }
        g_assert_cmpint(send(n->fd, burst, off, MSG_NOSIGNAL), ==, off);
    }
    while (link_read(n, &type, buf, &len, WAIT_MS) == 1) {
        g_assert_cmpint(type, ==, ARCTIC_FRAME_CREDIT);
    }
    link_close(n);
    g_assert_cmpint(counter(n, ARCTIC_CNT_BAD_PACKETS), ==,
                    ARCTIC_LINK_DEFAULT_CREDITS);
    expect_errors(n, 1u << ARCTIC_ERR_LINK_PROTOCOL |
                  1u << ARCTIC_ERR_BAD_PACKET);
    link_handshake(n, 8, 8);
    niu_stop(n);
}


/*
 * Hostile guest and hostile network, at random (seeded by the test run):
 * every register of both BARs written with random values, the queues
 * filled with random slots, random bytes on the link.  QEMU must survive,
 * and a reset must bring back a device that carries a message end to end.
 */
static void test_random_input_survives(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t junk[512];
    uint32_t v = 0x77, epoch;
    unsigned i, round;

    for (round = 0; round < 3; round++) {
        for (i = 0; i < 4000; i++) {
            uint64_t off = g_test_rand_int_range(0, ARCTIC_BAR_CONTROL_SIZE /
                                                    4) * 4;
            uint32_t val = g_test_rand_int();

            if (off == A_NIU_TX_CTRL || off == A_NIU_RX_CTRL) {
                val &= ~R_NIU_CTRL_RESET_MASK;  /* keep the chaos going */
            }
            reg_w(n, off, val);
            if (i % 4 == 0) {
                qpci_io_writel(n->dev, n->user,
                               g_test_rand_int_range(0, ARCTIC_BAR_USER_SIZE /
                                                        4) * 4,
                               g_test_rand_int());
            }
            if (i % 8 == 0) {
                /* A random slot in the queues the driver set up. */
                uint64_t slot = TX_BASE + g_test_rand_int_range(0,
                                    ARCTIC_TX_REGION_SIZE / ARCTIC_SLOT_SIZE) *
                                ARCTIC_SLOT_SIZE;
                unsigned w;

                for (w = 0; w < ARCTIC_SLOT_SIZE / 4; w++) {
                    qtest_writel(n->qts, slot + 4 * w, g_test_rand_int());
                }
            }
        }
        qtest_clock_step(n->qts, 10 * RETRY_NS);
        g_assert_cmphex(reg_r(n, A_NIU_ID), ==, ARCTIC_NIU_ID_VALUE);
    }
    /* Garbage from the "switch": the device drops the link, reconnects. */
    for (i = 0; i < sizeof(junk); i++) {
        junk[i] = g_test_rand_int();
    }
    send(n->fd, junk, sizeof(junk), MSG_NOSIGNAL);
    link_close(n);
    wait_link_status(n, R_NIU_LINK_STATUS_CONNECTED_MASK, false);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_RESET_MASK);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    n->tx_head[0] = n->tx_head[1] = 0;
    niu_setup(n);
    link_handshake(n, 8, 8);
    guest_send(n, ARCTIC_TXQ_HI, 2, 1, 2, 3, &v, 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_HIGH, 0, 1, 2, 3, &v, 1);
    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH, epoch, 0, 0);
    niu_stop(n);
}

/* Properties are checked when the device is created. */
static void test_bad_properties(void)
{
    const char *qemu = g_getenv("QTEST_QEMU_BINARY");
    const char *bad[] = { "node-id=256", "rx-credits=0",
                          "poll-min-ns=10,poll-max-ns=5", "lines=7",
                          "lines=256", "ack-delay-ns=600000",
                          /* one link, not two */
                          "chardev=c,link-socket=/nonexistent/switch.sock",
                          /* TCP wants HOST:PORT */
                          "link-socket=tcp:localhost", "link-socket=tcp:",
                          NULL /* a link-socket= path too long for UNIX */ };
    g_autofree char *long_path = g_strdup_printf(
        "link-socket=/%0200d", 0);
    unsigned i;

    g_assert_nonnull(qemu);
    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        g_autofree char *dev = g_strdup_printf("arctic-niu,%s",
                                               bad[i] ? bad[i] : long_path);
        g_autofree char *err = NULL;
        const char *argv[] = { qemu, "-M", "q35", "-nodefaults", "-display",
                               "none", "-S", "-chardev",
                               "socket,id=c,path=/nonexistent/switch.sock,"
                               "reconnect-ms=1000",
                               "-device", dev, NULL };
        int status = 0;

        g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL,
                                   G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                                   NULL, &err, &status, NULL));
        g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
        g_assert_nonnull(strstr(err, "arctic-niu"));
    }
}


/* ------------------------------------------------------------------------
 * Several QEMU instances joined by the real arctic-switch
 */

#define CLUSTER_MSGS    12      /* per (source, destination, priority) */
#define CLUSTER_STEP_NS 200000  /* virtual time given per round */
#define CLUSTER_ROUNDS  20000

typedef struct Cluster {
    unsigned nodes;
    Niu *node[4];
    GPid switch_pid;
    char *dir;
    char *sock;
    char *tcp;                  /* tcp:HOST:PORT the NIUs join, or NULL */
    /* next expected message index per [receiver][source][priority] */
    unsigned next[4][4][2];
    bool dma_seen[4][4];
    unsigned received, expected;
} Cluster;

static uint32_t cluster_word(unsigned s, unsigned d, unsigned p, unsigned k,
                             unsigned i)
{
    return (s << 28) ^ (d << 24) ^ (p << 20) ^ (k << 8) ^ i ^ 0x5a5a5;
}

/* A TCP port of 127.0.0.1 that nobody listens on now. */
static unsigned free_tcp_port(void)
{
    struct sockaddr_in addr = {
        .sin_family = AF_INET,
        .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
    };
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), ==, 0);
    g_assert_cmpint(getsockname(fd, (struct sockaddr *)&addr, &len), ==, 0);
    close(fd);
    return ntohs(addr.sin_port);
}

/*
 * Start the switch and @nodes NIUs.  @tcp: the NIUs join it over TCP on
 * 127.0.0.1 (as the nodes of another host would), else on its UNIX socket.
 */
static void cluster_start_on(Cluster *c, unsigned nodes, const char *fault,
                             bool tcp)
{
    const char *sw = g_getenv("ARCTIC_SWITCH_BINARY");
    g_autofree char *ports = g_strdup_printf("%u", nodes);
    g_autofree char *tcp_address = NULL;
    const char *argv[14];
    unsigned i = 0, t;

    memset(c, 0, sizeof(*c));
    c->nodes = nodes;
    c->dir = g_dir_make_tmp("arctic-cluster-XXXXXX", NULL);
    c->sock = g_build_filename(c->dir, "switch.sock", NULL);
    argv[i++] = sw;
    argv[i++] = "-s";
    argv[i++] = c->sock;
    argv[i++] = "-n";
    argv[i++] = ports;
    argv[i++] = "--seed";
    argv[i++] = "7";
    argv[i++] = "--no-stats";
    if (fault) {
        argv[i++] = "-f";
        argv[i++] = fault;
    }
    if (tcp) {
        tcp_address = g_strdup_printf("127.0.0.1:%u", free_tcp_port());
        c->tcp = g_strdup_printf("tcp:%s", tcp_address);
        argv[i++] = "--tcp";
        argv[i++] = tcp_address;
    }
    argv[i] = NULL;
    g_assert_true(g_spawn_async(NULL, (char **)argv, NULL,
                                G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL,
                                &c->switch_pid, NULL));
    for (t = 0; t < 5000 && !g_file_test(c->sock, G_FILE_TEST_EXISTS); t++) {
        g_usleep(1000);
    }
    g_assert_true(g_file_test(c->sock, G_FILE_TEST_EXISTS));
    for (i = 0; i < nodes; i++) {
        c->node[i] = niu_start_node(tcp ? c->tcp : c->sock, i, "");
    }
}

static void cluster_start(Cluster *c, unsigned nodes, const char *fault)
{
    cluster_start_on(c, nodes, fault, false);
}

static void cluster_stop(Cluster *c)
{
    unsigned i;
    int status;

    for (i = 0; i < c->nodes; i++) {
        niu_stop(c->node[i]);
    }
    kill(c->switch_pid, SIGTERM);
    g_assert_cmpint(waitpid(c->switch_pid, &status, 0), ==, c->switch_pid);
    g_spawn_close_pid(c->switch_pid);
    /* The switch shuts down cleanly on SIGTERM. */
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_rmdir(c->dir);
    g_free(c->sock);
    g_free(c->tcp);
    g_free(c->dir);
}

/* A driver's bring-up, with the route table for the node's place. */
static void cluster_setup_node(Cluster *c, unsigned me)
{
    Niu *n = c->node[me];
    uint32_t table[2 * 4];
    unsigned t, d;

    wait_link_status(n, R_NIU_LINK_STATUS_UP_MASK, true);
    g_assert_cmpint(reg_r(n, A_NIU_NUM_NODES), ==, c->nodes);
    qtest_memset(n->qts, TX_BASE, 0, ARCTIC_TX_REGION_SIZE);
    qtest_memset(n->qts, RX_BASE, 0, ARCTIC_RX_REGION_SIZE);
    ep_w(n, 0, A_EP_TX_QBASE_LO, (uint32_t)TX_BASE);
    ep_w(n, 0, A_EP_RX_QBASE_LO, (uint32_t)RX_BASE);
    arctic_route_table_fill(table, me, c->nodes);
    for (t = 0; t < 2; t++) {
        for (d = 0; d < c->nodes; d++) {
            reg_w(n, ARCTIC_ROUTE_OFFSET(t, d), table[t * c->nodes + d]);
        }
    }
    ep_w(n, 0, A_EP_DMA_BASE_PHY_LO, (uint32_t)WIN_PHYS);
    ep_w(n, 0, A_EP_DMA_BASE_VIR_LO, (uint32_t)WIN_VIRT);
    ep_w(n, 0, A_EP_DMA_BASE_VIR_HI, WIN_VIRT >> 32);
    ep_w(n, 0, A_EP_DMA_RANGE_MASK_LO, (uint32_t)WIN_MASK);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    reg_w(n, A_NIU_TX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
}

/* Where node s's block for node d lives: source at s, target at d. */
#define CLUSTER_SRC_OFF(d)  (0x100000ull + (d) * ARCTIC_D)
#define CLUSTER_DST_OFF(s)  (0x200000ull + (s) * ARCTIC_D)

/* Every node sends CLUSTER_MSGS messages of every size class at both
 * priorities, and one DMA block, to every other node. */
static void cluster_send_all(Cluster *c, unsigned s)
{
    Niu *n = c->node[s];
    uint32_t payload[ARCTIC_MAX_PAYLOAD];
    unsigned d, p, k, i;

    for (d = 0; d < c->nodes; d++) {
        if (d == s) {
            continue;
        }
        for (i = 0; i < ARCTIC_D / 4; i++) {
            qtest_writel(n->qts, WIN_PHYS + CLUSTER_SRC_OFF(d) + 4 * i,
                         cluster_word(s, d, 2, 0, i));
        }
        guest_dma(n, ARCTIC_TXQ_DMA, d, 3, 0xd0000000 | s << 8 | d,
                  WIN_VIRT + CLUSTER_DST_OFF(s), WIN_VIRT + CLUSTER_SRC_OFF(d),
                  NULL, 0);
        c->expected++;
        for (k = 0; k < CLUSTER_MSGS; k++) {
            for (p = 0; p < 2; p++) {
                unsigned len = (k * 7 + s + d) % (ARCTIC_MAX_PAYLOAD + 1);

                for (i = 0; i < len; i++) {
                    payload[i] = cluster_word(s, d, p, k, i);
                }
                guest_send(n, p ? ARCTIC_TXQ_HI : ARCTIC_TXQ_LO, d, k & 0x7f,
                           s << 24 | d << 16 | p << 8 | k, ~k, payload, len);
                c->expected++;
            }
        }
    }
    doorbell(n);
}

/* Take what arrived at node @me, checking each message against what its
 * sender sent: right destination, in order, once, byte for byte. */
static void cluster_receive(Cluster *c, unsigned me)
{
    Niu *n = c->node[me];
    unsigned q;

    for (q = 0; q < 2; q++) {
        for (;;) {
            uint64_t slot = rx_tail_slot(n, q);
            uint32_t w[ARCTIC_SLOT_SIZE / 4];
            unsigned src, len, i;

            qtest_memread(n->qts, slot, w, sizeof(w));
            if (!FIELD_EX32(le32_to_cpu(w[0]), MPI_HEADER, VALID)) {
                break;
            }
            g_assert_cmpint(FIELD_EX32(le32_to_cpu(w[0]), MPI_HEADER, LAP),
                            ==, FIELD_EX32(n->rx_tail[q], EP_RX_HD, LAP));
            src = FIELD_EX32(le32_to_cpu(w[0]), MPI_HEADER, DEST);
            len = FIELD_EX32(le32_to_cpu(w[0]), MPI_HEADER, LENGTH);
            g_assert_cmpint(src, <, c->nodes);
            if ((le32_to_cpu(w[1]) >> 28) == 0xd) {
                /* A DMA notification: its block must be all there. */
                g_assert_cmpint(q, ==, ARCTIC_RXQ_HI);
                g_assert_cmphex(le32_to_cpu(w[1]), ==,
                                0xd0000000 | src << 8 | me);
                g_assert_false(c->dma_seen[me][src]);
                c->dma_seen[me][src] = true;
                for (i = 0; i < ARCTIC_D / 4; i++) {
                    g_assert_cmphex(qtest_readl(n->qts, WIN_PHYS +
                                                CLUSTER_DST_OFF(src) + 4 * i),
                                    ==, cluster_word(src, me, 2, 0, i));
                }
            } else {
                uint32_t cmd0 = le32_to_cpu(w[1]);
                unsigned p = (cmd0 >> 8) & 1, k = cmd0 & 0xff;

                g_assert_cmpint(cmd0 >> 24, ==, src);
                g_assert_cmpint((cmd0 >> 16) & 0xff, ==, me);
                g_assert_cmpint(p, ==, q == ARCTIC_RXQ_HI);
                /* In order and exactly once per (source, priority). */
                g_assert_cmpint(k, ==, c->next[me][src][p]);
                c->next[me][src][p]++;
                g_assert_cmphex(le32_to_cpu(w[2]), ==, ~k);
                g_assert_cmpint(len, ==,
                                (k * 7 + src + me) % (ARCTIC_MAX_PAYLOAD + 1));
                for (i = 0; i < len; i++) {
                    g_assert_cmphex(le32_to_cpu(w[4 + i]), ==,
                                    cluster_word(src, me, p, k, i));
                }
            }
            c->received++;
            qtest_writel(n->qts, slot, 0);
            rx_tail_advance(n, q);
        }
    }
}

static void cluster_exchange_on(unsigned nodes, const char *fault, bool tcp)
{
    Cluster c;
    unsigned i, round;
    uint32_t retransmits = 0;

    if (!g_getenv("ARCTIC_SWITCH_BINARY")) {
        g_test_skip("ARCTIC_SWITCH_BINARY is not set (scripts/check sets it)");
        return;
    }
    cluster_start_on(&c, nodes, fault, tcp);
    for (i = 0; i < nodes; i++) {
        cluster_setup_node(&c, i);
    }
    for (i = 0; i < nodes; i++) {
        cluster_send_all(&c, i);
    }
    for (round = 0; round < CLUSTER_ROUNDS && c.received < c.expected;
         round++) {
        for (i = 0; i < nodes; i++) {
            /* Virtual time moves only when the test says: it drives the
             * retransmit timers of each node. */
            qtest_clock_step(c.node[i]->qts, CLUSTER_STEP_NS);
            cluster_receive(&c, i);
        }
    }
    g_assert_cmpint(c.received, ==, c.expected);
    /* Nothing more arrives: no duplicate after the last message. */
    for (round = 0; round < 50; round++) {
        for (i = 0; i < nodes; i++) {
            qtest_clock_step(c.node[i]->qts, 10 * CLUSTER_STEP_NS);
            cluster_receive(&c, i);
        }
    }
    g_assert_cmpint(c.received, ==, c.expected);
    for (i = 0; i < nodes; i++) {
        g_assert_cmphex(reg_r(c.node[i], A_NIU_ERROR_CAUSE) &
                        ~(1u << ARCTIC_ERR_BAD_PACKET), ==, 0);
        retransmits += counter(c.node[i], ARCTIC_CNT_RETRANSMITS);
        g_assert_cmpint(counter(c.node[i], ARCTIC_CNT_DMA_REQUESTS), ==,
                        nodes - 1);
    }
    if (fault) {
        /* The faults did happen, and the NIUs recovered from them. */
        g_assert_cmpint(retransmits, >, 0);
    }
    g_test_message("%u nodes, %u messages and DMA blocks, %u retransmits",
                   nodes, c.expected, retransmits);
    cluster_stop(&c);
}

static void cluster_exchange(unsigned nodes, const char *fault)
{
    cluster_exchange_on(nodes, fault, false);
}


/*
 * A long one-way stream through the real switch, many laps of the queues,
 * with a consumer slower than the producer so the receive queue fills,
 * packets are refused and sent again: every message must arrive once, in
 * order, with its own contents (never a slot's contents from a lap ago).
 */
static void test_cluster_stream(void)
{
    enum { MESSAGES = 3000, TAKE_PER_ROUND = 3 };
    Cluster c;
    Niu *tx, *rx;
    unsigned sent = 0, got = 0, round, i;

    if (!g_getenv("ARCTIC_SWITCH_BINARY")) {
        g_test_skip("ARCTIC_SWITCH_BINARY is not set (scripts/check sets it)");
        return;
    }
    cluster_start(&c, 2, NULL);
    cluster_setup_node(&c, 0);
    cluster_setup_node(&c, 1);
    tx = c.node[0];
    rx = c.node[1];
    for (round = 0; round < 200000 && got < MESSAGES; round++) {
        /* Producer: fill every free slot (seed 002 §3.2.1 step 1). */
        while (sent < MESSAGES &&
               qtest_readl(tx->qts, tx_slot_addr(ARCTIC_TXQ_LO,
                                                 tx->tx_head[1])) == 0) {
            uint32_t payload[ARCTIC_MAX_PAYLOAD];
            unsigned len = sent % (ARCTIC_MAX_PAYLOAD + 1);

            for (i = 0; i < len; i++) {
                payload[i] = sent * 0x10001u + i;
            }
            guest_send(tx, ARCTIC_TXQ_LO, 1, sent & 0x7f, sent, ~sent,
                       payload, len);
            sent++;
        }
        doorbell(tx);
        qtest_clock_step(tx->qts, CLUSTER_STEP_NS);
        qtest_clock_step(rx->qts, CLUSTER_STEP_NS);
        /* Consumer: a few per round, checking each one whole. */
        for (i = 0; i < TAKE_PER_ROUND; i++) {
            uint64_t slot = rx_tail_slot(rx, ARCTIC_RXQ_LO);
            uint32_t w[ARCTIC_SLOT_SIZE / 4];
            unsigned len, k;

            qtest_memread(rx->qts, slot, w, sizeof(w));
            if (!(le32_to_cpu(w[0]) & ARCTIC_MPI_VALID)) {
                break;
            }
            len = got % (ARCTIC_MAX_PAYLOAD + 1);
            g_assert_cmphex(le32_to_cpu(w[0]), ==,
                            rx_tail_header(rx, ARCTIC_RXQ_LO,
                                           mpi_header(0, got & 0x7f, len)));
            g_assert_cmphex(le32_to_cpu(w[1]), ==, got);
            g_assert_cmphex(le32_to_cpu(w[2]), ==, ~got);
            for (k = 0; k < len; k++) {
                g_assert_cmphex(le32_to_cpu(w[4 + k]), ==,
                                got * 0x10001u + k);
            }
            qtest_writel(rx->qts, slot, 0);
            rx_tail_advance(rx, ARCTIC_RXQ_LO);
            got++;
        }
    }
    g_assert_cmpint(got, ==, MESSAGES);
    g_assert_cmpint(counter(rx, ARCTIC_CNT_NACKS_SENT), >, 0);
    g_assert_cmpint(counter(rx, ARCTIC_CNT_RX_LO_PACKETS), ==, MESSAGES);
    g_test_message("%u messages, %u nacks, %u retransmits", MESSAGES,
                   counter(rx, ARCTIC_CNT_NACKS_SENT),
                   counter(tx, ARCTIC_CNT_RETRANSMITS));
    cluster_stop(&c);
}

static void test_cluster_2(void)
{
    cluster_exchange(2, NULL);
}

/* NIUs that reach the switch over TCP, as the nodes of other hosts do. */
static void test_cluster_2_tcp(void)
{
    cluster_exchange_on(2, NULL, true);
}

static void test_cluster_4(void)
{
    cluster_exchange(4, NULL);
}

static void test_cluster_4_faults(void)
{
    cluster_exchange(4, "*:both:drop=0.05,dup=0.05,corrupt=0.02,delay=0.05,"
                        "delay-us=300");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    qtest_add_func("/arctic-niu/registers/reset-values",
                   test_identity_and_reset_values);
    qtest_add_func("/arctic-niu/registers/semantics", test_register_semantics);
    qtest_add_func("/arctic-niu/registers/test-dma", test_dma_self_test);
    qtest_add_func("/arctic-niu/tx/all-sizes", test_tx_all_sizes);
    qtest_add_func("/arctic-niu/tx/polled", test_tx_polled_without_doorbell);
    qtest_add_func("/arctic-niu/tx/poll-announced-work",
                   test_tx_poll_announced_work);
    qtest_add_func("/arctic-niu/tx/doorbell-keeps-poll-interval",
                   test_tx_doorbell_keeps_poll_interval);
    qtest_add_func("/arctic-niu/tx/doorbell-posted", test_tx_doorbell_posted);
    qtest_add_func("/arctic-niu/rx/all-sizes", test_rx_all_sizes);
    qtest_add_func("/arctic-niu/ack/waits-for-reply",
                   test_ack_waits_for_reply);
    qtest_add_func("/arctic-niu/queues/wraparound", test_wraparound);
    qtest_add_func("/arctic-niu/queues/lap-from-head", test_rx_lap_from_head);
    qtest_add_func("/arctic-niu/ack/rx-queue-full", test_rx_queue_full_nack);
    qtest_add_func("/arctic-niu/ack/rx-off", test_rx_off_nack);
    qtest_add_func("/arctic-niu/link/busy-poll", test_link_busy_poll);
    qtest_add_func("/arctic-niu/queues/rx-on-own-bar-refused",
                   test_rx_queue_on_own_bar_refused);
    qtest_add_func("/arctic-niu/raw/receive", test_raw_receive);
    qtest_add_func("/arctic-niu/raw/transmit", test_raw_transmit);
    qtest_add_func("/arctic-niu/raw/transmit-waits-for-credit",
                   test_raw_transmit_waits_for_credit);
    qtest_add_func("/arctic-niu/ack/rx-duplicate",
                   test_rx_duplicate_not_delivered);
    qtest_add_func("/arctic-niu/ack/rx-reorder", test_rx_reorder_in_order);
    qtest_add_func("/arctic-niu/ack/rx-resync", test_rx_unknown_stream_resync);
    qtest_add_func("/arctic-niu/ack/tx-timeout", test_tx_timeout_retransmit);
    qtest_add_func("/arctic-niu/ack/tx-nack", test_tx_nack_goes_back);
    qtest_add_func("/arctic-niu/ack/tx-timeout-progress",
                   test_tx_timeout_counts_progress);
    qtest_add_func("/arctic-niu/ack/peer-dead", test_peer_dead);
    qtest_add_func("/arctic-niu/ack/tx-resync", test_tx_resync_renumbers);
    qtest_add_func("/arctic-niu/ack/tx-resync-before-ack",
                   test_tx_resync_before_first_ack);
    qtest_add_func("/arctic-niu/dma/send", test_dma_send);
    qtest_add_func("/arctic-niu/dma/hitx-blocks", test_dma_in_hitx_blocks_hitx);
    qtest_add_func("/arctic-niu/dma/receive", test_dma_receive);
    qtest_add_func("/arctic-niu/dma/context-switch",
                   test_dma_progress_and_context_switch);
    qtest_add_func("/arctic-niu/dma/refused", test_dma_refused);
    qtest_add_func("/arctic-niu/dma/share-leaves-mpi-lines",
                   test_dma_share_leaves_mpi_lines);
    qtest_add_func("/arctic-niu/dma/refusals-bounded",
                   test_tx_refusals_bounded);
    qtest_add_func("/arctic-niu/dma/window-wrap-refused",
                   test_dma_window_wrap_refused);
    qtest_add_func("/arctic-niu/protection/job-tags", test_job_tags);
    qtest_add_func("/arctic-niu/irq/intx-one-shot", test_irq_intx_one_shot);
    qtest_add_func("/arctic-niu/irq/msix-vectors", test_irq_msix_vectors);
    qtest_add_func("/arctic-niu/state", test_state_introspection);
    qtest_add_func("/arctic-niu/endpoints/isolation-and-switch",
                   test_virtual_endpoints);
    qtest_add_func("/arctic-niu/priority/rx-high-passes",
                   test_rx_high_flows_while_low_full);
    qtest_add_func("/arctic-niu/priority/tx-high-passes",
                   test_tx_high_passes_blocked_low);
    qtest_add_func("/arctic-niu/priority/lines-reserved",
                   test_tx_high_lines_reserved);
    qtest_add_func("/arctic-niu/priority/lines-property",
                   test_tx_lines_property);
    qtest_add_func("/arctic-niu/tx/off-drains", test_tx_off_drains);
    qtest_add_func("/arctic-niu/link/down-up", test_link_down_up_loses_nothing);
    qtest_add_func("/arctic-niu/link/send-order-kept",
                   test_link_send_order_kept);
    qtest_add_func("/arctic-niu/link/rejected",
                   test_link_rejected_then_accepted);
    qtest_add_func("/arctic-niu/bad/slots", test_bad_slots_refused);
    qtest_add_func("/arctic-niu/bad/queue-memory", test_bad_queue_memory);
    qtest_add_func("/arctic-niu/bad/packets", test_bad_packets_from_network);
    qtest_add_func("/arctic-niu/bad/frames", test_bad_frames_reset_link);
    qtest_add_func("/arctic-niu/bad/properties", test_bad_properties);
    qtest_add_func("/arctic-niu/bad/random-input", test_random_input_survives);
    qtest_add_func("/arctic-niu/cluster/2-nodes", test_cluster_2);
    qtest_add_func("/arctic-niu/cluster/2-nodes-stream", test_cluster_stream);
    qtest_add_func("/arctic-niu/cluster/2-nodes-tcp", test_cluster_2_tcp);
    qtest_add_func("/arctic-niu/cluster/4-nodes", test_cluster_4);
    qtest_add_func("/arctic-niu/cluster/4-nodes-faults",
                   test_cluster_4_faults);
    return g_test_run();
}
