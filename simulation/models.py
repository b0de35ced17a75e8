"""Plain and residual MLPs with the same blocks; the only difference is the shortcut.

Example::

    python -c "from simulation.models import build_model; print(build_model('residual', 64, 32, 4, 10, 'relu'))"

A block's residual branch is F = Linear -> [BatchNorm] -> activation -> Linear [-> BatchNorm].
The plain block outputs h = F(h); the residual block outputs h = h + F(h): a clean identity path with
nothing after the addition (He et al. 2016, "Identity Mappings in Deep Residual Networks", Fig. 1b).
Where a block changes the width, the identity cannot be added as is: the residual block adds
W_s h instead, a learned projection (He et al. 2015, eq. 2 and option B), or h padded with zeros
(option A).

The residual block's addition has three variants (each needs ``arch="residual"``): a shortcut scaled by a
constant, h = lambda x + F(x), and the two gates of He et al. 2016 (§3.1-3.2, Fig. 2b-2d, Table 1); and two
ways to start a branch at zero without normalisation: ReZero's h = x + a F(x) with a learned a = 0
(Bachlechner et al. 2020, eq. 3) and Fixup's rescaled init (Zhang, Dauphin & Ma 2019, §3, rules 1-3).
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from . import config
from .config import block_widths

__all__ = ["Block", "PlainBlock", "ResidualBlock", "MLP", "ZeroPad", "Scale", "build_model", "make_branch",
           "fixup_scale", "ACTIVATIONS"]

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


class Scale(nn.Module):
    """Parameter-free shortcut x -> lambda x [B, width] (He et al. 2016, §3.1 "constant scaling", Fig. 2b)."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x

    def extra_repr(self) -> str:
        return f"scale={self.scale:g}"


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
    """h = shortcut(x) + F(x); with ``shortcut_scale`` lambda != 1: lambda x + F(x); with a ``gate``
    g = sigmoid(W_g x + b_g) (b_g starts at ``gate_bias``): (1 - g) x + g F(x) ("exclusive") or
    (1 - g) x + F(x) ("shortcut_only"); with ``residual_init`` "rezero" or "fixup": x + a F(x), a learned
    scalar that starts at 0 (ReZero) or 1 (Fixup's multiplier)."""

    def __init__(self, width_in: int, width_out: int, activation: str, norm: str,
                 shortcut: str = "projection", shortcut_scale: float = 1.0, gate: str = "none",
                 gate_bias: float = 0.0, residual_init: str = "none") -> None:
        super().__init__(width_in, width_out, activation, norm, shortcut)
        self.shortcut = make_shortcut(width_in, width_out, norm, shortcut)
        if shortcut_scale != 1.0:
            self.shortcut = nn.Sequential(self.shortcut, Scale(shortcut_scale)) if width_in != width_out \
                else Scale(shortcut_scale)
        self.gate_kind = gate
        if gate != "none":
            self.gate = nn.Linear(width_in, width_out)  # the paper's 1x1 conv, here a Linear
            with torch.no_grad():
                self.gate.bias.fill_(gate_bias)
        if residual_init != "none":
            self.alpha = nn.Parameter(torch.tensor(0.0 if residual_init == "rezero" else 1.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The shortcut is the identity (dh_out/dh_in = 1 + dF/dx) except where the width changes or it is scaled
        # (lambda + dF/dx) or gated.
        if self.gate_kind == "none":
            branch = self.branch(x)
            return self.shortcut(x) + (self.alpha * branch if hasattr(self, "alpha") else branch)
        g = torch.sigmoid(self.gate(x))
        branch = self.branch(x)
        return (1 - g) * self.shortcut(x) + (g * branch if self.gate_kind == "exclusive" else branch)


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


def fixup_scale(depth: int, layers: int = 2) -> float:
    """Fixup's factor L^(-1/(2m-2)) for the branch layers but the last (Zhang et al. 2019, §3, rule 2), with
    L residual branches of m layers each; our branches have m = 2 Linear layers: L^(-1/2)."""
    return float(depth) ** (-1.0 / (2 * layers - 2))


def build_model(arch: str, n_in: int, width: int, depth: int, n_out: int, activation: str,
                norm: str = "none", init_gain: float = 1.0, stages: int = 1,
                shortcut: str = "projection", shortcut_scale: float = 1.0, gate: str = "none",
                gate_bias: float = 0.0, residual_init: str = "none") -> MLP:
    """Build a ``"plain"`` or ``"residual"`` MLP of ``depth`` blocks in ``stages`` stages (width doubles at
    each later stage; see :func:`simulation.config.block_widths`). Block Linear weights (projections and
    gates included) are scaled by ``init_gain`` after PyTorch's default init (Kaiming-uniform with a = sqrt(5):
    Var w = 1 / (3 fan_in), so ``init_gain = sqrt(6)`` gives He et al. 2015's Var w = 2 / fan_in).
    ``shortcut_scale``, ``gate``, ``gate_bias`` and ``residual_init`` shape the residual addition (see
    :class:`ResidualBlock`); ``residual_init="fixup"`` then applies Fixup's rules 1-2 (Zhang et al. 2019,
    §3): the last Linear of every branch and the head start at zero, the branch's other Linear weights are
    scaled by :func:`fixup_scale` (rule 3's scalar multiplier is ``alpha``; our Linear layers keep their own
    biases in place of its scalar biases). Raises ValueError for an unknown name."""
    blocks = {"plain": PlainBlock,
              "residual": functools.partial(ResidualBlock, shortcut_scale=shortcut_scale, gate=gate,
                                            gate_bias=gate_bias, residual_init=residual_init)}
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
    if residual_init == "fixup" and arch == "residual":
        _fixup(model, depth)
    return model


@torch.no_grad()
def _fixup(model: MLP, depth: int) -> None:
    """Zhang et al. 2019, §3: rule 1 (the head and each branch's last layer at zero), rule 2 (the other
    branch layers times L^(-1/(2m-2)))."""
    for block in model.blocks:
        linears = [m for m in block.branch if isinstance(m, nn.Linear)]
        for layer in linears[:-1]:
            layer.weight.mul_(fixup_scale(depth, len(linears)))
        linears[-1].weight.zero_()
        linears[-1].bias.zero_()
    model.head.weight.zero_()
    model.head.bias.zero_()
