"""The tracer under every MPI it may meet: MPI-3.1 and MPI-4 libraries, found from the
program itself (no SIGEX_MPICC, no --mpiexec), newly wrapped calls, unmodelled calls named.

Each MPI runs where its compiler wrapper exists: the PyPI MPICH of the test environment
always, Debian's Open MPI 4.1 (``mpicc.openmpi``, an MPI-3.1 library) and Debian's
MPICH (``mpicc.mpich``) where installed (`apt-get install libopenmpi-dev libmpich-dev`,
as the README's test command does).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, needs_mpi

from signature import TracerError, load_trace, trace_run, unmodelled_calls, unmodelled_notes
from signature import _mpi as mpis
from signature.capture import _loader_failure
from signature.trace import LIST_RECV, LIST_SEND, OP_CODE

PROGRAMS = Path(__file__).with_name("programs")


def _venv_mpicc():
    cand = Path(sys.prefix) / "bin" / "mpicc"
    return str(cand) if cand.exists() else shutil.which("mpicc")


MPIS = {
    "pypi-mpich": (_venv_mpicc(), "mpich"),
    "openmpi": (shutil.which("mpicc.openmpi"), "openmpi"),
    "debian-mpich": (shutil.which("mpicc.mpich"), "mpich"),
}


def _mpi(name):
    mpicc, kind = MPIS[name]
    if not mpicc:
        pytest.skip(f"{name}: no compiler wrapper here (Debian: apt-get install "
                    f"{'libopenmpi-dev' if kind == 'openmpi' else 'libmpich-dev'})")
    return mpicc, kind


@pytest.fixture
def clean_env(monkeypatch, tracer_cache):
    """No overrides: sigex must find the program's MPI itself; the tracer is built in the
    session's own cache (once per MPI: the cache is keyed by the mpicc), not the user's."""
    for var in ("SIGEX_MPICC", "SIGEX_MPIEXEC"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SIGEX_CACHE_DIR", str(tracer_cache))


def _build(mpicc, src, exe):
    subprocess.run([mpicc, "-O1", "-o", str(exe), str(src), "-lm"], check=True)
    return exe


def _list(trace, rank, seq, kind):
    ls = trace.lists
    row = np.flatnonzero((ls["rank"] == rank) & (ls["seq"] == seq) & (ls["kind"] == kind))
    assert len(row) == 1, f"rank {rank} seq {seq}: {len(row)} lists of kind {kind}"
    s, n = int(ls["start"][row[0]]), int(ls["length"][row[0]])
    return ls["values"][s:s + n].tolist()


@needs_mpi
@pytest.mark.parametrize("name", list(MPIS))
def test_program_mpi_is_found_from_the_binary(name, tmp_path, clean_env):
    """ldd of the program gives its libmpi; the mpicc and launcher found beside it link the same one."""
    mpicc, kind = _mpi(name)
    exe = _build(mpicc, EXAMPLES / "c" / "ring_halo.c", tmp_path / "ring")
    lib = mpis.program_library([str(exe)])
    assert lib is not None and lib == mpis.mpicc_library(mpicc)
    assert mpis.library_kind(lib) == kind
    inst = mpis.find_install(lib)
    assert inst.mpicc is not None and mpis.mpicc_library(inst.mpicc) == lib
    assert inst.mpiexec is not None
    assert mpis.launcher_flavour(inst.mpiexec) == {"openmpi": "openmpi", "mpich": "hydra"}[kind]


@needs_mpi
def test_python_program_mpi_is_the_one_its_mpi4py_loads():
    """For `python app.py` the library is the one the interpreter's mpi4py maps."""
    lib = mpis.program_library([sys.executable, "app.py"])
    assert lib is not None and lib.name.startswith(("libmpi", "libmpich"))
    import mpi4py
    assert Path(mpi4py.__file__).exists()


@needs_mpi
@pytest.mark.parametrize("name", list(MPIS))
def test_alltoallw_bytes_per_peer_and_unmodelled_calls(name, tmp_path, clean_env):
    """Alltoallw records counts x size(type) per peer; MPI-IO calls are counted and named."""
    mpicc, _ = _mpi(name)
    exe = _build(mpicc, PROGRAMS / "alltoallw_io.c", tmp_path / "a2aw")
    P = 4
    res = trace_run([str(exe), str(tmp_path / "out.bin")], P, tmp_path / "t" / "P4.h5")
    assert res.ok, res.trace.meta.get("incomplete_reason")
    t = load_trace(res.path)

    def count_to(a, b):
        return a + b + 1 if b % 2 == 0 else b + 1

    for r in range(P):
        ev = t.rank_events(r)
        idx = np.flatnonzero(ev["op"] == OP_CODE["Alltoallw"])
        assert len(idx) == 1
        seq = int(ev["seq"][idx[0]])
        sent = [count_to(r, i) * (4 if i % 2 == 0 else 8) for i in range(P)]
        recv = [count_to(i, r) * (4 if r % 2 == 0 else 8) for i in range(P)]
        assert _list(t, r, seq, LIST_SEND) == sent
        assert _list(t, r, seq, LIST_RECV) == recv
        assert int(ev["bytes"][idx[0]]) == sum(sent) and int(ev["recv_bytes"][idx[0]]) == sum(recv)
    calls = {c.name: c for c in unmodelled_calls(t.meta)}
    write = calls.get("MPI_File_write_at_all") or calls["MPI_File_write_at_all_c"]
    assert write.calls == 2 * P and write.ranks == P and not write.local
    assert calls["MPI_File_open"].calls == P and calls["MPI_Comm_rank"].local
    assert calls["MPI_Reduce_local"].local and calls["MPI_Alloc_mem"].local
    notes = unmodelled_notes(t.meta, t.runtime)
    assert any(n.startswith(f"{write.name} called {2 * P} times on {P} rank(s): not modelled")
               for n in notes)
    assert not any("MPI_Comm_rank" in n or "Reduce_local" in n for n in notes)


@needs_mpi
def test_mpi3_library_gets_no_large_count_wrappers(tmp_path, clean_env):
    """Built against Open MPI 4.1 (MPI-3.1), the tracer defines no _c entry point and loads."""
    mpicc, _ = _mpi("openmpi")
    from signature import tracer_library
    lib = tracer_library(mpicc=mpicc)
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                         text=True, check=True).stdout
    names = {ln.split()[-1] for ln in out.splitlines()}
    assert "MPI_Send" in names and "MPI_Alltoallw" in names
    assert not any(n.startswith("MPI_") and n.endswith("_c") for n in names)
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True,
                               text=True, check=True).stdout
    assert "PMPI_Type_size_c" not in undefined and "PMPI_Isendrecv" not in undefined


@needs_mpi
def test_tracer_of_another_mpi_is_refused_before_the_run(tmp_path, clean_env, monkeypatch):
    """SIGEX_MPICC of MPICH for an Open MPI program: named, with the fix, and nothing written."""
    mpicc, _ = _mpi("openmpi")
    exe = _build(mpicc, EXAMPLES / "c" / "ring_halo.c", tmp_path / "ring")
    monkeypatch.setenv("SIGEX_MPICC", MPIS["pypi-mpich"][0])
    out = tmp_path / "t" / "P2.h5"
    with pytest.raises(TracerError, match=r"runs on Open MPI .* belongs to MPICH .*Use SIGEX_MPICC="):
        trace_run([str(exe), "16", "2"], 2, out)
    assert not out.exists()


def test_loader_failure_is_recognised():
    """A loader message about the tracer library is picked out of the run's stderr."""
    lib = Path("/cache/libsigex_trace.so")
    lines = ["hello\n", "lmp: symbol lookup error: /cache/libsigex_trace.so: undefined symbol: "
             "PMPI_Type_size_c\n"]
    assert "undefined symbol: PMPI_Type_size_c" in _loader_failure(lines, lib)
    assert _loader_failure(["lmp: symbol lookup error: libfoo.so: undefined symbol: x\n"], lib) is None


@needs_mpi
def test_tracer_settings_reach_the_ranks_through_the_launcher(monkeypatch, tmp_path):
    """SIGEX_CPU_SAMPLE_* and SIGEX_NO_PERF set by the user are passed with the launcher's
    own option (as LD_PRELOAD is), so ranks on other hosts sample as asked."""
    import signature.capture as capture

    seen = []

    def launcher_run(argv, env, timeout, stdout):
        seen.append(list(argv))
        raise OSError("not started: the test only reads the command line")

    monkeypatch.setattr(capture, "_run_teeing_stderr", launcher_run)
    monkeypatch.setenv("SIGEX_CPU_SAMPLE_MIN_US", "0")
    monkeypatch.setenv("SIGEX_NO_PERF", "1")
    monkeypatch.delenv("SIGEX_CPU_SAMPLE_CHAIN_US", raising=False)
    with pytest.raises(TracerError, match="cannot start"):
        trace_run([sys.executable, "-c", "pass"], 2, tmp_path / "P2.h5")
    argv = seen[0]
    flavour = mpis.launcher_flavour(argv[0])
    pairs = {"SIGEX_CPU_SAMPLE_MIN_US": "0", "SIGEX_NO_PERF": "1"}
    if flavour == "hydra":
        got = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "-genv"}
    else:
        assert flavour == "openmpi", flavour
        got = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-x")
    assert {k: got.get(k) for k in pairs} == pairs
    assert "SIGEX_CPU_SAMPLE_CHAIN_US" not in got


@pytest.mark.skipif(not shutil.which("lmp") or not os.path.exists(
    "/usr/share/lammps/examples/melt/in.melt"), reason="no LAMMPS here (apt-get install lammps "
                    "lammps-examples)")
def test_lammps_melt_traced_end_to_end(tmp_path, clean_env):
    """Debian's LAMMPS (Open MPI 4.1) traces unchanged at P=2: halo exchange, reductions, no
    communication left unmodelled."""
    deck = Path("/usr/share/lammps/examples/melt/in.melt").read_text().replace("run\t\t250", "run 40")
    (tmp_path / "in.melt").write_text(deck)
    res = trace_run(["lmp", "-in", str(tmp_path / "in.melt"), "-log", "none"], 2,
                    tmp_path / "t" / "P2.h5", stdout=subprocess.DEVNULL)
    assert res.ok, res.trace.meta.get("incomplete_reason")
    t = load_trace(res.path)
    assert "Open MPI" in t.meta["mpi_library"]
    names = {t.op_name(o) for o in np.unique(t.events["op"])}
    assert {"Send", "Irecv", "Wait", "Allreduce", "Cart_create"} <= names
    assert unmodelled_notes(t.meta) == []
    assert t.n_events > 500


@pytest.mark.skipif(not shutil.which("lmp") or not os.path.exists(
    "/usr/share/lammps/examples/melt/in.melt"), reason="no LAMMPS here (apt-get install lammps "
                    "lammps-examples)")
def test_lammps_melt_signature_counts_what_lammps_counts(tmp_path):
    """Debian's LAMMPS at P=4 (200 steps, neighbour lists rebuilt every 20, thermo output
    every 50): the signature's loop iterations are LAMMPS's steps and its rebuild phases
    (the only ones that exchange atoms, with a Sendrecv of the counts per swap) its
    neighbour-list builds, as LAMMPS's own log reports them; the time in repeated phases
    is the loop time LAMMPS measures itself (its set-up share varies with the machine's
    load) and Eq. 4 holds."""
    import re
    from signature import extract
    deck = Path("/usr/share/lammps/examples/melt/in.melt").read_text().replace("run\t\t250", "run 200")
    (tmp_path / "in.melt").write_text(deck)
    with open(tmp_path / "out.txt", "w") as out:
        res = trace_run(["lmp", "-in", str(tmp_path / "in.melt"), "-log", "none"], 4,
                        tmp_path / "t" / "P4.h5", stdout=out)
    assert res.ok, res.trace.meta.get("incomplete_reason")
    text = (tmp_path / "out.txt").read_text()
    loop = re.search(r"Loop time of (\S+) on \d+ procs for (\d+) steps", text)
    loop_time, steps = float(loop.group(1)), int(loop.group(2))
    builds = int(re.search(r"Neighbor list builds = (\d+)", text).group(1))
    sig = extract(load_trace(res.path))
    assert sum(p.weight for p in sig.loop_phases) == steps == 200
    assert sum(p.weight for p in sig.loop_phases if "Sendrecv" in p.ops) == builds == 10
    assert abs(sig.coverage - loop_time / sig.runtime) < 0.05, (loop_time, sig.table())
    assert sig.coverage > 0.5 and sig.pet_error < 0.05


PERSISTENT = """
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    s, r = np.ones(4), np.empty(4)
    red = comm.Allreduce_init(s, r)
    buf = np.arange(6, dtype=np.int32)
    bc = comm.Bcast_init(buf, root=1)
    for _ in range(3):
        red.Start()
        red.Wait()
        MPI.Prequest.Startall([bc])
        bc.Wait()
    assert r[0] == comm.size
    red.Free()
    bc.Free()
"""


@needs_mpi
def test_persistent_collectives_replay_as_one_instance_per_start(run_traced):
    """Allreduce_init/Bcast_init are recorded with their sizes and root; every Start is one
    collective instance of the nonblocking form in the replay."""
    import mpi4py.MPI as MPI
    if MPI.Get_version() < (4, 0):
        pytest.skip("persistent collectives need an MPI-4 library")
    from replay import Program, load, replay
    from replay.program import COLLECTIVE_NAMES

    t = load_trace(run_traced(PERSISTENT, 3).path)
    ev = t.rank_events(0)
    init = np.flatnonzero(ev["op"] == OP_CODE["Allreduce_init"])
    binit = np.flatnonzero(ev["op"] == OP_CODE["Bcast_init"])
    assert len(init) == 1 and int(ev["bytes"][init[0]]) == 32
    assert len(binit) == 1 and int(ev["root"][binit[0]]) == 1 and int(ev["bytes"][binit[0]]) == 24
    starts = np.flatnonzero(ev["op"] == OP_CODE["Start"])
    assert len(starts) == 3 and set(ev["req"][starts].tolist()) == {int(ev["req"][init[0]])}
    program = Program.from_trace(t)
    ops = [COLLECTIVE_NAMES[c] for c in program.coll_op]
    assert ops.count("Allreduce") == 3 and ops.count("Bcast") == 3
    bc = [i for i, o in enumerate(ops) if o == "Bcast"]
    assert all(int(program.coll_root[i]) == 1 and int(program.coll_bytes[i]) == 24 for i in bc)
    assert np.isfinite(replay(program, load("cluster-a")).runtime)


@needs_mpi
@pytest.mark.parametrize("name", list(MPIS))
def test_neighbourhood_collectives_record_their_topology_and_replay(name, tmp_path, clean_env):
    """Neighbor_alltoall on a non-periodic grid, Neighbor_allgatherv and Ineighbor_alltoallv on
    a distributed-graph ring: sources, destinations and bytes per neighbour are recorded, and
    the replay sends exactly those messages."""
    from replay import Program, load, replay
    from signature.trace import LIST_DESTS, LIST_SOURCES, PEER_NULL

    mpicc, _ = _mpi(name)
    exe = _build(mpicc, PROGRAMS / "neighbors.c", tmp_path / "nbr")
    P = 4
    res = trace_run([str(exe)], P, tmp_path / "t" / "P4.h5")
    assert res.ok, res.trace.meta.get("incomplete_reason")
    t = load_trace(res.path)
    assert unmodelled_notes(t.meta) == []
    edges = 0
    for r in range(P):
        ev = t.rank_events(r)
        i, j = divmod(r, 2)  # 2 x 2 grid, row-major
        grid = [2 * (i - 1) + j if i else PEER_NULL, 2 * (i + 1) + j if i < 1 else PEER_NULL,
                2 * i + j - 1 if j else PEER_NULL, 2 * i + j + 1 if j < 1 else PEER_NULL]
        a2a = np.flatnonzero(ev["op"] == OP_CODE["Neighbor_alltoall"])
        assert len(a2a) == 2
        seq = int(ev["seq"][a2a[0]])
        assert _list(t, r, seq, LIST_SOURCES) == grid and _list(t, r, seq, LIST_DESTS) == grid
        assert _list(t, r, seq, LIST_SEND) == [12 if g >= 0 else 0 for g in grid]
        ring_src, ring_dst = [(r - 1) % P, (r + 1) % P], [(r + 1) % P, (r - 1) % P]
        agv = np.flatnonzero(ev["op"] == OP_CODE["Neighbor_allgatherv"])
        seq = int(ev["seq"][agv[0]])
        assert _list(t, r, seq, LIST_SOURCES) == ring_src and _list(t, r, seq, LIST_DESTS) == ring_dst
        assert _list(t, r, seq, LIST_SEND) == [16, 16]
        assert _list(t, r, seq, LIST_RECV) == [16, 16]
        ia = np.flatnonzero(ev["op"] == OP_CODE["Ineighbor_alltoallv"])
        seq = int(ev["seq"][ia[0]])
        assert _list(t, r, seq, LIST_SEND) == [4 * (r + 1), 4 * (r + 2)]
        assert int(ev["req"][ia[0]]) >= 0
        edges += sum(g >= 0 for g in grid)
    program = Program.from_trace(t)
    from replay.program import COLLECTIVE_NAMES
    nbr = np.flatnonzero(program.coll_op == COLLECTIVE_NAMES.index("Neighbor"))
    per_instance = sorted(program.neighbor_patterns[int(program.coll_root[k])].n_messages
                          for k in nbr)
    assert per_instance == sorted([edges] * 2 + [2 * P] * 4)
    assert np.isfinite(replay(program, load("cluster-a")).runtime)
    assert np.isfinite(replay(program, load("cluster-a"), collectives="closed-form").runtime)


@needs_mpi
@pytest.mark.parametrize("name", list(MPIS))
def test_one_sided_calls_are_recorded_and_replayed(name, tmp_path, clean_env):
    """Put/Get/Accumulate/Rput/Fetch_and_op/Compare_and_swap record target and bytes, window
    calls their communicator; the replay turns each transfer into one message charged to the
    origin and each fence, create and free into a barrier."""
    from replay import Program, load, replay
    from replay.program import COLLECTIVE_NAMES
    from signature.trace import LIST_DESTS

    mpicc, kind = _mpi(name)
    exe = _build(mpicc, PROGRAMS / "onesided.c", tmp_path / "rma")
    P, iters = 4, 3
    # Debian's Open MPI 4.1 segfaults in its default osc/rdma component on the passive-target
    # epoch, untraced as well (seen here); its shared-memory component runs the program
    args = ["--mca", "osc", "sm"] if kind == "openmpi" else []
    res = trace_run([str(exe), str(iters)], P, tmp_path / "t" / "P4.h5", mpiexec_args=args)
    assert res.ok, res.trace.meta.get("incomplete_reason")
    t = load_trace(res.path)
    assert unmodelled_notes(t.meta) == []
    transfers = 0
    for r in range(P):
        ev = t.rank_events(r)
        names = [t.op_name(o) for o in ev["op"]]
        assert names.count("Win_fence") == iters + 1 and names.count("Win_create") == 1
        for op, peer, nbytes, nrecv in (("Put", (r + 1) % P, 32, 0), ("Get", (r - 1) % P, 0, 16),
                                        ("Accumulate", 0, 12, 0)):
            i = np.flatnonzero(ev["op"] == OP_CODE[op])
            assert len(i) >= iters
            assert (ev["peer"][i[:iters]] == peer).all() and (ev["bytes"][i[:iters]] == nbytes).all()
            assert (ev["recv_bytes"][i[:iters]] == nrecv).all() and (ev["comm"][i] == 0).all()
        rput = np.flatnonzero(ev["op"] == OP_CODE["Rput"])
        assert len(rput) == 1 and ev["bytes"][rput[0]] == 40 and ev["req"][rput[0]] >= 0
        fop = np.flatnonzero(ev["op"] == OP_CODE["Fetch_and_op"])
        assert ev["bytes"][fop[0]] == 8 and ev["recv_bytes"][fop[0]] == 8
        lock = np.flatnonzero(ev["op"] == OP_CODE["Win_lock"])
        assert ev["peer"][lock].tolist() == [(r + 1) % P, 0]
        pscw = "Win_post" if r % 2 == 0 else "Win_start"
        i = np.flatnonzero(ev["op"] == OP_CODE[pscw])
        assert _list(t, r, int(ev["seq"][i[0]]), LIST_DESTS) == [r ^ 1]
        transfers += 3 * iters + 3 + (r % 2)
    program = Program.from_trace(t)
    assert len(program.msg_src) == transfers and (program.msg_recv_event < 0).all()
    barriers = np.sum(program.coll_op == COLLECTIVE_NAMES.index("Barrier"))
    assert barriers == (iters + 1) + 2 + 1  # fences, create and free, one MPI_Barrier
    assert np.isfinite(replay(program, load("cluster-a")).runtime)


@needs_mpi
def test_program_that_never_starts_mpi_is_named_not_blamed_on_the_tracer(tmp_path):
    """A program that never calls MPI_Init (or dies before it) gets an error saying so, naming
    the trace and the launcher to try by hand; no trace file is written."""
    out = tmp_path / "P2.h5"
    with pytest.raises(TracerError, match=r"P2.h5: no trace: \S*python\S* never called MPI_Init"):
        trace_run([sys.executable, "-c", "pass"], 2, out)
    with pytest.raises(TracerError, match=r"no trace: the run failed \(exit 3\) before any rank"):
        trace_run([sys.executable, "-c", "import sys; sys.exit(3)"], 2, out)
    assert not out.exists() and not list(tmp_path.iterdir())


@needs_mpi
def test_without_the_symbol_list_the_trace_says_calls_were_not_counted(run_traced, monkeypatch,
                                                                        tmp_path):
    """A tracer built without the library's exported symbols (no `nm`) still traces (the MPI
    version decides which entry points exist) and marks the trace as not counting calls."""
    from signature import _build
    monkeypatch.setenv("SIGEX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_build, "_exported", lambda library: frozenset())
    t = run_traced("""
        from mpi4py import MPI
        import numpy as np
        c = MPI.COMM_WORLD
        c.Allreduce(np.ones(3), np.empty(3))
    """, 2).trace
    assert t.meta["unmodelled_counted"] is False and t.meta["unmodelled_calls"] == {}
    assert (t.events["op"] == OP_CODE["Allreduce"]).sum() == 2


@needs_mpi
def test_raw_files_may_live_on_another_file_system(run_traced, monkeypatch, tmp_path):
    """SIGEX_RAW_DIR moves the ranks' raw files (here to another folder); the trace is the
    same, and --keep-raw still keeps them beside the trace."""
    raw_dir = tmp_path / "raw-elsewhere"
    raw_dir.mkdir()
    monkeypatch.setenv("SIGEX_RAW_DIR", str(raw_dir))
    res = run_traced("""
        from mpi4py import MPI
        MPI.COMM_WORLD.Barrier()
    """, 2, keep_raw=True)
    assert (res.trace.events["op"] == OP_CODE["Barrier"]).sum() == 2
    assert (res.path.parent / (res.path.name + ".raw") / "rank1.events").exists()
    assert not list(raw_dir.iterdir())
