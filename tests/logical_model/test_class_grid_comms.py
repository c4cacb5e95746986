"""Communicators over a grid of one class's ranks (issue #25, "every communicator"):
GROMACS's particle ranks (every rank but each 4th, the PME ranks) make, over their own
domain grid (3x1, 6x1, 4x3 at P = 4, 8, 16: a load-based choice), a load-balancing
communicator along the first dimension through rank 0 and one along the second for
every position on the first. The layout (:class:`~logical_model.rules.ClassGrid`) is
inferred from the communicators a phase uses at each traced P, related across P by
:func:`~logical_model.statistical.comm_families`, and placed at a P whose grid
``--grid`` gives. The members lists below are those of GROMACS 2022's NS step in
``bench/validate_apps.py``'s water box, traced at P = 4, 8, 16 and 32. End to end:
``programs/ddgrid.c`` built with ``-DDDGRID_LOAD`` (its particle/PME shape with those
communicators, its grid 3x1, 3x2, 3x4 at P = 4, 8, 16 and 4x6 at 32) traced at 4, 8, 16 and placed at 32 with
``--grid 4x6x1``, event for event."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import needs_mpi, trace_c_program
from logical_model import LogicalModel, from_traces
from logical_model.model import _load_role
from logical_model.rules import ClassComm, ClassGrid, PeerRule, infer_class_grid
from logical_model.statistical import Space, StatisticalError, comm_families
from logical_model.topology import DimsRule, SubGrid
from signature.errors import ExtrapolationError

PARTICLES = PeerRule("member", {"kind": "notmod", "m": 4, "j": 3})


def _gromacs_like(P: int, dims: tuple[int, int]) -> dict[int, np.ndarray]:
    """The communicators GROMACS's NS step uses at P: the particle ranks' and the PME
    ranks' (a split every 4th rank), the load communicator along dimension 0 through the
    origin of the particle grid ``dims``, and one along dimension 1 per position on
    dimension 0 (where it is over 1 wide)."""
    parts = np.flatnonzero(np.arange(P) % 4 != 3)
    pme = np.flatnonzero(np.arange(P) % 4 == 3)
    grid = np.arange(len(parts)).reshape(dims)
    comms = {4: parts, 5: parts[grid[:, 0]]}
    if len(pme) > 1:
        comms[14] = pme
    if dims[1] > 1:
        for x in range(dims[0]):
            comms[100 + x] = parts[grid[x, :]]
    return comms


def _members(role, P: int) -> list[list[int]]:
    colour, local, _ = role.layout(np.arange(P), P)
    out = []
    for c in range(role.n_comms(P)):
        sel = np.flatnonzero(colour == c)
        out.append(sel[np.argsort(local[sel])].tolist())
    return out


def test_the_particle_ranks_load_communicators_are_lines_of_their_grid():
    used = {4: _gromacs_like(4, (3, 1)), 8: _gromacs_like(8, (6, 1)), 16: _gromacs_like(16, (4, 3))}
    keys, fams = comm_families(used)
    roles = [f[0] for f in fams]
    grids = [r for r in roles if isinstance(r, ClassGrid)]
    assert any(isinstance(r, ClassComm) for r in roles)
    assert len(grids) == 2, [r.describe() for r in roles]
    origin = next(r for r in grids if r.origin)
    rows = next(r for r in grids if not r.origin)
    assert origin.grid.keep == (True, False) and rows.grid.keep == (False, True)
    assert dict(origin.grid.rule.table) == {3: (3, 1), 6: (6, 1), 12: (4, 3)}
    # every communicator of every P belongs to a family
    for P, cs in used.items():
        assert set(keys[P]) == set(cs)
    # at an unseen P the grid is unknown until given (--grid 8x3x1 at P = 32)
    with pytest.raises(ValueError, match="give them"):
        origin.layout(np.arange(32), 32)
    fixed = DimsRule("traced", 2, table=origin.grid.rule.table, fixed=((24, (8, 3)),))
    at32 = {r.origin: ClassGrid(r.members, SubGrid(fixed, r.grid.keep), r.origin) for r in grids}
    real = _gromacs_like(32, (8, 3))
    assert _members(at32[True], 32) == [real[5].tolist()]
    assert _members(at32[False], 32) == [real[100 + x].tolist() for x in range(8)]
    # the PME ranks are on none of them
    assert (at32[False].layout(np.arange(3, 32, 4), 32)[0] == -1).all()
    # world() inverts layout() for the ranks on the communicators
    for role in at32.values():
        colour, local, _ = role.layout(np.arange(32), 32)
        on = colour >= 0
        assert np.array_equal(role.world(colour[on], local[on], 32), np.flatnonzero(on))


def test_a_class_grid_space_holds_only_the_ranks_on_its_communicators():
    role = ClassGrid(PARTICLES, SubGrid(DimsRule("traced", 2, table=((12, (4, 3)),)), (True, False)), True)
    inside, group, local, size = Space(role=role).layout(np.arange(16), 16)
    assert np.flatnonzero(inside).tolist() == [0, 4, 8, 12]
    assert local[inside].tolist() == [0, 1, 2, 3] and (size[inside] == 4).all()
    assert role.n_comms(16) == 1


def test_a_class_grid_round_trips_through_json():
    role = ClassGrid(PARTICLES, SubGrid(DimsRule("traced", 2, table=((3, (3, 1)), (12, (4, 3)))), (False, True)))
    back = _load_role(role.to_dict())
    assert back == role and hash(back) == hash(role)
    assert _members(back, 16) == _members(role, 16)


def test_a_communicator_outside_every_class_and_grid_is_still_refused():
    used = {8: {4: np.array([0, 1, 2, 4, 5, 6]), 9: np.array([0, 5])},
            16: {4: np.flatnonzero(np.arange(16) % 4 != 3), 9: np.array([0, 9, 13])}}
    with pytest.raises(StatisticalError, match="follows no split"):
        comm_families(used)


@st.composite
def class_grid_cases(draw):
    """A class (every m-th rank, or all but every m-th), a row-major 2-D grid over its
    ranks at three traced P and a fourth, which dimension the lines keep, and whether only
    the line through the origin is made."""
    m = draw(st.integers(2, 5))
    j = draw(st.integers(0, m - 1))
    kind = draw(st.sampled_from(("mod", "notmod")))
    rule = PeerRule("member", {"kind": kind, "m": m, "j": j})
    keep = draw(st.sampled_from(((True, False), (False, True))))
    origin = draw(st.booleans())
    Ps = sorted(draw(st.lists(st.integers(2, 12), min_size=4, max_size=4, unique=True)))
    Ps = [m * p for p in Ps]
    table = []
    for P in Ps:
        n = int((rule(np.arange(P), P) >= 0).sum())
        pairs = [(a, n // a) for a in range(1, n + 1) if n % a == 0]
        table.append((n, draw(st.sampled_from(pairs))))
    return rule, keep, origin, Ps, table


@settings(max_examples=60, deadline=None)
@given(class_grid_cases())
def test_lines_of_a_class_grid_are_recovered_and_placed_at_an_unseen_p(case):
    rule, keep, origin, Ps, table = case
    truth = ClassGrid(rule, SubGrid(DimsRule("traced", 2, table=tuple(table)), keep), origin)
    fit, unseen = Ps[:3], Ps[3]
    observed = {P: [np.asarray(c) for c in _members(truth, P) if len(c) > 1] for P in fit}
    observed = {P: v for P, v in observed.items() if v}
    sizes = {n: d for n, d in table[:3]}
    # the traces must show a 2-D grid somewhere and two sizes, else nothing is to be learned
    if len(observed) < 2 or not any(min(sizes[int((rule(np.arange(P), P) >= 0).sum())]) > 1 for P in observed):
        return
    found = infer_class_grid(observed, rule)
    assert found, (observed, truth.describe())
    # each reading reproduces every traced P; placed with the unseen P's grid given, the
    # first one (rows before columns) gives the communicators where it keeps the same dimension
    n_unseen = table[3][0]
    assert any(r.grid.keep == keep and r.origin == origin for r in found), [r.describe() for r in found]
    for role in found:
        for P, ms in observed.items():
            assert [c for c in _members(role, P) if len(c) > 1] == [c.tolist() for c in ms]
        if role.grid.keep == keep and role.origin == origin:
            at = ClassGrid(rule, SubGrid(DimsRule("traced", 2, table=role.grid.rule.table,
                                                  fixed=((n_unseen, table[3][1]),)), keep), origin)
            assert _members(at, unseen) == _members(truth, unseen)


# ---- the C program -------------------------------------------------------------------------
PROGRAMS = Path(__file__).parent / "programs"
UNSEEN, UNSEEN_GRID = 32, (4, 6, 1)


@pytest.fixture(scope="module")
def ddload(tmp_path_factory):
    """ddgrid.c with its load-balancing communicators (-DDDGRID_LOAD), traced at P = 4, 8, 16
    and 32 (10 steps: two balance the load)."""
    return trace_c_program(tmp_path_factory.mktemp("ddload"), PROGRAMS / "ddgrid.c", ["10"], (4, 8, 16), UNSEEN,
                           flags=("-DDDGRID_LOAD",))


@needs_mpi
def test_the_load_communicators_are_placed_with_the_given_grid_event_for_event(ddload):
    from test_real_codes import assert_same_events
    model = from_traces(ddload)
    assert all(ph.extrapolable for ph in model.phases), model.describe()
    roles = [s.comm_role for ph in model.phases for s in ph.slots if isinstance(s.comm_role, ClassGrid)]
    assert {(r.grid.keep, r.origin) for r in roles} == {((True, False), True), ((False, True), False)}
    # the particle grid at P = 32 is the user's to give, for the communicators as for the halo
    with pytest.raises(ExtrapolationError, match="give the 2-D grid of 24 ranks at P=32"):
        model.check_target(UNSEEN)
    placed = model.with_grid(UNSEEN, UNSEEN_GRID)
    assert_same_events(placed, ddload / "unseen" / f"P{UNSEEN}.h5")
    # the layout travels through JSON
    again = LogicalModel.from_dict(model.to_dict()).with_grid(UNSEEN, UNSEEN_GRID)
    assert_same_events(again, ddload / "unseen" / f"P{UNSEEN}.h5")


def test_groups_rows_and_columns_with_duplicated_columns_are_related():
    """GPAW's communicators at P = 8, 12, 16, 24: the domain of each of 4 k-point groups (a
    row of 4 x P/4) and the k-point communicator across the groups (a column), each column
    made twice (a library's own copy: two ids, the same members). The copies do not hide
    that the columns tile the ranks: both families are lines of the 4 x P/4 grid."""
    used = {}
    for P in (8, 12, 16, 24):
        grid = np.arange(P).reshape(4, P // 4)
        comms = {10 + i: grid[i] for i in range(4)}
        for j in range(P // 4):
            comms[100 + j] = comms[200 + j] = grid[:, j]
        used[P] = comms
    keys, fams = comm_families(used)
    layouts = [f[0] for f in fams if isinstance(f[0], SubGrid)]
    assert {(r.rule.name, r.rule.count, r.keep) for r in layouts} >= {("groups", 4, (False, True)),
                                                                        ("groups", 4, (True, False))}
    for P, comms in used.items():  # every communicator is one of a family's
        assert set(keys[P]) == set(comms)
