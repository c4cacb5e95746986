/* Alltoallw with a datatype per peer, plus calls sigex counts but does not model.
 *
 * Rank r sends (r + i + 1) MPI_INT to even peers i and (i + 1) MPI_DOUBLE to odd
 * peers i; receives mirror that (peer i sends r + i + 1 ints if r is even, ...).
 * Then MPI-IO: File_open of argv[1], 2 x File_write_at_all, File_close; and the
 * local MPI_Alloc_mem, MPI_Free_mem, MPI_Reduce_local.  The test checks the
 * Alltoallw bytes per peer and that the I/O calls are named as not modelled. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int count_to(int from, int to) { return to % 2 == 0 ? from + to + 1 : to + 1; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, P;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int *sc = malloc(sizeof(int) * P), *rc = malloc(sizeof(int) * P);
  int *sd = malloc(sizeof(int) * P), *rd = malloc(sizeof(int) * P);
  MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * P), *rt = malloc(sizeof(MPI_Datatype) * P);
  int soff = 0, roff = 0;
  for (int i = 0; i < P; i++) {
    sc[i] = count_to(r, i);          /* what r sends to i */
    st[i] = i % 2 == 0 ? MPI_INT : MPI_DOUBLE;
    rc[i] = count_to(i, r);          /* what i sends to r */
    rt[i] = r % 2 == 0 ? MPI_INT : MPI_DOUBLE;
    sd[i] = soff; soff += sc[i] * 8;
    rd[i] = roff; roff += rc[i] * 8;
  }
  char *sbuf = calloc(soff + 8, 1), *rbuf = calloc(roff + 8, 1);
  MPI_Alltoallw(sbuf, sc, sd, st, rbuf, rc, rd, rt, MPI_COMM_WORLD);

  MPI_File fh;
  MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
  double x = r;
  for (int k = 0; k < 2; k++)
    MPI_File_write_at_all(fh, (MPI_Offset)(8 * (k * P + r)), &x, 1, MPI_DOUBLE, MPI_STATUS_IGNORE);
  MPI_File_close(&fh);
  double *mem;
  MPI_Alloc_mem(64, MPI_INFO_NULL, &mem);
  MPI_Free_mem(mem);
  double a = 1, b = 2;
  MPI_Reduce_local(&a, &b, 1, MPI_DOUBLE, MPI_SUM);
  MPI_Barrier(MPI_COMM_WORLD);
  if (r == 0) printf("alltoallw_io P=%d ok\n", P);
  MPI_Finalize();
  return 0;
}
