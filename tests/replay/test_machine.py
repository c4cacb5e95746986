"""Machine profiles: the shipped TOML files, save/load round trips, and bad profiles."""

from __future__ import annotations

import pytest

from replay import MACHINES_DIR, LogGP, Machine, MachineError, load
from signature.errors import SigexError


def test_shipped_profiles_load():
    """this-machine, cluster-a and cluster-b load by name with their documented figures."""
    assert {p.stem for p in MACHINES_DIR.glob("*.toml")} >= {"this-machine", "cluster-a", "cluster-b"}
    here = load("this-machine")
    assert here.network == LogGP(L=0.5e-6, o=0.3e-6, g=0.1e-6, G=1e-10, O=0.0)
    assert (here.speed, here.cores, here.intra) == (1.0, 2, None)
    a = load("cluster-a")
    assert (a.network.L, a.network.o, a.network.g, a.network.G) == (1.2e-6, 0.4e-6, 0.1e-6, 5e-11)
    assert (a.S, a.cores, a.speed) == (65536, 64, 1.0)
    assert a.intra is not None and a.intra.L < a.network.L
    b = load("cluster-b")
    assert (b.network.L, b.network.o, b.network.g, b.network.G) == (15e-6, 2e-6, 1e-6, 8e-10)
    assert (b.cores, b.speed) == (32, 0.8)
    assert load(MACHINES_DIR / "cluster-b.toml") == b


def test_link_and_node_of():
    """Consecutive ranks fill a node; intra-node pairs use [intra] when it exists."""
    a = load("cluster-a")
    assert a.node_of(63) == 0 and a.node_of(64) == 1
    assert a.link(True) == a.intra and a.link(False) == a.network
    here = load("this-machine")
    assert here.link(True) == here.network  # no [intra]: the network everywhere


@pytest.mark.parametrize("name", ["this-machine", "cluster-a", "cluster-b"])
def test_save_load_round_trip(tmp_path, name):
    """save() then load() gives back the same profile."""
    m = load(name)
    path = m.save(tmp_path / f"{name}.toml")
    assert load(path) == m


def test_save_refuses_to_overwrite(tmp_path):
    """An existing profile is kept unless overwrite=True."""
    m = load("cluster-a")
    path = m.save(tmp_path / "m.toml")
    with pytest.raises(FileExistsError, match="already exists; pass overwrite=True"):
        m.save(path)
    other = Machine(name="x", network=LogGP(L=1e-6, o=1e-7, g=1e-7, G=1e-9))
    other.save(path, overwrite=True)
    assert load(path).name == "x"


def write(tmp_path, text):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    return p


GOOD_NET = "[network]\nL = 1e-6\no = 1e-7\ng = 1e-7\nG = 1e-9\n"


@pytest.mark.parametrize("text,match", [
    ("name = 'x'\n", r"no \[network\] table"),
    ("[network]\nL = 1e-6\no = 1e-7\n", r"\[network\] lacks g, G"),
    (GOOD_NET + "Q = 1\n", r"unknown \[network\] keys \['Q'\]"),
    ("[network]\nL = -1e-6\no = 1e-7\ng = 1e-7\nG = 1e-9\n", "L must be a finite number >= 0"),
    ("[network]\nL = 'fast'\no = 1e-7\ng = 1e-7\nG = 1e-9\n", "L must be a finite number >= 0"),
    ("[network]\nL = true\no = 1e-7\ng = 1e-7\nG = 1e-9\n", "L must be a finite number >= 0"),
    (GOOD_NET + "S = 1.5\n", "S must be an integer number of bytes"),
    (GOOD_NET + "[compute]\nspeed = 0\n", "speed must be > 0"),
    (GOOD_NET + "[compute]\nspeeed = 2\n", r"unknown \[compute\] keys \['speeed'\]"),
    (GOOD_NET + "[node]\ncores = 0\n", "cores must be an integer >= 1"),
    (GOOD_NET + "[node]\ncores = 2.5\n", "cores must be an integer >= 1"),
    (GOOD_NET + "[intra]\nLL = 1\n", r"unknown \[intra\] keys \['LL'\]"),
    (GOOD_NET + "[intra]\nG = -1\n", r"\[intra\]: G must be a finite number >= 0"),
    (GOOD_NET + "[intar]\nL = 1\n", r"unknown keys \['intar'\]"),
    ("network = 3\n", r"no \[network\] table"),
    ("compute = 2\n" + GOOD_NET, r"\[compute\] must be a table"),
    ("[network\nL = 1", "not a readable TOML machine profile"),
])
def test_bad_profiles_are_refused(tmp_path, text, match):
    """A malformed or impossible profile raises MachineError naming the file and the key."""
    path = write(tmp_path, text)
    with pytest.raises(MachineError, match=match) as info:
        load(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, SigexError)


def test_missing_profile_lists_the_shipped_ones(tmp_path):
    """An unknown name says which profiles exist and how to measure one."""
    with pytest.raises(MachineError, match=r"no such machine file .*cluster-a.*sigex calibrate"):
        load("cluster-z")
    with pytest.raises(MachineError, match="no such machine file"):
        load(tmp_path / "nothing.toml")


def test_intra_defaults_to_the_network_values(tmp_path):
    """Keys missing from [intra] take the [network] value."""
    m = load(write(tmp_path, GOOD_NET + "[intra]\nL = 2e-7\n"))
    assert m.intra == LogGP(L=2e-7, o=1e-7, g=1e-7, G=1e-9, O=0.0)
    assert m.name == "bad" and m.S == 65536 and m.speed == 1.0 and m.cores == 1
