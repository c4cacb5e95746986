"""A sigex process keeps the memory it frees for its next arrays (glibc).

sigex's stages work on whole columns of a trace: a signature of a 3.4 M-event trace makes
about a hundred temporary arrays of 12-27 MB. glibc serves each allocation that large with
a fresh ``mmap`` and gives it back with ``munmap`` when numpy frees it, so every temporary
costs page faults on first touch (numpy's large arrays ask for transparent huge pages,
whose faults zero 2 MB and may compact memory first). A replay worker that keeps no
result frees everything it built, so its next replay faults every page in again.

Measured on this 2-vCPU VM (LAMMPS peptide at P = 32, 3,371,341 events, quiet, runs
interleaved): ``signature.extract`` takes 21,000-23,000 page faults in a fresh process
with this setting against 60,000-65,000 without; a second call in the same process takes
1.07-1.17 s CPU against 1.17-1.24 s. The first call is not reliably faster (1.18-2.26 s
against 1.56-1.89 s): its fewer faults are mostly transparent huge pages (numpy asks for
them), whose cost varies from run to run; with numpy's huge pages off it is a steady
1.44 s against 1.70-1.81 s, but every later call is slower. A replay worker of the
stencil at P = 65,536 took 25,500 page faults (~100 MB) per ``Program.from_trace`` of its
piece before its heap was kept. Peak memory is unchanged: arrays over 32 MiB are still
mapped (the stencil at P = 1,048,576: one process 7.49 GB against 7.44 GB, two workers
4.07/3.94 GB against 4.07/3.75 GB).

:func:`tune_allocation` sets this for the process that calls it: allocations up to 32 MiB
from the heap (``M_MMAP_THRESHOLD``, glibc's largest) and its free top kept up to
``M_TRIM_THRESHOLD`` = 1 GiB.
Memory freed stays in the process for reuse until it exits. The ``sigex`` command calls
it for its own process, and so does :func:`replay.workers.replay_workers` on each MPI
worker; it never applies to the traced program (a separate process) nor to a program
that imports sigex's packages as a library and calls the stages itself: its allocator is
its own to tune (it may call this). ``SIGEX_MALLOC=system`` leaves glibc's defaults. On a
C library without ``mallopt`` (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["tune_allocation", "available_memory", "short_of"]

# glibc's <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: allocations up to this size come from the heap: glibc's largest mmap threshold on 64-bit
#: systems (what its own dynamic threshold grows to); larger ones (a big trace's columns)
#: are mapped and unmapped as before, so peak memory stays what it was
MMAP_THRESHOLD = 32 << 20
#: the heap's free top is returned to the system only beyond this
TRIM_THRESHOLD = 1 << 30

_done: bool | None = None


def tune_allocation() -> bool:
    """Serve this process's allocations up to 32 MiB from the heap and keep freed memory
    there (glibc ``mallopt``); True if set. Once per process; ``SIGEX_MALLOC=system`` skips
    it."""
    global _done
    if _done is not None:
        return _done
    _done = False
    if os.environ.get("SIGEX_MALLOC", "") == "system":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _done


def available_memory() -> int | None:
    """Bytes this machine can give a process now (Linux's MemAvailable), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def short_of(need: int) -> int | None:
    """The bytes this machine has available where that is less than ``need`` (a stage to
    refuse, naming both), else None (enough, or unknown)."""
    free = available_memory()
    return free if free is not None and need > free else None
