/* Independent copies of one decomposition, as LAMMPS's -partition, ensembles and replica
 * runs make them: the world is cut into G consecutive blocks of P/G ranks (Comm_split),
 * each block declares a periodic 3-D Cartesian grid over its own ranks (MPI_Dims_create's
 * dims, no reordering) and finds its neighbours with MPI_Cart_shift, but talks on the
 * block's communicator: per step a Sendrecv to each neighbour along each dimension and
 * way (none along a dimension 1 wide, where the neighbour is the rank itself), a face of
 * N / (the other two dims) doubles, then an Allreduce over the block and one over the
 * world.
 *   partgrid STEPS G */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P, steps = argc > 1 ? atoi(argv[1]) : 10, G = argc > 2 ? atoi(argv[2]) : 2;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int per = P / G;
  MPI_Comm block, cart;
  MPI_Comm_split(MPI_COMM_WORLD, r / per, r, &block);
  int dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1};
  MPI_Dims_create(per, 3, dims);
  MPI_Cart_create(block, 3, dims, periods, 0, &cart);
  enum { N = 5760 };
  double *u = calloc(N, sizeof(double)), *in = calloc(N, sizeof(double)), s, t;
  for (int it = 0; it < steps; it++) {
    for (int k = 0; k < 100; k++)
      for (int i = 1; i < N - 1; i++) u[i] = 0.5 * (u[i - 1] + u[i + 1]) + 1e-6;
    for (int d = 0; d < 3; d++) {
      if (dims[d] == 1) continue;
      int lo, hi, len = N / (dims[(d + 1) % 3] * dims[(d + 2) % 3]);
      MPI_Cart_shift(cart, d, 1, &lo, &hi);
      MPI_Sendrecv(u, len, MPI_DOUBLE, hi, d, in, len, MPI_DOUBLE, lo, d, block, MPI_STATUS_IGNORE);
      MPI_Sendrecv(u, len, MPI_DOUBLE, lo, 3 + d, in, len, MPI_DOUBLE, hi, 3 + d, block, MPI_STATUS_IGNORE);
    }
    s = u[N / 2];
    MPI_Allreduce(&s, &t, 1, MPI_DOUBLE, MPI_SUM, block);
    MPI_Allreduce(&t, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    u[0] = s * 1e-9;
  }
  free(u);
  free(in);
  MPI_Comm_free(&cart);
  MPI_Comm_free(&block);
  MPI_Finalize();
  return 0;
}
