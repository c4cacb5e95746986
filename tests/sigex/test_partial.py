"""Predictions that leave out the phases sigex cannot place at the target: a real program
whose set-up sends blocks of sizes that follow no rule over the ranks, traced at P = 4, 8,
16 and predicted at 64.
The loop and final phases are predicted, exactly as the whole model would place them; the
set-up is named with the share of the measured runs it held; ``--strict`` refuses instead;
a phase list and its left-out phases travel in the written traces."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, needs_mpi
from signature import load_trace, trace_run
from signature.errors import ExtrapolationError
from sigex.cli import main
from sigex.pipeline import load_models, predict, scaling

pytestmark = needs_mpi
PROGRAM = Path(__file__).parent / "programs" / "setup_ragged.c"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("partial")
    exe = root / "setup_ragged"
    subprocess.run([os.environ.get("SIGEX_MPICC") or "mpicc", "-O1", "-o", str(exe), str(PROGRAM)], check=True)
    for P in (4, 8, 16):
        res = trace_run([str(exe), "4000000", "12"], P, root / "traces" / f"P{P}.h5")
        assert res.ok, res.trace.meta.get("incomplete_reason")
    return root / "traces"


@pytest.fixture(scope="module")
def models(folder):
    return load_models(folder)


def test_the_placeable_phases_are_predicted_and_the_others_named(models):
    keep, why = models.logical.placeable([64])
    assert keep == [1, 2] and list(why) == [0]
    assert any("bytes differ between ranks" in p and "no rule gives each rank" in p for p in why[0])
    pred = predict(models, 64, "cluster-a")
    assert [p["phase"] for p in pred.phases] == [1, 2] and pred.runtime > 0
    (r,) = pred.refused
    assert r["phase"] == 0 and r["kind"] == "initial" and "Sendrecv" in r["pattern"]
    measured = {s.nprocs: s.phases[0].share for s in models.compute.signatures}
    assert r["measured_share"] == pytest.approx(measured) and all(v > 0 for v in measured.values())
    text = pred.report()
    assert "NOT PREDICTED: 1 phase" in text and "phase 0 (initial" in text
    assert f"{100 * measured[16]:.1f}% (P=16)" in text
    assert pred.warnings[0].startswith("1 phase(s) not predicted (phase 0)")
    # the model itself is untouched: the caller's Models still hold every phase
    assert len(models.logical.phases) == 3 and not models.refused


def test_the_left_out_phases_computation_is_fitted_over_p_and_reported(models):
    """The set-up's computation (the first step's n/P loop follows its Sendrecv) is measured at
    every traced P, fitted over P and taken at the target, and the report adds it to the
    predicted runtime, saying that their communication is not in it."""
    pred = predict(models, 64, "cluster-a")
    (r,) = pred.refused
    mode = models.logical.work_mode
    measured = {s.nprocs: s.phases[0].computation(mode) for s in models.compute.signatures}
    assert r["measured_computation"] == pytest.approx(measured) and all(v > 0 for v in measured.values())
    (f,) = pred.left_out["phases"]
    assert f["phase"] == 0 and not pred.left_out["without"] and pred.left_out["total"] == f["value"]
    # the model search's law of the measured points, taken at 64 (no wild extrapolation: the
    # set-up computes the first step's n/P loop; its times are noisy on a loaded machine, so
    # the law, not a ratio to the time loop's, is what is checked)
    from logical_model import modelsearch
    Ps = sorted(measured)
    law = modelsearch.fit(Ps, [measured[p] for p in Ps], positive=True)
    assert f["value"] == pytest.approx(max(0.0, float(np.asarray(law.predict(64)).reshape(-1)[0])), rel=1e-9)
    assert 0 < f["value"] <= 2 * max(measured.values())
    text = pred.report()
    assert f"its computation {f['value']:.4g} s at P=64" in text
    assert f"fitted over P: {f['formula']}) would add {f['value']:.4g} s at P=64: " \
        f"{pred.runtime + f['value']:.4g} s with the predicted runtime" in text
    assert "their communication is not predicted" in text
    assert pred.warnings[0].endswith(f"(their computation alone would add {f['value']:.4g} s at P=64)")
    assert json.loads(json.dumps(pred.to_dict()))["left_out"]["phases"][0]["phase"] == 0


def test_strict_refuses_and_names_the_phase(models):
    with pytest.raises(ExtrapolationError, match=r"phase 0: slot 1 \(Sendrecv\): bytes differ between ranks"):
        predict(models, 64, "cluster-a", strict=True)


def test_a_subset_places_its_phases_exactly_as_the_whole_model(models):
    """Leaving phases out changes nothing in the others: the same events, weights and work."""
    sub = models.restricted([64])
    for k_sub, k in enumerate([1, 2]):
        a, b = sub.logical.phase_events(k_sub, 64), models.logical.phase_events(k, 64)
        assert a.keys() == b.keys() and all(np.array_equal(a[c], b[c]) for c in a if c != "phase")
        assert (a["phase"] == k_sub).all() and (b["phase"] == k).all()  # the position in its model
        assert np.array_equal(sub.logical.phases[k_sub].work_per_rank(64), models.logical.phases[k].work_per_rank(64))
    assert sub.logical.weights(64) == models.logical.weights(64)[1:]
    assert np.allclose(sub.compute.computation(64), models.compute.computation(64)[1:])
    assert [d["id"] for d in sub.logical.left_out] == [0]
    assert sub.restricted([64]) is sub  # nothing more to leave out


def test_scaling_keeps_the_same_phases_at_every_p(models):
    curve = scaling(models, [32, 64, 128], "cluster-a")
    assert curve.phase_ids == [1, 2] and all(len(r["phases"]) == 2 for r in curve.rows)
    assert curve.csv().splitlines()[0].endswith("phase1_s,phase2_s,left_out_computation_s")
    assert [r["phase"] for r in curve.refused] == [0] and "NOT PREDICTED" in curve.report()
    # each point says what the set-up left out computes there, as predict does at that P
    for r in curve.rows:
        assert r["left_out"] == pytest.approx(predict(models, r["P"], "cluster-a").left_out["total"])
        assert curve.csv().splitlines()[1 + curve.rows.index(r)].endswith(f",{r['left_out']:.6g}")
    assert "left out: computation (s)" in curve.report()
    # and compare-machines, once for every machine (a computation, not a machine's time)
    from sigex.pipeline import compare_machines, machines_table
    preds = compare_machines(models, 64, ["cluster-a", "cluster-b"])
    text = machines_table(preds)
    assert f"would add {preds[0].left_out['total']:.4g} s at P=64;" in text and text.count("would add") == 1


def test_no_phase_placeable_is_a_refusal(models):
    logical = dataclasses.replace(models.logical, phases=[dataclasses.replace(ph, problems=["broken on purpose"])
                                                          for ph in models.logical.phases])
    m = dataclasses.replace(models, logical=logical, compute=dataclasses.replace(models.compute, logical=logical))
    with pytest.raises(ExtrapolationError, match="3 phase\\(s\\) not extrapolable") as err:
        predict(m, 64, "cluster-a")
    # what is left to say: the runs' computation, summed over their phases and fitted over P
    from compute_model.crm import left_out_computation
    every = [{"phase": ph.id, "measured_share": {s.nprocs: s.phases[k].share for s in models.compute.signatures},
              "measured_computation": {s.nprocs: s.phases[k].computation(models.logical.work_mode)
                                       for s in models.compute.signatures}}
             for k, ph in enumerate(models.logical.phases)]
    total = left_out_computation(every, 64)["total"]
    assert str(err.value).startswith(f"{models.app}: no phase can be placed at P=64; the runs' computation alone")
    assert total > 0 and f"would be {total:.4g} s there, their communication not predicted. " in str(err.value)


def test_cli_extrapolate_physical_and_predict(folder, tmp_path, capsys):
    """`sigex extrapolate`/`physical` write the placeable phases and say which they left out
    (in the terminal and in the trace's attributes); `--strict` writes nothing."""
    out = tmp_path / "su-64.h5"
    assert main(["extrapolate", str(folder), "--target", "64", "-o", str(out)]) == 0
    cap = capsys.readouterr()
    assert "phase 0 (initial; Init, Sendrecv) cannot be placed at P=64 and is left out" in cap.err
    assert "left out: phase 0" in cap.out
    t = load_trace(out)
    assert t.meta["phase_ids"] == [1, 2] and t.nprocs == 64
    assert [d["id"] for d in t.meta["phases_left_out"]] == [0]
    assert "bytes differ between ranks" in t.meta["phases_left_out"][0]["problem"]
    assert set(np.unique(t.events["phase"])) == {0, 1}  # positions in phase_ids

    strict = tmp_path / "strict.h5"
    assert main(["extrapolate", str(folder), "--target", "64", "-o", str(strict), "-q", "--strict"]) == 1
    assert "not extrapolable" in capsys.readouterr().err and not strict.exists()

    phys = tmp_path / "su-64.physical.h5"
    assert main(["physical", str(folder), "--target", "64", "-o", str(phys), "-q"]) == 0
    capsys.readouterr()
    assert load_trace(phys).meta["phase_ids"] == [1, 2]

    js = tmp_path / "p.json"
    assert main(["predict", str(folder), "--target", "64", "-q", "--json", str(js)]) == 0
    assert "NOT PREDICTED" in capsys.readouterr().out
    d = json.loads(js.read_text())
    assert [p["phase"] for p in d["phases"]] == [1, 2] and d["refused"][0]["phase"] == 0
    assert main(["predict", str(folder), "--target", "64", "-q", "--strict"]) == 1


def test_bundled_examples_lose_nothing(capsys):
    """Where every phase can be placed, nothing is left out and nothing is said about it."""
    m = load_models(ROOT / "examples" / "stencil.toml")
    assert m.restricted([4096]) is m
    pred = predict(m, 4096, "cluster-a")
    assert not pred.refused and "NOT PREDICTED" not in pred.report()


def test_a_grid_the_model_cannot_use_is_a_usage_error(folder, capsys):
    assert main(["predict", str(folder), "--target", "64", "--grid", "8x8", "-q"]) == 2
    assert "the model has no process grid" in capsys.readouterr().err
    assert main(["compare-machines", str(folder), "--target", "64", "--grid", "8x4", "--machine", "cluster-a",
                 "-q"]) == 2
    assert "has 32 processes, not the target's 64" in capsys.readouterr().err


def test_predict_takes_the_grid_at_the_target(tmp_path):
    """`--grid` on predict fixes the process grid at the target, as on extrapolate: a 2-D stencil
    on 16 x 256 ranks sends other halo sizes than on MPI_Dims_create's 64 x 64."""
    toml = str(ROOT / "examples" / "stencil.toml")
    runs = {}
    for grid in (None, "16x256"):
        js = tmp_path / f"{grid}.json"
        assert main(["predict", toml, "--target", "4096", "-q", "--json", str(js)]
                    + (["--grid", grid] if grid else [])) == 0
        runs[grid] = json.loads(js.read_text())
    assert runs[None]["P"] == runs["16x256"]["P"] == 4096
    comm = {g: [ph["communication"] for ph in r["phases"]] for g, r in runs.items()}
    assert comm["16x256"] != comm[None] and runs["16x256"]["steady"] != runs[None]["steady"]


def test_a_phase_whose_realisation_cannot_replay_is_realised_deferred_or_left_out_with_the_reason():
    """hpcc's statistical set-up at P = 32 was realised with a receive its own rank sends
    later, and the whole prediction failed with the replay's deadlock. Replaying each phase
    alone tells which one cannot finish: a statistical phase realised in its runs' order
    (round-robin peers, receives before sends: a cycle) is realised deferred instead and
    kept, saying why; one that cannot be placed deferred either (receives nobody sends: its
    deferred realisation pairs unevenly) is left out and named with its replay's reason;
    the others are kept as they were."""
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "logical_model"))
    from test_deferred import _model, _run

    from compute_model.physical import ComputeModel
    from replay import load
    from sigex.pipeline import Models
    cycle = _model([_run("Recv", "recv", 1.0, 64, 1), _run("Send", "send", 1.0, 64, 1)], deferred=False)
    fine = _model([_run("Send", "send", 1.0, 64, 1), _run("Recv", "recv", 1.0, 64, 1)], deferred=True)
    lonely = _model([_run("Recv", "recv", 1.0, 64, 1)], deferred=False)
    logical = dataclasses.replace(cycle, phases=[cycle.phases[0], dataclasses.replace(fine.phases[0], id=1),
                                                 dataclasses.replace(lonely.phases[0], id=2)])
    models = Models(logical=logical, compute=ComputeModel(logical=logical, crms=[None] * 3, ipts=[None] * 3),
                    source="synthetic", measured={})
    out = models.without_stuck(8, load("cluster-a"))
    assert [ph.id for ph in out.logical.phases] == [0, 1]
    assert out.compute.logical is out.logical
    again = out.logical.phases[0]
    assert again.deferred and not logical.phases[0].deferred
    assert any("its realisation in its runs' order at P=8 could not be replayed" in n for n in again.notes)
    assert out.logical.phases[1] is logical.phases[1]
    assert [r["phase"] for r in out.refused] == [2]
    assert "cannot be replayed" in out.refused[0]["problem"] and "never sent" in out.refused[0]["problem"]
    with pytest.raises(ValueError, match="deferred already"):
        logical.deferred_phase(1, "why")
    # nothing stuck: the same models
    only = Models(logical=logical.subset([1]), compute=ComputeModel(logical=logical.subset([1]), crms=[None],
                                                                     ipts=[None]), source="synthetic", measured={})
    assert only.without_stuck(8, load("cluster-a")) is only
