"""Message matching in bulk: the compiled hash pairing (``_match.c`` through
:func:`replay.program._match_sends`) and the one-sort-per-side numpy pairing
(:func:`replay.program._pair`, used without a C compiler) give exactly the pairs of the
reference below (one lexsort over sends and receives together, the matching of the
previous releases), on random keys and on the Programs of every bundled trace and of
random programs (every array of the Program equal to the one built with the reference
pairing and numpy alone).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import replay.program as rp
from conftest import TRACES
from replay import _kernel
from random_programs import build, random_program
from signature import load_trace


def _pair_reference(s_k1, s_k2, s_pos, r_k1, r_k2, r_pos):
    """The k-th send with a key pairs with the k-th receive with it: one lexsort of both sides
    (with the ordinals of :func:`replay.program._ordinals`, which the collectives use)."""
    so, ro = rp._ordinals(s_k1, s_k2, s_pos), rp._ordinals(r_k1, r_k2, r_pos)
    ns = len(s_k1)
    k1, k2 = np.concatenate([s_k1, r_k1]), np.concatenate([s_k2, r_k2])
    ordn = np.concatenate([so, ro])
    side = np.concatenate([np.zeros(ns, np.int64), np.ones(len(r_k1), np.int64)])
    order = np.lexsort((side, ordn, k2, k1))
    if len(order) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    a, b = order[:-1], order[1:]
    hit = (k1[a] == k1[b]) & (k2[a] == k2[b]) & (ordn[a] == ordn[b]) & (side[a] == 0) & (side[b] == 1)
    return a[hit], b[hit] - ns


def _as_set(pairs):
    s, r = pairs
    return sorted(zip(s.tolist(), r.tolist()))


@settings(max_examples=80, deadline=None, derandomize=True)
@given(ns=st.integers(0, 60), nr=st.integers(0, 60), keys=st.integers(1, 6),
       wide=st.booleans(), seed=st.integers(0, 2 ** 32 - 1))
def test_pair_equals_the_reference(ns, nr, keys, wide, seed):
    """Random keys (few, so that ordinals matter; or 2^60-wide second parts, which take the
    densifying path) and positions in any order give the reference's pairs."""
    rng = np.random.default_rng(seed)
    span = (1 << 60) if wide else 3

    def side(n):
        return (rng.integers(0, keys, n).astype(np.int64), rng.integers(0, 2, n) * span
                + rng.integers(0, 2, n), rng.permutation(n).astype(np.int64))

    s, r = side(ns), side(nr)
    assert _as_set(rp._pair(*s, *r)) == _as_set(_pair_reference(*s, *r))


@settings(max_examples=80, deadline=None, derandomize=True)
@given(ns=st.integers(0, 80), nr=st.integers(0, 80), keys=st.integers(1, 6),
       wide=st.booleans(), ordered=st.booleans(), seed=st.integers(0, 2 ** 32 - 1))
def test_match_sends_equals_the_reference(ns, nr, keys, wide, ordered, seed):
    """Each send's receive (or -1) is the reference's pair, through the compiled hash (positions
    in program order) or the numpy sort (any order); enough keys to make the hash grow."""
    rng = np.random.default_rng(seed)
    span = (1 << 60) if wide else 3

    def side(n):
        pos = np.sort(rng.choice(10 * n + 1, n, replace=False)) if ordered else rng.permutation(n)
        return (rng.integers(0, keys * 400, n).astype(np.int64) % keys * 1000
                + rng.integers(0, 2, n) * (n > 40) * rng.integers(0, 700, n),
                rng.integers(0, 2, n) * span + rng.integers(0, 2, n), pos.astype(np.int64))

    s, r = side(ns), side(nr)
    want = np.full(ns, -1, np.int64)
    a, b = _pair_reference(*s, *r)
    want[a] = b
    assert np.array_equal(rp._match_sends(*s, *r), want)


def test_match_sends_with_thousands_of_keys():
    """Thousands of distinct keys (the compiled hash table grows several times) and keys
    2^62 apart: still the reference's pairs."""
    rng = np.random.default_rng(7)

    def side(n):
        return (rng.integers(0, 3000, n).astype(np.int64) * (1 << 40), rng.integers(-2, 2, n) << 61,
                np.sort(rng.choice(4 * n, n, replace=False)).astype(np.int64))

    s, r = side(20000), side(18000)
    want = np.full(20000, -1, np.int64)
    a, b = _pair_reference(*s, *r)
    want[a] = b
    got = rp._match_sends(*s, *r)
    assert np.array_equal(got, want) and (got >= 0).sum() > 10000


def _fields(p):
    return {f.name: getattr(p, f.name) for f in dataclasses.fields(p) if f.name != "_cache"}


def _assert_same_program(a, b):
    fa, fb = _fields(a), _fields(b)
    for k, v in fa.items():
        w = fb[k]
        if isinstance(v, np.ndarray):
            assert v.dtype == w.dtype and np.array_equal(v, w), k
        elif k == "neighbor_patterns":
            assert len(v) == len(w), k
        else:
            assert v == w, k


@pytest.mark.parametrize("path", sorted(TRACES.glob("*/P*.h5")), ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_bundled_programs_equal_the_reference_matching(path, monkeypatch):
    """Every bundled trace gives the same Program (every array) with the reference pairing."""
    trace = load_trace(path)
    fast = rp.Program.from_trace(trace)
    monkeypatch.setattr(rp, "_pair", _pair_reference)
    monkeypatch.setattr(_kernel, "match", lambda: None)  # numpy alone
    _assert_same_program(fast, rp.Program.from_trace(trace))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(P=st.integers(2, 7), steps=st.integers(1, 14), seed=st.integers(0, 2 ** 32 - 1))
def test_random_programs_equal_the_reference_matching(P, steps, seed):
    """Random programs (wildcard receives, shifts, collectives) give the same Program."""
    spec = random_program(P, steps, seed)
    fast = build(spec)
    saved = rp._pair, _kernel.match
    rp._pair, _kernel.match = _pair_reference, lambda: None
    try:
        slow = build(spec)
    finally:
        rp._pair, _kernel.match = saved
    _assert_same_program(fast, slow)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(sizes=st.lists(st.integers(0, 30), max_size=5), n=st.integers(1, 12), sort=st.booleans(),
       compiled=st.booleans(), seed=st.integers(0, 2 ** 32 - 1))
def test_csr_is_a_stable_sort_by_owner(sizes, n, sort, compiled, seed):
    """Groups of owners (ascending or not) give what a stable argsort of all pairs by owner
    gives, with the compiled counting sort or numpy's."""
    if not compiled:
        saved, _kernel.match = _kernel.match, lambda: None
    try:
        _check_csr(sizes, n, sort, seed)
    finally:
        if not compiled:
            _kernel.match = saved


def _check_csr(sizes, n, sort, seed):
    rng = np.random.default_rng(seed)
    owners = [rng.integers(0, n, k) for k in sizes]
    owners = [np.sort(o) if sort else o for o in owners]
    values = [rng.integers(0, 1000, len(o)) for o in owners]
    off, got = rp._csr(owners, values, n)
    allo = np.concatenate(owners) if owners else np.zeros(0, np.int64)
    allv = np.concatenate(values) if values else np.zeros(0, np.int64)
    order = np.argsort(allo, kind="stable")
    assert np.array_equal(got, allv[order])
    assert np.array_equal(off, np.concatenate([[0], np.cumsum(np.bincount(allo, minlength=n))]))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(nt=st.integers(0, 40), nq=st.integers(0, 40), wide=st.booleans(),
       side=st.sampled_from(["before", "after"]), seed=st.integers(0, 2 ** 32 - 1))
def test_lookup_finds_the_nearest_row_with_the_key(nt, nq, wide, side, seed):
    """Against a direct search: the table row with the query's key and the largest position
    below (or the smallest at or above) the query's; keys 2^60 apart take the dense path."""
    rng = np.random.default_rng(seed)
    scale = (1 << 60) if wide else 1
    tpos = rng.permutation(100)[:nt].astype(np.int64)
    tkey = rng.integers(0, 4, nt) * scale
    qkey, qpos = rng.integers(0, 5, nq) * scale, rng.integers(0, 100, nq)
    got = rp._lookup(tkey, tpos, qkey, qpos, side=side)
    for j in range(nq):
        ok = (tkey == qkey[j]) & ((tpos < qpos[j]) if side == "before" else (tpos >= qpos[j]))
        cand = np.flatnonzero(ok)
        want = -1 if not cand.size else int(cand[np.argmax(tpos[cand])] if side == "before"
                                                else cand[np.argmin(tpos[cand])])
        assert got[j] == want


@pytest.mark.parametrize("path", sorted(TRACES.glob("*/P16.h5")), ids=lambda p: p.parent.name)
def test_program_from_the_replay_columns_alone(path):
    """A trace read with ``columns=TRACE_COLUMNS`` gives the Program of the whole trace."""
    _assert_same_program(rp.Program.from_trace(load_trace(path, columns=rp.TRACE_COLUMNS)),
                         rp.Program.from_trace(load_trace(path)))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(nt=st.integers(0, 300), nq=st.integers(0, 60), sparse=st.booleans(), seed=st.integers(0, 2 ** 32 - 1))
def test_latest_before_is_the_lookup(nt, nq, sparse, seed):
    """The compiled merge pass (dense keys: an array; keys 2^50 apart: the hash) finds what
    ``_lookup(side="before")`` finds, for a table in increasing position."""
    rng = np.random.default_rng(seed)
    scale = (1 << 50) if sparse else 1
    tpos = np.sort(rng.choice(1000, nt, replace=False)).astype(np.int64)
    tkey = rng.integers(0, 40, nt) * scale
    qkey, qpos = rng.integers(0, 45, nq) * scale, rng.integers(0, 1000, nq)
    want = rp._lookup(tkey, tpos, qkey, qpos, side="before")
    assert np.array_equal(rp._latest_before(tkey, tpos, qkey, qpos), want)


def test_strided_columns_give_the_same_program():
    """Columns that are strided views (an import's completions, a slice of a bigger table)
    give the Program of contiguous ones: the compiled helpers get contiguous copies."""
    trace = load_trace(TRACES / "stencil" / "P4.h5")
    want = rp.Program.from_trace(trace)

    def strided(a):
        return np.stack([a, a], 1)[:, 0]

    trace.completions = {k: strided(v) for k, v in trace.completions.items()}
    trace.events = {k: strided(v) for k, v in trace.events.items()}
    trace.rank_offsets = strided(trace.rank_offsets)
    assert not trace.completions["seq"].flags.c_contiguous
    _assert_same_program(rp.Program.from_trace(trace), want)
