"""The replay's compiled step kernel (``_kernel.c``), the linear-time matching helpers
(``_match.c``) and the bulk reader of SimGrid TI files (``_tiparse.c``): built on first use,
loaded with ctypes.

Why C and not numba: the kernel is ~200 lines of scalar loops over numpy arrays that
every supported machine can compile with the ``cc`` it already has (the tracer is
built the same way, with ``mpicc``); numba would add numba and llvmlite (~60 MB of
wheels, pinned to the numpy and Python versions) to the dependencies for the same
loop. The build takes about a second, once per machine: the library is cached under
``$SIGEX_CACHE_DIR`` (default ``~/.cache/sigex``) keyed by the source's hash and the
compiler, written to a temporary name and renamed (concurrent first uses are safe),
and the first build prints one line on stderr.

:func:`kernel` returns the loaded library, or None when no C compiler works (the
replay then uses its numpy engine, which gives the same times, and a RuntimeWarning
says why once); ``SIGEX_REPLAY_KERNEL=numpy`` forces the numpy engine.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

__all__ = ["address", "kernel", "kernel_error", "tiparse", "match", "SOURCE", "TIPARSE_SOURCE",
           "MATCH_SOURCE"]

SOURCE = Path(__file__).with_name("_kernel.c")
TIPARSE_SOURCE = Path(__file__).with_name("_tiparse.c")
MATCH_SOURCE = Path(__file__).with_name("_match.c")
_FLAGS = ("-O2", "-fPIC", "-shared", "-fno-fast-math", "-ffp-contract=off")
_state: dict = {}


def address(a) -> int:
    """The data address of the contiguous numpy array ``a``, for a C function: through a
    ctypes view where ``a`` is writable (~5x cheaper than ``a.ctypes.data``, which builds
    the array interface's dict; a replay passes ~80 addresses, which shows on small
    traces), else from the array interface."""
    if a.flags.writeable and a.nbytes:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    return a.__array_interface__["data"][0]


def _cache_dir() -> Path:
    return Path(os.environ.get("SIGEX_CACHE_DIR") or Path.home() / ".cache" / "sigex")


def _compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def _build(cc: str, source: Path = SOURCE, stem: str = "libsigex_replay") -> Path:
    src = source.read_bytes()
    # keyed by the source, the compiler, the flags and the machine type (a home directory
    # shared by several kinds of node keeps one library per kind)
    tag = " ".join([cc, *_FLAGS, platform.machine(), sys.platform]).encode()
    key = hashlib.sha256(src + tag).hexdigest()[:16]
    lib = _cache_dir() / "replay" / f"{stem}_{key}.so"
    if lib.exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=lib.parent) as tmp:
        out = Path(tmp) / lib.name
        # -ffp-contract=off: no fused multiply-add, the numpy engine rounds every operation
        res = subprocess.run([cc, *_FLAGS, "-o", str(out), str(source), "-lm"],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise OSError(f"{cc} failed on {source}:\n{res.stderr.strip()}")
        os.replace(out, lib)
    print(f"sigex: built {source.name} (first use, kept in {lib.parent}) in "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return lib


def kernel():
    """The loaded kernel library (functions ``sigex_replay_run32``/``run64``, and
    ``sigex_layout32``/``64``: the time-major layout), or None if it
    cannot be built here (see :func:`kernel_error`) or ``SIGEX_REPLAY_KERNEL=numpy``."""
    if os.environ.get("SIGEX_REPLAY_KERNEL", "").lower() == "numpy":
        return None
    if "lib" not in _state:
        lib, err = None, None
        cc = _compiler()
        if cc is None:
            err = "no C compiler (cc) on PATH"
        else:
            try:
                lib = ctypes.CDLL(str(_build(cc)))
                for name in ("sigex_replay_run32", "sigex_replay_run64"):
                    fn = getattr(lib, name)
                    fn.restype = ctypes.c_int64
                    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64),
                                   ctypes.POINTER(ctypes.c_int64)]
                for name in ("sigex_layout32", "sigex_layout64"):
                    fn = getattr(lib, name)
                    fn.restype = None
                    fn.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64] + [ctypes.c_void_p] * 17
            except OSError as e:
                lib, err = None, str(e)
        if err is not None:
            warnings.warn(f"sigex: the replay's compiled kernel is not available ({err}); the "
                          "numpy engine replays instead (same times, slower on traces with few "
                          "ranks)", RuntimeWarning, stacklevel=3)
        _state["lib"], _state["error"] = lib, err
    return _state["lib"]


def kernel_error() -> str | None:
    """Why :func:`kernel` returned None (None if it did not, or was not asked yet)."""
    return _state.get("error")


def _helper(stem: str, source: Path, setup) -> object | None:
    """A small compiled helper library (built and cached like the kernel), or None where it
    cannot be built or ``SIGEX_REPLAY_KERNEL=numpy``: its callers then do the same in
    Python/numpy."""
    if os.environ.get("SIGEX_REPLAY_KERNEL", "").lower() == "numpy":
        return None
    if stem not in _state:
        lib = None
        cc = _compiler()
        if cc is not None:
            try:
                lib = ctypes.CDLL(str(_build(cc, source, stem)))
                setup(lib)
            except OSError:
                lib = None
        _state[stem] = lib
    return _state[stem]


def _setup_tiparse(lib) -> None:
    lib.sigex_ti_parse.restype = ctypes.c_int64
    lib.sigex_ti_parse.argtypes = [ctypes.c_void_p]


def _setup_match(lib) -> None:
    lib.sigex_pair.restype = ctypes.c_int64
    lib.sigex_pair.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                               ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.sigex_find_events.restype = None
    lib.sigex_find_events.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 2 + [ctypes.c_int64] \
        + [ctypes.c_void_p] * 3
    lib.sigex_latest_before.restype = ctypes.c_int64
    lib.sigex_latest_before.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 2 + [ctypes.c_int64] \
        + [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2 + [ctypes.c_void_p]
    lib.sigex_ordinals.restype = None
    lib.sigex_ordinals.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                   ctypes.c_void_p, ctypes.c_void_p]
    lib.sigex_csr.restype = None
    lib.sigex_csr.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                              ctypes.c_void_p, ctypes.c_void_p]


def tiparse():
    """The TI reader (``_tiparse.c``: ``sigex_ti_parse``), or None (the import then reads
    every line in Python, with the same result)."""
    return _helper("libsigex_tiparse", TIPARSE_SOURCE, _setup_tiparse)


def match():
    """The matching helpers (``_match.c``: ``sigex_pair``, ``sigex_csr``), or None (the
    matching then sorts with numpy, with the same result)."""
    return _helper("libsigex_match", MATCH_SOURCE, _setup_match)
