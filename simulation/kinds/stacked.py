"""Several seeds' copies of one MLP as one stacked model: each step of all of them in one pass, bit for bit.

Example::

    python -c "from simulation.kinds.mlp import run_together; from simulation.config import RunConfig; \\
               print([t.meta.seed for t in run_together([RunConfig(seed=s) for s in (0, 1, 2)])])"

Runs that differ only in their seed build the same modules with other numbers. :func:`stack_models` puts the
numbers of S such models side by side: every parameter and buffer becomes one tensor [S, ...] (a leaf with its
own ``.grad``), each model's own parameter is re-pointed at its row, and a *template* copy of the first model,
whose ``nn.Linear`` and ``nn.BatchNorm1d`` are replaced by :class:`StackedLinear` and
:class:`StackedBatchNorm1d`, runs all S on a batch [S, B, features] with the models' own ``forward`` code. A
small net on one CPU thread spends most of a step in per-operation overhead, so S seeds in one pass cost little
more than one (three seeds of the lecture's MLPs: ~2x faster forward and backward).

The stacked operations are the ones a single model runs, per row: ``baddbmm`` computes each row as ``addmm``
does (the same MKL call per matrix), its backward takes the products autograd takes for ``addmm`` (not
``bmm``'s, which differ on AVX2 CPUs; :class:`_StackedLinearFunction`), and batch normalisation of [B, S x C] normalises every channel over the
same B values as [B, C] does. tests/test_stacked.py checks every recorded array of the lecture's kinds of MLP
against training each seed alone (equal, not close); :func:`stackable` admits only models made of the modules
those tests cover (Linear, BatchNorm1d, the element-wise activations, the residual block's scalar ``alpha``) at
sizes where torch multiplies every row with the single model's kernel.
"""

from __future__ import annotations

import contextlib
import copy
import warnings

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["StackedLinear", "StackedBatchNorm1d", "stack_models", "stack_rows", "stackable", "STACKABLE", "SMALL_PRODUCT",
           "column_grads", "gradient_rows"]

# Modules with parameters or buffers that a stacked model handles; parameter-free modules (activations,
# Identity, ZeroPad, Scale, Sequential, ModuleList) run as they are on [S, B, features].
STACKABLE = (nn.Linear, nn.BatchNorm1d)


class StackedLinear(nn.Module):
    """S ``nn.Linear`` side by side: weight [S, out, in], bias [S, out] (or None); [S, B, in] -> [S, B, out]."""

    def __init__(self, weight: nn.Parameter, bias: nn.Parameter | None) -> None:
        super().__init__()
        self.weight, self.bias = weight, bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _stacked_linear(x, self.weight, self.bias)


class _StackedLinearFunction(torch.autograd.Function):
    """Row s of both passes is what ``F.linear(x[s], weight[s], bias[s])`` computes alone, one BLAS call per row:

    - forward: ``addmm(bias, x, weight.T)``, here ``baddbmm``;
    - input gradient: ``grad @ weight`` (autograd's ``mm_mat1_backward``);
    - weight gradient: ``grad.T @ x``, the product ``mm_mat2_backward`` takes for a column-major ``weight.T``.
      ``bmm``'s own backward would compute ``(x.T @ grad).T`` instead: the same sums through another kernel, which
      on AVX2 CPUs differs from the single model's in the last bit (an [10, 16] head on an AMD EPYC);
    - bias gradient: ``grad`` summed over the batch, as autograd sums an expanded bias.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        if bias is None:
            return torch.bmm(x, weight.transpose(1, 2))
        return torch.baddbmm(bias[:, None, :], x, weight.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        need_x, need_weight, need_bias = ctx.needs_input_grad
        return (torch.bmm(grad, weight) if need_x else None,
                torch.bmm(grad.transpose(1, 2), x) if need_weight else None,
                grad.sum(1) if need_bias else None)


def _stacked_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return _StackedLinearFunction.apply(x, weight, bias)


class StackedBatchNorm1d(nn.Module):
    """S ``nn.BatchNorm1d(C)`` in training mode side by side: [S, B, C] -> [S, B, C], each row normalised with its
    own batch statistics, its running statistics [S, C] updated in place (what each module's forward does)."""

    def __init__(self, like: nn.BatchNorm1d, weight: nn.Parameter | None, bias: nn.Parameter | None,
                 running_mean: torch.Tensor, running_var: torch.Tensor, num_batches_tracked: torch.Tensor) -> None:
        super().__init__()
        if like.momentum is None or not like.track_running_stats:
            raise ValueError("a stacked BatchNorm1d needs a fixed momentum and running statistics")
        self.eps, self.momentum = like.eps, like.momentum
        self.weight, self.bias = weight, bias
        self.running_mean, self.running_var, self.num_batches_tracked = running_mean, running_var, num_batches_tracked

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s, b, c = x.shape
        self.num_batches_tracked.add_(1)
        # channel (s, k) of [B, S x C] is channel k of row s. The layers around see [S, B, C] laid out as a single
        # model's [B, C] rows, in both passes: a Linear's bias gradient sums its rows in that order.
        flat = _contiguous_grad(x).transpose(0, 1).reshape(b, s * c)
        out = F.batch_norm(flat, self.running_mean.view(-1), self.running_var.view(-1),
                           None if self.weight is None else self.weight.reshape(-1),  # rows of a flat tensor:
                           None if self.bias is None else self.bias.reshape(-1),  # [S, C] not contiguous
                           True, self.momentum, self.eps)
        return out.view(b, s, c).transpose(0, 1).contiguous()


class _ContiguousGrad(torch.autograd.Function):
    """The identity, whose backward hands on a contiguous copy of the gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad.contiguous()


_contiguous_grad = _ContiguousGrad.apply


# torch multiplies matrices whose batch x in x out product is below this with a kernel of its own, and vectors
# (in or out 1) as matrix-vector products: rows computed so may differ in the last bit from the single model's
# (aten/src/ATen/native/LinearAlgebra.cpp, bmm_out_or_baddbmm_); stacked Linears stay above both.
SMALL_PRODUCT = 400


def stackable(model: nn.Module, batch_size: int) -> bool:
    """Whether :func:`stack_models` can stack copies of ``model`` for batches of ``batch_size`` rows and give each
    model's numbers bit for bit: every module that holds parameters or buffers of its own is a :data:`STACKABLE`
    one (BatchNorm1d with a momentum and running statistics; Linear with at least 2 inputs and outputs and
    ``batch_size`` x inputs x outputs >= :data:`SMALL_PRODUCT`), apart from scalar parameters (ReZero's and
    Fixup's ``alpha``)."""
    for module in model.modules():
        own = [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]
        if isinstance(module, nn.BatchNorm1d):
            if type(module) is not nn.BatchNorm1d or module.momentum is None or not module.track_running_stats:
                return False
        elif isinstance(module, STACKABLE):
            n_in, n_out = module.in_features, module.out_features
            if type(module) is not nn.Linear or min(n_in, n_out) < 2 or batch_size * n_in * n_out < SMALL_PRODUCT:
                return False
        elif any(t.dim() for _, t in own):
            return False
    return True


def stack_rows(tensors: list[torch.Tensor], leaf: bool) -> torch.Tensor:
    """One tensor [S, *shape] holding ``tensors``, each re-pointed at its row (same values, now shared)."""
    stacked = torch.stack([t.detach() for t in tensors])
    if leaf:
        stacked = nn.Parameter(stacked)
    for row, t in enumerate(tensors):
        t.data = stacked.data[row]
    return stacked


@contextlib.contextmanager
def column_grads():
    """Train with stacked parameters whose ``.grad`` are column views of one ``[seeds, parameters]`` buffer: torch's
    backward warns once per process that such a gradient "does not obey the gradient layout contract" (its strides
    are the buffer's, not the parameter's). The numbers it accumulates there are the same; the warning is silenced
    inside the block only."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="grad and param do not obey the gradient layout contract")
        yield


def gradient_rows(stacked: list[torch.Tensor], own: list[list[torch.Tensor]], order: list[int] | None = None,
                  dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """One gradient buffer ``[S, parameters]`` for seeds trained together: the ``.grad`` of each stacked parameter
    ``stacked[i]`` ([S, *shape]) is a view of its columns, where the stacked backward accumulates, and the ``.grad``
    of seed s's own parameter ``own[s][i]`` is a view of the same numbers in row s, so that row s is that seed's
    gradient (its recorder's norms, its optimiser when it steps alone). Parameters take their columns in
    ``order`` (default: as given). Returns the buffer (zeros); see :func:`column_grads` for torch's layout note."""
    order = list(range(len(stacked))) if order is None else order
    grads = torch.zeros(len(own), sum(parameter[0].numel() for parameter in stacked), dtype=dtype)
    offset = 0
    for index in order:
        parameter, size = stacked[index], stacked[index][0].numel()
        parameter.grad = grads[:, offset:offset + size].view(parameter.shape)
        for params, row in zip(own, grads):
            params[index].grad = row[offset:offset + size].view_as(params[index])
        offset += size
    return grads


def stack_models(models: list[nn.Module]) -> tuple[nn.Module, list[nn.Parameter], torch.Tensor]:
    """Stack ``models`` (same class and shapes, e.g. one per seed): (template, stacked parameters, flat).

    After the call each model's parameters and buffers are views of rows of the stacked tensors, so a step taken
    on the template (forward on [S, B, ...], backward, an optimiser over the stacked parameters) is each model's
    step, and each model still runs alone (a recorded step, a test pass). The stacked parameters come in the order
    of ``models[0].parameters()``; a 0-dim parameter is stacked as [S, 1, 1], which broadcasts over [S, B, C] as
    the scalar does over [B, C]. All of them are views of ``flat`` [S, parameters per model], their columns in that
    order (row s: model s's parameters one after the other), so that an optimiser can update every parameter of
    every model as one tensor: the same element-wise arithmetic, one call instead of one per parameter. Raises
    ValueError for models that are not :func:`stackable` or differ in shape."""
    first = models[0]
    if not stackable(first, SMALL_PRODUCT):
        raise ValueError(f"{type(first).__name__} has modules a stacked model cannot run")
    names = [name for name, _ in first.named_parameters()]
    buffer_names = [name for name, _ in first.named_buffers()]
    for model in models[1:]:
        if ([(n, p.shape) for n, p in model.named_parameters()] != [(n, p.shape) for n, p in first.named_parameters()]
                or [n for n, _ in model.named_buffers()] != buffer_names):
            raise ValueError("only models of the same shapes can be stacked")
    own_params = [dict(m.named_parameters()) for m in models]
    own_buffers = [dict(m.named_buffers()) for m in models]
    flat = torch.cat([torch.stack([own[name].detach().reshape(-1) for own in own_params]) for name in names], dim=1)
    params, offset = {}, 0
    for name in names:  # each a leaf sharing flat's storage; each model's own parameter re-pointed at its row
        size = own_params[0][name].numel()
        params[name] = nn.Parameter(flat[:, offset:offset + size].view(len(models), *own_params[0][name].shape))
        for row, own in enumerate(own_params):
            own[name].data = params[name].data[row]
        offset += size
    buffers = {name: stack_rows([own[name] for own in own_buffers], leaf=False) for name in buffer_names}
    template = copy.deepcopy(first)
    for path, module in list(template.named_modules()):
        prefix = f"{path}." if path else ""
        if isinstance(module, nn.Linear):
            stacked = StackedLinear(params[f"{prefix}weight"], params.get(f"{prefix}bias"))
        elif isinstance(module, nn.BatchNorm1d):
            stacked = StackedBatchNorm1d(module, params.get(f"{prefix}weight"), params.get(f"{prefix}bias"),
                                         *(buffers[f"{prefix}{key}"] for key in
                                           ("running_mean", "running_var", "num_batches_tracked")))
        else:
            for key, p in list(module.named_parameters(recurse=False)):  # scalars (alpha): [S, 1, 1]
                module._parameters[key] = params[f"{prefix}{key}"].view(-1, 1, 1)
            continue
        parent, _, child = path.rpartition(".")
        setattr(template.get_submodule(parent) if parent else template, child, stacked)
    return template, [params[name] for name in names], flat
