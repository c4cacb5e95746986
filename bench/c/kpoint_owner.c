/* A loop over items owned round-robin, a twin for bench/validate_smpi.py: each SCF
 * iteration, item k (a k-point, a band, a matrix panel) is computed by its owner, rank
 * k mod P, right before the owner broadcasts it; then a density of --rho doubles is
 * summed with an Allreduce.  One rank computes while the others wait in its Bcast, a
 * different rank each item: the loop does not strong-scale at all, whatever P is (each
 * item costs its work and a broadcast), and a model that spread each rank's mean over
 * its turns would predict it to scale perfectly.
 *
 * --n items, --work flops per item (charged to its owner), --eig doubles per item,
 * --iters SCF iterations.
 *
 *   kpoint_owner --n 2048 --work 200000 --eig 64 --iters 4
 */
#include "../smpi/common.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long nk = opt(argc, argv, "--n", 2048), work = opt(argc, argv, "--work", 200000);
  long ne = opt(argc, argv, "--eig", 64), iters = opt(argc, argv, "--iters", 4);
  long nr = opt(argc, argv, "--rho", 4096);
  int P, r;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  if (nk < 3 || ne < 1 || work < 1) refuse(MPI_COMM_WORLD, "kpoint_owner: need 3 items or more");
  double *eig = xmalloc(sizeof(double) * ne), *rho = xmalloc(sizeof(double) * nr),
         *sum = xmalloc(sizeof(double) * nr);
  double check = 0;
  for (long it = 0; it < iters; it++) {
    for (long i = 0; i < nr; i++) rho[i] = 0;
    for (long k = 0; k < nk; k++) {
      int owner = (int)(k % P);
      if (owner == r) { /* the owner computes item k */
        CHARGE((double)work);
        for (long j = 0; j < ne; j++) eig[j] = scrambled((unsigned long long)(it * nk + k) * ne + j);
      }
      MPI_Bcast(eig, (int)ne, MPI_DOUBLE, owner, MPI_COMM_WORLD);
      rho[k % nr] += eig[0];
    }
    CHARGE(2.0 * nr);
    MPI_Allreduce(rho, sum, (int)nr, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    check += sum[0];
  }
  if (r == 0) printf("kpoint_owner P=%d: %s\n", P, check == check ? "OK" : "FAILED");
  free(eig); free(rho); free(sum);
  MPI_Finalize();
  return 0;
}
