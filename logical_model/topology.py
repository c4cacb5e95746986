"""Process grids as MPI builds them: ``MPI_Dims_create`` and row-major coordinates.

The logical model predicts Cartesian neighbours at a P nobody has run, so it
must build the grid the application will get there: the dims
``MPI_Dims_create(P, ndims)`` returns (as balanced as possible,
non-increasing), and the row-major rank <-> coordinate map of
``MPI_Cart_create`` without reordering. Everything is vectorised over ranks.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["dims_create", "coords", "rank_of", "neighbour"]


def _prime_factors(n: int) -> list[int]:
    out, d = [], 2
    while d * d <= n:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    if n > 1:
        out.append(n)
    return out


@lru_cache(maxsize=4096)
def dims_create(nnodes: int, ndims: int) -> tuple[int, ...]:
    """The dims ``MPI_Dims_create(nnodes, ndims)`` gives with all dims free.

    Of all non-increasing factorisations, the one with the smallest spread
    (largest minus smallest dimension), ties going to the larger first
    dimension: this reproduces MPICH's ``MPI_Dims_create`` for every
    P <= 3000 in 1, 2 and 3 dimensions (tested against mpi4py's
    ``MPI.Compute_dims``). Beyond 3 dimensions, or 3 dimensions over 2**22
    nodes, the prime factors are dealt largest first into the smallest
    dimension, MPICH's older rule.
    """
    if nnodes < 1 or ndims < 1:
        raise ValueError(f"dims_create needs nnodes >= 1 and ndims >= 1, got {nnodes}, {ndims}")
    if ndims == 1:
        return (nnodes,)
    if ndims == 2:
        d = int(np.ceil(np.sqrt(nnodes)))
        while nnodes % d:
            d += 1
        return (d, nnodes // d)
    if ndims == 3 and nnodes <= 1 << 22:
        return min(_factorisations(nnodes, 3), key=lambda c: (c[0] - c[-1], -c[0]))
    dims = [1] * ndims
    for f in sorted(_prime_factors(nnodes), reverse=True):
        i = min(range(ndims), key=lambda k: dims[k])
        dims[i] *= f
    return tuple(sorted(dims, reverse=True))


def _factorisations(n: int, k: int) -> list[tuple[int, ...]]:
    """All non-increasing factorisations of n into k factors."""
    if k == 1:
        return [(n,)]
    out = []
    for d in range(max(1, int(n ** (1.0 / k)) - 1), n + 1):
        if n % d == 0:
            out += [(d, *rest) for rest in _factorisations(n // d, k - 1) if rest[0] <= d]
    return out


def coords(rank: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """Row-major coordinates of ranks: shape (len(rank), ndims)."""
    rank = np.asarray(rank, np.int64)
    out = np.empty((rank.size, len(dims)), np.int64)
    rest = rank.copy()
    for d in range(len(dims) - 1, -1, -1):
        out[:, d] = rest % dims[d]
        rest //= dims[d]
    return out


def rank_of(c: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """Row-major rank of coordinates (shape (n, ndims))."""
    r = np.zeros(len(c), np.int64)
    for d in range(len(dims)):
        r = r * dims[d] + c[:, d]
    return r


def neighbour(rank: np.ndarray, dims: tuple[int, ...], periods: tuple[bool, ...],
              disp: tuple[int, ...]) -> np.ndarray:
    """World rank at coordinate displacement ``disp`` from each rank, -1 off the grid."""
    c = coords(rank, dims) + np.asarray(disp, np.int64)[None, :]
    ok = np.ones(len(c), bool)
    for d, n in enumerate(dims):
        if periods[d]:
            c[:, d] %= n
        else:
            ok &= (c[:, d] >= 0) & (c[:, d] < n)
    out = np.full(len(c), -1, np.int64)
    out[ok] = rank_of(c[ok], dims)
    return out
