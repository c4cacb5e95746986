"""Property-based tests of the replay: random programs replayed whole and in pieces (one process,
and two MPI workers) give bit-identical times; an unmatched receive is always a deadlock that
names its rank, event and phase.

The programs (``random_programs.py``) mix blocking and nonblocking point-to-point messages,
receives from MPI_ANY_SOURCE, shift exchanges, world collectives and a nonblocking collective,
with random compute bursts; every one of them completes, whatever the eager threshold.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import ROOT
from random_programs import build, random_program, with_unmatched_receive
from replay import DeadlockError, LogGP, Machine, replay

US = 1e-6


def machine(S: int, cores: int = 1) -> Machine:
    """LogGP with L = 5 us, o = 1 us, g = 2 us, G = 1 ns/B; eager below S bytes."""
    intra = LogGP(L=0.5 * US, o=0.5 * US, g=0.5 * US, G=0.1e-9, O=0.0) if cores > 1 else None
    return Machine(name="prop", network=LogGP(L=5 * US, o=1 * US, g=2 * US, G=1e-9, O=0.0),
                   S=S, speed=1.0, cores=cores, intra=intra)


PROGRAMS = st.tuples(st.integers(2, 7), st.integers(1, 14), st.integers(0, 2 ** 32 - 1))
MACHINES = st.tuples(st.sampled_from([0, 1000, 10 ** 9]), st.sampled_from([1, 2]))
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(program=PROGRAMS, mach=MACHINES, pieces=st.integers(2, 7),
       collectives=st.sampled_from(["algorithms", "closed-form"]))
def test_pieces_give_bit_identical_times(program, mach, pieces, collectives):
    """Any random program replays in k pieces to exactly the event end times, finish times,
    waits and phase times of one piece (to the last bit), on any eager threshold and with
    one or two ranks per node."""
    P, steps, seed = program
    p = build(random_program(P, steps, seed))
    m = machine(*mach)
    whole = replay(p, m, collectives=collectives)
    split = replay(p, m, collectives=collectives, pieces=pieces)
    assert np.array_equal(whole.event_end, split.event_end)
    for key in ("finish", "wait", "te"):
        assert np.array_equal(getattr(whole, key), getattr(split, key)), key
    assert whole.runtime == split.runtime
    assert np.all(np.isfinite(whole.event_end)) and whole.runtime >= 0


@SETTINGS
@given(program=PROGRAMS, S=st.sampled_from([0, 10 ** 9]), data=st.data())
def test_an_unmatched_receive_is_a_deadlock_naming_rank_event_and_phase(program, S, data):
    """A receive no rank sends to, put anywhere in any random program, ends the replay (whole or
    in pieces) in a DeadlockError that names that rank, its event number and its phase."""
    P, steps, seed = program
    spec = random_program(P, steps, seed)
    rank = data.draw(st.integers(0, P - 1), label="rank")
    n_rank = int(np.sum(spec["rank"] == rank))
    at = data.draw(st.integers(0, n_rank), label="position")
    source = (rank + data.draw(st.integers(1, P - 1), label="source offset")) % P
    bad, phase = with_unmatched_receive(spec, rank, at, source)
    p = build(bad)
    want = (f"rank {rank} event {at} (seq {at}, Recv, phase {phase}): it waits for a message from "
            f"rank {source} that is never sent")
    for pieces in (1, 2):
        with pytest.raises(DeadlockError) as ex:
            replay(p, machine(S), pieces=pieces)
        assert want in str(ex.value), (pieces, str(ex.value))


WORKERS_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
import numpy as np
from mpi4py import MPI
from random_programs import build, random_program
from replay import LogGP, Machine, replay
from replay.workers import replay_workers

US = 1e-6
rank = MPI.COMM_WORLD.rank
for case in range({n}):
    rng = np.random.default_rng(1000 + case)
    P, steps, seed = int(rng.integers(2, 9)), int(rng.integers(1, 16)), int(rng.integers(0, 2**32))
    S = int(rng.choice([0, 1000, 10**9]))
    m = Machine(name="prop", network=LogGP(L=5 * US, o=1 * US, g=2 * US, G=1e-9, O=0.0), S=S, speed=1.0)
    p = build(random_program(P, steps, seed))
    res = replay_workers(p, m, min_events_per_worker=0)
    if rank == 0:
        ref = replay(p, m)
        same = (np.array_equal(ref.event_end, res.event_end) and np.array_equal(ref.finish, res.finish)
                and np.array_equal(ref.wait, res.wait) and ref.runtime == res.runtime)
        print(json.dumps({{"case": case, "P": P, "steps": steps, "seed": seed, "S": S,
                          "pieces": res.pieces, "same": bool(same)}}), flush=True)
"""


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec on PATH (pip install mpich)")
def test_two_mpi_workers_give_bit_identical_times(tmp_path):
    """mpiexec -n 2: 25 seeded random programs replayed by two MPI workers (a piece each) give
    worker 0 exactly the times of one process."""
    script = tmp_path / "random_workers.py"
    script.write_text(WORKERS_SCRIPT.format(tests=str(ROOT / "tests" / "replay"), n=25))
    env = dict(os.environ, MPIR_CVAR_ENABLE_HEAVY_YIELD="1", PYTHONPATH=str(ROOT))
    env.pop("LD_PRELOAD", None)
    res = subprocess.run(["mpiexec", "-n", "2", sys.executable, str(script)], cwd=ROOT,
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    assert len(rows) == 25
    assert all(r["same"] for r in rows), [r for r in rows if not r["same"]]
    assert any(r["pieces"] == 2 for r in rows)
