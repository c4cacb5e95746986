"""Fortran MPI programs are traced like their C twin, under Open MPI and under MPICH.

Open MPI's Fortran bindings (mpif.h, ``use mpi``, ``use mpi_f08``) and MPICH's
``use mpi_f08`` call ``PMPI_*`` directly, so the tracer wraps the Fortran
symbols themselves (signature/_fortran.py). The same ring is built three ways
(``use mpi``: examples/fortran/ring_halo.f90; fixed-form ``include 'mpif.h'``:
ring_halo_mpif.f; ``use mpi_f08``: ring_halo_f08.f90) with each MPI's own
``mpif90`` and traced with ``trace_run`` as a user would, without SIGEX_MPICC or a
launcher: sigex finds the program's MPI, its ``mpicc`` and its launcher. Every
variant must give the C twin's events (examples/c/ring_halo.c built with that
MPI's ``mpicc``), each call recorded once. The PyPI MPICH has no Fortran
bindings; Debian's come with `apt-get install gfortran libopenmpi-dev libmpich-dev`.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from conftest import EXAMPLES

from signature import load_trace, trace_run

#: The MPIs with Fortran bindings: (Fortran wrapper, C wrapper, apt package).
MPIS = {
    "openmpi": ("mpif90.openmpi", "mpicc.openmpi", "libopenmpi-dev"),
    "debian-mpich": ("mpif90.mpich", "mpicc.mpich", "libmpich-dev"),
}
VARIANTS = {"use-mpi": "ring_halo.f90", "mpif.h": "ring_halo_mpif.f", "mpi_f08": "ring_halo_f08.f90"}
P, N, ITERS = 3, 48, 10
COLUMNS = ("op", "peer", "tag", "bytes", "recv_bytes", "comm", "aux", "root", "req")


def _expected_ops():
    ops = ["Init"]
    for i in range(ITERS):
        ops += ["Irecv", "Irecv", "Isend", "Isend", "Waitall"]
        if i % 5 == 4:
            ops.append("Allreduce")
    return ops + ["Barrier", "Finalize"]


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No overrides: sigex finds the program's MPI itself; the tracer is built fresh."""
    for var in ("SIGEX_MPICC", "SIGEX_MPIEXEC"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SIGEX_CACHE_DIR", str(tmp_path / "cache"))


def _tools(name):
    fortran, c, package = MPIS[name]
    missing = [t for t in (fortran, c) if not shutil.which(t)]
    if missing:
        pytest.skip(f"{name}: {' and '.join(missing)} not installed "
                    f"(Debian: apt-get install gfortran {package})")
    return shutil.which(fortran), shutil.which(c)


def _traced(exe, out):
    res = trace_run([str(exe), str(N), str(ITERS)], P, out)
    assert res.ok, f"{exe.name}: {res.trace.meta.get('incomplete_reason')}"
    return load_trace(res.path)


def _completions(trace, rank):
    c = trace.completions
    rows = c["rank"] == rank
    return {k: c[k][rows] for k in ("seq", "req", "peer", "tag", "bytes")}


@pytest.mark.parametrize("name", list(MPIS))
def test_fortran_bindings_traced_like_the_c_twin(name, tmp_path, clean_env):
    """mpif.h, `use mpi` and `use mpi_f08` rings give the C ring's events, each call once."""
    fortran, c = _tools(name)
    c_exe = tmp_path / "ring_c"
    subprocess.run([c, "-O2", "-o", str(c_exe), str(EXAMPLES / "c" / "ring_halo.c")], check=True)
    twin = _traced(c_exe, tmp_path / "c" / f"P{P}.h5")
    expected = _expected_ops()
    assert [twin.op_name(o) for o in twin.rank_events(1)["op"]] == expected
    for variant, source in VARIANTS.items():
        exe = tmp_path / f"ring_{variant.replace('.', '_')}"
        subprocess.run([fortran, "-O2", "-o", str(exe), str(EXAMPLES / "fortran" / source)],
                       check=True, cwd=tmp_path)
        trace = _traced(exe, tmp_path / variant / f"P{P}.h5")
        assert trace.meta.get("nprocs", P) == P
        for r in range(P):
            ops = [trace.op_name(o) for o in trace.rank_events(r)["op"]]
            assert ops == expected, f"{name} {variant} rank {r}: {ops}"
            a, b = trace.rank_events(r), twin.rank_events(r)
            for col in COLUMNS:
                np.testing.assert_array_equal(a[col], b[col],
                                              err_msg=f"{name} {variant} rank {r} column {col}")
            ca, cb = _completions(trace, r), _completions(twin, r)
            for col in ca:
                np.testing.assert_array_equal(ca[col], cb[col],
                                              err_msg=f"{name} {variant} rank {r} completion {col}")
