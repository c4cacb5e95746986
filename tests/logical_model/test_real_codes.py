"""The logical model on C programs shaped like real codes, traced at P = 4, 8, 16 and
compared event for event with a real traced run at an unseen P = 24: a non-periodic 1-D
halo with MPI_PROC_NULL ends (with Sendrecv, Isend/Irecv, and an even/odd ordered
variant), traffic on a duplicate
of MPI_COMM_WORLD, row and column communicators from MPI_Comm_split (of MPI_Dims_create's
grid, and of a fixed number of groups), a hierarchical reduction over groups of ranks and
their leaders' communicator (also where the one group at P = 4 has every rank), rooted
collectives whose root sends or receives what the others do not, processor patches of an
undeclared 2-D block decomposition (each rank's existing neighbours in rank order; also with
persistent requests started every step, PETSc's way; and PETSc's set-up, rank 0 alone
broadcasting on its own copy of MPI_COMM_SELF), a halo on a declared non-periodic 2-D grid
whose ranks wait on each existing neighbour's request in turn, LAMMPS's brick
communication on a declared 3-D grid (calls that exist only where a dimension is over 1
or over 2 wide), a multigrid whose coarse levels leave ranks idle, and a particle/PME
split (every 4th rank of another class, each class on its own communicator), a k-point
loop whose Bcasts take their root from each rank in turn (and on each half's
communicator from each member), also with each k-point computed by its owner right
before its Bcast; and a
ghost exchange on the Cartesian communicator whose calls along a dimension 2 wide at
every fit P take the direction a wider dimension showed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import signature
from conftest import needs_mpi, trace_c_program
from logical_model import from_traces
from signature import load_trace, trace_run
from sigex.cli import main

PROGRAMS = Path(__file__).parent / "programs"
BENCH_C = Path(__file__).parents[2] / "bench" / "c"
FIT, UNSEEN = (4, 8, 16), 24
CASES = {
    "halo": ("halo1d.c", ["4", "sendrecv"]),
    # the SMPI twin's form: Irecv/Isend with MPI_PROC_NULL at the ends, one Waitall
    "halo_nonblocking": (str(BENCH_C / "halo1d.c"), ["--n", "4800", "--iters", "4", "--check-every", "2",
                                                      "--nonblocking", "1"]),
    "evenodd": ("halo1d.c", ["4", "evenodd"]),
    "dup": ("halo1d.c", ["4", "sendrecv", "dup"]),
    "split": ("split2d.c", ["4"]),
    # ... on a grid of 2 groups x P/2 (k-point groups, pools, partitions): no dims rule of
    # MPI_Dims_create's kind gives it (4 x 2 at P = 8, where the program has 2 x 4)
    "groups": ("split2d.c", ["4", "2"]),
    "rooted": ("rooted.c", ["4"]),
    # processor patches of a 2-D block decomposition (OpenFOAM's "simple" method): no grid
    # declared, each rank's existing neighbours in ascending rank order, none past the edge
    "patches": ("patch2d.c", ["6"]),
    # PETSc's set-up: rank 0 alone broadcasts on its own copy of MPI_COMM_SELF (every rank has
    # copies of it), a collective of one rank a class of ranks makes
    "selfcomm": ("selfcomm.c", ["6"]),
    # ... with persistent requests made once and started every step, as PETSc's vector
    # scatters: the starts post the messages (read as the Irecv and Isend they act as)
    "patches_persistent": ("patch2d.c", ["6", "persistent"]),
    # a halo on a declared non-periodic 2-D grid, each existing neighbour's Irecv and Isend
    # posted, then an MPI_Wait on each in turn (SUNDIALS's parallel examples): a corner rank
    # waits 4 times, an edge rank 6, an interior one 8, each wait keyed by its request
    "cart_waits": ("cartwait.c", ["6"]),
    # a hierarchical reduction: within groups to their first ranks, over the groups on the
    # leaders' own communicator, and back; groups of 2 ranks (a node), or 2 groups of P/2
    "hier_node": ("hier.c", ["6", "node", "2"]),
    "hier_groups": ("hier.c", ["6", "groups", "2"]),
    # ... groups of 4 ranks: at P = 4 the one group has every rank (no duplicate of the world:
    # the runs at 8 and 16 have 2 and 4 of them) and the leaders' communicator one rank
    "hier_node4": ("hier.c", ["6", "node", "4"]),
    # LAMMPS's brick communication: neighbours from a declared periodic 3-D grid, traffic on
    # MPI_COMM_WORLD, no call where a neighbour is the rank itself, exchanges made only where a
    # dimension is over 2 wide; dimension 1 is 2 wide at every fit P and 3 at the unseen one
    "brick": ("brick3d.c", ["24"]),
    # a multigrid V-cycle whose coarse levels leave ranks idle (every 2nd, every 4th rank works)
    "multigrid": (str(BENCH_C / "mg_idle.c"), ["--n", "9600", "--halo", "8", "--cycles", "6"]),
    # ... its SMPI twin's form: Irecv/Isend with MPI_PROC_NULL at the ends, one Waitall per level
    "multigrid_nb": (str(BENCH_C / "mg_idle.c"), ["--n", "9600", "--halo", "8", "--cycles", "6",
                                                   "--nonblocking", "1"]),
    # a k-point loop: item k broadcast from its owner k mod P, bands of each half of the ranks
    # from the half's members in turn (20 k-points: the last turn is partial at 8 and 16)
    "kpoints": ("kpoints.c", ["20", "6"]),
    # ... each k-point computed by its owner right before its Bcast
    "kpoints_owner": ("kpoints.c", ["20", "6", "owner"]),
    # GROMACS's shape: every 4th rank a PME rank, each class on its own communicator
    "pme_split": (str(BENCH_C / "pme_split.c"), ["--n", "7200", "--grid", "24", "--halo", "50", "--steps", "10",
                                                  "--energy", "5"]),
    # ... its SMPI twin's form: both classes on MPI_COMM_WORLD, rings of every 4th rank
    "pme_world": (str(BENCH_C / "pme_split.c"), ["--n", "7200", "--grid", "24", "--halo", "50", "--steps", "10",
                                                  "--energy", "5", "--world", "1"]),
}


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """Every case traced at the fit P and at the unseen P: {case: folder of fit traces}."""
    root = tmp_path_factory.mktemp("real")
    exes = {}
    for src in {c[0] for c in CASES.values()}:
        exe = root / "bin" / (Path(src).stem + ("-bench" if Path(src).is_absolute() else ""))
        exe.parent.mkdir(exist_ok=True)
        subprocess.run([os.environ.get("SIGEX_MPICC") or "mpicc", "-O1", "-I", str(BENCH_C.parent / "smpi"), "-o",
                        str(exe), str(PROGRAMS / src), "-lm"], check=True)
        exes[src] = exe
    out = {}
    for case, (src, args) in CASES.items():
        for P in (*FIT, UNSEEN):
            where = root / case / (f"P{P}.h5" if P in FIT else f"unseen/P{P}.h5")
            res = trace_run([str(exes[src]), *args], P, where)
            assert res.ok, f"{case} at P={P}: {res.trace.meta.get('incomplete_reason')}"
        out[case] = root / case
    return out


def assert_same_events(model, real_path: Path) -> None:
    """The logical trace at the real run's P has its weights and each rank's events (op,
    peer, receive peer, root, bytes, receive bytes, tag) in order, phase by phase."""
    real = signature.extract(load_trace(real_path))
    P = real.nprocs
    model.check_target(P)
    assert model.weights(P) == [ph.weight for ph in real.phases]
    ev = model.events(P)
    for k, ph in enumerate(real.phases):
        sel = ev["phase"] == k
        assert np.array_equal(np.searchsorted(ev["rank"][sel], np.arange(P + 1)), ph.template_offsets), \
            f"phase {k}: events per rank differ"
        for c in ("op", "peer", "recv_peer", "root", "bytes", "recv_bytes", "tag"):
            want, got = np.asarray(ph.template[c], np.int64), np.asarray(ev[c][sel], np.int64)
            bad = np.flatnonzero(want != got)
            assert not bad.size, (f"phase {k} column {c}: rank "
                                  f"{np.searchsorted(ph.template_offsets, bad[0], 'right') - 1}: real "
                                  f"{want[bad[0]]}, model {got[bad[0]]}")


@needs_mpi
@pytest.mark.parametrize("case", list(CASES))
def test_extrapolated_exactly_to_an_unseen_p(traced, case):
    """From P = 4, 8, 16 every phase is extrapolable and the logical trace at P = 24 equals
    the real run there, event for event on every rank."""
    model = from_traces(traced[case])
    assert all(ph.extrapolable for ph in model.phases), model.describe()
    assert_same_events(model, traced[case] / "unseen" / f"P{UNSEEN}.h5")


@needs_mpi
def test_persistent_requests_are_the_messages_their_starts_post(traced):
    """MPI_Startall names no peer: its persistent requests' messages are read as the Irecv and
    Isend each start posts (with the init calls' peers, tags and sizes), so the model's step
    sends what the real one does: as many messages at the unseen P as the replay of the real
    run moves (before, the model placed the starts alone and its trace held no message)."""
    from replay import Program
    folder = traced["patches_persistent"]
    real = load_trace(folder / "unseen" / f"P{UNSEEN}.h5")
    assert (real.events["op"] == signature.OP_CODE["Startall"]).sum() > 0
    assert any("MPI_Start/MPI_Startall are read as the nonblocking calls" in n
               for n in signature.extract(real).notes)
    model = from_traces(folder)
    ev = model.events(UNSEEN)
    w = np.asarray(model.weights(UNSEEN))
    sends = ev["op"] == signature.OP_CODE["Isend"]
    assert not (ev["op"] == signature.OP_CODE["Startall"]).any()
    assert int(np.bincount(ev["phase"][sends], minlength=len(w)) @ w) == len(Program.from_trace(real).msg_src) > 0


@needs_mpi
def test_what_the_models_say(traced):
    """The halo's ends call with PROC_NULL; the even/odd variant orders its events by rank
    parity; the duplicate of the world is the world; row and column communicators are
    modelled as layouts of MPI_Dims_create's grid, or of 2 x P/2 for 2 groups; the leaders
    of 2 groups have their communicator alone, exact (ranks 0 and 16 at P = 32), and no
    layout at P = 25; a Scatter's root sends N/P bytes per destination and the other ranks
    nothing."""
    halo = from_traces(traced["halo"]).describe()
    assert "rank + 1 (if in range) or PROC_NULL" in halo
    evenodd = from_traces(traced["evenodd"])
    assert [ph.classes for ph in evenodd.phases if ph.kind == "loop"] == ["rank parity"]
    split = from_traces(traced["split"])
    roles = split.comm_roles()
    assert {r.keep for r in roles} == {(False, True), (True, False)}
    assert all(r.rule.name == "dims_create" for r in roles)
    hier = from_traces(traced["hier_groups"])
    assert not any(ph.statistical for ph in hier.phases)
    assert "the communicator of ranks r with r mod P/2 = 0 (rank 0 of each of 2 groups) (the others on none)" in {
        r.describe() for r in hier.comm_roles()}
    ev = hier.events(32)
    assert set(ev["rank"][ev["op"] == signature.OP_CODE["Allreduce"]].tolist()) == {0, 16}
    assert any("no layout at P=25 (P=25 is not a multiple of 2 groups)" in p
               for pr in hier.phase_problems(25).values() for p in pr)
    groups = from_traces(traced["groups"]).comm_roles()
    assert {r.keep for r in groups} == {(False, True), (True, False)}
    assert {(r.rule.name, r.rule.count, r.rule.dims(24)) for r in groups} == {("groups", 2, (2, 12))}
    scatter = [s for ph in from_traces(traced["rooted"]).phases for s in ph.slots
               if s.op == signature.OP_CODE["Scatter"]][0]
    assert scatter.bytes is None and scatter.root_bytes.predict([64])[0] == pytest.approx(4 * 80640 / 64)


@needs_mpi
def test_an_owner_that_computes_each_item_keeps_its_work(traced):
    """Each k-point is computed by its owner right before its Bcast: one rank busy per
    item, a different one each time. Read in the rotation's frame, the loop's work is one
    rank's (a lone rank, rank 1 at every P), and the logical trace at P = 24 gives that
    rank the owner's work per item as the real run there measures it, where a mean over
    each rank's turns gave every rank 1/P of it (and the replay 1/P of the time)."""
    model = from_traces(traced["kpoints_owner"])
    loop = [ph for ph in model.phases if ph.pattern == "Bcast"]
    assert loop and any("in turn, one per call (a rotation)" in n for n in loop[0].notes), model.describe()
    real = signature.extract(load_trace(traced["kpoints_owner"] / "unseen" / f"P{UNSEEN}.h5"))
    k = [ph.id for ph in real.phases if ph.ops == ("Bcast",)][0]
    cpu = real.phases[k].stats["cpu_mean"]
    ev = model.events(UNSEEN)
    work = ev["work"][ev["phase"] == k]
    for w in (cpu, work):  # one rank works, the others next to nothing
        assert int(np.argmax(w)) == 1 and w[1] >= 20 * np.median(np.delete(w, 1)), (cpu, work)
    assert work[1] == pytest.approx(cpu[1], rel=0.25)


@needs_mpi
def test_the_logical_trace_of_sub_communicators_replays(traced, tmp_path):
    """The written trace declares every row and column communicator with its members, so
    that the replay runs its collectives: `sigex extrapolate` then load_trace."""
    out = tmp_path / "split-P64.h5"
    assert main(["extrapolate", str(traced["split"]), "--target", "64", "-o", str(out), "-q"]) == 0
    t = load_trace(out)
    from replay import Program
    Program.from_trace(t)  # checks that every collective's caller is a member
    # MPI_Dims_create(64, 2) = 8 x 8: world, 8 rows, 8 columns
    assert len(t.comms) == 17 and sorted(set(t.comms.size.tolist())) == [8, 64]


@needs_mpi
def test_per_rank_bytes_that_follow_no_rule_are_refused(traced):
    """A rooted collective's bytes are exact per rank; if a rank other than the root sent
    something else, the phase would be refused rather than fitted on the mean."""
    import dataclasses
    sigs = [signature.extract(load_trace(traced["rooted"] / f"P{P}.h5")) for P in FIT]
    loop = next(i for i, ph in enumerate(sigs[-1].phases) if ph.kind == "loop")
    ph = sigs[-1].phases[loop]
    T = {c: v.copy() for c, v in ph.template.items()}
    e = int(ph.template_offsets[3])  # rank 3's first event: its Scatter
    T["recv_bytes"][e] += 8
    phases = list(sigs[-1].phases)
    phases[loop] = dataclasses.replace(ph, template=T)
    sigs[-1] = dataclasses.replace(sigs[-1], phases=tuple(phases))
    from logical_model import build
    model = build(sigs)
    problems = model.phases[loop].problems
    assert len(problems) == 1 and "recv_bytes differ between ranks at P=16" in problems[0] \
        and "rank 3" in problems[0]


@needs_mpi
def test_sizes_that_depend_on_the_data_are_modelled_by_their_mean(traced):
    """Where a slot's sizes change between repetitions (the signature's largest size is
    above its mean: atoms that move) and differ between ranks, they are the data's: the
    mean over ranks is modelled and the phase says so, instead of a refusal."""
    import dataclasses
    sigs = [signature.extract(load_trace(traced["rooted"] / f"P{P}.h5")) for P in FIT]
    loop = next(i for i, ph in enumerate(sigs[-1].phases) if ph.kind == "loop")
    ph = sigs[-1].phases[loop]
    T = {c: v.copy() for c, v in ph.template.items()}
    e = int(ph.template_offsets[3])  # rank 3's Scatter receives 8 bytes more
    T["recv_bytes"][e] += 8
    cost = dict(ph.template_cost)
    cost["recv_bytes_max"] = T["recv_bytes"].astype(float) + 16  # and sizes vary over repetitions
    phases = list(sigs[-1].phases)
    phases[loop] = dataclasses.replace(ph, template=T, template_cost=cost)
    sigs[-1] = dataclasses.replace(sigs[-1], phases=tuple(phases))
    from logical_model import build
    model = build(sigs)
    pm = model.phases[loop]
    assert not pm.problems
    assert any("message sizes depend on the data" in n and "P=16" in n for n in pm.notes)
    slot = next(sl for sl in pm.slots if sl.data_note)
    assert slot.op == signature.OP_CODE["Scatter"]


@pytest.fixture(scope="module")
def lammps_like(tmp_path_factory):
    """bench/c/lammps_like.c (a 2:1:1 periodic box on LAMMPS's least-surface grid, declared
    with MPI_Cart_create) traced at P = 2, 4, 6, 8, 16, 27, 32, 36 and 48, in folders of fit
    sets: small (4, 8, 16), hinted (2, 4, 8, 16), fit (8, 27, 32), fit2 (4, 6, 27),
    fit2_hinted (4, 6, 8, 27), unseen (36, 48)."""
    root = tmp_path_factory.mktemp("lammps_like")
    bench = Path(__file__).parents[2] / "bench"
    exe = root / "lammps_like"
    subprocess.run([os.environ.get("SIGEX_MPICC") or "mpicc", "-O1", "-I", str(bench / "smpi"), "-o", str(exe),
                    str(bench / "c" / "lammps_like.c")], check=True)
    sets = {"small": (4, 8, 16), "hinted": (2, 4, 8, 16), "fit": (8, 27, 32), "fit2": (4, 6, 27),
            "fit2_hinted": (4, 6, 8, 27), "unseen": (36, 48)}
    for P in sorted({P for ps in sets.values() for P in ps}):
        res = trace_run([str(exe), "--n", "48", "--steps", "3", "--thermo", "3"], P, root / "all" / f"P{P}.h5")
        assert res.ok, f"lammps_like at P={P}: {res.trace.meta.get('incomplete_reason')}"
    for name, ps in sets.items():
        (root / name).mkdir()
        for P in ps:
            (root / name / f"P{P}.h5").symlink_to(root / "all" / f"P{P}.h5")
    return root


@needs_mpi
def test_a_hand_chosen_grid_is_modelled_and_the_user_decides_what_the_fit_p_cannot(lammps_like, tmp_path,
                                                                                     capsys):
    """LAMMPS's grid (4x2x4 at P=32, not MPI_Dims_create's 4x4x2) is no longer refused: from
    P = 8, 27, 32 the least-surface rule explains it and the logical trace at P = 48 equals
    the real run event for event. From P = 4, 6, 27 several box shapes explain the runs and
    part at P = 36 (6x2x3 or 4x3x3): that target is refused naming --grid and the run that
    would decide it (P = 8, where those shapes give 2x2x2 or 4x1x2); with --grid 4x3x3, or
    with that run traced as well, the logical trace equals the real P = 36 run."""
    model = from_traces(lammps_like / "fit")
    assert model.grid.rule.name == "surface" and model.grid.periods == (True, True, True)
    assert_same_events(model, lammps_like / "unseen" / "P48.h5")
    model = from_traces(lammps_like / "fit2")
    with pytest.raises(signature.errors.ExtrapolationError, match=r"cannot decide the process grid at P=36.*--grid"
                       r".*or trace a run at P=8 as well \(where they give 2x2x2 or 4x1x2\)"):
        model.check_target(36)
    assert_same_events(model.with_grid(36, (4, 3, 3)), lammps_like / "unseen" / "P36.h5")
    assert_same_events(from_traces(lammps_like / "fit2_hinted"), lammps_like / "unseen" / "P36.h5")
    out = tmp_path / "l36.h5"
    assert main(["extrapolate", str(lammps_like / "fit2"), "--target", "36", "--grid", "4x3x3", "-o", str(out),
                 "-q"]) == 0
    assert load_trace(out).comms.cartesian(1) == ((4, 3, 3), (True, True, True))
    assert main(["extrapolate", str(lammps_like / "fit2"), "--target", "36", "--grid", "6x6", "-o",
                 str(tmp_path / "x.h5"), "-q"]) == 2
    assert "2 dimensions" in capsys.readouterr().err


@needs_mpi
def test_what_the_fit_p_cannot_tell_is_refused_at_the_target(lammps_like):
    """From P = 4, 8, 16 the y and z dimensions are 1 or 2 wide in every run, where the +1 and
    -1 neighbours are one rank, and x's faces may or may not shrink with dims_2 (2 at every
    run). The calls along y and z are those along x, which was 4 wide at P = 16: they take
    its directions (``_dimension_analogy``). The faces' two readings part at P = 48 (4x3x4):
    the target is refused naming both, instead of picking one, and naming the run that
    would decide them (P = 2, 2x1x1, where dims_2 is 1); with it traced as well, the logical
    trace at P = 48 equals the real run event for event."""
    model = from_traces(lammps_like / "small")
    with pytest.raises(signature.errors.ExtrapolationError) as err:
        model.check_target(48)
    assert "grid neighbour (+0,+1,+0) or grid neighbour (+0,-1,+0)" not in err.value.detail
    assert any("are those along dimension 0" in n for ph in model.phases for n in ph.notes)
    assert "dims1(P)^-1 * dims2(P)^-1" in err.value.detail
    assert "; a run traced at P=2 (grid 2x1x1) as well would decide" in str(err.value)
    assert_same_events(from_traces(lammps_like / "hinted"), lammps_like / "unseen" / "P48.h5")


@needs_mpi
def test_a_refusal_names_each_phase_once_with_its_slots_together(traced):
    """Slots that fail for the same reason share one problem line, and the refusal names each
    phase once: two Sendrecvs whose peers at P=16 follow no rule give one line for both."""
    import dataclasses
    from logical_model import build
    sigs = [signature.extract(load_trace(traced["halo"] / f"P{P}.h5")) for P in FIT]
    loop = next(i for i, ph in enumerate(sigs[-1].phases) if ph.kind == "loop")
    ph = sigs[-1].phases[loop]
    T = {c: v.copy() for c, v in ph.template.items()}
    sendrecv = np.flatnonzero(T["op"] == signature.OP_CODE["Sendrecv"])
    T["peer"][sendrecv] = np.random.default_rng(1).permutation(16)[np.arange(len(sendrecv)) % 16]
    phases = list(sigs[-1].phases)
    phases[loop] = dataclasses.replace(ph, template=T)
    sigs[-1] = dataclasses.replace(sigs[-1], phases=tuple(phases))
    model = build(sigs)
    assert model.phases[loop].problems == [
        "slots 0 (Sendrecv), 1 (Sendrecv): no communication rule reproduces the peers at every P"]
    with pytest.raises(signature.errors.ExtrapolationError) as err:
        model.check_target(64)
    assert str(err.value).count(f"phase {model.phases[loop].id}:") == 1 and "\n" not in str(err.value)


@needs_mpi
def test_models_with_communicators_classes_and_alternatives_round_trip(traced, lammps_like, tmp_path):
    """save -> load keeps sub-communicator layouts, PROC_NULL ends, parity classes, rooted
    bytes, grid rules, the alternatives checked at the target, neighbours skipped on a grid,
    waits that follow their calls, rank classes and class communicators: same text, same
    events."""
    from logical_model import LogicalModel
    for name, folder, P in [("split", traced["split"], 64), ("evenodd", traced["evenodd"], 64),
                            ("halo", traced["halo_nonblocking"], 64), ("rooted", traced["rooted"], 64),
                            ("lammps", lammps_like / "small", 48), ("brick", traced["brick"], 48),
                            ("multigrid", traced["multigrid_nb"], 48), ("pme", traced["pme_split"], 48)]:
        model = from_traces(folder)
        back = LogicalModel.load(model.save(tmp_path / f"{name}.json"))
        assert back.describe(P) == model.describe(P), name
        if name == "lammps":
            assert back.undecided(P) == model.undecided(P) and back.undecided(P)
            continue
        a, b = model.events(P), back.events(P)
        for c in a:
            np.testing.assert_array_equal(a[c], b[c], err_msg=f"{name} {c}")


@pytest.fixture(scope="module")
def ghosts_on_cart(tmp_path_factory):
    """ghost3d.c with the atoms by Sendrecv, the cutoff under every brick's width (one swap
    per dimension), traffic on the Cartesian communicator, at the fit P and at P = 24."""
    return trace_c_program(tmp_path_factory.mktemp("ghost3d-cart"), PROGRAMS / "ghost3d.c",
                           ["50000", "0.1", "20", "sendrecv"], FIT, UNSEEN, libs=("-lm",))


@needs_mpi
def test_calls_along_a_dimension_two_wide_take_the_direction_a_wider_one_showed(ghosts_on_cart):
    """On the Cartesian communicator, dimension 1 is 2 wide at every fit P ((2, 2, 1),
    (2, 2, 2), (4, 2, 2)): +1 and -1 are one rank, the fit P cannot tell which way each
    call goes, and P = 24 ((4, 3, 2)) was refused as undecided. The calls along it are,
    call by call, those along dimension 0, which was 4 wide at P = 16: each takes the
    direction its twin did, as on MPI_COMM_WORLD (``_dimension_analogy``), and the phase
    is placed event for event (sizes aside: they are the data's)."""
    model = from_traces(ghosts_on_cart)
    assert any("are those along dimension 0" in n for ph in model.phases for n in ph.notes), model.describe()
    real = signature.extract(load_trace(ghosts_on_cart / "unseen" / f"P{UNSEEN}.h5"))
    model.check_target(UNSEEN)
    assert model.weights(UNSEEN) == [ph.weight for ph in real.phases]
    ev = model.events(UNSEEN)
    for k, ph in enumerate(real.phases):
        sel = ev["phase"] == k
        assert np.array_equal(np.searchsorted(ev["rank"][sel], np.arange(UNSEEN + 1)), ph.template_offsets)
        for c in ("op", "peer", "recv_peer", "root", "tag"):
            assert np.array_equal(np.asarray(ph.template[c], np.int64), np.asarray(ev[c][sel], np.int64)), (k, c)
        real_bytes, model_bytes = np.sum(ph.template["bytes"]), np.sum(ev["bytes"][sel])
        assert abs(model_bytes - real_bytes) <= 0.05 * max(real_bytes, 1), (k, model_bytes, real_bytes)


@pytest.fixture(scope="module")
def stencil27(tmp_path_factory):
    """stencil27.c (48^3 box, 20 steps) traced at P = 4, 8, 16 and 9, and at P = 32."""
    return trace_c_program(tmp_path_factory.mktemp("stencil27"), PROGRAMS / "stencil27.c", ["48", "20"],
                           (4, 8, 9, 16), 32)


@needs_mpi
def test_a_refusal_names_the_run_that_would_decide_it(stencil27):
    """Fitted at P = 4, 8, 16 the grid is 2 wide or less along dimensions 1 and 2: an edge
    or corner neighbour's direction along them, and a face's extent across dimension 1,
    fit every traced P either way, and P = 32 is refused as undecided. The refusal names
    the smallest P below the target at which every such reading parts (P = 9, 3x3x1), and
    with that run traced as well the phase is placed at P = 32 event for event."""
    from logical_model import build, read_signatures
    from signature.errors import ExtrapolationError
    sigs, grids = read_signatures([stencil27 / f"P{P}.h5" for P in (4, 8, 16)])
    model = build(sigs, grids=grids)
    assert model.deciding_run(32) == 9
    with pytest.raises(ExtrapolationError) as err:
        model.check_target(32)
    assert "; a run traced at P=9 (grid 3x3x1) as well would decide" in str(err.value)
    sigs, grids = read_signatures([stencil27 / f"P{P}.h5" for P in (4, 8, 9, 16)])
    model = build(sigs, grids=grids)
    assert model.deciding_run(32) is None
    assert_same_events(model, stencil27 / "unseen" / "P32.h5")


@pytest.fixture(scope="module")
def converging_groups(tmp_path_factory):
    """hier.c with groups of 2 ranks that each iterate on their own communicator as often as
    their data wants (1 to 3 Allreduces per step, no rule of the group's index), traced at
    the fit P and at P = 24."""
    return trace_c_program(tmp_path_factory.mktemp("converge"), PROGRAMS / "hier.c", ["6", "node", "2", "converge"],
                           FIT, UNSEEN)


@needs_mpi
def test_groups_that_iterate_as_often_as_their_data_wants_make_their_mean(converging_groups):
    """Each group's members agree on their count, the groups do not: the phase is modelled
    statistically, the communicators making the mean count (floor(mean) calls each, one
    more on as many as the fraction gives, so that the total follows the mean), and the
    notes say so. Refused before: 'ranks make different numbers of these calls ... a
    replay would deadlock'. At P = 24 the group Allreduces are within 15% of the real
    run's: the mean is regressed over P from 3 traced P of a hash's values (1, 1.5, 1.75
    at P = 4, 8, 16), where the real mean at 24 is 23/12."""
    from logical_model.model import _predict_scalar
    model = from_traces(converging_groups)
    model.check_target(UNSEEN)
    loop = model.phases[1]
    assert loop.statistical
    assert any("its communicators make different numbers of calls (1 to 3 at P=8, 1 to 3 at P=16)" in n
               and "their mean, as floor(mean) calls on every communicator" in n for n in loop.notes)
    slot = next(s for s in loop.slots if s.per_comm)
    mean, n_comms = _predict_scalar(slot.count, UNSEEN), slot.space.role.n_comms(UNSEEN)
    want_model = 2 * (int(mean) * n_comms + round((mean - int(mean)) * n_comms))  # 2 ranks a group
    real = signature.extract(load_trace(converging_groups / "unseen" / f"P{UNSEEN}.h5"))
    allreduce = signature.OP_CODE["Allreduce"]
    ev = model.events(UNSEEN)
    leaders = UNSEEN // 2  # (the leaders' Allreduce: once per repetition on each leader)
    got = np.count_nonzero((ev["phase"] == 1) & (ev["op"] == allreduce)) - leaders
    want = np.count_nonzero(np.asarray(real.phases[1].template["op"]) == allreduce) - leaders
    assert got == want_model
    assert abs(got - want) <= 0.15 * want, (got, want)
    assert model.weights(UNSEEN) == [ph.weight for ph in real.phases]


def _communicators(path: Path) -> set[tuple[int, ...]]:
    """The member lists of a trace's communicators but the world's and each rank's own."""
    t = load_trace(path)
    return {tuple(t.comms.members_of(c).tolist()) for c in range(len(t.comms))
            if 1 < len(t.comms.members_of(c)) < t.nprocs}


@pytest.fixture(scope="module", params=["exact", "converge"])
def four_groups(request, tmp_path_factory):
    """hier.c with 4 groups of P/4 ranks (k-point groups), traced at P = 8, 12, 16, whose
    group communicators are also MPI_Dims_create's 4 x 2, 4 x 3 and 4 x 4 grids' rows, and at
    P = 24, where MPI_Dims_create gives 6 x 4 and the program makes 4 x 6; each group also
    iterating on its own communicator as often as its index's hash says, or not."""
    args = ["6", "groups", "4"] + (["converge"] if request.param == "converge" else [])
    root = tmp_path_factory.mktemp(f"groups4-{request.param}")
    return request.param, trace_c_program(root, PROGRAMS / "hier.c", args, (8, 12, 16), UNSEEN)


@needs_mpi
def test_communicators_two_grids_give_at_every_traced_P_ask_for_the_grid(four_groups, tmp_path):
    """Two readings give every traced P's communicators (MPI_Dims_create's grid, and a fixed
    number of groups) and part at P = 24: the phases that use them are refused there, saying
    which grids they give and that --grid decides it, not placed on MPI_Dims_create's 6 x 4
    (what sigex did before: the program makes 4 x 6). With --grid 4x6 the logical trace's
    communicators are the real run's, and the exact phases are the real run's event for
    event."""
    kind, root = four_groups
    model = from_traces(root)
    problems = [p for pr in model.phase_problems(UNSEEN).values() for p in pr]
    assert any("6x4 at P=24" in p and "4x6 at P=24" in p for p in problems), problems
    assert any("--grid 4x6 or --grid 6x4 at P=24 would decide" in p for p in problems), problems
    fixed = model.with_grid(UNSEEN, (4, 6))
    out = fixed.logical_trace(UNSEEN, tmp_path / "L24.h5")
    real = root / "unseen" / f"P{UNSEEN}.h5"
    assert _communicators(out) == _communicators(real)
    assert_same_events(fixed, real)


@needs_mpi
def test_repetitions_cut_elsewhere_in_the_cycle_are_recut_where_all_ranks_meet(traced):
    """The signature may begin some ranks' repetitions elsewhere in the same cycle
    (OpenFOAM at P = 4: its corner ranks 0 and 1 begin with their second neighbour's
    exchange, ranks 2 and 3 with their first). patch2d.c's loop with ranks 0 and 1 so cut
    at P = 4 was statistical ("cuts ranks 0 and 2 at P=4 at other calls of one cycle");
    every rank's repetition is now cut just after its last collective call, and the phase
    is placed at P = 24 event for event, saying so."""
    import dataclasses

    from logical_model import build, read_signatures
    sigs, grids = read_signatures([traced["patches"] / f"P{P}.h5" for P in FIT])
    k = next(j for j, ph in enumerate(sigs[0].phases) if ph.kind == "loop")
    ph = sigs[0].phases[k]
    offs = np.asarray(ph.template_offsets, np.int64)
    order = np.arange(int(offs[-1]))
    for r in (0, 1):  # its first exchange (Irecv, Isend) moved to the end of the repetition
        a, b = int(offs[r]), int(offs[r + 1])
        order[a:b] = np.concatenate([np.arange(a + 2, b), np.arange(a, a + 2)])
    cut = dataclasses.replace(ph, template={c: np.asarray(v)[order] for c, v in ph.template.items()},
                              template_cost={c: np.asarray(v)[order] for c, v in ph.template_cost.items()})
    sigs[0] = dataclasses.replace(sigs[0], phases=[cut if j == k else p for j, p in enumerate(sigs[0].phases)])
    model = build(sigs, grids=grids)
    assert not model.phases[k].statistical, model.phases[k].notes
    assert any("cut just after each rank's last collective call" in n for n in model.phases[k].notes)
    assert_same_events(model, traced["patches"] / "unseen" / f"P{UNSEEN}.h5")


@pytest.fixture(scope="module")
def partitions(tmp_path_factory):
    """partgrid.c: 2 blocks of P/2 ranks, each with its own periodic 3-D Cartesian grid over
    its ranks, talking on the block's communicator (LAMMPS's -partition), traced at P = 8,
    16, 32 (blocks of 4, 8, 16: one dimension 4 wide at 32) and at 24 (blocks of 12)."""
    return trace_c_program(tmp_path_factory.mktemp("partgrid"), PROGRAMS / "partgrid.c", ["6", "2"],
                           (8, 16, 32), UNSEEN)


@needs_mpi
def test_blocks_each_with_its_own_grid_are_one_grid_of_blocks(partitions):
    """The blocks' Cartesian communicators are read as one grid of 2 x the blocks' dims,
    dimension 0 the block (a "groups" rule of 2 along it, the other dims MPI_Dims_create's
    of P/2), and the calls on each block's communicator as neighbours on it: the step is
    placed at P = 24 event for event, where the blocks were read as sub-communicators and
    the step placed with 144 calls where the run makes 192."""
    from logical_model import read_signatures
    sigs, grids = read_signatures([partitions / f"P{P}.h5" for P in (8, 16, 32)])
    assert {P: g[0] for P, g in grids.items()} == {8: (2, 2, 2, 1), 16: (2, 2, 2, 2), 32: (2, 4, 2, 2)}
    model = from_traces(partitions)
    assert model.grid.rule.name == "groups" and model.grid.dims(UNSEEN) == (2, 3, 2, 2)
    assert not any(ph.statistical for ph in model.phases)
    assert_same_events(model, partitions / "unseen" / f"P{UNSEEN}.h5")
