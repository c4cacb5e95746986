"""2-D Jacobi stencil on a Cartesian process grid (halo exchange + periodic residual).

Runs ``--iters`` Jacobi sweeps for Laplace's equation on an n x n grid of
unknowns (fixed boundary: 1 on the top edge, 0 elsewhere; initial interior:
deterministic pseudo-random values in [0, 1), so every halo message carries
data). Ranks form a ``MPI.Compute_dims(P, 2)`` grid (``Create_cart``, not
periodic, no reordering); each owns a block, uneven splits allowed.
Supported P: any P whose process grid has at most n rows and columns.

MPI calls, per rank:

* start: ``Create_cart`` on COMM_WORLD;
* every iteration i = 0 .. iters-1: ``Irecv`` from each existing neighbour
  (north, south, west, east, in that order), then ``Isend`` to each existing
  neighbour (same order), then one ``Waitall`` (at most 4 + 4 requests; never
  to MPI.PROC_NULL). Tags: 0 = moving south, 1 = north, 2 = east, 3 = west.
  Message sizes: a row (local columns x 8 B) north/south, a column (local
  rows x 8 B) west/east;
* additionally, at iterations i with (i + 1) % check_every == 0 (with the
  defaults 100 and 10: i = 9, 19, ..., 99, ten times): one ``Allreduce`` of
  8 bytes (MPI.SUM, the squared update norm) after the Waitall;
* end: one ``Allreduce`` of 16 B (MPI.SUM, the answer check), then
  ``Finalize``; with ``--verify`` also one ``Gatherv`` of every block to rank 0
  between the two.

Defaults: --n 2048 (small workload: 512), --iters 100, --check-every 10.

Check (default; cheap, and its only MPI call is the final Allreduce):
* the last sweep obeys the global identity sum(u_new) = 1/4 sum_p w_p u_old[p]
  (w_p = number of interior neighbours of p, boundary points included), with
  the left side computed from the halos each rank received and the right side
  from the owners' values: a wrong or stale halo breaks it;
* all values stay in [0, 1] (maximum principle), the sampled residuals never
  increase.
With --verify also: the whole gathered grid equals a serial Jacobi on rank 0
to 1e-12, and the residual history matches the serial one to 1e-9 relative.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import parse, refuse, report, scrambled_at, split  # noqa: E402

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402


def initial(n: int, y0: int, ny: int, x0: int, nx: int) -> np.ndarray:
    """Block [y0:y0+ny, x0:x0+nx] of the initial grid plus one ghost layer (boundary values)."""
    u = np.zeros((ny + 2, nx + 2))
    gy, gx = np.arange(y0, y0 + ny)[:, None], np.arange(x0, x0 + nx)[None, :]
    u[1:-1, 1:-1] = 0.5 * (scrambled_at(gy * n + gx) + 1.0)
    if y0 == 0:
        u[0, :] = 1.0  # the global top boundary
    return u


def jacobi(u: np.ndarray, new: np.ndarray) -> None:
    new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


def serial_jacobi(n: int, iters: int, check_every: int) -> tuple[np.ndarray, list[float]]:
    """The same iterations on one process: final grid and residual history."""
    u = initial(n, 0, n, 0, n)
    new = u.copy()
    residuals = []
    for i in range(iters):
        jacobi(u, new)
        if (i + 1) % check_every == 0:
            residuals.append(float(np.sum((new[1:-1, 1:-1] - u[1:-1, 1:-1]) ** 2)))
        u, new = new, u
    return u[1:-1, 1:-1], residuals


def main() -> None:
    args = parse(__doc__.splitlines()[0], n=2048, iters=100,
                 extra=[("--check-every", int, 10, "iterations between residual Allreduces")])
    world = MPI.COMM_WORLD
    n = args.n
    dims = MPI.Compute_dims(world.size, 2)
    if max(dims) > n:
        refuse(world, f"stencil needs at least one grid row and column per rank: "
                      f"process grid {dims[0]}x{dims[1]}, n={n}")
    cart = world.Create_cart(dims, periods=[False, False], reorder=False)
    cy, cx = cart.Get_coords(cart.rank)
    y0, ny = split(n, dims[0], cy)
    x0, nx = split(n, dims[1], cx)
    north, south = cart.Shift(0, 1)
    west, east = cart.Shift(1, 1)

    u = initial(n, y0, ny, x0, nx)
    new = u.copy()  # the two arrays swap roles every iteration; both keep the boundary
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
        jacobi(u, new)
        if (i + 1) % args.check_every == 0:
            local = np.array([np.sum((new[1:-1, 1:-1] - u[1:-1, 1:-1]) ** 2)])
            cart.Allreduce(MPI.IN_PLACE, local, op=MPI.SUM)
            residuals.append(float(local[0]))
        u, new = new, u
    elapsed = time.perf_counter() - t0

    # answer check. Now u holds the last result, new the grid it was computed from.
    final, prev = u[1:-1, 1:-1], new[1:-1, 1:-1]
    gy, gx = np.arange(y0, y0 + ny)[:, None], np.arange(x0, x0 + nx)[None, :]
    w = 4.0 - (gy == 0) - (gy == n - 1) - (gx == 0) - (gx == n - 1)
    lhs = final.sum()
    rhs = 0.25 * np.sum(w * prev) + (0.25 * nx if north == MPI.PROC_NULL else 0.0)
    in_bounds = final.min() >= 0.0 and final.max() <= 1.0
    sums = np.array([lhs - rhs if in_bounds else np.nan, lhs + rhs])
    cart.Allreduce(MPI.IN_PLACE, sums, op=MPI.SUM)  # the only MPI call of the check
    identity_err = abs(sums[0]) / sums[1]
    ok = bool(identity_err <= 1e-10)
    ok &= all(b <= a * (1 + 1e-12) for a, b in zip(residuals, residuals[1:]))
    detail = (f"residual={residuals[-1]:.3e} " if residuals else "") + f"identity_err={identity_err:.1e}"
    if args.verify:  # gather every block to rank 0 (one Gatherv) and compare
        block = np.ascontiguousarray(final).ravel()
        counts = [split(n, dims[0], c // dims[1])[1] * split(n, dims[1], c % dims[1])[1]
                  for c in range(world.size)]
        full = np.empty(n * n) if world.rank == 0 else None
        cart.Gatherv(block, [full, counts] if world.rank == 0 else None, root=0)
        if world.rank == 0:
            grid = np.empty((n, n))
            offset = 0
            for c in range(world.size):
                (ys, yl), (xs, xl) = split(n, dims[0], c // dims[1]), split(n, dims[1], c % dims[1])
                grid[ys:ys + yl, xs:xs + xl] = full[offset:offset + yl * xl].reshape(yl, xl)
                offset += yl * xl
            ref, ref_res = serial_jacobi(n, args.iters, args.check_every)
            err = float(np.abs(grid - ref).max())
            res_err = max([abs(a - b) / b for a, b in zip(residuals, ref_res) if b] + [0.0])
            ok &= err < 1e-12 and len(residuals) == len(ref_res) and res_err <= 1e-9
            detail += f" max_err_vs_serial={err:.1e} residual_err_vs_serial={res_err:.1e}"
    report(world, "stencil", args, elapsed, ok, detail)


if __name__ == "__main__":
    main()
