"""The in-memory trace: one columnar event table for all ranks, as in Fig. 2 of
Panadero et al. (rank, op, peer, bytes, communication and computation time),
plus what sigex needs to replay and model it (seq, tag, communicator, request
ids, burst CPU time and context switches, hardware counters where a PMU
exists).

Every reader returns a :class:`Trace` (the HDF5 reader in :mod:`signature.io`,
the raw-tracer assembler in :mod:`signature._raw`); every later package reads
traces through it. Events are sorted by (rank, seq); ``rank_offsets[r]`` is the
first event of rank ``r``. The HDF5 layout is described in
``docs/trace-format.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from .errors import MissingCounterError, TraceFormatError

__all__ = [
    "OPS",
    "OP_CODE",
    "PEER_NONE",
    "PEER_ANY",
    "PEER_NULL",
    "COUNTER_COLUMNS",
    "Trace",
    "CommTable",
]

#: Operation names; an event's ``op`` column is the index in this tuple.
#: The tracer writes the same names into its raw files, and a test checks the
#: C list against this one.
OPS: tuple[str, ...] = (
    "None", "Init", "Finalize", "Abort",
    "Send", "Ssend", "Bsend", "Rsend", "Recv",
    "Isend", "Issend", "Ibsend", "Irsend", "Irecv",
    "Sendrecv", "Sendrecv_replace",
    "Probe", "Iprobe", "Mprobe", "Improbe", "Mrecv", "Imrecv",
    "Send_init", "Ssend_init", "Bsend_init", "Rsend_init", "Recv_init",
    "Start", "Startall",
    "Wait", "Waitall", "Waitany", "Waitsome",
    "Test", "Testall", "Testany", "Testsome", "Request_free",
    "Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv",
    "Scatter", "Scatterv", "Allgather", "Allgatherv", "Alltoall", "Alltoallv",
    "Reduce_scatter", "Reduce_scatter_block", "Scan", "Exscan",
    "Ibarrier", "Ibcast", "Ireduce", "Iallreduce", "Igather", "Igatherv",
    "Iscatter", "Iscatterv", "Iallgather", "Iallgatherv", "Ialltoall",
    "Ialltoallv", "Ireduce_scatter", "Ireduce_scatter_block", "Iscan", "Iexscan",
    "Comm_split", "Comm_split_type", "Comm_create", "Comm_create_group",
    "Comm_dup", "Cart_create", "Cart_sub", "Comm_free", "Isendrecv", "Isendrecv_replace",
    "Region_begin", "Region_end", "Alltoallw", "Ialltoallw", "Cancel",
    "Barrier_init", "Bcast_init", "Reduce_init", "Allreduce_init", "Gather_init",
    "Gatherv_init", "Scatter_init", "Scatterv_init", "Allgather_init", "Allgatherv_init",
    "Alltoall_init", "Alltoallv_init", "Alltoallw_init", "Reduce_scatter_init",
    "Reduce_scatter_block_init", "Scan_init", "Exscan_init",
    "Neighbor_allgather", "Neighbor_allgatherv", "Neighbor_alltoall", "Neighbor_alltoallv",
    "Neighbor_alltoallw", "Ineighbor_allgather", "Ineighbor_allgatherv", "Ineighbor_alltoall",
    "Ineighbor_alltoallv", "Ineighbor_alltoallw", "Neighbor_allgather_init",
    "Neighbor_allgatherv_init", "Neighbor_alltoall_init", "Neighbor_alltoallv_init",
    "Neighbor_alltoallw_init", "Graph_create", "Dist_graph_create",
    "Win_create", "Win_free", "Win_fence", "Put", "Get", "Accumulate", "Get_accumulate",
    "Fetch_and_op", "Compare_and_swap", "Rput", "Rget", "Raccumulate", "Rget_accumulate",
    "Win_lock", "Win_unlock", "Win_lock_all", "Win_unlock_all", "Win_flush", "Win_flush_local",
    "Win_flush_all", "Win_flush_local_all", "Win_sync", "Win_post", "Win_start",
    "Win_complete", "Win_wait", "Win_test",
)
OP_CODE: dict[str, int] = {name: i for i, name in enumerate(OPS)}

#: Special values of the peer/root columns (world ranks are >= 0).
PEER_NONE = -1  # the operation has no peer
PEER_ANY = -2  # MPI_ANY_SOURCE, resolved in the completion record
PEER_NULL = -3  # MPI_PROC_NULL: the call moved no data

#: Point-to-point operations that send, that receive (the peer is the source), and that
#: do both (the receive's source is in ``recv_peer``).
SEND_OPS = [OP_CODE[n] for n in ("Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Ibsend",
                                 "Irsend", "Sendrecv", "Sendrecv_replace", "Isendrecv",
                                 "Isendrecv_replace")]
RECV_OPS = [OP_CODE[n] for n in ("Recv", "Irecv", "Mrecv", "Imrecv")]
SENDRECV_OPS = [OP_CODE[n] for n in ("Sendrecv", "Sendrecv_replace", "Isendrecv", "Isendrecv_replace")]

#: Columns present only when the traced machine had a hardware PMU.
COUNTER_COLUMNS = ("instr", "cycles", "llc_misses")
#: Metadata of how the tracer took burst CPU times (docs/trace-format.md: lazy
#: CPU-time sampling); a captured trace without them was sampled at every boundary.
_CPU_SAMPLING_META = ("cpu_sampling", "cpu_sample_min_us", "cpu_sample_chain_us",
                      "cpu_switch_check", "cpu_bursts_estimated", "cpu_bursts_estimated_share",
                      "cpu_burst_time_estimated_share", "cpu_samples", "poll_clock")

#: Event columns and their dtypes, in file order.
EVENT_COLUMNS: dict[str, np.dtype] = {
    "rank": np.dtype(np.int32),
    "seq": np.dtype(np.int64),
    "op": np.dtype(np.uint8),
    "peer": np.dtype(np.int32),
    "recv_peer": np.dtype(np.int32),
    "root": np.dtype(np.int32),
    "tag": np.dtype(np.int32),
    "comm": np.dtype(np.int32),
    "aux": np.dtype(np.int32),
    "bytes": np.dtype(np.int64),
    "recv_bytes": np.dtype(np.int64),
    "req": np.dtype(np.int64),
    "t_start": np.dtype(np.float64),
    "t_comm": np.dtype(np.float64),
    "t_comp": np.dtype(np.float64),
    "t_cpu": np.dtype(np.float64),
    "ctx_switches": np.dtype(np.int64),
    "instr": np.dtype(np.int64),
    "cycles": np.dtype(np.int64),
    "llc_misses": np.dtype(np.int64),
    "phase": np.dtype(np.int32),
    "repeat": np.dtype(np.int32),
}

#: Columns a captured trace may lack: counters without a PMU, the phase index
#: that only logical/physical traces (``meta["trace_kind"]``) carry, and ``repeat``
#: (how many identical polls that found nothing one Test*/Iprobe event stands for),
#: written only when the run had such polling loops.
OPTIONAL_COLUMNS = COUNTER_COLUMNS + ("phase", "repeat")
#: Columns only a real run has; a logical or physical trace (generated by the models)
#: lacks them.
RUN_ONLY_COLUMNS = ("t_start", "t_comm", "t_comp", "t_cpu", "ctx_switches")

COMPLETION_COLUMNS: dict[str, np.dtype] = {
    "rank": np.dtype(np.int32),
    "seq": np.dtype(np.int64),
    "req": np.dtype(np.int64),
    "bytes": np.dtype(np.int64),
    "peer": np.dtype(np.int32),
    "tag": np.dtype(np.int32),
}

#: Kinds of the ``lists`` table: per-peer byte counts of v-collectives (and of
#: neighbourhood collectives, per destination and per source), request ids started
#: by Startall, and the sources and destinations (world ranks, ``PEER_NULL`` for a
#: Cartesian grid's open ends) of a neighbourhood collective.
LIST_SEND, LIST_RECV, LIST_STARTED, LIST_SOURCES, LIST_DESTS = 0, 1, 2, 3, 4


@dataclasses.dataclass
class CommTable:
    """Communicators of the run, with world-rank membership and Cartesian
    topology. Ids are global: the same communicator has the same id on every
    member. Id 0 is MPI_COMM_WORLD."""

    size: np.ndarray  # (C,) members per communicator
    inter: np.ndarray  # (C,) bool: intercommunicator (members = remote group)
    member_offsets: np.ndarray  # (C+1,)
    members: np.ndarray  # world ranks, concatenated
    cart_offsets: np.ndarray  # (C+1,) into cart_dims/cart_periods; empty = no topology
    cart_dims: np.ndarray
    cart_periods: np.ndarray

    def __len__(self) -> int:
        return len(self.size)

    def members_of(self, comm_id: int) -> np.ndarray:
        """World ranks of ``comm_id`` in communicator rank order."""
        return self.members[self.member_offsets[comm_id]:self.member_offsets[comm_id + 1]]

    def local_ranks(self, comm_id: int, world: np.ndarray) -> np.ndarray:
        """The rank in ``comm_id`` of each world rank in ``world`` (-1 where it is no member)."""
        members = self.members_of(comm_id).astype(np.int64)
        w = np.asarray(world, np.int64)
        lut = np.full(max(int(members.max(initial=-1)), int(w.max(initial=-1))) + 1, -1, np.int64)
        lut[members] = np.arange(len(members))
        return np.where(w >= 0, lut[np.maximum(w, 0)], -1)

    def cartesian(self, comm_id: int) -> tuple[tuple[int, ...], tuple[bool, ...]] | None:
        """``(dims, periods)`` of a Cartesian communicator, else None."""
        a, b = self.cart_offsets[comm_id], self.cart_offsets[comm_id + 1]
        if a == b:
            return None
        return (tuple(int(d) for d in self.cart_dims[a:b]),
                tuple(bool(p) for p in self.cart_periods[a:b]))

    @classmethod
    def world_only(cls, nprocs: int) -> "CommTable":
        return cls(
            size=np.array([nprocs], np.int32), inter=np.zeros(1, bool),
            member_offsets=np.array([0, nprocs], np.int64),
            members=np.arange(nprocs, dtype=np.int32),
            cart_offsets=np.zeros(2, np.int64),
            cart_dims=np.zeros(0, np.int32), cart_periods=np.zeros(0, bool))


@dataclasses.dataclass
class Trace:
    """One traced run: events of all ranks plus metadata.

    Attributes
    ----------
    meta : dict
        Run metadata (app, command, nprocs, workload, MPI library, hosts,
        work mode, counters, sigex version, complete flag); see
        ``docs/trace-format.md``.
    events : dict of str to ndarray
        Event columns (:data:`EVENT_COLUMNS`), sorted by (rank, seq). The
        hardware-counter columns are absent when the machine had no PMU.
    rank_offsets : ndarray, shape (P+1,)
        Rank ``r``'s events are ``rank_offsets[r]:rank_offsets[r+1]``.
    completions : dict of str to ndarray
        One row per request completed by a Wait/Test call (``seq`` is that
        call's event), with the actual peer and bytes of receives.
    lists : dict of str to ndarray
        Per-peer byte counts of v-collectives and requests started by Startall:
        rows (rank, seq, kind, start, length) into ``values``.
    comms : CommTable
    path : Path or None
        File the trace was read from.
    regions : tuple of str
        Names of the regions marked with ``signature.region``; the ``aux`` of a
        Region_begin/Region_end event is an index into it.
    """

    meta: dict[str, Any]
    events: dict[str, np.ndarray]
    rank_offsets: np.ndarray
    completions: dict[str, np.ndarray]
    lists: dict[str, np.ndarray]
    comms: CommTable
    path: Path | None = None
    regions: tuple[str, ...] = ()  # names of user regions; Region_* events' aux indexes it

    # ---- shape ---------------------------------------------------------------
    @property
    def nprocs(self) -> int:
        return int(self.meta["nprocs"])

    @property
    def n_events(self) -> int:
        return int(len(self.events["op"]))

    @property
    def complete(self) -> bool:
        return bool(self.meta.get("complete", False))

    @property
    def work_mode(self) -> str:
        """``"counters"`` when instructions/cycles exist, else ``"cpu-time"``."""
        return str(self.meta["work_mode"])

    @property
    def has_counters(self) -> bool:
        return all(c in self.events for c in COUNTER_COLUMNS)

    @property
    def name(self) -> str:
        return self.path.name if self.path else f"<trace P={self.nprocs}>"

    def rank_slice(self, rank: int) -> slice:
        """Index range of ``rank``'s events in every column."""
        if not 0 <= rank < self.nprocs:
            raise IndexError(f"{self.name}: rank {rank} out of range 0..{self.nprocs - 1}")
        return slice(int(self.rank_offsets[rank]), int(self.rank_offsets[rank + 1]))

    def rank_events(self, rank: int) -> dict[str, np.ndarray]:
        """All columns restricted to one rank (views, no copy)."""
        s = self.rank_slice(rank)
        return {k: v[s] for k, v in self.events.items()}

    def counter(self, name: str) -> np.ndarray:
        """A hardware counter column; raises with the kernel's reason if missing."""
        if name not in COUNTER_COLUMNS:
            raise KeyError(f"{name!r} is not a counter column; use one of {COUNTER_COLUMNS}")
        if name not in self.events:
            raise MissingCounterError(
                f"{self.name}: no {name} column: the traced machine had no hardware "
                f"PMU ({self.meta.get('counters_reason', 'reason not recorded')}). "
                "This trace is in CPU-time mode: use the t_cpu column.")
        return self.events[name]

    @staticmethod
    def op_code(name: str) -> int:
        try:
            return OP_CODE[name]
        except KeyError:
            raise KeyError(f"unknown MPI operation {name!r}; known: {', '.join(OPS[1:])}") from None

    @staticmethod
    def op_name(code: int) -> str:
        return OPS[int(code)]

    # ---- derived figures -------------------------------------------------------
    def end_times(self) -> np.ndarray:
        """Per rank: time from the post-Init barrier to the end of its last event
        before MPI_Finalize (the traced run's runtime on that rank)."""
        ev = self.events
        out = np.zeros(self.nprocs)
        last = self.rank_offsets[1:] - 1
        has = self.rank_offsets[1:] > self.rank_offsets[:-1]
        fin = OP_CODE["Finalize"]
        # the runtime ends where Finalize starts (or after the last event)
        is_fin = ev["op"][last[has]] == fin
        t_end = np.where(is_fin, ev["t_start"][last[has]],
                         ev["t_start"][last[has]] + ev["t_comm"][last[has]])
        out[has] = t_end
        return out

    @property
    def runtime(self) -> float:
        """Measured runtime: the latest rank's end time (seconds); NaN for a
        generated (logical or physical) trace, which has no clock."""
        if "t_start" not in self.events:
            return float("nan")
        return float(self.end_times().max()) if self.nprocs else 0.0

    def _column(self, name: str) -> np.ndarray:
        """An event column, or zeros where a generated trace lacks it."""
        ev = self.events
        return ev[name] if name in ev else np.zeros(len(ev["op"]))

    def per_rank_totals(self) -> dict[str, np.ndarray]:
        """Per-rank sums of burst wall time, burst CPU time, time in MPI calls,
        context switches and event counts (Init's and Finalize's own call times
        excluded: they are start-up and shut-down, not the application)."""
        ev = self.events
        ranks = ev["rank"]
        P = self.nprocs
        inside = (ev["op"] != OP_CODE["Init"]) & (ev["op"] != OP_CODE["Finalize"])
        return {
            "events": np.diff(self.rank_offsets),
            "t_comp": np.bincount(ranks, weights=self._column("t_comp"), minlength=P),
            "t_cpu": np.bincount(ranks, weights=self._column("t_cpu"), minlength=P),
            "t_comm": np.bincount(ranks, weights=np.where(inside, self._column("t_comm"), 0.0),
                                  minlength=P),
            "ctx_switches": np.bincount(ranks, weights=self._column("ctx_switches"), minlength=P),
            "bytes": np.bincount(ranks, weights=ev["bytes"], minlength=P),
        }

    def op_table(self) -> list[dict[str, Any]]:
        """Per operation: calls, bytes sent, bytes received, time inside calls."""
        ev = self.events
        n = len(OPS)
        calls = np.bincount(ev["op"], minlength=n)
        sent = np.bincount(ev["op"], weights=ev["bytes"], minlength=n)
        recv = np.bincount(ev["op"], weights=ev["recv_bytes"], minlength=n)
        t = np.bincount(ev["op"], weights=self._column("t_comm"), minlength=n)
        return [
            {"op": OPS[i], "calls": int(calls[i]), "bytes": int(sent[i]),
             "recv_bytes": int(recv[i]), "t_comm": float(t[i])}
            for i in np.flatnonzero(calls)
        ]

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary: what ``sigex show`` prints."""
        tot = self.per_rank_totals()
        return {
            "file": str(self.path) if self.path else None,
            "app": self.meta.get("app"),
            "command": self.meta.get("command"),
            "nprocs": self.nprocs,
            "workload": {"label": self.meta.get("workload_label"),
                         "value": self.meta.get("workload_value")},
            "mpi_library": self.meta.get("mpi_library"),
            "hosts": self.meta.get("hosts"),
            "trace_kind": self.meta.get("trace_kind", "captured"),
            "work_mode": self.work_mode,
            "counters_available": self.has_counters,
            "counters_reason": self.meta.get("counters_reason"),
            "cpu_sampling": {k: self.meta[k] for k in _CPU_SAMPLING_META if k in self.meta},
            "complete": self.complete,
            "incomplete_reason": self.meta.get("incomplete_reason"),
            "events": self.n_events,
            "runtime": self.runtime if self.runtime == self.runtime else None,  # NaN: not run
            "ops": self.op_table(),
            "ranks": {k: v.tolist() for k, v in tot.items()},
        }

    # ---- validation ------------------------------------------------------------
    def validate(self) -> None:
        """Check internal consistency; raise :class:`TraceFormatError` naming the
        file and rank of the first problem."""
        P = self.nprocs
        name = self.name
        ro = self.rank_offsets
        n = self.n_events
        if ro.shape != (P + 1,) or ro[0] != 0 or ro[-1] != n or np.any(np.diff(ro) < 0):
            raise TraceFormatError(f"{name}: rank index does not match the event table "
                                   f"({P} ranks, {n} events); the file is damaged")
        for col, arr in self.events.items():
            if len(arr) != n:
                raise TraceFormatError(f"{name}: column {col!r} has {len(arr)} rows, expected {n}")
        ranks = self.events["rank"]
        expect = np.repeat(np.arange(P, dtype=np.int32), np.diff(ro))
        bad = np.flatnonzero(ranks != expect)
        if bad.size:
            i = int(bad[0])
            raise TraceFormatError(f"{name}: event {i} belongs to rank {ranks[i]} but sits in "
                                   f"rank {expect[i]}'s block; the file is damaged")
        seq = self.events["seq"]
        if n:
            step = np.diff(seq)
            same_rank = ranks[1:] == ranks[:-1]
            bad = np.flatnonzero(same_rank & (step <= 0))
            if bad.size:
                i = int(bad[0]) + 1
                raise TraceFormatError(f"{name}: rank {ranks[i]}: events out of order at seq "
                                       f"{seq[i]} (after {seq[i - 1]})")
        op = self.events["op"]
        if n and int(op.max()) >= len(OPS):
            raise TraceFormatError(f"{name}: unknown operation code {int(op.max())}")
        for col in ("peer", "recv_peer", "root"):
            arr = self.events[col]
            bad = np.flatnonzero((arr >= P) | (arr < -3))
            if bad.size:
                i = int(bad[0])
                raise TraceFormatError(f"{name}: rank {ranks[i]} event seq {seq[i]} "
                                       f"({OPS[op[i]]}): {col} {arr[i]} is not a world rank "
                                       f"of a {P}-process run")

    # ---- I/O -------------------------------------------------------------------
    @classmethod
    def from_hdf5(cls, path: str | Path, *, allow_incomplete: bool = False) -> "Trace":
        """Read a trace file; see :func:`signature.io.read_trace`."""
        from .io import read_trace
        return read_trace(path, allow_incomplete=allow_incomplete)

    def to_hdf5(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write atomically; see :func:`signature.io.write_trace`."""
        from .io import write_trace
        return write_trace(self, path, overwrite=overwrite)

    def __repr__(self) -> str:
        state = "complete" if self.complete else "INCOMPLETE"
        return (f"Trace({self.name}: app={self.meta.get('app')!r}, P={self.nprocs}, "
                f"{self.n_events} events, {self.work_mode} mode, {state})")
