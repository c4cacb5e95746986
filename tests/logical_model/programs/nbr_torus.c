/* Neighbourhood collectives on a 2-D periodic torus built as a distributed graph:
 * dims = MPI_Dims_create(P, 2), row-major ranks, each rank's sources and destinations
 * its four torus neighbours (dimension 0 down, up, dimension 1 left, right), given to
 * MPI_Dist_graph_create_adjacent (no reorder). Per iteration: MPI_Neighbor_alltoall of
 * 16 doubles per neighbour, then MPI_Neighbor_alltoallv of the edges of an N x N
 * field (N / dims[1] doubles along dimension 0, N / dims[0] along dimension 1), then
 * a residual Allreduce on the graph communicator.
 *   nbr_torus N ITERS */
#include <mpi.h>
#include <stdlib.h>

static void work(double *a, int n) {
  for (int k = 0; k < 40; k++)
    for (int i = 1; i < n - 1; i++) a[i] = 0.5 * (a[i - 1] + a[i + 1]);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int P, r, N = argc > 1 ? atoi(argv[1]) : 480, iters = argc > 2 ? atoi(argv[2]) : 10;
  int dims[2] = {0, 0};
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Dims_create(P, 2, dims);
  int i = r / dims[1], j = r % dims[1];
  int nb[4] = {((i - 1 + dims[0]) % dims[0]) * dims[1] + j, ((i + 1) % dims[0]) * dims[1] + j,
               i * dims[1] + (j - 1 + dims[1]) % dims[1], i * dims[1] + (j + 1) % dims[1]};
  MPI_Comm g;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 4, nb, MPI_UNWEIGHTED, 4, nb, MPI_UNWEIGHTED,
                                 MPI_INFO_NULL, 0, &g);
  int nx = N / dims[0], ny = N / dims[1], m = nx > ny ? nx : ny;
  int counts[4] = {ny, ny, nx, nx}, displs[4] = {0, m, 2 * m, 3 * m};
  double *s = calloc((size_t)4 * m, sizeof(double)), *t = calloc((size_t)4 * m, sizeof(double));
  double blk[64] = {0}, got[64], *a = calloc((size_t)nx * ny + 2, sizeof(double)), res, sum;
  for (int it = 0; it < iters; it++) {
    MPI_Neighbor_alltoall(blk, 16, MPI_DOUBLE, got, 16, MPI_DOUBLE, g);
    MPI_Neighbor_alltoallv(s, counts, displs, MPI_DOUBLE, t, counts, displs, MPI_DOUBLE, g);
    work(a, nx * ny);
    res = a[1] + t[0] + got[0];
    MPI_Allreduce(&res, &sum, 1, MPI_DOUBLE, MPI_SUM, g);
  }
  MPI_Comm_free(&g);
  free(s);
  free(t);
  free(a);
  MPI_Finalize();
  return 0;
}
