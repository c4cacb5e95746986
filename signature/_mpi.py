"""Which MPI a program runs on, and that MPI's compiler wrapper and launcher.

A tracer and a program built against different MPI libraries cannot work
together (the program dies on start-up, or MPICH's ``mpiexec`` starts Open MPI
ranks as singletons), so ``sigex trace`` first finds the library the program
loads, the way a user would check by hand:

* an ELF program: the ``libmpi``/``libmpich`` its loader resolves (``ldd``);
* a Python program (``python app.py``, or a script whose ``#!`` names Python):
  the library that interpreter's mpi4py loads, read from the interpreter's own
  ``/proc/self/maps`` after importing ``mpi4py.MPI`` without initialising it.

It then looks for a ``mpicc`` whose test program links the same library file
(``$SIGEX_MPICC``, ``mpicc`` on PATH, Debian's ``mpicc.openmpi`` and
``mpicc.mpich``, the ``bin/`` beside the library and beside the interpreter)
and takes the launcher installed next to it with the same suffix
(``mpicc.openmpi`` -> ``mpirun.openmpi``). What each ``mpicc`` links is cached
under the sigex cache directory, keyed by the wrapper's path, modification time
and ``-show`` output.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from ._build import cache_dir

__all__ = ["MpiInstall", "program_library", "library_kind", "mpicc_library", "find_install",
           "launcher_flavour", "mismatch_message", "KIND_NAMES"]

#: Human names of the library families.
KIND_NAMES = {"openmpi": "Open MPI", "mpich": "MPICH", "unknown": "an unknown MPI"}

_LIBMPI = re.compile(r"^lib(mpi|mpich)\.so(\.\d+)*$")
_PROBE = "#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n"


@dataclasses.dataclass(frozen=True)
class MpiInstall:
    """An MPI library with the compiler wrapper and launcher that belong to it."""

    kind: str            # "openmpi", "mpich" or "unknown"
    library: Path        # the libmpi file (resolved)
    mpicc: str | None
    mpiexec: str | None

    @property
    def name(self) -> str:
        return f"{KIND_NAMES[self.kind]} ({self.library})"


def _ldd(path: str | Path) -> list[Path]:
    """The MPI C libraries ``path`` loads, resolved, in ldd's order."""
    try:
        out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    libs = []
    for line in out.splitlines():
        name, _, rest = line.strip().partition(" => ")
        target = rest.split(" (")[0].strip()
        if _LIBMPI.match(name) and target.startswith("/"):
            libs.append(Path(os.path.realpath(target)))
    return libs


_MAPS_SNIPPET = (
    "import mpi4py, sys\n"
    "mpi4py.rc.initialize = False\n"
    "mpi4py.rc.finalize = False\n"
    "from mpi4py import MPI\n"
    "import re\n"
    "seen = []\n"
    "for line in open('/proc/self/maps'):\n"
    "    p = line.split()[-1]\n"
    "    if re.search(r'/lib(mpi|mpich)\\.so(\\.\\d+)*$', p) and p not in seen:\n"
    "        seen.append(p)\n"
    "print('\\n'.join(seen))\n")


def _python_library(python: str) -> Path | None:
    try:
        res = subprocess.run([python, "-c", _MAPS_SNIPPET], capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("/")]
    return Path(os.path.realpath(lines[0])) if res.returncode == 0 and lines else None


def _interpreter(program: str) -> str | None:
    """The Python interpreter that runs ``program``, if it is one or a Python script."""
    if re.match(r"^python[\d.]*$", Path(program).name):
        return program
    try:
        with open(program, "rb") as f:
            first = f.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if words and Path(words[0]).name == "env" and len(words) > 1:
        words = words[1:]
    if words and re.match(r"^python[\d.]*$", Path(words[0]).name):
        return shutil.which(words[0]) or words[0]
    return None


def program_library(command: Sequence[str]) -> Path | None:
    """The MPI library file that ``command`` will load, or None if it cannot be told
    (a static binary, a shell script, a program that is not found)."""
    if not command:
        return None
    program = shutil.which(command[0]) or command[0]
    if not os.path.exists(program):
        return None
    python = _interpreter(program)
    if python is not None:
        return _python_library(python)
    libs = _ldd(program)
    return libs[0] if libs else None


@functools.lru_cache(maxsize=None)
def library_kind(library: Path) -> str:
    """``"openmpi"`` (its libmpi loads Open MPI's libopen-pal), ``"mpich"`` (libmpich,
    or the MPICH ABI's libmpi.so.12) or ``"unknown"``."""
    try:
        out = subprocess.run(["ldd", str(library)], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    if "libopen-pal" in out or "libopen-rte" in out:
        return "openmpi"
    name = library.name
    if name.startswith("libmpich.so") or name.startswith("libmpi.so.12"):
        return "mpich"
    return "unknown"


def _show(mpicc: str) -> str:
    try:
        return subprocess.run([mpicc, "-show"], capture_output=True, text=True,
                              timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def mpicc_library(mpicc: str) -> Path | None:
    """The libmpi that programs built with ``mpicc`` load (a test program is compiled
    and its libraries resolved; the answer is cached per wrapper)."""
    real = os.path.realpath(mpicc)
    try:
        mtime = os.stat(real).st_mtime_ns
    except OSError:
        return None
    show = _show(mpicc)
    if not show:
        return None
    key = hashlib.sha256(f"{os.path.abspath(mpicc)}\0{real}\0{mtime}\0{show}".encode()).hexdigest()[:16]
    cache = cache_dir() / "mpicc" / f"{key}.json"
    try:
        cached = json.loads(cache.read_text())
        return Path(cached["library"]) if cached.get("library") else None
    except (OSError, ValueError, KeyError):
        pass
    lib = None
    with tempfile.TemporaryDirectory(prefix="sigex-probe-") as tmp:
        src, exe = Path(tmp) / "probe.c", Path(tmp) / "probe"
        src.write_text(_PROBE)
        try:
            res = subprocess.run([mpicc, "-o", str(exe), str(src)], capture_output=True,
                                 text=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            res = None
        if res is not None and res.returncode == 0:
            libs = _ldd(exe)
            lib = libs[0] if libs else None
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        fd, tmpname = tempfile.mkstemp(dir=cache.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"mpicc": mpicc, "library": str(lib) if lib else None}, f)
        os.replace(tmpname, cache)
    except OSError:
        pass
    return lib


def _candidates(library: Path | None) -> list[str]:
    names = []
    if os.environ.get("SIGEX_MPICC"):
        names.append(os.environ["SIGEX_MPICC"])
    for n in ("mpicc", "mpicc.openmpi", "mpicc.mpich"):
        w = shutil.which(n)
        if w:
            names.append(w)
    dirs = [Path(sys.prefix) / "bin"]
    if library is not None:
        dirs += [library.parent.parent / "bin", library.parent / "bin"]
    for d in dirs:
        w = d / "mpicc"
        if w.is_file() and os.access(w, os.X_OK):
            names.append(str(w))
    seen, out = set(), []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def launcher_flavour(mpiexec: str) -> str:
    """``"hydra"`` (MPICH's), ``"openmpi"`` or ``"unknown"``, from ``--version``."""
    try:
        text = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        text = ""
    if "HYDRA" in text or "hydra" in text.lower():
        return "hydra"
    if "Open MPI" in text or "OpenRTE" in text or "open-mpi" in text.lower():
        return "openmpi"
    return "unknown"


_FLAVOUR_OF_KIND = {"openmpi": "openmpi", "mpich": "hydra"}


def _launcher_beside(mpicc: str, kind: str) -> str | None:
    path = Path(mpicc)
    suffix = path.name[len("mpicc"):] if path.name.startswith("mpicc") else ""
    want = _FLAVOUR_OF_KIND.get(kind)
    for base in ("mpiexec", "mpirun"):
        cand = path.with_name(base + suffix)
        if cand.is_file() and os.access(cand, os.X_OK):
            if want is None or launcher_flavour(str(cand)) == want:
                return str(cand)
    return None


def find_install(library: Path) -> MpiInstall:
    """The compiler wrapper and launcher of the MPI whose C library is ``library``
    (either may be None when the machine lacks it)."""
    kind = library_kind(library)
    for mpicc in _candidates(library):
        lib = mpicc_library(mpicc)
        if lib is not None and lib == library:
            return MpiInstall(kind, library, mpicc, _launcher_beside(mpicc, kind))
    return MpiInstall(kind, library, None, None)


def mismatch_message(program: str, prog: MpiInstall, tool: str, tool_lib: Path | None) -> str:
    """The error for a tracer or launcher of another MPI than the program's."""
    other = f"{KIND_NAMES[library_kind(tool_lib)]} ({tool_lib})" if tool_lib else "another MPI"
    fix = (f"SIGEX_MPICC={prog.mpicc}" + (f" and --mpiexec {prog.mpiexec}" if prog.mpiexec else "")
           if prog.mpicc else f"the development package of {KIND_NAMES[prog.kind]} "
           "(e.g. apt-get install libopenmpi-dev or libmpich-dev), then run again")
    return (f"{program} runs on {prog.name}, but {tool} belongs to {other}; a tracer or "
            f"launcher of another MPI cannot trace it. Use {fix}")
