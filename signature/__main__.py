"""``python -m signature [options] app.py [args]``: trace an mpi4py script from inside.

Run it under the launcher like the script itself::

    mpiexec -n 4 python -m signature -o traces/ring/P4.h5 examples/ring_halo.py --n 1000

Each rank loads the tracer with ``mpi4py.profile`` before ``mpi4py.MPI`` is
imported (no LD_PRELOAD needed), then runs the script as ``__main__``. The
ranks' raw files go to ``<output>.raw/``; after MPI_Finalize, rank 0 waits
for every rank's end record and writes the HDF5 trace (atomically), then
removes the raw files. ``sigex trace`` is the launcher-side equivalent and
also traces C and Fortran programs.
"""

from __future__ import annotations

import argparse
import atexit
import os
import runpy
import shutil
import sys
import time
from pathlib import Path

from .capture import PINNED_THREADS_ENV, output_path, parse_workload


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m signature",
        description="Trace an mpi4py script with the sigex PMPI tracer (run it under mpiexec).",
        epilog="example: mpiexec -n 4 python -m signature -o /tmp/P4.h5 "
               "examples/ring_halo.py --n 1000 --iters 20")
    p.add_argument("-o", "--output", default=".", help="trace file (.h5) or directory "
                   "(receives P<n>.h5); default: current directory")
    p.add_argument("--workload", help="NAME=VALUE stored in the trace, e.g. n=2000")
    p.add_argument("--app", help="application name (default: the script's name)")
    p.add_argument("--force", action="store_true", help="replace an existing trace file")
    p.add_argument("--wait", type=float, default=120.0,
                   help="seconds rank 0 waits for the other ranks' end records (default 120)")
    p.add_argument("script", help="the mpi4py script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return p


def main(argv: list[str] | None = None) -> int:
    opts = _parser().parse_args(argv)
    nprocs = int(os.environ.get("PMI_SIZE") or os.environ.get("OMPI_COMM_WORLD_SIZE")
                 or os.environ.get("PMIX_SIZE") or 1)
    out = output_path(opts.output, nprocs)
    if out.exists() and not opts.force:
        print(f"python -m signature: {out} already exists; remove it or pass --force",
              file=sys.stderr)
        return 2
    label, value = parse_workload(opts.workload)
    raw = out.with_name(out.name + ".raw")
    raw.mkdir(parents=True, exist_ok=True)
    os.environ["SIGEX_TRACE_DIR"] = str(raw)
    for k, v in PINNED_THREADS_ENV.items():
        os.environ.setdefault(k, v)

    from ._build import tracer_library
    lib = tracer_library()
    import mpi4py
    mpi4py.profile(lib.name[3:-3], path=[str(lib.parent)])

    def finish() -> None:
        # mpi4py finalizes MPI after the interpreter's atexit handlers: do it now,
        # so that this rank's tracer writes its end record.
        MPI = sys.modules.get("mpi4py.MPI")
        if MPI is not None and MPI.Is_initialized() and not MPI.Is_finalized():
            MPI.Finalize()
        meta0 = raw / "rank0.meta"
        if not meta0.exists() or f"pid={os.getpid()}\n" not in meta0.read_text():
            return  # not world rank 0
        from ._raw import _read_kv, assemble
        size = int(_read_kv(meta0)["size"])
        deadline = time.monotonic() + opts.wait
        while time.monotonic() < deadline:
            if all((raw / f"rank{r}.end").exists() for r in range(size)):
                break
            time.sleep(0.05)
        trace = assemble(raw, meta={
            "app": opts.app or Path(opts.script).stem,
            "command": [sys.executable, opts.script, *opts.args],
            "workload_label": label, "workload_value": value,
        })
        trace.to_hdf5(out, overwrite=opts.force)
        shutil.rmtree(raw, ignore_errors=True)
        state = "complete" if trace.complete else f"INCOMPLETE: {trace.meta['incomplete_reason']}"
        print(f"sigex: wrote {out} ({trace.n_events} events, {state})", file=sys.stderr)

    atexit.register(finish)
    sys.argv = [opts.script, *opts.args]
    runpy.run_path(opts.script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
