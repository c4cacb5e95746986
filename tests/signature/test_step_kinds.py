"""Kinds of step whose calls depend on the data (``signature.phases._merge_variant_kinds``):
the repetitions of one kind that differ only where the data decides are one phase."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from signature import extract
from synthetic import build_trace


@settings(max_examples=25, deadline=None)
@given(P=st.sampled_from([6, 8]), k=st.integers(6, 10), rebuilds=st.integers(2, 3),
       tail=st.integers(2, 5))
def test_rebuild_steps_whose_exchange_depends_on_the_data_are_one_phase(P, k, rebuilds, tail):
    """Every k-th step exchanges atoms with a partner (five Sendrecv); in each such step
    one pair of ranks has atoms to move one way only (a Send and a Recv instead of the
    first Sendrecv: no atom crossed back), a different pair each time. The rebuild steps
    are one phase whose weight is their count, beside the plain step's phase."""
    steps = rebuilds * k + tail

    def step(r, s):
        calls = [("Sendrecv", (r + 1) % P, 800, (r - 1) % P, 800),
                 ("Sendrecv", (r - 1) % P, 800, (r + 1) % P, 800), ("Allreduce", -1, 8)]
        if s % k == k - 1:
            partner = r ^ 1
            exchange = [("Sendrecv", partner, 96, partner, 96)] * 5
            if r // 2 == (s // k) % (P // 2):  # this pair's atoms move one way
                exchange[0] = ("Send", partner, 96) if r % 2 == 0 else ("Recv", partner, 96)
            calls += exchange
        return calls
    sig = extract(build_trace(P, steps, step))
    loops = sig.loop_phases
    assert [p.weight for p in loops] == [steps - rebuilds, rebuilds]
    assert set(loops[1].ops) >= {"Sendrecv", "Allreduce", "Send", "Recv"}


@settings(max_examples=30, deadline=None)
@given(P=st.integers(4, 9), steps=st.integers(15, 50), k=st.integers(4, 9))
def test_a_rank_class_whose_own_iteration_starts_elsewhere_is_aligned_by_its_messages(P, steps, k):
    """The last rank serves the others (a PME rank): each step it receives from every
    worker, then answers. Its first step's receives are posted larger (a set-up buffer),
    so its own loop is found from its first answers on: its own iteration runs from the
    answers of one step to the receives of the next. Its messages with the workers put its cut
    where the step begins: the plain step's server template receives, then answers, and
    the step that reduces every k-th is a phase of its own with the count of reductions."""
    W = P - 1

    def step(r, s):
        if r == W:
            calls = [("Recv", w, 4096 if s == 0 else 512) for w in range(W)] + [("Send", w, 512) for w in range(W)]
        else:
            calls = [("Sendrecv", (r + 1) % W, 64, (r - 1) % W, 64), ("Send", W, 512), ("Recv", W, 512)]
        if s % k == k - 1 and s < steps - 1:
            calls += [("Allreduce", -1, 8)]
        return calls
    sig = extract(build_trace(P, steps, step))
    loops = sig.loop_phases
    assert len(loops) == 2
    reductions = [s for s in range(steps - 1) if s % k == k - 1]
    assert loops[1].weight == len(reductions)
    assert sum(p.weight for p in loops) in (steps - 1, steps)  # the set-up step may be initial
    server = loops[0].rank_template(W)
    assert list(server["op"]) == [8] * W + [4] * W  # Recv x W, Send x W


@settings(max_examples=25, deadline=None)
@given(P=st.integers(8, 12), m=st.integers(4, 10), intervals=st.integers(3, 8))
def test_a_step_whose_calls_change_on_one_rank_at_each_repartition_is_one_phase(P, m, intervals):
    """A halo step (exchanges with the ranks 1 to 4 away, each way). Every m steps the
    domains are repartitioned, and one rank (another each time) has no atoms to receive
    back on one exchange: it sends and receives apart (Send, Recv) instead of one
    Sendrecv, until the next repartition. The steps are one phase, whatever rank changed
    its calls when. (With a reduction every k-th step as well, the cut of the rank that
    changed can slip by the reduction: P=8, m=9, 4 intervals, k=4 gives 21 + 2 + 1 + 6 + 6
    instead of 28 + 8; not covered here.)"""
    steps = m * intervals

    def step(r, s):
        calls = [("Sendrecv", (r + d) % P, 256, (r - d) % P, 256) for d in (1, -1, 2, -2, 3, -3, 4, -4)]
        if r == (3 * (s // m)) % P:
            calls[2:3] = [("Send", (r + 2) % P, 256), ("Recv", (r - 2) % P, 256)]
        return calls
    sig = extract(build_trace(P, steps, step))
    assert [p.weight for p in sig.loop_phases] == [steps]
