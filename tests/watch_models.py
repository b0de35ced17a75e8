"""Small residual models and batches for the watch tests (tests/test_watch.py), importable by a bare subprocess: only
torch, no project module.

Example::

    from watch_models import Net, batches
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Block", "Net", "batches", "train_steps", "ddp_worker"]


class Block(nn.Module):
    """A Pre-LN residual block: h = x + MLP(LayerNorm(x))."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class Net(nn.Module):
    """A small Pre-LN residual MLP on 12 features: stem, ``depth`` blocks h = x + F(x), dropout, head (5 classes)."""

    def __init__(self, width: int = 16, depth: int = 3, classes: int = 5, dropout: float = 0.0) -> None:
        super().__init__()
        self.stem = nn.Linear(12, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for block in self.blocks:
            h = block(h)
        return self.head(self.drop(h))


def batches(steps: int, accumulation: int, batch: int = 6, seed: int = 1) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    """``steps`` lists of ``accumulation`` micro-batches (x float32 [batch, 12], y int64 [batch] in 0..4), seeded."""
    g = torch.Generator().manual_seed(seed)
    return [[(torch.randn(batch, 12, generator=g), torch.randint(0, 5, (batch,), generator=g))
             for _ in range(accumulation)] for _ in range(steps)]


def train_steps(model: torch.nn.Module, path, micro: list, every: int = 1, rank: int = 0, world: int = 1) -> None:
    """SGD steps of ``model`` on ``micro`` (one (x, y) per step; rank r of ``world`` takes its share of the rows),
    recorded by watch into ``path`` (with the update size)."""
    import torch.nn.functional as F

    from residual_lecture import watch

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(model, path, every=every, update_ratio=True) as rec:
        for x, y in micro:
            share = len(x) // world
            x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            rec.step(opt, loss=loss)
            opt.step()
            opt.zero_grad()


def ddp_worker(rank: int, world: int, path: str, rendezvous: str) -> None:
    """One rank of a DistributedDataParallel run on CPU (gloo): Net seeded 0, 3 steps of batches(3, 1, batch=8)."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(Net())
        train_steps(model, path, [m[0] for m in batches(3, 1, batch=8)], rank=rank, world=world)
    finally:
        dist.destroy_process_group()
