"""Process grids as programs build them: dims rules, rank orders, sub-grid communicators.

The logical model predicts Cartesian neighbours at a P nobody has run, so it
must build the grid the application will get there. Programs choose their
dims by one of a few rules (:data:`DIMS_RULES`): ``MPI_Dims_create(P, ndims)``
(as balanced as possible, non-increasing), its ascending twin (2-D pencils of
mpi4py-fft and P3DFFT), powers of two split with the larger factor in rows or
in columns (NPB CG and LU), q x q (NPB BT and SP), or the least sub-domain
surface for the simulation box (LAMMPS); where none of those gives the traced grids, a
fixed number of groups along one dimension (k-point groups, pools, partitions: a
dimension of one width at every traced P). :func:`fit_dims_rules` keeps the
rules that give the dims seen at every fit P; where several do and they part
at the target, the caller says which and takes the user's ``--grid``. Ranks
map to coordinates row-major (``MPI_Cart_create`` without reordering) or
column-major. :class:`SubGrid` describes the row, column and plane
communicators of ``MPI_Comm_split``/``MPI_Cart_sub`` as a function of P.
Everything is vectorised over ranks.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from functools import lru_cache

import numpy as np

__all__ = ["dims_create", "coords", "rank_of", "neighbour", "DimsRule", "DIMS_RULES", "candidate_rules",
           "group_rules", "fit_dims_rules", "surface_dims", "parse_grid", "SubGrid", "infer_subgrid"]


def _prime_factors(n: int) -> list[int]:
    out, d = [], 2
    while d * d <= n:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    if n > 1:
        out.append(n)
    return out


@lru_cache(maxsize=4096)
def dims_create(nnodes: int, ndims: int) -> tuple[int, ...]:
    """The dims ``MPI_Dims_create(nnodes, ndims)`` gives with all dims free.

    Of all non-increasing factorisations, the one with the smallest spread
    (largest minus smallest dimension), ties going to the larger first
    dimension: this reproduces MPICH's ``MPI_Dims_create`` for every
    P <= 3000 in 1, 2 and 3 dimensions (tested against mpi4py's
    ``MPI.Compute_dims``). Beyond 3 dimensions, or 3 dimensions over 2**22
    nodes, the prime factors are dealt largest first into the smallest
    dimension, MPICH's older rule.
    """
    if nnodes < 1 or ndims < 1:
        raise ValueError(f"dims_create needs nnodes >= 1 and ndims >= 1, got {nnodes}, {ndims}")
    if ndims == 1:
        return (nnodes,)
    if ndims == 2:
        d = int(np.ceil(np.sqrt(nnodes)))
        while nnodes % d:
            d += 1
        return (d, nnodes // d)
    if ndims == 3 and nnodes <= 1 << 22:
        return min(_factorisations(nnodes, 3), key=lambda c: (c[0] - c[-1], -c[0]))
    dims = [1] * ndims
    for f in sorted(_prime_factors(nnodes), reverse=True):
        i = min(range(ndims), key=lambda k: dims[k])
        dims[i] *= f
    return tuple(sorted(dims, reverse=True))


def _factorisations(n: int, k: int) -> list[tuple[int, ...]]:
    """All non-increasing factorisations of n into k factors."""
    if k == 1:
        return [(n,)]
    out = []
    for d in range(max(1, int(n ** (1.0 / k)) - 1), n + 1):
        if n % d == 0:
            out += [(d, *rest) for rest in _factorisations(n // d, k - 1) if rest[0] <= d]
    return out


def coords(rank: np.ndarray, dims: tuple[int, ...], order: str = "row") -> np.ndarray:
    """Coordinates of ranks, shape (len(rank), ndims): row-major (the last dimension
    varies fastest, as MPI_Cart_create numbers them) or column-major (the first)."""
    rank = np.asarray(rank, np.int64).reshape(-1)
    out = np.empty((rank.size, len(dims)), np.int64)
    rest = rank.copy()
    seq = range(len(dims) - 1, -1, -1) if order == "row" else range(len(dims))
    for d in seq:
        out[:, d] = rest % dims[d]
        rest //= dims[d]
    return out


def rank_of(c: np.ndarray, dims: tuple[int, ...], order: str = "row") -> np.ndarray:
    """Rank of coordinates (shape (n, ndims)), row- or column-major."""
    r = np.zeros(len(c), np.int64)
    seq = range(len(dims)) if order == "row" else range(len(dims) - 1, -1, -1)
    for d in seq:
        r = r * dims[d] + c[:, d]
    return r


#: neighbour tables of every rank (rank = arange(P)), by (dims, periods, disp, order): rule
#: inference evaluates the same displacements on the same grids many thousand times
_NEIGHBOURS: dict[tuple, np.ndarray] = {}


def neighbour(rank: np.ndarray, dims: tuple[int, ...], periods: tuple[bool, ...],
              disp: tuple[int, ...], order: str = "row") -> np.ndarray:
    """World rank at coordinate displacement ``disp`` from each rank, -1 off the grid."""
    rank = np.asarray(rank, np.int64).reshape(-1)
    n = math.prod(int(d) for d in dims)
    if 0 < n <= 4096:
        # a rank's coordinates are those of rank mod n (every digit is taken modulo its
        # dimension), so one table of the whole grid serves any ranks
        key = (tuple(int(d) for d in dims), tuple(bool(p) for p in periods), tuple(int(x) for x in disp), order)
        table = _NEIGHBOURS.get(key)
        if table is None:
            if len(_NEIGHBOURS) > 65536:
                _NEIGHBOURS.clear()
            table = _neighbour(np.arange(n), dims, periods, disp, order)
            table.flags.writeable = False
            _NEIGHBOURS[key] = table
        return table[rank % n]
    return _neighbour(rank, dims, periods, disp, order)


def _neighbour(rank, dims, periods, disp, order) -> np.ndarray:
    c = coords(rank, dims, order) + np.asarray(disp, np.int64)[None, :]
    ok = np.ones(len(c), bool)
    for d, n in enumerate(dims):
        if periods[d]:
            c[:, d] %= n
        else:
            ok &= (c[:, d] >= 0) & (c[:, d] < n)
    out = np.full(len(c), -1, np.int64)
    out[ok] = rank_of(c[ok], dims, order)
    return out


# ---- dims rules: how real codes choose their process grid ----------------------------
def _pow2_split(P: int, ndims: int, larger_first: bool) -> tuple[int, ...]:
    e = P.bit_length() - 1
    if P < 1 or (1 << e) != P:
        raise ValueError(f"P={P} is not a power of two")
    parts = [1 << (e // ndims + (1 if i < e % ndims else 0)) for i in range(ndims)]
    return tuple(parts) if larger_first else tuple(reversed(parts))


def _root_split(P: int, ndims: int) -> tuple[int, ...]:
    q = int(round(P ** (1.0 / ndims)))
    for c in (q - 1, q, q + 1):
        if c > 0 and c ** ndims == P:
            return (c,) * ndims
    raise ValueError(f"P={P} is not a {'square' if ndims == 2 else 'cube'}")


def surface_dims(P: int, box: tuple[float, ...]) -> tuple[int, ...]:
    """The grid that minimises the sub-domains' surface for a box (LAMMPS's choice):
    factorisations enumerated with the first dimension's factor rising, then the
    second's, the first strict minimum of the summed face areas kept."""
    nd = len(box)
    best, best_s = None, np.inf
    for dims in _ordered_factorisations(P, nd):
        s = sum(np.prod([box[j] for j in range(nd) if j != i]) / np.prod(
            [dims[j] for j in range(nd) if j != i]) for i in range(nd))
        if s < best_s * (1 - 1e-12):
            best, best_s = dims, s
    return best


def _ordered_factorisations(n: int, k: int) -> list[tuple[int, ...]]:
    """All ordered factorisations of n into k factors, first factor rising, then the next."""
    if k == 1:
        return [(n,)]
    return [(d, *rest) for d in range(1, n + 1) if n % d == 0
            for rest in _ordered_factorisations(n // d, k - 1)]


#: Named dims rules: P, ndims (and a box for "surface") -> dims.
DIMS_RULES = {
    "dims_create": "MPI_Dims_create (balanced, non-increasing)",
    "pencil": "balanced, non-decreasing (2-D pencils p1 <= p2: mpi4py-fft, P3DFFT)",
    "pow2_rows": "powers of two, the larger factor first (NPB CG/LU rows)",
    "pow2_cols": "powers of two, the larger factor last (NPB CG/LU columns)",
    "square": "q x q (x q): P a square or a cube (NPB BT/SP)",
    "surface": "least sub-domain surface for a box shape (LAMMPS)",
    "groups": "a fixed number of groups along one dimension, the other dims MPI_Dims_create's of P / groups "
              "(k-point, pool, image or ensemble groups: GPAW, Quantum ESPRESSO -nk, LAMMPS -partition)",
    "traced": "the dims seen at each traced size, no rule (a load-based choice: GROMACS's domain grid); "
              "other sizes need --grid",
}
#: Box shapes tried for the surface rule: edge ratios of 1..4.
_BOXES = tuple(sorted({tuple(float(x) / min(b) for x in b)
                       for b in itertools.product((1, 2, 3, 4), repeat=3)},
                      key=lambda b: (max(b), b)))


@dataclasses.dataclass(frozen=True)
class DimsRule:
    """How a program's process-grid dims follow P: one of :data:`DIMS_RULES`."""

    name: str = "dims_create"
    ndims: int = 2
    box: tuple[float, ...] = ()  # "surface": the box's edge lengths
    #: dims the user fixed at given P (``--grid`` at the target): ((P, dims), ...)
    fixed: tuple[tuple[int, tuple[int, ...]], ...] = ()
    #: "traced": the dims seen at each traced size ((size, dims), ...), found from the peers
    table: tuple[tuple[int, tuple[int, ...]], ...] = ()
    #: "groups": the fixed dimension's width and which dimension it is, and the rule of
    #: the other dims, of P/c (its name, its box in ``box``; "" for MPI_Dims_create's)
    count: int = 0
    axis: int = 0
    inner: str = ""

    def dims(self, P: int) -> tuple[int, ...]:
        """The dims at P (ValueError where the rule has no grid for P)."""
        P = int(P)
        for p, d in self.fixed:
            if p == P:
                return tuple(d)
        if self.name == "traced":
            for p, d in self.table:
                if p == P:
                    return tuple(d)
            raise ValueError(f"no dims for {P} ranks: the grid's dims follow no rule sigex knows "
                             f"({self._describe()}); give them (--grid)")
        if self.ndims == 1:
            return (P,)
        if self.name == "dims_create":
            return dims_create(P, self.ndims)
        if self.name == "pencil":
            return tuple(sorted(dims_create(P, self.ndims)))
        if self.name in ("pow2_rows", "pow2_cols"):
            return _pow2_split(P, self.ndims, self.name == "pow2_rows")
        if self.name == "square":
            return _root_split(P, self.ndims)
        if self.name == "surface":
            return surface_dims(P, self.box)
        if self.name == "groups":
            c = self.count
            if c < 1 or P % c:
                raise ValueError(f"P={P} is not a multiple of {c} groups")
            rest = list(self._inner().dims(P // c))
            return tuple(rest[:self.axis] + [c] + rest[self.axis:])
        raise ValueError(f"unknown dims rule {self.name!r}")

    def _inner(self) -> "DimsRule":
        """A "groups" rule's rule of the other dims (of P/c ranks)."""
        return DimsRule(self.inner or "dims_create", self.ndims - 1, self.box if self.inner == "surface" else ())

    def describe(self) -> str:
        fixed = "".join(f", {'x'.join(map(str, d))} at P={p} (given)" for p, d in self.fixed)
        return self._describe() + fixed

    def _describe(self) -> str:
        if self.name == "traced":
            return (", ".join(f"{'x'.join(map(str, d))} at {p} ranks" for p, d in self.table)
                    + " as traced (no dims rule)")
        if self.name == "surface":
            return f"least surface for a {':'.join(f'{b:g}' for b in self.box)} box"
        if self.name == "groups":  # (groups of P/c ranks, or of c ranks, as the layout keeps)
            c = self.count
            if self.ndims == 2:
                return f"{c} x P/{c} (dimension 0 fixed)" if self.axis == 0 else f"P/{c} x {c} (dimension 1 fixed)"
            inner = (f"MPI_Dims_create(P/{c}, {self.ndims - 1})" if not self.inner
                     else f"{self._inner()._describe()} of P/{c}")
            return f"dimension {self.axis} fixed at {c}, the others {inner}"
        return {"dims_create": f"MPI_Dims_create(P, {self.ndims})", "pencil": "pencils p1 <= p2",
                "pow2_rows": "powers of two, larger factor first",
                "pow2_cols": "powers of two, larger factor last",
                "square": "q x q" + (" x q" if self.ndims == 3 else "")}[self.name]

    def to_dict(self) -> dict:
        return {"name": self.name, "ndims": self.ndims, "box": list(self.box),
                "fixed": [[p, list(d)] for p, d in self.fixed],
                **({"table": [[p, list(d)] for p, d in self.table]} if self.table else {}),
                **({"count": self.count, "axis": self.axis} if self.name == "groups" else {}),
                **({"inner": self.inner} if self.inner else {})}

    @classmethod
    def from_dict(cls, d: dict) -> "DimsRule":
        return cls(d["name"], int(d["ndims"]), tuple(float(b) for b in d.get("box", ())),
                   tuple((int(p), tuple(int(x) for x in dd)) for p, dd in d.get("fixed", ())),
                   tuple((int(p), tuple(int(x) for x in dd)) for p, dd in d.get("table", ())),
                   int(d.get("count", 0)), int(d.get("axis", 0)), d.get("inner", ""))


def candidate_rules(ndims: int) -> list[DimsRule]:
    """Every dims rule of ``ndims`` dimensions, the most common first."""
    if ndims == 1:
        return [DimsRule("dims_create", 1)]
    out = [DimsRule(n, ndims) for n in ("dims_create", "pencil", "pow2_rows", "pow2_cols", "square")]
    if ndims == 3:
        out += [DimsRule("surface", 3, b) for b in _BOXES]
    return out


def group_rules(ndims: int, counts, inner: bool = False) -> list[DimsRule]:
    """The ``"groups"`` rules of ``ndims`` dimensions with each of ``counts`` groups, along
    the first dimension first, the other dims MPI_Dims_create's of P/c; ``inner``: then
    those of every other rule of ``ndims - 1`` dimensions (a program that runs c copies of
    a decomposition of its own, each on P/c ranks: LAMMPS's partitions)."""
    if ndims < 2:
        return []
    inners = candidate_rules(ndims - 1) if inner else [DimsRule("dims_create", ndims - 1)]
    return [DimsRule("groups", ndims, box=r.box, count=int(c), axis=a,
                     inner="" if r.name == "dims_create" else r.name)
            for r in inners for c in sorted({int(c) for c in counts if c >= 1}) for a in range(ndims)]


def _fits(rule: DimsRule, observed: dict[int, tuple[int, ...]]) -> bool:
    try:
        return all(tuple(rule.dims(P)) == tuple(d) for P, d in observed.items())
    except ValueError:
        return False


def fit_dims_rules(observed: dict[int, tuple[int, ...]], blocks: int | None = None) -> list[DimsRule]:
    """The dims rules that give the observed dims at every P (empty: none does).
    ``blocks``: the grid is that many blocks of one decomposition each (its first
    dimension, :func:`~logical_model.model.grid_of`), so only the ``"groups"`` rules of
    that many along dimension 0 are tried, the other dims any rule's of P/c.

    Where none of the named rules does, a dimension of one width at every P (two P at
    least) is read as that many groups (:data:`DIMS_RULES` ``"groups"``), the other
    dims MPI_Dims_create's of the rest. It is a fallback, not an alternative: a dimension
    that happens to keep its width over the traced P of a grid a named rule gives (a
    box's short side) does not make that grid's target uncertain."""
    nds = {len(d) for d in observed.values()}
    if len(nds) != 1:
        return []
    nd = nds.pop()
    if blocks is not None:
        return [rule for rule in group_rules(nd, {blocks}, inner=True) if rule.axis == 0 and _fits(rule, observed)]
    out = [rule for rule in candidate_rules(nd) if _fits(rule, observed)]
    if out or len(observed) < 2:
        return out
    dims = np.array([observed[P] for P in sorted(observed)], np.int64)
    counts = {int(dims[0, a]) for a in range(nd) if np.all(dims[:, a] == dims[0, a])}
    return [rule for rule in group_rules(nd, counts, inner=True) if _fits(rule, observed)]


def parse_grid(text: str) -> tuple[int, ...]:
    """``"4x4x2"`` -> (4, 4, 2)."""
    try:
        dims = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        dims = ()
    if not dims or any(d < 1 for d in dims):
        raise ValueError(f"--grid {text!r}: give the dims as NxM or NxMxK (positive integers)")
    return dims


# ---- sub-grid communicators (Comm_split rows and columns, Cart_sub) -------------------
@dataclasses.dataclass(frozen=True)
class SubGrid:
    """Communicators that each keep some dimensions of a process grid, as
    ``MPI_Cart_sub`` builds them and ``MPI_Comm_split(colour = rank div q, key = rank
    mod q)`` (a row) or ``(rank mod q, rank div q)`` (a column) does on a rank-ordered
    grid: a rank's colour is its index over the dropped dimensions, its rank in the
    communicator its row-major index over the kept ones."""

    rule: DimsRule
    keep: tuple[bool, ...]
    order: str = "row"  # rank order of the underlying grid: "row" or "col"

    def layout(self, rank: np.ndarray, P: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(colour, rank in the communicator, communicator size) of each world rank."""
        dims = self.rule.dims(P)
        c = coords(rank, dims, self.order)
        colour = np.zeros(len(c), np.int64)
        local = np.zeros(len(c), np.int64)
        size = 1
        for d, n in enumerate(dims):
            if self.keep[d]:
                local = local * n + c[:, d]
                size *= n
            else:
                colour = colour * n + c[:, d]
        return colour, local, size

    def world(self, colour: np.ndarray, local: np.ndarray, P: int) -> np.ndarray:
        """World rank of communicator rank ``local`` in communicator ``colour`` (-1 stays -1)."""
        dims = self.rule.dims(P)
        c = np.zeros((len(colour), len(dims)), np.int64)
        col, loc = np.asarray(colour, np.int64).copy(), np.maximum(np.asarray(local, np.int64), 0)
        for d in range(len(dims) - 1, -1, -1):
            if self.keep[d]:
                c[:, d] = loc % dims[d]
                loc //= dims[d]
            else:
                c[:, d] = col % dims[d]
                col //= dims[d]
        return np.where(np.asarray(local) >= 0, rank_of(c, dims, self.order), -1)

    def n_comms(self, P: int) -> int:
        dims = self.rule.dims(P)
        return int(np.prod([n for n, k in zip(dims, self.keep) if not k]))

    def describe(self) -> str:
        kept = ",".join(str(d) for d, k in enumerate(self.keep) if k)
        return (f"dims {kept} of a {self.rule.describe()} grid"
                + (" (column-major ranks)" if self.order == "col" else ""))

    def to_dict(self) -> dict:
        return {"rule": self.rule.to_dict(), "keep": list(self.keep), "order": self.order}

    @classmethod
    def from_dict(cls, d: dict) -> "SubGrid":
        return cls(DimsRule.from_dict(d["rule"]), tuple(bool(k) for k in d["keep"]), d.get("order", "row"))


def infer_subgrid(observed: dict[int, list[np.ndarray]]) -> list[SubGrid]:
    """The sub-grid layouts that give, at every P, exactly the communicators observed
    (``observed[P]``: member lists, world ranks in communicator rank order), the
    most common first: 2-D grids before 3-D ones, MPI_Dims_create first, row-major
    first; a fixed number of groups (the communicators' size, or P over it, the same at
    every P) last. Where both give the communicators (4 k-point groups traced at 8, 12
    and 16 ranks are MPI_Dims_create's 4 x 2, 4 x 3 and 4 x 4 too), both are returned:
    the caller checks where they part (6 x 4 against 4 x 6 at 24). Unlike a declared
    grid's dims (:func:`fit_dims_rules`), a program's communicators name the groups it
    made, and either reading is as likely."""
    out = []
    sizes = {P: {len(m) for m in ms} for P, ms in observed.items()}
    if any(len(s) != 1 for s in sizes.values()):
        return out
    size = {P: s.pop() for P, s in sizes.items()}
    # a fixed number of groups (communicators, or ranks in each) seen at two P at least
    counts = set()
    if len(observed) >= 2:
        for f in (lambda P: size[P], lambda P: P // size[P] if P % size[P] == 0 else 0):
            if len({f(P) for P in observed}) == 1:
                counts.add(f(min(observed)))
    Ps = sorted(observed, key=lambda P: -P)  # (the largest P tells most layouts apart)
    for nd in (2, 3):  # a 3-D grid only when no 2-D one explains the communicators
        # the named rules first, then a fixed number of groups
        for rules in (candidate_rules(nd)[:5], group_rules(nd, counts - {0})):
            for rule in rules:
                try:
                    dims = {P: rule.dims(P) for P in Ps}
                except ValueError:
                    continue
                for order in ("row", "col"):
                    for keep in itertools.product((False, True), repeat=nd):
                        # (the communicators' size first: most layouts fail on it, at no cost)
                        if all(keep) or not any(keep) or any(
                                math.prod(n for n, k in zip(dims[P], keep) if k) != size[P] for P in Ps):
                            continue
                        sg = SubGrid(rule, keep, order)
                        if all(_same_comms(sg, P, observed[P]) for P in Ps):
                            out.append(sg)
        if out:
            return out
    return out


def _same_comms(sg: SubGrid, P: int, members: list[np.ndarray]) -> bool:
    try:
        colour, local, size = sg.layout(np.arange(P), P)
    except ValueError:
        return False
    for m in members:
        m = np.asarray(m, np.int64)
        if len(m) != size or np.any(colour[m] != colour[m[0]]) or np.any(local[m] != np.arange(size)):
            return False
    return True
