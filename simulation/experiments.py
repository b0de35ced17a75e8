"""Named experiments: each a set of runs that tells one story (torch-free).

Example::

    python render.py train vanishing --set depths=8,20 --seed 1
    python -c "from simulation.experiments import build_runs; print(list(build_runs('vanishing', {'depths': (8, 20)})))"

An experiment turns its parameters (every :class:`RunConfig` field plus its own, typed once in an
:class:`ExperimentParams` dataclass, such as ``depths``) into named runs. ``build_runs`` takes typed values (the
command line's strings and a TOML file's values are parsed in :mod:`cli.params`, the one place that does it: this
module never sees a raw string), validates them and returns ``{RunKey(name, seed): RunConfig}`` (:mod:`simulation.runkeys`); the run names are the
constants and functions exported here (``PLAIN``, ``POST_LN``, ``depth_run("plain", 20)`` ...), which scenes use to
look their traces up.

Every experiment also takes ``seeds`` (``--set seeds=0,1,2``): every run once per seed, in the order of ``seeds``
(keys ``RunKey(name, s)``; their text form in docs/how-to/sweeps.md). ``model=conv`` switches the experiments
marked ``conv`` to He et al. 2015 §4.2's conv nets (:data:`CONV_DEFAULTS` fill what the user did not set).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable

from .config import (ACTIVATIONS, GATES, MAX_DEPTH, MAX_SEED, MODELS, RESIDUAL_INITS, ConfigError, IdentityFitConfig,
                     HIGHWAY_ARCHS, HighwayConfig, HyperConfig, LandscapeConfig, NO_MODEL, Range, RunConfig, TransformerConfig,
                     UserModelConfig, conv_depth_error, shown)
from .runkeys import RunKey

__all__ = ["Experiment", "EXPERIMENTS", "get_experiment", "build_runs", "split_params", "ExperimentParams", "check_seeds",
           "NoParams", "DepthParams", "VanishingParams", "ExplodingParams", "PLAIN", "RESIDUAL",
           "RESIDUAL_ZERO_PAD", "PLAIN_LARGE_LR", "POST_LN", "POST_LN_WARMUP", "PRE_LN",
           "depth_run", "vanishing_run", "gain_run", "sweep_run", "CONV_DEFAULTS",
           "DepthSweepParams", "FULL_SWEEP", "ShortcutScaleParams", "scale_run", "gate_run",
           "NO_MODEL", "SAN", "SAN_MLP", "SAN_SKIP", "SAN_MLP_SKIP", "NormFreeParams", "init_run", "LandscapeParams", "GPT"]
__all__ += ["scene_runs", "scenes_runs"]

# -- run names: the keys of build_runs' result, and of a scene's self.traces ----------------------

PLAIN, RESIDUAL = "plain", "residual"  # chain_rule, residual_response, paths, projection
RESIDUAL_ZERO_PAD = "residual_zero_pad"  # projection: the option-A shortcut
PLAIN_LARGE_LR = "plain_large_lr"  # exploding: the base gain at large_lr
POST_LN, POST_LN_WARMUP, PRE_LN = "post_ln", "post_ln_warmup", "pre_ln"  # layernorm
# rank_collapse: Dong et al. 2021's self-attention network (SAN) without and with MLPs and skip connections
SAN, SAN_MLP, SAN_SKIP, SAN_MLP_SKIP = "san", "san_mlp", "san_skip", "san_mlp_skip"
GPT = "gpt"  # logit_lens: a small causal Pre-LN Transformer (decoder only)


def _number(value: float) -> str:
    """A number as it appears in a run name: 2.5 -> "2p5" (dots separate trace keys)."""
    return f"{value:g}".replace(".", "p").replace("-", "m")


def depth_run(arch: str, depth: int) -> str:
    """``plain_d20``: degradation and shattered."""
    return f"{arch}_d{depth}"


def vanishing_run(arch: str, activation: str, depth: int) -> str:
    """``plain_sigmoid_d20``: vanishing."""
    return f"{arch}_{activation}_d{depth}"


def gain_run(gain: float) -> str:
    """``plain_gain2p5``: exploding."""
    return f"plain_gain{_number(gain)}"


def scale_run(scale: float) -> str:
    """``scale0p5``: shortcut_scale, h = lambda x + F(x) with lambda = 0.5."""
    return f"scale{_number(scale)}"


def gate_run(gate: str) -> str:
    """``gate_exclusive``: shortcut_scale, a gated shortcut (He et al. 2016 §3.2)."""
    return f"gate_{gate}"


def init_run(residual_init: str) -> str:
    """``standard`` (residual_init "none"), ``rezero``, ``fixup``: norm_free."""
    return "standard" if residual_init == "none" else residual_init


def sweep_run(model: str, arch: str, depth: int) -> str:
    """``conv_plain_d56``: depth_sweep."""
    return f"{model}_{arch}_d{depth}"


# Where ``model=conv`` is set and these are not: He et al. 2015 §4.2's stage-1 width and option A
# shortcuts, and a depth of the form 6n + 2 (ResNet-20) in place of an MLP depth a conv net cannot have.
CONV_DEFAULTS = {"width": 16, "depth": 20, "shortcut": "zero_pad"}


# -- an experiment's own parameters, typed once --------------------------------------------------

@dataclass(frozen=True)
class ExperimentParams:
    """Base of an experiment's own parameters (beyond the config fields): each field is a tuple of ints,
    floats or strings, or a float, with its allowed :class:`~simulation.config.Range` or choices in its
    metadata. Built from typed values (a list stands for a tuple, an int for a float); a value of another type,
    such as a command-line string, or outside its range or choices raises ConfigError (one line)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = _typed(f.name, f.default, getattr(self, f.name))
            object.__setattr__(self, f.name, value)
            for item in value if isinstance(value, tuple) else (value,):
                if "range" in f.metadata:
                    f.metadata["range"].check(f.name, item)
                if "choices" in f.metadata and item not in f.metadata["choices"]:
                    raise ConfigError(f"{f.name} must be among {', '.join(f.metadata['choices'])}; got {shown(item)}")

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        return {f.name: f.default for f in fields(cls)}

    @classmethod
    def type_name(cls, name: str) -> str:
        default = cls.defaults()[name]
        return f"list[{type(default[0]).__name__}]" if isinstance(default, tuple) else type(default).__name__


def _typed(name: str, default: Any, value: Any) -> Any:
    """``value`` if it has the type of ``default`` (a list or tuple of its item type for a tuple default, at least
    one item; an int widened to a float), as that type; ConfigError otherwise (a raw string included)."""
    if isinstance(default, tuple):
        kind = type(default[0])
        if not isinstance(value, (list, tuple)) or not value:
            raise ConfigError(f"{name} must be list[{kind.__name__}] (comma-separated), got {shown(value)}")
        return tuple(_typed(name, default[0], item) for item in value)
    kind = type(default)
    if kind is float and type(value) is int:
        value = float(value)
    if type(value) is not kind:
        raise ConfigError(f"{name} must be {kind.__name__}, got {shown(value)}")
    return value


@dataclass(frozen=True)
class NoParams(ExperimentParams):
    """No parameters beyond the config's."""


_DEPTHS = Range(1, MAX_DEPTH)


@dataclass(frozen=True)
class DepthParams(ExperimentParams):
    depths: tuple[int, ...] = field(default=(8, 20, 56), metadata={"range": _DEPTHS})  # one plain, one residual each


@dataclass(frozen=True)
class ShatteredParams(DepthParams):
    depths: tuple[int, ...] = field(default=(2, 24, 50), metadata={"range": _DEPTHS})


@dataclass(frozen=True)
class VanishingParams(ExperimentParams):
    depths: tuple[int, ...] = field(default=(8, 20, 56), metadata={"range": _DEPTHS})
    activations: tuple[str, ...] = field(default=("sigmoid", "tanh"), metadata={"choices": ACTIVATIONS})


@dataclass(frozen=True)
class ExplodingParams(ExperimentParams):
    gains: tuple[float, ...] = field(default=(1.0, 2.0, 3.0), metadata={"range": Range(0.0, 100.0, open_low=True)})
    large_lr: float = field(default=1.0, metadata={"range": Range(0.0, 1e6, open_low=True)})


@dataclass(frozen=True)
class DepthSweepParams(ExperimentParams):
    mlp_depths: tuple[int, ...] = field(default=(2, 8, 20, 56), metadata={"range": _DEPTHS})  # blocks
    conv_depths: tuple[int, ...] = field(default=(8, 20), metadata={"range": Range(8, MAX_DEPTH)})  # 6n + 2 layers
    models: tuple[str, ...] = field(default=("mlp", "conv"), metadata={"choices": MODELS})
    # SGD learning rate of the sigmoid MLPs (the conv nets use ``lr``): at lr 0.1 the residual MLPs of 56 blocks
    # diverged (steps 99 and 284 on seeds 0 and 1); at 0.02 they and the 110-block ones train to 0 error.
    mlp_lr: float = field(default=0.02, metadata={"range": Range(0.0, 1e6, open_low=True)})


def check_seeds(seeds: Any) -> tuple[int, ...]:
    """``seeds`` (typed: a tuple or list of ints) as a tuple of distinct ints in [0, MAX_SEED]; empty: the one
    ``seed``. Raises ConfigError (one line) otherwise."""
    if not isinstance(seeds, (list, tuple)) or any(type(s) is not int for s in seeds):
        raise ConfigError(f"seeds must be a comma-separated list of integers; got {shown(seeds)}")
    for seed in seeds:
        Range(0, MAX_SEED).check("seeds", seed)
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"seeds must be distinct; got {shown(seeds)}")
    return tuple(seeds)


@dataclass(frozen=True)
class Experiment:
    """``build(base, params) -> {run_name: config}``; ``params`` is an instance of ``params_type``, the
    experiment's own parameters."""

    name: str
    description: str  # one line for `render.py list`
    source: str  # paper and figure whose claim this reproduces
    base: Any  # a config of a registered run kind (simulation.runs): RunConfig, TransformerConfig, ...
    build: Callable[[Any, Any], dict[str, Any]]
    params_type: type[ExperimentParams] = NoParams
    conv: bool = False  # whether ``--set model=conv`` makes sense here (He et al. 2015 §4.2 nets)
    open_args: str = ""  # a config field (JSON object) that takes every parameter not otherwise known: factory kwargs

    @property
    def extra_defaults(self) -> dict[str, Any]:
        return self.params_type.defaults()

    def params(self) -> dict[str, tuple[Any, str]]:
        """Every parameter with its default and type name, for `render.py list`."""
        out = {name: (getattr(self.base, name), kind.__name__) for name, kind in type(self.base).parameters().items()}
        for key, value in self.extra_defaults.items():
            out[key] = (value, self.params_type.type_name(key))
        out["seeds"] = ((), "list[int]")  # empty: the one seed given by ``seed``
        return out


def split_params(experiment: Experiment, values: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Apply typed ``values`` (:func:`cli.params.experiment_values` parses the command line's and a file's) to the
    base config and the experiment's own parameters: ``(config, {name: value})``, ``seeds`` checked. Raises
    ConfigError for an unknown key or a bad value (a raw string where the parameter is no string included)."""
    run_keys = type(experiment.base).parameters()
    base_changes, extra, free = {}, {**experiment.params_type.defaults(), "seeds": ()}, {}
    for key, value in values.items():
        if key in type(experiment.base).not_parameters:
            raise ConfigError(f"{key!r} is not a parameter of experiment {experiment.name!r}: it is "
                              + ("computed from the files" if key != "kind" else "the trainer's name"))
        if key in run_keys:
            base_changes[key] = value  # typed and checked by the config itself (simulation.config._check_fields)
        elif key == "seeds":
            extra["seeds"] = check_seeds(value)
        elif key in extra:
            extra[key] = value  # typed and checked by the experiment's ExperimentParams
        elif experiment.open_args:
            free[key] = value
        else:
            known = sorted(set(run_keys) | set(extra))
            raise ConfigError(f"unknown parameter {key!r} for experiment {experiment.name!r}; known: {', '.join(known)}")
    if free:
        import json

        merged = {**json.loads(base_changes.get(experiment.open_args, getattr(experiment.base, experiment.open_args))),
                  **free}
        base_changes[experiment.open_args] = json.dumps(merged, sort_keys=True)
    if base_changes.get("model", getattr(experiment.base, "model", "mlp")) == "conv":
        if not experiment.conv:
            with_conv = ", ".join(name for name, e in EXPERIMENTS.items() if e.conv)
            raise ConfigError(f"experiment {experiment.name!r} has no conv variant; model=conv works for {with_conv}")
        for key, value in CONV_DEFAULTS.items():
            base_changes.setdefault(key, value)
    return experiment.base.replace(**base_changes), extra


def build_runs(name: str, values: dict[str, Any] | None = None) -> dict[RunKey, Any]:
    """The validated runs of experiment ``name`` with typed ``values`` applied (``{"depths": (8, 20), "seed": 1}``;
    the command line's strings go through :func:`cli.params.build_runs`): ``{RunKey(run_name, seed): config}``,
    every run of the first seed of ``seeds``, then of the next ... (one seed, ``seed``, without ``seeds``). Raises
    ConfigError for an unknown experiment, key or value (a raw string where the parameter is no string, and a
    builder's bare ValueError or TypeError, too)."""
    try:
        return _build_runs(name, values or {})
    except ConfigError:
        raise
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"experiment {name}: bad parameter value ({exc})") from None


def scene_runs(experiment: str | None, defaults: dict[str, Any], overrides: dict[str, Any]
               ) -> tuple[dict[str, Any], dict[RunKey, Any]]:
    """What a scene reads: the parameters it gives ``experiment`` (its ``experiment_defaults``, with the user's
    ``overrides`` over them, both typed: :func:`cli.params.experiment_values`) and the runs those build, ``(params,
    {RunKey: config})``; ``({}, {})`` for a scene without an experiment. The render planner, the render worker and ``LectureScene.setup`` all ask
    here, so the runs trained and counted before a render are the runs the scene reads."""
    if not experiment:
        return {}, {}
    params = {**defaults, **overrides}
    return params, build_runs(experiment, dict(params))


def scenes_runs(requests: dict[str, tuple[str | None, dict[str, Any], dict[str, Any]]]
                ) -> dict[str, tuple[dict[str, Any], dict[RunKey, Any]]]:
    """:func:`scene_runs` of many scenes at once: ``{scene: (experiment, defaults, values)}`` -> ``{scene: (params,
    {RunKey: config})}``, in order. Raises ConfigError naming the scene and its experiment for a bad value."""
    out = {}
    for scene, (experiment, defaults, values) in requests.items():
        try:
            out[scene] = scene_runs(experiment, defaults, values)
        except ConfigError as exc:
            raise ConfigError(f"{scene} (experiment {experiment}): {exc}") from None
    return out


def _build_runs(name: str, overrides: dict[str, Any]) -> dict[RunKey, Any]:
    experiment = get_experiment(name)
    base, extra = split_params(experiment, overrides)
    seeds = extra.pop("seeds") or (base.seed,)
    params = experiment.params_type(**extra)
    runs: dict[RunKey, Any] = {}
    for seed in seeds:
        for run_name, config in experiment.build(base.replace(seed=seed), params).items():
            runs[RunKey(run_name, seed)] = config
    return runs


def get_experiment(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise ConfigError(f"unknown experiment {name!r}; available: {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]


# -- the experiments --------------------------------------------------------------------------

def _one_run_per(field_name: str, values: tuple[str, ...]) -> Callable[[Any, NoParams], dict[str, Any]]:
    """A ``build`` that makes one run per value of one config field, named by the value, in that order."""
    def build(base: Any, params: NoParams) -> dict[str, Any]:
        return {value: base.replace(**{field_name: value}) for value in values}
    return build


_plain_vs_residual = _one_run_per("arch", (PLAIN, RESIDUAL))


def _by_depth(base: RunConfig, params: DepthParams) -> dict[str, RunConfig]:
    """``{arch}_d{depth}`` for plain and residual at every depth of ``params.depths``."""
    return {depth_run(arch, depth): base.replace(arch=arch, depth=depth)
            for depth in dict.fromkeys(params.depths) for arch in (PLAIN, RESIDUAL)}


def _vanishing(base: RunConfig, params: VanishingParams) -> dict[str, RunConfig]:
    return {vanishing_run(arch, act, depth): base.replace(arch=arch, activation=act, depth=depth)
            for act in dict.fromkeys(params.activations)
            for depth in dict.fromkeys(params.depths)
            for arch in (PLAIN, RESIDUAL)}


def _exploding(base: RunConfig, params: ExplodingParams) -> dict[str, RunConfig]:
    """``plain_gain{g}`` for every init gain, and ``plain_large_lr``: the base gain at ``large_lr``."""
    runs = {gain_run(gain): base.replace(arch=PLAIN, init_gain=gain) for gain in params.gains}
    runs[PLAIN_LARGE_LR] = base.replace(arch=PLAIN, lr=params.large_lr)
    return runs


def _projection(base: RunConfig, params: NoParams) -> dict[str, RunConfig]:
    """Plain, residual with projection shortcuts W_s, residual with zero-padded shortcuts."""
    return {PLAIN: base.replace(arch=PLAIN),
            RESIDUAL: base.replace(arch=RESIDUAL, shortcut="projection"),
            RESIDUAL_ZERO_PAD: base.replace(arch=RESIDUAL, shortcut="zero_pad")}


EXPERIMENTS: dict[str, Experiment] = {}


def _register(experiment: Experiment) -> None:
    EXPERIMENTS[experiment.name] = experiment


# Trained ReLU + BatchNorm nets shared by E4 and E6 (same configs, so one cache entry each); E6 (paths) reads the
# one-block lesion test, recorded for these runs only.
_TRAINED_BN = RunConfig(activation="relu", norm="batchnorm", depth=10, steps=300, batch_size=128, lr=0.1,
                        weight_decay=2e-3, lesion=True)

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
    conv=True,
    params_type=VanishingParams,
))
_register(Experiment(
    name="exploding",
    description="E2: plain ReLU nets with init gain 1, 2, 3 (vanishing, near-critical, exploding) and a large lr: "
                "per-layer growth and a run that diverges",
    source="Glorot & Bengio 2010; He et al. 2015 (PReLU paper) §2.2: per-layer gain of a ReLU net",
    base=RunConfig(activation="relu", depth=20, steps=100, lr=0.01, init_gain=2.0),
    build=_exploding,
    params_type=ExplodingParams,
))
_register(Experiment(
    name="degradation",
    description="E3: ReLU + BatchNorm, plain vs residual at depths 8/20/56, same step budget: training loss "
                "and error curves",
    source="He et al. 2015, Fig. 1 and Fig. 6 (and §4.1: not vanishing gradients)",
    base=RunConfig(activation="relu", norm="batchnorm", steps=200, batch_size=128, lr=0.05),
    build=_by_depth,
    conv=True,
    params_type=DepthParams,
))
_register(Experiment(
    name="residual_response",
    description="E4: trained ReLU + BatchNorm nets: ||F(x)|| / ||x|| and std of each block's residual branch",
    source="He et al. 2015, Fig. 7",
    base=_TRAINED_BN,
    build=_plain_vs_residual,
    conv=True,
))
_register(Experiment(
    name="paths",
    description="E6: residual nets as ensembles of paths: path-length distribution and test error with one "
                "block deleted, plain vs residual",
    source="Veit et al. 2016, Fig. 3 (lesion) and Fig. 6a (path lengths)",
    base=_TRAINED_BN,
    build=_plain_vs_residual,
    conv=True,
))
_register(Experiment(
    name="shattered",
    description="E7: gradient of the output w.r.t. a scalar input swept over [-2, 2] at init, plain vs "
                "residual, and its autocorrelation",
    source="Balduzzi et al. 2017, Fig. 1 and Fig. 2",
    # One step: the claim and the scene are about the network at initialisation (input_grad row 0, recorded before
    # the first update); 100 steps of these width-200 nets were ~100 CPU-s of a cold lecture that nothing read.
    base=RunConfig(dataset="bands", activation="relu", norm="batchnorm", width=200, steps=1,
                   batch_size=128, lr=0.05, input_sweep=True),
    build=_by_depth,
    params_type=ShatteredParams,
))
_register(Experiment(
    name="projection",
    description="E8: three stages of widths 16/32/64: the shortcut of a block that doubles the width is a "
                "projection W_s x (or zero-padded x)",
    source="He et al. 2015, eq. 2, §3.3 and Table 3 (options A and B)",
    base=RunConfig(activation="relu", norm="batchnorm", depth=12, width=16, stages=3, steps=200,
                   batch_size=128, lr=0.05),
    build=_projection,
    conv=True,
))

def _layernorm(base: TransformerConfig, params: NoParams) -> dict[str, TransformerConfig]:
    """Post-LN without and with warm-up, Pre-LN without: all at the same (high) peak lr."""
    return {POST_LN: base.replace(norm="post_ln", warmup_steps=0),
            POST_LN_WARMUP: base.replace(norm="post_ln"),
            PRE_LN: base.replace(norm="pre_ln", warmup_steps=0)}


_register(Experiment(
    name="layernorm",
    description="E5: Post-LN vs Pre-LN Transformer (6+6 layers, reverse task): per-layer gradient norms at init; "
                "a high lr with and without warm-up",
    source="Xiong et al. 2020, Fig. 2 (warm-up), Fig. 3 (gradient norms at init); Vaswani et al. 2017, Fig. 1",
    base=TransformerConfig(task="reverse", depth=6, width=32, steps=200, batch_size=16, lr=5e-3, warmup_steps=60,
                           eval_every="final"),  # its scenes and the explorer read no held-out error (issue 21)
    build=_layernorm,
))


def _depth_sweep(base: RunConfig, params: DepthSweepParams) -> dict[str, RunConfig]:
    """``{model}_{arch}_d{depth}``: MLPs with the base config; conv nets with ReLU + BatchNorm, option A
    shortcuts and He et al. 2015 §4.2's stage widths (16/32/64), both with the base training budget."""
    runs: dict[str, RunConfig] = {}
    if "mlp" in params.models:
        mlp = base.replace(model="mlp", lr=params.mlp_lr)
        for depth in sorted(set(params.mlp_depths)):
            for arch in (PLAIN, RESIDUAL):
                runs[sweep_run("mlp", arch, depth)] = mlp.replace(arch=arch, depth=depth)
    if "conv" in params.models:
        conv = base.replace(model="conv", activation="relu", norm="batchnorm", width=16, depth=20,
                            shortcut="zero_pad")
        for depth in sorted(set(params.conv_depths)):
            for arch in (PLAIN, RESIDUAL):
                runs[sweep_run("conv", arch, depth)] = conv.replace(arch=arch, depth=depth)
    return runs


# The full sweep of README / docs/how-to/sweeps.md (opt-in: --set mlp_depths=... --set conv_depths=... --set seeds=...).
FULL_SWEEP = {"mlp_depths": (2, 4, 6, 8, 12, 16, 20, 32, 44, 56, 80, 110),
              "conv_depths": (8, 14, 20, 26, 32, 44, 56, 74, 92, 110), "seeds": (0, 1, 2, 3, 4)}

_register(Experiment(
    name="depth_sweep",
    description="plain vs residual, MLP (sigmoid) and conv (ReLU + BN), across depths x seeds: first/last "
                "gradient ratio at step 0 and final training error",
    source="He et al. 2015, Fig. 1, Fig. 6 and §4.2 (CIFAR-10 nets of 6n + 2 layers); Glorot & Bengio 2010",
    base=RunConfig(activation="sigmoid", steps=300, batch_size=128, lr=0.1, momentum=0.9, record_every=50),
    build=_depth_sweep,
    params_type=DepthSweepParams,
    conv=True,
))


# -- the study note's questions (issue 13) ------------------------------------------------------

def _residual(base: RunConfig, params: NoParams) -> dict[str, RunConfig]:
    """``residual``: the residual run of residual_response (its seeds come from the global ``seeds``)."""
    return {RESIDUAL: base.replace(arch=RESIDUAL)}


_register(Experiment(
    name="does_it_copy",
    description="Does a residual net only learn to copy? ||F(x)|| / ||x|| per block over training beside the "
                "loss, on every seed of seeds (the residual run of residual_response)",
    source="He et al. 2015, §3.1 and Fig. 7 (does a residual block only copy its input?)",
    base=_TRAINED_BN,
    build=_residual,
))


_register(Experiment(
    name="identity_fit",
    description="Is 'keep as is' easy? One plain and one residual block (same widths, init, optimiser) trained "
                "to output their input on the digits features: relative error over steps, step reaching tolerance",
    source="He et al. 2015, §3.1 (pushing the residual to zero vs fitting an identity with nonlinear layers)",
    base=IdentityFitConfig(),
    build=_plain_vs_residual,
))


_register(Experiment(
    name="conveyor_belt",
    description="The residual stream as a conveyor belt: cosine similarity of each token's vector at the input "
                "of the stack and after every layer, Post-LN vs Pre-LN, at init and after training, on every seed of seeds",
    source="Vaswani et al. 2017, Fig. 1; Xiong et al. 2020, Fig. 1 (Post-LN and Pre-LN placement)",
    base=TransformerConfig(task="reverse", depth=6, width=32, steps=200, batch_size=16, lr=5e-3, warmup_steps=60,
                           eval_every="final"),  # its scenes and the explorer read no held-out error (issue 21)
    build=_one_run_per("norm", (POST_LN, PRE_LN)),  # both with the base warm-up
))


# -- beyond 2016 (issue 23) ----------------------------------------------------------------------

@dataclass(frozen=True)
class ShortcutScaleParams(ExperimentParams):
    scales: tuple[float, ...] = field(default=(0.5, 0.9, 1.0, 1.1), metadata={"range": Range(0.0, 10.0)})  # lambda
    gates: tuple[str, ...] = field(default=("exclusive", "shortcut_only"),  # gated shortcuts, b_g = gate_bias
                                   metadata={"choices": tuple(g for g in GATES if g != "none")})


def _shortcut_scale(base: RunConfig, params: ShortcutScaleParams) -> dict[str, RunConfig]:
    """``scale{lambda}`` for every lambda (h = lambda x + F(x)) and ``gate_{kind}`` for every gate, all
    residual nets of the base config (same seed: same data, batches and branch weights)."""
    runs = {scale_run(scale): base.replace(arch=RESIDUAL, shortcut_scale=scale, gate="none")
            for scale in dict.fromkeys(params.scales)}
    runs.update({gate_run(gate): base.replace(arch=RESIDUAL, shortcut_scale=1.0, gate=gate)
                 for gate in dict.fromkeys(params.gates)})
    return runs


_register(Experiment(
    name="shortcut_scale",
    description="The shortcut must be the identity: residual ReLU MLPs (20 blocks, no norm) with h = lambda x + F(x), "
                "lambda 0.5/0.9/1/1.1, and two gated shortcuts: step-0 gradient ratio across blocks, training error",
    source="He et al. 2016, Identity Mappings in Deep Residual Networks, §3, eq. 7-8, Fig. 2, Table 1",
    base=RunConfig(arch=RESIDUAL, activation="relu", depth=20, width=32, steps=120, batch_size=64, lr=0.02,
                   record_every=40),
    build=_shortcut_scale,
    params_type=ShortcutScaleParams,
))


@dataclass(frozen=True)
class NormFreeParams(ExperimentParams):
    inits: tuple[str, ...] = field(default=RESIDUAL_INITS, metadata={"choices": RESIDUAL_INITS})  # one run each


def _norm_free(base: RunConfig, params: NormFreeParams) -> dict[str, RunConfig]:
    """``standard``, ``rezero``, ``fixup``: the same residual net without normalisation (same seed: same data,
    batches and He-initialised weights before ReZero's alpha = 0 or Fixup's rescaling)."""
    return {init_run(init): base.replace(arch=RESIDUAL, norm="none", residual_init=init)
            for init in dict.fromkeys(params.inits)}


_register(Experiment(
    name="norm_free",
    description="Training deep nets without normalisation: 100 residual ReLU blocks, He init, no BN/LN: "
                "||h_l|| per block at init and the loss curves, standard vs ReZero (alpha = 0) vs Fixup",
    source="Bachlechner et al. 2020 (ReZero), eq. 3; Zhang, Dauphin & Ma 2019 (Fixup), §2-3",
    # 60 steps: ReZero and Fixup reach loss 0.5 by steps 20-23 and 31-37 (seeds 0-4, 11); the standard net
    # diverges at step 1. Each run of 100 blocks costs ~1.5 CPU-s per 10 steps on the shared machine.
    base=RunConfig(arch=RESIDUAL, activation="relu", depth=100, width=32, init_gain=6 ** 0.5, steps=60,
                   batch_size=64, lr=0.02, record_every=30),
    build=_norm_free,
    params_type=NormFreeParams,
))


def _rank_collapse(base: TransformerConfig, params: NoParams) -> dict[str, TransformerConfig]:
    """The four stacks of Dong et al. 2021, Fig. 1: attention alone, + MLPs, + skips, + both (no LayerNorm)."""
    return {SAN: base.replace(residual=False, ffn=False), SAN_MLP: base.replace(residual=False, ffn=True),
            SAN_SKIP: base.replace(residual=True, ffn=False), SAN_MLP_SKIP: base.replace(residual=True, ffn=True)}


_register(Experiment(
    name="rank_collapse",
    description="Rank collapse: relative residual ||X - 1x^T|| / ||X|| of the tokens after each layer of attention-only "
                "stacks, without and with skips and MLPs (encoder, 6 layers, no LayerNorm), at init and after training",
    source="Dong, Cordonnier & Loukas 2021, 'Attention is not all you need' (res(X) against depth, Fig. 1-2)",
    base=TransformerConfig(arch="encoder", norm="none", task="reverse", depth=6, width=32, steps=150, batch_size=16,
                           lr=1e-3, warmup_steps=0, init_batches=1, record_every=50, eval_every="final"),
    build=_rank_collapse,
))


def _gpt(base: TransformerConfig, params: NoParams) -> dict[str, TransformerConfig]:
    """``gpt``: the base config (its seeds come from the global ``seeds``)."""
    return {GPT: base}


_register(Experiment(
    name="logit_lens",
    description="The residual stream of a small GPT (causal, Pre-LN, 4 layers) trained on the reverse task: each "
                "layer's stream decoded through the final LayerNorm and the unembedding; KL to the final prediction "
                "and top-1 agreement per layer, at init and after training",
    source="nostalgebraist 2020 (the logit lens); Belrose et al. 2023, 'Eliciting Latent Predictions ...' (tuned lens)",
    base=TransformerConfig(arch="decoder_only", norm="pre_ln", task="reverse", depth=4, width=32, steps=300,
                           batch_size=32, lr=3e-3, warmup_steps=30, init_batches=1, record_every=100,
                           eval_every="final"),  # LogitLens shows the final held-out error only
    build=_gpt,
))


@dataclass(frozen=True)
class LandscapeParams(ExperimentParams):
    # conv depths 6n + 2 (Li et al. 2018, Fig. 5: ResNet-20 / -56 / -110 and their "noshort" twins)
    depths: tuple[int, ...] = field(default=(20, 56), metadata={"range": Range(8, MAX_DEPTH)})


def _loss_landscape(base: LandscapeConfig, params: LandscapeParams) -> dict[str, LandscapeConfig]:
    """``{arch}_d{depth}``: a plain and a residual conv net at every depth, each with its own slice. Raises
    ConfigError for a depth that is not 6n + 2."""
    for depth in params.depths:
        if conv_depth_error(depth):
            raise ConfigError(conv_depth_error(depth))
    return {depth_run(arch, depth): base.replace(arch=arch, depth=depth)
            for depth in dict.fromkeys(params.depths) for arch in (PLAIN, RESIDUAL)}


# Width 8 (not He et al.'s 16), 200 steps and a 21 x 21 grid on 256 examples keep the four runs of one seed at
# ~3 min of one core (measured: plain d56 ~45 s on an 11 x 11 grid); Li et al. used width 16, 300 epochs, 51 x 51.
_register(Experiment(
    name="loss_landscape",
    description="loss on a filter-normalised random 2-D slice through trained conv nets of 20 and 56 layers, with "
                "and without skips: non-convex fraction of the slice and its local minima",
    source="Li, Xu, Taylor, Studer & Goldstein 2018, Fig. 1, Fig. 5 and Fig. 7",
    base=LandscapeConfig(width=8, steps=200, grid=21, eval_examples=256),
    build=_loss_landscape,
    params_type=LandscapeParams,
))


_register(Experiment(
    name="hyper_connections",
    description="n = 4 residual streams mixed by learned matrices, free (HC) or doubly stochastic (mHC): the gain of "
                "the product of the mixing matrices across the blocks, before and after training",
    source="Zhu et al. 2025 (Hyper-Connections, §2); DeepSeek 2025 (mHC: Sinkhorn-Knopp, composite gain)",
    base=HyperConfig(depth=16, width=32, steps=200),
    build=_one_run_per("mixing", ("hc", "mhc")),  # free H_res vs Sinkhorn-projected H_res, otherwise the same
))


# 20 blocks of width 16, 200 SGD steps at lr 0.02: the three runs of one seed take ~5 CPU-s together.
_register(Experiment(
    name="highway",
    description="one-layer blocks plain, residual (x + H) and highway (T H + (1 - T) x, b_T = -2): the transform "
                "gate T per block and the gradient norms per block at init and after training",
    source="Srivastava, Greff & Schmidhuber 2015 (Highway Networks, eq. 3 and §2.2; Fig. 2: gate outputs per layer)",
    base=HighwayConfig(),
    build=_one_run_per("arch", HIGHWAY_ARCHS),  # the same one-layer blocks, three ways of passing x on
))


# -- a user's own network (issue 20) -----------------------------------------------------------------

@dataclass(frozen=True)
class ModelParams(ExperimentParams):
    """Runs recorded elsewhere, read from their trace files in place of training (simulation.kinds.recorded)."""

    # --trace FILE: a trace of your network (residual_lecture.watch); "": train --model's. A file, checked when read
    trace: str = field(default="", metadata={"file": ".npz"})
    # --twin FILE: a trace of its plain twin (residual_lecture.plain_twin), recorded alike
    twin: str = field(default="", metadata={"file": ".npz"})


def _user_model(base: UserModelConfig, params: ModelParams) -> dict[str, Any]:
    """``residual``: the user's model as written; ``plain``: its twin, every residual addition's shortcut removed.
    Without a spec (``render.py list``) the runs exist but cannot train: see :data:`NO_MODEL`. With ``trace``
    (``--trace FILE``): the runs read from files (:func:`simulation.kinds.recorded.recorded_runs`), ``plain`` only
    with ``twin``."""
    if params.trace or params.twin:
        from .kinds.recorded import recorded_runs

        return recorded_runs(base, params.trace, params.twin)
    return {RESIDUAL: base.replace(arch=RESIDUAL), PLAIN: base.replace(arch=PLAIN)}


_register(Experiment(
    name="model",
    description="your own network (--model FILE.py:FACTORY): its residual blocks found by their additions, "
                "trained as written and as its plain twin without shortcuts",
    source="He et al. 2015, eq. 1 and 2 (h = x + F(x); W_s x where the shapes differ); the user's model",
    base=UserModelConfig(),
    build=_user_model,
    params_type=ModelParams,
    open_args="args",
))
