"""Recorder: a context manager that hooks every block of a model and keeps per-layer statistics.

Example::

    with Recorder(model) as rec:
        rec.arm()                  # record this step
        loss = loss_fn(model(x), y)
        loss.backward()
        row = rec.collect()        # dict of float arrays [depth]

Hook points are named (``block.3``, ``block.3.branch``, ``block.3.shortcut``; the Transformer recorder's
``decoder.2.ffn``...). Forward hooks read each block's input, branch output F(x), shortcut output and output h;
``tensor.register_hook`` on h gives dL/dh during backward. Full backward hooks are avoided on purpose:
they break on in-place ops such as ReLU(inplace=True) (pytorch#61519). Every handle is removed on exit,
also after an exception. Only statistics are kept (a few floats per layer per record), never whole
tensors. Hooks are lazy: they are added by :meth:`~HookRecorder.arm` and removed by
:meth:`~HookRecorder.collect`, so a step that is not recorded runs the model exactly as if no recorder
existed (PyTorch's fast module-call path, no Python call per module). An armed step holds references to
its block tensors until :meth:`Recorder.collect`, which reduces them to statistics with a few batched
operations (tensors of one shape are stacked) and lets them go.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import torch
from torch import nn

__all__ = ["HookPoint", "HookRecorder", "Recorder", "STAT_KEYS", "COUNT_KEYS", "by_shape", "reduce_by_shape", "moments",
           "row_norm", "tensor_norm", "output_and_branch_stats"]

# Statistics recorded per block, each one number per layer per record.
STAT_KEYS = ("act_mean", "act_std", "act_norm", "input_norm", "branch_norm", "branch_std", "shortcut_norm",
             "grad_norm", "out_grad_norm", "nonfinite", "nonfinite_act", "nonfinite_grad")
# Of those, the counts (stored as int64); the others are floats.
COUNT_KEYS = ("nonfinite", "nonfinite_act", "nonfinite_grad")

_F64 = torch.float64


def _nonfinite(t: torch.Tensor) -> torch.Tensor:
    return torch.logical_not(torch.isfinite(t)).sum()


def by_shape(tensors: dict[Any, torch.Tensor]) -> list[tuple[list[Any], torch.Tensor]]:
    """Group ``{key: tensor}`` by shape: [(keys, stack [n, *shape])]."""
    groups: dict[tuple[int, ...], list[Any]] = {}
    for key, t in tensors.items():
        groups.setdefault(tuple(t.shape), []).append(key)
    return [(keys, torch.stack([tensors[k] for k in keys])) for keys in groups.values()]


def reduce_by_shape(tensors: dict[Any, torch.Tensor], fn) -> dict[Any, list[float]]:
    """``{key: fn(stack)[row]}`` with ``fn``: stack [n, *shape] -> statistics [n, k]; ``fn`` may overwrite
    the stack (it is a fresh copy). Computed in the tensors' own precision (CPU reductions accumulate in
    float64), and again in float64 for a group whose results are non-finite, 0 or outside [1e-15, 1e15],
    where float32 squares underflow or overflow (a float32 norm of 1e-25s is 0)."""
    out: dict[Any, list[float]] = {}
    for keys, stack in by_shape(tensors):
        values = fn(stack)
        if stack.dtype != _F64:
            low, high = torch.aminmax(values.abs())  # NaN propagates: a NaN group is recomputed too
            if not (low.item() > 1e-15 and high.item() < 1e15):
                values = fn(torch.stack([tensors[k] for k in keys]).to(_F64))
        out.update(zip(keys, values.tolist()))
    return out


def moments(stack: torch.Tensor) -> torch.Tensor:
    """[n, B, width] -> [n, 3]: mean and std of all entries, mean over examples of the row L2 norm.
    Overwrites ``stack``."""
    norm = torch.linalg.vector_norm(stack.flatten(2), dim=2).mean(1)
    flat = stack.flatten(1)
    # Two passes (mean, then the sum of squared deviations): ~10x faster on CPU than torch.var_mean's
    # single-pass kernel here, the same to float rounding (the unbiased estimator, as torch.var). In place:
    # no temporary as large as the stack.
    mean = flat.mean(1, keepdim=True)
    deviation = flat.sub_(mean)
    var = deviation.mul_(deviation).sum(1) / max(flat.shape[1] - 1, 1)
    return torch.stack([mean[:, 0], var.sqrt(), norm], dim=1)


def row_norm(stack: torch.Tensor) -> torch.Tensor:
    """[n, B, width] -> [n, 1]: mean over examples of the row L2 norm."""
    return torch.linalg.vector_norm(stack.flatten(2), dim=2).mean(1, keepdim=True)


def tensor_norm(stack: torch.Tensor) -> torch.Tensor:
    """[n, ...] -> [n, 1]: L2 norm of each tensor."""
    return torch.linalg.vector_norm(stack.flatten(1), dim=1, keepdim=True)


def output_and_branch_stats(row: dict[str, np.ndarray], outputs: dict[int, torch.Tensor],
                            branches: dict[int, torch.Tensor]) -> None:
    """Fill ``act_mean``, ``act_std``, ``act_norm``, ``nonfinite_act`` (of each block's output h) and
    ``branch_std``, ``branch_norm`` (of its branch F(x)) in ``row`` from ``{block: tensor}``: tensors of one shape
    go through one stack, a few reductions for the whole network."""
    stats = reduce_by_shape({**{("h", i): t for i, t in outputs.items()},
                             **{("F", i): t for i, t in branches.items()}}, moments)
    for (kind, i), (mean, std, norm) in stats.items():
        if kind == "F":
            row["branch_std"][i], row["branch_norm"][i] = std, norm
            continue
        row["act_mean"][i], row["act_std"][i], row["act_norm"][i] = mean, std, norm
        if not math.isfinite(mean):  # the mean is finite iff every entry is (sums accumulate in float64)
            row["nonfinite_act"][i] = int(_nonfinite(outputs[i]))


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors are views of the same values."""
    return a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()


@dataclass(frozen=True)
class HookPoint:
    """A named place in a model where a recorder reads tensors, TransformerLens-style.

    ``name`` is dotted, e.g. ``block.3.branch`` or ``decoder.2.ffn``; ``kind`` picks the recorder's handler
    ``_on_<kind>(index, inputs, output)``; ``index`` is the position in the recorded arrays."""

    name: str
    module: nn.Module
    kind: str
    index: int


class HookRecorder:
    """Base of the recorders: named hook points, the arm/collect cycle, hook lifetime, row stacking.

    A subclass lists its :class:`HookPoint` s (:meth:`hook_points`), handles each kind in ``_on_<kind>``,
    keeps per-step state in :meth:`_clear` and turns it into one row ``{key: array}`` in :meth:`_statistics`;
    :attr:`DTYPES` gives the dtype each key is stored with in a trace.

    A context manager: forward hooks are added by :meth:`arm` (inside the context only) and removed by
    :meth:`collect`, and every one is removed on exit, also after an exception or when adding them fails
    half-way. Tensor hooks (:meth:`_watch_grad`, ``tensor.register_hook``) need no removal: they die with their
    tensors. A step that is not armed runs with no hook at all.
    """

    DTYPES: dict[str, Any] = {}
    layer_kind = "block"  # the kind of point whose names are the trace's ``layers``

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.points = self.hook_points()
        # Each point's forward hook and each index's gradient hook, built once per ``with`` block (arming a
        # step only registers them) and dropped on exit, so that no reference cycle outlives the block.
        self._hooks: list[tuple[nn.Module, Any]] = []
        self._grad_hooks: dict[int, Any] = {}
        self.handles: list[Any] = []
        self.armed = False
        self.entered = False
        self._clear()

    # -- what a subclass provides -------------------------------------------------------------
    def hook_points(self) -> list[HookPoint]:
        raise NotImplementedError

    def _clear(self) -> None:
        """Start fresh per-step state (called by arm, and after collect)."""

    def _statistics(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    # -- names --------------------------------------------------------------------------------
    def names(self, kind: str | None = None) -> list[str]:
        """Names of the hook points of ``kind`` (default: the layers), in array order."""
        return [p.name for p in self.points if p.kind == (kind or self.layer_kind)]

    def point(self, name: str) -> HookPoint:
        """The hook point called ``name``; KeyError lists the known names."""
        for p in self.points:
            if p.name == name:
                return p
        raise KeyError(f"no hook point {name!r}; known: {', '.join(p.name for p in self.points)}")

    # -- lifetime -----------------------------------------------------------------------------
    def __enter__(self) -> Self:
        self.entered = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
        self.entered = False

    def _add_hooks(self) -> None:
        if not self._hooks:
            self._hooks = [(point.module, self._forward_hook(point)) for point in self.points]
        try:
            for module, hook in self._hooks:
                self.handles.append(module.register_forward_hook(hook))
        except BaseException:
            self.remove()
            raise

    def _remove_hooks(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    def remove(self) -> None:
        """Remove every hook this recorder added and forget the armed step."""
        self._remove_hooks()
        self._hooks, self._grad_hooks = [], {}
        self.armed = False
        self._clear()

    def _forward_hook(self, point: HookPoint):
        handler = getattr(self, f"_on_{point.kind}")
        index = point.index

        def hook(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
            if self.armed:
                handler(index, inputs, output)

        return hook

    def _watch_grad(self, index: int, output: torch.Tensor) -> None:
        """Call ``self._on_grad(index, dL/d output)`` during backward."""
        if output.requires_grad:
            hook = self._grad_hooks.get(index)
            if hook is None:
                hook = self._grad_hooks[index] = functools.partial(self._on_grad, index)
            output.register_hook(hook)

    # -- one recorded step --------------------------------------------------------------------
    def arm(self) -> None:
        """Record the next forward/backward pass: adds the forward hooks (once, if not armed already).
        RuntimeError outside the ``with`` block, where no exit would remove them."""
        if not self.entered:
            raise RuntimeError(f"{type(self).__name__}.arm() called outside its with block")
        self._clear()
        if not self.handles:
            self._add_hooks()
        self.armed = True

    def collect(self) -> dict[str, np.ndarray]:
        """Finish a recorded step (call after ``backward``) and return its statistics."""
        if not self.armed:
            raise RuntimeError(f"{type(self).__name__}.collect() called without arm()")
        self._remove_hooks()  # the tensor hooks of this step have run: backward is done
        try:
            return self._statistics()
        finally:
            self._clear()
            self.armed = False

    def stack(self, rows: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """Rows of :meth:`collect` as trace arrays ``{key: [records, ...]}`` in the :attr:`DTYPES`."""
        return {key: np.stack([row[key] for row in rows]).astype(dtype, copy=False) for key, dtype in self.DTYPES.items()}


class Recorder(HookRecorder):
    """Hook the blocks ``model.blocks[0..depth-1]`` (each with a ``.branch`` and, if residual, a
    ``.shortcut`` submodule) at the points ``block.<l>``, ``block.<l>.branch``, ``block.<l>.shortcut``.

    Between :meth:`arm` and :meth:`collect` one forward and one backward pass are recorded.
    ``collect`` returns ``{key: array [depth]}`` for every key of :data:`STAT_KEYS` (float64; the
    :data:`COUNT_KEYS` hold integer counts). Per block l with input x, output h:

    - ``act_mean``, ``act_std``: mean and std of all entries of h; ``act_norm``, ``input_norm``,
      ``branch_norm``, ``shortcut_norm``: mean over examples of ||h||, ||x||, ||F(x)||, ||shortcut(x)||
      (``shortcut_norm`` = ||x|| for an identity shortcut, ||W_s x|| for a projection, 0 for a plain
      block, which has none); ``branch_std``: std of all entries of F(x) (He et al. 2015, Fig. 7).
    - ``grad_norm``: L2 norm of dL/dW over all weight matrices of the block (biases and BatchNorm
      affine parameters excluded); ``out_grad_norm``: L2 norm of dL/dh over the batch.
    - ``nonfinite_act``: NaN/inf entries of h; ``nonfinite_grad``: of dL/dh and of the weight gradients;
      ``nonfinite``: their sum.

    Statistics are computed in the tensors' precision and again in float64 wherever float32 squares
    of tiny or huge values would underflow or overflow, so a gradient of 1e-30 is recorded as such.
    """

    # float32 would flush gradient norms below ~1e-38 to 0: those two stay float64.
    DTYPES = {key: np.int64 if key in COUNT_KEYS else np.float64 if key in ("grad_norm", "out_grad_norm")
              else np.float32 for key in STAT_KEYS}

    def __init__(self, model: nn.Module) -> None:
        self.blocks = list(model.blocks)
        # An identity shortcut outputs its input: its norm is input_norm, no hook needed.
        self.identity = [isinstance(getattr(b, "shortcut", None), nn.Identity) for b in self.blocks]
        # The weight matrices of each block (biases and BatchNorm affine parameters are 1-D).
        self.weights = [[p for p in b.parameters() if p.ndim >= 2] for b in self.blocks]
        shapes: dict[tuple[int, ...], list[tuple[int, int]]] = {}
        for b, weights in enumerate(self.weights):
            for k, p in enumerate(weights):
                shapes.setdefault(tuple(p.shape), []).append((b, k))
        self._weight_groups = [(keys, [self.weights[b][k] for b, k in keys]) for keys in shapes.values()]
        super().__init__(model)

    def hook_points(self) -> list[HookPoint]:
        points = []
        for index, block in enumerate(self.blocks):
            points += [HookPoint(f"block.{index}", block, "block", index),
                       HookPoint(f"block.{index}.branch", block.branch, "branch", index)]
            if hasattr(block, "shortcut") and not self.identity[index]:
                points.append(HookPoint(f"block.{index}.shortcut", block.shortcut, "shortcut", index))
        return points

    def _clear(self) -> None:
        # The armed step's tensors, by block index; emptied by collect().
        self._inputs: dict[int, torch.Tensor] = {}
        self._outputs: dict[int, torch.Tensor] = {}
        self._branches: dict[int, torch.Tensor] = {}
        self._shortcuts: dict[int, torch.Tensor] = {}
        self._out_grads: dict[int, torch.Tensor] = {}

    def _statistics(self) -> dict[str, np.ndarray]:
        depth = len(self.blocks)
        row = {key: np.full(depth, np.nan) for key in STAT_KEYS}
        for key in (*COUNT_KEYS, "shortcut_norm"):  # shortcut_norm stays 0 for plain blocks
            row[key] = np.zeros(depth)
        self._activation_stats(row)
        self._gradient_stats(row)
        row["nonfinite"] = row["nonfinite_act"] + row["nonfinite_grad"]
        return row

    def _activation_stats(self, row: dict[str, np.ndarray]) -> None:
        output_and_branch_stats(row, self._outputs, self._branches)
        # Block l's input is usually block l-1's output: reuse its norm instead of computing it again.
        fresh = {i: t for i, t in self._inputs.items()
                 if not (i - 1 in self._outputs and _same(t, self._outputs[i - 1]))}
        input_norms = reduce_by_shape(fresh, row_norm)
        for i in self._inputs:
            row["input_norm"][i] = input_norms[i][0] if i in input_norms else row["act_norm"][i - 1]
            if self.identity[i]:
                row["shortcut_norm"][i] = row["input_norm"][i]
        for i, (norm,) in reduce_by_shape(self._shortcuts, row_norm).items():
            row["shortcut_norm"][i] = norm

    def _gradient_stats(self, row: dict[str, np.ndarray]) -> None:
        for i, (norm,) in reduce_by_shape(self._out_grads, tensor_norm).items():
            row["out_grad_norm"][i] = norm
            if not math.isfinite(norm):
                row["nonfinite_grad"][i] += int(_nonfinite(self._out_grads[i]))
        # Weight matrices of one shape are stacked: a handful of reductions for the whole network. The
        # groups are fixed by the model (built once); a weight without a gradient is left out of its group.
        squares: dict[int, list[float]] = {}
        for keys, weights in self._weight_groups:
            present = {key: p.grad.detach() for key, p in zip(keys, weights) if p.grad is not None}
            for (b, _), (norm,) in reduce_by_shape(present, tensor_norm).items():
                squares.setdefault(b, []).append(norm * norm)
        for index, values in squares.items():
            row["grad_norm"][index] = math.sqrt(math.fsum(values))
            if not math.isfinite(row["grad_norm"][index]):  # a finite norm means no entry is NaN/inf
                row["nonfinite_grad"][index] += sum(int(_nonfinite(p.grad)) for p in self.weights[index]
                                                    if p.grad is not None)

    # -- hooks: while armed, keep references; statistics are computed in collect() ------------
    def _on_block(self, index: int, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        self._inputs[index] = inputs[0].detach()
        self._outputs[index] = output.detach()
        self._watch_grad(index, output)

    def _on_branch(self, index: int, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        self._branches[index] = output.detach()

    def _on_shortcut(self, index: int, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        self._shortcuts[index] = output.detach()

    def _on_grad(self, index: int, grad: torch.Tensor) -> None:
        self._out_grads[index] = grad.detach()
