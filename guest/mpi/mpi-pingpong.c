/* SPDX-License-Identifier: MIT */
/*
 * mpi-pingpong: MPI round-trip latency and bandwidth between rank 0 and
 * rank 1 (other ranks wait at the final barrier).  For each size from 0 to
 * MAX bytes (powers of two, and 0) rank 0 sends -n messages one at a time
 * (fewer above 4 KiB: -n x 4096 / size, at least 10, so that a 1 MiB row
 * takes seconds, not minutes, on an emulated network) and waits for each
 * echo; every byte of every echo is checked against the
 * pattern of its size and iteration.  Prints one row per size: the median,
 * mean and 99th percentile round trip in microseconds and the bandwidth of
 * the median (2 x size / round trip, MB/s).  Exit status 1 on any wrong
 * byte.  Usage: mpi-pingpong [-n ITERATIONS] [-m MAX_BYTES]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned char pattern(size_t size, int iter, size_t i)
{
	return (unsigned char)(i * 31u + (size_t)iter * 7u + size);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int rank, size, iters = 200, c, it, bad = 0;
	size_t max = 1 << 20, len, i;
	unsigned char *buf;
	double *rt;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	while ((c = getopt(argc, argv, "n:m:h")) != -1) {
		switch (c) {
		case 'n':
			iters = atoi(optarg);
			break;
		case 'm':
			max = (size_t)strtoul(optarg, NULL, 10);
			break;
		default:
			if (rank == 0)
				fprintf(stderr, "usage: mpi-pingpong [-n ITERATIONS] [-m MAX_BYTES]\n");
			MPI_Finalize();
			return c == 'h' ? 0 : 2;
		}
	}
	if (size < 2 || iters < 1 || max > (64u << 20)) {
		if (rank == 0)
			fprintf(stderr, "mpi-pingpong: wants 2 ranks or more, -n >= 1 and -m <= 64 MiB\n");
		MPI_Finalize();
		return 2;
	}
	buf = malloc(max ? max : 1);
	rt = malloc(sizeof(*rt) * (size_t)iters);
	if (!buf || !rt)
		MPI_Abort(MPI_COMM_WORLD, 3);
	if (rank == 0)
		printf("mpi-pingpong: %d iterations per size (fewer above 4 KiB), rank 0 <-> rank 1\n"
		       "%10s %12s %12s %12s %12s\n", iters, "bytes",
		       "median_us", "mean_us", "p99_us", "MB/s");
	for (len = 0; len <= max; len = len ? len * 2 : 1) {
		double sum = 0.0;
		int n = iters;

		if (len > 4096 && (size_t)n * 4096 / len < (size_t)n) {
			n = (int)((size_t)n * 4096 / len);
			if (n < 10)
				n = iters < 10 ? iters : 10;
		}
		for (it = 0; it < n && rank < 2; it++) {
			if (rank == 0) {
				double t0;

				for (i = 0; i < len; i++)
					buf[i] = pattern(len, it, i);
				t0 = MPI_Wtime();
				MPI_Send(buf, (int)len, MPI_BYTE, 1, it, MPI_COMM_WORLD);
				MPI_Recv(buf, (int)len, MPI_BYTE, 1, it, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				rt[it] = (MPI_Wtime() - t0) * 1e6;
				sum += rt[it];
				for (i = 0; i < len; i++)
					if (buf[i] != (unsigned char)~pattern(len, it, i)) {
						bad++;
						break;
					}
			} else {
				MPI_Recv(buf, (int)len, MPI_BYTE, 0, it, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				for (i = 0; i < len; i++) {
					if (buf[i] != pattern(len, it, i)) {
						bad++;
						break;
					}
				}
				for (i = 0; i < len; i++)
					buf[i] = (unsigned char)~buf[i];
				MPI_Send(buf, (int)len, MPI_BYTE, 0, it, MPI_COMM_WORLD);
			}
		}
		if (rank == 0) {
			double med;

			qsort(rt, (size_t)n, sizeof(*rt), cmp);
			med = rt[n / 2];
			printf("%10zu %12.1f %12.1f %12.1f %12.2f\n", len, med,
			       sum / n, rt[(n * 99) / 100],
			       med > 0 ? 2.0 * (double)len / med : 0.0);
			fflush(stdout);
		}
		if (len == max)
			break;
	}
	MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi-pingpong: %s (%d wrong messages)\n",
		       bad ? "FAILED" : "every byte right", bad);
	free(buf);
	free(rt);
	MPI_Finalize();
	return bad ? 1 : 0;
}
