"""The poll clock: held polls time themselves with rdtsc where the TSC is invariant.

A held repeat of a poll reads the time in ticks of the poll clock (the tracer's "the poll
clock"): rdtsc where /proc/cpuinfo has constant_tsc and nonstop_tsc and the kernel's
clocksource is tsc, else CLOCK_MONOTONIC; ticks become seconds where a loop ends, from the
loop's anchor. Checked here: the trace says which clock it used, both clocks give a
consistent time line (a held loop ends before the next event starts, its time spans its
polls), and a bad setting is refused.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_mpi

from signature import trace_run
from signature.errors import TracerError

pytestmark = needs_mpi

PROGRAM = Path(__file__).resolve().parents[2] / "bench" / "c" / "poll_loop.c"


def _tsc_invariant() -> bool:
    try:
        flags = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines()
                     if ln.startswith("flags")).split()
        cs = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource").read_text()
    except (OSError, StopIteration):
        return False
    return (platform.machine() == "x86_64" and "constant_tsc" in flags and "nonstop_tsc" in flags
            and cs.strip() == "tsc")


@pytest.fixture(scope="module")
def poll_program(tmp_path_factory):
    exe = tmp_path_factory.mktemp("pollclock") / "poll_loop"
    mpicc = Path(sys.prefix) / "bin" / "mpicc"
    subprocess.run([str(mpicc) if mpicc.exists() else "mpicc", "-O2", "-o", str(exe),
                    str(PROGRAM)], check=True)
    return exe


def _trace(poll_program, tmp_path, monkeypatch, clock):
    if clock is None:
        monkeypatch.delenv("SIGEX_POLL_CLOCK", raising=False)
    else:
        monkeypatch.setenv("SIGEX_POLL_CLOCK", clock)
    monkeypatch.delenv("SIGEX_MPICC", raising=False)
    # rank 0 computes 10 times as long: the others hold long loops
    with open(tmp_path / "out.txt", "w") as out:
        res = trace_run([str(poll_program), "60", "100", "test", "10"], 3, tmp_path / "P3.h5",
                        stdout=out)
    return res, (tmp_path / "out.txt").read_text()


@pytest.mark.parametrize("clock", [None, "clock_gettime"])
def test_held_loops_keep_a_consistent_time_line(poll_program, tmp_path, monkeypatch, clock):
    res, out = _trace(poll_program, tmp_path, monkeypatch, clock)
    assert res.ok, res.trace.meta.get("incomplete_reason")
    t = res.trace
    what = t.meta["poll_clock"]
    if clock == "clock_gettime":
        assert what == "clock_gettime:CLOCK_MONOTONIC (SIGEX_POLL_CLOCK=clock_gettime)"
    elif _tsc_invariant():
        assert what.startswith("rdtsc (invariant TSC, "), what
    else:
        assert what.startswith("clock_gettime:CLOCK_MONOTONIC ("), what
    ev = t.events
    rep = ev["repeat"]
    held = rep > 1
    assert held.sum() >= 60, f"only {held.sum()} held loops"
    assert int(rep[held].sum()) > 10 * held.sum()  # long loops: most polls are held repeats
    assert (ev["t_comm"] >= 0).all() and (ev["t_comp"] >= 0).all()
    # per rank, each event ends before the next starts (1 us: a held loop's end comes from
    # ticks, the next start from CLOCK_MONOTONIC), and the gap is the next burst
    for r in range(3):
        e = {k: v[ev["rank"] == r][1:] for k, v in ev.items()}  # after Init (its own timing)
        end = e["t_start"][:-1] + e["t_comm"][:-1]
        assert (end <= e["t_start"][1:] + 1e-6).all(), np.max(end - e["t_start"][1:])
        np.testing.assert_allclose(e["t_comp"][1:], e["t_start"][1:] - end, atol=1e-6)
    # the loops' time in seconds: at least the thread CPU time the program measured in its
    # loops (wall >= CPU), at most their wall time plus the polls' own; rank 0's 1 ms of
    # compute per iteration is what the others wait through
    loop_cpu = float(re.search(r"loop_cpu_s (\S+)", out).group(1))
    in_loops = ev["t_comm"][ev["op"] == t.op_code("Test")].sum()
    assert 0.98 * loop_cpu <= in_loops <= 3 * t.runtime, (loop_cpu, in_loops)
    waits = ev["t_comm"][held & (ev["rank"] != 0)]
    assert np.median(waits) > 200e-6, np.median(waits)


def test_a_bad_poll_clock_setting_is_refused(poll_program, tmp_path, monkeypatch):
    with pytest.raises(TracerError, match="SIGEX_POLL_CLOCK=hpet: expected 'tsc'"):
        _trace(poll_program, tmp_path, monkeypatch, "hpet")
    assert not (tmp_path / "P3.h5").exists()
