"""Cost of recording (recorder / bare training-step time), the time to train every experiment, memory.

Example::

    python -m benchmarks.bench_simulation            # both figures (the full set trains for minutes)
    python -m benchmarks.bench_simulation --quick    # only the step-time ratio
    python -m benchmarks.bench_simulation --memory   # only the memory guard: estimate vs measured peak

The step-time ratio is benchmarks/bench_recorder.py's MLP figure (the representative config: degradation's
20-block residual ReLU + BatchNorm net, recorded every 10 steps), measured in interleaved rounds through
benchmarks/measure.py: the median ratio, its interquartile range and the rounds. Target: ratio <= 1.05.
The full-set time is wall-clock.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path



def full_experiment_set() -> tuple[float, dict[str, float], int]:
    """Train every run of every experiment at its defaults into an empty cache: (total seconds,
    seconds per experiment, number of distinct runs). Runs shared by experiments train once."""
    from simulation.cache import get_traces
    from simulation.experiments import EXPERIMENTS, build_runs

    per_experiment, seen = {}, set()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["RESIDUAL_CACHE"] = cache
        started = time.perf_counter()
        for name in EXPERIMENTS:
            t0 = time.perf_counter()
            configs = list(build_runs(name).values())
            get_traces(configs, progress=False)
            seen.update(c.digest() for c in configs)
            per_experiment[name] = time.perf_counter() - t0
        total = time.perf_counter() - started
    return total, per_experiment, len(seen)


# Sizes for the memory figure: each dominated by another part of simulation.memory.estimate.
MEMORY_SIZES = [
    {"width": 2048, "depth": 4, "steps": 2},
    {"width": 256, "depth": 40, "norm": "batchnorm", "activation": "relu", "arch": "residual", "batch_size": 512,
     "steps": 2},
    {"width": 1024, "depth": 6, "optimizer": "adam", "arch": "residual", "steps": 2},
    {"kind": "transformer", "width": 128, "depth": 3, "ffn_width": 512, "batch_size": 64, "seq_len": 32, "steps": 2,
     "init_batches": 1},
]


def memory_figures() -> None:
    """Estimate and measured peak RSS of each of MEMORY_SIZES, each in a fresh interpreter."""
    import json
    import subprocess

    for config in MEMORY_SIZES:
        out = subprocess.run([sys.executable, "-m", "simulation", "--measure", json.dumps(config)],
                             cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, check=True)
        f = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"memory {json.dumps(config):<110} estimate {f['estimate'] / 1e6:7.1f} MB  peak "
              f"{f['peak'] / 1e6:7.1f} MB  ratio {f['estimate'] / f['peak']:.2f}  (target 0.5-2)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the step-time ratio")
    parser.add_argument("--memory", action="store_true", help="only the memory estimate vs the measured peak")
    parser.add_argument("--max-rounds", type=int, default=15, help="cap of the interleaved rounds")
    args = parser.parse_args()
    if args.memory:
        memory_figures()
        return

    from benchmarks.bench_recorder import overhead
    from benchmarks.measure import format_table
    from benchmarks.yardstick import in_yardsticks, measure

    yard = measure()  # the machine index, in the same run as the figures below
    print(yard, flush=True)

    figs = overhead("mlp", max_rounds=args.max_rounds)
    print(format_table([("recorder / bare, mlp", figs["recorder"]),
                        ("  + held-out test error", figs["recorder+test"]),
                        ("  TensorBoard histograms / bare", figs["tensorboard"])], yard))
    if args.quick:
        return
    total, per_experiment, count = full_experiment_set()
    for name, seconds in per_experiment.items():
        print(f"  {name:<18} {in_yardsticks(seconds, yard)}")
    print(f"full default experiment set: {count} runs in {in_yardsticks(total, yard)}")


if __name__ == "__main__":
    main()
