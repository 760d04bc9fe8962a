/* SPDX-License-Identifier: MIT */
/*
 * pcap capture tests of arctic-switch: the file format (LINKTYPE_USER0,
 * the capture header of each record, the wire bytes) read back in C, and,
 * when run with --tshark, the Wireshark Lua dissector read through tshark
 * (exit 77, meson's "skipped", only when tshark is not installed).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "harness.h"

enum { CAPTURE_HEADER = 8, PCAP_HEADER = 24, RECORD_HEADER = 16 };

struct capture {
    char *dir, *path;
    uint8_t good[3][ARCTIC_WIRE_MAX_SIZE];
    size_t good_size[3];
};

/* Three good packets 0 -> 1 (seq 10, 11, 12; 11 high priority and with
 * ACK_NOW), a bad CRC (seq 13) and one to the unconnected port 2 (seq
 * 14). */
static void make_capture(struct capture *cap)
{
    ArcticSwitchConfig config;
    TestSwitch *ts;
    TestClient *a, *b;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size;
    unsigned i;
    GError *err = NULL;

    cap->dir = g_dir_make_tmp("arctic-pcap-XXXXXX", &err);
    g_assert_no_error(err);
    cap->path = g_build_filename(cap->dir, "capture.pcap", NULL);
    arctic_switch_config_init(&config);
    config.ports = 4;
    config.pcap_path = cap->path;
    ts = test_switch_start(&config);
    a = test_client_connect(ts->socket_path, 0, 8, 8);
    b = test_client_connect(ts->socket_path, 1, 8, 8);
    for (i = 0; i < 3; i++) {
        cap->good_size[i] = test_build_packet(cap->good[i], 0, 1, i == 1,
                                              false, 10 + i, 2 * i);
        if (i == 1) {
            struct arctic_e2e_header h;

            arctic_e2e_decode(cap->good[i], &h);
            h.flags |= ARCTIC_FIELD_PREP(ARCTIC_E2E_FLAGS, ACK_NOW, 1);
            arctic_e2e_encode(cap->good[i], &h);
            arctic_wire_seal(cap->good[i], cap->good_size[i]);
        }
        g_assert_true(test_client_send_packet(a, cap->good[i],
                                              cap->good_size[i], 2000));
        g_autoptr(GBytes) got = test_client_recv_packet(b, 2000);
        g_assert_nonnull(got);
    }
    size = test_build_packet(pkt, 0, 1, false, false, 13, 1);
    pkt[ARCTIC_WIRE_WORDS_OFFSET + 9] ^= 1;
    g_assert_true(test_client_send_packet(a, pkt, size, 2000));
    size = test_build_packet(pkt, 0, 2, false, false, 14, 1);
    g_assert_true(test_client_send_packet(a, pkt, size, 2000));
    /* Every credit back: the switch has handled all five. */
    while (a->send_credits[0] < config.credits ||
           a->send_credits[1] < config.credits) {
        g_assert_true(test_client_poll(a, 2000));
    }
    test_client_free(a);
    test_client_free(b);
    test_switch_stop(ts);       /* closes and flushes the capture */
}

static void free_capture(struct capture *cap)
{
    g_unlink(cap->path);
    g_rmdir(cap->dir);
    g_free(cap->path);
    g_free(cap->dir);
}

static void test_pcap_format(void)
{
    struct capture cap;
    g_autofree uint8_t *data = NULL;
    gsize len, off;
    unsigned records = 0, ingress = 0, egress = 0, drops = 0;
    unsigned drop_reasons = 0;

    make_capture(&cap);
    g_assert_true(g_file_get_contents(cap.path, (char **)&data, &len, NULL));
    g_assert_cmpuint(len, >=, PCAP_HEADER);
    g_assert_cmphex(arctic_get_le32(data), ==, 0xa1b2c3d4);
    g_assert_cmpuint(arctic_get_le32(data + 20), ==, 147);
    for (off = PCAP_HEADER; off < len; records++) {
        uint32_t incl = arctic_get_le32(data + off + 8);
        const uint8_t *rec = data + off + RECORD_HEADER;
        const uint8_t *wire = rec + CAPTURE_HEADER;
        size_t wire_size = incl - CAPTURE_HEADER;
        struct arctic_e2e_header e2e;

        g_assert_cmpuint(arctic_get_le32(data + off + 12), ==, incl);
        g_assert_cmpuint(off + RECORD_HEADER + incl, <=, len);
        g_assert_cmpuint(rec[0], ==, 1);
        g_assert_cmpuint(arctic_get_le16(rec + 4), ==, 0);
        arctic_e2e_decode(wire, &e2e);
        switch (rec[1]) {
        case 1:     /* ingress */
        case 2:     /* egress */
            rec[1] == 1 ? ingress++ : egress++;
            g_assert_cmpuint(rec[2], ==, 0);
            g_assert_cmpuint(arctic_get_le16(rec + 6), ==, 1);
            g_assert_cmpuint(e2e.seq, >=, 10);
            g_assert_cmpuint(e2e.seq, <=, 12);
            g_assert_cmpmem(wire, wire_size, cap.good[e2e.seq - 10],
                            cap.good_size[e2e.seq - 10]);
            break;
        case 3:
            drops++;
            if (e2e.seq == 13) {
                g_assert_cmpuint(rec[2], ==, ARCTIC_DROP_BAD_CRC + 1);
                drop_reasons |= 1;
            } else {
                g_assert_cmpuint(e2e.seq, ==, 14);
                g_assert_cmpuint(rec[2], ==, ARCTIC_DROP_PORT_DOWN + 1);
                g_assert_cmpuint(arctic_get_le16(rec + 6), ==, 2);
                drop_reasons |= 2;
            }
            break;
        default:
            g_assert_not_reached();
        }
        off += RECORD_HEADER + incl;
    }
    g_assert_cmpuint(records, ==, 8);
    g_assert_cmpuint(ingress, ==, 3);
    g_assert_cmpuint(egress, ==, 3);
    g_assert_cmpuint(drops, ==, 2);
    g_assert_cmpuint(drop_reasons, ==, 3);
    free_capture(&cap);
}

/* tshark with the Lua dissector decodes the same capture field by field. */
static void test_tshark_dissector(void)
{
    struct capture cap;
    const char *lua = g_getenv("ARCTIC_LUA_DISSECTOR");
    g_autofree char *script = NULL, *out = NULL, *err = NULL;
    g_autofree char *tshark = g_find_program_in_path("tshark");
    int status;
    /* event, drop reason, in port, out port (65535: not routed, as a
     * bad CRC is dropped before its route is read), e2e dst, seq, W1
     * length, CRC good, W0 priority, e2e ACK_NOW */
    const char *expected =
        "1,0,0,1,1,10,4,1,0,0\n"
        "2,0,0,1,1,10,4,1,0,0\n"
        "1,0,0,1,1,11,6,1,1,1\n"
        "2,0,0,1,1,11,6,1,1,1\n"
        "1,0,0,1,1,12,8,1,0,0\n"
        "2,0,0,1,1,12,8,1,0,0\n"
        "3,1,0,65535,1,13,5,0,0,0\n"
        "3,6,0,2,2,14,5,1,0,0\n";

    g_assert_nonnull(lua);
    make_capture(&cap);
    script = g_strdup_printf("lua_script:%s", lua);
    {
        char *argv[] = {
            tshark, (char *)"-n", (char *)"-X", script, (char *)"-r",
            cap.path, (char *)"-T", (char *)"fields", (char *)"-E",
            (char *)"separator=,", (char *)"-e", (char *)"arctic.event",
            (char *)"-e", (char *)"arctic.drop_reason", (char *)"-e",
            (char *)"arctic.in_port", (char *)"-e", (char *)"arctic.out_port",
            (char *)"-e", (char *)"arctic.e2e.dst", (char *)"-e",
            (char *)"arctic.e2e.seq", (char *)"-e", (char *)"arctic.w1.length",
            (char *)"-e", (char *)"arctic.crc_ok", (char *)"-e",
            (char *)"arctic.w0.priority", (char *)"-e",
            (char *)"arctic.e2e.ack_now", NULL
        };

        g_assert_true(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL,
                                   NULL, &out, &err, &status, NULL));
    }
    if (!g_spawn_check_wait_status(status, NULL)) {
        g_printerr("tshark failed: %s\n", err);
    }
    g_assert_true(g_spawn_check_wait_status(status, NULL));
    /* tshark prints booleans as 1/0 (4.x) or True/False (older). */
    {
        g_autofree char *normal = NULL;
        GString *s = g_string_new(out);

        g_string_replace(s, "True", "1", 0);
        g_string_replace(s, "False", "0", 0);
        normal = g_string_free(s, FALSE);
        g_assert_cmpstr(normal, ==, expected);
    }
    free_capture(&cap);
}

int main(int argc, char **argv)
{
    bool tshark_only = argc > 1 && !strcmp(argv[argc - 1], "--tshark");
    g_autofree char *tshark = g_find_program_in_path("tshark");

    if (tshark_only) {
        argc--;
        if (!tshark) {
            printf("tshark not installed: skipped\n");
            return 77;
        }
    }
    g_test_init(&argc, &argv, NULL);
    if (tshark_only) {
        g_test_add_func("/switch/pcap/tshark-dissector",
                        test_tshark_dissector);
    } else {
        g_test_add_func("/switch/pcap/format", test_pcap_format);
    }
    return g_test_run();
}
