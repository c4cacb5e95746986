/* The plainest non-periodic 1-D halo exchange, a twin for bench/validate_smpi.py.
 *
 * n cells split over P ranks in blocks; neighbours rank - 1 and rank + 1, MPI_PROC_NULL
 * beyond both ends: the code calls there too, as teaching codes do. Every iteration:
 * Sendrecv of --halo doubles to the right (receiving from the left), then to the left;
 * or, with --nonblocking 1, Irecv from the left and the right, Isend to the right and
 * the left, one Waitall (SimGrid 3.32's time-independent trace drops a Sendrecv that has
 * MPI_PROC_NULL on one side, real message included, so the SMPI twin uses this form); a 3-point Jacobi sweep (charged 4 flops per cell); every
 * --check-every iterations an Allreduce of 8 B (the update norm). End: Allreduce of the
 * maximum, which the maximum principle bounds by the initial one ("OK").
 *
 *   halo1d --n 4194304 --iters 100 --halo 16 --check-every 10 [--nonblocking 1]
 */
#include <math.h>

#include "../smpi/common.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long n = opt(argc, argv, "--n", 1 << 22), iters = opt(argc, argv, "--iters", 100);
  long h = opt(argc, argv, "--halo", 16), every = opt(argc, argv, "--check-every", 10);
  int nonblocking = opt(argc, argv, "--nonblocking", 0) != 0;
  int P, r;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  long x0, nx;
  split(n, P, r, &x0, &nx);
  if (nx < h) refuse(MPI_COMM_WORLD, "halo1d: fewer cells per rank than the halo width");
  int left = r > 0 ? r - 1 : MPI_PROC_NULL, right = r < P - 1 ? r + 1 : MPI_PROC_NULL;
  double *u = xmalloc(sizeof(double) * (nx + 2 * h)), *v = xmalloc(sizeof(double) * (nx + 2 * h));
  double umax0 = 0;
  for (long i = 0; i < nx + 2 * h; i++) {
    u[i] = v[i] = (i >= h && i < nx + h) ? scrambled(x0 + i - h) : 0.0;
    umax0 = fmax(umax0, u[i]);
  }
  for (long it = 0; it < iters; it++) {
    if (nonblocking) {
      MPI_Request q[4];
      MPI_Irecv(u, h, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &q[0]);
      MPI_Irecv(u + nx + h, h, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &q[1]);
      MPI_Isend(u + nx, h, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &q[2]);
      MPI_Isend(u + h, h, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &q[3]);
      MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
    } else {
      MPI_Sendrecv(u + nx, h, MPI_DOUBLE, right, 1, u, h, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
      MPI_Sendrecv(u + h, h, MPI_DOUBLE, left, 2, u + nx + h, h, MPI_DOUBLE, right, 2, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    }
    double norm = 0;
    for (long i = h; i < nx + h; i++) {
      v[i] = 0.5 * (u[i - 1] + u[i + 1]);
      norm += (v[i] - u[i]) * (v[i] - u[i]);
    }
    CHARGE(4.0 * nx);
    double *t = u; u = v; v = t;
    if ((it + 1) % every == 0) {
      double g;
      MPI_Allreduce(&norm, &g, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
  }
  double umax = 0, gmax, gmax0;
  for (long i = h; i < nx + h; i++) umax = fmax(umax, u[i]);
  MPI_Allreduce(&umax, &gmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&umax0, &gmax0, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (r == 0) printf("halo1d P=%d n=%ld: max %.6f <= initial %.6f %s\n", P, n, gmax, gmax0,
                     gmax <= gmax0 + 1e-12 ? "OK" : "FAILED");
  free(u);
  free(v);
  MPI_Finalize();
  return 0;
}
