"""Phase detection: find an application's signature in one trace (Panadero et al. §2.1).

A *phase* is a sequence of communication events, with the compute bursts
between them, that repeats; its *weight* is how often it repeats. The
detector needs no change to the application's source.

Algorithm
---------
1. **Tokens.** Every event (Init and Finalize aside) becomes a 64-bit token
   hashing (op, peer relative to the rank, receive peer relative to the rank,
   root, bytes sent, bytes received, communicator); relative peers make
   rank r's "send to r+1" the same token on every rank. Tags are left out,
   as in the paper's tokens: a pipeline that tags its chunks is one loop.
2. **Loop period, per rank.** Tandem-repeat detection as trace compressors
   do it (ScalaTrace-style loop folding, on a bounded window): the candidate
   periods are the common distances between equal tokens; for each period p,
   ``t[i] == t[i+p]`` marks positions inside a tandem repeat, and runs of at
   least 2p such positions are repeats ``u^k`` (k >= 3; k = 2 only when
   nothing repeats three times: two equal calls in a row are not a loop yet).
   The chosen period is
   the smallest one whose repeats cover at least 75% of what the best period
   covers, so the innermost loop wins over an outer loop that merely
   contains it (a check every k >= 3 iterations: the iterations with and
   without it become two phases, as the program's loop has them).
3. **Iterations.** The iteration's first event (the *anchor*) is where the
   first repetition starts, moved forward while the unit would begin with
   the same call it ends with (an initial part that ends like an iteration
   stays initial). The rank's stream is cut before every m-th occurrence of
   the anchor's token, m its count per iteration. What precedes the first anchor is the
   *initial part*; the last cut keeps its longest prefix that equals an
   earlier iteration, and the rest is the *final part*. An inner loop inside
   the time step (N-body's P-1 shifts) becomes one phase whose weight is the
   product of both trip counts; an iteration that differs in a few steps
   (a residual check every k iterations) is a separate phase with its own
   weight.
4. **Across ranks.** Every rank must cut the run into the same number of
   iterations (ranks doing different things, like boundary ranks, roots or
   pipeline stages, still do so once per iteration); iteration j of every
   rank forms one global iteration, and a phase is a distinct combination of
   the ranks' iteration contents, numbered in order of first occurrence.
   Segment contents are compared by a polynomial rolling hash of their
   tokens (computed with prefix sums, so cutting is vectorised).
5. **Time.** An event's *span* runs from its start to the next event's start
   on the same rank: its call plus the burst after it, so an iteration owns
   the computation that follows its communication. Spans add up to the
   rank's runtime. A phase's TE is its mean duration per repetition (mean
   over ranks); PET = sum of TE_i * W_i (paper Eq. 4) over all phases,
   including the weight-1 initial and final parts. *Coverage* is the share
   of the runtime between the first rank entering the repeated iterations and
   the last rank leaving them: a pipeline's fill and drain belong to its
   loop, although a rank that finished early waits for the drain in the
   final part's first call. The mean over ranks of the time inside repeated
   phases is reported beside it (``rank_coverage``).

Message matching (every receive has its send) is checked first: a trace whose
point-to-point messages do not pair up is reported with the rank and event.
"""

from __future__ import annotations

import numpy as np

from .unmodelled import unmodelled_notes
from .errors import IncompleteTraceError, SigexError, TraceFormatError
from .model import Phase, Signature
from .trace import OP_CODE, OPS, PEER_ANY, Trace

__all__ = ["extract", "tokenize", "find_anchor", "cut_rank", "check_messages", "PhaseDetectionError"]


class PhaseDetectionError(SigexError):
    """The ranks of a trace cannot be cut into the same iterations."""


_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)
_MUL = np.uint64(0x9E3779B97F4A7C15)
_BASE = np.uint64(0x100000001B3)  # odd: invertible modulo 2**64

SEND_OPS = [OP_CODE[n] for n in ("Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Ibsend",
                                 "Irsend", "Sendrecv", "Sendrecv_replace", "Isendrecv",
                                 "Isendrecv_replace")]
RECV_OPS = [OP_CODE[n] for n in ("Recv", "Irecv", "Mrecv", "Imrecv")]
_REGION_OPS = [OP_CODE["Region_begin"], OP_CODE["Region_end"]]


def _mix(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Fold column v into hash h (wrapping uint64 arithmetic)."""
    h = (h ^ v.astype(np.int64).view(np.uint64)) * _MUL
    return h ^ (h >> np.uint64(29))


def tokenize(trace: Trace) -> np.ndarray:
    """One uint64 token per event: equal tokens are the same communication, relative
    to the rank (op, relative peers, root, bytes, communicator)."""
    ev = trace.events
    P = max(trace.nprocs, 1)
    rank = ev["rank"].astype(np.int64)

    def rel(col: np.ndarray) -> np.ndarray:
        col = col.astype(np.int64)
        return np.where(col >= 0, (col - rank) % P, col)

    with np.errstate(over="ignore"):
        h = np.full(len(rank), np.uint64(0xCBF29CE484222325))
        for col in (ev["op"], rel(ev["peer"]), rel(ev["recv_peer"]), ev["root"], ev["bytes"],
                    ev["recv_bytes"], ev["comm"]):
            h = _mix(h, col)
    return h


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and lengths of the runs of True in a boolean array."""
    d = np.diff(np.concatenate([[0], mask.view(np.int8), [0]]))
    starts = np.flatnonzero(d == 1)
    return starts, np.flatnonzero(d == -1) - starts


def find_anchor(tokens: np.ndarray, window: int = 4096,
                max_candidates: int = 12) -> tuple[int, int] | None:
    """``(index, per_unit)``: the first event of the innermost dominant loop's first
    iteration and how often its token occurs in one iteration, or None if nothing
    repeats. See the module docstring, steps 2-3."""
    t = tokens[:window]
    n = len(t)
    if n < 2:
        return None
    # candidate periods: the most common distances from a token to its next few
    # occurrences (a token that occurs m times per iteration is a period away from
    # its m-th next occurrence)
    order = np.argsort(t, kind="stable")
    ts = t[order]
    gaps = np.concatenate([(order[lag:] - order[:-lag])[ts[lag:] == ts[:-lag]]
                           for lag in range(1, min(5, n))])
    gaps = gaps[(gaps > 0) & (gaps <= n // 2)]
    if gaps.size == 0:
        return None
    values, counts = np.unique(gaps, return_counts=True)
    cands = np.sort(values[np.argsort(-counts, kind="stable")[:max_candidates]])
    runs = {int(p): _runs(t[int(p):] == t[:-int(p)]) for p in cands}
    best = []
    for min_k in (3, 2):  # a pair of equal calls is not yet a loop, unless nothing else repeats
        for p, (starts, lengths) in runs.items():
            ok = lengths >= (min_k - 1) * p  # run of m matches: (m + p) // p repetitions
            cover = int(np.sum(((lengths[ok] + p) // p) * p))
            if cover:
                best.append((p, cover, int(starts[ok][0])))
        if best:
            break
    if not best:
        return None
    top = max(c for _, c, _ in best)
    p, _, s0 = next(b for b in best if b[1] >= 0.75 * top)  # smallest such period
    # rotation: an iteration does not begin with the call it ends with. The first
    # repetition can start too early when the initial part ends like an iteration
    # (CG: an Allreduce before a loop that ends with one); move the start forward
    # while the unit's first and last tokens are equal
    s = s0
    while p > 1 and s < s0 + p - 1 and s + p < n and t[s] == t[s + p - 1]:
        s += 1
    return s, int(np.sum(t[s:s + p] == t[s]))


def check_messages(trace: Trace) -> None:
    """Every point-to-point message has a send and a receive: raise naming the first
    rank and event whose message has no partner.

    Pairs are counted per (source, destination, communicator). Receives posted with
    MPI_ANY_SOURCE take their source from the completion record. Traces with
    persistent requests (Start/Startall) are not checked (their traffic is in the
    requests, not the events).
    """
    ev = trace.events
    if not trace.complete:
        raise IncompleteTraceError(f"{trace.name}: the traced run did not finish "
                                   f"({trace.meta.get('incomplete_reason')}); phases of a "
                                   "truncated run would be wrong. Re-run `sigex trace`")
    op = ev["op"]
    if np.isin(op, [OP_CODE["Start"], OP_CODE["Startall"]]).any():
        return
    rank = ev["rank"].astype(np.int64)
    P = trace.nprocs
    idx = np.arange(len(op))
    is_send = np.isin(op, SEND_OPS) & (ev["peer"] >= 0)
    recv_peer = np.where(np.isin(op, RECV_OPS), ev["peer"], -1).astype(np.int64)
    sr = np.isin(op, [OP_CODE[n] for n in ("Sendrecv", "Sendrecv_replace", "Isendrecv",
                                            "Isendrecv_replace")])
    recv_peer = np.where(sr, ev["recv_peer"], recv_peer)
    # ANY_SOURCE receives resolved through their completion (by request id)
    any_src = np.flatnonzero(recv_peer == PEER_ANY)
    if any_src.size:
        c = trace.completions
        key_c = c["rank"].astype(np.int64) * (1 << 40) + c["req"]
        key_e = rank[any_src] * (1 << 40) + ev["req"][any_src]
        pos = np.searchsorted(np.sort(key_c), key_e)
        srt = np.argsort(key_c)
        found = (pos < len(key_c)) & (np.sort(key_c)[np.minimum(pos, len(key_c) - 1)] == key_e)
        recv_peer[any_src[found]] = c["peer"][srt[pos[found]]]
    is_recv = recv_peer >= 0
    comm = ev["comm"].astype(np.int64) + 1
    skey = (rank[is_send] * P + ev["peer"][is_send]) * (len(trace.comms) + 1) + comm[is_send]
    rkey = (recv_peer[is_recv] * P + rank[is_recv]) * (len(trace.comms) + 1) + comm[is_recv]
    su, sc = np.unique(skey, return_counts=True)
    ru, rc = np.unique(rkey, return_counts=True)
    allk = np.union1d(su, ru)
    ns = np.zeros(len(allk), np.int64)
    nr = np.zeros(len(allk), np.int64)
    ns[np.searchsorted(allk, su)] = sc
    nr[np.searchsorted(allk, ru)] = rc
    bad = np.flatnonzero(ns != nr)
    if not bad.size:
        return
    k = allk[bad[0]]
    src, dst = divmod(int(k // (len(trace.comms) + 1)), P)
    if ns[bad[0]] > nr[bad[0]]:
        rows = idx[is_send][skey == k]
        extra = rows[nr[bad[0]]]
        what = (f"rank {src} sends {ns[bad[0]]} messages to rank {dst} but rank {dst} receives "
                f"{nr[bad[0]]}; the first unmatched send is rank {src} event seq "
                f"{int(ev['seq'][extra])} ({trace.op_name(op[extra])})")
    else:
        rows = idx[is_recv][rkey == k]
        extra = rows[ns[bad[0]]]
        what = (f"rank {dst} receives {nr[bad[0]]} messages from rank {src} but rank {src} sends "
                f"{ns[bad[0]]}; the first unmatched receive is rank {dst} event seq "
                f"{int(ev['seq'][extra])} ({trace.op_name(op[extra])})")
    raise TraceFormatError(f"{trace.name}: unmatched point-to-point messages: {what}. The trace "
                           "is inconsistent (edited, or from a run that lost messages)")


def _prefix_hash(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prefix sums H[i] = sum_{j<i} t_j * B^j and inverse powers B^-i (mod 2**64): the hash
    of t[a:b] is (H[b] - H[a]) * B^-a."""
    n = len(tokens)
    with np.errstate(over="ignore"):
        pw = np.cumprod(np.concatenate([[np.uint64(1)], np.full(n, _BASE)]))[:n]
        inv = pow(int(_BASE), -1, 1 << 64)
        ipw = np.cumprod(np.concatenate([[np.uint64(1)], np.full(n, np.uint64(inv))]))[:n + 1]
        H = np.concatenate([[np.uint64(0)], np.cumsum(tokens * pw)])
    return H, ipw


def _segment_hash(H: np.ndarray, ipw: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = (H[b] - H[a]) * ipw[a]
        return _mix(h, (b - a).astype(np.int64))


def cut_rank(tokens: np.ndarray) -> tuple[int, np.ndarray, np.ndarray, int]:
    """Cut one rank's token stream into iterations.

    Returns ``(init_end, starts, hashes, final_start)``: the initial part is
    ``tokens[:init_end]``, iteration j is ``tokens[starts[j]:starts[j+1]]`` (the last one
    ends at ``final_start``), ``hashes[j]`` identifies its content, and
    ``tokens[final_start:]`` is the final part. No loop: no iterations, all initial.
    """
    n = len(tokens)
    found = find_anchor(tokens)
    if found is None:
        return n, np.zeros(0, np.int64), np.zeros(0, np.uint64), n
    a, per_unit = found
    occ = np.flatnonzero(tokens == tokens[a]).astype(np.int64)
    j0 = int(np.searchsorted(occ, a))
    starts = occ[j0 % per_unit::per_unit]  # every per_unit-th occurrence, aligned on a
    H, ipw = _prefix_hash(tokens)
    ends = np.concatenate([starts[1:], [n]])
    hashes = _segment_hash(H, ipw, starts, ends)
    # the last cut: keep its longest prefix equal to an earlier iteration
    final_start = n
    if len(starts) > 1:
        s = int(starts[-1])
        earlier = dict(zip(hashes[:-1].tolist(), (ends - starts)[:-1].tolist()))
        best = 0
        for h, length in earlier.items():
            if length > best and s + length <= n and \
                    int(_segment_hash(H, ipw, np.array([s]), np.array([s + length]))[0]) == h:
                best = length
        if best:
            final_start = s + best
            hashes[-1] = _segment_hash(H, ipw, np.array([s]), np.array([final_start]))[0]
        else:
            final_start = s
            starts, hashes = starts[:-1], hashes[:-1]
    return int(starts[0]) if len(starts) else n, starts, hashes, final_start


def _pattern(op_names: list[str], per_rank_ops: list[np.ndarray]) -> tuple[tuple[str, ...], str]:
    """Op structure (distinct ops in order of first use) and a one-line summary with the
    per-rank count range of each op."""
    order: list[int] = []
    for ops in per_rank_ops:
        for o in ops.tolist():
            if o not in order:
                order.append(o)
    parts = []
    for o in order:
        counts = [int(np.sum(ops == o)) for ops in per_rank_ops]
        lo, hi = min(counts), max(counts)
        n = f"{lo}" if lo == hi else f"{lo}-{hi}"
        parts.append(op_names[o] if n == "1" else f"{op_names[o]} x{n}")
    return tuple(op_names[o] for o in order), ", ".join(parts) if parts else "(computation only)"


def extract(trace: Trace, *, check: bool = True) -> Signature:
    """Find the signature of a traced run: its phases, weights and costs.

    Parameters
    ----------
    trace : Trace
        A complete trace (``signature.load_trace``).
    check : bool
        Check first that every point-to-point message pairs up.

    Returns
    -------
    Signature
        Phases in order of first occurrence (initial part, loop phases, final part),
        per-rank statistics, PET (Eq. 4) and coverage.

    Raises
    ------
    IncompleteTraceError
        The run did not finish.
    TraceFormatError
        Messages do not pair up (names the rank and event).
    PhaseDetectionError
        The ranks cannot be cut into the same iterations.

    Examples
    --------
    >>> sig = extract(load_trace("traces/stencil/P16.h5"))     # doctest: +SKIP
    >>> [(p.kind, p.weight) for p in sig.phases]
    [('initial', 1), ('loop', 90), ('loop', 10), ('final', 1)]
    """
    if check:
        check_messages(trace)
    elif not trace.complete:
        raise IncompleteTraceError(f"{trace.name}: the traced run did not finish")
    ev = trace.events
    P = trace.nprocs
    tokens = tokenize(trace)
    ro = trace.rank_offsets

    # --- cut every rank; ranks must agree on the number of iterations -----------------
    cuts = []
    for r in range(P):
        a, b = int(ro[r]), int(ro[r + 1])
        frame = ev["op"][a:b]
        if len(frame) < 2 or frame[0] != OP_CODE["Init"] or frame[-1] != OP_CODE["Finalize"]:
            raise TraceFormatError(f"{trace.name}: rank {r} does not start with Init and end with "
                                   "Finalize; the trace is damaged")
        inner = ev["op"][a + 1:b - 1]
        marks = np.isin(inner, _REGION_OPS)
        if not marks.any():
            cuts.append(cut_rank(tokens[a + 1:b - 1]))
            continue
        # regions are not part of the loop: cut without them, then put each cut after
        # the Region_end events that close the previous iteration
        kept = np.flatnonzero(~marks)
        init_end, starts, hashes, final_start = cut_rank(tokens[a + 1:b - 1][~marks])
        n = len(inner)
        after = np.concatenate([[0], kept + 1])  # compressed bound c -> just after event c-1
        idx = np.arange(n + 1)
        not_end = np.concatenate([inner != OP_CODE["Region_end"], [True]])
        skip = np.minimum.accumulate(np.where(not_end, idx, n)[::-1])[::-1]
        to_full = lambda c: skip[after[c]]  # noqa: E731
        cuts.append((int(to_full(init_end)), to_full(starts), hashes, int(to_full(final_start))))
    counts = np.array([len(c[1]) for c in cuts])
    if np.any(counts != counts[0]):
        lo, hi = int(np.argmin(counts)), int(np.argmax(counts))
        raise PhaseDetectionError(
            f"{trace.name}: ranks disagree on the loop: rank {lo} repeats {counts[lo]} times, rank "
            f"{hi} {counts[hi]} times. sigex needs every rank to run the same iterations (SPMD); "
            "if the program is irregular, name its phases with signature.region()")
    n_it = int(counts[0])
    local = np.array([c[2] for c in cuts], np.uint64).reshape(P, n_it) if n_it else np.zeros((P, 0), np.uint64)
    # a global iteration is the combination of the ranks' iteration contents
    _, first, inverse = np.unique(local.T, axis=0, return_index=True, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    rank_of = np.argsort(np.argsort(first))  # renumber by first occurrence
    it_phase = rank_of[inverse] if n_it else np.zeros(0, np.int64)
    weights = np.bincount(it_phase, minlength=len(first)) if n_it else np.zeros(0, np.int64)
    # weight-1 iterations at either end belong to the initial / final part
    lo_it, hi_it = 0, n_it
    while lo_it < hi_it and weights[it_phase[lo_it]] == 1:
        lo_it += 1
    while hi_it > lo_it and weights[it_phase[hi_it - 1]] == 1:
        hi_it -= 1
    if lo_it or hi_it < n_it:
        kept = it_phase[lo_it:hi_it]
        _, first2, inv2 = np.unique(kept, return_index=True, return_inverse=True)
        it_phase = np.argsort(np.argsort(first2))[inv2] if kept.size else kept
    n_loop = int(it_phase.max()) + 1 if it_phase.size else 0

    # --- label every event with its segment: r * S + local, where local is 0 for the
    # initial part, 1..K for the kept iterations and K+1 for the final part ----------
    K = hi_it - lo_it
    S = K + 2
    n_phase = n_loop + 2
    local = np.zeros(len(tokens), np.int64)
    for r, (_, starts, _, final_start) in enumerate(cuts):
        a, b = int(ro[r]), int(ro[r + 1])
        n = b - a - 2
        bounds = np.concatenate([starts, [final_start]])[lo_it:hi_it + 1] if n_it else np.array([n])
        local[a + 1:b - 1] = np.searchsorted(bounds, np.arange(n), side="right")
        local[b - 1] = -1  # Finalize is outside the run's time
    valid = local >= 0
    # events outside the run (Finalize) go to one extra bin, P * S, dropped after summing
    seg_id = np.where(valid, ev["rank"].astype(np.int64) * S + local, P * S)
    local_phase = np.concatenate([[0], 1 + it_phase, [n_loop + 1]]).astype(np.int64)
    seg_phase = np.tile(local_phase, P)
    seg_rank = np.repeat(np.arange(P), S)

    # --- time: span = from an event's start to the next event's start -----------------
    t_start = ev["t_start"]
    n_ev = len(t_start)
    nxt = np.minimum(np.arange(1, n_ev + 1), n_ev - 1)
    span = np.where(valid, t_start[nxt] - np.maximum(t_start, 0.0), 0.0)  # Init ends at 0
    comm = np.where(valid & (ev["op"] != OP_CODE["Init"]), ev["t_comm"], 0.0)
    cpu_next = np.where(valid, ev["t_cpu"][nxt], 0.0)
    counters = {name: np.where(valid, ev[name][nxt].astype(float), 0.0)
                for name in ("instr", "cycles") if name in ev}

    def seg_sum(w):
        return np.bincount(seg_id, weights=w, minlength=P * S + 1)[:-1]

    dur, cm, cpu, nb = seg_sum(span), seg_sum(comm), seg_sum(cpu_next), seg_sum(ev["bytes"])
    nev = np.bincount(seg_id, minlength=P * S + 1)[:-1].astype(float)
    present = nev > 0
    pr = seg_phase * P + seg_rank
    npr = np.bincount(pr[present], minlength=n_phase * P).astype(float)

    def mean_std(x):
        s = np.bincount(pr[present], weights=x[present], minlength=n_phase * P)
        s2 = np.bincount(pr[present], weights=x[present] ** 2, minlength=n_phase * P)
        with np.errstate(invalid="ignore", divide="ignore"):
            m = s / npr
            sd = np.sqrt(np.maximum(s2 / npr - m * m, 0.0))
        return m.reshape(n_phase, P), sd.reshape(n_phase, P)

    dm, dsd = mean_std(dur)
    cmm, cmsd = mean_std(cm)
    cpum, cpusd = mean_std(cpu)
    compm, compsd = mean_std(dur - cm)
    bm, _ = mean_std(nb)
    evm, _ = mean_std(nev)
    cm_counters = {k: mean_std(seg_sum(v))[0] for k, v in counters.items()}
    per_phase_segments = np.bincount(seg_phase[present], minlength=n_phase)
    # TE_i: mean duration of one repetition, over repetitions and ranks
    te = np.bincount(seg_phase[present], weights=dur[present], minlength=n_phase) / np.maximum(per_phase_segments, 1)

    # per template event: the burst after it, averaged over the phase's repetitions
    # (position of an event inside its segment; segments are contiguous per rank)
    starts_at = np.concatenate([[True], seg_id[1:] != seg_id[:-1]])
    first_idx = np.maximum.accumulate(np.where(starts_at, np.arange(n_ev), 0))
    pos = np.arange(n_ev) - first_idx
    max_pos = int(pos.max()) + 1 if n_ev else 1
    ev_phase = np.where(valid, seg_phase[np.minimum(seg_id, P * S - 1)], n_phase)
    slot_key = (ev_phase * P + ev["rank"].astype(np.int64)) * max_pos + pos
    n_keys = (n_phase + 1) * P * max_pos
    slot_n = np.maximum(np.bincount(slot_key, minlength=n_keys), 1)
    slot_mean = {"cpu": np.bincount(slot_key, weights=cpu_next, minlength=n_keys) / slot_n,
                 "comp": np.bincount(slot_key, weights=np.where(valid, span - comm, 0.0),
                                     minlength=n_keys) / slot_n}
    slot_mean.update({k: np.bincount(slot_key, weights=v, minlength=n_keys) / slot_n
                      for k, v in counters.items()})

    runtime = trace.runtime
    loop_w = np.bincount(it_phase, minlength=n_loop) if n_loop else np.zeros(0, np.int64)
    w_all = np.concatenate([[1], loop_w, [1]])
    phases = []
    for k in range(n_phase):
        if per_phase_segments[k] == 0 and k == n_phase - 1:
            continue  # no final part
        # template: each rank's events of the phase's first repetition
        first_local = int(np.flatnonzero(local_phase == k)[0])
        sel = valid & (local == first_local)
        tcount = np.bincount(ev["rank"][sel], minlength=P)
        offs = np.concatenate([[0], np.cumsum(tcount)]).astype(np.int64)
        template = {c: ev[c][sel].astype(np.int64) for c in
                    ("op", "peer", "recv_peer", "root", "bytes", "recv_bytes", "comm", "tag")}
        template_aux = ev["aux"][sel]
        cost = {name: v[slot_key[sel]] for name, v in slot_mean.items()}
        per_rank_ops = [o[~np.isin(o, _REGION_OPS)] for o in
                        (template["op"][offs[r]:offs[r + 1]] for r in range(P))]
        names = tuple(dict.fromkeys(trace.regions[i] for i in
                                    template_aux[template["op"] == OP_CODE["Region_begin"]]))
        ops, pattern = _pattern(list(OPS), per_rank_ops)
        kind = "initial" if k == 0 else ("final" if k == n_phase - 1 else "loop")
        stats = {"events": evm[k], "duration_mean": dm[k], "duration_std": dsd[k],
                 "comp_mean": compm[k], "comp_std": compsd[k], "cpu_mean": cpum[k],
                 "cpu_std": cpusd[k], "comm_mean": cmm[k], "comm_std": cmsd[k], "bytes_mean": bm[k],
                 "instr_mean": cm_counters["instr"][k] if "instr" in cm_counters else np.full(P, np.nan),
                 "cycles_mean": cm_counters["cycles"][k] if "cycles" in cm_counters else np.full(P, np.nan)}
        w = int(w_all[k])
        phases.append(Phase(id=len(phases), kind=kind, weight=w, ops=ops, pattern=pattern, regions=names,
                            te=float(te[k]), share=float(te[k] * w / runtime) if runtime > 0 else 0.0,
                            stats=stats, template_offsets=offs, template=template, template_cost=cost))
    problems = _region_problems(trace, local, S)
    pet = float(sum(p.te * p.weight for p in phases))
    covered = float(sum(p.te * p.weight for p in phases if p.kind == "loop" and p.weight >= 2))
    # the loop's window: from the first rank entering its first repeated iteration to the
    # last rank leaving its last one (a pipeline's fill and drain belong to the loop)
    window = 0.0
    if K:
        ev_rank = ev["rank"]
        in_loop = valid & (local >= 1) & (local <= K)
        after_loop = (local == K + 1) | (~valid)
        first_in = np.full(P, np.inf)
        np.minimum.at(first_in, ev_rank[in_loop], t_start[in_loop])
        leave = np.full(P, np.inf)
        np.minimum.at(leave, ev_rank[after_loop], np.maximum(t_start[after_loop], 0.0))
        window = float(np.max(leave) - np.min(first_in))
    return Signature(source=str(trace.path) if trace.path else None, app=trace.meta.get("app"),
                     nprocs=P, workload_label=trace.meta.get("workload_label"),
                     workload_value=trace.meta.get("workload_value"), work_mode=trace.work_mode,
                     runtime=runtime, pet=pet,
                     coverage=min(1.0, window / runtime) if runtime > 0 else 0.0,
                     rank_coverage=covered / runtime if runtime > 0 else 0.0,
                     phases=tuple(phases), sequence=(it_phase + 1).astype(np.int64),
                     region_problems=problems,
                     unmodelled=tuple(unmodelled_notes(trace.meta, runtime)))


def _region_problems(trace: Trace, local: np.ndarray, S: int, limit: int = 10) -> tuple[str, ...]:
    """Where the user's regions disagree with the detected cut: a region entered in
    one repetition (or part) and left in another, or never left."""
    ev = trace.events
    marks = np.flatnonzero(np.isin(ev["op"], _REGION_OPS))
    out: list[str] = []
    open_: dict[tuple[int, int], list[int]] = {}
    for i in marks.tolist():
        key = (int(ev["rank"][i]), int(ev["aux"][i]))
        if ev["op"][i] == OP_CODE["Region_begin"]:
            open_.setdefault(key, []).append(i)
            continue
        if not open_.get(key):
            out.append(f"rank {key[0]}: region {trace.regions[key[1]]!r} left at seq "
                       f"{int(ev['seq'][i])} without being entered")
            continue
        j = open_[key].pop()
        if local[j] != local[i]:
            out.append(f"rank {key[0]}: region {trace.regions[key[1]]!r} entered at seq "
                       f"{int(ev['seq'][j])} and left at seq {int(ev['seq'][i])} crosses a phase "
                       "boundary the detector found")
        if len(out) >= limit:
            break
    for (r, k), left in open_.items():
        if left and len(out) < limit:
            out.append(f"rank {r}: region {trace.regions[k]!r} entered at seq "
                       f"{int(ev['seq'][left[0]])} is never left")
    return tuple(out)
