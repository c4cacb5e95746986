"""The canonical cut moves only past collectives that every rank makes at every P (issue
24, Quantum ESPRESSO at P = 4): a communicator made by choosing its members (Comm_split,
Comm_create) is a sub-communicator even at a P where it holds every rank.

``signature.phases._whole_comms`` tells the communicators apart; the cut's rotation
(``iterations._past_collectives``) reads only those collectives."""

from __future__ import annotations

import numpy as np

from signature import OP_CODE, extract
from signature.phases import _whole_comms
from synthetic import build_trace, comm_table


def _split_trace(P: int, made_by: list[tuple[str, int]]):
    """A trace whose communicators 1.. (all of every rank, ``comm_table``) are made in its
    first step by the calls ``made_by`` (op, parent), one after the other."""
    comms = comm_table(P, [list(range(P))] * len(made_by))

    def step(r, s):
        if s:
            return [("Allreduce", -1, 8)]
        return [(op, -1, 0, -1, 0, parent, k + 1) for k, (op, parent) in enumerate(made_by)]
    return build_trace(P, 3, step, comms=comms)


def test_communicators_of_every_rank_at_every_p_are_world_and_its_copies():
    """World, a Comm_dup of it and a Cartesian communicator over that are whole; a split
    (and all it makes) holds every rank here only; a communicator of every rank that the
    trace does not show being made counts by its size."""
    t = _split_trace(4, [("Comm_dup", 0), ("Cart_create", 1), ("Comm_split", 0), ("Comm_dup", 3),
                         ("Comm_create", 1)])
    assert _whole_comms(t).tolist() == [True, True, True, False, False, False]
    unseen = build_trace(4, 3, lambda r, s: [("Allreduce", -1, 8)], comms=comm_table(4, [[0, 1, 2, 3], [0, 1]]))
    assert _whole_comms(unseen).tolist() == [True, True, False]


def _diag_step(P: int, group: int):
    """A cycle as Quantum ESPRESSO's: a halo, a reduction over every rank, then broadcasts
    in a group of 4 ranks (its own communicator, made by Comm_split: ranks 0-3 are group
    1, ranks 4-7 group 2). Before the first cycle, the reduction and the broadcasts: the
    tandem repeat is first seen on the reduction."""
    def step(r, s):
        g = 1 + r // group
        calls = []
        if s == 0:
            calls += [("Comm_split", -1, 0, -1, 0, 0, g), ("Allreduce", -1, 8),
                      ("Bcast", -1, 64, -1, 0, g), ("Bcast", -1, 32, -1, 0, g)]
        calls += [("Sendrecv", (r + 1) % P, 640, (r - 1) % P, 640),
                  ("Sendrecv", (r - 1) % P, 640, (r + 1) % P, 640),
                  ("Allreduce", -1, 8), ("Bcast", -1, 64, -1, 0, g), ("Bcast", -1, 32, -1, 0, g)]
        return calls
    return step


def _loop_ops(sig) -> list[tuple[int, ...]]:
    """Rank 0's op order of each loop phase."""
    out = []
    for ph in sig.loop_phases:
        to = ph.template_offsets
        out.append(tuple(np.asarray(ph.template["op"][to[0]:to[1]]).tolist()))
    return out


def test_a_group_of_every_rank_at_one_p_is_cut_as_at_another():
    """At P = 4 the group's communicator holds every rank, at P = 8 half of them: the cycle
    is cut right after the reduction at both P (before this, at P = 4 it moved on past
    the group's broadcasts too, and the two P gave the same loop rotated differently)."""
    sigs = [extract(build_trace(P, 12, _diag_step(P, 4), comms=comm_table(P, [list(range(g, min(g + 4, P)))
                                                                                 for g in range(0, P, 4)])))
            for P in (4, 8)]
    ops = [_loop_ops(s) for s in sigs]
    assert ops[0] == ops[1], ops
    cycle = tuple(OP_CODE[o] for o in ("Bcast", "Bcast", "Sendrecv", "Sendrecv", "Allreduce"))
    assert ops[0] == [cycle], ops
    assert [ph.weight for ph in sigs[0].loop_phases] == [ph.weight for ph in sigs[1].loop_phases]


def test_an_iteration_cut_after_a_world_collective_begins_after_any_collective_of_every_rank():
    """``_aligned`` (a match of the plain iteration elsewhere than right after a global
    collective lies inside another cycle) applies to an iteration that ends with a
    collective of every rank at every P (level 2, the cut's own), and a match right after
    a collective of every rank of this run (level 1: the same calls on a split that
    holds them all, as Quantum ESPRESSO's ranks outside its diagonalisation group make
    them) is one: it was dropped, and the loop of 1,569 iterations kept 10."""
    from signature.iterations import _aligned
    # Barrier, Bcast on world (level 2), then the same calls on a split of every rank
    anchor = np.array([2, 2, 2, 2, 1, 1, 1, 1, 0, 1, 1], np.int8)
    occ = np.array([0, 2, 4, 6, 9])
    assert _aligned(occ, anchor, 0, 2).tolist() == [0, 2, 4, 6]
    # an iteration that ends with a level-1 collective was not cut there: every match stays
    assert _aligned(occ, anchor, 4, 2).tolist() == occ.tolist()
