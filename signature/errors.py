"""The sigex error family: every expected failure is a ``SigexError``.

The packages later in the pipeline (``logical_model``, ``compute_model``,
``replay``) and the CLI import their errors from here, so that a caller can
catch one root. A message names the place (file, rank, phase) and says what
to do; lower-level causes are chained with ``raise ... from err``.
"""

from __future__ import annotations

__all__ = [
    "SigexError",
    "UsageError",
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
    """Root of every error sigex raises on purpose (the CLI prints it as one line).

    ``exit_code`` is the ``sigex`` command's exit status for it: 1 when sigex read what it
    was given and something in it (a damaged file, a deadlock, a phase that cannot be
    extrapolated, a failed run) stops the work; 2 when the command itself must change
    (:class:`UsageError` and the errors that name what the user chose: a machine profile, a
    campaign file, a set of runs that cannot be modelled together, an incomplete trace).
    """

    exit_code = 1


class UsageError(SigexError):
    """The command as given cannot run: a file named on it is missing or is a folder, an output
    exists without --force or cannot be written, an option is out of range."""

    exit_code = 2


class TraceFormatError(SigexError):
    """A trace file is missing, foreign, truncated or inconsistent."""


class IncompleteTraceError(TraceFormatError):
    """The trace comes from a run that crashed or was killed (re-run, or --allow-incomplete)."""

    exit_code = 2


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

    exit_code = 2


class SigexWarning(UserWarning):
    """A result is usable but doubtful (e.g. a fit whose CV error is high)."""
