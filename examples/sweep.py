"""Wavefront sweep on a 2-D process grid (pipelined blocking Recv -> compute -> Send).

A structure like LU or SWEEP3D: an n x n grid with K independent planes,
ranks on a ``MPI.Compute_dims(P, 2)`` grid (uneven splits allowed, every
rank needs at least one row and column). Every sweep starts at the top-left
corner; the planes are processed in ``--kblocks`` chunks so that the ranks
form a pipeline. The recurrence, per plane, is a running mean along each row
of (half the value above + a source term):

    a[i, j] = (S[i, j-1] + 0.5 * a[i-1, j] + s[i, j]) / (j + 1)

where S is the running sum along the row, so each value depends on its north
and west neighbours. A rank receives the row above its block (a, from the
north) and the running sums left of it (S, from the west) and sends the same
downstream.

MPI calls, per rank, every sweep and every chunk k = 0 .. kblocks-1, in this
order: ``Recv`` from north (if it exists: local columns x chunk planes x 8 B),
``Recv`` from west (if it exists: local rows x chunk planes x 8 B), then
``Send`` to south and ``Send`` to east (where they exist, same sizes as the
matching Recv); the tag is k. The corner rank 0 only sends, the opposite
corner only receives. End: one ``Allreduce`` of 16 B (MPI.SUM, the answer
check), then ``Finalize``; with ``--verify`` also one ``gather`` of plane 0
to rank 0 (pickle API).

Defaults: --n 1024 (small workload: 256), --iters 5 sweeps, --planes 8,
--kblocks 4 (planes divisible by kblocks). Every sweep recomputes the same
values (the source term does not change), so the check covers all sweeps.
Supported P: any P whose process grid has at most n rows and columns.

Check: the global identity n sum_i a[i, n-1] = 0.5 sum_{i<n-1, j} a[i, j]
+ sum_ij s[i, j] (the recurrence summed along the last column; needs the
values received from the north and the west) to 1e-12 of its bound
8 n^2 planes, with every value within the bound |a| <= 4. With --verify
also: plane 0 gathered whole equals a serial computation on rank 0 to
1e-12, and the weighted checksum of all values (from the final Allreduce)
matches the serial one to 1e-12.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import parse, refuse, report, split  # noqa: E402

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402


def source(planes: int, rows: slice, cols: slice, n: int) -> np.ndarray:
    """The source term s[k, i, j], a deterministic function of global indices."""
    k = np.arange(planes)[:, None, None]
    i = np.arange(n)[rows][None, :, None]
    j = np.arange(n)[cols][None, None, :]
    return np.sin(0.01 * (i + 1) * (k + 1)) + np.cos(0.013 * (j + 1))


def block_sweep(a_north: np.ndarray, s_west: np.ndarray, src: np.ndarray, j0: int) -> tuple:
    """Compute a (kc, ny, nx) block from the row above (kc, nx) and the running sums
    on the left (kc, ny). Returns (block, bottom row, running sums on the right)."""
    kc, ny, nx = src.shape
    out = np.empty_like(src)
    denom = np.arange(j0 + 1, j0 + nx + 1, dtype=float)
    above = a_north
    right = np.empty((kc, ny))
    for i in range(ny):
        sums = s_west[:, i:i + 1] + np.cumsum(0.5 * above + src[:, i, :], axis=1)
        out[:, i, :] = sums / denom
        right[:, i] = sums[:, -1]
        above = out[:, i, :]
    return out, np.ascontiguousarray(above), right


def serial(n: int, planes: int) -> np.ndarray:
    """The whole grid's sweep on one process."""
    zeros = np.zeros((planes, n))
    return block_sweep(zeros, zeros, source(planes, slice(0, n), slice(0, n), n), 0)[0]


def checksum(a: np.ndarray, y0: int, x0: int) -> float:
    """A weighted sum of a block (planes, rows, cols) at global offset (y0, x0); the
    weights, 1 .. 11, depend on the global indices, so misplaced values change it."""
    k, ny, nx = a.shape
    gk = np.arange(k)[:, None, None]
    gi = np.arange(y0, y0 + ny)[None, :, None]
    gj = np.arange(x0, x0 + nx)[None, None, :]
    return float(np.sum(a * (1 + (gi + 2 * gj + 3 * gk) % 11)))


def main() -> None:
    args = parse(__doc__.splitlines()[0], n=1024, iters=5,
                 extra=[("--planes", int, 8, "independent planes"),
                        ("--kblocks", int, 4, "pipeline chunks per sweep")])
    comm = MPI.COMM_WORLD
    P, n = comm.size, args.n
    if args.planes % args.kblocks:
        refuse(comm, f"--planes {args.planes} is not divisible by --kblocks {args.kblocks}")
    dims = MPI.Compute_dims(P, 2)
    if min(dims) > n or max(dims) > n:
        refuse(comm, f"sweep needs at least one row and column per rank: grid {dims}, n={n}")
    cart = comm.Create_cart(dims, periods=[False, False], reorder=False)
    cy, cx = cart.Get_coords(cart.rank)
    (y0, ny), (x0, nx) = split(n, dims[0], cy), split(n, dims[1], cx)
    north, south = cart.Shift(0, 1)
    west, east = cart.Shift(1, 1)
    kc = args.planes // args.kblocks
    src = source(args.planes, slice(y0, y0 + ny), slice(x0, x0 + nx), n)
    a = np.empty((args.planes, ny, nx))
    from_north = np.empty((kc, nx))
    from_west = np.empty((kc, ny))

    t0 = time.perf_counter()
    for _ in range(args.iters):
        for k in range(args.kblocks):
            planes = slice(k * kc, (k + 1) * kc)
            if north != MPI.PROC_NULL:
                cart.Recv(from_north, source=north, tag=k)
            else:
                from_north[:] = 0.0
            if west != MPI.PROC_NULL:
                cart.Recv(from_west, source=west, tag=k)
            else:
                from_west[:] = 0.0
            a[planes], bottom, right = block_sweep(from_north, from_west, src[planes], x0)
            if south != MPI.PROC_NULL:
                cart.Send(bottom, dest=south, tag=k)
            if east != MPI.PROC_NULL:
                cart.Send(np.ascontiguousarray(right), dest=east, tag=k)
    elapsed = time.perf_counter() - t0

    # answer check. Summing the recurrence's last column over the rows gives the identity
    #   n * sum_i a[i, n-1] = 0.5 * sum_{i < n-1} sum_j a[i, j] + sum_ij s[i, j]   (per plane)
    # whose terms each rank sums over the values it owns: a value received wrongly from the
    # north or the west breaks it. |a| <= 4 since |s| <= 2, so 8 n^2 planes bounds its terms.
    identity = -src.sum() - 0.5 * (a[:, :-1].sum() if south == MPI.PROC_NULL else a.sum())
    if east == MPI.PROC_NULL:
        identity += n * a[:, :, -1].sum()
    if not np.abs(a).max() <= 4.0 * (1 + 1e-12):  # also catches NaN
        identity = np.nan
    sums = np.array([identity, checksum(a, y0, x0)])
    cart.Allreduce(MPI.IN_PLACE, sums, op=MPI.SUM)  # the only MPI call of the check
    identity_err = abs(sums[0]) / (8.0 * n * n * args.planes)
    ok = bool(identity_err <= 1e-12)
    detail = f"identity_err={identity_err:.1e} checksum={sums[1]:.12e}"
    if args.verify:
        blocks = cart.gather((y0, x0, a[0]), root=0)
        if cart.rank == 0:
            plane = np.empty((n, n))
            for ys, xs, blk in blocks:
                plane[ys:ys + blk.shape[0], xs:xs + blk.shape[1]] = blk
            ref = serial(n, args.planes)  # all planes: the checksum covers them
            err = float(np.abs(plane - ref[0]).max())
            rel = abs(sums[1] - checksum(ref, 0, 0)) / checksum(np.abs(ref), 0, 0)
            ok &= err < 1e-12 and rel <= 1e-12
            detail += f" max_err_vs_serial={err:.1e} checksum_err_vs_serial={rel:.1e}"
    report(comm, "sweep", args, elapsed, ok, detail)


if __name__ == "__main__":
    main()
