"""Computation time per phase: the CRM, the IPT and the distant point (Panadero et al. §3).

**CRM** (computation regression model). Per phase, the computation time of
one repetition per process as a function of P, fitted on the signature runs
with the shared model search (:mod:`logical_model.modelsearch`), not a fixed
power law. In CPU-time mode the time is the bursts' thread CPU time, which
oversubscription does not inflate; in counters mode it is the bursts' wall
time, as in the paper.

**IPT** (instruction prediction table, the paper's Table 1). Per P: work per
process and repetition, weight, displacement, total work = work x weight x P.
Measured rows come from the signature runs; predicted rows from Eq. 3 (the
median measured total over weight(P) x P). Strong scaling keeps the total
constant; when the measured totals spread more than the tolerance (2% of
instructions in counters mode, the paper's "practically constant"; 10% of CPU
time in CPU-time mode, a time on a shared machine) the phase is flagged and
the distant point is skipped with that reason.

**Distant point.** The signature run with a much smaller workload at small P
emulates the original workload at a large P. Among the small-workload runs,
the one where the phase stops getting cheaper per unit of work is taken: the
smallest CPI (cycles / instructions) in counters mode, the smallest CPU time
per unit of declared work in CPU-time mode; ties within 1% go to the largest
P (Table 2: CPI 0.719 at 81 and 100 processes, 100 is taken). Its work per
process is then located at the original workload: the IPT row with the
nearest instructions in counters mode (Table 1: 1,759,558 -> 1,744,266 at
P = 1681, 0.87% apart), the P of equal declared work per process in CPU-time
mode (``work = "n*n/P"`` solved for P, rounded to a P the application
accepts). The point (that P, the run's computation time) joins the CRM,
which is refitted; both CRMs are kept.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

from logical_model import modelsearch
from signature._text import table
from signature.errors import ExtrapolationError

__all__ = ["IPT", "IPTRow", "CRM", "ClassMix", "DistantPoint", "build_ipt", "fit_crm", "fit_class_crm",
           "select_small_run",
           "distant_point_counters", "distant_point_declared", "work_function", "accepted_p",
           "IPT_TOLERANCE", "left_out_computation"]

#: How far the measured totals may spread and still count as constant (Eq. 2). Flops
#: charged in a SimGrid trace are exact counts, as deterministic as instructions.
IPT_TOLERANCE = {"counters": 0.02, "cpu-time": 0.10, "flops": 0.02}


# ---- P rules ------------------------------------------------------------------------
def accepted_p(p_rule: str | None, lo: int, hi: int) -> np.ndarray:
    """The process counts in [lo, hi] an application with this P rule accepts."""
    lo, hi = max(1, int(lo)), int(hi)
    if p_rule == "squares":
        r = np.arange(math.isqrt(lo - 1) + 1, math.isqrt(hi) + 1)
        return r * r
    if p_rule == "cubes":
        r = np.arange(int(round((lo - 1) ** (1 / 3))), int(round(hi ** (1 / 3))) + 2)
        c = r ** 3
        return c[(c >= lo) & (c <= hi)]
    if p_rule == "powers_of_two":
        e = np.arange(0, int(math.log2(max(hi, 1))) + 1)
        c = 2 ** e
        return c[(c >= lo) & (c <= hi)]
    if p_rule in (None, "any"):
        return np.arange(lo, hi + 1)
    raise ExtrapolationError(f"unknown P rule {p_rule!r}; use any, squares, cubes or powers_of_two")


# ---- the IPT ------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class IPTRow:
    P: int
    work: float  # per process and repetition
    weight: float
    displacement: float
    total: float
    measured: bool


@dataclasses.dataclass(frozen=True)
class IPT:
    """The instruction (work) prediction table of one phase."""

    phase: int
    unit: str
    mode: str
    total: float  # Eq. 2's constant total (median of the measured totals)
    spread: float  # (max - min) / median of the measured totals
    tolerance: float
    weight_model: Any
    p_rule: str | None
    rows: tuple[IPTRow, ...]

    @property
    def constant(self) -> bool:
        return self.spread <= self.tolerance

    @property
    def measured(self) -> list[IPTRow]:
        return [r for r in self.rows if r.measured]

    def predict_work(self, P) -> np.ndarray:
        """Eq. 3: work per process and repetition at P."""
        P = np.asarray(P, float)
        return self.total / (np.maximum(np.rint(self.weight_model.predict(P)), 1) * P)

    def predicted_rows(self, P_values: Sequence[int]) -> list[IPTRow]:
        P = np.asarray(P_values, np.int64)
        w = np.maximum(np.rint(self.weight_model.predict(P)), 1)
        disp = (modelsearch.displacement(P, self.p_rule) if self.p_rule in modelsearch.P_RULES
                else np.full(len(P), np.nan))
        work = self.total / (w * P)
        return [IPTRow(int(p), float(a), float(b), float(d), float(a * b * p), False)
                for p, a, b, d in zip(P, work, w, disp)]

    def nearest(self, work: float, P_max: int) -> tuple[IPTRow, float]:
        """The predicted row (P the application accepts, up to P_max) whose work per
        process is nearest ``work``, and the relative difference to ``work``."""
        lo = min(r.P for r in self.measured)
        P = accepted_p(self.p_rule, lo, P_max)
        if not len(P):
            raise ExtrapolationError(f"phase {self.phase}: no P between {lo} and {P_max}")
        rows = self.predicted_rows(P)
        i = int(np.argmin([abs(r.work - work) for r in rows]))
        return rows[i], abs(rows[i].work - work) / abs(work)

    def table(self, P_values: Sequence[int] = ()) -> str:
        """The paper's Table 1 layout: measured rows, then predicted rows."""
        head = (f"work per process ({self.unit})", "P", "weight", "displacement", f"total ({self.unit})")
        fmt = (lambda x: f"{x:,.0f}") if self.unit == "instructions" else (lambda x: f"{x:.6g}")

        def line(r: IPTRow):
            d = "-" if not np.isfinite(r.displacement) else f"{r.displacement:g}"
            return (fmt(r.work), f"{r.P}", f"{r.weight:g}", d, fmt(r.total))

        out = [f"IPT of phase {self.phase} ({self.mode} mode); measured values (signature runs):",
               table(head, [line(r) for r in self.measured], align="rrrrr")]
        if P_values:
            out += ["predicted values (Eq. 3, total held constant):",
                    table(head, [line(r) for r in self.predicted_rows(P_values)], align="rrrrr")]
        verdict = ("constant" if self.constant else "NOT constant: the distant point is skipped")
        out.append(f"measured totals vary {100 * self.spread:.2f}% (tolerance "
                   f"{100 * self.tolerance:.0f}%): {verdict}")
        return "\n".join(out)


def build_ipt(P: Sequence[int], work: Sequence[float], weight: Sequence[float], *, phase: int = 0,
              mode: str = "counters", p_rule: str | None = None, weight_model=None) -> IPT:
    """The IPT of one phase from its measured rows (work per process and repetition)."""
    P = np.asarray(P, np.int64)
    work = np.asarray(work, float)
    weight = np.asarray(weight, float)
    if not (len(P) == len(work) == len(weight)) or len(P) < 2:
        raise ExtrapolationError(f"phase {phase}: the IPT needs rows at 2 or more P, "
                                 f"got {len(P)} P, {len(work)} work and {len(weight)} weight values")
    if np.any(~np.isfinite(work)) or np.any(work < 0):
        raise ExtrapolationError(f"phase {phase}: work per process must be finite and >= 0, got "
                                 f"{work.tolist()}")
    totals = work * weight * P
    total = float(np.median(totals))
    spread = float((totals.max() - totals.min()) / total) if total > 0 else 0.0
    wm = weight_model or modelsearch.choose(P, weight, p_rule=p_rule, name=f"weight of phase {phase}")
    disp = (modelsearch.displacement(P, p_rule) if p_rule in modelsearch.P_RULES
            else np.full(len(P), np.nan))
    rows = tuple(IPTRow(int(p), float(a), float(b), float(d), float(t), True)
                 for p, a, b, d, t in zip(P, work, weight, disp, totals))
    unit = "instructions" if mode == "counters" else "s"
    return IPT(phase=phase, unit=unit, mode=mode, total=total, spread=spread,
               tolerance=IPT_TOLERANCE[mode], weight_model=wm, p_rule=p_rule, rows=rows)


# ---- declared work ------------------------------------------------------------------
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.USub: operator.neg, ast.FloorDiv: operator.floordiv}
_FUNCS = {"sqrt": math.sqrt, "log2": math.log2, "log": math.log, "cbrt": np.cbrt}


def work_function(expr: str, workload_label: str) -> Callable[[float, float], float]:
    """``work = "n*n/P"`` as a function (W, P) -> declared work per process.

    Only numbers, the workload's name, P, + - * / ** and sqrt/log2/log/cbrt
    are allowed; anything else is refused with the expression named."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as err:
        raise ExtrapolationError(f"work expression {expr!r} is not valid: {err.msg}") from err

    def ev(node, W, P):
        if isinstance(node, ast.Expression):
            return ev(node.body, W, P)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name):
            if node.id == "P":
                return P
            if node.id == workload_label:
                return W
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left, W, P), ev(node.right, W, P))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand, W, P))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS
                and len(node.args) == 1):
            return _FUNCS[node.func.id](ev(node.args[0], W, P))
        raise ExtrapolationError(
            f"work expression {expr!r}: {ast.unparse(node)!r} is not allowed (use numbers, "
            f"{workload_label}, P, + - * / ** and sqrt, log2, log, cbrt)")

    # check once, on a harmless point
    ev(tree, 2.0, 2.0)
    return lambda W, P: float(ev(tree, float(W), float(P)))


# ---- the distant point --------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class DistantPoint:
    """A small-workload run placed at the original workload's P it emulates."""

    P_small: int  # the small-workload run taken
    metric: float  # CPI, or CPU time per unit of declared work
    metric_name: str
    work: float  # its work per process (instructions or declared work)
    time: float  # its computation time per process and repetition
    P_emulated: int
    difference: float  # relative difference of the work at P_emulated
    reason: str  # how it was chosen, for the report

    def describe(self) -> str:
        return (f"distant point: small-workload run at P={self.P_small} ({self.metric_name} "
                f"{self.metric:.4g}, {self.reason}) emulates P={self.P_emulated} "
                f"({100 * self.difference:.2f}% apart); time {self.time:.6g} s")


def select_small_run(P: Sequence[int], metric: Sequence[float], *, tie: float = 0.01) -> int:
    """Index of the run where the phase stops getting cheaper per unit of work: the
    smallest metric, ties within ``tie`` going to the largest P."""
    P = np.asarray(P)
    m = np.asarray(metric, float)
    if len(P) == 0 or not np.any(np.isfinite(m)):
        raise ExtrapolationError("no small-workload run with a usable measurement")
    best = np.nanmin(m)
    close = np.flatnonzero(m <= best * (1 + tie))
    return int(close[np.argmax(P[close])])


def distant_point_counters(ipt: IPT, P: Sequence[int], instructions: Sequence[float],
                           cycles: Sequence[float], time: Sequence[float], *, P_max: int) -> DistantPoint:
    """Counters mode: the run of minimal CPI; the IPT row with the nearest instructions."""
    if not ipt.constant:
        raise ExtrapolationError(f"phase {ipt.phase}: the measured totals vary {100 * ipt.spread:.1f}% "
                                 f"(more than {100 * ipt.tolerance:.0f}%); the distant point does not apply")
    instr = np.asarray(instructions, float)
    cpi = np.asarray(cycles, float) / instr
    i = select_small_run(P, cpi)
    row, diff = ipt.nearest(float(instr[i]), P_max)
    return DistantPoint(P_small=int(P[i]), metric=float(cpi[i]), metric_name="CPI", work=float(instr[i]),
                        time=float(time[i]), P_emulated=row.P, difference=diff,
                        reason="minimum CPI")


def distant_point_declared(P: Sequence[int], cpu_time: Sequence[float], *, work: Callable[[float, float], float],
                           small: float, original: float, p_rule: str | None, P_max: int,
                           phase: int = 0) -> DistantPoint:
    """CPU-time mode: the run of minimal CPU time per unit of declared work; the P at
    which the original workload has the same declared work per process."""
    P = np.asarray(P, np.int64)
    t = np.asarray(cpu_time, float)
    dw = np.array([work(small, p) for p in P])
    if np.any(dw <= 0):
        raise ExtrapolationError(f"phase {phase}: the declared work per process must be positive")
    per_unit = t / dw
    i = select_small_run(P, per_unit)
    target = dw[i]
    cand = accepted_p(p_rule, 1, P_max)
    ow = np.array([work(original, p) for p in cand])
    j = int(np.argmin(np.abs(ow - target)))
    return DistantPoint(P_small=int(P[i]), metric=float(per_unit[i]), metric_name="CPU s per unit of work",
                        work=float(target), time=float(t[i]), P_emulated=int(cand[j]),
                        difference=float(abs(ow[j] - target) / target),
                        reason="minimum CPU time per unit of declared work")


# ---- the CRM ------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CRM:
    """Computation time per process and repetition of one phase, without and with the
    distant point."""

    phase: int
    base: Any  # fitted on the signature runs
    with_distant: Any | None
    distant: DistantPoint | None
    skipped: str | None  # why there is no distant point

    @property
    def model(self):
        return self.with_distant if self.with_distant is not None else self.base

    def predict(self, P) -> np.ndarray:
        return self.model.predict(P)

    def describe(self) -> str:
        out = [f"CRM of phase {self.phase} (computation s per process and repetition):",
               f"  signature runs only: {self.base.describe()}"]
        if self.with_distant is not None:
            out.append(f"  with the distant point: {self.with_distant.describe()}")
            out.append(f"  {self.distant.describe()}")
        elif self.skipped:
            out.append(f"  no distant point: {self.skipped}")
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {"format": 1, "phase": self.phase, "base": self.base.to_dict(),
                "with_distant": self.with_distant.to_dict() if self.with_distant is not None else None,
                "distant": dataclasses.asdict(self.distant) if self.distant else None,
                "skipped": self.skipped}


#: classes of ranks whose computation per repetition differs by more than this (at some
#: fit P) have a CRM each (:func:`fit_class_crm`)
CLASS_APART = 0.25


@dataclasses.dataclass(frozen=True)
class ClassMix:
    """A phase's computation per process and repetition when its ranks fall in two classes
    that compute apart (#25, Eq. 1-3 per class: GROMACS's PME ranks, every 4th, and its
    particle ranks): one fitted model per class (``models``: the others, the class), their
    mean over the ranks at P by each class's size there. ``members`` is the class (a
    member rule of the logical model); ``left_out`` the fit P each model did without (a
    class of one rank where it has several at the other P works unlike them: GROMACS's
    single PME rank at P = 4)."""

    members: Any
    models: tuple
    left_out: tuple = ((), ())
    name: str = "computation"

    @property
    def stats(self) -> dict[str, Any]:
        """The worse of the two fits' statistics (LOO error, R^2), for the reports."""
        cv = [m.stats.get("cv_error") for m in self.models]
        cv = [c for c in cv if c is not None and np.isfinite(c)]
        r2 = [m.stats.get("r2") for m in self.models if m.stats.get("r2") is not None]
        return {"n": min(m.stats.get("n", 0) for m in self.models),
                **({"cv_error": max(cv)} if cv else {}), **({"r2": min(r2)} if r2 else {})}

    def classes(self, P: int) -> np.ndarray:
        """Each rank's class at P: 1 in ``members``, 0 the others."""
        return (self.members(np.arange(int(P)), int(P)) >= 0).astype(np.int64)

    def per_rank(self, P: int) -> np.ndarray:
        """Each rank's computation per repetition at P."""
        per = np.array([float(np.asarray(m.predict(P)).reshape(-1)[0]) for m in self.models])
        return np.maximum(per, 0.0)[self.classes(P)]

    def predict(self, P) -> np.ndarray:
        Ps = np.atleast_1d(np.asarray(P, float))
        out = np.array([self.per_rank(int(p)).mean() for p in Ps])
        return out.reshape(np.shape(P))

    def formula(self) -> str:
        return (f"mean over the ranks of {self.models[1].formula()} ({self.members.describe()}) and "
                f"{self.models[0].formula()} (the others)")

    def describe(self) -> str:
        out = [f"{self.name} per rank class, their mean over the ranks at P:"]
        for c, who in ((1, self.members.describe()), (0, "the others")):
            skip = self.left_out[c]
            out.append(f"    {who}: {self.models[c].describe()}"
                       + (f" (P = {', '.join(map(str, skip))} left out: the class is one rank there)" if skip else ""))
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {"format": 1, "kind": "class_mix", "members": self.members.to_dict(),
                "models": [m.to_dict() for m in self.models], "left_out": [list(x) for x in self.left_out]}


def fit_class_crm(phase: int, P: Sequence[int], per_rank: Sequence[np.ndarray], members) -> CRM | None:
    """The CRM of a phase whose ranks fall in two classes (``members``: a member rule, the
    class of colour 1) that compute apart: a model per class over the fit P
    (``per_rank[i]``: each rank's computation per repetition at ``P[i]``), or None where
    the classes compute alike (within :data:`CLASS_APART` at every P), a class is empty at
    some P, or a class keeps fewer than 2 points. A class of one rank at a P where it has
    more at two others or more is left out there (it works unlike them)."""
    P = [int(p) for p in P]
    cls = [(members(np.arange(p), p) >= 0) for p in P]
    if any(not c.any() or c.all() for c in cls):
        return None
    means = [[float(np.nanmean(np.asarray(v, float)[c == bool(k)])) for v, c in zip(per_rank, cls)] for k in (0, 1)]
    if not np.all(np.isfinite(means)):
        return None
    apart = [abs(a - b) > CLASS_APART * max(a, b) for a, b in zip(*means)]
    if not any(apart):
        return None
    models, left = [], []
    for k in (0, 1):
        size = [int((c == bool(k)).sum()) for c in cls]
        lone = [p for p, n in zip(P, size) if n == 1] if sum(n > 1 for n in size) >= 2 else []
        keep = [i for i, p in enumerate(P) if p not in lone]
        if len(keep) < 2:
            return None
        models.append(modelsearch.fit([P[i] for i in keep], [means[k][i] for i in keep],
                                      name=f"computation of phase {phase} ({'class' if k else 'others'})",
                                      positive=True))
        left.append(tuple(lone))
    mix = ClassMix(members, tuple(models), tuple(left), name=f"computation of phase {phase}")
    return CRM(phase=phase, base=mix, with_distant=None, distant=None,
               skipped="its ranks fall in classes that compute apart: a CRM per class, no distant point")


def left_out_computation(refused: Sequence[dict[str, Any]], P: int) -> dict[str, Any]:
    """What the phases a prediction leaves out would add at P, as far as it can be told:
    their measured computation (each one's slowest rank over all its repetitions, the
    ``measured_computation`` of each entry of :attr:`sigex.pipeline.Models.refused`),
    summed per signature run and fitted over P with the model search, as a CRM is, and
    taken at P (``total``, with its ``formula`` and ``cv_error``). The sum holds the phases
    some runs lack too (a multigrid set-up whose levels differ with P): what each run
    spent in phases the prediction does not place. Each phase every run has also gets a
    figure of its own (``phases``); the others are named in ``without``. Their
    communication follows no model, so this is their computation alone. Fewer than 3
    runs that have any of the phases give no total (None), nor does a fit that cannot be
    cross-validated."""
    phases, without = [], []
    for r in refused:
        got = {int(p): float(v) for p, v in (r.get("measured_computation") or {}).items()}
        present = {p: v for p, v in got.items() if r["measured_share"].get(p, 0.0) > 0 or v > 0}
        if len(present) < 3 or len(present) < len(got) or not all(map(math.isfinite, present.values())):
            without.append(r["phase"])
            continue
        m = _fit_positive(present, f"computation of left-out phase {r['phase']}")
        phases.append({"phase": r["phase"], **_at(m, P)})
    runs: dict[int, float] = {}
    has: set[int] = set()  # the runs that have any of the left-out phases
    for r in refused:
        for p, v in (r.get("measured_computation") or {}).items():
            v = float(v) if math.isfinite(float(v)) else 0.0
            runs[int(p)] = runs.get(int(p), 0.0) + v
            if v > 0 or r["measured_share"].get(p, 0.0) > 0:
                has.add(int(p))
    # (a run that lacks every left-out phase says nothing of them: MPB's at P = 2, where the
    # phases it leaves out at 4 and 8 do not exist yet; three runs that have them, or no figure)
    had = {p: v for p, v in runs.items() if p in has}
    total = _at(_fit_positive(had, "computation of the left-out phases"), P) if len(had) >= 3 else None
    if total is not None and not math.isfinite(total["cv_error"]):
        total = None  # (a fit no point cross-validates: no figure rather than a wrong one)
    return {"total": total["value"] if total else None, "formula": total["formula"] if total else None,
            "cv_error": total["cv_error"] if total else None, "phases": phases, "without": without}


def _fit_positive(points: dict[int, float], name: str):
    """The model search's fit of ``points`` (P -> seconds, >= 0), or None where all are 0."""
    Ps = sorted(points)
    if not any(points[p] > 0 for p in Ps):
        return None
    return modelsearch.fit(Ps, [points[p] for p in Ps], name=name, positive=True)


def _at(model, P: int) -> dict[str, Any]:
    """A fitted computation at P: its value (>= 0), formula and cross-validation error."""
    if model is None:
        return {"formula": "0", "value": 0.0, "cv_error": 0.0}
    return {"formula": model.formula(), "value": max(0.0, float(np.asarray(model.predict(P)).reshape(-1)[0])),
            "cv_error": float(model.stats.get("cv_error", float("nan")))}


def fit_crm(phase: int, P: Sequence[int], time: Sequence[float], distant: DistantPoint | None = None,
            skipped: str | None = None) -> CRM:
    """Fit the CRM of one phase; with a distant point, fit it again with that point."""
    base = modelsearch.fit(P, time, name=f"computation of phase {phase}", positive=True)
    with_d = None
    if distant is not None:
        if distant.P_emulated in set(int(p) for p in P):
            skipped = (f"the distant point emulates P={distant.P_emulated}, a signature P: it adds "
                       "nothing")
            distant = None
        else:
            P2 = np.concatenate([np.asarray(P, float), [distant.P_emulated]])
            t2 = np.concatenate([np.asarray(time, float), [distant.time]])
            with_d = modelsearch.fit(P2, t2, name=f"computation of phase {phase}", positive=True)
    return CRM(phase=phase, base=base, with_distant=with_d, distant=distant, skipped=skipped)
