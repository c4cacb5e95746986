"""Replay speed: simulated events per second of the replay engine on one core.

Builds a synthetic stencil-like program (2-D periodic halo exchange: 4 Irecv, 4 Isend
and a Waitall per iteration, an 8-byte Allreduce every 10 iterations, compute bursts
of about 1 ms with a per-rank imbalance) at P = 4096 and 65536, replays it on the
cluster-a profile, and prints a table. The last line is one JSON object with the
figures. No assertion on times (benchmarks print, they do not judge).

    python bench/replay_speed.py [--iters N] [--sizes 4096,65536]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from replay import Program, load, replay  # noqa: E402


def synthetic_stencil(P: int, iters: int, *, halo_bytes: int = 8192, seed: int = 0) -> Program:
    """A 2-D halo exchange on a periodic px x py grid, built column-wise."""
    px = int(2 ** np.ceil(np.log2(P) / 2))
    py = P // px
    if px * py != P:
        raise ValueError(f"P={P} must be a power of two")
    rng = np.random.default_rng(seed)
    # one rank's template: Init, iterations, Finalize
    ops, kinds, tags, comps = ["Init"], [-1], [-1], [0.0]
    for it in range(iters):
        for k in range(4):
            ops.append("Irecv"); kinds.append(k); tags.append(k); comps.append(1e-3 if k == 0 else 2e-6)
        for k in range(4):
            ops.append("Isend"); kinds.append(k); tags.append(k ^ 1); comps.append(1e-6)
        ops.append("Waitall"); kinds.append(-1); tags.append(-1); comps.append(5e-6)
        if it % 10 == 9:
            ops.append("Allreduce"); kinds.append(-1); tags.append(-1); comps.append(1e-5)
    ops.append("Finalize"); kinds.append(-1); tags.append(-1); comps.append(1e-5)
    from signature.trace import OP_CODE
    op_t = np.array([OP_CODE[o] for o in ops], np.int64)
    kind_t = np.array(kinds)
    tag_t = np.array(tags)
    comp_t = np.array(comps)
    n = len(op_t)
    ranks = np.arange(P)
    x, y = ranks % px, ranks // px
    # neighbour k: 0 west, 1 east, 2 south, 3 north; receive from k, send to k with tag k^1
    nbr = np.stack([y * px + (x - 1) % px, y * px + (x + 1) % px,
                    ((y - 1) % py) * px + x, ((y + 1) % py) * px + x], axis=1)
    rank = np.repeat(ranks, n)
    op = np.tile(op_t, P)
    kind = np.tile(kind_t, P)
    tag = np.tile(tag_t, P)
    # Isend to neighbour k carries tag k^1: the receiver expects it from its neighbour k^1
    peer = np.where(kind >= 0, nbr[rank, np.maximum(kind, 0)], -1)
    is_p2p = kind >= 0
    nbytes = np.where(op == OP_CODE["Isend"], halo_bytes, 0)
    nbytes = np.where(op == OP_CODE["Allreduce"], 8, nbytes)
    recv_bytes = np.where(op == OP_CODE["Irecv"], halo_bytes, 0)
    recv_bytes = np.where(op == OP_CODE["Allreduce"], 8, recv_bytes)
    imbalance = 1.0 + 0.05 * rng.random(P)
    comp = np.tile(comp_t, P) * imbalance[rank]
    # request ids: per rank, in order of the posts
    per_rank_req = np.cumsum(is_p2p.reshape(P, n), axis=1) - 1
    req = np.where(is_p2p, per_rank_req.reshape(-1), -1)
    # completions: each Waitall completes the 8 requests posted just before it
    wait_pos = np.flatnonzero(op_t == OP_CODE["Waitall"])
    n_wait = len(wait_pos)
    c_rank = np.repeat(ranks, n_wait * 8)
    c_seq = np.tile(np.repeat(wait_pos, 8), P)
    c_req = np.tile(np.arange(n_wait * 8), P)
    comps_tab = {"rank": c_rank, "seq": c_seq, "req": c_req}
    return Program.from_arrays(P, rank=rank, op=op, peer=peer, tag=tag, bytes=nbytes,
                               recv_bytes=recv_bytes, req=req, comp=comp, completions=comps_tab,
                               name=f"synthetic-stencil-P{P}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4096,65536", help="comma-separated P values")
    ap.add_argument("--iters", type=int, default=0,
                    help="iterations (default: 200 at P <= 4096, 20 above)")
    ap.add_argument("--machine", default="cluster-a")
    ap.add_argument("--other", default="cluster-b", help="second machine for the repeat replay")
    args = ap.parse_args(argv)
    machine, other = load(args.machine), load(args.other)
    rows = []
    for P in [int(x) for x in args.sizes.split(",")]:
        iters = args.iters or (200 if P <= 4096 else 20)
        t0 = time.perf_counter()
        prog = synthetic_stencil(P, iters)
        t1 = time.perf_counter()
        res = replay(prog, machine)
        t2 = time.perf_counter()
        res2 = replay(prog, other)  # a second machine: the event layout is cached on the program
        t3 = time.perf_counter()
        rows.append({"P": P, "iters": iters, "events": prog.n_events, "messages": prog.n_messages,
                     "steps": res.steps, "build_s": round(t1 - t0, 3),
                     "replay_s": round(t2 - t1, 3), "events_per_s": prog.n_events / (t2 - t1),
                     "replay2_s": round(t3 - t2, 3), "events_per_s_2": prog.n_events / (t3 - t2),
                     "predicted_runtime_s": {machine.name: res.runtime, other.name: res2.runtime}})
    head = (f"{'P':>7} {'iters':>5} {'events':>11} {'steps':>6} {'build s':>8} "
            f"{'replay s':>9} {'events/s':>10} {'again s':>8} {'events/s':>10}  predicted runtime")
    print(f"replay speed on one core: first replay ({machine.name}), then again on "
          f"{other.name} (event layout cached on the program); program build not included")
    print(head)
    print("-" * len(head))
    for r in rows:
        pred = ", ".join(f"{k} {v:.4f} s" for k, v in r["predicted_runtime_s"].items())
        print(f"{r['P']:>7} {r['iters']:>5} {r['events']:>11,} {r['steps']:>6} {r['build_s']:>8.2f} "
              f"{r['replay_s']:>9.2f} {r['events_per_s']:>10.3g} {r['replay2_s']:>8.2f} "
              f"{r['events_per_s_2']:>10.3g}  {pred}")
    figures = {"goal": "events/s >= 5e6 on one core", "machines": [machine.name, other.name],
               "results": [{k: (round(v, 1) if k.startswith("events_per_s") else v)
                            for k, v in r.items()} for r in rows],
               "met_first_replay": all(r["events_per_s"] >= 5e6 for r in rows),
               "met_repeat_replay": all(r["events_per_s_2"] >= 5e6 for r in rows)}
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
