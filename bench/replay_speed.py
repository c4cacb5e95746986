"""Replay speed: simulated events/s on the stencil and FFT physical traces, one and two workers, SimGrid.

For each app (``examples/stencil.toml``, ``examples/fft2d.toml``) the models write
the physical trace at P = 4,096 and 65,536 (each phase once, with its weight:
what the replay replays to predict PET). The table gives, per trace:

* one worker: ``replay.replay`` on one core;
* two workers: ``replay.workers.replay_workers`` on two MPI processes, timed
  inside the workers from a barrier to the result on worker 0 (the slowest
  worker's time). By default a trace under ``MIN_EVENTS_PER_WORKER`` events per
  worker is replayed by worker 0 alone ("pieces" 1); for those the "split"
  column times every worker with a piece anyway. MPI start-up is not included;
  it is measured apart, as the wall time of a bare ``mpiexec -n 2 python`` that
  initialises MPI;
* events/s: the events of the replayed program over the replay time. Building
  the Program from the trace (matching messages) is not included and is shown
  apart.

Both run in one ``mpiexec -n 2`` job (this script in worker mode), alternating
repetition by repetition so that both see the same machine (its speed drifts
with other work): worker 0 replays alone while the other worker sleeps, then
both replay together. Every timed replay is the first replay of a freshly built
Program (no cached event layout), after one untimed warm-up replay (imports,
collective patterns, the cost terms of collectives over the world and the
workers' exchange plans for them, which the replay keeps per machine and
pattern, as an MPI library keeps its tuned tables); the median of ``--reps``
is shown. The one-worker column
"again" is a second replay of the same Program (layout cached), as when one
program is replayed on several machines.

SimGrid: the same kind of trace is exported to SimGrid's time-independent format
(``replay.simgrid.export_ti``) and replayed by SMPI (``smpirun -replay``) on the
matching platform; its time is the whole smpirun process (start-up and platform
included). SMPI cannot replay the FFT at P = 4,096 in reasonable time (its
Alltoall is P - 1 pairwise rounds of P messages; at P = 1,024 it takes about
30 s), so the FFT is compared at P = 1,024; ``--simgrid`` chooses the traces.
Each SimGrid trace is the physical trace with each phase once (weights 1, so
``export_ti`` unrolls nothing): exactly the events sigex replays.

Goals (replay issue): at least 5 million events/s on one core; at least 10x
SimGrid's replay rate on the same trace; at least 1.7x from the second worker.
Benchmarks print, they do not judge: the last line is one JSON object with the
figures and, per goal, whether it was met. This machine has 2 cores and other
work may run at the same time; the load average is printed with the table.

    python bench/replay_speed.py [--sizes 4096,65536] [--reps 7] [--simgrid stencil:4096,fft2d:1024]
                                 [--no-simgrid] [--machine cluster-a]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from replay.workers import MIN_EVENTS_PER_WORKER  # noqa: E402

GOAL_RATE = 5e6       # events/s on one core
GOAL_SIMGRID = 10.0   # x SimGrid's replay rate on the same trace
GOAL_WORKERS = 1.7    # x from the second worker
APPS = ("stencil", "fft2d")


def _median(xs):
    return float(statistics.median(xs))


# ---- the timings: run under mpiexec -n W -----------------------------------------------------------

def _idle_barrier(comm) -> None:
    """A barrier that sleeps instead of spinning (the idle worker leaves the other the core)."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(0.0005)


def worker_main(paths: list[str], reps: int, machine_name: str) -> int:
    """Per trace and repetition, interleaved so that both see the same machine: worker 0
    replays a fresh Program alone (``replay``; twice: first and again) while the other
    workers sleep, then every worker replays another fresh Program with
    ``replay_workers`` (time: the slowest worker's, barrier to result). Worker 0 prints
    one JSON line."""
    from mpi4py import MPI

    import numpy as np

    from replay import Program, load, replay
    from replay.workers import replay_workers
    from signature import load_trace

    comm = MPI.COMM_WORLD
    me = comm.Get_rank()
    machine = load(machine_name)
    out = []
    for path in paths:
        trace = load_trace(path)
        t0 = time.perf_counter()
        prog = Program.from_trace(trace)
        build = time.perf_counter() - t0
        if me == 0:
            replay(prog, machine)  # warm-up: imports, collective patterns
        pieces = replay_workers(Program.from_trace(trace), machine)
        split = comm.bcast(pieces is not None and pieces.pieces < comm.Get_size(), root=0)
        if split:  # the default left workers idle: time every worker with a piece too
            replay_workers(Program.from_trace(trace), machine, min_events_per_worker=0)
        first, again, workers, forced = [], [], [], []
        for _ in range(reps):
            if me == 0:
                prog = Program.from_trace(trace)
                t0 = time.perf_counter()
                one = replay(prog, machine)
                first.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                replay(prog, machine)
                again.append(time.perf_counter() - t0)
            _idle_barrier(comm)
            prog = Program.from_trace(trace)
            comm.Barrier()
            t0 = time.perf_counter()
            res = replay_workers(prog, machine)
            workers.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
            if split:
                prog = Program.from_trace(trace)
                comm.Barrier()
                t0 = time.perf_counter()
                forced_res = replay_workers(prog, machine, min_events_per_worker=0)
                forced.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
        if me == 0:
            same = all(r.runtime == one.runtime and np.array_equal(r.finish, one.finish)
                       and np.array_equal(r.te, one.te) and np.array_equal(r.event_end, one.event_end)
                       for r in ([res, forced_res] if split else [res]))
            out.append({"path": path, "events": prog.n_events, "messages": prog.n_messages,
                        "collectives": prog.n_collectives, "build_s": build, "first": first,
                        "again": again, "workers_times": workers, "runtime": one.runtime,
                        "pet": one.pet(), "passes": res.passes, "workers": comm.Get_size(),
                        "pieces": res.pieces, "split_times": forced,
                        "split_passes": forced_res.passes if split else res.passes,
                        "identical": bool(same)})
    if me == 0:
        print("TIMINGS " + json.dumps(out), flush=True)
    return 0


def run_timings(paths: list[Path], reps: int, machine: str, n: int) -> dict[str, dict]:
    """This script in worker mode under ``mpiexec -n n``; results by trace path."""
    cmd = ["mpiexec", "-n", str(n), sys.executable, str(Path(__file__).resolve()), "--worker-mode",
           "--reps", str(reps), "--machine", machine, *map(str, paths)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("TIMINGS ")]
    if res.returncode != 0 or not lines:
        raise SystemExit(f"mpiexec -n {n} failed (exit {res.returncode}):\n{res.stdout}\n{res.stderr}")
    return {d["path"]: d for d in json.loads(lines[-1][len("TIMINGS "):])}


def mpi_startup(n: int, reps: int = 3) -> float:
    """Wall time of a bare ``mpiexec -n n python`` that initialises MPI and synchronises."""
    code = "from mpi4py import MPI; MPI.COMM_WORLD.Barrier()"
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(["mpiexec", "-n", str(n), sys.executable, "-c", code], check=True,
                       capture_output=True, timeout=120)
        ts.append(time.perf_counter() - t0)
    return _median(ts)


def simgrid_row(app: str, P: int, cm, machine, tmp: Path, reps: int, timeout: float) -> dict:
    from replay import Program, replay
    from replay.simgrid import export_ti, replay_smpi
    from replay.unroll import unroll
    from signature import load_trace

    path = cm.physical_trace(P, tmp / f"sg-{app}-{P}.h5", overwrite=True)
    trace = load_trace(path)
    once = unroll(trace, weights=[1] * len(trace.meta["phase_weights"]))  # what sigex replays
    t0 = time.perf_counter()
    prog = Program.from_trace(once)
    build = time.perf_counter() - t0
    replay(prog, machine)  # warm-up
    ts = []
    for _ in range(reps):
        prog = Program.from_trace(once)
        t0 = time.perf_counter()
        ours = replay(prog, machine).runtime
        ts.append(time.perf_counter() - t0)
    ours_s = _median(ts)
    index = export_ti(once, tmp / f"ti-{app}-{P}", overwrite=True)
    row = {"app": app, "P": P, "events": prog.n_events, "sigex_replay_s": ours_s, "sigex_build_s": build,
           "sigex_runtime": ours, "note": "each phase once (weights 1), the trace sigex replays"}
    t0 = time.perf_counter()
    try:
        theirs = replay_smpi(index, machine, P, timeout=timeout)
    except Exception as err:  # noqa: BLE001 -- a benchmark reports, it does not stop
        row.update(smpi_s=None, smpi_error=str(err))
        return row
    smpi_s = time.perf_counter() - t0
    row.update(smpi_s=smpi_s, smpi_runtime=theirs, sigex_events_per_s=prog.n_events / ours_s,
               smpi_events_per_s=prog.n_events / smpi_s, ratio=smpi_s / ours_s,
               ratio_with_build=smpi_s / (ours_s + build))
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4096,65536", help="comma-separated P values")
    ap.add_argument("--reps", type=int, default=7, help="timed replays per configuration (median shown)")
    ap.add_argument("--machine", default="cluster-a")
    ap.add_argument("--workers", type=int, default=2, help="MPI workers of the second column")
    ap.add_argument("--simgrid", default="stencil:4096,fft2d:1024",
                    help="app:P traces to replay with SMPI as well")
    ap.add_argument("--smpi-timeout", type=float, default=600)
    ap.add_argument("--no-simgrid", action="store_true")
    ap.add_argument("--worker-mode", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker_mode:
        return worker_main(args.paths, args.reps, args.machine)

    from compute_model import campaign
    from replay import load

    machine = load(args.machine)
    sizes = [int(x) for x in args.sizes.split(",")]
    load0 = os.getloadavg()
    have_mpi = shutil.which("mpiexec") is not None
    sg_list = [] if args.no_simgrid or not shutil.which("smpirun") else \
        [(a, int(p)) for a, p in (x.split(":") for x in args.simgrid.split(",") if x)]
    rows, sg_rows = [], []
    with tempfile.TemporaryDirectory(prefix="sigex-replay-speed-") as tmpdir:
        tmp = Path(tmpdir)
        models, paths = {}, {}
        for app in APPS:
            t0 = time.perf_counter()
            _, models[app] = campaign.models(campaign.load(ROOT / "examples" / f"{app}.toml"))
            for P in sizes:
                paths[app, P] = models[app].physical_trace(P, tmp / f"{app}-{P}.h5", overwrite=True)
            print(f"# {app}: models and physical traces at P = {sizes} in {time.perf_counter() - t0:.1f} s",
                  file=sys.stderr, flush=True)
        if not have_mpi:
            raise SystemExit("mpiexec not found: pip install mpich mpi4py")
        startup = mpi_startup(args.workers)
        order = [(app, P) for app in APPS for P in sizes]
        got = run_timings([paths[k] for k in order], args.reps, args.machine, args.workers)
        for app, P in order:
            r = got[str(paths[app, P])]
            r.update(app=app, P=P)
            rows.append(r)
        for app, P in sg_list:
            print(f"# SimGrid {app} P={P} ...", file=sys.stderr, flush=True)
            # SimGrid's platform is one single-core host per rank: both replay the flat machine
            sg_rows.append(simgrid_row(app, P, models[app], machine.flat(), tmp, args.reps, args.smpi_timeout))
    load1 = os.getloadavg()

    # ---- table ---------------------------------------------------------------------------
    W = args.workers
    print(f"replay speed on {machine.name}: {os.cpu_count()} cores on this machine, load average "
          f"{load0[0]:.2f} before and {load1[0]:.2f} after (other work may be running); median of "
          f"{args.reps} first replays of freshly built Programs; Program build not included")
    head = (f"{'trace':8s} {'P':>6s} {'events':>10s} {'build s':>8s} | {'1 worker s':>10s} {'ev/s':>9s} "
            f"{'again s':>8s} {'ev/s':>9s} | {f'{W} workers s':>11s} {'ev/s':>9s} {'speedup':>7s} "
            f"{'best':>6s} {'pieces':>6s} {'passes':>6s} | {'split':>6s} {'same':>4s}")
    print(head)
    print("-" * len(head))
    results = []
    for r in rows:
        first, again = _median(r["first"]), _median(r["again"])
        out = {"app": r["app"], "P": r["P"], "events": r["events"], "messages": r["messages"],
               "collectives": r["collectives"], "build_s": r["build_s"], "one_worker_s": first,
               "one_worker_events_per_s": r["events"] / first, "one_worker_again_s": again,
               "one_worker_again_events_per_s": r["events"] / again, "predicted_runtime_s": r["runtime"],
               "pet_s": r["pet"]}
        line = (f"{r['app']:8s} {r['P']:>6d} {r['events']:>10,d} {r['build_s']:>8.3f} | {first:>10.4f} "
                f"{r['events'] / first:>9.3g} {again:>8.4f} {r['events'] / again:>9.3g} | ")
        tw = _median(r["workers_times"])
        best = min(r["first"]) / min(r["workers_times"])
        ts = _median(r["split_times"]) if r["split_times"] else tw
        out.update(workers=W, workers_s=tw, workers_events_per_s=r["events"] / tw, speedup=first / tw,
                   speedup_best=best, speedup_vs_again=again / tw, pieces=r["pieces"],
                   passes=r["passes"], split_s=ts, speedup_split=first / ts,
                   split_passes=r["split_passes"], identical=r["identical"],
                   times={"one_worker": r["first"], "one_worker_again": r["again"],
                          "workers": r["workers_times"], "split": r["split_times"]})
        line += (f"{tw:>11.4f} {r['events'] / tw:>9.3g} {first / tw:>6.2f}x {best:>5.2f}x {r['pieces']:>6d} "
                 f"{r['passes']:>6d} | {first / ts:>5.2f}x {'yes' if r['identical'] else 'NO':>4s}")
        print(line)
        results.append(out)
    print(f"MPI start-up, not included above: a bare `mpiexec -n {W} python` with MPI_Init takes "
          f"{startup:.2f} s. 'again': a second replay of the same Program (its layout cached). "
          f"'speedup': one worker's first replay / {W} workers' (medians; 'best': of the fastest "
          f"repetitions). 'pieces': workers given ranks by default (a piece needs "
          f"{MIN_EVENTS_PER_WORKER:,} events or more: replay.workers.MIN_EVENTS_PER_WORKER; the others "
          f"wait). 'split': the speedup when every worker gets a piece anyway "
          f"(min_events_per_worker=0). 'same': worker 0's result (both ways) equals the "
          f"one-worker result to the last bit (finish, TE, every event's end). One worker and {W} "
          f"workers alternate, repetition by repetition, in one mpiexec job.")
    if sg_rows:
        print()
        print("SimGrid (SMPI smpirun -replay, whole process) against sigex (one worker, replay only) "
              "on the same trace: the physical trace with each phase once")
        h2 = (f"{'trace':8s} {'P':>6s} {'events':>8s} | {'sigex s':>8s} {'ev/s':>9s} | {'SMPI s':>8s} "
              f"{'ev/s':>9s} | {'ratio':>7s} {'w/ build':>8s} | predicted runtime sigex / SMPI")
        print(h2)
        print("-" * len(h2))
        for s in sg_rows:
            if s.get("smpi_s") is None:
                print(f"{s['app']:8s} {s['P']:>6d} {s['events']:>8,d} | {s['sigex_replay_s']:>8.4f} "
                      f"{'':>9s} | SMPI failed: {s['smpi_error']}")
                continue
            print(f"{s['app']:8s} {s['P']:>6d} {s['events']:>8,d} | {s['sigex_replay_s']:>8.4f} "
                  f"{s['sigex_events_per_s']:>9.3g} | {s['smpi_s']:>8.2f} {s['smpi_events_per_s']:>9.3g} | "
                  f"{s['ratio']:>6.0f}x {s['ratio_with_build']:>7.0f}x | {s['sigex_runtime']:.6g} s / "
                  f"{s['smpi_runtime']:.6g} s")
        print("(SMPI cannot replay the FFT at P = 4,096 in reasonable time: P - 1 pairwise Alltoall rounds "
              "of P messages; it is compared at the P given by --simgrid. 'w/ build': sigex's time "
              "including building the Program.)")

    # ---- goals -----------------------------------------------------------------------------
    def goal(target, values, by):
        """``values`` as {label: value}; met when every value reaches ``target``."""
        vals = {k: v for k, v in values.items() if v is not None}
        return {"goal": target, "by": by, "values": vals,
                "worst": min(vals.values()) if vals else None,
                "met": bool(vals) and all(v >= target for v in vals.values())}

    label = lambda r: f"{r['app']} P={r['P']}"  # noqa: E731
    goals = {
        "events_per_s_one_core": goal(GOAL_RATE, {label(r): r["one_worker_events_per_s"] for r in results},
                                      "events/s of one worker's first replay (median)"),
        "x_simgrid_rate": goal(GOAL_SIMGRID, {label(s): s.get("ratio") for s in sg_rows},
                               "SMPI time / sigex replay time on the same trace"),
        "x_second_worker": goal(GOAL_WORKERS, {label(r): r["speedup"] for r in results},
                                "one worker's time / two workers' (medians), by default (small "
                                "traces: worker 0 alone)"),
    }
    print()
    for name, g in goals.items():
        vals = ", ".join(f"{k} {v:.3g}" for k, v in g["values"].items()) or "n/a"
        print(f"goal {name} >= {g['goal']:g}: {'met' if g['met'] else 'NOT met'} ({vals})")
    print(json.dumps({"bench": "replay_speed", "machine": machine.name, "cores": os.cpu_count(),
                      "loadavg_before": load0[0], "loadavg_after": load1[0], "reps": args.reps,
                      "mpi_startup_s": startup, "rows": results, "simgrid": sg_rows, "goals": goals}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
