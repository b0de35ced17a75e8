"""Atomic file writes shared by the simulation, the scenes and the command line (torch-free).

Example::

    with atomic_write("out/trace.npz") as tmp:
        np.savez(tmp, ...)          # written to a hidden temporary file in out/
    # renamed onto out/trace.npz only if the block finished; removed on any exception
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["atomic_write"]


class atomic_write:
    """Context manager yielding a temporary path next to ``path``; renamed onto it on success.

    The temporary file lives in the same folder (so the rename is atomic) and is created with mode
    0666 filtered by the process umask, like any ordinary new file: the umask is never read or set.
    On an exception (Ctrl-C included) the temporary file is removed and ``path`` is untouched.
    """

    def __init__(self, path: str | os.PathLike, suffix: str = "") -> None:
        self.path = Path(path)
        self.suffix = suffix

    def __enter__(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            tmp = self.path.parent / f".{self.path.name}.{secrets.token_hex(4)}.tmp{self.suffix}"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue
            os.close(fd)
            self.tmp = tmp
            return tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)
