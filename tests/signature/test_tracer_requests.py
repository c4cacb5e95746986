"""Requests the call-family tests do not cover: MPI-4 Isendrecv and requests of untraced calls."""

from __future__ import annotations

import numpy as np

from conftest import needs_mpi
from signature import unmodelled_notes
from signature.trace import OP_CODE, PEER_NONE

pytestmark = needs_mpi

SCRIPT = """
from mpi4py import MPI
import numpy as np
c = MPI.COMM_WORLD
r, P = c.rank, c.size
a = np.full(4, r, dtype=np.float64); b = np.empty(4); x = np.zeros(2, dtype=np.float64)
req = c.Isendrecv(a, dest=(r + 1) % P, sendtag=5, recvbuf=b, source=(r - 1) % P, recvtag=5)
req.Wait()
assert b[0] == (r - 1) % P
req = c.Isendrecv_replace(a, dest=(r + 1) % P, sendtag=6, source=(r - 1) % P, recvtag=6)
req.Wait()
p = c.Bcast_init(x, root=0)      # a persistent collective (MPI-4): traced
p.Start(); p.Wait(); p.Free()
fh = MPI.File.Open(c, PATH, MPI.MODE_CREATE | MPI.MODE_WRONLY)
q = fh.Iwrite_at(8 * r, np.full(1, r, dtype=np.float64))   # MPI-IO: counted, not traced
q.Wait()
fh.Close()
"""


def test_isendrecv_and_untraced_requests(run_traced, tmp_path):
    """Isendrecv records both peers and completes with the received size; a persistent
    collective's request completes as itself; a request the tracer did not see created
    (MPI-IO) completes with no peer and no bytes, not with garbage."""
    t = run_traced(SCRIPT.replace("PATH", repr(str(tmp_path / "f.bin"))), 3, name="isr").trace
    for r in range(3):
        ev = t.rank_events(r)
        names = [t.op_name(o) for o in ev["op"]]
        assert names[:7] == ["Init", "Isendrecv", "Wait", "Isendrecv_replace", "Wait",
                             "Bcast_init", "Start"]
        for i, tag in ((1, 5), (3, 6)):
            assert ev["peer"][i] == (r + 1) % 3 and ev["recv_peer"][i] == (r - 1) % 3
            assert ev["bytes"][i] == 32 and ev["recv_bytes"][i] == 32 and ev["tag"][i] == tag
        c = {k: v[t.completions["rank"] == r] for k, v in t.completions.items()}
        known = c["req"] >= 0
        np.testing.assert_array_equal(c["req"][known], ev["req"][[1, 3, 5]])
        assert np.all(c["peer"][known][:2] == (r - 1) % 3) and np.all(c["bytes"][known][:2] == 32)
        assert c["peer"][known][2] == PEER_NONE and c["bytes"][known][2] == 16  # Bcast_init's
        assert (~known).sum() == 1
        # the MPI-IO request's Wait: an unknown request, recorded without status fields
        assert np.all(c["peer"][~known] == PEER_NONE) and np.all(c["bytes"][~known] == 0)
        assert np.all(c["tag"][~known] == -1)
    notes = unmodelled_notes(t.meta)
    assert any(n.startswith(("MPI_File_iwrite_at called 3 times on 3 rank(s): not modelled",
                             "MPI_File_iwrite_at_c called 3 times on 3 rank(s): not modelled"))
               for n in notes), notes


THREADED = """
import threading
from mpi4py import MPI
import numpy as np
c = MPI.COMM_WORLD
r, P = c.rank, c.size
assert MPI.Query_thread() == MPI.THREAD_MULTIPLE
side = c.Dup()                       # (traced: the calling thread's)
def work():                          # a library's own thread: two calls on its communicator
    side.Barrier()
    side.Allreduce(np.ones(1), np.empty(1))
t = threading.Thread(target=work)
t.start(); t.join()
x = np.zeros(3)
c.Allreduce(np.ones(3), x)           # the traced thread goes on
assert x[0] == P
"""


def test_calls_from_another_thread_are_counted_and_named_not_a_broken_trace(run_traced):
    """MPI calls from a thread other than MPI_Init's (PT-SCOTCH's, partitioning DOLFINx's mesh)
    are not recorded: the trace stays complete, their count per rank is in its unmodelled
    calls and every report names them (before, the whole run was marked incomplete)."""
    from signature import extract
    t = run_traced(THREADED, 3, name="threads").trace
    assert t.complete
    assert [t.op_name(o) for o in t.rank_events(0)["op"]][:3] == ["Init", "Comm_dup", "Allreduce"]
    row = t.meta["unmodelled_calls"]["MPI calls from other threads"]
    assert row["calls"] == 2 * 3 and row["ranks"] == 3
    note = "6 MPI calls from threads other than the one that called MPI_Init, on 3 rank(s): not traced"
    assert any(n.startswith(note) for n in unmodelled_notes(t.meta))
    assert any(n.startswith(note) for n in extract(t).unmodelled)


def test_a_persistent_collective_s_starts_are_read_as_the_nonblocking_collective(run_traced, tmp_path):
    """MPI_Bcast_init once, MPI_Start then: the signature reads the start as the MPI_Ibcast it
    posts, with the init's root, communicator and size (the model placed a Start alone, and
    its logical trace held no broadcast); the init and the free, local, are left out."""
    from signature.persistent import expand
    t = run_traced(SCRIPT.replace("PATH", repr(str(tmp_path / "f.bin"))), 3, name="isr").trace
    u, n = expand(t)
    assert n == 3
    for r in range(3):
        ev, old = u.rank_events(r), t.rank_events(r)
        names = [u.op_name(o) for o in ev["op"]]
        assert names[:7] == ["Init", "Isendrecv", "Wait", "Isendrecv_replace", "Wait", "Ibcast", "Wait"]
        assert "Bcast_init" not in names and "Start" not in names and "Request_free" not in names
        init = int(np.flatnonzero(old["op"] == OP_CODE["Bcast_init"])[0])
        for c in ("root", "comm", "bytes", "recv_bytes"):
            assert ev[c][5] == old[c][init], c


WAITS = """
from mpi4py import MPI
import numpy as np
c = MPI.COMM_WORLD
r, P = c.rank, c.size
nb = [q for q in (r - 1, r + 1) if 0 <= q < P]   # a chain's ends have one neighbour
a, b = np.zeros(8), np.empty((2, 8))
for step in range(20):
    recvs = [c.Irecv(b[j], source=q, tag=1) for j, q in enumerate(nb)]
    sends = [c.Isend(a, dest=q, tag=1) for q in nb]
    for x, y in zip(recvs, sends):   # each neighbour's receive, then its send
        x.Wait()
        y.Wait()
    c.Allreduce(np.ones(1), np.empty(1))
"""


def test_each_wait_names_the_call_that_posted_its_request(run_traced):
    """The signature's templates carry, for each MPI_Wait, the template event that posted
    the request it completed (``completes``), on ranks with one neighbour and with two."""
    from signature import extract
    sig = extract(run_traced(WAITS, 4, name="waits").trace)
    loop = max(sig.loop_phases, key=lambda p: p.weight)
    assert loop.weight >= 18
    for r in range(4):
        t = loop.rank_template(r)
        names = [OP_CODE_NAMES[o] for o in t["op"]]
        waits = [i for i, n in enumerate(names) if n == "Wait"]
        n_nb = 1 if r in (0, 3) else 2
        assert len(waits) == 2 * n_nb
        base = int(loop.template_offsets[r])
        done = [int(t["completes"][i]) - base for i in waits]
        # recv of neighbour j is post j, its send post n_nb + j; waited recv, send, recv, send
        want = [x for j in range(n_nb) for x in (j, n_nb + j)]
        assert done == want, (r, names, done)
        assert all(names[d] in ("Irecv", "Isend") for d in done)
        assert np.all(np.asarray(t["completes"])[[i for i in range(len(names)) if names[i] != "Wait"]] == -1)


OP_CODE_NAMES = {v: k for k, v in OP_CODE.items()}
