/* SPDX-License-Identifier: MIT */
/*
 * State shared by the files of libarcticswitch: packets and the queues they
 * move through, the routers of the fat tree, the switch ports with their
 * NIU connections, and the switch itself.  Everything here is owned by the
 * thread that holds the loop's model lock: the loop thread, or a per-CPU
 * wake-up thread serving a kick (loop.c); see switch.h for the thread
 * rules.
 */
#ifndef ARCTIC_SWITCH_INTERNAL_H
#define ARCTIC_SWITCH_INTERNAL_H

#include <stdint.h>
#include <linux/futex.h>

#include "arctic/link-ring.h"
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
    /*
     * Connections a listener accepts per loop turn (core.c).  Each costs
     * the switch some ten system calls (accept, watch, challenge, and the
     * eviction of another), so this is a flood's share of a turn: at 4,
     * an established link kept a quarter to a half of its packets beside
     * a flood of 40 k connections a second, at 16 about a tenth; honest
     * joins still go at 4 a turn, a turn being microseconds when idle.
     * Far fewer than SW_MAX_PENDING_CONNECTIONS, so that a connection
     * accepted in one turn has its HELLO read in the next before newer
     * ones could push it out.
     */
    SW_ACCEPT_PER_TURN = 4,
    SW_ROUTER_INPUTS = ARCTIC_ROUTER_PORTS,
    SW_NO_PORT = 0xffff,
    /* Descriptors one message can carry (the kernel's SCM_MAX_FD). */
    SW_FDS_MAX = 253,
    /*
     * Futexes a per-CPU thread waits on at once (the kernel's
     * FUTEX_WAITV_MAX): its control word and the kick counters of at
     * most SW_CPU_WAIT_MAX - 1 links; the links beyond get no CPU_WAKE
     * and kick their ring's socket instead.
     */
    SW_CPU_WAIT_MAX = 128,
    /*
     * Kicks beyond those the switch asked for (its sleep and wait flags,
     * port.c) that a link may send before its wake-up sockets are
     * ignored for SW_KICK_MUTE_MS: a flood of kicks costs the switch a
     * system call per kick, not a core.
     */
    SW_KICK_SLACK = 64,
    SW_KICK_MUTE_MS = 20,
    /* A listener out of descriptors rests this long (core.c). */
    SW_LISTEN_PAUSE_MS = 100,
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
    SW_CONN_HANDSHAKE,          /* waiting for HELLO */
    SW_CONN_AUTH,               /* challenged, waiting for AUTH_RESPONSE */
    SW_CONN_LIVE,
    SW_CONN_CLOSING,
};

/*
 * A descriptor the loop watches (loop.c): its events go to @ready, with
 * @object, in the loop thread.
 */
struct sw_watch {
    void (*ready)(ArcticSwitch *sw, void *object, uint32_t events);
    void *object;
};

/* The event loop's own state (loop.c). */
struct sw_loop {
    int epoll_fd;
    int wakeup_fd;                  /* eventfd: stop and invoke */
    int timer_fd;
    struct sw_watch wakeup_watch, timer_watch;
    uint64_t timer_armed_ns;        /* 0: disarmed */
    volatile int stop_requested;
    int running;                    /* under invoke_lock: in run() */
    GThread *thread;
    GMutex invoke_lock;
    GCond invoke_done;
    GQueue invoke_queue;
    /*
     * The owner's hooks: the timer fired; a batch of events was served;
     * may the loop sleep until an event comes (false: work waits where
     * no descriptor announces it, e.g. in a shared ring)?
     */
    void (*on_timer)(ArcticSwitch *sw);
    void (*after_batch)(ArcticSwitch *sw);
    bool (*may_sleep)(ArcticSwitch *sw);
    /* A per-CPU wake-up thread was kicked: serve every ring (a kick may
     * also mean room), as after a batch, but free nothing. */
    void (*on_kick)(ArcticSwitch *sw);
    /* Give CPU @cpu's thread its set of kick counters anew (values now:
     * sw_loop_cpu_wait_on()). */
    void (*on_cpu_wait)(ArcticSwitch *sw, unsigned cpu);
    /*
     * The switch's state is owned by whichever thread holds @model_lock:
     * the loop thread, which drops it only to sleep, or a per-CPU wake-up
     * thread serving a kick (arctic/link-ring.h, link 1.2).  The eventfds
     * live as long as the switch, the threads while run() runs.
     */
    GMutex model_lock;
    unsigned cpu_wakers;                    /* 0: none */
    /* [i]: what CPU i's thread waits on (loop.c) */
    struct sw_cpu_waiter {
        GMutex lock;                /* for the set's copy, held briefly */
        struct futex_waitv vec[SW_CPU_WAIT_MAX];  /* [0]: control */
        unsigned n;
        uint32_t control;           /* futex: a new set, or stop */
        /* Atomic: the link's word whose FUTEX_WAKE woke the thread (0:
         * none since the owner looked: sw_loop_cpu_woken_by()). */
        uintptr_t woken_by;
    } cpu[ARCTIC_CPU_WAKE_MAX];
    /*
     * Atomic [i]: CPU i's thread left its kick to the lock's holder,
     * which takes its counters again (on_cpu_wait) before it serves.
     */
    int cpu_left[ARCTIC_CPU_WAKE_MAX];
    GThread *cpu_thread[ARCTIC_CPU_WAKE_MAX];
    int cpu_stop;                           /* atomic: the threads end */
    /* Atomic: each CPU's thread counts its own wake-ups. */
    uint64_t cpu_wakeups[ARCTIC_CPU_WAKE_MAX];
    /* Atomic: a kick waits to be served (cpu_wake_serve()). */
    int kick_pending;
    /* Atomic: kicks their thread left to the lock's holder. */
    uint64_t cpu_handovers;
    /* Atomic: the loop thread waits for the model lock (loop.c). */
    int loop_waiting;
};

/*
 * A connection's shared-memory rings (arctic/link-ring.h), once its
 * WELCOME took them: every frame after it goes through them.  Its wake-up
 * socket pair is this link's alone: kicks both ways on @wake_fd; the
 * NIU's kicks of CPU i's thread raise kicks.cpu[i] in the area.
 */
/* One of a link's wake-up sockets in an epoll set (port.c). */
struct sw_wake_watch {
    struct sw_watch watch;
    struct sw_conn *conn;
    int fd;
};

struct sw_rings {
    void *area;
    size_t area_size;
    struct arctic_ring in;      /* ARCTIC_RING_TO_SWITCH, we consume */
    struct arctic_ring out;     /* ARCTIC_RING_TO_NIU, we produce */
    int wake_fd;                /* our end of the NIU's wake-up pair */
    struct sw_wake_watch watch; /* wake_fd in the loop's set */
    bool watched;               /* and the CPU threads' sets */
    bool cpu_wake;              /* the WELCOME said CPU_WAKE */
    uint32_t cpu_seen[ARCTIC_CPU_WAKE_MAX];     /* kicks.cpu[] counted */
    /*
     * Kicks the NIU sent, and those the switch asked for (each sleep or
     * wait flag it set that the NIU took back, which an NIU does only to
     * kick): more than SW_KICK_SLACK beyond is a flood, and the link is
     * not listened to until @muted_until_ns.  @sleep_set, @wait_set: the
     * switch set its flag in the ring in, out, since it last looked.
     * @bare_wakes: a CPU thread woken by one of its counters that had not
     * risen (a FUTEX_WAKE alone); more than SW_KICK_SLACK beyond @kicks
     * (each kick can cause one, when the switch counted it before its
     * wake-up came) is a flood too.
     */
    uint64_t kicks, invited, bare_wakes;
    bool sleep_set, wait_set;
    uint64_t muted_until_ns;    /* 0: watched */
};

struct sw_conn {
    struct sw_watch watch;
    int fd;
    enum sw_conn_state state;
    int port;                   /* attached port, or -1 */
    uint64_t peer;              /* its process or host (port.c), 0: unknown */
    uint64_t handshake_deadline_ns;
    struct arctic_frame_reader reader;  /* a frame split between reads */
    uint8_t *output;
    size_t output_start, output_end;
    bool polling_out;
    bool flush_queued;
    /* Descriptors the HELLO brought (ARCTIC_RING_FDS of them, or none). */
    int offered_fds[ARCTIC_RING_FDS];
    unsigned offered;
    unsigned hello_minor;       /* the link version the HELLO said */
    /* SW_CONN_AUTH: the HELLO answered with a challenge, and its nonce */
    uint8_t hello_body[ARCTIC_HELLO_SIZE];
    uint8_t nonce[ARCTIC_AUTH_NONCE_SIZE];
    uint16_t hello_flags;       /* ARCTIC_HELLO_FLAGS */
    struct sw_rings *rings;     /* NULL: the link is on the socket */
    bool direct;                /* the WELCOME said DIRECT (link 1.5) */
    bool waiting_room;          /* output waits for room in rings->out */
    /* Why conn_send() failed (an I/O error, or a broken ring). */
    enum arctic_disconnect_reason send_failure;
    struct sw_conn *next_flush;
    struct sw_conn *prev, *next;  /* all connections */
};

struct sw_fault_state {
    struct arctic_fault_params params;
    GRand *rand;
    bool active;
};

/*
 * The NIU link of a port, both directions (port.c): the connection, the
 * credits each side holds, and when the NIU last spoke.
 */
struct sw_link {
    struct sw_conn *conn;
    /* Credits the NIU granted us, per priority. */
    unsigned egress_credits[ARCTIC_NUM_PRIORITIES];
    /* Credits the NIU holds from us, and those freed but not yet sent. */
    unsigned ingress_credits[ARCTIC_NUM_PRIORITIES];
    unsigned credit_return_pending[ARCTIC_NUM_PRIORITIES];
    /*
     * Packets of this NIU handed to the router whose buffers are not free
     * yet, whatever connection sent them: a new connection is granted the
     * rest of the window.
     */
    unsigned ingress_held[ARCTIC_NUM_PRIORITIES];
    uint64_t credit_due_ns;     /* pending credits go alone then; 0 none */
    /*
     * When the NIU last sent a frame and a CREDIT frame (0: not since it
     * attached), for the stats' account of what a packet waits for.
     */
    uint64_t last_frame_ns, last_credit_ns;
};

struct sw_port {
    struct sw_link link;                /* port.c */
    struct sw_router *leaf;             /* router.c, from here down */
    unsigned leaf_input;
    struct sw_queue delay_line[ARCTIC_NUM_PRIORITIES];
    struct sw_fault_state fault[ARCTIC_NUM_PRIORITIES];
    struct arctic_port_stats stats;     /* both */
};

/*
 * What a port reports to the layer above it (router.c's
 * sw_router_port_ops, or timed.c's sw_timed_port_ops with --timed; core.c
 * chooses), as the NIU's own link reports to the device through NiuLinkOps
 * (hw/net/arctic-niu).
 */
struct sw_port_ops {
    /* A PACKET frame, its credit taken; the buffer is freed by
     * sw_port_credit_freed().  Unused when @frame is set. */
    void (*packet)(ArcticSwitch *sw, unsigned port_no, unsigned prio,
                   const uint8_t *bytes, size_t size);
    /* The NIU gave credits or its socket drained: sending may resume. */
    void (*ready)(ArcticSwitch *sw, unsigned port_no);
    /* The NIU is gone (its link state is reset already). */
    void (*detached)(ArcticSwitch *sw, unsigned port_no);
    /*
     * Optional.  Every frame of a live link, which the layer above reads
     * itself (timed mode's TIME_SYNC and TIMED_PACKET, on a link without
     * credits); the port then neither counts credits nor calls @packet.
     */
    void (*frame)(ArcticSwitch *sw, unsigned port_no,
                  const struct arctic_frame_header *h, const uint8_t *body);
    /*
     * Optional.  Why the NIU of @port_no may not join now (its HELLO is
     * answered REJECT TIMING), or NULL: timed mode's clock has started.
     */
    const char *(*refuses)(const ArcticSwitch *sw, unsigned port_no);
};

/*
 * What the layers below tell a layer above them that is not theirs to
 * know: direct rings (direct.c's sw_direct_hooks, which core.c copies in
 * with --direct).  Each entry may be NULL: nobody listens.
 */
struct sw_hooks {
    /* A valid packet from @src to @dst entered the routers (router.c). */
    void (*routed)(ArcticSwitch *sw, unsigned src, unsigned dst);
    /* The NIU of @port is gone, before the port's ops hear of it
     * (port.c). */
    void (*port_down)(ArcticSwitch *sw, unsigned port);
    /*
     * Fault injection or the capture was turned on or off (faults.c,
     * pcap.c): whether every packet must cross the routers may have
     * changed.
     */
    void (*watching_changed)(ArcticSwitch *sw);
    /* The counters were reset (stats.c). */
    void (*stats_reset)(ArcticSwitch *sw);
};

struct ArcticSwitch {
    ArcticSwitchConfig config;
    char *socket_path, *tcp_address;
    GBytes *secret;                 /* the cluster's key, or NULL */
    unsigned ports, levels, routers_per_level;
    struct sw_router *routers;      /* [levels][routers_per_level] */
    struct sw_port *port;
    uint64_t seed;
    GRand *route_rand;
    double ns_per_byte;

    struct sw_loop loop;            /* loop.c */
    uint64_t now_ns, start_ns;      /* now_ns: the loop's batch clock */

    /* core.c: the listening sockets */
    int unix_listen_fd, tcp_listen_fd;
    int reserve_fd;                 /* for accept() out of descriptors */
    /* Listeners not watched until paused_until_ns (sw_listener_pause()) */
    int paused_fd[4];
    struct sw_watch *paused_watch[4];
    unsigned paused;
    uint64_t paused_until_ns;
    uint64_t refused_no_fd;
    uint64_t auth_failures;         /* AUTH_RESPONSEs that proved nothing */
    struct sw_watch unix_watch, tcp_watch;

    /* port.c: the connections and how ports report upward */
    const struct sw_port_ops *port_ops;
    /* What the layers below tell direct rings (core.c fills it in). */
    struct sw_hooks hooks;
    uint8_t *read_buf;              /* SW_CONN_INPUT_BUFFER: one recv() */
    struct sw_conn *conns;
    struct sw_conn *graveyard;      /* closed, freed after the event batch */
    unsigned pending_conns;
    unsigned cpu_wake_links;        /* links whose WELCOME said CPU_WAKE */
    struct sw_conn *flush_list;

    /* router.c */
    struct sw_router *dirty_list;
    struct sw_packet *free_packets;
    uint64_t packets_in_use, packets_in_use_max, packets_allocated;
    uint64_t packet_bound;

    /* counters: port.c and router.c count, stats.c names them */
    uint64_t unattached_disconnects[ARCTIC_DISCONNECT_REASONS];
    uint64_t latency[ARCTIC_NUM_PRIORITIES][ARCTIC_LATENCY_BUCKETS];

    /* timed.c (config.timed) */
    struct sw_timed *timed;

    /* direct.c: [src * ports + dst], NULL without --direct */
    struct sw_direct_pair **direct_pairs;
    unsigned direct_live;           /* pairs made and not taken back */
    bool direct_open;               /* pairs may be made (direct.c) */
    struct sw_direct_port *direct_port; /* [port]: its pairs, its socket */

    /* pcap.c */
    FILE *pcap;
    uint64_t pcap_time;             /* timed: the virtual time to record */
    char *pcap_path;
    char *pcap_dir;                 /* config.pcap_dir, or NULL */
    int pcap_dir_fd;                /* open while pcap_dir is set */
};

/* loop.c */
uint64_t sw_clock_ns(void);
void sw_log(ArcticSwitch *sw, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
bool sw_loop_init(ArcticSwitch *sw, void (*on_timer)(ArcticSwitch *sw),
                  void (*after_batch)(ArcticSwitch *sw),
                  bool (*may_sleep)(ArcticSwitch *sw),
                  void (*on_kick)(ArcticSwitch *sw),
                  void (*on_cpu_wait)(ArcticSwitch *sw, unsigned cpu),
                  GError **errp);
void sw_loop_cleanup(ArcticSwitch *sw);
void sw_loop_watch(ArcticSwitch *sw, int fd, struct sw_watch *watch,
                   uint32_t events);
void sw_loop_rewatch(ArcticSwitch *sw, int fd, struct sw_watch *watch,
                     uint32_t events);
void sw_loop_unwatch(ArcticSwitch *sw, int fd);
void sw_arm_timer(ArcticSwitch *sw, uint64_t deadline_ns);
unsigned sw_loop_cpu_wakers(const ArcticSwitch *sw);
void sw_loop_cpu_wait_on(ArcticSwitch *sw, unsigned cpu,
                         uint32_t *const *words, unsigned n);
uint32_t *sw_loop_cpu_woken_by(ArcticSwitch *sw, unsigned cpu);
/* A kick and the model lock (loop.c): serve it, or leave it to the holder. */
bool sw_kick_claim(struct sw_loop *loop);
bool sw_kick_release(struct sw_loop *loop);
void sw_loop_serve_kick(ArcticSwitch *sw, int self_cpu);

/* unixfd.c: descriptors over UNIX sockets, wake-up kicks */
ssize_t sw_send_fds(int fd, const void *buf, size_t len, const int *fds,
                    unsigned n_fds);
ssize_t sw_recv_fds(int fd, void *buf, size_t len, int *fds,
                    unsigned max_fds, unsigned *n_fds);
bool sw_wake_pair(int fds[2]);
bool sw_is_wake_socket(int fd);
void sw_kick(int fd);
int sw_drain(int fd);


/* port.c */
struct sw_conn *sw_conn_new(ArcticSwitch *sw, int fd);
size_t sw_port_write(ArcticSwitch *sw, unsigned port_no, const uint8_t *data,
                     size_t len);
void sw_port_drop(ArcticSwitch *sw, unsigned port_no,
                  enum arctic_disconnect_reason reason);
void sw_conn_feed(ArcticSwitch *sw, struct sw_conn *conn, const uint8_t *data,
                  size_t len);
void sw_conn_close(ArcticSwitch *sw, struct sw_conn *conn,
                   enum arctic_disconnect_reason reason);
void sw_port_close_all(ArcticSwitch *sw);
bool sw_port_live(const ArcticSwitch *sw, unsigned port_no);
bool sw_port_can_send(const ArcticSwitch *sw, unsigned port_no,
                      unsigned prio, size_t size);
void sw_port_send(ArcticSwitch *sw, unsigned port_no, unsigned prio,
                  const uint8_t *bytes, size_t size);
void sw_port_credit_freed(ArcticSwitch *sw, unsigned port_no, unsigned prio);
void sw_port_describe(const ArcticSwitch *sw, unsigned port_no,
                      unsigned prio, size_t size, uint64_t now_ns,
                      GString *s);
void sw_port_timer(ArcticSwitch *sw);
void sw_port_flush(ArcticSwitch *sw);
void sw_port_bury_closed(ArcticSwitch *sw);
bool sw_port_uses_rings(const ArcticSwitch *sw, unsigned port_no);
void sw_port_read_rings(ArcticSwitch *sw);
void sw_conn_kick_niu(struct sw_conn *conn);
void sw_port_rings_kicked(ArcticSwitch *sw);
void sw_port_cpu_wait(ArcticSwitch *sw, unsigned cpu);
bool sw_port_may_sleep(ArcticSwitch *sw);

/* router.c */
extern const struct sw_port_ops sw_router_port_ops;
int sw_packet_check(const ArcticSwitch *sw, unsigned port_no,
                    const uint8_t *bytes, size_t size, unsigned *dst);
void sw_packet_route(struct sw_packet *p);
unsigned sw_route_output(ArcticSwitch *sw, const struct sw_router *router,
                         unsigned input, const struct sw_packet *p);
bool sw_tree_init(ArcticSwitch *sw, GError **errp);
void sw_tree_free(ArcticSwitch *sw);
bool sw_route_destination(const ArcticSwitch *sw, unsigned src, uint32_t w0,
                          uint32_t w1, unsigned *dst);
void sw_schedule(ArcticSwitch *sw);
bool sw_schedule_pending(const ArcticSwitch *sw);
void sw_router_timer(ArcticSwitch *sw);
unsigned sw_port_egress_depth(const ArcticSwitch *sw, unsigned port_no,
                              unsigned priority);
unsigned sw_port_ingress_depth(const ArcticSwitch *sw, unsigned port_no,
                               unsigned priority);
void sw_find_oldest(ArcticSwitch *sw, uint64_t now_ns,
                    struct arctic_oldest_packet *oldest);
struct sw_packet *sw_packet_alloc(ArcticSwitch *sw);
void sw_packet_free(ArcticSwitch *sw, struct sw_packet *packet);

/* direct.c: direct rings (link 1.5), told by the layers below through
 * sw->hooks */
extern const struct sw_hooks sw_direct_hooks;
void sw_direct_init(ArcticSwitch *sw);
void sw_direct_cleanup(ArcticSwitch *sw);
void sw_direct_stats(ArcticSwitch *sw, struct arctic_port_stats *st);
void sw_direct_timer(ArcticSwitch *sw);

/* timed.c: the timed mode's network (docs/timed-mode.md) */
extern const struct sw_port_ops sw_timed_port_ops;
void sw_timed_init(ArcticSwitch *sw);
void sw_timed_free(ArcticSwitch *sw);
void sw_timed_stats(ArcticSwitch *sw, ArcticSwitchStats *st);

/* faults.c */
/*
 * The fault settings by name: --fault and arctic-ctl set-faults take the
 * same names (and the same second spellings).
 */
enum sw_fault_key {
    SW_FAULT_KEY_NONE,
    SW_FAULT_KEY_DROP,
    SW_FAULT_KEY_DUPLICATE,
    SW_FAULT_KEY_CORRUPT,
    SW_FAULT_KEY_DELAY,
    SW_FAULT_KEY_DELAY_US,
    SW_FAULT_KEY_COUNT,
};
#define SW_FAULT_KEYS \
    "drop, duplicate (or dup), corrupt, delay (or reorder), " \
    "delay_us (or delay-us)"
#define SW_FAULT_MAX_DELAY_US 10000000
enum sw_fault_key sw_fault_key(const char *name);
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
/* Open config.pcap_dir once, at start: control clients' captures go there
 * whatever later happens to the path. */
bool sw_pcap_dir_open(ArcticSwitch *sw, const char *dir, GError **errp);
void sw_pcap_dir_close(ArcticSwitch *sw);

/* stats.c */
void sw_stats_latency(ArcticSwitch *sw, unsigned priority, uint64_t ns);
void sw_count_drop(ArcticSwitch *sw, unsigned port_no, unsigned priority,
                   enum arctic_drop_reason reason);
const char *sw_priority_name(unsigned priority);

/* core.c */
int sw_unix_listen(const char *path, GError **errp);
int sw_accept(ArcticSwitch *sw, int listen_fd, struct sw_watch *watch);
void sw_listener_pause(ArcticSwitch *sw, int fd, struct sw_watch *watch);
void sw_listener_forget(ArcticSwitch *sw, int fd);
void sw_flush_all(ArcticSwitch *sw);

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
