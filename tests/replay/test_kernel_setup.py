"""The compiled kernel's set-up against its numpy forms: the time-major layout written by
``sigex_layout`` (``replay/_kernel.c``) equals the numpy layout array for array, whole and
for rank blocks, uneven and even; the collective tables kept per machine and joined once
give the times of tables built afresh."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import TRACES
from random_programs import build, random_program
from replay import Program, load, replay
from replay import _kernel
from replay import engine as E
from signature import load_trace
from test_workers import mixed_program

pytestmark = pytest.mark.skipif(_kernel.kernel() is None,
                                reason=f"the replay kernel cannot be built here: {_kernel.kernel_error()}")

def assert_same_layout(p: Program, lo: int, hi: int):
    lib = _kernel.kernel()
    p._cache.clear()
    got = E._layout(p, lo, hi, lib)
    p._cache.clear()
    ref = E._layout(p, lo, hi, None)
    E._layout_keys(ref, p, lo, hi)
    p._cache.clear()
    assert set(got) == set(ref), (lo, hi)
    for k in ref:
        assert got[k].dtype == ref[k].dtype and np.array_equal(got[k], ref[k]), (k, lo, hi)


@pytest.mark.parametrize("path", sorted(TRACES.glob("*/P16.h5")), ids=lambda p: p.parent.name)
def test_compiled_layout_is_the_numpy_layout(path):
    p = Program.from_trace(load_trace(path))
    P = p.nprocs
    for lo, hi in ((0, P), (0, P // 2), (3, 11), (P - 1, P), (5, 6)):
        assert_same_layout(p, lo, hi)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.tuples(st.integers(2, 9), st.integers(1, 12), st.integers(0, 2 ** 32 - 1)))
def test_compiled_layout_of_random_programs(spec):
    """Ranks with different numbers of events (some none), with and without phases."""
    P, n, seed = spec
    p = build(random_program(P, n, seed))
    rng = np.random.default_rng(seed)
    lo = int(rng.integers(0, P))
    hi = int(rng.integers(lo, P + 1))
    for a, b in ((0, P), (lo, hi)):
        if p.rank_offsets[b] > p.rank_offsets[a]:
            assert_same_layout(p, a, b)


def test_layout_without_phases_bins_by_rank():
    p = Program.from_arrays(3, rank=[0, 0, 1, 2, 2, 2], op=["Init", "Finalize", "Init", "Init",
                                                               "Barrier", "Finalize"])
    assert p.phase is None
    lay = E._layout(p, 0, 3, _kernel.kernel())
    # time-major: the first events of ranks 0, 1, 2, then the second of 0 and 2, then 2's third
    assert lay["pos"].tolist() == [0, 3, 1, 2, 4, 5]
    assert lay["keys"].tolist() == [0, 1, 2, 0, 2, 2]
    assert lay["next"].tolist() == [3, -1, 4, -1, 5, -1]
    assert lay["first"].tolist() == [0, 1, 2]


def test_joined_tables_are_kept_and_read_only():
    """A second replay of a program with the same world collectives reuses the joined
    tables (read-only: shared), and replays to the same times as the numpy engine."""
    t = load_trace(TRACES / "fft2d" / "P16.h5")
    machine = load("cluster-a").flat()
    a = replay(Program.from_trace(t), machine, kernel="compiled")
    p = Program.from_trace(t)
    st = E.ReplayState(p, machine, kernel="compiled")
    tabs = st._compile_collectives()
    assert (tabs["inst_pat"] >= 0).all()
    for k in ("c_src", "c_terms", "busy", "round_msgs"):
        assert not tabs[k].flags.writeable, k
    assert any(tabs["c_src"] is v[1]["c_src"] for v in E._JOINED.values())
    assert tabs["cT"].flags.writeable  # the work arrays are the state's own
    st.run()
    b = st.result()
    ref = replay(Program.from_trace(t), machine, kernel="numpy")
    for r in (a, b):
        assert np.array_equal(r.event_end, ref.event_end) and np.array_equal(r.finish, ref.finish)
        assert np.array_equal(r.te, ref.te)


def test_subcommunicator_instances_share_patterns():
    """Row and column collectives on a machine with one link: every instance is compiled,
    instances of one (collective, size, root, bytes) share one pattern, and the times are
    numpy's."""
    p = mixed_program(16, seed=3)
    machine = load("cluster-a").flat()
    st = E.ReplayState(p, machine, kernel="compiled")
    tabs = st._compile_collectives()
    assert (tabs["inst_pat"] >= 0).all()
    keys = {(int(p.coll_op[i]), int(p.coll_offsets[i + 1] - p.coll_offsets[i]), int(p.coll_root[i]),
             int(p.coll_bytes[i])) for i in range(p.n_collectives)}
    assert len(tabs["pat_busy"]) - 1 == len(keys) < p.n_collectives
    ref = replay(p, machine, kernel="numpy")
    got = replay(p, machine, kernel="compiled")
    assert np.array_equal(got.event_end, ref.event_end) and got.runtime == ref.runtime


@settings(max_examples=40, deadline=None, derandomize=True)
@given(n=st.integers(0, 300), span=st.integers(1, 40), seed=st.integers(0, 2 ** 32 - 1))
def test_call_ordinals_count_earlier_rows_with_the_key(n, span, seed):
    """A collective call's ordinal on its communicator: counted in _match.c, sorted in numpy."""
    from replay.program import _key_ordinals, _ordinals_in_order

    key = np.random.default_rng(seed).integers(0, span, n)
    got = _key_ordinals(key, span)
    assert np.array_equal(got, _ordinals_in_order(key))
    assert np.array_equal(got, [int(np.sum(key[:i] == key[i])) for i in range(n)])
