"""logical_model: relate phases across P, infer communication rules, fit volumes,
weights and work, and write the logical trace for any P (Panadero et al. §2.2).

Building
    from_traces(folder)        signature traces -> LogicalModel (what `sigex extrapolate` runs)
    build(signatures, ...)     the same from Signature objects
    read_signatures(folder)    the checked signatures (and grids, communicators: Topologies)
    grid_of(trace)             the Cartesian grid a traced run used

The model
    LogicalModel               phases as functions of P; describe(), save()/load(),
                               events(P), logical_trace(P, path), check_target(P),
                               undecided(P), grid_problem(P), with_grid(P, dims)
    PhaseModel, SlotModel, WorkGroup, GridPower, ORDER_CLASSES
    ModelError                 the signatures cannot be related or modelled

Communication rules (logical_model.rules)
    PeerRule, Grid, Observation, infer_peer, infer_root

Statistical phases (logical_model.statistical): calls per rank that differ by rank and P
    runs, match, channel_rows  runs of calls, channels between them, their realisation
    GridCount                  calls per rank as a grid dimension's function (d - 1, [d > 1], ...)

Process grids (logical_model.topology)
    dims_create(P, ndims)      MPI_Dims_create's grid
    DimsRule, DIMS_RULES       how a program's grid follows P (pencils, powers of two, q x q,
                               least surface for a box, ...); fit_dims_rules(observed)
    SubGrid, infer_subgrid     row/column/plane communicators as a function of P

Model search (logical_model.modelsearch), shared by every regression in sigex
    fit(P, y)                  PMNF search with leave-one-out CV (Calotoiu et al.)
    choose(P, y, p_rule=...)   PMNF or the paper's displacement line
    PMNF, Displacement, SearchOptions, load_model
"""

from .model import (ORDER_CLASSES, GridCount, GridPower, LogicalModel, ModelError, PhaseModel, SlotModel, Topologies,
                    WorkGroup, build, from_traces, grid_of, read_signatures, trace_files)
from .modelsearch import PMNF, Displacement, SearchOptions, choose, fit, load_model
from .rules import Grid, Observation, PeerRule, infer_peer, infer_root
from .topology import DIMS_RULES, DimsRule, SubGrid, dims_create, fit_dims_rules, infer_subgrid

__all__ = ["from_traces", "build", "read_signatures", "grid_of", "trace_files", "LogicalModel", "PhaseModel",
           "SlotModel", "WorkGroup", "GridPower", "GridCount", "ModelError", "PeerRule", "Grid", "Observation",
           "infer_peer", "infer_root", "dims_create", "DimsRule", "DIMS_RULES", "fit_dims_rules", "SubGrid",
           "infer_subgrid", "ORDER_CLASSES", "Topologies", "fit", "choose", "PMNF", "Displacement",
           "SearchOptions", "load_model"]
