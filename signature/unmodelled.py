"""MPI calls a trace counted but does not model, and how much of the run they held.

The tracer wraps every function the MPI library exports: the ones sigex models
become events; every other one is counted, with the wall time inside it, per
rank (``rank<r>.unmodelled``, assembled into the trace's
``meta["unmodelled_calls"]``: name -> calls, ranks, seconds summed over ranks,
max_rank_seconds). Calls that neither communicate nor synchronise (rank and
size queries, datatype and group handling, attribute caching, ...) are
*local*: they are listed but need no model. Every other unmodelled call (MPI-IO,
one-sided, neighbourhood collectives, ...) is named in a note that follows the
trace into ``sigex show``, ``signature``, ``extrapolate`` and ``predict``.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["UnmodelledCall", "unmodelled_calls", "unmodelled_notes", "is_local"]

_LOCAL = re.compile(
    r"^MPI_(Comm_(rank|size|group|remote_size|remote_group|test_inter|compare|get_\w+|set_\w+"
    r"|call_errhandler|create_errhandler|create_keyval|free_keyval|delete_attr)"
    r"|Group_\w+|Type_\w+|Op_\w+|Info_\w+|Errhandler_\w+|Error_\w+|Add_error_\w+|Get_\w+"
    r"|Status_\w+|Request_get_status\w*|Cart_(coords|rank|get|shift|map)|Cartdim_get|Dims_create"
    r"|Topo_test|Graph_(get|neighbors|neighbors_count|map)|Graphdims_get|Dist_graph_neighbors\w*"
    r"|Address|Aint_\w+|Pack\w*|Unpack\w*|Buffer_(attach|detach)\w*|Alloc_mem|Free_mem"
    r"|Keyval_\w+|Attr_\w+|Abi_\w+|Register_datarep\w*|Reduce_local\w*|Op_commutative"
    r"|\w+_c2f|\w+_f2c|Win_(get_\w+|set_\w+|call_errhandler|create_errhandler|create_keyval"
    r"|free_keyval|delete_attr)|File_(get_\w+|call_errhandler|create_errhandler|set_errhandler)"
    r"|Session_get_\w+)$")


def is_local(name: str) -> bool:
    """``name`` neither communicates nor synchronises (it needs no model)."""
    return bool(_LOCAL.match(name))


#: the entry of the MPI calls made from threads other than MPI_Init's (the tracer records
#: the calling thread's only, and counts the others)
OTHER_THREADS = "MPI calls from other threads"


@dataclasses.dataclass(frozen=True)
class UnmodelledCall:
    """One MPI function the trace counted but does not model."""

    name: str
    calls: int
    ranks: int
    seconds: float           # summed over ranks
    max_rank_seconds: float
    local: bool

    def note(self, runtime: float | None) -> str:
        if self.name == OTHER_THREADS:
            return (f"{self.calls:,} MPI calls from threads other than the one that called MPI_Init, on "
                    f"{self.ranks} rank(s): not traced (a library's own threads; the traced thread's "
                    "time waiting for them is in its bursts)")
        share = ""
        if runtime and runtime > 0:
            share = f", {100 * self.max_rank_seconds / runtime:.1f}% of the run on the busiest rank"
        return (f"{self.name} called {self.calls:,} times on {self.ranks} rank(s): not modelled "
                f"({self.max_rank_seconds:.3g} s inside it on the busiest rank{share})")


def unmodelled_calls(meta: dict) -> list[UnmodelledCall]:
    """The counted, unmodelled calls of a trace's metadata, the costliest first."""
    table = meta.get("unmodelled_calls") or {}
    rows = [UnmodelledCall(name, int(v.get("calls", 0)), int(v.get("ranks", 0)),
                           float(v.get("seconds", 0.0)), float(v.get("max_rank_seconds", 0.0)),
                           is_local(name))
            for name, v in table.items()]
    return sorted(rows, key=lambda c: (-c.max_rank_seconds, -c.calls, c.name))


def unmodelled_notes(meta: dict, runtime: float | None = None) -> list[str]:
    """One line per unmodelled call that communicates or synchronises."""
    return [c.note(runtime) for c in unmodelled_calls(meta) if not c.local]
