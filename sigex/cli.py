"""The ``sigex`` command: a thin shell over the packages' library functions.

The commands live in :mod:`sigex.commands`, one module each. This module builds the parser
from them and applies one rule to every command: a user's mistake or a damaged input ends in
one line ``sigex <command>: error: <what, which file, what to do>`` on stderr and a non-zero
exit status (2 when the command must change: a usage error; 1 otherwise), never a traceback.
``--debug`` or ``SIGEX_DEBUG=1`` shows the traceback instead, for bug reports. mpi4py is never
imported here: ``sigex --help`` starts no MPI.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Sequence

from signature import __version__
from signature._memory import tune_allocation
from signature.errors import SigexError

from .commands import COMMANDS
from .commands._common import BUNDLED, MIN_EVENTS_TEXT, P_RULE_CHOICES  # noqa: F401 - re-exported
from .commands.trace import normalise_argv

__all__ = ["main", "build_parser", "P_RULE_CHOICES", "MIN_EVENTS_TEXT"]

#: exit status of an error that is not a usage error (a damaged input, a failed run)
EXIT_FAILED = 1
#: exit status of a usage error (argparse's too)
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sigex", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Predict how an MPI application strong-scales from a few small traced runs.",
        epilog=f"example:\n  sigex show {BUNDLED}\n"
               "  sigex trace -n 4 -o /tmp/stencil/ --workload n=512 -- "
               "python examples/stencil.py --n 512 --iters 20\n"
               "  sigex extrapolate traces/stencil/ --target 4096 -o /tmp/\n"
               "`sigex COMMAND --help` shows each command's options and examples. On an error, "
               "--debug (or SIGEX_DEBUG=1) shows the traceback.")
    p.add_argument("--version", action="version", version=f"sigex {__version__}")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error (SIGEX_DEBUG=1 too)")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    for mod in COMMANDS:
        parser = mod.add_parser(sub)
        # --debug after the command name as well; SUPPRESS keeps a `sigex --debug CMD` given before it
        parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                            help="show the traceback of an error (SIGEX_DEBUG=1 too)")
        parser.set_defaults(func=mod.run)
    return p


def _debugging(opts) -> bool:
    return bool(getattr(opts, "debug", False)) or os.environ.get("SIGEX_DEBUG", "") not in ("", "0")


def _one_line(err: BaseException) -> str:
    """An error as one line: its message with line breaks folded (a refusal never fills the
    terminal; the details go to a file the message names)."""
    text = " ".join(part.strip() for part in str(err).splitlines() if part.strip())
    return text if len(text) <= 2000 else text[:1997] + "..."


def _os_error(err: OSError) -> str:
    what = err.strerror or str(err)
    where = f"{err.filename}: " if err.filename else ""
    return f"{where}{what[0].lower() + what[1:] if what else what}"


def _detail_to_file(err: SigexError) -> None:
    """An error with more to say than one line (``err.detail``: every problem of every phase)
    that no command has written beside its output yet goes to a temporary file, named in the
    line."""
    detail = getattr(err, "detail", None)
    if not detail or not err.args or "every problem:" in str(err.args[0]):
        return
    import tempfile

    try:
        fd, path = tempfile.mkstemp(prefix="sigex-refusal-", suffix=".txt")
        with os.fdopen(fd, "w") as f:
            f.write(detail + "\n")
    except OSError:
        return
    err.args = (f"{err.args[0]} (every problem: {path})",) + err.args[1:]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``sigex`` console script; returns the exit status."""
    parser = build_parser()
    argv = normalise_argv(list(sys.argv[1:] if argv is None else argv))
    opts = parser.parse_args(argv)
    if not getattr(opts, "func", None):
        parser.print_help()
        return EXIT_USAGE
    cmd = f"sigex {opts.cmd}" + (f" {opts.action}" if getattr(opts, "action", None) else "")
    debug = _debugging(opts)
    tune_allocation()  # the command's own process only (signature/_memory.py)
    try:
        return int(opts.func(opts))
    except BrokenPipeError:  # `sigex ... | head`: the reader left; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"{cmd}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the one place every error becomes one line
        if debug:
            traceback.print_exc()
        if isinstance(err, SigexError):
            _detail_to_file(err)
            print(f"{cmd}: error: {_one_line(err)}", file=sys.stderr)
            return err.exit_code
        if isinstance(err, FileExistsError):  # a library's refusal to overwrite
            print(f"{cmd}: error: {_one_line(err)}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(err, (PermissionError, IsADirectoryError, NotADirectoryError, FileNotFoundError)) \
                or (isinstance(err, OSError) and err.filename):
            print(f"{cmd}: error: {_os_error(err)}; check the path and its folder's permissions",
                  file=sys.stderr)
            return EXIT_FAILED
        if isinstance(err, MemoryError):
            print(f"{cmd}: error: out of memory; try a smaller target P or --pieces", file=sys.stderr)
            return EXIT_FAILED
        print(f"{cmd}: error: internal error, a bug in sigex ({type(err).__name__}: {_one_line(err)[:300]}); "
              "re-run with --debug (or SIGEX_DEBUG=1) for the traceback and report it", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
