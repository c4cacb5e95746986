"""Real applications from the package registries, traced by sigex: the capture part.

The applications (Debian 12, all built on Open MPI 4.1; install with
``apt-get install lammps lammps-examples gromacs python3-mpi4py-fft hpcc libopenmpi-dev``):

* ``melt``     LAMMPS ``examples/melt/in.melt``, box enlarged to 16^3 (16,384 atoms), 500 steps
               (neighbour lists rebuilt every 20 steps, thermo output every 50);
* ``peptide``  LAMMPS ``examples/peptide/in.peptide`` (PPPM long-range solver, 300 steps);
* ``gromacs``  GROMACS ``gmx_mpi mdrun`` on an SPC/E water box (5 nm, 12,165 atoms) made with
               ``gmx solvate`` from the package's ``spc216.gro``, energy-minimised, PME,
               400 steps, ``-ntomp 1 -npme P/4``;
* ``fft3d``    ``bench/apps/fft3d_loop.py`` on python3-mpi4py-fft: 4,000 forward+backward 3-D
               FFTs of 64^3 on 2-D pencils (``MPI_Alltoallw`` transposes), so that its time
               loop holds over 90% of the run at every P, as a real FFT code's does (at 40
               steps the interpreter's and the plans' set-up took 60-75% of it);
* ``hpcc``     HPC Challenge with the package's example input, N = 1000, P x Q per P.

For every app and P (default 4, 8, 16, 32: oversubscribed on a 2-core machine) the
bench runs the app untraced and traced with the same launcher and environment, and
reports: the trace complete, its events, the calls sigex does not model (MPI
functions that communicate and that sigex only counted; goal 0), the tracing
overhead (traced / untraced launcher wall time - 1, best of ``--reps`` alternating runs,
after one untraced warm-up run that fills the page cache; goal <= 5%), the same for the
CPU time of the launcher and its ranks (less disturbed than wall time when other work
shares the machine, though ranks that spin while they wait spend more of it when their
peers are descheduled; best of ``--reps``, and the ratio of the medians), the tracer's own work as a share of the untraced run's CPU time
(its events, held polls and clock readings times their unit costs from
``bench/tracer_overhead.py``'s ``unit_costs``: an event and a clock reading by ``call_cost`` at
P = 1, undisturbed by other load but without start-up, write-back and cache effects; a held
poll measured in a loop, ``poll_loop``'s long loops of polls that yield the CPU as hpcc's do,
where a poll costs the tracer more than at P = 1), how the tracer
sampled burst CPU times (lazily by default, with the share of bursts estimated; see
docs/trace-format.md) and the application's own account of itself beside the trace's (LAMMPS steps and
neighbour-list builds; GROMACS domain-decomposition grid and PME ranks; hpcc P x Q).

Runs and traces are cached in ``bench/_apps/`` (``--force`` redoes them; ``--out`` caches
elsewhere). As every bench: a table, then one JSON line with the figures and the goals.

    python bench/validate_apps.py                      # everything (about 15 minutes here)
    python bench/validate_apps.py --apps melt --p 4 8  # a part
    python bench/validate_apps.py --part signature     # signatures of the cached traces
    SIGEX_CPU_SAMPLE_MIN_US=0 python bench/validate_apps.py --out /tmp/always  # sampling always

The signature part (``--part signature``) extracts each cached trace's signature and
sets it beside the application's own account: coverage (the share of the run's time
inside phases that repeat, mean over ranks and on the slowest rank; goal >= 90%), Eq. 4
against the measured runtime (goal within 5%), the loop's iterations against the
application's step count (and, for LAMMPS, the steps that rebuild neighbour lists
against its "Neighbor list builds"), hpcc's kernels against the times it reports itself,
and the detector's speed (events per CPU second of ``extract``, less disturbed than wall
time by other work on the machine; this process keeps the memory it frees, as the
``sigex`` command's does: ``signature/_memory.py``).

The predict part (``--part predict``) makes the whole prediction at P = 32 from the
models of P = 4, 8, 16 (the phases that cannot be placed there left out, with their
share of the real run) and sets each placed phase's computation per process beside the
real run's (thread CPU time: the real run is oversubscribed, its wall time is not a
32-core runtime; both are shown). Where the real run's phases differ, each placed phase
is set beside the real phase related to it by position, as in the logical part.

The logical part (``--part logical``) fits each application's logical model at P = 4, 8,
16 and holds out P = 32: per phase, extrapolated or refused (the reason, one line); an
extrapolated phase's events at P = 32 against the real run's, rank by rank and event by
event (op, peer, receive peer, root, tag, bytes), its weight exactly; where sizes depend
on the data (LAMMPS's atom exchange), or calls per rank are expected values (a statistical
phase: LAMMPS's PPPM remaps, mpi4py's tree reduce; "deferred" where no rank class orders
its calls: GROMACS's set-up, realised with nonblocking calls and one Waitall at its end),
the messages and bytes per rank class instead (goal within 5%), and the model's build
time (CPU seconds). Where the real run's phases differ from the fit's (a kernel's phase
that repeats at the fit P and not at P = 32), the two are related by position (the
longest runs of phases alike in kind and operations, in order) and each related phase is
compared with its own; an app counts as exact only where its phases are the same.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from signature.errors import SigexError  # noqa: E402
from signature import load_trace, trace_run, tracer_library, unmodelled_calls  # noqa: E402
from signature.capture import launch_for, run_environment  # noqa: E402

OUT = ROOT / "bench" / "_apps"
LAMMPS_EX = Path("/usr/share/lammps/examples")
GMX_TOP = Path("/usr/share/gromacs/top")
HPCC_INF = Path("/usr/share/doc/hpcc/examples/_hpccinf.txt")
#: the FFT loop's steps: a loop of 2-17 ms a step (P = 4-32 here) well over 90% of a run
#: whose set-up (interpreter, mpi4py-fft's plans) takes 0.8-3.3 s
FFT_STEPS = 4000
APT = "apt-get install lammps lammps-examples gromacs python3-mpi4py-fft hpcc libopenmpi-dev"
GOAL_OVERHEAD = 0.05


@dataclasses.dataclass
class App:
    name: str
    needs: tuple[str, ...]                       # programs or files that must exist
    setup: Callable[[Path], None]                # once per app, in its folder
    command: Callable[[Path, int], list[str]]    # in the run folder of one P
    account: Callable[[Path, str], dict]         # the app's own report: folder, stdout

    def available(self) -> str | None:
        missing = [n for n in self.needs if not (shutil.which(n) or Path(n).exists())]
        return None if not missing else f"missing {', '.join(missing)} ({APT})"


# ---- LAMMPS ----------------------------------------------------------------------
def _lammps_setup(deck: str, box: int | None = None, run: int | None = None, extra=()):
    def setup(folder: Path) -> None:
        src = LAMMPS_EX / deck
        for f in src.iterdir():
            shutil.copy(f, folder / f.name)
        inp = folder / f"in.{deck}"
        text = inp.read_text()
        if box is not None:
            text = re.sub(r"region\s+box\s+block\s+0 10 0 10 0 10",
                          f"region\t\tbox block 0 {box} 0 {box} 0 {box}", text)
        if run is not None:
            text = re.sub(r"^run\s+\d+", f"run\t\t{run}", text, flags=re.M)
        inp.write_text(text)
    return setup


def _lammps_account(folder: Path, out: str) -> dict:
    loop = re.search(r"Loop time of ([\d.eE+-]+) on (\d+) procs for (\d+) steps", out)
    builds = re.search(r"Neighbor list builds = (\d+)", out)
    grid = re.search(r"(\d+) by (\d+) by (\d+) MPI processor grid", out)
    return {"steps": int(loop.group(3)) if loop else None,
            "loop_time": float(loop.group(1)) if loop else None,
            "neighbor_builds": int(builds.group(1)) if builds else None,
            "grid": "x".join(grid.groups()) if grid else None}


def _lammps_command(deck: str):
    def command(folder: Path, P: int) -> list[str]:
        for f in folder.parent.iterdir():  # the deck reads its data files where it runs
            if f.is_file() and not f.name.startswith("."):
                shutil.copy(f, folder / f.name)
        return ["lmp", "-in", f"in.{deck}", "-log", "none"]
    return command


# ---- GROMACS ---------------------------------------------------------------------
_MDP_EM = """integrator = steep
nsteps = 500
emtol = 1000
cutoff-scheme = Verlet
coulombtype = PME
rcoulomb = 1.0
rvdw = 1.0
"""
_MDP_MD = """integrator = md
dt = 0.002
nsteps = 400
cutoff-scheme = Verlet
nstlist = 10
coulombtype = PME
rcoulomb = 1.0
rvdw = 1.0
fourierspacing = 0.125
tcoupl = v-rescale
tc-grps = System
tau_t = 0.1
ref_t = 300
gen-vel = yes
gen-temp = 300
nstcalcenergy = 100
nstenergy = 100
nstlog = 100
"""


def _gromacs_setup(folder: Path) -> None:
    def gmx(*args):
        subprocess.run(["gmx_mpi", *args], cwd=folder, check=True, capture_output=True,
                       env={**os.environ, **_OMPI_ROOT})
    gmx("solvate", "-cs", "spc216.gro", "-box", "5", "5", "5", "-o", "water.gro")
    n = sum(1 for ln in (folder / "water.gro").read_text().splitlines() if "OW" in ln)
    (folder / "topol.top").write_text('#include "oplsaa.ff/forcefield.itp"\n'
                                      '#include "oplsaa.ff/spce.itp"\n\n[ system ]\nSPC/E water\n\n'
                                      f"[ molecules ]\nSOL {n}\n")
    (folder / "em.mdp").write_text(_MDP_EM)
    (folder / "md.mdp").write_text(_MDP_MD)
    gmx("grompp", "-f", "em.mdp", "-c", "water.gro", "-p", "topol.top", "-o", "em.tpr")
    subprocess.run(["mpirun.openmpi", "-n", "2", "gmx_mpi", "mdrun", "-s", "em.tpr", "-ntomp", "1",
                    "-deffnm", "em", "-nb", "cpu"], cwd=folder, check=True, capture_output=True,
                   env={**os.environ, **_OMPI_ROOT})
    gmx("grompp", "-f", "md.mdp", "-c", "em.gro", "-p", "topol.top", "-o", "md.tpr")


_OMPI_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def _gromacs_command(folder: Path, P: int) -> list[str]:
    return ["gmx_mpi", "mdrun", "-s", str(folder.parent / "md.tpr"), "-ntomp", "1",
            "-npme", str(max(1, P // 4)), "-nb", "cpu", "-deffnm", "md"]


def _gromacs_account(folder: Path, out: str) -> dict:
    log = (folder / "md.log").read_text(errors="replace") if (folder / "md.log").exists() else ""
    dd = re.search(r"Domain decomposition grid (\d+) x (\d+) x (\d+), separate PME ranks (\d+)", log)
    steps = re.findall(r"^\s+Step\s+Time\s*\n\s+(\d+)", log, flags=re.M)
    core = re.search(r"^\s+Time:\s+([\d.]+)\s+([\d.]+)", log, flags=re.M)
    return {"grid": "x".join(dd.groups()[:3]) if dd else None,
            "pme_ranks": int(dd.group(4)) if dd else None,
            "steps": int(steps[-1]) if steps else None,
            "wall_gmx": float(core.group(2)) if core else None}


# ---- mpi4py-fft and hpcc ---------------------------------------------------------
def _fft_account(folder: Path, out: str) -> dict:
    m = re.search(r"steps=(\d+) P=(\d+) pencils=(\S+) max round-trip error (\S+)", out)
    loop = re.search(r"Loop time of (\S+) s", out)
    return {"steps": int(m.group(1)) if m else None, "pencils": m.group(3) if m else None,
            "error": m.group(4) if m else None,
            "loop_time": float(loop.group(1)) if loop else None}


_PQ = {1: (1, 1), 2: (1, 2), 4: (2, 2), 8: (2, 4), 16: (4, 4), 32: (4, 8), 64: (8, 8)}


def _hpcc_command(folder: Path, P: int) -> list[str]:
    p, q = _PQ.get(P, (1, P))
    lines = HPCC_INF.read_text().splitlines()
    lines[10] = f"{p}            Ps"
    lines[11] = f"{q}            Qs"
    (folder / "hpccinf.txt").write_text("\n".join(lines) + "\n")
    return ["hpcc"]


def _hpcc_account(folder: Path, out: str) -> dict:
    """hpcc's own account of its last run in ``hpccoutf.txt`` (the file grows by one run per
    launch): the grid, whether it finished, its sections in order, the times its kernels
    report themselves (RandomAccess and its LCG variant, HPL, PTRANS), and each section's
    wall time from the 1-second "Current time" stamps hpcc prints as a section ends."""
    f = folder / "hpccoutf.txt"
    text = f.read_text(errors="replace") if f.exists() else ""
    text = text.split("This is the DARPA/DOE HPC Challenge Benchmark")[-1]
    pr = re.search(r"^HPL_nprow=(\d+)", text, flags=re.M)
    pc = re.search(r"^HPL_npcol=(\d+)", text, flags=re.M)
    done = "End of HPC Challenge tests" in text
    kernels = {}
    for name, key in (("MPIRandomAccess", "MPIRandomAccess_time"),
                      ("MPIRandomAccess_LCG", "MPIRandomAccess_LCG_time"),
                      ("HPL", "HPL_time"), ("PTRANS", "PTRANS_time")):
        m = re.search(rf"^{key}=(\S+)", text, flags=re.M)
        if m:
            kernels[name] = float(m.group(1))
    # the updates each RandomAccess kernel ran (all ranks), per kernel in the order it ran
    updates = {}
    for block in re.split(r"^Begin of ", text, flags=re.M)[1:]:
        name = block.split(" section", 1)[0]
        m = re.search(r"^Number of updates EXECUTED = (\d+)", block, flags=re.M)
        if name.startswith("MPIRandomAccess") and m:
            updates[name] = int(m.group(1))
    walls, last = {}, None
    for m in re.finditer(r"Current time \((\d+)\)[^\n]*\n+(?:[^\n]*\n)??End of (\w+) section", text):
        stamp = int(m.group(1))
        if last is not None and m.group(2) != "Summary":
            walls[m.group(2)] = stamp - last
        last = stamp
    return {"grid": f"{pr.group(1)}x{pc.group(1)}" if pr and pc else None, "finished": done,
            "sections": re.findall(r"^Begin of (\w+) section", text, flags=re.M),
            "kernel_times": kernels, "section_walls": walls, "updates_executed": updates}


APPS = {
    "melt": App("melt", ("lmp", str(LAMMPS_EX / "melt")),
                _lammps_setup("melt", box=16, run=500), _lammps_command("melt"), _lammps_account),
    "peptide": App("peptide", ("lmp", str(LAMMPS_EX / "peptide")),
                   _lammps_setup("peptide"), _lammps_command("peptide"), _lammps_account),
    "gromacs": App("gromacs", ("gmx_mpi", "mpirun.openmpi", str(GMX_TOP)), _gromacs_setup,
                   _gromacs_command, _gromacs_account),
    "fft3d": App("fft3d", ("/usr/bin/python3", "/usr/lib/python3/dist-packages/mpi4py_fft"),
                 lambda folder: None,
                 lambda folder, P: ["/usr/bin/python3", str(ROOT / "bench" / "apps" / "fft3d_loop.py"),
                                    "--n", "64", "--steps", str(FFT_STEPS)], _fft_account),
    "hpcc": App("hpcc", ("hpcc", str(HPCC_INF)), lambda folder: None, _hpcc_command, _hpcc_account),
}


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _timed(argv, env, folder: Path, log: Path) -> tuple[int, float, float]:
    """Exit status, wall seconds and CPU seconds of the launcher and its ranks."""
    c0, t0 = _children_cpu(), time.perf_counter()
    with open(log, "w") as f:
        rc = subprocess.run(argv, env=env, cwd=folder, stdout=f, stderr=subprocess.STDOUT).returncode
    return rc, time.perf_counter() - t0, _children_cpu() - c0


def measure(app: App, P: int, reps: int, force: bool, out: Path = OUT) -> dict:
    folder = out / app.name / f"P{P}"
    record = folder / "result.json"
    if record.exists() and not force:
        return json.loads(record.read_text())
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    base = folder.parent
    if not (base / ".setup-done").exists() or force:
        app.setup(base)
        (base / ".setup-done").write_text("ok")
    command = app.command(folder, P)
    launch = launch_for(command)
    env = run_environment(P)
    tracer_library(mpicc=launch.mpicc)  # built (once per tracer source) before anything is timed
    untraced, traced, cpu_untraced, cpu_traced = [], [], [], []
    trace_path = folder / f"P{P}.h5"
    here = os.getcwd()
    os.chdir(folder)  # the apps read and write files where they run
    try:
        _timed(launch.argv(command, P, (), env), launch.environment(env), folder,
               folder / "warmup.out")
        for rep in range(reps):
            rc, wall, cpu = _timed(launch.argv(command, P, (), env), launch.environment(env),
                                   folder, folder / "untraced.out")
            if rc != 0:
                raise SystemExit(f"{app.name} P={P}: the untraced run failed (exit {rc}); see "
                                 f"{folder / 'untraced.out'}")
            untraced.append(wall)
            cpu_untraced.append(cpu)
            c0 = _children_cpu()  # the launcher and its ranks (trace assembly is in this process)
            with open(folder / "traced.out", "w") as f:
                res = trace_run(command, P, trace_path, overwrite=True, stdout=f, app=app.name)
            traced.append(res.wall_time)
            cpu_traced.append(_children_cpu() - c0)
    finally:
        os.chdir(here)
    out_text = (folder / "traced.out").read_text(errors="replace")
    t = load_trace(trace_path, allow_incomplete=True)
    calls = unmodelled_calls(t.meta)
    comm_calls = [c for c in calls if not c.local]
    cart = _trace_grid(t)
    result = {
        "app": app.name, "P": P, "complete": bool(t.complete), "events": int(t.n_events),
        "unmodelled_calls": sum(c.calls for c in comm_calls),
        "unmodelled": [f"{c.name} x{c.calls}" for c in comm_calls],
        "local_calls": sum(c.calls for c in calls if c.local),
        "untraced_s": min(untraced), "traced_s": min(traced),
        "overhead": min(traced) / min(untraced) - 1,
        "untraced_cpu_s": min(cpu_untraced), "traced_cpu_s": min(cpu_traced),
        "cpu_overhead": min(cpu_traced) / min(cpu_untraced) - 1,
        "cpu_overhead_median": statistics.median(cpu_traced) / statistics.median(cpu_untraced) - 1,
        "untraced_cpu_all_s": cpu_untraced, "traced_cpu_all_s": cpu_traced,
        "own_account": app.account(folder, out_text),
        "trace_grid": cart, "mpi": t.meta.get("mpi_library", "")[:40],
        **_tracer_counts(t),
        "cpu_sampling": t.meta.get("cpu_sampling", "always"),
        "cpu_bursts_estimated_share": t.meta.get("cpu_bursts_estimated_share", 0.0),
        "untraced_all_s": untraced, "traced_all_s": traced,
    }
    record.write_text(json.dumps(result, indent=1))
    return result


def _tracer_counts(t) -> dict:
    """What the tracer did in a run: events written, extra polls folded into held events,
    clock readings (lazily sampled traces record them; else two per event)."""
    polls = int(t.events["repeat"].sum()) - t.n_events if "repeat" in t.events else 0
    return {"polls": polls,
            "cpu_samples": int(t.meta.get("cpu_samples", 2 * t.n_events))}


def tracer_work(r: dict, costs: dict) -> float:
    """CPU seconds the tracer's own work took in a run (all ranks), from its counts and the
    unit costs measured by ``tracer_overhead.unit_costs`` (a held poll's in a polling loop
    whose polls yield the CPU, events and readings at P = 1): it leaves out what the unit
    costs do not hold (start-up, trace files written back)."""
    return (r["events"] * costs["event_s"] + r.get("polls", 0) * costs["poll_s"]
            + r.get("cpu_samples", 0) * costs["sample_s"])


def _trace_grid(t) -> str | None:
    """The largest Cartesian communicator the trace recorded, as 'a x b x c'."""
    c = t.comms
    best = None
    for i in range(len(c.size)):
        dims = c.cart_dims[c.cart_offsets[i]:c.cart_offsets[i + 1]]
        if len(dims) and (best is None or c.size[i] > best[0]):
            best = (int(c.size[i]), "x".join(map(str, dims)))
    return best[1] if best else None


# ---- signature part (#24) --------------------------------------------------------
GOAL_COVERAGE = 0.90
GOAL_EQ4 = 0.05


def _rebuild_weight(sig) -> int:
    """LAMMPS: the steps that rebuild the neighbour lists exchange atoms first, with a
    Sendrecv of the counts per swap; no other step calls Sendrecv."""
    return sum(p.weight for p in sig.loop_phases if "Sendrecv" in p.ops)


def _gromacs_counts(folder: Path) -> dict:
    """GROMACS's own counts of its kinds of step, from the cycle accounting in md.log
    ("Call Count"): force evaluations (every step, 0 to nsteps), neighbour searches and
    energy reductions (every nstcalcenergy-th step, changed by mdrun)."""
    log = (folder / "md.log").read_text(errors="replace") if (folder / "md.log").exists() else ""
    counts = {}
    for key, name in (("steps", "Force"), ("neighbour_searches", "Neighbor search"),
                      ("energy_steps", "Comm. energies")):
        m = re.search(rf"^ {re.escape(name)}\s+\d+\s+\d+\s+(\d+)\s", log, flags=re.M)
        counts[key] = int(m.group(1)) if m else None
    return counts


def _gromacs_kinds(sig) -> dict:
    """The loop's steps by kind, as GROMACS counts them: the neighbour-search steps are
    the loop phases with twice the calls of the commonest one (they repartition the
    domains), the energy steps those that call Allreduce (a neighbour-search step
    reduces energies too)."""
    loops = list(sig.loop_phases)
    if not loops:
        return {"steps": 0, "neighbour_searches": 0, "energy_steps": 0}
    plain = max(loops, key=lambda p: p.weight)
    calls = float(np.nansum(plain.stats["events"]))
    return {"steps": sum(p.weight for p in loops),
            "neighbour_searches": sum(p.weight for p in loops if np.nansum(p.stats["events"]) >= 2 * calls),
            "energy_steps": sum(p.weight for p in loops if "Allreduce" in p.ops)}


def _update_loop(trace, sections, k: int) -> dict:
    """What RandomAccess's update loop leaves in section k of the trace, per rank: hpcc's loop
    makes one update per iteration and polls for incoming buckets (Testany) at every
    iteration, once more after each bucket that arrived (which it re-posts the receive of,
    Irecv), and tests its last send (Test) instead of updating when its buckets are full
    (a bucket sent: Isend). The held polls (``repeat``) count every poll, so the polls less
    the re-posts and the send tests are the loop's updates (the count hpcc sets: its
    updates / P); the buckets sent (Isend after a Test) are as the random data fills them."""
    from signature import OP_CODE
    ev = trace.events
    test, testany, irecv, isend = (OP_CODE[n] for n in ("Test", "Testany", "Irecv", "Isend"))
    rep = ev["repeat"] if "repeat" in ev else np.ones(len(ev["op"]), np.int32)
    ro = trace.rank_offsets
    updates, buckets = [], []
    for r in range(trace.nprocs):
        a = int(ro[r]) + 1
        o = ev["op"][a + int(sections[r, k]):a + int(sections[r, k + 1])]
        rp = rep[a + int(sections[r, k]):a + int(sections[r, k + 1])]
        reposts = int(np.sum((o[1:] == irecv) & (o[:-1] == testany)))
        updates.append(int(rp[o == testany].sum()) - reposts - int(np.sum(o == test)))
        buckets.append(int(np.sum((o[1:] == isend) & (o[:-1] == test))))
    return {"updates_per_rank": [min(updates), max(updates)], "buckets_per_rank": [min(buckets), max(buckets)]}


def _hpcc_kernels(sig, own: dict, trace=None) -> list[dict]:
    """hpcc's timed kernels beside the sections sigex found (``Phase.section``: the run cut
    at the global synchronisation between kernels): for each kernel that holds 0.5% of the
    run or more, the section whose time (sum of TE x W of its phases) is nearest to the
    kernel's own among those after the previous kernel's, and what its phases are; for
    the RandomAccess kernels, hpcc's updates per rank beside what the trace's polls say
    (``_update_loop``: the kernel's loop count, which no event boundary shows)."""
    time_of: dict[int, float] = {}
    phases_of: dict[int, list] = {}
    for p in sig.phases:
        time_of[p.section] = time_of.get(p.section, 0.0) + p.te * p.weight
        phases_of.setdefault(p.section, []).append(p)
    out = []
    order = own.get("sections", [])
    timed = sorted(own.get("kernel_times", {}).items(),
                   key=lambda kt: order.index(kt[0]) if kt[0] in order else len(order))
    after = -1  # hpcc runs its kernels in the order it lists them: so do the sections
    for name, t in timed:
        later = [k for k in time_of if k > after]
        if t < 0.005 * sig.runtime or not later:
            continue
        k = min(later, key=lambda k: abs(math.log(max(time_of[k], 1e-9) / t)))
        after = k
        ps = phases_of[k]
        big = max(ps, key=lambda p: p.te * p.weight)
        loops = [p for p in ps if p.kind == "loop" and p.weight >= 2]
        row = {"kernel": name, "hpcc_s": t, "section": k, "section_s": time_of[k],
               "phases": len(ps), "repeated": len(loops),
               "largest": f"{big.kind} w{big.weight}: {big.pattern[:60]}"}
        if trace is not None and name in own.get("updates_executed", {}):
            from signature.align import global_sections
            sections = global_sections(trace)
            if sections is not None and k < sections.shape[1] - 1:
                row["hpcc_updates_per_rank"] = own["updates_executed"][name] // sig.nprocs
                row.update(_update_loop(trace, sections, k))
        out.append(row)
    return out


def _cut_apart(sig) -> list[int]:
    """The loop phases in which two ranks that make the same calls (op and communicator, as
    multisets) make them as rotations of one sequence: the signature cut their iterations
    at different calls of one cycle (GROMACS's particle ranks before the common cut)."""
    out = []
    for p in sig.loop_phases:
        groups: dict[tuple, set] = {}
        for r in range(sig.nprocs):
            t = p.rank_template(r)
            seq = tuple(zip(t["op"].tolist(), t["comm"].tolist()))
            groups.setdefault(tuple(sorted(seq)), set()).add(seq)
        if any(any(b == a[i:] + a[:i] for a in seqs for b in seqs if a != b for i in range(1, len(a)))
               for seqs in groups.values()):
            out.append(p.id)
    return out


def signature_row(app: str, P: int, out: Path = OUT) -> dict:
    """The signature of one cached trace beside the application's own account."""
    from signature import extract
    folder = out / app / f"P{P}"
    record = json.loads((folder / "result.json").read_text())
    trace = load_trace(folder / f"P{P}.h5")
    t0, c0 = time.perf_counter(), time.process_time()
    sig = extract(trace)
    wall, took = time.perf_counter() - t0, time.process_time() - c0  # CPU: less disturbed by other load
    own = record["own_account"]
    if app == "hpcc":  # read again: runs captured before the kernels' times were kept
        own = {**own, **_hpcc_account(folder, "")}
    iterations = int(sum(p.weight for p in sig.loop_phases))
    repeated = [p for p in sig.loop_phases if p.weight >= 2]
    check = {"steps": own.get("steps")}
    found = {"steps": iterations}
    if app in ("melt", "peptide"):
        check["rebuilds"] = own.get("neighbor_builds")
        found["rebuilds"] = _rebuild_weight(sig)
    if app == "gromacs":
        # GROMACS counts steps 0 to nsteps; its first step (the first partitioning of the
        # system) is sigex's initial part, and the loop holds the nsteps others: the last
        # (a neighbour-search and energy step like any other) included, the final frame's
        # collection and the run's statistics after it being the final part
        check = {k: (v - 1 if v else None) for k, v in _gromacs_counts(folder).items()}
        found = _gromacs_kinds(sig)
    match = all(v is not None and found[k] == v for k, v in check.items()) if check["steps"] else None
    # LAMMPS and the FFT loop time their own run loop ("Loop time"), GROMACS its run
    # ("Time: ... wall" in md.log, from the start of the MD loop): their share of the run
    loop_time = own.get("loop_time") or own.get("wall_gmx")
    own_share = loop_time / sig.runtime if loop_time and sig.runtime > 0 else None
    kernels = _hpcc_kernels(sig, own, trace) if app == "hpcc" else None
    return {"app": app, "P": P, "events": int(record["events"]), "seconds": took, "wall_seconds": wall,
            "kernels": kernels,
            "events_per_s": record["events"] / took if took > 0 else float("inf"),
            "coverage": sig.coverage, "coverage_slowest": sig.coverage_slowest,
            "loop_span": sig.loop_span, "eq4_error": sig.pet_error,
            "phases": len(sig.phases), "repeated_phases": len(repeated),
            "top_weights": sorted((p.weight for p in repeated), reverse=True)[:4],
            "own": check, "found": found, "weights_match": match, "own_loop_share": own_share,
            "main_loop_missing": sig.main_loop_missing is not None,
            "cut_apart": _cut_apart(sig),
            # the phase list (kinds and, for loops, their calls): what must correspond across P
            "phase_list": [(p.kind, list(p.ops) if p.kind == "loop" else []) for p in sig.phases]}


def signature_part(apps: list[str], Ps: list[int], out: Path = OUT) -> dict:
    rows = []
    for app in apps:
        for P in Ps:
            if not (out / app / f"P{P}" / "result.json").exists():
                print(f"{app} P={P}: no cached run (run the capture part first)", file=sys.stderr)
                continue
            print(f"{app} P={P} ...", file=sys.stderr, flush=True)
            rows.append(signature_row(app, P, out))
    head = ("app", "P", "events", "coverage", "slowest", "app's loop", "Eq. 4 error", "phases (repeated)",
            "largest weights", "app's count", "found", "M events/s (CPU)")
    table = [head]
    for r in rows:
        table.append((r["app"], str(r["P"]), f"{r['events']:,}", f"{100 * r['coverage']:.1f}%",
                      f"{100 * r['coverage_slowest']:.1f}%",
                      "-" if r["own_loop_share"] is None else f"{100 * r['own_loop_share']:.1f}%",
                      f"{100 * r['eq4_error']:.2f}%",
                      f"{r['phases']} ({r['repeated_phases']})", " ".join(map(str, r["top_weights"])),
                      ", ".join(f"{k} {v}" for k, v in r["own"].items()),
                      ", ".join(f"{k} {v}" for k, v in r["found"].items())
                      + ("" if r["weights_match"] is None else (" ok" if r["weights_match"] else " DIFFERENT")),
                      f"{r['events_per_s'] / 1e6:.2f}"))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    print("signatures of the real applications' traces (coverage: time inside phases "
          "that repeat, mean over ranks; app's loop: the loop time the app reports itself / the run)\n")
    for k, row in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    def loop_counts(k: dict) -> tuple[str, str, str]:
        if "hpcc_updates_per_rank" not in k:
            return "-", "-", "-"
        return (str(k["hpcc_updates_per_rank"]), "-".join(map(str, k["updates_per_rank"])),
                "-".join(map(str, k["buckets_per_rank"])))
    kernel_rows = [(r["app"], str(r["P"]), k["kernel"], f"{k['hpcc_s']:.3f}", str(k["section"]),
                    f"{k['section_s']:.3f}", f"{100 * (k['section_s'] / k['hpcc_s'] - 1):+.1f}%",
                    f"{k['phases']} ({k['repeated']})", *loop_counts(k), k["largest"])
                   for r in rows for k in (r.get("kernels") or [])]
    if kernel_rows:
        from signature._text import table as text_table
        print("\nhpcc's kernels (its own times in hpccoutf.txt) beside the sections sigex cut at the "
              "global synchronisation between them\n")
        print(text_table(("app", "P", "kernel", "hpcc s", "section", "sigex s", "apart", "phases (repeated)",
                          "updates/rank", "polls say", "buckets/rank", "largest phase"), kernel_rows,
                         align="lrlrrrrrrrrl"))
        print("(updates/rank: hpcc's own count of its RandomAccess loop; polls say: the trace's held polls "
              "less re-posted receives and send tests, per rank; buckets/rank: the sends, as the random "
              "data fills the buckets: no count the program sets, and no lock step across ranks)")
    cov = min((r["coverage"] for r in rows), default=float("nan"))
    eq4 = max((r["eq4_error"] for r in rows), default=float("nan"))
    apps_ok = sorted({r["app"] for r in rows if r["weights_match"]}
                     - {r["app"] for r in rows if r["weights_match"] is False})
    big = max(rows, key=lambda r: r["events"]) if rows else None
    gaps = [r["own_loop_share"] - r["coverage"] for r in rows if r["own_loop_share"] is not None]
    # apps whose phase lists are the same at every P they were traced at (so they correspond)
    lists: dict[str, list] = {}
    for r in rows:
        lists.setdefault(r["app"], []).append(r["phase_list"])
    same = sorted(a for a, ls in lists.items() if len(ls) > 1 and all(x == ls[0] for x in ls))
    print(f"\nthe same phases (kinds, and the calls of the loops) at every P: {', '.join(same) or 'none'}")
    apart = [f"{r['app']} P={r['P']} (phases {', '.join(map(str, r['cut_apart']))})" for r in rows if r["cut_apart"]]
    print(f"loop phases whose ranks alike are cut at different calls of one cycle: {'; '.join(apart) or 'none'}")
    return {
        "bench": "validate_apps", "part": "signature", "apps": sorted({r["app"] for r in rows}),
        "P": Ps, "coverage_min": cov, "eq4_max_error": eq4, "weights_match": apps_ok,
        "largest_trace_events_per_s": big["events_per_s"] if big else None,
        # how far the coverage falls short of the loop share the app reports itself
        "own_loop_gap_max": max(gaps) if gaps else None,
        "same_phases_at_every_P": same,
        # RandomAccess: the most the trace's count of the update loop (from its held polls)
        # is off hpcc's own updates per rank, over ranks, kernels and P (its loop is no
        # phase: the updates are finer than the events, the buckets no count hpcc sets)
        "hpcc_updates_from_polls_max_off": max(
            (max(abs(v - k["hpcc_updates_per_rank"]) for v in k["updates_per_rank"])
             for r in rows for k in (r.get("kernels") or []) if "hpcc_updates_per_rank" in k), default=None),
        # (app, P, loop phases whose ranks alike begin their repetitions at other calls of one cycle)
        "cut_apart": [(r["app"], r["P"], r["cut_apart"]) for r in rows if r["cut_apart"]],
        "goal": {"coverage_min": GOAL_COVERAGE, "eq4_max_error": GOAL_EQ4,
                 "weights_match": "every app with a count of its own",
                 "largest_trace_events_per_s": 2e6},
        "met": {"coverage_min": bool(rows) and cov >= GOAL_COVERAGE,
                "eq4_max_error": bool(rows) and eq4 <= GOAL_EQ4,
                "largest_trace_events_per_s": bool(big) and big["events_per_s"] >= 2e6},
        "rows": [{k: r[k] for k in ("app", "P", "coverage", "coverage_slowest", "own_loop_share", "eq4_error",
                                    "weights_match", "own", "found", "events_per_s", "kernels")} for r in rows],
    }


# ---- logical part (#25) ------------------------------------------------------------
GOAL_VOLUME = 0.05
GOAL_LEFT_OUT = 0.10  # the share of a measured run a prediction may leave out
FIT_P, HELD_P = (4, 8, 16), 32
#: what is compared event for event (the communicator ids are each trace's own)
_COLUMNS = ("op", "peer", "recv_peer", "root", "tag", "bytes", "recv_bytes")


def _sends(ev: dict, sel: np.ndarray) -> tuple[int, int]:
    """Messages and bytes the events ``sel`` send (point-to-point and collectives)."""
    b = np.asarray(ev["bytes"], np.int64)[sel]
    return int(np.count_nonzero(b > 0)), int(b.sum())


def _phase_compare(model, k: int, ph_real, P: int) -> dict:
    """Phase k of the model at P against the real run's phase: weight, and per rank
    the events (op, peer, receive peer, root, tag, bytes) where the sizes do not depend
    on the data; where they do, messages and bytes per rank class."""
    pm = model.phases[k]
    ev = model.phase_events(k, P)
    T, offs = ph_real.template, ph_real.template_offsets
    w_model, w_real = pm.weight_at(P), int(ph_real.weight)
    # sizes of the data (LAMMPS's atom exchange), or calls per rank as expected values (a
    # statistical phase: an FFT's remaps): messages and bytes per rank class
    data = any(s.data_note for s in pm.slots) or pm.statistical
    m_offs = np.searchsorted(ev["rank"], np.arange(P + 1))
    counts_ok = np.array_equal(m_offs, offs)
    cols = [c for c in _COLUMNS if not (data and c in ("bytes", "recv_bytes"))]
    first_diff = None
    if counts_ok:
        for c in cols:
            want, got = np.asarray(T[c], np.int64), np.asarray(ev[c], np.int64)
            bad = np.flatnonzero(want != got)
            if bad.size:
                r = int(np.searchsorted(offs, bad[0], "right") - 1)
                first_diff = f"rank {r} event {int(bad[0] - offs[r])} {c}: real {int(want[bad[0]])}, model {int(got[bad[0]])}"
                break
    else:
        r = int(np.flatnonzero(np.diff(m_offs) != np.diff(offs))[0])
        first_diff = f"rank {r}: {int(offs[r + 1] - offs[r])} events real, {int(m_offs[r + 1] - m_offs[r])} model"
    row = {"phase": pm.id, "kind": pm.kind, "weight_model": w_model, "weight_real": w_real,
           "weight_exact": w_model == w_real, "events": int(offs[-1]), "data_dependent": data,
           "exact": counts_ok and first_diff is None and not pm.statistical, "first_difference": first_diff,
           "statistical": pm.statistical,
           # no rank class orders its calls: realised deferred (nonblocking, one Waitall at its end)
           "deferred": bool(getattr(pm, "deferred", False))}
    if data:  # messages and bytes per rank class (the model's order classes, the classes of a
        # statistical phase's split communicators (GROMACS's particle and PME ranks), else all ranks)
        cls = pm.class_of(np.arange(P), P)
        from logical_model.rules import ClassComm
        split = next((s.space.role for s in pm.slots if getattr(s, "space", None) is not None
                      and isinstance(s.space.role, ClassComm)), None)
        if pm.classes is None and split is not None:
            cls = split.layout(np.arange(P), P)[0]
            row["classes"] = split.describe()
        real_rank = np.repeat(np.arange(P), np.diff(offs))
        errs, msg_errs = [], []
        for c in np.unique(cls):
            mm, mb = _sends(ev, cls[ev["rank"]] == c)
            rm, rb = _sends(T, cls[real_rank] == c)
            errs += [abs(mm - rm) / max(rm, 1), abs(mb - rb) / max(rb, 1)]
            msg_errs.append((mm - rm) / max(rm, 1))
            row.setdefault("per_class", []).append({"class": int(c), "messages_model": mm, "messages_real": rm,
                                                    "bytes_model": mb, "bytes_real": rb})
        row["volume_error"] = max(errs)
        row["messages_error"] = max(msg_errs, key=abs)
    return row


def _user_grid(app: str, out: Path, held: int) -> tuple[int, ...] | None:
    """The grid a user would give with --grid at the held-out P, where the application
    chooses it itself and prints it: GROMACS's particle ranks' domain-decomposition grid
    (md.log, "Domain decomposition grid 8 x 3 x 1"); GPAW's k-point groups by the ranks of
    each (si.txt, "Parallelization over k-points: 4": 4 x P/4)."""
    if app == "gpaw":
        log = out / app / f"P{held}" / "si.txt"
        m = re.search(r"Parallelization over k-points: (\d+)", log.read_text()) if log.exists() else None
        return (int(m.group(1)), held // int(m.group(1))) if m else None
    if app != "gromacs":
        return None
    log = out / app / f"P{held}" / "md.log"
    m = re.search(r"Domain decomposition grid (\d+) x (\d+) x (\d+)", log.read_text()) if log.exists() else None
    return tuple(int(x) for x in m.groups()) if m else None


def _asks_for_grid(model, P: int) -> bool:
    """Whether the model needs the grid at P from the user: one the traced P cannot give,
    or grid layouts of its communicators that they leave open."""
    return bool(model.traced_grids(P)) or any("--grid" in p for ps in model.undecided(P).values() for p in ps)


def _remaps_compare(model, k: int, ph_real, P: int, trace) -> dict:
    """A statistical phase's remap runs (placed exact per rank: logical_model.overlap)
    against the real run's runs with the same keys: how many there are, how many equal
    the real ones on every rank (peer, bytes, order), and the messages they carry."""
    from logical_model import grid_of
    from logical_model import model as lm
    from logical_model.statistical import runs
    pm = model.phases[k]
    over = [i for i, s in enumerate(pm.slots) if s.overlap is not None]
    if not over:
        return {}
    T, offs = ph_real.template, ph_real.template_offsets
    g = grid_of(trace)
    kinds = lm._comm_classes(trace.comms, P, g[2] if g else None)
    for c in np.unique(np.asarray(T["comm"], np.int64)):
        kinds.setdefault(int(c), lm._NOT_MODELLED)
    real_runs, _ = runs({P: (T["op"], T["tag"], T["comm"], T["peer"], offs, kinds)}, lm.POST_OPS, lm.WAIT_OPS,
                        lm.P2P_OPS, lm.COMM_WORLD, lm.COMM_CART, {P: (tuple(g[0]), tuple(g[1]))} if g else None)
    by_key = {f"run/{lm._key_text_run(r.key)}": r for r in real_runs}
    ev = model.phase_events(k, P)
    exact, messages = 0, 0
    for i in over:
        s = pm.slots[i]
        col = "bytes" if s.overlap_side == "send" else "recv_bytes"
        mine = np.flatnonzero(ev["slot"] == i)
        messages += len(mine) if s.overlap_side == "send" else 0
        r = by_key.get(s.key)
        if r is None:
            continue
        ranks, e = r.events[P]
        o = np.lexsort((e, ranks))
        ranks, e = ranks[o], e[o]
        if (np.array_equal(ranks, ev["rank"][mine]) and np.array_equal(np.asarray(T["peer"])[e], ev["peer"][mine])
                and np.array_equal(np.asarray(T[col])[e], ev[col][mine])):
            exact += 1
    return {"remap_slots": len(over), "remap_slots_exact": exact, "remap_messages": messages}


def logical_row(app: str, out: Path = OUT, fit=FIT_P, held: int = HELD_P) -> dict:
    """The logical model of one application fitted at ``fit`` and placed at ``held``,
    beside the real run there: per phase extrapolated (and compared) or refused."""
    from logical_model import ModelError, build, read_signatures
    from signature import extract
    files = [out / app / f"P{P}" / f"P{P}.h5" for P in fit]
    t0 = time.process_time()
    sigs, grids = read_signatures(files)
    try:
        model = build(sigs, grids=grids)
    except ModelError as err:  # the signatures cannot be related: the whole app is refused
        return {"app": app, "fit": list(fit), "held": held, "model_cpu_s": time.process_time() - t0,
                "phases_same_at_held": False, "phases": [], "extrapolated": False, "refused": str(err)}
    took = time.process_time() - t0
    grid, grid_error = _user_grid(app, out, held), None
    if grid is not None and _asks_for_grid(model, held):  # the grid the traced P cannot give
        try:
            model = model.with_grid(held, grid)
        except SigexError as err:
            grid_error = str(err)
    real_trace = load_trace(out / app / f"P{held}" / f"P{held}.h5")
    real = extract(real_trace)
    problems = model.phase_problems(held)
    same, at_real = _related_phases(sigs[-1], real)
    phases = []
    for k, pm in enumerate(model.phases):
        if problems[k]:
            phases.append({"phase": pm.id, "kind": pm.kind, "refused": problems[k][0],
                           "more_problems": len(problems[k]) - 1})
        elif k not in at_real:
            phases.append({"phase": pm.id, "kind": pm.kind, "refused": None, "compared": False,
                           "why": f"the real run at P={held} has no phase like it at its place"})
        else:
            rp = real.phases[at_real[k]]
            phases.append({**_phase_compare(model, k, rp, held),
                           **_remaps_compare(model, k, rp, held, real_trace), "refused": None,
                           **({} if at_real[k] == k else {"real_phase": at_real[k]})})
    return {"app": app, "fit": list(fit), "held": held, "model_cpu_s": took,
            "grid": "x".join(map(str, grid)) if grid else None, "grid_error": grid_error,
            "phases_same_at_held": same, "phases": phases,
            "extrapolated": all(p["refused"] is None for p in phases)}


def _cached_rows(row: Callable, apps: list[str], out: Path, fit, held: int) -> list[dict]:
    """``row(app, out, fit, held)`` of every app whose traces at the fit and held-out P are
    cached (the others named on stderr)."""
    rows = []
    for app in apps:
        if not all((out / app / f"P{P}" / f"P{P}.h5").exists() for P in (*fit, held)):
            print(f"{app}: no cached traces at P = {', '.join(map(str, (*fit, held)))} (run the capture part)",
                  file=sys.stderr)
            continue
        print(f"{app} ...", file=sys.stderr, flush=True)
        rows.append(row(app, out, fit, held))
    return rows


def logical_part(apps: list[str], out: Path = OUT, fit=FIT_P, held: int = HELD_P) -> dict:
    rows = _cached_rows(logical_row, apps, out, fit, held)
    print(f"the logical model of the real applications: fitted at P = {', '.join(map(str, fit))}, "
          f"placed at P = {held} and compared with the real run there\n")
    table = [("app", "phase", "kind", "weight model/real", "events", "result")]
    for r in rows:
        if r.get("refused"):
            table.append((r["app"], "-", "-", "-", "-", "refused: " + r["refused"][:200]))
        for p in r["phases"]:
            if p["refused"]:
                res = "refused: " + p["refused"][:150] + (f" (+{p['more_problems']} more)" if p["more_problems"] else "")
                w, n = "-", "-"
            elif not p.get("compared", True):
                res, w, n = "extrapolated, not compared: " + p["why"], "-", "-"
            else:
                w = f"{p['weight_model']}/{p['weight_real']}"
                n = f"{p['events']:,}"
                res = ("exact" if p["exact"] else f"DIFFERENT ({p['first_difference']})")
                if p.get("statistical"):
                    res = (f"statistical{' (deferred)' if p.get('deferred') else ''}: messages "
                           f"{100 * p['messages_error']:+.1f}%, messages and bytes within {100 * p['volume_error']:.1f}%")
                    if p.get("classes"):  # per class of a split (colour 0: the others)
                        res += "; per class (" + p["classes"] + "): " + ", ".join(
                            f"{c['class']}: messages {100 * (c['messages_model'] - c['messages_real']) / max(c['messages_real'], 1):+.1f}%"
                            f" bytes {100 * (c['bytes_model'] - c['bytes_real']) / max(c['bytes_real'], 1):+.1f}%"
                            for c in p["per_class"])
                    if p.get("remap_slots"):
                        res += (f"; remap runs exact {p['remap_slots_exact']}/{p['remap_slots']} "
                                f"({p['remap_messages']:,} messages)")
                elif p["data_dependent"]:
                    res = ("peers exact" if p["exact"] else res) + f", sizes of the data: volume {100 * p['volume_error']:.1f}% off"
            if p.get("real_phase") is not None:
                res += f" (against the real run's phase {p['real_phase']})"
            table.append((r["app"], str(p["phase"]), p["kind"], w, n, res))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for k, row in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))
    for r in rows:
        if r.get("refused"):
            print(f"  {r['app']} refused: {r['refused']}")
        if r.get("grid"):
            print(f"  {r['app']}: --grid {r['grid']} at P={held} (its own log's grid there)"
                  + (f", not taken: {r['grid_error']}" if r.get("grid_error") else ""))
    print("model built in " + ", ".join(f"{r['app']} {r['model_cpu_s']:.1f} s" for r in rows)
          + " CPU (reading the traces and extracting their signatures included)")
    compared = [(r["app"], p) for r in rows for p in r["phases"] if p["refused"] is None and p.get("compared", True)]
    exact_apps = sorted(r["app"] for r in rows if r["extrapolated"] and r["phases_same_at_held"] and all(
        p["exact"] and p["weight_exact"] for p in r["phases"]))
    vols = [p["volume_error"] for _, p in compared if "volume_error" in p]
    return {
        "bench": "validate_apps", "part": "logical", "fit_P": list(fit), "held_P": held,
        "apps": [r["app"] for r in rows],
        # every phase extrapolated to the held-out P
        "heldout_apps": sorted(r["app"] for r in rows if r["extrapolated"]),
        # ... and every phase's events equal to the real run's (sizes of the data aside), weights exact
        "heldout_exact": exact_apps,
        # the apps with some phase extrapolated, and the phases equal to the real run's
        "heldout_partly": sorted({app for app, _ in compared}),
        "heldout_exact_phases": [f"{app}:{p['phase']}" for app, p in compared if p["exact"] and p["weight_exact"]],
        "phases_extrapolated": len(compared), "phases": sum(len(r["phases"]) for r in rows),
        "phases_exact": sum(bool(p["exact"] and p["weight_exact"]) for _, p in compared),
        # phases placed with calls per rank as expected values (not exact by construction)
        "phases_statistical": [f"{app}:{p['phase']}" for app, p in compared if p.get("statistical")],
        # ... of them, those whose ranks share no order of their calls, realised deferred
        "phases_deferred": [f"{app}:{p['phase']}" for app, p in compared if p.get("deferred")],
        "model_cpu_s": {r["app"]: round(r["model_cpu_s"], 2) for r in rows},
        # runs of a statistical phase placed exact per rank as remaps between two block
        # decompositions, and how many of them equal the real run's on every rank
        "remap_slots": sum(p.get("remap_slots", 0) for _, p in compared),
        "remap_slots_exact": sum(p.get("remap_slots_exact", 0) for _, p in compared),
        "weights_exact": all(p["weight_exact"] for _, p in compared),
        "volume_error_max": max(vols) if vols else None,
        "goal": {"heldout_apps": "every app", "heldout_exact": "every app whose communication is "
                 "data-independent", "volume_error_max": GOAL_VOLUME, "weights_exact": True,
                 "remap_slots_exact": "every remap slot"},
        "met": {"heldout_apps": bool(rows) and all(r["extrapolated"] for r in rows),
                "volume_error_max": not vols or max(vols) <= GOAL_VOLUME,
                "weights_exact": all(p["weight_exact"] for _, p in compared),
                "remap_slots_exact": all(p.get("remap_slots_exact", 0) == p.get("remap_slots", 0)
                                         for _, p in compared)},
        "rows": [{"app": r["app"], "model_cpu_s": r["model_cpu_s"], "extrapolated": r["extrapolated"],
                  "grid": r.get("grid"), "grid_error": r.get("grid_error"),
                  "refused": r.get("refused"), "phases": r["phases"]} for r in rows],
    }


def _related_phases(fit_sig, real_sig) -> tuple[bool, dict[int, int]]:
    """Whether a fit run and the real run have the same phases (kinds and operations, in
    whichever order a rank first calls them: GROMACS's particle ranks meet their halo's lone
    Send or Recv first by their place), and the index of each fit phase's real phase. Where
    they are not the same (one of hpcc's 46 kernels' phases a loop at the fit P and not at
    P = 32), phases are related by position: the longest runs of alike phases in order
    (difflib); a phase with none at its place is left out of the map."""
    kinds = [(p.kind, tuple(sorted(p.ops))) for p in fit_sig.phases]
    real_kinds = [(p.kind, tuple(sorted(p.ops))) for p in real_sig.phases]
    at_real = {}
    for a, b, n in difflib.SequenceMatcher(None, kinds, real_kinds, autojunk=False).get_matching_blocks():
        at_real.update({a + i: b + i for i in range(n)})
    return real_kinds == kinds, at_real


def predict_row(app: str, out: Path = OUT, fit=FIT_P, held: int = HELD_P) -> dict:
    """The whole prediction of one application from its runs at ``fit``, at ``held``,
    beside the real run there: the phases that can be placed (the others left out and
    their share of the real run), each placed phase's computation per process and
    repetition (CRM, CPU seconds) against the real run's, and the predicted runtime on
    this machine's profile against the real run's wall time, oversubscribed."""
    from compute_model import from_traces
    from signature import extract
    from signature.errors import SigexError
    from sigex.pipeline import Models, predict
    files = [out / app / f"P{P}" / f"P{P}.h5" for P in fit]
    t0 = time.process_time()
    try:
        compute = from_traces(files)
        models = Models(logical=compute.logical, compute=compute, source=app,
                        measured={s.nprocs: s.runtime for s in compute.signatures})
        grid = _user_grid(app, out, held)  # as the logical part: what a user gives with --grid
        if grid is not None and _asks_for_grid(models.logical, held):
            models = models.with_grid(held, grid)
        pred = predict(models, held, ROOT / "machines" / "this-machine.toml")
    except SigexError as err:  # nothing can be placed, or the signatures cannot be related
        return {"app": app, "predicted": False, "refused": str(err).splitlines()[0],
                "model_cpu_s": time.process_time() - t0}
    took = time.process_time() - t0
    real = extract(load_trace(out / app / f"P{held}" / f"P{held}.h5"))
    # each placed phase beside its real phase: the same index where the phases are the
    # same, else related by position as the logical part relates them
    same, at_real = _related_phases(compute.signatures[-1], real)
    index = {p.id: i for i, p in enumerate(compute.signatures[-1].phases)}
    by_id = {k: real.phases[at_real[i]] for k, i in index.items() if i in at_real}
    # computation per process and repetition: the CRM's mean over the ranks against the real
    # run's mean (a phase with a CRM per rank class has ranks apart: its slowest rank, the
    # replay's, is shown beside the real slowest)
    mean_of = dict(zip([ph.id for ph in compute.logical.phases], compute.computation(held)))
    phases = []
    for ph in pred.phases:
        k = ph["phase"]
        row = {"phase": k, "kind": ph["kind"], "weight": ph["weight"], "te": ph["te"],
               "computation": float(mean_of[k]), "computation_max": ph["computation"]}
        if k in by_id:
            rp = by_id[k]
            if rp.id != k:
                row["real_phase"] = rp.id
            row["weight_real"] = rp.weight
            row["computation_real"] = float(np.nanmean(rp.stats["cpu_mean"]))
            row["computation_max_real"] = float(np.nanmax(rp.stats["cpu_mean"]))
            row["computation_error"] = row["computation"] / row["computation_real"] - 1 \
                if row["computation_real"] > 0 else None
        phases.append(row)
    left = (sum(by_id[r["phase"]].share for r in pred.refused)
            if all(r["phase"] in by_id for r in pred.refused) else None)
    # the computation of the phases left out, as predict fits it over P, against what the
    # real run computed in its phases that no placed phase stands for (each phase's slowest
    # rank, all repetitions)
    stands = {by_id[ph["phase"]].id for ph in pred.phases if ph["phase"] in by_id}
    left_comp = ({"predicted": pred.left_out["total"],
                  "real": sum(p.computation(real.work_mode) for p in real.phases if p.id not in stands)}
                 if pred.left_out and pred.left_out["total"] is not None else None)
    placed = [p for p in phases if "computation_real" in p]
    comp_pred = sum(p["computation"] * p["weight"] for p in placed)
    comp_real = sum(p["computation_real"] * p["weight_real"] for p in placed)
    return {"app": app, "predicted": True, "model_cpu_s": took, "phases_same_at_held": same,
            "phases": phases, "left_out": [r["phase"] for r in pred.refused],
            "left_out_share_real": left, "left_out_computation": left_comp,
            "left_out_share_fit": {P: sum(r["measured_share"][P] for r in pred.refused) for P in fit}
            if pred.refused else {},
            "runtime_predicted": pred.runtime, "runtime_real_wall": real.runtime,
            "oversubscription": held / (os.cpu_count() or 1),
            "computation_predicted": comp_pred, "computation_real": comp_real,
            "phases_compared": len(placed),
            "computation_error": comp_pred / comp_real - 1 if comp_real > 0 else None}


def predict_part(apps: list[str], out: Path = OUT, fit=FIT_P, held: int = HELD_P) -> dict:
    rows = _cached_rows(predict_row, apps, out, fit, held)
    cores = os.cpu_count() or 1
    print(f"whole predictions of the real applications: models from P = {', '.join(map(str, fit))}, "
          f"predicted at P = {held}, beside the real run there. The real run shared {cores} cores "
          f"({held // cores}x oversubscribed), so its wall time is not a {held}-core runtime; the "
          "computation (thread CPU time per process, summed over the repetitions of the placed "
          "phases) is what compares. Phases that cannot be placed are left out and their share of "
          "the real run shown.\n")
    table = [("app", "phases placed", "left out (share of real run)", "left out: computation pred/real (s)",
              "computation pred/real (s)", "error", "runtime pred (this-machine)", "real wall (oversubscribed)")]
    for r in rows:
        if not r["predicted"]:
            table.append((r["app"], "none", "all: " + r["refused"][:60] + "...", "-", "-", "-", "-", "-"))
            continue
        named = [str(k) for k in r["left_out"] if k is not None]
        left = ", ".join(named[:8]) + (" ..." if len(named) > 8 else "")
        unnamed = len(r["left_out"]) - len(named)
        if unnamed:  # phases the smallest P lacks
            left += f"{' + ' if named else ''}{unnamed} the smallest P lacks"
        left = left or "none"
        if r["left_out"]:
            left += (f" ({100 * r['left_out_share_real']:.1f}% of the real run)" if r["left_out_share_real"] is not None
                     else f" (up to {100 * max(r['left_out_share_fit'].values()):.1f}% of a fit run)")
        err = r["computation_error"]
        table.append((r["app"], ", ".join(str(p["phase"]) for p in r["phases"]), left,
                      _left_computation(r.get("left_out_computation")),
                      f"{r['computation_predicted']:.3f}/{r['computation_real']:.3f}"
                      + (f" ({r['phases_compared']} of {len(r['phases'])} placed phases)"
                         if r.get("phases_compared", len(r["phases"])) < len(r["phases"]) else ""),
                      f"{100 * err:+.1f}%" if err is not None else "-",
                      f"{r['runtime_predicted']:.3f} s", f"{r['runtime_real_wall']:.3f} s"))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for k, row in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))
    errs = [abs(r["computation_error"]) for r in rows if r["predicted"] and r["computation_error"] is not None]
    # an app counts as predicted when the phases left out held at most GOAL_LEFT_OUT of every fit run
    whole = [r["app"] for r in rows if r["predicted"]
             and max(r["left_out_share_fit"].values(), default=0.0) <= GOAL_LEFT_OUT]
    return {"bench": "validate_apps", "part": "predict", "fit_P": list(fit), "held_P": held,
            "apps": [r["app"] for r in rows], "predicted_apps": whole,
            "partly_predicted_apps": [r["app"] for r in rows if r["predicted"] and r["app"] not in whole],
            "computation_error_max": max(errs) if errs else None,
            "oversubscription": held / cores,
            "goal": {"predicted_apps": f"every app, phases left out holding at most {GOAL_LEFT_OUT:.0%} of a run"},
            "met": {"predicted_apps": bool(rows) and len(whole) == len(rows)},
            "rows": rows}


def _left_computation(c: dict | None) -> str:
    """'0.81/0.91 (-12%)': the left-out phases' computation predicted and real, or '-'."""
    if not c:
        return "-"
    err = f" ({100 * (c['predicted'] / c['real'] - 1):+.0f}%)" if c["real"] > 0 else ""
    return f"{c['predicted']:.3f}/{c['real']:.3f}{err}"


def _sampling(r: dict) -> str:
    """'lazy, 91% est.' or 'always' (rows cached before lazy sampling have neither key)."""
    mode = r.get("cpu_sampling", "always")
    return f"lazy, {100 * r['cpu_bursts_estimated_share']:.0f}% est." if mode == "lazy" else mode


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="example: python bench/validate_apps.py --apps melt fft3d --p 4 8")
    ap.add_argument("--apps", nargs="+", choices=list(APPS), default=list(APPS))
    ap.add_argument("--p", nargs="+", type=int, default=[4, 8, 16, 32])
    ap.add_argument("--reps", type=int, default=2,
                    help="runs of each kind, untraced and traced alternating; the best is kept")
    ap.add_argument("--force", action="store_true", help="redo cached runs")
    ap.add_argument("--part", choices=("capture", "signature", "logical", "predict"), default="capture",
                    help="capture: run and trace the apps (cached); signature: the signatures "
                         "of the cached traces against the apps' own counts; logical: the logical "
                         "model fitted at P = 4, 8, 16 against the real run at P = 32; predict: the "
                         "whole prediction at P = 32 (placed phases, computation, runtime)")
    ap.add_argument("--out", type=Path, default=OUT,
                    help=f"where runs and traces are cached (default {OUT.relative_to(ROOT)}); "
                         "e.g. another folder for SIGEX_CPU_SAMPLE_MIN_US=0 runs")
    opts = ap.parse_args(argv)
    if opts.part != "capture":
        # sigex's stages timed here run in this process: give it the memory settings the
        # `sigex` command's process has (signature/_memory.py), so that its figures are the command's
        from signature._memory import tune_allocation
        tune_allocation()
    if opts.part == "logical":
        summary = logical_part(opts.apps, opts.out)
        print()
        print(json.dumps(summary))
        return 0
    if opts.part == "predict":
        summary = predict_part(opts.apps, opts.out)
        print()
        print(json.dumps(summary, default=float))
        return 0
    if opts.part == "signature":
        summary = signature_part(opts.apps, opts.p, opts.out)
        print()
        print(json.dumps(summary))
        return 0
    rows, skipped = [], {}
    for name in opts.apps:
        app = APPS[name]
        why = app.available()
        if why:
            skipped[name] = why
            print(f"{name}: skipped, {why}", file=sys.stderr)
            continue
        for P in opts.p:
            print(f"{name} P={P} ...", file=sys.stderr, flush=True)
            rows.append(measure(app, P, opts.reps, opts.force, opts.out))
    costs = None
    if rows:
        from tracer_overhead import unit_costs  # noqa: E402  (bench/ is on sys.path)
        costs = unit_costs()
        for r in rows:
            if "polls" not in r:  # cached before the counts were kept
                r.update(_tracer_counts(load_trace(opts.out / r["app"] / f"P{r['P']}" /
                                                   f"P{r['P']}.h5", allow_incomplete=True)))
            r["tracer_work_s"] = tracer_work(r, costs)
            r["tracer_work_share"] = r["tracer_work_s"] / r["untraced_cpu_s"] if r.get("untraced_cpu_s") else None
    print(f"capture of real applications on {os.cpu_count()} cores "
          f"(P > {os.cpu_count()} is oversubscribed)\n")
    head = ("app", "P", "complete", "events", "not modelled", "untraced s", "traced s", "overhead",
            "CPU overhead", "tracer work", "CPU sampling", "app's own account", "trace")
    table = [head]
    for r in rows:
        acc = ", ".join(f"{k}={v}" for k, v in r["own_account"].items() if v is not None)
        table.append((r["app"], str(r["P"]), "yes" if r["complete"] else "NO", f"{r['events']:,}",
                      str(r["unmodelled_calls"]) + (f" ({'; '.join(r['unmodelled'])})" if r["unmodelled"] else ""),
                      f"{r['untraced_s']:.2f}", f"{r['traced_s']:.2f}", f"{100 * r['overhead']:+.1f}%",
                      (f"{100 * r['cpu_overhead']:+.1f}%" if "cpu_overhead" in r else "-")
                      + (f" (median {100 * r['cpu_overhead_median']:+.1f}%)"
                         if "cpu_overhead_median" in r else ""),
                      f"{100 * r['tracer_work_share']:.2f}%" if r.get("tracer_work_share") is not None else "-",
                      _sampling(r), acc, f"grid {r['trace_grid']}" if r["trace_grid"] else "-"))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for k, row in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    over = max((r["overhead"] for r in rows), default=float("nan"))
    summary = {
        "bench": "validate_apps", "part": "capture",
        "apps": sorted({r["app"] for r in rows}), "skipped": skipped, "P": opts.p,
        "captured": sum(r["complete"] for r in rows), "runs": len(rows),
        "unmodelled_calls": sum(r["unmodelled_calls"] for r in rows),
        "unit_costs": costs,
        "overhead_max": over, "overhead_median": sorted(r["overhead"] for r in rows)[len(rows) // 2] if rows else None,
        "goal": {"captured": "every run complete", "unmodelled_calls": 0, "overhead_max": GOAL_OVERHEAD},
        "met": {"captured": bool(rows) and all(r["complete"] for r in rows),
                "unmodelled_calls": all(r["unmodelled_calls"] == 0 for r in rows),
                "overhead_max": bool(rows) and over <= GOAL_OVERHEAD},
        "rows": [{**{k: r[k] for k in ("app", "P", "complete", "events", "unmodelled_calls",
                                        "overhead")}, "cpu_overhead": r.get("cpu_overhead"),
                  "cpu_overhead_median": r.get("cpu_overhead_median"),
                  "polls": r.get("polls"), "cpu_samples": r.get("cpu_samples"),
                  "tracer_work_share": r.get("tracer_work_share"),
                  "cpu_sampling": r.get("cpu_sampling", "always")}
                 for r in rows],
    }
    print()
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
