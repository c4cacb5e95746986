"""Replay on MPI workers (``mpiexec -n W``): bit-identical to one process, errors abort, deadlocks.

Each test writes a small script, runs it with ``mpiexec -n W python script.py`` and
reads what worker 0 prints (one JSON line); the reference is :func:`replay.replay`
in the test process. Every run has a timeout, so a hang fails instead of blocking.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import ROOT, TRACES
from replay import DeadlockError, LogGP, Machine, Program, load, replay
from replay.workers import MIN_EVENTS_PER_WORKER, running_under_mpi, worker_bounds, workers_used
from signature import load_trace

pytestmark = pytest.mark.skipif(shutil.which("mpiexec") is None,
                                reason="no mpiexec on PATH (pip install mpich)")

TIMEOUT = 60


def mixed_program(P: int, seed: int, *, columns: bool = False):
    """P ranks (a multiple of 4) on a 4-wide grid: world, row and column communicators (the
    columns in reverse world order), most collective kinds, eager and rendezvous sizes.
    ``columns``: the arguments of Program.from_arrays instead of the program."""
    from signature.trace import CommTable

    rng = np.random.default_rng(seed)
    rows = [list(range(r, r + 4)) for r in range(0, P, 4)]
    cols = [list(reversed(range(c, P, 4))) for c in range(4)]
    groups = [list(range(P))] + rows + cols
    sizes = [len(g) for g in groups]
    comms = CommTable(size=np.array(sizes, np.int32), inter=np.zeros(len(groups), bool),
                      member_offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                      members=np.array([x for g in groups for x in g], np.int32),
                      cart_offsets=np.zeros(len(groups) + 1, np.int64),
                      cart_dims=np.zeros(0, np.int32), cart_periods=np.zeros(0, bool))
    names = ("rank", "op", "peer", "recv_peer", "root", "comm", "bytes", "recv_bytes", "req", "tag", "phase")
    ev = {k: [] for k in names + ("comp",)}

    def add(r, op, comm=0, root=-1, b=0, rb=0, peer=-1, rpeer=-1, req=-1, tag=0, phase=0):
        for k, v in zip(names, (r, op, peer, rpeer, root, comm, b, rb, req, tag, phase)):
            ev[k].append(v)
        ev["comp"].append(float(rng.random() * 2e-5))

    for r in range(P):
        row, col = 1 + r // 4, 1 + len(rows) + r % 4
        add(r, "Init", phase=-1)
        add(r, "Bcast", root=5, b=5000, rb=5000)
        add(r, "Allreduce", b=8, rb=8)
        add(r, "Allreduce", comm=row, b=30000, rb=30000, phase=1)
        add(r, "Alltoall", comm=col, b=3000, rb=3000, phase=1)
        add(r, "Allgather", b=700, rb=700 * P, phase=1)
        add(r, "Gather", comm=col, root=1, b=2500, rb=2500 * len(cols[0]), phase=1)
        add(r, "Scatter", root=3, b=900 * P, rb=900, phase=2)
        add(r, "Reduce_scatter", b=4000, rb=4000 // P, phase=2)
        add(r, "Scan", b=16, rb=16, phase=2)
        add(r, "Barrier", comm=row, phase=2)
        add(r, "Sendrecv", peer=(r + 1) % P, rpeer=(r - 1) % P, b=2400, rb=2400, tag=3, phase=2)
        add(r, "Iallreduce", comm=col, b=8, rb=8, req=0, phase=2)
        add(r, "Reduce", root=7, b=64, rb=64, phase=2)
        add(r, "Wait", phase=2)
        add(r, "Finalize", phase=-1)
    completions = [(r, 14, 0) for r in range(P)]  # each Wait completes its Iallreduce
    if columns:
        return dict(nprocs=P, completions=completions, comms=comms, **ev)
    return Program.from_arrays(P, completions=completions, comms=comms, phase_weights=[3, 5, 7],
                               name=f"mixed-P{P}", **ev)


def write_trace_file(path, spec: dict):
    """A physical trace file of the columns ``spec`` (as :func:`random_program` or
    ``mixed_program(columns=True)`` give them: each rank's events in order)."""
    from signature.trace import OP_CODE, CommTable, Trace

    P = spec["nprocs"]
    rank = np.asarray(spec["rank"], np.int64)
    order = np.argsort(rank, kind="stable")
    n = len(rank)
    counts = np.bincount(rank, minlength=P)
    ro = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    col = lambda k, d, t: (np.asarray(spec[k])[order] if k in spec else np.full(n, d)).astype(t)  # noqa: E731
    events = {"rank": rank[order].astype(np.int32),
              "seq": (np.arange(n) - np.repeat(ro[:-1], counts)).astype(np.int64),
              "op": np.array([OP_CODE[str(x)] for x in np.asarray(spec["op"])[order]], np.uint8),
              "peer": col("peer", -1, np.int32), "recv_peer": col("recv_peer", -1, np.int32),
              "root": col("root", -1, np.int32), "tag": col("tag", 0, np.int32),
              "comm": col("comm", 0, np.int32), "aux": np.zeros(n, np.int32),
              "bytes": col("bytes", 0, np.int64), "recv_bytes": col("recv_bytes", 0, np.int64),
              "req": col("req", -1, np.int64), "t_comp": col("comp", 0.0, np.float64),
              "phase": col("phase", 0, np.int32)}
    c = spec["completions"]
    if not isinstance(c, dict):
        rows = np.asarray(c, np.int64).reshape(-1, 3)
        c = {"rank": rows[:, 0], "seq": rows[:, 1], "req": rows[:, 2]}
    m = len(c["rank"])
    comp = {k: np.asarray(c.get(k, np.full(m, -1)), np.int64) for k in ("rank", "seq", "req", "bytes", "peer", "tag")}
    corder = np.lexsort((comp["seq"], comp["rank"]))
    comp = {k: v[corder].astype(np.int32 if k in ("rank", "peer", "tag") else np.int64) for k, v in comp.items()}
    lists = {k: np.zeros(0, np.int64) for k in ("rank", "seq", "kind", "start", "length", "values")}
    meta = {"nprocs": P, "complete": True, "work_mode": "cpu-time", "trace_kind": "physical",
            "app": "test"}
    Trace(meta=meta, events=events, rank_offsets=ro, completions=comp, lists=lists,
          comms=spec.get("comms") or CommTable.world_only(P)).to_hdf5(path, overwrite=True)
    return path


def mixed_machine(intra: bool) -> Machine:
    """Eager below 2000 B; with ``intra``, pairs of ranks share a node with a faster link."""
    return Machine(name="mixed", network=LogGP(L=5e-6, o=1e-6, g=2e-6, G=1e-9, O=1e-10), S=2000,
                   cores=2 if intra else 1,
                   intra=LogGP(L=1e-6, o=0.5e-6, g=0.3e-6, G=3e-10, O=0.0) if intra else None)


HEADER = f"""
import json, sys
import numpy as np
from mpi4py import MPI
from replay import DeadlockError, LogGP, Machine, Program, ReplayState, load
from replay.workers import replay_workers, running_under_mpi
from signature import load_trace
SPLIT = dict(min_events_per_worker=0)  # every worker gets a piece, however small the trace
{inspect.getsource(mixed_program)}
{inspect.getsource(mixed_machine)}

def report(key, res):
    if res is not None:
        print(json.dumps({{"key": key, "pieces": res.pieces, "runtime": res.runtime,
                          "finish": res.finish.tolist(), "te": res.te.tolist(),
                          "event_end": res.event_end.tolist(), "wait": res.wait.tolist(),
                          "under_mpi": running_under_mpi()}}), flush=True)
"""


def run_workers(tmp_path, body: str, n: int, *, expect_ok: bool = True) -> subprocess.CompletedProcess:
    """Run HEADER + ``body`` with ``mpiexec -n n`` from the repository root."""
    script = tmp_path / "workers_script.py"
    script.write_text(HEADER + textwrap.dedent(body))
    env = dict(os.environ, MPIR_CVAR_ENABLE_HEAVY_YIELD="1")
    env.pop("LD_PRELOAD", None)
    res = subprocess.run(["mpiexec", "-n", str(n), sys.executable, str(script)], cwd=ROOT,
                         capture_output=True, text=True, env=env, timeout=TIMEOUT)
    if expect_ok:
        assert res.returncode == 0, res.stdout + res.stderr
    return res


def records(res) -> dict:
    """Worker output lines that are JSON objects, by their ``key``."""
    return {d["key"]: d for d in (json.loads(line) for line in res.stdout.splitlines()
                                  if line.startswith("{"))}


def assert_same(got: dict, ref) -> None:
    """Worker 0's printed result equals ``ref`` to the last bit (JSON floats round-trip)."""
    assert got["runtime"] == ref.runtime
    for key in ("finish", "te", "event_end", "wait"):
        assert np.array_equal(np.array(got[key], np.float64), getattr(ref, key)), key


def test_two_workers_replay_the_bundled_traces_bit_for_bit(tmp_path):
    """mpiexec -n 2: stencil and FFT at P=16 give worker 0 exactly replay()'s numbers."""
    apps = ("stencil", "fft2d")
    res = run_workers(tmp_path, f"""
        for app in {apps!r}:
            p = Program.from_trace(load_trace("traces/" + app + "/P16.h5"))
            report(app, replay_workers(p, load("cluster-a"), **SPLIT))
    """, 2)
    got = records(res)
    assert sorted(got) == sorted(apps)
    for app in apps:
        ref = replay(Program.from_trace(load_trace(TRACES / app / "P16.h5")), load("cluster-a"))
        assert got[app]["pieces"] == 2 and got[app]["under_mpi"] is True
        assert_same(got[app], ref)


PING_PONG = dict(rank=[0, 0, 1, 1], op=["Send", "Recv", "Recv", "Send"], peer=[1, 1, 0, 0],
                 bytes=[8, 0, 0, 8], recv_bytes=[0, 8, 8, 0], comp=[1e-6, 0, 2e-6, 0])


def test_three_workers_share_collectives_over_subcommunicators_bit_for_bit(tmp_path):
    """mpiexec -n 3: collectives spanning workers (world, rows, reversed columns; rendezvous;
    intra-node links; nonblocking) are evaluated together and still match replay() exactly;
    with 2 ranks for 3 workers one worker has none."""
    cases = [(12, 1, True, "algorithms"), (16, 2, False, "algorithms"), (12, 3, True, "closed-form")]
    res = run_workers(tmp_path, f"""
        for P, seed, intra, coll in {cases!r}:
            res = replay_workers(mixed_program(P, seed), mixed_machine(intra), collectives=coll, **SPLIT)
            report(f"{{P}}-{{seed}}-{{intra}}-{{coll}}", res)
        report("ping-pong", replay_workers(Program.from_arrays(2, **{PING_PONG!r}), mixed_machine(False), **SPLIT))
    """, 3)
    got = records(res)
    assert len(got) == len(cases) + 1
    for P, seed, intra, coll in cases:
        ref = replay(mixed_program(P, seed), mixed_machine(intra), collectives=coll)
        assert_same(got[f"{P}-{seed}-{intra}-{coll}"], ref)
    assert got["ping-pong"]["pieces"] == 2
    assert_same(got["ping-pong"], replay(Program.from_arrays(2, **PING_PONG), mixed_machine(False)))


def test_a_failing_worker_aborts_the_job_with_its_name(tmp_path):
    """An error on worker 1 ends every worker (no hang), exit status non-zero, and stderr
    says ``worker 1 of 2: <error>`` with the ranks it replays."""
    res = run_workers(tmp_path, """
        if MPI.COMM_WORLD.Get_rank() == 1:
            def broken(self, **kw):
                raise RuntimeError("injected failure")
            ReplayState.run = broken
        replay_workers(Program.from_trace(load_trace("traces/stencil/P16.h5")), load("cluster-a"), **SPLIT)
        print("finished", flush=True)
    """, 2, expect_ok=False)
    assert res.returncode != 0
    assert "worker 1 of 2: RuntimeError: injected failure" in res.stderr
    assert "ranks 8..15" in res.stderr
    assert "finished" not in res.stdout


def test_a_deadlock_is_raised_on_every_worker(tmp_path):
    """A receive without a send: every worker raises the DeadlockError replay() raises."""
    stuck = dict(rank=[0, 1, 2, 3], op=["Recv", "Init", "Recv", "Init"], peer=[3, -1, 1, -1],
                 recv_bytes=[8, 0, 8, 0], name="stuck")
    res = run_workers(tmp_path, f"""
        error = None
        try:
            replay_workers(Program.from_arrays(4, **{stuck!r}), load("cluster-a"), **SPLIT)
        except DeadlockError as err:
            error = str(err)
        errors = MPI.COMM_WORLD.gather(error, root=0)
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(json.dumps({{"key": "errors", "errors": errors}}), flush=True)
    """, 2)
    errors = records(res)["errors"]["errors"]
    with pytest.raises(DeadlockError) as ref:
        replay(Program.from_arrays(4, **stuck), load("cluster-a"))
    assert errors == [str(ref.value)] * 2


def test_running_under_mpi_reads_the_launcher_environment(monkeypatch):
    """PMI_SIZE / OMPI_COMM_WORLD_SIZE > 1 means workers; 1 or nothing does not, and mpi4py is
    not imported to find out."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    had_mpi = "mpi4py.MPI" in sys.modules
    if not had_mpi:
        assert running_under_mpi() is False
    monkeypatch.setenv("PMI_SIZE", "1")
    assert running_under_mpi() is False
    monkeypatch.setenv("PMI_SIZE", "4")
    assert running_under_mpi() is True
    monkeypatch.delenv("PMI_SIZE")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert running_under_mpi() is True
    assert ("mpi4py.MPI" in sys.modules) == had_mpi


def test_worker_bounds_are_the_pieces_of_replay():
    """Worker w replays the ranks of piece w of replay(..., pieces=W); extra workers get none."""
    assert worker_bounds(16, 2).tolist() == [0, 8, 16]
    assert worker_bounds(10, 3).tolist() == [0, 3, 7, 10]
    b = worker_bounds(3, 5)
    assert b[0] == 0 and b[-1] == 3 and np.all(np.diff(b) >= 0) and np.sum(np.diff(b) > 0) == 3


ONE_RANK = dict(rank=[0, 0], op=["Init", "Finalize"], comp=[1e-6, 2e-6])


def test_a_small_trace_is_replayed_by_worker_0_alone(tmp_path):
    """By default a trace under MIN_EVENTS_PER_WORKER events per worker is not split:
    worker 0 replays it (one piece, the same bits), the other returns None; a deadlock
    is still raised on every worker; one rank is never split."""
    stuck = dict(rank=[0, 1, 2, 3], op=["Recv", "Init", "Recv", "Init"], peer=[3, -1, 1, -1],
                 recv_bytes=[8, 0, 8, 0], name="stuck")
    res = run_workers(tmp_path, f"""
        res = replay_workers(Program.from_trace(load_trace("traces/stencil/P16.h5")), load("cluster-a"))
        report("stencil", res)
        others = MPI.COMM_WORLD.gather(res is None, root=0)
        report("one rank", replay_workers(Program.from_arrays(1, **{ONE_RANK!r}), load("cluster-a"), **SPLIT))
        error = None
        try:
            replay_workers(Program.from_arrays(4, **{stuck!r}), load("cluster-a"))
        except DeadlockError as err:
            error = str(err)
        errors = MPI.COMM_WORLD.gather(error, root=0)
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(json.dumps({{"key": "rest", "errors": errors, "none": others}}), flush=True)
    """, 2)
    got = records(res)
    ref = replay(Program.from_trace(load_trace(TRACES / "stencil" / "P16.h5")), load("cluster-a"))
    assert got["stencil"]["pieces"] == 1
    assert_same(got["stencil"], ref)
    assert got["rest"]["none"] == [False, True]
    assert got["one rank"]["pieces"] == 1  # nothing to share, even when told to split
    assert_same(got["one rank"], replay(Program.from_arrays(1, **ONE_RANK), load("cluster-a")))
    with pytest.raises(DeadlockError) as dead:
        replay(Program.from_arrays(4, **stuck), load("cluster-a"))
    assert got["rest"]["errors"] == [str(dead.value)] * 2


def test_a_tightly_coupled_trace_is_replayed_by_worker_0_alone(tmp_path):
    """Where the pieces would wait on each other every few dozen events (cg at P = 16: 303
    passes for 10,940 events), the default replays on worker 0 alone, from a Program or a
    trace file, however few events a worker is asked to keep; min_events_per_worker=0 still
    splits. The same bits every way."""
    res = run_workers(tmp_path, """
        path = "traces/cg/P16.h5"
        report("program", replay_workers(Program.from_trace(load_trace(path)), load("cluster-a"),
                                         min_events_per_worker=1))
        report("file", replay_workers(path, load("cluster-a"), min_events_per_worker=1))
        report("split", replay_workers(path, load("cluster-a"), **SPLIT))
    """, 2)
    got = records(res)
    ref = replay(Program.from_trace(load_trace(TRACES / "cg" / "P16.h5")), load("cluster-a"))
    assert got["program"]["pieces"] == got["file"]["pieces"] == 1
    assert got["split"]["pieces"] == 2
    for key in ("program", "file", "split"):
        assert_same(got[key], ref)


def test_workers_used_keeps_enough_events_per_worker():
    """As many workers as keep min_events each (at least one); 0 means all; bounds of the
    unused workers are empty pieces at the end."""
    m = MIN_EVENTS_PER_WORKER
    assert workers_used(m - 1, 2) == 1
    assert workers_used(2 * m, 2) == 2
    assert workers_used(3 * m, 4) == 3
    assert workers_used(10, 4, 0) == 4
    assert workers_used(10, 4, 5) == 2
    with pytest.raises(ValueError, match="min_events_per_worker"):
        workers_used(10, 2, -1)
    assert worker_bounds(16, 4, 2).tolist() == [0, 8, 16, 16, 16]
    assert worker_bounds(16, 2, 1).tolist() == [0, 16, 16]


READ_BODY = """
import dataclasses
from replay.pieces import extract, read_piece
from replay.workers import worker_bounds
comm = MPI.COMM_WORLD
for path, share in PATHS:
    whole = Program.from_trace(load_trace(path))
    b = worker_bounds(whole.nprocs, comm.size)
    got = read_piece(path, comm, b)
    ref = extract(whole, int(b[comm.rank]), int(b[comm.rank + 1]), b, comm.rank)
    same = all(np.array_equal(getattr(got.program, f.name), getattr(ref.program, f.name))
               for f in dataclasses.fields(ref.program) if isinstance(getattr(ref.program, f.name), np.ndarray))
    same &= all(np.array_equal(getattr(got, k), getattr(ref, k)) for k in
                ("cross_offsets", "cross_ids", "cross_pos", "coll_key", "inst_parts"))
    same &= got.n_events_total == whole.n_events and got.n_phases == whole.n_phases
    equal = comm.gather(bool(same), root=0)
    res = replay_workers(path, mixed_machine(True), share_collectives=share, **SPLIT)
    if comm.rank == 0:
        print(json.dumps({"key": path + str(share), "pieces_equal": equal}), flush=True)
    report(path + "/" + str(share), res)
"""


@pytest.mark.parametrize("n", [2, 3])
def test_workers_read_their_rank_blocks_bit_for_bit(tmp_path, n):
    """replay_workers(path): each worker reads only its ranks and builds its piece with the
    ghost events of the others; the piece equals the one cut out of the whole program, and
    worker 0's result equals replay() to the last bit, on bundled traces, a program of
    sub-communicators, Sendrecv and Iallreduce, and random programs with wildcard receives
    (collectives evaluated whole on each worker or shared)."""
    from random_programs import random_program

    paths = [str(TRACES / app / "P16.h5") for app in ("stencil", "fft2d", "cg", "sweep")]
    paths.append(str(write_trace_file(tmp_path / "mixed.h5", mixed_program(12, 4, columns=True))))
    for seed in range(4):
        spec = random_program(7, 14, seed)
        paths.append(str(write_trace_file(tmp_path / f"random{seed}.h5", spec)))
    cases = [(p, share) for p in paths for share in ((False, True) if "mixed" in p else (False,))]
    res = run_workers(tmp_path, f"PATHS = {cases!r}\n" + READ_BODY, n)
    got = records(res)
    for path, share in cases:
        assert got[path + str(share)]["pieces_equal"] == [True] * n, path
        ref = replay(Program.from_trace(load_trace(path)), mixed_machine(True))
        assert got[path + "/" + str(share)]["pieces"] == n
        assert_same(got[path + "/" + str(share)], ref)


def test_a_missing_trace_file_is_an_error_on_every_worker(tmp_path):
    """replay_workers on a file that is not there raises TraceFormatError on every worker
    (no abort, no hang)."""
    res = run_workers(tmp_path, """
        from signature.errors import TraceFormatError
        try:
            replay_workers("no-such-trace.h5", load("cluster-a"))
            error = None
        except TraceFormatError as err:
            error = str(err)
        errors = MPI.COMM_WORLD.gather(error, root=0)
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(json.dumps({"key": "errors", "errors": errors}), flush=True)
    """, 2)
    assert records(res)["errors"]["errors"] == ["no-such-trace.h5: no such trace file"] * 2


def test_a_workers_piece_holds_about_its_share_of_the_program(tmp_path):
    """Each of 2 workers reading the stencil P16 trace holds under 60% of the whole program's
    bytes (its ranks' events, messages and the collectives they enter)."""
    res = run_workers(tmp_path, """
        from replay.pieces import extract, read_piece
        from replay.workers import worker_bounds
        comm = MPI.COMM_WORLD
        path = "traces/stencil/P16.h5"
        whole = extract(Program.from_trace(load_trace(path)), 0, 16)
        piece = read_piece(path, comm, worker_bounds(16, comm.size))
        shares = comm.gather(piece.nbytes() / whole.nbytes(), root=0)
        if comm.rank == 0:
            print(json.dumps({"key": "shares", "shares": shares}), flush=True)
    """, 2)
    shares = records(res)["shares"]["shares"]
    assert len(shares) == 2 and all(0.3 < s < 0.6 for s in shares), shares
