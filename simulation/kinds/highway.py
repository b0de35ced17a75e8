"""Highway networks (Srivastava, Greff & Schmidhuber 2015) beside their plain and residual twins, on digits.

Example::

    python -m simulation.kinds.highway --set arch=highway --set depth=20

The worked example of a run kind (docs/developers/adding-a-kind-of-run.md): a config class
(:class:`simulation.config.HighwayConfig`), this trainer, one ``register_kind`` entry in :mod:`simulation.runs`.

Every block has one layer H(x) = activation(W_H x + b_H) (Srivastava et al. 2015, eq. 1) and keeps the width:

- ``plain``: h = H(x);
- ``residual``: h = x + H(x) (He et al. 2015, with a one-layer branch);
- ``highway``: h = T(x) H(x) + (1 - T(x)) x, T(x) = sigmoid(W_T x + b_T) (eq. 3), the transform gate; b_T starts
  at ``gate_bias`` (negative: §2.2, "-1 to -3"), so at initialisation each block mostly carries x.

Training, the data, the recorder and the lesion test are the MLP's (:class:`simulation.kinds.mlp.MLPTask`): the blocks
have its ``branch`` (H) / ``shortcut`` shape and the net its ``stem``, ``blocks``, ``head`` and ``forward(x, skip)``.
The highway blocks add a hook point ``block.<l>.gate`` (T(x)) and one array, ``gate_mean``.
"""

from __future__ import annotations

import sys

import numpy as np
import torch
from torch import nn

from ..config import HighwayConfig
from ..data import Dataset, load_dataset
from ..loop import main as loop_main, train
from ..memory import highway_memory
from ..models import ACTIVATIONS
from ..core.record import HookPoint, Recorder, reduce_by_shape
from ..trace import Trace
from .mlp import MLPTask

__all__ = ["HighwayBlock", "HighwayNet", "HighwayRecorder", "HighwayTask", "run", "main"]


class HighwayBlock(nn.Module):
    """One block on [B, width]: ``branch`` = H (Linear -> activation); ``arch`` "residual" adds an identity
    ``shortcut``; "highway" adds ``gate`` = T (Linear -> sigmoid, bias ``gate_bias``) and mixes H and x by T."""

    def __init__(self, arch: str, width: int, activation: str, gate_bias: float) -> None:
        super().__init__()
        self.arch, self.width_in, self.width_out = arch, width, width
        self.branch = nn.Sequential(nn.Linear(width, width), ACTIVATIONS[activation]())
        if arch != "plain":
            self.shortcut = nn.Identity()
        if arch == "highway":
            self.gate = nn.Sequential(nn.Linear(width, width), nn.Sigmoid())
            with torch.no_grad():
                self.gate[0].bias.fill_(gate_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.arch == "plain":
            return self.branch(x)
        if self.arch == "residual":
            return x + self.branch(x)
        t = self.gate(x)
        return t * self.branch(x) + (1 - t) * x

    def lesioned(self, x: torch.Tensor) -> torch.Tensor:
        """The block deleted at test time (Veit et al. 2016): x (the carry path; a plain block passes x on)."""
        return x


class HighwayNet(nn.Module):
    """stem Linear(n_in, width) -> ``depth`` :class:`HighwayBlock` s -> head Linear(width, n_out): logits [B, n_out]."""

    def __init__(self, config: HighwayConfig, n_in: int, n_out: int) -> None:
        super().__init__()
        self.stem = nn.Linear(n_in, config.width)
        self.blocks = nn.ModuleList(HighwayBlock(config.arch, config.width, config.activation, config.gate_bias)
                                    for _ in range(config.depth))
        self.head = nn.Linear(config.width, n_out)

    def forward(self, x: torch.Tensor, skip: int | None = None) -> torch.Tensor:
        """Logits [B, n_out]; ``skip=l`` deletes block l (its input passes on unchanged)."""
        h = self.stem(x)
        for index, block in enumerate(self.blocks):
            h = block.lesioned(h) if index == skip else block(h)
        return self.head(h)


class HighwayRecorder(Recorder):
    """The MLP :class:`~simulation.core.record.Recorder` plus, for highway blocks, the point ``block.<l>.gate`` and the
    statistic ``gate_mean`` [depth]: the mean of T(x) over the batch and the units (NaN for a block without a
    gate). ``grad_norm`` of a highway block counts W_H and W_T."""

    DTYPES = {**Recorder.DTYPES, "gate_mean": np.float32}

    def hook_points(self) -> list[HookPoint]:
        return super().hook_points() + [HookPoint(f"block.{index}.gate", block.gate, "gate", index)
                                        for index, block in enumerate(self.blocks) if hasattr(block, "gate")]

    def _clear(self) -> None:
        super()._clear()
        self._gates: dict[int, torch.Tensor] = {}

    def _statistics(self) -> dict[str, np.ndarray]:
        row = super()._statistics()
        row["gate_mean"] = np.full(len(self.blocks), np.nan)
        for index, (mean,) in reduce_by_shape(self._gates, lambda s: s.flatten(1).mean(1, keepdim=True)).items():
            row["gate_mean"][index] = mean
        return row

    def _on_gate(self, index: int, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        self._gates[index] = output.detach()


class HighwayTask(MLPTask):
    """:class:`~simulation.kinds.mlp.MLPTask` with :class:`HighwayNet` and :class:`HighwayRecorder` on digits."""

    config: HighwayConfig  # type: ignore[assignment]
    memory = staticmethod(highway_memory)

    def load_data(self) -> Dataset:
        return load_dataset("digits", seed=self.config.seed)

    def build_model(self) -> HighwayNet:
        return HighwayNet(self.config, self.data.n_features, self.data.n_classes)

    def recorder(self) -> HighwayRecorder:
        return HighwayRecorder(self.model)


def run(config: HighwayConfig, progress: bool | None = None) -> Trace:
    """Train ``config`` and return its :class:`Trace`: the MLP's arrays (:func:`simulation.kinds.mlp.run`; per record
    and block ``grad_norm``, ``out_grad_norm``, ``act_norm`` ...) and ``gate_mean`` float32 [T, depth]."""
    return train(HighwayTask, config, progress)


def main(argv: list[str] | None = None) -> int:
    """``python -m simulation.kinds.highway [--set key=value ...]``: train one run, print its summary as JSON."""
    return loop_main(HighwayTask, HighwayConfig, argv, prog="python -m simulation.kinds.highway")


if __name__ == "__main__":
    sys.exit(main())
