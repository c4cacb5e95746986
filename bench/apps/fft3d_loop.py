"""A 3-D FFT time loop on python3-mpi4py-fft (Debian), for bench/validate_apps.py.

Forward and backward transforms of an N^3 complex field on 2-D pencils (the
library's default decomposition), ``--steps`` times, checking the round trip.
Run with Debian's interpreter, which has Debian's mpi4py on Open MPI:

    mpirun.openmpi -n 4 /usr/bin/python3 bench/apps/fft3d_loop.py --n 64 --steps 4000
"""

import argparse

import numpy as np
from mpi4py import MPI
from mpi4py_fft import PFFT, newDistArray


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64, help="grid points per dimension")
    ap.add_argument("--steps", type=int, default=40, help="forward+backward transforms")
    opts = ap.parse_args()
    comm = MPI.COMM_WORLD
    fft = PFFT(comm, (opts.n,) * 3, axes=(0, 1, 2), dtype=np.complex128)
    u = newDistArray(fft, False)
    rng = np.random.default_rng(comm.rank)
    u[:] = rng.random(u.shape) + 1j * rng.random(u.shape)
    ref = u.copy()
    comm.Barrier()
    t0 = MPI.Wtime()
    for _ in range(opts.steps):
        u_hat = fft.forward(u)
        u = fft.backward(u_hat)
    loop = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
    err = comm.allreduce(float(np.max(np.abs(u - ref))), op=MPI.MAX)
    if comm.rank == 0:
        print(f"fft3d n={opts.n} steps={opts.steps} P={comm.size} "
              f"pencils={fft.subcomm[0].size if hasattr(fft.subcomm[0], 'size') else '?'} "
              f"max round-trip error {err:.2e}\nLoop time of {loop:.6f} s")
    if err > 1e-8:
        raise SystemExit(f"round trip error {err}")


if __name__ == "__main__":
    main()
