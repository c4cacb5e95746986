"""The cut of a solver loop's cycle is the same at every P (issue 24, OpenFOAM's icoFoam):
a cycle first seen on a global collective is cut right after the run of them, so that the
same loop gives the same kinds of phase (op order) and weights at every P.

``signature.iterations._past_collectives`` (the rotation), ``_aligned`` (a match of the
plain iteration inside another cycle is none), ``_primitive`` (two loops in one
window whose periods divide a common multiple: the first loop's own period) and
``_tail_pieces`` (the last step after the loop's last plain iteration, its inner loop run
more or fewer times than before)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signature import OP_CODE, extract
from signature.iterations import _tail_pieces, find_unit
from synthetic import build_trace, comm_table


def _solver_step(P: int, smooth: list[int], solve: list[int], lead: int):
    """A time step as a CFD solver makes it: a smoother (``halo, halo, Allreduce`` per
    sweep, ``smooth[s]`` sweeps), a set-up (two point-to-point exchanges and two
    reductions), a PCG solve (``halo, Allreduce x3`` per iteration, ``solve[s]`` of them:
    the solver's data-dependent count), and a final reduction. Before the first step,
    each rank makes ``lead`` calls of a halo exchange: the first sweep's repeat is then
    seen from another call of the cycle."""
    def halo(r):
        return [("Sendrecv", (r + 1) % P, 640, (r - 1) % P, 640),
                ("Sendrecv", (r - 1) % P, 640, (r + 1) % P, 640)]

    def step(r, s):
        calls = []
        if s == 0:
            calls += [("Sendrecv", (r + 2) % P, 64, (r - 2) % P, 64)] + halo(r)[:lead]
        for _ in range(smooth[s]):
            calls += halo(r) + halo(r) + [("Allreduce", -1, 8)]
        calls += [("Sendrecv", (r + 2) % P, 96, (r - 2) % P, 96), ("Allreduce", -1, 8),
                  ("Sendrecv", (r + 2) % P, 96, (r - 2) % P, 96), ("Allreduce", -1, 8)]
        for _ in range(solve[s]):
            calls += halo(r) + [("Allreduce", -1, 8)] * 3
        calls += [("Allreduce", -1, 16)]
        return calls
    return step


def _kinds(sig) -> dict[tuple[str, ...], int]:
    """The loop phases by rank 0's op order, with their weights."""
    out = {}
    for ph in sig.loop_phases:
        to = ph.template_offsets
        ops = tuple(np.asarray(ph.template["op"][to[0]:to[1]]).tolist())
        out[ops] = out.get(ops, 0) + ph.weight
    return out


@settings(max_examples=20, deadline=None)
@given(Ps=st.sampled_from([(4, 6), (4, 8), (5, 8), (6, 9)]), steps=st.integers(4, 8),
       data=st.data(), lead=st.integers(0, 2))
def test_two_inner_loops_of_data_dependent_length_give_the_same_phase_kinds_at_two_p(Ps, steps, data, lead):
    """The PCG iterations are one phase whose weight is their count over the run; the
    smoother's sweeps one phase with the count less at most one a step (the last sweep
    holds the set-up after it: too few of the plain calls to be an iteration of its own);
    at both P the same kinds of phase (op order) with the same weights, wherever each
    rank happened to enter the cycle."""
    smooth = data.draw(st.lists(st.integers(6, 12), min_size=steps, max_size=steps))
    solve = data.draw(st.lists(st.integers(8, 20), min_size=steps, max_size=steps))
    kinds = [_kinds(extract(build_trace(P, steps, _solver_step(P, smooth, solve, lead)))) for P in Ps]
    assert kinds[0] == kinds[1], Ps
    sweep = tuple(OP_CODE[o] for o in ("Sendrecv",) * 4 + ("Allreduce",))
    pcg = tuple(OP_CODE[o] for o in ("Sendrecv",) * 2 + ("Allreduce",) * 3)
    assert kinds[0].get(pcg) == sum(solve), kinds[0]
    assert sum(smooth) - steps <= kinds[0].get(sweep, 0) <= sum(smooth), kinds[0]


def test_the_last_pcg_iteration_after_a_long_smoothing_stays_in_the_loop():
    """The case Hypothesis found for the test above (smooth 6, 6, 6, 7, 12; solve 8, 8, 8,
    8, 9; lead 0): the cut with runs of one Allreduce collapsed is taken, and there the
    last step after the loop's last plain iteration (a sweep) runs its PCG loop once more
    than any step before. It is the blocks seen between plain iterations with their
    inner loops' counts free (``_tail_pieces``): all 41 PCG iterations are in the loop,
    at both P, as with a last smoothing of 6 sweeps."""
    smooth, solve = [6, 6, 6, 7, 12], [8, 8, 8, 8, 9]
    pcg = tuple(OP_CODE[o] for o in ("Sendrecv",) * 2 + ("Allreduce",) * 3)
    good = _kinds(extract(build_trace(4, 5, _solver_step(4, [6] * 5, solve, 0))))
    assert good.get(pcg) == sum(solve)
    for P in (4, 6):
        kinds = _kinds(extract(build_trace(P, 5, _solver_step(P, smooth, solve, 0))))
        assert kinds.get(pcg) == sum(solve), (P, kinds)


def test_the_rest_after_the_loop_follows_a_block_with_its_inner_loop_run_more_or_fewer_times():
    """``_tail_pieces``: a block 'E E' then three 'B C A' pieces (an inner loop) then 'F'
    explains a rest that runs the inner loop once, or five times; a rest that leaves the
    block before its end is not the block's (OpenFOAM's last time step, whose pieces
    made a kind of its own at some P), nor is one that holds only the part before the
    first piece (a teardown that begins like a step)."""
    E, B, C, A, F, D = 5, 1, 2, 3, 6, 9
    gap = np.array([E, E] + [B, C, A] * 3 + [F], np.uint64)
    cuts = [2, 5, 8, 11]  # (F is a piece of its own: it holds enough of the plain calls)
    for inner in (1, 3, 5):
        rest = np.array([7] * 4 + [E, E] + [B, C, A] * inner + [F, D, D], np.uint64)
        took = _tail_pieces(rest, 4, gap, cuts)
        assert took == [2 + 3 * i for i in range(inner)] + [2 + 3 * inner, 3 + 3 * inner], inner
    rest = np.array([E, E, B, C, A, B, C, D], np.uint64)  # leaves the block inside a piece
    assert _tail_pieces(rest, 0, gap, cuts) == []
    assert _tail_pieces(np.array([E, E, D, B, C, A], np.uint64), 0, gap, cuts) == []
    assert _tail_pieces(np.array([E, D], np.uint64), 0, np.array([E, D], np.uint64), []) == [2]


def test_a_cycle_first_seen_on_its_collectives_begins_right_after_them():
    """The same tandem repeat first seen on either of its two Allreduces: one cut, right
    after them; first seen elsewhere, it keeps its start."""
    cycle = np.array([1, 2, 1, 2, 9, 9], np.uint64)  # halo, halo, Allreduce x2
    for lead in range(6):
        t = np.concatenate([np.array([7, 8], np.uint64), cycle[lead:], np.tile(cycle, 6)])
        anchor = t == 9
        s, p, _ = find_unit(t, anchor=anchor)
        assert p == 6 and t[s] == (1 if lead >= 4 else cycle[lead]), lead
        assert (s, p) == find_unit(t)[:2] or lead >= 4


def test_two_loops_in_one_window_give_the_first_ones_period():
    """A smoother of period 5 then a solver of period 3 both repeat with period 15, which
    covers most of the window; the first loop's own period is 5."""
    t = np.concatenate([np.tile(np.array([1, 2, 1, 2, 9], np.uint64), 12),
                        np.tile(np.array([1, 2, 9], np.uint64), 20)])
    s, p, _ = find_unit(t, anchor=t == 9)
    assert p == 5 and s == 0


def test_a_loop_of_global_collectives_alone_keeps_its_period():
    """A unit of six global reductions whose first repeats alternate two sizes (CP2K's
    run of Allreduces) is no two loops in one window: its period stays 6 (taken as 2, the
    unseen CP2K trace lost every loop of its run)."""
    t = np.concatenate([np.array([7, 8], np.uint64), np.tile(np.array([3, 4], np.uint64), 30),
                        np.tile(np.array([3, 4, 3, 4, 3, 5], np.uint64), 20)])
    anchor = np.isin(t, [3, 4, 5])
    assert find_unit(t, anchor=anchor)[1] == find_unit(t)[1]
    from signature.iterations import _primitive
    s0, p = 2, 6
    m = int(np.flatnonzero(t[s0 + p:] != t[s0:len(t) - p])[0])
    assert _primitive(t, p, s0, m, anchor) == (p, m)


@pytest.mark.parametrize("steps", [40, 1100])
def test_a_transform_loop_longer_than_the_window_is_cut_at_its_step(steps):
    """A forward and backward 3-D FFT on 2-D pencils transposes over the rows, the columns,
    the columns and the rows (an iteration that begins and ends with the same call). The
    period is found in the first 4,096 calls; where the loop runs past them (python3-mpi4py-fft
    at 4,000 steps) whether its repeats fill whole iterations was judged on the window, and
    the cut moved one transpose into the step: weight 3,999, a transpose in the set-up and
    three in the final part. 1,100 steps are 4,400 calls."""
    P = 4
    rows, cols = [[0, 1], [2, 3]], [[0, 2], [1, 3]]
    comms = comm_table(P, rows + cols)  # ids 1, 2 (rows), 3, 4 (columns)

    def step(r, s):
        row, col = 1 + r // 2, 3 + r % 2
        return [("Alltoall", -1, 512, -1, 512, c) for c in (row, col, col, row)]
    sig = extract(build_trace(P, steps, step, comms=comms))
    loops = [p for p in sig.phases if p.kind == "loop"]
    assert [p.weight for p in loops] == [steps]
    t = loops[0].rank_template(0)
    assert t["comm"].tolist() == [1, 3, 3, 1]
