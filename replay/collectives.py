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
    "Pattern", "pattern_for", "evaluate", "closed_form_cost", "hop_cost",
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
              "Scatterv", "Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Reduce_scatter",
              "Reduce_scatter_block", "Scan", "Exscan"):
    _base = "Reduce_scatter" if _name.startswith("Reduce_scatter") else _name.rstrip("v")
    COLLECTIVE_OPS[OP_CODE[_name]] = _base
    COLLECTIVE_OPS[OP_CODE["I" + _name[0].lower() + _name[1:]]] = _base
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


@functools.lru_cache(maxsize=512)
def pattern_for(op: str, n: int, root: int, nbytes: int) -> Pattern:
    """The pattern the replay uses for base collective ``op`` (a value of
    :data:`COLLECTIVE_OPS`) over ``n`` members; ``nbytes`` is the per-rank block
    (the whole vector for Bcast, Reduce, Allreduce, Scan)."""
    if n < 1:
        raise ValueError(f"a collective needs at least one member, got n={n}")
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

def evaluate(pattern: Pattern, entry: np.ndarray, *, L, o, g, G, O, S: int,
             ) -> tuple[np.ndarray, np.ndarray]:
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

    Returns
    -------
    finish, busy : ndarray, shape (B, n)
        When each member leaves the collective, and the CPU time it spent in send
        and receive overheads.

    Notes
    -----
    Rounds run in order; a member's actions in round k start when its round k-1
    actions are complete (its send has left, its receive has been processed),
    and a member not in round k keeps its time. Within a round a member first
    pays its send overhead, then processes its receive (as a Sendrecv does). Each
    member sends and receives at most one message per round.
    """
    T = np.array(entry, dtype=np.float64, copy=True)
    if T.ndim != 2 or T.shape[1] != pattern.n:
        raise ValueError(f"entry must have shape (B, {pattern.n}), got {T.shape}")
    busy = np.zeros_like(T)
    nic = np.full_like(T, -np.inf)
    B = T.shape[0]
    # one link for every message (the common case): scalars, and a round whose messages
    # all have one size works on scalars too; the same operations in the same order as
    # the array case, so the same bits
    scalar = all(np.ndim(x) == 0 for x in (L, o, g, G, O))
    if scalar:
        params = [np.float64(x) for x in (L, o, g, G, O)]
    else:
        params = [np.broadcast_to(np.asarray(x, np.float64), (B, pattern.n_messages))
                  for x in (L, o, g, G, O)]
    offs = pattern.round_offsets
    senders = pattern.senders
    for k in range(pattern.n_rounds):
        a, b = int(offs[k]), int(offs[k + 1])
        src, dst = senders[k], pattern.dst[a:b]
        nb = pattern.nbytes[a:b]
        if scalar:
            Lk, ok, gk, Gk, Ok = params
            if b > a and nb.min() == nb.max():
                nb = nb[:1]
        else:
            Lk, ok, gk, Gk, Ok = (p[:, a:b] for p in params)
        s = nb.astype(np.float64)
        ts = np.maximum(T[:, src], nic[:, src])
        wire = s * Gk
        cpu = ok + s * Ok
        t_dst = T[:, dst]
        rdv = nb >= S
        if rdv.all():
            start = np.maximum(ts + ok + Lk, t_dst) + ok + Lk
        elif rdv.any():
            tdata = np.maximum(ts + ok + Lk, t_dst) + ok + Lk
            start = np.where(rdv, tdata, ts)
        else:
            start = ts
        send_done = start + cpu
        arrive = start + ok + wire + Lk
        nic[:, src] = ts + gk + wire
        T[:, src] = send_done
        # a member that also sent this round processes its receive after that send
        recv_done = np.maximum(arrive, T[:, dst]) + cpu
        T[:, dst] = recv_done
        busy[:, src] += cpu
        busy[:, dst] += cpu
    return T, busy


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
