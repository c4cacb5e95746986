"""Build the PMPI tracer library on first use, with the ``mpicc`` of the MPI in use.

The library must be compiled against the MPI that will run the program (its
``mpi.h`` and ``libmpi``), so it is built here rather than shipped. The
build reads the library's own interface first, so that one C source serves
MPI-3.1 and MPI-4 libraries alike (Debian's Open MPI 4.1, MPICH 4, the PyPI
MPICH):

1. ``mpicc -E`` of ``mpi.h`` gives every ``int MPI_*(...)`` prototype, and
   ``nm -D`` of the ``libmpi`` a test program links gives the ``PMPI_*``
   symbols the library exports;
2. a generated header says which optional entry points exist (the MPI-4
   large-count ``_c`` forms, ``MPI_Isendrecv``), so that the tracer never
   references a PMPI symbol the library lacks;
3. a first compile tells which ``MPI_*`` functions the tracer defines; every
   other function the library both declares and exports gets a generated
   wrapper that counts its calls and the time inside them ("not modelled":
   ``MPI_File_write_all called 240 times``), and ``MPI_Comm_spawn`` is refused;
4. where the MPI's Fortran layer bypasses the C entry points, the Fortran
   wrappers of :mod:`signature._fortran` are compiled in too.

The result is cached under ``$SIGEX_CACHE_DIR`` (default ``~/.cache/sigex``),
keyed by the C sources, the ``mpicc`` path and what ``mpicc -show`` says, so
that switching MPI libraries builds a new copy. Builds are atomic (compile to
a temporary name, then rename), so concurrent first uses are safe.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from .errors import TracerError

__all__ = ["tracer_source", "find_mpicc", "tracer_library", "mpi_interface", "MpiInterface"]

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


#: Bumped when the generated code changes, so that cached builds are redone.
_GENERATOR_VERSION = "2"

#: Functions never given a counting wrapper: the tracer's own entry points
#: (Init, Finalize, Abort are always defined by it), the tools interface, and
#: calls that are not communication and run before or around MPI_Init.
_NOT_COUNTED = re.compile(r"^MPI_(T_\w+|Init\w*|Finalize\w*|Abort|Pcontrol|Initialized|Finalized"
                          r"|Get_version|Get_library_version|Query_thread|Is_thread_main"
                          r"|Comm_spawn\w*)$")
#: The MPI-4 persistent collectives the tracer records (all or none).
_PERSISTENT_COLLECTIVES = ("Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv",
                           "Scatter", "Scatterv", "Allgather", "Allgatherv", "Alltoall",
                           "Alltoallv", "Alltoallw", "Reduce_scatter", "Reduce_scatter_block",
                           "Scan", "Exscan", "Neighbor_allgather", "Neighbor_allgatherv",
                           "Neighbor_alltoall", "Neighbor_alltoallv", "Neighbor_alltoallw")
#: Dynamic process creation: refused, since spawned processes are not traced.
_REFUSED = ("MPI_Comm_spawn", "MPI_Comm_spawn_multiple")


@dataclasses.dataclass(frozen=True)
class MpiInterface:
    """What an MPI library offers: its ``int MPI_*`` prototypes (name -> parameter
    list as written in ``mpi.h``) and the ``PMPI_*`` symbols its ``libmpi`` exports."""

    library: Path | None
    prototypes: dict
    exported: frozenset

    def has(self, name: str) -> bool:
        """``MPI_<name>`` is declared and ``PMPI_<name>`` exported."""
        return f"MPI_{name}" in self.prototypes and f"PMPI_{name}" in self.exported


def _run(cmd, what: str, mpicc: str, timeout: float = 300) -> subprocess.CompletedProcess:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as err:
        raise TracerError(f"{what} failed to start: {' '.join(map(str, cmd))}: {err}") from err
    if res.returncode != 0:
        tail = "\n".join((res.stderr or res.stdout).splitlines()[-15:])
        raise TracerError(f"{what} with {mpicc} failed (exit {res.returncode}):\n"
                          f"{' '.join(map(str, cmd))}\n{tail}\nCheck that {mpicc} compiles MPI "
                          "programs (try `mpicc -show`), or point SIGEX_MPICC at another MPI's "
                          "wrapper")
    return res


_PROTO = re.compile(r"^(?:extern\s+)?(?:__attribute__\s*\(\(.*?\)\)\s*)*int\s+(MPI_\w+)\s*"
                    r"\(([^()]*)\)", re.S)


def _prototypes(preprocessed: str) -> dict:
    """``int MPI_*(...)`` declarations of a preprocessed ``mpi.h``: name -> parameters."""
    out = {}
    for stmt in preprocessed.split(";"):
        stmt = re.split(r"[{}]", stmt)[-1].strip()
        if stmt.startswith("typedef"):
            continue
        m = _PROTO.match(" ".join(stmt.split()))
        if m:
            out.setdefault(m.group(1), m.group(2).strip())
    return out


def _exported(library: Path | None) -> frozenset:
    if library is None or not shutil.which("nm"):
        return frozenset()
    res = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True,
                         text=True, timeout=120)
    return frozenset(ln.split()[-1] for ln in res.stdout.splitlines()
                     if ln.split() and ln.split()[-1].startswith("PMPI_"))


def mpi_interface(mpicc: str, build_dir: Path) -> MpiInterface:
    """Read the interface of the MPI behind ``mpicc`` (see the module docstring)."""
    from ._mpi import mpicc_library
    probe = build_dir / "probe.c"
    probe.write_text("#include <mpi.h>\nint main(void) { return 0; }\n")
    pre = _run([mpicc, "-E", "-P", str(probe)], "reading mpi.h", mpicc).stdout
    library = mpicc_library(mpicc)
    return MpiInterface(library, _prototypes(pre), _exported(library))


def _param_names(params: str) -> list | None:
    """Argument names of a prototype's parameter list; None if one has no name or
    the function is variadic."""
    if params in ("", "void"):
        return []
    names = []
    for p in params.split(","):
        p = re.sub(r"\[[^\]]*\]", "", p).replace("*", " ").split()
        p = [w for w in p if w not in ("const", "volatile", "restrict", "struct", "unsigned")]
        if len(p) < 2 or "..." in p:
            return None
        names.append(p[-1])
    return names


def _generate(iface: MpiInterface, defined: set, build_dir: Path) -> tuple[Path, Path, list]:
    """Write the feature header and the counting wrappers; return their paths and the
    counted names."""
    counted, skipped = [], []
    for name, params in sorted(iface.prototypes.items()):
        if name in defined or _NOT_COUNTED.match(name) or "P" + name not in iface.exported:
            continue
        args = _param_names(params)
        if args is None:
            skipped.append(name)
            continue
        counted.append((name, params, args))
    hdr = build_dir / "sigex_gen.h"
    lines = ["/* generated by signature/_build.py from this MPI's mpi.h and libmpi */"]
    if iface.has("Send_c") and iface.has("Type_size_c") and iface.has("Get_count_c"):
        lines.append("#define SIGEX_LARGE_COUNT 1")
    if iface.has("Isendrecv"):
        lines.append("#define SIGEX_HAVE_ISENDRECV 1")
    if all(iface.has(f"{c}_init") for c in _PERSISTENT_COLLECTIVES):
        lines.append("#define SIGEX_HAVE_PERSISTENT_COLL 1")
    lines.append(f"#define SIGEX_UNMODELLED_N {len(counted)}")
    hdr.write_text("\n".join(lines) + "\n")
    wrappers = build_dir / "sigex_gen_wrappers.c"
    out = ["/* generated by signature/_build.py: counting wrappers of the functions the",
           " * tracer does not model, and the refusal of dynamic processes */"]
    if counted:
        out.append("static const char *const unm_names[SIGEX_UNMODELLED_N] = {")
        out += [f'  "{name}",' for name, _, _ in counted]
        out.append("};")
    for i, (name, params, args) in enumerate(counted):
        call = ", ".join(args)
        out.append(f"int {name}({params}) {{\n  double t = 0;\n  int c = unm_begin(&t);\n"
                   f"  int rc = P{name}({call});\n  if (c) unm_end({i}, t);\n  return rc;\n}}")
    for name in _REFUSED:
        params = iface.prototypes.get(name)
        args = _param_names(params) if params is not None else None
        if args is None or "P" + name not in iface.exported:
            continue
        out.append(
            f"int {name}({params}) {{\n  if (g.tracing) {{\n    fprintf(stderr, \"sigex tracer: rank %d "
            f"called {name}: processes it starts are not traced, so sigex cannot model this "
            f"program; run it without sigex\\n\", g.rank);\n    PMPI_Abort(MPI_COMM_WORLD, 4);\n  }}\n"
            f"  return P{name}({', '.join(args)});\n}}")
    wrappers.write_text("\n".join(out) + "\n")
    return hdr, wrappers, [n for n, _, _ in counted] + [f"(no argument names: {n})" for n in skipped]


def _defined_mpi(obj: Path) -> set:
    res = subprocess.run(["nm", "--defined-only", str(obj)], capture_output=True, text=True,
                         timeout=120)
    return {ln.split()[-1] for ln in res.stdout.splitlines()
            if len(ln.split()) == 3 and ln.split()[1] == "T" and ln.split()[-1].startswith("MPI_")}


def tracer_library(*, mpicc: str | None = None, rebuild: bool = False,
                   progress=None) -> Path:
    """Return the tracer library for an MPI, building it if needed.

    Parameters
    ----------
    mpicc : str, optional
        The MPI's C compiler wrapper; default ``$SIGEX_MPICC`` or ``mpicc`` on PATH.
    rebuild : bool
        Compile again even if a cached copy exists.
    progress : callable, optional
        Receives one line when a build starts (it takes seconds to tens of seconds,
        once per MPI) and when it is done.

    Raises
    ------
    TracerError
        No ``mpicc``, or the compile failed (the compiler's output is included).
    """
    from . import _fortran
    mpicc = mpicc or find_mpicc()
    tracer_dir = Path(__file__).with_name("_tracer")
    try:
        show = subprocess.run([mpicc, "-show"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as err:
        raise TracerError(f"cannot run `{mpicc} -show` ({err}); is {mpicc} a working MPI "
                          "compiler wrapper?") from err
    digest = hashlib.sha256()
    for src in sorted(tracer_dir.glob("*.[ch]")) + [Path(__file__), Path(_fortran.__file__)]:
        digest.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    digest.update(f"{_GENERATOR_VERSION}\0{os.path.realpath(mpicc)}\0{show}".encode())
    out_dir = cache_dir() / "tracer" / digest.hexdigest()[:16]
    lib = out_dir / _LIB_NAME
    if lib.exists() and not rebuild:
        return lib
    say = progress or (lambda msg: None)
    say(f"building the tracer with {mpicc} (once for this MPI; cached in {out_dir})")
    t0 = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".build-", dir=out_dir))
    try:
        iface = mpi_interface(mpicc, build)
        src = tracer_dir / "sigex_trace.c"
        flags = ["-O2", "-fPIC", "-Wall", "-Wno-deprecated-declarations"]
        hdr, wrappers, counted = _generate(iface, set(), build)
        if iface.exported:  # first pass: which MPI_* does the tracer itself define?
            obj = build / "stage1.o"
            _run([mpicc, *flags, f'-DSIGEX_GEN_HEADER="{hdr}"', "-c", "-o", str(obj), str(src)],
                 "building the tracer", mpicc)
            hdr, wrappers, counted = _generate(iface, _defined_mpi(obj), build)
        fortran = _fortran.wrappers(mpicc, iface.library, build)
        # without the library's symbols (no nm, no libmpi found) the MPI version decides,
        # as in a hand build, and calls the tracer does not model are not counted (the
        # trace says so: unmodelled_counted = false)
        defs = [f'-DSIGEX_GEN_HEADER="{hdr}"', f'-DSIGEX_GEN_WRAPPERS="{wrappers}"'] \
            if iface.exported else []
        if fortran is not None:
            defs.append(f'-DSIGEX_FORTRAN_WRAPPERS="{fortran}"')
        tmp = build / _LIB_NAME
        cmd = [mpicc, *flags, "-shared", *defs, "-o", str(tmp), str(src), "-lpthread", "-ldl"]
        _run(cmd, "building the tracer", mpicc)
        os.replace(tmp, lib)
        (out_dir / "build.txt").write_text(
            f"{' '.join(cmd)}\nmpicc -show: {show}\nlibrary: {iface.library}\n"
            f"prototypes: {len(iface.prototypes)}, PMPI exported: {len(iface.exported)}\n"
            f"counted, not modelled ({len(counted)}): {' '.join(counted)}\n")
    finally:
        shutil.rmtree(build, ignore_errors=True)
    say(f"tracer built in {time.perf_counter() - t0:.1f} s")
    return lib
