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
