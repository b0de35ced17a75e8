"""Named experiments: each a set of runs that tells one story (torch-free).

Example::

    python render.py train vanishing --set depths=8,20 --seed 1

An experiment turns its parameters (every :class:`RunConfig` field plus its own, such as ``depths``)
into named runs. ``build_runs`` validates the parameters and returns ``{run_name: RunConfig}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable

from .config import ConfigError, IdentityFitConfig, RunConfig, TransformerConfig, parse_value

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
        out = {f.name: (getattr(self.base, f.name), type(f.default).__name__) for f in fields(type(self.base))}
        for key, value in self.extra_defaults.items():
            out[key] = (value, f"list[{type(value[0]).__name__}]" if isinstance(value, tuple) else type(value).__name__)
        return out


def split_params(experiment: Experiment, overrides: dict[str, Any]) -> tuple[RunConfig, dict[str, Any]]:
    """Apply ``overrides`` (values may be strings from the command line) to the base config and
    the experiment's own parameters. Raises ConfigError for an unknown key or a bad value."""
    run_keys = type(experiment.base).field_types()
    base_changes, extra = {}, dict(experiment.extra_defaults)
    for key, value in overrides.items():
        if key in run_keys:
            base_changes[key] = parse_value(key, value, type(experiment.base)) if isinstance(value, str) else value
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

def _float_list(text: str | list | tuple) -> tuple[float, ...]:
    if isinstance(text, (list, tuple)):
        values = tuple(text)
    else:
        values = tuple(part.strip() for part in str(text).split(",") if part.strip())
    try:
        out = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise ConfigError(f"expected a comma-separated list of numbers, got {text!r}") from None
    if not out:
        raise ConfigError("expected at least one number")
    return out


def _float(text: str | float) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ConfigError(f"expected a number, got {text!r}") from None


def _name(value: float) -> str:
    """A number as it appears in a run name: 2.5 -> "2p5" (dots separate trace keys)."""
    return f"{value:g}".replace(".", "p").replace("-", "m")


def _plain_vs_residual(base: RunConfig, extra: dict[str, Any]) -> dict[str, RunConfig]:
    return {arch: base.replace(arch=arch) for arch in ("plain", "residual")}


def _by_depth(base: RunConfig, extra: dict[str, Any]) -> dict[str, RunConfig]:
    """``{arch}_d{depth}`` for plain and residual at every depth of ``extra["depths"]``."""
    return {f"{arch}_d{depth}": base.replace(arch=arch, depth=depth)
            for depth in dict.fromkeys(extra["depths"]) for arch in ("plain", "residual")}


def _vanishing(base: RunConfig, extra: dict[str, Any]) -> dict[str, RunConfig]:
    return {f"{arch}_{act}_d{depth}": base.replace(arch=arch, activation=act, depth=depth)
            for act in dict.fromkeys(a.strip() for a in extra["activations"].split(","))
            for depth in dict.fromkeys(extra["depths"])
            for arch in ("plain", "residual")}


def _exploding(base: RunConfig, extra: dict[str, Any]) -> dict[str, RunConfig]:
    """``plain_gain{g}`` for every init gain, and ``plain_large_lr``: the base gain at ``large_lr``."""
    runs = {f"plain_gain{_name(gain)}": base.replace(arch="plain", init_gain=gain) for gain in extra["gains"]}
    runs["plain_large_lr"] = base.replace(arch="plain", lr=extra["large_lr"])
    return runs


def _projection(base: RunConfig, extra: dict[str, Any]) -> dict[str, RunConfig]:
    """Plain, residual with projection shortcuts W_s, residual with zero-padded shortcuts."""
    return {"plain": base.replace(arch="plain"),
            "residual": base.replace(arch="residual", shortcut="projection"),
            "residual_zero_pad": base.replace(arch="residual", shortcut="zero_pad")}


EXPERIMENTS: dict[str, Experiment] = {}


def _register(experiment: Experiment) -> None:
    EXPERIMENTS[experiment.name] = experiment


# Trained ReLU + BatchNorm nets shared by E4 and E6 (same configs, so one cache entry each).
_TRAINED_BN = RunConfig(activation="relu", norm="batchnorm", depth=10, steps=300, batch_size=128, lr=0.1,
                        weight_decay=2e-3)

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
    source="He et al. 2015 §1; Glorot & Bengio 2010; sigma' <= 1/4",
    base=RunConfig(steps=200),
    build=_vanishing,
    extra_defaults={"depths": (8, 20, 56), "activations": "sigmoid,tanh"},
    extra_types={"depths": _int_list, "activations": str},
))
_register(Experiment(
    name="exploding",
    description="E2: plain ReLU nets with init gain 1, 2, 3 (vanishing, near-critical, exploding) and a large lr: "
                "per-layer growth and a run that diverges",
    source="Glorot & Bengio 2010; He et al. 2015 (PReLU paper) §2.2: per-layer gain of a ReLU net",
    base=RunConfig(activation="relu", depth=20, steps=100, lr=0.01, init_gain=2.0),
    build=_exploding,
    extra_defaults={"gains": (1.0, 2.0, 3.0), "large_lr": 1.0},
    extra_types={"gains": _float_list, "large_lr": _float},
))
_register(Experiment(
    name="degradation",
    description="E3: ReLU + BatchNorm, plain vs residual at depths 8/20/56, same step budget: training loss "
                "and error curves",
    source="He et al. 2015, Fig. 1 and Fig. 6 (and §4.1: not vanishing gradients)",
    base=RunConfig(activation="relu", norm="batchnorm", steps=200, batch_size=128, lr=0.05),
    build=_by_depth,
    extra_defaults={"depths": (8, 20, 56)},
    extra_types={"depths": _int_list},
))
_register(Experiment(
    name="residual_response",
    description="E4: trained ReLU + BatchNorm nets: ||F(x)|| / ||x|| and std of each block's residual branch",
    source="He et al. 2015, Fig. 7",
    base=_TRAINED_BN,
    build=_plain_vs_residual,
))
_register(Experiment(
    name="paths",
    description="E6: residual nets as ensembles of paths: path-length distribution and test error with one "
                "block deleted, plain vs residual",
    source="Veit et al. 2016, Fig. 3 (lesion) and Fig. 6a (path lengths)",
    base=_TRAINED_BN,
    build=_plain_vs_residual,
))
_register(Experiment(
    name="shattered",
    description="E7: gradient of the output w.r.t. a scalar input swept over [-2, 2] at init, plain vs "
                "residual, and its autocorrelation",
    source="Balduzzi et al. 2017, Fig. 1 and Fig. 2",
    base=RunConfig(dataset="bands", activation="relu", norm="batchnorm", width=200, steps=100,
                   batch_size=128, lr=0.05),
    build=_by_depth,
    extra_defaults={"depths": (2, 24, 50)},
    extra_types={"depths": _int_list},
))
_register(Experiment(
    name="projection",
    description="E8: three stages of widths 16/32/64: the shortcut of a block that doubles the width is a "
                "projection W_s x (or zero-padded x)",
    source="He et al. 2015, eq. 2, §3.3 and Table 3 (options A and B)",
    base=RunConfig(activation="relu", norm="batchnorm", depth=12, width=16, stages=3, steps=200,
                   batch_size=128, lr=0.05),
    build=_projection,
))

def _layernorm(base: TransformerConfig, extra: dict[str, Any]) -> dict[str, TransformerConfig]:
    """Post-LN without and with warm-up, Pre-LN without: all at the same (high) peak lr."""
    return {"post_ln": base.replace(norm="post_ln", warmup_steps=0),
            "post_ln_warmup": base.replace(norm="post_ln"),
            "pre_ln": base.replace(norm="pre_ln", warmup_steps=0)}


_register(Experiment(
    name="layernorm",
    description="E5: Post-LN vs Pre-LN Transformer (6+6 layers, reverse task): per-layer gradient norms at init; "
                "a high lr with and without warm-up",
    source="Xiong et al. 2020, Fig. 2 (warm-up), Fig. 3 (gradient norms at init); Vaswani et al. 2017, Fig. 1",
    base=TransformerConfig(task="reverse", depth=6, width=32, steps=200, batch_size=16, lr=5e-3, warmup_steps=60),
    build=_layernorm,
))


# -- the study note's questions (issue 13) ------------------------------------------------------

def _seeds(base: RunConfig, extra: dict[str, Any]) -> dict[str, RunConfig]:
    """``residual_seed{k}``: the residual run at seeds seed, seed + 1, ..., seed + seeds - 1."""
    if extra["seeds"] < 1:
        raise ConfigError(f"seeds must be >= 1; got {extra['seeds']}")
    return {f"residual_seed{k}": base.replace(arch="residual", seed=base.seed + k) for k in range(extra["seeds"])}


_register(Experiment(
    name="does_it_copy",
    description="Does a residual net only learn to copy? ||F(x)|| / ||x|| per block over training beside the "
                "loss, on several seeds (the residual runs of residual_response)",
    source="He et al. 2015, §3.1 and Fig. 7; the study note's question 2 of section 6",
    base=_TRAINED_BN,
    build=_seeds,
    extra_defaults={"seeds": 5},
    extra_types={"seeds": int},
))


def _identity_fit(base: IdentityFitConfig, extra: dict[str, Any]) -> dict[str, IdentityFitConfig]:
    return {arch: base.replace(arch=arch) for arch in ("plain", "residual")}


_register(Experiment(
    name="identity_fit",
    description="Is 'keep as is' easy? One plain and one residual block (same widths, init, optimiser) trained "
                "to output their input on the digits features: relative error over steps, step reaching tolerance",
    source="He et al. 2015, §3.1 (pushing the residual to zero vs fitting an identity with nonlinear layers)",
    base=IdentityFitConfig(),
    build=_identity_fit,
))


def _seeded_layernorm(base: TransformerConfig, extra: dict[str, Any]) -> dict[str, TransformerConfig]:
    """``{norm}_seed{k}``: Post-LN (with warm-up) and Pre-LN at seeds seed .. seed + seeds - 1."""
    if extra["seeds"] < 1:
        raise ConfigError(f"seeds must be >= 1; got {extra['seeds']}")
    return {f"{norm}_seed{k}": base.replace(norm=norm, seed=base.seed + k)
            for k in range(extra["seeds"]) for norm in ("post_ln", "pre_ln")}


_register(Experiment(
    name="conveyor_belt",
    description="The residual stream as a conveyor belt: cosine similarity of each token's vector at the input "
                "of the stack and after every layer, Post-LN vs Pre-LN, at init and after training, on several seeds",
    source="Vaswani et al. 2017, Fig. 1; Xiong et al. 2020, Fig. 1 (Post-LN and Pre-LN placement)",
    base=TransformerConfig(task="reverse", depth=6, width=32, steps=200, batch_size=16, lr=5e-3, warmup_steps=60),
    build=_seeded_layernorm,
    extra_defaults={"seeds": 5},
    extra_types={"seeds": int},
))
