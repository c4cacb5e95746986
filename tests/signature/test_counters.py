"""perf_event_open in the tracer: software events for real, hardware events where a PMU exists."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from conftest import needs_mpi
from signature import MissingCounterError, tracer_library
from signature._build import tracer_source
from signature.trace import OPS

pytestmark = needs_mpi


# four compute bursts, each ended by a Barrier
BURSTS = """
from mpi4py import MPI
import numpy as np
x = np.ones(300_000)
for _ in range(4):
    x = np.sqrt(x + 1.0)
    MPI.COMM_WORLD.Barrier()
"""


def _selftest(seconds: float = 0.05):
    lib = ctypes.CDLL(str(tracer_library()))
    out = (ctypes.c_double * 4)()
    sw_reason = ctypes.create_string_buffer(512)
    hw_reason = ctypes.create_string_buffer(512)
    ok = lib.sigex_perf_selftest(ctypes.c_double(seconds), out, sw_reason, hw_reason, 512)
    return ok, list(out), sw_reason.value.decode(), hw_reason.value.decode()


def test_c_and_python_operation_lists_agree():
    """The tracer's operation names are the Python OPS tuple, in the same order."""
    src = tracer_source().read_text()
    block = src[src.index("#define SIGEX_OPS(X)"):src.index("enum {")]
    names = re.findall(r'X\(\w+, "(\w+)"\)', block)
    assert ["None", *names] == list(OPS)


def test_software_events_count_cpu_time_and_context_switches():
    """task-clock measures the burst's CPU time (as the thread CPU clock does) and
    context switches are counted."""
    ok, (cpu, ctx, _, reference), sw_reason, _ = _selftest(0.05)
    if not ok:
        pytest.skip(f"perf_event_open software events unavailable here: {sw_reason}")
    assert reference > 0.005  # the machine may be busy: only some of the 50 ms is ours
    assert abs(cpu - reference) <= 0.05 * reference + 2e-4
    assert ctx >= 1  # the selftest sleeps once: a voluntary switch


def test_hardware_counters_where_a_pmu_exists():
    """instructions are counted where the kernel has a PMU; elsewhere the reason is given."""
    ok, (cpu, _, instr, _), _, hw_reason = _selftest(0.02)
    if hw_reason:
        assert "perf_event_open(PERF_COUNT_HW_" in hw_reason
        pytest.skip(f"no hardware PMU on this machine: {hw_reason}")
    assert instr > 1e6


def test_trace_states_its_work_mode_and_why(run_traced):
    """A trace records counters mode with a PMU, or CPU-time mode and the kernel's reason."""
    res = run_traced(BURSTS, 2, name="mode")
    t = res.trace
    _, _, _, hw_reason = _selftest(0.0)
    if hw_reason:
        assert t.work_mode == "cpu-time"
        assert not t.has_counters
        assert "PERF_COUNT_HW_INSTRUCTIONS" in t.meta["counters_reason"]
        with pytest.raises(MissingCounterError, match="no hardware PMU.*CPU-time mode"):
            t.counter("instr")
    else:
        assert t.work_mode == "counters"
        assert (t.counter("instr")[t.events["op"] == OPS.index("Barrier")] > 0).all()
    # burst CPU time is there either way, and non-negative
    assert (t.events["t_cpu"] >= 0).all()
    assert t.events["t_cpu"].sum() > 0


def test_fallback_clocks_without_perf(run_traced, monkeypatch):
    """With perf_event_open refused, CPU time comes from CLOCK_THREAD_CPUTIME_ID and it says so."""
    monkeypatch.setenv("SIGEX_NO_PERF", "1")
    res = run_traced(BURSTS, 2, name="noperf")
    t = res.trace
    assert t.meta["cpu_time_source"] == "clock_gettime:CLOCK_THREAD_CPUTIME_ID"
    assert t.meta["software_events"] is False
    barrier = t.events["op"] == OPS.index("Barrier")
    assert np.all(t.events["t_cpu"][barrier] > 0)
