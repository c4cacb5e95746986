/* Wavefront sweep on a 2-D process grid: the C version of examples/sweep.py.
 *
 * An n x n grid with K independent planes, ranks on an MPI_Dims_create(P, 2) grid
 * (uneven blocks allowed). Every sweep starts at the top-left corner; planes go in
 * --kblocks chunks so the ranks form a pipeline. Per plane the recurrence is a
 * running mean along each row of (half the value above + a source term):
 *   a[i, j] = (S[i, j-1] + 0.5 a[i-1, j] + s[i, j]) / (j + 1),   S = running row sum,
 * so each value needs its north and west neighbours. Per sweep and chunk k, in this
 * order: Recv from north (local columns x chunk planes x 8 B), Recv from west (local
 * rows x chunk planes x 8 B) where they exist, then Send south and Send east; tag k.
 * End: one Allreduce of 16 B (the check: every |a| <= 4, and the checksum). All on
 * the grid communicator. Charged work: 6 flops per point, plane and sweep.
 *
 *   sweep --n 1024 --iters 10 --planes 8 --kblocks 4
 */
#include <math.h>

#include "common.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long n = opt(argc, argv, "--n", 1024), iters = opt(argc, argv, "--iters", 10);
  long planes = opt(argc, argv, "--planes", 8), kb = opt(argc, argv, "--kblocks", 4);
  int P, rank, dims[2] = {0, 0}, periods[2] = {0, 0}, c[2];
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Dims_create(P, 2, dims);
  if (dims[0] > n || dims[1] > n) refuse(MPI_COMM_WORLD, "sweep: fewer grid rows or columns than ranks");
  if (planes % kb) refuse(MPI_COMM_WORLD, "sweep: --planes must be divisible by --kblocks");
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  MPI_Comm_rank(cart, &rank);
  MPI_Cart_coords(cart, rank, 2, c);
  long y0, ny, x0, nx, ch = planes / kb;
  split(n, dims[0], c[0], &y0, &ny);
  split(n, dims[1], c[1], &x0, &nx);
  int north, south, west, east;
  MPI_Cart_shift(cart, 0, 1, &north, &south);
  MPI_Cart_shift(cart, 1, 1, &west, &east);
  double *a = xmalloc(sizeof(double) * planes * ny * nx);
  double *above = xmalloc(sizeof(double) * ch * nx), *left = xmalloc(sizeof(double) * ch * ny);
  double *down = xmalloc(sizeof(double) * ch * nx), *right = xmalloc(sizeof(double) * ch * ny);
  for (long it = 0; it < iters; it++)
    for (long k = 0; k < kb; k++) {
      if (north != MPI_PROC_NULL) MPI_Recv(above, ch * nx, MPI_DOUBLE, north, k, cart, MPI_STATUS_IGNORE);
      else memset(above, 0, sizeof(double) * ch * nx);
      if (west != MPI_PROC_NULL) MPI_Recv(left, ch * ny, MPI_DOUBLE, west, k, cart, MPI_STATUS_IGNORE);
      else memset(left, 0, sizeof(double) * ch * ny);
      for (long q = 0; q < ch; q++) {
        long pl = k * ch + q;
        double *A = a + pl * ny * nx;
        for (long i = 0; i < ny; i++) {
          double S = left[q * ny + i];
          for (long j = 0; j < nx; j++) {
            double up = i ? A[(i - 1) * nx + j] : above[q * nx + j];
            double s = scrambled(((unsigned long long)pl * n + y0 + i) * n + x0 + j) - 0.5;
            double v = (S + 0.5 * up + s) / (double)(x0 + j + 1);
            A[i * nx + j] = v;
            S += v;
          }
          right[q * ny + i] = S;
        }
        memcpy(down + q * nx, A + (ny - 1) * nx, sizeof(double) * nx);
      }
      CHARGE(6.0 * ch * nx * ny);
      if (south != MPI_PROC_NULL) MPI_Send(down, ch * nx, MPI_DOUBLE, south, k, cart);
      if (east != MPI_PROC_NULL) MPI_Send(right, ch * ny, MPI_DOUBLE, east, k, cart);
    }
  double sums[2] = {0.0, 0.0};
  for (long k = 0; k < planes * ny * nx; k++) {
    sums[0] += fabs(a[k]) > 4.0;
    sums[1] += a[k];
  }
  MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, cart);
  int ok = sums[0] == 0.0 && isfinite(sums[1]);
  if (rank == 0)
    printf("sweep n=%ld P=%d grid %dx%d iters=%ld: checksum %.12g, values out of bounds %.0f -> %s\n", n, P,
           dims[0], dims[1], iters, sums[1], sums[0], ok ? "OK" : "FAILED");
  MPI_Finalize();
  return ok ? 0 : 1;
}
