"""``sigex run``: perform a campaign's missing runs, then model it."""

from __future__ import annotations

import argparse
import dataclasses

from ._common import formatter, input_file, output_file, say_for, whole
from .extrapolate import BRIEF

NAME = "run"
HELP = "perform a campaign's missing runs, then model it"


def add_parser(sub) -> argparse.ArgumentParser:
    r = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="Read a campaign file (how to run the application at P with workload W), perform "
                    "the signature and small-workload runs it does not have yet (complete traces are "
                    "reused, incomplete ones rerun), then build the logical and compute models and "
                    "print them.",
        epilog="example (from the repository root; the bundled traces make it instant):\n"
               "  sigex run examples/stencil.toml\n"
               "  sigex run examples/stencil.toml --target 65536 -o /tmp/stencil-65536.physical.h5")
    r.add_argument("campaign", help="campaign TOML file")
    r.add_argument("--target", type=whole(1, "processes"), help="override the campaign's target P")
    r.add_argument("-o", "--output", help="also write the physical trace for the target P")
    r.add_argument("--runs-only", action="store_true", help="perform the runs, do not model")
    r.add_argument("--force", action="store_true", help="replace an existing output file")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    return r


def run(opts: argparse.Namespace) -> int:
    from compute_model import campaign

    say = say_for(opts, NAME)
    path = input_file(opts.campaign, "campaign file")
    output_file(opts.output, opts.force)
    c = campaign.load(path)
    if opts.target:
        c = dataclasses.replace(c, target=opts.target)
    say(f"{c.app}: {len(campaign.plan(c))} runs in {c.traces}")
    campaign.run(c, progress=say)
    if opts.runs_only:
        return 0
    logical, compute = campaign.models(c, progress=say)
    print(f"== {c.app}: logical model (target P={c.target})")
    print(logical.describe(c.target, max_slots=BRIEF, max_problems=3))
    print(f"\n== {c.app}: computation per phase")
    print(compute.describe(c.target))
    if opts.output:
        compute.physical_trace(c.target, opts.output, overwrite=opts.force)
        print(f"\nwrote {opts.output}: physical trace for P={c.target}")
    return 0
