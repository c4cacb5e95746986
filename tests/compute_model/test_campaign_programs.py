"""Campaigns for installed programs: input files and prepare steps per workload, a folder and
an environment per run, errors that name the key, and a real LAMMPS campaign."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest

from compute_model import campaign
from conftest import needs_mpi
from signature import load_trace
from signature.errors import CampaignError

# Reads its deck where it runs (the run folder), prints what it got, and fails on request.
APP = """
import os, sys
from mpi4py import MPI
c = MPI.COMM_WORLD
deck = open("deck.txt").read().split()
n = int(deck[deck.index("size") + 1])
if c.rank == 0:
    print(f"deck size {n} mark {os.environ.get('SIGEX_TEST_MARK')} cwd {os.getcwd()}", flush=True)
    if os.path.exists("made.txt"):
        print("prepared", open("made.txt").read().strip(), flush=True)
if n == 13:  # every rank leaves (a rank left alone in MPI_Finalize would wait for the others)
    if c.rank == 0:
        print("ERROR: box of 13 is unlucky (deck.txt line 1)", flush=True)
    sys.exit(4)
x = 1.0
for _ in range(12):
    x = c.allreduce(x * 1.0001)
"""

BASE = """
app = "deckapp"
command = "python {campaign_dir}/app.py"
workload = "n"
original = 64
small = [16]
signature_p = [2, 3, 4]
small_p = [2, 4]
work = "n/P"
target = 64
traces = "runs"
prepare = ["echo made for {n} > made.txt"]
[files."deck.txt"]
text = "size {n}\\nsteps {steps}\\n"
[params]
steps = 5
[env]
SIGEX_TEST_MARK = "P{P}-n{n}"
"""


def write(tmp_path: Path, body: str = BASE, name: str = "app.toml") -> Path:
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def replace_key(body: str, key: str, line: str) -> str:
    """``body`` with ``key``'s line replaced by ``line``, put first (before any table)."""
    out = [ln for ln in body.splitlines() if not ln.startswith(key + " ")]
    return line + "\n" + "\n".join(out)


# ---- parsing and validation ---------------------------------------------------------
def test_files_prepare_env_are_read(tmp_path):
    """files (text, copied, replaced), prepare steps and [env] are read; the workload may be
    used only in the files; every run has its own folder beside its trace."""
    (tmp_path / "deck.in").write_text("box 10\n")
    body = BASE.replace('command = "python {campaign_dir}/app.py"', 'command = "python {campaign_dir}/app.py"')
    body += '[files."sub/copied.in"]\nfrom = "deck.in"\nreplace = { "box 10" = "box {n}" }\n'
    c = campaign.load(write(tmp_path, body))
    assert [f.name for f in c.files] == ["deck.txt", "sub/copied.in"]
    assert c.files[1].source == (tmp_path / "deck.in").resolve()
    assert c.prepare == ("echo made for {n} > made.txt",)
    assert c.uses_folders
    assert c.env_for(64, c.params, 4) == {"SIGEX_TEST_MARK": "P4-n64"}
    runs = campaign.plan(c)
    assert [(r.kind, r.P, r.workload) for r in runs] == [
        ("signature", 2, 64), ("signature", 3, 64), ("signature", 4, 64), ("small", 2, 16), ("small", 4, 16)]
    assert runs[3].folder == c.traces / "small" / "P2" and runs[3].log == c.traces / "small" / "P2.out"
    assert runs[0].command == ("python", f"{tmp_path.resolve()}/app.py")


def test_files_as_a_list_are_copied_by_name(tmp_path):
    (tmp_path / "in.deck").write_text("x\n")
    body = BASE.replace('[files."deck.txt"]\ntext = "size {n}\\nsteps {steps}\\n"\n', "")
    body = body.replace('prepare = [', 'files = ["in.deck"]\nprepare = [')
    c = campaign.load(write(tmp_path, body))
    assert [(f.name, f.source) for f in c.files] == [("in.deck", (tmp_path / "in.deck").resolve())]


@pytest.mark.parametrize("change, match", [
    ('prepare = "x {P}"', r"app.toml: prepare\[0\] uses \{P\}.*once per workload"),
    ('prepare = ["make {box}"]', r"files or prepare uses \{box\}, which \[params\] does not give"),
    ("prepare = 3", "prepare must be a list of shell commands"),
    ('files = 3', "files must be a list of paths or a table"),
    ('command = "python {campaign_dir}/app.py --n {nn}"', r"the command uses \{nn\}"),
    ('command = "python app.py \'unclosed"', "command: No closing quotation"),
    ("signature_p = [2, 3.5, 4]", "signature_p must be a list of whole numbers"),
    ("check_p = [0]", "check_p has P=0"),
    ("timeout = -1", "timeout must be a number of seconds above 0"),
    ('workload = "P"', "workload must be a name like n"),
    ("work = 5", "work must be an expression in quotes"),
])
def test_bad_keys_are_named(tmp_path, change, match):
    """Each mistaken key is refused before anything runs, naming the file and the key."""
    key = change.split("=")[0].strip()
    body = BASE.replace('[files."deck.txt"]\ntext = "size {n}\\nsteps {steps}\\n"\n', "") if key == "files" else BASE
    with pytest.raises(CampaignError, match=match) as err:
        campaign.load(write(tmp_path, replace_key(body, key, change)))
    assert str(tmp_path / "app.toml") in str(err.value)


@pytest.mark.parametrize("table, match", [
    ('[files."a.in"]\nfrom = "x"\ntext = "y"\n', r'\[files."a.in"\] needs exactly one of from'),
    ('[files."a.in"]\nsource = "x"\n', r'\[files."a.in"\]: unknown key\(s\) source; known: from, replace, text'),
    ('[files."a.in"]\ntext = "y"\nreplace = { "a" = "b" }\n', "replace applies to a copied file"),
    ('[files."/etc/a.in"]\ntext = "y"\n', "give a relative name"),
    ('[files."a.in"]\ntext = "{P}"\n', r"uses \{P\}"),
    ('[files."a.in"]\ntext = "{oops"\n', "literal braces"),
])
def test_bad_file_tables_are_named(tmp_path, table, match):
    with pytest.raises(CampaignError, match=match):
        campaign.load(write(tmp_path, BASE + table))


def test_bad_env_and_params(tmp_path):
    with pytest.raises(CampaignError, match=r"\[env\] 1BAD: give variables as NAME"):
        campaign.load(write(tmp_path, BASE + '"1BAD" = "x"\n'))
    with pytest.raises(CampaignError, match=r"\[env\] SIGEX_TEST_MARK uses \{zz\}"):
        campaign.load(write(tmp_path, BASE.replace('"P{P}-n{n}"', '"{zz}"')))
    with pytest.raises(CampaignError, match=r"\[params\] sets n, which sigex sets itself"):
        campaign.load(write(tmp_path, BASE.replace("steps = 5", "steps = 5\nn = 3")))


def test_installed_program_examples_load():
    """The bundled campaigns for installed programs parse (their programs are only needed to run)."""
    from conftest import ROOT

    melt = campaign.load(ROOT / "examples" / "lammps-melt.toml")
    assert melt.uses_folders and melt.env == {"OMP_NUM_THREADS": "1"} and melt.check_p == (32,)
    assert [campaign.emulated_p(melt, 12, P) for P in melt.small_p] == [32, 64, 128]
    fft = campaign.load(ROOT / "examples" / "fft3d.toml")
    assert not fft.uses_folders and fft.command_for(128, fft.params, 4)[0] == "/usr/bin/python3"
    assert Path(fft.command_for(128, fft.params, 4)[1]).resolve() == ROOT / "bench" / "apps" / "fft3d_loop.py"
    assert [campaign.emulated_p(fft, 64, P) for P in fft.small_p] == [32, 64, 128]
    gmx = campaign.load(ROOT / "examples" / "gromacs-water.toml")
    assert len(gmx.prepare) == 5 and "{L}" not in campaign._recipe(gmx, 2.5, gmx.small_params)["prepare"][0]
    assert [campaign.emulated_p(gmx, 2.5, P) for P in gmx.small_p] == [16, 32, 64]


def test_unknown_top_level_key_lists_the_known_ones(tmp_path):
    with pytest.raises(CampaignError, match=r"unknown key\(s\) prepare_steps; known: .*check_p.*prepare"):
        campaign.load(write(tmp_path, "prepare_steps = []\n" + BASE))


def test_emulated_p_is_where_declared_work_per_process_is_equal(tmp_path):
    """A small workload at P emulates the original workload where work(W, P') is equal."""
    c = campaign.load(write(tmp_path))
    assert campaign.emulated_p(c, 16, 2) == 8  # 64/P' = 16/2
    body = BASE.replace('work = "n/P"', 'work = "n**3/P"').replace("original = 64", "original = 24") \
               .replace("small = [16]", "small = [12]")
    c3 = campaign.load(write(tmp_path, body, "cube.toml"))
    assert [campaign.emulated_p(c3, 12, P) for P in (4, 8, 16)] == [32, 64, 128]
    squares = body.replace("signature_p = [2, 3, 4]", "signature_p = [4, 9, 16]") \
                  .replace("small_p = [2, 4]", "small_p = [4]")
    sq = campaign.load(write(tmp_path, 'p_rule = "squares"\n' + squares, "squares.toml"))
    assert campaign.emulated_p(sq, 12, 4) == 36  # 32 is no square; 36 is the nearest in work


# ---- preparing workloads --------------------------------------------------------------
def test_prepare_copies_replaces_writes_and_runs_steps_once(tmp_path):
    (tmp_path / "deck.in").write_text("box 10 steps 250\n")
    body = BASE + '[files."copied.in"]\nfrom = "deck.in"\nreplace = { "box 10" = "box {n}", "250" = "{{s}}" }\n'
    c = campaign.load(write(tmp_path, body))
    folder = campaign.prepare(c, 64, c.params)
    assert folder == c.traces / "prepared" / "n=64"
    assert (folder / "deck.txt").read_text() == "size 64\nsteps 5\n"
    assert (folder / "copied.in").read_text() == "box 64 steps {s}\n"
    assert (folder / "made.txt").read_text().strip() == "made for 64"
    stamp = (folder / ".sigex-prepared.json").stat().st_mtime_ns
    (folder / "made.txt").write_text("kept\n")
    assert campaign.prepare(c, 64, c.params) == folder  # same recipe: reused, steps not rerun
    assert (folder / "made.txt").read_text() == "kept\n"
    assert (folder / ".sigex-prepared.json").stat().st_mtime_ns == stamp
    (tmp_path / "deck.in").write_text("box 10 steps 250 # edited upstream\n")
    campaign.prepare(c, 64, c.params)  # the source changed: copied again
    assert (folder / "copied.in").read_text() == "box 64 steps {s} # edited upstream\n"
    c2 = campaign.load(write(tmp_path, body.replace("steps = 5", "steps = 6")))
    campaign.prepare(c2, 64, c2.params)  # another recipe: prepared again
    assert (folder / "deck.txt").read_text() == "size 64\nsteps 6\n"
    assert (folder / "made.txt").read_text().strip() == "made for 64"


def test_prepare_refuses_a_deck_that_changed_upstream(tmp_path):
    (tmp_path / "deck.in").write_text("box 12\n")
    c = campaign.load(write(tmp_path, BASE + '[files."c.in"]\nfrom = "deck.in"\nreplace = { "box 10" = "box {n}" }\n'))
    with pytest.raises(CampaignError, match=r"\[files.\"c.in\"\]: 'box 10' does not occur in .*deck.in"):
        campaign.prepare(c, 64, c.params)


def test_prepare_names_a_missing_source(tmp_path):
    c = campaign.load(write(tmp_path, BASE + '[files."c.in"]\nfrom = "/nonexistent/in.melt"\n'))
    with pytest.raises(CampaignError, match=r"copies /nonexistent/in.melt, which does not exist; install"):
        campaign.prepare(c, 64, c.params)


def test_a_failing_prepare_step_shows_its_last_lines(tmp_path):
    body = BASE.replace('prepare = ["echo made for {n} > made.txt"]',
                        'prepare = ["echo made", "echo grompp: fatal error in topol.top >&2; exit 7"]')
    c = campaign.load(write(tmp_path, body))
    with pytest.raises(CampaignError, match=r"prepare\[1\] `echo grompp.*` failed \(exit 7\)") as err:
        campaign.prepare(c, 64, c.params)
    assert "| grompp: fatal error in topol.top" in str(err.value)
    assert "fix the step and run the campaign again" in str(err.value)


def test_a_foreign_folder_is_not_removed(tmp_path):
    c = campaign.load(write(tmp_path))
    mine = c.traces / "prepared" / "n=64"
    mine.mkdir(parents=True)
    (mine / "precious.dat").write_text("x")
    with pytest.raises(CampaignError, match="was not prepared by sigex"):
        campaign.prepare(c, 64, c.params)
    assert (mine / "precious.dat").exists()


def test_a_missing_program_is_named_before_any_run(tmp_path):
    body = BASE.replace('command = "python {campaign_dir}/app.py"', 'command = "lmp_not_installed -in in.melt -var n {n}"')
    c = campaign.load(write(tmp_path, body))
    with pytest.raises(CampaignError, match=r"app.toml: command: the program 'lmp_not_installed' is not "
                                            r"found on PATH; install it, or give its full path"):
        campaign.run(c)
    assert not c.traces.exists() or not list(c.traces.rglob("*.h5"))
    c = campaign.load(write(tmp_path, body.replace("lmp_not_installed", "./bin/lmp")))
    with pytest.raises(CampaignError, match=r"the program '.*/bin/lmp' is no such file"):
        campaign.run(c)


# ---- real runs (MPICH from PyPI: Hydra's options) ---------------------------------------
@needs_mpi
def test_runs_start_in_their_folder_with_the_env(tmp_path, monkeypatch):
    """Each run starts in its own copy of its workload's prepared folder, with [env] (P filled
    in) on every rank; its output is kept beside the trace."""
    monkeypatch.chdir(tmp_path)
    c = campaign.load(write(tmp_path))
    runs = campaign.run(c)
    for r in runs:
        t = load_trace(r.path)
        assert t.complete and t.nprocs == r.P and t.meta["workload_value"] == str(r.workload)
        out = r.log.read_text()
        assert f"deck size {r.workload} mark P{r.P}-n{r.workload} cwd {r.folder}" in out
        assert f"prepared made for {r.workload}" in out
        assert (r.folder / "deck.txt").exists()
    assert sorted(p.name for p in (c.traces / "prepared").iterdir()) == ["n=16", "n=64"]
    # everything traced: nothing runs again, and the run folders stay as they are
    mtime = runs[0].log.stat().st_mtime_ns
    campaign.run(c)
    assert runs[0].log.stat().st_mtime_ns == mtime


@needs_mpi
def test_a_failing_run_quotes_the_programs_last_lines(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    c = campaign.load(write(tmp_path, BASE.replace("small = [16]", "small = [13]")))
    with pytest.raises(CampaignError, match=r"small run P=2 workload=13 failed \(exit 4\): `python .*app.py`") as err:
        campaign.run(c)
    msg = str(err.value)
    assert "| ERROR: box of 13 is unlucky (deck.txt line 1)" in msg
    assert str(c.traces / "small" / "P2.out") in msg
    assert "with the 3 made before it" in msg


# ---- a real installed program: Debian's LAMMPS on Open MPI ------------------------------
MELT = Path("/usr/share/lammps/examples/melt/in.melt")
LAMMPS = f"""
app = "lammps-melt"
command = "lmp -in in.melt -var n {{n}} -var steps {{steps}}"
workload = "n"
original = 8
small = [4]
signature_p = [2, 3, 4]
small_p = [2]
work = "n**3/P"
target = 64
traces = "runs"
[params]
steps = 10
[files."in.melt"]
from = "{MELT}"
replace = {{ "block 0 10 0 10 0 10" = "block 0 ${{{{n}}}} 0 ${{{{n}}}} 0 ${{{{n}}}}", "run\\t\\t250" = "run\\t\\t${{{{steps}}}}" }}
[env]
OMP_NUM_THREADS = "1"
"""


@pytest.mark.skipif(not shutil.which("lmp") or not MELT.exists(),
                    reason="LAMMPS (lmp) or its melt example is not installed: apt-get install lammps "
                           "lammps-examples")
def test_lammps_melt_campaign_runs_every_workload(tmp_path, monkeypatch):
    """Debian's lmp (Open MPI) through a campaign: the deck is the package's, with the box edge
    and steps made LAMMPS variables; the signature runs use n=8 (2,048 atoms), the distant-point
    run n=4 (256 atoms), each in its own folder, each traced whole."""
    monkeypatch.chdir(tmp_path)
    c = campaign.load(write(tmp_path, LAMMPS, "melt.toml"))
    assert campaign.emulated_p(c, 4, 2) == 16
    said: list[str] = []
    runs = campaign.run(c, progress=said.append)
    assert any(m.startswith("lmp uses Open MPI") for m in said), said  # found by sigex itself
    assert any(m.startswith("runs start with") and m.endswith(".openmpi") for m in said), said
    assert [(r.kind, r.P, r.workload) for r in runs] == [
        ("signature", 2, 8), ("signature", 3, 8), ("signature", 4, 8), ("small", 2, 4)]
    deck = (c.traces / "prepared" / "n=8" / "in.melt").read_text()
    assert "block 0 ${n} 0 ${n} 0 ${n}" in deck and "run\t\t${steps}" in deck
    for r in runs:
        t = load_trace(r.path)
        assert t.complete and t.nprocs == r.P, r
        assert t.meta["command"] == ["lmp", "-in", "in.melt", "-var", "n", str(r.workload), "-var", "steps", "10"]
        assert t.meta["workload_label"] == "n" and t.meta["workload_value"] == str(r.workload)
        assert "openmpi" in str(t.meta.get("launcher", "")), t.meta.get("launcher")
        out = r.log.read_text()
        assert f"Created {4 * r.workload ** 3} atoms" in out, out[-2000:]  # fcc: 4 atoms per cell
        assert f"Loop time of" in out and "for 10 steps" in out
        assert (r.folder / "log.lammps").exists()  # LAMMPS wrote its log in the run folder


def test_dry_run_lists_every_run_and_runs_nothing(tmp_path, capsys):
    """`sigex run --dry-run` prints each run, its state, command and folder, and runs nothing."""
    from sigex.cli import main

    path = write(tmp_path)
    assert main(["run", str(path), "--dry-run", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and all(" missing " in ln for ln in lines)
    assert lines[3].startswith("small run P=2 workload=16") and lines[3].endswith(
        f"(in {(tmp_path / 'runs' / 'small' / 'P2').resolve()})")
    assert not (tmp_path / "runs").exists()


def test_repeat_plans_repetitions_beside_the_first(tmp_path):
    """repeat = 3 traces every run three times; repetitions go to repeat-<k>/ so that a folder
    of traces still holds one run per P."""
    c = campaign.load(write(tmp_path, "repeat = 3\n" + BASE))
    runs = campaign.plan(c)
    assert len(runs) == 15 and len(campaign.plan(c, repetitions=False)) == 5
    sig4 = [r for r in runs if r.kind == "signature" and r.P == 4]
    assert [r.path for r in sig4] == [c.traces / "P4.h5", c.traces / "repeat-2" / "P4.h5",
                                      c.traces / "repeat-3" / "P4.h5"]
    assert sig4[2].describe() == "signature run P=4 workload=64 (repetition 3)"
    assert sig4[2].folder == c.traces / "repeat-3" / "P4"
    for bad in ("repeat = 0", "repeat = 1.5", "repeat = true"):
        with pytest.raises(CampaignError, match="repeat must be a whole number of runs per P"):
            campaign.load(write(tmp_path, bad + "\n" + BASE))


def test_median_signature_takes_each_ranks_median_over_repetitions():
    """Repetitions are combined rank by rank and phase by phase by their median (an outlier
    repetition, e.g. a run disturbed by other load, does not move it); a repetition whose phases
    differ is left out."""
    import dataclasses

    import numpy as np

    from conftest import TRACES
    from logical_model import read_signatures

    (s,), _ = read_signatures([TRACES / "stencil" / "P4.h5"])

    def scaled(f):
        return dataclasses.replace(s, phases=tuple(
            dataclasses.replace(ph, stats={**ph.stats, "cpu_mean": ph.stats["cpu_mean"] * f}) for ph in s.phases))

    m = campaign.median_signature(s, [scaled(2.0), scaled(10.0)])
    for a, b in zip(m.phases, s.phases):
        np.testing.assert_allclose(a.stats["cpu_mean"], 2.0 * b.stats["cpu_mean"])
        np.testing.assert_array_equal(a.stats["comp_mean"], b.stats["comp_mean"])
        assert a.weight == b.weight
    said = []
    other = dataclasses.replace(s, phases=s.phases[:-1])
    assert campaign.median_signature(s, [other], said.append) is s
    assert "this repetition is left out" in said[0]
