"""Each family of wrapped MPI calls records exactly what the program did: op, peers
(world ranks), root, tag, byte counts, communicator, request ids and their completions.

One small mpi4py program per family (and one C halo exchange, for MPI_PROC_NULL with
real counts) runs once under the tracer (module-scoped, so that the whole file costs
seven traced runs); each test checks one behaviour of that trace. Buffers are numpy arrays with explicit dtypes, so byte counts are exact;
the pickle API's sizes depend on pickle, so those tests check peers, roots and that
sender and receiver agree rather than sizes.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import needs_mpi

from signature import trace_run
from signature.trace import (
    LIST_RECV,
    LIST_SEND,
    LIST_STARTED,
    OP_CODE,
    OPS,
    PEER_ANY,
    PEER_NONE,
    PEER_NULL,
)

pytestmark = needs_mpi

COLS = ("seq", "op", "peer", "recv_peer", "root", "tag", "comm", "aux", "bytes", "recv_bytes",
        "req")

# ---------------------------------------------------------------------------------------
# The programs. Comments give the expected records.
# ---------------------------------------------------------------------------------------

BLOCKING = """
    from mpi4py import MPI
    import numpy as np
    comm = MPI.COMM_WORLD
    r, P = comm.rank, comm.size
    right, left = (r + 1) % P, (r - 1) % P
    # Send/Recv 0 -> 1: 10 doubles, tag 11
    if r == 0:
        comm.Send(np.arange(10, dtype=np.float64), dest=1, tag=11)
    elif r == 1:
        comm.Recv(np.empty(16, np.float64), source=0, tag=11)
    # Ssend 2 -> 3: 4 int32 into an 8-int32 buffer, tag 12
    if r == 2:
        comm.Ssend(np.arange(4, dtype=np.int32), dest=3, tag=12)
    elif r == 3:
        comm.Recv(np.empty(8, np.int32), source=2, tag=12)
    # Bsend 1 -> 2 through an attached buffer: 6 int64, tag 13
    if r == 1:
        MPI.Attach_buffer(bytearray(MPI.BSEND_OVERHEAD + 1024))
        comm.Bsend(np.arange(6, dtype=np.int64), dest=2, tag=13)
        MPI.Detach_buffer()
    elif r == 2:
        comm.Recv(np.empty(6, np.int64), source=1, tag=13)
    # Rsend 3 -> 0 after a barrier, so that the receive is posted: 5 float32, tag 14
    if r == 0:
        pending = comm.Irecv(np.empty(5, np.float32), source=3, tag=14)
    comm.Barrier()
    if r == 3:
        comm.Rsend(np.ones(5, np.float32), dest=0, tag=14)
    elif r == 0:
        pending.Wait()
    # Sendrecv ring: r+1 doubles to the right, (left+1) doubles from the left, tag 15
    comm.Sendrecv(np.zeros(r + 1, np.float64), dest=right, sendtag=15,
                  recvbuf=np.empty(P, np.float64), source=left, recvtag=15)
    # Sendrecv_replace reversed ring: 2 int16, tag 16
    comm.Sendrecv_replace(np.full(2, r, np.int16), dest=left, sendtag=16, source=right,
                          recvtag=16)
    # ANY_SOURCE: rank 0 takes one message from every other rank k (k doubles), tag 17
    if r == 0:
        for _ in range(P - 1):
            comm.Recv(np.empty(P, np.float64), source=MPI.ANY_SOURCE, tag=17)
    else:
        comm.Send(np.zeros(r, np.float64), dest=0, tag=17)
    # MPI_PROC_NULL, tag 18
    comm.Send(np.zeros(2, np.float64), dest=MPI.PROC_NULL, tag=18)
    comm.Recv(np.empty(2, np.float64), source=MPI.PROC_NULL, tag=18)
"""

NONBLOCKING = """
    from mpi4py import MPI
    import numpy as np
    comm = MPI.COMM_WORLD
    r, P = comm.rank, comm.size
    right, left = (r + 1) % P, (r - 1) % P
    # A: Irecv (8-double buffer) and Isend of 4 doubles, each completed by its own Wait, tag 21
    a = comm.Irecv(np.empty(8, np.float64), source=left, tag=21)
    b = comm.Isend(np.zeros(4, np.float64), dest=right, tag=21)
    a.Wait()
    b.Wait()
    # B: one Waitall over two receives and two sends: 3 int32 rightwards, 5 leftwards, tag 22
    reqs = [comm.Irecv(np.empty(3, np.int32), source=left, tag=22),
            comm.Irecv(np.empty(5, np.int32), source=right, tag=22),
            comm.Isend(np.zeros(3, np.int32), dest=right, tag=22),
            comm.Isend(np.zeros(5, np.int32), dest=left, tag=22)]
    MPI.Request.Waitall(reqs)
    # C: Waitany until both are done, 2 doubles, tag 23
    reqs = [comm.Irecv(np.empty(2, np.float64), source=left, tag=23),
            comm.Isend(np.zeros(2, np.float64), dest=right, tag=23)]
    for _ in range(2):
        MPI.Request.Waitany(reqs)
    # D: Waitsome until both are done, 7 int8, tag 24
    reqs = [comm.Irecv(np.empty(7, np.int8), source=left, tag=24),
            comm.Isend(np.zeros(7, np.int8), dest=right, tag=24)]
    done = 0
    while done < 2:
        done += len(MPI.Request.Waitsome(reqs) or [])
    # E: Test loops, 1 int64, tag 25
    a = comm.Irecv(np.empty(1, np.int64), source=left, tag=25)
    b = comm.Isend(np.zeros(1, np.int64), dest=right, tag=25)
    while not a.Test():
        pass
    while not b.Test():
        pass
    # F: Testall loop, 6 int16, tag 26
    reqs = [comm.Irecv(np.empty(6, np.int16), source=left, tag=26),
            comm.Isend(np.zeros(6, np.int16), dest=right, tag=26)]
    while not MPI.Request.Testall(reqs):
        pass
    # G: Testany loop, 9 uint8, tag 27
    reqs = [comm.Irecv(np.empty(9, np.uint8), source=left, tag=27),
            comm.Isend(np.zeros(9, np.uint8), dest=right, tag=27)]
    done = 0
    while done < 2:
        index, flag = MPI.Request.Testany(reqs)
        if flag and index != MPI.UNDEFINED:
            done += 1
    # H: rank 0 posts P-1 ANY_SOURCE Irecvs of 100 doubles; rank k sends k doubles, tag 28
    if r == 0:
        MPI.Request.Waitall([comm.Irecv(np.empty(100, np.float64), source=MPI.ANY_SOURCE, tag=28)
                             for _ in range(P - 1)])
    else:
        comm.Isend(np.zeros(r, np.float64), dest=0, tag=28).Wait()
    # I: three small Isends outstanding at once (k+1 int64, tags 40+k), received, then each
    #    completed by its own Wait in creation order
    sends = [comm.Isend(np.zeros(k + 1, np.int64), dest=right, tag=40 + k) for k in range(3)]
    for k in range(3):
        comm.Recv(np.empty(k + 1, np.int64), source=left, tag=40 + k)
    for s in sends:
        s.Wait()
"""

PERSISTENT = """
    from mpi4py import MPI
    import numpy as np
    comm = MPI.COMM_WORLD
    r, P = comm.rank, comm.size
    right, left = (r + 1) % P, (r - 1) % P
    # 5 doubles rightwards into 8-double buffers (tag 31); 3 int32 leftwards (tag 32)
    rq = comm.Recv_init(np.zeros(8, np.float64), source=left, tag=31)
    sq = comm.Send_init(np.zeros(5, np.float64), dest=right, tag=31)
    rq2 = comm.Recv_init(np.zeros(3, np.int32), source=right, tag=32)
    sq2 = comm.Send_init(np.zeros(3, np.int32), dest=left, tag=32)
    for _ in range(3):
        MPI.Prequest.Startall([rq, sq])
        MPI.Request.Waitall([rq, sq])
    for _ in range(2):
        rq2.Start()
        sq2.Start()
        rq2.Wait()
        sq2.Wait()
    for q in (rq, sq, rq2, sq2):
        q.Free()
"""

PROBE_PICKLE = """
    from mpi4py import MPI
    import numpy as np
    comm = MPI.COMM_WORLD
    r, P = comm.rank, comm.size
    # probes, 1 -> 0: 6 doubles (tag 41), 4 int32 (42), 3 int16 (43), 2 int64 (44)
    if r == 1:
        comm.Send(np.zeros(6, np.float64), dest=0, tag=41)
        comm.Send(np.zeros(4, np.int32), dest=0, tag=42)
        comm.Send(np.zeros(3, np.int16), dest=0, tag=43)
        comm.Send(np.zeros(2, np.int64), dest=0, tag=44)
    elif r == 0:
        st = MPI.Status()
        comm.Probe(source=MPI.ANY_SOURCE, tag=41, status=st)
        comm.Recv(np.empty(st.Get_count(MPI.DOUBLE), np.float64), source=st.source, tag=41)
        while not comm.Iprobe(source=1, tag=42):
            pass
        comm.Recv(np.empty(4, np.int32), source=1, tag=42)
        comm.Mprobe(source=MPI.ANY_SOURCE, tag=43).Recv(np.empty(3, np.int16))
        while True:
            msg = comm.Improbe(source=1, tag=44)
            if msg is not None:
                break
        msg.Recv(np.empty(2, np.int64))
    # two matched messages outstanding at once, 3 -> 2: 3 doubles (tag 45), 5 doubles (46)
    if r == 3:
        comm.Send(np.zeros(3, np.float64), dest=2, tag=45)
        comm.Send(np.zeros(5, np.float64), dest=2, tag=46)
    elif r == 2:
        first = comm.Mprobe(source=3, tag=45)
        second = comm.Mprobe(source=3, tag=46)
        first.Recv(np.empty(3, np.float64))
        second.Recv(np.empty(5, np.float64))
    comm.Barrier()
    # the pickle API
    if r == 0:
        comm.send({"a": 1}, dest=1, tag=51)
    elif r == 1:
        comm.recv(source=0, tag=51)
    if r == 2:
        comm.isend(list(range(10)), dest=3, tag=52).wait()
    elif r == 3:
        comm.irecv(source=2, tag=52).wait()
    comm.bcast("hello" if r == 2 else None, root=2)
    comm.gather(r, root=1)
    comm.scatter(list(range(P)) if r == 3 else None, root=3)
    comm.allgather(r)
    comm.alltoall([r] * P)
    comm.reduce(r, root=1)
    comm.allreduce(r)
    comm.sendrecv(r, dest=(r + 1) % P, sendtag=53, source=(r - 1) % P, recvtag=53)
"""

COLLECTIVES = """
    from mpi4py import MPI
    import numpy as np
    comm = MPI.COMM_WORLD
    r, P = comm.rank, comm.size
    comm.Barrier()
    comm.Bcast(np.zeros(7, np.float64), root=2)
    comm.Reduce(np.ones(3, np.int32), np.zeros(3, np.int32) if r == 1 else None, op=MPI.SUM,
                root=1)
    comm.Allreduce(np.ones(4, np.float32), np.zeros(4, np.float32))
    comm.Allreduce(MPI.IN_PLACE, np.ones(6, np.float64))
    # Gather: 2 int64 from every rank to root 3
    comm.Gather(np.zeros(2, np.int64), np.zeros(2 * P, np.int64) if r == 3 else None, root=3)
    # Gatherv: rank i sends i+1 doubles to root 0
    gc = [i + 1 for i in range(P)]
    comm.Gatherv(np.zeros(r + 1, np.float64),
                 [np.zeros(sum(gc), np.float64), gc] if r == 0 else None, root=0)
    # Scatter: 3 int16 to every rank from root 1
    comm.Scatter(np.zeros(3 * P, np.int16) if r == 1 else None, np.zeros(3, np.int16), root=1)
    # Scatterv: rank i gets 2i+1 int32 from root 2
    sc = [2 * i + 1 for i in range(P)]
    comm.Scatterv([np.zeros(sum(sc), np.int32), sc] if r == 2 else None,
                  np.zeros(2 * r + 1, np.int32), root=2)
    comm.Allgather(np.zeros(5, np.uint8), np.zeros(5 * P, np.uint8))
    # Allgatherv: rank i contributes i+2 float32
    ac = [i + 2 for i in range(P)]
    comm.Allgatherv(np.zeros(r + 2, np.float32), [np.zeros(sum(ac), np.float32), ac])
    comm.Alltoall(np.zeros(2 * P, np.float64), np.zeros(2 * P, np.float64))
    # Alltoallv: rank i sends i + 2j + 1 int32 to rank j (so receives j + 2i + 1 from j)
    s = [r + 2 * j + 1 for j in range(P)]
    q = [j + 2 * r + 1 for j in range(P)]
    comm.Alltoallv([np.zeros(sum(s), np.int32), s], [np.zeros(sum(q), np.int32), q])
    # Reduce_scatter: rank i keeps i+1 doubles
    rs = [i + 1 for i in range(P)]
    comm.Reduce_scatter(np.ones(sum(rs), np.float64), np.zeros(r + 1, np.float64),
                        recvcounts=rs)
    comm.Reduce_scatter_block(np.ones(3 * P, np.int64), np.zeros(3, np.int64))
    comm.Scan(np.ones(2, np.float64), np.zeros(2, np.float64))
    comm.Exscan(np.ones(5, np.int32), np.zeros(5, np.int32))
    # nonblocking forms, each completed by its own Wait ...
    reqs = [comm.Ibarrier(),
            comm.Ibcast(np.zeros(9, np.int16), root=3),
            comm.Iallreduce(np.ones(4, np.float64), np.zeros(4, np.float64)),
            comm.Ialltoall(np.zeros(P, np.int64), np.zeros(P, np.int64)),
            comm.Igatherv(np.zeros(r + 1, np.float64),
                          [np.zeros(sum(gc), np.float64), gc] if r == 1 else None, root=1)]
    for x in reqs:
        x.Wait()
    # ... or by one Waitall
    MPI.Request.Waitall([
        comm.Ireduce(np.ones(2, np.int32), np.zeros(2, np.int32) if r == 0 else None, root=0),
        comm.Iallgather(np.zeros(1, np.float64), np.zeros(P, np.float64)),
        comm.Iscatter(np.zeros(2 * P, np.float32) if r == 2 else None, np.zeros(2, np.float32),
                      root=2)])
"""

COMMS = """
    from mpi4py import MPI
    import numpy as np
    world = MPI.COMM_WORLD
    r, P = world.rank, world.size            # P = 5
    # even/odd split, key -r: even = world [4, 2, 0], odd = world [3, 1]
    sub = world.Split(color=r % 2, key=-r)
    if sub.rank == 0:                        # world 4 -> 2 and world 3 -> 1: 4 doubles, tag 61
        sub.Send(np.zeros(4, np.float64), dest=1, tag=61)
    elif sub.rank == 1:
        sub.Recv(np.empty(4, np.float64), source=0, tag=61)
    sub.Bcast(np.zeros(3, np.int32), root=1)  # root: world 2 (even), world 1 (odd)
    dup = world.Dup()
    dup.Allreduce(MPI.IN_PLACE, np.ones(2, np.float64))
    cre = world.Create(world.Get_group().Incl([3, 1, 4]))
    if cre != MPI.COMM_NULL:
        cre.Reduce(np.ones(1, np.int64), np.zeros(1, np.int64) if cre.rank == 0 else None,
                   root=0)                   # root: world 3
    cart = world.Create_cart([2, 2], periods=[True, False], reorder=False)  # world 4 left out
    row = None
    if cart != MPI.COMM_NULL:
        src, dst = cart.Shift(0, 1)          # periodic: the other row
        cart.Sendrecv(np.zeros(2, np.float32), dest=dst, sendtag=62,
                      recvbuf=np.empty(2, np.float32), source=src, recvtag=62)
        src, dst = cart.Shift(1, 1)          # not periodic: PROC_NULL at the edges
        cart.Sendrecv(np.zeros(2, np.float32), dest=dst, sendtag=63,
                      recvbuf=np.empty(2, np.float32), source=src, recvtag=63)
        row = cart.Sub([False, True])        # rows: world [0, 1] and [2, 3]
        row.Allgather(np.zeros(1, np.int8), np.zeros(row.size, np.int8))
    for c in (row, cart, cre, dup, sub):
        if c is not None and c != MPI.COMM_NULL:
            c.Free()
    # after the frees (handles may be reused): a new Dup, a shared-memory split, and
    # Comm_create_group called by the group's members only (world [4, 0])
    dup2 = world.Dup()
    dup2.Barrier()
    node = world.Split_type(MPI.COMM_TYPE_SHARED)
    node.Barrier()
    if r in (4, 0):
        pair = world.Create_group(world.Get_group().Incl([4, 0]))
        pair.Barrier()
        pair.Free()
    for c in (node, dup2):
        c.Free()
"""

# A C halo exchange on a non-periodic line: the end ranks' missing neighbours are
# MPI_PROC_NULL, with the same counts as real ones (mpi4py would pass count 0 there).
C_HALO = r"""
#include <mpi.h>
int main(int argc, char **argv) {
  int r, P;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int left = r > 0 ? r - 1 : MPI_PROC_NULL, right = r < P - 1 ? r + 1 : MPI_PROC_NULL;
  double out[2][4] = {{0}}, in[2][4];
  MPI_Request q[4];
  MPI_Irecv(in[0], 4, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, &q[0]);
  MPI_Irecv(in[1], 4, MPI_DOUBLE, right, 8, MPI_COMM_WORLD, &q[1]);
  MPI_Isend(out[0], 4, MPI_DOUBLE, right, 7, MPI_COMM_WORLD, &q[2]);
  MPI_Isend(out[1], 4, MPI_DOUBLE, left, 8, MPI_COMM_WORLD, &q[3]);
  MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
  MPI_Finalize();
  return 0;
}
"""

PROGRAMS = {
    "blocking": (BLOCKING, 4),
    "nonblocking": (NONBLOCKING, 3),
    "persistent": (PERSISTENT, 4),
    "probe_pickle": (PROBE_PICKLE, 4),
    "collectives": (COLLECTIVES, 4),
    "comms": (COMMS, 5),
    "c_halo": (C_HALO, 3),
}


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """``traced(name)``: the Trace of ``PROGRAMS[name]``, run once per module."""
    cache: dict = {}

    def run(name):
        if name not in cache:
            script, nprocs = PROGRAMS[name]
            d = tmp_path_factory.mktemp(name)
            if name.startswith("c_"):
                src, exe = d / f"{name}.c", d / name
                src.write_text(script)
                mpicc = os.environ.get("SIGEX_MPICC") or shutil.which("mpicc")
                subprocess.run([mpicc, "-O1", "-o", str(exe), str(src)], check=True)
                command = [str(exe)]
            else:
                path = d / f"{name}.py"
                path.write_text(textwrap.dedent(script))
                command = [sys.executable, str(path)]
            cache[name] = trace_run(command, nprocs, d / f"P{nprocs}.h5", timeout=120)
        res = cache[name]
        assert res.ok, (f"traced run {name!r} failed: exit {res.returncode}, "
                        f"{res.trace.meta.get('incomplete_reason')}")
        return res.trace

    return run


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------

def events(t, rank, op=None, **eq):
    """Events of ``rank`` (optionally of one op and with given column values) as dicts."""
    ev = t.rank_events(rank)
    mask = np.ones(len(ev["op"]), bool)
    if op is not None:
        mask &= ev["op"] == OP_CODE[op]
    for col, val in eq.items():
        mask &= ev[col] == val
    out = []
    for i in np.flatnonzero(mask):
        row = {c: ev[c][i].item() for c in COLS}
        row["op"] = OPS[row["op"]]
        out.append(row)
    return out


def one(t, rank, op, **eq):
    """The single event of ``rank`` matching ``op`` and ``eq``."""
    rows = events(t, rank, op, **eq)
    assert len(rows) == 1, f"rank {rank}: expected one {op} {eq}, found {rows}"
    return rows[0]


def op_names(t, rank, collapse=False):
    """Op names of ``rank`` between Init and Finalize; ``collapse`` merges repeats (polling)."""
    names = [OPS[o] for o in t.rank_events(rank)["op"]]
    assert names[0] == "Init" and names[-1] == "Finalize"
    names = names[1:-1]
    if collapse:
        names = [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]
    return names


def completions(t, rank, seq=None):
    """Completion rows of ``rank`` (optionally of one Wait/Test event) as dicts."""
    c = t.completions
    mask = c["rank"] == rank
    if seq is not None:
        mask &= c["seq"] == seq
    return [{k: c[k][i].item() for k in ("seq", "req", "bytes", "peer", "tag")}
            for i in np.flatnonzero(mask)]


def listed(t, rank, seq, kind):
    """Values of the ``lists`` rows of one event and kind, concatenated in order."""
    L = t.lists
    rows = np.flatnonzero((L["rank"] == rank) & (L["seq"] == seq) & (L["kind"] == kind))
    return [int(v) for i in rows for v in L["values"][L["start"][i]:L["start"][i] + L["length"][i]]]


def has_list(t, rank, seq):
    L = t.lists
    return bool(np.any((L["rank"] == rank) & (L["seq"] == seq)))


def by_req(rows):
    return {c["req"]: c for c in rows}


def members(t, comm_id):
    return [int(x) for x in t.comms.members_of(comm_id)]


# =======================================================================================
# 1. blocking point to point
# =======================================================================================

def test_blocking_op_sequences(traced):
    """Each rank records exactly its blocking calls, in program order."""
    t = traced("blocking")
    tail = ["Sendrecv", "Sendrecv_replace"]
    nulls = ["Send", "Recv"]
    assert op_names(t, 0) == ["Send", "Irecv", "Barrier", "Wait", *tail, "Recv", "Recv", "Recv",
                              *nulls]
    assert op_names(t, 1) == ["Recv", "Bsend", "Barrier", *tail, "Send", *nulls]
    assert op_names(t, 2) == ["Ssend", "Recv", "Barrier", *tail, "Send", *nulls]
    assert op_names(t, 3) == ["Recv", "Barrier", "Rsend", *tail, "Send", *nulls]


def test_send_and_recv_record_peer_tag_and_bytes(traced):
    """Send records the destination and message size; Recv the source and received size."""
    t = traced("blocking")
    s = one(t, 0, "Send", tag=11)
    assert (s["peer"], s["bytes"], s["recv_bytes"], s["comm"], s["root"]) == (1, 80, 0, 0, PEER_NONE)
    r = one(t, 1, "Recv", tag=11)
    assert (r["peer"], r["recv_bytes"], r["bytes"], r["comm"]) == (0, 80, 0, 0)


def test_recv_records_the_bytes_received_not_the_buffer_size(traced):
    """A Recv into a larger buffer records the message's size (Ssend 4 int32 into 8)."""
    t = traced("blocking")
    s = one(t, 2, "Ssend")
    assert (s["peer"], s["tag"], s["bytes"]) == (3, 12, 16)
    r = one(t, 3, "Recv", tag=12)
    assert (r["peer"], r["recv_bytes"]) == (2, 16)


def test_bsend_with_an_attached_buffer(traced):
    """Bsend records the destination, tag and message size like Send."""
    t = traced("blocking")
    s = one(t, 1, "Bsend")
    assert (s["peer"], s["tag"], s["bytes"], s["recv_bytes"]) == (2, 13, 48, 0)
    r = one(t, 2, "Recv", tag=13)
    assert (r["peer"], r["recv_bytes"]) == (1, 48)


def test_rsend_after_a_barrier(traced):
    """Rsend after the barrier records its peer and size; the pre-posted Irecv completes with them."""
    t = traced("blocking")
    s = one(t, 3, "Rsend")
    assert (s["peer"], s["tag"], s["bytes"]) == (0, 14, 20)
    assert s["seq"] > one(t, 3, "Barrier")["seq"]
    ir = one(t, 0, "Irecv")
    assert (ir["peer"], ir["tag"], ir["recv_bytes"]) == (3, 14, 20) and ir["req"] >= 0
    w = one(t, 0, "Wait")
    assert w["aux"] == 1
    assert completions(t, 0) == [{"seq": w["seq"], "req": ir["req"], "bytes": 20, "peer": 3,
                                  "tag": 14}]


def test_sendrecv_records_dest_source_and_both_sizes(traced):
    """Sendrecv: peer = destination, recv_peer = source, bytes sent and bytes received."""
    t = traced("blocking")
    P = t.nprocs
    for r in range(P):
        left = (r - 1) % P
        e = one(t, r, "Sendrecv")
        assert (e["peer"], e["recv_peer"], e["tag"]) == ((r + 1) % P, left, 15)
        assert e["bytes"] == 8 * (r + 1), f"rank {r}"
        assert e["recv_bytes"] == 8 * (left + 1), f"rank {r}"


def test_sendrecv_replace_records_dest_source_and_sizes(traced):
    """Sendrecv_replace: peer = destination, recv_peer = source, same size both ways."""
    t = traced("blocking")
    P = t.nprocs
    for r in range(P):
        e = one(t, r, "Sendrecv_replace")
        assert (e["peer"], e["recv_peer"], e["tag"]) == ((r - 1) % P, (r + 1) % P, 16)
        assert (e["bytes"], e["recv_bytes"]) == (4, 4)


def test_recv_any_source_records_the_actual_source(traced):
    """A Recv from MPI_ANY_SOURCE records the rank that sent, and that sender's size."""
    t = traced("blocking")
    recvs = events(t, 0, "Recv", tag=17)
    assert sorted(e["peer"] for e in recvs) == [1, 2, 3]
    for e in recvs:
        assert e["recv_bytes"] == 8 * e["peer"]
    for k in (1, 2, 3):
        s = one(t, k, "Send", tag=17)
        assert (s["peer"], s["bytes"]) == (0, 8 * k)


def test_proc_null_peers(traced):
    """A Send to or Recv from MPI_PROC_NULL records peer PEER_NULL and receives nothing."""
    t = traced("blocking")
    for r in range(t.nprocs):
        s = one(t, r, "Send", tag=18)
        assert s["peer"] == PEER_NULL
        rv = events(t, r, "Recv", peer=PEER_NULL)
        assert len(rv) == 1 and rv[0]["recv_bytes"] == 0


def test_c_halo_records_proc_null_neighbours(traced):
    """In a C halo exchange the missing neighbours are PEER_NULL; posted and sent sizes are kept."""
    t = traced("c_halo")
    P = t.nprocs
    for r in range(P):
        left = r - 1 if r > 0 else PEER_NULL
        right = r + 1 if r < P - 1 else PEER_NULL
        assert op_names(t, r) == ["Irecv", "Irecv", "Isend", "Isend", "Waitall"]
        recvs, sends = events(t, r, "Irecv"), events(t, r, "Isend")
        assert [(e["peer"], e["tag"], e["recv_bytes"]) for e in recvs] == [(left, 7, 32),
                                                                        (right, 8, 32)]
        assert [(e["peer"], e["tag"], e["bytes"]) for e in sends] == [(right, 7, 32),
                                                                   (left, 8, 32)]
        got = by_req(completions(t, r))
        for e in recvs:
            if e["peer"] != PEER_NULL:
                assert (got[e["req"]]["peer"], got[e["req"]]["bytes"]) == (e["peer"], 32)


def test_c_receive_from_proc_null_completes_with_no_bytes(traced):
    """A receive from MPI_PROC_NULL completes with peer PEER_NULL and 0 bytes received."""
    t = traced("c_halo")
    for r in (0, t.nprocs - 1):
        (e,) = [e for e in events(t, r, "Irecv") if e["peer"] == PEER_NULL]
        (c,) = [c for c in completions(t, r) if c["req"] == e["req"]]
        assert (c["peer"], c["bytes"]) == (PEER_NULL, 0), f"rank {r}: {c}"


# =======================================================================================
# 2. nonblocking point to point
# =======================================================================================

def _nb(t, r, tag):
    """(Irecv events, Isend events) of rank ``r`` with ``tag``."""
    return events(t, r, "Irecv", tag=tag), events(t, r, "Isend", tag=tag)


def test_nonblocking_op_sequences(traced):
    """Each rank records its nonblocking calls in program order (polling loops collapsed)."""
    t = traced("nonblocking")
    head = ["Irecv", "Isend", "Wait",                      # A (two Waits collapse)
            "Irecv", "Isend", "Waitall",                   # B
            "Irecv", "Isend", "Waitany",                   # C
            "Irecv", "Isend", "Waitsome",                  # D
            "Irecv", "Isend", "Test",                      # E
            "Irecv", "Isend", "Testall",                   # F
            "Irecv", "Isend", "Testany"]                   # G
    tail = ["Isend", "Recv", "Wait"]                       # I
    assert op_names(t, 0, collapse=True) == [*head, "Irecv", "Waitall", *tail]
    for r in (1, 2):
        assert op_names(t, r, collapse=True) == [*head, "Isend", "Wait", *tail]
    for r in range(t.nprocs):
        names = op_names(t, r)
        assert names.count("Wait") == 2 + 3 + (r != 0)
        assert names.count("Waitany") == 2


def test_isend_irecv_wait_link_requests_to_completions(traced):
    """Irecv records the posted size, Isend the message; each Wait completes one request id."""
    t = traced("nonblocking")
    P = t.nprocs
    for r in range(P):
        (ir,), (isd,) = _nb(t, r, 21)
        assert (ir["peer"], ir["recv_bytes"], ir["bytes"]) == ((r - 1) % P, 64, 0)
        assert (isd["peer"], isd["bytes"], isd["recv_bytes"]) == ((r + 1) % P, 32, 0)
        assert ir["req"] >= 0 and isd["req"] >= 0 and ir["req"] != isd["req"]
        w1, w2 = [e for e in events(t, r, "Wait") if e["seq"] < events(t, r, "Waitall")[0]["seq"]]
        assert w1["aux"] == w2["aux"] == 1
        assert completions(t, r, w1["seq"]) == [
            {"seq": w1["seq"], "req": ir["req"], "bytes": 32, "peer": (r - 1) % P, "tag": 21}]
        assert completions(t, r, w2["seq"]) == [
            {"seq": w2["seq"], "req": isd["req"], "bytes": 32, "peer": (r + 1) % P, "tag": 21}]


def test_waitall_completes_every_request_once_with_actual_sizes(traced):
    """One Waitall over two Irecvs and two Isends completes each request id exactly once."""
    t = traced("nonblocking")
    P = t.nprocs
    for r in range(P):
        left, right = (r - 1) % P, (r + 1) % P
        recvs, sends = _nb(t, r, 22)
        assert [(e["peer"], e["recv_bytes"]) for e in recvs] == [(left, 12), (right, 20)]
        assert [(e["peer"], e["bytes"]) for e in sends] == [(right, 12), (left, 20)]
        w = events(t, r, "Waitall")[0]
        assert w["aux"] == 4
        rows = completions(t, r, w["seq"])
        assert sorted(c["req"] for c in rows) == sorted(e["req"] for e in recvs + sends), \
            f"rank {r}: {rows}"
        got = by_req(rows)
        for e, (peer, nbytes) in zip(recvs + sends, [(left, 12), (right, 20), (right, 12),
                                                     (left, 20)]):
            assert (got[e["req"]]["peer"], got[e["req"]]["bytes"], got[e["req"]]["tag"]) == \
                (peer, nbytes, 22), f"rank {r} req {e['req']}"


def _completed_by(t, r, op, tag):
    """Completion rows, keyed by request, of the ``op`` events that completed ``tag``'s requests."""
    recvs, sends = _nb(t, r, tag)
    ids = {e["req"] for e in recvs + sends}
    seqs = {e["seq"] for e in events(t, r, op)}
    rows = [c for c in completions(t, r) if c["req"] in ids]
    assert all(c["seq"] in seqs for c in rows), f"rank {r}: {tag} completed outside {op}"
    return recvs, sends, rows


def test_waitany_loop_completes_one_request_per_call(traced):
    """Each Waitany completes exactly one request; two calls complete the pair."""
    t = traced("nonblocking")
    P = t.nprocs
    for r in range(P):
        (ir,), (isd,), rows = _completed_by(t, r, "Waitany", 23)
        assert [e["aux"] for e in events(t, r, "Waitany")] == [1, 1]
        assert len({c["seq"] for c in rows}) == 2
        got = by_req(rows)
        assert (got[ir["req"]]["peer"], got[ir["req"]]["bytes"]) == ((r - 1) % P, 16)
        assert (got[isd["req"]]["peer"], got[isd["req"]]["bytes"]) == ((r + 1) % P, 16)


def test_waitsome_loop_completes_both_requests(traced):
    """Waitsome records how many requests each call completed, with one row per request."""
    t = traced("nonblocking")
    P = t.nprocs
    for r in range(P):
        (ir,), (isd,), rows = _completed_by(t, r, "Waitsome", 24)
        calls = events(t, r, "Waitsome")
        assert sum(e["aux"] for e in calls) == 2
        for e in calls:
            assert len(completions(t, r, e["seq"])) == e["aux"]
        got = by_req(rows)
        assert set(got) == {ir["req"], isd["req"]}
        assert (got[ir["req"]]["peer"], got[ir["req"]]["bytes"]) == ((r - 1) % P, 7)


def test_test_loop_completes_on_the_successful_call_only(traced):
    """Unsuccessful Tests complete nothing (aux 0); the successful one completes its request."""
    t = traced("nonblocking")
    P = t.nprocs
    for r in range(P):
        (ir,), (isd,), rows = _completed_by(t, r, "Test", 25)
        calls = events(t, r, "Test")
        assert [e["aux"] for e in calls].count(1) == 2
        for e in calls:
            assert len(completions(t, r, e["seq"])) == e["aux"]
        got = by_req(rows)
        assert (got[ir["req"]]["peer"], got[ir["req"]]["bytes"], got[ir["req"]]["tag"]) == \
            ((r - 1) % P, 8, 25)
        assert got[isd["req"]]["peer"] == (r + 1) % P
        # the receive was tested to completion before the send was tested at all
        assert got[ir["req"]]["seq"] < got[isd["req"]]["seq"]


def test_testall_loop_completes_all_on_the_last_call(traced):
    """Testall completes nothing until every request is done, then all of them at once."""
    t = traced("nonblocking")
    P = t.nprocs
    for r in range(P):
        (ir,), (isd,), rows = _completed_by(t, r, "Testall", 26)
        calls = events(t, r, "Testall")
        assert [e["aux"] for e in calls] == [0] * (len(calls) - 1) + [2]
        assert {c["seq"] for c in rows} == {calls[-1]["seq"]}
        got = by_req(rows)
        assert (got[ir["req"]]["peer"], got[ir["req"]]["bytes"]) == ((r - 1) % P, 12)
        assert (got[isd["req"]]["peer"], got[isd["req"]]["bytes"]) == ((r + 1) % P, 12)


def test_testany_loop_completes_each_request_once(traced):
    """Testany completes at most one request per call, and each of the pair exactly once."""
    t = traced("nonblocking")
    P = t.nprocs
    for r in range(P):
        (ir,), (isd,), rows = _completed_by(t, r, "Testany", 27)
        calls = events(t, r, "Testany")
        assert all(e["aux"] in (0, 1) for e in calls) and sum(e["aux"] for e in calls) == 2
        assert sorted(c["req"] for c in rows) == sorted([ir["req"], isd["req"]])
        got = by_req(rows)
        assert (got[ir["req"]]["peer"], got[ir["req"]]["bytes"]) == ((r - 1) % P, 9)


def test_irecv_any_source_is_resolved_in_completions(traced):
    """An Irecv from MPI_ANY_SOURCE records PEER_ANY; its completion names the sender and size."""
    t = traced("nonblocking")
    recvs = events(t, 0, "Irecv", tag=28)
    assert len(recvs) == t.nprocs - 1
    assert all(e["peer"] == PEER_ANY and e["recv_bytes"] == 800 for e in recvs)
    w = events(t, 0, "Waitall")[-1]
    rows = completions(t, 0, w["seq"])
    assert sorted(c["req"] for c in rows) == sorted(e["req"] for e in recvs)
    assert sorted(c["peer"] for c in rows) == list(range(1, t.nprocs))
    for c in rows:
        assert c["bytes"] == 8 * c["peer"] and c["tag"] == 28
    for k in range(1, t.nprocs):
        s = one(t, k, "Isend", tag=28)
        (c,) = [c for c in completions(t, k) if c["req"] == s["req"]]
        assert (c["peer"], c["bytes"]) == (0, 8 * k)


def test_outstanding_eager_isends_keep_their_own_request_ids(traced):
    """Outstanding eager Isends (one shared MPICH handle) complete under their own ids and sizes."""
    t = traced("nonblocking")
    P = t.nprocs
    for r in range(P):
        sends = [one(t, r, "Isend", tag=40 + k) for k in range(3)]
        assert [(e["peer"], e["bytes"]) for e in sends] == [((r + 1) % P, 8 * (k + 1))
                                                            for k in range(3)]
        waits = events(t, r, "Wait")[-3:]
        got = [completions(t, r, w["seq"]) for w in waits]
        assert [[(c["req"], c["bytes"], c["tag"]) for c in g] for g in got] == \
            [[(e["req"], e["bytes"], e["tag"])] for e in sends], f"rank {r}"


def test_every_completion_names_a_request_created_on_that_rank(traced):
    """Every completion names a request created earlier on its rank, and each completes once."""
    t = traced("nonblocking")
    for r in range(t.nprocs):
        created = {e["req"]: e for e in events(t, r) if e["req"] >= 0}
        rows = completions(t, r)
        assert all(c["req"] in created for c in rows), \
            f"rank {r}: completions of unknown requests {[c for c in rows if c['req'] not in created]}"
        assert all(created[c["req"]]["seq"] < c["seq"] for c in rows)
        counts = collections.Counter(c["req"] for c in rows)
        assert set(counts) == set(created) and set(counts.values()) == {1}, f"rank {r}"


# =======================================================================================
# 3. persistent requests
# =======================================================================================

def test_persistent_op_sequence(traced):
    """Init calls, three Startall/Waitall rounds, two Start/Wait rounds, four Request_free."""
    t = traced("persistent")
    expect = (["Recv_init", "Send_init", "Recv_init", "Send_init"]
              + ["Startall", "Waitall"] * 3 + ["Start", "Start", "Wait", "Wait"] * 2
              + ["Request_free"] * 4)
    for r in range(t.nprocs):
        assert op_names(t, r) == expect


def test_init_calls_record_peer_tag_size_and_request(traced):
    """Send_init/Recv_init record peer, tag, size (posted size for receives) and a request id."""
    t = traced("persistent")
    P = t.nprocs
    for r in range(P):
        left, right = (r - 1) % P, (r + 1) % P
        ri, si = events(t, r, "Recv_init"), events(t, r, "Send_init")
        assert [(e["peer"], e["tag"], e["recv_bytes"]) for e in ri] == [(left, 31, 64), (right, 32, 12)]
        assert [(e["peer"], e["tag"], e["bytes"]) for e in si] == [(right, 31, 40), (left, 32, 12)]
        ids = [e["req"] for e in ri + si]
        assert min(ids) >= 0 and len(set(ids)) == 4


def test_startall_lists_the_started_request_ids(traced):
    """Startall records how many requests it starts and their ids in lists (kind 2)."""
    t = traced("persistent")
    for r in range(t.nprocs):
        rq, _ = events(t, r, "Recv_init")
        sq, _ = events(t, r, "Send_init")
        starts = events(t, r, "Startall")
        assert len(starts) == 3
        for e in starts:
            assert e["aux"] == 2
            assert listed(t, r, e["seq"], LIST_STARTED) == [rq["req"], sq["req"]]


def test_waitall_after_startall_completes_both_every_round(traced):
    """Every round's Waitall completes the same two persistent ids, with the actual received size."""
    t = traced("persistent")
    P = t.nprocs
    for r in range(P):
        rq, _ = events(t, r, "Recv_init")
        sq, _ = events(t, r, "Send_init")
        for w in events(t, r, "Waitall"):
            assert w["aux"] == 2
            got = by_req(completions(t, r, w["seq"]))
            assert set(got) == {rq["req"], sq["req"]}
            assert (got[rq["req"]]["peer"], got[rq["req"]]["bytes"], got[rq["req"]]["tag"]) == \
                ((r - 1) % P, 40, 31)
            assert (got[sq["req"]]["peer"], got[sq["req"]]["bytes"]) == ((r + 1) % P, 40)


def test_start_records_the_request_and_wait_completes_it(traced):
    """Start records the started request's id, peer, tag, size and communicator."""
    t = traced("persistent")
    P = t.nprocs
    for r in range(P):
        _, rq2 = events(t, r, "Recv_init")
        _, sq2 = events(t, r, "Send_init")
        starts = events(t, r, "Start")
        assert [(e["req"], e["peer"], e["tag"], e["recv_bytes"], e["bytes"], e["comm"])
                for e in starts] == \
            [(rq2["req"], (r + 1) % P, 32, 12, 0, 0), (sq2["req"], (r - 1) % P, 32, 0, 12, 0)] * 2
        waits = events(t, r, "Wait")
        assert [[c["req"] for c in completions(t, r, w["seq"])] for w in waits] == \
            [[rq2["req"]], [sq2["req"]]] * 2
        assert all(c["peer"] == (r + 1) % P and c["bytes"] == 12
                   for w in waits[::2] for c in completions(t, r, w["seq"]))


def test_request_free_names_the_freed_requests(traced):
    """Request_free records the id of the persistent request it frees."""
    t = traced("persistent")
    for r in range(t.nprocs):
        ri, si = events(t, r, "Recv_init"), events(t, r, "Send_init")
        expect = [ri[0]["req"], si[0]["req"], ri[1]["req"], si[1]["req"]]
        assert [e["req"] for e in events(t, r, "Request_free")] == expect


def test_starts_are_read_as_the_nonblocking_calls_they_post(traced):
    """For the signature and the models, each request a start posts is an Irecv or Isend with
    its init call's peer, tag and size, in the order the Startall lists them; the init calls
    and frees are left out, their bursts kept; seq numbers each rank's events again and every
    completion still names its wait; the replay moves the same messages either way (one per
    started request: the replay once took a Startall's last listed request only)."""
    from replay import Program
    from signature.persistent import expand
    t = traced("persistent")
    P = t.nprocs
    u, n = expand(t)
    assert n == P * (3 + 4)
    for r in range(P):
        left, right = (r - 1) % P, (r + 1) % P
        e = u.rank_events(r)
        got = [(OPS[o], int(q), int(g), int(b), int(rb))
               for o, q, g, b, rb in zip(e["op"], e["peer"], e["tag"], e["bytes"], e["recv_bytes"])
               if OPS[o] in ("Irecv", "Isend", "Waitall", "Wait", "Request_free", "Startall", "Start")]
        wait = [w for w in got if w[0] in ("Waitall", "Wait")]
        assert [w[:3] for w in got] == ([("Irecv", left, 31), ("Isend", right, 31), ("Waitall", -1, -1)] * 3
                                        + [("Irecv", right, 32), ("Isend", left, 32), ("Wait", -1, -1),
                                           ("Wait", -1, -1)] * 2)
        # sizes as the init calls posted them: 8 doubles received, 5 sent; 3 int32 both ways
        assert [w[3:] for w in got if w not in wait] == [(0, 64), (40, 0)] * 3 + [(0, 12), (12, 0)] * 2
        assert np.array_equal(e["seq"], e["seq"][0] + np.arange(len(e["seq"])))
        waits = set(e["seq"][np.isin(e["op"], [OP_CODE["Waitall"], OP_CODE["Wait"]])].tolist())
        assert set(u.completions["seq"][u.completions["rank"] == r].tolist()) == waits
    assert u.events["t_cpu"].sum() == pytest.approx(t.events["t_cpu"].sum())
    assert u.events["t_comp"].sum() + u.events["t_comm"].sum() == \
        pytest.approx(t.events["t_comp"].sum() + t.events["t_comm"].sum())
    for prog in (Program.from_trace(t), Program.from_trace(u)):
        assert len(prog.msg_src) == P * (3 + 2)
        assert (prog.msg_send_event >= 0).all() and (prog.msg_recv_event >= 0).all()  # each sent and received
    # a damaged list of started requests is named, by the signature and by the replay alike
    import dataclasses
    from signature.errors import TraceFormatError
    lists = {k: np.asarray(v).copy() for k, v in t.lists.items()}
    lists["start"][lists["kind"] == LIST_STARTED] += 10 ** 6
    bad = dataclasses.replace(t, lists=lists)
    for read in (expand, Program.from_trace):
        with pytest.raises(TraceFormatError, match="list of started requests points past"):
            read(bad)


def test_a_start_of_a_request_whose_init_is_not_read_stays_as_it_is(traced):
    """A Startall that also starts a request whose init call is not read as a nonblocking
    call (here rank 0's send, turned into a persistent Alltoallv's init, whose per-peer lists
    belong to the init) is left as it is, with the init calls of its requests; the other
    ranks' starts are expanded."""
    import dataclasses
    from signature.persistent import expand
    t = traced("persistent")
    ev = {c: v.copy() for c, v in t.events.items()}
    first_send = int(np.flatnonzero((ev["rank"] == 0) & (ev["op"] == OP_CODE["Send_init"]))[0])
    ev["op"][first_send] = OP_CODE["Alltoallv_init"]
    u, n = expand(dataclasses.replace(t, events=ev))
    names = [OPS[o] for o in u.rank_events(0)["op"]]
    assert names.count("Startall") == 3 and names.count("Recv_init") == 1 and names.count("Alltoallv_init") == 1
    assert n == 3 * t.nprocs + 4 * t.nprocs - 3  # every other start expanded
    assert "Startall" not in [OPS[o] for o in u.rank_events(1)["op"]]


# =======================================================================================
# 4. probes and the pickle API
# =======================================================================================

def test_probe_family_records_peer_and_tag_without_bytes(traced):
    """Probe, Iprobe, Mprobe and Improbe record the matched message's source and tag, no bytes."""
    t = traced("probe_pickle")
    for op, tag in (("Probe", 41), ("Mprobe", 43)):
        e = one(t, 0, op, tag=tag)
        assert (e["peer"], e["bytes"], e["recv_bytes"], e["comm"]) == (1, 0, 0, 0)
    for op, tag in (("Iprobe", 42), ("Improbe", 44)):
        calls = events(t, 0, op)
        hit = calls[-1]
        assert (hit["aux"], hit["peer"], hit["tag"], hit["recv_bytes"]) == (1, 1, tag, 0)
        # unsuccessful polls: flag 0, the requested source
        assert all(e["aux"] == 0 and e["peer"] == 1 for e in calls[:-1])


def test_probed_messages_are_received_with_their_sizes(traced):
    """The Recv after a Probe/Iprobe and the Mrecv after an Mprobe/Improbe record source and size."""
    t = traced("probe_pickle")
    assert one(t, 0, "Recv", tag=41)["recv_bytes"] == 48
    assert one(t, 0, "Recv", tag=42)["recv_bytes"] == 16
    for tag, nbytes in ((43, 6), (44, 16)):
        m = one(t, 0, "Mrecv", tag=tag)
        assert (m["peer"], m["recv_bytes"], m["comm"], m["bytes"]) == (1, nbytes, 0, 0)
    names = op_names(t, 0, collapse=True)
    i = names.index("Probe")
    assert names[i:i + 8] == ["Probe", "Recv", "Iprobe", "Recv", "Mprobe", "Mrecv", "Improbe",
                              "Mrecv"]


def test_mrecv_of_an_earlier_matched_message_keeps_its_source_and_comm(traced):
    """Mrecv of the earlier of two outstanding matched messages records its source and comm."""
    t = traced("probe_pickle")
    probes = [e for e in events(t, 2, "Mprobe") if e["tag"] in (45, 46)]
    assert [(e["peer"], e["tag"]) for e in probes] == [(3, 45), (3, 46)]
    first, second = [e for e in events(t, 2, "Mrecv") if e["tag"] in (45, 46)]
    assert (second["peer"], second["tag"], second["recv_bytes"], second["comm"]) == (3, 46, 40, 0)
    assert (first["tag"], first["recv_bytes"]) == (45, 24)
    assert (first["peer"], first["comm"]) == (3, 0), f"first Mrecv recorded {first}"


def _sends_and_receives(t, skip_tags=()):
    """Multisets of (src, dst, comm, tag, bytes) seen by the senders and by the receivers."""
    send_ops = ("Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Ibsend", "Irsend")
    sent, got = collections.Counter(), collections.Counter()
    for r in range(t.nprocs):
        irecv_comm = {}
        for e in events(t, r):
            if e["tag"] in skip_tags:
                continue
            if e["op"] in send_ops and e["peer"] >= 0:
                sent[(r, e["peer"], e["comm"], e["tag"], e["bytes"])] += 1
            elif e["op"] in ("Recv", "Mrecv") and e["peer"] >= 0:
                got[(e["peer"], r, e["comm"], e["tag"], e["recv_bytes"])] += 1
            elif e["op"] == "Irecv":
                irecv_comm[e["req"]] = e["comm"]
        for c in completions(t, r):
            if c["req"] in irecv_comm and c["tag"] not in skip_tags:
                got[(c["peer"], r, irecv_comm[c["req"]], c["tag"], c["bytes"])] += 1
    return sent, got


def test_pickle_point_to_point_messages_match_across_ranks(traced):
    """Sender and receiver record every message alike: world ranks, communicator, tag, size."""
    t = traced("probe_pickle")
    sent, got = _sends_and_receives(t, skip_tags=(45, 46))  # (45, 46): see the Mrecv test
    assert sent == got
    assert all(k[4] > 0 for k in sent)
    assert sum(sent.values()) >= 4 + 2 + 4  # probes, send/isend, the sendrecv ring at least


def test_pickle_send_recv_isend_irecv_and_sendrecv_peers(traced):
    """Pickle send/recv, isend/irecv and sendrecv record the right world peers and tags."""
    t = traced("probe_pickle")
    P = t.nprocs
    s = one(t, 0, "Send", tag=51)
    assert s["peer"] == 1 and s["bytes"] > 0
    recv = [e for e in events(t, 1, tag=51) if e["op"] in ("Recv", "Mrecv")]
    assert len(recv) == 1 and recv[0]["peer"] == 0 and recv[0]["recv_bytes"] == s["bytes"]
    isd = one(t, 2, "Isend", tag=52)
    assert isd["peer"] == 3 and isd["bytes"] > 0
    ir = one(t, 3, "Irecv", tag=52)
    assert ir["peer"] == 2 and ir["recv_bytes"] >= isd["bytes"]
    (c,) = [c for c in completions(t, 3) if c["req"] == ir["req"]]
    assert (c["peer"], c["bytes"], c["tag"]) == (2, isd["bytes"], 52)
    for r in range(P):
        out = [e for e in events(t, r, tag=53) if e["op"] in ("Send", "Isend", "Sendrecv")]
        inn = [e for e in events(t, r, tag=53) if e["op"] in ("Recv", "Mrecv", "Sendrecv")]
        assert [e["peer"] for e in out] == [(r + 1) % P]
        assert [e["recv_peer"] if e["op"] == "Sendrecv" else e["peer"] for e in inn] == [(r - 1) % P]


def test_pickle_collectives_record_roots_as_world_ranks(traced):
    """Pickle bcast/gather/scatter record their world root, allgather/alltoall none; all carry bytes."""
    t = traced("probe_pickle")
    for r in range(t.nprocs):
        ev = events(t, r, comm=0)
        coll = [e for e in ev if e["op"] in ("Bcast", "Gather", "Gatherv", "Scatter", "Scatterv",
                                             "Allgather", "Allgatherv", "Alltoall", "Alltoallv")]
        kinds = {}
        for e in coll:
            kinds.setdefault(e["op"], []).append(e)
        assert {e["root"] for e in kinds["Bcast"]} == {2}
        assert {e["root"] for e in kinds.get("Gather", []) + kinds.get("Gatherv", [])} == {1}
        assert {e["root"] for e in kinds.get("Scatter", []) + kinds.get("Scatterv", [])} == {3}
        for op in ("Allgather", "Alltoall"):
            unrooted = kinds.get(op, []) + kinds.get(op + "v", [])
            assert unrooted and all(e["root"] == PEER_NONE for e in unrooted)
        assert all(e["bytes"] + e["recv_bytes"] > 0 for e in coll)
        assert all(e["peer"] == PEER_NONE and e["tag"] == -1 for e in coll)


def test_pickle_reduce_and_allreduce_are_traced_with_world_peers(traced):
    """Pickle reduce/allreduce traffic (mpi4py 4: p2p on a duplicate of WORLD) names world ranks."""
    t = traced("probe_pickle")
    if not any(events(t, r, "Comm_dup") for r in range(t.nprocs)):  # a future mpi4py
        for r in range(t.nprocs):
            assert one(t, r, "Reduce")["root"] == 1 and events(t, r, "Allreduce")
        return
    dup_ids = set()
    for r in range(t.nprocs):
        dups = events(t, r, "Comm_dup")
        assert len(dups) == 1 and dups[0]["comm"] == 0
        dup_ids.add(dups[0]["aux"])
        inside = [e for e in events(t, r, comm=dups[0]["aux"])]
        assert inside, f"rank {r}: nothing on mpi4py's communicator"
        for e in inside:
            assert e["peer"] in (PEER_NONE, *range(t.nprocs)) and e["peer"] != r
    (cid,) = dup_ids
    assert cid != 0 and members(t, cid) == list(range(t.nprocs))
    # the root of the reduce receives something on that communicator
    assert any(e["op"] in ("Recv", "Mrecv", "Irecv") for e in events(t, 1, comm=cid))


def test_gather_and_scatter_ignore_counts_that_are_not_significant(traced):
    """Non-root Gather/Scatter record 0 for the side MPI ignores there, whatever count is passed."""
    t = traced("probe_pickle")
    for r in range(t.nprocs):
        g = one(t, r, "Gather", comm=0)
        s = one(t, r, "Scatter", comm=0)
        assert g["bytes"] > 0 and s["recv_bytes"] > 0
        if r != 1:
            assert g["recv_bytes"] == 0, f"rank {r} (not the root) Gather: {g}"
        if r != 3:
            assert s["bytes"] == 0, f"rank {r} (not the root) Scatter: {s}"


# =======================================================================================
# 5. collectives (buffer API)
# =======================================================================================

BLOCKING_COLL = ["Barrier", "Bcast", "Reduce", "Allreduce", "Allreduce", "Gather", "Gatherv",
                 "Scatter", "Scatterv", "Allgather", "Allgatherv", "Alltoall", "Alltoallv",
                 "Reduce_scatter", "Reduce_scatter_block", "Scan", "Exscan"]
NB_COLL = ["Ibarrier", "Ibcast", "Iallreduce", "Ialltoall", "Igatherv", "Wait", "Wait", "Wait",
           "Wait", "Wait", "Ireduce", "Iallgather", "Iscatter", "Waitall"]


def _coll(t, r):
    """Rank ``r``'s collective events by name (the first of each op; Allreduce: a list)."""
    out = {}
    for e in events(t, r):
        out.setdefault(e["op"], []).append(e)
    return out


def test_collective_op_sequence(traced):
    """Every rank records the same collective calls in program order, on WORLD, with no peer/tag."""
    t = traced("collectives")
    for r in range(t.nprocs):
        assert op_names(t, r) == BLOCKING_COLL + NB_COLL
        for e in events(t, r):
            if e["op"] not in ("Wait", "Waitall"):
                assert (e["comm"], e["peer"], e["recv_peer"], e["tag"]) == (0, PEER_NONE, PEER_NONE, -1)


def test_rooted_collectives_record_their_root(traced):
    """Rooted collectives record the root's world rank on every rank; the others PEER_NONE."""
    t = traced("collectives")
    roots = {"Bcast": 2, "Reduce": 1, "Gather": 3, "Gatherv": 0, "Scatter": 1, "Scatterv": 2,
             "Ibcast": 3, "Igatherv": 1, "Ireduce": 0, "Iscatter": 2}
    for r in range(t.nprocs):
        for name, evs in _coll(t, r).items():
            for e in evs:
                assert e["root"] == roots.get(name, PEER_NONE), f"rank {r} {name}"


def test_reduction_like_collectives_record_count_times_type_size(traced):
    """Bcast, Reduce, Allreduce (in place too), Scan, ...: both columns are count x type size."""
    t = traced("collectives")
    expect = {"Bcast": [56], "Reduce": [12], "Allreduce": [16, 48], "Reduce_scatter_block": [24],
              "Scan": [16], "Exscan": [20], "Ibcast": [18], "Iallreduce": [32], "Ireduce": [8]}
    for r in range(t.nprocs):
        c = _coll(t, r)
        for name, sizes in expect.items():
            assert [(e["bytes"], e["recv_bytes"]) for e in c[name]] == [(s, s) for s in sizes], \
                f"rank {r} {name}"
        assert (c["Barrier"][0]["bytes"], c["Barrier"][0]["recv_bytes"]) == (0, 0)


def test_block_collectives_record_send_and_receive_blocks(traced):
    """Gather/Scatter/Allgather/Alltoall record send and receive blocks, 0 where not significant."""
    t = traced("collectives")
    for r in range(t.nprocs):
        c = _coll(t, r)

        def blk(name, c=c):
            return c[name][0]["bytes"], c[name][0]["recv_bytes"]

        assert blk("Gather") == (16, 16 if r == 3 else 0), f"rank {r}"
        assert blk("Scatter") == (6 if r == 1 else 0, 6), f"rank {r}"
        assert blk("Allgather") == (5, 5)
        assert blk("Alltoall") == (16, 16)
        assert blk("Ialltoall") == (8, 8)
        assert blk("Iallgather") == (8, 8)
        assert blk("Iscatter") == (8 if r == 2 else 0, 8)


def test_gatherv_and_scatterv_list_per_peer_bytes_at_the_root(traced):
    """Gatherv/Scatterv: totals and per-rank sizes at the root, own block elsewhere."""
    t = traced("collectives")
    for r in range(t.nprocs):
        c = _coll(t, r)
        g, s = c["Gatherv"][0], c["Scatterv"][0]
        assert g["bytes"] == 8 * (r + 1)
        assert s["recv_bytes"] == 4 * (2 * r + 1)
        if r == 0:
            assert g["recv_bytes"] == 80
            assert listed(t, r, g["seq"], LIST_RECV) == [8, 16, 24, 32]
        else:
            assert g["recv_bytes"] == 0 and not has_list(t, r, g["seq"])
        if r == 2:
            assert s["bytes"] == 64
            assert listed(t, r, s["seq"], LIST_SEND) == [4, 12, 20, 28]
        else:
            assert s["bytes"] == 0 and not has_list(t, r, s["seq"])


def test_allgatherv_lists_every_ranks_contribution(traced):
    """Allgatherv records its own block sent and the total received, with per-rank sizes."""
    t = traced("collectives")
    for r in range(t.nprocs):
        e = _coll(t, r)["Allgatherv"][0]
        assert (e["bytes"], e["recv_bytes"]) == (4 * (r + 2), 56)
        assert listed(t, r, e["seq"], LIST_RECV) == [8, 12, 16, 20]
        assert listed(t, r, e["seq"], LIST_SEND) == []


def test_alltoallv_lists_exact_per_peer_bytes(traced):
    """Alltoallv records per-peer bytes sent and received (rank-dependent) and their totals."""
    t = traced("collectives")
    P = t.nprocs
    for r in range(P):
        e = _coll(t, r)["Alltoallv"][0]
        sent = [4 * (r + 2 * j + 1) for j in range(P)]
        recv = [4 * (j + 2 * r + 1) for j in range(P)]
        assert listed(t, r, e["seq"], LIST_SEND) == sent
        assert listed(t, r, e["seq"], LIST_RECV) == recv
        assert (e["bytes"], e["recv_bytes"]) == (sum(sent), sum(recv))


def test_reduce_scatter_records_total_and_own_block(traced):
    """Reduce_scatter: bytes = whole vector, recv_bytes = own block, per-rank blocks listed."""
    t = traced("collectives")
    for r in range(t.nprocs):
        e = _coll(t, r)["Reduce_scatter"][0]
        assert (e["bytes"], e["recv_bytes"]) == (80, 8 * (r + 1))
        assert listed(t, r, e["seq"], LIST_RECV) == [8, 16, 24, 32]


def test_nonblocking_collectives_link_requests_to_completions(traced):
    """Each nonblocking collective's request id is completed once, by a later Wait/Waitall."""
    t = traced("collectives")
    for r in range(t.nprocs):
        c = _coll(t, r)
        nb = [c[n][0] for n in ("Ibarrier", "Ibcast", "Iallreduce", "Ialltoall", "Igatherv",
                                "Ireduce", "Iallgather", "Iscatter")]
        ids = [e["req"] for e in nb]
        assert min(ids) >= 0 and len(set(ids)) == len(ids)
        rows = completions(t, r)
        assert sorted(x["req"] for x in rows) == sorted(ids)
        got = by_req(rows)
        waits = [e["seq"] for e in c["Wait"]]
        for e, w in zip(nb[:5], waits):
            assert got[e["req"]]["seq"] == w
            assert got[e["req"]]["bytes"] == e["bytes"] and got[e["req"]]["peer"] == PEER_NONE
        wall = c["Waitall"][0]
        assert wall["aux"] == 3
        assert {got[e["req"]]["seq"] for e in nb[5:]} == {wall["seq"]}
        ig = c["Igatherv"][0]
        assert ig["bytes"] == 8 * (r + 1)
        if r == 1:
            assert ig["recv_bytes"] == 80
            assert listed(t, r, ig["seq"], LIST_RECV) == [8, 16, 24, 32]
        else:
            assert ig["recv_bytes"] == 0


# =======================================================================================
# 6. derived communicators (5 ranks: odd sizes)
# =======================================================================================

def test_comm_split_gives_one_global_id_per_new_communicator(traced):
    """Comm_split's aux is the new communicator, with the same id on all its members."""
    t = traced("comms")
    ids = {r: one(t, r, "Comm_split")["aux"] for r in range(t.nprocs)}
    assert ids[0] == ids[2] == ids[4] and ids[1] == ids[3] and ids[0] != ids[1]
    assert members(t, ids[0]) == [4, 2, 0]
    assert members(t, ids[1]) == [3, 1]
    assert all(one(t, r, "Comm_split")["comm"] == 0 for r in range(t.nprocs))


def test_p2p_on_a_split_communicator_records_world_ranks(traced):
    """Send/Recv on a sub-communicator record world peers and the sub-communicator's id."""
    t = traced("comms")
    for src, dst in ((4, 2), (3, 1)):
        cid = one(t, src, "Comm_split")["aux"]
        s = one(t, src, "Send")
        assert (s["peer"], s["tag"], s["bytes"], s["comm"]) == (dst, 61, 32, cid)
        rv = one(t, dst, "Recv")
        assert (rv["peer"], rv["tag"], rv["recv_bytes"], rv["comm"]) == (src, 61, 32, cid)
    assert not events(t, 0, "Send") and not events(t, 0, "Recv")


def test_collective_root_on_a_split_communicator_is_a_world_rank(traced):
    """A Bcast rooted at sub-rank 1 records world rank 2 (even group) or 1 (odd group)."""
    t = traced("comms")
    for r in range(t.nprocs):
        b = one(t, r, "Bcast")
        assert b["root"] == (2 if r % 2 == 0 else 1), f"rank {r}"
        assert b["comm"] == one(t, r, "Comm_split")["aux"]
        assert (b["bytes"], b["recv_bytes"]) == (12, 12)


def test_comm_dup_is_a_new_communicator_of_the_same_members(traced):
    """Comm_dup's new id differs from WORLD's, has all ranks, and carries the Allreduce."""
    t = traced("comms")
    cid = {events(t, r, "Comm_dup")[0]["aux"] for r in range(t.nprocs)}
    assert len(cid) == 1
    (cid,) = cid
    assert cid != 0 and members(t, cid) == list(range(t.nprocs))
    for r in range(t.nprocs):
        a = one(t, r, "Allreduce")
        assert (a["comm"], a["bytes"], a["recv_bytes"]) == (cid, 16, 16)


def test_comm_create_from_a_group(traced):
    """Comm_create gives the group's members its communicator (others -1); roots are world ranks."""
    t = traced("comms")
    ids = {r: one(t, r, "Comm_create")["aux"] for r in range(t.nprocs)}
    assert ids[0] == ids[2] == -1
    assert ids[1] == ids[3] == ids[4] >= 0
    assert members(t, ids[1]) == [3, 1, 4]
    for r in (1, 3, 4):
        red = one(t, r, "Reduce")
        assert (red["root"], red["comm"], red["bytes"]) == (3, ids[1], 8)
    assert not events(t, 0, "Reduce")


def test_cart_create_records_dims_and_periods(traced):
    """Cart_create records the new communicator's dims and periods; a rank left out gets -1."""
    t = traced("comms")
    ids = {r: one(t, r, "Cart_create")["aux"] for r in range(t.nprocs)}
    assert ids[4] == -1
    assert len({ids[r] for r in range(4)}) == 1
    cid = ids[0]
    assert t.comms.cartesian(cid) == ((2, 2), (True, False))
    assert members(t, cid) == [0, 1, 2, 3]
    assert t.comms.cartesian(0) is None


def test_shift_neighbour_sendrecv_records_world_ranks(traced):
    """Sendrecv to Cart_shift neighbours records world ranks, PROC_NULL at non-periodic edges."""
    t = traced("comms")
    cid = one(t, 0, "Cart_create")["aux"]
    for r in range(4):
        periodic, edge = events(t, r, "Sendrecv")
        other_row = (r + 2) % 4
        assert (periodic["peer"], periodic["recv_peer"], periodic["tag"]) == (other_row, other_row, 62)
        assert (periodic["bytes"], periodic["recv_bytes"], periodic["comm"]) == (8, 8, cid)
        col = r % 2
        dest = r + 1 if col == 0 else PEER_NULL
        src = r - 1 if col == 1 else PEER_NULL
        assert (edge["peer"], edge["recv_peer"], edge["tag"], edge["comm"]) == (dest, src, 63, cid)
        assert edge["recv_bytes"] == (8 if src != PEER_NULL else 0)
        if dest != PEER_NULL:
            assert edge["bytes"] == 8
    assert not events(t, 4, "Sendrecv")


def test_cart_sub_gives_the_row_communicators(traced):
    """Cart_sub keeps one dimension: rows [0, 1] and [2, 3], one-dimensional, not periodic."""
    t = traced("comms")
    cart = one(t, 0, "Cart_create")["aux"]
    rows = {}
    for r in range(4):
        e = one(t, r, "Cart_sub")
        assert e["comm"] == cart
        rows[r] = e["aux"]
        ag = one(t, r, "Allgather")
        assert (ag["comm"], ag["bytes"], ag["recv_bytes"]) == (e["aux"], 1, 1)
    assert rows[0] == rows[1] != rows[2] == rows[3]
    assert members(t, rows[0]) == [0, 1] and members(t, rows[2]) == [2, 3]
    assert t.comms.cartesian(rows[0]) == ((2,), (False,))


def test_a_dup_after_frees_is_a_new_communicator(traced):
    """A Dup made after communicators were freed (their handles reusable) gets a new id."""
    t = traced("comms")
    for r in range(t.nprocs):
        first, second = events(t, r, "Comm_dup")
        assert second["aux"] not in (0, first["aux"])
        assert members(t, second["aux"]) == list(range(t.nprocs))
        barrier = events(t, r, "Barrier")[0]
        assert barrier["comm"] == second["aux"] and barrier["seq"] > second["seq"]
        assert all(e["comm"] != first["aux"] for e in events(t, r) if e["seq"] > second["seq"])
    assert len({events(t, r, "Comm_dup")[1]["aux"] for r in range(t.nprocs)}) == 1


def test_split_type_and_create_group(traced):
    """Comm_split_type and Comm_create_group record the new communicator in aux."""
    t = traced("comms")
    node = {one(t, r, "Comm_split_type")["aux"] for r in range(t.nprocs)}
    assert len(node) == 1
    (node,) = node
    assert node >= 0 and members(t, node) == list(range(t.nprocs))  # one host
    pair = {r: one(t, r, "Comm_create_group")["aux"] for r in (4, 0)}
    assert pair[4] == pair[0] >= 0 and members(t, pair[0]) == [4, 0]
    for r in (1, 2, 3):
        assert not events(t, r, "Comm_create_group")
    for r in (4, 0):
        assert events(t, r, "Barrier", comm=pair[r]) and \
            one(t, r, "Comm_create_group")["comm"] == 0


def test_comm_free_records_the_freed_communicators(traced):
    """Comm_free records the id of each communicator it frees, in program order."""
    t = traced("comms")
    for r in range(t.nprocs):
        def ids(op, r=r):
            return [e["aux"] for e in events(t, r, op)]

        dup, dup2 = ids("Comm_dup")
        expect = (ids("Cart_sub") + ids("Cart_create") + ids("Comm_create") + [dup]
                  + ids("Comm_split") + ids("Comm_create_group") + ids("Comm_split_type") + [dup2])
        expect = [c for c in expect if c >= 0]
        assert [e["comm"] for e in events(t, r, "Comm_free")] == expect, f"rank {r}"


def test_comm_ids_are_consistent_across_ranks(traced):
    """Every communicator id used by an event lists that event's rank among its members."""
    t = traced("comms")
    for r in range(t.nprocs):
        for e in events(t, r):
            if e["comm"] >= 0:
                assert r in members(t, e["comm"]), f"rank {r} {e}"
