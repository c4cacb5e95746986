"""Optional user annotation of phases: ``with signature.region("halo"): ...``.

When the program runs under the sigex tracer, entering and leaving a region
records a Region_begin / Region_end event with the region's name; phase
detection ignores these events when it looks for loops and then uses them to
name the phases and to check its cut (a region that starts in one phase
repetition and ends in another is reported). Without the tracer the context
manager does nothing, so annotated programs run unchanged anywhere.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from typing import Iterator

__all__ = ["region"]


@functools.lru_cache(maxsize=1)
def _hook():
    """The tracer's ``sigex_region`` if the tracer is loaded in this process, else None."""
    try:
        fn = ctypes.CDLL(None).sigex_region
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


@contextlib.contextmanager
def region(name: str) -> Iterator[None]:
    """Mark the enclosed code as the region ``name`` in the trace (no-op untraced).

    Examples
    --------
    >>> from signature import region
    >>> for step in range(3):
    ...     with region("step"):
    ...         pass
    """
    fn = _hook()
    raw = name.encode()
    if fn is not None:
        fn(raw, 1)
    try:
        yield
    finally:
        if fn is not None:
            fn(raw, 0)
