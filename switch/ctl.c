/* SPDX-License-Identifier: MIT */
/*
 * arctic-ctl: the command-line client of arctic-switch's control socket.
 * It turns "COMMAND key=value ..." into one JSON request line, prints the
 * reply (pretty JSON, or compact with --raw) and exits non-zero when the
 * switch answered with an error, so scripts can use it directly.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-glib/json-glib.h>

/* Numbers become JSON numbers, true/false booleans, the rest strings. */
static void add_value(JsonBuilder *b, const char *text)
{
    gint64 i;
    double d;
    char *end;

    if (!strcmp(text, "true") || !strcmp(text, "false")) {
        json_builder_add_boolean_value(b, text[0] == 't');
        return;
    }
    errno = 0;
    i = g_ascii_strtoll(text, &end, 10);
    if (!errno && end != text && !*end) {
        json_builder_add_int_value(b, i);
        return;
    }
    d = g_ascii_strtod(text, &end);
    if (!errno && end != text && !*end) {
        json_builder_add_double_value(b, d);
        return;
    }
    json_builder_add_string_value(b, text);
}

static int connect_control(const char *path)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    int fd;

    if (strlen(path) >= sizeof(addr.sun_path)) {
        g_printerr("arctic-ctl: socket path too long: %s\n", path);
        return -1;
    }
    strcpy(addr.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        g_printerr("arctic-ctl: cannot connect to %s: %s\n", path,
                   g_strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

/*
 * The request line for "COMMAND KEY=VALUE..." (argv[1] on), or NULL after
 * saying which argument is not KEY=VALUE.
 */
static char *build_request(int argc, char **argv)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) request = NULL;
    int i;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "command");
    json_builder_add_string_value(b, argv[1]);
    for (i = 2; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        g_autofree char *key = NULL;

        if (!eq || eq == argv[i]) {
            g_printerr("arctic-ctl: \"%s\" is not KEY=VALUE\n", argv[i]);
            return NULL;
        }
        key = g_strndup(argv[i], eq - argv[i]);
        json_builder_set_member_name(b, key);
        add_value(b, eq + 1);
    }
    json_builder_end_object(b);
    request = json_builder_get_root(b);
    json_generator_set_root(gen, request);
    return json_generator_to_data(gen, NULL);
}

/*
 * Send @line to the switch's control socket at @path and read its reply
 * up to the end of its first line (or until the switch closes); NULL
 * after saying why not.
 */
static GString *exchange(const char *path, const char *line)
{
    GString *reply;
    int fd = connect_control(path);

    if (fd < 0) {
        return NULL;
    }
    if (send(fd, line, strlen(line), MSG_NOSIGNAL) < 0 ||
        send(fd, "\n", 1, MSG_NOSIGNAL) < 0) {
        g_printerr("arctic-ctl: cannot send: %s\n", g_strerror(errno));
        close(fd);
        return NULL;
    }
    reply = g_string_new(NULL);
    for (;;) {
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof(buf), 0);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        g_string_append_len(reply, buf, n);
        if (memchr(buf, '\n', n)) {
            break;
        }
    }
    close(fd);
    return reply;
}

/*
 * Print the switch's reply (pretty JSON, or one line if @raw) or its
 * error; the exit status: 0 if it said ok.
 */
static int print_reply(const GString *reply, gboolean raw)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(JsonGenerator) out = json_generator_new();
    g_autoptr(GError) err = NULL;
    g_autofree char *text = NULL;
    JsonNode *root;
    JsonObject *obj;

    if (!json_parser_load_from_data(parser, reply->str, reply->len, &err) ||
        !(root = json_parser_get_root(parser)) ||
        !JSON_NODE_HOLDS_OBJECT(root)) {
        g_printerr("arctic-ctl: bad reply from the switch: %s\n",
                   err ? err->message : reply->str);
        return 1;
    }
    obj = json_node_get_object(root);
    if (!json_object_get_boolean_member_with_default(obj, "ok", FALSE)) {
        g_printerr("arctic-ctl: %s\n",
                   json_object_get_string_member_with_default(obj, "error",
                                                              "failed"));
        return 1;
    }
    json_generator_set_root(out, root);
    json_generator_set_pretty(out, !raw);
    text = json_generator_to_data(out, NULL);
    g_print("%s\n", text);
    return 0;
}

int main(int argc, char **argv)
{
    g_autofree char *socket_path = NULL;
    gboolean raw = FALSE;
    GOptionEntry entries[] = {
        { "socket", 's', 0, G_OPTION_ARG_FILENAME, &socket_path,
          "arctic-switch control socket (its --control)", "PATH" },
        { "raw", 'r', 0, G_OPTION_ARG_NONE, &raw,
          "Print the reply as one compact JSON line", NULL },
        { NULL }
    };
    g_autoptr(GOptionContext) context =
        g_option_context_new("COMMAND [KEY=VALUE...] - query and steer "
                             "arctic-switch");
    g_autoptr(GError) err = NULL;
    g_autofree char *line = NULL;
    g_autoptr(GString) reply = NULL;

    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(context,
        "Commands: info, stats, reset-stats, get-faults [port=N],\n"
        "  set-faults [port=N|all] [priority=low|high|both] [drop=P]\n"
        "             [duplicate=P] [corrupt=P] [delay=P] [delay_us=US]\n"
        "             (or --fault's spellings dup, reorder, delay-us;\n"
        "             any other key is refused),\n"
        "  seed seed=N, pcap-start path=NAME (a new file in the switch's\n"
        "  --pcap-dir), pcap-stop, pcap-flush, stop.\n"
        "Example: arctic-ctl -s /tmp/arctic.ctl set-faults port=2 "
        "priority=low drop=0.1");
    if (!g_option_context_parse(context, &argc, &argv, &err)) {
        g_printerr("arctic-ctl: %s\nTry --help.\n", err->message);
        return 2;
    }
    if (!socket_path || argc < 2) {
        g_printerr("arctic-ctl: give --socket PATH and a COMMAND\n"
                   "Try --help.\n");
        return 2;
    }
    line = build_request(argc, argv);
    if (!line) {
        return 2;
    }
    reply = exchange(socket_path, line);
    if (!reply) {
        return 1;
    }
    return print_reply(reply, raw);
}
