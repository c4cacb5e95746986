"""``iterations._split_steps`` (a block between two plain iterations cut into steps) cuts
in one windowed pass what the plain recursion cut by scanning the whole rest of the block
at every step (quadratic in the steps of a long block: OpenFOAM's solver iterations). The
plain recursion is kept here as the reference the fast one must equal."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from signature.iterations import STEP_SPLIT_SHARE, _running_shares, _split_steps


def _reference(piece, p, vocab, unit_counts):
    if len(piece) < 1.5 * p:
        return [0]
    left = _running_shares(piece, vocab, unit_counts)
    right = _running_shares(piece[::-1], vocab, unit_counts)[::-1]
    ok = (left >= STEP_SPLIT_SHARE * p) & (right >= STEP_SPLIT_SHARE * p)
    ok[[0, -1]] = False
    if not ok.any():
        return [0]
    both = np.where(ok, left + right, -1)
    c = int(np.flatnonzero(both == both.max())[0])
    return (_reference(piece[:c], p, vocab, unit_counts)
            + [c + d for d in _reference(piece[c:], p, vocab, unit_counts)])


@st.composite
def blocks(draw):
    unit = draw(st.lists(st.integers(0, 5), min_size=2, max_size=12))
    parts = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.integers(0, 3))
        if kind == 0:  # a plain step
            parts += unit
        elif kind == 1:  # a step with calls of its own (a rebuild)
            parts += unit + draw(st.lists(st.integers(0, 9), max_size=8))
        elif kind == 2:  # part of a step
            parts += unit[:draw(st.integers(0, len(unit)))]
        else:  # noise
            parts += draw(st.lists(st.integers(0, 9), max_size=6))
    vocab, counts = np.unique(np.asarray(unit, np.uint64), return_counts=True)
    return np.asarray(parts, np.uint64), len(unit), vocab, counts


@settings(max_examples=300, deadline=None)
@given(blocks())
def test_the_windowed_cut_equals_the_plain_recursion(block):
    piece, p, vocab, counts = block
    assert _split_steps(piece, p, vocab, counts) == _reference(piece, p, vocab, counts)


def test_a_long_block_of_steps_is_cut_at_every_step():
    unit = np.array([3, 1, 4, 1, 5], np.uint64)
    vocab, counts = np.unique(unit, return_counts=True)
    piece = np.tile(unit, 2000)
    assert _split_steps(piece, len(unit), vocab, counts) == list(range(0, len(piece), len(unit)))
