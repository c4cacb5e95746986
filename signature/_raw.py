"""Assemble the tracer's raw per-rank files into one :class:`Trace`.

The tracer (``_tracer/sigex_trace.c``) writes, per world rank ``r``,
``rank<r>.meta`` (text), ``rank<r>.events`` and ``rank<r>.completions``
(fixed-size binary records), ``rank<r>.lists`` (variable records),
``rank<r>.comms`` (text) and, at MPI_Finalize, ``rank<r>.end``. A rank
without its end record, a record cut in half, or a rank that wrote nothing
makes the trace *incomplete*: it is still assembled, with the reason, so
that nothing recorded is lost, and readers refuse it unless asked. The
tracer writes its binary streams through shared file mappings, so a rank
killed by the launcher leaves every recorded event on disk, followed by
zeros up to the mapping's window: those zeros are trimmed here.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from ._memory import short_of
from .errors import TraceFormatError, TracerError
from .unmodelled import OTHER_THREADS
from .trace import (COMPLETION_COLUMNS, COUNTER_COLUMNS, EVENT_COLUMNS, OP_CODE, OPS,
                    CommTable, Trace)

__all__ = ["assemble", "RAW_EVENT_DTYPE", "RAW_COMPLETION_DTYPE", "RAW_CPUCHECK_DTYPE",
           "pmu_diagnosis", "read_cpu_check"]

#: struct sigex_event of the tracer, field by field.
RAW_EVENT_DTYPE = np.dtype([
    ("seq", "<i8"), ("t_start", "<f8"), ("t_comm", "<f8"), ("t_comp", "<f8"),
    ("t_cpu", "<f8"), ("bytes", "<i8"), ("recv_bytes", "<i8"), ("req", "<i8"),
    ("ctx_switches", "<i8"), ("instr", "<i8"), ("cycles", "<i8"), ("llc_misses", "<i8"),
    ("op", "<i4"), ("peer", "<i4"), ("recv_peer", "<i4"), ("root", "<i4"),
    ("tag", "<i4"), ("comm", "<i4"), ("aux", "<i4"), ("repeat", "<i4"),
])
#: struct sigex_completion of the tracer.
RAW_COMPLETION_DTYPE = np.dtype([
    ("seq", "<i8"), ("req", "<i8"), ("bytes", "<i8"), ("peer", "<i4"), ("tag", "<i4"),
])
#: struct sigex_cpucheck: what the always-sampling tracer would have recorded for the
#: burst before event ``seq`` (written only with ``SIGEX_CPU_SAMPLE_CHECK=1``).
RAW_CPUCHECK_DTYPE = np.dtype([("seq", "<i8"), ("t_cpu", "<f8"), ("ctx_switches", "<i8")])
RAW_VERSION = 1


def _read_kv(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def pmu_diagnosis() -> str:
    """What the kernel says about its hardware PMU, for the trace's metadata."""
    notes = []
    devices = Path("/sys/bus/event_source/devices")
    if devices.is_dir() and not any((devices / d).exists() for d in ("cpu", "cpu_core", "armv8_pmuv3_0")):
        have = ", ".join(sorted(p.name for p in devices.iterdir()))
        notes.append(f"no CPU PMU in /sys/bus/event_source/devices (only {have})")
    try:
        log = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        log = ""
    for line in log.splitlines():
        if "Performance Events" in line or "PMU" in line and "software events" in line:
            notes.append("kernel: " + re.sub(r"^\[[^]]*\]\s*", "", line).strip())
            break
    return "; ".join(notes)


def _records(path: Path, dtype: np.dtype) -> tuple[np.ndarray, bool]:
    """The whole fixed-size records of a raw file, and whether a record was cut short."""
    data = path.read_bytes() if path.exists() else b""
    whole = len(data) // dtype.itemsize
    return np.frombuffer(data[:whole * dtype.itemsize], dtype), len(data) % dtype.itemsize != 0


def _used(valid: np.ndarray) -> int:
    """Number of records up to the last valid one."""
    idx = np.flatnonzero(valid)
    return int(idx[-1]) + 1 if idx.size else 0


def _parse_comms(path: Path, rank: int) -> tuple[list[tuple[tuple[int, ...], bool, tuple, tuple]], list[str]]:
    """Per local comm id: (members, inter, cart dims, cart periods); and the region
    names by local region id."""
    out: list = []
    regions: list[str] = []
    if not path.exists():
        return out, regions
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        tok = line.split()
        if not tok:
            continue
        if tok[0] == "region":
            if len(tok) < 2 or int(tok[1]) != len(regions):
                raise TraceFormatError(f"{path}:{lineno}: rank {rank}: bad region record {line[:80]!r}")
            regions.append(line.split(" ", 2)[2] if len(tok) > 2 else "")
            continue
        try:
            if tok[0] != "comm" or int(tok[1]) != len(out):
                raise ValueError("ids out of order")
            size = int(tok[3])
            inter = bool(int(tok[5]))
            members = tuple(int(x) for x in tok[7:7 + size])
            rest = tok[7 + size:]
            dims: tuple = ()
            periods: tuple = ()
            if rest:
                nd = int(rest[1])
                dims = tuple(int(x) for x in rest[3:3 + nd])
                periods = tuple(bool(int(x)) for x in rest[4 + nd:4 + 2 * nd])
            if len(members) != size:
                raise ValueError("member list cut short")
        except (ValueError, IndexError) as err:
            raise TraceFormatError(f"{path}:{lineno}: rank {rank}: bad communicator record "
                                   f"({err}): {line[:80]!r}") from err
        out.append((members, inter, dims, periods))
    return out, regions


def _read_lists(path: Path) -> list[tuple[int, int, np.ndarray]]:
    data = path.read_bytes() if path.exists() else b""
    out = []
    pos = 0
    while pos + 16 <= len(data):
        seq = int(np.frombuffer(data, "<i8", 1, pos)[0])
        n, kind = (int(x) for x in np.frombuffer(data, "<i4", 2, pos + 8))
        if n <= 0:
            break  # zeros: the unwritten end of a killed rank's mapped file
        end = pos + 16 + 8 * n
        if end > len(data):
            break  # cut short by a crash
        out.append((seq, kind, np.frombuffer(data, "<i8", n, pos + 16).copy()))
        pos = end
    return out


def _add_unmodelled(table: dict, path: Path, rank: int) -> None:
    """Add one rank's ``calls seconds name`` lines (MPI functions the tracer counted
    but does not model) to ``table``: name -> calls, ranks, seconds (all ranks),
    max_rank_seconds."""
    if not path.exists():
        return
    for line in path.read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        try:
            calls, seconds = int(parts[0]), float(parts[1])
        except ValueError:
            continue
        row = table.setdefault(parts[2], {"calls": 0, "ranks": 0, "seconds": 0.0,
                                          "max_rank_seconds": 0.0})
        row["calls"] += calls
        row["ranks"] += 1
        row["seconds"] += seconds
        row["max_rank_seconds"] = max(row["max_rank_seconds"], seconds)


def read_cpu_check(raw_dir: str | Path) -> dict[str, np.ndarray]:
    """The exact burst CPU times a run traced with ``SIGEX_CPU_SAMPLE_CHECK=1`` kept
    beside its lazily sampled ones: columns ``rank``, ``seq``, ``t_cpu``,
    ``ctx_switches``, one row per burst (every event but ``Init``), sorted by
    (rank, seq) as the trace's events are.

    Raises
    ------
    TraceFormatError
        ``raw_dir`` holds no ``rank<r>.cpucheck`` (the run was not traced in check mode;
        trace it with ``keep_raw=True`` and the variable set).
    """
    raw_dir = Path(raw_dir)
    files = sorted(raw_dir.glob("rank*.cpucheck"), key=lambda p: int(p.stem[4:]))
    if not files:
        raise TraceFormatError(f"{raw_dir}: no rank<r>.cpucheck files; trace with "
                               "SIGEX_CPU_SAMPLE_CHECK=1 and keep the raw files")
    parts = []
    for path in files:
        rec, _ = _records(path, RAW_CPUCHECK_DTYPE)
        rec = rec[:_used(rec["seq"] != 0)]  # zeros after the last record of a killed rank
        parts.append((int(path.stem[4:]), np.sort(rec, order="seq")))
    return {"rank": np.concatenate([np.full(len(r), k, np.int32) for k, r in parts]),
            "seq": np.concatenate([r["seq"] for _, r in parts]),
            "t_cpu": np.concatenate([r["t_cpu"] for _, r in parts]),
            "ctx_switches": np.concatenate([r["ctx_switches"] for _, r in parts])}


def _cpu_sampling_meta(rank_meta: list[dict[str, str]], ends: list[dict[str, str]]) -> dict[str, Any]:
    """How the tracer sampled thread CPU time (see the tracer's lazy sampling) and how
    many bursts it estimated, summed over the ranks that wrote their end record."""
    m0 = next((m for m in rank_meta if m), {})
    if "cpu_sampling" not in m0:  # a tracer from before lazy sampling sampled every boundary
        return {"cpu_sampling": "always"}
    n = sum(int(e.get("cpu_bursts", 0)) for e in ends)
    n_est = sum(int(e.get("cpu_bursts_estimated", 0)) for e in ends)
    t = sum(float(e.get("cpu_burst_seconds", 0)) for e in ends)
    t_est = sum(float(e.get("cpu_burst_seconds_estimated", 0)) for e in ends)
    return {
        "cpu_sampling": m0["cpu_sampling"],
        "cpu_sample_min_us": float(m0.get("cpu_sample_min_us", 0)),
        "cpu_sample_chain_us": float(m0.get("cpu_sample_chain_us", 0)),
        "cpu_switch_check": m0.get("cpu_switch_check", ""),
        "cpu_bursts_estimated": n_est,
        "cpu_bursts_estimated_share": n_est / n if n else 0.0,
        "cpu_burst_time_estimated_share": t_est / t if t > 0 else 0.0,
        "cpu_samples": sum(int(e.get("cpu_samples", 0)) for e in ends),
        # the clock of held polls: a rank's end record says if it fell back mid-run
        "poll_clock": next((e["poll_clock"] for e in ends if "poll_clock" in e
                            and not e["poll_clock"].startswith("rdtsc")),
                           m0.get("poll_clock", "clock_gettime:CLOCK_MONOTONIC")),
    }


#: memory that assembling a trace takes per event at its peak (the raw records read, the
#: trace's columns, its HDF5 file written): 467 bytes measured on code_saturne's tutorial
#: at P = 8 (3.0 M events, 1.33 GiB)
ASSEMBLE_BYTES_PER_EVENT = 450


def _check_memory(raw_dir: Path, P: int) -> None:
    """Refuse, naming the numbers, a run whose raw records cannot be assembled in the memory
    this machine has left (code_saturne's tutorial at P = 16: 160 M events, whose assembly
    the kernel killed at 23.5 GB with no word of why). The count is the records' files'
    sizes (a killed rank's files stay at their window's size: an upper bound)."""
    size = sum(f.stat().st_size for f in raw_dir.glob("rank*.events"))
    n = size // RAW_EVENT_DTYPE.itemsize
    need = n * ASSEMBLE_BYTES_PER_EVENT
    free = short_of(need)
    if free is not None:
        raise TracerError(
            f"{raw_dir}: the run wrote {n:,} events over {P} ranks ({size / 2**30:.1f} GiB of raw records); "
            f"assembling them into a trace takes about {need / 2**30:.1f} GiB and this machine has "
            f"{free / 2**30:.1f} GiB available. Trace a shorter run (a few dozen iterations of its main "
            "loop are enough for a signature: fewer time steps, a looser solver tolerance) or fewer ranks, "
            "or trace on a machine with more memory")


def assemble(raw_dir: str | Path, meta: dict[str, Any] | None = None) -> Trace:
    """Build a :class:`Trace` from a directory of raw per-rank tracer files.

    Parameters
    ----------
    raw_dir : str or Path
        Directory the tracer wrote (``$SIGEX_TRACE_DIR``).
    meta : dict, optional
        Run metadata known to the launcher (app, command, workload_label,
        workload_value, ...); merged into the trace's metadata.

    Returns
    -------
    Trace
        Marked complete only if every rank wrote its end record and every
        record is whole.

    Raises
    ------
    TraceFormatError
        No tracer output at all in ``raw_dir``, or records of a foreign layout.
    TracerError
        The records are more than this machine's available memory can assemble.
    """
    raw_dir = Path(raw_dir)
    meta0_path = raw_dir / "rank0.meta"
    metas = sorted(raw_dir.glob("rank*.meta"))
    if not metas:
        raise TraceFormatError(
            f"{raw_dir}: the tracer wrote nothing. Did the program call MPI_Init, and does it "
            "use the MPI that the tracer was built with (`mpicc` on PATH)?")
    if not meta0_path.exists():
        raise TraceFormatError(f"{raw_dir}: rank 0 wrote no trace files")
    m0 = _read_kv(meta0_path)
    if int(m0.get("raw_version", -1)) != RAW_VERSION:
        raise TraceFormatError(f"{raw_dir}: raw tracer version {m0.get('raw_version')} "
                               f"but this sigex reads {RAW_VERSION}; rebuild the tracer")
    P = int(m0["size"])
    if int(m0["event_record_size"]) != RAW_EVENT_DTYPE.itemsize or \
            int(m0["completion_record_size"]) != RAW_COMPLETION_DTYPE.itemsize:
        raise TraceFormatError(f"{raw_dir}: tracer record sizes {m0['event_record_size']}/"
                               f"{m0['completion_record_size']} do not match this sigex; "
                               "rebuild the tracer")
    raw_ops = m0["ops"].split(",")
    unknown = [n for n in raw_ops if n not in OP_CODE]
    if unknown:
        raise TraceFormatError(f"{raw_dir}: tracer knows operations this sigex does not: {unknown}")
    op_lut = np.array([OP_CODE[n] for n in raw_ops], np.uint8)
    _check_memory(raw_dir, P)

    problems: list[str] = []
    per_rank_events = []
    per_rank_compl = []
    lists_rows: list[tuple[int, int, int, np.ndarray]] = []
    comm_keys: dict[tuple, int] = {}
    region_index: dict[str, int] = {}
    comm_defs: list[tuple] = []
    hosts: list[str] = []
    rank_meta = []
    ends: list[dict[str, str]] = []
    unmodelled: dict[str, dict[str, Any]] = {}
    for r in range(P):
        mp = raw_dir / f"rank{r}.meta"
        if not mp.exists():
            problems.append(f"rank {r} wrote no trace files (did it start?)")
            per_rank_events.append(np.zeros(0, RAW_EVENT_DTYPE))
            per_rank_compl.append(np.zeros(0, RAW_COMPLETION_DTYPE))
            rank_meta.append({})
            continue
        m = _read_kv(mp)
        rank_meta.append(m)
        hosts.append(m.get("host", "?"))
        ev, cut = _records(raw_dir / f"rank{r}.events", RAW_EVENT_DTYPE)
        if cut:
            problems.append(f"rank {r}: last event record cut short after event {len(ev)} "
                            "(run killed while writing)")
        # a killed rank leaves its mapped files at window size: zeros after the last record
        ev = ev[:_used(ev["op"] != 0)]
        bad_op = np.flatnonzero((ev["op"] < 0) | (ev["op"] >= len(op_lut)))
        if bad_op.size:
            raise TraceFormatError(f"{raw_dir}: rank {r} event {int(bad_op[0])} has operation code "
                                   f"{int(ev['op'][bad_op[0]])}, which the tracer does not write; "
                                   "the raw file is damaged")
        comp, _ = _records(raw_dir / f"rank{r}.completions", RAW_COMPLETION_DTYPE)
        comp = comp[:_used(comp["seq"] != 0)]  # seq 0 is Init, which completes nothing
        end = raw_dir / f"rank{r}.end"
        if end.exists():
            e = _read_kv(end)
            ends.append(e)
            if int(e.get("events", -1)) != len(ev) or int(e.get("completions", -1)) != len(comp):
                problems.append(f"rank {r}: end record says {e.get('events')} events but "
                                f"{len(ev)} were found")
            if int(e.get("untraced_calls", 0)):
                # (a library's own threads: PT-SCOTCH partitioning DOLFINx's mesh makes a few
                # dozen calls from them; named in every report, and the message check says so
                # where one of their messages meets a traced call)
                row = unmodelled.setdefault(OTHER_THREADS, {"calls": 0, "ranks": 0, "seconds": 0.0,
                                                            "max_rank_seconds": 0.0})
                row["calls"] += int(e["untraced_calls"])
                row["ranks"] += 1
        else:
            last = f"seq {int(ev['seq'][-1])} ({OPS[op_lut[ev['op'][-1]]]})" if len(ev) else "no event"
            aborted = len(ev) and op_lut[ev["op"][-1]] == OP_CODE["Abort"]
            how = "called MPI_Abort" if aborted else "has no end record (run crashed or was killed)"
            problems.append(f"rank {r} {how}; its last recorded event is {last}")
        # communicators: map local ids to global ids
        lut = []
        seen: dict[tuple, int] = {}
        comm_recs, region_recs = _parse_comms(raw_dir / f"rank{r}.comms", r)
        for members, inter, dims, periods in comm_recs:
            key = (members, inter, dims, periods)
            ordinal = seen.get(key, 0)
            seen[key] = ordinal + 1
            gkey = key + (ordinal,)
            if gkey not in comm_keys:
                comm_keys[gkey] = len(comm_defs)
                comm_defs.append(key)
            lut.append(comm_keys[gkey])
        comm_lut = np.array(lut + [-1], np.int32)  # index -1 -> -1
        bad = (ev["comm"] >= len(lut)) | (ev["comm"] < -1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise TraceFormatError(f"{raw_dir}: rank {r} event seq {int(ev['seq'][i])} uses "
                                   f"communicator {int(ev['comm'][i])} that was never recorded")
        ev = ev.copy()
        ev["comm"] = comm_lut[ev["comm"]]
        newc = np.isin(op_lut[ev["op"]], [OP_CODE[n] for n in (
            "Comm_split", "Comm_split_type", "Comm_create", "Comm_create_group", "Comm_dup",
            "Cart_create", "Cart_sub", "Graph_create", "Dist_graph_create")])
        ok = newc & (ev["aux"] >= 0) & (ev["aux"] < len(lut))
        ev["aux"][ok] = np.asarray(lut, np.int32)[ev["aux"][ok]]
        reg = np.isin(op_lut[ev["op"]], [OP_CODE["Region_begin"], OP_CODE["Region_end"]])
        if reg.any():
            rlut = np.array([region_index.setdefault(n, len(region_index)) for n in region_recs], np.int32)
            ev["aux"][reg] = rlut[ev["aux"][reg]]
        per_rank_events.append(ev)
        per_rank_compl.append(comp)
        _add_unmodelled(unmodelled, raw_dir / f"rank{r}.unmodelled", r)
        for seq, kind, values in _read_lists(raw_dir / f"rank{r}.lists"):
            lists_rows.append((r, seq, kind, values))

    counts = np.array([len(e) for e in per_rank_events], np.int64)
    rank_offsets = np.concatenate([[0], np.cumsum(counts)])
    allev = np.concatenate(per_rank_events) if P else np.zeros(0, RAW_EVENT_DTYPE)
    hw = all(m.get("hw_counters") == "1" for m in rank_meta if m)
    events: dict[str, np.ndarray] = {"rank": np.repeat(np.arange(P, dtype=np.int32), counts)}
    for col, dt in EVENT_COLUMNS.items():
        if col in ("rank", "phase", "repeat") or (col in COUNTER_COLUMNS and not hw):
            continue
        events[col] = allev[col].astype(dt)
    events["op"] = op_lut[allev["op"]]
    if len(allev) and int(allev["repeat"].max()) > 1:  # held polling loops (see the tracer)
        events["repeat"] = np.maximum(allev["repeat"], 1).astype(np.int32)

    ccounts = np.array([len(c) for c in per_rank_compl], np.int64)
    allc = np.concatenate(per_rank_compl) if P else np.zeros(0, RAW_COMPLETION_DTYPE)
    completions = {"rank": np.repeat(np.arange(P, dtype=np.int32), ccounts)}
    for col, dt in COMPLETION_COLUMNS.items():
        if col != "rank":
            completions[col] = allc[col].astype(dt)

    lengths = np.array([len(v) for *_, v in lists_rows], np.int64)
    lists = {
        "rank": np.array([r for r, *_ in lists_rows], np.int32),
        "seq": np.array([s for _, s, *_ in lists_rows], np.int64),
        "kind": np.array([k for _, _, k, _ in lists_rows], np.int8),
        "start": np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if len(lengths) else np.zeros(0, np.int64),
        "length": lengths,
        "values": np.concatenate([v for *_, v in lists_rows]) if lists_rows else np.zeros(0, np.int64),
    }

    if comm_defs:
        sizes = np.array([len(d[0]) for d in comm_defs], np.int32)
        cart_len = np.array([len(d[2]) for d in comm_defs], np.int64)
        comms = CommTable(
            size=sizes, inter=np.array([d[1] for d in comm_defs], bool),
            member_offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            members=np.concatenate([np.array(d[0], np.int32) for d in comm_defs]),
            cart_offsets=np.concatenate([[0], np.cumsum(cart_len)]).astype(np.int64),
            cart_dims=np.array([x for d in comm_defs for x in d[2]], np.int32),
            cart_periods=np.array([x for d in comm_defs for x in d[3]], bool))
    else:
        comms = CommTable.world_only(P)

    if hw:
        counters_reason = ""
    else:
        reasons = sorted({m.get("hw_reason", "") for m in rank_meta if m})
        counters_reason = "; ".join(r for r in reasons if r)
        diag = pmu_diagnosis()
        if diag:
            counters_reason = f"{counters_reason}; {diag}" if counters_reason else diag
    from . import __version__
    full_meta: dict[str, Any] = {
        "app": None, "command": None, "workload_label": None, "workload_value": None,
        "nprocs": P,
        "mpi_library": m0.get("mpi_library", ""),
        "hosts": sorted(set(hosts)),
        "thread_level": int(m0.get("thread_level", 0)),
        "work_mode": "counters" if hw else "cpu-time",
        "counters_available": hw,
        "counters_reason": counters_reason,
        "cpu_time_source": m0.get("cpu_source", ""),
        "ctx_switch_source": m0.get("ctx_source", ""),
        "software_events": m0.get("software_events") == "1",
        "t0_unix": float(m0.get("t0_unix", 0.0)),
        "sigex_version": __version__,
        "complete": not problems,
        "incomplete_reason": "; ".join(problems) if problems else None,
        "unmodelled_calls": dict(sorted(unmodelled.items())),
        # false when the tracer was built without the library's symbol list (no nm, or
        # no libmpi found for the mpicc): calls it does not model were then not counted
        "unmodelled_counted": m0.get("unmodelled_counted") == "1",
        **_cpu_sampling_meta(rank_meta, ends),
    }
    full_meta.update(meta or {})
    full_meta["complete"] = not problems
    trace = Trace(meta=full_meta, events=events, rank_offsets=rank_offsets,
                  completions=completions, lists=lists, comms=comms, regions=tuple(region_index))
    trace.validate()
    return trace
