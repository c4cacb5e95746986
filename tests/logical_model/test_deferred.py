"""Phases whose ranks order their calls differently (no rank class has one order: an
exchange that visits its neighbours in the order the data or the decomposition gives)
are modelled statistically and realised *deferred* (:attr:`PhaseModel.deferred`): one
order of the runs on every rank, point-to-point calls nonblocking, one Waitall at the end
of the repetition, so that no order of the runs can deadlock the replay. A synthetic phase
shows the realisation's order and that the same slots realised as they are deadlock; a
real C program (tests/logical_model/programs/randorder.c, each rank's receives and sends
in its own pseudo-random order) traced with MPICH at P = 4, 8, 16 is placed at the unseen
P = 32 with its messages and bytes per rank within 5% of the real run's, and its logical
trace replays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import signature
from conftest import needs_mpi, trace_c_program
from logical_model import from_traces
from logical_model.model import (COMM_WORLD, NO_ORDER, LogicalModel, PhaseModel, SlotModel, WorkGroup,
                                 _constant, _deferred_slots)
from signature import load_trace
from signature.errors import DeadlockError
from signature.trace import OP_CODE

PROGRAMS = Path(__file__).parent / "programs"
FIT, UNSEEN = (4, 8, 16), 32


# ---- the realisation's order on a synthetic phase ----------------------------------------
def _run(op: str, side: str | None, per_rank: float, size: int, tag: int) -> SlotModel:
    """A statistical run of ``op``: a channel side with ``per_rank`` messages per rank of
    ``size`` bytes, or (side None) one call per rank of a collective."""
    P0 = 8
    s = SlotModel(key=f"run/{op}/{tag}", op=OP_CODE[op], tag=tag, comm=COMM_WORLD, everywhere=False,
                  statistical=True)
    if side is None:
        s.count, s.bytes = _constant(1, P0, "calls"), _constant(size, P0, "bytes")
    else:
        s.streams = [(side, _constant(per_rank, P0, "messages"), _constant(size, P0, "bytes"))]
    return s


def _model(slots: list[SlotModel], deferred: bool) -> LogicalModel:
    ph = PhaseModel(id=0, kind="loop", pattern="synthetic", weight=_constant(3, 8, "weight"),
                    slots=_deferred_slots(slots) if deferred else slots,
                    groups=[WorkGroup(None, 0.0, {8: 0.0})], measured_weights={8: 3}, problems=[],
                    deferred=deferred)
    return LogicalModel(app="synthetic", work_mode="cpu-time", work_unit="s", Ps=[4, 8, 16], workload_label=None,
                        workload_value=None, grid=None, phases=[ph], sources=["synthetic"])


def _replay(model: LogicalModel, P: int, path: Path) -> float:
    from replay import Program, load, replay
    trace = load_trace(model.logical_trace(P, path, overwrite=True))
    return replay(Program.from_trace(trace), load("cluster-a")).runtime


@settings(max_examples=12, deadline=None)
@given(P=st.integers(3, 24), recv_first=st.booleans(), big=st.booleans(), per_rank=st.sampled_from([1.0, 2.0, 1.5]),
       collective_between=st.booleans())
def test_a_deferred_phase_posts_every_call_nonblocking_and_waits_once_at_its_end(
        tmp_path_factory, P, recv_first, big, per_rank, collective_between):
    """Blocking Send and Recv runs of one channel, in either order, eager or rendezvous
    sized, an Allreduce between them or not, and a Sendrecv run: realised deferred, every
    rank's point-to-point calls are nonblocking, its sends and receives as many as the
    model's messages (each receive matching a send), the collective kept in its place, a
    single Waitall last where the rank posted anything; the trace replays."""
    size = (1 << 20) if big else 64
    send, recv = _run("Send", "send", per_rank, size, 1), _run("Recv", "recv", per_rank, size, 1)
    runs = [recv, send] if recv_first else [send, recv]
    if collective_between:
        runs.insert(1, _run("Allreduce", None, 0, 8, -1))
    runs.append(_run("Sendrecv", "both", 1.0, size, 2))
    model = _model(runs, deferred=True)
    ev = model.phase_events(0, P)
    names = [signature.trace.OPS[int(o)] for o in ev["op"]]
    assert not {"Send", "Recv", "Sendrecv"} & set(names), set(names)
    total = int(round(per_rank * P))
    isend = ev["op"] == OP_CODE["Isend"]
    irecv = ev["op"] == OP_CODE["Irecv"]
    assert isend.sum() == irecv.sum() == total
    assert sorted(zip(ev["rank"][isend], ev["peer"][isend])) == sorted(zip(ev["peer"][irecv], ev["rank"][irecv]))
    for r in range(P):  # one Waitall, last, on every rank that posted a request
        mine = [n for n, rk in zip(names, ev["rank"]) if rk == r]
        assert mine.count("Waitall") == 1 and mine[-1] == "Waitall", mine
        if collective_between:
            assert mine.count("Allreduce") == 1
    assert np.isfinite(_replay(model, P, tmp_path_factory.mktemp("deferred") / "t.h5"))


def test_deferred_phases_whose_sendrecv_and_lone_halves_share_a_tag_replay_in_sequence(tmp_path):
    """GROMACS's halo: a Sendrecv run and lone Send and Recv runs (a pulse whose partner has
    nothing to send back) on one tag, in two deferred phases one after the other. The
    Isendrecv's completion names the source and tag it received, so the replay pairs each
    phase's messages within it; without them its receives were matched after the tagged
    ones, across phases, and the replay of the two phases deadlocked (each alone finished)."""
    import dataclasses
    P = 8
    runs = [_run("Sendrecv", "both", 1.0, 64, 2), _run("Send", "send", 1.0, 64, 2), _run("Recv", "recv", 1.0, 64, 2)]
    one = _model(runs, deferred=True)
    two = dataclasses.replace(one, phases=[one.phases[0], dataclasses.replace(one.phases[0], id=1)])
    trace = load_trace(two.logical_trace(P, tmp_path / "t.h5"))
    both = trace.events["op"] == OP_CODE["Isendrecv"]
    assert both.sum() == 2 * P
    assert np.isfinite(_replay(two, P, tmp_path / "r.h5"))


def test_the_same_runs_realised_in_their_order_deadlock(tmp_path):
    """What deferring is for: a run of blocking receives before the run that sends them,
    every rank in that one order, deadlocks a replay; deferred, it finishes."""
    P = 8
    runs = [_run("Recv", "recv", 1.0, 64, 1), _run("Send", "send", 1.0, 64, 1)]
    with pytest.raises(DeadlockError):
        _replay(_model(runs, deferred=False), P, tmp_path / "plain.h5")
    assert np.isfinite(_replay(_model(runs, deferred=True), P, tmp_path / "deferred.h5"))


def test_a_deferred_phase_survives_save_and_load(tmp_path):
    model = _model([_run("Send", "send", 1.0, 64, 1), _run("Recv", "recv", 1.0, 64, 1)], deferred=True)
    again = LogicalModel.load(model.save(tmp_path / "m.json"))
    assert again.phases[0].deferred and again.phases[0].slots[-1].wait_rule == "all"
    a, b = model.phase_events(0, 12), again.phase_events(0, 12)
    assert all(np.array_equal(a[c], b[c]) for c in a)


# ---- a real program ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def randorder(tmp_path_factory):
    """randorder.c traced at the fit P (folder) and at the unseen P."""
    return trace_c_program(tmp_path_factory.mktemp("randorder"), PROGRAMS / "randorder.c", ["96000", "30"],
                           FIT, UNSEEN)


def _sent(ev: dict, sel) -> tuple[int, int]:
    b = np.asarray(ev["bytes"], np.int64)[sel]
    return int(np.count_nonzero(b > 0)), int(b.sum())


@needs_mpi
def test_neighbours_in_each_ranks_own_order_are_placed_deferred_at_an_unseen_p(randorder, tmp_path):
    """No rank class orders randorder's calls (the exact model says so); the loop is
    placed statistically and deferred from P = 4, 8, 16: at P = 32 its weight is exact,
    messages and bytes per rank within 5% of the real run's (its messages: 4 halos and a
    flag per rank at every P; bytes 768000/P per +-1 halo, half per +-2), and the logical
    trace, a rendezvous-sized halo among them, replays without deadlock."""
    model = from_traces(randorder)
    loop = next(k for k, ph in enumerate(model.phases) if ph.kind == "loop")
    ph = model.phases[loop]
    assert ph.extrapolable and ph.statistical and ph.deferred, ph.problems + ph.notes
    assert any(NO_ORDER in n for n in ph.notes)
    real = signature.extract(load_trace(randorder / "unseen" / f"P{UNSEEN}.h5"))
    assert model.weights(UNSEEN) == [p.weight for p in real.phases]
    ev = model.phase_events(loop, UNSEEN)
    T, offs = real.phases[loop].template, real.phases[loop].template_offsets
    (mm, mb), (rm, rb) = _sent(ev, slice(None)), _sent(T, slice(None))
    assert abs(mm - rm) / rm <= 0.05 and abs(mb - rb) / rb <= 0.05, (mm, rm, mb, rb)
    # per rank: messages and bytes each rank sends, against the real run's
    per_model = np.bincount(ev["rank"], weights=np.asarray(ev["bytes"], float), minlength=UNSEEN)
    per_real = np.bincount(np.repeat(np.arange(UNSEEN), np.diff(offs)), weights=np.asarray(T["bytes"], float),
                           minlength=UNSEEN)
    assert np.max(np.abs(per_model - per_real) / per_real) <= 0.05, (per_model, per_real)
    names = {signature.trace.OPS[int(o)] for o in ev["op"]}
    assert not {"Send", "Recv"} & names and "Waitall" in names
    from replay import Program, load, replay
    trace = load_trace(model.logical_trace(UNSEEN, tmp_path / f"randorder-P{UNSEEN}.h5"))
    assert np.isfinite(replay(Program.from_trace(trace), load("cluster-a")).runtime)


def test_a_deferred_phases_collectives_are_keyed_by_their_count_not_by_the_calls_between():
    """Two ranks that make their point-to-point calls in other places between two
    Allreduces: keyed by segments (the program's order), the Allreduces fall into runs
    the ranks make different numbers of times (a replay would deadlock); keyed by count
    (a deferred phase), the k-th Allreduce is one run on both, one call each."""
    from logical_model.model import COMM_CART, P2P_OPS, POST_OPS, WAIT_OPS
    from logical_model.statistical import runs
    S, R, A = OP_CODE["Send"], OP_CODE["Recv"], OP_CODE["Allreduce"]
    op = np.array([S, A, R, A,  R, S, A, A])  # rank 0, then rank 1
    peer = np.array([1, -1, 1, -1, 0, 0, -1, -1])
    tag = np.where(np.isin(op, [S, R]), 5, -1)
    per_p = {2: (op, tag, np.zeros(8, np.int64), peer, np.array([0, 4, 8]), {0: COMM_WORLD})}
    for by_count, want in ((False, False), (True, True)):
        out, _ = runs(per_p, POST_OPS, WAIT_OPS, P2P_OPS, COMM_WORLD, COMM_CART,
                      collectives_by_count=frozenset({A}) if by_count else frozenset())
        coll = [r for r in out if r.op == A]
        same = all(np.array_equal(np.bincount(r.events[2][0], minlength=2), [1, 1]) for r in coll)
        assert same == want and (len(coll) == 2 or not by_count), [(r.key, r.events[2][0]) for r in coll]


def test_a_deferred_phase_whose_messages_and_receives_do_not_pair_up_is_refused_at_that_p():
    """The guard that keeps a deferred realisation replayable: where the model's sends and
    receives of a channel come out uneven at a P (here on purpose, 1 message per rank
    against 2 receives), the phase is refused there with the pair that differs, not
    written to wait forever."""
    model = _model([_run("Send", "send", 1.0, 64, 1), _run("Recv", "recv", 2.0, 64, 1)], deferred=True)
    problems = model.phase_problems(8)[0]
    assert problems and "pairs" in problems[0] and "wait forever" in problems[0], problems
    even = _model([_run("Send", "send", 1.0, 64, 1), _run("Recv", "recv", 1.0, 64, 1)], deferred=True)
    assert even.phase_problems(8)[0] == []


@needs_mpi
def test_neighbours_in_each_ranks_own_order_without_blocking_calls_keep_their_order(tmp_path):
    """The same program without its blocking flags (Irecv, Isend, Waitall, Allreduce: an
    OpenFOAM solver iteration's calls): no rank class orders them either, but no order of
    their runs can deadlock, so the phase is placed statistically in its runs' order, not
    deferred (deferred, the waits moved to the repetition's end and the replay of
    OpenFOAM's PCG phase took 16 times as long), and its logical trace replays."""
    root = trace_c_program(tmp_path, PROGRAMS / "randorder.c", ["96000", "30", "0", "0"], FIT, 12)
    model = from_traces(root)
    ph = next(p for p in model.phases if p.kind == "loop")
    assert ph.extrapolable and ph.statistical and not ph.deferred, ph.problems + ph.notes
    assert any(NO_ORDER in n for n in ph.notes)
    from replay import Program, load, replay
    trace = load_trace(model.logical_trace(12, tmp_path / "P12.logical.h5"))
    assert np.isfinite(replay(Program.from_trace(trace), load("cluster-a")).runtime)
