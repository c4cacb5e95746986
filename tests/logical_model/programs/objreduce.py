"""Reductions of Python objects with mpi4py, in a time loop, for tests/logical_model.

Each step exchanges a halo with both neighbours on a ring (numpy buffers, Sendrecv),
then reduces Python objects the way countless mpi4py scripts do: ``comm.allreduce`` of a
float (the residual), ``comm.reduce`` of a pair of floats to rank 0. mpi4py makes those
reductions with point-to-point calls on a duplicate of the communicator: a reduction to
rank 0 in which each rank sends at every set bit of its rank, each message as its size
and then its pickled payload, then (allreduce) a broadcast of the size and the payload.

    mpiexec -n 8 python objreduce.py 20
"""

import sys

import numpy as np
from mpi4py import MPI


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    left, right = (rank - 1) % size, (rank + 1) % size
    u = np.full(2000, float(rank))
    halo = np.empty(1000)
    res = 1.0
    for step in range(steps):
        comm.Sendrecv(u[-1000:], dest=right, sendtag=1, recvbuf=halo, source=left, recvtag=1)
        u[:1000] = 0.5 * (u[:1000] + halo)
        res = comm.allreduce(float(np.abs(u).sum()) / (step + 1), op=MPI.SUM)
        best = comm.reduce((float(u.max()), float(rank)), op=MPI.MAX, root=0)
        if rank == 0 and best[0] < 0:
            raise SystemExit("impossible")
    if rank == 0:
        print(f"objreduce P={size} steps={steps} residual {res:.6g}")


if __name__ == "__main__":
    main()
