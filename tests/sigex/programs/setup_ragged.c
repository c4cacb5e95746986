/* A time loop whose set-up sigex cannot place at an unseen P: before the loop every rank
 * sends its right neighbour a block whose size follows no rule over the ranks (64 + 37 r
 * mod 23 doubles), as a set-up that hands out data unevenly does. The loop is a periodic
 * ring exchange with computation that shrinks as 1/P; a final Allreduce ends the run.
 *
 *   setup_ragged N STEPS     (defaults 400000 and 30)
 */
#include <mpi.h>
#include <stdlib.h>

static int block(int r) { return 64 + (37 * r) % 23; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int P, me;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  long n = argc > 1 ? atol(argv[1]) : 400000;
  int steps = argc > 2 ? atoi(argv[2]) : 30;
  double a[256] = {0}, b[256];
  int right = (me + 1) % P, left = (me + P - 1) % P;
  MPI_Sendrecv(a, block(me), MPI_DOUBLE, right, 7, b, block(left), MPI_DOUBLE, left, 7, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  volatile double work = 0;
  for (int step = 0; step < steps; step++) {
    for (long i = 0; i < n / P; i++) work += 1e-9 * i;
    MPI_Sendrecv(a, 128, MPI_DOUBLE, right, 1, b, 128, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(a, 128, MPI_DOUBLE, left, 2, b, 128, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  double x = work, y;
  MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
