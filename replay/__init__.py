"""replay: simulate a physical trace under a LogGP/LogGOPS machine model and predict
the runtime, the per-phase times TE_i and PET = sum TE_i * W_i (Panadero et al. §2.3,
Eq. 4).

Replaying
---------
replay            -- predict a program's run on a machine (collectives as algorithms or closed
                     forms; optionally in pieces)
ReplayResult      -- runtime, critical rank, per-rank and per-phase computation/communication/
                     wait, TE_i, pet()
ReplayState       -- the engine: per-rank arrays, step(), run(until_phase=...), piece exchange
                     (run() uses the compiled kernel of replay/_kernel.c when it builds; kernel="numpy":
                     the vectorised reference, same times)
Program           -- a trace resolved for replay: matched messages, collective instances, wait lists

Pieces and MPI workers (``import replay.pieces``, ``import replay.workers``)
--------------------------------------------------------------------------
pieces            -- module: Piece (a block of ranks with only its events, messages and
                     collectives, its own numbering), extract, read_piece (a worker's piece
                     from its rank block of the trace file)
workers           -- module: replay_workers (one piece per MPI process, bit-identical; a
                     Program or a trace file), running_under_mpi, last_stages

Machines
--------
Machine           -- network (LogGP), optional intra-node link, eager threshold S, speed, cores per node
LogGP             -- the L, o, g, G, O parameters of one kind of link
load              -- read a machine profile (TOML; a bare name such as ``cluster-a`` picks a shipped one)
MachineError      -- a profile is missing, malformed or impossible
MACHINES_DIR      -- where the shipped profiles live (``machines/*.toml``)

Collectives
-----------
collectives       -- module: patterns ``(src, dst, nbytes, round)``, pattern_for, evaluate, closed_form_cost

SimGrid interop (``import replay.simgrid``)
-------------------------------------------
simgrid           -- module: export_ti, import_ti (time-independent traces), platform_xml, replay_smpi

Errors
------
DeadlockError (from :mod:`signature.errors`) is raised when a program can never complete.

Anything not listed here may change without notice.
"""

from signature.errors import DeadlockError

from . import collectives
from .engine import ReplayResult, ReplayState, replay
from .machine import MACHINES_DIR, LogGP, Machine, MachineError, load
from .program import Program

__all__ = [
    "replay", "ReplayResult", "ReplayState", "Program",
    "Machine", "LogGP", "load", "MachineError", "MACHINES_DIR",
    "collectives", "DeadlockError",
]
