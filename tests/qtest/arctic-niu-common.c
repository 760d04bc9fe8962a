/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the arctic-niu qtests share (arctic-niu-test.h).
 */

#include "qemu/osdep.h"
#include <linux/futex.h>
#include <sys/syscall.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <glib/gstdio.h>
#include "arctic-niu-test.h"

/*
 * ------------------------------------------------------------------------
 * Registers and guest memory
 */

uint32_t reg_r(Niu *n, uint64_t off)
{
    return qpci_io_readl(n->dev, n->ctrl, off);
}

void reg_w(Niu *n, uint64_t off, uint32_t v)
{
    qpci_io_writel(n->dev, n->ctrl, off, v);
}

uint32_t counter(Niu *n, enum arctic_counter c)
{
    return reg_r(n, ARCTIC_COUNTER_OFFSET(c));
}

/* The device's state view (QMP qom-get); unref the response when done. */
QDict *niu_state(Niu *n, QDict **rsp)
{
    *rsp = qtest_qmp(n->qts, "{'execute': 'qom-get', 'arguments': {"
                     "'path': '/machine/peripheral/niu', 'property': 'state'}}");
    g_assert_true(qdict_haskey(*rsp, "return"));
    return qdict_get_qdict(*rsp, "return");
}

/* The run state QMP reports ("running", "paused", ...); g_free() it. */
char *niu_run_state(Niu *n)
{
    QDict *rsp = qtest_qmp(n->qts, "{'execute': 'query-status'}");
    char *status = g_strdup(qdict_get_str(qdict_get_qdict(rsp, "return"),
                                          "status"));

    qobject_unref(rsp);
    return status;
}

void ep_w(Niu *n, unsigned ep, uint64_t reg, uint32_t v)
{
    reg_w(n, ARCTIC_EP_OFFSET(ep, reg), v);
}

uint32_t ep_r(Niu *n, unsigned ep, uint64_t reg)
{
    return reg_r(n, ARCTIC_EP_OFFSET(ep, reg));
}

void doorbell(Niu *n)
{
    qpci_io_writel(n->dev, n->user, A_USER_DOORBELL,
                   R_USER_DOORBELL_HI_TX_MASK | R_USER_DOORBELL_LO_TX_MASK);
}

/* Take and clear the error causes, checking that exactly @want are set. */
void expect_errors(Niu *n, uint32_t want)
{
    uint32_t got = reg_r(n, A_NIU_ERROR_CAUSE);

    g_assert_cmphex(got, ==, want);
    reg_w(n, A_NIU_ERROR_CAUSE, got);
    g_assert_cmphex(reg_r(n, A_NIU_ERROR_CAUSE), ==, 0);
}

uint64_t tx_slot_addr(unsigned q, uint32_t idx)
{
    return TX_BASE + (q == ARCTIC_TXQ_HI ? ARCTIC_HI_TX_OFFSET
                                         : ARCTIC_LO_TX_OFFSET) +
           (uint64_t)idx * ARCTIC_SLOT_SIZE;
}

uint64_t rx_slot_addr(unsigned q, uint32_t idx)
{
    return RX_BASE + (q == ARCTIC_RXQ_HI ? ARCTIC_HI_RX_OFFSET
                                         : ARCTIC_LO_RX_OFFSET) +
           (uint64_t)idx * ARCTIC_SLOT_SIZE;
}

/*
 * The guest's next Rx slot of queue @q, the LAP its header must carry,
 * and the step past it (INDEX and LAP together, as the NIU counts).
 */
uint64_t rx_tail_slot(Niu *n, unsigned q)
{
    return rx_slot_addr(q, FIELD_EX32(n->rx_tail[q], EP_RX_HD, INDEX));
}

uint32_t rx_tail_header(Niu *n, unsigned q, uint32_t header)
{
    header = FIELD_DP32(header, MPI_HEADER, LAP,
                        FIELD_EX32(n->rx_tail[q], EP_RX_HD, LAP));
    return FIELD_DP32(header, MPI_HEADER, VALID, 1);
}

void rx_tail_advance(Niu *n, unsigned q)
{
    n->rx_tail[q] = (n->rx_tail[q] + 1) % (2 * ARCTIC_N);
}

/* Seed 002 §3.2.1 TransmitHi/Lo, with a raw header word. */
void guest_send_raw(Niu *n, unsigned q, uint32_t header, uint32_t cmd0,
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

uint32_t mpi_header(unsigned dest, unsigned type, unsigned len)
{
    uint32_t h = FIELD_DP32(0, MPI_HEADER, VALID, 1);

    h = FIELD_DP32(h, MPI_HEADER, DEST, dest);
    h = FIELD_DP32(h, MPI_HEADER, TYPE, type);
    return FIELD_DP32(h, MPI_HEADER, LENGTH, len);
}

void guest_send(Niu *n, unsigned q, unsigned dest, unsigned type,
                uint32_t cmd0, uint32_t cmd1, const uint32_t *payload,
                unsigned len)
{
    guest_send_raw(n, q, mpi_header(dest, type, len), cmd0, cmd1, payload,
                   len);
}

/*
 * ------------------------------------------------------------------------
 * The switch side of the link
 */

/*
 * A kick of the device: its counter in the ring area, and a FUTEX_WAKE
 * (link 1.3, arctic/link-ring.h).
 */
void ring_kick(Niu *n)
{
    struct arctic_ring_area *area = n->ring_area;

    __atomic_fetch_add(&area->kicks.niu, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &area->kicks.niu, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* The kicks waiting on one of our wake-up sockets, taken; never blocks. */
unsigned ring_kicks_take(int fd)
{
    char bytes[4096];
    ssize_t n = recv(fd, bytes, sizeof(bytes), MSG_DONTWAIT);

    return n > 0 ? n : 0;
}

/* Wait on the wake-up socket (and the link's, for its end) up to @ms. */
static void ring_wait(Niu *n, int ms)
{
    struct pollfd pfd[2] = {
        { .fd = n->fd, .events = POLLIN },
        { .fd = n->ring_wake_fd, .events = POLLIN },
    };

    if (poll(pfd, 2, ms) > 0 && pfd[1].revents) {
        /* Nothing (the end) when the device closed the link. */
        ring_kicks_take(n->ring_wake_fd);
    }
}

/*
 * Bytes to the device as the switch sends them: into its ring once the
 * rings carry the link (kicking it if it sleeps, waiting for room if
 * full), else on the socket.
 */
void link_write_bytes(Niu *n, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    if (!n->rings) {
        g_assert_cmpint(send(n->fd, buf, len, MSG_NOSIGNAL), ==, len);
        return;
    }
    while (len) {
        size_t put = arctic_ring_write(&n->ring_out, p, len);

        g_assert_cmpuint(put, !=, ARCTIC_RING_BROKEN);
        if (put && arctic_ring_wake_consumer(&n->ring_out)) {
            ring_kick(n);
        }
        if (!put && arctic_ring_producer_wait(&n->ring_out, 1)) {
            ring_wait(n, WAIT_MS);
        }
        p += put;
        len -= put;
    }
}

void link_write_flags(Niu *n, uint16_t type, uint16_t flags,
                      const void *body, uint32_t len)
{
    uint8_t buf[ARCTIC_LINK_HEADER_SIZE + ARCTIC_LINK_MAX_BODY];

    arctic_frame_header_encode_flags(buf, type, flags, len);
    memcpy(buf + ARCTIC_LINK_HEADER_SIZE, body, len);
    link_write_bytes(n, buf, ARCTIC_LINK_HEADER_SIZE + len);
}

void link_write(Niu *n, uint16_t type, const void *body, uint32_t len)
{
    link_write_flags(n, type, 0, body, len);
}

/* Keep the descriptors the device's HELLO brought; close any others. */
static void link_take_fds(Niu *n, int *fds, size_t count)
{
    size_t i;

    for (i = 0; i < count; i++) {
        if (n->offered < ARCTIC_RING_FDS) {
            n->offered_fds[n->offered++] = fds[i];
        } else {
            close(fds[i]);
        }
    }
    g_free(fds);
}

/*
 * What the device sent since the last read, into n->in, waiting up to
 * @timeout_ms: the bytes, 0 on timeout, -1 when it closed the connection.
 */
static ssize_t link_take_input(Niu *n, int timeout_ms)
{
    struct iovec iov = { .iov_base = n->in, .iov_len = sizeof(n->in) };
    struct pollfd pfd = { .fd = n->fd, .events = POLLIN };
    g_autoptr(Error) err = NULL;
    int *fds = NULL;
    size_t nfds = 0;
    ssize_t got;

    if (n->rings) {
        gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000ll;
        char byte;

        for (;;) {
            size_t taken = arctic_ring_read(&n->ring_in, n->in,
                                            sizeof(n->in));

            g_assert_cmpuint(taken, !=, ARCTIC_RING_BROKEN);
            if (taken) {
                if (arctic_ring_wake_producer(&n->ring_in)) {
                    ring_kick(n);
                }
                return taken;
            }
            /* The socket says only that the device closed the link. */
            got = recv(n->fd, &byte, 1, MSG_DONTWAIT);
            g_assert_cmpint(got, <=, 0);
            if (got == 0 || (got < 0 && errno != EAGAIN)) {
                return -1;
            }
            if (g_get_monotonic_time() >= deadline) {
                return 0;
            }
            if (arctic_ring_consumer_sleep(&n->ring_in)) {
                ring_wait(n, MAX((deadline - g_get_monotonic_time()) / 1000,
                                 1));
            }
            arctic_ring_consumer_awake(&n->ring_in);
        }
    }
    if (poll(&pfd, 1, timeout_ms) == 0) {
        return 0;
    }
    /* SCM_RIGHTS, by QIOChannelSocket as in the device. */
    got = qio_channel_readv_full(QIO_CHANNEL(n->sioc), &iov, 1, &fds, &nfds,
                                 0, &err);
    if (nfds) {
        link_take_fds(n, fds, nfds);
    }
    return got > 0 ? got : -1;
}

/*
 * Read one frame; 1 when one arrived, 0 on timeout, -1 when the device
 * closed the connection.
 */
int link_read(Niu *n, uint16_t *type, uint8_t *body, uint32_t *len,
              int timeout_ms)
{
    for (;;) {
        const uint8_t *p = n->in + n->in_off;
        size_t left = n->in_len - n->in_off;
        enum arctic_frame_status st = arctic_frame_read(&n->reader, &p, &left);
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
        got = link_take_input(n, timeout_ms);
        if (got <= 0) {
            return got;
        }
        n->in_off = 0;
        n->in_len = got;
    }
}

/* Forget the last connection's ring descriptors and rings. */
static void link_forget_rings(Niu *n)
{
    unsigned i;

    for (i = 0; i < n->offered; i++) {
        close(n->offered_fds[i]);
    }
    n->offered = 0;
    if (n->ring_area) {
        munmap(n->ring_area, n->ring_area_size);
        close(n->ring_wake_fd);
        n->ring_area = NULL;
    }
    n->rings = false;
}

void link_close(Niu *n)
{
    if (n->fd >= 0 && n->rings) {
        struct arctic_ring_area *area = n->ring_area;

        /* As the switch does: the device looks at the socket at once. */
        __atomic_store_n(&area->kicks.closing, 1, __ATOMIC_RELEASE);
        ring_kick(n);
    }
    if (n->sioc) {
        object_unref(OBJECT(n->sioc));
        n->sioc = NULL;
        n->fd = -1;
    }
    link_forget_rings(n);
}

void link_accept(Niu *n)
{
    struct pollfd pfd = { .fd = n->listen_fd, .events = POLLIN };

    link_forget_rings(n);
    g_assert_cmpint(poll(&pfd, 1, 10000), ==, 1);
    n->fd = accept(n->listen_fd, NULL, NULL);
    g_assert_cmpint(n->fd, >=, 0);
    n->sioc = qio_channel_socket_new_fd(n->fd, &error_abort);
    n->in_off = n->in_len = 0;
    arctic_frame_reader_reset(&n->reader);
}

/* Wait (bounded) until a NIU_LINK_STATUS bit reads @want, and check it. */
void wait_link_status(Niu *n, uint32_t mask, bool want)
{
    int i;

    for (i = 0; i < WAIT_MS && !(reg_r(n, A_NIU_LINK_STATUS) & mask) == want;
         i++) {
        g_usleep(1000);
    }
    g_assert_cmpint(!!(reg_r(n, A_NIU_LINK_STATUS) & mask), ==, want);
}

/*
 * Take the rings the device's HELLO offered, as the switch does: the
 * memfd must be sealed against shrinking, the area's header right.
 */
void link_adopt_rings(Niu *n)
{
    int area_fd = n->offered_fds[ARCTIC_RING_FD_AREA];
    struct stat st;
    uint32_t data_size;

    g_assert_cmpuint(n->offered, ==, ARCTIC_RING_FDS);
    g_assert_cmpint(fstat(area_fd, &st), ==, 0);
    g_assert_true(fcntl(area_fd, F_GET_SEALS) & F_SEAL_SHRINK);
    n->ring_area_size = st.st_size;
    n->ring_area = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                        area_fd, 0);
    g_assert_true(n->ring_area != MAP_FAILED);
    g_assert_true(arctic_ring_area_check(n->ring_area, st.st_size,
                                         &data_size));
    arctic_ring_attach(&n->ring_in, n->ring_area, data_size,
                       ARCTIC_RING_TO_SWITCH);
    arctic_ring_attach(&n->ring_out, n->ring_area, data_size,
                       ARCTIC_RING_TO_NIU);
    n->ring_wake_fd = n->offered_fds[ARCTIC_RING_FD_WAKE];
    close(area_fd);
    n->offered = 0;
}

/* The WELCOME frame into @buf; returns its size. */
static size_t welcome_frame(uint8_t *buf, uint16_t flags, uint16_t hi_credits,
                            uint16_t lo_credits)
{
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
    arctic_frame_header_encode_flags(buf, ARCTIC_FRAME_WELCOME, flags,
                                     ARCTIC_WELCOME_SIZE);
    arctic_welcome_encode(buf + ARCTIC_LINK_HEADER_SIZE, &w);
    return ARCTIC_LINK_HEADER_SIZE + ARCTIC_WELCOME_SIZE;
}

/*
 * A WELCOME with frame @flags: with RINGS, our rings (link_adopt_rings())
 * carry every frame after it.
 */
void link_send_welcome_flags(Niu *n, uint16_t flags, uint16_t hi_credits,
                             uint16_t lo_credits)
{
    uint8_t buf[ARCTIC_LINK_HEADER_SIZE + ARCTIC_WELCOME_SIZE];

    link_write_bytes(n, buf, welcome_frame(buf, flags, hi_credits,
                                           lo_credits));
    n->rings = n->ring_area && (flags & R_ARCTIC_WELCOME_FLAGS_RINGS_MASK);
}

/*
 * The same on the socket with @count descriptors attached (SCM_RIGHTS), as
 * a switch sends the device's ends of its per-CPU wake-up sockets with
 * CPU_WAKE.
 */
void link_send_welcome_fds(Niu *n, uint16_t flags, const int *fds,
                           unsigned count)
{
    uint8_t buf[ARCTIC_LINK_HEADER_SIZE + ARCTIC_WELCOME_SIZE];
    struct iovec iov = {
        .iov_base = buf,
        .iov_len = welcome_frame(buf, flags, 8, 8),
    };

    g_assert_cmpuint(count, >=, 1);
    g_assert_cmpuint(count, <=, ARCTIC_CPU_WAKE_MAX);
    g_assert_cmpint(qio_channel_writev_full(QIO_CHANNEL(n->sioc), &iov, 1,
                                            (int *)fds, count, 0,
                                            &error_abort), ==, iov.iov_len);
    n->rings = n->ring_area && (flags & R_ARCTIC_WELCOME_FLAGS_RINGS_MASK);
}

/*
 * The WELCOME a switch sends: with ARCTIC_NIU_TEST_LINK=rings it takes the
 * rings the device offered, else it leaves the link on the socket.
 */
void link_send_welcome(Niu *n, uint16_t hi_credits, uint16_t lo_credits)
{
    if (link_rings_wanted() && n->offered) {
        link_adopt_rings(n);
        link_send_welcome_flags(n, R_ARCTIC_WELCOME_FLAGS_RINGS_MASK,
                                hi_credits, lo_credits);
    } else {
        link_send_welcome_flags(n, 0, hi_credits, lo_credits);
    }
}

/* Read the device's HELLO and check every field of it. */
void link_expect_hello(Niu *n)
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

void link_handshake(Niu *n, uint16_t hi_credits, uint16_t lo_credits)
{
    link_accept(n);
    link_expect_hello(n);
    link_send_welcome(n, hi_credits, lo_credits);
    /* The register shows the link up once the WELCOME was taken in. */
    wait_link_status(n, R_NIU_LINK_STATUS_UP_MASK, true);
    g_assert_cmpint(reg_r(n, A_NIU_NUM_NODES), ==, NET_NODES);
}

/* ... within @ms milliseconds. */
size_t link_expect_packet_within(Niu *n, uint8_t *wire, int ms)
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

size_t link_expect_packet(Niu *n, uint8_t *wire)
{
    return link_expect_packet_within(n, wire, WAIT_MS);
}

/* Check that the device sends no packet for a while (credits may come). */
void link_expect_silence(Niu *n)
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

void link_send_packet(Niu *n, const uint8_t *wire, size_t size)
{
    uint32_t w0 = arctic_get_le32(wire + ARCTIC_WIRE_WORDS_OFFSET);

    /*
     * The switch sends a packet on the credit of the priority it
     * travelled at.
     */
    link_write_flags(n, ARCTIC_FRAME_PACKET,
                     ARCTIC_FIELD_PREP(ARCTIC_FRAME_FLAGS, PRIORITY,
                                       ARCTIC_FIELD_GET(ARCTIC_W0, PRIORITY,
                                                        w0)),
                     wire, size);
}

void link_send_credit(Niu *n, uint16_t hi, uint16_t lo)
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
size_t build_wire(uint8_t *wire, const struct arctic_e2e_header *h,
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
size_t peer_data(Niu *n, uint8_t *wire, unsigned src, uint8_t prio,
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

/* Wait (bounded) until counter @c reads @want, and check it. */
void wait_counter(Niu *n, enum arctic_counter c, uint32_t want)
{
    int i;

    for (i = 0; i < WAIT_MS && counter(n, c) != want; i++) {
        g_usleep(1000);
    }
    g_assert_cmpint(counter(n, c), ==, want);
}

/*
 * Until the link, up before, has gone down: LINK_DOWNS past @before.  Not
 * LINK_STATUS.CONNECTED, which is 0 only until the device reconnects
 * (link-reconnect-ms, 50 ms here): a test that polls it on a loaded host
 * can miss that window and wait in vain.
 */
void wait_link_dropped(Niu *n, uint32_t before)
{
    wait_counter(n, ARCTIC_CNT_LINK_DOWNS, before + 1);
}

/* An ack or nack from peer @src for the NIU's stream to it. */
void peer_control(Niu *n, unsigned src, uint8_t kind, uint8_t prio,
                  uint32_t epoch, uint32_t seq, uint8_t reason)
{
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header h = {
        .kind = kind,
        .flags = ARCTIC_FIELD_PREP(ARCTIC_E2E_FLAGS, PRIORITY, prio) |
                 ARCTIC_FIELD_PREP(ARCTIC_E2E_FLAGS, REASON, reason),
        .src_node = src,
        .dst_node = NIU_NODE,
        .incarnation_lo = n->peer_incarnation & 0xffff,
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

    link_send_packet(n, wire, size);
    /*
     * Wait until the device has taken it in, so that a clock step that
     * follows cannot overtake it on the other socket.
     */
    wait_counter(n, seen, before + 1);
}

/*
 * Expect the NIU's answer to a data packet from @src within @ms, and
 * check it whole.
 */
void expect_control_within(Niu *n, int ms, unsigned src, uint8_t kind,
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

    /*
     * An answer carries the NIU's incarnation, constant between resets:
     * whole in word 2, its low half in the job field.
     */
    arctic_e2e_decode(wire, &got);
    if (!n->niu_incarnation_known) {
        n->niu_incarnation = arctic_control_incarnation(wire);
        n->niu_incarnation_known = true;
    }
    h.incarnation_lo = n->niu_incarnation & 0xffff;
    want_size = build_wire(want, &h, arctic_route_entry(NIU_NODE, src, true,
                                                        false),
                           0, n->niu_incarnation, 0, NULL, -1);

    g_assert_cmpint(size, ==, want_size);
    g_assert_cmpmem(wire, size, want, want_size);
}

void expect_control(Niu *n, unsigned src, uint8_t kind, uint8_t prio,
                    uint32_t epoch, uint32_t seq, uint8_t reason)
{
    expect_control_within(n, WAIT_MS, src, kind, prio, epoch, seq, reason);
}

/* Send the next data packet of the test's stream and expect an ACK. */
void peer_send_acked(Niu *n, uint8_t prio, unsigned type, uint32_t cmd0,
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
/*
 * The next data packet, checked whole; @flags beyond the priority
 * (ARCTIC_E2E_FLAGS.NOTIFY on a DMA notification).
 */
uint32_t expect_data_flags(Niu *n, unsigned dest, uint8_t prio,
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

uint32_t expect_data(Niu *n, unsigned dest, uint8_t prio,
                     uint32_t seq, unsigned type, uint32_t cmd0,
                     uint32_t cmd1, const uint32_t *payload, int len)
{
    return expect_data_flags(n, dest, prio, 0, seq, type, cmd0, cmd1,
                             payload, len);
}

/*
 * ------------------------------------------------------------------------
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
bool niu_test_force_thread;
void (*niu_test_before_qemu)(Niu *n);

bool link_thread(void)
{
    return niu_test_force_thread ||
           g_strcmp0(g_getenv("ARCTIC_NIU_TEST_LINK"), "thread") == 0 ||
           link_rings_wanted();
}

/*
 * ARCTIC_NIU_TEST_LINK=rings: the link thread as for "thread", and the
 * fake switch takes the shared-memory rings its HELLO offers.
 */
bool link_rings_wanted(void)
{
    return g_strcmp0(g_getenv("ARCTIC_NIU_TEST_LINK"), "rings") == 0;
}

/* @props: extra "-device arctic-niu" properties, or "". */
/* @qemu_args: more of QEMU's command line ("" for none). */
Niu *niu_start_node_args(const char *link, unsigned node, const char *props,
                         const char *qemu_args)
{
    Niu *n = g_new0(Niu, 1);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    GString *args = g_string_new("-M q35 -nodefaults -m 64M ");

    g_string_append_printf(args, "%s ", qemu_args);
    if (g_getenv("ARCTIC_NIU_TEST_TRACE")) {
        /*
         * e.g. ARCTIC_NIU_TEST_TRACE=/tmp/niu.log: trace every device
         * event, with the wall-clock time (g_get_real_time()) of each
         */
        g_string_append_printf(args, "-msg timestamp=on "
                               "-trace arctic_niu_*,file=%s.%u ",
                               g_getenv("ARCTIC_NIU_TEST_TRACE"), node);
    }

    n->fd = -1;
    n->sioc = NULL;
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
    if (niu_test_before_qemu) {
        niu_test_before_qemu(n);
    }
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

Niu *niu_start_node(const char *link, unsigned node, const char *props)
{
    return niu_start_node_args(link, node, props, "");
}

Niu *niu_start(bool with_link)
{
    return niu_start_node(with_link ? "listen" : NULL, NIU_NODE, "");
}

/* What a driver does: queues, route table, Rx then Tx on. */
void niu_setup(Niu *n)
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
Niu *niu_start_linked_props(const char *props, uint16_t hi_credits,
                            uint16_t lo_credits)
{
    Niu *n = niu_start_node("listen", NIU_NODE, props);

    niu_setup(n);
    link_handshake(n, hi_credits, lo_credits);
    return n;
}

/*
 * Linked, with the seed-sized retransmit buffer (ARCTIC_SEED_LINES): the
 * tests that stall the engine on its lines are written for it.  A test of
 * the device's default starts with niu_start_linked_props("", ...).
 */
Niu *niu_start_linked(uint16_t hi_credits, uint16_t lo_credits)
{
    g_autofree char *props = g_strdup_printf("lines=%d", ARCTIC_SEED_LINES);

    return niu_start_linked_props(props, hi_credits, lo_credits);
}

void niu_stop(Niu *n)
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
void guest_expect_rx(Niu *n, unsigned q, unsigned src, unsigned type,
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

void mark_rx_slots(Niu *n)
{
    unsigned q, i;

    for (q = 0; q < 2; q++) {
        for (i = 0; i < ARCTIC_N; i++) {
            qtest_memset(n->qts, rx_slot_addr(q, i), 0xdd, ARCTIC_SLOT_SIZE);
            qtest_writel(n->qts, rx_slot_addr(q, i), 0);
        }
    }
}

/*
 * ------------------------------------------------------------------------
 * The guest side, as more than one topic uses it
 */

/* Wait until the slot at the tail of Rx queue @q is valid. */
void guest_wait_rx(Niu *n, unsigned q)
{
    gint64 deadline = g_get_monotonic_time() + WAIT_MS * 1000;

    while (!FIELD_EX32(qtest_readl(n->qts, rx_tail_slot(n, q)), MPI_HEADER,
                       VALID)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
}

uint32_t user_r(Niu *n, uint64_t reg)
{
    return qpci_io_readl(n->dev, n->user, reg);
}

void user_w(Niu *n, uint64_t reg, uint32_t v)
{
    qpci_io_writel(n->dev, n->user, reg, v);
}

/* Put a DMA request in HiTx or DMATx (seed 002 §3.3, 64-bit addresses). */
void guest_dma(Niu *n, unsigned q, unsigned dest, unsigned type,
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

/* Check the error notice a refused request leaves in the own HiRx. */
void guest_expect_notice(Niu *n, unsigned type, uint32_t command,
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

/* Registers that need both datapaths OFF: switch them off and on again. */
void set_window_and_job(Niu *n, uint64_t phys, uint64_t virt,
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

void fill_block(Niu *n, uint64_t phys, uint32_t *block, uint32_t seed)
{
    unsigned i;

    for (i = 0; i < ARCTIC_D / 4; i++) {
        block[i] = seed * 0x10000 + i;
        qtest_writel(n->qts, phys + 4 * i, block[i]);
    }
}

/*
 * One remote-DMA data packet from the peer, at high priority, for @target:
 * the NIU acks it whether it writes it or drops it.
 */
void peer_dma_data_acked(Niu *n, uint64_t target, const uint32_t *words)
{
    uint8_t wire[ARCTIC_WIRE_MAX_SIZE];
    struct arctic_e2e_header h = {
        .kind = ARCTIC_E2E_DATA,
        .flags = FIELD_DP32(0, ARCTIC_E2E_FLAGS, PRIORITY, 1),
        .src_node = PEER, .dst_node = NIU_NODE,
        .epoch = n->peer_epoch, .seq = n->peer_seq[1]++,
    };
    size_t size = build_wire(wire, &h,
                             arctic_route_entry(PEER, NIU_NODE, true, false),
                             ARCTIC_FIELD_PREP(ARCTIC_W1, MODE, 1),
                             (uint32_t)target, target >> 32, words,
                             ARCTIC_DMA_DATA_WORDS);

    link_send_packet(n, wire, size);
    expect_control(n, PEER, ARCTIC_E2E_ACK, ARCTIC_PRIORITY_HIGH,
                   n->peer_epoch, h.seq, 0);
}

/*
 * ------------------------------------------------------------------------
 * Migration to and from a file (the migrate and time topics)
 */

/* QMP until @want (or "failed"): the status a migration ended with. */
static char *niu_migrate_wait(Niu *n, const char *want)
{
    gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;

    for (;;) {
        QDict *rsp = qtest_qmp(n->qts, "{'execute': 'query-migrate'}");
        QDict *ret = qdict_get_qdict(rsp, "return");
        const char *st = ret ? qdict_get_try_str(ret, "status") : NULL;
        char *got = g_strdup(st ? st : "none");

        qobject_unref(rsp);
        if (!strcmp(got, want) || !strcmp(got, "failed")) {
            return got;
        }
        g_free(got);
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(10 * 1000);
    }
}

/* Save @n to @path; true if the migration completed. */
bool niu_migrate_save_try(Niu *n, const char *path)
{
    g_autofree char *uri = g_strdup_printf("file:%s", path);
    g_autofree char *st = NULL;

    qtest_qmp_assert_success(n->qts, "{'execute': 'migrate', 'arguments': "
                             "{'uri': %s}}", uri);
    st = niu_migrate_wait(n, "completed");
    return !strcmp(st, "completed");
}

void niu_migrate_save(Niu *n, const char *path)
{
    g_assert_true(niu_migrate_save_try(n, path));
}

/* Load @path into @n (started with -incoming defer); true if it took. */
bool niu_migrate_load(Niu *n, const char *path)
{
    g_autofree char *uri = g_strdup_printf("file:%s", path);
    g_autofree char *st = NULL;

    qtest_qmp_assert_success(n->qts, "{'execute': 'migrate-incoming', "
                             "'arguments': {'uri': %s, "
                             "'exit-on-error': false}}", uri);
    st = niu_migrate_wait(n, "completed");
    return !strcmp(st, "completed");
}
