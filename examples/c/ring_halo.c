/* ring_halo.c -- the C twin of examples/ring_halo.py: the same MPI calls,
 * sizes and tags in the same order.
 *
 * Build with the MPI's compiler wrapper and run:
 *   mpicc -O2 -o ring_halo examples/c/ring_halo.c
 *   mpiexec -n 4 ./ring_halo 1000 20            (n doubles, iterations)
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  int iters = argc > 2 ? atoi(argv[2]) : 20;
  int rank, size, ok = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int left = (rank - 1 + size) % size, right = (rank + 1) % size;
  double *out = malloc(sizeof(double) * n), *from_left = malloc(sizeof(double) * n),
         *from_right = malloc(sizeof(double) * n);
  double acc = 0, t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++) {
    MPI_Request reqs[4];
    for (int k = 0; k < n; k++) out[k] = rank * 1000 + i;
    MPI_Irecv(from_left, n, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &reqs[0]);
    MPI_Irecv(from_right, n, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &reqs[1]);
    MPI_Isend(out, n, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &reqs[2]);
    MPI_Isend(out, n, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &reqs[3]);
    MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE);
    ok &= from_left[0] == left * 1000 + i && from_right[n - 1] == right * 1000 + i;
    acc = 0;
    for (int k = 0; k < n; k++) acc += sqrt(fabs(from_left[k] - from_right[k]) + 1.0);
    if (i % 5 == 4) MPI_Allreduce(MPI_IN_PLACE, &acc, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    printf("ring_halo P=%d n=%d iters=%d time=%.6f check=%s\n", size, n, iters,
           MPI_Wtime() - t0, ok ? "OK" : "FAILED");
  free(out);
  free(from_left);
  free(from_right);
  if (!ok) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Finalize();
  return 0;
}
