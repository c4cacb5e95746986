"""SimGrid interop: time-independent (TI) traces out and in, a matching platform, and SMPI's replay.

SimGrid's SMPI replays *time-independent* traces (``smpirun -trace-ti`` writes
them, ``smpirun -replay`` replays them): one text file per rank whose lines
are ``<rank> <action> <args>``, e.g. ``3 isend 4 0 16384 6`` (destination,
tag, count, datatype; 6 is MPI_BYTE), ``3 compute 125000`` (flops) or
``3 allreduce 8 0 6``, and an index file listing the rank files in order.
The layout was read off SimGrid 3.32's own ``-trace-ti`` output.

* :func:`export_ti` writes a sigex trace (captured, or a physical trace with
  its phase weights unrolled by :func:`replay.unroll.unroll`) in that format; bursts become ``compute`` of
  ``t_comp x flops_per_second`` (the platform's host speed).
* :func:`import_ti` reads such traces (SimGrid's or ours) into a
  :class:`signature.Trace` with ``work_mode = "flops"``: a burst's ``t_comp``
  is its flops over the given host speed.
* :func:`platform_xml` and :func:`smpi_config` describe a
  :class:`~replay.machine.Machine` to SimGrid: one host per rank, links with
  latency L/2 each way through a free backbone and bandwidth 1/G, the
  per-message overheads o and O as SMPI's ``os``/``or`` piecewise models,
  the eager/rendezvous threshold S, and the collective algorithms sigex's
  engine uses.
* :func:`replay_smpi` runs ``smpirun -replay`` and returns SMPI's simulated
  time.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from signature.errors import SigexError, TraceFormatError
from signature.trace import COMPLETION_COLUMNS, OP_CODE, OPS, CommTable, Trace

from .machine import Machine

__all__ = ["export_ti", "import_ti", "platform_xml", "smpi_config", "smpirun", "replay_smpi",
           "run_program", "SimGridError", "HOST_SPEED"]

#: flops per second of the exported platform's hosts: a burst of t seconds is t * HOST_SPEED flops.
HOST_SPEED = 1e9
MPI_BYTE = 6


class SimGridError(SigexError):
    """SimGrid is missing, or it failed on a trace."""


#: point-to-point operations and their TI actions (synchronous/buffered/ready sends are sends)
_P2P = {**dict.fromkeys(("Send", "Ssend", "Bsend", "Rsend"), "send"),
        **dict.fromkeys(("Isend", "Issend", "Ibsend", "Irsend"), "isend"), "Recv": "recv", "Irecv": "irecv"}


def _line(trace: Trace, i: int, r: int) -> str | None:
    ev = trace.events
    op = OPS[int(ev["op"][i])]
    peer, tag = int(ev["peer"][i]), max(0, int(ev["tag"][i]))
    b, rb, root = int(ev["bytes"][i]), int(ev["recv_bytes"][i]), max(0, int(ev["root"][i]))
    if op in _P2P:  # send/isend/recv/irecv <peer> <tag> <count> <datatype>
        return f"{r} {_P2P[op]} {peer} {tag} {b if 'send' in _P2P[op] else rb} {MPI_BYTE}"
    if op in ("Sendrecv", "Sendrecv_replace"):
        src = int(ev["recv_peer"][i])
        return f"{r} sendRecv {b} {peer} {rb or b} {src} {MPI_BYTE} {MPI_BYTE}"
    if op in ("Wait", "Waitall", "Waitany", "Waitsome"):
        return f"{r} waitall"
    if op == "Barrier":
        return f"{r} barrier"
    if op == "Bcast":
        return f"{r} bcast {b or rb} {root} {MPI_BYTE}"
    if op == "Reduce":
        return f"{r} reduce {b or rb} 0 {root} {MPI_BYTE}"
    if op == "Allreduce":
        return f"{r} allreduce {b or rb} 0 {MPI_BYTE}"
    if op == "Alltoall":  # both columns are per-peer blocks, as SimGrid's counts are
        return f"{r} alltoall {b} {rb} {MPI_BYTE} {MPI_BYTE}"
    if op == "Allgather":
        return f"{r} allgather {b} {rb} {MPI_BYTE} {MPI_BYTE}"
    if op in ("Init", "Finalize", "Cart_create", "Comm_dup", "Comm_split", "Comm_free", "Region_begin",
              "Region_end", "Request_free", "Test", "Testall", "Testany", "Testsome", "Iprobe", "Probe"):
        return None
    raise SimGridError(f"rank {r}: {op} (event {i - int(trace.rank_offsets[r])}) has no SimGrid "
                       "time-independent equivalent in sigex's exporter")


def export_ti(trace: Trace, folder: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``trace`` as a SimGrid time-independent trace; returns the index file.

    The compute of every burst (``t_comp`` seconds, else ``t_cpu``) becomes
    ``compute <t * HOST_SPEED>`` flops. A weighted (physical) trace is unrolled
    first (:func:`replay.unroll.unroll`). Only MPI_COMM_WORLD traffic is exported (SimGrid's TI format has
    no communicators): a Cartesian communicator over every rank in world order
    is the same thing.
    """
    folder = Path(folder)
    index = folder / "ti.txt"
    if index.exists() and not overwrite:
        raise FileExistsError(f"{index} already exists; pass overwrite=True to replace it")
    folder.mkdir(parents=True, exist_ok=True)
    from .unroll import unroll
    trace = unroll(trace)
    ev = trace.events
    comp = ev["t_comp"] if "t_comp" in ev else ev.get("t_cpu")
    if comp is None:
        raise TraceFormatError(f"{trace.name}: no computation times (t_comp or t_cpu) to export; "
                               "export a captured or physical trace, not a logical one")
    paths = []
    off = trace.rank_offsets
    for r in range(trace.nprocs):
        idx = np.arange(off[r], off[r + 1])
        lines = [f"{r} init"]
        flops = np.asarray(comp[idx], float) * HOST_SPEED
        for i, f in zip(idx.tolist(), flops.tolist()):
            if f > 0:
                lines.append(f"{r} compute {f:.6g}")
            line = _line(trace, i, r)
            if line is not None:
                lines.append(line)
        lines.append(f"{r} finalize")
        p = folder / f"rank-{r}.txt"
        p.write_text("\n".join(lines) + "\n")
        paths.append(p)
    index.write_text("\n".join(str(p.resolve()) for p in paths) + "\n")
    return index


def import_ti(index: str | Path, *, host_speed: float = HOST_SPEED,
              grid: tuple[tuple[int, ...], tuple[bool, ...]] | None = None,
              clock: Machine | None = None, app: str | None = None,
              workload: tuple[str, str] | None = None) -> Trace:
    """Read a SimGrid time-independent trace (index file) into a :class:`Trace`.

    Work is in flops (``work_mode = "flops"``); ``t_comp`` = flops / host_speed.
    Counts are taken as bytes for MPI_BYTE/MPI_CHAR and x8 for MPI_DOUBLE (the
    datatype codes SimGrid writes: 0 double, 1 int, 2 char, 6 byte).

    TI traces record neither communicators nor times. ``grid`` = (dims, periods)
    declares the program's Cartesian communicator over every rank in world order
    (``MPI_Cart_create`` without reordering): all communication is then taken to
    be on it, as the logical model needs to extrapolate grid neighbours.
    ``clock`` = a machine gives the events the times of sigex's replay on that
    machine (``t_start``, ``t_comm``), so the trace can stand for a traced run
    (signature extraction measures phases in time); the meta ``clock`` says so.
    ``app`` and ``workload`` (label, value) name the run as ``sigex trace`` would.
    """
    index = Path(index)
    if not index.exists():
        raise TraceFormatError(f"{index}: no such SimGrid trace index")
    files = [Path(x.strip()) for x in index.read_text().splitlines() if x.strip()]
    files = [f if f.is_absolute() else index.parent / f for f in files]
    size = {0: 8, 1: 4, 2: 1, 3: 2, 4: 8, 5: 4, 6: 1}
    cols: dict[str, list] = {c: [] for c in ("rank", "seq", "op", "peer", "recv_peer", "root", "tag",
                                             "bytes", "recv_bytes", "t_comp")}
    P = len(files)
    off = [0]
    for r, f in enumerate(files):
        if not f.exists():
            raise TraceFormatError(f"{index}: rank file {f} is missing")
        pending = 0.0
        seq = 0
        for ln, text in enumerate(f.read_text().splitlines(), 1):
            a = text.split()
            if not a:
                continue
            act = a[1]
            if act == "compute":
                pending += float(a[2])
                continue

            def add(op, peer=-1, rpeer=-1, root=-1, tag=-1, b=0, rb=0):
                nonlocal pending, seq
                for c, v in zip(cols, (r, seq, OP_CODE[op], peer, rpeer, root, tag, b, rb,
                                       pending / host_speed)):
                    cols[c].append(v)
                pending = 0.0
                seq += 1

            try:
                dt = lambda k: size.get(int(a[k]), 1) if len(a) > k else 1  # noqa: E731
                if act == "init":
                    add("Init")
                elif act == "finalize":
                    add("Finalize")
                elif act in ("send", "isend"):
                    add("Send" if act == "send" else "Isend", peer=int(a[2]), tag=int(a[3]),
                        b=int(a[4]) * dt(5))
                elif act in ("recv", "irecv"):
                    add("Recv" if act == "recv" else "Irecv", peer=int(a[2]), tag=int(a[3]),
                        rb=int(a[4]) * dt(5))
                elif act == "sendRecv":
                    add("Sendrecv", peer=int(a[3]), rpeer=int(a[5]), b=int(a[2]) * dt(6),
                        rb=int(a[4]) * dt(7))
                elif act in ("wait", "waitall"):
                    add("Waitall" if act == "waitall" else "Wait")
                elif act == "barrier":
                    add("Barrier")
                elif act == "bcast":
                    add("Bcast", root=int(a[3]) if len(a) > 3 else 0, b=int(a[2]) * dt(4),
                        rb=int(a[2]) * dt(4))
                elif act == "reduce":
                    add("Reduce", root=int(a[4]) if len(a) > 4 else 0, b=int(a[2]) * dt(5),
                        rb=int(a[2]) * dt(5))
                elif act == "allreduce":
                    add("Allreduce", b=int(a[2]) * dt(4), rb=int(a[2]) * dt(4))
                elif act == "alltoall":  # counts per peer: sigex's columns are blocks too
                    add("Alltoall", b=int(a[2]) * dt(4), rb=int(a[3]) * dt(5))
                elif act == "allgather":
                    add("Allgather", b=int(a[2]) * dt(4), rb=int(a[3]) * dt(5))
                else:
                    raise TraceFormatError(f"{f}:{ln}: SimGrid action {act!r} is not imported by sigex")
            except (IndexError, ValueError) as err:
                raise TraceFormatError(f"{f}:{ln}: malformed line {text!r} ({err})") from err
        off.append(len(cols["rank"]))
    n = len(cols["rank"])
    dtypes = {"rank": np.int32, "seq": np.int64, "op": np.uint8, "peer": np.int32, "recv_peer": np.int32,
              "root": np.int32, "tag": np.int32, "bytes": np.int64, "recv_bytes": np.int64,
              "t_comp": np.float64}
    events = {c: np.asarray(v, dtypes[c]) for c, v in cols.items()}
    events["comm"] = np.where(np.isin(events["op"], [OP_CODE["Init"], OP_CODE["Finalize"]]), -1, 0
                              ).astype(np.int32)
    events["aux"] = np.zeros(n, np.int32)
    events["req"] = np.full(n, -1, np.int64)
    events["t_cpu"] = events["t_comp"].copy()
    meta = {"nprocs": P, "complete": True, "work_mode": "flops", "trace_kind": "captured",
            "app": app or index.parent.name, "source": f"SimGrid TI trace {index}",
            "host_speed": host_speed}
    if workload is not None:
        meta["workload_label"], meta["workload_value"] = str(workload[0]), str(workload[1])
    comms = CommTable.world_only(P)
    if grid is not None:
        dims, periods = tuple(int(d) for d in grid[0]), tuple(bool(p) for p in grid[1])
        if int(np.prod(dims)) != P or len(periods) != len(dims):
            raise TraceFormatError(f"{index}: grid {dims} (periods {periods}) does not hold the "
                                   f"trace's {P} ranks")
        comms = CommTable(size=np.array([P, P], np.int32), inter=np.zeros(2, bool),
                          member_offsets=np.array([0, P, 2 * P], np.int64),
                          members=np.tile(np.arange(P, dtype=np.int32), 2),
                          cart_offsets=np.array([0, 0, len(dims)], np.int64),
                          cart_dims=np.array(dims, np.int32), cart_periods=np.array(periods, bool))
        events["comm"] = np.where(events["comm"] == 0, 1, events["comm"]).astype(np.int32)
    trace = Trace(meta=meta, events=events, rank_offsets=np.asarray(off, np.int64),
                  completions={c: np.zeros(0, d) for c, d in COMPLETION_COLUMNS.items()},
                  lists={c: np.zeros(0, np.int64) for c in ("rank", "seq", "kind", "start", "length",
                                                             "values")},
                  comms=comms, path=index)
    if clock is not None:
        _stamp(trace, clock)
    return trace


def _stamp(trace: Trace, machine: Machine) -> None:
    """Give a time-independent trace the event times of sigex's replay on ``machine``."""
    from .engine import replay
    from .program import Program

    prog = Program.from_trace(trace)
    if len(prog.op) != trace.n_events:
        raise TraceFormatError(f"{trace.path}: the replay has {len(prog.op)} events for the trace's "
                               f"{trace.n_events}; cannot stamp times")
    end = replay(prog, machine).event_end
    ev = trace.events
    first = np.zeros(trace.n_events, bool)
    first[trace.rank_offsets[:-1][np.diff(trace.rank_offsets) > 0]] = True
    prev_end = np.where(first, 0.0, np.roll(end, 1))
    start = np.where(first, 0.0, prev_end + ev["t_comp"] / machine.speed)
    ev["t_start"] = start
    ev["t_comm"] = np.maximum(end - start, 0.0)
    ev["ctx_switches"] = np.zeros(trace.n_events, np.int64)
    trace.meta["clock"] = (f"times from sigex's replay on {machine.name} (a time-independent trace "
                           "has none); work in flops")


def platform_xml(machine: Machine, P: int) -> str:
    """A SimGrid cluster of P single-core hosts equivalent to the machine's network.

    Every pair of ranks talks over the network's LogGP parameters: a machine with
    intra-node parameters (``[intra]``, ``cores`` > 1) is refused, since one link per
    host cannot give two ranks of a node a different latency, bandwidth and overhead;
    describe ``machine.flat()`` and replay that on sigex's side too.
    """
    if machine.intra is not None and machine.cores > 1 and P > 1:
        raise SimGridError(f"machine {machine.name!r} has intra-node parameters ({machine.cores} ranks "
                           "per node), which this SimGrid platform cannot describe (one single-core "
                           "host per rank); compare on machine.flat() (`sigex simgrid --flat`), the same "
                           "machine with every pair of ranks on the network")
    net = machine.network
    bw = 1.0 / net.G if net.G > 0 else 1e15
    return f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<!-- sigex: {machine.name}: L={net.L} o={net.o} G={net.G} O={net.O} S={machine.S} -->
<platform version="4.1">
  <cluster id="sigex" prefix="rank-" suffix="" radical="0-{P - 1}" speed="{HOST_SPEED * machine.speed:.6g}f"
           bw="{bw:.6g}Bps" lat="{net.L / 2:.6g}s" bb_bw="1e15Bps" bb_lat="0s" sharing_policy="FULLDUPLEX"
           bb_sharing_policy="FATPIPE" loopback_bw="1e15Bps" loopback_lat="0s"/>
</platform>
"""


def smpi_config(machine: Machine) -> list[str]:
    """SMPI options that make its network model LogGP-like and its collectives sigex's."""
    net = machine.network
    return [
        "--cfg=smpi/bw-factor:0:1", "--cfg=smpi/lat-factor:0:1",
        f"--cfg=smpi/os:0:{net.o:.6g}:{net.O:.6g}", f"--cfg=smpi/ois:0:{net.o:.6g}:{net.O:.6g}",
        f"--cfg=smpi/or:0:{net.o:.6g}:{net.O:.6g}",
        f"--cfg=smpi/send-is-detached-thresh:{machine.S}", f"--cfg=smpi/async-small-thresh:{machine.S}",
        "--cfg=network/crosstraffic:0", "--cfg=smpi/bcast:binomial_tree",
        "--cfg=smpi/reduce:binomial", "--cfg=smpi/allreduce:rdb", "--cfg=smpi/alltoall:pair",
        "--cfg=smpi/barrier:ompi_recursivedoubling", "--cfg=smpi/allgather:rdb",
    ]


def smpirun(args: list[str], machine: Machine, P: int, *, timeout: float = 3600,
            extra: list[str] | None = None, cwd: str | Path | None = None) -> tuple[float, str]:
    """Run ``smpirun -np P`` on :func:`platform_xml` with :func:`smpi_config` and ``args``
    (a program and its arguments, or ``-replay index``): (SMPI's simulated time in
    seconds, the program's standard output)."""
    exe = shutil.which("smpirun")
    if exe is None:
        raise SimGridError("smpirun not found: apt-get install libsimgrid-dev (SimGrid 3.32)")
    with tempfile.TemporaryDirectory(prefix="sigex-smpi-") as tmp:
        plat = Path(tmp) / "platform.xml"
        plat.write_text(platform_xml(machine, P))
        hosts = Path(tmp) / "hosts"
        hosts.write_text("".join(f"rank-{r}\n" for r in range(P)))
        cmd = [exe, "-np", str(P), "-platform", str(plat), "-hostfile", str(hosts),
               *smpi_config(machine), *(extra or []), *args]
        what = " ".join(args[:2])
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
        except subprocess.TimeoutExpired as err:
            raise SimGridError(f"smpirun {what} at P={P} took more than {timeout:.0f} s") from err
    m = re.findall(r"Simulat(?:ion|ed) time:? ([0-9.eE+-]+)", res.stdout + res.stderr)
    if res.returncode != 0 or not m:
        tail = [ln for ln in (res.stderr or res.stdout).strip().splitlines() if "->" not in ln][-5:]
        raise SimGridError(f"smpirun {what} at P={P} failed (exit {res.returncode}): " + " | ".join(tail))
    return float(m[-1]), res.stdout


def replay_smpi(index: str | Path, machine: Machine, P: int, *, timeout: float = 3600,
                extra: list[str] | None = None) -> float:
    """Replay a TI trace with ``smpirun -replay`` on :func:`platform_xml`; SMPI's simulated time (s)."""
    return smpirun(["-replay", str(Path(index).resolve())], machine, P, timeout=timeout, extra=extra)[0]


def run_program(program: str | Path, args: list[str], machine: Machine, P: int, *,
                trace_ti: str | Path | None = None, timeout: float = 3600) -> tuple[float, str]:
    """Run an SMPI program (built with ``smpicc``) at P ranks on the machine's platform:
    (simulated time, its standard output).

    Computation is only what the program charges with ``smpi_execute_flops``
    (``smpi/simulate-computation:no``: the host's timing never enters the result).
    With ``trace_ti`` (a folder, created) SMPI also writes the run's time-independent
    trace there; its index is ``<trace_ti>/ti.txt`` (read it with :func:`import_ti`).
    """
    extra = ["--cfg=smpi/simulate-computation:no", "--cfg=smpi/display-timing:yes"]
    if trace_ti is not None:
        folder = Path(trace_ti).resolve()
        if (folder / "ti.txt").exists():
            raise FileExistsError(f"{folder / 'ti.txt'} already exists; remove it or trace elsewhere")
        folder.mkdir(parents=True, exist_ok=True)
        extra = ["-trace-ti", f"--cfg=tracing/filename:{folder / 'ti.txt'}", *extra]
    extra.append(f"--cfg=smpi/host-speed:{HOST_SPEED:g}")  # no host benchmark (and no warning): nothing is timed
    return smpirun([str(Path(program).resolve()), *args], machine, P, timeout=timeout, extra=extra)
