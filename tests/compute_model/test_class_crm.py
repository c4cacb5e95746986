"""A CRM per rank class (issue #25, Eq. 1-3 per class): where a phase's ranks fall in two
classes that compute apart (GROMACS's PME ranks, every 4th, against its particle ranks),
each class's computation per repetition is fitted over P on its own and the phase's is
their mean by the classes' sizes at P; the physical trace gives each rank its class's.
Measured on GROMACS (bench/validate_apps.py --part predict): computation at P = 32 from
P = 4, 8, 16 -2.8% against +28.4% with one CRM over the ranks' mean."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compute_model import build
from compute_model.crm import ClassMix, fit_class_crm
from conftest import needs_mpi, trace_c_program
from logical_model import from_traces
from logical_model.rules import PeerRule
from signature import load_trace

PME = PeerRule("member", {"kind": "mod", "m": 4, "j": 3})


def _per_rank(P: int, pme: float, particle: float) -> np.ndarray:
    return np.where(np.arange(P) % 4 == 3, pme, particle)


EXPONENTS = (0.0, -1 / 4, -1 / 3, -1 / 2, -2 / 3, -3 / 4, -1.0)  # (among the model search's)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.5, 50), st.sampled_from(EXPONENTS[1:]), st.floats(0.5, 50), st.sampled_from(EXPONENTS))
def test_two_classes_that_scale_apart_are_each_recovered(a, ea, b, eb):
    """Each class c * P^e, fitted on P = 8, 16, 32, 64: the mean at P = 256 is the classes'
    mean by size, every rank its class's."""
    Ps = [8, 16, 32, 64]
    per_rank = [_per_rank(P, a * P ** ea, b * P ** eb) for P in Ps]
    if all(abs(x.max() - x.min()) <= 0.25 * x.max() for x in per_rank):
        assert fit_class_crm(0, Ps, per_rank, PME) is None
        return
    crm = fit_class_crm(0, Ps, per_rank, PME)
    assert isinstance(crm.model, ClassMix)
    want = _per_rank(256, a * 256 ** ea, b * 256 ** eb)
    np.testing.assert_allclose(crm.model.per_rank(256), want, rtol=0.02)
    np.testing.assert_allclose(crm.predict(256), want.mean(), rtol=0.02)


def test_a_class_of_one_rank_is_left_out_of_its_fit_where_it_has_more_elsewhere():
    """GROMACS's neighbour-search step: its single PME rank at P = 4 spends 0.95 ms where
    two and four PME ranks spend 67 and 49 ms: the PME model is fitted at P = 8 and 16."""
    Ps = [4, 8, 16]
    per_rank = [_per_rank(4, 0.95e-3, 8.6e-3), _per_rank(8, 67.2e-3, 5.65e-3), _per_rank(16, 48.5e-3, 2.9e-3)]
    crm = fit_class_crm(3, Ps, per_rank, PME)
    assert crm.model.left_out == ((), (4,))
    assert [p for p, _ in crm.model.models[1].points] == [8.0, 16.0]
    pme = crm.model.per_rank(32)[3]
    assert 30e-3 < pme < 45e-3, pme  # the real run: 37.2 ms
    assert "left out" in crm.describe() and "ranks r with r mod 4 = 3" in crm.describe()
    assert crm.model.to_dict()["kind"] == "class_mix"


def test_classes_that_compute_alike_keep_one_crm():
    Ps = [4, 8, 16]
    assert fit_class_crm(0, Ps, [_per_rank(P, 1.1 / P, 1.0 / P) for P in Ps], PME) is None
    # a class empty at some P says nothing of its work
    every8 = PeerRule("member", {"kind": "mod", "m": 8, "j": 7})
    assert fit_class_crm(0, Ps, [_per_rank(P, 5.0 / P, 1.0 / P) for P in Ps], every8) is None


@pytest.fixture(scope="module")
def ddgrid(tmp_path_factory):
    programs = Path(__file__).resolve().parents[1] / "logical_model" / "programs"
    return trace_c_program(tmp_path_factory.mktemp("ddgrid_crm"), programs / "ddgrid.c", ["6"], (4, 8, 16), 32)


@needs_mpi
def test_the_physical_trace_gives_each_rank_its_class_computation(ddgrid, tmp_path):
    """ddgrid's loop phase (its PME ranks a class of the logical model) with a CRM per class
    set by hand: every burst of a PME rank at P = 32 carries the PME share of its rank's
    computation, every particle rank's the particle share."""
    from compute_model.crm import CRM
    from logical_model.modelsearch import fit
    logical = from_traces(ddgrid).with_grid(32, (4, 6, 1))
    sigs = [__import__("signature").extract(load_trace(ddgrid / f"P{P}.h5")) for P in (4, 8, 16)]
    cm = build(logical, sigs)
    k = next(i for i, ph in enumerate(logical.phases) if ph.kind == "loop")
    models = (fit([4, 8, 16], [4e-3 / 4, 4e-3 / 8, 4e-3 / 16]), fit([4, 8, 16], [9e-3, 9e-3, 9e-3]))
    mix = ClassMix(PME, models)
    crms = list(cm.crms)
    crms[k] = CRM(phase=k, base=mix, with_distant=None, distant=None, skipped="set by hand")
    cm = dataclasses.replace(cm, crms=crms)
    assert cm.computation(32)[k] == pytest.approx((24 * 4e-3 / 32 + 8 * 9e-3) / 32)
    t = load_trace(cm.physical_trace(32, tmp_path / "P32.h5"))
    ev = t.events
    mine = ev["phase"] == k
    per_rank = np.bincount(ev["rank"][mine], weights=ev["t_comp"][mine], minlength=32)
    np.testing.assert_allclose(per_rank[np.arange(32) % 4 == 3], 9e-3, rtol=1e-9)
    np.testing.assert_allclose(per_rank[np.arange(32) % 4 != 3], 4e-3 / 32, rtol=1e-9)
