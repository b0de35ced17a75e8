"""Small models for the user-model tests (issue 20): each one a way people write residual networks.

The factories take ``seed``-free arguments; the tests seed torch themselves. torchvision is imported only
through :func:`torchvision_models` (its CPU-less wheel needs simulation.kinds.user_model's import shim first).
"""

from __future__ import annotations

import torch
from torch import nn


def torchvision_models():
    from simulation.kinds.user_model import allow_torchvision_without_ops

    allow_torchvision_without_ops()
    import torchvision.models

    return torchvision.models


def tiny_gpt2(layers: int = 2, vocab: int = 9, positions: int = 16, width: int = 16, dropout: float = 0.0):
    """A Hugging Face GPT-2 built from a small GPT2Config (no download)."""
    from simulation.kinds.user_model import allow_torchvision_without_ops

    allow_torchvision_without_ops()
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    config = GPT2Config(vocab_size=vocab, n_positions=positions, n_embd=width, n_layer=layers, n_head=2,
                        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config)


def encoder(norm_first: bool, layers: int = 2, width: int = 16, dropout: float = 0.0) -> nn.Module:
    """nn.TransformerEncoder (batch first) with a linear head: [B, T, width] -> [B, T, width]."""
    layer = nn.TransformerEncoderLayer(width, 2, 2 * width, dropout=dropout, batch_first=True, norm_first=norm_first)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


class InplaceMLP(nn.Module):
    """h += f(h), f = ReLU -> Linear -> ReLU(inplace=True) -> Linear (pre-activation, He et al. 2016)."""

    def __init__(self, n_in: int = 64, width: int = 16, depth: int = 3, n_out: int = 10) -> None:
        super().__init__()
        self.stem = nn.Linear(n_in, width)
        self.layers = nn.ModuleList(nn.Sequential(nn.ReLU(), nn.Linear(width, width), nn.ReLU(inplace=True),
                                                  nn.Linear(width, width)) for _ in range(depth))
        self.head = nn.Linear(width, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for f in self.layers:
            h += f(h)
        return self.head(h)

    def manual(self, x: torch.Tensor, residual: bool = True) -> tuple[torch.Tensor, list, list]:
        """The same forward written out of place: (logits, [x_l], [h_l]) with every tensor kept for autograd."""
        h, inputs, outputs = self.stem(x), [], []
        for f in self.layers:
            inputs.append(h)
            h = h + f(h) if residual else f(h)
            outputs.append(h)
        return self.head(h), inputs, outputs


class Twice(nn.Module):
    """One block module used twice: h = h + block(h); h = h + block(h)."""

    def __init__(self, n_in: int = 64, width: int = 16, n_out: int = 10) -> None:
        super().__init__()
        self.stem = nn.Linear(n_in, width)
        self.block = nn.Sequential(nn.Linear(width, width), nn.Tanh())
        self.head = nn.Linear(width, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        h = h + self.block(h)
        h = h + self.block(h)
        return self.head(h)


class Plain(nn.Sequential):
    """No residual addition at all."""

    def __init__(self, n_in: int = 64, width: int = 16, n_out: int = 10) -> None:
        super().__init__(nn.Linear(n_in, width), nn.ReLU(), nn.Linear(width, n_out))


class FunctionalBlock(nn.Module):
    """A residual block whose branch uses its weight directly (no module call inside): only a glob finds it."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width, width) / width ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(x @ self.weight)


class FunctionalNet(nn.Module):
    def __init__(self, n_in: int = 64, width: int = 16, depth: int = 2, n_out: int = 10) -> None:
        super().__init__()
        self.stem = nn.Linear(n_in, width)
        self.blocks = nn.ModuleList(FunctionalBlock(width) for _ in range(depth))
        self.head = nn.Linear(width, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)
