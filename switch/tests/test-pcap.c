/* SPDX-License-Identifier: MIT */
/*
 * pcap capture tests of arctic-switch: the file format (LINKTYPE_USER0,
 * the capture header of each record, the wire bytes) read back in C, and,
 * when run with --tshark, the Wireshark Lua dissector read through tshark
 * (exit 77, meson's "skipped", only when tshark is not installed); and
 * the control socket's pcap-start played by a hostile client, who may
 * name a new capture in the switch's --pcap-dir and write nothing else.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

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

/* --- pcap-start from the control socket -------------------------------- */

enum { VICTIM_SIZE = 1000 };

/* A control request @command (with "path": @name unless NULL); the
 * reply, parsed (free *parser). */
static JsonObject *control_call(TestSwitch *ts, const char *command,
                                const char *name, JsonParser **parser)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *line = NULL;
    GString *reply = g_string_new(NULL);
    int fd = test_connect_unix(ts->control_path);
    char buf[4096];
    ssize_t n;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "command");
    json_builder_add_string_value(b, command);
    if (name) {
        json_builder_set_member_name(b, "path");
        json_builder_add_string_value(b, name);
    }
    json_builder_end_object(b);
    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    line = g_strconcat(json_generator_to_data(gen, NULL), "\n", NULL);
    g_assert_cmpint(send(fd, line, strlen(line), MSG_NOSIGNAL), ==,
                    (ssize_t)strlen(line));
    while (!strchr(reply->str, '\n') &&
           (n = recv(fd, buf, sizeof(buf), 0)) > 0) {
        g_string_append_len(reply, buf, n);
    }
    close(fd);
    *parser = json_parser_new();
    g_assert_true(json_parser_load_from_data(*parser, reply->str, -1, NULL));
    g_string_free(reply, TRUE);
    return json_node_get_object(json_parser_get_root(*parser));
}

/* The capture "info" names (NULL: none). */
static char *capture_running(TestSwitch *ts)
{
    JsonParser *parser;
    JsonObject *reply = control_call(ts, "info", NULL, &parser);
    char *path;

    g_assert_true(json_object_get_boolean_member(reply, "ok"));
    path = g_strdup(json_object_get_string_member(reply, "pcap"));
    g_object_unref(parser);
    return path;
}

/* pcap-start @name is refused with an error that contains @reason. */
static void pcap_start_refused(TestSwitch *ts, const char *name,
                               const char *reason)
{
    JsonParser *parser;
    JsonObject *reply = control_call(ts, "pcap-start", name, &parser);

    g_test_message("pcap-start \"%s\": %s", name,
                   json_object_get_string_member_with_default(
                       reply, "error", "(accepted)"));
    g_assert_false(json_object_get_boolean_member(reply, "ok"));
    g_assert_nonnull(strstr(json_object_get_string_member(reply, "error"),
                            reason));
    g_object_unref(parser);
}

/* A file of VICTIM_SIZE bytes of 'v' at @path. */
static void victim_make(const char *path)
{
    char bytes[VICTIM_SIZE];

    memset(bytes, 'v', sizeof(bytes));
    g_assert_true(g_file_set_contents(path, bytes, sizeof(bytes), NULL));
}

/* The file at @path is still the one victim_make() wrote. */
static void victim_intact(const char *path)
{
    g_autofree char *data = NULL;
    char bytes[VICTIM_SIZE];
    gsize len = 0;

    memset(bytes, 'v', sizeof(bytes));
    g_assert_true(g_file_get_contents(path, &data, &len, NULL));
    g_assert_cmpmem(data, len, bytes, sizeof(bytes));
}

static int name_compare(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in directory @path, sorted, separated by spaces. */
static char *dir_names(const char *path)
{
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    GDir *dir = g_dir_open(path, 0, NULL);
    const char *name;

    g_assert_nonnull(dir);
    while ((name = g_dir_read_name(dir))) {
        g_ptr_array_add(names, g_strdup(name));
    }
    g_dir_close(dir);
    g_ptr_array_sort(names, name_compare);
    g_ptr_array_add(names, NULL);
    return g_strjoinv(" ", (char **)names->pdata);
}

/* Without --pcap-dir the control socket starts no capture at all, not
 * even into a file its client could have made itself. */
static void test_pcap_start_needs_dir(void)
{
    g_autofree char *dir = g_dir_make_tmp("arctic-pcap-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "run.pcap", NULL);
    ArcticSwitchConfig config;
    TestSwitch *ts;

    arctic_switch_config_init(&config);
    config.ports = 2;
    ts = test_switch_start(&config);
    pcap_start_refused(ts, path, "--pcap-dir");
    pcap_start_refused(ts, "run.pcap", "--pcap-dir");
    g_assert_null(capture_running(ts));
    test_switch_stop(ts);
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
    g_rmdir(dir);
}

/*
 * The capture directory holds a symbolic link to a file outside it, a
 * regular file, a FIFO with a reader and a directory; the client also
 * tries paths that leave the directory.  Each is refused with its reason,
 * no file changes, and nothing is created.  The test runs in the capture
 * directory, so that a switch that took names relative to its own working
 * directory would reach the same files.
 */
static void test_pcap_start_hostile_names(void)
{
    g_autofree char *top = g_dir_make_tmp("arctic-pcap-XXXXXX", NULL);
    g_autofree char *dir = g_build_filename(top, "captures", NULL);
    g_autofree char *outside = g_build_filename(top, "outside", NULL);
    g_autofree char *victim = g_build_filename(outside, "victim", NULL);
    g_autofree char *link = g_build_filename(dir, "link", NULL);
    g_autofree char *existing = g_build_filename(dir, "existing", NULL);
    g_autofree char *fifo = g_build_filename(dir, "fifo", NULL);
    g_autofree char *subdir = g_build_filename(dir, "subdir", NULL);
    g_autofree char *cwd = g_get_current_dir();
    g_autofree char *long_name = g_strnfill(300, 'x');
    ArcticSwitchConfig config;
    TestSwitch *ts;
    int fifo_reader;

    g_assert_cmpint(g_mkdir(dir, 0700), ==, 0);
    g_assert_cmpint(g_mkdir(outside, 0700), ==, 0);
    g_assert_cmpint(g_mkdir(subdir, 0700), ==, 0);
    victim_make(victim);
    victim_make(existing);
    g_assert_cmpint(symlink(victim, link), ==, 0);
    g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
    /* A reader, so that a switch that opened the FIFO would not hang. */
    fifo_reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    g_assert_cmpint(fifo_reader, >=, 0);
    g_assert_cmpint(chdir(dir), ==, 0);

    arctic_switch_config_init(&config);
    config.ports = 2;
    config.pcap_dir = dir;
    ts = test_switch_start(&config);
    pcap_start_refused(ts, "link", "symbolic link");
    pcap_start_refused(ts, "existing", "never replaces");
    pcap_start_refused(ts, "fifo", "not a regular file");
    pcap_start_refused(ts, "subdir", "is a directory");
    pcap_start_refused(ts, victim, "'/'");
    pcap_start_refused(ts, "../outside/victim", "'/'");
    pcap_start_refused(ts, "subdir/new", "'/'");
    pcap_start_refused(ts, "/proc/self/mem", "'/'");
    pcap_start_refused(ts, "..", "names a directory");
    pcap_start_refused(ts, ".", "names a directory");
    pcap_start_refused(ts, "", "is empty");
    pcap_start_refused(ts, long_name, "longer than 255");
    g_assert_null(capture_running(ts));
    test_switch_stop(ts);

    g_assert_cmpint(chdir(cwd), ==, 0);
    close(fifo_reader);
    victim_intact(victim);
    victim_intact(existing);
    /* Nothing new anywhere: the directories hold what was planted. */
    {
        g_autofree char *names = dir_names(dir);
        g_autofree char *in_subdir = dir_names(subdir);
        g_autofree char *in_outside = dir_names(outside);

        g_assert_cmpstr(names, ==, "existing fifo link subdir");
        g_assert_cmpstr(in_subdir, ==, "");
        g_assert_cmpstr(in_outside, ==, "victim");
    }
    g_assert_cmpint(g_rmdir(subdir), ==, 0);
    g_unlink(fifo);
    g_unlink(link);
    g_unlink(existing);
    g_unlink(victim);
    g_rmdir(outside);
    g_rmdir(dir);
    g_rmdir(top);
}

/*
 * A plain new name is taken: the capture is that file in the capture
 * directory (not in the switch's working directory), a regular file with
 * a pcap header and the packet sent.  A refused request meanwhile leaves
 * the running capture alone.
 */
static void test_pcap_start_in_dir(void)
{
    g_autofree char *dir = g_dir_make_tmp("arctic-pcap-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "run.pcap", NULL);
    g_autofree char *running = NULL;
    g_autofree uint8_t *data = NULL;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    ArcticSwitchConfig config;
    JsonParser *parser;
    JsonObject *reply;
    TestSwitch *ts;
    TestClient *a, *b;
    struct arctic_e2e_header e2e;
    GStatBuf st;
    size_t size;
    gsize len;

    arctic_switch_config_init(&config);
    config.ports = 2;
    config.pcap_dir = dir;
    ts = test_switch_start(&config);
    reply = control_call(ts, "pcap-start", "run.pcap", &parser);
    g_assert_true(json_object_get_boolean_member(reply, "ok"));
    g_assert_cmpstr(json_object_get_string_member(reply, "pcap"), ==, path);
    g_object_unref(parser);
    pcap_start_refused(ts, "run.pcap", "never replaces");
    running = capture_running(ts);
    g_assert_cmpstr(running, ==, path);

    a = test_client_connect(ts->socket_path, 0, 8, 8);
    b = test_client_connect(ts->socket_path, 1, 8, 8);
    size = test_build_packet(pkt, 0, 1, false, false, 21, 2);
    g_assert_true(test_client_send_packet(a, pkt, size, 2000));
    {
        g_autoptr(GBytes) got = test_client_recv_packet(b, 2000);

        g_assert_nonnull(got);
    }
    test_client_free(a);
    test_client_free(b);
    test_switch_stop(ts);       /* closes and flushes the capture */

    g_assert_cmpint(g_lstat(path, &st), ==, 0);
    g_assert_true(S_ISREG(st.st_mode));
    g_assert_true(g_file_get_contents(path, (char **)&data, &len, NULL));
    g_assert_cmpuint(len, >=, PCAP_HEADER + RECORD_HEADER + CAPTURE_HEADER +
                     size);
    g_assert_cmphex(arctic_get_le32(data), ==, 0xa1b2c3d4);
    g_assert_cmpuint(arctic_get_le32(data + 20), ==, 147);
    /* The first record: the packet entering at port 0. */
    g_assert_cmpuint(arctic_get_le32(data + PCAP_HEADER + 8), ==,
                     CAPTURE_HEADER + size);
    g_assert_cmpuint(data[PCAP_HEADER + RECORD_HEADER + 1], ==, 1);
    arctic_e2e_decode(data + PCAP_HEADER + RECORD_HEADER + CAPTURE_HEADER,
                      &e2e);
    g_assert_cmpuint(e2e.seq, ==, 21);
    g_unlink(path);
    g_rmdir(dir);
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
        g_test_add_func("/switch/pcap/start-needs-dir",
                        test_pcap_start_needs_dir);
        g_test_add_func("/switch/pcap/start-hostile-names",
                        test_pcap_start_hostile_names);
        g_test_add_func("/switch/pcap/start-in-dir", test_pcap_start_in_dir);
    }
    return g_test_run();
}
