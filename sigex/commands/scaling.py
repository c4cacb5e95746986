"""``sigex scaling``: the predicted strong-scaling curve, its bottleneck phase, a plot and a table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._common import formatter, output_file, say_for
from .predict import machines, models, source_args

NAME = "scaling"
HELP = "the predicted strong-scaling curve, its bottleneck phase, a plot and a table"


def add_parser(sub) -> argparse.ArgumentParser:
    sc = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="Predict the runtime over a range of P; print runtime, speedup and parallel "
                    "efficiency, name the phase that stops scaling first and the P where efficiency "
                    "drops below 50%%; write <prefix>.png (matplotlib), .json and .csv.",
        epilog="example:\n  sigex scaling examples/stencil.toml --p 64:65536 --machine cluster-a "
               "-o /tmp/stencil-scaling")
    source_args(sc)
    sc.add_argument("--p", default="64:65536", help="LO:HI (powers of two) or a list 64,128,256")
    sc.add_argument("--machine", default="cluster-a", help="machine profile (file or shipped name)")
    sc.add_argument("-o", "--output", help="output prefix (default ./<app>-scaling)")
    sc.add_argument("--force", action="store_true", help="replace existing output files")
    return sc


def run(opts: argparse.Namespace) -> int:
    from signature._files import write_text_atomic
    from sigex.pipeline import parse_p_range, scaling, to_json

    Ps = parse_p_range(opts.p)
    (machine,) = machines([opts.machine])
    try:
        import matplotlib  # noqa: F401
        plot = True
    except ImportError:
        plot = False
        print("sigex scaling: note: no plot, matplotlib is not installed (pip install 'sigex[plot]')",
              file=sys.stderr)

    def outputs(prefix: Path) -> list[Path]:
        exts = (".json", ".csv") + ((".png",) if plot else ())
        return [prefix.with_suffix(e) for e in exts]

    if opts.output:  # checked before any modelling; the default name needs the model's app
        for out in outputs(Path(opts.output)):
            output_file(out, opts.force)
    m = models(opts, NAME)
    prefix = Path(opts.output or f"{m.app}-scaling")
    for out in outputs(prefix):  # every one before writing any of them
        output_file(out, opts.force)
    curve = scaling(m, Ps, machine, progress=say_for(opts, NAME), strict=opts.strict)
    print(curve.report())
    write_text_atomic(prefix.with_suffix(".json"), to_json(curve), overwrite=opts.force)
    write_text_atomic(prefix.with_suffix(".csv"), curve.csv(), overwrite=opts.force)
    written = [prefix.with_suffix(".json"), prefix.with_suffix(".csv")]
    if plot:
        written.append(curve.plot(prefix.with_suffix(".png")))
    print("\nwrote " + ", ".join(map(str, written)))
    return 0
