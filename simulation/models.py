"""Plain and residual MLPs with the same blocks; the only difference is the shortcut.

Example::

    python -c "from simulation.models import build_model; print(build_model('residual', 64, 32, 4, 10, 'relu'))"

A block's residual branch is F = Linear -> [BatchNorm] -> activation -> Linear [-> BatchNorm].
The plain block outputs h = F(h); the residual block outputs h = h + F(h): a clean identity path with
nothing after the addition (He et al. 2016, "Identity Mappings in Deep Residual Networks", Fig. 1b).
Where a block changes the width, the identity cannot be added as is: the residual block adds
W_s h instead, a learned projection (He et al. 2015, eq. 2 and option B), or h padded with zeros
(option A).
"""

from __future__ import annotations

import torch
from torch import nn

from . import config
from .config import block_widths

__all__ = ["Block", "PlainBlock", "ResidualBlock", "MLP", "ZeroPad", "build_model", "make_branch", "ACTIVATIONS"]

# The module of each allowed activation (the names are defined once, in simulation.config).
ACTIVATIONS = dict(zip(config.ACTIVATIONS, (nn.Sigmoid, nn.Tanh, nn.ReLU), strict=True))
SHORTCUTS = config.SHORTCUTS


def make_branch(width_in: int, width_out: int, activation: str, norm: str) -> nn.Sequential:
    """F: [B, width_in] -> [B, width_out]."""
    layers: list[nn.Module] = [nn.Linear(width_in, width_out)]
    if norm == "batchnorm":
        layers.append(nn.BatchNorm1d(width_out))
    layers += [ACTIVATIONS[activation](), nn.Linear(width_out, width_out)]
    if norm == "batchnorm":
        layers.append(nn.BatchNorm1d(width_out))
    return nn.Sequential(*layers)


class ZeroPad(nn.Module):
    """Parameter-free shortcut [B, width_in] -> [B, width_out]: x followed by zeros (He 2015, option A)."""

    def __init__(self, width_in: int, width_out: int) -> None:
        super().__init__()
        self.extra = width_out - width_in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.pad(x, (0, self.extra))


def make_shortcut(width_in: int, width_out: int, norm: str, shortcut: str) -> nn.Module:
    """Identity where the widths agree; else the projection W_s (Linear without bias, [BatchNorm]) or
    zero padding."""
    if width_in == width_out:
        return nn.Identity()
    if shortcut == "zero_pad":
        return ZeroPad(width_in, width_out)
    layers: list[nn.Module] = [nn.Linear(width_in, width_out, bias=False)]
    if norm == "batchnorm":
        layers.append(nn.BatchNorm1d(width_out))
    return nn.Sequential(*layers)


class Block(nn.Module):
    """One block; ``self.branch`` is F. Subclasses decide how F meets the input."""

    def __init__(self, width_in: int, width_out: int, activation: str, norm: str,
                 shortcut: str = "projection") -> None:
        super().__init__()
        self.width_in, self.width_out = width_in, width_out
        self.branch = make_branch(width_in, width_out, activation, norm)


class PlainBlock(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.branch(x)


class ResidualBlock(Block):
    def __init__(self, width_in: int, width_out: int, activation: str, norm: str,
                 shortcut: str = "projection") -> None:
        super().__init__(width_in, width_out, activation, norm, shortcut)
        self.shortcut = make_shortcut(width_in, width_out, norm, shortcut)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The shortcut is the identity (dh_out/dh_in = 1 + dF/dx) except where the width changes.
        return self.shortcut(x) + self.branch(x)


class MLP(nn.Module):
    """stem Linear(in, width) -> ``depth`` blocks -> head Linear(last width, classes).

    Input float32 [B, n_in], output logits [B, n_out]. ``blocks`` is an nn.ModuleList so that a
    recorder can hook every block by index. ``widths`` gives (width in, width out) per block.
    """

    def __init__(self, block: type[Block], n_in: int, widths: list[tuple[int, int]], n_out: int,
                 activation: str, norm: str = "none", shortcut: str = "projection") -> None:
        super().__init__()
        self.stem = nn.Linear(n_in, widths[0][0])
        self.blocks = nn.ModuleList(block(w_in, w_out, activation, norm, shortcut) for w_in, w_out in widths)
        self.head = nn.Linear(widths[-1][1], n_out)

    def forward(self, x: torch.Tensor, skip: int | None = None) -> torch.Tensor:
        """Logits [B, n_out]. ``skip=l`` deletes block l at test time (Veit et al. 2016, §4): a residual
        block keeps only its shortcut, a plain block passes its input on unchanged. Raises ValueError
        for a plain block that changes the width (nothing could replace it)."""
        h = self.stem(x)
        for index, block in enumerate(self.blocks):
            if index != skip:
                h = block(h)
            elif isinstance(block, ResidualBlock):
                h = block.shortcut(h)
            elif block.width_in != block.width_out:
                raise ValueError(f"cannot delete plain block {index}: it changes the width")
        return self.head(h)


def build_model(arch: str, n_in: int, width: int, depth: int, n_out: int, activation: str,
                norm: str = "none", init_gain: float = 1.0, stages: int = 1,
                shortcut: str = "projection") -> MLP:
    """Build a ``"plain"`` or ``"residual"`` MLP of ``depth`` blocks in ``stages`` stages (width doubles at
    each later stage; see :func:`simulation.config.block_widths`). Block Linear weights (projections
    included) are scaled by ``init_gain`` after PyTorch's default init (Kaiming-uniform with a = sqrt(5):
    Var w = 1 / (3 fan_in), so ``init_gain = sqrt(6)`` gives He et al. 2015's Var w = 2 / fan_in).
    Raises ValueError for an unknown name."""
    blocks = {"plain": PlainBlock, "residual": ResidualBlock}
    if arch not in blocks:
        raise ValueError(f"unknown arch {arch!r}; available: {', '.join(blocks)}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; available: {', '.join(ACTIVATIONS)}")
    if shortcut not in SHORTCUTS:
        raise ValueError(f"unknown shortcut {shortcut!r}; available: {', '.join(SHORTCUTS)}")
    model = MLP(blocks[arch], n_in, block_widths(width, depth, stages), n_out, activation, norm, shortcut)
    if init_gain != 1.0:
        with torch.no_grad():
            for block in model.blocks:
                for module in block.modules():
                    if isinstance(module, nn.Linear):
                        module.weight.mul_(init_gain)
    return model
