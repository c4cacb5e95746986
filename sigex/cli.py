"""The ``sigex`` command: a thin shell over the packages' library functions.

Each subcommand parses its arguments, calls one library function and formats
the result. A :class:`~signature.errors.SigexError` (and a refused
overwrite) becomes one line on stderr and exit status 2; anything else keeps
its traceback. mpi4py is never imported here: ``sigex --help`` starts no MPI.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from signature import __version__
from signature._text import table
from signature.errors import SigexError

#: --p-rule values: "any" or one of logical_model.modelsearch.P_RULES (spelled out here so
#: that `sigex --help` does not import the models; a test keeps the two equal)
P_RULE_CHOICES = ("any", "squares", "cubes", "powers_of_two")
#: replay.workers.MIN_EVENTS_PER_WORKER as the help shows it (spelled out for the same
#: reason; a test keeps the two equal)
MIN_EVENTS_TEXT = "150,000"

BUNDLED = "traces/stencil/P4.h5"


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


# ---- sigex trace -----------------------------------------------------------------
def _cmd_trace(opts: argparse.Namespace) -> int:
    from signature.capture import trace_run

    command = list(opts.command)
    if command and command[0] == "--":
        command = command[1:]

    def say(msg: str) -> None:
        if not opts.quiet:
            print(f"sigex trace: {msg}", file=sys.stderr)

    res = trace_run(command, opts.nprocs, opts.output, workload=opts.workload, app=opts.app,
                    mpiexec=opts.mpiexec, mpiexec_args=shlex.split(opts.mpiexec_args or ""),
                    overwrite=opts.force, keep_raw=opts.keep_raw, timeout=opts.timeout,
                    progress=say)
    t = res.trace
    if res.ok:
        print(f"wrote {res.path}: P={t.nprocs}, {t.n_events} events, runtime {t.runtime:.3f} s, "
              f"{t.work_mode} mode")
        return 0
    print(f"sigex trace: the run failed (exit {res.returncode}); wrote {res.path} marked "
          f"incomplete: {t.meta.get('incomplete_reason')}", file=sys.stderr)
    return 1


# ---- sigex show ------------------------------------------------------------------
def _show_text(trace, all_ranks: bool) -> str:
    s = trace.summary()
    m = trace.meta
    out = [f"{trace.path}"]
    wl = f"{s['workload']['label']}={s['workload']['value']}" if s["workload"]["value"] else "-"
    cmd = " ".join(m["command"]) if isinstance(m.get("command"), list) else (m.get("command") or "-")
    out.append(f"  app         {s['app']}   ({cmd})")
    out.append(f"  processes   {s['nprocs']}   workload {wl}")
    if s["trace_kind"] != "captured":
        out.append(f"  kind        {s['trace_kind']} trace, generated ({m.get('source', '?')}); phase "
                   f"weights {m.get('phase_weights')} (each phase stored once)")
        if m.get("crm"):
            out.append(f"  CRMs        {m['crm']}")
    else:
        out.append(f"  MPI         {s['mpi_library']}   hosts {', '.join(s['hosts'] or [])}")
    if trace.has_counters:
        out.append("  work mode   counters (instructions, cycles, LLC misses per burst)")
    else:
        out.append("  work mode   CPU-time: burst work is thread CPU time "
                   f"({m.get('cpu_time_source', '?')})")
        out.append(f"              no hardware counters: {s['counters_reason'] or 'no reason recorded'}")
    out.append(f"  complete    {'yes' if s['complete'] else 'NO: ' + str(s['incomplete_reason'])}")
    runtime = "not run" if s["runtime"] is None else f"{s['runtime']:.4f} s"
    out.append(f"  events      {s['events']:,} ({s['events'] / max(1, s['nprocs']):.0f} per rank)"
               f"   runtime {runtime}")
    out += _unmodelled_lines(m, s["runtime"])
    out.append("")
    rows = [(o["op"], f"{o['calls']:,}", _fmt_bytes(o["bytes"]), _fmt_bytes(o["recv_bytes"]),
             f"{o['t_comm']:.4f}") for o in sorted(s["ops"], key=lambda o: -o["calls"])]
    out.append(table(["op", "calls", "bytes sent", "bytes recv", "time in call (s)"], rows))
    out.append("")
    tot = trace.per_rank_totals()
    P = trace.nprocs
    busy = tot["t_comp"] + tot["t_comm"]
    comp_pct = 100 * tot["t_comp"] / busy.clip(min=1e-300)

    def rank_row(label, i):
        return (label, f"{int(tot['events'][i]):,}", f"{tot['t_comp'][i]:.4f}",
                f"{tot['t_cpu'][i]:.4f}", f"{tot['t_comm'][i]:.4f}", f"{comp_pct[i]:.1f}",
                f"{int(tot['ctx_switches'][i]):,}")

    headers = ["rank", "events", "compute wall (s)", "compute CPU (s)", "in MPI (s)",
               "compute %", "ctx switches"]
    if P <= 16 or all_ranks:
        rows = [rank_row(str(r), r) for r in range(P)]
    else:
        order = np.argsort(busy)
        picks = [("min", int(order[0])), ("median", int(order[P // 2])), ("max", int(order[-1]))]
        rows = [rank_row(f"{lab} (r{i})", i) for lab, i in picks]
    out.append(table(headers, rows))
    if P > 16 and not all_ranks:
        out.append(f"  ({P} ranks: min/median/max by busy time shown; --ranks lists all)")
    return "\n".join(out)


def _unmodelled_lines(meta, runtime) -> list[str]:
    from signature import unmodelled_calls, unmodelled_notes

    calls = unmodelled_calls(meta)
    local = [c for c in calls if c.local]
    notes = unmodelled_notes(meta, runtime)
    out = [f"  NOT MODELLED {n}" for n in notes]
    if local:
        out.append(f"  local calls {sum(c.calls for c in local):,} calls of {len(local)} local MPI "
                   f"functions (no communication; {', '.join(c.name for c in local[:4])}"
                   f"{', ...' if len(local) > 4 else ''})")
    return out


def _cmd_show(opts: argparse.Namespace) -> int:
    from signature.io import load_trace

    trace = load_trace(opts.trace, allow_incomplete=opts.allow_incomplete)
    if opts.json:
        print(json.dumps(trace.summary(), indent=2))
    else:
        print(_show_text(trace, opts.ranks))
    return 0


# ---- sigex signature ------------------------------------------------------------
def _cmd_signature(opts: argparse.Namespace) -> int:
    from signature import extract, load_trace, signature_path

    sig = extract(load_trace(opts.trace))
    if opts.json:
        print(json.dumps(sig.to_dict(), indent=2))
    else:
        print(sig.table())
    if opts.save:
        path = sig.save(signature_path(opts.trace), overwrite=opts.force)
        print(f"saved {path}", file=sys.stderr)
    return 0


# ---- sigex extrapolate ------------------------------------------------------------
def _cmd_extrapolate(opts: argparse.Namespace) -> int:
    from logical_model import from_traces

    def say(msg: str) -> None:
        if not opts.quiet:
            print(f"sigex extrapolate: {msg}", file=sys.stderr)

    model = from_traces(opts.traces, p_rule=opts.p_rule, progress=say)
    if opts.json:
        print(json.dumps(model.to_dict(), indent=1))
    else:
        print(model.describe(opts.target))
    if opts.save_model:
        path = model.save(opts.save_model, overwrite=opts.force)
        say(f"saved the model to {path}")
    if opts.no_trace:
        return 0
    out = Path(opts.output or f"{model.app or 'app'}-P{opts.target}.logical.h5")
    if out.is_dir():
        out = out / f"{model.app or 'app'}-P{opts.target}.logical.h5"
    model.check_target(opts.target)
    last = [-1]

    def blocks(done: int, total: int) -> None:
        pct = int(100 * done / total)
        if not opts.quiet and pct // 10 != last[0] // 10:
            last[0] = pct
            print(f"sigex extrapolate: writing ranks {done}/{total} ({pct}%)", file=sys.stderr)

    model.logical_trace(opts.target, out, overwrite=opts.force, progress=blocks)
    print(f"wrote {out}: logical trace for P={opts.target}, phases weighted "
          f"{model.weights(opts.target)} (stored once each, not unrolled)")
    return 0


# ---- sigex ipt / physical / run ---------------------------------------------------
def _p_rule(opts) -> str | None:
    """The --p-rule option as the models take it (None: any P)."""
    return opts.p_rule if opts.p_rule != "any" else None


def _compute_from_folder(opts, say):
    from compute_model import from_traces

    folder = Path(opts.traces[0]) if len(opts.traces) == 1 else None
    small_dir = Path(opts.small) if opts.small else (folder / "small" if folder else None)
    return from_traces(opts.traces, small=small_dir if small_dir is not None and small_dir.is_dir() else None,
                       work=opts.work, p_rule=_p_rule(opts), progress=say)


def _say(opts, cmd):
    def say(msg: str) -> None:
        if not getattr(opts, "quiet", False):
            print(f"sigex {cmd}: {msg}", file=sys.stderr)
    return say


def _cmd_ipt(opts: argparse.Namespace) -> int:
    from compute_model import accepted_p

    cm = _compute_from_folder(opts, _say(opts, "ipt"))
    phases = [opts.phase] if opts.phase is not None else [
        k for k, ph in enumerate(cm.logical.phases) if ph.kind == "loop"]
    for k in phases:
        if not 0 <= k < len(cm.ipts):
            raise SigexError(f"there is no phase {k}; phases are 0..{len(cm.ipts) - 1}")
        ipt = cm.ipts[k]
        lo = max(r.P for r in ipt.measured) + 1
        rule = opts.p_rule if opts.p_rule != "any" else "powers_of_two"
        Ps = list(accepted_p(rule, lo, opts.upto))
        print(ipt.table([int(p) for p in Ps]))
        print()
        print(cm.crms[k].describe())
        print()
    return 0


def _cmd_physical(opts: argparse.Namespace) -> int:
    say = _say(opts, "physical")
    cm = _compute_from_folder(opts, say)
    print(cm.describe(opts.target))
    out = Path(opts.output or f"{cm.logical.app or 'app'}-P{opts.target}.physical.h5")
    cm.physical_trace(opts.target, out, overwrite=opts.force)
    print(f"wrote {out}: physical trace for P={opts.target} (t_comp = predicted computation, s)")
    return 0


def _cmd_run(opts: argparse.Namespace) -> int:
    from compute_model import campaign

    say = _say(opts, "run")
    c = campaign.load(opts.campaign)
    if opts.target:
        import dataclasses
        c = dataclasses.replace(c, target=opts.target)
    say(f"{c.app}: {len(campaign.plan(c))} runs in {c.traces}")
    campaign.run(c, progress=say)
    if opts.runs_only:
        return 0
    logical, compute = campaign.models(c, progress=say)
    print(f"== {c.app}: logical model (target P={c.target})")
    print(logical.describe(c.target))
    print(f"\n== {c.app}: computation per phase")
    print(compute.describe(c.target))
    if opts.output:
        compute.physical_trace(c.target, opts.output, overwrite=opts.force)
        print(f"\nwrote {opts.output}: physical trace for P={c.target}")
    return 0


# ---- sigex replay -----------------------------------------------------------------
def _cmd_replay(opts: argparse.Namespace) -> int:
    from replay import Program, load, replay
    from replay.unroll import unroll
    from signature.io import load_trace

    trace = load_trace(opts.trace)
    machine = load(opts.machine)
    if opts.full:
        trace = unroll(trace)
    from replay.workers import running_under_mpi

    program = Program.from_trace(trace)
    pieces = f"{opts.pieces} piece(s)"
    if running_under_mpi():  # `mpiexec -n W sigex replay ...`: one piece per worker
        from mpi4py import MPI

        from replay.workers import MIN_EVENTS_PER_WORKER, replay_workers
        res = replay_workers(program, machine, collectives=opts.collectives,
                             min_events_per_worker=opts.min_events_per_worker)
        if res is None:  # not worker 0: it prints
            return 0
        W = MPI.COMM_WORLD.size
        pieces = f"{res.pieces} of {W} MPI workers" if res.pieces < W else f"{W} MPI workers"
        if res.pieces < W and opts.min_events_per_worker != 0:
            least = MIN_EVENTS_PER_WORKER if opts.min_events_per_worker is None else opts.min_events_per_worker
            pieces += (f" (a piece needs {least:,} events or more; --min-events-per-worker 0 "
                       f"gives every worker one)")
    else:
        res = replay(program, machine, collectives=opts.collectives, pieces=opts.pieces)
    kind = trace.meta.get("trace_kind", "captured")
    print(f"{opts.trace}: {kind} trace, P={trace.nprocs}, {trace.n_events:,} events; machine "
          f"{machine.name}; collectives {opts.collectives}; {pieces}")
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


# ---- sigex simgrid -----------------------------------------------------------------
def _grid_arg(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        dims = ()
    if not dims or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"--grid wants process-grid dimensions like 4x4 or 8x4x2, got {text!r}")
    return dims


def _at_least(least: int, what: str):
    """An argparse type: a whole number of ``what``, ``least`` or more."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = least - 1
        if n < least:
            raise argparse.ArgumentTypeError(f"wants a whole number of {what}, {least} or more, got {text!r}")
        return n
    return parse


def _cmd_simgrid(opts: argparse.Namespace) -> int:
    from replay import load
    from replay import simgrid

    if opts.action in ("export", "import") and not opts.input:
        raise SigexError(f"simgrid {opts.action} needs its input: "
                         + ("a sigex trace (.h5)" if opts.action == "export" else "a TI index file"))
    if opts.action == "platform" and not (opts.nprocs and opts.nprocs > 0):
        raise SigexError("simgrid platform needs the number of ranks: -n P")
    if opts.action == "export":
        from signature.io import load_trace
        index = simgrid.export_ti(load_trace(opts.input), opts.output, overwrite=opts.force)
        print(f"wrote {index} (replay it: smpirun -np P -platform <sigex simgrid platform> -replay {index})")
        return 0
    machine = load(opts.machine)
    if opts.flat:
        machine = machine.flat()
    if opts.action == "platform":
        from signature._files import write_text_atomic
        out = write_text_atomic(opts.output, simgrid.platform_xml(machine, opts.nprocs), overwrite=opts.force)
        print(f"wrote {out}: {opts.nprocs} single-core hosts rank-0..rank-{opts.nprocs - 1} on {machine.name}")
        print("SMPI options for the same network and collectives:\n  " + " ".join(simgrid.smpi_config(machine)))
        return 0
    out = Path(opts.output)
    if out.exists() and not opts.force:  # before the import's replay, not after it
        raise FileExistsError(f"{out} already exists; pass --force to replace it")
    grid = None
    if opts.grid:
        grid = (opts.grid, (opts.periodic,) * len(opts.grid))
    workload = None
    if opts.workload:
        label, _, value = opts.workload.partition("=")
        if not value:
            raise SigexError(f"--workload wants NAME=VALUE (e.g. n=4096), got {opts.workload!r}")
        workload = (label, value)
    trace = simgrid.import_ti(opts.input, grid=grid, clock=machine, app=opts.app, workload=workload)
    trace.to_hdf5(out, overwrite=opts.force)
    print(f"wrote {out}: {trace.nprocs} ranks, {trace.n_events:,} events, flops mode; times from sigex's "
          f"replay on {machine.name} ({trace.runtime:.6g} s)")
    return 0


# ---- sigex calibrate --------------------------------------------------------------
def _cmd_calibrate(opts: argparse.Namespace) -> int:
    from replay.calibrate import calibrate

    m = calibrate(opts.name, reps=opts.reps, progress=_say(opts, "calibrate"))
    print(m.to_toml())
    if opts.output:
        path = m.save(opts.output, overwrite=opts.force)
        print(f"saved {path}", file=sys.stderr)
    return 0


# ---- sigex predict / scaling / compare-machines -----------------------------------
def _models(opts, cmd):
    from sigex.pipeline import load_models

    return load_models(opts.source, work=opts.work, p_rule=_p_rule(opts), progress=_say(opts, cmd))


def _cmd_predict(opts: argparse.Namespace) -> int:
    from sigex.pipeline import predict, to_json

    pred = predict(_models(opts, "predict"), opts.target, opts.machine, full=opts.full,
                   collectives=opts.collectives, progress=_say(opts, "predict"))
    print(pred.report())
    if opts.json:
        from signature._files import write_text_atomic
        write_text_atomic(opts.json, to_json(pred), overwrite=opts.force)
        print(f"\nwrote {opts.json}")
    return 0


def _cmd_scaling(opts: argparse.Namespace) -> int:
    from signature._files import write_text_atomic
    from sigex.pipeline import parse_p_range, scaling, to_json

    models = _models(opts, "scaling")
    curve = scaling(models, parse_p_range(opts.p), opts.machine, progress=_say(opts, "scaling"))
    print(curve.report())
    prefix = Path(opts.output or f"{models.app}-scaling")
    try:
        import matplotlib  # noqa: F401
        png = prefix.with_suffix(".png")
    except ImportError:
        png = None
        print("\nno plot: matplotlib is not installed (pip install 'sigex[plot]')", file=sys.stderr)
    for out in (prefix.with_suffix(".json"), prefix.with_suffix(".csv"), png):
        if out is not None and out.exists() and not opts.force:  # before writing any of them
            raise FileExistsError(f"{out} already exists; pass --force to replace it")
    write_text_atomic(prefix.with_suffix(".json"), to_json(curve), overwrite=opts.force)
    write_text_atomic(prefix.with_suffix(".csv"), curve.csv(), overwrite=opts.force)
    written = [prefix.with_suffix(".json"), prefix.with_suffix(".csv")]
    if png is not None:
        written.append(curve.plot(png))
    print("\nwrote " + ", ".join(map(str, written)))
    return 0


def _cmd_compare(opts: argparse.Namespace) -> int:
    from sigex.pipeline import compare_machines, machines_table

    preds = compare_machines(_models(opts, "compare-machines"), opts.target, opts.machine,
                             progress=_say(opts, "compare-machines"))
    print(machines_table(preds))
    return 0


# ---- parser ----------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sigex", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Predict how an MPI application strong-scales from a few small traced runs.",
        epilog=f"example:\n  sigex show {BUNDLED}\n"
               "  sigex trace -n 4 -o /tmp/stencil/ --workload n=512 -- "
               "python examples/stencil.py --n 512 --iters 20\n"
               "  sigex extrapolate traces/stencil/ --target 4096")
    p.add_argument("--version", action="version", version=f"sigex {__version__}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    t = sub.add_parser(
        "trace", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="run an MPI program under the tracer and write its HDF5 trace",
        description="Run an unmodified MPI program (mpi4py, C, Fortran) under the sigex PMPI "
                    "tracer and write one HDF5 trace file.",
        epilog="examples:\n"
               "  sigex trace -n 4 -o /tmp/stencil/ --workload n=512 -- "
               "python examples/stencil.py --n 512 --iters 20\n"
               "  sigex trace -n 16 -o traces/lu/ -- ./lu.x\n"
               "The program goes after `--`. The trace is written even if the program fails "
               "(marked incomplete).")
    t.add_argument("-n", "--nprocs", type=int, required=True, help="number of MPI processes")
    t.add_argument("-o", "--output", default=".", help="trace file (.h5) or directory that "
                   "receives P<n>.h5 (default: current directory)")
    t.add_argument("--workload", help="NAME=VALUE recorded in the trace, e.g. n=2000")
    t.add_argument("--app", help="application name (default: the script or program name)")
    t.add_argument("--mpiexec", help="launcher (default: $SIGEX_MPIEXEC or mpiexec on PATH)")
    t.add_argument("--mpiexec-args", help="extra launcher options, quoted, e.g. '-bind-to none'")
    t.add_argument("--timeout", type=float, help="kill the run after this many seconds")
    t.add_argument("--force", action="store_true", help="replace an existing trace file")
    t.add_argument("--keep-raw", action="store_true",
                   help="keep the tracer's raw per-rank files in <file>.raw/")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    t.add_argument("command", nargs=argparse.REMAINDER, help="-- program [args...]")
    t.set_defaults(func=_cmd_trace)

    s = sub.add_parser(
        "show", formatter_class=argparse.RawDescriptionHelpFormatter, help="summarise a trace file",
        description="Print a trace's metadata, events by operation, and compute vs "
                    "communication time per rank.",
        epilog=f"example:\n  sigex show {BUNDLED}\n  sigex show --json {BUNDLED}")
    s.add_argument("trace", help="HDF5 trace file")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument("--ranks", action="store_true", help="list every rank, however many")
    s.add_argument("--allow-incomplete", action="store_true",
                   help="read a trace of a run that crashed or was killed")
    s.set_defaults(func=_cmd_show)

    g = sub.add_parser(
        "signature", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="find the phases of a trace and their weights",
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
    g.set_defaults(func=_cmd_signature)

    x = sub.add_parser(
        "extrapolate", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="learn the logical model from signature traces and write the logical trace for P",
        description="Relate the phases of signature runs at several P, infer each event's "
                    "communication rule, fit volumes, weights and work with the PMNF model search, "
                    "print the rules and fitted models per phase, and write the logical trace for "
                    "the target P (HDF5, the trace schema plus phase weights).",
        epilog="examples:\n  sigex extrapolate traces/stencil/ --target 4096\n"
               "  sigex extrapolate traces/cg/P4.h5 traces/cg/P8.h5 traces/cg/P16.h5 --target 256 "
               "-o /tmp/cg-256.h5\n"
               "  sigex extrapolate traces/stencil/ --target 4096 --no-trace --save-model stencil.json\n"
               "A folder contributes its *.h5 files (not its subfolders); give 3 or more P.")
    x.add_argument("traces", nargs="+", help="folder of signature traces, or the trace files")
    x.add_argument("--target", type=int, required=True, help="process count to extrapolate to")
    x.add_argument("-o", "--output", help="logical trace file or folder "
                   "(default: ./<app>-P<target>.logical.h5)")
    x.add_argument("--p-rule", choices=P_RULE_CHOICES,
                   help="the P values the application accepts: lets weights use the paper's "
                        "displacement fit")
    x.add_argument("--save-model", metavar="FILE", help="also save the model as JSON")
    x.add_argument("--no-trace", action="store_true", help="print the model only")
    x.add_argument("--json", action="store_true", help="print the model as JSON")
    x.add_argument("--force", action="store_true", help="replace existing output files")
    x.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    x.set_defaults(func=_cmd_extrapolate)

    def compute_args(a):
        a.add_argument("traces", nargs="+", help="folder of signature traces, or the trace files")
        a.add_argument("--p-rule", choices=P_RULE_CHOICES, default="any",
                       help="the P values the application accepts")
        a.add_argument("--small", help="folder of small-workload runs for the distant point "
                       "(default: <folder>/small when it exists)")
        a.add_argument("--work", help="declared work per process, e.g. 'n*n/P' (CPU-time mode's "
                       "distant point needs it)")
        a.add_argument("-q", "--quiet", action="store_true", help="no progress messages")

    i = sub.add_parser(
        "ipt", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="print the instruction (work) prediction table and the CRM of each loop phase",
        description="The paper's Table 1 per phase: work per process, weight, displacement and total "
                    "work, measured and predicted (Eq. 3), whether the total is constant, and the "
                    "computation regression model without and with the distant point.",
        epilog="examples:\n  sigex ipt traces/stencil/ --work 'n*n/P'\n"
               "  sigex ipt traces/fft2d/ --phase 1 --p-rule powers_of_two --work 'n*n*log2(n)/P'")
    compute_args(i)
    i.add_argument("--phase", type=int, help="one phase (default: every loop phase)")
    i.add_argument("--upto", type=int, default=4096, help="predicted rows up to this P (default 4096)")
    i.set_defaults(func=_cmd_ipt)

    ph = sub.add_parser(
        "physical", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="write the physical trace for P (logical trace + predicted computation)",
        description="Fit each phase's computation (CRM, with the distant point when small-workload "
                    "runs are given), and write the logical trace for the target P with every "
                    "burst's predicted computation time.",
        epilog="example:\n  sigex physical traces/stencil/ --target 4096 --work 'n*n/P'")
    compute_args(ph)
    ph.add_argument("--target", type=int, required=True, help="process count")
    ph.add_argument("-o", "--output", help="physical trace file (default ./<app>-P<target>.physical.h5)")
    ph.add_argument("--force", action="store_true", help="replace an existing output file")
    ph.set_defaults(func=_cmd_physical)

    rp = sub.add_parser(
        "replay", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="replay a trace (captured or physical) on a machine model",
        description="Simulate a trace under a LogGP/LogGOPS machine profile: per-phase TE_i, PET and "
                    "the replayed time.",
        epilog="examples:\n  sigex replay traces/stencil/P16.h5 --machine cluster-a\n"
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
    rp.add_argument("--pieces", type=_at_least(1, "pieces"), default=1,
                    help="replay the ranks in this many pieces")
    rp.add_argument("--min-events-per-worker", type=_at_least(0, "events"), default=None, metavar="N",
                    help="under mpiexec: give pieces to only as many workers as keep N events each "
                         f"(default {MIN_EVENTS_TEXT}: a smaller trace replays faster on one worker; "
                         "0: every worker gets a piece)")
    rp.add_argument("--full", action="store_true", help="unroll phase weights and replay every repetition")
    rp.set_defaults(func=_cmd_replay)

    sg = sub.add_parser(
        "simgrid", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="SimGrid interop: time-independent traces out and in, an equivalent platform",
        description="export: a sigex trace (captured or physical, weights unrolled) as SimGrid "
                    "time-independent trace for `smpirun -replay`. import: a TI trace written by "
                    "`smpirun -trace-ti` as a sigex trace in flops mode, usable as a signature run "
                    "(TI traces record no communicators and no times: --grid declares the program's "
                    "Cartesian grid, and the events get the times of sigex's replay on --machine). "
                    "platform: the SimGrid platform (one single-core host per rank) equivalent to a "
                    "machine profile, and the SMPI options that match its network and collectives.",
        epilog="examples:\n"
               "  sigex simgrid platform --machine bench/smpi/cluster.toml -n 16 -o platform.xml\n"
               "  smpirun -np 16 -platform platform.xml -trace-ti --cfg=tracing/filename:ti/ti.txt "
               "--cfg=smpi/simulate-computation:no ./stencil --n 4096\n"
               "  sigex simgrid import ti/ti.txt -o runs/P16.h5 --grid 4x4 --machine "
               "bench/smpi/cluster.toml --app stencil --workload n=4096\n"
               "  sigex simgrid export traces/cg/P16.h5 -o /tmp/cg-ti")
    sg.add_argument("action", choices=("export", "import", "platform"))
    sg.add_argument("input", nargs="?", help="export: a sigex trace (.h5); import: a TI index file")
    sg.add_argument("-o", "--output", required=True,
                    help="export: a folder; import: the .h5 to write; platform: the .xml to write")
    sg.add_argument("--machine", default="cluster-a",
                    help="machine profile of the platform / the clock of an import (default cluster-a; "
                         "a platform of one with intra-node parameters needs --flat: SimGrid's platform "
                         "here has one host per rank)")
    sg.add_argument("--flat", action="store_true",
                    help="use the machine with one rank per node (its network between every pair)")
    sg.add_argument("-n", "--nprocs", type=int, help="platform: number of ranks")
    sg.add_argument("--grid", type=_grid_arg, help="import: the Cartesian process grid, e.g. 4x4")
    sg.add_argument("--periodic", action="store_true", help="import: the grid is periodic")
    sg.add_argument("--app", help="import: application name (default: the index's folder)")
    sg.add_argument("--workload", help="import: the workload as NAME=VALUE, e.g. n=4096")
    sg.add_argument("--force", action="store_true", help="replace existing output")
    sg.set_defaults(func=_cmd_simgrid)

    cb = sub.add_parser(
        "calibrate", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="measure a LogGP machine profile on this machine (mpi4py microbenchmarks)",
        description="Ping-pong over message sizes (L + 2o and G), send overhead o and message gap g "
                    "between two local MPI ranks; prints the profile as TOML.",
        epilog="example:\n  sigex calibrate -o mymachine.toml\n"
               "  sigex replay traces/stencil/P16.h5 --machine mymachine.toml")
    cb.add_argument("-o", "--output", help="write the profile here")
    cb.add_argument("--name", default="this-machine", help="profile name (default this-machine)")
    cb.add_argument("--reps", type=int, default=200, help="repetitions per size (default 200)")
    cb.add_argument("--force", action="store_true", help="replace an existing output file")
    cb.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    cb.set_defaults(func=_cmd_calibrate)

    def source_args(a):
        a.add_argument("source", help="campaign file (examples/<app>.toml) or folder of signature traces")
        a.add_argument("--p-rule", choices=P_RULE_CHOICES, default="any",
                       help="the P values the application accepts (folders only; a campaign says it)")
        a.add_argument("--work", help="declared work per process, e.g. 'n*n/P' (folders only: enables "
                       "the distant point from <folder>/small)")
        a.add_argument("-q", "--quiet", action="store_true", help="no progress messages")

    pr = sub.add_parser(
        "predict", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="predict the runtime at a large P on a machine: the whole pipeline and a report",
        description="Models from the signature runs, the physical trace for the target P, its replay on "
                    "the machine, and a report: predicted runtime (PET, and the full replay with --full), "
                    "per-phase table, fitted models with their fit quality, and warnings.",
        epilog="examples:\n  sigex predict examples/stencil.toml --target 4096 --machine cluster-a\n"
               "  sigex predict traces/fft2d/ --p-rule powers_of_two --work 'n*n*log2(n)/P' "
               "--target 1024 --machine machines/cluster-b.toml --full")
    source_args(pr)
    pr.add_argument("--target", type=int, required=True, help="process count to predict")
    pr.add_argument("--machine", default="cluster-a", help="machine profile (file or shipped name)")
    pr.add_argument("--full", action="store_true", help="also replay every repetition (slower)")
    pr.add_argument("--collectives", choices=("algorithms", "closed-form"), default="algorithms")
    pr.add_argument("--json", help="also write the prediction as JSON")
    pr.add_argument("--force", action="store_true", help="replace existing output files")
    pr.set_defaults(func=_cmd_predict)

    sc = sub.add_parser(
        "scaling", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="the predicted strong-scaling curve, its bottleneck phase, a plot and a table",
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
    sc.set_defaults(func=_cmd_scaling)

    cm = sub.add_parser(
        "compare-machines", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="rank machines by predicted runtime and core-hours",
        description="Predict the same run on several machine profiles and rank them.",
        epilog="example:\n  sigex compare-machines examples/stencil.toml --target 4096 "
               "--machine cluster-a --machine cluster-b --machine this-machine")
    source_args(cm)
    cm.add_argument("--target", type=int, required=True, help="process count")
    cm.add_argument("--machine", action="append", required=True, help="a machine profile (repeat)")
    cm.set_defaults(func=_cmd_compare)

    r = sub.add_parser(
        "run", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="perform a campaign's missing runs, then model it",
        description="Read a campaign file (how to run the application at P with workload W), perform "
                    "the signature and small-workload runs it does not have yet (complete traces are "
                    "reused, incomplete ones rerun), then build the logical and compute models and "
                    "print them.",
        epilog="example (from the repository root; the bundled traces make it instant):\n"
               "  sigex run examples/stencil.toml\n"
               "  sigex run examples/stencil.toml --target 65536 -o /tmp/stencil-65536.physical.h5")
    r.add_argument("campaign", help="campaign TOML file")
    r.add_argument("--target", type=int, help="override the campaign's target P")
    r.add_argument("-o", "--output", help="also write the physical trace for the target P")
    r.add_argument("--runs-only", action="store_true", help="perform the runs, do not model")
    r.add_argument("--force", action="store_true", help="replace an existing output file")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    r.set_defaults(func=_cmd_run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``sigex`` console script; returns the exit status."""
    parser = build_parser()
    opts = parser.parse_args(argv)
    if not getattr(opts, "func", None):
        parser.print_help()
        return 2
    try:
        return int(opts.func(opts))
    except (SigexError, FileExistsError) as err:
        print(f"sigex {opts.cmd}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `sigex ... | head`: the reader left; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0

if __name__ == "__main__":
    sys.exit(main())
