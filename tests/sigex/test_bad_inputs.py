"""Every command and sub-command against every kind of bad input: one error line, the right exit
status, no traceback, no hang, nothing damaged accepted (bench/bad_inputs.py's matrix, and a
small seeded fuzz of damaged traces)."""

from __future__ import annotations

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import bad_inputs  # noqa: E402

#: the classes whose fix is on the command line: exit status 2
USAGE = ("missing input", "folder instead of file", "missing output folder", "unwritable output folder",
         "existing output without --force")
COMMANDS = ["trace", "show", "signature", "extrapolate", "ipt", "physical", "replay", "simgrid export",
            "simgrid import", "simgrid platform", "calibrate", "predict", "scaling", "compare-machines", "run"]
#: a case may take this long before it counts as a hang (the bench's limit is 60 s)
LIMIT = 120.0


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = tmp_path_factory.mktemp("bad-inputs")
    files = bad_inputs.make_workspace(ws, seed=26)
    (ws / "outs").mkdir()
    res = bad_inputs.run_case(["simgrid", "export", str(files["trace"]), "-o", str(files["ti"])], ws)
    assert res["code"] == 0, res["stderr"]
    bad_inputs.damaged_ti(files, seed=26)
    return ws, files


@pytest.mark.parametrize("command", COMMANDS)
def test_every_bad_input_gets_one_error_line(workspace, command):
    """Each bad input of the command ends in `sigex <command>: error: ...` naming the problem, exit 2
    for what the command line must fix (a missing or wrong input, an output that exists or cannot
    be written, a nonsense number) and non-zero otherwise; never a traceback or a hang, and never
    exit 0."""
    ws, files = workspace
    cases = [c for c in bad_inputs.matrix(files) if c.command == command]
    assert cases
    with bad_inputs.read_only(files["ro"]) as ro:
        for c in cases:
            c.argv = [x.replace(str(files["ro"]), str(ro)) for x in c.argv]
        bad_inputs.run_all(cases, ws, limit=LIMIT)
    for c in cases:
        r = c.result
        assert r["verdict"] == "ok", (c.kind, c.argv, r)
        assert r["first_line"].startswith(f"sigex {command}: error: "), (c.kind, r)
        if c.kind in USAGE or c.kind.startswith("number"):
            assert r["code"] == 2, (c.kind, r)


def test_damaged_traces_are_refused_or_harmless(tmp_path):
    """A seeded fuzz of 8 damaged stencil traces (bit flips, truncation, a zeroed block) through
    show, signature, extrapolate, replay and predict: each run refuses the file naming it, or
    prints exactly what the intact file gives (the damage hit bytes nothing reads)."""
    files = bad_inputs.make_workspace(tmp_path, seed=7)
    (tmp_path / "outs").mkdir()
    clean = bad_inputs.clean_outputs(files, tmp_path)
    cases = bad_inputs.fuzz_cases(files, tmp_path, 8, seed=7, clean=clean)
    bad_inputs.run_all(cases, tmp_path, limit=LIMIT)
    assert len(cases) == 40
    for c in cases:
        r = c.result
        assert r["verdict"] in ("ok", "unaffected"), (c.kind, c.argv, r)
        if r["verdict"] == "ok":
            assert "damaged sigex trace" in r["first_line"] or "not a readable HDF5 file" in r["first_line"], r


def test_the_bench_ends_with_its_json_line(capsys):
    """bench/bad_inputs.py prints one JSON object as its last line, with the goals."""
    import json

    assert bad_inputs.main(["--fuzz", "0", "--only", "show", "--quiet"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    d = json.loads(last)
    for key in ("cases", "tracebacks", "hangs", "silent_accepts", "goals"):
        assert key in d
    assert d["cases"] == 6 and d["tracebacks"] == d["hangs"] == d["silent_accepts"] == 0
