"""Shared fixtures: real traced MPI runs at small P, and copies of bundled traces.

Traced runs go through the same library call as ``sigex trace``
(:func:`signature.trace_run`), into the test's temporary directory.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TRACES = ROOT / "traces"

HAVE_MPI = bool(shutil.which("mpiexec") and (os.environ.get("SIGEX_MPICC") or shutil.which("mpicc")))
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="no mpiexec/mpicc on PATH (pip install mpich)")


def trace_c_program(root: Path, source: Path, args: list[str], fit, unseen: int, flags=(), libs=()) -> Path:
    """Build the C program ``source`` with ``$SIGEX_MPICC`` (else ``mpicc``), ``flags`` and
    ``libs`` (after the source, as the linker wants them: ``-lm``) in ``root`` and trace it
    with ``args`` at every fit P (``root/P<P>.h5``) and at the unseen P
    (``root/unseen/P<P>.h5``); returns ``root``."""
    import subprocess

    from signature import trace_run
    exe = root / source.stem
    subprocess.run([os.environ.get("SIGEX_MPICC") or "mpicc", "-O1", *flags, "-o", str(exe), str(source), *libs],
                   check=True)
    for P in (*fit, unseen):
        res = trace_run([str(exe), *args], P, root / (f"P{P}.h5" if P in fit else f"unseen/P{P}.h5"))
        assert res.ok, f"{source.name} at P={P}: {res.trace.meta.get('incomplete_reason')}"
    return root
def one_phase_signature(P: int, template: dict, counts, ops: tuple, app: str, workload=(None, None)):
    """A signature of one loop phase (weight 10) whose template is ``template`` (columns of
    every rank's events in rank order, ``counts[r]`` of them on rank r), for the logical
    model's tests on synthetic phases."""
    import numpy as np

    from signature.model import Phase, Signature
    stats = {"cpu_mean": np.full(P, 1e-3), "comp_mean": np.full(P, 1e-3), "comm_mean": np.full(P, 1e-4)}
    ph = Phase(id=0, kind="loop", weight=10, ops=ops, pattern=app, te=1e-3, share=1.0, stats=stats,
               template_offsets=np.concatenate([[0], np.cumsum(counts)]), template=template)
    return Signature(source=f"synthetic P={P}", app=app, nprocs=P, workload_label=workload[0],
                     workload_value=workload[1], work_mode="cpu-time", runtime=1.0, pet=1.0, coverage=1.0,
                     phases=(ph,), sequence=np.zeros(10, np.int64))


needs_simgrid = pytest.mark.skipif(shutil.which("smpirun") is None or shutil.which("smpicc") is None,
                                   reason="SimGrid not installed: apt-get install libsimgrid-dev")


@pytest.fixture
def run_traced(tmp_path):
    """``run_traced(script, nprocs, *args, name="app", expect_ok=True)`` runs a Python
    MPI script (source text or a path) under the tracer and returns the
    :class:`signature.TraceResult`."""
    from signature import trace_run

    counter = {"n": 0}

    def run(script, nprocs, *args, name="app", expect_ok=True, timeout=300, **kwargs):
        counter["n"] += 1
        if isinstance(script, Path):
            path = script
        else:
            path = tmp_path / f"{name}.py"
            path.write_text(textwrap.dedent(script))
        out = tmp_path / f"{name}-{counter['n']}" / f"P{nprocs}.h5"
        res = trace_run([sys.executable, str(path), *map(str, args)], nprocs, out,
                        timeout=timeout, **kwargs)
        if expect_ok:
            assert res.ok, f"traced run failed: exit {res.returncode}, {res.trace.meta.get('incomplete_reason')}"
        return res

    return run


@pytest.fixture
def bundled(tmp_path):
    """``bundled("stencil/P4.h5")`` copies a bundled trace to a temporary file."""

    def copy(rel: str) -> Path:
        src = TRACES / rel
        if not src.exists():
            pytest.fail(f"bundled trace {src} is missing; see traces/README.md to regenerate it")
        dst = tmp_path / rel.replace("/", "-")
        shutil.copy(src, dst)
        return dst

    return copy


@pytest.fixture(scope="session")
def tracer_cache(tmp_path_factory) -> Path:
    """A tracer build cache of the test session's own (``SIGEX_CACHE_DIR``), shared by the
    tests that build the tracer for one MPI after another: each MPI's library is built
    once per session, not once per test (a build with the Fortran wrappers takes 15-20 s).
    Tests of the build itself use a cache of their own."""
    return tmp_path_factory.mktemp("tracer-cache")
