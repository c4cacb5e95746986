"""Generate and write a logical trace: every rank's events at a target P, phase by phase.

Events are generated vectorised over a block of ranks: for each phase, each
slot is evaluated for the whole block at once (its peer rule gives the peer
or -1 where a rank lacks the event), the (slot x rank) tables are reduced to
the present events in rank-major order, and the phases are merged by a
stable sort on the rank. Blocks of ``block`` ranks are streamed to HDF5, so
memory stays bounded at any P.

File layout: the captured-trace schema (``docs/trace-format.md``) with
``trace_kind = "logical"``. Weights are stored, not unrolled: each phase
appears once per rank, its events carry their phase index in the ``phase``
column, and the root attribute ``phase_weights`` (JSON) gives each phase's
repetitions. Work per burst is in ``t_cpu`` (thread CPU seconds of the traced
machine, CPU-time mode) or ``instr`` (counters mode). As in a captured trace
an event carries the burst *before* it; a repetition's trailing burst is
charged before its first event (a phase repeats, so its work stays inside
its block). Wait events complete every request posted since the previous
wait of the same repetition (``completions`` table). Columns that only a
real run has (t_start, t_comm, t_comp, ctx_switches) are absent.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Callable

import h5py
import numpy as np

from signature import __version__
from signature._files import publish
from signature.io import FORMAT_NAME, FORMAT_VERSION
from signature.trace import OPS, COMPLETION_COLUMNS

from . import onesided
from .model import DEFERRED_DROP, DEFERRED_OP, POST_OPS, WAIT_OPS, LogicalModel

__all__ = ["generate", "write_logical_trace", "LOGICAL_COLUMNS"]

#: Columns of a logical trace and their dtypes (work column added by mode).
LOGICAL_COLUMNS = {
    "rank": np.int32, "seq": np.int64, "op": np.uint8, "peer": np.int32, "recv_peer": np.int32,
    "root": np.int32, "tag": np.int32, "comm": np.int32, "aux": np.int32, "bytes": np.int64,
    "recv_bytes": np.int64, "req": np.int64, "phase": np.int32,
}


def comm_ids(model: LogicalModel, P: int) -> tuple[dict, int]:
    """Communicator ids of the logical trace: 0 MPI_COMM_WORLD, 1 the Cartesian grid
    (when the model has one), then each sub-communicator layout's communicators
    (colour order): {layout: first id}, and the number of ids."""
    nxt = 2 if model.grid else 1
    base = {}
    for role in model.comm_roles():
        base[role] = nxt
        try:
            nxt += role.n_comms(P)
        except ValueError:  # a grid the traced P cannot give at P: its phases are not placed there
            pass
    return base, nxt


#: ranks of the first block :func:`write_logical_trace` generates, and the most events of
#: each block after it (events per rank as the first block had them)
PROBE_RANKS = 64
BLOCK_EVENTS = 1 << 20

#: most (rows x ranks) cells of a phase's tables built at once: a phase with a tree or an
#: exchange of P - 1 stages (:mod:`logical_model.trees`) is built over halves of the block
MAX_TABLE_CELLS = 1 << 22


def _phase_tables(model: LogicalModel, k: int, P: int, ranks: np.ndarray, bases: dict):
    """One phase's events for a block of ranks: dict of (n_events,) arrays, rank-major."""
    ph = model.phases[k]
    nr = len(ranks)
    wide = sum(s.tree.row_count(P, s.tree_side) for s in ph.slots if s.tree is not None)
    if wide and nr > 1 and wide * nr > MAX_TABLE_CELLS:  # rank-major: the halves in turn
        a, b = (_phase_tables(model, k, P, part, bases) for part in (ranks[:nr // 2], ranks[nr // 2:]))
        return {c: np.concatenate([a[c], b[c]]) for c in a}
    grid = model.grid
    # each slot's rows: one for an exact slot, one per call of its busiest rank for a
    # statistical one (a run of calls whose number differs by rank)
    rows, row_slot, first_row, counts = [], [], {}, {}
    scale = ph.stat_scale(P)
    posted = np.zeros(nr, bool)  # (a deferred phase: where a rank posted a request so far)
    for i, s in enumerate(ph.slots):
        if ph.deferred and s.wait_rule == "all":  # one Waitall completing every request
            none = np.full(nr, -1, np.int64)
            placed = [{"present": posted.copy(), "peer": none, "recv_peer": none, "root": none,
                       "tag": np.full(nr, s.tag, np.int64), "bytes": np.zeros(nr, np.int64),
                       "recv_bytes": np.zeros(nr, np.int64)}]
        elif ph.deferred and s.op in DEFERRED_DROP:  # the phase's own waits, polls and probes
            placed = []
        else:
            placed = s.rows(ranks, P, grid, counts, scale)
        if ph.deferred and DEFERRED_OP.get(s.op, s.op) in POST_OPS:
            for p in placed:
                posted |= p["present"]
        first_row[i] = len(rows)
        counts[i] = (np.sum([p["present"] for p in placed], axis=0).astype(np.int64) if placed
                     else np.zeros(nr, np.int64))
        rows += placed
        row_slot += [i] * len(placed)
    ns = len(rows)
    row_slot = np.asarray(row_slot, np.int64)
    cols = {c: np.zeros((ns, nr), np.int64) for c in ("peer", "recv_peer", "root", "bytes", "recv_bytes",
                                                       "comm", "tag")}
    present = np.zeros((ns, nr), bool)
    for j, placed in enumerate(rows):
        s = ph.slots[row_slot[j]]
        present[j] = placed["present"]
        for c in ("peer", "recv_peer", "root", "bytes", "recv_bytes", "tag"):
            cols[c][j] = placed[c]
        if s.comm_role is not None:
            cols["comm"][j] = bases[s.comm_role] + s.comm_role.layout(ranks, P)[0]
        else:
            cols["comm"][j] = s.comm
    # waits present where the call they complete is (but a rank's last call, where the
    # next repetition opens with the wait that completes it)
    follow = [i for i, s in enumerate(ph.slots) if s.follows is not None]
    if follow:
        calls = np.array([ph.slots[i].op not in WAIT_OPS for i in row_slot], bool)
        masked = present & calls[:, None]
        last = np.where(masked.any(0), ns - 1 - np.argmax(masked[::-1], axis=0), -1)
        for i in follow:
            s = ph.slots[i]
            j, f = first_row[i], first_row[s.follows]
            present[j] = present[f] & ((last != f) if s.follows_unless_last else True)
    # (a row may name its own call: an exchange's stage is a send, a receive and a wait)
    op = np.array([DEFERRED_OP.get(o, o) if ph.deferred else o
                   for o in (int(r.get("op", ph.slots[i].op)) for r, i in zip(rows, row_slot))], np.int64)
    share = np.array([ph.slots[i].work_share for i in row_slot], float)
    # work after each slot: the rank's work split by the slots' shares (renormalised
    # over the slots the rank has)
    w_rank = ph.work_per_rank(P, ranks)
    sh = present * share[:, None]
    norm = sh.sum(axis=0)
    after = np.where(norm > 0, sh / np.where(norm > 0, norm, 1.0), present / np.maximum(present.sum(0), 1))
    after = after * w_rank[None, :]
    ri, si = np.nonzero(present.T)  # rank-major, slot order within a rank
    pos = ph.slot_position(ranks, P)
    if pos is not None:  # rank classes with their own event order
        o = np.lexsort((pos[si, ri], ri))
        ri, si = ri[o], si[o]
    ev = {"rank": ranks[ri], "op": op[si], "slot": row_slot[si],
          **{c: v[si, ri] for c, v in cols.items()}}
    a = after[si, ri]
    # the burst before each event; a repetition's trailing burst goes before its first event
    first = np.concatenate([[True], ri[1:] != ri[:-1]]) if len(ri) else np.zeros(0, bool)
    last = np.concatenate([ri[1:] != ri[:-1], [True]]) if len(ri) else np.zeros(0, bool)
    before = np.roll(a, 1)
    before[first] = a[last]
    ev["work"] = before
    # requests: every nonblocking post gets an id (its slot + 1); a wait completes those
    # posted since the previous wait of the same rank
    is_post = np.isin(ev["op"], list(POST_OPS | onesided.REQUEST_OPS))  # Rput..., Ineighbor_*
    ev["req"] = np.where(is_post, si + 1, -1)
    is_wait = np.isin(ev["op"], list(WAIT_OPS))
    # wait generation index per event: number of waits before it on its rank
    wait_cum = np.cumsum(is_wait) - is_wait
    rank_start = np.maximum.accumulate(np.where(first, np.arange(len(ri)), 0)) if len(ri) else ri
    gen = wait_cum - wait_cum[rank_start] if len(ri) else ri
    ev["_post"] = is_post
    ev["_wait"] = is_wait
    ev["_gen"] = gen
    ev["phase"] = np.full(len(ri), k, np.int64)
    return ev


def generate(model: LogicalModel, P: int, ranks: np.ndarray, *, _sizes_cache=None) -> dict[str, np.ndarray]:
    """Events of ``ranks`` at P (all phases, rank-major): see :meth:`LogicalModel.events`.

    Also returns the completions of waits under keys ``c_rank``, ``c_seq``, ``c_req``,
    ``c_bytes``, ``c_peer``, ``c_tag``.
    """
    model.check_target(P)
    ranks = np.asarray(ranks, np.int64)
    bases = _sizes_cache or comm_ids(model, P)[0]
    parts = [_phase_tables(model, k, P, ranks, bases) for k in range(len(model.phases))]
    ev = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    order = np.argsort(ev["rank"], kind="stable")
    ev = {c: v[order] for c, v in ev.items()}
    rank = ev["rank"]
    n = len(rank)
    new_rank = np.concatenate([[True], rank[1:] != rank[:-1]]) if n else np.zeros(0, bool)
    start = np.maximum.accumulate(np.where(new_rank, np.arange(n), 0)) if n else rank
    ev["seq"] = np.arange(n) - start
    # completions: each wait completes the posts of its phase block with the same gen
    post, wait = ev.pop("_post"), ev.pop("_wait")
    gen = ev.pop("_gen")
    # a (rank, phase, gen) group: posts then the wait that closes them
    # events are rank-major, phase-major within a rank and gen never falls within a
    # phase block, so a group starts exactly where (rank, phase, gen) changes: O(n)
    change = np.ones(n, bool)
    if n:
        change[1:] = (rank[1:] != rank[:-1]) | (ev["phase"][1:] != ev["phase"][:-1]) | (gen[1:] != gen[:-1])
    grp = np.cumsum(change) - 1
    wait_of_grp = np.full(grp.max() + 1 if n else 0, -1, np.int64)
    wait_idx = np.flatnonzero(wait)
    wait_of_grp[grp[wait_idx]] = wait_idx
    pi = np.flatnonzero(post)
    wi = wait_of_grp[grp[pi]]
    ok = wi >= 0
    pi, wi = pi[ok], wi[ok]
    is_recv = np.isin(ev["op"][pi], [OPS.index("Irecv")])
    # a deferred phase's Isendrecv: its status names the source and the tag it received,
    # the call's own (a Sendrecv's receive tag is not traced; the replay takes the send's):
    # without them the replay matches its receive after the tagged ones, in any phase, and
    # a lone receive half of the same pair took a Sendrecv's message (GROMACS's halo)
    both = np.isin(ev["op"][pi], [OPS.index("Isendrecv"), OPS.index("Isendrecv_replace")])
    ev["c_rank"] = rank[wi]
    ev["c_seq"] = ev["seq"][wi]
    ev["c_req"] = ev["req"][pi]
    ev["c_bytes"] = np.where(is_recv | both, ev["recv_bytes"][pi], ev["bytes"][pi])
    ev["c_peer"] = np.where(is_recv, ev["peer"][pi], np.where(both, ev["recv_peer"][pi], -1))
    ev["c_tag"] = np.where(is_recv | both, ev["tag"][pi], -1)
    return ev


def write_logical_trace(model: LogicalModel, P: int, path: str | Path, *, overwrite: bool = False,
                        block: int = 65536, progress: Callable[[int, int], None] | None = None,
                        trace_kind: str = "logical",
                        extra: dict[str, Callable[[dict], np.ndarray]] | None = None,
                        extra_meta: dict | None = None) -> Path:
    """Stream the logical trace for P to ``path`` (atomically, in blocks of at most ``block``
    ranks, fewer where that would make more than :data:`BLOCK_EVENTS` events).

    ``extra = {column: f}`` adds float64 columns ``f(events)`` computed from each block's
    events (the compute model adds ``t_comp`` and writes ``trace_kind="physical"``)."""
    model.check_target(P)
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; pass overwrite=True (--force) to replace it")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"{path.parent} is not a directory")
    work_col = "instr" if model.work_mode == "counters" else "t_cpu"
    cols = dict(LOGICAL_COLUMNS)
    cols[work_col] = np.int64 if work_col == "instr" else np.float64
    for c in extra or {}:
        cols[c] = np.float64
    bases, n_comm = comm_ids(model, P)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            meta = {
                "format": FORMAT_NAME, "format_version": FORMAT_VERSION, "trace_kind": trace_kind,
                "app": model.app or "", "nprocs": P, "complete": True,
                "workload_label": model.workload_label or "", "workload_value": model.workload_value or "",
                "work_mode": model.work_mode, "counters_available": model.work_mode == "counters",
                "sigex_version": __version__,
                "source": f"logical model from P = {', '.join(map(str, model.Ps))}",
                "phase_weights": json.dumps(model.weights(P)),
                "phase_kinds": json.dumps([ph.kind for ph in model.phases]),
                "phase_patterns": json.dumps([ph.pattern for ph in model.phases]),
                "phase_ids": json.dumps([ph.id for ph in model.phases]),
            }
            if model.left_out:  # phases of the signature this trace does not hold, and why
                meta["phases_left_out"] = json.dumps(model.left_out)
            meta.update(extra_meta or {})
            for k, v in meta.items():
                f.attrs[k] = v
            evg = f.create_group("events")
            evg.attrs["op_names"] = json.dumps(list(OPS))
            evg.attrs["region_names"] = "[]"

            def dset(group, name, dtype):
                return group.create_dataset(name, shape=(0,), maxshape=(None,), dtype=dtype,
                                            chunks=(1 << 16,), compression="lzf", shuffle=True)

            ds = {c: dset(evg, c, t) for c, t in cols.items()}
            cg = f.create_group("completions")
            cds = {c: dset(cg, c, t) for c, t in COMPLETION_COLUMNS.items()}
            counts = np.zeros(P, np.int64)
            list_parts: list = []
            n_written = 0
            nc_written = 0
            r0, size = 0, min(block, PROBE_RANKS)  # a first block tells the events per rank
            while r0 < P:
                ranks = np.arange(r0, min(P, r0 + size))
                ev = generate(model, P, ranks, _sizes_cache=bases)
                r0 += len(ranks)
                # blocks of at most BLOCK_EVENTS events after it (an all-pairs exchange makes
                # P - 1 calls per rank: MPB's at P = 1,000 held 16 M events in one block of
                # 65,536 ranks, 2.3 GB to build at P = 600)
                size = int(min(block, max(1, BLOCK_EVENTS * len(ranks) // max(len(ev["rank"]), 1))))
                for c, column in (extra or {}).items():
                    ev[c] = column(ev)
                ev[work_col] = ev.pop("work")
                onesided.window_columns(model, ev)  # window ids (aux), a fence's recorded peer
                for rk, sq, kind, vals in onesided.list_rows(model, P, ev, model.grid):
                    list_parts.append((rk, sq, kind, vals))  # neighbour lists, post/start groups
                n = len(ev["rank"])
                for c, d in ds.items():
                    d.resize((n_written + n,))
                    d[n_written:] = ev[c].astype(cols[c], copy=False)
                nc = len(ev["c_rank"])
                for c, d in cds.items():
                    d.resize((nc_written + nc,))
                    d[nc_written:] = ev["c_" + c].astype(COMPLETION_COLUMNS[c], copy=False)
                counts[ranks] = np.bincount(ev["rank"] - ranks[0], minlength=len(ranks))
                n_written += n
                nc_written += nc
                if progress:
                    progress(int(ranks[-1]) + 1, P)
            f.create_group("index").create_dataset(
                "rank_offsets", data=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
            _write_lists(f.create_group("lists"), list_parts)
            _write_comms(f.create_group("comms"), model, P, n_comm)
        publish(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _write_lists(group, parts: list) -> None:
    """/lists: per event that carries lists (neighbourhood collectives: sources, destinations,
    bytes per destination and per source; post/start: the group), rows sorted by (rank, seq,
    kind) as a captured trace's."""
    rank, seq, kind, length, values = [], [], [], [], []
    for rk, sq, k, vals in parts:
        n = vals.shape[1]
        rank.append(rk)
        seq.append(sq)
        kind.append(np.full(len(rk), k, np.int64))
        length.append(np.full(len(rk), n, np.int64))
        values.append(vals)
    if parts:
        rank, seq, kind, length = (np.concatenate(x) for x in (rank, seq, kind, length))
        order = np.lexsort((kind, seq, rank))
        # each row's values in the parts' order, then reordered with the rows
        flat = [v.reshape(-1) for v in values]
        start_in = np.concatenate([[0], np.cumsum(length)[:-1]])
        allv = np.concatenate(flat) if flat else np.zeros(0, np.int64)
        rank, seq, kind, length, start_in = rank[order], seq[order], kind[order], length[order], start_in[order]
        idx = (np.repeat(start_in - np.concatenate([[0], np.cumsum(length)[:-1]]), length)
               + np.arange(int(length.sum())))
        vals = allv[idx]
        start = np.concatenate([[0], np.cumsum(length)[:-1]])
    else:
        rank = seq = kind = length = start = vals = np.zeros(0, np.int64)
    for c, v, t in (("rank", rank, np.int32), ("seq", seq, np.int64), ("kind", kind, np.int8),
                    ("start", start, np.int64), ("length", length, np.int64), ("values", vals, np.int64)):
        group.create_dataset(c, data=np.asarray(v).astype(t))


def _write_comms(comms, model: LogicalModel, P: int, n_comm: int) -> None:
    """/comms: MPI_COMM_WORLD, the Cartesian grid (every rank in order, dims of its rule
    at P), then each sub-communicator layout's communicators with their members."""
    sizes, members = [P], [np.arange(P, dtype=np.int32)]
    if model.grid:
        sizes.append(P)
        members.append(np.arange(P, dtype=np.int32))
    for role in model.comm_roles():
        try:
            colour, local, size = role.layout(np.arange(P), P)
        except ValueError:  # (as comm_ids: no communicator of it at P)
            continue
        order = np.lexsort((local, colour))
        order = order[colour[order] >= 0]  # (a layout over one class's ranks leaves the others out)
        sizes += [int(np.count_nonzero(colour == c)) for c in range(role.n_comms(P))]
        members.append(order.astype(np.int32))
    comms.create_dataset("size", data=np.array(sizes, np.int32))
    comms.create_dataset("inter", data=np.zeros(n_comm, bool))
    comms.create_dataset("member_offsets", data=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))
    comms.create_dataset("members", data=np.concatenate(members), compression="lzf", chunks=True)
    cart_len = np.zeros(n_comm, np.int64)
    if model.grid:
        dims = model.grid.dims(P)
        cart_len[1] = len(dims)
        comms.create_dataset("cart_dims", data=np.array(dims, np.int32))
        comms.create_dataset("cart_periods", data=np.array(model.grid.periods, bool))
    else:
        comms.create_dataset("cart_dims", data=np.zeros(0, np.int32))
        comms.create_dataset("cart_periods", data=np.zeros(0, bool))
    comms.create_dataset("cart_offsets", data=np.concatenate([[0], np.cumsum(cart_len)]).astype(np.int64))
