"""signature: capture MPI runs and find their signature (Panadero et al. §2.1).

Capture
-------
trace_run        -- run an unmodified MPI program under the PMPI tracer, write one HDF5 trace
TraceResult      -- what ``trace_run`` returns (path, trace, exit code)
tracer_library   -- build (once, cached) the tracer for the ``mpicc`` on PATH

Trace files
-----------
load_trace       -- read a trace file into numpy arrays (refuses incomplete runs unless asked)
Trace            -- one run: columnar events sorted by (rank, seq), metadata, side tables
CommTable        -- communicators with world-rank membership and Cartesian topology
write_trace      -- write a Trace atomically (never overwrites unless asked)
OPS, OP_CODE     -- MPI operation names and their codes in the ``op`` column

Signature (phases)
------------------
extract          -- find the phases of one trace, their weights, costs, PET (Eq. 4), coverage
Signature        -- the result: phases in order, a table, JSON round trip (save/load)
Phase            -- one phase: weight, op structure, per-rank template and statistics
signature_path   -- where a trace's signature is saved (``P16.signature.json`` beside it)
region           -- ``with region("halo"):`` names a phase in a traced run (optional; no-op untraced)
unmodelled_calls -- MPI calls a trace counted but does not model (MPI-IO, one-sided, ...), with their time
unmodelled_notes -- one line per such call that communicates, as the reports print them

Errors
------
SigexError and its family live in :mod:`signature.errors`.

Anything not listed here may change without notice.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("sigex")
except _metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0.1.0.dev0"

from ._build import tracer_library
from .capture import TraceResult, trace_run
from .errors import (IncompleteTraceError, MissingCounterError, SigexError, SigexWarning,
                     TraceFormatError, TracerError, UsageError)
from .io import load_trace, write_trace
from .model import Phase, Signature, signature_path
from .phases import extract
from .region import region
from .trace import OP_CODE, OPS, CommTable, Trace
from .unmodelled import unmodelled_calls, unmodelled_notes

__all__ = [
    "trace_run", "TraceResult", "tracer_library",
    "load_trace", "write_trace", "Trace", "CommTable", "OPS", "OP_CODE",
    "extract", "Signature", "Phase", "signature_path", "region",
    "unmodelled_calls", "unmodelled_notes",
    "SigexError", "TraceFormatError", "IncompleteTraceError", "MissingCounterError",
    "TracerError", "UsageError", "SigexWarning", "__version__",
]
