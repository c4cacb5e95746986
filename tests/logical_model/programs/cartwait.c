/* A halo exchange on a non-periodic 2-D Cartesian grid the way many solver libraries
 * write it (SUNDIALS's parallel examples, for one): MPI_Dims_create's grid, declared with
 * MPI_Cart_create, each rank posts an Irecv from each neighbour that exists (west, east,
 * south, north; none past the edge, no MPI_PROC_NULL call), then an Isend to each, then
 * waits with MPI_Wait on each neighbour's receive and send in turn; a PCG-like residual
 * (Allreduce) ends the step. A corner rank makes 4 posts and 4 waits, an edge rank 6, an
 * interior rank 8.
 *   cartwait STEPS */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int P, r, steps = argc > 1 ? atoi(argv[1]) : 10;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int dims[2] = {0, 0}, periods[2] = {0, 0}, c[2];
  MPI_Dims_create(P, 2, dims);
  MPI_Comm grid;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
  MPI_Comm_rank(grid, &r);
  MPI_Cart_coords(grid, r, 2, c);
  int nb[4], len[4], n = 0, lo, hi;
  enum { N = 5760 }; /* (a multiple of every dim up to 6) */
  for (int d = 0; d < 2; d++) {
    MPI_Cart_shift(grid, d, 1, &lo, &hi);
    int face = N / dims[1 - d];
    if (lo != MPI_PROC_NULL) { nb[n] = lo; len[n++] = face; }
    if (hi != MPI_PROC_NULL) { nb[n] = hi; len[n++] = face; }
  }
  double *u = calloc(N, sizeof(double)), *in = calloc(4 * N, sizeof(double)), s, t;
  MPI_Request rr[4], rs[4];
  for (int it = 0; it < steps; it++) {
    for (int k = 0; k < 200; k++)
      for (int i = 1; i < N - 1; i++) u[i] = 0.5 * (u[i - 1] + u[i + 1]) + 1e-6;
    for (int j = 0; j < n; j++) MPI_Irecv(in + j * N, len[j], MPI_DOUBLE, nb[j], 7, grid, &rr[j]);
    for (int j = 0; j < n; j++) MPI_Isend(u, len[j], MPI_DOUBLE, nb[j], 7, grid, &rs[j]);
    for (int j = 0; j < n; j++) {
      MPI_Wait(&rr[j], MPI_STATUS_IGNORE);
      MPI_Wait(&rs[j], MPI_STATUS_IGNORE);
    }
    s = u[N / 2];
    MPI_Allreduce(&s, &t, 1, MPI_DOUBLE, MPI_SUM, grid);
    u[0] = t * 1e-9;
  }
  MPI_Comm_free(&grid);
  free(u);
  free(in);
  MPI_Finalize();
  return 0;
}
