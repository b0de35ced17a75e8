"""He et al. 2015's CIFAR-family conv nets (§4.2), plain and residual, on 8x8 digit images.

Example::

    python -m simulation.kinds.mlp --set model=conv --set arch=residual --set depth=20 --set width=16

The net is a 3x3 conv stem (1 -> w channels, BatchNorm, activation), three stages of n blocks with
w, 2w, 4w channels on 8x8, 4x4 and 2x2 maps (stride 2 at the first block of stages 2 and 3), global
average pooling and a linear head: 6n + 2 weighted layers (n = 3, 9, 18 give ResNet-20, -56, -110).
A block's branch is F = conv3x3 -> BN -> activation -> conv3x3 -> BN; the residual block outputs
activation(shortcut(x) + F(x)) (He et al. 2015, Fig. 2), the plain block activation(F(x)).
Where a block halves the map and doubles the channels, the shortcut is option A (identity subsampled
with stride 2, new channels zero-padded: no parameters) or option B (1x1 conv with stride 2 + BN).

The blocks have the attributes the MLP blocks have (``branch``, ``shortcut``, ``width_in``,
``width_out``) and the net has ``stem``, ``blocks``, ``head`` and ``forward(x, skip=None)``, so
:class:`simulation.core.record.Recorder` and the training loop treat both alike. Inputs are float32
[B, 64] (flattened digits, as the MLP takes them) or [B, 1, 8, 8]; they are viewed as images.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["ConvBlock", "ConvPlainBlock", "ConvResidualBlock", "ConvNet", "OptionA", "ToImage", "build_conv_net",
           "conv_blocks_per_stage", "conv_stage_widths", "conv_param_count", "IMAGE_SHAPE", "STAGES"]

IMAGE_SHAPE = (1, 8, 8)  # sklearn digits: one grey channel, 8x8 pixels
STAGES = 3  # He et al. 2015, §4.2: three stages on maps of 32, 16, 8 pixels (here 8, 4, 2)
ACTIVATIONS = {"sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "relu": nn.ReLU}


def conv_blocks_per_stage(depth: int) -> int:
    """n for a net of ``depth`` = 6n + 2 weighted layers. Raises ValueError for another depth."""
    if depth < 8 or (depth - 2) % 6:
        raise ValueError(f"a conv net has 6n + 2 layers (8, 14, 20, ..., 56, ..., 110); got depth {depth}")
    return (depth - 2) // 6


def conv_stage_widths(width: int) -> tuple[int, int, int]:
    """Channels of the three stages: w, 2w, 4w (He et al. 2015, §4.2: 16, 32, 64)."""
    return (width, 2 * width, 4 * width)


def _norm(channels: int, norm: str) -> nn.Module:
    return nn.BatchNorm2d(channels) if norm == "batchnorm" else nn.Identity()


def _branch(c_in: int, c_out: int, stride: int, activation: str, norm: str) -> nn.Sequential:
    """F: [B, c_in, H, W] -> [B, c_out, H / stride, W / stride]; convs without bias (BN follows)."""
    bias = norm != "batchnorm"
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=bias), _norm(c_out, norm),
        ACTIVATIONS[activation](),
        nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=bias), _norm(c_out, norm),
    )


class OptionA(nn.Module):
    """Parameter-free shortcut (He et al. 2015, option A): x subsampled with ``stride``, then zero channels
    appended: [B, c_in, H, W] -> [B, c_out, H / stride, W / stride]."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.extra, self.stride = c_out - c_in, stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x[:, :, ::self.stride, ::self.stride]
        return nn.functional.pad(x, (0, 0, 0, 0, 0, self.extra))


def _shortcut(c_in: int, c_out: int, stride: int, norm: str, shortcut: str) -> nn.Module:
    """Identity where the shape is kept; else option A ("zero_pad") or B ("projection": 1x1 conv + BN)."""
    if c_in == c_out and stride == 1:
        return nn.Identity()
    if shortcut == "zero_pad":
        return OptionA(c_in, c_out, stride)
    return nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=norm != "batchnorm"), _norm(c_out, norm))


class ToImage(nn.Module):
    """[B, 64] or [B, 1, 8, 8] -> [B, 1, 8, 8] (a view: digits come flattened, as the MLP takes them)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(-1, *IMAGE_SHAPE)


class ConvBlock(nn.Module):
    """Two 3x3 convs; ``self.branch`` is F. ``width_in``/``width_out`` are channel counts."""

    def __init__(self, c_in: int, c_out: int, stride: int, activation: str, norm: str, shortcut: str) -> None:
        super().__init__()
        self.width_in, self.width_out, self.stride = c_in, c_out, stride
        self.branch = _branch(c_in, c_out, stride, activation, norm)
        self.out_act = ACTIVATIONS[activation]()


class ConvPlainBlock(ConvBlock):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_act(self.branch(x))


class ConvResidualBlock(ConvBlock):
    def __init__(self, c_in: int, c_out: int, stride: int, activation: str, norm: str, shortcut: str) -> None:
        super().__init__(c_in, c_out, stride, activation, norm, shortcut)
        self.shortcut = _shortcut(c_in, c_out, stride, norm, shortcut)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_act(self.shortcut(x) + self.branch(x))  # He et al. 2015, Fig. 2: ReLU after the sum


class ConvNet(nn.Module):
    """stem conv3x3 -> 3n blocks -> global average pool -> Linear head. Input [B, 64] or [B, 1, 8, 8],
    output logits [B, n_out]."""

    def __init__(self, block: type[ConvBlock], n: int, width: int, n_out: int, activation: str,
                 norm: str, shortcut: str) -> None:
        super().__init__()
        self.stem = nn.Sequential(ToImage(), nn.Conv2d(IMAGE_SHAPE[0], width, 3, padding=1, bias=norm != "batchnorm"),
                                  _norm(width, norm), ACTIVATIONS[activation]())
        blocks, c_in = [], width
        for stage, c_out in enumerate(conv_stage_widths(width)):
            for index in range(n):
                stride = 2 if stage > 0 and index == 0 else 1
                blocks.append(block(c_in, c_out, stride, activation, norm, shortcut))
                c_in = c_out
        self.blocks = nn.ModuleList(blocks)
        # Global average pooling is part of the head, so that head(h) maps the last block's output to logits.
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c_in, n_out))

    def forward(self, x: torch.Tensor, skip: int | None = None) -> torch.Tensor:
        """Logits [B, n_out]. ``skip=l`` deletes block l at test time (Veit et al. 2016): a residual block
        keeps its shortcut, a plain block passes its input on. Raises ValueError for a plain block that
        changes the shape."""
        h = self.stem(x)
        for index, block in enumerate(self.blocks):
            if index != skip:
                h = block(h)
            elif isinstance(block, ConvResidualBlock):
                h = block.shortcut(h)
            elif block.width_in != block.width_out or block.stride != 1:
                raise ValueError(f"cannot delete plain block {index}: it changes the shape")
        return self.head(h)


def build_conv_net(arch: str, depth: int, width: int, n_out: int, activation: str = "relu",
                   norm: str = "batchnorm", shortcut: str = "zero_pad", init_gain: float = 1.0) -> ConvNet:
    """A ``"plain"`` or ``"residual"`` conv net of ``depth`` = 6n + 2 layers with stage widths ``width``,
    2 ``width``, 4 ``width``. Conv weights are Kaiming-normal (fan_out, ReLU gain, He et al. 2015's
    PReLU paper, as torchvision's ResNets) times ``init_gain``. Raises ValueError for a bad name or depth."""
    blocks = {"plain": ConvPlainBlock, "residual": ConvResidualBlock}
    if arch not in blocks:
        raise ValueError(f"unknown arch {arch!r}; available: {', '.join(blocks)}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; available: {', '.join(ACTIVATIONS)}")
    if shortcut not in ("zero_pad", "projection"):
        raise ValueError(f"unknown shortcut {shortcut!r}; available: zero_pad, projection")
    model = ConvNet(blocks[arch], conv_blocks_per_stage(depth), width, n_out, activation, norm, shortcut)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
                module.weight.mul_(init_gain)
    return model


def conv_param_count(arch: str, depth: int, width: int, n_out: int, shortcut: str,
                     norm: str = "batchnorm") -> int:
    """Closed form of the number of parameters of :func:`build_conv_net` (for tests and the README).

    With n = (depth - 2) / 6, stage widths c1, c2, c3 = w, 2w, 4w, BatchNorm (2 c per BN, convs without
    bias): stem 9 c1 + 2 c1; a block c_in -> c_out has 9 c_in c_out + 9 c_out^2 + 4 c_out; a projection
    shortcut (option B) adds c_in c_out + 2 c_out at the two stage changes; head 4w n_out + n_out."""
    n = conv_blocks_per_stage(depth)
    c = conv_stage_widths(width)
    bn = 2 if norm == "batchnorm" else 0
    bias = 0 if norm == "batchnorm" else 1
    total = 9 * c[0] + (bn + bias) * c[0]  # stem
    for stage in range(STAGES):
        for index in range(n):
            c_in = c[stage - 1] if stage > 0 and index == 0 else c[stage]
            c_out = c[stage]
            total += 9 * c_in * c_out + 9 * c_out * c_out + 2 * (bn + bias) * c_out
            if arch == "residual" and c_in != c_out and shortcut == "projection":
                total += c_in * c_out + (bn + bias) * c_out
    return total + c[2] * n_out + n_out
