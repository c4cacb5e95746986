"""Conjugate gradient on the distributed 2-D Poisson matrix (halo + dot-product Allreduces).

Solves A x = b for the 5-point Laplacian on an n x n grid (n^2 unknowns,
b = 1), rows of the grid block-distributed over the ranks (1-D slabs; uneven
splits allowed, every rank needs at least one grid row: P <= n). The
matrix-vector product is the matrix-free stencil in numpy. The iteration
count is fixed (no convergence test), so communication is deterministic.

MPI calls, per rank (north = rank - 1, south = rank + 1, where they exist):

* start: one ``Allreduce`` of 8 B (r.r of the initial residual);
* every iteration: ``Irecv`` from north, ``Irecv`` from south, ``Isend`` to
  north, ``Isend`` to south (one grid row: n x 8 B each; only existing
  neighbours), ``Waitall``; then ``Allreduce`` of 8 B (p.Ap); then
  ``Allreduce`` of 8 B (r.r);
* end (answer check): one more halo exchange as above and one ``Allreduce``
  of 24 B (||b - A x||^2, x.Ax, b.x), then ``Finalize``.

Defaults: --n 2048 (small workload: 512), --iters 50.
Check: the true residual ||b - A x|| agrees with the CG recurrence's to
1e-6 relative, and the energy x.Ax/2 - b.x (which CG lowers monotonically)
is below its starting value 0. The residual's 2-norm itself need not fall
in 50 iterations on this matrix.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import parse, refuse, report  # noqa: E402

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402


def main() -> None:
    args = parse(__doc__.splitlines()[0], n=2048, iters=50)
    comm = MPI.COMM_WORLD
    rank, P, n = comm.rank, comm.size, args.n
    if P > n:
        refuse(comm, f"cg needs at least one grid row per rank: P={P} > n={n}")
    base, extra = divmod(n, P)
    rows = base + (1 if rank < extra else 0)
    north = rank - 1 if rank > 0 else None
    south = rank + 1 if rank < P - 1 else None
    nbrs = [(peer, side) for peer, side in ((north, 0), (south, 1)) if peer is not None]

    # vectors carry one ghost row above and below
    def field() -> np.ndarray:
        return np.zeros((rows + 2, n))

    halo_in = {0: np.empty(n), 1: np.empty(n)}

    def exchange(v: np.ndarray) -> None:
        reqs = [comm.Irecv(halo_in[side], source=peer, tag=10 + side) for peer, side in nbrs]
        reqs += [comm.Isend(v[1] if side == 0 else v[-2], dest=peer, tag=11 - side)
                 for peer, side in nbrs]
        MPI.Request.Waitall(reqs)
        v[0] = halo_in[0] if north is not None else 0.0
        v[-1] = halo_in[1] if south is not None else 0.0

    def apply_a(v: np.ndarray, out: np.ndarray) -> None:
        exchange(v)
        c = v[1:-1]
        out[1:-1] = 4.0 * c - v[:-2] - v[2:]
        out[1:-1, 1:] -= c[:, :-1]
        out[1:-1, :-1] -= c[:, 1:]

    def dot(a: np.ndarray, b: np.ndarray) -> float:
        buf = np.array([np.vdot(a[1:-1], b[1:-1])])
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        return float(buf[0])

    b = field()
    b[1:-1] = 1.0
    x, r, p, q = field(), b.copy(), b.copy(), field()
    rr = dot(r, r)
    rr0 = rr
    t0 = time.perf_counter()
    for _ in range(args.iters):
        apply_a(p, q)
        alpha = rr / dot(p, q)
        x[1:-1] += alpha * p[1:-1]
        r[1:-1] -= alpha * q[1:-1]
        rr_new = dot(r, r)
        p[1:-1] = r[1:-1] + (rr_new / rr) * p[1:-1]
        rr = rr_new
    elapsed = time.perf_counter() - t0

    apply_a(x, q)
    # one Allreduce: ||b - A x||^2, x.Ax and b.x
    sums = np.array([np.sum((b[1:-1] - q[1:-1]) ** 2), np.vdot(x[1:-1], q[1:-1]),
                     np.vdot(b[1:-1], x[1:-1])])
    comm.Allreduce(MPI.IN_PLACE, sums, op=MPI.SUM)
    true_rr, xax, bx = sums
    energy = 0.5 * xax - bx  # CG lowers it monotonically from 0 at x = 0
    agree = abs(np.sqrt(true_rr) - np.sqrt(rr)) <= 1e-6 * np.sqrt(rr0)
    ok = bool(agree and energy < 0)
    report(comm, "cg", args, elapsed, ok,
           f"residual={np.sqrt(rr / rr0):.3e} true_residual={np.sqrt(true_rr / rr0):.3e} "
           f"energy={energy:.6e}")

if __name__ == "__main__":
    main()
