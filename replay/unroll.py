"""Unroll a weighted (logical or physical) trace: every phase repeated its weight times.

A generated trace stores each phase once per rank with its weight
(``meta["phase_weights"]``); the replay predicts PET = sum TE_i * W_i from one
repetition of each. :func:`unroll` writes out the run those weights describe,
so that it can be replayed whole (the *full replay*, the validation mode next
to PET) or exported to SimGrid. Vectorised: the output is gathered from the
input with index arithmetic over (rank, phase) blocks; completions of wait
events are replicated with their events.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from signature.errors import SigexError
from signature.trace import Trace

__all__ = ["unroll", "replay_steady", "steady_repetitions", "SteadyState", "STEADY_MAX_EVENTS"]


def unroll(trace: Trace, *, weights=None, max_events: int = 200_000_000) -> Trace:
    """The trace with each phase block repeated its weight times (weights become 1).

    ``weights`` overrides the trace's own (to replay a few repetitions of each phase).
    A trace without phase weights (a captured run) is returned unchanged.
    """
    weights = trace.meta.get("phase_weights") if weights is None else list(weights)
    ev = trace.events
    if weights is None or "phase" not in ev:
        return trace
    w = np.asarray(weights, np.int64)
    n = len(ev["op"])
    rank = ev["rank"].astype(np.int64)
    phase = ev["phase"].astype(np.int64)
    if n == 0:
        return trace
    # (rank, phase) blocks: events are rank-major, phase-major within a rank
    start_flag = np.ones(n, bool)
    start_flag[1:] = (rank[1:] != rank[:-1]) | (phase[1:] != phase[:-1])
    starts = np.flatnonzero(start_flag)
    lengths = np.diff(np.append(starts, n))
    bw = w[phase[starts]]
    out_len = lengths * bw
    total = int(out_len.sum())
    if total > max_events:
        raise SigexError(f"{trace.name}: unrolling its weights {weights} gives {total:,} events (more "
                         f"than {max_events:,}); replay it by phases (PET) instead")
    block = np.repeat(np.arange(len(starts)), out_len)
    out_off = np.concatenate([[0], np.cumsum(out_len)[:-1]])
    j = np.arange(total) - out_off[block]
    src = starts[block] + j % lengths[block]
    new = {c: v[src] for c, v in ev.items()}
    # sequence numbers restart per rank
    r_out = new["rank"].astype(np.int64)
    first = np.ones(total, bool)
    first[1:] = r_out[1:] != r_out[:-1]
    rs = np.maximum.accumulate(np.where(first, np.arange(total), 0))
    new["seq"] = (np.arange(total) - rs).astype(ev["seq"].dtype)
    counts = np.bincount(r_out, minlength=trace.nprocs)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    # completions (each wait's rows) and lists (a neighbourhood collective's sources and
    # destinations, a v-collective's bytes per peer, post/start groups) go with every copy
    # of their event, with the copy's seq; a list row's values are shared, its start stays
    comp = trace.completions
    new_comp = comp
    if len(comp["rank"]):
        rows, out_ev = _copied_rows(rank, ev["seq"], src, total, comp["rank"], comp["seq"])
        new_comp = {c: v[rows] for c, v in comp.items()}
        new_comp["seq"] = new["seq"][out_ev].astype(comp["seq"].dtype)
    lists = trace.lists
    new_lists = lists
    if lists is not None and len(lists.get("rank", ())):
        rows, out_ev = _copied_rows(rank, ev["seq"], src, total, np.asarray(lists["rank"]),
                                    np.asarray(lists["seq"]))
        new_lists = {c: (np.asarray(v)[rows] if c != "values" else v) for c, v in lists.items()}
        new_lists["seq"] = new["seq"][out_ev].astype(np.asarray(lists["seq"]).dtype)
    meta = dict(trace.meta)
    meta["phase_weights"] = [1] * len(w)
    meta["unrolled_weights"] = list(map(int, w))
    return dataclasses.replace(trace, meta=meta, events=new, rank_offsets=offsets, completions=new_comp,
                               lists=new_lists)


def _copied_rows(rank: np.ndarray, seq: np.ndarray, src: np.ndarray, total: int, row_rank: np.ndarray,
                 row_seq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows that belong to events (by rank and seq), repeated with every copy of their
    event (output event i is a copy of event ``src[i]``): the rows' indices in output
    order, and the output event of each."""
    n = len(rank)
    S = int(seq.max()) + 1
    key_ev = rank.astype(np.int64) * S + seq.astype(np.int64)
    key_row = row_rank.astype(np.int64) * S + row_seq.astype(np.int64)
    order = np.argsort(key_ev, kind="stable")
    ev_of_row = order[np.clip(np.searchsorted(key_ev[order], key_row), 0, n - 1)]
    row_order = np.argsort(ev_of_row, kind="stable")
    first = np.searchsorted(ev_of_row[row_order], np.arange(n))
    k = np.bincount(ev_of_row, minlength=n)[src]
    out_ev = np.repeat(np.arange(total), k)
    within = np.arange(int(k.sum())) - np.repeat(np.cumsum(k) - k, k)
    return row_order[first[src[out_ev]] + within], out_ev


@dataclasses.dataclass(frozen=True)
class SteadyState:
    """The runtime of a weighted trace from a few repetitions of each phase."""

    runtime: float  # estimated full-run time
    per_repetition: tuple[float, ...]  # steady time per repetition of each phase (s)
    repetitions: tuple[tuple[int, ...], tuple[int, ...]]  # the two replays' repetitions per phase
    exact: bool  # every phase was replayed with all its repetitions
    #: phases replayed for fewer repetitions than ``reps`` to keep the replays within
    #: ``max_events`` (those left at one repetition cost their isolated time, as in PET)
    reduced: tuple[int, ...] = ()


#: the most events the two steady-state replays may unroll (each replayed event takes
#: ~200 bytes in the Program and the engine: 20 M events, ~4 GB)
STEADY_MAX_EVENTS = 20_000_000


def steady_repetitions(events: np.ndarray, weights: np.ndarray, reps: int = 4,
                       max_events: int = STEADY_MAX_EVENTS) -> tuple[np.ndarray, np.ndarray]:
    """The repetitions (c1, c2) of each phase for :func:`replay_steady`: ``reps`` and ``2 reps``
    (its weight where smaller), fewer for the phases with the most events per repetition
    (``events``, all ranks) while the larger replay would unroll more than ``max_events``:
    halved in turn down to one and two, then one alone (no growth measured: the phase's
    isolated repetition stands for every one). A trace larger than ``max_events`` by itself
    is replayed with one repetition of each phase."""
    events = np.asarray(events, np.int64)
    w = np.asarray(weights, np.int64)
    r = np.full(len(w), max(int(reps), 1), np.int64)
    c2 = np.minimum(w, 2 * r)
    while int(events @ c2) > max_events:
        cost = np.where(c2 > 1, events * c2, -1)
        k = int(np.argmax(cost))
        if cost[k] < 0:
            break
        if r[k] > 1:
            r[k] //= 2
            c2[k] = min(int(w[k]), 2 * int(r[k]))
        else:
            c2[k] = 1
    c1 = np.minimum(np.minimum(w, r), c2)
    return c1, c2


def replay_steady(trace: Trace, machine, *, reps: int = 4, collectives: str = "algorithms",
                  max_events: int = STEADY_MAX_EVENTS, once=None) -> SteadyState:
    """Replay each phase ``reps`` and ``2 reps`` times (its weight if smaller) and extrapolate
    linearly in the repetitions: the steady time per repetition of each phase, which is what
    a pipelined phase costs once its pipeline is full, where PET's isolated repetition pays
    the fill and drain every time (the design's "a few repetitions until steady").

    The runtime is T(2 reps) + sum_k (W_k - 2 reps_k) * m_k, with m_k the growth of phase
    k's time (the slowest rank's) per added repetition. Exact when every weight <= 2 reps.
    The phases with the most events get fewer repetitions where the larger replay would
    unroll more than ``max_events`` (:func:`steady_repetitions`; :attr:`SteadyState.reduced`
    names them): MPB's all-pairs transposes at P = 1,000 hold 16.5 M events per repetition,
    and 8 of them took the whole memory of a 24 GB machine. ``once``: the caller's replay
    of ``trace`` as it is (one repetition of each phase), taken where that is all the
    budget allows instead of replaying it again.
    """
    from .engine import replay
    from .program import Program

    w = np.asarray(trace.meta.get("phase_weights") or [], np.int64)
    if not len(w):
        r = replay(Program.from_trace(trace), machine, collectives=collectives)
        return SteadyState(r.runtime, (), ((), ()), True)
    per_phase = np.bincount(np.asarray(trace.events["phase"], np.int64), minlength=len(w))[:len(w)]
    c1, c2 = steady_repetitions(per_phase, w, reps, max_events)
    full = np.minimum(w, 2 * max(int(reps), 1))
    reduced = tuple(int(k) for k in np.flatnonzero(c2 < full))
    r2 = (once if once is not None and np.all(c2 == 1) else
          replay(Program.from_trace(unroll(trace, weights=c2)), machine, collectives=collectives))
    r1 = r2 if np.array_equal(c1, c2) else replay(Program.from_trace(unroll(trace, weights=c1)), machine,
                                                  collectives=collectives)
    t1 = r1.phase_time.max(axis=1)
    t2 = r2.phase_time.max(axis=1)
    grow = c2 - c1
    m = np.where(grow > 0, (t2 - t1) / np.maximum(grow, 1), t2 / np.maximum(c2, 1))
    est = r2.runtime + float(np.sum((w - c2) * np.maximum(m, 0.0)))
    return SteadyState(runtime=est, per_repetition=tuple(map(float, m)),
                       repetitions=(tuple(map(int, c1)), tuple(map(int, c2))), exact=bool(np.all(w <= c2)),
                       reduced=reduced)
