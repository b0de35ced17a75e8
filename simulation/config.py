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
from typing import Any

__all__ = ["RunConfig", "ConfigError", "SIM_VERSION", "parse_value"]

# Bump when a change to simulation code changes what a run records: it invalidates every cached trace.
SIM_VERSION = 1

ARCHS = ("plain", "residual")
ACTIVATIONS = ("sigmoid", "tanh", "relu")
NORMS = ("none", "batchnorm")
DATASETS = ("digits",)
OPTIMIZERS = ("sgd", "adam")
MAX_WIDTH = 4096
MAX_DEPTH = 1000


class ConfigError(ValueError):
    """A parameter has a wrong name, type or value; the message is one line for the user."""


@dataclass(frozen=True)
class RunConfig:
    """Everything that changes a training run; its :meth:`digest` is the trace cache key."""

    arch: str = "plain"  # "plain": h = F(h); "residual": h = h + F(h) (clean identity path)
    depth: int = 10  # number of blocks between the stem and the head
    width: int = 32  # hidden units of every block (input and output of F)
    activation: str = "sigmoid"  # nonlinearity inside F: sigmoid | tanh | relu
    norm: str = "none"  # "batchnorm" puts BatchNorm1d after each Linear of F
    dataset: str = "digits"  # sklearn.datasets.load_digits: 1797 8x8 images, 10 classes
    steps: int = 300  # optimiser steps
    batch_size: int = 64  # examples per step, drawn from the training split
    lr: float = 0.05  # learning rate
    optimizer: str = "sgd"  # sgd (with momentum) | adam
    momentum: float = 0.9  # SGD momentum; ignored by adam
    init_gain: float = 1.0  # multiplies PyTorch's default init of every Linear weight in the blocks
    record_every: int = 10  # record statistics at step 0 and every k steps (and at the last step)
    seed: int = 0  # seeds data split, init and batch order

    def __post_init__(self) -> None:
        _validate(self)

    def digest(self) -> str:
        """16 hex chars of SHA-256 over every field and ``SIM_VERSION``; stable across runs."""
        payload = json.dumps({"sim_version": SIM_VERSION, **self.to_dict()}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "RunConfig":
        """A copy with ``changes`` applied; unknown keys raise :class:`ConfigError`."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ConfigError(f"unknown parameter {unknown[0]!r}; known: {', '.join(sorted(known))}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        return cls().replace(**data)

    @classmethod
    def field_types(cls) -> dict[str, type]:
        return {f.name: type(f.default) for f in fields(cls)}


def parse_value(key: str, text: str) -> Any:
    """Convert the command-line string ``text`` to the type of ``RunConfig.key``.

    Raises ConfigError for an unknown key or a value of the wrong type.
    """
    types = RunConfig.field_types()
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


def _validate(cfg: RunConfig) -> None:
    for f in fields(cfg):
        value, expected = getattr(cfg, f.name), type(f.default)
        if expected is float and type(value) is int:
            value = float(value)  # TOML and JSON write 1 for 1.0
            object.__setattr__(cfg, f.name, value)
        if type(value) is not expected:
            raise ConfigError(f"{f.name} must be {expected.__name__}, got {value!r}")
    _choice("arch", cfg.arch, ARCHS)
    _choice("activation", cfg.activation, ACTIVATIONS)
    _choice("norm", cfg.norm, NORMS)
    _choice("dataset", cfg.dataset, DATASETS)
    _choice("optimizer", cfg.optimizer, OPTIMIZERS)
    if not 1 <= cfg.depth <= MAX_DEPTH:
        raise ConfigError(f"depth must be between 1 and {MAX_DEPTH}; got {cfg.depth}")
    if not 1 <= cfg.width <= MAX_WIDTH:
        raise ConfigError(f"width must be between 1 and {MAX_WIDTH}; got {cfg.width}")
    for name in ("lr", "init_gain"):
        value = getattr(cfg, name)
        if not math.isfinite(value) or value <= 0:
            raise ConfigError(f"{name} must be a finite number > 0; got {value}")
    if not math.isfinite(cfg.momentum) or not 0 <= cfg.momentum < 1:
        raise ConfigError(f"momentum must be in [0, 1); got {cfg.momentum}")
    if cfg.steps < 1:
        raise ConfigError(f"steps must be >= 1; got {cfg.steps}")
    if cfg.batch_size < 2:
        raise ConfigError(f"batch_size must be >= 2; got {cfg.batch_size}")
    if cfg.record_every < 1:
        raise ConfigError(f"record_every must be >= 1; got {cfg.record_every}")
