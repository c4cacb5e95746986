"""End to end against SimGrid's SMPI as the target machine (a small bench/validate_smpi.py).

The C versions of the examples (``bench/smpi/``) run under ``smpirun`` at P = 4, 8, 16
with ``-trace-ti``; sigex models those runs and predicts P = 64, which SMPI then runs
for real on the same platform. Computation is the programs' charged flops, so the
truth is deterministic and the prediction must hold it closely.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import ROOT
from logical_model.topology import dims_create

pytestmark = pytest.mark.skipif(shutil.which("smpicc") is None or shutil.which("smpirun") is None,
                                reason="SimGrid not installed: apt-get install libsimgrid-dev")

CASES = {  # app: (arguments, 2-D Cartesian grid?, P rule)
    "stencil": (["--n", "384", "--iters", "30", "--check-every", "10"], True, None),
    "fft2d": (["--n", "256", "--iters", "3"], False, "powers_of_two"),
    "sweep": (["--n", "256", "--iters", "6", "--planes", "4", "--kblocks", "2"], True, None),
}


@pytest.mark.parametrize("app", sorted(CASES))
def test_prediction_from_smpi_runs_at_4_8_16_holds_at_64(tmp_path, app):
    from replay import load
    from replay.simgrid import import_ti, run_program
    from sigex.pipeline import load_models, predict

    args, grid, p_rule = CASES[app]
    exe = tmp_path / app
    subprocess.run(["smpicc", "-O2", "-o", str(exe), str(ROOT / "bench" / "smpi" / f"{app}.c"), "-lm"],
                   check=True, capture_output=True)
    machine = load(ROOT / "bench" / "smpi" / "cluster.toml")
    sig = tmp_path / "signature"
    sig.mkdir()
    measured = {}
    for P in (4, 8, 16):
        measured[P], out = run_program(exe, args, machine, P, trace_ti=tmp_path / f"ti{P}")
        assert "OK" in out, out
        dims = dims_create(P, 2)
        t = import_ti(tmp_path / f"ti{P}" / "ti.txt", grid=(dims, (False, False)) if grid else None,
                      clock=machine, app=app, workload=("n", args[1]))
        t.to_hdf5(sig / f"P{P}.h5")
    truth, out = run_program(exe, args, machine, 64)
    assert "OK" in out, out

    models = load_models(sig, p_rule=p_rule)
    assert models.logical.work_mode == "flops"
    at16 = predict(models, 16, machine)
    assert at16.runtime == pytest.approx(measured[16], rel=0.02)  # the traced P reproduced
    pred = predict(models, 64, machine, full=True)
    assert pred.runtime == pytest.approx(truth, rel=0.10), pred.report()
    assert pred.steady == pytest.approx(pred.full, rel=0.02)


def test_sigex_simgrid_command_platform_import_export(tmp_path, capsys):
    """`sigex simgrid platform` writes the platform SMPI then runs a program on; `import`
    makes its TI trace a signature run; `export` writes it back; bad input is named."""
    from sigex.cli import main
    from signature import extract, load_trace

    machine = str(ROOT / "bench" / "smpi" / "cluster.toml")
    plat = tmp_path / "platform.xml"
    assert main(["simgrid", "platform", "--machine", machine, "-n", "4", "-o", str(plat)]) == 0
    assert "smpi/alltoall:pair" in capsys.readouterr().out
    exe = tmp_path / "stencil"
    subprocess.run(["smpicc", "-O2", "-o", str(exe), str(ROOT / "bench" / "smpi" / "stencil.c"), "-lm"],
                   check=True, capture_output=True)
    from replay import load
    from replay.simgrid import smpi_config
    (tmp_path / "ti").mkdir()
    run = subprocess.run(["smpirun", "-np", "4", "-platform", str(plat), "-trace-ti",
                          f"--cfg=tracing/filename:{tmp_path / 'ti' / 'ti.txt'}",
                          "--cfg=smpi/simulate-computation:no", *smpi_config(load(machine)), str(exe),
                          "--n", "128", "--iters", "20"], capture_output=True, text=True)
    assert run.returncode == 0 and "OK" in run.stdout, run.stderr[-500:]
    out = tmp_path / "P4.h5"
    args = ["simgrid", "import", str(tmp_path / "ti" / "ti.txt"), "-o", str(out), "--grid", "2x2",
            "--machine", machine, "--app", "stencil", "--workload", "n=128"]
    assert main(args) == 0
    t = load_trace(out)
    assert t.work_mode == "flops" and t.meta["workload_value"] == "128" and t.comms.cartesian(1)
    assert [p.weight for p in extract(t).phases if p.kind == "loop"] == [18, 2]
    assert main(args) == 2 and "already exists" in capsys.readouterr().err  # nothing overwritten
    assert main(["simgrid", "export", str(out), "-o", str(tmp_path / "back")]) == 0
    assert (tmp_path / "back" / "ti.txt").exists()
    assert main(["simgrid", "import", "-o", str(tmp_path / "x.h5"), "--machine", machine]) == 2
    assert "needs its input" in capsys.readouterr().err
    assert main(["simgrid", "platform", "--machine", "cluster-a", "-n", "4", "-o", str(tmp_path / "p.xml")]) == 2
    assert "--flat" in capsys.readouterr().err
