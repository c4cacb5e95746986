/* Distributed 2-D FFT with slab decomposition and an Alltoall transpose: the C
 * version of examples/fft2d.py.
 *
 * An n x n complex array in row slabs (P must divide n, n a power of two).
 * Forward: FFT of the local rows, global transpose (Alltoall of P blocks of
 * (n/P) x (n/P) complex values, 16 B each), FFT of the rows again. Inverse: the
 * same backwards. Each iteration does a forward and an inverse transform: two
 * Alltoalls. End: one Allreduce of 8 B (MPI_MAX of the round-trip error; the
 * check). Charged work: 5 m log2(m) flops per row FFT of length m, 4 FFT passes
 * of n/P rows of length n per iteration, 1 flop per value for the 1/n scaling.
 * With --pairwise 1 each transpose exchanges the blocks as FFTW 3's MPI transposes do
 * (transpose-pairwise): one Sendrecv with each other rank, the pairs of each round
 * those of a round-robin tournament (the polygon method: at round s rank s meets the
 * last rank and s + k meets s - k, mod P - 1), each message tagged sender * P + receiver.
 *
 *   fft2d --n 2048 --iters 4 [--pairwise 1]
 */
#include <complex.h>
#include <math.h>

#include "common.h"

typedef double complex cplx;

static void fft(cplx *a, long m, int inverse) { /* in place, iterative radix 2 */
  for (long i = 1, j = 0; i < m; i++) {
    long bit = m >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) { cplx t = a[i]; a[i] = a[j]; a[j] = t; }
  }
  for (long len = 2; len <= m; len <<= 1) {
    double ang = 2 * M_PI / len * (inverse ? 1 : -1);
    cplx w = cos(ang) + I * sin(ang);
    for (long i = 0; i < m; i += len) {
      cplx wk = 1.0;
      for (long k = 0; k < len / 2; k++) {
        cplx u = a[i + k], v = a[i + k + len / 2] * wk;
        a[i + k] = u + v;
        a[i + k + len / 2] = u - v;
        wk *= w;
      }
    }
  }
}

/* rows (m x n slab) -> FFT each row; charge 5 n log2 n per row */
static void rows_fft(cplx *s, long m, long n, int inverse) {
  for (long i = 0; i < m; i++) fft(s + i * n, n, inverse);
  CHARGE(5.0 * m * n * log2((double)n));
}

/* rank r's opponent at round s of a round-robin tournament of P ranks (P even: the
 * polygon of the first P - 1 ranks turns round the last one) */
static int opponent(int r, int s, int P) {
  int last = P - 1;
  if (r == last) return s;
  for (int k = 1; k < P / 2; k++) { /* s + k meets s - k */
    int a = (s + k) % last, b = ((s - k) % last + last) % last;
    if (a == r) return b;
    if (b == r) return a;
  }
  return last; /* r == s */
}

/* global transpose of the distributed n x n array: slab s (m x n) -> t (m x n) */
static void transpose(const cplx *s, cplx *t, cplx *buf, long m, long n, int P, int pairwise) {
  for (int d = 0; d < P; d++) /* block for rank d: my rows, its columns, transposed */
    for (long i = 0; i < m; i++)
      for (long j = 0; j < m; j++) buf[(d * m + j) * m + i] = s[i * n + d * m + j];
  if (pairwise) {
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    memcpy(t + r * m * m, buf + r * m * m, sizeof(cplx) * m * m);
    for (int round = 0; round < P - 1; round++) {
      int q = opponent(r, round, P);
      MPI_Sendrecv(buf + q * m * m, (int)(2 * m * m), MPI_DOUBLE, q, r * P + q, t + q * m * m,
                   (int)(2 * m * m), MPI_DOUBLE, q, q * P + r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  } else {
    MPI_Alltoall(buf, 2 * m * m, MPI_DOUBLE, t, 2 * m * m, MPI_DOUBLE, MPI_COMM_WORLD);
  }
  for (int src = 0; src < P; src++) /* block from src: rows j of mine, its columns i */
    for (long j = 0; j < m; j++)
      for (long i = 0; i < m; i++) buf[j * n + src * m + i] = t[(src * m + j) * m + i];
  memcpy(t, buf, sizeof(cplx) * m * n);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long n = opt(argc, argv, "--n", 2048), iters = opt(argc, argv, "--iters", 4);
  int pairwise = (int)opt(argc, argv, "--pairwise", 0);
  int P, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (n % P || (n & (n - 1))) refuse(MPI_COMM_WORLD, "fft2d: n must be a power of two and P must divide n");
  long m = n / P;
  cplx *x = xmalloc(sizeof(cplx) * m * n), *s = xmalloc(sizeof(cplx) * m * n);
  cplx *t = xmalloc(sizeof(cplx) * m * n), *buf = xmalloc(sizeof(cplx) * m * n);
  for (long k = 0; k < m * n; k++) {
    unsigned long long g = (unsigned long long)rank * m * n + k;
    x[k] = scrambled(2 * g) - 0.5 + I * (scrambled(2 * g + 1) - 0.5);
  }
  double err = 0.0;
  for (long it = 0; it < iters; it++) {
    memcpy(s, x, sizeof(cplx) * m * n);
    rows_fft(s, m, n, 0);
    transpose(s, t, buf, m, n, P, pairwise);
    rows_fft(t, m, n, 0); /* t: the transposed 2-D FFT */
    rows_fft(t, m, n, 1);
    transpose(t, s, buf, m, n, P, pairwise);
    rows_fft(s, m, n, 1);
    err = 0.0;
    for (long k = 0; k < m * n; k++) err = fmax(err, cabs(s[k] / ((double)n * n) - x[k]));
    CHARGE(2.0 * m * n);
  }
  MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  int ok = err <= 1e-9;
  if (rank == 0) printf("fft2d n=%ld P=%d iters=%ld: round-trip error %.3g -> %s\n", n, P, iters, err, ok ? "OK" : "FAILED");
  MPI_Finalize();
  return ok ? 0 : 1;
}
