"""Campaigns: checked files, resumable runs, failures that name the run and keep the traces."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from compute_model import campaign
from conftest import ROOT, needs_mpi
from signature import load_trace
from signature.errors import CampaignError
from sigex.cli import main

APP = """
import sys
from mpi4py import MPI
import numpy as np
c = MPI.COMM_WORLD
n = int(sys.argv[sys.argv.index("--n") + 1])
if c.size == int(sys.argv[sys.argv.index("--reject") + 1]):
    if c.rank == 0:
        print(f"P={c.size} is not supported", file=sys.stderr)
    sys.exit(3)
a = np.ones(n // c.size)
for _ in range(12):
    a = a * 1.0001
    c.Allreduce(MPI.IN_PLACE, a[:1])
"""


def write(tmp_path: Path, body: str, name: str = "app.toml") -> Path:
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


BASE = """
app = "toy"
command = "python {script} --n {n} --reject {reject}"
workload = "n"
original = 4096
small = [512]
signature_p = [2, 3, 4]
small_p = [2, 3]
work = "n/P"
target = 64
traces = "runs"
[params]
script = "app.py"
reject = 0
"""


def test_bundled_campaigns_load_and_find_their_traces():
    """Every example campaign is valid and the bundled traces satisfy all its runs."""
    for app in ("stencil", "cg", "nbody", "fft2d", "sweep"):
        c = campaign.load(ROOT / "examples" / f"{app}.toml")
        assert {campaign._state(r) for r in campaign.plan(c)} == {"complete"}, app


@pytest.mark.parametrize("change, match", [
    ("signature_p = [2, 3]", "3 or more different P"),
    ('p_rule = "squares"', "P=2, which the application does not accept"),
    ('command = "python app.py --n 100"', "does not use the workload"),
    ('command = "python {script} --n {n} --iters {iters}"', r"\{iters\}, which \[params\] does not give"),
    ('work = "n/Q"', "'Q' is not allowed"),
    ("colour = 3", "unknown key"),
    ('p_rule = "primes"', "not any, squares"),
])
def test_bad_campaigns_are_named(tmp_path, change, match):
    """A mistaken campaign is refused before anything runs, naming the file and the key."""
    key = change.split("=")[0].strip()
    body = "\n".join(line for line in BASE.splitlines() if not line.startswith(key + " "))
    body = body.replace("[params]", change + "\n[params]")
    with pytest.raises(CampaignError, match=match):
        campaign.load(write(tmp_path, body))


def test_missing_campaign_file(tmp_path):
    with pytest.raises(CampaignError, match="no such campaign file"):
        campaign.load(tmp_path / "nope.toml")


@needs_mpi
def test_campaign_runs_resumes_and_stops_on_a_rejected_p(tmp_path, monkeypatch):
    """A run the application rejects stops the campaign naming the run and its command; the
    traces made before it are kept and reused when the campaign runs again."""
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, BASE.replace("reject = 0", "reject = 3"))
    c = campaign.load(path)
    with pytest.raises(CampaignError, match=r"signature run P=3 .* failed \(exit 3\).*--reject 3"):
        campaign.run(c)
    p2 = c.traces / "P2.h5"
    assert load_trace(p2).complete
    made = p2.stat().st_mtime_ns
    assert not load_trace(c.traces / "P3.h5", allow_incomplete=True).complete  # kept, marked
    # fix the command: P=2 is reused, P=3 (incomplete) runs again, the rest run
    path.write_text(path.read_text().replace("reject = 3", "reject = 0"))
    # the command changed, so the old P=2 trace is foreign: refused, not overwritten
    with pytest.raises(CampaignError, match="was not made by this campaign"):
        campaign.run(campaign.load(path))
    assert p2.stat().st_mtime_ns == made


@needs_mpi
def test_sigex_run_models_a_fresh_campaign(tmp_path, monkeypatch, capsys):
    """`sigex run` performs every run, then prints the logical model and the CRMs."""
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, BASE)
    assert main(["run", str(path), "-q"]) == 0
    out = capsys.readouterr().out
    assert "logical model of toy" in out and "CRM of phase" in out
    c = campaign.load(path)
    assert all(campaign._state(r) == "complete" for r in campaign.plan(c))
    # everything traced: a second run performs nothing
    assert main(["run", str(path), "--runs-only"]) == 0
    assert "5 of 5 runs already traced; 0 to run" in capsys.readouterr().err  # 3 signature + 2 small


@needs_mpi
def test_sigex_run_checks_the_model_against_check_runs(tmp_path, monkeypatch, capsys):
    """check_p runs are traced with the original workload, left out of the fit, and compared
    phase by phase with the CRMs; --json keeps the runs (with the P each small run emulates)
    and the comparison."""
    import json

    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, BASE.replace("target = 64", "target = 64\ncheck_p = [5]"))
    assert main(["run", str(path), "-q", "--json", str(tmp_path / "report.json")]) == 0
    out = capsys.readouterr().out
    assert "check runs (original workload, not fitted)" in out
    c = campaign.load(path)
    assert load_trace(c.traces / "check" / "P5.h5").meta["workload_value"] == "4096"
    logical, compute = campaign.models(c)
    assert logical.Ps == [2, 3, 4]  # the check run is not fitted
    rows = campaign.check(c, compute)
    assert {r.P for r in rows} == {5} and len(rows) == len(logical.phases)
    loop = [r for r in rows if r.kind == "loop"]
    assert loop and all(r.measured > 0 and r.predicted > 0 for r in loop)
    report = json.loads((tmp_path / "report.json").read_text())
    assert [r["emulates"] for r in report["runs"] if r["kind"] == "small"] == [16, 24]  # 512/P = 4096/P'
    assert len(report["check"]) == len(rows) and len(report["crms"]) == len(logical.phases)


@needs_mpi
def test_repeated_runs_are_traced_and_modelled_by_their_median(tmp_path, monkeypatch, capsys):
    """repeat = 2: every run twice (the second in repeat-2/), and the models are built from the
    median of the two."""
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, "repeat = 2\n" + BASE)
    assert main(["run", str(path), "-q"]) == 0
    assert "CRM of phase" in capsys.readouterr().out
    c = campaign.load(path)
    runs = campaign.plan(c)
    assert len(runs) == 10 and all(campaign._state(r) == "complete" for r in runs)
    assert load_trace(c.traces / "repeat-2" / "P3.h5").meta["command"] == load_trace(c.traces / "P3.h5").meta["command"]
    assert load_trace(c.traces / "small" / "repeat-2" / "P2.h5").meta["workload_value"] == "512"
    logical, compute = campaign.models(c)
    assert logical.Ps == [2, 3, 4]
