"""Build the PMPI tracer library on first use, with the ``mpicc`` of the MPI in use.

The library must be compiled against the MPI that will run the program (its
``mpi.h`` and ``libmpi``), so it is built here rather than shipped. The
result is cached under ``$SIGEX_CACHE_DIR`` (default ``~/.cache/sigex``),
keyed by the C source, the ``mpicc`` path and what ``mpicc -show`` says, so
that switching MPI libraries builds a new copy. Builds are atomic (compile to
a temporary name, then rename), so concurrent first uses are safe.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .errors import TracerError

__all__ = ["tracer_source", "find_mpicc", "tracer_library"]

_LIB_NAME = "libsigex_trace.so"


def tracer_source() -> Path:
    """Path of the tracer's C source inside the installed package."""
    return Path(__file__).with_name("_tracer") / "sigex_trace.c"


def find_mpicc() -> str:
    """The MPI C compiler wrapper: ``$SIGEX_MPICC`` or ``mpicc`` on PATH."""
    mpicc = os.environ.get("SIGEX_MPICC") or shutil.which("mpicc")
    if not mpicc:
        raise TracerError(
            "no `mpicc` found on PATH: the tracer is built with the MPI compiler wrapper of the "
            "MPI that runs your program. Install one (`pip install mpich`, or "
            "`pip install 'sigex[mpi]'`), or set SIGEX_MPICC=/path/to/mpicc")
    return mpicc


def cache_dir() -> Path:
    return Path(os.environ.get("SIGEX_CACHE_DIR") or Path.home() / ".cache" / "sigex")


def tracer_library(*, rebuild: bool = False) -> Path:
    """Return the tracer library for the current MPI, building it if needed.

    Parameters
    ----------
    rebuild : bool
        Compile again even if a cached copy exists.

    Raises
    ------
    TracerError
        No ``mpicc``, or the compile failed (the compiler's output is included).
    """
    mpicc = find_mpicc()
    src = tracer_source()
    try:
        show = subprocess.run([mpicc, "-show"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as err:
        raise TracerError(f"cannot run `{mpicc} -show` ({err}); is {mpicc} a working MPI "
                          "compiler wrapper?") from err
    key = hashlib.sha256(src.read_bytes() + b"\0" + os.path.realpath(mpicc).encode()
                         + b"\0" + show.encode()).hexdigest()[:16]
    out_dir = cache_dir() / "tracer" / key
    lib = out_dir / _LIB_NAME
    if lib.exists() and not rebuild:
        return lib
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=out_dir)
    os.close(fd)
    cmd = [mpicc, "-O2", "-fPIC", "-shared", "-Wall", "-o", tmp, str(src), "-lpthread"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as err:
        Path(tmp).unlink(missing_ok=True)
        raise TracerError(f"building the tracer failed to start: {' '.join(cmd)}: {err}") from err
    if res.returncode != 0:
        Path(tmp).unlink(missing_ok=True)
        tail = "\n".join((res.stderr or res.stdout).splitlines()[-15:])
        raise TracerError(f"building the tracer with {mpicc} failed (exit {res.returncode}):\n"
                          f"{' '.join(cmd)}\n{tail}\nCheck that {mpicc} compiles MPI programs "
                          "(try `mpicc -show`), or point SIGEX_MPICC at another MPI's wrapper")
    os.replace(tmp, lib)
    (out_dir / "build.txt").write_text(f"{' '.join(cmd)}\nmpicc -show: {show}")
    return lib
