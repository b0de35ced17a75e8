"""Small Transformers in Post-LN and Pre-LN placement, trained on a seeded toy sequence task.

Example::

    python -m simulation.kinds.transformer --set norm=pre_ln --set warmup_steps=0

The layers follow Vaswani et al. 2017, Fig. 1: an encoder layer has two sublayers (self-attention, FFN), a
decoder layer three (masked self-attention, cross-attention over the encoder output, FFN), each wrapped in a
residual connection and a LayerNorm. Where the LayerNorm sits is the only difference between the two
placements compared by Xiong et al. 2020 ("On Layer Normalization in the Transformer Architecture", Fig. 1):

- ``post_ln`` (Vaswani 2017):  ``x = LayerNorm(x + Sublayer(x))`` -- the norm sits on the residual path;
- ``pre_ln`` (nanoGPT, GPT-2): ``x = x + Sublayer(LayerNorm(x))`` -- the residual path is a clean identity,
  and one final LayerNorm follows the stack.

``run(config) -> Trace`` trains one :class:`~simulation.config.TransformerConfig` on CPU, bit-identically for
the same config, and records per-layer gradient norms at initialisation (averaged over several batches) and
during training, the loss of every step and the learning-rate schedule (linear warm-up, then constant).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import sys

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..config import TransformerConfig, differ_only_in_seed
from ..loop import Divergence, RunLog, StepResult, Task, check_fits, one_thread, record_steps, train
from ..loop import main as loop_main
from ..memory import transformer_memory
from ..core.record import HookPoint, HookRecorder, by_shape
from .stacked import column_grads, gradient_rows
from .stacked_transformer import stack_transformers, transformer_stackable
from ..trace import Trace

__all__ = [
    "MultiHeadAttention", "FeedForward", "EncoderLayer", "DecoderLayer", "Seq2SeqTransformer", "build_transformer",
    "make_task", "lr_at", "TransformerRecorder", "TransformerTask", "SUBLAYER_KEYS", "run", "run_together", "BOS", "record_steps",
    "layer_norm", "add_and_norm", "token_residual", "encoder_token_residual", "RANK_SEQUENCES", "lens_kl", "logit_lens",
]

BOS = 0  # token 0 starts every decoder input; symbols are 1..vocab


# -- the model ---------------------------------------------------------------------------------

class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention with ``heads`` heads (Vaswani et al. 2017, eq. 1 and §3.2.2).

    ``forward(x, memory=None, causal=False)``: x float [B, T, width]; keys and values come from ``memory``
    [B, S, width] when given (cross-attention), else from x (self-attention). Returns [B, T, width].
    """

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} is not divisible by heads {heads}")
        self.heads = heads
        self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))
        self.o = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, causal: bool = False) -> torch.Tensor:
        # Leading dims [..., T, width]: [B, T, width], or [seeds, B, T, width] in a stacked model (stacked_transformer).
        source = x if memory is None else memory
        (*lead, t, w), s, h = x.shape, source.shape[-2], self.heads
        q = self.q(x).view(*lead, t, h, w // h).transpose(-3, -2)  # [B, heads, T, w/heads]
        k = self.k(source).view(*lead, s, h, w // h).transpose(-3, -2)
        v = self.v(source).view(*lead, s, h, w // h).transpose(-3, -2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(w // h)  # [B, heads, T, S]
        if causal:
            future = torch.ones(t, s, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        out = scores.softmax(-1) @ v
        return self.o(out.transpose(-3, -2).reshape(*lead, t, w))


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, position-wise (Vaswani et al. 2017, eq. 2); [.., width] -> same."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(width, hidden)
        self.linear_2 = nn.Linear(hidden, width)  # W^2 of Xiong et al. 2020: the matrix of their Fig. 3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.relu(self.linear_1(x)))


def layer_norm(norm: str, width: int) -> nn.Module:
    """A LayerNorm over ``width`` features, or the identity for ``norm="none"`` (no normalisation at all)."""
    return nn.Identity() if norm == "none" else nn.LayerNorm(width)


def add_and_norm(x: torch.Tensor, norm: str, residual: bool, ln: nn.Module, branch: nn.Module, *args,
                 **kwargs) -> torch.Tensor:
    """One sublayer: ``pre_ln`` x + F(LN(x)); ``post_ln`` LN(x + F(x)); ``none`` x + F(x) (``ln`` is the
    identity). ``residual=False`` drops the skip: F(LN(x)), LN(F(x)), F(x) (Dong et al. 2021's pure
    self-attention network). ``args``/``kwargs`` go to ``branch`` (memory, causal); [B, T, width] -> same."""
    if norm == "pre_ln":
        out = branch(ln(x), *args, **kwargs)
        return x + out if residual else out
    out = branch(x, *args, **kwargs)
    return ln(x + out if residual else out)


class EncoderLayer(nn.Module):
    """Self-attention and FFN, each with a residual connection and a LayerNorm (two Add & Norm).

    ``residual=False`` drops both skips; ``ffn=False`` drops the FFN sublayer (attention-only layer).
    """

    def __init__(self, width: int, heads: int, ffn_width: int, norm: str, residual: bool = True,
                 ffn: bool = True) -> None:
        super().__init__()
        self.norm, self.residual = norm, residual
        self.ln_1, self.attn = layer_norm(norm, width), MultiHeadAttention(width, heads)
        if ffn:
            self.ln_2, self.ffn = layer_norm(norm, width), FeedForward(width, ffn_width)

    def sublayers(self) -> list[tuple[str, nn.Module, nn.Module]]:
        """(name, its LayerNorm, its residual branch), in the order the data meets them."""
        return [("attn", self.ln_1, self.attn)] + ([("ffn", self.ln_2, self.ffn)] if hasattr(self, "ffn") else [])

    def forward(self, x: torch.Tensor, causal: bool = False) -> torch.Tensor:
        x = add_and_norm(x, self.norm, self.residual, self.ln_1, self.attn, causal=causal)
        if hasattr(self, "ffn"):
            x = add_and_norm(x, self.norm, self.residual, self.ln_2, self.ffn)
        return x


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, FFN: three Add & Norm."""

    def __init__(self, width: int, heads: int, ffn_width: int, norm: str, residual: bool = True,
                 ffn: bool = True) -> None:
        super().__init__()
        self.norm, self.residual = norm, residual
        self.ln_1, self.self_attn = layer_norm(norm, width), MultiHeadAttention(width, heads)
        self.ln_2, self.cross_attn = layer_norm(norm, width), MultiHeadAttention(width, heads)
        if ffn:
            self.ln_3, self.ffn = layer_norm(norm, width), FeedForward(width, ffn_width)

    def sublayers(self) -> list[tuple[str, nn.Module, nn.Module]]:
        return [("self_attn", self.ln_1, self.self_attn), ("cross_attn", self.ln_2, self.cross_attn)] + (
            [("ffn", self.ln_3, self.ffn)] if hasattr(self, "ffn") else [])

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        x = add_and_norm(x, self.norm, self.residual, self.ln_1, self.self_attn, causal=True)
        x = add_and_norm(x, self.norm, self.residual, self.ln_2, self.cross_attn, memory)
        if hasattr(self, "ffn"):
            x = add_and_norm(x, self.norm, self.residual, self.ln_3, self.ffn)
        return x


def sinusoid_positions(length: int, width: int) -> torch.Tensor:
    """Fixed positional encoding [length, width] (Vaswani et al. 2017, §3.5)."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, width, 2, dtype=torch.float32) * (-math.log(10000.0) / width))
    table = torch.zeros(length, width)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)[:, : width // 2]
    return table


class Seq2SeqTransformer(nn.Module):
    """Token embedding + positions -> ``depth`` encoder layers [-> ``depth`` decoder layers] -> head.

    ``arch="encoder"``: the encoder output at position i predicts target token i (no decoder).
    ``arch="encoder_decoder"``: the decoder reads the target shifted right (BOS first) and cross-attends to
    the encoder output. ``arch="decoder_only"``: a GPT: one stack of causal self-attention + FFN layers (named
    ``block.<i>``, kept in ``encoder``) reads the source, BOS and the target shifted right (2T tokens) and the
    last T positions predict the target. ``forward(src, tgt_in)``: int64 [B, T] each; returns logits
    [B, T, vocab + 1]. ``layers`` lists every layer, encoder first: the recorder hooks them by index.
    """

    def __init__(self, arch: str, norm: str, vocab: int, seq_len: int, depth: int, width: int, heads: int,
                 ffn_width: int, residual: bool = True, ffn: bool = True) -> None:
        super().__init__()
        self.arch, self.norm, self.width, self.residual = arch, norm, width, residual
        self.embed = nn.Embedding(vocab + 1, width)
        positions = 2 * seq_len if arch == "decoder_only" else seq_len  # a GPT reads source and target
        self.register_buffer("positions", sinusoid_positions(positions, width), persistent=False)
        self.encoder = nn.ModuleList(EncoderLayer(width, heads, ffn_width, norm, residual, ffn) for _ in range(depth))
        n_dec = depth if arch == "encoder_decoder" else 0
        self.decoder = nn.ModuleList(DecoderLayer(width, heads, ffn_width, norm, residual, ffn) for _ in range(n_dec))
        # Pre-LN leaves the residual stream un-normalised: one final LayerNorm per stack (nanoGPT's ln_f).
        pre = norm == "pre_ln"
        self.enc_ln_f = nn.LayerNorm(width) if pre else nn.Identity()
        self.dec_ln_f = nn.LayerNorm(width) if pre and n_dec else nn.Identity()
        self.head = nn.Linear(width, vocab + 1)

    @property
    def layers(self) -> list[nn.Module]:
        return [*self.encoder, *self.decoder]

    def layer_names(self) -> list[str]:
        first = "block" if self.arch == "decoder_only" else "encoder"
        return [f"{first}.{i}" for i in range(len(self.encoder))] + [f"decoder.{i}" for i in range(len(self.decoder))]

    @property
    def ln_f(self) -> nn.Module:
        """The final norm before the head (LayerNorm for pre_ln, else the identity)."""
        return self.dec_ln_f if len(self.decoder) else self.enc_ln_f

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        # x sqrt(width) as in Vaswani §3.4: embeddings of std 1/sqrt(width) enter at unit scale.
        return self.embed(tokens) * math.sqrt(self.width) + self.positions[: tokens.shape[-1]]

    def stream(self, src: torch.Tensor, tgt_in: torch.Tensor | None = None, stack: str | None = None
               ) -> list[torch.Tensor]:
        """The residual stream [B, T', width] at the input of a stack and after each of its layers: L + 1 tensors.
        ``stack=None``: the stack that feeds the head (the decoder of an encoder-decoder, else the one stack);
        ``"encoder"``: the first stack. T' = 2T for ``decoder_only`` (source, BOS, target shifted), else T."""
        causal = self.arch == "decoder_only"
        x = self._embed(torch.cat([src, tgt_in], -1) if causal else src)
        out = [x]
        for layer in self.encoder:
            x = layer(x, causal=causal)
            out.append(x)
        if stack == "encoder" or not len(self.decoder):
            return out
        memory = self.enc_ln_f(x)
        y = self._embed(tgt_in)
        out = [y]
        for layer in self.decoder:
            y = layer(y, memory)
            out.append(y)
        return out

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor | None = None) -> torch.Tensor:
        logits = self.head(self.ln_f(self.stream(src, tgt_in)[-1]))
        return logits[..., -src.shape[-1]:, :] if self.arch == "decoder_only" else logits


def build_transformer(config: TransformerConfig) -> Seq2SeqTransformer:
    """The model of ``config``, initialised from ``torch.manual_seed(config.seed)`` as set by the caller.

    ``init="xavier"``: Xavier-uniform Linear weights and zero biases (Vaswani's and fairseq's choice, the
    setting of Xiong et al. 2020 §3); ``init="pytorch"``: nn.Linear's default. Embeddings ~ N(0, 1/width).
    """
    model = Seq2SeqTransformer(config.arch, config.norm, config.vocab, config.seq_len, config.depth,
                               config.width, config.heads, config.ffn_width, config.residual, config.ffn)
    nn.init.normal_(model.embed.weight, std=config.width ** -0.5)
    if config.init == "xavier":
        for module in model.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)
    return model


# -- the task ----------------------------------------------------------------------------------

def make_task(task: str, vocab: int, seq_len: int, n: int, generator: torch.Generator
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` random sequences and their targets: (src, tgt_in, tgt), int64 [n, seq_len] each.

    src holds symbols 1..vocab drawn uniformly; tgt is src copied, reversed or sorted; tgt_in is tgt
    shifted right behind :data:`BOS` (the decoder's teacher-forced input).
    """
    src = torch.randint(1, vocab + 1, (n, seq_len), generator=generator)
    if task == "copy":
        tgt = src.clone()
    elif task == "reverse":
        tgt = src.flip(1)
    elif task == "sort":
        tgt = src.sort(1).values
    else:
        raise ValueError(f"unknown task {task!r}; available: copy, reverse, sort")
    tgt_in = torch.cat([torch.full((n, 1), BOS, dtype=torch.int64), tgt[:, :-1]], 1)
    return src, tgt_in, tgt


def lr_at(config: TransformerConfig, step: int) -> float:
    """Learning rate of optimiser step ``step`` (0-based): linear warm-up over ``warmup_steps``, then ``lr``."""
    if config.warmup_steps and step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    return config.lr


# -- recording ---------------------------------------------------------------------------------

# Statistics per sublayer (encoder: attn, ffn; decoder: self_attn, cross_attn, ffn), each the mean over
# tokens of an L2 norm over the width: the residual-stream input x, the branch Sublayer(.), their sum
# x + Sublayer(.) and what leaves the Add & Norm (LayerNorm(sum) for post_ln, the sum itself for pre_ln).
SUBLAYER_KEYS = ("input_norm", "branch_norm", "sum_norm", "out_norm")


class TransformerRecorder(HookRecorder):
    """Hooks every layer and sublayer of a :class:`Seq2SeqTransformer`; a context manager.

    Hook points: ``encoder.<i>`` / ``decoder.<i>`` (a layer's output), ``decoder.<i>.ffn`` (a sublayer's
    residual branch: ``attn``, ``self_attn``, ``cross_attn``, ``ffn``) and ``decoder.<i>.ffn.ln`` (its LayerNorm).
    Between :meth:`arm` and :meth:`collect` one forward and backward pass are recorded. ``collect`` returns
    ``grad_norm`` (L2 norm of dL/dW over all weight matrices of each layer, biases and LayerNorm gains
    excluded), ``ffn_grad_norm`` (of the FFN's W^2 alone, Xiong et al. 2020 Fig. 3), ``out_grad_norm``
    (||dL/dh|| of each layer's output h over the batch, from ``tensor.register_hook``), ``nonfinite``
    (count of non-finite values in each layer's output and weight gradients), ``input_cos`` (mean over tokens
    of the cosine similarity between a token's vector at the input of its stack, the embedded tokens, and
    after this layer; encoder layers compare with the encoder input, decoder layers with the decoder input):
    float64 arrays [layers];
    and the :data:`SUBLAYER_KEYS` and ``branch_std`` as arrays [sublayers]. Every hook is removed on exit, also after an error.
    """

    # float64 for the gradient norms: tiny norms must not flush to 0.
    DTYPES = {"nonfinite": np.int64, **dict.fromkeys(("grad_norm", "ffn_grad_norm", "out_grad_norm", "input_cos"), np.float64),
              **dict.fromkeys((*SUBLAYER_KEYS, "branch_std"), np.float32)}
    layer_kind = "layer"

    def __init__(self, model: Seq2SeqTransformer) -> None:
        self.layers = model.layers
        # The first layer of each stack reads the embedded tokens: each layer's index of that first layer.
        self.stack_start = [0 if i < len(model.encoder) else len(model.encoder) for i in range(len(self.layers))]
        # The weight matrices of each layer (biases and LayerNorm gains are 1-D), and which one is the FFN's W^2.
        self.weights = [[p for p in layer.parameters() if p.ndim >= 2] for layer in self.layers]
        self.ffn_w2 = [next((k for k, p in enumerate(weights) if hasattr(layer, "ffn") and p is layer.ffn.linear_2.weight),
                            None) for layer, weights in zip(self.layers, self.weights)]
        super().__init__(model)

    def hook_points(self) -> list[HookPoint]:
        names = self.model.layer_names()
        points = [HookPoint(name, layer, "layer", index) for index, (name, layer) in enumerate(zip(names, self.layers))]
        index = 0
        for name, layer in zip(names, self.layers):
            for sub, ln, branch in layer.sublayers():
                points += [HookPoint(f"{name}.{sub}", branch, "branch", index),
                           HookPoint(f"{name}.{sub}.ln", ln, "ln", index)]
                index += 1
        return points

    def _clear(self) -> None:
        # The armed step's tensors, reduced in collect() with a few batched float64 operations.
        self._stack_inputs: dict[int, torch.Tensor] = {}  # first layer index of a stack -> its input
        self._outputs: dict[int, torch.Tensor] = {}  # layer -> its output h
        self._out_grads: dict[int, torch.Tensor] = {}  # layer -> dL/dh
        self._branches: dict[int, torch.Tensor] = {}  # sublayer -> Sublayer(.)
        self._ln_inputs: dict[int, torch.Tensor] = {}  # sublayer -> what its LayerNorm reads
        self._ln_outputs: dict[int, torch.Tensor] = {}  # sublayer -> its LayerNorm's output (post_ln)

    def _statistics(self) -> dict[str, np.ndarray]:
        n_layers, n_sub = len(self.layers), len(self.names("branch"))
        row = {key: np.full(n_layers, np.nan) for key in ("grad_norm", "ffn_grad_norm", "out_grad_norm", "input_cos")}
        row["nonfinite"] = np.zeros(n_layers)
        row.update({key: np.full(n_sub, np.nan) for key in (*SUBLAYER_KEYS, "branch_std")})
        for keys, stack in by_shape(self._outputs):
            counts = torch.logical_not(torch.isfinite(stack)).flatten(1).sum(1).tolist()
            for index, count in zip(keys, counts):
                row["nonfinite"][index] += count
            for start in {self.stack_start[i] for i in keys}:  # cos with the input of the layer's stack
                rows = [k for k, i in enumerate(keys) if self.stack_start[i] == start]
                cos = F.cosine_similarity(self._stack_inputs[start].double()[None], stack[rows].double(), dim=-1)
                for k, value in zip(rows, cos.flatten(1).mean(1).tolist()):
                    row["input_cos"][keys[k]] = value
        for keys, stack in by_shape(self._out_grads):
            for index, value in zip(keys, torch.linalg.vector_norm(stack.double().flatten(1), dim=1).tolist()):
                row["out_grad_norm"][index] = value
        self._sublayer_stats(row)
        # Weight matrices of one shape are stacked: their squared norms and non-finite counts in a few ops.
        grads = {(index, k): p.grad.detach() for index, weights in enumerate(self.weights)
                 for k, p in enumerate(weights) if p.grad is not None}
        squares: dict[tuple[int, int], float] = {}
        for keys, stack in by_shape(grads):
            flat = stack.double().flatten(1)
            values = flat.pow(2).sum(1).tolist()
            bad = [k for k, v in enumerate(values) if not math.isfinite(v)]
            counts = torch.logical_not(torch.isfinite(flat[bad])).sum(1).tolist() if bad else []
            for k, count in zip(bad, counts):
                row["nonfinite"][keys[k][0]] += count
            squares.update(zip(keys, values))
        for index, weights in enumerate(self.weights):
            present = [squares[(index, k)] for k in range(len(weights)) if (index, k) in squares]
            row["grad_norm"][index] = sum(present) ** 0.5
            w2 = self.ffn_w2[index]
            if w2 is not None and (index, w2) in squares:
                row["ffn_grad_norm"][index] = squares[(index, w2)] ** 0.5
        return row

    def _sublayer_stats(self, row: dict[str, np.ndarray]) -> None:
        """The :data:`SUBLAYER_KEYS` and ``branch_std`` of every sublayer seen in the armed step."""
        norms: dict[tuple[str, int], torch.Tensor] = {}  # (key, sublayer) -> tensor whose token norm it is
        for index, branch in self._branches.items():
            norms[("branch_norm", index)] = branch
            if index not in self._ln_inputs:
                continue
            if self.model.norm == "pre_ln":  # x = x + Sublayer(LayerNorm(x)): the LayerNorm read x
                x = self._ln_inputs[index]
                norms[("input_norm", index)] = x
                norms[("sum_norm", index)] = x + branch if self.model.residual else branch
            elif not self.model.residual:  # x = LayerNorm(Sublayer(x)): the sublayer's input is not seen here
                norms[("sum_norm", index)] = branch
                norms[("out_norm", index)] = self._ln_outputs[index]
            else:  # x = LayerNorm(x + Sublayer(x)): the LayerNorm read the sum
                total = self._ln_inputs[index]
                norms[("input_norm", index)] = total - branch
                norms[("sum_norm", index)] = total
                norms[("out_norm", index)] = self._ln_outputs[index]
        for keys, stack in by_shape(norms):
            for (key, index), value in zip(keys, stack.double().norm(dim=-1).flatten(1).mean(1).tolist()):
                row[key][index] = value
        if self.model.norm == "pre_ln":  # what leaves a Pre-LN Add & Norm is the sum itself
            row["out_norm"][:] = row["sum_norm"]
        for keys, stack in by_shape(self._branches):
            for index, value in zip(keys, stack.double().flatten(1).std(1).tolist()):
                row["branch_std"][index] = value

    # -- hooks (added only while armed): keep references; collect() computes the statistics -------
    def _on_layer(self, index: int, inputs: tuple, output: torch.Tensor) -> None:
        start = self.stack_start[index]
        if index == start:
            self._stack_inputs[start] = inputs[0].detach()
        self._outputs[index] = output.detach()
        self._watch_grad(index, output)

    def _on_grad(self, index: int, grad: torch.Tensor) -> None:
        self._out_grads[index] = grad.detach()

    def _on_branch(self, index: int, inputs: tuple, output: torch.Tensor) -> None:
        self._branches[index] = output.detach()

    def _on_ln(self, index: int, inputs: tuple, output: torch.Tensor) -> None:
        self._ln_inputs[index] = inputs[0].detach()
        if self.model.norm != "pre_ln":
            self._ln_outputs[index] = output.detach()


# -- rank collapse (Dong, Cordonnier & Loukas 2021) ------------------------------------------------

RANK_SEQUENCES = 64  # fixed task sequences on which the token residual is measured (generator 30 000 + seed)


def token_residual(x: torch.Tensor) -> torch.Tensor:
    """res(X) = ||X - 1 x^T||_F / ||X||_F of each sequence X [T, width] of ``x`` [..., T, width], with x the
    mean over the T tokens (the x that minimises the Frobenius norm): 0 when every token holds the same vector
    (rank 1). Returns [...]. Dong, Cordonnier & Loukas 2021, §2 (their bounds use the composite l1,inf norm;
    the Frobenius norm is the one whose minimiser is the token mean)."""
    return (x - x.mean(-2, keepdim=True)).flatten(-2).norm(dim=-1) / x.flatten(-2).norm(dim=-1)


def encoder_token_residual(model: Seq2SeqTransformer, src: torch.Tensor, tgt_in: torch.Tensor | None = None
                           ) -> np.ndarray:
    """Mean over the sequences ``src`` (int64 [N, T]) of :func:`token_residual` at the input of the encoder
    and after each encoder layer (of a ``decoder_only`` model: its one causal stack over source and ``tgt_in``):
    float64 [encoder layers + 1]. Computed in float64 on a copy of ``model`` (call it while no hook is
    attached), so the collapse can be followed down to ~1e-16 instead of float32's ~1e-7; Dong et al. 2021,
    Fig. 1 (relative residual against depth)."""
    model64 = copy.deepcopy(model).double()
    with torch.no_grad():
        stream = model64.stream(src, tgt_in, stack="encoder")
    return torch.stack([token_residual(x).mean() for x in stream]).numpy().astype(np.float64)


# -- the logit lens (nostalgebraist 2020; Belrose et al. 2023) ----------------------------------------

def lens_kl(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """KL(p || q) in nats over the last axis, from log-probabilities [..., V]: sum p (log p - log q). Returns [...]."""
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def logit_lens(model: Seq2SeqTransformer, src: torch.Tensor, tgt_in: torch.Tensor, tgt: torch.Tensor
               ) -> dict[str, np.ndarray]:
    """Decode the residual stream of the head's stack after every layer as if it were the last: the logit lens
    (nostalgebraist 2020; Belrose et al. 2023): logits_l = head(ln_f(h_l)), the final norm applied to
    each layer's h_l, at the positions the head is scored on. Inputs int64 [N, T]. Returns float64 [L + 1]
    each (l = 0: the embedded input): ``lens_kl``, KL(p_L || p_l) in nats, mean over positions and sequences
    (0 at l = L); ``lens_top1``, the fraction of positions where the top token of layer l is the final one;
    ``lens_accuracy``, the fraction where it is the target. Call it while no hook is attached."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            t = src.shape[1]
            stream = model.stream(src, tgt_in)
            logp = [F.log_softmax(model.head(model.ln_f(x[:, -t:])).double(), -1) for x in stream]
    finally:
        model.train(was_training)
    final = logp[-1]
    top = final.argmax(-1)
    rows = {"lens_kl": [lens_kl(final, lp).mean() for lp in logp],
            "lens_top1": [(lp.argmax(-1) == top).double().mean() for lp in logp],
            "lens_accuracy": [(lp.argmax(-1) == tgt).double().mean() for lp in logp]}
    return {key: torch.stack(values).numpy().astype(np.float64) for key, values in rows.items()}


def _loss_and_error(model: Seq2SeqTransformer, batch: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, float]:
    src, tgt_in, tgt = batch
    return _logits_loss_and_error(model(src, tgt_in), tgt)


def _logits_loss_and_error(logits: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Mean cross-entropy (nats per token) and the fraction of wrong tokens of ``logits`` [B, T, vocab + 1]."""
    loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten())
    return loss, float((logits.argmax(-1) != tgt).float().mean())


class TransformerTask(Task[TransformerConfig]):
    """The Transformer's parts of a run (:func:`simulation.loop.train` does the rest): the seeded toy task,
    Adam (betas 0.9, 0.98, as Vaswani et al. 2017 §5.3) with linear warm-up, the :class:`TransformerRecorder`,
    and gradient norms at initialisation on ``init_batches`` batches of their own (no update in between)."""

    memory = staticmethod(transformer_memory)

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config)
        self.label = f"{config.norm} warmup={config.warmup_steps}"
        self.model = build_transformer(config)
        # foreach: the multi-tensor Adam (on CPU torch defaults to the per-tensor loop), the same numbers with far
        # fewer calls: a 200-step encoder-decoder run went from ~10.5 to ~8 CPU-s (checked bit for bit, 60 steps)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=config.lr, betas=(0.9, 0.98), eps=1e-9,
                                    foreach=True)
        self.data_gen = torch.Generator().manual_seed(config.seed + 1)
        self.test_set = self._task(512, torch.Generator().manual_seed(10_000 + config.seed))
        self._curves = {"loss_curve": np.full(config.steps, np.nan, dtype=np.float32),
                        "lr_curve": np.array([lr_at(config, s) for s in range(config.steps)], dtype=np.float32)}
        self.init_rows: list[dict[str, np.ndarray]] = []
        # Fixed task sequences on which the token residual and the logit lens are measured.
        self.probe = self._task(RANK_SEQUENCES, torch.Generator().manual_seed(30_000 + config.seed))
        self.probe_rows: list[dict[str, np.ndarray]] = []
        self.grads: torch.Tensor | None = None  # run_together: one flat buffer whose views are the .grads

    def _task(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        return make_task(self.config.task, self.config.vocab, self.config.seq_len, n, generator)

    def recorder(self) -> TransformerRecorder:
        return TransformerRecorder(self.model)

    def curves(self) -> dict[str, np.ndarray]:
        return self._curves

    def zero_grad(self) -> None:
        """Drop the gradients, or zero them in place where :func:`run_together` made them views of its buffer."""
        if self.grads is None:
            self.model.zero_grad(set_to_none=True)
        else:
            self.grads.zero_()

    def before_training(self, recorder: TransformerRecorder) -> None:
        self.probe_rows.append(self._probe())
        init_gen = torch.Generator().manual_seed(20_000 + self.config.seed)
        for _ in range(self.config.init_batches):
            self.zero_grad()
            recorder.arm()
            loss, _ = _loss_and_error(self.model, self._task(self.config.batch_size, init_gen))
            loss.backward()
            self.init_rows.append(recorder.collect())

    def _probe(self) -> dict[str, np.ndarray]:
        """The token residual and the logit lens of the model now, on the probe sequences."""
        src, tgt_in, tgt = self.probe
        return {"rank_residual": encoder_token_residual(self.model, src, tgt_in),
                **logit_lens(self.model, src, tgt_in, tgt)}

    def batch(self, step: int) -> tuple[torch.Tensor, ...]:
        return self._task(self.config.batch_size, self.data_gen)

    def step(self, step: int, batch: tuple[torch.Tensor, ...]) -> StepResult:
        for group in self.opt.param_groups:
            group["lr"] = float(self._curves["lr_curve"][step])
        self.zero_grad()  # in train mode: built so, and test_error() restores it
        loss, error = _loss_and_error(self.model, batch)
        loss.backward()
        return self.step_result(step, loss, error)

    def step_result(self, step: int, loss: torch.Tensor, error: float) -> StepResult:
        """Keep the loss of ``step`` in the loss curve; the step's :class:`StepResult`."""
        self._curves["loss_curve"][step] = loss_value = loss.item()
        return StepResult(loss_value, error, math.isfinite(loss_value))

    def test_error(self) -> float:
        self.model.eval()
        try:
            with torch.no_grad():
                return _loss_and_error(self.model, self.test_set)[1]
        finally:
            self.model.train()

    def evaluates(self, step: int) -> bool:
        """Every recorded step, or only the last one for ``eval_every="final"`` (nothing else depends on it)."""
        return self.config.eval_every == "record" or step == self.config.steps - 1

    def update(self, step: int) -> None:
        self.opt.step()

    def where_diverged(self, step: int, row: dict[str, np.ndarray]) -> Divergence:
        bad = np.flatnonzero(row["nonfinite"] > 0)
        return Divergence(step, int(bad[0]) if len(bad) else -1)

    def final_arrays(self, diverged: Divergence | None) -> dict[str, np.ndarray]:
        self.probe_rows.append(self._probe())
        return {**{key: np.stack([row[key] for row in self.probe_rows]) for key in self.probe_rows[0]},
                "init_grad_norm": np.stack([r["grad_norm"] for r in self.init_rows]),
                "init_ffn_grad_norm": np.stack([r["ffn_grad_norm"] for r in self.init_rows])}

    def meta(self, recorder: TransformerRecorder) -> dict[str, object]:
        return {"sublayers": recorder.names("branch")}


def run(config: TransformerConfig, progress: bool | None = None) -> Trace:
    """Train ``config`` (:class:`TransformerTask` in :func:`simulation.loop.train`) and return its Trace.

    Arrays (T = recorded steps, L = layers, encoder first, S = sublayers, K = ``init_batches``):

    - ``step`` int64 [T]; ``loss`` float32 [T] (cross-entropy, nats per token) and ``error`` float32 [T]
      (fraction of wrong tokens) on the recorded batch, before that step's update; ``test_error`` float32 [T]
      on a fixed held-out set of 512 sequences (teacher-forced); with ``eval_every="final"`` only the last record
      holds it (the others NaN; all NaN after a divergence).
    - ``loss_curve``, ``lr_curve`` float32 [steps]: the loss and learning rate of every step.
    - ``grad_norm``, ``ffn_grad_norm``, ``out_grad_norm``, ``input_cos`` float64 [T, L]; ``nonfinite`` int64 [T, L]:
      see :class:`TransformerRecorder`.
    - ``init_grad_norm``, ``init_ffn_grad_norm`` float64 [K, L]: the same two norms at initialisation on K
      different batches (no update in between): Xiong et al. 2020, Fig. 3 averages over batches too.
    - ``rank_residual`` float64 [2, E + 1] (E encoder layers): :func:`encoder_token_residual` at initialisation
      (row 0) and after training (row 1): the input of the encoder, then every encoder layer's output.
    - ``lens_kl``, ``lens_top1``, ``lens_accuracy`` float64 [2, H + 1] (H layers of the stack that feeds the head):
      :func:`logit_lens` at initialisation (row 0) and after training (row 1), on the same 64 sequences.
    - ``input_norm``, ``branch_norm``, ``sum_norm``, ``out_norm`` float32 [T, S]: see :data:`SUBLAYER_KEYS`;
      ``branch_std`` float32 [T, S]: std over all elements of each Sublayer(.) output.

    ``meta.layers`` and ``meta.sublayers`` name them (``encoder.0``, ``decoder.1.cross_attn``);
    ``diverged`` / ``diverged_step`` / ``diverged_layer`` (first layer with a non-finite value) are set when
    a loss became non-finite; training then stops and the trace keeps what it recorded.
    """
    return train(TransformerTask, config, progress)


# torch's element-wise kernels run the first n - n % VECTOR_ROW values of a tensor in SIMD registers (2 vectors of
# 8 or 16 floats at a time) and the rest one by one, and Adam's lerp rounds those two ways differently (an fmadd in
# the registers): a stacked parameter whose rows are not a multiple of it would place some values on the other side.
VECTOR_ROW = 32


def run_together(configs: list[TransformerConfig], progress: bool | None = None) -> list[Trace]:
    """Train ``configs``, Transformer runs that differ only in their seed, as one stacked model
    (:mod:`simulation.kinds.stacked_transformer`) and return their traces in order: each the trace :func:`run` gives for
    its config alone, bit for bit, with ``meta.trained_with_seeds`` listing the seeds trained together. The
    gradients at initialisation, recorded steps, held-out passes and probes run each seed's own model (its
    parameters are rows of the stacked ones); only the steps between records run stacked. A run that diverges
    stops there as it would alone (its trace taken then); the others go on. Configs
    :func:`~simulation.kinds.stacked_transformer.transformer_stackable` refuses train one after the other. Raises
    ConfigError before any work when a run would not fit in memory, ValueError for configs that differ in more
    than the seed."""
    configs = list(configs)
    if not differ_only_in_seed(configs) or not isinstance(configs[0], TransformerConfig):
        raise ValueError("run_together trains Transformer runs that differ only in their seed")
    for config in configs:
        check_fits(TransformerTask, config)
    if len(configs) == 1 or not transformer_stackable(configs[0]):
        return [run(config, progress) for config in configs]
    with one_thread(), column_grads():
        return _run_together(configs)


def _run_together(configs: list[TransformerConfig]) -> list[Trace]:
    tasks = []
    for config in configs:  # each seed's model, data and batches exactly as run() builds them
        torch.manual_seed(config.seed)
        tasks.append(TransformerTask(config))
    runs = [RunLog(task) for task in tasks]
    template, stacked = stack_transformers([task.model for task in tasks])
    # One gradient buffer [S, parameters]: row s holds seed s's gradients (its parameters' .grad are views of it),
    # and each stacked parameter's .grad is a view of its columns, where the stacked backward accumulates. The
    # parameters whose rows are a multiple of VECTOR_ROW come first, and their numbers move into one buffer
    # [S, those parameters] laid out the same way, so that Adam steps them as one tensor (per-tensor calls were ~20 %
    # of a stacked step); the others are stepped per seed.
    params = [list(task.model.parameters()) for task in tasks]
    sizes = [parameter[0].numel() for parameter in stacked]
    order = sorted(range(len(stacked)), key=lambda index: sizes[index] % VECTOR_ROW != 0)
    n_flat = sum(size for size in sizes if size % VECTOR_ROW == 0)
    grads = gradient_rows(stacked, params, order)
    flat = nn.Parameter(torch.zeros(len(tasks), n_flat))
    offset, optimised = 0, [flat]
    for index in order:  # the same columns as the gradients': flat.grad is their first n_flat columns
        parameter, size = stacked[index], sizes[index]
        if offset < n_flat:
            flat.data[:, offset:offset + size] = parameter.detach().reshape(len(tasks), size)
            parameter.data = flat.data[:, offset:offset + size].view(parameter.shape)
            for own, numbers in zip(params, parameter.data):
                own[index].data = numbers
        else:
            optimised += [own[index] for own in params]
        offset += size
    flat.grad = grads[:, :n_flat]
    for row, task in enumerate(tasks):
        task.grads = grads[row]
    config = configs[0]
    opt = torch.optim.Adam(optimised, lr=config.lr, betas=(0.9, 0.98), eps=1e-9, foreach=True)  # TransformerTask's
    seeds = [c.seed for c in configs]
    traces: dict[int, Trace] = {}
    active = list(range(len(tasks)))
    with contextlib.ExitStack() as stack:
        recs = [stack.enter_context(task.recorder()) for task in tasks]
        for task, rec in zip(tasks, recs):
            task.before_training(rec)
        for step in range(config.steps):
            batches = {row: tasks[row].batch(step) for row in active}
            record = runs[0].records_step(step)  # one schedule: the configs differ only in the seed
            results = {}
            if not record:
                with tasks[0].unrecorded():  # as train() runs a step the recorder does not see
                    results = _stacked_step(template, tasks, grads, active, batches, step)
            for row in active:
                if record or not results[row].finite:  # alone with the recorder on (again: same weights, batch)
                    recs[row].arm()
                    results[row] = tasks[row].step(step, batches[row])
            for row in list(active):
                if runs[row].after_step(step, results[row], recs[row], record):  # diverged: its trace now
                    active.remove(row)
                    traces[row] = runs[row].trace(recs[row], trained_with_seeds=seeds)
            if not active:
                break
            for group in opt.param_groups:
                group["lr"] = float(tasks[0].curves()["lr_curve"][step])
            with tasks[0].unrecorded():
                opt.step()  # a run that stopped has its trace: nothing reads its weights after
        for row in active:
            traces[row] = runs[row].trace(recs[row], trained_with_seeds=seeds)
    return [traces[row] for row in range(len(tasks))]


def _stacked_step(template: nn.Module, tasks: list[TransformerTask], grads: torch.Tensor, active: list[int],
                  batches: dict[int, tuple[torch.Tensor, ...]], step: int) -> dict[int, StepResult]:
    """One forward and backward pass of every seed at once through the stacked ``template``; a seed that has
    stopped runs on another seed's batch, its loss left out."""
    fill = batches[active[0]]
    src, tgt_in, tgt = (torch.stack([batches.get(row, fill)[part] for row in range(len(tasks))]) for part in range(3))
    grads.zero_()
    logits = template(src, tgt_in).unbind(0)  # unbind: each row's gradient goes back as it is
    losses = {row: _logits_loss_and_error(logits[row], tgt[row]) for row in active}
    torch.stack([loss for loss, _ in losses.values()]).sum().backward()  # d(sum)/d(loss_s) = 1: each seed's own
    return {row: tasks[row].step_result(step, loss, error) for row, (loss, error) in losses.items()}


main = functools.partial(loop_main, TransformerTask, TransformerConfig, prog="python -m simulation.kinds.transformer")


if __name__ == "__main__":
    sys.exit(main())
