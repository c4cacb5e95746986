"""Persistent requests, seen as the calls they act as.

``MPI_Send_init`` (``Ssend_init``, ``Bsend_init``, ``Rsend_init``) and ``MPI_Recv_init``
make a request once; every ``MPI_Start`` or ``MPI_Startall`` then posts it as the
nonblocking call of the same kind (``Isend`` .. ``Irecv``) to the peer, with the tag and
size the init call gave. The communication is in the starts, and the starts name no peer:
PETSc's vector scatters set their halo exchanges up this way once, then start them in
every Krylov iteration. A model that read the starts as they are would place a loop of
``Startall``/``Waitall`` calls and lose every message (a prediction of PETSc's SNES ex5
at P = 12 had none of the real run's 23,528).

:func:`expand` gives the trace the signature and the models read: each request a start
posts is an event of its nonblocking form, with the peer, tag, communicator and size of
its init call and the request's id; the init calls and the ``MPI_Request_free`` of those
requests, local calls, are left out, their bursts and time added to the rank's next
event. Waits keep their completions. The MPI-4 persistent collectives are read the same
way (``MPI_Allreduce_init``'s starts as ``MPI_Iallreduce`` calls), but for the v, w and
neighbourhood forms, whose per-peer lists belong to the init call: their starts stay as
they are, as do starts whose request has no init call in the trace. The replay takes
captured traces as they are and expands their starts itself, the same way
(``replay.program``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._arrays import lookup, ranges
from .errors import TraceFormatError
from .trace import LIST_STARTED, OP_CODE, Trace

__all__ = ["expand", "started_requests", "nonblocking_form", "INIT_AS"]

#: each persistent init call and the nonblocking call its starts post: point to point, and
#: the MPI-4 collectives whose sizes need no per-peer lists (the v and w forms, and the
#: neighbourhood ones, keep their starts: their lists belong to the init call)
def nonblocking_form(init: str) -> str:
    """The nonblocking call a start of an ``*_init`` call's request posts: ``Send_init`` ->
    ``Isend``, ``Allreduce_init`` -> ``Iallreduce`` (the replay's reading of every one)."""
    return "I" + init[0].lower() + init[1:-len("_init")]


INIT_AS = {f"{c}_init": nonblocking_form(f"{c}_init") for c in (
    "Send", "Ssend", "Bsend", "Rsend", "Recv", "Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Scatter",
    "Allgather", "Alltoall", "Reduce_scatter_block", "Scan", "Exscan")}
_INIT = np.zeros(256, bool)
_EFFECT = np.arange(256, dtype=np.int64)
for _k, _v in INIT_AS.items():
    _INIT[OP_CODE[_k]] = True
    _EFFECT[OP_CODE[_k]] = OP_CODE[_v]
#: columns of a burst or a call's time, added to the next event where an event is left out
_COST = ("t_comp", "t_cpu", "ctx_switches", "instr", "cycles", "llc_misses")


def expand(trace: Trace) -> tuple[Trace, int]:
    """The trace with persistent requests as the nonblocking calls their
    starts post (see the module), and how many starts were expanded (0: the trace as it
    is)."""
    ev = trace.events
    op = np.asarray(ev["op"])
    start, startall = OP_CODE["Start"], OP_CODE["Startall"]
    is_start = (op == start) | (op == startall)
    if not is_start.any():
        return trace, 0
    n = len(op)
    rank = np.asarray(ev["rank"], np.int64)
    seq = np.asarray(ev["seq"], np.int64)
    req = np.asarray(ev["req"], np.int64)
    lists = trace.lists
    s_ev, s_req = started_requests(op, rank, seq, req, lists, trace.name)
    per = np.bincount(s_ev, minlength=n).astype(np.int64)
    inits = np.flatnonzero(_INIT[op] & (req >= 0))
    # each started request's init call: the rank's last of that request id before the start
    rmax = int(max(req.max(initial=0), s_req.max(initial=0))) + 2
    at = lookup(rank[inits] * rmax + req[inits] + 1, inits, rank[s_ev] * rmax + s_req + 1, s_ev, side="before")
    init_of = np.where(at >= 0, inits[np.maximum(at, 0)], -1)
    # a start is expanded where every request it posts has its init call (of a kind INIT_AS reads)
    ok_ev = np.ones(n, bool)
    np.logical_and.at(ok_ev, s_ev, init_of >= 0)
    expanded = is_start & ok_ev & (per > 0)
    if not expanded.any():
        return trace, 0
    # the init calls, and the MPI_Request_free of their requests, are local: left out, but
    # for those of a request some start that stays as it is posts
    used = np.zeros(n, bool)
    used[init_of[~expanded[s_ev] & (init_of >= 0)]] = True
    drop = np.zeros(n, bool)
    drop[inits] = ~used[inits]
    freed = np.flatnonzero(op == OP_CODE["Request_free"])
    at = lookup(rank[inits] * rmax + req[inits] + 1, inits, rank[freed] * rmax + req[freed] + 1, freed,
                side="before")
    drop[freed[at >= 0]] = drop[inits[at[at >= 0]]]
    # the new events: one per kept event, or one per request an expanded start posts
    count = np.where(drop, 0, np.where(expanded, per, 1))
    src = np.repeat(np.arange(n), count)
    k = np.arange(len(src)) - np.repeat(np.cumsum(count) - count, count)  # position within its event
    cols = {c: np.asarray(v)[src] for c, v in ev.items()}
    sel = np.flatnonzero(expanded[s_ev])  # (start requests of expanded starts, in event order)
    posts = np.flatnonzero(expanded[src])  # their new events, in the same order
    init = init_of[sel]
    cols["op"][posts] = _EFFECT[op[init]].astype(cols["op"].dtype)
    for c in ("peer", "recv_peer", "root", "tag", "comm", "bytes", "recv_bytes"):  # (a receive's size
        cols[c][posts] = np.asarray(ev[c])[init]                                   # is its recv_bytes)
    cols["req"][posts] = s_req[sel]
    later = posts[k[posts] > 0]  # the second and later posts of a Startall: no time of their own
    if "t_start" in cols and "t_comm" in cols:
        cols["t_start"][later] = cols["t_start"][later] + cols["t_comm"][later]
        cols["t_comm"][later] = 0.0
    for c in _COST:
        if c in cols:
            cols[c][later] = 0
    # a left-out event's burst and time go to its rank's next event
    kept = ~drop
    nxt = _next_kept(rank, kept)
    lost = np.flatnonzero(drop & (nxt >= 0))
    new_of = np.cumsum(count) - count  # each old event's first new event
    for c in _COST:
        if c in cols:
            add = np.asarray(ev[c])[lost].astype(cols[c].dtype)
            if c == "t_comp" and "t_comm" in ev:
                add = add + np.asarray(ev["t_comm"])[lost]
            np.add.at(cols[c], new_of[nxt[lost]], add)
    # seq: each rank's events numbered again from its first; completions and lists follow
    new_rank = cols["rank"].astype(np.int64)
    counts = np.bincount(new_rank, minlength=trace.nprocs)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    first_seq = np.zeros(trace.nprocs, np.int64)
    ro = np.asarray(trace.rank_offsets, np.int64)
    has = ro[1:] > ro[:-1]
    first_seq[has] = seq[ro[:-1][has]]
    new_seq = first_seq[new_rank] + (np.arange(len(src)) - offsets[new_rank])
    cols["seq"] = new_seq.astype(np.asarray(ev["seq"]).dtype)
    seq_of = first_seq[rank] + (new_of - offsets[rank])  # each kept old event's new seq
    comp = _moved(trace.completions, rank, seq, seq_of)
    new_lists = lists
    if lists is not None and len(lists.get("rank", ())):
        # (the starts they listed are events of their own now)
        rows = np.asarray(lists["kind"]) != LIST_STARTED
        new_lists = {c: (np.asarray(v)[rows] if c != "values" else v) for c, v in lists.items()}
        new_lists = _moved(new_lists, rank, seq, seq_of)
    meta = dict(trace.meta)
    meta["persistent_expanded"] = int(expanded.sum())
    return dataclasses.replace(trace, meta=meta, events=cols, rank_offsets=offsets, completions=comp,
                               lists=new_lists), int(expanded.sum())


def started_requests(op: np.ndarray, rank: np.ndarray, seq: np.ndarray, req: np.ndarray,
                     lists: dict | None, name: str = "the trace") -> tuple[np.ndarray, np.ndarray]:
    """The requests each MPI_Start and MPI_Startall posts: (event, request id) pairs in
    event order, a Startall's in the order it lists them. A Start posts its own ``req``;
    a Startall the values of its LIST_STARTED rows, which the tracers write one per
    request (the replay once took only a call's last row: a Startall of a halo's two
    receives posted one)."""
    start, startall = OP_CODE["Start"], OP_CODE["Startall"]
    n = len(op)
    rank, seq, req = (np.asarray(x, np.int64) for x in (rank, seq, req))
    row_ev = row_first = row_len = np.zeros(0, np.int64)
    values = np.zeros(0, np.int64)
    if lists is not None and len(lists.get("rank", ())) and n:
        rows = np.flatnonzero(np.asarray(lists["kind"]) == LIST_STARTED)
        span = int(max(seq.max(initial=0), np.asarray(lists["seq"]).max(initial=0))) + 1
        key = rank * span + seq
        lk = np.asarray(lists["rank"], np.int64)[rows] * span + np.asarray(lists["seq"], np.int64)[rows]
        at = np.minimum(np.searchsorted(key, lk), n - 1)
        ok = (key[at] == lk) & (np.asarray(op)[at] == startall)
        row_ev = at[ok]
        row_first = np.asarray(lists["start"], np.int64)[rows][ok]
        row_len = np.asarray(lists["length"], np.int64)[rows][ok]
        values = np.asarray(lists["values"], np.int64)
    singles = np.flatnonzero(np.asarray(op) == start)
    at = ranges(row_first, row_len)
    if at.size and (at.min() < 0 or at.max() >= len(values)):
        raise TraceFormatError(f"{name}: a Startall's list of started requests points past the lists' "
                               f"values ({int(at.max())} of {len(values)}); the trace is damaged")
    s_ev = np.concatenate([singles, np.repeat(row_ev, row_len)])
    s_req = np.concatenate([req[singles], values[at]])
    order = np.argsort(s_ev, kind="stable")  # (a Startall's rows stay in their order)
    return s_ev[order], s_req[order]


def _next_kept(rank: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Per event, the next kept event of its rank at or after the one after it (-1: none)."""
    n = len(rank)
    idx = np.where(kept, np.arange(n), n)
    nxt = np.minimum.accumulate(idx[::-1])[::-1]  # the first kept event at or after i
    after = np.append(nxt[1:], n)
    ok = (after < n)
    ok[ok] = rank[after[ok]] == rank[ok]
    return np.where(ok, after, -1)


def _moved(table: dict, rank: np.ndarray, seq: np.ndarray, seq_of: np.ndarray) -> dict:
    """A completions or lists table whose rows name events by (rank, seq): the events'
    new seq (their events are all kept)."""
    if not len(table.get("rank", ())):
        return table
    span = int(max(seq.max(initial=0), np.asarray(table["seq"]).max(initial=0))) + 1
    key = rank * span + seq
    rk = np.asarray(table["rank"], np.int64) * span + np.asarray(table["seq"], np.int64)
    at = np.minimum(np.searchsorted(key, rk), len(key) - 1)
    out = dict(table)
    out["seq"] = np.where(key[at] == rk, seq_of[at], np.asarray(table["seq"], np.int64)).astype(
        np.asarray(table["seq"]).dtype)
    return out
