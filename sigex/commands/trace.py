"""``sigex trace``: run an MPI program under the PMPI tracer and write its HDF5 trace."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from signature.errors import UsageError

from ._common import formatter, output_file, output_folder, seconds, whole

NAME = "trace"
HELP = "run an MPI program under the tracer and write its HDF5 trace"


def add_parser(sub) -> argparse.ArgumentParser:
    t = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="Run an unmodified MPI program (mpi4py, C, Fortran) under the sigex PMPI "
                    "tracer and write one HDF5 trace file.",
        epilog="examples:\n"
               "  sigex trace -n 4 -o /tmp/stencil/ --workload n=512 -- "
               "python examples/stencil.py --n 512 --iters 20\n"
               "  sigex trace -n 4 -o /tmp/stencil/ --force --mpiexec-args '-bind-to none' -- "
               "python examples/stencil.py --n 512 --iters 20\n"
               "  sigex trace -n 16 -o traces/lu/ -- ./lu.x\n"
               "The program goes after `--`. The trace is written even if the program fails "
               "(marked incomplete).")
    t.add_argument("-n", "--nprocs", type=whole(1, "processes"), required=True, help="number of MPI processes")
    t.add_argument("-o", "--output", default=".", help="trace file (.h5) or directory that "
                   "receives P<n>.h5 (default: current directory)")
    t.add_argument("--workload", help="NAME=VALUE recorded in the trace, e.g. n=2000")
    t.add_argument("--app", help="application name (default: the script or program name)")
    t.add_argument("--mpiexec", help="launcher (default: $SIGEX_MPIEXEC or mpiexec on PATH)")
    t.add_argument("--mpiexec-args", action="append", metavar="ARGS",
                   help="extra launcher options as one quoted string, split like a shell does, e.g. "
                        "'-bind-to none' or '--oversubscribe' (may start with '-'; repeatable)")
    t.add_argument("--timeout", type=seconds, help="kill the run after this many seconds")
    t.add_argument("--force", action="store_true", help="replace an existing trace file")
    t.add_argument("--keep-raw", action="store_true",
                   help="keep the tracer's raw per-rank files in <file>.raw/")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    t.add_argument("command", nargs=argparse.REMAINDER, help="-- program [args...]")
    return t


#: options whose value may begin with "-": launcher options, a grid or P range someone typed
#: negative (argparse would take "-3x2" for an unknown option and say "expected one argument")
DASHED_VALUES = ("--mpiexec-args", "--grid", "--p", "--workload", "--work")


def normalise_argv(argv: list[str]) -> list[str]:
    """``--mpiexec-args VALUE`` -> ``--mpiexec-args=VALUE`` (and the other :data:`DASHED_VALUES`)
    before the program's ``--``, so that a value beginning with ``-`` (``'--oversubscribe'``) is
    taken as the value, not as an option argparse does not know."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return out + argv[i:]
        if a in DASHED_VALUES and i + 1 < len(argv) and argv[i + 1] != "--":
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def mpiexec_args(values: list[str] | None) -> list[str]:
    """The launcher options of every --mpiexec-args, each split as a shell would."""
    out = []
    for v in values or ():
        try:
            out += shlex.split(v)
        except ValueError as err:
            raise UsageError(f"--mpiexec-args {v!r}: {err} (quote the options as one string)") from err
    return out


def program(name: str) -> None:
    """The program to trace exists and can be run (else mpiexec starts it on every rank, each
    fails, and the tracer has nothing to say but that it wrote nothing)."""
    import os
    import shutil

    if os.sep not in name:
        if shutil.which(name) is None:
            raise UsageError(f"{name}: no such program on PATH; give its path (./{name}) or install it")
        return
    p = Path(name)
    if not p.exists():
        raise UsageError(f"{p}: no such program")
    if p.is_dir():
        raise UsageError(f"{p} is a folder, not a program")
    if not os.access(p, os.X_OK):
        raise UsageError(f"{p} is not executable: run it through its interpreter (python {p}) or "
                         f"chmod +x {p}")


def run(opts: argparse.Namespace) -> int:
    from signature.capture import output_path, trace_run

    command = list(opts.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("no program to run: put the command after `--`, e.g. "
                         "sigex trace -n 4 -- python app.py")
    program(command[0])
    launcher_args = mpiexec_args(opts.mpiexec_args)
    path = output_path(opts.output, opts.nprocs)
    if Path(opts.output).suffix in (".h5", ".hdf5"):
        output_file(path, opts.force)
    else:
        output_folder(opts.output)
        if path.exists() and not opts.force:
            raise UsageError(f"{path} already exists; pass --force to replace it")

    def say(msg: str) -> None:
        if not opts.quiet:
            print(f"sigex trace: {msg}", file=sys.stderr)

    res = trace_run(command, opts.nprocs, opts.output, workload=opts.workload, app=opts.app,
                    mpiexec=opts.mpiexec, mpiexec_args=launcher_args,
                    overwrite=opts.force, keep_raw=opts.keep_raw, timeout=opts.timeout,
                    progress=say)
    t = res.trace
    if res.ok:
        print(f"wrote {res.path}: P={t.nprocs}, {t.n_events} events, runtime {t.runtime:.3f} s, "
              f"{t.work_mode} mode")
        return 0
    what = (f"the run failed (exit {res.returncode})" if res.returncode else
            "the run finished (exit 0), but its trace is not whole")
    print(f"sigex trace: error: {what}; wrote {res.path} marked incomplete: "
          f"{t.meta.get('incomplete_reason')}", file=sys.stderr)
    return 1
