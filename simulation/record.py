"""Recorder: a context manager that hooks every block of a model and keeps per-layer statistics.

Example::

    with Recorder(model) as rec:
        rec.arm()                  # record this step
        loss = loss_fn(model(x), y)
        loss.backward()
        row = rec.collect()        # dict of float arrays [depth]

Forward hooks read each block's input, branch output F(x) and output h; ``tensor.register_hook`` on
h gives dL/dh during backward. Full backward hooks are avoided on purpose: they break on in-place ops
such as ReLU(inplace=True) (pytorch#61519). Every handle is removed on exit, also after an exception.
Only statistics are kept (a few floats per layer per record), never whole tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["Recorder", "STAT_KEYS"]

# Statistics recorded per block, each one float per layer per record.
STAT_KEYS = ("act_mean", "act_std", "act_norm", "input_norm", "branch_norm", "branch_std",
             "grad_norm", "out_grad_norm", "nonfinite")


def _mean_row_norm(t: torch.Tensor) -> float:
    """Mean over examples of the L2 norm of each row of a [B, width] tensor."""
    return float(t.detach().flatten(1).norm(dim=1).mean())


class Recorder:
    """Hook the blocks ``model.blocks[0..depth-1]`` (each with a ``.branch`` submodule).

    Between :meth:`arm` and :meth:`collect` one forward and one backward pass are recorded.
    ``collect`` returns ``{key: float64 array [depth]}`` for every key of :data:`STAT_KEYS`;
    ``grad_norm`` is the L2 norm of dL/dW over all weight matrices of a block (biases and
    BatchNorm affine parameters excluded) and ``out_grad_norm`` the L2 norm of dL/dh over the batch.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.blocks = list(model.blocks)
        self.handles: list[Any] = []
        self.armed = False
        self._row: dict[str, np.ndarray] = {}

    # -- context manager -------------------------------------------------------------------
    def __enter__(self) -> "Recorder":
        for index, block in enumerate(self.blocks):
            self.handles.append(block.register_forward_hook(self._block_hook(index)))
            self.handles.append(block.branch.register_forward_hook(self._branch_hook(index)))
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def remove(self) -> None:
        """Remove every hook this recorder added (tensor hooks die with their tensors)."""
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        self.armed = False

    # -- recording --------------------------------------------------------------------------
    def arm(self) -> None:
        """Record the next forward/backward pass."""
        depth = len(self.blocks)
        self._row = {key: np.full(depth, np.nan) for key in STAT_KEYS}
        self._row["nonfinite"] = np.zeros(depth)
        self.armed = True

    def collect(self) -> dict[str, np.ndarray]:
        """Finish a recorded step (call after ``backward``) and return its statistics."""
        if not self.armed:
            raise RuntimeError("Recorder.collect() called without arm()")
        for index, block in enumerate(self.blocks):
            squares = 0.0
            for name, param in block.named_parameters():
                if param.grad is not None and param.ndim >= 2:
                    grad = param.grad.detach()
                    squares += float(grad.double().pow(2).sum())
                    self._row["nonfinite"][index] += int((~torch.isfinite(grad)).sum())
            self._row["grad_norm"][index] = squares ** 0.5
        self.armed = False
        return self._row

    def _block_hook(self, index: int):
        def hook(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
            if not self.armed:
                return
            row, h = self._row, output.detach()
            row["act_mean"][index] = float(h.mean())
            row["act_std"][index] = float(h.std())
            row["act_norm"][index] = _mean_row_norm(h)
            row["input_norm"][index] = _mean_row_norm(inputs[0])
            row["nonfinite"][index] += int((~torch.isfinite(h)).sum())
            if output.requires_grad:
                output.register_hook(self._grad_hook(index))

        return hook

    def _branch_hook(self, index: int):
        def hook(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
            if self.armed:
                self._row["branch_norm"][index] = _mean_row_norm(output)
                self._row["branch_std"][index] = float(output.detach().std())

        return hook

    def _grad_hook(self, index: int):
        def hook(grad: torch.Tensor) -> None:
            # Double precision so that norms of tiny gradients do not underflow in the square.
            self._row["out_grad_norm"][index] = float(grad.detach().double().norm())

        return hook
