"""sigex's model search side by side with Extra-P's on the same data.

Two kinds of sets, fitted by both tools (Extra-P: its Python API, the Basic
single-parameter modeler with negative exponents allowed, as for strong
scaling; sigex: ``logical_model.modelsearch.fit``):

* **synthetic**: PMNF functions c0 + c1 * P^i * log2(P)^j (and two-term ones)
  with i, j drawn from the PMNF lattice, both signs, and 1%, 3% or 5%
  multiplicative noise on P = 4, 8, 16, 32, 64; the error is measured against
  the noise-free function at 4x (P=256) and 16x (P=1024) the largest fitted P.
* **bundled**: per-phase quantities of the bundled traces (work per rank and
  repetition, bytes per message slot) fitted on P = 4, 8, 16 and compared
  with the held-out real run at P = 64 (4x). Only three points: Extra-P
  warns that it wants five, and both tools fit what they can.

Goal (logical-model issue): at least as accurate as Extra-P on every set,
better on average. The table gives the median and mean absolute error per set
and how often each tool is closer. The last line is one JSON object.

Usage: ``python bench/model_search_vs_extrap.py [--trials 40] [--seed 1]``
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from logical_model import modelsearch  # noqa: E402

P_FIT = np.array([4, 8, 16, 32, 64])
P_EVAL = (256, 1024)


def extrap_fit(P, y):
    """Extra-P's model of y(P): a callable, or None when Extra-P is not installed."""
    from extrap.entities.callpath import Callpath
    from extrap.entities.coordinate import Coordinate
    from extrap.entities.experiment import Experiment
    from extrap.entities.measurement import Measurement
    from extrap.entities.metric import Metric
    from extrap.entities.parameter import Parameter
    from extrap.modelers.model_generator import ModelGenerator
    from extrap.modelers.single_parameter.basic import SingleParameterModeler

    exp = Experiment()
    exp.add_parameter(Parameter("p"))
    cp, met = Callpath("q"), Metric("v")
    exp.add_callpath(cp)
    exp.add_metric(met)
    for p, v in zip(P, y):
        c = Coordinate(float(p))
        exp.add_coordinate(c)
        exp.add_measurement(Measurement(c, cp, met, [float(v)]))
    exp.call_tree = None
    mod = SingleParameterModeler()
    mod.allow_negative_exponents = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mg = ModelGenerator(exp, modeler=mod)
        mg.model_all()
    fn = next(iter(mg.models.values())).hypothesis.function
    return lambda q: float(fn.evaluate(np.array([float(q)]))[0]) if np.ndim(fn.evaluate(float(q))) else \
        float(fn.evaluate(float(q)))


def synthetic_sets(trials: int, rng) -> dict[str, list[tuple]]:
    lattice = [(i, j) for i in modelsearch.EXPONENTS_I for j in modelsearch.EXPONENTS_J if (i, j) != (0, 0)]
    sets: dict[str, list] = {}
    for noise in (0.01, 0.03, 0.05):
        for kind in ("growing", "shrinking", "two terms"):
            name = f"synthetic {kind}, {int(noise * 100)}% noise"
            items = []
            for _ in range(trials):
                i, j = lattice[rng.integers(len(lattice))]
                sign = -1 if kind == "shrinking" else 1
                if kind == "shrinking" and i == 0:
                    i = modelsearch.EXPONENTS_I[rng.integers(1, len(modelsearch.EXPONENTS_I))]
                c1 = 10 ** rng.uniform(0, 4)
                c0 = c1 * rng.uniform(0, 2) * (64.0 ** (float(i) * sign))
                terms = [(c1, sign * float(i), j)]
                if kind == "two terms":
                    i2, j2 = lattice[rng.integers(len(lattice))]
                    terms = [(c1 * 100, -float(i) if i else -1.0, j), (c1, float(i2), j2)]
                f = (lambda t, c0: (lambda P: c0 + sum(c * np.asarray(P, float) ** e * np.log2(P) ** jj
                                                        for c, e, jj in t)))(terms, c0)
                y = f(P_FIT) * (1 + noise * rng.standard_normal(len(P_FIT)))
                if np.any(y <= 0):
                    continue
                items.append((P_FIT, y, {q: float(f(q)) for q in P_EVAL}))
            sets[name] = items
    return sets


def bundled_sets() -> dict[str, list[tuple]]:
    import signature
    from signature import load_trace

    work, volume = [], []
    for app in ("stencil", "cg", "nbody", "fft2d", "sweep"):
        sig = {p: signature.extract(load_trace(ROOT / "traces" / app / f"P{p}.h5")) for p in (4, 8, 16)}
        real = signature.extract(load_trace(ROOT / "traces" / app / "heldout" / "P64.h5"))
        for k, ph in enumerate(real.phases):
            if ph.weight < 2:
                continue  # one-off phases (start-up) are noise, not scaling
            y = [float(np.mean(sig[p].phases[k].stats["cpu_mean"])) for p in (4, 8, 16)]
            work.append((np.array([4, 8, 16]), np.array(y), {64: float(np.mean(ph.stats["cpu_mean"]))},
                         f"{app} phase {k}"))
            b = [float(np.mean(sig[p].phases[k].template["bytes"])) for p in (4, 8, 16)]
            if min(b) > 0:
                volume.append((np.array([4, 8, 16]), np.array(b), {64: float(np.mean(ph.template["bytes"]))},
                               f"{app} phase {k}"))
    return {"bundled: work per rank (CPU s), P=4-16 -> 64": work,
            "bundled: mean bytes per event, P=4-16 -> 64": volume}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40, help="functions per synthetic set")
    ap.add_argument("--seed", type=int, default=1)
    opts = ap.parse_args()
    logging.disable(logging.WARNING)
    try:
        import extrap  # noqa: F401
    except ImportError:
        print("Extra-P is not installed: pip install extrap", file=sys.stderr)
        sys.exit(2)
    rng = np.random.default_rng(opts.seed)
    sets = {**synthetic_sets(opts.trials, rng), **bundled_sets()}
    rows, out = [], []
    for name, items in sets.items():
        es, ee = [], []
        for item in items:
            P, y, truth = item[0], item[1], item[2]
            ms = modelsearch.fit(P, y)
            ex = extrap_fit(P, y)
            for q, t in truth.items():
                es.append(abs(float(ms.predict(q)) / t - 1))
                ee.append(abs(ex(q) / t - 1))
        es, ee = np.array(es), np.array(ee)
        wins = int(np.sum(es < ee - 1e-12)), int(np.sum(ee < es - 1e-12))
        rec = {"set": name, "n": len(es), "sigex_median": float(np.median(es)), "extrap_median": float(np.median(ee)),
               "sigex_mean": float(np.mean(es)), "extrap_mean": float(np.mean(ee)),
               "sigex_closer": wins[0], "extrap_closer": wins[1],
               "ok": bool(np.median(es) <= np.median(ee) + 1e-9)}
        out.append(rec)
        rows.append(rec)
    w = max(len(r["set"]) for r in rows)
    print(f"{'set':{w}s}  {'n':>4s}  {'median |err| sigex':>18s}  {'Extra-P':>8s}  {'mean |err| sigex':>16s}  "
          f"{'Extra-P':>8s}  {'closer: sigex/Extra-P':>21s}")
    for r in rows:
        print(f"{r['set']:{w}s}  {r['n']:4d}  {100 * r['sigex_median']:17.1f}%  {100 * r['extrap_median']:7.1f}%  "
              f"{100 * r['sigex_mean']:15.1f}%  {100 * r['extrap_mean']:7.1f}%  "
              f"{r['sigex_closer']:>10d}/{r['extrap_closer']:<10d}")
    avg_s = float(np.mean([r["sigex_median"] for r in rows]))
    avg_e = float(np.mean([r["extrap_median"] for r in rows]))
    print(f"\naverage of the per-set medians: sigex {100 * avg_s:.1f}%, Extra-P {100 * avg_e:.1f}%; "
          f"sets where sigex's median error is not larger: {sum(r['ok'] for r in rows)}/{len(rows)}")
    print(json.dumps({"bench": "model_search_vs_extrap", "sets": out, "sigex_avg_median": avg_s,
                      "extrap_avg_median": avg_e,
                      "goal": "median error <= Extra-P's on every set, and lower on average"}))


if __name__ == "__main__":
    main()
