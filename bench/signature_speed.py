"""Phase detection speed: events per second of ``signature.extract`` on a synthetic trace.

The trace is built in memory (no MPI run): P ranks in a ring, each iteration an
Irecv from both neighbours, an Isend to both, a Waitall, and every 10th
iteration an Allreduce; iterations are added until the trace holds the
requested number of events (default 10 million). Times are synthetic but
consistent (every rank's events are spaced by 1 ms bursts).

It also times ``extract`` on every bundled trace. The goal (issue: signature
extraction) is above 2 million events/s on the 10-million-event trace, and well
under a second per bundled trace.

With ``--trace PATH`` (repeatable) it also times ``extract`` on real traces, in CPU
seconds (``time.process_time``, median of ``--reps`` runs: other work on a shared
machine disturbs wall time far more), e.g. LAMMPS peptide at P = 32 (3.37 M events),
the largest real trace, whose goal is 2 million events per CPU second; the first call's
CPU time is shown too. This process keeps the memory it frees, as the ``sigex`` command's
does (``signature/_memory.py``).

Usage: ``python bench/signature_speed.py [--events 10000000] [--nprocs 1024]
[--trace bench/_apps/peptide/P32/P32.h5 --reps 5]``. The last line printed is one JSON
object with the figures and the goals.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from signature._memory import tune_allocation  # noqa: E402
from signature import extract, load_trace  # noqa: E402
from signature.trace import COMPLETION_COLUMNS, OP_CODE, CommTable, Trace  # noqa: E402


def synthetic_ring(n_events: int, P: int) -> Trace:
    """A complete ring-halo trace of about ``n_events`` events over ``P`` ranks."""
    per_iter = 5.1  # 5 events, plus an Allreduce every 10th iteration
    iters = max(10, int(n_events / P / per_iter) // 10 * 10)
    ops_iter = [OP_CODE[o] for o in ("Irecv", "Irecv", "Isend", "Isend", "Waitall")]
    body = ops_iter * 10 + [OP_CODE["Allreduce"]]  # 10 iterations
    rank_ops = np.array([OP_CODE["Init"]] + body * (iters // 10) + [OP_CODE["Finalize"]], np.uint8)
    L = len(rank_ops)
    ops = np.tile(rank_ops, P)
    rank = np.repeat(np.arange(P, dtype=np.int32), L)
    pos = np.tile(np.arange(L), P)
    in_body = (pos - 1) % 51
    slot = np.where(in_body < 50, in_body % 5, 5)
    left, right = (rank - 1) % P, (rank + 1) % P
    peer = np.select([slot == 0, slot == 1, slot == 2, slot == 3], [left, right, right, left], -1)
    peer = np.where((ops == OP_CODE["Init"]) | (ops == OP_CODE["Finalize"]), -1, peer).astype(np.int32)
    nbytes = np.where(np.isin(slot, [2, 3]), 8000, np.where(ops == OP_CODE["Allreduce"], 8, 0))
    recv_bytes = np.where(np.isin(slot, [0, 1]), 8000, np.where(ops == OP_CODE["Allreduce"], 8, 0))
    t_comp = np.full(len(ops), 1e-3)
    t_comm = np.full(len(ops), 1e-5)
    t_start = np.tile(np.arange(L) * (1e-3 + 1e-5), P)
    zeros = np.zeros(len(ops), np.int32)
    events = {
        "rank": rank, "seq": pos.astype(np.int64), "op": ops, "peer": peer,
        "recv_peer": np.full(len(ops), -1, np.int32), "root": np.full(len(ops), -1, np.int32),
        "tag": zeros, "comm": np.where(ops == OP_CODE["Waitall"], -1, 0).astype(np.int32),
        "aux": np.where(ops == OP_CODE["Waitall"], 4, 0).astype(np.int32),
        "bytes": nbytes.astype(np.int64), "recv_bytes": recv_bytes.astype(np.int64),
        "req": np.full(len(ops), -1, np.int64), "t_start": t_start, "t_comm": t_comm,
        "t_comp": t_comp, "t_cpu": t_comp * 0.98, "ctx_switches": np.zeros(len(ops), np.int64),
    }
    return Trace(meta={"nprocs": P, "complete": True, "work_mode": "cpu-time", "app": "ring"},
                 events=events, rank_offsets=np.arange(P + 1, dtype=np.int64) * L,
                 completions={c: np.zeros(0, d) for c, d in COMPLETION_COLUMNS.items()},
                 lists={c: np.zeros(0, np.int64) for c in ("rank", "seq", "kind", "start", "length",
                                                            "values")},
                 comms=CommTable.world_only(P))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--nprocs", type=int, default=1024)
    ap.add_argument("--trace", type=Path, action="append", default=[],
                    help="a real trace to time too (CPU seconds; repeatable)")
    ap.add_argument("--reps", type=int, default=5, help="runs per real trace (the median is kept)")
    opts = ap.parse_args()
    tune_allocation()  # as the `sigex` command's process does (signature/_memory.py)

    t0 = time.perf_counter()
    trace = synthetic_ring(opts.events, opts.nprocs)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    sig = extract(trace)
    elapsed = time.perf_counter() - t0
    rate = trace.n_events / elapsed
    weights = [p.weight for p in sig.loop_phases]

    bundled = []
    for path in sorted((ROOT / "traces").rglob("*.h5")):
        t = load_trace(path)
        t0 = time.perf_counter()
        extract(t)
        bundled.append({"trace": str(path.relative_to(ROOT)), "events": t.n_events,
                        "seconds": time.perf_counter() - t0})

    real = []
    for path in opts.trace:
        t = load_trace(path)
        c0 = time.process_time()
        extract(t)  # the first call in this process pays for first-use allocations
        first = time.process_time() - c0
        cpu = []
        for _ in range(opts.reps):
            c0 = time.process_time()
            extract(t)
            cpu.append(time.process_time() - c0)
        med = statistics.median(cpu)
        real.append({"trace": str(path), "events": t.n_events, "cpu_seconds": med,
                     "events_per_cpu_second": t.n_events / med, "runs": cpu, "first_cpu_seconds": first})

    print(f"synthetic ring: P={opts.nprocs}, {trace.n_events:,} events (built in {build:.2f} s)")
    print(f"  extract: {elapsed:.3f} s, {rate / 1e6:.2f} million events/s; loop weights {weights}")
    print(f"\n{'bundled trace':32s} {'events':>8s} {'extract (s)':>12s}")
    for b in bundled:
        print(f"{b['trace']:32s} {b['events']:8d} {b['seconds']:12.4f}")
    for r in real:
        print(f"\n{r['trace']}: {r['events']:,} events, extract {r['cpu_seconds']:.3f} CPU s (median of "
              f"{len(r['runs'])}; the first call {r['first_cpu_seconds']:.3f}), "
              f"{r['events_per_cpu_second'] / 1e6:.2f} million events per CPU second")
    slowest = max(b["seconds"] for b in bundled)
    print(json.dumps({
        "bench": "signature_speed", "events": trace.n_events, "nprocs": opts.nprocs,
        "seconds": elapsed, "events_per_second": rate, "loop_weights": weights,
        "bundled_max_seconds": slowest, "real": real,
        "goal": {"events_per_second_min": 2e6, "bundled_seconds_max": 1.0,
                 "real_events_per_cpu_second_min": 2e6},
        "goal_met": bool(rate > 2e6 and slowest < 1.0
                         and all(r["events_per_cpu_second"] >= 2e6 for r in real)),
    }))


if __name__ == "__main__":
    main()
