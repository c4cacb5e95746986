"""Fortran wrappers for MPIs whose Fortran layer bypasses the C entry points.

Placeholder for the generator of Fortran-symbol wrappers (``mpi_send_``,
``mpi_send__``, the ``mpi_f08`` names); :func:`wrappers` returns the C file to
compile into the tracer, or None when the MPI needs none.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["wrappers"]


def wrappers(mpicc: str, library: Path | None, build_dir: Path) -> Path | None:
    """The generated C file of Fortran wrappers for this MPI, or None."""
    return None
