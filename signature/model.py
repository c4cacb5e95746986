"""The signature of one traced run: its phases, their weights, and what each costs.

Plain data: :func:`signature.extract` builds it (``phases.py`` has the
algorithm); it prints as a table, serialises to JSON (``"format": 1``) and is
saved beside its trace (``P16.h5`` -> ``P16.signature.json``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
from ._files import write_text_atomic

from ._text import table
from .errors import TraceFormatError

__all__ = ["Phase", "Signature", "signature_path"]

#: Per-rank statistics of a phase (each a (P,) array, over the phase's repetitions).
RANK_STATS = ("events", "events_max", "duration_mean", "duration_std", "comp_mean", "comp_std", "cpu_mean",
              "cpu_std", "comm_mean", "comm_std", "bytes_mean", "instr_mean", "cycles_mean")
#: Columns of a phase's per-rank event template.
TEMPLATE_COLUMNS = ("op", "peer", "recv_peer", "root", "bytes", "recv_bytes", "comm", "tag")


@dataclasses.dataclass(frozen=True, eq=False)
class Phase:
    """One phase: a repeated sequence of events (or the initial/final part, weight 1).

    ``te`` is the mean duration of one repetition (seconds, mean over ranks); per-rank
    statistics are over repetitions: wall time of the computation that follows the
    phase's calls (``comp``), its thread CPU time (``cpu``), time inside MPI
    (``comm``), bytes sent, and instructions/cycles where the trace has counters (NaN
    otherwise). ``template`` holds each rank's events of one repetition: the columns
    ``TEMPLATE_COLUMNS``, and where they apply ``rotating`` (1: a call of a rotation)
    and ``completes`` (for an MPI_Wait, the index in the template of the call that
    posted the request it completes; -1 elsewhere).
    """

    id: int
    kind: str  # "initial", "loop", "between" (what lies between two loops) or "final"
    weight: int
    ops: tuple[str, ...]  # op structure: distinct operations in order of first use
    pattern: str
    te: float
    share: float  # te * weight / runtime
    stats: dict[str, np.ndarray]
    template_offsets: np.ndarray  # (P+1,)
    template: dict[str, np.ndarray]
    regions: tuple[str, ...] = ()  # user regions (signature.region) entered in the phase
    #: per template event, the burst that follows it, averaged over repetitions:
    #: "cpu" (thread CPU s), "comp" (wall s), and "instr"/"cycles" where counted; and the
    #: largest message sizes over the repetitions, "bytes_max" and "recv_bytes_max"
    template_cost: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    #: the section of the run the phase first occurs in (``signature.align.global_sections``:
    #: the kernels of a benchmark suite, between global synchronisations); 0 when the run
    #: is one section
    section: int = 0

    @property
    def comp_fraction(self) -> float:
        """Share of the phase's time spent computing (mean over ranks)."""
        comp, comm = self.stats["comp_mean"].mean(), self.stats["comm_mean"].mean()
        return float(comp / (comp + comm)) if comp + comm > 0 else 0.0

    def computation(self, work_mode: str = "cpu-time") -> float:
        """The slowest rank's computation over all the phase's repetitions in this run
        (seconds): thread CPU time in CPU-time mode, the bursts' wall time in counters
        mode, as the CRMs take them; 0 where no rank has a figure."""
        per_rank = np.asarray(self.stats["comp_mean" if work_mode == "counters" else "cpu_mean"], float)
        per_rank = per_rank[np.isfinite(per_rank)]
        return float(per_rank.max()) * self.weight if per_rank.size else 0.0

    @property
    def rank_classes(self) -> np.ndarray:
        """(P,) class of each rank: ranks whose templates have the same calls with the
        same relative peers (a PME rank and a particle rank differ; interior ranks of a
        periodic grid do not), numbered in order of first rank."""
        P = len(self.template_offsets) - 1
        keys: dict[bytes, int] = {}
        out = np.zeros(P, np.int64)
        for r in range(P):
            t = self.rank_template(r)
            rel = [np.where(t[c] >= 0, (t[c] - r) % max(P, 1), t[c]) for c in ("peer", "recv_peer")]
            key = np.stack([t["op"], *rel, t["root"]]).tobytes()
            out[r] = keys.setdefault(key, len(keys))
        return out

    def rank_template(self, rank: int) -> dict[str, np.ndarray]:
        a, b = self.template_offsets[rank], self.template_offsets[rank + 1]
        return {k: v[a:b] for k, v in self.template.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "kind": self.kind, "weight": self.weight, "ops": list(self.ops),
            "pattern": self.pattern, "te": self.te, "share": self.share,
            "regions": list(self.regions),
            # NaN (no counters) is not JSON: stored as null
            "stats": {k: [None if np.isnan(x) else x for x in np.asarray(v, float).tolist()]
                      for k, v in self.stats.items()},
            "template_offsets": self.template_offsets.tolist(),
            "template": {k: v.tolist() for k, v in self.template.items()},
            "template_cost": {k: np.asarray(v, float).tolist() for k, v in self.template_cost.items()},
            "section": self.section,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Phase":
        return cls(id=int(d["id"]), kind=d["kind"], weight=int(d["weight"]), ops=tuple(d["ops"]),
                   pattern=d["pattern"], te=float(d["te"]), share=float(d["share"]),
                   regions=tuple(d.get("regions", ())),
                   stats={k: np.array([np.nan if x is None else x for x in v], float)
                          for k, v in d["stats"].items()},
                   template_offsets=np.asarray(d["template_offsets"], np.int64),
                   template={k: np.asarray(v, np.int64) for k, v in d["template"].items()},
                   template_cost={k: np.asarray(v, float)
                                  for k, v in d.get("template_cost", {}).items()},
                   section=int(d.get("section", 0)))


@dataclasses.dataclass(frozen=True, eq=False)
class Signature:
    """The phases of one run, in order of first occurrence, with Eq. 4 evaluated on it.

    ``sequence`` lists the phase of every loop iteration in order. ``pet`` is
    sum(te * weight) over all phases (paper Eq. 4), ``runtime`` the measured
    runtime (slowest rank). ``coverage`` is the share of the run's time spent
    inside phases that repeat (loop phases of weight >= 2), mean over ranks;
    ``coverage_slowest`` the same on the rank whose run is longest; ``loop_span``
    the share of the runtime between the first rank entering the repeated phases
    and the last leaving them (a pipeline's fill and drain lie inside it).
    """

    source: str | None
    app: str | None
    nprocs: int
    workload_label: str | None
    workload_value: str | None
    work_mode: str
    runtime: float
    pet: float
    coverage: float  # share of the run's time inside repeated phases (mean over ranks)
    phases: tuple[Phase, ...]
    sequence: np.ndarray
    region_problems: tuple[str, ...] = ()  # where user regions disagree with the phases
    coverage_slowest: float = float("nan")  # the same on the rank with the longest run
    loop_span: float = float("nan")  # share of the runtime from the loop's first entry to its last exit
    unmodelled: tuple[str, ...] = ()  # MPI calls of the run that sigex does not model
    notes: tuple[str, ...] = ()  # what the run did that a reader should know (sends never received)

    @property
    def loop_phases(self) -> tuple[Phase, ...]:
        return tuple(p for p in self.phases if p.kind == "loop")

    @property
    def weights(self) -> dict[int, int]:
        return {p.id: p.weight for p in self.phases}

    @property
    def main_loop_missing(self) -> "Phase | None":
        """The weight-1 phase (a part, or a loop iteration that never repeats) that holds
        the most of the run among those that look like an unfound loop, if any: it holds
        ``MISSING_SHARE`` of the run or more, it makes more calls than three times all
        repeated phases together, and its calls repeat (on its median rank, at least
        ``MISSING_REPEAT`` calls per distinct call: op, peer relative to the rank, root,
        bytes).
        A long computation before a short loop (few calls) and a set-up part (calls of
        many kinds, each a few times) are not that."""
        # (a rank that never takes part in a phase has no mean: NaN)
        loops = sum(float(np.nanmean(p.stats["events"])) for p in self.loop_phases if p.weight >= 2)
        big = [p for p in self.phases if p.weight == 1 and p.share >= self.MISSING_SHARE
               and float(np.nanmean(p.stats["events"])) > 3 * loops and _repeats(p) >= self.MISSING_REPEAT]
        return max(big, key=lambda p: p.share) if big else None

    #: what makes a weight-1 phase an unfound loop (``main_loop_missing``)
    MISSING_SHARE = 0.2
    MISSING_REPEAT = 8.0

    @property
    def pet_error(self) -> float:
        """Relative difference between Eq. 4 and the measured runtime."""
        return abs(self.pet - self.runtime) / self.runtime if self.runtime > 0 else 0.0

    #: the table shows at most this many phases (the largest, in order)
    TABLE_PHASES = 40

    def table(self) -> str:
        """The phase table ``sigex signature`` prints."""
        head = (f"{self.source or '<trace>'}: {self.app}, P={self.nprocs}, "
                f"workload {self.workload_label}={self.workload_value}, {self.work_mode} mode")
        shown = self.phases
        if len(shown) > self.TABLE_PHASES:  # the phases that hold most of the run, in order
            keep = sorted(sorted(self.phases, key=lambda p: -p.share)[:self.TABLE_PHASES - 2],
                          key=lambda p: p.id)
            shown = tuple(keep)
        rows = []
        for p in shown:
            label = f"{p.pattern}  [{', '.join(p.regions)}]" if p.regions else p.pattern
            rows.append((p.id, p.kind, p.weight, len(set(p.rank_classes.tolist())), label,
                         f"{1e3 * p.te:.3f}", f"{100 * p.share:.1f}", f"{100 * p.comp_fraction:.0f}"))
        lines = [head, "", table(("id", "kind", "weight", "classes", "pattern", "TE (ms)", "% time",
                                  "compute %"), rows, align="rlrrlrrr")]
        if len(shown) < len(self.phases):
            rest = [p for p in self.phases if p not in shown]
            lines.append(f"... and {len(rest)} more phases (weights {min(p.weight for p in rest)}-"
                         f"{max(p.weight for p in rest)}) holding {100 * sum(p.share for p in rest):.1f}% "
                         "of the run (`sigex signature --json` lists them all)")
        lines += ["",
                  f"coverage  {100 * self.coverage:.1f}% of the run's time is spent inside phases that "
                  f"repeat (mean over ranks; {100 * self.coverage_slowest:.1f}% on the slowest rank); "
                  f"the loop spans {100 * self.loop_span:.1f}% of the runtime",
                  f"Eq. 4     PET = sum TE_i x W_i = {self.pet:.4f} s; measured runtime "
                  f"{self.runtime:.4f} s ({100 * self.pet_error:.1f}% apart)"]
        main = self.main_loop_missing
        if main is not None:
            lines += ["", f"main loop not found: phase {main.id} ({main.kind}, weight 1) holds "
                          f"{100 * main.share:.0f}% of the run; its calls are {main.pattern[:160]}"]
        if self.unmodelled:
            lines += ["", "not modelled (MPI calls of this run that sigex does not model):"]
            lines += [f"  {m}" for m in self.unmodelled]
        if self.notes:
            lines += ["", "notes:"] + [f"  {m}" for m in self.notes[:8]]
            if len(self.notes) > 8:
                lines.append(f"  ... and {len(self.notes) - 8} more")
        if self.region_problems:
            lines += ["", "user regions that disagree with the detected phases:"]
            lines += [f"  {m}" for m in self.region_problems]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": 1, "kind": "sigex-signature", "source": self.source, "app": self.app,
            "nprocs": self.nprocs, "workload_label": self.workload_label,
            "workload_value": self.workload_value, "work_mode": self.work_mode,
            "runtime": self.runtime, "pet": self.pet, "coverage": self.coverage,
            "coverage_slowest": self.coverage_slowest, "loop_span": self.loop_span,
            "sequence": self.sequence.tolist(), "phases": [p.to_dict() for p in self.phases],
            "region_problems": list(self.region_problems),
            "unmodelled": list(self.unmodelled), "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Signature":
        if d.get("kind") != "sigex-signature" or d.get("format") != 1:
            raise TraceFormatError(f"not a sigex signature (format {d.get('format')!r})")
        return cls(source=d["source"], app=d["app"], nprocs=int(d["nprocs"]),
                   workload_label=d["workload_label"], workload_value=d["workload_value"],
                   work_mode=d["work_mode"], runtime=float(d["runtime"]), pet=float(d["pet"]),
                   coverage=float(d["coverage"]),
                   coverage_slowest=float(d.get("coverage_slowest", float("nan"))),
                   loop_span=float(d.get("loop_span", float("nan"))),
                   sequence=np.asarray(d["sequence"], np.int64),
                   phases=tuple(Phase.from_dict(p) for p in d["phases"]),
                   region_problems=tuple(d.get("region_problems", ())),
                   unmodelled=tuple(d.get("unmodelled", ())), notes=tuple(d.get("notes", ())))

    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write as JSON, atomically; an existing file is kept unless ``overwrite``."""
        return write_text_atomic(path, json.dumps(self.to_dict()), overwrite=overwrite)

    @classmethod
    def load(cls, path: str | Path) -> "Signature":
        path = Path(path)
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError) as err:
            raise TraceFormatError(f"{path}: cannot read the signature ({err})") from err
        except TraceFormatError as err:
            raise TraceFormatError(f"{path}: {err}") from err


def _repeats(phase: Phase) -> float:
    """Calls per distinct call (op, peer relative to the rank, root, bytes) in a phase's
    template, on its median rank by calls."""
    P = len(phase.template_offsets) - 1
    sizes = np.diff(phase.template_offsets)
    if not P or not sizes.any():
        return 0.0
    r = int(np.argsort(sizes, kind="stable")[P // 2])
    t = phase.rank_template(r)
    rel = np.where(t["peer"] >= 0, (t["peer"] - r) % P, t["peer"])
    distinct = len(np.unique(np.stack([t["op"], rel, t["root"], t["bytes"]]), axis=1).T)
    return len(t["op"]) / max(distinct, 1)


def signature_path(trace_path: str | Path) -> Path:
    """Where a trace's signature is saved: beside it, ``<stem>.signature.json``."""
    p = Path(trace_path)
    return p.with_name(p.stem + ".signature.json")
