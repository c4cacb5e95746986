"""The statistical model on Comm_split communicators and per rank class: the
communicators related across P (:func:`~logical_model.statistical.comm_families`), the
channels between two classes of ranks (:func:`~logical_model.statistical.cross_rows`), a
Sendrecv run's leftover calls in pairs, and a real C program with a particle/mesh class
split (tests/logical_model/programs/classsplit.c) traced at P = 4, 8, 16 and compared with
a real run at the unseen P = 32, messages and bytes per class."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import signature
from conftest import needs_mpi, trace_c_program
from logical_model import from_traces
from logical_model.model import LogicalModel
from logical_model.rules import ClassComm
from logical_model.statistical import StatisticalError, channel_rows, comm_families, cross_rows, spread_counts
from logical_model.topology import SubGrid
from signature import load_trace

PROGRAMS = Path(__file__).parent / "programs"
FIT, UNSEEN = (4, 8, 16), 32


# ---- channels between two classes ------------------------------------------------------
@settings(max_examples=80, deadline=None)
@given(P=st.integers(2, 80), m=st.integers(2, 8), j=st.integers(0, 7), per_rank=st.floats(0, 5),
       forward=st.booleans())
def test_a_channel_between_two_classes_matches_every_message_and_spreads_them(P, m, j, per_rank, forward):
    """Between every m-th rank and the others (either way), each message a sender's rows
    realise is one a receiver's rows take, in the same order per pair; senders make the
    model's count (one more on the first), receivers get the same number give or take one."""
    ranks = np.arange(P)
    cls = ranks % m == j % m
    a, b = ranks[cls], ranks[~cls]
    if not len(a) or not len(b):
        return
    senders, receivers = (b, a) if forward else (a, b)
    total = int(round(per_rank * len(senders)))
    sent, got = [], []
    for present, peer, _ in cross_rows(total, P, ranks, senders, receivers, "send"):
        sent += [(int(r), int(q)) for r, q in zip(ranks[present], peer[present])]
    for present, peer, _ in cross_rows(total, P, ranks, senders, receivers, "recv"):
        got += [(int(q), int(r)) for r, q in zip(ranks[present], peer[present])]
    assert Counter(sent) == Counter(got) and len(sent) == total
    assert all(s in set(senders) and q in set(receivers) for s, q in sent)
    per_sender = Counter(s for s, _ in sent)
    want = spread_counts(total, len(senders), np.arange(len(senders)))
    assert [per_sender.get(int(s), 0) for s in senders] == list(want)
    per_receiver = Counter(q for _, q in sent)
    c = [per_receiver.get(int(q), 0) for q in receivers]
    assert max(c) - min(c) <= 1


@settings(max_examples=60, deadline=None)
@given(P=st.integers(2, 64), total=st.integers(0, 400))
def test_leftover_sendrecv_calls_go_to_pairs_each_the_others_partner(P, total):
    """A Sendrecv channel whose calls are not a multiple of the ranks: full rounds on every
    rank, then pairs of ranks, each sending to and receiving from the other; every call
    is matched and the calls made are the total give or take one."""
    ranks = np.arange(P)
    rows = channel_rows(total, P, ranks, "both")
    made = 0
    for present, peer, rpeer in rows:
        made += int(present.sum())
        for r in ranks[present]:
            q = int(peer[r])
            assert present[q] and int(rpeer[q]) == r  # q receives from r what r sends it
    assert total - 1 <= made <= total


# ---- communicators related across P ----------------------------------------------------
def _split(P: int, m: int = 4, j: int = 3):
    inside = np.arange(P) % m == j
    return np.flatnonzero(inside), np.flatnonzero(~inside)


def test_both_sides_of_a_class_split_are_one_layout_each_side_its_family():
    """The particle and mesh ranks' communicators at P = 4, 8, 16 (the mesh one absent at
    P = 4, where the phase makes no call on it) are the two colours of one split; rows of a
    grid are one family with every communicator of their size; one-rank communicators
    left are each rank's own."""
    used = {}
    for P in (4, 8, 16):
        mesh, part = _split(P)
        used[P] = {10: part, 11: mesh} if P > 4 else {10: part}
        used[P].update({20 + r: np.array([r]) for r in range(2)})
    keys, fams = comm_families(used)
    (f_part, f_mesh) = keys[16][10], keys[16][11]
    assert f_part != f_mesh and keys[8][10] == f_part and keys[4][10] == f_part and keys[8][11] == f_mesh
    role, colour = fams[f_part[1]]
    assert isinstance(role, ClassComm) and fams[f_mesh[1]][0] == role
    assert {colour, fams[f_mesh[1]][1]} == {0, 1}
    inside = role.layout(np.arange(32), 32)[0] == fams[f_mesh[1]][1]
    assert np.array_equal(np.flatnonzero(inside), np.arange(3, 32, 4))
    own = fams[keys[16][20][1]][0]
    assert isinstance(own, SubGrid) and own.n_comms(32) == 32 and keys[4][21] == keys[16][20]

    from logical_model.topology import dims_create
    rows = {}
    for P in (4, 8, 16):  # the rows of MPI_Dims_create's grid (2x2, 4x2, 4x4)
        d0, d1 = dims_create(P, 2)
        rows[P] = {100 + i: np.arange(i * d1, (i + 1) * d1) for i in range(d0)}
    keys, fams = comm_families(rows)
    assert len(fams) == 1 and isinstance(fams[0][0], SubGrid) and fams[0][1] is None


@settings(max_examples=40, deadline=None)
@given(m=st.integers(2, 8), j=st.integers(0, 7), ids=st.permutations(list(range(4))))
def test_a_random_class_split_is_recovered_and_placed_at_an_unseen_p(m, j, ids):
    """Every m-th rank and the others, each on its communicator (ids in any order), at
    three P with at least two of the class: the class's side and the others' are two
    families of one split, whose members at P = 8 m + j + 1 are the class's and the others'."""
    j = j % m
    fit = [m * k + j + 1 for k in (2, 3, 5)]
    used = {}
    for P in fit:
        inside = np.arange(P) % m == j
        used[P] = {100 + ids[0]: np.flatnonzero(inside), 100 + ids[1]: np.flatnonzero(~inside)}
    keys, fams = comm_families(used)
    top = fit[-1]
    role, colour = fams[keys[top][100 + ids[0]][1]]
    _, other = fams[keys[top][100 + ids[1]][1]]
    assert all(keys[P][100 + ids[0]] == keys[top][100 + ids[0]] for P in fit)
    U = 8 * m + j + 1
    from logical_model.statistical import Space
    mesh = Space(role=role, colour=colour).ranks(U)
    assert np.array_equal(mesh, np.flatnonzero(np.arange(U) % m == j))
    assert np.array_equal(Space(role=role, colour=other).ranks(U), np.flatnonzero(np.arange(U) % m != j))


def test_a_communicator_no_layout_relates_across_p_is_named():
    used = {4: {5: np.array([0, 1])}, 8: {5: np.array([0, 3, 5])}, 16: {5: np.array([1, 2, 9, 11])}}
    with pytest.raises(StatisticalError, match="communicator of ranks 1, 2, 9, 11"):
        comm_families(used)


# ---- a real program --------------------------------------------------------------------
@pytest.fixture(scope="module")
def classsplit(tmp_path_factory):
    """classsplit.c traced at the fit P (folder) and at the unseen P."""
    return trace_c_program(tmp_path_factory.mktemp("classsplit"), PROGRAMS / "classsplit.c", ["96000", "20"],
                           FIT, UNSEEN)


def _sent(ev: dict, sel) -> tuple[int, int]:
    b = np.asarray(ev["bytes"], np.int64)[sel]
    return int(np.count_nonzero(b > 0)), int(b.sum())


@needs_mpi
def test_two_rank_classes_on_split_communicators_are_placed_per_class(classsplit, tmp_path):
    """A particle/mesh split whose particle halo makes 1 or 2 messages by the rank's place
    (no rule gives each rank's calls: the exact model refuses the loop) is placed
    statistically from P = 4, 8, 16: at P = 32 its weight is exact, the bytes the particle
    ranks and the mesh ranks send are each within 5% of the real run's and their messages
    within 10% (the halo's mean count per rank, 1, 1.17, 1.25 at the fit P and 1.29 at 32,
    is an expected value extrapolated from three points: 1.39 to 1.6 by the laws tried);
    the model's communicators are the split's, and the logical trace matches every
    message and replays."""
    model = from_traces(classsplit)
    loop = next(k for k, ph in enumerate(model.phases) if ph.kind == "loop")
    ph = model.phases[loop]
    assert ph.extrapolable and ph.statistical, ph.problems + ph.notes
    assert any(s.space is not None and isinstance(s.space.role, ClassComm) for s in ph.slots)
    real = signature.extract(load_trace(classsplit / "unseen" / f"P{UNSEEN}.h5"))
    assert model.weights(UNSEEN) == [p.weight for p in real.phases]
    ev = model.phase_events(loop, UNSEEN)
    T, offs = real.phases[loop].template, real.phases[loop].template_offsets
    real_rank = np.repeat(np.arange(UNSEEN), np.diff(offs))
    mesh = np.arange(UNSEEN) % 4 == 3
    for cls in (mesh, ~mesh):
        (mm, mb), (rm, rb) = _sent(ev, cls[ev["rank"]]), _sent(T, cls[real_rank])
        assert abs(mm - rm) / rm <= 0.10 and abs(mb - rb) / rb <= 0.05, (mm, rm, mb, rb)
    # the mesh ranks' all-to-all is on their own communicator at P = 32
    a2a = ev["op"] == signature.trace.OP_CODE["Alltoall"]
    assert a2a.any() and set(ev["rank"][a2a].tolist()) == set(np.flatnonzero(mesh).tolist())
    again = LogicalModel.load(model.save(tmp_path / "classsplit.json"))
    ev2 = again.phase_events(loop, UNSEEN)
    assert all(np.array_equal(ev[c], ev2[c]) for c in ev)
    out = model.logical_trace(UNSEEN, tmp_path / f"classsplit-P{UNSEEN}.h5")
    trace = load_trace(out)
    comm = trace.comms
    members = {tuple(int(x) for x in comm.members_of(c)) for c in range(len(comm))}
    assert tuple(np.flatnonzero(mesh).tolist()) in members and tuple(np.flatnonzero(~mesh).tolist()) in members
    from replay import Program, load, replay
    program = Program.from_trace(trace)  # every message matched, or it raises
    assert np.isfinite(replay(program, load("cluster-a")).runtime)


def test_a_receive_before_a_collective_both_sides_call_and_its_send_after_is_refused():
    """Runs merged into one order: a blocking Recv run, an Allreduce, then the Isend run
    that feeds it. Where the Allreduce holds receivers and senders both, the realised
    order would deadlock and is refused; where only the senders call it (a collective on
    their own class's communicator), it is not."""
    from logical_model.model import _check_crossing
    from logical_model.rules import PeerRule
    from logical_model.statistical import Channel, Run, Space
    from signature.trace import OP_CODE
    runs = [Run(key=("r",), op=OP_CODE["Recv"], tag=0, comm=("world", 0)),
            Run(key=("c",), op=OP_CODE["Allreduce"], tag=-1, comm=("world", 0)),
            Run(key=("s",), op=OP_CODE["Isend"], tag=0, comm=("world", 0))]
    chans = [Channel(send=2, recv=0, messages={16: 16}, bytes={16: 160})]
    with pytest.raises(StatisticalError, match="would deadlock"):
        _check_crossing(runs, chans, [None, None, None], 16)
    mesh, part = (Space(members=PeerRule("member", {"kind": k, "m": 4, "j": 3})) for k in ("mod", "notmod"))
    _check_crossing(runs, chans, [part, mesh, mesh], 16)  # the collective is the senders' alone
