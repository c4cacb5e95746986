"""``sigex ipt``: the instruction (work) prediction table and the CRM of each loop phase."""

from __future__ import annotations

import argparse
from pathlib import Path

from signature.errors import UsageError

from ._common import P_RULE_CHOICES, enough_runs, formatter, input_sources, p_rule, say_for, whole

NAME = "ipt"
HELP = "print the instruction (work) prediction table and the CRM of each loop phase"


def compute_args(a: argparse.ArgumentParser) -> None:
    """The options of the commands that fit the compute model (ipt, physical)."""
    a.add_argument("traces", nargs="+", help="folder of signature traces, or the trace files")
    a.add_argument("--p-rule", choices=P_RULE_CHOICES, default="any",
                   help="the P values the application accepts")
    a.add_argument("--small", help="folder of small-workload runs for the distant point "
                   "(default: <folder>/small when it exists)")
    a.add_argument("--work", help="declared work per process, e.g. 'n*n/P' (CPU-time mode's "
                   "distant point needs it)")
    a.add_argument("-q", "--quiet", action="store_true", help="no progress messages")


def compute_from_folder(opts, cmd: str):
    """The compute model of the traces named on the command line (3 or more P)."""
    from compute_model import from_traces

    enough_runs(opts.traces, cmd)
    if opts.small:
        input_sources([opts.small], "folder of small-workload runs")
        if not Path(opts.small).is_dir():
            raise UsageError(f"--small {opts.small}: not a folder; give the folder of small-workload runs")
    folder = Path(opts.traces[0]) if len(opts.traces) == 1 else None
    small_dir = Path(opts.small) if opts.small else (folder / "small" if folder else None)
    return from_traces(opts.traces, small=small_dir if small_dir is not None and small_dir.is_dir() else None,
                       work=opts.work, p_rule=p_rule(opts), progress=say_for(opts, cmd))


def add_parser(sub) -> argparse.ArgumentParser:
    i = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="The paper's Table 1 per phase: work per process, weight, displacement and total "
                    "work, measured and predicted (Eq. 3), whether the total is constant, and the "
                    "computation regression model without and with the distant point.",
        epilog="examples:\n  sigex ipt traces/stencil/ --work 'n*n/P'\n"
               "  sigex ipt traces/fft2d/ --phase 1 --p-rule powers_of_two --work 'n*n*log2(n)/P'")
    compute_args(i)
    i.add_argument("--phase", type=whole(0, "phases"), help="one phase (default: every loop phase)")
    i.add_argument("--upto", type=whole(1, "processes"), default=4096,
                   help="predicted rows up to this P (default 4096)")
    return i


def run(opts: argparse.Namespace) -> int:
    from compute_model import accepted_p

    cm = compute_from_folder(opts, NAME)
    phases = [opts.phase] if opts.phase is not None else [
        k for k, ph in enumerate(cm.logical.phases) if ph.kind == "loop"]
    for k in phases:
        if not 0 <= k < len(cm.ipts):
            raise UsageError(f"--phase {k}: there is no phase {k}; phases are 0..{len(cm.ipts) - 1}")
        ipt = cm.ipts[k]
        lo = max(r.P for r in ipt.measured) + 1
        rule = opts.p_rule if opts.p_rule != "any" else "powers_of_two"
        Ps = list(accepted_p(rule, lo, opts.upto))
        print(ipt.table([int(p) for p in Ps]))
        print()
        print(cm.crms[k].describe())
        print()
    return 0
