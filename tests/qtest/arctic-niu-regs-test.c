/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arctic-niu qtests: the register file, interrupts and the "state"
 * introspection.
 */

#include "qemu/osdep.h"
#include "arctic-niu-test.h"

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
    g_assert_cmpint(FIELD_EX32(caps, NIU_CAPS, LINES), ==,
                    ARCTIC_DEFAULT_LINES);
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
    /*
     * 64 KiB from 4 KiB below 2^64 would wrap on to address 0: refused
     * before a byte moves (the first 64 KiB of RAM keep their words).
     */
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
    /*
     * The last 4 bytes below 2^64 do not wrap: taken (and fail as DMA
     * to no memory, which is another matter).
     */
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

/* The first word of the test DMA's 64 bytes at SCRATCH_MEM. */
static uint32_t scratch_word0(Niu *n)
{
    return le32_to_cpu(qtest_readl(n->qts, SCRATCH_MEM));
}

/* The test DMA's 64 bytes at @addr, with @seed's pattern. */
static void test_dma_at(Niu *n, uint64_t addr, uint32_t seed)
{
    reg_w(n, A_NIU_TEST_DMA_ADDR_LO, (uint32_t)addr);
    reg_w(n, A_NIU_TEST_DMA_ADDR_HI, addr >> 32);
    reg_w(n, A_NIU_TEST_DMA_SIZE, 64);
    reg_w(n, A_NIU_TEST_DMA_SEED, seed);
}

/*
 * The NIU maps the pages its DMA reaches, a few per set of a hash: many
 * more pages than it keeps, visited twice in turn, must each get their
 * own words, and each read back its own.
 */
static void test_dma_many_pages(void)
{
    enum { PAGES = 160, PAGE = 4096 };
    Niu *n = niu_start(false);
    const uint32_t done = R_NIU_TEST_DMA_STATUS_DONE_MASK;
    unsigned i, lap;

    for (lap = 0; lap < 2; lap++) {
        for (i = 0; i < PAGES; i++) {
            test_dma_at(n, SCRATCH_MEM + (uint64_t)i * PAGE + lap * 64,
                        lap << 16 | i);
            g_assert_cmphex(test_dma_run(n, ARCTIC_TEST_DMA_FILL), ==, done);
        }
    }
    for (lap = 0; lap < 2; lap++) {
        for (i = 0; i < PAGES; i++) {
            uint64_t addr = SCRATCH_MEM + (uint64_t)i * PAGE + lap * 64;

            g_assert_cmphex(le32_to_cpu(qtest_readl(n->qts, addr + 4)), ==,
                            arctic_test_pattern(lap << 16 | i, 1));
            test_dma_at(n, addr, lap << 16 | i);
            g_assert_cmphex(test_dma_run(n, ARCTIC_TEST_DMA_CHECK), ==, done);
        }
    }
    expect_errors(n, 0);
    niu_stop(n);
}

/*
 * A change of the memory map must take the NIU's mappings away: with bus
 * mastering off, a page it has mapped is refused in both directions and
 * keeps its words.
 */
static void test_dma_follows_memory_map(void)
{
    Niu *n = niu_start(false);
    const uint32_t done = R_NIU_TEST_DMA_STATUS_DONE_MASK;
    uint16_t cmd = qpci_config_readw(n->dev, PCI_COMMAND);

    test_dma_at(n, SCRATCH_MEM, 0x1111);
    g_assert_cmphex(test_dma_run(n, ARCTIC_TEST_DMA_FILL), ==, done);
    g_assert_cmphex(test_dma_run(n, ARCTIC_TEST_DMA_CHECK), ==, done);
    g_assert_cmphex(scratch_word0(n), ==, arctic_test_pattern(0x1111, 0));

    g_assert_true(cmd & PCI_COMMAND_MASTER);
    qpci_config_writew(n->dev, PCI_COMMAND, cmd & ~PCI_COMMAND_MASTER);
    g_assert_cmphex(test_dma_run(n, ARCTIC_TEST_DMA_CHECK), ==,
                    done | R_NIU_TEST_DMA_STATUS_DMA_ERROR_MASK);
    reg_w(n, A_NIU_TEST_DMA_SEED, 0x2222);
    g_assert_cmphex(test_dma_run(n, ARCTIC_TEST_DMA_FILL), ==,
                    done | R_NIU_TEST_DMA_STATUS_DMA_ERROR_MASK);
    g_assert_cmphex(scratch_word0(n), ==, arctic_test_pattern(0x1111, 0));
    expect_errors(n, 1u << ARCTIC_ERR_DMA);

    qpci_config_writew(n->dev, PCI_COMMAND, cmd);
    g_assert_cmphex(test_dma_run(n, ARCTIC_TEST_DMA_FILL), ==, done);
    g_assert_cmphex(scratch_word0(n), ==, arctic_test_pattern(0x2222, 0));
    expect_errors(n, 0);
    niu_stop(n);
}

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

/*
 * A message that arrives while the guest does nothing fires its vector:
 * whoever takes the input (the link thread, or the main loop for a
 * chardev) must signal MSI-X, with no register access to help it.
 */
static void test_irq_msix_rx_unaided(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    uint32_t v = 0x5a5a;
    size_t size;
    int ms;

    qpci_msix_enable(n->dev);
    mark_rx_slots(n);
    arm(n, 0, R_USER_IRQ_ARM_RX_MASK);
    size = peer_data(n, wire, PEER, ARCTIC_PRIORITY_HIGH, n->peer_epoch, 0,
                     3, 1, 2, &v, 1);
    link_send_packet(n, wire, size);
    /* Only the PBA is read (no NIU register) until the vector shows. */
    for (ms = 0; ms < 5000 && !qpci_msix_pending(n->dev, ARCTIC_MSIX_RX + 0);
         ms++) {
        g_usleep(1000);
    }
    g_assert_true(qpci_msix_pending(n->dev, ARCTIC_MSIX_RX + 0));
    g_assert_false(qpci_msix_pending(n->dev, ARCTIC_MSIX_TX + 0));
    g_assert_cmphex(reg_r(n, A_NIU_IRQ_STATUS), ==, 1u << R_NIU_IRQ_RX_SHIFT);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 3, 1, 2, &v, 1);
    qpci_msix_disable(n->dev);
    niu_stop(n);
}

/*
 * MSI-X: each cause has its vector (entries start masked, so a fired
 * vector shows as pending).
 */
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

/*
 * QMP and HMP `qom-get .../niu state`: link, datapaths, last error,
 * counters, the streams with traffic and each endpoint's queues.
 */
static void test_state_introspection(void)
{
    Niu *n = niu_start_linked(8, 8);
    uint32_t v = 1, epoch;
    QDict *rsp, *state, *counters, *ep0, *stream;
    QList *eps, *streams;
    g_autofree char *hmp = NULL;

    guest_send(n, ARCTIC_TXQ_LO, 2, 1, 0, 0, &v, 1);
    doorbell(n);
    epoch = expect_data(n, 2, ARCTIC_PRIORITY_LOW, 0, 1, 0, 0, &v, 1);

    /* Sent, not acked: one line waits, the retry timer is armed. */
    state = niu_state(n, &rsp);
    g_assert_cmpint(qdict_get_int(state, "e2e-lines-busy-low"), ==, 1);
    g_assert_cmpint(qdict_get_int(state, "e2e-lines-busy-high"), ==, 0);
    g_assert_cmpint(qdict_get_int(state, "e2e-retry-due-ns"), >=, 0);
    streams = qdict_get_qlist(state, "streams");
    g_assert_cmpint(qlist_size(streams), ==, 1);
    stream = qobject_to(QDict, qlist_peek(streams));
    g_assert_cmpint(qdict_get_int(stream, "node"), ==, 2);
    g_assert_cmpstr(qdict_get_str(stream, "priority"), ==, "low");
    g_assert_cmpint(qdict_get_int(stream, "lines-busy"), ==, 1);
    g_assert_cmpint(qdict_get_int(stream, "lines-queued"), ==, 0);
    g_assert_cmpint(qdict_get_int(stream, "tx-epoch"), ==, epoch);
    g_assert_cmpint(qdict_get_int(stream, "tx-next-seq"), ==, 1);
    g_assert_false(qdict_get_bool(stream, "tx-acked"));
    g_assert_false(qdict_get_bool(stream, "rx-known"));
    qobject_unref(rsp);

    peer_control(n, 2, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_LOW, epoch, 0, 0);
    reg_w(n, A_NIU_ID, 0);          /* leave an error behind */

    state = niu_state(n, &rsp);
    g_assert_cmpint(qdict_get_int(state, "e2e-lines-busy-low"), ==, 0);
    stream = qobject_to(QDict, qlist_peek(qdict_get_qlist(state, "streams")));
    g_assert_cmpint(qdict_get_int(stream, "lines-busy"), ==, 0);
    g_assert_cmpint(qdict_get_int(stream, "next-deadline-ns"), ==, -1);
    g_assert_true(qdict_get_bool(stream, "tx-acked"));
    g_assert_cmpint(qdict_get_int(state, "node-id"), ==, NIU_NODE);
    g_assert_cmpint(qdict_get_int(state, "num-nodes"), ==, NET_NODES);
    g_assert_cmpstr(qdict_get_str(state, "link"), ==, "up");
    g_assert_cmpstr(qdict_get_str(state, "link-transport"), ==,
                    link_thread() ? "thread" : "chardev");
    g_assert_cmpint(qdict_get_bool(state, "link-rings"), ==,
                    link_rings_wanted());
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

void niu_test_add_regs(void)
{
    qtest_add_func("/arctic-niu/registers/reset-values",
                   test_identity_and_reset_values);
    qtest_add_func("/arctic-niu/registers/semantics", test_register_semantics);
    qtest_add_func("/arctic-niu/registers/test-dma", test_dma_self_test);
    qtest_add_func("/arctic-niu/registers/test-dma-memory-map",
                   test_dma_follows_memory_map);
    qtest_add_func("/arctic-niu/registers/test-dma-many-pages",
                   test_dma_many_pages);
    qtest_add_func("/arctic-niu/irq/intx-one-shot", test_irq_intx_one_shot);
    qtest_add_func("/arctic-niu/irq/msix-vectors", test_irq_msix_vectors);
    qtest_add_func("/arctic-niu/irq/msix-rx-unaided",
                   test_irq_msix_rx_unaided);
    qtest_add_func("/arctic-niu/state", test_state_introspection);
}
