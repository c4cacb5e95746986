"""sigex calibrate: the LogGP fit, and a real two-rank measurement that yields a loadable profile."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import needs_mpi
from replay.calibrate import calibrate, fit_pingpong
from replay.machine import MachineError, load


def test_pingpong_fit_recovers_latency_and_bandwidth():
    """Half round trips L + 2o + s G (eager sizes only) give back L + 2o and G."""
    sizes = np.array([1, 64, 1024, 16384, 65536, 1 << 20])
    t = 3e-6 + sizes * 2e-10
    t[sizes >= 65536] *= 3  # rendezvous sizes are left out of the fit
    a, G = fit_pingpong(sizes, t, 65536)
    assert a == pytest.approx(3e-6) and G == pytest.approx(2e-10)
    with pytest.raises(MachineError, match="fewer than 2 eager"):
        fit_pingpong([1 << 20, 1 << 21], [1.0, 2.0], 65536)


@needs_mpi
def test_calibrate_measures_this_machine(tmp_path):
    """Two local ranks give a positive, loadable profile."""
    m = calibrate("here", reps=20)
    assert m.network.L > 0 and m.network.G > 0 and m.network.o >= 0 and m.S == 65536
    back = load(m.save(tmp_path / "here.toml"))
    assert back == m
