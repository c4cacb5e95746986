"""Rotations: a loop over items owned round-robin broadcasts item k from member k mod n
(Elk's k-points, a band or panel loop). Its calls are one call of a loop whose root
follows the repetition, not a cycle of n calls with the remainder of the item count
left in the step around it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signature import OP_CODE, extract
from signature.iterations import ROOT_ROTATING, rotating_roots
from synthetic import build_trace, comm_table


def _kpoint_trace(P: int, items: int, steps: int, root_of, *, comm: int = 0, comms=None, op: str = "Bcast"):
    """Each step: ``items`` calls of ``op`` (a rooted collective) on ``comm`` (item k's root:
    ``root_of(k)``, a world rank), then an Allreduce on the world."""
    def step(r, s):
        return [(op, -1, 144, -1, 0, comm)] * items + [("Allreduce", -1, 4096)]
    t = build_trace(P, steps, step, comms=comms)
    ev = t.events
    bcast = np.flatnonzero(ev["op"] == OP_CODE[op])
    k = np.concatenate([np.arange(b - a) for a, b in zip(*np.searchsorted(
        bcast, [t.rank_offsets[:-1], t.rank_offsets[1:]]))]) % items
    ev["root"][bcast] = [root_of(int(i)) for i in k]
    return t, bcast


@settings(max_examples=30, deadline=None)
@given(P=st.integers(3, 9), items=st.integers(3, 23), steps=st.integers(3, 7),
       op=st.sampled_from(["Bcast", "Reduce", "Gather", "Scatter"]))
def test_a_rotation_is_one_call_of_a_loop_at_every_p(P, items, steps, op):
    """Whatever items mod P is, the signature is that of the same program with one fixed
    root: the same phases, weights and calls, the template naming member 0, and a note
    saying the root rotates (a broadcast from each owner, or a reduction, gather or
    scatter to or from it)."""
    t, bcast = _kpoint_trace(P, items, steps, lambda k: k % P, op=op)
    assert np.array_equal(np.flatnonzero(rotating_roots(t) == ROOT_ROTATING), bcast)
    fixed, _ = _kpoint_trace(P, items, steps, lambda k: 0, op=op)
    assert not (rotating_roots(fixed) == ROOT_ROTATING).any()
    got, want = extract(t), extract(fixed)
    assert [(p.kind, p.weight, p.ops) for p in got.phases] == [(p.kind, p.weight, p.ops) for p in want.phases]
    assert [p.weight for p in got.phases if p.ops == (op,)] == [steps * (items - 1)], got.phases
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


@settings(max_examples=25, deadline=None)
@given(P=st.integers(3, 9), items=st.integers(3, 15), steps=st.integers(3, 6))
def test_an_owner_that_computes_each_item_is_one_rank_of_the_frame(P, items, steps):
    """Each item is computed by its owner right before its Bcast (one rank busy per
    repetition, a different one each time). In the rotation's frame the loop's work is one
    rank's, the owner's per item (the burst before a call is the previous call's repetition's:
    the member after the root), not 1/P of it on every rank; with a fixed owner it is that
    rank's, the same figure."""
    work, idle = 1e-2, 1e-5

    def owner_computes(t, bcast, root_of):
        ev = t.events
        k = np.concatenate([np.arange(b - a) for a, b in zip(*np.searchsorted(
            bcast, [t.rank_offsets[:-1], t.rank_offsets[1:]]))]) % items
        owner = np.array([root_of(int(i)) for i in k])
        ev["t_cpu"][bcast] = np.where(ev["rank"][bcast] == owner, work, idle)
        return t
    rot, bcast = _kpoint_trace(P, items, steps, lambda k: k % P)
    got = extract(owner_computes(rot, bcast, lambda k: k % P))
    loop = [p for p in got.phases if p.ops == ("Bcast",)][0]
    cpu = loop.stats["cpu_mean"]
    assert int(np.argmax(cpu)) == 1 and cpu[1] == pytest.approx(work), cpu
    assert np.all(np.delete(cpu, 1) < 10 * idle), cpu
    assert any("as far from each repetition's root" in n for n in got.notes), got.notes
    fixed, bcast = _kpoint_trace(P, items, steps, lambda k: 0)
    ref = extract(owner_computes(fixed, bcast, lambda k: 0))
    loop = [p for p in ref.phases if p.ops == ("Bcast",)][0]
    assert loop.stats["cpu_mean"][0] == pytest.approx(work)


def test_a_phase_with_point_to_point_calls_keeps_each_ranks_own_figures():
    """Items numbered across steps (item k of the run from member k mod P): the step keeps
    one call of the rotation, whose root moves from step to step, beside a ring shift.
    The shift's peers are each rank's own, so the step is not read in the rotation's frame
    (its figures are each rank's mean over the turns); the inner loop of Bcasts is."""
    P, items, steps = 5, 7, 6

    def step(r, s):
        return [("Bcast", -1, 144)] * items + [("Sendrecv", (r + 1) % P, 8, (r - 1) % P, 8),
                                                ("Allreduce", -1, 64)]
    t = build_trace(P, steps, step)
    ev = t.events
    bcast = np.flatnonzero(ev["op"] == OP_CODE["Bcast"])
    ev["root"][bcast] = np.tile(np.arange(items * steps) % P, P)
    sig = extract(t)
    ring = [p for p in sig.phases if "Sendrecv" in p.ops]
    assert ring and ring[0].weight >= 2, sig.phases
    frame = {n.split(":")[0] for n in sig.notes if "as far from each repetition's root" in n}
    means = {n.split(":")[0] for n in sig.notes if "mean over the turns" in n}
    assert f"phase {ring[0].id}" in means and f"phase {ring[0].id}" not in frame, sig.notes
    assert frame, sig.notes
