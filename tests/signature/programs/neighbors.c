/* Neighbourhood collectives on a 2-D non-periodic Cartesian grid and on a
 * distributed-graph ring (each rank: sources r-1, r+1; destinations r+1, r-1):
 *   Neighbor_alltoall     on the grid, 3 ints per neighbour
 *   Neighbor_allgatherv   on the ring, 2 doubles to and from each neighbour
 *   Ineighbor_alltoallv   on the ring, (r + k + 1) ints to destination k, then Wait
 * repeated argv[1] times (default 2). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int dims[2] = {0, 0}, periods[2] = {0, 0};
  MPI_Dims_create(P, 2, dims);
  MPI_Comm cart, ring;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  int srcs[2] = {(r - 1 + P) % P, (r + 1) % P}, dsts[2] = {(r + 1) % P, (r - 1 + P) % P};
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, srcs, MPI_UNWEIGHTED, 2, dsts,
                                 MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &ring);
  int sbuf[64] = {0}, rbuf[64] = {0};
  double dsend[2] = {1, 2}, drecv[64];
  int rcounts[2] = {2, 2}, rdispls[2] = {0, 32};
  int scv[2] = {r + 1, r + 2}, sdv[2] = {0, 16};
  int rcv[2] = {srcs[0] + 1, srcs[1] + 2}, rdv[2] = {0, 16};
  /* what source s sends to its destination k: s + k + 1; rank r is destination 0 of r-1
   * (its source 0) and destination 1 of r+1 (its source 1) */
  rcv[0] = srcs[0] + 0 + 1;
  rcv[1] = srcs[1] + 1 + 1;
  int iters = argc > 1 ? atoi(argv[1]) : 2;
  for (int it = 0; it < iters; it++) {
    MPI_Neighbor_alltoall(sbuf, 3, MPI_INT, rbuf, 3, MPI_INT, cart);
    MPI_Neighbor_allgatherv(dsend, 2, MPI_DOUBLE, drecv, rcounts, rdispls, MPI_DOUBLE, ring);
    MPI_Request req;
    MPI_Ineighbor_alltoallv(sbuf, scv, sdv, MPI_INT, rbuf, rcv, rdv, MPI_INT, ring, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&ring);
  MPI_Comm_free(&cart);
  if (r == 0) printf("neighbors P=%d grid %dx%d ok\n", P, dims[0], dims[1]);
  MPI_Finalize();
  return 0;
}
