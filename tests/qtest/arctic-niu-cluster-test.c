/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arctic-niu qtests: several QEMU instances joined by the real arctic-switch.
 */

#include "qemu/osdep.h"
#include <sys/socket.h>
#include <glib/gstdio.h>
#include "qobject/qnum.h"
#include "arctic-niu-test.h"

#define CLUSTER_MSGS    12      /* per (source, destination, priority) */
#define CLUSTER_STEP_NS 200000  /* virtual time given per round */
#define CLUSTER_ROUNDS  20000

typedef struct Cluster {
    unsigned nodes;
    Niu *node[4];
    GPid switch_pid;
    char *dir;
    char *sock;
    char *control;              /* the switch's control socket */
    char *key;                  /* the cluster's key file (TCP joins) */
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
 * A failed assertion aborts the test: the switch must not outlive it (it
 * would hold the test's output open, and meson would wait for it until
 * its timeout), as libqtest kills its QEMUs.
 */
/*
 * A failed assertion: the switch goes, and so does its directory with
 * what the switch and the test left in it (async-signal-safe calls only:
 * this runs in the SIGABRT handler).
 */
static void cluster_kill_switch(void *data)
{
    Cluster *c = data;

    kill(c->switch_pid, SIGKILL);
    waitpid(c->switch_pid, NULL, 0);
    unlink(c->sock);
    unlink(c->control);
    unlink(c->key);
    rmdir(c->dir);
}

/*
 * Start the switch and @nodes NIUs.  @tcp: the NIUs join it over TCP on
 * 127.0.0.1 (as the nodes of another host would), proving the cluster's
 * key (a file only its owner reads, the switch's --secret and each QEMU's
 * secret object: link 1.3), else on its UNIX socket.
 */
static void cluster_start_on(Cluster *c, unsigned nodes, const char *fault,
                             bool tcp)
{
    const char *sw = g_getenv("ARCTIC_SWITCH_BINARY");
    g_autofree char *ports = g_strdup_printf("%u", nodes);
    g_autofree char *tcp_address = NULL;
    g_autofree char *key_args = NULL;
    const char *argv[16];
    unsigned i = 0, t;

    memset(c, 0, sizeof(*c));
    c->nodes = nodes;
    c->dir = g_dir_make_tmp("arctic-cluster-XXXXXX", NULL);
    c->sock = g_build_filename(c->dir, "switch.sock", NULL);
    c->control = g_build_filename(c->dir, "control.sock", NULL);
    c->key = g_build_filename(c->dir, "cluster.key", NULL);
    argv[i++] = sw;
    argv[i++] = "-s";
    argv[i++] = c->sock;
    argv[i++] = "-c";
    argv[i++] = c->control;
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
        g_assert_true(g_file_set_contents(c->key,
                                          "qtest cluster key, 0123456789",
                                          -1, NULL));
        g_assert_cmpint(chmod(c->key, 0600), ==, 0);
        key_args = g_strdup_printf("-object secret,id=arctic-key,file=%s",
                                   c->key);
        argv[i++] = "--tcp";
        argv[i++] = tcp_address;
        argv[i++] = "--secret";
        argv[i++] = c->key;
    }
    argv[i] = NULL;
    g_assert_true(g_spawn_async(NULL, (char **)argv, NULL,
                                G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL,
                                &c->switch_pid, NULL));
    qtest_add_abrt_handler(cluster_kill_switch, c);
    for (t = 0; t < 5000 && !g_file_test(c->sock, G_FILE_TEST_EXISTS); t++) {
        g_usleep(1000);
    }
    g_assert_true(g_file_test(c->sock, G_FILE_TEST_EXISTS));
    for (i = 0; i < nodes; i++) {
        c->node[i] = tcp ? niu_start_node_args(c->tcp, i,
                                               "link-secret=arctic-key",
                                               key_args)
                         : niu_start_node(c->sock, i, "");
    }
    if (tcp) {
        /* Each QEMU read it at its start, the switch at its own. */
        g_unlink(c->key);
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
    qtest_remove_abrt_handler(c);
    kill(c->switch_pid, SIGTERM);
    g_assert_cmpint(waitpid(c->switch_pid, &status, 0), ==, c->switch_pid);
    g_spawn_close_pid(c->switch_pid);
    /* The switch shuts down cleanly on SIGTERM. */
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_rmdir(c->dir);
    g_free(c->sock);
    g_free(c->control);
    g_free(c->key);
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

/*
 * Every node sends CLUSTER_MSGS messages of every size class at both
 * priorities, and one DMA block, to every other node.
 */
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

/*
 * Take what arrived at node @me, checking each message against what its
 * sender sent: right destination, in order, once, byte for byte.
 */
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

/*
 * Not everything arrived: say, before the assertion fails, what the
 * switch holds (its stats), and for each node what it expected next from
 * each source, each stream's receiving half (epoch, expected sequence,
 * answers owed), what it still holds unacked, its link and credits, and
 * its nonzero counters, so that a rare failure can be read from the log.
 */
static void cluster_report_missing(Cluster *c)
{
    g_autofree char *bin_dir =
        g_path_get_dirname(g_getenv("ARCTIC_SWITCH_BINARY"));
    g_autofree char *ctl = g_build_filename(bin_dir, "arctic-ctl", NULL);
    const char *ctl_argv[] = { ctl, "-s", c->control, "-r", "stats", NULL };
    g_autofree char *switch_stats = NULL;
    unsigned i, s, p;

    /* Where the switch holds packets: per port and priority, its depths. */
    if (g_spawn_sync(NULL, (char **)ctl_argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL,
                     NULL, NULL, &switch_stats, NULL, NULL, NULL)) {
        g_test_message("switch: %s", g_strchomp(switch_stats));
    }

    for (i = 0; i < c->nodes; i++) {
        QDict *rsp, *state = niu_state(c->node[i], &rsp), *counters;
        const QListEntry *e;
        const QDictEntry *ce;

        for (s = 0; s < c->nodes; s++) {
            for (p = 0; p < 2 && s != i; p++) {
                g_test_message("node %u expects message %u from node %u "
                               "at %s priority%s", i, c->next[i][s][p], s,
                               p ? "high" : "low",
                               c->dma_seen[i][s] ? "" : " (its DMA not seen)");
            }
        }
        QLIST_FOREACH_ENTRY(qdict_get_qlist(state, "streams"), e) {
            QDict *st = qobject_to(QDict, qlist_entry_obj(e));

            if (qdict_get_bool(st, "rx-known")) {
                g_test_message("node %u <- node %" PRId64 " %s: rx epoch %"
                               PRId64 " expects %" PRId64 "%s%s", i,
                               qdict_get_int(st, "node"),
                               qdict_get_str(st, "priority"),
                               qdict_get_int(st, "rx-epoch"),
                               qdict_get_int(st, "rx-expected"),
                               qdict_get_bool(st, "rx-ack-due") ?
                               ", ack due" : "",
                               qdict_get_bool(st, "rx-nack-due") ?
                               ", nack due" : "");
            }
            if (qdict_get_int(st, "lines-busy")) {
                g_test_message("node %u -> node %" PRId64 " %s: %" PRId64
                               " unacked, %" PRId64 " resends max, next "
                               "retry in %" PRId64 " ns, tx epoch %" PRId64
                               " next %" PRId64 "%s", i,
                               qdict_get_int(st, "node"),
                               qdict_get_str(st, "priority"),
                               qdict_get_int(st, "lines-busy"),
                               qdict_get_int(st, "max-retries"),
                               qdict_get_int(st, "next-deadline-ns"),
                               qdict_get_int(st, "tx-epoch"),
                               qdict_get_int(st, "tx-next-seq"),
                               qdict_get_bool(st, "tx-paused") ? ", paused"
                                                               : "");
            }
        }
        g_test_message("node %u: retry timer in %" PRId64 " ns; link %s, "
                       "tx credits high %" PRId64 " low %" PRId64 ", %"
                       PRId64 " packet(s) pending", i,
                       qdict_get_int(state, "e2e-retry-due-ns"),
                       qdict_get_str(state, "link"),
                       qdict_get_int(state, "tx-credits-high"),
                       qdict_get_int(state, "tx-credits-low"),
                       qdict_get_int(state, "tx-pending"));
        counters = qdict_get_qdict(state, "counters");
        for (ce = qdict_first(counters); ce;
             ce = qdict_next(counters, ce)) {
            uint64_t n = qnum_get_uint(qobject_to(QNum,
                                                  qdict_entry_value(ce)));

            if (n) {
                g_test_message("node %u: counter %s %" PRIu64, i,
                               qdict_entry_key(ce), n);
            }
        }
        qobject_unref(rsp);
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
            /*
             * Virtual time moves only when the test says: it drives the
             * retransmit timers of each node.
             */
            qtest_clock_step(c.node[i]->qts, CLUSTER_STEP_NS);
            cluster_receive(&c, i);
        }
    }
    if (c.received != c.expected) {
        cluster_report_missing(&c);
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
 * Before a failed check of the stream: what the receive queue holds, so
 * that a wrong header says where each message went (slot, LAP, the
 * message number in COMMAND0) and where the NIU's head is.
 */
static void stream_dump_queue(Niu *rx, unsigned got)
{
    unsigned i;

    g_test_message("expected message %u in slot %u (lap %u); NIU head 0x%x",
                   got, got % ARCTIC_N, (got / ARCTIC_N) & 1,
                   ep_r(rx, 0, A_EP_LO_RX_HD));
    for (i = 0; i < ARCTIC_N; i++) {
        uint64_t slot = rx_slot_addr(ARCTIC_RXQ_LO, i);
        uint32_t w0 = qtest_readl(rx->qts, slot);

        if (FIELD_EX32(w0, MPI_HEADER, VALID)) {
            g_test_message("slot %3u: header 0x%08x lap %u message %u", i,
                           w0, FIELD_EX32(w0, MPI_HEADER, LAP),
                           qtest_readl(rx->qts,
                                       slot + ARCTIC_SLOT_COMMAND0));
        }
    }
}

/*
 * With the rings, the real switch hands the NIU its ends of this link's
 * per-CPU wake-up sockets (link 1.3) and every kick of it goes to one of
 * them: the host has no CPU beyond the switch's table.  Without, there
 * are none.
 */
static void cluster_check_cpu_kicks(Niu *n)
{
    QDict *rsp, *state = niu_state(n, &rsp);
    uint64_t kicks = qdict_get_int(state, "link-switch-kicks");
    uint64_t cpu_kicks = qdict_get_int(state, "link-cpu-kicks");

    if (qdict_get_bool(state, "link-rings")) {
        g_assert_cmpuint(kicks, >, 0);
        g_assert_cmpuint(cpu_kicks, ==, kicks);
    } else {
        g_assert_cmpuint(cpu_kicks, ==, 0);
    }
    g_test_message("%" PRIu64 " kicks of the switch, %" PRIu64
                   " to its CPU's thread", kicks, cpu_kicks);
    qobject_unref(rsp);
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
            uint32_t w[ARCTIC_SLOT_SIZE / 4], want;
            unsigned len, k;

            qtest_memread(rx->qts, slot, w, sizeof(w));
            if (!(le32_to_cpu(w[0]) & ARCTIC_MPI_VALID)) {
                break;
            }
            len = got % (ARCTIC_MAX_PAYLOAD + 1);
            want = rx_tail_header(rx, ARCTIC_RXQ_LO,
                                  mpi_header(0, got & 0x7f, len));
            if (le32_to_cpu(w[0]) != want || le32_to_cpu(w[1]) != got) {
                stream_dump_queue(rx, got);
            }
            g_assert_cmphex(le32_to_cpu(w[0]), ==, want);
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
    cluster_check_cpu_kicks(tx);
    cluster_check_cpu_kicks(rx);
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

void niu_test_add_cluster(void)
{
    qtest_add_func("/arctic-niu/cluster/2-nodes", test_cluster_2);
    qtest_add_func("/arctic-niu/cluster/2-nodes-stream", test_cluster_stream);
    qtest_add_func("/arctic-niu/cluster/2-nodes-tcp", test_cluster_2_tcp);
    qtest_add_func("/arctic-niu/cluster/4-nodes", test_cluster_4);
    qtest_add_func("/arctic-niu/cluster/4-nodes-faults",
                   test_cluster_4_faults);
}
