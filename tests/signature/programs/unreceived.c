/* A send nobody receives, as Quantum ESPRESSO leaves them: before the last barrier rank 0
 * sends rank 1 an empty message on a duplicate of the world and frees the request; rank 1
 * never posts the receive, and the duplicate is freed (Open MPI lets such a run finish;
 * MPICH aborts it in MPI_Finalize). */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, P, x = 1, y;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  for (int i = 0; i < 20; i++) MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Comm pool;
  MPI_Comm_dup(MPI_COMM_WORLD, &pool);
  if (me == 0) {
    MPI_Request req;
    MPI_Isend(&x, 0, MPI_INT, 1, 99, pool, &req);
    MPI_Request_free(&req);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_free(&pool);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
