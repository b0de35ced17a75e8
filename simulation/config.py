"""Frozen run configurations and their cache digest (torch-free).

Example::

    python -c "from simulation.config import RunConfig; print(RunConfig(depth=20).digest())"
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, fields
from typing import Any, Self

__all__ = ["config_from_sets", "RunConfig", "ConfigError", "SIM_VERSION", "parse_value", "block_widths"]

# Bump when a change to simulation code changes what a run records: it invalidates every cached trace.
SIM_VERSION = 4  # 4: transformer traces record input_cos

ARCHS = ("plain", "residual")
ACTIVATIONS = ("sigmoid", "tanh", "relu")
NORMS = ("none", "batchnorm")
DATASETS = ("digits", "bands")
SHORTCUTS = ("projection", "zero_pad")
OPTIMIZERS = ("sgd", "adam")
MAX_WIDTH = 4096
MAX_DEPTH = 1000


class ConfigError(ValueError):
    """A parameter has a wrong name, type or value; the message is one line for the user."""


class _Config:
    """What every run config shares: the cache digest, dict round trip, checked ``replace``."""

    def digest(self) -> str:
        """16 hex chars of SHA-256 over every field and ``SIM_VERSION``; stable across runs."""
        payload = json.dumps({"sim_version": SIM_VERSION, **self.to_dict()}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied; unknown keys raise :class:`ConfigError`."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ConfigError(f"unknown parameter {unknown[0]!r}; known: {', '.join(sorted(known))}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return cls().replace(**data)

    @classmethod
    def field_types(cls) -> dict[str, type]:
        return {f.name: type(f.default) for f in fields(cls)}


@dataclass(frozen=True)
class RunConfig(_Config):
    """Everything that changes a training run; its :meth:`digest` is the trace cache key."""

    arch: str = "plain"  # "plain": h = F(h); "residual": h = h + F(h) (clean identity path)
    depth: int = 10  # number of blocks between the stem and the head
    width: int = 32  # hidden units of the blocks of the first stage (input and output of F)
    stages: int = 1  # width doubles at the first block of each later stage (He et al. 2015, §3.3)
    shortcut: str = "projection"  # where the width changes: "projection" W_s x | "zero_pad" x (He 2015 options B | A)
    activation: str = "sigmoid"  # nonlinearity inside F: sigmoid | tanh | relu
    norm: str = "none"  # "batchnorm" puts BatchNorm1d after each Linear of F
    dataset: str = "digits"  # "digits": sklearn's 1797 8x8 images, 10 classes; "bands": seeded scalar x, 2 classes
    steps: int = 300  # optimiser steps
    batch_size: int = 64  # examples per step, drawn from the training split
    lr: float = 0.05  # learning rate
    optimizer: str = "sgd"  # sgd (with momentum) | adam
    momentum: float = 0.9  # SGD momentum; ignored by adam
    weight_decay: float = 0.0  # L2 penalty on every parameter, as in torch.optim (He et al. 2015 use 1e-4)
    init_gain: float = 1.0  # multiplies PyTorch's default init of every Linear weight in the blocks
    record_every: int = 10  # record statistics at step 0 and every k steps (and at the last step)
    seed: int = 0  # seeds data split, init and batch order

    def __post_init__(self) -> None:
        _validate(self)

    def block_widths(self) -> list[tuple[int, int]]:
        """(width in, width out) of every block; see :func:`block_widths`."""
        return block_widths(self.width, self.depth, self.stages)



def block_widths(width: int, depth: int, stages: int = 1) -> list[tuple[int, int]]:
    """(width in, width out) of each of ``depth`` blocks split into ``stages`` near-equal runs; the first
    block of every later stage doubles the width, as ResNet stages do (He et al. 2015, §3.3, Table 1).
    A residual block whose widths differ needs a projection (or zero-padded) shortcut."""
    starts = {depth * s // stages for s in range(1, stages)}
    widths, current = [], width
    for index in range(depth):
        width_in = current
        if index in starts:
            current *= 2
        widths.append((width_in, current))
    return widths


def parse_value(key: str, text: str, cls: type | None = None) -> Any:
    """Convert the command-line string ``text`` to the type of ``cls.key`` (``cls`` default RunConfig).

    Raises ConfigError for an unknown key or a value of the wrong type.
    """
    types = (cls or RunConfig).field_types()
    if key not in types:
        raise ConfigError(f"unknown parameter {key!r}; known: {', '.join(sorted(types))}")
    kind = types[key]
    try:
        if kind is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
        return str(text)
    except ValueError:
        raise ConfigError(f"{key} must be {kind.__name__}, got {text!r}") from None


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _check_types(cfg: _Config) -> None:
    """Every field holds the type of its default (an int where a float is expected is converted)."""
    for f in fields(cfg):
        value, expected = getattr(cfg, f.name), type(f.default)
        if expected is float and type(value) is int:
            value = float(value)  # TOML and JSON write 1 for 1.0
            object.__setattr__(cfg, f.name, value)
        if type(value) is not expected:
            raise ConfigError(f"{f.name} must be {expected.__name__}, got {value!r}")


def config_from_sets(cls: type[_Config], pairs: list[str]) -> _Config:
    """``cls`` with command-line ``key=value`` pairs applied (typed by :func:`parse_value`).

    Raises ConfigError for a pair without '=', an unknown key, a wrong type or an invalid value."""
    changes = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"expected key=value, got {pair!r}")
        changes[key.strip()] = parse_value(key.strip(), value.strip(), cls)
    return cls().replace(**changes)


def _validate(cfg: RunConfig) -> None:
    _check_types(cfg)
    _choice("arch", cfg.arch, ARCHS)
    _choice("activation", cfg.activation, ACTIVATIONS)
    _choice("norm", cfg.norm, NORMS)
    _choice("dataset", cfg.dataset, DATASETS)
    _choice("optimizer", cfg.optimizer, OPTIMIZERS)
    _choice("shortcut", cfg.shortcut, SHORTCUTS)
    if not 1 <= cfg.depth <= MAX_DEPTH:
        raise ConfigError(f"depth must be between 1 and {MAX_DEPTH}; got {cfg.depth}")
    if not 1 <= cfg.width <= MAX_WIDTH:
        raise ConfigError(f"width must be between 1 and {MAX_WIDTH}; got {cfg.width}")
    if not 1 <= cfg.stages <= cfg.depth:
        raise ConfigError(f"stages must be between 1 and depth ({cfg.depth}); got {cfg.stages}")
    if cfg.width * 2 ** (cfg.stages - 1) > MAX_WIDTH:
        raise ConfigError(f"width * 2**(stages - 1) must be at most {MAX_WIDTH}; got {cfg.width} and {cfg.stages} stages")
    for name in ("lr", "init_gain"):
        value = getattr(cfg, name)
        if not math.isfinite(value) or value <= 0:
            raise ConfigError(f"{name} must be a finite number > 0; got {value}")
    if not math.isfinite(cfg.weight_decay) or cfg.weight_decay < 0:
        raise ConfigError(f"weight_decay must be a finite number >= 0; got {cfg.weight_decay}")
    if not math.isfinite(cfg.momentum) or not 0 <= cfg.momentum < 1:
        raise ConfigError(f"momentum must be in [0, 1); got {cfg.momentum}")
    if cfg.steps < 1:
        raise ConfigError(f"steps must be >= 1; got {cfg.steps}")
    if cfg.batch_size < 2:
        raise ConfigError(f"batch_size must be >= 2; got {cfg.batch_size}")
    if cfg.record_every < 1:
        raise ConfigError(f"record_every must be >= 1; got {cfg.record_every}")


# -- Transformer runs (experiment "layernorm"; trained by simulation.transformer) ----------------

TRANSFORMER_ARCHS = ("encoder", "encoder_decoder")
LN_PLACEMENTS = ("post_ln", "pre_ln")
TASKS = ("copy", "reverse", "sort")
INITS = ("xavier", "pytorch")
MAX_TRANSFORMER_DEPTH = 64
MAX_VOCAB = 1000
MAX_SEQ_LEN = 512


@dataclass(frozen=True)
class TransformerConfig(_Config):
    """A small Transformer on a toy sequence task; its :meth:`digest` is the trace cache key."""

    kind: str = "transformer"  # which trainer runs this config; always "transformer" (see config_from_dict)
    arch: str = "encoder_decoder"  # "encoder": encoder layers only; "encoder_decoder": + as many decoder layers
    norm: str = "post_ln"  # "post_ln": x = LN(x + F(x)) (Vaswani 2017); "pre_ln": x = x + F(LN(x)) (Xiong 2020)
    task: str = "reverse"  # target = the input sequence copied | reversed | sorted
    depth: int = 6  # layers in the encoder, and in the decoder when there is one
    width: int = 32  # d_model: width of the residual stream (even, divisible by heads)
    heads: int = 4  # attention heads per attention sublayer
    ffn_width: int = 128  # hidden units of each position-wise FFN (Vaswani: 4 x d_model)
    vocab: int = 8  # distinct symbols in a sequence (token 0 is reserved for BOS)
    seq_len: int = 8  # tokens per sequence
    init: str = "xavier"  # Linear weights: "xavier" (Vaswani, fairseq, Xiong) | "pytorch" (nn.Linear default)
    steps: int = 300  # optimiser steps (Adam, betas 0.9 / 0.98)
    batch_size: int = 32  # sequences per step, freshly drawn from the seeded task
    lr: float = 1e-3  # peak learning rate
    warmup_steps: int = 0  # linear warm-up from lr / warmup_steps to lr over this many steps; 0: none
    init_batches: int = 8  # batches whose gradient norms at initialisation are recorded (no update between)
    record_every: int = 10  # record statistics at step 0 and every k steps (and at the last step)
    seed: int = 0  # seeds init, the training batches and the held-out test set

    def __post_init__(self) -> None:
        _validate_transformer(self)



def config_from_dict(data: dict[str, Any]) -> "RunConfig | TransformerConfig":
    """The config written by ``to_dict``: a TransformerConfig when ``data["kind"] == "transformer"``, else a
    RunConfig. Raises ConfigError for an unknown kind, key or value."""
    kind = data.get("kind", "mlp")
    if kind == "transformer":
        return TransformerConfig.from_dict(data)
    if kind == "identity_fit":
        return IdentityFitConfig.from_dict(data)
    if kind != "mlp":
        raise ConfigError(f"unknown config kind {kind!r}; known: mlp, transformer, identity_fit")
    if "kind" not in RunConfig.field_types():
        data = {k: v for k, v in data.items() if k != "kind"}
    return RunConfig.from_dict(data)


def _validate_transformer(cfg: TransformerConfig) -> None:
    _check_types(cfg)
    _choice("kind", cfg.kind, ("transformer",))
    _choice("arch", cfg.arch, TRANSFORMER_ARCHS)
    _choice("norm", cfg.norm, LN_PLACEMENTS)
    _choice("task", cfg.task, TASKS)
    _choice("init", cfg.init, INITS)
    bounds = {"depth": (1, MAX_TRANSFORMER_DEPTH), "width": (2, MAX_WIDTH), "heads": (1, MAX_WIDTH),
              "ffn_width": (1, 4 * MAX_WIDTH), "vocab": (2, MAX_VOCAB), "seq_len": (2, MAX_SEQ_LEN),
              "steps": (1, 10**7), "batch_size": (1, 10**5), "init_batches": (1, 1000),
              "record_every": (1, 10**7), "warmup_steps": (0, 10**7)}
    for name, (low, high) in bounds.items():
        value = getattr(cfg, name)
        if not low <= value <= high:
            raise ConfigError(f"{name} must be between {low} and {high}; got {value}")
    if cfg.width % 2 or cfg.width % cfg.heads:
        raise ConfigError(f"width must be even and divisible by heads ({cfg.heads}); got {cfg.width}")
    if not math.isfinite(cfg.lr) or cfg.lr <= 0:
        raise ConfigError(f"lr must be a finite number > 0; got {cfg.lr}")


# -- Identity-fit runs (experiment "identity_fit"; trained by simulation.identity_fit) ------------

@dataclass(frozen=True)
class IdentityFitConfig(_Config):
    """One block trained to output its own input (H(x) = x) on the digits features; the cache key."""

    kind: str = "identity_fit"  # which trainer runs this config; always "identity_fit"
    arch: str = "plain"  # "plain": h = F(x) must become x; "residual": h = x + F(x), F must become 0
    activation: str = "relu"  # nonlinearity inside F: sigmoid | tanh | relu
    steps: int = 1500  # optimiser steps, each on the whole training split (full batch)
    optimizer: str = "adam"  # sgd (with momentum) | adam
    lr: float = 1e-3  # learning rate
    momentum: float = 0.9  # SGD momentum; ignored by adam
    tolerance: float = 0.01  # the fit counts as reached once ||h - x||^2 / ||x||^2 falls below this
    record_every: int = 10  # record the test loss at step 0 and every k steps (and at the last step)
    seed: int = 0  # seeds the data split and the init (plain and residual get the same weights)

    def __post_init__(self) -> None:
        _check_types(self)
        _choice("kind", self.kind, ("identity_fit",))
        _choice("arch", self.arch, ARCHS)
        _choice("activation", self.activation, ACTIVATIONS)
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        if not 1 <= self.steps <= 10**6:
            raise ConfigError(f"steps must be between 1 and 1000000; got {self.steps}")
        if self.record_every < 1:
            raise ConfigError(f"record_every must be >= 1; got {self.record_every}")
        for name in ("lr", "tolerance"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{name} must be a finite number > 0; got {value}")
        if not math.isfinite(self.momentum) or not 0 <= self.momentum < 1:
            raise ConfigError(f"momentum must be in [0, 1); got {self.momentum}")


__all__ += ["TransformerConfig", "IdentityFitConfig", "config_from_dict"]
