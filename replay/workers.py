"""Replay in pieces on MPI workers: ``mpiexec -n W python ...`` with one piece per worker.

:func:`replay_workers` is :func:`replay.replay` with ``pieces=W`` where the pieces
run at the same time, one per MPI process (a *worker*; the simulated processes
are *ranks*). Worker w owns the contiguous block of ranks that piece w of
``replay(..., pieces=W)`` holds, as a :class:`~replay.pieces.Piece` that holds only
those ranks' events, messages and collectives: cut out of a whole program, or,
given a trace file, built from the worker's own rank block of the file, the
ghost events the other workers send it (the whole streams of the ranks its ranks
exchange messages with) and one summary per collective instance
(:func:`~replay.pieces.read_piece`), so that no worker holds or matches the whole
trace. Each runs its
:class:`~replay.engine.ReplayState`. A *pass* is: every worker runs its piece
until it finishes or needs a time another piece has not produced yet, exports
the times it newly knows that other pieces need
(:meth:`~replay.engine.ReplayState.export_crossing`), and the workers send each
other those (position, time) arrays in one ``alltoall`` and import them. Passes repeat until every
piece is done; a pass in which no worker moves is a deadlock, raised as
:class:`~signature.errors.DeadlockError` on every worker. Every time is computed
from the same inputs as in one process, so worker 0's result is the result of
``replay(program, machine)`` to the last bit; the other workers return None.

A trace with fewer than :data:`MIN_EVENTS_PER_WORKER` events per worker is not
split that far (by default): fewer workers get pieces, and below twice that many
events worker 0 replays it alone while the others wait, since splitting a small
trace costs more in per-step overheads and exchanges than it saves. Nor is a
trace whose pieces would wait on each other every few events (a captured run
of a few dozen ranks, each receiving from its neighbours and calling collectives
thousands of times): where the passes a split takes (:func:`passes_estimate`,
from the trace's op and peer columns) would carry fewer than
:data:`MIN_EVENTS_PER_PASS` events each, worker 0 replays it alone.

Every worker must call :func:`replay_workers` with the same program (or trace
file), machine and options. As ``mpi4py.run`` does, a worker that
raises prints ``worker r of W: <error>`` (with its ranks, the phase it was in and
its host) and the traceback to stderr and aborts the whole job, so that no worker
waits forever for a dead one. mpi4py is imported only when a function needs it.

Examples
--------
Save as ``rp.py`` and run ``mpiexec -n 2 python rp.py``::

    from replay import load
    from replay.workers import replay_workers
    res = replay_workers("traces/stencil/P16.h5", load("cluster-a"))  # each reads its ranks
    if res is not None:  # worker 0
        print(res.runtime)
"""

from __future__ import annotations

import functools
import os
import socket
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Callable

import numpy as np

from signature._memory import tune_allocation
from signature.io import load_trace

from . import collectives as _coll
from .engine import (ReplayResult, ReplayState, _machine_costs, _ranges, _span, _world_costs, _world_ordered,
                     deadlock_error, gather_result, replay)
from .machine import Machine
from .pieces import STAGES as PIECE_STAGES
from .pieces import Piece, extract, piece_bounds, positions_from_counts, read_piece
from .program import COLLECTIVE_NAMES, TRACE_COLUMNS, Program

__all__ = ["MIN_EVENTS_PER_PASS", "MIN_EVENTS_PER_WORKER", "last_stages", "passes_estimate", "replay_workers", "running_under_mpi", "worker_bounds", "workers_used"]

Progress = Callable[[int, int], None]

#: environment variables in which MPI launchers announce the number of processes
#: (MPICH/Hydra, Intel MPI and Slurm's PMI: PMI_SIZE; Open MPI; MVAPICH2)
SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")

#: a worker is given a piece only when every piece holds at least this many events; below,
#: fewer workers replay (one: worker 0 alone) and the others wait. Measured on this 2-core
#: machine (bench/replay_speed.py, from the trace file to the result, each worker reading its
#: rank block): split in two, traces of 12k-200k events took 1.3-2x as long as one process
#: (the ghost exchange, the passes and MPI's fixed costs outweigh half the work); the
#: stencil at P = 65,536 (1.4M events) ran 1.46-1.49x faster under load 13-19 (1.56-1.72x
#: in CPU time; 1.38x on a quiet machine while every collective call still travelled), at
#: P = 1,048,576 (23M) 1.5-2.1x (1.7-1.9x). The FFT at P = 65,536 (197k events) split in
#: two still takes 1.4x as long as one process.
MIN_EVENTS_PER_WORKER = 150_000

#: a trace is split only where the passes it would take (:func:`passes_estimate`) carry at
#: least this many events each: every pass costs each worker a step of its own replay and an
#: exchange it waits for (0.15-0.5 ms on this 2-core machine), so a tightly coupled narrow
#: trace, whose ranks wait on the other piece every few dozen events, ran 5-30x slower in two
#: pieces than in one process (hpcc at P = 32: 20,058 passes, 10 s against 0.5 s; LAMMPS
#: peptide: 7,010 passes, 30 s against 2.2 s). The estimates: 66-263 events per pass on the
#: captured applications at P = 32 (hpcc, LAMMPS melt and peptide, GROMACS, SMPI's sweep),
#: 98,000-360,000 on the physical stencil and FFT at P = 65,536, which split 1.7x faster.
MIN_EVENTS_PER_PASS = 5_000

_TAG_COLL, _TAG_GATHER, _TAG_ALONE, _TAG_COLUMNS = 731, 732, 733, 734


_LAST_STAGES: dict[str, float] = {}


def last_stages() -> dict[str, float]:
    """Wall seconds of each stage of this worker's last :func:`replay_workers` call: "build"
    (cutting its piece out of the program, or reading its block and building its piece),
    "state" (setting up the replay), "replay" (its own steps and the bookkeeping of
    crossing times), "exchange" (the per-pass exchange, waiting for the others included),
    "collectives" (collectives evaluated with other workers), "gather" (results to worker 0);
    ``<stage>_cpu``: the process's CPU seconds in it; ``build:<step>_cpu``: those of the
    steps of :func:`replay.pieces.read_piece` when a trace file was given;
    "passes_estimate": :func:`passes_estimate` of the split considered, where one was. For
    benchmarks and the CLI's note."""
    return dict(_LAST_STAGES)


def running_under_mpi() -> bool:
    """True when this process is one of several started by an MPI launcher.

    Looks at the launcher's environment variables (:data:`SIZE_VARIABLES`) first;
    only when none is set and mpi4py's MPI is already initialised in this process
    does it ask ``MPI.COMM_WORLD``. It never imports mpi4py itself."""
    for var in SIZE_VARIABLES:
        value = os.environ.get(var)
        if value is not None:
            try:
                return int(value) > 1
            except ValueError:
                continue
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        return mpi.COMM_WORLD.Get_size() > 1
    return False


def worker_bounds(nprocs: int, workers: int, used: int | None = None) -> np.ndarray:
    """Rank bounds of the workers' pieces: worker w replays ranks ``b[w]..b[w+1]-1``.

    The same blocks as ``replay(..., pieces=used)`` for the first ``used`` workers
    (default: all), empty pieces for the others; with more workers than ranks some
    pieces are empty too."""
    used = workers if used is None else max(1, min(int(used), workers))
    return np.concatenate([piece_bounds(nprocs, used), np.full(workers - used, nprocs, np.int64)])


def workers_used(n_events: int, workers: int, min_events: int | None = None) -> int:
    """How many of ``workers`` get a piece of a program of ``n_events`` events: as many as
    keep at least ``min_events`` (default :data:`MIN_EVENTS_PER_WORKER`) events each, at
    least one; ``min_events=0``: all of them."""
    m = MIN_EVENTS_PER_WORKER if min_events is None else int(min_events)
    if m < 0:
        raise ValueError(f"min_events_per_worker must be >= 0, got {min_events!r}")
    return workers if m == 0 else max(1, min(workers, n_events // m))


def passes_estimate(rank_offsets: np.ndarray, bounds: np.ndarray, *, op=None, peer=None,
                    recv_peer=None, program: Program | None = None) -> int:
    """How many passes a replay split at rank ``bounds`` takes, about: the most events of one
    rank that wait on another piece (receives of messages sent by a rank of another piece,
    and collective calls, all counted as spanning pieces). A rank blocked there waits for the
    next exchange, so where the other piece is just as often blocked on it (a ring, a
    pipeline of halo exchanges) every such event costs a pass; where many of them are
    satisfied by one exchange (a stencil's halos, a sweep) this is an upper bound.

    From a :class:`Program` (``program``) or from a trace's event columns (``op`` in
    sigex's codes, ``peer``, ``recv_peer``; world ranks, -1 or less for none).
    """
    from .program import COLLECTIVE, RECV_POST, TAGLESS_RECV
    ro = np.asarray(rank_offsets, np.int64)
    P = len(ro) - 1
    inner = np.asarray(bounds, np.int64)[1:-1]
    rank_piece = np.searchsorted(inner, np.arange(P), side="right")
    if program is not None:
        src, dst = program.msg_src, program.msg_dst
        ok = (src >= 0) & (dst >= 0)
        crossing = ok & (rank_piece[np.maximum(src, 0)] != rank_piece[np.maximum(dst, 0)])
        per = np.bincount(dst[crossing], minlength=P)[:P]
        per = per + np.bincount(program.coll_rank, minlength=P)[:P]
    else:
        op = np.asarray(op)
        piece = np.repeat(rank_piece, np.diff(ro))

        def other(q):
            q = np.asarray(q)
            return (q >= 0) & (q < P) & (rank_piece[np.clip(q, 0, P - 1)] != piece)

        dep = COLLECTIVE[op] | ((RECV_POST[op] & ~TAGLESS_RECV[op]) & other(peer))
        dep |= TAGLESS_RECV[op] & other(recv_peer)
        c = np.concatenate([[0], np.cumsum(dep, dtype=np.int64)])
        per = c[ro[1:]] - c[ro[:-1]]
    return int(per.max()) if P else 0


def _workers_worth(used: int, P: int, n_events: int, W: int, estimate) -> int:
    """``used`` workers, or 1 where the split would take passes of fewer than
    :data:`MIN_EVENTS_PER_PASS` events each (``estimate(bounds)``: the passes)."""
    if used <= 1:
        return used
    passes = estimate(worker_bounds(P, W, used))
    return used if n_events >= MIN_EVENTS_PER_PASS * max(passes, 1) else 1


def replay_workers(program: Program | str | Path, machine: Machine, *, comm=None,
                   collectives: str = "algorithms", progress: Progress | None = None,
                   min_events_per_worker: int | None = None,
                   share_collectives: bool = False) -> ReplayResult | None:
    """Predict the run of ``program`` on ``machine`` with the MPI processes of ``comm``.

    Parameters
    ----------
    program : Program, or path of an HDF5 trace
        A :class:`Program` (the same on every worker): each worker cuts its piece out of
        it (:func:`replay.pieces.extract`). A trace file: each worker reads only its
        rank block and builds its piece with the others (:func:`replay.pieces.read_piece`),
        so that no worker ever holds the whole trace or program.
    machine, collectives
        As for :func:`replay.replay`; the same on every worker.
    comm : mpi4py communicator, optional
        The workers (default ``MPI.COMM_WORLD``). With one worker this is
        :func:`replay.replay`.
    progress : callable(done, total), optional
        Called on worker 0 after every pass with the number of events replayed.
    min_events_per_worker : int, optional
        Give pieces to only as many workers as keep at least this many events each
        (default :data:`MIN_EVENTS_PER_WORKER`; 0: every worker gets a piece,
        however tightly coupled). A small trace is replayed faster by worker 0 alone
        than split: the other workers then wait and return None. Unless 0, a trace
        whose split would take passes of fewer than :data:`MIN_EVENTS_PER_PASS`
        events each is replayed by worker 0 alone too. The result is the same
        either way.
    share_collectives : bool
        Evaluate a collective instance whose members several workers hold together, each
        worker for its own members, exchanging arrival times round by round. By default
        every worker holding members evaluates it whole, as one process does, once the
        members' entry times (which the workers exchange anyway) are in: a pattern is
        evaluated in a few vectorised passes, while sharing it costs a plan of the
        pattern and an exchange per round (on the stencil at P = 1,048,576, 2.8 s of CPU
        per worker against 0.3 s). Same result either way.

    Returns
    -------
    ReplayResult on worker 0 (equal to ``replay(program, machine)`` to the last
    bit; ``pieces`` is the number of non-empty pieces, ``passes`` the number of
    exchanges), None on the other workers.

    Raises
    ------
    DeadlockError
        On every worker, when the program can never complete.
    ValueError
        On every worker, for a bad ``collectives`` or ``min_events_per_worker``.
    TraceFormatError
        On every worker, when the trace file cannot be read.

    Any other error on a worker aborts the job (``comm.Abort(1)``) after the
    worker prints ``worker r of W: <error>`` and its traceback to stderr.
    """
    if collectives not in ("algorithms", "closed-form"):
        raise ValueError(f"collectives must be 'algorithms' or 'closed-form', got {collectives!r}")
    if comm is None:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    W = comm.Get_size()
    path = None if isinstance(program, Program) else Path(program)
    if path is None:
        P, n_events = program.nprocs, program.n_events
    else:
        from signature.io import read_trace_ranks
        head = read_trace_ranks(path, 0, 0, columns=())  # the index and the metadata alone
        P, n_events = head.nprocs, int(head.meta["n_events_total"])
    used = workers_used(n_events, W, min_events_per_worker)  # (checks the value)
    estimate = {}
    if min_events_per_worker != 0 and used > 1:  # and does a split pay? (0: split whatever)
        if path is None:
            def passes(b):
                estimate["passes_estimate"] = passes_estimate(program.rank_offsets, b, program=program)
                return estimate["passes_estimate"]
        else:
            from signature.io import read_event_columns
            ro, cols = read_event_columns(path, ("op", "peer", "recv_peer"))

            def passes(b):
                estimate["passes_estimate"] = passes_estimate(ro, b, **cols)
                return estimate["passes_estimate"]
        used = _workers_worth(used, P, n_events, W, passes)
    if W == 1:
        if path is not None:
            program = Program.from_trace(load_trace(path, columns=TRACE_COLUMNS))
        return replay(program, machine, collectives=collectives, progress=progress)
    bounds = worker_bounds(P, W, 1 if P <= 1 else used)
    tune_allocation()  # a worker that keeps no result frees all it built: keep it for the next replay
    run = _Worker(program if path is None else path, machine, comm, bounds, collectives)
    run.share_collectives = bool(share_collectives)
    try:
        outcome = run.work(progress if comm.Get_rank() == 0 else None)
    except BaseException as err:  # noqa: BLE001 -- any failure must take the job down, not hang it
        _abort(comm, run, err)
    _LAST_STAGES.clear()
    _LAST_STAGES.update(run.times)
    _LAST_STAGES.update(estimate)
    if path is not None:
        _LAST_STAGES.update((f"build:{k}_cpu", v) for k, v in PIECE_STAGES.items())
    if isinstance(outcome, BaseException):
        raise outcome  # a deadlock, decided by every worker together
    return outcome


class _Worker:
    """One worker's piece and its side of the exchange."""

    def __init__(self, source, machine, comm, bounds, collectives):
        self.source, self.machine, self.comm = source, machine, comm
        self.bounds, self.collectives = bounds, collectives
        self.me, self.W = comm.Get_rank(), comm.Get_size()
        self.lo, self.hi = int(bounds[self.me]), int(bounds[self.me + 1])
        self.piece: Piece | None = None
        self.program: Program | None = source if isinstance(source, Program) else None
        self.state: ReplayState | None = None
        self.passes = 0
        self.p2p = None  # a duplicate of comm for point-to-point traffic (collectives, gather)
        self.times: dict[str, float] = {}  # wall seconds of each stage, for benchmarks
        self.share_collectives = False

    def _clock(self, stage: str, t0: float) -> float:
        t = time.perf_counter()
        self.times[stage] = self.times.get(stage, 0.0) + t - t0
        c = time.process_time()
        self.times[stage + "_cpu"] = self.times.get(stage + "_cpu", 0.0) + c - self._cpu
        self._cpu = c
        return t

    def work(self, progress):
        if self.bounds[1] == self.bounds[-1]:
            return self._alone(progress)
        comm, me = self.comm, self.me
        t0, self._cpu = time.perf_counter(), time.process_time()
        if self.program is not None:
            self.piece = extract(self.program, self.lo, self.hi, self.bounds, me)
        else:  # every worker reads its rank block and they build their pieces together
            self.piece = read_piece(self.source, comm, self.bounds)
        self.program = self.piece.program
        t0 = self._clock("build", t0)
        prog = self.program
        if self.hi > self.lo:
            self.state = ReplayState.of_piece(self.piece, self.machine, collectives=self.collectives,
                                              defer_spanning=self.share_collectives)
        st = self.state
        first = prog.rank_offsets[self.lo:self.hi]
        total = self.piece.n_events_total
        self.p2p = comm.Dup()
        t0 = self._clock("state", t0)
        while True:
            self.passes += 1
            if st is not None and not st.finished:
                moved = st.run(raise_on_deadlock=False)
                out = self.piece.outgoing(st.export_crossing())
            else:
                moved, out = 0, {}
            t0 = self._clock("replay", t0)
            done = st is None or st.finished
            count = 0 if st is None else int(np.sum(st.idx - first))
            # one exchange per pass: to each worker the times it needs, and everyone's progress
            got = comm.alltoall([(out.get(q), moved, done, count) for q in range(self.W)])
            t0 = self._clock("exchange", t0)
            if progress is not None:
                progress(sum(e[3] for e in got), total)
            if all(e[2] for e in got):
                break
            if sum(e[1] for e in got) == 0:
                self.p2p.Free()
                return self._deadlock()
            if st is None:
                continue
            data = self.piece.incoming([(q, e[0]) for q, e in enumerate(got) if e[0] is not None])
            if data:
                st.import_crossing(data)
            pending = st.take_pending_collectives()
            t0 = self._clock("replay", t0)
            if pending.size:
                self._collectives(pending)
                t0 = self._clock("collectives", t0)
        res = self._gather()
        self._clock("gather", t0)
        self.p2p.Free()
        return res

    def _alone(self, progress):
        """Worker 0 has every rank (a trace too small to split): it replays them as
        :func:`replay.replay` does while the others wait without spinning (an idle MPI
        wait would take a core from it when workers share cores); a deadlock is then
        raised on every worker. The message goes on ``comm`` (every worker calls
        :func:`replay_workers` in the same order, so it cannot meet another's)."""
        comm, result, error = self.comm, None, None
        self.passes = 1
        if self.program is None:  # a trace file: every worker reads some of its columns
            trace = self._read_shared()
            if self.me == 0:
                self.program = Program.from_trace(trace)
            del trace
        if self.me == 0:
            self.state = st = ReplayState(self.program, self.machine, collectives=self.collectives)
            st.run(progress=progress, raise_on_deadlock=False)
            if st.finished:
                result = st.result()
            else:
                error = st.deadlock()
            # the others learn the outcome (None or the deadlock); worker 0 does not wait for
            # them to wake up (a short message is sent eagerly)
            from mpi4py import MPI
            MPI.Request.waitall([comm.isend(error, dest=w, tag=_TAG_ALONE) for w in range(1, self.W)])
            return error if error is not None else result
        while not comm.iprobe(source=0, tag=_TAG_ALONE):
            time.sleep(0.0001)
        return comm.recv(source=0, tag=_TAG_ALONE)

    def _read_shared(self):
        """The whole trace for worker 0, read by every worker: worker 0 reads the index, the
        tables and the columns :func:`~signature.io.read_trace_ranks` checks, the others the
        rest of :data:`~replay.program.TRACE_COLUMNS` (in turns) and send them to it. Most of
        a read is the columns' decompression (gzip), which this spreads over the workers.
        Returns the Trace on worker 0, None on the others."""
        from signature.io import CHECKED_COLUMNS, read_rank_block_into, read_trace_ranks
        from signature.trace import EVENT_COLUMNS
        if self.W == 1:
            return load_trace(self.source, columns=TRACE_COLUMNS)
        rest = [c for c in TRACE_COLUMNS if c not in CHECKED_COLUMNS]
        mine = rest[self.me - 1::self.W - 1] if self.me else []
        if self.me:
            head = read_trace_ranks(self.source, 0, 0, columns=())  # the index and the metadata
            n = int(head.meta["n_events_total"])
            got = {}
            for c in mine:  # a tuple: the first of its names the file has
                for name in (c,) if isinstance(c, str) else c:
                    arr = {name: np.empty(n, EVENT_COLUMNS[name])}
                    if not read_rank_block_into(self.source, 0, head.nprocs, arr):
                        got.update(arr)
                        break
            self.comm.send([(k, v.dtype.str) for k, v in got.items()], dest=0, tag=_TAG_COLUMNS)
            for v in got.values():
                self.comm.Send(v, dest=0, tag=_TAG_COLUMNS)
            return None
        trace = read_trace_ranks(self.source, 0, int(self.bounds[-1]), columns=())
        trace.meta.pop("rank_block", None)
        for w in range(1, self.W):
            for name, dtype in self.comm.recv(source=w, tag=_TAG_COLUMNS):
                trace.events[name] = np.empty(trace.n_events, np.dtype(dtype))
                self.comm.Recv(trace.events[name], source=w, tag=_TAG_COLUMNS)
        return trace

    # ---- collectives spanning pieces ---------------------------------------------------------
    def _collectives(self, insts: np.ndarray) -> None:
        """Evaluate collective instances spanning pieces together with the other workers
        holding members of them, each worker for its own members.

        An instance over world ranks 0..n-1 in order is a batch of its own (its costs
        and plan are kept for the next one); the others are batched by (operation, size,
        root, bytes, participating workers). Every participant sees the same instances
        become complete in the same pass (the entries travel in one allgather), so the
        batches are the same on every participant, and taking them in order of their
        first instance id lets the point-to-point exchanges of one batch never wait on
        another."""
        st, prog = self.state, self.program
        off = prog.coll_offsets
        ordered = _world_ordered(prog, insts)
        batches = [(int(i), None) for i in insts[ordered]]
        rest = insts[~ordered]
        if rest.size:
            size = st.inst_size[rest]
            rows = np.repeat(np.arange(len(rest)), size)
            slots = _ranges(off[rest], size)
            owner = np.searchsorted(self.bounds, prog.coll_rank[slots], side="right") - 1
            part = np.zeros((len(rest), self.W), np.int64)
            part[rows, owner] = 1
            # a neighbourhood collective's root numbers its pattern in this piece's program
            # only: such instances are batched alone (by their key, the same on every piece)
            neighbor = prog.coll_op[rest] == COLLECTIVE_NAMES.index("Neighbor")
            root = np.where(neighbor, self.piece.coll_key[rest], prog.coll_root[rest])
            keys = np.concatenate([np.stack([prog.coll_op[rest], size, root,
                                             prog.coll_bytes[rest]], axis=1), part], axis=1)
            uk, first, group = np.unique(keys, axis=0, return_index=True, return_inverse=True)
            group = group.reshape(-1)
            batches += [(int(rest[first[gi]]), rest[group == gi]) for gi in range(len(uk))]
        ckey = self.piece.coll_key  # instance ids are this piece's: order by their global keys
        for first_inst, ins in sorted(batches, key=lambda b: int(ckey[b[0]])):
            i = first_inst
            op_code, root, nbytes = int(prog.coll_op[i]), int(prog.coll_root[i]), int(prog.coll_bytes[i])
            n = int(st.inst_size[i])
            name = COLLECTIVE_NAMES[op_code]
            pat = prog.pattern(name, n, root, nbytes)
            if ins is None:
                # the world in rank order: costs and plan kept for its next instance
                a = int(off[i])
                own = self._owner_of_rank()[:n]
                cst = _world_costs(self.machine, name, n, root, nbytes)
                plan = _plan_kept(pat, own, self.me, (id(pat), self.me, tuple(self.bounds.tolist())))
                finish, busy = _evaluate_shared(pat, cst, st.entry[a:a + n][None, :], own[None, :],
                                                self.me, self.p2p, plan)
                lo, hi = min(self.lo, n), min(self.hi, n)
                st.complete_collective(np.arange(a + lo, a + hi), finish[0, lo:hi], busy[0, lo:hi])
                continue
            sl = off[ins][:, None] + np.arange(n)[None, :]
            world = prog.coll_rank[sl]
            own = np.searchsorted(self.bounds, world, side="right") - 1
            cst = _machine_costs(self.machine, pat, world)
            finish, busy = _evaluate_shared(pat, cst, st.entry[sl], own, self.me, self.p2p)
            mine = own == self.me
            st.complete_collective(sl[mine], finish[mine], busy[mine])

    def _owner_of_rank(self) -> np.ndarray:
        """The worker of each world rank (kept)."""
        if getattr(self, "_owners", None) is None:
            self._owners = np.repeat(np.arange(self.W), np.diff(self.bounds))
        return self._owners

    # ---- end -------------------------------------------------------------------------------------
    def _gather(self) -> ReplayResult | None:
        """Send every piece's per-rank, per-phase and per-event arrays to worker 0 (with its
        events per rank: worker 0 orders the event times only if ``event_end`` is read)."""
        st, comm, me = self.state, self.comm, self.me
        arrays = ("clock", "comp_acc", "comm_acc", "ph_time", "ph_comp", "ph_comm", "t_end_new")
        head = None if st is None else (st.steps, [getattr(st, a).shape for a in arrays])
        heads = comm.gather(head if me else None, root=0)
        if me != 0:
            if st is not None:
                for a in arrays:
                    self.p2p.Send(np.ascontiguousarray(getattr(st, a), np.float64), dest=0,
                                  tag=_TAG_GATHER)
                self.p2p.Send(np.ascontiguousarray(np.diff(st.program.rank_offsets[self.lo:self.hi + 1]),
                                                   np.int64), dest=0, tag=_TAG_GATHER)
            return None
        pieces = []
        for w, h in enumerate(heads):
            if w == 0:
                if st is not None:
                    pieces.append(st)
                continue
            if h is None:
                continue
            steps, shapes = h
            got = {}
            for a, shape in zip(arrays, shapes):
                got[a] = np.empty(shape, np.float64)
                self.p2p.Recv(got[a], source=w, tag=_TAG_GATHER)
            counts = np.empty(int(self.bounds[w + 1] - self.bounds[w]), np.int64)
            self.p2p.Recv(counts, source=w, tag=_TAG_GATHER)
            # event times stay time-major: their order is worked out if event_end is read
            got["_pos"] = functools.partial(positions_from_counts, counts)
            pieces.append(types.SimpleNamespace(steps=steps, **got))
        return gather_result(self.program, self.machine, self.collectives, pieces, passes=self.passes)

    def _deadlock(self):
        st, lines, n = self.state, [], 0
        if st is not None:
            stuck = st.stuck_ranks()
            n = len(stuck)
            lines = [st.explain(int(r)) for r in stuck[:8]]
        everyone = self.comm.allgather((lines, n))
        return deadlock_error(self.program.name, [x for e in everyone for x in e[0]],
                              sum(e[1] for e in everyone))

    def where(self) -> str:
        """The worker's ranks, the phase its earliest unfinished rank is in, its host."""
        parts = [f"ranks {self.lo}..{self.hi - 1} (piece {self.me} of {self.W})" if self.hi > self.lo
                 else "no ranks"]
        st, prog = self.state, self.program
        if st is not None and prog.phase is not None:
            left = st.idx[st.idx < st.end]
            parts.append(f"phase {int(prog.phase[left].min())}" if left.size else "all phases done")
        parts.append(f"pass {self.passes}")
        parts.append(f"host {socket.gethostname()}")
        return ", ".join(parts)


def _evaluate_shared(pat, cst, entry: np.ndarray, owner: np.ndarray, me: int, comm,
                     plan: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`replay.collectives.evaluate` of ``pat`` for the members this worker owns.

    ``cst``: the pattern's :class:`~replay.collectives.Costs` on its links; ``entry``,
    ``owner``: (B, n) entry times and owning worker of the members of B instances;
    ``plan``: :func:`_plan` of the pattern for these owners, kept by the caller with
    ``cst`` (each round keeps this worker's terms of ``cst``); built if not given.
    Round by round, the owner of a message's sender computes the sending side (send
    start, the sender's new time and NIC, the arrival time) and the owner of its
    receiver the receiving side, with the terms and operations of ``evaluate`` (so
    the same bits). A message crossing workers costs one number sent: its arrival
    time; a crossing rendezvous message one more, the receiver's time before the
    round, which its sender needs. Returns (finish, busy) of shape (B, n), valid
    where ``owner == me``."""
    from mpi4py import MPI

    B, n = entry.shape
    keep = plan is not None
    if plan is None:
        plan = _plan(pat, owner.reshape(-1), B, me)
    T = np.array(entry, dtype=np.float64).reshape(-1)
    nic = np.full(B * n, -np.inf)

    def exchange(out: list, inn: list) -> None:
        """Send each (q, array) of ``out`` to worker q; receive each (q, buffer) of ``inn``."""
        reqs = [comm.Isend(buf, dest=q, tag=_TAG_COLL) for q, buf in out]
        for q, buf in inn:
            comm.Recv(buf, source=q, tag=_TAG_COLL)
        if reqs:
            MPI.Request.Waitall(reqs)

    for k, rp in enumerate(plan):
        if rp is None:
            continue  # nothing of this worker's in this round (nor anything for it)
        hit = rp.terms.get(id(cst)) if keep else None
        if hit is None or hit[0] is not cst:
            hit = (cst, [_pick(x, rp.s_in_round, rp.s_flat) for x in cst.rounds[k]],
                   _pick(cst.rounds[k][0], rp.r_in_round, rp.r_flat))
            if keep:  # the plan and the costs are kept: so are their terms, per worker
                rp.terms[id(cst)] = hit
        (cpu, gap, lat, oL), cpu_r = hit[1], hit[2]
        rdv = cst.rdv[k]
        ns, nr = rp.n_send, rp.n_recv
        # ---- rendezvous: the receiver's time before the round, to the sender's owner ----------
        if rdv is not None:
            rdv_s = True if rdv is True else np.tile(rdv, B)[rp.s_flat]
            rdv_r = True if rdv is True else np.tile(rdv, B)[rp.r_flat]
            t_recv = T[rp.r_mem]
            t_dst = np.full(ns, np.nan)
            t_dst[rp.loc_s] = t_recv[rp.loc_r]
            sel = (lambda pos, m: pos if m is True else _indices(pos)[m[pos]])
            out = [(q, t_recv[sel(pos, rdv_r)]) for q, pos in rp.frm]
            inn = [(q, sel(pos, rdv_s)) for q, pos in rp.to]
            out = [(q, v) for q, v in out if len(v)]
            inn = [(q, pos, np.empty(_count(pos))) for q, pos in inn if _count(pos)]
            exchange(out, [(q, buf) for q, _, buf in inn])
            for _, pos, buf in inn:
                t_dst[pos] = buf
        # ---- sending side ---------------------------------------------------------------------
        arrive_s = None
        if ns:
            ts = np.maximum(T[rp.s_mem], nic[rp.s_mem])
            if rdv is None:
                start = ts
            else:
                tdata = np.maximum(ts + oL, t_dst) + oL
                start = tdata if rdv_s is True else np.where(rdv_s, tdata, ts)
            arrive_s = start + lat
            if isinstance(rp.s_mem, slice):  # in place
                np.add(ts, gap, out=nic[rp.s_mem])
                np.add(start, cpu, out=T[rp.s_mem])
            else:
                nic[rp.s_mem] = ts + gap
                T[rp.s_mem] = start + cpu
        if rp.xor_local:  # every message stays here, member i to i xor d: on views
            t = T[rp.s_mem][None, :]
            _coll._recv(t, arrive_s[None, :], cpu if np.ndim(cpu) == 0 else cpu[None, :],
                        ("xor", rp.xor_local), None)
            continue
        # ---- arrival times of crossing messages, to the receiver's owner ----------------------
        arrive_r = np.empty(nr)
        if rp.n_loc:
            arrive_r[rp.loc_r] = arrive_s[rp.loc_s]
        if rp.to or rp.frm:
            inn = [(q, pos, np.empty(_count(pos))) for q, pos in rp.frm]
            exchange([(q, arrive_s[pos]) for q, pos in rp.to], [(q, buf) for q, _, buf in inn])
            for _, pos, buf in inn:
                arrive_r[pos] = buf
        # ---- receiving side -------------------------------------------------------------------
        if nr:
            if isinstance(rp.r_mem, slice):
                t = T[rp.r_mem]
                np.maximum(arrive_r, t, out=t)
                np.add(t, cpu_r, out=t)
            else:
                T[rp.r_mem] = np.maximum(arrive_r, T[rp.r_mem]) + cpu_r
    return T.reshape(B, n), np.broadcast_to(cst.busy, (B, n))


class _RoundPlan(types.SimpleNamespace):
    """Who does what in one round of a pattern shared by workers, from one worker's view.

    ``s_flat``/``s_in_round``: the messages its members send (flat ids b*m + i over the
    B instances / ids within the round), in order of their sender, ``s_mem`` those
    senders (flat member ids b*n + j; a slice when consecutive); ``r_*`` the same for
    the messages its members receive, in order of their receiver. ``loc_s``, ``loc_r``:
    positions of the messages both sent and received here. ``to``: per other worker q,
    positions (in the send order) of the messages its members receive; ``frm``: per
    q, positions (in the receive order) of the messages its members send; both in
    message order, so that the two sides of an exchange agree."""


def _plan(pat, owner: np.ndarray, B: int, me: int) -> list:
    """Per round of ``pat`` over B instances whose members (flat b*n + j) belong to
    workers ``owner``: this worker's :class:`_RoundPlan`, or None when it neither sends
    nor receives in that round."""
    n, offs = pat.n, pat.round_offsets
    out = []
    for k in range(pat.n_rounds):
        a, b = int(offs[k]), int(offs[k + 1])
        m = b - a
        src, dst = pat.src[a:b], pat.dst[a:b]
        if B > 1:
            base = (np.arange(B, dtype=np.int64) * n)[:, None]
            src, dst = (base + src).reshape(-1), (base + dst).reshape(-1)
        own_s, own_r = owner[src], owner[dst]
        mine_s, mine_r = own_s == me, own_r == me
        S = np.flatnonzero(mine_s)
        R = np.flatnonzero(mine_r)
        if not (S.size or R.size):
            out.append(None)
            continue
        S = S[np.argsort(src[S], kind="stable")]
        R = R[np.argsort(dst[R], kind="stable")]
        pos_s = np.full(B * m, -1, np.int64)
        pos_s[S] = np.arange(S.size)
        pos_r = np.full(B * m, -1, np.int64)
        pos_r[R] = np.arange(R.size)
        loc = np.flatnonzero(mine_s & mine_r)
        X = np.flatnonzero(mine_s & ~mine_r)
        Y = np.flatnonzero(mine_r & ~mine_s)
        to = [(int(q), _run(pos_s[X[own_r[X] == q]])) for q in np.unique(own_r[X])]
        frm = [(int(q), _run(pos_r[Y[own_s[Y] == q]])) for q in np.unique(own_s[Y])]
        # a round pairing members i and i xor d inside this worker's aligned block: its
        # receivers' times are views of its senders' (replay.collectives' xor rounds)
        xor_local = 0
        mv = pat.moves[k] if B == 1 else None
        if mv is not None and mv[0] == "xor" and not X.size and not Y.size and S.size == R.size:
            m0, m1, d = int(src[S[0]]), int(src[S[-1]]) + 1, mv[1]
            if (m1 - m0 == S.size and m0 % (2 * d) == 0 and (m1 - m0) % (2 * d) == 0
                    and int(dst[R[0]]) == m0):
                xor_local = d
        out.append(_RoundPlan(
            n_send=S.size, n_recv=R.size, xor_local=xor_local,
            s_flat=_run(S), s_in_round=_run(S % m), s_mem=_run(src[S]),
            r_flat=_run(R), r_in_round=_run(R % m), r_mem=_run(dst[R]),
            loc_s=_run(pos_s[loc]), loc_r=_run(pos_r[loc]), n_loc=loc.size, to=to, frm=frm,
            terms={}))
    return out


_PLANS: dict = {}
_PLANS_MAX = 16


def _plan_kept(pat, owner: np.ndarray, me: int, key) -> list:
    """:func:`_plan` of one instance, kept under ``key`` (the pattern and the workers'
    bounds): a world collective repeated every iteration is planned once."""
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is pat:
        return hit[1]
    plan = _plan(pat, owner, 1, me)
    if len(_PLANS) >= _PLANS_MAX:
        _PLANS.clear()
    _PLANS[key] = (pat, plan)
    return plan


def _run(a: np.ndarray):
    """``a`` as a slice when it is consecutive (a plan is kept: any length is worth it)."""
    return _span(a, shortest=1)


def _count(pos) -> int:
    """Length of an index array or slice."""
    return pos.stop - pos.start if isinstance(pos, slice) else len(pos)


def _indices(pos) -> np.ndarray:
    """An index array or slice as an array."""
    return np.arange(pos.start, pos.stop) if isinstance(pos, slice) else pos


def _pick(x, in_round, flat):
    """A term of :class:`~replay.collectives.Costs` (a float, or (1 or B, m)) for messages
    given by their ids within the round and flat ids."""
    if np.ndim(x) == 0:
        return x
    return x[0][in_round] if x.shape[0] == 1 else x.reshape(-1)[flat]


def _abort(comm, run: _Worker, err: BaseException) -> None:
    """Print ``worker r of W: <error>`` and the traceback, then abort every worker."""
    me, W = comm.Get_rank(), comm.Get_size()
    try:
        where = run.where()
    except Exception:  # noqa: BLE001 -- the report must not fail
        where = f"ranks {run.lo}..{run.hi - 1}"
    tb = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    label = f"worker {me} of {W}"
    sys.stderr.write(f"{label}: {type(err).__name__}: {err} [{where}]; aborting all workers\n")
    sys.stderr.write("".join(f"[{label}] {line}\n" for line in tb.rstrip().splitlines()))
    sys.stderr.flush()
    # the launcher forwards our stderr asynchronously and may drop what it has not read
    # when the job is torn down: give it a moment
    time.sleep(0.5)
    comm.Abort(1)
    os._exit(1)  # should Abort return, this process must not go on as if it had succeeded
