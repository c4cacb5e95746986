"""Ring halo exchange: the mpi4py twin of ``examples/c/ring_halo.c``.

Both make exactly the same MPI calls with the same sizes and tags, so that a
test can trace both and compare. Runs at any P.

MPI calls, per rank, every iteration i = 0 .. iters-1: ``Irecv`` from
left = (rank-1) % P (tag 0), ``Irecv`` from right = (rank+1) % P (tag 1),
``Isend`` to right (tag 0), ``Isend`` to left (tag 1), n x 8 B each;
``Waitall`` of the four; a short compute; and at i % 5 == 4 one
``Allreduce`` of 8 B (MPI.SUM). End: ``Barrier``, then ``Finalize``.
(At P = 1 both neighbours are the rank itself.)

Defaults: --n 1000, --iters 20. C usage: ``ring_halo <n> <iters>``.
Check: every rank received its neighbours' values in every iteration.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import parse, report  # noqa: E402

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402


def main() -> None:
    args = parse(__doc__.splitlines()[0], n=1000, iters=20)
    comm = MPI.COMM_WORLD
    rank, P = comm.rank, comm.size
    left, right = (rank - 1) % P, (rank + 1) % P
    out = np.empty(args.n)
    from_left, from_right = np.empty(args.n), np.empty(args.n)
    acc = np.zeros(1)
    ok = True
    t0 = time.perf_counter()
    for i in range(args.iters):
        out[:] = rank * 1000 + i
        reqs = [comm.Irecv(from_left, source=left, tag=0), comm.Irecv(from_right, source=right, tag=1),
                comm.Isend(out, dest=right, tag=0), comm.Isend(out, dest=left, tag=1)]
        MPI.Request.Waitall(reqs)
        ok &= bool(from_left[0] == left * 1000 + i and from_right[-1] == right * 1000 + i)
        acc[0] = np.sum(1.0 / (1.0 + np.abs(from_left - from_right)))  # as in the C twin
        if i % 5 == 4:
            comm.Allreduce(MPI.IN_PLACE, acc, op=MPI.SUM)
    comm.Barrier()
    report(comm, "ring_halo", args, time.perf_counter() - t0, ok)


if __name__ == "__main__":
    main()
