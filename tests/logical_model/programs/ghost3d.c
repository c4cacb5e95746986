/* A molecular-dynamics code's ghost exchange, the shape of LAMMPS's Comm::borders(): a
 * unit box of uniformly spread atoms is cut into the bricks of a declared periodic 3-D
 * grid (MPI_Cart_create on MPI_Dims_create's dims), and every step each rank acquires
 * the ghost atoms within a cutoff RC of its brick, one dimension after the other. Along
 * a dimension whose bricks are narrower than RC it takes several swaps (the next brick
 * over, then the one after); each swap, in each direction, is a Sendrecv of the atom
 * count, then the atoms, 24 bytes each (Irecv, Send, Wait). A dimension one brick wide
 * sends nothing (the rank's own atoms are its ghosts there). A swap's slab spans the
 * ghosts already taken along the earlier dimensions, so the atoms per message follow
 * the grid's shape and the cutoff, not a power of one dimension; and atoms move, so the
 * count is the slab's expected atoms plus a Gaussian draw of its square root (seeded
 * by rank, step and swap). The message counts follow the grid exactly; the sizes are
 * the data's. Each step ends with an Allreduce. With "sendrecv", the atoms go by a
 * Sendrecv too: the count's and the atoms' calls then differ only in tag and size.
 *   ghost3d ATOMS RC STEPS [sendrecv] */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long state;

static double uniform(void) { /* 53 bits of an xorshift64* stream */
  state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
  return ((state * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}

static double gauss(void) { /* Box-Muller */
  double u = uniform(), v = uniform();
  return sqrt(-2.0 * log(u > 0 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  double atoms = argc > 1 ? atof(argv[1]) : 200000, rc = argc > 2 ? atof(argv[2]) : 0.3;
  int steps = argc > 3 ? atoi(argv[3]) : 20, P, me, dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1};
  int sendrecv = argc > 4 && !strcmp(argv[4], "sendrecv");
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Dims_create(P, 3, dims);
  MPI_Comm grid;
  MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &grid);
  MPI_Comm_rank(grid, &me);
  double width[3];
  int most = 0;
  for (int d = 0; d < 3; d++) width[d] = 1.0 / dims[d];
  /* the largest slab: a brick's face grown by the cutoff on both sides, RC thick */
  most = (int)(atoms * (1 + 2 * rc) * (1 + 2 * rc) * rc * 2 + 1000);
  double *out = calloc((size_t)most * 3, sizeof(double)), *in = calloc((size_t)most * 3, sizeof(double));
  double local = atoms / P, sum = 0;
  for (int step = 0; step < steps; step++) {
    volatile double x = 0; /* the force computation: work in proportion to the rank's atoms */
    for (long i = 0; i < (long)(local * 20); i++) x += 1e-9 * i;
    double ghost[3] = {0, 0, 0}; /* ghost thickness taken so far along each dimension */
    for (int d = 0; d < 3; d++) {
      int swaps = (int)ceil(rc / width[d] - 1e-12);
      double face = 1;
      for (int j = 0; j < 3; j++)
        if (j != d) face *= width[j] + 2 * ghost[j];
      for (int s = 0; s < swaps; s++) {
        double thick = fmin(width[d], rc - s * width[d]);
        for (int dir = -1; dir <= 1; dir += 2) {
          int src, dst;
          MPI_Cart_shift(grid, d, dir * (s + 1), &src, &dst);
          if (dst == me) continue; /* a dimension one brick wide: its own atoms are the ghosts */
          state = 0x9E3779B97F4A7C15ULL ^ ((unsigned long long)me << 40) ^ ((unsigned long long)step << 20)
                  ^ (unsigned long long)(d * 64 + s * 2 + (dir > 0));
          double mean = atoms * thick * face;
          int n = (int)fmax(0, fmin(most, floor(mean + sqrt(mean) * gauss() + 0.5))), got = 0;
          MPI_Sendrecv(&n, 1, MPI_INT, dst, 1, &got, 1, MPI_INT, src, 1, grid, MPI_STATUS_IGNORE);
          if (sendrecv) {
            MPI_Sendrecv(out, 3 * n, MPI_DOUBLE, dst, 2, in, 3 * got, MPI_DOUBLE, src, 2, grid, MPI_STATUS_IGNORE);
          } else {
            MPI_Request req;
            MPI_Irecv(in, 3 * got, MPI_DOUBLE, src, 2, grid, &req);
            MPI_Send(out, 3 * n, MPI_DOUBLE, dst, 2, grid);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
          }
        }
      }
      ghost[d] = rc;
    }
    double e = x * 1e-12, all = 0;
    MPI_Allreduce(&e, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    sum += all;
  }
  free(out), free(in);
  MPI_Comm_free(&grid);
  MPI_Finalize();
  return sum < 0;
}
