/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for arctic-switch's link handling: the frame
 * reassembly, the HELLO handshake and everything a connected NIU can send
 * (packets, credits, bad frames).  The input's first byte picks how the
 * rest is cut into reads, so partial frames are exercised; the rest is the
 * byte stream of one connection, next to a well-behaved NIU on port 1 that
 * receives whatever gets routed to it.  It also checks that the CRC32
 * instruction path of arctic/crc.h gives the table's CRC for the input.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "switch-internal.h"

static struct sw_conn *socketpair_conn(ArcticSwitch *sw, int *peer)
{
    int fds[2];

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                   fds) < 0) {
        abort();
    }
    *peer = fds[1];
    return sw_conn_new(sw, fds[0]);
}

static void feed_frame(ArcticSwitch *sw, struct sw_conn *conn, uint16_t type,
                       const uint8_t *body, uint32_t length)
{
    uint8_t frame[ARCTIC_LINK_HEADER_SIZE + ARCTIC_LINK_MAX_BODY];

    arctic_frame_header_encode(frame, type, length);
    memcpy(frame + ARCTIC_LINK_HEADER_SIZE, body, length);
    sw_conn_feed(sw, conn, frame, ARCTIC_LINK_HEADER_SIZE + length);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ArcticSwitchConfig config;
    ArcticSwitch *sw;
    struct sw_conn *fuzzed, *good;
    int fuzzed_peer, good_peer;
    struct arctic_hello hello = {
        .magic = ARCTIC_LINK_MAGIC,
        .version_major = ARCTIC_LINK_VERSION_MAJOR,
        .node_id = 1,
        .credits = { 4, 4 },
    };
    uint8_t body[ARCTIC_HELLO_SIZE];
    uint8_t credit[ARCTIC_CREDIT_SIZE] = { 4, 0, 4, 0 };
    size_t chunk, off;

    if (size < 1) {
        return 0;
    }
#ifdef ARCTIC_CRC_HAVE_SSE42
    /* Differential check of the two CRC implementations. */
    if (__builtin_cpu_supports("sse4.2") &&
        arctic_crc_update_sse42(ARCTIC_CRC_INIT, data, size) !=
        arctic_crc_update_table(ARCTIC_CRC_INIT, data, size)) {
        abort();
    }
#endif

    arctic_switch_config_init(&config);
    config.ports = 4;
    config.router_buffers = 2;
    sw = arctic_switch_new(&config, NULL);
    if (!sw) {
        abort();
    }
    good = socketpair_conn(sw, &good_peer);
    arctic_hello_encode(body, &hello);
    feed_frame(sw, good, ARCTIC_FRAME_HELLO, body, sizeof(body));
    if (good->state != SW_CONN_LIVE) {
        abort();
    }
    fuzzed = socketpair_conn(sw, &fuzzed_peer);

    chunk = 1 + data[0] % 64;
    for (off = 1; off < size && fuzzed->state != SW_CONN_CLOSING;
         off += chunk) {
        size_t n = size - off < chunk ? size - off : chunk;

        sw_conn_feed(sw, fuzzed, data + off, n);
        sw_flush_all(sw);
        /* The good NIU keeps giving credit back. */
        feed_frame(sw, good, ARCTIC_FRAME_CREDIT, credit, sizeof(credit));
        sw_flush_all(sw);
        {
            char drain[65536];

            while (read(good_peer, drain, sizeof(drain)) > 0) {
            }
        }
    }
    if (sw->packets_in_use > sw->packet_bound) {
        abort();
    }
    arctic_switch_free(sw);
    close(fuzzed_peer);
    close(good_peer);
    return 0;
}
