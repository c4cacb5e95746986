"""SimGrid interop: time-independent (TI) traces out and in, a matching platform, and SMPI's replay.

SimGrid's SMPI replays *time-independent* traces (``smpirun -trace-ti`` writes
them, ``smpirun -replay`` replays them): one text file per rank whose lines
are ``<rank> <action> <args>``, e.g. ``3 isend 4 0 16384 6`` (destination,
tag, count, datatype code; 6 is MPI_BYTE), ``3 compute 125000`` (flops) or
``3 allreduce 8 0 6``, and an index file listing the rank files in order.
The layout was read off SimGrid 3.32's own ``-trace-ti`` output for every MPI
call below (C and Fortran programs run under ``smpirun``; Debian installs
SimGrid's headers but not its sources).

* :func:`export_ti` writes a sigex trace (captured, or a physical trace with
  its phase weights unrolled by :func:`replay.unroll.unroll`) in that format; bursts become ``compute`` of
  ``t_comp x flops_per_second`` (the platform's host speed).
* :func:`import_ti` reads such traces (SimGrid's or ours) into a
  :class:`signature.Trace` with ``work_mode = "flops"``: a burst's ``t_comp``
  is its flops over the given host speed. A compiled reader (``_tiparse.c``,
  built with ``cc`` on first use like the replay kernel) parses each rank file
  in one pass straight into the trace's columns; a file with an action it
  leaves to Python (v-collectives, ``reducescatter``, ``Start``, ``comm_*``),
  a number it does not parse strictly, or an error is read line by line by
  ``_TIReader``, the reference whose result (or error) it equals.
* :func:`datatype_table` gives the byte size of each datatype code, read from
  the installed SimGrid (or :data:`SIMGRID_DATATYPES`, SimGrid 3.32's table).
* :func:`platform_xml` and :func:`smpi_config` describe a
  :class:`~replay.machine.Machine` to SimGrid: one host per rank, links with
  latency L/2 each way through a free backbone and bandwidth 1/G, the
  per-message overheads o and O as SMPI's ``os``/``or`` piecewise models,
  the eager/rendezvous threshold S, and the collective algorithms sigex's
  engine uses.
* :func:`replay_smpi` runs ``smpirun -replay`` and returns SMPI's simulated
  time.

Import: what SimGrid 3.32 writes, and what it becomes
-----------------------------------------------------
Bytes are counts times the datatype's size (SMPI's ``MPI_Type_size``); collectives
keep sigex's block sizes (``docs/trace-format.md``), v-collectives their bytes per
peer in ``lists``. SimGrid writes peers as world ranks, roots as ranks of the
collective's communicator (which it does not name).

====================================  =============================================
TI line (fields)                      sigex event
====================================  =============================================
``init``, ``finalize``                Init, Finalize
``compute <flops>``                   the burst before the next event
``sleep <s>`` (replay only)           ``s`` seconds of burst
``location <file> <line>``            nothing: where the next call is (SimGrid's
                                      replay reads it; 3.32 wrote none here)
``send``/``Ssend``/``bsend``          Send, Ssend, Bsend (MPI_Rsend is written as
``<dst> <tag> <count> <type>``        ``send``); -333 (MPI_PROC_NULL): peer -3
``isend``/``ISsend``/``ibsend``       Isend, Issend, Ibsend (MPI_Irsend: ``isend``)
``recv``/``irecv`` ``<src> <tag>      Recv, Irecv; tag -444 (MPI_ANY_TAG): tag -1;
<count> <type>``                      src -333: see below
``sendRecv <scount> <dst> <rcount>    Sendrecv (also MPI_Sendrecv_replace)
<src> <stype> <rtype>``
``Start <dst> <tag> <bytes> <type>``  the Isend (or, ``dst`` = own rank, the Irecv)
                                      the started persistent request acts as
``wait <src> <dst> <tag>``            Wait completing that pending request (the
                                      oldest, if several share the key; a
                                      collective's is ``r-1 r-1 <tag < 0>``)
``waitall [<n>]``                     Waitall completing every pending request
``waitAny <n>``                       Waitany completing the one pending request
``test <src> <dst> <tag>``            Test; it completed the request if no later
                                      wait did (its last test)
``testall``/``testany``/``testsome``  Testall/Testany/Testsome completing nothing
``barrier``, ``bcast <n> <root>       Barrier, Bcast, Reduce, Allreduce, Scan,
<type>``, ``reduce <n> <flops>        Exscan
<root> <type>``, ``allreduce``/
``scan``/``exscan <n> <flops>
<type>``
``alltoall``/``allgather <scount>     Alltoall, Allgather
<rcount> <stype> <rtype>``
``gather``/``scatter <scount>         Gather, Scatter (receive/send side at the
<rcount> <root> <stype> <rtype>``     root only)
``alltoallv <stotal> <P scounts>      Alltoallv
<rtotal> <P rcounts> <types>``
``gatherv <scount> <P rcounts>        Gatherv; ``allgatherv`` without the root:
<root> <types>``                      Allgatherv
``scatterv <P scounts> <rcount>       Scatterv
<root> <types>``
``reducescatter <P rcounts> <flops>   Reduce_scatter; SimGrid 3.32 writes
<type>``                              MPI_Reduce_scatter_block as a zero per
                                      element then the type: Reduce_scatter_block
``i`` + any collective above, then    the nonblocking collective (Ibcast, ...)
its ``wait``
``comm_size <P>``, ``comm_dup``       nothing, Comm_dup (3.32's writer writes
                                      neither; older traces may have them)
====================================  =============================================

A receive SimGrid wrote from -333 (it writes MPI_UNDEFINED for both
MPI_ANY_SOURCE and MPI_PROC_NULL) gets its source from the other ranks' sends: the
sends to its rank that no receive naming their source takes. None left: it was
MPI_PROC_NULL (peer -3); all from one rank, as many as such receives: that rank;
else the same per tag. Refused, with the rank file and line: a datatype code
outside the table, -1 (derived datatypes, whose size SimGrid does not write),
``Startall`` (no requests named), ``waitAny`` among several pending requests,
``waitall <n>`` with more than ``n`` pending, a request no wait or test
completes (SimGrid 3.32 writes nothing for MPI_Waitsome and MPI_Request_free),
``alltoallv`` whose totals are not the sums of its counts (SimGrid 3.32's
MPI_Alltoallw, one type for every peer), ``comm_split``, ``comm_size`` other
than P, one-sided communication (``Win_fence``, ``Put``, ...), wildcard receives
several senders could have matched, and collectives that differ across ranks in
order, operation or root. Any other action is refused by name.

SimGrid 3.32 writes nothing for communicator calls (MPI_Comm_split, MPI_Cart_create,
MPI_Comm_dup), probes, MPI_Waitsome or MPI_Request_free, and writes no
communicator on any line: collectives on a sub-communicator look like
MPI_COMM_WORLD's (SimGrid's replay runs them on it too). sigex takes every
collective to be on MPI_COMM_WORLD and refuses the trace where the ranks' collectives
disagree; collectives of sub-communicators that happen to agree in order,
operation and root are imported as MPI_COMM_WORLD's.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import numpy as np

from signature.errors import SigexError, SigexWarning, TraceFormatError
from signature.trace import LIST_RECV, LIST_SEND, OP_CODE, OPS, PEER_NULL, CommTable, Trace

from .machine import Machine

__all__ = ["export_ti", "import_ti", "datatype_table", "platform_xml", "smpi_config", "smpirun",
           "replay_smpi", "run_program", "SimGridError", "HOST_SPEED", "SIMGRID_DATATYPES"]

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


# ---- datatypes -------------------------------------------------------------------------------

#: The datatype codes SimGrid 3.32's TI writer prints (``Datatype::encode``: the ``id`` its
#: ``src/smpi/mpi/smpi_datatype.cpp`` gives each predefined datatype; Debian installs no source)
#: with their sizes in bytes (SMPI's ``MPI_Type_size``). The names are the ``smpi_MPI_*``
#: datatypes ``/usr/include/smpi/smpi.h`` declares (and those ``libsimgrid.so.3.32`` exports
#: that the header misspells: the C++ complex types). Written from :func:`datatype_table`'s
#: probe of SimGrid 3.32; used only where no SimGrid is installed to probe. SMPI's own sizes
#: are kept where they differ from a compiler's (MPI_INTEGER1 is 4 bytes, MPI_COMPLEX32 16):
#: they are what SMPI's simulation sends. SimGrid writes -1 for derived datatypes; codes 55,
#: 56 and 58 are datatypes no message can use (no size, such as MPI_LB and MPI_UB).
SIMGRID_DATATYPES: dict[int, tuple[str, int]] = {
    0: ("MPI_DOUBLE", 8), 1: ("MPI_INT", 4), 2: ("MPI_CHAR", 1), 3: ("MPI_SHORT", 2),
    4: ("MPI_LONG", 8), 5: ("MPI_FLOAT", 4), 6: ("MPI_BYTE", 1), 7: ("MPI_LONG_LONG", 8),
    8: ("MPI_SIGNED_CHAR", 1), 9: ("MPI_UNSIGNED_CHAR", 1), 10: ("MPI_UNSIGNED_SHORT", 2),
    11: ("MPI_UNSIGNED", 4), 12: ("MPI_UNSIGNED_LONG", 8), 13: ("MPI_UNSIGNED_LONG_LONG", 8),
    14: ("MPI_LONG_DOUBLE", 16), 15: ("MPI_WCHAR", 4), 16: ("MPI_C_BOOL", 1), 17: ("MPI_INT8_T", 1),
    18: ("MPI_INT16_T", 2), 19: ("MPI_INT32_T", 4), 20: ("MPI_INT64_T", 8), 21: ("MPI_UINT8_T", 1),
    22: ("MPI_UINT16_T", 2), 23: ("MPI_UINT32_T", 4), 24: ("MPI_UINT64_T", 8),
    25: ("MPI_C_FLOAT_COMPLEX", 8), 26: ("MPI_C_DOUBLE_COMPLEX", 16),
    27: ("MPI_C_LONG_DOUBLE_COMPLEX", 32), 28: ("MPI_AINT", 8), 29: ("MPI_OFFSET", 8),
    30: ("MPI_FLOAT_INT", 8), 31: ("MPI_LONG_INT", 16), 32: ("MPI_DOUBLE_INT", 16),
    33: ("MPI_SHORT_INT", 8), 34: ("MPI_2INT", 8), 35: ("MPI_2FLOAT", 8), 36: ("MPI_2DOUBLE", 16),
    37: ("MPI_2LONG", 16), 38: ("MPI_REAL", 4), 39: ("MPI_REAL4", 4), 40: ("MPI_REAL8", 8),
    41: ("MPI_REAL16", 16), 42: ("MPI_COMPLEX8", 8), 43: ("MPI_COMPLEX16", 16),
    44: ("MPI_COMPLEX32", 16), 45: ("MPI_INTEGER1", 4), 46: ("MPI_INTEGER2", 2),
    47: ("MPI_INTEGER4", 4), 48: ("MPI_INTEGER8", 8), 49: ("MPI_INTEGER16", 16),
    50: ("MPI_LONG_DOUBLE_INT", 32), 51: ("MPI_CXX_BOOL", 1), 52: ("MPI_CXX_FLOAT_COMPLEX", 8),
    53: ("MPI_CXX_DOUBLE_COMPLEX", 16), 54: ("MPI_CXX_LONG_DOUBLE_COMPLEX", 32),
    57: ("MPI_PACKED", 1), 59: ("MPI_COUNT", 8),
}

_PROBE_FORMAT = 1  # bumped when the probe changes, so that cached tables are redone


def _cache_dir() -> Path:
    return Path(os.environ.get("SIGEX_CACHE_DIR") or Path.home() / ".cache" / "sigex")


def _smpi_header() -> Path | None:
    """The ``smpi/smpi.h`` of the SimGrid whose ``smpicc`` is on PATH, if installed."""
    smpicc = shutil.which("smpicc")
    if smpicc is None:
        return None
    for header in (Path(smpicc).resolve().parent.parent / "include" / "smpi" / "smpi.h",
                   Path("/usr/include/smpi/smpi.h")):
        if header.exists():
            return header
    return None


def _header_datatypes(header: Path) -> list[str]:
    """The ``smpi_MPI_*`` datatype objects an installed ``smpi.h`` declares or points at."""
    text = header.read_text(errors="replace")
    names = re.findall(r"extern\s+SMPI_Datatype\s+(smpi_MPI_\w+)\s*;", text)
    names += re.findall(r"SMPI_PREDEFINED_POINTER\(\s*MPI_Datatype\s*,\s*(smpi_MPI_\w+)\s*\)", text)
    return list(dict.fromkeys(names))


def _probe_source(names: list[str]) -> str:
    decl = "".join(f"extern SMPI_Datatype {n} __attribute__((weak));\n" for n in names)
    objs = ", ".join(f"&{n}" for n in names)
    labels = ", ".join(f'"{n[len("smpi_"):]}"' for n in names)
    return f"""#include <mpi.h>
#include <stdio.h>
{decl}
static SMPI_Datatype *types[] = {{{objs}}};
static const char *names[] = {{{labels}}};
int main(int argc, char **argv) {{
  static char out[256], in[256];
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  for (int k = 0; k < (int)(sizeof types / sizeof types[0]); k++) {{
    int size = -1;
    if (types[k] == NULL) continue; /* declared by the header, absent from the library */
    MPI_Datatype t = (MPI_Datatype)(void *)types[k];
    if (MPI_Type_size(t, &size) != MPI_SUCCESS || size <= 0 || size > 256) continue;
    MPI_Sendrecv(out, 1, t, 0, k, in, 1, t, 0, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("sigex-datatype %s %d\\n", names[k], size);
  }}
  MPI_Finalize();
  return 0;
}}
"""


def _probe_datatypes(header: Path, timeout: float = 120) -> dict[int, tuple[str, int]]:
    """Ask the installed SimGrid which code its TI writer prints for each datatype of ``header``:
    an ``smpicc`` program sends one element of each to itself under ``smpirun -trace-ti``."""
    names = list(dict.fromkeys(_header_datatypes(header) + [
        "smpi_" + n for n, _ in SIMGRID_DATATYPES.values()]))
    with tempfile.TemporaryDirectory(prefix="sigex-datatypes-") as tmp:
        tmp = Path(tmp)
        (tmp / "probe.c").write_text(_probe_source(names))
        build = subprocess.run(["smpicc", "-o", str(tmp / "probe"), str(tmp / "probe.c")],
                               capture_output=True, text=True, timeout=timeout)
        if build.returncode != 0:
            raise SimGridError("smpicc could not build the datatype probe: "
                               + " | ".join(build.stderr.strip().splitlines()[-3:]))
        (tmp / "platform.xml").write_text(
            "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
            '<platform version="4.1"><zone id="z" routing="Full"><host id="h" speed="1Gf"/></zone>'
            "</platform>\n")
        (tmp / "ti").mkdir()
        run = subprocess.run(["smpirun", "-np", "1", "-platform", str(tmp / "platform.xml"),
                              "-trace-ti", f"--cfg=tracing/filename:{tmp / 'ti' / 'ti.txt'}",
                              "--cfg=smpi/simulate-computation:no", "--cfg=smpi/host-speed:1Gf",
                              str(tmp / "probe")], capture_output=True, text=True, timeout=timeout,
                             cwd=tmp)
        sent = [ln.split()[1:] for ln in run.stdout.splitlines() if ln.startswith("sigex-datatype ")]
        files = [Path(x.strip()) for x in (tmp / "ti" / "ti.txt").read_text().splitlines()
                 if x.strip()] if (tmp / "ti" / "ti.txt").exists() else []
        lines = [ln.split() for ln in files[0].read_text().splitlines()] if files else []
        codes = [int(a[6]) for a in lines if len(a) > 7 and a[1] == "sendRecv"]
    if run.returncode != 0 or not sent or len(codes) != len(sent):
        raise SimGridError(f"the datatype probe under smpirun failed (exit {run.returncode}, "
                           f"{len(sent)} datatypes sent, {len(codes)} traced)")
    table: dict[int, tuple[str, int]] = {}
    for (name, size), code in zip(sent, codes):
        if code >= 0:  # -1: not a predefined datatype after all
            table.setdefault(code, (name, int(size)))
    return table


@functools.lru_cache(maxsize=None)
def datatype_table() -> tuple[dict[int, tuple[str, int]], str]:
    """The datatype codes of SimGrid TI traces with their names and sizes, and where they came from.

    Read from the installed SimGrid when there is one (``smpicc``, ``smpirun`` and
    ``smpi/smpi.h``): an ``smpicc`` program sends one element of every datatype its
    ``smpi.h`` declares to itself under ``smpirun -trace-ti``, and the codes the trace
    shows are paired with ``MPI_Type_size``. The result is cached under
    ``$SIGEX_CACHE_DIR/simgrid`` (default ``~/.cache/sigex``) per header and library.
    Without SimGrid, :data:`SIMGRID_DATATYPES` (SimGrid 3.32's table, probed the same
    way). A failed probe falls back to it with a :class:`~signature.errors.SigexWarning`.

    Returns
    -------
    table : dict of int to (str, int)
        Code -> (MPI datatype name, size in bytes).
    source : str
        Where the table came from (the trace's ``datatypes`` attribute says it too).

    Examples
    --------
    >>> table, source = datatype_table()
    >>> table[0], table[43]
    (('MPI_DOUBLE', 8), ('MPI_COMPLEX16', 16))
    """
    smpicc, smpirun, header = shutil.which("smpicc"), shutil.which("smpirun"), _smpi_header()
    if not (smpicc and smpirun and header):
        return dict(SIMGRID_DATATYPES), "sigex's table of SimGrid 3.32 (no SimGrid installed to probe)"
    key = hashlib.sha256()
    key.update(f"{_PROBE_FORMAT}\n".encode())
    key.update(header.read_bytes())
    for exe in (smpicc, smpirun):
        key.update(Path(exe).read_bytes())
    lib = re.search(r"-L\s*([^\s\"']+)", Path(smpicc).read_text(errors="replace"))
    for so in sorted((Path(lib.group(1)) if lib else Path("/usr/lib")).glob("libsimgrid.so*")):
        st = so.stat()
        key.update(f"{so.resolve()} {st.st_size} {st.st_mtime_ns}\n".encode())
    cached = _cache_dir() / "simgrid" / f"datatypes-{key.hexdigest()[:16]}.json"
    source = f"probed from the installed SimGrid ({header}, smpirun -trace-ti)"
    if cached.exists():
        try:
            data = json.loads(cached.read_text())
            return {int(k): (str(v[0]), int(v[1])) for k, v in data["table"].items()}, source
        except (ValueError, KeyError, TypeError, IndexError):
            pass  # a damaged cache entry: probe again
    try:
        table = _probe_datatypes(header)
    except (SimGridError, OSError, subprocess.SubprocessError) as err:
        warnings.warn(f"could not read the datatype codes of the installed SimGrid ({err}); "
                      "using sigex's table of SimGrid 3.32", SigexWarning, stacklevel=2)
        return dict(SIMGRID_DATATYPES), "sigex's table of SimGrid 3.32 (the probe failed)"
    try:  # the cache only saves the next process a probe
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"header": str(header), "table": {
            str(k): list(v) for k, v in sorted(table.items())}}, indent=0))
        os.replace(tmp, cached)
    except OSError:
        pass
    return table, source


# ---- import --------------------------------------------------------------------------------

#: MPI_UNDEFINED: SimGrid 3.32 writes it for an MPI_ANY_SOURCE or MPI_PROC_NULL peer (which one
#: only the other ranks' sends can tell), and MPI_ANY_TAG as itself.
TI_UNDEFINED, TI_ANY_TAG = -333, -444

#: Point-to-point actions: (sigex op, nonblocking). SimGrid writes MPI_Rsend as ``send`` and
#: MPI_Irsend as ``isend``; ``Ssend`` and ``ISsend`` are capitalised in SimGrid 3.32.
_TI_SENDS = {"send": ("Send", False), "isend": ("Isend", True), "Ssend": ("Ssend", False),
             "ISsend": ("Issend", True), "bsend": ("Bsend", False), "ibsend": ("Ibsend", True)}
_TI_RECVS = {"recv": ("Recv", False), "irecv": ("Irecv", True)}
#: Collective actions (blocking; ``i`` + name is the nonblocking one) and their sigex op.
_TI_COLLECTIVES = {"barrier": "Barrier", "bcast": "Bcast", "reduce": "Reduce", "allreduce": "Allreduce",
                   "scan": "Scan", "exscan": "Exscan", "alltoall": "Alltoall", "alltoallv": "Alltoallv",
                   "gather": "Gather", "gatherv": "Gatherv", "scatter": "Scatter", "scatterv": "Scatterv",
                   "allgather": "Allgather", "allgatherv": "Allgatherv", "reducescatter": "Reduce_scatter"}
#: sigex ops the import makes of them.
_SEND_OPS = {"Send", "Isend", "Ssend", "Issend", "Bsend", "Ibsend"}
_RECV_OPS = {"Recv", "Irecv"}
_COLLECTIVE_NAMES = [n for b in (*_TI_COLLECTIVES.values(), "Reduce_scatter_block")
                     for n in (b, "I" + b[0].lower() + b[1:])]
#: One-sided communication as SimGrid 3.32 writes it (``Win_fence``, ``Put 1 0 4 0``, ...).
_TI_RMA = {"Put", "Get", "Accumulate", "Get_accumulate", "Rput", "Rget", "Raccumulate",
           "Rget_accumulate", "Compare_and_swap", "Fetch_and_op"}


class _Request:
    """A nonblocking post (or started persistent request) waiting for its completion."""

    __slots__ = ("event", "line", "key", "collective", "req", "tests")

    def __init__(self, event, line, key, collective, req):
        self.event, self.line, self.key, self.collective, self.req = event, line, key, collective, req
        self.tests: list[int] = []

    def named_by(self, src: int, dst: int, tag: int) -> bool:
        if self.collective:  # SimGrid names a collective's request (r-1, r-1, its internal tag < 0)
            return src == dst and tag < 0 and tag != TI_ANY_TAG
        return all(k is None or k == v for k, v in zip(self.key, (src, dst, tag)))


def _one_source(sources: set[int], messages: int, receives: int) -> int | None:
    """The source of ``receives`` wildcard receives given the left-over ``messages`` from
    ``sources``: MPI_PROC_NULL if none is left, the one source if it sent exactly that many,
    else None (undecided)."""
    if messages == 0:
        return PEER_NULL
    if len(sources) == 1 and messages == receives:
        return next(iter(sources))
    return None


class _TIReader:
    """Reads the rank files of one TI trace into sigex's event columns, lists and completions."""

    COLUMNS = ("rank", "seq", "op", "peer", "recv_peer", "root", "tag", "comm", "aux", "bytes",
               "recv_bytes", "req", "t_comp")

    def __init__(self, P: int, host_speed: float, sizes: dict[int, tuple[str, int]], source: str):
        self.P, self.host_speed, self.sizes, self.source = P, host_speed, sizes, source
        self.cols: dict[str, list] = {c: [] for c in self.COLUMNS}
        self._append = tuple(self.cols[c].append for c in self.COLUMNS)
        self.line: list[int] = []  # line of each event in its rank file
        self.files: list[Path] = []
        self.lists: list[tuple[int, int, int, list[int]]] = []  # rank, seq, kind, bytes per peer
        self.completions: list[tuple[int, int, int, int]] = []  # rank, wait seq, req, posting event
        self.wild: list[int] = []  # receives whose source SimGrid wrote as MPI_UNDEFINED

    # ---- one rank file --------------------------------------------------------------------------
    def read(self, r: int, f: Path) -> None:
        self.files.append(f)
        self.r, self.f = r, f
        self.pending_flops = 0.0
        self.seq = 0
        self.pending: list[_Request] = []
        self.next_req = 0
        own = str(r)
        for ln, text in enumerate(f.read_text().splitlines(), 1):
            a = text.split()
            if not a:
                continue
            self.ln, self.text = ln, text
            try:
                if a[0] != own and int(a[0]) != r:
                    raise self.error(f"the line is rank {a[0]}'s, in rank {r}'s file")
                if a[1] == "compute":  # most lines: the burst before the next call
                    self.pending_flops += float(a[2])
                    continue
                self.action(a[1], a[2:])
            except (IndexError, ValueError) as err:
                raise TraceFormatError(f"{f}:{ln}: malformed line {text!r} ({err})") from err
        self.finish()

    def error(self, what: str, ln: int | None = None) -> TraceFormatError:
        return TraceFormatError(f"{self.f}:{self.ln if ln is None else ln}: {what}")

    def nbytes(self, count: str, code: str) -> int:
        n, c = int(count), int(code)
        if n < 0:
            raise self.error(f"negative count {n}")
        if c == -1:
            raise self.error("datatype -1: SimGrid writes -1 for derived datatypes (MPI_Type_vector, "
                             "MPI_Type_contiguous, ...), and its TI trace does not record their size; "
                             "sigex cannot tell the bytes of this message")
        if c not in self.sizes:
            raise self.error(f"unknown SimGrid datatype code {c} (datatype table {self.source}: "
                             f"codes {min(self.sizes)}..{max(self.sizes)}); was the trace written by "
                             "another SimGrid version? Import it where that SimGrid is installed")
        return n * self.sizes[c][1]

    def add(self, op: str, *, peer=-1, recv_peer=-1, root=-1, tag=-1, comm=0, b=0, rb=0,
            req=-1) -> int:
        i = len(self.line)
        # the columns' bound append methods, in COLUMNS order (one call each: the hot path of
        # an import of millions of events)
        (rank, seq, code, peer_, recv_peer_, root_, tag_, comm_, aux, nbytes, recv_bytes, req_,
         t_comp) = self._append
        rank(self.r)
        seq(self.seq)
        code(OP_CODE[op])
        peer_(peer)
        recv_peer_(recv_peer)
        root_(root)
        tag_(tag)
        comm_(comm)
        aux(0)
        nbytes(b)
        recv_bytes(rb)
        req_(req)
        t_comp(self.pending_flops / self.host_speed)
        self.line.append(self.ln)
        self.pending_flops = 0.0
        self.seq += 1
        return i

    def post(self, event: int, key, collective: bool = False) -> None:
        req = self.next_req
        self.next_req += 1
        self.cols["req"][event] = req
        self.pending.append(_Request(event, self.ln, key, collective, req))

    def complete(self, request: _Request, wait: int) -> None:
        self.completions.append((self.r, self.cols["seq"][wait], request.req, request.event))
        self.cols["aux"][wait] += 1
        self.pending.remove(request)

    def peer(self, x: str) -> int:
        p = int(x)
        if p == TI_UNDEFINED:
            return PEER_NULL  # for a send: MPI_PROC_NULL (a receive's -333 is resolved later)
        if not 0 <= p < self.P:
            raise self.error(f"peer {p} is not a rank of this {self.P}-process trace")
        return p

    def root(self, x: str) -> int:
        p = int(x)
        if not 0 <= p < self.P:
            raise self.error(f"root {p} is not a rank of this {self.P}-process trace")
        return p

    def counts(self, args: list[str], start: int) -> list[int]:
        if len(args) < start + self.P:
            raise self.error(f"expected {self.P} per-rank counts (one per rank of the trace)")
        return [int(x) for x in args[start:start + self.P]]

    def vlist(self, event: int, kind: int, counts: list[int], code: str) -> int:
        per = [self.nbytes(str(c), code) for c in counts]
        self.lists.append((self.r, self.cols["seq"][event], kind, per))
        return sum(per)

    # ---- actions --------------------------------------------------------------------------------
    def action(self, act: str, x: list[str]) -> None:  # noqa: C901 (one branch per action)
        r = self.r
        if act == "compute":
            self.pending_flops += float(x[0])
        elif act == "sleep":  # seconds (SimGrid's replay reads it; 3.32's writer does not write it)
            self.pending_flops += float(x[0]) * self.host_speed
        elif act == "location":  # <file> <line> of the next call: no MPI call of its own
            int(x[1])
        elif act == "init":
            self.add("Init", comm=-1)
        elif act == "finalize":
            self.add("Finalize", comm=-1)
        elif act in _TI_SENDS:  # <dst> <tag> <count> <datatype>
            op, nb = _TI_SENDS[act]
            dst = self.peer(x[0])
            e = self.add(op, peer=dst, tag=int(x[1]), b=self.nbytes(x[2], x[3]))
            if nb:
                self.post(e, (r, int(x[0]), int(x[1])))
        elif act in _TI_RECVS:  # <src> <tag> <count> <datatype>
            op, nb = _TI_RECVS[act]
            src, tag = int(x[0]), int(x[1])
            e = self.add(op, peer=src if src == TI_UNDEFINED else self.peer(x[0]),
                         tag=-1 if tag == TI_ANY_TAG else tag, rb=self.nbytes(x[2], x[3]))
            if src == TI_UNDEFINED:
                self.wild.append(e)
            if nb:
                self.post(e, (src, r, tag))
        elif act == "sendRecv":  # <send count> <dst> <recv count> <src> <send type> <recv type>
            src = int(x[3])
            e = self.add("Sendrecv", peer=self.peer(x[1]),
                         recv_peer=src if src == TI_UNDEFINED else self.peer(x[3]),
                         b=self.nbytes(x[0], x[4]), rb=self.nbytes(x[2], x[5]))
            if src == TI_UNDEFINED:
                self.wild.append(e)
        elif act == "Start":  # <dst> <tag> <bytes> <datatype>: the size is in bytes already
            dst, tag, size = int(x[0]), int(x[1]), int(x[2])
            self.nbytes("0", x[3])  # the datatype must still be known
            if dst == r:  # SimGrid writes a started receive's own rank, not its source
                e = self.add("Irecv", peer=TI_UNDEFINED, tag=tag, rb=size)
                self.wild.append(e)
                self.post(e, (None, r, tag))
            else:
                e = self.add("Isend", peer=self.peer(x[0]), tag=tag, b=size)
                self.post(e, (r, dst, tag))
        elif act == "Startall":
            raise self.error("Startall: SimGrid's TI trace does not record which persistent "
                             "requests it started (nor their peers and sizes); sigex cannot import it")
        elif act in ("wait", "test"):  # <src> <dst> <tag> of the request
            src, dst, tag = int(x[0]), int(x[1]), int(x[2])
            found = next((q for q in self.pending if q.named_by(src, dst, tag)), None)
            if act == "wait":
                if found is None:
                    raise self.error(f"wait for a request ({src} -> {dst}, tag {tag}) that no earlier "
                                     "line of this rank posted and left pending")
                e = self.add("Wait", comm=-1)
                if not found.collective and found.key[0] is None and src >= 0:
                    self.cols["peer"][found.event] = self.peer(x[0])  # a started receive's source
                    self.wild.remove(found.event)
                self.complete(found, e)
            else:
                e = self.add("Test", comm=-1)
                if found is not None:
                    found.tests.append(e)
        elif act == "waitall":  # [count of the request array]
            n = int(x[0]) if x else None
            if n is not None and n < len(self.pending):
                self.settle_tested()
            if n is not None and n < len(self.pending):
                raise self.error(
                    f"waitall of {n} requests while {len(self.pending)} are pending (posted at lines "
                    f"{', '.join(str(q.line) for q in self.pending)}): the TI trace does not say which "
                    "it waited for. SimGrid 3.32 writes no line for MPI_Waitsome, and its testany/"
                    "testsome/testall lines do not name what they completed")
            e = self.add("Waitall", comm=-1)
            for q in list(self.pending):
                self.complete(q, e)
        elif act == "waitAny":  # <count of the request array>
            if len(self.pending) > 1:
                raise self.error(f"waitAny with {len(self.pending)} requests pending (posted at lines "
                                 f"{', '.join(str(q.line) for q in self.pending)}): SimGrid's TI trace "
                                 "does not record which one completed")
            e = self.add("Waitany", comm=-1)
            for q in list(self.pending):
                self.complete(q, e)
        elif act in ("testall", "testany", "testsome"):  # no arguments: what they completed is unknown
            self.add({"testall": "Testall", "testany": "Testany", "testsome": "Testsome"}[act], comm=-1)
        elif act in _TI_COLLECTIVES or (act[:1] == "i" and act[1:] in _TI_COLLECTIVES):
            self.collective(act, x)
        elif act == "comm_size":  # SimGrid's replay: the size of the communicator of what follows
            if int(x[0]) != self.P:
                raise self.error(f"comm_size {x[0]} in a {self.P}-rank trace: the TI trace does not say "
                                 "which ranks the collectives that follow run on")
        elif act == "comm_dup":
            self.add("Comm_dup")
        elif act == "comm_split":
            raise self.error("comm_split: SimGrid's TI trace records neither the new communicator's "
                             "members nor which later collectives use it; sigex cannot import it")
        elif act.startswith("Win_") or act in _TI_RMA:
            raise self.error(f"one-sided communication ({act}) is not modelled by sigex's replay")
        else:
            raise self.error(f"SimGrid action {act!r} is not imported by sigex")

    def collective(self, act: str, x: list[str]) -> None:
        nb = act not in _TI_COLLECTIVES
        base = act[1:] if nb else act
        op = _TI_COLLECTIVES[base]
        r, P = self.r, self.P
        if base == "barrier":
            e = self.add(op)
        elif base == "bcast":  # <count> <root> <datatype>
            n = self.nbytes(x[0], x[2])
            e = self.add(op, root=self.root(x[1]), b=n, rb=n)
        elif base == "reduce":  # <count> <flops of the operation> <root> <datatype>
            n = self.nbytes(x[0], x[3])
            e = self.add(op, root=self.root(x[2]), b=n, rb=n)
        elif base in ("allreduce", "scan", "exscan"):  # <count> <flops> <datatype>
            n = self.nbytes(x[0], x[2])
            e = self.add(op, b=n, rb=n)
        elif base in ("alltoall", "allgather"):  # <send count> <recv count> <send type> <recv type>
            e = self.add(op, b=self.nbytes(x[0], x[2]), rb=self.nbytes(x[1], x[3]))
        elif base in ("gather", "scatter"):  # <send count> <recv count> <root> <send type> <recv type>
            root = self.root(x[2])
            b, rb = self.nbytes(x[0], x[3]), self.nbytes(x[1], x[4])
            if base == "gather" and r != root:
                rb = 0  # only the root's receive arguments mean anything (as sigex's tracer records)
            if base == "scatter" and r != root:
                b = 0
            e = self.add(op, root=root, b=b, rb=rb)
        elif base == "alltoallv":  # <send total> <P send counts> <recv total> <P recv counts> <types>
            sc, rc = self.counts(x, 1), self.counts(x, P + 2)
            if int(x[0]) != sum(sc) or int(x[P + 1]) != sum(rc):
                raise self.error("alltoallv whose totals are not the sums of its counts: SimGrid 3.32 "
                                 "writes MPI_Alltoallw this way, with one datatype for every peer, so "
                                 "the bytes per peer are unknown")
            e = self.add(op)
            self.cols["bytes"][e] = self.vlist(e, LIST_SEND, sc, x[2 * P + 2])
            self.cols["recv_bytes"][e] = self.vlist(e, LIST_RECV, rc, x[2 * P + 3])
        elif base in ("gatherv", "allgatherv"):  # <send count> <P recv counts> [<root>] <types>
            rc = self.counts(x, 1)
            root = self.root(x[P + 1]) if base == "gatherv" else -1
            t = P + (2 if base == "gatherv" else 1)
            e = self.add(op, root=root, b=self.nbytes(x[0], x[t]))
            if base == "allgatherv" or r == root:
                self.cols["recv_bytes"][e] = self.vlist(e, LIST_RECV, rc, x[t + 1])
        elif base == "scatterv":  # <P send counts> <recv count> <root> <send type> <recv type>
            sc = self.counts(x, 0)
            root = self.root(x[P + 1])
            e = self.add(op, root=root, rb=self.nbytes(x[P], x[P + 3]))
            if r == root:
                self.cols["bytes"][e] = self.vlist(e, LIST_SEND, sc, x[P + 2])
        else:  # reducescatter
            e = self.reduce_scatter(op, x)
        if nb:
            self.cols["op"][e] = OP_CODE["I" + OPS[self.cols["op"][e]][0].lower()
                                         + OPS[self.cols["op"][e]][1:]]
            self.post(e, None, collective=True)

    def reduce_scatter(self, op: str, x: list[str]) -> int:
        """``reducescatter <P recv counts> <flops> <datatype>`` (MPI_Reduce_scatter), or what
        SimGrid 3.32 writes for MPI_Reduce_scatter_block: as many zeros as the block's count,
        then the datatype."""
        P = self.P
        block = len(x) >= 1 and all(v == "0" for v in x[:-1])
        if block and len(x) == P + 2:
            raise self.error("reducescatter of zeros that reads both as MPI_Reduce_scatter of nothing "
                             f"and as SimGrid 3.32's MPI_Reduce_scatter_block of {P + 1} elements")
        if block:
            n = self.nbytes(str(len(x) - 1), x[-1])
            return self.add("Reduce_scatter_block", b=n, rb=n)
        if len(x) != P + 2:
            raise self.error(f"reducescatter needs {P} per-rank counts, the flops and the datatype "
                             "(or, as SimGrid 3.32 writes MPI_Reduce_scatter_block, a zero per "
                             "element and the datatype)")
        rc = self.counts(x, 0)
        e = self.add(op, rb=self.nbytes(str(rc[self.r]), x[P + 1]))
        self.cols["bytes"][e] = self.vlist(e, LIST_RECV, rc, x[P + 1])
        return e

    def settle_tested(self) -> None:
        """Requests that were tested and are pending when the trace cannot leave them pending:
        their last test completed them (a request tested until it succeeds)."""
        for q in list(self.pending):
            if q.tests:
                self.complete(q, q.tests[-1])

    def finish(self) -> None:
        self.settle_tested()
        if self.pending:
            q = self.pending[0]
            raise self.error(f"the request posted here is never completed by a wait or test of the "
                             f"trace ({len(self.pending)} left pending at its end): SimGrid 3.32 writes "
                             "no line for MPI_Waitsome and MPI_Request_free, and its testany/testsome/"
                             "testall lines do not name what they completed", q.line)
        if self.pending_flops:
            raise self.error("compute after the last MPI call: the trace ends without finalize")

    # ---- across ranks ---------------------------------------------------------------------------
    def where(self, e: int) -> str:
        return f"{self.files[self.cols['rank'][e]]}:{self.line[e]}"

    def resolve_wildcards(self) -> None:
        """Give the receives SimGrid wrote from MPI_UNDEFINED (MPI_ANY_SOURCE or MPI_PROC_NULL)
        their source where the other ranks' sends leave only one.

        Per destination, the sends that no receive naming its source takes are *left over*.
        None left: the receives were from MPI_PROC_NULL. All left over from one rank, as many
        as the receives: they came from it. Otherwise the same per tag, when every tag is
        known (Sendrecv and MPI_ANY_TAG lines have none). Anything else is refused: which
        receive got which message depended on timing the trace does not keep."""
        if not self.wild:
            return
        c = self.cols
        sendrecv = OP_CODE["Sendrecv"]
        sends: dict[int, dict[tuple[int, int], int]] = {}
        named: dict[int, list[tuple[int, int]]] = {}
        for e, op in enumerate(c["op"]):
            name = OPS[op]
            tag = -1 if op == sendrecv else c["tag"][e]
            if (name in _SEND_OPS or op == sendrecv) and c["peer"][e] >= 0:
                box = sends.setdefault(c["peer"][e], {})
                box[(c["rank"][e], tag)] = box.get((c["rank"][e], tag), 0) + 1
            src = c["recv_peer"][e] if op == sendrecv else c["peer"][e]
            if (name in _RECV_OPS or op == sendrecv) and src >= 0:
                named.setdefault(c["rank"][e], []).append((src, tag))
        by_dst: dict[int, list[int]] = {}
        for e in self.wild:
            by_dst.setdefault(c["rank"][e], []).append(e)
        for d, events in by_dst.items():
            assign, left = _assign_sources(sends.get(d, {}), named.get(d, []),
                                           [c["tag"][e] for e in events],
                                           [c["op"][e] == sendrecv for e in events])
            assign = {events[i]: src for i, src in assign.items()}
            if len(assign) != len(events):
                raise TraceFormatError(
                    f"{self.where(events[0])}: receive from MPI_ANY_SOURCE or MPI_PROC_NULL (SimGrid "
                    f"writes -333 for both): rank {d} has {len(events)} such receives and "
                    f"{sum(left.values())} sends from ranks {sorted({k[0] for k in left})} that no "
                    "other receive takes; the TI trace does not record which receive got which")
            for e, src in assign.items():
                c["recv_peer" if c["op"][e] == sendrecv else "peer"][e] = src

    def check_collectives(self) -> None:
        """Every rank must call the same collectives in the same order with the same root (the
        TI trace has no communicator: all of them are taken to be on MPI_COMM_WORLD)."""
        c = self.cols
        coll = np.isin(np.asarray(c["op"]), [OP_CODE[n] for n in _COLLECTIVE_NAMES])
        per_rank = [[] for _ in range(self.P)]
        for e in np.flatnonzero(coll).tolist():
            per_rank[c["rank"][e]].append(e)
        first = per_rank[0]
        for r in range(1, self.P):
            mine = per_rank[r]
            for k, (e0, e) in enumerate(zip(first, mine)):
                if c["op"][e0] != c["op"][e] or c["root"][e0] != c["root"][e]:
                    raise TraceFormatError(
                        f"{self.where(e)}: collective {k} of rank {r} is {OPS[c['op'][e]]} (root "
                        f"{c['root'][e]}) but rank 0's is {OPS[c['op'][e0]]} (root {c['root'][e0]}) at "
                        f"{self.where(e0)}. SimGrid's TI trace records no communicator: collectives on "
                        "sub-communicators (MPI_Comm_split, MPI_Cart_sub) cannot be imported")
            if len(mine) != len(first):
                e = (mine if len(mine) > len(first) else first)[min(len(mine), len(first))]
                raise TraceFormatError(
                    f"{self.where(e)}: rank {r} calls {len(mine)} collectives and rank 0 "
                    f"{len(first)}. SimGrid's TI trace records no communicator: collectives on "
                    "sub-communicators (MPI_Comm_split, MPI_Cart_sub) cannot be imported")


def import_ti(index: str | Path, *, host_speed: float = HOST_SPEED,
              grid: tuple[tuple[int, ...], tuple[bool, ...]] | None = None,
              clock: Machine | None = None, app: str | None = None,
              workload: tuple[str, str] | None = None) -> Trace:
    """Read a SimGrid time-independent trace (index file) into a :class:`Trace`.

    Every action SimGrid 3.32 writes is imported as the sigex operation it stands for
    (the module docstring lists them) or refused with a :class:`TraceFormatError`
    naming the rank file and line; nothing is skipped or guessed.

    Parameters
    ----------
    index : str or Path
        The index file (one rank file per line, in rank order).
    host_speed : float
        Flops per second: a burst's ``t_comp`` is its flops / host_speed
        (``work_mode = "flops"``).
    grid : (dims, periods), optional
        The program's Cartesian communicator over every rank in world order
        (``MPI_Cart_create`` without reordering): all communication is then taken to be on
        it, as the logical model needs to extrapolate grid neighbours. TI traces record no
        communicator.
    clock : Machine, optional
        Give the events the times of sigex's replay on that machine (``t_start``,
        ``t_comm``), so the trace can stand for a traced run (signature extraction measures
        phases in time); the meta ``clock`` says so. TI traces record no time.
    app, workload : str, (label, value), optional
        Name the run as ``sigex trace`` would.

    Returns
    -------
    Trace
        Messages in bytes: each count times its datatype's size from
        :func:`datatype_table` (the meta ``datatypes`` says which table).

    Raises
    ------
    TraceFormatError
        A missing file, a malformed line, an unknown action or datatype code, or an
        action whose peers, bytes or completions the TI trace does not record (derived
        datatypes, ``Startall``, ``waitAny`` among several requests, ``comm_split``,
        one-sided communication, an MPI_ANY_SOURCE receive several senders could have
        matched, collectives on sub-communicators that disagree across ranks).

    Examples
    --------
    >>> from signature import load_trace
    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> t = import_ti(export_ti(load_trace("traces/cg/P4.h5"), out))
    >>> t.nprocs, t.work_mode
    (4, 'flops')
    """
    index = Path(index)
    files = _rank_files(index)
    sizes, source = datatype_table()
    columns = _read_ranks(index, files, host_speed, sizes, source)
    return _assemble(index, columns, files, host_speed, source, grid=grid, clock=clock, app=app,
                     workload=workload)


def _rank_files(index: Path) -> list[Path]:
    if not index.exists():
        raise TraceFormatError(f"{index}: no such SimGrid trace index")
    files = [Path(x.strip()) for x in index.read_text().splitlines() if x.strip()]
    return [f if f.is_absolute() else index.parent / f for f in files]


#: Dtypes of the imported event columns.
_TI_DTYPES = {"rank": np.int32, "seq": np.int64, "op": np.uint8, "peer": np.int32,
              "recv_peer": np.int32, "root": np.int32, "tag": np.int32, "comm": np.int32,
              "aux": np.int32, "bytes": np.int64, "recv_bytes": np.int64, "req": np.int64,
              "t_comp": np.float64}
#: The sigex op of each action of ``_tiparse.c`` (its enum order).
_TIPARSE_OPS = ("Init", "Finalize", "Send", "Isend", "Ssend", "Issend", "Bsend", "Ibsend", "Recv",
                "Irecv", "Sendrecv", "Wait", "Test", "Waitall", "Waitany", "Testall", "Testany",
                "Testsome", "Barrier", "Bcast", "Reduce", "Allreduce", "Scan", "Exscan", "Alltoall",
                "Allgather", "Gather", "Scatter")
_TIPARSE_OPS += tuple("I" + n[0].lower() + n[1:] for n in _TIPARSE_OPS[-10:])


#: The arrays of ``ti_file``, in its order.
_TIPARSE_ARRAYS = ("op", "peer", "recv_peer", "root", "tag", "comm", "aux", "seq", "bytes",
                   "recv_bytes", "req", "line", "t_comp", "c_wait", "c_req", "c_post", "wild", "pend")


class _TIFile(ctypes.Structure):
    """``ti_file`` of ``_tiparse.c``: one rank file's bytes in, its columns out."""

    _fields_ = [("buf", ctypes.c_void_p), ("len", ctypes.c_int64), ("rank", ctypes.c_int64),
                ("P", ctypes.c_int64), ("cap", ctypes.c_int64), ("n_sizes", ctypes.c_int64),
                ("host_speed", ctypes.c_double), ("sizes", ctypes.c_void_p),
                ("opcode", ctypes.c_void_p)] + [
        (n, ctypes.c_void_p) for n in _TIPARSE_ARRAYS] + [
        (n, ctypes.c_int64) for n in ("n_events", "n_completions", "n_wild", "fail_line")]


def _read_ranks(index: Path, files: list[Path], host_speed: float, sizes: dict, source: str) -> dict:
    """Every rank file's events, in rank order, in one set of columns (no per-file copies):
    the event columns less ``rank``, ``line`` (of each event in its file), ``counts`` (events
    per rank), ``comp`` (completions: rank, wait event, request, posting event; event indices
    of the whole trace), ``wild`` (receives from MPI_UNDEFINED) and ``lists`` (tuples of the
    Python reader).

    ``_tiparse.c`` reads a file in one pass when it can; a file it gives up on (an action it
    leaves to Python, or any error) is read by :class:`_TIReader`, which imports it or raises
    the error naming the file and line. ``reader`` says which read each file."""
    from . import _kernel

    P = len(files)
    lib = _kernel.tiparse()
    data = []
    for f in files:  # a missing file is reported when its turn comes, after the earlier files
        if not f.exists():
            break
        data.append(f.read_bytes())
    caps = [d.count(b"\n") + 1 for d in data]
    cap = sum(caps)
    cols = {c: np.empty(cap, _TI_DTYPES[c]) for c in _TI_DTYPES if c != "rank"}
    line = np.empty(cap, np.int64)
    comp_parts, wild_parts, lists, counts, readers = [], [], [], [], []
    if lib is not None:
        table = np.full(max(sizes) + 1 if sizes else 1, -1, np.int64)
        for code, (_, size) in sizes.items():
            if code >= 0:
                table[code] = size
        opcode = np.array([OP_CODE[n] for n in _TIPARSE_OPS], np.int64)
        most = max(caps, default=1)
        scratch = {n: np.empty(most, np.int64) for n in ("c_wait", "c_req", "c_post", "wild")}
        scratch["pend"] = np.empty(6 * most, np.int64)
    at = 0
    for r, f in enumerate(files):
        if r == len(data):
            raise TraceFormatError(f"{index}: rank file {f} is missing")
        if lib is not None:
            buf = np.frombuffer(data[r], np.uint8) if data[r] else np.zeros(1, np.uint8)
            arrays = {**{c: v[at:] for c, v in cols.items()}, "line": line[at:], **scratch}
            F = _TIFile(buf.ctypes.data, len(data[r]), r, P, caps[r], len(table), float(host_speed),
                        table.ctypes.data, opcode.ctypes.data,
                        *(arrays[n].ctypes.data for n in _TIPARSE_ARRAYS))
            if lib.sigex_ti_parse(ctypes.byref(F)) == 0:
                n, nc = F.n_events, F.n_completions
                comp_parts.append(np.stack([np.full(nc, r, np.int64), scratch["c_wait"][:nc] + at,
                                            scratch["c_req"][:nc], scratch["c_post"][:nc] + at], 1))
                wild_parts.append(scratch["wild"][:F.n_wild] + at)
                counts.append(n)
                readers.append("c")
                at += n
                data[r] = b""
                continue
        reader = _TIReader(P, host_speed, sizes, source)
        reader.read(r, f)
        n = len(reader.line)
        data[r] = b""
        for c, v in reader.cols.items():
            if c != "rank":
                cols[c][at:at + n] = np.asarray(v, _TI_DTYPES[c])
        line[at:at + n] = reader.line
        comp = np.asarray(reader.completions, np.int64).reshape(-1, 4)
        comp[:, 1] += at
        comp[:, 3] += at
        comp_parts.append(comp)
        wild_parts.append(np.asarray(reader.wild, np.int64) + at)
        lists += reader.lists
        counts.append(n)
        readers.append("python")
        at += n
    return {"cols": {c: v[:at] for c, v in cols.items()}, "line": line[:at], "counts": counts,
            "comp": np.concatenate(comp_parts) if comp_parts else np.zeros((0, 4), np.int64),
            "wild": np.concatenate(wild_parts) if wild_parts else np.zeros(0, np.int64),
            "lists": lists, "reader": readers}


def _assemble(index: Path, read: dict, files: list[Path], host_speed: float, source: str,
              *, grid, clock, app, workload) -> Trace:
    """The trace of the rank files read by :func:`_read_ranks`: wildcard receives resolved,
    collectives checked across ranks, completions and lists in sigex's tables."""
    P = len(files)
    counts = read["counts"]
    off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    events = {"rank": np.repeat(np.arange(P, dtype=np.int32), counts), **read["cols"]}
    line = read["line"]

    def where(e: int) -> str:
        return f"{files[int(events['rank'][e])]}:{int(line[e])}"

    _resolve_wildcards(events, read["wild"], where)
    _check_collectives(events, P, where)
    events = {c: events[c] for c in _TI_DTYPES}
    events["t_cpu"] = events["t_comp"].copy()
    comp = read["comp"]
    post = comp[:, 3]
    is_recv = np.isin(events["op"][post], [OP_CODE[o] for o in _RECV_OPS])
    completions = {"rank": comp[:, 0].astype(np.int32), "seq": events["seq"][comp[:, 1]],
                   "req": comp[:, 2].copy(),
                   "bytes": np.where(is_recv & (events["peer"][post] >= 0), events["recv_bytes"][post], 0),
                   "peer": np.where(is_recv, events["peer"][post], -1).astype(np.int32),
                   "tag": events["tag"][post].astype(np.int32)}
    return _finish(index, events, off, completions, read["lists"], host_speed=host_speed, source=source,
                   grid=grid, clock=clock, app=app, workload=workload)


def _assign_sources(sends: dict[tuple[int, int], int], named: list[tuple[int, int]],
                    tags: list[int], sendrecv: list[bool]) -> tuple[dict[int, int], dict]:
    """One destination's wildcard receives (their ``tags``, and whether each is a Sendrecv)
    given the sends to it by (source, tag) and its receives that name a source: the source
    of each wildcard receive by position, where the sends left over decide it (all of them
    from one rank, as many as the receives; else the same per tag when every tag is known),
    or {}; and the sends left over, for the error."""
    left = dict(sends)
    wild_tags = set(tags)
    tags_known = True
    # receives with a tag first; a receive without one (MPI_ANY_TAG, Sendrecv) takes a
    # message with a tag no wildcard receive wants if there is one
    for s_, t in sorted(named, key=lambda x: x[1] < 0):
        order = [(s_, t), (s_, -1)] if t >= 0 else (
            [(s_, -1)] + sorted((k for k, n in left.items() if k[0] == s_ and n > 0),
                                key=lambda k: (k[1] in wild_tags, k[1])))
        for k in order:
            if left.get(k, 0) > 0:
                left[k] -= 1
                tags_known &= not (t < 0 and k[1] in wild_tags)
                break
    left = {k: n for k, n in left.items() if n > 0}
    src = _one_source({k[0] for k in left}, sum(left.values()), len(tags))
    if src is not None:
        return dict.fromkeys(range(len(tags)), src), left
    if not (tags_known and all(k[1] >= 0 for k in left)
            and not any(sendrecv) and all(t >= 0 for t in tags)):
        return {}, left
    assign: dict[int, int] = {}
    for t in set(tags):
        group = [i for i, ti in enumerate(tags) if ti == t]
        mine = {k: n for k, n in left.items() if k[1] == t}
        one = _one_source({k[0] for k in mine}, sum(mine.values()), len(group))
        if one is None:
            return {}, left
        assign.update(dict.fromkeys(group, one))
    return assign, left


def _resolve_wildcards(c: dict[str, np.ndarray], wild: np.ndarray, where) -> None:
    """:meth:`_TIReader.resolve_wildcards` over the assembled columns (in place): the
    sends and named receives are counted with whole-column operations, the rest is the
    same per destination."""
    if not len(wild):
        return
    sendrecv = OP_CODE["Sendrecv"]
    op, rank, peer = c["op"], c["rank"], c["peer"]
    is_sr = op == sendrecv
    tag = np.where(is_sr, -1, c["tag"]).astype(np.int64)
    dsts = np.unique(rank[wild])
    send_ops = np.isin(op, [OP_CODE[n] for n in _SEND_OPS]) | is_sr
    s = np.flatnonzero(send_ops & (peer >= 0) & np.isin(peer, dsts))
    sends: dict[int, dict[tuple[int, int], int]] = {}
    if len(s):
        keys, n = np.unique(np.stack([peer[s].astype(np.int64), rank[s].astype(np.int64), tag[s]]),
                            axis=1, return_counts=True)
        for d, src, t, k in zip(*keys.tolist(), n.tolist()):
            sends.setdefault(d, {})[(src, t)] = k
    src_col = np.where(is_sr, c["recv_peer"], peer)
    recv_ops = np.isin(op, [OP_CODE[n] for n in _RECV_OPS]) | is_sr
    q = np.flatnonzero(recv_ops & (src_col >= 0) & np.isin(rank, dsts))
    named: dict[int, list[tuple[int, int]]] = {}
    for d, src, t in zip(rank[q].tolist(), src_col[q].tolist(), tag[q].tolist()):
        named.setdefault(d, []).append((src, t))
    w_rank, w_op, w_tag = rank[wild].tolist(), op[wild].tolist(), c["tag"][wild].tolist()
    by_dst: dict[int, list[int]] = {}
    for i, d in enumerate(w_rank):
        by_dst.setdefault(d, []).append(i)
    for d, events in by_dst.items():
        assign, left = _assign_sources(sends.get(d, {}), named.get(d, []),
                                       [w_tag[i] for i in events],
                                       [w_op[i] == sendrecv for i in events])
        assign = {events[i]: src for i, src in assign.items()}
        if len(assign) != len(events):
            raise TraceFormatError(
                f"{where(int(wild[events[0]]))}: receive from MPI_ANY_SOURCE or MPI_PROC_NULL "
                f"(SimGrid writes -333 for both): rank {d} has {len(events)} such receives and "
                f"{sum(left.values())} sends from ranks {sorted({k[0] for k in left})} that no "
                "other receive takes; the TI trace does not record which receive got which")
        for i, src in assign.items():
            c["recv_peer" if w_op[i] == sendrecv else "peer"][int(wild[i])] = src


def _check_collectives(c: dict[str, np.ndarray], P: int, where) -> None:
    """:meth:`_TIReader.check_collectives` over the assembled columns: every rank's
    collectives compared with rank 0's in one pass per rank."""
    op, root = c["op"], c["root"]
    ce = np.flatnonzero(np.isin(op, [OP_CODE[n] for n in _COLLECTIVE_NAMES]))
    bounds = np.searchsorted(c["rank"][ce], np.arange(P + 1))
    first = ce[bounds[0]:bounds[1]]
    for r in range(1, P):
        mine = ce[bounds[r]:bounds[r + 1]]
        m = min(len(mine), len(first))
        bad = np.flatnonzero((op[first[:m]] != op[mine[:m]]) | (root[first[:m]] != root[mine[:m]]))
        if bad.size:
            k = int(bad[0])
            e0, e = int(first[k]), int(mine[k])
            raise TraceFormatError(
                f"{where(e)}: collective {k} of rank {r} is {OPS[op[e]]} (root "
                f"{int(root[e])}) but rank 0's is {OPS[op[e0]]} (root {int(root[e0])}) at "
                f"{where(e0)}. SimGrid's TI trace records no communicator: collectives on "
                "sub-communicators (MPI_Comm_split, MPI_Cart_sub) cannot be imported")
        if len(mine) != len(first):
            e = int((mine if len(mine) > len(first) else first)[m])
            raise TraceFormatError(
                f"{where(e)}: rank {r} calls {len(mine)} collectives and rank 0 "
                f"{len(first)}. SimGrid's TI trace records no communicator: collectives on "
                "sub-communicators (MPI_Comm_split, MPI_Cart_sub) cannot be imported")


def _finish(index: Path, events: dict[str, np.ndarray], off, completions: dict[str, np.ndarray],
            list_rows: list, *, host_speed: float, source: str, grid, clock, app, workload) -> Trace:
    """The imported :class:`Trace` from its event and completion columns: the lists (rows of
    ``(rank, seq, kind, values)``), the metadata, the world (and the ``grid``'s Cartesian
    communicator), checked, and stamped with ``clock``'s times where one is given."""
    P = len(off) - 1
    values = [v for *_, per in list_rows for v in per]
    lengths = np.array([len(per) for *_, per in list_rows], np.int64)
    lists = {"rank": np.array([x[0] for x in list_rows], np.int64),
             "seq": np.array([x[1] for x in list_rows], np.int64),
             "kind": np.array([x[2] for x in list_rows], np.int64),
             "start": np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64),
             "length": lengths, "values": np.asarray(values, np.int64)}
    meta = {"nprocs": P, "complete": True, "work_mode": "flops", "trace_kind": "captured",
            "app": app or index.parent.name, "source": f"SimGrid TI trace {index}",
            "host_speed": host_speed, "datatypes": source}
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
                  completions=completions, lists=lists, comms=comms, path=index)
    trace.validate()
    if clock is not None:
        _stamp(trace, clock)
    return trace


def _import_ti_reference(index: str | Path, *, host_speed: float = HOST_SPEED,
                         grid: tuple[tuple[int, ...], tuple[bool, ...]] | None = None,
                         clock: Machine | None = None, app: str | None = None,
                         workload: tuple[str, str] | None = None) -> Trace:
    """:func:`import_ti` reading every line with :class:`_TIReader` (in Python, one line at
    a time): the reference the bulk reader must equal, kept for the tests."""
    index = Path(index)
    if not index.exists():
        raise TraceFormatError(f"{index}: no such SimGrid trace index")
    files = [Path(x.strip()) for x in index.read_text().splitlines() if x.strip()]
    files = [f if f.is_absolute() else index.parent / f for f in files]
    sizes, source = datatype_table()
    P = len(files)
    reader = _TIReader(P, host_speed, sizes, source)
    off = [0]
    for r, f in enumerate(files):
        if not f.exists():
            raise TraceFormatError(f"{index}: rank file {f} is missing")
        reader.read(r, f)
        off.append(len(reader.line))
    reader.resolve_wildcards()
    reader.check_collectives()
    cols = reader.cols
    dtypes = {"rank": np.int32, "seq": np.int64, "op": np.uint8, "peer": np.int32, "recv_peer": np.int32,
              "root": np.int32, "tag": np.int32, "comm": np.int32, "aux": np.int32, "bytes": np.int64,
              "recv_bytes": np.int64, "req": np.int64, "t_comp": np.float64}
    events = {c: np.asarray(v, dtypes[c]) for c, v in cols.items()}
    events["t_cpu"] = events["t_comp"].copy()
    comp = np.asarray(reader.completions, np.int64).reshape(-1, 4)
    post = comp[:, 3]
    is_recv = np.isin(events["op"][post], [OP_CODE[o] for o in _RECV_OPS])
    completions = {"rank": comp[:, 0].astype(np.int32), "seq": comp[:, 1], "req": comp[:, 2],
                   "bytes": np.where(is_recv & (events["peer"][post] >= 0), events["recv_bytes"][post], 0),
                   "peer": np.where(is_recv, events["peer"][post], -1).astype(np.int32),
                   "tag": events["tag"][post].astype(np.int32)}
    return _finish(index, events, off, completions, reader.lists, host_speed=host_speed, source=source,
                   grid=grid, clock=clock, app=app, workload=workload)




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
