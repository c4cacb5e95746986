"""The logical model: an application's phases as functions of P (Panadero et al. §2.2).

:func:`build` takes the signatures of one application at several P and
learns, per phase:

* **Functional similarity.** Phase k at one P is phase k at every P: the
  phase sequences must have the same length, kinds and op structure, or
  :class:`ModelError` says where they part.
* **Event slots.** Each rank's events of one repetition are keyed by
  (operation, tag, communicator, where the peer is, occurrence): the peer
  as a displacement on the process grid when the events use a Cartesian
  communicator, as +-1 when it is a next-door rank, else "far" (a rule
  decides). The slots of all ranks and all P are merged into one order
  (a topological sort of the orders the ranks use: networkx), so a rank's
  events at any P are the slots it has, in that order.
* **Communication rules.** Per slot, the peer (and a Sendrecv's source) as
  a :class:`~logical_model.rules.PeerRule` reproducing every rank at every
  traced P, which ranks have the event included; a collective's root as a
  rule of P. A slot no rule fits makes the phase not extrapolable, with the
  reason; nothing is guessed.
* **Volumes.** Bytes per slot as a function of P: an exact power of one
  process-grid dimension when the bytes follow the grid (a halo row is
  n / dims[1] values, which is no smooth function of P), else the shared
  model search (:mod:`logical_model.search`).
* **Weights.** The phase's repetitions as a function of P (model search;
  the displacement-index fit of the paper when ``p_rule`` says the P grid
  is squares or cubes).
* **Work.** Per rank and repetition: instructions in counters mode, thread
  CPU time in CPU-time mode. Ranks within 5% of each other form a work
  group; when groups follow a rule (a root that works alone) they are kept,
  otherwise the phase is one group. A group's total work over its ranks
  and repetitions is held constant (Eq. 1-2; the median of the measured
  totals, robust to one noisy run) and redistributed: work per
  rank at P = total / (weight(P) x ranks in the group at P) (Eq. 3). The
  spread of the measured totals is reported: it is what the compute
  model's IPT checks. Within a repetition, each slot's burst gets the
  share of the rank's work it had in the traces.

``model.logical_trace(P, path)`` writes the trace (:mod:`logical_model.writer`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Sequence

import networkx as nx
import numpy as np
from signature._files import write_text_atomic

from signature._text import table
from signature.errors import ExtrapolationError, SigexError, TraceFormatError
from signature.model import Signature
from signature.trace import OP_CODE, OPS

from . import modelsearch as search
from .rules import Grid, Observation, PeerRule, infer_peer, infer_root
from .topology import dims_create

__all__ = ["build", "from_traces", "read_signatures", "trace_files", "grid_of", "LogicalModel", "PhaseModel", "SlotModel",
           "WorkGroup", "ModelError", "GridPower"]


class ModelError(SigexError):
    """The signatures cannot be related or modelled (names the phase and P).

    Exit status 2: the set of runs given must change (more P, one program, one grid)."""

    exit_code = 2


P2P_OPS = frozenset(OP_CODE[n] for n in (
    "Send", "Ssend", "Bsend", "Rsend", "Recv", "Isend", "Issend", "Ibsend", "Irsend", "Irecv",
    "Sendrecv", "Sendrecv_replace", "Isendrecv", "Isendrecv_replace"))
POST_OPS = frozenset(OP_CODE[n] for n in (
    "Isend", "Issend", "Ibsend", "Irsend", "Irecv", "Isendrecv", "Isendrecv_replace"))
WAIT_OPS = frozenset(OP_CODE[n] for n in ("Wait", "Waitall", "Waitany", "Waitsome"))
#: Calls the replay takes from captured traces but the model does not extrapolate yet:
#: a phase that has them is refused, naming the first.
_NOT_EXTRAPOLATED = (
    ([OP_CODE[n] for n in OPS if "eighbor_" in n],
     "neighbourhood collectives are replayed from captured traces but not extrapolated yet "
     "(their topology at another P is not modelled)"),
    ([OP_CODE[n] for n in OPS if n.startswith("Win_") or n in (
        "Put", "Get", "Accumulate", "Get_accumulate", "Fetch_and_op", "Compare_and_swap", "Rput",
        "Rget", "Raccumulate", "Rget_accumulate")],
     "one-sided communication is replayed from captured traces but not extrapolated yet"),
)
ROOTED = frozenset(OP_CODE[n] for n in ("Bcast", "Reduce", "Gather", "Gatherv", "Scatter", "Scatterv",
                                        "Ibcast", "Ireduce", "Igather", "Igatherv", "Iscatter",
                                        "Iscatterv"))
COMM_NONE, COMM_WORLD, COMM_CART = -1, 0, 1


# ---- volume models -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class GridPower:
    """bytes = c * dims_k(P)^e: a volume that follows one process-grid dimension."""

    c: float
    k: int
    e: int
    ndims: int
    name: str = "bytes"

    kind = "grid"

    def predict(self, P):
        P = np.atleast_1d(np.asarray(P, np.int64))
        d = np.array([dims_create(int(p), self.ndims)[self.k] for p in P], float)
        return self.c * d ** self.e

    def formula(self) -> str:
        return f"{self.c:.6g} * dims{self.k}(P)^{self.e}  (dims = MPI_Dims_create(P, {self.ndims}))"

    @property
    def stats(self) -> dict[str, float]:
        return {"r2": 1.0, "exact": True}

    def describe(self) -> str:
        return f"{self.formula()}  [exact on every traced P]"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "grid", "c": self.c, "k": self.k, "e": self.e, "ndims": self.ndims,
                "name": self.name}


def _short(problems: Sequence[str], width: int = 160) -> str:
    """The first of a phase's problems, cut to ``width`` characters, and how many more there are."""
    first = problems[0] if len(problems[0]) <= width else problems[0][:width - 3] + "..."
    return first + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")


def _load_quantity(d: dict[str, Any] | None):
    if d is None:
        return None
    if d.get("kind") == "grid":
        return GridPower(c=d["c"], k=d["k"], e=d["e"], ndims=d["ndims"], name=d.get("name", "bytes"))
    return search.load_model(d)


def _fit_volume(Ps: np.ndarray, y: np.ndarray, grid: Grid | None, name: str):
    """Exact grid-dimension power when there is one, else the model search."""
    Ps, y = np.asarray(Ps, np.int64), np.asarray(y, float)
    if np.all(y == y[0]):
        return search.fit(Ps, y, name=name)
    if grid is not None and np.all(y > 0):
        for k in range(grid.ndims):
            d = np.array([dims_create(int(p), grid.ndims)[k] for p in Ps], float)
            for e in (-1, -2, 1, 2):
                c = y * d ** (-e)
                if np.all(np.abs(c - c[0]) <= 1e-9 * abs(c[0])):
                    return GridPower(c=float(c[0]), k=k, e=e, ndims=grid.ndims, name=name)
    return search.fit(Ps, y, name=name, positive=True)


def _predict_scalar(model, P: int) -> float:
    return float(np.asarray(model.predict(np.array([P]))).reshape(-1)[0])


# ---- slots ---------------------------------------------------------------------------
@dataclasses.dataclass
class SlotModel:
    """One event of a phase repetition, with the rules that place it at any P."""

    key: str
    op: int
    tag: int
    comm: int  # COMM_NONE, COMM_WORLD or COMM_CART
    everywhere: bool  # every rank has it (else: the ranks its peer rule reaches)
    peer: PeerRule | None = None
    recv_peer: PeerRule | None = None
    root: PeerRule | None = None
    bytes: Any = None
    recv_bytes: Any = None
    work_share: float = 0.0
    problem: str | None = None

    def describe(self) -> str:
        parts = [OPS[self.op]]
        if self.peer is not None:
            parts.append(("to " if self.op not in (OP_CODE["Recv"], OP_CODE["Irecv"]) else "from ")
                         + self.peer.describe())
        if self.recv_peer is not None:
            parts.append("from " + self.recv_peer.describe())
        if self.root is not None:
            parts.append("root " + self.root.describe())
        if self.tag >= 0:
            parts.append(f"tag {self.tag}")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "op": OPS[self.op], "tag": self.tag, "comm": self.comm,
                "everywhere": self.everywhere,
                "peer": self.peer.to_dict() if self.peer else None,
                "recv_peer": self.recv_peer.to_dict() if self.recv_peer else None,
                "root": self.root.to_dict() if self.root else None,
                "bytes": self.bytes.to_dict() if self.bytes is not None else None,
                "recv_bytes": self.recv_bytes.to_dict() if self.recv_bytes is not None else None,
                "work_share": self.work_share, "problem": self.problem}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SlotModel":
        rule = lambda x: PeerRule.from_dict(x) if x else None  # noqa: E731
        return cls(key=d["key"], op=OP_CODE[d["op"]], tag=int(d["tag"]), comm=int(d["comm"]),
                   everywhere=bool(d["everywhere"]), peer=rule(d["peer"]),
                   recv_peer=rule(d["recv_peer"]), root=rule(d["root"]),
                   bytes=_load_quantity(d["bytes"]), recv_bytes=_load_quantity(d["recv_bytes"]),
                   work_share=float(d["work_share"]), problem=d.get("problem"))


@dataclasses.dataclass
class WorkGroup:
    """Ranks with similar work; their total over ranks and repetitions is constant (Eq. 2).

    A lone rank (a root, a corner) whose total is not constant but whose work stays a
    fixed multiple of the other ranks' (a corner of a sweep does the same block as
    everyone, only without one receive) keeps that multiple instead: ``share`` is its
    per-rank work over the other group's, chosen when the measured shares spread less
    than the measured totals.
    """

    members: PeerRule | None  # None: every rank not in another group
    total: float  # Eq. 2's TotalIG: work x weight summed over the group's ranks
    measured: dict[int, float]  # P -> measured total
    share: float | None = None  # per-rank work / the last group's, when that is what holds
    shares: dict[int, float] = dataclasses.field(default_factory=dict)  # P -> measured share

    @property
    def spread(self) -> float:
        """(max - min) / mean of the measured totals: how constant Eq. 2's total is."""
        return _spread(self.measured)

    def to_dict(self) -> dict[str, Any]:
        d = {"members": self.members.to_dict() if self.members else None, "total": self.total,
             "measured": {str(k): v for k, v in self.measured.items()}}
        if self.shares:
            d["share"] = self.share
            d["shares"] = {str(k): v for k, v in self.shares.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "WorkGroup":
        return cls(members=PeerRule.from_dict(d["members"]) if d["members"] else None,
                   total=float(d["total"]), measured={int(k): float(v) for k, v in d["measured"].items()},
                   share=None if d.get("share") is None else float(d["share"]),
                   shares={int(k): float(v) for k, v in d.get("shares", {}).items()})


def _spread(values: dict[int, float]) -> float:
    v = np.array(list(values.values()))
    return float((v.max() - v.min()) / v.mean()) if v.size and v.mean() > 0 else 0.0


@dataclasses.dataclass
class PhaseModel:
    """Phase k at every P: its slots, weight model and work groups."""

    id: int
    kind: str
    pattern: str
    weight: Any  # fitted model of the weight
    slots: list[SlotModel]
    groups: list[WorkGroup]
    measured_weights: dict[int, int]
    problems: list[str]  # reasons the phase cannot be extrapolated
    notes: list[str] = dataclasses.field(default_factory=list)  # doubts that do not block it

    @property
    def extrapolable(self) -> bool:
        return not self.problems

    def weight_at(self, P: int) -> int:
        return max(1, int(round(_predict_scalar(self.weight, P))))

    def group_of(self, ranks: np.ndarray, P: int) -> np.ndarray:
        """Work-group index of every rank (the last group takes everyone left)."""
        g = np.full(len(ranks), len(self.groups) - 1, np.int64)
        for i, grp in enumerate(self.groups[:-1]):
            g[(grp.members(ranks, P) == ranks) & (g == len(self.groups) - 1)] = i
        return g

    def work_per_rank(self, P: int, ranks: np.ndarray | None = None) -> np.ndarray:
        """Eq. 3: each rank's work per repetition at P."""
        ranks = np.arange(P) if ranks is None else np.asarray(ranks, np.int64)
        w = self.weight_at(P)
        if len(self.groups) == 1:
            return np.full(len(ranks), self.groups[0].total / (w * P))
        g_all = self.group_of(np.arange(P), P)
        sizes = np.bincount(g_all, minlength=len(self.groups))
        per = np.array([grp.total for grp in self.groups]) / (w * np.maximum(sizes, 1))
        per = np.array([per[-1] * grp.share if grp.share is not None else per[i]
                        for i, grp in enumerate(self.groups)])
        g = g_all[ranks] if len(ranks) != P else g_all
        return per[g]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "pattern": self.pattern,
                "weight": self.weight.to_dict(), "slots": [s.to_dict() for s in self.slots],
                "groups": [g.to_dict() for g in self.groups],
                "measured_weights": {str(k): v for k, v in self.measured_weights.items()},
                "problems": list(self.problems), "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PhaseModel":
        return cls(id=int(d["id"]), kind=d["kind"], pattern=d["pattern"],
                   weight=_load_quantity(d["weight"]),
                   slots=[SlotModel.from_dict(s) for s in d["slots"]],
                   groups=[WorkGroup.from_dict(g) for g in d["groups"]],
                   measured_weights={int(k): int(v) for k, v in d["measured_weights"].items()},
                   problems=list(d["problems"]), notes=list(d.get("notes", [])))


# ---- the model -----------------------------------------------------------------------
@dataclasses.dataclass
class LogicalModel:
    """An application's phases as functions of P; writes its logical trace for any P."""

    app: str | None
    work_mode: str  # "cpu-time", "counters", or "flops" (imported SimGrid traces)
    work_unit: str  # "s" (thread CPU seconds) or "instructions"
    Ps: list[int]
    workload_label: str | None
    workload_value: str | None
    grid: Grid | None
    phases: list[PhaseModel]
    sources: list[str]
    #: MPI calls the signature runs made that sigex does not model, one line each
    #: ("P=16: MPI_File_write_all called 240 times ..."): they follow the model into
    #: every report.
    notes: list[str] = dataclasses.field(default_factory=list)

    # ---- use ---------------------------------------------------------------------
    def check_target(self, P: int) -> None:
        if not isinstance(P, (int, np.integer)) or P < 1:
            raise ExtrapolationError(f"target P must be a positive integer, got {P!r}")
        bad = [ph for ph in self.phases if ph.problems]
        if bad:
            err = ExtrapolationError(
                f"{self.app}: cannot write a logical trace, {len(bad)} phase(s) not extrapolable: "
                + "; ".join(f"phase {ph.id}: {_short(ph.problems)}" for ph in bad[:5])
                + (f"; and {len(bad) - 5} more phases" if len(bad) > 5 else ""))
            # every problem of every phase, for a file the caller names (sigex: --explain)
            err.detail = "\n".join(f"phase {ph.id}: {pr}" for ph in bad for pr in ph.problems)
            raise err

    def weights(self, P: int) -> list[int]:
        return [ph.weight_at(P) for ph in self.phases]

    def events(self, P: int, ranks: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Every event of ``ranks`` (default: all) at P, phase by phase: columns rank,
        op, peer, recv_peer, root, tag, comm, bytes, recv_bytes, work, phase, slot; sorted
        by rank, then phase, then slot order. Vectorised over ranks."""
        from .writer import generate
        return generate(self, P, np.arange(P) if ranks is None else np.asarray(ranks, np.int64))

    def logical_trace(self, P: int, path: str | Path, *, overwrite: bool = False,
                      block: int = 65536, progress=None) -> Path:
        """Write the logical trace for P (HDF5, the captured-trace schema plus phases)."""
        from .writer import write_logical_trace
        return write_logical_trace(self, P, path, overwrite=overwrite, block=block, progress=progress)

    # ---- text ----------------------------------------------------------------------
    def describe(self, target: int | None = None, *, max_slots: int | None = None,
                 max_problems: int | None = None) -> str:
        """The model as text: per phase its weight, slot table, work groups, problems and notes.
        ``max_slots``/``max_problems``: show at most that many per phase and say how many are
        left out (a real application's phases can have thousands of slots)."""
        mode = {"counters": "counters mode (work = instructions)",
                "flops": "flops mode (work = flops charged in a SimGrid trace, as seconds at the host speed)"
                }.get(self.work_mode, "CPU-time mode (work = thread CPU time)")
        grid = (f"{self.grid.ndims}-D process grid from MPI_Dims_create, periods "
                f"{list(self.grid.periods)}" if self.grid else "no Cartesian grid")
        out = [f"logical model of {self.app or '?'} from P = {', '.join(map(str, self.Ps))} "
               f"({self.workload_label}={self.workload_value}); {mode}; {grid}"]
        for ph in self.phases:
            out.append("")
            status = "OK" if ph.extrapolable else "NOT EXTRAPOLABLE"
            w_meas = ", ".join(f"{w}@{p}" for p, w in sorted(ph.measured_weights.items()))
            out.append(f"phase {ph.id} ({ph.kind}) {ph.pattern}   [{status}]")
            out.append(f"  weight   {ph.weight.formula()}   measured {w_meas}"
                       + (f"   -> {ph.weight_at(target)} at P={target}" if target else ""))
            rows = []
            shown = ph.slots if max_slots is None else ph.slots[:max_slots]
            for i, s in enumerate(shown):
                vol = s.bytes.formula() if s.bytes is not None else "-"
                if s.recv_bytes is not None and s.bytes is None:
                    vol = s.recv_bytes.formula()
                rows.append((i, s.describe(), vol, f"{100 * s.work_share:.0f}%",
                             s.problem or ""))
            out.append("  " + table(("slot", "event and rule", "bytes", "work", "problem"), rows,
                                    align="rllrl").replace("\n", "\n  "))
            if len(shown) < len(ph.slots):
                out.append(f"  ... and {len(ph.slots) - len(shown)} more slots")
            unit = self.work_unit
            if target:  # per rank at the target, once per phase (P values each)
                work_at, group_at = ph.work_per_rank(target), ph.group_of(np.arange(target), target)
            for gi, g in enumerate(ph.groups):
                who = f"ranks = {g.members.describe()}" if g.members else "all other ranks" \
                    if len(ph.groups) > 1 else "all ranks"
                if g.share is not None:
                    line = (f"  work group {gi}: {who}; {g.share:.4g} x the other ranks' work (measured "
                            f"shares vary {100 * _spread(g.shares):.1f}%, totals {100 * g.spread:.1f}%)")
                else:
                    line = (f"  work group {gi}: {who}; total {g.total:.4g} {unit} (Eq. 2), measured "
                            f"totals vary {100 * g.spread:.1f}%")
                if target:
                    mine = group_at == gi
                    if mine.any():
                        line += f"; per rank at P={target}: {work_at[mine].mean():.4g} {unit}"
                out.append(line)
            probs = ph.problems if max_problems is None else ph.problems[:max_problems]
            for pr in probs:
                out.append(f"  problem: {pr}")
            if len(probs) < len(ph.problems):
                out.append(f"  ... and {len(ph.problems) - len(probs)} more problems")
            for note in ph.notes:
                out.append(f"  note: {note}")
        if self.notes:
            out += ["", "not modelled (calls the signature runs made that sigex does not model):"]
            out += [f"  {n}" for n in self.notes]
        return "\n".join(out)

    # ---- JSON ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"format": 1, "kind": "sigex-logical-model", "app": self.app,
                "work_mode": self.work_mode, "work_unit": self.work_unit, "Ps": self.Ps,
                "workload_label": self.workload_label, "workload_value": self.workload_value,
                "grid": ({"ndims": self.grid.ndims, "periods": list(self.grid.periods)}
                         if self.grid else None),
                "phases": [p.to_dict() for p in self.phases], "sources": self.sources,
                "notes": self.notes}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LogicalModel":
        if d.get("kind") != "sigex-logical-model" or d.get("format") != 1:
            raise TraceFormatError("not a sigex logical model (format 1)")
        g = d["grid"]
        return cls(app=d["app"], work_mode=d["work_mode"], work_unit=d["work_unit"],
                   Ps=[int(p) for p in d["Ps"]], workload_label=d["workload_label"],
                   workload_value=d["workload_value"],
                   grid=Grid(int(g["ndims"]), tuple(bool(x) for x in g["periods"])) if g else None,
                   phases=[PhaseModel.from_dict(p) for p in d["phases"]], sources=list(d["sources"]),
                   notes=list(d.get("notes", ())))

    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        return write_text_atomic(path, json.dumps(self.to_dict(), indent=1), overwrite=overwrite)

    @classmethod
    def load(cls, path: str | Path) -> "LogicalModel":
        path = Path(path)
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError) as err:
            raise TraceFormatError(f"{path}: cannot read the logical model ({err})") from err


# ---- building ------------------------------------------------------------------------
def _comm_kind(comm_ids: np.ndarray, cart_id: int | None) -> np.ndarray:
    out = np.full(len(comm_ids), 99, np.int64)  # other communicators: not modelled
    out[comm_ids < 0] = COMM_NONE
    out[comm_ids == 0] = COMM_WORLD
    if cart_id is not None:
        out[comm_ids == cart_id] = COMM_CART
    return out


def _slot_keys(op, peer, rpeer, tag, comm, rank, P, grid_dims, grid_periods) -> list[tuple]:
    """One rank's events of a repetition -> slot keys (occurrence-numbered)."""
    keys, count = [], {}

    def where(q: int, c: int) -> tuple:
        if q < 0:
            return ("null",) if q == -3 else ("-",)
        if c == COMM_CART and grid_dims is not None:
            a = np.unravel_index(rank, grid_dims)
            b = np.unravel_index(q, grid_dims)
            disp = [int(y - x) for x, y in zip(a, b)]
            for d, n in enumerate(grid_dims):
                if grid_periods[d] and abs(disp[d]) > n // 2:
                    disp[d] -= int(np.sign(disp[d])) * n
            return ("grid", *disp)
        d = (q - rank) % P
        d = d - P if d > P // 2 else d
        return ("near", d) if abs(d) == 1 and P > 2 else ("far",)

    for i in range(len(op)):
        base = (int(op[i]), int(tag[i]), int(comm[i]), where(int(peer[i]), int(comm[i])),
                where(int(rpeer[i]), int(comm[i])))
        n = count.get(base, 0)
        count[base] = n + 1
        keys.append(base + (n,))
    return keys


def _key_text(key: tuple) -> str:
    op, tag, comm, w, rw, n = key
    return f"{OPS[op]}/{tag}/{comm}/{'.'.join(map(str, w))}/{'.'.join(map(str, rw))}/{n}"


def _relate(sigs: Sequence[Signature]) -> None:
    """Functional similarity: the same phase sequence at every P, or a clear refusal."""
    base = sigs[0]
    for s in sigs[1:]:
        a = [(p.kind, p.ops) for p in base.phases]
        b = [(p.kind, p.ops) for p in s.phases]
        if a == b:
            continue
        for i in range(max(len(a), len(b))):
            if i >= len(a) or i >= len(b) or a[i] != b[i]:
                pa = f"{a[i][0]} {', '.join(a[i][1])}" if i < len(a) else "nothing"
                pb = f"{b[i][0]} {', '.join(b[i][1])}" if i < len(b) else "nothing"
                raise ModelError(
                    f"phases do not correspond across P: phase {i} is '{pa}' at P={base.nprocs} "
                    f"({base.source}) but '{pb}' at P={s.nprocs} ({s.source}). Are these runs of "
                    "the same program with the same options?")


def _groups(per_p: dict[int, np.ndarray], weights: dict[int, int]) -> tuple[list[WorkGroup], str | None]:
    """Work groups (Eq. 1-3): ranks within 5% of each other; kept only when the split
    follows a rule at every P (a root that works alone), else one group."""
    note = None
    split_rules = []
    ok = True
    for P, w in per_p.items():
        if len(w) < 3 or not np.all(np.isfinite(w)):
            ok = False
            break
        med = np.median(w)
        odd = np.flatnonzero(np.abs(w - med) > 0.05 * max(med, 1e-300))
        if len(odd) != 1:
            ok = False
            break
        split_rules.append((P, int(odd[0])))
    if ok and split_rules:
        rule = infer_root(dict(split_rules))
        if rule is not None:
            lone = {P: float(per_p[P][r] * weights[P]) for P, r in split_rules}
            rest = {P: float((per_p[P].sum() - per_p[P][r]) * weights[P]) for P, r in split_rules}
            shares = {P: float(per_p[P][r] / ((per_p[P].sum() - per_p[P][r]) / (P - 1)))
                      for P, r in split_rules if per_p[P].sum() > per_p[P][r]}
            share = None
            if len(shares) == len(split_rules) and _spread(shares) < _spread(lone):
                share = float(np.median(list(shares.values())))
            return ([WorkGroup(rule, float(np.median(list(lone.values()))), lone, share,
                               shares if share is not None else {}),
                     WorkGroup(None, float(np.median(list(rest.values()))), rest)], None)
    spread = max(float((w.max() - w.min()) / max(np.median(w), 1e-300)) for w in per_p.values())
    if spread > 0.05:
        note = f"work differs by up to {100 * spread:.0f}% across ranks with no rule; modelled as one group"
    tot = {P: float(w.sum() * weights[P]) for P, w in per_p.items()}
    return [WorkGroup(None, float(np.median(list(tot.values()))), tot)], note


def build(signatures: Sequence[Signature], *, p_rule: str | None = None,
          grids: dict[int, tuple[tuple[int, ...], tuple[bool, ...], int]] | None = None) -> LogicalModel:
    """Learn the logical model of one application from its signatures at several P.

    Parameters
    ----------
    signatures : sequence of Signature
        One per traced P (at least 2; 3 or more for trustworthy fits), same program
        and workload.
    p_rule : str, optional
        The P values the application accepts ("squares", "powers_of_two", ...):
        lets weights use the paper's displacement-index fit.
    grids : dict, optional
        Per P: (dims, periods, communicator id) of the Cartesian communicator the
        run used (:func:`grid_of` reads it from a trace). Without it, events on
        other communicators than MPI_COMM_WORLD are not modelled.
    """
    sigs = sorted(signatures, key=lambda s: s.nprocs)
    if len(sigs) < 2:
        raise ModelError(f"need signatures at 2 or more P to model, got {len(sigs)}")
    Ps = [s.nprocs for s in sigs]
    if len(set(Ps)) != len(Ps):
        raise ModelError(f"two signatures at the same P ({Ps}); give one run per P")
    apps = {s.app for s in sigs}
    wl = {(s.workload_label, s.workload_value) for s in sigs}
    if len(apps) > 1 or len(wl) > 1:
        raise ModelError("signatures of different programs or workloads cannot be modelled together: "
                         + ", ".join(f"P={s.nprocs}: {s.app} {s.workload_label}={s.workload_value} "
                                     f"({s.source})" for s in sigs))
    modes = {s.work_mode for s in sigs}
    if len(modes) > 1:
        raise ModelError(f"signatures mix work modes {sorted(modes)}; trace every run on machines "
                         "of one kind")
    mode = modes.pop()
    _relate(sigs)
    grids = grids or {}
    grid = None
    if grids:
        if set(grids) != set(Ps):
            raise ModelError("a Cartesian grid is recorded at some P only: "
                             f"{sorted(grids)} of {Ps}")
        nd = {len(g[0]) for g in grids.values()}
        per = {g[1] for g in grids.values()}
        if len(nd) != 1 or len(per) != 1:
            raise ModelError(f"the process grid changes shape across P: {grids}")
        for P, (dims, _, _) in grids.items():
            if tuple(dims) != dims_create(P, len(dims)):
                raise ModelError(f"P={P}: the Cartesian grid {dims} is not MPI_Dims_create's "
                                 f"{dims_create(P, len(dims))}; sigex cannot extrapolate a "
                                 "hand-chosen grid")
        grid = Grid(nd.pop(), per.pop())
    work_col, unit = ("instr_mean", "instructions") if mode == "counters" else ("cpu_mean", "s")
    cost_col = "instr" if mode == "counters" else "cpu"

    phases = []
    for k, ref in enumerate(sigs[0].phases):
        problems: list[str] = []
        notes: list[str] = []
        # ---- slots of every rank at every P, merged into one order ------------------
        seqs: dict[tuple, None] = {}
        per_p_events = {}
        for s in sigs:
            ph = s.phases[k]
            T, offs = ph.template, ph.template_offsets
            P = s.nprocs
            gd = grids.get(P)
            comm = _comm_kind(T["comm"], gd[2] if gd else None)
            if np.any(comm == 99):
                bad = int(np.flatnonzero(comm == 99)[0])
                problems.append(f"P={P}: events on a communicator other than MPI_COMM_WORLD or "
                                f"the Cartesian grid (template event {bad}) are not modelled")
            for ops, what in _NOT_EXTRAPOLATED:
                hit = np.flatnonzero(np.isin(T["op"], ops))
                if hit.size and not any(what in p for p in problems):
                    problems.append(f"{OPS[int(T['op'][hit[0]])]}: {what}")
            keys_all = []
            for r in range(P):
                a, b = int(offs[r]), int(offs[r + 1])
                keys = _slot_keys(T["op"][a:b], T["peer"][a:b], T["recv_peer"][a:b], T["tag"][a:b],
                                  comm[a:b], r, P, gd[0] if gd else None, gd[1] if gd else None)
                keys_all.append(keys)
                seqs[tuple(keys)] = None
            per_p_events[P] = (keys_all, comm)
        g = nx.DiGraph()
        first_seen: dict[tuple, int] = {}
        for seq in seqs:
            for key in seq:
                first_seen.setdefault(key, len(first_seen))
                g.add_node(key)
            g.add_edges_from(zip(seq[:-1], seq[1:]))
        try:
            order = list(nx.lexicographical_topological_sort(g, key=lambda n: first_seen[n]))
        except nx.NetworkXUnfeasible:
            problems.append("ranks order the phase's events differently (no common order); "
                            "its events cannot be placed at a new P")
            order = sorted(first_seen, key=first_seen.get)
        index = {key: i for i, key in enumerate(order)}

        # ---- per slot: observations at every P -----------------------------------------
        n_slots = len(order)
        obs = {i: [] for i in range(n_slots)}  # (P, ranks, event indices into template)
        share_sum = np.zeros(n_slots)
        share_n = np.zeros(n_slots)
        for s in sigs:
            ph = s.phases[k]
            P = s.nprocs
            keys_all, comm = per_p_events[P]
            offs = ph.template_offsets
            cost = ph.template_cost.get(cost_col)
            rank_ev = {i: ([], []) for i in range(n_slots)}
            for r in range(P):
                a = int(offs[r])
                if cost is not None:
                    tot = cost[a:int(offs[r + 1])].sum()
                for j, key in enumerate(keys_all[r]):
                    i = index[key]
                    rank_ev[i][0].append(r)
                    rank_ev[i][1].append(a + j)
                    if cost is not None and tot > 0:
                        share_sum[i] += cost[a + j] / tot
                        share_n[i] += 1
            for i in range(n_slots):
                obs[i].append((P, np.array(rank_ev[i][0], np.int64), np.array(rank_ev[i][1], np.int64),
                               ph, comm))
        slots = []
        for i, key in enumerate(order):
            op, tag, ck = key[0], key[1], key[2]
            slot = SlotModel(key=_key_text(key), op=op, tag=tag,
                             comm=ck if ck in (COMM_NONE, COMM_WORLD, COMM_CART) else COMM_WORLD,
                             everywhere=True,
                             work_share=float(share_sum[i] / share_n[i]) if share_n[i] else 0.0)
            o_list = obs[i]

            def column(name, o):
                return o[3].template[name][o[2]]

            if op in P2P_OPS and key[3][0] not in ("null", "-"):
                slot.everywhere = False
                rule = infer_peer([Observation(o[0], o[1], column("peer", o)) for o in o_list],
                                  grid if ck == COMM_CART else None)
                if rule is None:
                    slot.problem = "no communication rule reproduces the peers at every P"
                slot.peer = rule
                if key[4][0] not in ("null", "-"):
                    rrule = infer_peer([Observation(o[0], o[1], column("recv_peer", o)) for o in o_list],
                                       grid if ck == COMM_CART else None)
                    if rrule is None:
                        slot.problem = "no rule reproduces the receive peers at every P"
                    elif rule is not None and not all(
                            np.array_equal(rrule(np.arange(o[0]), o[0], grid) >= 0,
                                           rule(np.arange(o[0]), o[0], grid) >= 0) for o in o_list):
                        slot.problem = "send and receive sides exist on different ranks"
                    slot.recv_peer = rrule
            else:
                missing = [o[0] for o in o_list if len(o[1]) != o[0]]
                if missing:
                    slot.problem = (f"only some ranks call {OPS[op]} (at P={missing[0]}) and no rule "
                                    "says which")
                if op in ROOTED:
                    roots = {}
                    for o in o_list:
                        rv = np.unique(column("root", o))
                        if len(rv) != 1:
                            slot.problem = f"ranks disagree on the root at P={o[0]}"
                            break
                        roots[o[0]] = int(rv[0])
                    else:
                        slot.root = infer_root(roots)
                        if slot.root is None:
                            slot.problem = f"no rule gives the root from P ({roots})"
            if slot.problem:
                problems.append(f"slot {i} ({OPS[op]}): {slot.problem}")
            # ---- volumes ------------------------------------------------------------------
            for col, attr in (("bytes", "bytes"), ("recv_bytes", "recv_bytes")):
                Pv, yv = [], []
                for o in o_list:
                    if len(o[1]):
                        Pv.append(o[0])
                        yv.append(float(column(col, o).mean()))
                if len(set(Pv)) >= 2 and any(yv):
                    setattr(slot, attr, _fit_volume(np.array(Pv), np.array(yv),
                                                    grid if ck == COMM_CART else None,
                                                    f"phase {k} slot {i} {col}"))
                elif len(set(Pv)) == 1 and any(yv):
                    problems.append(f"slot {i} ({OPS[op]}): seen at one P only; its volume cannot be fitted")
            slots.append(slot)

        # ---- weight and work ------------------------------------------------------------
        weights = {s.nprocs: s.phases[k].weight for s in sigs}
        Pw = np.array(sorted(weights))
        Ww = np.array([weights[p] for p in Pw], float)
        wmodel = None
        if p_rule and p_rule not in ("any",) and hasattr(search, "choose"):
            wmodel = search.choose(Pw, Ww, p_rule=p_rule, name=f"weight of phase {k}")
        if wmodel is None:
            wmodel = search.fit(Pw, Ww, name=f"weight of phase {k}")
        work = {s.nprocs: np.asarray(s.phases[k].stats[work_col], float) for s in sigs}
        if any(not np.all(np.isfinite(w)) for w in work.values()):
            problems.append(f"the traces have no {unit} for this phase")
            groups = [WorkGroup(None, 0.0, {p: 0.0 for p in work})]
        else:
            groups, note = _groups(work, weights)
            if note:
                notes.append(note)
        phases.append(PhaseModel(id=ref.id, kind=ref.kind, pattern=ref.pattern, weight=wmodel,
                                 slots=slots, groups=groups, measured_weights=weights,
                                 problems=problems, notes=notes))
    return LogicalModel(app=sigs[0].app, work_mode=mode, work_unit=unit, Ps=Ps,
                        workload_label=sigs[0].workload_label, workload_value=sigs[0].workload_value,
                        grid=grid, phases=phases, sources=[s.source or "?" for s in sigs],
                        notes=[f"P={s.nprocs}: {n}" for s in sigs for n in s.unmodelled])


def grid_of(trace) -> tuple[tuple[int, ...], tuple[bool, ...], int] | None:
    """The Cartesian communicator of a trace that spans every rank in world order:
    (dims, periods, communicator id), or None."""
    comms = trace.comms
    found = None
    for c in range(len(comms)):
        cart = comms.cartesian(c)
        if cart is None:
            continue
        members = comms.members_of(c)
        if len(members) == trace.nprocs and np.array_equal(members, np.arange(trace.nprocs)):
            if found is not None and found[:2] != cart:
                return None  # two different grids: not modelled
            found = (cart[0], cart[1], c)
    return found


def trace_files(source: str | Path | Sequence[str | Path]) -> list[Path]:
    """The signature traces named by ``source``: a folder (its ``*.h5`` files, not
    its subfolders) or a list of files."""
    if not isinstance(source, (str, Path)) and len(source) == 1:
        source = source[0]
    if isinstance(source, (str, Path)) and Path(source).is_dir():
        files = sorted(Path(source).glob("*.h5"))
        if not files:
            raise ModelError(f"{source}: no trace files (*.h5) in this folder; trace the "
                             "application at 3 or more P first (sigex trace -n P -o "
                             f"{source} -- ...)")
        return files
    items = [source] if isinstance(source, (str, Path)) else list(source)
    files = [Path(f) for f in items]
    for f in files:
        if not f.exists():
            raise ModelError(f"{f}: no such trace file or folder")
    return files


def read_signatures(source: str | Path | Sequence[str | Path], *, progress=None):
    """Load the signature traces named by ``source`` (see :func:`trace_files`) and extract
    their signatures, checking that they are runs of one program: (signatures, grids),
    ``grids`` as :func:`build` takes them (None without a Cartesian grid)."""
    from signature import extract, load_trace

    files = trace_files(source)
    sigs, grids = [], {}
    for i, f in enumerate(files):
        if progress:
            progress(f"reading {f} ({i + 1}/{len(files)})")
        trace = load_trace(f)
        if trace.meta.get("trace_kind", "captured") != "captured":
            raise ModelError(f"{f}: a {trace.meta['trace_kind']} trace, not a traced run; "
                             "model from the signature runs only")
        sigs.append(extract(trace))
        g = grid_of(trace)
        if g is not None:
            grids[trace.nprocs] = g
    apps = {(s.app, s.workload_label, s.workload_value) for s in sigs}
    if len(apps) > 1:
        raise ModelError("these traces are of different programs or workloads: "
                         + "; ".join(f"{s.source}: {s.app} {s.workload_label}={s.workload_value}"
                                     for s in sigs) + ". Give the runs of one application only.")
    if grids and len(grids) != len(sigs):
        missing = [s.source for s in sigs if s.nprocs not in grids]
        raise ModelError(f"some runs use a Cartesian grid and some do not ({', '.join(map(str, missing))} "
                         "do not): are these traces of one program?")
    return sigs, grids or None


def from_traces(source: str | Path | Sequence[str | Path], *, p_rule: str | None = None,
                progress=None) -> LogicalModel:
    """Load the signature traces of one application, extract their signatures and
    :func:`build` the logical model (the library side of ``sigex extrapolate``).

    Examples
    --------
    >>> model = from_traces("traces/stencil/")
    >>> model.weights(4096)
    [1, 360, 40, 1]
    """
    sigs, grids = read_signatures(source, progress=progress)
    if progress:
        progress(f"modelling {len(sigs)} signatures")
    return build(sigs, p_rule=p_rule, grids=grids)
