/* Row and column communicators of a 2-D decomposition (MPI_Comm_split), the way
 * 2-D solvers and FFT pencils build them: dims from MPI_Dims_create(P, 2), row
 * communicator colour rank / ncols (key rank % ncols), column communicator colour
 * rank % ncols (key rank / ncols). Each iteration:
 *   Allreduce of 8 doubles along the row,
 *   Sendrecv of n / nrows doubles to the next rank of the column (a ring in the
 *     column communicator's ranks), receiving from the previous,
 *   Bcast of 16 doubles from row rank 0, Reduce of 4 doubles to column rank 0,
 *   and on the first row only a Bcast of 2 doubles from its row rank 1.
 * With GROUPS, the grid is GROUPS x P/GROUPS instead (a fixed number of groups, as the
 * k-point groups of GPAW, the pools of Quantum ESPRESSO or LAMMPS's partitions make it).
 *   split2d ITERS [GROUPS] */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P, iters = argc > 1 ? atoi(argv[1]) : 10, groups = argc > 2 ? atoi(argv[2]) : 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int dims[2] = {0, 0};
  if (groups > 0 && P % groups == 0) {
    dims[0] = groups;
    dims[1] = P / groups;
  } else {
    MPI_Dims_create(P, 2, dims);
  }
  int ncols = dims[1];
  MPI_Comm row, col;
  MPI_Comm_split(MPI_COMM_WORLD, r / ncols, r % ncols, &row);
  MPI_Comm_split(MPI_COMM_WORLD, r % ncols, r / ncols, &col);
  int cr, cs;
  MPI_Comm_rank(col, &cr);
  MPI_Comm_size(col, &cs);
  enum { N = 5040 }; /* divisible by every row count up to 10 */
  static double buf[N], got[N], v[16], s[16];
  int m = N / dims[0];
  for (int it = 0; it < iters; it++) {
    for (int k = 0; k < 20000; k++) v[k % 16] += 1e-9 * k;
    MPI_Allreduce(v, s, 8, MPI_DOUBLE, MPI_SUM, row);
    MPI_Sendrecv(buf, m, MPI_DOUBLE, (cr + 1) % cs, 3, got, m, MPI_DOUBLE, (cr - 1 + cs) % cs, 3,
                 col, MPI_STATUS_IGNORE);
    MPI_Bcast(v, 16, MPI_DOUBLE, 0, row);
    MPI_Reduce(v, s, 4, MPI_DOUBLE, MPI_SUM, 0, col);
    if (r / ncols == 0) MPI_Bcast(s, 2, MPI_DOUBLE, 1 % ncols, row); /* the first row only */
  }
  MPI_Comm_free(&row);
  MPI_Comm_free(&col);
  MPI_Finalize();
  return 0;
}
