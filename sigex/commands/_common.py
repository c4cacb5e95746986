"""What every command module shares: argparse types, input and output checks, progress lines.

The checks run before a command starts its work, so that a missing output folder or an
existing file is refused in a second, not after an hour of modelling. They raise
:class:`~signature.errors.UsageError` (exit status 2) naming the file and the fix.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable

from signature.errors import UsageError

#: --p-rule values: "any" or one of logical_model.modelsearch.P_RULES (spelled out here so
#: that `sigex --help` does not import the models; a test keeps the two equal)
P_RULE_CHOICES = ("any", "squares", "cubes", "powers_of_two")
#: replay.workers.MIN_EVENTS_PER_WORKER as the help shows it (spelled out for the same
#: reason; a test keeps the two equal)
MIN_EVENTS_TEXT = "150,000"
#: The bundled traces every --help example runs on (from the repository root).
BUNDLED = "traces/stencil/P4.h5"
#: Counts larger than this are nonsense for every option that takes one (processes, target P,
#: pieces, repetitions): 2^31, MPI's int rank limit.
HUGE = 2 ** 31


def formatter() -> dict:
    """Keyword arguments that every command's parser takes: examples keep their lines."""
    return {"formatter_class": argparse.RawDescriptionHelpFormatter}


def whole(least: int, what: str, most: int = HUGE):
    """An argparse type: a whole number of ``what`` from ``least`` to ``most``."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = least - 1
        if n < least:
            raise argparse.ArgumentTypeError(f"wants a whole number of {what}, {least} or more, got {text!r}")
        if n > most:
            raise argparse.ArgumentTypeError(f"wants a whole number of {what}, at most {most:,}, got {text!r}")
        return n
    return parse


def seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        x = float(text)
    except ValueError:
        x = -1.0
    if not (0 < x < 1e9):
        raise argparse.ArgumentTypeError(f"wants a number of seconds above 0, got {text!r}")
    return x


def p_rule(opts) -> str | None:
    """The --p-rule option as the models take it (None: any P)."""
    return opts.p_rule if opts.p_rule != "any" else None


def say_for(opts, cmd: str) -> Callable[[str], None]:
    """A progress callback printing ``sigex <cmd>: msg`` on stderr unless --quiet."""
    def say(msg: str) -> None:
        if not getattr(opts, "quiet", False):
            print(f"sigex {cmd}: {msg}", file=sys.stderr)
    return say


def input_file(path: str | Path, what: str = "trace file") -> Path:
    """A file named on the command line: it exists and is not a folder."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{p}: no such {what}")
    if p.is_dir():
        raise UsageError(f"{p} is a folder, not a {what}; name the file")
    return p


def input_sources(paths, what: str = "trace file or folder") -> None:
    """Files or folders named on the command line exist."""
    for path in paths:
        if not Path(path).exists():
            raise UsageError(f"{path}: no such {what}")


def enough_runs(traces, cmd: str) -> None:
    """Three or more signature runs, as every modelling command's help promises (a model from
    two points cannot tell a trend from noise, and cross-validation has nothing to leave out)."""
    from logical_model import trace_files

    input_sources(traces)
    if len(traces) > 1:
        for t in traces:
            if Path(t).is_dir():
                raise UsageError(f"{t} is a folder, not a trace file; give one folder of runs, or the "
                                 "runs' files")
    files = trace_files(traces)
    if len(files) < 3:
        where = traces[0] if len(traces) == 1 else ", ".join(map(str, traces))
        raise UsageError(f"{where}: {len(files)} signature run(s); sigex needs 3 or more P to tell a model "
                         "from noise (trace the application at more process counts)")


def writable_folder(folder: Path, flag: str) -> None:
    """``folder`` exists, is a folder, and a file can be created in it."""
    if not folder.exists():
        raise UsageError(f"{flag} {folder}: the folder {folder} does not exist; create it "
                         f"(mkdir -p {folder}) or choose another {flag}")
    if not folder.is_dir():
        raise UsageError(f"{flag}: {folder} is not a folder; choose another {flag}")
    try:  # as root, permission bits say nothing: try it (a read-only mount, an immutable folder)
        fd, tmp = tempfile.mkstemp(prefix=".sigex-check-", dir=folder)
    except OSError as err:
        raise UsageError(f"{flag}: cannot write in {folder} ({err.strerror or err}); choose another "
                         f"{flag}") from err
    os.close(fd)
    os.unlink(tmp)


def output_file(path: str | Path | None, force: bool, flag: str = "-o") -> Path | None:
    """An output file: its folder exists and is writable, and it does not exist unless --force."""
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{flag} {p} is a folder; name a file")
    if p.exists() and not force:
        raise UsageError(f"{p} already exists; pass --force to replace it")
    writable_folder(p.parent if str(p.parent) else Path("."), flag)
    return p


def output_folder(path: str | Path, flag: str = "-o", *, create_one_level: bool = True) -> Path:
    """An output folder: exists (or its parent does, and it will be made) and is writable."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{flag} {p} is a file, not a folder; choose another {flag}")
    if not p.exists():
        if not create_one_level:
            raise UsageError(f"{flag} {p}: no such folder; create it first (mkdir -p {p})")
        writable_folder(p.parent if str(p.parent) else Path("."), flag)
    else:
        writable_folder(p, flag)
    return p


def app_of(traces) -> str:
    """The application name recorded in the first signature trace (for default output names,
    known before any modelling); "app" when it cannot be read (the model will say why)."""
    try:
        import h5py

        from logical_model import trace_files

        with h5py.File(trace_files(traces)[0], "r") as f:
            app = f.attrs.get("app")
        app = app.decode() if isinstance(app, bytes) else app
        return str(app) if app else "app"
    except Exception:  # noqa: BLE001 - a name for a default only; reading the traces reports errors
        return "app"


def explain(err, path: str | Path | None, default: Path) -> None:
    """Write an error's full ``detail`` (every problem of every phase) to ``path`` (or
    ``default``) and name the file in the error's one line."""
    detail = getattr(err, "detail", None)
    if not detail:
        return
    target = Path(path) if path else default
    try:
        target.write_text(detail + "\n")
    except OSError:
        return
    err.args = (f"{err.args[0]} (every problem: {target})",) + err.args[1:]


def strict_arg(a: argparse.ArgumentParser) -> None:
    """``--strict``: refuse the target when any phase cannot be placed there."""
    a.add_argument("--strict", action="store_true",
                   help="refuse the target P when any phase cannot be placed there (default: leave those "
                        "phases out, name them, and say how much of the measured runs they held)")


def placeable_only(model, P: int, *, strict: bool, say):
    """``model`` (a logical or compute model) with only the phases that can be placed at P,
    naming each phase it leaves out on one line through ``say`` (``strict``: refuse)."""
    from logical_model.model import _short
    logical = getattr(model, "logical", model)
    keep, why = logical.placeable([P])
    apart = [d for d in logical.left_out if "measured_share" in d]  # phases the runs do not share
    if strict and why:
        raise logical.refusal(why)
    if strict and apart:
        from signature.errors import ExtrapolationError
        raise ExtrapolationError(f"{logical.app}: {len(apart)} phase(s) of the signature runs have no counterpart "
                                 f"in every run: {apart[0]['pattern'][:60]}: {apart[0]['problem']}")
    for d in apart[:12]:
        say(f"left out ({d['kind']}; {d['pattern'][:45]}): {d['problem']}")
    if len(apart) > 12:
        say(f"... and {len(apart) - 12} more phases the runs do not share")
    if not why:
        return model
    for k, problems in why.items():
        ph = logical.phases[k]
        pattern = ph.pattern if len(ph.pattern) <= 48 else ph.pattern[:45].rstrip(" ,") + "..."
        say(f"phase {ph.id} ({ph.kind}; {pattern}) cannot be placed at P={P} and is left out: "
            + _short(problems, 200))
    return model.subset(keep, why)
