"""compute_model: per-phase computation regression (CRM), instruction prediction
table (IPT), distant point, physical trace (Panadero et al. §3).

    from_traces(folder, small=..., work="n*n/P")          logical + compute model, traces read once
    build(logical, signatures, small=..., work="n*n/P")   CRM and IPT per phase, distant point
    ComputeModel                  computation(P), describe(target), physical_trace(P, path)
    build_ipt(P, work, weight)    the paper's Table 1 for one phase (IPT, IPTRow)
    fit_crm(phase, P, time, dp)   CRM without and with the distant point (CRM)
    distant_point_counters        minimal-CPI small run -> nearest IPT row (counters mode)
    distant_point_declared        minimal CPU time per unit of declared work -> equal-work P
    work_function("n*n/P", "n")   a declared-work expression, parsed safely
    accepted_p(p_rule, lo, hi)    the P an application accepts

    campaign.load / plan / run / models / check   campaign files: runs of any MPI program
                                  (files, prepare steps, env per run), models, check runs
"""

from .crm import (CRM, IPT, DistantPoint, IPTRow, accepted_p, build_ipt, distant_point_counters,
                  distant_point_declared, fit_crm, select_small_run, work_function)
from .physical import ComputeModel, build, from_traces

__all__ = ["build", "from_traces", "ComputeModel", "CRM", "IPT", "IPTRow", "DistantPoint", "build_ipt", "fit_crm",
           "distant_point_counters", "distant_point_declared", "select_small_run", "work_function",
           "accepted_p"]
