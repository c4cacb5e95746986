"""How many passes a split replay takes, estimated before splitting (replay.workers).

A ring passes a token through every rank, so each of its boundary ranks waits on the other
piece once per round: as many passes as rounds. A halo exchange whose ranks all send before
they receive waits once per exchange at most. The estimate from a trace's event columns
equals the one from its Program, and it decides whether ``replay_workers`` splits.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import TRACES
from replay import Program
from replay.workers import MIN_EVENTS_PER_PASS, _workers_worth, passes_estimate, worker_bounds
from signature.io import read_event_columns


def ring(P: int, rounds: int) -> dict:
    """``rounds`` trips of a token around P ranks (rank 0 sends first), then an Allreduce."""
    ev = {"rank": [], "op": [], "peer": [], "bytes": [], "recv_bytes": []}

    def add(r, op, peer=-1, b=0, rb=0):
        for k, v in zip(ev, (r, op, peer, b, rb)):
            ev[k].append(v)

    for r in range(P):
        for _ in range(rounds):
            if r:
                add(r, "Recv", r - 1, rb=8)
            add(r, "Send", (r + 1) % P, b=8)
            if not r:
                add(r, "Recv", P - 1, rb=8)
        add(r, "Allreduce", b=8, rb=8)
    return ev


def halo(P: int, steps: int) -> dict:
    """``steps`` exchanges with both neighbours of a periodic line: Isends, then Recvs."""
    ev = {"rank": [], "op": [], "peer": [], "bytes": [], "recv_bytes": [], "req": []}

    def add(r, op, peer=-1, b=0, rb=0, req=-1):
        for k, v in zip(ev, (r, op, peer, b, rb, req)):
            ev[k].append(v)

    for r in range(P):
        for s in range(steps):
            left, right = (r - 1) % P, (r + 1) % P
            add(r, "Isend", left, b=64, req=2 * s)
            add(r, "Isend", right, b=64, req=2 * s + 1)
            add(r, "Recv", left, rb=64)
            add(r, "Recv", right, rb=64)
            add(r, "Waitall", req=2 * s)
    return ev


@settings(max_examples=25, deadline=None)
@given(P=st.integers(4, 24), rounds=st.integers(1, 12))
def test_a_ring_waits_on_the_other_piece_once_per_round(P, rounds):
    """Each boundary rank of a ring receives from the other piece once per round (and
    takes part in the Allreduce): rounds + 1, for any split into two or more pieces."""
    prog = Program.from_arrays(P, **ring(P, rounds))
    for pieces in (2, 3):
        b = worker_bounds(P, pieces)
        assert passes_estimate(prog.rank_offsets, b, program=prog) == rounds + 1
    # one piece: nothing crosses, the Allreduce still counts (a rank's collectives)
    assert passes_estimate(prog.rank_offsets, worker_bounds(P, 1), program=prog) == 1


def test_the_estimate_from_a_trace_file_equals_the_programs(tmp_path):
    """Read from the file's op/peer/recv_peer columns or from the matched Program, the same
    estimate, on every bundled trace."""
    from signature import load_trace
    for path in sorted(TRACES.glob("*/P*.h5")):
        ro, cols = read_event_columns(path, ("op", "peer", "recv_peer"))
        prog = Program.from_trace(load_trace(path))
        b = worker_bounds(len(ro) - 1, 2)
        assert passes_estimate(ro, b, **cols) == passes_estimate(prog.rank_offsets, b, program=prog), path


def test_a_split_is_kept_only_where_passes_carry_enough_events():
    """A wide halo exchange (many ranks, a few steps) splits; a long ring of the same
    number of events does not (MIN_EVENTS_PER_PASS)."""
    wide = Program.from_arrays(4096, **halo(4096, 3))
    narrow = Program.from_arrays(16, **ring(16, 1500))

    def worth(prog):
        return _workers_worth(2, prog.nprocs, prog.n_events, 2, lambda b: passes_estimate(
            prog.rank_offsets, b, program=prog))

    assert wide.n_events >= 2 * MIN_EVENTS_PER_PASS * 3
    assert worth(wide) == 2
    assert worth(narrow) == 1
    assert _workers_worth(1, 16, 10**9, 2, lambda b: 1 / 0) == 1  # nothing to decide
