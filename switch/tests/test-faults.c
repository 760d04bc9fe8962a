/* SPDX-License-Identifier: MIT */
/*
 * Fault-injection and timing-model tests of arctic-switch: drop,
 * duplicate, corrupt and delay rates within tolerance of the configured
 * probabilities with a fixed seed, what the receiver sees agreeing with
 * the switch's counters, the same packets delivered (same fates, same
 * corrupted bits) in two runs with one seed, a different seed giving other
 * fates, faults changed at run time, and the timing model holding packets
 * at least as long as the link bandwidth says.
 */
#include <math.h>
#include <string.h>

#include "harness.h"

enum { SRC = 0, DST = 3, COUNT = 4000 };

struct fault_run {
    unsigned next;
    unsigned payload_words;
    GPtrArray *received;        /* GBytes of every packet, in arrival order */
    unsigned bad_crc, reordered;
    uint32_t highest_seq;
    bool any;
};

static bool fault_next(void *opaque, unsigned client, uint8_t *buf,
                       size_t *size)
{
    struct fault_run *run = opaque;

    if (client != SRC || run->next >= COUNT) {
        return false;
    }
    *size = test_build_packet(buf, SRC, DST, false, false, run->next++,
                              run->payload_words);
    return true;
}

static void fault_received(void *opaque, unsigned client, const uint8_t *pkt,
                           size_t size)
{
    struct fault_run *run = opaque;
    unsigned src, dst;
    uint32_t seq;
    bool high;

    g_assert_cmpuint(client, ==, 1);
    g_ptr_array_add(run->received, g_bytes_new(pkt, size));
    if (!test_packet_valid(pkt, size, &src, &dst, &seq, &high)) {
        run->bad_crc++;
        return;
    }
    if (run->any && seq < run->highest_seq) {
        run->reordered++;
    }
    if (!run->any || seq > run->highest_seq) {
        run->highest_seq = seq;
    }
    run->any = true;
}

static gint compare_bytes(gconstpointer a, gconstpointer b)
{
    return g_bytes_compare(*(GBytes *const *)a, *(GBytes *const *)b);
}

/* Send COUNT low packets SRC -> DST through faults; returns the switch's
 * counters of DST and fills @run. */
static struct arctic_port_prio_stats run_faults(uint64_t seed,
                                                struct fault_run *run,
                                                bool via_control)
{
    ArcticSwitchConfig config;
    TestSwitch *ts;
    TestClient *clients[2];
    TestTraffic t = {
        .clients = clients,
        .num_clients = 2,
        .next_packet = fault_next,
        .received = fault_received,
        .opaque = run,
        .expected = G_MAXUINT64,
        .idle_timeout_ms = 400,
    };
    struct arctic_fault_params params = {
        .drop = 0.10, .duplicate = 0.05, .corrupt = 0.05, .delay = 0.10,
        .delay_us = 2000,
    };
    struct arctic_port_prio_stats result;
    ArcticSwitchStats *st;

    arctic_switch_config_init(&config);
    config.ports = 8;
    config.seed = seed;
    ts = test_switch_start(&config);
    if (via_control) {
        /* The same faults set at run time through arctic-ctl. */
        const char *ctl = g_getenv("ARCTIC_CTL");
        g_autofree char *out = NULL;
        int status;
        char *argv[] = {
            (char *)ctl, (char *)"-s", ts->control_path, (char *)"set-faults",
            (char *)"port=3", (char *)"priority=low", (char *)"drop=0.1",
            (char *)"duplicate=0.05", (char *)"corrupt=0.05",
            (char *)"delay=0.1", (char *)"delay_us=2000", NULL
        };

        g_assert_nonnull(ctl);
        g_assert_true(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL,
                                   NULL, &out, NULL, &status, NULL));
        g_assert_true(g_spawn_check_wait_status(status, NULL));
        g_assert_nonnull(strstr(out, "\"drop\" : 0.1"));
    } else {
        g_assert_true(arctic_switch_set_faults(ts->sw, DST,
                                               ARCTIC_PRIORITY_LOW, &params,
                                               NULL));
    }
    clients[0] = test_client_connect(ts->socket_path, SRC, 8, 8);
    clients[1] = test_client_connect(ts->socket_path, DST, 8, 8);
    run->received = g_ptr_array_new_with_free_func(
        (GDestroyNotify)g_bytes_unref);
    test_traffic_run(&t);
    g_assert_cmpuint(run->next, ==, COUNT);

    st = test_switch_stats(ts);
    result = st->port[DST].prio[ARCTIC_PRIORITY_LOW];
    g_assert_cmpuint(st->packets_in_use, ==, 0);
    g_assert_cmpuint(st->port[SRC].prio[0].rx_packets, ==, COUNT);
    {
        /* The exit summary says what fault injection did, not only drops. */
        g_autofree char *printed = NULL, *want = NULL;
        size_t printed_size;
        FILE *out = open_memstream(&printed, &printed_size);

        arctic_switch_stats_print(st, out);
        fclose(out);
        want = g_strdup_printf("faults: duplicated=%" G_GUINT64_FORMAT
                               " corrupted=%" G_GUINT64_FORMAT " delayed=%"
                               G_GUINT64_FORMAT "\n", result.duplicated,
                               result.corrupted, result.delayed);
        g_assert_nonnull(strstr(printed, want));
    }
    arctic_switch_stats_free(st);
    test_client_free(clients[0]);
    test_client_free(clients[1]);
    test_switch_stop(ts);
    g_ptr_array_sort(run->received, compare_bytes);
    return result;
}

static void assert_rate(uint64_t count, uint64_t out_of, double p)
{
    double rate = (double)count / out_of;
    /* Six standard deviations: a correct switch never fails this. */
    double tolerance = 6 * sqrt(p * (1 - p) / out_of);

    g_assert_cmpfloat(fabs(rate - p), <=, tolerance);
}

static void check_against_counters(const struct arctic_port_prio_stats *q,
                                   const struct fault_run *run)
{
    uint64_t dropped = q->drops[ARCTIC_DROP_FAULT];
    uint64_t survivors = COUNT - dropped;

    g_assert_cmpuint(run->received->len, ==, survivors + q->duplicated);
    g_assert_cmpuint(q->tx_packets, ==, run->received->len);
    g_assert_cmpuint(run->bad_crc, >=, q->corrupted);
    g_assert_cmpuint(run->bad_crc, <=, 2 * q->corrupted);
    assert_rate(dropped, COUNT, 0.10);
    assert_rate(q->duplicated, survivors, 0.05);
    assert_rate(q->corrupted, survivors, 0.05);
    assert_rate(q->delayed, survivors, 0.10);
    g_assert_cmpuint(run->reordered, >, 0);
}

static bool same_packets(const struct fault_run *a, const struct fault_run *b)
{
    unsigned i;

    if (a->received->len != b->received->len) {
        return false;
    }
    for (i = 0; i < a->received->len; i++) {
        if (!g_bytes_equal(a->received->pdata[i], b->received->pdata[i])) {
            return false;
        }
    }
    return true;
}

static void test_fault_rates_reproducible(void)
{
    struct fault_run first = { .payload_words = 6 };
    struct fault_run second = { .payload_words = 6 };
    struct fault_run other_seed = { .payload_words = 6 };
    struct arctic_port_prio_stats q1, q2, q3;
    unsigned r;

    q1 = run_faults(42, &first, false);
    check_against_counters(&q1, &first);
    /* Second run: same seed, faults set through the control socket. */
    q2 = run_faults(42, &second, true);
    check_against_counters(&q2, &second);
    for (r = 0; r < ARCTIC_DROP_REASONS; r++) {
        g_assert_cmpuint(q1.drops[r], ==, q2.drops[r]);
    }
    g_assert_cmpuint(q1.duplicated, ==, q2.duplicated);
    g_assert_cmpuint(q1.corrupted, ==, q2.corrupted);
    g_assert_cmpuint(q1.delayed, ==, q2.delayed);
    g_assert_cmpuint(first.bad_crc, ==, second.bad_crc);
    g_assert_true(same_packets(&first, &second));

    q3 = run_faults(43, &other_seed, false);
    check_against_counters(&q3, &other_seed);
    g_assert_false(same_packets(&first, &other_seed));

    g_ptr_array_unref(first.received);
    g_ptr_array_unref(second.received);
    g_ptr_array_unref(other_seed.received);
}

static void test_fault_spec_parse(void)
{
    struct arctic_fault_params p;
    int port, prio;
    GError *err = NULL;

    g_assert_true(arctic_fault_spec_parse("3:low:drop=0.25,dup=0.5,"
                                          "corrupt=0.125,delay=1,"
                                          "delay-us=77", &port, &prio, &p,
                                          &err));
    g_assert_no_error(err);
    g_assert_cmpint(port, ==, 3);
    g_assert_cmpint(prio, ==, ARCTIC_PRIORITY_LOW);
    g_assert_cmpfloat(p.drop, ==, 0.25);
    g_assert_cmpfloat(p.duplicate, ==, 0.5);
    g_assert_cmpfloat(p.corrupt, ==, 0.125);
    g_assert_cmpfloat(p.delay, ==, 1.0);
    g_assert_cmpuint(p.delay_us, ==, 77);

    g_assert_true(arctic_fault_spec_parse("*:drop=0.5", &port, &prio, &p,
                                          NULL));
    g_assert_cmpint(port, ==, -1);
    g_assert_cmpint(prio, ==, -1);
    g_assert_cmpuint(p.delay_us, ==, ARCTIC_SWITCH_DEFAULT_DELAY_US);

    g_assert_false(arctic_fault_spec_parse("3", &port, &prio, &p, &err));
    g_clear_error(&err);
    g_assert_false(arctic_fault_spec_parse("3:drop=1.5", &port, &prio, &p,
                                           &err));
    g_assert_nonnull(strstr(err->message, "between 0 and 1"));
    g_clear_error(&err);
    g_assert_false(arctic_fault_spec_parse("3:mid:drop=0.1", &port, &prio,
                                           &p, &err));
    g_clear_error(&err);
    g_assert_false(arctic_fault_spec_parse("300:drop=0.1", &port, &prio, &p,
                                           &err));
    g_clear_error(&err);
    g_assert_false(arctic_fault_spec_parse("1:bogus=1", &port, &prio, &p,
                                           &err));
    g_assert_nonnull(strstr(err->message, "unknown key"));
    g_clear_error(&err);
    g_assert_false(arctic_fault_spec_parse("1:delay-us=x", &port, &prio, &p,
                                           &err));
    g_clear_error(&err);
}

/* drop=1 at run time stops delivery; back to 0 and it flows again. */
static void set_drop(ArcticSwitch *sw, void *opaque)
{
    struct arctic_fault_params p = { .drop = *(double *)opaque,
                                     .delay_us = 1000 };

    g_assert_true(arctic_switch_set_faults(sw, 1, -1, &p, NULL));
}

static void test_fault_runtime_change(void)
{
    ArcticSwitchConfig config;
    TestSwitch *ts;
    TestClient *a, *b;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    double drop = 1.0;
    unsigned i;
    ArcticSwitchStats *st;

    arctic_switch_config_init(&config);
    config.ports = 2;
    ts = test_switch_start(&config);
    a = test_client_connect(ts->socket_path, 0, 8, 8);
    b = test_client_connect(ts->socket_path, 1, 8, 8);
    arctic_switch_invoke(ts->sw, set_drop, &drop);
    for (i = 0; i < 50; i++) {
        size_t size = test_build_packet(pkt, 0, 1, i & 1, false, i, 1);

        g_assert_true(test_client_send_packet(a, pkt, size, 2000));
    }
    drop = 0.0;
    /* Wait until the switch has seen all 50 before lifting the fault. */
    do {
        st = test_switch_stats(ts);
        i = st->port[1].prio[0].drops[ARCTIC_DROP_FAULT] +
            st->port[1].prio[1].drops[ARCTIC_DROP_FAULT];
        arctic_switch_stats_free(st);
    } while (i < 50 && (g_usleep(1000), true));
    arctic_switch_invoke(ts->sw, set_drop, &drop);
    {
        size_t size = test_build_packet(pkt, 0, 1, true, false, 99, 1);
        g_autoptr(GBytes) got = NULL;

        g_assert_true(test_client_send_packet(a, pkt, size, 2000));
        got = test_client_recv_packet(b, 2000);
        g_assert_nonnull(got);
        g_assert_cmpuint(g_bytes_get_size(got), ==, size);
        g_assert_cmpmem(g_bytes_get_data(got, NULL), size, pkt, size);
    }
    test_client_free(a);
    test_client_free(b);
    test_switch_stop(ts);
}

/* With the timing model at 1 MB/s, 100 full-size packets through one
 * output cannot take less than 100 x 144 us (a lower bound only). */
static void test_timing_model(void)
{
    ArcticSwitchConfig config;
    TestSwitch *ts;
    TestClient *a, *b;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    unsigned i, got = 0;
    gint64 start;
    ArcticSwitchStats *st;
    unsigned bucket, slow = 0;

    arctic_switch_config_init(&config);
    config.ports = 4;
    config.timing = true;
    config.link_mbytes_per_s = 1.0;
    config.hop_latency_ns = 50000;
    ts = test_switch_start(&config);
    a = test_client_connect(ts->socket_path, 0, 8, 8);
    b = test_client_connect(ts->socket_path, 3, 200, 8);
    start = g_get_monotonic_time();
    for (i = 0; i < 100; i++) {
        size_t size = test_build_packet(pkt, 0, 3, false, false, i,
                                        ARCTIC_MAX_PAYLOAD_WORDS + 7);

        g_assert_cmpuint(size, ==, ARCTIC_WIRE_MAX_SIZE);
        g_assert_true(test_client_send_packet(a, pkt, size, 5000));
    }
    while (got < 100) {
        g_autoptr(GBytes) p = test_client_recv_packet(b, 5000);

        g_assert_nonnull(p);
        got++;
    }
    g_assert_cmpint(g_get_monotonic_time() - start, >=, 100 * 144);
    st = test_switch_stats(ts);
    /* Latency includes at least the hops' 50 us each: nothing under
     * 64 us (buckets 0..6 are < 64 us). */
    for (bucket = 0; bucket < 6; bucket++) {
        slow += st->latency[0][bucket];
    }
    g_assert_cmpuint(slow, ==, 0);
    arctic_switch_stats_free(st);
    test_client_free(a);
    test_client_free(b);
    test_switch_stop(ts);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/switch/faults/spec-parse", test_fault_spec_parse);
    g_test_add_func("/switch/faults/rates-reproducible",
                    test_fault_rates_reproducible);
    g_test_add_func("/switch/faults/runtime-change",
                    test_fault_runtime_change);
    g_test_add_func("/switch/timing/bandwidth-lower-bound", test_timing_model);
    return g_test_run();
}
