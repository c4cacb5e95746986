"""Sends that nobody receives are the program's own doing, not a damaged trace: the signature
names them in a note and keeps them, and the replay runs past them; a receive without its
send still refuses the trace, naming rank and event."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import TRACES, needs_mpi
from signature import extract, load_trace, trace_run
from signature.errors import TraceFormatError
from signature.model import Signature

PROGRAM = Path(__file__).with_name("programs") / "unreceived.c"


@needs_mpi
@pytest.mark.skipif(shutil.which("mpicc.openmpi") is None,
                    reason="needs Debian's Open MPI (apt-get install libopenmpi-dev): MPICH aborts such a run")
def test_a_send_nobody_receives_is_noted_and_replayed(tmp_path, monkeypatch):
    from replay import Program, load, replay
    for var in ("SIGEX_MPICC", "SIGEX_MPIEXEC"):
        monkeypatch.delenv(var, raising=False)
    exe = tmp_path / "unreceived"
    subprocess.run(["mpicc.openmpi", "-O1", "-o", str(exe), str(PROGRAM)], check=True)
    res = trace_run([str(exe)], 3, tmp_path / "P3.h5")
    assert res.ok, res.trace.meta.get("incomplete_reason")
    sig = extract(res.trace)
    (note,) = sig.notes
    assert note.startswith("rank 0 sent 1 message to rank 1 that rank 1 never received")
    assert "Isend of 0 bytes" in note and "notes:" in sig.table()
    assert [(p.kind, p.weight) for p in sig.phases] == [("initial", 1), ("loop", 20), ("final", 1)]
    assert Signature.from_dict(sig.to_dict()).notes == sig.notes
    assert replay(Program.from_trace(res.trace), load("cluster-a")).runtime > 0


def test_a_receive_without_its_send_is_refused():
    """A send removed from the trace leaves a receive without partner: named, not phased."""
    t = load_trace(TRACES / "nbody" / "P4.h5")
    ev = t.events
    row = np.flatnonzero((ev["rank"] == 2) & (ev["op"] == t.op_code("Sendrecv")))[0]
    events = {k: v.copy() for k, v in ev.items()}
    events["peer"][row] = -1  # the Sendrecv's send half is gone (MPI_PROC_NULL)
    import dataclasses
    broken = dataclasses.replace(t, events=events)
    with pytest.raises(TraceFormatError, match=r"unmatched point-to-point messages: rank \d receives \d+ "
                       r"messages from rank 2 but rank 2 sends \d+; the first unmatched receive is rank \d "
                       r"event seq \d+ \(Sendrecv\)"):
        extract(broken)
