"""OpenFOAM's solver loops cut alike on every rank (issue 24, icoFoam at P = 12, 16): a
rule of the per-rank cut that counted calls whose number follows the decomposition.

``iterations._first_cut``: a block is split in two steps only where each side holds the
plain iteration's global collectives too (a halo exchange of 4 neighbours holds 9 of the
10 calls of 'halo, Allreduce': a smoother sweep 'halo, halo, Allreduce' was split in two
on interior ranks, whose cut with runs collapsed then won over the plain one)."""

from __future__ import annotations

import numpy as np
from signature.iterations import _split_steps


def _tokens(names: str) -> np.ndarray:
    return np.array([ord(c) for c in names], np.uint64)


def test_a_step_lacking_the_plain_iterations_collectives_is_no_step():
    """Plain iteration 'halo, Allreduce' (halo: Irecv and Isend to 4 neighbours, Waitall);
    a smoother sweep 'halo, halo, Allreduce': its first halo holds 9 of the 10 plain calls
    (above ``STEP_SPLIT_SHARE``) but not the Allreduce: one step, not two. Two plain
    iterations in a row are still two."""
    halo = _tokens("iIjJkKlLW")
    A = _tokens("A")
    unit = np.concatenate([halo, A])
    vocab, counts = np.unique(unit, return_counts=True)
    coll = (A, np.array([1]))
    sweep = np.concatenate([halo, halo, A])
    assert _split_steps(sweep, len(unit), vocab, counts) == [0, 9]  # (calls alone)
    assert _split_steps(sweep, len(unit), vocab, counts, coll) == [0]
    assert _split_steps(np.concatenate([unit, unit]), len(unit), vocab, counts, coll) == [0, 10]
