"""``sigex run``: perform a campaign's missing runs, then model it."""

from __future__ import annotations

import argparse
import dataclasses
import json

from ._common import formatter, input_file, output_file, placeable_only, say_for, strict_arg, whole
from .extrapolate import BRIEF

NAME = "run"
HELP = "perform a campaign's missing runs, then model it"


def add_parser(sub) -> argparse.ArgumentParser:
    r = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="Read a campaign file (how to run the application at P with workload W), perform "
                    "the signature, small-workload and check runs it does not have yet (complete traces "
                    "are reused, incomplete ones rerun; with repeat = k each k times, the models taking "
                    "medians), then build the logical and compute models, print them, and compare them "
                    "with the check runs (check_p).",
        epilog="example (from the repository root; the bundled traces make it instant):\n"
               "  sigex run examples/stencil.toml\n"
               "  sigex run examples/stencil.toml --target 65536 -o /tmp/stencil-65536.physical.h5\n"
               "an installed program (apt-get install lammps lammps-examples; a few minutes on 2 cores):\n"
               "  sigex run examples/lammps-melt.toml")
    r.add_argument("campaign", help="campaign TOML file")
    r.add_argument("--target", type=whole(1, "processes"), help="override the campaign's target P")
    r.add_argument("-o", "--output", help="also write the physical trace for the target P")
    r.add_argument("--json", metavar="FILE", help="also write the runs, the CRMs and the check as JSON")
    r.add_argument("--runs-only", action="store_true", help="perform the runs, do not model")
    r.add_argument("--dry-run", action="store_true",
                   help="print every run, whether it is traced already and its command; run nothing")
    r.add_argument("--force", action="store_true", help="replace an existing output file")
    strict_arg(r)
    r.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    return r


def plan_table(c) -> str:
    """The campaign's runs: workload, declared work per process, and the original-workload
    P each small-workload run emulates (the distant point's candidates)."""
    from compute_model import campaign
    from compute_model.crm import work_function
    from signature._text import table

    f = work_function(c.work, c.workload) if c.work else None
    rows = []
    for r in campaign.plan(c, repetitions=False):
        em = campaign.emulated_p(c, r.workload, r.P) if r.kind == "small" else None
        rows.append((r.kind, r.P, f"{c.workload}={r.workload}", f"{f(r.workload, r.P):.6g}" if f else "-",
                     f"P={em}" if em else "", str(r.path.relative_to(c.traces))))
    head = ("run", "P", "workload", f"work/process ({c.work})" if c.work else "work/process", "emulates",
            "trace")
    text = table(head, rows, align="lrlrll")
    if c.repeat > 1:
        text += (f"\neach run {c.repeat} times (the others in repeat-2/ ... repeat-{c.repeat}/ beside it); "
                 "the models take the median")
    return text


def check_table(rows) -> str:
    from signature._text import table

    def pct(x):
        return f"{100 * x:+.1f}%" if x == x else "-"

    out = [(r.P, r.phase, r.kind, f"{r.weight_measured}/{r.weight_predicted}", f"{1e3 * r.measured:.4f}",
            f"{1e3 * r.predicted:.4f}", pct(r.error), f"{1e3 * r.predicted_base:.4f}", pct(r.error_base), r.note)
           for r in rows]
    return table(("P", "phase", "kind", "weight meas./pred.", "measured (ms)", "predicted (ms)", "error",
                  "signature-only CRM (ms)", "error", "note"), out, align="rrlrrrrrrl")


def run(opts: argparse.Namespace) -> int:
    from compute_model import campaign

    say = say_for(opts, NAME)
    path = input_file(opts.campaign, "campaign file")
    output_file(opts.output, opts.force)
    output_file(opts.json, opts.force, "--json")
    c = campaign.load(path)
    if opts.target:
        c = dataclasses.replace(c, target=opts.target)
    say(f"{c.app}: {len(campaign.plan(c))} runs in {c.traces}")
    if not opts.quiet:
        print(f"== {c.app}: runs (traces in {c.traces})")
        print(plan_table(c) + "\n", flush=True)
    if opts.dry_run:
        for r in campaign.plan(c):
            where = f"  (in {r.folder})" if c.uses_folders else ""
            print(f"{r.describe():<34} {campaign._state(r):<10} {' '.join(r.command)}{where}")
        return 0
    campaign.run(c, progress=say)
    if opts.runs_only:
        return 0
    logical, compute = campaign.models(c, progress=say)
    print(f"== {c.app}: logical model (target P={c.target})")
    print(logical.describe(c.target, max_slots=BRIEF, max_problems=3))
    print(f"\n== {c.app}: computation per phase")
    print(compute.describe(c.target))
    rows = campaign.check(c, compute, progress=say)
    if rows:
        unit = "CPU time" if logical.work_mode == "cpu-time" else "wall time"
        print(f"\n== {c.app}: check runs (original workload, not fitted): computation per process and "
              f"repetition ({unit}), predicted against measured")
        print(check_table(rows))
    if opts.json:
        report = {"format": 1, "app": c.app, "campaign": str(c.path), "work_mode": logical.work_mode,
                  "target": c.target,
                  "repeat": c.repeat,
                  "runs": [{"kind": r.kind, "P": r.P, "workload": r.workload, "repetition": r.repetition,
                            "trace": str(r.path),
                            "emulates": campaign.emulated_p(c, r.workload, r.P) if r.kind == "small" else None}
                           for r in campaign.plan(c)],
                  "crms": [crm.to_dict() for crm in compute.crms],
                  "check": [{**dataclasses.asdict(r), "error": r.error, "error_base": r.error_base}
                            for r in rows]}
        with open(opts.json, "w") as f:
            json.dump(report, f, indent=1, default=float)
        print(f"\nwrote {opts.json}")
    if opts.output:
        placeable_only(compute, c.target, strict=opts.strict, say=say).physical_trace(
            c.target, opts.output, overwrite=opts.force)
        print(f"\nwrote {opts.output}: physical trace for P={c.target}")
    return 0
