/* A 2-D halo exchange by one-sided communication: an N x N field on a non-periodic
 * MPI_Dims_create(P, 2) Cartesian grid, a window over the grid's communicator, and per
 * iteration one fence epoch in which every rank puts its four edges into its
 * neighbours' halos (MPI_PROC_NULL beyond the grid's ends), then a residual Allreduce.
 *   halo2d_put N ITERS
 * An edge along dimension 0 is N / dims[1] doubles, along dimension 1 N / dims[0]. */
#include <mpi.h>
#include <stdlib.h>

static void work(double *a, int n) {
  for (int k = 0; k < 40; k++)
    for (int i = 1; i < n - 1; i++) a[i] = 0.5 * (a[i - 1] + a[i + 1]);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int P, r, N = argc > 1 ? atoi(argv[1]) : 480, iters = argc > 2 ? atoi(argv[2]) : 10;
  int dims[2] = {0, 0}, periods[2] = {0, 0};
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Dims_create(P, 2, dims);
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  MPI_Comm_rank(cart, &r);
  int nx = N / dims[0], ny = N / dims[1];
  int lo0, hi0, lo1, hi1;
  MPI_Cart_shift(cart, 0, 1, &lo0, &hi0);
  MPI_Cart_shift(cart, 1, 1, &lo1, &hi1);
  /* halo slots in the window: [0, ny) from dim-0 low, [ny, 2ny) from dim-0 high,
   * [2ny, 2ny + nx) from dim-1 low, [2ny + nx, 2ny + 2nx) from dim-1 high */
  double *halo, *a = calloc((size_t)nx * ny + 2, sizeof(double));
  double *e0 = calloc((size_t)ny, sizeof(double)), *e1 = calloc((size_t)nx, sizeof(double));
  MPI_Win win;
  MPI_Win_allocate((MPI_Aint)(2 * (nx + ny)) * sizeof(double), sizeof(double), MPI_INFO_NULL,
                   cart, &halo, &win);
  double res = 0, sum;
  for (int it = 0; it < iters; it++) {
    MPI_Win_fence(0, win);
    MPI_Put(e0, ny, MPI_DOUBLE, lo0, ny, ny, MPI_DOUBLE, win);   /* my low edge: their high halo */
    MPI_Put(e0, ny, MPI_DOUBLE, hi0, 0, ny, MPI_DOUBLE, win);
    MPI_Put(e1, nx, MPI_DOUBLE, lo1, 2 * ny + nx, nx, MPI_DOUBLE, win);
    MPI_Put(e1, nx, MPI_DOUBLE, hi1, 2 * ny, nx, MPI_DOUBLE, win);
    MPI_Win_fence(0, win);
    work(a, nx * ny);
    res = a[1] + halo[0];
    MPI_Allreduce(&res, &sum, 1, MPI_DOUBLE, MPI_SUM, cart);
  }
  MPI_Win_free(&win);
  free(a);
  free(e0);
  free(e1);
  MPI_Comm_free(&cart);
  MPI_Finalize();
  return 0;
}
