"""Trees and butterflies written as point-to-point calls: stages that grow with P.

A program that broadcasts or reduces with its own binomial tree (HPL's and hpcc's
``HPL_broadcast`` and ``HPL_reduce``, the tree reduction of countless teaching codes)
or exchanges along a hypercube (recursive doubling) makes ceil(log2 P) stages: rank 0
sends 2 messages at P = 4, 4 at P = 16 and 5 at P = 32, a count no traced P shows for
the target. The exact model's slots are the calls the traced runs make, so such a
phase has no slot for the stage P = 32 adds, and its ranks share no order of their
calls (a leaf receives once, an inner rank receives, then sends to its children). This
module recognises the tree itself, so that every stage at any P is placed exactly.

**Blocks** (:class:`Tree`). A phase's blocking sends and receives on MPI_COMM_WORLD
or a duplicate of it (and, where those are no tree, its nonblocking posts with them:
the caller's choice) are read as a sequence of blocks, the same on every rank at
every traced P. With v = (rank - root) mod P (the root a rule of P: the first or the
last rank) and a binomial tree of one of two shapes:

``low``   parent v - lowbit(v); children v + 2^s for 2^s < lowbit(v) (v = 0: every
          2^s < P), as MPICH and HPL build it;
``high``  parent v - highbit(v); children v + 2^s for 2^s > v (the loop ``for s = 1;
          s < P; s *= 2: if rank < s send to rank + s, else if rank < 2s receive from
          rank - s`` of teaching codes);

children that are not below P left out, visited by ascending or descending s; or a
flat tree (``flat``: every other rank a child of the root, by ascending or descending
rank: the master-worker loops of teaching codes). A block is one of

``bcast``     receive from the parent, then send to each child;
``reduce``    receive from each child, then send to the parent;
``exchange``  a Sendrecv at each stage s, by ascending or descending s
              (:data:`EXCHANGES`): with v XOR 2^s (recursive doubling; P a power of
              two), to v + 2^s from v - 2^s (dissemination), to v + s from v - s for
              s = 1 .. P - 1 (pairwise exchange, an all-to-all), with v XOR s (the same
              on a power of two), P - 1 times to v + 1 from v - 1 (a ring), or with
              v's opponent at round s of a round-robin tournament (an all-to-all in
              which every stage pairs the ranks: FFTW's pairwise transposes);
``fold``      at each stage s (ceil(log2 P) of them, ascending or descending), a rank
              whose v has bit s sends to v - 2^s, one without it receives from
              v + 2^s where that is below P: a reduction to rank 0 in which a rank
              goes on sending after its first send (mpi4py's ``reduce`` and
              ``allreduce`` of Python objects, 3.1 and 4.1 alike).

Any block may send each message as ``copies`` calls in a row to the same peer (2: its
size, then its payload, as mpi4py's reductions of Python objects and Boost.MPI's
serialised types do); each call of a stage has its own size and tag.

**Inference** (:func:`infer_trees`): block by block, the first kind, shape, order and
root whose calls equal every rank's next calls (operation side and peer) at every traced
P, a receive posted with MPI_ANY_SOURCE standing for any receive (such a side is placed
so). Blocks whose calls at the traced P are alike but would differ at another P (two
readings) are refused: a target must not depend on which one was taken. Sizes must be
one per side of a block at each P (fitted over P by the caller): a tree whose messages
differ between ranks (a gather's subtrees) is left to the other models.

Vectorised over ranks: :meth:`Tree.peers` gives each rank's peers of one side of a block
at any P as an (n ranks, stages) matrix, -1 where the rank has no call.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .topology import DimsRule

__all__ = ["Tree", "infer_trees", "SIDES", "UNITS"]

#: the sides of each kind of block, in the order a rank makes them
SIDES = {"bcast": ("parent", "children"), "reduce": ("children", "parent"), "exchange": ("stages",),
         "fold": ("stages",)}
#: what each side does: a receive, a send, or both (a Sendrecv)
DIRECTION = {("bcast", "parent"): "recv", ("bcast", "children"): "send",
             ("reduce", "children"): "recv", ("reduce", "parent"): "send",
             ("exchange", "stages"): "both"}
#: roots tried, as root = a P + b
ROOTS = ((0, 0), (1, -1))


def _stages(P: int) -> int:
    """ceil(log2 P): the stages of a tree over P ranks."""
    return max(0, int(P - 1).bit_length())


def _lowbit(v: np.ndarray, P: int) -> np.ndarray:
    """Lowest set bit of v; 2^stages for v = 0 (the root has every child)."""
    return np.where(v > 0, v & -v, 1 << _stages(P))


def _highbit(v: np.ndarray) -> np.ndarray:
    """Highest set bit of v (0 for v = 0)."""
    out = np.zeros_like(v)
    nz = v > 0
    out[nz] = 1 << (np.floor(np.log2(v[nz].astype(float))).astype(np.int64))
    # (floating log2 of an int64 below 2^53 is exact at powers of two; guard the rest)
    over = out > v
    out[over] >>= 1
    under = nz & ((out << 1) <= v)
    out[under] <<= 1
    return out


#: exchanges: per shape, whether it needs P a power of two, and how it is described
EXCHANGES = {
    "xor": (True, "recursive doubling: a Sendrecv with rank xor 2^s, s < log2 P"),
    "dissemination": (False, "dissemination: a Sendrecv to rank + 2^s from rank - 2^s (mod P), s < ceil(log2 P)"),
    "pairwise": (False, "pairwise exchange: a Sendrecv to rank + s from rank - s (mod P), s = 1 .. P - 1"),
    "pairxor": (True, "pairwise exchange: a Sendrecv with rank xor s, s = 1 .. P - 1"),
    "ring": (False, "ring: P - 1 Sendrecv to rank + 1 from rank - 1 (mod P)"),
    "tournament": (False, "round-robin tournament: at round s = 0 .. m - 1 (m = P - 1, or P where P is odd) "
                          "a Sendrecv with (2s - rank) mod m, with the last rank where that is the rank itself "
                          "(no call where P is odd), the last rank meeting s (FFTW's pairwise transposes)"),
}


def _tournament_rounds(P: int) -> int:
    """The rounds of a round-robin tournament of P ranks: P - 1 where P is even, else P
    (each rank sits one out)."""
    return P if P % 2 else max(0, P - 1)


def _opponents(v: np.ndarray, s: np.ndarray, P: int) -> np.ndarray:
    """Each v's opponent at each round s of the round-robin tournament of P ranks (the
    circle method: ranks below m = rounds meet (2s - v) mod m; where that is v itself it
    meets the last rank, P even, or sits the round out, -1, P odd), as (len(v), len(s))."""
    m = _tournament_rounds(P)
    if m == 0:
        return np.zeros((len(v), 0), np.int64)
    q = (2 * s[None, :] - v[:, None]) % m
    alone = q == v[:, None]
    q = np.where(alone, P - 1 if P % 2 == 0 else -1, q)
    if P % 2 == 0:  # the last rank meets round s's rank that meets itself: s
        q = np.where((v == P - 1)[:, None], s[None, :], q)
    return q


@dataclasses.dataclass(frozen=True)
class Tree:
    """One block of a phase: a broadcast or reduction on a binomial or flat tree, or an
    exchange in stages (:data:`EXCHANGES`), as a function of P."""

    kind: str  # "bcast", "reduce" or "exchange"
    shape: str  # "low", "high" or "flat" (trees); a key of EXCHANGES (exchange)
    order: str  # "asc" or "desc": the stages (children) by ascending or descending s
    root_a: int = 0  # root = root_a * P + root_b
    root_b: int = 0
    #: an exchange's calls at each stage, in order: ("both",) a Sendrecv; else sends,
    #: receives and waits (NPB CG: Irecv, Send, Wait with the partner); ("ordered",) a
    #: send and a receive, the lower rank of each pair sending first
    unit: tuple = ("both",)
    #: recursive doubling over the first W ranks of each block of W (the columns of a
    #: row-major grid: rank xor 2^s for 2^s < W), W a dimension of a 2-D dims rule of
    #: :mod:`~logical_model.topology` as (rule name, dimension); None: W = P
    span: tuple | None = None
    #: each message sent as this many calls in a row, to the same peer (2: its size, then
    #: its payload, as mpi4py's reductions of Python objects and Boost.MPI's serialised
    #: types send it)
    copies: int = 1

    def root(self, P: int) -> int:
        return int(self.root_a * P + self.root_b)

    def _span(self, P: int) -> int:
        if self.span is None:
            return P
        return int(DimsRule(self.span[0], 2).dims(P)[self.span[1]])

    def problem(self, P: int) -> str | None:
        """Why the block cannot be placed at P (None: it can)."""
        if not 0 <= self.root(P) < P:
            return f"its root ({self.root_a} P + {self.root_b}) is no rank at P={P}"
        if self.span is not None:
            try:
                W = self._span(P)
            except ValueError:
                return f"its {self.describe_span()} has no grid at P={P}"
            if W & (W - 1) or P % W:
                return f"its {self.describe_span()} is {W} ranks at P={P}: no power of two that divides P"
        elif self.kind == "exchange" and EXCHANGES[self.shape][0] and P & (P - 1):
            return f"its {EXCHANGES[self.shape][1].split(':')[0]} is over a power of two ranks; P={P} is none"
        return None

    def describe_span(self) -> str:
        return (f"recursive doubling over dimension {self.span[1]} of a {DimsRule(self.span[0], 2).describe()} grid"
                if self.span is not None else "recursive doubling")

    def width(self, P: int, side: str) -> int:
        """Calls of one side on its busiest rank at P (the columns of :meth:`peers`; an
        exchange makes ``len(unit)`` calls in each)."""
        if side == "parent":
            return 1
        if self.span is not None:
            return _stages(self._span(P))
        if self.kind == "fold" or self.shape in ("xor", "dissemination", "low", "high"):
            return _stages(P)
        if self.shape == "tournament":
            return _tournament_rounds(P)
        return max(0, P - 1)

    def row_count(self, P: int, side: str) -> int:
        """The rows :meth:`rows` gives at P: each stage's calls (an ordered pair's send is a
        row for the lower ranks and another for the upper ones)."""
        per = (1 if self.kind in ("bcast", "reduce") else 2 if self.kind == "fold"
               else 3 if self.unit == ("ordered",) else len(self.unit))
        return per * self.copies * self.width(P, side)

    def _stage_index(self, n: int) -> np.ndarray:
        s = np.arange(n, dtype=np.int64)
        return s[::-1] if self.order == "desc" else s

    def peers(self, ranks: np.ndarray, P: int, side: str, receive: bool = False) -> np.ndarray:
        """(len(ranks), J) world peers of one side of the block, in each rank's order of
        calls, -1 where it has no call; ``receive``: an exchange's sources rather than its
        destinations."""
        ranks = np.asarray(ranks, np.int64)
        root = self.root(P)
        v = (ranks - root) % P
        if side == "parent":
            if self.shape == "low":
                par = v - _lowbit(v, P)
            elif self.shape == "high":
                par = v - _highbit(v)
            else:
                par = np.zeros_like(v)
            return np.where(v > 0, (par + root) % P, -1)[:, None]
        if self.kind == "fold":  # stage s: a rank with bit s sends to v - 2^s, one without receives from v + 2^s
            m = (np.int64(1) << self._stage_index(self.width(P, side)))[None, :]
            up = (v[:, None] & m) != 0
            q = np.where(up, -1, v[:, None] + m) if receive else np.where(up, v[:, None] - m, -1)
            return np.where((q >= 0) & (q < P), (q + root) % P, -1)
        if self.kind == "exchange":
            sign = -1 if receive else 1
            if self.shape in ("xor", "dissemination"):
                m = (np.int64(1) << self._stage_index(self.width(P, side)))[None, :]
                q = v[:, None] ^ m if self.shape == "xor" else (v[:, None] + sign * m) % P
            elif self.shape == "tournament":  # (a pairing: one peer both ways)
                q = _opponents(v, self._stage_index(_tournament_rounds(P)), P)
            else:
                m = (1 + self._stage_index(max(0, P - 1)))[None, :]
                if self.shape == "pairxor":
                    q = v[:, None] ^ m
                elif self.shape == "pairwise":
                    q = (v[:, None] + sign * m) % P
                else:  # ring
                    q = np.broadcast_to((v[:, None] + sign) % P, (len(v), m.shape[1]))
            return np.where((q >= 0) & (q < P), (q + root) % P, -1)
        if self.shape == "flat":  # the root's children: every other rank
            m = (1 + self._stage_index(max(0, P - 1)))[None, :]
            return np.where((v == 0)[:, None], (m + root) % P, -1)
        m = (np.int64(1) << self._stage_index(_stages(P)))[None, :]
        if self.shape == "low":
            ok = m < _lowbit(v, P)[:, None]
        else:
            ok = m > v[:, None]
        ok &= (v[:, None] + m) < P
        return np.where(ok, (v[:, None] + m + root) % P, -1)

    @property
    def elements(self) -> tuple:
        """The kinds of call of one stage (each made :attr:`copies` times in a row): an
        exchange's unit, or a send and a receive for the ordered pairs and a fold (which of
        them a rank makes first, or at all, depends on the rank); a tree side's one call."""
        if self.kind in ("bcast", "reduce"):
            return ("call",)
        return ("send", "recv") if self.kind == "fold" or self.unit == ("ordered",) else self.unit

    def rows(self, ranks: np.ndarray, P: int, side: str) -> list[tuple[int, int, str, np.ndarray, np.ndarray]]:
        """One side's calls at P, stage by stage (an exchange: call by call of its unit):
        (stage column, call of the unit, direction, peers, receive peers), the peers -1
        where a rank has no such call (-2 for a wait it makes: it has no peer)."""
        q = self.peers(ranks, P, side)
        none = np.full(len(q), -1, np.int64)
        if self.kind in ("bcast", "reduce"):
            d = DIRECTION[(self.kind, side)]
            return self._copied([(j, 0, d, q[:, j], none) for j in range(q.shape[1])])
        rq = self.peers(ranks, P, side, receive=True)
        if self.kind == "fold":
            return self._copied([row for j in range(q.shape[1])
                                 for row in ((j, 0, "send", q[:, j], none), (j, 1, "recv", rq[:, j], none))])
        out = []
        for j in range(q.shape[1]):
            has = q[:, j] >= 0
            if self.unit == ("ordered",):  # the lower rank of each pair sends first, the other receives
                lower = has & (np.asarray(ranks, np.int64) < q[:, j])
                out += [(j, 0, "send", np.where(lower, q[:, j], -1), none), (j, 1, "recv", rq[:, j], none),
                        (j, 0, "send", np.where(has & ~lower, q[:, j], -1), none)]
                continue
            for e, d in enumerate(self.unit):
                peer = q[:, j] if d in ("send", "both") else rq[:, j] if d == "recv" else np.where(has, -2, -1)
                out.append((j, e, d, peer, rq[:, j] if d == "both" else none))
        return self._copied(out)

    def _copied(self, rows: list) -> list:
        """Each row made :attr:`copies` times in a row, its call of the stage e becoming
        e * copies + c."""
        if self.copies == 1:
            return rows
        return [(j, e * self.copies + c, d, q, rq) for j, e, d, q, rq in rows for c in range(self.copies)]

    def _per_rank(self, P: int, side: str, call) -> list[list]:
        """Each rank's calls of one side at P, in order, as ``call(stage column, call of the
        stage, direction, peer, receive peer)`` of its row of :meth:`rows`."""
        out = [[] for _ in range(P)]
        for j, e, d, q, rq in self.rows(np.arange(P), P, side):
            for r in np.flatnonzero(q != -1):
                out[r].append(call(j, e, d, int(q[r]), int(rq[r])))
        return out

    def stage_calls(self, P: int, side: str) -> list[list[tuple[int, int]]]:
        """Each rank's calls of one side at P, in order, as (call of the stage, stage
        column): which of :meth:`rows` each one is."""
        return self._per_rank(P, side, lambda j, e, d, q, rq: (e, j))

    def rank_calls(self, P: int) -> list[list[tuple[str, int, int]]]:
        """Each rank's calls of the block at P as (direction, peer, receive peer: -1 but
        for an exchange's Sendrecv; a wait's peer is -1), in order."""
        out = [[] for _ in range(P)]
        for side in SIDES[self.kind]:
            for r, calls in enumerate(self._per_rank(P, side, lambda j, e, d, q, rq: (d, q if d != "wait" else -1, rq))):
                out[r] += calls
        return out

    def describe(self, side: str | None = None) -> str:
        root = ("rank 0" if (self.root_a, self.root_b) == (0, 0) else "the last rank"
                if (self.root_a, self.root_b) == (1, -1) else f"rank {self.root_a} P + {self.root_b}")
        if self.kind == "exchange":
            what = EXCHANGES[self.shape][1] + (", s descending" if self.order == "desc" else "")
            if self.span is not None:
                what = (self.describe_span() + " (rank xor 2^s for 2^s below it)"
                        + (", s descending" if self.order == "desc" else ""))
            if self.unit != ("both",):
                what = (what.replace("a Sendrecv", "an exchange").replace("P - 1 Sendrecv", "P - 1 exchanges")
                        + " (" + ", ".join(UNIT_WORDS[d] for d in self.unit) + " at each stage)")
        elif self.kind == "fold":
            what = (f"reduction to {root} in which each rank sends at every set bit s of its distance v from "
                    "the root: to v - 2^s where bit s is set, from v + 2^s where it is not, by "
                    f"{'ascending' if self.order == 'asc' else 'descending'} s (mpi4py's reduction of Python objects)")
        else:
            tree = {"low": "binomial tree (parent v - lowbit(v))", "high": "binomial tree (parent v - highbit(v))",
                    "flat": "flat tree (every rank a child of the root)"}[self.shape]
            what = (f"{'broadcast' if self.kind == 'bcast' else 'reduction'} on a {tree} from {root}, "
                    f"children by {'ascending' if self.order == 'asc' else 'descending'} "
                    f"{'rank' if self.shape == 'flat' else '2^s'}")
        if self.copies > 1:
            what += f", each message sent as {self.copies} calls in a row (its size, then its payload)"
        if side is None or self.kind in ("exchange", "fold"):
            return what
        return f"{'the parent' if side == 'parent' else 'each child'} of a {what}"

    def to_dict(self) -> dict[str, Any]:
        return {"tree": self.kind, "shape": self.shape, "order": self.order,
                "root_a": self.root_a, "root_b": self.root_b, "unit": list(self.unit),
                "span": list(self.span) if self.span is not None else None, "copies": self.copies}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Tree":
        return cls(d["tree"], d["shape"], d["order"], int(d.get("root_a", 0)), int(d.get("root_b", 0)),
                   tuple(d.get("unit", ("both",))), tuple(d["span"]) if d.get("span") else None,
                   int(d.get("copies", 1)))


#: an exchange's calls at each stage: a Sendrecv, or sends and receives (posted or
#: blocking) and the waits that complete them
UNITS = (("both",), ("send", "recv"), ("recv", "send"), ("ordered",), ("recv", "send", "wait"),
         ("send", "recv", "wait"), ("recv", "send", "wait", "wait"), ("send", "recv", "wait", "wait"))
UNIT_WORDS = {"both": "a Sendrecv", "send": "a send", "recv": "a receive", "wait": "a wait",
              "ordered": "a send and a receive, the lower rank of the pair sending first"}
#: the grid dimensions recursive doubling may span (NPB CG: the columns of its
#: power-of-two grid), as (2-D dims rule, dimension)
SPANS = tuple((name, d) for name in ("dims_create", "pencil", "pow2_rows", "pow2_cols", "square") for d in (0, 1))


def _candidates(waits: bool = False) -> list[Tree]:
    """Every block :func:`infer_trees` tries; ``waits``: the calls include waits (the
    exchanges' units with them, and recursive doubling over a grid dimension)."""
    out = []
    for kind in ("bcast", "reduce"):
        for shape in ("low", "high", "flat"):
            for order in ("desc", "asc") if shape != "flat" else ("asc", "desc"):
                for a, b in ROOTS:
                    out.append(Tree(kind, shape, order, a, b))
    for order in ("asc", "desc"):
        out.append(Tree("fold", "bits", order))
    # each message as its size, then its payload (mpi4py's reductions of Python objects)
    out += [dataclasses.replace(t, copies=2) for t in list(out)]
    for unit in UNITS if waits else UNITS[:4]:
        for shape in EXCHANGES:
            if unit == ("ordered",) and shape not in ("xor", "pairxor", "tournament"):
                continue  # (pairs: each rank's partner's partner is the rank)
            for order in ("asc", "desc"):
                out.append(Tree("exchange", shape, order, unit=unit))
        for span in SPANS:
            for order in ("asc", "desc"):
                out.append(Tree("exchange", "xor", order, unit=unit, span=span))
    return out


#: a receive posted with MPI_ANY_SOURCE, as the signature's template has it
#: (signature.trace.PEER_ANY): it stands for any one receive of a block (a master that
#: takes its workers' results as they come)
ANY_SOURCE = -2


def _same(got: list, want: list) -> bool:
    """A rank's calls equal a block's, a receive from any source standing for any receive."""
    return len(got) == len(want) and all(
        g == w or (g[0] == w[0] == "recv" and g[1] == ANY_SOURCE) for g, w in zip(got, want))


#: the P at which two readings of the traced calls are compared (beyond the traced P)
def _check_points(Ps: list[int]) -> list[int]:
    top = max(Ps)
    return sorted({2 * top, 4 * top, 3 * top - 1, 5 * top + 3})


def infer_trees(calls: dict[int, list[list[tuple[str, int, int]]]]) -> tuple[list[tuple[Tree, list]], str | None]:
    """The blocks of a phase from each rank's point-to-point calls at every traced P
    (``calls[P][r]``: (direction, peer, receive peer) in order; direction "send", "recv"
    or "both", a Sendrecv, the only one with a receive peer: -1 for the others).
    Returns ([(block, per P per rank (start, end) of its calls)], None), or ([], the
    reason no reading holds). Where no block starts but every rank has a call left, that
    one call on every rank is passed over (the caller's exact model places it)."""
    Ps = sorted(calls)
    if len(Ps) < 2:
        return [], "a tree needs two traced P or more"
    if not any(calls[P][r] for P in Ps for r in range(P)):
        return [], "no point-to-point calls"
    ptr = {P: [0] * P for P in Ps}
    blocks: list[tuple[Tree, list]] = []
    cands = _candidates(any(c[0] == "wait" for P in Ps for cs in calls[P] for c in cs))
    made = {}  # (tree, P) -> rank_calls

    def made_at(t: Tree, P: int):
        if (t, P) not in made:
            made[(t, P)] = t.rank_calls(P) if t.problem(P) is None else None
        return made[(t, P)]

    while any(ptr[P][r] < len(calls[P][r]) for P in Ps for r in range(P)):
        fits = []
        for t in cands:
            ok, spans, grows = True, {}, False
            for P in Ps:
                want = made_at(t, P)
                if want is None:
                    ok = False
                    break
                spans[P] = []
                for r in range(P):
                    a = ptr[P][r]
                    w = want[r]
                    if not _same(calls[P][r][a:a + len(w)], w):
                        ok = False
                        break
                    spans[P].append((a, a + len(w)))
                if not ok:
                    break
                grows = grows or max(len(w) for w in want) >= 2
            if ok and grows:
                fits.append((t, spans))
        if not fits and all(ptr[P][r] < len(calls[P][r]) for P in Ps for r in range(P)):
            # one call on every rank that no block starts with (a halo between two trees):
            # the exact model's, as the phase's other calls are
            for P in Ps:
                for r in range(P):
                    ptr[P][r] += 1
            continue
        if not fits:
            at = min(Ps)
            r = next(r for r in range(at) if ptr[at][r] < len(calls[at][r])) if any(
                ptr[at][r] < len(calls[at][r]) for r in range(at)) else 0
            return [], (f"rank {r}'s point-to-point calls at P={at}, from call {ptr[at][r] + 1} on, "
                        "are no tree or exchange of the ranks sigex reads (logical_model.trees)")
        # the readings that take the most calls (recursive doubling over the first W ranks
        # is a prefix of one over all of them where W < P): fewer blocks, the simplest account
        most = max(sum(e - a for P in Ps for a, e in sp[P]) for _, sp in fits)
        fits = [(t, sp) for t, sp in fits if sum(e - a for P in Ps for a, e in sp[P]) == most]
        t, spans = fits[0]
        # receives from any source name no peer: readings that part only there are alike
        recvs = [c for P in Ps for r in range(P) for c in calls[P][r][spans[P][r][0]:spans[P][r][1]]
                 if c[0] == "recv"]
        wild = bool(recvs) and all(c[1] == ANY_SOURCE for c in recvs)

        def seen(tree: Tree, P: int):
            return [[(c[0], ANY_SOURCE, c[2]) if wild and c[0] == "recv" else c for c in cs]
                    for cs in tree.rank_calls(P)]
        for other, _ in fits[1:]:
            for P in _check_points(Ps):
                if (t.problem(P) is None) != (other.problem(P) is None) or (
                        t.problem(P) is None and seen(t, P) != seen(other, P)):
                    return [], (f"the traced P read alike as a {t.describe()} and a {other.describe()}, "
                                f"which part at P={P}")
        blocks.append((t, spans))
        for P in Ps:
            for r in range(P):
                ptr[P][r] = spans[P][r][1]
    if not blocks:
        return [], "its point-to-point calls hold no tree or exchange of the ranks sigex reads (logical_model.trees)"
    return blocks, None
