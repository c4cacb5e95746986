"""2-D Jacobi stencil on a Cartesian process grid (halo exchange + periodic residual).

Solves Laplace's equation on an n x n grid of unknowns (boundary: 1 on the
top edge, 0 elsewhere) with ``--iters`` Jacobi sweeps. Ranks form a
``MPI.Compute_dims(P, 2)`` grid (``Create_cart``, not periodic); each owns a
block (uneven splits allowed). Runs at any P.

MPI calls, per rank:

* start: ``Create_cart`` on COMM_WORLD;
* every iteration i = 0 .. iters-1: ``Irecv`` from each existing neighbour
  (north, south, west, east, in that order), then ``Isend`` to each existing
  neighbour (same order), then one ``Waitall``. Tags: 0 = moving south,
  1 = north, 2 = east, 3 = west. Message sizes: a row (local columns x 8 B)
  north/south, a column (local rows x 8 B) west/east;
* additionally, at iterations i with (i + 1) % check_every == 0 (with the
  defaults 100 and 10: i = 9, 19, ..., 99, ten times): one ``Allreduce`` of
  8 bytes (the squared update norm) after the Waitall;
* end: one ``Allreduce`` of 16 B (the answer check), then ``Finalize``; with
  ``--verify`` also one ``Gatherv`` of every block to rank 0.

Defaults: --n 2048 (small workload: 512), --iters 100, --check-every 10.
Check: values within [0, 1] (maximum principle) and the residuals never
increase; with --verify, the gathered grid equals a serial numpy Jacobi to 1e-12.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import parse, report, split  # noqa: E402  (pins BLAS threads before numpy)

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402


def serial_jacobi(n: int, iters: int) -> np.ndarray:
    u = np.zeros((n + 2, n + 2))
    u[0, :] = 1.0
    for _ in range(iters):
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return u[1:-1, 1:-1]


def main() -> None:
    args = parse(__doc__.splitlines()[0], n=2048, iters=100,
                 extra=[("--check-every", int, 10, "iterations between residual Allreduces")])
    world = MPI.COMM_WORLD
    dims = MPI.Compute_dims(world.size, 2)
    cart = world.Create_cart(dims, periods=[False, False], reorder=False)
    cy, cx = cart.Get_coords(cart.rank)
    y0, ny = split(args.n, dims[0], cy)
    x0, nx = split(args.n, dims[1], cx)
    north, south = cart.Shift(0, 1)
    west, east = cart.Shift(1, 1)

    u = np.zeros((ny + 2, nx + 2))
    if north == MPI.PROC_NULL:
        u[0, :] = 1.0  # the global top boundary
    new = u.copy()
    # halo buffers, contiguous: rows north/south, columns west/east
    inbox = {"n": np.empty(nx), "s": np.empty(nx), "w": np.empty(ny), "e": np.empty(ny)}
    outbox = {"n": np.empty(nx), "s": np.empty(nx), "w": np.empty(ny), "e": np.empty(ny)}
    # (side, neighbour, tag of messages we receive from it, tag of messages we send it)
    sides = [(side, peer, rtag, stag) for side, peer, rtag, stag in
             (("n", north, 0, 1), ("s", south, 1, 0), ("w", west, 2, 3), ("e", east, 3, 2))
             if peer != MPI.PROC_NULL]
    residuals = []

    t0 = time.perf_counter()
    for i in range(args.iters):
        outbox["n"][:], outbox["s"][:] = u[1, 1:-1], u[-2, 1:-1]
        outbox["w"][:], outbox["e"][:] = u[1:-1, 1], u[1:-1, -2]
        reqs = [cart.Irecv(inbox[side], source=peer, tag=rtag) for side, peer, rtag, _ in sides]
        reqs += [cart.Isend(outbox[side], dest=peer, tag=stag) for side, peer, _, stag in sides]
        MPI.Request.Waitall(reqs)
        for side, *_ in sides:
            if side == "n":
                u[0, 1:-1] = inbox["n"]
            elif side == "s":
                u[-1, 1:-1] = inbox["s"]
            elif side == "w":
                u[1:-1, 0] = inbox["w"]
            else:
                u[1:-1, -1] = inbox["e"]
        new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        if (i + 1) % args.check_every == 0:
            local = np.array([np.sum((new[1:-1, 1:-1] - u[1:-1, 1:-1]) ** 2)])
            cart.Allreduce(MPI.IN_PLACE, local, op=MPI.SUM)
            residuals.append(float(local[0]))
        u[1:-1, 1:-1] = new[1:-1, 1:-1]
    elapsed = time.perf_counter() - t0

    # answer check: the maximum principle (one Allreduce) and monotone residuals
    bounds = np.array([u[1:-1, 1:-1].max(), -u[1:-1, 1:-1].min()])
    cart.Allreduce(MPI.IN_PLACE, bounds, op=MPI.MAX)
    ok = bool(bounds[0] <= 1.0 and -bounds[1] >= 0.0)
    ok &= all(b <= a * (1 + 1e-12) for a, b in zip(residuals, residuals[1:]))
    detail = f"residual={residuals[-1]:.3e}" if residuals else ""
    if args.verify:  # gather every block to rank 0 (one Gatherv) and compare
        block = np.ascontiguousarray(u[1:-1, 1:-1]).ravel()
        counts = [split(args.n, dims[0], c // dims[1])[1] * split(args.n, dims[1], c % dims[1])[1]
                  for c in range(world.size)]
        full = np.empty(args.n * args.n) if world.rank == 0 else None
        cart.Gatherv(block, [full, counts] if world.rank == 0 else None, root=0)
        if world.rank == 0:
            grid = np.empty((args.n, args.n))
            offset = 0
            for c in range(world.size):
                (ys, yl), (xs, xl) = split(args.n, dims[0], c // dims[1]), split(args.n, dims[1], c % dims[1])
                grid[ys:ys + yl, xs:xs + xl] = full[offset:offset + yl * xl].reshape(yl, xl)
                offset += yl * xl
            err = float(np.abs(grid - serial_jacobi(args.n, args.iters)).max())
            ok &= err < 1e-12
            detail += f" max_err_vs_serial={err:.1e}"
    report(world, "stencil", args, elapsed, ok, detail)


if __name__ == "__main__":
    main()
