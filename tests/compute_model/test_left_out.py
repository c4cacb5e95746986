"""What the phases a prediction leaves out would add at the target: their measured computation
(the slowest rank's, all repetitions) fitted over P like a CRM (compute_model.crm.left_out_computation)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from compute_model.crm import left_out_computation

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


def entry(phase, computation: dict, share: dict | None = None) -> dict:
    """A refused phase as sigex.pipeline.Models.refused holds it."""
    share = share if share is not None else {P: 0.1 if v > 0 else 0.0 for P, v in computation.items()}
    return {"phase": phase, "kind": "initial", "pattern": "Sendrecv", "problem": "-", "problems": ["-"],
            "measured_share": share, "measured_computation": computation}


@SETTINGS
@given(a=st.floats(1e-3, 1e3), b=st.floats(0, 10), e=st.sampled_from([-1.0, -0.75, -2 / 3, -0.5, -1 / 3, -0.25]),
       Ps=st.sampled_from([(4, 8, 16, 32), (2, 4, 8, 16), (8, 12, 16, 24)]),
       target=st.sampled_from([64, 100, 1024]))
def test_a_computation_on_a_pmnf_law_is_taken_at_the_target(a, b, e, Ps, target):
    """A left-out phase whose slowest rank computes a * P^e + b seconds at four traced P is given
    that law's value at an unseen P (exponents of the search's lattice for four points: computation
    per process does not fall faster than 1/P under strong scaling)."""
    law = {P: a * P ** e + b for P in Ps}
    got = left_out_computation([entry(0, law)], target)
    (f,) = got["phases"]
    assert f["phase"] == 0 and not got["without"]
    assert f["value"] == pytest.approx(a * target ** e + b, rel=1e-3, abs=1e-9)
    assert got["total"] == pytest.approx(f["value"])


def test_phases_some_run_lacks_get_no_figure_of_their_own_but_count_in_the_total():
    """Each phase every run has gets its own figure; the total fits what every run spent in all
    the left-out phases, those some runs lack included (their computation is 0 there)."""
    Ps = (4, 8, 16, 32)
    setup = entry(0, {P: 2.0 / P + 0.5 for P in Ps})
    output = entry(5, {P: 1.0 / P for P in Ps})
    only_small = entry(None, {4: 0.3, 8: 0.0, 16: 0.0, 32: 0.0})  # a phase the correspondence left out
    unplaced = entry(7, {4: 0.2, 8: float("nan"), 16: 0.1, 32: 0.1}, {4: 0.1, 8: float("nan"), 16: 0.1, 32: 0.1})
    got = left_out_computation([setup, output, only_small, unplaced], 64)
    assert [f["phase"] for f in got["phases"]] == [0, 5]
    assert got["without"] == [None, 7]
    assert got["phases"][0]["value"] == pytest.approx(2.0 / 64 + 0.5, rel=1e-6)
    assert got["phases"][1]["value"] == pytest.approx(1.0 / 64, rel=1e-6)
    assert all(math.isfinite(f["cv_error"]) for f in got["phases"])
    assert got["total"] > 0 and math.isfinite(got["cv_error"]) and "P" in got["formula"]
    # without the irregular two, the total is the sum of the laws: 3 / P + 0.5
    both = left_out_computation([setup, output], 64)
    assert both["total"] == pytest.approx(3.0 / 64 + 0.5, rel=1e-6)


def test_two_runs_are_too_few_and_no_computation_is_zero():
    two = left_out_computation([entry(1, {4: 1.0, 8: 0.5})], 64)
    assert two["without"] == [1] and two["total"] is None
    got = left_out_computation([entry(2, {4: 0.0, 8: 0.0, 16: 0.0}, {4: 0.01, 8: 0.01, 16: 0.01})], 64)
    assert got["phases"] == [{"phase": 2, "formula": "0", "value": 0.0, "cv_error": 0.0}] and got["total"] == 0.0


def test_runs_that_lack_every_left_out_phase_are_not_fitted_as_zero():
    """Phases the smallest run does not have yet (MPB's at P = 2) are fitted on the runs that
    have them: with three of those their law is found, with two there is no figure (before, the
    lacking run's 0 pulled the fit to 0 at every P)."""
    late = entry(None, {2: 0.0, 4: 1.0 / 4 + 0.1, 8: 1.0 / 8 + 0.1, 16: 1.0 / 16 + 0.1},
                 {2: 0.0, 4: 0.06, 8: 0.06, 16: 0.06})
    assert left_out_computation([late], 64)["total"] == pytest.approx(1.0 / 64 + 0.1, rel=1e-6)
    two = entry(None, {2: 0.0, 4: 0.02, 8: 0.015}, {2: 0.0, 4: 0.06, 8: 0.06})
    assert left_out_computation([two], 16)["total"] is None
