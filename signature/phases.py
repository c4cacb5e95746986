"""Phase detection: find an application's signature in one trace (Panadero et al. §2.1).

A *phase* is a sequence of communication events, with the compute bursts
between them, that repeats; its *weight* is how often it repeats. The
detector needs no change to the application's source.

Algorithm
---------
1. **Tokens.** Every event (Init and Finalize aside) becomes two 64-bit tokens:
   the *full* token hashes (op, peer relative to the rank, receive peer relative
   to the rank, root, bytes sent, bytes received, communicator), the *structure*
   token the same without bytes and with communicators identified by their
   members. Relative peers make rank r's "send to r+1" the same token on every
   rank. Tags are left out, as in the paper's tokens.
2. **Sections** (:func:`signature.align.global_sections`). A run whose global
   collectives (calls on a communicator of all ranks) enclose long stretches that
   the sequence of such calls does not repeat (the kernels of a benchmark suite,
   each opened by a barrier) is cut there into sections; steps 3 and 4 run in
   each section, and a weight-1 part never spans two sections. A kernel without
   periodic structure is thus one weight-1 phase of its own. Such a run is also
   cut wherever the pattern of global collectives changes: a run of a unit of
   them repeated three times or more (a kernel's repetitions) is a section and
   one loop, cut at the unit's first collective whatever each repetition nests
   (a ping-pong with each partner in turn); its kinds are the multiset over the
   ranks of the set of calls each makes (no peers). In such a run, a loop found
   in step 3 that the ranks cut into different numbers of iterations, or whose
   recurring kinds hold less than half of its section, is a weight-1 part (HPL's
   pivoting, RandomAccess's polls).
3. **Loops, per rank** (:mod:`signature.iterations`). Tandem-repeat detection on
   a window of the full tokens (as trace compressors fold loops) finds the
   innermost dominant loop's period and its first iteration, the *plain*
   iteration. Its structure is then matched over the whole rest of the run,
   whatever the message sizes are there (they change whenever the data moves).
   A block between two plain iterations is appended to the iteration before it
   when it shares at most half of the plain calls (a reduction printed every k
   steps), is an iteration of its own when it shares more (a rebuild step), and
   is cut at each repetition when it repeats a variant of its own (the steps
   after a rebuild that skip a check), and in two where it holds two steps
   (nearly all plain calls on either side of the cut). Loops that follow each other are found
   in turn; a loop right after (or right before) another whose plain iteration
   changed (a domain decomposition rebuilt) continues it. Where a call's count
   depends on the data (runs of one call of varying length), the stream with
   runs collapsed is cut instead, when its plain iterations explain clearly more.
4. **Across ranks** (:mod:`signature.align`). A loop is kept only if the ranks
   run it together (a quarter of them, two at least, cut it into the same number
   of iterations, or all within a factor 1.5), its iterations recur on most ranks
   and are not mostly polls; a
   data-driven update loop whose rounds each rank polls through at its own pace
   is a weight-1 part. Ranks that cut a loop into the
   same number of iterations are aligned iteration by iteration. Where they do
   not (rank classes: PME ranks, a class whose own unit is a fraction of the
   step), the ranks are aligned by the communication they share: matched
   messages and collective calls put each rank's iterations into the global
   iterations of a reference rank. Ranks that cut the loop as often as the others
   but at another point of the step (a PME rank whose own iteration runs from its
   FFT to the next step's receives) are cut again where their messages say, and
   every iteration starts early enough to hold the requests it completes.
   Ranks that run one cycle in lock step but found it starting at different calls
   (each finds its period on its own stream) are cut at one common call
   (``_common_cut``): a rank's iterations are rotated by a number of calls of its
   commonest iteration so that they begin with the call that most ranks alike (those
   making mostly the same calls) begin with, the rotation whose calls (messages,
   matched with their tags, and collective calls) fall least in another iteration than
   their partner's; a rotation that would put more of them across iterations is not
   made, and where the rank's calls then still cross, the signature says so in one
   note naming the rank and the phase. Where every rank then begins the loop part-way
   into the step (a short run whose first steps repeat the same data-dependent counts:
   two ranks found their period from the counts' Send on, and the others were aligned
   with them) while the part before the loop ends with the step's first calls up to there
   and the part after begins with the rest of a step, every rank's iterations are
   rotated back to the step's first call, one call for all ranks, and the loop gains that
   step (``_first_step_whole``; runs of one call collapsed, as counts that depend on the
   data). Each rank's last iteration then takes the calls
   that begin the part after the loop while they complete it (``_last_step_whole``: a
   rank whose own cut began part-way into the step had ended its loop before the last
   step's end; a rank whose last iteration is empty takes them only where they are a
   whole step). A
   *kind* of iteration is a distinct combination of the ranks' iteration shapes
   (structure with runs collapsed, so that a count that depends on the data is
   one kind); kinds that differ only where the data decides are merged
   (``_merge_variant_kinds``: a difference on a quarter of the ranks or fewer; the
   plain steps before and after a repartition changed the halo; rare
   neighbour-search steps on a common period whose atom exchanges differ, the run's
   last step among them), while
   kinds that recur side by side (a plain step and the step that reduces every
   10) stay apart. A *phase* is a kind, numbered in order of first occurrence,
   with one template per rank (ranks with equal templates form its classes;
   ``events``/``events_max`` per rank record the spread of its repetitions). Weight-1 iterations at
   either end of a loop join the part beside them; what lies before, between and
   after the loops are weight-1 parts (``initial``, ``between``, ``final``).
   Template message sizes are the mean over the repetitions of the same
   structure (``template_cost["bytes_max"]``, ``["recv_bytes_max"]`` their largest:
   above the mean where the sizes depend on the data).
5. **Time.** An event's *span* runs from its start to the next event's start on
   the same rank: its call plus the burst after it, so an iteration owns the
   computation that follows its communication. Spans add up to the rank's
   runtime. A phase's TE is its mean duration per repetition (mean over ranks; a
   rank with nothing in a repetition counts 0); PET = sum of TE_i * W_i (paper
   Eq. 4) over all phases. *Coverage* is the share of each rank's time spent
   inside phases that repeat (weight >= 2), mean over ranks
   (``coverage_slowest`` on the rank with the longest run); a rank that leaves
   the loop early and waits in its next call for the others (a pipeline's
   drain) waits for the loop. ``loop_span`` is the share of the runtime
   between the first rank entering the repeated phases and the last leaving
   them. A weight-1 phase holding 20% of the run or more, with many calls that
   repeat, is reported as "main loop not found".

Message matching (every receive has its send) is checked first: a trace whose
point-to-point messages do not pair up is reported with the rank and event.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import persistent
from ._arrays import find_events, lookup, ranges
from .unmodelled import unmodelled_notes
from .errors import IncompleteTraceError, TraceFormatError
from .model import Phase, Signature
from .align import _COLLECTIVE, _collective_keys, _nth, align_ranks, global_sections
from .iterations import (RankSegments, _canonical_comms, _covered, _runs_collapsed, find_unit, mix, prefix_hash,
                         posted_peers, relative_peers, segment_hash, segment_keys, segment_rank,
                         ROOT_ROTATING, rotating_roots, structure_tokens)
from .trace import OP_CODE, OPS, PEER_ANY, RECV_OPS, SEND_OPS, SENDRECV_OPS, Trace

__all__ = ["extract", "tokenize", "find_anchor", "cut_rank", "check_messages"]



_REGION_OPS = [OP_CODE["Region_begin"], OP_CODE["Region_end"]]
_POLL_OPS = [OP_CODE[n] for n in ("Test", "Testany", "Testsome", "Testall", "Iprobe", "Improbe", "Win_test")]
#: a rank whose loops' events are this share of polls or more is waiting, not looping
POLL_LOOP_SHARE = 0.5


def tokenize(trace: Trace, roots: np.ndarray | None = None) -> np.ndarray:
    """One uint64 token per event: equal tokens are the same communication, relative
    to the rank (op, relative peers, root, bytes, communicator). The calls of a
    rotation, whose root moves on by one member each time, share one root
    (``roots``: :func:`signature.iterations.rotating_roots`, computed when not given)."""
    ev = trace.events
    peer, rpeer = posted_peers(trace)
    with np.errstate(over="ignore"):
        h = np.full(len(ev["op"]), np.uint64(0xCBF29CE484222325))
        for col in (ev["op"], relative_peers(trace, peer), relative_peers(trace, rpeer),
                    rotating_roots(trace) if roots is None else roots, ev["bytes"], ev["recv_bytes"],
                    ev["comm"]):
            h = mix(h, col)
    return h


def find_anchor(tokens: np.ndarray, window: int = 4096) -> tuple[int, int] | None:
    """``(index, per_unit)``: the first event of the innermost dominant loop's first
    iteration and how often its token occurs in one iteration, or None if nothing
    repeats (:func:`signature.iterations.find_unit`)."""
    found = find_unit(tokens, window)
    return None if found is None else (found[0], found[2])


def _rotation_frame(trace: Trace, rotation: np.ndarray, seg_id: np.ndarray, seg_phase_all: np.ndarray,
                    n_phase: int, P: int, S: int) -> tuple[np.ndarray, set[int]]:
    """Per global segment (``rank * S + segment``), the rank whose figures it gives, and the
    phases read in a rotation's frame.

    A loop over items owned round-robin whose owner computes item k before broadcasting
    it keeps one rank busy per repetition and the others waiting, a different rank each
    time: a mean over each rank's own repetitions would give every rank 1/n of the work
    and the replay 1/n of the time. So where every repetition of a loop phase holds one
    call of a rotation (``rotation``: :func:`signature.iterations.rotating_roots`), whose
    root moves between repetitions, and the phase has no point-to-point call nor any other
    rooted one, a repetition's figures on rank r are those of the member as far (in the
    communicator's order) from the first member as r is from that repetition's root: the
    root's own on the first member, which the template names as the root. Elsewhere a
    segment gives its own rank's figures."""
    frame = np.repeat(np.arange(P, dtype=np.int64), S)
    n_seg = P * S
    at = np.flatnonzero((rotation == ROOT_ROTATING) & (seg_id < n_seg))
    if not at.size:
        return frame, set()
    ev = trace.events
    sid = seg_id[at]
    ph = seg_phase_all[sid]
    per_seg = np.bincount(sid, minlength=n_seg)
    present = np.bincount(seg_id, minlength=n_seg + 1)[:-1] > 0
    ev_phase = np.append(seg_phase_all, n_phase)[seg_id]
    other = ((ev["peer"] != -1) | (ev["recv_peer"] != -1)
             | ((ev["root"] >= 0) & (rotation != ROOT_ROTATING)))
    mixed = np.bincount(ev_phase[other], minlength=n_phase + 1)[:n_phase] > 0
    vr = np.full(len(at), -1, np.int64)  # each call's rank in the frame
    lroot = np.full(len(at), -1, np.int64)  # and its root's place among the members
    comm = ev["comm"][at]
    for c in np.unique(comm):
        sel = np.flatnonzero(comm == c)
        members = trace.comms.members_of(int(c)).astype(np.int64)
        lroot[sel] = trace.comms.local_ranks(int(c), ev["root"][at[sel]])
        vr[sel] = members[(trace.comms.local_ranks(int(c), ev["rank"][at[sel]]) - lroot[sel]) % len(members)]
    phases: set[int] = set()
    for k in np.unique(ph):
        mine = ph == k
        if (mixed[k] or not np.all(per_seg[(seg_phase_all == k) & present] == 1)
                or len(np.unique(lroot[mine])) < 2):
            continue
        frame[sid[mine]] = vr[mine]
        phases.add(int(k))
    return frame, phases


def completed_posts(trace: Trace) -> np.ndarray:
    """(events,) for each MPI_Wait, the event that posted the request it completed (the
    last call of its rank that posted that request id before it); -1 for every other
    event and for a wait on a null or inactive request. (Waitany, Waitsome and the tests
    complete what the run's timing decides; Waitall many requests: none is named.)"""
    ev = trace.events
    n = len(ev["op"])
    out = np.full(n, -1, np.int64)
    comp = trace.completions
    if not n or not len(comp["rank"]):
        return out
    # each completion's wait event, and the rank's last post of its request id before it
    c_rank, c_req = np.asarray(comp["rank"], np.int64), np.asarray(comp["req"], np.int64)
    w_ev = find_events(ev["rank"], ev["seq"], c_rank, comp["seq"])
    single = (w_ev >= 0) & (ev["op"][np.maximum(w_ev, 0)] == OP_CODE["Wait"])
    w_ev, c_rank, c_req = w_ev[single], c_rank[single], c_req[single]
    req = np.asarray(ev["req"], np.int64)
    posts = np.flatnonzero((req >= 0) & (ev["op"] != OP_CODE["Wait"]))
    if not posts.size or not w_ev.size:
        return out
    rmax = int(max(req.max(), c_req.max())) + 2
    at = lookup(ev["rank"][posts].astype(np.int64) * rmax + req[posts] + 1, posts, c_rank * rmax + c_req + 1, w_ev,
                side="before")
    out[w_ev[at >= 0]] = posts[at[at >= 0]]
    return out


def check_messages(trace: Trace) -> list[str]:
    """Every point-to-point receive has its send: raise naming the first rank and event
    whose message has no partner. Sends that nobody receives are a program's own doing
    (an eager message left behind as a communicator is freed: Quantum ESPRESSO's pools do
    it), not a damaged trace: they come back as notes, one per (source, destination)
    pair, and the replay keeps them unmatched.

    Pairs are counted per (source, destination, communicator). Receives posted with
    MPI_ANY_SOURCE take their source from the completion record. Traces with starts of
    persistent requests are not checked (their traffic is in the requests, not the
    events): :func:`extract` checks them once :mod:`signature.persistent` has read the
    starts as the calls they post.
    """
    ev = trace.events
    if not trace.complete:
        raise IncompleteTraceError(f"{trace.name}: the traced run did not finish "
                                   f"({trace.meta.get('incomplete_reason')}); phases of a "
                                   "truncated run would be wrong. Re-run `sigex trace`")
    op = ev["op"]
    if np.isin(op, [OP_CODE["Start"], OP_CODE["Startall"]]).any():
        return []
    rank = ev["rank"].astype(np.int64)
    P = trace.nprocs
    idx = np.arange(len(op))
    is_send = np.isin(op, SEND_OPS) & (ev["peer"] >= 0)
    recv_peer = np.where(np.isin(op, RECV_OPS), ev["peer"], -1).astype(np.int64)
    sr = np.isin(op, SENDRECV_OPS)
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
    ncomm = len(trace.comms) + 1
    bad = np.flatnonzero(nr > ns)
    if bad.size:
        k = allk[bad[0]]
        src, dst = divmod(int(k // ncomm), P)
        rows = idx[is_recv][rkey == k]
        extra = rows[ns[bad[0]]]
        what = (f"rank {dst} receives {nr[bad[0]]} messages from rank {src} but rank {src} sends "
                f"{ns[bad[0]]}; the first unmatched receive is rank {dst} event seq "
                f"{int(ev['seq'][extra])} ({trace.op_name(op[extra])})")
        raise TraceFormatError(f"{trace.name}: unmatched point-to-point messages: {what}. The trace "
                               "is inconsistent (edited, or from a run that lost messages)")
    pairs: dict[tuple[int, int], list] = {}  # (source, destination) -> [messages, comms, first row]
    for b in np.flatnonzero(ns > nr):
        k = allk[b]
        src, dst = divmod(int(k // ncomm), P)
        row = int(idx[is_send][skey == k][nr[b]])
        got = pairs.setdefault((src, dst), [0, 0, row])
        got[0] += int(ns[b] - nr[b])
        got[1] += 1
        got[2] = min(got[2], row)
    return [f"rank {src} sent {n} message{'s' if n > 1 else ''} to rank {dst} that rank {dst} never received"
            + (f" (on {c} communicators)" if c > 1 else "")
            + f"; the first is event seq {int(ev['seq'][row])}, {trace.op_name(op[row])} of "
            f"{int(ev['bytes'][row])} bytes; kept as sent, unreceived"
            for (src, dst), (n, c, row) in sorted(pairs.items())]


def cut_rank(tokens: np.ndarray) -> tuple[int, np.ndarray, np.ndarray, int]:
    """Cut one rank's token stream at its first loop's iterations.

    Returns ``(init_end, starts, hashes, final_start)``: the initial part is
    ``tokens[:init_end]``, iteration j is ``tokens[starts[j]:starts[j+1]]`` (the last one
    ends at ``final_start``), ``hashes[j]`` identifies its content, and
    ``tokens[final_start:]`` is the rest. No loop: no iterations, all initial.
    """
    seg = segment_rank(tokens)
    n = len(tokens)
    its = np.flatnonzero(seg.loop == 0)
    if not its.size:
        return n, np.zeros(0, np.int64), np.zeros(0, np.uint64), n
    return int(seg.bounds[its[0]]), seg.bounds[its], seg.exact[its], int(seg.bounds[its[-1] + 1])


def _pattern(op_names: list[str], per_rank_ops: list[np.ndarray], by_count: bool = False) -> tuple[tuple[str, ...], str]:
    """Op structure (distinct ops in order of first use) and a one-line summary with the
    per-rank count range of each op; ``by_count``: the summary names the most frequent
    calls first (a weight-1 part, a kernel that runs once, is named by what it mostly
    does)."""
    order: list[int] = []
    for ops in per_rank_ops:
        for o in ops.tolist():
            if o not in order:
                order.append(o)
    parts = []
    counts = {o: [int(np.sum(ops == o)) for ops in per_rank_ops] for o in order}
    shown = sorted(order, key=lambda o: -sum(counts[o])) if by_count else order
    for o in shown:
        lo, hi = min(counts[o]), max(counts[o])
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

    Examples
    --------
    >>> sig = extract(load_trace("traces/stencil/P16.h5"))     # doctest: +SKIP
    >>> [(p.kind, p.weight) for p in sig.phases]
    [('initial', 1), ('loop', 90), ('loop', 10), ('final', 1)]
    """
    if not trace.complete:
        if check:
            check_messages(trace)  # (it says why the run did not finish)
        raise IncompleteTraceError(f"{trace.name}: the traced run did not finish")
    # persistent requests as the nonblocking calls their starts post (the communication is
    # in the starts, which name no peer: signature/persistent.py)
    trace, n_started = persistent.expand(trace)
    notes = check_messages(trace) if check else []
    if n_started:
        notes.append(f"{n_started:,} calls of MPI_Start/MPI_Startall are read as the nonblocking calls they post "
                     "(Isend, Irecv, Iallreduce, ... of each persistent request, with its init call's peer or "
                     "root, tag and size); the init calls and MPI_Request_free of those requests, local, are "
                     "left out")
    ev = trace.events
    P = trace.nprocs
    rotation = rotating_roots(trace)  # (the root column, a rotation's calls keyed as one)
    tokens = tokenize(trace, rotation)
    ro = trace.rank_offsets

    # --- cut every rank into parts and iterations, then align the ranks -------------
    struct = structure_tokens(trace, rotation)
    for r in range(P):
        a, b = int(ro[r]), int(ro[r + 1])
        if b - a < 2 or ev["op"][a] != OP_CODE["Init"] or ev["op"][b - 1] != OP_CODE["Finalize"]:
            raise TraceFormatError(f"{trace.name}: rank {r} does not start with Init and end with "
                                   "Finalize; the trace is damaged")
    # sections: the kernels of a benchmark suite, between global synchronisations; loops
    # are looked for inside each
    sections, section_loops = global_sections(trace, with_loops=True)
    if sections is None:
        sections = np.stack([np.zeros(P, np.int64), np.diff(ro) - 2], axis=1)
        section_loops = [None]
    seen: dict[tuple[bytes, bytes], RankSegments] = {}
    cache: dict = {}
    # the global collectives (on a communicator of every rank): a cycle that holds one is
    # cut right after its last one, the same call at every P (issue 24: OpenFOAM's solver
    # loops were cut at a different call of their cycle at each P)
    # (1: on a communicator of every rank of this run, where an iteration that ends with
    # one begins; 2: of every rank at every P as far as the trace tells, the calls the cut
    # moves past: a communicator made by choosing its members, as Quantum ESPRESSO's
    # diagonalisation group, holds all 4 ranks at P = 4 and half of them at P = 8:
    # _whole_comms)
    comms = trace.comms
    world = np.zeros(len(comms) + 1, np.int8)  # comm ids -1 (none) land on the last entry
    world[:len(comms)] = ((comms.size == P) & ~comms.inter).astype(np.int8) + _whole_comms(trace)
    world_coll = np.where(_IS_COLLECTIVE[ev["op"]], world[np.minimum(ev["comm"], len(comms))], 0).astype(np.int8)
    cols_b, cols_l = [], []
    section_start: list[int] = []  # global segments where a section begins
    n_loops = 0
    uneven: set[int] = set()  # loops the ranks cut into different numbers of iterations
    for k in range(sections.shape[1] - 1):
        if section_loops[k] is not None:  # a repeated pattern of global collectives: its iterations
            rank_segs = [_collective_loop(struct, int(ro[r]) + 1, section_loops[k][r]) for r in range(P)]
        else:
            rank_segs = [_cut_section(ev["op"], tokens, struct, int(ro[r]) + 1 + int(sections[r, k]),
                                      int(ro[r]) + 1 + int(sections[r, k + 1]), int(sections[r, k]), seen,
                                      world_coll)
                         for r in range(P)]
        b_k, l_k = align_ranks(trace, rank_segs, cache)
        for L in range(int(l_k.max()) + 1 if l_k.size and l_k.max() >= 0 else 0):
            if len({s.iterations(L) for s in rank_segs} - {0}) > 1:
                uneven.add(L + n_loops)
        b_k[:, 0] = sections[:, k]
        section_start.append(sum(c.shape[1] for c in cols_b))
        cols_b.append(b_k[:, :-1])
        cols_l.append(np.where(l_k >= 0, l_k + n_loops, -1))
        n_loops += int(l_k.max()) + 1 if l_k.size and l_k.max() >= 0 else 0
    bounds = np.concatenate(cols_b + [sections[:, -1:]], axis=1).astype(np.int64)
    seg_loop = np.concatenate(cols_l).astype(np.int64)
    seg_section = np.repeat(np.arange(len(cols_b)), [c.shape[1] for c in cols_b])
    G = bounds.shape[1] - 1
    keyed: dict[tuple[bytes, bytes], tuple[np.ndarray, np.ndarray]] = {}

    def contents(bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Iteration contents, per rank and global segment: shape (runs collapsed) and exact."""
        shape = np.zeros((P, G), np.uint64)
        exact = np.zeros((P, G), np.uint64)
        for r in range(P):
            a, b = int(ro[r]), int(ro[r + 1])
            key = (struct[a + 1:b - 1].tobytes(), bounds[r].tobytes())
            if key not in keyed:
                keyed[key] = segment_keys(struct[a + 1:b - 1], bounds[r])
            shape[r], exact[r] = keyed[key]
        return shape, exact

    is_it = seg_loop >= 0
    it_cols = np.flatnonzero(is_it)
    # every rank's iterations cut at one common call of the cycle (each found its period
    # on its own stream, starting wherever its first plain iteration did)
    shape, exact = contents(bounds)
    unaligned: list[tuple[int, int, str]] = []
    if it_cols.size and P > 1:
        common, unaligned = _common_cut(trace, bounds, seg_loop, struct, exact, cache)
        if not np.array_equal(common, bounds):
            bounds = common
            shape, exact = contents(bounds)
        # a loop that every rank begins at one call part-way into the step: rotated back to
        # the step's first call, with the step it split between the parts around it
        first, at = _first_step_whole(bounds, seg_loop, struct, ro)
        if at:
            bounds = first
            seg_loop = np.insert(seg_loop, at, seg_loop[np.array(at) - 1])
            seg_section = np.insert(seg_section, at, seg_section[np.array(at) - 1])
            section_start = [s + int(np.searchsorted(at, s, side="right")) for s in section_start]
            G = bounds.shape[1] - 1
            is_it = seg_loop >= 0
            it_cols = np.flatnonzero(is_it)
            shape, exact = contents(bounds)
        whole = _last_step_whole(bounds, seg_loop, struct, exact, ro)
        # a collective call that a rank makes at the edge of its iteration while the other
        # members make it in the iteration beside: moved over to them
        whole = _collectives_whole(whole, seg_loop, ro, ev["rank"], *_collective_calls(trace, cache))
        if not np.array_equal(whole, bounds):
            bounds = whole
            shape, exact = contents(bounds)
    held = _hold_requests(trace, bounds, seg_loop)
    if not np.array_equal(held, bounds):
        # iterations that hold the requests they complete, where that does not make more
        # kinds of iteration than the cut had (a cut that rotates every step evenly, as a
        # halo exchange's Irecv before the step's end, keeps its one kind)
        h_shape, h_exact = contents(held)

        def n_kinds(sh: np.ndarray) -> int:
            return len(np.unique(sh[:, it_cols].T, axis=0)) if it_cols.size else 0
        if n_kinds(h_shape) <= n_kinds(shape):
            bounds, shape, exact = held, h_shape, h_exact
    # a phase is a distinct combination of the ranks' iteration shapes; in a loop of
    # global collectives (a benchmark's repetitions), the multiset over the ranks of the
    # set of calls each makes: a repetition with the next partner (who sends first, who
    # answers), or with another random ring, is the same kind
    kind_shape = shape
    coll_cols = it_cols[np.array([section_loops[int(seg_section[c])] is not None for c in it_cols], bool)]
    if coll_cols.size:
        kind_shape = shape.copy()
        kind_shape[:, coll_cols] = np.sort(_call_sets(trace, bounds, coll_cols), axis=0)
    kind = np.full(G, -1, np.int64)
    if it_cols.size:
        _, first, inverse = np.unique(kind_shape[:, it_cols].T, axis=0, return_index=True,
                                      return_inverse=True)
        kind[it_cols] = np.argsort(np.argsort(first))[np.asarray(inverse).reshape(-1)]
    if it_cols.size:
        kind[it_cols] = _merge_variant_kinds(kind[it_cols], it_cols, seg_loop[it_cols], bounds, struct, ro,
                                             ev["op"], kind_shape[:, it_cols])
    counts = np.bincount(kind[it_cols], minlength=int(kind.max()) + 1) if it_cols.size else np.zeros(0, int)
    # (the per-event tokens are not needed past here)
    del tokens, world_coll, rank_segs, seen, cache, kind_shape, shape
    struct = keyed = None  # (contents() reads them: rebound, not deleted)
    if it_cols.size and len(section_loops) > 1:
        # in a run cut into sections (a benchmark suite), a loop found on the ranks' own
        # streams that they cut into different numbers of iterations, or whose recurring
        # kinds hold less than ``RECURRING_SHARE`` of its section's events, is
        # no loop of the program: repeats the data made (HPL's pivoting and look-ahead,
        # RandomAccess's polls) are a weight-1 part, the same at every P
        events = np.diff(bounds, axis=1).sum(axis=0)
        in_section = np.bincount(seg_section, weights=events)
        for L in np.unique(seg_loop[it_cols]).tolist():
            cols = np.flatnonzero(seg_loop == L)
            k = int(seg_section[cols[0]])
            if section_loops[k] is not None:
                continue
            recurring = counts[kind[cols]] >= RARE_KIND
            if L in uneven or events[cols[recurring]].sum() < RECURRING_SHARE * in_section[k]:
                seg_loop[cols] = -1
    # weight-1 iterations at either end of a loop belong to the part beside them, unless
    # they are a whole step or more on every rank (the run's last step rebuilds and
    # prints at once); a loop left without iterations is part of the weight-1 parts
    sizes = np.diff(bounds, axis=1)
    for L in range(int(seg_loop.max()) + 1 if seg_loop.size else 0):
        cols = np.flatnonzero(seg_loop == L)
        if not cols.size:  # (dropped above)
            continue
        plain = cols[np.argmax(counts[kind[cols]])]  # the first iteration of the commonest kind
        whole = counts[kind[plain]] >= 2

        def step(c):
            return whole and bool(np.all(sizes[:, c] >= sizes[:, plain]))
        lo, hi = 0, len(cols)
        while lo < hi and counts[kind[cols[lo]]] == 1 and not step(cols[lo]):
            lo += 1
        while hi > lo and counts[kind[cols[hi - 1]]] == 1 and not step(cols[hi - 1]):
            hi -= 1
        seg_loop[cols[:lo]] = -1
        seg_loop[cols[hi:]] = -1
    # merge adjacent weight-1 parts into one segment each (within a section: a kernel that
    # runs once stays a phase of its own)
    part = seg_loop < 0
    keep_bound = np.ones(G + 1, bool)
    keep_bound[1:G] = ~(part[1:] & part[:-1])
    keep_bound[section_start] = True
    bounds = bounds[:, keep_bound]
    seg_loop = seg_loop[keep_bound[:-1]]
    seg_section = seg_section[keep_bound[:-1]]
    kind = kind[keep_bound[:-1]]
    exact = exact[:, keep_bound[:-1]]
    G = len(seg_loop)
    if G == 0 or seg_loop[0] >= 0:  # the initial part always exists (maybe empty)
        bounds = np.concatenate([bounds[:, :1], bounds], axis=1)
        seg_loop = np.concatenate([[-1], seg_loop])
        seg_section = np.concatenate([[0], seg_section])
        kind = np.concatenate([[-1], kind])
        exact = np.concatenate([np.zeros((P, 1), np.uint64), exact], axis=1)
        G += 1
    if seg_loop[-1] >= 0:  # so does the final part
        bounds = np.concatenate([bounds, bounds[:, -1:]], axis=1)
        seg_loop = np.concatenate([seg_loop, [-1]])
        seg_section = np.concatenate([seg_section, seg_section[-1:]])
        kind = np.concatenate([kind, [-1]])
        exact = np.concatenate([exact, np.zeros((P, 1), np.uint64)], axis=1)
        G += 1
    # phase ids in order of first occurrence: every weight-1 part is its own phase,
    # every kind of iteration one phase
    seg_phase = np.zeros(G, np.int64)
    phase_kind: list[str] = []
    kind_to_phase: dict[int, int] = {}
    for g in range(G):
        if seg_loop[g] < 0:
            seg_phase[g] = len(phase_kind)
            phase_kind.append("initial" if g == 0 else ("final" if g == G - 1 else "between"))
        else:
            k = int(kind[g])
            if k not in kind_to_phase:
                kind_to_phase[k] = len(phase_kind)
                phase_kind.append("loop")
            seg_phase[g] = kind_to_phase[k]
    n_phase = len(phase_kind)
    weights = np.bincount(seg_phase, minlength=n_phase)

    # --- label every event with its global segment: rank * S + segment ----------------
    # (the per-event columns below are built in place and dropped when done: on LAMMPS
    # peptide at P = 32 (3.4 M events) they held 560 MB at once, and every fresh page of
    # a first signature in a process costs a fault)
    S = G
    t_start = ev["t_start"]
    n_ev = len(t_start)
    ar = np.arange(n_ev)
    # every rank's inner cuts as event indices: rank-major, so one sorted array for all
    cuts = (bounds[:, 1:-1] + (ro[:-1] + 1)[:, None]).reshape(-1)
    ev_rank64 = ev["rank"].astype(np.int64)
    local = np.searchsorted(cuts, ar, side="right")
    local -= (G - 1) * ev_rank64
    local[ro[1:] - 1] = -1  # Finalize is outside the run's time
    valid = local >= 0
    invalid = ~valid
    # events outside the run (Finalize) go to one extra bin, P * S, dropped after summing
    seg_id = ev_rank64 * S
    seg_id += local
    seg_id[invalid] = P * S
    seg_phase_all = np.tile(seg_phase, P)
    seg_rank = np.repeat(np.arange(P), S)
    # a loop over items owned round-robin, in its rotation's frame (_rotation_frame)
    seg_frame, frame_phases = _rotation_frame(trace, rotation, seg_id, seg_phase_all, n_phase, P, S)
    # the repetitions whose exact structure is that of the phase's first one, per rank:
    # their message sizes are averaged into the template
    first_seg = np.array([int(np.flatnonzero(seg_phase == k)[0]) for k in range(n_phase)])
    same_exact = (exact == exact[:, first_seg[seg_phase]]).reshape(-1)

    # --- time: span = from an event's start to the next event's start -----------------
    def following(col: np.ndarray) -> np.ndarray:
        """col at the next event (the last event's own), as float, 0 outside the run."""
        out = np.empty(n_ev)
        out[:-1] = col[1:]
        out[-1:] = col[-1:]
        out[invalid] = 0.0
        return out
    span = following(t_start)
    span -= np.maximum(t_start, 0.0)  # Init ends at 0
    span[invalid] = 0.0
    comm = ev["t_comm"].astype(float)
    comm[invalid | (ev["op"] == OP_CODE["Init"])] = 0.0
    cpu_next = following(ev["t_cpu"])
    counters = {name: following(ev[name]) for name in ("instr", "cycles") if name in ev}

    def seg_sum(w):
        return np.bincount(seg_id, weights=w, minlength=P * S + 1)[:-1]

    dur, cm, cpu, nb = seg_sum(span), seg_sum(comm), seg_sum(cpu_next), seg_sum(ev["bytes"])
    nev = np.bincount(seg_id, minlength=P * S + 1)[:-1].astype(float)
    present = nev > 0
    pr = seg_phase_all * P + seg_frame
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
    evmax = np.zeros(n_phase * P)
    np.maximum.at(evmax, pr, nev)
    per_phase_segments = np.bincount(seg_phase_all[present], minlength=n_phase)
    # TE_i: mean duration of one repetition, over repetitions and ranks
    # (a rank with no event in a repetition spent no time in it: it counts as 0)
    te = np.bincount(seg_phase_all, weights=dur, minlength=n_phase) / np.maximum(weights * P, 1)

    # per template event: the burst after it, averaged over the phase's repetitions
    # (position of an event inside its segment; segments are contiguous per rank)
    starts_at = np.concatenate([[True], seg_id[1:] != seg_id[:-1]])
    pos = np.where(starts_at, ar, 0)
    del starts_at
    np.maximum.accumulate(pos, out=pos)  # each event's segment's first event ...
    np.subtract(ar, pos, out=pos)  # ... and its position there
    del ar
    max_pos = int(pos.max()) + 1 if n_ev else 1
    # (phase, rank, position); events outside the run on phase n_phase
    slot_key = np.append(seg_phase_all, n_phase)[seg_id]
    slot_key *= P
    ev_frame = None  # per event, the rank whose figures it gives (in a rotation's frame)
    if frame_phases:
        ev_frame = np.append(seg_frame, 0)[seg_id]
        ev_frame[seg_id == P * S] = ev_rank64[seg_id == P * S]
        slot_key += ev_frame
    else:
        slot_key += ev_rank64
    slot_key *= max_pos
    slot_key += pos
    del pos, ev_rank64
    n_keys = (n_phase + 1) * P * max_pos
    if n_keys > 4 * n_ev + 1024:  # many phases of long segments: phases x ranks x positions is sparse
        _, slot_key = np.unique(slot_key, return_inverse=True)
        slot_key = slot_key.reshape(-1)
        n_keys = int(slot_key.max()) + 1 if n_ev else 1
    slot_n = np.maximum(np.bincount(slot_key, minlength=n_keys), 1)
    span -= comm  # (both 0 outside the run)
    slot_mean = {"cpu": np.bincount(slot_key, weights=cpu_next, minlength=n_keys) / slot_n,
                 "comp": np.bincount(slot_key, weights=span, minlength=n_keys) / slot_n}
    slot_mean.update({k: np.bincount(slot_key, weights=v, minlength=n_keys) / slot_n
                      for k, v in counters.items()})
    del span, comm, cpu_next, counters
    # message sizes per template event: mean and largest over the repetitions of the
    # same structure (they change when the data moves: an atom exchange after a rebuild)
    same = np.append(same_exact, False)[seg_id]
    seg_id = None  # (seg_sum() reads it)
    key_same = slot_key[same]
    same_n = np.maximum(np.bincount(key_same, minlength=n_keys), 1)
    size_mean, size_max = {}, {}
    for c in ("bytes", "recv_bytes"):
        v = ev[c][same].astype(float)
        size_mean[c] = np.bincount(key_same, weights=v, minlength=n_keys) / same_n
        size_max[c] = np.zeros(n_keys)
        np.maximum.at(size_max[c], key_same, v)
    del same, key_same, v

    runtime = trace.runtime
    phases = []
    renumber = np.full(n_phase, -1, np.int64)
    rotated: list[tuple] = []  # phases with calls of a rotation: (phase, calls, of calls, ops)
    # templates: each rank's events of a phase's first repetition, grouped by phase
    local_c = np.clip(local, 0, S - 1)
    posted = dict(zip(("peer", "recv_peer"), posted_peers(trace)))
    done_by = completed_posts(trace)
    t_idx = np.flatnonzero(valid & (first_seg[seg_phase[local_c]] == local_c))
    t_idx = t_idx[np.argsort(seg_phase[local_c[t_idx]], kind="stable")]
    t_bounds = np.searchsorted(seg_phase[local_c[t_idx]], np.arange(n_phase + 1))
    for k in range(n_phase):
        if per_phase_segments[k] == 0 and phase_kind[k] != "initial":
            continue  # an empty part
        renumber[k] = len(phases)
        sel = t_idx[t_bounds[k]:t_bounds[k + 1]]
        rank_of = ev["rank"]
        if k in frame_phases:  # rank r's template: the calls whose figures are rank r's
            rank_of = ev_frame
            sel = sel[np.argsort(rank_of[sel], kind="stable")]
        tcount = np.bincount(rank_of[sel], minlength=P)
        offs = np.concatenate([[0], np.cumsum(tcount)]).astype(np.int64)
        # (receives posted with MPI_ANY_SOURCE name no source: the one they matched is the run's)
        template = {c: (posted[c] if c in posted else ev[c])[sel].astype(np.int64) for c in
                    ("op", "peer", "recv_peer", "root", "bytes", "recv_bytes", "comm", "tag")}
        spin = np.flatnonzero(rotation[sel] == ROOT_ROTATING)
        if spin.size:  # a rotation's call is placed at its communicator's first member
            template["root"][spin] = [int(trace.comms.members_of(int(c))[0]) for c in template["comm"][spin]]
            template["rotating"] = np.zeros(len(sel), np.int64)  # 1: a call of a rotation
            template["rotating"][spin] = 1
            r0 = int(rank_of[sel[spin[0]]])  # the calls of one rank's repetition
            mine = spin[(spin >= offs[r0]) & (spin < offs[r0 + 1])]
            rotated.append((k, len(mine), offs[r0 + 1] - offs[r0], sorted({OPS[o] for o in template["op"][mine]})))
        for c in ("bytes", "recv_bytes"):
            template[c] = np.rint(size_mean[c][slot_key[sel]]).astype(np.int64)
        posts = done_by[sel]
        if np.any(posts >= 0):  # each MPI_Wait's request: the template event that posted it
            by_ev = np.argsort(sel, kind="stable")
            at = np.minimum(np.searchsorted(sel[by_ev], posts), len(sel) - 1)
            template["completes"] = np.where((posts >= 0) & (sel[by_ev][at] == posts), by_ev[at], -1)
        template_aux = ev["aux"][sel]
        cost = {name: v[slot_key[sel]] for name, v in slot_mean.items()}
        cost["bytes_max"] = size_max["bytes"][slot_key[sel]]
        cost["recv_bytes_max"] = size_max["recv_bytes"][slot_key[sel]]
        per_rank_ops = [o[~np.isin(o, _REGION_OPS)] for o in
                        (template["op"][offs[r]:offs[r + 1]] for r in range(P))]
        names = tuple(dict.fromkeys(trace.regions[i] for i in
                                    template_aux[template["op"] == OP_CODE["Region_begin"]]))
        ops, pattern = _pattern(list(OPS), per_rank_ops, by_count=phase_kind[k] != "loop")
        stats = {"events": evm[k], "events_max": evmax.reshape(n_phase, P)[k],
                 "duration_mean": dm[k], "duration_std": dsd[k],
                 "comp_mean": compm[k], "comp_std": compsd[k], "cpu_mean": cpum[k],
                 "cpu_std": cpusd[k], "comm_mean": cmm[k], "comm_std": cmsd[k], "bytes_mean": bm[k],
                 "instr_mean": cm_counters["instr"][k] if "instr" in cm_counters else np.full(P, np.nan),
                 "cycles_mean": cm_counters["cycles"][k] if "cycles" in cm_counters else np.full(P, np.nan)}
        w = int(weights[k])
        phases.append(Phase(id=len(phases), kind=phase_kind[k], weight=w, ops=ops, pattern=pattern,
                            regions=names, te=float(te[k]),
                            share=float(te[k] * w / runtime) if runtime > 0 else 0.0,
                            stats=stats, template_offsets=offs, template=template, template_cost=cost,
                            section=int(seg_section[first_seg[k]])))
    problems = _region_problems(trace, local, S)
    pet = float(sum(p.te * p.weight for p in phases))
    # coverage: the share of each rank's time inside phases that repeat
    repeated = np.isin(seg_phase, [k for k in range(n_phase) if phase_kind[k] == "loop" and weights[k] >= 2])
    in_rep = np.bincount(seg_rank, weights=dur * np.tile(repeated, P), minlength=P)
    rank_time = np.bincount(seg_rank, weights=dur, minlength=P)
    # a rank that leaves the repeated phases early waits in its next call for the others
    # (a pipeline's drain): that wait is the loop's, up to the last rank's arrival
    for g in np.flatnonzero(repeated[:-1] & ~repeated[1:]):
        first = ro[:-1] + 1 + bounds[:, g + 1]
        has = bounds[:, g + 1] < bounds[:, g + 2]
        if has.any():
            arrive = t_start[first[has]]
            in_rep[has] += np.clip(np.minimum(ev["t_comm"][first[has]], arrive.max() - arrive), 0, None)
    slowest = int(np.argmax(rank_time)) if P else 0
    # the loop's window: from the first rank entering a repeated iteration to the last
    # rank leaving its last one (a pipeline's fill and drain belong to the loop)
    window = 0.0
    rep_cols = np.flatnonzero(repeated)
    if rep_cols.size:
        enter = np.full(P, np.inf)
        leave = np.full(P, np.inf)
        ev_seg = np.where(valid, local, S)
        t0 = np.maximum(t_start, 0.0)
        for when, mask in ((enter, valid & (ev_seg >= rep_cols[0]) & (ev_seg <= rep_cols[-1])),
                           (leave, ~valid | (ev_seg > rep_cols[-1]))):
            idx = np.flatnonzero(mask)  # a rank's first such event is its earliest (rank-major)
            r = ev["rank"][idx]
            first = np.concatenate([[True], r[1:] != r[:-1]]) if idx.size else np.zeros(0, bool)
            when[r[first]] = t0[idx[first]]
        window = float(np.max(leave) - np.min(enter))
    sequence = renumber[seg_phase[seg_loop >= 0]]
    for r, L, why in unaligned:  # one line per rank and phase: the rank is left as it cut itself
        ph = renumber[seg_phase[seg_loop == L]]
        ph = ph[ph >= 0]
        if ph.size:
            k = int(np.bincount(ph).argmax())
            notes.append(f"rank {r}: its iterations of phase {k} begin at another call of the step than "
                         f"those of the ranks like it; left as it cut them ({why})")
    for k, n_rot, n_calls, ops in rotated:
        which = (f"its {'/'.join(ops)} calls take their" if n_rot == n_calls else
                 f"{n_rot} of its {n_calls} calls ({'/'.join(ops)}) take their" if n_rot > 1 else
                 f"1 of its {n_calls} calls ({'/'.join(ops)}) takes its")
        how = ("each rank's figures are those of the member as far from each repetition's root as "
               "the rank is from the first member" if k in frame_phases else
               "each rank's times are its mean over the turns")
        notes.append(f"phase {renumber[k]}: {which} root in turn from each member of the communicator, "
                     f"one per call (a loop over items owned round-robin); the template names the first "
                     f"member, and {how}")
    return Signature(source=str(trace.path) if trace.path else None, app=trace.meta.get("app"),
                     nprocs=P, workload_label=trace.meta.get("workload_label"),
                     workload_value=trace.meta.get("workload_value"), work_mode=trace.work_mode,
                     runtime=runtime, pet=pet,
                     coverage=float(np.mean(in_rep / np.maximum(rank_time, 1e-300))) if runtime > 0 else 0.0,
                     coverage_slowest=float(in_rep[slowest] / rank_time[slowest]) if runtime > 0 else 0.0,
                     loop_span=min(1.0, window / runtime) if runtime > 0 else 0.0,
                     phases=tuple(phases), sequence=sequence.astype(np.int64),
                     region_problems=problems,
                     unmodelled=tuple(unmodelled_notes(trace.meta, runtime)), notes=tuple(notes))


#: Kinds of step that are one kind whose data-dependent calls differ between repetitions
#: (``_merge_variant_kinds``). Distances are between the multisets of (rank, call) of two
#: kinds' first repetitions, as a share of the larger one. Two kinds are one when they are
#: nearer than ``VARIANT_DISTANCE`` and
#:
#: * differ on ``LOCAL_VARIANT_SHARE`` of the ranks or fewer: what the program decides,
#:   every rank of a class does (a reduction, a rebuild); a message a rank or two make or
#:   skip is the data's (the last particle rank sends the PME rank its next step's flags
#:   before or after its own step ends); or
#: * both recur (``RARE_KIND`` times or more), one follows the other and they make the
#:   same collective calls (on some rank): the plain step before and after a
#:   repartition changed its halo (two kinds that recur side by side, a plain step and
#:   the step that reduces every 10, are the program's; so is a reduction, wherever
#:   it falls); or
#: * they make the same collective calls and their repetitions together fall on one
#:   period above one step (``_one_period``: GROMACS's neighbour search every 40 steps,
#:   which at P = 4 balances the load on some and sends one rank's halo as a Send and a
#:   Recv on others), unless the calls one makes beyond the other's are what a recurring
#:   kind off that period adds to the commonest step (a thermo output on a step that
#:   rebuilds: a step of both kinds, not a variant).
#:
#: Rare kinds (fewer than ``RARE_KIND`` repetitions each) that never occur twice in a row
#: and fall on a common period (the steps that rebuild every 40th) are one kind when they
#: are nearer than ``RARE_VARIANT_DISTANCE`` and nearer to each other than half their
#: distance to any kind that recurs: the atom exchange of each neighbour-search step
#: differs from the last one's wherever the atoms moved, but a step that rebuilds and
#: prints differs from one that only prints as much as the plain step does.
VARIANT_DISTANCE = 0.2
#: in a run cut into sections, a loop found on the ranks' streams is kept when its kinds
#: that recur (``RARE_KIND`` times or more) hold this share of its section's events
RECURRING_SHARE = 0.5
RARE_VARIANT_DISTANCE = 0.35
RARE_KIND = 3
LOCAL_VARIANT_SHARE = 0.25
_IS_COLLECTIVE = np.zeros(256, bool)
_IS_COLLECTIVE[_COLLECTIVE] = True
#: calls that make a communicator of every member of the one they are called on (a copy,
#: a topology over all of them) and calls that choose the new one's members (a split by
#: colour, a group's): a communicator of the second kind may hold every rank at one P
#: and not at another
_COMM_KEEPS = [OP_CODE[n] for n in ("Comm_dup", "Cart_create", "Graph_create", "Dist_graph_create")]
_COMM_CHOOSES = [OP_CODE[n] for n in ("Comm_split", "Comm_split_type", "Comm_create", "Comm_create_group",
                                      "Cart_sub")]


def _whole_comms(trace: Trace) -> np.ndarray:
    """Per communicator, whether it holds every rank at every P, as far as one trace can
    tell: MPI_COMM_WORLD, or a communicator of every rank made from a whole one by a
    call that keeps all its members (Comm_dup, Cart_create, ...). One made by a call that
    chooses its members (Comm_split, Comm_create, Cart_sub) is a sub-communicator even
    where it holds every rank: Quantum ESPRESSO's diagonalisation group (Comm_create of
    a square grid of ranks) is all 4 ranks at P = 4, 4 of 8 at P = 8, so its broadcasts
    are global collectives at P = 4 only, and the canonical cut
    (:func:`signature.iterations._past_collectives`) moved at P = 4 past them as well as
    past the FFTs' Alltoalls. A communicator of every rank whose making the trace does
    not show (an intercommunicator's, a generated trace's) counts as before, by size."""
    comms = trace.comms
    P = trace.nprocs
    whole = (comms.size == P) & ~comms.inter
    ev = trace.events
    op = ev["op"]
    made = np.flatnonzero(np.isin(op, _COMM_KEEPS + _COMM_CHOOSES) & (ev["aux"] >= 0)
                          & (ev["aux"] < len(comms)))
    if not made.size:
        return whole
    # each communicator's first making event, in trace order (rank, then seq: a parent is
    # made before its children on every rank that makes both)
    new, first = np.unique(ev["aux"][made], return_index=True)
    rows = made[np.sort(first)]
    keeps = np.isin(op[rows], _COMM_KEEPS)
    for x, parent, keep in zip(ev["aux"][rows].tolist(), ev["comm"][rows].tolist(), keeps.tolist()):
        if x > 0:  # (never world itself)
            whole[x] &= keep and 0 <= parent < len(comms) and bool(whole[parent])
    return whole
#: the most kinds compared pairwise per loop
VARIANT_KINDS_MAX = 128


#: ranks are alike when the cosine of their cycles' counts of calls (op, communicator,
#: tag) is at least this (particle ranks among themselves, PME ranks among themselves)
ROTATE_ALIKE = 0.5
#: a rotation (by up to ``ROTATE_MAX`` calls either way) applies where the calls it moves
#: a bound over are those of the rank's cycle; it must at this share of its bounds
ROTATE_MAX = 256
ROTATE_VALID_SHARE = 0.75
#: passes over the ranks (a rank's best rotation depends on the others')
ROTATE_PASSES = 4
#: a rank left beginning elsewhere than most ranks alike is noted when this share of its
#: paired calls in the loop lie in another iteration than their partner's
ROTATE_NOTE_SHARE = 0.1


def _tagged_links(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """``(send_event, recv_event)`` pairs of the point-to-point messages, matched as MPI
    matches them: the k-th send from a to b on a communicator with a tag to the k-th
    receive of b from a on it with that tag, where every such receive names its tag (not
    MPI_ANY_TAG, not a Sendrecv's receive, whose tag the trace does not hold); else
    regardless of tags (:func:`signature.align.message_links`). A flag message and a
    coordinate message sent to the same rank with two tags and received in another order
    than in the set-up are thus not paired across one another."""
    ev = trace.events
    op = ev["op"]
    rank = ev["rank"].astype(np.int64)
    P = trace.nprocs
    comm = ev["comm"].astype(np.int64) + 1
    C = int(comm.max()) + 1 if len(comm) else 1
    s_idx = np.flatnonzero(np.isin(op, SEND_OPS) & (ev["peer"] >= 0))
    is_recv = np.isin(op, RECV_OPS)
    r_src = np.where(is_recv, ev["peer"], np.where(np.isin(op, SENDRECV_OPS), ev["recv_peer"], -1))
    r_idx = np.flatnonzero(r_src >= 0)
    s_pair = (rank[s_idx] * P + ev["peer"][s_idx]) * C + comm[s_idx]
    r_pair = (r_src[r_idx].astype(np.int64) * P + rank[r_idx]) * C + comm[r_idx]
    r_tag = np.where(is_recv[r_idx], ev["tag"][r_idx], -1).astype(np.int64)
    # (source, destination, communicator) whose receives all name their tag
    untagged = np.unique(r_pair[r_tag < 0])
    s_tag = np.where(np.isin(s_pair, untagged), -1, ev["tag"][s_idx]).astype(np.int64)
    r_tag = np.where(np.isin(r_pair, untagged), -1, r_tag)
    # one int64 key per (source, destination, communicator, tag): tags are int32
    if P * P * C < (1 << 30):
        s_key, r_key = (s_pair << 32) + (s_tag + 1), (r_pair << 32) + (r_tag + 1)
    else:
        both = np.stack([np.concatenate([s_pair, r_pair]), np.concatenate([s_tag, r_tag])])
        _, key = np.unique(both, axis=1, return_inverse=True)
        key = np.asarray(key, np.int64).reshape(-1)
        s_key, r_key = key[:len(s_idx)], key[len(s_idx):]
    big = int(max(len(s_idx), len(r_idx))) + 1
    _, si, ri = np.intersect1d(s_key * big + _nth(s_key), r_key * big + _nth(r_key), assume_unique=True,
                               return_indices=True)
    return s_idx[si], r_idx[ri]


def _collective_calls(trace: Trace, cache: dict) -> tuple[np.ndarray, np.ndarray]:
    """:func:`signature.align._collective_keys` of the trace, from ``cache`` (align_ranks's,
    which holds them with the message links where it found those), found once otherwise."""
    if cache.get("links") is not None:
        return cache["links"][2:]
    if "collectives" not in cache:
        cache["collectives"] = _collective_keys(trace)
    return cache["collectives"]


def _pair_links(trace: Trace, coll_ev: np.ndarray, coll_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` event pairs that a lock-step loop runs in the same iteration: both ends of
    every point-to-point message (each way, matched with their tags), and each collective
    call with the same call of another member (the first member's; the first member's with
    the second's; ``coll_ev``, ``coll_key``: :func:`signature.align._collective_keys`)."""
    send_ev, recv_ev = _tagged_links(trace)
    order = np.argsort(coll_key, kind="stable")
    ce, ck = coll_ev[order], coll_key[order]
    new = np.concatenate([[True], ck[1:] != ck[:-1]]) if ck.size else np.zeros(0, bool)
    head = np.maximum.accumulate(np.where(new, np.arange(len(ck)), 0)) if ck.size else np.zeros(0, np.int64)
    second = np.minimum(np.arange(len(ck)) + 1, max(len(ck) - 1, 0))
    partner = np.where(new, second, head)
    ok = (ck[partner] == ck) & (partner != np.arange(len(ck))) if ck.size else np.zeros(0, bool)
    a = np.concatenate([send_ev, recv_ev, ce[ok]])
    b = np.concatenate([recv_ev, send_ev, ce[partner[ok]]])
    return a.astype(np.int64), b.astype(np.int64)


def _last_step_whole(bounds: np.ndarray, seg_loop: np.ndarray, struct: np.ndarray, exact: np.ndarray,
                     ro: np.ndarray) -> np.ndarray:
    """After the common cut: each rank's last iteration of a loop takes the calls that begin
    the part after the loop as long as they complete it (each adds a call of the rank's
    plain iteration, as a multiset, that the last iteration lacks). A rank that found its
    period starting part-way into the step ends its own loop before the last step's end
    (its rotated cycle's tail looked like the final part's); aligned with the others, its
    last step then lacked those calls, and the loop lost that step as a kind of its own."""
    from .iterations import STEP_SPLIT_SHARE, _running_shares
    out = bounds.copy()
    G = bounds.shape[1] - 1
    for L in np.unique(seg_loop[seg_loop >= 0]).tolist():
        cols = np.flatnonzero(seg_loop == L)
        g = int(cols[-1]) + 1
        if g >= G or seg_loop[g] != -1:
            continue
        for r in range(bounds.shape[0]):
            base = int(ro[r]) + 1
            lens = bounds[r, cols + 1] - bounds[r, cols]
            have = cols[lens > 0]
            if len(have) < 2 or bounds[r, g + 1] == bounds[r, g]:
                continue
            ex, n = np.unique(exact[r, have], return_counts=True)
            j = int(have[np.flatnonzero(exact[r, have] == ex[np.argmax(n)])[0]])
            vocab, counts = np.unique(struct[base + bounds[r, j]:base + bounds[r, j + 1]], return_counts=True)
            last = struct[base + bounds[r, g - 1]:base + bounds[r, g]]
            piece = struct[base + bounds[r, g]:base + bounds[r, g + 1]]
            if lens[-1] == 0:
                # a rank whose last iteration is empty (aligned with ranks that cut one step
                # more) takes the part after's first calls only where they are a whole step,
                # with runs of one call collapsed (counts that depend on the data): its last
                # step, put in the final part as it lacks the next step's flags; a rank
                # without that step keeps its empty iteration
                cyc = _runs_collapsed(struct[base + bounds[r, j]:base + bounds[r, j + 1]])[0]
                runs, at = _runs_collapsed(piece)
                vocab, counts = np.unique(cyc, return_counts=True)
                held = _running_shares(runs[:2 * len(cyc)], vocab, counts)
                c = int(np.argmax(held))
                if held[c] >= STEP_SPLIT_SHARE * len(cyc):
                    out[r, g] += int(at[c]) if c < len(at) else len(piece)
                continue
            held = _running_shares(np.concatenate([last, piece]), vocab, counts)[len(last):]
            c = int(np.argmax(held))  # (the fewest calls that reach the most)
            if held[c] > held[0]:
                out[r, g] += c
    return out


def _collectives_whole(bounds: np.ndarray, seg_loop: np.ndarray, ro: np.ndarray, rank: np.ndarray,
                       coll_ev: np.ndarray, coll_key: np.ndarray) -> np.ndarray:
    """After the common cut: every call of one collective instance in the same iteration.

    A rank whose bound the cut placed one call off (a variant step that begins otherwise on
    that rank: the GROMACS particle rank whose halo changed at the last repartition begins
    its energy steps' next iteration with their energy reduction) holds an instance in the
    iteration after (or before) the one where more than half of its members hold it. Where
    the call is that rank's first call of its iteration (last), the bound moves over it, so
    that it joins the others, unless that empties the iteration; repeated while calls move
    (a run of collective calls moves one by one). Moving one collective call changes no
    message's iteration and puts one instance whole: the cut can only cross less. A pass
    after the first looks again only at the instances whose calls moved and at the calls
    now beside a bound that moved: nothing else can move (code_saturne's 966,000
    collective calls over 336,000 iterations still moved at the last of the
    ``ROTATE_MAX`` passes, each over all of them: 18.5 s; now 0.2 s, the same bounds).
    ``coll_ev``, ``coll_key``: :func:`signature.align._collective_keys`; ``rank``: the
    events' rank column; positions as in ``bounds`` (each rank's stream without Init)."""
    out = bounds.copy()
    P, G = bounds.shape[0], bounds.shape[1] - 1
    if not len(coll_ev) or G < 2:
        return out
    r = rank[coll_ev].astype(np.int64)
    pos = coll_ev - (ro[:-1][r] + 1)
    order = np.argsort(coll_key, kind="stable")
    key, r, pos = coll_key[order], r[order], pos[order]
    starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    size = np.diff(np.append(starts, len(key)))  # each instance's calls
    inst = np.repeat(np.arange(len(starts)), size)
    # each call's iteration: the last bound at or before it (rank blocks side by side)
    span = int(out.max()) + 1
    flat = (out + np.arange(P, dtype=np.int64)[:, None] * span).reshape(-1)
    col = np.searchsorted(flat, pos + r * span, side="right") - 1 - r * (G + 1)
    by_at = at_sorted = None  # the calls by (rank, position), once a bound moved
    best = np.full(len(starts), -1, np.int64)  # per instance, the column most members hold it in
    most = np.zeros(len(starts), np.int64)

    def commonest(sel: np.ndarray) -> None:
        """``best``, ``most`` of the instances whose calls are ``sel`` (all of each's), from
        the calls' columns now."""
        code = inst[sel] * (G + 1) + np.clip(col[sel], 0, G)
        u, n = np.unique(code, return_counts=True)
        ui = u // (G + 1)
        for_max = np.lexsort((n, ui))  # per instance, its commonest column last
        last = np.concatenate([ui[for_max][1:] != ui[for_max][:-1], [True]])
        best[ui[for_max][last]] = (u % (G + 1))[for_max][last]
        most[ui[for_max][last]] = n[for_max][last]

    todo = np.arange(len(key))  # the calls that may move in this pass
    commonest(todo)
    for _ in range(ROTATE_MAX):
        c = col[todo]
        inside = (c >= 0) & (c < G)
        loop = np.where(inside, seg_loop[np.clip(c, 0, G - 1)], -1)
        major = np.where(2 * most > size, best, -1)[inst[todo]]
        ok = inside & (loop >= 0) & (major >= 0) & (major < G)
        ok &= np.where(ok, seg_loop[np.clip(major, 0, G - 1)] == loop, False)
        rr, pp = r[todo], pos[todo]
        after = ok & (c == major + 1) & (pp == out[rr, np.clip(c, 0, G)])
        before = ok & (c == major - 1) & (pp == out[rr, np.clip(c + 1, 0, G)] - 1)
        moved: list[int] = []
        beside: list[int] = []
        for i in todo[after | before].tolist():
            ri, ci = int(r[i]), int(col[i])
            step = 1 if ci == (best[inst[i]] + 1) else -1
            b = ci if step == 1 else ci + 1
            if out[ri, b] != (pos[i] if step == 1 else pos[i] + 1):
                continue  # this bound moved already in this pass
            if out[ri, b - 1] < out[ri, b] + step < out[ri, b + 1]:
                out[ri, b] += step
                col[i] -= step
                moved.append(i)
                beside += [ri * span + int(out[ri, b]), ri * span + int(out[ri, b]) - 1]
        if not moved:
            break
        # the next pass: the calls of the instances whose members moved, and the calls now
        # beside the bounds that moved (the next call of a run of collective calls)
        dirty = np.unique(inst[moved])
        members = ranges(starts[dirty], size[dirty])
        commonest(members)
        if by_at is None:
            at_key = r * span + pos
            by_at = np.argsort(at_key, kind="stable")
            at_sorted = at_key[by_at]
        near = np.searchsorted(at_sorted, beside)
        near = by_at[near[(near < len(at_sorted)) & (at_sorted[np.minimum(near, len(at_sorted) - 1)] == beside)]]
        todo = np.unique(np.concatenate([members, near]))
    return out


def _first_step_whole(bounds: np.ndarray, seg_loop: np.ndarray, struct: np.ndarray, ro: np.ndarray
                      ) -> tuple[np.ndarray, list[int]]:
    """After the common cut: a loop whose every rank begins its iterations part-way into
    the step is rotated back to the step's first call, and gains the step it had split
    between the parts around it.

    A short run whose first steps repeat the same data-dependent counts lets a rank find
    its period beginning wherever those counts do (at the counts' Send, 10 calls into the
    step); aligned with it, every rank is cut there (or, where the common cut could not
    bring them to one call, near there), the first step's head joins the set-up and the
    last step's tail the final part. So the loop is rotated back to an earlier call t of
    the cycle, one for all ranks, when, on every rank, with runs of one call collapsed (a
    count that depends on the data; a cut inside such a run is taken at its start):

    * the part before the loop holds a t, and the calls from its last t up to the loop's
      first start are the rank's cycle's calls from a place of t in it on (its commonest
      iteration shape; then its first calls, where that start lies later in the step), or
      more than half of their beginning (``GAP_ITERATION_SHARE``: a start the common cut
      left inside the step's data-dependent calls); t is taken among the calls of every
      rank's cycle that every rank's part before ends with, the earliest in the first
      rank's cycle that passes;
    * at ``ROTATE_VALID_SHARE`` of the iteration starts, the calls since the last t before
      it (and after the start before) agree with them the same way (the start moves back
      to that t; elsewhere it stays: a variant step that begins otherwise);
    * after the last iteration's start, a t whose calls agree the same way begins the
      last step, and the calls from there hold nearly all of the cycle's calls
      (``STEP_SPLIT_SHARE``, as multisets): an iteration of its own, ending where it holds
      the most (CG's loop, whose residual Allreduce before it is its cycle's last call,
      has no such step after it: it stays as it was).

    ``bounds``: (P, G+1) positions in each rank's stream without Init; returns the new
    bounds (G+1+k columns) and the k old column indices before which an iteration was
    inserted (each a loop's old end: ``np.insert`` positions for the per-segment arrays)."""
    from .iterations import GAP_ITERATION_SHARE, STEP_SPLIT_SHARE, _running_shares
    P, G = bounds.shape[0], bounds.shape[1] - 1
    base = (ro[:-1] + 1).astype(np.int64)
    rows = [bounds[r] for r in range(P)]
    inserted: list[int] = []
    streams = [struct[base[r]:int(ro[r + 1]) - 1] for r in range(P)]
    heads = [_runs_collapsed(s)[1] for s in streams]  # per rank, where a run of one call begins

    def collapsed(r: int, a: int, b: int) -> np.ndarray:
        """Rank r's calls a:b with runs of one call collapsed."""
        hd = heads[r]
        return streams[r][hd[np.searchsorted(hd, a):np.searchsorted(hd, b)]]

    def agree(c: np.ndarray, head: np.ndarray, X: np.ndarray) -> bool:
        """Whether calls ``c`` are the beginning of ``head`` and then of the cycle X."""
        want = np.concatenate([head, X])[:len(c)]
        return len(c) <= len(want) and bool(np.array_equal(c, want))

    for L in np.unique(seg_loop[seg_loop >= 0]).tolist()[::-1]:  # (the last first: columns shift)
        cols = np.flatnonzero(seg_loop == L)
        c0, c1 = int(cols[0]), int(cols[-1]) + 1
        if (len(cols) < 2 or not np.all(np.diff(cols) == 1) or c0 == 0 or c1 >= G
                or seg_loop[c0 - 1] >= 0 or seg_loop[c1] >= 0):
            continue
        snapped, cyc, tails = [], [], []
        for r in range(P):
            B = rows[r]  # (a later loop, done first, may have moved the end of the part after)
            hd = heads[r]
            # iteration starts inside a run of one call: at the run's start
            S = hd[np.maximum(np.searchsorted(hd, B[c0:c1], side="right") - 1, 0)]
            S = np.maximum(S, np.concatenate([[B[c0 - 1]], B[c0:c1 - 1]]))
            ends = np.concatenate([S[1:], [B[c1]]])
            if len(S) < 2 or np.any(ends <= S) or S[0] <= B[c0 - 1]:
                break
            shape, _ = segment_keys(streams[r], np.concatenate([S, [B[c1]]]))
            vals, n = np.unique(shape[:-1], return_counts=True)  # (the last one holds the run's end)
            j = int(np.flatnonzero(shape == vals[np.argmax(n)])[0])
            X = collapsed(r, int(S[j]), int(ends[j]))
            if len(X) < 2:
                break
            snapped.append(S)
            cyc.append(X)
            # the calls the part before ends with (as many as the cycle has)
            tails.append({int(t) for t in collapsed(r, int(B[c0 - 1]), int(S[0]))[-len(X):].tolist()})
        if len(cyc) < P:
            continue
        # the calls the rotated iterations may begin with: calls of every rank's cycle (not
        # its first) among the last calls of every rank's part before; the earliest in the
        # first rank's cycle first
        firsts = set.intersection(*tails, *({int(t) for t in X[1:].tolist()} for X in cyc))
        for t in dict.fromkeys(t for t in cyc[0][1:].tolist() if t in firsts):
            heads_t, qs = [], []
            for r, (X, S) in enumerate(zip(cyc, snapped)):
                # the last t before each iteration start; the place i of t in the cycle whose
                # calls from there on (``X[i:]``, then the cycle's first ones where the rank's
                # first start lies later in its step) are those from the part before's last t
                at = np.flatnonzero(streams[r] == t)
                q = at[np.maximum(np.searchsorted(at, S, side="left") - 1, 0)] if at.size else S
                if not (at.size and rows[r][c0 - 1] <= q[0] < S[0]):
                    break
                first = collapsed(r, int(q[0]), int(S[0]))
                whole = [i for i in (np.flatnonzero(X[1:] == t) + 1).tolist()
                         if len(first) > GAP_ITERATION_SHARE * (len(X) - i) and agree(first, X[i:], X)]
                if not whole:
                    break
                heads_t.append((whole[0], at))
                qs.append(q)
            if len(qs) < P:
                continue
            new = []
            for r, (X, S, q, (i, at)) in enumerate(zip(cyc, snapped, qs, heads_t)):
                B, s = rows[r], streams[r]
                lo = np.concatenate([[B[c0 - 1]], S[:-1]])
                ok = (q < S) & (q >= lo)
                # (the calls since then are those, or more than half of their beginning: a start
                # the common cut left elsewhere in the step's data-dependent calls, a count that
                # its rotation skipped, moves back to the step's first call all the same)
                pieces = [collapsed(r, int(x), int(y)) for x, y in zip(q[ok], S[ok])]
                ok[ok] = [len(c) > GAP_ITERATION_SHARE * (len(X) - i) and agree(c, X[i:], X) for c in pieces]
                if ok.mean() < ROTATE_VALID_SHARE:
                    break
                # the last step: from the first t after the last iteration's start whose calls
                # begin with the cycle's from t on (as the part before's do) to where it holds
                # the most of the cycle's calls, nearly all of them (with runs collapsed)
                z1 = int(B[c1 + 1])
                h = z1
                for x in at[(at > S[-1]) & (at < z1)][:8].tolist():  # (the t of a step or two)
                    run = heads[r][np.searchsorted(heads[r], x):][:len(X) - i]
                    c = streams[r][run[run < z1]]
                    if len(c) > GAP_ITERATION_SHARE * (len(X) - i) and agree(c, X[i:], X):
                        h = x
                        break
                hd = heads[r][np.searchsorted(heads[r], h):np.searchsorted(heads[r], z1)]
                vocab, counts = np.unique(X, return_counts=True)
                held = _running_shares(s[hd[:2 * len(X)]], vocab, counts)
                e = int(np.argmax(held))  # (the fewest runs that reach the most)
                if h >= z1 or held[e] < STEP_SPLIT_SHARE * len(X) or e <= len(X) - i:
                    break
                end = int(hd[e]) if e < len(hd) else z1
                row = np.concatenate([B[:c0], np.where(ok, q, B[c0:c1]), [h, end], B[c1 + 1:]]).astype(np.int64)
                if np.any(np.diff(row) < 0):
                    break
                new.append(row)
            if len(new) == P:
                rows = new
                inserted.append(c1)
                break
    return (np.array(rows, np.int64) if inserted else bounds), sorted(inserted)


def _common_cut(trace: Trace, bounds: np.ndarray, seg_loop: np.ndarray, struct: np.ndarray,
                exact: np.ndarray, cache: dict) -> tuple[np.ndarray, list[tuple[int, int, str]]]:
    """Every rank's iterations of a loop cut at one common call of its cycle.

    Each rank finds its loop's period on its own stream (:mod:`signature.iterations`),
    starting wherever its first plain iteration happens to start: ranks that run the same
    cycle in lock step may cut it at different calls (a GROMACS particle rank whose step
    begins with its halo exchange where the others' begin with the send to their PME
    rank), and a phase then holds rotations of one sequence on different ranks.

    A rank's iterations of loop L may be rotated, all by the same number k of calls
    (-p < k < p, p the calls of its commonest iteration, its *cycle*): a bound moves back
    over the cycle's last -k calls, or forward over its first k, where the calls there are
    those (elsewhere it stays: a variant step that ends otherwise); a rotation that applies
    at fewer than ``ROTATE_VALID_SHARE`` of the rank's bounds is none. Ranks *alike* are
    those whose cycles make mostly the same calls (cosine of their counts of (op,
    communicator, tag) at least ``ROTATE_ALIKE``: particle ranks, PME ranks). A call
    *crosses* when it lies in another iteration than its partner call (the other end of
    its message, MPI's matching with tags; the same collective call on another member).
    Nothing changes in a loop where ranks alike begin their iterations with the same call
    (op, communicator and peer relative to the rank). Else:

    1. each rank, those whose calls cross most first, takes the rotation that begins its
       iteration with the call that begins the iterations of the most ranks alike
       (weighted by how alike; told by op and communicator, then peer relative to the
       rank, then tag), if that call begins more of them than its own, and if its calls
       then cross no more with the ranks that begin with that call; of such rotations the
       one whose calls cross least with them, then the smallest. Where every such
       rotation would cross more, the ranks alike that begin as it does move together,
       if their calls then cross no more in all (a few passes, as the others move too);
    2. among the rotations that begin with the same call (op and communicator), each
       rank takes the one whose calls cross least, the others' cuts as they now are (a
       few passes);
    3. where a rotated rank's bound did not move (a variant step that begins otherwise: a
       neighbour-search step opens with a broadcast; a first step entered part-way), the
       bound goes where its calls cross least, between the bounds beside it;
    4. a rotated rank whose first or last iteration is now shorter than its cycle and
       than it was (no calls of the cycle to take at the loop's ends) is put back; so is
       one whose calls cross more than with its own cut, the worst first (a ring whose
       first rank sends before it receives keeps its order: that rank is a class of its
       own).

    ``bounds``: (P, G+1) positions in each rank's stream without Init; ``seg_loop[g]`` the
    loop of global segment g, ``exact[r, g]`` its exact structure on rank r (the rank's
    cycle is the commonest); ``cache``: :func:`signature.align.align_ranks`'s (the
    collective calls' keys, if it found them). Returns the new bounds and ``(rank, loop,
    reason)`` for each rank whose iterations still begin with another call (op and
    communicator) than those of most ranks alike while more than ``ROTATE_NOTE_SHARE`` of
    its paired calls cross."""
    ev = trace.events
    P = trace.nprocs
    ro = trace.rank_offsets
    n_ev = len(ev["op"])
    if not n_ev or P < 2:
        return bounds, []
    canon = _canonical_comms(trace)
    H = ipw = None  # prefix hashes of the structure tokens: found when a loop needs them
    base = (ro[:-1] + 1).astype(np.int64)
    a_ev = b_ev = per = None  # the paired calls, rank by rank: found when a loop needs them
    out = bounds.copy()
    failed: list[tuple[int, int, str]] = []
    for L in np.unique(seg_loop[seg_loop >= 0]).tolist():
        cols = np.flatnonzero(seg_loop == L)
        if len(cols) < 3 or not np.all(np.diff(cols) == 1):
            continue
        c0, c1 = int(cols[0]), int(cols[-1]) + 1
        N = c1 - c0
        B = out[:, c0:c1 + 1].copy()
        lo = out[:, c0 - 1] if c0 > 0 else out[:, 0]  # how far the first bound may move back
        hi = out[:, c1 + 1] if c1 + 1 < out.shape[1] else out[:, c1]
        # each rank's cycle: its commonest iteration (by exact structure), and its calls'
        # keys: (op, communicator), the same and the tag (what makes ranks alike), the same
        # and the peer relative to the rank
        cyc: list[tuple[int, int]] = []
        for r in range(P):
            _, inv, cnt = np.unique(exact[r, c0:c1], return_inverse=True, return_counts=True)
            j = int(np.flatnonzero(np.asarray(inv).reshape(-1) == np.argmax(cnt))[0])
            cyc.append((int(base[r] + B[r, j]), int(B[r, j + 1] - B[r, j])))
        lens = np.array([p for _, p in cyc])
        idx = np.repeat(np.array([a for a, _ in cyc]) - np.concatenate([[0], np.cumsum(lens)[:-1]]),
                        lens) + np.arange(int(lens.sum()))
        with np.errstate(over="ignore"):
            k_all = mix(mix(np.zeros(len(idx), np.uint64), ev["op"][idx]), canon[idx])
            t_all = mix(k_all, ev["tag"][idx])
            peer = posted_peers(trace)[0][idx].astype(np.int64)
            f_all = mix(k_all, np.where(peer >= 0, (peer - ev["rank"][idx]) % P, peer))
            ft_all = mix(f_all, ev["tag"][idx])
        at = np.concatenate([[0], np.cumsum(lens)])
        key = [k_all[at[r]:at[r + 1]] for r in range(P)]
        fine = [f_all[at[r]:at[r + 1]] for r in range(P)]
        finest = [ft_all[at[r]:at[r + 1]] for r in range(P)]
        vocab, inv = np.unique(t_all, return_inverse=True)
        counts = np.zeros((P, len(vocab)))
        np.add.at(counts, (np.repeat(np.arange(P), lens), np.asarray(inv).reshape(-1)), 1.0)
        unit = counts / np.maximum(np.linalg.norm(counts, axis=1, keepdims=True), 1e-300)
        alike = unit @ unit.T
        np.fill_diagonal(alike, 0.0)
        alike[alike < ROTATE_ALIKE] = 0.0
        start = np.array([key[r][0] if lens[r] else 0 for r in range(P)], np.uint64)
        start_f = np.array([fine[r][0] if lens[r] else 0 for r in range(P)], np.uint64)
        start_t = np.array([finest[r][0] if lens[r] else 0 for r in range(P)], np.uint64)
        if not np.any((alike > 0) & (start_f[:, None] != start_f[None, :])):
            continue  # ranks alike begin alike
        if H is None:
            H, ipw = prefix_hash(struct)
        if a_ev is None:
            a_ev, b_ev = _pair_links(trace, *_collective_calls(trace, cache))
            order = np.argsort(ev["rank"][a_ev], kind="stable")
            a_ev, b_ev = a_ev[order], b_ev[order]
            per = np.searchsorted(ev["rank"][a_ev], np.arange(P + 1))
        new = B.copy()
        it = np.full(n_ev, -1, np.int64)  # each event's iteration (-1 before the loop, N after)

        def mark(r: int, Br: np.ndarray) -> None:
            n = int(ro[r + 1]) - int(base[r]) - 1
            it[base[r]:base[r] + n] = np.searchsorted(Br, np.arange(n), side="right") - 1

        def crossings(r: int, Br: np.ndarray, only: np.ndarray | None = None) -> int:
            """Rank r's paired calls that cross with its bounds ``Br`` (``only``: those
            with these ranks)."""
            x, y = a_ev[per[r]:per[r + 1]], b_ev[per[r]:per[r + 1]]
            if only is not None:
                keep = only[ev["rank"][y]]
                x, y = x[keep], y[keep]
            it_x = np.searchsorted(Br, x - base[r], side="right") - 1
            it_y = it[y]
            inside = ((it_x >= 0) & (it_x < N)) | ((it_y >= 0) & (it_y < N))
            return int(np.sum(inside & (it_x != it_y)))

        for r in range(P):
            mark(r, B[r])
        was = np.array([crossings(r, B[r]) for r in range(P)])
        shift = np.zeros(P, np.int64)
        tried: dict[tuple[int, int], np.ndarray | None] = {}

        def rotated(r: int, k: int) -> np.ndarray | None:
            if k == 0:
                return B[r]
            if (r, k) not in tried:
                tried[(r, k)] = _rotation(B[r], k, int(lo[r]), int(hi[r]), int(base[r]), *cyc[r], H, ipw)
            return tried[(r, k)]

        def set_shift(r: int, k: int) -> None:
            j = k % cyc[r][1]
            shift[r] = k
            start[r], start_f[r], start_t[r] = key[r][j], fine[r][j], finest[r][j]
            new[r] = rotated(r, k)
            mark(r, new[r])

        def move_together(r: int, i: int) -> bool:
            """Rank r and the ranks alike that begin with its call rotated to begin with
            the call at position i of its cycle (each by its smallest rotation), if their
            calls then cross no more in all."""
            target = (key[r][i], fine[r][i], finest[r][i])
            group = [q for q in range(P) if (q == r or alike[r, q] > 0) and start_t[q] == start_t[r]
                     and start_f[q] == start_f[r] and start[q] == start[r]]
            moves = {}
            for q in group:
                p = cyc[q][1]
                at = np.flatnonzero((key[q] == target[0]) & (fine[q] == target[1]) & (finest[q] == target[2]))
                ks = sorted({int(k) for j in at.tolist() for k in (j, j - p)
                             if 0 < abs(k) < p and abs(k) <= ROTATE_MAX and rotated(q, k) is not None}, key=abs)
                if not ks:
                    return False
                moves[q] = ks[0]
            before = sum(crossings(q, new[q]) for q in range(P))
            old = {q: int(shift[q]) for q in moves}
            for q, k in moves.items():
                set_shift(q, k)
            if sum(crossings(q, new[q]) for q in range(P)) <= before:
                return True
            for q, k in old.items():
                set_shift(q, k)
            return False

        # 1. the call most ranks alike begin with: the op and communicator first, then the
        # peer relative to the rank (a Sendrecv to the right, not to the left), then the tag
        # (the flags before the coordinates)
        def support(r: int, pos: np.ndarray) -> np.ndarray:
            """(len(pos), 3): how alike the ranks are that begin with the call at each
            position of rank r's cycle, by (op, communicator), with its peer, and its tag."""
            s1 = alike[r] @ (start[:, None] == key[r][pos][None, :])
            s2 = alike[r] @ (start_f[:, None] == fine[r][pos][None, :])
            s3 = alike[r] @ (start_t[:, None] == finest[r][pos][None, :])
            return np.round(np.stack([s1, s2, s3], axis=1), 9)

        for _ in range(ROTATE_PASSES):
            changed = False
            # (the ranks whose calls cross most first: a rank cut where its partners are
            # is no rank to move)
            now = np.array([crossings(r, new[r]) for r in range(P)])
            own_support = [support(r, np.array([shift[r] % cyc[r][1]]))[0, 0] if cyc[r][1] else np.inf
                           for r in range(P)]
            for r in np.lexsort((own_support, -now)).tolist():
                a, p = cyc[r]
                if p < 2:
                    continue
                s = support(r, np.arange(p))
                own = s[int(shift[r]) % p]
                better = np.array([tuple(x) > tuple(own) for x in s.tolist()])
                # the best-supported call that a rotation can begin with without more of the
                # rank's calls crossing with the ranks that begin with it; of its rotations
                # (back or forward, at each place it occurs), the one whose calls cross least
                # with them, then the smallest (step 4 puts back a rank whose calls then
                # cross more in all than they did)
                best, level, blocked = None, None, None
                for i in sorted(np.flatnonzero(better).tolist(), key=lambda i: tuple(-s[i])):
                    if level is not None and tuple(s[i]) != level:
                        break
                    # (the ranks that begin with it, as finely as they support it)
                    agree = start == key[r][i]
                    if s[i, 1] > 0:
                        agree &= start_f == fine[r][i]
                        if s[i, 2] > 0:
                            agree &= start_t == finest[r][i]
                    cur = crossings(r, new[r], agree)
                    for k in (i, i - p):
                        if abs(k) < p and 0 < abs(k) <= ROTATE_MAX and rotated(r, k) is not None:
                            c = (crossings(r, rotated(r, k), agree), abs(k), k)
                            if c[0] > cur:
                                blocked = blocked if blocked is not None else i
                                continue
                            level = tuple(s[i])
                            best = c if best is None or c < best else best
                if best is None and blocked is not None:
                    # ... the rank's calls cross more alone: the ranks that begin with its call
                    # (alike to it) move together, where their calls cross no more in all
                    changed |= move_together(r, blocked)
                elif best is not None and best[2] != shift[r]:
                    set_shift(r, best[2])
                    changed = True
            if not changed:
                break
        # 2. among the rotations that begin with that call, the one whose calls cross least
        for _ in range(ROTATE_PASSES):
            changed = False
            for r in range(P):
                a, p = cyc[r]
                at = np.flatnonzero(key[r] == start[r])
                best = (crossings(r, new[r]), abs(int(shift[r])), int(shift[r]))
                for k in sorted(set(at.tolist()) | set((at - p).tolist())):
                    Bk = rotated(r, k) if k != shift[r] and abs(k) < p and abs(k) <= ROTATE_MAX else None
                    if Bk is not None and (crossings(r, Bk), abs(k), k) < best:
                        best = (crossings(r, Bk), abs(k), k)
                if best[2] != shift[r]:
                    shift[r] = best[2]
                    new[r] = rotated(r, best[2])
                    mark(r, new[r])
                    changed = True
            if not changed:
                break
        # 3. a rotated rank's bounds that did not move (a variant step, a first step entered
        # part-way) go where its calls cross least
        for r in np.flatnonzero(shift).tolist():
            Br = _settle_bounds(new[r], B[r], int(lo[r]), int(hi[r]), a_ev[per[r]:per[r + 1]] - base[r],
                                it[b_ev[per[r]:per[r + 1]]])
            if crossings(r, Br) < crossings(r, new[r]):
                new[r] = Br
                mark(r, Br)
        # 4. a rotated rank whose first or last iteration is now shorter than its cycle and
        # than it was (the rotation found no calls of the cycle to take at the loop's ends:
        # the repetition would be cut short) is put back; so is one whose calls still cross
        # more than with its own cut (the worst first)
        for r in np.flatnonzero(shift).tolist():
            p = cyc[r][1]
            d_new, d_old = np.diff(new[r]), np.diff(B[r])
            if d_new.size and (d_new[0] < min(p, d_old[0]) or d_new[-1] < min(p, d_old[-1])):
                new[r], shift[r], start[r], start_f[r], start_t[r] = B[r], 0, key[r][0], fine[r][0], finest[r][0]
                mark(r, B[r])
        while True:
            worse = {r: crossings(r, new[r]) - was[r] for r in np.flatnonzero(shift).tolist()}
            worse = {r: d for r, d in worse.items() if d > 0}
            if not worse:
                break
            r = max(worse, key=worse.get)
            new[r], shift[r], start[r], start_f[r], start_t[r] = B[r], 0, key[r][0], fine[r][0], finest[r][0]
            mark(r, B[r])
        out[:, c0:c1 + 1] = new
        # the ranks still not cut where most ranks alike are (by op and communicator) and
        # whose calls cross: not in step with their partners (a rank whose calls do not
        # cross, as a ring's first rank or a pipeline's head, is a class of its own)
        keys, inv = np.unique(start, return_inverse=True)
        inv = np.asarray(inv).reshape(-1)
        for r in range(P):
            votes = np.bincount(inv, weights=alike[r], minlength=len(keys))
            if not alike[r].any() or votes.max() <= votes[inv[r]] + 1e-9:
                continue
            x, y = a_ev[per[r]:per[r + 1]], b_ev[per[r]:per[r + 1]]
            inside = ((it[x] >= 0) & (it[x] < N)) | ((it[y] >= 0) & (it[y] < N))
            if crossings(r, new[r]) > ROTATE_NOTE_SHARE * max(int(inside.sum()), 1):
                blocked = any(v is not None for (q, _), v in tried.items() if q == r)
                failed.append((r, L, "a rotation that begins with their call would put more of its messages "
                                     "in another iteration than their partner call" if blocked else
                                     "its calls differ from its step's where theirs begin"))
    return out, failed


def _settle_bounds(Br: np.ndarray, B0: np.ndarray, lo: int, hi: int, pos: np.ndarray, g: np.ndarray) -> np.ndarray:
    """A rotated rank's bounds ``Br`` where they are still its own cut's (``B0``): each
    moved, between the bounds beside it, to where the fewest of its paired calls (at
    ``pos``, their partner calls in iterations ``g``) lie in another iteration than their
    partner's."""
    order = np.argsort(pos, kind="stable")
    pos, g = pos[order], g[order]
    Br = Br.copy()
    for j in np.flatnonzero(Br == B0).tolist():
        left = Br[j - 1] if j > 0 else lo
        right = Br[j + 1] if j < len(Br) - 1 else hi
        w = slice(np.searchsorted(pos, left, side="right"), np.searchsorted(pos, right, side="left"))
        pw, gw = pos[w], g[w]
        if not pw.size:
            continue
        # a cut just before the i-th paired call: calls before it in iteration j-1, the rest in j
        cost = (np.concatenate([[0], np.cumsum(gw != j - 1)])
                + np.concatenate([np.cumsum((gw != j)[::-1])[::-1], [0]]))
        here = int(np.searchsorted(pw, Br[j], side="left"))
        i = int(np.argmin(cost))
        if cost[i] < cost[here]:
            Br[j] = pw[i] if i < len(pw) else pw[-1] + 1
    return Br if np.all(np.diff(Br) >= 0) else B0


def _rotation(B: np.ndarray, k: int, lo: int, hi: int, base: int, a: int, p: int, H: np.ndarray,
              ipw: np.ndarray) -> np.ndarray | None:
    """A rank's loop bounds ``B`` (positions in its stream) rotated by k calls of its cycle
    (the p calls from event ``a``), or None where the rotation applies at fewer than
    ``ROTATE_VALID_SHARE`` of them."""
    cut = np.array([a + p + k if k < 0 else a, a + p if k < 0 else a + k])
    want = segment_hash(H, ipw, cut[:1], cut[1:])[0]
    moved = B + k
    if k < 0:  # back over the cycle's last -k calls
        ok = moved >= np.concatenate([[lo], B[:-1]])
        ok &= segment_hash(H, ipw, base + np.maximum(moved, 0), base + B) == want
    else:  # forward over its first k calls
        ok = moved <= np.concatenate([B[1:], [hi]])
        ok &= segment_hash(H, ipw, base + B, base + np.minimum(moved, hi)) == want
    Bk = np.where(ok, moved, B)
    if float(ok.mean()) < ROTATE_VALID_SHARE or np.any(np.diff(Bk) < 0):
        return None
    return Bk


def _hold_requests(trace: Trace, bounds: np.ndarray, seg_loop: np.ndarray) -> np.ndarray:
    """Per rank, each loop iteration starts early enough to hold the requests it
    completes: a nonblocking call (Isend, Irecv) posted at the end of one segment and
    completed in the loop iteration after it belongs to that iteration, which starts at
    the call (the last particle rank sends the PME rank the next step's flags as its own
    step ends; a receive posted for the next step). ``bounds``: (P, G+1) positions in
    each rank's stream without Init."""
    ev = trace.events
    c = trace.completions
    if not len(c["rank"]):
        return bounds
    P = trace.nprocs
    ro = trace.rank_offsets
    posted = np.flatnonzero(ev["req"] >= 0)
    big = np.int64(1) << 40
    key_p = ev["rank"][posted].astype(np.int64) * big + ev["req"][posted]
    key_c = c["rank"].astype(np.int64) * big + c["req"]
    order = np.argsort(key_c, kind="stable")
    at = np.searchsorted(key_c[order], key_p)
    ok = at < len(order)
    ok[ok] = key_c[order[at[ok]]] == key_p[ok]
    posted, done = posted[ok], order[at[ok]]
    # the completing call's event: its rank's (seq) position
    rank = c["rank"][done].astype(np.int64)
    first_seq = ev["seq"][ro[:-1]].astype(np.int64) if len(ev["seq"]) else np.zeros(P, np.int64)
    if np.all(ev["seq"][ro[1:] - 1] - first_seq == np.diff(ro) - 1):  # seq counts each rank's events
        finish = ro[:-1][rank] + (c["seq"][done] - first_seq[rank])
    else:
        ev_key = ev["rank"].astype(np.int64) * big + ev["seq"]
        finish = np.searchsorted(ev_key, rank * big + c["seq"][done])
    out = bounds.copy()
    starts_loop = np.concatenate([seg_loop >= 0, [False]])  # bound g opens a loop iteration
    r_of = ev["rank"][posted]
    for r in np.unique(r_of).tolist():
        mine = r_of == r
        base = int(ro[r]) + 1
        s_pos, c_pos = posted[mine] - base, finish[mine] - base
        b = bounds[r]
        k = np.searchsorted(b, s_pos, side="right") - 1  # segment the request is posted in
        inside = (k >= 0) & (k + 2 < len(b)) & (s_pos > b[np.clip(k, 0, len(b) - 1)])
        k, s_pos, c_pos = k[inside], s_pos[inside], c_pos[inside]
        crosses = (c_pos >= b[k + 1]) & (c_pos < b[k + 2]) & starts_loop[k + 1]
        np.minimum.at(out[r], k[crosses] + 1, s_pos[crosses])
    return out


def _merge_variant_kinds(kind: np.ndarray, cols: np.ndarray, loop: np.ndarray, bounds: np.ndarray,
                         struct: np.ndarray, ro: np.ndarray, op: np.ndarray,
                         shapes: np.ndarray | None = None) -> np.ndarray:
    """Kinds of iteration (``kind[j]`` of global segment ``cols[j]`` of loop ``loop[j]``)
    with the variants of one kind merged, nearest pairs first (see ``VARIANT_DISTANCE``),
    renumbered in order of first occurrence. A kind seen only at a loop's first iteration
    is left to the rule for the loop's ends (it joins the part before: it may still hold
    set-up). One seen only at its last merges as a local variant (the last step skips the
    flags a rank sends for a next step that never comes; ``shapes``, the ranks' iteration
    shapes per column, say which ranks it differs on: a call count the data decides,
    which the first repetition of the other kind had otherwise, is none), or as one of
    rare kinds on a common period (GROMACS's last neighbour search, at step 400, every
    40 steps: its atom exchanges unlike any before, as each search's are), never by the
    rules for kinds that recur side by side."""
    n_kind = int(kind.max()) + 1
    P = bounds.shape[0]
    parent = np.arange(n_kind)

    def root(k: int) -> int:
        while parent[k] != k:
            k = parent[k]
        return k

    for L in np.unique(loop).tolist():
        mine = np.flatnonzero(loop == L)
        ks, first = np.unique(kind[mine], return_index=True)
        n = len(ks)
        if n < 2 or n > VARIANT_KINDS_MAX:
            continue
        pos = [np.flatnonzero(kind[mine] == k) for k in ks]
        sets, per_rank, collectives = [], [], []
        for j in mine[first].tolist():
            g = int(cols[j])
            spans = [(int(ro[r]) + 1 + int(bounds[r, g]), int(ro[r]) + 1 + int(bounds[r, g + 1])) for r in range(P)]
            pieces = [struct[a:b] for a, b in spans]
            keys = np.concatenate([mix(t, np.full(len(t), r, np.int64)) for r, t in enumerate(pieces)])
            sets.append(np.unique(keys, return_counts=True))
            # each rank's calls as a multiset (a sum of hashes does not depend on the order),
            # and the collective calls the kind makes (on any rank)
            with np.errstate(over="ignore"):
                per_rank.append(np.array([mix(t, np.zeros(len(t), np.int64)).sum(dtype=np.uint64)
                                          for t in pieces], np.uint64))
            collectives.append(np.unique(np.concatenate([struct[a:b][_IS_COLLECTIVE[op[a:b]]]
                                                         for a, b in spans])))
        dist = np.full((n, n), np.inf)
        for i in range(n):
            for j in range(i + 1, n):
                (ka, ca), (kb, cb) = sets[i], sets[j]
                _, ia, ib = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
                apart = int(ca.sum()) + int(cb.sum()) - 2 * int(np.minimum(ca[ia], cb[ib]).sum())
                dist[i, j] = dist[j, i] = apart / max(int(ca.sum()), int(cb.sum()), 1)
        recurs = np.array([len(x) >= RARE_KIND for x in pos])
        near = np.where(recurs[None, :], dist, np.inf).min(axis=1)  # nearest kind that recurs
        first_only = np.array([len(x) == 1 and int(x[0]) == 0 for x in pos])
        last_only = np.array([len(x) == 1 and int(x[0]) == len(mine) - 1 for x in pos])
        i, j = np.nonzero(np.triu(dist < max(VARIANT_DISTANCE, RARE_VARIANT_DISTANCE), 1))
        pairs = sorted((float(dist[a, b]), int(a), int(b)) for a, b in zip(i, j) if not (first_only[a] or first_only[b]))
        commonest = int(np.argmax([len(x) for x in pos]))

        def combined(a: int, b: int, steps: list[np.ndarray]) -> bool:
            """Whether the calls one of kinds a, b makes beyond the other's are those that
            a recurring kind off their period adds to the loop's commonest kind: a step of
            theirs that is also a step of that other kind (LAMMPS's thermo output every
            50 steps falling on a step that rebuilds its neighbour lists, as the atoms
            move), not a variant."""
            for u, v in ((a, b), (b, a)):
                extra = np.setdiff1d(sets[u][0], sets[v][0])
                if not extra.size:
                    continue
                for z in range(n):
                    if z in (a, b, commonest) or not recurs[z] or _one_period(steps + [pos[z]]):
                        continue
                    if np.isin(extra, np.setdiff1d(sets[z][0], sets[commonest][0])).all():
                        return True
            return False

        # the kinds each group stands for: a kind merged as a variant no longer is one of
        # them (where a variant occurs says nothing of where the program's steps occur)
        core = {k: [k] for k in range(n)}
        group = list(range(n))

        def top(k: int) -> int:
            while group[k] != k:
                k = group[k]
            return k

        for d, a, b in pairs:
            ra, rb = top(a), top(b)
            if ra == rb:
                continue
            pa, pb = [pos[k] for k in core[ra]], [pos[k] for k in core[rb]]
            local = np.sum(per_rank[a] != per_rank[b]) <= LOCAL_VARIANT_SHARE * P
            if (last_only[a] or last_only[b]) and shapes is not None:
                ja, jb = mine[first[a]], mine[first[b]]
                local = local or np.sum(shapes[:, ja] != shapes[:, jb]) <= LOCAL_VARIANT_SHARE * P
            if d < VARIANT_DISTANCE and local:
                kept = core[ra] if sum(map(len, pa)) >= sum(map(len, pb)) else core[rb]
            elif d < VARIANT_DISTANCE and _follow(pa, pb) and np.array_equal(collectives[a], collectives[b]):
                kept = core[ra] + core[rb]
            elif d < 0.5 * min(near[a], near[b]) and _rare_on_a_period(pa, pb):
                kept = core[ra] + core[rb]
            elif (d < VARIANT_DISTANCE and np.array_equal(collectives[a], collectives[b]) and _one_period(pa + pb)
                  and not combined(a, b, pa + pb)):
                kept = core[ra] + core[rb]
            else:
                continue
            lo, hi = min(ra, rb), max(ra, rb)
            group[hi] = lo
            del core[hi]
            core[lo] = kept
            parent[root(int(ks[hi]))] = root(int(ks[lo]))
    merged = np.array([root(int(k)) for k in kind])
    _, first, inverse = np.unique(merged, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[np.asarray(inverse).reshape(-1)]


def _follow(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    """Whether two groups of kinds (the loop iterations each kind occurs at) all recur and
    each kind of one lies wholly before or after each kind of the other."""
    return bool(min(len(x) for x in a + b) >= RARE_KIND
                and all(x.max() < y.min() or y.max() < x.min() for x in a for y in b))


def _rare_on_a_period(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    """Whether two groups of rare kinds never occur twice in a row and fall on a common
    period (greatest common divisor of their distances above 1)."""
    return max(len(x) for x in a + b) < RARE_KIND and _one_period(a + b, least=2)


def _one_period(groups: list[np.ndarray], least: int = RARE_KIND) -> bool:
    """Whether kinds (the loop iterations each occurs at) together recur, ``least`` times
    or more, on one period above one iteration: steps the program takes every so many
    iterations, whose calls the data vary from one to the next (GROMACS's neighbour
    search every 40 steps: at P = 4 some balance the load, and on some one rank's halo
    is a Send and a Recv)."""
    at = np.unique(np.concatenate(groups))
    return bool(len(at) >= least and np.gcd.reduce(np.diff(at)) > 1)


def _call_sets(trace: Trace, bounds: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """(P, len(cols)) keys of the set of calls (op codes, without peers or order) and their
    number that each rank makes in the global segments ``cols`` (``bounds``: (P, G+1) positions in
    each rank's stream without Init)."""
    ev = trace.events
    ro = trace.rank_offsets
    P = trace.nprocs
    lo = (bounds[:, cols] + (ro[:-1] + 1)[:, None]).reshape(-1)
    hi = (bounds[:, cols + 1] + (ro[:-1] + 1)[:, None]).reshape(-1)
    n = hi - lo
    idx = np.repeat(lo - np.concatenate([[0], np.cumsum(n)[:-1]]), n) + np.arange(int(n.sum()))
    seg = np.repeat(np.arange(len(lo)), n)
    present = np.unique(seg * 256 + ev["op"][idx].astype(np.int64))
    with np.errstate(over="ignore"):
        keys = mix(np.zeros(len(lo), np.uint64), n)  # (how many calls)
        h = mix(np.zeros(len(present), np.uint64), present % 256)
        np.add.at(keys, present // 256, h)
    return keys.reshape(P, len(cols))


def _collective_loop(struct: np.ndarray, base: int, cuts: np.ndarray) -> RankSegments:
    """A section that repeats a pattern of global collectives, cut at the unit's first
    collective of each repetition (``cuts``: positions in the rank's stream, which begins
    at event ``base``): one loop, whatever nested loops each iteration holds (a ping-pong
    repeated with each partner in turn, a transpose repeated per block)."""
    bounds = np.concatenate([cuts[:1], cuts]).astype(np.int64)
    shape, exact = segment_keys(struct[base:base + int(cuts[-1])], bounds)
    return RankSegments(bounds=bounds, loop=np.concatenate([[-1], np.zeros(len(cuts) - 1, np.int64)]),
                        shape=shape, exact=exact, given=True)


def _cut_section(op: np.ndarray, tokens: np.ndarray, struct: np.ndarray, a: int, b: int, offset: int,
                 seen: dict, anchor: np.ndarray | None = None) -> RankSegments:
    """One rank's events ``a:b`` (of the trace) cut into parts and iterations, with bounds
    counted from the rank's first event after Init (``offset`` is where ``a`` lies).

    Ranks whose streams are equal (relative to the rank: the interior of a grid) are cut
    once (``seen``). User regions are not part of the loop: the stream is cut without
    them, then each cut is put after the Region_end events that close the previous
    iteration. ``anchor`` marks the trace's global collectives (the canonical cut of a
    cycle: :func:`signature.iterations.segment_rank`)."""
    inner = op[a:b]
    marks = np.isin(inner, _REGION_OPS)
    if not marks.any():
        key = (tokens[a:b].tobytes(), struct[a:b].tobytes())
        if key not in seen:
            seen[key] = _polling(segment_rank(tokens[a:b], struct[a:b],
                                              None if anchor is None else anchor[a:b]), inner)
        seg = dataclasses.replace(seen[key])
    else:
        kept = np.flatnonzero(~marks)
        seg = segment_rank(tokens[a:b][~marks], struct[a:b][~marks],
                           None if anchor is None else anchor[a:b][~marks])
        n = len(inner)
        after = np.concatenate([[0], kept + 1])  # compressed bound c -> just after event c-1
        idx = np.arange(n + 1)
        not_end = np.concatenate([inner != OP_CODE["Region_end"], [True]])
        skip = np.minimum.accumulate(np.where(not_end, idx, n)[::-1])[::-1]
        seg.bounds = skip[after[seg.bounds]]
        seg.bounds[-1] = n
        seg = _polling(seg, inner)
    seg.bounds = seg.bounds + offset
    return seg


def _polling(seg: RankSegments, inner: np.ndarray) -> RankSegments:
    """Mark a rank whose loops are mostly polls (``POLL_LOOP_SHARE``): a wait, whose
    count is timing, not the program (``inner``: the rank's ops the bounds count)."""
    its = np.flatnonzero(seg.loop >= 0)
    if its.size:
        events = _covered(len(inner), seg.bounds[its], seg.bounds[its + 1])
        seg.polling = bool(np.isin(inner[events], _POLL_OPS).mean() >= POLL_LOOP_SHARE)
    return seg


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
