/* poll_loop.c -- a ring of polling loops, as hpcc's RandomAccess polls: the
 * tracer's cost per poll where polls yield the CPU (oversubscribed MPI), and
 * the accuracy of the bursts that follow a loop (bench/tracer_overhead.py
 * runs it with and without the tracer, and in SIGEX_CPU_SAMPLE_CHECK mode).
 *   poll_loop ITERS WORK_US [test|testany|iprobe] [SLOW]
 * Each iteration: WORK_US of busy compute (SLOW times as much on rank 0, default
 * 1: the other ranks then wait in long loops, as a rank that waits for a late
 * peer does, and the tracer's cost per held poll dominates), a send to the next rank, then a
 * loop of MPI_Test (or Testany over two requests, or Iprobe) until the
 * previous rank's message arrives, then WORK_US / 4 of compute before the
 * next call.  Rank 0 prints "polls <n> loop_cpu_s <s> ns_per_poll <v>": all
 * ranks' polls, the thread CPU time spent in the poll loops (read before and
 * after each loop), and that time per poll: the poll's own CPU time, the
 * tracer's included, undisturbed by other processes sharing the CPU. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void spin(double us) {
  struct timespec a, b;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  volatile double x = 0;
  do {
    for (int i = 0; i < 200; i++) x += i * 1e-9;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  } while ((double)(b.tv_sec - a.tv_sec) * 1e6 + 1e-3 * (double)(b.tv_nsec - a.tv_nsec) < us);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long iters = argc > 1 ? atol(argv[1]) : 2000;
  double work = argc > 2 ? atof(argv[2]) : 50;
  const char *how = argc > 3 ? argv[3] : "test";
  double slow = argc > 4 ? atof(argv[4]) : 1;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  double sbuf = 1, rbuf = 0;
  long polls = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  double cpu = 0;
  for (long it = 0; it < iters; it++) {
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int flag = 0, idx;
    if (strcmp(how, "iprobe") != 0) MPI_Irecv(&rbuf, 1, MPI_DOUBLE, prev, 7, MPI_COMM_WORLD, &r[0]);
    spin(rank == 0 ? work * slow : work);
    MPI_Send(&sbuf, 1, MPI_DOUBLE, next, 7, MPI_COMM_WORLD);
    double c0 = cpu_now();
    while (!flag) {
      polls++;
      if (strcmp(how, "testany") == 0) MPI_Testany(2, r, &idx, &flag, MPI_STATUS_IGNORE);
      else if (strcmp(how, "iprobe") == 0) MPI_Iprobe(prev, 7, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
      else MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
    }
    cpu += cpu_now() - c0;
    if (strcmp(how, "iprobe") == 0) MPI_Recv(&rbuf, 1, MPI_DOUBLE, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    spin(work / 4);
    MPI_Send(&sbuf, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
  }
  double tot_cpu = 0;
  long tot_polls = 0;
  MPI_Reduce(&cpu, &tot_cpu, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&polls, &tot_polls, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("polls %ld loop_cpu_s %.6f ns_per_poll %.1f\n", tot_polls, tot_cpu,
           1e9 * tot_cpu / (double)tot_polls);
  MPI_Finalize();
  return 0;
}
