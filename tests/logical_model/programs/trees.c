/* Trees and butterflies written as point-to-point calls, whose stages grow with P.
 *   trees ITERS MODE
 * MODE "tree": each iteration reduces to rank 0 as teaching codes do (for s = ..., 4, 2, 1:
 * a rank below s receives from rank + s, a rank below 2s sends to rank - s), then
 * broadcasts from the last rank on MPICH's binomial tree (receive from the parent
 * v - lowbit(v), send to v + 2^k for the 2^k below lowbit(v), largest first), then an
 * Allreduce. MODE "butterfly": recursive doubling, a Sendrecv with rank XOR 2^k for
 * k = 0, 1, ... (P a power of two), then an Allreduce. MODE "flat": master and workers,
 * rank 0 sends each worker its share and takes their results back, in rank order; MODE
 * "master" the same, the results taken with MPI_ANY_SOURCE as they come; MODE "isend"
 * the same, rank 0 posting every send (Isend) and every receive (Irecv) and waiting for
 * each batch with one Waitall. MODE "cg": NPB CG's reductions along the rows of its
 * power-of-two grid (npcols = nprows or 2 nprows, row-major): for i = L .. 1 an Irecv,
 * Send and Wait with rank xor npcols / 2^i tagged i (L = log2 npcols), a Sendrecv down
 * the column, then for i = 1 .. L the same with one double (a dot product). MODE
 * "ordered": recursive doubling in blocking calls, the lower rank of each pair sending
 * first (Send then Recv), the other receiving first, as teaching codes avoid a deadlock.
 * MODE "pairwise": an all-to-all by hand, a Sendrecv to
 * rank + s from rank - s (mod P) for s = 1 .. P - 1, then an Allreduce. MODE "tournament":
 * an all-to-all on a round-robin tournament's rounds (the polygon method: at round s team
 * s meets the fixed team and teams s + k and s - k, mod the others, meet each other; a
 * dummy team where P is odd, whose opponent sits the round out), a Sendrecv with the
 * opponent tagged sender * P + receiver, on a duplicate of MPI_COMM_WORLD, as FFTW's
 * pairwise transposes make it. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static double work(double *a, int n) {
  for (int k = 0; k < 500; k++)
    for (int i = 1; i < n - 1; i++) a[i] = 0.5 * (a[i - 1] + a[i + 1]) + 1e-3;
  return a[n / 2];
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P, iters = argc > 1 ? atoi(argv[1]) : 10;
  const char *mode = argc > 2 ? argv[2] : "tree";
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  enum { N = 256 };
  double a[N] = {0}, x[32], y[32], sum;
  for (int it = 0; it < iters; it++) {
    x[0] = work(a, N);
    if (!strcmp(mode, "ordered")) {
      for (int m = 1; m < P; m <<= 1) {
        int q = r ^ m;
        if (r < q) {
          MPI_Send(x, 6, MPI_DOUBLE, q, 3, MPI_COMM_WORLD);
          MPI_Recv(y, 6, MPI_DOUBLE, q, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(y, 6, MPI_DOUBLE, q, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(x, 6, MPI_DOUBLE, q, 3, MPI_COMM_WORLD);
        }
        x[0] += y[0];
      }
    } else if (!strcmp(mode, "cg")) {
      int k = 0;
      while ((1 << k) < P) k++;
      int nprows = 1 << (k / 2), npcols = P / nprows, L = 0, row = r / npcols, col = r % npcols;
      while ((1 << L) < npcols) L++;
      for (int i = L; i >= 1; i--) {
        MPI_Request rq;
        MPI_Irecv(y, 8, MPI_DOUBLE, r ^ (npcols >> i), i, MPI_COMM_WORLD, &rq);
        MPI_Send(x, 8, MPI_DOUBLE, r ^ (npcols >> i), i, MPI_COMM_WORLD);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        x[1] += y[1];
      }
      MPI_Sendrecv(x, 4, MPI_DOUBLE, ((row + 1) % nprows) * npcols + col, 9, y, 4, MPI_DOUBLE,
                   ((row + nprows - 1) % nprows) * npcols + col, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 1; i <= L; i++) {
        MPI_Request rq;
        MPI_Irecv(y, 1, MPI_DOUBLE, r ^ (npcols >> i), i, MPI_COMM_WORLD, &rq);
        MPI_Send(x, 1, MPI_DOUBLE, r ^ (npcols >> i), i, MPI_COMM_WORLD);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        x[0] += y[0];
      }
    } else if (!strcmp(mode, "isend")) {
      if (r == 0) {
        MPI_Request rq[64];
        for (int q = 1; q < P; q++) MPI_Isend(x, 8, MPI_DOUBLE, q, 5, MPI_COMM_WORLD, &rq[q - 1]);
        MPI_Waitall(P - 1, rq, MPI_STATUSES_IGNORE);
        for (int q = 1; q < P; q++) MPI_Irecv(y + 2 * (q % 8), 2, MPI_DOUBLE, q, 6, MPI_COMM_WORLD, &rq[q - 1]);
        MPI_Waitall(P - 1, rq, MPI_STATUSES_IGNORE);
      } else {
        MPI_Recv(x, 8, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        y[0] = work(a, N / 4);
        MPI_Send(y, 2, MPI_DOUBLE, 0, 6, MPI_COMM_WORLD);
      }
    } else if (!strcmp(mode, "flat") || !strcmp(mode, "master")) {
      int any = !strcmp(mode, "master");
      if (r == 0) {
        for (int q = 1; q < P; q++) MPI_Send(x, 8, MPI_DOUBLE, q, 5, MPI_COMM_WORLD);
        for (int q = 1; q < P; q++) {
          MPI_Recv(y, 2, MPI_DOUBLE, any ? MPI_ANY_SOURCE : q, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          x[0] += y[0];
        }
      } else {
        MPI_Recv(x, 8, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        y[0] = work(a, N / 4);
        MPI_Send(y, 2, MPI_DOUBLE, 0, 6, MPI_COMM_WORLD);
      }
    } else if (!strcmp(mode, "pairwise")) {
      for (int s = 1; s < P; s++)
        MPI_Sendrecv(x, 4, MPI_DOUBLE, (r + s) % P, 8, y, 4, MPI_DOUBLE, (r - s + P) % P, 8, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    } else if (!strcmp(mode, "tournament")) {
      static MPI_Comm dup = MPI_COMM_NULL;
      if (dup == MPI_COMM_NULL) MPI_Comm_dup(MPI_COMM_WORLD, &dup);
      int n = P % 2 ? P + 1 : P, fixed = n - 1;
      for (int s = 0; s < n - 1; s++) {
        int q = -1;
        for (int k = 0; k < n / 2 && q < 0; k++) {
          int u = k ? (s + k) % (n - 1) : s, w = k ? (s - k + n - 1) % (n - 1) : fixed;
          if (u == r) q = w;
          else if (w == r) q = u;
        }
        if (q < P)
          MPI_Sendrecv(x, 4, MPI_DOUBLE, q, r * P + q, y, 4, MPI_DOUBLE, q, q * P + r, dup, MPI_STATUS_IGNORE);
      }
    } else if (!strcmp(mode, "butterfly")) {
      for (int m = 1; m < P; m <<= 1) {
        MPI_Sendrecv(x, 32, MPI_DOUBLE, r ^ m, 7, y, 32, MPI_DOUBLE, r ^ m, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        x[0] += y[0];
      }
    } else {
      int top = 1;
      while (top < P) top <<= 1;
      for (int s = top >> 1; s > 0; s >>= 1) { /* reduce to rank 0 */
        if (r < s) {
          if (r + s < P) {
            MPI_Recv(y, 4, MPI_DOUBLE, r + s, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            x[0] += y[0];
          }
        } else if (r < 2 * s) {
          MPI_Send(x, 4, MPI_DOUBLE, r - s, 3, MPI_COMM_WORLD);
        }
      }
      int root = P - 1, v = (r - root + P) % P;
      int low = v ? (v & -v) : top;
      if (v) MPI_Recv(x, 16, MPI_DOUBLE, (v - low + root) % P, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int m = low >> 1; m > 0; m >>= 1)
        if (v + m < P) MPI_Send(x, 16, MPI_DOUBLE, (v + m + root) % P, 4, MPI_COMM_WORLD);
    }
    MPI_Allreduce(x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    a[0] = sum * 1e-9;
  }
  MPI_Finalize();
  return 0;
}
