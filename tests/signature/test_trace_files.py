"""HDF5 trace files: round trip, atomic writes, crashed runs, foreign and damaged files."""

from __future__ import annotations

import hashlib

import h5py
import numpy as np
import pytest

from conftest import needs_mpi
from signature import (IncompleteTraceError, TraceFormatError, load_trace, trace_run,
                       write_trace)
from signature.trace import COMPLETION_COLUMNS, COUNTER_COLUMNS, EVENT_COLUMNS, OP_CODE, CommTable, Trace

RING = """
    import sys
    from mpi4py import MPI
    import numpy as np
    comm = MPI.COMM_WORLD
    r, P = comm.rank, comm.size
    iters = int(sys.argv[1]); crash_at = int(sys.argv[2])
    a = np.arange(64, dtype=np.float64); b = np.empty_like(a)
    for i in range(iters):
        if i == crash_at and r == 1:
            import os; os._exit(7)          # dies without flushing or finalizing
        comm.Sendrecv(a, dest=(r + 1) % P, recvbuf=b, source=(r - 1) % P)
        comm.Allreduce(MPI.IN_PLACE, a[:1])
"""


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@needs_mpi
def test_round_trip_keeps_every_column(run_traced, tmp_path):
    """A trace written and read back has identical columns, side tables and metadata."""
    t = run_traced(RING, 3, 5, -1, name="ring").trace
    copy = write_trace(t, tmp_path / "copy.h5")
    u = load_trace(copy)
    assert set(u.events) == set(t.events)
    for col in t.events:
        np.testing.assert_array_equal(u.events[col], t.events[col], err_msg=col)
    for col in t.completions:
        np.testing.assert_array_equal(u.completions[col], t.completions[col])
    np.testing.assert_array_equal(u.rank_offsets, t.rank_offsets)
    assert u.meta["command"] == t.meta["command"]
    assert u.meta["nprocs"] == 3 and u.complete
    # 5 iterations x (Sendrecv + Allreduce) + Init + Finalize per rank
    assert list(np.diff(u.rank_offsets)) == [12, 12, 12]


@needs_mpi
def test_crashed_run_gives_an_incomplete_file_the_reader_refuses(run_traced):
    """A rank that dies mid-run leaves a trace marked incomplete, refused unless asked."""
    res = run_traced(RING, 3, 20, 2, name="crash", expect_ok=False)
    assert res.returncode != 0
    assert res.path.exists()
    assert not res.trace.complete
    assert "rank 1" in res.trace.meta["incomplete_reason"]
    with pytest.raises(IncompleteTraceError, match=r"crash-\d+/P3\.h5: the traced run did not "
                       r"finish .*rank 1.*--allow-incomplete"):
        load_trace(res.path)
    t = load_trace(res.path, allow_incomplete=True)
    assert t.nprocs == 3
    # nothing recorded is lost: rank 1 made Init + 2 x (Sendrecv, Allreduce) before dying,
    # and the ranks the launcher killed keep what they recorded too
    ev1 = t.rank_events(1)
    assert [t.op_name(o) for o in ev1["op"]] == ["Init", "Sendrecv", "Allreduce", "Sendrecv", "Allreduce"]
    assert all(len(t.rank_events(r)["op"]) >= 4 for r in (0, 2))


def test_missing_file_is_named(tmp_path):
    """A missing trace is reported with its path."""
    with pytest.raises(TraceFormatError, match="nope.h5: no such trace file"):
        load_trace(tmp_path / "nope.h5")


def test_foreign_hdf5_is_refused_and_left_alone(tmp_path):
    """An HDF5 file that is not a sigex trace is named, refused, and not modified."""
    p = tmp_path / "other.h5"
    with h5py.File(p, "w") as f:
        f["data"] = np.arange(10)
    before = _digest(p)
    with pytest.raises(TraceFormatError, match="other.h5: HDF5 file but not a sigex trace"):
        load_trace(p)
    assert _digest(p) == before


def test_non_hdf5_file_is_refused(tmp_path):
    """A text file given as a trace is reported as unreadable HDF5."""
    p = tmp_path / "notes.h5"
    p.write_text("not a trace\n")
    with pytest.raises(TraceFormatError, match="notes.h5: not a readable HDF5 file"):
        load_trace(p)


@needs_mpi
def test_truncated_trace_is_refused_and_left_alone(run_traced, tmp_path):
    """A trace cut short (copy interrupted) is refused with its name; the bytes stay as they are."""
    t = run_traced(RING, 2, 50, -1, name="trunc").trace
    data = t.path.read_bytes()
    cut = tmp_path / "cut.h5"
    cut.write_bytes(data[: len(data) // 2])
    before = _digest(cut)
    with pytest.raises(TraceFormatError, match="cut.h5"):
        load_trace(cut)
    assert _digest(cut) == before


@needs_mpi
def test_damaged_index_is_reported_with_the_rank(run_traced, tmp_path):
    """An event table whose rank column disagrees with the index names the event and rank."""
    t = run_traced(RING, 2, 3, -1, name="dmg").trace
    p = write_trace(t, tmp_path / "dmg.h5")
    with h5py.File(p, "r+") as f:
        r = f["events/rank"][()]
        r[2] = 1
        f["events/rank"][...] = r
    with pytest.raises(TraceFormatError, match="dmg.h5: event 2 belongs to rank 1 but sits in rank 0"):
        load_trace(p)


@needs_mpi
def test_existing_trace_is_never_overwritten(run_traced, tmp_path):
    """Tracing onto an existing file refuses before running and leaves the file intact."""
    res = run_traced(RING, 2, 2, -1, name="keep")
    before = _digest(res.path)
    with pytest.raises(FileExistsError, match="already exists.*--force"):
        trace_run(list(res.command), 2, res.path)
    assert _digest(res.path) == before
    # with overwrite the run happens and the file is replaced atomically
    again = trace_run(list(res.command), 2, res.path, overwrite=True)
    assert again.ok and load_trace(res.path).complete


def test_write_refuses_to_overwrite(tmp_path):
    """write_trace keeps an existing file unless overwrite is given."""
    p = tmp_path / "x.h5"
    p.write_bytes(b"precious")
    t = Trace(meta={"nprocs": 1, "complete": True, "work_mode": "cpu-time"},
              events={c: np.zeros(0, d) for c, d in EVENT_COLUMNS.items() if c not in COUNTER_COLUMNS},
              rank_offsets=np.zeros(2, np.int64),
              completions={c: np.zeros(0, d) for c, d in COMPLETION_COLUMNS.items()},
              lists={c: np.zeros(0, np.int64) for c in ("rank", "seq", "kind", "start", "length", "values")},
              comms=CommTable.world_only(1))
    with pytest.raises(FileExistsError):
        write_trace(t, p)
    assert p.read_bytes() == b"precious"
    write_trace(t, p, overwrite=True)
    assert load_trace(p).nprocs == 1
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


@needs_mpi
def test_init_and_finalize_frame_every_rank(run_traced):
    """Every rank's stream starts with Init and ends with Finalize, seq counting from 0."""
    t = run_traced(RING, 3, 2, -1, name="frame").trace
    for r in range(3):
        ev = t.rank_events(r)
        assert ev["op"][0] == OP_CODE["Init"] and ev["op"][-1] == OP_CODE["Finalize"]
        np.testing.assert_array_equal(ev["seq"], np.arange(len(ev["seq"])))
        assert np.all(np.diff(ev["t_start"]) > 0)


@pytest.mark.parametrize("app", ["stencil", "cg", "fft2d"])
def test_reading_some_columns_gives_those_of_the_full_read(app):
    """``columns=`` reads the named event columns (a tuple: the first one the file has) and the
    validated ones, each equal to the full read's, and leaves the others out; side tables whole."""
    from conftest import TRACES
    path = TRACES / app / "P16.h5"
    full = load_trace(path)
    part = load_trace(path, columns=["tag", ("instr", "t_comp", "t_cpu")])
    assert set(part.events) == {"rank", "seq", "op", "peer", "recv_peer", "root", "tag", "t_comp"}
    for c, v in part.events.items():
        assert v.dtype == full.events[c].dtype and np.array_equal(v, full.events[c]), c
    for c in COMPLETION_COLUMNS:
        assert np.array_equal(part.completions[c], full.completions[c])
    assert part.meta == full.meta and np.array_equal(part.rank_offsets, full.rank_offsets)
    with pytest.raises(ValueError, match="unknown event columns \\['t_wall'\\]"):
        load_trace(path, columns=["t_wall"])


@needs_mpi
def test_a_run_too_large_to_assemble_is_refused_with_its_numbers(run_traced, monkeypatch, tmp_path):
    """A run whose raw records need more memory to assemble than the machine has left is
    refused before any is read, naming its events, its ranks and both sizes, and leaves
    no raw files behind (code_saturne at P = 16 wrote 80 M events; the kernel killed the
    assembly at 23.5 GB with no word, and 12 GB of raw files stayed in a hidden folder).
    Where the memory is unknown, it is assembled as before."""
    import signature._memory as memory
    import signature._raw as raw_mod
    from signature import TracerError
    kept = run_traced(RING, 2, 20, -1, name="kept", keep_raw=True)
    raw = kept.path.with_name(kept.path.name + ".raw")
    n = sum(f.stat().st_size for f in raw.glob("rank*.events")) // raw_mod.RAW_EVENT_DTYPE.itemsize
    assert n >= kept.trace.n_events
    monkeypatch.setattr(memory, "available_memory", lambda: 1 << 10)
    with pytest.raises(TracerError, match=rf"{n:,} events over 2 ranks .* this machine has 0\.0 GiB available") as err:
        raw_mod.assemble(raw)
    assert "Trace a shorter run" in str(err.value)
    with pytest.raises(TracerError, match="events over 2 ranks"):
        run_traced(RING, 2, 20, -1, name="refused")
    out = tmp_path / "refused-2"
    assert not list(out.iterdir()), "no trace file and no raw files are left"
    monkeypatch.setattr(memory, "available_memory", lambda: None)
    assert raw_mod.assemble(raw).n_events == kept.trace.n_events
