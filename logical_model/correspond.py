"""Which phase of one signature run is which phase of another (functional similarity).

The method relates phase k at every P (Panadero et al. §2.2). Real codes do not always
keep one phase list across P: a set-up that exchanges more at P = 4, a kernel that
splits in two at a larger P, a solver that converges in a different number of
iterations. :func:`correspond` aligns the phase lists of the runs (a longest common
subsequence of their phases' kind and operations, taken run by run against the smallest
P) and keeps the phases every run has; each phase that some run lacks is left out of
the model with the share of each measured run it held, so that predictions can say how
much of the run they do not cover. When no loop phase is common to every run, nothing
can be modelled and the runs are refused as before, naming the first phase that differs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from signature.model import Signature

from .model import ModelError
from .onesided import renamed

__all__ = ["correspond", "align_to"]


def _key(p) -> tuple:
    # the same operations first used in another order (a loop whose repetition the
    # signature starts elsewhere at another P) are the same phase
    return p.kind, tuple(sorted(p.ops))


def _same(a: tuple, b: tuple) -> bool:
    """Two phases' keys match: the same kind, and operations that mostly agree (at least
    half of all the operations either uses are used by both: a class of one rank at the
    smallest P has no traffic within it, as GROMACS's single PME rank at P = 4 makes no
    Alltoall; the phases' slots are related one by one after this)."""
    if a == b:
        return True
    sa, sb = set(a[1]), set(b[1])
    return a[0] == b[0] and len(sa & sb) >= 0.5 * len(sa | sb)


def _lcs(a: Sequence, b: Sequence, same=None) -> list[tuple[int, int]]:
    """Index pairs of a common subsequence of ``a`` and ``b``: the longest one under
    equality; with ``same(x, y)`` (a looser match), the one of highest score where an
    equal pair scores 3 and a merely similar one 1, so that loose matches fill the gaps
    between equal ones but never displace them (two swapped phases that look alike are
    not paired crosswise)."""
    def score(x, y) -> int:
        return 3 if x == y else (1 if same is not None and same(x, y) else 0)

    n, m = len(a), len(b)
    L = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        Li, Li1, ai = L[i], L[i + 1], a[i]
        for j in range(m - 1, -1, -1):
            w = score(ai, b[j])
            Li[j] = max(Li1[j], Li[j + 1], Li1[j + 1] + w if w else 0)
    out, i, j = [], 0, 0
    while i < n and j < m:
        w = score(a[i], b[j])
        if w and L[i][j] == L[i + 1][j + 1] + w:
            out.append((i, j))
            i, j = i + 1, j + 1
        elif L[i + 1][j] >= L[i][j + 1]:
            i += 1
        else:
            j += 1
    return out


def _text(p) -> str:
    return f"{p.kind} {', '.join(p.ops)}"


def _refusal(sigs: Sequence[Signature], keys: list[list[tuple]]) -> ModelError:
    base = sigs[0]
    for s, b in zip(sigs[1:], keys[1:]):
        a = keys[0]
        for i in range(max(len(a), len(b))):
            if i >= len(a) or i >= len(b) or a[i] != b[i]:
                pa = _text(base.phases[i]) if i < len(a) else "nothing"
                pb = _text(s.phases[i]) if i < len(b) else "nothing"
                return ModelError(
                    f"phases do not correspond across P, and no loop phase is common to every run: phase {i} "
                    f"is '{pa}' at P={base.nprocs} ({base.source}) but '{pb}' at P={s.nprocs} ({s.source})"
                    + (f"; the signatures have {', '.join(str(len(x.phases)) for x in sigs)} phases at P = "
                       f"{', '.join(str(x.nprocs) for x in sigs)}" if len(a) != len(b) else "")
                    + ". Are these runs of the same program with the same options?")
    return ModelError("phases do not correspond across P")


def correspond(signatures: Sequence[Signature]) -> tuple[list[Signature], list[dict[str, Any]]]:
    """The runs (sorted by P) with only the phases every run has, in the same order, each
    renumbered to its id at the smallest P; and the phases left out: per phase its id at
    the smallest P (None when that run lacks it), kind, pattern, why, and the share of
    each measured run it held (``measured_share``, P -> share; 0 where the run lacks it)
    and its slowest rank's computation there (``measured_computation``, P -> seconds:
    :meth:`signature.Phase.computation`).
    Runs whose phases already correspond come back unchanged, with nothing left out."""
    sigs = sorted(signatures, key=lambda s: s.nprocs)
    keys = [[_key(p) for p in s.phases] for s in sigs]
    if all(k == keys[0] for k in keys[1:]):
        return sigs, []
    common = list(range(len(keys[0])))  # positions in the smallest P's phases
    match = [list(common)]  # per run: the position of each common phase in its phases
    for j in range(1, len(sigs)):
        pairs = _lcs([keys[0][i] for i in common], keys[j], _same)
        keep = [a for a, _ in pairs]
        common = [common[a] for a in keep]
        match = [[m[a] for a in keep] for m in match] + [[b for _, b in pairs]]
    if not any(keys[0][i][0] == "loop" for i in common):
        raise _refusal(sigs, keys)
    base = sigs[0]
    out = []
    for s, m in zip(sigs, match):
        phases = tuple(renamed(s.phases[pos], base.phases[c].id) for pos, c in zip(m, common))
        out.append(dataclasses.replace(s, phases=phases))
    left: list[dict[str, Any]] = []
    for j, (s, m) in enumerate(zip(sigs, match)):
        kept = set(m)
        for pos, p in enumerate(s.phases):
            if pos in kept:
                continue
            # the same kind of phase left out at another P: one entry for all of them
            d = next((d for d in left if d["key"] == _key(p) and s.nprocs not in d["at"]), None)
            if d is None:
                d = {"key": _key(p), "at": {}, "id": p.id if j == 0 else None, "kind": p.kind,
                     "pattern": p.pattern, "measured_share": {x.nprocs: 0.0 for x in sigs},
                     "measured_computation": {x.nprocs: 0.0 for x in sigs}}
                left.append(d)
            d["at"][s.nprocs] = pos
            d["measured_share"][s.nprocs] = p.share
            d["measured_computation"][s.nprocs] = p.computation(s.work_mode)
    for d in left:
        where = ", ".join(f"phase {pos} at P={P}" for P, pos in sorted(d["at"].items()))
        missing = [x.nprocs for x in sigs if x.nprocs not in d["at"]]
        d["problem"] = (f"no counterpart in every run ({where}; none at P=" + ", ".join(map(str, missing))
                        + "): the phases do not correspond across P here" if missing else
                        f"it comes in another place among the common phases at some P ({where})")
        del d["key"], d["at"]
    return out, left


def align_to(base: Signature, run: Signature) -> Signature | None:
    """``run`` (another workload of the same program: the distant point's small runs) with
    only the phases that correspond to ``base``'s, renumbered to ``base``'s ids; None when
    some phase of ``base`` has no counterpart in ``run``."""
    a, b = [_key(p) for p in base.phases], [_key(p) for p in run.phases]
    if a == b:
        return dataclasses.replace(run, phases=tuple(renamed(p, q.id) for p, q in zip(run.phases, base.phases)))
    pairs = _lcs(a, b, _same)
    if len(pairs) != len(a):
        return None
    return dataclasses.replace(run, phases=tuple(renamed(run.phases[j], base.phases[i].id) for i, j in pairs))
