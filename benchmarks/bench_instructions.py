"""Recorder overhead in instructions: the bare loop and the recorded loop of bench_recorder under callgrind.

Example::

    python -m benchmarks.bench_instructions                # MLP, conv net, Transformer: ~25 min on one core
    python -m benchmarks.bench_instructions --only mlp --steps 40

Time ratios on a shared 2-core machine move by several per cent from round to round (another process, the memory
layout of a fresh model); the number of instructions a run executes does not: the same command gives the same count
to ~0.01 % (two runs of the same 20-step MLP: 666,252,672 and 666,163,406), whatever else the machine does
(Valgrind's callgrind counts every instruction of the process in user space, as codspeed and iai-callgrind do for
CI benchmarks). What it does not see: the cost of cache and branch-predictor misses and of time in the kernel, so
it is a floor under the time ratio (and the time ratio is in bench_recorder.py, the target's own figure).

Each variant runs in its own ``valgrind --tool=callgrind --instr-atstart=no`` process, with instrumentation
switched on (``callgrind_control -i on``) over the training steps only, as bench_recorder times them:

- ``bare``: ``bench_recorder``'s plain PyTorch loop.
- ``recorder``: ``simulation.loop.train`` with the hook recorder and the per-step curves; the held-out test passes
  of the record steps are switched out, as bench_recorder leaves them out of its recorder figure.

Needs Valgrind (Debian ``valgrind``, installed by ``bash bootstrap.sh setup``); prints one line when it is missing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TARGET = 1.05
VARIANTS = ("bare", "recorder")
_COLLECTED = re.compile(r"Collected\s*:\s*([\d,]+)")


def _instrument(on: bool) -> None:
    """Switch callgrind's instrumentation of this process on or off (returns after callgrind answered)."""
    subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def child(variant: str, model: str, steps: int | None) -> None:
    """Run ``variant`` of ``model`` inside callgrind, instrumented over its training steps only."""
    import torch

    from benchmarks import bench_recorder
    from simulation.loop import train

    task_class, config = bench_recorder.MODELS[model]
    if steps is not None:
        config = config.replace(steps=steps)
    if variant == "bare":
        bench_recorder._loop(task_class, config, None, around=_instrument)
        return

    class Counted(task_class):
        def before_training(self, recorder):
            super().before_training(recorder)
            _instrument(True)

        def test_error(self):
            _instrument(False)
            try:
                return super().test_error()
            finally:
                _instrument(True)

        def final_arrays(self, diverged):
            _instrument(False)
            return super().final_arrays(diverged)

    torch.set_num_threads(1)
    train(Counted, config, progress=False)


def count(variant: str, model: str, steps: int | None) -> int:
    """Instructions of ``variant``'s training steps (a callgrind run of this file in child mode)."""
    with tempfile.TemporaryDirectory(prefix="bench-callgrind-") as folder:
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--cache-sim=no",
                   f"--callgrind-out-file={folder}/callgrind.out", sys.executable, __file__,
                   "--child", variant, "--only", model]
        if steps is not None:
            command += ["--steps", str(steps)]
        env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
        if done.returncode != 0:
            raise RuntimeError(f"callgrind run of {variant} {model} failed:\n{done.stderr[-2000:]}")
        found = _COLLECTED.findall(done.stderr)
        if not found:
            raise RuntimeError(f"no instruction count in callgrind's output:\n{done.stderr[-2000:]}")
        return int(found[-1].replace(",", ""))


def available() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


def counts(model: str, steps: int | None = None) -> tuple[int, int]:
    """(bare, recorder) instructions of ``model``'s training steps (``steps``: bench_recorder's by default)."""
    return count("bare", model, steps), count("recorder", model, steps)


def main(argv: list[str] | None = None) -> int:
    from benchmarks import bench_recorder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=list(bench_recorder.MODELS), action="append")
    parser.add_argument("--steps", type=int, help="training steps (default: bench_recorder's config)")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.only[0], args.steps)
        return 0
    if not available():
        print("valgrind is not installed (bash bootstrap.sh setup installs it: apt valgrind)", file=sys.stderr)
        return 1
    print(f"{'model':12s} | {'bare, instr/step':>16s} | {'recorder, instr/step':>20s} | ratio | target <= {TARGET}")
    for model in args.only or bench_recorder.MODELS:
        steps = args.steps or bench_recorder.MODELS[model][1].steps
        bare, recorded = counts(model, args.steps)
        ratio = recorded / bare
        print(f"{model:12s} | {bare / steps:16,.0f} | {recorded / steps:20,.0f} | {ratio:.3f} | "
              f"{'pass' if ratio <= TARGET else 'FAIL'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
