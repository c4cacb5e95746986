"""Trees and butterflies written as point-to-point calls (:mod:`logical_model.trees`):
the vectorised peers against the loops programs write, the inference on synthetic
phases (hypothesis), and a real C program (``programs/trees.c``) traced at P = 4, 8, 16
and placed, event for event, at P it was not traced at."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from conftest import needs_mpi, trace_c_program
from logical_model import from_traces
from logical_model.topology import DimsRule
from logical_model.trees import EXCHANGES, SIDES, SPANS, UNITS, Tree, infer_trees
from signature import extract, load_trace
from signature.trace import OP_CODE, PEER_ANY

PROGRAMS = Path(__file__).parent / "programs"

trees = st.one_of(
    st.builds(Tree, st.sampled_from(["bcast", "reduce"]), st.sampled_from(["low", "high", "flat"]),
              st.sampled_from(["asc", "desc"]), st.just(0), st.just(0)).flatmap(
        lambda t: st.sampled_from([t, Tree(t.kind, t.shape, t.order, 1, -1)])),
    st.builds(Tree, st.just("fold"), st.just("bits"), st.sampled_from(["asc", "desc"]))).flatmap(
    lambda t: st.sampled_from([t, dataclasses.replace(t, copies=2)]))
exchanges = st.one_of(
    st.builds(Tree, st.just("exchange"), st.sampled_from(sorted(EXCHANGES)), st.sampled_from(["asc", "desc"]),
              unit=st.sampled_from(UNITS)).filter(
        lambda t: t.unit != ("ordered",) or t.shape in ("xor", "pairxor", "tournament")),
    st.builds(Tree, st.just("exchange"), st.just("xor"), st.sampled_from(["asc", "desc"]),
              unit=st.sampled_from(UNITS), span=st.sampled_from(SPANS)))


def _loops(t: Tree, P: int) -> list[list[tuple[str, int, int]]]:
    """Each rank's calls of block ``t`` at P as a program's loops make them, rank by rank."""
    root = t.root(P)
    top = 1
    while top < P:
        top <<= 1
    if t.copies > 1:  # each message as that many calls in a row (its size, then its payload)
        once = _loops(dataclasses.replace(t, copies=1), P)
        return [[c for c in calls for _ in range(t.copies)] for calls in once]
    out = []
    for r in range(P):
        v = (r - root) % P
        if t.kind == "fold":  # mpi4py's reduce_p2p: no break after a rank's first send
            calls, masks = [], [1 << s for s in range(top.bit_length() - 1)]
            for m in masks if t.order == "asc" else masks[::-1]:
                if v & m:
                    calls.append(("send", ((v & ~m) + root) % P, -1))
                elif (v | m) < P:
                    calls.append(("recv", ((v | m) + root) % P, -1))
            out.append(calls)
            continue
        if t.kind == "exchange":
            if t.span is not None:  # the first W ranks of each block of W: a row of a grid
                W = DimsRule(t.span[0], 2).dims(P)[t.span[1]]
                steps = [1 << s for s in range(W.bit_length() - 1)]
            elif t.shape in ("xor", "dissemination"):
                steps = [1 << s for s in range(top.bit_length() - 1)]
            elif t.shape == "tournament":  # rounds of the polygon method, a dummy team where P is odd
                n = P + P % 2
                steps = list(range(n - 1))
            else:
                steps = list(range(1, P))
            steps = steps if t.order == "asc" else steps[::-1]
            pairs = {"xor": lambda m: (v ^ m, v ^ m), "pairxor": lambda m: (v ^ m, v ^ m),
                     "dissemination": lambda m: ((v + m) % P, (v - m) % P),
                     "pairwise": lambda m: ((v + m) % P, (v - m) % P),
                     "ring": lambda m: ((v + 1) % P, (v - 1) % P),
                     "tournament": lambda s: (_opponent(v, s, P),) * 2}[t.shape]
            calls = []
            for a, b in map(pairs, steps):
                if a is None:  # the round this rank sits out
                    continue
                if t.unit == ("ordered",):  # the lower rank of the pair sends first
                    pair = [("send", (a + root) % P, -1), ("recv", (b + root) % P, -1)]
                    calls += pair if v < a else pair[::-1]
                    continue
                for d in t.unit:
                    calls.append({"both": ("both", (a + root) % P, (b + root) % P), "send": ("send", (a + root) % P, -1),
                                  "recv": ("recv", (b + root) % P, -1), "wait": ("wait", -1, -1)}[d])
            out.append(calls)
            continue
        if t.shape == "flat":
            parent = 0 if v else None
            kids = list(range(1, P)) if v == 0 else []
        elif t.shape == "low":
            low = v & -v if v else top
            parent = v - low if v else None
            kids = [m for m in (1 << s for s in range(top.bit_length())) if m < low and v + m < P]
        else:  # the teaching codes' doubling loop: a rank below s talks to rank + s
            high = 1 << (v.bit_length() - 1) if v else 0
            parent = v - high if v else None
            kids = [m for m in (1 << s for s in range(top.bit_length())) if m > v and v + m < P]
        kids = [(v + m + root) % P for m in (kids if t.order == "asc" else kids[::-1])]
        up = [] if parent is None else [(parent + root) % P]
        if t.kind == "bcast":
            out.append([("recv", q, -1) for q in up] + [("send", q, -1) for q in kids])
        else:
            out.append([("recv", q, -1) for q in kids] + [("send", q, -1) for q in up])
    return out


def _opponent(v: int, s: int, P: int) -> int | None:
    """v's opponent at round s of the polygon method: team s meets the fixed team (the last
    of n = P, or of P + 1 with a dummy where P is odd) and s + k meets s - k (mod n - 1);
    None where v meets the dummy."""
    n = P + P % 2
    pairs = [(s, n - 1)] + [((s + k) % (n - 1), (s - k) % (n - 1)) for k in range(1, n // 2)]
    (q,) = [b if a == v else a for a, b in pairs if v in (a, b)]
    return q if q < P else None


@settings(max_examples=80, deadline=None)
@given(t=trees, P=st.integers(1, 300))
def test_vectorised_peers_are_the_loops_programs_write(t, P):
    """Tree.peers over every rank at once gives, side by side, the calls of the loops
    (MPICH's lowest-bit tree, the teaching codes' doubling loop) rank by rank."""
    assert t.rank_calls(P) == _loops(t, P)


@settings(max_examples=80, deadline=None)
@given(t=exchanges, k=st.integers(0, 7), extra=st.integers(1, 5))
def test_exchanges_are_the_loops_programs_write(t, k, extra):
    """Each exchange at powers of two and, where it allows them, at other P."""
    for P in (1 << k, (1 << k) + extra):
        if t.problem(P) is None:
            assert t.rank_calls(P) == _loops(t, P)
        elif t.span is None:
            assert EXCHANGES[t.shape][0] and P & (P - 1) and "power of two" in t.problem(P)
        else:
            assert "no grid" in t.problem(P) or "power of two" in t.problem(P)


@settings(max_examples=60, deadline=None)
@given(blocks=st.lists(st.one_of(trees, exchanges), min_size=1, max_size=3),
       Ps=st.lists(st.integers(4, 24), min_size=3, max_size=3, unique=True))
def test_blocks_are_recovered_and_agree_at_an_unseen_P(blocks, Ps):
    """Any sequence of broadcasts and reductions (binomial or flat trees, either order,
    rooted at the first or the last rank) and exchanges (any unit of calls per stage, over
    P or a grid dimension) seen at three P (powers of two where an exchange needs them)
    is read back as blocks that make every rank's calls at an unseen P, or refused as two
    readings that part there; never a reading that is wrong at the unseen P. (Each block
    shows its growth: two calls or more on a rank at some traced P; one that never does
    is a single call on every rank, the exact model's.)"""
    if any(t.kind == "exchange" and (EXCHANGES[t.shape][0] or t.span) for t in blocks):  # powers of two only
        Ps = sorted({1 << (P - 1).bit_length() for P in Ps} | {4})
    unseen = 2 * max(Ps) + (0 if max(Ps) & (max(Ps) - 1) == 0 else 1)
    assume(all(t.problem(P) is None for t in blocks for P in (*Ps, unseen)))  # the program runs there
    assume(all(max(len(c) for P in Ps for c in t.rank_calls(P)) >= 2 for t in blocks))
    calls = {P: [sum((_loops(t, P)[r] for t in blocks), []) for r in range(P)] for P in Ps}
    found, why = infer_trees(calls)
    if not found:
        assert "read alike" in why, why
        return
    got = [sum((t.rank_calls(unseen)[r] for t, _ in found), []) for r in range(unseen)]
    assert got == [sum((_loops(t, unseen)[r] for t in blocks), []) for r in range(unseen)]
    for P in Ps:  # the spans cover every call, in order
        for r in range(P):
            ends = [spans[P][r] for _, spans in found]
            assert ends[0][0] == 0 and ends[-1][1] == len(calls[P][r])
            assert all(a[1] == b[0] for a, b in zip(ends, ends[1:]))


def test_two_readings_that_part_beyond_the_traced_P_are_refused():
    """At P = 2 and 3 a broadcast on either tree by ascending children makes the same
    calls; at P = 4 they part (rank 3's parent is 2 or 1): refused, not guessed."""
    a = Tree("bcast", "low", "asc")
    calls = {P: a.rank_calls(P) for P in (2, 3)}
    found, why = infer_trees(calls)
    assert found == [] and "read alike" in why and "which part at P=" in why


def test_calls_of_no_tree_are_refused_with_the_rank_and_call():
    """A ring shift on every rank is passed over, call by call (the exact model's): no block.
    Calls left on some ranks only, and no block, name the first such rank."""
    calls = {P: [[("send", (r + 1) % P, -1), ("recv", (r - 1) % P, -1)] for r in range(P)] for P in (4, 8)}
    found, why = infer_trees(calls)
    assert found == [] and "hold no tree" in why
    calls = {P: [[("send", 1, -1)] if r == 0 else [] for r in range(P)] for P in (4, 8)}
    found, why = infer_trees(calls)
    assert found == [] and "rank 0" in why and "P=4" in why


def test_a_halo_between_two_trees_is_passed_over():
    """A reduction, one Sendrecv with the next rank on every rank, a broadcast: the two
    trees are read, the Sendrecv left to the exact model."""
    red, bc = Tree("reduce", "low", "asc"), Tree("bcast", "low", "desc")
    calls = {P: [red.rank_calls(P)[r] + [("both", (r + 1) % P, (r - 1) % P)] + bc.rank_calls(P)[r]
                 for r in range(P)] for P in (4, 8, 16)}
    found, why = infer_trees(calls)
    assert why is None and [t for t, _ in found] == [red, bc]
    for P in (4, 8, 16):
        for r in range(P):
            assert found[1][1][P][r][0] == found[0][1][P][r][1] + 1  # the halo call between them


def test_sides_follow_the_kind():
    assert SIDES["bcast"] == ("parent", "children") and SIDES["reduce"] == ("children", "parent")


# ---- a real program ------------------------------------------------------------------
@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """``trees.c`` traced at P = 4, 8, 16 in each mode and at an unseen P: 12; a power of
    two for the exchanges that need one (2 for the butterfly, 32 for NPB CG's reductions
    and the ordered pairs, a stage more than any traced P has); 13 for the tournament, an
    odd P, where each rank sits a round out."""
    out = {}
    for mode, unseen in (("tree", 12), ("butterfly", 2), ("flat", 12), ("master", 12), ("isend", 12),
                         ("pairwise", 12), ("tournament", 13), ("cg", 32), ("ordered", 32)):
        root = tmp_path_factory.mktemp(mode)
        trace_c_program(root, PROGRAMS / "trees.c", ["20", mode], (4, 8, 16), unseen)
        out[mode] = (root, unseen, from_traces(root))
    return out


def _by_rank(cols: dict, P: int) -> list[list[tuple]]:
    rank = np.asarray(cols["rank"])
    return [list(zip(*(np.asarray(cols[c])[rank == r].tolist() for c in ("op", "peer", "tag", "bytes", "recv_bytes"))))
            for r in range(P)]


def _real_phase(path: Path, k: int) -> tuple[int, list[list[tuple]]]:
    ph = extract(load_trace(path)).phases[k]
    offs = ph.template_offsets
    P = len(offs) - 1
    cols = {c: np.asarray(ph.template[c]) for c in ("op", "peer", "tag", "bytes", "recv_bytes")}
    cols["rank"] = np.repeat(np.arange(P), np.diff(offs))
    return ph.weight, _by_rank(cols, P)


@needs_mpi
@pytest.mark.parametrize("mode", ["tree", "butterfly", "flat", "master", "isend", "pairwise", "tournament", "cg",
                                  "ordered"])
def test_a_traced_program_is_placed_event_for_event_at_an_unseen_P(traced, mode):
    """The loop's trees (a teaching code's reduction to rank 0 and MPICH's broadcast from
    the last rank; a master's sends to its workers and their results back, in rank order,
    from any source as they come, or posted at once and waited for together), its butterfly
    its all-to-all by hand (to rank + s, or on a round-robin tournament's rounds tagged
    sender * P + receiver: FFTW's transposes), or NPB CG's reductions along the rows of its grid (recursive
    doubling over the columns, Irecv, Send and Wait at each stage, tagged with the stage's
    number) are read as such; the phase is exact, not statistical, and
    its events at the unseen P equal the real run's, call for call (operation, peer, tag,
    bytes), on every rank."""
    root, unseen, model = traced[mode]
    (k,) = [k for k, ph in enumerate(model.phases) if any(s.tree is not None for s in ph.slots)]
    ph = model.phases[k]
    assert not ph.statistical and not ph.problems
    assert any("stages that grow with P" in n for n in ph.notes), ph.notes
    want = {"tree": {("reduce", "high", "desc", 0, 0), ("bcast", "low", "desc", 1, -1)},
            "butterfly": {("exchange", "xor", "asc", 0, 0)},
            "flat": {("bcast", "flat", "asc", 0, 0), ("reduce", "flat", "asc", 0, 0)},
            "master": {("bcast", "flat", "asc", 0, 0), ("reduce", "flat", "asc", 0, 0)},
            "isend": {("bcast", "flat", "asc", 0, 0), ("reduce", "flat", "asc", 0, 0)},
            "pairwise": {("exchange", "pairwise", "asc", 0, 0)},
            "tournament": {("exchange", "tournament", "asc", 0, 0)},
            "cg": {("exchange", "xor", "asc", 0, 0), ("exchange", "xor", "desc", 0, 0)},
            "ordered": {("exchange", "xor", "asc", 0, 0)}}[mode]
    assert {(s.tree.kind, s.tree.shape, s.tree.order, s.tree.root_a, s.tree.root_b)
            for s in ph.slots if s.tree is not None} == want
    weight, real = _real_phase(root / "unseen" / f"P{unseen}.h5", k)
    real_ops = [e[0] for es in real for e in es]
    assert ph.weight_at(unseen) == weight
    got = _by_rank(model.phase_events(k, unseen), unseen)
    if mode == "master":  # the master's receives from any source: one from each worker
        assert sorted(e[1] for e in got[0] if e[0] == OP_CODE["Recv"]) == list(range(1, unseen))
        got = [[(e[0], PEER_ANY, *e[2:]) if r == 0 and e[0] == OP_CODE["Recv"] else e for e in es]
               for r, es in enumerate(got)]
    assert got == real
    # and the model survives a save and a load
    from logical_model import LogicalModel
    path = root / "model.json"
    model.save(path, overwrite=True)
    again = LogicalModel.load(path)
    assert _by_rank(again.phase_events(k, unseen), unseen) == _by_rank(model.phase_events(k, unseen), unseen)
    assert [s.tree_any for s in ph.slots if s.tree is not None] == [
        mode == "master" and s.tree.kind == "reduce" and s.tree_side == "children" for s in ph.slots if s.tree]
    if mode == "cg":  # NPB CG's: Irecv, Send, Wait at each stage, over the columns of its grid,
        # tagged with the stage's number (L .. 1, then 1 .. L); 3 stages at P = 32, 2 at most traced
        for s in ph.slots:
            if s.tree is not None:
                assert s.tree.unit == ("recv", "send", "wait") and s.tree.span is not None
        assert sum(np.asarray(real_ops) == OP_CODE["Irecv"]) == 2 * 3 * unseen
    # the logical trace replays (receives from any source take their workers' messages)
    from replay import load, replay
    from replay.program import Program
    trace = root / f"L{unseen}.h5"
    model.logical_trace(unseen, trace, overwrite=True)
    assert replay(Program.from_trace(load_trace(trace)), load("cluster-a")).runtime > 0


@needs_mpi
def test_mpi4py_reductions_of_python_objects_are_placed_exact_at_unseen_P(tmp_path):
    """mpi4py's ``allreduce`` and ``reduce`` of Python objects (a float, a pair of floats)
    in a time loop, traced with the interpreter's mpi4py at P = 4, 8, 16: each is read as
    a fold to rank 0 whose messages are two calls each (the size, then the pickle), the
    phase is exact, and its events at P = 12 and 32 (a stage more than any traced P) equal
    the real runs', call for call, on every rank."""
    from signature import trace_run
    script = PROGRAMS / "objreduce.py"
    for P in (4, 8, 16, 12, 32):
        out = tmp_path / (f"P{P}.h5" if P in (4, 8, 16) else f"unseen/P{P}.h5")
        res = trace_run([sys.executable, str(script), "12"], P, out, timeout=600)
        assert res.ok, f"objreduce at P={P}: {res.trace.meta.get('incomplete_reason')}"
    model = from_traces(tmp_path)
    loop = max(range(len(model.phases)), key=lambda k: model.phases[k].weight_at(32))
    assert model.phases[loop].weight_at(32) >= 10
    for k, ph in enumerate(model.phases):  # the loop's step and the last one (the final phase)
        assert not ph.statistical and not ph.problems
        folds = [s.tree for s in ph.slots if s.tree is not None]
        if k == loop:
            assert [(t.kind, t.copies, t.order) for t in folds] == [("fold", 2, "asc")] * 2
            assert any("stages that grow with P" in n for n in ph.notes), ph.notes
        for unseen in (12, 32):
            weight, real = _real_phase(tmp_path / "unseen" / f"P{unseen}.h5", k)
            assert ph.weight_at(unseen) == weight
            assert _by_rank(model.phase_events(k, unseen), unseen) == real, (k, unseen)
    from replay import load, replay
    from replay.program import Program
    model.logical_trace(32, tmp_path / "L32.h5")
    assert replay(Program.from_trace(load_trace(tmp_path / "L32.h5")), load("cluster-a")).runtime > 0


@needs_mpi
def test_a_butterfly_is_refused_where_P_is_no_power_of_two_and_replays_where_it_is(traced):
    root, _, model = traced["butterfly"]
    problems = model.phase_problems(12)
    (k,) = [k for k, pr in problems.items() if pr]
    assert "power of two" in problems[k][0] and "Sendrecv" in problems[k][0]
    assert not any(model.phase_problems(64).values())
    ev = model.phase_events(k, 64)
    sr = np.asarray(ev["op"]) == OP_CODE["Sendrecv"]
    rank, peer = np.asarray(ev["rank"])[sr], np.asarray(ev["peer"])[sr]
    assert len(rank) == 64 * 6 and np.array_equal(np.bincount(rank ^ peer), np.bincount(
        np.tile(1 << np.arange(6), 64)))
    from replay import load, replay
    from replay.program import Program
    path = root / "L64.h5"
    model.logical_trace(64, path)
    assert replay(Program.from_trace(load_trace(path)), load("cluster-a")).runtime > 0


@needs_mpi
def test_wide_blocks_are_built_over_halves_of_the_ranks_alike(traced, monkeypatch):
    """A phase with P - 1 stages per rank is built over halves of the rank block where its
    table would be large: the same events, in the same order, as in one piece."""
    from logical_model import writer
    _, _, model = traced["pairwise"]
    (k,) = [k for k, ph in enumerate(model.phases) if any(s.tree is not None for s in ph.slots)]
    whole = model.phase_events(k, 96)
    monkeypatch.setattr(writer, "MAX_TABLE_CELLS", 500)
    halves = model.phase_events(k, 96)
    assert whole.keys() == halves.keys()
    for c in whole:
        assert np.array_equal(whole[c], halves[c]), c
    assert len(whole["op"]) == 96 * (95 + 1)  # 95 Sendrecv and an Allreduce on every rank
