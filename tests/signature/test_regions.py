"""User regions (``signature.region``): optional names that check the phase detector."""

from __future__ import annotations

from conftest import needs_mpi
from signature import extract, region

pytestmark = needs_mpi

SCRIPT = """
import sys
from mpi4py import MPI
import numpy as np
from signature import region
c = MPI.COMM_WORLD
r, P = c.rank, c.size
a = np.ones(100); b = np.empty(100); s = np.zeros(1)
mode = sys.argv[1]
with region("setup"):
    c.Barrier()
for i in range(20):
    if mode == "pairs" and i % 2 == 0:
        region_cm = region("two steps"); region_cm.__enter__()
    with region("step") if mode == "steps" else region("halo"):
        c.Sendrecv(a, dest=(r + 1) % P, recvbuf=b, source=(r - 1) % P)
    if i % 5 == 4:
        with region("check"):
            c.Allreduce(MPI.IN_PLACE, s)
    if mode == "pairs" and i % 2 == 1:
        region_cm.__exit__(None, None, None)
"""


def test_regions_name_phases_and_agree(run_traced):
    """Regions around the loop body name the detected phases; they agree with the cut."""
    t = run_traced(SCRIPT, 3, "steps", name="regions").trace
    assert set(t.regions) == {"setup", "step", "check"}
    sig = extract(t)
    assert [p.weight for p in sig.loop_phases] == [16, 4]
    plain, checked = sig.loop_phases
    assert plain.regions == ("step",) and checked.regions == ("step", "check")
    assert "Region_begin" not in plain.ops  # regions are not part of the op structure
    assert sig.phases[0].regions == ("setup",)
    assert sig.region_problems == ()
    assert "[step, check]" in sig.table()


def test_a_region_that_crosses_phases_is_reported(run_traced):
    """A region spanning two detected iterations is reported, naming rank and events."""
    t = run_traced(SCRIPT, 3, "pairs", name="regions-pairs").trace
    sig = extract(t)
    assert [p.weight for p in sig.loop_phases] == [16, 4]  # regions never change the cut
    assert sig.region_problems
    assert "region 'two steps' entered at seq" in sig.region_problems[0]
    assert "crosses a phase boundary" in sig.region_problems[0]


def test_region_is_a_no_op_without_the_tracer():
    """Outside a traced run, region() does nothing and raises nothing."""
    with region("anything"):
        x = 1
    assert x == 1
