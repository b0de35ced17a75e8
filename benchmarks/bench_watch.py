"""Overhead of residual_lecture.watch in a user's loop, against a bare loop, wandb.watch and TensorBoard histograms.

Example::

    python -m benchmarks.bench_watch                           # ResNet-18 and GPT-2: recorded step, every=50
    python -m benchmarks.bench_watch --only resnet18 --every 10 --max-rounds 3
    python -m benchmarks.bench_watch --memory 10000            # host memory over 10,000 steps of a small model

Four variants train copies of one model (same initial weights, same batches, SGD with momentum) in one process,
interleaved round by round with a rotating order (benchmarks.measure.compare), each timed in CPU seconds of this
process (``time.process_time``; torch uses one thread):

- ``bare``: ``loss.backward(); opt.step(); opt.zero_grad()``, nothing recorded.
- ``watch``: the same loop inside ``watch(model, path, every=N)`` with ``rec.step(opt, loss=loss)`` each step (the
  defaults); ``watch-update``: the same with ``update_ratio=True`` (a copy of the blocks' weights at a recorded
  step, compared with them after its optimiser step).
- ``wandb``: ``wandb.watch(model, log="gradients", log_freq=N)`` in offline mode (``WANDB_MODE=offline``) and
  ``wandb.log({"loss": ...})`` every N steps (what commits the histograms).
- ``tensorboard``: every N steps one ``SummaryWriter.add_histogram`` per residual block (all of its parameters'
  gradients) and ``add_scalar`` of the loss; what a user writes by hand for one picture per block.

Two figures per model and variant, each the median over rounds of (variant / bare) with the interquartile range:
*recorded step* (N = 1: every step recorded; 3 steps a round) and *amortised* (N = ``--every``, default 50: one
cycle of N steps a round, the first recorded). Targets for watch: amortised <= 1.02, recorded step <= 1.10.

Models: torchvision's ResNet-18 (``num_classes=10``) on batches of 32 random 3x32x32 images; a Hugging Face GPT-2
from a ``GPT2Config`` (``--gpt2 small``: 4 layers, width 256, 4 heads, vocabulary 1000; ``--gpt2 default``: the
124M GPT2Config()) on 8 random sequences of 64 tokens. ``--memory STEPS``: the resident set size (psutil) of this
process while a small residual MLP trains STEPS steps under watch(every=1, update_ratio=True) (every step recorded and written), sampled
every tenth of the run.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.measure import Figure, Target, compare, format_table

RECORDED_TARGET = Target("<=", 1.10)
AMORTISED_TARGET = Target("<=", 1.02)
VARIANTS = ("bare", "watch", "watch-update", "wandb", "tensorboard")


# -- the models and their batches -------------------------------------------------------------------------

def resnet18() -> tuple[nn.Module, callable, list[str]]:
    """torchvision's ResNet-18 (10 classes), a batch maker (32 x 3 x 32 x 32, labels) and a loss."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    blocks = [name for name, _ in model.named_modules() if re.fullmatch(r"layer\d\.\d", name)]

    def batch(g: torch.Generator):
        return torch.randn(32, 3, 32, 32, generator=g), torch.randint(0, 10, (32,), generator=g)

    return model, batch, blocks


def gpt2(size: str) -> tuple[nn.Module, callable, list[str]]:
    """A Hugging Face GPT-2 from GPT2Config (``small`` or ``default``), 8 random sequences of 64 tokens."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config() if size == "default" else GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=1000,
                                                                n_positions=128)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    model.config.use_cache = False
    blocks = [f"transformer.h.{i}" for i in range(config.n_layer)]
    vocab = config.vocab_size

    def batch(g: torch.Generator):
        ids = torch.randint(0, vocab, (8, 64), generator=g)
        return ids, ids

    return model, batch, blocks


def loss_of(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = model(x)
    logits = out if isinstance(out, torch.Tensor) else out.logits
    if y.ndim == 2:  # next-token prediction
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), y[:, 1:].reshape(-1))
    return F.cross_entropy(logits, y)


# -- one variant: a model copy, its optimiser and what it records ---------------------------------------

class Runner:
    """One variant's model and loop; :meth:`cycle` trains ``n`` steps and returns their CPU seconds."""

    def __init__(self, variant: str, build, every: int, folder: Path) -> None:
        self.variant, self.every = variant, every
        self.model, self.batch, self.blocks = build()
        self.model.train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3, momentum=0.9)
        self.g = torch.Generator().manual_seed(1)
        self.step = 0
        self.rec = self.writer = self.run = None
        if variant in ("watch", "watch-update"):
            from residual_lecture import watch

            self.rec = watch(self.model, folder / f"{variant}-{every}.npz", every=every,
                             update_ratio=variant == "watch-update")
        elif variant == "wandb":
            import wandb

            # the global run: wandb.watch's gradient hooks log to wandb.run
            self.run = wandb.init(mode="offline", dir=str(folder), project="bench-watch",
                                  settings=wandb.Settings(console="off", silent=True))
            wandb.watch(self.model, log="gradients", log_freq=every)
        elif variant == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(folder / f"tb-{every}"))
            modules = dict(self.model.named_modules())
            self.block_params = [(name, [p for p in modules[name].parameters()]) for name in self.blocks]

    def cycle(self, n: int) -> float:
        batches = [self.batch(self.g) for _ in range(n)]
        start = time.process_time()
        for x, y in batches:
            loss = loss_of(self.model, x, y)
            loss.backward()
            recorded = self.step % self.every == 0
            if self.rec is not None:
                self.rec.step(self.opt, loss=loss)
            elif self.run is not None and recorded:
                self.run.log({"loss": float(loss.detach())}, step=self.step)  # commits the histograms
            elif self.writer is not None and recorded:
                for name, params in self.block_params:
                    grads = [p.grad.flatten() for p in params if p.grad is not None]
                    self.writer.add_histogram(f"grad/{name}", torch.cat(grads), self.step)
                self.writer.add_scalar("loss", float(loss.detach()), self.step)
            self.opt.step()
            self.opt.zero_grad()
            self.step += 1
        return time.process_time() - start

    def close(self) -> None:
        if self.rec is not None:
            self.rec.close()
        if self.run is not None:
            self.run.finish()
        if self.writer is not None:
            self.writer.close()


def measure(name: str, build, every: int, steps: int, folder: Path, variants, rounds: tuple[int, int],
            target: Target) -> dict[str, Figure]:
    """{variant: Figure of its cycle's CPU time / bare's}, ``steps`` steps a cycle, interleaved rounds."""
    runners = {v: Runner(v, build, every, folder) for v in variants}
    try:
        figures = compare({v: (lambda r=r: r.cycle(steps)) for v, r in runners.items()}, baseline="bare",
                          targets={v: target for v in ("watch", "watch-update") if v in runners}, min_rounds=rounds[0],
                          max_rounds=rounds[1], warmup=1)
    finally:
        for runner in runners.values():
            runner.close()
        del runners
        gc.collect()
    return figures


# -- host memory over a long run --------------------------------------------------------------------------

def memory(steps: int, folder: Path) -> list[tuple[int, float]]:
    """(step, RSS in MiB) every tenth of ``steps`` steps of a small residual MLP under watch(every=1)."""
    import psutil

    from residual_lecture import watch

    class Block(nn.Module):
        def __init__(self, w: int) -> None:
            super().__init__()
            self.f = nn.Sequential(nn.LayerNorm(w), nn.Linear(w, w), nn.GELU(), nn.Linear(w, w))

        def forward(self, x):
            return x + self.f(x)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), *[Block(32) for _ in range(4)], nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    process = psutil.Process()
    samples = []
    with watch(model, folder / "memory.npz", every=1, update_ratio=True) as rec:  # with the copy of the weights
        for step in range(steps):
            x, y = torch.randn(16, 16, generator=g), torch.randint(0, 4, (16,), generator=g)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            rec.step(opt, loss=loss)
            opt.step()
            opt.zero_grad()
            if (step + 1) % max(steps // 10, 1) == 0:
                samples.append((step + 1, process.memory_info().rss / 2 ** 20))
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_watch", description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("resnet18", "gpt2"), action="append", help="models to measure (default both)")
    parser.add_argument("--every", type=int, default=50, help="record every N steps for the amortised figure")
    parser.add_argument("--gpt2", choices=("small", "default"), default="small", help="the GPT2Config measured")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of " + ",".join(VARIANTS))
    parser.add_argument("--min-rounds", type=int, default=3)
    parser.add_argument("--max-rounds", type=int, default=7)
    parser.add_argument("--recorded-steps", type=int, default=3, help="steps per round of the recorded-step figure")
    parser.add_argument("--figures", default="recorded,amortised", help="which figures: recorded, amortised or both")
    parser.add_argument("--memory", type=int, default=0, metavar="STEPS", help="only the host-memory run, STEPS steps")
    args = parser.parse_args(argv)
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_SILENT", "true")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as tmp:
        folder = Path(tmp)
        if args.memory:
            samples = memory(args.memory, folder)
            print("step  RSS MiB")
            for step, rss in samples:
                print(f"{step:>6}  {rss:.1f}")
            print(f"growth from step {samples[0][0]} to {samples[-1][0]}: {samples[-1][1] - samples[0][1]:+.1f} MiB")
            return 0
        variants = [v for v in args.variants.split(",") if v]
        if "bare" not in variants:
            variants.insert(0, "bare")
        builds = {"resnet18": resnet18, "gpt2": lambda: gpt2(args.gpt2)}
        rows = []
        for name in args.only or list(builds):
            wanted = args.figures.split(",")
            for label, every, steps, target in (("recorded step", 1, args.recorded_steps, RECORDED_TARGET),
                                                (f"amortised, every={args.every}", args.every, args.every,
                                                 AMORTISED_TARGET)):
                if label.split(" ")[0].rstrip(",") not in wanted:
                    continue
                figures = measure(name, builds[name], every, steps, folder, variants,
                                  (args.min_rounds, args.max_rounds), target)
                rows.append((f"{name}: bare, s per {steps} steps", figures["bare"]))
                rows += [(f"{name} {label}: {v} / bare", figures[v]) for v in variants if v != "bare"]
                print(format_table(rows[-len(variants):]), flush=True)
        print()
        print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
