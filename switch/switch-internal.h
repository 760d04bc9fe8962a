/* SPDX-License-Identifier: MIT */
/*
 * State shared by the files of libarcticswitch: packets and the queues they
 * move through, the routers of the fat tree, the switch ports with their
 * NIU connections, and the switch itself.  Everything here is owned by the
 * loop thread; see switch.h for the thread rules.
 */
#ifndef ARCTIC_SWITCH_INTERNAL_H
#define ARCTIC_SWITCH_INTERNAL_H

#include <stdint.h>

#include "switch.h"

enum {
    /* Per-connection byte buffers.  A recv() fills as much of the input
     * buffer as the socket holds, which is what batches 100s of frames per
     * system call; the output buffer is bounded too, so an NIU that stops
     * reading its socket back-pressures the tree like one that withholds
     * credits. */
    SW_CONN_INPUT_BUFFER = 32768,   /* bytes taken per recv() */
    SW_CONN_OUTPUT_BUFFER = 32768,
    SW_FRAME_MAX = ARCTIC_LINK_HEADER_SIZE + ARCTIC_LINK_MAX_BODY,
    SW_PACKET_FRAME_MAX = ARCTIC_LINK_HEADER_SIZE + ARCTIC_WIRE_MAX_SIZE,
    SW_CREDIT_FRAME = ARCTIC_LINK_HEADER_SIZE + ARCTIC_CREDIT_SIZE,
    /* Packets one port and priority may hold in the delay line. */
    SW_DELAY_LINE_MAX = 64,
    /* Connections not yet attached to a port, beyond which accept()ed
     * sockets are closed at once. */
    SW_MAX_PENDING_CONNECTIONS = 64,
    SW_ROUTER_INPUTS = ARCTIC_ROUTER_PORTS,
    SW_NO_PORT = 0xffff,
};

/* Fault decisions taken once per packet, on its first delivery attempt. */
enum {
    SW_FAULT_DECIDED = 1 << 0,
    SW_FAULT_DROP = 1 << 1,
    SW_FAULT_CORRUPT = 1 << 2,
    SW_FAULT_DELAY = 1 << 3,
    SW_FAULT_CORRUPTED = 1 << 4,    /* the bit flip has been applied */
    SW_PACKET_STALL_COUNTED = 1 << 5,
    SW_PACKET_DELIVERED_ONCE = 1 << 6,
};

struct sw_packet {
    struct sw_packet *next;
    uint64_t ingress_ns;        /* for the latency histogram */
    uint64_t ready_ns;          /* timing model / delay line release */
    uint16_t src_port;
    uint16_t dst_port;          /* where the route bits lead */
    uint16_t size;              /* wire bytes */
    uint16_t downroute;
    uint16_t up_choice;
    uint8_t hops;
    uint8_t random_up;
    uint8_t priority;
    uint8_t out_port;           /* output wanted at the current router */
    uint8_t flags;
    uint8_t copies_left;        /* 2 when duplicated by a fault */
    uint16_t corrupt_bit;
    uint8_t bytes[ARCTIC_WIRE_MAX_SIZE];
};

struct sw_queue {
    struct sw_packet *head, *tail;
    unsigned count;
};

struct sw_router;

/* A router input: one FIFO per priority so high is never behind low. */
struct sw_input {
    struct sw_queue queue[ARCTIC_NUM_PRIORITIES];
    /* Internal links share @capacity buffers, the last one reserved for
     * high priority; an NIU's input has the per-priority buffers behind the
     * link credits it was granted instead (@node >= 0). */
    unsigned capacity;
    int node;
    struct sw_router *upstream;
    unsigned upstream_output;
};

struct sw_output {
    struct sw_router *next;     /* NULL: a node (or nothing, at the top) */
    unsigned next_input;
    int node;                   /* >= 0 for leaf down outputs */
    bool blocked;               /* a packet waits for credit or buffer room */
    uint64_t busy_until_ns;     /* timing model: link serialisation */
};

struct sw_router {
    unsigned level, index;
    struct sw_input in[SW_ROUTER_INPUTS];
    struct sw_output out[ARCTIC_ROUTER_PORTS];
    struct sw_router *next_dirty;
    bool dirty;
    unsigned round_robin;
    uint64_t wake_ns;           /* timing model: when to look again */
    uint64_t stalls;
};

enum sw_conn_state {
    SW_CONN_HANDSHAKE,
    SW_CONN_LIVE,
    SW_CONN_CLOSING,
};

struct sw_watch {
    enum {
        SW_WATCH_LISTENER,
        SW_WATCH_CONN,
        SW_WATCH_CONTROL_LISTENER,
        SW_WATCH_CONTROL_CLIENT,
        SW_WATCH_WAKEUP,
        SW_WATCH_TIMER,
    } kind;
    void *object;
};

struct sw_conn {
    struct sw_watch watch;
    int fd;
    enum sw_conn_state state;
    int port;                   /* attached port, or -1 */
    uint64_t handshake_deadline_ns;
    struct arctic_frame_reader reader;  /* a frame split between reads */
    uint8_t *output;
    size_t output_start, output_end;
    bool polling_out;
    bool flush_queued;
    struct sw_conn *next_flush;
    struct sw_conn *prev, *next;  /* all connections */
};

struct sw_fault_state {
    struct arctic_fault_params params;
    GRand *rand;
    bool active;
};

struct sw_port {
    struct sw_conn *conn;
    struct sw_router *leaf;
    unsigned leaf_input;
    /* Credits the NIU granted us, per priority. */
    unsigned egress_credits[ARCTIC_NUM_PRIORITIES];
    /* Credits the NIU holds from us, and those freed but not yet sent. */
    unsigned ingress_credits[ARCTIC_NUM_PRIORITIES];
    unsigned credit_return_pending[ARCTIC_NUM_PRIORITIES];
    uint64_t credit_due_ns;     /* pending credits go alone then; 0 none */
    /* When the NIU last sent a frame and a CREDIT frame (0: not since it
     * attached), for the stats' account of what a packet waits for. */
    uint64_t last_frame_ns, last_credit_ns;
    struct sw_queue delay_line[ARCTIC_NUM_PRIORITIES];
    struct sw_fault_state fault[ARCTIC_NUM_PRIORITIES];
    struct arctic_port_stats stats;
};

struct sw_control_client;

struct ArcticSwitch {
    ArcticSwitchConfig config;
    char *socket_path, *tcp_address, *control_path;
    unsigned ports, levels, routers_per_level;
    struct sw_router *routers;      /* [levels][routers_per_level] */
    struct sw_port *port;
    uint64_t seed;
    GRand *route_rand;
    double ns_per_byte;

    int epoll_fd;
    uint8_t *read_buf;              /* SW_CONN_INPUT_BUFFER: one recv() */
    int wakeup_fd;                  /* eventfd: stop and invoke */
    int timer_fd;
    int unix_listen_fd, tcp_listen_fd, control_listen_fd;
    struct sw_watch unix_watch, tcp_watch, control_watch, wakeup_watch,
                    timer_watch;
    volatile int stop_requested;
    int running;                    /* atomic: the loop is in run() */
    GThread *loop_thread;
    GMutex invoke_lock;
    GCond invoke_done;
    GQueue invoke_queue;

    uint64_t now_ns, start_ns;
    uint64_t timer_armed_ns;        /* 0: disarmed */

    struct sw_conn *conns;
    struct sw_conn *graveyard;      /* closed, freed after the event batch */
    unsigned pending_conns;
    struct sw_conn *flush_list;
    struct sw_router *dirty_list;
    GList *control_clients;

    struct sw_packet *free_packets;
    uint64_t packets_in_use, packets_in_use_max, packets_allocated;
    uint64_t packet_bound;

    uint64_t unattached_disconnects[ARCTIC_DISCONNECT_REASONS];
    uint64_t latency[ARCTIC_NUM_PRIORITIES][ARCTIC_LATENCY_BUCKETS];

    FILE *pcap;
    char *pcap_path;
};

/* core.c */
uint64_t sw_clock_ns(void);
void sw_conn_queue_flush(ArcticSwitch *sw, struct sw_conn *conn);
bool sw_conn_output_room(const struct sw_conn *conn, size_t bytes);
uint8_t *sw_conn_output_reserve(struct sw_conn *conn, size_t bytes);
size_t sw_conn_unread(const struct sw_conn *conn);
void sw_conn_input(ArcticSwitch *sw, struct sw_conn *conn);
void sw_conn_feed(ArcticSwitch *sw, struct sw_conn *conn, const uint8_t *data,
                  size_t len);
int sw_unix_listen(const char *path, GError **errp);
void sw_arm_timer(ArcticSwitch *sw, uint64_t deadline_ns);
void sw_flush_all(ArcticSwitch *sw);
struct sw_conn *sw_conn_new(ArcticSwitch *sw, int fd);
void sw_conn_close(ArcticSwitch *sw, struct sw_conn *conn,
                   enum arctic_disconnect_reason reason);

/* router.c */
bool sw_tree_init(ArcticSwitch *sw, GError **errp);
void sw_tree_free(ArcticSwitch *sw);
bool sw_route_destination(const ArcticSwitch *sw, unsigned src, uint32_t w0,
                          uint32_t w1, unsigned *dst);
void sw_ingress(ArcticSwitch *sw, unsigned port_no, unsigned prio,
                const uint8_t *bytes,
                size_t size);
void sw_schedule(ArcticSwitch *sw);
void sw_mark_dirty(ArcticSwitch *sw, struct sw_router *router);
void sw_port_egress_ready(ArcticSwitch *sw, unsigned port_no);
void sw_port_detach(ArcticSwitch *sw, unsigned port_no);
void sw_timer_expired(ArcticSwitch *sw);
unsigned sw_port_egress_depth(const ArcticSwitch *sw, unsigned port_no,
                              unsigned priority);
void sw_find_oldest(ArcticSwitch *sw, uint64_t now_ns,
                    struct arctic_oldest_packet *oldest);
struct sw_packet *sw_packet_alloc(ArcticSwitch *sw);
void sw_packet_free(ArcticSwitch *sw, struct sw_packet *packet);

/* faults.c */
void sw_faults_init(ArcticSwitch *sw);
void sw_faults_free(ArcticSwitch *sw);
void sw_fault_decide(ArcticSwitch *sw, unsigned port_no, unsigned priority,
                     struct sw_packet *packet);

/* pcap.c */
enum sw_pcap_event {
    SW_PCAP_INGRESS = 1,
    SW_PCAP_EGRESS = 2,
    SW_PCAP_DROP = 3,
};
enum {
    SW_PCAP_FLAG_CORRUPTED = 1 << 0,
    SW_PCAP_FLAG_DUPLICATE = 1 << 1,
    SW_PCAP_FLAG_DELAYED = 1 << 2,
};
void sw_pcap_record(ArcticSwitch *sw, enum sw_pcap_event event,
                    int drop_reason, unsigned flags, unsigned in_port,
                    unsigned out_port, const uint8_t *bytes, size_t size);

/* control.c */
bool sw_control_listen(ArcticSwitch *sw, GError **errp);
void sw_control_accept(ArcticSwitch *sw);
void sw_control_event(ArcticSwitch *sw, struct sw_control_client *client,
                      uint32_t events);
void sw_control_close_all(ArcticSwitch *sw);

/* stats.c (JsonBuilder is json-glib's; only its users include it) */
typedef struct _JsonBuilder JsonBuilder;
void sw_json_int(JsonBuilder *b, const char *name, gint64 value);
void sw_json_double(JsonBuilder *b, const char *name, double value);
void sw_json_string(JsonBuilder *b, const char *name, const char *value);
void sw_json_bool(JsonBuilder *b, const char *name, bool value);
void sw_stats_build_json(JsonBuilder *b, const ArcticSwitchStats *st);
void sw_stats_latency(ArcticSwitch *sw, unsigned priority, uint64_t ns);
void sw_count_drop(ArcticSwitch *sw, unsigned port_no, unsigned priority,
                   enum arctic_drop_reason reason);

static inline void sw_queue_push(struct sw_queue *q, struct sw_packet *p)
{
    p->next = NULL;
    if (q->tail) {
        q->tail->next = p;
    } else {
        q->head = p;
    }
    q->tail = p;
    q->count++;
}

static inline struct sw_packet *sw_queue_pop(struct sw_queue *q)
{
    struct sw_packet *p = q->head;

    if (p) {
        q->head = p->next;
        if (!q->head) {
            q->tail = NULL;
        }
        q->count--;
        p->next = NULL;
    }
    return p;
}

#endif /* ARCTIC_SWITCH_INTERNAL_H */
