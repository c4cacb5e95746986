"""sigex predict / scaling / compare-machines and the README's main job, end to end on bundled traces."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import signature
from conftest import ROOT, TRACES
from signature import _memory as memory, load_trace
from sigex.cli import main
from sigex.pipeline import load_models, parse_p_range, predict


@pytest.fixture(scope="module")
def stencil():
    return load_models(ROOT / "examples" / "stencil.toml")


def test_readme_main_job(tmp_path, capsys, monkeypatch):
    """The README's main command: model the bundled stencil, write P=4096, replay it."""
    monkeypatch.chdir(ROOT)
    out = tmp_path / "stencil-P4096.physical.h5"
    assert main(["run", "examples/stencil.toml", "-q", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "logical model of stencil" in text and "CRM of phase 1" in text
    assert main(["replay", str(out), "--machine", "cluster-a"]) == 0
    text = capsys.readouterr().out
    assert "PET = sum TE_i x W_i" in text and "physical trace, P=4096" in text


def test_predict_report_and_json(tmp_path, capsys):
    """`sigex predict` prints runtime, per-phase table, fitted models and warnings; --json saves them."""
    js = tmp_path / "p.json"
    assert main(["predict", str(ROOT / "examples" / "stencil.toml"), "--target", "4096", "--machine",
                 "cluster-a", "--json", str(js), "-q"]) == 0
    text = capsys.readouterr().out
    for part in ("predicted runtime", "core-hours", "% of PET", "fitted models", "LOO error", "warnings:"):
        assert part in text
    d = json.loads(js.read_text())
    assert d["P"] == 4096 and len(d["phases"]) == 4 and d["steady"] > 0


def test_prediction_at_a_traced_p_reproduces_its_computation(stencil):
    """At a traced P the replayed computation of each phase is the CRM's, and the CRM fitted on
    the signature runs gives each loop phase's measured computation (per rank, times its
    weight) within 10%. (The runtime itself is not comparable on this machine: its runs are
    oversubscribed 2-8x, so their wall time is not a dedicated machine's; and the distant
    point may move a CRM away from its own points: stencil phase 2 by 12% at P=16.)"""
    sig = signature.extract(load_trace(TRACES / "stencil" / "P16.h5"))
    pred = predict(stencil, 16, "cluster-a")
    crm_now = stencil.compute.computation(16)
    for k, (ph, meas) in enumerate(zip(pred.phases, sig.phases)):
        assert ph["computation"] == pytest.approx(crm_now[k], rel=1e-9)
        if ph["kind"] != "loop":
            continue
        base = float(np.asarray(stencil.compute.crms[k].base.predict(16)).reshape(-1)[0])
        measured = float(np.mean(meas.stats["cpu_mean"]))
        assert base * ph["weight"] == pytest.approx(measured * meas.weight, rel=0.10), ph


def test_a_crm_growing_past_the_fitted_range_is_flagged(stencil, monkeypatch):
    """Computation per process that grows with P under strong scaling is named in the warnings
    (a fit like a - b P^-1/2 log2 P peaks inside the range and then rises)."""
    real = stencil.compute.computation
    pred = predict(stencil, 64, "cluster-a")
    assert not [w for w in pred.warnings if "grows from" in w]
    monkeypatch.setattr(stencil.compute, "computation",
                        lambda P: real(P) * (1.0 if P <= 16 else 10.0))
    pred = predict(stencil, 64, "cluster-a")
    grown = [w for w in pred.warnings if "grows from" in w]
    assert len(grown) == 2 and grown[0].startswith("phase 1:") and "P=64" in grown[0]


def test_pipelined_phases_use_the_steady_state(tmp_path):
    """The sweep's repetitions overlap: the runtime is the steady-state replay (equal to the full
    replay), and the report says why PET is far above it."""
    models = load_models(ROOT / "examples" / "sweep.toml")
    p = predict(models, 64, "cluster-a", full=True)
    assert p.steady == pytest.approx(p.full, rel=0.01)
    assert p.pet > 1.5 * p.steady
    assert any("pipeline" in w for w in p.warnings)


def test_scaling_curve_names_the_bottleneck(tmp_path, capsys):
    """`sigex scaling` prints the curve, the bottleneck phase and the 50% point, and writes files."""
    prefix = tmp_path / "st"
    assert main(["scaling", str(ROOT / "examples" / "stencil.toml"), "--p", "64:1024", "--machine",
                 "cluster-a", "-o", str(prefix), "-q"]) == 0
    text = capsys.readouterr().out
    assert "stops scaling first" in text and "below 50% at P = " in text
    d = json.loads(prefix.with_suffix(".json").read_text())
    assert [r["P"] for r in d["rows"]] == [64, 128, 256, 512, 1024]
    assert d["rows"][0]["efficiency"] == pytest.approx(1.0)
    assert prefix.with_suffix(".csv").read_text().startswith("P,runtime_s,speedup,efficiency")


def test_scaling_plot_and_no_half_replaced_output(tmp_path, capsys):
    """`sigex scaling` writes a PNG; an existing plot is found before anything is written, so
    no output is half replaced. (Skipped, and reported, without matplotlib: the `test` extra
    installs it.)"""
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install 'sigex[test]')")
    prefix = tmp_path / "st"
    assert main(["scaling", str(ROOT / "examples" / "stencil.toml"), "--p", "64:1024", "--machine",
                 "cluster-a", "-o", str(prefix), "-q"]) == 0
    capsys.readouterr()
    assert prefix.with_suffix(".png").stat().st_size > 10_000
    # an existing plot is found before anything is written: no half-replaced output
    prefix.with_suffix(".json").unlink()
    prefix.with_suffix(".csv").unlink()
    assert main(["scaling", str(ROOT / "examples" / "stencil.toml"), "--p", "64,128", "--machine",
                 "cluster-a", "-o", str(prefix), "-q"]) == 2
    assert "st.png already exists" in capsys.readouterr().err
    assert not prefix.with_suffix(".json").exists() and not prefix.with_suffix(".csv").exists()


def test_p_rule_choices_are_the_model_search_rules():
    """The CLI spells the P rules out (so that --help loads no model code): they must stay the
    model search's."""
    from logical_model.modelsearch import P_RULES
    from sigex.cli import P_RULE_CHOICES

    assert P_RULE_CHOICES == ("any",) + P_RULES


def test_min_events_text_is_the_workers_default():
    """The replay help spells replay.workers.MIN_EVENTS_PER_WORKER out (no replay import for
    --help): it must stay that value."""
    from replay.workers import MIN_EVENTS_PER_WORKER
    from sigex.cli import MIN_EVENTS_TEXT

    assert MIN_EVENTS_TEXT == f"{MIN_EVENTS_PER_WORKER:,}"


def test_replay_refuses_a_negative_event_count(capsys):
    """--min-events-per-worker -1 and --pieces 0 are usage errors naming the option, before
    any replay."""
    with pytest.raises(SystemExit) as ex:
        main(["replay", str(TRACES / "stencil" / "P16.h5"), "--min-events-per-worker", "-1"])
    assert ex.value.code == 2
    assert "--min-events-per-worker: wants a whole number of events, 0 or more, got '-1'" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit) as ex:
        main(["replay", str(TRACES / "stencil" / "P16.h5"), "--pieces", "0"])
    assert ex.value.code == 2
    assert "--pieces: wants a whole number of pieces, 1 or more, got '0'" in capsys.readouterr().err


def test_compare_machines_ranks_by_runtime(capsys):
    """cluster-b (10 GbE, 0.8x compute) ranks below cluster-a for the stencil."""
    assert main(["compare-machines", str(ROOT / "examples" / "stencil.toml"), "--target", "1024",
                 "--machine", "cluster-b", "--machine", "cluster-a", "-q"]) == 0
    text = capsys.readouterr().out
    assert text.index("cluster-a") < text.index("cluster-b") and "core-hours" in text


@pytest.mark.parametrize("files, args, match", [
    ([], [], "no such campaign file or trace folder"),
    (["stencil/P4.h5", "stencil/P8.h5"], [], "2 signature run.*3 or more P"),
    (["stencil/P4.h5", "cg/P8.h5", "cg/P16.h5"], [], "different programs or workloads"),
    (["stencil/P4.h5", "stencil/P8.h5", "stencil/P16.h5"], ["--machine", "mars"], "mars: no such machine"),
])
def test_bad_input_names_what_to_fix(tmp_path, capsys, files, args, match):
    """Missing traces, too few P, mixed programs, an unknown machine: one clear line, exit 2."""
    folder = tmp_path / "runs"
    if files:
        folder.mkdir()
        for i, f in enumerate(files):
            shutil.copy(TRACES / f, folder / f"run{i}.h5")
    assert main(["predict", str(folder), "--target", "64", "-q", *args]) == 2
    assert __import__("re").search(match, capsys.readouterr().err)


def test_p_ranges():
    """--p LO:HI gives the powers of two between; a list is taken as given; nonsense is refused."""
    assert parse_p_range("64:1000") == [64, 128, 256, 512]
    assert parse_p_range("100,64") == [64, 100]
    with pytest.raises(signature.SigexError, match="LO:HI"):
        parse_p_range("big")


@__import__("conftest").needs_mpi
def test_sigex_replay_on_two_mpi_workers():
    """`mpiexec -n 2 sigex replay` prints the same replayed time as one process, once; a
    trace this small is replayed by one worker unless --min-events-per-worker 0 says split."""
    import subprocess
    import sys
    args = [str(TRACES / "cg" / "P16.h5"), "--machine", "cluster-a"]
    one = subprocess.run([sys.executable, "-m", "sigex.cli", "replay", *args], capture_output=True,
                         text=True, timeout=120)
    line = lambda out: [x for x in out.splitlines() if x.startswith("replayed time")][0]  # noqa: E731
    for extra, says in (([], "1 of 2 MPI workers (a piece needs 150,000 events or more"),
                        (["--min-events-per-worker", "0"], "; 2 MPI workers")):
        two = subprocess.run(["mpiexec", "-n", "2", sys.executable, "-m", "sigex.cli", "replay", *args,
                              *extra], capture_output=True, text=True, timeout=180)
        assert two.returncode == 0, two.stderr
        assert says in two.stdout and two.stdout.count("replayed time") == 1
        assert line(two.stdout) == line(one.stdout)


def test_a_replay_larger_than_the_free_memory_is_refused_before_it_starts(stencil, monkeypatch):
    """Where the physical trace's replay would need more memory than the machine has left, the
    prediction stops before reading it, saying how many events, how much memory and what to do
    (MPB's all-pairs transposes at P = 1,000 were killed by the kernel at 22 GB, silently)."""
    from signature.errors import ExtrapolationError
    monkeypatch.setattr(memory, "available_memory", lambda: 1 << 20)  # 1 MiB left
    with pytest.raises(ExtrapolationError, match=r"the physical trace at P=4,096 holds [\d,]+ events .* takes "
                                                 r"about [\d.]+ GiB and this machine has 0\.0 GiB available\. "
                                                 r"Predict at a smaller P"):
        predict(stencil, 4096, "cluster-a")
    monkeypatch.setattr(memory, "available_memory", lambda: None)  # unknown: no check
    assert predict(stencil, 64, "cluster-a").runtime > 0
