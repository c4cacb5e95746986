"""``sigex predict``: the whole pipeline at one P on one machine, and its report."""

from __future__ import annotations

import argparse

from signature.errors import UsageError

from ._common import P_RULE_CHOICES, formatter, output_file, p_rule, say_for, strict_arg, whole

NAME = "predict"
HELP = "predict the runtime at a large P on a machine: the whole pipeline and a report"


def source_args(a: argparse.ArgumentParser) -> None:
    """The options of the commands that start from a campaign or a trace folder."""
    a.add_argument("source", help="campaign file (examples/<app>.toml) or folder of signature traces")
    a.add_argument("--p-rule", choices=P_RULE_CHOICES, default="any",
                   help="the P values the application accepts (folders only; a campaign says it)")
    a.add_argument("--work", help="declared work per process, e.g. 'n*n/P' (folders only: enables "
                   "the distant point from <folder>/small)")
    strict_arg(a)
    a.add_argument("-q", "--quiet", action="store_true", help="no progress messages")


def grid_arg(a: argparse.ArgumentParser) -> None:
    from .extrapolate import _grid
    a.add_argument("--grid", metavar="DIMS", type=_grid,
                   help="the process grid at the target (e.g. 4x6x1), where the traced P cannot decide "
                        "it (a program that chooses its grid by load, or sub-communicators two grids give "
                        "at every traced P)")


def models(opts, cmd: str):
    """The models of the campaign file or trace folder named on the command line."""
    from pathlib import Path

    from sigex.pipeline import load_models

    src = Path(opts.source)
    if src.exists() and not src.is_dir() and src.suffix != ".toml":
        raise UsageError(f"{src}: give a campaign file (.toml) or a folder of signature traces, "
                         "not a single file")
    m = load_models(opts.source, work=opts.work, p_rule=p_rule(opts), progress=say_for(opts, cmd))
    if getattr(opts, "grid", None):
        from signature.errors import ExtrapolationError
        try:
            m = m.with_grid(opts.target, opts.grid)
        except ExtrapolationError as err:  # a grid that does not fit the target or the model
            raise UsageError(str(err)) from err
    return m


def machines(names):
    """The machine profiles named on the command line, loaded before any modelling."""
    from replay import load

    return [load(m) for m in names]


def add_parser(sub) -> argparse.ArgumentParser:
    pr = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="Models from the signature runs, the physical trace for the target P, its replay on "
                    "the machine, and a report: predicted runtime (PET, and the full replay with --full), "
                    "per-phase table, fitted models with their fit quality, and warnings.",
        epilog="examples:\n  sigex predict examples/stencil.toml --target 4096 --machine cluster-a\n"
               "  sigex predict traces/fft2d/ --p-rule powers_of_two --work 'n*n*log2(n)/P' "
               "--target 1024 --machine machines/cluster-b.toml --full")
    source_args(pr)
    pr.add_argument("--target", type=whole(1, "processes"), required=True, help="process count to predict")
    pr.add_argument("--machine", default="cluster-a", help="machine profile (file or shipped name)")
    grid_arg(pr)
    pr.add_argument("--full", action="store_true", help="also replay every repetition (slower)")
    pr.add_argument("--collectives", choices=("algorithms", "closed-form"), default="algorithms")
    pr.add_argument("--json", help="also write the prediction as JSON")
    pr.add_argument("--force", action="store_true", help="replace existing output files")
    return pr


def run(opts: argparse.Namespace) -> int:
    from sigex.pipeline import predict, to_json

    out = output_file(opts.json, opts.force, "--json")
    (machine,) = machines([opts.machine])
    pred = predict(models(opts, NAME), opts.target, machine, full=opts.full,
                   collectives=opts.collectives, progress=say_for(opts, NAME), strict=opts.strict)
    print(pred.report())
    if out:
        from signature._files import write_text_atomic
        write_text_atomic(out, to_json(pred), overwrite=opts.force)
        print(f"\nwrote {out}")
    return 0
