"""Plain and residual MLPs with the same blocks; the only difference is the shortcut.

Example::

    python -c "from simulation.models import build_model; print(build_model('residual', 64, 32, 4, 10, 'relu'))"

A block's residual branch is F = Linear -> [BatchNorm] -> activation -> Linear [-> BatchNorm].
The plain block outputs h = F(h); the residual block outputs h = h + F(h): a clean identity path with
nothing after the addition (He et al. 2016, "Identity Mappings in Deep Residual Networks", Fig. 1b).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Block", "PlainBlock", "ResidualBlock", "MLP", "build_model", "ACTIVATIONS"]

ACTIVATIONS = {"sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "relu": nn.ReLU}


def make_branch(width: int, activation: str, norm: str) -> nn.Sequential:
    """F: [B, width] -> [B, width]."""
    layers: list[nn.Module] = [nn.Linear(width, width)]
    if norm == "batchnorm":
        layers.append(nn.BatchNorm1d(width))
    layers += [ACTIVATIONS[activation](), nn.Linear(width, width)]
    if norm == "batchnorm":
        layers.append(nn.BatchNorm1d(width))
    return nn.Sequential(*layers)


class Block(nn.Module):
    """One block; ``self.branch`` is F. Subclasses decide how F meets the input."""

    def __init__(self, width: int, activation: str, norm: str) -> None:
        super().__init__()
        self.branch = make_branch(width, activation, norm)


class PlainBlock(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.branch(x)


class ResidualBlock(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.branch(x)  # the identity shortcut: dh_out/dh_in = 1 + dF/dx


class MLP(nn.Module):
    """stem Linear(in, width) -> ``depth`` blocks -> head Linear(width, classes).

    Input float32 [B, n_in], output logits [B, n_out]. ``blocks`` is an nn.ModuleList so that a
    recorder can hook every block by index.
    """

    def __init__(self, block: type[Block], n_in: int, width: int, depth: int, n_out: int,
                 activation: str, norm: str = "none") -> None:
        super().__init__()
        self.stem = nn.Linear(n_in, width)
        self.blocks = nn.ModuleList(block(width, activation, norm) for _ in range(depth))
        self.head = nn.Linear(width, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def build_model(arch: str, n_in: int, width: int, depth: int, n_out: int, activation: str,
                norm: str = "none", init_gain: float = 1.0) -> MLP:
    """Build a ``"plain"`` or ``"residual"`` MLP; block Linear weights are scaled by ``init_gain``
    after PyTorch's default (Kaiming-uniform) init. Raises ValueError for an unknown name."""
    blocks = {"plain": PlainBlock, "residual": ResidualBlock}
    if arch not in blocks:
        raise ValueError(f"unknown arch {arch!r}; available: {', '.join(blocks)}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; available: {', '.join(ACTIVATIONS)}")
    model = MLP(blocks[arch], n_in, width, depth, n_out, activation, norm)
    if init_gain != 1.0:
        with torch.no_grad():
            for block in model.blocks:
                for module in block.modules():
                    if isinstance(module, nn.Linear):
                        module.weight.mul_(init_gain)
    return model
