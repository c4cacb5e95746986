"""logical_model: relate phases across P, infer communication rules, fit volumes,
weights and work, and write the logical trace for any P (Panadero et al. §2.2).

Building
    from_traces(folder)        signature traces -> LogicalModel (what `sigex extrapolate` runs)
    build(signatures, ...)     the same from Signature objects
    read_signatures(folder)    the checked signatures (and grids) of the traces build takes
    grid_of(trace)             the Cartesian grid a traced run used

The model
    LogicalModel               phases as functions of P; describe(), save()/load(),
                               events(P), logical_trace(P, path)
    PhaseModel, SlotModel, WorkGroup, GridPower
    ModelError                 the signatures cannot be related or modelled

Communication rules (logical_model.rules)
    PeerRule, Grid, Observation, infer_peer, infer_root
    dims_create(P, ndims)      MPI_Dims_create's grid

Model search (logical_model.modelsearch), shared by every regression in sigex
    fit(P, y)                  PMNF search with leave-one-out CV (Calotoiu et al.)
    choose(P, y, p_rule=...)   PMNF or the paper's displacement line
    PMNF, Displacement, SearchOptions, load_model
"""

from .model import (GridPower, LogicalModel, ModelError, PhaseModel, SlotModel, WorkGroup, build,
                    from_traces, grid_of, read_signatures, trace_files)
from .modelsearch import PMNF, Displacement, SearchOptions, choose, fit, load_model
from .rules import Grid, Observation, PeerRule, infer_peer, infer_root
from .topology import dims_create

__all__ = ["from_traces", "build", "read_signatures", "grid_of", "trace_files", "LogicalModel", "PhaseModel",
           "SlotModel", "WorkGroup", "GridPower", "ModelError", "PeerRule", "Grid", "Observation",
           "infer_peer", "infer_root", "dims_create", "fit", "choose", "PMNF", "Displacement",
           "SearchOptions", "load_model"]
