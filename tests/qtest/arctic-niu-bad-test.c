/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arctic-niu qtests: bad input from the guest, the network and the command
 * line.
 */

#include "qemu/osdep.h"
#include "arctic-niu-test.h"

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

/*
 * q35's I/O APIC: registers, not RAM.  A receive queue over them must fail
 * as a DMA error (the NIU's DMA reaches RAM only), not write the packet
 * into another device's registers from the link thread.
 */
#define IOAPIC_BASE 0xfec00000ull

static void test_queue_over_other_device(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t payload[4] = { 0x11, 0x22, 0x33, 0x44 };
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    size_t size;

    reg_w(n, A_NIU_RX_CTRL, 0);
    ep_w(n, 0, A_EP_RX_QBASE_LO, (uint32_t)IOAPIC_BASE);
    ep_w(n, 0, A_EP_RX_QBASE_HI, IOAPIC_BASE >> 32);
    reg_w(n, A_NIU_RX_CTRL, R_NIU_CTRL_ENABLE_MASK);
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0, 1,
                     2, 3, payload, ARRAY_SIZE(payload));
    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_NACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, 0, ARCTIC_NACK_RX_ERROR);
    expect_errors(n, 1u << ARCTIC_ERR_DMA);
    g_assert_cmpint(counter(n, ARCTIC_CNT_RX_HI_PACKETS), ==, 0);
    g_assert_cmpint(ep_r(n, 0, A_EP_HI_RX_HD), ==, 0);
    niu_stop(n);
}

/*
 * Who is to blame decides where an error is logged: the guest's mistakes
 * under -d guest_errors, the network's as a warning on stderr, never as
 * the guest's.
 */
static void test_error_log_classes(void)
{
    g_autofree char *dir = g_dir_make_tmp("arctic-niu-log-XXXXXX", NULL);
    g_autofree char *log = g_build_filename(dir, "qemu.log", NULL);
    g_autofree char *args = g_strdup_printf("-d guest_errors -D %s", log);
    g_autofree char *guest_error = g_strdup_printf(
        "arctic-niu: node %u: test DMA command %u", NIU_NODE,
        ARCTIC_TEST_DMA_CHECK + 1);
    g_autofree char *text = NULL;
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    size_t size;
    Niu *n;

    n = niu_start_node_args("listen", NIU_NODE, "", args);
    niu_setup(n);
    link_handshake(n, 8, 8);
    /* The guest's: a test DMA command that does not exist. */
    reg_w(n, A_NIU_TEST_DMA_SIZE, 64);
    reg_w(n, A_NIU_TEST_DMA_CTRL, ARCTIC_TEST_DMA_CHECK + 1);
    /* The network's: a packet corrupted in flight. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0, 1,
                     2, 3, NULL, 0);
    wire[ARCTIC_WIRE_WORDS_OFFSET + 9] ^= 0x40;
    link_send_packet(n, wire, size);
    wait_counter(n, ARCTIC_CNT_BAD_PACKETS, 1);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE |
                  1u << ARCTIC_ERR_BAD_PACKET);
    niu_stop(n);

    g_assert_true(g_file_get_contents(log, &text, NULL, NULL));
    g_assert_nonnull(strstr(text, guest_error));
    g_assert_null(strstr(text, "malformed packet"));
    unlink(log);
    rmdir(dir);
}

/*
 * The @count-th bad packet was dropped, and ERROR_INFO names its reason
 * (enum arctic_wire_error).
 */
static void expect_dropped(Niu *n, uint32_t count, enum arctic_wire_error why)
{
    uint32_t info;

    wait_counter(n, ARCTIC_CNT_BAD_PACKETS, count);
    info = reg_r(n, A_NIU_ERROR_INFO);
    g_assert_cmpint(FIELD_EX32(info, NIU_ERROR_INFO, CAUSE), ==,
                    ARCTIC_ERR_BAD_PACKET);
    g_assert_cmpint(FIELD_EX32(info, NIU_ERROR_INFO, DETAIL), ==, why);
}

static void test_bad_packets_from_network(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t w0;
    size_t size;

    mark_rx_slots(n);
    /* Corrupted in flight: CRC mismatch, dropped without an answer. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0, 1,
                     2, 3, NULL, 0);
    wire[ARCTIC_WIRE_WORDS_OFFSET + 9] ^= 0x40;
    link_send_packet(n, wire, size);
    expect_dropped(n, 1, ARCTIC_WIRE_BAD_CRC);
    /* Misrouted: meant for node 2. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0, 1,
                     2, 3, NULL, 0);
    wire[4] = 2;
    arctic_wire_seal(wire, size);
    link_send_packet(n, wire, size);
    expect_dropped(n, 2, ARCTIC_WIRE_MISROUTED);
    /* Length field disagreeing with the frame. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0, 1,
                     2, 3, NULL, 0);
    wire[ARCTIC_WIRE_WORDS_OFFSET + 4] += 1;
    arctic_wire_seal(wire, size);
    link_send_packet(n, wire, size);
    expect_dropped(n, 3, ARCTIC_WIRE_BAD_LENGTH);
    /* An ack with a data packet's length: no incarnation word. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0, 1,
                     2, 3, NULL, 0);
    wire[0] = ARCTIC_E2E_ACK;
    arctic_wire_seal(wire, size);
    link_send_packet(n, wire, size);
    expect_dropped(n, 4, ARCTIC_WIRE_BAD_ANSWER);
    /* Data of a high-priority stream that travelled low. */
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0, 1,
                     2, 3, NULL, 0);
    w0 = arctic_get_le32(wire + ARCTIC_WIRE_WORDS_OFFSET);
    arctic_put_le32(wire + ARCTIC_WIRE_WORDS_OFFSET,
                    FIELD_DP32(w0, ARCTIC_W0, PRIORITY, ARCTIC_PRIORITY_LOW));
    arctic_wire_seal(wire, size);
    link_send_packet(n, wire, size);
    expect_dropped(n, 5, ARCTIC_WIRE_BAD_PRIORITY);
    /* An MPI packet claiming 21 payload words is dropped but acked. */
    {
        uint32_t big[ARCTIC_MAX_PAYLOAD + 1] = { 0 };
        size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch,
                         0, 1, 2, 3, big, ARCTIC_MAX_PAYLOAD + 1);
        link_send_packet(n, wire, size);
        expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                       n->peer_epoch, 0, 0);
    }
    g_assert_cmpint(counter(n, ARCTIC_CNT_BAD_PACKETS), ==, 6);
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
    link_write_bytes(n, junk, sizeof(junk));
    g_assert_cmpint(link_read(n, &type, buf, &len, WAIT_MS), ==, -1);
    link_close(n);
    expect_errors(n, 1u << ARCTIC_ERR_LINK_PROTOCOL);
    /* It comes back; now a frame too large for any buffer. */
    link_handshake(n, 8, 8);
    arctic_frame_header_encode(junk, ARCTIC_FRAME_PACKET, 1u << 30);
    link_write_bytes(n, junk, ARCTIC_LINK_HEADER_SIZE);
    g_assert_cmpint(link_read(n, &type, buf, &len, WAIT_MS), ==, -1);
    link_close(n);
    expect_errors(n, 1u << ARCTIC_ERR_LINK_PROTOCOL);
    /*
     * More packets than the credits granted, in one burst so the device
     * has no chance to return credits in between.
     */
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
        link_write_bytes(n, burst, off);
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
    uint32_t v = 0x77, epoch, downs;
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
    g_assert_true(FIELD_EX32(reg_r(n, A_NIU_LINK_STATUS), NIU_LINK_STATUS,
                             UP));
    downs = counter(n, ARCTIC_CNT_LINK_DOWNS);
    link_write_bytes(n, junk, sizeof(junk));
    link_close(n);
    wait_link_dropped(n, downs);
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
                          "x-poll-min-ns=10,x-poll-max-ns=5", "lines=7",
                          "lines=256", "x-ack-delay-ns=600000",
                          /* one link, not two */
                          "chardev=c,link-socket=/nonexistent/switch.sock",
                          /* a template has no link and no clock */
                          "template=on,chardev=c", "template=on,timed=on",
                          "template=on,link-socket=/nonexistent/sw.sock",
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

void niu_test_add_bad(void)
{
    qtest_add_func("/arctic-niu/bad/slots", test_bad_slots_refused);
    qtest_add_func("/arctic-niu/bad/queue-memory", test_bad_queue_memory);
    qtest_add_func("/arctic-niu/bad/queue-over-device",
                   test_queue_over_other_device);
    qtest_add_func("/arctic-niu/bad/packets", test_bad_packets_from_network);
    qtest_add_func("/arctic-niu/bad/log-classes", test_error_log_classes);
    qtest_add_func("/arctic-niu/bad/frames", test_bad_frames_reset_link);
    qtest_add_func("/arctic-niu/bad/properties", test_bad_properties);
    qtest_add_func("/arctic-niu/bad/random-input", test_random_input_survives);
}
