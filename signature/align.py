"""Aligning the ranks' iterations into global iterations (step 4 of ``phases.py``).

Every rank cuts its own stream (:mod:`signature.iterations`). Where all ranks cut a
loop into the same number of iterations, iteration j of every rank is global iteration
j. Where they do not — a rank class whose own unit is a quarter of the step, a PME rank
whose neighbour-search step holds two of its units, a rank that skipped a call — the
ranks are aligned by the communication they share, as the program itself synchronises
them: the k-th message from rank a to rank b (per communicator) is the k-th receive of
b from a, and the i-th collective call on a communicator is the same call on every
member. The coarsest iteration count that a quarter of the ranks share (within 5%)
defines the global iterations (its most common value's first rank is the reference);
every other rank, once one of its partners is aligned, puts each of its iterations in
the global iteration that most of its linked calls fall in (its median), and where an
iteration has no such call, where its midpoint in time falls; a rank whose own count
differs is cut where its linked calls say each global iteration begins, and placed
again once every rank is, by its messages with the ranks whose count is the
reference's (its loop then ends where those messages end). A rank whose own count is
the reference's but whose iterations run from the middle of one step to the middle of
the next (more than a quarter of its calls linked to those ranks fall in another of
their iterations than most of its iteration's calls do: a PME rank) is cut by its links
too, and every rank placed again. Where every rank cuts the
same number of iterations, a rank that most of its partners disagree with (a quarter of
their messages cross an iteration boundary) is cut elsewhere in the step (rotated) and
is cut again by its messages (``_unrotate``).

A loop is the program's only if the ranks run it together: a quarter of them (and at
least two: the ranks of a class) cut it into the same number of iterations (within 5%),
or all their counts lie within a factor 1.5; and on most ranks, most of its events lie
in iterations whose shape recurs (three times, or next to itself), and not in polls (a rank that polls until
a message arrives waits; how often it polls is timing). A loop whose counts scatter (the rounds of a data-driven update loop that
each rank polls through at its own pace) or whose iterations all differ (repeats that
occur by chance in an aperiodic stream) is no loop: its stretch of the run is a
weight-1 part.

Before any of this, :func:`global_sections` cuts the run into *sections* at the global
synchronisation between a benchmark suite's kernels: collective calls that every rank
makes on a communicator holding all ranks, around a long stretch of other traffic that
the sequence of such calls does not repeat (a kernel that runs once, between barriers),
and, in such a run, wherever the pattern of those calls changes (:func:`_pattern_regions`:
a kernel's repetitions, each bracketed by collectives, are a section whose iterations
begin at the repeated unit's first collective). Loops are then looked for inside each
other section (``phases.py``).
"""

from __future__ import annotations

import numpy as np

from .iterations import RankSegments, _canonical_comms, _covered, _runs
from .trace import OP_CODE, OPS, RECV_OPS, SEND_OPS, SENDRECV_OPS, Trace

__all__ = ["align_ranks", "message_links", "global_sections"]

_COLLECTIVE = [OP_CODE[n] for n in OPS if n.lstrip("I") in (
    "Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Scatter", "Scatterv",
    "Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw", "Reduce_scatter",
    "Reduce_scatter_block", "Scan", "Exscan")]


#: a stretch between two global collectives is long when it holds this many events (median
#: over ranks) and this share of the median rank's events
SECTION_MIN_EVENTS = 64
SECTION_MIN_SHARE = 0.01
#: the longest loop of global collectives (calls per iteration) whose repeats make a long
#: stretch periodic (a thermo output every k steps: not a kernel boundary)
SECTION_MAX_PERIOD = 32
#: a run of a repeated pattern of global collectives is a section when it holds this
#: many events (median over ranks; its collectives count)
SECTION_LOOP_EVENTS = 3
#: ranks (spread over the run's) whose streams decide whether a stretch is periodic
SECTION_VOTERS = 16
#: a loop is the program's when this share of the ranks (and at least two) cut it into
#: the same number of iterations, within ``LOOP_COUNT_TOLERANCE``, or when all counts lie
#: within a factor ``LOOP_COUNT_SPREAD``; and when its iterations repeat on more than
#: half of the ranks
LOOP_AGREEMENT = 0.25
LOOP_COUNT_TOLERANCE = 0.05
LOOP_COUNT_SPREAD = 1.5


def _nth(keys: np.ndarray) -> np.ndarray:
    """For each element, how many equal keys precede it (in order)."""
    order = np.argsort(keys, kind="stable")
    ks = keys[order]
    new = np.concatenate([[True], ks[1:] != ks[:-1]]) if len(ks) else np.zeros(0, bool)
    idx = np.arange(len(ks))
    out = np.empty(len(ks), np.int64)
    out[order] = idx - np.maximum.accumulate(np.where(new, idx, 0))
    return out


def message_links(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """``(send_event, recv_event)`` index pairs of the point-to-point messages: the k-th
    send from a to b on a communicator with the k-th receive of b from a on it."""
    ev = trace.events
    op = ev["op"]
    rank = ev["rank"].astype(np.int64)
    comm = ev["comm"].astype(np.int64) + 1
    P = trace.nprocs
    C = int(comm.max()) + 1 if len(comm) else 1
    s_idx = np.flatnonzero(np.isin(op, SEND_OPS) & (ev["peer"] >= 0))
    r_src = np.where(np.isin(op, RECV_OPS), ev["peer"], np.where(np.isin(op, SENDRECV_OPS), ev["recv_peer"], -1))
    r_idx = np.flatnonzero(r_src >= 0)
    s_key = (rank[s_idx] * P + ev["peer"][s_idx]) * C + comm[s_idx]
    r_key = (r_src[r_idx].astype(np.int64) * P + rank[r_idx]) * C + comm[r_idx]
    big = int(max(len(s_idx), len(r_idx))) + 1
    s_full = s_key * big + _nth(s_key)
    r_full = r_key * big + _nth(r_key)
    common, si, ri = np.intersect1d(s_full, r_full, assume_unique=True, return_indices=True)
    return s_idx[si], r_idx[ri]


def _collective_keys(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """``(event, key)`` of every collective call: the key is (communicator, instance)."""
    ev = trace.events
    idx = np.flatnonzero(np.isin(ev["op"], _COLLECTIVE) & (ev["comm"] >= 0))
    rank = ev["rank"][idx].astype(np.int64)
    comm = ev["comm"][idx].astype(np.int64)
    inst = _nth(comm * trace.nprocs + rank)
    return idx, comm * (1 << 40) + inst


def align_ranks(trace: Trace, segs: list[RankSegments], cache: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Global segments from the ranks' own cuts: ``(bounds, loop)``, ``bounds[r]`` the
    (G+1,) cut positions of rank r in its stream without Init and Finalize, ``loop[g]``
    the loop of global segment g (-1 for a weight-1 part). Ranks that find a different
    number of loops are cut as one loop each; a loop whose iteration counts scatter over
    the ranks is dropped (:func:`_scattered`). ``segs`` may cover one section of the run
    (their bounds start where it starts; ``bounds[:, 0]`` is then 0 all the same).
    ``cache`` keeps the message links between calls on the same trace."""
    P = trace.nprocs
    cache = {} if cache is None else cache
    irregular = sum(_irregular(s) or s.polling for s in segs)
    if len({s.n_loops for s in segs}) > 1:
        for s in segs:  # the parts between a rank's loops join the iteration before them
            its = np.flatnonzero(s.loop >= 0)
            if s.n_loops > 1:
                k = np.arange(len(s.loop))
                inner = (s.loop < 0) & (k > its[0]) & (k < len(s.loop) - 1)
                keep = np.concatenate([~inner, [True]])
                s.bounds, s.loop = s.bounds[keep], np.where(s.loop[keep[:-1]] >= 0, 0, -1)
    for L in reversed(range(max((s.n_loops for s in segs), default=0))):
        if _scattered(np.array([s.iterations(L) for s in segs])) or irregular > 0.5 * P:
            for s in segs:
                _drop_loop(s, L)
    links = cache.get("links")
    per_rank: list[list[int]] = [[0] for _ in range(P)]
    cols: list[int] = [-1]
    for L in range(max((s.n_loops for s in segs), default=0)):
        counts = np.array([s.iterations(L) for s in segs])
        if np.all(counts == counts[0]):
            own, lows = [], []
            for s in segs:
                its = np.flatnonzero(s.loop == L)
                own.append(np.concatenate([s.bounds[its], [s.bounds[its[-1] + 1]]]).astype(np.int64))
                lows.append(int(s.bounds[its[0] - 1]) if its[0] > 0 else int(s.bounds[0]))
            # (ranks that all begin their iterations with the same call are cut alike: the
            # message links are only needed where they do not)
            first_ops = {int(trace.events["op"][min(int(trace.rank_offsets[r]) + 1 + int(c[0]),
                                                   int(trace.rank_offsets[r + 1]) - 1)])
                         for r, c in enumerate(own)}
            if P > 2 and len(first_ops) > 1:
                if links is None:
                    links = cache["links"] = (*message_links(trace), *_collective_keys(trace))
                own = _unrotate(trace, own, lows, links)
            for r in range(P):
                per_rank[r] += own[r].tolist()
            cols += [L] * int(counts[0]) + [-1]
            continue
        if links is None:
            links = cache["links"] = (*message_links(trace), *_collective_keys(trace))
        cuts = _align_loop(trace, segs, L, counts, links)
        for r in range(P):
            per_rank[r] += cuts[r]
        cols += [L] * (len(cuts[0]) - 1) + [-1]
    for r, s in enumerate(segs):
        per_rank[r].append(int(s.bounds[-1]))
    return np.array(per_rank, np.int64), np.array(cols, np.int64)


#: a pair of ranks disagrees on where the iterations begin when this share of the messages
#: between them is sent in one iteration and received in another; a rank disagrees with
#: more than ``ROTATED_PARTNERS`` of its partners is cut elsewhere in its step (rotated)
ROTATED_PAIR_SHARE = 0.25
ROTATED_PARTNERS = 0.5


def _unrotate(trace: Trace, cuts: list[np.ndarray], lows: list[int],
              links: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """Ranks that cut a loop into as many iterations as the others, but at another point of
    the step (a PME rank whose own iteration runs from its FFT of one step to its receive
    of the next), are cut again where their messages with the other ranks say each global
    iteration begins.

    ``cuts[r]``: the (N+1,) iteration starts and loop end of rank r, in its stream without
    Init; ``lows[r]`` where the part before its loop begins (a first iteration may start
    earlier, not before it). A rank is *rotated* when more than ``ROTATED_PARTNERS`` of the ranks it exchanges
    messages with disagree with it (``ROTATED_PAIR_SHARE`` of their messages cross an
    iteration boundary). Nothing changes when no rank is, or when more than half of the
    ranks are (a pipeline whose messages always arrive one iteration later: the program's
    own shift, not a rank cut elsewhere). Each rotated rank is cut before its first call
    linked to each global iteration of the other ranks (where it has one)."""
    P = trace.nprocs
    ro = trace.rank_offsets
    send_ev, recv_ev = links[0], links[1]
    if not send_ev.size:
        return cuts
    n_ev = len(trace.events["op"])
    it = np.full(n_ev, -1, np.int64)
    for r, c in enumerate(cuts):
        base = int(ro[r]) + 1
        a, b = base + int(c[0]), base + int(c[-1])
        it[a:b] = np.searchsorted(c, np.arange(int(c[0]), int(c[-1])), side="right") - 1
    ok = (it[send_ev] >= 0) & (it[recv_ev] >= 0)
    s_ev, r_ev = send_ev[ok], recv_ev[ok]
    rank = trace.events["rank"].astype(np.int64)
    a, b = rank[s_ev], rank[r_ev]
    pair = np.minimum(a, b) * P + np.maximum(a, b)
    off = (it[s_ev] != it[r_ev]).astype(float)
    total = np.bincount(pair, minlength=P * P)
    apart = np.bincount(pair, weights=off, minlength=P * P)
    has = total > 0
    disagree = has & (apart > ROTATED_PAIR_SHARE * np.maximum(total, 1))
    has, disagree = has.reshape(P, P), disagree.reshape(P, P)
    has, disagree = has | has.T, disagree | disagree.T
    partners = has.sum(axis=1)
    rotated = (partners > 0) & (disagree.sum(axis=1) > ROTATED_PARTNERS * partners)
    if not rotated.any() or rotated.sum() > P / 2:
        return cuts
    out = list(cuts)
    for r in np.flatnonzero(rotated).tolist():
        base = int(ro[r]) + 1
        c = cuts[r]
        N = len(c) - 1
        mine_s = (a == r) & ~rotated[b]
        mine_r = (b == r) & ~rotated[a]
        pos = np.concatenate([s_ev[mine_s], r_ev[mine_r]]) - base
        g = np.concatenate([it[r_ev[mine_s]], it[s_ev[mine_r]]])
        if not pos.size:
            continue
        order = np.argsort(pos, kind="stable")
        p_s, g_s = pos[order], np.maximum.accumulate(g[order])
        at = np.searchsorted(g_s, np.arange(N), side="left")
        known = at < len(p_s)
        known[1:] &= at[1:] > at[:-1]  # a global iteration with a linked call of its own
        new = c[:-1].copy()
        new[known] = p_s[at[known]]
        new = np.maximum.accumulate(np.clip(new, lows[r], c[-1]))
        out[r] = np.concatenate([new, [c[-1]]]).astype(np.int64)
    return out


def _scattered(counts: np.ndarray) -> bool:
    """Whether a loop's iteration counts (per rank) scatter: of the ranks that run it, no
    quarter (and no two) cut it into the same number of iterations (within
    ``LOOP_COUNT_TOLERANCE``), and the counts spread over more than ``LOOP_COUNT_SPREAD``.
    Rank classes keep their loop: the ranks of a class agree (two pools of k-points, a
    process row and a process column)."""
    c = np.sort(counts[counts > 0])
    if len(c) <= 1 or c[-1] <= LOOP_COUNT_SPREAD * c[0]:
        return False
    together = np.searchsorted(c, c * (1 + LOOP_COUNT_TOLERANCE), side="right") - np.arange(len(c))
    return int(together.max()) < max(2, LOOP_AGREEMENT * len(c))


def _irregular(s: RankSegments) -> bool:
    """Whether a rank's iterations hardly repeat: less than half of their events lie in
    iterations whose shape occurs three times or more, or is that of one of the two
    iterations before or after. A program's loop runs the same iteration again and again
    (with variants every k steps, or two that alternate); repeats that a data-driven
    stream makes by chance leave iterations of every length, most of them unique."""
    its = np.flatnonzero(s.loop >= 0)
    if not its.size or s.given:
        return False
    shapes = s.shape[its]
    size = (s.bounds[its + 1] - s.bounds[its]).astype(float)
    _, inverse, counts = np.unique(shapes, return_inverse=True, return_counts=True)
    alike = counts[np.asarray(inverse).reshape(-1)] >= 3
    for d in (1, 2):
        same = shapes[d:] == shapes[:-d]
        alike[d:] |= same
        alike[:-d] |= same
    return float(size[alike].sum()) < 0.5 * float(size.sum())


def _drop_loop(s: RankSegments, L: int) -> None:
    """Loop L's iterations become part of the weight-1 part around them (in place)."""
    loop = np.where(s.loop == L, -1, np.where(s.loop > L, s.loop - 1, s.loop))
    keep = np.ones(len(s.bounds), bool)
    keep[1:-1] = ~((loop[1:] < 0) & (loop[:-1] < 0))
    seg_keep = keep[:-1]
    if len(s.shape) == len(s.loop):
        s.shape, s.exact = s.shape[seg_keep], s.exact[seg_keep]
    s.bounds, s.loop = s.bounds[keep], loop[seg_keep]


def _align_loop(trace: Trace, segs: list[RankSegments], L: int, counts: np.ndarray,
                links: tuple[np.ndarray, ...]) -> list[list[int]]:
    """Per rank, the cut positions of loop L's global iterations and its end."""
    P = trace.nprocs
    ro = trace.rank_offsets
    t_start = trace.events["t_start"]
    send_ev, recv_ev, coll_ev, coll_key = links
    # the reference: the coarsest iteration count that a quarter of the ranks share (a
    # class whose own unit is a fraction of the step is merged into it), else the most
    # common one
    vals, freq = np.unique(counts[counts > 0], return_counts=True)
    near = np.array([np.sum(freq[(vals >= v) & (vals <= 1.05 * v)]) for v in vals])
    low = vals[near >= max(2, P / 4)]
    lo = low.min() if low.size else vals[np.argmax(freq)]
    band = (vals >= lo) & (vals <= 1.05 * lo)
    n_ref = int(vals[band][np.argmax(freq[band])])
    q = int(np.flatnonzero(counts == n_ref)[0])
    g_ev = np.full(len(t_start), -1, np.int64)  # global iteration of each aligned event
    # each collective instance (its key) numbered densely; the global iteration of the
    # first aligned call of each, -1 while none is
    keys_u, coll_id = np.unique(coll_key, return_inverse=True)
    coll_id = coll_id.reshape(-1)
    coll_g = np.full(len(keys_u), -1, np.int64)

    def span(r: int) -> tuple[np.ndarray, np.ndarray]:
        its = np.flatnonzero(segs[r].loop == L)
        return segs[r].bounds[its], segs[r].bounds[its + 1]

    def mark(r: int, cut: np.ndarray) -> None:
        base = int(ro[r]) + 1
        a, b = int(cut[0]), int(cut[-1])
        g_ev[base + a:base + b] = np.searchsorted(cut, np.arange(a, b), side="right") - 1
        sel = np.flatnonzero((coll_ev >= base + a) & (coll_ev < base + b))
        ids, first = np.unique(coll_id[sel], return_index=True)  # each instance's first call here
        new = coll_g[ids] < 0
        coll_g[ids[new]] = g_ev[coll_ev[sel[first[new]]]]

    st_q, en_q = span(q)
    T = t_start[np.minimum(int(ro[q]) + 1 + st_q, int(ro[q + 1]) - 1)]
    out: list[list[int] | None] = [None] * P
    cut_q = np.concatenate([st_q, [en_q[-1]]])
    out[q] = cut_q.tolist()
    mark(q, cut_q)
    # every rank's linked calls, once: its position, and the partner event (p2p) or the
    # collective key
    rank_of_send = trace.events["rank"][send_ev]
    rank_of_recv = trace.events["rank"][recv_ev]
    rank_of_coll = trace.events["rank"][coll_ev]
    p2p: list[tuple[np.ndarray, np.ndarray]] = []
    coll: list[tuple[np.ndarray, np.ndarray]] = []
    for r in range(P):
        base = int(ro[r]) + 1
        ms, mr, mc = rank_of_send == r, rank_of_recv == r, rank_of_coll == r
        p2p.append((np.concatenate([send_ev[ms], recv_ev[mr]]) - base,
                    np.concatenate([recv_ev[ms], send_ev[mr]])))
        coll.append((coll_ev[mc] - base, coll_id[mc]))
    rank_ev = trace.events["rank"]

    def linked(r: int, every: bool = False, anchors: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Rank r's calls linked to aligned ones: their positions and global iterations
        (``every``: all its linked calls, -1 where the partner is not in the loop;
        ``anchors``: only messages with these ranks, if it has any)."""
        pos_p, partner = p2p[r]
        if anchors is not None:
            mine = anchors[rank_ev[partner]]
            if mine.any():
                pos, g = pos_p[mine], g_ev[partner[mine]]
                return (pos, g) if every else (pos[g >= 0], g[g >= 0])
        pos_c, ids = coll[r]
        g_c = coll_g[ids]
        pos = np.concatenate([pos_p, pos_c])
        g = np.concatenate([g_ev[partner], g_c])
        return (pos, g) if every else (pos[g >= 0], g[g >= 0])

    anchors: np.ndarray | None = None
    by_links: set[int] = set()  # ranks of the reference's count cut where their links say

    def place(r: int, pos: np.ndarray, g: np.ndarray, final: bool = False) -> None:
        st, en = span(r)
        if not st.size:  # a rank without this loop: its iterations are empty, at its end
            out[r] = [int(segs[r].bounds[-1])] * (n_ref + 1)
            return
        # only calls inside the rank's part of the run (its section) say where its global
        # iterations begin (a receive from any source is not linked: a message count that
        # skips it can pair a call of one kernel with one of another)
        within = (pos >= segs[r].bounds[0]) & (pos < segs[r].bounds[-1])
        pos, g = pos[within], g[within]
        base = int(ro[r]) + 1
        mid = 0.5 * (t_start[np.minimum(base + st, int(ro[r + 1]) - 1)]
                     + t_start[np.minimum(base + en, int(ro[r + 1]) - 1)])
        g_it = np.clip(np.searchsorted(T, mid, side="right") - 1, 0, n_ref - 1)
        if pos.size:  # the median global iteration of each local iteration's linked calls
            it = np.searchsorted(st, pos, side="right") - 1
            inside = (it >= 0) & (pos < en[np.maximum(it, 0)])
            it, gg = it[inside], g[inside]
            order = np.lexsort((gg, it))
            it, gg = it[order], gg[order]
            first = np.searchsorted(it, np.arange(len(st)), side="left")
            last = np.searchsorted(it, np.arange(len(st)), side="right")
            has = last > first
            g_it[has] = gg[(first[has] + last[has] - 1) // 2]
        g_it = np.maximum.accumulate(np.clip(g_it, 0, n_ref - 1))
        first = np.searchsorted(g_it, np.arange(n_ref), side="left")
        cut = np.concatenate([st, [en[-1]]])[first]
        if pos.size and (len(st) != n_ref or r in by_links):
            # where linked calls say where a global iteration begins, cut there: a rank
            # whose own unit is a fraction of the step is cut where the step begins
            order = np.argsort(pos, kind="stable")
            p_s = pos[order]
            g_s = np.maximum.accumulate(g[order])
            at = np.searchsorted(g_s, np.arange(n_ref), side="left")
            known = at < len(p_s)
            known[1:] &= at[1:] > at[:-1]  # a global iteration with a linked call of its own
            cut[known] = p_s[at[known]]
            cut = np.maximum.accumulate(cut)
            if not known[0]:
                cut[0] = st[0]
            # (else the rank's own first iteration may hold a step that the others run
            # before their loop: a PME rank's first step, the others' set-up step)
        else:
            cut[0] = st[0]
        end = int(en[-1])
        if final and pos.size and (len(st) != n_ref or r in by_links):
            # the loop ends on this rank where its calls linked to the others' loop end: a
            # call after them linked to the others' next part (the last step, run after
            # their loop) is the next part's too
            every, g_all = linked(r, every=True, anchors=anchors)
            last = int(pos.max())
            after = every[(g_all < 0) & (every > last) & (every < end)]
            if after.size:
                end = int(after.min())
        cut = np.minimum(np.concatenate([cut, [end]]), end)
        if out[r] is not None:  # placed again: forget the first placement
            g_ev[base + int(out[r][0]):base + int(out[r][-1])] = -1
        out[r] = cut.tolist()
        mark(r, cut)

    def place_all() -> list[int]:
        """Every rank placed, the rank with the most calls linked to aligned ones next."""
        todo = [r for r in range(P) if r != q]
        done: list[int] = []
        while todo:
            best = None
            for r in todo:
                pos, g = linked(r)
                if best is None or len(pos) > best[1]:
                    best = (r, len(pos), pos, g)
            r, _, pos, g = best
            todo.remove(r)
            done.append(r)
            place(r, pos, g)
        return done

    done = place_all()
    # a rank cut into as many iterations as the reference but at another call of the step
    # (a PME rank whose own cycle runs from the middle of one step's FFT to the middle of
    # the next's, its first iteration holding the end of the set-up's step): its calls
    # linked to the others that cut the loop so fall in two of their iterations
    # (``_straddles``); it is cut where its links say, and every rank placed again (the
    # ranks placed after it followed its own cut)
    same = np.array([s.iterations(L) == n_ref for s in segs])
    by_links.update(r for r in done if same[r] and _straddles(
        *linked(r, anchors=same & (np.arange(P) != r)), *span(r)))
    if by_links:
        g_ev[:] = -1
        coll_g[:] = -1
        out = [None] * P
        out[q] = cut_q.tolist()
        mark(q, cut_q)
        done = place_all()
    # ranks cut where their links say (their own count is not the reference's) are placed
    # again once every rank is, by their messages with the ranks that cut the loop as the
    # reference does: a rank placed early saw only some of its partners (a PME rank whose
    # FFT partner was aligned before the particle ranks that send to it), and ranks of its
    # own class say nothing the class's own cut did not (where its loop ends)
    anchors = np.array([s.iterations(L) == n_ref and r not in by_links for r, s in enumerate(segs)])
    for r in done:
        # (only where most ranks cut the loop as the reference does: a class beside them,
        # not counts that scatter, as a data-driven loop's; and only ranks that exchange
        # messages with them: where collectives alone link them, the first placement stands)
        if ((0 < segs[r].iterations(L) != n_ref or r in by_links) and anchors.sum() > P / 2
                and anchors[rank_ev[p2p[r][1]]].any()):
            place(r, *linked(r, anchors=anchors), final=True)
    return out  # type: ignore[return-value]


def _straddles(pos: np.ndarray, g: np.ndarray, st: np.ndarray, en: np.ndarray) -> bool:
    """Whether more than ``ROTATED_PAIR_SHARE`` of a rank's linked calls (``pos``, linked
    to global iterations ``g``) lie in one of its own iterations (``st``, ``en``: their
    starts and ends) with another global iteration than most of that iteration's linked
    calls: its iterations run from the middle of one step to the middle of the next (a
    rank cut a call or two away from the others holds a few such calls; the common cut
    then rotates it)."""
    it = np.searchsorted(st, pos, side="right") - 1
    inside = (it >= 0) & (pos < en[np.maximum(it, 0)])
    it, g = it[inside], g[inside]
    if not it.size:
        return False
    order = np.lexsort((g, it))
    it, g = it[order], g[order]
    first = np.searchsorted(it, it, side="left")
    last = np.searchsorted(it, it, side="right")
    median = g[(first + last - 1) // 2]
    return bool(np.mean(g != median) > ROTATED_PAIR_SHARE)


def _world_collectives(trace: Trace) -> np.ndarray | None:
    """(P, m) event index of every rank's m collective calls on communicators that hold
    all ranks (in its own order), or None when the ranks do not make the same calls."""
    ev = trace.events
    P = trace.nprocs
    comms = trace.comms
    is_coll = np.zeros(256, bool)
    is_coll[_COLLECTIVE] = True
    world = np.zeros(len(comms) + 1, bool)  # comm ids -1 (none) land on the last entry
    world[:len(comms)] = (comms.size == P) & ~comms.inter
    coll = np.flatnonzero(is_coll[ev["op"]] & world[np.minimum(ev["comm"], len(comms))])
    count = np.bincount(ev["rank"][coll], minlength=P)
    if not coll.size or np.any(count != count[0]):
        return None
    idx = coll.reshape(P, -1)
    if np.any(ev["op"][idx] != ev["op"][idx[:1]]):
        return None
    return idx


def _covered_by_repeats(tok: np.ndarray, max_period: int) -> np.ndarray:
    """Positions of ``tok`` inside a tandem repeat (two copies or more) of a period up to
    ``max_period``."""
    n = len(tok)
    out = np.zeros(n, bool)
    for p in range(1, min(max_period, n // 2) + 1):
        starts, lengths = _runs(tok[p:] == tok[:-p])
        ok = lengths >= p  # a run of m >= p matches from s: copies over s .. s + m + p - 1
        out |= _covered(n, starts[ok], starts[ok] + lengths[ok] + p)
    return out


def _run_from(eq: np.ndarray) -> np.ndarray:
    """For each position, how many of the following flags (itself included) are True in a row."""
    starts, lengths = _runs(eq)
    out = np.zeros(len(eq) + 1, np.int64)
    if starts.size:
        within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        out[np.repeat(starts, lengths) + within] = np.repeat(lengths, lengths) - within
    return out[:-1]


def _pattern_regions(coll_tok: np.ndarray, stretch_key: np.ndarray,
                     edge: np.ndarray) -> list[tuple[int, int, int]]:
    """``(a, b, q)``: the runs of global collectives ``a:b`` that repeat a unit of q
    collectives (with the stretches after them) three times or more, parsed from the
    left: at each collective the unit of up to ``SECTION_MAX_PERIOD`` collectives whose
    repeats cover most (the shortest of those) is taken, and the parse goes on after its
    last copy; collectives no such repeat starts at are left out. ``stretch_key[j]``: the
    calls of the stretch before collective j (on any rank: rank-independent); ``edge[j]``
    where collective j lies (m: the end; median over ranks): a run is kept when it holds
    ``SECTION_LOOP_EVENTS`` events or more (else the parse goes on at the next collective)."""
    m = len(coll_tok)
    if m < 3:
        return []
    seq = np.empty(2 * m, np.uint64)
    seq[0::2] = coll_tok
    seq[1::2] = stretch_key[1:]
    q_max = min(SECTION_MAX_PERIOD, m // 3)
    cover = np.zeros((q_max + 1, m), np.int64)  # collectives the repeats from j of unit q cover
    for q in range(1, q_max + 1):
        p = 2 * q
        run = _run_from(seq[p:] == seq[:-p])[0::2]  # from collectives only
        copies = (run + p) // p
        cover[q, :len(run)] = np.where(copies >= 3, copies * q, 0)
    best = cover.max(axis=0)
    unit = np.argmax(cover == best[None, :], axis=0)  # the shortest unit that covers most
    out: list[tuple[int, int, int]] = []
    j = 0
    while j < m:  # one step per region or per collective left out (not per event)
        if best[j] and edge[j + int(best[j])] - edge[j] >= SECTION_LOOP_EVENTS:
            out.append((j, j + int(best[j]), int(unit[j])))
            j += int(best[j])
        else:
            j += 1
    return out


def global_sections(trace: Trace, with_loops: bool = False):
    """Per rank, where the run's sections begin and end: ``(P, S+1)`` positions in each
    rank's stream without Init and Finalize (``[:, 0]`` is 0, ``[:, -1]`` its length), or
    None when the run is one section.

    The global collectives (calls on a communicator that holds every rank, made by every
    rank in the same order) cut each rank's stream into stretches. A stretch is *long*
    when it holds at least ``SECTION_MIN_EVENTS`` events and ``SECTION_MIN_SHARE`` of the
    rank's run (median over ranks), and *periodic* when, on most ranks, the sequence of
    global collectives and stretches (each stretch represented by the set of calls it
    makes) repeats around it: the thermo reduction of every 50th step of a time-stepping
    loop (up to ``SECTION_VOTERS`` ranks, spread over the run's, vote). A long stretch that is not periodic is a kernel that runs once (a benchmark
    suite's RandomAccess between its barriers): it is a section of its own, opened by the
    global collective before it; what lies between two such kernels is a section too.
    Two kernels at least are needed: a run with one is left whole. Such a run is also cut
    where the pattern of global collectives changes (:func:`_pattern_regions`);
    ``with_loops``: also return, per section, None or the (P, k+1) positions where the k
    repetitions of a repeated pattern begin and the last ends.
    """
    idx = _world_collectives(trace)
    if idx is None:
        return (None, None) if with_loops else None
    ev = trace.events
    P, m = idx.shape
    ro = trace.rank_offsets
    n = np.diff(ro) - 2
    pos = idx - (ro[:-1] + 1)[:, None]
    edges = np.concatenate([np.full((P, 1), -1), pos, n[:, None]], axis=1)
    lengths = np.diff(edges, axis=1) - 1  # (P, m+1): stretch j lies before collective j
    med = np.median(lengths, axis=0)
    long = med >= max(SECTION_MIN_EVENTS, SECTION_MIN_SHARE * float(np.median(n)))
    if long.sum() < 2:
        return (None, None) if with_loops else None
    # (communicators by their members: one split again for each repetition is the same)
    coll_tok = (ev["op"][idx[0]].astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
                + _canonical_comms(trace)[idx[0]].astype(np.uint64))
    periodic_votes = np.zeros(m + 1, np.int64)
    words = (len(OPS) + 63) // 64
    union = np.zeros((words, m + 1), np.uint64)  # the calls of each stretch on any voter
    # the program is the same on every rank: a few ranks, spread over them, vote
    voters = np.unique(np.linspace(0, P - 1, min(P, SECTION_VOTERS)).astype(np.int64))
    for r in voters.tolist():
        a = int(ro[r]) + 1
        ops = ev["op"][a:a + int(n[r])].astype(np.int64)
        # the set of calls of each stretch, as a bit mask per 64 op codes
        stretch = np.searchsorted(pos[r], np.arange(len(ops)), side="left")
        inside = np.ones(len(ops), bool)
        inside[pos[r]] = False
        key = np.zeros(m + 1, np.uint64)
        for w in range(words):
            sel = inside & (ops // 64 == w)
            bits = np.zeros(m + 1, np.uint64)
            np.bitwise_or.at(bits, stretch[sel], np.left_shift(np.uint64(1), (ops[sel] % 64).astype(np.uint64)))
            union[w] |= bits
            key = key * np.uint64(0x100000001B3) ^ bits
        seq = np.empty(2 * m + 1, np.uint64)
        seq[0::2] = key
        seq[1::2] = coll_tok
        periodic_votes += _covered_by_repeats(seq, 2 * SECTION_MAX_PERIOD)[0::2]
    kernel = np.flatnonzero(long & (periodic_votes * 2 <= len(voters)))
    if len(kernel) < 2:
        return (None, None) if with_loops else None
    # a kernel j is [collective j-1, collective j); what lies between kernels is a section
    cuts = set()
    for j in kernel.tolist():
        cuts.add(j - 1)  # index of the opening collective (-1: the run's start)
        cuts.add(j)      # the closing collective opens the next section (m: the run's end)
    # ... and where the pattern of global collectives changes: each run of a repeated
    # pattern (a kernel's loop, its repetitions bracketed by collectives) is a section
    u_key = np.zeros(m + 1, np.uint64)
    with np.errstate(over="ignore"):
        for w in range(words):
            u_key = u_key * np.uint64(0x100000001B3) ^ union[w]
    edge = np.concatenate([pos, n[:, None]], axis=1)  # where collective j (m: the end) lies
    regions = {}
    for a, b, q in _pattern_regions(coll_tok, u_key, np.median(edge, axis=0)):
        regions[a] = (b, q)
        cuts.update((a, b))
    cols = sorted(c for c in cuts if 0 <= c < m)
    bounds = np.concatenate([np.zeros((P, 1), np.int64), pos[:, cols], n[:, None]], axis=1)
    # a section that is one whole repeated run: its iterations begin at the unit's first
    # collective
    starts = [-1] + cols  # (the first section begins with the run, not a collective)
    ends = cols + [m]
    loops = [edge[:, np.arange(a, regions[a][0] + 1, regions[a][1])] if a in regions and regions[a][0] == e
             else None for a, e in zip(starts, ends)]
    empty = np.all(bounds[:, 1:] == bounds[:, :-1], axis=0)  # a kernel opening the run
    if empty[:-1].any():
        keep = np.concatenate([[True], ~empty[:-1], [True]])
        bounds = bounds[:, keep]
        loops = [x for x, k in zip(loops, keep[:-1]) if k]
    return (bounds, loops) if with_loops else bounds
