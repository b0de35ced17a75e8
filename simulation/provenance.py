"""The hash of the simulation code that shapes a run, part of every trace digest (torch-free).

Example::

    python -c "from simulation.provenance import source_hash, run_sources; print(source_hash(), run_sources())"

Every module of the ``simulation`` package counts, except those listed in :data:`NOT_RUN_SHAPING`, which
cannot change a recorded number (the cache, the experiment table, whose configs are digested field by field,
file I/O, the memory guard, the sweep driver, the run events, which only say when a run started and ended, the
run keys, the table of run kinds, whose one run-shaping entry, the trainer of each kind, every digest hashes by
itself). A new module counts by default, so forgetting to list it can
only cost a retrain, never a stale trace.

What is hashed is each module's syntax tree with docstrings removed (``ast.dump``): editing a comment, a
docstring or the layout of a file keeps every digest; editing code, even a constant, changes all of them.
The tree's text depends on the Python version, so another Python also re-keys the cache (as another torch
would change the numbers anyway).
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

__all__ = ["source_hash", "run_sources", "NOT_RUN_SHAPING", "code_fingerprint"]

PACKAGE = Path(__file__).resolve().parent
NOT_RUN_SHAPING = frozenset({"__init__.py", "__main__.py", "atomic_io.py", "cache.py", "events.py", "experiments.py",
                             "memory.py", "runkeys.py", "runs.py", "seeds.py", "sweep.py"})


def run_sources(package: Path = PACKAGE) -> list[Path]:
    """The modules whose code shapes a run, sorted by name."""
    return sorted(p for p in package.glob("*.py") if p.name not in NOT_RUN_SHAPING)


def code_fingerprint(text: str) -> str:
    """The code of one module without comments, docstrings or layout, as text (``ast.dump``)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False)


@functools.cache
def source_hash(package: Path = PACKAGE) -> str:
    """16 hex chars of SHA-256 over the name and :func:`code_fingerprint` of every :func:`run_sources` file."""
    h = hashlib.sha256()
    for path in run_sources(package):
        h.update(path.name.encode() + b"\0" + code_fingerprint(path.read_text(encoding="utf-8")).encode() + b"\0")
    return h.hexdigest()[:16]
