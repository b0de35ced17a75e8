"""Runs across seeds and the depth sweep, as plain JSON-able tables (torch-free; format in docs/sweep.md).

Example::

    python render.py train depth_sweep --set seeds=0,1,2 --json

Run keys: ``NAME`` for the first seed of an experiment's ``seeds``, ``NAME@seed{s}`` for the others
(:func:`simulation.experiments.seed_key`).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from .summary import tail_mean
from .trace import Trace

__all__ = ["split_seed_key", "group_by_seed", "summarize_seeds", "depth_sweep_summary", "SWEEP_KEY"]

_SEED = re.compile(r"^(?P<name>.+)@seed(?P<seed>\d+)$")
SWEEP_KEY = re.compile(r"^(?P<model>mlp|conv)_(?P<arch>plain|residual)_d(?P<depth>\d+)$")


def split_seed_key(key: str) -> tuple[str, int | None]:
    """``"plain_d56@seed3" -> ("plain_d56", 3)``; a bare name gives ``(name, None)`` (its seed is the
    first of ``seeds``: read ``trace.meta["seed"]``)."""
    match = _SEED.match(key)
    return (match["name"], int(match["seed"])) if match else (key, None)


def group_by_seed(runs: dict[str, Any]) -> dict[str, dict[int, Any]]:
    """``{run key: Trace}`` -> ``{NAME: {seed: Trace}}``, seeds in the order the keys come (the order of
    ``seeds``). The seed of a bare key is its trace's ``meta["seed"]`` (or, for values that are run
    configs or summaries, their ``seed`` / ``config["seed"]``)."""
    out: dict[str, dict[int, Any]] = {}
    for key, value in runs.items():
        name, seed = split_seed_key(key)
        if seed is None:
            seed = _seed_of(value)
        out.setdefault(name, {})[seed] = value
    return out


def _seed_of(value: Any) -> int:
    if isinstance(value, Trace):
        return int(value.meta["seed"])
    if isinstance(value, dict):
        return int(value["config"]["seed"])
    return int(value.seed)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float))


def summarize_seeds(summaries: dict[str, Any]) -> dict[str, dict[str, list[Any]]]:
    """``{run key: summarize(trace)}`` (RunSummary or its dict) -> ``{NAME: {"seeds": [...], figure: [one value per seed]}}`` for
    every scalar figure (None stays None: a list always has one entry per seed)."""
    out: dict[str, dict[str, list[Any]]] = {}
    summaries = {k: v.to_dict() if hasattr(v, "to_dict") else v for k, v in summaries.items()}  # RunSummary
    for name, by_seed in group_by_seed(summaries).items():
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


def depth_sweep_summary(traces: dict[str, Trace]) -> dict[str, dict[str, dict[str, Any]]]:
    """The ``depth_sweep`` experiment's traces as ``{model: {arch: table}}`` (docs/sweep.md): ``table``
    has ``depths`` (ascending), ``seeds``, and per depth a list over seeds of ``log10_grad_ratio_step0``
    (first over last block, step 0; None where it underflowed or diverged), ``grad_underflow`` (bool) and
    ``final_train_error`` (mean error over the last 10 % of steps, a fraction; None after a divergence).
    Raises ValueError for a key that is not ``{model}_{arch}_d{depth}[@seed{s}]``."""
    cells: dict[tuple[str, str], dict[int, dict[int, Trace]]] = {}
    for name, by_seed in group_by_seed(traces).items():
        match = SWEEP_KEY.match(name)
        if not match:
            raise ValueError(f"not a depth_sweep run key: {name!r} (expected mlp|conv_plain|residual_dN)")
        cells.setdefault((match["model"], match["arch"]), {})[int(match["depth"])] = by_seed
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
                error = float("nan") if trace.meta.get("diverged") else tail_mean(trace["error_curve"])
                errors.append(error if math.isfinite(error) else None)
            table["log10_grad_ratio_step0"].append(ratios)
            table["grad_underflow"].append(underflows)
            table["final_train_error"].append(errors)
        out.setdefault(model, {})[arch] = table
    return out
