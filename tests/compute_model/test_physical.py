"""The compute model on the bundled traces and the physical trace file."""

from __future__ import annotations

import numpy as np
import pytest

import signature
from compute_model import build
from conftest import TRACES
from logical_model import from_traces
from signature import load_trace
from signature.errors import ExtrapolationError


@pytest.fixture(scope="module")
def fft():
    lm = from_traces(TRACES / "fft2d")
    sigs = [signature.extract(load_trace(TRACES / "fft2d" / f"P{p}.h5")) for p in (4, 8, 16)]
    small = [signature.extract(load_trace(TRACES / "fft2d" / "small" / f"P{p}.h5")) for p in (4, 8, 16)]
    return lm, sigs, small


def test_crm_fits_every_phase_and_reports_distant_point(fft):
    """Each phase gets a CRM with fit statistics; loop phases get a distant point or a reason."""
    lm, sigs, small = fft
    cm = build(lm, sigs, small=small, work="n*n/P", p_rule="powers_of_two")
    assert len(cm.crms) == len(lm.phases)
    for crm, ph in zip(cm.crms, lm.phases):
        assert "LOO error" in crm.base.describe()
        assert crm.distant is not None or crm.skipped
        if ph.kind != "loop":
            assert crm.skipped == "not a repeated phase"
    assert np.all(cm.computation(4096) >= 0)


def test_physical_trace_carries_predicted_computation(fft, tmp_path):
    """The physical trace is the logical trace plus t_comp whose per-phase mean per rank and
    repetition is the CRM's prediction."""
    lm, sigs, small = fft
    cm = build(lm, sigs, small=small, work="n*n/P", p_rule="powers_of_two")
    path = cm.physical_trace(256, tmp_path / "fft-256.h5")
    t = load_trace(path)
    assert t.meta["trace_kind"] == "physical" and "t_comp" in t.events
    comp = cm.computation(256)
    per_phase = np.bincount(t.events["phase"], weights=t.events["t_comp"]) / 256
    np.testing.assert_allclose(per_phase, comp, rtol=1e-9)


def test_cpu_time_distant_point_needs_declared_work(fft):
    """Without `work = ...` the CPU-time distant point is refused with what to add."""
    lm, sigs, small = fft
    with pytest.raises(ExtrapolationError, match="declared work per process"):
        build(lm, sigs, small=small)


def test_signatures_must_match_the_logical_model(fft):
    """Signatures other than the model's are refused, naming both P sets."""
    lm, sigs, _ = fft
    with pytest.raises(ExtrapolationError, match="not the ones"):
        build(lm, sigs[:2])


def test_a_rank_that_sits_a_phase_out_does_not_void_its_computation():
    """Ranks without a phase's events (hpcc's in some kernels) have no figure there (NaN);
    the phase's computation per process is the mean over the ranks that have it."""
    from compute_model.physical import _rank_mean
    assert _rank_mean([1.0, float("nan"), 3.0]) == 2.0
    assert np.isnan(_rank_mean([float("nan"), float("nan")]))
