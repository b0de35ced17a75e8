"""Cost of recording: instrumented / bare training-step time, and the time to train every experiment.

Example::

    python benchmarks/bench_simulation.py            # both figures (the full set trains for minutes)
    python benchmarks/bench_simulation.py --quick    # only the step-time ratio
    python benchmarks/bench_simulation.py --memory   # only the memory guard: estimate vs measured peak

The step-time ratio compares :func:`simulation.train.run` (recorder hooks on every block, loss, error
and gradient-norm checks every step, full statistics and a test-set pass every ``record_every``
steps) with a bare PyTorch loop over the same data, model, optimiser and batches. Fixed costs (data
loading, model building, the lesion and input-sweep passes after training) are cancelled by timing
two step counts and dividing the difference by the difference in steps. Target: ratio <= 1.10.
Times are CPU seconds of this process (``time.process_time``; training uses one thread), so that
other programs on a shared machine disturb them less; the full-set time is wall-clock.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from simulation.config import RunConfig  # noqa: E402
from simulation.data import load_dataset  # noqa: E402
from simulation.models import build_model  # noqa: E402
from simulation.train import make_optimizer, run  # noqa: E402

# Representative: the degradation experiment's 20-block residual ReLU + BatchNorm net, recorded every 10 steps.
REPRESENTATIVE = RunConfig(arch="residual", activation="relu", norm="batchnorm", depth=20, batch_size=128,
                           lr=0.05, record_every=10)


def bare_train(config: RunConfig, steps: int) -> float:
    """Seconds for ``steps`` optimiser steps of a plain PyTorch loop (no hooks, no checks)."""
    torch.manual_seed(config.seed)
    data = load_dataset(config.dataset, seed=config.seed)
    model = build_model(config.arch, data.n_features, config.width, config.depth, data.n_classes,
                        config.activation, config.norm, config.init_gain, config.stages, config.shortcut)
    opt = make_optimizer(config, list(model.parameters()))  # the same optimiser as run()
    loss_fn = nn.CrossEntropyLoss()
    batches = torch.Generator().manual_seed(config.seed + 1)
    model.train()
    started = time.process_time()
    for _ in range(steps):
        idx = torch.randint(len(data.x_train), (config.batch_size,), generator=batches)
        opt.zero_grad(set_to_none=True)
        loss_fn(model(data.x_train[idx]), data.y_train[idx]).backward()
        opt.step()
    return time.process_time() - started


def instrumented_run(config: RunConfig, steps: int) -> float:
    """Seconds for ``run(config)`` with ``steps`` steps (fixed costs included)."""
    started = time.process_time()
    run(config.replace(steps=steps), progress=False)
    return time.process_time() - started


def step_times(config: RunConfig, short: int, long: int, repeats: int) -> dict[str, float]:
    """Seconds per step: ``bare``, ``instrumented`` (recording every ``config.record_every`` steps) and
    ``unrecorded`` (hooks and per-step checks only: no record between the first and the last step).
    The measurements are interleaved and each is the minimum over ``repeats`` (other load on the
    machine only ever adds time)."""
    quiet = config.replace(record_every=10**6)
    times: dict[str, list[float]] = {"bare": [], "short": [], "long": [], "quiet_short": [], "quiet_long": []}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # run() trains on one thread; so does the bare loop
    try:
        instrumented_run(config, 2)  # warm up: imports, allocator, first-call costs
        for _ in range(repeats):
            times["bare"].append(bare_train(config, long - short))
            times["short"].append(instrumented_run(config, short))
            times["long"].append(instrumented_run(config, long))
            times["quiet_short"].append(instrumented_run(quiet, short))
            times["quiet_long"].append(instrumented_run(quiet, long))
    finally:
        torch.set_num_threads(threads)
    best = {key: min(values) for key, values in times.items()}
    return {"bare": best["bare"] / (long - short),
            "instrumented": (best["long"] - best["short"]) / (long - short),
            "unrecorded": (best["quiet_long"] - best["quiet_short"]) / (long - short)}


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
        out = subprocess.run([sys.executable, "-m", "simulation.memory", "--measure", json.dumps(config)],
                             cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, check=True)
        f = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"memory {json.dumps(config):<110} estimate {f['estimate'] / 1e6:7.1f} MB  peak "
              f"{f['peak'] / 1e6:7.1f} MB  ratio {f['estimate'] / f['peak']:.2f}  (target 0.5-2)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the step-time ratio")
    parser.add_argument("--memory", action="store_true", help="only the memory estimate vs the measured peak")
    parser.add_argument("--repeats", type=int, default=5, help="measurements per figure (minimum is kept)")
    args = parser.parse_args()
    if args.memory:
        memory_figures()
        return

    t = step_times(REPRESENTATIVE, short=20, long=220, repeats=args.repeats)
    print(f"config: {REPRESENTATIVE.arch} depth={REPRESENTATIVE.depth} width={REPRESENTATIVE.width} "
          f"{REPRESENTATIVE.activation}+{REPRESENTATIVE.norm} batch={REPRESENTATIVE.batch_size} "
          f"record_every={REPRESENTATIVE.record_every}  (CPU ms per step, min of {args.repeats})")
    print(f"bare step                       {t['bare'] * 1e3:8.3f} ms")
    print(f"instrumented step, no records   {t['unrecorded'] * 1e3:8.3f} ms   ratio {t['unrecorded'] / t['bare']:.3f}")
    print(f"instrumented step               {t['instrumented'] * 1e3:8.3f} ms   ratio "
          f"{t['instrumented'] / t['bare']:.3f}   (target <= 1.10)")
    if args.quick:
        return
    total, per_experiment, count = full_experiment_set()
    for name, seconds in per_experiment.items():
        print(f"  {name:<18} {seconds:7.1f} s")
    print(f"full default experiment set: {count} runs in {total:.1f} s")


if __name__ == "__main__":
    main()
