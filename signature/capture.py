"""Run an unmodified MPI program under the PMPI tracer and write its HDF5 trace.

``trace_run`` first finds which MPI library the program loads and that MPI's
``mpicc`` and launcher (:mod:`signature._mpi`; ``$SIGEX_MPICC``,
``$SIGEX_MPIEXEC`` and ``mpiexec=`` override, and a tracer or launcher of
another MPI than the program's is refused before the run). It builds (or
reuses) the tracer library with that ``mpicc``, starts the program so that
every rank preloads it (``LD_PRELOAD`` passed through the launcher's own
option: ``-genv`` for MPICH/Hydra, ``-x`` for Open MPI), then assembles the
ranks' raw files into one trace file written atomically. Open MPI's
``mpirun`` is driven as users do: ``--allow-run-as-root`` as root and
``--oversubscribe`` when there are more ranks than cores. A tracer the loader
cannot load is reported with the loader's message.
Traced runs pin BLAS/OpenMP to one thread: thread CPU time cannot see worker
threads. On an oversubscribed machine (more ranks than cores) MPICH is asked
to yield instead of busy-polling (``MPIR_CVAR_ENABLE_HEAVY_YIELD=1``).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Callable, Sequence

from . import _mpi
from ._build import tracer_library
from ._raw import assemble
from .errors import TracerError
from .trace import Trace

__all__ = ["TraceResult", "trace_run", "output_path", "parse_workload", "PINNED_THREADS_ENV",
           "Launch", "launch_for", "run_environment"]

#: Environment for traced runs: one BLAS/OpenMP thread per rank.
PINNED_THREADS_ENV = {
    "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1",
}


@dataclasses.dataclass(frozen=True)
class TraceResult:
    """Outcome of a traced run."""

    path: Path
    trace: Trace
    returncode: int
    wall_time: float
    command: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.trace.complete


def parse_workload(text: str | None) -> tuple[str | None, str | None]:
    """``"n=2000"`` -> ``("n", "2000")``; a bare value gets the label ``"workload"``."""
    if not text:
        return None, None
    label, sep, value = text.partition("=")
    if not sep:
        return "workload", label.strip()
    if not label.strip() or not value.strip():
        raise TracerError(f"--workload {text!r}: expected NAME=VALUE, e.g. --workload n=2000")
    return label.strip(), value.strip()


def output_path(output: str | Path, nprocs: int) -> Path:
    """Resolve ``-o``: a ``.h5`` path is used as is; anything else is a directory
    that receives ``P<nprocs>.h5``."""
    output = Path(output)
    if output.suffix in (".h5", ".hdf5"):
        return output
    return output / f"P{nprocs}.h5"


def _choose_mpi(command: Sequence[str], mpiexec: str | None,
                say: Callable[[str], None]) -> tuple[str | None, str | None]:
    """The ``mpicc`` and launcher for ``command``: the program's own MPI where it can
    be told, with the overrides checked against it (see the module docstring)."""
    mpicc = os.environ.get("SIGEX_MPICC") or None
    launcher = mpiexec or os.environ.get("SIGEX_MPIEXEC") or None
    library = _mpi.program_library(command)
    if library is None:
        return mpicc, launcher
    prog = _mpi.find_install(library)
    say(f"{command[0]} uses {prog.name}")
    if mpicc:
        lib = _mpi.mpicc_library(mpicc)
        if lib is not None and lib != library:
            raise TracerError(_mpi.mismatch_message(command[0], prog, f"SIGEX_MPICC={mpicc}", lib))
    elif prog.mpicc is None:
        raise TracerError(
            f"{command[0]} runs on {prog.name}, but no `mpicc` of that MPI was found (tried "
            "mpicc, mpicc.openmpi, mpicc.mpich and the "
            "bin/ folders beside the library and Python). Install its development package "
            "(Debian: apt-get install libopenmpi-dev, or libmpich-dev), or set SIGEX_MPICC to "
            "its compiler wrapper")
    else:
        mpicc = prog.mpicc
    want = {"openmpi": "openmpi", "mpich": "hydra"}.get(prog.kind)
    if launcher:
        flavour = _mpi.launcher_flavour(launcher)
        if want and flavour != "unknown" and flavour != want:
            raise TracerError(_mpi.mismatch_message(
                command[0], prog, f"the launcher {launcher}",
                None) + f" (that launcher is {'MPICH' if flavour == 'hydra' else 'Open MPI'}'s)")
    else:
        launcher = prog.mpiexec
    return mpicc, launcher


@dataclasses.dataclass(frozen=True)
class Launch:
    """How a program is started: the launcher of its MPI (and that MPI's ``mpicc``,
    which builds the tracer)."""

    launcher: str
    flavour: str           # "hydra", "openmpi" or "unknown"
    mpicc: str | None

    def argv(self, command: Sequence[str], nprocs: int, mpiexec_args: Sequence[str] = (),
             env: dict[str, str] | None = None) -> list[str]:
        """The launcher command line; ``env`` is passed to the ranks with the launcher's
        own option (a launcher of unknown flavour gets it through the environment)."""
        extra = _root_and_oversubscribe(self.flavour, nprocs, mpiexec_args)
        return [self.launcher, "-n", str(nprocs), *extra, *self.options(env or {}),
                *mpiexec_args, *command]

    def options(self, env: dict[str, str], workdir: str | Path | None = None) -> list[str]:
        """The launcher's own options that give every rank ``env`` and, if given, the
        working folder ``workdir`` (``-wdir`` in MPICH's and Open MPI's launchers; a
        launcher of unknown flavour gets neither)."""
        args = ["-wdir", str(workdir)] if workdir is not None and self.flavour != "unknown" else []
        return args + _env_args(self.flavour, env)

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """Our environment for the launcher process."""
        proc_env = dict(os.environ)
        for k, v in PINNED_THREADS_ENV.items():
            proc_env.setdefault(k, v)
        if self.flavour == "unknown":  # no known option to pass variables
            proc_env.update(env)
        return proc_env


def launch_for(command: Sequence[str], mpiexec: str | None = None,
               progress: Callable[[str], None] | None = None) -> Launch:
    """The :class:`Launch` of ``command``: its own MPI's launcher and ``mpicc`` (see the
    module docstring), ``mpiexec``/``$SIGEX_MPIEXEC``/``$SIGEX_MPICC`` as checked overrides.

    Raises
    ------
    TracerError
        No launcher, or an override that belongs to another MPI than the program's.
    """
    mpicc, launcher = _choose_mpi([str(c) for c in command], mpiexec, progress or (lambda m: None))
    launcher = launcher or shutil.which("mpiexec")
    if not launcher:
        raise TracerError("no `mpiexec` on PATH: install an MPI (`pip install mpich`, or "
                          "`pip install 'sigex[mpi]'`) or pass --mpiexec")
    return Launch(launcher, _mpi.launcher_flavour(launcher), mpicc)


def run_environment(nprocs: int) -> dict[str, str]:
    """Variables every traced rank gets (and an untraced run should get, to compare):
    one BLAS/OpenMP thread, and MPICH yielding when ranks outnumber cores."""
    env = dict(PINNED_THREADS_ENV)
    if nprocs > (os.cpu_count() or 1):
        env["MPIR_CVAR_ENABLE_HEAVY_YIELD"] = "1"
    return env


#: The tracer's run-time settings (docs/trace-format.md, "Lazy CPU-time sampling"): set in
#: our environment, they are handed to every rank with the launcher's own option, as
#: LD_PRELOAD is, so that ranks on other hosts get them too.
TRACER_SETTINGS = ("SIGEX_CPU_SAMPLE_MIN_US", "SIGEX_CPU_SAMPLE_CHAIN_US",
                   "SIGEX_CPU_SAMPLE_CHECK", "SIGEX_NO_PERF", "SIGEX_POLL_CLOCK")


def tracer_settings() -> dict[str, str]:
    """The tracer settings (:data:`TRACER_SETTINGS`) that our environment sets.

    Raises
    ------
    TracerError
        ``SIGEX_POLL_CLOCK`` is set to something other than ``tsc`` or ``clock_gettime``.
    """
    clock = os.environ.get("SIGEX_POLL_CLOCK", "")
    if clock not in ("", "tsc", "clock_gettime"):
        raise TracerError(f"SIGEX_POLL_CLOCK={clock}: expected 'tsc' (rdtsc, not re-checked "
                          "against CLOCK_MONOTONIC) or 'clock_gettime'; unset it for the default "
                          "(rdtsc where the TSC is invariant, checked)")
    return {k: os.environ[k] for k in TRACER_SETTINGS if k in os.environ}


def _root_and_oversubscribe(flavour: str, nprocs: int, user_args: Sequence[str]) -> list[str]:
    """Open MPI refuses to start as root, and to start more ranks than slots, unless told."""
    if flavour != "openmpi":
        return []
    args = []
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-run-as-root" not in user_args:
        args.append("--allow-run-as-root")
    if nprocs > (os.cpu_count() or 1) and "--oversubscribe" not in user_args:
        args.append("--oversubscribe")
    return args


_LOADER_ERROR = ("symbol lookup error", "undefined symbol", "cannot open shared object",
                 "ERROR: ld.so", "wrong ELF class")


def _loader_failure(lines: Sequence[str], lib: Path) -> str | None:
    """The loader's message if the tracer library could not be loaded."""
    for line in lines:
        if lib.name in line and any(k in line for k in _LOADER_ERROR):
            return line.strip()
    return None


def _env_args(flavour: str, env: dict[str, str]) -> list[str]:
    args: list[str] = []
    for k, v in env.items():
        if flavour == "hydra":
            args += ["-genv", k, v]
        elif flavour == "openmpi":
            args += ["-x", f"{k}={v}"]
    return args


def trace_run(command: Sequence[str], nprocs: int, output: str | Path, *,
              workload: str | None = None, app: str | None = None,
              mpiexec: str | None = None, mpiexec_args: Sequence[str] = (),
              overwrite: bool = False, keep_raw: bool = False,
              timeout: float | None = None, stdout: IO | None = None,
              progress: Callable[[str], None] | None = None) -> TraceResult:
    """Trace ``command`` on ``nprocs`` ranks and write one HDF5 trace.

    Parameters
    ----------
    command : sequence of str
        The program and its arguments, unchanged (``["python", "app.py",
        "--n", "2000"]`` or ``["./lu.x"]``).
    nprocs : int
        Number of MPI processes.
    output : str or Path
        A ``.h5`` file, or a directory that receives ``P<nprocs>.h5``.
    workload : str, optional
        ``NAME=VALUE`` stored in the metadata (e.g. ``n=2000``).
    app : str, optional
        Application name; default: the script or program name.
    mpiexec : str, optional
        Launcher; default ``$SIGEX_MPIEXEC`` or ``mpiexec`` on PATH.
    mpiexec_args : sequence of str
        Extra launcher options placed before the program.
    overwrite : bool
        Replace an existing trace file (otherwise refuse before running).
    keep_raw : bool
        Keep the raw per-rank files next to the trace (``<file>.raw/``). While the
        program runs they are written to a temporary folder beside the trace, or
        under ``$SIGEX_RAW_DIR`` (which every rank's host must see).
    timeout : float, optional
        Kill the run after this many seconds (the trace is kept, incomplete).
    stdout : file, optional
        Where the program's standard output goes (default: ours).
    progress : callable, optional
        Receives one-line status messages.

    Returns
    -------
    TraceResult
        The trace is written even when the program fails; it is then marked
        incomplete and ``result.ok`` is false.

    Raises
    ------
    TracerError
        No launcher or compiler, a bad argument, or the run produced no
        tracer output at all.
    FileExistsError
        The trace file exists and ``overwrite`` is false.
    """
    say = progress or (lambda msg: None)
    command = [str(c) for c in command]
    if not command:
        raise TracerError("no program given: put the command after `--`, e.g. "
                          "`sigex trace -n 4 -- python app.py`")
    if nprocs < 1:
        raise TracerError(f"-n {nprocs}: the number of processes must be at least 1")
    label, value = parse_workload(workload)
    path = output_path(output, nprocs)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; remove it or pass --force to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    launch = launch_for(command, mpiexec, say)
    launcher, mpicc = launch.launcher, launch.mpicc
    lib = tracer_library(mpicc=mpicc, progress=say)
    say(f"tracer library {lib}")
    raw = Path(tempfile.mkdtemp(prefix=f".{path.stem}.raw-",
                                dir=os.environ.get("SIGEX_RAW_DIR") or path.parent))
    env = run_environment(nprocs)
    env.update(tracer_settings())
    env["SIGEX_TRACE_DIR"] = str(raw)
    preload = os.environ.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = f"{lib}:{preload}" if preload else str(lib)
    proc_env = launch.environment(env)
    argv = launch.argv(command, nprocs, mpiexec_args, env)
    shown = launch.argv(command, nprocs, mpiexec_args)
    say(f"running {shlex.join(shown)}")
    t0 = time.perf_counter()
    try:
        rc, err_tail = _run_teeing_stderr(argv, proc_env, timeout, stdout)
    except subprocess.TimeoutExpired:
        rc, err_tail = -9, []
        say(f"run killed after {timeout} s")
    except OSError as err:
        shutil.rmtree(raw, ignore_errors=True)
        raise TracerError(f"cannot start {launcher}: {err}") from err
    wall = time.perf_counter() - t0
    loader = _loader_failure(err_tail, lib)
    if loader and not any(raw.glob("rank*.meta")):
        shutil.rmtree(raw, ignore_errors=True)
        raise TracerError(f"the tracer library could not be loaded into {command[0]}: {loader}. "
                          f"It was built with {mpicc or 'the mpicc on PATH'}; the program must "
                          "use the same MPI (set SIGEX_MPICC to that MPI's mpicc)")
    say(f"run finished in {wall:.2f} s (exit {rc}); assembling the trace")
    if not any(raw.glob("rank*.meta")):
        shutil.rmtree(raw, ignore_errors=True)
        why = (f"the run failed (exit {rc}) before any rank started the tracer" if rc else
               f"{command[0]} never called MPI_Init under the tracer")
        raise TracerError(
            f"{path}: no trace: {why}. Check that the program is an MPI program and runs "
            f"untraced with {launcher} -n {nprocs}; sigex traced it as a program of "
            f"{'the MPI of ' + mpicc if mpicc else 'the MPI on PATH'}")
    try:
        trace = assemble(raw, meta={
            "app": app or _app_name(command),
            "command": command,
            "launcher": launcher,
            "workload_label": label,
            "workload_value": value,
            "exit_code": rc,
            "wall_time_launcher": wall,
        })
    except Exception:
        if not keep_raw:
            shutil.rmtree(raw, ignore_errors=True)
        raise
    if rc != 0 and trace.complete:
        trace.meta["complete"] = False
        trace.meta["incomplete_reason"] = f"the program exited with status {rc}"
    trace.to_hdf5(path, overwrite=overwrite)
    if keep_raw:
        kept = path.with_name(path.name + ".raw")
        if kept.exists():
            shutil.rmtree(kept)
        shutil.move(str(raw), str(kept))  # SIGEX_RAW_DIR may be another file system
    else:
        shutil.rmtree(raw, ignore_errors=True)
    return TraceResult(path=path, trace=trace, returncode=rc, wall_time=wall, command=tuple(command))


def _run_teeing_stderr(argv, env, timeout, stdout) -> tuple[int, list[str]]:
    """Run ``argv``; its standard error goes to ours as it comes, and its last lines
    are kept (the loader's message when the tracer cannot be loaded)."""
    tail: collections.deque = collections.deque(maxlen=200)
    proc = subprocess.Popen(argv, env=env, stdout=stdout, stderr=subprocess.PIPE)

    def pump() -> None:
        for raw_line in iter(proc.stderr.readline, b""):
            line = raw_line.decode(errors="replace")
            sys.stderr.write(line)
            sys.stderr.flush()
            tail.append(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        reader.join(5)
        raise
    reader.join(30)
    return rc, list(tail)


def _app_name(command: Sequence[str]) -> str:
    """The script's name for ``python app.py``, else the program's."""
    for arg in command:
        if arg.endswith(".py"):
            return Path(arg).stem
    return Path(command[0]).name
