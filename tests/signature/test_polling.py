"""Polling loops are held, not written call by call: MPI_Test/Iprobe loops that find
nothing become one event whose ``repeat`` counts the calls (hpcc's RandomAccess makes
millions), and nothing else about the trace changes."""

from __future__ import annotations

import json

import numpy as np
from conftest import needs_mpi

from signature import load_trace
from signature.trace import OP_CODE

pytestmark = needs_mpi

POLLING = """
    import json, sys, time
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    counts = {}
    if comm.rank == 0:
        time.sleep(0.05)
        comm.Send(np.arange(8, dtype=np.float64), dest=1, tag=5)
        time.sleep(0.05)
        comm.Send(np.arange(4, dtype=np.int32), dest=1, tag=6)
    else:
        buf = np.empty(8, np.float64)
        req = comm.Irecv(buf, source=0, tag=5)
        n = 0
        while not req.Test():
            n += 1
        counts["test"] = n
        m = 0
        while not comm.Iprobe(source=0, tag=6):
            m += 1
        counts["iprobe"] = m
        comm.Recv(np.empty(4, np.int32), source=0, tag=6)
        with open(sys.argv[1], "w") as f:
            json.dump(counts, f)
    comm.Barrier()
"""


def test_polling_loops_become_one_event_each(run_traced, tmp_path):
    """A Test loop and an Iprobe loop: one held event each with the loop's call count,
    then the call that found the message, with its completion and bytes."""
    counts_file = tmp_path / "counts.json"
    res = run_traced(POLLING, 2, counts_file)
    counts = json.loads(counts_file.read_text())
    assert counts["test"] > 10 and counts["iprobe"] > 10  # the loops really polled
    t = load_trace(res.path)
    ev = t.rank_events(1)
    ops = [t.op_name(o) for o in ev["op"]]
    assert ops.count("Test") == 2 and ops.count("Iprobe") == 2
    tests = np.flatnonzero(ev["op"] == OP_CODE["Test"])
    probes = np.flatnonzero(ev["op"] == OP_CODE["Iprobe"])
    assert ev["repeat"][tests].tolist() == [counts["test"], 1]
    assert ev["aux"][tests].tolist() == [0, 1]
    assert ev["repeat"][probes].tolist() == [counts["iprobe"], 1]
    assert ev["aux"][probes].tolist() == [0, 1] and int(ev["peer"][probes[1]]) == 0
    held = tests[0]
    assert ev["t_comm"][held] > 0.02  # the held event spans the loop (rank 0 slept 50 ms)
    assert np.all(np.diff(ev["seq"]) == 1)  # seq stays dense and ordered
    comp = t.completions
    done = np.flatnonzero((comp["rank"] == 1) & (comp["seq"] == ev["seq"][tests[1]]))
    assert len(done) == 1 and int(comp["bytes"][done[0]]) == 64
    assert np.all(t.rank_events(0)["repeat"] == 1)


CANCEL = """
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if comm.rank == 1:
        req = comm.Irecv(np.empty(8, np.float64), source=0, tag=9)   # never sent: cancelled
        req.Cancel()
        st = MPI.Status()
        req.Wait(st)
        assert st.Is_cancelled()
    comm.Barrier()
    if comm.rank == 0:
        comm.Send(np.arange(4, dtype=np.float64), dest=1, tag=9)
    elif comm.rank == 1:
        comm.Recv(np.empty(4, np.float64), source=0, tag=9)
    comm.Barrier()
"""


def test_cancelled_receive_is_recorded_and_replayed_without_its_message(run_traced):
    """MPI_Cancel names its request; the completion marks it cancelled (peer MPI_PROC_NULL,
    0 bytes); the replay matches the later send with the later receive, not the cancelled one."""
    from replay import Program, load, replay
    from signature.trace import PEER_NULL

    t = load_trace(run_traced(CANCEL, 2).path)
    ev = t.rank_events(1)
    cancel = np.flatnonzero(ev["op"] == OP_CODE["Cancel"])
    irecv = np.flatnonzero(ev["op"] == OP_CODE["Irecv"])
    assert len(cancel) == 1 and len(irecv) == 1
    assert ev["req"][cancel[0]] == ev["req"][irecv[0]] and ev["peer"][cancel[0]] == 0
    comp = t.completions
    row = np.flatnonzero((comp["rank"] == 1) & (comp["req"] == ev["req"][irecv[0]]))
    assert int(comp["peer"][row[0]]) == PEER_NULL and int(comp["bytes"][row[0]]) == 0
    program = Program.from_trace(t)
    assert len(program.msg_src) == 1  # the cancelled receive is no message
    assert int(program.msg_bytes[0]) == 32
    res = replay(program, load("cluster-a"))
    assert np.isfinite(res.runtime) and res.runtime > 0
