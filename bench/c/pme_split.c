/* A particle/PME rank split, GROMACS's shape, a twin for bench/validate_smpi.py and the
 * logical model's tests.
 *
 * Every 4th rank (r mod 4 = 3) is a PME rank, the others particle ranks; MPI_Comm_split
 * gives each class its own communicator. Per step: each particle rank sends its
 * coordinates (--n particles over the 3P/4 particle ranks, 24 B each) to the PME rank
 * of its block of 4 (Isend), exchanges a --halo particle halo with its neighbours on a
 * ring of the particle communicator (two Sendrecv), computes its short-range forces
 * (charged 50 flops a particle), completes the Isend and receives its long-range
 * forces back. Each PME rank receives the coordinates of its three particle ranks
 * (Irecv, Waitall), spreads them on a --grid^3 mesh (charged 20 flops a point of its
 * slab), transposes it twice with MPI_Alltoall on the PME communicator (the 3-D FFT;
 * charged 5 N log2 N), and sends the forces back. Every --energy steps an Allreduce of
 * the energies on MPI_COMM_WORLD. P must be a multiple of 4.
 *
 * --world 1: the same without the two communicators, for SimGrid's SMPI, whose
 * time-independent traces record no communicator: the particle ranks' halo goes to the
 * particle ranks 4 above and below (world ranks, a ring), the PME ranks' transposes
 * become two Sendrecv with the PME ranks 4 above and below. It creates no communicator:
 * SMPI's MPI_Comm_split communicates (a linear gather to rank 0 and one message back per
 * member, 0.84 ms at P = 1024 on bench/smpi/cluster.toml) and its trace shows none of it.
 *
 *   pme_split --n 30000 --grid 48 --halo 200 --steps 20 --energy 5 [--world 1]
 */
#include <math.h>
#include "../smpi/common.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long n = opt(argc, argv, "--n", 30000), g = opt(argc, argv, "--grid", 48);
  long halo = opt(argc, argv, "--halo", 200), steps = opt(argc, argv, "--steps", 20);
  long every = opt(argc, argv, "--energy", 5), world = opt(argc, argv, "--world", 0);
  int P, r;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  if (P % 4) refuse(MPI_COMM_WORLD, "pme_split: P must be a multiple of 4");
  int pme = r % 4 == 3, npme = P / 4, npp = P - npme, s, S;
  MPI_Comm mine = MPI_COMM_WORLD;
  if (!world) MPI_Comm_split(MPI_COMM_WORLD, pme, r, &mine);
  MPI_Comm_rank(mine, &s);
  MPI_Comm_size(mine, &S);
  long local = n / npp, mesh = g * g * g / npme, block = mesh / npme;
  double *x = xmalloc(sizeof(double) * 3 * (local + 2 * halo));
  double *f = xmalloc(sizeof(double) * 3 * local * 3);
  double *a = xmalloc(sizeof(double) * mesh), *b = xmalloc(sizeof(double) * mesh);
  for (long i = 0; i < 3 * (local + 2 * halo); i++) x[i] = scrambled((unsigned long long)r * 7919 + i);
  for (long i = 0; i < mesh; i++) a[i] = scrambled(i);
  double energy = 0;
  for (long step = 0; step < steps; step++) {
    if (!pme) {
      MPI_Request req;
      int leader = r - r % 4 + 3;
      MPI_Isend(x, (int)(3 * local), MPI_DOUBLE, leader, 7, MPI_COMM_WORLD, &req);
      int up = (s + 1) % S, down = (s + S - 1) % S;
      MPI_Comm ring = mine;
      if (world) up = (r + 4) % P, down = (r + P - 4) % P, ring = MPI_COMM_WORLD;
      MPI_Sendrecv(x, (int)(3 * halo), MPI_DOUBLE, up, 3, x + 3 * local, (int)(3 * halo), MPI_DOUBLE, down, 3,
                   ring, MPI_STATUS_IGNORE);
      MPI_Sendrecv(x, (int)(3 * halo), MPI_DOUBLE, down, 4, x + 3 * (local + halo), (int)(3 * halo), MPI_DOUBLE,
                   up, 4, ring, MPI_STATUS_IGNORE);
      CHARGE(50.0 * local);
      energy += x[0];
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      MPI_Recv(f, (int)(3 * local), MPI_DOUBLE, leader, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Request req[3];
      for (int k = 0; k < 3; k++)
        MPI_Irecv(f + 3 * local * k, (int)(3 * local), MPI_DOUBLE, r - 3 + k, 7, MPI_COMM_WORLD, &req[k]);
      MPI_Waitall(3, req, MPI_STATUSES_IGNORE);
      CHARGE(20.0 * mesh);
      if (world) {
        int up = (r + 4) % P, down = (r + P - 4) % P;
        MPI_Sendrecv(a, (int)block, MPI_DOUBLE, up, 13, b, (int)block, MPI_DOUBLE, down, 13, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        CHARGE(5.0 * mesh * log2((double)(g * g * g)));
        MPI_Sendrecv(b, (int)block, MPI_DOUBLE, down, 14, a, (int)block, MPI_DOUBLE, up, 14, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
      } else {
        MPI_Alltoall(a, (int)block, MPI_DOUBLE, b, (int)block, MPI_DOUBLE, mine);
        CHARGE(5.0 * mesh * log2((double)(g * g * g)));
        MPI_Alltoall(b, (int)block, MPI_DOUBLE, a, (int)block, MPI_DOUBLE, mine);
      }
      energy += a[0];
      for (int k = 0; k < 3; k++)
        MPI_Send(f + 3 * local * k, (int)(3 * local), MPI_DOUBLE, r - 3 + k, 9, MPI_COMM_WORLD);
    }
    if ((step + 1) % every == 0) {
      double loc[2] = {energy, 1}, glob[2];
      MPI_Allreduce(loc, glob, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
  }
  if (r == 0) printf("pme_split P=%d: %d particle ranks, %d PME ranks: %s\n", P, npp, npme,
                     energy == energy ? "OK" : "FAILED");
  if (!world) MPI_Comm_free(&mine);
  MPI_Finalize();
  return 0;
}
