"""Replay engine: a vectorised discrete-event simulation of a :class:`Program` under
a LogGP/LogGOPS machine model (Alexandrov et al., "LogGP", 1995; Hoefler et al.,
"LogGOPSim", HPDC 2010), predicting the runtime and the per-phase times TE_i and
PET = sum_i TE_i * W_i of Panadero et al. §2.3, Eq. 4.

Model
-----
Every rank runs its events in order. Before each event it computes for the
event's burst divided by the machine's ``speed``. A message of s bytes between
two ranks uses the parameters of their link (``machine.intra`` when both lie on
one node of ``machine.cores`` consecutive ranks, else ``machine.network``):

* posting a send at time t starts it at ``ts = max(t, nic)``; the CPU is busy
  ``o + s*O`` and the NIC takes the next send at ``ts + g + s*G``;
* eager (s < S, or a buffered send): the send is complete locally at
  ``ts + o + s*O``; the data arrives at ``ts + o + s*G + L``;
* rendezvous (s >= S, or a synchronous send): the request reaches the receiver
  at ``ts + o + L``; when the receive is posted (time tr), the reply takes
  ``o + L``, so the data leaves at ``td = max(ts + o + L, tr) + o + L``, arrives
  at ``td + o + s*G + L``, and the send is complete at ``td + o + s*O``;
* a receive is *ready* when its data has arrived and it is posted; the call that
  completes it (Recv, Wait, Waitall, ...) processes its receives in order of
  readiness (ties: cheaper first), ``x = max(x, ready) + o + s*O`` starting when
  the call has posted its own sends, and returns when every request it waits
  for is complete (sends and collectives need no CPU to complete);
* Isend/Irecv/Start return after posting; a Test or Waitany/Waitsome that
  completed requests in the traced run waits for those requests; the eager or
  rendezvous protocol of a message follows its size, not the traced run.

The times of one message are those of LogGOPSim's model with ``s*G`` in place of
``(s-1)*G``. Init, Finalize, communicator management, probes and regions cost
nothing but their burst.

Collectives are expanded into the message patterns of :mod:`replay.collectives`
(every member participates, round by round, with the same per-message costs;
each member leaves when its last message of the pattern is done) or, with ``collectives="closed-form"``, every member leaves at
the latest entry plus the closed-form LogGP cost. A collective instance is
evaluated once all its members have entered it (MPI lets collectives
synchronise, so a correct program cannot depend on them not doing so).

Not modelled: receive-side NIC contention (LogGOPSim's ``g`` on arrival; SMPI
shares a rank's link among the messages arriving at once: three 32 KiB messages
into one rank take it 7.7 us on ``bench/smpi/cluster.toml``, the replay 4.4 us,
``tests/replay/test_smpi_network.py``), network topology and congestion, the cost
of reduction arithmetic, the NIC gap for rendezvous data (only the request is
gap-limited), the NIC gap between a rank's point-to-point and collective
messages, and the cost of communicator creation (SMPI's ``MPI_Comm_split`` sends
2(P - 1) messages through rank 0, about 2o per member, and its traces do not
show it: ``tests/replay/test_smpi_twins.py``).

Engine
------
:class:`ReplayState` keeps per-rank numpy arrays (next event, clock, NIC free
time, posted flag) and per-message / per-slot arrays (send and receive post
times, completion times). :meth:`ReplayState.step` advances every rank that can
move by one event, in bulk; the number of steps is about the number of events
per rank, not the total. Messages are matched before the replay
(:class:`replay.Program`), so a step only propagates times.

A step pays numpy's per-call overhead a few dozen times, which dominates on
narrow traces (few ranks, millions of events per rank: a step then moves a few
dozen events). By default :meth:`ReplayState.run` hands the same arrays to a
compiled kernel (``replay/_kernel.c``, built with the C compiler on first use and
cached: :mod:`replay._kernel`), which moves the ranks in turns of a few events,
with the same floating-point operations per event, message and slot, and
evaluates collectives from message tables compiled from the same costs; the
numpy step stays the reference (``kernel="numpy"``, or ``SIGEX_REPLAY_KERNEL=numpy``)
and the tests require both to give the same times to the last bit. Without a C
compiler the numpy step runs.

Every time is computed elementwise from its inputs (and a completing call's
receives in a fixed order), so the result does not depend on which ranks move
in the same step. Replaying the ranks in pieces (``replay(..., pieces=k)``)
therefore gives the same numbers to the last bit. Each piece holds only its
ranks' events, their messages and the collective instances they enter, with its
own numbering (:class:`replay.pieces.Piece`). The pieces exchange, as arrays of
(id, time), the send post times of messages leaving a piece, the receive post
times of messages entering it (a rendezvous send needs them) and the entry times
of collective members (:meth:`ReplayState.export_crossing`,
:meth:`ReplayState.import_crossing`; a message's id between two pieces is its
position in their crossing list, :meth:`replay.pieces.Piece.outgoing`). The exchange is conservative: a time is
sent once, when it is final, and a piece runs until it needs a time another
piece has not produced yet; pieces take turns until all are done (a pass in
which no piece moves is a deadlock). The number of passes grows with the
number of times the pieces depend on each other (about one per halo exchange
or collective), not with the events. MPI workers run the same exchange, one
piece each (:func:`replay.workers.replay_workers`); a collective spanning pieces
is evaluated whole by every piece it touches, or (``defer_spanning``) by the
workers together, each for its own members.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
from typing import Callable

import numpy as np

from signature._arrays import ranges as _ranges
from signature.errors import DeadlockError

from . import _kernel
from . import collectives as _coll
from .machine import Machine
from .program import COLLECTIVE_NAMES, MODE_BUFFERED, MODE_SYNC, Program

__all__ = ["replay", "ReplayState", "ReplayResult"]

Progress = Callable[[int, int], None]


@dataclasses.dataclass(frozen=True, eq=False)
class ReplayResult:
    """What a replay predicts.

    Attributes
    ----------
    runtime : float
        Latest finish time over the ranks (seconds).
    critical_rank : int
        The rank that finishes last.
    finish, computation, communication, wait : ndarray (P,)
        Per rank: finish time, time computing (bursts / speed), time in send and
        receive overheads (CPU busy in MPI), and the rest of its time in MPI calls
        (blocked, waiting for others).
    te : ndarray (n_phases,)
        TE_i: per phase, the longest time a rank spends in it (its events' bursts
        and calls), max over ranks.
    phase_time, phase_computation, phase_communication, phase_wait : ndarray (n_phases, P)
        The same split per phase and rank.
    phase_weights : ndarray or None
        Repetitions W_i of each phase, from the program.
    event_end : ndarray (E,)
        When each event of the program completes (computed on first access).
    """

    runtime: float
    critical_rank: int
    finish: np.ndarray
    computation: np.ndarray
    communication: np.ndarray
    wait: np.ndarray
    te: np.ndarray
    phase_time: np.ndarray
    phase_computation: np.ndarray
    phase_communication: np.ndarray
    phase_wait: np.ndarray
    phase_weights: np.ndarray | None
    machine: str
    collectives: str
    pieces: int
    steps: int
    passes: int
    _event_parts: tuple = dataclasses.field(default=(), repr=False)
    _cache: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def nprocs(self) -> int:
        return len(self.finish)

    @property
    def event_end(self) -> np.ndarray:
        if "event_end" not in self._cache:
            # a piece's positions may come as a function (an MPI worker's piece: worker 0
            # works them out only when asked)
            parts = [t[pos() if callable(pos) else pos] for t, pos in self._event_parts]
            self._cache["event_end"] = np.concatenate(parts) if parts else np.zeros(0)
        return self._cache["event_end"]

    def pet(self, weights=None) -> float:
        """PET = sum_i TE_i * W_i (Panadero et al. Eq. 4); ``weights`` default to the
        program's phase weights."""
        w = self.phase_weights if weights is None else np.asarray(weights, np.float64)
        if w is None:
            raise ValueError("no phase weights: this program carries none; pass weights=[W_0, W_1, ...]")
        if w.shape != self.te.shape:
            raise ValueError(f"{len(w)} weights given for {len(self.te)} phases")
        return float(np.dot(self.te, w))

    def summary(self) -> dict:
        """A JSON-ready summary (no per-rank or per-event arrays)."""
        out = {"runtime": self.runtime, "critical_rank": self.critical_rank,
               "machine": self.machine, "collectives": self.collectives, "pieces": self.pieces,
               "computation_max": float(self.computation.max(initial=0.0)),
               "communication_max": float(self.communication.max(initial=0.0)),
               "wait_max": float(self.wait.max(initial=0.0)), "te": self.te.tolist()}
        if self.phase_weights is not None and len(self.te):
            out["pet"] = self.pet()
        return out

    def __repr__(self) -> str:
        return (f"ReplayResult(runtime={self.runtime:.6g} s, critical rank {self.critical_rank}, "
                f"P={self.nprocs}, {len(self.te)} phases, machine {self.machine!r})")


class ReplayState:
    """The replay of ranks ``lo..hi-1`` of a program (all ranks by default).

    Per rank r of the piece: ``idx[r]``, its next event (program index);
    ``clock[r]``, when it finished its previous event (once ``posted[r]``: when it
    finished posting the current one); ``nic[r]``, when its NIC takes the next
    send. Per message m: send and receive post times ``ts[m]``, ``tr[m]``. Per
    slot s: ``done[s]``, when the slot is complete (for a receive slot, when it is
    ready; the call completing it adds the processing cost ``cost[s]``). Unknown
    times are NaN. Each event's completion time, duration and MPI overheads are
    recorded as it completes; the per-rank and per-phase sums are taken once, when
    first asked for (``comp_acc``, ``ph_time``, ...).

    Inside the state events are numbered time-major (the j-th event of every rank
    next to each other), one array per integer field, so that the reads of a step,
    one event per rank, are slices when ranks move together.

    With ``defer_spanning`` (and ``collectives="algorithms"``), a collective instance
    whose members lie in several pieces is not evaluated here once its members have
    all entered: :meth:`take_pending_collectives` lists it and the caller completes
    this piece's members with :meth:`complete_collective` (MPI workers evaluate such
    an instance together, each for its own members: :mod:`replay.workers`).
    """

    def __init__(self, program: Program, machine: Machine, *, ranks: tuple[int, int] | None = None,
                 collectives: str = "algorithms", defer_spanning: bool = False, kernel: str = "auto"):
        if collectives not in ("algorithms", "closed-form"):
            raise ValueError(f"collectives must be 'algorithms' or 'closed-form', got {collectives!r}")
        self._lib = _kernel_library(kernel)
        self.kernel = "compiled" if self._lib is not None else "numpy"
        self.program = program
        self.remote = None  # a piece's: per message, its other side is in another piece
        self.machine = machine
        self.collectives = collectives
        P = program.nprocs
        lo, hi = (0, P) if ranks is None else (int(ranks[0]), int(ranks[1]))
        if not 0 <= lo <= hi <= P:
            raise ValueError(f"ranks {lo}..{hi} outside 0..{P}")
        self.lo, self.hi = lo, hi
        self.whole = lo == 0 and hi == P
        n = hi - lo
        ro = program.rank_offsets
        self.ev_lo, self.ev_hi = int(ro[lo]), int(ro[hi])
        # ---- time-major layout of this piece's events (machine-independent, cached) -----
        lay = self._lay = _layout(program, lo, hi, self._lib)
        self._pos = lay["pos"]
        # per event, time-major: message sent, message received, collective slot (-1:
        # none), first wait slot and number of wait slots, the rank's next event (-1)
        self.f_send, self.f_recv, self.f_coll = lay["send"], lay["recv"], lay["coll"]
        self.f_wstart, self.f_wlen, self.f_next = lay["wstart"], lay["wlen"], lay["next"]
        self.comp_new = lay["comp"] if machine.speed == 1.0 else lay["comp"] / machine.speed
        self.wslots = program.wait_slots
        self.n_phases = program.n_phases
        # ---- per-message LogGP terms, packed: cpu, gap, lat, oL -------------------------
        M = program.n_messages
        self.M = M
        src, dst = program.msg_src, program.msg_dst
        if self.whole:
            sel = slice(None)
        else:  # only the messages this piece sends or receives are ever looked at
            local_src = (src >= lo) & (src < hi)
            local_dst = (dst >= lo) & (dst < hi)
            sel = np.flatnonzero(local_src | local_dst)
            if sel.size and sel[-1] - sel[0] + 1 < 1.25 * sel.size:
                sel = slice(int(sel[0]), int(sel[-1]) + 1)  # mostly one run: compute it whole
        s = program.msg_bytes[sel].astype(np.float64)
        net, loc = machine.network, machine.link(True)
        intra = None
        if loc != net and machine.cores > 1 and M:
            s_src, s_dst = src[sel], dst[sel]
            intra = (s_src >= 0) & (machine.node_of(np.maximum(s_src, 0)) == machine.node_of(s_dst))
            if not intra.any():
                intra = None
        MP = np.empty((len(s), 4))
        for k, f in enumerate(() if not len(s) else (  # (no message: no numpy calls)
                lambda q: q.o + s * q.O if q.O else q.o,          # CPU cost of a send or receive
                lambda q: q.g + s * q.G if q.G else q.g,          # NIC gap after a send
                lambda q: q.o + s * q.G + q.L if q.G else q.o + q.L,  # send start to arrival
                lambda q: q.o + q.L)):                            # one control message
            MP[:, k] = f(net) if intra is None else np.where(intra, f(loc), f(net))
        if not self.whole:
            part, MP = MP, np.zeros((M, 4))
            MP[sel] = part
        self.MP = MP
        mode = program.msg_mode
        self.m_rdv = (program.msg_bytes >= machine.S) & (mode != MODE_BUFFERED)
        self.m_rdv |= mode == MODE_SYNC
        self.any_rdv = bool(self.m_rdv.any())
        self.m_src, self.m_dst = src, dst
        # ---- dynamic state ---------------------------------------------------------------
        self.idx = ro[lo:hi].astype(np.int64).copy()
        self.end = ro[lo + 1:hi + 1].astype(np.int64).copy()
        self.limit = self.end.copy()
        self.ptr = lay["first"].copy()
        self.clock = np.zeros(n)
        self.start = np.zeros(n)
        self.nic = np.full(n, -np.inf)
        self.posted = np.zeros(n, bool)
        self.dirty = np.zeros(n, bool)
        self.ready = np.flatnonzero(self.idx < self.limit)
        self.ts = np.full(M, np.nan)
        self.tr = np.full(M, np.nan)
        self.arrive = np.full(M, np.nan)
        C = len(program.coll_rank)
        self.n_slots = 2 * M + C
        self.done = np.full(self.n_slots, np.nan)
        # cost of a slot: receive slots their processing overhead (charged by the scan),
        # collective slots the member's overheads (accounted, not charged); sends 0
        self.cost = np.zeros(self.n_slots)
        if isinstance(sel, slice):
            a, b = sel.indices(M)[:2]
            self.cost[M + a:M + b] = MP[a:b, 0]
        else:
            self.cost[M + sel] = MP[sel, 0]
        self.entry = np.full(C, np.nan)
        self.inst_size = np.diff(program.coll_offsets)
        self.slot_inst = np.repeat(np.arange(len(self.inst_size), dtype=np.int64), self.inst_size)
        self.inst_count = np.zeros(len(self.inst_size), np.int64)
        self.inst_done = np.zeros(len(self.inst_size), bool)
        # ---- outputs -----------------------------------------------------------------------
        self.t_end_new = np.full(self.ev_hi - self.ev_lo, np.nan)
        self.comm_ev = np.zeros(self.ev_hi - self.ev_lo)  # per event, time in MPI overheads
        self.dur_ev = np.zeros(self.ev_hi - self.ev_lo)  # per event, end - previous event's end
        self._sums_at = None
        self.steps = 0
        # ---- crossing bookkeeping ----------------------------------------------------------
        empty = np.zeros(0, np.int64)
        self._inst_has_local = np.ones(len(self.inst_size), bool)
        self._inst_spans = np.zeros(len(self.inst_size), bool)
        # collectives spanning pieces left to the caller (MPI workers evaluate them together)
        self.defer_spanning = bool(defer_spanning) and collectives == "algorithms"
        self._pending: list[np.ndarray] = []
        self._out_ts = self._out_tr = self._out_entry = empty
        if not self.whole:
            self._out_ts = np.flatnonzero(local_src & ~local_dst)
            self._out_tr = np.flatnonzero(local_dst & ~local_src)
            slot_local = (program.coll_rank >= lo) & (program.coll_rank < hi)
            inst_local = np.zeros(len(self.inst_size), np.int64)
            has = self.inst_size > 0  # each instance's slots are one run of coll_rank
            if has.any():
                inst_local[has] = np.add.reduceat(slot_local, program.coll_offsets[:-1][has],
                                                  dtype=np.int64)
            spans = (inst_local > 0) & (inst_local < self.inst_size)
            self._out_entry = np.flatnonzero(slot_local & spans[self.slot_inst])
            self._inst_has_local = inst_local > 0
            self._inst_spans = spans
        # each list in the order of the events that post its times (a time is known once its
        # rank has posted that event), so that an export looks only at the events posted since
        # the last one: on narrow traces a piece passes thousands of times, and scanning every
        # crossing id at every pass cost more than the replay (melt at P = 32: 2,297 passes)
        self._out_ev = [empty, empty, empty]
        for k, (name, ev) in enumerate(() if self.whole else (
                ("_out_ts", program.msg_send_event), ("_out_tr", program.msg_recv_event),
                ("_out_entry", program.coll_event))):
            ids = getattr(self, name)
            e = ev[ids].astype(np.int64)
            order = np.argsort(e, kind="stable")
            setattr(self, name, ids[order])
            self._out_ev[k] = e[order]
        self._export_from = self.idx if self.whole else self.idx.copy()
        self._sent_ts = np.zeros(len(self._out_ts), bool)
        self._sent_tr = np.zeros(len(self._out_tr), bool)
        self._sent_entry = np.zeros(len(self._out_entry), bool)

    @classmethod
    def of_piece(cls, piece, machine: Machine, **options) -> "ReplayState":
        """The replay of a :class:`replay.pieces.Piece` (its ranks, its own numbering); times
        crossing pieces go through :meth:`Piece.outgoing` and :meth:`Piece.incoming`."""
        st = cls(piece.program, machine, ranks=(piece.lo, piece.hi), **options)
        st.remote = piece.remote
        st.n_phases = piece.n_phases  # the whole program's (a piece may hold no event of some)
        return st

    # ---- driving ---------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        """Every rank of the piece has reached its limit."""
        return bool(np.all(self.idx >= self.limit))

    @property
    def t_end(self) -> np.ndarray:
        """Completion time of this piece's events, in program order (NaN: not yet)."""
        return self.t_end_new[self._pos]

    # ---- per-rank and per-phase sums ------------------------------------------------------
    # Steps record each event's completion time, duration and overheads; the sums per
    # (phase, rank), over the rank's events in event order, are taken when asked for
    # (bincount adds each bin's values in input order, and a rank's events are in order
    # in the time-major numbering), and a rank's totals add its phases' (with phase -1):
    # a step does no per-phase scatter, and every split into pieces gives the same bits.
    @property
    def comp_acc(self) -> np.ndarray:
        """Per rank: computation of its events posted so far."""
        return self._sums()["comp"]

    @property
    def comm_acc(self) -> np.ndarray:
        """Per rank: time in MPI overheads of its completed events."""
        return self._sums()["comm"]

    @property
    def ph_time(self) -> np.ndarray:
        """(phases, ranks): time of the completed events, from the end of the previous one."""
        return self._sums()["ph_time"]

    @property
    def ph_comp(self) -> np.ndarray:
        """(phases, ranks): computation of the posted events."""
        return self._sums()["ph_comp"]

    @property
    def ph_comm(self) -> np.ndarray:
        """(phases, ranks): MPI overheads of the completed events."""
        return self._sums()["ph_comm"]

    def _sums(self) -> dict[str, np.ndarray]:
        if self._sums_at is not None and self._sums_at[0] == self.steps:
            return self._sums_at[1]
        n, nph = self.hi - self.lo, self.n_phases
        key = _layout_keys(self._lay, self.program, self.lo, self.hi)  # (phase + 1) * n + rank
        done = ~np.isnan(self.t_end_new)
        dur, comp, comm = self.dur_ev, self.comp_new, self.comm_ev
        key_d = key_p = key
        if not done.all():
            posted = done.copy()
            posted[self.ptr[self.posted]] = True
            key_d, dur, comm = key[done], dur[done], comm[done]
            key_p, comp = key[posted], comp[posted]
        # phase -1 (events outside any phase: Init, Finalize, ...) is row 0 of the tables
        size = (nph + 1) * n
        t_time = np.bincount(key_d, dur, minlength=size).reshape(nph + 1, n)
        t_comm = np.bincount(key_d, comm, minlength=size).reshape(nph + 1, n)
        t_comp = np.bincount(key_p, comp, minlength=size).reshape(nph + 1, n)
        out = {"comp": t_comp.sum(axis=0), "comm": t_comm.sum(axis=0),
               "ph_time": t_time[1:], "ph_comm": t_comm[1:], "ph_comp": t_comp[1:]}
        self._sums_at = (self.steps, out)
        return out

    def set_until_phase(self, phase: int | None) -> None:
        """Stop each rank before its first event of a phase after ``phase`` (None: run to
        the end). Events of a rank must be in phase order."""
        prog = self.program
        if phase is None:
            self.limit = self.end.copy()
        else:
            if prog.phase is None:
                raise ValueError("this program has no phases to stop at")
            ro = prog.rank_offsets
            sl = slice(self.ev_lo, self.ev_hi)
            ranks = prog.rank_of_event()[sl] - self.lo
            upto = np.bincount(ranks, weights=prog.phase[sl] <= phase, minlength=self.hi - self.lo)
            self.limit = ro[self.lo:self.hi] + upto.astype(np.int64)
        self.ready = np.flatnonzero(~self.posted & (self.idx < self.limit))

    def run(self, *, until_phase: int | None = None, max_steps: int | None = None,
            progress: Progress | None = None, raise_on_deadlock: bool = True) -> int:
        """Step until every rank reaches its limit (its first event of a phase after
        ``until_phase``; None: its last event) or nothing can move; returns the
        number of posts and completions made. Raises :class:`DeadlockError` when
        ranks are left that can never move (unless ``raise_on_deadlock`` is false,
        as for a piece waiting for another piece)."""
        self.set_until_phase(until_phase)
        if self._lib is not None and max_steps is None:
            return self._run_compiled(progress, raise_on_deadlock)
        total = 0
        n_ev = self.ev_hi - self.ev_lo
        first = self.program.rank_offsets[self.lo:self.hi]
        while not self.finished:
            moved = self.step()
            total += moved
            if moved == 0:
                if raise_on_deadlock:
                    raise self.deadlock()
                break
            if progress is not None and self.steps % 64 == 0:
                progress(int(np.sum(self.idx - first)), n_ev)
            if max_steps is not None and self.steps >= max_steps:
                break
        return total

    def _run_compiled(self, progress: Progress | None, raise_on_deadlock: bool) -> int:
        """:meth:`run` with the compiled kernel (:mod:`replay._kernel`): it moves every rank
        as far as it can, in turns of ``_KERNEL_BURST`` events, with the numpy step's
        arithmetic, and evaluates the collectives :meth:`_compile_collectives` compiled;
        the other instances whose members have all entered come back to be evaluated here
        (:meth:`_instances_full`), and the kernel is called again until no rank moves."""
        n = self.hi - self.lo
        lay = self._lay
        if "max_wait" not in lay:
            lay["max_wait"] = int(self.f_wlen.max()) if len(self.f_wlen) else 0
        width = max(lay["max_wait"], 1)
        scratch = {"queue": np.empty(max(n, 1), np.int64),
                   "full": np.empty(max(len(self.inst_size), 1), np.int64),
                   "scr_r": np.empty(width), "scr_c": np.empty(width)}
        scratch.update(self._compile_collectives())
        fn = self._lib.sigex_replay_run32 if self.f_send.dtype == np.int32 else self._lib.sigex_replay_run64
        ints = (ctypes.c_int64 * 4)(n, self.lo, self.M, _KERNEL_BURST)
        n_full = ctypes.c_int64(0)
        total = 0
        n_ev = self.ev_hi - self.ev_lo
        first = self.program.rank_offsets[self.lo:self.hi]
        ptrs = _kernel_pointers(self, scratch)  # the arrays are updated in place below
        while not self.finished:
            moved = int(fn(ptrs, ints, ctypes.byref(n_full)))
            self.steps += 1
            total += moved
            self.ready = np.flatnonzero(~self.posted & (self.idx < self.limit))
            if n_full.value:
                self._instances_full(scratch["full"][:n_full.value].copy())
            if progress is not None:
                progress(int(np.sum(self.idx - first)), n_ev)
            if moved == 0:
                if raise_on_deadlock:
                    raise self.deadlock()
                break
        return total

    def _compile_collectives(self) -> dict[str, np.ndarray]:
        """Message tables of the collective patterns the kernel evaluates itself, kept on the
        state: per instance its pattern (``inst_pat``, -1: evaluated here in Python), per
        pattern its rounds, per round its messages, per message its sender, receiver, LogGP
        terms (cpu, gap, lat, oL) and rendezvous flag, per pattern each member's overheads.
        The terms are those :meth:`_evaluate` uses (:func:`_world_costs` or
        :func:`_machine_costs`, whose values per message depend only on which members share
        a node), so the kernel's times are its times. Not compiled: closed-form
        collectives, instances left to MPI workers (``defer_spanning``), patterns over
        ``_KERNEL_PATTERN_MAX`` messages."""
        if "_ctables" in self.__dict__:
            return self._ctables
        prog, mach = self.program, self.machine
        I = len(self.inst_size)
        inst_pat = np.full(I, -1, np.int64)
        parts: list[dict] = []  # the tables of each pattern, in id order
        if self.collectives == "algorithms" and I:
            offsets = prog.coll_offsets
            has = self.inst_size > 0
            cand = self._inst_has_local & has & ~self.inst_done
            if self.defer_spanning:
                cand &= ~self._inst_spans
            flat = mach.link(True) == mach.network or mach.cores <= 1
            neighbor = COLLECTIVE_NAMES.index("Neighbor")
            if flat:
                same = cand  # one link: the members' ranks do not change the costs
            else:
                local = np.arange(len(prog.coll_rank)) - offsets[self.slot_inst]
                ordered = np.zeros(I, bool)
                if has.any():
                    ordered[has] = np.logical_and.reduceat(prog.coll_rank == local, offsets[:-1][has])
                same = cand & ordered & (prog.coll_op != neighbor)

            def add(tables) -> int:
                """The id of a pattern with these tables; -1 for None (not compiled)."""
                if tables is None:
                    return -1
                parts.append(tables)
                return len(parts) - 1

            # instances over the world in rank order, or any on a machine with one link: one
            # pattern per (collective, size, root, bytes), its tables kept per machine
            idx = np.flatnonzero(same)
            if len(idx):
                cols = (prog.coll_op[idx], self.inst_size[idx], prog.coll_root[idx], prog.coll_bytes[idx])
                order = np.lexsort(cols[::-1])
                first = np.zeros(len(idx), bool)
                first[0] = True
                for c in cols:
                    c = c[order]
                    first[1:] |= c[1:] != c[:-1]
                group = np.empty(len(idx), np.int64)
                group[order] = np.cumsum(first) - 1
                ids = []
                for op_code, n, root, nbytes in zip(*(c[order[first]].tolist() for c in cols)):
                    if op_code == neighbor:  # the program's own pattern
                        pat = prog.pattern("Neighbor", n, root, nbytes)
                        ids.append(add(None if pat.n_messages > _KERNEL_PATTERN_MAX else
                                       _kernel_tables(pat, _machine_costs(mach, pat, np.arange(n)[None, :]))))
                    else:
                        ids.append(add(_world_tables(mach, COLLECTIVE_NAMES[op_code], n, root, nbytes)))
                inst_pat[idx] = np.asarray(ids, np.int64)[group]
            # others: their links depend on which members share a node (one key per instance,
            # worked out in Python: past _KERNEL_LOOP_MAX of them numpy's batches are cheaper)
            seen: dict[tuple, int] = {}
            rest = np.flatnonzero(cand & ~same).tolist() if not flat else []
            for i in (rest if len(rest) <= _KERNEL_LOOP_MAX else []):
                a, b = int(prog.coll_offsets[i]), int(prog.coll_offsets[i + 1])
                world = prog.coll_rank[a:b]
                shape = np.unique(mach.node_of(world), return_inverse=True)[1].reshape(-1)
                key = (int(prog.coll_op[i]), b - a, int(prog.coll_root[i]), int(prog.coll_bytes[i]),
                       shape.astype(np.int64).tobytes())
                if key not in seen:
                    pat = prog.pattern(COLLECTIVE_NAMES[key[0]], key[1], key[2], key[3])
                    seen[key] = add(None if pat.n_messages > _KERNEL_PATTERN_MAX else
                                    _kernel_tables(pat, _machine_costs(mach, pat, world[None, :])))
                inst_pat[i] = seen[key]
        out = {"inst_pat": inst_pat, "coll_off": prog.coll_offsets, "coll_rank": prog.coll_rank}
        out.update(_joined_tables(tuple(parts)))
        widest, longest = out.pop("widest"), out.pop("longest")
        # the kernel's work arrays for one instance (written: one set per state)
        out.update(cT=np.empty(widest), cnic=np.empty(widest), cts=np.empty(longest),
                   cstart=np.empty(longest), carr=np.empty(longest))
        self._ctables = out
        return out

    def step(self) -> int:
        """Advance every rank that can move by at most one event.

        Invariant (before and after the call): a rank with ``posted`` false has
        completed its events before ``idx`` at ``clock``, and is in ``ready`` if
        ``idx < limit``; a rank with ``posted`` true has posted event ``idx`` (its
        send and receive post times and collective entry are recorded) and waits
        for that event's slots; every slot whose inputs are known has its time in
        ``done``; a posted rank with a slot that became known since it was last
        checked is ``dirty``.

        Returns the number of posts plus completions (0: nothing can move).
        """
        self.steps += 1
        moved = 0
        R = self.ready
        if R.size:
            self.ready = R[:0]
            moved += self._post(R)
        K = np.flatnonzero(self.dirty)
        if K.size:
            self.dirty[K] = False
            moved += self._complete(K)
        return moved

    # ---- posting --------------------------------------------------------------------------
    def _post(self, R: np.ndarray) -> int:
        n = len(R)
        p = self.ptr[R]
        pi, ri = _span(p), _span(R, ordered=True)
        if isinstance(pi, slice):
            mr, ms, cs, wlen, nxt = (self.f_recv[pi], self.f_send[pi], self.f_coll[pi],
                                     self.f_wlen[pi], self.f_next[pi])
        else:
            mr, ms, cs, wlen, nxt = (self.f_recv.take(p), self.f_send.take(p), self.f_coll.take(p),
                                     self.f_wlen.take(p), self.f_next.take(p))
        c0 = self.clock[ri].copy()  # ri may be a slice: a view would see the clock move
        enter = c0 + self.comp_new[pi]
        t = enter
        # receives
        hr = mr >= 0
        n_r = int(np.count_nonzero(hr))
        if n_r:
            if n_r < n:
                mr = mr[hr]
                self.tr[mr] = t[hr]
            else:
                self.tr[mr] = t
        # sends
        hs = ms >= 0
        n_s = int(np.count_nonzero(hs))
        if n_s:
            if n_s == n:
                msi, Rs, t_s = _span(ms), ri, t
            else:
                ms = ms[hs]
                msi, Rs, t_s = ms, R[hs], t[hs]
            mp = self.MP[msi] if isinstance(msi, slice) else self.MP.take(ms, axis=0)
            ts = np.maximum(t_s, self.nic[Rs])
            self.nic[Rs] = ts + mp[:, 1]
            if n_s == n:
                t = ts + mp[:, 0]
            else:
                t = t.copy()
                t[hs] = ts + mp[:, 0]
            self.ts[msi] = ts
        # overheads and duration so far (final for events that wait for nothing; a waiting
        # event's completion adds to the first and replaces the second)
        self.comm_ev[pi] = t - enter
        self.dur_ev[pi] = t - c0
        # events that wait for nothing complete now
        waits = wlen > 0
        n_w = int(np.count_nonzero(waits))
        if n_w < n:
            if n_w:
                now = ~waits
                Rn, tn, nxt, pn = R[now], t[now], nxt[now], p[now]
                self.t_end_new[pn] = tn
            else:
                Rn, tn = ri, t
                self.t_end_new[pi] = tn
            self.clock[Rn] = tn
            nidx = self.idx[Rn] + 1
            self.idx[Rn] = nidx
            self.ptr[Rn] = nxt
            self.ready = (R if n_w == 0 else R[now])[nidx < self.limit[Rn]]
        if n_w:
            if n_w == n:
                Rw, tw, sw = ri, t, c0
            else:
                Rw, tw, sw = R[waits], t[waits], c0[waits]
            self.clock[Rw] = tw
            self.start[Rw] = sw
            self.posted[Rw] = True
            self.dirty[Rw] = True
        if n_s:
            self._sends_known(msi, ts, mp)
        if n_r:
            self._recvs_known(mr)
        hc = cs >= 0
        if hc.any():
            cs = cs[hc]
            self.entry[cs] = t[hc]
            self._entries_known(cs)
        return n + (n - n_w)

    def _notify(self, ranks: np.ndarray) -> None:
        if self.whole:
            self.dirty[ranks] = self.posted[ranks]
            return
        loc = ranks - self.lo
        loc = loc[(loc >= 0) & (loc < self.hi - self.lo)]
        self.dirty[loc] = self.posted[loc]

    def _sends_known(self, m, ts: np.ndarray, mp: np.ndarray | None = None) -> None:
        """Messages ``m`` (ids, or a slice of ids) whose send post times ``ts`` just
        became known; ``mp`` their rows of the parameter table, if at hand."""
        if self.any_rdv:
            rdv = self.m_rdv[m]
            if rdv.any():
                m = np.arange(m.start, m.stop) if isinstance(m, slice) else m
                mr = m[rdv]
                self._rendezvous(mr[~np.isnan(self.tr[mr])])
                m, ts = m[~rdv], ts[~rdv]
                mp = None if mp is None else mp[~rdv]
                if not m.size:
                    return
        if mp is None:
            mp = self.MP[m] if isinstance(m, slice) else self.MP.take(m, axis=0)
        self.done[m] = ts + mp[:, 0]
        arrive = ts + mp[:, 2]
        self.arrive[m] = arrive
        tr = self.tr[m]
        k = ~np.isnan(tr)
        nk = int(np.count_nonzero(k))
        if nk:
            if nk < len(tr):
                m = np.arange(m.start, m.stop)[k] if isinstance(m, slice) else m[k]
                arrive, tr = arrive[k], tr[k]
            if isinstance(m, slice):
                self.done[m.start + self.M:m.stop + self.M] = np.maximum(arrive, tr)
            else:
                self.done[self.M + m] = np.maximum(arrive, tr)
            self._notify(self.m_dst[m])

    def _recvs_known(self, m: np.ndarray) -> None:
        """Messages whose receive post time just became known."""
        k = ~np.isnan(self.ts[m])
        if not k.any():
            return
        m = m[k]
        if self.any_rdv:
            rdv = self.m_rdv[m]
            if rdv.any():
                self._rendezvous(m[rdv])
                m = m[~rdv]
        self.done[self.M + m] = np.maximum(self.arrive[m], self.tr[m])
        self._notify(self.m_dst[m])

    def _rendezvous(self, m: np.ndarray) -> None:
        """Rendezvous messages whose send and receive are both posted."""
        if not m.size:
            return
        mp = self.MP.take(m, axis=0)
        tdata = np.maximum(self.ts[m] + mp[:, 3], self.tr[m]) + mp[:, 3]
        self.done[m] = tdata + mp[:, 0]
        arrive = tdata + mp[:, 2]
        self.arrive[m] = arrive
        self.done[self.M + m] = arrive
        self._notify(self.m_src[m])
        self._notify(self.m_dst[m])

    # ---- collectives ----------------------------------------------------------------------
    def _entries_known(self, slots: np.ndarray) -> None:
        si = self.slot_inst[slots]
        if si[0] == si[-1] and si.min() == si.max():  # one instance (a world collective)
            inst, counts = si[:1], np.array([len(si)])
        else:
            inst, counts = np.unique(si, return_counts=True)
        self.inst_count[inst] += counts
        self._instances_full(inst[self.inst_count[inst] == self.inst_size[inst]])

    def _instances_full(self, inst: np.ndarray) -> None:
        """Collective instances ``inst`` whose members have all entered: evaluate those not
        done yet that have members here (or leave those spanning pieces to the caller)."""
        full = inst[~self.inst_done[inst]]
        full = full[self._inst_has_local[full]]
        if full.size and self.defer_spanning:
            span = self._inst_spans[full]
            if span.any():
                self.inst_done[full[span]] = True
                self._pending.append(full[span])
                full = full[~span]
        if full.size:
            self._evaluate(full)

    def take_pending_collectives(self) -> np.ndarray:
        """With ``defer_spanning``: the collective instances spanning pieces whose members
        have all entered since the last call (sorted ids). Their entry times are in
        ``entry``; complete them with :meth:`complete_collective`."""
        if not self._pending:
            return np.zeros(0, np.int64)
        out = np.sort(np.concatenate(self._pending))
        self._pending = []
        return out

    def complete_collective(self, slots: np.ndarray, finish: np.ndarray, busy: np.ndarray) -> None:
        """Collective member slots ``slots`` (of this piece) leave their instance at ``finish``
        having spent ``busy`` in overheads (what :meth:`_evaluate` computes)."""
        base = 2 * self.M
        self.done[base + slots] = finish
        self.cost[base + slots] = busy
        self._notify(self.program.coll_rank[slots])

    def _evaluate(self, insts: np.ndarray) -> None:
        prog, mach = self.program, self.machine
        self.inst_done[insts] = True
        keys = np.stack([prog.coll_op[insts], self.inst_size[insts], prog.coll_root[insts],
                         prog.coll_bytes[insts]], axis=1)
        if len(insts) == 1:
            uk, group = keys, np.zeros(1, np.int64)
        else:
            uk, group = np.unique(keys, axis=0, return_inverse=True)
            group = group.reshape(-1)
        base = 2 * self.M
        for gi in range(len(uk)):
            op_code, n, root, nbytes = (int(x) for x in uk[gi])
            ins = insts[group == gi]
            if len(ins) == 1:
                a = int(prog.coll_offsets[ins[0]])
                slots = slice(a, a + n)
                ordered = bool(_world_ordered(prog, ins)[0])
            else:
                slots = prog.coll_offsets[ins][:, None] + np.arange(n)[None, :]
                ordered = False
            entry = self.entry[slots].reshape(len(ins), n)
            world = prog.coll_rank[slots].reshape(len(ins), n)
            name = COLLECTIVE_NAMES[op_code]
            if self.collectives == "closed-form" and name == "Neighbor":
                pat = prog.pattern(name, n, root, nbytes)
                cost = np.empty(len(ins))
                nodes = mach.node_of(world)
                one_node = nodes.min(axis=1) == nodes.max(axis=1)
                for intra in (False, True):
                    lk = mach.link(intra)
                    cost[one_node == intra] = _coll.neighbor_closed_form_cost(pat, L=lk.L, o=lk.o,
                                                                              G=lk.G)
                finish = entry.max(axis=1)[:, None] + cost[:, None] + np.zeros_like(entry)
                busy = cost[:, None] + np.zeros_like(entry)
            elif self.collectives == "closed-form":
                nodes = mach.node_of(world)
                one_node = nodes.min(axis=1) == nodes.max(axis=1)
                cost = np.empty(len(ins))
                for intra in (False, True):
                    sel = one_node == intra
                    if sel.any():
                        lk = mach.link(intra)
                        cost[sel] = _coll.closed_form_cost(name, n, nbytes, L=lk.L, o=lk.o, G=lk.G,
                                                           O=lk.O, S=mach.S)
                finish = entry.max(axis=1)[:, None] + cost[:, None] + np.zeros_like(entry)
                busy = cost[:, None] + np.zeros_like(entry)
            else:
                pat = prog.pattern(name, n, root, nbytes)
                if ordered:
                    cst = _world_costs(mach, name, n, root, nbytes)  # the world in rank order
                else:
                    cst = _machine_costs(mach, pat, world)
                finish, busy = _coll.evaluate(pat, entry, costs_=cst)
            if isinstance(slots, slice):
                self.done[base + slots.start:base + slots.stop] = finish[0]
                self.cost[base + slots.start:base + slots.stop] = busy[0]
            else:
                self.done[base + slots] = finish
                self.cost[base + slots] = busy
            if ordered and self.whole:
                self.dirty[:n] = self.posted[:n]
            else:
                self._notify(world.reshape(-1))

    # ---- completion -----------------------------------------------------------------------
    def _complete(self, K: np.ndarray) -> int:
        """Complete the posted ranks ``K`` whose slots are all known."""
        p = self.ptr[K]
        pi = _span(p)
        if isinstance(pi, slice):
            a, nn = self.f_wstart[pi], self.f_wlen[pi]
        else:
            a, nn = self.f_wstart.take(p), self.f_wlen.take(p)
        x0 = self.clock[K]
        nK = len(K)
        k_same = int(nn[0]) if nn.min() == nn.max() else 0
        if k_same:
            flat = (a[:, None] + np.arange(k_same)).reshape(-1)
            rowstart = None
        else:
            rowstart = np.cumsum(nn) - nn
            total = int(rowstart[-1] + nn[-1])
            flat = np.repeat(a - rowstart, nn) + np.arange(total)
        sl = self.wslots.take(flat)
        d = self.done.take(sl)
        is_recv = (sl >= self.M) & (sl < 2 * self.M)
        n_recv = int(np.count_nonzero(is_recv))
        # sends and collectives: complete when their slot is
        if n_recv < len(sl):
            dp = np.where(is_recv, -np.inf, d) if n_recv else d
            plain = (dp.reshape(nK, k_same).max(axis=1) if k_same
                     else np.maximum.reduceat(dp, rowstart))
            new = np.maximum(x0, plain)
        else:
            new = x0
        # receives: processed in order of readiness, each costing its overhead
        cost = self.cost.take(sl)
        if n_recv:
            new = np.maximum(new, self._recv_scan(x0, cost, d, is_recv, n_recv, nn, k_same, rowstart))
        ok = ~np.isnan(new)
        n_ok = int(np.count_nonzero(ok))
        if not n_ok:
            return 0
        # one summation order for every row, whatever the batch (sum(axis=1) of equal rows
        # would round otherwise than reduceat): the first cost plus numpy's pairwise sum of
        # the rest (what the compiled kernel does too)
        acct = np.add.reduceat(cost, rowstart if rowstart is not None
                               else np.arange(0, nK * k_same, k_same))
        if n_ok < nK:
            K, p, new, x0, acct = K[ok], p[ok], new[ok], x0[ok], acct[ok]
            pi = p
        ki = _span(K, ordered=True)
        self.t_end_new[pi] = new
        self.comm_ev[pi] = self.comm_ev[pi] + acct  # (post end - entry) + the slots' overheads
        self.dur_ev[pi] = new - self.start[ki]
        self.clock[ki] = new
        nidx = self.idx[ki] + 1
        self.idx[ki] = nidx
        self.ptr[ki] = self.f_next[pi] if isinstance(pi, slice) else self.f_next.take(p)
        self.posted[ki] = False
        nxt = K[nidx < self.limit[ki]]
        self.ready = np.sort(np.concatenate([self.ready, nxt])) if self.ready.size else nxt
        return n_ok

    def _recv_scan(self, x0, c, d, is_recv, n_recv, nn, k_same, rowstart) -> np.ndarray:
        """Per row: ``x = max(x, ready) + cost`` over its receive slots taken in order of
        (readiness, cost), starting from ``x0`` (NaN if a slot is unknown); ``c`` and
        ``d`` are the costs and times of the call's slots (``is_recv``: receives). Every path
        below performs the same floating-point operations on a given row, so a row's
        result does not depend on the other rows of the batch."""
        nK = len(x0)
        n_sl = len(c)
        ir = is_recv.reshape(nK, k_same) if k_same else None
        if k_same and n_recv == n_sl:
            kr = k_same
            Rd, Cc = d.reshape(nK, kr), c.reshape(nK, kr)
        elif k_same and bool(np.all(ir == ir[0])):
            # every row has its receives in the same places (e.g. Waitall over Irecv + Isend)
            cols = np.flatnonzero(ir[0])
            kr = len(cols)
            Rd, Cc = d.reshape(nK, k_same)[:, cols], c.reshape(nK, k_same)[:, cols]
        else:
            nr = (is_recv.reshape(nK, k_same).sum(axis=1) if k_same
                  else np.add.reduceat(is_recv, rowstart))
            kr = int(nr.max())
            rows = np.repeat(np.arange(nK), nn)[is_recv]
            rstart = np.cumsum(nr) - nr
            col = np.arange(n_recv) - rstart[rows]
            Rd = np.full((nK, kr), -np.inf)
            Cc = np.zeros((nK, kr))
            Rd[rows, col] = d[is_recv]
            Cc[rows, col] = c[is_recv]
        if kr == 1:
            return np.maximum(x0, Rd[:, 0]) + Cc[:, 0]
        if bool(np.all(Cc == Cc[0, 0])):
            # one cost everywhere: ties need no tie-break
            Rs = np.sort(Rd, axis=1)
            cols_r = [Rs[:, i] for i in range(kr)]
            cols_c = [Cc[:, i] for i in range(kr)]
        elif kr <= 8:
            width = 1 << (kr - 1).bit_length()
            cols_r = [Rd[:, i] for i in range(kr)] + [np.full(nK, -np.inf)] * (width - kr)
            cols_c = [Cc[:, i] for i in range(kr)] + [np.zeros(nK)] * (width - kr)
            for i, j in _sorting_network(width):
                ri, rj, ci, cj = cols_r[i], cols_r[j], cols_c[i], cols_c[j]
                swap = ri > rj
                swap |= (ri == rj) & (ci > cj)
                # (a NaN makes both NaN where a swap would not move it: the row is NaN either way)
                cols_r[i], cols_r[j] = np.minimum(ri, rj), np.maximum(ri, rj)
                cols_c[i], cols_c[j] = np.where(swap, cj, ci), np.where(swap, ci, cj)
        else:
            order = np.lexsort((Cc, Rd), axis=1)
            Rs, Cs = np.take_along_axis(Rd, order, axis=1), np.take_along_axis(Cc, order, axis=1)
            cols_r = [Rs[:, i] for i in range(kr)]
            cols_c = [Cs[:, i] for i in range(kr)]
        x = x0
        for r, cc in zip(cols_r, cols_c):
            x = np.maximum(x, r) + cc
        return x

    # ---- pieces ---------------------------------------------------------------------------
    def export_crossing(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Times newly known here that another piece needs: send post times of
        messages leaving this piece (``"ts"``), receive post times of messages
        entering it (``"tr"``), entry times of this piece's members of collectives
        that span pieces (``"entry"``); each as (ids, times)."""
        out = {}
        # the events posted since the last export: each rank's from its position then to its
        # position now, both included (an event that waits has posted its times)
        lo, hi = self._export_from, np.minimum(self.idx, self.end - 1)
        for key, ids, ev, sent, vals in (("ts", self._out_ts, self._out_ev[0], self._sent_ts, self.ts),
                                         ("tr", self._out_tr, self._out_ev[1], self._sent_tr, self.tr),
                                         ("entry", self._out_entry, self._out_ev[2], self._sent_entry,
                                          self.entry)):
            if not len(ids):
                out[key] = (ids, vals[ids])
                continue
            first = np.searchsorted(ev, lo)
            k = _ranges(first, np.searchsorted(ev, hi, side="right") - first)
            k = k[~sent[k] & ~np.isnan(vals[ids[k]])]
            sent[k] = True
            out[key] = (ids[k], vals[ids[k]])
        self._export_from = self.idx.copy()
        return out

    def import_crossing(self, data: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """Take times exported by other pieces (ids not concerning this piece are ignored)."""
        lo, hi = self.lo, self.hi
        empty = (np.zeros(0, np.int64), np.zeros(0))
        ids, t = data.get("ts", empty)
        mine = (self.m_dst[ids] >= lo) & (self.m_dst[ids] < hi) & np.isnan(self.ts[ids])
        if mine.any():
            m, tm = ids[mine], t[mine]
            self.ts[m] = tm
            self._sends_known(m, tm)
        ids, t = data.get("tr", empty)
        mine = (self.m_src[ids] >= lo) & (self.m_src[ids] < hi) & np.isnan(self.tr[ids])
        if mine.any():
            m = ids[mine]
            self.tr[m] = t[mine]
            self._recvs_known(m)
        ids, t = data.get("entry", empty)
        mine = self._inst_has_local[self.slot_inst[ids]] & np.isnan(self.entry[ids])
        if mine.any():
            s = ids[mine]
            self.entry[s] = t[mine]
            self._entries_known(s)

    # ---- diagnostics ----------------------------------------------------------------------
    def _remote(self, m: int) -> bool:
        """Message ``m``'s other side is in another piece (of a :class:`replay.pieces.Piece`)."""
        return self.remote is not None and bool(self.remote[m])

    def stuck_ranks(self) -> np.ndarray:
        """World ranks that have not reached their limit."""
        return np.flatnonzero(self.idx < self.limit) + self.lo

    def explain(self, rank: int) -> str:
        """Why ``rank`` cannot move: its next event and what that event waits for."""
        prog = self.program
        r = rank - self.lo
        e = int(self.idx[r])
        what = []
        for s in prog.wait_slots[prog.wait_offsets[e]:prog.wait_offsets[e + 1]]:
            s = int(s)
            if not np.isnan(self.done[s]):
                continue
            if s < self.M:
                d = int(prog.msg_dst[s])
                if prog.msg_recv_event[s] < 0 and not self._remote(s):
                    what.append(f"its send to rank {d} ({int(prog.msg_bytes[s])} B) is never received")
                else:
                    what.append(f"its rendezvous send to rank {d} ({int(prog.msg_bytes[s])} B) "
                                f"waits for rank {d} to post the receive")
            elif s < 2 * self.M:
                m = s - self.M
                src = int(prog.msg_src[m])
                if prog.msg_send_event[m] < 0 and not self._remote(m):
                    frm = f"rank {src}" if src >= 0 else "an unknown source"
                    what.append(f"it waits for a message from {frm} that is never sent")
                else:
                    what.append(f"it waits for the message from rank {src}")
            else:
                c = s - 2 * self.M
                i = int(self.slot_inst[c])
                sl = slice(int(prog.coll_offsets[i]), int(prog.coll_offsets[i + 1]))
                missing = prog.coll_rank[sl][np.isnan(self.entry[sl])]
                name = COLLECTIVE_NAMES[int(prog.coll_op[i])]
                shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
                what.append(f"{name} on communicator {int(prog.coll_comm[i])} waits for "
                            f"rank(s) {shown}" if len(missing) else f"{name} is incomplete")
        why = "; ".join(dict.fromkeys(what)) or "it cannot start"
        return f"{prog.describe_event(e)}: {why}"

    def deadlock(self, others: list["ReplayState"] | None = None) -> DeadlockError:
        """A :class:`DeadlockError` naming the stuck ranks of this state (and ``others``)."""
        lines, n = [], 0
        for st in [self] + list(others or []):
            for r in st.stuck_ranks():
                n += 1
                if len(lines) < 8:
                    lines.append(st.explain(int(r)))
        return deadlock_error(self.program.name, lines, n)

    # ---- results --------------------------------------------------------------------------
    def result(self, pieces: list["ReplayState"] | None = None, passes: int = 1) -> ReplayResult:
        """Gather the result of this state (with ``pieces``: of all pieces, in rank order)."""
        return gather_result(self.program, self.machine, self.collectives, pieces or [self], passes)


def deadlock_error(name: str, lines: list[str], n: int) -> DeadlockError:
    """The :class:`DeadlockError` of a replay of program ``name`` with ``n`` stuck ranks,
    ``lines`` explaining the first few (:meth:`ReplayState.explain`)."""
    more = f"; ... and {n - 8} more ranks" if n > 8 else ""
    return DeadlockError(f"{name}: the replay cannot finish, {n} rank(s) wait "
                         f"forever: " + "; ".join(lines[:8]) + more +
                         ". Check that every receive has a matching send (was the trace cut?)")


def _kernel_library(kernel: str):
    """The compiled kernel's library for ``kernel`` ("auto": if it builds here; "compiled":
    or an error; "numpy": None, the reference engine)."""
    if kernel not in ("auto", "compiled", "numpy"):
        raise ValueError(f"kernel must be 'auto', 'compiled' or 'numpy', got {kernel!r}")
    if kernel == "numpy":
        return None
    lib = _kernel.kernel()
    if lib is None and kernel == "compiled":
        why = _kernel.kernel_error() or "SIGEX_REPLAY_KERNEL=numpy is set"
        raise RuntimeError(f"the compiled replay kernel is not available: {why}")
    return lib


#: Events a rank advances in one turn of the kernel's round (measured on LAMMPS peptide
#: P = 32 and the stencil at P = 65,536: 4 was at least as fast as 1 or unlimited)
_KERNEL_BURST = 4

#: ReplayState attributes the kernel reads and writes, in its argument order, with their dtypes
#: (f_*: the layout's int32 or int64)
_KERNEL_ARRAYS = (
    ("idx", np.int64), ("limit", np.int64), ("ptr", np.int64), ("clock", np.float64),
    ("start", np.float64), ("nic", np.float64), ("posted", np.bool_), ("dirty", np.bool_),
    ("f_send", None), ("f_recv", None), ("f_coll", None), ("f_wstart", None), ("f_wlen", None),
    ("f_next", None), ("wslots", np.int64), ("comp_new", np.float64), ("MP", np.float64),
    ("m_rdv", np.bool_), ("m_src", np.int64), ("m_dst", np.int64), ("ts", np.float64),
    ("tr", np.float64), ("arrive", np.float64), ("done", np.float64), ("cost", np.float64),
    ("entry", np.float64), ("slot_inst", np.int64), ("inst_size", np.int64),
    ("inst_count", np.int64), ("inst_done", np.bool_), ("_inst_has_local", np.bool_),
    ("t_end_new", np.float64), ("comm_ev", np.float64), ("dur_ev", np.float64))


#: The kernel's work arrays and collective tables, after the state's arrays, in its order
_KERNEL_TABLES = (
    ("queue", np.int64), ("full", np.int64), ("scr_r", np.float64), ("scr_c", np.float64),
    ("inst_pat", np.int64), ("coll_off", np.int64), ("coll_rank", np.int64),
    ("pat_rounds", np.int64), ("round_msgs", np.int64), ("pat_busy", np.int64),
    ("c_src", np.int64), ("c_dst", np.int64), ("c_terms", np.float64), ("busy", np.float64),
    ("c_rdv", np.uint8), ("cT", np.float64), ("cnic", np.float64), ("cts", np.float64),
    ("cstart", np.float64), ("carr", np.float64))

_KERNEL_ARRAYS_DT = tuple((k, None if d is None else np.dtype(d)) for k, d in _KERNEL_ARRAYS)
_KERNEL_TABLES_DT = tuple((k, np.dtype(d)) for k, d in _KERNEL_TABLES)

#: Collective patterns of more messages are evaluated by numpy (vectorised) rather than compiled
_KERNEL_PATTERN_MAX = 1 << 15
#: Sub-communicator instances on a machine with intra-node links are compiled one by one up to
#: this many; beyond, numpy evaluates them (in batches)
_KERNEL_LOOP_MAX = 4096


def _kernel_pointers(st: "ReplayState", scratch: dict):
    """The data pointers of ``st``'s arrays (then the scratch arrays) for the kernel, after
    checking their dtypes and contiguity: the C code trusts them."""
    addresses = []
    want_f = st.f_send.dtype
    known = scratch.get("addresses", {})  # of kept read-only tables (_joined_tables)
    for source, spec in ((st.__dict__, _KERNEL_ARRAYS_DT), (scratch, _KERNEL_TABLES_DT)):
        for name, dtype in spec:
            a = source[name]
            flags = a.flags
            if a.dtype != (want_f if dtype is None else dtype) or not flags.c_contiguous:
                raise TypeError(f"replay kernel: {name} is {a.dtype} (contiguous "
                                f"{flags.c_contiguous}), expected contiguous "
                                f"{np.dtype(want_f if dtype is None else dtype)}")
            # a ctypes view of a writable buffer gives its address ~5x faster than the
            # array interface (which builds a dict): this runs ~55 times a replay
            addresses.append(known[name] if name in known else
                             ctypes.addressof(ctypes.c_char.from_buffer(a)) if flags.writeable
                             and a.nbytes else a.__array_interface__["data"][0])
    return (ctypes.c_void_p * len(addresses))(*addresses)


def gather_result(program: Program, machine: Machine, collectives: str, states: list,
                  passes: int = 1) -> ReplayResult:
    """The :class:`ReplayResult` of the pieces ``states``, in rank order, covering every rank.

    A piece needs ``clock``, ``comp_acc``, ``comm_acc``, ``ph_time``, ``ph_comp``,
    ``ph_comm``, ``steps``, ``t_end_new`` and ``_pos`` (``t_end_new[_pos]``: its
    events' completion times in program order; ``_pos`` may be a function returning
    it, called when ``event_end`` is first read): a :class:`ReplayState`, or the same
    arrays sent by an MPI worker (:mod:`replay.workers`)."""
    P = program.nprocs
    if len(states) == 1:  # (the sums are fresh arrays, the clock is the state's own)
        s = states[0]
        finish, comp, comm = s.clock.copy(), s.comp_acc, s.comm_acc
        ph_time, ph_comp, ph_comm = s.ph_time, s.ph_comp, s.ph_comm
    else:
        cat = np.concatenate
        finish = cat([s.clock for s in states])
        comp = cat([s.comp_acc for s in states])
        comm = cat([s.comm_acc for s in states])
        ph_time = cat([s.ph_time for s in states], axis=1)
        ph_comp = cat([s.ph_comp for s in states], axis=1)
        ph_comm = cat([s.ph_comm for s in states], axis=1)
    wait = np.maximum(finish - comp - comm, 0.0)
    ph_wait = np.maximum(ph_time - ph_comp - ph_comm, 0.0)
    crit = int(np.argmax(finish)) if P else 0
    return ReplayResult(
        runtime=float(finish.max(initial=0.0)), critical_rank=crit, finish=finish,
        computation=comp, communication=comm, wait=wait,
        te=ph_time.max(axis=1, initial=0.0), phase_time=ph_time, phase_computation=ph_comp,
        phase_communication=ph_comm, phase_wait=ph_wait, phase_weights=program.phase_weights,
        machine=machine.name, collectives=collectives, pieces=len(states),
        steps=int(sum(s.steps for s in states)), passes=passes,
        _event_parts=tuple((s.t_end_new, s._pos) for s in states))


def _machine_costs(mach: Machine, pat, world: np.ndarray) -> _coll.Costs:
    """:func:`replay.collectives.link_costs` of ``pat`` over members ``world`` (B, n) on
    ``mach``: intra-node messages on its intra-node link."""
    net, loc = mach.network, mach.link(True)
    nodes = None if loc == net or mach.cores <= 1 else mach.node_of(np.asarray(world))
    return _coll.link_costs(pat, nodes, net, loc, mach.S)


def _world_ordered(program: Program, insts: np.ndarray) -> np.ndarray:
    """Per collective instance of ``insts``: its members are world ranks 0..n-1 in order
    (worked out when first asked, kept on the program)."""
    known = program._cache.get("world_ordered")
    if known is None:
        known = program._cache["world_ordered"] = np.full(len(program.coll_op), -1, np.int8)
    got = known[insts]
    for i in np.flatnonzero(got < 0).tolist():
        k = int(insts[i])
        a, b = int(program.coll_offsets[k]), int(program.coll_offsets[k + 1])
        ranks = program.coll_rank[a:b]
        got[i] = known[k] = int(b > a and int(ranks[0]) == 0 and int(ranks[-1]) == b - a - 1
                                and bool(np.all(np.diff(ranks) == 1))
                                and COLLECTIVE_NAMES[int(program.coll_op[k])] != "Neighbor")
    return got.astype(bool)


@functools.lru_cache(maxsize=16)
def _world_costs(mach: Machine, name: str, n: int, root: int, nbytes: int) -> _coll.Costs:
    """:func:`replay.collectives.link_costs` of a collective over world ranks 0..n-1,
    kept (the last 16): every instance of it (an Allreduce per iteration) has the same
    links. Rounds on one link hold floats, others arrays over their messages (about
    32 bytes a message)."""
    pat = _coll.pattern_for(name, n, root, nbytes)
    cst = _machine_costs(mach, pat, np.arange(n)[None, :])
    for terms in cst.rounds:
        for v in terms:
            if isinstance(v, np.ndarray):
                v.flags.writeable = False  # shared by every replay
    cst.busy.flags.writeable = False
    return cst


def _kernel_tables(pat, cst: _coll.Costs) -> dict[str, np.ndarray]:
    """The compiled kernel's tables of one collective pattern with costs ``cst`` (one
    instance's: ``cst.busy`` of shape (1, n)): its messages' senders, receivers, LogGP
    terms (cpu, gap, lat, oL) and rendezvous flags in round order, ``round_msgs`` (each
    round's first message, then the total), ``longest`` (messages of its largest round)
    and each member's overheads ``busy``, the values :meth:`ReplayState._evaluate` uses."""
    offs = np.asarray(pat.round_offsets, np.int64)
    n_msg = int(offs[-1]) if len(offs) else 0
    sizes = np.diff(offs)
    terms = np.empty((n_msg, 4))
    rdv = np.zeros(n_msg, np.uint8)
    for k in range(pat.n_rounds):
        a, b = int(offs[k]), int(offs[k + 1])
        for j, x in enumerate(cst.rounds[k]):
            terms[a:b, j] = np.asarray(x, np.float64).reshape(-1)  # a float or (1, b - a)
        r = cst.rdv[k]
        if r is not None:
            rdv[a:b] = 1 if r is True else np.asarray(r, np.uint8).reshape(-1)
    src = np.ascontiguousarray(pat.src[:n_msg], np.int64)
    out = {"c_src": src,
           "c_dst": np.ascontiguousarray(pat.dst[:n_msg], np.int64), "c_terms": terms, "c_rdv": rdv,
           "round_msgs": offs, "longest": int(sizes.max(initial=1)),
           "busy": np.ascontiguousarray(np.asarray(cst.busy, np.float64).reshape(-1))}
    for v in out.values():
        if isinstance(v, np.ndarray):
            v.flags.writeable = False  # kept (_world_tables) and shared by replays
    return out


#: _joined_tables of the last few tuples of patterns, by the patterns' ids (each entry
#: keeps its patterns alive, so an id is not reused while it is a key)
_JOINED: dict[tuple, tuple] = {}


def _joined_tables(parts: tuple) -> dict:
    """The tables of patterns ``parts`` (:func:`_kernel_tables`, in pattern id order) one
    after another, as the kernel reads them: per pattern its first round (``pat_rounds``)
    and first member (``pat_busy``), per round its first message (``round_msgs``), then
    the messages' columns and the members' overheads; ``widest`` and ``longest``: the
    largest pattern and round. Kept for the last 16 tuples whose tables are all kept
    themselves (:func:`_world_tables`): a replay of an Allreduce loop joins them once."""
    key = tuple(map(id, parts))
    hit = _JOINED.get(key)
    if hit is not None:
        return hit[1]
    out = {}
    for name, empty in (("c_src", np.zeros(0, np.int64)), ("c_dst", np.zeros(0, np.int64)),
                        ("c_terms", np.zeros((0, 4))), ("busy", np.zeros(0)),
                        ("c_rdv", np.zeros(0, np.uint8))):
        out[name] = np.concatenate([t[name] for t in parts]) if parts else empty
    rounds = [len(t["round_msgs"]) - 1 for t in parts]
    out["pat_rounds"] = np.concatenate([[0], np.cumsum(rounds, dtype=np.int64)]).astype(np.int64)
    out["pat_busy"] = np.concatenate([[0], np.cumsum([len(t["busy"]) for t in parts],
                                                     dtype=np.int64)]).astype(np.int64)
    msgs = [0]
    for t in parts:
        msgs.extend((t["round_msgs"][1:] + msgs[-1]).tolist())
    out["round_msgs"] = np.asarray(msgs, np.int64)
    out["widest"] = max([len(t["busy"]) for t in parts], default=1)
    out["longest"] = max([t["longest"] for t in parts], default=1)
    if all(t.get("kept") for t in parts):
        out["addresses"] = {}
        for k, v in list(out.items()):
            if isinstance(v, np.ndarray):
                v.flags.writeable = False
                out["addresses"][k] = v.__array_interface__["data"][0]
        if len(_JOINED) >= 16:
            _JOINED.pop(next(iter(_JOINED)))
        _JOINED[key] = (parts, out)
    return out


@functools.lru_cache(maxsize=32)
def _world_tables(mach: Machine, name: str, n: int, root: int, nbytes: int) -> dict | None:
    """:func:`_kernel_tables` of a collective over world ranks 0..n-1 (any members on a
    machine with one link), kept (the last 32, as :func:`_world_costs`): every instance
    of it has the same tables. None when the pattern has over ``_KERNEL_PATTERN_MAX``
    messages (numpy evaluates it)."""
    pat = _coll.pattern_for(name, n, root, nbytes)
    if pat.n_messages > _KERNEL_PATTERN_MAX:
        return None
    out = _kernel_tables(pat, _world_costs(mach, name, n, root, nbytes))
    out["kept"] = True
    return out


@functools.lru_cache(maxsize=None)
def _sorting_network(n: int) -> tuple[tuple[int, int], ...]:
    """Batcher's odd-even merge sort comparators for n (a power of two) inputs."""
    pairs = []
    p = 1
    while p < n:
        k = p
        while k >= 1:
            for j in range(k % p, n - k, 2 * k):
                for i in range(min(k, n - j - k)):
                    if (i + j) // (2 * p) == (i + j + k) // (2 * p):
                        pairs.append((i + j, i + j + k))
            k //= 2
        p *= 2
    return tuple(pairs)


def _span(a: np.ndarray, ordered: bool = False, shortest: int = 17):
    """``a`` as a slice when it is a run of at least ``shortest`` consecutive increasing
    integers (slices give views, where index arrays gather), else ``a`` itself.
    ``ordered``: ``a`` is known to be strictly increasing, so its ends suffice."""
    n = len(a)
    if n >= max(shortest, 1) and a[-1] - a[0] == n - 1 and (ordered or bool(np.all(a[1:] - a[:-1] == 1))):
        return slice(int(a[0]), int(a[0]) + n)
    return a


def _layout(program: Program, lo: int, hi: int, lib=None) -> dict[str, np.ndarray]:
    """Machine-independent arrays of ranks lo..hi-1 with events numbered time-major
    (the first event of each rank in rank order, then the second, ...): ``pos``
    (program event - ev_lo -> new number), the per-event columns of
    :class:`ReplayState` (``send``, ``recv``, ``coll``, ``wstart``, ``wlen``,
    ``next``), ``comp`` (bursts), ``first`` (each rank's first event, -1 if none),
    ``counts`` (events per rank), ``keys`` (the bins of the per-phase sums, see
    :func:`_layout_keys`; here or when first asked). With the kernel's library ``lib``,
    its ``sigex_layout`` writes them in one pass (the same arrays). The layout of the whole
    program is cached on it."""
    key = ("layout", lo, hi)
    cache = program._cache
    if key in cache:
        return cache[key]
    ro = program.rank_offsets
    ev_lo, ev_hi = int(ro[lo]), int(ro[hi])
    ne, nr = ev_hi - ev_lo, hi - lo
    # every value is below one of these bounds (ids of messages, slots, wait-list entries, events)
    big = max(program.n_slots, len(program.wait_slots), program.n_events) + 1
    dtype = np.int32 if big < (1 << 31) - 1 else np.int64
    if lib is not None and ne and np.dtype(np.intp) == np.int64:
        lay = _compiled_layout(lib, program, lo, hi, dtype)
        if lo == 0 and hi == program.nprocs:
            cache[key] = lay
        return lay
    counts, order, pos = _time_major(program, lo, hi)
    starts = ro[lo:hi] - ev_lo
    uniform = order is None  # every rank has counts[0] events
    sl = slice(ev_lo, ev_hi)
    if uniform:
        lay = _uniform_layout(program, sl, nr, int(counts[0]), dtype)
        lay.update(pos=pos, counts=counts)
        if lo == 0 and hi == program.nprocs:
            cache[key] = lay
        return lay

    def tm(c):
        """A column of these ranks' events in program order, time-major."""
        return c.astype(dtype, copy=False).take(order)

    woff = program.wait_offsets
    nxt = np.empty(ne, np.int64)
    nxt[:-1] = pos[1:]
    nxt[(starts + counts - 1)[counts > 0]] = -1
    lay = {"pos": pos, "send": tm(program.send_msg[sl]), "recv": tm(program.recv_msg[sl]),
           "coll": tm(program.coll_slot[sl]), "wstart": tm(woff[sl]),
           "wlen": tm(woff[ev_lo + 1:ev_hi + 1] - woff[sl]), "next": tm(nxt)}
    lay["comp"] = program.comp[sl].take(order)
    first = np.full(nr, -1, np.int64)
    first[counts > 0] = pos[starts[counts > 0]]
    lay.update(first=first, counts=counts)
    if lo == 0 and hi == program.nprocs:
        cache[key] = lay
    return lay


def _compiled_layout(lib, program: Program, lo: int, hi: int, dtype) -> dict:
    """:func:`_layout` of ranks lo..hi-1 (at least one event) by the kernel library's
    ``sigex_layout``: one pass over the events instead of a sort and a gather per column."""
    ro = program.rank_offsets
    ev_lo, ev_hi = int(ro[lo]), int(ro[hi])
    ne, nr = ev_hi - ev_lo, hi - lo
    sl = slice(ev_lo, ev_hi)
    counts = np.ascontiguousarray(np.diff(ro[lo:hi + 1]), np.int64)
    maxc = int(counts.max())
    cols = np.empty((6, ne), dtype)  # send, recv, coll, wstart, wlen, next
    comp, keys = np.empty(ne), np.empty(ne, np.int64)
    pos, first, work = np.empty(ne, np.int64), np.empty(nr, np.int64), np.empty(maxc + 1, np.int64)
    ins = [np.ascontiguousarray(c, np.int64) for c in
           (program.send_msg[sl], program.recv_msg[sl], program.coll_slot[sl],
            program.wait_offsets[ev_lo:ev_hi + 1])]
    ins.append(np.ascontiguousarray(program.comp[sl], np.float64))
    phase = None if program.phase is None else np.ascontiguousarray(program.phase[sl], np.int64)
    adr = _kernel.address
    base, step = adr(cols), ne * cols.itemsize
    fn = lib.sigex_layout32 if dtype == np.int32 else lib.sigex_layout64
    fn(nr, adr(counts), maxc, *map(adr, ins), None if phase is None else adr(phase), adr(work),
       *(base + j * step for j in range(6)), adr(comp), adr(keys), adr(pos), adr(first))
    return {"pos": pos, "send": cols[0], "recv": cols[1], "coll": cols[2], "wstart": cols[3],
            "wlen": cols[4], "next": cols[5], "comp": comp, "first": first, "counts": counts,
            "keys": keys}


def _uniform_layout(program: Program, sl: slice, nr: int, nc: int, dtype) -> dict:
    """:func:`_layout`'s columns when each of the ``nr`` ranks has ``nc`` events
    (program events ``sl``): time-major is then a transpose, done once for the integer
    columns together; the next event of a rank is ``nr`` further on. Also the bins of
    the per-phase sums (``keys``, what :func:`_layout_keys` computes)."""
    woff = program.wait_offsets
    block = np.empty((5, nr, nc), dtype)
    for j, col in enumerate((program.send_msg[sl], program.recv_msg[sl], program.coll_slot[sl],
                             woff[sl])):
        block[j] = col.reshape(nr, nc)
    np.subtract(woff[sl.start + 1:sl.stop + 1].reshape(nr, nc), block[3], out=block[4])
    send, recv, coll, wstart, wlen = np.ascontiguousarray(block.transpose(0, 2, 1)).reshape(5, -1)
    nxt = np.arange(nr, nr * (nc + 1), dtype=dtype)
    nxt[-nr:] = -1
    comp = np.ascontiguousarray(program.comp[sl].reshape(nr, nc).T).reshape(-1)
    keys = np.empty((nc, nr), np.intp)  # (phase + 1) * nr + rank
    if program.phase is None:
        keys[:] = 0
    else:
        np.add(program.phase[sl].reshape(nr, nc).T, 1, out=keys)
        keys *= nr
    keys += np.arange(nr, dtype=np.intp)
    return {"send": send, "recv": recv, "coll": coll, "wstart": wstart, "wlen": wlen, "next": nxt,
            "comp": comp, "first": np.arange(nr, dtype=np.int64), "keys": keys.reshape(-1)}


def _time_major(program: Program, lo: int, hi: int):
    """The time-major numbering of the events of ranks lo..hi-1: ``(counts, order,
    pos)`` with ``counts`` events per rank, ``pos`` program event - ev_lo -> new
    number and ``order`` its inverse (None when every rank has as many events: the
    numbering is then a transpose)."""
    ro = program.rank_offsets
    ne, nr = int(ro[hi] - ro[lo]), hi - lo
    counts = np.diff(ro[lo:hi + 1])
    if ne and counts.min() == counts.max():
        return counts, None, np.arange(ne, dtype=np.int64).reshape(int(counts[0]), nr).T.reshape(-1)
    local = np.arange(ne, dtype=np.int64) - np.repeat(ro[lo:hi] - ro[lo], counts)
    kind = np.uint16 if counts.max(initial=0) < (1 << 16) else np.int64
    order = np.argsort(local.astype(kind), kind="stable")
    pos = np.empty(ne, np.int64)
    pos[order] = np.arange(ne, dtype=np.int64)
    return counts, order, pos


def layout_positions(program: Program, lo: int, hi: int) -> np.ndarray:
    """``pos`` of :func:`_layout` for ranks lo..hi-1 alone: program event - ev_lo ->
    time-major number."""
    lay = program._cache.get(("layout", lo, hi))
    return lay["pos"] if lay is not None else _time_major(program, lo, hi)[2]


def _layout_keys(lay: dict, program: Program, lo: int, hi: int) -> np.ndarray:
    """``(phase + 1) * n + rank`` of each event of ranks lo..hi-1 (n = hi - lo, rank
    piece-local, phase -1 outside any phase), time-major: the bins of the per-phase,
    per-rank sums. Kept in the layout ``lay`` of those ranks."""
    if "keys" not in lay:
        n, counts, pos = hi - lo, lay["counts"], lay["pos"]
        dtype = np.intp  # what bincount takes without a converted copy
        sl = slice(int(program.rank_offsets[lo]), int(program.rank_offsets[hi]))
        ph = np.full(len(pos), -1, dtype) if program.phase is None else program.phase[sl].astype(dtype)
        if len(pos) and counts.min() == counts.max():
            # program order is (rank, event): the layout is its transpose
            keys = ((ph.reshape(n, -1) + 1) * n + np.arange(n, dtype=dtype)[:, None]).T.reshape(-1)
        else:
            keys = np.empty(len(pos), dtype)
            keys[pos] = (ph + 1) * n + np.repeat(np.arange(n, dtype=dtype), counts)
        lay["keys"] = keys
    return lay["keys"]


def replay(program: Program, machine: Machine, *, collectives: str = "algorithms",
           pieces: int = 1, progress: Progress | None = None, kernel: str = "auto") -> ReplayResult:
    """Predict the run of ``program`` on ``machine``.

    Parameters
    ----------
    program : Program
        From :meth:`Program.from_trace` (a captured or physical trace).
    machine : Machine
        From :func:`replay.load` (``machines/*.toml``).
    collectives : {"algorithms", "closed-form"}
        Expand collectives into their message patterns, or charge the closed-form
        LogGP cost after the last member enters.
    pieces : int
        Replay the ranks in this many contiguous blocks, one after another,
        exchanging the times of messages and collectives that cross blocks, until
        every block is done; each block is a :class:`replay.pieces.Piece` holding
        only its ranks' events, messages and collectives. The result equals
        ``pieces=1`` exactly.
    progress : callable(done, total), optional
        Called now and then with the number of events replayed.
    kernel : {"auto", "compiled", "numpy"}
        Advance the ranks with the compiled kernel (:mod:`replay._kernel`, built with the
        C compiler on first use; "auto" falls back to numpy where it cannot be built) or
        with the vectorised numpy step, the reference. Both give the same times to the
        last bit.

    Returns
    -------
    ReplayResult

    Raises
    ------
    DeadlockError
        The program can never complete (a receive without a send, rendezvous sends
        waiting for each other, a collective a member never calls); the message
        names the ranks, their next event and what it waits for.

    Examples
    --------
    >>> from signature import load_trace
    >>> from replay import Program, load, replay
    >>> res = replay(Program.from_trace(load_trace("traces/stencil/P16.h5")), load("cluster-a"))
    >>> res.runtime > 0
    True
    """
    P = program.nprocs
    if not isinstance(pieces, (int, np.integer)) or pieces < 1:
        raise ValueError(f"pieces must be an integer >= 1, got {pieces!r}")
    if pieces == 1 or P <= 1:
        st = ReplayState(program, machine, collectives=collectives, kernel=kernel)
        st.run(progress=progress)
        return st.result()
    from .pieces import extract, piece_bounds

    # each piece holds its ranks' events, messages and collectives (its own numbering)
    bounds = np.unique(piece_bounds(P, min(pieces, P)))
    parts = [extract(program, int(a), int(b), bounds, i)
             for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]
    states = [ReplayState.of_piece(pc, machine, collectives=collectives, kernel=kernel) for pc in parts]
    passes = 0
    while not all(s.finished for s in states):
        passes += 1
        moved = 0
        for i, st in enumerate(states):
            if st.finished or not (st.ready.size or st.dirty.any()):
                continue  # nothing new arrived for this piece
            moved += st.run(raise_on_deadlock=False)
            for j, payload in parts[i].outgoing(st.export_crossing()).items():
                states[j].import_crossing(parts[j].incoming([(i, payload)]))
        if progress is not None:
            progress(int(sum(np.sum(s.idx - s.program.rank_offsets[s.lo:s.hi]) for s in states)),
                     program.n_events)
        if moved == 0:
            raise states[0].deadlock(states[1:])
    return gather_result(program, machine, collectives, states, passes=passes)
