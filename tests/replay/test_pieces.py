"""Pieces that own their memory: what a piece holds, how two pieces name their crossing
messages, the rank-block read of a trace file, and replays in pieces equal to one piece."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import TRACES
from random_programs import build, random_program
from replay import LogGP, Machine, Program, load, replay
from replay.pieces import extract, piece_bounds, positions_from_counts
from replay.engine import layout_positions
from signature import load_trace
from signature.errors import TraceFormatError
from signature.io import read_trace_ranks


def pieces_of(program: Program, k: int):
    b = piece_bounds(program.nprocs, k)
    return [extract(program, int(b[i]), int(b[i + 1]), b, i) for i in range(k)]


@pytest.fixture(scope="module")
def stencil():
    return Program.from_trace(load_trace(TRACES / "stencil" / "P16.h5"))


def test_a_piece_holds_only_its_ranks_events_messages_and_collectives(stencil):
    """Piece 1 of 2 has ranks 8..15's events (the same columns), only messages they send or
    receive, only collective instances they enter, and about half the program's bytes."""
    p = stencil
    pc = pieces_of(p, 2)[1]
    q = pc.program
    a, b = int(p.rank_offsets[8]), int(p.rank_offsets[16])
    assert q.n_events == b - a and q.nprocs == 16
    assert np.array_equal(np.diff(q.rank_offsets)[8:], np.diff(p.rank_offsets)[8:])
    assert not np.diff(q.rank_offsets)[:8].any()
    for col in ("op", "seq", "comp"):
        assert np.array_equal(getattr(q, col), getattr(p, col)[a:b]), col
    mine = lambda r: (r >= 8) & (r < 16)  # noqa: E731
    assert np.all(mine(q.msg_src) | mine(q.msg_dst))
    assert q.n_messages < p.n_messages
    inst = np.repeat(np.arange(q.n_collectives), np.diff(q.coll_offsets))
    assert np.all(np.bincount(inst, weights=mine(q.coll_rank), minlength=q.n_collectives) > 0)
    assert pc.nbytes() < 0.6 * pieces_of(p, 1)[0].nbytes()
    assert q.n_phases == p.n_phases and pc.n_events_total == p.n_events


def test_two_pieces_hold_their_crossing_messages_in_the_same_order(stencil):
    """Piece i's crossing list for piece j names, position by position, the message piece j's
    list for i names: same sender, receiver, size and mode; the lists cover every message
    between the two blocks."""
    p = stencil
    ps = pieces_of(p, 3)
    pairs = 0
    for i in range(3):
        for j in range(3):
            if i == j:
                assert ps[i].cross_offsets[i + 1] == ps[i].cross_offsets[i]
                continue
            A, B = ps[i], ps[j]
            ia = A.cross_ids[A.cross_offsets[j]:A.cross_offsets[j + 1]]
            ib = B.cross_ids[B.cross_offsets[i]:B.cross_offsets[i + 1]]
            assert len(ia) == len(ib)
            pairs += len(ia) > 0
            for col in ("msg_src", "msg_dst", "msg_bytes", "msg_mode"):
                assert np.array_equal(getattr(A.program, col)[ia], getattr(B.program, col)[ib]), col
            own = lambda pc, r: (r >= pc.lo) & (r < pc.hi)  # noqa: E731
            between = np.sum(own(A, p.msg_src) & own(B, p.msg_dst)) + np.sum(own(B, p.msg_src)
                                                                            & own(A, p.msg_dst))
            assert len(ia) == between
    assert pairs >= 4


def test_collective_keys_are_communicator_and_ordinal_on_every_piece(stencil):
    """Each instance's key is (communicator << 32 | k) for the k-th call on it; pieces keep
    their instances in key order, and every instance of the program is in some piece."""
    p = stencil
    ps = pieces_of(p, 4)
    keys = set()
    for pc in ps:
        assert np.all(np.diff(pc.coll_key) > 0)
        assert np.array_equal(pc.coll_key >> 32, pc.program.coll_comm)
        keys |= set(pc.coll_key.tolist())
    assert len(keys) == p.n_collectives


@pytest.mark.parametrize("app", ["stencil", "fft2d", "cg", "nbody", "sweep"])
def test_replay_in_pieces_equals_one_piece_on_the_bundled_traces(app):
    """replay(pieces=5) on pieces with their own numbering: every time to the last bit."""
    p = Program.from_trace(load_trace(TRACES / app / "P16.h5"))
    m = load("cluster-a")
    one, five = replay(p, m), replay(p, m, pieces=5)
    assert five.pieces == 5
    assert one.runtime == five.runtime
    for key in ("finish", "te", "event_end", "wait", "phase_time"):
        assert np.array_equal(getattr(one, key), getattr(five, key)), key


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(P=st.integers(2, 9), steps=st.integers(1, 14), seed=st.integers(0, 2**32 - 1),
       k=st.integers(2, 5), S=st.sampled_from([0, 1000, 10**9]))
def test_pieces_partition_the_program(P, steps, seed, k, S):
    """Random programs (wildcard receives, shifts, collectives): the pieces' events are the
    program's, every message touching a piece is in it, and the replay in k pieces is exact."""
    p = build(random_program(P, steps, seed))
    ps = pieces_of(p, min(k, P))
    assert sum(pc.program.n_events for pc in ps) == p.n_events
    assert np.array_equal(np.concatenate([pc.program.comp for pc in ps]), p.comp)
    for pc in ps:
        lo, hi = pc.lo, pc.hi
        touch = ((p.msg_src >= lo) & (p.msg_src < hi)) | ((p.msg_dst >= lo) & (p.msg_dst < hi))
        assert pc.program.n_messages == int(np.sum(touch))
    m = Machine(name="prop", network=LogGP(L=5e-6, o=1e-6, g=2e-6, G=1e-9, O=0.0), S=S)
    ref, got = replay(p, m), replay(p, m, pieces=min(k, P))
    assert np.array_equal(ref.event_end, got.event_end) and ref.runtime == got.runtime


def test_positions_from_counts_are_the_layout_positions(stencil):
    """Worker 0 orders another piece's event times from its events per rank alone."""
    p = stencil
    got = positions_from_counts(np.diff(p.rank_offsets[3:12]))
    assert np.array_equal(got, layout_positions(p, 3, 11))
    ragged = np.array([3, 0, 5, 1])
    ro = np.concatenate([[0], np.cumsum(ragged)])
    pos = positions_from_counts(ragged)
    assert sorted(pos.tolist()) == list(range(9))
    assert pos[ro[2]] == 1 and pos[ro[3]] == 2  # each rank's first event comes first


def test_extract_rejects_ranks_that_are_not_a_piece(stencil):
    """Bounds that do not name lo..hi as piece ``index`` are refused with the ranks."""
    with pytest.raises(ValueError, match="are not piece 1"):
        extract(stencil, 4, 8, np.array([0, 8, 16]), 1)


def test_read_trace_ranks_reads_one_block_of_the_file():
    """Ranks 4..9 of the stencil trace: their events and completions exactly, every rank's
    range outside empty, the communicators whole, the block in the metadata."""
    path = TRACES / "stencil" / "P16.h5"
    whole = load_trace(path)
    part = read_trace_ranks(path, 4, 10, columns=("bytes", "t_comp"))
    a, b = int(whole.rank_offsets[4]), int(whole.rank_offsets[10])
    assert part.nprocs == 16 and part.n_events == b - a
    assert set(part.events) == {"rank", "seq", "op", "peer", "recv_peer", "root", "bytes", "t_comp"}
    for col in part.events:
        assert np.array_equal(part.events[col], whole.events[col][a:b]), col
    assert np.array_equal(np.diff(part.rank_offsets)[4:10], np.diff(whole.rank_offsets)[4:10])
    assert np.diff(part.rank_offsets)[:4].sum() == 0 and np.diff(part.rank_offsets)[10:].sum() == 0
    sel = (whole.completions["rank"] >= 4) & (whole.completions["rank"] < 10)
    for col in whole.completions:
        assert np.array_equal(part.completions[col], whole.completions[col][sel]), col
    assert np.array_equal(part.comms.members, whole.comms.members)
    assert part.meta["rank_block"] == [4, 10] and part.meta["n_events_total"] == whole.n_events


def test_read_trace_ranks_errors_name_the_file(tmp_path):
    """A missing file, a range outside the trace and a file that is not a trace each give a
    TraceFormatError naming the file."""
    with pytest.raises(TraceFormatError, match="no such trace file"):
        read_trace_ranks(tmp_path / "none.h5", 0, 1)
    with pytest.raises(TraceFormatError, match="ranks 10..19 asked for, the trace has 16"):
        read_trace_ranks(TRACES / "stencil" / "P16.h5", 10, 20)
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not hdf5")
    with pytest.raises(TraceFormatError, match="bad.h5: not a readable HDF5 file"):
        read_trace_ranks(bad, 0, 1)
