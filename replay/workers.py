"""Replay in pieces on MPI workers: ``mpiexec -n W python ...`` with one piece per worker.

:func:`replay_workers` is :func:`replay.replay` with ``pieces=W`` where the pieces
run at the same time, one per MPI process (a *worker*; the simulated processes
are *ranks*). Worker w owns the contiguous block of ranks that piece w of
``replay(..., pieces=W)`` holds and runs its :class:`~replay.engine.ReplayState`.
A *pass* is: every worker runs its piece until it finishes or needs a time
another piece has not produced yet, exports the times it newly knows that other
pieces need (:meth:`~replay.engine.ReplayState.export_crossing`), and the workers
``allgather`` those (id, time) arrays and import them. Passes repeat until every
piece is done; a pass in which no worker moves is a deadlock, raised as
:class:`~signature.errors.DeadlockError` on every worker. Every time is computed
from the same inputs as in one process, so worker 0's result is the result of
``replay(program, machine)`` to the last bit; the other workers return None.

Every worker must call :func:`replay_workers` with the same program, machine and
options (each reads the trace itself). As ``mpi4py.run`` does, a worker that
raises prints ``worker r of W: <error>`` (with its ranks, the phase it was in and
its host) and the traceback to stderr and aborts the whole job, so that no worker
waits forever for a dead one. mpi4py is imported only when a function needs it.

Examples
--------
Save as ``rp.py`` and run ``mpiexec -n 2 python rp.py``::

    from replay import Program, load
    from replay.workers import replay_workers
    from signature import load_trace
    res = replay_workers(Program.from_trace(load_trace("traces/stencil/P16.h5")), load("cluster-a"))
    if res is not None:  # worker 0
        print(res.runtime)
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
import types
from typing import Callable

import numpy as np

from . import collectives as _coll
from .engine import ReplayResult, ReplayState, deadlock_error, gather_result, replay
from .machine import Machine
from .program import COLLECTIVE_NAMES, Program

__all__ = ["replay_workers", "running_under_mpi", "worker_bounds"]

Progress = Callable[[int, int], None]

#: environment variables in which MPI launchers announce the number of processes
#: (MPICH/Hydra, Intel MPI and Slurm's PMI: PMI_SIZE; Open MPI; MVAPICH2)
SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")

_KEYS = ("ts", "tr", "entry")
_TAG_COLL, _TAG_GATHER = 731, 732


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


def worker_bounds(nprocs: int, workers: int) -> np.ndarray:
    """Rank bounds of the workers' pieces: worker w replays ranks ``b[w]..b[w+1]-1``.

    The same blocks as ``replay(..., pieces=workers)``; with more workers than
    ranks some pieces are empty."""
    return np.linspace(0, nprocs, workers + 1).round().astype(np.int64)


def replay_workers(program: Program, machine: Machine, *, comm=None, collectives: str = "algorithms",
                   progress: Progress | None = None) -> ReplayResult | None:
    """Predict the run of ``program`` on ``machine`` with the MPI processes of ``comm``.

    Parameters
    ----------
    program, machine, collectives
        As for :func:`replay.replay`; the same on every worker.
    comm : mpi4py communicator, optional
        The workers (default ``MPI.COMM_WORLD``). With one worker this is
        :func:`replay.replay`.
    progress : callable(done, total), optional
        Called on worker 0 after every pass with the number of events replayed.

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
        On every worker, for a bad ``collectives``.

    Any other error on a worker aborts the job (``comm.Abort(1)``) after the
    worker prints ``worker r of W: <error>`` and its traceback to stderr.
    """
    if collectives not in ("algorithms", "closed-form"):
        raise ValueError(f"collectives must be 'algorithms' or 'closed-form', got {collectives!r}")
    if comm is None:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    W, me = comm.Get_size(), comm.Get_rank()
    P = program.nprocs
    if W == 1:
        return replay(program, machine, collectives=collectives, progress=progress)
    if P <= 1:  # nothing to share: every worker replays it (so that errors are the same everywhere)
        res = replay(program, machine, collectives=collectives, progress=progress if me == 0 else None)
        return res if me == 0 else None
    run = _Worker(program, machine, comm, worker_bounds(P, W), collectives)
    try:
        outcome = run.work(progress if me == 0 else None)
    except BaseException as err:  # noqa: BLE001 -- any failure must take the job down, not hang it
        _abort(comm, run, err)
    if isinstance(outcome, BaseException):
        raise outcome  # a deadlock, decided by every worker together
    return outcome


class _Worker:
    """One worker's piece and its side of the exchange."""

    def __init__(self, program, machine, comm, bounds, collectives):
        self.program, self.machine, self.comm = program, machine, comm
        self.bounds, self.collectives = bounds, collectives
        self.me, self.W = comm.Get_rank(), comm.Get_size()
        self.lo, self.hi = int(bounds[self.me]), int(bounds[self.me + 1])
        self.state: ReplayState | None = None
        self.passes = 0
        self.p2p = None  # a duplicate of comm for point-to-point traffic (collectives, gather)

    def work(self, progress):
        prog, comm, me = self.program, self.comm, self.me
        if self.hi > self.lo:
            self.state = ReplayState(prog, self.machine, ranks=(self.lo, self.hi),
                                     collectives=self.collectives, defer_spanning=True)
        st = self.state
        first = prog.rank_offsets[self.lo:self.hi]
        empty = {k: (np.zeros(0, np.int64), np.zeros(0)) for k in _KEYS}
        self.p2p = comm.Dup()
        while True:
            self.passes += 1
            if st is not None and not st.finished:
                moved = st.run(raise_on_deadlock=False)
                out = st.export_crossing()
            else:
                moved, out = 0, empty
            done = st is None or st.finished
            count = 0 if st is None else int(np.sum(st.idx - first))
            everyone = comm.allgather((out, moved, done, count))
            if progress is not None:
                progress(sum(e[3] for e in everyone), prog.n_events)
            if all(e[2] for e in everyone):
                break
            if sum(e[1] for e in everyone) == 0:
                self.p2p.Free()
                return self._deadlock()
            if st is None:
                continue
            others = [e[0] for w, e in enumerate(everyone) if w != me]
            merged = {k: (np.concatenate([o[k][0] for o in others]),
                          np.concatenate([o[k][1] for o in others])) for k in _KEYS}
            if any(len(v[0]) for v in merged.values()):
                st.import_crossing(merged)
            pending = st.take_pending_collectives()
            if pending.size:
                self._collectives(pending)
        res = self._gather()
        self.p2p.Free()
        return res

    # ---- collectives spanning pieces ---------------------------------------------------------
    def _collectives(self, insts: np.ndarray) -> None:
        """Evaluate collective instances spanning pieces together with the other workers
        holding members of them, each worker for its own members.

        Instances are batched by (operation, size, root, bytes, participating workers);
        every participant sees the same instances become complete in the same pass (the
        entries travel in one allgather), so the batches are the same on every
        participant, and taking them in order of their first instance id lets the
        point-to-point exchanges of one batch never wait on another."""
        st, prog = self.state, self.program
        off = prog.coll_offsets
        size = st.inst_size[insts]
        rows = np.repeat(np.arange(len(insts)), size)
        slots = np.repeat(off[insts] - np.cumsum(size) + size, size) + np.arange(int(size.sum()))
        owner = np.searchsorted(self.bounds, prog.coll_rank[slots], side="right") - 1
        part = np.zeros((len(insts), self.W), np.int64)
        part[rows, owner] = 1
        keys = np.concatenate([np.stack([prog.coll_op[insts], size, prog.coll_root[insts],
                                         prog.coll_bytes[insts]], axis=1), part], axis=1)
        uk, first, group = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        group = group.reshape(-1)
        for gi in np.argsort(first, kind="stable"):
            op_code, n, root, nbytes = (int(x) for x in uk[gi, :4])
            ins = insts[group == gi]
            sl = off[ins][:, None] + np.arange(n)[None, :]
            world = prog.coll_rank[sl]
            own = np.searchsorted(self.bounds, world, side="right") - 1
            pat = _coll.pattern_for(COLLECTIVE_NAMES[op_code], n, root, nbytes)
            finish, busy = _evaluate_shared(pat, st.entry[sl], world, own, self.me, self.p2p,
                                            self.machine)
            mine = own == self.me
            st.complete_collective(sl[mine], finish[mine], busy[mine])

    # ---- end -------------------------------------------------------------------------------------
    def _gather(self) -> ReplayResult | None:
        """Send every piece's per-rank, per-phase and per-event arrays to worker 0."""
        st, comm, me = self.state, self.comm, self.me
        arrays = ("clock", "comp_acc", "comm_acc", "ph_time", "ph_comp", "ph_comm", "t_end")
        head = None if st is None else (st.steps, [getattr(st, a).shape for a in arrays])
        heads = comm.gather(head if me else None, root=0)
        if me != 0:
            if st is not None:
                for a in arrays:
                    self.p2p.Send(np.ascontiguousarray(getattr(st, a), np.float64), dest=0,
                                  tag=_TAG_GATHER)
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
            got["t_end_new"], got["_pos"] = got.pop("t_end"), slice(None)
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


def _evaluate_shared(pat, entry: np.ndarray, world: np.ndarray, owner: np.ndarray, me: int, comm,
                     machine: Machine) -> tuple[np.ndarray, np.ndarray]:
    """:func:`replay.collectives.evaluate` of ``pat`` for the members this worker owns.

    ``entry``, ``world``, ``owner``: (B, n) entry times, world ranks and owning worker
    of the members of B instances. Round by round, the owner of a message's sender
    computes the sending side (send start, the sender's new time, NIC and overhead,
    the arrival time) and the owner of its receiver the receiving side, with exactly
    the operations of ``evaluate`` (so the same bits). A message crossing workers
    costs one number sent: its arrival time; a crossing rendezvous message one more,
    the receiver's time before the round, which its sender needs. Returns (finish,
    busy) of shape (B, n), valid where ``owner == me``."""
    from mpi4py import MPI

    B, n = entry.shape
    T = np.array(entry, dtype=np.float64).reshape(-1)
    nic = np.full(B * n, -np.inf)
    busy = np.zeros(B * n)
    own = owner.reshape(-1)
    mine = own == me
    net, loc = machine.network, machine.link(True)
    S = machine.S
    offs = pat.round_offsets
    base = None if B == 1 else (np.arange(B, dtype=np.int64) * n)[:, None]
    if loc != net:
        node = machine.node_of(world).reshape(-1)
        table = np.array([[getattr(net, x), getattr(loc, x)] for x in "LogGO"])  # (5, 2)

    def params(src, dst, rows):
        """LogGP parameters (``rows`` of L, o, g, G, O) of messages src -> dst."""
        if loc == net:
            return [np.float64(getattr(net, "LogGO"[r])) for r in rows]
        intra = (node[src] == node[dst]).view(np.int8)
        return list(table[rows].take(intra, axis=1))

    def exchange(out: dict, inn: dict) -> None:
        """Send ``out[q]`` to worker q and receive into ``inn[q]`` from worker q."""
        reqs = [comm.Isend(buf, dest=q, tag=_TAG_COLL) for q, buf in out.items()]
        for q, buf in inn.items():
            comm.Recv(buf, source=q, tag=_TAG_COLL)
        if reqs:
            MPI.Request.Waitall(reqs)

    # one instance whose members m0..m1-1 are this worker's: in a round where member i
    # sends message i and every member receives one message, both sides are slices
    contiguous = False
    if B == 1:
        held = np.flatnonzero(mine)
        if held.size and int(held[-1]) - int(held[0]) + 1 == held.size:
            contiguous, m0, m1 = True, int(held[0]), int(held[-1]) + 1
    receiver_of = _rounds_one_to_one(pat) if contiguous else None
    for k in range(pat.n_rounds):
        a, b = int(offs[k]), int(offs[k + 1])
        if base is None:
            src, dst, nb = pat.src[a:b], pat.dst[a:b], pat.nbytes[a:b]
        else:
            src = (base + pat.src[a:b]).reshape(-1)
            dst = (base + pat.dst[a:b]).reshape(-1)
            nb = np.tile(pat.nbytes[a:b], B)
        if contiguous and receiver_of[k] is not None:
            si = s_src = r_dst = slice(m0, m1)
            n_s = m1 - m0
            s_dst = dst[si]
            ri = r_src = receiver_of[k][si]  # message (= sender) each member receives
            s_x = np.flatnonzero((s_dst < m0) | (s_dst >= m1))
            r_x = np.flatnonzero((r_src < m0) | (r_src >= m1))
            s_msg_x = s_x + m0
            r_dst_x = r_x + m0
        else:
            si = np.flatnonzero(mine[src])
            n_s = len(si)
            ri = np.flatnonzero(mine[dst])
            if not (n_s or ri.size):
                continue
            s_src, s_dst, r_src = src[si], dst[si], src[ri]
            s_x = np.flatnonzero(~mine[s_dst])
            r_x = np.flatnonzero(~mine[r_src])
            s_msg_x = si[s_x]
            r_dst = dst[ri]
            r_dst_x = r_dst[r_x]
        s_nb, r_nb = nb[si], nb[ri]
        s_xpeer, r_xpeer = own[s_dst[s_x]], own[r_src[r_x]]
        rdv_s, rdv_r = s_nb >= S, r_nb >= S
        any_rdv = bool(rdv_s.any())
        # ---- rendezvous: the receiver's time before the round, to the sender's owner -------
        if any_rdv:
            t_dst = T[s_dst]
        if any_rdv or rdv_r.any():
            keep_r, keep_s = rdv_r[r_x], rdv_s[s_x]
            rxd, rxp, sx, sxp = r_dst_x[keep_r], r_xpeer[keep_r], s_x[keep_s], s_xpeer[keep_s]
            if rxd.size or sx.size:
                out = {q: T[rxd[rxp == q]] for q in np.unique(rxp).tolist()}
                inn = {q: np.empty(int(np.count_nonzero(sxp == q))) for q in np.unique(sxp).tolist()}
                exchange(out, inn)
                for q, got in inn.items():
                    t_dst[sx[sxp == q]] = got
        # ---- sending side -----------------------------------------------------------------------
        arrive_all = np.empty(len(src))
        if n_s:
            s = s_nb.astype(np.float64)
            Lk, ok, gk, Gk, Ok = params(s_src, s_dst, [0, 1, 2, 3, 4])
            ts = np.maximum(T[s_src], nic[s_src])
            cpu = ok + s * Ok  # the terms of replay.collectives.costs
            if any_rdv:
                oL = ok + Lk
                tdata = np.maximum(ts + oL, t_dst) + oL
                start = np.where(rdv_s, tdata, ts)
            else:
                start = ts
            send_done = start + cpu
            arrive_all[si] = start + (ok + s * Gk + Lk)
            nic[s_src] = ts + (gk + s * Gk)
            T[s_src] = send_done
            busy[s_src] += cpu
        # ---- arrival times of crossing messages, to the receiver's owner ----------------------
        if s_x.size or r_x.size:
            out = {q: arrive_all[s_msg_x[s_xpeer == q]] for q in np.unique(s_xpeer).tolist()}
            inn = {q: np.empty(int(np.count_nonzero(r_xpeer == q))) for q in np.unique(r_xpeer).tolist()}
            exchange(out, inn)
            for q, got in inn.items():
                arrive_all[ri[r_x[r_xpeer == q]]] = got
        # ---- receiving side ---------------------------------------------------------------------
        if len(r_nb):
            s = r_nb.astype(np.float64)
            ok, Ok = params(r_src, r_dst, [1, 4])
            cpu = ok + s * Ok
            T[r_dst] = np.maximum(arrive_all[ri], T[r_dst]) + cpu
            busy[r_dst] += cpu
    return T.reshape(B, n), busy.reshape(B, n)


_ONE_TO_ONE: dict[int, tuple] = {}
_ONE_TO_ONE_MAX = 1 << 24  # members x rounds remembered (64 MB of int32) before forgetting all


def _rounds_one_to_one(pat) -> list:
    """Per round of ``pat``: when member i sends message i and every member receives one
    message, the message each member receives (an array over members), else None.
    Remembered per pattern (:func:`replay.collectives.pattern_for` caches patterns)."""
    hit = _ONE_TO_ONE.get(id(pat))
    if hit is not None and hit[0] is pat:
        return hit[1]
    n, offs = pat.n, pat.round_offsets
    ar = np.arange(n)
    dtype = np.int32 if n < 2**31 else np.int64
    out = []
    for k in range(pat.n_rounds):
        a, b = int(offs[k]), int(offs[k + 1])
        src, dst = pat.src[a:b], pat.dst[a:b]
        if b - a == n and np.array_equal(src, ar) and np.all(np.bincount(dst, minlength=n) == 1):
            inv = np.empty(n, dtype)
            inv[dst] = ar
            out.append(inv)
        else:
            out.append(None)
    held = sum(a.size for _, arrays in _ONE_TO_ONE.values() for a in arrays if a is not None)
    if held > _ONE_TO_ONE_MAX:
        _ONE_TO_ONE.clear()
    _ONE_TO_ONE[id(pat)] = (pat, out)
    return out


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
