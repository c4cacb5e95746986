"""Short runs (12-16 steps) whose first steps repeat the same data-dependent counts: a
rank's own period may begin part-way into the step, or a step or two late, and the
ranks aligned with it lose the first or last step to the parts around the loop. The
loop still holds every step (``signature.iterations._steps_before``,
``signature.phases._first_step_whole``)."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from signature import extract
from signature.iterations import _steps_before
from test_collective_sections import _flags_run


@given(n=st.integers(2, 6), k=st.integers(0, 5), head=st.lists(st.integers(100, 103), max_size=8),
       data=st.data())
def test_steps_before_the_first_repeat_are_found_whatever_their_counts(n, k, head, data):
    """k steps before the loop's first plain iteration, each the plain iteration's calls
    with other run lengths (1 to 3 of each call), after a set-up of other calls: their
    starts, and nothing of the set-up."""
    unit_calls = np.arange(1, n + 1, dtype=np.uint64)
    unit_runs = data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    unit = np.repeat(unit_calls, unit_runs)
    steps, starts = [], []
    at = len(head)
    for _ in range(k):
        runs = data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
        starts.append(at)
        steps.append(np.repeat(unit_calls, runs))
        at += len(steps[-1])
    struct = np.concatenate([np.asarray(head, np.uint64), *steps, unit, unit]).astype(np.uint64)
    got = _steps_before(struct, unit, 0, at)
    assert got.tolist() == starts


@settings(max_examples=30, deadline=None, derandomize=True)
@given(P=st.integers(8, 10), steps=st.integers(12, 16), seed=st.integers(2000, 2999))
@example(P=8, steps=12, seed=2422)  # ranks 2 and 3 found their period a step late (11 of 12)
@example(P=8, steps=12, seed=2356)  # ... and, cut at the Allreduce, ranks 4 and 5 too
@example(P=8, steps=12, seed=2154)  # every rank cut near the Allreduce, at different calls
def test_a_short_run_keeps_every_step_in_its_loop(P, steps, seed):
    """test_collective_sections's flags run, short: one loop phase, as many repetitions
    as steps, and the set-up holds no call of a step."""
    sig = extract(_flags_run(P, steps, seed))
    assert [p.weight for p in sig.loop_phases] == [steps]
    assert set(sig.phases[0].ops) == {"Init", "Barrier"}


def test_a_short_run_whose_first_rank_begins_with_the_flag_keeps_every_step():
    """A case of the test above: P = 8, 12 steps, seed 2299. Rank 0's first repeat of the
    step began after a step with one Recv fewer, right after the step's Allreduce: its
    cut fell before the flag it sends rank 1 after the Allreduce, its first step (no
    flag before it) joined the set-up, and the loop held 10 of the 12 steps as two kinds
    (9 and 1). The cut now moves past the flag where the set-up ends with the rest of
    the step (``iterations._lead_moved``)."""
    sig = extract(_flags_run(8, 12, 2299))
    assert [p.weight for p in sig.loop_phases] == [12]
