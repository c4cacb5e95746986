/* call_cost.c -- time N calls of a cheap MPI operation, for the tracer's
 * per-call cost (bench/tracer_overhead.py runs it with and without the
 * tracer preloaded).  MPI_Send to MPI_PROC_NULL returns at once in every MPI
 * library yet goes through the tracer's full path (event record, counter
 * reads).  Prints "ns_per_call <value>" on rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long n = argc > 1 ? atol(argv[1]) : 200000;
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double buf = 0;
  for (long i = 0; i < 1000; i++) /* warm up */
    MPI_Send(&buf, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
  double t = MPI_Wtime();
  for (long i = 0; i < n; i++)
    MPI_Send(&buf, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
  t = MPI_Wtime() - t;
  if (rank == 0) printf("ns_per_call %.1f\n", 1e9 * t / (double)n);
  MPI_Finalize();
  return 0;
}
