/* A 1-D multigrid V-cycle whose coarse levels leave ranks idle, a twin for
 * bench/validate_smpi.py and the logical model's tests.
 *
 * --n points on the fine level (n/P per rank: strong scaling), --levels L (default 3).
 * Level l is worked by the ranks r with r mod 2^l = 0, each holding n/P points; its neighbours are the active
 * ranks 2^l away (MPI_PROC_NULL past the ends: no periodic wrap). Per V-cycle, going
 * down: smooth (two Sendrecv of a --halo point halo with the neighbours, charged 10 flops
 * a point), then restrict: each rank active at l but not at l+1 sends its n/2 coarse
 * points to the rank 2^l below it (n/P/2); at the coarsest level an Allreduce on every rank
 * (the idle ones too); going up, prolong (the same messages back) and smooth. Ranks
 * idle at a level make no call there. P must be a multiple of 2^(L-1).
 *
 * --nonblocking 1: the halo as Irecv/Isend and one Waitall instead of two Sendrecv.
 *
 *   mg_idle --n 4194304 --halo 8 --cycles 20 --levels 3 [--nonblocking 1]
 */
#include "../smpi/common.h"

static void smooth(int l, int r, int P, double *u, long n, long h, int nonblocking) {
  int s = 1 << l, left = r - s >= 0 ? r - s : MPI_PROC_NULL, right = r + s < P ? r + s : MPI_PROC_NULL;
  if (nonblocking) {  /* for SMPI, whose traces do not keep a Sendrecv with MPI_PROC_NULL */
    MPI_Request req[4];
    MPI_Irecv(u, (int)h, MPI_DOUBLE, left, 20 + l, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(u + n, (int)h, MPI_DOUBLE, right, 30 + l, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(u + n - h, (int)h, MPI_DOUBLE, right, 20 + l, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(u + h, (int)h, MPI_DOUBLE, left, 30 + l, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
  } else {
    MPI_Sendrecv(u + n - h, (int)h, MPI_DOUBLE, right, 20 + l, u, (int)h, MPI_DOUBLE, left, 20 + l,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(u + h, (int)h, MPI_DOUBLE, left, 30 + l, u + n, (int)h, MPI_DOUBLE, right, 30 + l,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  CHARGE(10.0 * n);
  for (long i = h; i < n; i++) u[i] = 0.5 * (u[i] + u[i - 1]);
}

/* restriction (up = 0) or prolongation (up = 1) between levels l and l + 1 */
static void transfer(int l, int r, int up, double *u, long n) {
  int s = 1 << l;
  if (r % (2 * s) == s) {
    if (up) MPI_Recv(u, (int)(n / 2), MPI_DOUBLE, r - s, 40 + l, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else MPI_Send(u, (int)(n / 2), MPI_DOUBLE, r - s, 50 + l, MPI_COMM_WORLD);
  } else if (r % (2 * s) == 0) {
    if (up) MPI_Send(u, (int)(n / 2), MPI_DOUBLE, r + s, 40 + l, MPI_COMM_WORLD);
    else MPI_Recv(u, (int)(n / 2), MPI_DOUBLE, r + s, 50 + l, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long N = opt(argc, argv, "--n", 1 << 22), h = opt(argc, argv, "--halo", 8), n;
  long cycles = opt(argc, argv, "--cycles", 20);
  int L = (int)opt(argc, argv, "--levels", 3), nb = (int)opt(argc, argv, "--nonblocking", 0), P, r;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  if (P % (1 << (L - 1))) refuse(MPI_COMM_WORLD, "mg_idle: P must be a multiple of 2^(levels-1)");
  n = N / P;
  if (N % P || n % 2 || n < 2 * h) refuse(MPI_COMM_WORLD, "mg_idle: n/P must be even and at least 2 halos");
  double *u = xmalloc(sizeof(double) * (n + 2 * h));
  for (long i = 0; i < n + 2 * h; i++) u[i] = scrambled((unsigned long long)r * n + i);
  double res = 0;
  for (long c = 0; c < cycles; c++) {
    for (int l = 0; l < L; l++) {
      if (r % (1 << l) == 0) smooth(l, r, P, u, n, h, nb);
      if (l < L - 1) transfer(l, r, 0, u, n);
    }
    double loc = u[0], glob;
    MPI_Allreduce(&loc, &glob, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    res += glob;
    for (int l = L - 2; l >= 0; l--) {
      transfer(l, r, 1, u, n);
      if (r % (1 << l) == 0) smooth(l, r, P, u, n, h, nb);
    }
  }
  if (r == 0) printf("mg_idle P=%d levels %d: %s\n", P, L, res == res ? "OK" : "FAILED");
  free(u);
  MPI_Finalize();
  return 0;
}
