/* Neighbour exchanges in an order that follows the data: each rank exchanges halos with
 * its ring neighbours rank +- 1 and rank +- 2 (periodic), posting its receives and its
 * sends in the order of a pseudo-random permutation seeded by its rank and by SEEDSTEP
 * (as OpenFOAM visits its processor patches in the order of its neighbours' ids, or an
 * atom exchange the neighbours in the order its atoms arrive), then waits for all of them
 * and joins an Allreduce of the residual. A short flag goes to the +1 neighbour with a
 * blocking Send and Recv, in an order the permutation chooses too. No rank class orders
 * the calls; the messages and bytes per rank follow P (the halo is N / P doubles to a
 * +-1 neighbour, half that to a +-2 one).
 *   randorder N STEPS [EVERY [FLAGS]]
 * EVERY > 0: the permutations are drawn again every EVERY steps (seeded by the rank and
 * step / EVERY; sigex's signature finds no loop in a run whose order changes so); the
 * default 0 keeps each rank's order for the whole run. FLAGS 0: no flag (the step's
 * point-to-point calls are all nonblocking: Irecv, Isend, Waitall). */
#include <mpi.h>
#include <stdlib.h>

static unsigned lcg(unsigned *s) { return *s = *s * 1103515245u + 12345u; }

static void permute(int *p, int n, unsigned seed) {
  for (int i = 0; i < n; i++) p[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = (int)((lcg(&seed) >> 8) % (unsigned)(i + 1)), t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
}

static void work(double *a, int n) {
  for (int k = 0; k < 20; k++)
    for (int i = 1; i < n - 1; i++) a[i] = 0.5 * (a[i - 1] + a[i + 1]);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P, N = argc > 1 ? atoi(argv[1]) : 96000, steps = argc > 2 ? atoi(argv[2]) : 20,
      every = argc > 3 ? atoi(argv[3]) : 0, flags = argc > 4 ? atoi(argv[4]) : 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  const int off[4] = {1, -1, 2, -2};
  int h[4], peer[4], from[4];
  for (int d = 0; d < 4; d++) {
    h[d] = (d < 2 ? N / P : N / (2 * P));
    peer[d] = ((r + off[d]) % P + P) % P;
    from[d] = ((r - off[d]) % P + P) % P;
  }
  double *sbuf = calloc(4 * (size_t)N, sizeof(double)), *rbuf = calloc(4 * (size_t)N, sizeof(double));
  double *a = calloc((size_t)N / P + 2, sizeof(double)), res, sum, flag = 1, got;
  MPI_Request req[8];
  int order[4];
  for (int it = 0; it < steps; it++) {
    unsigned epoch = every > 0 ? (unsigned)(it / every) : 0u;
    permute(order, 4, 7919u * (unsigned)r + 104729u * epoch + 1u);
    for (int j = 0; j < 4; j++) {  /* receives, in this rank's order of the step */
      int d = order[j];
      MPI_Irecv(rbuf + (size_t)d * N, h[d], MPI_DOUBLE, from[d], d, MPI_COMM_WORLD, &req[j]);
    }
    permute(order, 4, 31337u * (unsigned)r + 7u * epoch + 3u);
    for (int j = 0; j < 4; j++) {  /* sends, in another order */
      int d = order[j];
      MPI_Isend(sbuf + (size_t)d * N, h[d], MPI_DOUBLE, peer[d], d, MPI_COMM_WORLD, &req[4 + j]);
    }
    if (flags) {  /* a flag to the right, its receive where the rank's order puts it */
      if (r == 0 || order[0] % 2 == 0) {  /* (rank 0 sends first: no cycle of receives) */
        MPI_Send(&flag, 1, MPI_DOUBLE, peer[0], 9, MPI_COMM_WORLD);
        MPI_Recv(&got, 1, MPI_DOUBLE, from[0], 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(&got, 1, MPI_DOUBLE, from[0], 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&flag, 1, MPI_DOUBLE, peer[0], 9, MPI_COMM_WORLD);
      }
    }
    MPI_Waitall(8, req, MPI_STATUSES_IGNORE);
    work(a, N / P + 2);
    res = a[1] + rbuf[0];
    MPI_Allreduce(&res, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  free(sbuf);
  free(rbuf);
  free(a);
  MPI_Finalize();
  return 0;
}
