"""sigex's replay against SimGrid's (SMPI ``smpirun -replay``): predicted times and replay rates.

The machines are cluster-a and cluster-b with one rank per node
(``Machine.flat()``): the SimGrid platform is one single-core host per rank and
cannot give ranks of one node their intra-node link. Messages of S bytes and
more differ by design: sigex pays a rendezvous handshake, SMPI only makes the
send wait for its receive.

Two sets of traces, each replayed by sigex (``replay.replay``) and, exported to
SimGrid's time-independent format (``replay.simgrid.export_ti``), by SMPI on the
matching platform (``replay.simgrid.platform_xml``/``smpi_config``):

* the bundled signature traces at P = 16 (real runs), on cluster-a and cluster-b;
* physical traces of the stencil and the FFT written by the models
  (``examples/<app>.toml``) at P = 64 and 256, unrolled (the full replay;
  SMPI ran over 5 minutes on the FFT at P = 1024 before we stopped it).

Goals (replay issue): runtimes within 5% per example; sigex at least 10x
SimGrid's replay rate on the same trace. sigex's time includes building the
Program (matching); SMPI's is its whole process (start-up included, which
dominates small traces: read the large ones for the rate).

Usage: ``python bench/replay_vs_simgrid.py [--p 256 1024]`` (needs ``smpirun``:
``apt-get install libsimgrid-dev``). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compute_model import campaign  # noqa: E402
from replay import Program, load, replay  # noqa: E402
from replay.simgrid import export_ti, replay_smpi  # noqa: E402
from replay.unroll import unroll  # noqa: E402
from signature import load_trace  # noqa: E402


def compare(name, trace, machine, tmp):
    t0 = time.perf_counter()
    ours = replay(Program.from_trace(trace), machine).runtime
    t_ours = time.perf_counter() - t0
    idx = export_ti(trace, Path(tmp) / name.replace(" ", "_"), overwrite=True)
    t0 = time.perf_counter()
    theirs = replay_smpi(idx, machine, trace.nprocs)
    t_smpi = time.perf_counter() - t0
    return {"trace": name, "machine": machine.name, "P": trace.nprocs, "events": trace.n_events,
            "sigex_s": ours, "smpi_s": theirs, "diff": ours / theirs - 1,
            "sigex_events_per_s": trace.n_events / t_ours, "smpi_events_per_s": trace.n_events / t_smpi,
            "speed_ratio": t_smpi / t_ours}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, nargs="+", default=[64, 256])
    opts = ap.parse_args()
    if shutil.which("smpirun") is None:
        print("smpirun not found: apt-get install libsimgrid-dev", file=sys.stderr)
        sys.exit(2)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mname in ("cluster-a", "cluster-b"):
            m = load(mname).flat()  # one rank per node: what the SimGrid platform describes
            for app in ("stencil", "cg", "nbody", "fft2d", "sweep"):
                rows.append(compare(f"{app} P16 (run)", load_trace(ROOT / "traces" / app / "P16.h5"), m, tmp))
        m = load("cluster-a").flat()
        for app in ("stencil", "fft2d"):
            _, cm = campaign.models(campaign.load(ROOT / "examples" / f"{app}.toml"))
            for P in opts.p:
                path = cm.physical_trace(P, Path(tmp) / f"{app}-{P}.h5", overwrite=True)
                rows.append(compare(f"{app} P{P} (physical)", unroll(load_trace(path)), m, tmp))
    print(f"{'trace':26s} {'machine':10s} {'events':>9s} {'sigex (s)':>10s} {'SMPI (s)':>10s} {'diff':>7s} "
          f"{'sigex ev/s':>11s} {'SMPI ev/s':>10s} {'ratio':>6s}")
    for r in rows:
        print(f"{r['trace']:26s} {r['machine']:10s} {r['events']:9,d} {r['sigex_s']:10.4f} {r['smpi_s']:10.4f} "
              f"{100 * r['diff']:+6.2f}% {r['sigex_events_per_s']:11.3g} {r['smpi_events_per_s']:10.3g} "
              f"{r['speed_ratio']:6.1f}")
    worst = max(rows, key=lambda r: abs(r["diff"]))
    big = [r for r in rows if "physical" in r["trace"]]
    print(f"\nlargest gap {100 * worst['diff']:+.2f}% ({worst['trace']}, {worst['machine']}); "
          f"sigex/SMPI replay-rate ratio on the physical traces: "
          + ", ".join(f"{r['speed_ratio']:.1f}x" for r in big))
    print(json.dumps({"bench": "replay_vs_simgrid", "rows": rows,
                      "goal": "runtime within 5% of SMPI per example; >= 10x SMPI's replay rate"}))


if __name__ == "__main__":
    main()
