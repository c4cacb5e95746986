"""CPU time around polling loops: few clock readings per poll, exact bursts after a loop.

A loop of MPI_Test/Testany/Iprobe that finds nothing is held as one event (see the
tracer's "Polling loops"). Lazily the tracer reads no clock at a poll: it reads the
CPU time when the polls that lost the CPU since the last reading took about 100 us of
it, and once where the loop ends; the burst after the loop is then the exact figure
that ``SIGEX_CPU_SAMPLE_CHECK=1`` keeps beside it (the always-sampled one, read at every
poll's start and end). ``bench/c/poll_loop.c`` polls as hpcc's RandomAccess does: a ring
where each rank computes, sends, and polls for its neighbour's message. At P = 4 on a
machine of fewer cores (as here) the polls of Open MPI yield the CPU at every call.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_mpi

from signature import trace_run
from signature._raw import read_cpu_check

pytestmark = needs_mpi

PROGRAM = Path(__file__).resolve().parents[2] / "bench" / "c" / "poll_loop.c"
MPICC = {"pypi-mpich": str(Path(sys.prefix) / "bin" / "mpicc") if (Path(sys.prefix) / "bin" / "mpicc").exists()
         else shutil.which("mpicc"),
         "openmpi": shutil.which("mpicc.openmpi")}

#: Stated tolerance of the burst after a polling loop against the always-sampled figure of
#: the same run, per MPI: (share of bursts, relative, absolute, relative bound of their sum).
#: Open MPI's polls yield the CPU at every call, as hpcc's do here: 99% within 5% + 5 us
#: (four times tighter than any burst's bound in test_cpu_sampling.py: the loop's tail
#: no longer counts in it). MPICH's polls spin and lose the CPU only to the scheduler's
#: time slice or to the hypervisor (milliseconds, no context switch seen), so where the gap
#: after a loop lost it, the error of the loop's tail (at most 200 us of polling) counts in
#: the burst: 90% within 5% + 20 us, the sum within 30% (the tracer refreshing its sample
#: every 20 us of polling, before this design, gave 57-65% and two to three times the sum).
AFTER = {"openmpi": (0.99, 0.05, 5e-6, 0.05), "pypi-mpich": (0.90, 0.05, 20e-6, 0.30)}
#: The polling loops a run must hold for the checks to mean something.
MIN_LOOPS = 20
#: Any burst: the bound of test_cpu_sampling.py (the hypervisor of this shared VM steals
#: tens of microseconds from bursts no context switch marks, lazily estimated or not).
BURST_REL, BURST_ABS = 0.05, 20e-6


def _traced(tmp_path, monkeypatch, mpi, how, min_us=None):
    mpicc = MPICC[mpi]
    if not mpicc:
        pytest.skip(f"{mpi}: no compiler wrapper here (Debian: apt-get install libopenmpi-dev)")
    exe = tmp_path / "poll_loop"
    subprocess.run([mpicc, "-O2", "-o", str(exe), str(PROGRAM)], check=True)
    monkeypatch.setenv("SIGEX_CPU_SAMPLE_CHECK", "1")
    if min_us is None:
        monkeypatch.delenv("SIGEX_CPU_SAMPLE_MIN_US", raising=False)
    else:
        monkeypatch.setenv("SIGEX_CPU_SAMPLE_MIN_US", min_us)
    monkeypatch.delenv("SIGEX_MPICC", raising=False)
    # rank 0 computes twice as long, so that the others mostly wait in a loop: 135-700 loops
    # per run on a quiet machine. How many the ranks hold depends on how they are scheduled
    # (under other load an Open MPI run held 2-6 of them now and then), and what these tests
    # check needs loops: a run that holds fewer than MIN_LOOPS is run again (three at most)
    for attempt in range(3):
        res = trace_run([str(exe), "300", "50", how, "2"], 4, tmp_path / f"P4-{attempt}.h5",
                        keep_raw=True)
        assert res.ok, res.trace.meta.get("incomplete_reason")
        t = res.trace
        if (t.events["repeat"] > 1).sum() >= MIN_LOOPS:
            break
    check = read_cpu_check(res.path.with_name(res.path.name + ".raw"))
    bursts = t.events["seq"] > 0
    np.testing.assert_array_equal(t.events["seq"][bursts], check["seq"])
    np.testing.assert_array_equal(t.events["rank"][bursts], check["rank"])
    return t, bursts, check


def _after_loops(t, bursts):
    """The bursts (among ``bursts``) that follow a held loop of two polls or more."""
    ev = t.events
    rep = ev["repeat"]
    after = np.zeros(len(rep), bool)
    after[1:] = (rep[:-1] > 1) & (ev["rank"][1:] == ev["rank"][:-1])
    return after[bursts]


@pytest.mark.parametrize("mpi", list(MPICC))
@pytest.mark.parametrize("how", ["test", "testany", "iprobe"])
def test_polls_read_few_clocks_and_bursts_after_loops_are_exact(tmp_path, monkeypatch, mpi, how):
    """Lazily: at most one clock reading per 50 polls beyond the events' own, and the
    burst after each loop agrees with the always-sampled figure within the stated bound."""
    t, bursts, check = _traced(tmp_path, monkeypatch, mpi, how)
    polls = int(t.events["repeat"].sum()) - t.n_events
    loops = int((t.events["repeat"] > 1).sum())
    assert loops >= MIN_LOOPS, f"only {loops} polling loops held in three runs"
    # an event reads the clock at most twice, a loop once more where it ends, and the polls
    # once per ~100 us of the CPU time of those that switched (a poll takes 1-3 us): the
    # tracer refreshing every 20 us of polling read 1 in 3 (Open MPI) or 1 in 20 (MPICH)
    assert t.meta["cpu_samples"] <= 2 * t.n_events + loops + polls / 50, (
        f"{t.meta['cpu_samples']} clock readings for {t.n_events} events and {polls} polls")
    lazy, exact, wall = t.events["t_cpu"][bursts], check["t_cpu"], t.events["t_comp"][bursts]
    # a reference read across a preemption of its own reading shows more CPU time than wall
    # time (impossible for the burst): those bursts cannot be checked
    after = _after_loops(t, bursts) & (exact <= wall + 1e-6)
    assert after.sum() >= 0.8 * loops
    share, rel, absolute, total = AFTER[mpi]
    err = np.abs(lazy - exact)
    within = err[after] <= rel * exact[after] + absolute
    worst = np.flatnonzero(after)[err[after].argmax()]
    # (and two bursts whatever their number: a loop-poor run holds 50-100 loops here)
    assert (~within).sum() <= max(2, (1 - share) * len(within)), (
        f"{(~within).sum()} of {after.sum()} bursts after a loop off; worst: wall "
        f"{wall[worst]:.6f} s, lazy {lazy[worst]:.6f} s, exact {exact[worst]:.6f} s")
    # (check mode's own reading at the end of the loop's last poll lies inside the wall time
    # of the gap after it, which an estimated burst takes: up to 1 us each; and one burst
    # may lose 20 us to the hypervisor)
    assert abs(lazy[after].sum() - exact[after].sum()) <= (total * exact[after].sum()
                                                          + 1e-6 * after.sum() + 20e-6)
    assert (err <= BURST_REL * exact + BURST_ABS).mean() >= 0.97
    # context switches: none invented (a loop's tail gives the burst after it its switches
    # less one per poll that switched)
    ctx = t.events["ctx_switches"][bursts]
    assert int(ctx.sum()) <= 1.05 * int(check["ctx_switches"].sum()) + 2


@pytest.mark.parametrize("mpi", list(MPICC))
def test_sampling_always_reads_every_poll(tmp_path, monkeypatch, mpi):
    """SIGEX_CPU_SAMPLE_MIN_US=0 reads both ends of every poll: every burst, those after a
    loop included, is the always-sampled figure to the bit."""
    t, bursts, check = _traced(tmp_path, monkeypatch, mpi, "testany", min_us="0")
    polls = int(t.events["repeat"].sum()) - t.n_events
    assert t.meta["cpu_bursts_estimated"] == 0
    assert t.meta["cpu_samples"] >= 2 * polls
    np.testing.assert_array_equal(t.events["t_cpu"][bursts], check["t_cpu"])
    np.testing.assert_array_equal(t.events["ctx_switches"][bursts], check["ctx_switches"])
