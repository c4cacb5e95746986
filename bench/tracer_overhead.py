"""Tracer overhead: traced/untraced runtime of the examples, and the cost of one call.

For each example, the same command runs alternately without and with the
tracer (``sigex trace``), ``--repeat`` times each; the figure compared is
the application's own timed loop (the ``time=`` its rank 0 prints), so that
interpreter start-up and trace assembly do not count. The ratio is the
median traced time over the median untraced time. The goal (issue: capture)
is a ratio under 1.05 for programs whose bursts between MPI calls last 1 ms
or longer; the table shows each example's median burst so that can be read
off.

The per-call cost is measured with ``bench/c/call_cost.c``: N sends to
MPI_PROC_NULL (which return at once in any MPI) with and without the tracer
preloaded, at P = 1. Each traced call takes two wall-clock readings, two
reads of the perf_event_open counter group (system calls) and one record.

Usage: ``python bench/tracer_overhead.py [--repeat 3] [--nprocs 4]``.
The last line printed is one JSON object with the figures and the goals.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from signature import load_trace, trace_run, tracer_library  # noqa: E402
from signature.capture import PINNED_THREADS_ENV  # noqa: E402

# (name, script, args) at the bundled traces' original workloads
CASES = [
    ("stencil", "stencil.py", ["--n", "2048", "--iters", "100"]),
    ("cg", "cg.py", ["--n", "2048", "--iters", "50"]),
    ("nbody", "nbody.py", ["--n", "4096", "--iters", "5"]),
    ("fft2d", "fft2d.py", ["--n", "2048", "--iters", "10"]),
    ("sweep", "sweep.py", ["--n", "1024", "--iters", "5"]),
]
TIME_RE = re.compile(r"time=([0-9.eE+-]+)")


def app_time(stdout: str, what: str) -> float:
    m = TIME_RE.search(stdout)
    if not m:
        raise SystemExit(f"{what}: no 'time=' in the program's output:\n{stdout}")
    return float(m.group(1))


def run_plain(cmd: list[str], nprocs: int) -> float:
    env = dict(os.environ, **PINNED_THREADS_ENV)
    out = subprocess.run(["mpiexec", "-n", str(nprocs), *cmd], capture_output=True, text=True,
                         env=env, check=True).stdout
    return app_time(out, " ".join(cmd))


def run_traced(cmd: list[str], nprocs: int, tmp: Path, k: int) -> tuple[float, float]:
    """Traced run: (application time, median burst wall time)."""
    log = tmp / f"out{k}.txt"
    with open(log, "w") as out:
        res = trace_run(cmd, nprocs, tmp / f"t{k}.h5", stdout=out)
    if not res.ok:
        raise SystemExit(f"traced run failed: {res.trace.meta.get('incomplete_reason')}")
    t = load_trace(res.path)
    ops = t.events["op"]
    bursts = t.events["t_comp"][(ops != t.op_code("Init")) & (ops != t.op_code("Finalize"))]
    return app_time(log.read_text(), " ".join(cmd)), float(np.median(bursts))


def call_cost(n: int) -> tuple[float, float]:
    exe = Path(tempfile.mkdtemp()) / "call_cost"
    subprocess.run(["mpicc", "-O2", "-o", str(exe), str(ROOT / "bench/c/call_cost.c")], check=True)

    def ns(extra: list[str]) -> float:
        out = subprocess.run(["mpiexec", "-n", "1", *extra, str(exe), str(n)], capture_output=True,
                             text=True, check=True).stdout
        return float(out.split()[-1])

    plain = min(ns([]) for _ in range(3))
    raw = tempfile.mkdtemp()
    lib = str(tracer_library())
    traced = min(ns(["-genv", "LD_PRELOAD", lib, "-genv", "SIGEX_TRACE_DIR", raw]) for _ in range(3))
    shutil.rmtree(raw, ignore_errors=True)
    shutil.rmtree(exe.parent, ignore_errors=True)
    return plain, traced


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--nprocs", type=int, default=2,
                    help="ranks (default 2: one per core here; oversubscribed wall times are noise)")
    ap.add_argument("--calls", type=int, default=200_000)
    opts = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, script, args in CASES:
            cmd = [sys.executable, str(ROOT / "examples" / script), *args]
            plain, traced, bursts = [], [], []
            for k in range(opts.repeat):  # interleaved, alternating which goes first
                order = (0, 1) if k % 2 == 0 else (1, 0)
                for which in order:
                    if which == 0:
                        plain.append(run_plain(cmd, opts.nprocs))
                    else:
                        t, b = run_traced(cmd, opts.nprocs, tmp, len(rows) * 100 + k)
                        traced.append(t)
                        bursts.append(b)
            rows.append({
                "example": name, "nprocs": opts.nprocs,
                "untraced_s": statistics.median(plain), "traced_s": statistics.median(traced),
                "ratio": statistics.median(traced) / statistics.median(plain),
                "median_burst_ms": 1e3 * statistics.median(bursts),
            })
    plain_ns, traced_ns = call_cost(opts.calls)
    print(f"{'example':10s} {'P':>3s} {'untraced (s)':>13s} {'traced (s)':>11s} {'ratio':>7s} "
          f"{'median burst (ms)':>18s}")
    for r in rows:
        print(f"{r['example']:10s} {r['nprocs']:3d} {r['untraced_s']:13.4f} {r['traced_s']:11.4f} "
              f"{r['ratio']:7.3f} {r['median_burst_ms']:18.3f}")
    print(f"\none intercepted call (MPI_Send to MPI_PROC_NULL, P=1): untraced {plain_ns:.0f} ns, "
          f"traced {traced_ns:.0f} ns, tracer cost {traced_ns - plain_ns:.0f} ns per call")
    long_bursts = [r for r in rows if r["median_burst_ms"] >= 1.0]
    print(json.dumps({
        "bench": "tracer_overhead",
        "examples": rows,
        "call_ns_untraced": plain_ns, "call_ns_traced": traced_ns,
        "tracer_ns_per_call": traced_ns - plain_ns,
        "goal": {"ratio_max_where_bursts_ge_1ms": 1.05},
        "goal_met": all(r["ratio"] < 1.05 for r in long_bursts),
        "max_ratio_where_bursts_ge_1ms": max((r["ratio"] for r in long_bursts), default=None),
    }))


if __name__ == "__main__":
    main()
