"""``sigex simgrid export|import|platform``: SimGrid interop, one sub-command per direction.

export: a sigex trace as a SimGrid time-independent (TI) trace for ``smpirun -replay``;
import: a TI trace written by ``smpirun -trace-ti`` as a sigex trace in flops mode;
platform: the SimGrid platform and SMPI options equivalent to a machine profile.
"""

from __future__ import annotations

import argparse

from signature.errors import SigexError, UsageError

from ._common import formatter, input_file, output_file, output_folder, whole

NAME = "simgrid"
HELP = "SimGrid interop: time-independent traces out and in, an equivalent platform"
#: the machine profile with one host per rank that the examples run on
EXAMPLE_MACHINE = "bench/smpi/cluster.toml"


def _grid_arg(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        dims = ()
    if not dims or min(dims) < 1 or max(dims) > 2 ** 20:
        raise argparse.ArgumentTypeError(f"wants process-grid dimensions like 4x4 or 8x4x2, got {text!r}")
    return dims


def _machine_args(a: argparse.ArgumentParser, what: str) -> None:
    a.add_argument("--machine", default="cluster-a",
                   help=f"machine profile {what} (default cluster-a; a profile with intra-node "
                        "parameters needs --flat: SimGrid's platform here has one host per rank)")
    a.add_argument("--flat", action="store_true",
                   help="use the machine with one rank per node (its network between every pair)")


def add_parser(sub) -> argparse.ArgumentParser:
    sg = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="SimGrid interop. Each verb has its own options: `sigex simgrid VERB --help`.",
        epilog="examples:\n"
               "  sigex simgrid export traces/cg/P16.h5 -o /tmp/cg-ti\n"
               f"  sigex simgrid platform --machine {EXAMPLE_MACHINE} -n 16 -o /tmp/platform.xml\n"
               "  sigex simgrid import /tmp/cg-ti/ti.txt -o /tmp/cg16.h5 --grid 4x4 --app cg")
    verbs = sg.add_subparsers(dest="action", metavar="VERB", required=True)

    ex = verbs.add_parser(
        "export", help="a sigex trace as a SimGrid time-independent trace", **formatter(),
        description="Write a sigex trace (captured or physical; phase weights unrolled) as a SimGrid "
                    "time-independent trace: one rank-<r>.txt per rank and an index ti.txt, for "
                    "`smpirun -replay`. Computation becomes flops at SimGrid's host speed.",
        epilog="example:\n  sigex simgrid export traces/cg/P16.h5 -o /tmp/cg-ti\n"
               "  smpirun -np 16 -platform platform.xml -replay /tmp/cg-ti/ti.txt")
    ex.add_argument("input", nargs="?", help="a sigex trace (.h5)")
    ex.add_argument("-o", "--output", required=True, help="the folder to write (its parent must exist)")
    ex.add_argument("--force", action="store_true", help="replace an existing ti.txt in the folder")
    ex.set_defaults(verb=_export)

    im = verbs.add_parser(
        "import", help="a SimGrid TI trace as a sigex trace (flops mode)", **formatter(),
        description="Read a TI trace written by `smpirun -trace-ti` as a sigex trace in flops mode, "
                    "usable as a signature run. TI traces record no communicators and no times: "
                    "--grid declares the program's Cartesian grid, and the events get the times of "
                    "sigex's replay on --machine.",
        epilog="example (a round trip on a bundled trace):\n"
               "  sigex simgrid export traces/cg/P16.h5 -o /tmp/cg-ti\n"
               "  sigex simgrid import /tmp/cg-ti/ti.txt -o /tmp/cg16.h5 --grid 4x4 --app cg "
               "--workload n=1024\n"
               "from SMPI: smpirun -np 16 -platform platform.xml -trace-ti "
               "--cfg=tracing/filename:ti/ti.txt ./stencil --n 4096")
    im.add_argument("input", nargs="?", help="a TI index file (ti.txt)")
    im.add_argument("-o", "--output", required=True, help="the .h5 trace to write")
    _machine_args(im, "whose replay gives the imported events their times")
    im.add_argument("--grid", type=_grid_arg, help="the Cartesian process grid, e.g. 4x4")
    im.add_argument("--periodic", action="store_true", help="the grid is periodic")
    im.add_argument("--app", help="application name (default: the index's folder)")
    im.add_argument("--workload", help="the workload as NAME=VALUE, e.g. n=4096")
    im.add_argument("--force", action="store_true", help="replace an existing output file")
    im.set_defaults(verb=_import)

    pl = verbs.add_parser(
        "platform", help="the SimGrid platform and SMPI options of a machine profile", **formatter(),
        description="Write the SimGrid platform (one single-core host per rank) equivalent to a machine "
                    "profile, and print the SMPI options that match its network and collectives.",
        epilog=f"example:\n  sigex simgrid platform --machine {EXAMPLE_MACHINE} -n 16 -o /tmp/platform.xml\n"
               "  sigex simgrid platform --machine cluster-a --flat -n 4 -o /tmp/p4.xml")
    pl.add_argument("-n", "--nprocs", type=whole(1, "ranks", 1 << 20), required=True,
                    help="number of ranks (hosts)")
    pl.add_argument("-o", "--output", required=True, help="the .xml to write")
    _machine_args(pl, "to mirror")
    pl.add_argument("--force", action="store_true", help="replace an existing output file")
    pl.set_defaults(verb=_platform)
    return sg


def _machine(opts):
    from replay import load

    machine = load(opts.machine)
    return machine.flat() if opts.flat else machine


def _export(opts) -> int:
    from replay import simgrid
    from signature.io import load_trace

    if not opts.input:
        raise UsageError("simgrid export needs its input: a sigex trace (.h5)")
    src = input_file(opts.input)
    folder = output_folder(opts.output)
    if (folder / "ti.txt").exists() and not opts.force:
        raise UsageError(f"{folder / 'ti.txt'} already exists; pass --force to replace it")
    index = simgrid.export_ti(load_trace(src), folder, overwrite=opts.force)
    print(f"wrote {index} (replay it: smpirun -np P -platform <sigex simgrid platform> -replay {index})")
    return 0


def _platform(opts) -> int:
    from replay import simgrid
    from signature._files import write_text_atomic

    out = output_file(opts.output, opts.force)
    machine = _machine(opts)
    try:
        xml = simgrid.platform_xml(machine, opts.nprocs)
    except simgrid.SimGridError as err:  # the machine chosen does not fit a platform: change the command
        raise UsageError(str(err)) from err
    write_text_atomic(out, xml, overwrite=opts.force)
    print(f"wrote {out}: {opts.nprocs} single-core hosts rank-0..rank-{opts.nprocs - 1} on {machine.name}")
    print("SMPI options for the same network and collectives:\n  " + " ".join(simgrid.smpi_config(machine)))
    return 0


def _import(opts) -> int:
    from replay import simgrid

    if not opts.input:
        raise UsageError("simgrid import needs its input: a TI index file")
    index = input_file(opts.input, "TI index file")
    out = output_file(opts.output, opts.force)  # before the import's replay, not after it
    machine = _machine(opts)
    grid = (opts.grid, (opts.periodic,) * len(opts.grid)) if opts.grid else None
    workload = None
    if opts.workload:
        label, _, value = opts.workload.partition("=")
        if not label or not value:
            raise UsageError(f"--workload wants NAME=VALUE (e.g. n=4096), got {opts.workload!r}")
        workload = (label, value)
    try:
        trace = simgrid.import_ti(index, grid=grid, clock=machine, app=opts.app, workload=workload)
    except SigexError:
        raise
    except (OSError, ValueError, KeyError, IndexError, UnicodeDecodeError) as err:
        raise SigexError(f"{index}: not a readable SimGrid TI trace ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''}); give the index file that "
                         "`smpirun -trace-ti` or `sigex simgrid export` wrote") from err
    trace.to_hdf5(out, overwrite=opts.force)
    print(f"wrote {out}: {trace.nprocs} ranks, {trace.n_events:,} events, flops mode; times from sigex's "
          f"replay on {machine.name} ({trace.runtime:.6g} s)")
    return 0


def run(opts: argparse.Namespace) -> int:
    return opts.verb(opts)
