"""Communication rules: who talks to whom, as a function of the rank and P.

A :class:`PeerRule` maps every rank of a P-process run to its peer in one
event slot of a phase, or to -1 where the rank has no such event (a boundary
rank of a non-periodic grid, an out-of-range shift). :func:`infer_peer`
finds the rule that reproduces *every* observation at *every* traced P
exactly, both the peers and which ranks have the event, or returns None: a
slot no rule fits is reported, never guessed (Panadero et al. §2.2.1).

Families, tried from the most specific to the most general:

``cart``   neighbour at a fixed coordinate displacement on the process grid
           (its dims rule, rank order and periods: the recorded Cartesian
           communicator's, or, for a program that computes its neighbours by
           rank arithmetic, a grid inferred from the peers themselves: every
           dims rule of :mod:`~logical_model.topology`, row- or column-major,
           periodic or not per dimension);
``shift``  rank + k(P), modulo P (a ring) or only where it stays in 0..P-1,
           with k a constant or a*P^e + b for e in {1/2, 1} (strides that
           grow with the grid: +-sqrt(P), P/2);
``xor``    rank XOR s(P), s = 2^i or P / 2^i (hypercube, butterfly);
``fixed``  one peer for every rank: a constant or a*P + b (a root, the last
           rank), optionally absent on the peer itself;
``block``  the j-th rank of the rank's block of m (a PME rank that serves the
           particle ranks before it), absent on that rank itself;
``within`` another rule that only a class of ranks follows (every m-th rank:
           PME ranks, ranks active at a coarse multigrid level): :func:`infer_within`;
``member`` not a peer but a class of ranks that have an event (one rank,
           every rank but one, every m-th rank): :func:`infer_members`.

A grid neighbour is also sought on a grid whose dims follow no rule at all
(:func:`traced_grid_rules`: GROMACS's load-based domain grid over its particle
ranks): row-major, its dims at each traced size found from the peers themselves;
at another size only ``--grid`` can give them.

Every rule evaluates vectorised over a rank array and serialises to JSON.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from .topology import DimsRule, _ordered_factorisations, candidate_rules, coords, dims_create, neighbour

__all__ = ["Grid", "PeerRule", "Observation", "infer_peer", "infer_root", "infer_members", "infer_within",
           "inferred_grids", "traced_grid_rules", "on_traced_grid", "ClassComm", "infer_class_comm"]


@dataclasses.dataclass(frozen=True)
class Grid:
    """A process grid as a function of P: its dims rule (MPI_Dims_create unless
    another rule is given), periods and rank order."""

    ndims: int
    periods: tuple[bool, ...]
    rule: DimsRule | None = None
    order: str = "row"

    def dims(self, P: int) -> tuple[int, ...]:
        if self.rule is not None:
            return self.rule.dims(P)
        return dims_create(P, self.ndims)

    def describe(self) -> str:
        rule = self.rule.describe() if self.rule else f"MPI_Dims_create(P, {self.ndims})"
        per = "".join("p" if x else "-" for x in self.periods)
        return (f"{self.ndims}-D grid, dims {rule}, periods {per}"
                + (", column-major ranks" if self.order == "col" else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"ndims": self.ndims, "periods": list(self.periods),
                "rule": self.rule.to_dict() if self.rule else None, "order": self.order}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Grid":
        return cls(int(d["ndims"]), tuple(bool(x) for x in d["periods"]),
                   DimsRule.from_dict(d["rule"]) if d.get("rule") else None, d.get("order", "row"))


@dataclasses.dataclass(frozen=True)
class Observation:
    """One slot at one traced P: the ranks that have the event and their peers."""

    P: int
    ranks: np.ndarray  # ranks that have the event
    peers: np.ndarray  # their peers (world ranks)


def _frac(x: float, max_den: int = 64) -> float | None:
    """x as a simple fraction (denominator <= 64), else None."""
    f = Fraction(x).limit_denominator(max_den)
    return float(f) if abs(float(f) - x) <= 1e-9 * max(1.0, abs(x)) else None


@dataclasses.dataclass(frozen=True)
class PeerRule:
    """peer = f(rank, P); -1 where the rank has no event."""

    family: str
    params: dict[str, Any]

    # ---- evaluation --------------------------------------------------------------
    def _k_value(self, P):
        """a P^e + b, unrounded (one P, or one per rank)."""
        p = self.params
        return p.get("a", 0.0) * np.asarray(P, float) ** p.get("e", 0.0) + p.get("b", 0.0)

    def _k(self, P):
        if np.ndim(P):  # one P per rank (communicators of different sizes: a class split)
            return np.rint(self._k_value(P)).astype(np.int64)
        return int(round(float(self._k_value(P))))

    def __call__(self, rank: np.ndarray, P: int, grid: Grid | None = None) -> np.ndarray:
        rank = np.asarray(rank, np.int64)
        f, p = self.family, self.params
        if f == "cart" and np.ndim(P):  # communicators of different sizes: each its own grid
            sizes = np.broadcast_to(np.asarray(P, np.int64), rank.shape)
            q = np.full(rank.shape, -1, np.int64)
            for size in np.unique(sizes).tolist():
                sel = sizes == size
                q[sel] = self(rank[sel], int(size), grid)
            return q
        if f == "cart":
            grid = p.get("grid") or grid  # an inferred grid travels with its rule
            if grid is None:
                raise ValueError("a cart rule needs the process grid")
            dims = grid.dims(P)
            q = neighbour(rank, dims, grid.periods, tuple(p["disp"]), grid.order)
            skip = p.get("skip")
            if skip:  # no call where the neighbour is the rank itself (LAMMPS: sendproc != me)
                q = np.where(q == rank, -1, q)
            if skip == "pair":  # ... nor where it is also the one the other way (a ring of 2)
                back = neighbour(rank, dims, grid.periods, tuple(-x for x in p["disp"]), grid.order)
                q = np.where(back == q, -1, q)
            return q
        if f == "shift":
            q = rank + self._k(P)
            if p["periodic"]:
                return q % P
            return np.where((q >= 0) & (q < P), q, -1)
        if f == "xor":
            q = rank ^ self._k(P)
            return np.where(q < P, q, -1)
        if f == "fixed":
            c = self._k(P)
            out = np.full(rank.shape, c, np.int64)
            if p.get("not_self"):
                out[rank == c] = -1
            return out
        if f == "block":  # the j-th rank of each block of m (a PME rank serving its particle ranks)
            m = int(p["m"])
            q = rank // m * m + int(p["j"])
            return np.where((q < P) & (q != rank), q, -1)
        if f == "within":  # a rule that only a class of ranks follows: -1 on the others
            inner, members = p["rule"], p["members"]
            return np.where(members(rank, P, grid) >= 0, inner(rank, P, grid), -1)
        if f == "member":  # the rank itself where it belongs to the class, else -1
            if p["kind"] == "mod":
                keep = rank % int(p["m"]) == int(p["j"])
            elif p["kind"] == "notmod":
                keep = rank % int(p["m"]) != int(p["j"])
            elif p["kind"] == "first":  # the first k(P) ranks, k rounded down as P / 4 is in C
                keep = rank < np.floor(self._k_value(P) + 1e-9)
            elif p["kind"] == "group":  # rank j of each of c groups of P/c consecutive ranks
                c = int(p["c"])
                if P % c:
                    raise ValueError(f"P={P} is not a multiple of {c} groups")
                keep = rank % (P // c) == int(p["j"])
            else:  # "is" / "not": the rank k(P)
                keep = (rank == self._k(P)) == (p["kind"] == "is")
            return np.where(keep, rank, -1)
        raise ValueError(f"unknown rule family {f!r}")

    # ---- text and JSON -----------------------------------------------------------
    def _k_text(self) -> str:
        p = self.params
        a, e, b = p.get("a", 0.0), p.get("e", 0.0), p.get("b", 0.0)
        if e == 0 or a == 0:
            return f"{int(round(a + b)):d}"
        base = {1.0: "P", 0.5: "sqrt(P)"}.get(e, f"P^{e:g}")
        fa = Fraction(a).limit_denominator(64)
        term = base if fa == 1 else (f"{base}/{fa.denominator}" if fa.numerator == 1 else f"{fa}*{base}")
        if b:
            term += f" {'+' if b > 0 else '-'} {abs(int(round(b)))}"
        return term

    def describe(self) -> str:
        f, p = self.family, self.params
        if f == "cart":
            disp = ",".join(f"{d:+d}" for d in p["disp"])
            skip = {"self": ", where not the rank itself",
                    "pair": ", where neither the rank itself nor its neighbour the other way"
                    }.get(p.get("skip"), "")
            return f"grid neighbour ({disp}){skip}" + (f" on the inferred {p['grid'].describe()}"
                                                       if p.get("grid") else "")
        if f == "shift":
            k = self._k_text()
            k = k if k.startswith("-") else "+" + k
            return f"rank {k[0]} {k[1:]}" + (" mod P" if p["periodic"] else " (if in range)")
        if f == "xor":
            return f"rank xor {self._k_text()}"
        if f == "fixed":
            return f"rank {self._k_text()}" + (" (not itself)" if p.get("not_self") else "")
        if f == "block":
            return f"rank {int(p['j'])} of its block of {int(p['m'])} (not itself)"
        if f == "within":
            return f"{p['rule'].describe()} on {p['members'].describe()}"
        if f == "member":
            if p["kind"] == "mod":
                return f"ranks r with r mod {int(p['m'])} = {int(p['j'])}"
            if p["kind"] == "notmod":
                return f"ranks r with r mod {int(p['m'])} != {int(p['j'])}"
            if p["kind"] == "first":
                return f"ranks r < {self._k_text()}"
            if p["kind"] == "group":
                return (f"ranks r with r mod P/{int(p['c'])} = {int(p['j'])} (rank {int(p['j'])} of each of "
                        f"{int(p['c'])} groups)")
            return f"rank {self._k_text()}" if p["kind"] == "is" else f"every rank but {self._k_text()}"
        return f

    def to_dict(self) -> dict[str, Any]:
        params = dict(self.params)
        if params.get("grid") is not None:
            params["grid"] = params["grid"].to_dict()
        for k in ("rule", "members"):
            if k in params:
                params[k] = params[k].to_dict()
        return {"family": self.family, "params": params}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PeerRule":
        params = dict(d["params"])
        if "disp" in params:
            params["disp"] = tuple(params["disp"])
        if params.get("grid") is not None:
            params["grid"] = Grid.from_dict(params["grid"])
        for k in ("rule", "members"):
            if k in params:
                params[k] = PeerRule.from_dict(params[k])
        return cls(d["family"], params)


# ---- inference ------------------------------------------------------------------------
def _reproduces(rule: PeerRule, obs: Sequence[Observation], grid: Grid | None) -> bool:
    for o in obs:
        try:
            pred = rule(np.arange(o.P), o.P, grid)
        except (ValueError, ZeroDivisionError):
            return False
        present = np.flatnonzero(pred >= 0)
        if len(present) != len(o.ranks) or np.any(present != np.sort(o.ranks)):
            return False
        order = np.argsort(o.ranks)
        if np.any(pred[o.ranks[order]] != o.peers[order]):
            return False
    return True


def _k_candidates(values: dict[int, list[int]]) -> list[dict[str, float]]:
    """Parameter sets (a, e, b) of k(P) = a*P^e + b matching one candidate value per P.

    ``values[P]`` lists the acceptable k at P (e.g. an offset and its wrap-around).
    """
    Ps = sorted(values)
    out = []
    for k0 in values[Ps[0]]:
        out.append({"a": 0.0, "e": 0.0, "b": float(k0)})
    if len(Ps) >= 2:
        P0, P1 = Ps[0], Ps[1]
        for e in (1.0, 0.5):
            x0, x1 = P0 ** e, P1 ** e
            if abs(x1 - x0) < 1e-12:
                continue
            for k0 in values[P0]:
                for k1 in values[P1]:
                    a = _frac((k1 - k0) / (x1 - x0))
                    if a is None or a == 0:
                        continue
                    b = k0 - a * x0
                    if abs(b - round(b)) > 1e-9:
                        continue
                    out.append({"a": a, "e": e, "b": float(round(b))})
    return out


def _product(options):
    return [tuple(int(x) for x in c) for c in itertools.product(*options)]


def _cart_candidates(seen: Sequence[Observation], grid: Grid, inferred: bool) -> list[PeerRule]:
    """Displacements on ``grid`` that one rank's peer gives at each traced P, the
    nearest way round a periodic dimension (a program that reaches its +1 neighbour
    as -3 on a ring of 4 is not considered); half-way round (+1 and -1 on a ring of
    2) both ways, so a small P can leave the direction open."""
    disps: dict[tuple[int, ...], None] = {}
    for o in seen:
        try:
            dims = grid.dims(o.P)
        except ValueError:
            return []
        if np.prod(dims) != o.P:
            return []
        disp = coords(o.peers[:1], dims, grid.order)[0] - coords(o.ranks[:1], dims, grid.order)[0]
        options = []
        for d, n in enumerate(dims):
            x = int(disp[d])
            alts = {x}
            if grid.periods[d] and n > 1:  # the nearest way round the ring (both, half-way)
                x = x % n if x % n <= n // 2 else x % n - n
                alts = {x, -x} if 2 * abs(x) == n else {x}
            options.append(sorted(alts, key=abs))
        for combo in _product(options):
            disps.setdefault(combo, None)
    extra = {"grid": grid} if inferred else {}
    return [PeerRule("cart", {"disp": d, **extra}) for d in
            sorted(disps, key=lambda d: sum(abs(x) for x in d))]


def inferred_grids() -> list[Grid]:
    """Grids tried for a program that computes neighbours by rank arithmetic: 2-D and
    3-D, every dims rule but the box-dependent one, row- or column-major, each
    dimension periodic or not."""
    out = []
    for nd in (2, 3):
        for rule in candidate_rules(nd)[:5]:
            for order in ("row", "col"):
                for periods in itertools.product((False, True), repeat=nd):
                    out.append(Grid(nd, periods, rule, order))
    return out


#: infer_peer's answers by the observations' content (a phase's slots are modelled once per
#: way of keying them, and many slots see the same peers): (rule, alternatives, weaker)
_INFERRED: dict[tuple, tuple] = {}


def infer_peer(obs: Sequence[Observation], grid: Grid | None = None, *,
               alternatives: list | None = None, weaker: list | None = None) -> PeerRule | None:
    """The simplest rule reproducing every observation exactly, or None (see
    :func:`_infer_peer`; answers are remembered by the observations' content)."""
    key = (grid, tuple((int(o.P), np.asarray(o.ranks, np.int64).tobytes(), np.asarray(o.peers, np.int64).tobytes())
                       for o in obs), weaker is not None)
    hit = _INFERRED.get(key)
    if hit is None:
        alts: list = []
        weak: list | None = [] if weaker is not None else None
        rule = _infer_peer(obs, grid, alternatives=alts, weaker=weak)
        if len(_INFERRED) > 100_000:
            _INFERRED.clear()
        hit = _INFERRED[key] = (rule, tuple(alts), tuple(weak or ()))
    if alternatives is not None:
        alternatives.extend(hit[1])
    if weaker is not None:
        weaker.extend(hit[2])
    return hit[0]


def _infer_peer(obs: Sequence[Observation], grid: Grid | None = None, *,
                alternatives: list | None = None, weaker: list | None = None) -> PeerRule | None:
    """The simplest rule reproducing every observation exactly, or None.

    ``obs`` holds one :class:`Observation` per traced P (ranks without the
    event are those not listed; several per P when the slot runs on several
    communicators, in their own ranks). ``grid`` is the application's process grid
    when its trace recorded a Cartesian communicator; without one, grid
    neighbours are also sought on :func:`inferred_grids` after the rank-arithmetic
    families (2-D grids before 3-D ones: a 3-D grid is tried only when no 2-D one
    fits; grids are also tried when the family found has a stride growing with P,
    which a grid may explain as well). Where several grid rules reproduce every P (two displacements on a
    periodic dimension 1 or 2 wide at every fit P; several inferred grids), the
    first is returned and the others are appended to ``alternatives``: the caller
    checks whether they part at the target and, if so, refuses it naming both.
    The 3-D grid rules that also reproduce every P when a 2-D one does are appended
    to ``weaker``: less likely readings the caller reports where they part, without
    refusing.
    """
    obs = [o for o in sorted(obs, key=lambda o: o.P)]
    seen = [o for o in obs if len(o.ranks)]
    if not seen:
        return None
    if grid is not None:
        # a neighbour on the declared grid; where no plain one fits, one the program skips
        # where it is the rank itself (a dimension 1 wide), or also the neighbour the other
        # way (a dimension 2 wide, where one exchange serves both directions)
        base = _cart_candidates(seen, grid, False)
        for skip in (None, "self", "pair"):
            cands = base if skip is None else [PeerRule("cart", {**r.params, "skip": skip}) for r in base]
            found = [r for r in cands if _reproduces(r, obs, grid)]
            if found:  # several: the fit P cannot tell them apart; the target may
                if alternatives is not None:
                    alternatives.extend(found[1:])
                return found[0]
    # per P, the candidate shift offsets, xor masks and fixed peers (one rank's view)
    cands: list[PeerRule] = []
    # an offset, the same mod P either way round, and once more round (rank + 4 mod P is the
    # rank itself at P = 4)
    off = {o.P: [int(o.peers[0] - o.ranks[0]), int((o.peers[0] - o.ranks[0]) % o.P),
                 int((o.peers[0] - o.ranks[0]) % o.P - o.P), int((o.peers[0] - o.ranks[0]) % o.P + o.P)]
           for o in seen}
    msk = {o.P: [int(o.peers[0] ^ o.ranks[0])] for o in seen}
    fix = {o.P: [int(o.peers[0])] for o in seen}
    for params in _k_candidates(off):
        for periodic in (False, True):
            cands.append(PeerRule("shift", {**params, "periodic": periodic}))
    for params in _k_candidates(fix):
        for not_self in (False, True):
            cands.append(PeerRule("fixed", {**params, "not_self": not_self}))
    cands += [PeerRule("xor", p) for p in _k_candidates(msk)]
    r0, q0 = int(seen[0].ranks[0]), int(seen[0].peers[0])
    cands += [PeerRule("block", {"m": m, "j": q0 % m}) for m in range(2, 9) if q0 // m == r0 // m]
    # constant rules first (they extrapolate safely), then P-dependent ones; a P-dependent
    # stride is one reading among the grids that may also reproduce every P
    cands.sort(key=lambda r: r.params.get("e", 0.0) != 0.0)
    chosen = next((rule for rule in cands if _reproduces(rule, obs, None)), None)
    if chosen is not None and (grid is not None or chosen.params.get("e", 0.0) == 0.0):
        return chosen
    if grid is not None:
        return None
    found, more = ([chosen], []) if chosen is not None else ([], [])
    for g in inferred_grids():  # 2-D grids first; 3-D ones only when no 2-D one fits
        if found and g.ndims > (found[0].params["grid"].ndims if found[0].family == "cart" else 2):
            if weaker is None:
                break
            more += [r for r in _cart_candidates(seen, g, True) if _reproduces(r, obs, None)]
            continue
        found += [r for r in _cart_candidates(seen, g, True) if _reproduces(r, obs, None)]
    if found and not any(r.family == "cart" for r in found):
        # a stride growing with P is also read as a neighbour on a grid whose dims follow no
        # rule (a load-based choice: :func:`traced_grid_rules`), which only --grid decides at
        # the target
        found += traced_grid_rules(obs)
    if not found:
        return None
    if weaker is not None:
        weaker.extend(more)
    if alternatives is not None:
        alternatives.extend(found[1:])
    return found[0]


def on_traced_grid(rule: PeerRule | None) -> Grid | None:
    """The grid of a neighbour rule whose dims follow no rule (:func:`traced_grid_rules`),
    or None."""
    if not isinstance(rule, PeerRule) or rule.family != "cart":
        return None
    g = rule.params.get("grid")
    return g if g is not None and g.rule is not None and g.rule.name == "traced" else None


#: traced_grid_rules' answers by the observations' content (the keying attempts of a phase
#: model many slots on the same peers)
_TRACED: dict[tuple, list] = {}


def traced_grid_rules(obs: Sequence[Observation], ndims: int = 2) -> list[PeerRule]:
    """:func:`_traced_grid_rules`, its answers remembered by the observations' content."""
    key = (ndims, tuple(sorted((int(o.P), np.asarray(o.ranks, np.int64).tobytes(),
                                np.asarray(o.peers, np.int64).tobytes()) for o in obs)))
    if key not in _TRACED:
        if len(_TRACED) > 100_000:
            _TRACED.clear()
        _TRACED[key] = _traced_grid_rules(obs, ndims)
    return list(_TRACED[key])


def _traced_grid_rules(obs: Sequence[Observation], ndims: int = 2) -> list[PeerRule]:
    """Neighbour rules on a row-major grid whose dims follow no dims rule, each size's
    dims found from the peers (GROMACS's domain grid over its particle ranks: 3x1, 6x1,
    4x3 at 3, 6, 12 ranks, a load-based choice). One displacement, periods and skip for
    every size; each size (``Observation.P``: the communicator's size) gets the first of
    its ordered factorisations that reproduces its observations (an observation without
    ranks: a size where no rank has the event, a dimension 1 wide). Needs two or more
    sizes with events (one shows no rule at all). The rules found, fewest moves first."""
    seen = [o for o in obs if len(o.ranks)]
    sizes = sorted({int(o.P) for o in obs})
    if len({int(o.P) for o in seen}) < 2 or max(sizes) > 4096:
        return []
    by_size = {P: [o for o in obs if o.P == P] for P in sizes}

    def grid(table, periods):
        return Grid(ndims, periods, DimsRule("traced", ndims, table=tuple(table)), "row")

    o0 = seen[0]
    cands: dict[tuple, None] = {}
    for dims in _ordered_factorisations(int(o0.P), ndims):
        for periods in itertools.product((True, False), repeat=ndims):
            for r in _cart_candidates([o0], grid(((int(o0.P), dims),), periods), True):
                cands.setdefault((r.params["disp"], periods), None)
    found = []
    for disp, periods in sorted(cands, key=lambda c: (sum(abs(x) for x in c[0]), -sum(c[1]))):
        if not any(disp):
            continue
        for skip in (None, "self", "pair"):
            extra = {"skip": skip} if skip else {}
            table = []
            for P in sizes:
                fit = next((dims for dims in _ordered_factorisations(P, ndims) if _reproduces(
                    PeerRule("cart", {"disp": disp, "grid": grid(((P, dims),), periods), **extra}),
                    by_size[P], None)), None)
                if fit is None:
                    break
                table.append((P, fit))
            else:
                if any(sum(x > 1 for x in d) > 1 for _, d in table):  # a 2-D grid somewhere, else
                    found.append(PeerRule("cart", {"disp": disp, "grid": grid(table, periods), **extra}))
                break  # a 1-D rule (shift, block) is the reading
    return found


def infer_within(obs: Sequence[Observation], members: PeerRule, grid: Grid | None = None) -> PeerRule | None:
    """A peer rule that only the class ``members`` follows (the PME ranks of a particle/PME
    split, the ranks still active at a coarse multigrid level): the simplest rule
    reproducing every observation on the class's ranks, wrapped so that the others have
    no event; None when none does."""
    inner = []
    for o in obs:
        keep = members(o.ranks, o.P) >= 0
        inner.append(Observation(o.P, o.ranks[keep], o.peers[keep]))
    found = []
    seen = [o for o in inner if len(o.ranks)]
    if not seen:
        return None
    off = {o.P: [int(o.peers[0] - o.ranks[0]), int((o.peers[0] - o.ranks[0]) % o.P),
                 int((o.peers[0] - o.ranks[0]) % o.P - o.P), int((o.peers[0] - o.ranks[0]) % o.P + o.P)]
           for o in seen}
    cands = [PeerRule("shift", {**k, "periodic": per}) for k in _k_candidates(off) for per in (False, True)]
    cands += [PeerRule("xor", k) for k in _k_candidates({o.P: [int(o.peers[0] ^ o.ranks[0])] for o in seen})]
    cands += [PeerRule("fixed", {**k, "not_self": False}) for k in _k_candidates({o.P: [int(o.peers[0])] for o in seen})]
    cands.sort(key=lambda r: r.params.get("e", 0.0) != 0.0)
    for rule in cands:
        wrapped = PeerRule("within", {"rule": rule, "members": members})
        if _reproduces(wrapped, obs, grid):
            found.append(wrapped)
            break
    return found[0] if found else None


_MEMBERS: dict[tuple, PeerRule | None] = {}


def infer_members(members: dict[int, np.ndarray]) -> PeerRule | None:
    """The class of ranks that have an event (:func:`_infer_members`; answers are
    remembered by content)."""
    key = tuple(sorted((int(P), np.sort(np.asarray(r, np.int64)).tobytes()) for P, r in members.items()))
    if key not in _MEMBERS:
        if len(_MEMBERS) > 100_000:
            _MEMBERS.clear()
        _MEMBERS[key] = _infer_members(members)
    return _MEMBERS[key]


def _infer_members(members: dict[int, np.ndarray]) -> PeerRule | None:
    """The ranks that have an event, as a class of rank: one rank (0, the last, a*P + b),
    every rank but one, or every m-th rank, or all but every m-th (m <= 8, when some P has
    two of them), the first k(P) ranks, or rank j of each of c groups of P/c consecutive
    ranks (the groups' leaders: c <= 8 of them at every P, when two P show them); None
    when no class fits every P."""
    cands = []
    for kind in ("is", "not"):
        one = {}
        for P, ranks in members.items():
            pick = ranks if kind == "is" else np.setdiff1d(np.arange(P), ranks)
            if len(pick) != 1:
                break
            one[P] = [int(pick[0])]
        else:
            cands += [PeerRule("member", {"kind": kind, **k}) for k in _k_candidates(one)]
    # every m-th rank, where some P shows two of them (else it is one rank, above)
    cands += [PeerRule("member", {"kind": kind, "m": m, "j": j}) for kind in ("mod", "notmod")
              for m in range(2, 9) for j in range(m) if any(P > m + j for P in members)]
    # the first k(P) ranks, k over one at some P (else it is one rank, above)
    if all(np.array_equal(np.sort(r), np.arange(len(r))) for r in members.values()) \
            and any(1 < len(r) < P for P, r in members.items()):
        cands += [PeerRule("member", {"kind": "first", **k})
                  for k in _k_candidates({P: [len(r)] for P, r in members.items()})]
    # rank j of each of c groups: c members at every P (two P at least, one of them with
    # groups of more than j + 1 ranks, else a fixed stride says the same)
    sizes = {len(r) for r in members.values()}
    if len(members) >= 2 and len(sizes) == 1 and 2 <= next(iter(sizes)) <= 8:
        c = next(iter(sizes))
        if all(P % c == 0 for P in members):
            cands += [PeerRule("member", {"kind": "group", "c": c, "j": j})
                      for j in range(min(P // c for P in members))]
    for rule in cands:
        if all(np.array_equal(np.flatnonzero(rule(np.arange(P), P) >= 0), np.sort(r)) for P, r in members.items()):
            return rule
    return None


def complement_members(rule: PeerRule) -> PeerRule | None:
    """The class of the ranks a member rule leaves out (every m-th rank <-> the others, one
    rank <-> every rank but it), or None."""
    swap = {"is": "not", "not": "is", "mod": "notmod", "notmod": "mod"}
    kind = rule.params.get("kind")
    if rule.family != "member" or kind not in swap:
        return None
    return PeerRule("member", {**rule.params, "kind": swap[kind]})


def infer_root(roots: dict[int, int]) -> PeerRule | None:
    """The root of a rooted collective as a function of P (a constant or a*P + b)."""
    for params in _k_candidates({P: [r] for P, r in roots.items()}):
        rule = PeerRule("fixed", params)
        if all(rule._k(P) == r for P, r in roots.items()):
            return rule
    return None


@dataclasses.dataclass(frozen=True)
class ClassComm:
    """The communicators of a split of the ranks into a class and the others, as
    ``MPI_Comm_split(colour = whether in the class, key = rank)`` makes them (the PME
    ranks' and the particle ranks' communicators of a GROMACS-like split): colour 1 holds
    the ranks of ``members``, colour 0 the others, each in world order. The layout
    interface of :class:`~logical_model.topology.SubGrid`, with the size per rank (the
    two communicators differ in size). ``alone``: the class's communicator only (colour
    0), the others passing ``MPI_UNDEFINED`` (colour -1: on none), as a communicator of
    the groups' leaders is made."""

    members: PeerRule
    alone: bool = False

    def __hash__(self) -> int:  # a rule's parameters are a dict: hash its JSON
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def _split(self, P: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        inside = self.members(np.arange(P), P) >= 0
        local = np.where(inside, np.cumsum(inside) - 1, np.cumsum(~inside) - 1)
        size = np.where(inside, inside.sum(), P - inside.sum())
        colour = inside.astype(np.int64)
        if self.alone:  # one communicator: colour 0
            colour = np.where(inside, 0, -1)
            local[~inside], size[~inside] = -1, 0
        return colour, local, size

    def layout(self, rank: np.ndarray, P: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        colour, local, size = self._split(P)
        rank = np.asarray(rank, np.int64)
        return colour[rank], local[rank], size[rank]

    def world(self, colour: np.ndarray, local: np.ndarray, P: int) -> np.ndarray:
        inside = self.members(np.arange(P), P) >= 0
        groups = (np.flatnonzero(inside),) if self.alone else (np.flatnonzero(~inside), np.flatnonzero(inside))
        colour, local = np.asarray(colour, np.int64), np.asarray(local, np.int64)
        out = np.full(local.shape, -1, np.int64)
        for c, ranks in enumerate(groups):
            ok = (colour == c) & (local >= 0) & (local < len(ranks))
            out[ok] = ranks[local[ok]]
        return out

    def n_comms(self, P: int) -> int:
        return 1 if self.alone else 2

    def describe(self) -> str:
        if self.alone:
            return f"the communicator of {self.members.describe()} (the others on none)"
        return f"split into {self.members.describe()} and the others"

    def to_dict(self) -> dict:
        return {"kind": "class", "members": self.members.to_dict(), **({"alone": True} if self.alone else {})}

    @classmethod
    def from_dict(cls, d: dict) -> "ClassComm":
        return cls(PeerRule.from_dict(d["members"]), bool(d.get("alone", False)))


@dataclasses.dataclass(frozen=True)
class ClassGrid:
    """Communicators over a process grid of one class's ranks: the class's ranks in world
    order are the grid's ranks (the particle ranks of a particle/PME split, their domain
    grid), and ``grid`` keeps some of its dimensions (:class:`~logical_model.topology.SubGrid`
    over the class's size: its rows, columns). ``origin``: only the communicator through
    the grid's origin (coordinate 0 along every dimension it drops) is made: GROMACS's
    load-balancing communicators, one along the first dimension through rank 0, and one
    along the second for every position on the first. Ranks outside the class (and off the
    origin's communicator) have colour -1. The layout interface of
    :class:`~logical_model.topology.SubGrid`."""

    members: PeerRule
    grid: Any  # SubGrid over the class's ranks
    origin: bool = False

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def _mine(self, P: int) -> np.ndarray:
        return np.flatnonzero(self.members(np.arange(P), P) >= 0)

    def layout(self, rank: np.ndarray, P: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rank = np.asarray(rank, np.int64)
        mine = self._mine(P)
        colour = np.full(P, -1, np.int64)
        local = np.full(P, -1, np.int64)
        size = np.ones(P, np.int64)
        if len(mine):
            c, loc, n = self.grid.layout(np.arange(len(mine)), len(mine))
            keep = c == 0 if self.origin else np.ones(len(mine), bool)
            colour[mine[keep]], local[mine[keep]], size[mine[keep]] = c[keep], loc[keep], n
        return colour[rank], local[rank], size[rank]

    def world(self, colour: np.ndarray, local: np.ndarray, P: int) -> np.ndarray:
        mine = self._mine(P)
        colour, local = np.asarray(colour, np.int64), np.asarray(local, np.int64)
        if not len(mine):
            return np.full(local.shape, -1, np.int64)
        w = self.grid.world(np.maximum(colour, 0), local, len(mine))
        return np.where((local >= 0) & (colour >= 0) & (w >= 0), mine[np.clip(w, 0, len(mine) - 1)], -1)

    def n_comms(self, P: int) -> int:
        return 1 if self.origin else self.grid.n_comms(self.class_size(P))

    def class_size(self, P: int) -> int:
        """The class's size at P: the size of its grid."""
        return len(self._mine(P))

    def describe(self) -> str:
        what = self.grid.describe()
        return (f"{'the one through the origin along ' if self.origin else ''}{what} of "
                f"{self.members.describe()}")

    def to_dict(self) -> dict:
        return {"kind": "class_grid", "members": self.members.to_dict(), "grid": self.grid.to_dict(),
                "origin": self.origin}

    @classmethod
    def from_dict(cls, d: dict) -> "ClassGrid":
        from .topology import SubGrid
        return cls(PeerRule.from_dict(d["members"]), SubGrid.from_dict(d["grid"]), bool(d.get("origin", False)))


def infer_class_grid(observed: dict[int, list[np.ndarray]], members: PeerRule,
                     known: Sequence[DimsRule] = ()) -> list["ClassGrid"]:
    """Layouts over a grid of the class ``members``'s ranks that give, at every P of
    ``observed`` (member lists, world ranks in communicator rank order), exactly the
    communicators seen: every line (plane) of the grid along the kept dimensions, or the
    one through its origin. The grid's dims at each class size are those the
    communicators show (no rule: a load-based choice, :class:`DimsRule` "traced"; other
    sizes need ``--grid``); a P where no communicator is seen tells nothing and is left
    out of the table. ``known``: dims rules of the class's grid found already (by another
    family of its communicators), tried first: with them one P that shows the
    communicators is enough (GROMACS's rows of its domain grid exist only where it has
    two dimensions). Rows before columns, 2-D grids before 3-D ones."""
    from .topology import DimsRule, SubGrid, _ordered_factorisations
    local: dict[int, list[np.ndarray]] = {}
    for P, ms in observed.items():
        mine = np.flatnonzero(members(np.arange(P), P) >= 0)
        inside = []
        for m in ms:
            m = np.asarray(m, np.int64)
            idx = np.searchsorted(mine, m)
            if not len(m) or np.any(idx >= len(mine)) or np.any(mine[np.minimum(idx, len(mine) - 1)] != m):
                return []
            inside.append(idx)
        if inside:
            local[int(len(mine))] = inside

    def fits(sg, n: int, ms: list[np.ndarray], origin: bool) -> bool:
        try:
            colour, loc, size = sg.layout(np.arange(n), n)
        except ValueError:
            return False
        got = set()
        for m in ms:
            if len(m) != size or np.any(colour[m] != colour[m[0]]) or np.any(loc[m] != np.arange(size)):
                return False
            got.add(int(colour[m[0]]))
        return got == ({0} if origin else set(range(sg.n_comms(n))))

    out = []
    for rule in known:
        for keep in itertools.product((True, False), repeat=rule.ndims):
            if all(keep) or not any(keep):
                continue
            for origin in (False, True):
                sg = SubGrid(rule, keep)
                if local and all(fits(sg, n, ms, origin) for n, ms in local.items()):
                    out.append(ClassGrid(members, sg, origin))
    if out or len(local) < 2:
        return out
    for nd in (2, 3):
        for keep in itertools.product((True, False), repeat=nd):
            if all(keep) or not any(keep):
                continue
            for origin in (False, True):
                table = []
                for n, ms in sorted(local.items()):
                    fit = next((dims for dims in _ordered_factorisations(n, nd) if fits(
                        SubGrid(DimsRule("traced", nd, table=((n, dims),)), keep), n, ms, origin)), None)
                    if fit is None:
                        break
                    table.append((n, fit))
                else:
                    # a grid of more than one dimension somewhere: else a line is the class
                    if any(sum(x > 1 for x in d) > 1 for _, d in table):
                        out.append(ClassGrid(members, SubGrid(DimsRule("traced", nd, table=tuple(table)), keep),
                                             origin))
        if out:
            break
    return out


def infer_class_comm(observed: dict[int, list[np.ndarray]]) -> ClassComm | None:
    """Communicators that split the ranks into a class (:func:`infer_members`: every m-th
    rank, ...) and the others, each in world order: the class from the communicators
    seen (one or both per P), or None."""
    pick: dict[int, np.ndarray] = {}
    seen: dict[int, np.ndarray] = {}  # ... or, where one side is seen and the two tie, that one
    for P, ms in observed.items():
        ms = [np.asarray(m, np.int64) for m in ms]
        if len(ms) > 2 or any(np.any(np.diff(m) <= 0) or len(m) == P for m in ms):
            return None
        if len(ms) == 2 and (len(np.intersect1d(ms[0], ms[1])) or len(ms[0]) + len(ms[1]) != P):
            return None
        one = len(ms) == 1
        if one:  # one side seen: the class is the smaller of it and the rest
            ms = [ms[0], np.setdiff1d(np.arange(P), ms[0])]
        # the smaller one: the class (PME ranks), or its complement's; of two halves, the one
        # without rank 0
        pick[P] = min(ms, key=lambda m: (len(m), bool(len(m)) and int(m[0]) == 0))
        seen[P] = ms[0] if one and len(ms[0]) == len(ms[1]) else pick[P]
    rule = infer_members(pick) or (infer_members(seen) if any(
        not np.array_equal(seen[P], pick[P]) for P in pick) else None)
    if rule is None:
        return None
    if rule.params.get("kind") == "notmod":  # one split, one description: the every-m-th class
        rule = PeerRule("member", {**rule.params, "kind": "mod"})
    cc = ClassComm(rule)
    for P, ms in observed.items():  # every communicator seen is one of the split's
        colour, local, _ = cc.layout(np.arange(P), P)
        for m in ms:
            m = np.asarray(m, np.int64)
            if np.any(colour[m] != colour[m[0]]) or np.any(local[m] != np.arange(len(m))) \
                    or len(m) != np.count_nonzero(colour == colour[m[0]]):
                return None
    return cc
