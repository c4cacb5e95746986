"""One-sided communication and neighbourhood collectives in the logical model.

The model learns these calls with the machinery it has for point-to-point and
collective ones (:mod:`logical_model.model`), plus what this module adds:

* **One-sided operations** (:data:`TARGET_OPS`: ``Put``, ``Get``, ``Accumulate``,
  ``Get_accumulate``, ``Fetch_and_op``, ``Compare_and_swap``, the request forms
  ``Rput``..., and ``Win_lock``, ``Win_unlock``, ``Win_flush``, ``Win_flush_local``,
  which name a target): the target rank is the slot's peer, found by the same rule
  search as a send's (:func:`~logical_model.rules.infer_peer`, in the window's
  communicator: a grid displacement on a Cartesian one, a shift, a fixed root, ...;
  MPI_PROC_NULL ends as a halo's), the bytes a fitted law, exact per rank where the
  rule holds at every traced P, else the phase is refused (or statistical).
* **Window synchronisation** (``Win_create``/``Win_allocate``, ``Win_free``,
  ``Win_fence``, ``Win_lock_all``/``Win_unlock_all``, ``Win_flush_all``...,
  ``Win_complete``, ``Win_wait``): slots on the window's communicator, placed as
  collectives are. ``Win_post``/``Win_start`` carry their group (the tracer's
  destinations list) which is learned like a neighbourhood's destinations.
* **Window ids.** Every window event's ``aux`` is the window's number on the rank
  (order of creation). A slot keeps the id the runs gave it when that id is one for
  every rank at every traced P; else the logical trace writes -1 (unknown).
* **Neighbourhood collectives** (``Neighbor_*``, ``Ineighbor_*``): the topology (each
  rank's sources and destinations, in MPI's neighbour order) is learned position by
  position, each position a peer rule (the k-th destination of every rank is its
  neighbour at displacement d on a periodic grid, ...), and the bytes per destination
  and per source are fitted laws per position, exact per rank. The logical trace
  carries the lists (``/lists`` kinds 3, 4, 0, 1) as a captured trace does.

The signature's phase templates hold an event's op, peer, root, bytes, communicator
and tag, not its ``aux`` or its lists: :func:`note_trace` reads those from the trace
a signature came from (:func:`logical_model.model.read_signatures` calls it) and keeps
them beside the phase; a model built from signatures alone has no topology for its
neighbourhood collectives and refuses them, saying so.

What the replay does with them (``replay/program.py``): window creation, free and
fence are barriers on the window's communicator; an RMA operation is a transfer of
its bytes to the target charged to the origin as a buffered send no receive waits for
(request forms waited like a send); lock/unlock/flush/post/start/complete/wait add
no dependency. A neighbourhood collective follows its recorded lists.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Callable

import numpy as np

from signature.trace import LIST_DESTS, LIST_RECV, LIST_SEND, LIST_SOURCES, OP_CODE, OPS

from .rules import Observation, PeerRule, infer_peer

__all__ = ["TARGET_OPS", "WINDOW_OPS", "NEIGHBOR_OPS", "GROUP_OPS", "REQUEST_OPS", "NOT_EXTRAPOLATED",
           "OneSided", "note_trace", "learn", "window_columns", "list_rows"]


def _codes(names) -> frozenset[int]:
    return frozenset(OP_CODE[n] for n in names)


#: One-sided calls that name a target rank (the tracer's ``peer``, a world rank)
TARGET_OPS = _codes(("Put", "Get", "Accumulate", "Get_accumulate", "Fetch_and_op", "Compare_and_swap",
                     "Rput", "Rget", "Raccumulate", "Rget_accumulate", "Win_lock", "Win_unlock",
                     "Win_flush", "Win_flush_local"))
#: Every call on a window (its ``aux`` is the window's id)
WINDOW_OPS = TARGET_OPS | _codes(n for n in OPS if n.startswith("Win_"))
#: Window calls that are neither collective nor aimed at a target: a class of ranks may make
#: them alone (the exposing side of post/wait, the accessing side of start/complete)
LOCAL_WINDOW_OPS = _codes(("Win_lock_all", "Win_unlock_all", "Win_flush_all", "Win_flush_local_all",
                           "Win_sync", "Win_post", "Win_start", "Win_complete", "Win_wait"))
#: Calls with a group of ranks in the destinations list (world ranks)
GROUP_OPS = _codes(("Win_post", "Win_start"))
#: Neighbourhood collectives the model places (persistent ones are refused below)
NEIGHBOR_OPS = _codes(n for n in OPS if "eighbor_" in n and not n.endswith("_init"))
#: Calls that post a request a Wait completes, beside ``model.POST_OPS``
REQUEST_OPS = _codes(("Rput", "Rget", "Raccumulate", "Rget_accumulate")) | _codes(
    n for n in OPS if n.startswith("Ineighbor_"))
#: Calls the replay takes from captured traces but the model does not extrapolate: a
#: phase that has them is refused, naming the first (``model.build``)
NOT_EXTRAPOLATED = (
    ([OP_CODE[n] for n in OPS if "eighbor_" in n and n.endswith("_init")],
     "persistent neighbourhood collectives are replayed from captured traces but not extrapolated "
     "(their Start calls are not tied to the init's lists at another P)"),
    ([OP_CODE["Win_test"]],
     "MPI_Win_test is replayed from captured traces but not extrapolated (how many polls an "
     "access epoch takes at another P is not modelled)"),
)

#: per signature phase: what its template events carry beyond the template columns
#: (filled by :func:`note_trace`; keyed by the phase object, dropped with it)
_EXTRAS: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


@dataclasses.dataclass
class OneSided:
    """What a one-sided or neighbourhood slot has beyond a :class:`~logical_model.model.SlotModel`:
    the window id (``aux``), a constant ``peer`` the tracer records for calls without a target,
    and, for neighbourhood collectives (and post/start groups), per list position a peer rule
    and a bytes law."""

    window: int | None = None
    peer: int | None = None
    sources: list = dataclasses.field(default_factory=list)  # PeerRule per position
    dests: list = dataclasses.field(default_factory=list)
    send: list = dataclasses.field(default_factory=list)  # bytes law per destination (None: 0)
    recv: list = dataclasses.field(default_factory=list)  # bytes law per source
    has_lists: bool = False

    def describe(self) -> str:
        parts = []
        if self.has_lists:
            if self.dests:
                parts.append("destinations " + "; ".join(r.describe() for r in self.dests))
            if self.sources and [r.to_dict() for r in self.sources] != [r.to_dict() for r in self.dests]:
                parts.append("sources " + "; ".join(r.describe() for r in self.sources))
            if self.send:
                parts.append("bytes per destination " + ", ".join(
                    m.formula() if m is not None else "0" for m in self.send))
            if self.recv and [_text(m) for m in self.recv] != [_text(m) for m in self.send]:
                parts.append("bytes per source " + ", ".join(_text(m) for m in self.recv))
        if self.window is not None:
            parts.append(f"window {self.window}")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"window": self.window, "peer": self.peer, "has_lists": self.has_lists,
                "sources": [r.to_dict() for r in self.sources], "dests": [r.to_dict() for r in self.dests],
                "send": [m.to_dict() if m is not None else None for m in self.send],
                "recv": [m.to_dict() if m is not None else None for m in self.recv]}

    @classmethod
    def from_dict(cls, d: dict[str, Any], load_quantity: Callable) -> "OneSided":
        return cls(window=d.get("window"), peer=d.get("peer"), has_lists=bool(d.get("has_lists")),
                   sources=[PeerRule.from_dict(x) for x in d.get("sources", ())],
                   dests=[PeerRule.from_dict(x) for x in d.get("dests", ())],
                   send=[load_quantity(x) for x in d.get("send", ())],
                   recv=[load_quantity(x) for x in d.get("recv", ())])


def _text(m) -> str:
    return m.formula() if m is not None else "0"


# ---- reading what the templates lack from the trace ---------------------------------------
def note_trace(sig, trace) -> None:
    """Keep, beside each phase of ``sig`` (the signature extracted from ``trace``) that has
    window or neighbourhood calls, each such template event's window id and lists, found
    in the trace by the event's rank, op, communicator, peer and sizes (a template event is
    one repetition's call; every call with those values must carry the same id and lists,
    else the event's are unknown)."""
    ev = trace.events
    op = np.asarray(ev["op"], np.int64)
    wanted = np.array(sorted(WINDOW_OPS | NEIGHBOR_OPS), np.int64)
    sel = np.flatnonzero(np.isin(op, wanted))
    if not sel.size:
        return
    cols = ("rank", "op", "comm", "peer", "bytes", "recv_bytes")
    keys = np.stack([np.asarray(ev[c], np.int64)[sel] for c in cols] + [np.asarray(ev["aux"], np.int64)[sel]], 1)
    # window ids: by the full key, else by (rank, op, comm) where sizes follow the data
    full, coarse = _Lookup(keys[:, :6], keys[:, 6]), _Lookup(keys[:, :3], keys[:, 6])
    # lists of neighbourhood collectives and post/start groups, per full key
    lists: dict[tuple, Any] = {}
    L = trace.lists
    listed = np.isin(op[sel], np.array(sorted(NEIGHBOR_OPS | GROUP_OPS), np.int64))
    if listed.any() and len(L.get("rank", ())):
        seq = np.asarray(ev["seq"], np.int64)[sel[listed]]
        lk = np.asarray(L["rank"], np.int64) * (1 << 40) + np.asarray(L["seq"], np.int64)
        want = keys[listed, 0] * (1 << 40) + seq
        hit = np.isin(lk, want)
        values = np.asarray(L["values"], np.int64)
        table: dict[tuple, dict] = {}
        for r, s, k, a, n in zip(*(np.asarray(L[c])[hit].tolist() for c in ("rank", "seq", "kind", "start", "length"))):
            table.setdefault((r, s), {})[k] = tuple(values[a:a + n].tolist())
        for row, s in zip(keys[listed].tolist(), seq.tolist()):
            got = table.get((row[0], s), {})
            val = tuple(got.get(k) for k in (LIST_SOURCES, LIST_DESTS, LIST_SEND, LIST_RECV))
            key = tuple(row[:6])
            if lists.setdefault(key, val) != val:
                lists[key] = False  # calls with the same sizes and different lists
    for ph in getattr(sig, "phases", ()):
        T, offs = ph.template, ph.template_offsets
        top = np.asarray(T["op"], np.int64)
        idx = np.flatnonzero(np.isin(top, wanted))
        if not idx.size:
            continue
        rank = np.repeat(np.arange(len(offs) - 1), np.diff(offs))
        tk = np.stack([rank] + [np.asarray(T[c], np.int64) for c in cols[1:]], 1)[idx]
        a, found = full(tk)
        b, _ = coarse(tk[:, :3])
        aux = np.full(len(top), -1, np.int64)
        aux[idx] = np.where(found, a, b)
        per_event: dict[int, Any] = {}
        for i in idx[np.isin(top[idx], np.array(sorted(NEIGHBOR_OPS | GROUP_OPS), np.int64))].tolist():
            got = lists.get((int(rank[i]), *(int(T[c][i]) for c in cols[1:])))
            if got:
                per_event[i] = got
        _EXTRAS[ph] = {"aux": aux, "lists": per_event}


def renamed(old, phase_id: int):
    """A copy of the signature phase ``old`` under the id ``phase_id`` (the phases of runs
    :func:`~logical_model.correspond.correspond` relates), with what :func:`note_trace`
    kept for ``old``: without it a run whose phases were renumbered lost its
    neighbourhood collectives' lists (DOLFINx's halo updates were refused as "not read
    from the traces")."""
    new = dataclasses.replace(old, id=phase_id)
    got = _EXTRAS.get(old)
    if got is not None:
        _EXTRAS[new] = got
    return new


def _rows(a: np.ndarray) -> np.ndarray:
    """Each row of an int64 matrix as one opaque value (equal rows, equal values)."""
    a = np.ascontiguousarray(a, np.int64)
    return a.view(np.dtype((np.void, 8 * a.shape[1]))).ravel()


class _Lookup:
    """Rows of ``keys`` sorted once; called with query rows: per row, the one value the
    equal rows of ``keys`` carry (-1 where they carry several), and whether any row is
    equal. Sorts and searches, no loop."""

    def __init__(self, keys: np.ndarray, vals: np.ndarray):
        self.u, inv = np.unique(_rows(keys), return_inverse=True)
        lo = np.full(len(self.u), np.iinfo(np.int64).max)
        hi = np.full(len(self.u), np.iinfo(np.int64).min)
        np.minimum.at(lo, inv.ravel(), vals)
        np.maximum.at(hi, inv.ravel(), vals)
        self.one = np.where(lo == hi, lo, -1)

    def __call__(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q = _rows(query)
        pos = np.clip(np.searchsorted(self.u, q), 0, len(self.u) - 1)
        found = self.u[pos] == q
        return np.where(found, self.one[pos], -1), found


# ---- learning --------------------------------------------------------------------------
def statistical_ok(sigs, k: int, notes: list) -> bool:
    """Whether phase k may be modelled statistically: not when it has one-sided calls with a
    target or neighbourhood collectives (the statistical model has channels between point-to-point
    runs only: it would place them with no target or lists); ``notes`` says so."""
    codes = np.array(sorted(TARGET_OPS | NEIGHBOR_OPS | GROUP_OPS), np.int64)
    for s in sigs:
        hit = np.flatnonzero(np.isin(np.asarray(s.phases[k].template["op"], np.int64), codes))
        if hit.size:
            notes.append(f"not modelled statistically: its {OPS[int(s.phases[k].template['op'][hit[0]])]} "
                         "calls' targets (or lists) have no statistical model")
            return False
    return True



def learn(slot, o_list: list, grid, name: str, fit: Callable) -> None:
    """Set ``slot.onesided`` for a window or neighbourhood slot (``o_list``: per traced P,
    (P, ranks, template event indices, phase)), or ``slot.problem`` where its topology
    follows no rule. ``grid``: the process grid its peers are sought on (None: inferred);
    ``fit(Ps, y, grid, name, alternatives)``: the model's volume fit."""
    op = slot.op
    extra = OneSided()
    found = [_EXTRAS.get(o[3]) for o in o_list if len(o[1])]
    if op in WINDOW_OPS:
        ids = set()
        for o, x in zip((o for o in o_list if len(o[1])), found):
            ids |= set(x["aux"][o[2]].tolist()) if x is not None else {-1}
        extra.window = ids.pop() if len(ids) == 1 and -1 not in ids else None
        if op not in TARGET_OPS:
            peers = set()
            for o in o_list:
                peers |= set(np.asarray(o[3].template["peer"], np.int64)[o[2]].tolist())
            extra.peer = peers.pop() if len(peers) == 1 and min(peers, default=0) < 0 else None
    if op in NEIGHBOR_OPS or op in GROUP_OPS:
        if slot.comm_role is not None:
            slot.problem = f"{OPS[op]} on a sub-communicator: its topology is not modelled there"
            return
        if any(x is None for x in found):
            slot.problem = (f"the {'group' if op in GROUP_OPS else 'neighbours'} of {OPS[op]} were not read "
                            "from the traces (build the model with read_signatures/from_traces)")
            return
        err = _learn_lists(extra, slot, o_list, found, grid, name, fit, op in GROUP_OPS)
        if err:
            slot.problem = err
            return
    slot.onesided = extra


def _learn_lists(extra: OneSided, slot, o_list, found, grid, name, fit, group_only: bool) -> str | None:
    """Per list position a peer rule (sources, destinations) and a bytes law (per destination,
    per source); the reason where none fits."""
    kinds = ((1, "dests", "destination"),) if group_only else (
        (0, "sources", "source"), (1, "dests", "destination"))
    per_p = []  # (P, ranks, [sources, dests, send, recv] arrays (n, degree))
    for o, x in zip((o for o in o_list if len(o[1])), found):
        got = [x["lists"].get(int(i)) for i in o[2]]
        if any(g is None for g in got):
            r = int(o[1][[g is None for g in got].index(True)])
            return (f"rank {r}'s {'group' if group_only else 'neighbours'} at P={o[0]} differ between calls "
                    "with the same sizes, or were not recorded")
        arrs = []
        for k in range(4):
            rows = [g[k] or () for g in got]
            if len({len(v) for v in rows}) > 1:
                return (f"the number of {('sources', 'destinations', 'destinations', 'sources')[k]} differs "
                        f"between ranks at P={o[0]}: no rule gives a rank's neighbours")
            arrs.append(np.array(rows, np.int64).reshape(len(rows), -1))
        per_p.append((o[0], np.asarray(o[1], np.int64), arrs))
    degrees = {(a[0].shape[1], a[1].shape[1]) for _, _, a in per_p}
    if len(degrees) > 1:
        return f"the number of neighbours changes with P ({sorted(degrees)}): not modelled"
    ranks_all = {P: r for P, r, _ in per_p}
    for k, attr, what in kinds:
        rules = []
        for j in range(per_p[0][2][k].shape[1]):
            obs, nulls = [], {}
            for P, ranks, arrs in per_p:
                q = arrs[k][:, j]
                real = q >= 0
                obs.append(Observation(P, ranks[real], q[real]))
                nulls[P] = ranks[~real]
            rule = infer_peer(obs, grid)
            if rule is None:
                return f"no rule gives every rank's {what} {j} at every P"
            for P, nr in nulls.items():  # open ends: where the rule finds no rank
                q = rule(ranks_all[P], P, grid)
                if not np.array_equal(np.sort(nr), np.sort(ranks_all[P][q < 0])):
                    return f"the open ends of {what} {j} at P={P} are not where its rule finds no rank"
            rules.append(rule)
        setattr(extra, attr, rules)
    if not group_only:
        for k, attr, what, peers in ((2, "send", "destination", "dests"), (3, "recv", "source", "sources")):
            laws = []
            for j in range(per_p[0][2][k].shape[1]):
                Ps, ys = [], []
                for P, ranks, arrs in per_p:
                    real = arrs[1 if k == 2 else 0][:, j] >= 0  # bytes of real neighbours only
                    v = arrs[k][real, j]
                    if len(v) and np.any(v != v[0]):
                        r = int(ranks[real][np.flatnonzero(v != v[0])[0]])
                        return (f"bytes to {what} {j} differ between ranks at P={P} ({int(v[0])} on most, "
                                f"{int(arrs[k][ranks == r, j][0])} on rank {r}) and no rule gives each rank's")
                    if len(v):
                        Ps.append(P)
                        ys.append(float(v[0]))
                if not any(ys):
                    laws.append(None)
                    continue
                if len(set(Ps)) < 2:
                    return f"bytes to {what} {j} seen at one P only; their law cannot be fitted"
                rule = getattr(extra, peers)[j]
                g = rule.params.get("grid") if rule.family == "cart" else None
                laws.append(fit(np.array(Ps), np.array(ys), g or grid, f"{name} {what} {j} bytes", []))
            setattr(extra, attr, laws)
    extra.has_lists = True
    return None


# ---- writing -----------------------------------------------------------------------------
def _slot_of(model, ev: dict):
    """Per event: its slot's OneSided (or None)."""
    return [model.phases[k].slots[i].onesided if i >= 0 else None
            for k, i in zip(ev["phase"].tolist(), ev["slot"].tolist())]


def window_columns(model, ev: dict) -> None:
    """The window id in ``aux`` of window events (-1 where the runs left it unknown), and
    the constant peer the tracer records for window calls without a target."""
    aux = np.zeros(len(ev["rank"]), np.int64)
    win = np.flatnonzero(np.isin(ev["op"], np.array(sorted(WINDOW_OPS), np.int64)))
    if win.size:
        phase, slot = ev["phase"][win], ev["slot"][win]
        for k, i in set(zip(phase.tolist(), slot.tolist())):
            x = getattr(model.phases[k].slots[i], "onesided", None)
            m = win[(phase == k) & (slot == i)]
            aux[m] = x.window if x is not None and x.window is not None else -1
            if x is not None and x.peer is not None:
                ev["peer"][m] = x.peer
    ev["aux"] = aux


def list_rows(model, P: int, ev: dict, grid) -> list[tuple[np.ndarray, np.ndarray, int, np.ndarray]]:
    """The ``/lists`` rows of the events that carry lists: (ranks, seqs, kind, values (n, degree))
    per kind and slot; the events' ``bytes``/``recv_bytes`` become the totals over real
    neighbours. Vectorised per slot."""
    out = []
    has = np.flatnonzero(np.isin(ev["op"], np.array(sorted(NEIGHBOR_OPS | GROUP_OPS), np.int64)))
    if not has.size:
        return out
    phase, slot = ev["phase"][has], ev["slot"][has]
    for k, i in sorted(set(zip(phase.tolist(), slot.tolist()))):
        x = getattr(model.phases[k].slots[i], "onesided", None)
        if x is None or not x.has_lists:
            continue
        m = has[(phase == k) & (slot == i)]
        ranks = ev["rank"][m]
        s = model.phases[k].slots[i]
        g = grid if s.comm == 1 or s.on_grid else None  # model.COMM_CART: the declared grid

        def peers(rules):
            if not rules:
                return np.zeros((len(m), 0), np.int64)
            q = np.stack([r(ranks, P, g) for r in rules], 1)
            return np.where(q >= 0, q, -3)  # open ends: MPI_PROC_NULL

        dst = peers(x.dests)
        if model.phases[k].slots[i].op in GROUP_OPS:
            out.append((ranks, ev["seq"][m], LIST_DESTS, dst))
            continue
        src = peers(x.sources)
        send = np.stack([np.full(len(m), _vol(b, P), np.int64) for b in x.send], 1) if x.send else dst * 0
        recv = np.stack([np.full(len(m), _vol(b, P), np.int64) for b in x.recv], 1) if x.recv else src * 0
        send = np.where(dst >= 0, send, 0)
        recv = np.where(src >= 0, recv, 0)
        ev["bytes"][m] = send.sum(1)
        ev["recv_bytes"][m] = recv.sum(1)
        out += [(ranks, ev["seq"][m], LIST_SOURCES, src), (ranks, ev["seq"][m], LIST_DESTS, dst),
                (ranks, ev["seq"][m], LIST_SEND, send), (ranks, ev["seq"][m], LIST_RECV, recv)]
    return out


def _vol(model, P: int) -> int:
    if model is None:
        return 0
    return max(0, int(round(float(np.asarray(model.predict(np.array([P]))).reshape(-1)[0]))))
