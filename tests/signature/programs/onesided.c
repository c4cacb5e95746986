/* One-sided communication: a window over MPI_COMM_WORLD, argv[1] (default 2) fence
 * epochs each with Put of 4 doubles to the right neighbour, Get of 2 doubles from the
 * left one and Accumulate of 3 ints to rank 0; a passive-target epoch (lock, Rput of 5
 * doubles + Wait, Fetch_and_op, unlock) on the right neighbour; a Compare_and_swap;
 * post/start/complete/wait between even-odd pairs. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int iters = argc > 1 ? atoi(argv[1]) : 2;
  double *base;
  MPI_Win win;
  MPI_Win_allocate(64 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                   &win);
  double v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, got[8];
  int iv[3] = {1, 2, 3};
  int right = (r + 1) % P, left = (r - 1 + P) % P;
  for (int it = 0; it < iters; it++) {
    MPI_Win_fence(0, win);
    MPI_Put(v, 4, MPI_DOUBLE, right, 0, 4, MPI_DOUBLE, win);
    MPI_Get(got, 2, MPI_DOUBLE, left, 8, 2, MPI_DOUBLE, win);
    MPI_Accumulate(iv, 3, MPI_INT, 0, 16, 3, MPI_INT, MPI_SUM, win);
  }
  MPI_Win_fence(0, win);
  MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
  MPI_Request req;
  MPI_Rput(v, 5, MPI_DOUBLE, right, 20, 5, MPI_DOUBLE, win, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  double one = 1, old;
  MPI_Fetch_and_op(&one, &old, MPI_DOUBLE, right, 30, MPI_SUM, win);
  MPI_Win_unlock(right, win);
  MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
  long long swap = 1, cmp = 0, res;
  MPI_Compare_and_swap(&swap, &cmp, &res, MPI_LONG_LONG, 0, 5, win);
  MPI_Win_unlock(0, win);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Group world, pair;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int partner = r ^ 1;
  if (partner < P) {
    MPI_Group_incl(world, 1, &partner, &pair);
    if (r % 2 == 0) { /* target: expose the window to the odd partner */
      MPI_Win_post(pair, 0, win);
      MPI_Win_wait(win);
    } else {
      MPI_Win_start(pair, 0, win);
      MPI_Put(v, 1, MPI_DOUBLE, partner, 50, 1, MPI_DOUBLE, win);
      MPI_Win_complete(win);
    }
    MPI_Group_free(&pair);
  }
  MPI_Group_free(&world);
  MPI_Win_free(&win);
  if (r == 0) printf("onesided P=%d ok\n", P);
  MPI_Finalize();
  return 0;
}
