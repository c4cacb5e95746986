/* Random updates of a table spread over the ranks, the way HPC Challenge's RandomAccess
 * exchanges them: the messages follow the data, not a rule of the rank.
 *
 * Each rank makes U / P updates per step from a generator seeded by its rank and the
 * step. An update belongs to a rank chosen by the generator: its own are applied at once,
 * the others go into a bucket per destination, and a full bucket (B updates) is sent with
 * MPI_Isend (tag 1; a bucket's previous send is completed with MPI_Wait first). Every rank
 * keeps one MPI_Irecv from MPI_ANY_SOURCE with MPI_ANY_TAG posted and polls it with
 * MPI_Test after each update, posting it again when a message has come. At the end of a
 * step a rank sends its partial buckets, then a "done" message (tag 2) to every other
 * rank, and takes messages until it has P - 1 of those (a rank's updates reach each other
 * rank before its "done", MPI keeping one sender's messages in order); its last receive,
 * posted for nothing, is cancelled. A Barrier separates the steps. Which ranks a rank
 * sends to, how many messages and in which order its calls come all follow the data.
 *
 *   randupdate STEPS U B
 */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next(uint64_t *x) { /* xorshift64* */
  *x ^= *x >> 12;
  *x ^= *x << 25;
  *x ^= *x >> 27;
  return *x * 2685821657736338717ULL;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int P, r;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  int steps = argc > 1 ? atoi(argv[1]) : 4;
  long U = argc > 2 ? atol(argv[2]) : 16384;
  int B = argc > 3 ? atoi(argv[3]) : 16;
  long local = 1 << 12, mine = U / P;
  uint64_t *table = calloc((size_t)local, sizeof *table);
  uint64_t *bucket = malloc(sizeof *bucket * (size_t)P * (size_t)B);
  uint64_t *sending = malloc(sizeof *sending * (size_t)P * (size_t)B);
  uint64_t inbox[4096];
  int *fill = calloc((size_t)P, sizeof *fill);
  MPI_Request *sreq = malloc(sizeof *sreq * (size_t)P);
  for (int q = 0; q < P; q++) sreq[q] = MPI_REQUEST_NULL;
  for (int s = 0; s < steps; s++) {
    uint64_t x = 88172645463325252ULL ^ ((uint64_t)(r + 1) * 0x9E3779B97F4A7C15ULL) ^ (uint64_t)s;
    MPI_Request rreq;
    MPI_Status st;
    int done = 0, flag;
    MPI_Irecv(inbox, 4096, MPI_UINT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rreq);
    for (long i = 0; i < mine + P; i++) {
      if (i < mine) {
        uint64_t v = next(&x);
        int q = (int)(v % (uint64_t)P);
        if (q == r) {
          table[(v >> 8) % (uint64_t)local] ^= v;
        } else {
          bucket[(size_t)q * (size_t)B + (size_t)fill[q]++] = v;
          if (fill[q] == B) {
            MPI_Wait(&sreq[q], MPI_STATUS_IGNORE);
            memcpy(sending + (size_t)q * (size_t)B, bucket + (size_t)q * (size_t)B, sizeof *bucket * (size_t)B);
            MPI_Isend(sending + (size_t)q * (size_t)B, B, MPI_UINT64_T, q, 1, MPI_COMM_WORLD, &sreq[q]);
            fill[q] = 0;
          }
        }
      }
      MPI_Test(&rreq, &flag, &st);
      if (flag) {
        int n;
        MPI_Get_count(&st, MPI_UINT64_T, &n);
        for (int k = 0; k < n; k++) table[(inbox[k] >> 8) % (uint64_t)local] ^= inbox[k];
        if (st.MPI_TAG == 2) done++; /* a rank that finished its updates first */
        MPI_Irecv(inbox, 4096, MPI_UINT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rreq);
      }
    }
    for (int q = 0; q < P; q++) { /* partial buckets, then "done" */
      if (q == r) continue;
      MPI_Wait(&sreq[q], MPI_STATUS_IGNORE);
      memcpy(sending + (size_t)q * (size_t)B, bucket + (size_t)q * (size_t)B, sizeof *bucket * (size_t)fill[q]);
      MPI_Isend(sending + (size_t)q * (size_t)B, fill[q], MPI_UINT64_T, q, 2, MPI_COMM_WORLD, &sreq[q]);
      fill[q] = 0;
    }
    while (done < P - 1) {
      MPI_Wait(&rreq, &st);
      int n;
      MPI_Get_count(&st, MPI_UINT64_T, &n);
      for (int k = 0; k < n; k++) table[(inbox[k] >> 8) % (uint64_t)local] ^= inbox[k];
      if (st.MPI_TAG == 2) done++;
      MPI_Irecv(inbox, 4096, MPI_UINT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rreq);
    }
    MPI_Cancel(&rreq);
    MPI_Wait(&rreq, MPI_STATUS_IGNORE);
    MPI_Waitall(P, sreq, MPI_STATUSES_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  uint64_t sum = 0, all;
  for (long i = 0; i < local; i++) sum ^= table[i];
  MPI_Allreduce(&sum, &all, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
  free(table);
  free(bucket);
  free(sending);
  free(fill);
  free(sreq);
  MPI_Finalize();
  return 0;
}
