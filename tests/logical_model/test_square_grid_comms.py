"""Rows and columns of a process grid whose communicators are all of one size at a square
P (hpcc's P x Q: 2 x 2, 2 x 4, 4 x 4): :func:`~logical_model.statistical.comm_families`
tells the rows from the columns (communicators apart from each other, together holding
every rank) and relates each family across P before it tries a class split."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from logical_model.statistical import _apart, comm_families

GRIDS = {4: (2, 2), 8: (2, 4), 16: (4, 4)}  # hpcc's P x Q at the fit P


def _rows_cols(P: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    p, q = GRIDS[P]
    g = np.arange(P).reshape(p, q)
    return [g[i] for i in range(p)], [g[:, j] for j in range(q)]


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_rows_and_columns_of_one_size_are_two_families(seed):
    """Whatever ids the communicators have, the rows go to one family and the columns to
    the other at every P, the square P = 4 and 16 included."""
    rng = np.random.default_rng(seed)
    used, truth = {}, {}
    for P in GRIDS:
        rows, cols = _rows_cols(P)
        ids = rng.permutation(len(rows) + len(cols)) + 10
        used[P] = {int(i): m for i, m in zip(ids, rows + cols)}
        truth[P] = {int(i): ("row" if n < len(rows) else "col") for n, i in enumerate(ids)}
    keys, fams = comm_families(used)
    assert len(fams) == 2
    for P in GRIDS:
        by_family: dict = {}
        for c, key in keys[P].items():
            by_family.setdefault(key, set()).add(truth[P][c])
        assert all(len(v) == 1 for v in by_family.values()), (P, by_family)
    # the families' layouts give the rows and the columns back at the fit P
    for role, _ in fams:
        for P in GRIDS:
            colour, local, size = role.layout(np.arange(P), P)
            groups = {tuple(np.flatnonzero(colour == c).tolist()) for c in np.unique(colour)}
            rows, cols = _rows_cols(P)
            assert groups in ({tuple(r.tolist()) for r in rows}, {tuple(c.tolist()) for c in cols})


def test_apart_keeps_a_communicators_family_only():
    rows, cols = _rows_cols(16)
    comms = {n: m for n, m in enumerate(rows + cols)}
    assert _apart(comms, 4, 0) == [[0, 1, 2, 3]]
    assert sorted(map(sorted, _apart(comms, 4))) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_a_family_two_layouts_give_names_the_other():
    """4 groups of P/4 consecutive ranks at P = 8, 12, 16 are MPI_Dims_create's rows too (4 x 2,
    4 x 3, 4 x 4): the family takes the named rule and ``readings`` holds the groups layout,
    which makes 4 communicators of 6 at P = 24 where MPI_Dims_create's rows are 6 of 4, for
    the model to check there (a statistical run's space, as an exact slot's communicators)."""
    used = {P: {10 + i: np.arange(i * P // 4, (i + 1) * P // 4) for i in range(4)} for P in (8, 12, 16)}
    readings: dict = {}
    keys, fams = comm_families(used, readings)
    assert len(fams) == 1 and fams[0][0].rule.name == "dims_create"
    groups = [r for r in readings[0] if r.rule.name == "groups"]
    assert groups and groups[0].rule.describe() == "4 x P/4 (dimension 0 fixed)"
    assert (int(fams[0][0].layout(np.arange(24), 24)[2]), int(groups[0].layout(np.arange(24), 24)[2])) == (4, 6)
    assert comm_families(used)[1] == fams  # (the same families without the readings asked for)
