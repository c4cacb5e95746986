"""The whole prediction: signature runs -> models -> physical trace -> replay -> report.

The library side of ``sigex predict``, ``sigex scaling`` and
``sigex compare-machines``. A *source* is a campaign file (``examples/<app>.toml``:
its runs, small workloads and declared work) or a folder of signature traces
(then ``<folder>/small`` holds the small-workload runs, used when ``work`` is
given). Each prediction writes the physical trace for P to a temporary file,
replays it on the machine and reports the runtime from a steady-state replay
(each phase for a few repetitions, extrapolated in the repetitions:
:func:`replay.unroll.replay_steady`) next to PET = sum TE_i x W_i (paper
Eq. 4, which charges a pipelined phase its fill every repetition), per-phase
computation and communication, the fitted models
with their fit quality, and a warning for everything that was not
extrapolated as the method wants.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from signature._memory import short_of
from signature._text import table
from signature.errors import CampaignError, DeadlockError, ExtrapolationError, SigexError, UsageError

__all__ = ["Models", "Prediction", "Scaling", "load_models", "physical_trace", "predict", "scaling",
           "compare_machines", "parse_p_range"]


@dataclasses.dataclass
class Models:
    """The logical and compute models of one application, and where they came from."""

    logical: Any
    compute: Any
    source: str
    measured: dict[int, float]  # P -> measured runtime of the signature runs (s)
    #: phases left out because they cannot be placed at the targets (:meth:`restricted`)
    refused: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def __post_init__(self):
        if not self.refused:  # the phases the runs do not share (logical_model.correspond)
            self.refused = [{"phase": d["id"], "kind": d["kind"], "pattern": d["pattern"], "problem": d["problem"],
                             "problems": [d["problem"]], "measured_share": dict(d["measured_share"]),
                             "measured_computation": dict(d.get("measured_computation", {}))}
                            for d in self.logical.left_out if "measured_share" in d]

    @property
    def app(self) -> str:
        return self.logical.app or "app"

    def with_grid(self, P: int, dims: Sequence[int]) -> "Models":
        """These models with the process grid at P fixed to ``dims`` (``--grid``)."""
        logical = self.logical.with_grid(P, dims)
        return dataclasses.replace(self, logical=logical, compute=dataclasses.replace(self.compute, logical=logical))

    def restricted(self, Ps: Sequence[int], *, strict: bool = False) -> "Models":
        """These models with only the phases that can be placed at every P of ``Ps``; each
        phase left out goes to :attr:`refused` with its problems and the share of the
        measured signature runs it held, so that a report can say how much of the run the
        prediction leaves out. ``strict``: refuse instead (the whole error, as
        :meth:`LogicalModel.check_target` gives it). A process grid the traced P cannot
        decide is always a refusal (give ``--grid``)."""
        keep, why = self.logical.placeable(list(Ps))
        if strict and why:
            raise self.logical.refusal(why)
        if strict and self.refused:
            raise ExtrapolationError(f"{self.app}: {len(self.refused)} phase(s) cannot be modelled: "
                                     + "; ".join(_refused_name(r) + f": {r['problem']}" for r in self.refused[:3])
                                     + (f"; and {len(self.refused) - 3} more" if len(self.refused) > 3 else ""))
        if not why:
            return self
        return self._leave_out(keep, why)

    def _leave_out(self, keep: Sequence[int], why: dict[int, list[str]]) -> "Models":
        """These models with only the phases at indices ``keep``; the others (``why``: their
        problems) go to :attr:`refused` with the share of the measured runs they held."""
        by_id = {s.nprocs: {p.id: p for p in s.phases} for s in self.compute.signatures}
        mode = self.logical.work_mode
        refused = [{"phase": ph.id, "kind": ph.kind, "pattern": ph.pattern,
                    "problem": why[k][0], "problems": list(why[k]),
                    "measured_share": {P: float(at[ph.id].share) if ph.id in at else float("nan")
                                       for P, at in sorted(by_id.items())},
                    "measured_computation": {P: at[ph.id].computation(mode) if ph.id in at else float("nan")
                                             for P, at in sorted(by_id.items())}}
                   for k, ph in enumerate(self.logical.phases) if k in why]
        compute = self.compute.subset(keep, why)
        return dataclasses.replace(self, logical=compute.logical, compute=compute, refused=self.refused + refused)

    def without_stuck(self, P: int, machine, collectives: str = "algorithms") -> "Models":
        """These models without the phases whose logical trace at P cannot be replayed on its
        own, each left out with the replay's reason; the others kept. A statistical phase
        realised in its runs' order that cannot (made-up peers of a tree of receives before
        sends wait in a cycle: hpcc's set-up at P = 32, its rank 2 receiving from itself) is
        first realised deferred (:meth:`~logical_model.LogicalModel.deferred_phase`), and
        kept so where that replays. Unchanged when every phase replays alone (then the
        phases wait on each other, and the whole replay's error stands)."""
        from replay import Program, replay
        from signature import load_trace
        why: dict[int, list[str]] = {}
        logical = self.logical

        def stuck(model, k: int, name: str) -> str | None:
            one = model.subset([k], {})
            try:
                replay(Program.from_trace(load_trace(one.logical_trace(P, Path(tmp) / name))), machine,
                       collectives=collectives)
            except DeadlockError as err:
                # (the replay's advice on a captured trace, "was the trace cut?", is not this one's)
                return str(err).split(": ", 1)[-1].split("; ")[0].split(". Check that")[0]
            except ExtrapolationError as err:  # (realised deferred, its messages pair unevenly)
                return str(err)
            return None

        with tempfile.TemporaryDirectory(prefix="sigex-phase-") as tmp:
            for k in range(len(logical.phases)):
                first = stuck(logical, k, f"{k}.h5")
                if first is None:
                    continue
                try:  # a statistical phase in its runs' order: deferred, it cannot wait in a cycle
                    other = logical.deferred_phase(k, f"its realisation in its runs' order at P={P} "
                                                      f"could not be replayed ({first})")
                except ValueError:
                    other = None
                if other is not None and stuck(other, k, f"{k}-deferred.h5") is None:
                    logical = other
                    continue
                why[k] = [f"its realisation at P={P} cannot be replayed ({first})"]
        models = self if logical is self.logical else dataclasses.replace(
            self, logical=logical, compute=dataclasses.replace(self.compute, logical=logical))
        if not why:
            return models
        return models._leave_out([k for k in range(len(logical.phases)) if k not in why], why)

    def refused_share(self) -> float:
        """The largest share of a measured signature run that the refused phases held."""
        if not self.refused:
            return 0.0
        Ps = self.refused[0]["measured_share"].keys()
        return max((sum(r["measured_share"][P] for r in self.refused) for P in Ps), default=0.0)


def load_models(source: str | Path, *, work: str | None = None, p_rule: str | None = None,
                progress: Callable[[str], None] | None = None) -> Models:
    """Models from a campaign file or a folder of signature traces."""
    from compute_model import campaign, from_traces
    from logical_model import trace_files

    say = progress or (lambda m: None)
    src = Path(source)
    if src.suffix == ".toml":
        c = campaign.load(src)
        missing = [r for r in campaign.plan(c) if r.kind != "check" and campaign._state(r) != "complete"]
        if missing:
            raise CampaignError(f"{src}: {len(missing)} run(s) not traced yet (first: {missing[0].describe()}); "
                                f"run `sigex run {src}` first")
        logical, compute = campaign.models(c, progress=say)
    else:
        if not src.exists():
            raise UsageError(f"{src}: no such campaign file or trace folder")
        files = trace_files(src)
        if len(files) < 3:
            raise UsageError(f"{src}: {len(files)} signature run(s); sigex needs 3 or more P to tell a "
                             "model from noise (trace the application at more process counts)")
        compute = from_traces(files, small=src / "small" if work and (src / "small").is_dir() else None,
                              work=work, p_rule=p_rule, progress=say)
        logical = compute.logical
    measured = {s.nprocs: s.runtime for s in compute.signatures}
    return Models(logical=logical, compute=compute, source=str(src), measured=measured)


@dataclasses.dataclass
class Prediction:
    """The predicted run of one application at P on one machine."""

    app: str
    P: int
    machine: str
    pet: float
    steady: float
    full: float | None
    phases: list[dict[str, Any]]
    models: list[dict[str, Any]]
    warnings: list[str]
    work_mode: str
    #: phases not predicted (:meth:`Models.restricted`): id, kind, pattern, problem(s) and
    #: the share of each measured signature run they held
    refused: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: what the phases not predicted would add at P, their computation alone
    #: (:func:`compute_model.crm.left_out_computation`); None when none is left out
    left_out: dict[str, Any] | None = None

    @property
    def runtime(self) -> float:
        return self.full if self.full is not None else self.steady

    def core_hours(self) -> float:
        return self.runtime * self.P / 3600.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def report(self) -> str:
        out = [f"sigex prediction: {self.app} at P = {self.P:,} on {self.machine} ({self.work_mode} mode)", ""]
        out.append(f"predicted runtime  {self.runtime:.4f} s   ("
                   + ("full replay of every repetition; " if self.full is not None else "")
                   + f"steady-state replay {self.steady:.4f} s; PET = sum TE_i x W_i = {self.pet:.4f} s)")
        out.append(f"core-hours         {self.core_hours():.3f}")
        if self.refused:
            out += ["", _refused_text(self.refused, self.left_out, self.P, self.runtime)]
        out.append("")
        rows = [(p["phase"], p["kind"], p["pattern"][:34], f"{p['weight']:,}", f"{1e3 * p['te']:.4f}",
                 f"{1e3 * p['computation']:.4f}", f"{1e3 * p['communication']:.4f}",
                 f"{100 * p['share']:.1f}") for p in self.phases]
        out.append(table(("phase", "kind", "pattern", "weight", "TE (ms)", "comp (ms)", "comm (ms)",
                          "% of PET"), rows, align="rllrrrrr"))
        out.append("")
        out.append("fitted models (computation per process and repetition, and weights):")
        for m in self.models:
            out.append(f"  phase {m['phase']}: CRM {m['crm']}")
            out.append(f"           weight {m['weight']}")
        if self.warnings:
            out.append("")
            out.append("warnings:")
            out += [f"  - {w}" for w in self.warnings]
        return "\n".join(out)


def _refused_name(r: dict[str, Any]) -> str:
    return f"phase {r['phase']}" if r["phase"] is not None else "a phase the smallest P lacks"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3].rstrip(" ,") + "..."


def _refused_text(refused: Sequence[dict[str, Any]], left: dict[str, Any] | None = None, P: int | None = None,
                  runtime: float | None = None) -> str:
    """The phases a prediction leaves out, with the share of the measured runs they held;
    with ``left`` (:func:`compute_model.crm.left_out_computation` at ``P``), what their
    computation alone would add to the predicted ``runtime``."""
    Ps = sorted(refused[0]["measured_share"])
    total = {P: sum(r["measured_share"][P] for r in refused) for P in Ps}
    n = len(refused)
    out = [f"NOT PREDICTED: {n} phase{'s' if n > 1 else ''} {'are' if n > 1 else 'is'} left out of the "
           "runtime above (cannot be placed at this P, or not every signature run has it); in the measured "
           f"signature runs {'they' if n > 1 else 'it'} held "
           + ", ".join(f"{100 * total[P]:.1f}% (P={P})" for P in Ps) + " of the runtime:"]
    shown = sorted(refused, key=lambda r: -max(r["measured_share"].values()))[:12]
    # (a phase with a figure of its own is in every run, so the smallest P's id names it)
    figure = {f["phase"]: f for f in (left or {}).get("phases", ())}
    for r in shown:
        f = figure.get(r["phase"])
        out.append(f"  {_refused_name(r)} ({r['kind']}; {_cut(r['pattern'], 48)}): "
                   + ", ".join(f"{100 * r['measured_share'][P]:.1f}%" for P in Ps)
                   + (f"; its computation {f['value']:.4g} s at P={P:,} ({f['formula']})" if f else ""))
        out.append(f"      {_cut(r['problem'], 200)}"
                   + (f" (+{len(r['problems']) - 1} more)" if len(r["problems"]) > 1 else ""))
    if len(refused) > len(shown):
        out.append(f"  ... and {len(refused) - len(shown)} more phases (the --json output lists them all)")
    if left and left["total"] is not None:
        out.append(f"  Their computation alone (each phase's slowest rank, all repetitions, summed per run and "
                   f"fitted over P: {left['formula']}) would add {left['total']:.4g} s at P={P:,}"
                   + (f": {runtime + left['total']:.4g} s with the predicted runtime" if runtime is not None else "")
                   + "; their communication is not predicted, so the run would take longer still.")
    return "\n".join(out)


def _phase_list(ids: Sequence[Any]) -> str:
    named = [str(i) for i in ids if i is not None]
    text = (f"phase{'s' if len(named) > 1 else ''} {', '.join(named[:12])}" + (" ..." if len(named) > 12 else "")
            if named else "")
    unnamed = len(ids) - len(named)
    if unnamed:
        text += (" and " if text else "") + f"{unnamed} phase{'s' if unnamed > 1 else ''} the smallest P lacks"
    return text


def _warnings(models: Models) -> list[str]:
    out = list(models.logical.notes)
    from compute_model.crm import ClassMix
    for ph, crm, ipt in zip(models.logical.phases, models.compute.crms, models.compute.ipts):
        by_class = isinstance(crm.model, ClassMix)
        for pr in ph.problems:
            out.append(f"phase {ph.id}: not extrapolable: {pr}")
        for note in ph.notes:
            if by_class and note.startswith("work differs"):  # (the CRM per class says whose)
                continue
            out.append(f"phase {ph.id}: {note}")
        if by_class:
            out.append(f"phase {ph.id}: its ranks compute apart by class ({crm.model.members.describe()} and "
                       "the others): a CRM per class, each rank its class's computation")
        if ph.kind == "loop" and not ipt.constant:
            out.append(f"phase {ph.id}: total work varies {100 * ipt.spread:.0f}% across the signature runs "
                       f"(more than {100 * ipt.tolerance:.0f}%): Eq. 2's constant total does not hold, and "
                       "the computation comes from the CRM alone")
        if ph.kind == "loop" and crm.distant is None and crm.skipped:
            out.append(f"phase {ph.id}: no distant point ({crm.skipped})")
        cv = crm.model.stats.get("cv_error")
        if cv is not None and np.isfinite(cv) and cv > 0.10:
            out.append(f"phase {ph.id}: its CRM cross-validates poorly (LOO error {100 * cv:.0f}%)")
    return out


#: memory a replay in one process takes per event of the trace, at its peak (the trace read,
#: the Program's matching, the engine): 430 bytes measured on MPB at P = 1,000 (16 M events)
REPLAY_BYTES_PER_EVENT = 450


def _nothing_placed(models: Models, P: int, err: ExtrapolationError) -> ExtrapolationError:
    """``err`` (the refusal of every phase at P), saying what the runs' computation alone,
    fitted over P, would be there: all a prediction can tell of a code none of whose phases
    can be placed (Quantum ESPRESSO's Davidson loops, whose phases differ at every P)."""
    from compute_model.crm import left_out_computation
    n = len(models.logical.phases)
    problems = models.logical.phase_problems(P) if models.logical.grid_problem(P) is None else {}
    if not n or not all(problems.get(k) for k in range(n)):
        return err  # (a grid to give, or phases some of which can be placed: the error as it is)
    every = models._leave_out([], {k: problems[k] for k in range(n)})
    left = left_out_computation(every.refused, P)
    if left["total"] is None:
        return err
    # (what can still be said first: the refusal that follows names every phase and is long)
    out = ExtrapolationError(f"{models.app}: no phase can be placed at P={P:,}; the runs' computation alone "
                             f"(each phase's slowest rank, all repetitions, summed per run and fitted over P: "
                             f"{left['formula']}) would be {left['total']:.4g} s there, their communication "
                             f"not predicted. {err}")
    out.detail = getattr(err, "detail", None)
    return out


def physical_trace(models: Models, P: int, progress: Callable[[str], None] | None = None):
    """The physical trace for P (machine-independent: one serves every machine), in memory;
    ``models`` must place every phase there (:meth:`Models.restricted`). Refused, naming the
    memory it needs, where its replay would take more memory than the machine has left
    (an all-pairs exchange at P = 4,096 holds 100 M events per repetition)."""
    import h5py
    from signature import load_trace

    models.logical.check_target(P)
    with tempfile.TemporaryDirectory(prefix="sigex-predict-") as tmp:
        (progress or (lambda m: None))(f"P={P:,}: writing the physical trace")
        path = models.compute.physical_trace(P, Path(tmp) / f"P{P}.h5")
        with h5py.File(path, "r") as f:
            n = int(f["index"]["rank_offsets"][-1])
        need = n * REPLAY_BYTES_PER_EVENT
        free = short_of(need)
        if free is not None:
            raise ExtrapolationError(
                f"{models.app}: the physical trace at P={P:,} holds {n:,} events (one repetition of each "
                f"phase); replaying them takes about {need / 2**30:.1f} GiB and this machine has "
                f"{free / 2**30:.1f} GiB available. Predict at a smaller P, or on a machine with more "
                "memory (`sigex physical` writes the trace at any P in bounded memory, for `sigex replay` "
                "there)")
        return load_trace(path)


def predict(models: Models, P: int, machine, *, full: bool = False, collectives: str = "algorithms",
            progress: Callable[[str], None] | None = None, trace=None, strict: bool = False) -> Prediction:
    """Predict the run at P on ``machine`` (a :class:`replay.Machine` or a profile name/path);
    ``trace``: the :func:`physical_trace` for P, if already written. Phases that cannot be
    placed at P are left out and reported (:meth:`Models.restricted`; ``strict``: refuse)."""
    from compute_model.crm import left_out_computation
    from replay import Program, load, replay
    from replay.unroll import STEADY_MAX_EVENTS, replay_steady, unroll

    say = progress or (lambda m: None)
    try:
        models = models.restricted([P], strict=strict)
    except ExtrapolationError as err:
        raise _nothing_placed(models, P, err) from None
    m = load(machine) if isinstance(machine, (str, Path)) else machine
    if trace is None:
        trace = physical_trace(models, P, progress)
    say(f"P={P:,}: replaying {trace.n_events:,} events on {m.name}")
    try:
        res = replay(Program.from_trace(trace), m, collectives=collectives)
    except DeadlockError:
        # a phase whose realisation cannot finish is left out like one that cannot be
        # placed (strict: refused), when replaying each phase alone tells which
        fewer = models.without_stuck(P, m, collectives) if not strict else models
        if fewer is models:
            raise
        redone = {ph.id for ph in fewer.logical.phases if ph.deferred} - {ph.id for ph in models.logical.phases
                                                                          if ph.deferred}
        say(f"P={P:,}: {len(fewer.refused) - len(models.refused)} phase(s) cannot be replayed there: left out"
            + (f"; {len(redone)} realised deferred instead of in their runs' order" if redone else ""))
        models = fewer
        trace = physical_trace(models, P, progress)
        res = replay(Program.from_trace(trace), m, collectives=collectives)
    w = np.asarray(trace.meta["phase_weights"], float)
    pet = res.pet()
    say(f"P={P:,}: steady-state replay (a few repetitions of each phase)")
    ss = replay_steady(trace, m, collectives=collectives, once=res)
    steady = ss.runtime
    full_t = None
    if full:
        say(f"P={P:,}: full replay ({int((np.bincount(trace.events['phase']) * w).sum()):,} events)")
        full_t = replay(Program.from_trace(unroll(trace)), m, collectives=collectives).runtime
    phases = []
    for k, ph in enumerate(models.logical.phases):
        te = float(res.te[k])
        phases.append({"phase": ph.id, "kind": ph.kind, "pattern": ph.pattern, "weight": int(w[k]), "te": te,
                       "computation": float(res.phase_computation[k].max()),
                       "communication": float(res.phase_communication[k].max()),
                       "share": te * w[k] / pet if pet > 0 else 0.0})
    fitted = [{"phase": ph.id, "crm": c.model.describe(), "weight": ph.weight.formula()}
              for c, ph in zip(models.compute.crms, models.logical.phases)]
    warnings = _warnings(models)
    left = left_out_computation(models.refused, P) if models.refused else None
    if models.refused:
        warnings.insert(0, f"{len(models.refused)} phase(s) not predicted ("
                        + _phase_list([r["phase"] for r in models.refused])
                        + f"): they held up to {100 * models.refused_share():.1f}% of a measured signature "
                        "run, which the predicted runtime leaves out"
                        + (f" (their computation alone would add {left['total']:.4g} s at P={P:,})"
                           if left["total"] is not None else ""))
    Pfit = max(models.logical.Ps)
    if P > Pfit:
        at_fit, at_p = models.compute.computation(Pfit), models.compute.computation(P)
        for ph, a, b in zip(models.logical.phases, at_fit, at_p):
            if ph.kind == "loop" and b > 1.05 * a > 0:
                warnings.append(f"phase {ph.id}: its CRM grows from {a:.4g} s at P={Pfit} to {b:.4g} s at "
                                f"P={P:,}; computation per process rarely grows under strong scaling, so "
                                "check the fit (`sigex ipt`) and the signature runs' noise")
    if ss.reduced:
        few = [k for k in ss.reduced if ss.repetitions[1][k] == 1]
        ids = [models.logical.phases[k].id for k in ss.reduced]
        warnings.append(f"the steady-state replay repeated {_phase_list(ids)} fewer times than the others, to "
                        f"stay within {STEADY_MAX_EVENTS:,} events (the physical trace at P={P:,} holds "
                        f"{trace.n_events:,}, one repetition of each phase)"
                        + (f"; {_phase_list([models.logical.phases[k].id for k in few])} only once: each of "
                           "their repetitions costs its isolated time, as in PET" if few else ""))
    if abs(pet - steady) > 0.10 * steady:
        warnings.append(f"PET ({pet:.4g} s) and the steady-state replay ({steady:.4g} s) differ by "
                        f"{100 * abs(pet / steady - 1):.0f}%: repetitions of a phase overlap (a pipeline), "
                        "so PET pays its fill and drain every repetition; the runtime is the steady-state one")
    return Prediction(app=models.app, P=P, machine=m.name, pet=pet, steady=steady, full=full_t, phases=phases,
                      models=fitted, warnings=warnings, work_mode=models.logical.work_mode,
                      refused=models.refused, left_out=left)


def parse_p_range(text: str) -> list[int]:
    """``"64:65536"`` -> powers of two from 64 to 65536; ``"64,100,256"`` -> that list."""
    try:
        if ":" in text:
            lo, hi = (int(x) for x in text.split(":"))
            if lo < 1 or hi < lo:
                raise ValueError
            Ps = [2 ** e for e in range(math.ceil(math.log2(lo)), int(math.log2(hi)) + 1)]
        else:
            Ps = sorted({int(x) for x in text.split(",") if x.strip()})
        if not Ps or Ps[0] < 1 or Ps[-1] >= 2 ** 31:  # no P in the range, or beyond any MPI
            raise ValueError
        return Ps
    except ValueError as err:
        raise UsageError(f"--p {text!r}: give LO:HI (powers of two between, below 2^31) or a list like "
                         "64,128,256") from err


@dataclasses.dataclass
class Scaling:
    """A predicted strong-scaling curve."""

    app: str
    machine: str
    rows: list[dict[str, Any]]  # P, runtime, speedup, efficiency, phase times
    measured: dict[int, float]
    bottleneck: str | None
    half_efficiency_P: int | None
    phase_ids: list[int] = dataclasses.field(default_factory=list)  # the phase of each "phases" entry
    #: phases left out of every point (:meth:`Models.restricted`)
    refused: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def _ids(self) -> list[int]:
        return self.phase_ids or list(range(len(self.rows[0]["phases"])))

    def _left(self) -> bool:
        """Whether the rows carry the left-out phases' computation."""
        return any(r.get("left_out") is not None for r in self.rows)

    def csv(self) -> str:
        left = self._left()
        head = (["P", "runtime_s", "speedup", "efficiency"] + [f"phase{k}_s" for k in self._ids()]
                + (["left_out_computation_s"] if left else []))
        lines = [",".join(head)]
        for r in self.rows:
            lines.append(",".join([str(r["P"]), f"{r['runtime']:.6g}", f"{r['speedup']:.6g}",
                                   f"{r['efficiency']:.6g}"] + [f"{x:.6g}" for x in r["phases"]]
                                  + ([f"{r['left_out']:.6g}" if r.get("left_out") is not None else ""]
                                     if left else [])))
        return "\n".join(lines) + "\n"

    def report(self) -> str:
        left = self._left()
        rows = [(f"{r['P']:,}", f"{r['runtime']:.4f}", f"{r['speedup']:.2f}", f"{100 * r['efficiency']:.0f}%")
                + ((f"{r['left_out']:.4f}" if r.get("left_out") is not None else "-",) if left else ())
                for r in self.rows]
        head = ("P", "runtime (s)", "speedup", "efficiency") + (("left out: computation (s)",) if left else ())
        out = [f"predicted strong scaling of {self.app} on {self.machine} (speedup and efficiency relative to "
               f"P = {self.rows[0]['P']:,})", table(head, rows, align="r" * len(head))]
        if left:
            out.append("left out: computation (s) is what the phases left out of every point compute there "
                       "(each one's slowest rank, fitted over P), beside the predicted runtime, which leaves "
                       "them out")
        if self.measured:
            out.append("measured signature runs (this machine, oversubscribed: wall time is not comparable "
                       "with a dedicated machine): " + ", ".join(f"P={p}: {t:.3f} s" for p, t in sorted(self.measured.items())))
        out.append(f"scalability bottleneck: {self.bottleneck or 'none within the range'}")
        out.append("parallel efficiency stays above 50% over the whole range" if self.half_efficiency_P is None
                   else f"parallel efficiency drops below 50% at P = {self.half_efficiency_P:,}")
        if self.refused:
            out.append(_refused_text(self.refused))
        return "\n".join(out)

    def plot(self, path: str | Path) -> Path:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        P = np.array([r["P"] for r in self.rows])
        T = np.array([r["runtime"] for r in self.rows])
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
        a1.loglog(P, T, "o-", base=2, label="predicted")
        ph = np.array([r["phases"] for r in self.rows])
        for k in range(ph.shape[1]):
            if ph[:, k].max() > 0.02 * T.max():
                a1.loglog(P, ph[:, k], "--", base=2, alpha=0.7, label=f"phase {self._ids()[k]}")
        if self.measured:
            mp = sorted(self.measured)
            a1.loglog(mp, [self.measured[p] for p in mp], "s", base=2, label="measured (traced machine)")
        a1.set_xlabel("P")
        a1.set_ylabel("runtime (s)")
        a1.legend(fontsize="small")
        a1.set_title(f"{self.app} on {self.machine}")
        a2.semilogx(P, [100 * r["efficiency"] for r in self.rows], "o-", base=2)
        a2.axhline(50, color="grey", lw=0.8, ls=":")
        a2.set_xlabel("P")
        a2.set_ylabel("parallel efficiency (%)")
        a2.set_ylim(0, 110)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return Path(path)


def scaling(models: Models, Ps: Sequence[int], machine, *, strict: bool = False,
            progress: Callable[[str], None] | None = None) -> Scaling:
    """The predicted strong-scaling curve over ``Ps``; names the phase that stops scaling first.
    Every point holds the same phases: those that can be placed at every P of ``Ps``."""
    models = models.restricted([int(P) for P in Ps], strict=strict)
    preds = [predict(models, int(P), machine, progress=progress) for P in Ps]
    P0, T0 = preds[0].P, preds[0].runtime
    rows = []
    for p in preds:
        sp = T0 / p.runtime if p.runtime > 0 else float("nan")
        rows.append({"P": p.P, "runtime": p.runtime, "speedup": sp, "efficiency": sp * P0 / p.P,
                     "phases": [ph["te"] * ph["weight"] for ph in p.phases],
                     # what the phases left out of every point compute there (fitted over P)
                     "left_out": p.left_out["total"] if p.left_out else None})
    half = next((r["P"] for r in rows if r["efficiency"] < 0.5), None)
    # the phase whose own efficiency first falls below 50% (the scalability bottleneck)
    bottleneck = None
    first_bad = None
    for k, ph in enumerate(preds[0].phases):
        t0 = rows[0]["phases"][k]
        if t0 <= 0.01 * T0:
            continue  # negligible at the start of the curve
        for r in rows[1:]:
            eff = t0 / r["phases"][k] * P0 / r["P"] if r["phases"][k] > 0 else float("inf")
            if eff < 0.5:
                if first_bad is None or r["P"] < first_bad[0] or (r["P"] == first_bad[0] and r["phases"][k] > first_bad[2]):
                    first_bad = (r["P"], k, r["phases"][k])
                break
    if first_bad is not None:
        P_b, k, _ = first_bad
        ph = preds[0].phases[k]
        bottleneck = (f"phase {ph['phase']} ({ph['pattern']}) stops scaling first: its efficiency falls below 50% at "
                      f"P = {P_b:,}")
    return Scaling(app=models.app, machine=preds[0].machine, rows=rows,
                   measured={p: t for p, t in models.measured.items() if np.isfinite(t)},
                   bottleneck=bottleneck, half_efficiency_P=half,
                   phase_ids=[ph["phase"] for ph in preds[0].phases], refused=models.refused)


def compare_machines(models: Models, P: int, machines: Sequence, *, strict: bool = False,
                     progress: Callable[[str], None] | None = None) -> list[Prediction]:
    """Predictions on every machine, fastest first."""
    if not machines:
        raise SigexError("give at least one --machine")
    models = models.restricted([P], strict=strict)
    trace = physical_trace(models, P, progress)
    preds = [predict(models, P, m, progress=progress, trace=trace) for m in machines]
    return sorted(preds, key=lambda p: p.runtime)


def machines_table(preds: Sequence[Prediction]) -> str:
    best = preds[0].runtime
    rows = [(i + 1, p.machine, f"{p.runtime:.4f}", f"{p.runtime / best:.2f}x", f"{p.core_hours():.3f}")
            for i, p in enumerate(preds)]
    text = (f"{preds[0].app} at P = {preds[0].P:,}, ranked by predicted runtime\n"
            + table(("rank", "machine", "runtime (s)", "vs best", "core-hours"), rows, align="rlrrr"))
    # (the phases left out compute the same on every machine: CPU time, as the placed phases' CRMs)
    return text + ("\n" + _refused_text(preds[0].refused, preds[0].left_out, preds[0].P)
                   if preds[0].refused else "")


def to_json(obj) -> str:
    return json.dumps(obj.to_dict() if hasattr(obj, "to_dict") else obj, indent=1, default=float)
