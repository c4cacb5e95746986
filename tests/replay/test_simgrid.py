"""SimGrid interop: TI export/import round trips and SMPI's replay on a matching platform."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from conftest import TRACES
from replay.machine import LogGP, Machine
from replay.simgrid import HOST_SPEED, export_ti, import_ti, platform_xml, replay_smpi
from signature import load_trace
from signature.errors import TraceFormatError
from signature.trace import OP_CODE

needs_simgrid = pytest.mark.skipif(shutil.which("smpirun") is None,
                                   reason="SimGrid not installed: apt-get install libsimgrid-dev")

PINGPONG = {0: ["0 init", "0 compute 1e6", "0 send 1 0 1000 6", "0 recv 1 0 1000 6", "0 finalize"],
            1: ["1 init", "1 recv 0 0 1000 6", "1 send 0 0 1000 6", "1 finalize"]}


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
