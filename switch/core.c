/* SPDX-License-Identifier: MIT */
/*
 * The switch itself: its configuration, the listening sockets, and how its
 * layers are wired together (docs/switch.md, "Inside the library").  From
 * the bottom: the event loop (loop.c, with unixfd.c); the leaves: counters
 * and their names (stats.c), fault injection (faults.c) and the capture
 * (pcap.c); the ports with their NIU links (port.c); the routers of the
 * fat tree (router.c); beside each other above them, direct rings
 * (direct.c) and timed mode (timed.c).  A lower layer reaches an upper
 * one only through what is wired here: the loop's hooks, the ports' ops
 * (the router's, or timed mode's) and sw->hooks (direct rings').  The
 * control socket (control.c) sits on top of the switch, which knows
 * nothing of it (arctic_switch_control_new()).  Each loop batch reads what
 * the sockets hold, lets the routers move packets, then writes every
 * connection's output with one send() (sw_flush_all()).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gio/gio.h>

#include "arctic/timing.h"
#include "switch-internal.h"

void arctic_switch_config_init(ArcticSwitchConfig *config)
{
    memset(config, 0, sizeof(*config));
    config->ports = 16;
    config->credits = ARCTIC_LINK_DEFAULT_CREDITS;
    config->router_buffers = ARCTIC_SWITCH_DEFAULT_ROUTER_BUFFERS;
    config->link_mbytes_per_s = ARCTIC_SWITCH_DEFAULT_LINK_MBYTES;
    config->hop_latency_ns = ARCTIC_SWITCH_DEFAULT_HOP_LATENCY_NS;
    config->time_hop_ns = ARCTIC_TIME_HOP_NS;
    config->time_wire_ns = ARCTIC_TIME_WIRE_NS;
    config->time_buffers = ARCTIC_TIME_BUFFERS;
    config->seed = 1;
    config->handshake_timeout_ms = ARCTIC_SWITCH_DEFAULT_HANDSHAKE_TIMEOUT_MS;
    config->credit_delay_us = ARCTIC_SWITCH_DEFAULT_CREDIT_DELAY_US;
    config->rings = true;
    config->cpu_wake = true;
}

/* --- listeners -------------------------------------------------------- */

/*
 * Accept one connection of @listen_fd, which @watch watches: its
 * descriptor, or -1 when none waits.  Out of descriptors, the waiting
 * connection is accepted with the one kept in reserve and closed at once,
 * counted (refused_no_fd): left waiting, it would make the
 * level-triggered listener wake the loop for ever, and the switch would
 * spin instead of serving the links it has.  If even the reserve is gone
 * (another took the descriptor it freed), the listener is not watched for
 * SW_LISTEN_PAUSE_MS.
 */
int sw_accept(ArcticSwitch *sw, int listen_fd, struct sw_watch *watch)
{
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd >= 0) {
            return fd;
        }
        if (errno == EINTR || errno == ECONNABORTED) {
            continue;
        }
        if ((errno == EMFILE || errno == ENFILE) && sw->reserve_fd < 0) {
            sw->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
        if ((errno == EMFILE || errno == ENFILE) && sw->reserve_fd < 0) {
            sw_listener_pause(sw, listen_fd, watch);
            return -1;
        }
        if (errno != EMFILE && errno != ENFILE) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                sw_log(sw, "accept: %s", g_strerror(errno));
            }
            return -1;
        }
        close(sw->reserve_fd);
        fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            sw->refused_no_fd++;
            sw_log(sw, "out of descriptors: a connection was refused");
        }
        sw->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            return -1;
        }
    }
}

/*
 * A listener is readable: up to SW_ACCEPT_PER_TURN waiting connections
 * become pending ones (port.c), and the loop goes on.  The listener is
 * level-triggered, so the rest wait for the next turn, after every other
 * descriptor that was ready: taking them all let a flood of connections
 * (54 k a second) hold the loop, and established links (58.6 k packets/s
 * down to 5 k) and the control socket waited.
 */
static void accept_connections(ArcticSwitch *sw, void *object,
                               uint32_t events)
{
    bool tcp = object == &sw->tcp_watch;
    int listen_fd = tcp ? sw->tcp_listen_fd : sw->unix_listen_fd;
    unsigned accepted;

    for (accepted = 0; accepted < SW_ACCEPT_PER_TURN; accepted++) {
        int fd = sw_accept(sw, listen_fd, object);

        if (fd < 0) {
            return;
        }
        if (tcp) {
            int one = 1;

            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
        sw_conn_new(sw, fd);
    }
}

/*
 * Bind a UNIX stream socket at @path.  A socket file left by a switch that
 * died is replaced; one that a live process answers on is not.
 */
int sw_unix_listen(const char *path, GError **errp)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    struct stat st;
    int fd;

    if (strlen(path) >= sizeof(addr.sun_path)) {
        g_set_error(errp, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "socket path \"%s\" is longer than %zu bytes", path,
                    sizeof(addr.sun_path) - 1);
        return -1;
    }
    strcpy(addr.sun_path, path);
    if (lstat(path, &st) == 0) {
        int probe;

        if (!S_ISSOCK(st.st_mode)) {
            g_set_error(errp, G_IO_ERROR, G_IO_ERROR_EXISTS,
                        "%s exists and is not a socket", path);
            return -1;
        }
        probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && connect(probe, (struct sockaddr *)&addr,
                                  sizeof(addr)) == 0) {
            close(probe);
            g_set_error(errp, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE,
                        "another process is listening on %s", path);
            return -1;
        }
        if (probe >= 0) {
            close(probe);
        }
        unlink(path);
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        listen(fd, 128) < 0) {
        g_set_error(errp, G_IO_ERROR, g_io_error_from_errno(errno),
                    "cannot listen on %s: %s", path, g_strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

static int tcp_listen(const char *address, GError **errp)
{
    g_autofree char *host = NULL;
    const char *colon = strrchr(address, ':');
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC,
        .ai_socktype = SOCK_STREAM,
        .ai_flags = AI_PASSIVE,
    };
    struct addrinfo *res = NULL, *ai;
    int fd = -1, rc, saved = 0;

    if (!colon || !colon[1]) {
        g_set_error(errp, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "TCP address \"%s\": want HOST:PORT (e.g. "
                    "127.0.0.1:7000; :7000 is the loopback address)",
                    address);
        return -1;
    }
    host = g_strndup(address, colon - address);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host) - 2);
        host[strlen(host) - 2] = 0;
    }
    /*
     * No host: the loopback address, not every address.  Listening where
     * other hosts reach the switch is asked for by name (0.0.0.0, or the
     * address those hosts use).
     */
    rc = getaddrinfo(host[0] ? host : "127.0.0.1", colon + 1, &hints, &res);
    if (rc != 0) {
        g_set_error(errp, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "TCP address \"%s\": %s", address, gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai; ai = ai->ai_next) {
        int one = 1;

        fd = socket(ai->ai_family,
                    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            listen(fd, 128) == 0) {
            break;
        }
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        g_set_error(errp, G_IO_ERROR, g_io_error_from_errno(saved),
                    "cannot listen on TCP %s: %s", address,
                    g_strerror(saved));
    }
    return fd;
}

/*
 * Let the routers move what can move and the ports write it, until
 * neither has more to do (a port that drained may let a router move
 * again).
 */
void sw_flush_all(ArcticSwitch *sw)
{
    do {
        sw_schedule(sw);
        sw_port_flush(sw);
    } while (sw_schedule_pending(sw));
}

/*
 * After each batch of events: what they brought moves on; then the
 * connections they closed, which the batch may still have named, are freed.
 */
static void switch_after_batch(ArcticSwitch *sw)
{
    sw_port_read_rings(sw);
    sw_flush_all(sw);
    sw_port_bury_closed(sw);
}

/*
 * A per-CPU wake-up thread was kicked (loop.c): output that waited for
 * room goes, what the rings hold moves on.  Connections it closes are
 * freed by the loop thread after its next batch, not here: the loop
 * thread may hold events, taken before it got the lock, that name them.
 */
static void switch_kicked(ArcticSwitch *sw)
{
    sw_port_rings_kicked(sw);
    sw_port_read_rings(sw);
    sw_flush_all(sw);
}

/*
 * A listener that could not even close what it could not accept is not
 * watched for a while (sw_accept()); the timer watches it again.
 */
void sw_listener_pause(ArcticSwitch *sw, int fd, struct sw_watch *watch)
{
    unsigned i;

    for (i = 0; i < sw->paused; i++) {
        if (sw->paused_fd[i] == fd) {
            return;
        }
    }
    g_assert(sw->paused < G_N_ELEMENTS(sw->paused_fd));
    sw_log(sw, "out of descriptors: not accepting for %d ms",
           SW_LISTEN_PAUSE_MS);
    sw_loop_unwatch(sw, fd);
    sw->paused_fd[sw->paused] = fd;
    sw->paused_watch[sw->paused++] = watch;
    sw->paused_until_ns = sw->now_ns + SW_LISTEN_PAUSE_MS * 1000000ull;
    sw_arm_timer(sw, sw->paused_until_ns);
}

/* A listener about to be closed leaves the paused ones. */
void sw_listener_forget(ArcticSwitch *sw, int fd)
{
    unsigned i;

    for (i = 0; i < sw->paused; i++) {
        if (sw->paused_fd[i] == fd) {
            sw->paused--;
            sw->paused_fd[i] = sw->paused_fd[sw->paused];
            sw->paused_watch[i] = sw->paused_watch[sw->paused];
            return;
        }
    }
}

static void listeners_resume(ArcticSwitch *sw)
{
    if (!sw->paused) {
        return;
    }
    if (sw->now_ns < sw->paused_until_ns) {
        sw_arm_timer(sw, sw->paused_until_ns);
        return;
    }
    while (sw->paused > 0) {
        sw->paused--;
        sw_loop_watch(sw, sw->paused_fd[sw->paused],
                      sw->paused_watch[sw->paused], EPOLLIN);
    }
}

static void switch_timer(ArcticSwitch *sw)
{
    sw_router_timer(sw);
    sw_port_timer(sw);
    /* Direct-ring frames that waited for an NIU to read its socket. */
    sw_direct_timer(sw);
    listeners_resume(sw);
}

/* --- the switch ------------------------------------------------------- */

static bool config_check(const ArcticSwitchConfig *c, GError **errp)
{
    unsigned min_levels;

    if (c->ports < 1 || c->ports > ARCTIC_LINK_MAX_NODES) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--ports %u: want 1..%d", c->ports,
                    ARCTIC_LINK_MAX_NODES);
        return false;
    }
    min_levels = arctic_tree_levels(c->ports);
    if (c->levels && (c->levels < min_levels ||
                      c->levels > ARCTIC_MAX_LEVELS)) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--levels %u: %u ports need %u..%d levels", c->levels,
                    c->ports, min_levels, ARCTIC_MAX_LEVELS);
        return false;
    }
    if (c->credits < 1 || c->credits > ARCTIC_SWITCH_MAX_CREDITS) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--credits %u: want 1..%d", c->credits,
                    ARCTIC_SWITCH_MAX_CREDITS);
        return false;
    }
    if (c->router_buffers < 2 || c->router_buffers > 1024) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--buffers %u: want 2..1024 (one is kept for high "
                    "priority)", c->router_buffers);
        return false;
    }
    if (!(c->link_mbytes_per_s > 0) || c->link_mbytes_per_s > 1e6) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--link-mbytes %g: want a positive bandwidth",
                    c->link_mbytes_per_s);
        return false;
    }
    if (c->hop_latency_ns > 1000000000u) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--hop-latency-ns %u: at most 1 s", c->hop_latency_ns);
        return false;
    }
    if (c->time_hop_ns > 1000000u || c->time_wire_ns > 1000000u) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--time-hop-ns %u, --time-wire-ns %u: at most 1 ms",
                    c->time_hop_ns, c->time_wire_ns);
        return false;
    }
    if (c->time_buffers < 2 || c->time_buffers > 1024) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--time-buffers %u: want 2..1024 buffers per input "
                    "section (one is kept for high priority)",
                    c->time_buffers);
        return false;
    }
    if (c->timed && c->timing) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--timing delays packets against the host's clock: "
                    "--timed has a model of its own (docs/timed-mode.md)");
        return false;
    }
    if (c->direct && (c->timed || !c->rings)) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--direct joins NIUs by rings of shared memory: not with "
                    "%s", c->timed ? "--timed" : "--no-rings");
        return false;
    }
    if (c->secret && (c->secret_len < ARCTIC_AUTH_KEY_MIN ||
                      c->secret_len > ARCTIC_AUTH_KEY_MAX)) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--secret: a key of %zu bytes: want %d..%d",
                    c->secret_len, ARCTIC_AUTH_KEY_MIN, ARCTIC_AUTH_KEY_MAX);
        return false;
    }
    if (c->tcp_address && !c->secret && !c->tcp_open) {
        g_set_error(errp, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--tcp %s: anyone who reaches the port could join the "
                    "cluster: give --secret FILE (docs/scale.md, \"Trust\"), "
                    "or --tcp-open to let them", c->tcp_address);
        return false;
    }
    return true;
}

ArcticSwitch *arctic_switch_new(const ArcticSwitchConfig *config,
                                GError **errp)
{
    ArcticSwitch *sw;

    if (!config_check(config, errp)) {
        return NULL;
    }
    sw = g_new0(ArcticSwitch, 1);
    sw->config = *config;
    sw->socket_path = g_strdup(config->socket_path);
    sw->tcp_address = g_strdup(config->tcp_address);
    sw->config.socket_path = sw->socket_path;
    sw->config.tcp_address = sw->tcp_address;
    if (config->secret) {
        sw->secret = g_bytes_new(config->secret, config->secret_len);
    }
    sw->config.secret = NULL;
    sw->config.pcap_path = NULL;
    sw->ports = config->ports;
    sw->levels = config->levels ? config->levels
                                : arctic_tree_levels(config->ports);
    sw->ns_per_byte = 1000.0 / config->link_mbytes_per_s;
    sw->loop.epoll_fd = sw->loop.wakeup_fd = sw->loop.timer_fd = -1;
    sw->read_buf = g_malloc(SW_CONN_INPUT_BUFFER);
    sw->unix_listen_fd = sw->tcp_listen_fd = -1;
    sw->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    sw->port = g_new0(struct sw_port, sw->ports);
    sw->port_ops = config->timed ? &sw_timed_port_ops : &sw_router_port_ops;
    if (config->direct) {
        sw->hooks = sw_direct_hooks;
    }
    sw->start_ns = sw->now_ns = sw_clock_ns();
    sw_tree_init(sw, NULL);
    if (config->timed) {
        sw_timed_init(sw);
    }
    sw_faults_init(sw);
    sw_direct_init(sw);
    if (!sw_loop_init(sw, switch_timer, switch_after_batch,
                      sw_port_may_sleep, switch_kicked, sw_port_cpu_wait,
                      errp)) {
        goto fail;
    }

    if (sw->socket_path) {
        sw->unix_listen_fd = sw_unix_listen(sw->socket_path, errp);
        if (sw->unix_listen_fd < 0) {
            g_clear_pointer(&sw->socket_path, g_free);
            goto fail;
        }
        sw->unix_watch.ready = accept_connections;
        sw->unix_watch.object = &sw->unix_watch;
        sw_loop_watch(sw, sw->unix_listen_fd, &sw->unix_watch, EPOLLIN);
    }
    if (sw->tcp_address) {
        sw->tcp_listen_fd = tcp_listen(sw->tcp_address, errp);
        if (sw->tcp_listen_fd < 0) {
            goto fail;
        }
        sw->tcp_watch.ready = accept_connections;
        sw->tcp_watch.object = &sw->tcp_watch;
        sw_loop_watch(sw, sw->tcp_listen_fd, &sw->tcp_watch, EPOLLIN);
    }
    if (config->pcap_path && !arctic_switch_pcap_open(sw, config->pcap_path,
                                                      errp)) {
        goto fail;
    }
    if (config->pcap_dir && !sw_pcap_dir_open(sw, config->pcap_dir, errp)) {
        goto fail;
    }
    return sw;

fail:
    arctic_switch_free(sw);
    return NULL;
}

/* --- counters ------------------------------------------------------- */

static void snapshot_in_loop(ArcticSwitch *sw, void *opaque)
{
    ArcticSwitchStats *st = opaque;
    size_t r, n = (size_t)sw->levels * sw->routers_per_level;
    unsigned i, prio;

    /* What can move, moves first: a request read in the same batch as the
     * credit that frees a packet must not show that packet as stuck. */
    sw_schedule(sw);
    st->ports = sw->ports;
    st->levels = sw->levels;
    st->routers = n;
    st->uptime_ns = sw_clock_ns() - sw->start_ns;
    st->port = g_new0(struct arctic_port_stats, sw->ports);
    for (i = 0; i < sw->ports; i++) {
        st->port[i] = sw->port[i].stats;
        st->port[i].connected = sw_port_live(sw, i);
        st->port[i].rings = sw_port_uses_rings(sw, i);
        for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
            st->port[i].prio[prio].ingress_depth =
                sw_port_ingress_depth(sw, i, prio);
            st->port[i].prio[prio].egress_depth =
                sw_port_egress_depth(sw, i, prio);
        }
    }
    sw_direct_stats(sw, st->port);
    memcpy(st->unattached_disconnects, sw->unattached_disconnects,
           sizeof(st->unattached_disconnects));
    memcpy(st->latency, sw->latency, sizeof(st->latency));
    for (r = 0; r < n; r++) {
        st->router_stalls += sw->routers[r].stalls;
    }
    st->packets_in_use = sw->packets_in_use;
    st->packets_in_use_max = sw->packets_in_use_max;
    st->packet_bound = sw->packet_bound;
    st->cpu_wakers = sw->loop.cpu_wakers;
    for (r = 0; r < ARCTIC_CPU_WAKE_MAX; r++) {
        st->cpu_wakeups[r] = __atomic_load_n(&sw->loop.cpu_wakeups[r],
                                             __ATOMIC_RELAXED);
    }
    st->cpu_handovers = __atomic_load_n(&sw->loop.cpu_handovers,
                                        __ATOMIC_RELAXED);
    st->refused_no_fd = sw->refused_no_fd;
    st->auth_failures = sw->auth_failures;
    sw_timed_stats(sw, st);
    sw_find_oldest(sw, sw_clock_ns(), st->oldest);
}

ArcticSwitchStats *arctic_switch_stats_snapshot(ArcticSwitch *sw)
{
    ArcticSwitchStats *st = g_new0(ArcticSwitchStats, 1);

    arctic_switch_invoke(sw, snapshot_in_loop, st);
    return st;
}

int arctic_switch_tcp_port(ArcticSwitch *sw)
{
    struct sockaddr_storage addr;
    socklen_t len = sizeof(addr);

    if (sw->tcp_listen_fd < 0 ||
        getsockname(sw->tcp_listen_fd, (struct sockaddr *)&addr, &len) < 0) {
        return -1;
    }
    return addr.ss_family == AF_INET6
           ? ntohs(((struct sockaddr_in6 *)&addr)->sin6_port)
           : ntohs(((struct sockaddr_in *)&addr)->sin_port);
}

void arctic_switch_free(ArcticSwitch *sw)
{
    if (!sw) {
        return;
    }
    sw_port_close_all(sw);
    sw_direct_cleanup(sw);
    arctic_switch_pcap_close(sw);
    sw_pcap_dir_close(sw);
    if (sw->unix_listen_fd >= 0) {
        close(sw->unix_listen_fd);
        unlink(sw->socket_path);
    }
    if (sw->tcp_listen_fd >= 0) {
        close(sw->tcp_listen_fd);
    }
    if (sw->reserve_fd >= 0) {
        close(sw->reserve_fd);
    }
    sw_loop_cleanup(sw);
    sw_tree_free(sw);
    sw_timed_free(sw);
    sw_faults_free(sw);
    g_free(sw->port);
    g_free(sw->read_buf);
    g_free(sw->socket_path);
    g_free(sw->tcp_address);
    if (sw->secret) {
        g_bytes_unref(sw->secret);
    }
    g_free(sw);
}
