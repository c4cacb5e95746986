"""The bundled traces: complete, self-describing, and with the loop counts of their programs."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from conftest import TRACES
from signature import load_trace

FILES = sorted(TRACES.rglob("*.h5"))
APPS = ("stencil", "cg", "nbody", "fft2d", "sweep")


def iterations(trace) -> int:
    """The --iters the traced command ran with (recorded in the trace)."""
    cmd = trace.meta["command"]
    return int(cmd[cmd.index("--iters") + 1])


def test_every_app_has_two_workloads_at_three_p():
    """Each example is bundled at P = 4, 8, 16 for its original and small workloads."""
    have = {(f.parent.name if f.parent.name != "small" else f.parent.parent.name + "/small", f.stem)
            for f in FILES}
    for app in APPS:
        for sub in (app, app + "/small"):
            assert {(sub, f"P{p}") for p in (4, 8, 16)} <= have, sub


@pytest.mark.parametrize("path", FILES, ids=[str(f.relative_to(TRACES)) for f in FILES])
def test_bundled_trace_is_complete_and_matches_its_program(path):
    """A bundled trace is complete, names its command and workload, and has the documented calls."""
    t = load_trace(path)
    app = t.meta["app"]
    P, iters = t.nprocs, iterations(t)
    assert t.complete and path.stem == f"P{P}"
    assert t.meta["command"][1] == f"examples/{app}.py"
    assert t.meta["workload_label"] == "n" and f"--n {t.meta['workload_value']}" in " ".join(t.meta["command"])
    assert t.work_mode in ("cpu-time", "counters")
    assert np.all(t.events["t_cpu"] >= 0) and np.all(t.events["t_comp"] >= 0)
    for r in range(P):
        calls = Counter(t.op_name(o) for o in t.rank_events(r)["op"])
        if app == "stencil":
            assert calls["Allreduce"] == iters // 10 + 1 and calls["Waitall"] == iters
        elif app == "cg":
            assert calls["Allreduce"] == 2 * iters + 2 and calls["Waitall"] == iters + 1
        elif app == "nbody":
            assert calls["Sendrecv"] == (P - 1) * iters
        elif app == "fft2d":
            assert calls["Alltoall"] == 2 * iters
        elif app == "sweep":
            assert calls["Recv"] + calls["Send"] > 0
            assert calls["Recv"] % (4 * iters) == 0 and calls["Send"] % (4 * iters) == 0
