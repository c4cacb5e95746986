"""Cutting one rank's event stream into loops and iterations (steps 2-3 of ``phases.py``).

Real time-stepping codes repeat a *plain* iteration, with variants every k steps (a
neighbour-list rebuild, a thermo output, a residual check) and message sizes that change
whenever the data moves (an atom exchange after every rebuild). The cut therefore works
on two token streams of the rank:

* **full tokens** (op, relative peers, root, bytes, communicator; the calls of a rotation,
  whose root takes each member in turn, share one root: :func:`rotating_roots`): the innermost loop's
  period and its first iteration are found on them, on a bounded window, where bytes
  tell apart calls that only differ in size (the forward and reverse halo swaps of a
  grid two ranks wide);
* **structure tokens**, the same without bytes and with communicators identified by
  their members: the loop's plain iteration (its *unit*) is then found wherever it
  occurs in the rest of the run, whatever its message sizes are there. A run of one
  structure token is a loop of one call (a ring's shifts) unless its full tokens
  alternate: an atom count, then the atoms, both ways to the one neighbour of a grid
  dimension two ranks wide are four calls of a step, not four iterations.

A unit that holds a global collective is cut right after its last one, the same call
at every P and on every rank, unless the calls that follow them are only some of a
step's (a flag rank 0 sends for the next step) and the part before the loop ends with
the rest of the step: then right after those calls. A shorter period whose repeats
fill half of a longer one's is its inner loop, not a stray run before it.

Between two occurrences of the unit lies either nothing (consecutive plain iterations),
a block that shares little with the unit (a reduction printed every 50 steps: it is
appended to the iteration before it, which becomes a variant), or a block that holds more
than half of the unit's calls (a rebuild step that exchanges atoms instead of ghost
positions: it is an iteration of its own). The steps right before the first plain
iteration that are the unit with runs of one call collapsed (the first steps of a short
run, whose data-dependent counts differ from the first repeats') are iterations of the
loop too. What follows the loop's last plain iteration still belongs to it where it is
a whole block seen between two plain iterations, piece by piece, an inner loop of a
data-dependent count (a PCG solve) run as often as the rest repeats it, and, at the
run's end, where it holds nearly all of the calls that every variant iteration of the
loop makes (a last neighbour search whose atom exchanges are unlike any before). Then the
search starts again, so that loops that follow each other (the kernels of a benchmark
suite) are each found; what lies between loops is a weight-1 part. A loop found within
a few iterations' length of another one continues it if their plain iterations share
more than half of the shorter one's calls: its plain iteration changed (a domain
decomposition rebuilt at a neighbour search); a loop of other calls is a loop of its
own (an output loop of Barriers after an SCF loop of Allreduces).

Each iteration gets two content keys: its exact structure, and its structure with runs
of the same call collapsed (``Send x3`` and ``Send x5`` to the same peer are one
shape: a count that depends on the data). Phases are told apart by the second.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._arrays import ranges
from .trace import OP_CODE, PEER_ANY, Trace

__all__ = ["structure_tokens", "rotating_roots", "ROOT_ROTATING", "relative_peers", "posted_peers", "find_unit", "segment_rank", "segment_keys",
           "RankSegments", "prefix_hash", "segment_hash", "mix"]

_MUL = np.uint64(0x9E3779B97F4A7C15)
_BASE = np.uint64(0x100000001B3)  # odd: invertible modulo 2**64
#: blocking receives whose ``aux`` says they were posted with MPI_ANY_SOURCE (bit 1)
_WILD_RECV_OPS = [OP_CODE[n] for n in ("Recv", "Sendrecv", "Sendrecv_replace")]

#: a piece of a block between two plain iterations is an iteration of its own when it
#: holds more than this share of the plain iteration's calls (as multisets)
GAP_ITERATION_SHARE = 0.5
#: a block between plain iterations holds two steps when it can be cut in two pieces that
#: each hold this share of the plain iteration's calls
STEP_SPLIT_SHARE = 0.9
#: a loop after the first one is kept only if its iterations hold this share of the
#: rank's events (and it repeats at least three times)
LATER_LOOP_SHARE = 0.01


def mix(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Fold column v into hash h (wrapping uint64 arithmetic)."""
    h = (h ^ v.astype(np.int64).view(np.uint64)) * _MUL
    return h ^ (h >> np.uint64(29))


def relative_peers(trace: Trace, col: np.ndarray) -> np.ndarray:
    """Peers relative to the rank, (peer - rank) mod P; negative codes (none, any,
    PROC_NULL) kept."""
    rank = trace.events["rank"].astype(np.int64)
    col = col.astype(np.int64)
    return np.where(col >= 0, (col - rank) % max(trace.nprocs, 1), col)


def posted_peers(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The ``peer`` and ``recv_peer`` columns as the program posted its receives: a
    blocking receive posted with MPI_ANY_SOURCE (``aux`` bit 1: Recv, Sendrecv,
    Sendrecv_replace) has PEER_ANY where the trace keeps the matched source. A master that
    takes its workers' results as they come asks for the same thing in every iteration,
    whatever order they come in (the loop is found, and its template names no source)."""
    ev = trace.events
    peer, rpeer = ev["peer"], ev["recv_peer"]
    op = ev["op"]
    wild = (ev["aux"].astype(np.int64) & 1).astype(bool) & np.isin(op, _WILD_RECV_OPS)
    if not wild.any():
        return peer, rpeer
    recv = wild & (op == OP_CODE["Recv"])
    return (np.where(recv, PEER_ANY, peer).astype(peer.dtype),
            np.where(wild & ~recv, PEER_ANY, rpeer).astype(rpeer.dtype))


def _canonical_comms(trace: Trace) -> np.ndarray:
    """Per event, its communicator identified by membership (and topology): a
    communicator duplicated in every iteration is the same one each time."""
    comms = trace.comms
    comm = trace.events["comm"].astype(np.int64)
    if len(comms) <= 1:
        return comm
    first: dict[tuple, int] = {}
    canon = np.arange(len(comms), dtype=np.int64)
    for c in range(len(comms)):
        key = (bool(comms.inter[c]), comms.members_of(c).tobytes(), comms.cartesian(c))
        canon[c] = first.setdefault(key, c)
    return np.where(comm >= 0, canon[np.clip(comm, 0, len(comms) - 1)], comm)


#: the ``root`` of a rooted collective in a run whose root moves on by one member each
#: call (:func:`rotating_roots`)
ROOT_ROTATING = -4
#: a run of calls whose root moves on by one member each time is a rotation from this
#: many calls
ROTATION_MIN = 3


def rotating_roots(trace: Trace) -> np.ndarray:
    """The ``root`` column with :data:`ROOT_ROTATING` for the calls of a *rotation*: at
    least :data:`ROTATION_MIN` consecutive calls of a rank to one rooted collective on one
    communicator whose root is the next member each time (member i + 1 after member i,
    the first after the last), as a loop over k-points, bands or matrix panels broadcasts
    item k from its owner k mod n. One call of such a loop, whose root follows the
    repetition, is then one token, not a cycle of n calls (Elk's k-point loop: 60
    Bcasts per SCF iteration were cut in cycles of P, with 60 mod P left over)."""
    ev = trace.events
    root = ev["root"]
    at = np.flatnonzero(root >= 0)  # the rooted calls (few: the scan is over them only)
    if len(at) < ROTATION_MIN:
        return root
    comms = trace.comms
    comm = ev["comm"][at].astype(np.int64)
    r_at = root[at].astype(np.int64)
    local = np.full(len(at), -1, np.int64)
    size = np.zeros(len(at), np.int64)
    for c in np.unique(comm):
        if not 0 <= c < len(comms) or comms.inter[c]:  # (an intercommunicator's root is the other group's)
            continue
        sel = np.flatnonzero(comm == c)
        local[sel] = comms.local_ranks(int(c), r_at[sel])
        size[sel] = comms.size[c]
    nxt = ((at[1:] == at[:-1] + 1) & (local[:-1] >= 0) & (local[1:] >= 0) & (size[:-1] > 1)
           & (ev["rank"][at[1:]] == ev["rank"][at[:-1]]) & (ev["op"][at[1:]] == ev["op"][at[:-1]])
           & (comm[1:] == comm[:-1]) & (local[1:] == (local[:-1] + 1) % np.maximum(size[:-1], 1)))
    starts, lengths = _runs(nxt)  # k steps in a row are k + 1 calls
    keep = lengths + 1 >= ROTATION_MIN
    if not keep.any():
        return root
    mark = _covered(len(at), starts[keep], starts[keep] + lengths[keep] + 1)
    out = root.copy()
    out[at[mark]] = ROOT_ROTATING
    return out


def structure_tokens(trace: Trace, roots: np.ndarray | None = None) -> np.ndarray:
    """One uint64 token per event: op, relative peers, root and communicator (by its
    members), without bytes or tag: equal tokens are the same call of the program,
    whatever the message sizes (``roots``: :func:`rotating_roots`, computed when not
    given)."""
    ev = trace.events
    peer, rpeer = posted_peers(trace)
    with np.errstate(over="ignore"):
        h = np.full(len(ev["op"]), np.uint64(0x84222325CBF29CE4))
        for col in (ev["op"], relative_peers(trace, peer), relative_peers(trace, rpeer),
                    rotating_roots(trace) if roots is None else roots, _canonical_comms(trace)):
            h = mix(h, col)
    return h


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and lengths of the runs of True in a boolean array."""
    m = np.zeros(len(mask) + 2, bool)
    m[1:-1] = mask
    edges = np.flatnonzero(m[1:] != m[:-1])  # a run's start, then its end, alternately
    return edges[0::2], edges[1::2] - edges[0::2]


def _covered(n: int, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each of n positions lies in one of the intervals ``[starts[k], ends[k])``
    (ends past n are cut there)."""
    delta = np.zeros(n + 1, np.int64)
    np.add.at(delta, np.minimum(starts, n), 1)
    np.add.at(delta, np.minimum(ends, n), -1)
    return np.cumsum(delta[:-1]) > 0


def find_unit(tokens: np.ndarray, window: int = 4096, max_candidates: int = 12,
              near: int | None = None, anchor: np.ndarray | None = None,
              full: np.ndarray | None = None) -> tuple[int, int, int] | None:
    """``(index, period, per_unit)`` of the innermost dominant loop in the first
    ``window`` tokens: where its first iteration starts, its length in events, and how
    often the iteration's first token occurs in one iteration; None if nothing repeats.

    Tandem-repeat detection as trace compressors do it: the candidate periods are the
    common distances between equal tokens; for each period p, ``t[i] == t[i+p]`` marks
    positions inside a tandem repeat, and runs of at least 2p such positions are repeats
    ``u^k`` (k >= 3; k = 2 only when nothing repeats three times). The chosen period is
    the smallest whose repeats cover at least 75% of what the best period covers, so
    the innermost loop wins over an outer loop that merely contains it. ``near``: also
    try the periods within 10% of it (a variant of a known iteration). ``anchor``: per
    token, whether it is a global collective (every rank makes it); a unit that holds
    one is not cut on one (:func:`_past_collectives`). Given as levels (:data:`EVERY_P`),
    only the collectives of every rank at every P count here. ``full``: the full tokens
    of ``tokens`` (structure tokens): runs of one call whose full tokens alternate are
    no loop of one call (:func:`_alternating`).
    """
    t = tokens[:window]
    n = len(t)
    if n < 2:
        return None
    order = np.argsort(t, kind="stable")
    ts = t[order]
    gaps = np.concatenate([(order[lag:] - order[:-lag])[ts[lag:] == ts[:-lag]]
                           for lag in range(1, min(5, n))])
    gaps = gaps[(gaps > 0) & (gaps <= n // 2)]
    if gaps.size == 0:
        return None
    values, counts = np.unique(gaps, return_counts=True)
    cands = values[np.argsort(-counts, kind="stable")[:max_candidates]]
    if near is not None:
        d = max(1, near // 10)
        cands = np.concatenate([cands, np.arange(max(1, near - d), min(n // 2, near + d) + 1)])
    cands = np.unique(cands)
    runs = {int(p): _runs(t[int(p):] == t[:-int(p)]) for p in cands}
    best = []
    for min_k in (3, 2):  # a pair of equal calls is not yet a loop, unless nothing else repeats
        for p, (starts, lengths) in runs.items():
            ok = lengths >= (min_k - 1) * p  # run of m matches: (m + p) // p repetitions
            cover = int(np.sum(((lengths[ok] + p) // p) * p))
            if cover and not (p == 1 and full is not None and _alternating(full[:n], starts[ok], lengths[ok])):
                best.append((p, cover, int(starts[ok][0]), int(lengths[ok][0])))
        if best:
            break
    if not best:
        return None
    top = max(b[1] for b in best)
    p, _, s0, m = next(b for b in best if b[1] >= 0.75 * top)  # smallest such period
    p, s0, m = _incidental(t, runs, best, min_k, p, s0, m)
    if anchor is not None:
        anchor = _every_p(anchor[:n])
        p, m = _primitive(t, p, s0, m, anchor)
    # rotation: an iteration does not begin with the call it ends with. The first
    # repetition can start too early when the initial part ends like an iteration
    # (CG: an Allreduce before a loop that ends with one); move the start forward
    # while the unit's first and last tokens are equal, unless the repeats fill whole
    # iterations from s0 (an iteration that begins and ends with the same call, as a
    # forward and backward transform do)
    s = s0
    whole = m % p == 0 and s0 + m + p < n
    if s0 + m + p >= n and len(tokens) > n:
        # the repeat runs past the window: whole or not is told where it ends in the stream
        # (a 4,000-step FFT loop was cut one transpose into its step: weight 3,999)
        full = _repeat_length(tokens, s0, p)
        whole = full % p == 0 and s0 + full + p < len(tokens)
    while not whole and p > 1 and s < s0 + p - 1 and s + p < n and t[s] == t[s + p - 1]:
        s += 1
    if anchor is not None:
        s = _past_collectives(anchor, s, p, s0, m)
    return s, p, int(np.sum(t[s:s + p] == t[s]))


def _alternating(full: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> bool:
    """Whether runs of one call (structure tokens ``t[i] == t[i+1]`` from each start, for
    its length) hold calls that alternate: their full tokens repeat two or three calls on
    (at a quarter of the places at least) more than twice as often as from one call to
    the next. Such a run is a sequence of different calls to one peer (an atom count,
    then the atoms, both ways along a grid dimension two ranks wide), whose sizes the
    structure tokens drop, not a loop of one call (a ring's shifts, the same call each
    time: their full tokens are equal, or vary with the data at random). A ring whose
    blocks alternate in size (even ranks' twice the odd ranks') reads as alternating too:
    its shifts then stay in the step (with P - 1 calls) rather than an inner loop."""
    pair = _covered(len(full) - 1, starts, starts + lengths)  # t[i] == t[i+1] within a run
    if not pair.any():
        return False
    same = [np.mean(full[:len(full) - 1][pair] == full[1:][pair])]
    for lag in (2, 3):
        within = pair[:len(pair) - lag + 1].copy()
        for d in range(1, lag):
            within &= pair[d:len(pair) - lag + 1 + d]
        same.append(np.mean(full[:len(full) - lag][within] == full[lag:][within]) if within.any() else 0.0)
    return max(same[1:]) >= 0.25 and max(same[1:]) > 2 * same[0]


def _repeat_length(tokens: np.ndarray, s0: int, p: int, chunk: int = 1 << 16) -> int:
    """How many positions i from s0 on have ``tokens[i] == tokens[i + p]`` in a row (the
    tandem repeat of period p that starts at s0, over the whole stream), read in chunks."""
    n = len(tokens)
    i = s0
    while i + p < n:
        j = min(i + chunk, n - p)
        eq = tokens[i:j] == tokens[i + p:j + p]
        if not eq.all():
            return i + int(np.argmin(eq)) - s0
        i = j
    return i - s0


#: anchor level of a collective on a communicator of every rank at every P (as far as
#: the trace tells: MPI_COMM_WORLD and its copies, not a split that holds every rank at
#: this P: ``signature.phases._whole_comms``); level 1 is one of every rank of this run.
#: :func:`_aligned` reads both levels (an iteration that ends with either begins right
#: after one), the cut's rotation (:func:`_past_collectives`, :func:`_primitive`) only
#: this one (the calls every P makes alike). A boolean anchor is both.
EVERY_P = 2


def _every_p(anchor: np.ndarray) -> np.ndarray:
    """The collectives of every rank at every P in an anchor (:data:`EVERY_P`)."""
    return anchor if anchor.dtype == bool else anchor >= EVERY_P


#: a shorter period whose repeats fill this share of a longer period's repeats is the
#: longer one's inner loop (:func:`_incidental`)
INNER_LOOP_SHARE = 0.5


def _incidental(t: np.ndarray, runs: dict, best: list, min_k: int, p: int, s0: int, m: int
                ) -> tuple[int, int, int]:
    """:func:`find_unit`'s choice ``(period, first repeat's start, its run of matches)``,
    unless its first repeat is an incidental short run before the loop (three equal
    Bcasts of a set-up): a longer period q that is a dominant loop too (it covers at
    least 75% of what the top period covers; it may be the top one) has its first repeat,
    a cycle of q calls, after p's first and before p's next one, and repeats more times
    there; p's first repeat lies outside q's own repeats (cycles of q calls, not runs of
    one call, which repeat with every period), and p's repeats inside them cover less
    than 75% of what the top period covers (p is not an inner loop of q's). q's first
    repeat is then the loop the search meets first (the earliest such q). Nor is p
    incidental where its repeats fill :data:`INNER_LOOP_SHARE` of q's own: p is then q's
    inner loop, and q an outer loop that variants of the data break off part-way (four
    plain steps and a search step repeat from the second search step to the sixth, when
    the first and the seventh broadcast twice: the plain step is the loop).

    (Issue 24: ABINIT's ranks 1-3 at P = 5 took a run of three Bcast(4) of the set-up as
    their loop, as the runs of Barriers of their output part made period 1 cover 75% of
    what the SCF cycle's period 4 covers, or more; that loop then took every later Bcast
    as an iteration and swallowed the run, while ranks 0 and 4 found the SCF loop.)"""
    n = len(t)
    top = max(b[1] for b in best)
    sp, lp = runs[p]
    okp = lp >= (min_k - 1) * p
    sp, ends = sp[okp], np.minimum(sp[okp] + (lp[okp] + p) // p * p, n)
    k_p = (m + p) // p
    for q, _, sq, mq in sorted((b for b in best if b[0] > p and b[1] >= 0.75 * top and b[2] > s0
                                and (b[3] + b[0]) // b[0] > k_p), key=lambda b: (b[2], -b[1])):
        if len(sp) > 1 and sp[1] <= sq:
            break  # (p repeats again before: its first repeat is no stray run before q's)
        starts, lengths = runs[q]
        ok = lengths >= (min_k - 1) * q
        starts, lengths = starts[ok], lengths[ok]
        own = np.ones(len(starts), bool)  # q's own repeats: cycles of q calls
        for d in range(1, q):
            if q % d == 0:
                at = starts[:, None] + np.arange(q - d)[None, :]
                own &= ~np.all(t[at] == t[at + d], axis=1)
        if not own[0]:
            continue  # (a run of one call: period 1's repeat, not q's)
        in_q = _covered(n, starts[own], starts[own] + (lengths[own] + q) // q * q)  # q's own repeats
        inside = np.concatenate([[0], np.cumsum(in_q)])  # q's events before i
        held = np.sum(inside[ends] - inside[sp])  # p's repeats inside q's
        if inside[s0 + m + p] - inside[s0] == 0 and held < 0.75 * top and held < INNER_LOOP_SHARE * inside[n]:
            return q, sq, mq
    return p, s0, m


def _primitive(t: np.ndarray, p: int, s0: int, m: int, anchor: np.ndarray) -> tuple[int, int]:
    """The smallest period q dividing p that the first repeat ``t[s0:s0+m+p]`` already
    has, and its run length: a window that holds two loops whose periods divide a common
    multiple (a smoother sweep of 15 calls, then a PCG iteration of 10: both repeat with
    period 30) makes the multiple cover most, while the first loop's own iteration is
    the smaller one (taken with the canonical cut only: issue 24)."""
    seg = t[s0:s0 + m + p]
    for q in range(1, p):
        # (only a cycle that holds a global collective among other calls, as the ones
        # _past_collectives cuts: CP2K's run of Allreduces of alternating sizes, a unit
        # of 6 whose first repeats have period 2, taken as a loop of 2 lost every loop
        # of the run)
        cyc = anchor[s0:s0 + q]
        if p % q == 0 and cyc.any() and not cyc.all() and np.array_equal(seg[q:], seg[:-q]):
            neq = np.flatnonzero(t[s0 + q:] != t[s0:len(t) - q])
            return q, int(neq[0]) if neq.size else len(t) - q - s0
    return p, m


def _past_collectives(anchor: np.ndarray, s: int, p: int, s0: int, m: int) -> int:
    """The cut of a cycle never falls on a global collective: a start there moves past
    the run of them it begins, to the call right after it.

    Where the tandem repeat is first seen depends on what precedes the loop, which
    differs by P and by rank (a solver loop entered after a set-up that ends with the
    cycle's reductions); the cycle's global collectives are the calls every rank makes in
    the same order at every P. A PCG iteration ``halo, Allreduce x3`` is then cut at its
    halo exchange at every P (OpenFOAM's icoFoam was cut at its first Allreduce at P = 8,
    at its halo at P = 4), a smoother sweep ``halo, halo, Allreduce`` at its first
    halo. The start moves forward within the repeat (``t[i] == t[i+p]`` for i in
    ``s0 .. s0+m``), or back by a cycle where the repeat has no room for it. A start
    elsewhere stays: calls that only some ranks make may follow the collective (a flag
    sent to one rank after the step's reduction), and the step before holds them."""
    cyc = anchor[s:s + p]
    if not cyc[0] or cyc.all():
        return s
    c = s + int(np.argmin(cyc))
    if c == s:
        return s
    if c <= s0 + m - p:  # still repeated there (t[c:c+p] == t[c+p:c+2p])
        return c
    if c - p >= s0:
        return c - p
    return s


_POWERS: list[np.ndarray] = [np.ones(1, np.uint64), np.ones(1, np.uint64)]


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """B^i and B^-i for i <= n (mod 2**64), computed once and grown as needed."""
    if len(_POWERS[0]) <= n:
        m = max(n + 1, 2 * len(_POWERS[0]))
        inv = np.uint64(pow(int(_BASE), -1, 1 << 64))
        with np.errstate(over="ignore"):
            _POWERS[0] = np.cumprod(np.concatenate([[np.uint64(1)], np.full(m - 1, _BASE)]))
            _POWERS[1] = np.cumprod(np.concatenate([[np.uint64(1)], np.full(m - 1, inv)]))
    return _POWERS[0], _POWERS[1]


def prefix_hash(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prefix sums H[i] = sum_{j<i} t_j * B^j and inverse powers B^-i (mod 2**64): the
    hash of t[a:b] is (H[b] - H[a]) * B^-a."""
    n = len(tokens)
    pw, ipw = _powers(n)
    with np.errstate(over="ignore"):
        H = np.concatenate([[np.uint64(0)], np.cumsum(tokens * pw[:n])])
    return H, ipw[:n + 1]


def segment_hash(H: np.ndarray, ipw: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Content hashes of the segments ``[a, b)`` (vectorised)."""
    with np.errstate(over="ignore"):
        h = (H[b] - H[a]) * ipw[a]
        return mix(h, (b - a).astype(np.int64))


@dataclasses.dataclass
class RankSegments:
    """One rank's stream cut into parts and iterations.

    ``bounds[k]:bounds[k+1]`` is segment k; ``loop[k]`` is -1 for a weight-1 part (the
    initial part, what lies between two loops, the final part) and otherwise the index
    of the loop the iteration belongs to. The segments alternate: part, iterations of
    loop 0, part, iterations of loop 1, ..., part (parts may be empty). ``shape`` keys
    an iteration's structure with runs of one call collapsed, ``exact`` its exact
    structure.
    """

    bounds: np.ndarray
    loop: np.ndarray
    shape: np.ndarray
    exact: np.ndarray
    #: the rank's loops are mostly polls (Test*, Iprobe): a wait, whose count is timing
    polling: bool = False
    #: the iterations are given by a repeated pattern of global collectives (every rank
    #: runs them, whatever their calls: a ping-pong with each partner in turn)
    given: bool = False

    @property
    def n_loops(self) -> int:
        return int(self.loop.max()) + 1 if self.loop.size and self.loop.max() >= 0 else 0

    def iterations(self, loop: int) -> int:
        return int(np.sum(self.loop == loop))


def _occurrences(h_all: np.ndarray, h_unit, start: int, p: int) -> np.ndarray:
    """Non-overlapping starts >= start of the windows of length p whose hash is h_unit."""
    cand = start + np.flatnonzero(h_all[start:] == h_unit)
    if cand.size < 2 or np.all(np.diff(cand) >= p):
        return cand
    keep, last = [], -p
    for c in cand.tolist():
        if c >= last + p:
            keep.append(c)
            last = c
    return np.asarray(keep, np.int64)


def _shares(piece: np.ndarray, vocab: np.ndarray, unit_counts: np.ndarray) -> int:
    """How many of the plain iteration's calls (as a multiset) ``piece`` holds."""
    if not len(piece):
        return 0
    idx = np.minimum(np.searchsorted(vocab, piece), len(vocab) - 1)
    known = vocab[idx] == piece
    return int(np.minimum(np.bincount(idx[known], minlength=len(vocab)), unit_counts).sum())


def _cut_gap(gap: np.ndarray, full: np.ndarray, p: int, vocab: np.ndarray, unit_counts: np.ndarray,
             anchor: np.ndarray | None = None, coll: tuple[np.ndarray, np.ndarray] | None = None) -> list[int]:
    """Offsets in a block between two plain iterations where iterations start.

    A block that repeats a variant iteration of its own (the steps after a rebuild that
    skip a check: period at least half the plain one, twice or more) is cut at each
    repetition; every other piece is an iteration if it holds more than half of the
    plain iteration's calls, and otherwise stays with the iteration before it. (Blocks
    with the same structure are cut alike: the caller keys them by it.) ``anchor`` marks
    the block's global collectives (a variant cycle that holds one is cut after its last),
    ``coll`` the plain iteration's (:func:`_split_steps`)."""
    pieces = [0]
    if len(gap) >= 1.5 * p:
        found = find_unit(full, near=p, anchor=anchor)
        if found is not None and p / 2 <= found[1] <= 2 * p:
            s, q, _ = found
            H, ipw = prefix_hash(gap)
            idx = np.arange(s, len(gap) - q + 1)
            h_win = np.zeros(len(gap) - q + 1, np.uint64)
            h_win[s:] = segment_hash(H, ipw, idx, idx + q)
            keep = _aligned(_occurrences(h_win, h_win[s], s, q), anchor, s, q).tolist()
            if len(keep) >= 2:
                pieces = sorted({0, *keep, keep[-1] + q} - {len(gap)})
    bounds = pieces + [len(gap)]
    starts = [a for a, b in zip(bounds[:-1], bounds[1:])
              if _shares(gap[a:b], vocab, unit_counts) > GAP_ITERATION_SHARE * p]
    # a piece that holds two steps (a thermo output step followed by a rebuild step) is
    # two iterations
    ends = starts[1:] + [len(gap)]
    out: list[int] = []
    for a, b in zip(starts, ends):
        out += [a + c for c in _split_steps(gap[a:b], p, vocab, unit_counts, coll)]
    return out


def _running_shares(piece: np.ndarray, vocab: np.ndarray, unit_counts: np.ndarray) -> np.ndarray:
    """``L[c]``: how many of the plain iteration's calls (as a multiset) ``piece[:c]`` holds,
    for every c (length ``len(piece) + 1``)."""
    idx = np.minimum(np.searchsorted(vocab, piece), len(vocab) - 1)
    known = vocab[idx] == piece
    key = np.where(known, idx, -1)
    order = np.argsort(key, kind="stable")
    ks = key[order]
    new = np.concatenate([[True], ks[1:] != ks[:-1]]) if len(ks) else np.zeros(0, bool)
    at = np.arange(len(ks))
    nth = np.empty(len(ks), np.int64)
    nth[order] = at - np.maximum.accumulate(np.where(new, at, 0))  # earlier calls of the same kind
    counts = np.where(known, unit_counts[idx], 0)
    return np.concatenate([[0], np.cumsum(known & (nth < counts))])


def _running_few(piece: np.ndarray, vocab: np.ndarray, unit_counts: np.ndarray) -> np.ndarray:
    """:func:`_running_shares` for a vocabulary of a few calls (a plain iteration's global
    collectives): a running count per call, in linear time."""
    held = np.zeros(len(piece) + 1, np.int64)
    for v, c in zip(vocab.tolist(), unit_counts.tolist()):
        held[1:] += np.minimum(np.cumsum(piece == np.uint64(v)), c)
    return held


def _split_steps(piece: np.ndarray, p: int, vocab: np.ndarray, unit_counts: np.ndarray,
                 coll: tuple[np.ndarray, np.ndarray] | None = None) -> list[int]:
    """Offsets where the steps in ``piece`` begin (always 0): a piece of 1.5 plain
    iterations or more is cut where both sides hold nearly all of the plain calls
    (``STEP_SPLIT_SHARE``: a rebuild step that exchanges atoms instead of ghost positions
    holds a part of them, twice, and stays whole),
    at the cut that leaves the most plain calls on the two sides together, and the first
    such (right after the first step's last plain call: a rebuild step whose atom
    exchange interleaves with calls the plain step makes too is not cut inside); each
    side is cut again the same way.

    The right side is cut again in a loop, not by recursion (a block of thousands of
    steps, OpenFOAM's solver iterations, went past Python's recursion limit), and each
    cut is sought in a window from the side's start (:func:`_first_cut`), so that a block
    of k steps is cut in time linear in its length, not k times over it."""
    out: list[int] = []
    start = 0
    right = None  # right[c]: the plain calls piece[c:] holds
    coll_right = None  # the same, of the plain iteration's global collectives
    while len(piece) - start >= 1.5 * p:
        if right is None:
            right = _running_shares(piece[::-1], vocab, unit_counts)[::-1]
            if coll is not None and len(coll[0]):
                coll_right = _running_few(piece[::-1], *coll)[::-1]
        rest = piece[start:]
        c = _first_cut(rest, p, vocab, unit_counts, right[start:], coll,
                       None if coll_right is None else coll_right[start:])
        if c is None:
            break
        out += [start + d for d in _split_steps(rest[:c], p, vocab, unit_counts, coll)]
        start += c
    return out + [start]


def _first_cut(piece: np.ndarray, p: int, vocab: np.ndarray, unit_counts: np.ndarray,
               right: np.ndarray, coll: tuple[np.ndarray, np.ndarray] | None = None,
               coll_right: np.ndarray | None = None) -> int | None:
    """:func:`_split_steps`'s cut of ``piece`` (None: none), given ``right[c]``, the plain
    calls ``piece[c:]`` holds. Sought in a window from the start, doubled until no later
    cut can hold more: the left side holds at most the plain iteration's calls and the
    right side fewer the later the cut."""
    n = len(piece)
    need = STEP_SPLIT_SHARE * p
    top = int(unit_counts.sum())  # the most plain calls one side can hold
    w = min(n, 4 * p)
    if coll_right is not None:
        # (each side holds nearly all of the plain iteration's global collectives too;
        # ``coll_right[c]``: those piece[c:] holds)
        need_c = STEP_SPLIT_SHARE * int(coll[1].sum())
    while True:
        left = _running_shares(piece[:w], vocab, unit_counts)  # cuts 0..w
        ok = (left >= need) & (right[:w + 1] >= need)
        if coll_right is not None and ok.any():
            ok &= (_running_few(piece[:w], *coll) >= need_c) & (coll_right[:w + 1] >= need_c)
        ok[0] = False
        if w == n:
            ok[-1] = False
        both = np.where(ok, left + right[:w + 1], -1)
        best = int(both.max())
        if w == n or right[w] < need or best >= top + right[w]:
            break
        w = min(n, 2 * w)
    return None if best < 0 else int(np.flatnonzero(both == best)[0])


def _loop(full: np.ndarray, struct: np.ndarray, h_win: np.ndarray, a: int, p: int,
          lo: int, anchor: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Iteration starts of the loop whose plain iteration is struct[a:a+p], and where the
    loop ends (after its last plain iteration). Plain iterations before ``a`` (at or
    after ``lo``) whose message sizes differed from the first repeats still belong to
    the loop if they lead up to it, each within a few iterations' length of the next, and
    so do the steps right before them that are the plain iteration with runs of one call
    collapsed (:func:`_steps_before`)."""
    unit = struct[a:a + p]
    occ = _aligned(_occurrences(h_win, h_win[a], a, p), anchor, a, p)
    before = _aligned(_occurrences(h_win[:a], h_win[a], lo, p), anchor, a, p)
    before = before[before + p <= a]
    nxt = a
    for o in before[::-1].tolist():
        if nxt - (o + p) > NEXT_LOOP_GAP * p:
            break
        occ = np.concatenate([[o], occ])
        nxt = o
    occ = np.concatenate([_steps_before(struct, unit, lo, int(occ[0])), occ])
    ends = occ + p
    gap_a, gap_b = ends[:-1], occ[1:]
    extra: list[int] = []
    vocab, unit_counts = np.unique(unit, return_counts=True)
    # the plain iteration's global collectives, as a multiset: a step holds them (a halo
    # exchange holds 9 of the 10 calls of a PCG iteration 'halo, Allreduce' with runs
    # collapsed on a rank of 4 neighbours, 7 of 8 on a rank of 3: a share of the calls
    # alone split a smoother sweep 'halo, halo, Allreduce' in two steps on some ranks,
    # at some P)
    coll = None if anchor is None else np.unique(unit[_every_p(anchor[a:a + p])], return_counts=True)
    cache: dict[bytes, list[int]] = {}
    for g in np.flatnonzero(gap_b > gap_a).tolist():
        ga, gb = int(gap_a[g]), int(gap_b[g])
        gap = struct[ga:gb]
        key = gap.tobytes()
        if key not in cache:
            cache[key] = _cut_gap(gap, full[ga:gb], p, vocab, unit_counts,
                                  None if anchor is None else anchor[ga:gb], coll)
        extra += [ga + c for c in cache[key]]
    # after the last plain iteration: the longest start of the rest that is a block seen
    # between two plain iterations, with its inner loops run as often as the rest repeats
    # them, still belongs to the loop (the last step prints the thermo output, or
    # rebuilds; its inner loop of a data-dependent count, PCG iterations, may run more or
    # fewer times than in any step before)
    end = int(ends[-1])
    best: list[int] = []
    for key, cuts in cache.items():
        took = _tail_pieces(struct, end, np.frombuffer(key, struct.dtype), cuts)
        if took and took[-1] > (best[-1] if best else 0):
            best = took
    if best:
        extra += [end + c for c in best[:-1]]
        end += best[-1]
    # ... and so does a last step of a kind not seen before (the run's last step rebuilds
    # and prints at once): the shortest start of the rest that holds as many of the plain
    # calls as the rest's next two plain lengths do, if that is nearly all of them (a
    # final residual check that repeats a part of the step is the final part's)
    rest = struct[end:end + 2 * p]
    if len(rest):
        held = _running_shares(rest, vocab, unit_counts)
        c = int(np.argmax(held))
        if held[c] >= STEP_SPLIT_SHARE * p:
            extra.append(end)
            end += c
    starts = np.unique(np.concatenate([occ, np.asarray(extra, np.int64)]))
    return starts, end


def _tail_pieces(struct: np.ndarray, end: int, gap: np.ndarray, cuts: list[int]) -> list[int]:
    """How the rest of the run after ``end`` follows a block seen between two plain
    iterations, ``gap``, cut at ``cuts`` (its iterations' starts; what lies before the
    first belongs to the iteration before): the starts of the iterations it holds, then
    where the last one ends (empty: it does not follow the block). The block's pieces
    are matched in order, each run of equal pieces (an inner loop) as many times as the
    rest repeats it, one at least; the rest follows the block only if it holds the whole
    block so (a rest that left it part-way, OpenFOAM's last time step, made a kind of
    its own at some P and not at others)."""
    n = len(struct)
    lead = cuts[0] if cuts else len(gap)
    if end + lead > n or not np.array_equal(struct[end:end + lead], gap[:lead]):
        return []
    bounds = list(cuts) + [len(gap)]
    pieces = [gap[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    out, at, i = [], end + lead, 0
    while i < len(pieces):
        piece, m = pieces[i], len(pieces[i])
        while i + 1 < len(pieces) and np.array_equal(pieces[i + 1], piece):
            i += 1  # (a run of equal pieces: an inner loop)
        took = len(out)
        while at + m <= n and np.array_equal(struct[at:at + m], piece):
            out.append(at - end)
            at += m
        if len(out) == took:
            return []
        i += 1
    return out + [at - end]


def _lead_moved(full: np.ndarray, struct: np.ndarray, h_win: np.ndarray, a: int, p: int, lo: int,
                anchor: np.ndarray | None, starts: np.ndarray, end: int) -> tuple[int, np.ndarray, int]:
    """The loop ``_loop`` found from ``a`` (``starts``, ``end``), or, where the plain
    iteration was cut right after its global collectives and the calls that follow
    them (its *lead*) are only some of the step's (a flag rank 0 sends rank 1 for the
    next step), the loop cut after the first j of them instead: ``(a, starts, end)``.

    Cut before the lead, the rank's first step, which has no lead before it (no flag
    was sent before the first step), differs from the iterations and joins the set-up;
    another rank, without a lead, is cut at the step's first call and keeps it. The cut
    moves only where the part before the loop ends with the plain iteration's calls
    after its first j (runs collapsed), and the loop it gives holds more of the stream.
    """
    if anchor is None or len(starts) < 2:
        return a, starts, end
    coll = _every_p(anchor[a:a + p])
    if coll[0] or not coll[-1] or coll.all():
        return a, starts, end
    lead = int(np.argmax(coll))  # calls before the first global collective
    unit_c, unit_at = _runs_collapsed(struct[a:a + p])
    head_c = _runs_collapsed(struct[max(lo, int(starts[0]) - 8 * p):int(starts[0])])[0]  # (its end will do)
    best = (a, starts, end)
    for j in unit_at[1:][unit_at[1:] < lead].tolist():  # after a whole run of the lead
        tail = unit_c[int(np.searchsorted(unit_at, j)):]
        if len(head_c) < len(tail) or not np.array_equal(head_c[len(head_c) - len(tail):], tail):
            continue
        got_starts, got_end = _loop(full, struct, h_win, a + j, p, lo, anchor)
        if len(got_starts) >= 2 and got_end - got_starts[0] > best[2] - best[1][0]:
            best = (a + j, got_starts, got_end)
    return best


def _aligned(occ: np.ndarray, anchor: np.ndarray | None, a: int, p: int) -> np.ndarray:
    """The occurrences of a plain iteration that ends with a global collective (it was cut
    right after its last one: :func:`_past_collectives`) that begin right after one too:
    a match elsewhere lies inside another cycle (a PCG iteration ``halo, Allreduce`` seen
    in a smoother sweep ``halo, halo, Allreduce`` once runs of one call are collapsed),
    and would cut it where no rank's cycle begins. The first iteration ``a`` is kept."""
    if anchor is None or not occ.size or not _every_p(anchor[a + p - 1:a + p])[0]:
        return occ
    prev = np.maximum(occ - 1, 0)
    return occ[(occ == a) | (occ == 0) | (anchor[prev] > 0)]


def _runs_collapsed(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``tokens`` with runs of one call collapsed, and where each run begins."""
    head = np.ones(len(tokens), bool)
    head[1:] = tokens[1:] != tokens[:-1]
    at = np.flatnonzero(head)
    return tokens[at], at


def _steps_before(struct: np.ndarray, unit: np.ndarray, lo: int, first: int) -> np.ndarray:
    """Starts of the steps right before ``first`` (and at or after ``lo``) that are the plain
    iteration ``unit`` with runs of one call collapsed: the first steps of a short run whose
    data-dependent counts differ from those of the first exact repeats (a Send x2 where
    the repeats have one) are the loop's, not the set-up's."""
    uc = _runs_collapsed(unit)[0]
    k = len(uc)
    if k < 2 or uc[0] == uc[-1] or first - lo < k:
        return np.zeros(0, np.int64)  # (steps whose runs would merge across their bound)
    piece = struct[lo:first]
    if piece[-1] == unit[0]:
        return np.zeros(0, np.int64)  # (a run that crosses into the loop)
    c, at = _runs_collapsed(piece)
    m = len(c) // k
    rows = c[len(c) - m * k:].reshape(m, k)[::-1]  # the last k runs first
    same = np.all(rows == uc[None, :], axis=1)
    n = int(np.argmin(same)) if not same.all() else m
    starts = at[len(c) - k * np.arange(n, 0, -1)]
    if n and starts[0] > 0 and piece[starts[0] - 1] == uc[0]:
        starts = starts[1:]  # (the first one's first run began before it)
    return (lo + starts).astype(np.int64)


def segment_keys(struct: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per segment ``bounds[k]:bounds[k+1]``: the hash of its structure with runs of one
    call collapsed (its *shape*), and of its exact structure."""
    n = len(struct)
    first_of_run = np.ones(n, bool)
    first_of_run[1:] = struct[1:] != struct[:-1]
    first_of_run[bounds[:-1][bounds[:-1] < n]] = True  # a run never crosses a cut
    kept = np.flatnonzero(first_of_run)
    H, ipw = prefix_hash(struct[kept])
    cb = np.searchsorted(kept, bounds)
    shape = segment_hash(H, ipw, cb[:-1], cb[1:])
    H, ipw = prefix_hash(struct)
    return shape, segment_hash(H, ipw, bounds[:-1], bounds[1:])


def _cut(full: np.ndarray, struct: np.ndarray, depth: int = 0,
         anchor: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Bounds and loop index of the segments, and the length of the first loop's plain
    iteration.

    A loop whose plain iteration changes as the run goes on (the communication of a
    domain decomposition rebuilt every few dozen steps) is followed: a loop found right
    after another one continues it, and a loop found right before the first one (in what
    would be the initial part) starts it."""
    n = len(full)
    H, ipw = prefix_hash(struct)
    bounds: list[np.ndarray] = []
    loops: list[np.ndarray] = []
    pos, look, n_loops, prev_p, first_p, prev_a = 0, 0, 0, 0, 0, 0
    units: list[np.uint64] = []  # the current loop's plain iterations (their hashes)
    while pos < n - 1:
        an = None if anchor is None else anchor[look:]
        found = (find_unit(full[look:], SEARCH_WINDOW, anchor=an)
                 or find_unit(struct[look:], SEARCH_WINDOW, anchor=an, full=full[look:]))
        if found is None:
            if look + SEARCH_WINDOW >= n:
                break
            look += SEARCH_WINDOW // 2  # nothing repeats here yet: slide on
            continue
        a, p, _ = found
        a += look
        if a + p > n:
            break
        idx = np.arange(pos, n - p + 1)
        h_win = np.zeros(n - p + 1, np.uint64)
        h_win[pos:] = segment_hash(H, ipw, idx, idx + p)
        starts, end = _loop(full, struct, h_win, a, p, pos, anchor)
        a, starts, end = _lead_moved(full, struct, h_win, a, p, pos, anchor, starts, end)
        if len(starts) < 2 or (n_loops and (len(starts) < 3 or end - starts[0] < LATER_LOOP_SHARE * n)):
            break
        if n_loops and starts[0] - pos <= NEXT_LOOP_GAP * max(p, prev_p) and _continues(struct, prev_a, prev_p, a, p):
            # the loop goes on with another plain iteration (the communication changed
            # after a rebuild): the same loop; what lies between is one of its iterations
            # (only if the two plain iterations share most calls: issue 24, _continues)
            bounds += [np.array([pos]) if starts[0] > pos else np.zeros(0, np.int64), starts]
            loops += [np.full(int(starts[0] > pos) + len(starts), n_loops - 1)]
        else:
            bounds += [np.array([pos]), starts]
            loops += [np.array([-1]), np.full(len(starts), n_loops)]
            n_loops += 1
            units = []
        units.append(segment_hash(H, ipw, np.array([a]), np.array([a + p]))[0])
        first_p = first_p or p
        pos, prev_p, prev_a = end, p, a
        look = pos
    if n_loops and pos < n:
        # the run's last step, a variant whose data-dependent counts are unlike any seen
        b = np.concatenate(bounds + [np.array([pos])]).astype(np.int64)
        its = np.flatnonzero(np.concatenate(loops) == n_loops - 1)
        a, e = b[its], b[its + 1]
        h = segment_hash(H, ipw, a, e)
        variant = np.flatnonzero(~np.isin(h, np.array(units, np.uint64)))
        one = np.sort(variant[np.unique(h[variant], return_index=True)[1]])  # (one of each content)
        last = (_last_variant(struct, a[one], e[one], pos, float(np.median(e[variant] - a[variant])))
                if len(variant) >= 2 else 0)
        if last:
            bounds.append(np.array([pos]))
            loops.append(np.array([n_loops - 1]))
            pos += last
    bounds += [np.array([pos]), np.array([n])]
    b = np.concatenate(bounds).astype(np.int64)
    loop = np.concatenate(loops + [np.array([-1])]).astype(np.int64)
    s0 = int(b[1])
    if n_loops and s0 > 2 * first_p and depth < 8:
        pb, pl, _ = _cut(full[:s0], struct[:s0], depth + 1, None if anchor is None else anchor[:s0])
        k = int(pl.max()) + 1 if (pl >= 0).any() else 0
        similar, last_p = False, 0
        if k:
            # ... if it ends right where the first loop begins and its plain iteration (its
            # most common length) shares more than half of its calls with the first loop's
            its = np.flatnonzero(pl == k - 1)
            lens = pb[its + 1] - pb[its]
            vals, cnt = np.unique(lens, return_counts=True)
            last_p = int(vals[np.argmax(cnt)])
            rep = int(pb[its[np.flatnonzero(lens == last_p)[0]]])
            vocab, counts = np.unique(struct[s0:s0 + first_p], return_counts=True)
            similar = _shares(struct[rep:rep + last_p], vocab, counts) > GAP_ITERATION_SHARE * first_p
        if similar and s0 - pb[-2] <= NEXT_LOOP_GAP * max(first_p, last_p):
            between = pb[-2] < s0
            b = np.concatenate([pb[:-2], [pb[-2]] if between else [], b[1:]]).astype(np.int64)
            loop = np.concatenate([pl[:-1], [k - 1] if between else [],
                                   np.where(loop[1:] >= 0, loop[1:] + k - 1, -1)]).astype(np.int64)
    return b, loop, first_p


def _last_variant(struct: np.ndarray, a: np.ndarray, b: np.ndarray, pos: int,
                  typical: float | None = None) -> int:
    """The length of the run's last step at ``pos`` (0: none), where it is a variant of the
    loop whose variant iterations are ``struct[a[k]:b[k]]`` (those that are none of its
    plain iterations; one of each content will do, in the run's order): the shortest start
    of the rest that holds, as a multiset, ``STEP_SPLIT_SHARE`` of the calls every variant
    holds (per call, the fewest any of them makes), within twice the longest variant's
    length. Only where those calls are half of a variant's (``GAP_ITERATION_SHARE``:
    variants that share little say nothing; ``typical``: the variant iterations' median
    length, of these ``b - a`` when not given); the caller asks only where the loop has
    two variant iterations at least.

    A neighbour search exchanges another number of atoms with other neighbours each time,
    so the run's last one is a block never seen before, and one that may lack calls the
    plain step makes: GROMACS's last step at P = 16 and 32 sent no atoms one way and held
    7 of the plain step's 9 calls, under ``STEP_SPLIT_SHARE`` (``_loop``'s own test), and
    went to the final part on most ranks. The calls every variant makes (the plain step's
    that do not depend on the data, and the energy reduction that the neighbour-search and
    energy steps both make) do not depend on the data; the step ends where the rest holds
    them all."""
    n = len(struct)
    if not len(a) or pos >= n:
        return 0
    at = ranges(a, b - a)  # (the variants do not overlap)
    it = np.repeat(np.arange(len(a)), b - a)
    vocab, idx = np.unique(struct[at], return_inverse=True)
    V = len(vocab)
    # each call's count in each variant (as pairs: a loop may have 100,000s of variants)
    pair, n_pair = np.unique(it * V + idx.reshape(-1), return_counts=True)
    call = pair % V
    fewest = np.full(V, np.iinfo(np.int64).max)
    np.minimum.at(fewest, call, n_pair)
    fewest[np.bincount(call, minlength=V) < len(a)] = 0  # a call some variant lacks
    vocab, fewest = vocab[fewest > 0], fewest[fewest > 0]
    need = int(fewest.sum())
    if not need or need < GAP_ITERATION_SHARE * (float(np.median(b - a)) if typical is None else typical):
        return 0
    held = _running_shares(struct[pos:pos + 2 * int((b - a).max())], vocab, fewest)
    c = int(np.argmax(held))
    return c if held[c] >= STEP_SPLIT_SHARE * need else 0


def _continues(struct: np.ndarray, prev_a: int, prev_p: int, a: int, p: int) -> bool:
    """Whether a loop whose plain iteration is ``struct[a:a+p]``, found right after the loop
    whose plain iteration is ``struct[prev_a:prev_a+prev_p]``, continues it: the two
    plain iterations share (as multisets) more than half of the shorter one's calls, as
    a step whose communication a rebuild changed does, or a step that a check every k
    steps lengthens. A loop of other calls right after another is a loop of its own
    (issue 24: ABINIT's Barriers and wavefunction Recvs of its output part, right after
    its SCF iterations of Allreduces and a Bcast, were taken as more SCF iterations)."""
    vocab, counts = np.unique(struct[prev_a:prev_a + prev_p], return_counts=True)
    return _shares(struct[a:a + p], vocab, counts) > GAP_ITERATION_SHARE * min(p, prev_p)


#: a loop found within this many plain iterations' length after (or before) another
#: one continues it (a neighbour-search step between two decompositions)
NEXT_LOOP_GAP = 4

#: the collapsed cut is taken when its plain iterations hold this many times the events
#: of the plain cut's: a run whose length differs only where the loop begins or ends
#: (CG's residual reduction beside the loop's own) is no count that depends on the data
COLLAPSED_GAIN = 1.1

#: the collapsed cut is also taken, explaining more events by any margin, when it keeps
#: this share of the plain cut's iteration starts and cuts more: it only splits blocks the
#: plain cut left whole (a PCG solve's last iteration, its convergence test, before the
#: next Newton iteration's halo: on a rank of 3 neighbours the block held 15 of the 17
#: calls of 'halo, Allreduce x5', under STEP_SPLIT_SHARE; on a rank of 2 the run of
#: Allreduces made the collapsed cut win outright, and the ranks disagreed)
REFINES_SHARE = 0.99


def _refines(fine: np.ndarray, fine_loop: np.ndarray, coarse: np.ndarray, coarse_loop: np.ndarray) -> bool:
    """Whether the cut ``fine`` (bounds and loop index of its segments) has more iterations
    than ``coarse`` and starts an iteration at ``REFINES_SHARE`` of ``coarse``'s iteration
    starts that lie within its own loops' span (a cut that starts every iteration a call
    earlier, CG's residual reduction taken into its step, refines nothing)."""
    its = coarse[:-1][coarse_loop >= 0]
    f_its = fine[:-1][fine_loop >= 0]
    if len(f_its) <= len(its) or not len(f_its):
        return False
    inner = its[(its > f_its[0]) & (its < f_its[-1])]
    return bool(inner.size) and float(np.isin(inner, f_its).mean()) >= REFINES_SHARE


#: events searched at a time for the next loop (where nothing repeats, the search
#: slides on by half of it)
SEARCH_WINDOW = 4096

def segment_rank(full: np.ndarray, struct: np.ndarray | None = None,
                 anchor: np.ndarray | None = None) -> RankSegments:
    """Cut one rank's stream (Init and Finalize excluded) into parts and iterations.

    ``full`` are the rank's full tokens (:func:`signature.phases.tokenize`), ``struct``
    its structure tokens (:func:`structure_tokens`; equal to ``full`` when omitted),
    ``anchor`` marks its global collectives (a cycle that holds one is cut right after
    its last one, the same call at every P and on every rank: :func:`_past_collectives`).

    The stream is cut as it is, and, if a call comes in runs of varying length (a count
    that changes with the data: messages sent only where atoms cross), also with those
    runs collapsed to one call, where only the collapsed stream repeats. The collapsed
    cut is taken when its plain iterations hold clearly more of the events; a run of constant
    length (the shifts of a ring, every step) stays an inner loop.
    """
    if struct is None:
        struct = full
    n = len(full)
    b, loop, _ = _cut(full, struct, anchor=anchor)
    # runs of one call whose length varies (a count that depends on the data) collapse
    # to one call; runs of a constant length (a ring's P-1 shifts) stay
    head = np.ones(n, bool)
    head[1:] = struct[1:] != struct[:-1]
    head[_crossed_bounds(struct, b, loop, anchor)] = True  # (a step's last and next step's first calls: issue 24)
    starts = np.flatnonzero(head)
    lengths = np.diff(np.concatenate([starts, [n]]))
    tok = struct[starts]
    order = np.argsort(tok, kind="stable")
    ts, ls = tok[order], lengths[order]
    new = np.concatenate([[True], ts[1:] != ts[:-1]]) if n else np.zeros(0, bool)
    grp = np.cumsum(new) - 1
    # a call's runs vary when at least two of them, and 5%, differ from its usual length
    # (one longer run where the initial part ends like an iteration is no data)
    span = int(ls.max()) + 1 if n else 1
    pair, pair_n = np.unique(grp * span + ls, return_counts=True)
    runs_n = np.bincount(grp, minlength=int(grp.max()) + 1 if n else 0)
    usual = np.zeros(len(runs_n), np.int64)
    np.maximum.at(usual, pair // span, pair_n)
    odd = runs_n - usual
    varies = (odd >= 2) & (odd >= 0.05 * runs_n)
    collapse_run = np.zeros(len(starts), bool)
    collapse_run[order] = varies[grp]
    drop = np.zeros(n, bool)
    drop[~head] = np.repeat(collapse_run, lengths)[~head]
    kept = np.flatnonzero(~drop)
    if len(kept) < n:
        plain = _plain_events(loop, b, struct, np.diff(b))

        def collapsed(k0: int) -> tuple[np.ndarray, np.ndarray, int]:
            """The collapsed stream cut from kept[k0] on (what lies before: the initial
            part): bounds in the real stream, loop index, events its plain iterations hold."""
            ks = kept[k0:]
            cb, cloop, _ = _cut(full[ks], struct[ks], anchor=None if anchor is None else anchor[ks])
            if k0:
                cb = np.concatenate([[-k0], cb])
                cloop = np.concatenate([[-1], cloop])
                if cloop[1] < 0:  # (one initial part: what lay before k0 and the cut's own)
                    cb, cloop = np.delete(cb, 1), np.delete(cloop, 1)
                cb = cb + k0
            # counted in events of the real stream
            spans = np.diff(np.concatenate([kept, [n]])[cb])
            return np.concatenate([kept, [n]])[cb], cloop, _plain_events(cloop, cb, struct[kept], spans)
        def better(cut_b: np.ndarray, cloop: np.ndarray, c_plain: int) -> bool:
            return c_plain > COLLAPSED_GAIN * plain or (c_plain > plain and _refines(cut_b, cloop, b, loop))
        found = collapsed(0)
        its = np.flatnonzero(loop >= 0)
        if not better(*found) and its.size:
            # the collapsed stream's first repeat found in the set-up (a short solve there,
            # its calls on other tags) led a loop that took the run in a few blocks, or cut
            # it elsewhere: cut again from where the plain cut's loop begins (OpenFOAM at
            # P = 12 and 16, the one rank whose loop stayed coarser than the others')
            k0 = int(np.searchsorted(kept, b[its[0]]))
            if 0 < k0 < len(kept):
                found = collapsed(k0)
        if better(*found):
            b, loop = found[0], found[1]
    shape, exact = segment_keys(struct, b)
    return RankSegments(bounds=b, loop=loop, shape=shape, exact=exact)


def _crossed_bounds(struct: np.ndarray, bounds: np.ndarray, loop: np.ndarray,
                    anchor: np.ndarray | None = None) -> np.ndarray:
    """The bounds between two iterations of a loop whose step ends with the call it
    begins with: a run of that call crosses every such bound of the loop (whose steps
    are more than that call: a loop of one call is its run). Such a run is
    two steps' calls (the last of one, the first of the next), not one count that
    depends on the data (a count's runs cross a bound only where the count is high enough).
    (Issue 24: ABINIT's SCF step ends with an Allreduce and begins with two, a run of
    three, but of two at the loop's entry and one at its exit; collapsed as a count, the
    step began at its Bcast instead, and the SCF initialisation became a step at some P.)

    With ``anchor``, a loop whose iterations hold a global collective counts only if
    its bounds fall right after one (the canonical cut). A bound elsewhere is a cut that
    found a multi-step period, beginning part-way into a step. It can split a run whose
    length follows the data (``Send x2`` of one step as the last call of one iteration
    and the first of the next). Kept, such a split stops the collapsed cut from finding
    the one-step loop. (A rank of a short run whose counts repeated with a period of
    two steps lost its first and last steps to the set-up and the final part.)"""
    n = len(struct)
    at = bounds[1:-1]  # (the bound before the first segment and after the last are none)
    nxt = loop[1:]  # the loop of the segment each bound begins
    inner = (nxt >= 0) & (nxt == loop[:-1]) & (at > 0) & (at < n)  # between two iterations of one loop
    crossed = inner.copy()
    crossed[inner] = struct[at[inner]] == struct[at[inner] - 1]
    length = np.diff(bounds)
    canonical = np.ones(len(at), bool)
    if anchor is not None:
        coll = np.concatenate([[0], np.cumsum(_every_p(anchor))])  # global collectives before i
        holds = coll[bounds[1:]] > coll[bounds[:-1]]  # segments that hold one
        with_coll = np.unique(loop[(loop >= 0) & holds])  # loops whose iterations do
        canonical = ~np.isin(nxt, with_coll) | (anchor[np.maximum(at - 1, 0)] > 0)
    out = [at[inner & (nxt == L)] for L in np.unique(nxt[inner]).tolist()
           if crossed[inner & (nxt == L)].all() and canonical[inner & (nxt == L)].all()
           and np.median(length[loop == L]) > 1]
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def _plain_events(loop: np.ndarray, bounds: np.ndarray, tokens: np.ndarray, spans: np.ndarray) -> int:
    """Events (``spans`` per segment) in the iterations whose content is their loop's
    most common one: what a cut explains as the plain iteration."""
    total = 0
    for L in np.unique(loop[loop >= 0]).tolist():
        its = np.flatnonzero(loop == L)
        _, exact = segment_keys(tokens, bounds)
        _, inv, cnt = np.unique(exact[its], return_inverse=True, return_counts=True)
        total += int(spans[its][np.asarray(inv).reshape(-1) == np.argmax(cnt)].sum())
    return total
