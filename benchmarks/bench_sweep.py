"""Wall time of a depth sweep on a local Dask cluster with 1 and with 2 workers, their ratio, the cluster's own
start-up, and a small sweep run in this process against a local cluster (which is where
simulation.sweep.LOCAL_MAX_WORK comes from).

Example::

    python -m benchmarks.bench_sweep              # DepthSweep's default run set (12 runs), 3-7 interleaved rounds
    python -m benchmarks.bench_sweep --runs 6 --steps 100      # a synthetic set: 6 MLPs of 20 blocks instead

The default sweep is what ``render.py render DepthSweep`` trains with its defaults: plain and residual MLPs of
depth 2-56 and conv nets of depth 8 and 20, 300 steps each (~40 CPU s on one free core, uneven run sizes, as
a real sweep has). Every timing starts with a fresh cluster (its start-up is part of what a user waits for) and
an empty cache; the start-up (workers spawned and torch imported on each) is also timed on its own. Rounds are
interleaved with a rotating order (benchmarks.measure): the figures are the median of per-round ratios, their
interquartile range and the number of rounds. Target for the speed-up: >= 1.5 on 2 cores (2.0 is ideal on 2
free cores).
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time


from benchmarks.measure import Figure, Target, compare, format_table
from simulation.config import RunConfig
from simulation.cache import run_sweep
from simulation.sweep import sweep_work

SPEEDUP_TARGET = Target(">=", 1.5)


def sweep_configs(runs: int, steps: int = 100) -> list[RunConfig]:
    """A depth-sweep-like set: residual and plain ReLU + BatchNorm MLPs of 20 blocks, distinct seeds."""
    return [RunConfig(arch=("plain", "residual")[i % 2], activation="relu", norm="batchnorm", depth=20,
                      steps=steps, batch_size=128, lr=0.05, seed=i) for i in range(runs)]


def depth_sweep_configs() -> list[RunConfig]:
    """The run set of the DepthSweep scene with its default parameters (simulation.experiments)."""
    from simulation.experiments import build_runs

    return list(build_runs("depth_sweep", {}).values())


def cluster_start(workers: int = 2) -> float:
    """Wall seconds to start a local cluster of ``workers`` single-threaded worker processes and import torch
    on each (what a sweep on a fresh cluster pays before its first run), then shut it down (not timed)."""
    from distributed import Client, LocalCluster

    started = time.perf_counter()
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    try:
        client.run(_import_torch)
        return time.perf_counter() - started
    finally:
        client.close()
        cluster.close()


def _import_torch() -> str:
    import torch

    return torch.__version__


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


def worker_speedup(runs: int | None = None, steps: int = 100, min_rounds: int = 3,
                   max_rounds: int = 7) -> dict[str, Figure]:
    """``{"speed-up": 1-worker wall / 2-worker wall per round, "2 workers": its inverse, "1 worker": raw s}``
    for DepthSweep's default run set, or with ``runs`` for :func:`sweep_configs` (``runs``, ``steps``)."""
    logging.getLogger("distributed").setLevel(logging.ERROR)  # the nanny warns on every cluster shut-down
    big = depth_sweep_configs() if runs is None else sweep_configs(runs, steps)
    figs = compare({"1 worker": lambda: timed(big, scheduler=None, workers=1, here=False),
                    "2 workers": lambda: timed(big, scheduler=None, workers=2, here=False)},
                   baseline="1 worker", targets={"2 workers": Target("<=", 1 / SPEEDUP_TARGET.bound)},
                   min_rounds=min_rounds, max_rounds=max_rounds, warmup=0)
    ratio = figs["2 workers"]
    what = "DepthSweep's default runs" if runs is None else "MLPs of 20 blocks"
    figs["speed-up"] = Figure([1 / r for r in ratio.samples], SPEEDUP_TARGET, "x", ratio.loads,
                              f"{len(big)} runs ({what}), {sum(map(sweep_work, big))} block-steps")
    return figs


def start_figure(repeats: int = 3, workers: int = 2) -> Figure:
    """Wall seconds of :func:`cluster_start`, ``repeats`` times."""
    from benchmarks.measure import load

    samples, loads = [], []
    for _ in range(repeats):
        samples.append(cluster_start(workers))
        loads.append(load())
    return Figure(samples, None, "s", loads, f"{workers} workers, torch imported on each")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=None,
                        help="time N synthetic MLP runs instead of DepthSweep's default run set")
    parser.add_argument("--steps", type=int, default=100, help="steps of each synthetic run (with --runs)")
    parser.add_argument("--max-rounds", type=int, default=7)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from benchmarks.yardstick import in_yardsticks, measure

    yard = measure()  # the machine index, in the same run as the figures below
    print(yard, flush=True)
    figs = worker_speedup(args.runs, args.steps, max_rounds=max(3, args.max_rounds))
    start = start_figure()
    small = compare({"here": lambda: timed(small_configs(), scheduler="local"),
                     "cluster": lambda: timed(small_configs(), scheduler=None, workers=2, here=False)},
                    baseline="here", min_rounds=3, max_rounds=3, warmup=0)
    print(format_table([("sweep, 1 -> 2 workers speed-up", figs["speed-up"]),
                        ("local cluster start, wall", start),
                        ("small set: local cluster / in this process", small["cluster"])], yard))
    print(f"1 worker: median {in_yardsticks(figs['1 worker'].median, yard)} per sweep ({figs['speed-up'].note})")


if __name__ == "__main__":
    main()
