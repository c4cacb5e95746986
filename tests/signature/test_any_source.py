"""Blocking receives posted with MPI_ANY_SOURCE: the tracer marks them (``aux`` bit 1; the
event's peer is the matched source), and the signature keys them by what the program
asked for, so a master that takes its workers' results as they come repeats one
iteration, whatever order they come in."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np

from conftest import needs_mpi
from signature import extract, load_trace, trace_run
from signature.trace import OP_CODE, PEER_ANY

PROGRAMS = Path(__file__).with_name("programs")


@needs_mpi
def test_a_master_taking_results_as_they_come_repeats_one_iteration(tmp_path):
    exe = tmp_path / "master"
    subprocess.run([os.environ.get("SIGEX_MPICC") or "mpicc", "-O1", "-o", str(exe), str(PROGRAMS / "master.c")],
                   check=True)
    P, iters = 8, 30
    res = trace_run([str(exe), str(iters)], P, tmp_path / f"P{P}.h5")
    assert res.ok, res.trace.meta.get("incomplete_reason")
    trace = load_trace(res.path)
    ev = trace.rank_events(0)
    recv = ev["op"] == OP_CODE["Recv"]
    assert recv.sum() == iters * (P - 1)
    assert np.all(ev["aux"][recv] == 1)  # posted with MPI_ANY_SOURCE
    src = ev["peer"][recv].reshape(iters, P - 1)  # the matched sources: each worker once
    assert np.all(np.sort(src, axis=1) == np.arange(1, P))
    for r in range(1, P):  # the workers' receives name their source
        w = trace.rank_events(r)
        assert np.all(w["aux"][w["op"] == OP_CODE["Recv"]] == 0)
    sig = extract(trace)
    loops = [ph for ph in sig.phases if ph.weight >= 2]
    assert [ph.weight for ph in loops] == [iters], [(ph.kind, ph.weight, ph.pattern) for ph in sig.phases]
    (ph,) = loops
    T, offs = ph.template, ph.template_offsets
    master = slice(int(offs[0]), int(offs[1]))
    r0 = T["op"][master] == OP_CODE["Recv"]
    assert r0.sum() == P - 1 and np.all(T["peer"][master][r0] == PEER_ANY)
