"""One-sided communication and neighbourhood collectives in the logical model
(logical_model/onesided.py): real C programs traced with the PyPI MPICH at P = 4, 8, 16,
modelled, and their logical trace at P = 32 compared event for event with a real run at
32 (op, target/peer, bytes, window id, and the neighbour lists); `sigex predict` replays
them; the list-position rule search on synthetic torus neighbourhoods (hypothesis);
what is still refused, by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import needs_mpi, trace_c_program

PROGRAMS = Path(__file__).parent / "programs"
FIT, UNSEEN = (4, 8, 16), 32
#: program -> its arguments (N, iterations)
RUNS = {"halo2d_put": ["480", "6"], "passive": ["3840", "6"], "nbr_torus": ["480", "6"]}


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """Each program traced at the fit P (its folder) and at the unseen P (``unseen/``)."""
    return {name: trace_c_program(tmp_path_factory.mktemp(name), PROGRAMS / f"{name}.c", args, FIT, UNSEEN)
            for name, args in RUNS.items()}


def _lists(trace, rank: int, seq: int) -> dict[int, list[int]]:
    L = trace.lists
    sel = np.flatnonzero((L["rank"] == rank) & (L["seq"] == seq))
    return {int(L["kind"][i]): L["values"][L["start"][i]:L["start"][i] + L["length"][i]].tolist() for i in sel}


def _mismatches(logical, real, weights) -> list[str]:
    """Where the logical trace, its phases repeated by their weights, differs from the real
    run (Finalize aside, which no signature holds): per rank, the op sequence, peers,
    roots, bytes, window ids (aux of window calls) and lists."""
    from signature.trace import OP_CODE, OPS
    from logical_model.onesided import GROUP_OPS, NEIGHBOR_OPS, WINDOW_OPS
    out = []
    le, re_ = logical.events, real.events
    for r in range(real.nprocs):
        lm = np.flatnonzero(le["rank"] == r)
        rm = np.flatnonzero((re_["rank"] == r) & (re_["op"] != OP_CODE["Finalize"]))
        idx = np.concatenate([np.tile(lm[le["phase"][lm] == k], w) for k, w in enumerate(weights)])
        if len(idx) != len(rm):
            out.append(f"rank {r}: {len(idx)} events, the run {len(rm)}")
            continue
        win = np.isin(re_["op"][rm], sorted(WINDOW_OPS))
        for c in ("op", "peer", "root", "bytes", "recv_bytes", "aux"):
            a, b = np.asarray(le[c][idx], np.int64), np.asarray(re_[c][rm], np.int64)
            bad = np.flatnonzero((a != b) & (win if c == "aux" else True))
            if bad.size:
                j = bad[0]
                out.append(f"rank {r} event {j} ({OPS[re_['op'][rm][j]]}) {c}: model {a[j]}, run {b[j]}")
        for j in np.flatnonzero(np.isin(re_["op"][rm], sorted(NEIGHBOR_OPS | GROUP_OPS))):
            a, b = _lists(logical, r, int(le["seq"][idx[j]])), _lists(real, r, int(re_["seq"][rm[j]]))
            if a != b:
                out.append(f"rank {r} event {j} lists: model {a}, run {b}")
    return out


@needs_mpi
@pytest.mark.parametrize("name, shape", [
    ("halo2d_put", ["Put, to grid neighbour (-1,+0) or PROC_NULL", "3840 * dims1(P)^-1"]),
    ("passive", ["Win_lock, to rank 0", "Accumulate, to rank 0", "Get, to rank + 1 mod P", "30720 * P^-1"]),
    ("nbr_torus", ["Neighbor_alltoall, destinations grid neighbour (-1,+0)", "bytes per destination 128, 128"]),
])
def test_one_sided_and_neighbourhood_phases_are_placed_event_for_event(traced, tmp_path, name, shape):
    """Fitted at P = 4, 8, 16: every phase is extrapolable with the rules the program
    follows, and the logical trace at 32 is the real run's, event for event (op,
    target/peer, bytes, window ids, sources/destinations and bytes per neighbour)."""
    from logical_model import from_traces
    from signature import load_trace
    model = from_traces(traced[name])
    assert all(ph.extrapolable for ph in model.phases), [ph.problems for ph in model.phases]
    text = "\n".join(f"{s.describe()} | {s.bytes.formula() if s.bytes is not None else ''}"
                     f" {s.recv_bytes.formula() if s.recv_bytes is not None else ''}"
                     for ph in model.phases for s in ph.slots)
    for part in shape:
        assert part in text, text
    path = model.logical_trace(UNSEEN, tmp_path / "L.h5")
    logical, real = load_trace(path), load_trace(traced[name] / "unseen" / f"P{UNSEEN}.h5")
    assert model.weights(UNSEEN) == [1, 6, 1]
    assert _mismatches(logical, real, model.weights(UNSEEN)) == []
    if name == "nbr_torus":  # the lists are really there: 4 sources and destinations each
        assert _lists(logical, 5, 2)[4] == _lists(real, 5, 2)[4] and len(_lists(logical, 5, 2)[4]) == 4


@needs_mpi
def test_every_one_sided_call_of_the_tracer_test_program_is_placed(tmp_path_factory, tmp_path):
    """tests/signature/programs/onesided.c (fence epochs with Put/Get/Accumulate; a passive
    epoch with Rput + Wait and Fetch_and_op; Compare_and_swap on rank 0; post/start/
    complete/wait between even-odd pairs), fitted at P = 2, 4, 8: its logical trace at 16
    is the real run's, the post/start groups included, and replays."""
    from logical_model import from_traces
    from replay import Program, load, replay
    from signature import load_trace
    src = Path(__file__).parents[1] / "signature" / "programs" / "onesided.c"
    root = trace_c_program(tmp_path_factory.mktemp("onesided"), src, ["6"], (2, 4, 8), 16)
    model = from_traces(root)
    assert all(ph.extrapolable for ph in model.phases), [ph.problems for ph in model.phases]
    text = "\n".join(s.describe() for ph in model.phases for s in ph.slots)
    assert "Win_post, on ranks r with r mod 2 = 0, destinations rank 1 of its block of 2" in text
    assert "Rput, to rank + 1 mod P" in text and "Compare_and_swap, to rank 0" in text
    logical = load_trace(model.logical_trace(16, tmp_path / "L.h5"))
    assert _mismatches(logical, load_trace(root / "unseen" / "P16.h5"), model.weights(16)) == []
    assert replay(Program.from_trace(logical), load("cluster-a")).runtime > 0


@needs_mpi
def test_the_model_round_trips_through_json_with_its_one_sided_rules(traced, tmp_path):
    """A saved and reloaded model writes the same logical trace (lists included)."""
    from logical_model import LogicalModel, from_traces
    from signature import load_trace
    model = from_traces(traced["nbr_torus"])
    again = LogicalModel.load(model.save(tmp_path / "m.json"))
    a, b = (load_trace(m.logical_trace(UNSEEN, tmp_path / f"{i}.h5")) for i, m in enumerate((model, again)))
    for c in ("op", "peer", "bytes", "aux"):
        assert np.array_equal(a.events[c], b.events[c])
    for c in a.lists:
        assert np.array_equal(a.lists[c], b.lists[c])


@needs_mpi
@pytest.mark.parametrize("name", ["halo2d_put", "passive"])
def test_sigex_predict_replays_the_one_sided_logical_trace(traced, capsys, name):
    """`sigex predict` at 32 builds the physical trace and replays it, every repetition
    (--full): no deadlock, a positive runtime."""
    import json
    from sigex.cli import main
    assert main(["predict", str(traced[name]), "--target", str(UNSEEN), "--full", "-q",
                 "--json", str(traced[name] / "pred.json")]) == 0
    out = json.loads((traced[name] / "pred.json").read_text())
    assert out["full"] > 0 and not out["refused"], out


@needs_mpi
def test_the_neighbourhood_logical_trace_replays_once_per_phase(traced, tmp_path):
    """The torus's logical trace replays (each phase once): the replay reads its lists."""
    from logical_model import from_traces
    from replay import Program, load, replay
    from signature import load_trace
    path = from_traces(traced["nbr_torus"]).logical_trace(UNSEEN, tmp_path / "L.h5")
    res = replay(Program.from_trace(load_trace(path)), load("cluster-a"))
    assert res.runtime > 0


@needs_mpi
def test_sigex_predict_replays_the_neighbourhood_logical_trace(traced, tmp_path):
    from sigex.cli import main
    assert main(["predict", str(traced["nbr_torus"]), "--target", str(UNSEEN), "-q",
                 "--json", str(tmp_path / "pred.json")]) == 0


@needs_mpi
def test_neighbourhoods_without_their_lists_are_refused_by_name(traced):
    """Built from signatures alone (no trace to read the lists from), a neighbourhood
    collective is refused, saying why; a window's calls are placed all the same."""
    from logical_model import build
    from signature import extract, load_trace
    sigs = [extract(load_trace(traced["nbr_torus"] / f"P{P}.h5")) for P in FIT]
    loop = next(ph for ph in build(sigs).phases if ph.kind == "loop")
    assert not loop.extrapolable
    assert any("neighbours of Neighbor_alltoall were not read from the traces" in p for p in loop.problems)
    sigs = [extract(load_trace(traced["passive"] / f"P{P}.h5")) for P in FIT]
    assert all(ph.extrapolable for ph in build(sigs).phases)


def test_neighbourhood_lists_follow_a_phase_the_runs_number_otherwise(traced):
    """Where the runs' phase lists differ (a phase only one run has), the correspondence
    renumbers the others' phases; their neighbourhood lists go with them, and the loop is
    placed as before (it was refused as if the lists had never been read: DOLFINx)."""
    import dataclasses
    from logical_model import build, read_signatures
    sigs, grids = read_signatures([traced["nbr_torus"] / f"P{P}.h5" for P in FIT])
    extra = dataclasses.replace(sigs[1].phases[0], id=99, share=0.0)  # (an object of its own)
    sigs[1] = dataclasses.replace(sigs[1], phases=(sigs[1].phases[0], extra, *sigs[1].phases[1:]))
    model = build(sigs, grids=grids)
    loop = next(ph for ph in model.phases if ph.kind == "loop")
    assert loop.extrapolable, loop.problems
    assert [d["id"] for d in model.left_out] == [None]


# ---- the list-position rule search on synthetic neighbourhoods -----------------------------
def _torus_lists(P: int, disps, periods, nbytes):
    """Each rank's destinations on the MPI_Dims_create(P, 2) grid at displacements ``disps``
    (PROC_NULL past a non-periodic end), the same as sources, and bytes per neighbour."""
    from logical_model.topology import dims_create, neighbour
    dims = dims_create(P, 2)
    ranks = np.arange(P)
    q = np.stack([neighbour(ranks, dims, periods, d, "row") for d in disps], 1)
    q = np.where(q >= 0, q, -3)
    b = np.array([[f(dims) if q[r, j] >= 0 else 0 for j, f in enumerate(nbytes)] for r in ranks], np.int64)
    return {int(r): (tuple(q[r]), tuple(q[r]), tuple(b[r]), tuple(b[r])) for r in ranks}


@settings(max_examples=25, deadline=None)
@given(disps=st.lists(st.sampled_from([(-1, 0), (1, 0), (0, -1), (0, 1), (1, 1), (-1, 1)]), min_size=1,
                      max_size=4, unique=True),
       periods=st.sampled_from([(True, True), (False, False), (True, False)]),
       per_dim=st.booleans())
def test_list_positions_follow_their_grid_rules_at_an_unseen_p(disps, periods, per_dim):
    """Synthetic neighbourhoods (grid displacements, periodic or not, bytes a halo face per
    dimension or a constant) learned from P = 4, 8, 16 give every rank's lists at P = 32
    and 64 exactly."""
    from logical_model import onesided
    from logical_model.model import SlotModel, _fit_volume
    from signature.trace import OP_CODE

    def face(d):  # a face of a 480 x 480 field along the displacement's dimension
        return (lambda dims: 8 * 480 // dims[1]) if d[0] else (lambda dims: 8 * 480 // dims[0])
    nbytes = [face(d) if per_dim else (lambda dims: 128) for d in disps]
    o_list, found = [], []
    for P in FIT:
        lists = _torus_lists(P, disps, periods, nbytes)
        o_list.append((P, np.arange(P), np.arange(P), None))
        found.append({"lists": lists, "aux": np.full(P, -1)})
    slot = SlotModel(key="x", op=OP_CODE["Neighbor_alltoallv"], tag=-1, comm=0, everywhere=True)
    extra = onesided.OneSided()
    err = onesided._learn_lists(extra, slot, o_list, found, None, "synthetic", _fit_volume, False)
    assert err is None, err
    for P in (32, 64):
        want = _torus_lists(P, disps, periods, nbytes)
        for j, rule in enumerate(extra.dests):
            q = rule(np.arange(P), P, None)
            assert np.array_equal(np.where(q >= 0, q, -3), [want[r][1][j] for r in range(P)])
        for j, law in enumerate(extra.send):
            real = [want[r][2][j] for r in range(P) if want[r][1][j] >= 0]
            assert all(v == onesided._vol(law, P) for v in real)


# ---- what stays refused ------------------------------------------------------------------------
def test_calls_still_not_extrapolated_are_named():
    """Persistent neighbourhood collectives and MPI_Win_test keep a one-line refusal."""
    from logical_model.model import _NOT_EXTRAPOLATED
    from signature.trace import OP_CODE
    ops = {op: what for codes, what in _NOT_EXTRAPOLATED for op in codes}
    assert "persistent neighbourhood collectives" in ops[OP_CODE["Neighbor_alltoall_init"]]
    assert "MPI_Win_test" in ops[OP_CODE["Win_test"]]
    assert OP_CODE["Put"] not in ops and OP_CODE["Neighbor_alltoall"] not in ops
