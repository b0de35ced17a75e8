"""The one table of run kinds: config class, trainer, memory estimate, work estimate, label (torch-free).

Example::

    python -m simulation '{"kind": "transformer", "depth": 4}'            # kind, label, memory, work
    python -m simulation --measure '{"depth": 20}'                          # and the measured peak

A *run kind* says how one config class is trained. Everything else reads this table: the trace cache
(:mod:`simulation.cache`) asks it for the trainer, the memory guard for the estimate, the sweep for the work,
log lines for the label; :func:`register_kind` records each config class in
:data:`simulation.config.CONFIG_CLASSES`, which :func:`simulation.config.config_from_dict` reads a ``to_dict()``
back with. The kind's trainer id
(``"module:function"``) is hashed into every config's digest (:meth:`simulation.config.BaseConfig.digest`),
so choosing another trainer for a kind gives its traces new cache keys.

Adding a kind is one entry here, after its config class, trainer and memory estimate exist (the steps and files:
docs/developers/adding-a-kind-of-run.md; the worked example is ``highway``)::

    register_kind(RunKind(
        name="user_model",                          # the config's ``kind`` field (to_dict()["kind"])
        config=UserModelConfig,                     # a frozen dataclass deriving simulation.config.BaseConfig
        trainer="simulation.kinds.user_model:run",        # run(config, progress) -> Trace; imported when first used
        memory=user_model_memory,                   # config -> simulation.memory.MemoryEstimate (bytes)
        work=lambda c: c.steps * c.depth,           # config -> MLP block-steps (~0.2 ms of one core each)
        label="a user's nn.Module and its plain twin",
    ))

A config class whose dataclass has no ``kind`` field is the default kind (``mlp``: RunConfig, for the traces
written before kinds existed). The trainer module may import torch; this module and the config classes
must not (scenes read configs and digests). The table sits above the trainers (``simulation/kinds/``): it names
them by string and loads them when used, and none of them, nor the loop, imports it back (tests/test_imports.py
counts those strings as imports; the loop gets the memory check from its task, ``simulation.loop.Task.memory``).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable

from .config import (CONFIG_CLASSES, DEFAULT_KIND, BaseConfig, ConfigError, HighwayConfig, HyperConfig, IdentityFitConfig,
                     LandscapeConfig, RecordedConfig, RunConfig, TransformerConfig, UserModelConfig, config_from_dict,
                     differ_only_in_seed, seed_free_key, trace_files)
from .events import training_run
from .memory import (MemoryEstimate, check_budget, conv_memory, highway_memory, identity_fit_memory, mlp_memory,
                     probe_in_subprocess, transformer_memory)

__all__ = ["RunKind", "KINDS", "DEFAULT_KIND", "register_kind", "kind_of", "trainer", "train", "describe", "start_line",
           "hit_line", "seed_free_key", "differ_only_in_seed",
           "config_from_dict", "estimate", "check_memory", "work", "LOG_FIELDS", "seed_groups", "train_group",
           "GROUP_BYTES", "GROUP_RUNS", "signals_held"]

LOG_FIELDS = ("kind", "arch", "norm", "residual", "ffn", "depth", "activation", "warmup_steps")  # shown in log lines if present


@dataclass(frozen=True)
class RunKind:
    """One kind of run: how configs of ``config`` are trained, how much they need, how they are named."""

    name: str  # the config's "kind" in to_dict() (absent for the default kind)
    config: type[BaseConfig]  # the frozen config class
    trainer: str  # "module:function" of run(config, progress=None) -> Trace; hashed into the digest
    memory: Callable[[Any], MemoryEstimate]  # bytes training a config needs, by part (simulation.memory)
    work: Callable[[Any], int]  # rough cost in MLP block-steps (~0.2 ms of one core each); decides local vs Dask
    label: str  # a short description for listings and log lines
    # "module:function" of run_together(configs, progress) -> [Trace]: several runs of this kind that differ only in
    # their seed, trained at once with the traces of training each alone (not hashed: the arrays are the same);
    # ``together_if(config)`` says which configs it takes. None: each run alone.
    together: str | None = None
    together_if: Callable[[Any], bool] = lambda config: True

    def load_trainer(self, together: bool = False) -> Callable[..., Any]:
        """The trainer function (``together``: :attr:`together`'s); imports its module (and torch) now."""
        return load(self.together if together else self.trainer)


def load(name: str) -> Callable[..., Any]:
    """The function ``"module:function"`` names (a trainer of the table below it); imports its module now."""
    module, _, function = name.partition(":")
    with signals_held():  # torch's import calls back into Python from C++ (see signals_held)
        return getattr(importlib.import_module(module), function)


@contextlib.contextmanager
def signals_held(signums: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)):
    """Hold Ctrl-C (SIGINT) and SIGTERM while the block runs; a signal that came meanwhile is raised again, with the
    handler that was in place, when it ends (the first one only).

    For loading native modules: torch's import calls Python from C++ through pybind11, and an exception that a
    signal handler raises there (KeyboardInterrupt, or the SystemExit of render.py's and the trainer's handlers)
    cannot unwind through it: the C++ runtime aborts the process (exit status -6, "terminate called after
    throwing an instance of 'pybind11::error_already_set'"). Holding delays a stop by at most the import (~1 s).
    Only the main thread can change handlers, so elsewhere (a Dask worker thread) the block runs as it is; an
    ignored signal (SIG_IGN) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {s: signal.getsignal(s) for s in signums}
    held = [s for s, handler in previous.items() if handler not in (signal.SIG_IGN, None)]
    for s in held:
        signal.signal(s, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for s in held:
            signal.signal(s, previous[s])
        if caught:
            signal.raise_signal(caught[0])


KINDS: dict[str, RunKind] = {}


def register_kind(kind: RunKind) -> RunKind:
    """Add ``kind`` to :data:`KINDS` (a kind of the same name is replaced) and tell its config class, whose
    :meth:`~simulation.config.BaseConfig.digest` hashes the trainer id. Raises ConfigError for a trainer id
    that is not ``module:function`` or a config class already registered under another name."""
    module, sep, function = kind.trainer.partition(":")
    if not (module and sep and function.isidentifier()):
        raise ConfigError(f"trainer of run kind {kind.name!r} must be 'module:function'; got {kind.trainer!r}")
    for other in KINDS.values():
        if other.config is kind.config and other.name != kind.name:
            raise ConfigError(f"{kind.config.__name__} is already the config of run kind {other.name!r}")
    KINDS[kind.name] = kind
    CONFIG_CLASSES[kind.name] = kind.config  # what config_from_dict (simulation.config) reads a dict back with
    kind.config.run_kind = kind
    return kind


def kind_of(config: BaseConfig) -> RunKind:
    """The registered kind of ``config`` (by its class). Raises ConfigError for an unregistered class."""
    kind = type(config).run_kind
    if kind is None:
        raise ConfigError(f"{type(config).__name__} is not a registered run kind (simulation.runs.register_kind)")
    return kind


def trainer(config: BaseConfig) -> Callable[..., Any]:
    """The ``run(config, progress) -> Trace`` that trains ``config``; torch is imported only here."""
    return kind_of(config).load_trainer()


def train(config: BaseConfig, progress: bool | None = None) -> Any:
    """The Trace of ``config``, trained now by its kind's trainer; its start and end are written as run events
    (:mod:`simulation.events`, when ``$RESIDUAL_EVENTS`` names a file)."""
    with training_run(config.digest(), kind_of(config).name, getattr(config, "seed", None), describe(config)):
        return trainer(config)(config, progress=progress)


# A group of runs trained together holds at most this much (the sum of their estimates): far below a run that
# cannot share the memory with a second trainer (cli/pipeline.py, RunQueue), so grouping changes no schedule.
GROUP_BYTES = 64 * 2**20
GROUP_RUNS = 5  # at most this many seeds in one group


def seed_groups(configs: list[BaseConfig], max_bytes: int = GROUP_BYTES, max_runs: int = GROUP_RUNS
                ) -> list[list[BaseConfig]]:
    """``configs`` (distinct) in groups to train at once: runs of a kind with a :attr:`RunKind.together` trainer
    that differ only in their seed, at most ``max_runs`` of them and ``max_bytes`` of estimates together; every
    other run alone. Groups are in the order of their first run (so the lecture order of the first seeds is kept)."""
    groups: list[list[BaseConfig]] = []
    open_groups: dict[str, list[BaseConfig]] = {}
    for config in configs:
        kind = kind_of(config)
        if kind.together is None or not kind.together_if(config):
            groups.append([config])
            continue
        key = seed_free_key(config)
        group = open_groups.get(key)
        size = estimate(config).total
        if group is None or len(group) >= max_runs or sum(estimate(c).total for c in group) + size > max_bytes:
            group = open_groups[key] = []
            groups.append(group)
        group.append(config)
    return groups


def train_group(configs: list[BaseConfig], progress: bool | None = None) -> list[Any]:
    """Traces of ``configs`` (one :func:`seed_groups` group): trained together by the kind's
    :attr:`RunKind.together` trainer, or the one run alone."""
    if len(configs) == 1:
        return [train(configs[0], progress=progress)]
    seeds = [getattr(c, "seed", None) for c in configs]
    with contextlib.ExitStack() as stack:  # one run event each, all spanning the group (CPU s: the group's)
        for config in configs:
            stack.enter_context(training_run(config.digest(), kind_of(config).name, getattr(config, "seed", None),
                                             f"{describe(config)} together with seeds {seeds}"))
        return kind_of(configs[0]).load_trainer(together=True)(configs, progress=progress)


def describe(config: BaseConfig) -> str:
    """A short label for log lines, from whichever of :data:`LOG_FIELDS` the config has."""
    return " ".join(f"{k}={getattr(config, k)}" for k in LOG_FIELDS if hasattr(config, k))


def start_line(config: BaseConfig) -> str:
    """The log line said when ``config``'s trace is made: "training DIGEST (...)", or "reading FILE (...)" for a
    run read from a trace file (``--trace``/``--twin``: nothing is trained, and the line says which file)."""
    if isinstance(config, RecordedConfig):
        return f"reading {config.path} ({describe(config)}): nothing trained"
    return f"training {config.digest()} ({describe(config)})"


def hit_line(config: BaseConfig) -> str:
    """The log line said when ``config``'s trace comes from the cache: "cache hit DIGEST (...): nothing trained", or
    for a run read from a file "reading FILE (...): from the cache, nothing trained" (a new user's explorer said
    "cache hit c5792db042a96fba (kind=recorded ...)" for the file their own loop wrote)."""
    if isinstance(config, RecordedConfig):
        return f"reading {config.path} ({describe(config)}): from the cache, nothing trained"
    return f"cache hit {config.digest()} ({describe(config)}): nothing trained"


def estimate(config: BaseConfig) -> MemoryEstimate:
    """What training ``config`` needs, by part (see :mod:`simulation.memory` for what is counted)."""
    return kind_of(config).memory(config)


def check_memory(config: BaseConfig, budget: int | None = None) -> MemoryEstimate:
    """The estimate of ``config``; raises ConfigError (one line, with the estimate) when it exceeds ``budget``
    bytes (default :func:`simulation.memory.budget_bytes`)."""
    return check_budget(config.digest(), estimate(config), budget)


def work(config: BaseConfig) -> int:
    """A rough cost of one run in MLP block-steps (see :attr:`RunKind.work`)."""
    return kind_of(config).work(config)


def user_model_memory(config: UserModelConfig) -> MemoryEstimate:
    """A user's model is built and probed (:func:`simulation.kinds.user_model.estimate_memory`: parameters x optimiser
    state, activations measured by the probe forward): in this process when it has torch already, else in a
    subprocess (:func:`simulation.memory.probe_in_subprocess`), so that a torch-free caller (a scene) stays
    torch-free. Raises ConfigError (one line) when the model cannot be built or run."""
    if "torch" in sys.modules:
        return load("simulation.kinds.user_model:estimate_memory")(config)
    return probe_in_subprocess(config)


def _run_config_memory(config: RunConfig) -> MemoryEstimate:
    return conv_memory(config) if config.model == "conv" else mlp_memory(config)


def _run_config_work(config: RunConfig) -> int:
    """steps x blocks; a conv block (two 3x3 convs on 8x8 maps) costs about 20 MLP blocks (measured)."""
    if config.model == "conv":
        return config.steps * 20 * (config.depth - 2) // 2
    return config.steps * config.depth


# The table. A new kind is one more entry (see the module docstring).
register_kind(RunKind(
    name="mlp", config=RunConfig, trainer="simulation.kinds.mlp:run", memory=_run_config_memory, work=_run_config_work,
    label="plain or residual MLP / conv net on digits or bands (He et al. 2015)",
    together="simulation.kinds.mlp:run_together", together_if=lambda c: c.model == "mlp"))
register_kind(RunKind(
    name="transformer", config=TransformerConfig, trainer="simulation.kinds.transformer:run", memory=transformer_memory,
    work=lambda c: c.steps * c.depth, label="small Post-LN / Pre-LN Transformer on a toy sequence task",
    together="simulation.kinds.transformer:run_together"))
register_kind(RunKind(
    name="identity_fit", config=IdentityFitConfig, trainer="simulation.kinds.identity_fit:run",
    memory=identity_fit_memory, work=lambda c: c.steps, label="one block fitting the identity on digits"))
register_kind(RunKind(
    name="user_model", config=UserModelConfig, trainer="simulation.kinds.user_model:run", memory=user_model_memory,
    work=lambda c: c.steps * 200,  # blocks unknown until the model is built: counted as a conv net of 10 blocks
    label="a user's nn.Module (--model FILE.py:FACTORY) or its plain twin"))


def _landscape_work(config: LandscapeConfig) -> int:
    """Its conv training plus grid**2 forward passes (a third of a step each) of ``eval_examples``."""
    blocks = 20 * (config.depth - 2) // 2
    return config.steps * blocks + config.grid ** 2 * blocks * config.eval_examples // (3 * 128)


register_kind(RunKind(
    name="landscape", config=LandscapeConfig, trainer="simulation.kinds.landscape:run",
    memory=lambda c: conv_memory(c.run_config()),  # the slice runs without autograd: training is the peak
    work=_landscape_work, label="a conv net trained on digits and its loss on a random 2-D slice (Li et al. 2018)"))


def _hyper_memory(config: HyperConfig) -> MemoryEstimate:
    """Blocks of two width x width Linears, n x n mixing each; ~6 [B, n, w] tensors per block kept for backward."""
    n, w = config.streams, config.width
    params = config.depth * (2 * w * w + 2 * w + n * n + 2 * n) + 65 * w + 11 * w
    activations = config.depth * 6 * n * w * max(config.batch_size, 360)  # 360: the held-out split at a record
    return MemoryEstimate(params * 4, params * 4, 3 * params * 4, activations * 4)


register_kind(RunKind(
    name="hyper", config=HyperConfig, trainer="simulation.kinds.hyper:run", memory=_hyper_memory,
    work=lambda c: c.steps * c.depth * c.streams,
    label="n residual streams mixed by learned matrices, free (HC) or doubly stochastic (mHC)"))
register_kind(RunKind(
    name="highway", config=HighwayConfig, trainer="simulation.kinds.highway:run", memory=highway_memory,
    work=lambda c: c.steps * c.depth // 2,  # a one-layer block: half an MLP block (two Linears)
    label="plain, residual or highway (gated) one-layer blocks on digits (Srivastava et al. 2015)"))


def _recorded_memory(config: RecordedConfig) -> MemoryEstimate:
    """Reading a trace file holds its arrays (about its size: .npz is not compressed) and the cache's copy."""
    try:
        size = sum(p.stat().st_size for p in trace_files(config.path))
    except OSError:
        size = 0
    return MemoryEstimate(0, 0, 0, 2 * size)


register_kind(RunKind(
    name="recorded", config=RecordedConfig, trainer="simulation.kinds.recorded:run", memory=_recorded_memory,
    work=lambda c: 1, label="a run recorded elsewhere (residual_lecture.watch), read from its trace file (--trace)"))

