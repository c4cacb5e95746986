"""Building the tracer: cached per MPI, clear errors when no MPI compiler is usable."""

from __future__ import annotations

import pytest

from conftest import needs_mpi
from signature import TracerError, tracer_library


def test_no_mpicc_is_explained(monkeypatch, tmp_path):
    """Without any mpicc the error says how to get one."""
    monkeypatch.delenv("SIGEX_MPICC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TracerError, match=r"no `mpicc` found on PATH.*pip install mpich.*SIGEX_MPICC"):
        tracer_library()


def test_broken_mpicc_is_named(monkeypatch, tmp_path):
    """An mpicc that cannot run is named in the error."""
    monkeypatch.setenv("SIGEX_MPICC", str(tmp_path / "no-such-mpicc"))
    with pytest.raises(TracerError, match="no-such-mpicc"):
        tracer_library()


def test_failing_compile_shows_the_compiler_output(monkeypatch, tmp_path):
    """A wrapper whose compiles fail gives the command and the compiler's message."""
    fake = tmp_path / "mpicc"
    fake.write_text("#!/bin/sh\nif [ \"$1\" = -show ]; then echo cc -lmpi; exit 0; fi\n"
                    "echo 'mpi.h: No such file or directory' >&2; exit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("SIGEX_MPICC", str(fake))
    monkeypatch.setenv("SIGEX_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(TracerError, match=r"(?s)failed \(exit 1\).*mpi.h: No such file"):
        tracer_library()
    assert not list((tmp_path / "cache").rglob("*.so"))  # nothing half-built left in the cache


@needs_mpi
def test_library_is_cached_per_mpi(monkeypatch, tmp_path):
    """The second call reuses the build; a rebuild replaces it in place."""
    monkeypatch.setenv("SIGEX_CACHE_DIR", str(tmp_path / "cache"))
    first = tracer_library()
    mtime = first.stat().st_mtime_ns
    assert tracer_library() == first and first.stat().st_mtime_ns == mtime
    again = tracer_library(rebuild=True)
    assert again == first and again.exists()


@needs_mpi
def test_a_build_says_so_once(monkeypatch, tmp_path):
    """The first use for an MPI reports the build and its time; a cached library says nothing."""
    monkeypatch.setenv("SIGEX_CACHE_DIR", str(tmp_path / "cache"))
    said = []
    tracer_library(progress=said.append)
    assert said[0].startswith("building the tracer with ") and "once for this MPI" in said[0]
    assert said[1].startswith("tracer built in ") and len(said) == 2
    tracer_library(progress=said.append)
    assert len(said) == 2
