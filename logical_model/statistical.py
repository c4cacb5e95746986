"""Phases whose calls per rank depend on the rank and on P, modelled by expected values.

Some phases make a number of calls that differs from rank to rank and from P to P in
a way no communication rule of :mod:`~logical_model.rules` reproduces: a
redistribution between two decompositions of one grid (an FFT's remap from bricks to
pencils: each rank talks to the ranks whose pencils overlap its brick, a set whose size
depends on the rank, the grid and P), or exchanges whose count follows the data. The
exact model (:func:`~logical_model.model.build`) refuses such a phase; this module
models it statistically instead, as the issue asks of data-dependent counts:
"modelled as expected messages and bytes per slot and class, regressed over P like
any other quantity; the logical trace realises them so that counts and volumes follow
the model".

**Runs.** Each rank's events of one repetition are cut into *runs*: consecutive calls
of one operation with one tag on one communicator (a remap posts its receives in one
run, sends in the next, waits in a third). A run is keyed by (operation, tag,
communicator: MPI_COMM_WORLD and each of its duplicates by creation order, or the
Cartesian grid; the segment of calls on that communicator it belongs to, a segment
ending where another communicator or a collective comes; for calls to a peer on the
world or the declared grid, the grid dimensions the peer lies along) and its occurrence
in the segment; a run of waits by the run of nonblocking posts it completes. A rank
with no call of a run (no overlap with any pencil) lacks the run. The runs of every
rank at every P are merged into one order (a topological sort, as for the exact
slots); where a smaller P's order contradicts a larger one's (runs it numbers otherwise
because it makes fewer), the larger P's order wins.

**Channels.** Every message of a repetition is matched with its receive (sender,
receiver and communicator in order, as MPI matches them): a *channel* is a pair (run
that sends, run that receives). Per channel and P: messages per rank (its total over
the ranks / P, zero at a P where it has none) and bytes per message, each fitted over P
with the shared model search. A message whose receive lies outside the repetition
refuses the phase (it would need the next repetition's calls). A receive posted with
MPI_ANY_SOURCE takes, in order, the messages to its rank on its communicator that no
receive naming their source takes (the template keeps no completion's source, and
which sender MPI matched first follows the run's timing anyway); such receives left
over are tolerated up to the requests the rank cancels in the repetition (hpcc's
RandomAccess posts one receive more than it gets, and cancels it at the end): they
move nothing and are not realised. As the model's last resort (``crossing``), messages
whose other end lies in another phase may be left out of the channels up to a share of
the repetition's messages, and counted.

**Collectives** of a run are called the same number of times by every rank at each P
(else the phase is refused: a replay of it would deadlock); their count and mean bytes
per call are fitted over P, their root is a rule of P.

**Waits.** A run of waits has one call per request its post run made (Waitany,
Wait), or one call when that made any (Waitall), whichever holds on every rank at
every P; otherwise its mean count per rank is fitted.

The fits themselves (exact grid forms of counts and sizes, least squares on a grid
dimension, the model search, phase totals) are in :mod:`logical_model.model`
(``_statistical_phase``), which builds the slots.

**Realisation** (:func:`channel_rows`): a channel with m(P) messages per rank sends
round(m P) messages at P, one more on the first ranks than on the others, rank r's
j-th to rank r + 1 + (j mod (P - 1)) and the receiver posting it where its own run
is; each of the bytes per message model. The counts and volumes per phase follow the
model; the peers do not follow the program's (they are not known): reports call such a
phase statistical, not exact.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from typing import Any

import numpy as np

__all__ = ["Run", "Channel", "Space", "runs", "match", "comm_families", "channel_rows", "cross_rows", "spread_counts",
           "lex_topological", "StatisticalError"]


class StatisticalError(ValueError):
    """The phase cannot be modelled statistically either (the reason, one line)."""


@dataclasses.dataclass
class Run:
    """One run slot: its key, and per P the events of every rank in it."""

    key: tuple
    op: int
    tag: int
    comm: Any  # ("world", ordinal), ("cart",) or ("-",) for waits
    #: per P: (ranks, event indices into the phase template), one entry per event
    events: dict = dataclasses.field(default_factory=dict)
    #: index of the post run a wait run completes (None: not a wait run, or none)
    after: int | None = None


@dataclasses.dataclass(frozen=True)
class Channel:
    """Messages from one run to another: per P, messages and bytes in all."""

    send: int  # run index
    recv: int  # run index
    messages: dict  # P -> number of messages (all ranks)
    bytes: dict  # P -> bytes in all
    mixed: bool = False  # its messages differ in size at some P (their mean is an expected value)
    #: P -> the ranks that send (receive) its messages, sorted: where a run every rank makes
    #: sends to a class of ranks (the particle ranks' coordinates to the PME ranks), which
    #: of its ranks take part
    senders: dict = dataclasses.field(default_factory=dict, compare=False)
    receivers: dict = dataclasses.field(default_factory=dict, compare=False)


def _comm_key(c: int, kind: int, world_ids: list[int], world: int, cart: int, family: dict | None = None):
    if c < 0:
        return ("-",)
    if kind == cart:
        return ("cart",)
    if kind == world:
        return ("world", world_ids.index(c))
    if family and c in family:
        return family[c]
    return None


@dataclasses.dataclass(frozen=True)
class Space:
    """The ranks that make a run of calls, and where its messages go: ``role`` a
    sub-communicator layout (:class:`~logical_model.rules.ClassComm` or
    :class:`~logical_model.topology.SubGrid`) and, for a class split, the ``colour`` of its
    communicator the run is on (None: every communicator of the layout: rows, columns);
    or, on MPI_COMM_WORLD, ``members``: the class of world ranks that make the run (a
    "member" rule: the particle ranks of a particle/PME split). Neither: every rank.
    A run's channels are realised among the ranks of its space, in their own numbering
    (:meth:`layout`); a channel between two spaces by :func:`cross_rows`."""

    role: Any = None
    colour: int | None = None
    members: Any = None

    def layout(self, ranks: np.ndarray, P: int):
        """(inside, group, local rank, ranks per group) of each world rank: whether it makes
        the run, its communicator (colour), its rank among the space's ranks of that
        communicator and how many there are."""
        ranks = np.asarray(ranks, np.int64)
        n = len(ranks)
        if self.role is not None:
            colour, local, size = self.role.layout(ranks, P)
            size = np.broadcast_to(np.asarray(size, np.int64), (n,))
            # (a layout over one class's ranks gives the others colour -1)
            inside = np.asarray(colour) >= 0 if self.colour is None else colour == self.colour
            return inside, np.asarray(colour, np.int64), np.asarray(local, np.int64), size
        if self.members is not None:
            mine = self.members(np.arange(P), P) >= 0
            return mine[ranks], np.zeros(n, np.int64), (np.cumsum(mine) - 1)[ranks], np.full(n, int(mine.sum()))
        return np.ones(n, bool), np.zeros(n, np.int64), ranks, np.full(n, P, np.int64)

    def world(self, group: np.ndarray, local: np.ndarray, P: int) -> np.ndarray:
        """World rank of each (group, local rank); -1 stays -1."""
        local = np.asarray(local, np.int64)
        if self.role is not None:
            return np.where(local >= 0, self.role.world(np.asarray(group, np.int64), local, P), -1)
        if self.members is not None:
            mine = np.flatnonzero(self.members(np.arange(P), P) >= 0)
            return np.where(local >= 0, mine[np.clip(local, 0, max(len(mine) - 1, 0))], -1) if len(mine) else \
                np.full(local.shape, -1, np.int64)
        return local

    def ranks(self, P: int) -> np.ndarray:
        """The world ranks that make the run at P."""
        return np.flatnonzero(self.layout(np.arange(P), P)[0])

    def single(self, P: int) -> bool:
        """Whether the space's ranks share one communicator (group) at P."""
        inside, group, _, _ = self.layout(np.arange(P), P)
        return len(np.unique(group[inside])) <= 1

    def describe(self) -> str:
        if self.role is not None:
            what = self.role.describe()
            if self.colour is not None and what.startswith("split into "):
                side = what[len("split into "):].rsplit(" and the others", 1)[0]
                return f"the communicator of {side}" if self.colour == 1 else f"the communicator of the ranks but {side}"
            return f"communicators {what}"
        if self.members is not None:
            return self.members.describe()
        return "every rank"

    def to_dict(self) -> dict:
        return {"role": self.role.to_dict() if self.role is not None else None, "colour": self.colour,
                "members": self.members.to_dict() if self.members is not None else None}


def comm_families(used: dict[int, dict[int, np.ndarray]], readings: dict | None = None):
    """Sub-communicators of one phase related across P: ``used[P] = {communicator id:
    members}`` (world ranks in communicator rank order) of those its calls use at P.
    Each communicator at the largest P, the largest first, is one side of a split into a
    class of ranks and the others (:func:`~logical_model.rules.infer_class_comm`, the same
    side at every P: the PME ranks' communicator, the particle ranks'), or, with every
    communicator of its size, a row, column or plane layout of a grid
    (:func:`~logical_model.topology.infer_subgrid`), or else lines of a grid over the ranks
    of a class split found before (:func:`class_grid`: GROMACS's particle ranks' domain
    grid); communicators of one rank at every P left then are each rank's own. Returns
    ({P: {communicator id: ("sub", family)}}, [(layout, colour or None) per family]);
    raises :class:`StatisticalError` naming a communicator no layout gives at every P.
    ``readings``, where given, gets {family: [the other layouts that give its communicators
    at every P]} (MPI_Dims_create's grid and a fixed number of groups, alike at 8, 12, 16
    ranks), for the caller to check where they part."""
    from .rules import infer_class_comm
    from .topology import DimsRule, SubGrid, infer_subgrid
    Ps = sorted(used)
    left = {P: {int(c): np.asarray(m, np.int64) for c, m in used[P].items()} for P in Ps}
    keys: dict[int, dict[int, tuple]] = {P: {} for P in Ps}
    fams: list[tuple] = []
    if not Ps:
        return keys, fams
    top, others = Ps[-1], Ps[:-1]
    others_of: dict = {}  # a sub-grid layout -> the others that give its communicators too

    def take(f: int, ids: dict[int, list[int]]) -> None:
        for P, cs in ids.items():
            for c in cs:
                keys[P][c] = ("sub", f)
                left[P].pop(c, None)

    for c in sorted(left[top], key=lambda c: (-len(left[top][c]), c)):
        if c not in left[top] or len(left[top][c]) < 2:
            continue
        m = left[top][c]
        found = None
        # one side of a class split: one communicator at each smaller P, on the same side
        # (a depth-first search, the larger P first: a choice no split gives is not extended)
        def split(obs: dict, rest: list):
            cc = infer_class_comm({P: [left[P][x]] for P, x in obs.items()})
            if cc is None or len({int(cc.layout(left[P][x][:1], P)[0][0]) for P, x in obs.items()}) != 1:
                return None
            if not rest:
                return cc, int(cc.layout(m[:1], top)[0][0]), obs
            for x in sorted(left[rest[0]], key=lambda x: (abs(len(left[rest[0]][x]) * top - len(m) * rest[0]), x)):
                got = split({**obs, rest[0]: x}, rest[1:])
                if got is not None:
                    return got
            # or the phase makes no call on it at that P (a class of one rank that skips
            # its transposes), as long as two P show it
            return split(obs, rest[1:]) if len(obs) + len(rest) > 2 else None

        def layout():  # rows, columns, planes: every communicator of one size at each P
            # (of those of one size, the ones apart from each other: at a square P the rows
            # and the columns of a 4 x 4 grid are all of 4 ranks, hpcc's P x Q)
            size = len(m)
            choices = [[(s, f) for s in sorted({len(v) for v in left[P].values()}) for f in _apart(left[P], s)]
                       for P in others]
            for pick in itertools.product(*choices):
                ids = {top: _apart(left[top], size, c)[0], **{P: f for P, (_, f) in zip(others, pick)}}
                sgs = infer_subgrid({P: [left[P][x] for x in cs] for P, cs in ids.items()})
                if sgs:
                    others_of[sgs[0]] = sgs[1:]
                    return (sgs[0], None), ids
            return None

        # communicators that, with those of their size apart from them, hold every rank are
        # a grid's rows (columns) first; one that does not is a class split first
        fam = _apart(left[top], len(m), c)[0]
        # (communicators of the same members are one: a library's duplicate of each column)
        distinct = {tuple(left[top][x].tolist()) for x in fam}
        tiled = len(distinct) > 1 and sum(map(len, distinct)) == top == len(set().union(*distinct))
        grid = layout() if tiled else None
        if grid is not None and not (grid[0][0].rule.name == "groups" and grid[0][0].n_comms(top) == 2):
            found = grid  # (two groups are a split into a class and the others: its sides apart)
        if found is None:
            got = split({top: c}, others[::-1])
            if got is not None:
                found = ((got[0], got[1]), {P: [x] for P, x in got[2].items()})
        if found is None:
            found = grid if tiled else layout()
        if found is None:
            found = class_grid(m, c, fams, left, top, others)
        if found is None:
            raise StatisticalError(
                f"P={top}: the communicator of ranks {_ranks_text(m)} follows no split into a class of "
                "ranks and the others, nor a row, column or plane layout of a grid, at every P")
        if found[0] in fams:
            f = fams.index(found[0])
        else:
            f = len(fams)
            fams.append(found[0])
        take(f, found[1])
    if any(len(v) != 1 for P in Ps for v in left[P].values()):
        P = next(P for P in Ps if any(len(v) != 1 for v in left[P].values()))
        v = next(v for v in left[P].values() if len(v) != 1)
        raise StatisticalError(f"P={P}: the communicator of ranks {_ranks_text(v)} has no counterpart at "
                               f"P={top} that a layout relates it to")
    if any(left[P] for P in Ps):  # each rank's own communicator
        own = (SubGrid(DimsRule("dims_create", 1), (False,)), None)
        fams.append(own)
        take(len(fams) - 1, {P: list(left[P]) for P in Ps})
    if readings is not None:
        readings.update({f: others_of[role] for f, (role, _) in enumerate(fams) if others_of.get(role)})
    return keys, fams


def class_grid(m: np.ndarray, c: int, fams: list, left: dict, top: int, others: list):
    """The family of communicator ``c`` (members ``m`` at P = ``top``) as lines of a grid
    over the ranks of one side of a class split found before (``fams``): its
    communicators at each smaller P (of ``left``, none where the phase makes no call on
    them) chosen so that one grid layout (:func:`~logical_model.rules.infer_class_grid`)
    gives them all. GROMACS's particle ranks make, over their own domain grid (3 x 1,
    6 x 1, 4 x 3 at P = 4, 8, 16, with a PME rank in every 4), a load-balancing
    communicator along the first dimension through rank 0 and one along the second for
    each position on the first. Returns ((layout, None), {P: ids}) or None."""
    from .rules import ClassComm, ClassGrid, complement_members, infer_class_grid
    known = [f[0].grid.rule for f in fams if isinstance(f[0], ClassGrid)]
    for role, _ in fams:
        if not isinstance(role, ClassComm):
            continue
        for colour in (0, 1):
            members = role.members if colour == 1 else complement_members(role.members)
            if members is None:
                continue
            mine = {P: set(np.flatnonzero(members(np.arange(P), P) >= 0).tolist()) for P in [top, *others]}
            if not set(m.tolist()) <= mine[top]:
                continue
            within = {P: {x: v for x, v in left[P].items() if set(v.tolist()) <= mine[P]} for P in [top, *others]}
            at_top = _apart(within[top], len(m), c)[0]
            # per smaller P: nothing, or a family of its communicators inside the class
            choices = [[[]] + [f for s in sorted({len(v) for v in within[P].values()}) for f in _apart(within[P], s)]
                       for P in others]
            best = None
            for pick in itertools.product(*choices):
                ids = {top: at_top, **{P: f for P, f in zip(others, pick) if f}}
                roles = infer_class_grid({P: [left[P][x] for x in xs] for P, xs in ids.items()}, members, known)
                if roles and (best is None or len(ids) > len(best[1])):
                    best = ((roles[0], None), ids)
            if best is not None:
                return best
    return None


def _apart(comms: dict[int, np.ndarray], size: int, first: int | None = None) -> list[list[int]]:
    """The communicators of ``size`` ranks among ``comms`` (id -> members) in families of
    communicators apart from each other (no rank in two): each communicator with those
    apart from it, once per family (the one of ``first`` only, when given). Rows and
    columns of one grid share ranks, so a family is one of them."""
    ids = [x for x, v in comms.items() if len(v) == size]
    sets = {x: set(np.asarray(comms[x]).tolist()) for x in ids}
    out: list[list[int]] = []
    for x in ([first] if first is not None else ids):
        fam = [y for y in ids if y == x or not sets[x] & sets[y]]
        if fam not in out:
            out.append(fam)
    return out


def _ranks_text(ranks: np.ndarray, n: int = 8) -> str:
    """The first ``n`` of ``ranks`` in order, for a message."""
    r = [int(x) for x in np.sort(ranks)[:n]]
    return ", ".join(map(str, r)) + (", ..." if len(ranks) > n else "")


def _moved(rank: int, peer: int, grid) -> tuple:
    """The grid dimensions along which ``peer`` lies from ``rank`` (row-major numbering):
    ("self",) for the rank itself, ("-",) off the grid or without one."""
    if grid is None or peer < 0:
        return ("-",)
    dims = grid[0]
    if peer >= int(np.prod(dims)):
        return ("-",)
    if peer == rank:
        return ("self",)
    a, b = np.unravel_index(rank, dims), np.unravel_index(peer, dims)
    return ("dims", *[d for d in range(len(dims)) if a[d] != b[d]])


def runs(per_p: dict, post_ops: frozenset, wait_ops: frozenset, p2p_ops: frozenset, world: int, cart: int,
         grids: dict | None = None, families: dict | None = None, collectives_by_count: frozenset = frozenset(),
         merge: bool = False):
    """The run slots of one phase at every traced P.

    ``per_p[P] = (op, tag, comm, peer, offsets, kinds)``: the template's op, tag,
    communicator id and peer columns, its per-rank offsets, and each communicator id's
    kind (model.py's MPI_COMM_WORLD ``world`` and Cartesian ``cart`` kinds; any other
    makes the phase refused). ``grids[P] = (dims, periods)``: the declared process grid,
    on which the calls to a peer on MPI_COMM_WORLD or the grid are keyed by the
    dimensions they move along too (an exchange along a dimension 1 wide at a small P is
    missing there, not another one). ``families[P] = {communicator id: key}``: the
    sub-communicators :func:`comm_families` relates across P, keyed by their family.
    ``collectives_by_count``: operations (collectives) each call of which is a run of its
    own, keyed by how many calls of that operation the rank made on its communicator
    before it (the k-th Allreduce on a communicator is the
    same call on every member, whatever point-to-point calls each rank made between: a
    phase whose ranks order those differently, realised deferred).
    ``merge``: a run is every call of its kind in the segment, however the rank's other
    calls interleave them (as with split communicators): for a phase whose interleaving
    follows the data (hpcc's RandomAccess: receives, sends and polls as buckets fill),
    realised deferred.
    Returns (runs in one order, per P the run index of
    every template event).
    """
    keys_per_p, run_of_event = {}, {}
    grids, families = grids or {}, families or {}
    # with split communicators, a run is its calls of one operation and tag on one
    # communicator in one segment however the rank's other calls interleave them (ranks
    # order their halo pulses by their place in the decomposition), and a segment ends
    # only where calls on the same communicator turn from point-to-point to collective
    merged = merge or any(families.values())
    for P, (op, tag, comm, peer, offs, kinds) in per_p.items():
        grid = grids.get(P)
        family = families.get(P)
        world_ids = sorted(c for c, k in kinds.items() if k == world)
        ev_keys = np.empty(len(op), object)
        rank_seqs = []
        for r in range(P):
            a, b = int(offs[r]), int(offs[r + 1])
            seq: list[tuple] = []
            count: dict[tuple, int] = {}
            last_post: tuple = ("wrap",)
            prev_base = None
            segment: tuple = ("-",)
            segments: dict[tuple, int] = {}
            on: dict[tuple, tuple] = {}  # merged: per communicator, (point-to-point?, segment)
            n_coll: dict[tuple, int] = {}  # collectives_by_count: calls so far per communicator and operation
            for e in range(a, b):
                o, c = int(op[e]), int(comm[e])
                if o in wait_ops:
                    base = (o, -1, ("after", last_post))
                else:
                    ck = _comm_key(c, kinds.get(c, -99), world_ids, world, cart, family)
                    if ck is None:
                        raise StatisticalError(f"P={P}: rank {r} calls on a communicator that is neither "
                                               "MPI_COMM_WORLD, a duplicate of it, the Cartesian grid nor a "
                                               "split of the ranks sigex relates across P")
                    seg = (ck, o in p2p_ops)
                    if merged:
                        was = on.get(ck)
                        on[ck] = (seg[1], 0 if was is None else was[1] + (was[0] != seg[1]))
                        segment = (seg, on[ck][1])
                    elif seg != segment[0]:  # a new segment: calls on another communicator, or
                        m = segments.get(seg, 0)  # collectives after point-to-point calls
                        segments[seg] = m + 1
                        segment = (seg, m)
                    where = _moved(r, int(peer[e]), grid) if ck in (("world", 0), ("cart",)) else ("-",)
                    base = (o, int(tag[e]), ck, segment[1], where)
                    if o in collectives_by_count:
                        n_coll[ck, o] = n_coll.get((ck, o), -1) + 1
                        base = (o, int(tag[e]), ck, ("call", n_coll[ck, o]), ("-",))
                if base != prev_base:  # a new run
                    n = 0 if merged else count.get(base, 0)
                    count[base] = n + 1
                    seq.append(base + (n,))
                    prev_base = base
                    if o in post_ops:
                        last_post = seq[-1]
                ev_keys[e] = seq[-1]
            rank_seqs.append(seq)
        keys_per_p[P] = rank_seqs
        run_of_event[P] = ev_keys
    # one order of the runs: the largest P's first; an order a smaller P has that
    # contradicts it (runs numbered otherwise where it makes fewer) gives way
    first: dict[tuple, int] = {}
    edges: dict[tuple, None] = {}
    for P in sorted(keys_per_p, reverse=True):
        for seq in {tuple(s): None for s in keys_per_p[P]}:
            for key in seq:
                first.setdefault(key, len(first))
            edges.update(dict.fromkeys((first[a], first[b]) for a, b in zip(seq[:-1], seq[1:])))
    succ: list[set] = [set() for _ in first]
    for a, b in edges:
        succ[a].add(b)
    ids = lex_topological(succ)
    if ids is None:  # contradicting orders: each edge in turn, unless it closes a cycle
        succ = [set() for _ in first]
        for a, b in edges:
            if b not in succ[a] and not _reaches(succ, b, a):
                succ[a].add(b)
        ids = lex_topological(succ)
    keys = list(first)
    order = [keys[i] for i in ids]
    index = {key: i for i, key in enumerate(order)}
    out = [Run(key=key, op=key[0], tag=key[1], comm=key[2]) for key in order]
    for i, run in enumerate(out):
        if run.comm[0] == "after" and run.comm[1] != ("wrap",):
            run.after = index.get(run.comm[1])
    per_event = {}
    for P, (op, tag, comm, peer, offs, kinds) in per_p.items():
        idx = np.fromiter((index[k] for k in run_of_event[P]), np.int64, len(run_of_event[P]))
        rank = np.repeat(np.arange(P), np.diff(offs))
        by_run = np.argsort(idx, kind="stable")  # each run's events in template order
        cuts = np.searchsorted(idx[by_run], np.arange(len(out) + 1))
        for i in range(len(out)):
            sel = by_run[cuts[i]:cuts[i + 1]]
            out[i].events[P] = (rank[sel], sel)
        per_event[P] = idx
    return out, per_event


def lex_topological(succ: list[set]) -> list[int] | None:
    """A topological order of the graph ``succ`` (node i's successors), taking among the
    nodes that may come next the lowest-numbered first, or None if it has a cycle (as
    networkx's lexicographical_topological_sort with the node number as key, in plain lists
    and a heap: phases of thousands of calls order their keys many times)."""
    indeg = [0] * len(succ)
    for s in succ:
        for j in s:
            indeg[j] += 1
    ready = [i for i, d in enumerate(indeg) if d == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        i = heapq.heappop(ready)
        out.append(i)
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(ready, j)
    return out if len(out) == len(succ) else None


def _reaches(succ: list[set], a: int, b: int) -> bool:
    """Whether node ``b`` can be reached from ``a`` in the graph ``succ``."""
    if a == b:
        return True
    seen, stack = {a}, [a]
    while stack:
        for j in succ[stack.pop()]:
            if j == b:
                return True
            if j not in seen:
                seen.add(j)
                stack.append(j)
    return False


def match(per_p: dict, run_idx: dict, send_ops: frozenset, recv_ops: frozenset, both_ops: frozenset,
          any_source: int | None = None, cancel_ops: frozenset = frozenset(), crossing: float = 0.0,
          dropped: dict | None = None):
    """Channels: each message matched with its receive, in order per (sender, receiver,
    communicator), and per tag where ``per_p[P]`` holds the tags and every receive of
    that (sender, receiver, communicator) names its tag (not MPI_ANY_TAG, not a
    Sendrecv's, whose tag the trace does not hold), as MPI matches them: GROMACS's
    particle ranks send the PME rank a flag (tag 9) and then coordinates (tag 7), which
    it receives in the other order. ``per_p[P] = (op, peer, recv_peer, comm, bytes,
    offsets[, tag])``. Receives
    (not Sendrecv) whose peer is ``any_source`` take the messages to their rank on their
    communicator that no receive naming the source takes, in order of source; as many
    of them may be left over as the rank makes calls of ``cancel_ops``. Raises
    :class:`StatisticalError` when a message or a receive has no partner in the
    repetition, unless those are at most a share ``crossing`` of the repetition's
    messages at that P (messages that cross into the phase before or after it: GROMACS's
    last step receives a message its final part sends): they are then left out of the
    channels, and ``dropped[P]`` (where given) counts them."""
    chans: dict[tuple[int, int], dict] = {}
    for P, (op, peer, rpeer, comm, nbytes, offs, *tags) in per_p.items():
        tag = np.asarray(tags[0], np.int64) if tags else None
        rank = np.repeat(np.arange(P), np.diff(offs))
        runs_ = run_idx[P]
        sends: dict[tuple, list] = {}
        recvs: dict[tuple, list] = {}
        wild: dict[tuple, list] = {}  # (receiver, communicator) -> its ANY_SOURCE receives
        cancels = np.zeros(P, np.int64)
        for e in range(len(op)):
            o = int(op[e])
            if o in send_ops or o in both_ops:
                q = int(peer[e])
                if q >= 0:
                    sends.setdefault((int(rank[e]), q, int(comm[e])), []).append(e)
            if o in recv_ops or o in both_ops:
                q = int(rpeer[e]) if o in both_ops else int(peer[e])
                if q >= 0:
                    recvs.setdefault((q, int(rank[e]), int(comm[e])), []).append(e)
                elif any_source is not None and q == any_source and o not in both_ops:
                    wild.setdefault((int(rank[e]), int(comm[e])), []).append(e)
            if o in cancel_ops:
                cancels[rank[e]] += 1
        pairs: list[tuple[tuple, int, int]] = []
        spare: dict[tuple, list] = {}  # (receiver, communicator) -> (sender, send) left for its wildcards
        unpaired = None  # the first (sender, receiver) whose counts part, and how many messages
        n_msgs = sum(len(v) for v in sends.values())
        lost = 0
        for key in sorted(set(sends) | set(recvs)):
            s, r = sends.get(key, []), recvs.get(key, [])
            if tag is not None and r and all(int(op[b]) not in both_ops and tag[b] >= 0 for b in r):
                got, left_s, left_r = _pair_by_tag(s, r, tag)
            else:
                m = min(len(s), len(r))
                got, left_s, left_r = list(zip(s[:m], r[:m])), s[m:], r[m:]
            if left_s and (key[1], key[2]) in wild:
                spare.setdefault((key[1], key[2]), []).extend((key[0], a) for a in left_s)
                left_s = []
            if left_s or left_r:
                unpaired = unpaired or (f"P={P}: rank {key[0]} sends {len(s)} messages to rank {key[1]} and rank "
                                        f"{key[1]} posts {len(r)} receives from it within one repetition"
                                        + (" that pair by tag" if len(s) == len(r) else "")
                                        + " (the others are matched in another repetition or phase)")
                lost += len(left_s) + len(left_r)
            pairs += [(key, a, b) for a, b in got]
        if lost > crossing * max(n_msgs, 1):
            raise StatisticalError(unpaired)
        if lost and dropped is not None:
            dropped[P] = lost
        for (dst, c), w in wild.items():
            got = spare.get((dst, c), [])
            if len(got) > len(w) or len(w) - len(got) > cancels[dst]:
                raise StatisticalError(
                    f"P={P}: rank {dst} posts {len(w)} receives from any source and {len(got)} messages that no "
                    f"other receive takes come to it within one repetition"
                    + (f" (it cancels {int(cancels[dst])})" if cancels[dst] else "")
                    + " (the others are matched in another repetition or phase)")
            pairs += [((src, dst, c), a, b) for (src, a), b in zip(got, w)]
        for key, a, b in pairs:
            ch = chans.setdefault((int(runs_[a]), int(runs_[b])), {})
            n, v, lo, hi, who = ch.get(P, (0, 0, np.inf, -np.inf, (set(), set())))
            who[0].add(key[0])
            who[1].add(key[1])
            ch[P] = (n + 1, v + int(nbytes[a]), min(lo, int(nbytes[a])), max(hi, int(nbytes[a])), who)
    return [Channel(send=s, recv=r, messages={P: x[0] for P, x in d.items()},
                    bytes={P: x[1] for P, x in d.items()}, mixed=any(x[2] != x[3] for x in d.values()),
                    senders={P: np.array(sorted(x[4][0]), np.int64) for P, x in d.items()},
                    receivers={P: np.array(sorted(x[4][1]), np.int64) for P, x in d.items()})
            for (s, r), d in sorted(chans.items())]


def _pair_by_tag(sends: list, recvs: list, tag: np.ndarray) -> tuple[list, list, list]:
    """Sends and receives of one (sender, receiver, communicator), each in its rank's
    order, paired in order per tag: (pairs, sends left, receives left), the pairs in the
    order of their sends."""
    by_tag: dict[int, list] = {}
    for b in recvs:
        by_tag.setdefault(int(tag[b]), []).append(b)
    taken = {t: 0 for t in by_tag}
    got, left_s = [], []
    for a in sends:
        t = int(tag[a])
        n = taken.get(t, 0)
        if n < len(by_tag.get(t, ())):
            got.append((a, by_tag[t][n]))
            taken[t] = n + 1
        else:
            left_s.append(a)
    left_r = [b for t, bs in by_tag.items() for b in bs[taken[t]:]]
    return got, left_s, sorted(left_r)


def spread_counts(total: int, P: int, ranks: np.ndarray) -> np.ndarray:
    """``total`` calls over P ranks: total // P each, one more on the first total % P."""
    total = max(0, int(total))
    return total // P + (np.asarray(ranks, np.int64) < total % P)


def channel_rows(total: int, P: int, ranks: np.ndarray, side: str):
    """Rows of one side of a channel of ``total`` messages at P, for ``ranks``: a list of
    (present, peer, recv_peer) arrays, row j being each rank's j-th message of the
    channel. ``side``: "send" (rank r's j-th goes to r + 1 + j mod (P - 1)), "recv" (the
    matching receives, from r - 1 - j mod (P - 1)) or "both" (a Sendrecv: every rank the
    same count, both at once; calls left over go to pairs of ranks, each partner of the
    other)."""
    ranks = np.asarray(ranks, np.int64)
    n = len(ranks)
    if P < 2 or total <= 0:
        return []
    if side == "both":
        k, extra = divmod(int(total), P)
        rows = []
        for j in range(k):
            d = 1 + j % (P - 1)
            rows.append((np.ones(n, bool), (ranks + d) % P, (ranks - d) % P))
        if extra >= 2:  # the calls left: pairs of the first ranks, each with the other
            present = ranks < extra - extra % 2
            rows.append((present, ranks ^ 1, ranks ^ 1))
        return rows
    K = -(-int(total) // P)
    rows = []
    none = np.full(n, -1, np.int64)
    for j in range(K):
        d = 1 + j % (P - 1)
        if side == "send":
            present = spread_counts(total, P, ranks) > j
            rows.append((present, (ranks + d) % P, none))
        else:
            src = (ranks - d) % P
            present = spread_counts(total, P, src) > j
            rows.append((present, src, none))
    return rows


def cross_rows(total: int, P: int, ranks: np.ndarray, senders: np.ndarray, receivers: np.ndarray, side: str):
    """Rows of one side of a channel of ``total`` messages at P between two classes of
    ranks (world ranks, sorted: the particle ranks sending to the PME ranks, say), as
    :func:`channel_rows` gives them within one: the senders make total // n_senders
    messages each (one more on the first), numbered sender by sender; message g goes to
    receiver g mod n_receivers, so each receiver gets the same number give or take one,
    and takes them in that order. ``side``: "send" or "recv"."""
    ranks = np.asarray(ranks, np.int64)
    senders, receivers = np.asarray(senders, np.int64), np.asarray(receivers, np.int64)
    nS, nR, total = len(senders), len(receivers), max(0, int(total))
    if not total or not nS or not nR:
        return []
    cnt = spread_counts(total, nS, np.arange(nS))
    start = np.concatenate([[0], np.cumsum(cnt)])
    none = np.full(len(ranks), -1, np.int64)
    mine = senders if side == "send" else receivers
    pos = np.minimum(np.searchsorted(mine, ranks), len(mine) - 1)
    ok = mine[pos] == ranks
    rows = []
    if side == "send":
        for j in range(int(cnt.max())):
            present = ok & (cnt[pos] > j)
            g = start[pos] + j
            rows.append((present, np.where(present, receivers[g % nR], -1), none))
        return rows
    for t in range(-(-total // nR)):
        g = pos + t * nR
        present = ok & (g < total)
        i = np.clip(np.searchsorted(start, g, "right") - 1, 0, nS - 1)
        rows.append((present, np.where(present, senders[i], -1), none))
    return rows
