/* NPB CG's communication, a twin for bench/validate_smpi.py: cg_like's power-of-two
 * row/column split (npcols = nprows or 2 nprows, row-major, by rank arithmetic), with
 * the reductions along the rows written as NPB CG writes them, by recursive doubling
 * in point-to-point calls whose stages grow with the row (log2 npcols):
 *
 * per iteration, the matrix-vector product on the blocks (2 flops per element), its sum
 * along the row (for i = L .. 1: Irecv, Send, Wait with rank xor npcols / 2^i, tagged
 * i, n / nprows doubles, then the sum charged), the vector block passed down the column
 * (Sendrecv, periodic, n / npcols doubles), and two dot products along the row (for
 * i = 1 .. L: the same with one double).
 *
 *   cg_npb --n 8192 --iters 30
 */
#include "../smpi/common.h"

static double row_sum(double *v, double *t, long m, int r, int npcols, int L, int down) {
  for (int k = 0; k < L; k++) {
    int i = down ? L - k : k + 1;
    MPI_Request rq;
    MPI_Irecv(t, (int)m, MPI_DOUBLE, r ^ (npcols >> i), i, MPI_COMM_WORLD, &rq);
    MPI_Send(v, (int)m, MPI_DOUBLE, r ^ (npcols >> i), i, MPI_COMM_WORLD);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    for (long j = 0; j < m; j++) v[j] += t[j];
    CHARGE((double)m);
  }
  return v[0];
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long n = opt(argc, argv, "--n", 8192), iters = opt(argc, argv, "--iters", 30);
  int P, r;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  int nprows, npcols, L = 0;
  pow2_grid(MPI_COMM_WORLD, "cg_npb", n, P, &nprows, &npcols);
  while ((1 << L) < npcols) L++;
  int row = r / npcols, col = r % npcols;
  int south = ((row + 1) % nprows) * npcols + col, north = ((row + nprows - 1) % nprows) * npcols + col;
  long mr = n / nprows, mc = n / npcols;
  double *x = xmalloc(sizeof(double) * mc), *y = xmalloc(sizeof(double) * mr);
  double *xr = xmalloc(sizeof(double) * mc), *t = xmalloc(sizeof(double) * mr);
  for (long i = 0; i < mc; i++) x[i] = scrambled(col * mc + i);
  double check = 0, d[1], dt[1];
  for (long it = 0; it < iters; it++) {
    block_matvec(x, y, mr, mc, row);
    row_sum(y, t, mr, r, npcols, L, 1);
    MPI_Sendrecv(x, mc, MPI_DOUBLE, south, 20, xr, mc, MPI_DOUBLE, north, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    d[0] = y[0] * xr[0];
    check += row_sum(d, dt, 1, r, npcols, L, 0);
    d[0] = xr[0];
    check += row_sum(d, dt, 1, r, npcols, L, 0);
  }
  if (r == 0) printf("cg_npb P=%d grid %dx%d: %s\n", P, nprows, npcols, check == check ? "OK" : "FAILED");
  MPI_Finalize();
  return 0;
}
