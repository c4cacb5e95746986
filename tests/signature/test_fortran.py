"""Fortran MPI programs are traced like their C twin, under Open MPI and under MPICH.

Open MPI's Fortran bindings (mpif.h, ``use mpi``, ``use mpi_f08``) and MPICH's
``use mpi_f08`` call ``PMPI_*`` directly, so the tracer wraps the Fortran
symbols themselves (signature/_fortran.py). The same ring is built three ways
(``use mpi``: examples/fortran/ring_halo.f90; fixed-form ``include 'mpif.h'``:
ring_halo_mpif.f; ``use mpi_f08``: ring_halo_f08.f90) with each MPI's own
``mpif90`` and traced with ``trace_run`` as a user would, without SIGEX_MPICC or a
launcher: sigex finds the program's MPI, its ``mpicc`` and its launcher. Every
variant must give the C twin's events (examples/c/ring_halo.c built with that
MPI's ``mpicc``), each call recorded once. The PyPI MPICH has no Fortran
bindings; Debian's come with `apt-get install gfortran libopenmpi-dev libmpich-dev`.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES

from signature import _fortran, load_trace, trace_run
from signature._mpi import mpicc_library
from signature.trace import OP_CODE

#: The MPIs with Fortran bindings: (Fortran wrapper, C wrapper, apt package).
MPIS = {
    "openmpi": ("mpif90.openmpi", "mpicc.openmpi", "libopenmpi-dev"),
    "debian-mpich": ("mpif90.mpich", "mpicc.mpich", "libmpich-dev"),
}
VARIANTS = {"use-mpi": "ring_halo.f90", "mpif.h": "ring_halo_mpif.f",
            "mpi_f08": "ring_halo_f08.f90"}
P, N, ITERS = 3, 48, 10
COLUMNS = ("op", "peer", "tag", "bytes", "recv_bytes", "comm", "aux", "root", "req")


def _expected_ops():
    ops = ["Init"]
    for i in range(ITERS):
        ops += ["Irecv", "Irecv", "Isend", "Isend", "Waitall"]
        if i % 5 == 4:
            ops.append("Allreduce")
    return ops + ["Barrier", "Finalize"]


@pytest.fixture
def clean_env(monkeypatch, tracer_cache):
    """No overrides: sigex finds the program's MPI itself; the tracer is built in the
    session's own cache (once per MPI), not the user's."""
    for var in ("SIGEX_MPICC", "SIGEX_MPIEXEC"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SIGEX_CACHE_DIR", str(tracer_cache))


def _tools(name):
    fortran, c, package = MPIS[name]
    missing = [t for t in (fortran, c) if not shutil.which(t)]
    if missing:
        pytest.skip(f"{name}: {' and '.join(missing)} not installed "
                    f"(Debian: apt-get install gfortran {package})")
    return shutil.which(fortran), shutil.which(c)


def _traced(exe, out):
    res = trace_run([str(exe), str(N), str(ITERS)], P, out)
    assert res.ok, f"{exe.name}: {res.trace.meta.get('incomplete_reason')}"
    return load_trace(res.path)


def _completions(trace, rank):
    c = trace.completions
    rows = c["rank"] == rank
    return {k: c[k][rows] for k in ("seq", "req", "peer", "tag", "bytes")}


def _trace_twins(tmp_path, stem, c_src, f_src, c, fortran, nprocs, c_flags=("-w",)):
    """Build a C program and its Fortran twin (mpif.h, and mpi_f08 with -DF08), trace each on
    ``nprocs`` ranks: ``{variant: trace}`` with variants "c", "mpif.h", "mpi_f08"."""
    (tmp_path / f"{stem}.c").write_text(c_src)
    (tmp_path / f"{stem}.F90").write_text(f_src)
    # gfortran >= 10 rejects mpif.h's untyped buffers in one file without this flag
    builds = {"c": [c, *c_flags], "mpif.h": [fortran, "-fallow-argument-mismatch", "-w"],
              "mpi_f08": [fortran, "-DF08"]}
    traces = {}
    for variant, cmd in builds.items():
        exe = tmp_path / f"{stem}_{variant.replace('.', '_')}"
        src = f"{stem}.c" if variant == "c" else f"{stem}.F90"
        subprocess.run([*cmd, "-o", str(exe), src], check=True, cwd=tmp_path)
        res = trace_run([str(exe)], nprocs, tmp_path / variant / f"P{nprocs}.h5")
        assert res.ok, f"{variant}: {res.trace.meta.get('incomplete_reason')}"
        traces[variant] = load_trace(res.path)
    return traces


def _assert_like_twin(name, traces, twin, columns=COLUMNS, comms=False):
    """Every Fortran variant has the C twin's events (``columns``), lists and, with ``comms``,
    communicators."""
    for variant, trace in traces.items():
        for r in range(twin.nprocs):
            a, b = trace.rank_events(r), twin.rank_events(r)
            for col in columns:
                np.testing.assert_array_equal(a[col], b[col],
                                              err_msg=f"{name} {variant} rank {r} column {col}")
        for k in twin.lists:
            np.testing.assert_array_equal(trace.lists[k], twin.lists[k],
                                          err_msg=f"{name} {variant} lists {k}")
        if comms:
            for f in dataclasses.fields(twin.comms):
                np.testing.assert_array_equal(getattr(trace.comms, f.name),
                                              getattr(twin.comms, f.name),
                                              err_msg=f"{name} {variant} comms {f.name}")


@pytest.mark.parametrize("name", list(MPIS))
def test_wrapped_names_are_the_ones_the_library_exports(name, tmp_path, clean_env):
    """Every binding's names are wrapped (mpif.h's four manglings and the mpi_f08 one), and
    nothing the Fortran libraries do not export."""
    _, c = _tools(name)
    library = mpicc_library(c)
    libs = _fortran.fortran_libraries(library)
    assert libs, f"{name}: no Fortran library found beside {library}"
    exported = set()
    for lib in libs:
        exported |= set(_fortran._dynamic_symbols(lib))
    wrapped = _fortran.wrapped_symbols(library)
    send = {sym for _, sym in wrapped["Send"]}
    assert {"mpi_send_", "mpi_send__", "mpi_send", "MPI_SEND"} <= send
    assert send & {"mpi_send_f08_", "mpi_send_f08ts_"}
    assert {"Init", "Waitall", "Alltoallw", "Cart_sub", "Finalize"} <= set(wrapped)
    assert {sym for syms in wrapped.values() for _, sym in syms} <= exported


def test_no_fortran_wrappers_for_an_mpi_without_fortran_bindings(tmp_path):
    """The PyPI MPICH has no Fortran libraries: no wrapper file is generated."""
    mpicc = Path(sys.prefix) / "bin" / "mpicc"
    if not mpicc.exists():
        pytest.skip("no PyPI MPICH in this environment (pip install mpich)")
    library = mpicc_library(str(mpicc))
    if _fortran.fortran_libraries(library):
        pytest.skip(f"{library} has Fortran libraries beside it")
    assert _fortran.wrappers(str(mpicc), library, tmp_path) is None


def _unmodelled(trace):
    return {k: v["calls"] for k, v in (trace.meta.get("unmodelled_calls") or {}).items()}


@pytest.mark.parametrize("name", list(MPIS))
def test_fortran_bindings_traced_like_the_c_twin(name, tmp_path, clean_env):
    """mpif.h, `use mpi` and `use mpi_f08` rings give the C ring's events, each call once, and
    count the calls the tracer does not model as the C ring does."""
    fortran, c = _tools(name)
    c_exe = tmp_path / "ring_c"
    subprocess.run([c, "-O2", "-o", str(c_exe), str(EXAMPLES / "c" / "ring_halo.c")], check=True)
    twin = _traced(c_exe, tmp_path / "c" / f"P{P}.h5")
    expected = _expected_ops()
    assert [twin.op_name(o) for o in twin.rank_events(1)["op"]] == expected
    for variant, source in VARIANTS.items():
        exe = tmp_path / f"ring_{variant.replace('.', '_')}"
        subprocess.run([fortran, "-O2", "-o", str(exe), str(EXAMPLES / "fortran" / source)],
                       check=True, cwd=tmp_path)
        trace = _traced(exe, tmp_path / variant / f"P{P}.h5")
        assert trace.meta.get("nprocs", P) == P
        for r in range(P):
            ops = [trace.op_name(o) for o in trace.rank_events(r)["op"]]
            assert ops == expected, f"{name} {variant} rank {r}: {ops}"
            a, b = trace.rank_events(r), twin.rank_events(r)
            for col in COLUMNS:
                np.testing.assert_array_equal(a[col], b[col],
                                              err_msg=f"{name} {variant} rank {r} column {col}")
            ca, cb = _completions(trace, r), _completions(twin, r)
            for col in ca:
                np.testing.assert_array_equal(ca[col], cb[col],
                                              err_msg=f"{name} {variant} rank {r} completion {col}")
        # the calls not modelled (MPI_Comm_rank, MPI_Comm_size) are counted once, as in C
        assert _unmodelled(trace) == _unmodelled(twin) == {"MPI_Comm_rank": P, "MPI_Comm_size": P}


#: One call of most functions the Fortran wrappers model (point to point with statuses,
#: matched probes, persistent requests, Waitany, every blocking collective and a few
#: nonblocking ones, MPI_IN_PLACE, communicator creation and freeing), in C ...
CALLS_C = r"""
#include <mpi.h>
int main(int argc, char **argv) {
  int rank, size, i, flag, idx;
  int ib[64], ir[64], cnt[16], dis[16], rcnt[16], rdis[16], wc[16], wsd[16], wrd[16];
  double db[64], dr[64];
  int dims[2] = {2, 2}, periods[2] = {1, 0}, remain[2] = {0, 1};
  MPI_Status st;
  MPI_Request rq[2];
  MPI_Message msg;
  MPI_Comm half, dup, cart, row;
  MPI_Datatype wst[16], wrt[16];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (i = 0; i < 64; i++) { ib[i] = rank; db[i] = rank; }
  MPI_Sendrecv(ib, 5, MPI_INT, right, 1, ir, 5, MPI_INT, left, 1, MPI_COMM_WORLD, &st);
  MPI_Sendrecv_replace(db, 3, MPI_DOUBLE, right, 2, left, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (rank == 1) MPI_Send(ib, 7, MPI_INT, 0, 7, MPI_COMM_WORLD);
  if (rank == 0) {
    MPI_Probe(1, 7, MPI_COMM_WORLD, &st);
    MPI_Recv(ir, 7, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
  }
  if (rank == 2) MPI_Ssend(db, 2, MPI_DOUBLE, 3, 8, MPI_COMM_WORLD);
  if (rank == 3) {
    MPI_Mprobe(2, 8, MPI_COMM_WORLD, &msg, &st);
    MPI_Mrecv(dr, 2, MPI_DOUBLE, &msg, MPI_STATUS_IGNORE);
  }
  MPI_Send_init(ib, 4, MPI_INT, right, 3, MPI_COMM_WORLD, &rq[0]);
  MPI_Recv_init(ir, 4, MPI_INT, left, 3, MPI_COMM_WORLD, &rq[1]);
  for (i = 0; i < 2; i++) {
    MPI_Startall(2, rq);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
  }
  MPI_Start(&rq[1]);
  MPI_Start(&rq[0]);
  MPI_Wait(&rq[0], &st);
  MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
  MPI_Request_free(&rq[0]);
  MPI_Request_free(&rq[1]);
  MPI_Irecv(ir, 6, MPI_INT, left, 4, MPI_COMM_WORLD, &rq[0]);
  MPI_Issend(ib, 6, MPI_INT, right, 4, MPI_COMM_WORLD, &rq[1]);
  for (i = 0; i < 2; i++) MPI_Waitany(2, rq, &idx, &st);
  MPI_Test(&rq[0], &flag, &st);
  MPI_Bcast(db, 9, MPI_DOUBLE, 1, MPI_COMM_WORLD);
  MPI_Reduce(ib, ir, 3, MPI_INT, MPI_SUM, 2, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, db, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) MPI_Gather(MPI_IN_PLACE, 2, MPI_INT, ir, 2, MPI_INT, 0, MPI_COMM_WORLD);
  else MPI_Gather(ib, 2, MPI_INT, ir, 2, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Scatter(ib, 3, MPI_INT, ir, 3, MPI_INT, 3, MPI_COMM_WORLD);
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ir, 2, MPI_INT, MPI_COMM_WORLD);
  MPI_Alltoall(ib, 2, MPI_INT, ir, 2, MPI_INT, MPI_COMM_WORLD);
  for (i = 0; i < size; i++) {
    cnt[i] = i + 1; dis[i] = 8 * i; rcnt[i] = rank + 1; rdis[i] = 8 * i;
    wc[i] = 1; wsd[i] = 16 * i; wrd[i] = 16 * i;
    wst[i] = i % 2 ? MPI_DOUBLE : MPI_INT;
    wrt[i] = rank % 2 ? MPI_DOUBLE : MPI_INT;
  }
  MPI_Gatherv(ib, rank + 1, MPI_INT, ir, cnt, dis, MPI_INT, 1, MPI_COMM_WORLD);
  MPI_Allgatherv(ib, rank + 1, MPI_INT, ir, cnt, dis, MPI_INT, MPI_COMM_WORLD);
  MPI_Scatterv(ib, cnt, dis, MPI_INT, ir, rank + 1, MPI_INT, 2, MPI_COMM_WORLD);
  MPI_Alltoallv(ib, cnt, dis, MPI_INT, ir, rcnt, rdis, MPI_INT, MPI_COMM_WORLD);
  MPI_Alltoallw(db, wc, wsd, wst, dr, wc, wrd, wrt, MPI_COMM_WORLD);
  MPI_Reduce_scatter(ib, ir, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Reduce_scatter_block(ib, ir, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Scan(ib, ir, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Exscan(ib, ir, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Iallreduce(ib, ir, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[0]);
  MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
  MPI_Ibcast(db, 5, MPI_DOUBLE, 0, MPI_COMM_WORLD, &rq[0]);
  MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
  MPI_Ibarrier(MPI_COMM_WORLD, &rq[0]);
  MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  MPI_Comm_dup(half, &dup);
  MPI_Allreduce(ib, ir, 1, MPI_INT, MPI_SUM, dup);
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  MPI_Cart_sub(cart, remain, &row);
  MPI_Barrier(row);
  MPI_Comm_free(&row);
  MPI_Comm_free(&cart);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&half);
  MPI_Finalize();
  return 0;
}
"""

#: ... and in Fortran: mpif.h as written, mpi_f08 with -DF08 (same source through cpp).
CALLS_F90 = r"""
program calls
#ifdef F08
  use mpi_f08
#endif
  implicit none
#ifndef F08
  include 'mpif.h'
#endif
  integer :: rank, nprocs, right, left, i, ierr, idx
  logical :: flag
  integer :: ib(64), ir(64), cnt(16), dis(16), rcnt(16), rdis(16), wc(16), wsd(16), wrd(16)
  double precision :: db(64), dr(64)
  integer :: dims(2) = (/2, 2/)
  logical :: periods(2) = (/.true., .false./), remain(2) = (/.false., .true./)
#ifdef F08
  type(MPI_Status) :: st
  type(MPI_Request) :: rq(2)
  type(MPI_Message) :: msg
  type(MPI_Comm) :: half, dup, cart, row
  type(MPI_Datatype) :: wst(16), wrt(16)
#else
  integer :: st(MPI_STATUS_SIZE), rq(2), msg, half, dup, cart, row, wst(16), wrt(16)
#endif
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  right = modulo(rank + 1, nprocs)
  left = modulo(rank - 1, nprocs)
  ib = rank
  db = rank
  call MPI_Sendrecv(ib, 5, MPI_INTEGER, right, 1, ir, 5, MPI_INTEGER, left, 1, &
                    MPI_COMM_WORLD, st, ierr)
  call MPI_Sendrecv_replace(db, 3, MPI_DOUBLE_PRECISION, right, 2, left, MPI_ANY_TAG, MPI_COMM_WORLD, &
                            MPI_STATUS_IGNORE, ierr)
  if (rank == 1) call MPI_Send(ib, 7, MPI_INTEGER, 0, 7, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    call MPI_Probe(1, 7, MPI_COMM_WORLD, st, ierr)
    call MPI_Recv(ir, 7, MPI_INTEGER, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, st, ierr)
  end if
  if (rank == 2) call MPI_Ssend(db, 2, MPI_DOUBLE_PRECISION, 3, 8, MPI_COMM_WORLD, ierr)
  if (rank == 3) then
    call MPI_Mprobe(2, 8, MPI_COMM_WORLD, msg, st, ierr)
    call MPI_Mrecv(dr, 2, MPI_DOUBLE_PRECISION, msg, MPI_STATUS_IGNORE, ierr)
  end if
  call MPI_Send_init(ib, 4, MPI_INTEGER, right, 3, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Recv_init(ir, 4, MPI_INTEGER, left, 3, MPI_COMM_WORLD, rq(2), ierr)
  do i = 1, 2
    call MPI_Startall(2, rq, ierr)
    call MPI_Waitall(2, rq, MPI_STATUSES_IGNORE, ierr)
  end do
  call MPI_Start(rq(2), ierr)
  call MPI_Start(rq(1), ierr)
  call MPI_Wait(rq(1), st, ierr)
  call MPI_Wait(rq(2), MPI_STATUS_IGNORE, ierr)
  call MPI_Request_free(rq(1), ierr)
  call MPI_Request_free(rq(2), ierr)
  call MPI_Irecv(ir, 6, MPI_INTEGER, left, 4, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Issend(ib, 6, MPI_INTEGER, right, 4, MPI_COMM_WORLD, rq(2), ierr)
  do i = 1, 2
    call MPI_Waitany(2, rq, idx, st, ierr)
  end do
  call MPI_Test(rq(1), flag, st, ierr)
  call MPI_Bcast(db, 9, MPI_DOUBLE_PRECISION, 1, MPI_COMM_WORLD, ierr)
  call MPI_Reduce(ib, ir, 3, MPI_INTEGER, MPI_SUM, 2, MPI_COMM_WORLD, ierr)
  call MPI_Allreduce(MPI_IN_PLACE, db, 4, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    call MPI_Gather(MPI_IN_PLACE, 2, MPI_INTEGER, ir, 2, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  else
    call MPI_Gather(ib, 2, MPI_INTEGER, ir, 2, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  end if
  call MPI_Scatter(ib, 3, MPI_INTEGER, ir, 3, MPI_INTEGER, 3, MPI_COMM_WORLD, ierr)
  call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ir, 2, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call MPI_Alltoall(ib, 2, MPI_INTEGER, ir, 2, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do i = 1, nprocs
    cnt(i) = i
    dis(i) = 8 * (i - 1)
    rcnt(i) = rank + 1
    rdis(i) = 8 * (i - 1)
    wc(i) = 1
    wsd(i) = 16 * (i - 1)
    wrd(i) = 16 * (i - 1)
    if (mod(i - 1, 2) == 1) then
      wst(i) = MPI_DOUBLE_PRECISION
    else
      wst(i) = MPI_INTEGER
    end if
    if (mod(rank, 2) == 1) then
      wrt(i) = MPI_DOUBLE_PRECISION
    else
      wrt(i) = MPI_INTEGER
    end if
  end do
  call MPI_Gatherv(ib, rank + 1, MPI_INTEGER, ir, cnt, dis, MPI_INTEGER, 1, MPI_COMM_WORLD, ierr)
  call MPI_Allgatherv(ib, rank + 1, MPI_INTEGER, ir, cnt, dis, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call MPI_Scatterv(ib, cnt, dis, MPI_INTEGER, ir, rank + 1, MPI_INTEGER, 2, MPI_COMM_WORLD, ierr)
  call MPI_Alltoallv(ib, cnt, dis, MPI_INTEGER, ir, rcnt, rdis, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call MPI_Alltoallw(db, wc, wsd, wst, dr, wc, wrd, wrt, MPI_COMM_WORLD, ierr)
  call MPI_Reduce_scatter(ib, ir, cnt, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Reduce_scatter_block(ib, ir, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Scan(ib, ir, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Exscan(ib, ir, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Iallreduce(ib, ir, 3, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Wait(rq(1), MPI_STATUS_IGNORE, ierr)
  call MPI_Ibcast(db, 5, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Wait(rq(1), MPI_STATUS_IGNORE, ierr)
  call MPI_Ibarrier(MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Wait(rq(1), MPI_STATUS_IGNORE, ierr)
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, half, ierr)
  call MPI_Comm_dup(half, dup, ierr)
  call MPI_Allreduce(ib, ir, 1, MPI_INTEGER, MPI_SUM, dup, ierr)
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .false., cart, ierr)
  call MPI_Cart_sub(cart, remain, row, ierr)
  call MPI_Barrier(row, ierr)
  call MPI_Comm_free(row, ierr)
  call MPI_Comm_free(cart, ierr)
  call MPI_Comm_free(dup, ierr)
  call MPI_Comm_free(half, ierr)
  call MPI_Finalize(ierr)
end program calls
"""


@pytest.mark.parametrize("name", list(MPIS))
def test_fortran_calls_give_the_c_events(name, tmp_path, clean_env):
    """Sendrecv, Probe, Mprobe, persistent requests, Waitany, collectives with MPI_IN_PLACE,
    Alltoallw, Cart_create...: mpif.h and mpi_f08 give the C program's events, lists and comms."""
    fortran, c = _tools(name)
    traces = _trace_twins(tmp_path, "calls", CALLS_C, CALLS_F90, c, fortran, 4, c_flags=())
    twin = traces.pop("c")
    ops = {twin.op_name(o) for r in range(4) for o in twin.rank_events(r)["op"]}
    assert {"Sendrecv_replace", "Mrecv", "Startall", "Waitany", "Alltoallw", "Cart_sub",
            "Comm_free", "Ibarrier"} <= ops

    def completions(trace):  # Waitany may complete the two requests in either order
        cols = ("rank", "req", "peer", "tag", "bytes")
        return sorted(zip(*(trace.completions[k].tolist() for k in cols)))

    # blocking receives posted with MPI_ANY_SOURCE (aux bit 1) or MPI_ANY_TAG (bit 2) say so,
    # their peer the matched source
    ev0 = twin.rank_events(0)
    (recv,) = np.flatnonzero(ev0["op"] == OP_CODE["Recv"])
    assert int(ev0["aux"][recv]) == 1 and int(ev0["peer"][recv]) == 1
    for r in range(4):
        ev = twin.rank_events(r)
        (rep,) = np.flatnonzero(ev["op"] == OP_CODE["Sendrecv_replace"])
        assert int(ev["aux"][rep]) == 2 and int(ev["recv_peer"][rep]) == (r - 1) % 4
        (sr,) = np.flatnonzero(ev["op"] == OP_CODE["Sendrecv"])
        assert int(ev["aux"][sr]) == 0
    _assert_like_twin(name, traces, twin, COLUMNS + ("recv_peer",), comms=True)
    for variant, trace in traces.items():
        assert completions(trace) == completions(twin), f"{name} {variant} completions"


#: One-sided communication on two ranks (fence, lock/unlock, lock_all, post/start/complete/wait;
#: Put, Get, Accumulate, Get_accumulate, Fetch_and_op, Compare_and_swap, Rput), in C and Fortran.
RMA_C = r"""
#include <mpi.h>
int main(int argc, char **argv) {
  int rank, other, i, buf[16], src[16], res[16];
  MPI_Win win;
  MPI_Group world, peer;
  MPI_Request rq;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  other = 1 - rank; /* two ranks */
  for (i = 0; i < 16; i++) { src[i] = rank; buf[i] = 0; }
  MPI_Win_create(buf, 16 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_fence(0, win);
  MPI_Put(src, 4, MPI_INT, other, 0, 4, MPI_INT, win);
  MPI_Get(res, 2, MPI_INT, other, 4, 2, MPI_INT, win);
  MPI_Accumulate(src, 3, MPI_INT, other, 8, 3, MPI_INT, MPI_SUM, win);
  MPI_Win_fence(0, win);
  MPI_Win_lock(MPI_LOCK_SHARED, other, 0, win);
  MPI_Get_accumulate(src, 2, MPI_INT, res, 2, MPI_INT, other, 0, 2, MPI_INT, MPI_SUM, win);
  MPI_Fetch_and_op(src, res, MPI_INT, other, 1, MPI_SUM, win);
  MPI_Compare_and_swap(src, buf, res, MPI_INT, other, 2, win);
  MPI_Win_flush(other, win);
  MPI_Win_unlock(other, win);
  MPI_Win_lock_all(0, win);
  MPI_Rput(src, 1, MPI_INT, other, 3, 1, MPI_INT, win, &rq);
  MPI_Wait(&rq, MPI_STATUS_IGNORE);
  MPI_Win_flush_all(win);
  MPI_Win_unlock_all(win);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_incl(world, 1, &other, &peer);
  if (rank == 0) {
    MPI_Win_post(peer, 0, win);
    MPI_Win_wait(win);
  } else {
    MPI_Win_start(peer, 0, win);
    MPI_Put(src, 2, MPI_INT, other, 0, 2, MPI_INT, win);
    MPI_Win_complete(win);
  }
  MPI_Group_free(&peer);
  MPI_Group_free(&world);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}
"""

RMA_F90 = r"""
program rma
#ifdef F08
  use mpi_f08
#endif
  implicit none
#ifndef F08
  include 'mpif.h'
#endif
  integer :: rank, other(1), i, ierr, buf(16), src(16), res(16)
  integer(kind=MPI_ADDRESS_KIND) :: d(0:8), wsize
#ifdef F08
  type(MPI_Win) :: win
  type(MPI_Group) :: world, peer
  type(MPI_Request) :: rq
#else
  integer :: win, world, peer, rq
#endif
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  other(1) = 1 - rank
  src = rank
  buf = 0
  do i = 0, 8
    d(i) = i
  end do
  wsize = 64
  call MPI_Win_create(buf, wsize, 4, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  call MPI_Put(src, 4, MPI_INTEGER, other(1), d(0), 4, MPI_INTEGER, win, ierr)
  call MPI_Get(res, 2, MPI_INTEGER, other(1), d(4), 2, MPI_INTEGER, win, ierr)
  call MPI_Accumulate(src, 3, MPI_INTEGER, other(1), d(8), 3, MPI_INTEGER, MPI_SUM, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  call MPI_Win_lock(MPI_LOCK_SHARED, other(1), 0, win, ierr)
  call MPI_Get_accumulate(src, 2, MPI_INTEGER, res, 2, MPI_INTEGER, other(1), d(0), 2, &
                          MPI_INTEGER, MPI_SUM, win, ierr)
  call MPI_Fetch_and_op(src, res, MPI_INTEGER, other(1), d(1), MPI_SUM, win, ierr)
  call MPI_Compare_and_swap(src, buf, res, MPI_INTEGER, other(1), d(2), win, ierr)
  call MPI_Win_flush(other(1), win, ierr)
  call MPI_Win_unlock(other(1), win, ierr)
  call MPI_Win_lock_all(0, win, ierr)
  call MPI_Rput(src, 1, MPI_INTEGER, other(1), d(3), 1, MPI_INTEGER, win, rq, ierr)
  call MPI_Wait(rq, MPI_STATUS_IGNORE, ierr)
  call MPI_Win_flush_all(win, ierr)
  call MPI_Win_unlock_all(win, ierr)
  call MPI_Comm_group(MPI_COMM_WORLD, world, ierr)
  call MPI_Group_incl(world, 1, other, peer, ierr)
  if (rank == 0) then
    call MPI_Win_post(peer, 0, win, ierr)
    call MPI_Win_wait(win, ierr)
  else
    call MPI_Win_start(peer, 0, win, ierr)
    call MPI_Put(src, 2, MPI_INTEGER, other(1), d(0), 2, MPI_INTEGER, win, ierr)
    call MPI_Win_complete(win, ierr)
  end if
  call MPI_Group_free(peer, ierr)
  call MPI_Group_free(world, ierr)
  call MPI_Win_free(win, ierr)
  call MPI_Finalize(ierr)
end program rma
"""


@pytest.mark.parametrize("name", list(MPIS))
def test_one_sided_calls_from_fortran(name, tmp_path, clean_env):
    """Windows, their synchronisation and the RMA operations from mpif.h and mpi_f08 give the C
    program's events (target, bytes, window) and lists; the calls not modelled (groups) are
    counted as in C."""
    fortran, c = _tools(name)
    traces = _trace_twins(tmp_path, "rma", RMA_C, RMA_F90, c, fortran, 2)
    twin = traces.pop("c")
    assert {"Compare_and_swap", "Rput", "Win_post"} <= {
        twin.op_name(o) for r in range(2) for o in twin.rank_events(r)["op"]}
    _assert_like_twin(name, traces, twin)
    for variant, trace in traces.items():
        assert _unmodelled(trace) == _unmodelled(twin), f"{name} {variant}"


#: MPI-4 persistent collectives (MPICH 4; Open MPI 4.1 has only MPIX_ ones): init, Start(all),
#: Wait(all), free; in C and in Fortran (mpif.h, and mpi_f08 with -DF08).
PERSISTENT_C = r"""
#include <mpi.h>
int main(int argc, char **argv) {
  int rank, size, i, ib[16], ir[64], cnt[16], dis[16];
  double x[4] = {1, 2, 3, 4};
  MPI_Request rq[3];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (i = 0; i < size; i++) { cnt[i] = i + 1; dis[i] = 8 * i; }
  for (i = 0; i < 16; i++) ib[i] = rank;
  MPI_Allreduce_init(MPI_IN_PLACE, x, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL,
                     &rq[0]);
  MPI_Bcast_init(ib, 3, MPI_INT, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]);
  MPI_Gatherv_init(ib, rank + 1, MPI_INT, ir, cnt, dis, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL,
                   &rq[2]);
  for (i = 0; i < 3; i++) {
    MPI_Start(&rq[0]);
    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    MPI_Startall(2, &rq[1]);
    MPI_Waitall(2, &rq[1], MPI_STATUSES_IGNORE);
  }
  for (i = 0; i < 3; i++) MPI_Request_free(&rq[i]);
  MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]);
  MPI_Start(&rq[0]);
  MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
  MPI_Request_free(&rq[0]);
  MPI_Finalize();
  return 0;
}
"""

PERSISTENT_F90 = r"""
program pc
#ifdef F08
  use mpi_f08
#endif
  implicit none
#ifndef F08
  include 'mpif.h'
#endif
  integer :: rank, nprocs, i, ierr, ib(16), ir(64), cnt(16), dis(16)
  double precision :: x(4) = (/1d0, 2d0, 3d0, 4d0/)
#ifdef F08
  type(MPI_Request) :: rq(3)
#else
  integer :: rq(3)
#endif
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  do i = 1, nprocs
    cnt(i) = i
    dis(i) = 8 * (i - 1)
  end do
  ib = rank
  call MPI_Allreduce_init(MPI_IN_PLACE, x, 4, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, &
                          MPI_INFO_NULL, rq(1), ierr)
  call MPI_Bcast_init(ib, 3, MPI_INTEGER, 1, MPI_COMM_WORLD, MPI_INFO_NULL, rq(2), ierr)
  call MPI_Gatherv_init(ib, rank + 1, MPI_INTEGER, ir, cnt, dis, MPI_INTEGER, 0, MPI_COMM_WORLD, &
                        MPI_INFO_NULL, rq(3), ierr)
  do i = 1, 3
    call MPI_Start(rq(1), ierr)
    call MPI_Wait(rq(1), MPI_STATUS_IGNORE, ierr)
    call MPI_Startall(2, rq(2:3), ierr)
    call MPI_Waitall(2, rq(2:3), MPI_STATUSES_IGNORE, ierr)
  end do
  do i = 1, 3
    call MPI_Request_free(rq(i), ierr)
  end do
  call MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, rq(1), ierr)
  call MPI_Start(rq(1), ierr)
  call MPI_Wait(rq(1), MPI_STATUS_IGNORE, ierr)
  call MPI_Request_free(rq(1), ierr)
  call MPI_Finalize(ierr)
end program pc
"""


@pytest.mark.parametrize("name", list(MPIS))
def test_persistent_collectives_from_fortran(name, tmp_path, clean_env):
    """MPI_Allreduce_init, Bcast_init, Gatherv_init and Barrier_init with their Starts give the
    C program's events, per-peer lists and completions from mpif.h and from mpi_f08."""
    fortran, c = _tools(name)
    if "Allreduce_init" not in _fortran.wrapped_symbols(mpicc_library(c)):
        pytest.skip(f"{name}: its Fortran bindings have no MPI-4 persistent collectives")
    traces = _trace_twins(tmp_path, "pc", PERSISTENT_C, PERSISTENT_F90, c, fortran, 3, c_flags=())
    twin = traces.pop("c")
    assert "Allreduce_init" in {twin.op_name(o) for o in twin.rank_events(0)["op"]}
    _assert_like_twin(name, traces, twin)
    for variant, trace in traces.items():
        for r in range(3):
            ca, cb = _completions(trace, r), _completions(twin, r)
            for col in ca:
                np.testing.assert_array_equal(ca[col], cb[col],
                                              err_msg=f"{name} {variant} rank {r} completion {col}")


#: Neighbourhood collectives on a Cartesian ring and on a distributed graph, in C and Fortran.
NEIGHBOR_C = r"""
#include <mpi.h>
int main(int argc, char **argv) {
  int rank, size, i, left, right, dims[1], periods[1] = {1};
  int ib[64], ir[64], sc[2], rc[2], two[2] = {2, 2}, one[2] = {1, 1}, sd[2], rd[2];
  MPI_Aint wsd[2], wrd[2];
  MPI_Datatype wst[2], wrt[2];
  MPI_Comm ring, graph;
  MPI_Request rq;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  left = (rank + size - 1) % size;
  right = (rank + 1) % size;
  for (i = 0; i < 64; i++) ib[i] = rank;
  for (i = 0; i < 2; i++) {
    sc[i] = i + 1; rc[i] = 2 - i; sd[i] = 8 * i; rd[i] = 8 * i; wsd[i] = 32 * i; wrd[i] = 32 * i;
    wst[i] = wrt[i] = i ? MPI_INT : MPI_DOUBLE;
  }
  dims[0] = size;
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
  MPI_Neighbor_allgather(ib, 3, MPI_INT, ir, 3, MPI_INT, ring);
  MPI_Neighbor_allgatherv(ib, 2, MPI_INT, ir, two, rd, MPI_INT, ring);
  MPI_Neighbor_alltoall(ib, 2, MPI_INT, ir, 2, MPI_INT, ring);
  MPI_Neighbor_alltoallv(ib, sc, sd, MPI_INT, ir, rc, rd, MPI_INT, ring);
  MPI_Ineighbor_alltoall(ib, 1, MPI_INT, ir, 1, MPI_INT, ring, &rq);
  MPI_Wait(&rq, MPI_STATUS_IGNORE);
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, MPI_UNWEIGHTED, 1, &right,
                                 MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &graph);
  MPI_Neighbor_alltoall(ib, 4, MPI_INT, ir, 4, MPI_INT, graph);
  /* on the graph: MPICH 4.0's mpi_f08 Neighbor_alltoallw fails on a Cartesian one */
  MPI_Neighbor_alltoallw(ib, one, wsd, wst, ir, one, wrd, wrt, graph);
  MPI_Comm_free(&graph);
  MPI_Comm_free(&ring);
  MPI_Finalize();
  return 0;
}
"""

NEIGHBOR_F90 = r"""
program nb
#ifdef F08
  use mpi_f08
#endif
  implicit none
#ifndef F08
  include 'mpif.h'
#endif
  integer :: rank, nprocs, i, ierr, left(1), right(1), dims(1)
  integer :: ib(64), ir(64), sc(2), rc(2), two(2) = (/2, 2/), one(2) = (/1, 1/), sd(2), rd(2)
  integer(kind=MPI_ADDRESS_KIND) :: wsd(2), wrd(2)
  logical :: periods(1) = (/.true./)
#ifdef F08
  type(MPI_Datatype) :: wst(2), wrt(2)
  type(MPI_Comm) :: ring, graph
  type(MPI_Request) :: rq
#else
  integer :: wst(2), wrt(2), ring, graph, rq
#endif
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  left(1) = modulo(rank - 1, nprocs)
  right(1) = modulo(rank + 1, nprocs)
  ib = rank
  do i = 1, 2
    sc(i) = i
    rc(i) = 3 - i
    sd(i) = 8 * (i - 1)
    rd(i) = 8 * (i - 1)
    wsd(i) = 32 * (i - 1)
    wrd(i) = 32 * (i - 1)
  end do
  wst(1) = MPI_DOUBLE_PRECISION
  wst(2) = MPI_INTEGER
  wrt = wst
  dims(1) = nprocs
  call MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, .false., ring, ierr)
  call MPI_Neighbor_allgather(ib, 3, MPI_INTEGER, ir, 3, MPI_INTEGER, ring, ierr)
  call MPI_Neighbor_allgatherv(ib, 2, MPI_INTEGER, ir, two, rd, MPI_INTEGER, ring, ierr)
  call MPI_Neighbor_alltoall(ib, 2, MPI_INTEGER, ir, 2, MPI_INTEGER, ring, ierr)
  call MPI_Neighbor_alltoallv(ib, sc, sd, MPI_INTEGER, ir, rc, rd, MPI_INTEGER, ring, ierr)
  call MPI_Ineighbor_alltoall(ib, 1, MPI_INTEGER, ir, 1, MPI_INTEGER, ring, rq, ierr)
  call MPI_Wait(rq, MPI_STATUS_IGNORE, ierr)
  call MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, left, MPI_UNWEIGHTED, 1, right, &
                                      MPI_UNWEIGHTED, MPI_INFO_NULL, .false., graph, ierr)
  call MPI_Neighbor_alltoall(ib, 4, MPI_INTEGER, ir, 4, MPI_INTEGER, graph, ierr)
  call MPI_Neighbor_alltoallw(ib, one, wsd, wst, ir, one, wrd, wrt, graph, ierr)
  call MPI_Comm_free(graph, ierr)
  call MPI_Comm_free(ring, ierr)
  call MPI_Finalize(ierr)
end program nb
"""


@pytest.mark.parametrize("name", list(MPIS))
def test_neighbourhood_collectives_from_fortran(name, tmp_path, clean_env):
    """Neighbor_allgather(v), Neighbor_alltoall(v,w), Ineighbor_alltoall and
    Dist_graph_create_adjacent from mpif.h and mpi_f08 give the C program's events, per-peer
    lists (sources, destinations, bytes) and communicators."""
    fortran, c = _tools(name)
    traces = _trace_twins(tmp_path, "nb", NEIGHBOR_C, NEIGHBOR_F90, c, fortran, 3)
    twin = traces.pop("c")
    assert "Neighbor_alltoallw" in {twin.op_name(o) for o in twin.rank_events(0)["op"]}
    _assert_like_twin(name, traces, twin, comms=True)
