/* A CG-like power-of-two row/column split, a twin for bench/validate_smpi.py.
 *
 * P = 2^k ranks as nprows x npcols computed by rank arithmetic, as NPB CG does (no
 * Cartesian communicator): npcols = nprows for even k, npcols = 2 nprows for odd k (the
 * larger factor in columns); row = rank / npcols, column = rank % npcols. A dense
 * n x n matrix-vector product on the blocks: every iteration each rank sums its
 * partial result along the row (Sendrecv with the next and the previous rank of its
 * row, periodic: n / nprows doubles each) and passes its vector block down the column
 * (Sendrecv with the rank below and the one above, periodic: n / npcols doubles), then
 * an Allreduce of 16 B (rho and the residual). Charged work: 2 flops per block element.
 *
 *   cg_like --n 8192 --iters 30
 */
#include "../smpi/common.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long n = opt(argc, argv, "--n", 8192), iters = opt(argc, argv, "--iters", 30);
  int P, r;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  int nprows, npcols;
  pow2_grid(MPI_COMM_WORLD, "cg_like", n, P, &nprows, &npcols);
  int row = r / npcols, col = r % npcols;
  int east = row * npcols + (col + 1) % npcols, west = row * npcols + (col + npcols - 1) % npcols;
  int south = ((row + 1) % nprows) * npcols + col, north = ((row + nprows - 1) % nprows) * npcols + col;
  long mr = n / nprows, mc = n / npcols;
  double *x = xmalloc(sizeof(double) * mc), *y = xmalloc(sizeof(double) * mr);
  double *xr = xmalloc(sizeof(double) * mc), *yr = xmalloc(sizeof(double) * mr);
  for (long i = 0; i < mc; i++) x[i] = scrambled(col * mc + i);
  double check = 0;
  for (long it = 0; it < iters; it++) {
    block_matvec(x, y, mr, mc, row);
    MPI_Sendrecv(y, mr, MPI_DOUBLE, east, 1, yr, mr, MPI_DOUBLE, west, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(x, mc, MPI_DOUBLE, south, 2, xr, mc, MPI_DOUBLE, north, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double loc[2] = {yr[0], xr[0]}, glob[2];
    MPI_Allreduce(loc, glob, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    check += glob[0];
  }
  if (r == 0) printf("cg_like P=%d grid %dx%d: %s\n", P, nprows, npcols, check == check ? "OK" : "FAILED");
  MPI_Finalize();
  return 0;
}
