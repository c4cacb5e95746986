/* Rooted collectives whose bytes differ between the root and the other ranks:
 * each iteration Scatters N = 80640 ints from rank 0 (N / P to each rank), Gathers them
 * back to the last rank, Reduces 32 doubles to rank 0 and Bcasts 8 doubles from
 * rank 0.   rooted ITERS */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P, iters = argc > 1 ? atoi(argv[1]) : 10;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  enum { N = 80640 }; /* divisible by every P up to 10 and by 12, 14, 16, 18, 20, 24 */
  int *all = malloc(N * sizeof(int)), *mine = malloc(N * sizeof(int));
  double v[32] = {0}, s[32];
  for (int it = 0; it < iters; it++) {
    MPI_Scatter(all, N / P, MPI_INT, mine, N / P, MPI_INT, 0, MPI_COMM_WORLD);
    for (int k = 0; k < 20000; k++) v[k % 32] += 1e-9 * k;
    MPI_Gather(mine, N / P, MPI_INT, all, N / P, MPI_INT, P - 1, MPI_COMM_WORLD);
    MPI_Reduce(v, s, 32, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Bcast(v, 8, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  }
  free(all);
  free(mine);
  MPI_Finalize();
  return 0;
}
