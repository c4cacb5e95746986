"""N-body with a systolic ring: P-1 Sendrecv shifts of a travelling block per step.

n bodies are block-distributed. Blocks are padded to B = ceil(n / P) bodies
with massless bodies far away (they feel forces but exert none and are never
reported), so every message has the same size (the last ranks may hold
fewer real bodies, or only padding). Each step computes the forces
between the local block and itself, then passes a travelling copy of
(positions, masses) around the ring P-1 times, adding its forces each time;
then a leapfrog update. Runs at any P <= n.

MPI calls, per rank, every step: P-1 ``Sendrecv`` (send to (rank+1) % P,
receive from (rank-1) % P, tag 7, B x 4 x 8 B each way: positions and
masses; none at P = 1). End: one ``Allreduce`` of 24 B (MPI.SUM, total
momentum, the answer check), then ``Finalize``;
with ``--verify`` also one ``Gather`` of B x 3 x 8 B positions to rank 0.

Defaults: --n 4096 (small workload: 1024), --iters 5.
Check: total momentum (zero at the start) stays below 1e-9 n: a body block
seen twice or missed on some rank breaks the pairwise action = reaction; and
on every rank the first step's acceleration of its first 8 bodies equals a
direct sum over all n bodies to 1e-9 relative (a rank that disagrees puts
NaN into the momentum Allreduce, so no extra MPI call).
With --verify also: the gathered positions of all bodies equal a serial
computation on rank 0 to 1e-9.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import parse, refuse, report, scrambled  # noqa: E402

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

DT = 1e-3
EPS2 = 1e-4  # softening
CHECKED = 8  # bodies per rank whose first acceleration is checked against a direct sum


def initial(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Deterministic bodies: positions, masses, velocities with zero total momentum."""
    pos = scrambled((n, 3), 0) * 2.0
    mass = 1.0 + 0.5 * scrambled((n,), 3 * n)
    vel = 0.1 * scrambled((n, 3), 4 * n)
    vel -= (mass[:, None] * vel).sum(0) / mass.sum()
    return pos, mass, vel


def accel(pos: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Acceleration on ``pos`` (B, 3) from bodies ``other`` (B, 4: x, y, z, mass)."""
    d = other[None, :, :3] - pos[:, None, :]
    inv = (np.einsum("ijk,ijk->ij", d, d) + EPS2) ** -1.5
    return np.einsum("ij,ijk->ik", inv * other[None, :, 3], d)


def serial(n: int, iters: int) -> np.ndarray:
    pos, mass, vel = initial(n)
    for _ in range(iters):
        a = accel(pos, np.column_stack([pos, mass]))
        vel += DT * a
        pos += DT * vel
    return pos


def main() -> None:
    args = parse(__doc__.splitlines()[0], n=4096, iters=5)
    comm = MPI.COMM_WORLD
    rank, P, n = comm.rank, comm.size, args.n
    if P > n:
        refuse(comm, f"nbody needs at least one body per rank: P={P} > n={n}")
    B = -(-n // P)
    pos_all, mass_all, vel_all = initial(n)
    lo, hi = min(rank * B, n), min((rank + 1) * B, n)
    real = hi - lo
    pos = np.full((B, 3), 1e6)  # padding: far away, massless
    mass = np.zeros(B)
    vel = np.zeros((B, 3))
    pos[:real], mass[:real], vel[:real] = pos_all[lo:hi], mass_all[lo:hi], vel_all[lo:hi]
    # check data: the first step's acceleration of (up to) CHECKED local bodies, summed
    # directly over all n bodies
    m = min(CHECKED, real)
    ref_acc = accel(pos[:m], np.column_stack([pos_all, mass_all]))
    del pos_all, mass_all, vel_all
    travel = np.empty((B, 4))
    incoming = np.empty((B, 4))
    right, left = (rank + 1) % P, (rank - 1) % P

    t0 = time.perf_counter()
    for step in range(args.iters):
        travel[:, :3], travel[:, 3] = pos, mass
        acc = accel(pos, travel)
        for _shift in range(P - 1):
            comm.Sendrecv(travel, dest=right, sendtag=7, recvbuf=incoming, source=left, recvtag=7)
            travel, incoming = incoming, travel
            acc += accel(pos, travel)
        if step == 0:
            first_acc = acc[:m].copy()
        vel += DT * acc
        pos += DT * vel
    elapsed = time.perf_counter() - t0

    acc_err = float(np.abs(first_acc - ref_acc).max() / np.abs(ref_acc).max()) if m else 0.0
    momentum = (mass[:, None] * vel).sum(0)
    if not acc_err <= 1e-9:
        momentum[:] = np.nan  # this rank's verdict reaches every rank through the Allreduce
    comm.Allreduce(MPI.IN_PLACE, momentum, op=MPI.SUM)
    ok = bool(np.abs(momentum).max() < 1e-9 * n)
    detail = f"momentum={np.abs(momentum).max():.1e} rank0_accel_err={acc_err:.1e}"
    if args.verify:
        gathered = np.empty((P, B, 3)) if rank == 0 else None
        comm.Gather(np.ascontiguousarray(pos), gathered, root=0)
        if rank == 0:
            got = gathered.reshape(P * B, 3)[:n]
            err = float(np.abs(got - serial(n, args.iters)).max())
            ok &= err < 1e-9
            detail += f" max_err_vs_serial={err:.1e}"
    report(comm, "nbody", args, elapsed, ok, detail)


if __name__ == "__main__":
    main()
