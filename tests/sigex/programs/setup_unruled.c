/* A time loop whose set-up sigex cannot extrapolate: before the loop every rank swaps a
 * block with rank (3 * rank + 1) mod P, a permutation that follows no communication rule
 * sigex knows (its rules are grid offsets, shifts, xor, fixed ranks and blocks). The loop is a
 * periodic ring exchange with computation that shrinks as 1/P; a final Allreduce ends the run.
 *
 *   setup_unruled N STEPS     (defaults 400000 and 30)
 */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int P, me;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  long n = argc > 1 ? atol(argv[1]) : 400000;
  int steps = argc > 2 ? atoi(argv[2]) : 30;
  double a[256] = {0}, b[256];
  int dst = (3 * me + 1) % P, src = 0;
  for (int s = 0; s < P; s++)
    if ((3 * s + 1) % P == me) src = s;
  MPI_Sendrecv(a, 256, MPI_DOUBLE, dst, 7, b, 256, MPI_DOUBLE, src, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  volatile double work = 0;
  for (int step = 0; step < steps; step++) {
    for (long i = 0; i < n / P; i++) work += 1e-9 * i;
    MPI_Sendrecv(a, 128, MPI_DOUBLE, (me + 1) % P, 1, b, 128, MPI_DOUBLE, (me + P - 1) % P, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(a, 128, MPI_DOUBLE, (me + P - 1) % P, 2, b, 128, MPI_DOUBLE, (me + 1) % P, 2, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
  }
  double x = work, y;
  MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
