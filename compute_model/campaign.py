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
    traces = "traces/stencil"   # where traces go (default: runs/<app>), relative to the file
    [params]                    # other {placeholders} of the command
    iters = 400
    [small_params]              # their values in the small-workload runs (default: params)
    iters = 1000

:func:`load` reads and checks it: every placeholder of the command must be
known, the signature and small P must be P the application accepts, the
work expression must parse. :func:`run` performs the runs that are missing:
a complete trace made by the same command is reused, an incomplete one is
run again, one made by a different command is refused (nothing is
overwritten). A failing run stops the campaign with a message naming the run
and its command; every trace already made is kept, so running again resumes.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import string
import tomllib
from pathlib import Path
from typing import Any, Callable

from signature.errors import CampaignError, TraceFormatError

from .crm import accepted_p, work_function

__all__ = ["Campaign", "Run", "load", "run", "plan"]

_KEYS = {"app", "command", "workload", "original", "small", "p_rule", "signature_p", "small_p", "work",
         "target", "traces", "params", "small_params", "description", "timeout"}


@dataclasses.dataclass(frozen=True)
class Run:
    """One traced run of the campaign."""

    kind: str  # "signature" or "small"
    P: int
    workload: float | int
    command: tuple[str, ...]
    path: Path

    def describe(self) -> str:
        return f"{self.kind} run P={self.P} workload={self.workload}"


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

    @property
    def rule_name(self) -> str | None:
        return self.p_rule if isinstance(self.p_rule, str) else None

    def accepts(self, P: int) -> bool:
        if isinstance(self.p_rule, tuple):
            return P in self.p_rule
        return bool(len(accepted_p(self.p_rule, P, P)))

    def command_for(self, workload, params: dict[str, Any]) -> tuple[str, ...]:
        values = {**params, self.workload: workload}
        try:
            text = self.command.format(**values)
        except (KeyError, IndexError) as err:
            raise CampaignError(f"{self.path}: the command uses {{{err.args[0]}}}, which is neither "
                                f"the workload ({self.workload}) nor in [params]") from err
        return tuple(shlex.split(text))


def _num(x, what: str, path: Path):
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise CampaignError(f"{path}: {what} must be a number, got {x!r}")
    return x


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
    wl = d["workload"]
    if not re.fullmatch(r"[A-Za-z_]\w*", str(wl)):
        raise CampaignError(f"{path}: workload must be a name like n, got {wl!r}")
    fields = {f[1] for f in string.Formatter().parse(d["command"]) if f[1]}
    if wl not in fields:
        raise CampaignError(f"{path}: the command does not use the workload: put {{{wl}}} where the "
                            f"application takes it, e.g. --n {{{wl}}}")
    params = dict(d.get("params", {}))
    small_params = {**params, **dict(d.get("small_params", {}))}
    missing = sorted(fields - set(params) - {wl})
    if missing:
        raise CampaignError(f"{path}: the command uses {', '.join('{' + m + '}' for m in missing)}, "
                            "which [params] does not give")
    rule = d.get("p_rule", "any")
    if isinstance(rule, list):
        rule = tuple(int(p) for p in rule)
    elif rule not in ("any", "squares", "cubes", "powers_of_two"):
        raise CampaignError(f"{path}: p_rule {rule!r} is not any, squares, cubes, powers_of_two or a "
                            "list of P")
    sig_p = tuple(int(p) for p in d["signature_p"])
    if len(set(sig_p)) < 3:
        raise CampaignError(f"{path}: signature_p needs 3 or more different P (got {list(sig_p)}): "
                            "fewer cannot tell a model from noise")
    base = path.parent
    traces = Path(d.get("traces", f"runs/{d['app']}"))
    c = Campaign(path=path, app=str(d["app"]), command=d["command"], workload=wl,
                 original=_num(d["original"], "original", path),
                 small=tuple(_num(x, "small", path) for x in d.get("small", [])), p_rule=rule,
                 signature_p=sig_p, small_p=tuple(int(p) for p in d.get("small_p", sig_p)),
                 work=d.get("work"), target=int(d["target"]),
                 traces=traces if traces.is_absolute() else (base / traces).resolve(),
                 params=params, small_params=small_params, timeout=d.get("timeout"),
                 description=d.get("description", ""))
    for kind, ps in (("signature_p", c.signature_p), ("small_p", c.small_p if c.small else ())):
        bad = [p for p in ps if p < 1 or not c.accepts(p)]
        if bad:
            raise CampaignError(f"{path}: {kind} has P={bad[0]}, which the application does not accept "
                                f"(p_rule {rule!r})")
    if c.work is not None:
        try:
            work_function(c.work, wl)
        except Exception as err:  # noqa: BLE001 - reported with the file
            raise CampaignError(f"{path}: {err}") from err
    c.command_for(c.original, params)  # every placeholder resolves
    return c


def plan(c: Campaign) -> list[Run]:
    """Every run the campaign needs, signature runs first."""
    runs = [Run("signature", P, c.original, c.command_for(c.original, c.params), c.traces / f"P{P}.h5")
            for P in c.signature_p]
    for i, w in enumerate(c.small):
        folder = c.traces / ("small" if len(c.small) == 1 else f"small-{w}")
        runs += [Run("small", P, w, c.command_for(w, c.small_params), folder / f"P{P}.h5")
                 for P in c.small_p]
    return runs


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
    return "complete" if t.complete else "incomplete"


def run(c: Campaign, *, progress: Callable[[str], None] | None = None, stdout=None,
        mpiexec: str | None = None) -> list[Run]:
    """Perform the missing runs; returns every run of the plan (all complete)."""
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
    for i, (r, st) in enumerate(todo):
        r.path.parent.mkdir(parents=True, exist_ok=True)
        say(f"[{i + 1}/{len(todo)}] {r.describe()}{' (again: incomplete)' if st == 'incomplete' else ''}: "
            f"{' '.join(r.command)}")
        try:
            res = trace_run(list(r.command), r.P, r.path, workload=f"{c.workload}={r.workload}",
                            app=c.app, overwrite=(st == "incomplete"), timeout=c.timeout,
                            stdout=stdout, mpiexec=mpiexec, progress=None)
        except FileNotFoundError as err:
            raise CampaignError(f"{r.describe()}: cannot start `{' '.join(r.command)}` ({err}); "
                                "the traces made so far are kept") from err
        if not res.ok:
            raise CampaignError(
                f"{r.describe()} failed (exit {res.returncode}): `{' '.join(r.command)}`; "
                f"{res.trace.meta.get('incomplete_reason') or 'see its output above'}. The trace is kept "
                f"as {r.path} (incomplete) with the {i} made before it; fix the command and run the "
                "campaign again to resume")
    return runs


def models(c: Campaign, *, progress: Callable[[str], None] | None = None):
    """The logical and compute models of a campaign's (complete) runs."""
    from .physical import from_traces

    runs = plan(c)
    small = [r.path for r in runs if r.kind == "small" and r.workload == (c.small[0] if c.small else None)]
    compute = from_traces([r.path for r in runs if r.kind == "signature"], small=small or None,
                          work=c.work, p_rule=c.rule_name if c.rule_name != "any" else None,
                          P_max=max(c.target * 4, 1 << 16), progress=progress)
    return compute.logical, compute
