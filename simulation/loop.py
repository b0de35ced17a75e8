"""The one training loop: every model (MLP, Transformer, conv ResNet) plugs in as a :class:`Task`.

Example::

    python -m simulation.kinds.mlp --set arch=residual --set depth=20
    python -m simulation.kinds.transformer --set norm=pre_ln

:func:`train` owns what every run shares: torch's thread count, the memory guard, the record schedule
(:func:`record_steps`), the recorder's arm/collect cycle, divergence handling (a non-finite step is recorded,
re-run with the recorder on if it was not a recorded step, located, and training stops), the per-record
arrays, the metadata (:class:`~simulation.trace.TraceMeta`) and the command-line entry (:func:`main`).
A task supplies the model-specific parts: its model and recorder, its batches, one training step (loss, error,
finiteness), the test error, where a divergence happened, and its own extra arrays and metadata.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import platform
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Generic, TypeVar

import numpy as np
import torch
from tqdm.auto import tqdm

from .config import BaseConfig, ConfigError, config_from_sets
from .core.record import HookRecorder
from .memory import MemoryEstimate, check_budget
from .trace import Trace, TraceMeta

__all__ = ["Task", "StepResult", "Divergence", "train", "record_steps", "main", "one_thread", "minibatch_step",
           "RunLog", "check_fits"]

log = logging.getLogger(__name__)

C = TypeVar("C", bound=BaseConfig)


@dataclass(frozen=True)
class StepResult:
    """One forward and backward pass: loss (nats) and error (fraction wrong) on its batch, and whether the
    loss (and whatever else the task checks, e.g. the gradient norm) is finite."""

    loss: float
    error: float
    finite: bool


@dataclass(frozen=True)
class Divergence:
    """Where a run first became non-finite: ``layer`` -1 means the stem, the head or the loss;
    ``pass_`` is "forward" | "backward" | "stem_or_head", or None where the task cannot tell."""

    step: int
    layer: int
    pass_: str | None = None


class Task(Generic[C]):
    """The model-specific parts of a run, handed to :func:`train`.

    A subclass builds its model, data and optimiser in ``__init__`` (after :func:`train` seeded torch with
    ``config.seed``) and sets :attr:`model`; it implements the methods below. The loop calls, in order:
    :meth:`recorder`, :meth:`before_training` (inside the recorder), then per step :meth:`batch`,
    :meth:`step`, on a recorded step :meth:`test_error`, then :meth:`update`; after the loop
    :meth:`final_arrays` and :meth:`meta`.
    """

    config: C
    model: torch.nn.Module
    label: str = ""  # progress-bar label
    # What training a config needs (simulation.memory's estimate of this task's kind, the one simulation.runs
    # lists for it): train() refuses a run over the budget with it before any work (check_fits). The loop gets
    # the check from its task, so it never imports the table of kinds (which names the trainers above it).
    memory: ClassVar[Callable[[Any], MemoryEstimate]]

    def __init__(self, config: C) -> None:
        self.config = config

    def recorder(self) -> HookRecorder:
        raise NotImplementedError

    def curves(self) -> dict[str, np.ndarray]:
        """Per-step arrays [steps] that :meth:`step` fills (NaN where a step never ran)."""
        return {}

    def before_training(self, recorder: HookRecorder) -> None:
        """Anything measured at initialisation (the recorder is entered, not armed)."""

    def batch(self, step: int) -> Any:
        raise NotImplementedError

    def step(self, step: int, batch: Any) -> StepResult:
        """Zero the gradients, forward, backward (no update); fill :meth:`curves` at ``step``."""
        raise NotImplementedError

    def test_error(self) -> float:
        raise NotImplementedError

    def unrecorded(self) -> contextlib.AbstractContextManager:
        """The context of a step the recorder does not see (its forward and backward pass and its update):
        none by default; :class:`simulation.kinds.mlp.MLPTask` flushes denormal floats to zero there."""
        return contextlib.nullcontext()

    def evaluates(self, step: int) -> bool:
        """Whether recorded step ``step`` measures :meth:`test_error` (else its ``test_error`` record is NaN)."""
        return True

    def update(self, step: int) -> None:
        """The optimiser update of ``step``."""
        raise NotImplementedError

    def where_diverged(self, step: int, row: dict[str, np.ndarray]) -> Divergence:
        raise NotImplementedError

    def final_arrays(self, diverged: Divergence | None) -> dict[str, np.ndarray]:
        """Arrays measured after training (NaN-filled after a divergence)."""
        return {}

    def meta(self, recorder: HookRecorder) -> dict[str, Any]:
        """Task-specific :class:`TraceMeta` fields (e.g. ``block_widths``, ``sublayers``)."""
        return {}


def minibatch_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                   batch_size: int, generator: torch.Generator) -> float:
    """One plain classification step: ``batch_size`` rows of ``x`` [n, ...] drawn with ``generator``, mean
    cross-entropy against ``y`` [n] (class indices), and, when that loss is finite, backward and ``opt.step()``.
    Returns the loss (nats; inf or NaN when it diverged, and then nothing was updated). For the kinds that train
    without a recorder (:mod:`simulation.kinds.hyper`, :mod:`simulation.kinds.landscape`)."""
    idx = torch.randint(len(x), (batch_size,), generator=generator)
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
    value = loss.item()
    if np.isfinite(value):
        loss.backward()
        opt.step()
    return value


def record_steps(config: BaseConfig) -> list[int]:
    """Steps at which statistics are recorded: 0, every ``record_every``, and the last step."""
    steps = list(range(0, config.steps, config.record_every))
    if steps[-1] != config.steps - 1:
        steps.append(config.steps - 1)
    return steps


def train(task_class: type[Task[C]], config: C, progress: bool | None = None) -> Trace:
    """Train ``config`` with ``task_class`` and return its :class:`Trace`.

    Statistics are recorded *before* the optimiser update of each recorded step, so step 0 shows the network
    at initialisation. At the first step that is not finite the step is recorded (run once more with the
    recorder on if it was not a recorded step) to find where the value first became non-finite, training
    stops and the trace keeps what it recorded (``meta.diverged``, ``diverged_step``, ``diverged_layer``,
    ``diverged_pass``). Raises :class:`~simulation.config.ConfigError` before any work when the run would
    not fit in memory (:func:`check_fits`, with the task's :attr:`Task.memory`). ``progress=None`` shows a bar
    only on a terminal. Runs with one torch thread (restored after), so the same config gives bit-identical arrays.
    """
    check_fits(task_class, config)
    with one_thread():
        return _train(task_class, config, progress)


def check_fits(task_class: type[Task[C]], config: C, budget: int | None = None) -> MemoryEstimate:
    """``task_class.memory(config)``, the estimate of what training ``config`` needs; raises ConfigError (one line,
    with the estimate) when it exceeds ``budget`` bytes (default :func:`simulation.memory.budget_bytes`): the
    check :func:`simulation.runs.check_memory` makes for any config, made here from the task."""
    return check_budget(config.digest(), task_class.memory(config), budget)


@contextmanager
def one_thread():
    """Run the block with one torch thread (the previous count restored after), so that a config gives
    bit-identical arrays whatever the machine's core count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _train(task_class: type[Task[C]], config: C, progress: bool | None) -> Trace:
    torch.manual_seed(config.seed)
    run = RunLog(task_class(config))
    task = run.task
    with task.recorder() as rec:
        task.before_training(rec)
        bar = tqdm(range(config.steps), desc=task.label, leave=False,
                   disable=(None if progress is None else not progress), file=sys.stderr)
        for step in bar:
            batch = task.batch(step)
            record = run.records_step(step)
            if record:
                rec.arm()
                result = task.step(step, batch)
            else:
                with task.unrecorded():
                    result = task.step(step, batch)
            if not result.finite and not record:  # same weights, same batch: again with the recorder on
                rec.arm()
                result = task.step(step, batch)
            if run.after_step(step, result, rec, record):
                break
            with task.unrecorded():
                task.update(step)
        bar.close()
    return run.trace(rec)


class RunLog:
    """What one run records while it trains, and its :class:`Trace` at the end: the part of :func:`train` that a
    trainer of several runs at once (:func:`simulation.kinds.mlp.run_together`) repeats per run.

    Per step: :meth:`records_step` says whether the recorder is armed; after the step (recorder collected or not)
    :meth:`after_step` keeps the record row and the held-out error, or notes the divergence and says to stop."""

    def __init__(self, task: Task[C]) -> None:
        self.task, self.config = task, task.config
        self.started = time.perf_counter()
        self.wanted = set(record_steps(task.config))
        self.curves = task.curves()
        self.rows: list[dict[str, np.ndarray]] = []
        self.records: dict[str, list[float]] = {"step": [], "loss": [], "error": [], "test_error": []}
        self.diverged: Divergence | None = None

    def records_step(self, step: int) -> bool:
        return step in self.wanted

    def after_step(self, step: int, result: StepResult, rec: HookRecorder, record: bool) -> bool:
        """Keep step ``step``'s record (``rec`` armed for it when ``record`` or the step was not finite); True when
        the run diverged there and stops (its update is not applied)."""
        if record or not result.finite:
            self.rows.append(rec.collect())
            self.records["step"].append(step)
            self.records["loss"].append(result.loss)
            self.records["error"].append(result.error)
        if not result.finite:
            self.diverged = self.task.where_diverged(step, self.rows[-1])
            self.records["test_error"].append(float("nan"))
            where = f"block {self.diverged.layer + 1}" if self.diverged.layer >= 0 else "stem, head or loss"
            log.warning("run %s diverged at step %d, %s (%s)", self.config.digest(), step, where,
                        self.diverged.pass_ or "pass unknown")  # blocks counted from 1, as on screen
            return True
        if record:
            self.records["test_error"].append(self.task.test_error() if self.task.evaluates(step) else float("nan"))
        return False

    def trace(self, rec: HookRecorder, **meta: Any) -> Trace:
        """The run's Trace, after its last step (``meta``: more :class:`TraceMeta` fields)."""
        task, config, diverged, records = self.task, self.config, self.diverged, self.records
        arrays: dict[str, np.ndarray] = {
            "step": np.asarray(records["step"], dtype=np.int64),
            **{key: np.asarray(records[key], dtype=np.float32) for key in ("loss", "error", "test_error")},
            **self.curves,
            **rec.stack(self.rows),
            **task.final_arrays(diverged),
        }
        trace_meta = TraceMeta(
            config=config.to_dict(), digest=config.digest(), seed=config.seed,
            versions={"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version()},
            layers=rec.names(), diverged=diverged is not None,
            diverged_step=None if diverged is None else diverged.step,
            diverged_layer=None if diverged is None else diverged.layer,
            diverged_pass=None if diverged is None else diverged.pass_,
            **task.meta(rec), **meta,
        )
        log.info("trained %s %s in %.1f s", task.label, config.digest(), time.perf_counter() - self.started)
        return Trace(meta=trace_meta, arrays=arrays)


def main(task_class: type[Task[C]], config_class: type[C], argv: list[str] | None = None, prog: str | None = None
         ) -> int:
    """``python -m simulation.<trainer> [--set key=value ...]``: train one run, print its summary as JSON.

    A bad parameter, or a run that would not fit in memory, prints one line and returns 1."""
    from .summary import summarize

    parser = argparse.ArgumentParser(prog=prog,
                                     description=f"Train one {config_class.__name__} and print its summary.")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        config = config_from_sets(config_class, args.sets)
        check_fits(task_class, config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(json.dumps(summarize(train(task_class, config)).to_dict(), indent=2))
    return 0
