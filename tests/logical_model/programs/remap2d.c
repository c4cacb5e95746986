/* An FFT solver's redistribution, the shape of LAMMPS's PPPM remaps: an N x N grid
 * is held in bricks of a declared 2-D process grid (MPI_Cart_create on
 * MPI_Dims_create's dims; brick i of a dimension holds i*N/d .. (i+1)*N/d - 1) and
 * redistributed to x-pencils (rank r holds every x and rows r*N/P .. (r+1)*N/P - 1)
 * and back, on a duplicate of MPI_COMM_WORLD as a remap plan makes it: receives posted
 * from every rank whose piece overlaps the rank's new one (other ranks in order from
 * the rank's successor), one blocking send per overlapping rank, one MPI_Waitany per
 * receive; the rank's own overlap is copied without MPI. The number of peers differs
 * from rank to rank and with P. Each step also exchanges brick halos with the four
 * grid neighbours (Irecv, Send, Wait on MPI_COMM_WORLD) and ends with an Allreduce.
 * With N a multiple of 4 the bricks' x cuts at P = 4, 8, 16 are all even and the traces
 * cannot tell N x 8 bytes from (N/2) x 16 ...; the tests run N = 50.
 *   remap2d N STEPS */
#include <mpi.h>
#include <stdlib.h>

static int lo(int i, int n, int d) { return (int)((long)i * n / d); }

static long overlap(int a0, int a1, int b0, int b1) {
  int l = a0 > b0 ? a0 : b0, h = a1 < b1 ? a1 : b1;
  return h > l ? h - l : 0;
}

/* the cells of rank q's piece (x0, x1, y0, y1) in one layout */
static void brick(int q, int n, const int *dims, int *box) {
  int cx = q / dims[1], cy = q % dims[1];
  box[0] = lo(cx, n, dims[0]), box[1] = lo(cx + 1, n, dims[0]);
  box[2] = lo(cy, n, dims[1]), box[3] = lo(cy + 1, n, dims[1]);
}

static void pencil(int q, int n, int P, int *box) {
  box[0] = 0, box[1] = n, box[2] = lo(q, n, P), box[3] = lo(q + 1, n, P);
}

static long cells(const int *a, const int *b) {
  return overlap(a[0], a[1], b[0], b[1]) * overlap(a[2], a[3], b[2], b[3]);
}

static double *sendbuf, *recvbuf;
static MPI_Request *reqs;

/* from layout `from` to layout `to` (0 bricks, 1 pencils) */
static void remap(int me, int P, int n, const int *dims, int from, int to, MPI_Comm plan) {
  int mine_from[4], mine_to[4], other[4], nr = 0;
  long off = 0;
  if (from == 0) brick(me, n, dims, mine_from); else pencil(me, n, P, mine_from);
  if (to == 0) brick(me, n, dims, mine_to); else pencil(me, n, P, mine_to);
  for (int k = 1; k < P; k++) { /* receives: pieces of `from` that overlap my new piece */
    int q = (me + k) % P;
    if (from == 0) brick(q, n, dims, other); else pencil(q, n, P, other);
    long c = cells(other, mine_to);
    if (c) MPI_Irecv(recvbuf + off, (int)c, MPI_DOUBLE, q, 0, plan, &reqs[nr++]), off += c;
  }
  for (int k = 1; k < P; k++) { /* sends: my old piece's overlap with their new ones */
    int q = (me + k) % P;
    if (to == 0) brick(q, n, dims, other); else pencil(q, n, P, other);
    long c = cells(mine_from, other);
    if (c) MPI_Send(sendbuf, (int)c, MPI_DOUBLE, q, 0, plan);
  }
  for (int k = 0; k < nr; k++) {
    int idx;
    MPI_Waitany(nr, reqs, &idx, MPI_STATUS_IGNORE);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, P;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int n = argc > 1 ? atoi(argv[1]) : 60, steps = argc > 2 ? atoi(argv[2]) : 6;
  int dims[2] = {0, 0}, periods[2] = {1, 1};
  MPI_Dims_create(P, 2, dims);
  MPI_Comm cart, plan;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  MPI_Comm_dup(MPI_COMM_WORLD, &plan);
  sendbuf = calloc((size_t)n * n, sizeof(double));
  recvbuf = calloc((size_t)n * n, sizeof(double));
  reqs = malloc(sizeof(MPI_Request) * (size_t)P);
  int box[4];
  brick(me, n, dims, box);
  int hx = box[3] - box[2], hy = box[1] - box[0]; /* halo rows across x, columns across y */
  double v = me, s;
  for (int step = 0; step < steps; step++) {
    for (int d = 0; d < 2; d++) {
      for (int dir = -1; dir <= 1; dir += 2) {
        int src, dst;
        MPI_Cart_shift(cart, d, dir, &src, &dst);
        if (dst == me) continue;
        MPI_Request rq;
        int len = d == 0 ? hx : hy;
        MPI_Irecv(recvbuf, len, MPI_DOUBLE, src, 1, MPI_COMM_WORLD, &rq);
        MPI_Send(sendbuf, len, MPI_DOUBLE, dst, 1, MPI_COMM_WORLD);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
      }
    }
    remap(me, P, n, dims, 0, 1, plan);
    for (long k = 0; k < 20000; k++) v += 1e-9 * (double)k;
    remap(me, P, n, dims, 1, 0, plan);
    MPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Comm_free(&plan);
  MPI_Comm_free(&cart);
  free(sendbuf), free(recvbuf), free(reqs);
  MPI_Finalize();
  return 0;
}
