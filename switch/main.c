/* SPDX-License-Identifier: MIT */
/*
 * arctic-switch: the command line around libarcticswitch.  Options become
 * an ArcticSwitchConfig; the switch loop runs on its own thread while the
 * main thread waits in a GMainLoop for SIGINT/SIGTERM (g_unix_signal_add),
 * so shutdown is clean: the loop stops, connections close, sockets are
 * unlinked and the counters are printed.
 */
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "arctic/timing.h"
#include "switch.h"

typedef struct {
    char *socket_path, *tcp_address, *control_path, *pcap_path, *secret_path;
    char *pcap_dir;
    int ports, levels, credits, buffers, hop_latency_ns, handshake_timeout_ms;
    int credit_delay_us, time_hop_ns, time_wire_ns, time_buffers;
    double link_mbytes;
    gint64 seed;
    gboolean timing, timed, verbose, no_stats, no_rings, no_cpu_wake, direct;
    gboolean tcp_open;
    char **faults;
} Options;

/* GOptionContext allocates the strings; every exit path frees them. */
static void options_clear(Options *o)
{
    g_strfreev(o->faults);
    g_free(o->socket_path);
    g_free(o->tcp_address);
    g_free(o->control_path);
    g_free(o->pcap_path);
    g_free(o->pcap_dir);
    g_free(o->secret_path);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Options, options_clear)

static GMainLoop *main_loop;

static gboolean on_signal(gpointer opaque)
{
    arctic_switch_stop(opaque);
    return G_SOURCE_CONTINUE;
}

static gpointer switch_thread(gpointer opaque)
{
    arctic_switch_run(opaque);
    g_main_loop_quit(main_loop);
    return NULL;
}

/*
 * The cluster's key: the bytes of @path, exactly (an NIU's QEMU reads the
 * same file with -object secret,file=).  A key others may read protects
 * nothing, so such a file is refused, as ssh refuses its keys.
 */
static GBytes *secret_load(const char *path, GError **errp)
{
    struct stat st;
    char *data;
    gsize len;

    if (g_stat(path, &st) < 0) {
        g_set_error(errp, G_FILE_ERROR, g_file_error_from_errno(errno),
                    "--secret %s: %s", path, g_strerror(errno));
        return NULL;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_PERM,
                    "--secret %s: mode %04o lets others read the key; "
                    "chmod 600 it", path, (unsigned)(st.st_mode & 07777));
        return NULL;
    }
    if (!g_file_get_contents(path, &data, &len, errp)) {
        return NULL;
    }
    return g_bytes_new_take(data, len);
}

static bool nonnegative(const char *name, int value, GError **errp)
{
    if (value < 0) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "%s %d: must not be negative", name, value);
        return false;
    }
    return true;
}

/*
 * The command line into @o: 0, or the exit status (2) once the error is
 * said.
 */
/*
 * What GLib's parser cannot check: no arguments left, a socket to listen
 * on, no negative numbers, a handshake timeout of 1 ms at least.  0, or
 * 2 (the usage's status) after saying why.
 */
static int options_check(Options *o, int argc, char **argv)
{
    g_autoptr(GError) err = NULL;

    if (argc > 1) {
        g_printerr("arctic-switch: unexpected argument \"%s\"\nTry --help.\n",
                   argv[1]);
        return 2;
    }
    if (!o->socket_path && !o->tcp_address) {
        g_printerr("arctic-switch: give --socket PATH and/or --tcp "
                   "HOST:PORT\nTry --help.\n");
        return 2;
    }
    if (!nonnegative("--ports", o->ports, &err) ||
        !nonnegative("--levels", o->levels, &err) ||
        !nonnegative("--credits", o->credits, &err) ||
        !nonnegative("--buffers", o->buffers, &err) ||
        !nonnegative("--hop-latency-ns", o->hop_latency_ns, &err) ||
        !nonnegative("--time-hop-ns", o->time_hop_ns, &err) ||
        !nonnegative("--time-wire-ns", o->time_wire_ns, &err) ||
        !nonnegative("--time-buffers", o->time_buffers, &err) ||
        !nonnegative("--handshake-timeout", o->handshake_timeout_ms, &err) ||
        !nonnegative("--credit-delay-us", o->credit_delay_us, &err)) {
        g_printerr("arctic-switch: %s\n", err->message);
        return 2;
    }
    if (o->handshake_timeout_ms == 0) {
        g_printerr("arctic-switch: --handshake-timeout 0: a connection "
                   "needs at least 1 ms to say HELLO\n");
        return 2;
    }
    return 0;
}

static int options_parse(Options *o, int *argc, char ***argv)
{
    GOptionEntry entries[] = {
        { "socket", 's', 0, G_OPTION_ARG_FILENAME, &o->socket_path,
          "Listen for NIUs on this UNIX socket", "PATH" },
        { "tcp", 't', 0, G_OPTION_ARG_STRING, &o->tcp_address,
          "Also listen for NIUs on TCP (needs --secret; :PORT is the "
          "loopback address, 0.0.0.0:PORT every one; port 0: any, said on "
          "stderr)", "HOST:PORT" },
        { "secret", 0, 0, G_OPTION_ARG_FILENAME, &o->secret_path,
          "The cluster's key, 16..1024 bytes, a file only its owner may "
          "read: every NIU must prove it knows it (link 1.3), and the "
          "switch proves it too", "FILE" },
        { "tcp-open", 0, 0, G_OPTION_ARG_NONE, &o->tcp_open,
          "Let --tcp run without --secret: anyone who reaches the port may "
          "join as any free node", NULL },
        { "control", 'c', 0, G_OPTION_ARG_FILENAME, &o->control_path,
          "JSON control socket for arctic-ctl", "PATH" },
        { "ports", 'n', 0, G_OPTION_ARG_INT, &o->ports,
          "NIU ports, 1..256 (default 16)", "N" },
        { "levels", 'l', 0, G_OPTION_ARG_INT, &o->levels,
          "Router levels of the fat tree (default: the fewest that fit)",
          "L" },
        { "credits", 0, 0, G_OPTION_ARG_INT, &o->credits,
          "Credits granted to each NIU per priority (default 64)", "N" },
        { "buffers", 'b', 0, G_OPTION_ARG_INT, &o->buffers,
          "Packet buffers per router input, the last one kept for high "
          "priority (default 4)", "N" },
        { "timing", 'T', 0, G_OPTION_ARG_NONE, &o->timing,
          "Model link bandwidth and per-hop latency", NULL },
        { "link-mbytes", 0, 0, G_OPTION_ARG_DOUBLE, &o->link_mbytes,
          "Link bandwidth with --timing or --timed, MB/s (default 160, as "
          "Arctic)", "MBPS" },
        { "hop-latency-ns", 0, 0, G_OPTION_ARG_INT, &o->hop_latency_ns,
          "Router latency with --timing (default 200)", "NS" },
        { "timed", 0, 0, G_OPTION_ARG_NONE, &o->timed,
          "Keep the cluster's virtual time: every NIU is made with "
          "timed=on, and each packet is delivered at the virtual time the "
          "model of links, routers and NIUs gives (docs/timed-mode.md)",
          NULL },
        { "time-hop-ns", 0, 0, G_OPTION_ARG_INT, &o->time_hop_ns,
          "With --timed: through one router, ns (default 150: five "
          "cycles and one of wire at 40 MHz)", "NS" },
        { "time-wire-ns", 0, 0, G_OPTION_ARG_INT, &o->time_wire_ns,
          "With --timed: an NIU's cable to its router, ns (default 50)",
          "NS" },
        { "time-buffers", 0, 0, G_OPTION_ARG_INT, &o->time_buffers,
          "With --timed: packet buffers at each input section of a router "
          "or an NIU, the last kept for high priority; a link waits while "
          "the input it feeds has none a packet may take (default 3, "
          "seed 000 section 6.1.4; at least 2)", "N" },
        { "handshake-timeout", 0, 0, G_OPTION_ARG_INT,
          &o->handshake_timeout_ms,
          "Close a connection that has not said HELLO after MS "
          "milliseconds (default 10000); of 64 such connections at most, "
          "the oldest makes room for a new one", "MS" },
        { "credit-delay-us", 0, 0, G_OPTION_ARG_INT, &o->credit_delay_us,
          "Freed credits wait up to US microseconds for a frame going to "
          "the NIU anyway, unless half a window waits (default 500; 0: "
          "return each at once)", "US" },
        { "no-rings", 0, 0, G_OPTION_ARG_NONE, &o->no_rings,
          "Refuse the shared-memory rings NIUs on this host offer: every "
          "link stays on its socket", NULL },
        { "no-cpu-wake", 0, 0, G_OPTION_ARG_NONE, &o->no_cpu_wake,
          "One thread sleeps for every ring: no per-CPU wake-up threads "
          "(an NIU's kick then wakes it on whichever CPU it last ran)",
          NULL },
        { "direct", 0, 0, G_OPTION_ARG_NONE, &o->direct,
          "Join NIUs on rings with direct rings, so that their packets "
          "skip this process, while no fault, capture or timing model "
          "needs to see every packet (docs/switch.md)", NULL },
        { "seed", 0, 0, G_OPTION_ARG_INT64, &o->seed,
          "Seed of fault injection and random up-routes (default 1)",
          "SEED" },
        { "fault", 'f', 0, G_OPTION_ARG_STRING_ARRAY, &o->faults,
          "Inject faults on delivery: PORT|*[:low|high|both]:drop=P,dup=P,"
          "corrupt=P,delay=P,delay-us=US (repeatable)", "SPEC" },
        { "pcap", 'w', 0, G_OPTION_ARG_FILENAME, &o->pcap_path,
          "Capture packets to a pcap file (LINKTYPE_USER0)", "FILE" },
        { "pcap-dir", 0, 0, G_OPTION_ARG_FILENAME, &o->pcap_dir,
          "The directory where control-socket pcap-start creates its "
          "captures, by name (without it pcap-start is refused)", "DIR" },
        { "verbose", 'v', 0, G_OPTION_ARG_NONE, &o->verbose,
          "Log connections, disconnections and protocol errors", NULL },
        { "no-stats", 0, 0, G_OPTION_ARG_NONE, &o->no_stats,
          "Do not print the counters on exit", NULL },
        { NULL }
    };
    g_autoptr(GOptionContext) context =
        g_option_context_new("- the Arctic fat-tree network for arctic-niu "
                             "QEMU instances");
    g_autoptr(GError) err = NULL;

    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(context,
        "Example:\n"
        "  arctic-switch -s /tmp/arctic.sock -c /tmp/arctic.ctl -n 4\n"
        "  qemu-system-x86_64 ... -chardev socket,id=n0,path=/tmp/arctic.sock"
        ",reconnect-ms=1000 \\\n      -device arctic-niu,chardev=n0,node-id=0\n"
        "  arctic-ctl -s /tmp/arctic.ctl stats\n"
        "See docs/switch.md.");
    if (!g_option_context_parse(context, argc, argv, &err)) {
        g_printerr("arctic-switch: %s\nTry --help.\n", err->message);
        return 2;
    }
    return options_check(o, *argc, *argv);
}

/* The switch's configuration from the options (@secret: the key's bytes). */
static void options_to_config(const Options *o, GBytes *secret,
                              ArcticSwitchConfig *config)
{
    arctic_switch_config_init(config);
    config->socket_path = o->socket_path;
    config->tcp_address = o->tcp_address;
    config->tcp_open = o->tcp_open;
    if (secret) {
        config->secret = g_bytes_get_data(secret, &config->secret_len);
    }
    config->pcap_path = o->pcap_path;
    config->pcap_dir = o->pcap_dir;
    config->ports = o->ports;
    config->levels = o->levels;
    config->credits = o->credits;
    config->router_buffers = o->buffers;
    config->timing = o->timing;
    config->link_mbytes_per_s = o->link_mbytes;
    config->hop_latency_ns = o->hop_latency_ns;
    config->timed = o->timed;
    config->time_hop_ns = o->time_hop_ns;
    config->time_wire_ns = o->time_wire_ns;
    config->time_buffers = o->time_buffers;
    config->seed = (uint64_t)o->seed;
    config->verbose = o->verbose;
    config->handshake_timeout_ms = o->handshake_timeout_ms;
    config->credit_delay_us = o->credit_delay_us;
    config->rings = !o->no_rings;
    config->cpu_wake = !o->no_cpu_wake;
    config->direct = o->direct;
}

int main(int argc, char **argv)
{
    g_auto(Options) o = {
        .ports = 16,
        .credits = ARCTIC_LINK_DEFAULT_CREDITS,
        .buffers = ARCTIC_SWITCH_DEFAULT_ROUTER_BUFFERS,
        .hop_latency_ns = ARCTIC_SWITCH_DEFAULT_HOP_LATENCY_NS,
        .link_mbytes = ARCTIC_SWITCH_DEFAULT_LINK_MBYTES,
        .seed = 1,
        .handshake_timeout_ms = ARCTIC_SWITCH_DEFAULT_HANDSHAKE_TIMEOUT_MS,
        .credit_delay_us = ARCTIC_SWITCH_DEFAULT_CREDIT_DELAY_US,
        .time_hop_ns = ARCTIC_TIME_HOP_NS,
        .time_wire_ns = ARCTIC_TIME_WIRE_NS,
        .time_buffers = ARCTIC_TIME_BUFFERS,
    };
    g_autoptr(GError) err = NULL;
    g_autoptr(GBytes) secret = NULL;
    ArcticSwitchConfig config;
    ArcticSwitch *sw;
    ArcticSwitchControl *control = NULL;
    ArcticSwitchStats *stats;
    GThread *thread;
    unsigned i;
    int status = options_parse(&o, &argc, &argv);

    if (status) {
        return status;
    }
    if (o.secret_path) {
        secret = secret_load(o.secret_path, &err);
        if (!secret) {
            g_printerr("arctic-switch: %s\n", err->message);
            return 2;
        }
    }

    options_to_config(&o, secret, &config);

    sw = arctic_switch_new(&config, &err);
    if (!sw) {
        g_printerr("arctic-switch: %s\n", err->message);
        return 1;
    }
    if (o.control_path) {
        control = arctic_switch_control_new(sw, o.control_path, &err);
        if (!control) {
            g_printerr("arctic-switch: --control: %s\n", err->message);
            arctic_switch_free(sw);
            return 1;
        }
    }
    for (i = 0; o.faults && o.faults[i]; i++) {
        struct arctic_fault_params params;
        int port, priority;

        if (!arctic_fault_spec_parse(o.faults[i], &port, &priority, &params,
                                     &err) ||
            !arctic_switch_set_faults(sw, port, priority, &params, &err)) {
            g_printerr("arctic-switch: --fault: %s\n", err->message);
            arctic_switch_control_free(control);
            arctic_switch_free(sw);
            return 2;
        }
    }

    main_loop = g_main_loop_new(NULL, FALSE);
    g_unix_signal_add(SIGINT, on_signal, sw);
    g_unix_signal_add(SIGTERM, on_signal, sw);
    thread = g_thread_new("arctic-switch", switch_thread, sw);
    if (o.verbose) {
        g_printerr("arctic-switch: %u ports ready\n", config.ports);
    }
    if (o.tcp_address) {
        /* Said always: with port 0 the kernel chose it. */
        g_printerr("arctic-switch: listening for NIUs on TCP port %d\n",
                   arctic_switch_tcp_port(sw));
    }
    g_main_loop_run(main_loop);
    arctic_switch_stop(sw);
    g_thread_join(thread);
    arctic_switch_control_free(control);

    if (!o.no_stats) {
        stats = arctic_switch_stats_snapshot(sw);
        arctic_switch_stats_print(stats, stdout);
        arctic_switch_stats_free(stats);
    }
    arctic_switch_free(sw);
    g_main_loop_unref(main_loop);
    return 0;
}
