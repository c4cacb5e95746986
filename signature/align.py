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
iteration has no such call, where its midpoint in time falls.
"""

from __future__ import annotations

import numpy as np

from .iterations import RankSegments
from .trace import OP_CODE, OPS, RECV_OPS, SEND_OPS, SENDRECV_OPS, Trace

__all__ = ["align_ranks", "message_links"]

_COLLECTIVE = [OP_CODE[n] for n in OPS if n.lstrip("I") in (
    "Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Scatter", "Scatterv",
    "Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw", "Reduce_scatter",
    "Reduce_scatter_block", "Scan", "Exscan")]


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


def align_ranks(trace: Trace, segs: list[RankSegments]) -> tuple[np.ndarray, np.ndarray]:
    """Global segments from the ranks' own cuts: ``(bounds, loop)``, ``bounds[r]`` the
    (G+1,) cut positions of rank r in its stream without Init and Finalize, ``loop[g]``
    the loop of global segment g (-1 for a weight-1 part). Ranks that find a different
    number of loops are cut as one loop each."""
    P = trace.nprocs
    if len({s.n_loops for s in segs}) > 1:
        for s in segs:  # the parts between a rank's loops join the iteration before them
            its = np.flatnonzero(s.loop >= 0)
            if s.n_loops > 1:
                k = np.arange(len(s.loop))
                inner = (s.loop < 0) & (k > its[0]) & (k < len(s.loop) - 1)
                keep = np.concatenate([~inner, [True]])
                s.bounds, s.loop = s.bounds[keep], np.where(s.loop[keep[:-1]] >= 0, 0, -1)
    links = None
    per_rank: list[list[int]] = [[0] for _ in range(P)]
    cols: list[int] = [-1]
    for L in range(max((s.n_loops for s in segs), default=0)):
        counts = np.array([s.iterations(L) for s in segs])
        if np.all(counts == counts[0]):
            for r, s in enumerate(segs):
                its = np.flatnonzero(s.loop == L)
                per_rank[r] += s.bounds[its].tolist() + [int(s.bounds[its[-1] + 1])]
            cols += [L] * int(counts[0]) + [-1]
            continue
        if links is None:
            links = (*message_links(trace), *_collective_keys(trace))
        cuts = _align_loop(trace, segs, L, counts, links)
        for r in range(P):
            per_rank[r] += cuts[r]
        cols += [L] * (len(cuts[0]) - 1) + [-1]
    for r, s in enumerate(segs):
        per_rank[r].append(int(s.bounds[-1]))
    return np.array(per_rank, np.int64), np.array(cols, np.int64)


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
    coll_g: dict[int, int] = {}

    def span(r: int) -> tuple[np.ndarray, np.ndarray]:
        its = np.flatnonzero(segs[r].loop == L)
        return segs[r].bounds[its], segs[r].bounds[its + 1]

    def mark(r: int, cut: np.ndarray) -> None:
        base = int(ro[r]) + 1
        a, b = int(cut[0]), int(cut[-1])
        g_ev[base + a:base + b] = np.searchsorted(cut, np.arange(a, b), side="right") - 1
        sel = (coll_ev >= base + a) & (coll_ev < base + b)
        for k, g in zip(coll_key[sel].tolist(), g_ev[coll_ev[sel]].tolist()):
            coll_g.setdefault(k, g)

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
        coll.append((coll_ev[mc] - base, coll_key[mc]))
    todo = [r for r in range(P) if r != q]
    while todo:
        best = None
        for r in todo:  # the rank with the most calls linked to aligned ones goes next
            pos_p, partner = p2p[r]
            g_p = g_ev[partner]
            pos_c, keys = coll[r]
            g_c = np.fromiter((coll_g.get(k, -1) for k in keys.tolist()), np.int64, len(keys))
            pos = np.concatenate([pos_p, pos_c])
            g = np.concatenate([g_p, g_c])
            ok = g >= 0
            if best is None or ok.sum() > best[1]:
                best = (r, int(ok.sum()), pos[ok], g[ok])
        r, _, pos, g = best
        todo.remove(r)
        st, en = span(r)
        if not st.size:  # a rank without this loop: its iterations are empty, at its end
            out[r] = [int(segs[r].bounds[-1])] * (n_ref + 1)
            continue
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
        if pos.size and len(st) != n_ref:
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
        cut[0] = st[0]
        cut = np.minimum(np.concatenate([cut, [en[-1]]]), en[-1])
        out[r] = cut.tolist()
        mark(r, cut)
    return out  # type: ignore[return-value]
