"""``sigex replay``: simulate a trace (captured or physical) on a machine model."""

from __future__ import annotations

import argparse
import sys

from signature._text import table

from ._common import MIN_EVENTS_TEXT, formatter, input_file, whole

NAME = "replay"
HELP = "replay a trace (captured or physical) on a machine model"


def add_parser(sub) -> argparse.ArgumentParser:
    rp = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="Simulate a trace under a LogGP/LogGOPS machine profile: per-phase TE_i, PET and "
                    "the replayed time. More pieces than the trace has ranks are cut to one rank "
                    "per piece, with a note.",
        epilog="examples:\n  sigex replay traces/stencil/P16.h5 --machine cluster-a\n"
               "  sigex replay traces/stencil/P16.h5 --machine cluster-a --pieces 4\n"
               "  mpiexec -n 2 sigex replay big.h5 --machine cluster-a   # 2 workers, a piece each\n"
               "  mpiexec -n 2 sigex replay traces/stencil/P16.h5 --min-events-per-worker 0   # split "
               "even a small trace\n"
               "  sigex physical traces/fft2d/ --target 1024 -o /tmp/fft.h5 && "
               "sigex replay /tmp/fft.h5 --machine machines/cluster-b.toml --full")
    rp.add_argument("trace", help="HDF5 trace (captured or physical)")
    rp.add_argument("--machine", default="this-machine",
                    help="machine profile: a TOML file or a shipped name (cluster-a, cluster-b, "
                         "this-machine; default this-machine)")
    rp.add_argument("--collectives", choices=("algorithms", "closed-form"), default="algorithms")
    rp.add_argument("--pieces", type=whole(1, "pieces"), default=1,
                    help="replay the ranks in this many pieces (at most one per rank)")
    rp.add_argument("--min-events-per-worker", type=whole(0, "events"), default=None, metavar="N",
                    help="under mpiexec: give pieces to only as many workers as keep N events each "
                         f"(default {MIN_EVENTS_TEXT}: a smaller trace replays faster on one worker, as "
                         "does one whose pieces would wait on each other every few thousand events; "
                         "0: every worker gets a piece)")
    rp.add_argument("--full", action="store_true", help="unroll phase weights and replay every repetition")
    return rp


def run(opts: argparse.Namespace) -> int:
    from replay import Program, load, replay
    from replay.program import CLI_COLUMNS
    from replay.unroll import unroll
    from replay.workers import running_under_mpi
    from signature.io import load_trace, read_trace_ranks

    machine = load(opts.machine)  # a wrong profile is found before the trace is read
    path = input_file(opts.trace)
    under_mpi = running_under_mpi()
    if under_mpi and not opts.full:
        # `mpiexec -n W sigex replay ...`: each worker reads only its ranks (here: the index)
        trace = read_trace_ranks(path, 0, 0, columns=())
        n_events, program = int(trace.meta["n_events_total"]), path
    else:
        # only the columns the Program is built from and the clock for the measured time
        # (--full unrolls every column)
        trace = load_trace(path, columns=None if opts.full else CLI_COLUMNS)
        if opts.full:
            trace = unroll(trace)
        n_events, program = trace.n_events, Program.from_trace(trace)
    pieces = opts.pieces
    if pieces > trace.nprocs and not under_mpi:
        print(f"sigex replay: note: --pieces {pieces:,} is more than the trace's {trace.nprocs} ranks; "
              f"replaying in {trace.nprocs} pieces (one rank each)", file=sys.stderr)
        pieces = trace.nprocs
    how = f"{pieces} piece(s)"
    if under_mpi:  # one piece per worker
        from mpi4py import MPI

        from replay.workers import MIN_EVENTS_PER_WORKER, last_stages, replay_workers
        res = replay_workers(program, machine, collectives=opts.collectives,
                             min_events_per_worker=opts.min_events_per_worker)
        if res is None:  # not worker 0: it prints
            return 0
        W = MPI.COMM_WORLD.size
        how = f"{res.pieces} of {W} MPI workers" if res.pieces < W else f"{W} MPI workers"
        if opts.pieces != 1:
            print(f"sigex replay: note: --pieces {opts.pieces:,} does not apply under mpiexec: the MPI "
                  "workers take a piece each", file=sys.stderr)
        if res.pieces < W and res.pieces == trace.nprocs:
            how += f" (one rank per worker at most: the trace has {trace.nprocs} ranks)"
        elif res.pieces < W and opts.min_events_per_worker != 0:
            least = MIN_EVENTS_PER_WORKER if opts.min_events_per_worker is None else opts.min_events_per_worker
            passes = last_stages().get("passes_estimate")
            if res.pieces == 1 and passes:
                how += (f" (split, its ranks would wait on each other's pieces about {passes:,} times, "
                        f"every {n_events // passes:,} events, which costs more than it saves; "
                        f"--min-events-per-worker 0 splits anyway)")
            else:
                how += (f" (a piece needs {least:,} events or more; --min-events-per-worker 0 "
                        f"gives every worker one)")
        if trace.n_events == 0 and trace.meta.get("trace_kind", "captured") == "captured":
            # the measured runtime: the end times of every rank (a captured trace is narrow)
            trace = read_trace_ranks(path, 0, trace.nprocs, columns=("t_start", "t_comm"))
    else:
        res = replay(program, machine, collectives=opts.collectives, pieces=pieces)
    kind = trace.meta.get("trace_kind", "captured")
    print(f"{opts.trace}: {kind} trace, P={trace.nprocs}, {n_events:,} events; machine "
          f"{machine.name}; collectives {opts.collectives}; {how}")
    rows = []
    weights = res.phase_weights
    for k in range(len(res.te)):
        w = weights[k] if weights is not None else 1
        rows.append((k, f"{w:g}", f"{1e3 * res.te[k]:.4f}", f"{1e3 * res.phase_computation[k].max():.4f}",
                     f"{1e3 * res.phase_communication[k].max():.4f}", f"{res.te[k] * w:.4f}"))
    if rows:
        print(table(("phase", "weight", "TE (ms)", "comp max (ms)", "comm max (ms)", "TE x W (s)"), rows,
                    align="rrrrrr"))
    line = f"replayed time {res.runtime:.4f} s (critical rank {res.critical_rank})"
    if weights is not None and not opts.full:
        line = f"PET = sum TE_i x W_i = {res.pet():.4f} s (phases replayed once each; --full unrolls them)"
    elif kind == "captured" and trace.runtime == trace.runtime:
        line += f"; measured {trace.runtime:.4f} s"
    print(line)
    return 0
