"""The compiled step kernel (``replay/_kernel.c``) against the numpy engine, the reference:
every bundled trace, physical traces of the examples and random programs replay to the same
times to the last bit (event ends, finish, computation, communication, wait, TE), whole and
in pieces, with eager and rendezvous messages, intra-node links and both collective modes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from compute_model import campaign
from conftest import ROOT, TRACES
from random_programs import build, random_program
from replay import LogGP, Machine, Program, ReplayState, load, replay
from replay import _kernel
from replay.unroll import unroll
from signature import load_trace
from test_workers import mixed_machine, mixed_program

pytestmark = pytest.mark.skipif(_kernel.kernel() is None,
                                reason=f"the replay kernel cannot be built here: {_kernel.kernel_error()}")

FIELDS = ("event_end", "finish", "computation", "communication", "wait", "te", "phase_time",
          "phase_computation", "phase_communication")


def assert_identical(a, b):
    for k in FIELDS:
        x, y = getattr(a, k), getattr(b, k)
        assert x.shape == y.shape and np.array_equal(x, y), k
    assert a.runtime == b.runtime and a.critical_rank == b.critical_rank


def both(program, machine, **kw):
    """The numpy and the compiled replay of ``program``."""
    return (replay(program, machine, kernel="numpy", **kw),
            replay(program, machine, kernel="compiled", **kw))


def rendezvous_machine() -> Machine:
    """cluster-a's links with a 1 kB eager threshold and two ranks per node."""
    m = load("cluster-a")
    return Machine(name="rdv", network=m.network, S=1000, speed=1.7, cores=2,
                   intra=LogGP(L=0.4e-6, o=0.3e-6, g=0.2e-6, G=1e-10, O=1e-11))


@pytest.mark.parametrize("path", sorted(TRACES.glob("*/P*.h5")), ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_bundled_traces_replay_identically(path):
    """Each bundled trace: same times with the compiled kernel as with numpy, on cluster-a,
    on a rendezvous-heavy machine with intra-node links, and with closed-form collectives."""
    p = Program.from_trace(load_trace(path))
    assert_identical(*both(p, load("cluster-a")))
    assert_identical(*both(p, rendezvous_machine()))
    assert_identical(*both(p, load("cluster-b"), collectives="closed-form"))


@pytest.fixture(scope="module")
def physical(tmp_path_factory):
    out = {}
    for app in ("stencil", "fft2d"):
        _, cm = campaign.models(campaign.load(ROOT / "examples" / f"{app}.toml"))
        out[app] = load_trace(cm.physical_trace(64, tmp_path_factory.mktemp(app) / "P64.h5"))
    return out


@pytest.mark.parametrize("app", ["stencil", "fft2d"])
def test_physical_traces_replay_identically(physical, app):
    """Physical traces at P = 64 (each phase once, and unrolled), whole and in 3 pieces."""
    for trace in (physical[app], unroll(physical[app])):
        p = Program.from_trace(trace)
        ref, fast = both(p, load("cluster-a"))
        assert_identical(ref, fast)
        assert_identical(ref, replay(p, load("cluster-a"), kernel="compiled", pieces=3))


@pytest.mark.parametrize("intra", [False, True])
def test_subcommunicator_collectives_replay_identically(intra):
    """World, row and column collectives, rendezvous sizes, a nonblocking collective."""
    p = mixed_program(16, seed=3)
    ref, fast = both(p, mixed_machine(intra))
    assert_identical(ref, fast)
    assert_identical(ref, replay(p, mixed_machine(intra), kernel="compiled", pieces=5))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(program=st.tuples(st.integers(2, 7), st.integers(1, 14), st.integers(0, 2 ** 32 - 1)),
       S=st.sampled_from([0, 1000, 10 ** 9]), cores=st.sampled_from([1, 2]), pieces=st.integers(1, 4),
       collectives=st.sampled_from(["algorithms", "closed-form"]))
def test_random_programs_replay_identically(program, S, cores, pieces, collectives):
    """Random programs (wildcard receives, shifts, collectives): the compiled kernel in k
    pieces equals the numpy engine in one."""
    p = build(random_program(*program))
    m = Machine(name="prop", network=LogGP(L=5e-6, o=1e-6, g=2e-6, G=1e-9, O=0.0), S=S, cores=cores,
                intra=LogGP(L=0.5e-6, o=0.5e-6, g=0.5e-6, G=0.1e-9, O=0.0) if cores > 1 else None)
    ref = replay(p, m, kernel="numpy", collectives=collectives)
    assert_identical(ref, replay(p, m, kernel="compiled", collectives=collectives, pieces=pieces))


def test_run_until_phase_stops_at_the_same_place():
    """run(until_phase=k) with the kernel stops every rank where the numpy engine does."""
    p = mixed_program(8, seed=1)
    states = [ReplayState(p, mixed_machine(False), kernel=k) for k in ("numpy", "compiled")]
    for phase in (0, 1, None):
        for s in states:
            s.run(until_phase=phase)
        assert np.array_equal(states[0].idx, states[1].idx)
        assert np.array_equal(states[0].t_end_new, states[1].t_end_new, equal_nan=True)


def test_a_deadlock_is_reported_alike():
    """A receive without a send: the same DeadlockError text from both engines."""
    p = Program.from_arrays(2, rank=[0, 1, 1], op=["Recv", "Send", "Recv"], peer=[1, 0, 0],
                            bytes=[0, 8, 0], recv_bytes=[8, 0, 8], tag=[0, 0, 5])
    msgs = []
    for k in ("numpy", "compiled"):
        with pytest.raises(Exception, match="cannot finish") as err:
            replay(p, load("cluster-a"), kernel=k)
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]


def test_kernel_choice(monkeypatch):
    """kernel='numpy' or SIGEX_REPLAY_KERNEL=numpy select the reference; a bad name is refused."""
    p = mixed_program(4, seed=0)
    assert ReplayState(p, mixed_machine(False)).kernel == "compiled"
    assert ReplayState(p, mixed_machine(False), kernel="numpy").kernel == "numpy"
    with pytest.raises(ValueError, match="kernel must be"):
        ReplayState(p, mixed_machine(False), kernel="fortran")
    monkeypatch.setenv("SIGEX_REPLAY_KERNEL", "numpy")
    assert ReplayState(p, mixed_machine(False)).kernel == "numpy"
    with pytest.raises(RuntimeError, match="not available"):
        ReplayState(p, mixed_machine(False), kernel="compiled")


def test_tied_receives_and_overhead_sums_round_alike():
    """Receives ready at the same instant with different costs (taken cheaper first), and
    calls waiting for many slots of different costs (their overheads summed as numpy sums a
    row): the last bits agree too, over sizes for which other orders round differently."""
    for seed in range(12):
        _tied_receives(seed)


def _tied_receives(seed):
    rng = np.random.default_rng(seed)
    P, k = 10, 9  # rank 0 posts k Irecvs at one instant (no burst), after a long burst
    rank, op, peer, nbytes, rbytes, req, comp = [], [], [], [], [], [], []
    for r in range(1, k + 1):
        rank.append(r), op.append("Send"), peer.append(0), req.append(-1), comp.append(0.0)
        b = int(rng.integers(1, 9000))
        nbytes.append(b), rbytes.append(0)
        rank.append(0), op.append("Irecv"), peer.append(r), nbytes.append(0), rbytes.append(b)
        req.append(r), comp.append(1e-3 if r == 1 else 0.0)
    rank.append(0), op.append("Waitall"), peer.append(-1), nbytes.append(0), rbytes.append(0)
    req.append(-1), comp.append(0.0)
    order = np.argsort(rank, kind="stable")
    completions = [(0, k, q) for q in range(1, k + 1)]
    cols = {key: np.asarray(v)[order] for key, v in (("rank", rank), ("op", op), ("peer", peer),
                                                      ("bytes", nbytes), ("recv_bytes", rbytes),
                                                      ("req", req), ("comp", comp))}
    p = Program.from_arrays(P, completions=completions, **cols)
    m = Machine(name="odd", network=LogGP(L=3e-6, o=1.1e-6, g=0.7e-6, G=3.3e-10, O=1.7e-10), S=10**9)
    ref, fast = both(p, m)
    assert_identical(ref, fast)


def test_without_a_compiler_the_numpy_engine_replays(monkeypatch, tmp_path):
    """No working C compiler: one RuntimeWarning naming why, then the numpy engine (same times)."""
    p = mixed_program(4, seed=2)
    want = replay(p, mixed_machine(False), kernel="numpy")
    monkeypatch.setattr(_kernel, "_state", {})
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("SIGEX_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.warns(RuntimeWarning, match="no-such-cc"):
        st = ReplayState(p, mixed_machine(False))
    assert st.kernel == "numpy" and "no-such-cc" in _kernel.kernel_error()
    assert_identical(want, replay(p, mixed_machine(False)))


def test_collectives_left_to_numpy_give_the_same_times(monkeypatch):
    """Sub-communicator collectives past the kernel's limits (here: all of them) are evaluated
    by numpy between kernel calls; the times do not change."""
    import replay.engine as engine

    p = mixed_program(16, seed=5)
    ref = replay(p, mixed_machine(True), kernel="numpy")
    monkeypatch.setattr(engine, "_KERNEL_LOOP_MAX", 0)
    monkeypatch.setattr(engine, "_KERNEL_PATTERN_MAX", 8)
    st = ReplayState(p, mixed_machine(True))
    st.run()
    assert st.steps > 1  # the kernel handed instances back
    assert_identical(ref, st.result())
