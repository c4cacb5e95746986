"""``sigex signature``: the phases of a trace, their weights, coverage and Eq. 4 on the run."""

from __future__ import annotations

import argparse
import json
import sys

from ._common import formatter, input_file, output_file

NAME = "signature"
HELP = "find the phases of a trace and their weights"


def add_parser(sub) -> argparse.ArgumentParser:
    g = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="Detect the repeated phases of a traced run (no source changes needed), "
                    "their weights, per-phase computation and communication, coverage, and "
                    "Eq. 4 evaluated on the run itself.",
        epilog="example:\n  sigex signature traces/stencil/P16.h5\n"
               "  sigex signature --save traces/stencil/P16.h5   # writes P16.signature.json")
    g.add_argument("trace", help="HDF5 trace file")
    g.add_argument("--json", action="store_true", help="print the signature as JSON")
    g.add_argument("--save", action="store_true",
                   help="save it beside the trace as <name>.signature.json")
    g.add_argument("--force", action="store_true", help="replace an existing saved signature")
    return g


def run(opts: argparse.Namespace) -> int:
    from signature import extract, load_trace, signature_path

    trace_path = input_file(opts.trace)
    if opts.save:
        output_file(signature_path(trace_path), opts.force, "--save")
    sig = extract(load_trace(trace_path))
    if opts.json:
        print(json.dumps(sig.to_dict(), indent=2))
    else:
        print(sig.table())
    if opts.save:
        path = sig.save(signature_path(trace_path), overwrite=opts.force)
        print(f"saved {path}", file=sys.stderr)
    return 0
