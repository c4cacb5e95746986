/* What PETSc does in its set-up: every rank makes copies of MPI_COMM_SELF, and rank 0
 * alone broadcasts the options it read on its own copy (a collective of one rank), then to
 * everyone on MPI_COMM_WORLD; a ring exchange and a sum follow, step after step.
 *   selfcomm STEPS */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P, steps = argc > 1 ? atoi(argv[1]) : 10;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm self1, self2;
  MPI_Comm_dup(MPI_COMM_SELF, &self1);
  MPI_Comm_dup(MPI_COMM_SELF, &self2);
  int opts[4] = {1, 2, 3, 4};
  if (r == 0)
    for (int k = 0; k < 3; k++) MPI_Bcast(opts, 4, MPI_INT, 0, self2);
  MPI_Bcast(opts, 4, MPI_INT, 0, MPI_COMM_WORLD);
  enum { N = 4800 };
  double *u = calloc(N, sizeof(double)), in[64], s, t;
  for (int it = 0; it < steps; it++) {
    for (int k = 0; k < 100; k++)
      for (int i = 1; i < N - 1; i++) u[i] = 0.5 * (u[i - 1] + u[i + 1]) + 1e-6;
    MPI_Sendrecv(u, 64, MPI_DOUBLE, (r + 1) % P, 3, in, 64, MPI_DOUBLE, (r + P - 1) % P, 3, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    s = u[N / 2] + in[0];
    MPI_Allreduce(&s, &t, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    u[0] = t * 1e-9;
  }
  MPI_Comm_free(&self2);
  MPI_Comm_free(&self1);
  free(u);
  MPI_Finalize();
  return 0;
}
