"""Every sigex command and sub-command against every kind of bad input, and a fuzz of damaged traces.

Usage (from the repository root)::

    python bench/bad_inputs.py                 # the whole matrix and 200 damaged traces
    python bench/bad_inputs.py --fuzz 20       # a quicker fuzz
    python bench/bad_inputs.py --only show,replay --fuzz 0

Bad-input classes: a missing input, a folder instead of a file, a text file, a foreign HDF5
file, a truncated trace, a damaged trace (seeded byte flips), a missing output folder, an
unwritable output folder (``chattr +i``: we may run as root, for whom permission bits say
nothing), an existing output without ``--force``, and nonsense numbers (0, negative, huge,
not a number). The fuzz writes damaged copies of the bundled stencil traces (seeded byte flips,
truncation, a zeroed 4 KiB block) and runs each through ``show``, ``signature``,
``extrapolate``, ``replay`` and ``predict``.

Each case runs ``sigex.cli.main(argv)`` in a forked process (so that the modules are imported
once) with its stdout and stderr in files, and a 60 s limit. Per case: exit status, the error
line, seconds, and the verdict:

``ok``             non-zero exit and one ``sigex <command>: error: ...`` line, no traceback
``traceback``      a Python traceback, or the CLI's "internal error" line (a bug)
``hang``           still running after the limit (killed)
``silent accept``  exit 0 on a bad input, with output that differs from the intact input's
``unaffected``     (fuzz only) exit 0 and the same output as the intact trace: the damage hit
                   bytes nothing reads (HDF5 free space, padding)

The last line of the output is one JSON object: ``cases``, ``tracebacks``, ``hangs``,
``silent_accepts``, ``goals``, and more. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

LIMIT = 60.0
APP = "stencil"
GOALS = {"tracebacks": 0, "hangs": 0, "silent_accepts": 0}


@dataclass
class Case:
    command: str          # "show", "simgrid export", ...
    kind: str             # bad-input class
    argv: list[str]
    bad: bool = True      # a bad input: exit 0 is a silent accept (fuzz: only if the output changed)
    clean: str | None = None  # fuzz: the stdout of the intact input
    result: dict = field(default_factory=dict)


# ---- running one case -------------------------------------------------------------------
def _child(argv: list[str], out: str, err: str, cwd: str) -> None:
    fo = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    fe = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fo, 1)
    os.dup2(fe, 2)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    os.chdir(cwd)
    os.environ.pop("SIGEX_DEBUG", None)
    from sigex.cli import main
    try:
        code = main(argv)
    except SystemExit as ex:  # argparse
        code = ex.code if isinstance(ex.code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_case(argv: list[str], cwd: Path, limit: float = LIMIT) -> dict:
    """Run ``sigex argv`` in a forked process: exit status, stdout, stderr, seconds, hung."""
    with tempfile.TemporaryDirectory(prefix="sigex-bad-run-") as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        proc = multiprocessing.get_context("fork").Process(target=_child, args=(argv, out, err, str(cwd)))
        t0 = time.perf_counter()
        proc.start()
        proc.join(limit)
        hung = proc.is_alive()
        if hung:
            proc.kill()
            proc.join()
        secs = time.perf_counter() - t0
        read = lambda p: Path(p).read_text(errors="replace") if os.path.exists(p) else ""  # noqa: E731
        return {"code": None if hung else proc.exitcode, "stdout": read(out), "stderr": read(err),
                "seconds": secs, "hung": hung}


def verdict(case: Case, r: dict) -> str:
    err = r["stderr"]
    if r["hung"]:
        return "hang"
    if "Traceback (most recent call last)" in err or "internal error" in err:
        return "traceback"
    if r["code"] == 0:
        if case.clean is not None and r["stdout"] == case.clean:
            return "unaffected"
        return "silent accept" if case.bad else "ok"
    lines = [x for x in err.splitlines() if ": error: " in x]
    return "ok" if lines else "no error line"


def error_line(r: dict) -> str:
    lines = [x for x in r["stderr"].splitlines() if ": error: " in x]
    if lines:
        return lines[0]
    rest = [x for x in r["stderr"].splitlines() if x.strip()]
    return rest[0] if rest else (r["stdout"].splitlines() or [""])[0]


# ---- bad files ----------------------------------------------------------------------------
def damage(src: Path, dst: Path, rng: random.Random, how: str | None = None) -> str:
    """A damaged copy of ``src``: byte flips, a truncation or a zeroed 4 KiB block."""
    data = bytearray(src.read_bytes())
    how = how or rng.choice(["flips", "flips", "truncate", "zero-block"])
    if how == "flips":
        n = rng.choice([1, 1, 1, 2, 3, 8, 16])  # mostly small damage: the hardest to notice
        for _ in range(n):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        what = f"{n} bit flips"
    elif how == "truncate":
        cut = rng.randrange(64, len(data) - 1)
        data = data[:cut]
        what = f"truncated at {cut} of {src.stat().st_size} bytes"
    else:
        at = rng.randrange(0, max(1, len(data) - 4096))
        data[at:at + 4096] = bytes(min(4096, len(data) - at))
        what = f"4 KiB zeroed at {at}"
    dst.write_bytes(bytes(data))
    return what


def make_workspace(ws: Path, seed: int) -> dict[str, Path]:
    """Intact and bad inputs, one folder each (a folder of three runs for the modelling commands)."""
    import h5py

    rng = random.Random(seed)
    src = ROOT / "traces" / APP
    f = {}
    good = ws / "good"
    shutil.copytree(src, good, ignore=shutil.ignore_patterns("heldout"))
    f["good"] = good
    f["trace"] = good / "P4.h5"
    text = ws / "notes.txt"
    text.write_text("these are my notes, not a trace\n" * 20)
    f["text"] = text
    foreign = ws / "foreign.h5"
    with h5py.File(foreign, "w") as h:
        h["x"] = np.arange(10)
        h.attrs["format"] = "netcdf4"
    f["foreign"] = foreign
    trunc = ws / "truncated.h5"
    damage(src / "P16.h5", trunc, rng, "truncate")
    f["truncated"] = trunc
    dam = ws / "damaged.h5"
    # flips where HDF5 looks first (superblock, object headers): a damage sigex must notice
    data = bytearray((src / "P16.h5").read_bytes())
    for i in rng.sample(range(0, 4096), 24):
        data[i] ^= 0xFF
    dam.write_bytes(bytes(data))
    f["damaged"] = dam
    f["dir"] = ws / "a-folder.h5"
    f["dir"].mkdir()
    # a folder of three runs, P16 replaced by each bad file
    for kind in ("text", "foreign", "truncated", "damaged"):
        d = ws / f"runs-{kind}"
        d.mkdir()
        for p in ("P4.h5", "P8.h5"):
            shutil.copy(src / p, d / p)
        shutil.copy(f[kind], d / "P16.h5")
        f[f"runs-{kind}"] = d
    # outputs
    f["existing"] = ws / "existing.out"
    f["existing"].write_text("keep me\n")
    f["existing.h5"] = ws / "existing.h5"
    f["existing.h5"].write_text("keep me\n")
    f["nofolder"] = ws / "no" / "such" / "folder" / "x.out"
    ro = ws / "read-only"
    ro.mkdir()
    f["ro"] = ro
    ti = ws / "ti"
    f["ti"] = ti
    # a campaign on a copy of the bundled runs
    camp = ws / "stencil.toml"
    text_c = (ROOT / "examples" / "stencil.toml").read_text().replace(
        'traces = "../traces/stencil"', f'traces = "{good}"').replace(
        "python examples/", f"python {ROOT}/examples/")
    camp.write_text(text_c)
    f["campaign"] = camp
    return f


def damaged_ti(f: dict[str, Path], seed: int) -> None:
    """A truncated and a damaged copy of the exported TI trace ``f["ti"]`` (TI is text without
    checksums: a cut at a line end or a flip that leaves a valid number cannot be noticed)."""
    rng = random.Random(seed)
    for kind in ("ti-truncated", "ti-damaged"):
        d = f["ti"].parent / kind
        shutil.copytree(f["ti"], d)
        (d / "ti.txt").write_text((f["ti"] / "ti.txt").read_text().replace(str(f["ti"]), str(d)))
        rank = d / "rank-1.txt"
        data = bytearray(rank.read_bytes())
        if kind == "ti-truncated":
            data = data[:len(data) // 2]  # in the middle of a line
            while data and data[-1:] in (b"\n", b" "):
                data = data[:-1]
            data = data[:-1]
        else:
            for _ in range(5):
                i = rng.randrange(len(data))
                data[i] ^= 1 << rng.randrange(8)
        rank.write_bytes(bytes(data))
        f[kind] = d


@contextlib.contextmanager
def read_only(folder: Path):
    """``folder`` unwritable even for root (chattr +i); yields the folder to use, or a /sys path
    when chattr is not available."""
    ok = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
    try:
        yield folder if ok else Path("/sys/sigex-unwritable")
    finally:
        if ok:
            subprocess.run(["chattr", "-i", str(folder)], capture_output=True)


# ---- the matrix -----------------------------------------------------------------------------
NUMBERS = {"zero": "0", "negative": "-3", "huge": "99999999999999", "not a number": "lots"}


def matrix(f: dict[str, Path]) -> list[Case]:
    """Every command x every bad-input class that applies to it."""
    py = sys.executable
    good, trace = f["good"], f["trace"]
    out = lambda name: str(f["ro"].parent / "outs" / name)  # noqa: E731  fresh per case
    cases: list[Case] = []

    # (command, argv builder(input, output, number), input kind, output kind, numbered option)
    # input kind: trace | runs | campaign | ti | program | None; output kind: file | folder | beside | None
    specs = [
        ("trace", lambda i, o, n: ["trace", "-n", n or "2", "-o", o or out("t.h5"), "-q", "--", *i],
         "program", "file", "2"),
        ("show", lambda i, o, n: ["show", i], "trace", None, None),
        ("signature", lambda i, o, n: ["signature", i, "--save"] + (["--json"] if o else []), "trace", "beside", None),
        ("extrapolate", lambda i, o, n: ["extrapolate", i, "--target", n or "64", "-o", o or out("x.h5"), "-q"],
         "runs", "file", "64"),
        ("ipt", lambda i, o, n: ["ipt", i, "--work", "n*n/P", "--upto", n or "64", "-q"], "runs", None, "64"),
        ("physical", lambda i, o, n: ["physical", i, "--target", n or "64", "--work", "n*n/P", "-o",
                                      o or out("ph.h5"), "-q"], "runs", "file", "64"),
        ("replay", lambda i, o, n: ["replay", i, "--machine", "cluster-a", "--pieces", n or "2"], "trace", None, "2"),
        ("simgrid export", lambda i, o, n: ["simgrid", "export", i, "-o", o or out("ti-out")], "trace", "folder", None),
        ("simgrid import", lambda i, o, n: ["simgrid", "import", i, "-o", o or out("imp.h5"), "--grid",
                                            f"{n}x2" if n else "2x2"], "ti", "file", "2"),
        ("simgrid platform", lambda i, o, n: ["simgrid", "platform", "--flat", "-n", n or "4", "-o",
                                              o or out("p.xml")], None, "file", "4"),
        ("calibrate", lambda i, o, n: ["calibrate", "--reps", n or "5", "-o", o or out("m.toml"), "-q"],
         None, "file", "5"),
        ("predict", lambda i, o, n: ["predict", i, "--target", n or "64", "--machine", "cluster-a", "--json",
                                     o or out("pr.json"), "-q"], "source", "file", "64"),
        ("scaling", lambda i, o, n: ["scaling", i, "--p", f"{n}:{n}" if n else "64:128", "--machine",
                                     "cluster-a", "-o", o or out("sc"), "-q"], "source", "prefix", "64"),
        ("compare-machines", lambda i, o, n: ["compare-machines", i, "--target", n or "64", "--machine",
                                              "cluster-a", "--machine", "cluster-b", "-q"], "source", None, "64"),
        ("run", lambda i, o, n: ["run", i, "--target", n or "64", "-o", o or out("run.h5"), "-q"],
         "campaign", "file", "64"),
    ]
    bad_inputs = {
        "trace": {"missing input": str(f["good"] / "absent.h5"), "folder instead of file": str(f["dir"]),
                  "text file": str(f["text"]), "foreign HDF5": str(f["foreign"]),
                  "truncated trace": str(f["truncated"]), "damaged trace": str(f["damaged"])},
        "runs": {"missing input": str(f["good"] / "absent"), "folder instead of file": None,
                 "text file": str(f["runs-text"]), "foreign HDF5": str(f["runs-foreign"]),
                 "truncated trace": str(f["runs-truncated"]), "damaged trace": str(f["runs-damaged"])},
        "source": {"missing input": str(f["good"] / "absent"), "text file": str(f["text"]),
                   "foreign HDF5": str(f["foreign"]), "truncated trace": str(f["runs-truncated"]),
                   "damaged trace": str(f["runs-damaged"])},
        "campaign": {"missing input": str(f["good"] / "absent.toml"), "folder instead of file": str(f["dir"]),
                     "text file": str(f["text"]), "foreign HDF5": str(f["foreign"])},
        "ti": {"missing input": str(f["good"] / "absent.txt"), "folder instead of file": str(f["dir"]),
               "text file": str(f["text"]), "foreign HDF5": str(f["foreign"]),
               "truncated trace": str(f["ti-truncated"] / "ti.txt"), "damaged trace": str(f["ti-damaged"] / "ti.txt")},
        "program": {"missing input": ["/no/such/program"], "folder instead of file": [str(f["dir"])],
                    "text file": [str(f["text"])]},
    }
    good_input = {"trace": str(trace), "runs": str(good), "source": str(good), "campaign": str(f["campaign"]),
                  "ti": str(f["ti"] / "ti.txt"), "program": [py, "-c", "pass"], None: None}
    for command, argv, ikind, okind, num in specs:
        if ikind:
            for kind, bad in bad_inputs[ikind].items():
                if kind == "folder instead of file" and ikind == "runs":  # a folder among the files
                    cases.append(Case(command, kind, argv(str(trace), None, None)[:1]
                                      + [str(f["good"] / "P4.h5"), str(f["good"] / "P8.h5"), str(f["dir"])]
                                      + argv(str(trace), None, None)[2:]))
                    continue
                if bad is None:
                    continue
                a = argv(bad, None, None)
                if command == "signature":
                    a = ["signature", bad]
                cases.append(Case(command, kind, a))
        if okind:
            gi = good_input[ikind]
            if okind == "beside":  # signature --save writes beside the trace
                ro_trace = f["ro"] / "P4.h5"
                shutil.copy(trace, ro_trace)
                cases.append(Case(command, "unwritable output folder", ["signature", str(ro_trace), "--save"]))
                ex = f["good"] / "P8.h5"
                (f["good"] / "P8.signature.json").write_text("{}")
                cases.append(Case(command, "existing output without --force", ["signature", str(ex), "--save"]))
            else:
                name = {"file": "x.out", "folder": "sub", "prefix": "pre"}[okind]
                missing = str(f["nofolder"].parent / name)
                cases.append(Case(command, "missing output folder", argv(gi, missing, None)))
                cases.append(Case(command, "unwritable output folder", argv(gi, str(f["ro"] / name), None)))
                if okind == "folder":
                    ex = f["existing"].parent / "existing-ti"
                    ex.mkdir(exist_ok=True)
                    (ex / "ti.txt").write_text("keep me\n")
                    cases.append(Case(command, "existing output without --force", argv(gi, str(ex), None)))
                elif okind == "prefix":
                    pre = f["existing"].parent / "existing-prefix"
                    pre.with_suffix(".csv").write_text("keep me\n")
                    cases.append(Case(command, "existing output without --force", argv(gi, str(pre), None)))
                else:
                    ex = f["existing.h5"] if command == "trace" else f["existing"]
                    cases.append(Case(command, "existing output without --force", argv(gi, str(ex), None)))
        if num:
            gi = good_input[ikind]
            for label, text in NUMBERS.items():
                cases.append(Case(command, f"number: {label}", argv(gi, None, text)))
    return cases


def fuzz_cases(f: dict[str, Path], ws: Path, n: int, seed: int, clean: dict[str, str]) -> list[Case]:
    """``n`` damaged copies of the bundled runs, each through show, signature, extrapolate,
    replay and predict (the folder commands get the damaged file as one of their three runs)."""
    rng = random.Random(seed)
    src = ROOT / "traces" / APP
    cases = []
    for k in range(n):
        P = rng.choice(["P4.h5", "P8.h5", "P16.h5"])
        d = ws / "fuzz" / f"{k:03d}"
        d.mkdir(parents=True)
        for p in ("P4.h5", "P8.h5", "P16.h5"):
            if p != P:
                os.link(f["good"] / p, d / p)
        what = damage(src / P, d / P, rng)
        t = str(d / P)
        for command, argv in (("show", ["show", t]), ("signature", ["signature", t]),
                              ("extrapolate", ["extrapolate", str(d), "--target", "64", "--no-trace", "-q"]),
                              ("replay", ["replay", t, "--machine", "cluster-a"]),
                              ("predict", ["predict", str(d), "--target", "64", "--machine", "cluster-a", "-q"])):
            key = command if command in ("extrapolate", "predict") else f"{command} {P}"
            cases.append(Case(command, f"fuzz {k:03d} {P}: {what}", argv, clean=clean[key]))
    return cases


def clean_outputs(f: dict[str, Path], cwd: Path) -> dict[str, str]:
    """The stdout of every fuzzed command on the intact runs (a damaged run that prints the same
    was not affected; one that prints something else without an error is a silent accept)."""
    out = {}
    g = f["good"]
    for P in ("P4.h5", "P8.h5", "P16.h5"):
        t = str(g / P)
        for command, argv in (("show", ["show", t]), ("signature", ["signature", t]),
                              ("replay", ["replay", t, "--machine", "cluster-a"])):
            out[f"{command} {P}"] = run_case(argv, cwd)["stdout"]
    out["extrapolate"] = run_case(["extrapolate", str(g), "--target", "64", "--no-trace", "-q"], cwd)["stdout"]
    out["predict"] = run_case(["predict", str(g), "--target", "64", "--machine", "cluster-a", "-q"], cwd)["stdout"]
    return out


def _stable(text: str, ws_good: Path, d: Path) -> str:
    return text.replace(str(d), str(ws_good))


def run_all(cases: list[Case], cwd: Path, progress=None, limit: float = LIMIT) -> None:
    for i, c in enumerate(cases):
        r = run_case(c.argv, cwd, limit)
        if c.clean is not None:  # the fuzz folders print their own paths: compare as if intact
            folder = Path(c.argv[1]) if Path(c.argv[1]).is_dir() else Path(c.argv[1]).parent
            r["stdout"] = r["stdout"].replace(str(folder), str(cwd / "good"))
        c.result = {"code": r["code"], "first_line": error_line(r)[:200], "seconds": round(r["seconds"], 3),
                    "verdict": verdict(c, r), "stderr_lines": len(r["stderr"].splitlines())}
        if progress:
            progress(i + 1, len(cases), c)


def summary(cases: list[Case]) -> dict:
    count = lambda v: sum(c.result["verdict"] == v for c in cases)  # noqa: E731
    secs = [c.result["seconds"] for c in cases]
    return {"cases": len(cases), "matrix_cases": sum(not c.kind.startswith("fuzz") for c in cases),
            "fuzz_cases": sum(c.kind.startswith("fuzz") for c in cases),
            "ok": count("ok"), "unaffected": count("unaffected"), "tracebacks": count("traceback"),
            "hangs": count("hang"), "silent_accepts": count("silent accept"),
            "no_error_line": count("no error line"),
            "exit_2": sum(c.result["code"] == 2 for c in cases),
            "exit_1": sum(c.result["code"] == 1 for c in cases),
            "max_seconds": round(max(secs), 2) if secs else 0.0,
            "total_seconds": round(sum(secs), 1), "limit_seconds": LIMIT, "goals": GOALS}


def table(cases: list[Case]) -> str:
    w = max(len(c.command) for c in cases)
    k = max(len(c.kind) for c in cases if not c.kind.startswith("fuzz")) if cases else 10
    lines = [f"{'command':{w}}  {'bad input':{k}}  exit  {'s':>6}  verdict        error line"]
    for c in cases:
        r = c.result
        code = "-" if r["code"] is None else str(r["code"])
        lines.append(f"{c.command:{w}}  {c.kind[:k]:{k}}  {code:>4}  {r['seconds']:6.2f}  {r['verdict']:13}  "
                     f"{r['first_line'][:110]}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fuzz", type=int, default=200, help="damaged traces in the fuzz (default 200)")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--only", help="comma-separated commands (default: all)")
    ap.add_argument("--quiet", action="store_true", help="the summary only, no per-case table")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sigex-bad-inputs-") as tmp:
        ws = Path(tmp)
        f = make_workspace(ws, a.seed)
        (ws / "outs").mkdir()
        # a TI trace of the bundled stencil for `simgrid import`
        r = run_case(["simgrid", "export", str(f["trace"]), "-o", str(f["ti"])], ws)
        if r["code"] != 0:
            print(r["stderr"], file=sys.stderr)
        damaged_ti(f, a.seed)
        cases = matrix(f)
        if a.only:
            keep = set(a.only.split(","))
            cases = [c for c in cases if c.command in keep]
        with read_only(f["ro"]) as ro:
            if ro != f["ro"]:
                for c in cases:
                    c.argv = [x.replace(str(f["ro"]), str(ro)) for x in c.argv]
            t0 = time.perf_counter()
            run_all(cases, ws)
        if a.fuzz:
            clean = clean_outputs(f, ws)
            fz = fuzz_cases(f, ws, a.fuzz, a.seed, clean)
            if a.only:
                fz = [c for c in fz if c.command in keep]
            run_all(fz, ws)
            cases += fz
        wall = time.perf_counter() - t0
    if not a.quiet:
        print(table([c for c in cases if not c.kind.startswith("fuzz")]))
        fz = [c for c in cases if c.kind.startswith("fuzz")]
        if fz:
            print()
            n = len({c.kind.split(":")[0] for c in fz})
            print(f"fuzz: {len(fz)} runs of {n} damaged traces")
            by = {}
            for c in fz:
                by.setdefault((c.command, c.result["verdict"]), []).append(c)
            for (cmd, v), cs in sorted(by.items()):
                print(f"  {cmd:12} {v:14} {len(cs):4}   e.g. {cs[0].result['first_line'][:100]}")
            bad = [c for c in fz if c.result["verdict"] not in ("ok", "unaffected")]
            for c in bad[:30]:
                print(f"  !! {c.command} {c.kind}: {c.result['verdict']}: {c.result['first_line'][:120]}")
    s = summary(cases)
    s["wall_seconds"] = round(wall, 1)
    print(json.dumps(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
