"""Rank classes with rules of their own (logical_model.rules, model._groups): every m-th
rank and its complement, the j-th rank of a block, a rule only a class follows, the
communicators of a split into a class and the others, and work groups by class."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logical_model.model import _groups
from logical_model.rules import (ClassComm, Observation, PeerRule, infer_class_comm, infer_members, infer_peer,
                                 infer_within)

FIT = (4, 8, 16)


def test_every_mth_rank_and_the_others_are_classes():
    """PME ranks (r mod 4 = 3) and the particle ranks (all the others) are found from the fit P."""
    pme = {P: np.arange(3, P, 4) for P in FIT}
    rule = infer_members(pme)
    assert rule.describe() == "ranks r with r mod 4 = 3"
    rest = infer_members({P: np.setdiff1d(np.arange(P), pme[P]) for P in FIT})
    assert rest.describe() == "ranks r with r mod 4 != 3"
    np.testing.assert_array_equal(np.flatnonzero(rest(np.arange(32), 32) >= 0) % 4 != 3, True)


def test_a_particle_rank_sends_to_the_pme_rank_of_its_block():
    """peer = the 4th rank of the block of 4, absent on that rank itself."""
    obs = [Observation(P, np.setdiff1d(np.arange(P), np.arange(3, P, 4)),
                       (np.setdiff1d(np.arange(P), np.arange(3, P, 4)) // 4) * 4 + 3) for P in FIT]
    rule = infer_peer(obs)
    assert rule.family == "block" and rule.params == {"m": 4, "j": 3}
    np.testing.assert_array_equal(rule(np.arange(8), 8), [3, 3, 3, -1, 7, 7, 7, -1])


def test_a_rule_only_a_class_follows():
    """The ranks a coarse multigrid level keeps (r mod 4 = 0) exchange with the rank 4 above."""
    members = PeerRule("member", {"kind": "mod", "m": 4, "j": 0})
    obs = []
    for P in FIT:
        r = np.arange(0, P, 4)
        r = r[r + 4 < P]
        obs.append(Observation(P, r, r + 4))
    assert infer_peer(obs) is None  # no rule of every rank gives these
    rule = infer_within(obs, members)
    assert rule is not None and rule.family == "within"
    np.testing.assert_array_equal(rule(np.arange(24), 24)[:9], [4, -1, -1, -1, 8, -1, -1, -1, 12])
    assert PeerRule.from_dict(rule.to_dict())(np.arange(24), 24).tolist() == rule(np.arange(24), 24).tolist()


def test_the_communicators_of_a_class_split():
    """Comm_split(colour = r mod 4 == 3, key = r): one rank at P=4, every 4th later; layout
    and world ranks round trip, the split survives JSON."""
    observed = {P: [np.arange(3, P, 4)] for P in FIT}
    cc = infer_class_comm(observed)
    assert isinstance(cc, ClassComm)
    colour, local, size = cc.layout(np.arange(32), 32)
    assert colour.tolist()[:8] == [0, 0, 0, 1, 0, 0, 0, 1] and size[3] == 8 and size[0] == 24
    np.testing.assert_array_equal(cc.world(colour, local, 32), np.arange(32))
    assert ClassComm.from_dict(cc.to_dict()) == cc and hash(ClassComm.from_dict(cc.to_dict())) == hash(cc)
    # the particle ranks' communicator alone is the same split
    assert infer_class_comm({P: [np.setdiff1d(np.arange(P), np.arange(3, P, 4))] for P in FIT}) == cc
    assert infer_class_comm({P: [np.arange(0, P, 2)] for P in FIT}) != cc


@pytest.mark.parametrize("noise", [0.0, 0.01])
def test_work_groups_by_class(noise):
    """Ranks that work at 1, 2 or 3 levels of a multigrid (r odd, r mod 4 = 2, r mod 4 = 0)
    form three work groups whose totals are constant (Eq. 2), within 5% noise."""
    rng = np.random.default_rng(1)
    per_p, weights = {}, {P: 10 for P in FIT}
    for P in FIT:
        r = np.arange(P)
        levels = np.where(r % 2 == 1, 1, np.where(r % 4 == 2, 2, 3))
        per_p[P] = 4096.0 / P * levels * (1 + noise * rng.random(P))
    groups, note = _groups(per_p, weights)
    assert note is None and len(groups) == 3
    assert [g.members.describe() if g.members else None for g in groups] == [
        "ranks r with r mod 4 = 2", "ranks r with r mod 4 = 0", None]
    assert all(g.spread < 0.05 for g in groups)


def test_work_that_follows_no_class_is_one_group():
    """Work levels that no class of ranks gives at every P stay one group, with a note."""
    per_p = {P: np.where(np.arange(P) < (3 if P == 4 else 5), 2.0, 1.0) for P in FIT}
    groups, note = _groups(per_p, {P: 1 for P in FIT})
    assert len(groups) == 1 and "no rule" in note


@settings(max_examples=40, deadline=None)
@given(lone=st.sampled_from(["first", "second", "last"]), seed=st.integers(0, 2**16),
       idle=st.floats(1e-6, 1e-4))
def test_a_lone_rank_that_works_while_the_others_wait(lone, seed, idle):
    """One rank computes (an owner, then broadcasting) while the others do next to nothing:
    their own figures differ by far more than 5% of their tiny median, which must not hide
    that one rank works apart. It is a group of its own, by a rule of P; the rest another."""
    rng = np.random.default_rng(seed)
    where = {"first": lambda P: 0, "second": lambda P: 1, "last": lambda P: P - 1}[lone]
    per_p = {}
    for P in FIT:
        w = idle * (0.5 + rng.random(P))
        w[where(P)] = 1e-2 * (1 + 0.02 * rng.random())
        per_p[P] = w
    groups, note = _groups(per_p, {P: 10 for P in FIT})
    assert note is None and len(groups) == 2, note
    assert [int(groups[0].members._k(P)) for P in FIT] == [where(P) for P in FIT]
    assert groups[1].members is None


def test_ranks_that_all_work_but_differ_are_not_a_lone_rank():
    """Every rank works, unevenly (no rule): not a lone rank apart, one group with a note."""
    rng = np.random.default_rng(7)
    per_p = {P: 1.0 + rng.random(P) for P in FIT}
    groups, note = _groups(per_p, {P: 1 for P in FIT})
    assert len(groups) == 1 and "no rule" in note


def test_ranks_with_no_call_in_a_phase_do_none_of_its_work():
    """Ranks 0 and 1 exchange while every other rank has no call in the phase (a pair
    benchmark, a single-rank test): the signature has no work of the idle ranks there
    (NaN), since their time until their next call is that call's. The phase is placed, the
    idle ranks given no work (the pair is a class, the first 2 ranks), and the work the
    pair did is kept."""
    import numpy as np

    from conftest import one_phase_signature
    from logical_model import build
    from signature import OP_CODE
    sigs = []
    for P in (4, 8, 16):
        counts = np.array([1, 1] + [0] * (P - 2))
        T = {"op": np.full(2, OP_CODE["Sendrecv"]), "peer": np.array([1, 0]), "recv_peer": np.array([1, 0]),
             "root": np.full(2, -1), "bytes": np.full(2, 64), "recv_bytes": np.full(2, 64), "comm": np.zeros(2, np.int64),
             "tag": np.zeros(2, np.int64)}
        sig = one_phase_signature(P, T, counts, ("Sendrecv",), "pair")
        for key in ("cpu_mean", "comp_mean"):
            sig.phases[0].stats[key][2:] = np.nan
        sigs.append(sig)
    model = build(sigs)
    ph = model.phases[0]
    assert ph.extrapolable, ph.problems
    ev = model.events(32)
    assert sorted(set(ev["rank"].tolist())) == [0, 1]
    work = ph.work_per_rank(32)
    assert np.all(work[2:] == 0) and np.all(work[:2] > 0)
    assert work[:2] == pytest.approx([1e-3, 1e-3], rel=1e-6)  # each busy rank's, per repetition
