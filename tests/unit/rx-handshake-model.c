/* SPDX-License-Identifier: MIT */
/*
 * A host-only model of the receive-slot handshake of seed 002 section
 * 3.2.2, without QEMU: a producer thread (the NIU) writes a slot's body,
 * then its header, only into a slot whose header is 0; the consumer (the
 * guest) waits for the valid bit, checks the body and clears the header;
 * N slots of 128 bytes, in THP-advised anonymous memory as QEMU's guest
 * RAM is, with optional spinning threads competing for the cores.  A
 * valid header over a body that is not the expected message means a
 * store was lost or undone below the program: docs/guest.md ("Known
 * problems") uses it to rule the host out.
 *
 * Usage: rx-handshake-model [MESSAGES [SPINNERS]]   (default 5000000 1)
 * Prints "N passed, N failed" on its last line; exits 0 only if no
 * message was wrong.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "arctic/niu-hw.h"

enum { MAX_SPINNERS = 8, PAYLOAD_WORDS = 4 };

static struct arctic_mpi_slot *queue;
static uint64_t total;
static atomic_bool stop;

static uint32_t word(uint64_t m, unsigned i)
{
    return (uint32_t)m * 2654435761u + i;
}

static void *producer(void *unused)
{
    uint64_t m = 0;
    unsigned idx = 0, i;

    (void)unused;
    while (m < total) {
        struct arctic_mpi_slot *s = &queue[idx];

        if (__atomic_load_n(&s->header, __ATOMIC_ACQUIRE) & ARCTIC_MPI_VALID) {
            continue;
        }
        s->command[0] = (uint32_t)m;
        s->command[1] = ~(uint32_t)m;
        for (i = 0; i < PAYLOAD_WORDS; i++) {
            s->payload[i] = word(m, i);
        }
        __atomic_store_n(&s->header, ARCTIC_MPI_VALID | PAYLOAD_WORDS,
                         __ATOMIC_RELEASE);
        idx = (idx + 1) % ARCTIC_N;
        m++;
    }
    return NULL;
}

static void *spinner(void *unused)
{
    (void)unused;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        __asm__ volatile("" ::: "memory");
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int spinners = argc > 2 ? atoi(argv[2]) : 1;
    size_t huge = 2u << 20;
    pthread_t prod, spin[MAX_SPINNERS];
    struct timespec t0, t1;
    uint64_t m, wrong = 0;
    unsigned idx = 0, i;
    double seconds;
    char *raw, *aligned;

    total = argc > 1 ? strtoull(argv[1], NULL, 0) : 5000000u;
    if (spinners < 0 || spinners > MAX_SPINNERS || !total) {
        fprintf(stderr, "usage: rx-handshake-model [MESSAGES [SPINNERS "
                "0..%d]]\n", MAX_SPINNERS);
        return 2;
    }
    raw = mmap(NULL, 2 * huge, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    aligned = (char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    madvise(aligned, huge, MADV_HUGEPAGE);
    queue = (struct arctic_mpi_slot *)(aligned + ARCTIC_RX_REGION_ALIGN);
    memset(queue, 0, ARCTIC_N * sizeof(*queue));

    for (i = 0; i < (unsigned)spinners; i++) {
        pthread_create(&spin[i], NULL, spinner, NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_create(&prod, NULL, producer, NULL);
    for (m = 0; m < total; m++) {
        struct arctic_mpi_slot *s = &queue[idx];
        bool right;

        while (!(__atomic_load_n(&s->header, __ATOMIC_ACQUIRE) &
                 ARCTIC_MPI_VALID)) {
        }
        right = s->command[0] == (uint32_t)m &&
                s->command[1] == ~(uint32_t)m;
        for (i = 0; right && i < PAYLOAD_WORDS; i++) {
            right = s->payload[i] == word(m, i);
        }
        if (!right && wrong++ < 5) {
            printf("message %llu at slot %u: found message %u\n",
                   (unsigned long long)m, idx, s->command[0]);
        }
        __atomic_store_n(&s->header, 0, __ATOMIC_RELEASE);
        idx = (idx + 1) % ARCTIC_N;
    }
    pthread_join(prod, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    atomic_store(&stop, true);
    for (i = 0; i < (unsigned)spinners; i++) {
        pthread_join(spin[i], NULL);
    }
    seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("rx-handshake-model: %llu messages in %.2f s with %d spinner(s)\n",
           (unsigned long long)total, seconds, spinners);
    printf("%llu passed, %llu failed\n", (unsigned long long)(total - wrong),
           (unsigned long long)wrong);
    return wrong != 0;
}
