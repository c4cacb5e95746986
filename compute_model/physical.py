"""The compute model of an application and its physical trace (Panadero et al. §3).

:func:`build` takes the logical model and the signatures it came from, and
per phase fits the CRM (:mod:`compute_model.crm`), builds the IPT, and, when
small-workload signature runs and the declared work per process are given,
adds the distant point. :meth:`ComputeModel.physical_trace` writes the
logical trace with every burst's predicted computation time in ``t_comp``
(seconds on the traced machine; the replay divides by the target machine's
relative speed): the CRM gives a phase's mean computation per process and
repetition at P, and each burst keeps the share of it that Eq. 3 and the
slot shares give its rank and slot.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

import numpy as np

from logical_model import LogicalModel
from logical_model.correspond import align_to, correspond
from signature.errors import ExtrapolationError
from signature.model import Signature

from .crm import (CRM, IPT, ClassMix, build_ipt, distant_point_counters, distant_point_declared, fit_class_crm,
                  fit_crm, work_function)

__all__ = ["ComputeModel", "build", "from_traces"]


def _rank_mean(values) -> float:
    """The mean over the ranks that have the phase (a rank that sits it out, as hpcc's do
    in some kernels, has no figure: NaN); NaN when none has."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else float("nan")


def _time_per_rep(sig: Signature, k: int, mode: str) -> float:
    """A phase's computation per process and repetition in one run (seconds)."""
    st = sig.phases[k].stats
    col = "comp_mean" if mode == "counters" else "cpu_mean"
    return _rank_mean(st[col])


def _class_rule(ph):
    """The class split of a logical phase (a member rule: its ranks' order class, or the
    class of a Comm_split its calls use: GROMACS's PME ranks), or None."""
    from logical_model.rules import ClassComm
    if ph.class_rule is not None:
        return ph.class_rule
    for s in ph.slots:
        for role in (s.comm_role, s.space.role if s.space is not None else None):
            if isinstance(role, ClassComm):
                return role.members
    return None


def _work_per_rep(sig: Signature, k: int, mode: str) -> float:
    st = sig.phases[k].stats
    return _rank_mean(st["instr_mean" if mode == "counters" else "cpu_mean"])


@dataclasses.dataclass
class ComputeModel:
    """Per phase: the CRM and the IPT, on top of the logical model."""

    logical: LogicalModel
    crms: list[CRM]
    ipts: list[IPT]
    signatures: list[Signature] = dataclasses.field(default_factory=list)  # the runs fitted

    def computation(self, P: int) -> np.ndarray:
        """Predicted computation per process and repetition of every phase at P (s)."""
        return np.array([max(0.0, float(np.asarray(c.predict(P)).reshape(-1)[0])) for c in self.crms])

    def describe(self, target: int | None = None) -> str:
        out = []
        for ph, crm, ipt in zip(self.logical.phases, self.crms, self.ipts):
            out.append(f"phase {ph.id} ({ph.kind}) {ph.pattern}")
            out.append("  " + crm.describe().replace("\n", "\n  "))
            if target:
                out.append(f"  predicted computation per process and repetition at P={target}: "
                           f"{float(np.asarray(crm.predict(target)).reshape(-1)[0]):.6g} s")
            out.append(f"  IPT: measured totals vary {100 * ipt.spread:.1f}% "
                       f"({'constant' if ipt.constant else 'not constant'} within "
                       f"{100 * ipt.tolerance:.0f}%)")
        return "\n".join(out)

    def subset(self, keep: Sequence[int], why: dict[int, list[str]] | None = None) -> "ComputeModel":
        """This model with only the phases at indices ``keep`` (:meth:`LogicalModel.placeable`:
        the phases that can be placed at the targets when others cannot; ``why``: the others'
        problems)."""
        return dataclasses.replace(self, logical=self.logical.subset(keep, why),
                                   crms=[self.crms[k] for k in keep], ipts=[self.ipts[k] for k in keep])

    def physical_trace(self, P: int, path: str | Path, *, overwrite: bool = False, block: int = 65536,
                       progress=None) -> Path:
        """Write the physical trace for P: the logical trace plus ``t_comp`` per burst."""
        from logical_model.writer import write_logical_trace

        self.logical.check_target(P)
        comp = self.computation(P)
        mean_work = np.array([ph.work_per_rank(P).mean() for ph in self.logical.phases])
        scale = np.where(mean_work > 0, comp / np.where(mean_work > 0, mean_work, 1.0), 0.0)
        # a phase with a CRM per rank class: each rank's computation is its class's
        by_rank = {}
        for k, (ph, crm) in enumerate(zip(self.logical.phases, self.crms)):
            if isinstance(crm.model, ClassMix):
                w = ph.work_per_rank(P)
                by_rank[k] = np.where(w > 0, crm.model.per_rank(P) / np.where(w > 0, w, 1.0), 0.0)

        def t_comp(ev):
            out = ev["work"] * scale[ev["phase"]]
            for k, sc in by_rank.items():
                m = ev["phase"] == k
                if m.any():
                    out[m] = ev["work"][m] * sc[ev["rank"][m]]
            return out

        meta = {"source": f"compute model from P = {', '.join(map(str, self.logical.Ps))}",
                "crm": "; ".join(f"phase {ph.id}: {c.model.formula()}"
                                 for ph, c in zip(self.logical.phases, self.crms))}
        return write_logical_trace(self.logical, P, path, overwrite=overwrite, block=block,
                                   progress=progress, trace_kind="physical", extra={"t_comp": t_comp},
                                   extra_meta=meta)


def build(logical: LogicalModel, signatures: Sequence[Signature], *,
          small: Sequence[Signature] = (), work: str | None = None, p_rule: str | None = None,
          P_max: int = 1 << 20) -> ComputeModel:
    """Fit the CRM and the IPT of every phase; add the distant point from ``small``.

    Parameters
    ----------
    logical : LogicalModel
        Built from ``signatures``.
    signatures : the signature runs (original workload), one per P.
    small : signature runs of the same program with a smaller workload, at increasing P.
    work : the declared work per process (``"n*n/P"``), needed in CPU-time mode.
    p_rule : the P values the application accepts.
    P_max : the largest P the distant point may emulate.
    """
    sigs = sorted(signatures, key=lambda s: s.nprocs)
    if [s.nprocs for s in sigs] != logical.Ps:
        raise ExtrapolationError(f"the signatures (P = {[s.nprocs for s in sigs]}) are not the ones "
                                 f"the logical model was built from (P = {logical.Ps})")
    sigs, _ = correspond(sigs)  # the phases the logical model kept, as it kept them
    mode = logical.work_mode
    small = sorted(small, key=lambda s: s.nprocs)
    if small:
        aligned = [align_to(sigs[0], s) for s in small]
        bad = [s for s, a in zip(small, aligned) if a is None or len(a.phases) != len(logical.phases)]
        if not bad:
            small = aligned
        if bad or {s.app for s in small} != {logical.app}:
            s = (bad or small)[0]
            raise ExtrapolationError(f"{s.source}: the small-workload run is not the same program "
                                     f"as the signature runs ({s.app}, {len(s.phases)} phases vs "
                                     f"{logical.app}, {len(logical.phases)})")
    Ps = np.array(logical.Ps)
    crms, ipts = [], []
    wf = None
    if small and mode != "counters":
        if not work:
            raise ExtrapolationError("CPU-time mode needs the declared work per process "
                                     "(work = \"n*n/P\" in the campaign) for the distant point")
        wf = work_function(work, logical.workload_label or "n")
    col = "comp_mean" if mode == "counters" else "cpu_mean"
    for k, ph in enumerate(logical.phases):
        times = np.array([_time_per_rep(s, k, mode) for s in sigs])
        rule = _class_rule(ph)
        by_class = fit_class_crm(k, Ps, [s.phases[k].stats[col] for s in sigs], rule) if rule is not None else None
        wrk = np.array([_work_per_rep(s, k, mode) for s in sigs])
        weights = np.array([s.phases[k].weight for s in sigs], float)
        ipt = build_ipt(Ps, wrk, weights, phase=k, mode=mode, p_rule=p_rule, weight_model=ph.weight)
        ipts.append(ipt)
        dp, skipped = None, None
        if ph.kind != "loop":
            skipped = "not a repeated phase"
        elif not small:
            skipped = "no small-workload runs"
        elif not ipt.constant:
            skipped = (f"the measured totals vary {100 * ipt.spread:.1f}% (more than "
                       f"{100 * ipt.tolerance:.0f}%): not strong scaling at constant work")
        else:
            sP = np.array([s.nprocs for s in small])
            st = np.array([_time_per_rep(s, k, mode) for s in small])
            try:
                if mode == "counters":
                    ins = np.array([_rank_mean(s.phases[k].stats["instr_mean"]) for s in small])
                    cyc = np.array([_rank_mean(s.phases[k].stats["cycles_mean"]) for s in small])
                    dp = distant_point_counters(ipt, sP, ins, cyc, st, P_max=P_max)
                else:
                    dp = distant_point_declared(sP, st, work=wf, small=float(small[0].workload_value),
                                                original=float(logical.workload_value), p_rule=p_rule,
                                                P_max=P_max, phase=k)
            except ExtrapolationError as err:
                skipped = str(err)
        crms.append(by_class or fit_crm(k, Ps, times, dp, skipped))
    return ComputeModel(logical=logical, crms=crms, ipts=ipts, signatures=sigs)


def from_traces(source, *, small=None, work: str | None = None, p_rule: str | None = None,
                P_max: int = 1 << 20, progress=None) -> ComputeModel:
    """The logical and compute models from signature traces, each trace read once.

    ``source`` and ``small`` name traces as :func:`logical_model.trace_files` takes them
    (a folder or files); ``small`` are the small-workload runs of the distant point,
    used in counters mode, or in CPU-time mode when ``work`` declares the work per process.
    """
    from logical_model import build as build_logical
    from logical_model import read_signatures

    say = progress or (lambda m: None)
    sigs, grids = read_signatures(source, progress=progress)
    say(f"modelling {len(sigs)} signatures")
    logical = build_logical(sigs, p_rule=p_rule, grids=grids)
    small_sigs: list[Signature] = []
    if small is not None:
        if work or logical.work_mode == "counters":
            small_sigs, _ = read_signatures(small)
            say(f"distant point from {len(small_sigs)} small-workload runs")
        else:
            say("small-workload runs given, but without the declared work per process (e.g. "
                "work 'n*n/P') CPU-time mode cannot place them: no distant point")
    return build(logical, sigs, small=small_sigs, work=work, p_rule=p_rule, P_max=P_max)
