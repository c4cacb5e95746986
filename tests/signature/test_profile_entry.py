"""`python -m signature`: tracing an mpi4py script through mpi4py.profile, no LD_PRELOAD."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from conftest import needs_mpi
from signature import load_trace

pytestmark = needs_mpi

SCRIPT = """
import sys
from mpi4py import MPI
import numpy as np
c = MPI.COMM_WORLD
n = int(sys.argv[1])
a = np.ones(n); b = np.empty(n)
for _ in range(4):
    c.Sendrecv(a, dest=(c.rank + 1) % c.size, recvbuf=b, source=(c.rank - 1) % c.size)
c.Barrier()
"""


def test_python_m_signature_traces_the_script(tmp_path):
    """Every rank loads the tracer itself; rank 0 writes one complete trace after Finalize."""
    script = tmp_path / "ring.py"
    script.write_text(SCRIPT)
    out = tmp_path / "ring" / "P3.h5"
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    res = subprocess.run(["mpiexec", "-n", "3", sys.executable, "-m", "signature", "-o", str(out),
                          "--workload", "n=100", str(script), "100"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert f"wrote {out}" in res.stderr
    t = load_trace(out)
    assert t.complete and t.nprocs == 3
    assert t.meta["app"] == "ring" and t.meta["workload_value"] == "100"
    for r in range(3):
        ev = t.rank_events(r)
        names = [t.op_name(o) for o in ev["op"]]
        assert names == ["Init"] + ["Sendrecv"] * 4 + ["Barrier", "Finalize"]
        sr = ev["op"] == t.op_code("Sendrecv")
        assert np.all(ev["peer"][sr] == (r + 1) % 3)
        assert np.all(ev["recv_peer"][sr] == (r - 1) % 3)
        assert np.all(ev["bytes"][sr] == 800) and np.all(ev["recv_bytes"][sr] == 800)
    assert not (tmp_path / "ring" / "P3.h5.raw").exists()  # raw files cleaned up


def test_python_m_signature_refuses_to_overwrite(tmp_path):
    """An existing output file stops every rank before the script runs."""
    script = tmp_path / "ring.py"
    script.write_text(SCRIPT)
    out = tmp_path / "P2.h5"
    out.write_bytes(b"keep me")
    res = subprocess.run(["mpiexec", "-n", "2", sys.executable, "-m", "signature", "-o", str(out),
                          str(script), "10"], capture_output=True, text=True, timeout=120)
    assert res.returncode != 0
    assert "already exists" in res.stderr
    assert out.read_bytes() == b"keep me"
