"""Property-based tests of the compute model's pieces: the P rules, the IPT (Eq. 2-3), the choice
of the small-workload run and the distant point's emulated P."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from compute_model.crm import accepted_p, build_ipt, distant_point_declared, select_small_run

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)
RULES = {"squares": lambda p: math.isqrt(p) ** 2 == p,
         "cubes": lambda p: round(p ** (1 / 3)) ** 3 == p,
         "powers_of_two": lambda p: p & (p - 1) == 0,
         "any": lambda p: True}


@SETTINGS
@given(rule=st.sampled_from(sorted(RULES)), lo=st.integers(1, 3000), span=st.integers(0, 3000))
def test_accepted_p_is_exactly_the_rule_between_the_bounds(rule, lo, span):
    """accepted_p(rule, lo, hi) lists every P in [lo, hi] the rule accepts, in order, and no other."""
    hi = lo + span
    got = accepted_p(rule, lo, hi).tolist()
    assert got == [p for p in range(lo, hi + 1) if RULES[rule](p)]


@SETTINGS
@given(total=st.floats(1e3, 1e12), w0=st.integers(1, 500), slope=st.integers(0, 50),
       Ps=st.lists(st.integers(2, 256), min_size=3, max_size=6, unique=True).map(sorted),
       unseen=st.lists(st.integers(1, 100_000), min_size=1, max_size=5))
def test_ipt_holds_a_constant_total_and_redistributes_it(total, w0, slope, Ps, unseen):
    """Work per process measured under strong scaling (total / (weight P), weight linear in P)
    gives a constant IPT (spread ~0), and its predicted rows give the total back at any P (Eq. 3:
    work x weight x P = total)."""
    P = np.array(Ps)
    weight = w0 + slope * P
    work = total / (weight * P)
    ipt = build_ipt(P, work, weight, mode="counters")
    assert ipt.constant and ipt.spread < 1e-9 and ipt.total == pytest.approx(total, rel=1e-12)
    for row in ipt.predicted_rows(unseen):
        assert row.total == pytest.approx(total, rel=1e-9)
        assert row.work * row.weight * row.P == pytest.approx(total, rel=1e-9)
    assert np.allclose(ipt.predict_work(np.array(unseen)) * [r.weight for r in ipt.predicted_rows(unseen)]
                       * np.array(unseen), total, rtol=1e-9)


@SETTINGS
@given(metric=st.lists(st.floats(0.01, 100), min_size=1, max_size=8), tie=st.floats(0, 0.2))
def test_the_small_run_is_the_largest_p_within_the_tie_of_the_minimum(metric, tie):
    """select_small_run picks a run whose metric is within ``tie`` of the smallest, and of those the
    one at the largest P."""
    P = 2 ** np.arange(2, 2 + len(metric))
    i = select_small_run(P, metric, tie=tie)
    best = min(metric)
    assert metric[i] <= best * (1 + tie)
    assert all(P[j] <= P[i] for j in range(len(metric)) if metric[j] <= best * (1 + tie))


@SETTINGS
@given(small=st.integers(64, 1024), factor=st.integers(2, 16), times=st.lists(st.floats(0.1, 10), min_size=3,
                                                                             max_size=3),
       rule=st.sampled_from(["powers_of_two", "squares", "any"]))
def test_the_distant_point_emulates_the_p_of_equal_declared_work(small, factor, times, rule):
    """With declared work n*n/P, the emulated P is the accepted P whose original-workload work per
    process is nearest the chosen small run's, and the reported difference is that gap."""
    original = small * factor
    work = lambda n, p: n * n / p  # noqa: E731
    P = np.array([4, 8, 16])
    dp = distant_point_declared(P, times, work=work, small=small, original=original, p_rule=rule,
                                P_max=1 << 16)
    target = work(small, dp.P_small)
    cand = accepted_p(rule, 1, 1 << 16)
    gaps = np.abs(np.array([work(original, p) for p in cand]) - target)
    assert abs(work(original, dp.P_emulated) - target) == pytest.approx(gaps.min(), abs=1e-9 * target)
    assert dp.difference == pytest.approx(gaps.min() / target, rel=1e-9, abs=1e-12)
