/* SPDX-License-Identifier: MIT */
/*
 * The control socket: a UNIX stream socket speaking one JSON object per
 * line each way (docs/switch.md lists the commands).  It runs in the
 * switch loop, so commands see and change the switch state without locks;
 * a request line is bounded and a client that sends garbage gets an error
 * reply, never a crash.  arctic-ctl is the command-line client.
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-glib/json-glib.h>

#include "switch-internal.h"

enum {
    CONTROL_MAX_LINE = 65536,
    /*
     * Clients connected at once: beyond CONTROL_MAX_CLIENTS, a new one
     * closes one that is quiet, or gone; one asking, or active within
     * CONTROL_RECENT_MS (an honest client sends its request as soon as
     * it connects), is closed only beyond CONTROL_HARD_MAX_CLIENTS.
     */
    CONTROL_MAX_CLIENTS = 16,
    CONTROL_HARD_MAX_CLIENTS = 2 * CONTROL_MAX_CLIENTS,
    CONTROL_RECENT_MS = 10,
    /* Replies a client has not read yet: above this, its requests wait
     * (the switch stops reading them) until it reads, so a client that
     * asks and never reads holds one reply's worth of memory, not all. */
    CONTROL_OUTPUT_LIMIT = 256 * 1024,
};

struct ArcticSwitchControl {
    ArcticSwitch *sw;
    char *path;
    int listen_fd;
    struct sw_watch watch;
    GList *clients;
};

struct sw_control_client {
    struct sw_watch watch;
    ArcticSwitchControl *control;
    int fd;
    GString *input;
    GString *output;
    uint32_t registered_events;
    bool closing;       /* close once the output is written */
    uint64_t last_active_ns;    /* connected, or last sent a byte */
};

static void control_accept(ArcticSwitch *sw, void *object, uint32_t events);
static void sw_stats_build_json(JsonBuilder *b, const ArcticSwitchStats *st);
static void control_event(ArcticSwitch *sw, void *object, uint32_t events);

ArcticSwitchControl *arctic_switch_control_new(ArcticSwitch *sw,
                                               const char *path,
                                               GError **errp)
{
    ArcticSwitchControl *ctl;
    int fd = sw_unix_listen(path, errp);

    if (fd < 0) {
        return NULL;
    }
    ctl = g_new0(ArcticSwitchControl, 1);
    ctl->sw = sw;
    ctl->path = g_strdup(path);
    ctl->listen_fd = fd;
    ctl->watch.ready = control_accept;
    ctl->watch.object = ctl;
    sw_loop_watch(sw, fd, &ctl->watch, EPOLLIN);
    return ctl;
}

static void client_free(struct sw_control_client *c)
{
    ArcticSwitchControl *ctl = c->control;

    ctl->clients = g_list_remove(ctl->clients, c);
    sw_loop_unwatch(ctl->sw, c->fd);
    close(c->fd);
    g_string_free(c->input, TRUE);
    g_string_free(c->output, TRUE);
    g_free(c);
}

void arctic_switch_control_free(ArcticSwitchControl *ctl)
{
    if (!ctl) {
        return;
    }
    while (ctl->clients) {
        client_free(ctl->clients->data);
    }
    sw_loop_unwatch(ctl->sw, ctl->listen_fd);
    sw_listener_forget(ctl->sw, ctl->listen_fd);
    close(ctl->listen_fd);
    unlink(ctl->path);
    g_free(ctl->path);
    g_free(ctl);
}

/* How much a client stands to lose if it is closed now. */
enum client_stake {
    CLIENT_GONE,        /* it closed its end: nothing */
    CLIENT_QUIET,       /* it has asked nothing for CONTROL_RECENT_MS */
    CLIENT_RECENT,      /* it connected, or was answered, just now: its
                         * request may be on its way */
    CLIENT_ASKING,      /* a request unread or unanswered, or a reply
                         * not all written */
};

static enum client_stake client_stake(const struct sw_control_client *c,
                                      uint64_t now_ns)
{
    char byte;
    ssize_t n;

    if (c->input->len || c->output->len) {
        return CLIENT_ASKING;
    }
    n = recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n >= 0) {
        return n ? CLIENT_ASKING : CLIENT_GONE;
    }
    return now_ns - c->last_active_ns < CONTROL_RECENT_MS * 1000000ull
           ? CLIENT_RECENT : CLIENT_QUIET;
}

/*
 * @open clients, CONTROL_MAX_CLIENTS or more: make room for a new one by
 * closing another.  Refusing the new one instead let clients that
 * connect and never ask lock arctic-ctl out for as long as they stay, as
 * idle NIU connections once did (port.c).  The one closed stands to lose
 * least (client_stake()), and of those the one quiet longest.  A client
 * whose request still waited in its socket, or whose reply was being
 * written, lost it when it looked quiet because it had sent nothing
 * since (38 of 193 replies, while other clients came and went); so did
 * one that had connected but not yet sent.  So while every client is
 * asking or has just come, the new one joins them, up to
 * CONTROL_HARD_MAX_CLIENTS; only beyond does one lose its request: the
 * one that has neither sent nor read for longest.
 */
static void control_make_room(ArcticSwitchControl *ctl, unsigned open)
{
    struct sw_control_client *idlest = NULL;
    enum client_stake idlest_stake = CLIENT_ASKING;
    uint64_t now_ns = sw_clock_ns();
    GList *l;

    for (l = ctl->clients; l; l = l->next) {
        struct sw_control_client *c = l->data;
        enum client_stake stake;

        if (c->closing) {
            continue;
        }
        stake = client_stake(c, now_ns);
        if (!idlest || stake < idlest_stake ||
            (stake == idlest_stake &&
             c->last_active_ns < idlest->last_active_ns)) {
            idlest = c;
            idlest_stake = stake;
        }
    }
    if (!idlest ||
        (idlest_stake >= CLIENT_RECENT && open < CONTROL_HARD_MAX_CLIENTS)) {
        return;
    }
    /*
     * Not freed here: this batch of events may still name it.  Its
     * socket reads the end now, and its own event frees it.
     */
    sw_log(ctl->sw, "%u control clients: closing the one %s", open,
           idlest_stake >= CLIENT_RECENT ? "that read nothing longest"
                                         : "quiet longest");
    idlest->closing = true;
    shutdown(idlest->fd, SHUT_RDWR);
}

/* Clients not being closed already: those the cap counts. */
static unsigned control_open_clients(const ArcticSwitchControl *ctl)
{
    const GList *l;
    unsigned n = 0;

    for (l = ctl->clients; l; l = l->next) {
        n += !((const struct sw_control_client *)l->data)->closing;
    }
    return n;
}

/*
 * At most SW_ACCEPT_PER_TURN connections per event, as the NIUs'
 * listeners (core.c): the listener is level-triggered, so the rest wait
 * for the next turn of the loop, after the clients' own events
 * (requests, and the ends of clients closed here) are served.  Accepting
 * until none waited never ended while others kept connecting, and
 * nobody was answered meanwhile.
 */
static void control_accept(ArcticSwitch *sw, void *object, uint32_t events)
{
    ArcticSwitchControl *ctl = object;
    unsigned accepted, open;

    for (accepted = 0; accepted < SW_ACCEPT_PER_TURN; accepted++) {
        int fd = sw_accept(sw, ctl->listen_fd, &ctl->watch);
        struct sw_control_client *c;

        if (fd < 0) {
            return;
        }
        open = control_open_clients(ctl);
        if (open >= CONTROL_MAX_CLIENTS) {
            control_make_room(ctl, open);
        }
        c = g_new0(struct sw_control_client, 1);
        c->watch.ready = control_event;
        c->watch.object = c;
        c->control = ctl;
        c->fd = fd;
        c->input = g_string_new(NULL);
        c->output = g_string_new(NULL);
        c->registered_events = EPOLLIN;
        c->last_active_ns = sw_clock_ns();
        sw_loop_watch(sw, fd, &c->watch, EPOLLIN);
        ctl->clients = g_list_prepend(ctl->clients, c);
    }
}

/* One named member of the object being built. */
static void sw_json_int(JsonBuilder *b, const char *name, gint64 value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, value);
}

static void sw_json_double(JsonBuilder *b, const char *name, double value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_double_value(b, value);
}

static void sw_json_string(JsonBuilder *b, const char *name, const char *value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_string_value(b, value);
}

static void sw_json_bool(JsonBuilder *b, const char *name, bool value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_boolean_value(b, value);
}

/* --- replies ---------------------------------------------------------- */

static void reply_node(struct sw_control_client *c, JsonNode *root)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autofree char *text = NULL;

    json_generator_set_root(gen, root);
    text = json_generator_to_data(gen, NULL);
    g_string_append(c->output, text);
    g_string_append_c(c->output, '\n');
}

static void reply_error(struct sw_control_client *c, const char *fmt, ...)
    G_GNUC_PRINTF(2, 3);

static void reply_error(struct sw_control_client *c, const char *fmt, ...)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *text = NULL;
    va_list ap;

    va_start(ap, fmt);
    text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    json_builder_begin_object(b);
    sw_json_bool(b, "ok", FALSE);
    sw_json_string(b, "error", text);
    json_builder_end_object(b);
    root = json_builder_get_root(b);
    reply_node(c, root);
}

/* Start a successful reply; the caller adds members and calls
 * reply_finish(). */
static JsonBuilder *reply_begin(void)
{
    JsonBuilder *b = json_builder_new();

    json_builder_begin_object(b);
    sw_json_bool(b, "ok", TRUE);
    return b;
}

static void reply_finish(struct sw_control_client *c, JsonBuilder *b)
{
    g_autoptr(JsonNode) root = NULL;

    json_builder_end_object(b);
    root = json_builder_get_root(b);
    reply_node(c, root);
    g_object_unref(b);
}

/* --- commands --------------------------------------------------------- */

static const char *const priority_names[ARCTIC_NUM_PRIORITIES] = {
    [ARCTIC_PRIORITY_LOW] = "low",
    [ARCTIC_PRIORITY_HIGH] = "high",
};

static void cmd_info(ArcticSwitch *sw, struct sw_control_client *c)
{
    JsonBuilder *b = reply_begin();
    unsigned i;

    sw_json_int(b, "ports", sw->ports);
    sw_json_int(b, "levels", sw->levels);
    sw_json_int(b, "routers_per_level", sw->routers_per_level);
    sw_json_int(b, "credits", sw->config.credits);
    sw_json_int(b, "router_buffers", sw->config.router_buffers);
    sw_json_bool(b, "timing", sw->config.timing);
    sw_json_double(b, "link_mbytes_per_s", sw->config.link_mbytes_per_s);
    sw_json_int(b, "hop_latency_ns", sw->config.hop_latency_ns);
    sw_json_int(b, "seed", (gint64)sw->seed);
    sw_json_string(b, "socket", sw->socket_path);
    sw_json_string(b, "tcp", sw->tcp_address);
    sw_json_string(b, "pcap", sw->pcap_path);
    json_builder_set_member_name(b, "connected");
    json_builder_begin_array(b);
    for (i = 0; i < sw->ports; i++) {
        if (sw_port_live(sw, i)) {
            json_builder_add_int_value(b, i);
        }
    }
    json_builder_end_array(b);
    reply_finish(c, b);
}

static void cmd_stats(ArcticSwitch *sw, struct sw_control_client *c)
{
    ArcticSwitchStats *st = arctic_switch_stats_snapshot(sw);
    JsonBuilder *b = reply_begin();

    json_builder_set_member_name(b, "stats");
    sw_stats_build_json(b, st);
    reply_finish(c, b);
    arctic_switch_stats_free(st);
}

/* "port": number, or absent / -1 / "all" for every port. */
static bool get_port(ArcticSwitch *sw, JsonObject *req, int *port,
                     struct sw_control_client *c)
{
    JsonNode *node = json_object_get_member(req, "port");

    *port = -1;
    if (!node || JSON_NODE_HOLDS_NULL(node)) {
        return true;
    }
    if (JSON_NODE_HOLDS_VALUE(node) &&
        json_node_get_value_type(node) == G_TYPE_STRING &&
        (!strcmp(json_node_get_string(node), "all") ||
         !strcmp(json_node_get_string(node), "*"))) {
        return true;
    }
    if (!JSON_NODE_HOLDS_VALUE(node) ||
        json_node_get_value_type(node) != G_TYPE_INT64 ||
        json_node_get_int(node) < -1 ||
        json_node_get_int(node) >= (gint64)sw->ports) {
        reply_error(c, "\"port\" must be a port number 0..%u or \"all\"",
                    sw->ports - 1);
        return false;
    }
    *port = (int)json_node_get_int(node);
    return true;
}

static bool get_priority(JsonObject *req, int *priority,
                         struct sw_control_client *c)
{
    JsonNode *node = json_object_get_member(req, "priority");
    const char *name;

    *priority = -1;
    if (!node || JSON_NODE_HOLDS_NULL(node)) {
        return true;
    }
    if (JSON_NODE_HOLDS_VALUE(node) &&
        json_node_get_value_type(node) == G_TYPE_INT64 &&
        json_node_get_int(node) >= 0 &&
        json_node_get_int(node) < ARCTIC_NUM_PRIORITIES) {
        *priority = (int)json_node_get_int(node);
        return true;
    }
    name = JSON_NODE_HOLDS_VALUE(node) &&
           json_node_get_value_type(node) == G_TYPE_STRING
           ? json_node_get_string(node) : "";
    if (!strcmp(name, "low")) {
        *priority = ARCTIC_PRIORITY_LOW;
    } else if (!strcmp(name, "high")) {
        *priority = ARCTIC_PRIORITY_HIGH;
    } else if (strcmp(name, "both")) {
        reply_error(c, "\"priority\" must be \"low\", \"high\" or \"both\"");
        return false;
    }
    return true;
}

static void add_faults(JsonBuilder *b, unsigned port, unsigned prio,
                       const struct arctic_fault_params *f)
{
    json_builder_begin_object(b);
    sw_json_int(b, "port", port);
    sw_json_string(b, "priority", priority_names[prio]);
    sw_json_double(b, "drop", f->drop);
    sw_json_double(b, "duplicate", f->duplicate);
    sw_json_double(b, "corrupt", f->corrupt);
    sw_json_double(b, "delay", f->delay);
    sw_json_int(b, "delay_us", f->delay_us);
    json_builder_end_object(b);
}

static void cmd_get_faults(ArcticSwitch *sw, struct sw_control_client *c,
                           JsonObject *req)
{
    JsonBuilder *b;
    int port;
    unsigned i, prio;

    if (!get_port(sw, req, &port, c)) {
        return;
    }
    b = reply_begin();
    sw_json_int(b, "seed", (gint64)sw->seed);
    json_builder_set_member_name(b, "faults");
    json_builder_begin_array(b);
    for (i = 0; i < sw->ports; i++) {
        if (port >= 0 && (int)i != port) {
            continue;
        }
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            const struct sw_fault_state *f = &sw->port[i].fault[prio];

            /* Without a port, list only what is in effect. */
            if (port >= 0 || f->active) {
                add_faults(b, i, prio, &f->params);
            }
        }
    }
    json_builder_end_array(b);
    reply_finish(c, b);
}

static bool get_probability(JsonObject *req, const char *key, double *value,
                            struct sw_control_client *c)
{
    JsonNode *node = json_object_get_member(req, key);
    GType type;

    if (!node) {
        return true;
    }
    type = JSON_NODE_HOLDS_VALUE(node) ? json_node_get_value_type(node)
                                       : G_TYPE_INVALID;
    if (type != G_TYPE_DOUBLE && type != G_TYPE_INT64) {
        reply_error(c, "\"%s\" must be a number", key);
        return false;
    }
    *value = json_node_get_double(node);
    if (!(*value >= 0.0 && *value <= 1.0)) {
        reply_error(c, "\"%s\" must lie in [0, 1]", key);
        return false;
    }
    return true;
}

/*
 * Keys not given keep their current value at each (port, priority).  The
 * keys are --fault's (sw_fault_key()); one it does not know is refused,
 * so that a misspelt setting is not taken for "ok".
 */
static void cmd_set_faults(ArcticSwitch *sw, struct sw_control_client *c,
                           JsonObject *req)
{
    g_autoptr(GList) members = json_object_get_members(req);
    double value[SW_FAULT_KEY_COUNT] = { 0 };
    bool given[SW_FAULT_KEY_COUNT] = { false };
    int port, priority;
    unsigned i, prio;
    GError *err = NULL;
    GList *m;

    if (!get_port(sw, req, &port, c) || !get_priority(req, &priority, c)) {
        return;
    }
    for (m = members; m; m = m->next) {
        const char *name = m->data;
        enum sw_fault_key key = sw_fault_key(name);
        JsonNode *node = json_object_get_member(req, name);

        if (!strcmp(name, "command") || !strcmp(name, "port") ||
            !strcmp(name, "priority")) {
            continue;
        }
        if (key == SW_FAULT_KEY_NONE) {
            reply_error(c, "set-faults: unknown key \"%s\" (%s)", name,
                        SW_FAULT_KEYS);
            return;
        }
        if (key == SW_FAULT_KEY_DELAY_US) {
            if (!JSON_NODE_HOLDS_VALUE(node) ||
                json_node_get_value_type(node) != G_TYPE_INT64 ||
                json_node_get_int(node) < 0 ||
                json_node_get_int(node) > SW_FAULT_MAX_DELAY_US) {
                reply_error(c, "\"%s\" must be an integer 0..%d", name,
                            SW_FAULT_MAX_DELAY_US);
                return;
            }
            value[key] = (double)json_node_get_int(node);
        } else if (!get_probability(req, name, &value[key], c)) {
            return;
        }
        given[key] = true;
    }
    for (i = 0; i < sw->ports; i++) {
        if (port >= 0 && (int)i != port) {
            continue;
        }
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            struct arctic_fault_params f;

            if (priority >= 0 && (int)prio != priority) {
                continue;
            }
            arctic_switch_get_faults(sw, i, prio, &f);
            if (given[SW_FAULT_KEY_DROP]) {
                f.drop = value[SW_FAULT_KEY_DROP];
            }
            if (given[SW_FAULT_KEY_DUPLICATE]) {
                f.duplicate = value[SW_FAULT_KEY_DUPLICATE];
            }
            if (given[SW_FAULT_KEY_CORRUPT]) {
                f.corrupt = value[SW_FAULT_KEY_CORRUPT];
            }
            if (given[SW_FAULT_KEY_DELAY]) {
                f.delay = value[SW_FAULT_KEY_DELAY];
            }
            if (given[SW_FAULT_KEY_DELAY_US]) {
                f.delay_us = (uint32_t)value[SW_FAULT_KEY_DELAY_US];
            }
            if (!arctic_switch_set_faults(sw, i, prio, &f, &err)) {
                reply_error(c, "%s", err->message);
                g_error_free(err);
                return;
            }
        }
    }
    cmd_get_faults(sw, c, req);
}

static void cmd_seed(ArcticSwitch *sw, struct sw_control_client *c,
                     JsonObject *req)
{
    JsonNode *node = json_object_get_member(req, "seed");
    JsonBuilder *b;

    if (!node || !JSON_NODE_HOLDS_VALUE(node) ||
        json_node_get_value_type(node) != G_TYPE_INT64) {
        reply_error(c, "\"seed\" must be an integer");
        return;
    }
    arctic_switch_reseed(sw, (uint64_t)json_node_get_int(node));
    b = reply_begin();
    sw_json_int(b, "seed", (gint64)sw->seed);
    reply_finish(c, b);
}

static void cmd_pcap_start(ArcticSwitch *sw, struct sw_control_client *c,
                           JsonObject *req)
{
    JsonNode *node = json_object_get_member(req, "path");
    GError *err = NULL;
    JsonBuilder *b;

    if (!node || !JSON_NODE_HOLDS_VALUE(node) ||
        json_node_get_value_type(node) != G_TYPE_STRING) {
        reply_error(c, "\"path\" must be a file name");
        return;
    }
    /* A name in the switch's capture directory, never a path: a control
     * client must not choose which of the switch user's files to write. */
    if (!arctic_switch_pcap_open_in_dir(sw, json_node_get_string(node),
                                        &err)) {
        sw_log(sw, "pcap-start refused: %s", err->message);
        reply_error(c, "%s", err->message);
        g_error_free(err);
        return;
    }
    b = reply_begin();
    sw_json_string(b, "pcap", sw->pcap_path);
    reply_finish(c, b);
}

static void reply_ok(struct sw_control_client *c)
{
    reply_finish(c, reply_begin());
}

static void handle_request(ArcticSwitch *sw, struct sw_control_client *c,
                           const char *line)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    GError *err = NULL;
    JsonNode *root;
    JsonObject *req;
    const char *command;

    if (!json_parser_load_from_data(parser, line, -1, &err)) {
        reply_error(c, "not JSON: %s", err->message);
        g_error_free(err);
        return;
    }
    root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        reply_error(c, "a request is a JSON object with a \"command\"");
        return;
    }
    req = json_node_get_object(root);
    {
        JsonNode *node = json_object_get_member(req, "command");

        command = node && JSON_NODE_HOLDS_VALUE(node) &&
                  json_node_get_value_type(node) == G_TYPE_STRING
                  ? json_node_get_string(node) : NULL;
    }
    if (!command) {
        reply_error(c, "missing \"command\" string");
    } else if (!strcmp(command, "info")) {
        cmd_info(sw, c);
    } else if (!strcmp(command, "stats")) {
        cmd_stats(sw, c);
    } else if (!strcmp(command, "reset-stats")) {
        arctic_switch_stats_reset(sw);
        reply_ok(c);
    } else if (!strcmp(command, "get-faults")) {
        cmd_get_faults(sw, c, req);
    } else if (!strcmp(command, "set-faults")) {
        cmd_set_faults(sw, c, req);
    } else if (!strcmp(command, "seed")) {
        cmd_seed(sw, c, req);
    } else if (!strcmp(command, "pcap-start")) {
        cmd_pcap_start(sw, c, req);
    } else if (!strcmp(command, "pcap-stop")) {
        arctic_switch_pcap_close(sw);
        reply_ok(c);
    } else if (!strcmp(command, "pcap-flush")) {
        if (sw->pcap) {
            fflush(sw->pcap);
        }
        reply_ok(c);
    } else if (!strcmp(command, "stop")) {
        arctic_switch_stop(sw);
        reply_ok(c);
    } else {
        reply_error(c, "unknown command \"%s\" (info, stats, reset-stats, "
                    "get-faults, set-faults, seed, pcap-start, pcap-stop, "
                    "pcap-flush, stop)", command);
    }
}

/* --- I/O -------------------------------------------------------------- */

/* Too much unread output: take no new request from this client. */
static bool client_backlogged(const struct sw_control_client *c)
{
    return c->output->len >= CONTROL_OUTPUT_LIMIT;
}

static bool client_write(ArcticSwitch *sw, struct sw_control_client *c)
{
    while (c->output->len) {
        ssize_t n = send(c->fd, c->output->str, c->output->len,
                         MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n > 0) {
            g_string_erase(c->output, 0, n);
            /* Reading its reply is not being quiet. */
            c->last_active_ns = sw->now_ns;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            return false;
        }
    }
    {
        /* A closing client is only written to: its end of file would
         * otherwise wake the loop for ever. */
        uint32_t wanted = (c->closing || client_backlogged(c) ? 0 : EPOLLIN) |
                          (c->output->len ? EPOLLOUT : 0);

        if (wanted != c->registered_events) {
            c->registered_events = wanted;
            sw_loop_rewatch(sw, c->fd, &c->watch, wanted);
        }
    }
    return !(c->closing && c->output->len == 0 && c->input->len == 0);
}

static void control_event(ArcticSwitch *sw, void *object, uint32_t events)
{
    struct sw_control_client *c = object;
    char buf[4096];
    char *newline;

    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);

        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            /* The client finished; answer what it asked, then close. */
            c->closing = true;
        } else if (n > 0 && !c->closing) {
            g_string_append_len(c->input, buf, n);
            c->last_active_ns = sw->now_ns;
        }
    }
    do {
        /* Requests are answered in order, as long as the client reads. */
        while (!client_backlogged(c) &&
               (newline = memchr(c->input->str, '\n', c->input->len))) {
            *newline = 0;
            if (newline > c->input->str) {
                handle_request(sw, c, c->input->str);
            }
            g_string_erase(c->input, 0, newline + 1 - c->input->str);
        }
        if (c->closing && c->input->len && !client_backlogged(c)) {
            /* A last request without its newline. */
            handle_request(sw, c, c->input->str);
            g_string_truncate(c->input, 0);
        }
        if (c->input->len > CONTROL_MAX_LINE) {
            reply_error(c, "request longer than %d bytes", CONTROL_MAX_LINE);
            g_string_truncate(c->input, 0);
            c->closing = true;
        }
        if (!client_write(sw, c)) {
            client_free(c);
            return;
        }
        /* Writing may have made room for requests still waiting. */
    } while (!client_backlogged(c) &&
             (memchr(c->input->str, '\n', c->input->len) ||
              (c->closing && c->input->len)));
}

/* --- the stats as JSON --------------------------------------------- */

/*
 * A counter, as a JSON number: json-glib's are signed 64-bit, and a
 * uint64_t at or above 2^63 cast to one came out negative (issue 48 item
 * 9: a direct-ring sender's count).  Counters are unsigned: one that
 * large says "at least 2^63 - 1", which is what it becomes.
 */
static gint64 json_count_value(uint64_t count)
{
    return count > G_MAXINT64 ? G_MAXINT64 : (gint64)count;
}

static void sw_json_count(JsonBuilder *b, const char *name, uint64_t count)
{
    sw_json_int(b, name, json_count_value(count));
}

static void json_prio(JsonBuilder *b, const struct arctic_port_prio_stats *q)
{
    unsigned r;

    json_builder_begin_object(b);
#define MEMBER(name) sw_json_count(b, #name, q->name)
    MEMBER(rx_packets);
    MEMBER(rx_bytes);
    MEMBER(tx_packets);
    MEMBER(tx_bytes);
    MEMBER(tx_credit_stalls);
    MEMBER(rx_credit_exhausted);
    MEMBER(network_stalls);
    MEMBER(duplicated);
    MEMBER(corrupted);
    MEMBER(delayed);
    MEMBER(ingress_depth);
    MEMBER(ingress_depth_max);
    MEMBER(direct_packets);
    MEMBER(direct_in_packets);
    MEMBER(egress_depth);
#undef MEMBER
    json_builder_set_member_name(b, "drops");
    json_builder_begin_object(b);
    for (r = 0; r < ARCTIC_DROP_REASONS; r++) {
        sw_json_count(b, arctic_drop_reason_name(r), q->drops[r]);
    }
    json_builder_end_object(b);
    json_builder_end_object(b);
}

static void json_disconnects(JsonBuilder *b, const uint64_t *counts)
{
    unsigned r;

    json_builder_begin_object(b);
    for (r = 0; r < ARCTIC_DISCONNECT_REASONS; r++) {
        sw_json_count(b, arctic_disconnect_reason_name(r), counts[r]);
    }
    json_builder_end_object(b);
}

/* Fill the "stats" object of a control reply into @b. */
static void sw_stats_build_json(JsonBuilder *b, const ArcticSwitchStats *st)
{
    unsigned i, prio, bucket;

    json_builder_begin_object(b);
    sw_json_int(b, "ports", st->ports);
    sw_json_int(b, "levels", st->levels);
    sw_json_int(b, "routers", st->routers);
    sw_json_int(b, "uptime_ns", (gint64)st->uptime_ns);
    sw_json_count(b, "router_stalls", st->router_stalls);
    sw_json_count(b, "packets_in_use", st->packets_in_use);
    sw_json_count(b, "packets_in_use_max", st->packets_in_use_max);
    sw_json_count(b, "packet_bound", st->packet_bound);
    json_builder_set_member_name(b, "cpu_wakeups");
    json_builder_begin_array(b);
    for (i = 0; i < st->cpu_wakers; i++) {
        json_builder_add_int_value(b, json_count_value(st->cpu_wakeups[i]));
    }
    json_builder_end_array(b);
    sw_json_count(b, "cpu_handovers", st->cpu_handovers);
    sw_json_count(b, "refused_no_fd", st->refused_no_fd);
    sw_json_count(b, "auth_failures", st->auth_failures);
    if (st->timed) {
        /* Timed mode (docs/timed-mode.md): the clock, and totals. */
        json_builder_set_member_name(b, "timed");
        json_builder_begin_object(b);
        sw_json_bool(b, "started", st->time_started);
        sw_json_int(b, "lookahead_ns", (gint64)st->time_lookahead_ns);
        sw_json_int(b, "syncs", (gint64)st->time_syncs);
        sw_json_int(b, "grants", (gint64)st->time_grants);
        sw_json_int(b, "packets", (gint64)st->time_packets);
        sw_json_int(b, "deliveries", (gint64)st->time_deliveries);
        json_builder_end_object(b);
    }
    json_builder_set_member_name(b, "unattached_disconnects");
    json_disconnects(b, st->unattached_disconnects);
    json_builder_set_member_name(b, "latency_us_log2");
    json_builder_begin_object(b);
    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        json_builder_set_member_name(b, sw_priority_name(prio));
        json_builder_begin_array(b);
        for (bucket = 0; bucket < ARCTIC_LATENCY_BUCKETS; bucket++) {
            json_builder_add_int_value(
                b, json_count_value(st->latency[prio][bucket]));
        }
        json_builder_end_array(b);
    }
    json_builder_end_object(b);
    json_builder_set_member_name(b, "oldest");
    json_builder_begin_object(b);
    for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
        const struct arctic_oldest_packet *o = &st->oldest[prio];

        json_builder_set_member_name(b, sw_priority_name(prio));
        if (!o->present) {
            json_builder_add_null_value(b);
            continue;
        }
        json_builder_begin_object(b);
        sw_json_int(b, "age_us", (gint64)(o->age_ns / 1000));
        sw_json_int(b, "src", o->src);
        sw_json_int(b, "dst", o->dst);
        sw_json_string(b, "where", o->where);
        sw_json_string(b, "waits_for", o->waits_for);
        json_builder_end_object(b);
    }
    json_builder_end_object(b);
    json_builder_set_member_name(b, "port");
    json_builder_begin_array(b);
    for (i = 0; i < st->ports; i++) {
        const struct arctic_port_stats *p = &st->port[i];

        json_builder_begin_object(b);
        sw_json_int(b, "port", i);
        sw_json_bool(b, "connected", p->connected);
        sw_json_bool(b, "rings", p->rings);
        sw_json_count(b, "kick_floods", p->kick_floods);
        sw_json_count(b, "connects", p->connects);
        if (st->timed) {
            /* Where its clock is: reached, granted, its promise. */
            sw_json_int(b, "time_reached_ns", (gint64)p->time_reached);
            sw_json_int(b, "time_granted_ns",
                        p->time_granted == UINT64_MAX ? -1 :
                        (gint64)p->time_granted);
            sw_json_int(b, "time_promise_ns",
                        p->time_promise == UINT64_MAX ? -1 :
                        (gint64)p->time_promise);
            sw_json_bool(b, "time_waiting", p->time_waiting);
            sw_json_int(b, "time_syncs", (gint64)p->time_syncs);
        }
        json_builder_set_member_name(b, "disconnects");
        json_disconnects(b, p->disconnects);
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            json_builder_set_member_name(b, sw_priority_name(prio));
            json_prio(b, &p->prio[prio]);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
}

char *arctic_switch_stats_to_json(const ArcticSwitchStats *st)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;

    sw_stats_build_json(b, st);
    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    return json_generator_to_data(gen, NULL);
}
