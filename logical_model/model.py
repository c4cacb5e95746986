"""The logical model: an application's phases as functions of P (Panadero et al. §2.2).

:func:`build` takes the signatures of one application at several P and
learns, per phase:

* **Functional similarity.** Phase k at one P is phase k at every P: the
  phase sequences must have the same length, kinds and op structure, or
  :class:`ModelError` says where they part.
* **Event slots.** Each rank's events of one repetition are keyed by
  (operation, tag, communicator) and occurrence, or, when the rules do not
  model every slot so, by (operation, tag, communicator, where the peer is,
  occurrence): the peer as a displacement
  on the process grid when the events use a Cartesian communicator, as +-1
  when it is a next-door rank (in the communicator's own ranks), else
  "far" (a rule decides). Keys a small P leaves open (MPI_PROC_NULL, rings
  of 2) join the slot they stand for. The slots of all ranks and all P are
  merged into one order (a topological sort of the orders the ranks use),
  or one per rank class (:data:`ORDER_CLASSES`: parity, the
  ends) when the ranks share none.
* **Communicators.** Duplicates of MPI_COMM_WORLD are the world; row,
  column and plane communicators are :class:`~logical_model.topology.SubGrid`
  layouts learned from their members at every P, and their slots' rules are
  in the communicator's ranks.
* **Communication rules.** Per slot, the peer (and a Sendrecv's source) as
  a :class:`~logical_model.rules.PeerRule` reproducing every rank at every
  traced P, which ranks have the event included (or call it with
  MPI_PROC_NULL); a collective's root as a rule of P. A declared grid's dims
  follow the first dims rule (:func:`~logical_model.topology.fit_dims_rules`)
  that gives them at every P. A slot no rule fits makes the phase not
  extrapolable, with the reason; nothing is guessed: rules, layouts, grids
  and volumes that fit every traced P as well as the chosen one are kept,
  and a target where they part is refused (:meth:`LogicalModel.undecided`,
  :meth:`LogicalModel.grid_problem`) unless ``--grid`` fixes the grid there
  (:meth:`LogicalModel.with_grid`).
* **Volumes.** Bytes per slot as a function of P, exact per rank: one model
  for every rank, or one for a rooted collective's root and one for the
  others; any other difference between ranks is refused. A volume is an
  exact product of process-grid dimension powers when the bytes follow the
  grid (a halo row is n / dims[1] values, which is no smooth function of P),
  else the shared model search (:mod:`logical_model.modelsearch`).
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

* **Statistical phases.** A phase whose calls per rank no rule gives (an FFT's
  remap between bricks and pencils: each rank talks to the ranks whose pieces
  overlap its own) is modelled by expected values instead of refused
  (:mod:`logical_model.statistical`): runs of calls, channels between them, messages
  per rank and bytes per message regressed over P, exact on a grid dimension where
  they are at every traced P. Per-rank sizes that merely differ with no rule still
  refuse the phase. Reports call such a phase statistical, not exact.

``model.logical_trace(P, path)`` writes the trace (:mod:`logical_model.writer`).
``docs/logical-model.md`` describes all of it for users.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from signature._files import write_text_atomic

from signature._text import table
from signature.errors import ExtrapolationError, SigexError, TraceFormatError
from signature.model import Signature
from signature.trace import OP_CODE, OPS, PEER_ANY

from . import modelsearch as search
from . import onesided
from .rules import (ClassComm, ClassGrid, Grid, Observation, PeerRule, complement_members, infer_class_comm,
                    infer_class_grid, infer_members, infer_peer, infer_root, infer_within, on_traced_grid,
                    traced_grid_rules)
from .overlap import Remap, infer_remap
from .trees import SIDES as TREE_SIDES
from .trees import Tree, infer_trees
from .statistical import Space, StatisticalError, _ranks_text, channel_rows, comm_families, cross_rows, lex_topological
from .statistical import match as _match_messages
from .statistical import runs as _runs
from .topology import DimsRule, SubGrid, candidate_rules, dims_create, fit_dims_rules, infer_subgrid

__all__ = ["build", "from_traces", "read_signatures", "trace_files", "grid_of", "LogicalModel", "PhaseModel", "SlotModel", "GridCount",
           "WorkGroup", "ModelError", "GridPower", "ORDER_CLASSES", "Topologies"]


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
#: Calls the replay takes from captured traces but the model does not extrapolate: a phase
#: that has them is refused, naming the first (one-sided and neighbourhood calls the model
#: does place are in :mod:`logical_model.onesided`)
_NOT_EXTRAPOLATED = onesided.NOT_EXTRAPOLATED
#: calls with a peer rule: point to point, and one-sided calls with a target (onesided.py)
_PEER_OPS = P2P_OPS | onesided.TARGET_OPS
ROOTED = frozenset(OP_CODE[n] for n in ("Bcast", "Reduce", "Gather", "Gatherv", "Scatter", "Scatterv",
                                        "Ibcast", "Ireduce", "Igather", "Igatherv", "Iscatter",
                                        "Iscatterv"))
COMM_NONE, COMM_WORLD, COMM_CART, COMM_SUB = -1, 0, 1, 2
#: point-to-point calls that block until their partner has come (names, as phases list them)
_BLOCKING_P2P = frozenset(("Send", "Ssend", "Bsend", "Rsend", "Recv", "Sendrecv", "Sendrecv_replace"))
#: MPI_PROC_NULL as the tracer records it
PROC_NULL = -3
RECV_OPS = frozenset(OP_CODE[n] for n in ("Recv", "Irecv"))
#: receives that block the rank until the message comes
BLOCKING_RECV_OPS = frozenset(OP_CODE[n] for n in ("Recv", "Sendrecv", "Sendrecv_replace"))
#: a phase realised with its point-to-point calls deferred (:attr:`PhaseModel.deferred`):
#: each blocking call becomes its nonblocking form, and these calls (the phase's own
#: waits, polls and probes, communicators made and freed) are not realised, one Waitall
#: at the end of each rank's repetition completing every request
DEFERRED_OP = {OP_CODE[a]: OP_CODE[b] for a, b in (
    ("Send", "Isend"), ("Ssend", "Issend"), ("Bsend", "Ibsend"), ("Rsend", "Irsend"), ("Recv", "Irecv"),
    ("Sendrecv", "Isendrecv"), ("Sendrecv_replace", "Isendrecv_replace"))}
DEFERRED_DROP = WAIT_OPS | frozenset(OP_CODE[n] for n in (
    "Test", "Testall", "Testany", "Testsome", "Probe", "Iprobe", "Mprobe", "Improbe",
    # communicators made and freed (the trace's communicator table holds them; they move
    # no data and a replay does not wait on them): hpcc's final phase frees its row and
    # column communicators a number of times that differs between ranks
    "Comm_split", "Comm_split_type", "Comm_create", "Comm_create_group", "Comm_dup", "Cart_create",
    "Cart_sub", "Comm_free") if n in OP_CODE)


def _volume(model, P: int) -> int:
    return max(0, int(round(_predict_scalar(model, P)))) if model is not None else 0


# ---- volume models -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class GridPower:
    """bytes = c * prod_k dims_k(P)^e_k: a volume that follows the process-grid dimensions
    (a halo row is n / dims_1 values, a 3-D sub-domain's face n^2 / (dims_1 dims_2))."""

    c: float
    exps: tuple[int, ...]
    grid: Grid
    name: str = "bytes"

    kind = "grid"

    def predict(self, P):
        P = np.atleast_1d(np.asarray(P, np.int64))
        d = np.array([self.grid.dims(int(p)) for p in P], float).reshape(len(P), -1)
        return self.c * np.prod(d ** np.asarray(self.exps, float)[None, :], axis=1)

    def formula(self) -> str:
        rule = self.grid.rule.describe() if self.grid.rule else f"MPI_Dims_create(P, {self.grid.ndims})"
        terms = " * ".join(f"dims{k}(P)^{e}" for k, e in enumerate(self.exps) if e)
        return f"{self.c:.6g} * {terms}  (dims = {rule})"

    @property
    def stats(self) -> dict[str, float]:
        return {"r2": 1.0, "exact": True}

    def describe(self) -> str:
        return f"{self.formula()}  [exact on every traced P]"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "grid", "c": self.c, "exps": list(self.exps), "grid": self.grid.to_dict(),
                "name": self.name}


#: how a count follows one grid dimension d: the other ranks of a row (d - 1: a
#: redistribution among a pencil's ranks), the row (d), or whether the dimension is over
#: 1 or over 2 wide (an exchange made only then)
_COUNT_FORMS = {"d>1": lambda d: (d > 1).astype(float), "d-1": lambda d: d - 1, "d": lambda d: d,
                "d>2": lambda d: (d > 2).astype(float)}


@dataclasses.dataclass(frozen=True)
class GridCount:
    """calls = a * f(dims_k(P)) + b: a number of calls per rank that follows one process-grid
    dimension (f one of :data:`_COUNT_FORMS`), exact on every traced P."""

    a: float
    b: float
    k: int
    form: str
    grid: Grid
    name: str = "calls"
    #: None: exact on every traced P; else a least-squares fit of an expected value and
    #: its leave-one-out cross-validation error (mean relative)
    cv: float | None = None

    kind = "gridcount"

    def predict(self, P):
        P = np.atleast_1d(np.asarray(P, np.int64))
        d = np.array([self.grid.dims(int(p))[self.k] for p in P], float)
        return self.a * _COUNT_FORMS[self.form](d) + self.b

    def formula(self) -> str:
        rule = self.grid.rule.describe() if self.grid.rule else f"MPI_Dims_create(P, {self.grid.ndims})"
        f = {"d-1": f"(dims{self.k}(P) - 1)", "d": f"dims{self.k}(P)", "d>1": f"[dims{self.k}(P) > 1]",
             "d>2": f"[dims{self.k}(P) > 2]"}[self.form]
        return f"{self.a:.6g} * {f}" + (f" + {self.b:.6g}" if self.b else "") + f"  (dims = {rule})"

    @property
    def stats(self) -> dict[str, float]:
        return {"r2": 1.0, "exact": True} if self.cv is None else {"exact": False, "cv_error": self.cv}

    def describe(self) -> str:
        return f"{self.formula()}  " + ("[exact on every traced P]" if self.cv is None else
                                         f"[least squares, cross-validation error {100 * self.cv:.1f}%]")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "gridcount", "a": self.a, "b": self.b, "k": self.k, "form": self.form,
                "grid": self.grid.to_dict(), "name": self.name, "cv": self.cv}


def _key_groups(cols: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The rows of ``cols`` (equal-length integer columns) grouped by equal values: each
    row's group, and the groups' values column by column, in lexicographic order (what
    ``np.unique(axis=0, return_inverse=True)`` gives, by a lexsort of the columns: on the
    1 M keys of hpcc's realisation at P = 1,024, 4.6 s against its 13.6 s)."""
    n = len(cols[0])
    if not n:
        return np.zeros(0, np.int64), [np.zeros(0, np.int64) for _ in cols]
    order = np.lexsort(cols[::-1])
    new = np.zeros(n, bool)
    new[0] = True
    for c in cols:
        cs = c[order]
        new[1:] |= cs[1:] != cs[:-1]
    g = np.empty(n, np.int64)
    g[order] = np.cumsum(new) - 1
    return g, [c[order][new] for c in cols]


def _count_grids(grid: Grid | None) -> list[Grid]:
    """Grids a count may follow: the declared one, then 1-D (every rank) and the 2-D dims
    rules (pencils: an FFT's decomposition). Undeclared 3-D grids are not tried: with
    their many dimension products, three traced P would let too many fit by chance."""
    out = [grid] if grid is not None else []
    out.append(Grid(1, (False,), None))
    out += [Grid(2, (False, False), r) for r in candidate_rules(2)]
    return out


def _count_columns(Ps: np.ndarray, grids: Sequence[Grid]):
    """(grid, dimension, form, f(dims_k(P)) over ``Ps``) for every count form on every
    dimension of every grid that places each of ``Ps`` (the columns a count is fitted on)."""
    for g in grids:
        try:
            dims = np.array([g.dims(int(p)) for p in Ps], float)
        except ValueError:
            continue
        for kdim in range(g.ndims):
            for form, f in _COUNT_FORMS.items():
                yield g, kdim, form, f(dims[:, kdim])


def _exact_count(points: dict[int, float], grids: Sequence[Grid], name: str):
    """Calls per rank as :class:`GridCount`, exact on every traced P, on the first of
    ``grids`` where one is: proportional forms (b = 0) on any grid before offset ones;
    None where none is."""
    Ps = np.array(sorted(points))
    y = np.array([points[p] for p in Ps], float)
    if len(Ps) < 3 or np.all(y == y[0]):
        return None
    for offset in (False, True):
        for g, kdim, form, x in _count_columns(Ps, grids):
            if np.all(x == x[0]):
                continue
            A = np.stack([x, np.ones(len(x))], axis=1)
            if offset:
                (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
            else:
                a, b = float(x @ y / (x @ x)), 0.0
            a, b = round(a * 4) / 4, round(b * 4) / 4  # whole calls, or a share of ranks in quarters
            if a and np.all(np.abs(A @ (a, b) - y) <= 1e-6 * max(1.0, np.abs(y).max())):
                return GridCount(float(a), float(b), kdim, form, g, name)
    return None


def _exact_size(points: dict[int, float], grids: Sequence[Grid], name: str):
    """Bytes per call as an exact product of grid dimension powers on the first of
    ``grids`` where one is (the remap's pieces of a pencil); None where none is."""
    Ps = np.array(sorted(points))
    y = np.array([points[p] for p in Ps], float)
    if len(Ps) < 3 or np.all(y == y[0]) or not np.all(y > 0):
        return None
    for g in grids:
        try:
            d = np.array([g.dims(int(p)) for p in Ps], float)
        except ValueError:
            continue
        for exps in _GRID_EXPONENTS[g.ndims]:
            c = y / np.prod(d ** np.asarray(exps, float)[None, :], axis=1)
            if np.all(np.abs(c - c[0]) <= 1e-9 * abs(c[0])):
                return GridPower(c=float(c[0]), exps=tuple(exps), grid=g, name=name)
    return None


def _vote_grids(counts: list[dict], sizes: list[dict], grid: Grid | None) -> list[Grid]:
    """The grids of :func:`_count_grids`, those on which more of a phase's counts and sizes
    are exact first (two grids may each fit one quantity at the traced P; the one that
    explains the phase's other quantities as well is the program's)."""
    cands = _count_grids(grid)
    score = [sum(_exact_count(c, [g], "") is not None for c in counts)
             + sum(_exact_size(v, [g], "") is not None for v in sizes) for g in cands]
    # ties to the grid of fewer dimensions: its products are fewer, a fit on it less likely by chance
    return [g for _, i, g in sorted(zip(score, range(len(cands)), cands),
                                    key=lambda t: (-t[0], t[2].ndims, t[1]))]


def _regressed_count(points: dict[int, float], grids: Sequence[Grid], name: str) -> GridCount | None:
    """The expected calls per rank as a * f(dims_k(P)) + b by least squares on the grid
    dimension whose form cross-validates best (leave-one-out, mean relative error; a
    remap's peers grow with the pencils' width, not smoothly with P); None with fewer than
    3 points."""
    Ps = np.array(sorted(points))
    y = np.array([points[p] for p in Ps], float)
    if len(Ps) < 3:
        return None
    best = None
    for g, kdim, form, x in _count_columns(Ps, grids):
        A = np.stack([x, np.ones(len(x))], axis=1)
        if len(set(x)) < 2:
            continue
        errs = []
        for i in range(len(y)):  # folds whose other points span two widths
            keep = np.arange(len(y)) != i
            if len(set(x[keep])) < 2:
                continue
            coef, *_ = np.linalg.lstsq(A[keep], y[keep], rcond=None)
            errs.append(abs(A[i] @ coef - y[i]) / max(abs(y[i]), 1e-9))
        if errs:
            cv = float(np.mean(errs))
            if best is None or cv < best[0] - 1e-12:
                (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
                best = (cv, GridCount(float(a), float(b), kdim, form, g, name, cv))
    return best[1] if best else None


def _fit_count(points: dict[int, float], grids: Sequence[Grid], name: str):
    """Calls per rank over P: a constant, exact on a grid (:func:`_exact_count`), or
    else the expected value: by model search (:func:`_fit_mean`), or by least squares on
    a grid dimension (:func:`_regressed_count`) where that cross-validates better."""
    exact = _exact_count(points, grids, name)
    if exact is not None:
        return exact
    mean = _fit_mean(points, name)
    on_grid = _regressed_count(points, grids, name)
    if on_grid is not None and on_grid.cv < mean.stats.get("cv_error", np.inf):
        return on_grid
    return mean


def _fit_size(points: dict[int, float], grids: Sequence[Grid], name: str):
    """Bytes per call over P: exact on a grid (:func:`_exact_size`), else the expected
    value by model search."""
    return _exact_size(points, grids, name) or _fit_mean(points, name)


def _load_role(d: dict):
    """A communicator layout from JSON: a sub-grid, or the communicator of a class of ranks."""
    kind = d.get("kind")
    return ClassComm.from_dict(d) if kind == "class" else ClassGrid.from_dict(d) if kind == "class_grid" \
        else SubGrid.from_dict(d)


def _load_space(d: dict | None) -> Space | None:
    if d is None:
        return None
    return Space(role=_load_role(d["role"]) if d.get("role") else None, colour=d.get("colour"),
                 members=PeerRule.from_dict(d["members"]) if d.get("members") else None)


#: the space of a statistical run every rank makes
_EVERY_RANK = Space()


#: how the line naming the run that would decide a refusal begins (:meth:`LogicalModel.deciding_run`)
_DECIDING = "a run traced at P="
#: the largest P :meth:`LogicalModel.deciding_run` proposes, unless four times the largest
#: traced P is larger (a run much larger than the traced ones is no cheap way to decide)
DECIDING_RUN_MAX = 64


def _short(problems: Sequence[str], width: int = 160) -> str:
    """The first of a phase's problems, cut to ``width`` characters, how many more there
    are, and the run that would decide what the traced P leave open, where one would
    (:meth:`LogicalModel.deciding_run`)."""
    hint = [p for p in problems if p.startswith(_DECIDING)]
    problems = [p for p in problems if not p.startswith(_DECIDING)] or list(problems)
    first = problems[0] if len(problems[0]) <= width else problems[0][:width - 3] + "..."
    return (first + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")
            + (f"; {hint[0]}" if hint and hint[0] not in problems else ""))


def _slots_text(where: Sequence[tuple[int, int]]) -> str:
    """Slots named in one line: "slot 3 (Send)", or "slots 2 (Comm_split), 61-80 (Recv,
    Send)": runs of three or more consecutive slots as a range with their kinds of call
    (hpcc's HPL loop refused 260 slots by name)."""
    where = sorted(set(where))
    parts, i = [], 0
    while i < len(where):
        j = i
        while j + 1 < len(where) and where[j + 1][0] == where[j][0] + 1:
            j += 1
        if j - i >= 2:
            ops = ", ".join(dict.fromkeys(OPS[op] for _, op in where[i:j + 1]))
            parts.append(f"{where[i][0]}-{where[j][0]} ({ops})")
        else:
            parts += [f"{n} ({OPS[op]})" for n, op in where[i:j + 1]]
        i = j + 1
    return f"slot{'s' if len(where) > 1 else ''} {', '.join(parts)}"


def _load_quantity(d: dict[str, Any] | None):
    if d is None:
        return None
    if d.get("kind") == "gridcount":
        return GridCount(a=float(d["a"]), b=float(d["b"]), k=int(d["k"]), form=d["form"],
                         grid=Grid.from_dict(d["grid"]), name=d.get("name", "calls"), cv=d.get("cv"))
    if d.get("kind") == "grid":
        grid = Grid.from_dict(d["grid"]) if "grid" in d else Grid(int(d["ndims"]), (False,) * int(d["ndims"]))
        exps = (tuple(int(e) for e in d["exps"]) if "exps" in d else
                tuple(int(d["e"]) if k == d["k"] else 0 for k in range(grid.ndims)))
        return GridPower(c=d["c"], exps=exps, grid=grid, name=d.get("name", "bytes"))
    return search.load_model(d)


#: exponent vectors tried for a volume on a grid of 1-3 dims: one dimension first, then
#: products of two, then of three; -1 before -2 before +1 before +2
_GRID_EXPONENTS = {nd: sorted((e for e in itertools.product((0, -1, -2, 1, 2), repeat=nd) if any(e)),
                              key=lambda e: (sum(x != 0 for x in e), [(-1, -2, 1, 2, 0).index(x) for x in e]))
                   for nd in (1, 2, 3, 4)}


def _fit_volume(Ps: np.ndarray, y: np.ndarray, grid: Grid | None, name: str, alternatives: list | None = None):
    """Exact grid-dimension power when there is one (the others that are exact on every
    traced P go to ``alternatives``), else the model search."""
    Ps, y = np.asarray(Ps, np.int64), np.asarray(y, float)
    if np.all(y == y[0]):
        return search.fit(Ps, y, name=name)
    if grid is not None and np.all(y > 0):
        d = np.array([grid.dims(int(p)) for p in Ps], float)
        found = []
        for exps in _GRID_EXPONENTS[grid.ndims]:
            c = y / np.prod(d ** np.asarray(exps, float)[None, :], axis=1)
            if np.all(np.abs(c - c[0]) <= 1e-9 * abs(c[0])):
                found.append(GridPower(c=float(c[0]), exps=exps, grid=grid, name=name))
        if found:
            if alternatives is not None:
                alternatives.extend(found[1:])
            return found[0]
    return search.fit(Ps, y, name=name, positive=True)


def _predict_scalar(model, P: int) -> float:
    return float(np.asarray(model.predict(np.array([P]))).reshape(-1)[0])


#: a phase whose weight model misses a measured weight by more than this factor (either
#: way) follows no model of P: its weight depends on the data, or the phases related
#: across P are not the same iterations
WEIGHT_MISS_FACTOR = 2.0


def _weight_missed(wmodel, Pw: np.ndarray, Ww: np.ndarray) -> str | None:
    """Why a phase's weight model cannot stand (None: it can): the measured weight it is
    furthest from, where that is more than ``WEIGHT_MISS_FACTOR`` off. (code_saturne's
    tutorial related a solver's inner iterations at P = 2 and 4 with its outer ones at
    P = 8, weights 4,491, 197,794 and 1, and fitted 8 * P^-1 through them as a placed
    phase; PETSc's GMRES cycles of one kind ran 1, 9 and 1 times at P = 4, 8 and 16.)"""
    fitted = np.maximum(np.asarray(wmodel.predict(Pw), float).reshape(-1), 1.0)
    off = np.maximum(fitted / Ww, Ww / fitted)
    worst = int(np.argmax(off))
    if off[worst] <= WEIGHT_MISS_FACTOR:
        return None
    measured = ", ".join(f"{int(w):,}@{int(p)}" for p, w in zip(Pw, Ww))
    return (f"its weight follows no model of P: measured {measured}; the best fit, {wmodel.formula()}, "
            f"gives {fitted[worst]:.3g} at P={int(Pw[worst])} ({off[worst]:.1f}x off): the count depends on "
            "the data, or the iterations related across P are not the same (trace more P, or a run "
            "long enough that the count settles)")


def _leaves_ranks_out(role) -> bool:
    """Whether a communicator layout puts some ranks on none of its communicators (colour
    -1): a grid over one class's ranks, or a class's communicator alone."""
    return isinstance(role, ClassGrid) or (isinstance(role, ClassComm) and role.alone)


def _groups_at(space: Space | None, P: int) -> int:
    """How many communicators a statistical run's space has at P (rows of a grid: each
    realises the run's channels among its ranks)."""
    if space is None or space.role is None:
        return 1
    inside, group, _, _ = space.layout(np.arange(P), P)
    return len(np.unique(group[inside]))


# ---- slots ---------------------------------------------------------------------------
@dataclasses.dataclass
class SlotModel:
    """One event of a phase repetition, with the rules that place it at any P."""

    key: str
    op: int
    tag: int
    comm: int  # COMM_NONE, COMM_WORLD, COMM_CART or COMM_SUB
    everywhere: bool  # every rank has it (else: the ranks its peer rule reaches)
    peer: PeerRule | None = None
    recv_peer: PeerRule | None = None
    root: PeerRule | None = None
    bytes: Any = None
    recv_bytes: Any = None
    work_share: float = 0.0
    problem: str | None = None
    #: set where the slot's sizes depend on the data (they change between repetitions
    #: and differ between ranks with no rule): they are modelled by their mean over ranks
    data_note: str | None = None
    #: COMM_SUB: the communicators (rows, columns, planes) as a function of P; the
    #: peer and root rules are then in the communicator's own ranks and sizes
    comm_role: SubGrid | None = None
    #: where the peer (receive peer) rule finds no rank, the rank still calls, with
    #: MPI_PROC_NULL (a non-periodic halo's ends) instead of skipping the call
    null_ends: bool = False
    recv_null_ends: bool = False
    #: the tag a receive from MPI_PROC_NULL records, when not the slot's (MPICH's status
    #: reports MPI_ANY_TAG, -1; a posted receive keeps its own)
    null_tag: int | None = None
    #: a receive from MPI_PROC_NULL records no bytes (a blocking one's status), rather
    #: than the count it posted (a nonblocking one, as MPICH's tracer sees it)
    null_no_bytes: bool = False
    #: a rooted collective's bytes at its root, when they differ from the other ranks'
    root_bytes: Any = None
    root_recv_bytes: Any = None
    #: the class of ranks whose bytes are ``root_bytes``/``root_recv_bytes`` when it is not
    #: a rooted collective's root (a slot both classes of a particle/PME split share)
    special: PeerRule | None = None
    #: the class of ranks that have the event (PeerRule family "member"), when not
    #: every rank does and no peer rule says which; on sub-communicators, the class of
    #: communicators (colours, out of how many there are) whose members all have it
    members: PeerRule | None = None
    #: (field, value) pairs that fit every traced P as well as the slot's own: another
    #: peer or receive-peer rule, communicator layout, or volume; the target is checked
    #: for where they part (:meth:`LogicalModel.undecided`). A field ending in "~" marks
    #: a less likely reading (a 3-D grid where a 2-D one fits), reported, not refused.
    alternatives: list = dataclasses.field(default_factory=list)
    #: the peers of an MPI_COMM_WORLD event are neighbours on the declared grid
    on_grid: bool = False
    #: a wait present exactly where the slot it follows is (the call whose request it
    #: completes): that slot's index in the phase
    follows: int | None = None
    #: ... except on ranks where that slot is their last call of the repetition (the wait
    #: comes after the phase: the next repetition opens with it, or the next phase)
    follows_unless_last: bool = False
    #: a statistical slot (:mod:`logical_model.statistical`): a run of calls whose number
    #: per rank is an expected value. Point-to-point: ``streams``, one per channel, as
    #: (side "send"/"recv"/"both", messages per rank, bytes per message); collectives and
    #: others: ``count`` calls per rank on every rank; waits: one per request of the run
    #: ``wait_of`` (``wait_rule`` "each"), one where it has any ("any"), or ``count``
    statistical: bool = False
    count: Any = None
    #: a statistical collective's count is the mean of its communicators' (each chose its
    #: own): realised as floor(count) calls on every communicator and one more on the first
    #: of them, as many as the fraction gives, so that the total follows the mean
    per_comm: bool = False
    streams: list = dataclasses.field(default_factory=list)
    wait_of: int | None = None
    wait_rule: str | None = None
    #: absent on communicators of one rank (a collective a program skips there: GROMACS's
    #: PME transposes with a single PME rank)
    skip_single: bool = False
    #: a statistical phase's run that is one side ("send" or "recv") of a remap between two
    #: block decompositions (:class:`~logical_model.overlap.Remap`): its calls are exact per
    #: rank (peers, bytes, order), not expected values
    overlap: Any = None
    overlap_side: str | None = None
    #: a statistical slot's ranks (:class:`~logical_model.statistical.Space`: a side of a
    #: class split, rows of a grid, a class of world ranks; None: every rank), and per
    #: stream the space of the run at its other end (None: the same)
    space: Any = None
    partners: list = dataclasses.field(default_factory=list)
    #: a window or neighbourhood slot's window id, and its neighbours' rules and bytes
    #: per neighbour (:class:`~logical_model.onesided.OneSided`)
    onesided: Any = None
    #: per stream, the class of the slot's ranks that take part in it where that is not
    #: its whole space (None: the space): a run every rank makes whose messages to a class
    #: of ranks only some of them send (the particle ranks', not the PME ranks')
    selves: list = dataclasses.field(default_factory=list)
    #: one side ("parent", "children", "stages") of a tree or exchange block the program
    #: writes as point-to-point calls (:class:`~logical_model.trees.Tree`): as many
    #: calls per rank as the rank has parents, children or stages at P, each exact
    tree: Any = None
    tree_side: str | None = None
    #: the side's receives name no source (MPI_ANY_SOURCE: a master that takes its workers'
    #: results as they come): placed as one receive from each child in the tree's order,
    #: the source a traced receive from any source records (its status)
    tree_any: bool = False
    #: the calls of each stage of a block with more than one (an exchange's ``unit``, a
    #: fold's send and receive, each copy of a message: ``Tree.elements`` x ``copies``):
    #: per call, its operation, its (bytes, receive bytes) models and its tag as
    #: c0 + c1 j + c2 L + a r + b q (j the stage's place in the loop, L the stages at P:
    #: NPB CG tags each stage of its exchanges with its number; r the rank, q the call's
    #: peer, a and b 0, 1 or P coded 2: FFTW tags them r P + q; :data:`_PAIR_TAGS`), as
    #: (c0, c1, c2, a, b); other blocks' tags are constants
    tree_ops: tuple = ()
    tree_sizes: tuple = ()
    tree_tags: tuple = ()

    def describe(self) -> str:
        if self.tree is not None and self.tree_ops:  # its calls at each stage
            tags = []
            for c0, c1, c2, a, b in self.tree_tags:  # the rank and peer's term, c2 L + c1 j + c0
                terms = [(c, x) for c, x in ((c2, "L"), (c1, "j"), (c0, "")) if c]
                expr = _pair_text(a, b)
                for n, (c, x) in enumerate(terms):
                    mag = x if x and abs(c) == 1 else f"{abs(c)}{x}"
                    expr += (("-" if c < 0 else "") + mag) if n == 0 and not expr else (
                        f" - {mag}" if c < 0 else f" + {mag}")
                tags.append(expr or "0")
            said = [w for w, used in (("j: the stage's place, L: the stages at P",
                                       any(t[1] or t[2] for t in self.tree_tags)),
                                      ("r: the rank, q: its peer", any(t[3] or t[4] for t in self.tree_tags))) if used]
            return (f"{', '.join(OPS[o] for o in self.tree_ops)} with "
                    + ("any source, as many as " if self.tree_any else "") + f"{self.tree.describe()}; tags "
                    + ", ".join(tags) + (f" ({'; '.join(said)})" if said else ""))
        if self.tree is not None:
            return (f"{OPS[self.op]} {'to' if self.op in SEND_OPS else 'with' if self.op in SENDRECV_OPS else 'from'} "
                    + ("any source, as many as " if self.tree_any else "")
                    + f"{self.tree.describe(self.tree_side)}" + (f", tag {self.tag}" if self.tag >= 0 else ""))
        if self.statistical:
            return self._describe_statistical()
        parts = [OPS[self.op]]
        if self.peer is not None:
            parts.append(("to " if self.op not in (OP_CODE["Recv"], OP_CODE["Irecv"]) else "from ")
                         + self.peer.describe() + (" or PROC_NULL" if self.null_ends else ""))
        if self.recv_peer is not None:
            parts.append("from " + self.recv_peer.describe()
                         + (" or PROC_NULL" if self.recv_null_ends else ""))
        if self.root is not None:
            parts.append("root " + self.root.describe())
        if self.members is not None and self.comm_role is not None:  # a class of communicators
            parts.append("only on communicators " + self.members.describe().replace("ranks r with r", "c with c")
                         .replace("every rank but", "all but").replace("rank ", "number "))
        elif self.members is not None and (self.peer is None or self.peer.family != "within"):
            parts.append("on " + self.members.describe())
        if self.tag >= 0:
            parts.append(f"tag {self.tag}")
        if self.comm_role is not None:
            parts.append(f"on communicators {self.comm_role.describe()} (ranks and P of the communicator)")
        if self.skip_single:
            parts.append("not on communicators of one rank")
        if self.follows is not None:
            parts.append(f"where slot {self.follows} is" + (", unless that is the rank's last call"
                                                           if self.follows_unless_last else ""))
        if self.onesided is not None and self.onesided.describe():  # onesided.py
            parts.append(self.onesided.describe())
        return ", ".join(parts)

    def _describe_statistical(self) -> str:
        if self.overlap is not None:
            return (f"{OPS[self.op]} (exact remap) {'to' if self.overlap_side == 'send' else 'from'} each rank "
                    f"whose block overlaps its own: {self.overlap.formula()}" + (f", tag {self.tag}" if self.tag >= 0 else "")
                    + "; where the traced P leave it open, statistical")
        parts = [f"{OPS[self.op]} (statistical)"]
        if self.space is not None:
            parts.append("on " + self.space.describe())
        for n, (side, m, b) in enumerate(self.streams):
            other = self.partners[n] if n < len(self.partners) else None
            own = self.selves[n] if n < len(self.selves) else None
            parts.append(({} if own is None else {"send": f"from {own.describe()} ", "recv": f"on {own.describe()} "}
                          ).get(side, "") + {"send": "to", "recv": "from", "both": "to and from"}[side]
                         + f" {m.formula()} peers per rank (expected)"
                         + (f" of {other.describe()}" if other is not None else "") + f", {b.formula()} bytes each")
        if self.wait_of is not None:
            parts.append(f"one per request of slot {self.wait_of}" if self.wait_rule == "each"
                         else f"once where slot {self.wait_of} posted any request")
        elif self.wait_rule == "all":
            parts.append("once at the end of the repetition, completing every request the rank posted "
                         "(the phase's calls deferred: no order of its own)")
        elif self.count is not None:
            parts.append(f"{self.count.formula()} calls per rank")
        if self.root is not None:
            parts.append("root " + self.root.describe())
        if self.tag >= 0:
            parts.append(f"tag {self.tag}")
        return ", ".join(parts)

    def rows(self, ranks: np.ndarray, P: int, grid: Grid | None, counts: dict[int, np.ndarray],
             scale: tuple[float, float] = (1.0, 1.0)) -> list[dict]:
        """This slot's events for ``ranks`` at P as rows (a statistical slot has as many as
        its most frequent rank's calls; an exact slot one): each a :meth:`place` dict.
        ``counts``: per slot index already placed, each rank's number of events in it
        (what a wait run follows); ``scale``: factors on the channels' message counts and
        sizes (:meth:`PhaseModel.stat_scale`)."""
        if self.tree is not None:
            return self._tree_rows(ranks, P)
        if not self.statistical:
            return [self.place(ranks, P, grid)]
        ranks = np.asarray(ranks, np.int64)
        n = len(ranks)

        def row(present, peer=None, recv_peer=None, nbytes=0, recv_bytes=0):
            return {"present": np.asarray(present, bool),
                    "peer": np.full(n, -1, np.int64) if peer is None else np.asarray(peer, np.int64),
                    "recv_peer": np.full(n, -1, np.int64) if recv_peer is None else np.asarray(recv_peer, np.int64),
                    "root": (space.world(group, np.full(n, self.root._k(P), np.int64), P) if self.root is not None
                             else np.full(n, -1, np.int64)),
                    "tag": np.full(n, self.tag, np.int64),
                    "bytes": np.broadcast_to(np.asarray(nbytes, np.int64), (n,)).copy(),
                    "recv_bytes": np.broadcast_to(np.asarray(recv_bytes, np.int64), (n,)).copy()}

        out = []
        space = self.space if self.space is not None else _EVERY_RANK
        inside, group, local, size = space.layout(ranks, P)
        if self.skip_single:  # absent on communicators of one rank
            inside = inside & (size > 1)
        if self.overlap is not None:
            if self.overlap.problem(P) is None:  # a remap: each rank's calls exact
                peer, nbytes, present = self.overlap.rows(ranks, P, self.overlap_side)
                send = self.overlap_side == "send"
                for j in range(peer.shape[1]):
                    out.append(row(present[:, j], peer[:, j], None,
                                   np.where(present[:, j], nbytes[:, j], 0) if send else 0,
                                   0 if send else np.where(present[:, j], nbytes[:, j], 0)))
                return out
            scale = (1.0, 1.0)  # the traced P leave the remap open at P: its expected values, as fitted
        if self.streams:
            for js, (side, m, b) in enumerate(self.streams):
                other = self.partners[js] if js < len(self.partners) else None
                own = (self.selves[js] if js < len(self.selves) else None) or self.space
                nbytes = max(0, int(round(max(0.0, _predict_scalar(b, P)) * scale[1])))
                if (other is None or other == self.space) and own == self.space:  # within the space's communicators
                    width = self.senders_at(P, js)
                    total = int(round(max(0.0, _predict_scalar(m, P)) * width * scale[0]))
                    got = []
                    for present, peer, rpeer in channel_rows(total, width, local, side):
                        got.append((present & inside, space.world(group, np.where(present & inside, peer, -1), P),
                                    space.world(group, np.where(present & inside, rpeer, -1), P)))
                else:  # between two classes of ranks
                    mine = own or _EVERY_RANK
                    send, recv = (mine, other) if side == "send" else (other, mine)
                    total = int(round(max(0.0, _predict_scalar(m, P)) * len(send.ranks(P)) * scale[0]))
                    got = cross_rows(total, P, ranks, send.ranks(P), recv.ranks(P), side)
                for present, peer, rpeer in got:
                    if side == "both":
                        out.append(row(present, peer, rpeer, nbytes, nbytes))
                    elif side == "send":
                        out.append(row(present, peer, None, nbytes, 0))
                    else:
                        out.append(row(present, peer, None, 0, nbytes))
            return out
        if self.wait_of is not None:
            have = counts.get(self.wait_of, np.zeros(n, np.int64))
            k = int(have.max()) if have.size else 0
            if self.wait_rule == "any":
                return [row(have > 0)] if k else []
            return [row(have > j) for j in range(k)]
        mean = max(0.0, _predict_scalar(self.count, P)) if self.count is not None else 1.0
        k = int(round(mean))
        extra = None
        if self.per_comm and space.role is not None:
            # every communicator floor(mean) calls, round(fraction x communicators) of them one more
            k, n_comms = int(np.floor(mean)), space.role.n_comms(P)
            extra = group < int(round((mean - k) * n_comms))
        nbytes, recv_bytes = _volume(self.bytes, P), _volume(self.recv_bytes, P)
        if self.root is not None and (self.root_bytes is not None or self.root_recv_bytes is not None):
            at_root = space.world(group, np.full(n, self.root._k(P), np.int64), P) == ranks
            nbytes = np.where(at_root, _volume(self.root_bytes, P), nbytes)
            recv_bytes = np.where(at_root, _volume(self.root_recv_bytes, P), recv_bytes)
        out = [row(inside, nbytes=nbytes, recv_bytes=recv_bytes) for _ in range(k)]
        if extra is not None and np.any(inside & extra):
            out.append(row(inside & extra, nbytes=nbytes, recv_bytes=recv_bytes))
        return out

    def _tree_rows(self, ranks: np.ndarray, P: int) -> list[dict]:
        """A tree side's events: one row per stage (per call of each stage's unit for an
        exchange), present where the rank has that call."""
        n = len(ranks)
        L = self.tree.width(P, self.tree_side)
        out = []
        for j, e, _, q, rq in self.tree.rows(ranks, P, self.tree_side):
            present = q != -1
            if not present.any():  # (a flat tree's root alone has its P - 1 children)
                continue
            if self.tree_ops:  # the stage's call e
                op, sizes, (c0, c1, c2, a, b) = self.tree_ops[e], self.tree_sizes[e], self.tree_tags[e]
            else:
                op, sizes, (c0, c1, c2, a, b) = self.op, (self.bytes, self.recv_bytes), (self.tag, 0, 0, 0, 0)
            nbytes, recv_bytes = (_volume(m, P) for m in sizes)
            peer = np.where(q >= 0, q, -1).astype(np.int64)
            tag = c0 + c1 * j + c2 * L + (_pair_term(a, b, ranks, peer, P) if a or b else np.zeros(n, np.int64))
            out.append({"present": present, "op": op, "peer": peer,
                        "recv_peer": rq.copy(), "root": np.full(n, -1, np.int64),
                        "tag": np.asarray(tag, np.int64),
                        "bytes": np.where(present, nbytes, 0).astype(np.int64),
                        "recv_bytes": np.where(present, recv_bytes, 0).astype(np.int64)})
        return out

    def senders_at(self, P: int, n: int = 0) -> int:
        """A statistical slot's stream ``n``: how many ranks send its messages at P (per
        communicator of its space), which its messages-per-rank model counts."""
        side = self.streams[n][0] if n < len(self.streams) else "send"
        other = self.partners[n] if n < len(self.partners) else None
        own = (self.selves[n] if n < len(self.selves) else None) or self.space
        space = (own if side != "recv" or other is None else other) or _EVERY_RANK
        inside, group, _, size = space.layout(np.arange(P), P)
        if not inside.any():
            return 0
        return int(size[inside][0]) if space.role is not None else int(inside.sum())

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "op": OPS[self.op], "tag": self.tag, "comm": self.comm,
                "everywhere": self.everywhere,
                "peer": self.peer.to_dict() if self.peer else None,
                "recv_peer": self.recv_peer.to_dict() if self.recv_peer else None,
                "root": self.root.to_dict() if self.root else None,
                "bytes": self.bytes.to_dict() if self.bytes is not None else None,
                "recv_bytes": self.recv_bytes.to_dict() if self.recv_bytes is not None else None,
                "work_share": self.work_share, "problem": self.problem,
                "comm_role": self.comm_role.to_dict() if self.comm_role else None,
                "members": self.members.to_dict() if self.members else None,
                "null_ends": self.null_ends, "recv_null_ends": self.recv_null_ends,
                "null_tag": self.null_tag, "null_no_bytes": self.null_no_bytes,
                "root_bytes": self.root_bytes.to_dict() if self.root_bytes is not None else None,
                "special": self.special.to_dict() if self.special is not None else None,
                "root_recv_bytes": (self.root_recv_bytes.to_dict() if self.root_recv_bytes is not None
                                    else None),
                "alternatives": [{"field": f, "value": v.to_dict()} for f, v in self.alternatives],
                "on_grid": self.on_grid, "follows": self.follows,
                **({"skip_single": True} if self.skip_single else {}),
                "follows_unless_last": self.follows_unless_last,
                **({"per_comm": True} if self.per_comm else {}),
                **({"statistical": True, "count": self.count.to_dict() if self.count is not None else None,
                    "streams": [[side, m.to_dict(), b.to_dict()] for side, m, b in self.streams],
                    "wait_of": self.wait_of, "wait_rule": self.wait_rule} if self.statistical else {}),
                **({"space": self.space.to_dict()} if self.space is not None else {}),
                **({"partners": [x.to_dict() if x is not None else None for x in self.partners]}
                   if any(x is not None for x in self.partners) else {}),
                **({"selves": [x.to_dict() if x is not None else None for x in self.selves]}
                   if any(x is not None for x in self.selves) else {}),
                **({"overlap": self.overlap.to_dict(), "overlap_side": self.overlap_side}
                   if self.overlap is not None else {}),
                **({"onesided": self.onesided.to_dict()} if self.onesided is not None else {}),
                **({"tree": self.tree.to_dict(), "tree_side": self.tree_side, "tree_any": self.tree_any,
                    "tree_ops": [OPS[o] for o in self.tree_ops],
                    "tree_sizes": [[m.to_dict(), r.to_dict()] for m, r in self.tree_sizes],
                    "tree_tags": [list(t) for t in self.tree_tags]}
                   if self.tree is not None else {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SlotModel":
        rule = lambda x: PeerRule.from_dict(x) if x else None  # noqa: E731
        load = {"peer": PeerRule.from_dict, "recv_peer": PeerRule.from_dict, "comm_role": _load_role,
                "space": _load_space}
        alts = [(a["field"], load.get(a["field"].rstrip("~"), _load_quantity)(a["value"]))
                for a in d.get("alternatives", ())]
        return cls(key=d["key"], op=OP_CODE[d["op"]], tag=int(d["tag"]), comm=int(d["comm"]),
                   everywhere=bool(d["everywhere"]), peer=rule(d["peer"]),
                   recv_peer=rule(d["recv_peer"]), root=rule(d["root"]),
                   bytes=_load_quantity(d["bytes"]), recv_bytes=_load_quantity(d["recv_bytes"]),
                   work_share=float(d["work_share"]), problem=d.get("problem"),
                   comm_role=_load_role(d["comm_role"]) if d.get("comm_role") else None,
                   members=rule(d.get("members")),
                   null_ends=bool(d.get("null_ends", False)),
                   recv_null_ends=bool(d.get("recv_null_ends", False)), null_tag=d.get("null_tag"),
                   null_no_bytes=bool(d.get("null_no_bytes", False)),
                   root_bytes=_load_quantity(d.get("root_bytes")),
                   root_recv_bytes=_load_quantity(d.get("root_recv_bytes")), alternatives=alts,
                   special=rule(d.get("special")),
                   on_grid=bool(d.get("on_grid", False)), follows=d.get("follows"),
                   follows_unless_last=bool(d.get("follows_unless_last", False)),
                   statistical=bool(d.get("statistical", False)), count=_load_quantity(d.get("count")),
                   per_comm=bool(d.get("per_comm", False)),
                   streams=[(side, _load_quantity(m), _load_quantity(b)) for side, m, b in d.get("streams", ())],
                   wait_of=d.get("wait_of"), wait_rule=d.get("wait_rule"),
                   skip_single=bool(d.get("skip_single", False)),
                   overlap=Remap.from_dict(d["overlap"]) if d.get("overlap") else None,
                   overlap_side=d.get("overlap_side"),
                   space=_load_space(d.get("space")),
                   partners=[_load_space(x) for x in d.get("partners", ())],
                   onesided=(onesided.OneSided.from_dict(d["onesided"], _load_quantity)
                             if d.get("onesided") else None),
                   selves=[_load_space(x) for x in d.get("selves", ())],
                   tree=Tree.from_dict(d["tree"]) if d.get("tree") else None, tree_side=d.get("tree_side"),
                   tree_any=bool(d.get("tree_any", False)),
                   tree_ops=tuple(OP_CODE[o] for o in d.get("tree_ops", ())),
                   tree_sizes=tuple((_load_quantity(m), _load_quantity(r)) for m, r in d.get("tree_sizes", ())),
                   tree_tags=tuple((*(int(x) for x in t), 0, 0)[:5] for t in d.get("tree_tags", ())))

    def layout(self, ranks: np.ndarray, P: int, grid: Grid | None):
        """Where the slot's rules apply: (local ranks, local P, to_world) for ``ranks``;
        ``to_world(local)`` maps the rules' results back to world ranks (-1 stays)."""
        if self.comm_role is None:
            return ranks, P, lambda q: q
        colour, local, size = self.comm_role.layout(ranks, P)
        return local, size, lambda q: self.comm_role.world(colour, q, P)

    def place(self, ranks: np.ndarray, P: int, grid: Grid | None) -> dict[str, np.ndarray]:
        """This slot's events for ``ranks`` at P: present, peer, recv_peer, root (world
        ranks; MPI_PROC_NULL -3), bytes and recv_bytes, each (len(ranks),)."""
        g = grid if self.comm == COMM_CART or self.on_grid else None
        local, size, world = self.layout(ranks, P, grid)
        n = len(ranks)
        out = {"present": np.ones(n, bool), "peer": np.full(n, -1, np.int64),
               "recv_peer": np.full(n, -1, np.int64), "root": np.full(n, -1, np.int64),
               "tag": np.full(n, self.tag, np.int64)}
        if self.members is not None:  # a class of ranks, or of communicators (colours)
            if self.comm_role is not None:
                colour = self.comm_role.layout(ranks, P)[0]
                out["present"] = self.members(colour, self.comm_role.n_comms(P)) >= 0
            else:
                out["present"] = self.members(ranks, P) >= 0
        if _leaves_ranks_out(self.comm_role):  # ranks on none of its communicators
            out["present"] &= self.comm_role.layout(ranks, P)[0] >= 0
        if self.skip_single:
            out["present"] &= np.broadcast_to(np.asarray(size), (n,)) > 1

        cls = out["present"].copy()

        def at(rule):  # on a class of communicators, the rule holds on theirs only (a grid
            if self.members is None or self.comm_role is None:  # over one class's ranks)
                return rule(local, size, g)
            q = np.full(n, -1, np.int64)
            if cls.any():
                q[cls] = rule(local[cls], size[cls] if np.ndim(size) else size, g)
            return q

        if self.peer is not None:
            q = at(self.peer)
            has = np.ones(n, bool) if self.null_ends else q >= 0
            out["present"] = has & out["present"] if self.members is not None else has
            out["peer"] = np.where(q >= 0, world(q), PROC_NULL if self.null_ends else -1)
        if self.recv_peer is not None:
            q = at(self.recv_peer)
            out["recv_peer"] = np.where(q >= 0, world(q), PROC_NULL if self.recv_null_ends else -1)
        if self.root is not None:
            out["root"] = world(np.full(n, self.root._k(size), np.int64))
        for col, root_col in (("bytes", "root_bytes"), ("recv_bytes", "root_recv_bytes")):
            model, at_root = getattr(self, col), getattr(self, root_col)
            v = np.full(n, _volume(model, P), np.int64)
            if at_root is not None:
                odd = ranks == out["root"] if self.special is None else self.special(ranks, P) >= 0
                v = np.where(odd, _volume(at_root, P), v)
            out[col] = v
        if self.recv_peer is not None and self.recv_null_ends and self.null_no_bytes:
            out["recv_bytes"] = np.where(out["recv_peer"] == PROC_NULL, 0, out["recv_bytes"])
        if self.peer is not None and self.null_ends and self.op in RECV_OPS:
            # a receive from PROC_NULL completes at once: no bytes (and MPI_ANY_TAG) in its status
            if self.null_no_bytes:
                out["recv_bytes"] = np.where(out["peer"] == PROC_NULL, 0, out["recv_bytes"])
            if self.null_tag is not None:
                out["tag"] = np.where(out["peer"] == PROC_NULL, self.null_tag, out["tag"])
        return out


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


#: Rank classes whose events may come in different orders (an even/odd ordered
#: exchange, the ends of a chain): name -> class index of each rank at P. Tried in
#: this order when the ranks of a phase share no common event order.
ORDER_CLASSES = {
    "rank parity": lambda r, P: r % 2,
    "first rank, last rank, the others": lambda r, P: np.where(r == 0, 0, np.where(r == P - 1, 1, 2)),
    "first rank, last rank, even and odd others": lambda r, P: np.where(
        r == 0, 0, np.where(r == P - 1, 1, 2 + r % 2)),
}


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
    #: rank classes that order the phase's events differently (a name of
    #: :data:`ORDER_CLASSES`), and per class the position of each slot in its order
    classes: str | None = None
    orders: list[list[int]] = dataclasses.field(default_factory=list)
    #: a rank class the ranks' streams show (a "member" rule: the PME ranks), when the
    #: classes are that class (1) and the others (0) rather than :data:`ORDER_CLASSES`
    class_rule: PeerRule | None = None
    #: a statistical phase's point-to-point messages and bytes per rank, regressed over P
    #: as wholes: its channels' counts and sizes are scaled to follow them (a channel's
    #: share of the phase shifts with P where a tree's stages do; the sum is smoother)
    stat_messages: Any = None
    stat_bytes: Any = None
    #: a statistical phase whose ranks share no order of their calls (no rank class has
    #: one): realised in one order of its runs for every rank, its point-to-point calls
    #: nonblocking (a blocking call becomes its nonblocking form), its own waits, polls
    #: and probes left out and one Waitall (its last slot, ``wait_rule`` "all") completing
    #: every request at the end of the repetition. Collectives are then the only calls
    #: that block, and every rank of a communicator makes them in that one order, with
    #: every message's receive posted within the repetition (the channels match them):
    #: deadlock-free by construction, whatever order the program chose on each rank.
    deferred: bool = False

    def stat_scale(self, P: int) -> tuple[float, float]:
        """Factors on a statistical phase's channel message counts and sizes at P that make
        their sums the phase's totals (1, 1 for an exact phase)."""
        if self.stat_messages is None and self.stat_bytes is None:
            return 1.0, 1.0
        raw_m = raw_b = 0.0
        for s in self.slots:
            if s.overlap is not None:  # remaps are not in the totals (nor scaled to them)
                continue
            for j, (side, m, b) in enumerate(s.streams):
                if side != "recv":
                    n = max(0.0, _predict_scalar(m, P)) * s.senders_at(P, j) * _groups_at(s.space, P)
                    raw_m += n
                    raw_b += n * max(0.0, _predict_scalar(b, P))
        want_m = max(0.0, _predict_scalar(self.stat_messages, P)) * P if self.stat_messages is not None else raw_m
        want_b = max(0.0, _predict_scalar(self.stat_bytes, P)) * P if self.stat_bytes is not None else raw_b
        fm = want_m / raw_m if raw_m > 0 else 1.0
        fb = want_b / (raw_b * fm) if raw_b > 0 and fm > 0 else 1.0
        return fm, fb

    def slot_position(self, ranks: np.ndarray, P: int) -> np.ndarray | None:
        """(n_slots, len(ranks)) position of each slot in each rank's order, or None
        when every rank uses the slots' own order."""
        if self.classes is None:
            return None
        return np.asarray(self.orders, np.int64)[self.class_of(ranks, P)].T

    def class_of(self, ranks: np.ndarray, P: int) -> np.ndarray:
        """Each rank's order class (all 0 when the ranks share one order)."""
        ranks = np.asarray(ranks, np.int64)
        if self.class_rule is not None:
            return (self.class_rule(ranks, P) >= 0).astype(np.int64)
        if self.classes is None:
            return np.zeros(len(ranks), np.int64)
        return np.asarray(ORDER_CLASSES[self.classes](ranks, P), np.int64)

    @property
    def extrapolable(self) -> bool:
        return not self.problems

    @property
    def statistical(self) -> bool:
        """Its calls per rank are expected values (:mod:`logical_model.statistical`): counts
        and volumes follow the model, peers do not; not exact."""
        return any(s.statistical for s in self.slots)

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
                "problems": list(self.problems), "notes": list(self.notes),
                "classes": self.classes, "orders": self.orders,
                **({"class_rule": self.class_rule.to_dict()} if self.class_rule is not None else {}),
                **({"stat_messages": self.stat_messages.to_dict(),
                    "stat_bytes": self.stat_bytes.to_dict() if self.stat_bytes is not None else None}
                   if self.stat_messages is not None else {}),
                **({"deferred": True} if self.deferred else {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PhaseModel":
        return cls(id=int(d["id"]), kind=d["kind"], pattern=d["pattern"],
                   weight=_load_quantity(d["weight"]),
                   slots=[SlotModel.from_dict(s) for s in d["slots"]],
                   groups=[WorkGroup.from_dict(g) for g in d["groups"]],
                   measured_weights={int(k): int(v) for k, v in d["measured_weights"].items()},
                   problems=list(d["problems"]), notes=list(d.get("notes", [])),
                   classes=d.get("classes"), orders=[list(map(int, o)) for o in d.get("orders", [])],
                   class_rule=PeerRule.from_dict(d["class_rule"]) if d.get("class_rule") else None,
                   stat_messages=_load_quantity(d.get("stat_messages")),
                   stat_bytes=_load_quantity(d.get("stat_bytes")), deferred=bool(d.get("deferred", False)))


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
    #: dims rules other than ``grid.rule`` that give the declared grid at every traced P
    grid_rules: list[DimsRule] = dataclasses.field(default_factory=list)
    #: phases of the signature this model leaves out (:meth:`subset`): id, kind, pattern and
    #: why, written into its traces (``phases_left_out``)
    left_out: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    # ---- use ---------------------------------------------------------------------
    def grid_problem(self, P: int) -> str | None:
        """Why the declared grid's dims at P are not known: the dims rules that fit every
        traced P give different grids there, or the rule has none (dims fixed at P with
        :meth:`with_grid` decide)."""
        if self.grid is None or (self.grid.rule and any(p == P for p, _ in self.grid.rule.fixed)):
            return None
        mine = _dims_or_none(self.grid, P)
        grids: dict[tuple, str] = {} if mine is None else {mine: self.grid.rule.describe() if self.grid.rule
                                                           else "MPI_Dims_create"}
        for r in self.grid_rules:
            d = _dims_or_none(r, P)
            if d is not None:
                grids.setdefault(d, r.describe())
        if mine is not None and len(grids) == 1:
            return None
        if not grids:
            return f"no dims rule that fits the traced P has a grid for P={P}: give one (--grid AxBxC)"
        more = self._deciding_grid_run(P)
        return (f"the traced P cannot decide the process grid at P={P} ("
                + "; ".join(f"{'x'.join(map(str, d))} by {how}" for d, how in grids.items())
                + f"): give it (--grid {'x'.join(map(str, next(iter(grids))))} or another)"
                + (f", or trace a run at P={more[0]} as well (where they give {' or '.join(more[1])})"
                   if more else ""))

    def _deciding_grid_run(self, P: int) -> tuple[int, list[str]] | None:
        """(Q, its grids): the smallest P below ``P`` (as in :meth:`deciding_run`), not
        traced, at which the dims rules that fit every traced P but give different grids
        at P give different grids too: a run traced there shows which grid the program
        chooses (lammps_like fitted at P = 4, 6, 27 gives 4x3x3 or 6x2x3 at P = 36)."""
        groups: dict[tuple, list] = {}
        for r in [self.grid] + list(self.grid_rules):
            d = _dims_or_none(r, P)
            if d is not None:
                groups.setdefault(d, []).append(r)
        if len(groups) < 2:
            return None
        for Q in self._smaller_runs(P):
            at = [{_dims_or_none(r, Q) for r in rs} for rs in groups.values()]
            if any(None in a for a in at):
                continue
            if all(not (a & b) for i, a in enumerate(at) for b in at[i + 1:]):
                return Q, sorted({"x".join(map(str, d)) for a in at for d in a})
        return None

    def undecided(self, P: int, *, weaker: bool = False) -> dict[int, list[str]]:
        """Per phase id, what the traced P leave open at P besides the grid
        (:meth:`grid_problem`): a communicator layout, a grid neighbour or a volume
        that fit every traced P as well as the one chosen but give other communicators,
        peers or bytes at P, and the P of one more traced run that would decide them
        (:meth:`deciding_run`). ``weaker=True``: the less likely readings (3-D grids where
        a 2-D one fits) that part at P instead, which do not refuse it."""
        out: dict[int, list[str]] = {}
        if not weaker:
            for pid, texts in self._stuck_dimensions(P).items():
                out.setdefault(pid, []).extend(texts)
        by_phase: dict[int, dict[str, list]] = {}  # one line per reason, naming its slots
        grids: dict[int, set] = {}  # per phase, the dims at P of the grid layouts that part there
        parting = self._parting(P, weaker)
        for ph, i, s, field, value in parting:
            what = {"comm_role": "its communicators are", "space": "it runs on", "bytes": "its bytes are",
                    "recv_bytes": "its received bytes are", "peer": "its peers are",
                    "recv_peer": "its receive peers are"}.get(field, field)
            mine, theirs = getattr(s, field), value
            g_mine, g_theirs = _grid_at(mine, P), _grid_at(theirs, P)
            text = lambda v, d: v.describe() + (f" ({d} at P={P})" if d else "") if hasattr(
                v, "describe") and not hasattr(v, "formula") else v.formula()  # noqa: E731
            by_phase.setdefault(ph.id, {}).setdefault(
                f"{what} {text(mine, g_mine)} or {text(theirs, g_theirs)} at every traced P, which part at P={P}",
                []).append((i, s.op))
            if g_theirs and g_mine != g_theirs:
                grids.setdefault(ph.id, set()).update((g_mine, g_theirs))
        for pid, by_text in by_phase.items():
            for reason, where in by_text.items():
                out.setdefault(pid, []).append(f"{_slots_text(sorted(set(where)))}: {reason}")
            if pid in grids and not weaker:  # the grid the program makes there decides it
                given = " or ".join(f"--grid {g}" for g in sorted(grids[pid]))
                out[pid].append(f"{given} at P={P} would decide which grid its communicators are the lines of")
        if out and not weaker:
            more = self.deciding_run(P, parting)
            if more is not None:
                dims = f" (grid {'x'.join(map(str, self.grid.dims(more)))})" if self.grid is not None else ""
                for texts in out.values():
                    texts.append(f"{_DECIDING}{more}{dims} as well would decide what the traced P leave open")
        return out

    def _parting(self, P: int, weaker: bool = False) -> list[tuple]:
        """(phase, slot index, slot, field, value): each slot's first reading that fits
        every traced P as well as its own and gives other events at P."""
        ranks = np.arange(P)
        out = []
        for ph in self.phases:
            for i, s in enumerate(ph.slots):
                if not s.alternatives:
                    continue
                try:
                    mine = s.place(ranks, P, self.grid)
                except ValueError:
                    continue
                for field, value in s.alternatives:
                    if field.endswith("~") != weaker:
                        continue
                    field = field.rstrip("~")
                    if _parts(s, field, value, P, self.grid, mine):
                        out.append((ph, i, s, field, value))
                        break
        return out

    def deciding_run(self, P: int, parting: list | None = None) -> int | None:
        """The smallest P below the target P (and at most :data:`DECIDING_RUN_MAX` or four
        times the largest traced P), besides the traced ones, at which every
        reading the traced P leave open at the target (:meth:`undecided`) parts from the
        one chosen (each slot's every alternative that parts at the target), and every
        grid dimension that kept one width at every traced P but changes at the target
        has its width there: a run traced there as well decides them (a 27-point stencil
        traced at P = 4, 8, 16, its grid 2 wide or less along two dimensions, is decided for
        P = 24 and 32 by a run at P = 9, 3x3x1). None where no such P is smaller than the
        target, or where nothing is open. ``parting``: :meth:`_parting` at P, when known."""
        def parting_at(s: SlotModel, alts: list, Q: int) -> list:  # (its own reading placed once)
            try:
                mine = s.place(np.arange(Q), Q, self.grid)
            except ValueError:
                return []
            return [(f, v) for f, v in alts if _parts(s, f, v, Q, self.grid, mine)]

        open_ = [(s, alts) for _, _, s, _, _ in (self._parting(P) if parting is None else parting)
                 if (alts := parting_at(s, [(f, v) for f, v in s.alternatives if not f.endswith("~")], P))]
        stuck, _, at = self._stuck_axes(P) if self._stuck_dimensions(P) else ([], None, None)
        if not open_ and not stuck:
            return None
        for Q in self._smaller_runs(P):
            if self.grid is not None:
                dims = _dims_or_none(self.grid, Q)
                if dims is None or any(dims[d] != at[d] for d in stuck):
                    continue
            if all(len(parting_at(s, alts, Q)) == len(alts) for s, alts in open_):
                return Q
        return None

    def _smaller_runs(self, P: int) -> list[int]:
        """The P :meth:`deciding_run` and :meth:`_deciding_grid_run` try, smallest first: up
        to the target (and :data:`DECIDING_RUN_MAX` or four times the largest traced P),
        besides the traced ones."""
        return [Q for Q in range(2, min(P, max(DECIDING_RUN_MAX, 4 * max(self.Ps)) + 1)) if Q not in self.Ps]

    def traced_grids(self, P: int) -> dict[int, list[str]]:
        """Per phase id, the slots whose peers are, or may be (an alternative reading that fits
        every traced P as well), neighbours on a grid whose dims follow no rule sigex knows
        (:func:`~logical_model.rules.traced_grid_rules`: a load-based choice over one class's
        ranks) at a size the traces do not show and ``--grid`` did not give: one line per
        grid, naming its size at P, its traced dims and the dims rules that fit them."""
        out: dict[int, list[str]] = {}
        for ph in self.phases:
            need: dict[tuple, list[str]] = {}
            for i, s in enumerate(ph.slots):
                rules = [s.peer, s.recv_peer] + [a for f, a in s.alternatives if f.rstrip("~") in ("peer", "recv_peer")]
                # (size, ndims, dims rule) of every traced grid the slot is on: its peers' and
                # its communicators' (lines of one class's grid)
                grids = [(n, g.ndims, g.rule) for g in map(on_traced_grid, rules) if g is not None
                         for n in _slot_sizes(s, P)]
                cg = _class_grid(s)
                if cg is not None and cg.grid.rule.name == "traced" and cg.class_size(P) > 1:
                    grids.append((cg.class_size(P), cg.grid.rule.ndims, cg.grid.rule))
                for n, nd, rule in grids:
                    if _dims_or_none(rule, n) is None:
                        where = (i, s.op)
                        lst = need.setdefault((n, nd, rule.table), [])
                        if where not in lst:
                            lst.append(where)
            for (n, nd, traced), where in need.items():
                fits = fit_dims_rules(dict(traced))
                out.setdefault(ph.id, []).append(
                    f"give the {nd}-D grid of {n} ranks at P={P} (--grid AxB{'xC' if nd == 3 else ''}, "
                    f"e.g. {'x'.join(map(str, dims_create(n, nd)))}): its dims were "
                    f"{', '.join('x'.join(map(str, d)) + f' at {m} ranks' for m, d in traced)} and "
                    + ("fit " + " and ".join(r.describe() for r in fits) if fits else
                       "no dims rule sigex knows fits (MPI_Dims_create, pencils, powers of two, q x q)")
                    + f"; {_slots_text(where)} are neighbours on it or on its communicators")
        return out

    def _stuck_axes(self, P: int) -> tuple[list[int], np.ndarray | None, np.ndarray | None]:
        """(the grid dimensions that kept one width at every traced P and have another at P,
        the traced dims (one row per traced P), the dims at P); ([], None, None) without a
        grid at every one of them."""
        if self.grid is None:
            return [], None, None
        try:
            fit = np.array([self.grid.dims(p) for p in self.Ps])
            at = np.array(self.grid.dims(P))
        except ValueError:
            return [], None, None
        return [d for d in range(self.grid.ndims) if len(set(fit[:, d])) == 1 and at[d] != fit[0, d]], fit, at

    def _stuck_dimensions(self, P: int) -> dict[int, list[str]]:
        """Exact sizes of grid traffic that follow no product of grid dimensions (a
        model in P) are open at a target where a grid dimension that kept one width at
        every traced P changes: the traced P cannot tell how the sizes follow it."""
        stuck, fit, at = self._stuck_axes(P)
        if not stuck:
            return {}
        out: dict[int, list[str]] = {}
        for ph in self.phases:
            bad = [(i, s.op) for i, s in enumerate(ph.slots)
                   if (s.on_grid or s.comm == COMM_CART) and s.data_note is None and any(
                       v is not None and not isinstance(v, GridPower) and len(set(v.predict(
                           np.array(self.Ps)).round(6))) > 1 for v in (s.bytes, s.recv_bytes))]
            if bad:
                out[ph.id] = [f"{_slots_text(bad)}: sizes that follow no product of grid "
                              f"dimensions, and grid dimension {', '.join(map(str, stuck))} (always "
                              f"{', '.join(str(int(fit[0, d])) for d in stuck)} wide at the traced P) is "
                              f"{', '.join(str(int(at[d])) for d in stuck)} at P={P}: the traced P cannot "
                              "tell how the sizes follow it"]
        return out

    def check_target(self, P: int) -> None:
        """Refuse P unless every phase can be placed there (:meth:`placeable` keeps the
        ones that can)."""
        _, refused = self.placeable([P])
        if refused:
            raise self.refusal(refused)

    def placeable(self, Ps: Sequence[int]) -> tuple[list[int], dict[int, list[str]]]:
        """The phases that can be placed at every P of ``Ps`` (indices), and for each of the
        others (by index) why not, every P's problems together. Raises when none can, or
        when the process grid at one of ``Ps`` is not known (:meth:`grid_problem`: a
        ``--grid`` decides it, and leaving out the phases on the grid would mislead)."""
        refused: dict[int, list[str]] = {}
        for P in Ps:
            if not isinstance(P, (int, np.integer)) or P < 1:
                raise ExtrapolationError(f"target P must be a positive integer, got {P!r}")
            grid = self.grid_problem(P)
            if grid is not None:
                err = ExtrapolationError(f"{self.app}: cannot write a logical trace: {grid}")
                err.detail = grid
                raise err
            for k, pr in self.phase_problems(P).items():
                for text in pr:
                    if text not in refused.setdefault(k, []):
                        refused[k].append(text)
        refused = {k: pr for k, pr in refused.items() if pr}
        keep = [k for k in range(len(self.phases)) if k not in refused]
        if not keep:
            raise self.refusal(refused)
        return keep, refused

    def refusal(self, refused: dict[int, list[str]]) -> ExtrapolationError:
        """The error that refuses the phases ``refused`` (index -> problems): one line naming
        each phase once, every problem in its ``detail`` (for a file: sigex --explain)."""
        bad = [(self.phases[k].id, pr) for k, pr in refused.items()]
        err = ExtrapolationError(
            f"{self.app}: cannot write a logical trace, {len(bad)} phase(s) not extrapolable: "
            + "; ".join(f"phase {pid}: {_short(pr)}" for pid, pr in bad[:5])
            + (f"; and {len(bad) - 5} more phases" if len(bad) > 5 else ""))
        err.detail = "\n".join(f"phase {pid}: {p}" for pid, pr in bad for p in pr)
        return err

    def subset(self, keep: Sequence[int], why: dict[int, list[str]] | None = None) -> "LogicalModel":
        """This model with only the phases at indices ``keep`` (they keep their ids, so the
        logical trace and the reports still name them as the signature did); the others
        go to :attr:`left_out` with their problems ``why`` (index -> problems)."""
        keep = list(keep)
        out = [{"id": ph.id, "kind": ph.kind, "pattern": ph.pattern,
                "problem": _short((why or {}).get(k) or ["left out"])}
               for k, ph in enumerate(self.phases) if k not in keep]
        return dataclasses.replace(self, phases=[self.phases[k] for k in keep],
                                   left_out=self.left_out + out)

    def deferred_phase(self, k: int, why: str) -> "LogicalModel":
        """This model with phase index ``k``, a statistical phase realised in its runs'
        order, realised deferred instead (its point-to-point calls nonblocking, one Waitall
        at the end of each repetition: :func:`_deferred_slots`), with ``why`` in its notes:
        made-up peers of an ordered realisation may wait on each other in a cycle (a tree
        of receives before sends, realised round-robin). Raises ValueError for a phase
        that is not statistical or is deferred already."""
        ph = self.phases[k]
        if ph.deferred or not any(s.statistical for s in ph.slots):
            raise ValueError(f"phase {ph.id} is {'deferred already' if ph.deferred else 'not statistical'}")
        note = f"realised deferred: {why}; point-to-point calls nonblocking, one Waitall at the end of the repetition"
        new = dataclasses.replace(ph, slots=_deferred_slots(list(ph.slots)), deferred=True, notes=[*ph.notes, note])
        return dataclasses.replace(self, phases=[*self.phases[:k], new, *self.phases[k + 1:]])

    def with_grid(self, P: int, dims: Sequence[int]) -> "LogicalModel":
        """This model with the process grid fixed to ``dims`` at P (``--grid``): for the
        declared grid and for every grid a slot's rule or communicators were inferred on."""
        dims = tuple(int(d) for d in dims)
        traced = self.traced_grids(P)
        if traced:  # a grid of one class's ranks (its size at P), or of every rank
            n = int(np.prod(dims))
            sizes = sorted({m for ph in self.phases for s in ph.slots
                            if any(on_traced_grid(r) for r in [s.peer, s.recv_peer] + [a for _, a in s.alternatives])
                            for m in _slot_sizes(s, P)}
                           | {cg.class_size(P) for ph in self.phases for cg in map(_class_grid, ph.slots)
                              if cg is not None and cg.grid.rule.name == "traced"})
            if n in sizes:
                return _fix_traced(self, n, dims, P)
            if n != P:
                raise ExtrapolationError(
                    f"--grid {'x'.join(map(str, dims))} has {n} processes; at P={P} the grids the traced P "
                    f"cannot give have {' or '.join(map(str, sizes))} ranks")
        if int(np.prod(dims)) != P:
            raise ExtrapolationError(f"--grid {'x'.join(map(str, dims))} has {int(np.prod(dims))} "
                                     f"processes, not the target's {P}")
        grids = ([self.grid] if self.grid else []) + [
            s.comm_role.rule for ph in self.phases for s in ph.slots if isinstance(s.comm_role, SubGrid)] + [
            r.params["grid"] for ph in self.phases for s in ph.slots for r in (s.peer, s.recv_peer)
            if r is not None and r.params.get("grid") is not None]
        if not grids:
            raise ExtrapolationError(f"{self.app}: --grid given, but the model has no process grid "
                                     "(no Cartesian communicator, sub-communicators or grid neighbours)")
        nds = {g.ndims for g in grids if g.ndims > 1} or {g.ndims for g in grids}  # (1-D: P itself)
        if nds != {len(dims)}:
            raise ExtrapolationError(f"--grid {'x'.join(map(str, dims))} has {len(dims)} dimensions; "
                                     f"the model's grids have {sorted(nds)}")
        return _fix_grids(self, P, dims)

    def weights(self, P: int) -> list[int]:
        return [ph.weight_at(P) for ph in self.phases]

    def comm_roles(self) -> list[SubGrid]:
        """The sub-communicator layouts the slots use, each once, in order of first use."""
        out: list[SubGrid] = []
        for ph in self.phases:
            for s in ph.slots:
                if s.comm_role is not None and s.comm_role not in out:
                    out.append(s.comm_role)
        return out

    def events(self, P: int, ranks: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Every event of ``ranks`` (default: all) at P, phase by phase: columns rank,
        op, peer, recv_peer, root, tag, comm, bytes, recv_bytes, work, phase, slot; sorted
        by rank, then phase, then slot order. Vectorised over ranks."""
        from .writer import generate
        return generate(self, P, np.arange(P) if ranks is None else np.asarray(ranks, np.int64))

    def phase_problems(self, P: int) -> dict[int, list[str]]:
        """Per phase index, why it cannot be placed at P (its own problems and what the
        traced P leave open there); empty lists for the phases that can. The grid's
        problem (:meth:`grid_problem`) is every phase's that uses the declared grid."""
        grid = self.grid_problem(P)
        open_ = self.undecided(P)
        traced = self.traced_grids(P)
        out = {}
        for k, ph in enumerate(self.phases):
            pr = list(ph.problems) + traced.get(ph.id, []) + open_.get(ph.id, [])
            if grid and any(s.comm == COMM_CART or (s.peer is not None and s.peer.family == "cart"
                                                     and s.peer.params.get("grid") is None)
                            for s in ph.slots):
                pr.insert(0, grid)
            pr += [f"slot {i} ({OPS[s.op]}): {why}" for i, s in enumerate(ph.slots)
                   if s.tree is not None and (why := s.tree.problem(P))][:1]
            pr += [f"slot {i} ({OPS[s.op]}): {why}" for i, s in enumerate(ph.slots)
                   if (why := _layout_problem(s, P))][:1]
            if not pr and ph.deferred:
                lost = self._unmatched(k, P)
                if lost:
                    pr.append(lost)
            out[k] = pr
        return out

    def _unmatched(self, k: int, P: int) -> str | None:
        """Why a deferred phase's realisation at P cannot replay: messages and receives that
        do not pair up per (sender, receiver, communicator, tag), which would leave a rank
        waiting at the phase's Waitall (None: every one pairs up)."""
        from .writer import _phase_tables, comm_ids
        ev = _phase_tables(self, k, P, np.arange(P), comm_ids(self, P)[0])
        op = np.asarray(ev["op"], np.int64)
        both = np.isin(op, [OP_CODE[n] for n in ("Sendrecv", "Sendrecv_replace", "Isendrecv", "Isendrecv_replace")])
        snd = (np.isin(op, list(SEND_OPS)) | both) & (ev["peer"] >= 0)
        rcv_peer = np.where(both, ev["recv_peer"], ev["peer"])
        rcv = (np.isin(op, list(RECV_OPS)) | both) & (rcv_peer >= 0)
        cols = lambda a, b, m: [np.asarray(c, np.int64)[m] for c in (a, b, ev["comm"], ev["tag"])]  # noqa: E731
        s_cols, r_cols = cols(ev["rank"], ev["peer"], snd), cols(rcv_peer, ev["rank"], rcv)
        # (sender, receiver, communicator, tag) of every message and receive, counted per key;
        # receives of any tag (MPI_ANY_TAG: hpcc's RandomAccess takes its updates and its
        # "finished" messages on one receive) take what the tagged receives leave, as MPI
        # matches them, per (sender, receiver, communicator). Sorted keys, vectorised: a
        # realisation at a large P has a key for every pair of ranks.
        wild = r_cols[3] < 0
        n_s = len(s_cols[0])
        g4, u4 = _key_groups([np.concatenate([a, b[~wild]]) for a, b in zip(s_cols, r_cols)])
        n4 = len(u4[0])
        n_send = np.bincount(g4[:n_s], minlength=n4)
        n_recv = np.bincount(g4[n_s:], minlength=n4)
        # per (sender, receiver, communicator): what the tagged receives leave, and the
        # receives of any tag
        g3, u3 = _key_groups([np.concatenate([u4[i], r_cols[i][wild]]) for i in range(3)])
        sent = n_send > 0  # (a tagged receive nothing is sent to stays unpaired)
        left = np.bincount(g3[:n4], weights=np.where(sent, n_send - n_recv, 0), minlength=len(u3[0]))
        n_wild = np.bincount(g3[n4:], minlength=len(u3[0]))
        took = (n_wild > 0) & (left == n_wild)  # every message left to them
        n_recv = np.where(took[g3[:n4]] & sent, n_send, n_recv)
        rest = (n_wild > 0) & ~took  # receives of any tag that do not pair: keys of their own
        off = n_send != n_recv
        bad_keys = [np.concatenate([u4[i][off], u3[i][rest] if i < 3 else np.full(int(rest.sum()), -1)])
                    for i in range(4)]
        bad_s = np.concatenate([n_send[off], np.zeros(int(rest.sum()), np.int64)])
        bad_r = np.concatenate([n_recv[off], n_wild[rest]])
        if not len(bad_s):
            return None
        first = np.lexsort(bad_keys[::-1])[0]
        a, b = int(bad_keys[0][first]), int(bad_keys[1][first])
        return (f"its deferred realisation at P={P} pairs {len(bad_s)} (sender, receiver) channels unevenly "
                f"(rank {a} sends rank {b} {int(bad_s[first])} messages, rank {b} posts "
                f"{int(bad_r[first])} receives): a replay would wait forever")

    def phase_events(self, k: int, P: int, ranks: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The events of phase index ``k`` alone at P (one repetition, rank-major, the
        columns of :meth:`events` but work and completions), for a phase that can be
        placed there even when others cannot (:meth:`phase_problems`)."""
        from .writer import _phase_tables, comm_ids
        pr = self.phase_problems(P)[k]
        if pr:
            raise ExtrapolationError(f"{self.app}: phase {self.phases[k].id} cannot be placed at P={P}: "
                                     + _short(pr))
        ranks = np.arange(P) if ranks is None else np.asarray(ranks, np.int64)
        ev = _phase_tables(self, k, P, ranks, comm_ids(self, P)[0])
        return {c: v for c, v in ev.items() if not c.startswith("_")}

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
        grid = (f"declared {self.grid.describe()}" if self.grid else "no Cartesian grid")
        if self.grid_rules:
            grid += " (also fit: " + "; ".join(r.describe() for r in self.grid_rules[:4]) + (
                f" and {len(self.grid_rules) - 4} more" if len(self.grid_rules) > 4 else "") + ")"
        out = [f"logical model of {self.app or '?'} from P = {', '.join(map(str, self.Ps))} "
               + (f"({self.workload_label}={self.workload_value})" if self.workload_label else "(no workload label)")
               + f"; {mode}; {grid}"]
        open_: dict[int, list[str]] = {}
        if target:  # what the traced P leave open at the target, where it matters
            grid_open = self.grid_problem(target)
            if grid_open:
                out.append(f"open at P={target}: {grid_open}")
            else:
                open_ = self.undecided(target)
                for pid, texts in self.traced_grids(target).items():
                    open_[pid] = texts + open_.get(pid, [])
                for pid, texts in self.undecided(target, weaker=True).items():
                    open_.setdefault(pid, []).extend(f"(less likely, not refused) {t}" for t in texts)
        for ph in self.phases:
            out.append("")
            status = "OK" if ph.extrapolable else "NOT EXTRAPOLABLE"
            w_meas = ", ".join(f"{w}@{p}" for p, w in sorted(ph.measured_weights.items()))
            out.append(f"phase {ph.id} ({ph.kind}) {ph.pattern}   [{status}]")
            if ph.classes:
                out.append(f"  rank classes ({ph.classes}) order the events differently: "
                           + "; ".join(f"class {c}: slots {[i for _, i in sorted(zip(o, range(len(o))))]}"
                                       for c, o in enumerate(ph.orders)))
            out.append(f"  weight   {ph.weight.formula()}   measured {w_meas}"
                       + (f"   -> {ph.weight_at(target)} at P={target}" if target else ""))
            if ph.statistical:
                totals = "; ".join(f"{what} per rank {v.formula()} (the channels scaled to it)"
                                   for what, v in (("messages", ph.stat_messages), ("bytes", ph.stat_bytes))
                                   if v is not None)
                out.append("  statistical: calls per rank are expected values; counts and volumes follow the "
                           "model, peers do not" + (f"; {totals}" if totals else ""))
                open_remaps = [(i, why) for i, s in enumerate(ph.slots)
                               if target and s.overlap is not None and (why := s.overlap.problem(target))]
                if open_remaps:
                    out.append(f"  remaps placed statistically at P={target} (slots "
                               f"{', '.join(str(i) for i, _ in open_remaps)}): {open_remaps[0][1]}")
            rows = []
            shown = ph.slots if max_slots is None else ph.slots[:max_slots]
            for i, s in enumerate(shown):
                vol = s.bytes.formula() if s.bytes is not None else "-"
                if s.recv_bytes is not None and s.bytes is None:
                    vol = s.recv_bytes.formula()
                for what, v in (("sent", s.root_bytes), ("received", s.root_recv_bytes)):
                    if v is not None:
                        where = "the root" if s.special is None else s.special.describe()
                        vol += f"; {what} at {where}: {v.formula()}"
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
            for text in open_.get(ph.id, []):
                out.append(f"  open at P={target}: {text}")
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
                "grid": self.grid.to_dict() if self.grid else None,
                "grid_rules": [r.to_dict() for r in self.grid_rules],
                "phases": [p.to_dict() for p in self.phases], "sources": self.sources,
                "notes": self.notes, "left_out": self.left_out}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LogicalModel":
        if d.get("kind") != "sigex-logical-model" or d.get("format") != 1:
            raise TraceFormatError("not a sigex logical model (format 1)")
        g = d["grid"]
        return cls(app=d["app"], work_mode=d["work_mode"], work_unit=d["work_unit"],
                   Ps=[int(p) for p in d["Ps"]], workload_label=d["workload_label"],
                   workload_value=d["workload_value"],
                   grid=Grid.from_dict(g) if g else None,
                   phases=[PhaseModel.from_dict(p) for p in d["phases"]], sources=list(d["sources"]),
                   notes=list(d.get("notes", ())),
                   grid_rules=[DimsRule.from_dict(r) for r in d.get("grid_rules", ())],
                   left_out=[{**x, **{key: {int(P): float(v) for P, v in x[key].items()}
                                       for key in ("measured_share", "measured_computation") if key in x}}
                             for x in d.get("left_out", ())])

    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        return write_text_atomic(path, json.dumps(self.to_dict(), indent=1), overwrite=overwrite)

    @classmethod
    def load(cls, path: str | Path) -> "LogicalModel":
        path = Path(path)
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError) as err:
            raise TraceFormatError(f"{path}: cannot read the logical model ({err})") from err


def _slot_sizes(s: SlotModel, P: int) -> list[int]:
    """The sizes of the communicators a slot's rules are evaluated on at P (P itself, or
    those of its communicators, of the class of them that has it)."""
    if s.comm_role is None:
        return [P]
    try:
        colour, _, size = s.comm_role.layout(np.arange(P), P)
    except ValueError:
        return []
    size = np.broadcast_to(np.asarray(size, np.int64), colour.shape)
    if s.members is not None:
        size = size[s.members(colour, s.comm_role.n_comms(P)) >= 0]
    return sorted({int(x) for x in size})


def _class_grid(s: SlotModel) -> ClassGrid | None:
    """The layout over one class's grid a slot's calls are on (its communicators, or its
    statistical run's space), or None."""
    for role in (s.comm_role, s.space.role if s.space is not None else None):
        if isinstance(role, ClassGrid):
            return role
    return None


def _dims_or_none(rule, P: int):
    try:
        return tuple(rule.dims(P))
    except ValueError:
        return None


def _fix_traced(model: LogicalModel, n: int, dims: tuple[int, ...], P: int) -> LogicalModel:
    """A copy of ``model`` whose grids with traced dims (no dims rule: GROMACS's domain grid
    over its particle ranks) are ``dims`` at n ranks (``--grid``; trailing 1s beyond a grid's
    dimensions dropped: 4x6x1 is a 2-D 4x6). A slot whose peers fit a stride growing with P
    as well as such a grid at every traced P takes the grid: the user says there is one."""
    def given(rule: DimsRule) -> DimsRule:  # the traced rule with dims at n ranks
        d = dims
        while len(d) > rule.ndims and d[-1] == 1:
            d = d[:-1]
        if len(d) != rule.ndims:
            raise ExtrapolationError(f"--grid {'x'.join(map(str, dims))} has {len(dims)} dimensions; the grid "
                                     f"of {n} ranks has {rule.ndims}")
        return dataclasses.replace(rule, fixed=tuple((p, x) for p, x in rule.fixed if p != n) + ((n, d),))

    def fix(r):
        g = on_traced_grid(r)
        if g is None:
            return r
        return PeerRule(r.family, {**r.params, "grid": dataclasses.replace(g, rule=given(g.rule))})

    def fix_role(role):
        if not isinstance(role, ClassGrid) or role.grid.rule.name != "traced" or role.class_size(P) != n:
            return role
        return dataclasses.replace(role, grid=dataclasses.replace(role.grid, rule=given(role.grid.rule)))

    phases = []
    for ph in model.phases:
        slots = []
        for s in ph.slots:
            if _class_grid(s) is not None:
                s = dataclasses.replace(
                    s, comm_role=fix_role(s.comm_role),
                    space=dataclasses.replace(s.space, role=fix_role(s.space.role)) if s.space is not None else None)
            alts = [(f, fix(a) if isinstance(a, PeerRule) else a) for f, a in s.alternatives]
            own = {"peer": fix(s.peer), "recv_peer": fix(s.recv_peer)}
            for field in own:
                grid_alts = [a for f, a in alts if f.rstrip("~") == field and on_traced_grid(a)]
                if own[field] is not None and not on_traced_grid(own[field]) and grid_alts:
                    own[field] = grid_alts[0]
                    alts = [(f, a) for f, a in alts if f.rstrip("~") != field or (on_traced_grid(a) and a is not grid_alts[0])]
            slots.append(dataclasses.replace(s, alternatives=alts, **own))
        phases.append(dataclasses.replace(ph, slots=slots))
    return dataclasses.replace(model, phases=phases)


def _fix_grids(model: LogicalModel, P: int, dims: tuple[int, ...]) -> LogicalModel:
    """A copy of ``model`` whose every dims rule of ``len(dims)`` dimensions gives ``dims``
    at P (one of one dimension, each rank's own communicator or all of them, is P's)."""
    def rule(r: DimsRule | None, nd: int) -> DimsRule:
        r = r or DimsRule("dims_create", nd)
        if nd != len(dims):
            return r
        return dataclasses.replace(r, fixed=tuple((p, d) for p, d in r.fixed if p != P) + ((P, dims),))

    def grid(g: Grid) -> Grid:
        return dataclasses.replace(g, rule=rule(g.rule, g.ndims))

    def peer(r: PeerRule | None) -> PeerRule | None:
        if r is None or r.params.get("grid") is None:
            return r
        return PeerRule(r.family, {**r.params, "grid": grid(r.params["grid"])})

    def volume(v):
        return dataclasses.replace(v, grid=grid(v.grid)) if isinstance(v, GridPower) else v

    def role(r):
        return dataclasses.replace(r, rule=rule(r.rule, r.rule.ndims)) if isinstance(r, SubGrid) else r

    def space(sp: Space | None) -> Space | None:  # (a statistical run's ranks and where its messages go)
        return dataclasses.replace(sp, role=role(sp.role)) if sp is not None else None

    phases = []
    for ph in model.phases:
        slots = [dataclasses.replace(
            s, peer=peer(s.peer), recv_peer=peer(s.recv_peer), bytes=volume(s.bytes),
            recv_bytes=volume(s.recv_bytes), root_bytes=volume(s.root_bytes),
            root_recv_bytes=volume(s.root_recv_bytes), comm_role=role(s.comm_role), space=space(s.space),
            partners=[space(x) for x in s.partners], selves=[space(x) for x in s.selves]) for s in ph.slots]
        for s in slots:  # (the grid given settles which grid layout the communicators follow; the
            # other layouts, a class's communicators, have no grid to fix)
            s.alternatives = [(f, peer(a) if isinstance(a, PeerRule) else volume(a) if f.rstrip("~").endswith("bytes")
                               else a) for f, a in s.alternatives
                              if not (isinstance(a, SubGrid) or isinstance(a, Space) and isinstance(a.role, SubGrid))]
        phases.append(dataclasses.replace(ph, slots=slots))
    return dataclasses.replace(model, grid=grid(model.grid) if model.grid else None, phases=phases)


# ---- building ------------------------------------------------------------------------
#: communicator kinds of template events besides COMM_NONE/WORLD/CART: sub-communicators
#: (rows, columns, planes) by their member pattern, and those not modelled
_SUB_BASE, _NOT_MODELLED = 100, 99


def _comm_classes(comms, P: int, cart_id: int | tuple[int, ...] | None) -> dict[int, int]:
    """Kind of each communicator of a run: MPI_COMM_WORLD and its duplicates (same members
    in the same order) are the world; the Cartesian grid; a sub-communicator keyed by
    its member pattern (consecutive ranks, a constant stride, other); intercommunicators
    and single-rank communicators are not modelled."""
    out = {0: COMM_WORLD}
    if cart_id is not None and not isinstance(cart_id, tuple):
        out[cart_id] = COMM_CART  # (a grid of blocks' communicators stay the blocks': _block_comms)
    if comms is None:
        return out
    for c in range(1, len(comms)):
        if c in out:
            continue
        m = np.asarray(comms.members_of(c), np.int64)
        if bool(comms.inter[c]) or len(m) < 1:
            out[c] = _NOT_MODELLED
        elif len(m) == P and np.array_equal(m, np.arange(P)) and comms.cartesian(c) is None:
            out[c] = COMM_WORLD
        else:
            d = np.diff(m)
            out[c] = _SUB_BASE + (0 if np.all(d == 1) else 1 if np.all(d == d[0]) and d[0] > 0 else 2)
    return out


def _phase_keys(sigs, k: int, grids: dict, comms: dict, problems: list[str], whole_as_sub: bool = False):
    """Phase k's slot keys of every rank at every P, the arguments they were made from and
    each template event's communicator reading (kind, rank, size, peers and root in it):
    (keys per P, arguments per P, readings per P, whether a communicator other than the
    world has every rank at some P but not at every P, while the phase is on
    sub-communicators at another: a duplicate of the world is one at every P).
    Communicators that are not modelled and calls that are not extrapolated are added to
    ``problems``. ``whole_as_sub``: such communicators are sub-communicators (of the
    world's members), not the world."""
    keys_per_p, local, key_args = {}, {}, {}
    seen_whole, seen_sub = set(), False
    for s in sigs:
        ph = s.phases[k]
        T, offs = ph.template, ph.template_offsets
        P = s.nprocs
        gd = grids.get(P)
        classes = _comm_classes(comms.get(P), P, gd[2] if gd else None)
        used = {int(c) for c in np.unique(np.asarray(T["comm"], np.int64)) if c > 0}
        whole = {c for c in used if classes.get(c) == COMM_WORLD}
        seen_whole.add(bool(whole))
        seen_sub |= any(classes.get(c, -1) >= _SUB_BASE for c in used)
        if whole_as_sub:
            classes.update((c, _SUB_BASE) for c in whole)
        kind, lsize, lpeer, lrpeer, lroot = _localise(T, P, classes, comms.get(P), _block_comms(comms.get(P), gd))
        lrank = _local_ranks(T, offs, P, kind, comms.get(P))
        if np.any(kind == _NOT_MODELLED):
            bad = int(np.flatnonzero(kind == _NOT_MODELLED)[0])
            problems.append(f"P={P}: events on an intercommunicator or a one-rank communicator "
                            f"(template event {bad}) are not modelled")
        for ops, what in _NOT_EXTRAPOLATED:
            hit = np.flatnonzero(np.isin(T["op"], ops))
            if hit.size and not any(what in p for p in problems):
                problems.append(f"{OPS[int(T['op'][hit[0]])]}: {what}")
        keys_all, args_all = [], []
        for r in range(P):
            a, b = int(offs[r]), int(offs[r + 1])
            args = (T["op"][a:b], lpeer[a:b], lrpeer[a:b], T["tag"][a:b],
                    np.minimum(kind[a:b], _SUB_BASE + 2), lrank[a:b], lsize[a:b],
                    r, gd[0] if gd else None, gd[1] if gd else None)
            keys_all.append(_slot_keys(*args))
            args_all.append(args)
        keys_per_p[P] = keys_all
        key_args[P] = args_all
        local[P] = (kind, lrank, lsize, lpeer, lrpeer, lroot)
    return keys_per_p, key_args, local, seen_whole == {True, False} and seen_sub


def _block_comms(comms, gd) -> frozenset:
    """The communicators whose members are one block of a grid of blocks (:func:`grid_of`:
    each block's Cartesian communicator, and every other one of the same ranks in the same
    order, as LAMMPS talks on its partition's communicator, its Cartesian one only naming
    the neighbours)."""
    if comms is None or gd is None or not isinstance(gd[2], tuple):
        return frozenset()
    blocks = {tuple(int(x) for x in comms.members_of(c)) for c in gd[2]}
    return frozenset(c for c in range(len(comms)) if tuple(int(x) for x in comms.members_of(c)) in blocks)


def _localise(T, P: int, classes: dict[int, int], comms, blocks: frozenset = frozenset()):
    """Per template event: its communicator kind, and the rank, size, peer and receive
    peer in that communicator's own ranks (world ones outside sub-communicators). On a
    block of a grid of blocks (``blocks``: :func:`_block_comms`), point-to-point calls are
    the grid's (their peers world ranks, neighbours on it); the others stay the block's
    own (a collective over one partition)."""
    cid = np.asarray(T["comm"], np.int64)
    kind = np.array([COMM_NONE if c < 0 else classes.get(int(c), _NOT_MODELLED) for c in cid], np.int64)
    if blocks:
        kind[np.isin(cid, list(blocks)) & np.isin(np.asarray(T["op"], np.int64), list(P2P_OPS))] = COMM_CART
    lpeer, lrpeer = np.asarray(T["peer"], np.int64).copy(), np.asarray(T["recv_peer"], np.int64).copy()
    lroot = np.asarray(T["root"], np.int64).copy()
    lsize = np.full(len(cid), P, np.int64)
    sub = np.flatnonzero(kind >= _SUB_BASE)
    local_of = {}
    for c in np.unique(cid[sub]):
        m = np.asarray(comms.members_of(int(c)), np.int64)
        lut = np.full(P, -1, np.int64)
        lut[m] = np.arange(len(m))
        local_of[int(c)] = (lut, len(m))
    for e in sub:
        lut, n = local_of[int(cid[e])]
        lsize[e] = n
        for a in (lpeer, lrpeer, lroot):
            if a[e] >= 0:
                a[e] = lut[a[e]]
    return kind, lsize, lpeer, lrpeer, lroot


def _local_ranks(T, offs, P: int, kind: np.ndarray, comms) -> np.ndarray:
    """Each template event's rank in its own communicator."""
    rank = np.repeat(np.arange(P), np.diff(offs))
    out = rank.copy()
    cid = np.asarray(T["comm"], np.int64)
    for c in np.unique(cid[kind >= _SUB_BASE]):
        m = np.asarray(comms.members_of(int(c)), np.int64)
        lut = np.full(P, -1, np.int64)
        lut[m] = np.arange(len(m))
        sel = cid == c
        out[sel] = lut[rank[sel]]
    return out


def _slot_keys(op, peer, rpeer, tag, comm, lrank, lsize, rank, grid_dims, grid_periods,
               on_grid: bool = False) -> list[tuple]:
    """One rank's events of a repetition -> slot keys (occurrence-numbered); peers
    and ranks of sub-communicator events are the communicator's own. ``on_grid``: peers
    on MPI_COMM_WORLD are placed on the declared grid as well (a program that finds its
    neighbours with MPI_Cart_shift and talks on MPI_COMM_WORLD: LAMMPS)."""
    keys, count = [], {}

    def where(q: int, c: int, r: int, n: int) -> tuple:
        if q < 0:
            return ("null",) if q == PROC_NULL else ("-",)
        if grid_dims is not None and (c == COMM_CART or (on_grid and c == COMM_WORLD)):
            a = np.unravel_index(rank, grid_dims)
            b = np.unravel_index(q, grid_dims)
            disp: list = [int(y - x) for x, y in zip(a, b)]
            for d, m in enumerate(grid_dims):
                if grid_periods[d] and m == 1:
                    disp[d] = "?"  # on a periodic ring of 1, every displacement is the rank itself
                elif grid_periods[d] and m == 2 and disp[d]:
                    disp[d] = "+-"  # on a periodic ring of 2, +1 and -1 are one neighbour
                elif grid_periods[d] and abs(disp[d]) > m // 2:
                    disp[d] -= int(np.sign(disp[d])) * m
            return ("grid", *disp)
        d = (q - r) % n
        d = d - n if d > n // 2 else d
        if n == 2:  # the next and the previous rank are one: decided by the other P
            return ("near", "+-1")
        return ("near", d) if abs(d) == 1 else ("far",)

    for i in range(len(op)):
        c, r, n = int(comm[i]), int(lrank[i]), int(lsize[i])
        base = (int(op[i]), int(tag[i]), c, where(int(peer[i]), c, r, n), where(int(rpeer[i]), c, r, n))
        k = count.get(base, 0)
        count[base] = k + 1
        keys.append(base + (k,))
    return keys


def _open_side(w: tuple) -> bool:
    return w[0] == "null" or w == ("near", "+-1") or (w[0] == "grid" and ("?" in w or "+-" in w))


def _fits_side(w: tuple, c: tuple) -> bool:
    if w[0] == "null":
        return c[0] != "null"
    if w == ("near", "+-1"):
        return c[0] == "near" and c[1] in (1, -1)
    if w[0] == "grid" and ("?" in w or "+-" in w):
        return c[0] == "grid" and len(c) == len(w) and all(
            x == "?" or x == y or (x == "+-" and y in (1, -1)) for x, y in zip(w[1:], c[1:]))
    return w == c


def _merge_open_keys(keys_per_p: dict[int, list[list[tuple]]]) -> None:
    """Keys a small P leaves open join the slot they stand for. A call to MPI_PROC_NULL
    (the end of a non-periodic chain) belongs to the slot of the ranks that have a real
    peer there; on a communicator of 2 ranks, or along a periodic grid dimension 1 or 2
    wide, the next and the previous rank are one. A rank's sequence with open keys
    takes, position by position, the keys of the sequences (of any rank at any P) that
    have the same length and fit it everywhere (same operation, communicator, tag or
    none, and the decided sides equal), the most decided ones, when they all agree.
    Otherwise each open key joins the only slot with the same operation, communicator
    and occurrence that fits it and the rank does not already have. Keys are rewritten
    in place; one with no single such slot stays as it is."""
    def is_open(key):
        return _open_side(key[3]) or _open_side(key[4])

    def fits(key, c):
        return (key[0] == c[0] and key[2] == c[2] and (key[1] == c[1] or key[1] < 0)
                and all(_fits_side(key[x], c[x]) or key[x] == c[x] for x in (3, 4)))

    def openness(seq):
        return sum(_open_side(k[3]) + _open_side(k[4]) for k in seq)

    seqs = {tuple(seq): openness(seq) for ks in keys_per_p.values() for seq in ks}
    by_len: dict[int, list[tuple]] = {}
    for seq in seqs:
        by_len.setdefault(len(seq), []).append(seq)
    mapped: dict[tuple, tuple] = {}
    for seq, n_open in seqs.items():
        if not n_open:
            continue
        refs = [r for r in by_len[len(seq)] if seqs[r] < n_open and all(map(fits, seq, r))]
        if refs:
            least = min(seqs[r] for r in refs)
            best = {r for r in refs if seqs[r] == least}
            if len(best) == 1:
                mapped[seq] = best.pop()
    real = {key for seq in seqs for key in seq if not is_open(key)}
    by_base: dict[tuple, list[tuple]] = {}
    for key in real:
        by_base.setdefault((key[0], key[2], key[5]), []).append(key)
    for ks in keys_per_p.values():
        for n, seq in enumerate(ks):
            if tuple(seq) in mapped:
                ks[n] = list(mapped[tuple(seq)])
                continue
            have = set(seq)
            for j, key in enumerate(seq):
                if not is_open(key):
                    continue
                cands = [c for c in by_base.get((key[0], key[2], key[5]), ()) if c not in have and fits(key, c)]
                if len(cands) == 1:
                    seq[j] = cands[0]
                    have.add(cands[0])


def _align_open_keys(keys_per_p: dict[int, list[list[tuple]]]) -> None:
    """Sequences whose keys a small P leaves open, or that lack calls a larger P has
    (a grid dimension 1 or 2 wide: no exchange along it, or one where a wider one has
    two), take the keys of the least open sequence (of any rank at any P) they embed
    in, call by call in order (the earliest fitting call each time; the occurrence
    numbers are the reference's). A sequence that embeds in several of the least open
    ones with different keys keeps its own. Keys are rewritten in place."""
    def fits(key, c):
        if key[0] != c[0] or key[2] != c[2] or not (key[1] == c[1] or key[1] < 0):
            return False
        return all(key[x] == c[x] or _fits_side(key[x], c[x]) for x in (3, 4))

    def openness(seq):
        return sum(_open_side(k[3]) + _open_side(k[4]) for k in seq)

    def embed(seq, ref):
        out, j = [], 0
        for key in seq:
            while j < len(ref) and not fits(key, ref[j]):
                j += 1
            if j == len(ref):
                return None
            out.append(ref[j])
            j += 1
        return out

    seqs = {tuple(seq): None for ks in keys_per_p.values() for seq in ks}
    score = {seq: (openness(seq), -len(seq)) for seq in seqs}
    best = min(score.values(), default=None)
    refs = [seq for seq in seqs if score[seq] == best]
    mapped: dict[tuple, list] = {}
    for seq in seqs:
        if score[seq] == best:
            continue
        found = {tuple(e) for e in (embed(seq, r) for r in refs) if e is not None}
        if len(found) == 1:
            mapped[seq] = list(found.pop())
    for ks in keys_per_p.values():
        for n, seq in enumerate(ks):
            if tuple(seq) in mapped:
                ks[n] = list(mapped[tuple(seq)])


def _wait_keys(keys_per_p: dict[int, list[list[tuple]]], done: dict | None = None) -> None:
    """A wait or test is keyed by the call before it (the one whose request it
    completes, in a post-and-wait exchange) instead of by its occurrence among waits:
    where a larger P has more exchanges, the waits still pair with theirs. A wait that
    opens the repetition completes the previous repetition's last call: keyed "after
    wrap", whichever call that is at each P. An MPI_Wait whose request the trace names
    (``done[P]``: the template's ``completes`` column and offsets) is keyed by the call
    that posted it, wherever it waits: a rank on a grid's boundary posts fewer of a
    halo's receives and sends, then waits on each in turn (SUNDIALS's heat2D)."""
    for P, ks in keys_per_p.items():
        completes, offs = (done or {}).get(P, (None, None))
        for r, seq in enumerate(ks):
            prev: tuple = ("-",)
            count: dict[tuple, int] = {}
            base_r = int(offs[r]) if completes is not None else 0
            for j, key in enumerate(seq):
                if key[0] not in WAIT_OPS:
                    prev = key
                    continue
                c = int(completes[base_r + j]) - base_r if completes is not None else -1
                if 0 <= c < j and seq[c][0] not in WAIT_OPS:
                    where = ("done", seq[c])
                else:  # (a repetition that opens with a wait completes the previous one's last call)
                    where = ("after", prev if prev != ("-",) else "wrap")
                base = (key[0], key[1], key[2], where, key[4])
                n = count.get(base, 0)
                count[base] = n + 1
                seq[j] = base + (n,)


def _common_order(seqs) -> list | None:
    """One order of every key of ``seqs`` that keeps each sequence's order (the keys
    that may come first taken in the order they were first seen), or None where the
    sequences contradict each other."""
    ids: dict[tuple, int] = {}
    succ: list[set] = []
    for seq in seqs:
        prev = None
        for key in seq:
            i = ids.get(key)
            if i is None:
                i = ids[key] = len(succ)
                succ.append(set())
            if prev is not None:
                succ[prev].add(i)
            prev = i
    order = lex_topological(succ)
    if order is None:
        return None
    keys = list(ids)
    return [keys[i] for i in order]


def _stream_classes(keys_per_p: dict[int, list[list[tuple]]], limit: int = 24) -> list[PeerRule]:
    """Rank classes the ranks' own streams show: for each slot key only some ranks have at
    every P (a call only the PME ranks make, one on the particle ranks' communicator), the
    class of those ranks when one fits every P (:func:`~logical_model.rules.infer_members`:
    every m-th rank, one rank, all but one), each class once, at most ``limit``."""
    have: dict[tuple, dict[int, set]] = {}
    for P, ks in keys_per_p.items():
        for r, seq in enumerate(ks):
            for key in dict.fromkeys(seq):  # (in the stream's order: the classes come out the same every run)
                have.setdefault(key, {}).setdefault(P, set()).add(r)
    out: dict[str, PeerRule] = {}
    for key, per_p in have.items():
        if len(per_p) != len(keys_per_p) or all(len(v) == len(keys_per_p[P]) for P, v in per_p.items()):
            continue
        rule = infer_members({P: np.array(sorted(v), np.int64) for P, v in per_p.items()})
        if rule is not None:
            if rule.params.get("kind") == "notmod":  # a class and its complement are one split
                rule = PeerRule("member", {**rule.params, "kind": "mod"})
            out.setdefault(rule.describe(), rule)
            if len(out) >= limit:
                break
    return list(out.values())


def _class_orders(keys_per_p: dict[int, list[list[tuple]]], fn):
    """The slots and each class's positions when every class of ``fn`` (ranks, P -> class
    index) has one order, else None."""
    per_class: dict[int, dict[tuple, None]] = {}
    for P, ks in keys_per_p.items():
        cls = fn(np.arange(P), P)
        for r, seq in enumerate(ks):
            per_class.setdefault(int(cls[r]), {})[tuple(seq)] = None
    orders = {c: _common_order(list(v)) for c, v in per_class.items()}
    if any(o is None for o in orders.values()):
        return None
    union: dict[tuple, None] = {}
    for c in sorted(orders):
        union.update(dict.fromkeys(orders[c]))
    slots = list(union)
    pos = []
    for c in range(max(orders) + 1):
        o = orders.get(c, [])
        at = {key: i for i, key in enumerate(o)}
        pos.append([at.get(key, len(o) + j) for j, key in enumerate(slots)])
    return slots, pos


def _order(keys_per_p: dict[int, list[list[tuple]]], stream_classes=None):
    """The phase's slots in one order, or per rank class when the ranks share none: the
    fixed classes of :data:`ORDER_CLASSES`, then a class the ranks' streams show
    (:func:`_stream_classes`: the PME ranks, every 4th, and the others; ``stream_classes``,
    the caller's one reading of them) against the rest:
    (order, class name or the class's member rule, or None, per-class positions)."""
    all_seqs = list({tuple(seq): None for ks in keys_per_p.values() for seq in ks})
    order = _common_order(all_seqs)
    if order is not None:
        return order, None, []
    for name, fn in ORDER_CLASSES.items():
        found = _class_orders(keys_per_p, fn)
        if found is not None:
            return found[0], name, found[1]
    for rule in (stream_classes or (lambda: _stream_classes(keys_per_p)))():
        found = _class_orders(keys_per_p, lambda r, P, rule=rule: (rule(r, P) >= 0).astype(np.int64))
        if found is not None:
            return found[0], rule, found[1]
    return None, None, []


#: how :func:`_order_problem` says that ranks' repetitions are one cycle cut at other calls
_CUT_ELSEWHERE = "at other calls of one cycle"
#: the collective calls a repetition may be cut after (:func:`_recut`)
_COLLECTIVES = frozenset(OP_CODE[n] for n in (
    "Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather",
    "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw", "Reduce_scatter", "Reduce_scatter_block", "Scan", "Exscan"))


def _recut(ph):
    """Phase ``ph`` with every rank's repetition rotated to end with its last collective
    call (the same cycle, cut where all ranks meet); None where a rank with calls has no
    collective call."""
    T, offs = ph.template, np.asarray(ph.template_offsets, np.int64)
    op = np.asarray(T["op"], np.int64)
    order = np.arange(len(op))
    for r in range(len(offs) - 1):
        a, b = int(offs[r]), int(offs[r + 1])
        if a == b:
            continue
        coll = np.flatnonzero(np.isin(op[a:b], list(_COLLECTIVES)))
        if not coll.size:
            return None
        j = int(coll[-1]) + 1
        order[a:b] = np.concatenate([np.arange(a + j, b), np.arange(a, a + j)])
    return _taken(ph, order)


def _is_rotation(a: list, b: list) -> bool:
    """Whether ``b`` is ``a`` rotated by one call or more (equal lengths): ``b`` found in
    ``a + a`` at an offset in 1..len(a)-1, in time linear in their length (the obvious
    comparison of every rotation took minutes on phases of 30,000 calls)."""
    n = len(a)
    if n < 2 or len(b) != n:
        return False
    ids: dict = {}
    ia = np.array([ids.setdefault(k, len(ids)) for k in a], np.int32)
    ib = np.array([ids.get(k, -1) for k in b], np.int32)
    if (ib < 0).any():
        return False
    hay, needle = np.concatenate([ia, ia[:-1]]).tobytes(), ib.tobytes()
    at = hay.find(needle, 4)  # (offset 0 is b == a unrotated)
    while at >= 0 and at % 4:
        at = hay.find(needle, at + 1)
    return at >= 0


def _order_problem(keys_per_p: dict[int, list[list[tuple]]], stream_classes=None) -> str:
    """Why no rank class has one order, as exactly as the streams show it: two ranks of a
    class the streams show (or any two) whose calls, those both make, are the same cycle
    cut at different calls (the repetition begins elsewhere on some ranks: the signature's
    cut, no rank class), else the first two ranks whose common calls come in other orders."""
    classes = (stream_classes() if stream_classes else _stream_classes(keys_per_p, limit=4))[:4] + [None]
    for rule in classes:
        for P, ks in sorted(keys_per_p.items()):
            cls = np.zeros(P, np.int64) if rule is None else (rule(np.arange(P), P) >= 0).astype(np.int64)
            first: dict[tuple, int] = {}
            for r, seq in enumerate(ks):
                first.setdefault((int(cls[r]), tuple(seq)), r)
            reps = sorted(first.items(), key=lambda x: x[1])[:64]
            for (ca, a), ra in reps:
                for (cb, b), rb in reps:
                    if rb <= ra or ca != cb:  # (pairs of one class: a class's own order is what is missing)
                        continue
                    common = set(a) & set(b)
                    a2, b2 = [k for k in a if k in common], [k for k in b if k in common]
                    if a2 == b2 or len(a2) != len(b2) or _common_order([a2, b2]) is not None:
                        continue
                    where = "" if rule is None else f" (both {rule.describe() if cls[ra] else 'outside ' + rule.describe()})"
                    if _is_rotation(a2, b2):
                        extra = len(a) + len(b) - 2 * len(a2)
                        return (f"the signature cuts ranks {ra} and {rb} at P={P}{where} {_CUT_ELSEWHERE} "
                                f"(rank {ra}'s repetition begins with {OPS[a2[0][0]]}, rank {rb}'s with "
                                f"{OPS[b2[0][0]]}" + (f"; {extra} calls only one of them makes" if extra else "")
                                + ")")
                    return (f"ranks {ra} and {rb} at P={P}{where} make their common calls in other orders "
                            f"(rank {ra}: {', '.join(OPS[k[0]] for k in a2[:6])}...; rank {rb}: "
                            f"{', '.join(OPS[k[0]] for k in b2[:6])}...)")
    return "the ranks order the phase's events differently"


def _tag_keys(keys_per_p: dict[int, list[list[tuple]]]) -> dict:
    """Slot keys by (operation, tag, communicator, whether a peer is named) and occurrence:
    where the peer lies is left to the rules."""
    def coarse(w):
        return ("pos",) if w[0] != "-" else ("-",)

    out = {}
    for P, ks in keys_per_p.items():
        rows = []
        for seq in ks:
            count: dict[tuple, int] = {}
            row = []
            for key in seq:
                base = (key[0], key[1], key[2], coarse(key[3]), coarse(key[4]))
                n = count.get(base, 0)
                count[base] = n + 1
                row.append(base + (n,))
            rows.append(row)
        out[P] = rows
    return out


#: the operations a deferred phase keys by their count on a communicator: every call but
#: point-to-point calls and those a deferred phase does not realise (polls: thousands in
#: hpcc's RandomAccess, each a run of its own, made its statistical model take minutes)
_COUNTED = frozenset(OP_CODE.values()) - P2P_OPS - DEFERRED_DROP

#: how the problem of a phase whose ranks share no order of their calls begins
NO_ORDER = "no rank class orders its calls"


def _deferred_slots(slots: list[SlotModel]) -> list[SlotModel]:
    """A statistical phase's slots realised deferred (:attr:`PhaseModel.deferred`): the
    same slots, the phase's waits, polls and probes kept for the record but realised by
    none (:func:`~logical_model.writer._phase_tables` leaves them out), and one Waitall
    after them all that completes every request a rank posted in the repetition."""
    last = SlotModel(key="run/deferred-waitall", op=OP_CODE["Waitall"], tag=-1, comm=COMM_NONE,
                     everywhere=False, statistical=True, wait_rule="all")
    return [*slots, last]


#: a phase without an order whose calls form more runs than this in its statistical model
#: has them in an order that follows the data: its runs are merged, one per kind of call
#: (hpcc's RandomAccess: 41,378 runs and 25,586 channels between them; fitting each took
#: a minute; LAMMPS peptide's set-up, the most among the phases modelled so, has 729)
MAX_STATISTICAL_RUNS = 2048

#: a phase modelled statistically as a last resort may leave out of its channels messages whose
#: other end lies in another phase (sent here, received in the phase before: GROMACS's final
#: part), up to this share of its messages at each P; more refuses it
MAX_CROSSING_SHARE = 0.05

#: a phase whose ranks order their calls differently and that has more kinds of calls than
#: this is refused without a rule sought for each kind (see _phase_slots)
MAX_UNORDERED_SLOTS = 512


def _phase_slots(keys_per_p: dict, sigs, k: int, local: dict, comms: dict, grid, cost_col: str,
                 on_grid: bool = False):
    """The slots of phase k from its keys: (order, class name, per-class positions,
    problems, slots, notes); ``on_grid``: MPI_COMM_WORLD events' peers are sought on the
    declared grid."""
    problems, notes = [], []
    # the rank classes the streams show, read once, and only for a phase without one order
    stream_classes = functools.cache(lambda: _stream_classes(keys_per_p))
    order, class_name, positions = _order(keys_per_p, stream_classes)
    if order is None:
        longest = {P: max((len(seq) for seq in ks), default=0) for P, ks in sorted(keys_per_p.items())}
        grows = all(b > a for a, b in zip(list(longest.values()), list(longest.values())[1:]))
        learned = [r.describe() for r in stream_classes()[:3]]
        why = _order_problem(keys_per_p, stream_classes)
        grows = grows and "the signature cuts" not in why
        problems.append(f"{NO_ORDER}: " + why + " (classes tried: "
                        + "; ".join(list(ORDER_CLASSES) + learned) + "); its events cannot be placed "
                        "at a new P" + (
                            " (its longest rank has " + ", ".join(f"{n} calls at P={P}" for P, n in longest.items())
                            + ": a tree or butterfly written as point-to-point calls, whose stages grow "
                            "with P, is placed only where it is one of the trees and exchanges of "
                            "logical_model.trees)" if grows and len(longest) > 1 else ""))
        order = list({key: None for ks in keys_per_p.values() for seq in ks for key in seq})
        if len(order) > MAX_UNORDERED_SLOTS:
            # a phase this large without an order (hpcc's RandomAccess: 4,000 slots of polls
            # and sends whose order follows the data) is refused whatever its slots' rules;
            # inferring a rule for each took 60% of an extrapolation of hpcc (minutes)
            problems.append(f"its {len(order):,} kinds of calls were not examined one by one "
                            f"(over {MAX_UNORDERED_SLOTS:,} without an order)")
            return order, None, [], problems, [], notes
    index = {key: i for i, key in enumerate(order)}
    n_slots = len(order)
    obs = {i: [] for i in range(n_slots)}  # (P, ranks, event indices into template, phase)
    share_sum = np.zeros(n_slots)
    share_n = np.zeros(n_slots)
    for s in sigs:
        ph = s.phases[k]
        P = s.nprocs
        offs = ph.template_offsets
        cost = ph.template_cost.get(cost_col)
        rank_ev = {i: ([], []) for i in range(n_slots)}
        for r in range(P):
            a = int(offs[r])
            if cost is not None:
                tot = cost[a:int(offs[r + 1])].sum()
            for j, key in enumerate(keys_per_p[P][r]):
                i = index[key]
                rank_ev[i][0].append(r)
                rank_ev[i][1].append(a + j)
                if cost is not None and tot > 0:
                    share_sum[i] += cost[a + j] / tot
                    share_n[i] += 1
        for i in range(n_slots):
            obs[i].append((P, np.array(rank_ev[i][0], np.int64), np.array(rank_ev[i][1], np.int64), ph))
    slots = [_slot_model(key, obs[i], local, comms, grid, share_sum[i] / share_n[i] if share_n[i] else 0.0,
                         f"phase {k} slot {i}", on_grid) for i, key in enumerate(order)]
    _one_traced_grid(slots, obs, local, grid)
    if on_grid:
        _face_volumes(slots)
    _mirror_volumes(slots, obs, grid)
    _follow_posts(slots, obs, order, index)
    if (on_grid or any(s.comm == COMM_CART for s in slots)) and class_name is None and grid is not None:
        slots, order, note = _dimension_analogy(slots, order, grid, sorted(s.nprocs for s in sigs))
        if note:
            notes.append(note)
    by_problem: dict[str, list[str]] = {}
    for i, slot in enumerate(slots):
        if slot.problem:
            by_problem.setdefault(slot.problem, []).append((i, slot.op))
    for text, where in by_problem.items():
        problems.append(f"{_slots_text(where)}: {text}")
    return order, class_name, positions, problems, slots, notes


def _keying_grid(key_args: dict) -> dict | None:
    """A 2-D grid on which every MPI_COMM_WORLD peer of a phase's point-to-point calls is
    a neighbour (one step along each dimension at most, across a periodic one's ends where
    it wraps) at every P, some of them over a step of one rank (else the ranks' own
    numbering keys them): {P: (dims, periods)} of the first dims rule that gives one, its
    ranks in row-major order or the other; None where none does. Only the slots' keys read
    it: the peers' rules are sought as for any slot. Not 3-D: on 2 x 2 x 2 every partner of
    a butterfly is a neighbour, and a hypercube's stages, which grow with P, would be read
    as fixed displacements (:mod:`~logical_model.trees` reads them)."""
    pairs = {}
    for P, per_rank in key_args.items():
        a, b = [], []
        for args in per_rank:
            op, peer, rpeer, comm = (np.asarray(x, np.int64) for x in (args[0], args[1], args[2], args[4]))
            for q in (peer, rpeer):
                keep = (comm == COMM_WORLD) & (q >= 0) & (q != args[7]) & np.isin(op, list(P2P_OPS))
                a.append(np.full(int(keep.sum()), args[7], np.int64))
                b.append(q[keep])
        pairs[P] = (np.concatenate(a), np.concatenate(b)) if a else (np.zeros(0, np.int64),) * 2
    if not any(len(x) for x, _ in pairs.values()) or all(
            np.all(np.abs(x - y) == 1) for x, y in pairs.values()):
        return None
    for rule in candidate_rules(2):
        for flip in (False, True):
            out = {}
            for P, (x, y) in pairs.items():
                try:
                    dims = tuple(int(d) for d in rule.dims(P))
                except ValueError:
                    break
                dims = dims[::-1] if flip else dims
                if math.prod(dims) != P:
                    break
                d = np.stack(np.unravel_index(y, dims)) - np.stack(np.unravel_index(x, dims))
                m = np.asarray(dims)[:, None]
                wrap = (np.abs(d) == m - 1) & (m > 2)
                if not np.all((np.abs(d) <= 1) | wrap):
                    break
                out[P] = (dims, tuple(bool(w) for w in wrap.any(axis=1)))
            else:
                periods = tuple(any(o[1][i] for o in out.values()) for i in range(2))
                return {P: (dims, periods) for P, (dims, _) in out.items()}
    return None


def _slot_attempts(keys_per_p: dict, key_args: dict, sigs, k: int, local: dict, comms: dict, grid,
                   cost_col: str) -> tuple:
    """Phase k's slots (:func:`_phase_slots`) from the keys of its events read in turn
    more finely until one reading models every slot: (the attempt with the fewest
    problems, the keys it read)."""
    # the slots by (operation, tag, communicator) and occurrence, where the peer lies
    # being the rules' business (every rank calling the same operations in order; ranks
    # that skip a call at a boundary when tags tell the calls apart), else by where the
    # peer lies as well; the first that models every slot is kept
    attempts = []
    # each MPI_Wait's request, where the trace names it (the template's "completes")
    done = {s.nprocs: (np.asarray(s.phases[k].template["completes"], np.int64), s.phases[k].template_offsets)
            for s in sigs if "completes" in s.phases[k].template}

    def paired(make, **kw) -> None:
        """Attempts with the waits keyed by the call before them, then, where that leaves
        problems and the trace names each MPI_Wait's request, by the call that posted it
        (a rank on a grid's boundary posts fewer of a halo's receives and sends, then
        waits on each in turn: SUNDIALS's heat2D)."""
        for by_request in (False, True) if done else (False,):
            keys = make()
            _wait_keys(keys, done if by_request else None)
            attempts.append((_phase_slots(keys, sigs, k, local, comms, grid, cost_col, **kw), keys))
            if not attempts[-1][0][3]:
                break
    for keys in (_tag_keys(keys_per_p), keys_per_p):
        _merge_open_keys(keys)
        attempts.append((_phase_slots(keys, sigs, k, local, comms, grid, cost_col), keys))
        if not attempts[-1][0][3]:
            break
    if attempts[-1][0][3] and grid is not None:
        # MPI_COMM_WORLD peers as displacements on the declared grid, sequences aligned
        # with the calls a wider grid has, waits paired with their calls
        def on_grid():
            keys = {P: [_slot_keys(*args, on_grid=True) for args in key_args[P]] for P in key_args}
            _merge_open_keys(keys)
            _align_open_keys(keys)
            return keys
        paired(on_grid, on_grid=True)
    if attempts[-1][0][3] and grid is None and (found := _keying_grid(key_args)) is not None:
        # no declared grid, but MPI_COMM_WORLD peers that are neighbours on a grid of a dims
        # rule at every P (OpenFOAM's processor patches on its "simple" decomposition, each
        # rank's neighbours in ascending rank order, none past the boundary): keyed by their
        # displacement on it, so that a slot is one neighbour wherever a rank has it (the
        # peers' rules are then sought on every grid, as for any slot)
        def on_found():
            keys = {P: [_slot_keys(*args[:8], *found[P], on_grid=True) for args in key_args[P]] for P in key_args}
            _merge_open_keys(keys)
            _align_open_keys(keys)
            return keys
        # (waits by occurrence first: one Waitall after a rank's 2 to 4 posts)
        keys = on_found()
        attempts.append((_phase_slots(keys, sigs, k, local, comms, grid, cost_col), keys))
        if attempts[-1][0][3]:
            paired(on_found)
    if attempts[-1][0][3]:
        # waits keyed by the call before them (ranks idle at a coarse level have fewer)
        def plain():
            keys = {P: [_slot_keys(*args) for args in key_args[P]] for P in key_args}
            _merge_open_keys(keys)
            return keys
        paired(plain)
    if attempts[-1][0][3] and any(np.any(local[P][0] >= _SUB_BASE) for P in local):
        # communicators whose member pattern changes with P (a class split: the PME
        # ranks are one rank at P=4, every 4th later) are one kind of slot
        def collapsed(args):
            return (*args[:4], np.minimum(args[4], _SUB_BASE), *args[5:])
        for tagged in (True, False):
            keys = {P: [_slot_keys(*collapsed(args)) for args in key_args[P]] for P in key_args}
            keys = _tag_keys(keys) if tagged else keys
            _merge_open_keys(keys)
            attempts.append((_phase_slots(keys, sigs, k, local, comms, grid, cost_col), keys))
            if not attempts[-1][0][3]:
                break
    return min(attempts, key=lambda a: len(a[0][3]))


#: a phase whose busiest rank makes more point-to-point calls than this at a traced P is
#: not read for trees (hpcc's RandomAccess: thousands of posts in the data's order; the
#: reading passes over one call on every rank at a time, each against every block)
MAX_TREE_CALLS = 4096
#: blocking point-to-point calls a phase's trees are read from (:mod:`logical_model.trees`)
_TREE_SEND = frozenset(OP_CODE[n] for n in ("Send", "Ssend", "Bsend", "Rsend"))
_TREE_RECV = frozenset((OP_CODE["Recv"],))
_TREE_BOTH = frozenset((OP_CODE["Sendrecv"],))
#: ... and the nonblocking posts, read where the blocking calls alone are no tree (a root
#: that posts its children's messages and waits for them all at once)
_TREE_SEND_NB = _TREE_SEND | frozenset(OP_CODE[n] for n in ("Isend", "Issend"))
_TREE_RECV_NB = _TREE_RECV | frozenset((OP_CODE["Irecv"],))
#: ... and the waits, read with them where the posts alone are no tree
_TREE_WAITS = frozenset(OP_CODE[n] for n in ("Wait", "Waitall"))
#: an exchange's tags as c0 + c1 j + c2 L (j the stage's place in the loop, L the stages):
#: (c1, c2) tried in turn, a constant first, then the stage's number either way
_TAG_RULES = ((0, 0), (1, 0), (-1, 0), (-1, 1), (1, -1), (0, 1), (0, -1), (1, 1), (-1, -1))
#: ... plus a term of the rank r and the call's peer q, tried after none: r P + q (FFTW
#: tags each message of its transposes by its sender and receiver: r P + q sent, q P + r
#: received), q P + r, r (each rank tags its messages with its own rank), q; as (the
#: coefficient of r, of q), each 0, 1 or P (coded 2)
_PAIR_TAGS = ((0, 0), (2, 1), (1, 2), (1, 0), (0, 1))


def _pair_term(a: int, b: int, rank, peer, P: int):
    """A tag's term of the rank and the peer: a r + b q, a code of 2 standing for P."""
    return (P if a == 2 else a) * np.asarray(rank, np.int64) + (P if b == 2 else b) * np.asarray(peer, np.int64)


def _pair_text(a: int, b: int) -> str:
    """How a tag's rank and peer term reads (rank r, peer q)."""
    terms = [("rP" if c == 2 else "r") if x == "r" else ("qP" if c == 2 else "q")
             for x, c in (("r", a), ("q", b)) if c]
    return " + ".join(terms)


def _taken(ph, idx: np.ndarray, **changes):
    """A copy of phase ``ph`` whose template and cost columns are their events ``idx``
    (a mask or an order), with ``changes`` besides."""
    template = {c: np.asarray(v)[idx] for c, v in ph.template.items()}
    if "completes" in template:  # (indices into the template: renumbered, -1 where dropped)
        old = np.arange(len(ph.template["op"]))[idx]
        new = np.full(len(ph.template["op"]) + 1, -1, np.int64)
        new[old] = np.arange(len(old))
        template["completes"] = new[np.asarray(template["completes"], np.int64)]
    return dataclasses.replace(ph, template=template,
                               template_cost={c: np.asarray(v)[idx] for c, v in ph.template_cost.items()},
                               **changes)


def _without_events(ph, keep: np.ndarray):
    """A copy of phase ``ph`` whose templates keep only the events ``keep`` marks."""
    offs = np.asarray(ph.template_offsets, np.int64)
    kept = np.concatenate([[0], np.cumsum(keep)])[offs]
    return _taken(ph, keep, template_offsets=kept.astype(np.int64))


def _tree_phase(sigs, k: int, key_args: dict, local: dict, comms: dict, grid, cost_col: str,
                nonblocking: bool = False, waits: bool = False):
    """Phase k with trees or exchanges written as point-to-point calls (their stages
    grow with P: :mod:`logical_model.trees`): each side of each block a slot of
    its own, exact at any P, and the phase's other calls placed by the exact model,
    every rank in one order. The :func:`_phase_slots` tuple and a note, or None where
    the phase has no such block or its other calls cannot be placed so. ``nonblocking``:
    Isend, Issend and Irecv are read as the trees' calls too (their waits, after the
    blocks, are the exact model's); ``waits``: so are Wait and Waitall (an exchange whose
    stages post, send and wait: NPB CG's reductions along its rows)."""
    Ps = [s.nprocs for s in sigs]
    sends, recvs = (_TREE_SEND_NB, _TREE_RECV_NB) if nonblocking else (_TREE_SEND, _TREE_RECV)
    calls, where = {}, {}
    for s in sigs:
        P, ph = s.nprocs, s.phases[k]
        T, offs = ph.template, np.asarray(ph.template_offsets, np.int64)
        op = np.asarray(T["op"], np.int64)
        peer, rpeer = np.asarray(T["peer"], np.int64), np.asarray(T["recv_peer"], np.int64)
        p2p = (local[P][0] == COMM_WORLD) & np.isin(op, list(sends | recvs | _TREE_BOTH)) & (
            (peer >= 0) | ((peer == PEER_ANY) & np.isin(op, list(recvs))))
        if waits:
            p2p |= np.isin(op, list(_TREE_WAITS))
        calls[P], where[P] = [], []
        for r in range(P):
            idx = int(offs[r]) + np.flatnonzero(p2p[offs[r]:offs[r + 1]])
            calls[P].append([("both", int(peer[i]), int(rpeer[i])) if op[i] in _TREE_BOTH
                             else ("wait", -1, -1) if op[i] in _TREE_WAITS
                             else ("send" if op[i] in sends else "recv", int(peer[i]), -1) for i in idx])
            where[P].append(idx)
    longest = max((len(c) for P in Ps for c in calls[P]), default=0)
    if not longest or longest > MAX_TREE_CALLS:
        return None
    blocks, _ = infer_trees(calls)
    if not blocks:
        return None
    # each block side's template events per P (with, per event, its call of the stage's
    # unit and its stage), and the events left to the exact model
    keep = {P: np.ones(len(sigs[n].phases[k].template["op"]), bool) for n, P in enumerate(Ps)}
    sides = []  # (block, tree, side, {P: template event indices}, {P: rank of each}, {P: (unit call, stage)})
    for b, (tree, spans) in enumerate(blocks):
        mine = [(b, tree, side, {P: [] for P in Ps}, {P: [] for P in Ps}, {P: [] for P in Ps})
                for side in TREE_SIDES[tree.kind]]
        sides += mine
        for P in Ps:
            per_side = [tree.stage_calls(P, side) for side in TREE_SIDES[tree.kind]]
            for r in range(P):
                a, e = spans[P][r]
                idx = where[P][r][a:e]
                if len(idx) and len(idx) != idx[-1] - idx[0] + 1:
                    return None  # other calls among the block's: no one order places both
                keep[P][idx] = False
                at = 0
                for (_, _, _, ev, rk, ej), made in zip(mine, per_side):
                    got = idx[at:at + len(made[r])]
                    ev[P] += list(got)
                    rk[P] += [r] * len(got)
                    ej[P] += made[r]
                    at += len(made[r])

    by_p = {P: sigs[n].phases[k] for n, P in enumerate(Ps)}

    def col(P, name, idx):
        return np.asarray(by_p[P].template[name], np.int64)[np.asarray(idx, np.int64)]

    def sizes(ev, what):  # one size per P of these calls (else None), fitted over P
        out = []
        for c in ("bytes", "recv_bytes"):
            pts = {}
            for P in Ps:
                v = col(P, c, ev[P])
                if len(v) and np.any(v != v[0]):
                    return None  # sizes that differ between ranks (a gather's subtrees): not placed exact
                if len(v):
                    pts[P] = float(v[0])
            if len(pts) < 2:
                return None
            Pv = np.array(sorted(pts))
            out.append(_fit_volume(Pv, np.array([pts[P] for P in Pv]), grid, f"phase {k} {what} {c}"))
        return tuple(out)

    def calls_fit(sel: dict, stage: dict, n_stages: dict, what: str, numbered: bool, paired: bool = True):
        """One kind of call of a block (``sel[P]``: template events, ``stage[P]`` their
        stages' places j, ``n_stages[P]`` = L): its operation, sizes and tag as
        (c0, c1, c2, a, b), c0 + c1 j + c2 L + a r + b q (:data:`_PAIR_TAGS`: the stage's
        number either way where ``numbered``, the rank and the peer where ``paired``, else
        a constant), or None where the calls mix operations or sizes, or their tags follow
        no such rule."""
        ops = {int(x) for P in Ps for x in col(P, "op", sel[P])}
        got = sizes(sel, what)
        if len(ops) != 1 or got is None:
            return None
        tags = {P: col(P, "tag", sel[P]) for P in Ps}
        rank = {P: np.searchsorted(np.asarray(by_p[P].template_offsets, np.int64),
                                   np.asarray(sel[P], np.int64), side="right") - 1 for P in Ps}
        for a, b in _PAIR_TAGS if paired else _PAIR_TAGS[:1]:
            own = {P: tags[P] - _pair_term(a, b, rank[P], col(P, "peer", sel[P]), P) for P in Ps}
            for c1, c2 in _TAG_RULES if numbered else _TAG_RULES[:1]:
                c0 = {int(x) for P in Ps for x in own[P] - c1 * stage[P] - c2 * n_stages[P]}
                if len(c0) == 1:
                    return ops.pop(), got, (c0.pop(), c1, c2, a, b)
        return None

    tree_slots = []
    for b, tree, side, ev, rk, ej in sides:
        share = _work_share(by_p, {P: (rk[P], ev[P]) for P in Ps}, cost_col)
        n_stages = {P: tree.width(P, side) for P in Ps}
        # a tree side's receives: all from any source or all named (an exchange's sends and
        # receives differ by nature)
        wild = {bool(x) for P in Ps for x in col(P, "peer", ev[P]) == PEER_ANY}
        if tree.kind in ("bcast", "reduce") and len(wild) != 1:
            return None  # named and any sources in one side of a tree
        tree_any = tree.kind in ("bcast", "reduce") and wild == {True}
        if tree.kind in ("exchange", "fold") or tree.copies > 1:
            # each call of a stage (of the exchange's unit, a fold's send and receive, each
            # copy of a message): its operation, sizes and tags
            fits = [calls_fit({P: [i for i, (ee, _) in zip(ev[P], ej[P]) if ee == e] for P in Ps},
                              {P: np.array([j for ee, j in ej[P] if ee == e], np.int64) for P in Ps},
                              n_stages, f"block {b} call {e}", tree.kind == "exchange")
                    for e in range(len(tree.elements) * tree.copies)]
            if any(f is None for f in fits):
                return None
            ops_e, sizes_e, tags_e = zip(*fits)
            tree_slots.append((b, SlotModel(key=f"tree{b}/{side}", op=ops_e[0], tag=tags_e[0][0], comm=COMM_WORLD,
                                            everywhere=False, bytes=sizes_e[0][0], recv_bytes=sizes_e[0][1],
                                            work_share=share, tree=tree, tree_side=side, tree_any=tree_any,
                                            tree_ops=ops_e, tree_sizes=sizes_e, tree_tags=tags_e)))
            continue
        fit = calls_fit(ev, {P: np.zeros(len(ev[P]), np.int64) for P in Ps}, n_stages, f"tree {b} {side}",
                        False, False)
        if fit is None:
            return None  # the side mixes calls or tags
        op, got, (tag, *_) = fit
        tree_slots.append((b, SlotModel(key=f"tree{b}/{side}", op=op, tag=tag, comm=COMM_WORLD,
                                        everywhere=False, bytes=got[0], recv_bytes=got[1], work_share=share,
                                        tree=tree, tree_side=side, tree_any=tree_any)))
    # the other calls, placed by the exact model on templates without the trees' calls
    rest = [dataclasses.replace(s, phases=[_without_events(ph, keep[s.nprocs]) if j == k else ph
                                           for j, ph in enumerate(s.phases)]) for s in sigs]
    local_rest = {P: tuple(np.asarray(a)[keep[P]] for a in local[P]) for P in Ps}
    args_rest, keys_rest = {}, {}
    for n, P in enumerate(Ps):
        offs = np.asarray(sigs[n].phases[k].template_offsets, np.int64)
        args_rest[P] = []
        for r, args in enumerate(key_args[P]):
            m = keep[P][offs[r]:offs[r + 1]]
            args_rest[P].append(tuple(np.asarray(a)[m] for a in args[:7]) + tuple(args[7:]))
        keys_rest[P] = [_slot_keys(*args) for args in args_rest[P]]
    if any(len(seq) for P in Ps for seq in keys_rest[P]):
        (order, class_name, positions, problems, slots, notes), keys = _slot_attempts(
            keys_rest, args_rest, rest, k, local_rest, comms, grid, cost_col)
        if problems or class_name is not None:
            return None
    else:
        order, slots, notes, keys = [], [], [], {P: [[] for _ in range(P)] for P in Ps}
    # each block between the slots its ranks call before and after it (the keys read are
    # one per call left to the exact model on every rank, or the calls cannot be told apart)
    if any(len(keys[P][r]) != len(args_rest[P][r][0]) for P in Ps for r in range(P)):
        return None
    index = {key: i for i, key in enumerate(order)}
    at, last = [], 0
    for b, (tree, spans) in enumerate(blocks):
        lo, hi = last, len(order)
        for n, P in enumerate(Ps):
            offs = np.asarray(sigs[n].phases[k].template_offsets, np.int64)
            for r in range(P):
                a, e = spans[P][r]
                if a == e:
                    continue
                c = int(keep[P][offs[r]:where[P][r][a]].sum())  # the rank's other calls before it
                if c:
                    lo = max(lo, index[keys[P][r][c - 1]] + 1)
                if c < len(keys[P][r]):
                    hi = min(hi, index[keys[P][r][c]])
        if lo > hi:
            return None
        at.append(lo)
        last = lo
    out, moved = [], {}
    for i in range(len(slots) + 1):
        for b, sl in tree_slots:
            if at[b] == i:
                out.append(sl)
        if i < len(slots):
            moved[i] = len(out)
            out.append(slots[i])
    for n, sl in enumerate(out):  # the slots that name another by its index
        if sl.tree is None and (sl.follows is not None or sl.wait_of is not None):
            out[n] = dataclasses.replace(sl, follows=moved.get(sl.follows, sl.follows),
                                         wait_of=moved.get(sl.wait_of, sl.wait_of))
    note = ("its point-to-point calls are " + "; ".join(
        dict.fromkeys(t.describe() for t, _ in blocks)) + ": stages that grow with P, placed exact at any P")
    return (order, None, [], [], out, notes), note


def _one_traced_grid(slots: list[SlotModel], obs: dict, local: dict, grid: Grid | None) -> None:
    """The slots of a phase whose peers are neighbours on a grid with traced dims
    (:func:`~logical_model.rules.traced_grid_rules`) share one grid: at each size, the dims
    most of them show where they have events (a slot without events at a size, an
    exchange along a dimension 1 wide there, may take any dims that leave it none). Each
    takes those dims where its own rules still give back every traced P; a slot that
    cannot is refused, naming the dims it needs and the ones the others show (no one
    grid of the class's ranks gives every slot)."""
    votes: dict[int, dict[tuple, int]] = {}
    own: dict[int, set] = {}
    for i, s in enumerate(slots):
        if s.problem or not any(on_traced_grid(r) for r in (s.peer, s.recv_peer)):
            continue
        sizes = {int(n) for P, ranks, idx, _ in obs[i] if len(ranks) for n in np.unique(local[P][2][idx])}
        own[i] = sizes
        for r in (s.peer, s.recv_peer):
            g = on_traced_grid(r)
            if g is not None:
                for n, d in g.rule.table:
                    if n in sizes:
                        votes.setdefault(n, {}).setdefault(d, 0)
                        votes[n][d] += 1
    if not own:
        return
    consensus = {n: max(v, key=v.get) for n, v in votes.items()}

    def agree(r):
        g = on_traced_grid(r)
        if g is None:
            return r
        table = tuple((n, consensus.get(n, d)) for n, d in g.rule.table)
        return PeerRule(r.family, {**r.params, "grid": dataclasses.replace(
            g, rule=dataclasses.replace(g.rule, table=table))})

    for i in own:
        s = slots[i]
        before = (s.peer, s.recv_peer)
        s.peer, s.recv_peer = agree(s.peer), agree(s.recv_peer)
        if (s.peer, s.recv_peer) == before:
            continue
        _verify(s, obs[i], grid)
        if s.problem:
            g = on_traced_grid(before[0]) or on_traced_grid(before[1])
            differ = [(n, d, consensus[n]) for n, d in g.rule.table if n in consensus and consensus[n] != d]
            s.problem = ("its peers need a grid of the communicator's ranks that the phase's other slots "
                         "do not show (" + ", ".join(f"{'x'.join(map(str, d))} at {n} ranks where they show "
                                                     f"{'x'.join(map(str, c))}" for n, d, c in differ)
                         + "): no one grid gives every slot")
            s.peer, s.recv_peer = before


def _axis(rule: PeerRule | None) -> int | None:
    """The one grid dimension a neighbour rule moves along (None: not one)."""
    if rule is None or rule.family != "cart" or rule.params.get("grid") is not None:
        return None
    nz = [d for d, x in enumerate(rule.params["disp"]) if x]
    return nz[0] if len(nz) == 1 else None


def _moved(rule: PeerRule | None, src: int, dst: int, like: PeerRule | None = None) -> PeerRule | None:
    """A neighbour rule's displacement along ``src`` moved to ``dst``; ``like`` gives the
    skip (where the rank has no call) when set."""
    if rule is None:
        return None
    disp = [0] * len(rule.params["disp"])
    disp[dst] = rule.params["disp"][src]
    params = {**rule.params, "disp": tuple(disp)}
    if like is not None:
        params["skip"] = like.params.get("skip") if rule.params.get("skip") != "pair" else "pair"
        if params["skip"] is None:
            params.pop("skip")
    return PeerRule("cart", params)


def _grid_at(layout, P: int) -> str:
    """"4x6": the dims at P of a sub-grid layout (or of a statistical run's space on one);
    "" for any other reading, or where it has no grid at P."""
    role = layout.role if isinstance(layout, Space) else layout
    if not isinstance(role, SubGrid):
        return ""
    try:
        return "x".join(map(str, role.rule.dims(P)))
    except ValueError:
        return ""


def _communicators(layout, P: int) -> np.ndarray:
    """Each rank's communicator under a layout (a sub-grid or class layout, or a
    statistical run's space) at P, as (first member, its rank there) per rank, (-1, -1)
    outside: equal arrays are the same communicators, however the layouts number them."""
    ranks = np.arange(P)
    got = layout.layout(ranks, P)
    inside, colour, local = ((got[0], got[1], got[2]) if len(got) == 4 else (got[0] >= 0, got[0], got[1]))
    colour = np.where(inside, np.asarray(colour, np.int64), -1)
    _, at, back = np.unique(colour, return_index=True, return_inverse=True)  # (first rank of each colour)
    return np.stack([np.where(colour >= 0, at[back], -1), np.where(inside, np.asarray(local, np.int64), -1)])


def _parts(slot: SlotModel, field: str, value, P: int, grid: Grid | None, mine: dict | None = None) -> bool:
    """Whether the slot with ``value`` as its ``field`` gives other events at P than its own
    reading (``mine``: its own placement there, when known), or, for a communicator
    layout, other communicators (an Allreduce over 6 x 4's columns or 4 x 6's makes one
    call on every rank either way); False where either has no grid at P."""
    ranks = np.arange(P)
    try:
        mine = slot.place(ranks, P, grid) if mine is None else mine
        other = dataclasses.replace(slot, **{field: value}).place(ranks, P, grid)
        if field in ("comm_role", "space") and getattr(slot, field) is not None and not np.array_equal(
                _communicators(getattr(slot, field), P), _communicators(value, P)):
            return True
    except ValueError:
        return False
    return not all(np.array_equal(mine[c], other[c]) for c in mine)


def _dimension_analogy(slots: list[SlotModel], order: list, grid: Grid, Ps: list[int]):
    """The same calls along every dimension (a program that loops over the grid's
    dimensions with one code: LAMMPS's exchange, borders and forward communication), on
    MPI_COMM_WORLD with the declared grid's neighbours or on the Cartesian communicator.
    Along a periodic dimension 2 wide at every traced P, a neighbour's direction is
    open (+1 and -1 are one rank), and calls made only where a dimension is over 2 wide
    (the second direction of an exchange) never showed. Where the calls along such a
    dimension are, call by call, those along a dimension that was wider (its calls
    made only over 2 wide aside), the direction of each is that dimension's, an exact
    volume is the grid power of its twin's with the two dimensions swapped (a face
    across y is nx/dims0 x nz/dims2 where one across x is ny/dims1 x nz/dims2), and
    the calls made only over 2 wide are added along it too, after the places of the
    calls before them: (slots, order, note). Nothing changes otherwise."""
    dims = [grid.dims(P) for P in Ps]
    nd = grid.ndims
    wide = [d for d in range(nd) if any(x[d] > 2 for x in dims)]
    narrow = [d for d in range(nd) if grid.periods[d] and all(x[d] <= 2 for x in dims)]
    if not wide or not narrow:
        return slots, order, None

    def along(d):
        return [i for i, s in enumerate(slots) if _axis(s.peer) == d and not s.problem]

    def pair(i):
        return slots[i].peer.params.get("skip") == "pair"

    def waits_after(i):  # keyed by the call before them (_wait_keys)
        return [j for j, key in enumerate(order) if slots[j].op in WAIT_OPS and key[3][0] in ("after", "done")
                and key[3][1] == order[i]]

    done = []
    for d in narrow:
        mine = along(d)
        if not mine:
            continue
        for D in wide:
            plain = [i for i in along(D) if not pair(i)]
            if len(plain) != len(mine) or any(slots[x].op != slots[y].op for x, y in zip(mine, plain)):
                continue
            # each call's direction: its rule or alternative that moves the way its twin does
            chosen = {}
            for x, y in zip(mine, plain):
                got = {}
                for field in ("peer", "recv_peer"):
                    ref = getattr(slots[y], field)
                    if ref is None:
                        continue
                    want = tuple(_moved(ref, D, d).params["disp"])
                    have = [getattr(slots[x], field)] + [v for f, v in slots[x].alternatives if f == field]
                    match = [r for r in have if r is not None and tuple(r.params["disp"]) == want]
                    if not match:
                        break
                    got[field] = match[0]
                else:
                    chosen[x] = got
                    continue
                break
            if len(chosen) != len(mine):
                continue
            twin = dict(zip(plain, mine))
            # the waits of twin calls are twins too (not a wait the next repetition begins with)
            for y, x in list(twin.items()):
                wy, wx = waits_after(y), waits_after(x)
                if len(wy) == len(wx):
                    twin.update(zip(wy, wx))
            # the calls only a dimension over 2 wide makes, and their waits
            inserts: dict[int, list[tuple[int, SlotModel]]] = {}
            last, ok = None, True
            for i, sl in enumerate(slots):
                if i in twin:
                    last = twin[i]
                    continue
                extra = (i in along(D) and pair(i)) or (sl.follows is not None and sl.follows in along(D)
                                                        and pair(sl.follows))
                if not extra:
                    continue
                if last is None:
                    ok = False
                    break
                like = slots[mine[0]].peer
                copy = dataclasses.replace(
                    sl, key=f"{sl.key}/dim{d}", alternatives=[],
                    peer=_moved(sl.peer, D, d, like) if sl.peer is not None else None,
                    recv_peer=_moved(sl.recv_peer, D, d, like) if sl.recv_peer is not None else None)
                if sl.peer is not None:  # volumes: the twin of the slot it took its own from
                    src = [j for j in plain if slots[j].op == sl.op and slots[j].bytes is sl.bytes
                           and slots[j].recv_bytes is sl.recv_bytes]
                    if not src:
                        ok = False
                        break
                    m = slots[twin[src[0]]]
                    copy.bytes, copy.recv_bytes, copy.data_note = m.bytes, m.recv_bytes, m.data_note
                    copy.alternatives = [(f, v) for f, v in m.alternatives if f.rstrip("~").endswith("bytes")]
                inserts.setdefault(last, []).append((i, copy))
            if not ok:
                continue
            for x, got in chosen.items():
                for field, rule in got.items():
                    setattr(slots[x], field, rule)
                slots[x].alternatives = [(f, v) for f, v in slots[x].alternatives if f not in got]
            for y, x in zip(plain, mine):  # exact volumes: the twin's grid powers, d and D swapped
                for field in ("bytes", "recv_bytes"):
                    ref = getattr(slots[y], field)
                    if not isinstance(ref, GridPower):
                        continue
                    want = list(ref.exps)
                    want[d], want[D] = want[D], want[d]
                    have = [getattr(slots[x], field)] + [v for f, v in slots[x].alternatives if f == field]
                    match = [v for v in have if isinstance(v, GridPower) and list(v.exps) == want]
                    if match:
                        setattr(slots[x], field, match[0])
                        slots[x].alternatives = [(f, v) for f, v in slots[x].alternatives if f != field]
            new_slots, new_order, where, copy_at = [], [], {}, {}
            for i, sl in enumerate(slots):
                where[i] = len(new_slots)
                new_slots.append(sl)
                new_order.append(order[i])
                for src, c in inserts.get(i, []):
                    copy_at[src] = len(new_slots)
                    new_slots.append(c)
                    new_order.append((*order[src], f"dim{d}"))
            olds = {id(c): src for lst in inserts.values() for src, c in lst}
            for sl in new_slots:
                if sl.follows is not None:
                    sl.follows = copy_at[sl.follows] if id(sl) in olds else where[sl.follows]
            slots, order = new_slots, new_order
            done.append((d, D, sum(len(v) for v in inserts.values())))
            break
    if not done:
        return slots, order, None
    return slots, order, ("the calls along " + "; ".join(
        f"dimension {d} (2 wide at every traced P) are those along dimension {D}"
        + (f", with the {n} made only where it is over 2 wide" if n else "") for d, D, n in done))


def _face_volumes(slots: list[SlotModel]) -> None:
    """A halo across grid dimension e is a face of the sub-domain: the product of its
    other edges, each dims_k(P)^-1 (times a constant). Where a dimension did not change
    across the traced P, several grid powers reproduce every P exactly; the one of that
    form, when there is exactly one, is kept and the others dropped."""
    for s in slots:
        e = _axis(s.peer)
        if e is None:
            continue
        for field in ("bytes", "recv_bytes"):
            have = [getattr(s, field)] + [v for f, v in s.alternatives if f == field]
            if len(have) < 2 or not all(isinstance(v, GridPower) for v in have):
                continue
            face = [v for v in have if v.exps[e] == 0 and len({x for k, x in enumerate(v.exps) if k != e}) == 1
                    and all(x < 0 for k, x in enumerate(v.exps) if k != e)]
            if len(face) == 1:
                setattr(s, field, face[0])
                s.alternatives = [(f, v) for f, v in s.alternatives if f != field]


def _class_grid_roles(observed: dict[int, list[np.ndarray]], made: dict[int, set]) -> list:
    """Lines of a grid over one class's ranks (:class:`~logical_model.rules.ClassGrid`) that
    give the communicators ``observed`` at every P, every communicator of them one the run
    made: the class tried among all but every m-th rank and every m-th rank (m <= 8, the
    smallest m first; it must hold every observed communicator's ranks)."""
    for m in range(2, 9):
        for j in range(m):
            for kind in ("notmod", "mod"):
                rule = PeerRule("member", {"kind": kind, "m": m, "j": j})
                if not all(np.all(rule(np.asarray(x, np.int64), P) >= 0) for P, xs in observed.items() for x in xs):
                    continue
                found = [r for r in infer_class_grid(observed, rule) if _made_by_the_run(r, made)]
                if found:
                    return found
    return []


def _layout_problem(s: SlotModel, P: int) -> str | None:
    """Why a slot's communicators or classes have no layout at P (a fixed number of groups
    that does not divide P, powers of two at another P), or None."""
    few = np.arange(min(P, 2))  # (whether a rule has a grid at P does not depend on the ranks asked)
    try:
        for role in (s.comm_role, s.space.role if s.space is not None else None):
            if role is not None:
                colour = role.layout(few, P)[0]
                if s.members is not None and s.comm_role is not None:
                    s.members(colour, role.n_comms(P))
        if s.members is not None and s.comm_role is None:
            s.members(few, P)
    except ValueError as err:
        return f"its communicators or ranks have no layout at P={P} ({err})"
    return None


def _counts_per_communicator(counts: np.ndarray, inside: np.ndarray, space, P: int) -> np.ndarray | None:
    """Each communicator's number of calls of a collective run on sub-communicators
    (``space``), where every member of each makes the same number and no rank outside
    makes any; None otherwise (a replay would deadlock)."""
    if space is None or space.role is None or np.any(counts[~inside]):
        return None
    colour = np.asarray(space.role.layout(np.arange(P), P)[0], np.int64)[inside]
    mine = counts[inside]
    order = np.lexsort((mine, colour))
    c, m = colour[order], mine[order]
    first = np.r_[True, c[1:] != c[:-1]]
    last = np.r_[c[1:] != c[:-1], True]
    if np.any(m[first] != m[last]):
        return None
    return m[first].astype(float)


def _seen_alone(role: ClassComm, observed: dict[int, list[np.ndarray]]) -> bool:
    """Every communicator ``observed`` at each P is the class's (``role``, ``alone``)."""
    for P, ms in observed.items():
        colour, local, _ = role.layout(np.arange(P), P)
        inside = np.flatnonzero(colour >= 0)
        if any(not np.array_equal(np.asarray(m, np.int64), inside) for m in ms):
            return False
    return True


def _made_by_the_run(role, made: dict[int, set]) -> bool:
    """Every communicator of a layout (``role``) at each P of ``made`` (the member tuples
    of the communicators each run created) is one the run created."""
    for P, have in made.items():
        try:
            colour, local, _ = role.layout(np.arange(P), P)
        except ValueError:
            return False
        for c in np.unique(colour[colour >= 0]):  # (-1: a rank on none of them)
            sel = np.flatnonzero(colour == c)
            members = tuple(int(x) for x in sel[np.argsort(local[sel], kind="stable")])
            if members not in have:
                return False
    return True


def _slot_model(key: tuple, o_list: list, local: dict, comms: dict, grid: Grid | None,
                share: float, name: str, on_grid: bool = False) -> SlotModel:
    """One slot's rules from its events at every traced P (``o_list``: (P, ranks, template
    event indices, phase) per P); ``slot.problem`` says why it cannot be modelled."""
    op, tag, ck = key[0], key[1], key[2]
    sub = ck >= _SUB_BASE
    slot = SlotModel(key=_key_text(key), op=op, tag=tag,
                     comm=COMM_SUB if sub else ck if ck in (COMM_NONE, COMM_WORLD, COMM_CART) else COMM_WORLD,
                     everywhere=True, work_share=float(share),
                     on_grid=bool(on_grid and grid is not None and ck == COMM_WORLD))
    cart = grid if ck == COMM_CART or slot.on_grid else None

    def col(o, c):
        return np.asarray(o[3].template[c], np.int64)[o[2]]

    def loc(o, j):  # kind, lrank, lsize, lpeer, lrpeer, lroot of the slot's events
        return local[o[0]][j][o[2]]

    vol_grid = cart
    if sub:
        observed = {o[0]: [comms[o[0]].members_of(int(c)) for c in np.unique(col(o, "comm"))]
                    for o in o_list if len(o[1])}
        roles = infer_subgrid(observed)
        # a layout must be what the program built: every communicator it makes at a traced P
        # is one the run created (the column reading of GROMACS's PME ranks, [3, 7] at P = 8,
        # would have made [0, 4], [1, 5], [2, 6], and the run made the particle ranks' one)
        made = {P: {tuple(int(x) for x in comms[P].members_of(c)) for c in range(len(comms[P].inter))}
                for P in observed if comms.get(P) is not None}
        roles = [r for r in roles if _made_by_the_run(r, made)]
        if not roles:
            cc = infer_class_comm(observed)
            if cc is not None and not _made_by_the_run(cc, made):
                # one side's communicator alone, the other side on none (MPI_UNDEFINED: the
                # groups' leaders'): the side whose communicators were seen
                cc = next((c for c in (ClassComm(m, alone=True) for m in (cc.members, complement_members(cc.members))
                                       if m is not None) if _seen_alone(c, observed)), None)
            roles = [cc] if cc is not None and _made_by_the_run(cc, made) else []
        if not roles:
            roles = _class_grid_roles(observed, made)
        if not roles:
            slot.problem = ("its communicators follow no row, column or plane layout of a process grid "
                            "(Comm_split/Cart_sub) at every P")
            return slot
        slot.comm_role, slot.alternatives = roles[0], [("comm_role", r) for r in roles[1:]]
        if isinstance(roles[0], ClassGrid):
            # a class's grid seen only at some P (its rows where the second dimension opens):
            # the P it does not know are those where the slot makes no call, left out of its fits
            def known(P):
                try:
                    roles[0].layout(np.arange(1), P)
                    return True
                except ValueError:
                    return False
            if any(len(o[1]) and not known(o[0]) for o in o_list):
                slot.problem = "its communicators' grid is not known at a P where it is called"
                return slot
            o_list = [o for o in o_list if known(o[0])]
        if isinstance(roles[0], SubGrid):
            nd = roles[0].rule.ndims
            vol_grid = Grid(nd, (False,) * nd, roles[0].rule, roles[0].order)

    if sub and op in _PEER_OPS and any(len(o[1]) for o in o_list):
        # point-to-point traffic on only some of the communicators (the particle ranks'
        # of a particle/PME split): every member of those, a class of colours, from the P
        # where the slot has events; the class's communicators at the other P have none
        # (an exchange along a grid dimension only the larger P have over 1 wide)
        colours: dict | None = {}
        for o in o_list:
            if not len(o[1]):
                continue
            colour = slot.comm_role.layout(np.arange(o[0]), o[0])[0]
            used = np.unique(colour[o[1]])
            n = slot.comm_role.n_comms(o[0])
            if len(used) == n or not np.array_equal(np.sort(o[1]), np.flatnonzero(np.isin(colour, used))) \
                    or not np.array_equal(colours.setdefault(n, used), used):
                colours = None
                break
        if colours:
            slot.members = infer_members(colours)
            if slot.members is not None:
                slot.everywhere = False

    def observations(j):
        """Per P (per communicator on sub-communicators): ranks with a real peer on side j
        (3: peer, 4: receive peer), and those calling with MPI_PROC_NULL there; on a class
        of communicators, each of the class's communicators without the event is an
        observation with no ranks."""
        out, nulls = [], []
        for o in o_list:
            P = o[0]
            q = loc(o, j)
            if sub:
                cid = col(o, "comm")
                lr, size = loc(o, 1), loc(o, 2)
                for c in np.unique(cid):
                    m = cid == c
                    real = m & (q >= 0)
                    out.append(Observation(int(size[m][0]), lr[real], q[real]))
                    nulls.append((int(size[m][0]), lr[m & (q == PROC_NULL)], lr[m]))
                if slot.members is not None:
                    colour, _, csize = slot.comm_role.layout(np.arange(P), P)
                    mine = slot.members(colour, slot.comm_role.n_comms(P)) >= 0
                    have = np.unique(colour[o[1]])
                    for c in np.unique(colour[mine & ~np.isin(colour, have)]):
                        size_c = int(np.asarray(csize)[colour == c][0]) if np.ndim(csize) else int(csize)
                        out.append(Observation(size_c, np.zeros(0, np.int64), np.zeros(0, np.int64)))
            else:
                real = q >= 0
                out.append(Observation(P, o[1][real], q[real]))
                nulls.append((P, o[1][q == PROC_NULL], o[1]))
        return out, nulls

    def null_ends(rule, nulls, what):
        """True when the ranks the rule leaves without a peer call with PROC_NULL (the
        ranks of its class, when only a class has the event)."""
        if not any(len(n[1]) for n in nulls):
            return False
        for P, nr, allr in nulls:
            q = rule(np.arange(P), P, cart)
            mine = np.ones(P, bool) if slot.members is None or sub else slot.members(np.arange(P), P) >= 0
            if len(allr) != mine.sum() or not np.array_equal(np.sort(nr), np.flatnonzero((q < 0) & mine)):
                slot.problem = (f"at P={P} some ranks call {what} MPI_PROC_NULL where others skip the "
                                "call, or the PROC_NULL ranks are not those the rule leaves out")
                return False
        return True

    def side(j: int, field: str, what: str):
        """The rule of one side (3: peer, 4: receive peer), the alternatives that fit as
        well, and whether the ranks it leaves out call with PROC_NULL."""
        ob, nulls = observations(j)
        alts: list = []
        weaker: list = []
        rule = infer_peer(ob, cart, alternatives=alts, weaker=weaker)
        if rule is None and not sub:
            # a rule only a class of ranks follows (every m-th rank: PME ranks, the ranks
            # active at a coarse multigrid level), the class from the ranks that call
            members = slot.members or infer_members({o[0]: o[1] for o in o_list})
            if members is not None:
                rule = infer_within(ob, members, cart)
                if rule is not None:
                    slot.members = members
        if rule is None and cart is None:
            # last, a neighbour on a grid whose dims follow no rule (a load-based choice over
            # one class's ranks: GROMACS's domain grid): --grid gives them at the target
            found = traced_grid_rules(ob)
            rule, alts = (found[0], found[1:]) if found else (None, [])
        slot.alternatives += [(field, a) for a in alts] + [(field + "~", a) for a in weaker]
        return (rule, False, ob) if rule is None else (rule, null_ends(rule, nulls, what), ob)

    if op in _PEER_OPS and key[3][0] not in ("null", "-"):
        slot.everywhere = False
        rule, slot.null_ends, ob = side(3, "peer", "to")
        if rule is None:
            slot.problem = "no communication rule reproduces the peers at every P"
            return slot
        slot.peer = rule
        if vol_grid is None and rule.params.get("grid") is not None and on_traced_grid(rule) is None:
            vol_grid = rule.params["grid"]  # volumes may follow the inferred grid's dims
        if slot.null_ends and op in RECV_OPS:
            tags = np.unique(np.concatenate([col(o, "tag")[col(o, "peer") == PROC_NULL] for o in o_list]))
            if len(tags) == 1 and int(tags[0]) != tag:
                slot.null_tag = int(tags[0])
        if key[4][0] not in ("null", "-"):
            rrule, slot.recv_null_ends, ob = side(4, "recv_peer", "from")
            if rrule is None:
                slot.problem = "no rule reproduces the receive peers at every P"
                return slot
            slot.recv_peer = rrule

            def present(r, ends, P):
                mine = np.ones(P, bool) if slot.members is None else slot.members(np.arange(P), P) >= 0
                return mine & (np.ones(P, bool) if ends else r(np.arange(P), P, cart) >= 0)
            if not all(np.array_equal(present(rrule, slot.recv_null_ends, size),
                                      present(rule, slot.null_ends, size))
                       for size in {x.P for x in ob}):
                slot.problem = "send and receive sides exist on different ranks"
                return slot
    else:
        # (the ranks on the communicators: a layout over one class's grid, or a class's
        # communicator alone, leaves the others out)
        missing = [o[0] for o in o_list if len(o[1]) != (
            o[0] if not _leaves_ranks_out(slot.comm_role)
            else int((slot.comm_role.layout(np.arange(o[0]), o[0])[0] >= 0).sum()))]
        if missing and sub and any(len(o[1]) for o in o_list):
            # a collective some of the communicators call (the first row, the last column):
            # every member of those, and a class of colours found like a rule; communicators
            # of one rank may make no call (GROMACS's single PME rank at P = 4 sums nothing)
            colours: dict | None = {}
            skip = False
            # (communicators that are each one rank at every P, a library's own copy of
            # MPI_COMM_SELF, excuse none of them: the ranks that call on theirs are a class, as
            # PETSc's rank 0 broadcasting the options it read to itself)
            lone_ok = not all(np.all(np.asarray(slot.comm_role.layout(np.arange(o[0]), o[0])[2]) == 1)
                              for o in o_list)
            for o in o_list:
                colour, _, size = slot.comm_role.layout(np.arange(o[0]), o[0])
                size = np.broadcast_to(np.asarray(size), colour.shape)
                used = np.unique(colour[o[1]])
                lone = (np.setdiff1d(np.unique(colour[(size == 1) & (colour >= 0)]), used) if lone_ok
                        else np.zeros(0, colour.dtype))
                skip |= bool(len(lone))
                want = np.union1d(used, lone)
                n = slot.comm_role.n_comms(o[0])
                if not np.array_equal(np.sort(o[1]), np.flatnonzero(np.isin(colour, used))) \
                        or not np.array_equal(colours.setdefault(n, want), want):
                    colours = None
                    break
            every = colours and skip and all(len(w) == n for n, w in colours.items())
            slot.members = infer_members(colours) if colours and not every else None
            if every:  # every communicator of over one rank calls it
                slot.skip_single = True
                slot.everywhere = False
                missing = []
            elif slot.members is not None and skip:
                for o in o_list:  # one-rank communicators of the class: all call or none does
                    colour, _, size = slot.comm_role.layout(np.arange(o[0]), o[0])
                    size = np.broadcast_to(np.asarray(size), colour.shape)
                    mine = slot.members(colour, slot.comm_role.n_comms(o[0])) >= 0
                    if np.any(np.isin(o[1], np.flatnonzero(mine & (size == 1)))):
                        slot.members = None
                        break
                slot.skip_single = slot.members is not None
            if slot.members is None and not every:
                slot.problem = (f"only some members of its communicators call {OPS[op]} (at P={missing[0]}), "
                                "or only some communicators and no class of them says which")
                return slot
            slot.everywhere = False
            missing = []
        if missing and ((ck != COMM_NONE and op not in onesided.LOCAL_WINDOW_OPS)  # post/wait: a class's
                        or not all(len(o[1]) for o in o_list)):
            slot.problem = f"only some ranks call {OPS[op]} (at P={missing[0]}) and no rule says which"
            return slot
        if missing:  # a wait or test a rank class has: one rank, all but one, every m-th
            slot.everywhere = False
            slot.members = infer_members({o[0]: o[1] for o in o_list})
            if slot.members is None:
                slot.problem = (f"only some ranks call {OPS[op]} (at P={missing[0]}: ranks "
                                f"{_ranks_text(next(o[1] for o in o_list if o[0] == missing[0]))}) and no "
                                "class of ranks (one rank, all but one, every m-th) says which")
                return slot
        if op in ROOTED:
            roots = {}
            for o in o_list:
                lroot = loc(o, 5)
                sizes = loc(o, 2)
                for size in np.unique(sizes):
                    rv = np.unique(lroot[sizes == size])
                    if len(rv) != 1 or roots.get(int(size), int(rv[0])) != int(rv[0]):
                        slot.problem = f"ranks disagree on the root at P={o[0]}"
                        return slot
                    roots[int(size)] = int(rv[0])
            slot.root = infer_root(roots)
            if slot.root is None:
                slot.problem = f"no rule gives the root from P ({roots})"
                return slot
    if op in onesided.NEIGHBOR_OPS:  # the neighbours' rules and bytes per neighbour (its totals)
        onesided.learn(slot, o_list, cart, name, _fit_volume)
    else:
        _slot_volumes(slot, o_list, col, vol_grid, name)
    if slot.problem is None:
        _verify(slot, o_list, grid)
    if slot.problem is None and op in onesided.WINDOW_OPS:  # window ids, post/start groups
        onesided.learn(slot, o_list, cart, name, _fit_volume)
    return slot


_ONE_P = "seen at one P only; its volume cannot be fitted"


def _mirror_volumes(slots: list[SlotModel], obs: dict, grid: Grid | None) -> None:
    """A grid exchange seen at one P only (the second direction of an exchange along a
    dimension only the largest P has over 2 wide) takes the volumes of its mirror: the
    slot with the same operation whose grid displacements are its own negated, where
    the two carried the same sizes at that P (or sizes of the data both)."""
    def disp(rule):
        return tuple(rule.params["disp"]) if rule is not None and rule.family == "cart" else None

    for i, s in enumerate(slots):
        if s.problem != _ONE_P or disp(s.peer) is None:
            continue
        want = tuple(-x for x in disp(s.peer))
        rwant = tuple(-x for x in disp(s.recv_peer)) if s.recv_peer is not None else None
        for j, m in enumerate(slots):
            if (j == i or m.problem or m.op != s.op or m.comm != s.comm or disp(m.peer) != want
                    or (rwant is not None and disp(m.recv_peer) != rwant)):
                continue
            o = next(o for o in obs[i] if len(o[1]))
            ok = True
            for col in ("bytes", "recv_bytes"):
                model = getattr(m, col)
                v = np.asarray(o[3].template[col], float)[o[2]]
                if model is None:
                    ok &= not np.any(v)
                    continue
                if bool(m.data_note) != bool(s.data_note):
                    ok = False
                elif not m.data_note:  # sizes of the data: both directions carry the data's
                    ok &= bool(np.all(np.abs(v - _predict_scalar(model, o[0])) < 0.5))
            if ok:
                s.bytes, s.recv_bytes, s.problem = m.bytes, m.recv_bytes, None
                s.alternatives += [(f, v) for f, v in m.alternatives if f.rstrip("~").endswith("bytes")]
                s.data_note = s.data_note or m.data_note
                _verify(s, obs[i], grid)
                break


def _follow_posts(slots: list[SlotModel], obs: dict, order: list, index: dict) -> None:
    """A wait only some ranks call, keyed by the call before it (:func:`_wait_keys`), is
    present where that call is, when that holds at every traced P, or where it is
    except on the ranks whose last call of the phase it is (completed after the phase:
    by the wait the next repetition opens with, or in the next phase)."""
    calls = [i for i, sl in enumerate(slots) if sl.op not in WAIT_OPS]
    last: dict[int, np.ndarray] = {}  # per P, each rank's last call of the repetition
    if calls:
        for n, o0 in enumerate(obs[0]):
            P = o0[0]
            at = np.full(P, -1, np.int64)
            for i in calls:
                at[obs[i][n][1]] = i
            last[P] = at
    for i, s in enumerate(slots):
        key = order[i]
        if s.op not in WAIT_OPS or key[3][0] not in ("after", "done") or not (
                (s.problem or "").startswith("only some ranks") or s.members is not None):
            continue
        j = index.get(key[3][1])
        if j is None or j > i or slots[j].problem:
            continue
        for unless_last in (False, True):
            ok = True
            for a, b in zip(obs[i], obs[j]):
                want = np.sort(b[1])
                if unless_last:  # a rank's last call is completed after the phase
                    want = want[last[b[0]][want] != j]
                ok &= np.array_equal(np.sort(a[1]), want)
            if ok:
                s.follows, s.members, s.problem, s.everywhere = j, None, None, False
                s.follows_unless_last = unless_last
                break


def _slot_volumes(slot: SlotModel, o_list: list, col, grid: Grid | None, name: str) -> None:
    """Bytes per rank, exact or refused: one model for every rank, or for a rooted
    collective one for its root and one for the others; a receive from MPI_PROC_NULL
    gets no bytes where the runs recorded none. Values that differ between ranks
    otherwise make the slot a problem."""
    side = "peer" if slot.op in RECV_OPS else "recv_peer"
    if slot.null_ends if slot.op in RECV_OPS else slot.recv_null_ends:
        null_v = np.concatenate([col(o, "recv_bytes")[col(o, side) == PROC_NULL] for o in o_list])
        slot.null_no_bytes = bool(len(null_v) and np.all(null_v == 0))
    if slot.root is None:  # sizes that differ by a class of ranks (the PME ranks of a split)
        odd: dict[int, np.ndarray] = {}
        for o in o_list:
            if not len(o[1]):
                continue
            mask = np.zeros(len(o[1]), bool)
            for column in ("bytes", "recv_bytes"):
                v = col(o, column)
                if len(np.unique(v)) == 2 and not _data_dependent(o, column, np.ones(len(v), bool)):
                    vals, counts = np.unique(v, return_counts=True)
                    mask |= v != vals[np.argmax(counts)] if counts[0] != counts[1] else v == vals.max()
            odd[o[0]] = o[1][mask]
        if any(len(x) for x in odd.values()):
            slot.special = infer_members(odd)
            if slot.special is None and isinstance(slot.comm_role, ClassComm):
                # the class may lack the call where it has no odd rank (a
                # small P: GROMACS's single PME rank sums nothing at P = 4)
                full = {o[0] for o in o_list if len(o[1]) == o[0]}
                some = {P: r for P, r in odd.items() if len(r) or P in full}
                slot.special = infer_members(some) if len(some) > 1 and len(some) < len(odd) else None
    for column, root_attr in (("bytes", "root_bytes"), ("recv_bytes", "root_recv_bytes")):
        Pv, yv, Pr, yr = [], [], [], []
        for o in o_list:
            if not len(o[1]):
                continue
            v = col(o, column)
            keep = np.ones(len(v), bool)
            if column == "recv_bytes" and slot.null_no_bytes:
                keep &= col(o, side) != PROC_NULL
            at_root = np.zeros(len(v), bool)
            if slot.root is not None:
                at_root = o[1] == col(o, "root")
            elif slot.special is not None:
                at_root = slot.special(o[1], o[0]) >= 0
            rest = v[keep & ~at_root]
            if len(rest) and np.any(rest != rest[0]) and _data_dependent(o, column, keep & ~at_root):
                # sizes that change from one repetition to the next (atoms that move) and
                # differ between ranks: the data's, not a rule's; their mean is modelled
                lo, hi, mean = int(rest.min()), int(rest.max()), float(rest.mean())
                spread = (hi - lo) / mean if mean > 0 else 0.0
                slot.data_note = (f"{column} depend on the data ({lo}-{hi} across ranks at P={o[0]}, "
                                  f"{100 * spread:.0f}% apart)")
                Pv.append(o[0])
                yv.append(mean)
                rest = rest[:0]
            if len(rest) and np.any(rest != rest[0]):
                r = o[1][keep & ~at_root][np.flatnonzero(rest != rest[0])[0]]
                slot.problem = (f"{column} differ between ranks at P={o[0]} ({int(rest[0])} on most, "
                                f"{int(v[o[1] == r][0])} on rank {int(r)}) and no rule gives each rank's")
                return
            if len(rest):
                Pv.append(o[0])
                yv.append(float(rest[0]))
            if at_root.any():
                Pr.append(o[0])
                yr.append(float(v[at_root][0]))
        for P_, y_, attr in ((Pv, yv, column), (Pr, yr, root_attr)):
            if attr == root_attr and (not y_ or (len(Pv) == len(Pr) and yv == yr)):
                continue  # the root sends what the others do
            if len(set(P_)) >= 2 and any(y_):
                alts: list = []
                # a mean of the data's sizes is no exact product of grid dimensions
                setattr(slot, attr, _fit_volume(np.array(P_), np.array(y_), None if slot.data_note else grid,
                                                f"{name} {attr}", alts))
                slot.alternatives += [(attr, a) for a in alts]
            elif len(set(P_)) == 1 and any(y_):
                slot.problem = _ONE_P
                return


def _data_dependent(o: tuple, column: str, keep: np.ndarray) -> bool:
    """Whether a slot's sizes changed between the phase's repetitions on some rank (the
    signature keeps each template event's largest size beside its mean)."""
    big = o[3].template_cost.get(f"{column}_max")
    if big is None:
        return False
    idx = np.asarray(o[2])[keep]
    mean = np.asarray(o[3].template[column], float)[idx]
    return bool(np.any(np.asarray(big, float)[idx] > mean + 0.5))


def _verify(slot: SlotModel, o_list: list, grid: Grid | None) -> None:
    """The slot's rules placed at every traced P give back each rank's event: present on
    the same ranks, with the same peers, receive peers and root."""
    for o in o_list:
        P = o[0]
        try:
            got = slot.place(np.arange(P), P, grid)
        except ValueError as err:  # a grid with no dims for a communicator the rules reach
            slot.problem = f"its rules have no process grid for every rank at P={P} ({err})"
            return
        ranks = np.flatnonzero(got["present"])
        if not np.array_equal(ranks, np.sort(o[1])):
            diff = np.setxor1d(ranks, o[1])
            slot.problem = f"its rules place the event on other ranks than the run at P={P} (rank {int(diff[0])})"
            return
        order = np.argsort(o[1])
        for c in ("peer", "recv_peer", "root", "tag"):
            want = np.asarray(o[3].template[c], np.int64)[o[2][order]]
            have = got[c][ranks]
            if c != "tag" and getattr(slot, c) is None:
                continue
            bad = np.flatnonzero(want != have)
            if bad.size:
                slot.problem = (f"its rules give rank {int(ranks[bad[0]])} {c} {int(have[bad[0]])} at P={P}, "
                                f"the run {int(want[bad[0]])}")
                return


def _key_text(key: tuple) -> str:
    op, tag, comm, w, rw, n = key
    return f"{OPS[op]}/{tag}/{comm}/{'.'.join(map(str, w))}/{'.'.join(map(str, rw))}/{n}"


SEND_OPS = frozenset(OP_CODE[n] for n in ("Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Ibsend",
                                            "Irsend"))
SENDRECV_OPS = frozenset(OP_CODE[n] for n in ("Sendrecv", "Sendrecv_replace", "Isendrecv",
                                                "Isendrecv_replace"))


def _constant(y: float, P: int, name: str):
    """A quantity seen at one P only, taken as constant there and beyond."""
    return search.PMNF(c0=float(y), terms=(), name=name, stats={"n": 1, "constant": True},
                       points=((float(P), float(y)),))


def _fit_mean(points: dict[int, float], name: str):
    """An expected value (calls per rank, bytes per call) over P: the model search, or a
    constant where it was seen at one P."""
    Ps = np.array(sorted(points))
    y = np.array([points[p] for p in Ps], float)
    if len(Ps) == 1:
        return _constant(y[0], int(Ps[0]), name)
    if np.all(y == y[0]):
        return search.fit(Ps, y, name=name)
    return search.fit(Ps, y, name=name, positive=bool(np.all(y >= 0)))


#: the largest relative error at a fit P a class's power law may make (its expected values
#: are means over a decomposition that follows no rule of P: GROMACS's particle ranks)
_POWER_SLACK = 0.25


def _power_law(points: dict[int, float], name: str):
    """y = c * P^a through positive means of a class of ranks (a in quarters, |a| <= 2,
    least squares in log-log), where it is within :data:`_POWER_SLACK` of every point, or
    None. Of the few P a class shows (its communicator can be one rank at the smallest),
    the one-term law extrapolates where a constant plus a term fitted exactly through
    them turns negative."""
    from fractions import Fraction
    Ps = np.array(sorted(points), float)
    y = np.array([points[int(p)] for p in Ps], float)
    if len(Ps) < 2 or np.any(y <= 0) or np.all(y == y[0]):
        return None
    a = float(np.polyfit(np.log(Ps), np.log(y), 1)[0])
    a = Fraction(round(a * 4), 4)
    if abs(a) > 2:
        return None
    c = float(np.exp(np.mean(np.log(y) - float(a) * np.log(Ps))))
    pred = c * Ps ** float(a)
    err = float(np.max(np.abs(pred - y) / y))
    if err > _POWER_SLACK:
        return None
    return search.PMNF(c0=0.0 if a else c, terms=((c, a, 0),) if a else (), name=name,
                       stats={"max_rel_error": err, "power_law": True, "n": len(Ps)},
                       points=tuple((float(p), float(v)) for p, v in zip(Ps, y)))


def _better_law(points: dict[int, float], fitted, name: str):
    """Of ``fitted`` (the model search) and :func:`_power_law`, the one that, fitted on the
    smaller P, predicts the largest P's value more closely (what an expected value of a
    class of ranks must do: extrapolate); ``fitted`` where it goes through every point
    within 1% with one term at most, where the power law does not hold, or where fewer
    than 3 P show the quantity."""
    law = _power_law(points, name)
    if law is None or len(points) < 3 or _is_exact(fitted):
        return fitted
    Ps = sorted(points)
    if len(getattr(fitted, "terms", ())) <= 1 and all(
            abs(_predict_scalar(fitted, P) - points[P]) <= 0.01 * abs(points[P]) for P in Ps):
        return fitted
    Ps = sorted(points)
    head, last = {P: points[P] for P in Ps[:-1]}, points[Ps[-1]]
    small_law = _power_law(head, name)
    if small_law is None:
        return fitted
    small_fit = _fit_mean(head, name)
    err = [abs(_predict_scalar(x, Ps[-1]) - last) / abs(last) for x in (small_fit, small_law)]
    return law if err[1] < err[0] else fitted


def _rank_totals(cost, offs: np.ndarray, P: int) -> np.ndarray:
    """Each rank's sum of ``cost`` over its events ``offs[r]:offs[r+1]``; 0 for a rank
    without events (hpcc's ranks that sit out a kernel)."""
    return np.bincount(np.repeat(np.arange(P), np.diff(offs)), weights=np.asarray(cost, float), minlength=P)


def _work_share(by_p: dict, events: dict, cost_col: str) -> float:
    """The work after some calls of a phase as a share of their rank's work in it, mean
    over the calls at every P (``by_p[P]``: the phase; ``events[P]``: (ranks, template
    event indices) of the calls); 0 where the traces have no such cost."""
    shares = []
    for P, (r, e) in events.items():
        cost = by_p[P].template_cost.get(cost_col)
        if cost is None or not len(e):
            continue
        tot = _rank_totals(cost, by_p[P].template_offsets, P)
        r, e = np.asarray(r, np.int64), np.asarray(e, np.int64)
        ok = tot[r] > 0
        shares += list(np.asarray(cost, float)[e][ok] / tot[r][ok])
    return float(np.mean(shares)) if shares else 0.0


def _statistical_phase(sigs, k: int, comms: dict, grids: dict, cost_col: str,
                       grid: Grid | None = None, deferred: bool = False, merge: bool = False,
                       max_runs: int | None = None, crossing: float = 0.0,
                       dropped: dict | None = None, said: list[str] | None = None) -> list[SlotModel]:
    """Phase k as statistical slots (:mod:`logical_model.statistical`): runs of calls, the
    channels between them, expected counts and sizes fitted over P; raises
    :class:`~logical_model.statistical.StatisticalError` with the reason where it cannot.
    ``deferred``: the phase will be realised deferred (:attr:`PhaseModel.deferred`), so an
    order of runs that would deadlock as the program's calls is no reason to refuse it,
    nor are waits, polls and probes whose number differs between ranks. ``merge``: each
    kind of call is one run however the data interleaves them (with ``deferred``);
    ``max_runs``: refuse more runs than this (before fitting them); ``crossing``,
    ``dropped``: messages whose other end is in another phase left out up to that share
    (:func:`~logical_model.statistical.match`). ``said``: emptied, then given what the
    model averaged that the phase's notes must say."""
    data_notes = said if said is not None else []
    data_notes.clear()
    per_run, per_match, used = {}, {}, {}
    for s in sigs:
        ph, P = s.phases[k], s.nprocs
        T, offs = ph.template, ph.template_offsets
        gd = grids.get(P)
        kinds = _comm_classes(comms.get(P), P, gd[2] if gd else None)
        for c in np.unique(np.asarray(T["comm"], np.int64)):
            kinds.setdefault(int(c), _NOT_MODELLED)
        per_run[P] = (T["op"], T["tag"], T["comm"], T["peer"], offs, kinds)
        per_match[P] = (T["op"], T["peer"], T["recv_peer"], T["comm"], T["bytes"], offs, T["tag"])
        # the sub-communicators (Comm_split: a class and the others, rows, columns) it uses
        used[P] = {int(c): np.asarray(comms[P].members_of(int(c)), np.int64)
                   for c in np.unique(np.asarray(T["comm"], np.int64)) if kinds.get(int(c), -1) >= _SUB_BASE}
    readings: dict = {}  # a family -> the other layouts that give its communicators at every P
    families, fams = comm_families(used, readings) if any(used.values()) else ({}, [])
    runs, run_idx = _runs(per_run, POST_OPS, WAIT_OPS, P2P_OPS, COMM_WORLD, COMM_CART,
                          {P: (tuple(g[0]), tuple(g[1])) for P, g in grids.items()}, families,
                          collectives_by_count=_COUNTED if deferred else frozenset(), merge=merge)
    if max_runs is not None and len(runs) > max_runs:
        raise StatisticalError(f"its ranks' calls form {len(runs):,} runs, over {max_runs}: their order "
                               "follows the data")
    channels = _match_messages(per_match, run_idx, SEND_OPS, RECV_OPS, SENDRECV_OPS, any_source=PEER_ANY,
                               cancel_ops=frozenset((OP_CODE["Cancel"],)), crossing=crossing, dropped=dropped)
    Ps = sorted(per_run)
    by_p = {s.nprocs: s.phases[k] for s in sigs}
    classes = bool(fams)  # split communicators: a class's runs have laws of their own
    spaces = _run_spaces(runs, fams, Ps)
    if classes and not merge:  # per class, who makes each run must be known (else its peers are
        # guesses across the classes, and the order deadlocks; merged, a run of lone sends a few
        # ranks make as the data says is realised over every rank, deferred, both ends alike)
        for i, run in enumerate(runs):
            if spaces[i] is None and run.comm[0] not in ("after",) and any(
                    0 < len(np.unique(run.events[P][0])) < P for P in Ps):
                P = next(P for P in Ps if 0 < len(np.unique(run.events[P][0])) < P)
                raise StatisticalError(f"run {i} ({OPS[run.op]}): only some ranks make it (at P={P}: "
                                       f"{_ranks_text(np.unique(run.events[P][0]))}) and no class of ranks says which")
    width = [{P: len((sp or _EVERY_RANK).ranks(P)) for P in Ps} for sp in spaces]
    for c in channels:
        a, b = spaces[c.send], spaces[c.recv]
        if a != b and not all((x or _EVERY_RANK).single(P) for x in (a, b) for P in Ps):
            raise StatisticalError(f"runs {c.send} and {c.recv} exchange messages across communicators of "
                                   "a sub-grid layout")
    ends = [(spaces[c.send], spaces[c.recv]) for c in channels]  # each channel's sending and receiving ranks
    if classes:
        if not deferred:
            _check_crossing(runs, channels, spaces, Ps[-1])
        for n, c in enumerate(channels):  # every rank's run feeding one class's (or back): the
            a, b = ends[n]  # ranks of the every-rank run that take part, where a class gives them
            if (a is None) != (b is None) and runs[c.send].comm[0] != "after":
                who = c.senders if a is None else c.receivers
                rule = infer_members(who) if set(who) == set(Ps) and all(0 < len(who[P]) < P for P in Ps) else None
                if rule is None and merge:  # (merged, deferred: every rank's side of it, spread)
                    continue
                if rule is None:
                    raise StatisticalError(
                        f"runs {c.send} ({OPS[runs[c.send].op]}) and {c.recv} ({OPS[runs[c.recv].op]}): one is made "
                        f"by every rank, the other by {(a or b).describe()}; which ranks exchange is not known "
                        f"(at P={Ps[-1]}: ranks {_ranks_text(who.get(Ps[-1], np.zeros(0, np.int64)))}, no class "
                        "of ranks gives them at every P)")
                ends[n] = (Space(members=rule), b) if a is None else (a, Space(members=rule))
    msg_points = [{P: c.messages.get(P, 0) / max(len((ends[n][0] or _EVERY_RANK).ranks(P)) if ends[n][0] != spaces[c.send]
                                                 else width[c.send][P], 1) for P in Ps}
                  for n, c in enumerate(channels)]
    size_points = [{P: c.bytes[P] / c.messages[P] for P in c.messages if c.messages[P]} for c in channels]
    declared = grid
    grid = _vote_grids(msg_points, size_points, grid)
    remaps = _remap_channels(runs, channels, by_p, Ps, declared, spaces)
    slots = []
    stream_of: dict[int, set] = {}  # channel -> its streams (send and receive side)
    sides: dict[int, dict] = {}  # channel index -> side -> (slot, stream index)
    for i, run in enumerate(runs):
        name = f"phase {k} run {i} ({OPS[run.op]})"
        counts = {P: np.bincount(run.events[P][0], minlength=P) for P in Ps}
        # the work after each call: its share of the rank's work, mean over the run's calls
        share = _work_share(by_p, {P: run.events[P] for P in Ps}, cost_col)
        space = spaces[i]
        inside = {P: (space or _EVERY_RANK).layout(np.arange(P), P)[0] for P in Ps}
        # on split communicators, a grid of every rank says nothing of a run a class of them
        # makes (the particle ranks' own decomposition follows no rule of P): its counts
        # and sizes are the class's own laws (below)
        own_laws = classes and space is not None
        own_grid = [] if own_laws else grid
        # a communicator of one rank at some P, where the run makes no call (the PME ranks'
        # transposes with one PME rank): the run is absent there, fitted on the other P
        lone = {P: space is not None and space.role is not None and inside[P].any()
                and int(space.layout(np.arange(P), P)[3][inside[P]].max()) == 1 and not counts[P].any() for P in Ps}
        # (on the lines of a class's own grid, one P that shows them is enough: GROMACS's rows of
        # its domain grid, whose second dimension is 1 wide at P = 4 and 8, make one call each
        # where it opens)
        skip = any(lone.values()) and sum(not v for v in lone.values()) >= (
            1 if space is not None and isinstance(space.role, ClassGrid) else 2)
        fit_ps = [P for P in Ps if not (skip and lone[P])]
        slot = SlotModel(key=f"run/{_key_text_run(run.key)}", op=run.op, tag=run.tag,
                         comm=COMM_CART if run.comm == ("cart",) else COMM_NONE if run.comm[0] == "after"
                         else COMM_SUB if run.comm[0] == "sub" else COMM_WORLD, everywhere=False,
                         work_share=share, statistical=True,
                         space=space, comm_role=space.role if run.comm[0] == "sub" else None, skip_single=skip)
        if run.comm[0] == "sub":  # (where another layout gives its communicators too: checked at the target)
            slot.alternatives += [("space", Space(role=r, colour=space.colour)) for r in readings.get(run.comm[1], ())]
        if run.op in WAIT_OPS:
            if run.after is not None:
                mine = {P: counts[P] for P in Ps}
                theirs = {P: np.bincount(runs[run.after].events[P][0], minlength=P) for P in Ps}
                if all(np.array_equal(mine[P], theirs[P]) for P in Ps):
                    slot.wait_of, slot.wait_rule = run.after, "each"
                elif all(np.array_equal(mine[P], (theirs[P] > 0).astype(np.int64)) for P in Ps):
                    slot.wait_of, slot.wait_rule = run.after, "any"
            if slot.wait_of is None:
                slot.count = _fit_count({P: counts[P][inside[P]].mean() for P in fit_ps}, own_grid,
                                        f"{name} calls per rank")
        elif run.op in SEND_OPS or run.op in RECV_OPS or run.op in SENDRECV_OPS:
            mine = [c for c in channels if c.send == i or c.recv == i]
            if len(mine) == 1 and channels.index(mine[0]) in remaps:  # a remap: exact per rank where
                slot.overlap = remaps[channels.index(mine[0])]   # the traced P settle it, else the
                slot.overlap_side = "send" if mine[0].send == i else "recv"  # streams below
            halves = []
            for c in mine:
                side = "both" if run.op in SENDRECV_OPS else "send" if c.send == i else "recv"
                target = slot
                if side == "both" and c.send != c.recv:
                    # a Sendrecv whose message goes to (comes from) a run of lone sends or
                    # receives (a halo pulse whose partner has nothing to send back): that
                    # half of its calls is a Send (Recv) of its own, after the Sendrecv run
                    side = "send" if c.send == i else "recv"
                    target = dataclasses.replace(
                        slot, key=f"{slot.key}/{side}-half{len(halves)}", op=OP_CODE["Send" if side == "send" else "Recv"],
                        work_share=0.0, streams=[], partners=[], selves=[])
                    halves.append(target)
                n = channels.index(c)
                # calls to a neighbour on the declared grid follow its dimensions first
                on_decl = declared is not None and len(run.key) > 5 and run.key[4][:1] == ("dims",)
                cgrid = [] if classes and (spaces[c.send] is not None or spaces[c.recv] is not None) else grid
                m = _fit_count({P: v for P, v in msg_points[n].items() if P in fit_ps},
                               [declared] + [x for x in cgrid if x != declared] if on_decl else cgrid,
                               f"{name} messages per rank")
                have = {P: v for P, v in msg_points[n].items() if P in fit_ps and v > 0}
                mine_law = classes and (space is not None or spaces[c.send] is not None)
                if mine_law and len(have) == len(fit_ps):
                    m = _better_law(have, m, f"{name} messages per rank")
                elif mine_law and not _is_exact(m) and have and max(have) < max(fit_ps):
                    # a class's messages on a channel it has at the smaller P only (GROMACS's
                    # set-up exchange along a dimension its particle grid has at P = 4 only):
                    # closed beyond them
                    m = _constant(0.0, max(fit_ps), f"{name} messages per rank")
                elif mine_law and (not _is_exact(m) or (have and len(have) < len(fit_ps)
                                                         and max(set(fit_ps) - set(have)) < min(have))):
                    # a class's messages on a channel it has at the larger P only (a dimension
                    # of the class's own decomposition that opens there): a power law over
                    # those P, or the count at the one P that shows it (a curve through the
                    # zeros before it and the count, exact as it may be, is no law: GROMACS's
                    # lone halo halves, 0, 0 and 1.75 per particle rank at P = 4, 8, 16, went
                    # to 0 beyond)
                    m = (_power_law(have, f"{name} messages per rank")
                         or (_constant(have[max(have)], max(have), f"{name} messages per rank")
                             if len(have) == 1 else m))
                # the sizes on the grid the count follows first (a remap's pieces and peers
                # both follow the pencils)
                own = [m.grid] + [x for x in cgrid if x != m.grid] if isinstance(m, GridCount) else cgrid
                b = _fit_size(size_points[n], own, f"{name} bytes per message")
                if own_laws and not _is_exact(b):
                    b = _better_law(size_points[n], b, f"{name} bytes per message") if len(size_points[n]) >= 3 \
                        else _power_law(size_points[n], f"{name} bytes per message") or b
                target.streams.append((side, m, b))
                own, other = ends[n] if side != "recv" else ends[n][::-1]
                if side == "both":
                    own = other = space
                # (None is "the run's own space": every rank, where that is the other end
                # of a class's run, is named as such, or the receives would be realised
                # within the class while the sends go from every rank)
                other = other if other is not None or space is None else _EVERY_RANK
                target.partners.append(other if (other != space or own != space) else None)
                target.selves.append(own if own != space else None)
                stream_of.setdefault(id(c), set()).add(id(target.streams[-1]))
                sides.setdefault(n, {})[side] = (target, len(target.streams) - 1)
            if halves:
                if slot.streams:
                    slots.append((i, slot))
                slots += [(len(runs) + len(slots) + n, h) for n, h in enumerate(halves)]
                continue
            if not mine:  # calls with MPI_PROC_NULL only: no message
                continue
        elif deferred and run.op in DEFERRED_DROP:  # (not realised: their mean count is kept)
            slot.count = _fit_count({P: counts[P][inside[P]].mean() if inside[P].any() else 0.0 for P in fit_ps},
                                    own_grid, f"{name} calls per rank")
        else:
            per_comm = {}  # P -> each communicator's count, where they differ (the data chose them)
            for P in Ps:
                if len(np.unique(counts[P][inside[P]])) > 1 or np.any(counts[P][~inside[P]]):
                    own = _counts_per_communicator(counts[P], inside[P], space, P)
                    if own is not None:
                        per_comm[P] = own
                        continue
                    mode = np.bincount(counts[P][inside[P]]).argmax() if inside[P].any() else 0
                    who = np.flatnonzero(np.where(inside[P], counts[P] != mode, counts[P] > 0))
                    raise StatisticalError(f"run {i} ({OPS[run.op]}): ranks make different numbers of these calls "
                                           f"at P={P} (rank {int(who[0])}: {int(counts[P][who[0]])}); a replay "
                                           "would deadlock")
            # (communicators whose members agree among themselves but not with the others' a
            # count of the data, as k-point groups converging in their own number of
            # iterations: every communicator makes their mean, so that all its members agree)
            calls = {P: float(per_comm[P].mean()) if P in per_comm else
                     float(counts[P][inside[P]][0]) if inside[P].any() else 0.0 for P in fit_ps}
            slot.per_comm = bool(per_comm)
            if per_comm:
                spread = ", ".join(f"{np.min(v):g} to {np.max(v):g} at P={P}" for P, v in sorted(per_comm.items()))
                data_notes.append(f"{name}: its communicators make different numbers of calls ({spread}), "
                                  "each with all its members (a count of the data): their mean, as floor(mean) "
                                  "calls on every communicator and one more on as many as the fraction gives")
            slot.count = _fit_count(calls, own_grid, f"{name} calls per rank")
            top2 = [calls[P] for P in sorted(calls)[-2:]]
            if own_laws and len(calls) >= 3 and top2[0] == top2[1] and calls[min(calls)] != top2[1]:
                # a class's collective whose calls settle at the larger P (GROMACS's set-up
                # Scatterv: 1, 3, 3 calls at P = 4, 8, 16; deferred, its 2nd call: 0, 1, 1):
                # as many beyond, not a law through three points
                slot.count = _constant(top2[1], max(calls), f"{name} calls per rank")
            # a rooted collective's bytes at its root apart from the other ranks' (a Scatterv
            # of the whole system from rank 0: the root sends, the others send nothing)
            at_root = {P: np.asarray(by_p[P].template["root"], np.int64)[run.events[P][1]] == run.events[P][0]
                       for P in Ps} if run.op in ROOTED else {P: np.zeros(len(run.events[P][1]), bool) for P in Ps}
            for col in ("bytes", "recv_bytes"):
                for root_side in (False, True):
                    vals = {P: float(np.asarray(by_p[P].template[col], float)[run.events[P][1][at_root[P] == root_side]]
                                     .mean()) for P in Ps if np.any(at_root[P] == root_side)}
                    if not any(vals.values()):
                        continue
                    what = f"{name} {col} per call" + (" at the root" if root_side else "")
                    v = _fit_size(vals, own_grid, what)
                    if own_laws and not _is_exact(v):
                        v = _better_law(vals, v, what) if len(vals) >= 3 else _power_law(vals, what) or v
                    setattr(slot, ("root_" if root_side else "") + col, v)
            if run.op in ROOTED:
                roots = {}
                for P in Ps:
                    rv = np.asarray(by_p[P].template["root"], np.int64)[run.events[P][1]]
                    if space is not None and space.role is not None:  # the root in its communicator's ranks
                        rv = np.where(rv >= 0, space.role.layout(np.maximum(rv, 0), P)[1], rv)
                    rv = np.unique(rv)
                    if len(rv) > 1:
                        raise StatisticalError(f"run {i} ({OPS[run.op]}): ranks disagree on the root at P={P}")
                    if len(rv):
                        roots[P] = int(rv[0])
                slot.root = infer_root(roots) if roots else None
                if slot.root is None:
                    raise StatisticalError(f"run {i} ({OPS[run.op]}): no rule gives the root from P ({roots})")
        slots.append((i, slot))
    # a channel's receives are as many as its messages, of their size: the receiving run
    # takes the sending run's laws (fitted on its own grid or class, they could part at
    # the target and leave receives no message comes to)
    for n, got in sides.items():
        if "send" in got and "recv" in got:
            (a, i), (b, j) = got["send"], got["recv"]
            b.streams[j] = ("recv", a.streams[i][1], a.streams[i][2])
    if declared is not None:
        slots += _statistical_analogy(slots, runs, declared, Ps)
    # runs dropped above (PROC_NULL only) shift the indices waits refer to
    at = {i: n for n, (i, _) in enumerate(slots)}
    # the phase's messages and bytes per rank as wholes, where most of them are on channels
    # whose counts (sizes) are expected values rather than exact on every traced P
    totals = (None, None)
    if channels and not classes:  # (a split's classes: each channel on its own)
        top = Ps[-1]
        exact_m = exact_b = all_m = all_b = 0.0
        for c, (_, m_model, b_model) in ((c, next(t for sl in [x for _, x in slots] for t in sl.streams
                                                  if t[0] != "recv" and id(t) in stream_of[id(c)]))
                                         for n, c in enumerate(channels) if id(c) in stream_of and n not in remaps):
            n, v = c.messages.get(top, 0), c.bytes.get(top, 0)
            all_m, all_b = all_m + n, all_b + v
            exact_m += n * _is_exact(m_model)
            exact_b += v * (_is_exact(b_model) and not c.mixed)
        # (remaps are exact per rank: their messages are not scaled)
        free = [c for n, c in enumerate(channels) if n not in remaps]
        msgs = {P: sum(c.messages.get(P, 0) for c in free) / P for P in Ps}
        vol = {P: sum(c.bytes.get(P, 0) for c in free) / P for P in Ps}
        # where the counts are (a tree's messages shift between channels with P: their sum is
        # smooth); the bytes where the sizes are, whatever the counts, when their total is
        # exact or cross-validates within 1% (a halo's messages per swap follow the grid
        # while its atoms per message do not: LAMMPS peptide's channels open and close with
        # the grid's shape, their sum grows smoothly)
        scaled = exact_m < 0.5 * all_m
        vol_model = (_fit_size(vol, grid, f"phase {k} bytes per rank")
                     if exact_b < 0.5 * all_b and any(vol.values()) else None)
        good = vol_model is not None and (_is_exact(vol_model) or (
            len(getattr(vol_model, "terms", ())) <= 1 and vol_model.stats.get("cv_error", 1.0) <= 0.01))
        totals = (_fit_count(msgs, grid, f"phase {k} messages per rank") if scaled else None,
                  vol_model if good else None)
    out = []
    for i, slot in slots:
        if slot.wait_of is not None:
            if slot.wait_of not in at:
                slot.wait_of, slot.wait_rule = None, None
                slot.count = _fit_count({P: np.bincount(runs[i].events[P][0], minlength=P).mean() for P in Ps},
                                        grid, f"phase {k} run {i} calls per rank")
            else:
                slot.wait_of = at[slot.wait_of]
        out.append(slot)
    return out, totals


#: remaps found per channel's messages (phases repeat the same remaps)
_REMAP_CACHE: dict[tuple, Any] = {}


def _remap_channels(runs: list, channels: list, by_p: dict, Ps: list[int], declared: Grid | None,
                    spaces: list | None = None) -> dict:
    """The channels that are remaps between two block decompositions of one mesh
    (:func:`~logical_model.overlap.infer_remap`): {channel index: Remap}. Tried on channels
    from a run of sends to a run of receives that carry no other channel, seen at 3 or
    more P, both made by every rank (a decomposition spans the ranks: a channel between
    two classes of ranks, or within a sub-communicator, is no remap of one)."""
    rule = declared.rule if declared is not None and declared.ndims == 3 else None
    out = {}
    carried = collections.Counter()  # channels each run sends or receives
    for c in channels:
        carried.update({c.send, c.recv})
    for n, c in enumerate(channels):
        if spaces is not None and (spaces[c.send] is not None or spaces[c.recv] is not None):
            continue
        # (calls to a neighbour along given dimensions of the declared grid are a stencil's)
        if any(len(runs[x].key) > 5 and runs[x].key[4][:1] == ("dims",) for x in (c.send, c.recv)):
            continue
        if (c.send == c.recv or runs[c.send].op not in SEND_OPS or runs[c.recv].op not in RECV_OPS
                or carried[c.send] != 1 or carried[c.recv] != 1 or any(c.messages.get(P, 0) == 0 for P in Ps)
                or len(Ps) < 3):
            continue
        sends, recvs = {}, {}
        for P in Ps:
            T = by_p[P].template
            r, e = runs[c.send].events[P]
            sends[P] = (r, np.asarray(T["peer"], np.int64)[e], np.asarray(T["bytes"], np.int64)[e])
            r, e = runs[c.recv].events[P]
            recvs[P] = (r, np.asarray(T["peer"], np.int64)[e], np.asarray(T["recv_bytes"], np.int64)[e])
        key = (rule, tuple((P, *(a.tobytes() for a in sends[P]), *(a.tobytes() for a in recvs[P])) for P in Ps))
        if key not in _REMAP_CACHE:
            if len(_REMAP_CACHE) > 256:
                _REMAP_CACHE.clear()
            _REMAP_CACHE[key] = infer_remap(sends, recvs, rule)
        if _REMAP_CACHE[key] is not None:
            out[n] = _REMAP_CACHE[key]
    return out


def _statistical_analogy(slots: list, runs: list, grid: Grid, Ps: list[int]) -> list:
    """The calls a program makes along a grid dimension only where it is over 2 wide
    (:func:`_dimension_analogy` for exact phases), for a dimension 2 wide or less at
    every traced P: each run along a wider dimension D whose messages follow
    [dims_D(P) > 2] on the declared grid gets a twin along the narrow dimension d,
    with [dims_d(P) > 2] messages and sizes scaled by the ratio of the two dimensions'
    mean sizes at the largest traced P (a grid power with d and D swapped when the
    size is one); waits of those runs get twins too. Returns the new (index, slot)
    pairs, numbered after the runs."""
    try:
        dims = np.array([grid.dims(P) for P in Ps])
    except ValueError:
        return []
    narrow = [d for d in range(grid.ndims) if np.all(dims[:, d] <= 2)]
    if not narrow:
        return []

    def along(i):
        w = runs[i].key[4] if len(runs[i].key) > 5 else None
        return w[1] if isinstance(w, tuple) and w[:1] == ("dims",) and len(w) == 2 else None

    def over2(slot, D):
        return slot.streams and all(isinstance(m, GridCount) and m.cv is None and m.form == "d>2" and m.k == D
                                    and m.b == 0 and m.grid == grid for _, m, _ in slot.streams)

    def mean_size(d):
        v = [_predict_scalar(b, Ps[-1]) for i, sl in slots if along(i) == d for side, _, b in sl.streams
             if side != "recv"]
        return float(np.mean(v)) if v else None

    out, n = [], max([len(runs)] + [i + 1 for i, _ in slots])
    for d in narrow:
        copies: dict[int, int] = {}
        for i, sl in slots:
            D = along(i)
            if D is None or D == d or not over2(sl, D):
                continue
            ratio = (mean_size(d) or 0.0) / (mean_size(D) or 1.0)
            streams = []
            for side, m, b in sl.streams:
                if isinstance(b, GridPower):
                    e = list(b.exps)
                    e[d], e[D] = e[D], e[d]
                    size = dataclasses.replace(b, exps=tuple(e))
                elif isinstance(b, search.PMNF):
                    size = dataclasses.replace(b, c0=b.c0 * ratio, terms=tuple((c * ratio, x, y) for c, x, y in b.terms))
                else:
                    size = b
                streams.append((side, dataclasses.replace(m, k=d), size))
            copies[i] = n
            out.append((n, dataclasses.replace(sl, key=f"{sl.key}/dim{d}", streams=streams)))
            n += 1
        for i, sl in slots:  # the waits of the twins
            if sl.wait_of is not None and sl.wait_of in copies:
                out.append((n, dataclasses.replace(sl, key=f"{sl.key}/dim{d}", wait_of=copies[sl.wait_of])))
                n += 1
    return out


def _check_crossing(runs: list, channels: list, spaces: list, P: int) -> None:
    """Refuse a split-communicator phase whose merged order has a blocking receive run
    before a collective and the run that sends it its messages after that collective,
    where the collective's ranks hold receivers and senders both (at P): realised in
    that order, the receivers would wait in the receive while the senders wait for them
    in the collective."""
    def ranks(i):
        return set((spaces[i] or _EVERY_RANK).ranks(P).tolist())

    coll = [i for i, r in enumerate(runs) if r.op not in P2P_OPS and r.op not in WAIT_OPS]
    for c in channels:
        if c.send == c.recv or runs[c.recv].op not in BLOCKING_RECV_OPS or c.recv > c.send:
            continue
        between = [i for i in coll if c.recv < i < c.send and ranks(i) & ranks(c.recv) and ranks(i) & ranks(c.send)]
        if between:
            raise StatisticalError(
                f"run {c.recv} ({OPS[runs[c.recv].op]}) receives before the collective run {between[0]} "
                f"({OPS[runs[between[0]].op]}) what run {c.send} ({OPS[runs[c.send].op]}) sends after it: "
                "no one order of the runs serves every rank, and the realised trace would deadlock")


def _run_spaces(runs: list, fams: list, Ps: list[int]) -> list:
    """The :class:`~logical_model.statistical.Space` of each run: its family's side of a
    class split or sub-grid layout for a run on a sub-communicator (every rank it holds
    at every P must make the run's calls or none of them); on MPI_COMM_WORLD, the class
    of ranks that make it where some do not and a class (every m-th rank, ...) gives them
    at every P; a wait run's is the run of posts it completes. None: every rank (or,
    where no class says which ranks make the run, every rank with the calls spread)."""
    out: list = []
    for run in runs:
        callers = {P: np.unique(run.events[P][0]) for P in Ps}
        if run.comm[0] == "sub":
            role, colour = fams[run.comm[1]]
            sp = Space(role=role, colour=colour)
            for P in Ps:
                outside = np.setdiff1d(callers[P], sp.ranks(P))
                if outside.size:
                    raise StatisticalError(f"P={P}: rank {int(outside[0])} makes calls of {OPS[run.op]} on "
                                           f"{sp.describe()}, which it is not a member of")
            out.append(sp)
        elif run.comm[0] == "after":
            out.append(None)  # the run of posts it completes: below
        elif all(len(callers[P]) in (0, P) for P in Ps):
            out.append(None)
        else:
            rule = infer_members(callers) if all(len(callers[P]) for P in Ps) else None
            out.append(Space(members=rule) if rule is not None else None)
    for n, run in enumerate(runs):
        if run.comm[0] == "after" and run.after is not None:
            out[n] = out[run.after]
    return out


def _is_exact(model) -> bool:
    """A count or size model that reproduces every traced P exactly (a grid form, a grid
    power, a constant), not an expected value."""
    if isinstance(model, GridCount):
        return model.cv is None
    if isinstance(model, GridPower):
        return True
    return isinstance(model, search.PMNF) and not model.terms


def _key_text_run(key: tuple) -> str:
    return f"{OPS[key[0]]}/{key[1]}/{'.'.join(map(str, key[2]))}/" + "/".join(map(str, key[3:]))


def _work_levels(w: np.ndarray) -> list[np.ndarray]:
    """Ranks grouped by their work: sorted, a new group where a rank's work is over 5% above
    the previous group's smallest; groups in rising order of work."""
    order = np.argsort(w, kind="stable")
    out, start = [], 0
    for k in range(1, len(order) + 1):
        if k == len(order) or w[order[k]] > 1.05 * max(w[order[start]], 1e-300):
            out.append(np.sort(order[start:k]))
            start = k
    return out


def _classes_apart(groups: list, per_p: dict[int, np.ndarray]) -> bool:
    """Each rank of every P falls in the group its class gives (the last takes the rest)."""
    for P, w in per_p.items():
        seen = np.zeros(P, bool)
        for g in groups[:-1]:
            mine = g.members(np.arange(P), P) >= 0
            if np.any(seen & mine):
                return False
            seen |= mine
    return True


def _groups(per_p: dict[int, np.ndarray], weights: dict[int, int]) -> tuple[list[WorkGroup], str | None]:
    """Work groups (Eq. 1-3): ranks within 5% of each other; kept only when the split
    follows a rule at every P (a root that works alone, a class of ranks such as every
    4th: PME ranks), else one group."""
    note = None
    split_rules = []
    ok = True
    for P, w in per_p.items():
        if len(w) < 3 or not np.all(np.isfinite(w)):
            ok = False
            break
        med = np.median(w)
        dev = np.abs(w - med)
        top = int(np.argmax(dev))
        # one rank apart: over 5% off the median, the others within 5% of the median or,
        # where they do next to nothing (an owner that computes each item while the others
        # wait for it), within 5% of the lone rank's own excess
        others = np.delete(dev, top)
        if dev[top] <= 0.05 * max(med, 1e-300) or (
                others.size and others.max() > 0.05 * max(med, dev[top] if med < 0.05 * dev[top] else 0.0)):
            ok = False
            break
        split_rules.append((P, top))
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
    # classes of ranks that work apart (the PME ranks of a particle/PME split; ranks that work
    # at 1, 2 or 3 levels of a multigrid): ranks within 5% of each other, the same number of
    # such levels at every P, each level but the most populous one a class of ranks
    levels = {P: _work_levels(w) for P, w in per_p.items()}
    counts = {len(v) for v in levels.values()}
    if len(counts) == 1 and counts.pop() >= 2 and all(np.all(np.isfinite(w)) and len(w) >= 3
                                                      for w in per_p.values()):
        Pmax = max(levels)
        n_lv = len(levels[Pmax])
        rest = max(range(n_lv), key=lambda i: len(levels[Pmax][i]))
        groups: list[WorkGroup] = []
        for i in [j for j in range(n_lv) if j != rest] + [rest]:
            cls = None if i == rest else infer_members({P: lv[i] for P, lv in levels.items()})
            if cls is None and i != rest:
                groups = []
                break
            tot = {P: float(per_p[P][lv[i]].sum() * weights[P]) for P, lv in levels.items()}
            groups.append(WorkGroup(cls, float(np.median(list(tot.values()))), tot))
        if groups and _classes_apart(groups, per_p):
            return groups, None
    spread = max(float((w.max() - w.min()) / max(np.median(w), 1e-300)) for w in per_p.values())
    if spread > 0.05:
        note = f"work differs by up to {100 * spread:.0f}% across ranks with no rule; modelled as one group"
    tot = {P: float(w.sum() * weights[P]) for P, w in per_p.items()}
    return [WorkGroup(None, float(np.median(list(tot.values()))), tot)], note


def build(signatures: Sequence[Signature], *, p_rule: str | None = None,
          grids: dict[int, tuple[tuple[int, ...], tuple[bool, ...], int]] | None = None,
          comms: dict | None = None) -> LogicalModel:
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
        run used (:func:`grid_of` reads it from a trace). Its dims rule is the first
        of :func:`~logical_model.topology.fit_dims_rules` that gives every P's dims;
        the others that do are kept to check the target.
    comms : dict, optional
        Per P: the run's communicator table (``trace.comms``); default: ``grids.comms``
        when :func:`read_signatures` made ``grids``. Duplicates of MPI_COMM_WORLD are
        the world; row, column and plane communicators are modelled as
        :class:`~logical_model.topology.SubGrid` layouts. Without it, events on other
        communicators than MPI_COMM_WORLD and the Cartesian grid are not modelled.
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
    from .correspond import correspond
    sigs, left_out = correspond(sigs)
    if comms is None:
        comms = getattr(grids, "comms", None)
    comms = comms or {}
    grids = grids or {}
    grid = None
    grid_rules: list[DimsRule] = []
    if grids:
        if set(grids) != set(Ps):
            raise ModelError("a Cartesian grid is recorded at some P only: "
                             f"{sorted(grids)} of {Ps}")
        nd = {len(g[0]) for g in grids.values()}
        per = {g[1] for g in grids.values()}
        if len(nd) != 1 or len(per) != 1:
            raise ModelError(f"the process grid changes shape across P: {grids}")
        # (a grid of blocks, each its own copy of one decomposition: as many at every P)
        blocks = {g[0][0] if isinstance(g[2], tuple) else None for g in grids.values()}
        rules = fit_dims_rules({P: tuple(g[0]) for P, g in grids.items()},
                               blocks=blocks.pop() if len(blocks) == 1 and None not in blocks else None)
        if not rules:
            raise ModelError("the Cartesian grids " + ", ".join(
                f"{'x'.join(map(str, g[0]))} at P={P}" for P, g in sorted(grids.items()))
                + " follow none of the dims rules sigex knows (MPI_Dims_create, pencils, powers of two "
                "split either way, q x q, least surface for a box of edge ratios up to 4)")
        grid, grid_rules = Grid(nd.pop(), per.pop(), rules[0]), rules[1:]
    work_col, unit = ("instr_mean", "instructions") if mode == "counters" else ("cpu_mean", "s")
    cost_col = "instr" if mode == "counters" else "cpu"

    phases = []
    for k, ref in enumerate(sigs[0].phases):
        problems: list[str] = []
        notes: list[str] = []
        turns = [s.phases[k] for s in sigs if np.any(s.phases[k].template.get("rotating", 0))]
        if turns:  # (signature.iterations.rotating_roots)
            t = turns[-1].rank_template(int(np.flatnonzero(np.diff(turns[-1].template_offsets))[0]))
            spin = t["rotating"] > 0
            ops = "/".join(sorted({OPS[o] for o in t["op"][spin]}))
            one = int(spin.sum()) == 1 and not spin.all()
            which = f"its {ops} calls" if spin.all() else f"{int(spin.sum())} of its {len(spin)} calls ({ops})"
            notes.append(f"{which} {'takes its' if one else 'take their'} root from each member of the "
                         "communicator in turn, one per call (a rotation): every repetition places "
                         f"{'it' if one else 'them'} at the first member")
        # ---- slots of every rank at every P, merged into one order ------------------
        keys_per_p, key_args, local, whole = _phase_keys(sigs, k, grids, comms, problems)
        (order, class_name, positions, slot_problems, slots, slot_notes), _ = _slot_attempts(
            keys_per_p, key_args, sigs, k, local, comms, grid, cost_col)
        if slot_problems and whole:
            # a communicator with every rank at one P (a node's 4 ranks at P = 4) that is a
            # sub-communicator at the others: read as one there too, where that models every slot
            alt = _phase_keys(sigs, k, grids, comms, [], whole_as_sub=True)[:3]
            got, _ = _slot_attempts(alt[0], alt[1], sigs, k, alt[2], comms, grid, cost_col)
            if not got[3]:
                keys_per_p, key_args, local = alt
                (order, class_name, positions, slot_problems, slots, slot_notes) = got
        if any(_CUT_ELSEWHERE in p for p in slot_problems):
            # the signature cut some ranks' repetitions elsewhere in the cycle (OpenFOAM's
            # corner ranks begin with their second neighbour's exchange): every rank's cut
            # moved to just after its last collective call, where all ranks meet
            recut = [dataclasses.replace(s, phases=[_recut(ph) if j == k else ph for j, ph in enumerate(s.phases)])
                     for s in sigs]
            if all(s.phases[k] is not None for s in recut):
                alt = _phase_keys(recut, k, grids, comms, [])[:3]
                got, _ = _slot_attempts(alt[0], alt[1], recut, k, alt[2], comms, grid, cost_col)
                if not got[3]:
                    sigs = [dataclasses.replace(s, phases=[r.phases[k] if j == k else ph
                                                           for j, ph in enumerate(s.phases)])
                            for s, r in zip(sigs, recut)]
                    keys_per_p, key_args, local = alt
                    (order, class_name, positions, slot_problems, slots, slot_notes) = got
                    notes.append("its repetitions are cut just after each rank's last collective call: the "
                                 "signature began some ranks' elsewhere in the same cycle")
        if slot_problems and not problems:
            # binomial trees and butterflies written as point-to-point calls: their stages
            # grow with P, so no traced P has the slots of the target's last stage
            found = (_tree_phase(sigs, k, key_args, local, comms, grid, cost_col)
                     or _tree_phase(sigs, k, key_args, local, comms, grid, cost_col, nonblocking=True)
                     or _tree_phase(sigs, k, key_args, local, comms, grid, cost_col, nonblocking=True, waits=True))
            if found is not None:
                (order, class_name, positions, slot_problems, slots, slot_notes), note = found
                notes.append(note)
        deferred = False
        if not problems and any(" differ between ranks at P=" not in p for p in slot_problems) \
                and onesided.statistical_ok(sigs, k, notes):  # RMA targets have no statistical model
            # calls per rank that no rule gives (a remap between two decompositions), or no
            # order of them on any rank class (an exchange that visits its neighbours in the
            # order the data or the decomposition gives): expected values per run of calls,
            # regressed over P, if the phase allows that
            # realised deferred where its blocking point-to-point calls could deadlock in any
            # one order of its runs; a phase of nonblocking posts, waits and collectives (an
            # OpenFOAM solver iteration: Isend, Irecv, Waitall, Allreduce) keeps its runs' order,
            # whose waits pace the repetition as the traced ones did (deferred to the end, the
            # replayed PCG iteration took 16 times as long)
            no_order = any(p.startswith(NO_ORDER) for p in slot_problems)
            unordered = no_order and any(_BLOCKING_P2P & set(s.phases[k].ops) for s in sigs)
            merged, crossed, said = False, {}, []
            try:
                try:
                    slots, stat_totals = _statistical_phase(
                        sigs, k, comms, grids, cost_col, grid, deferred=unordered,
                        max_runs=MAX_STATISTICAL_RUNS if no_order else None, said=said)
                    if unordered and any(sl.overlap is not None for sl in slots):
                        # remap runs placed exact per rank are not deferred with the others, and the
                        # two did not pair up (LAMMPS peptide's set-up, deferred, left receives
                        # unmatched and its replay waited forever): such a phase keeps its order
                        unordered = False
                        slots, stat_totals = _statistical_phase(sigs, k, comms, grids, cost_col, grid, said=said)
                except StatisticalError:
                    if not no_order:
                        raise
                    # calls whose interleaving follows the data (hpcc's RandomAccess: a receive
                    # re-posted, sends and polls as its buckets fill, in another order on every
                    # rank and repetition): each kind of call one run, realised deferred
                    try:
                        slots, stat_totals = _statistical_phase(sigs, k, comms, grids, cost_col, grid,
                                                                deferred=True, merge=True, said=said)
                    except StatisticalError:
                        # the last resort: a few messages whose other end is in the phase
                        # before or after (received there) left out, and said so
                        slots, stat_totals = _statistical_phase(sigs, k, comms, grids, cost_col, grid,
                                                                deferred=True, merge=True,
                                                                crossing=MAX_CROSSING_SHARE, dropped=crossed,
                                                                said=said)
                    unordered = merged = True
            except StatisticalError as err:
                notes.append(f"not modelled statistically either: {err}")
                if no_order:  # the refusal's one line says both
                    at = next(i for i, p in enumerate(slot_problems) if p.startswith(NO_ORDER))
                    slot_problems[at] = f"{NO_ORDER}, nor can its counts be modelled statistically ({err}); " \
                        + slot_problems[at][len(NO_ORDER) + 2:]
            else:
                class_name, positions, slot_notes = None, [], []
                notes.append("statistical, not exact: no rule gives each rank's calls ("
                             + _short(slot_problems, 200) + "); modelled as expected messages per rank "
                             "and bytes per message of each channel between runs of calls, regressed "
                             "over P: counts and volumes follow the model, peers do not")
                if unordered:
                    deferred = True
                    slots = _deferred_slots(slots)
                    notes.append("realised deferred: one order of its runs on every rank, point-to-point "
                                 "calls nonblocking, one Waitall at the end of the repetition (no rank "
                                 "class has an order of its own; this one cannot deadlock)"
                                 + ("; each kind of call is one run, however the ranks interleave "
                                    "them (their order follows the data)" if merged else ""))
                notes += said
                if crossed:
                    notes.append("messages whose other end is in another phase are left out of its model: "
                                 + ", ".join(f"{n} at P={P}" for P, n in sorted(crossed.items()))
                                 + f" (at most {MAX_CROSSING_SHARE:.0%} of its messages at each P)")
                slot_problems = []
        problems += slot_problems
        notes += slot_notes
        data = [f"{i} ({OPS[sl.op]})" for i, sl in enumerate(slots) if sl.data_note]
        if data:
            first = next(sl.data_note for sl in slots if sl.data_note)
            notes.append(f"slot{'s' if len(data) > 1 else ''} {', '.join(data[:8])}"
                         f"{' ...' if len(data) > 8 else ''}: message sizes depend on the data "
                         f"(they change between repetitions; e.g. {first}); modelled by their "
                         "mean over ranks")

        # ---- weight and work ------------------------------------------------------------
        if not any(sl.statistical for sl in slots):
            stat_totals = (None, None)
        weights = {s.nprocs: s.phases[k].weight for s in sigs}
        Pw = np.array(sorted(weights))
        Ww = np.array([weights[p] for p in Pw], float)
        wmodel = None
        if p_rule and p_rule not in ("any",) and hasattr(search, "choose"):
            wmodel = search.choose(Pw, Ww, p_rule=p_rule, name=f"weight of phase {k}")
        if wmodel is None:
            wmodel = search.fit(Pw, Ww, name=f"weight of phase {k}")
        missed = _weight_missed(wmodel, Pw, Ww)
        if missed:
            problems.append(missed)
        work = {s.nprocs: np.asarray(s.phases[k].stats[work_col], float) for s in sigs}
        for s in sigs:  # a rank with no call in the phase does none of its work: its time
            # until its next call is that call's (a class idle while one rank works alone)
            idle = np.diff(np.asarray(s.phases[k].template_offsets)) == 0
            if np.any(idle & ~np.isfinite(work[s.nprocs])):
                work[s.nprocs] = np.where(idle & ~np.isfinite(work[s.nprocs]), 0.0, work[s.nprocs])
        if any(not np.all(np.isfinite(w)) for w in work.values()):
            P_bad = min(P for P, w in work.items() if not np.all(np.isfinite(w)))
            n_bad = int(np.sum(~np.isfinite(work[P_bad])))
            problems.append(f"{n_bad} of {P_bad} ranks make no call of this phase at P={P_bad}: the traces "
                            f"hold no work ({'instructions' if unit == 'instructions' else 'CPU time'}) of "
                            "theirs in it")
            groups = [WorkGroup(None, 0.0, {p: 0.0 for p in work})]
        else:
            groups, note = _groups(work, weights)
            if note:
                notes.append(note)
        phases.append(PhaseModel(id=ref.id, kind=ref.kind, pattern=ref.pattern, weight=wmodel,
                                 slots=slots, groups=groups, measured_weights=weights,
                                 problems=problems, notes=notes,
                                 classes=(class_name.describe() + " and the others"
                                          if isinstance(class_name, PeerRule) else class_name),
                                 class_rule=class_name if isinstance(class_name, PeerRule) else None,
                                 orders=positions, stat_messages=stat_totals[0], stat_bytes=stat_totals[1],
                                 deferred=deferred))
    model = LogicalModel(app=sigs[0].app, work_mode=mode, work_unit=unit, Ps=Ps,
                         workload_label=sigs[0].workload_label, workload_value=sigs[0].workload_value,
                         grid=grid, phases=phases, sources=[s.source or "?" for s in sigs],
                         notes=[f"P={s.nprocs}: {n}" for s in sigs for n in s.unmodelled],
                         grid_rules=grid_rules, left_out=left_out)
    _check_deferred(model, sigs)
    return model


#: a deferred phase's realisation at a fit P may send this much more or fewer messages (or
#: bytes) than the trace there before the phase is refused (OpenFOAM's phases, their laws
#: fitted over P, miss their bytes at P = 4 by up to 33% and are 3-30% off at P = 12;
#: hpcc's final phase misses its messages by 70%)
DEFERRED_FIT_TOLERANCE = 0.5


def _check_deferred(model: LogicalModel, sigs) -> None:
    """Refuse each deferred phase whose realisation misses its own fit points: messages or
    bytes sent at a fit P off the trace's by more than :data:`DEFERRED_FIT_TOLERANCE` (its
    runs and channels, each fitted alone, do not add up to the phase: hpcc's final phase)."""
    from .writer import _phase_tables, comm_ids
    for k, ph in enumerate(model.phases):
        if not ph.deferred or ph.problems:
            continue
        for s in sigs:
            P, T = s.nprocs, s.phases[k].template
            ev = _phase_tables(model, k, P, np.arange(P), comm_ids(model, P)[0])
            got = np.asarray(ev["bytes"], np.int64)
            want = np.asarray(T["bytes"], np.int64)
            m, w = int(np.count_nonzero(got > 0)), int(np.count_nonzero(want > 0))
            b, v = int(got.sum()), int(want.sum())
            off = max(abs(m - w) / max(w, 1), abs(b - v) / max(v, 1))
            if off > DEFERRED_FIT_TOLERANCE:
                ph.problems.append(f"its statistical model, realised at the fit P={P}, sends {m:,} messages "
                                   f"and {b:,} bytes where the trace sends {w:,} and {v:,} (over "
                                   f"{DEFERRED_FIT_TOLERANCE:.0%} off): its runs do not add up to the phase")
                break


def grid_of(trace) -> tuple[tuple[int, ...], tuple[bool, ...], int | tuple[int, ...]] | None:
    """The Cartesian communicator of a trace that spans every rank in world order:
    (dims, periods, communicator id), or None. Where none does but the world is cut into
    c consecutive blocks of ranks, each with a Cartesian communicator of one shape over
    its block in order (LAMMPS's -partition, ensembles, replicas: each runs the same
    decomposition on its own ranks), the blocks are one grid of c x the shape, the first
    dimension the block (non-periodic, no traffic along it): ((c, *dims), (False,
    *periods), the blocks' communicator ids)."""
    comms = trace.comms
    P = trace.nprocs
    found, blocks = None, {}
    for c in range(len(comms)):
        cart = comms.cartesian(c)
        if cart is None:
            continue
        members = comms.members_of(c)
        if len(members) == P and np.array_equal(members, np.arange(P)):
            if found is not None and found[:2] != cart:
                return None  # two different grids: not modelled
            found = (cart[0], cart[1], c)
        elif len(members) and np.array_equal(members, np.arange(members[0], members[0] + len(members))):
            blocks.setdefault((tuple(cart[0]), tuple(cart[1])), {}).setdefault(int(members[0]), []).append(c)
    if found is not None or len(blocks) != 1:
        return found
    (shape, periods), starts = blocks.popitem()
    size = math.prod(shape)
    if size < 1 or P % size or sorted(starts) != list(range(0, P, size)) or len(starts) < 2 or any(
            len(ids) != 1 for ids in starts.values()):
        return None
    return ((P // size, *shape), (False, *periods), tuple(starts[s][0] for s in sorted(starts)))


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
    ``grids`` as :func:`build` takes them (a :class:`Topologies`: the Cartesian grids, empty
    without one, and the communicator tables)."""
    from signature import extract, load_trace

    files = trace_files(source)
    sigs, grids = [], Topologies()
    for i, f in enumerate(files):
        if progress:
            progress(f"reading {f} ({i + 1}/{len(files)})")
        trace = load_trace(f)
        if trace.meta.get("trace_kind", "captured") != "captured":
            raise ModelError(f"{f}: a {trace.meta['trace_kind']} trace, not a traced run; "
                             "model from the signature runs only")
        sigs.append(extract(trace))
        onesided.note_trace(sigs[-1], trace)  # window ids and neighbour lists the templates lack
        g = grid_of(trace)
        if g is not None:
            grids[trace.nprocs] = g
        grids.comms[trace.nprocs] = trace.comms
    apps = {(s.app, s.workload_label, s.workload_value) for s in sigs}
    if len(apps) > 1:
        raise ModelError("these traces are of different programs or workloads: "
                         + "; ".join(f"{s.source}: {s.app} {s.workload_label}={s.workload_value}"
                                     for s in sigs) + ". Give the runs of one application only.")
    if grids and len(grids) != len(sigs):
        missing = [s.source for s in sigs if s.nprocs not in grids]
        raise ModelError(f"some runs use a Cartesian grid and some do not ({', '.join(map(str, missing))} "
                         "do not): are these traces of one program?")
    return sigs, grids


class Topologies(dict):
    """Per P, the Cartesian grid a run declared ((dims, periods, communicator id), the
    :func:`build` argument ``grids``), with every run's communicator table in ``comms``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.comms: dict[int, Any] = {}


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
