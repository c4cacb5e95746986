"""Redistributions between two block decompositions of one global array (remaps).

An FFT library moves its data between decompositions of one global mesh: the
application's bricks (its 3-D process grid) to pencils along one axis, pencils along
one axis to pencils along another, and back (LAMMPS's PPPM and its fftMPI-derived
``remap``, heFFTe, P3DFFT, mpi4py-fft all do this). Every rank sends to each rank
whose block of the second decomposition overlaps its own block of the first, as many
elements as the overlap holds, and receives likewise: the peers and sizes are exact
functions of the mesh, the two decompositions and P, though no offset rule of
:mod:`logical_model.rules` gives them (a rank has 1 to 8 peers depending on where its
block lies).

**Decompositions** (:class:`Blocks`). A mesh axis of n points split into p blocks
cuts at one of :data:`SPLITS`: ``floor`` (i n / p rounded down: fftMPI, heFFTe, LAMMPS's
pencils), ``ceil`` (rounded up: a point belongs to the block whose share of the box
holds it, LAMMPS's bricks), ``rem_first`` / ``rem_last`` (n // p each, the n % p
extra points on the first or last blocks). The process counts per mesh axis follow P
by one of :class:`Layout`'s rules: the declared Cartesian grid (its dims on the mesh
axes in order, row-major ranks), a 2-D grid on two mesh axes under a
:mod:`~logical_model.topology` dims rule (either axis fastest), slabs while the mesh
allows and else the least-surface 2-D grid of the two axes' extents, or 1-D slabs.

**Messages** (:meth:`Remap.rows`). For each rank, vectorised over ranks: the blocks of
the other decomposition overlapping its block (per axis an interval of block indices,
found by ``searchsorted``; their product), itself left out (a local copy), ordered
ascending or cyclically from rank + 1 (LAMMPS's remap), bytes = overlap points x bytes
per point.

**Inference** (:func:`infer_remap`). From the messages of one channel (run of sends ->
run of receives) at every traced P: for every pair of candidate layouts, per mesh
axis the (n, split rules) whose block overlaps are positive on every message and whose
sizes, divided by that axis's overlap, are equal between messages that agree on the
other axes (a product of per-axis overlaps), intersected over the traced P; then the
surviving meshes checked message for message (peers, bytes, order, on both sides) at
every traced P. A remap is accepted only if it reproduces every traced P exactly; the
first in the candidates' order (declared grid, then MPI_Dims_create, ...) is kept.
"""

from __future__ import annotations

import dataclasses
import itertools
from functools import lru_cache
from typing import Any

import numpy as np

from .topology import DimsRule, candidate_rules

__all__ = ["SPLITS", "split_points", "Layout", "Blocks", "Remap", "infer_remap", "candidate_layouts"]

SPLITS = ("floor", "ceil", "rem_first", "rem_last")
#: largest mesh extent the inference tries per axis
MAX_EXTENT = 256


def split_points(n, p: int, split: str) -> np.ndarray:
    """The p + 1 cut points of n mesh points into p blocks (``n`` a scalar or an array:
    then shape (len(n), p + 1))."""
    n = np.asarray(n, np.int64)
    i = np.arange(p + 1, dtype=np.int64)
    nn = n[..., None]
    if split == "floor":
        return i * nn // p
    if split == "ceil":
        return -(-(i * nn) // p)
    q, m = nn // p, nn % p
    if split == "rem_first":
        return i * q + np.minimum(i, m)
    if split == "rem_last":
        return i * q + np.maximum(0, i - (p - m))
    raise ValueError(f"unknown split {split!r}")


def _least_surface_2d(P: int, n: tuple[int, int]) -> tuple[int, int]:
    """The 2-D grid whose largest block has the least perimeter on an n[0] x n[1] mesh
    (first factor rising; ties to the larger block)."""
    best, key = None, None
    for a in range(1, P + 1):
        if P % a:
            continue
        b = P // a
        bx, by = -(-n[0] // a), -(-n[1] // b)
        k = (bx + by, -bx * by)
        if key is None or k < key:
            best, key = (a, b), k
    return best


@dataclasses.dataclass(frozen=True)
class Layout:
    """How a decomposition's process counts per mesh axis follow P, and its rank order.

    ``kind``: "grid" (a 3-D dims rule, dims j on mesh axis j), "plane" (a 2-D dims rule
    on mesh axes ``axes``; "slab_surface" as its rule name: slabs on the second axis
    while its extent allows, else the least-surface grid of the two) or "slab" (P on
    mesh axis ``axes[0]``). ``order``: mesh axes from the fastest-varying rank
    coordinate to the slowest."""

    kind: str
    rule: DimsRule | None
    axes: tuple[int, ...]
    order: tuple[int, ...]

    def counts(self, P: int, mesh: tuple[int, ...] | None = None) -> tuple[int, int, int]:
        p = [1, 1, 1]
        if self.kind == "grid":
            p = list(self.rule.dims(P))
        elif self.kind == "slab":
            p[self.axes[0]] = P
        elif self.rule is None:  # slab_surface
            i, j = self.axes
            if mesh is None:
                raise ValueError("the slab/least-surface layout needs the mesh")
            d = (1, P) if mesh[j] >= P else _least_surface_2d(P, (mesh[i], mesh[j]))
            p[i], p[j] = d
        else:
            d = self.rule.dims(P)
            p[self.axes[0]], p[self.axes[1]] = d
        return tuple(int(x) for x in p)

    def describe(self) -> str:
        ax = "xyz"
        order = ("ranks " + ", ".join(ax[a] for a in self.order if True) + " fastest first")
        if self.kind == "grid":
            return f"the process grid ({self.rule.describe()}) on x, y, z, {order}"
        if self.kind == "slab":
            return f"slabs along {ax[self.axes[0]]}"
        what = (self.rule.describe() if self.rule is not None else
                f"slabs along {ax[self.axes[1]]} while P <= its extent, else the least-surface grid")
        return f"a 2-D grid on {ax[self.axes[0]]}, {ax[self.axes[1]]} ({what}), {order}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "rule": self.rule.to_dict() if self.rule else None,
                "axes": list(self.axes), "order": list(self.order)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Layout":
        return cls(d["kind"], DimsRule.from_dict(d["rule"]) if d.get("rule") else None,
                   tuple(int(a) for a in d["axes"]), tuple(int(a) for a in d["order"]))


def candidate_layouts(declared: DimsRule | None = None) -> list[Layout]:
    """Layouts tried, the most likely first: the declared grid, 2-D grids under each dims
    rule and the slab/least-surface rule on each pair of axes (either fastest), slabs."""
    out = []
    if declared is not None and declared.ndims == 3:
        out.append(Layout("grid", declared, (0, 1, 2), (2, 1, 0)))
    for rule in candidate_rules(2):
        for i, j in itertools.permutations(range(3), 2):
            k = 3 - i - j
            for order in ((j, i, k), (i, j, k)):
                out.append(Layout("plane", rule, (i, j), order))
    for i, j in itertools.permutations(range(3), 2):
        k = 3 - i - j
        for order in ((i, j, k), (j, i, k)):
            out.append(Layout("plane", None, (i, j), order))
    for i in range(3):
        out.append(Layout("slab", None, (i,), tuple([i] + [a for a in range(3) if a != i])))
    for rule in candidate_rules(3)[:5]:
        out.append(Layout("grid", rule, (0, 1, 2), (2, 1, 0)))
    return out


def _coords(rank: np.ndarray, p: tuple[int, ...], order: tuple[int, ...]) -> np.ndarray:
    """(len(rank), 3) block coordinates; ``order`` fastest axis first."""
    rank = np.asarray(rank, np.int64)
    c = np.zeros((len(rank), 3), np.int64)
    rest = rank.copy()
    for a in order:
        c[:, a] = rest % p[a]
        rest //= p[a]
    return c


def _rank(c: np.ndarray, p: tuple[int, ...], order: tuple[int, ...]) -> np.ndarray:
    r = np.zeros(c.shape[:-1], np.int64)
    for a in reversed(order):
        r = r * p[a] + c[..., a]
    return r


@dataclasses.dataclass(frozen=True)
class Blocks:
    """One block decomposition as a function of P: a :class:`Layout` and a split rule."""

    layout: Layout
    split: str

    def at(self, P: int, mesh: tuple[int, ...]):
        """(counts per axis, cut points per axis) at P."""
        p = self.layout.counts(P, mesh)
        return p, [split_points(mesh[a], p[a], self.split) for a in range(3)]

    def to_dict(self) -> dict[str, Any]:
        return {"layout": self.layout.to_dict(), "split": self.split}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Blocks":
        return cls(Layout.from_dict(d["layout"]), d["split"])


@dataclasses.dataclass(frozen=True)
class Remap:
    """Messages from the blocks of ``source`` to the overlapping blocks of ``dest``."""

    mesh: tuple[int, int, int]
    elem: int  # bytes per mesh point
    source: Blocks
    dest: Blocks
    order: str = "cyclic"  # peers in a rank's run: "cyclic" from rank + 1, or "ascending"
    #: mesh axes no traced P split (their extent is unknown: 1 here, its points folded into
    #: ``elem``); a P whose layouts split one is refused
    free: tuple[int, ...] = ()
    fitted: tuple[int, ...] = ()
    #: other remaps that give every traced P's messages as well (layouts alike there,
    #: other mesh extents or cuts); a P where one of them gives other messages is refused
    alternatives: tuple = ()

    kind = "overlap"

    def rows(self, ranks: np.ndarray, P: int, side: str):
        """Each rank's messages of this remap at P, in its call order: (peer, bytes,
        present), each (len(ranks), K) with K the most any rank has. ``side`` "send":
        peers are the destination blocks overlapping the rank's source block; "recv":
        the source blocks overlapping its destination block."""
        ranks = np.asarray(ranks, np.int64)
        mine, theirs = (self.source, self.dest) if side == "send" else (self.dest, self.source)
        pm, cm = mine.at(P, self.mesh)
        pt, ct = theirs.at(P, self.mesh)
        for a in self.free:
            if pm[a] > 1 or pt[a] > 1:
                raise ValueError(f"P={P}: the remap splits mesh axis {'xyz'[a]}, which no traced P split "
                                 "(its extent is not known)")
        c = _coords(ranks, pm, mine.layout.order)
        lo_b, width = [], []
        for a in range(3):
            lo, hi = cm[a][c[:, a]], cm[a][c[:, a] + 1]
            # their blocks b with ct[b] < hi and ct[b + 1] > lo
            first = np.searchsorted(ct[a], lo, side="right") - 1
            last = np.searchsorted(ct[a], hi, side="left") - 1
            first = np.clip(first, 0, pt[a] - 1)
            lo_b.append(first)
            width.append(np.maximum(last - first + 1, 1))
        width = np.stack(width, 1)
        K = int(np.prod(width.max(axis=0))) if len(ranks) else 0
        n = len(ranks)
        if K == 0:
            z = np.zeros((n, 0), np.int64)
            return z, z, z.astype(bool)
        wmax = width.max(axis=0)
        grid = np.stack(np.meshgrid(*[np.arange(w) for w in wmax], indexing="ij"), -1).reshape(-1, 3)
        b = np.stack(lo_b, 1)[:, None, :] + grid[None, :, :]  # (n, K, 3)
        ok = np.all(grid[None, :, :] < width[:, None, :], axis=2) & np.all(b < np.asarray(pt)[None, None, :], axis=2)
        b = np.minimum(b, np.asarray(pt) - 1)
        vol = np.ones((n, K), np.int64)
        for a in range(3):
            lo = np.maximum(cm[a][c[:, a]][:, None], ct[a][b[:, :, a]])
            hi = np.minimum(cm[a][c[:, a] + 1][:, None], ct[a][b[:, :, a] + 1])
            vol *= np.maximum(hi - lo, 0)
        q = _rank(b, pt, theirs.layout.order)
        ok &= (vol > 0) & (q != ranks[:, None])
        key = (q - ranks[:, None] - 1) % P if self.order == "cyclic" else q
        key = np.where(ok, key, np.iinfo(np.int64).max)
        o = np.argsort(key, axis=1, kind="stable")
        q, vol, ok = (np.take_along_axis(x, o, 1) for x in (q, vol, ok))
        keep = int(ok.sum(axis=1).max()) if n else 0
        return (np.where(ok, q, -1)[:, :keep], (vol * self.elem)[:, :keep], ok[:, :keep])

    def problem(self, P: int) -> str | None:
        """Why the remap cannot be placed at P (a layout without a grid there, a mesh axis
        split that no traced P split, another remap that fits the traced P as well but
        gives other messages at P), or None."""
        why = self._problem(P)
        if why is None and self.alternatives:
            mine = [self.rows(np.arange(P), P, side) for side in ("send", "recv")]
            for alt in self.alternatives:
                if alt._problem(P) is not None or any(
                        not all(np.array_equal(x, y) for x, y in zip(mine[i], alt.rows(np.arange(P), P, side)))
                        for i, side in enumerate(("send", "recv"))):
                    return (f"the traced P leave the remap open at P={P}: {alt.formula()} fits them as well "
                            "and gives other messages there")
        return why

    def _problem(self, P: int) -> str | None:
        try:
            for side in (self.source, self.dest):
                p = side.layout.counts(P, self.mesh)
                if int(np.prod(p)) != P:
                    return f"the remap's layout {side.layout.describe()} has no grid for P={P}"
                for a in self.free:
                    if p[a] > 1:
                        return (f"the remap splits mesh axis {'xyz'[a]} at P={P}, which no traced P split "
                                "(its extent is not known)")
        except ValueError as err:
            return f"the remap's layouts have no grid for P={P} ({err})"
        return None

    def count(self, P: int) -> float:
        """Messages per rank at P (mean over ranks)."""
        return float(self.rows(np.arange(P), P, "send")[2].sum()) / P

    def predict(self, P):
        return np.array([self.count(int(p)) for p in np.atleast_1d(P)], float)

    def formula(self) -> str:
        return (f"overlaps of {self.source.layout.describe()} ({self.source.split} cuts) with "
                f"{self.dest.layout.describe()} ({self.dest.split} cuts) on a "
                f"{'x'.join(map(str, self.mesh))} mesh, {self.elem} bytes a point, peers {self.order}")

    def describe(self) -> str:
        return self.formula() + "  [exact on every traced P]"

    @property
    def stats(self) -> dict[str, Any]:
        return {"r2": 1.0, "exact": True}

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "overlap", "format": 1, "mesh": list(self.mesh), "elem": self.elem,
                "source": self.source.to_dict(), "dest": self.dest.to_dict(), "order": self.order,
                "free": list(self.free), "fitted": list(self.fitted),
                "alternatives": [a.to_dict() for a in self.alternatives]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Remap":
        return cls(tuple(int(x) for x in d["mesh"]), int(d["elem"]), Blocks.from_dict(d["source"]),
                   Blocks.from_dict(d["dest"]), d.get("order", "cyclic"), tuple(int(a) for a in d.get("free", ())),
                   tuple(d.get("fitted", ())), tuple(cls.from_dict(a) for a in d.get("alternatives", ())))


# ---- inference ----------------------------------------------------------------------
@lru_cache(maxsize=256)
def _overlap_table(pa: int, pb: int) -> np.ndarray:
    """Overlap extents of block a of pa and block b of pb on n = 1..MAX_EXTENT points, for
    every pair of split rules: shape (MAX_EXTENT, len(SPLITS), len(SPLITS), pa, pb)."""
    n = np.arange(1, MAX_EXTENT + 1)
    ca = np.stack([split_points(n, pa, s) for s in SPLITS], 1)  # (N, S, pa+1)
    cb = np.stack([split_points(n, pb, s) for s in SPLITS], 1)
    lo = np.maximum(ca[:, :, None, :-1, None], cb[:, None, :, None, :-1])
    hi = np.minimum(ca[:, :, None, 1:, None], cb[:, None, :, None, 1:])
    t = np.maximum(hi - lo, 0)
    t.flags.writeable = False
    return t


def _axis_mask(a: np.ndarray, b: np.ndarray, v: np.ndarray, groups: np.ndarray, pa: int, pb: int) -> np.ndarray:
    """(MAX_EXTENT, S, S) booleans: the mesh extents and split rules on one axis under which
    every message's blocks overlap there and its size over that overlap is equal within
    each group of messages that agree on the other axes."""
    if pa == 1 and pb == 1:
        ok = _equal_in_groups(v[None, :].astype(float), groups)[0]
        return np.full((MAX_EXTENT, len(SPLITS), len(SPLITS)), bool(ok))
    x = _overlap_table(pa, pb)[:, :, :, a, b]  # (N, S, S, m)
    pos = np.all(x > 0, axis=-1)
    out = np.zeros(pos.shape, bool)
    rows = np.flatnonzero(pos.ravel())
    if rows.size:
        xr = x.reshape(-1, len(v))[rows]
        out.ravel()[rows] = _equal_in_groups(v[None, :] / xr, groups)
    return out


def _equal_in_groups(r: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Per row of r: its values equal within each group of columns (``groups``: ids)."""
    _, first, inv = np.unique(groups, return_index=True, return_inverse=True)
    ref = first[inv.reshape(-1)]
    many = np.flatnonzero(ref != np.arange(len(groups)))
    if many.size == 0:
        return np.ones(len(r), bool)
    x, y = r[:, many], r[:, ref[many]]
    return np.all(np.abs(x - y) <= 1e-9 * np.maximum(np.abs(y), 1.0), axis=1)


def _observed_rows(obs_side: tuple, P: int):
    """(rank, peer, bytes) of one side's messages at P -> per-rank padded arrays in call
    order, as :meth:`Remap.rows` returns them for every rank."""
    rank, peer, nbytes = (np.asarray(x, np.int64) for x in obs_side)
    o = np.argsort(rank, kind="stable")
    rank, peer, nbytes = rank[o], peer[o], nbytes[o]
    cnt = np.bincount(rank, minlength=P)
    K = int(cnt.max()) if len(cnt) else 0
    pos = np.arange(len(rank)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    q = np.full((P, K), -1, np.int64)
    b = np.zeros((P, K), np.int64)
    q[rank, pos] = peer
    b[rank, pos] = nbytes
    return q, b, q >= 0


def _same(model: Remap, P: int, side: str, want) -> bool:
    try:
        q, b, ok = model.rows(np.arange(P), P, side)
    except ValueError:
        return False
    wq, wb, wok = want
    if q.shape != wq.shape:
        return False
    return bool(np.array_equal(ok, wok) and np.array_equal(np.where(ok, q, -1), wq)
                and np.array_equal(np.where(ok, b, 0), wb))


def _variants(lay: Layout, Ps: list[int]):
    """(counts per P, allowed mesh extents on the layout's axes or None) for a layout at the
    traced P: one for a fixed rule, one per distinct outcome of the slab/least-surface
    rule over the meshes it may meet."""
    if not (lay.kind == "plane" and lay.rule is None):
        try:
            return [({P: lay.counts(P) for P in Ps}, None)]
        except ValueError:
            return []
    return [(counts, allowed) for counts, allowed in _surface_outcomes(lay, tuple(Ps))]


@lru_cache(maxsize=64)
def _surface_outcomes(lay: Layout, Ps: tuple[int, ...]):
    i, j = lay.axes
    n = np.arange(1, MAX_EXTENT + 1)
    ni, nj = np.meshgrid(n, n, indexing="ij")
    codes = []
    for P in Ps:
        pairs = [(a, P // a) for a in range(1, P + 1) if P % a == 0]
        surf = np.stack([-(-ni // a) + -(-nj // b) for a, b in pairs])
        area = np.stack([(-(-ni // a)) * (-(-nj // b)) for a, b in pairs])
        # least perimeter, ties to the larger block, then the first factor rising
        key = surf * (MAX_EXTENT * MAX_EXTENT + 1) - area
        best = np.argmin(key, axis=0)
        a_best = np.array([a for a, _ in pairs])[best]
        codes.append(np.where(nj >= P, 1, a_best))  # slabs: 1 along the first axis
    codes = np.stack(codes, -1).reshape(-1, len(Ps))
    keys, inv = np.unique(codes, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    out = []
    for u, key in enumerate(keys):
        sel = np.flatnonzero(inv == u)
        counts = {}
        for P, a in zip(Ps, key):
            p = [1, 1, 1]
            p[i], p[j] = int(a), P // int(a)
            counts[P] = tuple(p)
        out.append((counts, frozenset(zip((ni.ravel()[sel]).tolist(), (nj.ravel()[sel]).tolist()))))
    return out


def infer_remap(sends: dict[int, tuple], recvs: dict[int, tuple], declared: DimsRule | None = None,
                layouts: list[Layout] | None = None) -> Remap | None:
    """The remap that gives, at every traced P, exactly the messages observed.

    ``sends[P] = (rank, peer, bytes)`` of every message in each rank's call order,
    ``recvs[P]`` likewise for the receives (rank, source, bytes). ``declared``: the
    program's Cartesian grid's dims rule (the first layout tried). None where no remap
    of :func:`candidate_layouts` reproduces every P (or fewer than 2 P are given)."""
    Ps = sorted(sends)
    if len(Ps) < 2 or set(recvs) != set(Ps):
        return None
    obs = {}
    for P in Ps:
        r, q, v = (np.asarray(x, np.int64) for x in sends[P])
        if len(r) == 0 or np.any(v <= 0) or np.any(q < 0) or np.any(q >= P) or np.any(q == r):
            return None
        obs[P] = (r, q, v)
    want = {P: (_observed_rows(sends[P], P), _observed_rows(recvs[P], P)) for P in Ps}
    cands = layouts if layouts is not None else candidate_layouts(declared)
    # layouts that behave alike at every traced P are one candidate (the first kept)
    placed, seen = [], {}
    for lay in cands:
        for counts, allowed in _variants(lay, Ps):
            if any(int(np.prod(counts[P])) != P for P in Ps):
                continue
            eff = tuple((counts[P], tuple(a for a in lay.order if counts[P][a] > 1)) for P in Ps)
            if eff in seen:  # alike at every traced P: an alternative, checked at the target
                seen[eff].append(lay)
                continue
            seen[eff] = [lay]
            placed.append((lay, counts, allowed))
    alike = {id(x[0]): seen[tuple((x[1][P], tuple(a for a in x[0].order if x[1][P][a] > 1)) for P in Ps)]
             for x in placed}
    # a rank's peers are the blocks of the other decomposition in one box of its block
    # coordinates (less itself, a local copy): layouts where they are not cannot be it
    src = [x for x in placed if all(_boxlike(obs[P][1], obs[P][0], x[1][P], x[0].order) for P in Ps)]
    dst = [x for x in placed if all(_boxlike(obs[P][0], obs[P][1], x[1][P], x[0].order) for P in Ps)]
    # per layout pair, per axis: the extents and split rules every traced P allows
    for (la, ca, aa), (lb, cb, ab) in itertools.product(src, dst):
        found = _try_pair(la, ca, aa, lb, cb, ab, obs, want, Ps)
        if found:
            first, others = found[0], found[1:]
            for xa in alike[id(la)]:
                for xb in alike[id(lb)]:
                    if xa is la and xb is lb:
                        continue
                    alt = dataclasses.replace(first, source=Blocks(xa, first.source.split),
                                              dest=Blocks(xb, first.dest.split))
                    if all(_same(alt, P, "send", want[P][0]) and _same(alt, P, "recv", want[P][1]) for P in Ps):
                        others.append(alt)
            return dataclasses.replace(first, fitted=tuple(Ps), alternatives=tuple(others[:16]))
    return None


def _boxlike(owner: np.ndarray, peer: np.ndarray, p: tuple[int, ...], order: tuple[int, ...]) -> bool:
    """Each owner's peers fill a box of block coordinates under counts ``p`` (all of it, or
    all but one block: the owner's own)."""
    c = _coords(peer, p, order)
    o = np.argsort(owner, kind="stable")
    own, c = owner[o], c[o]
    starts = np.flatnonzero(np.concatenate([[True], own[1:] != own[:-1]]))
    lo = np.minimum.reduceat(c, starts, axis=0)
    hi = np.maximum.reduceat(c, starts, axis=0)
    vol = np.prod(hi - lo + 1, axis=1)
    n = np.diff(np.append(starts, len(own)))
    return bool(np.all((vol - n >= 0) & (vol - n <= 1)))


def _try_pair(la, ca, aa, lb, cb, ab, obs, want, Ps) -> list[Remap]:
    """Every remap from layout la to lb (mesh extents, cuts, bytes per point, peer order)
    that gives each traced P's messages: [] where none does."""
    S = len(SPLITS)
    out: list[Remap] = []
    masks = [np.ones((MAX_EXTENT, S, S), bool) for _ in range(3)]
    split_any = [False, False, False]
    for P in sorted(Ps, reverse=True):
        pa, pb = ca[P], cb[P]
        r, q, v = obs[P]
        a = _coords(r, pa, la.order)
        b = _coords(q, pb, lb.order)
        for k in range(3):
            key = np.zeros(len(r), np.int64)
            for j in range(3):
                if j != k:
                    key = (key * pa[j] + a[:, j]) * pb[j] + b[:, j]
            masks[k] &= _axis_mask(a[:, k], b[:, k], v, key, pa[k], pb[k])
            split_any[k] |= pa[k] > 1 or pb[k] > 1
            if not masks[k].any():
                return out
    if not any(split_any):
        return out
    P0 = Ps[-1]
    r0, q0, v0 = obs[P0]
    a0, b0 = _coords(r0, ca[P0], la.order), _coords(q0, cb[P0], lb.order)
    for sa, sb in itertools.product(range(S), range(S)):
        per_axis = []
        for k in range(3):
            ns = np.flatnonzero(masks[k][:, sa, sb]) + 1
            # an axis never split at the traced P: its extent only scales the sizes (1 here,
            # its points folded into the bytes per point; a target that splits it is refused)
            per_axis.append(ns[:1] if not split_any[k] else ns)
        if any(len(ns) == 0 for ns in per_axis):
            continue
        # sizes at the largest P: one bytes-per-point over every message (vectorised over meshes)
        x = [_overlap_table(ca[P0][k], cb[P0][k])[per_axis[k] - 1, sa, sb][:, a0[:, k], b0[:, k]] for k in range(3)]
        step = max(1, 2_000_000 // max(1, len(per_axis[1]) * len(per_axis[2]) * len(v0)))
        hits = []
        for s0 in range(0, len(per_axis[0]), step):
            prod = (x[0][s0:s0 + step, None, None, :] * x[1][None, :, None, :] * x[2][None, None, :, :]).astype(float)
            with np.errstate(invalid="ignore"):
                ratio = v0 / np.where(prod > 0, prod, np.nan)
                fit = np.all(np.abs(ratio - ratio[..., :1]) <= 1e-9 * ratio[..., :1], axis=-1)
                fit &= np.abs(ratio[..., 0] - np.round(ratio[..., 0])) <= 1e-9 * ratio[..., 0]
            i0, i1, i2 = np.nonzero(fit)
            hits += list(zip(i0 + s0, i1, i2))
        for i0, i1, i2 in hits:
            mesh = (int(per_axis[0][i0]), int(per_axis[1][i1]), int(per_axis[2][i2]))
            if aa is not None and (mesh[la.axes[0]], mesh[la.axes[1]]) not in aa:
                continue
            if ab is not None and (mesh[lb.axes[0]], mesh[lb.axes[1]]) not in ab:
                continue
            free = tuple(k for k in range(3) if not split_any[k])
            base = Remap(mesh, 1, Blocks(la, SPLITS[sa]), Blocks(lb, SPLITS[sb]), "ascending", free=free)
            wq, wb, wok = want[P0][0]
            try:
                q, b, got = base.rows(np.arange(P0), P0, "send")
            except ValueError:
                continue
            if got.shape != wok.shape or got.sum() != wok.sum():
                continue
            # bytes per point: the observed sizes over the overlaps, one integer
            elem = int(round(wb[wok].sum() / max(1, b[got].sum())))
            if elem < 1:
                continue
            for order in ("cyclic", "ascending"):
                m = dataclasses.replace(base, elem=elem, order=order)
                if all(_same(m, P, "send", want[P][0]) and _same(m, P, "recv", want[P][1]) for P in Ps):
                    out.append(m)
                    if len(out) > 16:
                        return out
    return out
