"""The C twins of bench/validate_smpi.py do nothing under SMPI that their time-independent
traces do not show: sigex's replay of a twin's own SMPI trace gives SMPI's time.

SimGrid 3.32 writes no TI line for communicator calls, yet its MPI_Comm_split
communicates: a linear gather of (colour, key) to rank 0, then one message from rank 0
to every other member (``Comm::split`` in ``src/smpi/mpi/smpi_comm.cpp``), about 2o per
member. At P = 1024 on bench/smpi/cluster.toml that is 0.84 ms, a quarter of
pme_split's runtime, that no prediction from the traces can see: a twin run for SMPI
(``--world 1``) must not create communicators it does not use.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import needs_simgrid
from replay import Program, load, replay
from replay.simgrid import import_ti, run_program

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = load(ROOT / "bench" / "smpi" / "cluster.toml")


SPLIT_ONLY = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int P, r;
  MPI_Comm c;
  MPI_Init(&argc, &argv);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_split(MPI_COMM_WORLD, r % 4 == 3, r, &c);
  MPI_Comm_free(&c);
  if (r == 0) printf("OK\n");
  MPI_Finalize();
  return 0;
}
"""


def smpi_and_replay(exe: Path, args: list[str], P: int, tmp: Path) -> tuple[float, float]:
    """SMPI's time of ``exe`` at P on the bench's cluster, and sigex's replay of that run's
    own TI trace on the same machine."""
    sim, out = run_program(exe, args, CLUSTER, P, trace_ti=tmp / "ti")
    assert "OK" in out, out
    trace = import_ti(tmp / "ti" / "ti.txt", clock=CLUSTER)
    return sim, replay(Program.from_trace(trace), CLUSTER).runtime


@needs_simgrid
def test_smpi_comm_split_takes_time_its_trace_does_not_show(tmp_path):
    """Why the twins avoid MPI_Comm_split under SMPI: it costs about 2o per member (linear
    gather to rank 0, then one message per member), and the TI trace records none of it."""
    src = tmp_path / "split.c"
    src.write_text(SPLIT_ONLY)
    exe = tmp_path / "split"
    subprocess.run(["smpicc", "-O2", "-o", str(exe), str(src)], check=True, capture_output=True, text=True)
    P = 64
    sim, ours = smpi_and_replay(exe, [], P, tmp_path)
    o = CLUSTER.network.o
    assert ours == 0.0
    # P - 1 receive overheads at rank 0, then P - 1 send overheads: at least 2o(P - 1)
    assert 2 * o * (P - 1) <= sim <= 2 * o * (P - 1) + 20 * (CLUSTER.network.L + 2 * o)


@needs_simgrid
@pytest.mark.parametrize("P", [16, 64])
def test_pme_split_world_twin_is_what_its_trace_records(tmp_path, P):
    """pme_split --world 1 (the SMPI twin) creates no communicator: SMPI's time equals sigex's
    replay of the run's own trace. A small workload makes any untraced work stand out (the
    split would add about 55 us to some 150 us at P = 64)."""
    exe = tmp_path / "pme_split"
    subprocess.run(["smpicc", "-O2", "-o", str(exe), str(ROOT / "bench" / "c" / "pme_split.c"), "-lm"],
                   check=True, capture_output=True, text=True)
    args = ["--n", "3072", "--grid", "16", "--halo", "20", "--steps", "4", "--energy", "2", "--world", "1"]
    sim, ours = smpi_and_replay(exe, args, P, tmp_path)
    assert ours == pytest.approx(sim, rel=0.005)


@needs_simgrid
def test_a_loop_of_owners_that_compute_in_turn_is_predicted_from_small_runs(tmp_path):
    """kpoint_owner: item k is computed by rank k mod P right before it broadcasts it (the
    root takes each rank in turn), one rank busy at a time: a loop that does not scale.
    From SMPI runs at P = 4, 8, 16 sigex predicts P = 64, where there are more ranks than
    items per turn, within 5% of SMPI's own time (each rank's mean over its turns spread
    the owner's work and predicted a small fraction of it; before rotations were read the
    loop was refused)."""
    from sigex.pipeline import load_models, predict
    exe = tmp_path / "kpoint_owner"
    subprocess.run(["smpicc", "-O2", "-o", str(exe), str(ROOT / "bench" / "c" / "kpoint_owner.c"), "-lm"],
                   check=True, capture_output=True, text=True)
    args = ["--n", "96", "--work", "400000", "--eig", "64", "--iters", "2"]
    sig = tmp_path / "signature"
    sig.mkdir()
    for P in (4, 8, 16):
        _, out = run_program(exe, args, CLUSTER, P, trace_ti=tmp_path / f"ti{P}")
        assert "OK" in out, out
        import_ti(tmp_path / f"ti{P}" / "ti.txt", clock=CLUSTER, app="kpoint_owner",
                  workload=("n", "96")).to_hdf5(sig / f"P{P}.h5")
    truth, out = run_program(exe, args, CLUSTER, 64)
    assert "OK" in out, out
    pred = predict(load_models(sig), 64, CLUSTER, full=True)
    assert not pred.refused, pred.refused
    assert pred.runtime == pytest.approx(truth, rel=0.05), (pred.runtime, truth)
