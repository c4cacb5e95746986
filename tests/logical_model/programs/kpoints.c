/* A k-point loop as plane-wave codes write it: items owned round-robin, each broadcast
 * from its owner in turn.  Every SCF iteration, each rank computes the k-points it owns
 * (k mod P == rank), then k-point k's eigenvalues (EIG doubles) are broadcast from rank
 * k mod P for every k, the bands of each half of the ranks (Comm_split by rank parity)
 * from the half's members in turn (band b from member b mod n), and the density is summed
 * with an Allreduce.  NK need not be a multiple of P: the last turn is partial.  With
 * "owner", a k-point is computed by its owner right before it is broadcast (one rank
 * computes while the others wait in the Bcast), as a panel loop does.
 *   kpoints NK ITERS [owner] */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

enum { EIG = 18, BANDS = 7, RHO = 512 };

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int nk = argc > 1 ? atoi(argv[1]) : 20, iters = argc > 2 ? atoi(argv[2]) : 6;
  int owner = argc > 3 && strcmp(argv[3], "owner") == 0;
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &half);
  int hr, hn;
  MPI_Comm_rank(half, &hr);
  MPI_Comm_size(half, &hn);
  double *eig = calloc((size_t)nk * EIG, sizeof(double)), band[4] = {0};
  double rho[RHO] = {0}, sum[RHO];
  for (int it = 0; it < iters; it++) {
    for (int k = r; k < nk && !owner; k += P)  /* this rank's k-points */
      for (int j = 0; j < 40000; j++) eig[k * EIG + j % EIG] += 1e-9 * j;
    for (int k = 0; k < nk; k++) {
      for (int j = 0; owner && k % P == r && j < 400000; j++) eig[k * EIG + j % EIG] += 1e-9 * j;
      MPI_Bcast(eig + k * EIG, EIG, MPI_DOUBLE, k % P, MPI_COMM_WORLD);
    }
    for (int b = 0; b < BANDS; b++) MPI_Bcast(band, 4, MPI_DOUBLE, b % hn, half);
    for (int j = 0; j < RHO; j++) rho[j] = eig[j % (nk * EIG)];
    MPI_Allreduce(rho, sum, RHO, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Comm_free(&half);
  free(eig);
  MPI_Finalize();
  return 0;
}
