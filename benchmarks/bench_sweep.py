"""Wall time of one sweep on a local Dask cluster with 1 and with 2 workers, their ratio, and a small sweep
run in this process against a local cluster (which is where simulation.sweep.LOCAL_MAX_WORK comes from).

Example::

    python benchmarks/bench_sweep.py              # 6 runs, 3-7 interleaved rounds
    python benchmarks/bench_sweep.py --runs 4 --steps 50

Every timing starts with a fresh cluster (its start-up is part of what a user waits for) and an empty
cache. Rounds are interleaved with a rotating order (benchmarks.measure): the figures are the median of
per-round ratios, their interquartile range and the number of rounds. Target for the speed-up: >= 1.5 on
2 cores (2.0 is ideal on 2 free cores).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import Figure, Target, compare, format_table  # noqa: E402
from simulation.config import RunConfig  # noqa: E402
from simulation.sweep import run_sweep, sweep_work  # noqa: E402

SPEEDUP_TARGET = Target(">=", 1.5)


def sweep_configs(runs: int, steps: int = 100) -> list[RunConfig]:
    """A depth-sweep-like set: residual and plain ReLU + BatchNorm MLPs of 20 blocks, distinct seeds."""
    return [RunConfig(arch=("plain", "residual")[i % 2], activation="relu", norm="batchnorm", depth=20,
                      steps=steps, batch_size=128, lr=0.05, seed=i) for i in range(runs)]


def small_configs() -> list[RunConfig]:
    """A small run set (below LOCAL_MAX_WORK): what most lecture scenes need."""
    return [RunConfig(arch=arch, depth=10, steps=200) for arch in ("plain", "residual")]


def timed(configs: list[RunConfig], **kwargs) -> float:
    """Wall seconds of ``run_sweep(configs)`` into an empty cache."""
    previous = os.environ.get("RESIDUAL_CACHE")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["RESIDUAL_CACHE"] = cache
        try:
            started = time.perf_counter()
            run_sweep(configs, progress=False, **kwargs)
            return time.perf_counter() - started
        finally:
            if previous is None:
                os.environ.pop("RESIDUAL_CACHE", None)
            else:
                os.environ["RESIDUAL_CACHE"] = previous


def worker_speedup(runs: int = 6, steps: int = 100, min_rounds: int = 3, max_rounds: int = 7) -> dict[str, Figure]:
    """``{"speed-up": 1-worker wall / 2-worker wall per round, "2 workers": its inverse, "1 worker": raw s}``."""
    logging.getLogger("distributed").setLevel(logging.ERROR)  # the nanny warns on every cluster shut-down
    big = sweep_configs(runs, steps)
    figs = compare({"1 worker": lambda: timed(big, scheduler=None, workers=1, here=False),
                    "2 workers": lambda: timed(big, scheduler=None, workers=2, here=False)},
                   baseline="1 worker", targets={"2 workers": Target("<=", 1 / SPEEDUP_TARGET.bound)},
                   min_rounds=min_rounds, max_rounds=max_rounds, warmup=0)
    ratio = figs["2 workers"]
    figs["speed-up"] = Figure([1 / r for r in ratio.samples], SPEEDUP_TARGET, "x", ratio.loads,
                              f"{runs} runs, {sum(map(sweep_work, big))} block-steps")
    return figs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--max-rounds", type=int, default=7)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    figs = worker_speedup(args.runs, args.steps, max_rounds=max(3, args.max_rounds))
    small = compare({"here": lambda: timed(small_configs(), scheduler="local"),
                     "cluster": lambda: timed(small_configs(), scheduler=None, workers=2, here=False)},
                    baseline="here", min_rounds=3, max_rounds=3, warmup=0)
    print(format_table([(f"sweep of {args.runs} runs, 1 -> 2 workers speed-up", figs["speed-up"]),
                        ("small set: local cluster / in this process", small["cluster"])]))
    print(f"1 worker: median {figs['1 worker'].median:.1f} s per sweep")


if __name__ == "__main__":
    main()
