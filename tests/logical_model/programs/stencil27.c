/* A 27-point stencil's halo (lattice Boltzmann and high-order finite-difference codes):
 * a periodic 3-D Cartesian grid from MPI_Dims_create, an N^3 box cut into bricks, and
 * each step an Irecv and an Isend with every one of the 26 neighbours (faces, edges,
 * corners; displacements in lexicographic order, the tag their index), one Waitall,
 * then the work and an Allreduce, on the Cartesian communicator.
 *   stencil27 N STEPS */
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int n = argc > 1 ? atoi(argv[1]) : 48, steps = argc > 2 ? atoi(argv[2]) : 20;
  int P, me, dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1}, c[3];
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Dims_create(P, 3, dims);
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
  MPI_Comm_rank(cart, &me);
  MPI_Cart_coords(cart, me, 3, c);
  int l[3] = {n / dims[0], n / dims[1], n / dims[2]};
  double *sb = calloc(27 * (size_t)n * n, sizeof(double)), *rb = calloc(27 * (size_t)n * n, sizeof(double));
  MPI_Request req[52];
  for (int s = 0; s < steps; s++) {
    int nr = 0, k = 0;
    for (int dx = -1; dx <= 1; dx++)
      for (int dy = -1; dy <= 1; dy++)
        for (int dz = -1; dz <= 1; dz++, k++) {
          if (!dx && !dy && !dz) continue;
          int to[3] = {c[0] + dx, c[1] + dy, c[2] + dz}, from[3] = {c[0] - dx, c[1] - dy, c[2] - dz}, t, f;
          MPI_Cart_rank(cart, to, &t);
          MPI_Cart_rank(cart, from, &f);
          int cnt = (dx ? 1 : l[0]) * (dy ? 1 : l[1]) * (dz ? 1 : l[2]);
          MPI_Irecv(rb + (size_t)k * n * n, cnt, MPI_DOUBLE, f, k, cart, &req[nr++]);
          MPI_Isend(sb + (size_t)k * n * n, cnt, MPI_DOUBLE, t, k, cart, &req[nr++]);
        }
    MPI_Waitall(nr, req, MPI_STATUSES_IGNORE);
    volatile double x = 0;
    for (long i = 0; i < (long)l[0] * l[1] * l[2] * 20; i++) x += 1e-9;
    double e = x, all;
    MPI_Allreduce(&e, &all, 1, MPI_DOUBLE, MPI_SUM, cart);
  }
  MPI_Finalize();
  return 0;
}
