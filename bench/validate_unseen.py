"""Codes nobody on the team tuned sigex for, installed from Debian, through the whole pipeline.

The real-applications bench (``bench/validate_apps.py``) holds the five codes the issues
name; sigex was built against them. This one holds codes of other kinds, for a check that
the mechanisms are general: each is traced at a few P (oversubscribed on a small machine),
its signatures are extracted at every P, the logical model is fitted at the smaller P and
placed at a held-out P never fitted, and the whole prediction is made there. Install with
``apt-get install abinit abinit-data cp2k quantum-espresso openfoam openfoam-examples
nwchem-openmpi meep-openmpi elk-lapw gpaw mpb-mpi scalapack-mpi-test petsc-dev python3-dolfinx
libsundials-dev code-saturne`` (all built on Open MPI 4.1; ABINIT, Quantum ESPRESSO and Elk are Fortran,
GPAW is Python over its own C layer):

* ``abinit``   ABINIT 9.6, the package's lead crystal example (``tbasepar_1``: k-point
               parallelism, 60 k-points on an 8x8x8 grid), 6 SCF steps; fit 2, 3, 4, held 6;
* ``cp2k``     CP2K, the package's ``argon.inp`` (108 Ar atoms, Lennard-Jones, NVE MD), 60
               steps; fit 2, 4, 8, held 6;
* ``qe``       Quantum ESPRESSO ``pw.x``, bulk silicon SCF (2 atoms, ecutwfc 30 Ry, 4x4x4
               k-points, plane-wave and FFT parallelism); fit 4, 8, 16, held 12;
* ``openfoam`` OpenFOAM's ``icoFoam`` on the package's lid-driven cavity, 160x160 cells, 100
               time steps (PCG pressure solver), ``simple`` decomposition; fit 4, 8, 16,
               held 12;
* ``nwchem``   NWChem (Global Arrays on MPI-3 one-sided), B3LYP/6-31G* benzene; fit 4, 8,
               16, held 12 (not in the default set: its model takes minutes);
* ``meep``     Meep 1.25 (``meep-openmpi``, C++ FDTD, its cell cut into chunks), a 2-D
               dielectric waveguide with PML, 2,000 time steps; fit 4, 8, 16, held 12;
* ``elk``      Elk 8.4 (``elk-lapw``, Fortran through Open MPI's ``mpif.h`` bindings,
               k-points over the ranks), the package's aluminium ground state on an 8x8x8
               k-point grid; fit 4, 8, 16, held 12;
* ``gpaw``     GPAW 22.8 (``gpaw``: Python, MPI through its own C extension, k-points,
               domains and ScaLAPACK over the ranks), bulk silicon (8 atoms, plane waves
               350 eV, 3x3x3 k-points) to SCF convergence; fit 8, 12, 16, held 24 (at P = 4
               it parallelises over k-points only, with none of the domain decomposition's
               calls);
* ``mpb``      MIT Photonic Bands 1.11 (``mpb-mpi``: C, block eigensolver over FFTW 3's MPI
               transforms), TM bands of a square lattice of dielectric rods, 64x64 grid, 8
               bands at 22 k-points; fit 2, 4, 8, held 16 (a P that divides the grid: at
               12, FFTW gives its 64 rows to 11 ranks of 6 and leaves one idle);
* ``petsc``    PETSc 3.18's SNES tutorial ex5 (``petsc-dev``: the Bratu problem on a 128 x 128
               DMDA grid the library decomposes itself, Newton with GMRES(30) and block Jacobi
               ILU, its halos persistent requests started every iteration), compiled from the
               example the package ships; fit 4, 8, 16, held 12;
* ``dolfinx``  DOLFINx 0.5 (``python3-dolfinx``: finite elements over PETSc, its mesh
               partitioned by PT-SCOTCH, halos as neighbourhood collectives), a P1 Poisson
               problem on a 20^3 unit cube solved 4 times with CG + Jacobi, from a script
               this bench writes; fit 4, 8, 16, held 12;
* ``sundials`` SUNDIALS 6.4's ARKODE example ``ark_heat2D_p`` (``libsundials-dev``: a 2-D heat
               equation on a 128 x 128 mesh, implicit Runge-Kutta with Newton and PCG, halos of
               each rank's existing neighbours on a non-periodic grid, its dims given with
               ``--np`` as MPI_Dims_create would choose them), to t = 0.05 with adaptive steps,
               compiled from the example the package ships; fit 4, 8, 16, held 12;
* ``scalapack`` ScaLAPACK 2.2's LU test (``scalapack-mpi-test``, ``xdlu``, Fortran and C over
               BLACS), one LU factorisation and solve of a 960 x 960 matrix in blocks of 32 on
               a P x Q grid (the most square one of P ranks, P <= Q); fit 4, 8, 16, held 12;
* ``code_saturne`` code_saturne 6.0 (``code-saturne``: finite-volume CFD, C and Fortran,
               its algebraic multigrid and Krylov solvers), the package's tutorial 1 (simple
               junction, its 700-cell mesh and setup) for 30 time steps, prepared by its own
               ``code_saturne run --initialize`` (the mesh imported, the solver linked); fit
               2, 4, 8, held 12 (not in the default set: its solvers' iteration counts jump
               with P, 0.2 to 8.4 M events, and at P = 16 the run writes 80 M).

Per code and P: the trace (complete, events, calls sigex does not model); its signature
(phases, coverage: the share of the run's time inside phases that repeat, goal >= 90%;
the loop phases' weights beside the code's own count of its steps where it prints one);
whether the fit P give the same phases (kinds and calls, goal: yes); the logical model's
phases at the held-out P (placed and exact or statistical, or refused and why; weights
against the real run's); and the whole prediction there (the share of the real run left
out, the placed phases' computation against the real run's). Where the model asks for the
grid at the held-out P and the code prints the one it chose there, that grid is given as
a user would give it with ``--grid`` (GPAW: its k-point groups by the ranks of each), and
the table says so.

Traces are cached in ``bench/_unseen/<code>/P<P>/`` (``--force`` redoes them). As every
bench: a table, then one JSON line with the figures and the goals.

    python bench/validate_unseen.py                        # the default codes (~1 h here, cached after)
    python bench/validate_unseen.py --codes abinit cp2k    # some of them
    python bench/validate_unseen.py --codes nwchem         # the slow one
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from signature import extract, load_trace, trace_run, unmodelled_calls  # noqa: E402

import validate_apps  # noqa: E402  (its logical and predict rows take any cached app)
from logical_model.topology import dims_create  # noqa: E402

OUT = ROOT / "bench" / "_unseen"
APT = ("apt-get install abinit abinit-data cp2k quantum-espresso openfoam openfoam-examples "
       "nwchem-openmpi meep-openmpi elk-lapw gpaw mpb-mpi scalapack-mpi-test petsc-dev python3-dolfinx "
       "libsundials-dev code-saturne")
GOAL_COVERAGE = 0.90
ABINIT_EX = Path("/usr/share/doc/abinit/examples")
CP2K_EX = Path("/usr/share/doc/cp2k/examples")
FOAM_EX = Path("/usr/share/doc/openfoam-examples/examples/incompressible/icoFoam/cavity/cavity")
FOAM_RC = Path("/usr/share/openfoam/etc/bashrc")


@dataclasses.dataclass
class Code:
    name: str
    needs: tuple[str, ...]                        # programs or files that must exist
    setup: Callable[[Path], None]                 # once, in the code's folder
    command: Callable[[Path, int], list[str]]     # in the run folder of one P
    fit: tuple[int, ...]
    held: int
    steps: Callable[[Path], int | None]           # the code's own count of its steps
    steps_what: str
    prepare: Callable[[Path, int], None] = lambda run, P: None  # per P, before the run
    env: Callable[[], dict] = dict                # extra environment for its runs

    def available(self) -> str | None:
        missing = [n for n in self.needs if not (shutil.which(n) or Path(n).exists())]
        return None if not missing else f"missing {', '.join(missing)} ({APT})"


def _count(pattern: str, *files: str) -> Callable[[Path], int | None]:
    """The code's own count: lines matching ``pattern`` in the first of ``files`` (in the run
    folder) that exists."""
    def steps(run: Path) -> int | None:
        for f in files:
            p = run / f
            if p.exists():
                return len(re.findall(pattern, p.read_text(errors="replace"), flags=re.M))
        return None
    return steps


def _stated(pattern: str, file: str) -> Callable[[Path], int | None]:
    """The code's own count, as it states it: the number ``pattern``'s group captures in
    ``file`` (in the run folder), at its last match."""
    def steps(run: Path) -> int | None:
        p = run / file
        found = re.findall(pattern, p.read_text(errors="replace"), flags=re.M) if p.exists() else []
        return int(found[-1]) if found else None
    return steps


# ---- ABINIT: k-point parallel SCF of lead ------------------------------------------------
def _abinit_setup(folder: Path) -> None:
    text = (ABINIT_EX / "tbasepar_1.abi").read_text()
    text = re.sub(r"^ngkpt .*$", "ngkpt 8 8 8", text, flags=re.M)
    text = re.sub(r"^nstep .*$", "nstep 6", text, flags=re.M)
    (folder / "pb.abi").write_text(text)


# ---- CP2K: argon MD ------------------------------------------------------------------------
def _cp2k_setup(folder: Path) -> None:
    text = gzip.decompress((CP2K_EX / "argon.inp.gz").read_bytes()).decode()
    (folder / "argon.inp").write_text(re.sub(r"STEPS\s+\d+", "STEPS 60", text))


# ---- Quantum ESPRESSO: silicon SCF ---------------------------------------------------------
_QE_INPUT = """&control
  calculation = 'scf', prefix = 'si', outdir = './tmp', pseudo_dir = '/usr/share/espresso/pseudo/'
/
&system
  ibrav = 2, celldm(1) = 10.2, nat = 2, ntyp = 1, ecutwfc = 30.0
/
&electrons
  conv_thr = 1.0d-10, mixing_beta = 0.7
/
ATOMIC_SPECIES
  Si 28.086 Si.pz-vbc.UPF
ATOMIC_POSITIONS alat
  Si 0.00 0.00 0.00
  Si 0.25 0.25 0.25
K_POINTS automatic
  4 4 4 1 1 1
"""


def _qe_setup(folder: Path) -> None:
    (folder / "si.in").write_text(_QE_INPUT)


# ---- OpenFOAM: icoFoam cavity ----------------------------------------------------------------
_FOAM_ENV: dict | None = None


def _foam_env() -> dict:
    """The environment OpenFOAM's bashrc sets (its PATH, libraries and FOAM_* variables)."""
    global _FOAM_ENV
    if _FOAM_ENV is None:
        out = subprocess.run(["bash", "-c", f"source {FOAM_RC} >/dev/null 2>&1; env -0"],
                             capture_output=True, check=True).stdout.decode()
        env = dict(kv.split("=", 1) for kv in out.split("\0") if "=" in kv)
        _FOAM_ENV = {k: v for k, v in env.items() if os.environ.get(k) != v}
    return _FOAM_ENV


def _foam_setup(folder: Path) -> None:
    base = folder / "case"
    shutil.copytree(FOAM_EX, base)
    mesh = base / "system" / "blockMeshDict"
    mesh.write_text(mesh.read_text().replace("(20 20 1)", "(160 160 1)"))
    ctl = base / "system" / "controlDict"
    text = ctl.read_text()
    for key, value in (("endTime", "0.05"), ("deltaT", "0.0005"), ("writeInterval", "1000")):
        text = re.sub(rf"^{key}\s+\S+;", f"{key}         {value};", text, flags=re.M)
    ctl.write_text(text)
    _foam_run(["blockMesh"], base, "log.blockMesh")


def _foam_run(argv: list[str], cwd: Path, log: str) -> None:
    with open(cwd / log, "w") as f:
        rc = subprocess.run(argv, cwd=cwd, env={**os.environ, **_foam_env()}, stdout=f,
                            stderr=subprocess.STDOUT).returncode
    if rc:
        raise SystemExit(f"openfoam: {' '.join(argv)} failed (exit {rc}); see {cwd / log}")


def _foam_prepare(run: Path, P: int) -> None:
    """The case decomposed into P sub-domains, a x b with a the smallest divisor >= sqrt(P)."""
    for item in (run.parent / "case").iterdir():
        dest = run / item.name
        if not dest.exists():
            (shutil.copytree if item.is_dir() else shutil.copy)(item, dest)
    a = next(x for x in range(1, P + 1) if P % x == 0 and x * x >= P)
    (run / "system" / "decomposeParDict").write_text(
        "FoamFile\n{\n    version     2.0;\n    format      ascii;\n    class       dictionary;\n"
        f"    object      decomposeParDict;\n}}\nnumberOfSubdomains {P};\nmethod          simple;\n"
        f"simpleCoeffs\n{{\n    n           ({a} {P // a} 1);\n    delta       0.001;\n}}\n")
    _foam_run(["decomposePar", "-force"], run, "log.decompose")


# ---- NWChem: benzene DFT ------------------------------------------------------------------------
_NW_INPUT = """start benz
title "benzene dft"
memory total 400 mb
geometry units angstrom
  C   0.000   1.396   0.000
  C   1.209   0.698   0.000
  C   1.209  -0.698   0.000
  C   0.000  -1.396   0.000
  C  -1.209  -0.698   0.000
  C  -1.209   0.698   0.000
  H   0.000   2.479   0.000
  H   2.147   1.240   0.000
  H   2.147  -1.240   0.000
  H   0.000  -2.479   0.000
  H  -2.147  -1.240   0.000
  H  -2.147   1.240   0.000
end
basis
  * library 6-31G*
end
dft
  xc b3lyp
  iterations 30
end
task dft energy
"""


def _nw_setup(folder: Path) -> None:
    (folder / "benz.nw").write_text(_NW_INPUT)


# ---- Meep: FDTD of a dielectric waveguide --------------------------------------------------
_MEEP_INPUT = """(set! geometry-lattice (make lattice (size 32 16 no-size)))
(set! geometry (list (make block (center 0 0) (size infinity 1 infinity)
                           (material (make dielectric (epsilon 12))))))
(set! sources (list (make source (src (make continuous-src (frequency 0.15)))
                          (component Ez) (center -7 0))))
(set! pml-layers (list (make pml (thickness 1.0))))
(set! resolution 10)
(run-until 100)
"""


def _meep_setup(folder: Path) -> None:
    (folder / "wg.ctl").write_text(_MEEP_INPUT)


# ---- Elk: all-electron FP-LAPW ground state of aluminium ---------------------------------
ELK_EX = Path("/usr/share/doc/elk-lapw/examples/basic/Al/elk.in")
ELK_SPECIES = Path("/usr/share/elk-lapw/species")


def _elk_setup(folder: Path) -> None:
    """The package's aluminium example, its species from the package, on an 8x8x8 k-point
    grid (its k-points are what Elk spreads over the ranks)."""
    text = ELK_EX.read_text().replace("'../../../species/'", f"'{ELK_SPECIES}/'")
    (folder / "elk.in").write_text(re.sub(r"(ngridk\n)\s*4\s+4\s+4", r"\1  8  8  8", text))


# ---- GPAW: plane-wave DFT of bulk silicon -----------------------------------------------
_GPAW_INPUT = """from ase.build import bulk
from gpaw import GPAW, PW
atoms = bulk("Si", "diamond", a=5.43, cubic=True)
atoms.calc = GPAW(mode=PW(350), kpts=(3, 3, 3), txt="si.txt", convergence={"energy": 1e-7})
atoms.get_potential_energy()
"""


def _gpaw_setup(folder: Path) -> None:
    (folder / "si.py").write_text(_GPAW_INPUT)


# ---- MPB: photonic bands of a square lattice of rods -------------------------------------
_MPB_INPUT = """(set! geometry-lattice (make lattice (size 1 1 no-size)))
(set! geometry (list (make cylinder (center 0 0 0) (radius 0.2) (height infinity)
                           (material (make dielectric (epsilon 12))))))
(set! k-points (interpolate 6 (list (vector3 0 0 0) (vector3 0.5 0 0) (vector3 0.5 0.5 0) (vector3 0 0 0))))
(set! resolution 64)
(set! num-bands 8)
(run-tm)
"""


def _mpb_setup(folder: Path) -> None:
    (folder / "rods.ctl").write_text(_MPB_INPUT)


# ---- ScaLAPACK: the LU test's factorisation and solve ------------------------------------
XDLU = Path("/usr/lib/x86_64-linux-gnu/scalapack/openmpi-tests/xdlu")


def _xdlu_prepare(run: Path, P: int) -> None:
    """LU.dat for one problem (960 x 960, blocks of 32, one right-hand side) on the most
    square P x Q grid of P ranks."""
    p = max(d for d in range(1, int(P ** 0.5) + 1) if P % d == 0)
    (run / "LU.dat").write_text(
        "'ScaLAPACK LU, validate_unseen'\n'MPI'\n'LU.out'\n6\n1\n960\n960\n1\n32\n1\n1\n1\n1\n"
        f"1\n{p}\n{P // p}\n1.0\nF\n")


# ---- PETSc: SNES ex5 (Bratu on a DMDA), built from the package's own example ------------------
PETSC_DIR = Path("/usr/lib/petscdir/petsc3.18/x86_64-linux-gnu-real")
PETSC_EX5 = Path("/usr/share/petsc/3.18/share/petsc/examples/src/snes/tutorials/ex5.c")


def _petsc_setup(folder: Path) -> None:
    """ex5 compiled from the example the package ships, against its Open MPI build."""
    subprocess.run(["mpicc.openmpi", "-O2", f"-I{PETSC_DIR / 'include'}", "-o", str(folder / "ex5"),
                    str(PETSC_EX5), f"-L{PETSC_DIR / 'lib'}", "-lpetsc_real", "-lm"], check=True)


# ---- DOLFINx: a Poisson solve on a unit cube (our script, the package's library) ------------------
_DOLFINX_SCRIPT = """\
# P1 Poisson on a 20^3 unit cube (DOLFINx 0.5: mesh partitioned by the library, PETSc CG + Jacobi), solved 4 times
from mpi4py import MPI
import numpy as np
import ufl
from petsc4py.PETSc import ScalarType
from dolfinx import fem, mesh
from dolfinx.fem.petsc import LinearProblem

domain = mesh.create_unit_cube(MPI.COMM_WORLD, 20, 20, 20)
V = fem.FunctionSpace(domain, ("Lagrange", 1))
facets = mesh.locate_entities_boundary(domain, 2, lambda x: np.full(x.shape[1], True))
bc = fem.dirichletbc(ScalarType(0), fem.locate_dofs_topological(V, 2, facets), V)
u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
a = ufl.dot(ufl.grad(u), ufl.grad(v)) * ufl.dx
L = fem.Constant(domain, ScalarType(1)) * v * ufl.dx
problem = LinearProblem(a, L, bcs=[bc], petsc_options={"ksp_type": "cg", "pc_type": "jacobi", "ksp_rtol": 1e-10})
for _ in range(4):
    problem.solve()
if MPI.COMM_WORLD.rank == 0:
    print("CG iterations", problem.solver.getIterationNumber())
"""


#: where Debian puts dolfinx (beside the PETSc build it uses, or with the other modules)
DOLFINX = next((p for p in (Path("/usr/lib/petsc/lib/python3/dist-packages/dolfinx/__init__.py"),
                            Path("/usr/lib/python3/dist-packages/dolfinx/__init__.py")) if p.exists()),
               Path("/usr/lib/python3/dist-packages/dolfinx/__init__.py"))


SUNDIALS_EX = Path("/usr/share/doc/libsundials-dev/examples/arkode/CXX_parallel/ark_heat2D_p.cpp")


def _sundials_setup(folder: Path) -> None:
    """ark_heat2D_p compiled from the example the package ships, against its Open MPI build."""
    subprocess.run(["mpicxx.openmpi", "-O2", "-o", str(folder / "heat2d"), str(SUNDIALS_EX),
                    "-lsundials_arkode", "-lsundials_nvecparallel", "-lm"], check=True)


# ---- code_saturne: the simple-junction tutorial ------------------------------------------------
CS_EX = Path("/usr/share/doc/code-saturne/examples/1-simple_junction")


def _cs_setup(folder: Path) -> None:
    """A study of the tutorial's case, 30 time steps, prepared by code_saturne's own stages:
    its solver (linked for the case), mesh input and setup are what each run takes."""
    env = {**os.environ, "USER": os.environ.get("USER") or "root"}  # (it reads $USER)

    def run(argv: list[str], cwd: Path) -> None:
        res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
        if res.returncode:
            raise SystemExit(f"code_saturne: {' '.join(argv)} failed (exit {res.returncode}): "
                             f"{res.stdout[-400:]}{res.stderr[-400:]}")
    run(["code_saturne", "create", "-s", "study", "-c", "case"], folder)
    shutil.copy(CS_EX / "mesh" / "downcomer.des", folder / "study" / "MESH")
    xml = (CS_EX / "case1" / "setup.xml").read_text()
    (folder / "study" / "case" / "DATA" / "setup.xml").write_text(
        re.sub(r"<iterations>\d+</iterations>", "<iterations>30</iterations>", xml))
    run(["code_saturne", "run", "-p", "setup.xml", "-n", "2", "--id", "prep", "--stage", "--initialize"],
        folder / "study" / "case" / "DATA")
    prep = folder / "study" / "case" / "RESU" / "prep"
    for name in ("cs_solver", "mesh_input", "setup.xml"):
        shutil.copy(prep / name, folder / name)


def _dolfinx_setup(folder: Path) -> None:
    (folder / "poisson.py").write_text(_DOLFINX_SCRIPT)


CODES = {
    "abinit": Code("abinit", ("abinit", str(ABINIT_EX / "tbasepar_1.abi")), _abinit_setup,
                   lambda run, P: ["abinit", "pb.abi"], (2, 3, 4), 6,
                   _count(r"^ ETOT\s+\d+", "pb.abo"), "SCF steps",
                   env=lambda: {"ABI_PSPDIR": "/usr/share/abinit/psp"}),
    "cp2k": Code("cp2k", ("cp2k", str(CP2K_EX / "argon.inp.gz")), _cp2k_setup,
                 lambda run, P: ["cp2k", "-i", "argon.inp"], (2, 4, 8), 6,
                 _count(r"^ MD\| Step number\s+\d+", "stdout.txt"), "MD steps"),
    "qe": Code("qe", ("pw.x", "/usr/share/espresso/pseudo/Si.pz-vbc.UPF"), _qe_setup,
               lambda run, P: ["pw.x", "-in", "si.in"], (4, 8, 16), 12,
               _count(r"^\s+iteration #\s+\d+", "stdout.txt"), "SCF iterations"),
    "openfoam": Code("openfoam", (str(FOAM_RC), str(FOAM_EX)), _foam_setup,
                     lambda run, P: [str(Path(_foam_env().get("FOAM_APPBIN", "")) / "icoFoam"), "-parallel"],
                     (4, 8, 16), 12, _count(r"^Time = ", "stdout.txt"), "time steps",
                     prepare=_foam_prepare, env=_foam_env),
    "nwchem": Code("nwchem", ("nwchem.openmpi",), _nw_setup,
                   lambda run, P: ["nwchem.openmpi", "benz.nw"], (4, 8, 16), 12,
                   _count(r"^ d= \d+,ls=", "stdout.txt"), "SCF iterations"),
    "meep": Code("meep", ("meep",), _meep_setup, lambda run, P: ["meep", "wg.ctl"], (4, 8, 16), 12,
                 _stated(r"\((\d+) timesteps\)", "stdout.txt"), "time steps"),
    "elk": Code("elk", ("elk-lapw", str(ELK_EX)), _elk_setup, lambda run, P: ["elk-lapw"], (4, 8, 16), 12,
                _count(r"Loop number", "INFO.OUT"), "SCF loops"),
    # (Debian's python3, whose GPAW extension links Open MPI)
    "gpaw": Code("gpaw", ("gpaw", "/usr/bin/python3"), _gpaw_setup, lambda run, P: ["/usr/bin/python3", "si.py"],
                 (8, 12, 16), 24, _stated(r"Converged after (\d+) iterations", "si.txt"), "SCF iterations"),
    "mpb": Code("mpb", ("mpb-mpi",), _mpb_setup, lambda run, P: ["mpb-mpi", "rods.ctl"], (2, 4, 8), 16,
                _count(r"^\s*linmin: converged", "stdout.txt"), "line minimisations"),
    "petsc": Code("petsc", ("mpicc.openmpi", str(PETSC_EX5), str(PETSC_DIR / "include" / "petsc.h")), _petsc_setup,
                  lambda run, P: [str(run.parent / "ex5"), "-da_grid_x", "128", "-da_grid_y", "128", "-snes_monitor"],
                  (4, 8, 16), 12, _count(r"^\s*\d+ SNES Function norm", "stdout.txt"), "SNES residuals (Newton steps + 1)"),
    # (Debian's python3, whose dolfinx and mpi4py link Open MPI)
    "dolfinx": Code("dolfinx", (str(DOLFINX), "/usr/bin/python3"),
                    _dolfinx_setup, lambda run, P: ["/usr/bin/python3", "poisson.py"], (4, 8, 16), 12,
                    _stated(r"CG iterations (\d+)", "stdout.txt"), "CG iterations (last solve)",
                    env=lambda: {"OMP_NUM_THREADS": "1"}),
    "sundials": Code("sundials", ("mpicxx.openmpi", str(SUNDIALS_EX)), _sundials_setup,
                     lambda run, P: [str(run.parent / "heat2d"), "--mesh", "128", "128",
                                     "--np", *map(str, dims_create(P, 2)),
                                     "--tf", "0.05", "--nout", "1", "--output", "1"],
                     (4, 8, 16), 12, _stated(r"NLS iters\s+=\s+(\d+)", "stdout.txt"), "Newton iterations"),
    "scalapack": Code("scalapack", (str(XDLU),), lambda folder: None, lambda run, P: [str(XDLU)], (4, 8, 16), 12,
                      _count(r"^WALL .* PASSED", "stdout.txt"), "tests passed", prepare=_xdlu_prepare),
    "code_saturne": Code("code_saturne", ("code_saturne", str(CS_EX / "mesh" / "downcomer.des")), _cs_setup,
                         lambda run, P: [str(run / "cs_solver"), "--mpi"], (2, 4, 8), 12,
                         _count(r"^ INSTANT .* TIME STEP NUMBER", "run_solver.log"), "time steps",
                         env=lambda: {"OMP_NUM_THREADS": "1"}),
}
DEFAULT = ("abinit", "cp2k", "qe", "openfoam", "meep", "elk", "gpaw", "mpb", "scalapack", "petsc", "dolfinx",
           "sundials")


def capture(code: Code, P: int, force: bool, out: Path) -> dict:
    """Trace ``code`` at P in its run folder (cached): the trace and the code's own output."""
    base = out / code.name
    run = base / f"P{P}"
    record = run / "capture.json"
    if record.exists() and not force:
        return json.loads(record.read_text())
    if not (base / ".setup-done").exists() or force:
        if base.exists():
            shutil.rmtree(base)
        base.mkdir(parents=True)
        code.setup(base)
        (base / ".setup-done").write_text("ok")
    if run.exists():
        shutil.rmtree(run)
    run.mkdir(parents=True)
    for item in base.iterdir():
        if item.is_file() and not item.name.startswith("."):
            shutil.copy(item, run / item.name)
    code.prepare(run, P)
    extra = code.env()
    saved = {k: os.environ.get(k) for k in extra}
    here = os.getcwd()
    os.environ.update(extra)
    os.chdir(run)  # the codes read and write files where they run
    t0 = time.perf_counter()
    try:
        with open(run / "stdout.txt", "w") as f:
            res = trace_run(code.command(run, P), P, run / f"P{P}.h5", overwrite=True, stdout=f,
                            app=code.name)
    finally:
        os.chdir(here)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    t = res.trace
    calls = unmodelled_calls(t.meta)
    row = {"code": code.name, "P": P, "complete": bool(t.complete), "events": int(t.n_events),
           "unmodelled": [f"{c.name} x{c.calls}" for c in calls if not c.local],
           "wall_s": time.perf_counter() - t0, "runtime": float(t.runtime),
           "own_steps": code.steps(run)}
    record.write_text(json.dumps(row, indent=1))
    return row


def signature_row(code: Code, P: int, out: Path) -> dict:
    """The signature of the cached trace at P: phases, coverage, loop phases' weights."""
    t = load_trace(out / code.name / f"P{P}" / f"P{P}.h5")
    c0 = time.process_time()
    sig = extract(t)
    took = time.process_time() - c0
    loops = sorted((p for p in sig.phases if p.kind == "loop"), key=lambda p: -p.share)
    return {"P": P, "phases": len(sig.phases), "coverage": float(sig.coverage),
            "coverage_slowest": float(sig.coverage_slowest), "events": int(t.n_events),
            "extract_cpu_s": took, "shape": [(p.kind, sorted(p.ops)) for p in sig.phases],
            "loops": [{"phase": p.id, "weight": int(p.weight), "share": float(p.share),
                       "ops": list(p.ops)} for p in loops[:4]]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="example: python bench/validate_unseen.py --codes abinit cp2k")
    ap.add_argument("--codes", nargs="+", choices=list(CODES), default=list(DEFAULT))
    ap.add_argument("--force", action="store_true", help="trace the codes again")
    ap.add_argument("--out", type=Path, default=OUT,
                    help=f"where runs and traces are cached (default {OUT.relative_to(ROOT)})")
    ap.add_argument("--no-predict", action="store_true", help="skip the whole prediction")
    opts = ap.parse_args(argv)
    from signature._memory import tune_allocation
    tune_allocation()  # the stages timed here get the `sigex` command's memory settings

    skipped, rows = {}, []
    for name in opts.codes:
        code = CODES[name]
        why = code.available()
        if why:
            skipped[name] = why
            print(f"{name}: skipped, {why}", file=sys.stderr)
            continue
        caps = []
        for P in sorted({*code.fit, code.held}):
            print(f"{name} P={P} ...", file=sys.stderr, flush=True)
            caps.append(capture(code, P, opts.force, opts.out))
        sigs = [signature_row(code, c["P"], opts.out) for c in caps]
        fit_shapes = [s["shape"] for s in sigs if s["P"] in code.fit]
        print(f"{name}: logical model ...", file=sys.stderr, flush=True)
        logical = validate_apps.logical_row(name, opts.out, code.fit, code.held)
        predict = (None if opts.no_predict else
                   validate_apps.predict_row(name, opts.out, code.fit, code.held))
        rows.append({"code": name, "fit": list(code.fit), "held": code.held, "captures": caps,
                     "signatures": sigs, "same_phases_at_fit_P": all(s == fit_shapes[0] for s in fit_shapes),
                     "steps_what": code.steps_what, "logical": logical, "predict": predict})

    print("\ncodes nobody tuned sigex for (Debian packages, Open MPI, oversubscribed on "
          f"{os.cpu_count()} cores)\n")
    table = [("code", "P", "events", "not modelled", "own steps", "phases", "coverage", "main loops (weight: share)")]
    for r in rows:
        for c, s in zip(r["captures"], r["signatures"]):
            loops = ", ".join(f"{lp['weight']}: {100 * lp['share']:.0f}%" for lp in s["loops"][:3]) or "none"
            table.append((r["code"], f"{c['P']}{' (held)' if c['P'] == r['held'] else ''}",
                          f"{c['events']:,}", ", ".join(c["unmodelled"]) or "0",
                          f"{c['own_steps']} {r['steps_what']}" if c["own_steps"] is not None else "-",
                          str(s["phases"]), f"{100 * s['coverage']:.1f}%", loops))
    _print_table(table)

    print("\nthe logical model fitted at the smaller P, placed at the held-out P, and the whole "
          "prediction there\n")
    table = [("code", "fit -> held", "same phases at fit P", "placed", "exact", "weights exact",
              "refused (first reason)", "left out of the real run", "left out: computation pred/real",
              "computation pred/real")]
    summary_codes = {}
    for r in rows:
        lg, pr = r["logical"], r["predict"]
        phases = lg.get("phases", [])
        placed = [p for p in phases if not p.get("refused")]
        refused = [p for p in phases if p.get("refused")]
        exact = [p for p in placed if p.get("exact")]
        weights = [p for p in placed if p.get("weight_exact")]
        why = lg.get("refused") or (f"phase {refused[0]['phase']}: {refused[0]['refused']}" if refused else "")
        left = (f"{100 * pr['left_out_share_real']:.1f}%" if pr and pr.get("predicted")
                and pr.get("left_out_share_real") is not None else ("all" if pr and not pr.get("predicted") else "-"))
        comp = (f"{pr['computation_predicted']:.2f}/{pr['computation_real']:.2f} s "
                f"({100 * pr['computation_error']:+.1f}%)" if pr and pr.get("predicted")
                and pr.get("computation_error") is not None else "-")
        table.append((r["code"], f"{','.join(map(str, r['fit']))} -> {r['held']}"
                      + (f" (--grid {lg['grid']})" if lg.get("grid") else ""),
                      "yes" if r["same_phases_at_fit_P"] else "no", f"{len(placed)}/{len(phases)}",
                      str(len(exact)), f"{len(weights)}/{len(placed)}", why[:90], left,
                      validate_apps._left_computation(pr.get("left_out_computation") if pr else None), comp))
        summary_codes[r["code"]] = {
            "coverage": {s["P"]: round(s["coverage"], 4) for s in r["signatures"]},
            "phases": {s["P"]: s["phases"] for s in r["signatures"]},
            "same_phases_at_fit_P": r["same_phases_at_fit_P"], "placed": len(placed), "phases_model": len(phases),
            "grid_given": lg.get("grid"),
            "exact": len(exact), "weights_exact": len(weights),
            "left_out_share_real": pr.get("left_out_share_real") if pr and pr.get("predicted") else None,
            "left_out_computation": pr.get("left_out_computation") if pr and pr.get("predicted") else None,
            "computation_error": pr.get("computation_error") if pr and pr.get("predicted") else None,
            "runtime_predicted": pr.get("runtime_predicted") if pr and pr.get("predicted") else None,
            "model_cpu_s": lg.get("model_cpu_s")}
    _print_table(table)
    cov_min = min((s["coverage"] for r in rows for s in r["signatures"]), default=None)
    print()
    print(json.dumps({
        "bench": "validate_unseen", "codes": [r["code"] for r in rows], "skipped": skipped,
        "captured": sum(c["complete"] for r in rows for c in r["captures"]),
        "runs": sum(len(r["captures"]) for r in rows),
        "coverage_min": cov_min,
        "same_phases_at_fit_P": [r["code"] for r in rows if r["same_phases_at_fit_P"]],
        "fully_placed": [c for c, s in summary_codes.items() if s["phases_model"] and s["placed"] == s["phases_model"]],
        "goal": {"coverage_min": GOAL_COVERAGE, "same_phases_at_fit_P": "every code",
                 "fully_placed": "every code"},
        "met": {"coverage_min": cov_min is not None and cov_min >= GOAL_COVERAGE,
                "same_phases_at_fit_P": all(r["same_phases_at_fit_P"] for r in rows) and bool(rows),
                "fully_placed": bool(rows) and all(s["phases_model"] and s["placed"] == s["phases_model"]
                                                   for s in summary_codes.values())},
        "per_code": summary_codes}, default=float))
    return 0


def _print_table(table: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for k, row in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    sys.exit(main())
