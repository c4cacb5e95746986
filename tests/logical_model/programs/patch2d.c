/* Processor patches of a 2-D block decomposition, the way unstructured CFD codes
 * (OpenFOAM's "simple" method) exchange them: the domain is cut into a x b blocks
 * (a = MPI_Dims_create(P, 2)'s first dim, along x, the ranks numbered x fastest), no
 * Cartesian communicator is declared, and each step every rank posts an Irecv and an
 * Isend to each neighbour block that exists (none past the domain's edge) in ascending
 * rank order, waits for them all, then sums a residual (Allreduce). With "persistent",
 * the way PETSc's vector scatters do it: the receives and sends are made once
 * (MPI_Recv_init, MPI_Send_init), each step starts them all (MPI_Startall) and waits,
 * and they are freed at the end (MPI_Request_free).
 *   patch2d STEPS [persistent] */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P, steps = argc > 1 ? atoi(argv[1]) : 10;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int dims[2] = {0, 0};
  MPI_Dims_create(P, 2, dims);
  int a = dims[0], b = dims[1], x = r % a, y = r / a;
  int nb[4], n = 0; /* neighbours in ascending rank order: y - 1, x - 1, x + 1, y + 1 */
  if (y > 0) nb[n++] = r - a;
  if (x > 0) nb[n++] = r - 1;
  if (x < a - 1) nb[n++] = r + 1;
  if (y < b - 1) nb[n++] = r + a;
  enum { N = 5760 }; /* (a multiple of every dim up to 6, 8, 10, 12, 16) */
  double *u = calloc(N, sizeof(double)), *in = calloc(4 * N, sizeof(double)), s, t;
  int persistent = argc > 2 && !strcmp(argv[2], "persistent");
  MPI_Request rq[8];
  if (persistent) {
    for (int j = 0; j < n; j++) {
      int len = (nb[j] == r - 1 || nb[j] == r + 1) ? N / b : N / a;
      MPI_Recv_init(in + j * N, len, MPI_DOUBLE, nb[j], 1, MPI_COMM_WORLD, &rq[j]);
    }
    for (int j = 0; j < n; j++) {
      int len = (nb[j] == r - 1 || nb[j] == r + 1) ? N / b : N / a;
      MPI_Send_init(u, len, MPI_DOUBLE, nb[j], 1, MPI_COMM_WORLD, &rq[n + j]);
    }
  }
  for (int it = 0; it < steps; it++) {
    for (int k = 0; k < 200; k++)
      for (int i = 1; i < N - 1; i++) u[i] = 0.5 * (u[i - 1] + u[i + 1]) + 1e-6;
    if (persistent) {
      MPI_Startall(n, rq);     /* the receives */
      MPI_Startall(n, rq + n); /* the sends */
    } else {
      for (int j = 0; j < n; j++) {
        int along_x = nb[j] == r - 1 || nb[j] == r + 1; /* a face across x is N / b long */
        int len = along_x ? N / b : N / a;
        MPI_Irecv(in + j * N, len, MPI_DOUBLE, nb[j], 1, MPI_COMM_WORLD, &rq[2 * j]);
        MPI_Isend(u, len, MPI_DOUBLE, nb[j], 1, MPI_COMM_WORLD, &rq[2 * j + 1]);
      }
    }
    MPI_Waitall(2 * n, rq, MPI_STATUSES_IGNORE);
    s = u[N / 2];
    MPI_Allreduce(&s, &t, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    u[0] = t * 1e-9;
  }
  if (persistent)
    for (int j = 0; j < 2 * n; j++) MPI_Request_free(&rq[j]);
  free(u);
  free(in);
  MPI_Finalize();
  return 0;
}
