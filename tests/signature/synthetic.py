"""Synthetic traces of time-stepping programs, built event by event, for the phase
detector's property tests.

A program is written as one function per rank that appends the rank's calls for one
step; :func:`build_trace` runs it for every step and assembles a complete
:class:`signature.Trace` (times advance by the compute burst before each call and a
short time inside it; messages pair up, so the message check passes).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from signature import OP_CODE, CommTable, Trace

Call = tuple  # (op name, peer, bytes) or (op name, peer, bytes, recv_peer, recv_bytes), then
#              optionally the communicator's id and aux (a new communicator's id)


def build_trace(P: int, steps: int, step_calls: Callable[[int, int], list[Call]], *,
                burst: float = 1e-3, seed: int = 0, comms: CommTable | None = None) -> Trace:
    """A complete trace of ``steps`` calls of ``step_calls(rank, step)`` on every rank,
    between a setup Barrier and a final one. A call of 6 or 7 items names its
    communicator (an id in ``comms``; 0, MPI_COMM_WORLD, otherwise) and its aux (the id of
    the communicator a Comm_split or Comm_dup makes)."""
    rng = np.random.default_rng(seed)
    cols: dict[str, list] = {c: [] for c in ("rank", "seq", "op", "peer", "recv_peer", "root",
                                             "bytes", "recv_bytes", "comm", "aux")}
    t_start: list[float] = []
    offsets = [0]
    for r in range(P):
        calls: list[Call] = [("Init", -1, 0), ("Barrier", -1, 0)]
        for s in range(steps):
            calls += step_calls(r, s)
        calls += [("Barrier", -1, 0), ("Finalize", -1, 0)]
        t = -1e-3
        for seq, c in enumerate(calls):
            op, peer, nbytes = c[:3]
            recv_peer, recv_bytes = (c[3], c[4]) if len(c) > 3 else (-1, 0)
            cols["comm"].append(c[5] if len(c) > 5 else 0)
            cols["aux"].append(c[6] if len(c) > 6 else 0)
            if op == "Recv":
                recv_peer, recv_bytes, peer = peer, nbytes, peer
                nbytes = 0
            cols["rank"].append(r)
            cols["seq"].append(seq)
            cols["op"].append(OP_CODE[op])
            cols["peer"].append(peer)
            cols["recv_peer"].append(recv_peer)
            cols["root"].append(-1)
            cols["bytes"].append(nbytes)
            cols["recv_bytes"].append(recv_bytes)
            t_start.append(max(t, 0.0) if seq else t)
            t = max(t, 0.0) + 1e-5 + burst * (0.9 + 0.2 * rng.random())
        offsets.append(offsets[-1] + len(calls))
    n = offsets[-1]
    ev = {c: np.asarray(v, np.int64) for c, v in cols.items()}
    ev["rank"] = ev["rank"].astype(np.int32)
    ev["op"] = ev["op"].astype(np.uint8)
    for c in ("peer", "recv_peer", "root", "comm", "aux"):
        ev[c] = ev[c].astype(np.int32)
    ev.update(tag=np.zeros(n, np.int32),
              req=np.full(n, -1, np.int64), t_start=np.asarray(t_start),
              t_comm=np.full(n, 1e-5), ctx_switches=np.zeros(n, np.int64))
    ev["t_comp"] = np.concatenate([[0.0], np.diff(ev["t_start"])]) - 1e-5
    ev["t_cpu"] = ev["t_comp"].copy()
    empty = {c: np.zeros(0, np.int64) for c in ("rank", "seq", "req", "bytes", "peer", "tag")}
    lists = {c: np.zeros(0, np.int64) for c in ("rank", "seq", "kind", "start", "length", "values")}
    return Trace(meta={"nprocs": P, "complete": True, "work_mode": "cpu-time", "app": "synthetic"},
                 events=ev, rank_offsets=np.asarray(offsets, np.int64), completions=empty,
                 lists=lists, comms=comms if comms is not None else CommTable.world_only(P))


def comm_table(P: int, groups: list[list[int]]) -> CommTable:
    """MPI_COMM_WORLD (id 0) and one communicator per group of world ranks (ids 1, 2, ...)."""
    groups = [list(range(P))] + groups
    sizes = [len(g) for g in groups]
    return CommTable(size=np.array(sizes, np.int32), inter=np.zeros(len(groups), bool),
                     member_offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                     members=np.concatenate(groups).astype(np.int32),
                     cart_offsets=np.zeros(len(groups) + 1, np.int64),
                     cart_dims=np.zeros(0, np.int32), cart_periods=np.zeros(0, bool))


def random_updates(P, rng, updates):
    """Each rank's calls of a RandomAccess-like kernel: ``updates[r]`` sends of 8 bytes to
    random other ranks and the receives of what the others send it, in a random order."""
    dests = [rng.choice([d for d in range(P) if d != r], size=updates[r]) for r in range(P)]
    incoming = [[s for s in range(P) for d in dests[s] if d == r] for r in range(P)]
    out = []
    for r in range(P):
        calls = [("Send", int(d), 8) for d in dests[r]] + [("Recv", int(s), 8) for s in incoming[r]]
        out.append([calls[i] for i in rng.permutation(len(calls))])
    return out
