"""Runs across seeds and the depth sweep, as plain JSON-able tables (torch-free; format in docs/how-to/sweeps.md).

Example::

    python render.py train depth_sweep --set seeds=0,1,2 --json

Runs come keyed by :class:`~simulation.runkeys.RunKey` (name, seed), as :func:`simulation.experiments.build_runs`
builds them; the tables here are keyed by run name, with one entry per seed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .runkeys import RunKey, by_name
from .summary import tail_mean
from .trace import Trace

__all__ = ["summarize_seeds", "depth_sweep_summary"]


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float))


def summarize_seeds(summaries: dict[RunKey, Any]) -> dict[str, dict[str, list[Any]]]:
    """``{RunKey: summarize(trace)}`` -> ``{NAME: {"seeds": [...], figure: [one value per seed]}}`` for every
    scalar figure (None stays None: a list always has one entry per seed). JSON-able: the summaries' ``to_dict``."""
    out: dict[str, dict[str, list[Any]]] = {}
    for name, by_seed in by_name({k: v.to_dict() for k, v in summaries.items()}).items():
        figures = [k for k, v in next(iter(by_seed.values())).items() if k != "config" and _scalar(v)]
        entry: dict[str, list[Any]] = {"seeds": list(by_seed)}
        for figure in figures:
            entry[figure] = [s.get(figure) for s in by_seed.values()]
        out[name] = entry
    return out


def _log10_ratio(trace: Trace) -> tuple[float | None, bool]:
    """log10(||dL/dW_first|| / ||dL/dW_last||) at step 0, and whether the first block's gradient
    underflowed to exactly 0 (then the log is None)."""
    grad = np.asarray(trace["grad_norm"][0], dtype=np.float64)
    first, last = float(grad[0]), float(grad[-1])
    if first == 0.0 and math.isfinite(last) and last > 0:
        return None, True
    if not (math.isfinite(first) and math.isfinite(last)) or first <= 0 or last <= 0:
        return None, False
    return math.log10(first / last), False


def depth_sweep_summary(traces: dict[RunKey, Trace]) -> dict[str, dict[str, dict[str, Any]]]:
    """The ``depth_sweep`` experiment's traces as ``{model: {arch: table}}`` (docs/how-to/sweeps.md): ``table``
    has ``depths`` (ascending), ``seeds``, and per depth a list over seeds of ``log10_grad_ratio_step0``
    (first over last block, step 0; None where it underflowed or diverged), ``grad_underflow`` (bool) and
    ``final_train_error`` (mean error over the last 10 % of steps, a fraction; None after a divergence).
    Model, arch and depth are the traces' configs'. Raises ValueError for a trace that is not of an MLP or conv net,
    plain or residual (a run of another experiment)."""
    cells: dict[tuple[str, str], dict[int, dict[int, Trace]]] = {}
    for key, trace in traces.items():
        config = trace.run_config
        model, arch = getattr(config, "model", None), getattr(config, "arch", None)
        if model not in ("mlp", "conv") or arch not in ("plain", "residual"):
            raise ValueError(f"not a depth_sweep run: {key.name!r} (model {model!r}, arch {arch!r})")
        cells.setdefault((model, arch), {}).setdefault(config.depth, {})[key.seed] = trace
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (model, arch), by_depth in sorted(cells.items()):
        depths = sorted(by_depth)
        seeds = list(dict.fromkeys(s for d in depths for s in by_depth[d]))
        table: dict[str, Any] = {"depths": depths, "seeds": seeds, "log10_grad_ratio_step0": [],
                                 "grad_underflow": [], "final_train_error": []}
        for depth in depths:
            ratios, underflows, errors = [], [], []
            for seed in seeds:
                trace = by_depth[depth].get(seed)
                if trace is None:  # a seed missing at this depth: keep one entry per seed
                    ratios.append(None), underflows.append(False), errors.append(None)
                    continue
                ratio, underflow = _log10_ratio(trace)
                ratios.append(ratio)
                underflows.append(underflow)
                error = float("nan") if trace.meta.diverged else tail_mean(trace["error_curve"])
                errors.append(error if math.isfinite(error) else None)
            table["log10_grad_ratio_step0"].append(ratios)
            table["grad_underflow"].append(underflows)
            table["final_train_error"].append(errors)
        out.setdefault(model, {})[arch] = table
    return out
