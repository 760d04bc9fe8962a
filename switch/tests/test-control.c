/* SPDX-License-Identifier: MIT */
/*
 * Control-socket and command-line tests of arctic-switch: the JSON
 * commands and their errors, arctic-ctl's exit codes, and the daemon
 * itself (--help, bad options, serving clients, printing its counters and
 * removing its sockets on SIGTERM).
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "harness.h"

static size_t test_count_lines(const char *buf, ssize_t n)
{
    size_t lines = 0;
    ssize_t i;

    for (i = 0; i < n; i++) {
        lines += buf[i] == '\n';
    }
    return lines;
}

/* One request line, one reply line, parsed. */
static JsonObject *control_request(const char *path, const char *line,
                                   JsonParser **parser_out)
{
    int fd = test_connect_unix(path);
    GString *reply = g_string_new(NULL);
    JsonParser *parser = json_parser_new();
    char buf[4096];
    ssize_t n;

    g_assert_cmpint(send(fd, line, strlen(line), MSG_NOSIGNAL), ==,
                    (ssize_t)strlen(line));
    g_assert_cmpint(send(fd, "\n", 1, MSG_NOSIGNAL), ==, 1);
    while (!strchr(reply->str, '\n') &&
           (n = recv(fd, buf, sizeof(buf), 0)) > 0) {
        g_string_append_len(reply, buf, n);
    }
    close(fd);
    g_assert_true(json_parser_load_from_data(parser, reply->str, -1, NULL));
    g_string_free(reply, TRUE);
    *parser_out = parser;
    return json_node_get_object(json_parser_get_root(parser));
}

static void test_control_commands(void)
{
    ArcticSwitchConfig config;
    TestSwitch *ts;
    TestClient *a, *b;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    JsonParser *parser;
    JsonObject *reply, *stats, *port1;
    JsonArray *faults;
    size_t size;
    unsigned i;

    arctic_switch_config_init(&config);
    config.ports = 4;
    ts = test_switch_start(&config);
    a = test_client_connect(ts->socket_path, 0, 8, 8);
    b = test_client_connect(ts->socket_path, 1, 8, 8);
    for (i = 0; i < 5; i++) {
        g_autoptr(GBytes) got = NULL;

        size = test_build_packet(pkt, 0, 1, true, false, i, 10);
        g_assert_true(test_client_send_packet(a, pkt, size, 2000));
        got = test_client_recv_packet(b, 2000);
        g_assert_nonnull(got);
        test_client_return_credits(b, 0, 1);
    }

    reply = control_request(ts->control_path, "{\"command\":\"info\"}",
                            &parser);
    g_assert_true(json_object_get_boolean_member(reply, "ok"));
    g_assert_cmpint(json_object_get_int_member(reply, "ports"), ==, 4);
    g_assert_cmpint(json_object_get_int_member(reply, "levels"), ==, 2);
    g_assert_cmpuint(json_array_get_length(
                         json_object_get_array_member(reply, "connected")),
                     ==, 2);
    g_object_unref(parser);

    reply = control_request(ts->control_path, "{\"command\":\"stats\"}",
                            &parser);
    g_assert_true(json_object_get_boolean_member(reply, "ok"));
    stats = json_object_get_object_member(reply, "stats");
    port1 = json_array_get_object_element(
        json_object_get_array_member(stats, "port"), 1);
    g_assert_true(json_object_get_boolean_member(port1, "connected"));
    g_assert_cmpint(json_object_get_int_member(
                        json_object_get_object_member(port1, "high"),
                        "tx_packets"), ==, 5);
    g_assert_cmpint(json_object_get_int_member(
                        json_object_get_object_member(port1, "high"),
                        "tx_bytes"), ==, 5 * size);
    /* One wake-up thread per CPU (link 1.2), rings or not. */
    g_assert_cmpuint(json_array_get_length(
                         json_object_get_array_member(stats, "cpu_wakeups")),
                     ==, CLAMP(sysconf(_SC_NPROCESSORS_CONF), 1,
                               ARCTIC_CPU_WAKE_MAX));
    g_object_unref(parser);

    reply = control_request(ts->control_path,
                            "{\"command\":\"set-faults\",\"port\":2,"
                            "\"priority\":\"high\",\"drop\":0.5,"
                            "\"delay_us\":300}", &parser);
    g_assert_true(json_object_get_boolean_member(reply, "ok"));
    faults = json_object_get_array_member(reply, "faults");
    g_assert_cmpuint(json_array_get_length(faults), ==, 2);
    g_assert_cmpfloat(json_object_get_double_member(
                          json_array_get_object_element(faults, 1), "drop"),
                      ==, 0.5);
    g_assert_cmpfloat(json_object_get_double_member(
                          json_array_get_object_element(faults, 0), "drop"),
                      ==, 0.0);
    g_object_unref(parser);
    reply = control_request(ts->control_path, "{\"command\":\"get-faults\"}",
                            &parser);
    faults = json_object_get_array_member(reply, "faults");
    g_assert_cmpuint(json_array_get_length(faults), ==, 1);
    g_assert_cmpint(json_object_get_int_member(
                        json_array_get_object_element(faults, 0), "delay_us"),
                    ==, 300);
    g_object_unref(parser);

    /* --fault's spellings are set-faults' too. */
    reply = control_request(ts->control_path,
                            "{\"command\":\"set-faults\",\"port\":3,"
                            "\"priority\":\"low\",\"dup\":0.25,"
                            "\"reorder\":0.125,\"delay-us\":700}", &parser);
    g_assert_true(json_object_get_boolean_member(reply, "ok"));
    faults = json_object_get_array_member(reply, "faults");
    g_assert_cmpuint(json_array_get_length(faults), ==, 2);
    {
        JsonObject *low = json_array_get_object_element(faults, 0);

        g_assert_cmpfloat(json_object_get_double_member(low, "duplicate"),
                          ==, 0.25);
        g_assert_cmpfloat(json_object_get_double_member(low, "delay"),
                          ==, 0.125);
        g_assert_cmpint(json_object_get_int_member(low, "delay_us"), ==, 700);
    }
    g_object_unref(parser);
    reply = control_request(ts->control_path,
                            "{\"command\":\"set-faults\",\"port\":3,"
                            "\"dup\":0,\"reorder\":0}", &parser);
    g_assert_true(json_object_get_boolean_member(reply, "ok"));
    g_object_unref(parser);

    /* Errors are replies, not disconnections or crashes. */
    {
        const char *bad[] = {
            "not json at all",
            "[1,2,3]",
            "{\"command\":42}",
            "{\"command\":\"frobnicate\"}",
            "{\"command\":\"set-faults\",\"port\":99,\"drop\":0.1}",
            "{\"command\":\"set-faults\",\"port\":1,\"drop\":2}",
            "{\"command\":\"set-faults\",\"priority\":\"mid\"}",
            /* Misspelt keys are refused, not taken for "ok". */
            "{\"command\":\"set-faults\",\"port\":1,\"drop_rate\":0.1}",
            "{\"command\":\"set-faults\",\"port\":1,\"drop\":0.1,"
            "\"delayus\":5}",
            "{\"command\":\"set-faults\",\"port\":1,\"delay-us\":-1}",
            "{\"command\":\"set-faults\",\"port\":1,\"dup\":1.5}",
            "{\"command\":\"seed\"}",
            "{\"command\":\"pcap-start\",\"path\":\"/nonexistent/dir/x\"}",
        };

        for (i = 0; i < G_N_ELEMENTS(bad); i++) {
            reply = control_request(ts->control_path, bad[i], &parser);
            g_assert_false(json_object_get_boolean_member(reply, "ok"));
            g_assert_cmpstr(json_object_get_string_member(reply, "error"),
                            !=, "");
            g_object_unref(parser);
        }
    }
    reply = control_request(ts->control_path, "{\"command\":\"reset-stats\"}",
                            &parser);
    g_assert_true(json_object_get_boolean_member(reply, "ok"));
    g_object_unref(parser);
    {
        ArcticSwitchStats *st = test_switch_stats(ts);

        g_assert_cmpuint(st->port[1].prio[1].tx_packets, ==, 0);
        arctic_switch_stats_free(st);
    }

    /* arctic-ctl: exit 0 with the reply, 1 with the switch's error. */
    {
        const char *ctl = g_getenv("ARCTIC_CTL");
        g_autofree char *out = NULL, *err = NULL;
        int status;
        char *ok_argv[] = { (char *)ctl, (char *)"-s", ts->control_path,
                            (char *)"info", NULL };
        char *bad_argv[] = { (char *)ctl, (char *)"-s", ts->control_path,
                             (char *)"set-faults", (char *)"port=1",
                             (char *)"drop=7", NULL };

        g_assert_nonnull(ctl);
        g_assert_true(g_spawn_sync(NULL, ok_argv, NULL, G_SPAWN_DEFAULT, NULL,
                                   NULL, &out, &err, &status, NULL));
        g_assert_true(g_spawn_check_wait_status(status, NULL));
        g_assert_nonnull(strstr(out, "\"ports\" : 4"));
        g_clear_pointer(&out, g_free);
        g_clear_pointer(&err, g_free);
        g_assert_true(g_spawn_sync(NULL, bad_argv, NULL, G_SPAWN_DEFAULT,
                                   NULL, NULL, &out, &err, &status, NULL));
        g_assert_false(g_spawn_check_wait_status(status, NULL));
        g_assert_nonnull(strstr(err, "[0, 1]"));
    }
    test_client_free(a);
    test_client_free(b);
    test_switch_stop(ts);
}

static void run_switch(char **argv, int *status, char **out, char **err)
{
    g_assert_true(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                               out, err, status, NULL));
}

/*
 * A client that asks and never reads: once its unread replies pass a
 * limit the switch stops taking its requests, so the switch's memory stays
 * bounded, and another client is answered at once.  When the first one
 * reads again, every request it sent is answered: none is lost.
 */
static void test_control_flood_bounded(void)
{
    static const char request[] = "{\"command\":\"info\"}\n";
    const size_t len = sizeof(request) - 1;
    ArcticSwitchConfig config;
    TestSwitch *ts;
    JsonParser *parser;
    JsonObject *reply;
    size_t sent = 0, answered = 0;
    gint64 start, took_us;
    bool blocked = false;
    char buf[65536];
    ssize_t n;
    int fd;

    arctic_switch_config_init(&config);
    config.ports = 16;
    ts = test_switch_start(&config);
    fd = test_connect_unix(ts->control_path);
    g_assert_cmpint(fcntl(fd, F_SETFL, O_NONBLOCK), ==, 0);

    /* Requests, never a read, until the switch takes none for 500 ms. */
    start = g_get_monotonic_time();
    while (!blocked && g_get_monotonic_time() - start < 10 * G_USEC_PER_SEC) {
        struct pollfd pfd = { .fd = fd, .events = POLLOUT };

        n = send(fd, request + sent % len, len - sent % len, MSG_NOSIGNAL);
        if (n > 0) {
            sent += n;
        } else {
            g_assert_cmpint(errno, ==, EAGAIN);
            blocked = poll(&pfd, 1, 500) == 0;
        }
    }
    g_assert_true(blocked);

    start = g_get_monotonic_time();
    reply = control_request(ts->control_path, "{\"command\":\"info\"}",
                            &parser);
    took_us = g_get_monotonic_time() - start;
    g_assert_true(json_object_get_boolean_member(reply, "ok"));
    g_object_unref(parser);
    g_test_message("%zu requests queued; another client answered in "
                   "%" G_GINT64_FORMAT " us", sent / len, took_us);
    g_assert_cmpint(took_us, <, 500 * 1000);

    /* Read again: finish the last request, then take every answer. */
    while (sent % len) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLOUT };

        g_assert_cmpint(poll(&pfd, 1, 5000), ==, 1);
        if (pfd.revents & POLLIN) {
            n = recv(fd, buf, sizeof(buf), 0);
            g_assert_cmpint(n, >, 0);
            answered += test_count_lines(buf, n);
        } else {
            n = send(fd, request + sent % len, len - sent % len,
                     MSG_NOSIGNAL);
            g_assert_cmpint(n, >, 0);
            sent += n;
        }
    }
    g_assert_cmpint(fcntl(fd, F_SETFL, 0), ==, 0);
    shutdown(fd, SHUT_WR);
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
        answered += test_count_lines(buf, n);
    }
    close(fd);
    g_assert_cmpuint(answered, ==, sent / len);
    test_switch_stop(ts);
}

/*
 * The control socket lives on top of the switch: freeing it closes its
 * clients (they read end of file) and removes its socket, and the switch
 * goes on without it.
 */
static void test_control_free(void)
{
    static const char request[] = "{\"command\":\"info\"}\n";
    const struct timeval timeout = { .tv_sec = 10 };
    ArcticSwitchConfig config;
    TestSwitch *ts;
    g_autofree char *path = NULL;
    g_autoptr(GError) err = NULL;
    char buf[4096];
    ssize_t n;
    int fd;

    arctic_switch_config_init(&config);
    config.ports = 2;
    ts = test_switch_start(&config);
    path = g_strdup(ts->control_path);
    fd = test_connect_unix(path);
    /* A socket left open fails the test instead of hanging it. */
    g_assert_cmpint(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout,
                               sizeof(timeout)), ==, 0);
    /* Answered: the switch has taken this client. */
    g_assert_cmpint(send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL), ==,
                    (ssize_t)sizeof(request) - 1);
    n = recv(fd, buf, sizeof(buf), 0);
    g_assert_cmpint(n, >, 0);
    g_assert_nonnull(memchr(buf, '\n', n));

    arctic_switch_stop(ts->sw);
    g_thread_join(ts->thread);
    arctic_switch_control_free(ts->control);
    ts->control = NULL;
    g_assert_cmpint(recv(fd, buf, sizeof(buf), 0), ==, 0);
    close(fd);
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));

    /* A second one may take the path again; a regular file is refused. */
    ts->control = arctic_switch_control_new(ts->sw, path, &err);
    g_assert_no_error(err);
    g_assert_true(g_file_test(path, G_FILE_TEST_EXISTS));
    arctic_switch_control_free(ts->control);
    g_assert_true(g_file_set_contents(path, "", 0, NULL));
    ts->control = arctic_switch_control_new(ts->sw, path, &err);
    g_assert_null(ts->control);
    g_assert_error(err, G_IO_ERROR, G_IO_ERROR_EXISTS);
    g_unlink(path);

    ts->thread = test_switch_run_thread(ts->sw);
    test_switch_stop(ts);
}

static void test_daemon_options(void)
{
    const char *exe = g_getenv("ARCTIC_SWITCH");
    /* A path nothing can already occupy: the refusals below must be about
     * the option tested, never about the socket. */
    g_autofree char *dir = g_dir_make_tmp("arctic-options-XXXXXX", NULL);
    g_autofree char *sock = g_build_filename(dir, "s.sock", NULL);
    g_autofree char *file = g_build_filename(dir, "file", NULL);
    g_autofree char *key = g_build_filename(dir, "key", NULL);
    g_autofree char *short_key = g_build_filename(dir, "short-key", NULL);
    const char *x = sock;
    struct {
        const char *args[4];
        int exit_code;
        const char *message;    /* in stdout for --help, else stderr */
    } cases[] = {
        { { "--help" }, 0, "--socket" },
        { { "--bogus" }, 2, "Unknown option" },
        { { "-s", x, "--ports", "999" }, 1, "--ports 999" },
        { { "-s", x, "--ports", "ten" }, 2, "ports" },
        { { "--ports", "4" }, 2, "--socket" },
        { { "-s", x, "--fault", "3:drop=9" }, 2, "between 0 and 1" },
        { { "-s", x, "--buffers", "1" }, 1, "--buffers 1" },
        /* One buffer would leave none kept for high priority. */
        { { "-s", x, "--time-buffers", "1" }, 1,
          "--time-buffers 1: want 2..1024" },
        { { "-s", x, "--time-buffers", "0" }, 1,
          "--time-buffers 0: want 2..1024" },
        { { "-s", x, "--time-buffers", "2000" }, 1,
          "--time-buffers 2000" },
        { { "-s", x, "--time-buffers", "-1" }, 2, "must not be negative" },
        { { "--help" }, 0, "--time-buffers" },
        { { "-s", x, "--levels", "1" }, 1, "levels" },
        { { "--tcp", "nocolon", "--tcp-open" }, 1, "HOST:PORT" },
        { { "--tcp", ":0" }, 1, "--secret FILE" },
        { { "-s", x, "--secret", key }, 2, "chmod 600" },
        { { "-s", x, "--secret", short_key }, 1, "16..1024" },
        { { "-s", x, "--secret", "/nonexistent/key" }, 2, "--secret" },
        { { "-s", x, "--handshake-timeout", "0" }, 2, "at least 1 ms" },
        { { "-s", x, "--handshake-timeout", "-5" }, 2, "must not be negative" },
        { { "-s", x, "-c", file }, 1, "--control: " },
        { { "-s", x, "-c", file }, 1, "file exists and is not a socket" },
    };
    unsigned i;

    g_assert_nonnull(exe);
    g_assert_true(g_file_set_contents(file, "", 0, NULL));
    /* A key others may read; a key too short to be one. */
    g_assert_true(g_file_set_contents(key, "0123456789abcdef", 16, NULL));
    g_assert_cmpint(chmod(key, 0644), ==, 0);
    g_assert_true(g_file_set_contents(short_key, "0123", 4, NULL));
    g_assert_cmpint(chmod(short_key, 0600), ==, 0);
    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *out = NULL, *err = NULL;
        char *argv[6] = { (char *)exe };
        int status, j;
        GError *error = NULL;

        for (j = 0; j < 4 && cases[i].args[j]; j++) {
            argv[j + 1] = (char *)cases[i].args[j];
        }
        run_switch(argv, &status, &out, &err);
        g_spawn_check_wait_status(status, &error);
        g_assert_cmpint(error ? error->code : 0, ==, cases[i].exit_code);
        g_clear_error(&error);
        g_assert_nonnull(strstr(cases[i].exit_code ? err : out,
                                cases[i].message));
    }
    g_assert_false(g_file_test(sock, G_FILE_TEST_EXISTS));
    g_assert_true(g_file_test(file, G_FILE_TEST_IS_REGULAR));
    g_unlink(file);
    g_unlink(key);
    g_unlink(short_key);
    g_rmdir(dir);
}

/* The daemon serves a client, prints its counters on SIGTERM, exits 0 and
 * removes its sockets. */
static void test_daemon_run(void)
{
    const char *exe = g_getenv("ARCTIC_SWITCH");
    g_autofree char *dir = g_dir_make_tmp("arctic-daemon-XXXXXX", NULL);
    g_autofree char *sock = g_build_filename(dir, "s", NULL);
    g_autofree char *ctl = g_build_filename(dir, "c", NULL);
    char *argv[] = { (char *)exe, (char *)"-s", sock, (char *)"-c", ctl,
                     (char *)"-n", (char *)"2", NULL };
    GPid pid;
    int out_fd, status = -1;
    TestClient *a;
    uint8_t pkt[ARCTIC_WIRE_MAX_SIZE];
    size_t size;
    GString *out = g_string_new(NULL);
    char buf[4096];
    ssize_t n;
    int tries;

    g_assert_true(g_spawn_async_with_pipes(NULL, argv, NULL,
                                           G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                           NULL, &pid, NULL, &out_fd, NULL,
                                           NULL));
    for (tries = 0; tries < 500 && !g_file_test(ctl, G_FILE_TEST_EXISTS);
         tries++) {
        g_usleep(10000);
    }
    a = test_client_connect(sock, 1, 8, 8);
    size = test_build_packet(pkt, 1, 1, false, false, 0, 4);
    g_assert_true(test_client_send_packet(a, pkt, size, 2000));
    {
        g_autoptr(GBytes) got = test_client_recv_packet(a, 2000);

        g_assert_nonnull(got);
    }
    test_client_free(a);
    kill(pid, SIGTERM);
    while ((n = read(out_fd, buf, sizeof(buf))) > 0) {
        g_string_append_len(out, buf, n);
    }
    close(out_fd);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_spawn_close_pid(pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_nonnull(strstr(out->str, "rx_packets"));
    g_assert_nonnull(strstr(out->str, "   1  low            1"));
    g_assert_false(g_file_test(sock, G_FILE_TEST_EXISTS));
    g_assert_false(g_file_test(ctl, G_FILE_TEST_EXISTS));
    g_string_free(out, TRUE);
    g_rmdir(dir);
}

/* --- replies while other clients come and go ---------------------- */

enum { CHURN_THREADS = 3, CHURN_HELD = 8, STATS_REQUESTS = 200 };

typedef struct {
    const char *path;
    volatile int stop;
    unsigned connections;
} ControlChurn;

/*
 * Other control clients, coming and going: each round connects
 * CHURN_HELD clients that say nothing and closes them a moment later,
 * so that with CHURN_THREADS of these more than the switch's 16 clients
 * are connected at times (bounded: at most 20 s of rounds).
 */
static gpointer control_churn(gpointer opaque)
{
    ControlChurn *churn = opaque;
    gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
    int fds[CHURN_HELD];
    unsigned i;

    while (!churn->stop && g_get_monotonic_time() < deadline) {
        for (i = 0; i < CHURN_HELD; i++) {
            fds[i] = test_connect_unix(churn->path);
        }
        g_usleep(500);
        for (i = 0; i < CHURN_HELD; i++) {
            close(fds[i]);
        }
        __atomic_fetch_add(&churn->connections, CHURN_HELD, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void control_churn_start(ControlChurn *churn, GThread **threads,
                                const char *path)
{
    unsigned i;

    *churn = (ControlChurn) { .path = path };
    for (i = 0; i < CHURN_THREADS; i++) {
        threads[i] = g_thread_new("control-churn", control_churn, churn);
    }
}

static unsigned control_churn_stop(ControlChurn *churn, GThread **threads)
{
    unsigned i;

    churn->stop = 1;
    for (i = 0; i < CHURN_THREADS; i++) {
        g_thread_join(threads[i]);
    }
    return churn->connections;
}

/*
 * One "stats" request on a fresh connection, as arctic-ctl sends it; its
 * reply read @chunk bytes at a time, @pause_us apart (a slow reader),
 * until its newline or 5 s.  True if it is the whole reply: JSON that
 * says ok, with stats for every one of @ports ports.
 */
static bool stats_reply_whole(const char *path, unsigned ports, size_t chunk,
                              gulong pause_us, size_t *size)
{
    static const char request[] = "{\"command\":\"stats\"}\n";
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GString) reply = g_string_new(NULL);
    gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    g_autofree char *buf = g_malloc(chunk);
    int fd = test_connect_unix(path);
    JsonObject *root, *stats;

    g_assert_cmpint(send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL), ==,
                    (ssize_t)sizeof(request) - 1);
    while (!memchr(reply->str, '\n', reply->len) &&
           g_get_monotonic_time() < deadline) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        ssize_t n;

        if (poll(&pfd, 1, 100) <= 0) {
            continue;
        }
        n = recv(fd, buf, chunk, 0);
        if (n <= 0) {
            break;          /* the switch closed us before the end */
        }
        g_string_append_len(reply, buf, n);
        if (pause_us) {
            g_usleep(pause_us);
        }
    }
    close(fd);
    *size = reply->len;
    if (!memchr(reply->str, '\n', reply->len) ||
        !json_parser_load_from_data(parser, reply->str, -1, NULL) ||
        !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        return false;
    }
    root = json_node_get_object(json_parser_get_root(parser));
    if (!json_object_get_boolean_member_with_default(root, "ok", FALSE) ||
        !json_object_has_member(root, "stats")) {
        return false;
    }
    stats = json_object_get_object_member(root, "stats");
    return json_object_has_member(stats, "port") &&
           json_array_get_length(json_object_get_array_member(stats, "port"))
           == ports;
}

/*
 * 200 "stats" requests, one after another, while other clients connect
 * and leave: every one gets its whole reply.  The switch closed the
 * client quiet longest to make room for a new one, and a client whose
 * request it had not read yet, or whose reply it was still writing,
 * counted as quiet: its reply came back empty or cut short.
 */
static void test_control_churn_replies(void)
{
    ArcticSwitchConfig config;
    TestSwitch *ts;
    ControlChurn churn;
    GThread *threads[CHURN_THREADS];
    unsigned i, whole = 0, churned;
    size_t size;

    arctic_switch_config_init(&config);
    config.ports = 8;
    ts = test_switch_start(&config);
    control_churn_start(&churn, threads, ts->control_path);
    for (i = 0; i < STATS_REQUESTS; i++) {
        whole += stats_reply_whole(ts->control_path, config.ports, 4096, 0,
                                   &size);
    }
    churned = control_churn_stop(&churn, threads);
    g_test_message("%u of %u stats replies whole beside %u other clients",
                   whole, STATS_REQUESTS, churned);
    g_assert_cmpuint(churned, >, 0);
    g_assert_cmpuint(whole, ==, STATS_REQUESTS);
    test_switch_stop(ts);
}

/*
 * A reply larger than the socket takes at once (the stats of 256 ports)
 * comes back whole to a client that reads it slowly, while other
 * clients come and go: writing it is not being quiet.
 */
static void test_control_slow_reader(void)
{
    ArcticSwitchConfig config;
    TestSwitch *ts;
    ControlChurn churn;
    GThread *threads[CHURN_THREADS];
    unsigned i, whole = 0, churned;
    size_t size = 0;

    arctic_switch_config_init(&config);
    config.ports = ARCTIC_LINK_MAX_NODES;
    ts = test_switch_start(&config);
    control_churn_start(&churn, threads, ts->control_path);
    for (i = 0; i < 3; i++) {
        whole += stats_reply_whole(ts->control_path, config.ports, 16384,
                                   5000, &size);
    }
    churned = control_churn_stop(&churn, threads);
    g_test_message("%u of 3 replies of %zu bytes whole, read slowly beside "
                   "%u other clients", whole, size, churned);
    g_assert_cmpuint(whole, ==, 3);
    g_assert_cmpuint(size, >, 256 * 1024);
    test_switch_stop(ts);
}

/*
 * Clients that have just connected are not closed to make room for
 * another, but only up to a bound (control.c's CONTROL_HARD_MAX_CLIENTS,
 * 32): 40 connected at once, and a 41st that asks, leave at most 32
 * open, and the 41st is answered.
 */
static void test_control_clients_bounded(void)
{
    enum { SILENT = 40, HARD_MAX = 32 };
    ArcticSwitchConfig config;
    TestSwitch *ts;
    int silent[SILENT];
    unsigned i, closed = 0;
    size_t size;
    char byte;

    arctic_switch_config_init(&config);
    config.ports = 2;
    ts = test_switch_start(&config);
    for (i = 0; i < SILENT; i++) {
        silent[i] = test_connect_unix(ts->control_path);
    }
    /* Accepted after all of them (the listener's queue is in order). */
    g_assert_true(stats_reply_whole(ts->control_path, config.ports, 4096, 0,
                                    &size));
    for (i = 0; i < SILENT; i++) {
        closed += recv(silent[i], &byte, 1, MSG_DONTWAIT) == 0;
        close(silent[i]);
    }
    g_test_message("%u of %u silent clients closed", closed, SILENT);
    g_assert_cmpuint(closed, >=, SILENT + 1 - HARD_MAX);
    test_switch_stop(ts);
}

/* --- captures from the control socket, through the daemon --------- */

/* arctic-ctl -s @ctl @command [@arg]: its exit code (output: @out, @err). */
static int run_ctl(const char *ctl, const char *command, const char *arg,
                   char **out, char **err)
{
    char *argv[] = { (char *)g_getenv("ARCTIC_CTL"), (char *)"-s",
                     (char *)ctl, (char *)command, (char *)arg, NULL };
    GError *error = NULL;
    int status, code;

    g_assert_nonnull(argv[0]);
    g_clear_pointer(out, g_free);
    g_clear_pointer(err, g_free);
    run_switch(argv, &status, out, err);
    g_spawn_check_wait_status(status, &error);
    code = error ? error->code : 0;
    g_clear_error(&error);
    return code;
}

/* A switch's control socket that answers one request with @reply. */
typedef struct FakeControl {
    int fd;
    const char *reply;
    char request[512];
} FakeControl;

static gpointer fake_control_serve(gpointer opaque)
{
    FakeControl *f = opaque;
    size_t got = 0;
    ssize_t n;
    int c = accept(f->fd, NULL, NULL);

    g_assert_cmpint(c, >=, 0);
    while (got < sizeof(f->request) - 1 &&
           (n = read(c, f->request + got,
                     sizeof(f->request) - 1 - got)) > 0) {
        got += n;
        if (memchr(f->request, '\n', got)) {
            break;
        }
    }
    g_assert_cmpint(write(c, f->reply, strlen(f->reply)), ==,
                    strlen(f->reply));
    close(c);
    return NULL;
}

/*
 * arctic-ctl -s @path @args... against a FakeControl at @path answering
 * @reply: its exit code, output and request.
 */
static int fake_ctl(const char *path, const char *reply, char **args,
                    char **out, char **err, char *request, size_t size)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    FakeControl f = { .reply = reply };
    char *argv[10] = { (char *)g_getenv("ARCTIC_CTL"), (char *)"-s",
                       (char *)path };
    GError *error = NULL;
    GThread *thread;
    int status, code, i;

    for (i = 0; args[i]; i++) {
        g_assert_cmpint(3 + i, <, G_N_ELEMENTS(argv) - 1);
        argv[3 + i] = args[i];
    }
    g_strlcpy(addr.sun_path, path, sizeof(addr.sun_path));
    f.fd = socket(AF_UNIX, SOCK_STREAM, 0);
    g_assert_cmpint(f.fd, >=, 0);
    g_assert_cmpint(bind(f.fd, (struct sockaddr *)&addr, sizeof(addr)), ==, 0);
    g_assert_cmpint(listen(f.fd, 1), ==, 0);
    thread = g_thread_new("fake-control", fake_control_serve, &f);
    g_clear_pointer(out, g_free);
    g_clear_pointer(err, g_free);
    run_switch(argv, &status, out, err);
    g_thread_join(thread);
    close(f.fd);
    g_unlink(path);
    g_strlcpy(request, f.request, size);
    g_spawn_check_wait_status(status, &error);
    code = error ? error->code : 0;
    g_clear_error(&error);
    return code;
}

/*
 * arctic-ctl itself: KEY=VALUE arguments become one JSON request line
 * (numbers, booleans, strings); the reply is printed pretty, or on one
 * line with --raw; exit 0 for ok, 1 for the switch's error, a reply that
 * is not a JSON object or no switch at the socket, 2 for a bad argument.
 */
static void test_ctl_client(void)
{
    g_autofree char *dir = g_dir_make_tmp("arctic-ctl-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "c", NULL);
    g_autofree char *out = NULL, *err = NULL;
    char request[512];
    char *set[] = { (char *)"set-faults", (char *)"port=2",
                    (char *)"drop=0.5", (char *)"all=true",
                    (char *)"priority=low", NULL };
    char *raw[] = { (char *)"--raw", (char *)"info", NULL };
    char *info[] = { (char *)"info", NULL };

    g_assert_nonnull(g_getenv("ARCTIC_CTL"));
    g_assert_cmpint(fake_ctl(path, "{\"ok\": true, \"ports\": 4}\n", set,
                             &out, &err, request, sizeof(request)), ==, 0);
    g_assert_cmpstr(request, ==,
                    "{\"command\":\"set-faults\",\"port\":2,\"drop\":0.5,"
                    "\"all\":true,\"priority\":\"low\"}\n");
    g_assert_nonnull(strstr(out, "\"ports\" : 4"));
    g_assert_cmpint(fake_ctl(path, "{\"ok\": true, \"ports\": 4}\n", raw,
                             &out, &err, request, sizeof(request)), ==, 0);
    g_assert_cmpstr(out, ==, "{\"ok\":true,\"ports\":4}\n");
    g_assert_cmpint(fake_ctl(path, "{\"ok\": false, \"error\": \"no\"}\n",
                             info, &out, &err, request, sizeof(request)),
                    ==, 1);
    g_assert_cmpstr(err, ==, "arctic-ctl: no\n");
    g_assert_cmpint(fake_ctl(path, "[1]\n", info, &out, &err, request,
                             sizeof(request)), ==, 1);
    g_assert_nonnull(strstr(err, "bad reply from the switch"));
    g_assert_cmpstr(out, ==, "");

    g_assert_cmpint(run_ctl(path, "info", "junk", &out, &err), ==, 2);
    g_assert_nonnull(strstr(err, "\"junk\" is not KEY=VALUE"));
    g_assert_cmpint(run_ctl(path, "info", NULL, &out, &err), ==, 1);
    g_assert_nonnull(strstr(err, "cannot connect to"));
    g_rmdir(dir);
}

/*
 * arctic-switch --pcap-dir DIR: arctic-ctl pcap-start path=NAME captures
 * into DIR/NAME; a path is refused (exit 1, the reason on stderr) and
 * creates nothing; a directory that does not exist stops the switch
 * from starting (status 1, naming the option).
 */
static void test_daemon_pcap_dir(void)
{
    const char *exe = g_getenv("ARCTIC_SWITCH");
    g_autofree char *dir = g_dir_make_tmp("arctic-daemon-XXXXXX", NULL);
    g_autofree char *sock = g_build_filename(dir, "s", NULL);
    g_autofree char *ctl = g_build_filename(dir, "c", NULL);
    g_autofree char *captures = g_build_filename(dir, "captures", NULL);
    g_autofree char *capture = g_build_filename(captures, "run.pcap", NULL);
    g_autofree char *elsewhere = g_build_filename(dir, "elsewhere", NULL);
    g_autofree char *missing = g_build_filename(dir, "missing", NULL);
    g_autofree char *out = NULL, *err = NULL, *data = NULL;
    char *argv[] = { (char *)exe, (char *)"-s", sock, (char *)"-c", ctl,
                     (char *)"-n", (char *)"2", (char *)"--no-stats",
                     (char *)"--pcap-dir", captures, NULL };
    GPid pid;
    gsize len = 0;
    int status = -1, tries;

    g_assert_nonnull(exe);
    g_assert_cmpint(g_mkdir(captures, 0700), ==, 0);
    g_assert_true(g_spawn_async(NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                NULL, NULL, &pid, NULL));
    for (tries = 0; tries < 500 && !g_file_test(ctl, G_FILE_TEST_EXISTS);
         tries++) {
        g_usleep(10000);
    }
    g_assert_cmpint(run_ctl(ctl, "pcap-start", "path=run.pcap", &out, &err),
                    ==, 0);
    g_assert_nonnull(strstr(out, capture));
    g_assert_cmpint(run_ctl(ctl, "pcap-start", "path=../elsewhere", &out,
                            &err), ==, 1);
    g_assert_nonnull(strstr(err, "contains '/'"));
    g_assert_cmpint(run_ctl(ctl, "pcap-stop", NULL, &out, &err), ==, 0);
    g_assert_cmpint(run_ctl(ctl, "stop", NULL, &out, &err), ==, 0);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_spawn_close_pid(pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_false(g_file_test(elsewhere, G_FILE_TEST_EXISTS));
    /* The capture: a pcap file header (no packet went). */
    g_assert_true(g_file_get_contents(capture, &data, &len, NULL));
    g_assert_cmpuint(len, ==, 24);
    g_assert_cmphex(arctic_get_le32((const uint8_t *)data), ==, 0xa1b2c3d4);
    g_unlink(capture);
    g_rmdir(captures);

    /* A capture directory that is not there: refused at start. */
    argv[G_N_ELEMENTS(argv) - 2] = missing;
    run_switch(argv, &status, &out, &err);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_assert_nonnull(strstr(err, "--pcap-dir"));
    g_assert_false(g_file_test(sock, G_FILE_TEST_EXISTS));
    g_rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/switch/control/commands", test_control_commands);
    g_test_add_func("/switch/control/flood-bounded",
                    test_control_flood_bounded);
    g_test_add_func("/switch/control/free", test_control_free);
    g_test_add_func("/switch/daemon/options", test_daemon_options);
    g_test_add_func("/switch/daemon/run", test_daemon_run);
    g_test_add_func("/switch/control/churn-replies",
                    test_control_churn_replies);
    g_test_add_func("/switch/control/slow-reader", test_control_slow_reader);
    g_test_add_func("/switch/control/clients-bounded",
                    test_control_clients_bounded);
    g_test_add_func("/switch/daemon/pcap-dir", test_daemon_pcap_dir);
    g_test_add_func("/switch/control/ctl-client", test_ctl_client);
    return g_test_run();
}
