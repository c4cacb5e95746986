"""Conjugate gradient on the distributed 2-D Poisson matrix (halo + dot-product Allreduces).

Solves A x = b for the 5-point Laplacian on an n x n grid (n^2 unknowns,
zero Dirichlet boundary, b = 1, x0 = 0), rows of the grid block-distributed
over the ranks (1-D slabs; uneven splits allowed). The matrix-vector product
is the matrix-free stencil in numpy. The iteration count is fixed (no
convergence test), so communication is deterministic.
Supported P: any P <= n (every rank needs at least one grid row).

MPI calls, per rank (north = rank - 1, south = rank + 1, where they exist):

* start: one ``Allreduce`` of 8 B (MPI.SUM, r.r of the initial residual);
* every iteration: ``Irecv`` from north (tag 10), ``Irecv`` from south
  (tag 11), ``Isend`` to north (tag 11), ``Isend`` to south (tag 10): one
  grid row, n x 8 B each, only to existing neighbours; ``Waitall``; then
  ``Allreduce`` of 8 B (p.Ap); then ``Allreduce`` of 8 B (r.r), both MPI.SUM;
* end (answer check): one more halo exchange as above (for A x) and one
  ``Allreduce`` of 24 B (MPI.SUM), then ``Finalize``. ``--verify`` adds no
  MPI call.

Defaults: --n 2048 (small workload: 512), --iters 50.

Check (default):
* the true residual ||b - A x|| agrees with the CG recurrence's to 1e-6 of
  ||b||;
* 1^T (A x) = (A 1)^T x to 1e-10 relative, the left side computed with the
  received halo rows, the right side from owned values only (A is
  symmetric; A 1 counts boundary neighbours): a wrong halo breaks it.
With --verify also: rank 0 runs the same CG serially after the final
Allreduce (no MPI calls) and compares the history of ||r|| to 1e-5 relative
(floor 1e-6 ||b||) and its own rows of x to 1e-8 of max|x|.
The residual's 2-norm need not fall in 50 iterations on this matrix.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import parse, refuse, report  # noqa: E402

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402


def stencil(v: np.ndarray, out: np.ndarray) -> None:
    """out = A v on the rows of ``v`` between its two ghost rows (already filled)."""
    c = v[1:-1]
    out[1:-1] = 4.0 * c - v[:-2] - v[2:]
    out[1:-1, 1:] -= c[:, :-1]
    out[1:-1, :-1] -= c[:, 1:]


def serial_cg(n: int, iters: int) -> tuple[np.ndarray, list[float]]:
    """The same CG on one process: x (n x n) and r.r before each iteration and at the end."""
    b = np.zeros((n + 2, n))
    b[1:-1] = 1.0
    x, r, p, q = np.zeros_like(b), b.copy(), b.copy(), np.zeros_like(b)
    rr = float(np.vdot(r[1:-1], r[1:-1]))
    history = [rr]
    for _ in range(iters):
        stencil(p, q)
        alpha = rr / float(np.vdot(p[1:-1], q[1:-1]))
        x[1:-1] += alpha * p[1:-1]
        r[1:-1] -= alpha * q[1:-1]
        rr_new = float(np.vdot(r[1:-1], r[1:-1]))
        p[1:-1] = r[1:-1] + (rr_new / rr) * p[1:-1]
        rr = rr_new
        history.append(rr)
    return x[1:-1], history


def main() -> None:
    args = parse(__doc__.splitlines()[0], n=2048, iters=50)
    comm = MPI.COMM_WORLD
    rank, P, n = comm.rank, comm.size, args.n
    if P > n:
        refuse(comm, f"cg needs at least one grid row per rank: P={P} > n={n}")
    base, extra = divmod(n, P)
    rows = base + (1 if rank < extra else 0)
    row0 = rank * base + min(rank, extra)
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
        stencil(v, out)

    def dot(a: np.ndarray, b: np.ndarray) -> float:
        buf = np.array([np.vdot(a[1:-1], b[1:-1])])
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        return float(buf[0])

    b = field()
    b[1:-1] = 1.0
    x, r, p, q = field(), b.copy(), b.copy(), field()
    rr = dot(r, r)
    history = [rr]
    t0 = time.perf_counter()
    for _ in range(args.iters):
        apply_a(p, q)
        alpha = rr / dot(p, q)
        x[1:-1] += alpha * p[1:-1]
        r[1:-1] -= alpha * q[1:-1]
        rr_new = dot(r, r)
        p[1:-1] = r[1:-1] + (rr_new / rr) * p[1:-1]
        rr = rr_new
        history.append(rr)
    elapsed = time.perf_counter() - t0

    apply_a(x, q)
    # A 1 = number of boundary neighbours of each grid point
    gi, gj = np.arange(row0, row0 + rows)[:, None], np.arange(n)[None, :]
    a1 = (gi == 0) * 1.0 + (gi == n - 1) + (gj == 0) + (gj == n - 1)
    ax, xs = q[1:-1], x[1:-1]
    # one Allreduce: ||b - A x||^2, 1.(A x) - (A 1).x, and the scale of the latter
    sums = np.array([np.sum((b[1:-1] - ax) ** 2), ax.sum() - np.vdot(a1, xs),
                     np.abs(ax).sum() + np.abs(a1 * xs).sum()])
    comm.Allreduce(MPI.IN_PLACE, sums, op=MPI.SUM)
    true_rr, sym_diff, scale = sums
    rr0 = history[0]  # = ||b||^2 = n^2
    agree = abs(np.sqrt(true_rr) - np.sqrt(rr)) <= 1e-6 * np.sqrt(rr0)
    sym_err = abs(sym_diff) / scale
    ok = bool(agree and sym_err <= 1e-10)
    detail = (f"residual={np.sqrt(rr / rr0):.3e} true_residual={np.sqrt(true_rr / rr0):.3e} "
              f"symmetry_err={sym_err:.1e}")
    if rank == 0 and args.verify:  # serial reference, no MPI calls
        ref_x, ref_history = serial_cg(n, args.iters)
        # residual norms; below 1e-6 ||b|| (near rounding level) only the floor counts
        floor = 1e-6 * np.sqrt(rr0)
        hist_err = max(abs(np.sqrt(a) - np.sqrt(b)) / (np.sqrt(b) + floor)
                       for a, b in zip(history, ref_history))
        x_err = float(np.abs(xs - ref_x[:rows]).max() / np.abs(ref_x).max())
        ok &= hist_err <= 1e-5 and x_err <= 1e-8
        detail += f" serial_history_err={hist_err:.1e} serial_x_err={x_err:.1e}"
    report(comm, "cg", args, elapsed, ok, detail)


if __name__ == "__main__":
    main()
