/* 2-D Jacobi stencil on a Cartesian process grid: the C version of examples/stencil.py.
 *
 * n x n unknowns, fixed boundary (1 on the top edge, 0 elsewhere), pseudo-random
 * interior; ranks on an MPI_Dims_create(P, 2) grid (not periodic, no reordering),
 * uneven blocks allowed. Every iteration: Irecv from each existing neighbour
 * (north, south, west, east), Isend to each (same order), one Waitall, the sweep;
 * every --check-every iterations one Allreduce of 8 B (squared update norm).
 * End: one Allreduce of 16 B (the answer check: sum(u_new) = 1/4 sum_p w_p u_old[p]
 * with the received halos, and the maximum principle). Every call on the grid
 * communicator. Charged work: 4 flops per updated point, 3 more per point on
 * residual iterations, 3 per point for the final check.
 *
 *   stencil --n 4096 --iters 100 --check-every 10
 */
#include <math.h>

#include "common.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long n = opt(argc, argv, "--n", 2048), iters = opt(argc, argv, "--iters", 100);
  long every = opt(argc, argv, "--check-every", 10);
  int P, rank, dims[2] = {0, 0}, periods[2] = {0, 0}, coords[2];
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Dims_create(P, 2, dims);
  if (dims[0] > n || dims[1] > n) refuse(MPI_COMM_WORLD, "stencil: fewer grid rows or columns than ranks");
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  MPI_Comm_rank(cart, &rank);
  MPI_Cart_coords(cart, rank, 2, coords);
  long y0, ny, x0, nx;
  split(n, dims[0], coords[0], &y0, &ny);
  split(n, dims[1], coords[1], &x0, &nx);
  int north, south, west, east;
  MPI_Cart_shift(cart, 0, 1, &north, &south);
  MPI_Cart_shift(cart, 1, 1, &west, &east);

  long W = nx + 2;
  double *u = xmalloc(sizeof(double) * (ny + 2) * W), *v = xmalloc(sizeof(double) * (ny + 2) * W);
#define U(a, i, j) (a)[(i) * W + (j)]
  for (long i = 0; i < ny + 2; i++)
    for (long j = 0; j < W; j++) {
      double b = (i == 0 && y0 == 0) ? 1.0 : 0.0;
      int inner = i > 0 && i <= ny && j > 0 && j <= nx;
      U(u, i, j) = U(v, i, j) = inner ? 0.5 * (scrambled((y0 + i - 1) * n + x0 + j - 1) + 1.0) : b;
    }
  double *in[4], *out[4];
  long len[4] = {nx, nx, ny, ny};
  int peer[4] = {north, south, west, east}, rtag[4] = {0, 1, 2, 3}, stag[4] = {1, 0, 3, 2};
  for (int s = 0; s < 4; s++) { in[s] = xmalloc(sizeof(double) * len[s]); out[s] = xmalloc(sizeof(double) * len[s]); }

  for (long it = 0; it < iters; it++) {
    for (long j = 0; j < nx; j++) { out[0][j] = U(u, 1, j + 1); out[1][j] = U(u, ny, j + 1); }
    for (long i = 0; i < ny; i++) { out[2][i] = U(u, i + 1, 1); out[3][i] = U(u, i + 1, nx); }
    MPI_Request req[8];
    int k = 0;
    for (int s = 0; s < 4; s++)
      if (peer[s] != MPI_PROC_NULL) MPI_Irecv(in[s], len[s], MPI_DOUBLE, peer[s], rtag[s], cart, &req[k++]);
    for (int s = 0; s < 4; s++)
      if (peer[s] != MPI_PROC_NULL) MPI_Isend(out[s], len[s], MPI_DOUBLE, peer[s], stag[s], cart, &req[k++]);
    MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
    if (north != MPI_PROC_NULL) for (long j = 0; j < nx; j++) U(u, 0, j + 1) = in[0][j];
    if (south != MPI_PROC_NULL) for (long j = 0; j < nx; j++) U(u, ny + 1, j + 1) = in[1][j];
    if (west != MPI_PROC_NULL) for (long i = 0; i < ny; i++) U(u, i + 1, 0) = in[2][i];
    if (east != MPI_PROC_NULL) for (long i = 0; i < ny; i++) U(u, i + 1, nx + 1) = in[3][i];
    for (long i = 1; i <= ny; i++)
      for (long j = 1; j <= nx; j++)
        U(v, i, j) = 0.25 * (U(u, i - 1, j) + U(u, i + 1, j) + U(u, i, j - 1) + U(u, i, j + 1));
    CHARGE(4.0 * nx * ny);
    if ((it + 1) % every == 0) {
      double r = 0.0;
      for (long i = 1; i <= ny; i++)
        for (long j = 1; j <= nx; j++) { double d = U(v, i, j) - U(u, i, j); r += d * d; }
      CHARGE(3.0 * nx * ny);
      MPI_Allreduce(MPI_IN_PLACE, &r, 1, MPI_DOUBLE, MPI_SUM, cart);
    }
    double *t = u; u = v; v = t;
  }
  /* answer check: u holds the last sweep, v the grid it was computed from (with its halos) */
  double lhs = 0.0, rhs = 0.0, lo = 1.0, hi = 0.0;
  for (long i = 1; i <= ny; i++)
    for (long j = 1; j <= nx; j++) {
      long gy = y0 + i - 1, gx = x0 + j - 1;
      double w = 4.0 - (gy == 0) - (gy == n - 1) - (gx == 0) - (gx == n - 1);
      lhs += U(u, i, j);
      rhs += 0.25 * w * U(v, i, j);
      lo = fmin(lo, U(u, i, j)); hi = fmax(hi, U(u, i, j));
    }
  if (north == MPI_PROC_NULL) rhs += 0.25 * nx;
  CHARGE(3.0 * nx * ny);
  double sums[2] = {(lo >= 0.0 && hi <= 1.0) ? lhs - rhs : NAN, lhs + rhs};
  MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, cart);
  double err = fabs(sums[0]) / sums[1];
  int ok = err <= 1e-10;
  if (rank == 0)
    printf("stencil n=%ld P=%d grid %dx%d iters=%ld: identity error %.3g -> %s\n", n, P, dims[0], dims[1], iters,
           err, ok ? "OK" : "FAILED");
  MPI_Finalize();
  return ok ? 0 : 1;
}
