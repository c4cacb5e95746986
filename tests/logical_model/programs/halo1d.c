/* The plainest non-periodic 1-D halo exchange: neighbours rank - 1 and rank + 1,
 * MPI_PROC_NULL beyond both ends, then an Allreduce of the residual.
 *   halo1d ITERS MODE [dup]
 * MODE "sendrecv": Sendrecv to the right (receive from the left), then to the left;
 * MODE "evenodd": even ranks send first, odd ranks receive first (Send/Recv), the
 * ordered variant of teaching codes. "dup": every message runs on a duplicate of
 * MPI_COMM_WORLD, as libraries keep their traffic apart. The halo is 64 doubles each way. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static void work(double *a, int n) {
  for (int k = 0; k < 2000; k++)
    for (int i = 1; i < n - 1; i++) a[i] = 0.5 * (a[i - 1] + a[i + 1]);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P, iters = argc > 1 ? atoi(argv[1]) : 10;
  const char *mode = argc > 2 ? argv[2] : "sendrecv";
  MPI_Comm comm = MPI_COMM_WORLD;
  if (argc > 3 && !strcmp(argv[3], "dup")) MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_rank(comm, &r);
  MPI_Comm_size(comm, &P);
  int left = r > 0 ? r - 1 : MPI_PROC_NULL, right = r < P - 1 ? r + 1 : MPI_PROC_NULL;
  enum { H = 64 };
  double a[H + 2] = {0}, sl[H] = {0}, sr[H] = {0}, gl[H], gr[H], res = 0, sum;
  for (int it = 0; it < iters; it++) {
    if (!strcmp(mode, "evenodd")) {
      if (r % 2 == 0) {
        MPI_Send(sr, H, MPI_DOUBLE, right, 1, comm);
        MPI_Recv(gr, H, MPI_DOUBLE, right, 2, comm, MPI_STATUS_IGNORE);
        MPI_Send(sl, H, MPI_DOUBLE, left, 2, comm);
        MPI_Recv(gl, H, MPI_DOUBLE, left, 1, comm, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(gl, H, MPI_DOUBLE, left, 1, comm, MPI_STATUS_IGNORE);
        MPI_Send(sl, H, MPI_DOUBLE, left, 2, comm);
        MPI_Recv(gr, H, MPI_DOUBLE, right, 2, comm, MPI_STATUS_IGNORE);
        MPI_Send(sr, H, MPI_DOUBLE, right, 1, comm);
      }
    } else {
      MPI_Sendrecv(sr, H, MPI_DOUBLE, right, 1, gl, H, MPI_DOUBLE, left, 1, comm,
                   MPI_STATUS_IGNORE);
      MPI_Sendrecv(sl, H, MPI_DOUBLE, left, 2, gr, H, MPI_DOUBLE, right, 2, comm,
                   MPI_STATUS_IGNORE);
    }
    work(a, H + 2);
    res = a[1];
    MPI_Allreduce(&res, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
  }
  if (comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
  MPI_Finalize();
  return 0;
}
