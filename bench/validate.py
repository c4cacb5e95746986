"""Validation on this machine: predictions from signature runs at P <= 16 against real runs at P = 32 and 64.

For every example application (stencil, cg, nbody, fft2d, sweep) the models are
built as ``sigex predict examples/<app>.toml`` builds them: from the bundled
mpi4py signature runs ``traces/<app>/P{4,8,16}.h5`` and the small-workload runs
``traces/<app>/small/P{4,8,16}.h5`` (distant point, declared work from the
campaign). They are compared with real traced runs of the same programs at
``traces/<app>/heldout/P{32,64}.h5``, which are never used to fit:

(a) communication structure: per app, P and phase, the number of ranks whose
    communication events (op, peer, receive peer, bytes, tag) differ from the
    logical trace at that P, and the weight (repetitions) predicted vs measured;
(b) computation: per phase, the computation per process and repetition
    predicted by the CRM without and with the distant point vs the measured
    thread CPU time (mean over ranks), and the per-rank work of the logical
    model (Eq. 1-3) vs the measured one per rank (median and max error), as
    ``bench/logical_heldout.py`` does at P = 64;
(c) runtime: sigex's predicted runtime (``sigex.pipeline.predict``, machine
    ``machines/this-machine.toml``) at the traced P = 4 against the measured
    runtime of ``traces/<app>/P4.h5``.

Caveats. The machine has 2 cores and no hardware PMU, so traces are in
CPU-time mode: a burst's work is its thread CPU time, which stays meaningful
under oversubscription; wall time does not. P = 4 is already 2x
oversubscribed, so the runtime comparison (c) sets a prediction for 4
dedicated cores against a run that shared 2 cores (the measured wall time is
expected to exceed the prediction by up to about 2x in a compute-bound run); it
is shown for what it is. At P = 32 and 64 (16x and 32x oversubscribed) the
measured wall time is not a runtime of a 32- or 64-rank machine at all, so no
runtime is compared there; the table prints the measured wall time over the
largest per-rank CPU time to show the inflation. Thread CPU time is far less
affected, but not immune: the last table prints the measured total CPU time of
the loop phases (per rank per repetition x ranks x weight), which strong
scaling at constant work keeps constant, at every traced P; where it grows at
P = 64 the truth itself carries that inflation. Thread CPU time also varies
from run to run (three repeat runs of stencil P = 16 gave phase totals 8.2,
9.8 and 11.1 s), which bounds how close any model can come. Loop phases carry
the goal; the initial and final phases (weight 1) are listed but not counted.

Usage: ``python bench/validate.py`` (about 10 s: it reads the bundled traces and
runs five predictions; it traces nothing). Readable tables go to stdout; the last line is one
JSON object with every figure and the goals.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import signature  # noqa: E402
from compute_accuracy import BUNDLED_FIT, compare, fit, print_table, summary  # noqa: E402
from signature import load_trace  # noqa: E402
from sigex import pipeline  # noqa: E402

APPS = ("stencil", "cg", "nbody", "fft2d", "sweep")
TRUTH_P = (32, 64)
RUNTIME_P = 4
MACHINE = ROOT / "machines" / "this-machine.toml"
COMM_COLUMNS = ("op", "peer", "recv_peer", "bytes", "tag")
GOALS = {"comm_events": "identical", "weights": "identical", "compute": "within 10%",
         "work_per_rank": "within 10% (median over ranks)",
         "runtime": "not measurable here: P = 4 shown 2x oversubscribed; P = 32, 64 not compared"}
GOAL_NOTES = {"comm_events": "0 ranks differ in every phase, for every (app, P)",
              "compute": "per loop phase, CRM prediction vs measured thread CPU time, mean over ranks",
              "work_per_rank": "per loop phase, Eq. 1-3 vs measured per rank",
              "loop_phases_only": "initial and final phases (weight 1) are listed but not counted"}


def comm_rows(app: str, logical, real: signature.Signature) -> list[dict]:
    """Per phase of the real run: ranks whose events differ from the logical trace at its P,
    the weights, and the per-rank work of Eq. 1-3 against the measured one."""
    P = real.nprocs
    ev = logical.events(P)
    rows = []
    for k, ph in enumerate(real.phases):
        T, off = ph.template, ph.template_offsets
        sel = ev["phase"] == k
        cols = {c: np.asarray(ev[c][sel], np.int64) for c in COMM_COLUMNS}
        g_off = np.searchsorted(ev["rank"][sel], np.arange(P + 1))
        bad = 0
        for r in range(P):
            a, b = off[r], off[r + 1]
            ga, gb = g_off[r], g_off[r + 1]
            bad += not ((b - a) == (gb - ga) and all(
                np.array_equal(np.asarray(T[c][a:b], np.int64), cols[c][ga:gb]) for c in COMM_COLUMNS))
        pm = logical.phases[k]
        pred = np.asarray(pm.work_per_rank(P), float)
        meas = np.asarray(ph.stats["cpu_mean"], float)
        err = pred / meas - 1
        rows.append({"app": app, "P": P, "phase": k, "kind": ph.kind, "pattern": ph.pattern,
                     "ranks_events_differ": int(bad), "weight_model": int(pm.weight_at(P)),
                     "weight_real": int(ph.weight), "work_pred_mean": float(pred.mean()),
                     "work_real_mean": float(meas.mean()), "work_err_median": float(np.median(err)),
                     "work_err_max": float(np.abs(err).max()),
                     "fit_spread": float(max(g.spread for g in pm.groups))})
    return rows


def wall_over_cpu(trace) -> float:
    """Measured wall time over the largest per-rank thread CPU time: ~1 on dedicated cores."""
    return float(trace.runtime / trace.per_rank_totals()["t_cpu"].max())


def _loop_totals(app: str, sig: signature.Signature, out: dict) -> None:
    for ph in sig.phases:
        if ph.kind == "loop":
            out[(app, ph.id, sig.nprocs)] = float(np.mean(ph.stats["cpu_mean"])) * sig.nprocs * ph.weight


def main() -> None:
    t_start = time.perf_counter()
    comm, compute, runtime, inflation, seconds, totals = [], [], [], [], {}, {}
    for app in APPS:
        t0 = time.perf_counter()
        c, cm = fit(app, make=False)  # bundled P = 4, 8, 16 and small runs: as `sigex predict` builds them
        for P in TRUTH_P:
            trace = load_trace(ROOT / "traces" / app / "heldout" / f"P{P}.h5")
            real = signature.extract(trace)
            _loop_totals(app, real, totals)
            comm += comm_rows(app, cm.logical, real)
            compute += compare(app, cm, P, real)
            inflation.append({"app": app, "P": P, "wall": trace.runtime, "wall_over_cpu": wall_over_cpu(trace)})
        for s in cm.signatures:
            _loop_totals(app, s, totals)
        models = pipeline.Models(logical=cm.logical, compute=cm, source=str(c.path),
                                 measured={s.nprocs: s.runtime for s in cm.signatures})
        pred = pipeline.predict(models, RUNTIME_P, MACHINE)
        t4 = load_trace(ROOT / "traces" / app / f"P{RUNTIME_P}.h5")
        cpu = t4.per_rank_totals()["t_cpu"]
        runtime.append({"app": app, "P": RUNTIME_P, "predicted": pred.runtime, "pet": pred.pet,
                        "measured": t4.runtime, "ratio": pred.runtime / t4.runtime,
                        "measured_cpu_max_rank": float(cpu.max()), "wall_over_cpu": wall_over_cpu(t4),
                        "warnings": pred.warnings})
        seconds[app] = time.perf_counter() - t0

    # (a) communication structure
    print("(a) communication structure: logical trace from P = 4, 8, 16 vs the real run "
          "(ranks whose (op, peer, recv peer, bytes, tag) differ; weights model/real)")
    print(f"{'app':8s} {'P':>3s} {'ph':>2s} {'kind':8s} {'pattern':34s} {'ranks≠':>6s} {'weight m/r':>11s}")
    for r in comm:
        print(f"{r['app']:8s} {r['P']:3d} {r['phase']:2d} {r['kind']:8s} {r['pattern'][:34]:34s} "
              f"{r['ranks_events_differ']:6d} {r['weight_model']:>5d}/{r['weight_real']:<5d}")
    pairs = sorted({(r["app"], r["P"]) for r in comm}, key=lambda x: (APPS.index(x[0]), x[1]))
    comm_ok = [p for p in pairs if all(r["ranks_events_differ"] == 0 for r in comm if (r["app"], r["P"]) == p)]
    w_ok = [p for p in pairs if all(r["weight_model"] == r["weight_real"] for r in comm
                                    if (r["app"], r["P"]) == p)]
    comm_line = f"comm events identical: {len(comm_ok)}/{len(pairs)} (app,P)"
    w_line = f"weights identical: {len(w_ok)}/{len(pairs)} (app,P)"
    print(f"\n{comm_line}; {w_line}\n")

    # (b) computation
    print("(b) computation per process and repetition (thread CPU s, mean over ranks): CRM from P = 4, 8, 16 "
          "without / with the distant point vs measured")
    print_table(compute, BUNDLED_FIT)
    s = summary(compute)
    loops = [r for r in compute if r["kind"] == "loop"]
    n_crm, worse = s["loop_within_10pct"], s["distant_made_worse"]
    with_d = [r for r in loops if r["error_distant"] is not None]
    n_dist = sum(abs(r["error_distant"]) <= 0.10 for r in with_d)
    crm_line = f"compute within 10% (CRM): {n_crm}/{len(loops)} loop phases"
    dist_line = (f"compute within 10% (CRM + distant point): {n_dist}/{len(with_d)} loop phases that have one; "
                 f"the distant point made {worse}/{len(with_d)} worse")
    print(f"\n{crm_line}; {dist_line}\n")

    print("(b) per-rank work of the logical model (Eq. 1-3) vs measured per rank (thread CPU s per repetition)")
    print(f"{'app':8s} {'P':>3s} {'ph':>2s} {'kind':8s} {'pred mean':>10s} {'real mean':>10s} {'median err':>10s} "
          f"{'max |err|':>9s} {'P4-16 spread':>12s}")
    for r in comm:
        print(f"{r['app']:8s} {r['P']:3d} {r['phase']:2d} {r['kind']:8s} {r['work_pred_mean']:10.4g} "
              f"{r['work_real_mean']:10.4g} {100 * r['work_err_median']:+9.1f}% {100 * r['work_err_max']:8.1f}% "
              f"{100 * r['fit_spread']:11.1f}%")
    wloops = [r for r in comm if r["kind"] == "loop"]
    n_work = sum(abs(r["work_err_median"]) <= 0.10 for r in wloops)
    work_line = f"work per rank (Eq. 1-3) median within 10%: {n_work}/{len(wloops)} loop phases"
    print(f"\n{work_line}\n")

    # (c) runtime
    print(f"(c) runtime at the traced P = {RUNTIME_P}: sigex prediction on {MACHINE.relative_to(ROOT)} vs the "
          f"measured run traces/<app>/P{RUNTIME_P}.h5 -- MEASURED 2x OVERSUBSCRIBED (4 ranks on 2 cores)")
    print(f"{'app':8s} {'predicted (s)':>13s} {'PET (s)':>9s} {'measured wall (s)':>17s} {'pred/meas':>9s} "
          f"{'max rank CPU (s)':>16s} {'wall/CPU':>8s} {'pred/CPU':>8s}")
    for r in runtime:
        print(f"{r['app']:8s} {r['predicted']:13.3f} {r['pet']:9.3f} {r['measured']:17.3f} {r['ratio']:9.2f} "
              f"{r['measured_cpu_max_rank']:16.3f} {r['wall_over_cpu']:8.2f} {r['predicted'] / r['measured_cpu_max_rank']:8.2f}")
    rt_line = ("runtime at P = 4: predicted/measured wall " + ", ".join(f"{r['app']} {r['ratio']:.2f}" for r in runtime)
               + "; the prediction is for 4 dedicated cores, the measured runs shared 2 (their wall time is "
               + "/".join(f"{r['wall_over_cpu']:.2f}" for r in runtime) + "x their largest per-rank CPU time), "
               "so the wall-time ratio is not an accuracy figure; pred/CPU compares with the busiest rank's "
               "measured CPU time, which leaves out its time in MPI")
    print(f"\n{rt_line}")
    infl = "; ".join(f"{r['app']} P={r['P']}: {r['wall_over_cpu']:.1f}x" for r in inflation)
    why = ("runtimes at P = 32 and 64 are not compared: those runs put 16x and 32x more ranks than cores on "
           "this 2-core machine, so their wall time measures the time-sharing, not a 32- or 64-rank run "
           f"(measured wall time / largest per-rank CPU time: {infl}); (a) and (b) use thread CPU time "
           "per burst instead (see the totals below for how far it stays constant)")
    print(why)
    print("\nmeasured total thread CPU time of each loop phase (s; per rank per repetition x ranks x weight; "
          "constant under ideal strong scaling). P = 4-16: signature runs (fitted); 32, 64: held-out")
    print(f"{'app':8s} {'ph':>2s} " + " ".join(f"{'P=' + str(P):>8s}" for P in (4, 8, 16, *TRUTH_P)))
    for app in APPS:
        for k in sorted({k for (a, k, _) in totals if a == app}):
            print(f"{app:8s} {k:2d} " + " ".join(f"{totals.get((app, k, P), float('nan')):8.3f}"
                                                  for P in (4, 8, 16, *TRUTH_P)))
    total = time.perf_counter() - t_start
    print(f"\nsummary: {comm_line}; {w_line}; {crm_line}; {dist_line}; {work_line}; runtime: see (c) "
          f"({total:.0f} s)")
    print(json.dumps({
        "bench": "validate", "fit_p": list(BUNDLED_FIT), "truth_p": list(TRUTH_P), "machine": str(MACHINE.relative_to(ROOT)),
        "work_mode": "cpu-time",
        "comm_events_identical": len(comm_ok), "weights_identical": len(w_ok), "app_p_pairs": len(pairs),
        "compute_within_10pct": n_crm, "compute_within_10pct_distant": n_dist, "loop_phases": len(loops),
        "loop_phases_with_distant": len(with_d), "distant_made_worse": worse,
        "work_per_rank_within_10pct": n_work, "work_loop_phases": len(wloops),
        "comm": comm, "compute": compute, "runtime": runtime, "oversubscription": inflation,
        "runtime_not_compared_at": list(TRUTH_P), "runtime_not_compared_because": why,
        "loop_cpu_totals": [{"app": a, "phase": k, "P": P, "total_cpu": v} for (a, k, P), v in sorted(totals.items())],
        "seconds_per_app": seconds, "seconds": total, "goals": GOALS, "goal_notes": GOAL_NOTES}))


if __name__ == "__main__":
    main()
