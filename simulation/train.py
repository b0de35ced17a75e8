"""Train one plain or residual network on real data and record what happened inside it.

Example::

    python -m simulation.train --set arch=residual --set depth=20

``run(config) -> Trace`` has no globals and no side effects beyond torch's thread count, which it
restores. The same config gives a bit-identical trace on CPU (one thread, seeded everything).
"""

from __future__ import annotations

import logging
import math
import platform
import sys
import time

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from .config import RunConfig
from .data import load_dataset
from .models import build_model
from .record import STAT_KEYS, Recorder
from .trace import Trace

__all__ = ["run", "record_steps"]

log = logging.getLogger(__name__)


def record_steps(config: RunConfig) -> list[int]:
    """Steps at which statistics are recorded: 0, every ``record_every``, and the last step."""
    steps = list(range(0, config.steps, config.record_every))
    if steps[-1] != config.steps - 1:
        steps.append(config.steps - 1)
    return steps


def _error(logits: torch.Tensor, y: torch.Tensor) -> float:
    return float((logits.argmax(1) != y).float().mean())


def run(config: RunConfig, progress: bool | None = None) -> Trace:
    """Train ``config`` and return its :class:`Trace` (see its docstring for the keys and shapes).

    Statistics are recorded *before* the optimiser update of each recorded step, so step 0 shows the
    network at initialisation. A step whose loss is not finite is recorded once more to find the
    first block with a non-finite value; training then stops and the trace keeps what it recorded
    (``meta["diverged"]``, ``meta["diverged_step"]``, ``meta["diverged_layer"]``).
    ``progress=None`` shows a tqdm bar only on a terminal.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bit-identical results do not depend on the machine's core count
    try:
        return _run(config, progress)
    finally:
        torch.set_num_threads(threads)


def _run(config: RunConfig, progress: bool | None) -> Trace:
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    data = load_dataset(config.dataset, seed=config.seed)
    model = build_model(config.arch, data.n_features, config.width, config.depth, data.n_classes,
                        config.activation, config.norm, config.init_gain)
    if config.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    loss_fn = nn.CrossEntropyLoss()
    batches = torch.Generator().manual_seed(config.seed + 1)
    wanted = set(record_steps(config))

    rows: list[dict[str, np.ndarray]] = []
    steps, losses, errors, test_errors = [], [], [], []
    loss_curve = np.full(config.steps, np.nan, dtype=np.float32)
    diverged: dict[str, int] | None = None

    with Recorder(model) as rec:
        bar = tqdm(range(config.steps), desc=f"{config.arch} d={config.depth}", leave=False,
                   disable=(None if progress is None else not progress), file=sys.stderr)
        for step in bar:
            idx = torch.randint(len(data.x_train), (config.batch_size,), generator=batches)
            x, y = data.x_train[idx], data.y_train[idx]
            model.train()
            opt.zero_grad(set_to_none=True)
            record = step in wanted
            if record:
                rec.arm()
            logits = model(x)
            loss = loss_fn(logits, y)
            loss.backward()
            loss_curve[step] = loss.item()
            if not math.isfinite(loss_curve[step]):
                if not record:  # same weights, same batch: run the step again with the recorder on
                    opt.zero_grad(set_to_none=True)
                    rec.arm()
                    logits = model(x)
                    loss = loss_fn(logits, y)
                    loss.backward()
                row = rec.collect()
                bad = np.flatnonzero(row["nonfinite"] > 0)
                diverged = {"step": step, "layer": int(bad[0]) if len(bad) else -1}
                rows.append(row)
                steps.append(step)
                losses.append(float(loss))
                errors.append(_error(logits, y))
                test_errors.append(float("nan"))
                log.warning("run %s diverged at step %d, block %d", config.digest(), step, diverged["layer"])
                break
            if record:
                rows.append(rec.collect())
                steps.append(step)
                losses.append(float(loss))
                errors.append(_error(logits, y))
                model.eval()
                with torch.no_grad():
                    test_errors.append(_error(model(data.x_test), data.y_test))
            opt.step()
        bar.close()

    arrays: dict[str, np.ndarray] = {
        "step": np.asarray(steps, dtype=np.int64),
        "loss": np.asarray(losses, dtype=np.float32),
        "error": np.asarray(errors, dtype=np.float32),
        "test_error": np.asarray(test_errors, dtype=np.float32),
        "loss_curve": loss_curve,
    }
    for key in STAT_KEYS:
        stacked = np.stack([row[key] for row in rows])
        arrays[key] = stacked.astype(np.int64 if key == "nonfinite" else np.float32)
    # float32 would flush gradient norms below ~1e-38 to 0; keep those two in float64.
    arrays["grad_norm"] = np.stack([row["grad_norm"] for row in rows])
    arrays["out_grad_norm"] = np.stack([row["out_grad_norm"] for row in rows])
    meta = {
        "config": config.to_dict(),
        "digest": config.digest(),
        "seed": config.seed,
        "versions": {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version()},
        "diverged": diverged is not None,
        "diverged_step": None if diverged is None else diverged["step"],
        "diverged_layer": None if diverged is None else diverged["layer"],
    }
    log.info("trained %s %s in %.1f s", config.arch, config.digest(), time.perf_counter() - started)
    return Trace(meta=meta, arrays=arrays)
