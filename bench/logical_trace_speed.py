"""Logical-trace generation speed: the stencil's logical trace at P = 65,536 and 1,048,576.

The model is built from the bundled stencil traces (P = 4, 8, 16) and written
with ``LogicalModel.logical_trace`` (vectorised per block of ranks, streamed to
HDF5; weights are stored, not unrolled). Each size runs in a fresh process so
its peak resident memory is its own. Goals (logical-model issue): under 30 s
and under 4 GB for the million-rank trace.

Usage: ``python bench/logical_trace_speed.py [--p 65536 1048576] [--keep DIR]``
The last line printed is one JSON object with the figures and the goals.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from logical_model import from_traces
model = from_traces({traces!r})
t0 = time.perf_counter()
model.logical_trace({P}, {out!r}, overwrite=True)
dt = time.perf_counter() - t0
import h5py
with h5py.File({out!r}) as f:
    n = int(f["events/op"].shape[0])
print(json.dumps({{"P": {P}, "seconds": dt, "events": n,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, nargs="+", default=[65536, 1048576])
    ap.add_argument("--keep", help="write the traces into this folder instead of a temporary one")
    opts = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(opts.keep or tmp)
        for P in opts.p:
            out = folder / f"stencil-P{P}.logical.h5"
            code = CHILD.format(root=str(ROOT), traces=str(ROOT / "traces" / "stencil"), P=P, out=str(out))
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            r = json.loads(res.stdout.strip().splitlines()[-1])
            r["file_mb"] = out.stat().st_size / 2**20
            rows.append(r)
    print(f"{'P':>10s}  {'events':>12s}  {'write (s)':>9s}  {'events/s':>10s}  {'peak RSS (MB)':>13s}  "
          f"{'file (MB)':>9s}")
    for r in rows:
        print(f"{r['P']:10,d}  {r['events']:12,d}  {r['seconds']:9.2f}  {r['events'] / r['seconds']:10.3g}  "
              f"{r['peak_mb']:13.0f}  {r['file_mb']:9.1f}")
    big = max(rows, key=lambda r: r["P"])
    ok = big["seconds"] < 30 and big["peak_mb"] < 4096
    print(f"\nlargest P={big['P']:,}: {big['seconds']:.1f} s, {big['peak_mb']:.0f} MB peak "
          f"({'meets' if ok else 'misses'} the goal: < 30 s and < 4 GB)")
    print(json.dumps({"bench": "logical_trace_speed", "rows": rows,
                      "goal": "P=1,048,576 stencil logical trace in < 30 s and < 4 GB peak", "ok": ok}))


if __name__ == "__main__":
    main()
