"""Computation-time accuracy: CRMs from the signature runs against real runs at larger P.

For every example campaign (``examples/<app>.toml``): the CRM of each phase is
fitted on the bundled signature runs (P = 4, 8, 16) without and with the
distant point (small-workload runs at P = 4, 8, 16, declared work from the
campaign), and its prediction of the computation per process and repetition
(thread CPU time) is compared with the measured one in the held-out real runs
``traces/<app>/heldout/P64.h5`` and, where present, ``P128.h5``.

Goal (compute-model issue): every phase within 10% at 16x the largest
signature P, and the distant point never making a phase worse. The held-out
runs here are 4x and 8x the largest signature P (a 16x run, P = 256, does not
start on this 2-core machine in reasonable time), and they are 32-64x
oversubscribed: read the errors with the run-to-run spread in mind (three
repeat runs of stencil P = 16 gave phase totals 8.2, 9.8 and 11.1 s).

Usage: ``python bench/compute_accuracy.py``. The last line is one JSON object.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import signature  # noqa: E402
from compute_model import campaign  # noqa: E402
from signature import load_trace  # noqa: E402

APPS = ("stencil", "cg", "nbody", "fft2d", "sweep")


def main() -> None:
    rows = []
    for app in APPS:
        c = campaign.load(ROOT / "examples" / f"{app}.toml")
        _, cm = campaign.models(c)
        for P in (64, 128):
            f = ROOT / "traces" / app / "heldout" / f"P{P}.h5"
            if not f.exists():
                continue
            real = signature.extract(load_trace(f))
            for k, ph in enumerate(real.phases):
                crm = cm.crms[k]
                meas = float(np.mean(ph.stats["cpu_mean"]))
                base = float(np.asarray(crm.base.predict(P)).reshape(-1)[0])
                wd = (float(np.asarray(crm.with_distant.predict(P)).reshape(-1)[0])
                      if crm.with_distant is not None else None)
                rows.append({"app": app, "P": P, "phase": k, "kind": ph.kind, "pattern": ph.pattern,
                             "measured": meas, "predicted": base, "predicted_distant": wd,
                             "error": base / meas - 1, "error_distant": (wd / meas - 1) if wd else None,
                             "distant": crm.distant.describe() if crm.distant else crm.skipped})
    print(f"{'app':8s} {'P':>4s} {'ph':>2s} {'kind':8s} {'measured (s)':>12s} {'CRM':>10s} {'err':>7s} "
          f"{'CRM+distant':>11s} {'err':>7s}  distant point")
    for r in rows:
        wd = f"{r['predicted_distant']:11.4g} {100 * r['error_distant']:+6.1f}%" if r["predicted_distant"] else \
            f"{'-':>11s} {'':>7s}"
        print(f"{r['app']:8s} {r['P']:4d} {r['phase']:2d} {r['kind']:8s} {r['measured']:12.4g} "
              f"{r['predicted']:10.4g} {100 * r['error']:+6.1f}% {wd}  {(r['distant'] or '')[:60]}")
    loops = [r for r in rows if r["kind"] == "loop"]
    best = [min(abs(r["error"]), abs(r["error_distant"]) if r["error_distant"] is not None else 9e9)
            for r in loops]
    within = sum(abs(r["error"]) <= 0.10 for r in loops)
    worse = sum(1 for r in loops if r["error_distant"] is not None and abs(r["error_distant"]) > abs(r["error"]))
    print(f"\nloop phases within 10% without the distant point: {within}/{len(loops)}; the distant point "
          f"made {worse} of {sum(r['error_distant'] is not None for r in loops)} worse; median |error| "
          f"{100 * float(np.median([abs(r['error']) for r in loops])):.1f}% (best of both "
          f"{100 * float(np.median(best)):.1f}%)")
    print(json.dumps({"bench": "compute_accuracy", "rows": rows, "loop_within_10pct": within,
                      "loop_phases": len(loops), "distant_made_worse": worse,
                      "goal": "every phase within 10% at 16x the largest signature P; the distant point "
                              "never worse"}))


if __name__ == "__main__":
    main()
