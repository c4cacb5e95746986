/* A master and its workers: each iteration rank 0 sends every worker a task, then takes
 * their results with MPI_ANY_SOURCE in the order they come (the workers' work differs, and
 * the order changes from iteration to iteration), then an Allreduce.
 *   master ITERS */
#include <mpi.h>
#include <stdlib.h>

static double work(int n) {
  volatile double s = 0;
  for (int i = 0; i < n; i++) s += 1e-9 * i;
  return s;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P, iters = argc > 1 ? atoi(argv[1]) : 30;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  double task[4] = {0}, res[2] = {0}, sum;
  for (int it = 0; it < iters; it++) {
    if (r == 0) {
      for (int q = 1; q < P; q++) MPI_Send(task, 4, MPI_DOUBLE, q, 1, MPI_COMM_WORLD);
      for (int q = 1; q < P; q++) MPI_Recv(res, 2, MPI_DOUBLE, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(task, 4, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      res[0] = work(20000 * (1 + (r * 7 + it * 3) % 5));
      MPI_Send(res, 2, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);
    }
    MPI_Allreduce(res, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
