/* A 1-D Jacobi solver whose global residual is summed by hand on binomial trees, a
 * twin for bench/validate_smpi.py: the reduction of teaching codes and HPL's
 * HPL_reduce/HPL_broadcast, written as point-to-point calls whose stages grow with P
 * (ceil(log2 P): rank 0 receives 4 messages at P = 16, 10 at P = 1024).
 *
 * --n points (n/P per rank: strong scaling). Per iteration: a halo of --halo points
 * with the neighbours rank - 1 and rank + 1 (nonblocking; MPI_PROC_NULL past the ends),
 * a sweep charged 8 flops a point, then the residual: reduced to rank 0 (for s = top/2
 * down to 1: a rank below s receives from rank + s, a rank below 2s sends to rank - s)
 * and broadcast back on MPICH's tree (receive from v - lowbit(v), send to v + 2^k for
 * the 2^k below lowbit(v), largest first), --width doubles each way.
 *
 *   tree_reduce --n 16777216 --halo 16 --iters 50 --width 8
 */
#include "../smpi/common.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long N = opt(argc, argv, "--n", 1 << 24), h = opt(argc, argv, "--halo", 16), n;
  long iters = opt(argc, argv, "--iters", 50), w = opt(argc, argv, "--width", 8);
  int P, r;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  n = N / P;
  if (N % P || n < 2 * h || w < 1) refuse(MPI_COMM_WORLD, "tree_reduce: n/P must be at least 2 halos");
  double *u = xmalloc(sizeof(double) * (n + 2 * h)), *x = xmalloc(sizeof(double) * w),
         *y = xmalloc(sizeof(double) * w);
  for (long i = 0; i < n + 2 * h; i++) u[i] = scrambled((unsigned long long)r * n + i);
  int left = r > 0 ? r - 1 : MPI_PROC_NULL, right = r < P - 1 ? r + 1 : MPI_PROC_NULL, top = 1;
  while (top < P) top <<= 1;
  double res = 0;
  for (long it = 0; it < iters; it++) {
    MPI_Request req[4];
    MPI_Irecv(u, (int)h, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(u + n + h, (int)h, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(u + n, (int)h, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(u + h, (int)h, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    CHARGE(8.0 * n);
    double loc = 0;
    for (long i = h; i < n + h; i++) {
      double v = 0.5 * (u[i - 1] + u[i + 1]);
      loc += (v - u[i]) * (v - u[i]);
      u[i] = v;
    }
    for (long j = 0; j < w; j++) x[j] = loc;
    for (int s = top >> 1; s > 0; s >>= 1) { /* reduce to rank 0 */
      if (r < s) {
        if (r + s < P) {
          MPI_Recv(y, (int)w, MPI_DOUBLE, r + s, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          for (long j = 0; j < w; j++) x[j] += y[j];
        }
      } else if (r < 2 * s) {
        MPI_Send(x, (int)w, MPI_DOUBLE, r - s, 3, MPI_COMM_WORLD);
      }
    }
    int low = r ? (r & -r) : top; /* broadcast from rank 0 */
    if (r) MPI_Recv(x, (int)w, MPI_DOUBLE, r - low, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int m = low >> 1; m > 0; m >>= 1)
      if (r + m < P) MPI_Send(x, (int)w, MPI_DOUBLE, r + m, 4, MPI_COMM_WORLD);
    res = x[0];
  }
  if (r == 0) printf("tree_reduce P=%d: residual %s\n", P, res == res ? "OK" : "FAILED");
  free(u); free(x); free(y);
  MPI_Finalize();
  return 0;
}
