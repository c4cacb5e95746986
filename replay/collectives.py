"""Collective operations as message patterns, their LogGP evaluation, and closed forms.

A collective over ``n`` members is a *pattern*: four arrays ``(src, dst, nbytes,
round)`` over the communicator-local ranks ``np.arange(n)``, sorted by round, as
LogGOPSim's Schedgen2 composes collectives from named patterns (without its
Python object per operation). In every pattern built here a member sends at most
one message and receives at most one message per round; :func:`evaluate` relies
on it and the tests check it.

Algorithms (the usual MPICH choices; Thakur, Rabenseifner & Gropp, "Optimization
of collective communication operations in MPICH", IJHPCA 2005):

========================  =======================================================
Barrier                   dissemination, ceil(log2 n) rounds
Bcast                     binomial tree (largest subtree first)
Reduce                    binomial tree (the Bcast tree reversed)
Allreduce                 recursive doubling below ``ALLREDUCE_SHORT`` bytes,
                          Rabenseifner (recursive-halving reduce-scatter +
                          recursive-doubling allgather) at or above it; both fold
                          the ``n - 2**floor(log2 n)`` extra ranks in a pre-round
                          and unfold them in a post-round
Allgather                 recursive doubling (n a power of two) or Bruck when the
                          gathered total is below ``ALLGATHER_LONG``; ring above
Alltoall                  pairwise exchange, n - 1 rounds
Gather / Scatter          binomial tree carrying whole subtrees
Reduce_scatter            the reduce-scatter half of Rabenseifner, with fold/unfold
Scan / Exscan             Hillis-Steele recursive doubling
========================  =======================================================

Linear-round algorithms (ring, pairwise) are replaced by their logarithmic Bruck
counterparts above ``LINEAR_ROUNDS_MAX`` members, where simulating n - 1 rounds of
n messages would cost more than the replay is worth. v-collectives use their mean
block size.

Point-to-point cost inside a pattern is the engine's LogGP model (see
:mod:`replay.engine`): an eager message of s bytes leaves after ``o``, arrives
``o + s*G + L`` after its send starts, and costs the receiver ``o + s*O``; at or
above the eager threshold ``S`` the data waits for a handshake (RTS ``o + L``,
CTS ``o + L``). The closed forms (:func:`closed_form_cost`) are the same hop cost
summed along each algorithm's critical path, with every member entering at once.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from signature.trace import OP_CODE

__all__ = [
    "Pattern", "Costs", "costs", "link_costs", "pattern_for", "evaluate", "closed_form_cost", "hop_cost",
    "barrier_dissemination", "bcast_binomial", "reduce_binomial",
    "allreduce_recursive_doubling", "allreduce_rabenseifner",
    "allgather_recursive_doubling", "allgather_bruck", "allgather_ring",
    "alltoall_pairwise", "alltoall_bruck", "gather_binomial", "scatter_binomial",
    "reduce_scatter_halving", "scan_recursive_doubling",
    "COLLECTIVE_OPS", "ALLREDUCE_SHORT", "ALLGATHER_LONG", "LINEAR_ROUNDS_MAX",
]

#: Allreduce switches from recursive doubling to Rabenseifner at this many bytes
#: (MPICH's MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE).
ALLREDUCE_SHORT = 2048
#: Allgather uses the ring at or above this gathered total (MPICH's long-message size).
ALLGATHER_LONG = 512 * 1024
#: Above this many members, ring and pairwise algorithms become Bruck's.
LINEAR_ROUNDS_MAX = 1024

#: Base collective of every blocking and nonblocking collective op code.
COLLECTIVE_OPS: dict[int, str] = {}
for _name in ("Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Scatter",
              "Scatterv", "Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw",
              "Reduce_scatter", "Reduce_scatter_block", "Scan", "Exscan"):
    # Alltoallw (a datatype per peer) is replayed as Alltoallv: bytes per peer are what count
    _base = "Reduce_scatter" if _name.startswith("Reduce_scatter") else _name.rstrip("vw")
    COLLECTIVE_OPS[OP_CODE[_name]] = _base
    COLLECTIVE_OPS[OP_CODE["I" + _name[0].lower() + _name[1:]]] = _base
# Window creation, free and fence synchronise the window's communicator: a barrier
for _name in ("Win_create", "Win_free", "Win_fence"):
    COLLECTIVE_OPS[OP_CODE[_name]] = "Barrier"
# Neighbourhood collectives: one round in which every member sends to each of its
# out-neighbours; their pattern comes from the topology the trace recorded
# (Program.pattern), not from the member count
for _name in ("Neighbor_allgather", "Neighbor_allgatherv", "Neighbor_alltoall",
              "Neighbor_alltoallv", "Neighbor_alltoallw"):
    COLLECTIVE_OPS[OP_CODE[_name]] = COLLECTIVE_OPS[OP_CODE["I" + _name[0].lower() + _name[1:]]] \
        = "Neighbor"
del _name, _base


@dataclasses.dataclass(frozen=True)
class Pattern:
    """The messages of one collective over communicator-local ranks ``0..n-1``.

    ``src``, ``dst``, ``nbytes`` and ``round`` have one entry per message, sorted
    by round; messages of round k are ``round_offsets[k]:round_offsets[k+1]``.
    """

    algorithm: str
    n: int
    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    round: np.ndarray
    round_offsets: np.ndarray

    @property
    def n_rounds(self) -> int:
        return len(self.round_offsets) - 1

    @property
    def n_messages(self) -> int:
        return len(self.src)

    @functools.cached_property
    def senders(self) -> list:
        """Per round, the senders as an index: ``slice(None)`` when every member sends once
        in member order (recursive doubling, pairwise, dissemination...), so evaluation
        works on the arrays themselves instead of gathering and scattering them."""
        out = []
        every = np.arange(self.n)
        for k in range(self.n_rounds):
            src = self.src[self.round_offsets[k]:self.round_offsets[k + 1]]
            out.append(slice(None) if len(src) == self.n and np.array_equal(src, every) else src)
        return out

    @functools.cached_property
    def moves(self) -> list:
        """Per round where every member sends once in member order: ``("roll", d)`` when
        member i sends to (i + d) mod n, ``("xor", d)`` when to i xor d (n a multiple of
        2d), so that the receivers' times are views of the members' (no gather or
        scatter); None otherwise."""
        out = []
        every = np.arange(self.n)
        for k, src in enumerate(self.senders):
            mv = None
            if isinstance(src, slice) and self.n > 1:
                dst = self.dst[self.round_offsets[k]:self.round_offsets[k + 1]]
                d = int(dst[0])
                if 0 < d < self.n and np.array_equal(dst, (every + d) % self.n):
                    mv = ("roll", d)
                elif d > 0 and self.n % (2 * d) == 0 and np.array_equal(dst, every ^ d):
                    mv = ("xor", d)
            out.append(mv)
        return out

    def as_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(src, dst, nbytes, round)``."""
        return self.src, self.dst, self.nbytes, self.round

    def __repr__(self) -> str:
        return (f"Pattern({self.algorithm}, n={self.n}, {self.n_rounds} rounds, "
                f"{self.n_messages} messages, {int(self.nbytes.sum())} bytes)")


def _make(algorithm: str, n: int, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> Pattern:
    """A pattern from per-round ``(src, dst, nbytes)`` triples (empty rounds dropped)."""
    parts = [(np.asarray(s, np.int64), np.asarray(d, np.int64),
              np.broadcast_to(np.asarray(b, np.int64), np.shape(s)))
             for s, d, b in parts if len(s)]
    counts = np.array([len(s) for s, _, _ in parts], np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    cat = (lambda i: np.concatenate([p[i] for p in parts]).astype(np.int64) if parts
           else np.zeros(0, np.int64))
    src, dst, nbytes = cat(0), cat(1), cat(2)
    rnd = np.repeat(np.arange(len(parts), dtype=np.int64), counts)
    for a in (src, dst, nbytes, rnd, offsets):
        a.setflags(write=False)
    return Pattern(algorithm, n, src, dst, nbytes, rnd, offsets)


def _log2ceil(n: int) -> int:
    return max(0, (n - 1).bit_length())


def _pow2_floor(n: int) -> int:
    return 1 << (n.bit_length() - 1) if n > 0 else 0


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# ---- patterns -------------------------------------------------------------------------

def barrier_dissemination(n: int) -> Pattern:
    """Dissemination barrier: in round k every rank r signals (r + 2**k) mod n."""
    r = np.arange(n)
    return _make("dissemination", n, [(r, (r + (1 << k)) % n, 0) for k in range(_log2ceil(n))])


def bcast_binomial(n: int, root: int, nbytes: int) -> Pattern:
    """Binomial-tree broadcast: round k halves the distance (MPICH's order, the
    root sends its largest subtree first)."""
    K = _log2ceil(n)
    parts = []
    for k in range(K):
        mask = 1 << (K - 1 - k)
        v = np.arange(0, n, 2 * mask)
        v = v[v + mask < n]
        parts.append(((v + root) % n, (v + mask + root) % n, nbytes))
    return _make("binomial", n, parts)


def reduce_binomial(n: int, root: int, nbytes: int) -> Pattern:
    """Binomial-tree reduction to ``root``: the broadcast tree with edges reversed,
    leaves first."""
    b = bcast_binomial(n, root, nbytes)
    parts = [(b.dst[b.round_offsets[k]:b.round_offsets[k + 1]],
              b.src[b.round_offsets[k]:b.round_offsets[k + 1]], nbytes)
             for k in reversed(range(b.n_rounds))]
    return _make("binomial", n, parts)


def _fold(n: int, nbytes: int):
    """Pre-round of the power-of-two algorithms: the first 2*rem ranks pair up, even
    ranks hand their data to the odd neighbour and sit out. Returns the pre-round,
    the post-round (odd ranks hand the result back) and the real rank of each of
    the p2 remaining ranks."""
    p2 = _pow2_floor(n)
    rem = n - p2
    even = np.arange(0, 2 * rem, 2)
    pre = (even, even + 1, nbytes)
    post = (even + 1, even, nbytes)
    nr = np.arange(p2)
    real = np.where(nr < rem, 2 * nr + 1, nr + rem)
    return p2, pre, post, real


def allreduce_recursive_doubling(n: int, nbytes: int) -> Pattern:
    """Recursive doubling: log2(p2) rounds exchanging the whole vector with
    ``rank xor 2**k``; non-power-of-two n folds in and out."""
    p2, pre, post, real = _fold(n, nbytes)
    nr = np.arange(p2)
    parts = [pre] + [(real[nr], real[nr ^ (1 << k)], nbytes) for k in range(p2.bit_length() - 1)]
    return _make("recursive-doubling", n, parts + [post])


def allreduce_rabenseifner(n: int, nbytes: int) -> Pattern:
    """Rabenseifner: reduce-scatter by recursive halving (s/2, s/4, ...), then
    allgather by recursive doubling (..., s/4, s/2); non-power-of-two n folds in
    and out."""
    p2, pre, post, real = _fold(n, nbytes)
    nr = np.arange(p2)
    K = p2.bit_length() - 1
    halving = [(real[nr], real[nr ^ (1 << k)], _ceil_div(nbytes, 2 << k)) for k in range(K)]
    doubling = [(real[nr], real[nr ^ (1 << k)], _ceil_div(nbytes, 2 << k))
                for k in reversed(range(K))]
    return _make("rabenseifner", n, [pre] + halving + doubling + [post])


def allgather_recursive_doubling(n: int, block: int) -> Pattern:
    """Recursive doubling allgather (n a power of two): round k exchanges 2**k blocks
    with ``rank xor 2**k``."""
    if n & (n - 1):
        raise ValueError(f"recursive doubling needs a power-of-two n, got {n}; use allgather_bruck")
    r = np.arange(n)
    return _make("recursive-doubling", n,
                 [(r, r ^ (1 << k), block << k) for k in range(n.bit_length() - 1)])


def allgather_bruck(n: int, block: int) -> Pattern:
    """Bruck allgather: round k sends min(2**k, n - 2**k) blocks to (r - 2**k) mod n."""
    r = np.arange(n)
    return _make("bruck", n, [(r, (r - (1 << k)) % n, block * min(1 << k, n - (1 << k)))
                              for k in range(_log2ceil(n))])


def allgather_ring(n: int, block: int) -> Pattern:
    """Ring allgather: n - 1 rounds, each rank passes one block to its right neighbour."""
    r = np.arange(n)
    return _make("ring", n, [(r, (r + 1) % n, block) for _ in range(n - 1)])


def alltoall_pairwise(n: int, block: int) -> Pattern:
    """Pairwise exchange: in round k (1..n-1) rank r sends its block for
    (r + k) mod n there."""
    r = np.arange(n)
    return _make("pairwise", n, [(r, (r + k) % n, block) for k in range(1, n)])


def alltoall_bruck(n: int, block: int) -> Pattern:
    """Bruck alltoall: ceil(log2 n) rounds; in round k a rank forwards the blocks
    whose index has bit k set (about n/2 blocks) to (r + 2**k) mod n."""
    r = np.arange(n)
    return _make("bruck", n, [(r, (r + (1 << k)) % n, block * _bruck_blocks(n, k))
                              for k in range(_log2ceil(n))])


def _bruck_blocks(n: int, k: int) -> int:
    """How many of the indices 0..n-1 have bit k set."""
    return (n >> (k + 1) << k) + max(0, n % (2 << k) - (1 << k))


def gather_binomial(n: int, root: int, block: int) -> Pattern:
    """Binomial gather: in round k a rank whose relative index is an odd multiple of
    2**k sends its whole subtree (min(2**k, n - v) blocks) to v - 2**k."""
    parts = []
    for k in range(_log2ceil(n)):
        v = np.arange(1 << k, n, 2 << k)
        parts.append(((v + root) % n, (v - (1 << k) + root) % n,
                      block * np.minimum(1 << k, n - v)))
    return _make("binomial", n, parts)


def scatter_binomial(n: int, root: int, block: int) -> Pattern:
    """Binomial scatter: the gather tree reversed, largest subtrees first."""
    g = gather_binomial(n, root, block)
    parts = [(g.dst[g.round_offsets[k]:g.round_offsets[k + 1]],
              g.src[g.round_offsets[k]:g.round_offsets[k + 1]],
              g.nbytes[g.round_offsets[k]:g.round_offsets[k + 1]])
             for k in reversed(range(g.n_rounds))]
    return _make("binomial", n, parts)


def reduce_scatter_halving(n: int, block: int) -> Pattern:
    """Reduce-scatter of n blocks: fold to p2 ranks, recursive halving (n*block/2,
    n*block/4, ...), then each folded-out rank receives its block from its partner."""
    total = n * block
    p2, pre, _, real = _fold(n, total)
    nr = np.arange(p2)
    K = p2.bit_length() - 1
    halving = [(real[nr], real[nr ^ (1 << k)], _ceil_div(total, 2 << k)) for k in range(K)]
    even = pre[0]
    return _make("recursive-halving", n, [pre] + halving + [(even + 1, even, block)])


def scan_recursive_doubling(n: int, nbytes: int) -> Pattern:
    """Hillis-Steele scan: in round k rank r sends its partial result to r + 2**k."""
    parts = []
    for k in range(_log2ceil(n)):
        r = np.arange(0, n - (1 << k))
        parts.append((r, r + (1 << k), nbytes))
    return _make("recursive-doubling", n, parts)


def neighbor_pattern(n: int, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray) -> Pattern:
    """A neighbourhood collective over ``n`` members: the messages ``src[k] -> dst[k]`` of
    ``nbytes[k]`` (communicator-local ranks), every member posting all of them at once as
    MPICH does, in rounds so that a member sends and receives at most one message per round
    (what :func:`evaluate` and the compiled kernel assume): one round per displacement
    ``(dst - src) mod n`` (its senders and receivers are each distinct), a repeated edge
    in a round of its own. A member's sends thus go out one after another, and its
    receives are processed one after another, in order of displacement."""
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    nbytes = np.asarray(nbytes, np.int64)
    disp = (dst - src) % max(n, 1)
    by_edge = np.lexsort((dst, src))  # the k-th copy of an edge: a round of its own
    first = np.ones(len(src), bool)
    first[1:] = (src[by_edge][1:] != src[by_edge][:-1]) | (dst[by_edge][1:] != dst[by_edge][:-1])
    start = np.maximum.accumulate(np.where(first, np.arange(len(src)), 0))
    copy = np.empty(len(src), np.int64)
    copy[by_edge] = np.arange(len(src)) - start
    order = np.lexsort((dst, src, disp, copy))
    key = np.stack([copy[order], disp[order]])
    new = np.ones(len(src), bool)
    new[1:] = np.any(key[:, 1:] != key[:, :-1], axis=0)
    rnd = np.cumsum(new) - 1
    offsets = np.append(np.flatnonzero(new), len(src)).astype(np.int64)
    return Pattern("neighbor", n, src[order], dst[order], nbytes[order], rnd.astype(np.int64),
                   offsets if len(src) else np.array([0, 0], np.int64))


def neighbor_closed_form_cost(pat: Pattern, *, L: float, o: float, G: float) -> float:
    """Closed-form LogGP time of a neighbourhood collective whose members enter together:
    the busiest member's sends (o + (k-1)G each, back to back) plus one latency and
    the receive overhead of its largest incoming message."""
    if not pat.n_messages:
        return 0.0
    per_send = o + np.maximum(pat.nbytes - 1, 0) * G
    busiest = float(np.bincount(pat.src, weights=per_send, minlength=pat.n).max())
    return busiest + L + o


@functools.lru_cache(maxsize=512)
def pattern_for(op: str, n: int, root: int, nbytes: int) -> Pattern:
    """The pattern the replay uses for base collective ``op`` (a value of
    :data:`COLLECTIVE_OPS`) over ``n`` members; ``nbytes`` is the per-rank block
    (the whole vector for Bcast, Reduce, Allreduce, Scan). Neighbourhood collectives
    depend on their topology: :meth:`replay.Program.pattern` gives theirs."""
    if n < 1:
        raise ValueError(f"a collective needs at least one member, got n={n}")
    if op == "Neighbor":
        raise ValueError("a neighbourhood collective's pattern comes from its topology "
                         "(Program.pattern), not from its member count")
    if not 0 <= root < n:
        root = 0
    nbytes = max(0, int(nbytes))
    if op == "Barrier":
        return barrier_dissemination(n)
    if op == "Bcast":
        return bcast_binomial(n, root, nbytes)
    if op == "Reduce":
        return reduce_binomial(n, root, nbytes)
    if op == "Allreduce":
        if nbytes < ALLREDUCE_SHORT or n < 2:
            return allreduce_recursive_doubling(n, nbytes)
        return allreduce_rabenseifner(n, nbytes)
    if op == "Allgather":
        if n * nbytes >= ALLGATHER_LONG and n <= LINEAR_ROUNDS_MAX:
            return allgather_ring(n, nbytes)
        if n & (n - 1) == 0:
            return allgather_recursive_doubling(n, nbytes)
        return allgather_bruck(n, nbytes)
    if op == "Alltoall":
        if n <= LINEAR_ROUNDS_MAX:
            return alltoall_pairwise(n, nbytes)
        return alltoall_bruck(n, nbytes)
    if op == "Gather":
        return gather_binomial(n, root, nbytes)
    if op == "Scatter":
        return scatter_binomial(n, root, nbytes)
    if op == "Reduce_scatter":
        return reduce_scatter_halving(n, nbytes)
    if op in ("Scan", "Exscan"):
        return scan_recursive_doubling(n, nbytes)
    raise ValueError(f"no pattern for collective {op!r}")


# ---- evaluation -----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, eq=False)
class Costs:
    """The LogGP terms of every message of a pattern on given links, as the engine's
    point-to-point model uses them (:mod:`replay.engine`): per round k, ``rounds[k] =
    (cpu, gap, lat, oL)`` with ``cpu = o + s*O`` (send or receive overhead), ``gap =
    g + s*G`` (NIC busy after a send), ``lat = o + s*G + L`` (send start to arrival),
    ``oL = o + L`` (one handshake message); each a float when one value serves the
    whole round, else an array (B or 1, messages of the round). ``rdv[k]``: None when
    every message of the round is eager, True when all use rendezvous, else a mask.
    ``busy`` (B or 1, n): each member's overheads over the pattern, summed round by
    round (send, then receive), as the evaluation would add them.

    Costs depend on the pattern and the links only, not on the entry times, so the
    engine keeps those of a collective repeated on the same members (an Allreduce per
    iteration) and evaluates every instance with them."""

    rounds: tuple
    rdv: tuple
    busy: np.ndarray


def costs(pattern: Pattern, *, L, o, g, G, O, S: int) -> Costs:
    """:class:`Costs` of ``pattern`` with LogGP parameters ``L, o, g, G, O`` (floats, or
    arrays broadcastable to (B, n_messages) for per-message links) and eager/rendezvous
    threshold ``S``."""
    offs = pattern.round_offsets
    scalar = all(np.ndim(x) == 0 for x in (L, o, g, G, O))
    if scalar:
        L, o, g, G, O = (float(x) for x in (L, o, g, G, O))
        Bt = 1
    else:
        Bt = max(np.shape(x)[0] if np.ndim(x) == 2 else 1 for x in (L, o, g, G, O))
        L, o, g, G, O = (np.broadcast_to(np.asarray(x, np.float64), (Bt, pattern.n_messages))
                         for x in (L, o, g, G, O))
    rounds = []
    for k in range(pattern.n_rounds):
        a, b = int(offs[k]), int(offs[k + 1])
        nb = pattern.nbytes[a:b]
        if scalar:
            if b > a and nb.min() == nb.max():
                s = float(nb[0])
                terms = (o + s * O, g + s * G, o + s * G + L, o + L)
            else:
                s = nb.astype(np.float64)[None, :]
                terms = (o + s * O, g + s * G, o + s * G + L, np.float64(o + L))
        else:
            s = nb.astype(np.float64)[None, :]
            Lk, ok, gk, Gk, Ok = (x[:, a:b] for x in (L, o, g, G, O))
            terms = (ok + s * Ok, gk + s * Gk, ok + s * Gk + Lk, ok + Lk)
        rounds.append(terms)
    return _finish_costs(pattern, rounds, Bt, S)


def link_costs(pattern: Pattern, nodes: np.ndarray | None, net, loc, S: int) -> Costs:
    """:class:`Costs` of ``pattern`` when a message between members on one node uses
    link ``loc`` and any other ``net`` (objects with ``L, o, g, G, O``): ``nodes``
    (B or 1, n) is each member's node, None when every message uses ``net``. The
    same terms as :func:`costs` with the per-message parameters of those links,
    computed per round from two candidate values instead of five parameter arrays."""
    offs = pattern.round_offsets
    links = [tuple(float(getattr(q, x)) for x in "LogGO") for q in (net, loc)]
    Bt = 1 if nodes is None else nodes.shape[0]

    def terms_of(link, s):
        L, o, g, G, O = link
        return (o + s * O, g + s * G, o + s * G + L, o + L)

    rounds = []
    for k in range(pattern.n_rounds):
        a, b = int(offs[k]), int(offs[k + 1])
        nb = pattern.nbytes[a:b]
        s = float(nb[0]) if b > a and nb.min() == nb.max() else nb.astype(np.float64)[None, :]
        intra = None
        if nodes is not None and b > a:
            intra = nodes[:, pattern.src[a:b]] == nodes[:, pattern.dst[a:b]]
            if intra.all():
                intra = True
            elif not intra.any():
                intra = None
        if intra is None or intra is True:
            terms = terms_of(links[1] if intra is True else links[0], s)
            if np.ndim(s):  # one size per message, one link: the handshake term is one float
                terms = terms[:3] + (np.float64(terms[3]),)
        else:
            tn, tl = terms_of(links[0], s), terms_of(links[1], s)
            terms = tuple(np.where(intra, x_l, x_n) for x_n, x_l in zip(tn, tl))
        rounds.append(terms)
    return _finish_costs(pattern, rounds, Bt, S)


def _finish_costs(pattern: Pattern, rounds: list, Bt: int, S: int) -> Costs:
    """The rendezvous masks and overhead totals of per-round ``rounds`` terms."""
    offs = pattern.round_offsets
    rdv = []
    busy = np.zeros((Bt, pattern.n))
    for k in range(pattern.n_rounds):
        a, b = int(offs[k]), int(offs[k + 1])
        big = pattern.nbytes[a:b] >= S
        rdv.append(None if not big.any() else True if big.all() else big)
        # each member's overheads, round by round: its send, then its receive
        cpu = rounds[k][0]
        src, mv = pattern.senders[k], pattern.moves[k]
        if isinstance(src, slice):
            busy += cpu
        else:
            busy[:, src] += cpu
        _add_recv(busy, cpu, mv, None if mv is not None else pattern.dst[a:b])
    return Costs(tuple(rounds), tuple(rdv), busy)


def _add_recv(busy, cpu, mv, dst) -> None:
    """``busy[:, dst] += cpu`` (each receiver once), on views where the round allows."""
    if mv is None:
        busy[:, dst] += cpu
        return
    kind, d = mv
    B, n = busy.shape
    if np.ndim(cpu) == 0 or cpu.shape[-1] == 1:
        busy += cpu
    elif kind == "roll":
        busy[:, d:] += cpu[..., :n - d]
        busy[:, :d] += cpu[..., n - d:]
    elif d >= _XOR_VIEW_MIN:
        part = _quad(busy, B, n, d)[:, :, ::-1, :]
        part += _quad(cpu, cpu.shape[0], n, d)
    else:
        busy += cpu.take(_xor_perm(n, d), axis=1)


def evaluate(pattern: Pattern, entry: np.ndarray, *, L=None, o=None, g=None, G=None, O=None,
             S: int | None = None, costs_: Costs | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-member completion times of a batch of instances of one pattern.

    Parameters
    ----------
    pattern : Pattern
    entry : ndarray, shape (B, n)
        Time each member enters the collective, for B instances.
    L, o, g, G, O : float or ndarray broadcastable to (B, n_messages)
        LogGP parameters of each message's link.
    S : int
        Eager/rendezvous threshold in bytes.
    costs_ : Costs, optional
        The pattern's :func:`costs` on its links, instead of ``L, o, g, G, O, S``.

    Returns
    -------
    finish, busy : ndarray, shape (B, n)
        When each member leaves the collective, and the CPU time it spent in send
        and receive overheads (a read-only view: costs may be shared).

    Notes
    -----
    Rounds run in order; a member's actions in round k start when its round k-1
    actions are complete (its send has left, its receive has been processed),
    and a member not in round k keeps its time. Within a round a member first
    pays its send overhead, then processes its receive (as a Sendrecv does). Each
    member sends and receives at most one message per round. A message's times
    are those of the engine's point-to-point model with the same terms.
    """
    T = np.array(entry, dtype=np.float64, copy=True)
    if T.ndim != 2 or T.shape[1] != pattern.n:
        raise ValueError(f"entry must have shape (B, {pattern.n}), got {T.shape}")
    c = costs_ if costs_ is not None else costs(pattern, L=L, o=o, g=g, G=G, O=O, S=S)
    nic = np.full_like(T, -np.inf)
    offs = pattern.round_offsets
    senders, moves = pattern.senders, pattern.moves
    for k in range(pattern.n_rounds):
        cpu, gap, lat, oL = c.rounds[k]
        src, mv, rdv = senders[k], moves[k], c.rdv[k]
        dst = pattern.dst[int(offs[k]):int(offs[k + 1])] if mv is None else None
        ts = np.maximum(T[:, src], nic[:, src])
        if rdv is None:
            start = ts
        else:
            tdata = np.maximum(ts + oL, _get(T, mv, dst)) + oL
            start = tdata if rdv is True else np.where(rdv, tdata, ts)
        arrive = start + lat
        if isinstance(src, slice):  # every member sends: write in place
            np.add(ts, gap, out=nic)
            np.add(start, cpu, out=T)
        else:
            nic[:, src] = ts + gap
            T[:, src] = start + cpu
        # a member that also sent this round processes its receive after that send
        _recv(T, arrive, cpu, mv, dst)
    return T, np.broadcast_to(c.busy, T.shape)  # read-only: costs may be shared


def _cols(x, sl):
    """Columns ``sl`` of a per-message term (a float or a (B, m) array) ."""
    return x if np.ndim(x) == 0 or x.shape[-1] == 1 else x[..., sl]


def _quad(x, B, n, d):
    """(B, n) as (B, n / 2d, 2, d): axis 2 flipped pairs each member with member xor d."""
    return x if np.ndim(x) == 0 or x.shape[-1] == 1 else x.reshape(x.shape[0], n // (2 * d), 2, d)


def _get(T, mv, dst):
    """``T[:, dst]``: the receivers' times in message order."""
    if mv is None:
        return T[:, dst]
    kind, d = mv
    n = T.shape[1]
    if kind == "roll":
        return np.concatenate([T[:, d:], T[:, :d]], axis=1)
    return T.take(_xor_perm(n, d), axis=1)


#: xor rounds with a distance below this gather through a permutation, above it use views
_XOR_VIEW_MIN = 64


@functools.lru_cache(maxsize=256)
def _xor_perm(n: int, d: int) -> np.ndarray:
    """``arange(n) xor d`` (kept: read-only)."""
    perm = np.arange(n, dtype=np.intp) ^ d
    perm.flags.writeable = False
    return perm


def _recv(T, arrive, cpu, mv, dst) -> None:
    """``T[:, dst] = max(arrive, T[:, dst]) + cpu``, on views where the round allows."""
    if mv is None:
        T[:, dst] = np.maximum(arrive, T[:, dst]) + cpu
        return
    kind, d = mv
    B, n = T.shape
    if kind == "roll":  # message i goes to member (i + d) mod n
        for m, t in ((slice(0, n - d), T[:, d:]), (slice(n - d, n), T[:, :d])):
            np.maximum(arrive[:, m], t, out=t)
            np.add(t, _cols(cpu, m), out=t)
        return
    # message i goes to member i xor d
    if d >= _XOR_VIEW_MIN:
        part = _quad(T, B, n, d)[:, :, ::-1, :]
        np.maximum(_quad(arrive, B, n, d), part, out=part)
        np.add(part, _quad(cpu, B, n, d), out=part)
        return
    # short runs make the view's inner loops short: gather in receiver order instead
    perm = _xor_perm(n, d)
    got = arrive.take(perm, axis=1)
    np.maximum(got, T, out=T)
    np.add(T, cpu if np.ndim(cpu) == 0 or cpu.shape[-1] == 1 else cpu.take(perm, axis=1), out=T)


def hop_cost(nbytes: float, L: float, o: float, G: float, O: float, S: int) -> float:
    """LogGP time of one message on an idle pair: ``L + 2o + s(G + O)`` eager, plus
    the handshake ``2(L + o)`` at or above ``S``."""
    t = L + 2 * o + nbytes * (G + O)
    return t + 2 * (L + o) if nbytes >= S else t


def closed_form_cost(op: str, n: int, nbytes: int, *, L: float, o: float, G: float,
                     O: float = 0.0, S: int = 65536) -> float:
    """Closed-form LogGP time of collective ``op`` over ``n`` members that enter
    together, along the critical path of the algorithm :func:`pattern_for` picks.

    Examples
    --------
    >>> round(closed_form_cost("Bcast", 8, 0, L=1e-6, o=0.5e-6, G=0.0) * 1e6, 6)
    6.0
    """
    if n <= 1:
        return 0.0

    def h(s):
        return hop_cost(s, L, o, G, O, S)

    K = _log2ceil(n)
    p2 = _pow2_floor(n)
    Kp = p2.bit_length() - 1
    fold = 2 * h(nbytes) if n != p2 else 0.0
    if op == "Barrier":
        return K * h(0)
    if op in ("Bcast", "Reduce", "Scan", "Exscan"):
        return K * h(nbytes)
    if op == "Allreduce":
        if nbytes < ALLREDUCE_SHORT:
            return Kp * h(nbytes) + fold
        return 2 * sum(h(_ceil_div(nbytes, 2 << k)) for k in range(Kp)) + fold
    if op == "Allgather":
        if n * nbytes >= ALLGATHER_LONG and n <= LINEAR_ROUNDS_MAX:
            return (n - 1) * h(nbytes)
        if n == p2:
            return sum(h(nbytes << k) for k in range(Kp))
        return sum(h(nbytes * min(1 << k, n - (1 << k))) for k in range(K))
    if op == "Alltoall":
        if n <= LINEAR_ROUNDS_MAX:
            return (n - 1) * h(nbytes)
        return sum(h(nbytes * _bruck_blocks(n, k)) for k in range(K))
    if op in ("Gather", "Scatter"):
        return sum(h(nbytes * min(1 << k, n - (1 << k))) for k in range(K))
    if op == "Reduce_scatter":
        total = n * nbytes
        extra = (h(total) + h(nbytes)) if n != p2 else 0.0
        return sum(h(_ceil_div(total, 2 << k)) for k in range(Kp)) + extra
    raise ValueError(f"no closed form for collective {op!r}")
