"""Pure helpers the scenes share: missing values, verdicts, percentages, tail means, log ranges.

Example::

    from scenes.kit.helpers import log_range, tail_mean
    exp_min, exp_max = log_range([1e-9, 0.3, float("nan")])     # (-10, 0)

A value a trace should hold but does not (NaN in a recorded array, or an array the file lacks) is
*missing*: it is drawn as a labelled gap, never as 0, and no number shown is computed from it
(:func:`strict_mean`, :func:`compare`). NaN that marks steps never run after a divergence is not
missing: the trace says where the run stopped (:func:`tail_mean` stops there). Numpy only: no manim.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["is_missing", "strict_mean", "compare", "percent_value", "tail_mean", "steps_run", "log_range",
           "finite_runs", "missing_runs", "finite_max", "fill_missing_arrays", "fill_required_arrays", "running_mean"]


def is_missing(value: Any) -> bool:
    """True for None and NaN (inf is a measured value: a run that overflowed)."""
    if value is None:
        return True
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def strict_mean(values: np.ndarray | Sequence[float]) -> float:
    """Mean of ``values``; NaN when any value is missing (a mean that skipped it would be computed
    without it, and shown as if it were complete)."""
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()) if arr.size else float("nan")


def compare(a: float, b: float, margin: float = 0.0) -> bool | None:
    """``a > b + margin``, or None when ``a`` or ``b`` is missing: a verdict never rests on a gap."""
    if is_missing(a) or is_missing(b):
        return None
    return bool(float(a) > float(b) + margin)


def steps_run(trace: Any, length: int) -> int:
    """How many of a per-step curve's ``length`` steps ran: all, or those before the divergence the
    trace's metadata records (NaN after it means "never run", not "missing")."""
    meta = trace.meta
    if meta.diverged and isinstance(meta.diverged_step, int):
        return max(0, min(length, meta.diverged_step))
    return length


def tail_mean(curve: np.ndarray | Sequence[float], fraction: float = 0.1, stop: int | None = None) -> float:
    """Mean of the last ``fraction`` (at least one step) of ``curve[:stop]``: the steps run before a
    divergence (``stop``, see :func:`steps_run`). NaN when a value in that tail is missing or nothing
    ran: the figure is never computed from part of its window."""
    curve = np.asarray(curve, dtype=np.float64)[:stop]
    if not len(curve):
        return float("nan")
    window = max(1, int(round(len(curve) * fraction)))
    return float(curve[-window:].mean())


def finite_max(values: np.ndarray | Sequence[float], default: float = 1.0) -> float:
    """The largest finite value (for the top of an axis); ``default`` when there is none."""
    arr = np.asarray(values, dtype=np.float64).ravel()
    arr = arr[np.isfinite(arr)]
    return float(arr.max()) if arr.size else float(default)


def percent_value(fraction: float) -> float:
    """A fraction (0.153) as percentage points (15.3); NaN stays NaN."""
    return 100.0 * float(fraction)


def log_range(values: np.ndarray | Sequence[float], margin: int = 1, lowest: int = -300,
              top_at_least: int | None = 0) -> tuple[int, int]:
    """Integer exponents (exp_min, exp_max) of a log10 axis that holds every positive finite value of
    ``values``, ``margin`` decades below the smallest; exp_max is at least ``top_at_least`` (None: no
    minimum). Missing, zero and negative values are ignored; nothing usable gives (lowest-safe) (-1, 0)."""
    arr = np.asarray(values, dtype=np.float64).ravel()
    positive = arr[np.isfinite(arr) & (arr > 0)]
    if positive.size == 0:
        return (-1, 0 if top_at_least is None else max(0, top_at_least))
    exp_min = max(int(np.floor(np.log10(positive.min()))) - margin, lowest)
    exp_max = int(np.ceil(np.log10(positive.max())))
    if top_at_least is not None:
        exp_max = max(exp_max, top_at_least)
    return exp_min, max(exp_max, exp_min + 1)


def finite_runs(values: np.ndarray | Sequence[float]) -> list[tuple[int, int]]:
    """``[(start, stop), ...]``: the index ranges of consecutive non-missing values (a curve is drawn
    as one piece per range, with a gap between)."""
    ok = ~np.isnan(np.asarray(values, dtype=np.float64))
    runs, start = [], None
    for i, good in enumerate(ok):
        if good and start is None:
            start = i
        elif not good and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(ok)))
    return runs


def missing_runs(values: np.ndarray | Sequence[float]) -> list[tuple[int, int]]:
    """``[(start, stop), ...]``: the index ranges of consecutive missing (NaN) values."""
    n = len(np.asarray(values))
    edges = [0] + [i for run in finite_runs(values) for i in run] + [n]
    return [(a, b) for a, b in zip(edges[::2], edges[1::2]) if b > a]


def running_mean(values: np.ndarray | Sequence[float], window: int) -> np.ndarray:
    """Trailing mean over the last ``window`` values (fewer at the start): float64 [T]. A point whose
    window holds a missing value is missing itself (NaN), so the gap widens by ``window`` steps and
    the curve after it is intact."""
    values = np.asarray(values, dtype=np.float64)
    bad = np.isnan(values)
    sums = np.cumsum(np.insert(np.where(bad, 0.0, values), 0, 0.0))
    holes = np.cumsum(np.insert(bad.astype(np.int64), 0, 0))
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(idx - window, 0)
    out = (sums[idx] - sums[lo]) / (idx - lo)
    return np.where(holes[idx] - holes[lo] > 0, np.nan, out)


# Arrays that only some runs record by design (simulation.trace.Trace): their absence is not a gap.
RUN_SPECIFIC = frozenset({"path_length_fraction"})  # residual runs only


def fill_missing_arrays(traces: dict[str, Any]) -> dict[str, list[str]]:
    """Give every trace of one experiment each array that another of its traces has, as all NaN:
    ``{run: [keys added]}`` (runs that lacked nothing are left out). Its axes come from
    :data:`simulation.trace.ARRAY_AXES`, their sizes from this run (:meth:`~simulation.trace.Trace.sizes`;
    the number of records from a sibling when this run has none); an array no trace has, one the table does
    not name, or one whose sizes this run does not say stays absent. Modifies the traces in place."""
    added: dict[str, list[str]] = {}
    for name, trace in traces.items():
        siblings = [other for other in traces.values() if other is not trace]
        records = next((o.sizes()["records"] for o in siblings if "records" in o.sizes()), None)
        own = {} if records is None or "records" in trace.sizes() else {"records": records}
        for key in dict.fromkeys(k for other in siblings for k in other.arrays):
            if key in trace.arrays or key in RUN_SPECIFIC:
                continue
            blank = trace.blank(key, own)
            if blank is not None:
                trace.arrays[key] = blank
                added.setdefault(name, []).append(key)
    return added


def fill_required_arrays(traces: dict[str, Any], required: Iterable[str]) -> dict[str, list[str]]:
    """Give every trace each array of ``required`` (names of :data:`simulation.trace.ARRAY_AXES`) it lacks, as
    all NaN: ``{run: [keys added]}``. For an experiment of one run, where no sibling says which arrays a
    trace should hold. A size the run does not say (no ``step`` array, no layers) leaves that array absent.
    Modifies in place."""
    added: dict[str, list[str]] = {}
    for name, trace in traces.items():
        for key in required:
            blank = None if key in trace.arrays else trace.blank(key)
            if blank is not None:
                trace.arrays[key] = blank
                added.setdefault(name, []).append(key)
    return added
