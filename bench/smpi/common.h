/* Shared helpers of the C versions of sigex's examples (bench/smpi/).
 *
 * Under SimGrid's SMPI (smpicc) computation is charged explicitly: CHARGE(f)
 * tells SMPI that the code just run did f floating-point operations
 * (smpi_execute_flops), and the programs are run with
 * --cfg=smpi/simulate-computation:no, so the host's own timing never enters the
 * simulated time: the ground truth is deterministic. Built with a plain mpicc,
 * CHARGE does nothing and the programs are ordinary MPI programs.
 */
#ifndef SIGEX_SMPI_COMMON_H
#define SIGEX_SMPI_COMMON_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SMPI_H
#define CHARGE(flops) smpi_execute_flops((double)(flops))
#else
#define CHARGE(flops) ((void)0)
#endif

/* (start, length) of block i when n items are split over parts (uneven allowed). */
static inline void split(long n, int parts, int i, long *start, long *len) {
  long base = n / parts, extra = n % parts;
  *start = i * base + (i < extra ? i : extra);
  *len = base + (i < extra ? 1 : 0);
}

/* A deterministic pseudo-random value in [0, 1) for global index k. */
static inline double scrambled(unsigned long long k) {
  k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ULL; k ^= k >> 33;
  return (double)(k >> 11) / 9007199254740992.0;
}

/* Every rank agrees: rank 0 says why, all exit with status 2. */
static inline void refuse(MPI_Comm comm, const char *why) {
  int r;
  MPI_Comm_rank(comm, &r);
  if (r == 0) fprintf(stderr, "%s\n", why);
  MPI_Finalize();
  exit(2);
}

/* --name value options; returns def when absent. */
static inline long opt(int argc, char **argv, const char *name, long def) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0) return atol(argv[i + 1]);
  return def;
}

/* NPB CG's power-of-two process grid by rank arithmetic: nprows x npcols, npcols = nprows
 * for an even log2 P and 2 nprows for an odd one (the larger factor in columns); every
 * rank refuses (naming the program) a P that is no power of two or a grid that does not
 * divide n. */
static inline void pow2_grid(MPI_Comm comm, const char *prog, long n, int P, int *nprows, int *npcols) {
  int k = 0;
  while ((1 << k) < P) k++;
  if ((1 << k) != P) {
    char why[128];
    snprintf(why, sizeof why, "%s: P must be a power of two", prog);
    refuse(comm, why);
  }
  *nprows = 1 << (k / 2);
  *npcols = P / *nprows;
  if (n % *npcols || n % *nprows) {
    char why[128];
    snprintf(why, sizeof why, "%s: n must divide by the grid", prog);
    refuse(comm, why);
  }
}

/* The CG twins' matrix-vector product on a block: y (mr rows) from x (mc columns) of a
 * dense pseudo-random matrix sampled every 64th column, charged as 2 flops an element. */
static inline void block_matvec(const double *x, double *y, long mr, long mc, long row) {
  for (long i = 0; i < mr; i++) {
    double s = 0;
    for (long j = 0; j < mc; j += 64) s += x[j] * scrambled((row * mr + i) * 131 + j);
    y[i] = s;
  }
  CHARGE(2.0 * mr * mc);
}

static inline void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) { fprintf(stderr, "out of memory (%zu bytes)\n", n); MPI_Abort(MPI_COMM_WORLD, 3); }
  return p;
}

#endif
