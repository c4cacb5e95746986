"""The logical model on the bundled traces: held-out P=64 truth, round trips, the trace file, bad input."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

import signature
from conftest import TRACES, needs_mpi
from logical_model import LogicalModel, ModelError, build, from_traces, grid_of
from signature import load_trace
from signature.errors import ExtrapolationError
from sigex.cli import main

APPS = ["stencil", "cg", "nbody", "fft2d", "sweep"]


@pytest.fixture(scope="module")
def models():
    return {app: from_traces(TRACES / app) for app in APPS}


@pytest.fixture(scope="module")
def heldout():
    return {app: signature.extract(load_trace(TRACES / app / "heldout" / "P64.h5")) for app in APPS}


@pytest.mark.parametrize("app", APPS)
def test_every_phase_is_extrapolable(models, app):
    """Every bundled application's phases get rules for every event (no problems)."""
    m = models[app]
    assert m.Ps == [4, 8, 16]
    assert all(ph.extrapolable for ph in m.phases), m.describe()


@pytest.mark.parametrize("app", APPS)
def test_heldout_p64_communication_and_weights_match_exactly(models, heldout, app):
    """From P <= 16, the logical trace for P=64 has the real P=64 run's events (op, peer,
    receive peer, bytes, tag) in each rank's order, phase by phase, and its weights."""
    m, real = models[app], heldout[app]
    assert m.weights(64) == [ph.weight for ph in real.phases]
    ev = m.events(64)
    cols = ("op", "peer", "recv_peer", "bytes", "tag")
    for k, ph in enumerate(real.phases):
        T, off = ph.template, ph.template_offsets
        sel = ev["phase"] == k
        g_rank = ev["rank"][sel]
        g_off = np.searchsorted(g_rank, np.arange(65))
        for c in cols:
            want = np.asarray(T[c], np.int64)
            got = np.asarray(ev[c][sel], np.int64)
            assert np.array_equal(g_off, off), f"{app} phase {k}: events per rank differ"
            bad = np.flatnonzero(want != got)
            assert not len(bad), (f"{app} phase {k} column {c}: first mismatch at event {bad[0]} "
                                  f"(rank {np.searchsorted(off, bad[0], 'right') - 1}): "
                                  f"real {want[bad[0]]}, model {got[bad[0]]}")


@pytest.mark.parametrize("app", APPS)
def test_eq3_gives_back_the_constant_total_at_p64(models, app):
    """Eq. 3 redistributes the phase's constant total: the predicted work per rank at P=64
    summed over ranks and times the weight gives that total back. (This holds by
    construction; the comparison with the held-out run is the next test.)"""
    m = models[app]
    for ph in m.phases:
        w = ph.work_per_rank(64)
        assert w.shape == (64,) and np.all(w >= 0)
        assert w.sum() * ph.weight_at(64) == pytest.approx(sum(g.total for g in ph.groups), rel=1e-9)


@pytest.mark.parametrize("app", APPS)
def test_heldout_p64_loop_work_is_within_3x_of_the_run(models, heldout, app):
    """The work the model predicts for the real P=64 run, compared with that run: one value per
    rank the run has, and each loop phase's total (work per rank x ranks x weight) within a
    factor of 3 of the run's measured CPU time. The factor is wide on purpose: the bundled P=64
    runs were 32x oversubscribed on 2 cores, where the measured totals drift 0.4-1.7x from the
    fit runs' (bench/logical_heldout.py prints the per-rank errors; the 10% goal needs a
    dedicated machine)."""
    m, real = models[app], heldout[app]
    for ph, run in zip(m.phases, real.phases):
        pred = ph.work_per_rank(64)
        meas = np.asarray(run.stats["cpu_mean"], float)
        assert pred.shape == meas.shape == (64,), f"{app} phase {ph.id}"
        if ph.kind != "loop":
            continue
        ratio = pred.sum() * ph.weight_at(64) / (meas.sum() * run.weight)
        assert 1 / 3 < ratio < 3, f"{app} phase {ph.id}: predicted / measured total work = {ratio:.2f}"


def test_model_round_trips_through_json(models, tmp_path):
    """save -> load gives a model that writes the same events and prints the same text."""
    m = models["stencil"]
    path = m.save(tmp_path / "stencil.json")
    back = LogicalModel.load(path)
    assert back.describe(4096) == m.describe(4096)
    a, b = m.events(256), back.events(256)
    for c in a:
        np.testing.assert_array_equal(a[c], b[c], err_msg=c)
    with pytest.raises(FileExistsError, match="already exists"):
        m.save(path)


def test_logical_trace_file_reads_back(models, tmp_path):
    """The logical trace is a trace file: load_trace reads it, with phase weights and kind."""
    m = models["cg"]
    path = m.logical_trace(1000, tmp_path / "cg-1000.h5", block=300)
    t = load_trace(path)
    assert t.nprocs == 1000 and t.meta["trace_kind"] == "logical"
    assert t.meta["phase_weights"] == m.weights(1000)
    ev = m.events(1000)
    for c in ("rank", "op", "peer", "bytes"):
        np.testing.assert_array_equal(t.events[c], ev[c], err_msg=c)
    # a non-periodic 1-D halo: end ranks have one neighbour, inner ranks two
    isend = t.events["op"] == signature.OP_CODE["Isend"]
    per_rank = np.bincount(t.events["rank"][isend], minlength=1000)
    assert per_rank[0] == per_rank[-1] == 2 and set(per_rank[1:-1]) == {4}
    with pytest.raises(FileExistsError):
        m.logical_trace(1000, path)


def test_blocks_cut_by_events_write_the_same_trace(models, tmp_path, monkeypatch):
    """The writer cuts its blocks of ranks by the events they hold (a probe block, then
    BLOCK_EVENTS each): blocks of a few ranks, of uneven sizes, write the same events,
    completions and rank offsets as one block."""
    from logical_model import writer
    m = models["cg"]
    whole = load_trace(m.logical_trace(1000, tmp_path / "whole.h5"))
    monkeypatch.setattr(writer, "PROBE_RANKS", 3)
    monkeypatch.setattr(writer, "BLOCK_EVENTS", 1000)
    cut = load_trace(m.logical_trace(1000, tmp_path / "cut.h5"))
    assert np.array_equal(whole.rank_offsets, cut.rank_offsets)
    for c in whole.events:
        np.testing.assert_array_equal(whole.events[c], cut.events[c], err_msg=c)
    for c in whole.completions:
        np.testing.assert_array_equal(whole.completions[c], cut.completions[c], err_msg=c)


def test_stencil_grid_rules_at_a_large_non_square_p(models):
    """At P=8192 (dims 128 x 64) every halo message goes to a grid neighbour and back."""
    m = models["stencil"]
    ev = m.events(8192)
    send = ev["op"] == signature.OP_CODE["Isend"]
    recv = ev["op"] == signature.OP_CODE["Irecv"]
    s = np.stack([ev["rank"][send], ev["peer"][send], ev["tag"][send]])
    r = np.stack([ev["peer"][recv], ev["rank"][recv], ev["tag"][recv]])
    key = lambda a: np.sort(a[0] * 8192 * 8 + a[1] * 8 + a[2])  # noqa: E731
    np.testing.assert_array_equal(key(s), key(r))  # every send has its receive
    # halo rows of n / dims_k doubles: 16384 / 128 and 16384 / 64 bytes with dims (128, 64)
    assert set(np.unique(ev["bytes"][send]).tolist()) == {16384 // 128, 16384 // 64}


def test_cli_extrapolate_prints_rules_and_writes(tmp_path, capsys):
    """`sigex extrapolate traces/stencil/ --target 4096` prints rules and models and writes."""
    out = tmp_path / "st.h5"
    assert main(["extrapolate", str(TRACES / "stencil"), "--target", "4096", "-o", str(out),
                 "-q"]) == 0
    text = capsys.readouterr().out
    assert "grid neighbour (-1,+0)" in text and "dims1(P)^-1" in text and "360" in text
    assert out.exists() and load_trace(out).nprocs == 4096
    assert main(["extrapolate", str(TRACES / "stencil"), "--target", "4096", "-o", str(out), "-q"]) == 2
    assert "already exists" in capsys.readouterr().err


def test_a_refusal_is_short_and_its_detail_goes_to_a_file(models, tmp_path, capsys, monkeypatch):
    """A model with thousands of problems (a real application's every slot) is refused in one line
    that names each phase once; every problem is in the file the line names (beside the output,
    or --explain FILE, which also holds the whole model), and the terminal shows a few per phase."""
    m = dataclasses.replace(models["stencil"])
    m.phases = [dataclasses.replace(ph, problems=[f"slot {i} (Isend): no rule reproduces P=4, 8, 16 "
                                                  + "x" * 200 for i in range(3000)])
                for ph in m.phases]
    with pytest.raises(ExtrapolationError) as ex:
        m.check_target(64)
    msg = str(ex.value)
    assert len(msg) < 1500 and "\n" not in msg
    assert all(msg.count(f"phase {ph.id}:") == 1 for ph in m.phases)
    assert "(+2999 more)" in msg and len(ex.value.detail.splitlines()) == 3000 * len(m.phases)

    import logical_model
    monkeypatch.setattr(logical_model, "from_traces", lambda *a, **k: m)
    out = tmp_path / "st.h5"
    assert main(["extrapolate", str(TRACES / "stencil"), "--target", "64", "-o", str(out), "-q"]) == 1
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0 and len(err) < 2000 and not out.exists()
    report = tmp_path / "st.h5.refusal.txt"
    assert str(report) in err and len(report.read_text().splitlines()) == 3000 * len(m.phases)
    assert len(captured.out) < 60_000 and "... and 2997 more problems" in captured.out
    explain = tmp_path / "model.txt"
    assert main(["extrapolate", str(TRACES / "stencil"), "--target", "64", "-o", str(out), "-q",
                 "--explain", str(explain)]) == 1
    assert str(explain) in capsys.readouterr().err
    assert explain.read_text().count("problem: slot") == 3000 * len(m.phases)


def test_phase_sequences_that_disagree_leave_the_odd_phase_out():
    """A phase one run lacks is left out of the model, named with its share of each run
    (tests/logical_model/test_correspond.py: runs without a common loop are refused)."""
    a = signature.extract(load_trace(TRACES / "stencil" / "P4.h5"))
    b = signature.extract(load_trace(TRACES / "stencil" / "P8.h5"))
    b = dataclasses.replace(b, phases=b.phases[:2] + b.phases[3:])
    model = build([a, b])
    assert [ph.id for ph in model.phases] == [0, 1, 3]
    (d,) = model.left_out
    assert d["id"] == 2 and d["measured_share"] == {4: a.phases[2].share, 8: 0.0}
    assert "phase 2 at P=4; none at P=8" in d["problem"]


@pytest.mark.parametrize("files, match", [
    (["stencil/P4.h5"], "2 or more P"),
    (["stencil/P4.h5", "cg/P8.h5"], "different programs"),
    (["stencil/P4.h5", "stencil/small/P8.h5"], "different programs or workloads"),
    (["stencil/P4.h5", "stencil/nope.h5"], "nope.h5: no such trace"),
])
def test_bad_trace_sets_are_named(files, match):
    """One P, mixed programs or workloads, a missing file: a message naming what to fix."""
    with pytest.raises(ModelError, match=match):
        from_traces([TRACES / f for f in files])


def test_unextrapolable_target_is_refused(models):
    """P < 1 is refused with a clear message."""
    with pytest.raises(ExtrapolationError, match="positive integer"):
        models["cg"].events(0)


def test_grid_of_reads_the_cartesian_communicator():
    """The stencil's runs record an MPI_Dims_create grid; cg's have none."""
    dims, periods, _ = grid_of(load_trace(TRACES / "stencil" / "P8.h5"))
    assert tuple(dims) == (4, 2) and tuple(periods) == (False, False)
    assert grid_of(load_trace(TRACES / "cg" / "P8.h5")) is None


def test_sigex_show_on_a_logical_trace(models, tmp_path, capsys):
    """`sigex show` says the trace is generated, with its weights, and was never run."""
    path = models["cg"].logical_trace(32, tmp_path / "cg-32.h5")
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "logical trace, generated" in out and "runtime not run" in out
    assert main(["show", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["runtime"] is None


@needs_mpi
@pytest.mark.parametrize("program, refusal", [
    ("neighbors.c", "slot 2 (Ineighbor_alltoallv): bytes to destination 0 differ between ranks"),
])
def test_calls_the_model_does_not_extrapolate_are_refused_by_name(tmp_path, program, refusal):
    """A neighbourhood collective whose bytes per neighbour follow the rank (neighbors.c's
    Ineighbor_alltoallv sends r + k + 1 ints to destination k) is reported as not
    extrapolable, naming the slot, instead of being extrapolated wrongly (one-sided calls and
    the other neighbourhood collectives are placed: tests/logical_model/test_onesided.py)."""
    import subprocess
    from pathlib import Path

    from logical_model import from_traces
    from signature import trace_run

    src = Path(__file__).parents[1] / "signature" / "programs" / program
    exe = tmp_path / "nbr"
    subprocess.run([os.environ.get("SIGEX_MPICC") or "mpicc", "-O1", "-o", str(exe), str(src)],
                   check=True)
    for P in (2, 4, 8):
        assert trace_run([str(exe), "6"], P, tmp_path / "t" / f"P{P}.h5").ok
    model = from_traces(tmp_path / "t")
    loop = [ph for ph in model.phases if ph.kind == "loop"]
    assert loop and all(not ph.extrapolable for ph in loop)
    assert any(refusal in p for ph in loop for p in ph.problems)


def test_refused_slots_are_named_in_ranges():
    """Runs of three or more consecutive slots are one range with their kinds of call;
    shorter runs are named one by one (a refusal of 260 slots stays one readable line)."""
    from logical_model.model import _slots_text
    from signature.trace import OP_CODE
    S, R, B = OP_CODE["Send"], OP_CODE["Recv"], OP_CODE["Barrier"]
    assert _slots_text([(3, S)]) == "slot 3 (Send)"
    assert _slots_text([(3, S), (4, R)]) == "slots 3 (Send), 4 (Recv)"
    where = [(0, B)] + [(i, S if i % 2 else R) for i in range(61, 81)] + [(90, S), (92, R)]
    assert _slots_text(where) == "slots 0 (Barrier), 61-80 (Send, Recv), 90 (Send), 92 (Recv)"
