"""Wall time of one sweep on a local Dask cluster with 1 and with 2 workers, their ratio, and a small sweep
run in this process against a local cluster (which is where simulation.sweep.LOCAL_MAX_WORK comes from).

Example::

    python benchmarks/bench_sweep.py              # 8 runs, 3 repeats, interleaved
    python benchmarks/bench_sweep.py --repeats 1 --runs 4

Every timing starts with a fresh cluster (its start-up is part of what a user waits for) and an empty
cache. Repeats are interleaved (1 worker, 2 workers, in-process, 1 worker, ...) so that load from other
programs on a shared machine falls on all of them alike; the median and the spread are printed.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulation.config import RunConfig  # noqa: E402
from simulation.sweep import run_sweep, sweep_work  # noqa: E402


def sweep_configs(runs: int) -> list[RunConfig]:
    """A depth-sweep-like set: residual and plain ReLU + BatchNorm MLPs of 20 blocks, distinct seeds."""
    return [RunConfig(arch=("plain", "residual")[i % 2], activation="relu", norm="batchnorm", depth=20,
                      steps=100, batch_size=128, lr=0.05, seed=i) for i in range(runs)]


def small_configs() -> list[RunConfig]:
    """A small run set (below LOCAL_MAX_WORK): what most lecture scenes need."""
    return [RunConfig(arch=arch, depth=10, steps=200) for arch in ("plain", "residual")]


def timed(configs: list[RunConfig], **kwargs) -> float:
    with tempfile.TemporaryDirectory() as cache:
        os.environ["RESIDUAL_CACHE"] = cache
        started = time.perf_counter()
        run_sweep(configs, progress=False, **kwargs)
        return time.perf_counter() - started


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values):6.1f} s  (min {min(values):.1f}, max {max(values):.1f}, n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    big, small = sweep_configs(args.runs), small_configs()
    times: dict[str, list[float]] = {k: [] for k in ("1 worker", "2 workers", "small here", "small cluster")}
    for _ in range(args.repeats):
        times["1 worker"].append(timed(big, scheduler=None, workers=1, here=False))
        times["2 workers"].append(timed(big, scheduler=None, workers=2, here=False))
        times["small here"].append(timed(small, scheduler="local"))
        times["small cluster"].append(timed(small, scheduler=None, workers=2, here=False))
    print(f"sweep of {len(big)} runs (work {sum(map(sweep_work, big))} block-steps), fresh local cluster each time:")
    for key in ("1 worker", "2 workers"):
        print(f"  {key:<10} {_spread(times[key])}")
    ratios = [a / b for a, b in zip(times["1 worker"], times["2 workers"])]
    print(f"  speed-up 1 -> 2 workers: median {statistics.median(ratios):.2f}x "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})  [ideal 2.00 on 2 free cores]")
    print(f"small set of {len(small)} runs (work {sum(map(sweep_work, small))} block-steps):")
    print(f"  in this process  {_spread(times['small here'])}")
    print(f"  local cluster    {_spread(times['small cluster'])}")
    ratios = [a / b for a, b in zip(times["small cluster"], times["small here"])]
    print(f"  cluster / in-process: median {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
