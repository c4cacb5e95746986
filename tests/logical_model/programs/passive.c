/* Passive-target one-sided communication: per iteration every rank adds its partial
 * sums into rank 0's window under an exclusive lock (MPI_Win_lock / MPI_Accumulate /
 * MPI_Win_unlock, 8 doubles), then reads its right neighbour's block (rank + 1 mod P)
 * under a shared lock (MPI_Get of N / P doubles), computes, and a Barrier closes the
 * iteration.
 *   passive N ITERS */
#include <mpi.h>
#include <stdlib.h>

static void work(double *a, int n) {
  for (int k = 0; k < 40; k++)
    for (int i = 1; i < n - 1; i++) a[i] = 0.5 * (a[i - 1] + a[i + 1]);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int P, r, N = argc > 1 ? atoi(argv[1]) : 3840, iters = argc > 2 ? atoi(argv[2]) : 10;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  int n = N / P, right = (r + 1) % P;
  double *base, *got = calloc((size_t)n, sizeof(double)), part[8] = {0};
  MPI_Win win;
  MPI_Win_allocate((MPI_Aint)(n + 8) * sizeof(double), sizeof(double), MPI_INFO_NULL,
                   MPI_COMM_WORLD, &base, &win);
  for (int it = 0; it < iters; it++) {
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
    MPI_Accumulate(part, 8, MPI_DOUBLE, 0, n, 8, MPI_DOUBLE, MPI_SUM, win);
    MPI_Win_unlock(0, win);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    MPI_Get(got, n, MPI_DOUBLE, right, 0, n, MPI_DOUBLE, win);
    MPI_Win_unlock(right, win);
    work(got, n);
    part[0] = got[1];
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Win_free(&win);
  free(got);
  MPI_Finalize();
  return 0;
}
