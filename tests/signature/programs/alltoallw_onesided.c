/* Alltoallw with a datatype per peer, plus calls sigex counts but does not model.
 *
 * Rank r sends (r + i + 1) MPI_INT to even peers i and (i + 1) MPI_DOUBLE to odd
 * peers i; receives mirror that (peer i sends r + i + 1 ints if r is even, ...).
 * Then one-sided: MPI_Win_create, 2 x (Win_fence, Put of 3 doubles to the right
 * neighbour), Win_fence, Win_free; and MPI_Reduce_local (local).  The test
 * checks the Alltoallw bytes per peer and that the one-sided calls are named
 * as not modelled. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int count_to(int from, int to) { return to % 2 == 0 ? from + to + 1 : to + 1; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int *sc = malloc(sizeof(int) * P), *rc = malloc(sizeof(int) * P);
  int *sd = malloc(sizeof(int) * P), *rd = malloc(sizeof(int) * P);
  MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * P), *rt = malloc(sizeof(MPI_Datatype) * P);
  int soff = 0, roff = 0;
  for (int i = 0; i < P; i++) {
    sc[i] = count_to(r, i);          /* what r sends to i */
    st[i] = i % 2 == 0 ? MPI_INT : MPI_DOUBLE;
    rc[i] = count_to(i, r);          /* what i sends to r */
    rt[i] = r % 2 == 0 ? MPI_INT : MPI_DOUBLE;
    sd[i] = soff; soff += sc[i] * 8;
    rd[i] = roff; roff += rc[i] * 8;
  }
  char *sbuf = calloc(soff + 8, 1), *rbuf = calloc(roff + 8, 1);
  MPI_Alltoallw(sbuf, sc, sd, st, rbuf, rc, rd, rt, MPI_COMM_WORLD);

  double *base;
  MPI_Win win;
  MPI_Alloc_mem(64 * sizeof(double), MPI_INFO_NULL, &base);
  MPI_Win_create(base, 64 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  double v[3] = {1, 2, 3};
  for (int k = 0; k < 2; k++) {
    MPI_Win_fence(0, win);
    MPI_Put(v, 3, MPI_DOUBLE, (r + 1) % P, 3 * k, 3, MPI_DOUBLE, win);
  }
  MPI_Win_fence(0, win);
  MPI_Win_free(&win);
  MPI_Free_mem(base);
  double a = 1, b = 2;
  MPI_Reduce_local(&a, &b, 1, MPI_DOUBLE, MPI_SUM);
  MPI_Barrier(MPI_COMM_WORLD);
  if (r == 0) printf("alltoallw_onesided P=%d ok\n", P);
  MPI_Finalize();
  return 0;
}
