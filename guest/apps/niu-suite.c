/* SPDX-License-Identifier: MIT */
/*
 * niu-suite: the parallel application suite of seed 001 (Cranium thesis,
 * chapter 6) on libniu's message passing: dense matrix multiply, FFT,
 * Gaussian elimination, Jacobi relaxation and integer sort, at the input
 * sizes of its Table 6.2 unless told otherwise.  Every node generates its
 * share of the input from a hash of the element's global index (the data
 * set is already distributed, as it is in the thesis), so node 0 can build
 * the whole input again for the serial run.  The parallel time runs from a
 * barrier to a barrier and holds the kernel's own communication; the
 * results are then gathered on node 0 (untimed), which runs the serial
 * version on one node, compares (exactly for sort, with a tolerance for
 * floating point) and prints size, nodes, both times, speedup and
 * PASS/FAIL.  Nodes other than 0 sleep while it does, so that TCG guests
 * sharing few host cores do not slow the serial run down.  Every node
 * then prints where its parallel time went, from libniu's time accounting
 * (niu_stats_time()): computing, sending, receiving, waiting, the closing
 * barrier.
 */
#include <complex.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "niu.h"
#include "uapi/arctic_niu.h"

/* A kernel's inputs and the run's endpoint. */
struct run {
	struct niu_endpoint ep;
	uint32_t nodes, me;
	unsigned int size;	/* the kernel's size parameter */
	unsigned int iterations;	/* Jacobi only */
	double parallel_s, serial_s;
	uint64_t parallel_ns, serial_ns;
	int pass;
	bool by_dma;		/* FFT: the transpose went by remote DMA */
	/* libniu's time by kind in the parallel part (niu_stats_time()) */
	uint64_t time_ns[NIU_TIME_KINDS];
};

/* Deterministic inputs: splitmix64 of (stream, index). */
static uint64_t hash(uint32_t stream, uint64_t index)
{
	uint64_t z = index * 0x9e3779b97f4a7c15ull +
		     ((uint64_t)stream << 56) + 0x632be59bd9b4e019ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* In [-1, 1). */
static double input(uint32_t stream, uint64_t index)
{
	return (double)(hash(stream, index) >> 11) * 0x1p-52 - 1.0;
}

static uint64_t ns_since(uint64_t start_ns)
{
	return niu_now_ns() - start_ns;
}

static void die_on(int ret, const char *what)
{
	if (ret) {
		fprintf(stderr, "niu-suite: %s: %s\n", what, strerror(-ret));
		exit(1);
	}
}

/*
 * Wait for the guest kernel's next timer tick (the coarse clock moves at
 * each one).  Every timed part starts a fixed way after a tick, so that
 * the ticks, and the kernel work they wake, fall at the same points of a
 * kernel whatever ran before it: in timed mode a figure then moves only
 * with what the kernel does (docs/timed-mode.md, "One clock").  At most
 * one tick period (4 ms in the guest's kernel), spent before the clock is
 * read.
 */
static void after_tick(void)
{
	struct timespec seen, now;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &seen);
	do
		clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
	while (now.tv_nsec == seen.tv_nsec && now.tv_sec == seen.tv_sec);
}

/* A serial run's start: just after a tick, as the parallel part's. */
static uint64_t serial_begin(void)
{
	after_tick();
	return niu_now_ns();
}

/*
 * Start and stop the timed parallel part on every node.  Each node waits
 * for a tick before the barrier, not after: the barrier ends a fixed way
 * after the last node's tick, where a wait after it could part nodes that
 * leave it on either side of a tick by a whole period.
 */
static uint64_t parallel_begin(struct run *run)
{
	after_tick();
	die_on(niu_barrier(&run->ep), "barrier");
	/* Outside the window: counters before its clock read, after its end. */
	niu_stats_time(&run->ep, run->time_ns);
	return niu_now_ns();
}

static void parallel_end(struct run *run, uint64_t start)
{
	uint64_t end[NIU_TIME_KINDS];
	int k;

	die_on(niu_barrier(&run->ep), "barrier");
	run->parallel_ns = ns_since(start);
	run->parallel_s = run->parallel_ns * 1e-9;
	niu_stats_time(&run->ep, end);
	for (k = 0; k < NIU_TIME_KINDS; k++)
		run->time_ns[k] = end[k] - run->time_ns[k];
}

/*
 * This node's parallel time by what it did, one line for scripts/niu-study:
 * libniu's kinds, and computing as the rest of the window (the program's
 * work, the guest kernel's, and libniu's common path of a single send or
 * receive, which takes no time stamp).  In timed mode the times are
 * virtual; otherwise the host's, as every time of the fast mode.
 */
static void print_breakdown(const struct run *run, const char *kernel,
			    bool timed)
{
	const uint64_t *t = run->time_ns;
	int64_t compute = (int64_t)run->parallel_ns -
			  (int64_t)(t[NIU_TIME_SEND] + t[NIU_TIME_RECV] +
				    t[NIU_TIME_WAIT] + t[NIU_TIME_BARRIER]);

	printf("niu-suite: %-6s node=%u breakdown parallel_ns=%llu "
	       "compute_ns=%lld send_ns=%llu recv_ns=%llu wait_ns=%llu "
	       "barrier_ns=%llu (%s time)\n", kernel, run->me,
	       (unsigned long long)run->parallel_ns, (long long)compute,
	       (unsigned long long)t[NIU_TIME_SEND],
	       (unsigned long long)t[NIU_TIME_RECV],
	       (unsigned long long)t[NIU_TIME_WAIT],
	       (unsigned long long)t[NIU_TIME_BARRIER],
	       timed ? "virtual" : "host");
}

/*
 * Node 0 decides (the serial run and the comparison happen there while the
 * others sleep in the broadcast) and tells every node; then every node
 * waits as the launcher asked again (its idle sleep, NIU_IDLE_SLEEP_US).
 */
static void share_verdict(struct run *run)
{
	unsigned int launcher_sleep_us = run->ep.idle_sleep_us;
	uint32_t verdict = run->pass;

	niu_set_idle_sleep(&run->ep, run->me ? 1000 : 0);
	die_on(niu_bcast(&run->ep, 0, &verdict, 1), "verdict");
	niu_set_idle_sleep(&run->ep, launcher_sleep_us);
	run->pass = verdict;
}

static double max_abs_diff(const double *a, const double *b, size_t n)
{
	double worst = 0;
	size_t i;

	for (i = 0; i < n; i++)
		worst = fmax(worst, fabs(a[i] - b[i]));
	return worst;
}

/* --- dense matrix multiply: C = A B, order m, row blocks -------------- */

static void multiply_rows(const double *a, const double *b, double *c,
			  unsigned int rows, unsigned int m)
{
	unsigned int i, j, k;

	memset(c, 0, (size_t)rows * m * sizeof(double));
	for (i = 0; i < rows; i++)
		for (k = 0; k < m; k++)
			for (j = 0; j < m; j++)
				c[i * m + j] += a[i * m + k] * b[k * m + j];
}

static void dmm(struct run *run)
{
	unsigned int m = run->size, rows = m / run->nodes, i;
	size_t block = (size_t)rows * m, all = (size_t)m * m;
	double *a = malloc(block * 8), *b = malloc(all * 8);
	double *c = malloc(block * 8), *c_all = malloc(all * 8);
	const uint32_t **send = calloc(run->nodes, sizeof(*send));
	uint32_t **recv = calloc(run->nodes, sizeof(*recv)), p;
	size_t *words = calloc(run->nodes, sizeof(size_t));
	uint64_t start;

	for (i = 0; i < block; i++) {
		a[i] = input(1, run->me * block + i);
		b[run->me * block + i] = input(2, run->me * block + i);
	}
	start = parallel_begin(run);
	/* Everyone needs all of B: an all-gather of the row blocks. */
	for (p = 0; p < run->nodes; p++) {
		send[p] = (const uint32_t *)(b + run->me * block);
		recv[p] = (uint32_t *)(b + p * block);
		words[p] = 2 * block;
	}
	die_on(niu_alltoallv(&run->ep, send, words, recv, words), "B");
	multiply_rows(a, b, c, rows, m);
	parallel_end(run, start);
	die_on(niu_gather(&run->ep, 0, (uint32_t *)c, (uint32_t *)c_all,
			  2 * block), "gather C");
	if (run->me == 0) {
		double *a_all = calloc(all, 8), *c_serial = malloc(all * 8);

		for (i = 0; i < all; i++) {
			a_all[i] = input(1, i);
			b[i] = input(2, i);
		}
		start = serial_begin();
		multiply_rows(a_all, b, c_serial, m, m);
		run->serial_ns = ns_since(start);
		run->serial_s = run->serial_ns * 1e-9;
		run->pass = max_abs_diff(c_all, c_serial, all) <= 1e-12 * m;
		free(a_all);
		free(c_serial);
	}
	share_verdict(run);
	free(a);
	free(b);
	free(c);
	free(c_all);
	free(send);
	free(recv);
	free(words);
}

/* --- FFT: N = n1 n2 points, the transpose algorithm ------------------- */

/* In-place radix-2 FFT of @n (a power of 2) points, forward. */
static void fft_serial(double complex *x, size_t n)
{
	size_t i, j, bit, len, k;

	for (i = 1, j = 0; i < n; i++) {
		for (bit = n >> 1; j & bit; bit >>= 1)
			j ^= bit;
		j |= bit;
		if (i < j) {
			double complex t = x[i];

			x[i] = x[j];
			x[j] = t;
		}
	}
	for (len = 2; len <= n; len <<= 1) {
		double complex step = cexp(-2 * M_PI * I / len);

		for (i = 0; i < n; i += len) {
			double complex w = 1;

			for (k = 0; k < len / 2; k++) {
				double complex u = x[i + k];
				double complex v = x[i + k + len / 2] * w;

				x[i + k] = u + v;
				x[i + k + len / 2] = u - v;
				w *= step;
			}
		}
	}
}

/*
 * The transpose by remote DMA (seed 002 section 3.3), where it fits: y
 * (the blocks to send) and recvbuf (the blocks that come) both in the
 * endpoint's DMA window, each node's block in whole ARCTIC_D units.
 * Block p of y goes into node p's recvbuf at block me; each ARCTIC_D unit
 * is announced by a message of TYPE_FFT_BLOCK, so the transpose is done
 * when (nodes - 1) * units have come.  Bulk data moves as 64-byte DMA
 * packets, which the NIUs stream at several times the rate of 20-word
 * messages (niu-bench: DMA against MPI bandwidth).
 */
enum { TYPE_FFT_BLOCK = 1 };

struct fft_dma {
	uint64_t *peer_window;	/* each node's window address */
	size_t block_bytes;
};

/*
 * Window, addresses of the peers' windows: before the clock starts, as
 * the input is.  Returns false (messages then) if DMA cannot carry it.
 */
static bool fft_dma_setup(struct run *run, struct fft_dma *d,
			  size_t block_bytes)
{
	struct niu_endpoint *ep = &run->ep;
	uint32_t *mine, *all, p;
	int ret = 0;

	d->block_bytes = block_bytes;
	if (block_bytes % ARCTIC_D ||
	    2 * run->nodes * block_bytes > ARCTIC_NIU_DMA_WINDOW_SIZE)
		ret = -EINVAL;
	else if (!ep->dma_window)
		ret = niu_dma_window(ep);
	/* Every node must agree: -1 in the exchange says "not here". */
	mine = malloc(2 * run->nodes * sizeof(*mine));
	all = malloc(2 * run->nodes * sizeof(*all));
	for (p = 0; p < run->nodes; p++) {
		uint64_t base = ret ? UINT64_MAX : (uintptr_t)ep->dma_window;

		mine[2 * p] = (uint32_t)base;
		mine[2 * p + 1] = (uint32_t)(base >> 32);
	}
	die_on(niu_alltoall(ep, mine, all, 2), "DMA windows");
	d->peer_window = malloc(run->nodes * sizeof(*d->peer_window));
	for (p = 0; p < run->nodes; p++) {
		d->peer_window[p] = all[2 * p] | (uint64_t)all[2 * p + 1] << 32;
		if (d->peer_window[p] == UINT64_MAX)
			ret = -EINVAL;
	}
	free(mine);
	free(all);
	if (ret) {
		free(d->peer_window);
		d->peer_window = NULL;
	}
	return !ret;
}

/* y's block p -> node p's recvbuf, block me; recvbuf's own block copied. */
static void fft_dma_transpose(struct run *run, const struct fft_dma *d,
			      const char *y, char *recvbuf)
{
	struct niu_endpoint *ep = &run->ep;
	const size_t units = d->block_bytes / ARCTIC_D;
	const uint64_t recv_off = (uint64_t)(recvbuf - (char *)ep->dma_window);
	size_t u, expected = (run->nodes - 1) * units;
	struct niu_msg msg;
	uint32_t k, p;

	memcpy(recvbuf + run->me * d->block_bytes,
	       y + run->me * d->block_bytes, d->block_bytes);
	/* Unit by unit, each peer in turn, so that all streams move. */
	for (u = 0; u < units; u++) {
		for (k = 1; k < run->nodes; k++) {
			size_t off;

			p = (run->me + k) % run->nodes;
			off = p * d->block_bytes + u * ARCTIC_D;
			die_on(niu_dma_send(ep, p, ep->endpoint,
					    TYPE_FFT_BLOCK, (uint32_t)u,
					    d->peer_window[p] + recv_off +
					    run->me * d->block_bytes +
					    u * ARCTIC_D,
					    y + off, NULL, 0), "DMA transpose");
		}
	}
	while (expected--) {
		die_on(niu_recv(ep, NIU_HI, &msg), "DMA transpose");
		/* mode 1: the NIU refused that unit's data. */
		if (msg.type != TYPE_FFT_BLOCK || msg.mode != 0 ||
		    msg.command[0] >= units)
			die_on(-EPROTO, "DMA transpose notice");
	}
}

static double complex fft_input(size_t j)
{
	return input(3, j) + input(4, j) * I;
}

/*
 * x[j1 n2 + j2] -> X[k1 + n1 k2]: n1-point FFTs down the columns j2 this
 * node owns, twiddle by W_N^(j2 k1), transpose (all-to-all) so this node
 * owns rows k1, then n2-point FFTs along them.  As in the serial run, the
 * input is made before the clock starts and the twiddles of a column are
 * powers of one cexp(), not a cexp() each.
 */
static void fft(struct run *run)
{
	size_t n = run->size, n1, n2, cols, rows, j1, j2, k1, k2, i;
	uint32_t p, nodes = run->nodes, me = run->me;
	double complex *col, *in, *y, *recvbuf, *z, *x_all = NULL;
	struct fft_dma dma;
	bool by_dma;
	uint64_t start;

	for (n2 = 1; n2 * n2 < n; n2 <<= 1)
		;
	n1 = n / n2;		/* n1 = n2 or n2 / 2 */
	cols = n2 / nodes;
	rows = n1 / nodes;
	col = malloc(n1 * sizeof(*col));
	in = malloc(n1 * cols * sizeof(*in));		/* in[j2][j1] */
	by_dma = fft_dma_setup(run, &dma, rows * cols * sizeof(*y));
	run->by_dma = by_dma;
	if (by_dma) {
		y = run->ep.dma_window;			/* y[k1][j2] */
		recvbuf = y + n1 * cols;
	} else {
		y = malloc(n1 * cols * sizeof(*y));
		recvbuf = malloc(rows * n2 * sizeof(*y));
	}
	z = malloc(rows * n2 * sizeof(*y));		/* z[k1][k2] */

	for (j2 = 0; j2 < cols; j2++)
		for (j1 = 0; j1 < n1; j1++)
			in[j2 * n1 + j1] = fft_input(j1 * n2 + me * cols + j2);
	start = parallel_begin(run);
	for (j2 = 0; j2 < cols; j2++) {
		size_t g2 = me * cols + j2;
		double complex w = 1, step = cexp(-2 * M_PI * I * (double)g2 / n);

		memcpy(col, in + j2 * n1, n1 * sizeof(*col));
		fft_serial(col, n1);
		for (k1 = 0; k1 < n1; k1++) {
			y[k1 * cols + j2] = col[k1] * w;
			w *= step;
		}
	}
	/* y's block p (rows k1 of node p, our columns) goes to node p. */
	if (by_dma)
		fft_dma_transpose(run, &dma, (const char *)y, (char *)recvbuf);
	else
		die_on(niu_alltoall(&run->ep, (uint32_t *)y,
				    (uint32_t *)recvbuf, rows * cols * 4),
		       "transpose");
	for (k1 = 0; k1 < rows; k1++) {
		for (p = 0; p < nodes; p++)
			for (j2 = 0; j2 < cols; j2++)
				z[k1 * n2 + p * cols + j2] =
					recvbuf[(p * rows + k1) * cols + j2];
		fft_serial(z + k1 * n2, n2);
	}
	parallel_end(run, start);

	if (me == 0)
		x_all = malloc(n * sizeof(*x_all));
	die_on(niu_gather(&run->ep, 0, (uint32_t *)z, (uint32_t *)x_all,
			  rows * n2 * 4), "gather X");
	if (me == 0) {
		double complex *x = malloc(n * sizeof(*x));
		double worst = 0, biggest = 0;

		for (i = 0; i < n; i++)
			x[i] = fft_input(i);
		start = serial_begin();
		fft_serial(x, n);
		run->serial_ns = ns_since(start);
		run->serial_s = run->serial_ns * 1e-9;
		/* x_all holds z[k1][k2] row after row: X[k1 + n1 k2]. */
		for (k1 = 0; k1 < n1; k1++) {
			for (k2 = 0; k2 < n2; k2++) {
				double complex got = x_all[k1 * n2 + k2];

				worst = fmax(worst, cabs(got - x[k1 + n1 * k2]));
				biggest = fmax(biggest, cabs(x[k1 + n1 * k2]));
			}
		}
		run->pass = worst <= 1e-9 * biggest;
		free(x);
	}
	share_verdict(run);
	free(col);
	free(in);
	if (by_dma) {
		free(dma.peer_window);
	} else {
		free(y);
		free(recvbuf);
	}
	free(z);
	free(x_all);
}

/* --- Gaussian elimination: order m, Gauss-Jordan on row blocks -------- */

/* Row i of [A | b], diagonally dominant so no pivoting is needed. */
static void gauss_row(unsigned int m, unsigned int i, double *row)
{
	unsigned int j;

	for (j = 0; j <= m; j++)
		row[j] = input(5, (uint64_t)i * (m + 1) + j);
	row[i] += m;
}

/*
 * Phase @k's pivot row: scale columns k..m of @row by the reciprocal of its
 * column k (one division, then multiplications, as seed 001 §6.2.2 does on
 * the 88100) and copy them to @pivot (indexed by column) for the others.
 */
static void make_pivot(double *row, double *pivot, unsigned int k,
		       unsigned int m)
{
	double r = 1.0 / row[k];
	unsigned int j;

	for (j = k; j <= m; j++)
		pivot[j] = row[j] *= r;
}

/* Subtract the multiple of the (scaled) @pivot row that zeroes column @k. */
static void eliminate(double *row, const double *pivot, unsigned int k,
		      unsigned int m)
{
	double factor = row[k];
	unsigned int j;

	for (j = k; j <= m; j++)
		row[j] -= factor * pivot[j];
}

/*
 * Seed 001 §6.2.2's Gauss: each node holds a block of m / p rows; phase k
 * scales row k (the pivot row), broadcasts its columns k..m down a tree
 * (one value fewer each phase) and zeroes column k of every other row,
 * above as below, so that after m phases x is the right-hand side and no
 * back-substitution (nor its m broadcasts of one value) is needed.  Every
 * row takes part in every phase, so the blocks stay balanced.  The owner
 * of row k + 1 eliminates that row first, scales it and sends it before
 * it eliminates its other rows: the next pivot travels while everyone
 * computes (the thesis's overlap of the broadcast with the
 * multiplications).  The broadcasts keep their order on every node, so
 * libniu's epochs match them.
 */
static void gauss(struct run *run)
{
	unsigned int m = run->size, nodes = run->nodes, me = run->me;
	unsigned int mine = m / nodes, first = me * mine, i, k;
	size_t width = m + 1;
	double *rows = malloc(mine * width * 8), *x = malloc(mine * 8);
	double *pivot[2] = { malloc(width * 8), malloc(width * 8) }, *p;
	double *x_all;
	uint64_t start;

	for (i = 0; i < mine; i++)
		gauss_row(m, first + i, rows + i * width);
	start = parallel_begin(run);
	if (me == 0)
		make_pivot(rows, pivot[0], 0, m);
	for (k = 0; k < m; k++) {
		bool next_mine = k + 1 < m && (k + 1) / mine == me;

		p = pivot[k & 1];
		/* Pivot k: already sent from here if this node owns it. */
		if (k == 0 || k / mine != me)
			die_on(niu_bcast(&run->ep, k / mine,
					 (uint32_t *)(p + k), 2 * (width - k)),
			       "pivot row");
		if (next_mine) {
			double *row = rows + (k + 1 - first) * width;

			eliminate(row, p, k, m);
			make_pivot(row, pivot[(k + 1) & 1], k + 1, m);
			die_on(niu_bcast(&run->ep, me,
					 (uint32_t *)(pivot[(k + 1) & 1] + k + 1),
					 2 * (width - k - 1)), "pivot row");
		}
		for (i = 0; i < mine; i++)
			if (first + i != k && !(next_mine && first + i == k + 1))
				eliminate(rows + i * width, p, k, m);
	}
	for (i = 0; i < mine; i++)
		x[i] = rows[i * width + m];
	parallel_end(run, start);

	x_all = me == 0 ? malloc(m * 8) : NULL;
	die_on(niu_gather(&run->ep, 0, (uint32_t *)x, (uint32_t *)x_all,
			  2 * mine), "gather x");
	if (me == 0) {
		double *a = malloc((size_t)m * width * 8), *xs = malloc(m * 8);

		for (i = 0; i < m; i++)
			gauss_row(m, i, a + i * width);
		start = serial_begin();
		for (k = 0; k < m; k++) {
			make_pivot(a + k * width, pivot[0], k, m);
			for (i = 0; i < m; i++)
				if (i != k)
					eliminate(a + i * width, pivot[0], k, m);
		}
		for (i = 0; i < m; i++)
			xs[i] = a[i * width + m];
		run->serial_ns = ns_since(start);
		run->serial_s = run->serial_ns * 1e-9;
		run->pass = max_abs_diff(x_all, xs, m) <= 1e-12;
		free(a);
		free(xs);
	}
	share_verdict(run);
	free(rows);
	free(pivot[0]);
	free(pivot[1]);
	free(x);
	free(x_all);
}

/* --- Jacobi: g x g single-precision grid, fixed boundary -------------- */

static float jacobi_boundary(unsigned int g, unsigned int i, unsigned int j)
{
	if (i == 0)
		return 1.0f;
	if (i == g - 1 || j == 0 || j == g - 1)
		return (float)input(6, (uint64_t)i * g + j) * 0.5f;
	return 0.0f;
}

/*
 * Seed 001 §6.2.2 ("Jacobi successive-over-relaxation") runs Jacobi on
 * rectangular tiles, one per node, each passing its edge rows to its north
 * and south neighbours and its edge columns, gathered into a contiguous
 * block and scattered at the receiver, to its east and west ones.  The
 * nodes here form a grid of pr x pc, pr the largest divisor of the node
 * count not above its square root: square counts (4, 9, 16, 36, 64, as the
 * thesis ran) get square tiles, 2 and 8 nodes 1 x 2 and 2 x 4; a grid
 * that does not divide the order gets tiles one row or column apart.
 */
struct tile {
	unsigned int pr, pc;		/* the grid of nodes */
	unsigned int tr, tc;		/* this node's place in it */
	unsigned int rows, cols;	/* its tile */
	unsigned int r0, c0;		/* the tile's first global row, column */
	unsigned int w;			/* a local row: cols and two halos */
};

static unsigned int tile_grid_rows(unsigned int nodes)
{
	unsigned int pr = 1, d;

	for (d = 1; d * d <= nodes; d++)
		if (nodes % d == 0)
			pr = d;
	return pr;
}

static struct tile tile_of(unsigned int g, unsigned int nodes,
			   unsigned int node)
{
	struct tile t;

	t.pr = tile_grid_rows(nodes);
	t.pc = nodes / t.pr;
	t.tr = node / t.pc;
	t.tc = node % t.pc;
	t.r0 = t.tr * g / t.pr;
	t.c0 = t.tc * g / t.pc;
	t.rows = (t.tr + 1) * g / t.pr - t.r0;
	t.cols = (t.tc + 1) * g / t.pc - t.c0;
	t.w = t.cols + 2;
	return t;
}

/*
 * One sweep over @t's cells of @u (local rows and columns 1.., with a
 * halo all round) into @v: the fixed boundary is copied, every other cell
 * is its four neighbours' mean.  The boundary is found per row, not per
 * cell, so the inner loop is the four loads, three adds and a multiply
 * (the serial run is a tile of the whole grid: the same loop).
 */
static void jacobi_sweep(const float *u, float *v, const struct tile *t,
			 unsigned int g)
{
	unsigned int i, j, gi, w = t->w;
	/* The first and last local columns that are not the boundary. */
	unsigned int jlo = t->c0 == 0 ? 2 : 1;
	unsigned int jhi = t->c0 + t->cols == g ? t->cols - 1 : t->cols;
	const float *up, *row, *down;
	float *out;

	for (i = 1; i <= t->rows; i++) {
		gi = t->r0 + i - 1;
		row = u + i * w;
		out = v + i * w;
		if (gi == 0 || gi == g - 1) {
			memcpy(out + 1, row + 1, t->cols * sizeof(*out));
			continue;
		}
		up = row - w;
		down = row + w;
		if (jlo == 2)
			out[1] = row[1];
		if (jhi < t->cols)
			out[t->cols] = row[t->cols];
		for (j = jlo; j <= jhi; j++)
			out[j] = 0.25f * (up[j] + down[j] + row[j - 1] +
					  row[j + 1]);
	}
}

/* A tile of the grid's starting values, halos 0; NULL without memory. */
static float *jacobi_start(const struct tile *t, unsigned int g)
{
	float *u = calloc((size_t)(t->rows + 2) * t->w, 4);
	unsigned int i, j;

	for (i = 1; u && i <= t->rows; i++)
		for (j = 1; j <= t->cols; j++)
			u[i * t->w + j] = jacobi_boundary(g, t->r0 + i - 1,
							  t->c0 + j - 1);
	return u;
}

/* Column @j of @t's cells (rows 1..) to or from @col. */
static void tile_column(float *u, const struct tile *t, unsigned int j,
			float *col, bool out)
{
	unsigned int i;

	for (i = 0; i < t->rows; i++) {
		if (out)
			col[i] = u[(i + 1) * t->w + j];
		else
			u[(i + 1) * t->w + j] = col[i];
	}
}

/*
 * Node 0 checks the parallel grid against the serial sweeps: every tile
 * comes to it (not timed) and is compared cell by cell.
 */
static void jacobi_check(struct run *run, const struct tile *t,
			 const float *u)
{
	unsigned int nodes = run->nodes, g = run->size, p, i, j, it;
	size_t cells = (size_t)t->rows * t->cols, at;
	const uint32_t **send = calloc(nodes, sizeof(*send));
	uint32_t **recv = calloc(nodes, sizeof(*recv));
	size_t *sent = calloc(nodes, sizeof(size_t));
	size_t *got = calloc(nodes, sizeof(size_t));
	float *mine = malloc(cells * 4), *all = NULL, *su, *sv, *swap;
	struct tile whole = tile_of(g, 1, 0), tp;
	float worst = 0;
	uint64_t start;

	die_on(!send || !recv || !sent || !got || !mine ? -ENOMEM : 0,
	       "jacobi check");
	for (i = 0; i < t->rows; i++)
		memcpy(mine + (size_t)i * t->cols, u + (i + 1) * t->w + 1,
		       t->cols * 4);
	send[0] = (const uint32_t *)mine;
	sent[0] = cells;
	if (run->me == 0) {
		all = malloc((size_t)g * g * 4);
		die_on(all ? 0 : -ENOMEM, "jacobi check");
		for (p = 0, at = 0; p < nodes; p++) {
			tp = tile_of(g, nodes, p);
			recv[p] = (uint32_t *)(all + at);
			got[p] = (size_t)tp.rows * tp.cols;
			at += got[p];
		}
	}
	die_on(niu_alltoallv(&run->ep, send, sent, recv, got), "gather grid");
	if (run->me == 0) {
		su = jacobi_start(&whole, g);
		sv = calloc((size_t)(g + 2) * whole.w, 4);
		die_on(su && sv ? 0 : -ENOMEM, "jacobi check");
		start = serial_begin();
		for (it = 0; it < run->iterations; it++) {
			jacobi_sweep(su, sv, &whole, g);
			swap = su;
			su = sv;
			sv = swap;
		}
		run->serial_ns = ns_since(start);
		run->serial_s = run->serial_ns * 1e-9;
		for (p = 0, at = 0; p < nodes; p++) {
			tp = tile_of(g, nodes, p);
			for (i = 0; i < tp.rows; i++)
				for (j = 0; j < tp.cols; j++)
					worst = fmaxf(worst, fabsf(
						all[at++] -
						su[(tp.r0 + i + 1) * whole.w +
						   tp.c0 + j + 1]));
		}
		run->pass = worst <= 1e-6f;
		free(su);
		free(sv);
	}
	free(all);
	free(mine);
	free(send);
	free(recv);
	free(sent);
	free(got);
}

static void jacobi(struct run *run)
{
	unsigned int g = run->size, me = run->me, it;
	struct tile t = tile_of(g, run->nodes, me);
	float *u = jacobi_start(&t, g), *swap;
	float *v = calloc((size_t)(t.rows + 2) * t.w, 4);
	/* Edge columns out (left, right) and in, gathered. */
	float *cols = malloc((size_t)4 * t.rows * 4);
	const uint32_t **send = calloc(run->nodes, sizeof(*send));
	uint32_t **recv = calloc(run->nodes, sizeof(*recv));
	size_t *words = calloc(run->nodes, sizeof(size_t));
	unsigned int up = me - t.pc, down = me + t.pc;
	unsigned int left = me - 1, right = me + 1;
	uint64_t start;

	die_on(u && v && cols && send && recv && words ? 0 : -ENOMEM,
	       "jacobi");
	if (t.tr > 0)
		words[up] = t.cols;
	if (t.tr + 1 < t.pr)
		words[down] = t.cols;
	if (t.tc > 0)
		words[left] = t.rows;
	if (t.tc + 1 < t.pc)
		words[right] = t.rows;
	start = parallel_begin(run);
	for (it = 0; it < run->iterations; it++) {
		/* Edge rows out, the neighbours' into the halo rows. */
		if (t.tr > 0) {
			send[up] = (uint32_t *)(u + t.w + 1);
			recv[up] = (uint32_t *)(u + 1);
		}
		if (t.tr + 1 < t.pr) {
			send[down] = (uint32_t *)(u + t.rows * t.w + 1);
			recv[down] = (uint32_t *)(u + (t.rows + 1) * t.w + 1);
		}
		/* Edge columns gathered out, scattered into the halos. */
		if (t.tc > 0) {
			tile_column(u, &t, 1, cols, true);
			send[left] = (uint32_t *)cols;
			recv[left] = (uint32_t *)(cols + 2 * t.rows);
		}
		if (t.tc + 1 < t.pc) {
			tile_column(u, &t, t.cols, cols + t.rows, true);
			send[right] = (uint32_t *)(cols + t.rows);
			recv[right] = (uint32_t *)(cols + 3 * t.rows);
		}
		die_on(niu_alltoallv(&run->ep, send, words, recv, words),
		       "halo");
		if (t.tc > 0)
			tile_column(u, &t, 0, cols + 2 * t.rows, false);
		if (t.tc + 1 < t.pc)
			tile_column(u, &t, t.cols + 1, cols + 3 * t.rows,
				    false);
		jacobi_sweep(u, v, &t, g);
		swap = u;
		u = v;
		v = swap;
	}
	parallel_end(run, start);
	jacobi_check(run, &t, u);
	share_verdict(run);
	free(u);
	free(v);
	free(cols);
	free(send);
	free(recv);
	free(words);
}

/* --- integer sort: bucket by the top bits, exchange, sort locally ----- */

static int compare_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void sort(struct run *run)
{
	uint32_t nodes = run->nodes, me = run->me, p, *keys, *bucketed;
	size_t n = run->size, mine = n / nodes, i, total;
	size_t *count = calloc(nodes, sizeof(size_t));
	size_t *at = calloc(nodes, sizeof(size_t));
	size_t *in_count = calloc(nodes, sizeof(size_t));
	uint32_t *count_words = calloc(2 * nodes, 4), *in_words;
	const uint32_t **send = calloc(nodes, sizeof(*send));
	uint32_t **recv = calloc(nodes, sizeof(*recv)), *sorted, *all = NULL;
	uint64_t start;

	keys = malloc(mine * 4);
	bucketed = malloc(mine * 4);
	in_words = count_words + nodes;
	for (i = 0; i < mine; i++)
		keys[i] = (uint32_t)hash(7, me * mine + i);
	start = parallel_begin(run);
	for (i = 0; i < mine; i++)
		count[((uint64_t)keys[i] * nodes) >> 32]++;
	for (p = 0; p < nodes; p++)
		count_words[p] = (uint32_t)count[p];
	die_on(niu_alltoall(&run->ep, count_words, in_words, 1), "counts");
	for (p = 0, total = 0; p < nodes; p++) {
		at[p] = p ? at[p - 1] + count[p - 1] : 0;
		in_count[p] = in_words[p];
		total += in_count[p];
	}
	for (p = 0; p < nodes; p++)
		send[p] = bucketed + at[p];
	for (i = 0; i < mine; i++) {
		p = ((uint64_t)keys[i] * nodes) >> 32;
		bucketed[at[p]++] = keys[i];
	}
	sorted = malloc(total * 4 + 4);
	for (p = 0, i = 0; p < nodes; p++) {
		recv[p] = sorted + i;
		i += in_count[p];
	}
	die_on(niu_alltoallv(&run->ep, send, count, recv, in_count), "keys");
	qsort(sorted, total, 4, compare_u32);
	parallel_end(run, start);

	/* Node 0 collects the sorted runs, whose sizes differ. */
	count_words[0] = (uint32_t)total;
	die_on(niu_gather(&run->ep, 0, count_words, in_words, 1), "sizes");
	memset(send, 0, nodes * sizeof(*send));
	memset(count, 0, nodes * sizeof(size_t));
	memset(in_count, 0, nodes * sizeof(size_t));
	send[0] = sorted;
	count[0] = total;
	if (me == 0) {
		all = malloc(n * 4 + 4);
		for (p = 0, i = 0; p < nodes; p++) {
			recv[p] = all + i;
			in_count[p] = in_words[p];
			i += in_count[p];
		}
		run->pass = i == n;
	}
	die_on(niu_alltoallv(&run->ep, send, count, recv, in_count),
	       "gather keys");
	if (me == 0) {
		uint32_t *serial = malloc(n * 4);

		for (i = 0; i < n; i++)
			serial[i] = (uint32_t)hash(7, i);
		start = serial_begin();
		qsort(serial, n, 4, compare_u32);
		run->serial_ns = ns_since(start);
		run->serial_s = run->serial_ns * 1e-9;
		run->pass = run->pass && !memcmp(all, serial, n * 4);
		free(serial);
	}
	share_verdict(run);
	free(count);
	free(at);
	free(in_count);
	free(count_words);
	free(send);
	free(recv);
	free(keys);
	free(bucketed);
	free(sorted);
	free(all);
}

/* --- the driver -------------------------------------------------------- */

struct kernel {
	const char *name;
	void (*run)(struct run *run);
	unsigned int size;		/* Table 6.2 */
	const char *size_format;	/* how the size reads */
};

static struct kernel kernels[] = {
	{ "dmm", dmm, 64, "%ux%u doubles (A, B)" },
	{ "fft", fft, 1024, "%u complex points" },
	{ "gauss", gauss, 64, "%ux%u doubles" },
	{ "jacobi", jacobi, 64, "%ux%u floats" },
	{ "sort", sort, 8192, "%u keys" },
};

enum { NUM_KERNELS = sizeof(kernels) / sizeof(kernels[0]) };

static void usage(void)
{
	fprintf(stderr,
		"Usage: niu-suite [-s KERNEL=SIZE]... [-i ITERATIONS] [-T] "
		"[-d DEVICE] [KERNEL...]\n"
		"Kernels: dmm fft gauss jacobi sort (default: all).\n"
		"  -s  size: dmm, gauss, jacobi: matrix order (64); fft: points,\n"
		"      a power of 2 (1024); sort: keys (8192).  Defaults from\n"
		"      seed 001 Table 6.2.\n"
		"  -i  Jacobi iterations (100)\n"
		"  -T  no time accounting: libniu reads no clock, and no node\n"
		"      prints a breakdown\n"
		"  -d  device file (default /dev/arctic-niu0)\n"
		"Node 0 prints each kernel's times and PASS/FAIL; every node then\n"
		"prints where its parallel time went (\"KERNEL node=N breakdown\n"
		"parallel_ns= compute_ns= send_ns= recv_ns= wait_ns= barrier_ns=\",\n"
		"libniu's niu_stats_time(); virtual time in timed mode, the\n"
		"host's otherwise; docs/guest.md).\n");
	exit(2);
}

static struct kernel *find_kernel(const char *name, size_t length)
{
	unsigned int k;

	for (k = 0; k < NUM_KERNELS; k++) {
		if (strlen(kernels[k].name) == length &&
		    !strncmp(kernels[k].name, name, length))
			return &kernels[k];
	}
	return NULL;
}

/* Sizes the decomposition can split evenly over @nodes. */
static int size_fits(const struct kernel *kernel, unsigned int size,
		     uint32_t nodes)
{
	unsigned int n2;

	if (kernel->run == jacobi)	/* a tile of at least one cell */
		return size >= nodes / tile_grid_rows(nodes);
	if (kernel->run != fft)
		return size && size % nodes == 0;
	if (size < 2 || (size & (size - 1)))
		return 0;
	for (n2 = 1; n2 * n2 < size; n2 <<= 1)
		;
	return (size / n2) % nodes == 0;	/* n1 <= n2 */
}

int main(int argc, char **argv)
{
	unsigned int iterations = 100, failures = 0, k;
	int selected[NUM_KERNELS] = { 0 }, any = 0, opt, ret, arg;
	bool accounting = true, timed = niu_timed();
	const char *device = NULL;
	struct kernel *kernel;
	struct run run;
	char *eq;

	while ((opt = getopt(argc, argv, "s:i:Td:h")) != -1) {
		switch (opt) {
		case 's':
			eq = strchr(optarg, '=');
			kernel = eq ? find_kernel(optarg, eq - optarg) : NULL;
			if (!kernel)
				usage();
			kernel->size = (unsigned int)atoi(eq + 1);
			break;
		case 'i':
			iterations = (unsigned int)atoi(optarg);
			break;
		case 'T':
			accounting = false;
			break;
		case 'd':
			device = optarg;
			break;
		default:
			usage();
		}
	}
	for (arg = optind; arg < argc; arg++) {
		kernel = find_kernel(argv[arg], strlen(argv[arg]));
		if (!kernel)
			usage();
		selected[kernel - kernels] = any = 1;
	}
	memset(&run, 0, sizeof(run));
	ret = niu_open(&run.ep, device);
	if (ret) {
		fprintf(stderr, "niu-suite: open: %s\n", strerror(-ret));
		return 1;
	}
	niu_stats_time_on(&run.ep, accounting);
	run.nodes = run.ep.num_nodes;
	run.me = run.ep.node;
	run.iterations = iterations;
	for (k = 0; k < NUM_KERNELS; k++) {
		if (any && !selected[k])
			continue;
		if (!size_fits(&kernels[k], kernels[k].size, run.nodes)) {
			if (run.me == 0)
				printf("niu-suite: %s: size %u does not split "
				       "over %u nodes\n", kernels[k].name,
				       kernels[k].size, run.nodes);
			failures++;
			continue;
		}
		if (run.me == 0)
			printf("niu-suite: %-6s ... (waits: idle sleep %u "
			       "us%s)\n", kernels[k].name,
			       run.ep.idle_sleep_us, run.ep.link_poll_yields ?
			       ", empty polls yield the core" : "");
		fflush(stdout);
		run.size = kernels[k].size;
		run.pass = 0;
		kernels[k].run(&run);
		if (run.me == 0) {
			char size[64];

			snprintf(size, sizeof(size), kernels[k].size_format,
				 run.size, run.size);
			if (kernels[k].run == jacobi)
				snprintf(size + strlen(size),
					 sizeof(size) - strlen(size),
					 ", %u iter", iterations);
			if (kernels[k].run == fft)
				snprintf(size + strlen(size),
					 sizeof(size) - strlen(size), ", %s",
					 run.by_dma ? "DMA" : "msgs");
			printf("niu-suite: %-6s %-28s nodes=%u parallel=%.3fs "
			       "serial=%.3fs speedup=%.2f %s\n",
			       kernels[k].name, size, run.nodes,
			       run.parallel_s, run.serial_s,
			       run.serial_s / run.parallel_s,
			       run.pass ? "PASS" : "FAIL");
			/*
			 * To the nanosecond: in timed mode they are virtual
			 * times, the same on every run (docs/timed-mode.md).
			 */
			printf("niu-suite: %-6s times parallel_ns=%llu "
			       "serial_ns=%llu\n", kernels[k].name,
			       (unsigned long long)run.parallel_ns,
			       (unsigned long long)run.serial_ns);
		}
		if (accounting)
			print_breakdown(&run, kernels[k].name, timed);
		fflush(stdout);
		failures += !run.pass;
	}
	if (run.me == 0)
		printf("niu-suite: %u failure(s): %s\n", failures,
		       failures ? "FAIL" : "PASS");
	niu_close(&run.ep);
	return failures != 0;
}
