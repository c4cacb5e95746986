"""The compute model on the paper's numbers (counters mode) and on declared work (CPU-time mode)."""

from __future__ import annotations

import numpy as np
import pytest

from compute_model.crm import (accepted_p, build_ipt, distant_point_counters, distant_point_declared,
                               fit_crm, select_small_run, work_function)
from signature.errors import ExtrapolationError

# Panadero et al., Table 1 (BT class D, phase 1): instructions per process, P, weight.
TABLE1 = np.array([
    (1539358893, 16, 1255), (820993294, 25, 1506), (488835328, 36, 1757), (314154733, 49, 2008),
    (213799791, 64, 2259), (152035493, 81, 2510), (111953973, 100, 2761)], float)
# Table 2 (BT class B signature runs): P, instructions, cycles, computation time (ns).
TABLE2 = np.array([
    (16, 34356426, 27621512, 17263445), (25, 17836224, 14324977, 8953111),
    (36, 9915863, 7861580, 4913488), (64, 4027761, 3104163, 1940102),
    (81, 2392021, 1721033, 1075646), (100, 1759558, 1265527, 790954)], float)


def bt_ipt():
    I, P, W = TABLE1.T
    return build_ipt(P, I, W, phase=1, mode="counters", p_rule="squares")


def test_bt_ipt_reproduces_table1():
    """Weight 251 x + 502 on the displacement; 1,744,266 +-1% instructions per process at 1681."""
    ipt = bt_ipt()
    assert ipt.constant and ipt.spread < 0.001
    row = ipt.predicted_rows([1681])[0]
    assert row.weight == 10542 and row.displacement == 40
    assert row.work == pytest.approx(1_744_266, rel=0.01)
    text = ipt.table([121, 144, 1600, 1681])
    assert "measured values" in text and "predicted values" in text and "1681" in text


def test_bt_distant_point_selects_1681_with_087_percent():
    """Table 2's minimum CPI (81 and 100 processes) picks the 100-process run, whose
    1,759,558 instructions are nearest the IPT row of P = 1681, 0.87% apart."""
    P, instr, cyc, t = TABLE2.T
    # Table 2 rounds the CPI (0.719 at 81 and 100); the counts give 0.7195 and 0.7192
    dp = distant_point_counters(bt_ipt(), P.astype(int), instr, cyc, t * 1e-9, P_max=4096)
    assert dp.P_small == 100 and dp.P_emulated == 1681
    assert dp.difference == pytest.approx(0.0087, abs=0.0005)
    assert dp.time == pytest.approx(790954e-9)


def test_plateau_ties_go_to_the_largest_p():
    """Equal metrics within 1% pick the larger P; a later rise does not move the choice."""
    assert select_small_run([16, 25, 36, 64], [0.80, 0.80, 0.72, 0.721]) == 3
    assert select_small_run([16, 25, 36, 64], [0.80, 0.75, 0.72, 0.90]) == 2


def test_crm_refit_with_the_distant_point():
    """A noisy CRM from small P is pulled toward the truth by one far point."""
    P = np.array([4, 8, 16])
    truth = lambda p: 2.0 / p + 0.01  # noqa: E731
    t = truth(P) * np.array([1.0, 1.04, 0.97])
    # small workload n=128 at P=2..16: declared work n*n/P per process; CPU time per unit
    # of work falls (cache) until P=8 and stays; the P=16 run equals the original at 4096
    Ps = np.array([2, 4, 8, 16])
    dw = 128 * 128 / Ps
    rate = truth(4096) / 1024 * np.array([1.3, 1.1, 1.0, 1.0])
    dp = distant_point_declared(Ps, rate * dw, work=work_function("n*n/P", "n"), small=128,
                                original=2048, p_rule="powers_of_two", P_max=65536)
    assert dp.P_small == 16 and dp.P_emulated == 4096
    crm = fit_crm(1, P, t, dp)
    far = 4096
    assert abs(crm.model.predict(far) / truth(far) - 1) < abs(crm.base.predict(far) / truth(far) - 1)
    assert "with the distant point" in crm.describe()


def test_distant_point_at_a_signature_p_adds_nothing():
    """A distant point that lands on a traced P is dropped, with the reason."""
    from compute_model.crm import DistantPoint
    dp = DistantPoint(8, 1.0, "CPI", 1.0, 0.1, 8, 0.0, "x")
    crm = fit_crm(0, [4, 8, 16], [1.0, 0.5, 0.25], dp)
    assert crm.with_distant is None and "adds nothing" in crm.skipped


def test_non_constant_totals_skip_the_distant_point():
    """A phase whose total work is not constant is flagged and refuses the distant point."""
    ipt = build_ipt([4, 8, 16], [100.0, 60.0, 40.0], [10, 10, 10], mode="counters")
    assert not ipt.constant
    with pytest.raises(ExtrapolationError, match="does not apply"):
        distant_point_counters(ipt, [4, 8], [10, 5], [10, 5], [1, 1], P_max=1024)


@pytest.mark.parametrize("expr, match", [
    ("n*n/P + __import__('os')", "not allowed"),
    ("m*m/P", "not allowed"),
    ("n*n/", "not valid"),
])
def test_bad_work_expressions_are_named(expr, match):
    """Declared-work expressions are parsed safely; a bad one is refused with its text."""
    with pytest.raises(ExtrapolationError, match=match):
        work_function(expr, "n")


def test_work_function_and_p_rules():
    """n*n/P evaluates, and P rules list what the application accepts."""
    f = work_function("n*n/P", "n")
    assert f(2048, 4) == 2048 * 2048 / 4
    assert accepted_p("squares", 10, 50).tolist() == [16, 25, 36, 49]
    assert accepted_p("powers_of_two", 3, 40).tolist() == [4, 8, 16, 32]
    assert accepted_p("cubes", 1, 30).tolist() == [1, 8, 27]
    with pytest.raises(ExtrapolationError, match="unknown P rule"):
        accepted_p("primes", 1, 10)
