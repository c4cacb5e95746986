/* GROMACS's domain decomposition with separate PME ranks, as a small program: every 4th
 * rank (r mod 4 = 3) is a PME rank, the others particle ranks; MPI_Comm_split gives each
 * class its own communicator. The particle ranks form a 2-D domain grid nx x ny over their
 * communicator's ranks (row-major: rank = x * ny + y, periodic both ways) whose dims the
 * program chooses itself, like GROMACS's load-based choice, by a table no dims rule gives:
 * nx = 3 while 3 divides the particle ranks' number n and n <= 12, else 4; ny = n / nx
 * (3 -> 3x1, 6 -> 3x2, 12 -> 3x4, 24 -> 4x6, 48 -> 4x12).
 *
 * Per step, a particle rank sends its coordinates (N / n doubles) to the PME rank of its
 * block of 4 (Isend, tag 7), exchanges a halo of H doubles with its x neighbours (Sendrecv
 * to x - 1 from x + 1, then back, tags 1 and 2) and, where ny > 1, with its y neighbours
 * (tags 3 and 4), sums its energies over the particle communicator (Allreduce of 4
 * doubles), completes the Isend and receives its forces back (Recv, tag 9). A PME rank
 * receives the coordinates of its three particle ranks (Irecv, Waitall), transposes its
 * mesh with MPI_Alltoall on the PME communicator, sums its energies there (Allreduce of 2
 * doubles, only where there is more than one PME rank) and sends the forces back (Send).
 *
 * Built with -DDDGRID_LOAD it also makes GROMACS's load-balancing communicators over the
 * particle ranks' grid: one along x through the origin (the particle ranks with y = 0,
 * MPI_Comm_split of the particle communicator) and one along y for each x (GROMACS makes a
 * dimension's only where it is over 1 wide; here the rows are made at ny = 1 too, one rank
 * each, so that the calls line up at every P for the exact model). Every 5th step each
 * particle rank then gathers its load along y (MPI_Gather to the row's rank 0), the origin
 * line gathers the rows' sums along x and broadcasts the new cell boundaries back along it.
 *
 *   ddgrid STEPS           (P a multiple of 4)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 60480, H = 96, MESH = 4096 };

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int P, r, s, S, steps = argc > 1 ? atoi(argv[1]) : 10;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  if (P % 4) {
    if (r == 0) fprintf(stderr, "ddgrid: P must be a multiple of 4\n");
    MPI_Finalize();
    return 2;
  }
  int pme = r % 4 == 3, npp = P - P / 4;
  MPI_Comm mine;
  MPI_Comm_split(MPI_COMM_WORLD, pme, r, &mine);
  MPI_Comm_rank(mine, &s);
  MPI_Comm_size(mine, &S);
  int nx = (npp % 3 == 0 && npp <= 12) ? 3 : 4, ny = npp / nx;
  int local = N / npp;
#ifdef DDGRID_LOAD
  MPI_Comm xline = MPI_COMM_NULL, yrow = MPI_COMM_NULL;
  int cx0 = pme ? 0 : s / ny, cy0 = pme ? 0 : s % ny;
  MPI_Comm_split(mine, !pme && cy0 == 0 ? 0 : MPI_UNDEFINED, cx0, &xline);
  MPI_Comm_split(mine, pme ? MPI_UNDEFINED : cx0, cy0, &yrow);
#endif
  double *x = calloc((size_t)local * 3, sizeof(double)), *f = calloc((size_t)local * 3, sizeof(double));
  double *halo = calloc(4 * H, sizeof(double)), *a = calloc(MESH, sizeof(double)), *b = calloc(MESH, sizeof(double));
  double e[4] = {1, 2, 3, 4}, g[4];
  for (int step = 0; step < steps; step++) {
    if (!pme) {
      MPI_Request req;
      int leader = r - r % 4 + 3, cx = s / ny, cy = s % ny;
      MPI_Isend(x, local, MPI_DOUBLE, leader, 7, MPI_COMM_WORLD, &req);
      int xm = ((cx + nx - 1) % nx) * ny + cy, xp = ((cx + 1) % nx) * ny + cy;
      MPI_Sendrecv(halo, H, MPI_DOUBLE, xm, 1, halo + H, H, MPI_DOUBLE, xp, 1, mine, MPI_STATUS_IGNORE);
      if (ny > 1) {
        int ym = cx * ny + (cy + ny - 1) % ny, yp = cx * ny + (cy + 1) % ny;
        MPI_Sendrecv(halo, H / 2, MPI_DOUBLE, ym, 3, halo + 2 * H, H / 2, MPI_DOUBLE, yp, 3, mine,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(halo + 2 * H, H / 2, MPI_DOUBLE, yp, 4, halo, H / 2, MPI_DOUBLE, ym, 4, mine,
                     MPI_STATUS_IGNORE);
      }
      MPI_Sendrecv(halo + H, H, MPI_DOUBLE, xp, 2, halo, H, MPI_DOUBLE, xm, 2, mine, MPI_STATUS_IGNORE);
      MPI_Allreduce(e, g, 4, MPI_DOUBLE, MPI_SUM, mine);
#ifdef DDGRID_LOAD
      if (step % 5 == 4) { /* dynamic load balancing: loads in along y, then along x, cells out */
        double load = 1.0 + s, rows[64], cells[8];
        MPI_Gather(&load, 1, MPI_DOUBLE, rows, 1, MPI_DOUBLE, 0, yrow);
        if (xline != MPI_COMM_NULL) {
          MPI_Gather(&load, 1, MPI_DOUBLE, rows, 1, MPI_DOUBLE, 0, xline);
          MPI_Bcast(cells, 8, MPI_DOUBLE, 0, xline);
        }
      }
#endif
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      MPI_Recv(f, local, MPI_DOUBLE, leader, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Request req[3];
      double *in = calloc((size_t)local * 3, sizeof(double));
      for (int k = 0; k < 3; k++)
        MPI_Irecv(in + (size_t)local * k, local, MPI_DOUBLE, r - 3 + k, 7, MPI_COMM_WORLD, &req[k]);
      MPI_Waitall(3, req, MPI_STATUSES_IGNORE);
      MPI_Alltoall(a, MESH / S, MPI_DOUBLE, b, MESH / S, MPI_DOUBLE, mine);
      if (S > 1) /* one PME rank has nothing to sum (GROMACS makes no call then) */
        MPI_Allreduce(e, g, 2, MPI_DOUBLE, MPI_SUM, mine);
      for (int k = 0; k < 3; k++)
        MPI_Send(in + (size_t)local * k, local, MPI_DOUBLE, r - 3 + k, 9, MPI_COMM_WORLD);
      free(in);
    }
  }
  if (r == 0) printf("ddgrid P=%d: %d particle ranks on a %dx%d grid, %d PME ranks\n", P, npp, nx, ny, P / 4);
#ifdef DDGRID_LOAD
  if (xline != MPI_COMM_NULL) MPI_Comm_free(&xline);
  if (yrow != MPI_COMM_NULL) MPI_Comm_free(&yrow);
#endif
  MPI_Comm_free(&mine);
  free(x); free(f); free(halo); free(a); free(b);
  MPI_Finalize();
  return 0;
}
