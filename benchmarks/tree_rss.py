"""Peak resident memory of a command's whole process tree, sampled with psutil (Linux, macOS).

Example::

    python -m benchmarks.tree_rss -- python render.py render IdentityHighway -q l -o /tmp/m

Prints the wall time, the peak of the tree's summed RSS, and the largest RSS any one process of the tree
reached (with its command line), as JSON. The sum counts pages shared between processes (Python's and
Manim's libraries) once per process, so it is an upper bound of what the tree holds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil

from benchmarks.process_tree import processes, rss

__all__ = ["measure"]


def measure(command: list[str], interval: float = 0.05) -> dict:
    """Run ``command`` to its end; {"seconds", "returncode", "peak_tree_rss", "peak_process_rss",
    "peak_process"} (bytes)."""
    started = time.perf_counter()
    proc = subprocess.Popen(command)
    peak_tree, peak_one, peak_name = 0, 0, ""
    while proc.poll() is None:
        tree = processes(proc.pid)
        if not tree:
            break
        total = 0
        for p in tree:
            mem = rss(p)
            if mem is None:
                continue
            total += mem
            if mem > peak_one:
                try:
                    peak_one, peak_name = mem, " ".join(p.cmdline())[:160]
                except psutil.Error:
                    peak_one = mem
        peak_tree = max(peak_tree, total)
        time.sleep(interval)
    return {"seconds": round(time.perf_counter() - started, 2), "returncode": proc.wait(),
            "peak_tree_rss": peak_tree, "peak_process_rss": peak_one, "peak_process": peak_name}


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv = argv[argv.index("--") + 1:]
    if not argv:
        print(__doc__)
        return 2
    result = measure(argv)
    result["peak_tree_mib"] = round(result["peak_tree_rss"] / 2**20, 1)
    result["peak_process_mib"] = round(result["peak_process_rss"] / 2**20, 1)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
