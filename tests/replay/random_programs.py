"""Random MPI programs that always complete, for the replay's property-based tests.

A program is a sequence of global steps that every rank takes in the same order, so the
order itself is a schedule in which every step can run once the ones before it have: the
program completes under any eager/rendezvous threshold. Steps: a blocking send/receive pair, a
nonblocking pair with its waits (the receive from MPI_ANY_SOURCE, matched with the sender its
completion names, one time in three), a shift exchange on every rank (Irecv, Isend, Waitall),
a world collective (Barrier, Bcast, Reduce, Allreduce, Allgather, Alltoall), and a
nonblocking Iallreduce. Every event carries a random compute burst and a phase (step // 3).

Used by ``test_engine_properties.py`` (through Hypothesis) and by its MPI-workers test (in a
script under mpiexec, from a seed); numpy only, so both can import it.
"""

from __future__ import annotations

import numpy as np

COLLECTIVES = ("Barrier", "Bcast", "Reduce", "Allreduce", "Allgather", "Alltoall")
ANY_SOURCE = -2


def random_program(P: int, steps: int, seed: int, *, max_bytes: int = 4000):
    """Columns and completions of a random program on P ranks: a dict for Program.from_arrays
    (``nprocs``, the event columns, ``completions``)."""
    rng = np.random.default_rng(seed)
    rows: list[dict] = []          # rank, op, peer, recv_peer, root, tag, bytes, recv_bytes, req, comp, phase
    seq = [0] * P                  # next seq per rank
    next_req = [0] * P
    comps = {"rank": [], "seq": [], "req": [], "peer": [], "tag": [], "bytes": []}

    def ev(r, op, *, peer=-1, recv_peer=-1, root=-1, tag=0, nbytes=0, recv_bytes=0, req=-1, phase=0):
        rows.append(dict(rank=r, op=op, peer=peer, recv_peer=recv_peer, root=root, tag=tag, bytes=nbytes,
                         recv_bytes=recv_bytes, req=req, comp=float(rng.integers(0, 40)) * 1e-6,
                         phase=phase))
        seq[r] += 1
        return seq[r] - 1

    def complete(r, s, req, peer=-1, tag=-1, nbytes=-1):
        for k, v in zip(("rank", "seq", "req", "peer", "tag", "bytes"), (r, s, req, peer, tag, nbytes)):
            comps[k].append(v)

    for step in range(steps):
        ph = step // 3
        kind = rng.choice(["p2p", "nb", "shift", "coll", "icoll"] if P > 1 else ["coll", "icoll"])
        b = int(rng.integers(0, max_bytes))
        tag = int(rng.integers(0, 4))
        if kind in ("p2p", "nb"):
            src, dst = (int(x) for x in rng.choice(P, 2, replace=False))
            if kind == "p2p":
                ev(src, "Send", peer=dst, tag=tag, nbytes=b, phase=ph)
                ev(dst, "Recv", peer=src, tag=tag, recv_bytes=b, phase=ph)
            else:
                qs, qr = next_req[src], next_req[dst]
                next_req[src] += 1
                next_req[dst] += 1
                wild = rng.random() < 1 / 3
                ev(src, "Isend", peer=dst, tag=tag, nbytes=b, req=qs, phase=ph)
                ev(dst, "Irecv", peer=ANY_SOURCE if wild else src, tag=tag, recv_bytes=b, req=qr, phase=ph)
                s = ev(src, "Wait", phase=ph)
                complete(src, s, qs)
                s = ev(dst, "Wait", phase=ph)
                complete(dst, s, qr, peer=src, tag=tag, nbytes=b)
        elif kind == "shift":
            k = int(rng.integers(1, P))
            for r in range(P):
                qr, qs = next_req[r], next_req[r] + 1
                next_req[r] += 2
                ev(r, "Irecv", peer=(r - k) % P, tag=tag, recv_bytes=b, req=qr, phase=ph)
                ev(r, "Isend", peer=(r + k) % P, tag=tag, nbytes=b, req=qs, phase=ph)
                s = ev(r, "Waitall", phase=ph)
                complete(r, s, qr, peer=(r - k) % P, tag=tag, nbytes=b)
                complete(r, s, qs)
        elif kind == "coll":
            op = str(rng.choice(COLLECTIVES))
            root = int(rng.integers(0, P)) if op in ("Bcast", "Reduce") else -1
            nb = 0 if op == "Barrier" else b
            for r in range(P):
                ev(r, op, root=root, nbytes=nb, recv_bytes=nb, phase=ph)
        else:  # Iallreduce ... Wait, with a burst between
            for r in range(P):
                q = next_req[r]
                next_req[r] += 1
                ev(r, "Iallreduce", nbytes=b, recv_bytes=b, req=q, phase=ph)
                s = ev(r, "Wait", phase=ph)
                complete(r, s, q)
    cols = {k: np.array([row[k] for row in rows]) for k in rows[0]} if rows else {}
    cols["op"] = np.array([row["op"] for row in rows], dtype=object).astype(str)
    return {"nprocs": P, **cols, "completions": {k: np.array(v, np.int64) for k, v in comps.items()}}


def build(spec: dict, **extra):
    """The :class:`replay.Program` of a :func:`random_program` spec."""
    from replay import Program

    spec = dict(spec)
    P = spec.pop("nprocs")
    return Program.from_arrays(P, **spec, **extra)


def with_unmatched_receive(spec: dict, rank: int, at: int, source: int):
    """``spec`` with a receive from ``source`` that no rank ever sends (tag 999) inserted as
    event ``at`` of ``rank``; returns (spec, the receive's phase)."""
    idx = np.flatnonzero(spec["rank"] == rank)
    at = min(at, len(idx))
    pos = int(idx[at]) if at < len(idx) else (int(idx[-1]) + 1 if len(idx) else 0)
    phase = int(spec["phase"][idx[at]]) if at < len(idx) else (int(spec["phase"][idx[-1]]) if len(idx) else 0)
    new = {"nprocs": spec["nprocs"]}
    values = {"rank": rank, "op": "Recv", "peer": source, "recv_peer": -1, "root": -1, "tag": 999,
              "bytes": 0, "recv_bytes": 8, "req": -1, "comp": 0.0, "phase": phase}
    for k, v in spec.items():
        if k in ("nprocs", "completions"):
            continue
        new[k] = np.insert(v, pos, values[k])
    # completions name (rank, seq): the rank's later events moved one seq on
    c = {k: v.copy() for k, v in spec["completions"].items()}
    later = (c["rank"] == rank) & (c["seq"] >= at)
    c["seq"][later] += 1
    new["completions"] = c
    return new, phase
