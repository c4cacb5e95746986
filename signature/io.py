"""HDF5 trace files: the one on-disk form of a :class:`~signature.trace.Trace`.

Layout (format ``sigex-trace``, version 1; ``docs/trace-format.md`` is the
reference): root attributes hold the metadata; ``/events`` holds one dataset
per column, sorted by (rank, seq); ``/index/rank_offsets`` the per-rank
offsets; ``/completions``, ``/lists`` and ``/comms`` the side tables.

Files are written atomically: to a temporary file in the target directory,
then renamed over the target, so that a reader never sees half a file. An
existing file is never replaced unless ``overwrite=True``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ._files import publish
from .errors import IncompleteTraceError, TraceFormatError
from .trace import (COMPLETION_COLUMNS, EVENT_COLUMNS, OPS, OPTIONAL_COLUMNS,
                    RUN_ONLY_COLUMNS, CommTable, Trace)

__all__ = ["read_trace", "read_trace_ranks", "read_event_columns", "read_rank_block_into", "CHECKED_COLUMNS", "write_trace", "load_trace", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "sigex-trace"
FORMAT_VERSION = 1

#: Metadata keys stored as JSON (everything else is a scalar attribute).
_JSON_META = ("command", "hosts", "phase_weights", "phase_kinds", "phase_patterns", "phase_ids",
              "phases_left_out", "unmodelled_calls")
_LIST_COLUMNS = ("rank", "seq", "kind", "start", "length")
_COMM_COLUMNS = ("size", "inter", "member_offsets", "members", "cart_offsets",
                 "cart_dims", "cart_periods")


def _dataset(group: h5py.Group, name: str, data: np.ndarray) -> None:
    data = np.ascontiguousarray(data)
    if data.size >= 4096:
        group.create_dataset(name, data=data, compression="gzip", compression_opts=4,
                             shuffle=True, chunks=(min(len(data), 1 << 16),))
    else:
        group.create_dataset(name, data=data)


def write_trace(trace: Trace, path: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``trace`` to ``path`` atomically.

    Parameters
    ----------
    trace : Trace
    path : str or Path
        Target file; its directory must exist.
    overwrite : bool
        Replace an existing file. Without it an existing file is an error and
        stays as it was.

    Returns
    -------
    Path
        The written file.

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is false.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; pass overwrite=True (--force) to replace it")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"{path.parent} is not a directory")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["format"] = FORMAT_NAME
            f.attrs["format_version"] = FORMAT_VERSION
            for key, value in trace.meta.items():
                if value is None:
                    continue
                if key in _JSON_META:
                    f.attrs[key] = json.dumps(value)
                else:
                    f.attrs[key] = value
            ev = f.create_group("events")
            ev.attrs["op_names"] = json.dumps(list(OPS))
            ev.attrs["region_names"] = json.dumps(list(trace.regions))
            for col in EVENT_COLUMNS:
                if col in trace.events:
                    _dataset(ev, col, trace.events[col].astype(EVENT_COLUMNS[col], copy=False))
            f.create_group("index").create_dataset("rank_offsets", data=trace.rank_offsets.astype(np.int64))
            comp = f.create_group("completions")
            for col in COMPLETION_COLUMNS:
                _dataset(comp, col, trace.completions[col].astype(COMPLETION_COLUMNS[col], copy=False))
            lists = f.create_group("lists")
            for col in _LIST_COLUMNS + ("values",):
                _dataset(lists, col, trace.lists[col])
            comms = f.create_group("comms")
            for col in _COMM_COLUMNS:
                comms.create_dataset(col, data=getattr(trace.comms, col))
        publish(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    trace.path = path
    return path


def _attr(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:200]


def _damaged(path: Path, err: BaseException) -> TraceFormatError:
    return TraceFormatError(f"{path}: damaged sigex trace ({type(err).__name__}: {_first_line(err)}); "
                            "copy it again or re-run `sigex trace` to make it again")


#: Event columns every read includes: :meth:`Trace.validate` checks them.
_VALIDATED = ("rank", "seq", "op", "peer", "recv_peer", "root")
#: the event columns :func:`read_trace_ranks` always reads (the trace's checks need them)
CHECKED_COLUMNS = _VALIDATED


def _wanted(columns, present) -> list[str]:
    """The event columns to read: every column of the file, or those of ``columns`` (an
    entry that is a tuple of names stands for the first of them the file has) and the
    validated ones, in the file's column order."""
    if columns is None:
        return [c for c in EVENT_COLUMNS if c in present]
    want = set(_VALIDATED)
    for c in columns:
        alternatives = (c,) if isinstance(c, str) else tuple(c)
        have = [a for a in alternatives if a in present]
        want.add(have[0] if have else alternatives[0])
    return [c for c in EVENT_COLUMNS if c in want]


def _read_dataset(group: h5py.Group, name: str) -> np.ndarray:
    """A whole dataset through h5py's low-level interface: one open and one read into a new
    array (the high-level ``group[name][()]`` costs as much again on small tables)."""
    d = h5py.h5d.open(group.id, name.encode())
    out = np.empty(d.shape, d.dtype)
    if out.size:
        d.read(h5py.h5s.ALL, h5py.h5s.ALL, out)
    return out


def _read_group(f: h5py.File, group: str, names) -> dict[str, np.ndarray]:
    g = f[group]
    return {n: _read_dataset(g, n) for n in names}


def _open(path: Path) -> h5py.File:
    """The trace file opened for reading, or a TraceFormatError saying why not."""
    if not path.exists():
        raise TraceFormatError(f"{path}: no such trace file")
    if path.is_dir():
        raise TraceFormatError(f"{path} is a folder, not a trace file; name one of its *.h5 files")
    try:
        f = h5py.File(path, "r")
    except (OSError, RuntimeError, ValueError) as err:
        raise TraceFormatError(f"{path}: not a readable HDF5 file ({_first_line(err)}); is it truncated "
                               "or not a trace? Re-run `sigex trace` to make it again") from err
    return f


def _our_ops(op: np.ndarray, names: list[str], path: Path) -> np.ndarray:
    """Operation codes of a file written by a sigex with another operation list (``names``)
    translated to ours; the same array where the lists agree."""
    if names == list(OPS[:len(names)]):
        return op
    unknown = sorted(set(names) - set(OPS))
    if unknown:
        raise TraceFormatError(f"{path}: unknown MPI operations {unknown}; upgrade sigex")
    lut = np.array([OPS.index(n) if n in OPS else 0 for n in names], np.uint8)
    return lut[op]


def _header(f: h5py.File, path: Path, allow_incomplete: bool) -> dict:
    """The metadata of an open trace file, after checking that it is a sigex trace of a
    format this sigex reads and, unless ``allow_incomplete``, of a run that finished."""
    fmt = _attr(f.attrs.get("format"))
    if fmt != FORMAT_NAME:
        raise TraceFormatError(f"{path}: HDF5 file but not a sigex trace (format attribute "
                               f"{fmt!r}); make traces with `sigex trace`")
    version = int(_attr(f.attrs.get("format_version", 0)))
    if version > FORMAT_VERSION:
        raise TraceFormatError(f"{path}: trace format version {version} is newer than this "
                               f"sigex reads ({FORMAT_VERSION}); upgrade sigex")
    meta = {k: _attr(v) for k, v in f.attrs.items() if k not in ("format", "format_version")}
    for key in _JSON_META:
        if key in meta:
            meta[key] = json.loads(meta[key])
    if not meta.get("complete", False) and not allow_incomplete:
        raise IncompleteTraceError(
            f"{path}: the traced run did not finish ({meta.get('incomplete_reason', 'no reason recorded')}). "
            "Re-run `sigex trace`, or pass --allow-incomplete (allow_incomplete=True) "
            "to read the events it recorded")
    return meta


def _read_open(f: h5py.File, path: Path, allow_incomplete: bool, columns=None):
    """The columns and metadata of an open trace file (read_trace turns every low-level
    failure into one TraceFormatError)."""
    meta = _header(f, path, allow_incomplete)
    try:
        names = json.loads(_attr(f["events"].attrs["op_names"]))
        regions = tuple(json.loads(_attr(f["events"].attrs.get("region_names", "[]"))))
        present = set(f["events"].keys())
        optional = OPTIONAL_COLUMNS
        if meta.get("trace_kind") in ("logical", "physical"):  # generated, not run
            optional += RUN_ONLY_COLUMNS
        wanted = _wanted(columns, present)
        missing = [c for c in (EVENT_COLUMNS if columns is None else wanted)
                   if c not in present and c not in optional]
        if missing:
            raise TraceFormatError(f"{path}: event columns missing: {', '.join(missing)}")
        events = _read_group(f, "events", [c for c in wanted if c in present])
        rank_offsets = _read_dataset(f["index"], "rank_offsets")
        completions = _read_group(f, "completions", COMPLETION_COLUMNS)
        lists = _read_group(f, "lists", _LIST_COLUMNS + ("values",))
        comms = CommTable(**_read_group(f, "comms", _COMM_COLUMNS))
    except KeyError as err:
        raise TraceFormatError(f"{path}: damaged sigex trace, missing {err}; copy it again or re-run "
                               "`sigex trace`") from err
    return names, regions, meta, events, rank_offsets, completions, lists, comms


def read_trace(path: str | Path, *, allow_incomplete: bool = False, columns=None) -> Trace:
    """Read a trace file written by sigex.

    Parameters
    ----------
    path : str or Path
    allow_incomplete : bool
        Accept a trace of a run that crashed or was killed (its events stop
        where each rank's tracer last flushed).
    columns : sequence of str, optional
        Read only these event columns (and those the validation checks: rank, seq, op,
        peer, recv_peer, root); an entry that is a tuple of names reads the first of them
        the file has. The replay needs :data:`replay.program.TRACE_COLUMNS` only, a third
        to a half of a captured trace's bytes. Default: every column.

    Raises
    ------
    TraceFormatError
        The file is missing, not HDF5, not a sigex trace, of a newer format,
        or internally inconsistent.
    IncompleteTraceError
        The run did not finish and ``allow_incomplete`` is false.

    Examples
    --------
    >>> t = read_trace("traces/stencil/P4.h5")          # doctest: +SKIP
    >>> t.nprocs, t.work_mode
    (4, 'cpu-time')
    """
    path = Path(path)
    if columns is not None:
        unknown = [a for c in columns for a in ((c,) if isinstance(c, str) else c)
                   if a not in EVENT_COLUMNS]
        if unknown:
            raise ValueError(f"unknown event columns {unknown}; known: {', '.join(EVENT_COLUMNS)}")
    f = _open(path)
    try:
        with f:
            names, regions, meta, events, rank_offsets, completions, lists, comms = _read_open(
                f, path, allow_incomplete, columns)
    except TraceFormatError:
        raise
    except (OSError, RuntimeError, KeyError, ValueError, TypeError, IndexError) as err:
        # HDF5 reports a damaged file from wherever it notices: attribute iteration ("integer
        # offset out of bounds"), link lookups, chunk decompression, JSON attributes that no
        # longer parse. Every one of them means the same thing to the user.
        raise _damaged(path, err) from err
    try:
        events["op"] = _our_ops(events["op"], names, path)
        trace = Trace(meta=meta, events=events, rank_offsets=rank_offsets,
                      completions=completions, lists=lists, comms=comms, path=path, regions=regions)
        trace.validate()
    except TraceFormatError:
        raise
    except (KeyError, ValueError, TypeError, IndexError) as err:  # columns of the wrong shape or type
        raise _damaged(path, err) from err
    return trace


def load_trace(path: str | Path, *, allow_incomplete: bool = False, columns=None) -> Trace:
    """Load a trace into numpy arrays (the library entry point for ``sigex show``).

    Same as :meth:`Trace.from_hdf5`; see :func:`read_trace`.
    """
    return read_trace(path, allow_incomplete=allow_incomplete, columns=columns)


def _rows_of_ranks(group: h5py.Group, lo: int, hi: int) -> slice | np.ndarray:
    """Rows of a side table (``/completions``, ``/lists``) whose ``rank`` is in lo..hi-1: a
    slice when the table is sorted by rank (as sigex writes it), else an index array."""
    if hi <= lo:
        return slice(0, 0)  # no ranks (the index and metadata alone): nothing to look up
    ranks = group["rank"][()]
    if not len(ranks) or bool(np.all(ranks[1:] >= ranks[:-1])):
        a, b = np.searchsorted(ranks, [lo, hi])
        return slice(int(a), int(b))
    return np.flatnonzero((ranks >= lo) & (ranks < hi))


def read_event_columns(path: str | Path, names, *, allow_incomplete: bool = False
                       ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The per-rank offset index and a few event columns of every rank, unchecked: a quick
    look at a trace (the replay's workers read ``op``, ``peer`` and ``recv_peer`` to judge
    whether splitting it pays). ``op`` is in this sigex's operation codes.

    Raises
    ------
    TraceFormatError, IncompleteTraceError
        As :func:`read_trace`; also when a column is missing.
    """
    path = Path(path)
    f = _open(path)
    try:
        with f:
            _header(f, path, allow_incomplete)
            present = set(f["events"].keys())
            missing = [n for n in names if n not in present]
            if missing:
                raise TraceFormatError(f"{path}: event columns missing: {', '.join(missing)}")
            cols = _read_group(f, "events", names)
            if "op" in cols:
                cols["op"] = _our_ops(cols["op"], json.loads(_attr(f["events"].attrs["op_names"])), path)
            return _read_dataset(f["index"], "rank_offsets").astype(np.int64), cols
    except (TraceFormatError, IncompleteTraceError):
        raise
    except (OSError, RuntimeError, KeyError, ValueError, TypeError, IndexError) as err:
        raise _damaged(path, err) from err


def read_trace_ranks(path: str | Path, lo: int, hi: int, *, columns=None,
                     allow_incomplete: bool = False, completion_columns=None) -> Trace:
    """Read only the events of ranks ``lo..hi-1`` of a trace file, through its per-rank
    offset index (``/index/rank_offsets``): what one replay worker of several needs.

    The result is a :class:`Trace` of all P ranks in which the other ranks have no
    events (their ``rank_offsets`` ranges are empty); ``/completions`` and ``/lists``
    hold the rows of ranks lo..hi-1, ``/comms`` is whole. ``meta["rank_block"]`` is
    ``[lo, hi]`` and ``meta["n_events_total"]`` the events of all ranks. ``columns``:
    the event columns to read (default all); those the trace's checks need (rank, seq,
    op, peer, recv_peer, root) are always read. ``completion_columns``: the
    ``/completions`` columns to read (default all; ``rank`` is always read).

    Raises
    ------
    TraceFormatError, IncompleteTraceError
        As :func:`read_trace`; also when lo..hi is not a range of the trace's ranks.

    Examples
    --------
    >>> t = read_trace_ranks("traces/stencil/P16.h5", 4, 8)     # doctest: +SKIP
    >>> t.nprocs, int(t.rank_offsets[4]), t.n_events > 0
    (16, 0, True)
    """
    path = Path(path)
    f = _open(path)
    try:
        with f:
            meta = _header(f, path, allow_incomplete)
            ro = f["index/rank_offsets"][()].astype(np.int64)
            P = len(ro) - 1
            if not 0 <= lo <= hi <= P:
                raise TraceFormatError(f"{path}: ranks {lo}..{hi - 1} asked for, the trace has {P}")
            a, b = int(ro[lo]), int(ro[hi])
            names = json.loads(_attr(f["events"].attrs["op_names"]))
            regions = tuple(json.loads(_attr(f["events"].attrs.get("region_names", "[]"))))
            want = [c for c in EVENT_COLUMNS if c in f["events"]
                    and (columns is None or c in columns or c in _VALIDATED)]
            events = {c: f["events"][c][a:b] for c in want}
            rows = _rows_of_ranks(f["completions"], lo, hi)
            completions = {c: f["completions"][c][()][rows] if not isinstance(rows, slice)
                           else f["completions"][c][rows] for c in COMPLETION_COLUMNS
                           if completion_columns is None or c in completion_columns or c == "rank"}
            rows = _rows_of_ranks(f["lists"], lo, hi)
            lists = {c: f["lists"][c][()][rows] if not isinstance(rows, slice)
                     else f["lists"][c][rows] for c in _LIST_COLUMNS}
            # (the rows' start offsets index the file's whole values array)
            lists["values"] = f["lists"]["values"][()] if hi > lo else np.zeros(0, np.int64)
            comms = CommTable(**{c: f["comms"][c][()] for c in _COMM_COLUMNS})
    except (TraceFormatError, IncompleteTraceError):
        raise
    except (OSError, RuntimeError, KeyError, ValueError, TypeError, IndexError) as err:
        raise _damaged(path, err) from err
    events["op"] = _our_ops(events["op"], names, path)
    meta["rank_block"] = [int(lo), int(hi)]
    meta["n_events_total"] = int(ro[-1])
    trace = Trace(meta=meta, events=events, rank_offsets=np.clip(ro - a, 0, b - a),
                  completions=completions, lists=lists, comms=comms, path=path, regions=regions)
    try:
        trace.validate()
    except (KeyError, ValueError, TypeError, IndexError) as err:
        raise _damaged(path, err) from err
    return trace


def read_rank_block_into(path: str | Path, lo: int, hi: int, out: dict[str, np.ndarray]) -> list[str]:
    """Read event columns of ranks ``lo..hi-1`` straight into the arrays ``out`` (column name
    -> a contiguous array of the block's length, e.g. the middle of a larger array that
    will also hold other rows: no copy of the block is made). Returns the columns the file
    does not have (left untouched). Errors as :func:`read_trace_ranks`, which the caller
    has normally called first on the same file."""
    path = Path(path)
    try:
        with h5py.File(path, "r") as f:
            ro = f["index/rank_offsets"]
            a, b = int(ro[lo]), int(ro[hi])
            missing = []
            for col, arr in out.items():
                if col not in f["events"]:
                    missing.append(col)
                    continue
                if arr.shape != (b - a,) or not arr.flags.c_contiguous:
                    raise ValueError(f"column {col}: {arr.shape} array given for {b - a} events")
                if b > a:
                    f["events"][col].read_direct(arr, np.s_[a:b])
            names = json.loads(_attr(f["events"].attrs["op_names"]))
    except (OSError, RuntimeError, KeyError, TypeError, IndexError) as err:
        raise _damaged(path, err) from err
    if "op" in out:
        out["op"][...] = _our_ops(out["op"], names, path)
    return missing
