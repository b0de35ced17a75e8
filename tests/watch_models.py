"""Small residual models and batches for the watch tests (tests/test_watch.py), importable by a bare subprocess: only
torch, no project module.

Example::

    from watch_models import Net, batches
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Block", "Net", "batches"]


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
