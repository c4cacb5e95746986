/* call_cost.c -- time N calls of a cheap MPI operation, for the tracer's
 * per-call cost (bench/tracer_overhead.py runs it with and without the
 * tracer preloaded).
 *   call_cost N        MPI_Send to MPI_PROC_NULL: returns at once in every
 *                      MPI library yet goes through the tracer's full path
 *                      (event record, CPU-time boundaries);
 *   call_cost N test   MPI_Test of a receive that never matches: a polling
 *                      loop, which the tracer holds as one event (repeat N).
 * Prints "ns_per_call <value>" on rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long n = argc > 1 ? atol(argv[1]) : 200000;
  int poll = argc > 2 && strcmp(argv[2], "test") == 0;
  int rank, flag = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double buf = 0;
  MPI_Request req = MPI_REQUEST_NULL;
  if (poll) MPI_Irecv(&buf, 1, MPI_DOUBLE, MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &req);
  for (long i = 0; i < 1000; i++) /* warm up */
    if (poll) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    else MPI_Send(&buf, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
  double t = MPI_Wtime();
  for (long i = 0; i < n; i++)
    if (poll) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    else MPI_Send(&buf, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
  t = MPI_Wtime() - t;
  if (rank == 0) printf("ns_per_call %.1f\n", 1e9 * t / (double)n);
  if (poll) {
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
