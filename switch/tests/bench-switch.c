/* SPDX-License-Identifier: MIT */
/*
 * Forwarding-rate benchmark of arctic-switch.  Synthetic NIUs (one pump
 * thread driving every client socket) send to a partner across the tree,
 * with 64-byte and maximum-size (144-byte) Arctic packets at each
 * priority, from 2 to 256 ports.  The same clients and the same traffic
 * are run through a plain socket relay that does no routing, no parsing
 * and no credit accounting (it copies each client's bytes to its partner),
 * which is the socket limit the switch is measured against.  It prints
 * figures only; nothing is asserted about time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib-unix.h>
#include <glib/gstdio.h>

#include "harness.h"

enum { BENCH_CREDITS = 256, RELAY_BUFFER = 65536 };

struct bench_traffic {
    unsigned ports, words, per_client;
    bool high;
    unsigned *sent;
};

static unsigned partner(unsigned port, unsigned ports)
{
    return (port + ports / 2) % ports;
}

static bool bench_next(void *opaque, unsigned client, uint8_t *buf,
                       size_t *size)
{
    struct bench_traffic *bt = opaque;

    if (bt->sent[client] >= bt->per_client) {
        return false;
    }
    *size = test_build_packet(buf, client, partner(client, bt->ports),
                              bt->high, false, bt->sent[client]++, bt->words);
    return true;
}

/* --- the relay baseline ----------------------------------------------- */

struct relay {
    char *path;
    unsigned ports;
    int listen_fd, stop_fd, epoll_fd;
    int *fd;                    /* by node id */
    GThread *thread;
};

struct relay_buffer {
    uint8_t data[RELAY_BUFFER];
    size_t start, end;
};

/* Send what @b holds until the socket would block; true once it is all
 * gone (and @b empty again). */
static bool relay_flush(int fd, struct relay_buffer *b)
{
    while (b->start < b->end) {
        ssize_t w = send(fd, b->data + b->start, b->end - b->start,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w <= 0) {
            break;
        }
        b->start += w;
    }
    if (b->start == b->end) {
        b->start = b->end = 0;
        return true;
    }
    return false;
}

static void read_exact(int fd, uint8_t *buf, size_t len)
{
    while (len) {
        ssize_t n = recv(fd, buf, len, 0);

        g_assert_cmpint(n, >, 0);
        buf += n;
        len -= n;
    }
}

static gpointer relay_thread(gpointer opaque)
{
    struct relay *r = opaque;
    struct relay_buffer *buf = g_new0(struct relay_buffer, r->ports);
    struct epoll_event ev, events[64];
    unsigned i;

    /* Handshake every client: HELLO in, WELCOME out, like the switch. */
    for (i = 0; i < r->ports; i++) {
        int fd = accept(r->listen_fd, NULL, NULL);
        uint8_t in[ARCTIC_LINK_HEADER_SIZE + ARCTIC_HELLO_SIZE];
        uint8_t out[ARCTIC_LINK_HEADER_SIZE + ARCTIC_WELCOME_SIZE];
        struct arctic_hello hello;
        struct arctic_welcome welcome = {
            .magic = ARCTIC_LINK_MAGIC,
            .version_major = ARCTIC_LINK_VERSION_MAJOR,
            .num_nodes = r->ports,
            .levels = arctic_tree_levels(r->ports),
            .credits = { BENCH_CREDITS, BENCH_CREDITS },
        };

        read_exact(fd, in, sizeof(in));
        arctic_hello_decode(in + ARCTIC_LINK_HEADER_SIZE, &hello);
        welcome.node_id = hello.node_id;
        arctic_frame_header_encode(out, ARCTIC_FRAME_WELCOME,
                                   ARCTIC_WELCOME_SIZE);
        arctic_welcome_encode(out + ARCTIC_LINK_HEADER_SIZE, &welcome);
        g_assert_cmpint(send(fd, out, sizeof(out), MSG_NOSIGNAL), ==,
                        sizeof(out));
        g_unix_set_fd_nonblocking(fd, TRUE, NULL);
        r->fd[hello.node_id] = fd;
    }
    for (i = 0; i < r->ports; i++) {
        ev.events = EPOLLIN;
        ev.data.u32 = i;
        epoll_ctl(r->epoll_fd, EPOLL_CTL_ADD, r->fd[i], &ev);
    }
    ev.events = EPOLLIN;
    ev.data.u32 = UINT32_MAX;
    epoll_ctl(r->epoll_fd, EPOLL_CTL_ADD, r->stop_fd, &ev);

    for (;;) {
        int n = epoll_wait(r->epoll_fd, events, 64, -1), k;

        for (k = 0; k < n; k++) {
            unsigned from = events[k].data.u32, to;
            struct relay_buffer *b;

            if (from == UINT32_MAX) {
                g_free(buf);
                return NULL;
            }
            /* Events on a socket move its partner's buffered bytes out
             * (EPOLLOUT) and its own bytes in (EPOLLIN). */
            if (events[k].events & EPOLLOUT) {
                unsigned src = partner(from, r->ports);

                if (relay_flush(r->fd[from], &buf[src])) {
                    ev.events = EPOLLIN;
                    ev.data.u32 = from;
                    epoll_ctl(r->epoll_fd, EPOLL_CTL_MOD, r->fd[from], &ev);
                }
            }
            if (!(events[k].events & EPOLLIN)) {
                continue;
            }
            b = &buf[from];
            to = partner(from, r->ports);
            if (b->end == 0) {
                ssize_t got = recv(r->fd[from], b->data, RELAY_BUFFER,
                                   MSG_DONTWAIT);

                if (got <= 0) {
                    continue;
                }
                b->end = got;
                if (!relay_flush(r->fd[to], b)) {
                    ev.events = EPOLLIN | EPOLLOUT;
                    ev.data.u32 = to;
                    epoll_ctl(r->epoll_fd, EPOLL_CTL_MOD, r->fd[to], &ev);
                }
            }
        }
    }
}

static struct relay *relay_start(const char *dir, unsigned ports)
{
    struct relay *r = g_new0(struct relay, 1);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };

    r->path = g_build_filename(dir, "relay.sock", NULL);
    r->ports = ports;
    r->fd = g_new0(int, ports);
    r->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_strlcpy(addr.sun_path, r->path, sizeof(addr.sun_path));
    g_assert_cmpint(bind(r->listen_fd, (struct sockaddr *)&addr,
                         sizeof(addr)), ==, 0);
    g_assert_cmpint(listen(r->listen_fd, 512), ==, 0);
    r->stop_fd = eventfd(0, EFD_CLOEXEC);
    r->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    r->thread = g_thread_new("relay", relay_thread, r);
    return r;
}

static void relay_stop(struct relay *r)
{
    uint64_t one = 1;
    unsigned i;

    g_assert_cmpint(write(r->stop_fd, &one, sizeof(one)), ==, sizeof(one));
    g_thread_join(r->thread);
    for (i = 0; i < r->ports; i++) {
        close(r->fd[i]);
    }
    close(r->listen_fd);
    close(r->stop_fd);
    close(r->epoll_fd);
    g_unlink(r->path);
    g_free(r->path);
    g_free(r->fd);
    g_free(r);
}

/* --- one measurement -------------------------------------------------- */

/* Packets per second delivered between @ports clients on @path. */
static double measure(const char *path, unsigned ports, unsigned words,
                      bool high, unsigned total)
{
    TestClient **clients = g_new0(TestClient *, ports);
    struct bench_traffic bt = {
        .ports = ports,
        .words = words,
        .high = high,
        .per_client = MAX(total / ports, 64),
    };
    TestTraffic t = {
        .clients = clients,
        .num_clients = ports,
        .next_packet = bench_next,
        .opaque = &bt,
        .idle_timeout_ms = 5000,
    };
    gint64 start, elapsed;
    uint64_t got;
    unsigned i;

    bt.sent = g_new0(unsigned, ports);
    t.expected = (uint64_t)bt.per_client * ports;
    for (i = 0; i < ports; i++) {
        clients[i] = test_client_connect(path, i, BENCH_CREDITS,
                                         BENCH_CREDITS);
    }
    start = g_get_monotonic_time();
    got = test_traffic_run(&t);
    elapsed = g_get_monotonic_time() - start;
    if (got != t.expected) {
        g_printerr("bench: only %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                   " packets arrived\n", got, t.expected);
        exit(1);
    }
    for (i = 0; i < ports; i++) {
        test_client_free(clients[i]);
    }
    g_free(clients);
    g_free(bt.sent);
    return got * 1e6 / MAX(elapsed, 1);
}

static double measure_switch(const char *dir, unsigned ports, unsigned words,
                             bool high, unsigned total)
{
    ArcticSwitchConfig config;
    TestSwitch *ts;
    double pps;

    (void)dir;
    arctic_switch_config_init(&config);
    config.ports = ports;
    config.credits = BENCH_CREDITS;
    config.router_buffers = 16;
    ts = test_switch_start(&config);
    pps = measure(ts->socket_path, ports, words, high, total);
    test_switch_stop(ts);
    return pps;
}

static double measure_relay(const char *dir, unsigned ports, unsigned words,
                            bool high, unsigned total)
{
    struct relay *r = relay_start(dir, ports);
    double pps = measure(r->path, ports, words, high, total);

    relay_stop(r);
    return pps;
}

int main(int argc, char **argv)
{
    unsigned port_counts[] = { 2, 4, 16, 64, 256 };
    unsigned words[] = { 11, ARCTIC_MAX_PACKET_WORDS };  /* 64, 144 bytes */
    unsigned total = 400000, p, w, prio;
    g_autofree char *dir = g_dir_make_tmp("arctic-bench-XXXXXX", NULL);

    if (argc > 1 && !strcmp(argv[1], "--quick")) {
        total = 50000;
    }
    printf("arctic-switch forwarding rate: %u packets per run, %d credits, "
           "16 buffers per router input\n", total, BENCH_CREDITS);
    printf("%5s %6s %5s %14s %14s %8s %12s\n", "ports", "bytes", "prio",
           "switch pkt/s", "relay pkt/s", "ratio", "switch MB/s");
    for (p = 0; p < G_N_ELEMENTS(port_counts); p++) {
        for (w = 0; w < G_N_ELEMENTS(words); w++) {
            for (prio = 0; prio < ARCTIC_NUM_PRIORITIES; prio++) {
                /* test_build_packet() takes payload words. */
                unsigned payload = words[w] - ARCTIC_MPI_LENGTH_EXTRA;
                size_t bytes = arctic_wire_size(words[w]);
                double sw = measure_switch(dir, port_counts[p], payload,
                                           prio, total);
                double relay = measure_relay(dir, port_counts[p], payload,
                                             prio, total);

                printf("%5u %6zu %5s %14.0f %14.0f %8.2f %12.1f\n",
                       port_counts[p], bytes, prio ? "high" : "low", sw,
                       relay, sw / relay, sw * bytes / 1e6);
                fflush(stdout);
            }
        }
    }
    g_rmdir(dir);
    return 0;
}
