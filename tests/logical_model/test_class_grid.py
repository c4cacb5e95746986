"""GROMACS's shape (issue #25): rank classes the streams show, with an order each, and a
grid over one class's ranks whose dims follow no rule (a load-based choice), given at the
target with --grid. Unit tests with hypothesis for the class and grid inference; a C
program of that shape (tests/logical_model/programs/ddgrid.c: PME ranks every 4th on their
own communicator, the particle ranks on a 3x1, 3x2, 3x4 grid at P = 4, 8, 16 and 4x6 at
P = 32) traced at 3 P and extrapolated to P = 32 with --grid, event for event."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from conftest import needs_mpi, trace_c_program
from logical_model import LogicalModel, from_traces
from logical_model.model import _order, _stream_classes
from logical_model.rules import Grid, Observation, PeerRule, infer_peer, on_traced_grid, traced_grid_rules
from logical_model.topology import DimsRule, neighbour
from signature.errors import ExtrapolationError
from sigex.cli import main

PROGRAMS = Path(__file__).parent / "programs"
FIT, UNSEEN, UNSEEN_GRID = (4, 8, 16), 32, (4, 6, 1)


# ---- grids with traced dims ------------------------------------------------------------
def _factor_pairs(n: int) -> list[tuple[int, int]]:
    return [(a, n // a) for a in range(1, n + 1) if n % a == 0]


@st.composite
def traced_tables(draw):
    """Three sizes, each with a row-major 2-D grid drawn from its factorisations, one of
    them 2-D with the moving dimension over 2 wide; a displacement of one step along one
    dimension, periodic."""
    axis = draw(st.integers(0, 1))
    step = draw(st.sampled_from((-1, 1)))
    sizes = draw(st.lists(st.integers(2, 40), min_size=3, max_size=3, unique=True))
    table = [(n, draw(st.sampled_from(_factor_pairs(n)))) for n in sorted(sizes)]
    big = draw(st.sampled_from([(a, b) for a in range(3, 7) for b in range(2, 7)]))
    big = big if axis == 0 else big[::-1]
    n_big = big[0] * big[1]
    table = [(n, d) for n, d in table if n != n_big] + [(n_big, big)]
    disp = (step, 0) if axis == 0 else (0, step)
    # events at two sizes or more (a size where the moving dimension is 1 wide has none)
    assume(sum(d[axis] > 1 for _, d in table) >= 2)
    return sorted(table), disp


def _observe(n: int, dims: tuple[int, int], disp: tuple[int, int]) -> Observation:
    ranks = np.arange(n)
    q = neighbour(ranks, dims, (True, True), disp)
    keep = q != ranks  # a dimension 1 wide: no exchange (GROMACS skips it)
    return Observation(n, ranks[keep], q[keep])


@settings(max_examples=60, deadline=None)
@given(traced_tables(), st.sampled_from([(4, 6), (8, 3), (2, 12), (24, 1)]))
def test_a_grid_whose_dims_follow_no_rule_is_recovered_and_placed_on_the_given_dims(case, target):
    """The displacement is found exactly; each traced size's dims reproduce its peers; at
    an unseen size the rule on the user's dims gives the true neighbours."""
    table, disp = case
    obs = [_observe(n, d, disp) for n, d in table]
    found = traced_grid_rules(obs)
    assert found, table
    rule = found[0]
    assert rule.params["disp"] == disp
    g = on_traced_grid(rule)
    for o in obs:  # every traced size as observed
        q = rule(np.arange(o.P), o.P)
        assert np.array_equal(np.flatnonzero(q >= 0), o.ranks) and np.array_equal(q[o.ranks], o.peers)
    n = target[0] * target[1]
    if n in dict(g.rule.table):
        return
    with pytest.raises(ValueError, match="--grid"):
        rule(np.arange(n), n)
    fixed = PeerRule("cart", {**rule.params, "grid": Grid(2, g.periods, DimsRule(
        "traced", 2, fixed=((n, target),), table=g.rule.table), "row")})
    want = neighbour(np.arange(n), target, (True, True), disp)
    want[want == np.arange(n)] = -1
    got = fixed(np.arange(n), n)
    assert np.array_equal(got[want >= 0], want[want >= 0])


def test_a_one_dimensional_table_is_left_to_the_rank_arithmetic():
    """Dims that never make a 2-D grid (3x1, 6x1, 12x1) are a ring: the shift family's, not a
    traced grid's."""
    obs = [_observe(n, (n, 1), (-1, 0)) for n in (3, 6, 12)]
    assert traced_grid_rules(obs) == []
    assert infer_peer(obs).family == "shift"


def test_a_stride_growing_with_p_keeps_the_traced_grid_as_the_reading_the_target_decides():
    """3x1, 3x2, 3x4: the x neighbour is also rank + 2/3 P mod P at every traced size; the
    grid reading is kept beside it (the target decides, with --grid)."""
    obs = [_observe(n, (3, n // 3), (-1, 0)) for n in (3, 6, 12)]
    alts: list = []
    rule = infer_peer(obs, alternatives=alts)
    assert rule.family == "shift"
    assert any(on_traced_grid(a) is not None and a.params["disp"] == (-1, 0) for a in alts)


def test_a_traced_grid_round_trips_through_json():
    obs = [_observe(n, d, (0, 1)) for n, d in ((3, (3, 1)), (6, (3, 2)), (12, (3, 4)))]
    rule = traced_grid_rules(obs)[0]
    back = PeerRule.from_dict(rule.to_dict())
    assert back == rule
    assert on_traced_grid(back).rule.describe() == "3x1 at 3 ranks, 3x2 at 6 ranks, 3x4 at 12 ranks as traced (no dims rule)"


# ---- rank classes the streams show --------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.data())
def test_a_class_the_streams_show_gets_its_own_order(m, data):
    """Ranks r with r mod m = j make a call of their own and the two calls every rank makes
    in the other order: no common order, no fixed class; the class is found from the
    streams and each class keeps its order."""
    j = data.draw(st.integers(0, m - 1))
    a, b, c = ("A",), ("B",), ("C",)
    Ps = [m * k for k in (2, 3, 5)]
    keys = {P: [[c, b, a] if r % m == j else [a, b] for r in range(P)] for P in Ps}
    classes = _stream_classes(keys)
    assert [r.describe() for r in classes] == [f"ranks r with r mod {m} = {j}"]
    order, cls, pos = _order(keys)
    if m == 2:  # rank parity is tried first and is this class too
        assert cls == "rank parity"
        return
    assert isinstance(cls, PeerRule) and cls.describe() == f"ranks r with r mod {m} = {j}"
    at = {k: i for i, k in enumerate(order)}
    assert [pos[1][at[k]] for k in (c, b, a)] == [0, 1, 2]
    assert [pos[0][at[k]] for k in (a, b)] == [0, 1]


# ---- the C program -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ddgrid(tmp_path_factory):
    """ddgrid traced at the fit P and at P = 32: the folder of the fit traces."""
    return trace_c_program(tmp_path_factory.mktemp("ddgrid"), PROGRAMS / "ddgrid.c", ["6"], FIT, UNSEEN)


@needs_mpi
def test_the_particle_grid_is_refused_without_grid_naming_what_is_missing(ddgrid):
    """Without --grid, the loop phase is refused in one line: the particle ranks' grid of 24
    ranks at P = 32, the dims traced. A grid found from the peers of one class's ranks is
    the program's load-based choice: the rule its traced dims fit (3 x P/3, 3x8 at 24
    ranks; the program makes 4x6) is named, not taken."""
    model = from_traces(ddgrid)
    assert all(ph.extrapolable for ph in model.phases), model.describe()
    with pytest.raises(ExtrapolationError) as err:
        model.check_target(UNSEEN)
    text = str(err.value)
    assert "phase 1:" in text and "\n" not in text
    assert "give the 2-D grid of 24 ranks at P=32 (--grid AxB" in text
    detail = err.value.detail
    assert "3x1 at 3 ranks, 3x2 at 6 ranks, 3x4 at 12 ranks" in detail and "fit 3 x P/3 (dimension 0 fixed)" in detail


@needs_mpi
def test_the_given_grid_places_the_phase_event_for_event(ddgrid):
    """--grid 4x6x1 (the particle communicator's 24 ranks, the trailing 1 dropped): the logical
    trace at P = 32 equals the real run's, event for event on every rank."""
    from test_real_codes import assert_same_events
    model = from_traces(ddgrid).with_grid(UNSEEN, UNSEEN_GRID)
    assert_same_events(model, ddgrid / "unseen" / f"P{UNSEEN}.h5")
    # the grid travels through JSON
    again = LogicalModel.from_dict(from_traces(ddgrid).to_dict()).with_grid(UNSEEN, UNSEEN_GRID)
    assert_same_events(again, ddgrid / "unseen" / f"P{UNSEEN}.h5")


@needs_mpi
def test_a_grid_of_no_class_size_is_refused(ddgrid):
    model = from_traces(ddgrid)
    with pytest.raises(ExtrapolationError, match="24"):
        model.with_grid(UNSEEN, (5, 5))


@needs_mpi
def test_extrapolate_takes_the_class_grid(ddgrid, tmp_path, capsys):
    """`sigex extrapolate --grid 4x6x1` writes every phase; without it the loop phase is left
    out and named."""
    out = tmp_path / "P32.h5"
    assert main(["extrapolate", str(ddgrid), "--target", "32", "--grid", "4x6x1", "-o", str(out), "-q"]) == 0
    said = capsys.readouterr()
    assert "left out" not in said.out + said.err and "phases [0, 1, 2]" in said.out
    assert main(["extrapolate", str(ddgrid), "--target", "32", "-o", str(tmp_path / "b.h5"), "-q"]) == 0
    said = capsys.readouterr()
    assert "left out: phase 1" in said.out and "give the 2-D grid of 24 ranks at P=32" in said.out + said.err


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 8), st.data())
def test_a_class_split_seen_from_either_side_is_one_split(m, data):
    """Comm_split(colour = r mod m == j): at each P the trace may show the class's
    communicator, the others', or both (a slot only one class calls at a small P); every
    mix is the one split."""
    from logical_model.rules import ClassComm, infer_class_comm
    j = data.draw(st.integers(0, m - 1))
    observed = {}
    for P in (m * 2, m * 3, m * 5):
        cls = np.arange(j, P, m)
        rest = np.setdiff1d(np.arange(P), cls)
        observed[P] = data.draw(st.sampled_from([[cls], [rest], [cls, rest]]))
    cc = infer_class_comm(observed)
    assert isinstance(cc, ClassComm)
    colour = cc.layout(np.arange(m * 7), m * 7)[0]
    cls = np.arange(j, m * 7, m)
    assert np.all(colour[cls] == colour[cls[0]]) and np.all(np.delete(colour, cls) != colour[cls[0]])
    if m > 2:  # the smaller side is the class (two halves: the one without rank 0)
        assert colour[cls[0]] == 1
