"""End-to-end validation against SimGrid's SMPI as the target machine.

SMPI runs real C MPI programs on a simulated cluster at any P. For each of the
C versions of the examples in ``bench/smpi/`` (stencil, cg, sweep, fft2d) and
the twins of real codes' shapes in ``bench/c/`` (halo1d: the plainest
non-periodic 1-D halo, MPI_PROC_NULL at both ends; lammps_like: a periodic 3-D
grid whose dims minimise the sub-domains' surface for a 2:1:1 box, declared with
MPI_Cart_create; cg_like: a power-of-two row/column split computed by rank
arithmetic, no declared grid; pme_split: every 4th rank a PME rank, particle and PME
ranks each with their own traffic; mg_idle: a 3-level multigrid whose coarse levels
leave every 2nd and every 4th rank idle; tree_reduce: a 1-D halo and a residual summed
on hand-written binomial trees, whose stages grow with P; cg_npb: cg_like with NPB CG's
reductions along the rows, recursive doubling in point-to-point calls over the columns;
kpoint_owner: items owned round-robin, each computed by its owner right before its Bcast,
whose root takes each rank in turn; fft2d_pairwise: fft2d with FFTW 3's transposes, a
Sendrecv with each other rank paired by the rounds of a round-robin tournament):

1. the program is built with ``smpicc`` and run under ``smpirun`` at the
   signature P (4, 8, 16) with ``-trace-ti``; each time-independent trace is
   imported (``replay.simgrid.import_ti``, work in flops, the Cartesian grid
   declared, event times from sigex's replay on the machine) and written as a
   sigex trace: these are the signature runs;
2. the same program runs at P = 256 and 1024 (16x and 64x the largest
   signature P): SMPI's simulated time is the ground truth. These runs are
   traced too, to give per-phase truth (weights, computation per process) and
   to replay the real large trace with sigex, which splits the error into the
   network model's part and the extrapolation's part (up to ``--trace-max``,
   default 256, pme_split 1024: SMPI's TI tracing of cg at P = 1024 ran over 15
   minutes where the untraced run takes two). Where that replay is off by more
   than 0.5% the table below says so: either the replay's network model or
   collective algorithms differ from SMPI's on that pattern, or SMPI spent time
   its trace does not show (SimGrid 3.32 writes no line for communicator calls,
   yet its MPI_Comm_split sends 2(P - 1) messages through rank 0, 0.84 ms at
   P = 1024: the twins call none under SMPI);
3. sigex predicts P = 256 and 1024 from the signature runs alone
   (``sigex.pipeline.load_models`` + ``predict``: logical model, compute model,
   physical trace, full and steady-state replay) on ``bench/smpi/cluster.toml``,
   the machine the SMPI platform describes exactly
   (``replay.simgrid.platform_xml``: one single-core host per rank, LogGP
   latency, bandwidth and overheads, the same eager threshold and collective
   algorithms).

Computation in SMPI is what the programs charge with ``smpi_execute_flops``
(exact flop counts of their kernels; ``smpi/simulate-computation:no``), so the
ground truth is deterministic: this validates the signature, the logical model,
the compute model in flops mode and the replay against an independent
simulator; it does not validate a real CPU's cache behaviour (see
``bench/validate.py`` for real runs on this machine).

Goal (prediction issue): predicted runtime within 10% of SMPI's at 64x the
largest signature P.

Usage: ``python bench/validate_smpi.py [--apps stencil cg] [--targets 256 1024]
[--fresh]``. Needs ``smpicc``/``smpirun`` (``apt-get install libsimgrid-dev``).
Runs are cached in ``bench/_smpi/`` (``--fresh`` redoes them); the first run
takes a few minutes. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from logical_model.topology import dims_create  # noqa: E402
from replay import Program, load, replay  # noqa: E402
from replay.simgrid import import_ti, run_program  # noqa: E402
from signature import extract, load_trace  # noqa: E402
from signature.errors import ExtrapolationError  # noqa: E402
from signature._text import table  # noqa: E402
from sigex.pipeline import load_models, predict  # noqa: E402

SRC = ROOT / "bench" / "smpi"
CACHE = ROOT / "bench" / "_smpi"
MACHINE = SRC / "cluster.toml"
SIGNATURE_P = (4, 8, 16)
#: sigex's replay of a run's own SMPI trace should give SMPI's time within this
REPLAY_TOLERANCE = 0.005

#: per app: workload n, the other arguments, whether the program builds a 2-D
#: Cartesian grid (MPI_Dims_create), and the P rule it accepts
APPS = {
    "stencil": {"n": 4096, "args": ["--iters", "100", "--check-every", "10"], "grid": 2, "p_rule": None},
    "cg": {"n": 4096, "args": ["--iters", "20"], "grid": None, "p_rule": None},  # SMPI slows per iteration at 1024
    "sweep": {"n": 2048, "args": ["--iters", "10", "--planes", "8", "--kblocks", "4"], "grid": 2,
              "p_rule": None},
    "fft2d": {"n": 4096, "args": ["--iters", "3"], "grid": None, "p_rule": "powers_of_two"},
    # the same with FFTW 3's transposes: a Sendrecv with each other rank, paired by the rounds
    # of a round-robin tournament, tagged sender * P + receiver (MIT Photonic Bands' shape)
    "fft2d_pairwise": {"n": 4096, "args": ["--iters", "3", "--pairwise", "1"], "grid": None,
                       "p_rule": "powers_of_two", "src": "smpi/fft2d.c"},
    "halo1d": {"n": 1 << 24, "args": ["--iters", "100", "--halo", "16", "--check-every", "10", "--nonblocking", "1"],
               "grid": None,
               "p_rule": None, "src": "c/halo1d.c"},
    # from P = 4, 8, 16 the y and z dimensions are never over 2 wide (the direction of their
    # exchanges is undecidable) and x's faces could follow dims_0 or not: the model refuses
    # 256 and 1024 (run with --signature 4 8 16 to see it). P = 8, 27, 32 decide all of it.
    "lammps_like": {"n": 48, "args": ["--bx", "2", "--by", "1", "--bz", "1", "--steps", "50", "--thermo", "10"],
                    "grid": 3, "periods": True, "p_rule": None, "src": "c/lammps_like.c", "user_grid": True,
                    "signature": (8, 27, 32), "targets": (512, 2048)},
    "cg_like": {"n": 8192, "args": ["--iters", "30"], "grid": None, "p_rule": "powers_of_two",
                "src": "c/cg_like.c"},
    # every 4th rank a PME rank, each class on its own communicator (Comm_split): GROMACS's shape
    # (--world 1: SMPI's traces record no communicator, so the classes talk on MPI_COMM_WORLD and
    # the program splits none: SMPI's untraced Comm_split alone took 25% of the time at P = 1024)
    "pme_split": {"n": 30720, "args": ["--grid", "64", "--halo", "200", "--steps", "20", "--energy", "5",
                                       "--world", "1"], "grid": None, "p_rule": None, "src": "c/pme_split.c",
                  "trace_max": 1024},
    # a multigrid V-cycle of 3 levels: every 2nd, every 4th rank idle at the coarse ones
    # (nonblocking: SMPI's traces do not keep a Sendrecv with MPI_PROC_NULL)
    "mg_idle": {"n": 1 << 22, "args": ["--halo", "8", "--cycles", "20", "--levels", "3", "--nonblocking", "1"],
                "grid": None,
                "p_rule": None, "src": "c/mg_idle.c"},
    # a 1-D halo and a residual summed on hand-written binomial trees (reduce, broadcast):
    # ceil(log2 P) stages, one more at every doubling of P
    "tree_reduce": {"n": 1 << 24, "args": ["--halo", "16", "--iters", "50", "--width", "8"], "grid": None,
                    "p_rule": None, "src": "c/tree_reduce.c"},
    # NPB CG's reductions along the rows: recursive doubling over the columns of its grid
    # (Irecv, Send, Wait per stage, tagged with the stage), log2 npcols stages
    "cg_npb": {"n": 8192, "args": ["--iters", "30"], "grid": None, "p_rule": "powers_of_two",
               "src": "c/cg_npb.c"},
    # items owned round-robin, each computed by its owner right before its Bcast (the root
    # takes each rank in turn): one rank busy at a time, a loop that does not scale
    "kpoint_owner": {"n": 512, "args": ["--work", "400000", "--eig", "64", "--iters", "3"], "grid": None,
                     "p_rule": None, "src": "c/kpoint_owner.c"},
}


def build(app: str) -> Path:
    exe = CACHE / "bin" / app
    src = ROOT / "bench" / APPS[app]["src"] if "src" in APPS[app] else SRC / f"{app}.c"
    if exe.exists() and exe.stat().st_mtime >= max(src.stat().st_mtime, (SRC / "common.h").stat().st_mtime):
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["smpicc", "-O2", "-o", str(exe), str(src), "-lm"], check=True,
                   capture_output=True, text=True)
    return exe


def program_grid(stdout: str) -> tuple[int, ...]:
    """The process grid a C example reports (``grid 4x4``)."""
    m = re.search(r"grid (\d+(?:x\d+)+)", stdout)
    if m is None:
        raise SystemExit(f"the program did not report its process grid: {stdout.strip()}")
    return tuple(int(x) for x in m.group(1).split("x"))


def run_grid(out: Path) -> tuple[int, ...] | None:
    """The process grid the program reported in the run cached at ``out`` (None: none)."""
    grid = json.loads(out.with_suffix(".json").read_text()).get("grid")
    return tuple(grid) if grid else None


def traced_run(app: str, P: int, out: Path, machine, say, *, trace: bool = True) -> tuple[Path | None, float]:
    """The SMPI run of ``app`` at P, as a sigex trace at ``out`` (cached) and SMPI's time;
    with ``trace=False`` only the time (path None)."""
    meta = out.with_suffix(".json")
    if meta.exists() and (out.exists() or not trace):
        return (out if out.exists() else None), json.loads(meta.read_text())["smpi_time"]
    cfg = APPS[app]
    args = ["--n", str(cfg["n"]), *cfg["args"]]
    say(f"{app}: smpirun -np {P} {' '.join(args)}" + ("" if trace else " (not traced)"))
    t0 = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"sigex-{app}-{P}-") as tmp:
        ti = Path(tmp) / "ti" if trace else None
        sim, stdout = run_program(build(app), args, machine, P, trace_ti=ti)
        if "OK" not in stdout:
            raise SystemExit(f"{app} at P={P}: the program's check failed: {stdout.strip()}")
        out.parent.mkdir(parents=True, exist_ok=True)
        if trace:
            grid = None
            if cfg["grid"]:  # the grid the program built and declared
                dims = program_grid(stdout)
                if dims != dims_create(P, cfg["grid"]):
                    say(f"{app}: the program's grid at P={P} is {dims}, not MPI_Dims_create's "
                        f"{dims_create(P, cfg['grid'])}: the model must find the program's dims rule")
                grid = (dims, (bool(cfg.get("periods")),) * len(dims))
            t = import_ti(ti / "ti.txt", grid=grid, clock=machine, app=app, workload=("n", str(cfg["n"])))
            t.meta["command"] = json.dumps(["smpirun", "-np", str(P), f"bench/smpi/{app}", *args])
            t.meta["smpi_time"] = sim
            t.to_hdf5(out, overwrite=True)
    reported = re.search(r"grid (\d+(?:x\d+)+)", stdout)
    meta.write_text(json.dumps({"smpi_time": sim, "wall": time.perf_counter() - t0,
                                "grid": [int(x) for x in reported.group(1).split("x")] if reported else None}))
    return (out if trace else None), sim


def per_phase(pred, truth_sig) -> list[dict]:
    """Predicted against true per-phase weight, computation per process and TE x W (the
    truth's times are those its import stamped: sigex's replay of the real large run)."""
    rows = []
    for k, ph in enumerate(pred.phases):
        if k >= len(truth_sig.phases):
            break
        tp = truth_sig.phases[k]
        comp_true = float(np.max(tp.stats["cpu_mean"]))
        rows.append({"phase": k, "kind": ph["kind"], "pattern": ph["pattern"], "weight": ph["weight"],
                     "weight_true": int(tp.weight), "comp": ph["computation"], "comp_true": comp_true,
                     "comp_error": ph["computation"] / comp_true - 1 if comp_true > 0 else None,
                     "time": ph["te"] * ph["weight"], "time_true": float(tp.te) * tp.weight})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", nargs="+", default=list(APPS), choices=list(APPS))
    ap.add_argument("--targets", nargs="+", type=int,
                    help="target P values (default 256 1024, or the app's own: lammps_like 512 2048)")
    ap.add_argument("--signature", nargs="+", type=int,
                    help="signature P values (default 4 8 16, or the app's own: lammps_like 8 27 32; "
                         "e.g. 2 4 8 --targets 32 128 for the compute model's 16x check)")
    ap.add_argument("--fresh", action="store_true", help="redo the cached SMPI runs")
    ap.add_argument("--trace-max", type=int,
                    help="trace the target runs up to this P (per-phase truth; default 256, or the app's "
                         "own: pme_split 1024); larger ones give SMPI's time only (SMPI's TI tracing of cg "
                         "at P=1024 ran over 15 minutes)")
    opts = ap.parse_args()
    if shutil.which("smpicc") is None or shutil.which("smpirun") is None:
        raise SystemExit("smpicc/smpirun not found: apt-get install libsimgrid-dev (SimGrid 3.32)")
    if opts.fresh and CACHE.exists():
        shutil.rmtree(CACHE)
    machine = load(MACHINE)

    def say(msg):
        print(f"  .. {msg}", file=sys.stderr, flush=True)

    results, phase_rows, sig_of = [], [], {}
    for app in opts.apps:
        sig_p = tuple(sorted(opts.signature or APPS[app].get("signature", SIGNATURE_P)))
        sig_of[app] = sig_p
        sig_dir = CACHE / app / ("signature" if sig_p == SIGNATURE_P else
                                 "signature-" + "-".join(map(str, sig_p)))
        measured = {}
        for P in sig_p:
            _, measured[P] = traced_run(app, P, sig_dir / f"P{P}.h5", machine, say)
        say(f"{app}: modelling P = {list(sig_p)}")
        models = load_models(sig_dir, p_rule=APPS[app]["p_rule"])
        # the traced P: does the pipeline reproduce SMPI's time where it has a run?
        Pmax = max(sig_p)
        at_traced = predict(models, Pmax, machine, full=True)
        results.append({"app": app, "P": Pmax, "x": 1, "smpi": measured[Pmax], "replay_real": None,
                        "predicted": at_traced.runtime, "steady": at_traced.steady, "pet": at_traced.pet,
                        "error": at_traced.runtime / measured[Pmax] - 1, "replay_error": None})
        for P in opts.targets or APPS[app].get("targets", (256, 1024)):
            tpath, truth = traced_run(app, P, CACHE / app / "truth" / f"P{P}.h5", machine, say,
                                      trace=P <= (opts.trace_max if opts.trace_max is not None
                                                  else APPS[app].get("trace_max", 256)))
            say(f"{app}: predicting P = {P}")
            at_p, given = models, None
            if models.logical.grid_problem(P) and APPS[app].get("user_grid"):
                # the fit P leave the grid open at P: the user gives it (--grid), here the one
                # the program itself reported at P
                given = run_grid(CACHE / app / "truth" / f"P{P}.h5")
                say(f"{app}: the traced P cannot decide the grid at P={P}; given {given} (--grid)")
                logical = models.logical.with_grid(P, given)
                at_p = dataclasses.replace(models, logical=logical,
                                           compute=dataclasses.replace(models.compute, logical=logical))
            t0 = time.perf_counter()
            try:
                pred = predict(at_p, P, machine, full=True)
            except ExtrapolationError as err:  # the model refuses P: say why, count it as a miss
                say(f"{app}: P = {P} refused")
                results.append({"app": app, "P": P, "x": P // Pmax, "smpi": truth, "replay_real": None,
                                "predicted": None, "steady": None, "pet": None, "error": None,
                                "replay_error": None, "refused": str(err), "warnings": []})
                continue
            t_pred = time.perf_counter() - t0
            real = None
            if tpath is not None:
                tt = load_trace(tpath)
                real = replay(Program.from_trace(tt), machine).runtime
                for row in per_phase(pred, extract(tt)):
                    phase_rows.append({"app": app, "P": P, **row})
            results.append({"app": app, "P": P, "x": P // Pmax, "smpi": truth, "replay_real": real,
                            "predicted": pred.runtime, "steady": pred.steady, "pet": pred.pet,
                            "error": pred.runtime / truth - 1,
                            "replay_error": None if real is None else real / truth - 1,
                            "predict_s": t_pred, "warnings": pred.warnings,
                            "grid_given": "x".join(map(str, given)) if given else None})

    print("Runtime: SMPI's simulated time of the real C program (truth), sigex's replay of that run's "
          "own trace, and sigex's prediction from the signature runs (full replay; P = "
          + "; ".join(f"{a}: {', '.join(map(str, p))}" for a, p in sig_of.items()) + ").")
    print(table(("app", "P", "x sig", "SMPI (s)", "replay of real trace", "err", "predicted (s)", "err",
                 "steady (s)", "PET (s)"),
                [(r["app"], r["P"], f"{r['x']}x" if r["x"] > 1 else "traced", f"{r['smpi']:.5f}",
                  "-" if r["replay_real"] is None else f"{r['replay_real']:.5f}",
                  "-" if r["replay_error"] is None else f"{100 * r['replay_error']:+.2f}%",
                  *((f"{r['predicted']:.5f}", f"{100 * r['error']:+.2f}%", f"{r['steady']:.5f}",
                     f"{r['pet']:.5f}") if r["predicted"] is not None else ("refused", "-", "-", "-")))
                 for r in results], align="rrrrrrrrrr"))
    for r in results:
        if r.get("refused"):
            print(f"  {r['app']} P={r['P']} refused: {r['refused'][:600]}")
    for r in results:
        if r.get("grid_given"):
            print(f"  {r['app']} P={r['P']}: the signature P cannot decide the process grid there; "
                  f"predicted with --grid {r['grid_given']} (the grid the program reports at that P)")
    print()
    print("Per phase at the traced targets: weight, computation per process and repetition (max over "
          "ranks), and PET's term TE x W (truth: the real large trace, timed by sigex's replay). A "
          "pipelined phase (the sweep) overlaps its repetitions: TE x W of a one-repetition replay pays "
          "the pipeline's fill every time, so only its runtime above is comparable.")
    print(table(("app", "P", "ph", "pattern", "W pred", "W true", "comp pred (us)", "comp true (us)", "err",
                 "TExW pred (ms)", "TExW true (ms)", "err"),
                [(r["app"], r["P"], r["phase"], r["pattern"][:30], r["weight"], r["weight_true"],
                  f"{1e6 * r['comp']:.2f}", f"{1e6 * r['comp_true']:.2f}",
                  "-" if r["comp_error"] is None else f"{100 * r['comp_error']:+.2f}%",
                  f"{1e3 * r['time']:.4f}", f"{1e3 * r['time_true']:.4f}",
                  f"{100 * (r['time'] / r['time_true'] - 1):+.2f}%" if r["time_true"] > 0 else "-")
                 for r in phase_rows], align="rrrlrrrrrrrr"))
    far = [r for r in results if r["x"] >= 64]
    ok = [r for r in far if r["error"] is not None and abs(r["error"]) <= 0.10]
    print()
    print(f"within 10% at 64x the largest signature P: {len(ok)}/{len(far)} "
          + ", ".join(f"{r['app']} " + (f"{100 * r['error']:+.1f}%" if r["error"] is not None else "refused")
                      for r in far))
    # sigex's replay of SMPI's own trace of a run: off by more than 0.5%, the replay's network or
    # collective model differs from SMPI's on that run, or SMPI spent time its trace hides
    off = [r for r in results if r["replay_error"] is not None and abs(r["replay_error"]) > REPLAY_TOLERANCE]
    replayed = [r for r in results if r["replay_error"] is not None]
    print(f"sigex's replay of SMPI's own trace within {100 * REPLAY_TOLERANCE:.1f}% of SMPI: "
          f"{len(replayed) - len(off)}/{len(replayed)} traced targets"
          + "".join(f"; {r['app']} P={r['P']} {100 * r['replay_error']:+.2f}% (the network model, or work "
                    "the trace does not show)" for r in off))
    for r in results:
        for w in r.get("warnings", []):
            print(f"  warning ({r['app']} P={r['P']}): {w}")
    print(json.dumps({"bench": "validate_smpi", "machine": machine.name, "signature_P": {a: list(p) for a, p in sig_of.items()},
                      "runtime": [{k: v for k, v in r.items() if k != "warnings"} for r in results],
                      "phases": phase_rows, "within_10pct_at_64x": f"{len(ok)}/{len(far)}",
                      "replay_within_tolerance": f"{len(replayed) - len(off)}/{len(replayed)}",
                      "replay_tolerance": REPLAY_TOLERANCE,
                      "goal": "predicted runtime within 10% of SMPI's at 64x the largest signature P"}))


if __name__ == "__main__":
    main()
