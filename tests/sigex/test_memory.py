"""A sigex process keeps the memory it frees (signature/_memory.py): a fresh array of a size
freed before comes from the heap, without a page fault per page; the ``sigex`` command sets
it for its own process."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# a child process: the test's own malloc stays as it is
CHILD = r"""
import os, resource, sys
import numpy as np
from signature._memory import tune_allocation
try:
    from numpy._core import multiarray
except ImportError:
    multiarray = np.core.multiarray
print("set", tune_allocation())
multiarray._set_madvise_hugepage(False)  # 4 KiB pages: one fault per page
n = 24 << 20  # 24 MiB: under the 32 MiB that tune_allocation serves from the heap
a = np.ones(n, np.uint8); del a
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
b = np.ones(n, np.uint8)
print("faults", resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


def _child(env_extra):
    import os
    env = dict(os.environ, **env_extra)
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, check=True).stdout
    got = dict(line.split() for line in out.splitlines())
    return got["set"] == "True", int(got["faults"])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_freed_memory_is_reused_without_page_faults():
    pages = (24 << 20) // 4096
    was_set, faults = _child({"SIGEX_MALLOC": ""})
    assert was_set
    assert faults < pages // 10  # reused from the heap
    was_set, faults = _child({"SIGEX_MALLOC": "system"})
    assert not was_set
    assert faults >= pages * 0.9  # glibc's default: a fresh mmap, every page faulted again


def test_the_command_sets_it_before_its_work(monkeypatch, capsys):
    import sigex.cli as cli
    from sigex.commands._common import BUNDLED

    called = []
    monkeypatch.setattr(cli, "tune_allocation", lambda: called.append(1) or True)
    assert cli.main(["show", str(BUNDLED)]) == 0
    assert called == [1]
