"""Shared plumbing of the example applications: one BLAS thread, arguments, the result line.

Import it before numpy: it pins BLAS/OpenMP to one thread per rank, because a
traced burst's CPU time is the calling thread's and cannot see worker threads.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402


class _Parser(argparse.ArgumentParser):
    """Bad arguments: one line from rank 0 (every rank sees the same argv), status 2."""

    def error(self, message: str) -> None:
        from mpi4py import MPI

        if MPI.COMM_WORLD.rank == 0:
            print(f"error: {self.prog}: {message}", file=sys.stderr, flush=True)
        sys.exit(2)


def parse(description: str, n: int, iters: int, extra=()) -> argparse.Namespace:
    """Arguments every example takes: --n (workload) and --iters, plus ``extra``
    as (flag, type, default, help) tuples; every int argument must be positive."""
    p = _Parser(description=description)
    p.add_argument("--n", type=int, default=n, help=f"workload size (default {n})")
    p.add_argument("--iters", type=int, default=iters, help=f"iterations (default {iters})")
    for flag, typ, default, text in extra:
        p.add_argument(flag, type=typ, default=default, help=f"{text} (default {default})")
    p.add_argument("--verify", action="store_true",
                   help="also compare with a serial computation on rank 0 (slow: about P "
                        "times a rank's work; may gather the result, adding MPI calls at the "
                        "end). The default check is a cheap invariant that tests the "
                        "communication")
    args = p.parse_args()
    for name, value in vars(args).items():
        if type(value) is int and value < 1:
            p.error(f"--{name.replace('_', '-')} must be positive, got {value}")
    return args


def scrambled_at(k: np.ndarray) -> np.ndarray:
    """Deterministic values in [-1, 1) that look random, a function of the index ``k``
    (fractional parts of a golden-ratio sequence, scrambled by a sine): cheap, unlike a
    first use of numpy.random, and the same whichever rank computes them."""
    k = np.asarray(k, dtype=np.float64)
    return 2.0 * np.modf(np.abs(np.sin(k * 0.6180339887498949 + 0.5) * 43758.5453))[0] - 1.0


def scrambled(shape: tuple[int, ...], offset: int = 0) -> np.ndarray:
    """``scrambled_at`` of the indices offset, offset+1, ... in C order."""
    return scrambled_at(np.arange(offset, offset + int(np.prod(shape))).reshape(shape))


def split(n: int, parts: int, i: int) -> tuple[int, int]:
    """(start, length) of block i when n items are split over ``parts`` (uneven allowed)."""
    base, extra = divmod(n, parts)
    return i * base + min(i, extra), base + (1 if i < extra else 0)


def refuse(comm, message: str) -> None:
    """Every rank reaches the same verdict: rank 0 says why, all exit with status 2."""
    if comm.rank == 0:
        print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def report(comm, app: str, args, seconds: float, ok: bool, detail: str = "") -> None:
    """Rank 0 prints one result line (a failed check aborts the job with status 1);
    then every rank finalizes MPI.

    Only rank 0 holds the verdict, so success costs no extra MPI call. Finalizing
    here, rather than at interpreter exit, keeps Python's teardown out of the
    traced run: a tracer sees it as computation before MPI_Finalize."""
    if comm.rank == 0:
        line = (f"{app} P={comm.size} n={args.n} iters={args.iters} time={seconds:.6f} "
                f"check={'OK' if ok else 'FAILED'} {detail}").rstrip()
        print(line, flush=True)
        if not ok:
            comm.Abort(1)
    from mpi4py import MPI

    MPI.Finalize()
