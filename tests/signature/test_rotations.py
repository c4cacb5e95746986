"""Rotations: a loop over items owned round-robin broadcasts item k from member k mod n
(Elk's k-points, a band or panel loop). Its calls are one call of a loop whose root
follows the repetition, not a cycle of n calls with the remainder of the item count
left in the step around it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from signature import OP_CODE, extract
from signature.iterations import ROOT_ROTATING, rotating_roots
from synthetic import build_trace, comm_table


def _kpoint_trace(P: int, items: int, steps: int, root_of, *, comm: int = 0, comms=None):
    """Each step: ``items`` Bcasts on ``comm`` (item k's root: ``root_of(k)``, a world rank),
    then an Allreduce on the world."""
    def step(r, s):
        return [("Bcast", -1, 144, -1, 0, comm)] * items + [("Allreduce", -1, 4096)]
    t = build_trace(P, steps, step, comms=comms)
    ev = t.events
    bcast = np.flatnonzero(ev["op"] == OP_CODE["Bcast"])
    k = np.concatenate([np.arange(b - a) for a, b in zip(*np.searchsorted(
        bcast, [t.rank_offsets[:-1], t.rank_offsets[1:]]))]) % items
    ev["root"][bcast] = [root_of(int(i)) for i in k]
    return t, bcast


@settings(max_examples=30, deadline=None)
@given(P=st.integers(3, 9), items=st.integers(3, 23), steps=st.integers(3, 7))
def test_a_rotation_is_one_call_of_a_loop_at_every_p(P, items, steps):
    """Whatever items mod P is, the signature is that of the same program with one fixed
    root: the same phases, weights and calls, the template naming member 0, and a note
    saying the root rotates."""
    t, bcast = _kpoint_trace(P, items, steps, lambda k: k % P)
    assert np.array_equal(np.flatnonzero(rotating_roots(t) == ROOT_ROTATING), bcast)
    fixed, _ = _kpoint_trace(P, items, steps, lambda k: 0)
    assert not (rotating_roots(fixed) == ROOT_ROTATING).any()
    got, want = extract(t), extract(fixed)
    assert [(p.kind, p.weight, p.ops) for p in got.phases] == [(p.kind, p.weight, p.ops) for p in want.phases]
    assert [p.weight for p in got.phases if p.ops == ("Bcast",)] == [steps * (items - 1)], got.phases
    for a, b in zip(got.phases, want.phases):
        for c in ("op", "root", "bytes"):
            assert np.array_equal(a.template[c], b.template[c]), (a.id, c)
    assert any("take their root in turn" in n for n in got.notes), got.notes


@settings(max_examples=20, deadline=None)
@given(P=st.integers(3, 9), items=st.integers(3, 12), stride=st.integers(2, 4))
def test_roots_that_do_not_move_on_by_one_member_are_kept(P, items, stride):
    """Roots that stay, or jump by more than one member, or two calls in turn, are the
    program's own calls: their roots are kept."""
    t, _ = _kpoint_trace(P, items, 3, lambda k: (stride * k) % P if stride % P != 1 else 0)
    assert not (rotating_roots(t) == ROOT_ROTATING).any()
    two, _ = _kpoint_trace(P, 2, 3, lambda k: k)
    assert not (rotating_roots(two) == ROOT_ROTATING).any()


def test_a_rotation_on_a_sub_communicator_goes_by_its_members():
    """On a communicator of the odd ranks, the root moves on by one member (world ranks
    1, 3, 5, ...): a rotation, whose template names the communicator's first member; the
    same world ranks on MPI_COMM_WORLD skip a rank each time: no rotation."""
    P = 8
    odd = [1, 3, 5, 7]
    comms = comm_table(P, [odd])

    def step(r, s):
        calls = [("Bcast", -1, 144, -1, 0, 1)] * 6 if r in odd else []
        return calls + [("Allreduce", -1, 64)]
    t = build_trace(P, 4, step, comms=comms)
    ev = t.events
    bcast = np.flatnonzero(ev["op"] == OP_CODE["Bcast"])
    ev["root"][bcast] = np.tile([odd[k % 4] for k in range(6)], len(bcast) // 6)
    assert np.array_equal(np.flatnonzero(rotating_roots(t) == ROOT_ROTATING), bcast)
    sig = extract(t)
    roots = {int(r) for p in sig.phases for r, o in zip(p.template["root"], p.template["op"])
             if o == OP_CODE["Bcast"]}
    assert roots == {1}, sig.phases
    ev["comm"][bcast] = 0  # the same roots on the world skip the even ranks
    assert not (rotating_roots(t) == ROOT_ROTATING).any()
