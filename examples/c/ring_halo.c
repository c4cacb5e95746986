/* ring_halo.c -- the C twin of examples/ring_halo.py: the same MPI calls,
 * sizes and tags in the same order.
 *
 * Per rank, every iteration i = 0 .. iters-1: MPI_Irecv from left = (r-1+P)%P
 * (tag 0), MPI_Irecv from right = (r+1)%P (tag 1), MPI_Isend to right (tag 0),
 * MPI_Isend to left (tag 1), n doubles each; MPI_Waitall of the four; a short
 * compute loop; and at i % 5 == 4 one MPI_Allreduce of one double (MPI_SUM).
 * End: MPI_Barrier, then MPI_Finalize. Runs at any P.
 *
 * Build with the MPI's compiler wrapper (no libm needed) and run:
 *   mpicc -O2 -o ring_halo examples/c/ring_halo.c
 *   mpiexec -n 4 ./ring_halo 1000 20            (usage: ring_halo <n> <iters>)
 * Defaults: n = 1000 doubles, iters = 20. Exit status: 0 on success, 1 if a
 * received value is wrong, 2 on bad arguments.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int positive(const char *text, int *value) {
  char *end;
  long v = strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 1 || v > 1000000000L) return 0;
  *value = (int)v;
  return 1;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, ok = 1, n = 1000, iters = 20;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 3 || (argc > 1 && !positive(argv[1], &n)) || (argc > 2 && !positive(argv[2], &iters))) {
    if (rank == 0) fprintf(stderr, "usage: ring_halo <n> <iters>   (positive integers)\n");
    MPI_Finalize(); /* every rank sees the same argv: all leave the same way */
    return 2;
  }
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
    acc = 0; /* the same short compute as the Python twin */
    for (int k = 0; k < n; k++) {
      double d = from_left[k] - from_right[k];
      acc += 1.0 / (1.0 + (d < 0 ? -d : d));
    }
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
