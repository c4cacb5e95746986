/* A hierarchical reduction, as node-aware codes and libraries write it: each group of
 * ranks reduces to its first rank, the groups' first ranks (the leaders, on their own
 * communicator: Comm_split with MPI_UNDEFINED for the others) sum over the groups, and
 * each leader broadcasts the sum to its group.  The groups are G consecutive ranks (a
 * node of G cores: "node G") or a fixed number G of groups of P/G ranks ("groups G").
 * With "converge", each group also iterates on its own communicator until its own
 * criterion holds, as k-point groups do: group i makes 1 to 3 Allreduces per step, a
 * number no rule of i gives (a hash of i: the data's).
 *   hier ITERS node|groups G [converge] */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

enum { N = 64 };

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int iters = argc > 1 ? atoi(argv[1]) : 6, n = argc > 3 ? atoi(argv[3]) : 2;
  int g = argc > 2 && strcmp(argv[2], "groups") == 0 ? P / n : n; /* ranks per group */
  int converge = argc > 4 && strcmp(argv[4], "converge") == 0;
  MPI_Comm group, leaders;
  MPI_Comm_split(MPI_COMM_WORLD, r / g, r, &group);
  MPI_Comm_split(MPI_COMM_WORLD, r % g == 0 ? 0 : MPI_UNDEFINED, r, &leaders);
  double v[N] = {0}, s[N];
  for (int it = 0; it < iters; it++) {
    for (int k = 0; k < 20000; k++) v[k % N] += 1e-9 * k;
    unsigned own = 1 + (((unsigned)(r / g) * 2654435761u) >> 13) % 3;
    for (unsigned k = 0; converge && k < own; k++) /* this group's own iterations */
      MPI_Allreduce(v, s, 4, MPI_DOUBLE, MPI_MAX, group);
    MPI_Reduce(v, s, N, MPI_DOUBLE, MPI_SUM, 0, group);
    if (leaders != MPI_COMM_NULL) MPI_Allreduce(s, v, N, MPI_DOUBLE, MPI_SUM, leaders);
    MPI_Bcast(v, N, MPI_DOUBLE, 0, group);
  }
  MPI_Comm_free(&group);
  if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
  MPI_Finalize();
  return 0;
}
