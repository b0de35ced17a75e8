"""Several seeds' copies of one Transformer as one stacked model: each step of all of them in one pass, bit for bit.

Example::

    python -c "from simulation.kinds.transformer import run_together; from simulation.config import TransformerConfig; \\
               print([t.meta.seed for t in run_together([TransformerConfig(seed=s, steps=20) for s in (0, 1, 2)])])"

The Transformer counterpart of :mod:`simulation.kinds.stacked` (the MLPs'): :func:`stack_transformers` puts the numbers
of S :class:`~simulation.kinds.transformer.Seq2SeqTransformer` s that differ only in their seed side by side (every
parameter one leaf [S, ...], each model's own parameter re-pointed at its row) and returns a *template* copy of the
first model whose ``nn.Linear``, ``nn.LayerNorm`` and ``nn.Embedding`` are replaced by the stacked modules below;
the template runs all S on tokens [S, B, T] with the model's own ``forward`` code (its attention and stream take
any leading dims). A step of these small models on one CPU thread is mostly per-operation overhead, so S seeds in
one pass cost little more than one.

Each stacked operation computes every row as the single model does: a Linear's ``baddbmm`` row is the single
model's ``addmm`` (the same MKL call per matrix, at sizes :func:`transformer_stackable` admits); the attention's
batched products and the row-wise softmax run on more matrices and rows of the same shapes; an embedding is a
lookup in the S tables laid end to end (its backward adds each table's rows in the single model's order); a
LayerNorm runs once per seed (its fused affine kernel has no per-row weights). tests/test_stacked_transformer.py
checks every recorded array of the lecture's kinds of Transformer against training each seed alone (equal, not
close).
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn import functional as F

from ..config import TransformerConfig
from .stacked import SMALL_PRODUCT, StackedLinear, stack_rows

__all__ = ["StackedTokenLinear", "StackedLayerNorm", "StackedEmbedding", "stack_transformers",
           "transformer_stackable"]


class StackedTokenLinear(StackedLinear):
    """S ``nn.Linear`` side by side on tokens: [S, ..., in] -> [S, ..., out] (the middle dims flattened, as
    ``F.linear`` flattens a contiguous [B, T, in] into one ``addmm``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s, *middle, n_in = x.shape
        return super().forward(x.reshape(s, -1, n_in)).view(s, *middle, -1)


class StackedLayerNorm(nn.Module):
    """S ``nn.LayerNorm`` (affine) side by side: weight and bias [S, width]; [S, ...] -> [S, ...], row s normalised
    by ``F.layer_norm`` with its own weight and bias: one call per seed, each the single model's call."""

    def __init__(self, like: nn.LayerNorm, weight: nn.Parameter, bias: nn.Parameter) -> None:
        super().__init__()
        self.normalized_shape, self.eps = like.normalized_shape, like.eps
        self.weight, self.bias = weight, bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # unbind/stack: their backward hands each row's gradient on as it is (no addition of zeros).
        return torch.stack([F.layer_norm(row, self.normalized_shape, w, b, self.eps)
                            for row, w, b in zip(x.unbind(0), self.weight.unbind(0), self.bias.unbind(0))])


class StackedEmbedding(nn.Module):
    """S ``nn.Embedding`` tables side by side: weight [S, V, width]; int64 [S, ...] -> [S, ..., width]. Row s looks
    its tokens up in table s, as one lookup in the S tables laid end to end (token + s V)."""

    def __init__(self, weight: nn.Parameter) -> None:
        super().__init__()
        self.weight = weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        s, v = self.weight.shape[:2]
        offset = torch.arange(0, s * v, v).view(s, *[1] * (tokens.dim() - 1))
        return F.embedding(tokens + offset, self.weight.flatten(0, 1))


def transformer_stackable(config: TransformerConfig) -> bool:
    """Whether the seeds of ``config`` stack bit for bit: every Linear multiplies matrices of ``batch_size`` x
    tokens rows whose rows x inputs x outputs reaches :data:`~simulation.kinds.stacked.SMALL_PRODUCT` (below it torch's
    batched product uses a kernel of its own, the single model's ``addmm`` does not); inputs and outputs >= 2."""
    tokens = config.batch_size * config.seq_len * (2 if config.arch == "decoder_only" else 1)
    shapes = [(config.width, config.width), (config.width, config.vocab + 1)]
    if config.ffn:
        shapes += [(config.width, config.ffn_width), (config.ffn_width, config.width)]
    return all(min(a, b) >= 2 and tokens * a * b >= SMALL_PRODUCT for a, b in shapes)


def stack_transformers(models: list[nn.Module]) -> tuple[nn.Module, list[nn.Parameter]]:
    """Stack ``models`` (Seq2SeqTransformers of one config but the seed): (template, stacked parameters in the
    order of ``models[0].parameters()``). After the call each model's parameters are views of rows of the stacked
    ones, so a step of the template (forward on tokens [S, B, T], backward, an optimiser over the stacked
    parameters) is each model's step, and each model still runs alone (a recorded step, a test pass, a probe).
    Raises ValueError for models of other shapes or with modules holding parameters other than Linear,
    LayerNorm and Embedding."""
    first = models[0]
    names = [name for name, _ in first.named_parameters()]
    shapes = [(n, p.shape) for n, p in first.named_parameters()]
    if any([(n, p.shape) for n, p in m.named_parameters()] != shapes for m in models[1:]):
        raise ValueError("only models of the same shapes can be stacked")
    for module in first.modules():
        if any(True for _ in module.parameters(recurse=False)) and type(module) not in (nn.Linear, nn.LayerNorm,
                                                                                          nn.Embedding):
            raise ValueError(f"a stacked Transformer cannot run {type(module).__name__}")
        if type(module) is nn.LayerNorm and not module.elementwise_affine:
            raise ValueError("a stacked LayerNorm needs its weight and bias")
    own = [dict(m.named_parameters()) for m in models]
    params = {name: stack_rows([o[name] for o in own], leaf=True) for name in names}
    template = copy.deepcopy(first)
    for path, module in list(template.named_modules()):
        prefix = f"{path}." if path else ""
        if type(module) is nn.Linear:
            stacked: nn.Module = StackedTokenLinear(params[f"{prefix}weight"], params.get(f"{prefix}bias"))
        elif type(module) is nn.LayerNorm:
            stacked = StackedLayerNorm(module, params[f"{prefix}weight"], params[f"{prefix}bias"])
        elif type(module) is nn.Embedding:
            stacked = StackedEmbedding(params[f"{prefix}weight"])
        else:
            continue
        parent, _, child = path.rpartition(".")
        setattr(template.get_submodule(parent) if parent else template, child, stacked)
    return template, [params[name] for name in names]
