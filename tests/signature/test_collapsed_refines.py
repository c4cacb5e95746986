"""A Newton-Krylov time stepper on a non-periodic 2-D grid (SUNDIALS ARKODE's heat2D with
PCG, as traced): every Krylov iteration is a halo exchange and a run of Allreduces whose
length the solver's state decides (5 in a plain iteration, 3 at a solve's convergence
test, 2 at a step's end), every Newton iteration starts with one more halo exchange.

The ranks see one stream in different widths: a corner rank exchanges with 2 neighbours,
an edge rank with 3, an interior rank with 4. Cut on its own, the edge rank's stream
left a solve's last iteration ('halo, Allreduce x3', 15 of the 17 calls of its plain
iteration) joined to the next Newton iteration, while the corner rank's, cut with the
runs collapsed, split them; aligned, the ranks took the coarser cut, and P = 4 (all
corners) found other kinds of iteration than P = 8 and 16: the model left 5% of the runs
out. The collapsed cut is now taken wherever it only splits the blocks the plain cut left
whole (``iterations._refines``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from signature import extract
from signature.iterations import _refines

from synthetic import build_trace


def _grid(r: int, px: int, py: int) -> list[int]:
    x, y = r % px, r // px
    out = []
    for dx, dy in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        if 0 <= x + dx < px and 0 <= y + dy < py:
            out.append((x + dx) + (y + dy) * px)
    return out


def _solver(px: int, py: int, krylov: np.ndarray, newton: int):
    """``krylov[s, k]``: the Krylov iterations of Newton iteration k of step s (the same on
    every rank: the solver's global state decides them)."""
    def halo(r: int) -> list:
        calls = []
        for nb in _grid(r, px, py):  # four calls per neighbour, as Irecv, Isend, 2 Waits
            calls += [("Send", nb, 4096), ("Recv", nb, 4096)] * 2
        return calls

    def step(r: int, s: int) -> list:
        calls = []
        for k in range(newton):
            calls += halo(r)  # the Newton iteration's residual
            for _ in range(int(krylov[s, k])):
                calls += halo(r) + [("Allreduce", -1, 8)] * 5
            calls += halo(r) + [("Allreduce", -1, 8)] * 3  # the solve's convergence test
        return calls + halo(r) + [("Allreduce", -1, 8)] * 2  # the step's error estimate
    return step


def _signatures(seed: int, steps: int = 12, newton: int = 3):
    rng = np.random.default_rng(seed)
    # (Krylov solves of 15-25 iterations: with few, the collapsed cut explained clearly
    # more of every rank's stream and won on each; the plain iteration must dominate)
    krylov = rng.integers(15, 25, size=(steps, newton))
    sigs = {P: extract(build_trace(P, steps, _solver(px, py, krylov, newton), seed=seed))
            for P, (px, py) in {4: (2, 2), 8: (4, 2), 16: (4, 4)}.items()}
    return sigs, krylov


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**16))
def test_every_grid_width_cuts_the_solver_alike(seed):
    steps, newton = 12, 3
    sigs, krylov = _signatures(seed, steps, newton)
    for P, sig in sigs.items():
        loops = sorted(((p.weight, p.ops) for p in sig.loop_phases), reverse=True)
        # the Krylov iterations, the convergence tests and the steps' ends are one kind
        # ('halo, Allreduce' with the runs collapsed), the Newton iterations' starts
        # (two halos in a row) another; the run's first residual is the initial part's
        assert [w for w, _ in loops] == [int(krylov.sum()) - (steps * newton - 1) + steps * newton + steps,
                                         steps * newton - 1], (P, loops)
        assert all(ops == ("Send", "Recv", "Allreduce") for _, ops in loops)


def test_refines_needs_the_coarse_starts_and_more_iterations():
    coarse = np.array([0, 3, 10, 17, 31, 38, 40])
    coarse_loop = np.array([-1, 0, 0, 0, 0, -1])
    fine = np.array([0, 3, 10, 17, 24, 31, 38, 40])
    fine_loop = np.array([-1, 0, 0, 0, 0, 0, -1])
    assert _refines(fine, fine_loop, coarse, coarse_loop)
    assert not _refines(coarse, coarse_loop, fine, fine_loop)  # fewer iterations
    shifted = fine - np.array([0, 1, 1, 1, 1, 1, 1, 0])  # every start a call earlier
    assert not _refines(shifted, fine_loop, coarse, coarse_loop)
