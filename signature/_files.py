"""Small file helpers shared by every package that saves something."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_text_atomic", "publish"]


def publish(tmp: str | Path, path: str | Path) -> None:
    """Give a finished temporary file the usual mode (mkstemp makes it private) and
    rename it onto ``path`` in one step."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, path)


def write_text_atomic(path: str | Path, text: str, *, overwrite: bool = False) -> Path:
    """Write ``text`` to ``path`` through a temporary file and a rename, so a reader never
    sees half a file; an existing file is kept unless ``overwrite``."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; pass overwrite=True (--force) to replace it")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        publish(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
