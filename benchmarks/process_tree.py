"""The one process-tree sampler of the benchmarks: a process and all its descendants, read with psutil.

Example::

    from benchmarks.process_tree import processes, rss, tree_rss
    peak = max(peak, tree_rss(proc.pid))

Used by :mod:`benchmarks.tree_rss`, :mod:`benchmarks.bench_timeline` and :mod:`benchmarks.run_all`. A process
that ends between the walk and the read is skipped (psutil raises for it), never an error.
"""

from __future__ import annotations

import psutil

__all__ = ["processes", "rss", "tree_rss"]


def processes(root: int | psutil.Process) -> list[psutil.Process]:
    """``root`` (a pid or a Process) followed by all its descendants; empty once ``root`` is gone."""
    try:
        proc = root if isinstance(root, psutil.Process) else psutil.Process(root)
        return [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def rss(proc: psutil.Process) -> int | None:
    """Resident bytes of ``proc``; None when it ended or cannot be read (psutil.Error)."""
    try:
        return proc.memory_info().rss
    except psutil.Error:
        return None


def tree_rss(root: int | psutil.Process) -> int:
    """Resident bytes of ``root`` and all its descendants, summed (pages shared between processes count once
    per process: an upper bound); 0 once it is gone."""
    return sum(r for r in map(rss, processes(root)) if r is not None)
