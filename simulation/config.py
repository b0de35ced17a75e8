"""Frozen run configurations, their checked ranges and their cache digest (torch-free).

Example::

    python -c "from simulation.config import RunConfig; print(RunConfig(depth=20).digest())"

Every field carries its allowed range (:class:`Range`) or choices in its metadata, checked when a config is
made, so a bad value fails before any work with one line (:class:`ConfigError`). The digest covers every field
and :func:`simulation.provenance.source_hash` of the simulation code its kind's trainer imports: editing that
code re-keys the cached traces of that kind, with no version to bump by hand.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import sys
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Self

from .atomic_io import input_file
from .provenance import source_hash, trainer_root

__all__ = ["config_from_sets", "RunConfig", "ConfigError", "a_type", "parse_value", "block_widths", "Range", "param_range",
           "ARCHS", "ACTIVATIONS", "NORMS", "DATASETS", "SHORTCUTS", "OPTIMIZERS", "GATES", "RESIDUAL_INITS",
           "MAX_WIDTH", "MAX_DEPTH", "MAX_SEED", "MAX_STEPS"]

# The allowed values, defined once: models, data sets, experiments and the command line read them from here.
ARCHS = ("plain", "residual")
ACTIVATIONS = ("sigmoid", "tanh", "relu")
NORMS = ("none", "batchnorm")
DATASETS = ("digits", "bands")
SHORTCUTS = ("projection", "zero_pad")
OPTIMIZERS = ("sgd", "adam")
MODELS = ("mlp", "conv")
GATES = ("none", "exclusive", "shortcut_only")  # He et al. 2016 §3.2, Fig. 2c and 2d
RESIDUAL_INITS = ("none", "rezero", "fixup")  # how a residual branch starts (Bachlechner 2020; Zhang 2019)
MAX_WIDTH = 4096
MAX_DEPTH = 1000
MAX_SEED = 2**31 - 1  # seeds are offset by up to 20 000 for the batch, test and init generators
MAX_STEPS = 10**6
MAX_BATCH = 10**5


class ConfigError(ValueError):
    """A parameter has a wrong name, type or value; the message is one line for the user."""


def a_type(value: Any) -> str:
    """``value``'s type name after its article, for messages: "an int", "a list", "a NoneType"."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


@dataclass(frozen=True)
class Range:
    """Closed interval [low, high] of a numeric parameter; ``open_low``: low itself is excluded."""

    low: float
    high: float
    open_low: bool = False

    def check(self, name: str, value: float) -> None:
        """Raise ConfigError unless ``value`` is finite and inside the range."""
        finite = not isinstance(value, float) or math.isfinite(value)  # a huge int is fine to compare
        inside = finite and (value > self.low if self.open_low else value >= self.low) and value <= self.high
        if not inside:
            raise ConfigError(f"{name} must be {self}; got {shown(value)}")

    def __str__(self) -> str:
        low = f"> {self.low:g}" if self.open_low else f">= {self.low:g}"
        return f"a finite number {low} and <= {self.high:g}" if isinstance(self.low, float) or self.open_low \
            else f"between {self.low} and {self.high}"


def shown(value: Any, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters, for one-line messages about hostile values."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


def _in(default: Any, low: float, high: float, open_low: bool = False) -> Any:
    """A field with ``default`` whose values must lie in ``Range(low, high, open_low)``."""
    return field(default=default, metadata={"range": Range(low, high, open_low)})


def _one_of(default: str, choices: tuple[str, ...]) -> Any:
    """A field with ``default`` whose values must be one of ``choices``."""
    return field(default=default, metadata={"choices": choices})


def _flag(default: bool) -> Any:
    """A boolean field with ``default`` (its choices: False, True)."""
    return field(default=default, metadata={"choices": (False, True)})


def param_range(cls: type, name: str) -> Range | tuple[str, ...] | None:
    """The :class:`Range` or the choices of field ``name`` of config class ``cls`` (None: unconstrained)."""
    meta = {f.name: f.metadata for f in fields(cls)}[name]
    return meta.get("range") or meta.get("choices")


class BaseConfig:
    """What every run config shares: checked fields, the cache digest, dict round trip, checked ``replace``."""

    # The run kind that trains this class (simulation.runs.RunKind), set by simulation.runs.register_kind;
    # its trainer id is hashed into digest(), so another trainer for a kind gives other cache keys.
    run_kind: ClassVar[Any] = None
    # Fields that are not parameters (not in `render.py list`, refused by --set and a config file): which trainer
    # runs the config, and fingerprints computed from files. A value given there would stand for the files, so
    # an edited model file would keep its old trace. from_dict (a trace's own config) still reads them.
    not_parameters: ClassVar[tuple[str, ...]] = ("kind",)

    def __post_init__(self) -> None:
        _check_fields(self)
        self._check()

    def _check(self) -> None:
        """Checks across fields (subclasses)."""

    def digest(self) -> str:
        """16 hex chars of SHA-256 over every field, the trainer of this class's run kind (``simulation.runs``)
        and the source hash of the modules that trainer imports (:mod:`simulation.provenance`); stable across runs. Raises ConfigError for a class that is
        no registered run kind."""
        kind = type(self).run_kind
        if kind is None:
            raise ConfigError(f"{type(self).__name__} is not a registered run kind (simulation.runs.register_kind)")
        sources = source_hash(root=trainer_root(kind.trainer))  # the code the trainer imports (simulation.provenance)
        payload = json.dumps({"sources": sources, "trainer": kind.trainer, **self.to_dict()}, sort_keys=True)
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

    @classmethod
    def parameters(cls) -> dict[str, type]:
        """:meth:`field_types` less :attr:`not_parameters`: what a user may set."""
        return {name: kind for name, kind in cls.field_types().items() if name not in cls.not_parameters}


@dataclass(frozen=True)
class RunConfig(BaseConfig):
    """Everything that changes a training run; its :meth:`digest` is the trace cache key."""

    model: str = _one_of("mlp", MODELS)  # "mlp": blocks of Linear layers; "conv": He et al. 2015 §4.2 conv net
    arch: str = _one_of("plain", ARCHS)  # "plain": h = F(h); "residual": h = h + F(h) (clean identity path)
    depth: int = _in(10, 1, MAX_DEPTH)  # number of blocks between the stem and the head
    width: int = _in(32, 1, MAX_WIDTH)  # hidden units of the blocks of the first stage (input and output of F)
    stages: int = _in(1, 1, MAX_DEPTH)  # width doubles at the first block of each later stage (He et al. 2015, §3.3)
    shortcut: str = _one_of("projection", SHORTCUTS)  # where the width changes: W_s x | zero-padded x (He 2015 B | A)
    activation: str = _one_of("sigmoid", ACTIVATIONS)  # nonlinearity inside F
    norm: str = _one_of("none", NORMS)  # "batchnorm" puts BatchNorm1d after each Linear of F
    dataset: str = _one_of("digits", DATASETS)  # "digits": sklearn's 8x8 images, 10 classes; "bands": scalar x, 2
    steps: int = _in(300, 1, MAX_STEPS)  # optimiser steps
    batch_size: int = _in(64, 2, MAX_BATCH)  # examples per step, drawn from the training split
    lr: float = _in(0.05, 0.0, 1e6, open_low=True)  # learning rate
    optimizer: str = _one_of("sgd", OPTIMIZERS)  # sgd (with momentum) | adam
    momentum: float = field(default=0.9, metadata={"range": Range(0.0, 1.0)})  # SGD momentum in [0, 1); adam: ignored
    weight_decay: float = _in(0.0, 0.0, 10.0)  # L2 penalty on every parameter, as in torch.optim (He 2015: 1e-4)
    init_gain: float = _in(1.0, 0.0, 100.0, open_low=True)  # multiplies PyTorch's default init of block weights
    shortcut_scale: float = _in(1.0, 0.0, 10.0)  # lambda in h = lambda * x + F(x) (He et al. 2016, §3.1, eq. 7)
    gate: str = _one_of("none", GATES)  # g = sigmoid(W_g x + b_g): (1-g)x + gF(x) | (1-g)x + F(x) (He 2016 §3.2)
    gate_bias: float = _in(0.0, -100.0, 100.0)  # b_g at init (He 2016, Table 1: 0 and -6); gate "none": ignored
    residual_init: str = _one_of("none", RESIDUAL_INITS)  # "rezero": h = x + a F(x), a = 0; "fixup": Zhang 2019
    record_every: int = _in(10, 1, MAX_STEPS)  # record statistics at step 0 and every k steps (and the last step)
    seed: int = _in(0, 0, MAX_SEED)  # seeds data split, init and batch order
    # After-training passes that only some readers use (issue 21: record only what a scene reads):
    lesion: bool = _flag(False)  # test error with each block deleted (Veit et al. 2016, Fig. 3): experiment paths
    input_sweep: bool = _flag(False)  # input gradient over a sweep, at init and trained (Balduzzi 2017): shattered

    def _check(self) -> None:
        if self.momentum >= 1:
            raise ConfigError(f"momentum must be in [0, 1); got {self.momentum}")
        changed = [name for name, default in (("shortcut_scale", 1.0), ("gate", "none"), ("residual_init", "none"))
                   if getattr(self, name) != default]
        if changed and (self.arch != "residual" or self.model != "mlp"):
            raise ConfigError(f"{changed[0]} needs arch=residual and model=mlp; got arch={self.arch}, "
                              f"model={self.model}")
        if len(changed) > 1:
            raise ConfigError(f"shortcut_scale, gate and residual_init change the same addition: set one; got "
                              f"{' and '.join(changed)}")
        if self.stages > self.depth:
            raise ConfigError(f"stages must be between 1 and depth ({self.depth}); got {self.stages}")
        if self.model == "conv":  # He et al. 2015 §4.2: 6n + 2 layers, three stages w, 2w, 4w (``stages`` unused)
            if conv_depth_error(self.depth):
                raise ConfigError(conv_depth_error(self.depth))
            if self.dataset != "digits":
                raise ConfigError(f"model conv needs images: dataset must be digits; got {self.dataset!r}")
            if self.width * 4 > MAX_WIDTH:
                raise ConfigError(f"conv width * 4 must be at most {MAX_WIDTH}; got width {self.width}")
        elif self.width * 2 ** (self.stages - 1) > MAX_WIDTH:
            raise ConfigError(f"width * 2**(stages - 1) must be at most {MAX_WIDTH}; got {self.width} and "
                              f"{self.stages} stages")

    def block_widths(self) -> list[tuple[int, int]]:
        """(width in, width out) of every block; see :func:`block_widths`. For ``model="conv"``: channels
        in and out of each of the 3n blocks (``depth`` = 6n + 2 layers, stages w, 2w, 4w; ``stages`` unused)."""
        if self.model == "conv":
            n = (self.depth - 2) // 6
            return [(self.width * 2 ** max(s - (i == 0), 0), self.width * 2 ** s) for s in range(3) for i in range(n)]
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
    """A developer command line's ``--set key=TEXT`` (``python -m simulation.kinds.mlp --set depth=20``): TEXT as
    given for a string field of ``cls`` (default RunConfig), else read as a JSON literal (``20``, ``1e-3``,
    ``true``), or left as text where it is none; the config checks type and range when it is built. Parsing by
    type what render.py is given is cli/params.py's work (:func:`cli.params.convert_value`).

    Raises ConfigError for an unknown key.
    """
    import json

    defaults = {f.name: f.default for f in fields(cls or RunConfig)}
    if key not in defaults:
        raise ConfigError(f"unknown parameter {key!r}; known: {', '.join(sorted(defaults))}")
    if isinstance(defaults[key], str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _check_fields(cfg: BaseConfig) -> None:
    """Every field holds the type of its default (an int where a float is expected is converted) and lies
    in its range or among its choices."""
    for f in fields(cfg):
        value, expected = getattr(cfg, f.name), type(f.default)
        if expected is float and type(value) is int:
            value = float(value)  # TOML and JSON write 1 for 1.0
            object.__setattr__(cfg, f.name, value)
        if type(value) is not expected:
            raise ConfigError(f"{f.name} must be {expected.__name__}, got {shown(value)}")
        if "range" in f.metadata:
            f.metadata["range"].check(f.name, value)
        if "choices" in f.metadata and value not in f.metadata["choices"]:
            raise ConfigError(f"{f.name} must be one of {', '.join(map(str, f.metadata['choices']))}; got {shown(value)}")


def config_from_argv(cls: type[BaseConfig], argv: list[str] | None, description: str, check=None) -> BaseConfig | None:
    """The ``python -m simulation.X --set key=value ...`` entry of a trainer: ``cls`` with the pairs applied
    (:func:`config_from_sets`) and ``check(config)`` (a one-line reason or None) passed, or None after printing
    ``error: <one line>`` to stderr (the caller exits with status 2)."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        config = config_from_sets(cls, args.set)
        problem = check(config) if check else None
        if problem:
            raise ConfigError(problem)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    return config


def config_from_sets(cls: type[BaseConfig], pairs: list[str]) -> BaseConfig:
    """``cls`` with command-line ``key=value`` pairs applied (typed by :func:`parse_value`).

    Raises ConfigError for a pair without '=', an unknown key, a wrong type or an invalid value."""
    changes = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"expected key=value, got {pair!r}")
        changes[key.strip()] = parse_value(key.strip(), value.strip(), cls)
    return cls().replace(**changes)


# -- Transformer runs (experiment "layernorm"; trained by simulation.kinds.transformer) ----------------

TRANSFORMER_ARCHS = ("encoder", "encoder_decoder", "decoder_only")
LN_PLACEMENTS = ("post_ln", "pre_ln", "none")
TASKS = ("copy", "reverse", "sort")
INITS = ("xavier", "pytorch")
EVAL_EVERY = ("record", "final")  # when a Transformer run measures its held-out error (TransformerConfig.eval_every)
MAX_TRANSFORMER_DEPTH = 64
MAX_VOCAB = 1000
MAX_SEQ_LEN = 512


@dataclass(frozen=True)
class TransformerConfig(BaseConfig):
    """A small Transformer on a toy sequence task; its :meth:`digest` is the trace cache key."""

    kind: str = _one_of("transformer", ("transformer",))  # the run kind (simulation.runs) that trains this config
    arch: str = _one_of("encoder_decoder", TRANSFORMER_ARCHS)  # "encoder" | "encoder_decoder" (+ as many decoder layers) | "decoder_only" (a causal GPT)
    norm: str = _one_of("post_ln", LN_PLACEMENTS)  # post_ln: x = LN(x + F(x)) (Vaswani); pre_ln: x = x + F(LN(x)) (Xiong); none: x + F(x)
    residual: bool = _flag(True)  # False drops every skip connection: x = F(x) (Dong et al. 2021's pure attention, with ffn=False)
    ffn: bool = _flag(True)  # False: layers of attention alone, no position-wise FFN sublayer (Dong et al. 2021's SAN)
    task: str = _one_of("reverse", TASKS)  # target = the input sequence copied | reversed | sorted
    depth: int = _in(6, 1, MAX_TRANSFORMER_DEPTH)  # layers in the encoder, and in the decoder when there is one
    width: int = _in(32, 2, MAX_WIDTH)  # d_model: width of the residual stream (even, divisible by heads)
    heads: int = _in(4, 1, MAX_WIDTH)  # attention heads per attention sublayer
    ffn_width: int = _in(128, 1, 4 * MAX_WIDTH)  # hidden units of each position-wise FFN (Vaswani: 4 x d_model)
    vocab: int = _in(8, 2, MAX_VOCAB)  # distinct symbols in a sequence (token 0 is reserved for BOS)
    seq_len: int = _in(8, 2, MAX_SEQ_LEN)  # tokens per sequence
    init: str = _one_of("xavier", INITS)  # Linear weights: "xavier" (Vaswani, fairseq, Xiong) | "pytorch" (default)
    steps: int = _in(300, 1, MAX_STEPS)  # optimiser steps (Adam, betas 0.9 / 0.98)
    batch_size: int = _in(32, 1, MAX_BATCH)  # sequences per step, freshly drawn from the seeded task
    lr: float = _in(1e-3, 0.0, 1e6, open_low=True)  # peak learning rate
    warmup_steps: int = _in(0, 0, MAX_STEPS)  # linear warm-up from lr / warmup_steps to lr over this many steps
    init_batches: int = _in(8, 1, 1000)  # batches whose gradient norms at initialisation are recorded
    record_every: int = _in(10, 1, MAX_STEPS)  # record statistics at step 0 and every k steps (and the last step)
    # "record": the held-out error (512 sequences) at every recorded step; "final": at the last step only (the other
    # records hold NaN): for runs whose readers show only the final value; it cost ~25 % of a lecture run (issue 21)
    eval_every: str = _one_of("record", EVAL_EVERY)
    seed: int = _in(0, 0, MAX_SEED)  # seeds init, the training batches and the held-out test set

    def _check(self) -> None:
        if self.width % 2 or self.width % self.heads:
            raise ConfigError(f"width must be even and divisible by heads ({self.heads}); got {self.width}")


def conv_depth_error(depth: int) -> str | None:
    """Why ``depth`` is no conv net's depth (6n + 2, n >= 1: 8, 14, 20, ..., 56, ..., 110), or None."""
    if depth < 8 or (depth - 2) % 6:
        return f"a conv net has depth 6n + 2 (8, 14, 20, ..., 56, ..., 110); got {depth}"
    return None


# -- Identity-fit runs (experiment "identity_fit"; trained by simulation.kinds.identity_fit) ------------

@dataclass(frozen=True)
class IdentityFitConfig(BaseConfig):
    """One block trained to output its own input (H(x) = x) on the digits features; the cache key."""

    kind: str = _one_of("identity_fit", ("identity_fit",))  # the run kind (simulation.runs) that trains this config
    arch: str = _one_of("plain", ARCHS)  # "plain": h = F(x) must become x; "residual": h = x + F(x), F must become 0
    activation: str = _one_of("relu", ACTIVATIONS)  # nonlinearity inside F
    steps: int = _in(1500, 1, MAX_STEPS)  # optimiser steps, each on the whole training split (full batch)
    optimizer: str = _one_of("adam", OPTIMIZERS)  # sgd (with momentum) | adam
    lr: float = _in(1e-3, 0.0, 1e6, open_low=True)  # learning rate
    momentum: float = field(default=0.9, metadata={"range": Range(0.0, 1.0)})  # SGD momentum in [0, 1); adam: ignored
    tolerance: float = _in(0.01, 0.0, 1e6, open_low=True)  # the fit is reached once ||h - x||^2 / ||x||^2 < this
    record_every: int = _in(10, 1, MAX_STEPS)  # record the test error at step 0 and every k steps (and the last)
    seed: int = _in(0, 0, MAX_SEED)  # seeds the data split and the init (plain and residual get the same weights)

    def _check(self) -> None:
        if self.momentum >= 1:
            raise ConfigError(f"momentum must be in [0, 1); got {self.momentum}")


# -- Loss-landscape runs (experiment "loss_landscape"; trained by simulation.kinds.landscape) ---------

MAX_GRID = 201


@dataclass(frozen=True)
class LandscapeConfig(BaseConfig):
    """A conv net of He et al. 2015 §4.2 trained on digits, then its loss on a filter-normalised random 2-D
    slice through the trained weights (Li et al. 2018, §4 and Fig. 5); the cache key."""

    kind: str = _one_of("landscape", ("landscape",))  # the run kind (simulation.runs) that trains this config
    arch: str = _one_of("residual", ARCHS)  # "plain": no shortcuts ("noshort" in Li et al.); "residual": skips
    # weighted layers, 6n + 2 (20, 56: ResNet-20 / -56 and their plain twins); checked by conv_depth_error where a net
    # is built (the experiment's depths, the trainer), so a global ``--set depth=3`` meant for the MLPs passes here
    depth: int = _in(20, 1, MAX_DEPTH)
    width: int = _in(16, 1, MAX_WIDTH // 4)  # channels of the first stage (then 2x, 4x); He et al.: 16
    steps: int = _in(300, 1, MAX_STEPS)  # SGD steps before the slice is taken
    batch_size: int = _in(128, 2, MAX_BATCH)  # examples per step (Li et al.: 128)
    lr: float = _in(0.1, 0.0, 1e6, open_low=True)  # SGD learning rate, momentum 0.9 (Li et al.: 0.1)
    weight_decay: float = _in(5e-4, 0.0, 10.0)  # L2 penalty (Li et al.: 5e-4)
    grid: int = _in(21, 3, MAX_GRID)  # points per axis of the slice (Li et al.: 51)
    span: float = _in(1.0, 0.0, 100.0, open_low=True)  # the slice covers alpha, beta in [-span, span] (Li et al.: 1)
    eval_examples: int = _in(512, 1, MAX_BATCH)  # the fixed training examples the slice's loss is averaged over
    seed: int = _in(0, 0, MAX_SEED)  # seeds the data split, init, batch order and the two random directions

    def run_config(self) -> RunConfig:
        """The :class:`RunConfig` of the same conv net and training (ReLU, BatchNorm, option-A shortcuts):
        for the memory guard and the sweep's cost estimate."""
        return RunConfig(model="conv", arch=self.arch, depth=self.depth, width=self.width, activation="relu",
                         norm="batchnorm", shortcut="zero_pad", steps=self.steps, batch_size=self.batch_size,
                         lr=self.lr, weight_decay=self.weight_decay, seed=self.seed)


# -- Hyper-connection runs (experiment "hyper_connections"; trained by simulation.kinds.hyper) ---------

MIXINGS = ("hc", "mhc")
MAX_STREAMS = 16


@dataclass(frozen=True)
class HyperConfig(BaseConfig):
    """An MLP of residual blocks on digits whose one residual stream is widened to ``streams`` parallel ones
    mixed by learned matrices (Hyper-Connections, Zhu et al. 2025), unconstrained or projected onto the doubly
    stochastic matrices (mHC, DeepSeek 2025); the cache key."""

    kind: str = _one_of("hyper", ("hyper",))  # the run kind (simulation.runs) that trains this config
    mixing: str = _one_of("hc", MIXINGS)  # "hc": H_res free (init identity); "mhc": H_res = Sinkhorn-Knopp(exp(logits))
    streams: int = _in(4, 1, MAX_STREAMS)  # n, the expansion rate: parallel residual streams (both papers: 4)
    depth: int = _in(24, 1, MAX_DEPTH)  # residual blocks, each Linear -> ReLU -> Linear
    width: int = _in(32, 1, MAX_WIDTH)  # width of every stream and of F
    sinkhorn_iters: int = _in(20, 1, 1000)  # Sinkhorn-Knopp iterations of mHC (DeepSeek 2025: 20); hc: unused
    steps: int = _in(300, 1, MAX_STEPS)  # Adam steps
    batch_size: int = _in(64, 2, MAX_BATCH)  # examples per step
    lr: float = _in(1e-3, 0.0, 1e6, open_low=True)  # Adam learning rate of the blocks and the head
    mixing_lr: float = _in(1e-2, 0.0, 1e6, open_low=True)  # Adam learning rate of the mixing parameters
    record_every: int = _in(25, 1, MAX_STEPS)  # record the composite mapping at step 0 and every k steps (and the last)
    seed: int = _in(0, 0, MAX_SEED)  # seeds the data split, init and batch order


__all__ += ["TransformerConfig", "IdentityFitConfig", "BaseConfig", "LandscapeConfig", "conv_depth_error", "HyperConfig",
            "MIXINGS",
            "config_from_argv", "TRANSFORMER_ARCHS", "LN_PLACEMENTS",
            "TASKS", "INITS"]


# -- Highway networks (experiment "highway"; trained by simulation.kinds.highway) ---------------------------
# The worked example of docs/developers/adding-a-kind-of-run.md.

HIGHWAY_ARCHS = ("plain", "residual", "highway")


@dataclass(frozen=True)
class HighwayConfig(BaseConfig):
    """A stack of one-layer blocks H(x) = activation(W_H x + b_H) on digits, plain (h = H(x)), residual
    (h = x + H(x)) or highway (h = T(x) H(x) + (1 - T(x)) x, T(x) = sigmoid(W_T x + b_T): Srivastava, Greff &
    Schmidhuber 2015, eq. 3, b_T initialised negative, §2.2); the cache key."""

    kind: str = _one_of("highway", ("highway",))  # the run kind (simulation.runs) that trains this config
    arch: str = _one_of("highway", HIGHWAY_ARCHS)  # "plain": H(x); "residual": x + H(x); "highway": T H + (1 - T) x
    depth: int = _in(20, 1, MAX_DEPTH)  # blocks between the stem and the head
    width: int = _in(16, 1, MAX_WIDTH)  # units of every block
    activation: str = _one_of("relu", ACTIVATIONS)  # the nonlinearity of H (Srivastava et al.: ReLU)
    gate_bias: float = _in(-2.0, -100.0, 100.0)  # b_T at init (Srivastava et al. 2015 §2.2: -1 to -3); non-highway: unused
    steps: int = _in(200, 1, MAX_STEPS)  # optimiser steps
    batch_size: int = _in(64, 2, MAX_BATCH)  # examples per step, drawn from the training split of digits
    lr: float = _in(0.02, 0.0, 1e6, open_low=True)  # learning rate (0.03: the residual twin diverges at step 77)
    optimizer: str = _one_of("sgd", OPTIMIZERS)  # sgd (with momentum) | adam
    momentum: float = field(default=0.9, metadata={"range": Range(0.0, 1.0)})  # SGD momentum in [0, 1); adam: ignored
    weight_decay: float = _in(0.0, 0.0, 10.0)  # L2 penalty on every parameter, as in torch.optim
    record_every: int = _in(10, 1, MAX_STEPS)  # record statistics at step 0 and every k steps (and the last step)
    seed: int = _in(0, 0, MAX_SEED)  # seeds data split, init and batch order
    lesion: bool = _flag(False)  # after training, as RunConfig.lesion: test error with each block deleted
    input_sweep: bool = _flag(False)  # as RunConfig.input_sweep: the input gradient sweep at init and trained

    dataset: ClassVar[str] = "digits"  # what simulation.kinds.mlp.MLPTask and simulation.memory read; not a parameter

    def _check(self) -> None:
        if self.momentum >= 1:
            raise ConfigError(f"momentum must be in [0, 1); got {self.momentum}")

    def block_widths(self) -> list[tuple[int, int]]:
        """(width in, width out) of every block: ``width`` throughout (a highway block keeps the width)."""
        return [(self.width, self.width)] * self.depth


__all__ += ["HighwayConfig", "HIGHWAY_ARCHS"]


# -- a user's own network (experiment "model"; trained by simulation.kinds.user_model) ---------------------

USER_DATA = ("digits", "digits-image", "digits-image32", "copy", "reverse", "sort")  # or a path to a .npz
USER_OPTIMIZERS = OPTIMIZERS


@dataclass(frozen=True)
class UserModelConfig(BaseConfig):
    """A user's nn.Module (or its plain twin) trained on local data; its :meth:`digest` is the cache key.

    ``source`` and ``data_source`` are filled from the files when left empty (:func:`model_source`,
    :func:`data_source`), so editing the model file or the data retrains; a comment-, docstring- or
    layout-only edit of a model file keeps the digest (its syntax tree is hashed, as for our own code)."""

    not_parameters: ClassVar[tuple[str, ...]] = ("kind", "source", "data_source")

    kind: str = _one_of("user_model", ("user_model",))  # which trainer runs this config (see config_from_dict)
    spec: str = ""  # the model: path/to/file.py:factory or package.module:factory (torchvision.models:resnet18)
    source: str = ""  # fingerprint of the model's code: 16 hex of its syntax tree, or "dist==version" for a package
    args: str = "{}"  # keyword arguments of the factory, as canonical JSON ({"num_classes": 10})
    blocks: str = ""  # glob over module paths naming the blocks (layer*.*); "": found automatically
    arch: str = _one_of("residual", ARCHS)  # "residual": the model as written; "plain": its twin, every shortcut removed
    data: str = "digits"  # digits (flat 64) | digits-image (1x8x8) | digits-image32 (3x32x32) | copy | reverse | sort | a .npz
    data_source: str = ""  # 16 hex of SHA-256 of a .npz data file ("" for the built-in data)
    vocab: int = _in(8, 2, MAX_VOCAB)  # token tasks: distinct symbols (token 0 is BOS); the model needs vocab + 1 outputs
    seq_len: int = _in(8, 2, MAX_SEQ_LEN)  # token tasks: source length; the model reads 2 * seq_len tokens
    steps: int = _in(100, 1, MAX_STEPS)  # optimiser steps
    batch_size: int = _in(32, 2, MAX_BATCH)  # examples (or sequences) per step
    lr: float = _in(1e-3, 0.0, 1e6, open_low=True)  # learning rate
    optimizer: str = _one_of("adam", USER_OPTIMIZERS)  # adam | sgd (with momentum)
    momentum: float = field(default=0.9, metadata={"range": Range(0.0, 1.0)})  # SGD momentum in [0, 1); adam: ignored
    weight_decay: float = _in(0.0, 0.0, 10.0)  # L2 penalty on every parameter, as in torch.optim
    record_every: int = _in(10, 1, MAX_STEPS)  # record statistics at step 0 and every k steps (and the last step)
    seed: int = _in(0, 0, MAX_SEED)  # seeds the init (the twin gets the same weights), the data split and batches

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.spec and parse_spec(self.spec)[0] == "file":  # absolute: a cache subprocess runs elsewhere
            import os

            where, _, factory = self.spec.rpartition(":")
            if os.path.isfile(where) and not os.path.isabs(where):
                object.__setattr__(self, "spec", f"{os.path.abspath(where)}:{factory}")
        if self.spec and not self.source:
            object.__setattr__(self, "source", model_source(self.spec))
        if self.data.endswith(".npz") and not self.data_source:
            object.__setattr__(self, "data_source", data_source(self.data))

    def _check(self) -> None:
        if self.momentum >= 1:
            raise ConfigError(f"momentum must be in [0, 1); got {self.momentum}")
        if self.spec:
            parse_spec(self.spec)
        if self.data not in USER_DATA and not self.data.endswith(".npz"):
            raise ConfigError(f"data must be one of {', '.join(USER_DATA)} or a path to a .npz file (x, y); "
                              f"got {shown(self.data)}")
        try:
            args = json.loads(self.args)
        except json.JSONDecodeError:
            args = None
        if not isinstance(args, dict):
            raise ConfigError(f"args must be a JSON object of factory keyword arguments; got {shown(self.args)}")

    def factory_args(self) -> dict[str, Any]:
        """The factory's keyword arguments."""
        return json.loads(self.args)


_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"


def parse_spec(spec: str) -> tuple[str, str, str]:
    """``path/to/file.py:factory`` -> ("file", path, factory); ``package.module:factory`` -> ("module",
    dotted name, factory). Raises ConfigError (one line) for anything else; the file need not exist yet."""
    import re

    where, sep, factory = spec.rpartition(":")
    example = "path/to/file.py:build or torchvision.models:resnet18"
    if not sep or not where or not re.fullmatch(_IDENTIFIER, factory) or "\x00" in spec:
        raise ConfigError(f"model must be FILE.py:FACTORY or PACKAGE.MODULE:FACTORY (e.g. {example}); got {shown(spec)}")
    if where.endswith(".py"):
        return "file", where, factory
    if not re.fullmatch(rf"{_IDENTIFIER}(\.{_IDENTIFIER})*", where):
        raise ConfigError(f"model must be FILE.py:FACTORY or PACKAGE.MODULE:FACTORY (e.g. {example}); got {shown(spec)}")
    return "module", where, factory


@functools.lru_cache(maxsize=1)
def _packages_distributions() -> dict[str, list[str]]:
    """importlib.metadata.packages_distributions(), read once per process (it scans every installed
    distribution: ~2.5 s on a busy 2-core machine, for every --model PACKAGE.MODULE:FACTORY config otherwise)."""
    import importlib.metadata

    return importlib.metadata.packages_distributions()


def model_source(spec: str) -> str:
    """The fingerprint of a model's code, torch-free: for a file, 16 hex of SHA-256 over its syntax tree without
    comments and docstrings (:func:`simulation.provenance.code_fingerprint`; the raw bytes if it does not parse);
    for an installed package, ``dist==version``; for a module on the path that is no distribution, its file
    hashed as a file is. "" when nothing can be read (loading the model then says why)."""
    from pathlib import Path

    from .provenance import code_fingerprint

    kind, where, _ = parse_spec(spec)
    path: Path | None = Path(where) if kind == "file" else None
    if kind == "module":
        import importlib.metadata
        import importlib.util

        top = where.split(".")[0]
        dists = _packages_distributions().get(top)
        if dists:
            return f"{dists[0]}=={importlib.metadata.version(dists[0])}"
        found = importlib.util.find_spec(top)
        if found is None or found.origin is None:
            return ""
        base = Path(found.origin).parent if found.submodule_search_locations else None
        parts = where.split(".")[1:]
        if base is None:
            path = Path(found.origin)
        else:
            candidate = base.joinpath(*parts)
            path = candidate / "__init__.py" if candidate.is_dir() else candidate.with_suffix(".py")
    try:
        text = input_file(path, "model file").read_bytes()  # never a FIFO or a device: reading one may not end
    except (OSError, ValueError):
        return ""
    try:
        payload = code_fingerprint(text.decode("utf-8")).encode()
    except (SyntaxError, UnicodeDecodeError, ValueError):
        payload = text
    return hashlib.sha256(payload).hexdigest()[:16]


def data_source(path: str) -> str:
    """16 hex of SHA-256 of a data file's bytes ("" when it cannot be read: loading it then says why)."""
    h = hashlib.sha256()
    try:
        _hash_file(h, path, "data file")
    except (OSError, ValueError):
        return ""
    return h.hexdigest()[:16]


def _hash_file(h: Any, path: str | os.PathLike, what: str) -> None:
    """Feed the bytes of file ``path`` to hash ``h`` in 1 MiB chunks; OSError or ValueError (as
    :func:`input_file` names ``what``) when it cannot be read."""
    with open(input_file(path, what), "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)


__all__ += ["UserModelConfig", "USER_DATA", "parse_spec", "model_source", "data_source"]


@dataclass(frozen=True)
class RecordedConfig(BaseConfig):
    """A run recorded elsewhere, read from its trace file: ``render.py render SCENE --trace FILE [--twin FILE]``
    (a watched run of ``residual_lecture.watch``, or a trace this tool wrote). Nothing is trained: the run's
    "trainer" (:mod:`simulation.kinds.recorded`) reads the file. ``source`` is filled from the file when left empty
    (:func:`trace_source`), so a file that changed (a run still being recorded) is read again."""

    not_parameters: ClassVar[tuple[str, ...]] = ("kind", "source", "title")

    kind: str = _one_of("recorded", ("recorded",))  # which trainer runs this config (see config_from_dict)
    path: str = ""  # the trace file, absolute (a watched run not yet closed: its parts folder <path>.parts beside it)
    source: str = ""  # 16 hex of SHA-256 of the file's bytes (of the parts' names and bytes for a partial trace)
    arch: str = _one_of("residual", ARCHS)  # "residual": the user's network (--trace); "plain": its twin (--twin)
    title: str = ""  # the model's name the scenes show: the watched model's class, or spec_title of the trace's spec

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.path:
            import os

            object.__setattr__(self, "path", os.path.abspath(os.path.expanduser(self.path)))
            if not self.source:
                object.__setattr__(self, "source", trace_source(self.path))


_GENERIC_FACTORIES = ("build", "make", "create", "get", "model", "factory", "main", "net", "network")


def spec_title(spec: Any) -> str | None:
    """A short name of a model from its ``spec``: the factory (``resnet18`` from ``torchvision.models:resnet18``),
    or the file or module when the factory's name says nothing (``my_resnet`` from ``examples/my_resnet.py:build``);
    None for no spec."""
    from pathlib import PurePath

    if not isinstance(spec, str) or not spec:
        return None
    where, _, factory = spec.rpartition(":")
    if factory.lower().split("_")[0] in _GENERIC_FACTORIES and where:
        factory = PurePath(where).stem if where.endswith(".py") else where.rpartition(".")[2]
    return factory or spec


def trace_files(path: str) -> list:
    """The file of a trace, or the parts of one still being written (``<path>.parts/``, simulation.trace)."""
    import os
    from pathlib import Path

    parts = f"{path}.parts"
    if os.path.lexists(path) or not os.path.isdir(parts):  # (both False for a name the OS refuses: too long ...)
        return [Path(path)]
    return sorted(p for p in Path(parts).iterdir())


def file_stamp(path: str) -> tuple:
    """(name, size, mtime in ns) of the trace's file or parts: what changes when they do."""
    out = []
    for file in trace_files(path):
        try:
            st = file.stat()
            out.append((file.name, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((file.name, None, None))
    return tuple(out)


def trace_source(path: str) -> str:
    """16 hex of SHA-256 of a trace file's bytes, or of the names and bytes of the parts of a trace still being
    written; "" when neither can be read (loading it then says why). Read once per :func:`file_stamp`."""
    return _trace_source(path, file_stamp(path))


@functools.lru_cache(maxsize=32)
def _trace_source(path: str, stamp: tuple) -> str:
    from pathlib import Path

    h = hashlib.sha256()
    files = trace_files(path)
    try:
        for file in files:
            if file.parent != Path(path).parent:  # the parts of a trace being written: their names too
                h.update(file.name.encode() + b"\0")
            _hash_file(h, file, "trace")
    except (OSError, ValueError):
        return ""
    return h.hexdigest()[:16]


def read_from(count: int) -> str:
    """How the logs say where ``count`` runs of :class:`RecordedConfig` came from: "read from its file" (one) or
    "read from their files"."""
    return f"read from {'its file' if count == 1 else 'their files'}"


__all__ += ["RecordedConfig", "trace_source", "file_stamp", "trace_files", "spec_title", "read_from"]


# -- configs of run kinds, by name ----------------------------------------------------------------------------------
# simulation.runs.register_kind fills CONFIG_CLASSES (one entry per run kind); config_from_dict reads a to_dict()
# back with it here, beside the classes, so that the trace file and the trainers need not import the table.

DEFAULT_KIND = "mlp"  # the kind of a config dict without "kind" (RunConfig has no such field)
CONFIG_CLASSES: dict[str, type[BaseConfig]] = {}  # {run kind's name: its config class}, in registration order
# What a UserModelConfig without a model spec says when it is to train (the table and `render.py` list such runs).
NO_MODEL = ("experiment model needs a model: --model path/to/file.py:factory or package.module:factory "
            "(or --set model.spec=..., spec = ... in a [model] table of a --config file)")


def kind_name(config: BaseConfig) -> str:
    """The name of ``config``'s registered run kind. Raises ConfigError for an unregistered class."""
    kind = type(config).run_kind
    if kind is None:
        raise ConfigError(f"{type(config).__name__} is not a registered run kind (simulation.runs.register_kind)")
    return kind.name


def config_from_dict(data: dict[str, Any]) -> BaseConfig:
    """The config written by ``to_dict``, of the class registered for ``data["kind"]`` (default
    :data:`DEFAULT_KIND`). Raises ConfigError for an unknown kind, key or value."""
    name = data.get("kind", DEFAULT_KIND)
    if name not in CONFIG_CLASSES:
        raise ConfigError(f"unknown config kind {name!r}; known: {', '.join(CONFIG_CLASSES)}")
    cls = CONFIG_CLASSES[name]
    if "kind" not in cls.field_types():
        data = {k: v for k, v in data.items() if k != "kind"}
    return cls.from_dict(data)


def seed_free_key(config: BaseConfig) -> str:
    """``config``'s kind and fields as JSON with the seed left out: equal for runs that differ only in their seed."""
    return json.dumps({"kind": kind_name(config), **config.to_dict(), "seed": None}, sort_keys=True)


def differ_only_in_seed(configs: list[BaseConfig]) -> bool:
    """Whether ``configs`` are runs of one config with distinct seeds (what a together trainer accepts)."""
    return len(set(map(seed_free_key, configs))) == 1 and len({c.seed for c in configs}) == len(configs)


__all__ += ["DEFAULT_KIND", "CONFIG_CLASSES", "NO_MODEL", "kind_name", "config_from_dict", "seed_free_key",
            "differ_only_in_seed"]
