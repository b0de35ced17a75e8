"""Recorder overhead: our recorded training loop, a bare loop and a TensorBoard histogram peer, interleaved.

Example::

    python -m benchmarks.bench_recorder                 # MLP, conv net, Transformer; adaptive repeats
    python -m benchmarks.bench_recorder --quick --only mlp

Three variants train the same model from the same seed on the same batches with the same optimiser, and each
is timed over its training steps only (CPU seconds of this process, ``time.process_time``; training uses one
thread; model building, data loading and what a trace measures after training are outside the timing):

- ``bare``: a plain PyTorch loop, ``zero_grad / loss.backward() / step`` (the Transformer also sets its
  warm-up learning rate): what a user writes with no logging at all.
- ``recorder``: :func:`simulation.loop.train` as every trace is made: the hook recorder on every block, the
  per-step loss, error and gradient-norm curves, full statistics every ``record_every`` steps; the held-out
  test error the loop also takes every ``record_every`` steps is timed apart and left out of this figure
  (it is an evaluation a user's loop would run too, not a cost of recording), and reported with it as
  ``+ held-out test error``.
- ``tensorboard``: the bare loop plus what a user would pick instead: a hook on every parameter's gradient that
  writes a ``SummaryWriter.add_histogram`` of it on every record step (the W&B ``watch(log="gradients")``
  pattern), and the loss as ``add_scalar`` every step; the writer is flushed and closed inside the timing.

Each run's cost is estimated from its record cycles (``record_every`` steps, one recorded step each): the median
cycle's CPU time times the number of cycles, plus the last cycle as measured (it holds the final record). A cycle
holds all of the recorder's costs, so the estimate counts them, while a cycle slowed by something outside the
run (another process, the host) does not move it; the plain totals are reported beside it (``... total`` rows).
Target: recorder / bare <= 1.05 (issue 11); for a user's own network (``resnet18``: torchvision's ResNet-18 on
3x32x32 digits; ``gpt2``: a 2-layer Hugging Face GPT-2 on the reverse task; issue 20) <= 1.10. Rounds are interleaved with a rotating order (benchmarks.measure).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


import torch
import torch.nn.functional as F

from benchmarks.measure import Figure, Target, compare, format_table
from simulation.config import RunConfig, TransformerConfig
from simulation.loop import record_steps, train
from simulation.kinds.mlp import ConvTask, MLPTask
from simulation.kinds.transformer import TransformerTask
from simulation.config import UserModelConfig
from simulation.kinds.user_model import UserTask, logits_of, loss_and_error

TARGET = Target("<=", 1.05)
USER_TARGET = Target("<=", 1.10)  # a user's own network (issue 20): found additions, a TorchFunctionMode while recording

# The representative configs: degradation's 20-block residual ReLU + BatchNorm MLP, its conv ResNet-20
# (option A), and the layernorm experiment's Pre-LN encoder-decoder; each recorded every 10 steps.
MODELS = {
    "mlp": (MLPTask, RunConfig(arch="residual", activation="relu", norm="batchnorm", depth=20, batch_size=128,
                               lr=0.05, record_every=10, steps=200)),
    "conv": (ConvTask, RunConfig(model="conv", arch="residual", activation="relu", norm="batchnorm", depth=20,
                                 width=16, shortcut="zero_pad", batch_size=128, lr=0.1, record_every=10, steps=60)),
    "transformer": (TransformerTask, TransformerConfig(task="reverse", norm="pre_ln", depth=6, width=32, steps=100,
                                                       batch_size=16, lr=5e-3, warmup_steps=60, record_every=10,
                                                       init_batches=1)),
}
QUICK_STEPS = {"mlp": 10, "conv": 4, "transformer": 6, "resnet18": 4, "gpt2": 6}
# A user's own network (issue 20): torchvision's ResNet-18 on the digits upsampled to 3x32x32, and a 2-layer Hugging
# Face GPT-2 (width 32) on the reverse task; both recorded at every residual addition (simulation.kinds.user_model).
USER_MODELS = {
    "resnet18": (UserTask, UserModelConfig(spec="torchvision.models:resnet18", args='{"num_classes": 10}',
                                           data="digits-image32", batch_size=16, steps=40, record_every=10)),
    "gpt2": (UserTask, UserModelConfig(spec=str(Path(__file__).resolve().parent.parent / "examples" / "tiny_gpt2.py")
                                       + ":build", data="reverse", batch_size=16, steps=100, record_every=10)),
}


class CycleClock:
    """CPU time (``time.process_time``) of each record cycle of a run: :meth:`mark` at the start of every step
    (a step that is a multiple of ``every`` opens a cycle), :meth:`close` at the end; ``excluded`` seconds (the
    held-out test passes so far) are left out of the cycle they fall in."""

    def __init__(self, every: int):
        self.every, self.marks = every, []

    def mark(self, step: int, excluded: float = 0.0) -> None:
        if step % self.every == 0:
            self.marks.append(time.process_time() - excluded)

    def close(self, excluded: float = 0.0) -> None:
        self.marks.append(time.process_time() - excluded)

    def estimate(self) -> float:
        """Median cycle x the full cycles before the last, plus the last cycle as measured (seconds)."""
        cycles = [b - a for a, b in zip(self.marks, self.marks[1:])]
        if len(cycles) < 2:
            return sum(cycles)
        return statistics.median(cycles[:-1]) * (len(cycles) - 1) + cycles[-1]

    def total(self) -> float:
        return self.marks[-1] - self.marks[0]


def _timed(task_class):
    """``task_class`` with a stopwatch over its training steps (entered recorder, after before_training,
    until final_arrays), and record-cycle clocks with and without the held-out test passes."""

    class Timed(task_class):
        elapsed = evaluation = float("nan")
        cycles = cycles_with_test = None

        def before_training(self, recorder):
            super().before_training(recorder)
            type(self).evaluation = 0.0
            type(self).cycles = CycleClock(self.config.record_every)
            type(self).cycles_with_test = CycleClock(self.config.record_every)
            self._started = time.process_time()

        def batch(self, step):
            type(self).cycles.mark(step, type(self).evaluation)
            type(self).cycles_with_test.mark(step)
            return super().batch(step)

        def test_error(self):
            started = time.process_time()
            try:
                return super().test_error()
            finally:
                type(self).evaluation += time.process_time() - started

        def final_arrays(self, diverged):
            type(self).elapsed = time.process_time() - self._started
            type(self).cycles.close(type(self).evaluation)
            type(self).cycles_with_test.close()
            return super().final_arrays(diverged)

    Timed.__name__ = f"Timed{task_class.__name__}"
    return Timed


def recorded(task_class, config) -> dict[str, float]:
    """CPU seconds of the training steps of ``simulation.loop.train``: ``recorder`` (hooks, statistics and
    per-step curves, the held-out test passes left out) and ``recorder+test`` (all of it)."""
    timed = _timed(task_class)
    train(timed, config, progress=False)
    return {"recorder": timed.cycles.estimate(), "recorder+test": timed.cycles_with_test.estimate(),
            "recorder total": timed.elapsed - timed.evaluation}


def _bare_step(task, step: int, batch) -> torch.Tensor:
    """One user-written step on ``task``'s model and optimiser: the loss, after backward (no update)."""
    if isinstance(task, TransformerTask):
        for group in task.opt.param_groups:
            group["lr"] = float(task._curves["lr_curve"][step])
        src, tgt_in, tgt = batch
        task.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(task.model(src, tgt_in).flatten(0, 1), tgt.flatten())
    elif isinstance(task, UserTask):
        x, y = batch
        task.opt.zero_grad(set_to_none=True)
        loss = loss_and_error(logits_of(task.model(x)), y)[0]
    else:
        x, y = batch
        task.opt.zero_grad(set_to_none=True)
        loss = task.loss_fn(task.model(x), y)
    loss.backward()
    return loss


def _loop(task_class, config, writer_dir: str | None, around=None) -> tuple[float, float]:
    """CPU seconds of ``config.steps`` bare steps, (record-cycle estimate, total); with ``writer_dir``, plus
    TensorBoard histograms. ``around(True)`` / ``around(False)`` is called just before the first step and
    after the last (bench_instructions switches callgrind's counting with it)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(config.seed)
        task = task_class(config)
        task.model.train()
        if isinstance(task, MLPTask):
            for p in task.params:  # MLPTask points .grad into one flat buffer; a user's loop does not
                p.grad = None
        wanted = set(record_steps(config))
        writer, handles, state = None, [], {"step": -1}
        if writer_dir is not None:
            from torch.utils.tensorboard import SummaryWriter

            writer = SummaryWriter(writer_dir)

            def watch(name):
                def hook(grad):
                    if state["step"] in wanted:
                        writer.add_histogram(f"gradients/{name}", grad, state["step"])
                return hook

            handles = [p.register_hook(watch(name)) for name, p in task.model.named_parameters()]
        clock = CycleClock(config.record_every)
        if around is not None:
            around(True)
        for step in range(config.steps):
            clock.mark(step)
            state["step"] = step
            batch = task.batch(step)
            loss = _bare_step(task, step, batch)
            if writer is not None:
                writer.add_scalar("loss", loss.item(), step)
            task.opt.step()
        if writer is not None:
            writer.close()
        clock.close()
        if around is not None:
            around(False)
        for h in handles:
            h.remove()
        return clock.estimate(), clock.total()
    finally:
        torch.set_num_threads(threads)


def bare(task_class, config) -> dict[str, float]:
    estimate, total = _loop(task_class, config, None)
    return {"bare": estimate, "bare total": total}


def tensorboard(task_class, config) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-tb-") as folder:
        estimate, total = _loop(task_class, config, folder)
    return {"tensorboard": estimate, "tensorboard total": total}


def overhead(model: str, quick: bool = False, min_rounds: int = 5, max_rounds: int = 21,
             peer: bool = True) -> dict[str, Figure]:
    """``{"recorder": Figure, "tensorboard": Figure, "bare": Figure}`` for ``model`` (a key of MODELS):
    recorder / bare and tensorboard / bare per round, interleaved."""
    task_class, config = {**MODELS, **USER_MODELS}[model]
    if quick:
        config = config.replace(steps=QUICK_STEPS[model])
    variants = {"bare": lambda: bare(task_class, config), "recorder": lambda: recorded(task_class, config)}
    if peer:
        variants["tensorboard"] = lambda: tensorboard(task_class, config)
    target = USER_TARGET if model in USER_MODELS else TARGET
    figs = compare(variants, baseline="bare", targets={"recorder": target}, min_rounds=min_rounds,
                   max_rounds=max_rounds, warmup=0 if quick else 1)
    # the plain totals, as a ratio to the bare loop's own total in the same round
    bare_total = figs.pop("bare total")
    for name in [n for n in figs if n.endswith(" total")]:
        fig = figs[name]
        figs[name] = Figure([a / b for a, b in zip(fig.samples, bare_total.samples)], None, "x", fig.loads)
    return figs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs, 3 rounds")
    parser.add_argument("--only", choices=[*MODELS, *USER_MODELS], action="append")
    parser.add_argument("--no-peer", action="store_true", help="leave out the TensorBoard peer")
    args = parser.parse_args()
    from benchmarks.yardstick import in_yardsticks, measure

    yard = measure()  # the machine index, in the same run as the figures below
    print(yard, flush=True)
    rows = []
    for model in args.only or [*MODELS, *USER_MODELS]:
        figs = overhead(model, args.quick, *((3, 3) if args.quick else (5, 21)), peer=not args.no_peer)
        rows.append((f"recorder overhead, {model}", figs["recorder"]))
        rows.append((f"  plain totals, {model}", figs["recorder total"]))
        rows.append((f"  + held-out test error, {model}", figs["recorder+test"]))
        if "tensorboard" in figs:
            rows.append((f"tensorboard peer, {model}", figs["tensorboard"]))
        bare_ms = figs["bare"].median / {**MODELS, **USER_MODELS}[model][1].steps * 1e3
        print(f"{model}: bare step {bare_ms:.2f} ms (median, {yard.of(bare_ms / 1e3) * 1e3:.3f} "
              "milli-yardsticks)", file=sys.stderr)
    print(format_table(rows, yard))


if __name__ == "__main__":
    main()
