"""``sigex show``: a trace's metadata, events by operation, compute vs communication per rank."""

from __future__ import annotations

import argparse
import json

import numpy as np

from signature._text import table

from ._common import BUNDLED, formatter, input_file

NAME = "show"
HELP = "summarise a trace file"


def add_parser(sub) -> argparse.ArgumentParser:
    s = sub.add_parser(
        NAME, help=HELP, **formatter(),
        description="Print a trace's metadata, events by operation, and compute vs "
                    "communication time per rank.",
        epilog=f"example:\n  sigex show {BUNDLED}\n  sigex show --json {BUNDLED}")
    s.add_argument("trace", help="HDF5 trace file")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument("--ranks", action="store_true", help="list every rank, however many")
    s.add_argument("--allow-incomplete", action="store_true",
                   help="read a trace of a run that crashed or was killed")
    return s


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def show_text(trace, all_ranks: bool) -> str:
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
    if s["trace_kind"] == "captured":
        out.append(f"  CPU sampling {cpu_sampling_line(m)}")
    out.append(f"  complete    {'yes' if s['complete'] else 'NO: ' + str(s['incomplete_reason'])}")
    runtime = "not run" if s["runtime"] is None else f"{s['runtime']:.4f} s"
    out.append(f"  events      {s['events']:,} ({s['events'] / max(1, s['nprocs']):.0f} per rank)"
               f"   runtime {runtime}")
    out += unmodelled_lines(m, s["runtime"])
    out.append("")
    rows = [(o["op"], f"{o['calls']:,}", fmt_bytes(o["bytes"]), fmt_bytes(o["recv_bytes"]),
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


def cpu_sampling_line(meta) -> str:
    """How the tracer took burst CPU times (docs/trace-format.md, lazy CPU-time sampling)."""
    mode = meta.get("cpu_sampling", "always")
    if mode != "lazy":
        return f"{mode}: every burst's CPU time read at both ends"
    return (f"lazy: bursts and calls shorter than {meta.get('cpu_sample_min_us', 0):g} us without a "
            f"context switch (seen by {meta.get('cpu_switch_check') or '?'}) are not read; "
            f"{meta.get('cpu_bursts_estimated', 0):,} bursts "
            f"({100 * meta.get('cpu_bursts_estimated_share', 0.0):.1f}%, "
            f"{100 * meta.get('cpu_burst_time_estimated_share', 0.0):.2f}% of burst time) "
            "have their wall time as CPU time")


def unmodelled_lines(meta, runtime) -> list[str]:
    """The MPI calls the tracer counted but sigex does not model: those that communicate, one
    line each, and the local ones summed."""
    from signature import unmodelled_calls, unmodelled_notes

    calls = unmodelled_calls(meta)
    local = [c for c in calls if c.local]
    notes = unmodelled_notes(meta, runtime)
    out = [f"  NOT MODELLED {n}" for n in notes]
    if meta.get("unmodelled_counted") is False:
        out.append("  NOT COUNTED calls the tracer does not model were not counted: it was built "
                   "without the MPI library's symbol list (is `nm` installed?)")
    if local:
        out.append(f"  local calls {sum(c.calls for c in local):,} calls of {len(local)} local MPI "
                   f"functions (no communication; {', '.join(c.name for c in local[:4])}"
                   f"{', ...' if len(local) > 4 else ''})")
    return out


def run(opts: argparse.Namespace) -> int:
    from signature.io import load_trace

    trace = load_trace(input_file(opts.trace), allow_incomplete=opts.allow_incomplete)
    if opts.json:
        print(json.dumps(trace.summary(), indent=2))
    else:
        print(show_text(trace, opts.ranks))
    return 0
