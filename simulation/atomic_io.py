"""Atomic file writes, and the check of every file read from a user, shared by the simulation, the scenes and
the command line (torch-free).

Example::

    with atomic_write("out/trace.npz") as tmp:
        np.savez(tmp, ...)          # written to a hidden temporary file in out/
    # renamed onto out/trace.npz only if the block finished; removed on any exception
    path = input_file("lecture.toml", "config file", ConfigError)  # a regular file, or one line why not
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

__all__ = ["atomic_write", "input_file", "shown_path"]


def shown_path(path: str | os.PathLike) -> str:
    """``path`` for a one-line message: quoted, at most 80 characters (a hostile name can be 100 kB)."""
    text = str(path)
    return repr(text if len(text) <= 80 else text[:77] + "...")


def input_file(path: str | os.PathLike, what: str, error: type[Exception] = ValueError) -> Path:
    """``path`` if it names a regular file (a link to one counts); otherwise ``error`` with one line: it does not
    exist (a dangling link included), is a folder, is a FIFO, device or socket (reading one could block or never
    end), or cannot be looked up (a loop of links, a name too long, a path through a file, a NUL character).
    ``what`` names the file in the message ("config file", "trace"). Reading it may still fail: callers catch
    OSError (``/proc/self/mem`` opens, then every read fails, even as root)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        link = " (a link to a missing file)" if os.path.islink(path) else ""
        raise error(f"{what} {shown_path(path)} does not exist{link}") from None
    except OSError as exc:
        raise error(f"{what} {shown_path(path)} cannot be read ({exc.strerror or exc})") from None
    except ValueError:  # an embedded NUL character
        raise error(f"{what} {shown_path(path)} cannot contain a NUL character") from None
    if stat.S_ISDIR(mode):
        raise error(f"{what} {shown_path(path)} is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise error(f"{what} {shown_path(path)} is not a regular file (a FIFO, device or socket)")
    return Path(path)


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
