/* Conjugate gradient on the distributed 2-D Poisson matrix: the C version of examples/cg.py.
 *
 * A x = b for the 5-point Laplacian on an n x n grid (zero Dirichlet boundary,
 * b = 1, x0 = 0); grid rows block-distributed over the ranks (1-D slabs, uneven
 * allowed); fixed iteration count. Start: Allreduce 8 B (r.r). Every iteration:
 * Irecv north (tag 10), Irecv south (tag 11), Isend north (tag 11), Isend south
 * (tag 10), one grid row (n x 8 B) each, only to existing neighbours; Waitall;
 * Allreduce 8 B (p.Ap); Allreduce 8 B (r.r). End: one more halo exchange (for A x)
 * and an Allreduce of 24 B (the check: true residual against the recurrence's).
 * Charged work: 2 flops per unknown at the start, 16 per unknown and iteration,
 * 8 per unknown for the check.
 *
 *   cg --n 2048 --iters 50
 */
#include <math.h>

#include "common.h"

static void halo(double *v, long ny, long n, int rank, int P, MPI_Request *req) {
  int k = 0; /* v has ny + 2 rows of n: ghost row 0 and ny + 1 */
  if (rank > 0) MPI_Irecv(v, n, MPI_DOUBLE, rank - 1, 10, MPI_COMM_WORLD, &req[k++]);
  if (rank < P - 1) MPI_Irecv(v + (ny + 1) * n, n, MPI_DOUBLE, rank + 1, 11, MPI_COMM_WORLD, &req[k++]);
  if (rank > 0) MPI_Isend(v + n, n, MPI_DOUBLE, rank - 1, 11, MPI_COMM_WORLD, &req[k++]);
  if (rank < P - 1) MPI_Isend(v + ny * n, n, MPI_DOUBLE, rank + 1, 10, MPI_COMM_WORLD, &req[k++]);
  MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
}

/* out = A v on the owned rows (v with ghost rows; ghosts outside the grid stay 0) */
static void apply(const double *v, double *out, long ny, long n) {
  for (long i = 1; i <= ny; i++)
    for (long j = 0; j < n; j++) {
      double s = 4.0 * v[i * n + j] - v[(i - 1) * n + j] - v[(i + 1) * n + j];
      if (j > 0) s -= v[i * n + j - 1];
      if (j < n - 1) s -= v[i * n + j + 1];
      out[(i - 1) * n + j] = s;
    }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long n = opt(argc, argv, "--n", 2048), iters = opt(argc, argv, "--iters", 50);
  int P, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (P > n) refuse(MPI_COMM_WORLD, "cg: every rank needs at least one grid row (P <= n)");
  long y0, ny;
  split(n, P, rank, &y0, &ny);
  long N = ny * n;
  double *x = calloc(N, sizeof(double)), *r = xmalloc(sizeof(double) * N), *ap = xmalloc(sizeof(double) * N);
  double *p = calloc((ny + 2) * n, sizeof(double)), *xg = calloc((ny + 2) * n, sizeof(double));
  if (!x || !p || !xg) MPI_Abort(MPI_COMM_WORLD, 3);
  MPI_Request req[4];
  double rr = 0.0;
  for (long k = 0; k < N; k++) { r[k] = 1.0; p[n + k] = 1.0; rr += 1.0; }
  CHARGE(2.0 * N);
  MPI_Allreduce(MPI_IN_PLACE, &rr, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double rr0 = rr;
  for (long it = 0; it < iters; it++) {
    halo(p, ny, n, rank, P, req);
    apply(p, ap, ny, n);
    double pap = 0.0;
    for (long k = 0; k < N; k++) pap += p[n + k] * ap[k];
    CHARGE(8.0 * N);
    MPI_Allreduce(MPI_IN_PLACE, &pap, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double alpha = rr / pap, rr_new = 0.0;
    for (long k = 0; k < N; k++) {
      x[k] += alpha * p[n + k];
      r[k] -= alpha * ap[k];
      rr_new += r[k] * r[k];
    }
    CHARGE(6.0 * N);
    MPI_Allreduce(MPI_IN_PLACE, &rr_new, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double beta = rr_new / rr;
    rr = rr_new;
    for (long k = 0; k < N; k++) p[n + k] = r[k] + beta * p[n + k];
    CHARGE(2.0 * N);
  }
  /* check: ||b - A x||^2 against the recurrence's r.r, and 1^T (A x) against (A 1)^T x */
  memcpy(xg + n, x, sizeof(double) * N);
  halo(xg, ny, n, rank, P, req);
  apply(xg, ap, ny, n);
  double sums[3] = {0.0, 0.0, 0.0};
  for (long k = 0; k < N; k++) {
    double d = 1.0 - ap[k];
    long gi = y0 + k / n, gj = k % n;
    double a1 = 4.0 - (gi > 0) - (gi < n - 1) - (gj > 0) - (gj < n - 1);
    sums[0] += d * d;
    sums[1] += ap[k];
    sums[2] += a1 * x[k];
  }
  CHARGE(8.0 * N);
  MPI_Allreduce(MPI_IN_PLACE, sums, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double res_err = fabs(sqrt(sums[0]) - sqrt(rr)) / sqrt(rr0);
  double sym_err = fabs(sums[1] - sums[2]) / fmax(fabs(sums[1]), 1e-300);
  int ok = res_err <= 1e-6 && sym_err <= 1e-10;
  if (rank == 0)
    printf("cg n=%ld P=%d iters=%ld: residual gap %.3g, symmetry error %.3g -> %s\n", n, P, iters, res_err,
           sym_err, ok ? "OK" : "FAILED");
  MPI_Finalize();
  return ok ? 0 : 1;
}
