"""``sigex calibrate``: measure a LogGP machine profile on this machine (mpi4py microbenchmarks)."""

from __future__ import annotations

import argparse
import sys

from ._common import formatter, output_file, say_for, whole

NAME = "calibrate"
HELP = "measure a LogGP machine profile on this machine (mpi4py microbenchmarks)"


def add_parser(sub) -> argparse.ArgumentParser:
    cb = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="Ping-pong over message sizes (L + 2o and G), send overhead o and message gap g "
                    "between two local MPI ranks; prints the profile as TOML.",
        epilog="example:\n  sigex calibrate --reps 20 -o /tmp/mymachine.toml\n"
               "  sigex replay traces/stencil/P16.h5 --machine /tmp/mymachine.toml")
    cb.add_argument("-o", "--output", help="write the profile here")
    cb.add_argument("--name", default="this-machine", help="profile name (default this-machine)")
    cb.add_argument("--reps", type=whole(1, "repetitions", 10 ** 7), default=200,
                    help="repetitions per size (default 200)")
    cb.add_argument("--force", action="store_true", help="replace an existing output file")
    cb.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    return cb


def run(opts: argparse.Namespace) -> int:
    from replay.calibrate import calibrate

    output_file(opts.output, opts.force)
    m = calibrate(opts.name, reps=opts.reps, progress=say_for(opts, NAME))
    print(m.to_toml())
    if opts.output:
        path = m.save(opts.output, overwrite=opts.force)
        print(f"saved {path}", file=sys.stderr)
    return 0
