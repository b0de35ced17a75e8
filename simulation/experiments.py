"""Named experiments: each a set of runs that tells one story (torch-free).

Example::

    python render.py train vanishing --set depths=8,20 --seed 1

An experiment turns its parameters (every :class:`RunConfig` field plus its own, such as ``depths``)
into named runs. ``build_runs`` validates the parameters and returns ``{run_name: RunConfig}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable

from .config import ConfigError, RunConfig, parse_value

__all__ = ["Experiment", "EXPERIMENTS", "get_experiment", "build_runs", "split_params"]


def _int_list(text: str | list | tuple) -> tuple[int, ...]:
    if isinstance(text, (list, tuple)):
        values = tuple(text)
    else:
        values = tuple(part.strip() for part in str(text).split(",") if part.strip())
    try:
        out = tuple(int(v) for v in values)
    except (TypeError, ValueError):
        raise ConfigError(f"expected a comma-separated list of integers, got {text!r}") from None
    if not out:
        raise ConfigError("expected at least one integer")
    return out


@dataclass(frozen=True)
class Experiment:
    """``build(base, extra) -> {run_name: RunConfig}``; ``extra`` holds the experiment's own
    parameters (defaults in ``extra_defaults``, converters in ``extra_types``)."""

    name: str
    description: str  # one line for `render.py list`
    source: str  # paper and figure whose claim this reproduces
    base: RunConfig
    build: Callable[[RunConfig, dict[str, Any]], dict[str, RunConfig]]
    extra_defaults: dict[str, Any] = field(default_factory=dict)
    extra_types: dict[str, Callable[[Any], Any]] = field(default_factory=dict)

    def params(self) -> dict[str, tuple[Any, str]]:
        """Every parameter with its default and type name, for `render.py list`."""
        out = {f.name: (getattr(self.base, f.name), type(f.default).__name__) for f in fields(RunConfig)}
        for key, value in self.extra_defaults.items():
            out[key] = (value, "list[int]" if isinstance(value, tuple) else type(value).__name__)
        return out


def split_params(experiment: Experiment, overrides: dict[str, Any]) -> tuple[RunConfig, dict[str, Any]]:
    """Apply ``overrides`` (values may be strings from the command line) to the base config and
    the experiment's own parameters. Raises ConfigError for an unknown key or a bad value."""
    run_keys = RunConfig.field_types()
    base_changes, extra = {}, dict(experiment.extra_defaults)
    for key, value in overrides.items():
        if key in run_keys:
            base_changes[key] = parse_value(key, value) if isinstance(value, str) else value
        elif key in experiment.extra_defaults:
            extra[key] = experiment.extra_types.get(key, type(experiment.extra_defaults[key]))(value)
        else:
            known = sorted(set(run_keys) | set(experiment.extra_defaults))
            raise ConfigError(f"unknown parameter {key!r} for experiment {experiment.name!r}; known: {', '.join(known)}")
    return experiment.base.replace(**base_changes), extra


def build_runs(name: str, overrides: dict[str, Any] | None = None) -> dict[str, RunConfig]:
    """The validated runs of experiment ``name`` with ``overrides`` applied."""
    experiment = get_experiment(name)
    base, extra = split_params(experiment, overrides or {})
    return experiment.build(base, extra)


def get_experiment(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise ConfigError(f"unknown experiment {name!r}; available: {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]


# -- the experiments --------------------------------------------------------------------------

def _plain_vs_residual(base: RunConfig, extra: dict[str, Any]) -> dict[str, RunConfig]:
    return {arch: base.replace(arch=arch) for arch in ("plain", "residual")}


def _vanishing(base: RunConfig, extra: dict[str, Any]) -> dict[str, RunConfig]:
    return {f"{arch}_{act}_d{depth}": base.replace(arch=arch, activation=act, depth=depth)
            for act in extra["activations"].split(",")
            for depth in extra["depths"]
            for arch in ("plain", "residual")}


EXPERIMENTS: dict[str, Experiment] = {}


def _register(experiment: Experiment) -> None:
    EXPERIMENTS[experiment.name] = experiment


_register(Experiment(
    name="chain_rule",
    description="plain vs residual sigmoid MLP of one depth: per-layer gradient norms (chain-rule product)",
    source="He et al. 2015 §1 (vanishing gradients); Glorot & Bengio 2010",
    base=RunConfig(activation="sigmoid", depth=10, steps=200),
    build=_plain_vs_residual,
))
_register(Experiment(
    name="vanishing",
    description="E1: plain vs residual at several depths, sigmoid and tanh: first/last layer gradient ratio",
    source="He et al. 2015 §1; sigma' <= 1/4",
    base=RunConfig(steps=200),
    build=_vanishing,
    extra_defaults={"depths": (8, 20, 56), "activations": "sigmoid,tanh"},
    extra_types={"depths": _int_list, "activations": str},
))
_register(Experiment(
    name="residual_response",
    description="E4: trained ReLU nets, ||F(x)|| / ||x|| and std of each block's residual branch",
    source="He et al. 2015, Fig. 7",
    base=RunConfig(activation="relu", depth=10, steps=400, lr=0.02),
    build=_plain_vs_residual,
))
