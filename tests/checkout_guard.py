"""The checkout guard: a test session that adds, changes or removes a file of the checkout fails (issue 34).

Example::

    before = snapshot(ROOT)
    ...                      # the tests run
    changed = differences(before, snapshot(ROOT))   # ["added media/480p15/en/X.mp4", ...]

A user runs the tests in the checkout where they render (README: `bash bootstrap.sh lecture`, then `bash
bootstrap.sh test`): a test that wrote into ``media/`` or ``.cache/`` would change their lecture, and one that read
them would pass or fail by what they rendered last. conftest.py takes a snapshot when the session starts and
compares at its end, on pytest-xdist's controller only (the workers run the tests; the controller's session spans
them all). Not a test module: conftest.py calls it, and tests/test_checkout_guard.py plants tests that trip it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["SKIPPED_NAMES", "SKIPPED_PATHS", "snapshot", "differences", "message"]

# Folders that change without a test touching the checkout: git's, the environment's, Python's bytecode, the
# caches of pytest and Hypothesis (its example database is its memory of failures, kept on purpose).
SKIPPED_NAMES = frozenset({".git", ".venv", "__pycache__", ".hypothesis", ".pytest_cache"})
SKIPPED_PATHS = ("web/node_modules",)  # relative to the checkout

Stamp = tuple[int, int]  # (size in bytes, modification time in ns)


def snapshot(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, Stamp]:
    """``{path relative to root (posix): (size, mtime_ns)}`` of every file under ``root``, not following links
    into folders, without SKIPPED_NAMES, SKIPPED_PATHS and the folders ``skip`` (absolute: e.g. a --basetemp
    inside the checkout). A file that vanishes during the walk is left out."""
    root = Path(root)
    skipped = {os.path.normpath(root / p) for p in SKIPPED_PATHS} | {os.path.normpath(p) for p in skip}
    found: dict[str, Stamp] = {}
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name in SKIPPED_NAMES or os.path.normpath(entry.path) in skipped:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found[Path(os.path.relpath(entry.path, root)).as_posix()] = (stat.st_size, stat.st_mtime_ns)
    return found


def differences(before: dict[str, Stamp], after: dict[str, Stamp]) -> list[str]:
    """One line per file that appeared, changed (size or mtime) or disappeared between two snapshots, sorted."""
    lines = [f"added {p}" for p in after.keys() - before.keys()]
    lines += [f"removed {p}" for p in before.keys() - after.keys()]
    lines += [f"changed {p}" for p in before.keys() & after.keys() if before[p] != after[p]]
    return sorted(lines, key=lambda line: line.split(" ", 1)[1])


def message(root: Path, lines: list[str], limit: int = 20) -> str:
    """The report at the end of a session that touched the checkout ``root``."""
    shown = [f"  {line}" for line in lines[:limit]]
    more = [f"  ... and {len(lines) - limit} more"] if len(lines) > limit else []
    return "\n".join([f"{len(lines)} file(s) of the checkout {root} changed during the tests (a test writes only "
                      "under tmp_path; unless you edited them meanwhile, find the test: tests/checkout_guard.py):",
                      *shown, *more])
