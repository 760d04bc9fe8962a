/* SPDX-License-Identifier: MIT */
/*
 * cpi: pi by the midpoint rule on 1/(1+x^2) over [0,1], the classic first
 * MPI program (MPICH ships one like it as examples/cpi.c; Debian's package
 * does not).  Rank 0 broadcasts the number of intervals, every rank sums
 * every size-th interval, MPI_Reduce adds the parts on rank 0, which prints
 * pi, its error and the time, and exits 1 when the error is above 1e-9
 * (with the default 1,000,000 intervals it is ~1e-13), so a run that lost
 * or doubled a rank's part fails.  Usage: cpi [INTERVALS]
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	const double pi25 = 3.141592653589793238462643;
	int rank, size, namelen, i;
	long n = 1000000;
	double h, sum = 0.0, mine, pi = 0.0, t0, err;
	char name[MPI_MAX_PROCESSOR_NAME];

	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Get_processor_name(name, &namelen);
	printf("cpi: rank %d of %d on %s\n", rank, size, name);
	fflush(stdout);
	if (rank == 0 && argc > 1) {
		n = strtol(argv[1], NULL, 10);
		if (n < 1) {
			fprintf(stderr, "cpi: INTERVALS must be at least 1, not '%s'\n",
				argv[1]);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	t0 = MPI_Wtime();
	MPI_Bcast(&n, 1, MPI_LONG, 0, MPI_COMM_WORLD);
	h = 1.0 / (double)n;
	for (i = rank; i < n; i += size) {
		double x = h * ((double)i + 0.5);

		sum += 4.0 / (1.0 + x * x);
	}
	mine = h * sum;
	MPI_Reduce(&mine, &pi, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		err = fabs(pi - pi25);
		printf("cpi: pi is approximately %.16f, error %.3e, %ld intervals, %d ranks, %.6f s\n",
		       pi, err, n, size, MPI_Wtime() - t0);
		if (err > 1e-9) {
			printf("cpi: FAILED: the error is above 1e-9\n");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	MPI_Finalize();
	return 0;
}
