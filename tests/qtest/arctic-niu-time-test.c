/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qtests of timed mode (timed=on, docs/timed-mode.md, link 1.4): the
 * device keeps the cluster's virtual time with a timed switch, which the
 * test plays from a thread of its own (the device waits for it in
 * realize, in the TIME_CTRL.START write and at every grant, while the
 * test's thread waits for QEMU).  The qtest clock stands in for icount's:
 * it moves only when the test steps it, so every stamp and every delivery
 * can be checked to the nanosecond.
 */

#include "qemu/osdep.h"
#include <glib/gstdio.h>
#include "libqtest.h"
#include "arctic-niu-test.h"
#include "arctic/timing.h"

/* The timed switch the test plays: its policy, and what it saw. */
typedef struct {
    uint64_t at;
    size_t size;
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
} FakeDelivery;

typedef struct {
    Niu *n;
    GThread *thread;
    GMutex lock;
    bool quit;
    /*
     * policy: the first grant, then each grant this far past the time
     * reached; what to deliver before the next grant; or end the link at
     * the next TIME_SYNC instead
     */
    uint64_t start_grant;
    uint64_t step;
    GQueue deliveries;
    bool close_at_sync;
    /* what the device sent */
    bool ready_seen;
    struct arctic_time_ready ready;
    GArray *syncs;          /* struct arctic_time_sync */
    GArray *stamps;         /* uint64_t, of its TIMED_PACKETs */
    GPtrArray *packets;     /* GBytes, their wire packets */
    bool welcome_sent;
} FakeSwitch;

static FakeSwitch *fake;

static void fake_handshake(FakeSwitch *f)
{
    Niu *n = f->n;

    link_accept(n);
    link_expect_hello(n);
    g_assert_true(n->in_flags & R_ARCTIC_HELLO_FLAGS_TIMED_MASK);
    if (link_rings_wanted() && n->offered) {
        link_adopt_rings(n);
        link_send_welcome_flags(n, R_ARCTIC_WELCOME_FLAGS_RINGS_MASK |
                                   R_ARCTIC_WELCOME_FLAGS_TIMED_MASK, 0, 0);
    } else {
        link_send_welcome_flags(n, R_ARCTIC_WELCOME_FLAGS_TIMED_MASK, 0, 0);
    }
    f->welcome_sent = true;
}

static void fake_frame(FakeSwitch *f, uint16_t type, uint8_t *body,
                       uint32_t len)
{
    Niu *n = f->n;
    uint8_t out[ARCTIC_TIMED_PACKET_HEADER + ARCTIC_WIRE_MAX_SIZE];
    struct arctic_time_start start;
    struct arctic_time_sync sync;
    FakeDelivery *d;

    g_mutex_lock(&f->lock);
    switch (type) {
    case ARCTIC_FRAME_TIME_READY:
        g_assert_false(f->ready_seen);
        arctic_time_ready_decode(body, &f->ready);
        f->ready_seen = true;
        start = (struct arctic_time_start) {
            .grant = f->start_grant,
            .lookahead_ns = 1425,
            .return_ns = 925,
        };
        arctic_time_start_encode(out, &start);
        link_write(n, ARCTIC_FRAME_TIME_START, out, ARCTIC_TIME_START_SIZE);
        break;
    case ARCTIC_FRAME_TIMED_PACKET: {
        uint64_t stamp = arctic_get_le64(body);

        g_array_append_val(f->stamps, stamp);
        g_ptr_array_add(f->packets,
                        g_bytes_new(body + ARCTIC_TIMED_PACKET_HEADER,
                                    len - ARCTIC_TIMED_PACKET_HEADER));
        break;
    }
    case ARCTIC_FRAME_TIME_SYNC:
        arctic_time_sync_decode(body, &sync);
        g_array_append_val(f->syncs, sync);
        if (f->close_at_sync) {
            link_close(n);
            break;
        }
        while ((d = g_queue_pop_head(&f->deliveries))) {
            arctic_put_le64(out, d->at);
            memcpy(out + ARCTIC_TIMED_PACKET_HEADER, d->wire, d->size);
            link_write_flags(n, ARCTIC_FRAME_TIMED_PACKET,
                             FIELD_DP32(0, ARCTIC_FRAME_FLAGS, PRIORITY, 1),
                             out, ARCTIC_TIMED_PACKET_HEADER + d->size);
            g_free(d);
        }
        arctic_put_le64(out, sync.reached + f->step);
        link_write(n, ARCTIC_FRAME_TIME_GRANT, out, ARCTIC_TIME_GRANT_SIZE);
        break;
    default:
        g_error("timed switch: unexpected frame type %u", type);
    }
    g_mutex_unlock(&f->lock);
}

static gpointer fake_run(gpointer opaque)
{
    FakeSwitch *f = opaque;
    uint8_t body[ARCTIC_LINK_MAX_BODY];
    uint16_t type;
    uint32_t len;

    fake_handshake(f);
    while (!qatomic_read(&f->quit)) {
        int got;

        if (f->n->fd < 0) {
            g_usleep(10 * 1000);
            continue;
        }
        got = link_read(f->n, &type, body, &len, 50);
        if (got < 0) {
            link_close(f->n);
        } else if (got > 0) {
            fake_frame(f, type, body, len);
        }
    }
    return NULL;
}

/* Start the switch's thread as QEMU starts (niu_test_before_qemu). */
static void fake_start(Niu *n)
{
    fake->n = n;
    fake->thread = g_thread_new("timed-switch", fake_run, fake);
}

static Niu *timed_start_props(const char *props, uint64_t start_grant,
                              uint64_t step)
{
    Niu *n;

    fake = g_new0(FakeSwitch, 1);
    g_mutex_init(&fake->lock);
    g_queue_init(&fake->deliveries);
    fake->syncs = g_array_new(false, false, sizeof(struct arctic_time_sync));
    fake->stamps = g_array_new(false, false, sizeof(uint64_t));
    fake->packets = g_ptr_array_new_with_free_func(
                        (GDestroyNotify)g_bytes_unref);
    fake->start_grant = start_grant;
    fake->step = step;
    niu_test_force_thread = true;
    niu_test_before_qemu = fake_start;
    n = niu_start_node("listen", NIU_NODE, props);
    niu_test_before_qemu = NULL;
    niu_test_force_thread = false;
    /* Realize waited for the WELCOME: the guest finds the link up. */
    g_assert_true(fake->welcome_sent);
    g_assert_true(reg_r(n, A_NIU_LINK_STATUS) & R_NIU_LINK_STATUS_UP_MASK);
    return n;
}

static Niu *timed_start(uint64_t start_grant, uint64_t step)
{
    return timed_start_props("timed=on", start_grant, step);
}

static void timed_stop(Niu *n)
{
    qatomic_set(&fake->quit, true);
    g_thread_join(fake->thread);
    niu_stop(n);
    g_array_free(fake->syncs, true);
    g_array_free(fake->stamps, true);
    g_ptr_array_free(fake->packets, true);
    g_queue_clear_full(&fake->deliveries, g_free);
    g_mutex_clear(&fake->lock);
    g_free(fake);
    fake = NULL;
}

/* The clock starts: READY with the device's costs, then RUNNING at 0. */
static void timed_clock_start(Niu *n)
{
    g_assert_cmphex(reg_r(n, A_NIU_TIME_STATUS), ==,
                    R_NIU_TIME_STATUS_TIMED_MASK);
    reg_w(n, A_NIU_TIME_CTRL, R_NIU_TIME_CTRL_START_MASK);
    g_assert_cmphex(reg_r(n, A_NIU_TIME_STATUS), ==,
                    R_NIU_TIME_STATUS_TIMED_MASK |
                    R_NIU_TIME_STATUS_RUNNING_MASK);
    g_mutex_lock(&fake->lock);
    g_assert_true(fake->ready_seen);
    g_assert_cmpuint(fake->ready.tx_ns, ==, ARCTIC_TIME_TX_NS);
    g_assert_cmpuint(fake->ready.rx_ns, ==, ARCTIC_TIME_RX_NS);
    g_assert_cmpuint(fake->ready.pci_ps_per_byte, ==,
                     ARCTIC_TIME_PCI_PS_PER_BYTE);
    g_assert_cmpuint(fake->ready.tick_ns, ==, 1);
    g_mutex_unlock(&fake->lock);
}

static uint64_t time_now(Niu *n)
{
    uint64_t lo = reg_r(n, A_NIU_TIME_NOW_LO);

    return lo | (uint64_t)reg_r(n, A_NIU_TIME_NOW_HI) << 32;
}

/*
 * Before TIME_CTRL.START the cluster's time stands at 0 however the clock
 * moves; the write returns once the switch said TIME_START, and from then
 * on the time follows the virtual clock from 0.
 */
static void test_time_start(void)
{
    Niu *n = timed_start(1000000, 1000000);

    qtest_clock_step(n->qts, 5000);
    g_assert_cmpuint(time_now(n), ==, 0);
    timed_clock_start(n);
    g_assert_cmpuint(time_now(n), ==, 0);
    qtest_clock_step(n->qts, 777);
    g_assert_cmpuint(time_now(n), ==, 777);
    /* A second start is refused, and changes nothing. */
    reg_w(n, A_NIU_TIME_CTRL, R_NIU_TIME_CTRL_START_MASK);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    g_assert_cmpuint(time_now(n), ==, 777);
    timed_stop(n);
}

/*
 * The test DMA engine in timed mode: done when its bytes crossed PCI at
 * time-pci-mbytes, on the virtual clock, not a nanosecond before.
 */
static void test_time_test_dma(void)
{
    Niu *n = timed_start(1000000, 1000000);
    uint32_t size = 4096;
    uint64_t ns = arctic_time_serialise(size, ARCTIC_TIME_PCI_PS_PER_BYTE);
    unsigned i;

    g_assert_cmpuint(ns, >, 1);
    reg_w(n, A_NIU_TEST_DMA_ADDR_LO, (uint32_t)SCRATCH_MEM);
    reg_w(n, A_NIU_TEST_DMA_ADDR_HI, SCRATCH_MEM >> 32);
    reg_w(n, A_NIU_TEST_DMA_SIZE, size);
    reg_w(n, A_NIU_TEST_DMA_SEED, 0x7173);
    reg_w(n, A_NIU_TEST_DMA_CTRL, ARCTIC_TEST_DMA_FILL);
    g_assert_cmphex(reg_r(n, A_NIU_TEST_DMA_STATUS), ==, 0);
    qtest_clock_step(n->qts, ns - 1);
    g_assert_cmphex(reg_r(n, A_NIU_TEST_DMA_STATUS), ==, 0);
    g_assert_cmphex(qtest_readl(n->qts, SCRATCH_MEM), ==, 0);
    qtest_clock_step(n->qts, 1);
    g_assert_cmphex(reg_r(n, A_NIU_TEST_DMA_STATUS), ==,
                    R_NIU_TEST_DMA_STATUS_DONE_MASK);
    for (i = 0; i < size / 4; i += 255) {
        g_assert_cmphex(qtest_readl(n->qts, SCRATCH_MEM + 4 * i), ==,
                        arctic_test_pattern(0x7173, i));
    }
    timed_stop(n);
}

/*
 * The clock stops at the grant: the device reports the time reached
 * there (and, its processor running, a promise of that same time) and
 * goes on only once granted more.
 */
static void test_time_grant(void)
{
    Niu *n = timed_start(3000, 20000);
    struct arctic_time_sync sync;

    timed_clock_start(n);
    qtest_clock_step(n->qts, 10000);
    g_assert_cmpuint(time_now(n), ==, 10000);
    g_mutex_lock(&fake->lock);
    g_assert_cmpuint(fake->syncs->len, ==, 1);
    sync = g_array_index(fake->syncs, struct arctic_time_sync, 0);
    g_mutex_unlock(&fake->lock);
    g_assert_cmpuint(sync.reached, ==, 3000);
    g_assert_cmpuint(sync.promise, ==, 3000);
    /* The next stop: 3000 + 20000. */
    qtest_clock_step(n->qts, 20000);
    g_mutex_lock(&fake->lock);
    g_assert_cmpuint(fake->syncs->len, ==, 2);
    g_assert_cmpuint(g_array_index(fake->syncs, struct arctic_time_sync,
                                   1).reached, ==, 23000);
    g_mutex_unlock(&fake->lock);
    timed_stop(n);
}

/*
 * A packet the switch delivers for time 5000 is taken at 5000, not a
 * nanosecond before, and its ack leaves stamped 5000 + the transmit
 * engine's 500 ns.
 */
static void test_time_deliver_at(void)
{
    Niu *n = timed_start(2000, 1000000);
    FakeDelivery *d = g_new0(FakeDelivery, 1);
    uint32_t payload[2] = { 0x1234, 0x5678 };
    uint64_t stamp;

    niu_setup(n);
    /* The slot holds a marker, so a stray write shows (guest_expect_rx). */
    qtest_memset(n->qts, rx_tail_slot(n, ARCTIC_RXQ_HI), 0xdd,
                 ARCTIC_SLOT_SIZE);
    qtest_writel(n->qts, rx_tail_slot(n, ARCTIC_RXQ_HI), 0);
    timed_clock_start(n);
    d->at = 5000;
    d->size = peer_data(n, d->wire, PEER, ARCTIC_PRIORITY_HIGH,
                        n->peer_epoch, 0, 9, 0xc0, 0xc1, payload, 2);
    g_mutex_lock(&fake->lock);
    g_queue_push_tail(&fake->deliveries, d);
    g_mutex_unlock(&fake->lock);
    /* At the grant, 2000, the switch hands it over with the next grant. */
    qtest_clock_step(n->qts, 4999);
    g_assert_cmpuint(time_now(n), ==, 4999);
    g_assert_cmpuint(counter(n, ARCTIC_CNT_RX_HI_PACKETS), ==, 0);
    g_assert_false(qtest_readl(n->qts, rx_tail_slot(n, ARCTIC_RXQ_HI)) &
                   R_MPI_HEADER_VALID_MASK);
    qtest_clock_step(n->qts, 1);
    g_assert_cmpuint(counter(n, ARCTIC_CNT_RX_HI_PACKETS), ==, 1);
    guest_expect_rx(n, ARCTIC_RXQ_HI, PEER, 9, 0xc0, 0xc1, payload, 2);
    /* The ack goes with the next TIME_SYNC; its stamp says when. */
    qtest_clock_step(n->qts, 1000000);
    g_mutex_lock(&fake->lock);
    g_assert_cmpuint(fake->stamps->len, ==, 1);
    stamp = g_array_index(fake->stamps, uint64_t, 0);
    g_mutex_unlock(&fake->lock);
    g_assert_cmpuint(stamp, ==, 5000 + ARCTIC_TIME_TX_NS);
    timed_stop(n);
}

/*
 * A message the guest sends at 1000 leaves stamped with the transmit
 * engine's cost: 500 ns, and its 8 + 4 * 4 bytes across PCI at 80 MB/s
 * (300 ns): 1800.  The next, sent at once, waits for the engine: 2600.
 * Having sent, the device stops by itself at 1800 + 925 (an answer could
 * come then), before the grant.
 */
static void test_time_stamp(void)
{
    Niu *n = timed_start(100000, 100000);
    uint32_t payload[4] = { 1, 2, 3, 4 };
    struct arctic_time_sync sync;

    niu_setup(n);
    timed_clock_start(n);
    qtest_clock_step(n->qts, 1000);
    guest_send(n, ARCTIC_TXQ_HI, PEER, 3, 0xa, 0xb, payload, 4);
    guest_send(n, ARCTIC_TXQ_HI, PEER, 3, 0xa, 0xb, payload, 4);
    doorbell(n);
    qtest_clock_step(n->qts, 5000);
    g_mutex_lock(&fake->lock);
    g_assert_cmpuint(fake->stamps->len, ==, 2);
    g_assert_cmpuint(g_array_index(fake->stamps, uint64_t, 0), ==, 1800);
    g_assert_cmpuint(g_array_index(fake->stamps, uint64_t, 1), ==, 2600);
    g_assert_cmpuint(fake->syncs->len, >=, 1);
    sync = g_array_index(fake->syncs, struct arctic_time_sync, 0);
    g_mutex_unlock(&fake->lock);
    g_assert_cmpuint(sync.reached, ==, 1800 + 925);
    timed_stop(n);
}

/*
 * The switch goes away while the device waits for a grant: the device
 * says the cluster's time is lost and the node runs on alone, instead of
 * holding the clock (and QEMU) forever.
 */
static void test_time_lost(void)
{
    Niu *n = timed_start(3000, 1000);

    timed_clock_start(n);
    fake->close_at_sync = true;
    qtest_clock_step(n->qts, 10000);
    g_assert_cmpuint(time_now(n), ==, 10000);
    g_assert_cmphex(reg_r(n, A_NIU_TIME_STATUS), ==,
                    R_NIU_TIME_STATUS_TIMED_MASK |
                    R_NIU_TIME_STATUS_BROKEN_MASK);
    timed_stop(n);
}

/* QEMU with -device @device (on a chardev link) refuses it, saying @why. */
static void assert_device_refused(const char *device, const char *why)
{
    const char *qemu = g_getenv("QTEST_QEMU_BINARY");
    g_autofree char *out = NULL, *err = NULL;
    g_autoptr(GError) error = NULL;
    const char *argv[] = {
        qemu, "-M", "q35", "-nodefaults", "-display", "none", "-qtest",
        "/dev/null", "-accel", "qtest", "-chardev",
        "socket,id=l,path=/nonexistent/arctic.sock,reconnect-ms=50",
        "-device", device, NULL,
    };
    int status;

    g_assert_nonnull(qemu);
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, 0, NULL, NULL,
                               &out, &err, &status, &error));
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), !=, 0);
    g_assert_nonnull(strstr(err, why));
}

/* timed=on with a chardev link: QEMU refuses to start, and says why. */
static void test_time_needs_socket(void)
{
    assert_device_refused("arctic-niu,chardev=l,timed=on",
                          "timed=on needs link-socket=");
}

/* The switch socket a restored QEMU takes over from the one saved. */
static int restore_listen_fd = -1;
static char *restore_path, *restore_dir;

static void fake_start_restored(Niu *n)
{
    n->listen_fd = restore_listen_fd;
    n->sock_path = restore_path;
    n->dir = restore_dir;
    fake_start(n);
}

/* Quit @n's QEMU; the test's switch socket stays for the next one. */
static void restore_take_socket(Niu *n)
{
    qatomic_set(&fake->quit, true);
    g_thread_join(fake->thread);
    fake->quit = false;
    fake->welcome_sent = false;
    restore_listen_fd = n->listen_fd;
    restore_path = n->sock_path;
    restore_dir = n->dir;
    n->listen_fd = -1;
    n->sock_path = n->dir = NULL;
    niu_stop(n);
}

/* A timed QEMU waiting for a saved state, on the test's switch socket. */
static Niu *restore_start(void (*before)(Niu *n))
{
    Niu *n;

    niu_test_force_thread = true;
    niu_test_before_qemu = before;
    n = niu_start_node_args(restore_path, NIU_NODE, "timed=on",
                            "-incoming defer");
    niu_test_before_qemu = NULL;
    niu_test_force_thread = false;
    return n;
}

/*
 * Migration (docs/device-internals.md §8).  Saved before TIME_CTRL.START,
 * a node restores with its clock stopped: the load waits for its new
 * session's WELCOME, as realize does, and the clock then starts as on a
 * node booted.  Saved with its clock running, it cannot rejoin its
 * cluster: it restores with the clock broken.
 */
static void test_time_restore(void)
{
    g_autofree char *dir = g_dir_make_tmp("arctic-niu-time-XXXXXX", NULL);
    g_autofree char *state = g_build_filename(dir, "stopped", NULL);
    g_autofree char *state2 = g_build_filename(dir, "running", NULL);
    Niu *n = timed_start(1000000, 1000000), *c;

    qtest_clock_step(n->qts, 5000);
    niu_migrate_save(n, state);
    restore_take_socket(n);
    n = restore_start(fake_start_restored);
    g_assert_true(niu_migrate_load(n, state));
    g_assert_true(fake->welcome_sent);
    g_assert_true(reg_r(n, A_NIU_LINK_STATUS) & R_NIU_LINK_STATUS_UP_MASK);
    timed_clock_start(n);
    qtest_clock_step(n->qts, 777);
    g_assert_cmpuint(time_now(n), ==, 777);
    /*
     * A test DMA command done: its subsection follows timed mode's in
     * the stream, which must leave it for the device's section to read.
     */
    reg_w(n, A_NIU_TEST_DMA_ADDR_LO, (uint32_t)SCRATCH_MEM);
    reg_w(n, A_NIU_TEST_DMA_ADDR_HI, SCRATCH_MEM >> 32);
    reg_w(n, A_NIU_TEST_DMA_SIZE, 64);
    reg_w(n, A_NIU_TEST_DMA_SEED, 0x5a);
    reg_w(n, A_NIU_TEST_DMA_CTRL, ARCTIC_TEST_DMA_FILL);
    qtest_clock_step(n->qts, 1000);
    g_assert_cmphex(reg_r(n, A_NIU_TEST_DMA_STATUS), ==,
                    R_NIU_TEST_DMA_STATUS_DONE_MASK);

    niu_migrate_save(n, state2);
    c = restore_start(NULL);
    g_assert_true(niu_migrate_load(c, state2));
    g_assert_cmphex(reg_r(c, A_NIU_TIME_STATUS), ==,
                    R_NIU_TIME_STATUS_TIMED_MASK |
                    R_NIU_TIME_STATUS_BROKEN_MASK);
    g_assert_cmphex(reg_r(c, A_NIU_TEST_DMA_SIZE), ==, 64);
    g_assert_cmphex(reg_r(c, A_NIU_TEST_DMA_SEED), ==, 0x5a);
    g_assert_cmphex(reg_r(c, A_NIU_TEST_DMA_CTRL), ==, ARCTIC_TEST_DMA_FILL);
    g_assert_cmphex(reg_r(c, A_NIU_TEST_DMA_STATUS), ==,
                    R_NIU_TEST_DMA_STATUS_DONE_MASK);
    niu_stop(c);
    timed_stop(n);
    g_unlink(state);
    g_unlink(state2);
    g_rmdir(dir);
}

static void assert_run_state(Niu *n, const char *want)
{
    g_autofree char *got = niu_run_state(n);

    g_assert_cmpstr(got, ==, want);
}

/*
 * TIME_CTRL.PAUSE (docs/snapshots.md §5): with start-pause=on the machine
 * stops at the write, before this node said READY, and is saved there;
 * restored into a new QEMU on a new session and let go, the clock starts
 * at 0 as on a node booted.  Without start-pause=on it does nothing;
 * after START, or with START in the same write, it is refused.
 */
static void test_time_start_pause(void)
{
    g_autofree char *dir = g_dir_make_tmp("arctic-niu-time-XXXXXX", NULL);
    g_autofree char *state = g_build_filename(dir, "paused", NULL);
    Niu *n = timed_start(1000000, 1000000);

    reg_w(n, A_NIU_TIME_CTRL, R_NIU_TIME_CTRL_PAUSE_MASK);
    assert_run_state(n, "running");
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
    reg_w(n, A_NIU_TIME_CTRL,
          R_NIU_TIME_CTRL_PAUSE_MASK | R_NIU_TIME_CTRL_START_MASK);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    g_assert_false(fake->ready_seen);
    timed_stop(n);

    n = timed_start_props("timed=on,start-pause=on", 1000000, 1000000);
    assert_run_state(n, "running");
    reg_w(n, A_NIU_TIME_CTRL, R_NIU_TIME_CTRL_PAUSE_MASK);
    assert_run_state(n, "paused");
    g_assert_false(fake->ready_seen);
    g_assert_cmpuint(time_now(n), ==, 0);
    niu_migrate_save(n, state);
    restore_take_socket(n);
    n = restore_start(fake_start_restored);
    g_assert_true(niu_migrate_load(n, state));
    g_assert_true(fake->welcome_sent);
    /* Saved paused, so loaded paused: the launcher says cont. */
    assert_run_state(n, "paused");
    qobject_unref(qtest_qmp(n->qts, "{'execute': 'cont'}"));
    timed_clock_start(n);
    qtest_clock_step(n->qts, 777);
    g_assert_cmpuint(time_now(n), ==, 777);
    reg_w(n, A_NIU_TIME_CTRL, R_NIU_TIME_CTRL_PAUSE_MASK);
    expect_errors(n, 1u << ARCTIC_ERR_BAD_VALUE);
    assert_run_state(n, "running");
    timed_stop(n);
    g_unlink(state);
    g_rmdir(dir);
}

/* start-pause=on without timed=on: QEMU refuses the device. */
static void test_time_start_pause_needs_timed(void)
{
    assert_device_refused("arctic-niu,chardev=l,start-pause=on",
                          "start-pause=on needs timed=on");
}

void niu_test_add_time(void)
{
    qtest_add_func("/arctic-niu/time/start", test_time_start);
    qtest_add_func("/arctic-niu/time/grant", test_time_grant);
    qtest_add_func("/arctic-niu/time/deliver-at", test_time_deliver_at);
    qtest_add_func("/arctic-niu/time/stamp", test_time_stamp);
    qtest_add_func("/arctic-niu/time/lost", test_time_lost);
    qtest_add_func("/arctic-niu/time/needs-socket", test_time_needs_socket);
    qtest_add_func("/arctic-niu/time/restore", test_time_restore);
    qtest_add_func("/arctic-niu/time/test-dma", test_time_test_dma);
    qtest_add_func("/arctic-niu/time/start-pause", test_time_start_pause);
    qtest_add_func("/arctic-niu/time/start-pause-needs-timed",
                   test_time_start_pause_needs_timed);
}
