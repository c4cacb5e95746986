"""Measure a machine profile on the machine this runs on (``sigex calibrate``).

Two MPI ranks (``mpiexec -n 2``, mpi4py) run microbenchmarks in the spirit of
the parametrised-RTT method for LogGP (Hoefler et al.; Kielmann et al.'s
PRTT):

* **ping-pong** over message sizes 1 B .. 4 MiB: RTT(s)/2 = L + 2 o + s G for
  eager sizes, so a least-squares line through the half round trips gives
  L + 2 o (intercept) and G (slope); sizes at or above the rendezvous
  threshold carry a handshake and are fitted separately only to report it;
* **send overhead** o: the time inside MPI_Isend of a small message (median);
* **gap** g: the time per message of a burst of small messages, minus o;
* the eager/rendezvous threshold S is MPICH's default (MPIR_CVAR_CH3/CH4
  eager max, 64 KiB) unless the environment sets one;
* compute speed is 1.0: the traces sigex replays were measured here.

Both ranks run on this host, so the profile describes intra-node (shared
memory) messaging: it is written as the network *and* the intra-node link.
The median of repeated measurements is used throughout; on an oversubscribed
or busy machine the figures are noisy and the report says how noisy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from .machine import LogGP, Machine, MachineError

__all__ = ["calibrate", "fit_pingpong", "BENCH_SCRIPT"]

BENCH_SCRIPT = r"""
import json, sys, time
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD
r = c.rank
reps = int(sys.argv[1])
sizes = [1, 8, 64, 512, 1024, 4096, 16384, 32768, 65536, 131072, 524288, 1048576, 4194304]
out = {"sizes": sizes, "half_rtt": [], "spread": []}
for s in sizes:
    buf = np.zeros(max(s, 1), np.uint8)
    n = max(3, reps if s <= 65536 else reps // 8)
    times = []
    for _ in range(n + 2):
        c.Barrier()
        t0 = time.perf_counter()
        if r == 0:
            c.Send([buf, s, MPI.BYTE], 1, 0); c.Recv([buf, s, MPI.BYTE], 1, 0)
        else:
            c.Recv([buf, s, MPI.BYTE], 0, 0); c.Send([buf, s, MPI.BYTE], 0, 0)
        times.append((time.perf_counter() - t0) / 2)
    t = np.array(times[2:])
    out["half_rtt"].append(float(np.median(t)))
    out["spread"].append(float((np.percentile(t, 75) - np.percentile(t, 25)) / np.median(t)))
    if r == 0:
        print(f"PROGRESS ping-pong {s} B: {np.median(t) * 1e6:.2f} us", flush=True)
# send overhead and gap: bursts of small Isends
buf = np.zeros(8, np.uint8)
k = 64
o_s, g_s = [], []
for _ in range(max(5, reps // 10)):
    c.Barrier()
    if r == 0:
        reqs, t_in = [], 0.0
        t0 = time.perf_counter()
        for i in range(k):
            a = time.perf_counter()
            reqs.append(c.Isend([buf, 8, MPI.BYTE], 1, 1))
            t_in += time.perf_counter() - a
        MPI.Request.Waitall(reqs)
        c.Recv([buf, 1, MPI.BYTE], 1, 2)
        o_s.append(t_in / k)
        g_s.append((time.perf_counter() - t0) / k)
    else:
        reqs = [c.Irecv([np.zeros(8, np.uint8), 8, MPI.BYTE], 0, 1) for i in range(k)]
        MPI.Request.Waitall(reqs)
        c.Send([buf, 1, MPI.BYTE], 0, 2)
if r == 0:
    out["o"] = float(np.median(o_s)); out["burst_per_msg"] = float(np.median(g_s))
    print("RESULT " + json.dumps(out), flush=True)
"""


def fit_pingpong(sizes, half_rtt, S: int) -> tuple[float, float]:
    """(L + 2o, G) from the eager half round trips (sizes below S): least squares."""
    s = np.asarray(sizes, float)
    t = np.asarray(half_rtt, float)
    eager = s < S
    if eager.sum() < 2:
        raise MachineError("fewer than 2 eager message sizes measured: cannot fit L and G")
    A = np.stack([np.ones(int(eager.sum())), s[eager]], axis=1)
    (a, G), *_ = np.linalg.lstsq(A, t[eager], rcond=None)
    return float(max(a, 0.0)), float(max(G, 1e-15))


def calibrate(name: str = "this-machine", *, reps: int = 200, mpiexec: str | None = None,
              progress: Callable[[str], None] | None = None, S: int | None = None) -> Machine:
    """Run the microbenchmarks on two local ranks and return the fitted profile."""
    say = progress or (lambda m: None)
    launcher = mpiexec or os.environ.get("SIGEX_MPIEXEC") or shutil.which("mpiexec")
    if not launcher:
        raise MachineError("no mpiexec on PATH: pip install mpich (or set $SIGEX_MPIEXEC)")
    S = int(S or os.environ.get("MPIR_CVAR_CH4_EAGER_MAX_MSG_SIZE") or 65536)
    with tempfile.TemporaryDirectory(prefix="sigex-calibrate-") as tmp:
        script = Path(tmp) / "bench.py"
        script.write_text(BENCH_SCRIPT)
        cmd = [launcher, "-n", "2", sys.executable, str(script), str(reps)]
        say("running " + " ".join(cmd))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        result = None
        for line in proc.stdout:
            if line.startswith("PROGRESS "):
                say(line[9:].strip())
            elif line.startswith("RESULT "):
                result = json.loads(line[7:])
        err = proc.stderr.read()
        if proc.wait() != 0 or result is None:
            raise MachineError(f"the calibration run failed (exit {proc.returncode}): "
                               + " | ".join(err.strip().splitlines()[-3:]))
    a, G = fit_pingpong(result["sizes"], result["half_rtt"], S)
    o = min(result["o"], a / 2)
    L = max(a - 2 * o, 1e-9)
    g = max(result["burst_per_msg"] - o, 0.0)
    link = LogGP(L=L, o=o, g=g, G=G, O=0.0)
    noise = float(np.median(result["spread"]))
    desc = (f"measured by sigex calibrate on 2 local ranks (shared memory); ping-pong {len(result['sizes'])} "
            f"sizes, median interquartile spread {100 * noise:.0f}%")
    say(f"L={L:.3g} s  o={o:.3g} s  g={g:.3g} s  G={G:.3g} s/B ({1 / G / 1e9:.2f} GB/s)  S={S} B")
    return Machine(name=name, network=link, S=S, speed=1.0, cores=os.cpu_count() or 1, intra=link,
                   description=desc)
