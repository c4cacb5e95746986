"""Campaigns: how to run an application at P with workload W, and the runs sigex needs.

A campaign is a small TOML file per application::

    app = "stencil"
    command = "python examples/stencil.py --n {n} --iters {iters} --check-every 10"
    workload = "n"              # the workload's name: {n} in the command
    original = 2048             # the workload to predict
    small = [512]               # candidate small workloads for the distant point
    p_rule = "any"              # any | squares | cubes | powers_of_two | a list of P
    signature_p = [4, 8, 16]    # the signature runs
    small_p = [4, 8, 16]        # the distant-point runs (default: signature_p)
    work = "n*n/P"              # declared work per process (CPU-time mode)
    target = 4096
    check_p = [64]              # optional: original-workload runs the prediction is checked against
    traces = "traces/stencil"   # where traces go (default: runs/<app>), relative to the file
    timeout = 600               # optional: seconds before a run is killed
    repeat = 3                  # optional: every run this many times; the models take medians
    [params]                    # other {placeholders} of the command
    iters = 400
    [small_params]              # their values in the small-workload runs (default: params)
    iters = 1000

An installed program (LAMMPS, GROMACS, any MPI binary on PATH or given by its
path) usually reads input files where it runs and writes its own there. Three
more keys say how its runs are set up, as a JUBE or Score-P campaign would::

    command = "lmp -in in.melt -var n {n} -var steps {steps} -log log.lammps"
    prepare = ["gmx_mpi grompp -f md.mdp -c conf.gro -p topol.top -o md.tpr"]
    [files."in.melt"]           # made in the run folder: copied ...
    from = "/usr/share/lammps/examples/melt/in.melt"
    replace = { "block 0 10 0 10 0 10" = "block 0 ${{n}} 0 ${{n}} 0 ${{n}}" }
    [files."md.mdp"]            # ... or written from text
    text = "nsteps = {steps}\\n"
    [env]                       # extra environment of every rank (and of the prepare steps)
    OMP_NUM_THREADS = "1"

With ``files`` or ``prepare``, every workload is prepared once in
``<traces>/prepared/<workload>=<value>/`` (the files are copied or written,
then the ``prepare`` shell commands run there, in order; as root, Open MPI
programs among them are allowed to start, as the traced runs are) and every run starts
in its own copy of that folder, ``<traces>/P<P>/`` beside ``<traces>/P<P>.h5``
(``small/P<P>/`` for the small workload), through the launcher's working
directory option. ``files`` may also be a list of paths, copied as they are.
A file source relative to the campaign file is taken from the campaign's
folder; ``from`` may name a folder (copied whole, without ``replace``).
``replace`` swaps literal strings in the copied text, and each must occur in
it (a deck that changed upstream is refused, not run unchanged).

Placeholders: ``{<workload>}``, the ``[params]`` (``[small_params]`` in the
small-workload runs), ``{campaign_dir}`` (the campaign file's folder) and, in
the command and ``[env]`` only, ``{P}``; ``{{`` and ``}}`` are literal braces.
Every run's standard output is kept in ``P<P>.out`` beside its trace; its
standard error is shown as it comes.

The MPI the program runs on is found by the tracer (:func:`signature.capture.launch_for`:
Debian's ``lmp`` runs on Open MPI, so Open MPI's ``mpiexec.openmpi`` starts it), and the
working folder and ``[env]`` are passed with that launcher's own options.

:func:`load` reads and checks it: every key must be known, every placeholder
defined, the signature and small P must be P the application accepts, the
work expression must parse. :func:`run` performs the runs that are missing:
a complete trace made by the same command is reused, an incomplete one is
run again, one made by a different command is refused (nothing is
overwritten). Before the first run it checks that the program exists. A
failing run stops the campaign with a message naming the run, its command
and the program's last lines of output; every trace already made is kept, so
running again resumes. :func:`check` compares the compute model with the
``check_p`` runs phase by phase.

The distant point (Panadero et al. §3, CPU-time mode of DESIGN.md): a small
workload run at a small P emulates the original workload at the P where the
declared work per process is equal (:func:`emulated_p`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import re
import shlex
import shutil
import string
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from signature.errors import CampaignError, SigexError, TraceFormatError

from .crm import accepted_p, work_function

__all__ = ["Campaign", "InputFile", "Run", "load", "run", "plan", "prepare", "models", "emulated_p",
           "check", "CheckRow", "median_signature"]

_KEYS = {"app", "command", "workload", "original", "small", "p_rule", "signature_p", "small_p", "work",
         "target", "traces", "params", "small_params", "description", "timeout", "files", "prepare", "env",
         "check_p", "repeat"}
_FILE_KEYS = {"from", "text", "replace"}
#: Placeholders every campaign has (P only where a run is meant: command and [env]).
_BUILTIN = ("campaign_dir", "P")
#: Lines of a failed run's output quoted in the error.
TAIL_LINES = 12
_STAMP = ".sigex-prepared.json"
_RUN_MARK = ".sigex-run"


@dataclasses.dataclass(frozen=True)
class InputFile:
    """A file the campaign puts in every run's folder: copied from ``source`` (with
    ``replace`` applied) or written from ``text``."""

    name: str
    source: Path | None = None
    text: str | None = None
    replace: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class Run:
    """One traced run of the campaign."""

    kind: str  # "signature", "small" or "check"
    P: int
    workload: float | int
    command: tuple[str, ...]
    path: Path
    params: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)
    repetition: int = 1

    def describe(self) -> str:
        again = f" (repetition {self.repetition})" if self.repetition > 1 else ""
        return f"{self.kind} run P={self.P} workload={self.workload}{again}"

    @property
    def log(self) -> Path:
        """Where the run's standard output is kept."""
        return self.path.with_suffix(".out")

    @property
    def folder(self) -> Path:
        """The run's own working folder (used when the campaign has files or prepare steps)."""
        return self.path.with_suffix("")


@dataclasses.dataclass(frozen=True)
class Campaign:
    path: Path
    app: str
    command: str
    workload: str
    original: float | int
    small: tuple[float | int, ...]
    p_rule: str | tuple[int, ...]
    signature_p: tuple[int, ...]
    small_p: tuple[int, ...]
    work: str | None
    target: int
    traces: Path
    params: dict[str, Any]
    small_params: dict[str, Any]
    timeout: float | None = None
    description: str = ""
    files: tuple[InputFile, ...] = ()
    prepare: tuple[str, ...] = ()
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    check_p: tuple[int, ...] = ()
    repeat: int = 1

    @property
    def rule_name(self) -> str | None:
        return self.p_rule if isinstance(self.p_rule, str) else None

    @property
    def uses_folders(self) -> bool:
        """Whether every run starts in its own prepared folder."""
        return bool(self.files or self.prepare)

    def accepts(self, P: int) -> bool:
        if isinstance(self.p_rule, tuple):
            return P in self.p_rule
        return bool(len(accepted_p(self.p_rule, P, P)))

    def values(self, workload, params: dict[str, Any], P: int | None = None) -> dict[str, Any]:
        """The placeholders' values for a run (``P=None``: when preparing a workload)."""
        out = {**params, "campaign_dir": str(self.path.parent.resolve()), self.workload: workload}
        if P is not None:
            out["P"] = P
        return out

    def fill(self, text: str, values: dict[str, Any], key: str) -> str:
        """``text`` with its placeholders filled in; a mistake names the file and ``key``."""
        try:
            return text.format(**values)
        except KeyError as err:
            name = err.args[0]
            if name == "P":
                raise CampaignError(f"{self.path}: {key} uses {{P}}, but files and prepare steps are made "
                                    "once per workload, for every P: use {P} in the command or [env] "
                                    "only") from err
            raise CampaignError(f"{self.path}: {key} uses {{{name}}}, which is neither the workload "
                                f"({self.workload}), {', '.join(_BUILTIN)} nor in [params]; add it to "
                                "[params] (or write {{ and }} for literal braces)") from err
        except (IndexError, ValueError) as err:
            raise CampaignError(f"{self.path}: {key}: {err} in {text!r}; placeholders are {{name}}, "
                                "and {{ and }} are literal braces") from err

    def command_for(self, workload, params: dict[str, Any], P: int | None = None) -> tuple[str, ...]:
        text = self.fill(self.command, self.values(workload, params, P if P is not None else 1), "command")
        try:
            argv = shlex.split(text)
        except ValueError as err:
            raise CampaignError(f"{self.path}: command: {err} in {text!r}") from err
        if not argv:
            raise CampaignError(f"{self.path}: command is empty")
        if self.uses_folders and os.sep in argv[0] and not os.path.isabs(argv[0]):
            argv[0] = os.path.abspath(argv[0])  # the run starts in its own folder
        return tuple(argv)

    def env_for(self, workload, params: dict[str, Any], P: int | None) -> dict[str, str]:
        vals = self.values(workload, params, P)
        return {k: self.fill(str(v), vals, f"[env] {k}") for k, v in self.env.items()}


def _num(x, what: str, path: Path):
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise CampaignError(f"{path}: {what} must be a number, got {x!r}")
    return x


def _ints(x, key: str, path: Path) -> tuple[int, ...]:
    if not isinstance(x, list) or not x or any(isinstance(p, bool) or not isinstance(p, int) for p in x):
        raise CampaignError(f"{path}: {key} must be a list of whole numbers of processes, e.g. [4, 8, 16]; "
                            f"got {x!r}")
    return tuple(x)


def _files(raw, path: Path) -> tuple[InputFile, ...]:
    base = path.parent

    def source(p: str, key: str) -> Path:
        if not isinstance(p, str) or not p:
            raise CampaignError(f"{path}: {key} must be a file's path, got {p!r}")
        q = Path(p).expanduser()
        return q if q.is_absolute() else (base / q).resolve()

    if isinstance(raw, list):
        return tuple(InputFile(name=Path(str(p)).name, source=source(p, "files")) for p in raw)
    if not isinstance(raw, dict):
        raise CampaignError(f"{path}: files must be a list of paths or a table [files.\"NAME\"]; got {raw!r}")
    out = []
    for name, spec in raw.items():
        key = f"[files.\"{name}\"]"
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise CampaignError(f"{path}: {key}: a file's name is where it goes inside the run folder; "
                                "give a relative name without ..")
        if isinstance(spec, str):
            out.append(InputFile(name=name, source=source(spec, key)))
            continue
        if not isinstance(spec, dict):
            raise CampaignError(f"{path}: {key} must be a source path or a table with from, text, replace")
        unknown = sorted(set(spec) - _FILE_KEYS)
        if unknown:
            raise CampaignError(f"{path}: {key}: unknown key(s) {', '.join(unknown)}; known: "
                                f"{', '.join(sorted(_FILE_KEYS))}")
        if ("from" in spec) == ("text" in spec):
            raise CampaignError(f"{path}: {key} needs exactly one of from (a file to copy) and text "
                                "(the file's content)")
        rep = spec.get("replace", {})
        if not isinstance(rep, dict) or not all(isinstance(v, str) for v in rep.values()):
            raise CampaignError(f"{path}: {key}: replace must be a table of strings, "
                                "{ \"old text\" = \"new text\" }")
        if rep and "from" not in spec:
            raise CampaignError(f"{path}: {key}: replace applies to a copied file (from); put the "
                                "placeholders in text directly")
        if "text" in spec and not isinstance(spec["text"], str):
            raise CampaignError(f"{path}: {key}: text must be a string")
        out.append(InputFile(name=name, source=source(spec["from"], f"{key} from") if "from" in spec else None,
                             text=spec.get("text"), replace=tuple(rep.items())))
    return tuple(out)


def _fields(text: str, key: str, path: Path) -> set[str]:
    try:
        return {f[1] for f in string.Formatter().parse(text) if f[1]}
    except ValueError as err:
        raise CampaignError(f"{path}: {key}: {err} in {text!r}; placeholders are {{name}}, and {{{{ and }}}} "
                            "are literal braces") from err


def load(path: str | Path) -> Campaign:
    """Read and check a campaign file; a mistake is named with the file and the key."""
    path = Path(path)
    try:
        d = tomllib.loads(path.read_text())
    except FileNotFoundError as err:
        raise CampaignError(f"{path}: no such campaign file") from err
    except tomllib.TOMLDecodeError as err:
        raise CampaignError(f"{path}: not valid TOML ({err})") from err
    except UnicodeDecodeError as err:
        raise CampaignError(f"{path}: not a campaign file (not text: {err.reason} at byte {err.start}); "
                            "give the application's campaign TOML, e.g. examples/stencil.toml") from err
    except IsADirectoryError as err:
        raise CampaignError(f"{path} is a folder, not a campaign file") from err
    unknown = sorted(set(d) - _KEYS)
    if unknown:
        raise CampaignError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}")
    for key in ("app", "command", "workload", "original", "signature_p", "target"):
        if key not in d:
            raise CampaignError(f"{path}: missing key {key!r}")
    if not isinstance(d["command"], str):
        raise CampaignError(f"{path}: command must be a string, e.g. \"lmp -in in.melt -var n {{n}}\"")
    for key in ("params", "small_params", "env"):
        if not isinstance(d.get(key, {}), dict):
            raise CampaignError(f"{path}: {key} must be a table ([{key}])")
    wl = d["workload"]
    if not re.fullmatch(r"[A-Za-z_]\w*", str(wl)) or wl in _BUILTIN:
        raise CampaignError(f"{path}: workload must be a name like n (not {', '.join(_BUILTIN)}), got {wl!r}")
    params = dict(d.get("params", {}))
    small_params = {**params, **dict(d.get("small_params", {}))}
    clash = sorted(set(small_params) & ({wl} | set(_BUILTIN)))
    if clash:
        raise CampaignError(f"{path}: [params] sets {clash[0]}, which sigex sets itself for every run; "
                            "remove it from [params]")
    files = _files(d.get("files", []), path)
    prepare = d.get("prepare", [])
    if isinstance(prepare, str):
        prepare = [prepare]
    if not isinstance(prepare, list) or not all(isinstance(s, str) and s.strip() for s in prepare):
        raise CampaignError(f"{path}: prepare must be a list of shell commands, e.g. "
                            "[\"gmx_mpi grompp -f md.mdp -o md.tpr\"]")
    env = dict(d.get("env", {}))
    bad = [k for k, v in env.items() if not re.fullmatch(r"[A-Za-z_]\w*", k)
           or isinstance(v, bool) or not isinstance(v, (str, int, float))]
    if bad:
        raise CampaignError(f"{path}: [env] {bad[0]}: give variables as NAME = \"value\"")
    # where the workload is used: the command, or the files and steps made per workload
    used = _fields(d["command"], "command", path)
    made = set()
    for f in files:
        if f.text is not None:
            made |= _fields(f.text, f"[files.\"{f.name}\"] text", path)
        for old, new in f.replace:
            made |= _fields(new, f"[files.\"{f.name}\"] replace", path)
    for i, step in enumerate(prepare):
        made |= _fields(step, f"prepare[{i}]", path)
    if wl not in used | made:
        raise CampaignError(f"{path}: the command does not use the workload: put {{{wl}}} where the "
                            f"application takes it, e.g. --n {{{wl}}} (or in files or prepare)")
    known = set(params) | {wl} | set(_BUILTIN)
    for where, names in (("the command", used), ("files or prepare", made)):
        missing = sorted(names - known)
        if missing:
            raise CampaignError(f"{path}: {where} uses {', '.join('{' + m + '}' for m in missing)}, "
                                "which [params] does not give")
    rule = d.get("p_rule", "any")
    if isinstance(rule, list):
        rule = _ints(rule, "p_rule", path)
    elif rule not in ("any", "squares", "cubes", "powers_of_two"):
        raise CampaignError(f"{path}: p_rule {rule!r} is not any, squares, cubes, powers_of_two or a "
                            "list of P")
    sig_p = _ints(d["signature_p"], "signature_p", path)
    if len(set(sig_p)) < 3:
        raise CampaignError(f"{path}: signature_p needs 3 or more different P (got {list(sig_p)}): "
                            "fewer cannot tell a model from noise")
    small = d.get("small", [])
    if not isinstance(small, list):
        small = [small]
    timeout = d.get("timeout")
    repeat = d.get("repeat", 1)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= 100:
        raise CampaignError(f"{path}: repeat must be a whole number of runs per P from 1 to 100, got {repeat!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or timeout <= 0):
        raise CampaignError(f"{path}: timeout must be a number of seconds above 0, got {timeout!r}")
    base = path.parent
    traces = Path(d.get("traces", f"runs/{d['app']}"))
    c = Campaign(path=path, app=str(d["app"]), command=d["command"], workload=wl,
                 original=_num(d["original"], "original", path),
                 small=tuple(_num(x, "small", path) for x in small), p_rule=rule,
                 signature_p=sig_p, small_p=_ints(d.get("small_p", list(sig_p)), "small_p", path),
                 work=d.get("work"), target=int(_num(d["target"], "target", path)),
                 traces=traces if traces.is_absolute() else (base / traces).resolve(),
                 params=params, small_params=small_params, timeout=timeout,
                 description=d.get("description", ""), files=files, prepare=tuple(prepare), env=env,
                 check_p=_ints(d["check_p"], "check_p", path) if "check_p" in d else (), repeat=repeat)
    for kind, ps in (("signature_p", c.signature_p), ("small_p", c.small_p if c.small else ()),
                     ("check_p", c.check_p)):
        bad_p = [p for p in ps if p < 1 or not c.accepts(p)]
        if bad_p:
            raise CampaignError(f"{path}: {kind} has P={bad_p[0]}, which the application does not accept "
                                f"(p_rule {rule!r})")
    if c.work is not None:
        if not isinstance(c.work, str):
            raise CampaignError(f"{path}: work must be an expression in quotes, e.g. work = \"n*n/P\"")
        try:
            work_function(c.work, wl)
        except SigexError as err:
            raise CampaignError(f"{path}: {err}") from err
    # every placeholder resolves
    c.command_for(c.original, params, c.signature_p[0])
    c.env_for(c.original, params, c.signature_p[0])
    _recipe(c, c.original, params)
    return c


def plan(c: Campaign, *, repetitions: bool = True) -> list[Run]:
    """Every run the campaign needs: signature runs, small-workload runs, check runs, and
    their repetitions (``repeat``; in ``repeat-<k>/`` beside the first, so that a folder
    of traces still holds one run per P)."""
    def runs_of(kind: str, folder: Path, w, params: dict[str, Any], Ps) -> list[Run]:
        out = []
        for P in Ps:
            cmd = c.command_for(w, params, P)
            for k in range(1, (c.repeat if repetitions else 1) + 1):
                where = folder if k == 1 else folder / f"repeat-{k}"
                out.append(Run(kind, P, w, cmd, where / f"P{P}.h5", params, k))
        return out

    runs = runs_of("signature", c.traces, c.original, c.params, c.signature_p)
    for w in c.small:
        runs += runs_of("small", c.traces / ("small" if len(c.small) == 1 else f"small-{w}"), w,
                        c.small_params, c.small_p)
    return runs + runs_of("check", c.traces / "check", c.original, c.params, c.check_p)


def emulated_p(c: Campaign, workload, P: int, P_max: int = 1 << 20) -> int | None:
    """The original-workload P whose declared work per process equals that of ``workload``
    at ``P`` (the distant point's P, DESIGN.md CPU-time mode); None without ``work``."""
    if c.work is None:
        return None
    f = work_function(c.work, c.workload)
    want = f(workload, P)
    cand = accepted_p(c.rule_name if c.rule_name != "any" else None, 1, P_max)
    if isinstance(c.p_rule, tuple):
        cand = np.array(sorted(set(c.p_rule) | set(int(p) for p in cand[cand <= max(c.p_rule)])))
    have = np.array([f(c.original, p) for p in cand])
    return int(cand[int(np.argmin(np.abs(have - want)))])


def _state(r: Run) -> str:
    """'missing', 'complete', 'incomplete' or 'foreign' (made by another command)."""
    from signature import load_trace

    if not r.path.exists():
        return "missing"
    try:
        t = load_trace(r.path, allow_incomplete=True)
    except TraceFormatError:
        return "incomplete"
    if tuple(t.meta.get("command") or ()) != r.command or t.nprocs != r.P:
        return "foreign"
    value = t.meta.get("workload_value")
    if value not in (None, "") and str(value) != str(r.workload):
        return "foreign"
    return "complete" if t.complete else "incomplete"


# ---- preparing a workload's folder and a run's folder --------------------------------
def _recipe(c: Campaign, workload, params: dict[str, Any]) -> dict[str, Any]:
    """What the prepared folder of a workload is made of (placeholders filled in)."""
    vals = c.values(workload, params)
    files = []
    for f in c.files:
        key = f"[files.\"{f.name}\"]"
        files.append({"name": f.name, "from": str(f.source) if f.source else None, "stamp": _stamp(f.source),
                      "text": c.fill(f.text, vals, f"{key} text") if f.text is not None else None,
                      "replace": [[old, c.fill(new, vals, f"{key} replace")] for old, new in f.replace]})
    steps = [c.fill(s, vals, f"prepare[{i}]") for i, s in enumerate(c.prepare)]
    env = {k: c.fill(str(v), vals, f"[env] {k}") for k, v in c.env.items()
           if "P" not in _fields(str(v), f"[env] {k}", c.path)}  # the ones that hold for every P
    return {"format": 1, "workload": f"{c.workload}={workload}", "files": files, "prepare": steps, "env": env}


def _stamp(source: Path | None) -> list | None:
    """Size and modification time of a copied file (a file changed upstream is copied again)."""
    try:
        st = source.stat() if source is not None else None
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns] if st is not None else None


def _tail(text: str, n: int = TAIL_LINES) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()][-n:]


def _quote(lines: list[str]) -> str:
    return "\n".join("    | " + ln.rstrip() for ln in lines)


def prepare(c: Campaign, workload, params: dict[str, Any], *,
            progress: Callable[[str], None] | None = None) -> Path:
    """The prepared folder of ``workload``: its files copied or written, then its
    ``prepare`` steps run there (once: a folder prepared by the same recipe is reused)."""
    say = progress or (lambda m: None)
    recipe = _recipe(c, workload, params)
    folder = c.traces / "prepared" / f"{c.workload}={workload}"
    stamp = folder / _STAMP
    try:
        if json.loads(stamp.read_text()) == recipe:
            return folder
    except (OSError, ValueError):
        pass
    if folder.exists():
        if not stamp.exists() and any(folder.iterdir()):
            raise CampaignError(f"{folder} exists and was not prepared by sigex; move it away or change "
                                f"`traces` in {c.path}")
        shutil.rmtree(folder)  # prepared by an older recipe, or half-prepared
    folder.mkdir(parents=True)
    say(f"preparing {c.workload}={workload} in {folder}")
    for f, spec in zip(c.files, recipe["files"]):
        dest = folder / f.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        key = f"[files.\"{f.name}\"]"
        if f.text is not None:
            dest.write_text(spec["text"])
            continue
        if not f.source.exists():
            raise CampaignError(f"{c.path}: {key} copies {f.source}, which does not exist; install the "
                                "package that provides it (LAMMPS examples: apt-get install lammps-examples) "
                                "or fix the path")
        if f.source.is_dir():
            if f.replace:
                raise CampaignError(f"{c.path}: {key}: {f.source} is a folder; replace applies to one file")
            shutil.copytree(f.source, dest, dirs_exist_ok=True)
            continue
        if not f.replace:
            shutil.copyfile(f.source, dest)
            continue
        try:
            text = f.source.read_text()
        except UnicodeDecodeError as err:
            raise CampaignError(f"{c.path}: {key}: {f.source} is not text; replace applies to text "
                                "files") from err
        for old, new in spec["replace"]:
            if old not in text:
                raise CampaignError(f"{c.path}: {key}: {old!r} does not occur in {f.source}; the file "
                                    "is not the one the campaign was written for: fix replace")
            text = text.replace(old, new)
        dest.write_text(text)
    env = {**os.environ, **recipe["env"]}
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # as the tracer's launcher: Open MPI may start as root
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    for i, step in enumerate(recipe["prepare"]):
        say(f"prepare[{i}]: {step}")
        log = folder / f"prepare-{i}.out"
        try:
            with open(log, "w") as out:
                rc = subprocess.run(["/bin/sh", "-c", step], cwd=folder, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, timeout=c.timeout).returncode
        except subprocess.TimeoutExpired as err:
            raise CampaignError(f"{c.path}: prepare[{i}] `{step}` did not finish in {c.timeout} s "
                                f"(in {folder}); raise timeout or fix the step") from err
        if rc != 0:
            lines = _tail(log.read_text(errors="replace"))
            raise CampaignError(
                f"{c.path}: prepare[{i}] `{step}` failed (exit {rc}) in {folder}"
                + (f"; its last lines ({log}):\n{_quote(lines)}\n" if lines else " with no output; ")
                + "fix the step and run the campaign again")
    stamp.write_text(json.dumps(recipe, indent=1))
    return folder


def _run_folder(prepared: Path, r: Run) -> Path:
    """A fresh copy of the prepared folder for one run."""
    folder = r.folder
    if folder.exists():
        if not (folder / _RUN_MARK).exists() and any(folder.iterdir()):
            raise CampaignError(f"{folder} exists and is not a run folder sigex made; move it away")
        shutil.rmtree(folder)
    shutil.copytree(prepared, folder, ignore=shutil.ignore_patterns(_STAMP, "prepare-*.out"))
    (folder / _RUN_MARK).write_text(r.describe() + "\n")
    return folder


class _StderrTail:
    """Passes standard error through and keeps its last lines (the tracer tees the
    program's standard error into ``sys.stderr``)."""

    def __init__(self, through, n: int = TAIL_LINES):
        self.through = through
        self.lines: collections.deque = collections.deque(maxlen=n)

    def write(self, s: str) -> int:
        self.through.write(s)
        self.lines.extend(ln for ln in s.splitlines() if ln.strip())
        return len(s)

    def flush(self) -> None:
        self.through.flush()

    def isatty(self) -> bool:
        return False


def _launch_args(c: Campaign, command: tuple[str, ...], folder: Path | None, env: dict[str, str],
                 mpiexec: str | None, cache: dict) -> list[str]:
    """The launcher options that set the run's working folder and [env]."""
    launch = cache[(command[0], mpiexec)]
    if folder is None and not env:
        return []
    if launch.flavour in ("hydra", "openmpi"):
        return launch.options(env, folder)
    raise CampaignError(f"{c.path}: {launch.launcher} is neither MPICH's nor Open MPI's launcher, so sigex "
                        "cannot give the ranks their run folder (files, prepare) or [env]; use one of those "
                        "MPIs (SIGEX_MPIEXEC) or drop files, prepare and [env]")


def _check_program(c: Campaign, command: tuple[str, ...]) -> None:
    prog = command[0]
    if shutil.which(prog):
        return
    where = ("no such file" if os.sep in prog else "not found on PATH")
    hint = {"lmp": " (Debian: apt-get install lammps lammps-examples)",
            "gmx_mpi": " (Debian: apt-get install gromacs)"}.get(Path(prog).name, "")
    raise CampaignError(f"{c.path}: command: the program {prog!r} is {where}{hint}; install it, or give "
                        "its full path in command")


def run(c: Campaign, *, progress: Callable[[str], None] | None = None, stdout=None,
        mpiexec: str | None = None) -> list[Run]:
    """Perform the missing runs; returns every run of the plan (all complete).

    ``stdout``: where the programs' standard output goes (default: ``P<P>.out`` beside
    each trace)."""
    from signature.capture import trace_run

    say = progress or (lambda m: None)
    runs = plan(c)
    todo = []
    for r in runs:
        st = _state(r)
        if st == "foreign":
            raise CampaignError(f"{r.path} exists but was not made by this campaign's {r.describe()} "
                                f"(command {' '.join(r.command)}); move it away or change `traces`")
        if st != "complete":
            todo.append((r, st))
    say(f"{len(runs) - len(todo)} of {len(runs)} runs already traced; {len(todo)} to run")
    if todo:
        _check_program(c, todo[0][0].command)
    launch_cache: dict = {}
    for i, (r, st) in enumerate(todo):
        key = (r.command[0], mpiexec)
        if key not in launch_cache:  # the program's own MPI and its launcher, told once
            from signature.capture import launch_for

            try:
                launch_cache[key] = launch_for(r.command, mpiexec, say)
            except SigexError as err:
                raise CampaignError(f"{c.path}: cannot start {r.command[0]} under MPI: {err}") from err
            say(f"runs start with {launch_cache[key].launcher}")
        r.path.parent.mkdir(parents=True, exist_ok=True)
        folder = None
        if c.uses_folders:
            folder = _run_folder(prepare(c, r.workload, r.params, progress=say), r)
        env = c.env_for(r.workload, r.params, r.P)
        extra = _launch_args(c, r.command, folder, env, mpiexec, launch_cache)
        say(f"[{i + 1}/{len(todo)}] {r.describe()}{' (again: incomplete)' if st == 'incomplete' else ''}: "
            f"{' '.join(r.command)}" + (f"  (in {folder})" if folder else ""))
        tail = _StderrTail(sys.stderr)
        log = None
        try:
            with contextlib.ExitStack() as stack:
                out = stdout
                if out is None:
                    log = r.log
                    out = stack.enter_context(open(log, "w"))
                stack.enter_context(contextlib.redirect_stderr(tail))
                res = trace_run(list(r.command), r.P, r.path, workload=f"{c.workload}={r.workload}",
                                app=c.app, overwrite=(st == "incomplete"), timeout=c.timeout,
                                stdout=out, mpiexec=mpiexec, mpiexec_args=extra, progress=None)
        except FileNotFoundError as err:
            raise CampaignError(f"{r.describe()}: cannot start `{' '.join(r.command)}` ({err}); "
                                "the traces made so far are kept") from err
        except CampaignError:
            raise
        except SigexError as err:
            raise CampaignError(f"{r.describe()} (`{' '.join(r.command)}`) made no trace: {err}"
                                f"{_output_tail(log, tail)}") from err
        if not res.ok:
            why = res.trace.meta.get("incomplete_reason") or "the trace is incomplete"
            killed = (f"killed after the campaign's timeout of {c.timeout} s; " if res.returncode == -9
                      and c.timeout else "")
            raise CampaignError(
                f"{r.describe()} failed (exit {res.returncode}): `{' '.join(r.command)}`; {killed}{why}."
                f"{_output_tail(log, tail)}\nThe trace is kept as {r.path} (incomplete) with the {i} made "
                "before it; fix the command and run the campaign again to resume")
    return runs


def _output_tail(log: Path | None, tail: _StderrTail) -> str:
    """The program's last lines of output, quoted for an error message."""
    parts = []
    if log is not None and log.exists():
        lines = _tail(log.read_text(errors="replace"))
        if lines:
            parts.append(f"\nIts last lines of output ({log}):\n{_quote(lines)}")
    if tail.lines:
        parts.append(f"\nIts last lines on standard error:\n{_quote(list(tail.lines))}")
    return "".join(parts)


def models(c: Campaign, *, progress: Callable[[str], None] | None = None):
    """The logical and compute models of a campaign's (complete) runs; with ``repeat``, each
    P's signature is the median of its repetitions (:func:`median_signature`)."""
    from logical_model import build as build_logical
    from logical_model import read_signatures

    from .physical import build

    say = progress or (lambda m: None)
    runs = plan(c)
    sigs, grids = read_signatures([r.path for r in runs if r.kind == "signature" and r.repetition == 1],
                                  progress=progress)
    sigs = _medians(sigs, [r for r in runs if r.kind == "signature"], say)
    say(f"modelling {len(sigs)} signatures")
    rule = c.rule_name if c.rule_name != "any" else None
    logical = build_logical(sigs, p_rule=rule, grids=grids)
    small_runs = [r for r in runs if r.kind == "small" and r.workload == (c.small[0] if c.small else None)]
    small: list = []
    if small_runs and (c.work or logical.work_mode == "counters"):
        small, _ = read_signatures([r.path for r in small_runs if r.repetition == 1])
        small = _medians(small, small_runs, say)
        say(f"distant point from {len(small)} small-workload runs")
    elif small_runs:
        say("small-workload runs, but without the declared work per process (work = \"n*n/P\") CPU-time "
            "mode cannot place them: no distant point")
    compute = build(logical, sigs, small=small, work=c.work, p_rule=rule, P_max=max(c.target * 4, 1 << 16))
    return logical, compute


#: The per-rank figures of a phase that repetitions are combined in (by their median).
_MEDIAN_STATS = ("duration_mean", "comp_mean", "cpu_mean", "comm_mean", "instr_mean", "cycles_mean")


def median_signature(first, others: list, say: Callable[[str], None] = lambda m: None):
    """``first`` with each phase's computation and communication per rank the median over
    ``first`` and ``others`` (repetitions of the same run, as Extra-P takes the median of
    repeated measurements). A repetition whose phases differ (count, kind, weight or
    events) is left out, and said so."""
    same = [first]
    for o in others:
        if len(o.phases) == len(first.phases) and all(
                a.kind == b.kind and a.weight == b.weight and a.ops == b.ops
                and len(a.stats["cpu_mean"]) == len(b.stats["cpu_mean"]) for a, b in zip(first.phases, o.phases)):
            same.append(o)
        else:
            say(f"{o.source}: its phases differ from {first.source}'s; this repetition is left out")
    if len(same) == 1:
        return first
    phases = []
    for k, ph in enumerate(first.phases):
        stats = dict(ph.stats)
        for key in _MEDIAN_STATS:
            if key in stats:
                stats[key] = np.median(np.stack([np.asarray(s.phases[k].stats[key], float) for s in same]), axis=0)
        phases.append(dataclasses.replace(ph, stats=stats))
    return dataclasses.replace(first, phases=tuple(phases),
                               runtime=float(np.median([s.runtime for s in same])))


def _medians(sigs: list, runs: list[Run], say: Callable[[str], None]) -> list:
    """Each signature combined with its repetitions' (``runs`` holds every repetition)."""
    from logical_model import read_signatures

    if not any(r.repetition > 1 for r in runs):
        return sigs
    out = []
    for s in sigs:
        others = [read_signatures([r.path])[0][0] for r in runs if r.P == s.nprocs and r.repetition > 1]
        out.append(median_signature(s, others, say))  # read one by one: the grids are keyed by P
    return out


# ---- checking the compute model against measured runs --------------------------------
@dataclasses.dataclass(frozen=True)
class CheckRow:
    """One phase of one check run: measured against predicted."""

    P: int
    phase: int
    kind: str
    weight_measured: int
    weight_predicted: int
    measured: float  # computation per process and repetition (s; CPU time in CPU-time mode)
    predicted: float  # the CRM used (with the distant point when there is one)
    predicted_base: float  # the CRM of the signature runs only
    note: str = ""

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1 if self.measured > 0 else float("nan")

    @property
    def error_base(self) -> float:
        return self.predicted_base / self.measured - 1 if self.measured > 0 else float("nan")


def check(c: Campaign, compute, *, progress: Callable[[str], None] | None = None) -> list[CheckRow]:
    """Each ``check_p`` run's phases against the compute model: computation per process and
    repetition (CPU time in CPU-time mode, wall time in counters mode) and weights.

    Phases are related by position, as the logical model relates them; a check run whose
    phases do not correspond (another count or another kind) is reported, not compared."""
    from logical_model import read_signatures

    from .physical import _time_per_rep

    runs = [r for r in plan(c) if r.kind == "check"]
    if not runs:
        return []
    sigs, _ = read_signatures([r.path for r in runs if r.repetition == 1], progress=progress)
    sigs = _medians(sigs, runs, progress or (lambda m: None))
    mode = compute.logical.work_mode
    rows = []
    for sig in sorted(sigs, key=lambda s: s.nprocs):
        P = sig.nprocs
        if len(sig.phases) != len(compute.logical.phases):
            raise CampaignError(f"{sig.source}: the check run at P={P} has {len(sig.phases)} phases, the "
                                f"model {len(compute.logical.phases)}; its phases cannot be compared")
        for k, (ph, crm) in enumerate(zip(compute.logical.phases, compute.crms)):
            note = "" if sig.phases[k].kind == ph.kind else f"kind {sig.phases[k].kind} in the check run"
            rows.append(CheckRow(
                P=P, phase=k, kind=ph.kind, weight_measured=int(sig.phases[k].weight),
                weight_predicted=int(np.rint(np.asarray(ph.weight.predict(P)).reshape(-1)[0])),
                measured=_time_per_rep(sig, k, mode),
                predicted=float(np.asarray(crm.predict(P)).reshape(-1)[0]),
                predicted_base=float(np.asarray(crm.base.predict(P)).reshape(-1)[0]), note=note))
    return rows
