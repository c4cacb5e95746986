/* A LAMMPS-like 3-D domain decomposition, a twin for bench/validate_smpi.py.
 *
 * A periodic box of cx x cy x cz cells (edge ratio --bx:--by:--bz, --n cells per unit
 * edge) on a process grid that minimises the sub-domains' summed face area for that
 * box, LAMMPS's rule: factorisations px * py * pz = P enumerated with px rising, then
 * py, the first strict minimum kept. Declared with MPI_Cart_create (periodic, no
 * reorder). Every step: a halo exchange with the 6 face neighbours (MPI_Sendrecv to +d
 * from -d and back along x, y, z; --w doubles per face cell), the force loop (charged
 * 40 flops per cell); every --thermo steps an Allreduce of 24 B. Prints its grid.
 *
 *   lammps_like --n 64 --bx 2 --by 1 --bz 1 --steps 50 --thermo 10
 */
#include "../smpi/common.h"

static void surface_grid(int P, const double box[3], int dims[3]) {
  double area[3] = {box[0] * box[1], box[0] * box[2], box[1] * box[2]}, best = 1e300;
  for (int px = 1; px <= P; px++) {
    if (P % px) continue;
    for (int py = 1; py <= P / px; py++) {
      if ((P / px) % py) continue;
      int pz = P / px / py;
      double s = area[0] / px / py + area[1] / px / pz + area[2] / py / pz;
      if (s < best * (1 - 1e-12)) { best = s; dims[0] = px; dims[1] = py; dims[2] = pz; }
    }
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long m = opt(argc, argv, "--n", 64), steps = opt(argc, argv, "--steps", 50);
  long thermo = opt(argc, argv, "--thermo", 10), w = opt(argc, argv, "--w", 3);
  double box[3] = {opt(argc, argv, "--bx", 2), opt(argc, argv, "--by", 1), opt(argc, argv, "--bz", 1)};
  int P, r, dims[3], periods[3] = {1, 1, 1}, c[3];
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  surface_grid(P, box, dims);
  long cells[3] = {m * (long)box[0], m * (long)box[1], m * (long)box[2]};
  for (int d = 0; d < 3; d++)
    if (cells[d] % dims[d]) refuse(MPI_COMM_WORLD, "lammps_like: the cells must divide by the grid");
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
  MPI_Comm_rank(cart, &r);
  MPI_Cart_coords(cart, r, 3, c);
  long n[3] = {cells[0] / dims[0], cells[1] / dims[1], cells[2] / dims[2]};
  long face[3] = {n[1] * n[2] * w, n[0] * n[2] * w, n[0] * n[1] * w}, fmax = 0;
  for (int d = 0; d < 3; d++) fmax = face[d] > fmax ? face[d] : fmax;
  double *out = xmalloc(sizeof(double) * fmax), *in = xmalloc(sizeof(double) * fmax);
  for (long i = 0; i < fmax; i++) out[i] = scrambled(r * fmax + i);
  double energy = 0;
  for (long s = 0; s < steps; s++) {
    for (int d = 0; d < 3; d++) {
      int lo, hi;
      MPI_Cart_shift(cart, d, 1, &lo, &hi);
      MPI_Sendrecv(out, face[d], MPI_DOUBLE, hi, 2 * d, in, face[d], MPI_DOUBLE, lo, 2 * d, cart,
                   MPI_STATUS_IGNORE);
      MPI_Sendrecv(out, face[d], MPI_DOUBLE, lo, 2 * d + 1, in, face[d], MPI_DOUBLE, hi, 2 * d + 1, cart,
                   MPI_STATUS_IGNORE);
      energy += in[0];
    }
    CHARGE(40.0 * n[0] * n[1] * n[2]);
    if ((s + 1) % thermo == 0) {
      double loc[3] = {energy, 1, 2}, glob[3];
      MPI_Allreduce(loc, glob, 3, MPI_DOUBLE, MPI_SUM, cart);
    }
  }
  if (r == 0) printf("lammps_like P=%d grid %dx%dx%d: %s\n", P, dims[0], dims[1], dims[2],
                     energy == energy ? "OK" : "FAILED");
  MPI_Finalize();
  return 0;
}
