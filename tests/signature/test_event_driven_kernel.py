"""An event-driven update kernel, as hpcc's MPIRandomAccess runs it: each rank makes
``updates`` updates, one per iteration of its loop, to random ranks' tables; it polls
for incoming buckets (Testany, held by the tracer: one event stands for the polls until
one finds something), receives each bucket that arrived, and, when its buckets are full,
tests its last send and sends the fullest bucket. Its loop count is the program's
(``updates``), but its iterations are finer than its events, and the buckets each rank
sends are the random data's count, with no lock step across ranks: the signature keeps
each such kernel one weight-1 phase (its calls per rank recorded), and finds the loops
around it with their own counts."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from signature import extract
from signature.trace import OP_CODE
from synthetic import build_trace


def _kernel(P: int, rng: np.random.Generator, updates: int, bucket: int) -> tuple[list, list]:
    """Each rank's calls and held-poll counts (``repeat``) for one run of the kernel."""
    dests = [rng.choice([d for d in range(P) if d != r], size=updates) for r in range(P)]
    sends: list[list[int]] = []  # per rank, the destinations of its buckets in order
    polls_before: list[list[int]] = []  # per rank, the updates made before each send
    for r in range(P):
        fill = np.zeros(P, np.int64)
        out, before, made = [], [], 0
        for d in dests[r].tolist():
            fill[d] += 1
            made += 1
            if fill.sum() >= bucket:  # full: send the fullest bucket
                top = int(np.argmax(fill))
                out.append(top)
                before.append(made)
                fill[top], made = 0, 0
        for d in np.flatnonzero(fill).tolist():  # the rest at the end
            out.append(d)
            before.append(made)
            made = 0
        sends.append(out)
        polls_before.append(before)
    calls, repeats = [], []
    for r in range(P):
        incoming = [s for s in range(P) for d in sends[s] if d == r]
        rng.shuffle(incoming)
        c, rep = [], []
        n_send = len(sends[r])
        # each received bucket arrives after a random send of this rank (or before the first)
        arrive = np.sort(rng.integers(0, n_send + 1, size=len(incoming)))
        k = 0
        for j in range(n_send + 1):
            while k < len(incoming) and arrive[k] == j:  # a poll that finds a bucket
                c += [("Testany", -1, 0), ("Recv", int(incoming[k]), 8 * bucket)]
                rep += [1, 1]
                k += 1
            if j == n_send:
                break
            held = int(polls_before[r][j])
            if held:
                c.append(("Testany", -1, 0))  # the polls of the updates made, held
                rep.append(held)
            c += [("Test", -1, 0), ("Send", int(sends[r][j]), 8 * bucket)]
            rep += [1, 1]
        calls.append(c)
        repeats.append(rep)
    return calls, repeats


def _suite(P: int, updates: int, bucket: int, n_check: int, seed: int):
    """Two runs of the kernel, each between barriers, around a check loop (Barrier,
    Alltoall, ``n_check`` times), as hpcc runs RandomAccess and its LCG variant."""
    rng = np.random.default_rng(seed)
    (k1, r1), (k2, r2) = (_kernel(P, rng, updates, bucket) for _ in range(2))
    pre = [("Allreduce", -1, 8)]
    mid = [("Barrier", -1, 0)] + [("Barrier", -1, 0), ("Alltoall", -1, 64)] * n_check + [("Reduce", -1, 8)]
    post = [("Barrier", -1, 0), ("Reduce", -1, 8)]

    def program(r: int, _):
        return pre + k1[r] + mid + k2[r] + post
    trace = build_trace(P, 1, program, seed=seed)
    rep = []
    for r in range(P):  # Init, Barrier, the program, Barrier, Finalize
        rep += [1, 1] + [1] * len(pre) + r1[r] + [1] * len(mid) + r2[r] + [1] * len(post) + [1, 1]
    trace.events["repeat"] = np.asarray(rep, np.int32)
    assert len(rep) == len(trace.events["op"])
    return trace, (k1, k2)


@settings(max_examples=12, deadline=None)
@given(P=st.integers(4, 8), updates=st.integers(300, 1200), bucket=st.integers(8, 32),
       n_check=st.integers(3, 30), seed=st.integers(0, 2**16))
def test_an_event_driven_kernel_is_one_part_and_the_loop_beside_it_is_found(P, updates, bucket, n_check, seed):
    """The check loop is the one loop, with its own count; each kernel is one weight-1
    phase that holds every call the ranks made in it (their bucket sends and receives as
    counts per rank)."""
    trace, kernels = _suite(P, updates, bucket, n_check, seed)
    sig = extract(trace)
    assert [(p.ops, p.weight) for p in sig.loop_phases] == [(("Barrier", "Alltoall"), n_check)]
    parts = [p for p in sig.phases if p.weight == 1 and "Test" in p.ops]
    assert len(parts) == 2
    for part, calls in zip(parts, kernels):
        for r in range(P):
            t = part.rank_template(r)
            for op in ("Send", "Recv", "Test"):
                assert int(np.sum(t["op"] == OP_CODE[op])) == sum(c[0] == op for c in calls[r])
