/* LAMMPS's brick communication on a small scale: a periodic 3-D grid (MPI_Dims_create,
 * declared with MPI_Cart_create, neighbours from MPI_Cart_shift) whose traffic runs on
 * MPI_COMM_WORLD, as LAMMPS's comm_brick does. Every step a forward communication: per
 * dimension two swaps (send down and receive from up, then the reverse), each an
 * Irecv/Send/Wait, skipped where the neighbour is the rank itself (a dimension 1 wide);
 * every 5th step an exchange first: per dimension wider than 1 a Sendrecv of the count
 * down, a second one up only where the dimension is over 2 wide, then the data the same
 * way (Irecv/Send/Wait, the second pair only over 2 wide); then the reverse
 * communication (the swaps backwards; the second swap of a dimension carries half the
 * first's, so that no two consecutive swaps look alike). Sizes are exact faces of an N x 1.5N x 2N box:
 * a face across dimension d is the product of the other two sub-domain edges.
 *
 *   brick3d N      (default 24)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int P, me, dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1}, lo[3], hi[3];
  long n = argc > 1 ? atol(argv[1]) : 24;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Dims_create(P, 3, dims);
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
  for (int d = 0; d < 3; d++) MPI_Cart_shift(cart, d, 1, &lo[d], &hi[d]);
  long edge[3] = {n / dims[0], 3 * n / 2 / dims[1], 2 * n / dims[2]};
  long face[3] = {edge[1] * edge[2], edge[0] * edge[2], edge[0] * edge[1]};
  double *out = calloc(4 * n * n, sizeof(double)), *in = calloc(4 * n * n, sizeof(double));
  MPI_Request req;
  volatile double work = 0;
  for (int step = 0; step < 20; step++) {
    for (long i = 0; i < 200000; i++) work += 1e-9 * i;  /* the force loop */
    if (step % 5 == 0) {  /* exchange: counts, then the data */
      for (int d = 0; d < 3; d++) {
        if (dims[d] == 1) continue;
        int cnt = (int)face[d] / 4, got;
        MPI_Sendrecv(&cnt, 1, MPI_INT, lo[d], 0, &got, 1, MPI_INT, hi[d], 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (dims[d] > 2)
          MPI_Sendrecv(&cnt, 1, MPI_INT, hi[d], 0, &got, 1, MPI_INT, lo[d], 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Irecv(in, cnt, MPI_DOUBLE, hi[d], 0, MPI_COMM_WORLD, &req);
        MPI_Send(out, cnt, MPI_DOUBLE, lo[d], 0, MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (dims[d] > 2) {
          MPI_Irecv(in, cnt, MPI_DOUBLE, lo[d], 0, MPI_COMM_WORLD, &req);
          MPI_Send(out, cnt, MPI_DOUBLE, hi[d], 0, MPI_COMM_WORLD);
          MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
      }
    }
    for (int d = 0; d < 3; d++)  /* forward: positions of the ghosts */
      for (int swap = 0; swap < 2; swap++) {
        int to = swap ? hi[d] : lo[d], from = swap ? lo[d] : hi[d], m = (int)face[d] / (1 + swap);
        if (to == me) continue;
        MPI_Irecv(in, m, MPI_DOUBLE, from, 0, MPI_COMM_WORLD, &req);
        MPI_Send(out, m, MPI_DOUBLE, to, 0, MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
      }
    for (int d = 2; d >= 0; d--)  /* reverse: forces back */
      for (int swap = 1; swap >= 0; swap--) {
        int to = swap ? hi[d] : lo[d], from = swap ? lo[d] : hi[d], m = (int)face[d] / (1 + swap);
        if (to == me) continue;
        MPI_Irecv(in, m, MPI_DOUBLE, to, 0, MPI_COMM_WORLD, &req);
        MPI_Send(out, m, MPI_DOUBLE, from, 0, MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
      }
  }
  double e = 1, sum;
  MPI_Allreduce(&e, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0) printf("brick3d P=%d grid %dx%dx%d\n", P, dims[0], dims[1], dims[2]);
  MPI_Comm_free(&cart);
  MPI_Finalize();
  return 0;
}
