"""The replayable form of a trace: per-event arrays, matched messages, collective
instances and what each event waits for.

:class:`Program` is built once from a :class:`signature.Trace` (captured, logical
or physical) and holds no machine parameter; :func:`replay.replay` runs it under a
:class:`replay.Machine`. Everything is resolved here, with sorts and searches over
whole columns, so that the engine only propagates times:

* **Messages.** Point-to-point messages are matched statically, as MPI's
  non-overtaking rule does it: the k-th send from rank s to rank d with tag t on
  communicator c is received by the k-th receive at d naming (s, t, c). The
  actual source and tag of wildcard receives come from the trace (the receive's
  status, or its completion record). The tracer does not record the receive tag
  of ``Sendrecv``: it is taken equal to the call's send tag (every rank running
  the same call), and such receives left unmatched, like receives with no tag at
  all, are matched in a second pass on (s, d, c) against the sends left over.
  A receive without a send (or a send without a receive) is kept, unmatched:
  replaying it reports a deadlock when something waits for it.
* **Collective instances.** The k-th collective call of a rank on communicator c
  is instance (c, k) (MPI requires every member to call collectives on c in the
  same order); each member owns one *slot* of the instance.
* **Waits.** Each event lists the *slots* it waits for: a blocking call its own,
  a Wait/Test the slots of the requests its completion records name (the latest
  Isend/Irecv/Start/nonblocking collective of that rank with that request id).
  Slots are numbered ``m`` (sender side of message m), ``M + m`` (receiver
  side) and ``2M + c`` (collective slot c). A Test that completed requests in the
  traced run is replayed as a wait for them; one that completed none costs
  nothing.
* **Cancelled requests.** A request whose completion record says it was
  cancelled (peer ``MPI_PROC_NULL``) moved no message: it is left out of the
  matching, and its Wait does not wait for it.
* **One-sided communication.** ``Win_create``, ``Win_free`` and ``Win_fence``
  synchronise the window's communicator as a barrier. Each ``Put``, ``Get``,
  ``Accumulate``, ``Get_accumulate``, ``Fetch_and_op``, ``Compare_and_swap`` (and
  the request forms ``Rput``... waited like a send) is a transfer of the bytes it
  moves, out and back, charged to the origin as a buffered send that no receive
  waits for (LogGP o + (k-1)G on the origin). Lock/unlock, flush and
  post/start/complete/wait add no dependency: the replay does not model a target's
  lock contention or a general active-target epoch.
* **Persistent requests.** ``Start``/``Startall`` become one post per started
  request, with the peer, tag and size of its ``*_init`` call.

Init, Finalize, probes, request frees, communicator management and regions cost
nothing beyond the compute burst before them.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Mapping, Sequence

import numpy as np

from signature.errors import TraceFormatError
from signature._arrays import find_events as _find_events
from signature._arrays import lookup as _lookup
from signature.persistent import nonblocking_form, started_requests
from signature.trace import (LIST_DESTS, LIST_SEND, OP_CODE, OPS, PEER_NULL,
                             CommTable, Trace)

from . import _kernel
from .collectives import COLLECTIVE_OPS, neighbor_pattern, pattern_for

__all__ = ["Program", "COLLECTIVE_NAMES", "TRACE_COLUMNS"]

#: Base collectives, in the order of :attr:`Program.coll_op` codes.
COLLECTIVE_NAMES: tuple[str, ...] = tuple(sorted(set(COLLECTIVE_OPS.values())))

MODE_STANDARD, MODE_SYNC, MODE_BUFFERED = 0, 1, 2

#: The event columns :meth:`Program.from_trace` reads (``load_trace(path, columns=...)``
#: reads only these; the tuple: the compute burst, ``t_comp`` or else ``t_cpu``).
TRACE_COLUMNS = ("rank", "seq", "op", "peer", "recv_peer", "root", "tag", "comm", "bytes",
                 "recv_bytes", "req", ("t_comp", "t_cpu"), "phase")
#: What ``sigex replay`` reads: those, and the clock of a captured trace (its measured time).
CLI_COLUMNS = TRACE_COLUMNS + ("t_start", "t_comm")


def _table(names) -> np.ndarray:
    t = np.zeros(len(OPS), bool)
    t[[OP_CODE[n] for n in names]] = True
    return t


_SENDRECV = ("Sendrecv", "Sendrecv_replace")
_ISENDRECV = ("Isendrecv", "Isendrecv_replace")
SEND_POST = _table(("Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Ibsend", "Irsend")
                   + _SENDRECV + _ISENDRECV)
RECV_POST = _table(("Recv", "Mrecv", "Irecv", "Imrecv") + _SENDRECV + _ISENDRECV)
NONBLOCKING_RECV = _table(("Irecv", "Imrecv") + _ISENDRECV)
# One-sided operations: a transfer of the bytes the origin moves (out and back) to the
# target, charged to the origin as a buffered send that no receive ever waits for
_RMA_BLOCKING = ("Put", "Get", "Accumulate", "Get_accumulate", "Fetch_and_op", "Compare_and_swap")
_RMA_REQUEST = ("Rput", "Rget", "Raccumulate", "Rget_accumulate")
RMA = _table(_RMA_BLOCKING + _RMA_REQUEST)
BLOCKING_P2P = _table(("Send", "Ssend", "Bsend", "Rsend", "Recv", "Mrecv") + _SENDRECV
                      + _RMA_BLOCKING)
SYNC_SEND = _table(("Ssend", "Issend"))
BUFFERED_SEND = _table(("Bsend", "Ibsend") + _RMA_BLOCKING + _RMA_REQUEST)
TAGLESS_RECV = _table(_SENDRECV)
WAITS = _table(("Wait", "Waitall", "Waitany", "Waitsome", "Test", "Testall", "Testany", "Testsome"))
COLLECTIVE = _table([OPS[c] for c in COLLECTIVE_OPS])
BLOCKING_COLLECTIVE = _table([OPS[c] for c in COLLECTIVE_OPS if not OPS[c].startswith("I")])
#: Operations that post a request a Wait/Test completes (with a request id)
_POSTS = (SEND_POST | RECV_POST | COLLECTIVE | RMA) & ~BLOCKING_P2P & ~BLOCKING_COLLECTIVE
_COLL_CODE = np.full(len(OPS), -1, np.int64)
for _c, _base in COLLECTIVE_OPS.items():
    _COLL_CODE[_c] = COLLECTIVE_NAMES.index(_base)
# Persistent requests (point to point, and MPI-4 collectives): a Start acts as the
# nonblocking form of its *_init call (Send_init -> Isend, Allreduce_init -> Iallreduce)
_INIT_AS = {n: nonblocking_form(n) for n in OPS if n.endswith("_init")}
PERSISTENT_INIT = _table(_INIT_AS)
_INIT_EFFECT = np.arange(len(OPS), dtype=np.int64)
for _k, _v in _INIT_AS.items():
    _INIT_EFFECT[OP_CODE[_k]] = OP_CODE[_v]


@dataclasses.dataclass(frozen=True, eq=False)
class Program:
    """A trace resolved for replay: flat per-event, per-message and per-slot arrays.

    Events are sorted by rank; rank r's are ``rank_offsets[r]:rank_offsets[r+1]``.
    Build one with :meth:`from_trace` or, in tests, :meth:`from_arrays`.

    Attributes
    ----------
    nprocs : int
    rank_offsets : ndarray (P+1,)
    op, seq : ndarray (E,)
        Operation code (:data:`signature.OPS`) and trace sequence number of each
        event (a ``Startall`` becomes one event per started request, all with its seq).
    comp : ndarray (E,)
        Compute burst before each event, in seconds of the traced (or modelled) machine.
    phase : ndarray (E,) or None
        Phase index of each event (-1: outside any phase).
    send_msg, recv_msg, coll_slot : ndarray (E,)
        Message whose send / receive the event posts, collective slot it enters (-1: none).
    wait_offsets, wait_slots : ndarray (E+1,), (W,)
        Slots each event waits for before it completes (CSR).
    msg_src, msg_dst, msg_bytes, msg_mode, msg_send_event, msg_recv_event : ndarray (M,)
        Matched messages (mode 0 standard, 1 synchronous, 2 buffered); an unmatched
        side has event -1.
    coll_offsets : ndarray (I+1,)
        Slots of collective instance i are ``coll_offsets[i]:coll_offsets[i+1]``, in
        communicator rank order.
    coll_rank, coll_event : ndarray (C,)
        World rank and event of each collective slot (event -1: the member never called it).
    coll_op, coll_root, coll_bytes, coll_comm : ndarray (I,)
        Base collective (index into :data:`COLLECTIVE_NAMES`), communicator-local
        root, block size in bytes and communicator of each instance.
    phase_weights : ndarray or None
        Repetitions of each phase (logical/physical traces store them).
    name : str
    """

    nprocs: int
    rank_offsets: np.ndarray
    op: np.ndarray
    seq: np.ndarray
    comp: np.ndarray
    phase: np.ndarray | None
    send_msg: np.ndarray
    recv_msg: np.ndarray
    coll_slot: np.ndarray
    wait_offsets: np.ndarray
    wait_slots: np.ndarray
    msg_src: np.ndarray
    msg_dst: np.ndarray
    msg_bytes: np.ndarray
    msg_mode: np.ndarray
    msg_send_event: np.ndarray
    msg_recv_event: np.ndarray
    coll_offsets: np.ndarray
    coll_rank: np.ndarray
    coll_event: np.ndarray
    coll_op: np.ndarray
    coll_root: np.ndarray
    coll_bytes: np.ndarray
    coll_comm: np.ndarray
    phase_weights: np.ndarray | None = None
    name: str = "<program>"
    #: Patterns of neighbourhood collectives, indexed by their instances' ``coll_root``.
    neighbor_patterns: tuple = ()
    _cache: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def pattern(self, name: str, n: int, root: int, nbytes: int):
        """The message pattern of a collective instance (``root`` indexes
        :attr:`neighbor_patterns` for a neighbourhood collective)."""
        if name == "Neighbor":
            return self.neighbor_patterns[root]
        return pattern_for(name, n, root, nbytes)

    # ---- shape -----------------------------------------------------------------------
    @property
    def n_events(self) -> int:
        return int(len(self.op))

    @property
    def n_messages(self) -> int:
        return int(len(self.msg_src))

    @property
    def n_collectives(self) -> int:
        """Number of collective instances."""
        return int(len(self.coll_op))

    @property
    def n_slots(self) -> int:
        return 2 * self.n_messages + int(len(self.coll_rank))

    @property
    def n_phases(self) -> int:
        if self.phase is None or not len(self.phase):
            return 0
        if "n_phases" not in self._cache:  # a pass over every event: kept
            self._cache["n_phases"] = int(self.phase.max()) + 1
        return self._cache["n_phases"]

    def rank_of_event(self) -> np.ndarray:
        return np.repeat(np.arange(self.nprocs, dtype=np.int64), np.diff(self.rank_offsets))

    def describe_event(self, e: int) -> str:
        """``rank 3 event 17 (seq 17, Waitall, phase 2)`` for error messages."""
        r = int(np.searchsorted(self.rank_offsets, e, side="right") - 1)
        ph = f", phase {int(self.phase[e])}" if self.phase is not None else ""
        return (f"rank {r} event {e - int(self.rank_offsets[r])} (seq {int(self.seq[e])}, "
                f"{OPS[int(self.op[e])]}{ph})")

    def __repr__(self) -> str:
        return (f"Program({self.name}: P={self.nprocs}, {self.n_events} events, "
                f"{self.n_messages} messages, {self.n_collectives} collectives, "
                f"{self.n_phases} phases)")

    # ---- constructors ------------------------------------------------------------------
    @classmethod
    def from_trace(cls, trace: Trace, *, compute: str = "auto") -> "Program":
        """Resolve a trace for replay.

        Parameters
        ----------
        trace : signature.Trace
            A captured trace, or a logical/physical one (``meta["trace_kind"]``).
        compute : {"auto", "t_comp", "t_cpu"}
            Column holding each event's preceding compute burst. ``"auto"`` takes
            ``t_comp`` (wall seconds; what a physical trace carries) and falls back
            to ``t_cpu``.

        Raises
        ------
        TraceFormatError
            The trace is inconsistent (a collective called in different orders,
            a negative burst, ...); the message names the rank and event.

        Examples
        --------
        >>> from signature import load_trace
        >>> Program.from_trace(load_trace("traces/stencil/P16.h5"))  # doctest: +ELLIPSIS
        Program(P16.h5: P=16, 45504 events, ...)
        """
        ev = trace.events
        if compute == "auto":
            compute = "t_comp" if "t_comp" in ev else "t_cpu"
        if compute not in ("t_comp", "t_cpu"):
            raise ValueError(f"compute must be 'auto', 't_comp' or 't_cpu', got {compute!r}")
        if compute not in ev:
            raise TraceFormatError(f"{trace.name}: no {compute} column to replay the compute "
                                   "bursts from; pass compute='t_cpu' or 't_comp'")
        weights = trace.meta.get("phase_weights")
        if isinstance(weights, str):
            weights = json.loads(weights)
        return _build(
            name=trace.name, nprocs=trace.nprocs, rank_offsets=trace.rank_offsets,
            cols={k: ev[k] for k in ("rank", "seq", "op", "peer", "recv_peer", "root", "tag",
                                     "comm", "bytes", "recv_bytes", "req")},
            comp=ev[compute], phase=ev.get("phase"), completions=trace.completions,
            lists=trace.lists, comms=trace.comms, phase_weights=weights)

    @classmethod
    def from_arrays(cls, nprocs: int, *, rank, op, peer=None, recv_peer=None, root=None,
                    tag=None, comm=None, bytes=None, recv_bytes=None, req=None, comp=None,
                    phase=None, seq=None, completions=None, comms: CommTable | None = None,
                    lists: Mapping[str, np.ndarray] | None = None, phase_weights=None,
                    name: str = "<arrays>") -> "Program":
        """A program from event columns, for tests and synthetic workloads.

        ``op`` holds operation names or codes; missing columns default to -1 (peer,
        recv_peer, root, req), 0 (tag, comm, bytes, recv_bytes, comp). Each rank's
        events must be given in program order; ranks may be interleaved (events are
        put in rank order, stably). ``seq`` defaults to the position within the rank.
        ``completions`` is a mapping with ``rank``, ``seq``, ``req`` (and optionally
        ``peer``, ``tag``, ``bytes``) or a sequence of ``(rank, seq, req)``.

        Examples
        --------
        A ping-pong of 8 bytes between two ranks:

        >>> p = Program.from_arrays(2, rank=[0, 0, 1, 1], op=["Send", "Recv", "Recv", "Send"],
        ...                         peer=[1, 1, 0, 0], bytes=[8, 0, 0, 8], recv_bytes=[0, 8, 8, 0])
        >>> p.n_messages
        2
        """
        rank = np.asarray(rank, np.int64)
        n = len(rank)
        op = np.asarray(op)
        if op.dtype.kind in "US":
            try:
                op = np.array([OP_CODE[str(x)] for x in op], np.int64)
            except KeyError as err:
                raise ValueError(f"unknown MPI operation {err}; known: {', '.join(OPS[1:])}") from None
        op = op.astype(np.int64)

        def col(x, default, dtype):
            if x is None:
                return np.full(n, default, dtype)
            a = np.asarray(x, dtype)
            if a.shape != (n,):
                raise ValueError(f"every column needs {n} entries (one per event), got {a.shape}")
            return a

        cols = {"rank": rank, "op": op, "peer": col(peer, -1, np.int64),
                "recv_peer": col(recv_peer, -1, np.int64), "root": col(root, -1, np.int64),
                "tag": col(tag, 0, np.int64), "comm": col(comm, 0, np.int64),
                "bytes": col(bytes, 0, np.int64), "recv_bytes": col(recv_bytes, 0, np.int64),
                "req": col(req, -1, np.int64)}
        comp = col(comp, 0.0, np.float64)
        ph = None if phase is None else col(phase, -1, np.int64)
        if n and (rank.min() < 0 or rank.max() >= nprocs):
            raise ValueError(f"ranks must lie in 0..{nprocs - 1}")
        order = np.argsort(rank, kind="stable")
        cols = {k: v[order] for k, v in cols.items()}
        comp = comp[order]
        ph = None if ph is None else ph[order]
        counts = np.bincount(cols["rank"], minlength=nprocs)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        if seq is None:
            cols["seq"] = np.arange(n, dtype=np.int64) - offsets[cols["rank"]]
        else:
            cols["seq"] = col(seq, 0, np.int64)[order]
        if completions is None:
            comp_tab = {k: np.zeros(0, np.int64) for k in ("rank", "seq", "req", "peer", "tag", "bytes")}
        elif isinstance(completions, Mapping):
            m = len(completions["rank"])
            comp_tab = {k: np.asarray(completions.get(k, np.full(m, -1)), np.int64)
                        for k in ("rank", "seq", "req", "peer", "tag", "bytes")}
        else:
            rows = np.asarray(list(completions), np.int64).reshape(-1, 3)
            m = len(rows)
            comp_tab = {"rank": rows[:, 0], "seq": rows[:, 1], "req": rows[:, 2],
                        "peer": np.full(m, -1, np.int64), "tag": np.full(m, -1, np.int64),
                        "bytes": np.full(m, -1, np.int64)}
        return _build(name=name, nprocs=int(nprocs), rank_offsets=offsets, cols=cols, comp=comp,
                      phase=ph, completions=comp_tab, lists=lists,
                      comms=comms if comms is not None else CommTable.world_only(int(nprocs)),
                      phase_weights=phase_weights)


# ---- building ----------------------------------------------------------------------------

def _latest_before(table_key, table_pos, query_key, query_pos) -> np.ndarray:
    """:func:`_lookup` with ``side="before"`` for a table in increasing position: with the
    compiled helper, one merge pass over table and queries (in position order) keeping each
    key's latest row (in an array over the keys' range, or a hash where they are sparse);
    otherwise one sort of the table and a search per query."""
    lib = _kernel.match()
    if lib is None or not len(table_key) or not len(query_key) or not _ascending(table_pos):
        return _lookup(table_key, table_pos, query_key, query_pos, side="before")
    q_pos = np.ascontiguousarray(query_pos, np.int64)
    order = np.argsort(q_pos, kind="stable")  # completions come in trace order: runs, near-linear
    out = np.empty(len(query_key), np.int64)
    t_key, t_pos, q_key = (np.ascontiguousarray(a, np.int64) for a in (table_key, table_pos, query_key))
    # request ids are usually counters per rank: their keys fill a range an array can index
    lo, hi = int(t_key.min()), int(t_key.max())
    span = hi - lo + 1 if hi - lo < 8 * (len(t_key) + len(q_key)) + 4096 else 0
    adr = _kernel.address
    if lib.sigex_latest_before(len(t_key), adr(t_key), adr(t_pos), len(q_key), adr(q_key),
                               adr(q_pos), adr(order), lo, span, adr(out)) != 0:
        return _lookup(table_key, table_pos, query_key, query_pos, side="before")
    return out


def _ordinals(k1, k2, pos) -> np.ndarray:
    """Position of each row among the rows with the same (k1, k2), in ``pos`` order."""
    n = len(k1)
    if not n:
        return np.zeros(0, np.int64)
    order = np.lexsort((pos, k2, k1))
    a, b = k1[order], k2[order]
    new = np.ones(n, bool)
    new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    idx = np.arange(n)
    start = np.maximum.accumulate(np.where(new, idx, 0))
    out = np.empty(n, np.int64)
    out[order] = idx - start
    return out


def _nonzero(mask: np.ndarray) -> np.ndarray:
    """``np.flatnonzero`` of a 1-D mask without its ravel (half its cost on the small arrays
    of a narrow trace, where the build makes a few hundred numpy calls)."""
    return mask.nonzero()[0]


def _ordinals_in_order(key) -> np.ndarray:
    """Position of each row among the rows with the same key, rows in position order (what
    :func:`_ordinals` gives for ascending positions, with one stable sort: the rows of a
    trace come grouped by rank, runs a merge sort takes in near-linear time)."""
    n = len(key)
    if not n:
        return np.zeros(0, np.int64)
    order = np.argsort(key, kind="stable")
    a = key[order]
    new = np.ones(n, bool)
    new[1:] = a[1:] != a[:-1]
    idx = np.arange(n)
    start = np.maximum.accumulate(np.where(new, idx, 0))
    out = np.empty(n, np.int64)
    out[order] = idx - start
    return out


def _key_ordinals(key: np.ndarray, span: int) -> np.ndarray:
    """:func:`_ordinals_in_order` of keys in 0..span-1: one counter per key in ``_match.c``
    where the counters are few (no sort), else the sort."""
    lib = _kernel.match()
    if lib is None or not len(key) or span > max(1 << 20, 4 * len(key)):
        return _ordinals_in_order(key)
    key = np.ascontiguousarray(key, np.int64)
    out = np.empty(len(key), np.int64)
    counters = np.empty(span, np.int64)
    lib.sigex_ordinals(len(key), _kernel.address(key), 0, span, _kernel.address(counters),
                       _kernel.address(out))
    return out


def _dense_key(k1s, k2s) -> list[np.ndarray]:
    """One int64 key per row of each pair ``(k1, k2)`` of ``k1s``/``k2s`` (all of them
    numbered together), equal exactly where both parts are equal, ordered as (k1, k2)."""
    parts = []
    for ks in (k1s, k2s):
        allk = np.concatenate(ks) if ks else np.zeros(0, np.int64)
        lo = int(allk.min()) if len(allk) else 0
        hi = int(allk.max()) if len(allk) else 0
        parts.append((lo, hi - lo + 1))
    (lo1, n1), (lo2, n2) = parts
    if n1 * n2 < (1 << 62):  # both parts fit in one int64 as they are
        return [(a - lo1) * n2 + (b - lo2) for a, b in zip(k1s, k2s)]
    # sparse values: number the distinct second parts densely (in order) first
    u2, inv = np.unique(np.concatenate(k2s), return_inverse=True)
    inv = inv.reshape(-1)
    out, at = [], 0
    for a, b in zip(k1s, k2s):
        out.append((a - lo1) * len(u2) + inv[at:at + len(b)])
        at += len(b)
    return out


def _stable_order(key: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """The order of rows by (key, minor), ``minor`` non-negative and distinct among rows
    with one key: what a stable sort by ``minor`` then by ``key`` gives. When both fit in
    one int64 that is sorted with numpy's default (not stable, SIMD) sort, which is
    several times faster than a stable one on these sizes."""
    if len(key) < 2:
        return np.arange(len(key))
    lo = int(key.min())
    span = int(minor.max()) + 1
    if (int(key.max()) - lo + 1) * span < (1 << 62):
        return np.argsort((key - lo) * span + minor)
    return np.lexsort((minor, key))


def _match_sends(s_k1, s_k2, s_pos, r_k1, r_k2, r_pos) -> np.ndarray:
    """For each send, the receive it is paired with by :func:`_pair`'s rule (the j-th send
    with a key takes the j-th receive with that key, in ``pos`` order), or -1. With the
    compiled helper (``_match.c``) one hash of the keys, linear; otherwise two sorts."""
    out = np.full(len(s_k1), -1, np.int64)
    if not len(s_k1) or not len(r_k1):
        return out
    lib = _kernel.match()
    if lib is not None and _ascending(s_pos) and _ascending(r_pos):
        sk1, sk2, rk1, rk2 = (np.ascontiguousarray(a, np.int64) for a in (s_k1, s_k2, r_k1, r_k2))
        scratch = np.empty(len(rk1), np.int64)
        adr = _kernel.address
        if lib.sigex_pair(len(sk1), adr(sk1), adr(sk2), len(rk1), adr(rk1), adr(rk2), adr(out),
                          adr(scratch)) == 0:
            return out
        out[:] = -1
    si, ri = _pair(s_k1, s_k2, s_pos, r_k1, r_k2, r_pos)
    out[si] = ri
    return out


def _ascending(a: np.ndarray) -> bool:
    return bool(len(a) < 2 or np.all(a[1:] > a[:-1]))


def _run_order(key: np.ndarray, P: int) -> np.ndarray:
    """The stable order of ``key`` (ties in row order) when its rows come as a few sorted
    runs per rank: numpy's stable sort merges runs (timsort), linear in the rows per run
    level; with few rows per rank, one combined-key sort (:func:`_stable_order`) is faster."""
    if len(key) > 64 * max(P, 1):
        return np.argsort(key, kind="stable")
    return _stable_order(key, np.arange(len(key)))


def _pair(s_k1, s_k2, s_pos, r_k1, r_k2, r_pos):
    """Match sends and receives with equal keys by ordinal: returns index pairs.

    The j-th send (in ``pos`` order) with key (k1, k2) is paired with the j-th receive
    with that key. One sort per side on a combined key, then each run of sends with one
    key finds its receives by one search in the receives' sorted keys."""
    if not len(s_k1) or not len(r_k1):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    sk, rk = _dense_key([s_k1, r_k1], [s_k2, r_k2])
    s_order, r_order = _stable_order(sk, s_pos), _stable_order(rk, r_pos)
    sks, rks = sk[s_order], rk[r_order]
    # per run of sends with one key: its first receive (one search per distinct key); the
    # j-th send of the run takes the receive j places on if that one has the key too
    new = np.ones(len(sks), bool)
    new[1:] = sks[1:] != sks[:-1]
    starts = _nonzero(new)
    lens = np.diff(np.append(starts, len(sks)))
    cand = np.repeat(np.searchsorted(rks, sks[starts]) - starts, lens) + np.arange(len(sks))
    hit = cand < len(rks)
    hit[hit] = rks[cand[hit]] == sks[hit]
    return s_order[hit], r_order[cand[hit]]


def _unused_mask(n: int, used: np.ndarray) -> np.ndarray:
    """Of rows 0..n-1, those not in ``used`` (as a mask)."""
    mask = np.ones(n, bool)
    mask[used] = False
    return mask


def _unused(n: int, used: np.ndarray) -> np.ndarray:
    """Rows 0..n-1 not in ``used``, in order."""
    return _nonzero(_unused_mask(n, used))


def _csr(owners: list[np.ndarray], values: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the (owner, value) pairs of every group in turn, each owner's values in input
    order (a stable sort by owner: a counting sort in ``_match.c``, else numpy's)."""
    owner = np.concatenate(owners) if owners else np.zeros(0, np.int64)
    value = np.concatenate(values).astype(np.int64, copy=False) if values else owner
    lib = _kernel.match()
    if lib is not None:
        owner = np.ascontiguousarray(owner, np.int64)
        value = np.ascontiguousarray(value, np.int64)
        offsets = np.empty(n + 1, np.int64)
        out = np.empty(len(owner), np.int64)
        adr = _kernel.address
        lib.sigex_csr(len(owner), adr(owner), adr(value), n, adr(offsets), adr(out))
        return offsets, out
    offsets = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n))]).astype(np.int64)
    # the groups' owners are each sorted (blocking calls, waits in trace order): a merge sort
    # of a few runs, near-linear
    order = np.argsort(owner, kind="stable")
    return offsets, value[order]


def _expand_starts(cols, comp, phase, lists, rank_offsets, name: str = "the trace"):
    """One event per request started by Start/Startall, acting as the nonblocking
    post of its ``*_init`` call (same peer, tag, communicator, size).

    Returns the new columns, burst and phase arrays, the op code each event acts as,
    and the new rank offsets."""
    op = cols["op"]
    E = len(op)
    is_sa = op == OP_CODE["Startall"]
    is_start = is_sa | (op == OP_CODE["Start"])
    if not is_start.any():
        return cols, comp, phase, op.copy(), rank_offsets
    # the requests of each Startall (one LIST_STARTED row per request, in its order)
    s_ev, s_req = started_requests(op, cols["rank"], cols["seq"], cols["req"], lists, name)
    per = np.bincount(s_ev, minlength=E).astype(np.int64)
    first_req = np.cumsum(per) - per
    counts = np.where(is_sa, np.maximum(per, 1), 1)
    src = np.repeat(np.arange(E), counts)
    first_of = np.concatenate([[0], np.cumsum(counts)[:-1]])
    within = np.arange(len(src)) - first_of[src]
    cols = {k: v[src] for k, v in cols.items()}
    comp = np.where(within == 0, comp[src], 0.0)  # the burst goes before the first post
    phase = None if phase is None else np.asarray(phase)[src]
    took = is_sa[src] & (within < per[src])
    req = cols["req"].copy()
    req[took] = s_req[first_req[src[took]] + within[took]]
    cols["req"] = req
    op = cols["op"]
    n = len(op)
    act = op.copy()
    is_start = is_start[src]
    pos = np.arange(n, dtype=np.int64)
    rmax = int(max(req.max(), 0)) + 2
    key = cols["rank"] * rmax + (req + 1)
    ii = _nonzero(PERSISTENT_INIT.take(op) & (req >= 0))
    si = _nonzero(is_start & (req >= 0))
    found = _lookup(key[ii], pos[ii], key[si], pos[si], side="before")
    ok = found >= 0
    si, init = si[ok], ii[found[ok]]
    act[si] = _INIT_EFFECT[op[init]]
    cols["list_seq"] = cols["seq"].copy()  # a started request's lists are its init call's
    for c in ("peer", "root", "tag", "comm", "bytes", "recv_bytes", "list_seq"):
        v = cols[c].copy()
        v[si] = cols[c if c != "list_seq" else "seq"][init]
        cols[c] = v
    cum = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return cols, comp, phase, act, cum[rank_offsets]


#: Event columns the build widens to int64 whole (the others are widened where subsets are used)
_WIDE_COLUMNS = ("rank", "seq", "req", "bytes", "recv_bytes")


def _build(*, name: str, nprocs: int, rank_offsets, cols: dict[str, np.ndarray], comp, phase,
           completions: Mapping[str, np.ndarray], lists, comms: CommTable,
           phase_weights: Sequence[float] | None) -> Program:
    P = nprocs
    # rank, seq, req and the sizes take part in arithmetic: int64 (no copy when they are
    # already); the other columns keep their dtype (int32 in a trace) and are widened where
    # a subset of them is used, which spares the page faults and memory of five E-long copies
    cols = {k: np.asarray(v, np.int64) if k in _WIDE_COLUMNS else np.asarray(v)
            for k, v in cols.items()}
    comp = np.asarray(comp, np.float64)
    rank_offsets = np.asarray(rank_offsets, np.int64)
    bad = _nonzero(~np.isfinite(comp) | (comp < 0))
    if bad.size:
        i = int(bad[0])
        raise TraceFormatError(f"{name}: rank {cols['rank'][i]} seq {cols['seq'][i]} "
                               f"({OPS[cols['op'][i]]}): compute burst {float(comp[i])!r} is not a time >= 0")
    cols, comp, phase, act, rank_offsets = _expand_starts(cols, comp, phase, lists, rank_offsets, name)
    E = len(act)
    rank, seq, op, req = cols["rank"], cols["seq"], cols["op"], cols["req"]
    peer, comm, tag = cols["peer"], cols["comm"], cols["tag"]

    # ---- completions: the Wait/Test event and the post that created each request ------
    c_rank = np.asarray(completions["rank"], np.int64)
    nc = len(c_rank)
    c_seq = np.asarray(completions["seq"], np.int64)
    c_req = np.asarray(completions["req"], np.int64)
    c_peer = np.asarray(completions.get("peer", np.full(nc, -1)), np.int64)
    c_tag = np.asarray(completions.get("tag", np.full(nc, -1)), np.int64)
    c_ev = np.full(nc, -1, np.int64)
    lib = _kernel.match()
    if E and nc:
        if lib is not None:  # a binary search in the rank's events
            i = np.empty(nc, np.int64)
            # (every array handed to C contiguous: a trace's columns may be strided views)
            q_rank, q_seq, offs, ev_seq = (np.ascontiguousarray(a, np.int64)
                                           for a in (c_rank, c_seq, rank_offsets, seq))
            adr = _kernel.address
            lib.sigex_find_events(nc, adr(q_rank), adr(q_seq), P, adr(offs), adr(ev_seq), adr(i))
            hit = (i >= 0) & WAITS[act[np.maximum(i, 0)]] & (c_req >= 0)
        else:
            i = _find_events(rank, seq, c_rank, c_seq)
            hit = (i >= 0) & WAITS.take(act[np.maximum(i, 0)]) & (c_req >= 0)
        c_ev[hit] = i[hit]
    live = c_ev >= 0
    c_creator = np.full(nc, -1, np.int64)
    if live.any():
        post_idx = _nonzero((req >= 0) & _POSTS.take(act))
        rmax = int(max(req.max() if E else 0, c_req.max() if nc else 0)) + 2
        found = _latest_before(rank[post_idx] * rmax + req[post_idx] + 1, post_idx,
                               c_rank[live] * rmax + c_req[live] + 1, c_ev[live])
        c_creator[_nonzero(live)[found >= 0]] = post_idx[found[found >= 0]]
    done = c_creator >= 0
    # the actual source and tag of nonblocking receives, from their completion (int32 where
    # the values fit, as they do in a trace: E-long columns of fresh memory cost page faults
    # on a first build); none if no request was completed
    comp_peer = comp_tag = None
    if done.any():
        vals = np.concatenate([c_peer[done], c_tag[done]])
        small = np.int32 if np.iinfo(np.int32).min <= vals.min() and \
            vals.max() <= np.iinfo(np.int32).max else np.int64
        comp_peer = np.full(E, -1, small)
        comp_tag = np.full(E, -1, small)
        comp_peer[c_creator[done]] = c_peer[done]
        comp_tag[c_creator[done]] = c_tag[done]

    # ---- point-to-point messages ------------------------------------------------------
    # a send whose completion says it was cancelled (peer MPI_PROC_NULL) sent nothing;
    # a cancelled receive is dropped below through its completed source
    sending = SEND_POST.take(act) & (peer >= 0)
    if comp_peer is not None:
        sending &= comp_peer != PEER_NULL
    if not sending.any() and not RECV_POST.take(act).any() and not RMA.take(act).any():
        # no point-to-point operation (a trace of collectives): no message
        msg_send_event = msg_recv_event = msg_src = msg_dst = msg_bytes = msg_mode = \
            np.zeros(0, np.int64)
    else:
        s_ev = _nonzero(sending)
        s_src, s_dst = rank[s_ev], peer[s_ev].astype(np.int64)
        s_comm, s_tag = comm[s_ev].astype(np.int64), tag[s_ev].astype(np.int64)
        r_ev = _nonzero(RECV_POST.take(act))
        a = act[r_ev]
        both = SEND_POST.take(a)  # Sendrecv family: the receive's source is in recv_peer
        r_src = np.where(both, cols["recv_peer"][r_ev], peer[r_ev]).astype(np.int64)
        nb = NONBLOCKING_RECV.take(a)
        if comp_peer is not None:
            cp, ct = comp_peer[r_ev], comp_tag[r_ev]
            r_src = np.where(nb & ((cp >= 0) | (cp == PEER_NULL)), cp, r_src)
            # the receive tag of Sendrecv is not recorded: assume the usual idiom (every rank runs
            # the same call, so the tag it receives is the tag it sends); left-overs match on
            # (src, comm)
            r_tag = np.where(nb & (ct >= 0), ct, np.where(both & nb, -1, tag[r_ev])).astype(np.int64)
        else:
            r_tag = np.where(both & nb, -1, tag[r_ev]).astype(np.int64)
        keep = r_src != PEER_NULL
        r_ev, r_src, r_tag = r_ev[keep], r_src[keep], r_tag[keep]
        r_dst, r_comm = rank[r_ev], comm[r_ev].astype(np.int64)

        def k1(src, dst):
            return src * (P + 1) + dst

        def k2(c, t):
            return (c + 1) * (1 << 32) + (t & 0xFFFFFFFF)

        known = _nonzero((r_src >= 0) & (r_tag >= 0))
        # by_send[i]: the receive (index into r_ev) send i is matched with, or -1
        by_send = _match_sends(k1(s_src, s_dst), k2(s_comm, s_tag), s_ev,
                               k1(r_src[known], r_dst[known]), k2(r_comm[known], r_tag[known]),
                               r_ev[known])
        hit = by_send >= 0
        by_send[hit] = known[by_send[hit]]
        # receives whose tag is unknown, or whose assumed tag matched nothing, take the
        # left-over sends in order, on (src, dst, comm)
        s_left = _nonzero(~hit)
        r_left = _nonzero((r_src >= 0) & _unused_mask(len(r_ev), by_send[hit]))
        r_left = r_left[(r_tag[r_left] < 0) | TAGLESS_RECV.take(act[r_ev[r_left]])]
        if len(s_left) and len(r_left):
            m2 = _match_sends(k1(s_src[s_left], s_dst[s_left]), s_comm[s_left], s_ev[s_left],
                              k1(r_src[r_left], r_dst[r_left]), r_comm[r_left], r_ev[r_left])
            by_send[s_left] = np.where(m2 >= 0, r_left[np.maximum(m2, 0)], -1)
        # the matched pairs in send order: the messages numbered below then come as a few runs
        # sorted by position within each rank, which a merge sort takes in near-linear time
        si = _nonzero(by_send >= 0)
        ri = by_send[si]
        s_un = _nonzero(by_send < 0)
        r_un = _unused(len(r_ev), ri)
        rma = _nonzero(RMA.take(act) & (peer >= 0))  # transfers no receive matches
        msg_send_event = np.concatenate([s_ev[si], s_ev[s_un], rma, np.full(len(r_un), -1, np.int64)])
        msg_recv_event = np.concatenate([r_ev[ri], np.full(len(s_un) + len(rma), -1, np.int64),
                                         r_ev[r_un]])
        msg_src = np.concatenate([s_src[si], s_src[s_un], rank[rma], r_src[r_un]])
        msg_dst = np.concatenate([s_dst[si], s_dst[s_un], peer[rma].astype(np.int64), r_dst[r_un]])
        msg_bytes = np.concatenate([cols["bytes"][s_ev[si]], cols["bytes"][s_ev[s_un]],
                                    cols["bytes"][rma] + cols["recv_bytes"][rma],
                                    cols["recv_bytes"][r_ev[r_un]]])
        # number messages "time-major": by the position of the posting event within its
        # rank, then by rank, so that the messages a replay step touches lie together
        first = np.where(msg_send_event >= 0, msg_send_event, msg_recv_event)
        owner = rank[first]
        order = _run_order((first - rank_offsets[owner]) * (P + 1) + owner, P)
        msg_send_event, msg_recv_event = msg_send_event[order], msg_recv_event[order]
        msg_src, msg_dst, msg_bytes = msg_src[order], msg_dst[order], msg_bytes[order]
        sact = act[np.maximum(msg_send_event, 0)]
        msg_mode = np.where(msg_send_event < 0, MODE_STANDARD,
                            np.where(SYNC_SEND[sact], MODE_SYNC,
                                     np.where(BUFFERED_SEND[sact], MODE_BUFFERED, MODE_STANDARD)))
    M = len(msg_src)
    send_msg = np.full(E, -1, np.int64)
    recv_msg = np.full(E, -1, np.int64)
    has = msg_send_event >= 0
    send_msg[msg_send_event[has]] = _nonzero(has)
    has = msg_recv_event >= 0
    recv_msg[msg_recv_event[has]] = _nonzero(has)

    # ---- collective instances ---------------------------------------------------------
    coll = _collectives(name, P, rank, seq, op, act, cols, comms, lists)
    coll_slot = np.full(E, -1, np.int64)
    coll_slot[coll["events"]] = coll["slot"]

    # ---- what each event waits for ----------------------------------------------------
    owners, slots = [], []
    blk = _nonzero(BLOCKING_P2P.take(act))
    for arr, base in ((send_msg, 0), (recv_msg, M)):
        v = arr[blk]
        owners.append(blk[v >= 0])
        slots.append(v[v >= 0] + base)
    bc = _nonzero(BLOCKING_COLLECTIVE.take(act))
    owners.append(bc)
    slots.append(coll_slot[bc] + 2 * M)
    w, cr = c_ev[done], c_creator[done]
    for arr, base in ((send_msg, 0), (recv_msg, M), (coll_slot, 2 * M)):
        v = arr[cr]
        owners.append(w[v >= 0])
        slots.append(v[v >= 0] + base)
    wait_offsets, wait_slots = _csr(owners, slots, E)

    pw = None if phase_weights is None else np.asarray(phase_weights, np.float64)
    return Program(
        nprocs=P, rank_offsets=rank_offsets, op=op.astype(np.uint8), seq=seq,
        comp=np.ascontiguousarray(comp, np.float64),
        phase=None if phase is None else np.asarray(phase, np.int64),
        send_msg=send_msg, recv_msg=recv_msg, coll_slot=coll_slot,
        wait_offsets=wait_offsets, wait_slots=wait_slots, msg_src=msg_src, msg_dst=msg_dst,
        msg_bytes=msg_bytes, msg_mode=msg_mode.astype(np.int8), msg_send_event=msg_send_event,
        msg_recv_event=msg_recv_event, coll_offsets=coll["offsets"], coll_rank=coll["rank"],
        coll_event=coll["event"], coll_op=coll["op"], coll_root=coll["root"],
        coll_bytes=coll["bytes"], coll_comm=coll["comm"], phase_weights=pw, name=name,
        neighbor_patterns=coll["neighbor_patterns"])


#: Collectives whose ``bytes`` column is a total over all peers (divided by the size).
_TOTAL_SENT = _table(("Alltoallv", "Ialltoallv", "Alltoallw", "Ialltoallw", "Reduce_scatter",
                      "Ireduce_scatter"))
#: Collectives whose block is the receive side.
_RECV_BLOCK = _table(("Scatter", "Iscatter", "Scatterv", "Iscatterv"))
#: Collectives whose two columns carry the same vector (either may be 0 or in place).
_SYMMETRIC = _table(("Bcast", "Ibcast", "Reduce", "Ireduce", "Allreduce", "Iallreduce",
                     "Scan", "Iscan", "Exscan", "Iexscan", "Reduce_scatter_block",
                     "Ireduce_scatter_block"))


def _neighbor_patterns(name, coll_op, offsets, event, slot_rank, inst_comm, root, coll_bytes,
                       rank, cols, lists, local_of) -> tuple:
    """Patterns of the neighbourhood-collective instances, from each member's recorded
    destinations and bytes per destination (``lists``); sets their ``root`` to the
    pattern's index (equal patterns shared) and ``coll_bytes`` to the largest message."""
    code = COLLECTIVE_NAMES.index("Neighbor")
    insts = _nonzero(coll_op == code)
    if not insts.size:
        return ()
    table: dict[tuple, tuple[int, int]] = {}
    if lists is not None and len(lists.get("rank", ())):
        for r, s, k, a, n in zip(*(np.asarray(lists[c]).tolist() for c in
                                   ("rank", "seq", "kind", "start", "length"))):
            table[(r, s, k)] = (a, n)
    values = np.asarray(lists["values"], np.int64) if table else np.zeros(0, np.int64)
    list_seq = cols.get("list_seq", cols["seq"])
    seen: dict[bytes, int] = {}
    patterns = []
    for i in insts.tolist():
        a, b = int(offsets[i]), int(offsets[i + 1])
        src, dst, nb = [], [], []
        for j in range(a, b):
            e = int(event[j])
            if e < 0:
                continue
            key = (int(rank[e]), int(list_seq[e]))
            if (*key, LIST_DESTS) not in table or (*key, LIST_SEND) not in table:
                raise TraceFormatError(f"{name}: rank {key[0]} seq {key[1]} ({OPS[cols['op'][e]]}): "
                                       "the neighbourhood collective's destinations were not "
                                       "recorded; trace the run again with this sigex")
            d0, nd = table[(*key, LIST_DESTS)]
            b0, _ = table[(*key, LIST_SEND)]
            dests, sizes = values[d0:d0 + nd], values[b0:b0 + nd]
            real = dests >= 0  # MPI_PROC_NULL ends of a Cartesian grid move nothing
            local = local_of(np.full(int(real.sum()), inst_comm[i]), dests[real])
            src.append(np.full(len(local), j - a))
            dst.append(local)
            nb.append(sizes[real])
        src = np.concatenate(src) if src else np.zeros(0, np.int64)
        dst = np.concatenate(dst) if dst else np.zeros(0, np.int64)
        nb = np.concatenate(nb) if nb else np.zeros(0, np.int64)
        pat = neighbor_pattern(b - a, src, dst, nb)
        sig = np.concatenate([[b - a], pat.src, pat.dst, pat.nbytes]).astype(np.int64).tobytes()
        if sig not in seen:
            seen[sig] = len(patterns)
            patterns.append(pat)
        root[i] = seen[sig]
        coll_bytes[i] = int(nb.max()) if nb.size else 0
    return tuple(patterns)


def _collectives(name, P, rank, seq, op, act, cols, comms: CommTable, lists=None) -> dict:
    """Number collective calls into instances (communicator, ordinal) and slots."""
    ce = _nonzero(COLLECTIVE.take(act))
    c_comm = cols["comm"][ce].astype(np.int64)
    n_comms = len(comms)
    bad = _nonzero((c_comm < 0) | (c_comm >= n_comms))
    if bad.size:
        e = int(ce[bad[0]])
        raise TraceFormatError(f"{name}: rank {rank[e]} seq {seq[e]} ({OPS[op[e]]}) names "
                               f"communicator {c_comm[bad[0]]}, which the trace does not describe")
    sizes = np.asarray(comms.size, np.int64)
    moff = np.asarray(comms.member_offsets, np.int64)
    members = np.asarray(comms.members, np.int64)
    m_comm = np.repeat(np.arange(n_comms, dtype=np.int64), sizes)
    m_local = np.arange(len(members), dtype=np.int64) - moff[:-1][m_comm]
    mkey = m_comm * (P + 1) + members
    morder = np.argsort(mkey, kind="stable")
    mkey_sorted = mkey[morder]
    # (communicator, world rank) -> local rank: an array over every pair where that is small
    # and each pair is one member (a gather per query), else a search in the sorted pairs
    dense = None
    if n_comms * (P + 1) <= max(1 << 20, 4 * len(members)) and \
            not np.any(mkey_sorted[1:] == mkey_sorted[:-1]):
        dense = np.full(n_comms * (P + 1), -1, np.int64)
        dense[mkey] = m_local

    def local_of(c, world):
        if not len(mkey_sorted):
            return np.full(len(c), -1, np.int64)
        q = c * (P + 1) + world
        if dense is not None:
            ok = (q >= 0) & (q < len(dense))
            return np.where(ok, dense[np.where(ok, q, 0)], -1)
        i = np.minimum(np.searchsorted(mkey_sorted, q), len(mkey_sorted) - 1)
        return np.where(mkey_sorted[i] == q, m_local[morder[i]], -1)

    c_local = local_of(c_comm, rank[ce])
    bad = _nonzero(c_local < 0)
    if bad.size:
        e = int(ce[bad[0]])
        raise TraceFormatError(f"{name}: rank {rank[e]} seq {seq[e]} ({OPS[op[e]]}) calls a "
                               f"collective on communicator {c_comm[bad[0]]} without being a member")
    if np.any(np.asarray(comms.inter, bool)[c_comm]):
        e = int(ce[_nonzero(np.asarray(comms.inter, bool)[c_comm])[0]])
        raise TraceFormatError(f"{name}: rank {rank[e]} seq {seq[e]} ({OPS[op[e]]}): collectives "
                               "on intercommunicators are not replayed yet")
    # the k-th call of a rank on a communicator, in event order (ce ascends: a stable sort of
    # the combined key is the lexsort of _ordinals)
    ordinal = _key_ordinals(c_comm * (P + 1) + rank[ce], n_comms * (P + 1))
    # instances (communicator, ordinal) numbered in that order: the ordinals of a
    # communicator are 0..k-1 (every member counts its own calls), so an instance's number is
    # the instances of the communicators before its own plus its ordinal (what np.unique of
    # the pairs gives, without its sort)
    n_ord = np.zeros(n_comms, np.int64)
    np.maximum.at(n_ord, c_comm, ordinal + 1)
    inst = (np.cumsum(n_ord) - n_ord)[c_comm] + ordinal
    I = int(n_ord.sum())
    inst_comm = np.repeat(np.arange(n_comms, dtype=np.int64), n_ord)
    inst_size = sizes[inst_comm]
    offsets = np.concatenate([[0], np.cumsum(inst_size)]).astype(np.int64)
    C = int(offsets[-1])
    slot = offsets[inst] + c_local
    event = np.full(C, -1, np.int64)
    event[slot] = ce
    slot_inst = np.repeat(np.arange(I, dtype=np.int64), inst_size)
    slot_local = np.arange(C, dtype=np.int64) - offsets[slot_inst]
    slot_rank = members[moff[inst_comm][slot_inst] + slot_local] if C else np.zeros(0, np.int64)
    code = _COLL_CODE.take(act[ce])
    coll_op = np.full(I, -1, np.int64)
    coll_op[inst] = code
    clash = _nonzero(coll_op[inst] != code)
    if clash.size:
        j = int(clash[0])
        e = int(ce[j])
        other = int(ce[_nonzero((inst == inst[j]) & (code != code[j]))[0]])
        raise TraceFormatError(
            f"{name}: collective call {int(ordinal[j])} on communicator {c_comm[j]} is "
            f"{OPS[op[e]]} on rank {rank[e]} (seq {seq[e]}) but {OPS[op[other]]} on rank "
            f"{rank[other]} (seq {seq[other]}): members must call collectives in the same order")
    root_w = cols["root"][ce].astype(np.int64)
    root_l = np.where(root_w >= 0, local_of(c_comm, np.maximum(root_w, 0)), -1)
    root = np.zeros(I, np.int64)
    np.maximum.at(root, inst, root_l)
    nbytes, rbytes = cols["bytes"][ce], cols["recv_bytes"][ce]
    a = act[ce]
    block = np.where(_RECV_BLOCK.take(a), rbytes, nbytes)
    block = np.where(_SYMMETRIC.take(a), np.maximum(nbytes, rbytes), block)
    total = _TOTAL_SENT.take(a)
    if total.any():  # (an integer division over every call costs more than the test)
        block = np.where(total, -(-nbytes // np.maximum(sizes[c_comm], 1)), block)
    coll_bytes = np.zeros(I, np.int64)
    np.maximum.at(coll_bytes, inst, block)
    patterns = _neighbor_patterns(name, coll_op, offsets, event, slot_rank, inst_comm, root,
                                  coll_bytes, rank, cols, lists, local_of)
    return {"neighbor_patterns": patterns,
            "events": ce, "slot": slot, "offsets": offsets, "rank": slot_rank, "event": event,
            "op": coll_op, "root": root, "bytes": coll_bytes, "comm": inst_comm}
