"""Relating phases across P when the runs do not share one phase list: the phases every
run has are modelled as before, each other phase is left out with its share of every
measured run, and runs without a common loop phase are refused."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import signature
from conftest import TRACES
from logical_model import ModelError, build
from logical_model.correspond import _lcs, align_to, correspond
from signature import load_trace


@pytest.fixture(scope="module")
def stencil():
    return [signature.extract(load_trace(TRACES / "stencil" / f"P{P}.h5")) for P in (4, 8, 16)]


def _with_phases(sig, phases):
    return dataclasses.replace(sig, phases=tuple(phases))


def test_runs_that_correspond_come_back_unchanged(stencil):
    out, left = correspond(stencil)
    assert left == [] and [s.phases for s in out] == [s.phases for s in stencil]


def test_a_phase_one_run_adds_is_left_out_with_its_share(stencil):
    s4, s8, s16 = stencil
    extra = dataclasses.replace(s8.phases[2], kind="loop", ops=("Barrier",), pattern="Barrier", share=0.05)
    s8x = _with_phases(s8, [s8.phases[0], extra, *s8.phases[1:]])
    out, left = correspond([s16, s8x, s4])  # any order: sorted by P
    assert [s.nprocs for s in out] == [4, 8, 16]
    assert [[p.ops for p in s.phases] for s in out] == [[p.ops for p in s4.phases]] * 3
    assert [p.id for p in out[1].phases] == [0, 1, 2, 3]  # renumbered to the smallest P's ids
    (d,) = left
    assert d["id"] is None and d["pattern"] == "Barrier" and d["measured_share"] == {4: 0.0, 8: 0.05, 16: 0.0}
    assert "phase 1 at P=8; none at P=4, 16" in d["problem"]

    model = build(out)
    whole = build(stencil)
    assert [p.describe() for ph in model.phases for p in ph.slots] == \
        [p.describe() for ph in whole.phases for p in ph.slots]
    # build() relates the runs itself
    direct = build([s4, s8x, s16])
    assert len(direct.phases) == 4 and [d["pattern"] for d in direct.left_out] == ["Barrier"]


def test_a_phase_one_run_lacks_is_left_out_and_named_by_its_id(stencil):
    s4, s8, s16 = stencil
    s16x = _with_phases(s16, s16.phases[:3])  # the final phase is gone at P=16
    model = build([s4, s8, s16x])
    assert [ph.id for ph in model.phases] == [0, 1, 2]
    (d,) = model.left_out
    assert d["id"] == 3 and d["kind"] == "final"
    assert d["measured_share"] == {4: s4.phases[3].share, 8: s8.phases[3].share, 16: 0.0}
    again = type(model).from_dict(model.to_dict())
    assert again.left_out == model.left_out


def test_runs_without_a_common_loop_are_refused(stencil):
    s4, s8, s16 = stencil
    s8x = _with_phases(s8, [s8.phases[0], s8.phases[3]])
    with pytest.raises(ModelError, match="no loop phase is common to every run: phase 1 is 'loop Irecv"):
        build([s4, s8x, s16])


def test_small_runs_are_aligned_to_the_signature_runs(stencil):
    s4, s8, _ = stencil
    extra = dataclasses.replace(s8.phases[1], ops=("Barrier",), pattern="Barrier")
    small = _with_phases(s8, [*s8.phases[:2], extra, *s8.phases[2:]])
    got = align_to(s4, small)
    assert [p.ops for p in got.phases] == [p.ops for p in s4.phases] and [p.id for p in got.phases] == [0, 1, 2, 3]
    assert align_to(s4, _with_phases(s8, s8.phases[:2])) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=7), st.lists(st.integers(0, 3), max_size=7))
def test_lcs_is_a_longest_common_subsequence(a, b):
    pairs = _lcs(a, b)
    assert all(a[i] == b[j] for i, j in pairs)
    assert all(i1 < i2 and j1 < j2 for (i1, j1), (i2, j2) in zip(pairs, pairs[1:]))
    best = 0
    for n in range(min(len(a), len(b)), 0, -1):  # brute force on the short lists
        if any(list(c) == [b[j] for j in d] for c in itertools.combinations(a, n)
               for d in itertools.combinations(range(len(b)), n)):
            best = n
            break
    assert len(pairs) == best


def test_a_phase_out_of_place_is_named_as_such(stencil):
    """Every run has the phase, but one has it elsewhere among the common phases: only one
    of the two swapped phases can be kept in order, and the other is named as out of place."""
    s4, s8, s16 = stencil
    s8x = _with_phases(s8, [s8.phases[0], s8.phases[2], s8.phases[1], s8.phases[3]])
    out, left = correspond([s4, s8x, s16])
    assert len(out[0].phases) == 3 and len(left) == 1
    assert left[0]["problem"].startswith("it comes in another place among the common phases")
    assert set(left[0]["measured_share"]) == {4, 8, 16} and min(left[0]["measured_share"].values()) > 0
