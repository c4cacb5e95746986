"""Pieces that own their memory: the events of a block of ranks, their messages and the
collective instances they take part in, with their own numbering.

A :class:`Piece` is what one piece of a replay in pieces (:func:`replay.replay` with
``pieces=k``) or one MPI worker (:mod:`replay.workers`) holds: a :class:`Program` whose
only events are those of ranks ``lo..hi-1`` (the other ranks have empty ranges of
``rank_offsets``), whose messages are those these events send or receive, and whose
collective instances are those they enter (with every member's slot: an instance is
evaluated over all its members). Times of messages crossing pieces are exchanged by
their position in the *crossing list* of the two pieces, which both pieces hold in the
same order (by sender, receiver and the sender's event); entry times of collective
members by the instance's key (communicator, ordinal: the k-th collective call on
that communicator) and the member's position in it.

A piece is made in one of two ways, which give the same piece:

* :func:`extract` cuts it out of a whole :class:`Program` (in one process);
* :func:`read_piece` builds it on an MPI worker from the worker's rank block of the
  HDF5 trace (:func:`signature.io.read_trace_ranks`) and *ghost* events of the other
  workers. Message matching is MPI's non-overtaking order within each (sender,
  receiver) pair, so a worker matches every message of its ranks exactly when it
  has every point-to-point event of every rank its ranks exchange messages with:
  each worker sends the others the whole event stream of its ranks that talk to
  theirs (with their completions: the actual source of a wildcard receive). The
  union is matched by :meth:`Program.from_trace` as it is. Its collective instances
  are those of (communicator, ordinal), with every member's slot (from the
  communicator table), but their root and block size, which come from all members,
  are then completed from one summary per instance that every worker sends (key,
  operation, root, bytes; a clash of operations is an error on every worker): the
  other blocks' collective calls never travel. Only a trace with neighbourhood
  collectives, whose patterns come from every member's destinations, ships every
  collective call. The piece is extracted from the union. Peak memory and time per
  worker are then those of its block and the few ghosts, not of the whole trace.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from signature.errors import TraceFormatError
from signature.trace import OP_CODE, OPS, Trace

from .engine import _ranges
from .program import COLLECTIVE, PERSISTENT_INIT, Program

__all__ = ["Piece", "extract", "read_piece", "piece_bounds", "positions_from_counts"]


@dataclasses.dataclass(frozen=True, eq=False)
class Piece:
    """Ranks ``lo..hi-1`` of a program, piece ``index`` of ``len(bounds) - 1``.

    Attributes
    ----------
    program : Program
        The piece's own program (local message, slot and instance numbers; ``nprocs``
        is the whole run's P).
    lo, hi, index : int
    bounds : ndarray (K+1,)
        Rank bounds of every piece: piece q holds ranks ``bounds[q]..bounds[q+1]-1``.
    cross_offsets, cross_ids : ndarray (K+1,), (X,)
        Messages crossing to or from piece q: local ids
        ``cross_ids[cross_offsets[q]:cross_offsets[q+1]]``, in the order piece q holds
        them too (by sender, receiver, sending event).
    cross_pos : ndarray (M,)
        Position of each local message in its crossing list (-1: not crossing).
    coll_key : ndarray (I,)
        Per local collective instance: ``communicator << 32 | ordinal``, the same on
        every piece, increasing.
    inst_parts : ndarray (I, K) bool
        Which pieces hold members of each instance.
    n_events_total, n_phases : int
        Events and phases of the whole program.
    """

    program: Program
    lo: int
    hi: int
    index: int
    bounds: np.ndarray
    cross_offsets: np.ndarray
    cross_ids: np.ndarray
    cross_pos: np.ndarray
    coll_key: np.ndarray
    inst_parts: np.ndarray
    n_events_total: int
    n_phases: int

    @property
    def n_pieces(self) -> int:
        return len(self.bounds) - 1

    @property
    def remote(self) -> np.ndarray:
        """Per local message: its other side is in another piece."""
        return self.cross_pos >= 0

    def owner(self, ranks: np.ndarray) -> np.ndarray:
        """The piece of each world rank."""
        return np.searchsorted(self.bounds, ranks, side="right") - 1

    def nbytes(self) -> int:
        """Bytes held by the piece's arrays."""
        total = sum(getattr(self, f.name).nbytes for f in dataclasses.fields(self)
                    if isinstance(getattr(self, f.name), np.ndarray))
        prog = self.program
        return total + sum(getattr(prog, f.name).nbytes for f in dataclasses.fields(prog)
                           if isinstance(getattr(prog, f.name), np.ndarray))

    # ---- the exchange -----------------------------------------------------------------------
    def outgoing(self, out: dict) -> dict[int, dict]:
        """Split :meth:`ReplayState.export_crossing`'s ``out`` (local ids) by the piece that
        needs each time: per piece q, ``{"ts": (positions, times), "tr": (positions,
        times), "entry": (instance keys, member positions, times)}`` (only pieces with
        something to receive)."""
        prog = self.program
        res: dict[int, dict] = {}

        def put(q, key, value):
            res.setdefault(int(q), {})[key] = value

        for key, far in (("ts", prog.msg_dst), ("tr", prog.msg_src)):
            ids, t = out.get(key, (np.zeros(0, np.int64), np.zeros(0)))
            pos = self.cross_pos[ids]
            ok = pos >= 0
            if not ok.any():
                continue
            ids, t, pos = ids[ok], t[ok], pos[ok]
            q = self.owner(far[ids])
            for qq in np.unique(q).tolist():
                sel = q == qq
                put(qq, key, (pos[sel], t[sel]))
        slots, t = out.get("entry", (np.zeros(0, np.int64), np.zeros(0)))
        if len(slots):
            off = prog.coll_offsets
            inst = np.searchsorted(off, slots, side="right") - 1
            j = slots - off[inst]
            parts = self.inst_parts[inst]
            for qq in range(self.n_pieces):
                if qq == self.index:
                    continue
                sel = parts[:, qq]
                if sel.any():
                    put(qq, "entry", (self.coll_key[inst[sel]], j[sel], t[sel]))
        return res

    def incoming(self, got: list[tuple[int, dict]]) -> dict:
        """What pieces q sent this one (``(q, payload)`` from their :meth:`outgoing`), as
        local ids for :meth:`ReplayState.import_crossing`."""
        prog = self.program
        parts: dict[str, list] = {"ts": [], "tr": [], "entry": []}
        times: dict[str, list] = {"ts": [], "tr": [], "entry": []}
        for q, payload in got:
            base = int(self.cross_offsets[q])
            for key in ("ts", "tr"):
                if key in payload:
                    pos, t = payload[key]
                    parts[key].append(self.cross_ids[base + np.asarray(pos, np.int64)])
                    times[key].append(np.asarray(t, np.float64))
            if "entry" in payload:
                keys, j, t = payload["entry"]
                inst = np.minimum(np.searchsorted(self.coll_key, keys), max(len(self.coll_key) - 1, 0))
                ok = self.coll_key[inst] == keys if len(self.coll_key) else np.zeros(len(keys), bool)
                parts["entry"].append(prog.coll_offsets[inst[ok]] + np.asarray(j, np.int64)[ok])
                times["entry"].append(np.asarray(t, np.float64)[ok])
        return {k: (np.concatenate(parts[k]).astype(np.int64), np.concatenate(times[k]))
                for k in parts if parts[k]}


def piece_bounds(nprocs: int, pieces: int) -> np.ndarray:
    """Rank bounds of ``pieces`` contiguous blocks (as :func:`replay.replay` cuts them)."""
    return np.linspace(0, nprocs, pieces + 1).round().astype(np.int64)


def positions_from_counts(counts: np.ndarray) -> np.ndarray:
    """Program event (of a piece, in rank order) -> its number in the time-major layout
    of :class:`ReplayState`, from the events per rank alone."""
    import types

    from .engine import _time_major
    counts = np.asarray(counts, np.int64)
    ro = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return _time_major(types.SimpleNamespace(rank_offsets=ro), 0, len(counts))[2]


def _coll_keys(program: Program) -> np.ndarray:
    """Per collective instance of ``program``: ``communicator << 32 | ordinal`` (the
    instance's position among the instances of its communicator, which are numbered in
    call order). Kept on the program."""
    got = program._cache.get("coll_key")
    if got is None:
        comm = np.asarray(program.coll_comm, np.int64)
        I = len(comm)
        order = np.argsort(comm, kind="stable")
        cs = comm[order]
        first = np.searchsorted(cs, cs, side="left")
        ordinal = np.empty(I, np.int64)
        ordinal[order] = np.arange(I, dtype=np.int64) - first
        got = program._cache["coll_key"] = (comm << 32) | ordinal
    return got


def extract(program: Program, lo: int, hi: int, bounds: np.ndarray | None = None,
            index: int | None = None, *, n_phases: int | None = None,
            n_events_total: int | None = None, consume: bool = False) -> Piece:
    """Ranks ``lo..hi-1`` of ``program`` as a :class:`Piece` with its own numbering.

    ``bounds`` (default ``[0, lo, hi, P]`` without empty blocks) are the rank bounds of
    every piece of the replay and ``index`` this piece's place in them; ``n_phases``
    and ``n_events_total`` default to the program's (pass the whole program's when
    ``program`` holds only some of its events, as on a worker). ``consume``: the
    program is not used afterwards, so the piece's per-event arrays are views of its
    arrays, renumbered in place (no copy of the events: on a worker, whose program
    holds its block and the ghosts)."""
    P = program.nprocs
    if bounds is None:
        bounds = np.unique(np.array([0, lo, hi, P], np.int64))
    bounds = np.asarray(bounds, np.int64)
    if index is None:
        index = int(np.searchsorted(bounds, lo, side="right") - 1)
    if not (0 <= lo <= hi <= P and bounds[index] == lo and bounds[index + 1] == hi):
        raise ValueError(f"ranks {lo}..{hi} are not piece {index} of bounds {bounds.tolist()}")
    ro = program.rank_offsets
    a, b = int(ro[lo]), int(ro[hi])
    E = b - a
    M = program.n_messages

    def local_event(x):
        return np.where((x >= a) & (x < b), x - a, -1)

    # ---- messages: those these events send or receive, in program order ------------------
    sm, rm = program.send_msg[a:b], program.recv_msg[a:b]
    keep = np.zeros(M, bool)
    keep[sm[sm >= 0]] = True
    keep[rm[rm >= 0]] = True
    msel = np.flatnonzero(keep)
    del keep
    Mn = len(msel)
    # old message -> new (-1: not this piece's), and -1 -> -1 through the extra last entry:
    # one gather per column, no masks
    mmap = np.full(M + 1, -1, np.int64)
    mmap[msel] = np.arange(Mn, dtype=np.int64)
    src, dst = program.msg_src[msel], program.msg_dst[msel]
    g_send, g_recv = program.msg_send_event[msel], program.msg_recv_event[msel]

    def remap(x):
        if consume:
            x[...] = mmap[x]
            return x
        return mmap[x]

    send_msg, recv_msg = remap(sm), remap(rm)

    # ---- collective instances these events enter, with all their slots --------------------
    off = program.coll_offsets
    cs_all = program.coll_slot[a:b]
    has_c = cs_all >= 0
    cs = cs_all[has_c]
    slot_inst = np.repeat(np.arange(len(off) - 1, dtype=np.int64), np.diff(off))
    inst_of = slot_inst[cs]
    mark = np.zeros(len(off) - 1, bool)
    mark[inst_of] = True
    isel = mark.nonzero()[0]  # (np.unique without its sort)
    new_inst = np.cumsum(mark) - 1  # per instance of the program: its number here (if marked)
    del mark
    sizes = np.diff(off)[isel]
    noff = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    C = int(noff[-1])
    gslots = np.repeat(off[isel] - noff[:-1], sizes) + np.arange(C, dtype=np.int64)
    coll_slot = cs_all if consume else np.full(E, -1, np.int64)
    coll_slot[has_c] = noff[new_inst[inst_of]] + (cs - off[inst_of])
    coll_rank = program.coll_rank[gslots]

    # ---- wait lists in local slot numbers -------------------------------------------------
    woff = program.wait_offsets
    ws = program.wait_slots[int(woff[a]):int(woff[b])]
    s_, c_ = ws < M, ws >= 2 * M
    r_ = ~(s_ | c_)
    c = ws[c_] - 2 * M
    ci = slot_inst[c]
    kc = np.maximum(new_inst[ci], 0) if len(isel) else np.zeros(len(ci), np.int64)
    new = ws if consume else np.full(len(ws), -1, np.int64)
    new[s_] = mmap[ws[s_]]
    new[r_] = Mn + mmap[ws[r_] - M]
    new[c_] = 2 * Mn + noff[kc] + (c - off[ci])
    del mmap
    if (new < 0).any() or (len(ci) and (isel[kc] != ci).any()):
        raise ValueError(f"{program.name}: ranks {lo}..{hi - 1} wait for a message or collective "
                         "they take no part in (an inconsistent Program)")

    # ---- crossing messages, in the order both pieces hold them ---------------------------
    K = len(bounds) - 1
    s_in = (src >= lo) & (src < hi)
    d_in = (dst >= lo) & (dst < hi)
    crossing = (g_send >= 0) & (g_recv >= 0) & (s_in != d_in)
    xi = np.flatnonzero(crossing)
    other = np.where(s_in[xi], dst[xi], src[xi])
    q = np.searchsorted(bounds, other, side="right") - 1
    order = np.lexsort((g_send[xi], dst[xi], src[xi], q))
    cross_ids = xi[order]
    cross_offsets = np.concatenate([[0], np.cumsum(np.bincount(q, minlength=K))]).astype(np.int64)
    cross_pos = np.full(Mn, -1, np.int64)
    cross_pos[cross_ids] = np.arange(len(cross_ids), dtype=np.int64) - np.repeat(
        cross_offsets[:-1], np.diff(cross_offsets))
    owner = np.repeat(np.arange(K, dtype=np.int64), np.diff(bounds))[coll_rank]  # piece of a rank
    parts = np.zeros((len(isel), K), bool)
    parts[np.repeat(np.arange(len(isel)), sizes), owner] = True

    own = (lambda x: x[a:b]) if consume else (lambda x: x[a:b].copy())
    if consume:
        wait_offsets = woff[a:b + 1]
        wait_offsets -= int(woff[a])
    else:
        wait_offsets = (woff[a:b + 1] - woff[a]).astype(np.int64)
    piece_prog = Program(
        nprocs=P, rank_offsets=np.clip(ro - a, 0, E).astype(np.int64), op=own(program.op),
        seq=own(program.seq), comp=own(program.comp),
        phase=None if program.phase is None else own(program.phase),
        send_msg=send_msg, recv_msg=recv_msg, coll_slot=coll_slot,
        wait_offsets=wait_offsets, wait_slots=new,
        msg_src=src, msg_dst=dst, msg_bytes=program.msg_bytes[msel],
        msg_mode=program.msg_mode[msel], msg_send_event=local_event(g_send),
        msg_recv_event=local_event(g_recv), coll_offsets=noff, coll_rank=coll_rank,
        coll_event=local_event(program.coll_event[gslots]), coll_op=program.coll_op[isel],
        coll_root=program.coll_root[isel], coll_bytes=program.coll_bytes[isel],
        coll_comm=program.coll_comm[isel], phase_weights=program.phase_weights, name=program.name,
        neighbor_patterns=program.neighbor_patterns)
    n_phases = program.n_phases if n_phases is None else int(n_phases)
    piece_prog._cache["n_phases"] = n_phases
    return Piece(program=piece_prog, lo=int(lo), hi=int(hi), index=int(index), bounds=bounds,
                 cross_offsets=cross_offsets, cross_ids=cross_ids, cross_pos=cross_pos,
                 coll_key=_coll_keys(program)[isel], inst_parts=parts,
                 n_events_total=program.n_events if n_events_total is None else int(n_events_total),
                 n_phases=n_phases)


# ---- a piece built by MPI workers from their rank blocks -------------------------------------

#: Event columns a worker reads besides those read_trace_ranks always reads (the compute
#: column: t_comp, or t_cpu where the trace has no t_comp)
_MORE_COLUMNS = ("tag", "comm", "bytes", "recv_bytes", "req", "phase", "t_comp")
#: Completion columns Program.from_trace reads (not the bytes received)
_COMPLETION_COLUMNS = ("rank", "seq", "req", "peer", "tag")
_STARTS = np.zeros(len(COLLECTIVE), bool)
_STARTS[[OP_CODE["Start"], OP_CODE["Startall"]]] = True
_NEIGHBOR_OPS = np.array([n.startswith(("Neighbor_", "Ineighbor_")) for n in OPS], bool)


def _has_neighbor_collectives(op: np.ndarray) -> bool:
    """Whether events ``op`` call a neighbourhood collective (or make a persistent one)."""
    return bool(_NEIGHBOR_OPS[op].any())


def _ghost_rows(block: Trace, lo: int, hi: int, bounds: np.ndarray, me: int,
                every_collective: bool) -> list:
    """Per worker q: the rows of this block's events and completions that q needs to match
    its own ranks' messages exactly (see the module docstring), as (event rows, completion
    rows); None for q = me or a worker without ranks. ``every_collective``: every
    collective call of the block too (a trace with neighbourhood collectives, whose
    patterns come from every member's destinations)."""
    ev, comp = block.events, block.completions
    rank_l = ev["rank"].astype(np.int64) - lo
    c_rank_l = np.asarray(comp["rank"], np.int64) - lo
    op = ev["op"]
    if every_collective:
        shared = COLLECTIVE[op] | _STARTS[op] | PERSISTENT_INIT[op]  # every rank ships these
    else:
        shared = np.zeros(len(op), bool)
    out = []
    for q in range(len(bounds) - 1):
        qlo, qhi = int(bounds[q]), int(bounds[q + 1])
        if q == me or qhi <= qlo:
            out.append(None)
            continue
        # ranks of this block that exchange messages with q's: their whole streams
        touch = np.zeros(hi - lo, bool)
        for col in ("peer", "recv_peer"):
            x = ev[col]
            touch[rank_l[(x >= qlo) & (x < qhi)]] = True
        cp = comp["peer"]
        touch[c_rank_l[(cp >= qlo) & (cp < qhi)]] = True
        out.append((np.flatnonzero(touch[rank_l] | shared), np.flatnonzero(touch[c_rank_l])))
    return out


def _compact_lists(lists: dict) -> dict:
    """A block's ``/lists`` rows with only their own values (the file's array is whole)."""
    lengths = np.asarray(lists["length"], np.int64)
    starts = np.cumsum(lengths) - lengths
    take = _ranges(lists["start"], lengths)
    out = {c: np.asarray(lists[c], np.int64) for c in ("rank", "seq", "kind", "length")}
    out["start"] = starts
    out["values"] = np.asarray(lists["values"], np.int64)[take]
    return out


def _grow(a: np.ndarray, before: int, after: int) -> np.ndarray:
    """``a`` with ``before`` unset rows before it and ``after`` after, made by growing its
    buffer in place and moving its rows up where needed: no copy into fresh memory, which
    costs a page fault per page touched (the largest cost of copying a large array)."""
    n = len(a)
    if not (before or after):
        return a
    if a.base is not None or not a.flags.c_contiguous or a.ndim != 1:
        out = np.empty(before + n + after, a.dtype)
        out[before:before + n] = a
        return out
    a.resize(before + n + after, refcheck=False)
    if before and n:
        import ctypes
        base, size = a.ctypes.data, a.itemsize
        ctypes.memmove(base + before * size, base, n * size)  # overlapping: memmove
    return a


def _side_tables(block: Trace, my_lists: dict, got: list, me: int) -> tuple[dict, dict]:
    """Completions and lists of this block and the ghosts ``got[q]``, in rank order."""
    lists = []
    for q, g in enumerate(got):
        if q == me:
            lists.append(my_lists)
        elif g is not None:
            lists.append(g["lists"])
    lower = [g["completions"] for q, g in enumerate(got) if q < me and g is not None]
    upper = [g["completions"] for q, g in enumerate(got) if q > me and g is not None]
    nb = sum(len(x["rank"]) for x in lower)
    na = sum(len(x["rank"]) for x in upper)
    n = len(block.completions["rank"])
    completions = {}
    for c, v in block.completions.items():
        v = _grow(v, nb, na)
        at = 0
        for x in lower:
            v[at:at + len(x[c])] = x[c]
            at += len(x[c])
        at = nb + n
        for x in upper:
            v[at:at + len(x[c])] = x[c]
            at += len(x[c])
        completions[c] = v
    out = {c: [] for c in ("rank", "seq", "kind", "start", "length", "values")}
    at = 0
    for x in lists:
        for c in ("rank", "seq", "kind", "length", "values"):
            out[c].append(x[c])
        out["start"].append(x["start"] + at)
        at += len(x["values"])
    return completions, {c: np.concatenate(v) for c, v in out.items()}


def read_piece(path: str | Path, comm, bounds: np.ndarray) -> Piece:
    """This MPI worker's piece of the trace at ``path`` (``comm``: the workers, every one
    calling this; ``bounds``: the rank bounds of their pieces, worker w's being
    ``bounds[w]..bounds[w+1]-1``), from its rank block of the file and the ghost events
    the other workers send it. Equal to ``extract(Program.from_trace(load_trace(path)),
    ...)`` of the same ranks.

    The block is read once, straight into arrays with room for the ghosts before and
    after it (their numbers are exchanged first), so that no copy of it is made."""
    from mpi4py import MPI

    from signature.io import read_rank_block_into, read_trace_ranks
    from signature.trace import EVENT_COLUMNS

    me = comm.Get_rank()
    bounds = np.asarray(bounds, np.int64)
    lo, hi = int(bounds[me]), int(bounds[me + 1])
    stages = STAGES
    stages.clear()
    t0 = time.process_time()
    # the columns the checks and the choice of ghosts need, and the side tables
    block = read_trace_ranks(path, lo, hi, columns=(), completion_columns=_COMPLETION_COLUMNS)
    t0 = _tick(stages, "read", t0)
    # neighbourhood collectives take their pattern from every member's destinations: with
    # them anywhere, every collective call travels (else a summary per instance does)
    every_collective = comm.allreduce(_has_neighbor_collectives(block.events["op"]), op=MPI.LOR)
    rows = _ghost_rows(block, lo, hi, bounds, me, every_collective)
    counts = np.array(comm.allgather([0 if r is None else len(r[0]) for r in rows]), np.int64)
    before, after = int(counts[:me, me].sum()), int(counts[me + 1:, me].sum())
    E = block.n_events
    mid = slice(before, before + E)
    events = {c: _grow(v, before, after) for c, v in block.events.items()}
    block.events.clear()
    more = {c: np.empty(before + E + after, EVENT_COLUMNS[c]) for c in _MORE_COLUMNS}
    t0 = _tick(stages, "ghosts", t0)
    missing = read_rank_block_into(path, lo, hi, {c: v[mid] for c, v in more.items()})
    if "t_comp" in missing:  # a trace without it: the thread CPU time (Program.from_trace's "auto")
        more["t_cpu"] = more.pop("t_comp")
        missing = read_rank_block_into(path, lo, hi, {"t_cpu": more["t_cpu"][mid]})
    events.update((c, v) for c, v in more.items() if c not in missing)
    t0 = _tick(stages, "read", t0)
    my_lists = _compact_lists(block.lists)
    payloads = [None if r is None else
                {"events": {c: v[before + r[0]] for c, v in events.items()},
                 "completions": {c: v[r[1]] for c, v in block.completions.items()},
                 "lists": my_lists} for r in rows]
    t0 = _tick(stages, "ghosts", t0)
    got = comm.alltoall(payloads)
    del payloads
    t0 = _tick(stages, "alltoall", t0)
    at = 0
    for q, g in enumerate(got):
        if g is None or q == me:
            at = before + E if q == me else at
            continue
        n = len(g["events"]["op"])
        for c, v in events.items():
            v[at:at + n] = g["events"][c]
        at += n
    completions, lists = _side_tables(block, my_lists, got, me)
    del got
    ranks = np.bincount(events["rank"], minlength=block.nprocs)
    ext = Trace(meta=dict(block.meta), events=events,
                rank_offsets=np.concatenate([[0], np.cumsum(ranks)]).astype(np.int64),
                completions=completions, lists=lists, comms=block.comms, path=block.path,
                regions=block.regions)
    del events, block
    t0 = _tick(stages, "merge", t0)
    program = Program.from_trace(ext)
    del ext
    t0 = _tick(stages, "match", t0)
    # the instances' summaries, and each worker's phases and events (one exchange)
    mine = (program.n_phases, int(program.rank_offsets[hi] - program.rank_offsets[lo]))
    if every_collective:
        counts = comm.allgather(mine)
    else:
        counts = _complete_collectives(program, comm, mine)
    n_phases, total = max(c[0] for c in counts), sum(c[1] for c in counts)
    t0 = _tick(stages, "collectives", t0)
    piece = extract(program, lo, hi, bounds, me, n_phases=n_phases, n_events_total=total, consume=True)
    _tick(stages, "extract", t0)
    return piece


def _complete_collectives(program: Program, comm, also=None) -> list:
    """Give ``program``'s collective instances (made from the calls of its block and its
    ghosts alone) what their calls on the other workers say: an instance's root and block
    size are the largest any member gives (as :meth:`Program.from_trace` takes them over
    all members), and every member must call the same operation. The workers exchange one
    summary per instance (key, operation, root, bytes), not the calls; a clash raises the
    error :meth:`Program.from_trace` raises, on every worker. ``also``: a value of this
    worker's that travels with its summaries; returns every worker's."""
    keys = _coll_keys(program)
    mine = np.stack([keys, program.coll_op, program.coll_root, program.coll_bytes])
    got = comm.allgather((mine, also))
    table = np.concatenate([g[0] for g in got], axis=1)
    if not table.shape[1]:  # no collective anywhere
        return [g[1] for g in got]
    order = np.lexsort((table[1], table[0]))
    key, op, root, nbytes = table[:, order]
    first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    uk = key[first]
    u_root = np.maximum.reduceat(root, first)
    u_bytes = np.maximum.reduceat(nbytes, first)
    # (sorted by operation within a key: the key's first and last calls differ on a clash)
    last = np.concatenate([first[1:], [len(key)]]) - 1
    clash = np.flatnonzero(op[first] != op[last])
    if clash.size:
        _collective_clash(program, comm, int(uk[clash[0]]))
    at = np.searchsorted(uk, keys)
    program.coll_root[...] = u_root[at]
    program.coll_bytes[...] = u_bytes[at]
    return [g[1] for g in got]


def _collective_clash(program: Program, comm, key: int) -> None:
    """Raise, on every worker, that collective instance ``key`` is called as different
    operations, naming a rank and its event for two of them."""
    from .program import COLLECTIVE_NAMES
    where = []
    i = np.flatnonzero(_coll_keys(program) == key)
    if i.size:
        a, b = int(program.coll_offsets[i[0]]), int(program.coll_offsets[i[0] + 1])
        ev = program.coll_event[a:b]
        ev = ev[ev >= 0]
        for e in ev[:1].tolist():
            r = int(np.searchsorted(program.rank_offsets, e, side="right") - 1)
            where.append((r, int(program.seq[e]), OPS[int(program.op[e])],
                          COLLECTIVE_NAMES[int(program.coll_op[i[0]])]))
    seen = {}
    for w in comm.allgather(where):
        for r, sq, name, base in w:
            seen.setdefault(base, (r, sq, name))
    if len(seen) < 2:
        raise TraceFormatError(f"{program.name}: collective call {key & 0xFFFFFFFF} on communicator "
                               f"{key >> 32} is not the same operation on every member: members "
                               "must call collectives in the same order")
    (r1, s1, n1), (r2, s2, n2) = list(seen.values())[:2]
    raise TraceFormatError(
        f"{program.name}: collective call {key & 0xFFFFFFFF} on communicator {key >> 32} is "
        f"{n1} on rank {r1} (seq {s1}) but {n2} on rank {r2} (seq {s2}): members must call "
        "collectives in the same order")


#: CPU seconds of the stages of this process's last :func:`read_piece` (for benchmarks)
STAGES: dict[str, float] = {}


def _tick(stages: dict, name: str, t0: float) -> float:
    t = time.process_time()
    stages[name] = stages.get(name, 0.0) + t - t0
    return t
