/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the hardware contract in include/arctic/: the CRC, the
 * packet and frame validators every consumer relies on, slot layouts, and
 * the route-table function (checked against an independent walk of the
 * fat tree it describes).
 */
#include <glib.h>
#include <string.h>

#include "arctic/niu-hw.h"
#include "arctic/packet.h"
#include "arctic/link.h"
#include "arctic/route.h"
#include "arctic/timing.h"

static void test_crc_check_value(void)
{
    g_assert_cmphex(arctic_crc32c("123456789", 9), ==, 0xe3069283u);
    g_assert_cmphex(arctic_crc32c("", 0), ==, 0);
    /* Incremental use gives the same answer. */
    g_assert_cmphex(arctic_crc_final(arctic_crc_update(
                        arctic_crc_update(ARCTIC_CRC_INIT, "1234", 4),
                        "56789", 5)), ==, 0xe3069283u);
}

/* The CPU's CRC32 instruction gives the table's CRC at every length,
 * alignment and starting state. */
static void test_crc_fast_matches_table(void)
{
#ifdef ARCTIC_CRC_HAVE_SSE42
    uint8_t buf[300 + 8];
    size_t len, off, i;

    if (!__builtin_cpu_supports("sse4.2")) {
        g_test_skip("this CPU has no SSE4.2 CRC32 instruction");
        return;
    }
    for (i = 0; i < sizeof(buf); i++) {
        buf[i] = (uint8_t)(i * 151 + 7);
    }
    for (off = 0; off < 8; off++) {
        for (len = 0; len <= 300; len++) {
            uint32_t state = (uint32_t)(len * 2654435761u);

            g_assert_cmphex(arctic_crc_update_sse42(state, buf + off, len),
                            ==,
                            arctic_crc_update_table(state, buf + off, len));
        }
    }
    g_assert_cmphex(arctic_crc_final(arctic_crc_update_sse42(
                        ARCTIC_CRC_INIT, "123456789", 9)), ==, 0xe3069283u);
#else
    g_test_skip("no CRC32 instruction path on this host");
#endif
}

static size_t make_packet(uint8_t *pkt, unsigned payload_words)
{
    struct arctic_e2e_header h = {
        .kind = ARCTIC_E2E_DATA, .src_node = 3, .dst_node = 9, .seq = 77,
    };
    unsigned len = payload_words + ARCTIC_MPI_LENGTH_EXTRA;
    size_t size = arctic_wire_size(len);

    memset(pkt, 0x5a, size);
    arctic_e2e_encode(pkt, &h);
    arctic_put_le32(pkt + 16, arctic_route_entry(3, 9, true, false) & 0xffff);
    arctic_put_le32(pkt + 20, ARCTIC_FIELD_PREP(ARCTIC_W1, LENGTH, len));
    arctic_wire_seal(pkt, size);
    return size;
}

static void test_wire_check(void)
{
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size = make_packet(pkt, 5);
    struct arctic_e2e_header h;

    g_assert_cmpint(arctic_wire_check(pkt, size), ==, ARCTIC_WIRE_OK);
    arctic_e2e_decode(pkt, &h);
    g_assert_cmpint(h.src_node, ==, 3);
    g_assert_cmpint(h.dst_node, ==, 9);
    g_assert_cmpint(h.seq, ==, 77);
    g_assert_cmpint(arctic_wire_check(pkt, size - 4), ==,
                    ARCTIC_WIRE_BAD_LENGTH);
    g_assert_cmpint(arctic_wire_check(pkt, 10), ==, ARCTIC_WIRE_TOO_SHORT);
    pkt[30] ^= 1;
    g_assert_cmpint(arctic_wire_check(pkt, size), ==, ARCTIC_WIRE_BAD_CRC);
    pkt[30] ^= 1;
    pkt[18] = 1;                            /* upper half of word 0 */
    arctic_wire_seal(pkt, size);
    g_assert_cmpint(arctic_wire_check(pkt, size), ==, ARCTIC_WIRE_NOT_ZERO);
    pkt[18] = 0;
    pkt[0] = 9;                             /* no such kind */
    arctic_wire_seal(pkt, size);
    g_assert_cmpint(arctic_wire_check(pkt, size), ==, ARCTIC_WIRE_BAD_KIND);
}

/* Every single-bit corruption of a packet of every size is refused, and
 * every cut of it is too short or of the wrong length. */
/*
 * The header's two shared fields: an answer's incarnation goes where a
 * DATA packet's job tag goes, a RESYNC nack's epoch where the seq goes.
 */
static void test_e2e_shared_fields(void)
{
    struct arctic_e2e_header h = {
        .kind = ARCTIC_E2E_NACK,
        .incarnation_lo = 0xbeef,
        .epoch = 0x01020304,
        .resync_epoch = 0xa0b0c0d0,
    }, got;
    uint8_t b[ARCTIC_E2E_HEADER_SIZE];

    g_assert_cmpuint(sizeof(h), ==, ARCTIC_E2E_HEADER_SIZE);
    arctic_e2e_encode(b, &h);
    g_assert_cmphex(arctic_get_le16(b + 6), ==, 0xbeef);
    g_assert_cmphex(arctic_get_le32(b + 12), ==, 0xa0b0c0d0);
    arctic_e2e_decode(b, &got);
    g_assert_cmphex(got.job, ==, 0xbeef);
    g_assert_cmphex(got.seq, ==, 0xa0b0c0d0);
    g_assert_cmphex(got.epoch, ==, 0x01020304);
}

static void test_wire_check_corruption(void)
{
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    unsigned words, bit;

    for (words = 0; words <= ARCTIC_MAX_PAYLOAD_WORDS; words++) {
        size_t size = make_packet(pkt, words);
        size_t cut;

        g_assert_cmpint(arctic_wire_check(pkt, size), ==, ARCTIC_WIRE_OK);
        for (bit = 0; bit < size * 8; bit++) {
            pkt[bit / 8] ^= 1u << (bit % 8);
            g_assert_cmpint(arctic_wire_check(pkt, size), !=,
                            ARCTIC_WIRE_OK);
            pkt[bit / 8] ^= 1u << (bit % 8);
        }
        for (cut = 0; cut < size; cut++) {
            g_assert_cmpint(arctic_wire_check(pkt, cut), !=, ARCTIC_WIRE_OK);
        }
    }
}

static void test_frame_header_check(void)
{
    struct arctic_frame_header h = { .type = ARCTIC_FRAME_HELLO,
                                     .length = ARCTIC_HELLO_SIZE };
    uint8_t buf[ARCTIC_LINK_HEADER_SIZE];

    g_assert_cmpint(arctic_frame_header_check(&h), ==, ARCTIC_FRAME_OK);
    h.length++;
    g_assert_cmpint(arctic_frame_header_check(&h), ==,
                    ARCTIC_FRAME_BAD_LENGTH);
    h.type = ARCTIC_FRAME_PACKET;
    h.length = ARCTIC_WIRE_MAX_SIZE + 4;
    g_assert_cmpint(arctic_frame_header_check(&h), ==,
                    ARCTIC_FRAME_BAD_LENGTH);
    h.type = 99;
    g_assert_cmpint(arctic_frame_header_check(&h), ==, ARCTIC_FRAME_BAD_TYPE);
    arctic_frame_header_encode(buf, ARCTIC_FRAME_CREDIT, ARCTIC_CREDIT_SIZE);
    arctic_frame_header_decode(buf, &h);
    g_assert_cmpint(h.type, ==, ARCTIC_FRAME_CREDIT);
    g_assert_cmpint(h.length, ==, ARCTIC_CREDIT_SIZE);
    g_assert_cmpint(arctic_frame_header_check(&h), ==, ARCTIC_FRAME_OK);
    buf[2] = 1;                             /* flags must be zero */
    arctic_frame_header_decode(buf, &h);
    g_assert_cmpint(arctic_frame_header_check(&h), ==,
                    ARCTIC_FRAME_BAD_FLAGS);
    /* ...except a PACKET's priority bit, which names its credit. */
    arctic_packet_frame_encode(buf, ARCTIC_PRIORITY_HIGH, ARCTIC_WIRE_MIN_SIZE);
    arctic_frame_header_decode(buf, &h);
    g_assert_cmpint(h.flags, ==, R_ARCTIC_FRAME_FLAGS_PRIORITY_MASK);
    g_assert_cmpint(arctic_frame_header_check(&h), ==, ARCTIC_FRAME_OK);
    h.flags = 2;
    g_assert_cmpint(arctic_frame_header_check(&h), ==,
                    ARCTIC_FRAME_BAD_FLAGS);
    /*
     * WELCOME may say RINGS (link 1.1), CPU_WAKE (1.2) and TIMED (1.4),
     * and nothing else; HELLO TIMED only.
     */
    arctic_frame_header_encode_flags(buf, ARCTIC_FRAME_WELCOME,
                                     R_ARCTIC_WELCOME_FLAGS_RINGS_MASK |
                                     R_ARCTIC_WELCOME_FLAGS_CPU_WAKE_MASK |
                                     R_ARCTIC_WELCOME_FLAGS_TIMED_MASK |
                                     R_ARCTIC_WELCOME_FLAGS_DIRECT_MASK,
                                     ARCTIC_WELCOME_SIZE);
    arctic_frame_header_decode(buf, &h);
    g_assert_cmpint(h.flags, ==, 15);
    g_assert_cmpint(arctic_frame_header_check(&h), ==, ARCTIC_FRAME_OK);
    h.flags = 16;
    g_assert_cmpint(arctic_frame_header_check(&h), ==,
                    ARCTIC_FRAME_BAD_FLAGS);
    arctic_frame_header_encode_flags(buf, ARCTIC_FRAME_HELLO,
                                     R_ARCTIC_HELLO_FLAGS_TIMED_MASK |
                                     R_ARCTIC_HELLO_FLAGS_DIRECT_MASK,
                                     ARCTIC_HELLO_SIZE);
    arctic_frame_header_decode(buf, &h);
    g_assert_cmpint(h.flags, ==, 3);
    g_assert_cmpint(arctic_frame_header_check(&h), ==, ARCTIC_FRAME_OK);
    h.flags = 4;
    g_assert_cmpint(arctic_frame_header_check(&h), ==,
                    ARCTIC_FRAME_BAD_FLAGS);
}

/*
 * Direct rings (link 1.5): DIRECT_RING and DIRECT_STOP are 8 bytes with
 * no flags; the body names a node and a known role, its last two bytes 0.
 */
static void test_direct_frames(void)
{
    static const uint16_t types[] = {
        ARCTIC_FRAME_DIRECT_RING, ARCTIC_FRAME_DIRECT_STOP,
    };
    struct arctic_frame_header h = { .length = ARCTIC_DIRECT_SIZE };
    struct arctic_direct d = { .peer = 37, .role = ARCTIC_DIRECT_RECEIVE };
    uint8_t body[ARCTIC_DIRECT_SIZE];
    unsigned i;

    for (i = 0; i < G_N_ELEMENTS(types); i++) {
        h.type = types[i];
        h.flags = 0;
        h.length = ARCTIC_DIRECT_SIZE;
        g_assert_cmpint(arctic_frame_header_check(&h), ==, ARCTIC_FRAME_OK);
        h.length = ARCTIC_DIRECT_SIZE + 1;
        g_assert_cmpint(arctic_frame_header_check(&h), ==,
                        ARCTIC_FRAME_BAD_LENGTH);
        h.length = ARCTIC_DIRECT_SIZE;
        h.flags = 1;
        g_assert_cmpint(arctic_frame_header_check(&h), ==,
                        ARCTIC_FRAME_BAD_FLAGS);
    }
    arctic_direct_encode(body, &d);
    g_assert_cmpint(arctic_get_le32(body), ==, 37);
    g_assert_cmpint(arctic_get_le16(body + 4), ==, ARCTIC_DIRECT_RECEIVE);
    memset(&d, 0xff, sizeof(d));
    g_assert_true(arctic_direct_decode(body, &d));
    g_assert_cmpint(d.peer, ==, 37);
    g_assert_cmpint(d.role, ==, ARCTIC_DIRECT_RECEIVE);
    arctic_put_le16(body + 4, ARCTIC_DIRECT_ROLES);
    g_assert_false(arctic_direct_decode(body, &d));
    arctic_put_le16(body + 4, ARCTIC_DIRECT_SEND);
    arctic_put_le16(body + 6, 1);
    g_assert_false(arctic_direct_decode(body, &d));
    arctic_put_le16(body + 6, 0);
    arctic_put_le32(body, ARCTIC_LINK_MAX_NODES);
    g_assert_false(arctic_direct_decode(body, &d));
}

/*
 * Timed links (link 1.4): each frame of its size only; a TIMED_PACKET
 * a stamp and a whole wire packet, with the priority flag alone.
 */
static void test_timed_frames(void)
{
    static const struct {
        uint16_t type;
        uint32_t size;
    } fixed[] = {
        { ARCTIC_FRAME_TIME_READY, ARCTIC_TIME_READY_SIZE },
        { ARCTIC_FRAME_TIME_START, ARCTIC_TIME_START_SIZE },
        { ARCTIC_FRAME_TIME_SYNC, ARCTIC_TIME_SYNC_SIZE },
        { ARCTIC_FRAME_TIME_GRANT, ARCTIC_TIME_GRANT_SIZE },
    };
    struct arctic_frame_header h = { 0 };
    struct arctic_time_ready ready = { 500, 600, 12500, 128 }, r2;
    struct arctic_time_start start = { 1425, 1425, 925 }, s2;
    struct arctic_time_sync sync = { 1ull << 40, ARCTIC_TIME_NEVER }, y2;
    uint8_t body[32];
    unsigned i;

    for (i = 0; i < G_N_ELEMENTS(fixed); i++) {
        h.type = fixed[i].type;
        h.flags = 0;
        h.length = fixed[i].size;
        g_assert_cmpint(arctic_frame_header_check(&h), ==, ARCTIC_FRAME_OK);
        h.length = fixed[i].size + 1;
        g_assert_cmpint(arctic_frame_header_check(&h), ==,
                        ARCTIC_FRAME_BAD_LENGTH);
        h.length = fixed[i].size;
        h.flags = 1;
        g_assert_cmpint(arctic_frame_header_check(&h), ==,
                        ARCTIC_FRAME_BAD_FLAGS);
    }
    h.type = ARCTIC_FRAME_TIMED_PACKET;
    h.flags = R_ARCTIC_FRAME_FLAGS_PRIORITY_MASK;
    h.length = ARCTIC_TIMED_PACKET_HEADER + ARCTIC_WIRE_MIN_SIZE;
    g_assert_cmpint(arctic_frame_header_check(&h), ==, ARCTIC_FRAME_OK);
    h.length = ARCTIC_TIMED_PACKET_HEADER + ARCTIC_WIRE_MAX_SIZE;
    g_assert_cmpint(arctic_frame_header_check(&h), ==, ARCTIC_FRAME_OK);
    g_assert_cmpuint(h.length, <=, ARCTIC_LINK_MAX_BODY);
    h.length = ARCTIC_TIMED_PACKET_HEADER + ARCTIC_WIRE_MIN_SIZE - 1;
    g_assert_cmpint(arctic_frame_header_check(&h), ==,
                    ARCTIC_FRAME_BAD_LENGTH);
    h.length = ARCTIC_TIMED_PACKET_HEADER + ARCTIC_WIRE_MAX_SIZE + 1;
    g_assert_cmpint(arctic_frame_header_check(&h), ==,
                    ARCTIC_FRAME_BAD_LENGTH);
    h.length = ARCTIC_TIMED_PACKET_HEADER + ARCTIC_WIRE_MIN_SIZE;
    h.flags = 2;
    g_assert_cmpint(arctic_frame_header_check(&h), ==,
                    ARCTIC_FRAME_BAD_FLAGS);

    /* The bodies, byte for byte, and back. */
    arctic_time_ready_encode(body, &ready);
    g_assert_cmphex(arctic_get_le32(body + 12), ==, 128);
    arctic_time_ready_decode(body, &r2);
    g_assert_cmpmem(&r2, sizeof(r2), &ready, sizeof(ready));
    arctic_time_start_encode(body, &start);
    g_assert_cmphex(arctic_get_le64(body + 16), ==, 925);
    arctic_time_start_decode(body, &s2);
    g_assert_cmpmem(&s2, sizeof(s2), &start, sizeof(start));
    arctic_time_sync_encode(body, &sync);
    g_assert_cmphex(body[5], ==, 1);             /* 2^40, little-endian */
    g_assert_cmphex(arctic_get_le64(body + 8), ==, ARCTIC_TIME_NEVER);
    arctic_time_sync_decode(body, &y2);
    g_assert_cmpmem(&y2, sizeof(y2), &sync, sizeof(sync));
}

/*
 * The timed mode's costs (arctic/timing.h): a message moves its command
 * words and payload across PCI, a DMA packet its 64 data bytes, an ack
 * nothing; an engine charges its fixed cost for all but DMA data.
 */
static void test_timing_costs(void)
{
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE] = { 0 };
    size_t size;

    /* A message of 4 payload words: 8 + 16 bytes, 300 ns at 80 MB/s. */
    size = arctic_wire_size(ARCTIC_MPI_LENGTH_EXTRA + 4);
    pkt[0] = ARCTIC_E2E_DATA;
    arctic_put_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET + 4,
                    ARCTIC_FIELD_PREP(ARCTIC_W1, LENGTH,
                                      ARCTIC_MPI_LENGTH_EXTRA + 4));
    g_assert_false(arctic_time_is_dma_data(pkt));
    g_assert_cmpuint(arctic_time_pci_bytes(pkt, size), ==, 24);
    g_assert_cmpuint(arctic_time_niu_cost(ARCTIC_TIME_TX_NS,
                                          ARCTIC_TIME_PCI_PS_PER_BYTE, pkt,
                                          size), ==, 500 + 300);
    /* Remote-DMA data: 64 bytes, 800 ns, no fixed cost. */
    size = arctic_wire_size(ARCTIC_DMA_PACKET_LENGTH);
    arctic_put_le32(pkt + ARCTIC_WIRE_WORDS_OFFSET + 4,
                    ARCTIC_FIELD_PREP(ARCTIC_W1, MODE, ARCTIC_MODE_DMA) |
                    ARCTIC_FIELD_PREP(ARCTIC_W1, LENGTH,
                                      ARCTIC_DMA_PACKET_LENGTH));
    g_assert_true(arctic_time_is_dma_data(pkt));
    g_assert_cmpuint(arctic_time_pci_bytes(pkt, size), ==, 64);
    g_assert_cmpuint(arctic_time_niu_cost(ARCTIC_TIME_TX_NS,
                                          ARCTIC_TIME_PCI_PS_PER_BYTE, pkt,
                                          size), ==, 800);
    /* An ack: the fixed cost only. */
    pkt[0] = ARCTIC_E2E_ACK;
    size = arctic_wire_size(ARCTIC_CONTROL_PACKET_LENGTH);
    g_assert_false(arctic_time_is_dma_data(pkt));
    g_assert_cmpuint(arctic_time_pci_bytes(pkt, size), ==, 0);
    g_assert_cmpuint(arctic_time_niu_cost(ARCTIC_TIME_TX_NS,
                                          ARCTIC_TIME_PCI_PS_PER_BYTE, pkt,
                                          size), ==, 500);
    /* The cheapest packet: the smaller of the two. */
    g_assert_cmpuint(arctic_time_niu_min_cost(500, 12500), ==, 500);
    g_assert_cmpuint(arctic_time_niu_min_cost(1000, 12500), ==, 800);
    /* Serialisation rounds up to the nanosecond. */
    g_assert_cmpuint(arctic_time_serialise(36, 6250), ==, 225);
    g_assert_cmpuint(arctic_time_serialise(1, 6250), ==, 7);
}

/* A stream of frames: HELLO, a PACKET, a CREDIT; returns its length. */
static size_t frame_stream(uint8_t *buf)
{
    size_t off = 0;
    unsigned i;

    arctic_frame_header_encode(buf, ARCTIC_FRAME_HELLO, ARCTIC_HELLO_SIZE);
    for (i = 0; i < ARCTIC_HELLO_SIZE; i++) {
        buf[ARCTIC_LINK_HEADER_SIZE + i] = 0x10 + i;
    }
    off += ARCTIC_LINK_HEADER_SIZE + ARCTIC_HELLO_SIZE;
    arctic_packet_frame_encode(buf + off, ARCTIC_PRIORITY_HIGH,
                               ARCTIC_WIRE_MAX_SIZE);
    for (i = 0; i < ARCTIC_WIRE_MAX_SIZE; i++) {
        buf[off + ARCTIC_LINK_HEADER_SIZE + i] = i;
    }
    off += ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MAX_SIZE;
    arctic_frame_header_encode(buf + off, ARCTIC_FRAME_CREDIT,
                               ARCTIC_CREDIT_SIZE);
    memset(buf + off + ARCTIC_LINK_HEADER_SIZE, 0x7c, ARCTIC_CREDIT_SIZE);
    return off + ARCTIC_LINK_HEADER_SIZE + ARCTIC_CREDIT_SIZE;
}

/*
 * The frame reader gives the same frames whatever the stream is cut
 * into: whole, byte by byte, or in pieces of every size; whole frames in
 * one piece come out in place, without a copy.
 */
static void test_frame_reader(void)
{
    uint8_t stream[1024];
    size_t len = frame_stream(stream), piece;
    const uint16_t types[] = { ARCTIC_FRAME_HELLO, ARCTIC_FRAME_PACKET,
                               ARCTIC_FRAME_CREDIT };
    const size_t offsets[] = {
        0, ARCTIC_LINK_HEADER_SIZE + ARCTIC_HELLO_SIZE,
        2 * ARCTIC_LINK_HEADER_SIZE + ARCTIC_HELLO_SIZE + ARCTIC_WIRE_MAX_SIZE,
    };

    for (piece = 1; piece <= len; piece++) {
        struct arctic_frame_reader r;
        size_t done = 0;
        unsigned frames = 0;

        arctic_frame_reader_reset(&r);
        while (done < len) {
            const uint8_t *p = stream + done;
            size_t n = MIN(piece, len - done), before = n;
            enum arctic_frame_status st;

            while ((st = arctic_frame_read(&r, &p, &n)) ==
                   ARCTIC_FRAME_WHOLE) {
                size_t body = offsets[frames] + ARCTIC_LINK_HEADER_SIZE;

                g_assert_cmpuint(frames, <, 3);
                g_assert_cmpuint(r.header.type, ==, types[frames]);
                g_assert_cmpmem(r.body, r.header.length, stream + body,
                                r.header.length);
                /* In place exactly when the frame lay in this piece. */
                g_assert_true((r.body == stream + body) ==
                              (offsets[frames] >= done));
                frames++;
            }
            g_assert_cmpint(st, ==, ARCTIC_FRAME_NEED_MORE);
            g_assert_cmpuint(n, ==, 0);
            done += before;
        }
        g_assert_cmpuint(frames, ==, 3);
        g_assert_cmpuint(r.len, ==, 0);
    }
}

/* A bad header is refused however it arrives, and said why. */
static void test_frame_reader_malformed(void)
{
    uint8_t stream[64];
    unsigned piece;

    arctic_frame_header_encode(stream, ARCTIC_FRAME_CREDIT,
                               ARCTIC_CREDIT_SIZE + 1);
    for (piece = 1; piece <= ARCTIC_LINK_HEADER_SIZE; piece++) {
        struct arctic_frame_reader r;
        const uint8_t *p = stream;
        size_t n = piece, fed = piece;
        enum arctic_frame_status st;

        arctic_frame_reader_reset(&r);
        while ((st = arctic_frame_read(&r, &p, &n)) ==
               ARCTIC_FRAME_NEED_MORE) {
            g_assert_cmpuint(fed, <, ARCTIC_LINK_HEADER_SIZE);
            n = MIN(piece, ARCTIC_LINK_HEADER_SIZE - fed);
            fed += n;
        }
        g_assert_cmpint(st, ==, ARCTIC_FRAME_MALFORMED);
        g_assert_cmpint(r.error, ==, ARCTIC_FRAME_BAD_LENGTH);
        g_assert_cmpuint(r.header.type, ==, ARCTIC_FRAME_CREDIT);
        g_assert_cmpuint(r.len, ==, 0);
    }
}

/*
 * Follow route bits through the tree described in route.h, independently
 * of arctic_route_entry(): climb HOPS levels taking the chosen up ports,
 * then descend by the downroute bits.  Returns the node reached.
 */
static unsigned walk(unsigned src, uint32_t entry)
{
    uint32_t up = ARCTIC_FIELD_GET(ROUTE_ENTRY, UPROUTE, entry);
    uint32_t down = ARCTIC_FIELD_GET(ROUTE_ENTRY, DOWNROUTE, entry);
    unsigned hops = ARCTIC_FIELD_GET(UPROUTE, HOPS, up);
    unsigned router = src >> 1, level = 0, h;

    for (h = 0; h < hops; h++, level++) {
        unsigned port = (ARCTIC_FIELD_GET(UPROUTE, CHOICE, up) >> h) & 1;
        router = (router & ~(1u << level)) | (port << level);
    }
    for (;;) {
        unsigned port = (down >> level) & 1;
        if (level == 0) {
            return router << 1 | port;
        }
        router = (router & ~(1u << (level - 1))) | (port << (level - 1));
        level--;
    }
}

/* A REJECT's text is the peer's: what reaches a log is printable. */
static void test_reject_text_escaped(void)
{
    uint8_t body[ARCTIC_REJECT_SIZE] = { 0 };
    char text[ARCTIC_REJECT_TEXT_ESCAPED_SIZE];
    size_t i;

    arctic_put_le32(body, ARCTIC_REJECT_NODE_BUSY);
    memcpy(body + 4, "node 3 busy", 11);
    g_assert_cmpuint(arctic_reject_decode(body, text), ==,
                     ARCTIC_REJECT_NODE_BUSY);
    g_assert_cmpstr(text, ==, "node 3 busy");

    /* An escape sequence (clear screen), a backslash, a byte above 0x7e. */
    memset(body + 4, 0, ARCTIC_LINK_REJECT_TEXT_SIZE);
    memcpy(body + 4, "\x1b[2Ja\\b\xff", 8);
    arctic_reject_decode(body, text);
    g_assert_cmpstr(text, ==, "\\x1b[2Ja\\x5cb\\xff");

    /* No NUL at all: bounded, every byte escaped at most. */
    memset(body + 4, 0x07, ARCTIC_LINK_REJECT_TEXT_SIZE);
    arctic_reject_decode(body, text);
    g_assert_cmpuint(strlen(text), ==, 4 * ARCTIC_LINK_REJECT_TEXT_SIZE);
    for (i = 0; text[i]; i++) {
        g_assert_true(text[i] >= 0x20 && text[i] < 0x7f);
    }
}

static void test_routes_reach_destination(void)
{
    static const unsigned sizes[] = { 2, 3, 16, 64, 256 };
    static uint32_t table[2 * ARCTIC_S];
    unsigned i, src, dst;

    g_assert_cmpint(arctic_tree_levels(2), ==, 1);
    g_assert_cmpint(arctic_tree_levels(16), ==, 4);
    g_assert_cmpint(arctic_tree_levels(17), ==, 5);
    g_assert_cmpint(arctic_tree_levels(256), ==, 8);
    for (i = 0; i < G_N_ELEMENTS(sizes); i++) {
        unsigned nodes = sizes[i];
        for (src = 0; src < nodes; src++) {
            arctic_route_table_fill(table, src, nodes);
            for (dst = 0; dst < nodes; dst++) {
                uint32_t hi = table[ARCTIC_ROUTE_TABLE_HIGH * nodes + dst];
                uint32_t lo = table[ARCTIC_ROUTE_TABLE_LOW * nodes + dst];
                g_assert_cmpint(walk(src, hi), ==, dst);
                g_assert_cmpint(arctic_route_destination(src, hi & 0xffff,
                                                         hi & 0xffff0000),
                                ==, dst);
                g_assert_cmpint(walk(src, lo), ==, dst);
                g_assert_true(ARCTIC_FIELD_GET(ROUTE_ENTRY, VALID, hi));
                g_assert_cmpint(ARCTIC_FIELD_GET(ROUTE_ENTRY, PRIORITY, hi),
                                ==, 1);
                g_assert_cmpint(ARCTIC_FIELD_GET(ROUTE_ENTRY, PRIORITY, lo),
                                ==, 0);
                g_assert_cmpint(ARCTIC_FIELD_GET(UPROUTE, HOPS,
                                    ARCTIC_FIELD_GET(ROUTE_ENTRY, UPROUTE,
                                                     hi)),
                                ==, arctic_turn_level(src, dst));
            }
        }
    }
}

static void test_slot_layout(void)
{
    g_assert_cmpint(sizeof(struct arctic_mpi_slot), ==, ARCTIC_SLOT_SIZE);
    g_assert_cmpint(offsetof(struct arctic_mpi_slot, command), ==,
                    ARCTIC_SLOT_COMMAND0);
    g_assert_cmpint(offsetof(struct arctic_dma_request, target), ==,
                    ARCTIC_DMA_SLOT_TARGET);
    g_assert_cmpint(offsetof(struct arctic_dma_request, source), ==,
                    ARCTIC_DMA_SLOT_SOURCE);
    g_assert_cmphex(R_MPI_HEADER_VALID_MASK, ==, 0x80000000u);
    g_assert_cmphex(R_MPI_HEADER_DEST_MASK, ==, 0x00ff0000u);
    g_assert_cmphex(R_MPI_HEADER_TYPE_MASK, ==, 0x00001fc0u);
    /* The lap bit sits in what seed 002 reserves, and the head's INDEX
     * counts exactly one queue, so LAP flips as INDEX wraps. */
    g_assert_cmphex(R_MPI_HEADER_LAP_MASK, ==, 0x40000000u);
    g_assert_cmphex(R_MPI_HEADER_RESERVED_MASK & R_MPI_HEADER_LAP_MASK, ==, 0);
    g_assert_cmphex(R_MPI_HEADER_RESERVED_MASK | R_MPI_HEADER_LAP_MASK |
                    R_MPI_HEADER_VALID_MASK, ==, 0xff000000u);
    g_assert_cmpint(R_EP_RX_HD_INDEX_LENGTH, ==, ARCTIC_LOG2_N);
    g_assert_cmpint(R_EP_RX_HD_LAP_SHIFT, ==, ARCTIC_LOG2_N);
    g_assert_cmpint(ARCTIC_EP_OFFSET(ARCTIC_ENDPOINTS, 0), <=,
                    ARCTIC_BAR_CONTROL_SIZE);
    g_assert_cmpint(ARCTIC_ROUTE_OFFSET(1, ARCTIC_S), <=,
                    ARCTIC_EP_BLOCK_BASE);
    g_assert_cmpint(ARCTIC_COUNTER_OFFSET(ARCTIC_NUM_COUNTERS), <=,
                    A_NIU_TX_CTRL);
}

/*
 * Every counter has a name a sysfs file can carry in the kernel's style
 * (lower case, digits, underscores: statistics/rx_packets), and no two
 * share one.
 */
static void test_counter_names(void)
{
    unsigned c, d;

    for (c = 0; c < ARCTIC_NUM_COUNTERS; c++) {
        const char *name = arctic_counter_name(c);

        g_assert_cmpstr(name, !=, "unknown");
        g_assert_cmpint(strlen(name), >, 0);
        g_assert_cmpint(strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_"),
                        ==, strlen(name));
        for (d = 0; d < c; d++) {
            g_assert_cmpstr(name, !=, arctic_counter_name(d));
        }
    }
    g_assert_cmpstr(arctic_counter_name(ARCTIC_NUM_COUNTERS), ==, "unknown");
}

/* Every error cause has a name of its own, for logs and the driver. */
static void test_error_names(void)
{
    unsigned c, d;

    for (c = 0; c < ARCTIC_NUM_ERRORS; c++) {
        const char *name = arctic_error_name(c);

        g_assert_nonnull(name);
        g_assert_cmpstr(name, !=, "unknown");
        g_assert_cmpint(strlen(name), >, 0);
        for (d = 0; d < c; d++) {
            g_assert_cmpstr(name, !=, arctic_error_name(d));
        }
    }
    g_assert_cmpstr(arctic_error_name(ARCTIC_NUM_ERRORS), ==, "unknown");
    /* ERROR_CAUSE is a 32-bit mask of them */
    g_assert_cmpint(ARCTIC_NUM_ERRORS, <=, 32);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/contract/crc", test_crc_check_value);
    g_test_add_func("/contract/crc-fast", test_crc_fast_matches_table);
    g_test_add_func("/contract/wire-check", test_wire_check);
    g_test_add_func("/contract/e2e-shared-fields", test_e2e_shared_fields);
    g_test_add_func("/contract/wire-check-corruption",
                    test_wire_check_corruption);
    g_test_add_func("/contract/frame-header-check", test_frame_header_check);
    g_test_add_func("/contract/timed-frames", test_timed_frames);
    g_test_add_func("/contract/direct-frames", test_direct_frames);
    g_test_add_func("/contract/timing-costs", test_timing_costs);
    g_test_add_func("/contract/frame-reader", test_frame_reader);
    g_test_add_func("/contract/frame-reader-malformed",
                    test_frame_reader_malformed);
    g_test_add_func("/contract/routes", test_routes_reach_destination);
    g_test_add_func("/contract/reject-text", test_reject_text_escaped);
    g_test_add_func("/contract/slots", test_slot_layout);
    g_test_add_func("/contract/counter-names", test_counter_names);
    g_test_add_func("/contract/error-names", test_error_names);
    return g_test_run();
}
