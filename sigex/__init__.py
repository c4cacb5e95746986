"""sigex: predict how an MPI application strong-scales from a few small traced runs.

The pipeline lives in four packages, each usable on its own:

signature      -- trace MPI runs (PMPI tracer, HDF5 traces) and find their signature
logical_model  -- relate phases across P, infer rules, write the logical trace at any P
compute_model  -- per-phase computation regression, distant point, physical trace
replay         -- LogGP replay of a physical trace, predicted runtime

This package is the command line (``sigex``, see :mod:`sigex.cli`) and re-exports
the library calls that mirror its commands:

trace_run         -- ``sigex trace``
load_trace        -- ``sigex show``
extract           -- ``sigex signature``
load_models       -- the models of a campaign file or trace folder (``sigex predict`` etc. start here)
predict           -- ``sigex predict``: Prediction with report(), to_dict()
scaling           -- ``sigex scaling``: Scaling with report(), csv(), plot(path)
compare_machines  -- ``sigex compare-machines``: predictions, fastest first
"""

from signature import __version__, extract, load_trace, trace_run

from .pipeline import compare_machines, load_models, predict, scaling

__all__ = ["trace_run", "load_trace", "extract", "load_models", "predict", "scaling", "compare_machines",
           "__version__"]
