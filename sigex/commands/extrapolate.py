"""``sigex extrapolate``: the logical model from signature traces, and the logical trace for P."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from signature.errors import ExtrapolationError, UsageError

from ._common import (P_RULE_CHOICES, app_of, enough_runs, explain, formatter, output_file,
                      placeable_only, strict_arg, writable_folder, whole)

NAME = "extrapolate"
HELP = "learn the logical model from signature traces and write the logical trace for P"
#: slots and problems per phase printed on the terminal (--explain FILE writes them all)
BRIEF = 40


def add_parser(sub) -> argparse.ArgumentParser:
    x = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="Relate the phases of signature runs at several P, infer each event's "
                    "communication rule, fit volumes, weights and work with the PMNF model search, "
                    "print the rules and fitted models per phase, and write the logical trace for "
                    "the target P (HDF5, the trace schema plus phase weights).",
        epilog="examples:\n  sigex extrapolate traces/stencil/ --target 4096 -o /tmp/\n"
               "  sigex extrapolate traces/cg/P4.h5 traces/cg/P8.h5 traces/cg/P16.h5 --target 256 "
               "-o /tmp/cg-256.h5\n"
               "  sigex extrapolate traces/stencil/ --target 4096 --no-trace --save-model /tmp/stencil.json\n"
               "  sigex extrapolate traces/stencil/ --target 4096 --grid 32x128 -o /tmp/\n"
               "A folder contributes its *.h5 files (not its subfolders); give 3 or more P (fewer are "
               "refused). Phases that cannot be placed at the target are left out of the trace and "
               "named (its attribute phases_left_out lists them); --strict refuses instead.")
    x.add_argument("traces", nargs="+", help="folder of signature traces, or the trace files")
    x.add_argument("--target", type=whole(1, "processes"), required=True,
                   help="process count to extrapolate to")
    x.add_argument("-o", "--output", help="logical trace file or folder "
                   "(default: ./<app>-P<target>.logical.h5)")
    x.add_argument("--p-rule", choices=P_RULE_CHOICES,
                   help="the P values the application accepts: lets weights use the paper's "
                        "displacement fit")
    x.add_argument("--grid", metavar="DIMS", type=_grid,
                   help="the process grid at the target (e.g. 4x4x2), overriding the dims rule the "
                        "traced P suggest; needed where several rules fit them and part at the target "
                        "(the declared grid's, or the grid whose rows and columns the sub-communicators "
                        "are), or where the program chooses its dims by no rule; dims of fewer processes than "
                        "the target name the grid of a class's communicator of that size (--grid 4x6x1 "
                        "at P=32: GROMACS's 24 particle ranks)")
    x.add_argument("--save-model", metavar="FILE", help="also save the model as JSON")
    x.add_argument("--no-trace", action="store_true", help="print the model only")
    x.add_argument("--json", action="store_true", help="print the model as JSON")
    x.add_argument("--explain", metavar="FILE",
                   help="write the whole model (every slot and problem of every phase) to FILE; the "
                        "terminal shows at most %d of each per phase" % BRIEF)
    strict_arg(x)
    x.add_argument("--force", action="store_true", help="replace existing output files")
    x.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    return x


def _grid(text: str) -> tuple[int, ...]:
    from logical_model.topology import parse_grid
    try:
        return parse_grid(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def output_of(opts) -> Path | None:
    """The logical trace's path, checked before any modelling (None: --no-trace)."""
    if opts.no_trace:
        return None
    name = f"{app_of(opts.traces)}-P{opts.target}.logical.h5"
    out = Path(opts.output or name)
    if out.is_dir():
        writable_folder(out, "-o")
        out = out / name
    return output_file(out, opts.force)


def run(opts: argparse.Namespace) -> int:
    from logical_model import from_traces

    def say(msg: str) -> None:
        if not opts.quiet:
            print(f"sigex extrapolate: {msg}", file=sys.stderr)

    enough_runs(opts.traces, NAME)
    out = output_of(opts)
    output_file(opts.save_model, opts.force, "--save-model")
    output_file(opts.explain, opts.force, "--explain")
    model = from_traces(opts.traces, p_rule=opts.p_rule, progress=say)
    if opts.grid:
        try:
            model = model.with_grid(opts.target, opts.grid)
        except ExtrapolationError as err:  # a grid that does not fit the target or the model
            raise UsageError(str(err)) from err
    if opts.explain:
        Path(opts.explain).write_text(model.describe(opts.target) + "\n")
        say(f"wrote the whole model to {opts.explain}")
    if opts.json:
        print(json.dumps(model.to_dict(), indent=1))
    else:
        print(model.describe(opts.target, max_slots=BRIEF, max_problems=3))
    if opts.save_model:
        path = model.save(opts.save_model, overwrite=opts.force)
        say(f"saved the model to {path}")
    if out is None:
        return 0
    try:
        model = placeable_only(model, opts.target, strict=opts.strict, say=say)
    except ExtrapolationError as err:
        if opts.explain:  # the whole model, every problem included, is there already
            err.args = (f"{err.args[0]} (every problem: {opts.explain})",)
        else:
            explain(err, None, out.with_name(out.name + ".refusal.txt"))
        raise
    last = [-1]

    def blocks(done: int, total: int) -> None:
        pct = int(100 * done / total)
        if not opts.quiet and pct // 10 != last[0] // 10:
            last[0] = pct
            print(f"sigex extrapolate: writing ranks {done}/{total} ({pct}%)", file=sys.stderr)

    model.logical_trace(opts.target, out, overwrite=opts.force, progress=blocks)
    print(f"wrote {out}: logical trace for P={opts.target}, phases "
          f"{[ph.id for ph in model.phases]} weighted {model.weights(opts.target)} (stored once each, "
          "not unrolled)" + _left_out_text(model.left_out))
    return 0


def _left_out_text(left_out: list[dict]) -> str:
    """The phases left out, by id; those of the larger runs that have no counterpart in
    the smallest (no id of their own) by count."""
    if not left_out:
        return ""
    ids = sorted(d["id"] for d in left_out if d.get("id") is not None)
    other = sum(d.get("id") is None for d in left_out)
    parts = [f"phase{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}"] if ids else []
    if other:
        parts.append(f"{other} kind{'s' if other > 1 else ''} of phase that only larger runs have")
    return "; left out: " + " and ".join(parts)
