"""SimGrid interop: TI export/import round trips and SMPI's replay on a matching platform."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from conftest import TRACES, needs_simgrid
from replay import _kernel, simgrid
from replay.machine import LogGP, Machine
from replay.simgrid import (HOST_SPEED, SIMGRID_DATATYPES, datatype_table, export_ti, import_ti,
                            platform_xml, replay_smpi, run_program)
from signature import load_trace
from signature.errors import TraceFormatError
from signature.trace import LIST_RECV, LIST_SEND, OP_CODE, OPS, PEER_NULL


PINGPONG = {0: ["0 init", "0 compute 1e6", "0 send 1 0 1000 6", "0 recv 1 0 1000 6", "0 finalize"],
            1: ["1 init", "1 recv 0 0 1000 6", "1 send 0 0 1000 6", "1 finalize"]}


def assert_same_trace(a, b):
    """Two imports are identical: every column, side table, offset and metadata."""
    assert a.events.keys() == b.events.keys()
    for k in a.events:
        assert a.events[k].dtype == b.events[k].dtype, k
        np.testing.assert_array_equal(a.events[k], b.events[k], err_msg=k)
    for table in ("completions", "lists"):
        x, y = getattr(a, table), getattr(b, table)
        assert x.keys() == y.keys()
        for k in x:
            assert x[k].dtype == y[k].dtype, (table, k)
            np.testing.assert_array_equal(x[k], y[k], err_msg=f"{table} {k}")
    np.testing.assert_array_equal(a.rank_offsets, b.rank_offsets)
    for k in ("size", "members", "cart_dims", "cart_periods"):
        np.testing.assert_array_equal(getattr(a.comms, k), getattr(b.comms, k))
    assert a.meta == b.meta


@pytest.fixture(autouse=True)
def import_checked_against_the_reference(monkeypatch):
    """Every import of this module also runs the line-by-line Python reader (the reference the
    bulk reader replaced) and must give the identical trace, or the identical error."""
    fast = simgrid.import_ti

    def checked(index, **kw):
        try:
            ref = simgrid._import_ti_reference(index, **kw)
        except TraceFormatError as err:
            with pytest.raises(TraceFormatError) as got:
                fast(index, **kw)
            assert str(got.value) == str(err)
            raise
        t = fast(index, **kw)
        assert_same_trace(t, ref)
        return t

    monkeypatch.setitem(globals(), "import_ti", checked)


def write_ti(tmp_path, ranks):
    files = []
    for r, lines in ranks.items():
        f = tmp_path / f"r{r}.txt"
        f.write_text("\n".join(lines) + "\n")
        files.append(str(f))
    idx = tmp_path / "ti.txt"
    idx.write_text("\n".join(files) + "\n")
    return idx


def test_import_reads_actions_sizes_and_compute(tmp_path):
    """A TI trace becomes a flops-mode trace: ops, peers, bytes, compute before each event."""
    t = import_ti(write_ti(tmp_path, PINGPONG))
    assert t.nprocs == 2 and t.work_mode == "flops"
    r0 = t.rank_events(0)
    assert [int(x) for x in r0["bytes"]] == [0, 1000, 0, 0]
    assert r0["t_comp"][1] == pytest.approx(1e6 / HOST_SPEED)


@pytest.mark.parametrize("app", ["stencil", "cg", "nbody", "fft2d", "sweep"])
def test_export_import_round_trip(tmp_path, app):
    """Every bundled trace exports and reads back with the same p2p/collective events and compute."""
    t = load_trace(TRACES / app / "P4.h5")
    back = import_ti(export_ti(t, tmp_path / app))
    keep = ~np.isin(t.events["op"], [75, 82, 83])  # Cart_create and regions are not exported
    np.testing.assert_array_equal(back.events["op"], t.events["op"][keep])
    np.testing.assert_array_equal(back.events["bytes"] + back.events["recv_bytes"] > 0,
                                  (t.events["bytes"] + t.events["recv_bytes"])[keep] > 0)
    assert back.events["t_comp"].sum() == pytest.approx(t.events["t_comp"].sum(), rel=1e-4)


def test_bad_ti_lines_name_the_file_and_line(tmp_path):
    """A malformed or unknown action is refused with its file and line."""
    with pytest.raises(TraceFormatError, match=r"r0.txt:2: SimGrid action 'teleport'"):
        import_ti(write_ti(tmp_path, {0: ["0 init", "0 teleport 3"]}))
    with pytest.raises(TraceFormatError, match=r"r0.txt:2: malformed line"):
        import_ti(write_ti(tmp_path, {0: ["0 init", "0 send x 0 10 6"]}))
    with pytest.raises(TraceFormatError, match=r"r0.txt:2: malformed line"):
        import_ti(write_ti(tmp_path, {0: ["0 init", "0 send 1 0 10"], 1: ["1 init"]}))


def test_unknown_datatype_code_names_the_file_and_line(tmp_path):
    """A datatype code SimGrid never writes is refused with its file and line, not taken as bytes."""
    ranks = {0: ["0 init", "0 compute 10", "0 send 1 0 10 6", "0 send 1 0 10 999", "0 finalize"],
             1: ["1 init", "1 recv 0 0 10 6", "1 recv 0 0 10 6", "1 finalize"]}
    with pytest.raises(TraceFormatError, match=r"r0.txt:4: unknown SimGrid datatype code 999"):
        import_ti(write_ti(tmp_path, ranks))


def test_every_simgrid_datatype_code_has_its_size(tmp_path):
    """Every code of the datatype table scales the count by its size (code 43 used to be 1 byte)."""
    table, source = datatype_table()
    codes = sorted(table)
    ranks = {0: ["0 init"] + [f"0 send 1 {c} 3 {c}" for c in codes] + ["0 finalize"],
             1: ["1 init"] + [f"1 recv 0 {c} 3 {c}" for c in codes] + ["1 finalize"]}
    t = import_ti(write_ti(tmp_path, ranks))
    sends = t.rank_events(0)["bytes"][1:-1]
    assert sends.tolist() == [3 * table[c][1] for c in codes]
    assert t.rank_events(1)["recv_bytes"][1:-1].tolist() == sends.tolist()
    assert table[1] == ("MPI_INT", 4) and table[43] == ("MPI_COMPLEX16", 16)
    assert t.meta["datatypes"] == source


@pytest.mark.parametrize("ranks, match", [
    ({0: ["0 init", "0 send 1 0 2 -1"], 1: ["1 init", "1 recv 0 0 2 -1"]},
     r"r0.txt:2: datatype -1: SimGrid writes -1 for derived datatypes"),
    ({0: ["0 init", "0 Startall", "0 waitall 2"]}, r"r0.txt:2: Startall"),
    ({0: ["0 init", "0 isend 1 0 2 6", "0 isend 1 1 2 6", "0 waitAny 2"],
      1: ["1 init", "1 recv 0 0 2 6", "1 recv 0 1 2 6"]},
     r"r0.txt:4: waitAny with 2 requests pending \(posted at lines 2, 3\)"),
    ({0: ["0 init", "0 isend 1 0 2 6", "0 isend 1 1 2 6", "0 waitall 1"],
      1: ["1 init", "1 recv 0 0 2 6", "1 recv 0 1 2 6"]},
     r"r0.txt:4: waitall of 1 requests while 2 are pending"),
    ({0: ["0 init", "0 isend 1 0 2 6", "0 finalize"], 1: ["1 init", "1 recv 0 0 2 6", "1 finalize"]},
     r"r0.txt:2: the request posted here is never completed"),
    ({0: ["0 init", "0 wait 0 1 5"]}, r"r0.txt:2: wait for a request \(0 -> 1, tag 5\)"),
    ({0: ["0 init", "0 alltoallv 48 2 2 48 2 2 1 1"], 1: ["1 init", "1 alltoallv 48 2 2 48 2 2 1 1"]},
     r"r0.txt:2: alltoallv whose totals are not the sums of its counts.*MPI_Alltoallw"),
    ({0: ["0 init", "0 comm_split"]}, r"r0.txt:2: comm_split"),
    ({0: ["0 init", "0 comm_size 2"]}, r"r0.txt:2: comm_size 2 in a 1-rank trace"),
    ({0: ["0 init", "0 Win_fence"]}, r"r0.txt:2: one-sided communication \(Win_fence\)"),
    ({0: ["0 init", "0 Put 1 0 4 0"]}, r"r0.txt:2: one-sided communication \(Put\)"),
    ({0: ["0 init", "0 bcast 4 0 1"], 1: ["1 init", "1 allreduce 4 0 1"]},
     r"r1.txt:2: collective 0 of rank 1 is Allreduce .* but rank 0's is Bcast .*sub-communicators"),
    ({0: ["0 init", "0 bcast 4 0 1"], 1: ["1 init", "1 bcast 4 1 1"]},
     r"r1.txt:2: collective 0 of rank 1 is Bcast \(root 1\)"),
    ({0: ["0 init", "0 send 2 0 4 1"], 1: ["1 init", "1 send 2 0 4 1"], 2: ["2 init", "2 recv -333 0 4 1",
                                                                              "2 recv -333 0 4 1"]},
     r"r2.txt:2: receive from MPI_ANY_SOURCE or MPI_PROC_NULL .* sends from ranks \[0, 1\]"),
    ({0: ["0 init", "0 bcast 4 7 1"]}, r"r0.txt:2: root 7 is not a rank of this 1-process trace"),
])
def test_actions_the_trace_cannot_describe_are_refused(tmp_path, ranks, match):
    """What the TI trace does not record (bytes, peers, completions, communicator) is refused by line."""
    with pytest.raises(TraceFormatError, match=match):
        import_ti(write_ti(tmp_path, ranks))


def test_wildcard_receives_get_the_only_possible_source(tmp_path):
    """-333 receives (MPI_ANY_SOURCE or MPI_PROC_NULL) take the one sender left over, or none."""
    ranks = {0: ["0 init", "0 send 2 5 4 1", "0 finalize"],
             1: ["1 init", "1 send 2 6 4 1", "1 finalize"],
             2: ["2 init", "2 irecv -333 5 4 1", "2 recv 1 6 4 1", "2 irecv -333 9 4 1",
                 "2 wait -333 2 5", "2 wait -333 2 9", "2 finalize"]}
    t = import_ti(write_ti(tmp_path, ranks))
    ev = t.rank_events(2)
    assert ev["peer"].tolist() == [-1, 0, 1, PEER_NULL, -1, -1, -1]
    assert t.completions["peer"].tolist() == [0, PEER_NULL] and t.completions["bytes"].tolist() == [16, 0]


def test_bulk_reader_reads_requests_tests_and_collectives_as_the_reference(tmp_path):
    """The compiled reader takes every line of these files (no Python fallback) and gives the
    reference's columns: waits by key, tests settled by a short waitall or the end of the file,
    waitAny, nonblocking collectives, sleeps, locations, MPI_PROC_NULL and wildcards."""
    ranks = {r: [f"{r} init", f"{r} location foo.c 12", f"{r} compute 1.5e6", f"{r} sleep 0.25",
                 f"{r} isend {1 - r} 3 10 0", f"{r} irecv {1 - r} 3 10 0", f"{r} test {r} {1 - r} 3",
                 f"{r} wait {1 - r} {r} 3", f"{r} compute 7", f"{r} waitall 0",
                 f"{r} ibcast 4 1 1", f"{r} isend -333 0 2 6",
                 f"{r} wait {r} -333 0", f"{r} wait {r} {r} -2",
                 f"{r} irecv -333 4 8 1", f"{r} send {1 - r} 4 8 1", f"{r} test -333 {r} 4",
                 f"{r} testall", f"{r} igather 2 2 0 1 1", f"{r} scatter 1 1 1 0 0", f"{r} sendRecv 1 {1 - r} 1 {1 - r} 2 2",
                 f"{r} Ssend {1 - r} 9 1 2", f"{r} recv {1 - r} -444 1 2", f"{r} waitall 1",
                 f"{r} iallreduce 3 9 0", f"{r} waitAny 1", f"{r} reduce 2 5 0 7", f"{r} finalize", ""]
             for r in range(2)}
    index = write_ti(tmp_path, ranks)
    files = simgrid._rank_files(index)
    sizes, source = datatype_table()
    if _kernel.tiparse() is not None:
        assert simgrid._read_ranks(index, files, HOST_SPEED, sizes, source)["reader"] == ["c", "c"]
    t = import_ti(index)
    ev = t.rank_events(0)
    assert OPS[ev["op"][-2]] == "Reduce" and t.completions["rank"].tolist().count(0) == 7


def test_import_without_a_c_compiler_reads_every_file_in_python(tmp_path, monkeypatch):
    """No compiled reader (no cc, or SIGEX_REPLAY_KERNEL=numpy): every file is read by the Python
    reader into the same columns."""
    index = write_ti(tmp_path, PINGPONG)
    want = import_ti(index)
    monkeypatch.setattr(_kernel, "tiparse", lambda: None)
    files = simgrid._rank_files(index)
    sizes, source = datatype_table()
    assert simgrid._read_ranks(index, files, HOST_SPEED, sizes, source)["reader"] == ["python"] * 2
    assert_same_trace(import_ti(index), want)


@pytest.mark.parametrize("line", ["0 compute 1_000", "0 compute 0x10", "0 compute .5", "0 compute 5.",
                                  "0 compute inf", "0 compute 1e400", "0 send 1 00 1 6",
                                  "0 send 1 +0 1 6", "0 compute 1\r", "0 send 1 0 1 6 extra"])
def test_numbers_and_bytes_the_bulk_reader_leaves_to_python(tmp_path, line):
    """Whatever the compiled reader does not parse strictly is read by the Python reader:
    the import is the reference's either way (checked by the autouse fixture)."""
    ranks = {0: ["0 init", line, "0 send 1 0 1 6", "0 finalize"],
             1: ["1 init", "1 recv 0 0 1 6", "1 recv 0 0 1 6", "1 finalize"]}
    try:
        import_ti(write_ti(tmp_path, ranks))
    except TraceFormatError:
        pass  # the same error from both readers (the fixture compared them)


def test_reduce_scatter_block_as_simgrid_writes_it(tmp_path):
    """SimGrid 3.32 writes MPI_Reduce_scatter_block as one zero per element and the datatype."""
    ranks = {r: [f"{r} init", f"{r} reducescatter 0 0 0 0 0 0", f"{r} reducescatter 1 2 3 0 5",
                 f"{r} finalize"] for r in range(3)}
    t = import_ti(write_ti(tmp_path, ranks))
    ev = t.rank_events(1)
    assert [OPS[o] for o in ev["op"][1:3]] == ["Reduce_scatter_block", "Reduce_scatter"]
    assert ev["bytes"][1:3].tolist() == [40, 24] and ev["recv_bytes"][1:3].tolist() == [40, 8]


def test_platform_refuses_a_machine_with_intra_node_links():
    """One single-core host per rank cannot give ranks of a node other parameters: say so."""
    from replay import load
    from replay.simgrid import SimGridError
    with pytest.raises(SimGridError, match="intra-node parameters.*machine.flat"):
        platform_xml(load("cluster-a"), 16)
    assert 'radical="0-15"' in platform_xml(load("cluster-a").flat(), 16)


def test_import_declares_the_grid_and_stamps_times_from_the_replay(tmp_path):
    """``grid`` puts the communication on a Cartesian communicator over the world;
    ``clock`` gives each event the time of sigex's replay, so the signature sees phases."""
    from replay import Program, replay
    from signature import extract
    ranks = {}
    for r in range(4):
        right, left = (r + 1) % 4, (r - 1) % 4
        body = [f"{r} init"]
        for _ in range(6):
            body += [f"{r} compute {1e6 * (r + 1):.0f}", f"{r} irecv {left} 0 100 0",
                     f"{r} isend {right} 0 100 0", f"{r} waitall 2", f"{r} allreduce 1 0 0"]
        ranks[r] = body + [f"{r} finalize"]
    m = Machine("m", LogGP(L=1e-5, o=1e-6, g=0.0, G=1e-9), S=65536)
    with pytest.raises(TraceFormatError, match="does not hold"):
        import_ti(write_ti(tmp_path, ranks), grid=((3, 1), (True, False)))
    t = import_ti(write_ti(tmp_path, ranks), grid=((2, 2), (True, True)), clock=m, app="ring",
                  workload=("n", "100"))
    assert t.comms.cartesian(1) == ((2, 2), (True, True))
    assert set(t.events["comm"][t.events["op"] == OP_CODE["Irecv"]].tolist()) == {1}
    assert t.meta["workload_value"] == "100" and "sigex's replay" in t.meta["clock"]
    assert t.runtime == pytest.approx(replay(Program.from_trace(t), m).runtime, rel=1e-12)
    # the slowest rank computes 6 ms in all; the ring makes everyone wait for it
    assert t.runtime > 6 * 4e-3
    sig = extract(t)
    assert [p.weight for p in sig.phases if p.kind == "loop"] == [6]
    assert (t.to_hdf5(tmp_path / "ring.h5").exists())


def test_platform_describes_the_machine():
    """The platform has one host per rank, link latency L/2 each way and bandwidth 1/G."""
    m = Machine("m", LogGP(L=2e-6, o=1e-7, g=0.0, G=1e-9))
    xml = platform_xml(m, 8)
    assert 'radical="0-7"' in xml and 'lat="1e-06s"' in xml and 'bw="1e+09Bps"' in xml


#: Every MPI call whose TI line sigex imports, at P = 4 (ring neighbours, roots 0..3), with
#: C and Fortran-style datatypes. ``smpirun -trace-ti`` writes what SimGrid 3.32 writes for it.
ACTIONS_C = r"""
#include <mpi.h>
#include <smpi/smpi.h>
static char b[1 << 16], rb[1 << 16], bsend_buf[1 << 12];
int main(int argc, char **argv) {
  int r, P, i, flag = 0, bsize;
  void *bp;
  MPI_Request q[2], p[2];
  MPI_Status st;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int right = (r + 1) % P, left = (r + P - 1) % P, c[16], d[16], v[16];
  for (i = 0; i < P; i++) { c[i] = i + 1; d[i] = 64 * i; v[i] = r + 1 + i; }
  smpi_execute_flops(1e6);
  MPI_Bcast(b, 3, MPI_COMPLEX16, 1, MPI_COMM_WORLD);
  MPI_Reduce(b, rb, 5, MPI_INTEGER4, MPI_SUM, 2, MPI_COMM_WORLD);
  MPI_Allreduce(b, rb, 2, MPI_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
  MPI_Alltoall(b, 2, MPI_INTEGER8, rb, 2, MPI_INTEGER8, MPI_COMM_WORLD);
  MPI_Alltoallv(b, v, d, MPI_INT, rb, v, d, MPI_INT, MPI_COMM_WORLD);
  MPI_Gather(b, 3, MPI_FLOAT, rb, 3, MPI_FLOAT, 1, MPI_COMM_WORLD);
  MPI_Gatherv(b, r + 1, MPI_SHORT, rb, c, d, MPI_SHORT, 2, MPI_COMM_WORLD);
  MPI_Scatter(b, 4, MPI_LONG_DOUBLE, rb, 4, MPI_LONG_DOUBLE, 3, MPI_COMM_WORLD);
  MPI_Scatterv(b, c, d, MPI_CHAR, rb, r + 1, MPI_CHAR, 1, MPI_COMM_WORLD);
  MPI_Allgather(b, 2, MPI_2INT, rb, 2, MPI_2INT, MPI_COMM_WORLD);
  MPI_Allgatherv(b, r + 1, MPI_C_BOOL, rb, c, d, MPI_C_BOOL, MPI_COMM_WORLD);
  MPI_Reduce_scatter(b, rb, c, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Reduce_scatter_block(b, rb, 3, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD);
  MPI_Scan(b, rb, 6, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Exscan(b, rb, 6, MPI_REAL, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Sendrecv(b, 10, MPI_INT, right, 5, rb, 10, MPI_INT, left, 5, MPI_COMM_WORLD, &st);
  MPI_Sendrecv_replace(b, 9, MPI_DOUBLE, right, 6, left, 6, MPI_COMM_WORLD, &st);
  MPI_Isend(b, 11, MPI_INT, right, 7, MPI_COMM_WORLD, &q[0]);
  MPI_Irecv(rb, 11, MPI_INT, left, 7, MPI_COMM_WORLD, &q[1]);
  MPI_Wait(&q[0], &st);
  MPI_Wait(&q[1], &st);
  MPI_Isend(b, 12, MPI_COMPLEX16, right, 8, MPI_COMM_WORLD, &q[0]);
  MPI_Irecv(rb, 12, MPI_COMPLEX16, MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, &q[1]);
  MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
  MPI_Isend(b, 13, MPI_INT, right, 9, MPI_COMM_WORLD, &q[0]);
  MPI_Irecv(rb, 13, MPI_INT, left, 9, MPI_COMM_WORLD, &q[1]);
  do { MPI_Test(&q[1], &flag, &st); } while (!flag);
  MPI_Wait(&q[0], &st);
  MPI_Issend(b, 14, MPI_INT, right, 10, MPI_COMM_WORLD, &q[0]);
  MPI_Irecv(rb, 14, MPI_INT, left, 10, MPI_COMM_WORLD, &q[1]);
  MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
  if (r % 2 == 0) {
    MPI_Ssend(b, 16, MPI_INT, right, 12, MPI_COMM_WORLD);
    MPI_Recv(rb, 16, MPI_INT, left, 12, MPI_COMM_WORLD, &st);
  } else {
    MPI_Recv(rb, 16, MPI_INT, left, 12, MPI_COMM_WORLD, &st);
    MPI_Ssend(b, 16, MPI_INT, right, 12, MPI_COMM_WORLD);
  }
  MPI_Buffer_attach(bsend_buf, sizeof bsend_buf);
  MPI_Bsend(b, 17, MPI_INT, right, 13, MPI_COMM_WORLD);
  MPI_Recv(rb, 17, MPI_INT, left, 13, MPI_COMM_WORLD, &st);
  MPI_Ibsend(b, 17, MPI_INT, right, 13, MPI_COMM_WORLD, &q[0]);
  MPI_Recv(rb, 17, MPI_INT, left, 13, MPI_COMM_WORLD, &st);
  MPI_Wait(&q[0], &st);
  MPI_Buffer_detach(&bp, &bsize);
  MPI_Irecv(rb, 18, MPI_INT, MPI_ANY_SOURCE, 14, MPI_COMM_WORLD, &q[1]);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Rsend(b, 18, MPI_INT, right, 14, MPI_COMM_WORLD);
  MPI_Wait(&q[1], &st);
  MPI_Irecv(rb, 15, MPI_INT, MPI_PROC_NULL, 15, MPI_COMM_WORLD, &q[1]);
  MPI_Wait(&q[1], &st);
  MPI_Isend(b, 15, MPI_INT, MPI_PROC_NULL, 15, MPI_COMM_WORLD, &q[0]);
  MPI_Wait(&q[0], &st);
  MPI_Send(b, 2, MPI_INT, right, 16, MPI_COMM_WORLD);
  MPI_Recv(rb, 2, MPI_INT, left, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
  MPI_Send_init(b, 7, MPI_DOUBLE, right, 22, MPI_COMM_WORLD, &p[0]);
  MPI_Recv_init(rb, 7, MPI_DOUBLE, left, 22, MPI_COMM_WORLD, &p[1]);
  MPI_Start(&p[1]);
  MPI_Start(&p[0]);
  MPI_Wait(&p[0], &st);
  MPI_Wait(&p[1], &st);
  MPI_Request_free(&p[0]);
  MPI_Request_free(&p[1]);
  MPI_Ibarrier(MPI_COMM_WORLD, &q[0]);
  MPI_Wait(&q[0], &st);
  MPI_Ibcast(b, 5, MPI_INT, 0, MPI_COMM_WORLD, &q[0]);
  MPI_Wait(&q[0], &st);
  MPI_Iallreduce(b, rb, 5, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]);
  MPI_Wait(&q[0], &st);
  MPI_Ialltoall(b, 2, MPI_INT, rb, 2, MPI_INT, MPI_COMM_WORLD, &q[0]);
  MPI_Wait(&q[0], &st);
  MPI_Ireduce_scatter_block(b, rb, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]);
  MPI_Wait(&q[0], &st);
  MPI_Igatherv(b, r + 1, MPI_INT, rb, c, d, MPI_INT, 1, MPI_COMM_WORLD, &q[0]);
  MPI_Wait(&q[0], &st);
  MPI_Finalize();
  return 0;
}
"""

#: One message of 3 elements per datatype, rank 0 to 1, and a derived datatype at the end.
DATATYPES_C = r"""
#include <mpi.h>
#include <stdio.h>
static char b[4096];
int main(int argc, char **argv) {
  MPI_Datatype t[] = {MPI_INTEGER, MPI_DOUBLE_COMPLEX, MPI_INTEGER4, MPI_INTEGER8, MPI_COMPLEX16,
                      MPI_COMPLEX8, MPI_REAL8, MPI_LOGICAL, MPI_2INT, MPI_DOUBLE_INT, MPI_LONG_DOUBLE,
                      MPI_C_LONG_DOUBLE_COMPLEX, MPI_UINT16_T, MPI_WCHAR, MPI_AINT, MPI_PACKED,
                      MPI_CHAR, MPI_BYTE, MPI_DOUBLE, MPI_FLOAT};
  int r, k, size, n = sizeof t / sizeof t[0];
  MPI_Datatype vec;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  for (k = 0; k < n; k++) {
    MPI_Type_size(t[k], &size);
    if (r == 0) { printf("size %d\n", size); MPI_Send(b, 3, t[k], 1, k, MPI_COMM_WORLD); }
    else MPI_Recv(b, 3, t[k], 0, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  if (argc > 1) {
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    if (r == 0) MPI_Send(b, 2, vec, 1, 99, MPI_COMM_WORLD);
    else MPI_Recv(b, 2, vec, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
"""

FORTRAN_F90 = """
program datatypes
  implicit none
  include 'mpif.h'
  integer :: ierr, r, i(3), st(MPI_STATUS_SIZE)
  double complex :: z(3)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, r, ierr)
  if (r == 0) then
    call MPI_Send(i, 3, MPI_INTEGER, 1, 1, MPI_COMM_WORLD, ierr)
    call MPI_Send(z, 3, MPI_DOUBLE_COMPLEX, 1, 2, MPI_COMM_WORLD, ierr)
  else
    call MPI_Recv(i, 3, MPI_INTEGER, 0, 1, MPI_COMM_WORLD, st, ierr)
    call MPI_Recv(z, 3, MPI_DOUBLE_COMPLEX, 0, 2, MPI_COMM_WORLD, st, ierr)
  end if
  call MPI_Allreduce(MPI_IN_PLACE, z, 2, MPI_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
end program datatypes
"""

SMPI_MACHINE = Machine("m", LogGP(L=1e-5, o=1e-6, g=0.0, G=1e-9), S=65536)


def smpi_trace(tmp_path, source, P, args=(), compiler=("smpicc",), suffix=".c"):
    """Build ``source`` with SimGrid's compiler, run it under ``smpirun -trace-ti`` at P ranks:
    (SMPI's simulated time, its output, the TI index)."""
    tmp_path.mkdir(exist_ok=True)
    src = tmp_path / f"prog{suffix}"
    src.write_text(source)
    exe = tmp_path / "prog"
    subprocess.run([*compiler, "-o", str(exe), str(src)], check=True, capture_output=True, text=True)
    sim, out = run_program(exe, list(args), SMPI_MACHINE, P, trace_ti=tmp_path / "ti")
    return sim, out, tmp_path / "ti" / "ti.txt"


@needs_simgrid
def test_installed_simgrid_datatype_codes_are_the_module_table():
    """The importer's datatype table is the installed SimGrid's, and for 3.32 the module's table."""
    from replay.simgrid import _probe_datatypes, _smpi_header
    version = subprocess.run(["smpirun", "-version"], capture_output=True, text=True).stdout
    table, source = datatype_table()
    assert "probed from the installed SimGrid" in source
    if "3.32" not in version:
        pytest.skip(f"the module's table is SimGrid 3.32's; installed: {version.strip()}")
    assert _probe_datatypes(_smpi_header()) == SIMGRID_DATATYPES == table


def test_datatype_table_without_simgrid_is_the_module_table(monkeypatch):
    """Without SimGrid on PATH the importer uses the module's SimGrid 3.32 table and says so."""
    import replay.simgrid as sg
    monkeypatch.setattr(sg.shutil, "which", lambda name: None)
    sg.datatype_table.cache_clear()
    try:
        table, source = sg.datatype_table()
    finally:
        sg.datatype_table.cache_clear()
    assert table == SIMGRID_DATATYPES and "no SimGrid installed" in source


@needs_simgrid
def test_datatype_table_warns_when_the_probe_fails(monkeypatch, tmp_path):
    """A failed probe of the installed SimGrid falls back to the module's table with a warning."""
    import replay.simgrid as sg
    from signature.errors import SigexWarning

    def fail(header):
        raise sg.SimGridError("smpicc could not build the datatype probe: boom")
    monkeypatch.setattr(sg, "_probe_datatypes", fail)
    monkeypatch.setenv("SIGEX_CACHE_DIR", str(tmp_path))
    sg.datatype_table.cache_clear()
    try:
        with pytest.warns(SigexWarning, match="could not read the datatype codes.*boom"):
            table, source = sg.datatype_table()
    finally:
        sg.datatype_table.cache_clear()
    assert table == SIMGRID_DATATYPES and "the probe failed" in source


@needs_simgrid
def test_smpi_trace_of_every_action_imports_op_peer_and_bytes(tmp_path):
    """Every action of a real ``smpirun -trace-ti`` run gets its call's op, peers, root, bytes, requests."""
    from replay import Program, replay
    sim, _, index = smpi_trace(tmp_path, ACTIONS_C, 4)
    t = import_ti(index)
    ev = t.rank_events(0)
    keep = ev["op"] != OP_CODE["Test"]  # how often the Test loop ran is SMPI's business
    got = [(OPS[o], int(p), int(q), int(root), int(b), int(rb)) for o, p, q, root, b, rb in
           zip(*(ev[c][keep] for c in ("op", "peer", "recv_peer", "root", "bytes", "recv_bytes")))]
    N, R, L = -1, 1, 3  # no peer, right and left neighbours of rank 0
    assert got == [
        ("Init", N, N, N, 0, 0), ("Bcast", N, N, 1, 48, 48), ("Reduce", N, N, 2, 20, 20),
        ("Allreduce", N, N, N, 32, 32), ("Alltoall", N, N, N, 16, 16),
        ("Alltoallv", N, N, N, 40, 40), ("Gather", N, N, 1, 12, 0), ("Gatherv", N, N, 2, 2, 0),
        ("Scatter", N, N, 3, 0, 64), ("Scatterv", N, N, 1, 0, 1), ("Allgather", N, N, N, 16, 16),
        ("Allgatherv", N, N, N, 1, 10), ("Reduce_scatter", N, N, N, 80, 8),
        ("Reduce_scatter_block", N, N, N, 12, 12), ("Scan", N, N, N, 48, 48),
        ("Exscan", N, N, N, 24, 24), ("Barrier", N, N, N, 0, 0),
        ("Sendrecv", R, L, N, 40, 40), ("Sendrecv", R, L, N, 72, 72),
        ("Isend", R, N, N, 44, 0), ("Irecv", L, N, N, 0, 44), ("Wait", N, N, N, 0, 0),
        ("Wait", N, N, N, 0, 0),
        ("Isend", R, N, N, 192, 0), ("Irecv", L, N, N, 0, 192), ("Waitall", N, N, N, 0, 0),
        ("Isend", R, N, N, 52, 0), ("Irecv", L, N, N, 0, 52), ("Wait", N, N, N, 0, 0),
        ("Issend", R, N, N, 56, 0), ("Irecv", L, N, N, 0, 56), ("Waitall", N, N, N, 0, 0),
        ("Ssend", R, N, N, 64, 0), ("Recv", L, N, N, 0, 64),
        ("Bsend", R, N, N, 68, 0), ("Recv", L, N, N, 0, 68), ("Ibsend", R, N, N, 68, 0),
        ("Recv", L, N, N, 0, 68), ("Wait", N, N, N, 0, 0),
        ("Irecv", L, N, N, 0, 72), ("Barrier", N, N, N, 0, 0), ("Send", R, N, N, 72, 0),
        ("Wait", N, N, N, 0, 0),
        ("Irecv", PEER_NULL, N, N, 0, 60), ("Wait", N, N, N, 0, 0),
        ("Isend", PEER_NULL, N, N, 60, 0), ("Wait", N, N, N, 0, 0),
        ("Send", R, N, N, 8, 0), ("Recv", L, N, N, 0, 8),
        ("Irecv", L, N, N, 0, 56), ("Isend", R, N, N, 56, 0), ("Wait", N, N, N, 0, 0),
        ("Wait", N, N, N, 0, 0),
        ("Ibarrier", N, N, N, 0, 0), ("Wait", N, N, N, 0, 0), ("Ibcast", N, N, 0, 20, 20),
        ("Wait", N, N, N, 0, 0), ("Iallreduce", N, N, N, 20, 20), ("Wait", N, N, N, 0, 0),
        ("Ialltoall", N, N, N, 8, 8), ("Wait", N, N, N, 0, 0),
        ("Ireduce_scatter_block", N, N, N, 12, 12), ("Wait", N, N, N, 0, 0),
        ("Igatherv", N, N, 1, 4, 0), ("Wait", N, N, N, 0, 0), ("Finalize", N, N, N, 0, 0)]
    assert ev["tag"][keep][[47, 48]].tolist() == [16, -1]  # MPI_ANY_TAG: no tag
    # the roots' side of rooted collectives, and per-peer bytes of the v-collectives
    for r, op, b, rb in [(1, "Gather", 12, 12), (2, "Gatherv", 6, 20), (3, "Scatter", 64, 64),
                         (1, "Scatterv", 10, 2), (1, "Igatherv", 8, 40)]:
        e = t.rank_events(r)
        i = int(np.flatnonzero(e["op"] == OP_CODE[op])[0])
        assert (int(e["bytes"][i]), int(e["recv_bytes"][i])) == (b, rb), (r, op)
    lists = t.lists
    row = np.flatnonzero((lists["rank"] == 0) & (lists["kind"] == LIST_SEND))[0]
    start, n = lists["start"][row], lists["length"][row]
    assert lists["values"][start:start + n].tolist() == [4, 8, 12, 16]  # Alltoallv to ranks 0..3
    # received per peer by rank 2: Alltoallv, Gatherv (its root), Allgatherv, Reduce_scatter
    assert ((lists["rank"] == 2) & (lists["kind"] == LIST_RECV)).sum() == 4
    # every wait completes its own requests, the Test loop the request it tested
    comp = t.completions
    mine = comp["rank"] == 0
    assert sorted(comp["req"][mine].tolist()) == list(range(20))
    test_seq = ev["seq"][ev["op"] == OP_CODE["Test"]][-1]
    assert comp["req"][mine & (comp["seq"] == test_seq)].tolist() == [5]
    ours = replay(Program.from_trace(t), SMPI_MACHINE).runtime
    assert ours == pytest.approx(sim, rel=0.1)  # measured: 4.8% (sigex's collectives are not SMPI's)


@needs_simgrid
def test_smpi_trace_datatypes_count_their_bytes(tmp_path):
    """A real run's messages are count x SMPI's datatype size; a derived datatype is refused by line."""
    _, out, index = smpi_trace(tmp_path, DATATYPES_C, 2)
    sizes = [int(x.split()[1]) for x in out.splitlines() if x.startswith("size ")]
    t = import_ti(index)
    sends = t.rank_events(0)
    sends = sends["bytes"][sends["op"] == OP_CODE["Send"]]
    assert sends.tolist() == [3 * s for s in sizes]
    assert sends[:5].tolist() == [12, 48, 12, 24, 48]
    recvs = t.rank_events(1)
    assert recvs["recv_bytes"][recvs["op"] == OP_CODE["Recv"]].tolist() == sends.tolist()
    _, _, index = smpi_trace(tmp_path / "derived", DATATYPES_C, 2, ["derived"])
    with pytest.raises(TraceFormatError, match=r"rank-1.txt:\d+: datatype -1: SimGrid writes -1 "
                                               "for derived datatypes"):
        import_ti(index)


@needs_simgrid
@pytest.mark.skipif(shutil.which("smpif90") is None or shutil.which("gfortran") is None,
                    reason="no Fortran compiler for SimGrid (smpif90 needs gfortran)")
def test_smpi_fortran_integer_and_double_complex(tmp_path):
    """Fortran MPI_INTEGER and MPI_DOUBLE_COMPLEX messages have 4 and 16 bytes per element."""
    _, _, index = smpi_trace(tmp_path, FORTRAN_F90, 2, suffix=".f90",
                             compiler=("smpif90", "-fallow-argument-mismatch"))
    ev = import_ti(index).rank_events(0)
    assert ev["bytes"][ev["op"] == OP_CODE["Send"]].tolist() == [12, 48]
    assert ev["bytes"][ev["op"] == OP_CODE["Allreduce"]].tolist() == [32]


@needs_simgrid
def test_smpi_pingpong_matches_loggp_by_hand(tmp_path):
    """1 ms compute, then 1000 B there and back: 1e-3 + 2 (o + L + 1000 G + o) seconds."""
    m = Machine("m", LogGP(L=1e-5, o=1e-6, g=0.0, G=1e-9), S=65536)
    T = replay_smpi(write_ti(tmp_path, PINGPONG), m, 2)
    assert T == pytest.approx(1e-3 + 2 * (1e-6 + 1e-5 + 1000e-9 + 1e-6), rel=0.02)


@needs_simgrid
@pytest.mark.parametrize("app", ["stencil", "cg", "nbody", "fft2d", "sweep"])
@pytest.mark.parametrize("machine", ["cluster-a", "cluster-b"])
def test_smpi_agrees_with_sigex_on_bundled_traces(tmp_path, app, machine):
    """The replay issue's check: sigex's replay of each bundled P=16 trace and SMPI's replay
    of its export on the matching platform agree within 5% (measured: 0.5% at most)."""
    from replay import Program, load, replay
    m = load(machine).flat()  # the platform has one single-core host per rank
    t = load_trace(TRACES / app / "P16.h5")
    ours = replay(Program.from_trace(t), m).runtime
    theirs = replay_smpi(export_ti(t, tmp_path / app), m, t.nprocs)
    assert ours == pytest.approx(theirs, rel=0.05)


def test_sigex_replay_command(capsys):
    """`sigex replay` prints the replayed time next to the measured one; a bad machine is named."""
    from sigex.cli import main
    assert main(["replay", str(TRACES / "cg" / "P4.h5"), "--machine", "cluster-a"]) == 0
    out = capsys.readouterr().out
    assert "replayed time" in out and "measured" in out
    assert main(["replay", str(TRACES / "cg" / "P4.h5"), "--machine", "nope"]) == 2
    assert "nope: no such machine file" in capsys.readouterr().err
