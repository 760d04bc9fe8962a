/*
 * transport-proto.c - host-only benchmark of three inter-process packet
 * transports for the link between a QEMU device and a switch process.
 *
 * Topology (three processes forked from main):
 *     node A  ->  switch S  ->  node B  ->  switch S  ->  node A
 * Every packet is 64 bytes carried in a frame: an 8-byte header
 * (u16 type, u16 flags, u32 body length, little-endian) + body.  The switch
 * parses every frame and forwards it from its A port to its B port and back.
 * Every party sleeps in poll() when it has nothing to do.
 *
 * Transports:
 *   stream     AF_UNIX SOCK_STREAM, non-blocking, one write() carries every
 *              frame that is ready, reads of up to 64 KiB with reassembly.
 *   seqpacket  AF_UNIX SOCK_SEQPACKET, one record = one or more whole frames
 *              (up to 64 KiB), one recv() = one record.
 *   shm        per link and direction an SPSC byte ring in a memfd made by
 *              the switch and passed with SCM_RIGHTS, plus one eventfd per
 *              party; a producer kicks the consumer's eventfd only if the
 *              consumer said it is going to sleep.
 *
 * Build:  gcc -O2 -Wall -Wextra -pthread -o transport-proto transport-proto.c
 * Run:    ./transport-proto --help
 * Self-tests of the checks: build with -DINJECT_LOST_WAKEUP (shm drops one
 * eventfd kick in 5000: must end with a HANG report, exit 2) or with
 * -DINJECT_CORRUPT (the switch flips a byte: must end with exit 3).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>

/* ------------------------------------------------------------------ */
/* constants and global settings                                       */

enum { T_STREAM, T_SEQPACKET, T_SHM, T_COUNT };
static const char *const tnames[T_COUNT] = { "stream", "seqpacket", "shm" };

enum { M_RT, M_STREAM };

#define HDR_LEN   8u
#define PKT_LEN   64u
#define MAX_BODY  4096u
#define IO_CHUNK  65536u           /* read size / max seqpacket record  */
#define TX_LIMIT  (256u * 1024u)   /* switch stops reading above this   */
#define RING_HDR  256u
#define ACK_EVERY 16

enum { FR_DATA = 1, FR_ECHO = 2, FR_ACK = 3, FR_FIN = 4 };

static int g_timeout_ms = 10000;          /* every wait is bounded by this */
static size_t g_ring_size = 256 * 1024;   /* shm ring bytes, power of two  */
static int g_verbose;

/* context for messages */
static const char *g_tname = "-";
static const char *g_phase = "-";
static const char *g_party = "main";

static void die(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "transport-proto: %s[transport %s, %s, party %s] %s\n",
            code == 2 ? "HANG " : "ERROR ", g_tname, g_phase, g_party, buf);
    fflush(stderr);
    _exit(code);
}
#define FAIL(...) die(3, __VA_ARGS__)
#define HANG(...) die(2, __VA_ARGS__)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline void put16(uint8_t *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static inline void put32(uint8_t *p, uint32_t v)
{
    p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24;
}
static inline void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}
static inline uint16_t get16(const uint8_t *p) { return p[0] | p[1] << 8; }
static inline uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}
static inline uint64_t get64(const uint8_t *p)
{
    return get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void check_hdr(const uint8_t *h)
{
    uint16_t type = get16(h), flags = get16(h + 2);
    uint32_t len = get32(h + 4);
    if (type < FR_DATA || type > FR_FIN || flags != 0 || len > MAX_BODY)
        FAIL("bad frame header: type %u flags %u length %u", type, flags, len);
}

/* packet body: u64 sequence number, then a pattern derived from it */
static void fill_body(uint8_t *b, uint64_t seq)
{
    put64(b, seq);
    for (unsigned i = 8; i < PKT_LEN; i++)
        b[i] = (uint8_t)(seq * 131 + i * 7);
}

static void check_body(const uint8_t *fr, uint32_t n, uint64_t want,
                       const char *what)
{
    uint8_t exp[PKT_LEN];
    if (n != HDR_LEN + PKT_LEN)
        FAIL("%s: frame of %u bytes, expected %u", what, n, HDR_LEN + PKT_LEN);
    uint64_t seq = get64(fr + HDR_LEN);
    if (seq != want)
        FAIL("%s: packet out of order: got seq %llu, expected %llu", what,
             (unsigned long long)seq, (unsigned long long)want);
    fill_body(exp, want);
    if (memcmp(exp, fr + HDR_LEN, PKT_LEN) != 0)
        FAIL("%s: packet %llu has corrupt content", what,
             (unsigned long long)want);
}

/* ------------------------------------------------------------------ */
/* shared-memory ring                                                  */

struct ring_ctl {
    _Alignas(64) _Atomic uint64_t tail;          /* written by producer */
    _Alignas(64) _Atomic uint64_t head;          /* written by consumer */
    _Alignas(64) _Atomic uint32_t cons_sleeping; /* consumer: "kick me" */
    _Alignas(64) _Atomic uint32_t prod_waiting;  /* producer: "need space" */
};
_Static_assert(sizeof(struct ring_ctl) <= RING_HDR, "ring header too big");

static void ring_copy_in(uint8_t *data, size_t mask, uint64_t pos,
                         const uint8_t *src, size_t n)
{
    size_t off = pos & mask, first = mask + 1 - off;
    if (first > n)
        first = n;
    memcpy(data + off, src, first);
    if (n > first)
        memcpy(data, src + first, n - first);
}

static void ring_copy_out(uint8_t *dst, const uint8_t *data, size_t mask,
                          uint64_t pos, size_t n)
{
    size_t off = pos & mask, first = mask + 1 - off;
    if (first > n)
        first = n;
    memcpy(dst, data + off, first);
    if (n > first)
        memcpy(dst + first, data, n - first);
}

/* ------------------------------------------------------------------ */
/* links and parties                                                   */

struct stats {
    uint64_t polls, wakes, reads, writes, kicks, frames_in, frames_out;
    uint64_t full_waits;     /* sleeps waiting for ring / socket space */
};

struct link {
    int kind;
    int fd;              /* data socket, or control socket for shm */
    int rx_ready;        /* poll said readable / last read was full */
    int rx_unknown;      /* seqpacket: more records may be queued */
    int fin_rx;          /* FIN frame received on this link */
    int closed;          /* peer went away after FIN */
    int peer_gone;       /* shm: control socket hung up */
    /* tx: pending bytes are [txoff, txlen) (shm: overflow when ring full) */
    uint8_t *tx;
    size_t txoff, txlen, txcap;
    /* rx reassembly (sockets) */
    uint8_t *rx;
    size_t rxlen, rxcap;
    /* shm */
    struct ring_ctl *txr, *rxr;
    uint8_t *txd, *rxd;
    size_t rmask;
    uint64_t tx_tail, tx_pub, tx_head_cache, rx_head, rx_tail_cache;
    int peer_efd;        /* eventfd of the party at the other end */
    int w_rx, w_tx;      /* flags set for the current sleep */
    struct stats *st;
};

struct party {
    int kind, nl;
    struct link *l[2];
    int efd;             /* shm: my eventfd */
    int done;
    void (*on_frame)(struct party *, int li, uint16_t type,
                     const uint8_t *fr, uint32_t n);
    int (*step)(struct party *);
    int (*wants_idle)(struct party *);
    void (*idle)(struct party *);
    int (*rx_allowed)(struct party *, int li);
    void *app;
    struct stats st;
};

static void kick(struct link *l)
{
    uint64_t one = 1;
    if (write(l->peer_efd, &one, 8) != 8 && errno != EAGAIN)
        FAIL("eventfd write: %s", strerror(errno));
    l->st->kicks++;
}

static size_t tx_pending(const struct link *l) { return l->txlen - l->txoff; }

static uint8_t *tx_reserve(struct link *l, size_t n)
{
    if (l->txoff && l->txlen + n > l->txcap) {
        memmove(l->tx, l->tx + l->txoff, l->txlen - l->txoff);
        l->txlen -= l->txoff;
        l->txoff = 0;
    }
    if (l->txlen + n > l->txcap) {
        size_t cap = l->txcap * 2;
        while (cap < l->txlen + n)
            cap *= 2;
        l->tx = realloc(l->tx, cap);
        if (!l->tx)
            FAIL("out of memory");
        l->txcap = cap;
    }
    uint8_t *p = l->tx + l->txlen;
    l->txlen += n;
    return p;
}

/* copy one whole frame into the ring (not yet published) */
static int ring_put(struct link *l, const uint8_t *fr, size_t n)
{
    size_t size = l->rmask + 1;
    if (l->tx_tail - l->tx_head_cache + n > size) {
        l->tx_head_cache =
            atomic_load_explicit(&l->txr->head, memory_order_acquire);
        if (l->tx_tail - l->tx_head_cache + n > size)
            return 0;
    }
    ring_copy_in(l->txd, l->rmask, l->tx_tail, fr, n);
    l->tx_tail += n;
    return 1;
}

static void link_queue(struct link *l, const uint8_t *fr, size_t n)
{
    l->st->frames_out++;
    if (l->kind == T_SHM && l->txoff == l->txlen && ring_put(l, fr, n))
        return;
    memcpy(tx_reserve(l, n), fr, n);
}

static void link_flush(struct link *l)
{
    if (l->kind == T_SHM) {
        while (l->txoff < l->txlen) {
            size_t n = HDR_LEN + get32(l->tx + l->txoff + 4);
            if (!ring_put(l, l->tx + l->txoff, n))
                break;
            l->txoff += n;
        }
        if (l->txoff == l->txlen)
            l->txoff = l->txlen = 0;
        if (l->tx_tail != l->tx_pub) {
            atomic_store_explicit(&l->txr->tail, l->tx_tail,
                                  memory_order_release);
            l->tx_pub = l->tx_tail;
            /* Dekker with the consumer's "sleeping=1; fence; load tail" */
            atomic_thread_fence(memory_order_seq_cst);
            if (atomic_load_explicit(&l->txr->cons_sleeping,
                                     memory_order_relaxed) &&
                atomic_exchange(&l->txr->cons_sleeping, 0)) {
#ifdef INJECT_LOST_WAKEUP
                /* self-test of the hang detector: drop one kick in 5000 */
                static unsigned drop;
                if (++drop % 5000 == 0)
                    return;
#endif
                kick(l);
            }
        }
        return;
    }
    if (l->closed)
        return;
    while (l->txoff < l->txlen) {
        size_t n = l->txlen - l->txoff;
        if (l->kind == T_SEQPACKET) {
            /* one record = as many whole frames as fit in IO_CHUNK */
            size_t cut = 0;
            while (cut < n) {
                size_t f = HDR_LEN + get32(l->tx + l->txoff + cut + 4);
                if (cut && cut + f > IO_CHUNK)
                    break;
                cut += f;
            }
            n = cut;
        }
        ssize_t w = send(l->fd, l->tx + l->txoff, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        l->st->writes++;
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            FAIL("send: %s", strerror(errno));
        }
        l->txoff += w;
        if (l->kind == T_STREAM && (size_t)w < n)
            break;      /* socket buffer full: wait for POLLOUT */
    }
    if (l->txoff == l->txlen)
        l->txoff = l->txlen = 0;
}

/* parse whole frames in buf, hand them to the party; returns bytes used */
static size_t parse_frames(struct party *p, int li, const uint8_t *b,
                           size_t len, int *frames)
{
    size_t off = 0;
    while (len - off >= HDR_LEN) {
        check_hdr(b + off);
        uint32_t n = HDR_LEN + get32(b + off + 4);
        if (len - off < n)
            break;
        p->st.frames_in++;
        p->on_frame(p, li, get16(b + off), b + off, n);
        off += n;
        (*frames)++;
    }
    return off;
}

static void link_eof(struct link *l)
{
    if (!l->fin_rx)
        FAIL("peer closed the link without FIN");
    l->closed = 1;
    l->rx_ready = 0;
}

static int sock_rx(struct party *p, int li)
{
    struct link *l = p->l[li];
    int frames = 0;
    if (!l->rx_ready || l->closed || !p->rx_allowed(p, li))
        return 0;
    p->st.reads++;
    if (l->kind == T_STREAM) {
        size_t want = IO_CHUNK;
        ssize_t n = read(l->fd, l->rx + l->rxlen, want);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                l->rx_ready = 0;
                return 0;
            }
            FAIL("read: %s", strerror(errno));
        }
        if (n == 0) {
            link_eof(l);
            return 0;
        }
        l->rx_ready = ((size_t)n == want);   /* short read: drained */
        l->rx_unknown = 0;
        l->rxlen += n;
        size_t used = parse_frames(p, li, l->rx, l->rxlen, &frames);
        if (used) {
            memmove(l->rx, l->rx + used, l->rxlen - used);
            l->rxlen -= used;
        }
    } else {
        struct iovec iov = { l->rx, l->rxcap };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t n = recvmsg(l->fd, &msg, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                l->rx_ready = 0;
                l->rx_unknown = 0;
                return 0;
            }
            FAIL("recvmsg: %s", strerror(errno));
        }
        if (n == 0) {
            link_eof(l);
            return 0;
        }
        if (msg.msg_flags & MSG_TRUNC)
            FAIL("seqpacket record truncated");
        size_t used = parse_frames(p, li, l->rx, n, &frames);
        if (used != (size_t)n)
            FAIL("seqpacket record of %zd bytes ends inside a frame", n);
        l->rx_ready = 0;      /* one recv per poll */
        l->rx_unknown = 1;    /* ... but more records may be queued */
    }
    return frames;
}

static int shm_rx(struct party *p, int li)
{
    struct link *l = p->l[li];
    uint8_t tmp[HDR_LEN + MAX_BODY];
    uint64_t start = l->rx_head;
    int frames = 0;
    size_t size = l->rmask + 1;

    while (l->rx_head - start < IO_CHUNK && p->rx_allowed(p, li)) {
        uint64_t avail = l->rx_tail_cache - l->rx_head;
        if (avail < HDR_LEN) {
            l->rx_tail_cache =
                atomic_load_explicit(&l->rxr->tail, memory_order_acquire);
            avail = l->rx_tail_cache - l->rx_head;
            if (avail < HDR_LEN)
                break;
        }
        if (avail > size)
            FAIL("ring tail %llu ahead of head %llu by more than the ring",
                 (unsigned long long)l->rx_tail_cache,
                 (unsigned long long)l->rx_head);
        uint8_t h[HDR_LEN];
        ring_copy_out(h, l->rxd, l->rmask, l->rx_head, HDR_LEN);
        check_hdr(h);
        uint32_t n = HDR_LEN + get32(h + 4);
        if (avail < n)
            FAIL("published ring data ends inside a frame");
        const uint8_t *fr;
        size_t off = l->rx_head & l->rmask;
        if (off + n <= size) {
            fr = l->rxd + off;
        } else {
            ring_copy_out(tmp, l->rxd, l->rmask, l->rx_head, n);
            fr = tmp;
        }
        p->st.frames_in++;
        p->on_frame(p, li, get16(h), fr, n);
        l->rx_head += n;
        frames++;
    }
    if (frames) {
        atomic_store_explicit(&l->rxr->head, l->rx_head, memory_order_release);
        /* Dekker with the producer's "waiting=1; fence; load head" */
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&l->rxr->prod_waiting, memory_order_relaxed) &&
            atomic_exchange(&l->rxr->prod_waiting, 0))
            kick(l);
    }
    return frames;
}

static int link_rx(struct party *p, int li)
{
    if (p->l[li]->closed)
        return 0;
    return p->kind == T_SHM ? shm_rx(p, li) : sock_rx(p, li);
}

/* ---- waiting: sockets ---- */

static int sock_build(struct party *p, struct pollfd *pf)
{
    for (int i = 0; i < p->nl; i++) {
        struct link *l = p->l[i];
        pf[i].fd = l->closed ? -1 : l->fd;
        pf[i].events = (p->rx_allowed(p, i) ? POLLIN : 0) |
                       (tx_pending(l) ? POLLOUT : 0);
        pf[i].revents = 0;
    }
    return p->nl;
}

static void sock_apply(struct party *p, struct pollfd *pf)
{
    for (int i = 0; i < p->nl; i++) {
        struct link *l = p->l[i];
        l->rx_unknown = 0;
        if (pf[i].fd < 0)
            continue;
        if (pf[i].revents & POLLNVAL)
            FAIL("poll: invalid fd");
        if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (!(pf[i].events & POLLIN) && !l->fin_rx)
                FAIL("peer hung up on link %d", i);
            if (pf[i].events & POLLIN)
                l->rx_ready = 1;
            else if (pf[i].revents & (POLLHUP | POLLERR))
                l->closed = 1;
        }
    }
}

static void sock_wait(struct party *p)
{
    struct pollfd pf[2];
    int n;

    for (int i = 0; i < p->nl; i++)
        if (p->l[i]->rx_ready && !p->l[i]->closed && p->rx_allowed(p, i))
            return;             /* more to read right now */
    if (p->wants_idle && p->wants_idle(p)) {
        int unknown = 0;
        for (int i = 0; i < p->nl; i++)
            unknown |= p->l[i]->rx_unknown;
        if (unknown) {
            sock_build(p, pf);
            p->st.polls++;
            n = poll(pf, p->nl, 0);
            if (n > 0) {
                sock_apply(p, pf);
                return;
            }
        }
        p->idle(p);
        for (int i = 0; i < p->nl; i++)
            link_flush(p->l[i]);
    }
    sock_build(p, pf);
    p->st.polls++;
    for (int i = 0; i < p->nl; i++)
        if (pf[i].events & POLLOUT) {
            p->st.full_waits++;
            break;
        }
    n = poll(pf, p->nl, g_timeout_ms);
    if (n < 0 && errno != EINTR)
        FAIL("poll: %s", strerror(errno));
    if (n == 0)
        HANG("no event for %d ms (socket poll: link0 events %#x pending %zu, "
             "link1 events %#x pending %zu)", g_timeout_ms, pf[0].events,
             tx_pending(p->l[0]), p->nl > 1 ? pf[1].events : 0,
             p->nl > 1 ? tx_pending(p->l[1]) : 0);
    p->st.wakes++;
    if (n > 0)
        sock_apply(p, pf);
}

/* ---- waiting: shared memory ---- */

static int shm_space_for_next(struct link *l)
{
    size_t n = HDR_LEN + get32(l->tx + l->txoff + 4);
    uint64_t head = atomic_load_explicit(&l->txr->head, memory_order_acquire);
    return l->tx_tail - head + n <= l->rmask + 1;
}

static void shm_wait(struct party *p)
{
    int ready = 0;

    for (int i = 0; i < p->nl; i++) {
        struct link *l = p->l[i];
        l->w_rx = !l->closed && p->rx_allowed(p, i);
        l->w_tx = tx_pending(l) > 0;
        if (l->w_rx)
            atomic_store_explicit(&l->rxr->cons_sleeping, 1, memory_order_relaxed);
        if (l->w_tx)
            atomic_store_explicit(&l->txr->prod_waiting, 1, memory_order_relaxed);
    }
    atomic_thread_fence(memory_order_seq_cst);
    for (int i = 0; i < p->nl; i++) {
        struct link *l = p->l[i];
        if (l->w_rx &&
            atomic_load_explicit(&l->rxr->tail, memory_order_acquire) != l->rx_head)
            ready = 1;
        if (l->w_tx && shm_space_for_next(l))
            ready = 1;
    }
    if (!ready) {
        for (int i = 0; i < p->nl; i++)
            if (p->l[i]->peer_gone && !p->l[i]->fin_rx)
                FAIL("peer died (control socket of link %d hung up, no FIN "
                     "in the ring)", i);
    }
    if (!ready) {
        struct pollfd pf[3];
        int np = 1;
        pf[0].fd = p->efd;
        pf[0].events = POLLIN;
        pf[0].revents = 0;
        for (int i = 0; i < p->nl; i++) {
            /* control socket: only to notice a peer that died */
            pf[np].fd = (p->l[i]->closed || p->l[i]->fin_rx ||
                         p->l[i]->peer_gone) ? -1 : p->l[i]->fd;
            pf[np].events = 0;
            pf[np].revents = 0;
            np++;
        }
        p->st.polls++;
        for (int i = 0; i < p->nl; i++)
            if (p->l[i]->w_tx) {
                p->st.full_waits++;
                break;
            }
        int n = poll(pf, np, g_timeout_ms);
        if (n < 0 && errno != EINTR)
            FAIL("poll: %s", strerror(errno));
        if (n == 0) {
            char buf[2][160];
            for (int i = 0; i < 2; i++) {
                struct link *l = p->l[i];
                buf[i][0] = 0;
                if (i < p->nl)
                    snprintf(buf[i], sizeof buf[i], "; link %d: rx head %llu "
                             "tail %llu, tx tail %llu head %llu, waiting for "
                             "rx %d / tx space %d, unsent %zu", i,
                             (unsigned long long)l->rx_head,
                             (unsigned long long)atomic_load(&l->rxr->tail),
                             (unsigned long long)l->tx_tail,
                             (unsigned long long)atomic_load(&l->txr->head),
                             l->w_rx, l->w_tx, tx_pending(l));
            }
            HANG("no wake-up for %d ms (lost wake-up?)%s%s", g_timeout_ms,
                 buf[0], buf[1]);
        }
        p->st.wakes++;
        /* a peer that hangs up may have left its FIN in the ring: drain
         * first, complain only if the ring is empty and there was no FIN */
        for (int i = 1; i < np; i++)
            if (pf[i].revents & (POLLHUP | POLLERR))
                p->l[i - 1]->peer_gone = 1;
        if (pf[0].revents & POLLIN) {
            uint64_t v;
            if (read(p->efd, &v, 8) < 0 && errno != EAGAIN)
                FAIL("eventfd read: %s", strerror(errno));
        }
    }
    for (int i = 0; i < p->nl; i++) {
        struct link *l = p->l[i];
        if (l->w_rx)
            atomic_store_explicit(&l->rxr->cons_sleeping, 0, memory_order_relaxed);
        if (l->w_tx)
            atomic_store_explicit(&l->txr->prod_waiting, 0, memory_order_relaxed);
    }
}

static void party_run(struct party *p)
{
    for (;;) {
        int work = 0;
        for (int i = 0; i < p->nl; i++)
            work += link_rx(p, i);
        if (p->step)
            work += p->step(p);
        for (int i = 0; i < p->nl; i++)
            link_flush(p->l[i]);
        if (p->done)
            break;
        if (p->kind == T_SHM) {
            if (work)
                continue;
            if (p->wants_idle && p->wants_idle(p)) {
                p->idle(p);
                for (int i = 0; i < p->nl; i++)
                    link_flush(p->l[i]);
                continue;
            }
            shm_wait(p);
        } else {
            sock_wait(p);
        }
    }
    /* finish sending what is queued (rx_allowed() is now false) */
    for (;;) {
        size_t pend = 0;
        for (int i = 0; i < p->nl; i++) {
            link_flush(p->l[i]);
            if (!p->l[i]->closed)
                pend += tx_pending(p->l[i]);
        }
        if (!pend)
            break;
        if (p->kind == T_SHM)
            shm_wait(p);
        else
            sock_wait(p);
    }
}

static struct link *link_new(int kind, int fd, struct stats *st)
{
    struct link *l = calloc(1, sizeof *l);
    if (!l)
        FAIL("out of memory");
    l->kind = kind;
    l->fd = fd;
    l->st = st;
    l->txcap = 2 * IO_CHUNK;
    l->tx = malloc(l->txcap);
    l->rxcap = 2 * IO_CHUNK;
    l->rx = malloc(l->rxcap);
    l->peer_efd = -1;
    if (!l->tx || !l->rx)
        FAIL("out of memory");
    return l;
}

/* ---- shm setup: switch creates memfd + eventfds, passes them ---- */

struct hello { uint32_t magic, ring_size; };
#define HELLO_MAGIC 0x52494e47u

static void shm_map(struct link *l, int mfd, int server)
{
    size_t rs = g_ring_size, total = 2 * (RING_HDR + rs);
    uint8_t *m = mmap(NULL, total, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_POPULATE, mfd, 0);
    if (m == MAP_FAILED)
        FAIL("mmap: %s", strerror(errno));
    /* ring 0: switch -> node, ring 1: node -> switch */
    struct ring_ctl *r0 = (struct ring_ctl *)m;
    struct ring_ctl *r1 = (struct ring_ctl *)(m + RING_HDR + rs);
    l->txr = server ? r0 : r1;
    l->rxr = server ? r1 : r0;
    l->txd = (uint8_t *)l->txr + RING_HDR;
    l->rxd = (uint8_t *)l->rxr + RING_HDR;
    l->rmask = rs - 1;
}

static void shm_server_setup(struct link *l, int sw_efd)
{
    size_t total = 2 * (RING_HDR + g_ring_size);
    int mfd = memfd_create("transport-proto-ring", MFD_CLOEXEC);
    if (mfd < 0 || ftruncate(mfd, total) < 0)
        FAIL("memfd: %s", strerror(errno));
    shm_map(l, mfd, 1);
    int nefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (nefd < 0)
        FAIL("eventfd: %s", strerror(errno));
    struct hello h = { HELLO_MAGIC, (uint32_t)g_ring_size };
    int fds[3] = { mfd, nefd, sw_efd };
    union { char buf[CMSG_SPACE(sizeof fds)]; struct cmsghdr align; } u;
    struct iovec iov = { &h, sizeof h };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = u.buf, .msg_controllen = sizeof u.buf };
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    if (sendmsg(l->fd, &msg, MSG_NOSIGNAL) != sizeof h)
        FAIL("sendmsg(SCM_RIGHTS): %s", strerror(errno));
    close(mfd);
    l->peer_efd = nefd;         /* the switch kicks the node through it */
}

static int shm_client_setup(struct link *l)
{
    struct pollfd pf = { l->fd, POLLIN, 0 };
    int n = poll(&pf, 1, g_timeout_ms);
    if (n == 0)
        HANG("switch never sent the shared-memory fds");
    struct hello h;
    int fds[3];
    union { char buf[CMSG_SPACE(sizeof fds)]; struct cmsghdr align; } u;
    struct iovec iov = { &h, sizeof h };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = u.buf, .msg_controllen = sizeof u.buf };
    if (recvmsg(l->fd, &msg, MSG_CMSG_CLOEXEC) != sizeof h ||
        h.magic != HELLO_MAGIC || h.ring_size != g_ring_size)
        FAIL("bad hello from switch");
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof fds))
        FAIL("hello without the 3 fds");
    memcpy(fds, CMSG_DATA(c), sizeof fds);
    shm_map(l, fds[0], 0);
    close(fds[0]);
    l->peer_efd = fds[2];       /* the node kicks the switch through it */
    return fds[1];              /* my own eventfd */
}

/* ------------------------------------------------------------------ */
/* results shared with main                                            */

struct shared {
    double rt_med, rt_p90, rt_p99;
    double elapsed;
    struct stats st[3];          /* A, S, B */
};
static struct shared *g_sh;

/* ------------------------------------------------------------------ */
/* the switch                                                          */

static void sw_frame(struct party *p, int li, uint16_t type,
                     const uint8_t *fr, uint32_t n)
{
#ifdef INJECT_CORRUPT
    /* self-test of the data check: corrupt one byte of the 1000th frame */
    static unsigned count;
    uint8_t bad[HDR_LEN + MAX_BODY];
    if (++count == 1000 && n > HDR_LEN + 20) {
        memcpy(bad, fr, n);
        bad[HDR_LEN + 20] ^= 1;
        fr = bad;
    }
#endif
    link_queue(p->l[li ^ 1], fr, n);
    if (type == FR_FIN) {
        p->l[li]->fin_rx = 1;
        if (p->l[0]->fin_rx && p->l[1]->fin_rx)
            p->done = 1;
    }
}

static int sw_rx_allowed(struct party *p, int li)
{
    return !p->done && !p->l[li]->fin_rx &&
           tx_pending(p->l[li ^ 1]) < TX_LIMIT;
}

static void run_switch(int kind, int fa, int fb)
{
    struct party p = { .kind = kind, .nl = 2, .efd = -1,
                       .on_frame = sw_frame, .rx_allowed = sw_rx_allowed };
    p.l[0] = link_new(kind, fa, &p.st);
    p.l[1] = link_new(kind, fb, &p.st);
    if (kind == T_SHM) {
        p.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (p.efd < 0)
            FAIL("eventfd: %s", strerror(errno));
        shm_server_setup(p.l[0], p.efd);
        shm_server_setup(p.l[1], p.efd);
    }
    party_run(&p);
    g_sh->st[1] = p.st;
}

/* ------------------------------------------------------------------ */
/* the nodes                                                           */

struct napp {
    int mode, isA, W;
    long total, warm;
    uint64_t sent, acked, rcvd, lastack, cur;
    int fin_sent, started;
    double t0, tstart, tend;
    double *samples;
    uint8_t fr[HDR_LEN + PKT_LEN];
};

static void send_ctl(struct party *p, uint16_t type, uint64_t v, int with_body)
{
    uint8_t f[HDR_LEN + 8];
    put16(f, type);
    put16(f + 2, 0);
    put32(f + 4, with_body ? 8 : 0);
    put64(f + 8, v);
    link_queue(p->l[0], f, HDR_LEN + (with_body ? 8 : 0));
}

static void send_data(struct party *p, struct napp *a, uint16_t type,
                      uint64_t seq)
{
    put16(a->fr, type);
    put16(a->fr + 2, 0);
    put32(a->fr + 4, PKT_LEN);
    fill_body(a->fr + HDR_LEN, seq);
    link_queue(p->l[0], a->fr, sizeof a->fr);
}

static int node_rx_allowed(struct party *p, int li)
{
    return !p->done && !p->l[li]->fin_rx;
}

static int a_step(struct party *p)
{
    struct napp *a = p->app;
    int n = 0;
    if (a->mode == M_RT) {
        if (!a->started) {
            a->started = 1;
            a->t0 = now_s();
            send_data(p, a, FR_DATA, 0);
            n = 1;
        }
        return n;
    }
    if (!a->started) {
        a->started = 1;
        a->tstart = now_s();
    }
    while (a->sent < (uint64_t)a->total && a->sent - a->acked < (uint64_t)a->W) {
        send_data(p, a, FR_DATA, a->sent++);
        n++;
    }
    return n;
}

static void a_frame(struct party *p, int li, uint16_t type,
                    const uint8_t *fr, uint32_t n)
{
    struct napp *a = p->app;
    (void)li;
    if (type == FR_FIN) {
        if (!a->fin_sent)
            FAIL("FIN before the test ended");
        p->l[0]->fin_rx = 1;
        p->done = 1;
        return;
    }
    if (a->mode == M_RT) {
        if (type != FR_ECHO)
            FAIL("A: unexpected frame type %u", type);
        double t = now_s();
        check_body(fr, n, a->cur, "A (echo)");
        if (a->cur >= (uint64_t)a->warm)
            a->samples[a->cur - a->warm] = (t - a->t0) * 1e6;
        a->cur++;
        if (a->cur < (uint64_t)(a->total + a->warm)) {
            a->t0 = now_s();
            send_data(p, a, FR_DATA, a->cur);
        } else {
            a->fin_sent = 1;
            send_ctl(p, FR_FIN, 0, 0);
        }
        return;
    }
    if (type != FR_ACK || n != HDR_LEN + 8)
        FAIL("A: unexpected frame type %u length %u", type, n);
    uint64_t v = get64(fr + HDR_LEN);
    if (v < a->acked || v > a->sent)
        FAIL("A: bad cumulative ack %llu (acked %llu, sent %llu)",
             (unsigned long long)v, (unsigned long long)a->acked,
             (unsigned long long)a->sent);
    a->acked = v;
    if (a->acked == (uint64_t)a->total && !a->fin_sent) {
        a->tend = now_s();
        a->fin_sent = 1;
        send_ctl(p, FR_FIN, 0, 0);
    }
}

static void b_frame(struct party *p, int li, uint16_t type,
                    const uint8_t *fr, uint32_t n)
{
    struct napp *b = p->app;
    (void)li;
    if (type == FR_FIN) {
        send_ctl(p, FR_FIN, 0, 0);
        p->l[0]->fin_rx = 1;
        p->done = 1;
        return;
    }
    if (type != FR_DATA)
        FAIL("B: unexpected frame type %u", type);
    check_body(fr, n, b->rcvd, "B");
    b->rcvd++;
    if (b->mode == M_RT) {
        /* echo the very same body back */
        memcpy(b->fr, fr, n);
        put16(b->fr, FR_ECHO);
        link_queue(p->l[0], b->fr, n);
    } else if (b->rcvd - b->lastack >= ACK_EVERY) {
        b->lastack = b->rcvd;
        send_ctl(p, FR_ACK, b->rcvd, 1);
    }
}

static int b_wants_idle(struct party *p)
{
    struct napp *b = p->app;
    return b->mode == M_STREAM && b->rcvd > b->lastack;
}

static void b_idle(struct party *p)
{
    struct napp *b = p->app;
    b->lastack = b->rcvd;
    send_ctl(p, FR_ACK, b->rcvd, 1);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static void run_node(int kind, int isA, int fd, int mode, long count,
                     long warm, int W)
{
    struct napp a = { .mode = mode, .isA = isA, .W = W, .total = count,
                      .warm = warm };
    struct party p = { .kind = kind, .nl = 1, .efd = -1, .app = &a,
                       .rx_allowed = node_rx_allowed };
    p.l[0] = link_new(kind, fd, &p.st);
    if (kind == T_SHM)
        p.efd = shm_client_setup(p.l[0]);
    if (isA) {
        p.on_frame = a_frame;
        p.step = a_step;
        if (mode == M_RT) {
            a.samples = malloc(sizeof(double) * count);
            if (!a.samples)
                FAIL("out of memory");
        }
    } else {
        p.on_frame = b_frame;
        p.wants_idle = b_wants_idle;
        p.idle = b_idle;
    }
    party_run(&p);
    if (isA) {
        if (mode == M_RT) {
            qsort(a.samples, count, sizeof(double), cmp_double);
            g_sh->rt_med = a.samples[count / 2];
            g_sh->rt_p90 = a.samples[(size_t)(count * 0.90)];
            g_sh->rt_p99 = a.samples[(size_t)(count * 0.99)];
        } else {
            g_sh->elapsed = a.tend - a.tstart;
        }
        g_sh->st[0] = p.st;
    } else {
        long want = mode == M_RT ? count + warm : count;
        if (a.rcvd != (uint64_t)want)
            FAIL("B received %llu packets, expected %ld",
                 (unsigned long long)a.rcvd, want);
        g_sh->st[2] = p.st;
    }
}

/* ------------------------------------------------------------------ */
/* main: load generator, trials, table                                 */

static void *spin(void *arg)
{
    volatile unsigned long x = 0;
    (void)arg;
    for (;;)
        x++;
    return NULL;
}

static pid_t start_load(int nthreads)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (int i = 1; i < nthreads; i++) {
            pthread_t t;
            pthread_create(&t, NULL, spin, NULL);
        }
        spin(NULL);
    }
    usleep(50000);      /* let the spinners get going */
    return pid;
}

static void stop_load(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

static volatile sig_atomic_t g_alarm;
static void on_alarm(int sig) { (void)sig; g_alarm = 1; }

struct trial {
    double rt_med, rt_p90, rt_p99, pps, cpu[3];   /* cpu: us per packet */
    double other;        /* CPUs used by processes not ours during it */
    struct stats st[3];
};

/* CPU seconds: all CPUs busy (from /proc/stat), or one process (with its
 * threads, from /proc/PID/stat); used to notice other work on the machine */
static double cpu_busy_s(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long long v[8] = { 0 };
    double hz = sysconf(_SC_CLK_TCK);
    if (pid > 0)
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    else
        snprintf(path, sizeof path, "/proc/stat");
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (pid > 0) {
        char *q = strrchr(buf, ')');     /* fields after the command name */
        unsigned long long ut, st;
        if (!q || sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                         "%llu %llu", &ut, &st) != 2)
            return 0;
        return (ut + st) / hz;
    }
    if (sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
               &v[2], &v[3], &v[4], &v[5], &v[6]) != 7)
        return 0;
    /* user nice system (idle iowait) irq softirq */
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / hz;
}

static pid_t g_load_pid = -1;

static int g_pin[3] = { -1, -1, -1 };   /* --pin: CPU of A, S, B */

static pid_t fork_child(const char *party)
{
    pid_t pid = fork();
    if (pid < 0)
        FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        int cpu = g_pin[party[0] == 'A' ? 0 : party[0] == 'S' ? 1 : 2];
        g_party = party;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (cpu >= 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpu, &set);
            if (sched_setaffinity(0, sizeof set, &set) < 0)
                FAIL("sched_setaffinity(%d): %s", cpu, strerror(errno));
        }
    }
    return pid;
}

static void run_trial(int kind, int mode, int W, long count, long warm,
                      struct trial *res)
{
    int sa[2], sb[2];
    int stype = kind == T_STREAM ? SOCK_STREAM : SOCK_SEQPACKET;
    static char phase[64];

    if (mode == M_RT)
        snprintf(phase, sizeof phase, "round trip");
    else
        snprintf(phase, sizeof phase, "stream W=%d", W);
    g_tname = tnames[kind];
    g_phase = phase;
    memset(g_sh, 0, sizeof *g_sh);

    if (socketpair(AF_UNIX, stype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sa) < 0 ||
        socketpair(AF_UNIX, stype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sb) < 0)
        FAIL("socketpair: %s", strerror(errno));

    pid_t pid[3];
    const char *names[3] = { "A", "S", "B" };
    if ((pid[1] = fork_child("S")) == 0) {
        close(sa[1]); close(sb[1]);
        run_switch(kind, sa[0], sb[0]);
        _exit(0);
    }
    if ((pid[0] = fork_child("A")) == 0) {
        close(sa[0]); close(sb[0]); close(sb[1]);
        run_node(kind, 1, sa[1], mode, count, warm, W);
        _exit(0);
    }
    if ((pid[2] = fork_child("B")) == 0) {
        close(sa[0]); close(sa[1]); close(sb[0]);
        run_node(kind, 0, sb[1], mode, count, warm, W);
        _exit(0);
    }
    close(sa[0]); close(sa[1]); close(sb[0]); close(sb[1]);

    struct rusage ru[3];
    int left = 3, failed = 0;
    double t_w0 = now_s(), busy0 = cpu_busy_s(0), load0 = cpu_busy_s(g_load_pid);
    g_alarm = 0;
    alarm(300);         /* backstop; the children time out after 10 s */
    while (left) {
        int st;
        struct rusage r;
        pid_t w = wait4(-1, &st, 0, &r);
        if (w < 0) {
            if (errno == EINTR && g_alarm) {
                fprintf(stderr, "transport-proto: HANG [transport %s, %s]: "
                        "trial did not finish in 300 s\n", g_tname, g_phase);
                failed = 2;
                break;
            }
            if (errno == EINTR)
                continue;
            FAIL("wait4: %s", strerror(errno));
        }
        int i;
        for (i = 0; i < 3 && pid[i] != w; i++)
            ;
        if (i == 3)
            continue;   /* the load process?  ignore */
        pid[i] = -1;
        ru[i] = r;
        left--;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            fprintf(stderr, "transport-proto: [transport %s, %s] party %s "
                    "failed (%s %d)\n", g_tname, g_phase, names[i],
                    WIFEXITED(st) ? "exit" : "signal",
                    WIFEXITED(st) ? code : WTERMSIG(st));
            failed = code == 2 ? 2 : 3;
            break;
        }
    }
    alarm(0);
    if (failed) {
        /* give the others a moment to report their own view, then stop them */
        usleep(300000);
        for (int i = 0; i < 3; i++)
            if (pid[i] > 0) {
                int st;
                if (waitpid(pid[i], &st, WNOHANG) == pid[i]) {
                    fprintf(stderr, "transport-proto: [transport %s, %s] party "
                            "%s %s %d\n", g_tname, g_phase, names[i],
                            WIFEXITED(st) ? "exited" : "killed by signal",
                            WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
                    continue;
                }
                kill(pid[i], SIGKILL);
                waitpid(pid[i], NULL, 0);
            }
        exit(failed);
    }
    memset(res, 0, sizeof *res);
    {
        double ours = 0;
        for (int i = 0; i < 3; i++)
            ours += ru[i].ru_utime.tv_sec + ru[i].ru_stime.tv_sec +
                    (ru[i].ru_utime.tv_usec + ru[i].ru_stime.tv_usec) * 1e-6;
        double busy = cpu_busy_s(0) - busy0;
        double load = g_load_pid > 0 ? cpu_busy_s(g_load_pid) - load0 : 0;
        res->other = (busy - ours - load) / (now_s() - t_w0);
        if (res->other < 0)
            res->other = 0;
    }
    res->rt_med = g_sh->rt_med;
    res->rt_p90 = g_sh->rt_p90;
    res->rt_p99 = g_sh->rt_p99;
    memcpy(res->st, g_sh->st, sizeof res->st);
    if (mode == M_STREAM) {
        res->pps = count / g_sh->elapsed;
        for (int i = 0; i < 3; i++)
            res->cpu[i] = (ru[i].ru_utime.tv_sec + ru[i].ru_stime.tv_sec +
                           (ru[i].ru_utime.tv_usec + ru[i].ru_stime.tv_usec) * 1e-6)
                          * 1e6 / count;
    }
    if (g_verbose) {
        fprintf(stderr, "  %s %s: rt %.1f us, %.0f pkt/s, other %.2f CPU\n",
                g_tname, g_phase, res->rt_med, res->pps, res->other);
        for (int i = 0; i < 3; i++)
            fprintf(stderr, "    %s: cpu %.3f s, ctx switches vol %ld invol %ld, "
                    "polls %llu wakes %llu reads %llu writes %llu "
                    "kicks %llu full-waits %llu frames in %llu out %llu\n",
                    names[i],
                    ru[i].ru_utime.tv_sec + ru[i].ru_stime.tv_sec +
                    (ru[i].ru_utime.tv_usec + ru[i].ru_stime.tv_usec) * 1e-6,
                    ru[i].ru_nvcsw, ru[i].ru_nivcsw,
                    (unsigned long long)res->st[i].polls,
                    (unsigned long long)res->st[i].wakes,
                    (unsigned long long)res->st[i].reads,
                    (unsigned long long)res->st[i].writes,
                    (unsigned long long)res->st[i].kicks,
                    (unsigned long long)res->st[i].full_waits,
                    (unsigned long long)res->st[i].frames_in,
                    (unsigned long long)res->st[i].frames_out);
    }
    g_tname = "-";
    g_phase = "-";
}

#define MAXREP 15
#define OTHER_WARN 0.05     /* CPUs of foreign work that taint a trial */

struct row {
    int kind, load, nrep;
    double other;        /* max over trials of foreign CPU use */
    double rt_med[MAXREP], rt_p90[MAXREP], rt_p99[MAXREP];
    double pps[2][MAXREP];
    double cpu[2][3][MAXREP];
};

static double median(const double *v, int n)
{
    double t[MAXREP];
    memcpy(t, v, n * sizeof *t);
    qsort(t, n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static void usage(FILE *f)
{
    fprintf(f,
"usage: transport-proto [options]\n"
"Measures three packet transports between node A, a switch process S and\n"
"node B (A -> S -> B -> S -> A), 64-byte packets in 8-byte-header frames,\n"
"every party sleeping in poll() when idle.  Prints one row per transport and\n"
"load setting: round trip median/p90/p99 (us), one-way stream throughput\n"
"with W packets in flight, and CPU time (A+S+B) per packet.  Each value is\n"
"the median of -r repetitions.\n"
"\n"
"  -t, --transport T    stream | seqpacket | shm | all (default all)\n"
"  -n, --round-trips N  timed round trips (default 20000, plus 2000 warm-up)\n"
"  -w, --warmup N       warm-up round trips (default 2000)\n"
"  -p, --packets N      packets per stream test (default 2000000)\n"
"  -W, --windows A,B    the two stream windows (default 64,256)\n"
"  -r, --reps N         repetitions of every measurement (default 3, max %d)\n"
"      --no-load        only measure without the CPU load\n"
"      --load-only      only measure with the CPU load\n"
"      --load-threads N busy threads of the load process (default 2)\n"
"      --ring-kib N     shm ring size per direction in KiB, power of two\n"
"                       (default 256; small values exercise ring-full)\n"
"      --pin A,S,B      pin node A, the switch and node B to these CPUs\n"
"                       (diagnostic; default: let the scheduler place them)\n"
"      --timeout S      seconds a party may wait before it reports a hang\n"
"                       (default 10)\n"
"  -v, --verbose        per-trial counters (polls, wake-ups, reads, kicks)\n"
"  -h, --help           this text\n"
"Exit status: 0 ok, 2 a transport hung, 3 data error or failure.\n", MAXREP);
}

int main(int argc, char **argv)
{
    int tsel = -1, reps = 3, load_threads = 2, do_noload = 1, do_load = 1;
    long nrt = 20000, warm = 2000, npk = 2000000;
    int win[2] = { 64, 256 };
    static const struct option lo[] = {
        { "transport", required_argument, 0, 't' },
        { "round-trips", required_argument, 0, 'n' },
        { "warmup", required_argument, 0, 'w' },
        { "packets", required_argument, 0, 'p' },
        { "windows", required_argument, 0, 'W' },
        { "reps", required_argument, 0, 'r' },
        { "no-load", no_argument, 0, 1 },
        { "load-only", no_argument, 0, 2 },
        { "load-threads", required_argument, 0, 3 },
        { "ring-kib", required_argument, 0, 4 },
        { "timeout", required_argument, 0, 5 },
        { "pin", required_argument, 0, 6 },
        { "verbose", no_argument, 0, 'v' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    int c;
    while ((c = getopt_long(argc, argv, "t:n:w:p:W:r:vh", lo, NULL)) != -1) {
        switch (c) {
        case 't':
            if (!strcmp(optarg, "all"))
                tsel = -1;
            else {
                for (tsel = 0; tsel < T_COUNT && strcmp(optarg, tnames[tsel]); tsel++)
                    ;
                if (tsel == T_COUNT) {
                    fprintf(stderr, "unknown transport '%s'\n", optarg);
                    return 1;
                }
            }
            break;
        case 'n': nrt = atol(optarg); break;
        case 'w': warm = atol(optarg); break;
        case 'p': npk = atol(optarg); break;
        case 'W':
            if (sscanf(optarg, "%d,%d", &win[0], &win[1]) != 2) {
                fprintf(stderr, "-W wants two windows, e.g. 64,256\n");
                return 1;
            }
            break;
        case 'r': reps = atoi(optarg); break;
        case 1: do_load = 0; break;
        case 2: do_noload = 0; break;
        case 3: load_threads = atoi(optarg); break;
        case 4: g_ring_size = (size_t)atol(optarg) * 1024; break;
        case 5: g_timeout_ms = atoi(optarg) * 1000; break;
        case 6:
            if (sscanf(optarg, "%d,%d,%d", &g_pin[0], &g_pin[1], &g_pin[2]) != 3) {
                fprintf(stderr, "--pin wants three CPUs, e.g. 0,1,0\n");
                return 1;
            }
            break;
        case 'v': g_verbose = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 1;
        }
    }
    if (optind < argc || nrt < 1 || warm < 0 || npk < 1 || reps < 1 ||
        reps > MAXREP || load_threads < 1 || win[0] < 1 || win[1] < 1 ||
        g_ring_size < 1024 || (g_ring_size & (g_ring_size - 1)) ||
        g_timeout_ms < 1000 || (!do_load && !do_noload)) {
        usage(stderr);
        return 1;
    }

    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = { .sa_handler = on_alarm };
    sigaction(SIGALRM, &sa, NULL);     /* no SA_RESTART: wait4 gets EINTR */
    setvbuf(stdout, NULL, _IOLBF, 0);

    g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_sh == MAP_FAILED)
        FAIL("mmap: %s", strerror(errno));

    struct row rows[2 * T_COUNT];
    int nrows = 0;
    for (int ld = 0; ld < 2; ld++) {
        if ((ld == 0 && !do_noload) || (ld == 1 && !do_load))
            continue;
        for (int t = 0; t < T_COUNT; t++) {
            if (tsel >= 0 && t != tsel)
                continue;
            memset(&rows[nrows], 0, sizeof rows[nrows]);
            rows[nrows].kind = t;
            rows[nrows].load = ld;
            nrows++;
        }
    }

    double t_begin = now_s();
    fprintf(stderr, "transport-proto: %d round trips (+%ld warm-up), %ld "
            "packets per stream test, W=%d,%d, %d reps, load %d threads\n",
            (int)nrt, warm, npk, win[0], win[1], reps, load_threads);
    /* interleave: every repetition runs every row, so a change in the
     * machine's background load hits all transports alike */
    for (int rep = 0; rep < reps; rep++) {
        for (int ld = 0; ld < 2; ld++) {
            pid_t lp = -1;
            int any = 0;
            for (int r = 0; r < nrows; r++)
                any |= rows[r].load == ld;
            if (!any)
                continue;
            if (ld)
                lp = g_load_pid = start_load(load_threads);
            for (int r = 0; r < nrows; r++) {
                struct row *R = &rows[r];
                struct trial tr;
                if (R->load != ld)
                    continue;
                run_trial(R->kind, M_RT, 0, nrt, warm, &tr);
                double other = tr.other;
                R->rt_med[rep] = tr.rt_med;
                R->rt_p90[rep] = tr.rt_p90;
                R->rt_p99[rep] = tr.rt_p99;
                for (int w = 0; w < 2; w++) {
                    struct trial ts;
                    run_trial(R->kind, M_STREAM, win[w], npk, 0, &ts);
                    R->pps[w][rep] = ts.pps;
                    if (ts.other > other)
                        other = ts.other;
                    for (int i = 0; i < 3; i++)
                        R->cpu[w][i][rep] = ts.cpu[i];
                }
                R->nrep = rep + 1;
                if (other > R->other)
                    R->other = other;
                fprintf(stderr, "  rep %d %-9s load %-3s rt %6.1f/%6.1f/%7.1f us"
                        "  W=%d %8.0f pkt/s  W=%d %8.0f pkt/s  cpu %.2f/%.2f us/pkt"
                        "  other %.2f CPU%s\n",
                        rep + 1, tnames[R->kind], ld ? "on" : "off",
                        tr.rt_med, tr.rt_p90, tr.rt_p99, win[0], R->pps[0][rep],
                        win[1], R->pps[1][rep],
                        R->cpu[0][0][rep] + R->cpu[0][1][rep] + R->cpu[0][2][rep],
                        R->cpu[1][0][rep] + R->cpu[1][1][rep] + R->cpu[1][2][rep],
                        other, other > OTHER_WARN ? "  (machine busy!)" : "");
            }
            stop_load(lp);
            g_load_pid = -1;
        }
    }

    printf("\n64-byte packets, A -> switch -> B -> switch -> A; median of %d "
           "runs; load = %d busy threads on %ld CPUs\n", reps, load_threads,
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("%-9s %-4s | %8s %8s %8s | %11s %7s | %11s %7s | %9s %9s\n",
           "transport", "load", "rt med", "rt p90", "rt p99",
           "pkt/s", "MB/s", "pkt/s", "MB/s", "CPU us/pk", "CPU us/pk");
    printf("%-9s %-4s | %8s %8s %8s | %11s %7s | %11s %7s | %9s %9s\n",
           "", "", "us", "us", "us", "", "", "", "", "", "");
    char h1[32], h2[32];
    snprintf(h1, sizeof h1, "W=%d", win[0]);
    snprintf(h2, sizeof h2, "W=%d", win[1]);
    printf("%-9s %-4s | %8s %8s %8s | %11s %7s | %11s %7s | %9s %9s\n",
           "", "", "", "", "", h1, h1, h2, h2, h1, h2);
    for (int r = 0; r < nrows; r++) {
        struct row *R = &rows[r];
        double pps[2], cpu[2];
        for (int w = 0; w < 2; w++) {
            double tot[MAXREP];
            for (int k = 0; k < R->nrep; k++)
                tot[k] = R->cpu[w][0][k] + R->cpu[w][1][k] + R->cpu[w][2][k];
            pps[w] = median(R->pps[w], R->nrep);
            cpu[w] = median(tot, R->nrep);
        }
        printf("%-9s %-4s | %8.1f %8.1f %8.1f | %11.0f %7.1f | %11.0f %7.1f | "
               "%9.2f %9.2f\n", tnames[R->kind], R->load ? "on" : "off",
               median(R->rt_med, R->nrep), median(R->rt_p90, R->nrep),
               median(R->rt_p99, R->nrep), pps[0], pps[0] * PKT_LEN / 1e6,
               pps[1], pps[1] * PKT_LEN / 1e6, cpu[0], cpu[1]);
    }
    printf("\nCPU us per packet by process (A / S / B), median of %d runs:\n",
           reps);
    for (int r = 0; r < nrows; r++) {
        struct row *R = &rows[r];
        printf("%-9s %-4s |", tnames[R->kind], R->load ? "on" : "off");
        for (int w = 0; w < 2; w++)
            printf("  W=%-3d %5.2f / %5.2f / %5.2f%s", win[w],
                   median(R->cpu[w][0], R->nrep), median(R->cpu[w][1], R->nrep),
                   median(R->cpu[w][2], R->nrep), w ? "" : "  |");
        printf("\n");
    }
    printf("\nSpread over the %d runs (min..max): rt median us | pkt/s W=%d | "
           "pkt/s W=%d | max CPUs used by other processes\n", reps, win[0],
           win[1]);
    for (int r = 0; r < nrows; r++) {
        struct row *R = &rows[r];
        double lo[3], hi[3];
        const double *v[3] = { R->rt_med, R->pps[0], R->pps[1] };
        for (int m = 0; m < 3; m++) {
            lo[m] = hi[m] = v[m][0];
            for (int k = 1; k < R->nrep; k++) {
                if (v[m][k] < lo[m]) lo[m] = v[m][k];
                if (v[m][k] > hi[m]) hi[m] = v[m][k];
            }
        }
        printf("%-9s %-4s | %6.1f..%-6.1f | %8.0f..%-8.0f | %8.0f..%-8.0f | "
               "%.2f%s\n", tnames[R->kind], R->load ? "on" : "off", lo[0],
               hi[0], lo[1], hi[1], lo[2], hi[2], R->other,
               R->other > OTHER_WARN ? "  BUSY" : "");
    }
    for (int r = 0; r < nrows; r++)
        if (rows[r].other > OTHER_WARN) {
            printf("WARNING: other processes used the CPUs during some runs "
                   "(BUSY above); measure again on a quiet machine.\n");
            break;
        }
    fprintf(stderr, "transport-proto: total time %.0f s\n", now_s() - t_begin);
    return 0;
}
