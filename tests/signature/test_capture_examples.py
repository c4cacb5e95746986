"""Traced example programs: the events are exactly what the programs do."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from conftest import EXAMPLES, needs_mpi
from signature import load_trace, trace_run
from signature.trace import PEER_NONE

pytestmark = needs_mpi


def _split(n, parts, i):
    base, extra = divmod(n, parts)
    return i * base + min(i, extra), base + (1 if i < extra else 0)


def _names(trace, ev):
    return [trace.op_name(o) for o in ev["op"]]


def test_stencil_events_match_the_program(run_traced):
    """Per rank and iteration: one Irecv and one Isend per existing neighbour with the exact
    bytes, one Waitall, the Allreduce every 10th iteration; CPU time grows with the workload."""
    from mpi4py import MPI  # the same dims the program computes

    P, iters, k = 4, 30, 10
    runs = {}
    for n in (300, 900):
        runs[n] = run_traced(EXAMPLES / "stencil.py", P, "--n", n, "--iters", iters,
                             "--check-every", k, "--verify", name=f"stencil{n}").trace
    dims = MPI.Compute_dims(P, 2)
    for n, t in runs.items():
        cart_ids = [c for c in range(len(t.comms)) if t.comms.cartesian(c)]
        assert len(cart_ids) == 1
        assert t.comms.cartesian(cart_ids[0]) == (tuple(dims), (False, False))
        for r in range(P):
            cy, cx = divmod(r, dims[1])
            (_, ny), (_, nx) = _split(n, dims[0], cy), _split(n, dims[1], cx)
            # neighbours in the program's order: north, south, west, east
            nbrs = []
            if cy > 0:
                nbrs.append((r - dims[1], nx * 8, 0, 1))
            if cy < dims[0] - 1:
                nbrs.append((r + dims[1], nx * 8, 1, 0))
            if cx > 0:
                nbrs.append((r - 1, ny * 8, 2, 3))
            if cx < dims[1] - 1:
                nbrs.append((r + 1, ny * 8, 3, 2))
            ev = t.rank_events(r)
            names = _names(t, ev)
            assert names[:2] == ["Init", "Cart_create"]
            per_iter = len(nbrs) * 2 + 1
            pos = 2
            for i in range(iters):
                block = slice(pos, pos + per_iter)
                expect = ["Irecv"] * len(nbrs) + ["Isend"] * len(nbrs) + ["Waitall"]
                assert names[block] == expect, f"rank {r} iteration {i}"
                irecv = np.arange(pos, pos + len(nbrs))
                isend = irecv + len(nbrs)
                assert list(ev["peer"][irecv]) == [p for p, *_ in nbrs]
                assert list(ev["recv_bytes"][irecv]) == [b for _, b, *_ in nbrs]
                assert list(ev["tag"][irecv]) == [rt for *_, rt, _ in nbrs]
                assert list(ev["peer"][isend]) == [p for p, *_ in nbrs]
                assert list(ev["bytes"][isend]) == [b for _, b, *_ in nbrs]
                assert list(ev["tag"][isend]) == [st for *_, st in nbrs]
                assert ev["aux"][pos + per_iter - 1] == 2 * len(nbrs)  # Waitall completes all
                pos += per_iter
                if (i + 1) % k == 0:
                    assert names[pos] == "Allreduce" and ev["bytes"][pos] == 8
                    assert ev["root"][pos] == PEER_NONE
                    pos += 1
            assert names[pos:] == ["Allreduce", "Gatherv", "Finalize"]  # check, --verify
            assert ev["bytes"][pos] == 16
            # the Waitall completions name the same peers and sizes
            c = t.completions
            mine = c["rank"] == r
            assert np.sum(mine) == iters * 2 * len(nbrs)
            assert set(c["peer"][mine]) == {p for p, *_ in nbrs}
    # burst CPU time is present in every loop burst and grows with the workload (9x the cells)
    def loop_cpu(t):
        total = 0.0
        for r in range(P):
            ev = t.rank_events(r)
            names = _names(t, ev)
            loop = slice(names.index("Cart_create") + 1, names.index("Gatherv"))
            assert np.all(ev["t_cpu"][loop] >= 0)
            total += ev["t_cpu"][loop].sum()
        return total
    assert loop_cpu(runs[900]) > 2.0 * loop_cpu(runs[300])  # per-call overhead and a busy machine damp the 9x


def test_c_program_and_its_mpi4py_twin_give_the_same_events(run_traced, tmp_path):
    """A C MPI program built with the same mpicc is traced the same way as its mpi4py twin."""
    exe = tmp_path / "ring_halo"
    subprocess.run([shutil.which("mpicc"), "-O2", "-o", str(exe), str(EXAMPLES / "c" / "ring_halo.c"),
                    "-lm"], check=True)
    c = trace_run([str(exe), "64", "10"], 3, tmp_path / "c" / "P3.h5")
    assert c.ok
    py = run_traced(EXAMPLES / "ring_halo.py", 3, "--n", 64, "--iters", 10, name="ring")
    tc, tp = load_trace(c.path), py.trace
    assert tc.meta["app"] == "ring_halo" and tp.meta["app"] == "ring_halo"
    for r in range(3):
        a, b = tc.rank_events(r), tp.rank_events(r)
        for col in ("op", "peer", "recv_peer", "root", "tag", "bytes", "recv_bytes", "comm", "aux"):
            np.testing.assert_array_equal(a[col], b[col], err_msg=f"rank {r} column {col}")
    np.testing.assert_array_equal(tc.completions["peer"], tp.completions["peer"])
    np.testing.assert_array_equal(tc.completions["bytes"], tp.completions["bytes"])
    names = [tc.op_name(o) for o in tc.rank_events(0)["op"]]
    assert names.count("Irecv") == 20 and names.count("Allreduce") == 2 and names[-2:] == ["Barrier", "Finalize"]


# op -> (calls per iteration, calls outside the loop), from each program's docstring
@pytest.mark.parametrize("script,args,P,calls", [
    ("nbody.py", ["--n", 60, "--iters", 3], 3, {"Sendrecv": (2, 0), "Allreduce": (0, 1), "Gather": (0, 0)}),
    ("fft2d.py", ["--n", 64, "--iters", 3], 4, {"Alltoall": (2, 0), "Allreduce": (0, 1), "Gather": (0, 0)}),
    ("cg.py", ["--n", 40, "--iters", 4], 3, {"Allreduce": (2, 2), "Waitall": (1, 1)}),
])
def test_examples_loop_counts(run_traced, script, args, P, calls):
    """Each example's main loop issues the documented calls per iteration."""
    t = run_traced(EXAMPLES / script, P, *args, name=script[:-3]).trace
    iters = args[args.index("--iters") + 1]
    for r in range(P):
        names = _names(t, t.rank_events(r))
        for op, (per_iter, outside) in calls.items():
            assert names.count(op) == per_iter * iters + outside, f"{script} rank {r} {op}"


def test_sweep_pipeline_order(run_traced):
    """The sweep's blocking Recv from north and west precede its Sends south and east."""
    t = run_traced(EXAMPLES / "sweep.py", 4, "--n", 40, "--iters", 2, "--planes", 4,
                   "--kblocks", 2, name="sweep").trace
    # 2x2 grid: rank 0 only sends, rank 3 only receives
    n0 = _names(t, t.rank_events(0))
    n3 = _names(t, t.rank_events(3))
    assert n0.count("Send") == 2 * 2 * 2 and "Recv" not in n0
    assert n3.count("Recv") == 2 * 2 * 2 and "Send" not in n3
    ev1 = t.rank_events(1)  # top-right: Recv from west (0), Send south (3)
    names1 = _names(t, ev1)
    recv = [i for i, n in enumerate(names1) if n == "Recv"]
    send = [i for i, n in enumerate(names1) if n == "Send"]
    assert all(ev1["peer"][i] == 0 for i in recv) and all(ev1["peer"][i] == 3 for i in send)
    assert all(a < b for a, b in zip(recv, send))


@pytest.mark.parametrize("script,args,P", [
    ("stencil.py", ["--n", 90, "--iters", 12], 6),
    ("cg.py", ["--n", 30, "--iters", 5], 3),
    ("nbody.py", ["--n", 50, "--iters", 2], 3),
    ("fft2d.py", ["--n", 48, "--iters", 2], 4),
    ("sweep.py", ["--n", 37, "--iters", 2, "--planes", 4, "--kblocks", 2], 6),
])
def test_examples_verify_against_serial(run_traced, script, args, P, capfd):
    """With --verify every example matches its serial computation (uneven splits included)."""
    run_traced(EXAMPLES / script, P, *args, "--verify", name="verify-" + script[:-3])
    out = capfd.readouterr().out
    assert "check=OK" in out
    assert "serial" in out or "fft2" in out or script == "cg.py"
