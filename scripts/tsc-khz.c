/* SPDX-License-Identifier: MIT */
/*
 * arctic-tsc-khz: print this host's TSC frequency in kHz.
 *
 * Under TCG a guest's TSC is the host's, and a guest kernel calibrates it
 * at boot against the PIT and the ACPI PM timer.  On a host whose cores
 * are all taken (64 nodes booting on 2 cores) that calibration can fail,
 * and Linux then believes the PIT's figure even when the PM timer
 * disagrees ("tsc: PIT calibration deviates from PMTIMER: 63676
 * 2096030"): the guest's clock runs 30 times too fast.  The launcher
 * (scripts/niu-cluster-host) measures the frequency here, where it is
 * cheap, and gives it to the guests as tsc_early_khz=.
 *
 * The TSC is read around CLOCK_MONOTONIC over 100 ms, five times; the
 * median is printed.  Exit status 1 if the CPU has no usable TSC.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    enum { ROUNDS = 5 };
    const struct timespec interval = { 0, 100 * 1000 * 1000 };
    uint64_t khz[ROUNDS];
    int i;

    if (argc > 1) {
        int help = !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help");

        fprintf(help ? stdout : stderr,
                "Usage: arctic-tsc-khz\n"
                "Prints this host's TSC frequency in kHz (the value of a TCG "
                "guest's\ntsc_early_khz=), measured against CLOCK_MONOTONIC "
                "over 5 x 100 ms.\n");
        return help ? 0 : 2;
    }
    for (i = 0; i < ROUNDS; i++) {
        uint64_t t0 = now_ns(), c0 = __rdtsc(), t1, c1;

        nanosleep(&interval, NULL);
        t1 = now_ns();
        c1 = __rdtsc();
        if (t1 <= t0 || c1 <= c0) {
            fprintf(stderr, "arctic-tsc-khz: the TSC does not advance\n");
            return 1;
        }
        khz[i] = (c1 - c0) * 1000000ull / (t1 - t0);
    }
    qsort(khz, ROUNDS, sizeof(khz[0]), cmp_u64);
    printf("%llu\n", (unsigned long long)khz[ROUNDS / 2]);
    return 0;
}
