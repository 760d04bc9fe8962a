/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the shared-memory link rings (include/arctic/link-ring.h):
 * copying across the wrap, full and empty rings, what an untrusted peer
 * can do to the indices and the area header, and the sleep/kick protocol
 * between two threads that each sleep on an eventfd, as the NIU's link
 * thread and the switch do.  A lost wake-up shows as a sleep that runs
 * into its timeout, which fails the test; so does a byte out of order.
 */
#include <glib.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "arctic/link-ring.h"

static void *area_new(uint32_t data_size)
{
    void *area = g_malloc0(arctic_ring_area_size(data_size));

    arctic_ring_area_init(area, data_size);
    return area;
}

static void test_ring_wrap(void)
{
    enum { SIZE = 256 };
    void *area = area_new(SIZE);
    struct arctic_ring prod, cons;
    uint8_t in[SIZE * 2], out[SIZE * 2];
    unsigned i, round;
    uint32_t n = 0;

    g_assert_true(arctic_ring_area_check(area, arctic_ring_area_size(SIZE),
                                         &n));
    g_assert_cmpuint(n, ==, SIZE);
    arctic_ring_attach(&prod, area, n, ARCTIC_RING_TO_NIU);
    arctic_ring_attach(&cons, area, n, ARCTIC_RING_TO_NIU);
    for (i = 0; i < sizeof(in); i++) {
        in[i] = i * 7 + 3;
    }
    g_assert_cmpuint(arctic_ring_read(&cons, out, sizeof(out)), ==, 0);
    /* Odd sizes walk the indices across the wrap many times. */
    for (round = 0; round < 50; round++) {
        size_t len = 1 + (round * 37) % 200;

        g_assert_cmpuint(arctic_ring_write(&prod, in + round, len), ==, len);
        g_assert_cmpuint(arctic_ring_used(&cons), ==, len);
        g_assert_cmpuint(arctic_ring_read(&cons, out, sizeof(out)), ==, len);
        g_assert_cmpmem(out, len, in + round, len);
    }
    /* A full ring takes what fits and no more. */
    g_assert_cmpuint(arctic_ring_write(&prod, in, sizeof(in)), ==, SIZE);
    g_assert_cmpuint(arctic_ring_room(&prod), ==, 0);
    g_assert_cmpuint(arctic_ring_write(&prod, in, 1), ==, 0);
    g_assert_cmpuint(arctic_ring_read(&cons, out, 10), ==, 10);
    g_assert_cmpuint(arctic_ring_room(&prod), ==, 10);
    g_assert_cmpuint(arctic_ring_read(&cons, out + 10, sizeof(out)), ==,
                     SIZE - 10);
    g_assert_cmpmem(out, SIZE, in, SIZE);
    /* The other direction is untouched. */
    g_assert_cmpuint(((struct arctic_ring_area *)area)->
                     ctl[ARCTIC_RING_TO_SWITCH].head, ==, 0);
    g_free(area);
}

/* A peer that writes nonsense into the shared indices breaks the ring. */
static void test_ring_hostile_peer(void)
{
    enum { SIZE = 128 };
    void *area = area_new(SIZE);
    struct arctic_ring_area *a = area;
    struct arctic_ring prod, cons;
    uint8_t buf[SIZE];

    arctic_ring_attach(&prod, area, SIZE, ARCTIC_RING_TO_SWITCH);
    arctic_ring_attach(&cons, area, SIZE, ARCTIC_RING_TO_SWITCH);
    memset(buf, 0x5a, sizeof(buf));
    /* A head further than a ring's worth ahead of our tail. */
    a->ctl[ARCTIC_RING_TO_SWITCH].head = SIZE + 1;
    g_assert_cmpuint(arctic_ring_used(&cons), ==, ARCTIC_RING_BROKEN);
    g_assert_cmpuint(arctic_ring_read(&cons, buf, sizeof(buf)), ==,
                     ARCTIC_RING_BROKEN);
    /* A tail past our head. */
    a->ctl[ARCTIC_RING_TO_SWITCH].tail = 5;
    g_assert_cmpuint(arctic_ring_write(&prod, buf, 1), ==, ARCTIC_RING_BROKEN);
    g_assert_cmpuint(arctic_ring_room(&prod), ==, 0);
    /* Our own index is ours: a peer rewinding it changes nothing here. */
    a->ctl[ARCTIC_RING_TO_SWITCH].tail = 0;
    a->ctl[ARCTIC_RING_TO_SWITCH].head = 0;
    g_assert_cmpuint(arctic_ring_write(&prod, buf, 10), ==, 10);
    g_assert_cmpuint(arctic_ring_read(&cons, buf, sizeof(buf)), ==, 10);
    a->ctl[ARCTIC_RING_TO_SWITCH].tail = 0;
    g_assert_cmpuint(arctic_ring_used(&cons), ==, 0);
    g_free(area);
}

static void test_ring_area_check(void)
{
    enum { SIZE = 1024 };
    size_t size = arctic_ring_area_size(SIZE);
    struct arctic_ring_area *a = area_new(SIZE);
    uint32_t n = 0;

    g_assert_true(arctic_ring_area_check(a, size, &n));
    g_assert_false(arctic_ring_area_check(a, size - 1, &n));
    g_assert_false(arctic_ring_area_check(a, sizeof(*a) - 1, &n));
    a->magic++;
    g_assert_false(arctic_ring_area_check(a, size, &n));
    a->magic--;
    a->version++;
    g_assert_false(arctic_ring_area_check(a, size, &n));
    a->version--;
    a->data_size = SIZE - 1;            /* not a power of two */
    g_assert_false(arctic_ring_area_check(a, size, &n));
    a->data_size = 0;
    g_assert_false(arctic_ring_area_check(a, size, &n));
    a->data_size = 1u << 31;            /* larger than the area */
    g_assert_false(arctic_ring_area_check(a, size, &n));
    a->data_size = SIZE;
    g_assert_true(arctic_ring_area_check(a, size, &n));
    g_free(a);
}

/*
 * The sleep and kick protocol step by step, in the interleavings that
 * matter: each party looks a last time after saying it sleeps, so bytes or
 * room that came between its last read and its flag are never slept on.
 */
static void test_ring_sleep_protocol(void)
{
    enum { SIZE = 64 };
    void *area = area_new(SIZE);
    struct arctic_ring prod, cons;
    uint8_t buf[SIZE];

    memset(buf, 1, sizeof(buf));
    arctic_ring_attach(&prod, area, SIZE, ARCTIC_RING_TO_NIU);
    arctic_ring_attach(&cons, area, SIZE, ARCTIC_RING_TO_NIU);

    /* Nobody sleeps: no kick. */
    g_assert_cmpuint(arctic_ring_write(&prod, buf, 1), ==, 1);
    g_assert_false(arctic_ring_wake_consumer(&prod));
    g_assert_cmpuint(arctic_ring_read(&cons, buf, SIZE), ==, 1);

    /* Empty: the consumer may sleep, and the next write kicks it once. */
    g_assert_true(arctic_ring_consumer_sleep(&cons));
    g_assert_cmpuint(arctic_ring_write(&prod, buf, 1), ==, 1);
    g_assert_true(arctic_ring_wake_consumer(&prod));
    g_assert_cmpuint(arctic_ring_write(&prod, buf, 1), ==, 1);
    g_assert_false(arctic_ring_wake_consumer(&prod));
    g_assert_cmpuint(arctic_ring_read(&cons, buf, SIZE), ==, 2);

    /*
     * The race: the consumer found the ring empty, then the producer wrote
     * (no flag yet, so no kick), then the consumer says it sleeps.  Its
     * last look must see the byte, or it would sleep on it for ever.
     */
    g_assert_cmpuint(arctic_ring_read(&cons, buf, SIZE), ==, 0);
    g_assert_cmpuint(arctic_ring_write(&prod, buf, 1), ==, 1);
    g_assert_false(arctic_ring_wake_consumer(&prod));
    g_assert_false(arctic_ring_consumer_sleep(&cons));
    /* ...and it took its flag back: no kick for a consumer awake. */
    g_assert_cmpuint(arctic_ring_write(&prod, buf, 1), ==, 1);
    g_assert_false(arctic_ring_wake_consumer(&prod));
    g_assert_cmpuint(arctic_ring_read(&cons, buf, SIZE), ==, 2);

    /* The same for room: fill, then the producer waits for it. */
    g_assert_cmpuint(arctic_ring_write(&prod, buf, SIZE), ==, SIZE);
    g_assert_false(arctic_ring_wake_producer(&cons));
    g_assert_true(arctic_ring_producer_wait(&prod, 1));
    g_assert_cmpuint(arctic_ring_read(&cons, buf, 8), ==, 8);
    g_assert_true(arctic_ring_wake_producer(&cons));
    g_assert_cmpuint(arctic_ring_read(&cons, buf, 8), ==, 8);
    g_assert_false(arctic_ring_wake_producer(&cons));
    /* Room came between the producer's failed write and its flag. */
    g_assert_cmpuint(arctic_ring_write(&prod, buf, SIZE), ==, 16);
    g_assert_cmpuint(arctic_ring_read(&cons, buf, 4), ==, 4);
    g_assert_false(arctic_ring_wake_producer(&cons));
    g_assert_false(arctic_ring_producer_wait(&prod, 1));
    /* Not enough room for what it wants is still a wait. */
    g_assert_true(arctic_ring_producer_wait(&prod, 5));
    g_free(area);
}

/* --- two threads, each sleeping on its own eventfd ---------------------- */

enum {
    STRESS_RING = 4096,         /* small: full and empty many times */
    STRESS_BYTES = 64 << 20,
    STRESS_SLEEP_MS = 5000,     /* a sleep this long is a lost wake-up */
};

typedef struct {
    void *area;
    int producer_fd, consumer_fd;   /* eventfds each one sleeps on */
    bool timed_out;
    /* [0] producer, [1] consumer: kicks given, and times it said it
     * would sleep (each may earn one kick, slept or not). */
    uint64_t kicks[2], sleeps[2], tries[2];
} Stress;

static void kick(int fd)
{
    uint64_t one = 1;

    g_assert_cmpint(write(fd, &one, sizeof(one)), ==, sizeof(one));
}

/* Sleep on @fd; false if nobody kicked it in time. */
static bool sleep_on(int fd)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    uint64_t value;

    if (poll(&pfd, 1, STRESS_SLEEP_MS) != 1) {
        return false;
    }
    g_assert_cmpint(read(fd, &value, sizeof(value)), ==, sizeof(value));
    return true;
}

static uint8_t stream_byte(uint64_t i)
{
    return (uint8_t)(i * 2654435761u >> 13);
}

static gpointer stress_producer(gpointer opaque)
{
    Stress *s = opaque;
    struct arctic_ring r;
    uint8_t chunk[1500];
    uint64_t sent = 0;
    uint32_t seed = 1;

    arctic_ring_attach(&r, s->area, STRESS_RING, ARCTIC_RING_TO_SWITCH);
    while (sent < STRESS_BYTES && !s->timed_out) {
        size_t len, i, n;

        seed = seed * 1103515245 + 12345;
        len = 1 + (seed >> 8) % sizeof(chunk);
        for (i = 0; i < len; i++) {
            chunk[i] = stream_byte(sent + i);
        }
        for (i = 0; i < len && !s->timed_out; i += n) {
            n = arctic_ring_write(&r, chunk + i, len - i);
            g_assert_cmpuint(n, !=, ARCTIC_RING_BROKEN);
            if (n && arctic_ring_wake_consumer(&r)) {
                s->kicks[0]++;
                kick(s->consumer_fd);
            }
            if (!n && (s->tries[0]++, arctic_ring_producer_wait(&r, 1))) {
                s->sleeps[0]++;
                if (!sleep_on(s->producer_fd)) {
                    s->timed_out = true;
                }
            }
        }
        sent += len;
    }
    return NULL;
}

static gpointer stress_consumer(gpointer opaque)
{
    Stress *s = opaque;
    struct arctic_ring r;
    uint8_t buf[3000];
    uint64_t got = 0;

    arctic_ring_attach(&r, s->area, STRESS_RING, ARCTIC_RING_TO_SWITCH);
    while (got < STRESS_BYTES && !s->timed_out) {
        size_t n = arctic_ring_read(&r, buf, 1 + got % sizeof(buf));
        size_t i;

        g_assert_cmpuint(n, !=, ARCTIC_RING_BROKEN);
        for (i = 0; i < n; i++) {
            if (buf[i] != stream_byte(got + i)) {
                g_error("byte %" G_GUINT64_FORMAT " wrong", got + i);
            }
        }
        got += n;
        if (n && arctic_ring_wake_producer(&r)) {
            s->kicks[1]++;
            kick(s->producer_fd);
        }
        if (!n && (s->tries[1]++, arctic_ring_consumer_sleep(&r))) {
            s->sleeps[1]++;
            if (!sleep_on(s->consumer_fd)) {
                s->timed_out = true;
            }
        }
    }
    return NULL;
}

static void test_ring_two_threads(void)
{
    Stress s = { .area = area_new(STRESS_RING) };
    GThread *prod, *cons;

    s.producer_fd = eventfd(0, EFD_CLOEXEC);
    s.consumer_fd = eventfd(0, EFD_CLOEXEC);
    g_assert_cmpint(s.producer_fd, >=, 0);
    g_assert_cmpint(s.consumer_fd, >=, 0);
    cons = g_thread_new("consumer", stress_consumer, &s);
    prod = g_thread_new("producer", stress_producer, &s);
    g_thread_join(prod);
    g_thread_join(cons);
    g_test_message("%d MiB through a %d-byte ring: producer slept %"
                   G_GUINT64_FORMAT " times, consumer %" G_GUINT64_FORMAT
                   "; kicks %" G_GUINT64_FORMAT " and %" G_GUINT64_FORMAT,
                   STRESS_BYTES >> 20, STRESS_RING, s.sleeps[0], s.sleeps[1],
                   s.kicks[0], s.kicks[1]);
    g_assert_false(s.timed_out);
    /* Kicks only for a party that said it would sleep, one each time. */
    g_assert_cmpuint(s.kicks[0], <=, s.tries[1]);
    g_assert_cmpuint(s.kicks[1], <=, s.tries[0]);
    g_assert_cmpuint(s.sleeps[0] + s.sleeps[1], >, 0);
    close(s.producer_fd);
    close(s.consumer_fd);
    g_free(s.area);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/link-ring/wrap", test_ring_wrap);
    g_test_add_func("/link-ring/hostile-peer", test_ring_hostile_peer);
    g_test_add_func("/link-ring/area-check", test_ring_area_check);
    g_test_add_func("/link-ring/sleep-protocol", test_ring_sleep_protocol);
    g_test_add_func("/link-ring/two-threads", test_ring_two_threads);
    return g_test_run();
}
