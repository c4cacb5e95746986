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
run of receives) at every traced P. Layouts are pruned before any mesh is tried: alone
(a rank's peers fill a box of the layout's blocks; the sizes a rank sends to, or
receives from, the layout's blocks are a product of one factor per mesh axis), then in
pairs (the peer sets are products of per-axis relations; per axis, messages that agree
on the other axes impose one ratio of overlaps per pair of blocks). For each surviving
pair, per mesh axis the (n, split rules) whose block overlaps are positive on every
message and satisfy those ratios, intersected over the traced P; then the surviving
meshes checked message for message (peers, bytes, order, on both sides) at every traced
P. Every pair is tried and every remap that reproduces every traced P is kept, the
first in the candidates' order (declared grid, then MPI_Dims_create, ...) to place and
the others (with the layouts alike at every traced P) as alternatives: a target where
any of them gives other messages is refused, and where more than
:data:`MAX_ALTERNATIVES` fit, every target but the traced P.
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
#: most remaps kept that fit the traced P as well as the first (checked at a target); where
#: more fit, the remap is placed at the traced P only
MAX_ALTERNATIVES = 64
#: meshes (extents and cuts that give the observed sizes) checked against the observed
#: messages in one search, over every pair of layouts; past it the search gives up and no
#: remap is claimed. The five applications' remaps check 24 at most; a quantum-chemistry
#: code (MPQC) whose ranks all send equal sizes to all others passed the size test on
#: most meshes of 1,875 layout pairs, and checking them (214,000 evaluations of a remap's
#: messages) took 230 s of a 250 s model
REMAP_CANDIDATES = 2000


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
    #: more than :data:`MAX_ALTERNATIVES` other remaps fit the traced P: only they are placed
    more_fit: bool = False
    #: other layouts with the same block counts and rank order at every traced P (so the same
    #: messages there), for the source and the destination: checked at a target like
    #: ``alternatives``
    alike_source: tuple = ()
    alike_dest: tuple = ()

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
        if why is not None or P in self.fitted:
            return why
        if self.more_fit:
            return (f"the traced P leave the remap open at P={P}: more than {MAX_ALTERNATIVES} remaps fit them "
                    "(logical_model.overlap.MAX_ALTERNATIVES); trace another P")
        parting = _parting(self, P)
        if parting:
            return (f"the traced P leave the remap open at P={P}: {len(parting)} other remap"
                    f"{'s' if len(parting) > 1 else ''} fit them as well and give other messages there "
                    f"({self._versus(parting[0])}); trace a P that cuts the mesh where they part")
        return None

    def expanded(self):
        """This remap and its alternatives, each with its alike layouts in place of its own
        where they give the same blocks at every traced P."""
        for m in (self, *self.alternatives):
            yield m
            for xa in (m.source.layout, *m.alike_source):
                for xb in (m.dest.layout, *m.alike_dest):
                    if xa is m.source.layout and xb is m.dest.layout:
                        continue
                    alt = dataclasses.replace(m, source=Blocks(xa, m.source.split), dest=Blocks(xb, m.dest.split),
                                              alike_source=(), alike_dest=(), alternatives=())
                    if all(_blocks_key(alt, P) == _blocks_key(m, P) for P in self.fitted):
                        yield alt

    def _versus(self, alt: "Remap") -> str:
        """What parts this remap from ``alt`` (mesh and bytes a point, cuts, layouts, order)."""
        out = []
        if (alt.mesh, alt.elem) != (self.mesh, self.elem):
            out.append(f"a {'x'.join(map(str, alt.mesh))} mesh at {alt.elem} bytes a point, not "
                       f"{'x'.join(map(str, self.mesh))} at {self.elem}")
        for name, a, b in (("source", alt.source, self.source), ("destination", alt.dest, self.dest)):
            if a.split != b.split:
                out.append(f"{a.split} {name} cuts, not {b.split}")
            if a.layout != b.layout:
                out.append(f"the {name} as {a.layout.describe()}, not {b.layout.describe()}")
        if alt.order != self.order:
            out.append(f"peers {alt.order}, not {self.order}")
        return "; ".join(out) or alt.formula()

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
                "alternatives": [a.to_dict() for a in self.alternatives], "more_fit": self.more_fit,
                "alike_source": [x.to_dict() for x in self.alike_source],
                "alike_dest": [x.to_dict() for x in self.alike_dest]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Remap":
        return cls(tuple(int(x) for x in d["mesh"]), int(d["elem"]), Blocks.from_dict(d["source"]),
                   Blocks.from_dict(d["dest"]), d.get("order", "cyclic"), tuple(int(a) for a in d.get("free", ())),
                   tuple(d.get("fitted", ())), tuple(cls.from_dict(a) for a in d.get("alternatives", ())),
                   bool(d.get("more_fit", False)), tuple(Layout.from_dict(x) for x in d.get("alike_source", ())),
                   tuple(Layout.from_dict(x) for x in d.get("alike_dest", ())))


def _blocks_key(m: Remap, P: int):
    """What fixes a remap's messages at P (None where its layouts have no grid there)."""
    try:
        out = []
        for side in (m.source, m.dest):
            p = side.layout.counts(P, m.mesh)
            out.append((p, tuple(a for a in side.layout.order if p[a] > 1), side.split))
        return (m.mesh, m.elem, m.order, m.free, *out)
    except ValueError:
        return None


@lru_cache(maxsize=1024)
def _parting(m: Remap, P: int) -> tuple:
    """The remaps that fit the traced P as well as ``m`` and give other messages at P (or
    cannot be placed there), each behaviour once."""
    mine = _blocks_key(m, P)
    ranks = np.arange(P)
    rows = [m.rows(ranks, P, side) for side in ("send", "recv")]
    seen, out = {mine}, []
    for alt in m.expanded():
        key = _blocks_key(alt, P)
        if key in seen:
            continue
        seen.add(key)
        if alt._problem(P) is not None or any(
                not all(np.array_equal(x, y) for x, y in zip(rows[i], alt.rows(ranks, P, side)))
                for i, side in enumerate(("send", "recv"))):
            out.append(alt)
    return tuple(out)


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


def _axis_constraints(a: np.ndarray, b: np.ndarray, v: np.ndarray, groups: np.ndarray, pb: int):
    """What one axis must satisfy, free of the mesh: the (a, b) block pairs seen there, and
    per group of messages that agree on the other axes the ratios their sizes impose on
    this axis's overlaps (size_i / overlap(a_i, b_i) equal within the group), as
    (a_i, b_i, a_r, b_r, v_i, v_r) with overlap(a_i, b_i) v_r = overlap(a_r, b_r) v_i,
    reduced and deduplicated. None where the sizes contradict themselves (one pair of
    block pairs with two ratios): no mesh can give them."""
    pair = a * pb + b
    o = np.argsort(groups, kind="stable")
    g = groups[o]
    head = np.concatenate([[True], g[1:] != g[:-1]])
    ref = o[np.maximum.accumulate(np.where(head, np.arange(len(g)), 0))]
    many = o[~head]
    ref = ref[~head]
    pairs = np.unique(pair)
    if many.size == 0:
        return pairs, np.zeros((0, 4), np.int64)
    vi, vr = v[many], v[ref]
    d = np.gcd(vi, vr)
    vi, vr = vi // d, vr // d
    pi, pr = pair[many], pair[ref]
    same = pi == pr
    if np.any(same & (vi != vr)):
        return None
    pi, pr, vi, vr = pi[~same], pr[~same], vi[~same], vr[~same]
    # one ratio per (pair, pair): sort by the pairs, then the ratios must agree within
    npair = int(pair.max()) + 1
    key = pi * npair + pr
    o = np.lexsort((vr, vi, key))
    key, vi, vr, pi, pr = key[o], vi[o], vr[o], pi[o], pr[o]
    new = np.concatenate([[True], key[1:] != key[:-1]])
    if np.any(~new[1:] & ((vi[1:] != vi[:-1]) | (vr[1:] != vr[:-1]))):
        return None
    return pairs, np.stack([pi[new], pr[new], vi[new], vr[new]], 1)


def _axis_mask(cons, pa: int, pb: int) -> np.ndarray:
    """(MAX_EXTENT, S, S) booleans: the mesh extents and split rules on one axis under which
    every block pair seen overlaps there and the sizes' ratios hold (:func:`_axis_constraints`)."""
    pairs, c = cons
    t = _overlap_table(pa, pb).reshape(MAX_EXTENT, len(SPLITS), len(SPLITS), pa * pb)
    out = np.all(t[..., pairs] > 0, axis=-1)
    rows = np.flatnonzero(out.reshape(-1))
    flat = t.reshape(-1, pa * pb)
    for lo in range(0, len(c), 16):  # a few constraints at a time, on the rows still in
        if rows.size == 0:
            break
        cc = c[lo:lo + 16]
        tr = flat[rows]
        rows = rows[np.all(tr[:, cc[:, 0]] * cc[:, 3] == tr[:, cc[:, 1]] * cc[:, 2], axis=1)]
    out = np.zeros(out.shape, bool)
    out.reshape(-1)[rows] = True
    return out


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
def _surface_codes(P: int) -> np.ndarray:
    """The slab/least-surface rule's blocks along the first axis at P, for every mesh
    ni x nj of up to MAX_EXTENT a side: (MAX_EXTENT, MAX_EXTENT)."""
    n = np.arange(1, MAX_EXTENT + 1)
    ni, nj = np.meshgrid(n, n, indexing="ij")
    pairs = [(a, P // a) for a in range(1, P + 1) if P % a == 0]
    surf = np.stack([-(-ni // a) + -(-nj // b) for a, b in pairs])
    area = np.stack([(-(-ni // a)) * (-(-nj // b)) for a, b in pairs])
    # least perimeter, ties to the larger block, then the first factor rising
    key = surf * (MAX_EXTENT * MAX_EXTENT + 1) - area
    a_best = np.array([a for a, _ in pairs])[np.argmin(key, axis=0)]
    out = np.where(nj >= P, 1, a_best)  # slabs: 1 along the first axis
    out.flags.writeable = False
    return out


@lru_cache(maxsize=16)
def _surface_groups(Ps: tuple[int, ...]):
    """The meshes grouped by the slab/least-surface rule's outcome at every P of Ps, shared
    by every pair of axes: [(blocks along the first axis per P, frozenset of (ni, nj))]."""
    codes = np.stack([_surface_codes(P) for P in Ps], -1).reshape(-1, len(Ps))
    keys, inv = np.unique(codes, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(len(keys) + 1))
    n = np.arange(1, MAX_EXTENT + 1)
    ni, nj = (x.ravel() for x in np.meshgrid(n, n, indexing="ij"))
    out = []
    for u, key in enumerate(keys):
        sel = order[bounds[u]:bounds[u + 1]]
        out.append((tuple(int(a) for a in key), frozenset(zip(ni[sel].tolist(), nj[sel].tolist()))))
    return out


@lru_cache(maxsize=64)
def _surface_outcomes(lay: Layout, Ps: tuple[int, ...]):
    i, j = lay.axes
    out = []
    for key, allowed in _surface_groups(Ps):
        counts = {}
        for P, a in zip(Ps, key):
            p = [1, 1, 1]
            p[i], p[j] = int(a), P // int(a)
            counts[P] = tuple(p)
        out.append((counts, allowed))
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
            # (a slab/least-surface variant is alike another layout on its meshes only)
            eff = (tuple((counts[P], tuple(a for a in lay.order if counts[P][a] > 1)) for P in Ps),
                   None if allowed is None else lay.axes)
            if eff in seen:  # alike at every traced P: an alternative, checked at the target
                seen[eff].append(lay)
                continue
            seen[eff] = [lay]
            placed.append((lay, counts, allowed))
    # (per variant: a slab/least-surface layout has one per outcome over the meshes)
    alike = {id(x): seen[(tuple((x[1][P], tuple(a for a in x[0].order if x[1][P][a] > 1)) for P in Ps),
                          None if x[2] is None else x[0].axes)] for x in placed}
    # a rank's peers are the blocks of the other decomposition in one box of its block
    # coordinates (less itself, a local copy): layouts where they are not cannot be it
    coords = {}
    for lay, counts, _ in placed:
        for P in Ps:
            coords.setdefault((lay.order, counts[P]), _coords(np.arange(P), counts[P], lay.order))
    Pd = sorted(Ps, reverse=True)
    # ... and the sizes one rank receives from (sends to) the blocks of the other layout are
    # a product of one factor per mesh axis (the overlaps there): a layout alone is tested
    src = [x for x in placed if all(_boxlike(obs[P][1], obs[P][0], x[1][P], x[0].order)
                                    and _separable(obs[P][1], coords[x[0].order, x[1][P]][obs[P][0]], obs[P][2], x[1][P])
                                    for P in Pd)]
    dst = [x for x in placed if all(_boxlike(obs[P][0], obs[P][1], x[1][P], x[0].order)
                                    and _separable(obs[P][0], coords[x[0].order, x[1][P]][obs[P][1]], obs[P][2], x[1][P])
                                    for P in Pd)]
    # a pair of layouts whose peer sets are not products of per-axis overlaps cannot be it
    # (a test linear in the messages, before the per-axis masks over every mesh extent;
    # empty where every rank sends to every other)
    full = {P: len(obs[P][0]) == P * (P - 1) for P in Ps}
    # every rank's block coordinate on each axis, one id per distinct column: the per-axis
    # parts of the test are shared by the pairs whose layouts agree on that axis
    col_id: dict = {}
    ids = {}
    for x in src + dst:
        for P in Ps:
            c = coords[x[0].order, x[1][P]]
            ids[id(x), P] = tuple(col_id.setdefault((P, x[1][P][k], c[:, k].tobytes()), len(col_id))
                                  for k in range(3))
    parts: dict = {}
    pairs = [(x, y) for x, y in itertools.product(src, dst)
             if all(full[P] or _product_of_axes(obs[P], x[1][P], y[1][P], coords[x[0].order, x[1][P]],
                                                coords[y[0].order, y[1][P]], ids[id(x), P], ids[id(y), P], parts)
                    for P in Pd)]
    # per layout pair, per axis: the extents and split rules every traced P allows; every
    # pair is tried, for a pair of other layouts may fit the traced P as well
    fits: list[Remap] = []
    cache: dict = {}
    for x, y in pairs:
        for m in _try_pair(*x, *y, obs, want, Ps, MAX_ALTERNATIVES + 1 - len(fits), coords, cache):
            fits.append(dataclasses.replace(m, fitted=tuple(Ps), alike_source=tuple(alike[id(x)][1:]),
                                            alike_dest=tuple(alike[id(y)][1:])))
        if len(fits) > MAX_ALTERNATIVES:  # more fit than are kept: the targets are refused
            break
        if cache.get("tried", 0) > REMAP_CANDIDATES:
            return None  # (the search gave up: no remap is claimed, alternatives unseen)
    if not fits:
        return None
    return dataclasses.replace(fits[0], alternatives=tuple(fits[1:MAX_ALTERNATIVES + 1]),
                               more_fit=len(fits) > MAX_ALTERNATIVES)


def _separable(owner: np.ndarray, peer_coords: np.ndarray, v: np.ndarray, p: tuple) -> bool:
    """Per owner (a rank, on one side), the sizes of its messages to or from the blocks of
    one layout (their coordinates ``peer_coords`` under counts ``p``) are a product of one
    factor per mesh axis: between two blocks that differ on axis k only, the ratio of
    sizes depends on the owner and the two coordinates on k alone."""
    n = int(np.prod(p))
    for k in range(3):
        if p[k] == 1:
            continue
        other = np.zeros(len(owner), np.int64)
        for j in range(3):
            if j != k:
                other = other * p[j] + peer_coords[:, j]
        if _axis_constraints(owner, peer_coords[:, k], v, owner * n + other, p[k]) is None:
            return False
    return True


def _product_of_axes(obs_p: tuple, pa: tuple, pb: tuple, ra: np.ndarray, rb: np.ndarray,
                     ia: tuple = (), ib: tuple = (), parts: dict | None = None) -> bool:
    """At one P, the messages are the pairs (source block a, destination block b) whose
    blocks overlap on every mesh axis, less a rank's own: per axis k the relation E_k of
    the (a_k, b_k) seen, the messages are then every (a, b) with (a_k, b_k) in E_k for
    all k but a rank to itself; equal in number to the messages seen (which they hold).
    ``ra``/``rb``: every rank's block coordinates under the two layouts; ``ia``/``ib``
    ids of their columns, keys of the per-axis parts kept in ``parts``."""
    r, q, _ = obs_p
    total, own = None, None
    for k in range(3):
        key = (len(ra), k, ia[k], ib[k]) if parts is not None else None
        got = parts.get(key) if key is not None else None
        if got is None:
            e = np.zeros((pa[k], pb[k]), bool)
            e[ra[r, k], rb[q, k]] = True
            got = (e.sum(axis=1)[ra[:, k]], e[ra[:, k], rb[:, k]])
            if key is not None:
                parts[key] = got
        total = got[0] if total is None else total * got[0]
        own = got[1] if own is None else own & got[1]
    return int(total.sum() - own.sum()) == len(r)


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


def _try_pair(la, ca, aa, lb, cb, ab, obs, want, Ps, most: int, coords: dict, cache: dict) -> list[Remap]:
    """The remaps from layout la to lb (mesh extents, cuts, bytes per point, peer order)
    that give each traced P's messages, up to ``most`` of them: [] where none does."""
    S = len(SPLITS)
    out: list[Remap] = []
    # what each axis must satisfy at each P, free of the mesh: a pair whose sizes contradict
    # themselves is given up before any mesh is tried
    cons = {}
    for P in sorted(Ps, reverse=True):
        pa, pb = ca[P], cb[P]
        r, q, v = obs[P]
        a = coords[la.order, pa][r]
        b = coords[lb.order, pb][q]
        for k in range(3):
            key = np.zeros(len(r), np.int64)
            for j in range(3):
                if j != k:
                    key = (key * pa[j] + a[:, j]) * pb[j] + b[:, j]
            ck = (P, pb[k], a[:, k].tobytes(), b[:, k].tobytes(), key.tobytes())
            if ck not in cache:  # pairs of layouts alike on this axis share it
                cache[ck] = _axis_constraints(a[:, k], b[:, k], v, key, pb[k])
            cons[P, k] = cache[ck]
            if cons[P, k] is None:
                return out
    masks = [np.ones((MAX_EXTENT, S, S), bool) for _ in range(3)]
    split_any = [False, False, False]
    for P in sorted(Ps, reverse=True):
        pa, pb = ca[P], cb[P]
        for k in range(3):
            split_any[k] |= pa[k] > 1 or pb[k] > 1
            if pa[k] == 1 and pb[k] == 1:
                continue  # one block on both sides: any extent (the ratios are all 1 there)
            ck = (pa[k], pb[k], cons[P, k][0].tobytes(), cons[P, k][1].tobytes())
            if ck not in cache:  # pairs of layouts alike on this axis share it
                cache[ck] = _axis_mask(cons[P, k], pa[k], pb[k])
            masks[k] &= cache[ck]
            if not masks[k].any():
                return out
    # one split rule per decomposition on every axis: a pair of rules one axis excludes
    # is out on all of them
    both = masks[0].any(axis=0) & masks[1].any(axis=0) & masks[2].any(axis=0)
    if not both.any():
        return out
    if not any(split_any):
        return out
    P0 = Ps[-1]
    r0, q0, v0 = obs[P0]
    a0, b0 = _coords(r0, ca[P0], la.order), _coords(q0, cb[P0], lb.order)
    for sa, sb in itertools.product(range(S), range(S)):
        if not both[sa, sb]:
            continue
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
            cache["tried"] = cache.get("tried", 0) + 1
            if cache["tried"] > REMAP_CANDIDATES:
                return out
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
                    if len(out) >= most:  # the caller refuses the targets then
                        return out
    return out
