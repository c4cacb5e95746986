"""``sigex physical``: the physical trace for P (logical trace + predicted computation)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import app_of, enough_runs, formatter, output_file, placeable_only, say_for, strict_arg, whole
from .ipt import compute_args, compute_from_folder

NAME = "physical"
HELP = "write the physical trace for P (logical trace + predicted computation)"


def add_parser(sub) -> argparse.ArgumentParser:
    ph = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="Fit each phase's computation (CRM, with the distant point when small-workload "
                    "runs are given), and write the logical trace for the target P with every "
                    "burst's predicted computation time.",
        epilog="example:\n  sigex physical traces/stencil/ --target 4096 --work 'n*n/P' "
               "-o /tmp/stencil-4096.h5")
    compute_args(ph)
    ph.add_argument("--target", type=whole(1, "processes"), required=True, help="process count")
    ph.add_argument("-o", "--output", help="physical trace file (default ./<app>-P<target>.physical.h5)")
    ph.add_argument("--force", action="store_true", help="replace an existing output file")
    strict_arg(ph)
    return ph


def run(opts: argparse.Namespace) -> int:
    enough_runs(opts.traces, NAME)  # the inputs first: the default output name comes from them
    out = output_file(Path(opts.output or f"{app_of(opts.traces)}-P{opts.target}.physical.h5"), opts.force)
    cm = placeable_only(compute_from_folder(opts, NAME), opts.target, strict=opts.strict,
                        say=say_for(opts, NAME))
    print(cm.describe(opts.target))
    cm.physical_trace(opts.target, out, overwrite=opts.force)
    print(f"wrote {out}: physical trace for P={opts.target} (t_comp = predicted computation, s)")
    return 0
