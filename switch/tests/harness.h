/* SPDX-License-Identifier: MIT */
/*
 * Test and benchmark harness for arctic-switch: an embedded switch running
 * on its own thread, synthetic NIU clients speaking the link protocol over
 * real UNIX sockets, and a traffic pump that drives many clients at once
 * (credits both ways, batched writes) for the all-pairs tests and the
 * benchmark.  With ARCTIC_TEST_LINK=rings in the environment every client
 * offers shared-memory rings with its HELLO (arctic/link-ring.h), as an
 * NIU on the same host does, and talks through them once the switch says
 * RINGS: meson runs the switch suite both ways.
 */
#ifndef ARCTIC_SWITCH_TEST_HARNESS_H
#define ARCTIC_SWITCH_TEST_HARNESS_H

#include "arctic/link-ring.h"
#include "switch.h"

typedef struct {
    ArcticSwitch *sw;
    GThread *thread;
    char *dir;
    char *socket_path;
    char *control_path;
    ArcticSwitchControl *control;   /* listening at control_path */
} TestSwitch;

/* Start a switch whose sockets live in a fresh temporary directory (the
 * config's paths are replaced). */
TestSwitch *test_switch_start(ArcticSwitchConfig *config);
void test_switch_stop(TestSwitch *ts);
/* Run an already built switch's loop on a new thread. */
GThread *test_switch_run_thread(ArcticSwitch *sw);
ArcticSwitchStats *test_switch_stats(TestSwitch *ts);

typedef struct {
    int fd;
    unsigned node;
    unsigned send_credits[ARCTIC_NUM_PRIORITIES]; /* granted by the switch */
    unsigned num_nodes, levels;
    struct arctic_frame_reader reader;  /* arctic/link.h */
    uint8_t input[65536];               /* what one recv() took */
    uint8_t output[65536];
    size_t output_len;
    GQueue packets;             /* GBytes received while waiting */
    bool closed;
    uint16_t welcome_flags;     /* of the WELCOME frame */
    /* Shared-memory rings, once the WELCOME took them. */
    bool rings;
    void *ring_area;
    size_t ring_area_size;
    struct arctic_ring ring_out, ring_in;
    /*
     * Our end of the link's wake-up socket pair (link 1.3): we sleep on
     * it, and kick the switch through it; switch_end is the other end,
     * which the HELLO gave away (kept open only by tests that misbehave).
     */
    int wake_fd;
    /*
     * Whether the WELCOME said CPU_WAKE: kicks then go to the per-CPU
     * counters in our area (arctic/link-ring.h).  Which one a kick goes
     * to: that of a CPU number, TEST_KICK_MY_CPU (the default: the CPU we
     * run on, as an NIU does) or TEST_KICK_RING (wake_fd); and how many
     * kicks went.
     */
    bool cpu_wake;
    int cpu_kick;
    unsigned kicks;
    /*
     * Authentication (link 1.3): the key the client answers a challenge
     * with (test_auth_key at connect; NULL: it cannot), its HELLO, the
     * nonces, and whether the switch challenged it and proved the key.
     */
    GBytes *key;
    uint8_t hello_body[ARCTIC_HELLO_SIZE];
    uint8_t switch_nonce[ARCTIC_AUTH_NONCE_SIZE];
    uint8_t nonce[ARCTIC_AUTH_NONCE_SIZE];
    bool challenged, proved;
    /* The AUTH_RESPONSE frame it sent (for a test that replays it). */
    uint8_t response[ARCTIC_LINK_HEADER_SIZE + ARCTIC_AUTH_RESPONSE_SIZE];
    /*
     * Timed links (link 1.4): the TIME_START received (started), the last
     * TIME_GRANT (grants counts them), and the TIMED_PACKETs delivered
     * (TestTimedPacket), in the order they came.
     */
    bool started;
    struct arctic_time_ready time_costs;        /* its TIME_READY */
    struct arctic_time_start start;
    uint64_t granted;
    unsigned grants;
    GQueue timed;
} TestClient;

typedef struct {
    uint64_t at;
    unsigned grants;            /* the client's grants when it came */
    uint8_t prio;
    size_t size;
    uint8_t bytes[ARCTIC_WIRE_MAX_SIZE];
} TestTimedPacket;

/* The key new clients answer a switch's challenge with (NULL: none). */
extern GBytes *test_auth_key;
/* The flags of new clients' HELLO frames (ARCTIC_HELLO_FLAGS). */
extern uint16_t test_hello_flags;
/* HMAC-SHA256 of arctic_auth_message()'s bytes, computed with GLib. */
void test_auth_mac(GBytes *key, enum arctic_auth_role role,
                   const uint8_t *their_nonce, const uint8_t *our_nonce,
                   const uint8_t *hello_body, uint8_t *mac);

enum { TEST_KICK_RING = -1, TEST_KICK_MY_CPU = -2 };

/* What a client's HELLO offers. */
typedef enum {
    TEST_OFFER_ENV,             /* rings if ARCTIC_TEST_LINK=rings */
    TEST_OFFER_NONE,            /* a plain HELLO */
    TEST_OFFER_RINGS,           /* a good area and a wake-up socket */
    TEST_OFFER_UNSEALED,        /* an area the client could still shrink */
    TEST_OFFER_NOT_SOCKET,      /* an eventfd where the socket belongs */
    TEST_OFFER_RINGS_1_2,       /* good rings, from an NIU of link 1.2 */
} TestOffer;

int test_connect_unix(const char *path);
int test_connect_tcp(int port);
/*
 * Only say HELLO (of link minor version @minor, with what @offer names)
 * on a connected socket @fd, and return at once: the test reads what
 * comes with test_client_read().
 */
TestClient *test_client_hello(int fd, unsigned node, unsigned credits_low,
                              unsigned credits_high, TestOffer offer,
                              unsigned minor);
/* Handshake on a connected socket @fd (the client owns it from now on). */
uint32_t test_client_try_connect_fd(int fd, unsigned node,
                                    unsigned credits_low,
                                    unsigned credits_high, TestOffer offer,
                                    TestClient **out);
/* Connect and handshake; returns 0 on WELCOME (and *out) or the REJECT
 * reason (then the client is closed). */
uint32_t test_client_try_connect(const char *path, unsigned node,
                                 unsigned credits_low, unsigned credits_high,
                                 TestClient **out);
/* The same with what the HELLO offers chosen by the test. */
uint32_t test_client_try_connect_offer(const char *path, unsigned node,
                                       unsigned credits_low,
                                       unsigned credits_high, TestOffer offer,
                                       TestClient **out);
/* Whether ARCTIC_TEST_LINK=rings asks for rings. */
bool test_rings_wanted(void);
TestClient *test_client_connect(const char *path, unsigned node,
                                unsigned credits_low, unsigned credits_high);
void test_client_free(TestClient *c);

/* A well-formed wire packet from @src to @dst with arctic_route_entry()'s
 * route; e2e seq = @seq, payload words = @payload_words (word i = seq ^ i).
 * Returns its size. */
size_t test_build_packet(uint8_t *buf, unsigned src, unsigned dst, bool high,
                         bool random_up, uint32_t seq, unsigned payload_words);
/* Check a received packet against test_build_packet(); fills src/seq. */
bool test_packet_valid(const uint8_t *pkt, size_t size, unsigned *src,
                       unsigned *dst, uint32_t *seq, bool *high);

void test_client_write(TestClient *c, const void *data, size_t len);
/* Send a PACKET frame, waiting (up to @timeout_ms) for a credit. */
bool test_client_send_packet(TestClient *c, const uint8_t *pkt, size_t size,
                             int timeout_ms);
/* Next received PACKET body (caller frees), or NULL after @timeout_ms. */
GBytes *test_client_recv_packet(TestClient *c, int timeout_ms);
void test_client_return_credits(TestClient *c, unsigned low, unsigned high);
/* Read whatever arrived, waiting up to @timeout_ms for something. */
bool test_client_poll(TestClient *c, int timeout_ms);
/* One recv() within @timeout_ms, its frames taken in: credits added,
 * packets queued, a WELCOME or REJECT reported in *control_type and
 * control_body (ARCTIC_LINK_MAX_BODY bytes).  False if nothing came. */
bool test_client_read(TestClient *c, int timeout_ms, uint16_t *control_type,
                      uint8_t *control_body);
/* Kick the switch as the client's NIU would (counted in c->kicks). */
void test_client_kick(TestClient *c);
void test_kick_cpu(TestClient *c, unsigned cpu);
/* Wait until the switch closes the connection; returns true if it did. */
bool test_client_wait_closed(TestClient *c, int timeout_ms);

/* Timed links: what a timed NIU sends (arctic/link.h, link 1.4). */
void test_client_time_ready(TestClient *c,
                            const struct arctic_time_ready *ready);
void test_client_time_sync(TestClient *c, uint64_t reached,
                           uint64_t promise);
void test_client_send_timed(TestClient *c, uint64_t stamp, bool high,
                            const uint8_t *pkt, size_t size);
/* Wait for TIME_START; false after @timeout_ms. */
bool test_client_wait_start(TestClient *c, int timeout_ms);
/* Wait until the last grant is above @above; false after @timeout_ms. */
bool test_client_wait_grant(TestClient *c, uint64_t above, int timeout_ms);
/* Next delivered TIMED_PACKET (caller frees), or NULL after @timeout_ms. */
TestTimedPacket *test_client_recv_timed(TestClient *c, int timeout_ms);

/* The traffic pump. */
typedef struct {
    TestClient **clients;
    unsigned num_clients;
    /* Produce the next packet of @client into @buf; false when done. */
    bool (*next_packet)(void *opaque, unsigned client, uint8_t *buf,
                        size_t *size);
    void (*received)(void *opaque, unsigned client, const uint8_t *pkt,
                     size_t size);
    void *opaque;
    uint64_t expected;          /* stop once this many were received */
    unsigned idle_timeout_ms;   /* give up after this long without progress */
    uint64_t sent, received_count;
} TestTraffic;

/* Runs until @expected packets were received or the traffic went idle;
 * returns the count received. */
uint64_t test_traffic_run(TestTraffic *t);

#endif /* ARCTIC_SWITCH_TEST_HARNESS_H */
