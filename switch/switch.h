/* SPDX-License-Identifier: MIT */
/*
 * libarcticswitch: the arctic-switch process as a library with no main(), so
 * that switch/main.c, the unit tests, the fuzzer and the benchmark all embed
 * the same code (the way QEMU's contrib/ivshmem-server is split).  A switch
 * owns one epoll loop; arctic_switch_run() runs it in the calling thread
 * until arctic_switch_stop().  Every other entry point that touches switch
 * state either runs before/after the loop or goes through
 * arctic_switch_invoke(), so callers need no locks.  Inside, while the
 * loop runs, per-CPU wake-up threads serve the shared-memory rings when
 * NIUs kick them (link 1.2); they and the loop thread take turns under
 * one lock on the switch's state (loop.c).
 */
#ifndef ARCTIC_SWITCH_H
#define ARCTIC_SWITCH_H

#include <glib.h>
#include <stdio.h>

#include "arctic/link.h"
#include "arctic/link-ring.h"
#include "arctic/route.h"

typedef struct ArcticSwitch ArcticSwitch;

/* Why a packet was dropped.  The switch drops nothing else. */
enum arctic_drop_reason {
    ARCTIC_DROP_BAD_CRC,        /* CRC-32C trailer wrong */
    ARCTIC_DROP_BAD_LENGTH,     /* W1.LENGTH disagrees with the frame size */
    ARCTIC_DROP_BAD_KIND,       /* e2e header kind unknown */
    ARCTIC_DROP_NOT_ZERO,       /* upper half of word 0 not zero */
    ARCTIC_DROP_UNKNOWN_ROUTE,  /* route climbs too high or ends on no port */
    ARCTIC_DROP_PORT_DOWN,      /* destination port has no live NIU */
    ARCTIC_DROP_FAULT,          /* fault injection */
    /* its end-to-end header names another source than the port it came
     * in on: a node that forges another's packets */
    ARCTIC_DROP_FORGED_SOURCE,
    ARCTIC_DROP_REASONS
};

/* Why a connection ended. */
enum arctic_disconnect_reason {
    ARCTIC_DISCONNECT_PEER_CLOSED,      /* orderly close or reset by the NIU */
    ARCTIC_DISCONNECT_REJECTED,         /* handshake refused (REJECT sent) */
    ARCTIC_DISCONNECT_BAD_FRAME_TYPE,
    ARCTIC_DISCONNECT_BAD_FRAME_FLAGS,
    ARCTIC_DISCONNECT_BAD_FRAME_LENGTH,
    ARCTIC_DISCONNECT_UNEXPECTED_FRAME, /* e.g. a second HELLO, a WELCOME */
    ARCTIC_DISCONNECT_CREDIT_OVERRUN,   /* more PACKETs than credits granted */
    ARCTIC_DISCONNECT_CREDIT_OVERFLOW,  /* CREDIT frames beyond any window */
    ARCTIC_DISCONNECT_HANDSHAKE_TIMEOUT,
    ARCTIC_DISCONNECT_IO_ERROR,
    ARCTIC_DISCONNECT_SHUTDOWN,         /* the switch is stopping */
    ARCTIC_DISCONNECT_EVICTED,          /* pending, closed to make room */
    ARCTIC_DISCONNECT_BROKEN_RING,      /* impossible shared-ring indices */
    /* a timed link's clock went backwards, or beyond its grant, or it
     * flooded the switch with packets (docs/timed-mode.md) */
    ARCTIC_DISCONNECT_TIME_PROTOCOL,
    /* a timed link left more unread than any honest NIU can (timed.c) */
    ARCTIC_DISCONNECT_NOT_READING,
    ARCTIC_DISCONNECT_REASONS
};

/* Probabilities of each fault on packets delivered to one port at one
 * priority (docs/network.md, "Fault injection"). */
struct arctic_fault_params {
    double drop;
    double duplicate;
    double corrupt;
    double delay;
    uint32_t delay_us;          /* how long a delayed packet is held */
};

enum {
    ARCTIC_SWITCH_DEFAULT_ROUTER_BUFFERS = 4,
    ARCTIC_SWITCH_DEFAULT_HOP_LATENCY_NS = 200,
    ARCTIC_SWITCH_DEFAULT_DELAY_US = 1000,
    ARCTIC_SWITCH_DEFAULT_HANDSHAKE_TIMEOUT_MS = 10000,
    ARCTIC_SWITCH_DEFAULT_CREDIT_DELAY_US = 500,
    ARCTIC_LATENCY_BUCKETS = 24,    /* [0,1us), [1,2us), ... [2^22us, inf) */
    ARCTIC_SWITCH_MAX_CREDITS = ARCTIC_LINK_MAX_CREDITS,
};
#define ARCTIC_SWITCH_DEFAULT_LINK_MBYTES 160.0

typedef struct {
    const char *socket_path;    /* UNIX listener, or NULL */
    const char *tcp_address;    /* "host:port" listener, or NULL */
    /*
     * The cluster's secret (arctic/link.h, link 1.3): every NIU that
     * joins must prove it knows it, and the switch proves it too.  A TCP
     * listener needs one unless @tcp_open says anyone who reaches the
     * port may join.
     */
    const uint8_t *secret;
    size_t secret_len;
    bool tcp_open;
    const char *pcap_path;      /* capture file, or NULL */
    /* Where control clients' captures go (pcap-start), or NULL: none. */
    const char *pcap_dir;
    unsigned ports;             /* 1..ARCTIC_LINK_MAX_NODES */
    unsigned levels;            /* 0: arctic_tree_levels(ports) */
    unsigned credits;           /* granted to each NIU per priority */
    unsigned router_buffers;    /* buffers per router input, >= 2 */
    bool timing;                /* link bandwidth and hop latency model */
    double link_mbytes_per_s;
    unsigned hop_latency_ns;
    uint64_t seed;              /* faults and random up-routes */
    unsigned handshake_timeout_ms;
    /* Credits freed for an NIU wait this long for a frame going to it
     * anyway before a CREDIT frame goes alone (0: at once). */
    unsigned credit_delay_us;
    /* Take the shared-memory rings an NIU offers on the UNIX socket
     * (arctic/link-ring.h); false: every link stays on its socket. */
    bool rings;
    /* With rings: one wake-up thread per CPU, whose eventfds the WELCOME
     * hands to the NIUs (arctic/link-ring.h, link 1.2). */
    bool cpu_wake;
    /*
     * Link 1.5: join NIUs of this host that take them with direct rings
     * (switch/direct.c), while nothing needs the switch to see every
     * packet (no faults, capture or timing model).
     */
    bool direct;
    bool verbose;               /* log connects and disconnects */
    /*
     * Timed mode (docs/timed-mode.md): the NIUs keep the cluster's
     * virtual time and the switch computes each packet's delivery time
     * with the model of arctic/timing.h: the link rate above, and these.
     */
    bool timed;
    unsigned time_hop_ns;       /* through one router */
    unsigned time_wire_ns;      /* an NIU's cable to its leaf router */
    unsigned time_buffers;      /* per input section, one for high; >= 2 */
} ArcticSwitchConfig;

/* Counters of one port at one priority. */
struct arctic_port_prio_stats {
    uint64_t rx_packets;        /* PACKET frames from the NIU (good or bad) */
    uint64_t rx_bytes;
    uint64_t tx_packets;        /* PACKET frames to the NIU, copies included */
    uint64_t tx_bytes;
    uint64_t tx_credit_stalls;  /* packets that waited for the NIU's credit */
    uint64_t rx_credit_exhausted; /* times the NIU used its last credit */
    uint64_t network_stalls;    /* hops where a packet from this port waited
                                   for a router buffer */
    uint64_t drops[ARCTIC_DROP_REASONS];
    uint64_t duplicated, corrupted, delayed;
    unsigned ingress_depth;     /* packets now in this port's input buffer */
    unsigned egress_depth;      /* packets now waiting to be sent to it */
    unsigned ingress_depth_max;
    /*
     * Of rx_packets, those the NIU wrote into direct rings (link 1.5),
     * which no router saw; of tx_packets, those it read from them.
     */
    uint64_t direct_packets;
    uint64_t direct_in_packets;
};

struct arctic_port_stats {
    struct arctic_port_prio_stats prio[ARCTIC_NUM_PRIORITIES];
    uint64_t connects;
    uint64_t disconnects[ARCTIC_DISCONNECT_REASONS];
    bool connected;
    bool rings;                 /* its link uses shared-memory rings */
    /* Times its NIU kicked the switch far more than the rings asked for,
     * and its wake-ups were ignored for a while (a flood). */
    uint64_t kick_floods;
    /* Timed mode: where its clock is, and whether it waits for a grant. */
    uint64_t time_reached, time_granted, time_promise;
    bool time_waiting;
    uint64_t time_syncs;
};

/*
 * The packet that has been in the network longest at one priority, where
 * it is, and what it waits for: the chain of full buffers ahead of it down
 * to what holds them up (an NIU that gives no credit or does not read its
 * socket), as text for people.
 */
struct arctic_oldest_packet {
    bool present;
    uint64_t age_ns;            /* since it entered the switch */
    unsigned src, dst;
    char *where;                /* "router 2.5 input 3, 2 packet(s) ahead" */
    /* "router 1.8 input 3: 4 high + 0 low of 4; port 16: 0 credit(s), ..." */
    char *waits_for;
};

typedef struct {
    unsigned ports, levels, routers;
    uint64_t uptime_ns;
    struct arctic_port_stats *port;     /* [ports] */
    /* Connections that ended before they held a port. */
    uint64_t unattached_disconnects[ARCTIC_DISCONNECT_REASONS];
    uint64_t latency[ARCTIC_NUM_PRIORITIES][ARCTIC_LATENCY_BUCKETS];
    uint64_t router_stalls;
    uint64_t packets_in_use, packets_in_use_max, packet_bound;
    /* Per-CPU wake-up threads (link 1.2): how many, and how often each
     * was kicked awake. */
    unsigned cpu_wakers;
    uint64_t cpu_wakeups[ARCTIC_CPU_WAKE_MAX];
    uint64_t cpu_handovers;     /* kicks served by the thread that held
                                   the model lock (loop.c) */
    uint64_t refused_no_fd;     /* connections closed at once: the switch
                                   was out of descriptors */
    uint64_t auth_failures;     /* NIUs that did not prove the secret */
    /* Timed mode: whether the clock started, and totals since. */
    bool timed, time_started;
    uint64_t time_lookahead_ns;
    uint64_t time_syncs, time_grants, time_packets, time_deliveries;
    struct arctic_oldest_packet oldest[ARCTIC_NUM_PRIORITIES];
} ArcticSwitchStats;

void arctic_switch_config_init(ArcticSwitchConfig *config);
/* Check the configuration, build the tree and open the sockets. */
ArcticSwitch *arctic_switch_new(const ArcticSwitchConfig *config,
                                GError **errp);
/* Run the event loop until arctic_switch_stop(). */
void arctic_switch_run(ArcticSwitch *sw);
/* Ask the loop to return; async-signal-safe, any thread. */
void arctic_switch_stop(ArcticSwitch *sw);
/* The TCP port the switch listens on (useful with "host:0"), or -1. */
int arctic_switch_tcp_port(ArcticSwitch *sw);
/* Close every connection and socket and free everything. */
void arctic_switch_free(ArcticSwitch *sw);

/* Run @fn inside the switch loop and wait for it (or directly when the
 * loop is not running).  Tests read and change state through this. */
void arctic_switch_invoke(ArcticSwitch *sw,
                          void (*fn)(ArcticSwitch *sw, void *opaque),
                          void *opaque);

/* Serve an already connected stream socket as an NIU link (loop thread,
 * or before the loop runs).  The switch owns @fd from now on. */
void arctic_switch_adopt_fd(ArcticSwitch *sw, int fd);

/* Set faults of @port (-1: every port) at @priority (-1: both).  Loop
 * thread or before the loop; the control socket uses it too. */
bool arctic_switch_set_faults(ArcticSwitch *sw, int port, int priority,
                              const struct arctic_fault_params *params,
                              GError **errp);
void arctic_switch_get_faults(ArcticSwitch *sw, unsigned port,
                              unsigned priority,
                              struct arctic_fault_params *params);
/* Restart every fault and route random stream from @seed. */
void arctic_switch_reseed(ArcticSwitch *sw, uint64_t seed);

/* Parse "PORT[:PRIO]:key=value,..." (docs/switch.md); PORT may be "*",
 * PRIO "low", "high" or "both".  Keys not given are 0 (delay-us: default). */
bool arctic_fault_spec_parse(const char *spec, int *port, int *priority,
                             struct arctic_fault_params *params,
                             GError **errp);

/* Start or stop the pcap capture (loop thread or before the loop). */
bool arctic_switch_pcap_open(ArcticSwitch *sw, const char *path,
                             GError **errp);
/* Start a capture into @name, a new plain file in config.pcap_dir (what
 * a control client may ask for): anything else is refused, and the
 * capture running, if any, goes on. */
bool arctic_switch_pcap_open_in_dir(ArcticSwitch *sw, const char *name,
                                    GError **errp);
void arctic_switch_pcap_close(ArcticSwitch *sw);

/*
 * The JSON control socket (docs/switch.md), on top of a switch: listens
 * at @path and serves its clients in the switch loop.  Create it before
 * arctic_switch_run(); free it after the loop has returned and before
 * arctic_switch_free().
 */
typedef struct ArcticSwitchControl ArcticSwitchControl;
ArcticSwitchControl *arctic_switch_control_new(ArcticSwitch *sw,
                                               const char *path,
                                               GError **errp);
void arctic_switch_control_free(ArcticSwitchControl *ctl);

/* Copy of every counter; safe from any thread. */
ArcticSwitchStats *arctic_switch_stats_snapshot(ArcticSwitch *sw);
void arctic_switch_stats_free(ArcticSwitchStats *stats);
void arctic_switch_stats_reset(ArcticSwitch *sw);   /* loop thread */
/* Human-readable summary (what arctic-switch prints on exit). */
void arctic_switch_stats_print(const ArcticSwitchStats *stats, FILE *out);
/* The "stats" reply of the control socket, as a JSON text. */
char *arctic_switch_stats_to_json(const ArcticSwitchStats *stats);

const char *arctic_drop_reason_name(enum arctic_drop_reason reason);
const char *arctic_disconnect_reason_name(enum arctic_disconnect_reason r);

#endif /* ARCTIC_SWITCH_H */
