"""Distributed 2-D FFT with slab decomposition and an Alltoall transpose.

An n x n complex array is split into row slabs (P must divide n). Forward:
FFT of the local rows, global transpose (``Alltoall`` of P blocks of
(n/P) x (n/P) complex values), FFT of the rows again; the result is the
transposed 2-D FFT. Inverse: the same backwards. Each iteration does a
forward and an inverse transform.

MPI calls, per rank, every iteration: ``Alltoall`` (forward transpose),
``Alltoall`` (inverse transpose); each block is (n/P)^2 x 16 B (complex128).
End: one ``Allreduce`` of 8 B (MPI.MAX, the largest error; the answer
check), then ``Finalize``; with ``--verify`` also one ``Gather`` of the first
iteration's forward result (the local slab) to rank 0.

Defaults: --n 2048 (small workload: 512), --iters 10.
Supported P: P must divide n (otherwise exit status 2).

Check, on every rank: the last round trip recovers the input to 1e-9, and
the first forward transform passes a test of the transpose that needs no
communication: sum_k X[k, l] = n * DFT(row 0 of the input)[l] for the
rows l of X^T a rank holds (to 1e-9 relative; every rank regenerates row 0).
With --verify also: the whole gathered forward result equals numpy.fft.fft2
of the input (regenerated on rank 0), to 1e-8 relative.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import parse, refuse, report, scrambled  # noqa: E402

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402


def initial(n: int, P: int, rank: int, slabs: int) -> np.ndarray:
    """``slabs`` consecutive row slabs of the deterministic input, from ``rank``'s on."""
    b = n // P
    return (scrambled((slabs * b, n), offset=rank * b * n)
            + 1j * scrambled((slabs * b, n), offset=(P + rank) * b * n))


def transpose(comm, local: np.ndarray, sendbuf: np.ndarray, recvbuf: np.ndarray) -> np.ndarray:
    """Global transpose of row slabs: local (b, n) -> the transposed matrix's slab (b, n)."""
    P = comm.size
    b = local.shape[0]
    sendbuf[:] = local.reshape(b, P, b).transpose(1, 0, 2)  # block j goes to rank j
    comm.Alltoall(sendbuf, recvbuf)
    # recvbuf[i] is rows i*b.. of the original, our column block: transpose it into place
    return recvbuf.transpose(2, 0, 1).reshape(b, P * b)


def forward(comm, x, sendbuf, recvbuf):
    return np.fft.fft(transpose(comm, np.fft.fft(x, axis=1), sendbuf, recvbuf), axis=1)


def inverse(comm, y, sendbuf, recvbuf):
    return np.fft.ifft(transpose(comm, np.fft.ifft(y, axis=1), sendbuf, recvbuf), axis=1)


def main() -> None:
    args = parse(__doc__.splitlines()[0], n=2048, iters=10)
    comm = MPI.COMM_WORLD
    rank, P, n = comm.rank, comm.size, args.n
    if n % P:
        refuse(comm, f"fft2d needs P to divide n: n={n}, P={P}")
    b = n // P
    x0 = initial(n, P, rank, 1)
    sendbuf = np.empty((P, b, b), complex)
    recvbuf = np.empty((P, b, b), complex)

    x = x0.copy()
    y = None
    t0 = time.perf_counter()
    for _ in range(args.iters):
        fx = forward(comm, x, sendbuf, recvbuf)
        if y is None:
            y = np.ascontiguousarray(fx)  # the first forward transform, checked below
        x = inverse(comm, fx, sendbuf, recvbuf)
    elapsed = time.perf_counter() - t0

    # Forward check that needs no communication: the sum over k of X[k, l] (a row of our
    # slab y, which holds rows l of X^T) is n times the DFT of the input's row 0 at l,
    # and every rank can regenerate row 0.
    row0_fft = n * np.fft.fft(initial(n, P, 0, 1)[0])
    rowsum_err = (np.abs(y.sum(axis=1) - row0_fft[rank * b:(rank + 1) * b]).max()
                  / np.abs(row0_fft).max())
    roundtrip_err = np.abs(x - x0).max()
    err = np.array([max(roundtrip_err, rowsum_err)])
    if not (roundtrip_err < 1e-9 and rowsum_err < 1e-9):
        err[0] = np.inf  # also for NaN, which MPI.MAX need not propagate
    comm.Allreduce(MPI.IN_PLACE, err, op=MPI.MAX)
    ok = bool(err[0] < 1e-9)
    detail = (f"max_err={err[0]:.1e} rank0_roundtrip_err={roundtrip_err:.1e} "
              f"rank0_rowsum_err={rowsum_err:.1e}")
    if args.verify:  # one Gather; rank 0 regenerates the input
        outputs = np.empty((n, n), complex) if rank == 0 else None
        comm.Gather(y, outputs, root=0)
        if rank == 0:
            ref = np.fft.fft2(initial(n, P, 0, P))
            rel = float(np.abs(outputs.T - ref).max() / np.abs(ref).max())
            ok &= rel < 1e-8
            detail += f" rel_err_vs_fft2={rel:.1e}"
    report(comm, "fft2d", args, elapsed, ok, detail)


if __name__ == "__main__":
    main()
