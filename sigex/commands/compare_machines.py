"""``sigex compare-machines``: rank machines by predicted runtime and core-hours."""

from __future__ import annotations

import argparse

from ._common import formatter, say_for, whole
from .predict import grid_arg, machines, models, source_args

NAME = "compare-machines"
HELP = "rank machines by predicted runtime and core-hours"


def add_parser(sub) -> argparse.ArgumentParser:
    cm = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="Predict the same run on several machine profiles and rank them.",
        epilog="example:\n  sigex compare-machines examples/stencil.toml --target 4096 "
               "--machine cluster-a --machine cluster-b --machine this-machine")
    source_args(cm)
    cm.add_argument("--target", type=whole(1, "processes"), required=True, help="process count")
    cm.add_argument("--machine", action="append", required=True, help="a machine profile (repeat)")
    grid_arg(cm)
    return cm


def run(opts: argparse.Namespace) -> int:
    from sigex.pipeline import compare_machines, machines_table

    ms = machines(opts.machine)
    preds = compare_machines(models(opts, NAME), opts.target, ms, progress=say_for(opts, NAME),
                             strict=opts.strict)
    print(machines_table(preds))
    return 0
