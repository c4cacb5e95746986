"""Which loop a rank's cut starts with, and where a loop ends (issue 24, ABINIT): an
incidental short run of equal calls in the set-up is not the loop, whatever repeats
after the loop (``signature.iterations._incidental``), and a loop of other calls right
after a loop is a loop of its own, not more iterations of the first
(``signature.iterations._continues``)."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from signature import extract
from signature.iterations import _cut, find_unit
from synthetic import build_trace


@settings(max_examples=60, deadline=None)
@given(p=st.integers(2, 5), k=st.integers(4, 8), runs=st.integers(1, 3), extra=st.integers(0, 2),
       head=st.integers(0, 6))
def test_an_incidental_run_before_the_loop_is_not_the_loop(p, k, runs, extra, head):
    """A set-up with three equal calls, then a loop of p distinct calls k times, then runs
    of one call (Barriers while another rank receives) long enough that period 1 covers
    75% of what period p covers: the loop found is the one of period p, from its first
    iteration (it was the three equal calls, and the loop then took every later call
    of theirs as an iteration)."""
    # Y calls in runs of a multiple of p (each at least 3p, a repeat of period p), Y at
    # least 3kp - 12: period 1 covers 3 + Y >= 0.75 (kp + Y), period p covers kp + Y
    total = 3 * k * p - 12 + extra * p
    lengths = [max(-(-total // (runs * p)) * p, 3 * p)] * runs
    tok = list(range(100, 100 + head)) + [7, 7, 7] + [50, 51]
    start = len(tok)
    tok += list(range(1, p + 1)) * k + [60, 61]
    for i, n in enumerate(lengths):
        tok += [9] * n + [70 + 2 * i, 71 + 2 * i]
    assert find_unit(np.asarray(tok, np.uint64)) == (start, p, 1)


@settings(max_examples=40, deadline=None)
@given(p=st.integers(2, 5), k=st.integers(4, 8), q=st.integers(1, 3), j=st.integers(3, 12),
       changed=st.integers(0, 1))
def test_a_loop_of_other_calls_right_after_a_loop_is_its_own(p, k, q, j, changed):
    """A loop of p calls k times, then right after it a loop of q calls j times (fewer
    calls in all, so that the first loop is the one found first): two loops if the second shares
    none of the first's calls, one loop (whose plain iteration changed, as after a
    rebuild) if the second is the first with one call changed."""
    first = list(range(1, p + 1))
    if changed:
        p = max(p, 3)  # (more than half of the shorter one's calls shared)
        first = list(range(1, p + 1))
        second = first[:-1] + [40]
    else:
        assume(4 * j * q < 3 * k * p)  # (less than 75% of the first: not taken as an inner loop)
        second = list(range(20, 20 + q))
    tok = np.asarray([90, 91] + first * k + second * j + [92], np.uint64)
    b, loop, _ = _cut(tok, tok)
    n_loops = int(loop.max()) + 1
    if changed:
        assert n_loops == 1
    else:
        assert n_loops == 2
        assert int(np.sum(loop == 0)) == k
        assert int(np.sum(loop == 1)) == j


def _scf_program(P, scf, kpts, b, barriers):
    """ABINIT's stream (``pb.abi`` under Open MPI): set-up Bcasts (a run of ``b`` equal
    ones), the SCF initialisation, ``scf`` SCF steps of three Allreduces and a Bcast, then
    the output part: a Wait, two Allreduces, ``barriers`` Barriers, and, for every rank
    but 0 and each of its k-points (``kpts`` split over the ranks), a Barrier and the
    rank's two wavefunction messages to rank 0."""
    nk = max(1, kpts // P)

    def step(r, s):
        if s == 0:
            return ([("Bcast", -1, 1320), ("Barrier", -1, 0)] + [("Bcast", -1, 4)] * b
                    + [("Bcast", -1, 349), ("Bcast", -1, 792), ("Bcast", -1, 56),
                       ("Allreduce", -1, 4), ("Allreduce", -1, 240), ("Allreduce", -1, 6720), ("Bcast", -1, 4)])
        if s <= scf:
            return [("Allreduce", -1, 13440), ("Allreduce", -1, 262144), ("Bcast", -1, 4), ("Allreduce", -1, 4)]
        calls = [("Wait", -1, 0), ("Allreduce", -1, 24), ("Allreduce", -1, 48)] + [("Barrier", -1, 0)] * barriers
        for sender in range(1, P):
            for kp in range(nk):
                calls.append(("Barrier", -1, 0))
                size = 16800 + 12 * ((sender * 131 + kp * 29) % 97)  # the k-point's plane waves
                if r == 0:
                    calls += [("Recv", sender, size), ("Recv", sender, 10 * size)]
                elif r == sender:
                    calls += [("Send", 0, size), ("Send", 0, 10 * size)]
        return calls + [("Bcast", -1, 4), ("Allreduce", -1, 8)]
    return build_trace(P, scf + 2, step)


@settings(max_examples=20, deadline=None)
@given(P=st.integers(2, 10), scf=st.integers(5, 8), kpts=st.integers(30, 90), barriers=st.integers(8, 16))
@example(P=5, scf=6, kpts=60, barriers=14)  # issue 24's ABINIT run at P = 5: one phase
@example(P=10, scf=6, kpts=60, barriers=14)
def test_the_scf_loop_is_one_phase_of_its_steps_at_every_P(P, scf, kpts, barriers):
    """The SCF steps are one loop phase whose weight is their count, whatever P (each rank
    waits in Barriers while rank 0 receives another rank's wavefunctions: runs of
    Barriers of a length that depends on the rank). (With 4 steps and more Barriers
    than SCF calls on a rank, the Barriers' period covers most of the rank's window and
    is its loop: the cut looks for the dominant loop first.)"""
    sig = extract(_scf_program(P, scf, kpts, 3, barriers))
    scf_phases = [p for p in sig.loop_phases if p.weight == scf and set(p.ops) == {"Allreduce", "Bcast"}]
    assert len(scf_phases) == 1
    assert not any(p.weight > 1 and "Allreduce" in p.ops for p in sig.loop_phases if p not in scf_phases)
