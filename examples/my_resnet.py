"""A small residual network as a user would write it: the model the README's "Your own network" trains.

Example::

    python render.py train --model examples/my_resnet.py:build --set data=digits-image
    python render.py render GradientFlowOverTraining --model examples/my_resnet.py:build --set data=digits-image

Each ``Block`` adds its input to the output of two 3x3 convolutions (He et al. 2015, Fig. 2); where a stage
doubles the channels and halves the map, the shortcut is a 1x1 projection with BatchNorm (eq. 2, option B).
The tool finds the six additions ``stages.0.0`` ... ``stages.2.1`` by itself and trains the same network without
them (the plain twin) for comparison.
"""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, channels_in: int, channels_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels_out)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels_out)
        self.shortcut = nn.Identity()
        if stride != 1 or channels_in != channels_out:
            self.shortcut = nn.Sequential(nn.Conv2d(channels_in, channels_out, 1, stride, bias=False),
                                          nn.BatchNorm2d(channels_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))  # the residual addition: F(x) + x


class SmallResNet(nn.Module):
    def __init__(self, channels: int = 1, width: int = 16, blocks_per_stage: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        stages, w = [], width
        for s in range(3):
            w_out = width * 2 ** s
            stages.append(nn.Sequential(*[Block(w if i == 0 else w_out, w_out, 2 if s and i == 0 else 1)
                                          for i in range(blocks_per_stage)]))
            w = w_out
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(w, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stages(self.stem(x))
        return self.head(h.mean((2, 3)))


def build(width: int = 16, blocks_per_stage: int = 2, channels: int = 1, classes: int = 10) -> nn.Module:
    """The factory that ``--model examples/my_resnet.py:build`` calls; ``--set model.width=8`` sets ``width``."""
    return SmallResNet(channels, width, blocks_per_stage, classes)
