"""What may leave the user's machine: file paths in published data cut to the file's name.

Example::

    >>> public({"path": "/home/ada/runs/resnet.npz", "spec": "/home/ada/models/my_net.py:build", "depth": 8})
    {'path': 'resnet.npz', 'spec': 'my_net.py:build', 'depth': 8}

The explorer (``data.js``), the lecture page (its parameter table, ``traces/<Scene>.json``), the deck and the
render records (``<file>.render.json``) are meant to be copied to a web server or sent to students; the configs
and parameters they show hold absolute paths (``--trace FILE`` and ``--model FILE.py:FACTORY`` are made absolute
so that a worker process finds them; the trace cache's files). A reader needs only a file's name and its digest
(which every config and run record keeps), never where it lay on the user's disk or the user's home folder.
"""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = ["public", "public_text"]

# An absolute POSIX path (/a/b, ~/a) or Windows path (C:\a\b), as a word of its own: at the start of the text or
# after a space, quote, bracket or "=". Stops at white space, quotes and brackets; a trailing ":factory" (a model
# spec) is kept since ':' ends the last part. "‖∂L/∂h‖" or "a/b" are not paths: they do not start with / or ~.
_ABSOLUTE = re.compile(r"""(?:(?<=^)|(?<=[\s'"(\[{=]))(?:~|[A-Za-z]:(?=[\\/])|(?=/))((?:[\\/][^\s'"()\[\]{}<>\\/:]*)+)""")


def _name(match: re.Match) -> str:
    return match.group(1).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or "/"


def public_text(text: str) -> str:
    """``text`` with every absolute path in it (``/tmp/x/run.npz``, ``~/runs/a.npz``, ``C:\\runs\\a.npz``) cut to
    its last part (``run.npz``), and the user's home folder named nowhere. Pure, idempotent."""
    home = os.path.expanduser("~")
    out = _ABSOLUTE.sub(_name, text)
    if home not in ("", "/", "~") and home in out:  # a home folder inside a word (file:///home/ada/...)
        out = out.replace(home, "~")
    return out


def public(value: Any) -> Any:
    """A copy of JSON-like ``value`` (dicts, lists, tuples, strings, numbers) fit to publish: every string through
    :func:`public_text`, dict keys included. Anything else is returned as it is."""
    if isinstance(value, str):
        return public_text(value)
    if isinstance(value, dict):
        return {public_text(k) if isinstance(k, str) else k: public(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(public(v) for v in value)
    return value
