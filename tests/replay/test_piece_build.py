"""How a worker builds its piece from its rank block: it exchanges one summary per
collective instance, not the other blocks' collective calls (the root and block size of an
instance come from every member, a clash of operations is an error on every worker), and
it reads only the columns the match uses."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import needs_mpi
from replay import Program, replay
from test_workers import READ_BODY, assert_same, mixed_machine, records, run_workers, write_trace_file


def uneven_collectives(P: int) -> dict:
    """P ranks whose collective calls disagree in what each member records, as real traces
    do: a Gatherv whose root (in the upper half) receives far more than the others send, a
    Bcast whose root only the upper half records (-1 elsewhere), a Reduce whose size only
    the lower half records, and an Alltoallv whose totals differ per rank; with a ring of
    messages between them so that the halves also exchange point-to-point."""
    names = ("rank", "op", "peer", "recv_peer", "root", "bytes", "recv_bytes", "tag", "phase", "comp")
    ev = {k: [] for k in names}
    rng = np.random.default_rng(7)

    def add(r, op, root=-1, b=0, rb=0, peer=-1, rpeer=-1, tag=0, phase=0):
        for k, v in zip(names, (r, op, peer, rpeer, root, b, rb, tag, phase, float(rng.random() * 3e-5))):
            ev[k].append(v)

    top = P - 2
    for r in range(P):
        upper = r >= P // 2
        add(r, "Init", phase=0)
        add(r, "Gatherv", root=top, b=100 + 10 * r, rb=100_000 if r == top else 0, phase=1)
        add(r, "Sendrecv", peer=(r + 1) % P, rpeer=(r - 1) % P, b=5000, rb=5000, tag=2, phase=1)
        add(r, "Bcast", root=1 if upper else -1, b=40_000 if r == 1 else 0, rb=40_000, phase=1)
        add(r, "Reduce", root=0, b=0 if upper else 3000, rb=0 if upper else 3000, phase=2)
        add(r, "Alltoallv", b=64 * P * (1 + r % 3), rb=64 * P, phase=2)
        add(r, "Finalize", phase=2)
    return {"nprocs": P, **{k: np.array(v) for k, v in ev.items()},
            "completions": {k: np.zeros(0, np.int64) for k in ("rank", "seq", "req")}}


def _pieces(tmp_path, paths: list[str], n: int) -> dict:
    """test_workers's READ_BODY on ``paths`` with ``n`` workers: per path, whether each
    worker's piece equals the one cut out of the whole program, and worker 0's result."""
    got = records(run_workers(tmp_path, f"PATHS = {[(p, False) for p in paths]!r}\n" + READ_BODY, n))
    return {p: (got[p + "False"]["pieces_equal"], got[p + "/False"]) for p in paths}


def test_instance_summaries_give_every_member_the_whole_instance(tmp_path):
    """Two and three workers on a trace whose members record different roots and sizes: each
    worker's piece equals the one cut out of the whole program (root and block size the
    largest over all members) and worker 0's result equals replay() to the last bit."""
    paths = []
    for P in (8, 13):
        spec = uneven_collectives(P)
        paths.append(str(write_trace_file(tmp_path / f"uneven{P}.h5", spec)))
    for n in (2, 3):
        got = _pieces(tmp_path, paths, n)
        for path in paths:
            assert got[path][0] == [True] * n, (n, path)
            from signature import load_trace
            ref = replay(Program.from_trace(load_trace(path)), mixed_machine(True))
            assert_same(got[path][1], ref)


def test_a_worker_holds_no_collective_call_of_another_block(tmp_path):
    """The ghosts a worker receives are whole streams of the ranks its ranks exchange
    messages with, and nothing else: on a trace of collectives alone (no messages) no
    event travels."""
    spec = uneven_collectives(8)
    keep = ~np.isin(spec["op"], ["Sendrecv"])
    spec = {k: (v[keep] if isinstance(v, np.ndarray) and len(v) == len(keep) else v) for k, v in spec.items()}
    path = str(write_trace_file(tmp_path / "colls.h5", spec))
    res = run_workers(tmp_path, f"""
        from signature.io import read_trace_ranks
        from replay.pieces import _ghost_rows
        from replay.workers import worker_bounds
        comm = MPI.COMM_WORLD
        b = worker_bounds(8, comm.size)
        block = read_trace_ranks({path!r}, int(b[comm.rank]), int(b[comm.rank + 1]), columns=())
        rows = _ghost_rows(block, int(b[comm.rank]), int(b[comm.rank + 1]), b, comm.rank, False)
        n = comm.gather(sum(len(r[0]) for r in rows if r is not None), root=0)
        if comm.rank == 0:
            print(json.dumps({{"key": "ghosts", "n": n}}), flush=True)
        report("replay", replay_workers({path!r}, mixed_machine(False), **SPLIT))
    """, 2)
    got = records(res)
    assert got["ghosts"]["n"] == [0, 0]
    from signature import load_trace
    assert_same(got["replay"], replay(Program.from_trace(load_trace(path)), mixed_machine(False)))


def test_a_collective_called_as_different_operations_is_an_error_on_every_worker(tmp_path):
    """Ranks of the lower block call Allreduce where those of the upper call Bcast: no
    worker sees the clash in its own calls, the summaries show it, and every worker raises
    the error naming a rank of each side."""
    P = 8
    ops = ["Allreduce"] * (P // 2) + ["Bcast"] * (P // 2)
    spec = {"nprocs": P, "rank": np.arange(P), "op": np.array(ops), "root": np.zeros(P, np.int64),
            "bytes": np.full(P, 8), "recv_bytes": np.full(P, 8), "comp": np.zeros(P),
            "completions": {k: np.zeros(0, np.int64) for k in ("rank", "seq", "req")}}
    path = str(write_trace_file(tmp_path / "clash.h5", spec))
    res = run_workers(tmp_path, f"""
        from signature.errors import TraceFormatError
        from replay.pieces import read_piece
        from replay.workers import worker_bounds
        comm = MPI.COMM_WORLD
        try:
            read_piece({path!r}, comm, worker_bounds({P}, comm.size))
            error = None
        except TraceFormatError as err:
            error = str(err)
        errors = comm.gather(error, root=0)
        if comm.rank == 0:
            print(json.dumps({{"key": "errors", "errors": errors}}), flush=True)
    """, 2)
    errors = records(res)["errors"]["errors"]
    assert len(errors) == 2 and errors[0] == errors[1], errors
    assert "collective call 0 on communicator 0 is" in errors[0]
    assert "Allreduce on rank 0" in errors[0] and "Bcast on rank 4" in errors[0]
    assert "members must call collectives in the same order" in errors[0]


def test_a_worker_reads_only_the_completion_columns_the_match_uses():
    """read_trace_ranks(completion_columns=...) reads those columns (and the ranks) of the
    block's completions, the same rows as a whole read; the worker skips the bytes column,
    which Program.from_trace does not use."""
    from conftest import TRACES
    from replay.pieces import _COMPLETION_COLUMNS
    from signature import load_trace
    from signature.io import read_trace_ranks

    path = TRACES / "stencil" / "P16.h5"
    whole = read_trace_ranks(path, 5, 11, columns=())
    part = read_trace_ranks(path, 5, 11, columns=(), completion_columns=("seq", "req"))
    assert set(part.completions) == {"rank", "seq", "req"}
    for c in part.completions:
        assert np.array_equal(part.completions[c], whole.completions[c]), c
    assert "bytes" not in _COMPLETION_COLUMNS
    # what the match reads of a completion is all there: the same program either way
    full = load_trace(path)
    slim = load_trace(path)
    slim.completions = {c: v for c, v in slim.completions.items() if c in _COMPLETION_COLUMNS}
    a, b = Program.from_trace(full), Program.from_trace(slim)
    for f in ("send_msg", "recv_msg", "wait_slots", "wait_offsets", "msg_src", "msg_dst", "msg_bytes"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f


@needs_mpi
def test_neighbourhood_collectives_still_travel_whole(tmp_path, monkeypatch):
    """A real traced run with neighbourhood collectives (tests/signature/programs/neighbors.c
    at P = 4: a Cartesian Neighbor_alltoall, Neighbor_allgatherv and Ineighbor_alltoallv on
    a graph ring): their patterns come from every member's destinations, so every collective
    call travels; two workers' pieces equal the cut ones and the result equals the numpy
    engine's replay, the reference, to the last bit."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from signature import load_trace, trace_run

    monkeypatch.setenv("SIGEX_CACHE_DIR", str(tmp_path / "cache"))
    mpicc = Path(sys.prefix) / "bin" / "mpicc"
    mpicc = str(mpicc) if mpicc.exists() else shutil.which("mpicc")
    src = Path(__file__).parents[1] / "signature" / "programs" / "neighbors.c"
    exe = tmp_path / "nbr"
    subprocess.run([mpicc, "-O1", "-o", str(exe), str(src), "-lm"], check=True)
    res = trace_run([str(exe)], 4, tmp_path / "t" / "P4.h5")
    assert res.ok, res.trace.meta.get("incomplete_reason")
    path = str(res.path)
    program = Program.from_trace(load_trace(path))
    from replay.program import COLLECTIVE_NAMES
    assert np.any(program.coll_op == COLLECTIVE_NAMES.index("Neighbor"))
    equal, res = _pieces(tmp_path, [path], 2)[path]
    assert equal == [True, True]
    assert_same(res, replay(program, mixed_machine(True), kernel="numpy"))
    NEIGHBOR_TRACE.append(path)


NEIGHBOR_TRACE: list = []  # the traced run above, for the next test


def test_the_kernel_equals_the_reference_on_neighbourhood_collectives():
    """One process, compiled kernel against the numpy engine, on the traced neighbors.c run,
    to the last bit. (They differed while a neighbourhood collective was one round in which
    a member sent and received several messages: the kernel processed a member's receives
    one after another, numpy kept one of them; rank 1's first Neighbor_alltoall on the
    2 x 2 grid.)"""
    if not NEIGHBOR_TRACE:
        pytest.skip("needs the traced run of the test above")
    from replay import load
    from signature import load_trace
    program = Program.from_trace(load_trace(NEIGHBOR_TRACE[0]))
    m = load("cluster-a")
    ref, got = replay(program, m, kernel="numpy"), replay(program, m)
    assert np.array_equal(ref.event_end, got.event_end)


def test_a_trace_without_collectives_and_one_with_them_on_one_side(tmp_path):
    """Point-to-point only (no instance anywhere), and a sub-communicator collective whose
    members are all in one worker's block (the other worker has no instance): pieces equal
    the cut ones, results equal replay()."""
    P = 6
    ring = {"nprocs": P, "rank": np.repeat(np.arange(P), 2),
            "op": np.array(["Send", "Recv"] * P),
            "peer": np.array([x for r in range(P) for x in ((r + 1) % P, (r - 1) % P)]),
            "bytes": np.array([4000, 0] * P), "recv_bytes": np.array([0, 4000] * P),
            "tag": np.zeros(2 * P, np.int64), "comp": np.full(2 * P, 1e-6),
            "completions": {k: np.zeros(0, np.int64) for k in ("rank", "seq", "req")}}
    # even ranks send first, odd ones receive first: no deadlock
    for r in range(1, P, 2):
        ring["op"][2 * r:2 * r + 2] = ["Recv", "Send"]
        ring["peer"][2 * r:2 * r + 2] = [(r - 1) % P, (r + 1) % P]
        ring["bytes"][2 * r:2 * r + 2] = [0, 4000]
        ring["recv_bytes"][2 * r:2 * r + 2] = [4000, 0]
    paths = [str(write_trace_file(tmp_path / "ring.h5", ring))]
    from signature.trace import CommTable
    low = [0, 1, 2]
    comms = CommTable(size=np.array([P, 3], np.int32), inter=np.zeros(2, bool),
                      member_offsets=np.array([0, P, P + 3], np.int64),
                      members=np.array(list(range(P)) + low, np.int32),
                      cart_offsets=np.zeros(3, np.int64), cart_dims=np.zeros(0, np.int32),
                      cart_periods=np.zeros(0, bool))
    ops, comm = [], []
    for r in range(P):
        ops += ["Init"] + (["Bcast", "Allreduce"] if r in low else []) + ["Barrier"]
        comm += [0] + ([1, 1] if r in low else []) + [0]
    rank = np.concatenate([[r] * (4 if r in low else 2) for r in range(P)])
    side = {"nprocs": P, "rank": rank, "op": np.array(ops), "comm": np.array(comm),
            "root": np.where(np.array(ops) == "Bcast", 2, -1), "bytes": np.full(len(ops), 64),
            "recv_bytes": np.full(len(ops), 64), "comp": np.full(len(ops), 2e-6), "comms": comms,
            "completions": {k: np.zeros(0, np.int64) for k in ("rank", "seq", "req")}}
    paths.append(str(write_trace_file(tmp_path / "side.h5", side)))
    got = _pieces(tmp_path, paths, 2)
    from signature import load_trace
    for path in paths:
        assert got[path][0] == [True, True], path
        assert_same(got[path][1], replay(Program.from_trace(load_trace(path)), mixed_machine(True)))
