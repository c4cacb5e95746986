"""The sigex command line: trace and show, exit codes, messages, help."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import TRACES, needs_mpi
from sigex.cli import main
from signature import load_trace

SCRIPT = """
from mpi4py import MPI
import numpy as np
c = MPI.COMM_WORLD
a = np.zeros(16)
for _ in range(3):
    c.Allreduce(MPI.IN_PLACE, a)
"""


def test_help_starts_no_mpi():
    """`sigex --help` and every subcommand's help run without importing mpi4py.MPI."""
    code = ("import sys; from sigex.cli import main\n"
            "for a in (['--help'], ['trace', '--help'], ['show', '--help']):\n"
            "    try: main(a)\n"
            "    except SystemExit: pass\n"
            "assert 'mpi4py.MPI' not in sys.modules, 'help imported MPI'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "example" in out.stdout and "sigex show traces/" in out.stdout


def test_no_command_prints_help_and_fails(capsys):
    """`sigex` alone prints the help and exits 2."""
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_show_missing_file_is_one_line_exit_2(tmp_path, capsys):
    """A missing trace gives one stderr line naming it, exit 2, no traceback."""
    assert main(["show", str(tmp_path / "absent.h5")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "absent.h5: no such trace file" in err


@needs_mpi
def test_trace_then_show(tmp_path, capsys):
    """`sigex trace` writes P<n>.h5 into the output directory and `sigex show` summarises it."""
    script = tmp_path / "allred.py"
    script.write_text(SCRIPT)
    out = tmp_path / "traces"
    rc = main(["trace", "-n", "2", "-o", str(out), "--workload", "n=16", "-q", "--",
               sys.executable, str(script)])
    assert rc == 0
    assert "wrote" in capsys.readouterr().out
    path = out / "P2.h5"
    assert main(["show", str(path)]) == 0
    text = capsys.readouterr().out
    assert "workload n=16" in text and "Allreduce" in text and "complete    yes" in text
    assert main(["show", "--json", str(path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    calls = {o["op"]: o["calls"] for o in summary["ops"]}
    assert calls["Allreduce"] == 6 and summary["nprocs"] == 2
    # a second trace onto the same file is refused, and the file kept
    before = path.read_bytes()
    rc = main(["trace", "-n", "2", "-o", str(out), "-q", "--", sys.executable, str(script)])
    assert rc == 2
    assert "already exists" in capsys.readouterr().err
    assert path.read_bytes() == before


@needs_mpi
def test_failing_program_exit_1_and_incomplete_file(tmp_path, capsys):
    """A program that fails gives exit 1 and a trace marked incomplete, readable on request."""
    script = tmp_path / "bad.py"
    script.write_text(SCRIPT + "\nimport sys\nif c.rank == 1: c.Abort(5)\nc.Barrier()\n")
    rc = main(["trace", "-n", "2", "-o", str(tmp_path), "-q", "--", sys.executable, str(script)])
    assert rc == 1
    assert "marked incomplete" in capsys.readouterr().err
    assert main(["show", str(tmp_path / "P2.h5")]) == 2
    assert "--allow-incomplete" in capsys.readouterr().err
    assert main(["show", "--allow-incomplete", str(tmp_path / "P2.h5")]) == 0
    assert "MPI_Abort" in capsys.readouterr().out


def test_trace_without_command_is_explained(capsys):
    """`sigex trace -n 2` with no program says where the program goes."""
    assert main(["trace", "-n", "2"]) == 2
    assert "put the command after `--`" in capsys.readouterr().err


def test_show_bundled_trace(capsys):
    """The README's main command works on the bundled stencil trace."""
    assert main(["show", str(TRACES / "stencil" / "P16.h5")]) == 0
    out = capsys.readouterr().out
    assert "stencil" in out and "processes   16" in out and "complete    yes" in out


def test_signature_command_prints_and_saves(bundled, capsys):
    """`sigex signature` prints the phase table with coverage and Eq. 4; --save writes JSON once."""
    path = bundled("stencil/P4.h5")
    assert main(["signature", str(path)]) == 0
    out = capsys.readouterr().out
    iters = int(re.search(r"--iters (\d+)", " ".join(load_trace(path).meta["command"])).group(1))
    assert re.search(rf"loop +{iters - iters // 10} ", out) and re.search(rf"loop +{iters // 10} ", out)
    assert "coverage" in out and "Eq. 4" in out
    assert main(["signature", "--save", str(path)]) == 0
    saved = path.with_name(path.stem + ".signature.json")
    assert saved.exists() and json.loads(saved.read_text())["kind"] == "sigex-signature"
    capsys.readouterr()
    assert main(["signature", "--save", str(path)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["signature", "--save", "--force", str(path)]) == 0


def test_mpiexec_args_may_start_with_a_dash():
    """`--mpiexec-args '--oversubscribe'` is the launcher's option, not one of sigex's (argparse said
    "expected one argument"); `=` works too, repeats add up, and each value is split as a shell
    would."""
    from sigex.cli import build_parser
    from sigex.commands.trace import mpiexec_args, normalise_argv

    for argv in (["trace", "-n", "2", "--mpiexec-args", "--oversubscribe", "--", "./app", "--mpiexec-args", "x"],
                 ["trace", "-n", "2", "--mpiexec-args=--oversubscribe", "--", "./app", "--mpiexec-args", "x"]):
        opts = build_parser().parse_args(normalise_argv(argv))
        assert mpiexec_args(opts.mpiexec_args) == ["--oversubscribe"]
        assert opts.command[-3:] == ["./app", "--mpiexec-args", "x"]  # the program's own options untouched
    opts = build_parser().parse_args(normalise_argv(
        ["trace", "-n", "2", "--mpiexec-args", "-bind-to none", "--mpiexec-args", "-l", "--", "./app"]))
    assert mpiexec_args(opts.mpiexec_args) == ["-bind-to", "none", "-l"]


def test_mpiexec_args_unbalanced_quote_is_a_usage_error(tmp_path, capsys):
    """An unbalanced quote in --mpiexec-args is named, exit 2, before any run."""
    assert main(["trace", "-n", "2", "-o", str(tmp_path), "--mpiexec-args", "-env X 'a b", "--",
                 sys.executable, "-c", "pass"]) == 2
    assert "--mpiexec-args" in capsys.readouterr().err


@needs_mpi
def test_trace_passes_dashed_launcher_options(tmp_path, capsys):
    """`sigex trace --mpiexec-args '-bind-to none'` reaches mpiexec and the run is traced."""
    script = tmp_path / "allred.py"
    script.write_text(SCRIPT)
    rc = main(["trace", "-n", "2", "-o", str(tmp_path / "t"), "-q", "--mpiexec-args", "-bind-to none", "--",
               sys.executable, str(script)])
    assert rc == 0, capsys.readouterr().err
    assert load_trace(tmp_path / "t" / "P2.h5").nprocs == 2


def test_every_command_has_its_own_help_with_a_bundled_example(capsys):
    """`sigex <command> --help` (and each simgrid verb's) shows its own usage and options and ends
    with an example of that command whose files exist in the repository."""
    import shlex

    from conftest import ROOT
    from sigex.cli import build_parser
    from sigex.commands import COMMANDS

    pages = [[m.NAME] for m in COMMANDS] + [["simgrid", v] for v in ("export", "import", "platform")]
    for words in pages:
        try:
            build_parser().parse_args([*words, "--help"])
        except SystemExit as ex:
            assert ex.code == 0
        text = capsys.readouterr().out
        assert text.startswith(f"usage: sigex {' '.join(words)}"), text[:80]
        tail = text[text.rindex("\nexample"):]
        runs = [ln.strip() for ln in tail.splitlines() if ln.strip().startswith(f"sigex {words[0]}")]
        assert runs, f"{words}: no example of the command in\n{tail}"
        for tok in shlex.split(runs[0].split("#")[0].split("&&")[0]):
            if tok.split("/")[0] in ("traces", "examples", "machines", "bench") and "/" in tok:
                assert (ROOT / tok).exists(), f"{words}: example names {tok}, which does not exist"
    for verb, has, lacks in (("export", "--force", "--grid"), ("import", "--grid", "--nprocs"),
                             ("platform", "--nprocs", "--grid")):
        try:
            build_parser().parse_args(["simgrid", verb, "--help"])
        except SystemExit:
            pass
        text = capsys.readouterr().out
        assert has in text and lacks not in text, verb


def test_fewer_than_three_runs_are_refused(capsys):
    """`sigex extrapolate` (and ipt, physical) refuse two runs, as their help says: exit 2."""
    two = [str(TRACES / "stencil" / "P4.h5"), str(TRACES / "stencil" / "P8.h5")]
    for args in (["extrapolate", *two, "--target", "64", "--no-trace"], ["ipt", *two],
                 ["physical", *two, "--target", "64"]):
        assert main(args) == 2
        assert "2 signature run(s); sigex needs 3 or more P" in capsys.readouterr().err


def test_more_pieces_than_ranks_are_clamped_with_a_note(capsys):
    """--pieces 99999 on a 4-rank trace replays in 4 pieces, says so in one line, and gives the
    one-piece time."""
    trace = str(TRACES / "stencil" / "P4.h5")
    assert main(["replay", trace, "--machine", "cluster-a"]) == 0
    one = capsys.readouterr().out
    assert main(["replay", trace, "--machine", "cluster-a", "--pieces", "99999"]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "--pieces 99,999 is more than the trace's 4 ranks" in err
    assert "4 piece(s)" in out
    line = lambda text: [x for x in text.splitlines() if x.startswith("replayed time")]  # noqa: E731
    assert line(out) == line(one)


def test_debug_shows_the_traceback_and_a_bug_is_one_line(tmp_path, capsys, monkeypatch):
    """--debug and SIGEX_DEBUG=1 add the traceback to the error line; without them an unexpected
    exception (a bug) is one line that says to re-run with --debug, exit 1."""
    missing = str(tmp_path / "absent.h5")
    assert main(["--debug", "show", missing]) == 2
    assert "Traceback" in capsys.readouterr().err
    assert main(["show", missing, "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err
    monkeypatch.setenv("SIGEX_DEBUG", "1")
    assert main(["show", missing]) == 2
    assert "Traceback" in capsys.readouterr().err
    monkeypatch.delenv("SIGEX_DEBUG")
    from sigex.commands import show

    def broken(opts):
        raise ZeroDivisionError("division by zero")
    monkeypatch.setattr(show, "run", broken)
    assert main(["show", missing]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("sigex show: error: internal error, a bug in sigex (ZeroDivisionError") and "--debug" in err


def test_an_error_with_details_names_the_file_that_holds_them(tmp_path, capsys, monkeypatch):
    """A refusal with more detail than a line (every problem of every phase) that no command wrote
    beside its output goes to a file, which the one error line names."""
    from sigex.commands import show
    from signature.errors import ExtrapolationError

    def refuse(opts):
        err = ExtrapolationError("app: cannot write a logical trace, 1 phase(s) not extrapolable: phase 1: x")
        err.detail = "\n".join(f"phase 1: slot {i}: no rule" for i in range(500))
        raise err
    monkeypatch.setattr(show, "run", refuse)
    assert main(["show", "whatever.h5"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    path = re.search(r"every problem: (\S+\.txt)\)", err).group(1)
    from pathlib import Path
    assert len(Path(path).read_text().splitlines()) == 500
    Path(path).unlink()
