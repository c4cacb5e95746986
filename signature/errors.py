"""The sigex error family: every expected failure is a ``SigexError``.

The packages later in the pipeline (``logical_model``, ``compute_model``,
``replay``) and the CLI import their errors from here, so that a caller can
catch one root. A message names the place (file, rank, phase) and says what
to do; lower-level causes are chained with ``raise ... from err``.
"""

from __future__ import annotations

__all__ = [
    "SigexError",
    "TraceFormatError",
    "IncompleteTraceError",
    "MissingCounterError",
    "TracerError",
    "ExtrapolationError",
    "DeadlockError",
    "CampaignError",
    "SigexWarning",
]


class SigexError(Exception):
    """Root of every error sigex raises on purpose (the CLI prints it as one line)."""


class TraceFormatError(SigexError):
    """A trace file is missing, foreign, truncated or inconsistent."""


class IncompleteTraceError(TraceFormatError):
    """The trace comes from a run that crashed or was killed."""


class MissingCounterError(SigexError):
    """A hardware counter column was asked for but the traced machine had no PMU."""


class TracerError(SigexError):
    """The tracer library cannot be built or a traced run cannot be launched."""


class ExtrapolationError(SigexError):
    """A phase or quantity cannot be extrapolated to the requested P."""


class DeadlockError(SigexError):
    """A trace can never complete when replayed."""


class CampaignError(SigexError):
    """A campaign file is wrong or one of its runs failed."""


class SigexWarning(UserWarning):
    """A result is usable but doubtful (e.g. a fit whose CV error is high)."""
