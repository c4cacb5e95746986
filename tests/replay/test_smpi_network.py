"""Single-feature C programs run under SMPI, then their own TI traces replayed by sigex on the
same machine (bench/smpi/cluster.toml): which network effects the replay reproduces, and
the one it does not (receive-side contention, listed under "Not modelled" in
:mod:`replay.engine`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import needs_simgrid
from replay import Program, load, replay
from replay.simgrid import import_ti, run_program

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = load(ROOT / "bench" / "smpi" / "cluster.toml")


# every rank but 0 sends argv[1] bytes to rank 0 at once; rank 0 posts every receive, then waits
INCAST = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  int P, r, n = atoi(argv[1]);
  MPI_Init(&argc, &argv);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  char *buf = calloc((size_t)n, P);
  MPI_Request q[64];
  if (r == 0) {
    for (int k = 1; k < P; k++) MPI_Irecv(buf + (size_t)n * k, n, MPI_BYTE, k, 0, MPI_COMM_WORLD, &q[k - 1]);
    MPI_Waitall(P - 1, q, MPI_STATUSES_IGNORE);
    printf("OK\n");
  } else {
    MPI_Send(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
"""


@pytest.fixture(scope="module")
def incast(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("incast")
    (tmp / "incast.c").write_text(INCAST)
    exe = tmp / "incast"
    subprocess.run(["smpicc", "-O2", "-o", str(exe), str(tmp / "incast.c")], check=True, capture_output=True,
                   text=True)
    return exe


def both(exe: Path, nbytes: int, P: int, tmp: Path) -> tuple[float, float]:
    """(SMPI's time, sigex's replay of the run's own TI trace)."""
    sim, out = run_program(exe, [str(nbytes)], CLUSTER, P, trace_ti=tmp / "ti")
    assert "OK" in out, out
    trace = import_ti(tmp / "ti" / "ti.txt", clock=CLUSTER)
    return sim, replay(Program.from_trace(trace), CLUSTER).runtime


@needs_simgrid
@pytest.mark.parametrize("nbytes", [1000, 32768])
def test_one_eager_message_takes_smpis_time(incast, tmp_path, nbytes):
    """One eager message on an idle pair: o + s*G + L + o, as SMPI times it."""
    sim, ours = both(incast, nbytes, 2, tmp_path)
    assert ours == pytest.approx(sim, rel=0.005)


@needs_simgrid
def test_small_messages_into_one_rank_take_smpis_time(incast, tmp_path):
    """Three 1000-byte messages into one rank: latency and overheads dominate, the shared
    link barely matters (the replay is 3.5% short: the bandwidth share is what it misses)."""
    sim, ours = both(incast, 1000, 4, tmp_path)
    assert ours == pytest.approx(sim, rel=0.05)
    assert ours < sim


@needs_simgrid
@pytest.mark.xfail(strict=True, reason="receive-side contention is not modelled: SMPI shares rank 0's "
                                       "link among the three messages (7.7 us), the replay lets them "
                                       "arrive together (4.4 us)")
def test_messages_into_one_rank_share_its_link(incast, tmp_path):
    """Three 32 KiB eager messages into one rank at once: SMPI's link to rank 0 carries them
    in 3 s G, the replay in s G."""
    sim, ours = both(incast, 32768, 4, tmp_path)
    assert ours == pytest.approx(sim, rel=0.05)



@needs_simgrid
def test_one_rendezvous_message_differs_from_smpi_by_the_handshake(incast, tmp_path):
    """One 1 MiB blocking Send, rendezvous on both sides. SMPI 3.32 starts the transfer once
    both sides are posted and charges no overhead to a blocking Send or its receive at that
    size: L + s G. sigex pays, by design, the handshake (request and reply, 2(L + o)) and
    both overheads: 4 us more here (57.6 us against 53.6 us)."""
    sim, ours = both(incast, 1 << 20, 2, tmp_path)
    net = CLUSTER.network
    assert sim == pytest.approx(net.L + (1 << 20) * net.G, rel=1e-4)
    assert ours == pytest.approx(sim + 2 * (net.L + net.o) + 2 * net.o, rel=1e-4)
