"""A Fortran MPI program is traced like its C twin (where an MPI with Fortran bindings exists).

The PyPI MPICH wheel has no Fortran bindings, so this runs with an MPI that
has them, found as a matching (mpifort, mpicc, mpiexec) triple: the one on
PATH, or Debian's MPICH (`apt-get install gfortran libmpich-dev`:
mpifort.mpich, mpicc.mpich, mpiexec.mpich). The tracer is then built with
that MPI's mpicc (SIGEX_MPICC), in its own cache.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from conftest import EXAMPLES
from signature import load_trace, trace_run


def _fortran_mpi():
    for suffix in ("", ".mpich", ".openmpi"):
        tools = [shutil.which(t + suffix) for t in ("mpifort", "mpicc", "mpiexec")]
        if all(tools):
            return tools
    return None


TOOLS = _fortran_mpi()


@pytest.mark.skipif(TOOLS is None, reason="no MPI with Fortran bindings here (mpifort + mpicc + "
                    "mpiexec); the PyPI MPICH has none: apt-get install gfortran libmpich-dev")
def test_fortran_program_traced_like_its_c_twin(tmp_path, monkeypatch):
    """mpi_isend_ and friends reach the tracer: the Fortran ring gives the C ring's events."""
    mpifort, mpicc, mpiexec = TOOLS
    monkeypatch.setenv("SIGEX_MPICC", mpicc)
    monkeypatch.setenv("SIGEX_CACHE_DIR", str(tmp_path / "cache"))
    f_exe, c_exe = tmp_path / "ring_f", tmp_path / "ring_c"
    subprocess.run([mpifort, "-O2", "-o", str(f_exe), str(EXAMPLES / "fortran" / "ring_halo.f90")],
                   check=True)
    subprocess.run([mpicc, "-O2", "-o", str(c_exe), str(EXAMPLES / "c" / "ring_halo.c"), "-lm"],
                   check=True)
    runs = {}
    for name, exe in (("f", f_exe), ("c", c_exe)):
        res = trace_run([str(exe), "48", "10"], 3, tmp_path / name / "P3.h5", mpiexec=mpiexec)
        assert res.ok, res.trace.meta.get("incomplete_reason")
        runs[name] = load_trace(res.path)
    tf, tc = runs["f"], runs["c"]
    for r in range(3):
        a, b = tf.rank_events(r), tc.rank_events(r)
        for col in ("op", "peer", "tag", "bytes", "recv_bytes", "comm", "aux"):
            np.testing.assert_array_equal(a[col], b[col], err_msg=f"rank {r} column {col}")
    names = [tf.op_name(o) for o in tf.rank_events(1)["op"]]
    assert names.count("Isend") == 20 and names.count("Allreduce") == 2
