"""Summary figures of one trace, as plain JSON-able numbers, and the closed forms they are compared
with (torch-free).

Example::

    python -c "from simulation.summary import path_length_fraction; print(path_length_fraction(3))"
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .config import ConfigError, HyperConfig, IdentityFitConfig, LandscapeConfig
from .trace import Trace

__all__ = ["inspect_trace", "watch_summary", "summarize", "RunSummary", "loss_blew_up", "blown_up_losses", "BLEW_UP", "autocorrelation", "path_length_fraction",
           "safe_log10", "tail_mean", "first_step_below", "ratio_course", "COURSES", "slice_hessians", "slice_eigenvalues", "curvature_ratio",
           "nonconvex_fraction", "local_minima", "slice_figures"]


def _f(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _list(values: Any) -> list[float | None]:
    return [_f(v) for v in np.asarray(values).ravel()]


def safe_log10(values: Any) -> list[float | None]:
    """log10 of each value; None for 0 (an underflow), negative or non-finite values, so that a log
    axis never sees -inf or NaN."""
    out = []
    for v in np.asarray(values, dtype=np.float64).ravel():
        out.append(math.log10(v) if math.isfinite(v) and v > 0 else None)
    return out


def autocorrelation(values: Any, lags: int) -> np.ndarray:
    """Sample autocorrelation r(k) = sum_i (g_i - m)(g_{i+k} - m) / sum_i (g_i - m)^2, k = 0..lags-1,
    of a 1-D series (Balduzzi et al. 2017 use it to tell brown from white noise in gradients).
    float64 [lags]; all NaN if the series has a non-finite value or no variance (a constant gradient,
    e.g. one that underflowed to 0 everywhere). Raises ValueError unless 1 <= lags <= len(values)."""
    g = np.asarray(values, dtype=np.float64).ravel()
    if not 1 <= lags <= len(g):
        raise ValueError(f"lags must be between 1 and {len(g)}; got {lags}")
    out = np.full(lags, np.nan)
    if not np.all(np.isfinite(g)):
        return out
    centred = g - g.mean()
    denominator = float(centred @ centred)
    if denominator == 0.0 or not math.isfinite(denominator):
        return out
    for k in range(lags):
        out[k] = float(centred[: len(g) - k] @ centred[k:]) / denominator
    return out


def path_length_fraction(depth: int) -> np.ndarray:
    """Fraction of the 2**depth paths through ``depth`` residual blocks that pass through exactly k
    residual branches: C(depth, k) / 2**depth, k = 0..depth (Veit et al. 2016, §3 and Fig. 6a).
    float64 [depth + 1], sums to 1. Exact big-integer arithmetic, so it holds for any depth."""
    if depth < 0:
        raise ValueError(f"depth must be >= 0; got {depth}")
    total = 2 ** depth
    return np.array([math.comb(depth, k) / total for k in range(depth + 1)], dtype=np.float64)


def tail_mean(curve: np.ndarray, fraction: float = 0.1) -> float:
    """Mean of the last ``fraction`` of the finite prefix of a per-step curve (NaN marks steps that
    were not run); smooths the batch noise of a training curve. NaN if nothing was run."""
    curve = np.asarray(curve, dtype=np.float64)
    run = np.flatnonzero(~np.isnan(curve))
    if not len(run):
        return float("nan")
    done = curve[: run[-1] + 1]
    bad = np.flatnonzero(~np.isfinite(done))
    if len(bad):  # stop before the first non-finite loss of a diverged run
        done = done[: bad[0]]
    if not len(done):
        return float("nan")
    window = max(1, int(round(len(done) * fraction)))
    return float(done[-window:].mean())


def first_step_below(curve: Any, tolerance: float) -> int:
    """Index of the first value of ``curve`` [n] strictly below ``tolerance``; -1 if none is (NaN never is)."""
    below = np.flatnonzero(np.asarray(curve, dtype=np.float64) < tolerance)
    return int(below[0]) if len(below) else -1


def slice_hessians(loss: Any, step: float) -> np.ndarray:
    """The 2-D Hessian of a loss surface sampled on a square grid, by central differences at every interior
    point: ``loss`` [G, G] (loss[i, j] at alpha_i, beta_j, spacing ``step``) -> float64 [G - 2, G - 2, 2, 2],
    [[f_aa, f_ab], [f_ab, f_bb]]; NaN where a neighbour is not finite. Exact for a quadratic.
    Raises ValueError for a grid that is not square or smaller than 3 x 3, or a step that is not > 0."""
    f = np.asarray(loss, dtype=np.float64)
    if f.ndim != 2 or f.shape[0] != f.shape[1] or f.shape[0] < 3:
        raise ValueError(f"loss must be a square grid of at least 3 x 3; got shape {f.shape}")
    if not (math.isfinite(step) and step > 0):
        raise ValueError(f"step must be a finite number > 0; got {step}")
    f = np.where(np.isfinite(f), f, np.nan)
    c = f[1:-1, 1:-1]
    f_aa = (f[2:, 1:-1] - 2 * c + f[:-2, 1:-1]) / step ** 2
    f_bb = (f[1:-1, 2:] - 2 * c + f[1:-1, :-2]) / step ** 2
    f_ab = (f[2:, 2:] - f[2:, :-2] - f[:-2, 2:] + f[:-2, :-2]) / (4 * step ** 2)
    return np.stack([np.stack([f_aa, f_ab], -1), np.stack([f_ab, f_bb], -1)], -2)


def slice_eigenvalues(loss: Any, step: float) -> np.ndarray:
    """Eigenvalues (ascending: lambda_min, lambda_max) of :func:`slice_hessians` at every interior point:
    float64 [G - 2, G - 2, 2]; NaN where the Hessian is."""
    h = slice_hessians(loss, step)
    bad = ~np.isfinite(h).all(axis=(-1, -2))
    eig = np.linalg.eigvalsh(np.where(bad[..., None, None], 0.0, h))
    eig[bad] = np.nan
    return eig


def curvature_ratio(loss: Any, step: float) -> np.ndarray:
    """How non-convex the slice is at each interior point, in [0, 1]: max(-lambda_min, 0) / max|lambda|
    of the slice's 2-D Hessian (Li et al. 2018, Fig. 7 map |lambda_min / lambda_max| of the full Hessian;
    here the 2-D surface drawn). 0 where the surface curves up in every direction, 1 where it curves
    down at least as much as up. float64 [G - 2, G - 2]; NaN where a neighbour is missing; 0 where flat."""
    eig = slice_eigenvalues(loss, step)
    top = np.abs(eig).max(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.maximum(-eig[..., 0], 0.0) / top
    return np.where(top == 0, 0.0, ratio)


def nonconvex_fraction(loss: Any, step: float, tolerance: float = 0.01) -> float:
    """Fraction of the finite interior points where :func:`curvature_ratio` exceeds ``tolerance`` (a
    negative curvature larger than 1 % of the largest, so that rounding is never counted); NaN if none
    is finite."""
    ratio = curvature_ratio(loss, step)
    finite = ratio[np.isfinite(ratio)]
    return float((finite > tolerance).mean()) if finite.size else float("nan")


def local_minima(loss: Any) -> np.ndarray:
    """Interior grid points with a finite value strictly below all 8 neighbours (none of them NaN; +inf is
    above every value): int64 [M, 2] of (i, j) indices into ``loss`` [G, G], in row-major order. A point on
    the border is never counted (its other side was not sampled). Raises ValueError for a grid that is not 2-D."""
    f = np.asarray(loss, dtype=np.float64)
    if f.ndim != 2:
        raise ValueError(f"loss must be a 2-D grid; got shape {f.shape}")
    if min(f.shape) < 3:
        return np.zeros((0, 2), dtype=np.int64)
    c = f[1:-1, 1:-1]
    lower = np.isfinite(c)
    rows, cols = f.shape
    for di in (-1, 0, 1):
        for dj in (-1, 0, 1):
            if di or dj:
                lower &= c < f[1 + di:rows - 1 + di, 1 + dj:cols - 1 + dj]  # False next to NaN, True next to inf
    return np.argwhere(lower).astype(np.int64) + 1


def slice_figures(trace: Any) -> dict[str, float]:
    """The non-convexity figures of a loss-landscape trace (``coords`` [G], ``loss_grid`` [G, G]; see
    :func:`simulation.kinds.landscape.run`): ``nonconvex_fraction`` (:func:`nonconvex_fraction`),
    ``mean_curvature_ratio`` (mean of :func:`curvature_ratio` over its finite points; NaN if none) and
    ``local_minima`` (:func:`local_minima`, a count as a float; NaN when a grid value is missing, since a
    minimum may hide there)."""
    coords = np.asarray(trace["coords"], dtype=np.float64)
    step = float(coords[1] - coords[0]) if coords.size > 1 else float("nan")
    if not (math.isfinite(step) and step > 0):
        return {"nonconvex_fraction": float("nan"), "mean_curvature_ratio": float("nan"), "local_minima": float("nan")}
    ratio = curvature_ratio(trace["loss_grid"], step)
    return {"nonconvex_fraction": nonconvex_fraction(trace["loss_grid"], step),
            "mean_curvature_ratio": float(np.nanmean(ratio)) if np.isfinite(ratio).any() else float("nan"),
            "local_minima": (float("nan") if np.isnan(np.asarray(trace["loss_grid"], np.float64)).any()
                             else float(len(local_minima(trace["loss_grid"]))))}


# How a curve moves: down by more than the margin and up again, only down, only up, or neither.
COURSES = ("shrinks_then_grows", "shrinks", "grows", "flat")


def ratio_course(values: Any, margin: float = 0.2) -> dict[str, Any]:
    """The course of ``values`` [T] (e.g. the mean over blocks of ||F(x)|| / ||x|| at each record).

    ``start``, ``low`` (the smallest value) at index ``low_index``, ``end``; ``settle_index``: the first
    index within ``margin`` of ``low`` (value <= low * (1 + margin)); ``course``, one of :data:`COURSES`:
    it "shrinks" when low < start * (1 - margin), "then grows" when moreover end > low * (1 + margin),
    "grows" when it did not shrink and end > start * (1 + margin), else "flat". Raises ValueError for
    fewer than two finite values."""
    v = np.asarray(values, dtype=np.float64)
    finite = np.flatnonzero(np.isfinite(v))
    if len(finite) < 2:
        raise ValueError(f"a course needs at least two finite values; got {len(finite)} of {len(v)}")
    v = v[: finite[-1] + 1]
    start, end = float(v[finite[0]]), float(v[finite[-1]])
    low_index = int(np.nanargmin(v))
    low = float(v[low_index])
    shrank = low < start * (1 - margin)
    if shrank and end > low * (1 + margin):
        course = "shrinks_then_grows"
    elif shrank:
        course = "shrinks"
    elif end > start * (1 + margin):
        course = "grows"
    else:
        course = "flat"
    settle = int(np.flatnonzero(np.nan_to_num(v, nan=np.inf) <= low * (1 + margin))[0])
    return {"start": start, "low": low, "low_index": low_index, "end": end, "settle_index": settle, "course": course}


# A finite run whose loss ends this many times above where it started did not train (the step size was too large
# for the net: e.g. 56 residual sigmoid blocks without normalisation at the vanishing experiment's lr). Cross-entropy
# starts near log(classes); a loss 10 times that is worse than guessing by far.
BLEW_UP = 10.0


def _only(kind: str) -> Any:
    """A summary field that only some runs have (``kind`` says which); None and left out of to_dict otherwise."""
    return field(default=None, metadata={"only": kind})


Floats = list[float | None]


@dataclass(frozen=True)
class RunSummary:
    """The figures the scenes and ``render.py train`` show for one run; NaN and inf are None (JSON null).

    See :func:`summarize` for what each figure is. :meth:`to_dict` leaves out the fields a run of this kind
    does not have (or could not measure, such as ``lesion_mean_increase`` after a divergence)."""

    config: dict[str, Any]  # the run's config as its trace holds it (JSON; typed: Trace.run_config)
    final_step: int
    final_loss: float | None
    final_error: float | None
    final_train_loss_avg: float | None
    final_train_error_avg: float | None
    final_test_error: float | None
    grad_norm_step0: Floats
    grad_norm_final: Floats
    log10_grad_norm_step0: Floats
    grad_underflow_blocks_step0: int
    grad_ratio_step0: float | None
    grad_ratio_final: float | None
    branch_ratio_final: Floats
    branch_std_final: Floats
    diverged: bool
    diverged_step: int | None
    diverged_layer: int | None
    diverged_pass: str | None
    nonfinite_per_layer: list[int]
    shortcut_norm_final: Floats | None = _only("MLP")
    lesion_test_error: Floats | None = _only("MLP")
    lesion_mean_increase: float | None = _only("MLP")
    input_grad_autocorr_lag1: Floats | None = _only("MLP")
    path_length_fraction: Floats | None = _only("residual MLP")
    layers: list[str] | None = _only("Transformer")
    init_ffn_grad_norm: Floats | None = _only("Transformer")
    tolerance_step: int | None = _only("identity fit")  # first step below the tolerance, -1: never
    nonconvex_fraction: float | None = _only("loss landscape")  # of the slice's interior points (slice_figures)
    mean_curvature_ratio: float | None = _only("loss landscape")  # mean max(-lambda_min, 0) / max|lambda|
    local_minima: int | None = _only("loss landscape")  # interior grid points below all 8 neighbours
    composite_row_gain_final: float | None = _only("hyper-connections")  # H_res^L ... H_res^1's, last record
    composite_col_gain_final: float | None = _only("hyper-connections")  # (simulation.kinds.hyper.composite_gains)
    initial_loss: float | None = _only("classifier")  # the loss of step 0's batch (loss_curve[0])

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for f in dataclasses.fields(self):
            if "only" in f.metadata and out[f.name] is None:
                del out[f.name]
        return out


def loss_blew_up(summary: dict[str, Any]) -> bool:
    """Finite but not training: in ``summary`` (:meth:`RunSummary.to_dict`, as ``render.py train --json`` gives it)
    the mean loss of the last 10 % of the steps is over :data:`BLEW_UP` times the loss at step 0. A run that
    overflowed to inf or NaN is ``diverged`` instead."""
    start, end = summary.get("initial_loss"), summary.get("final_train_loss_avg")
    return not summary["diverged"] and start is not None and end is not None and end > BLEW_UP * start


def blown_up_losses(trace: Trace) -> tuple[float, float] | None:
    """(loss at step 0, mean loss of the last 10 % of the steps) of a run whose loss blew up (:func:`loss_blew_up`)
    read from its ``loss_curve``; None for any other run, or one without a loss curve."""
    curve = trace.arrays.get("loss_curve")
    if curve is None or not len(curve):
        return None
    losses = {"diverged": bool(trace.meta.diverged), "initial_loss": float(curve[0]),
              "final_train_loss_avg": tail_mean(curve)}
    return (losses["initial_loss"], losses["final_train_loss_avg"]) if loss_blew_up(losses) else None


def summarize(trace: Trace) -> RunSummary:
    """The figures the scenes show, for one run. NaN/inf become null (JSON has neither).

    - ``final_loss``, ``final_error``: training loss (nats) and error on the last recorded batch;
      ``final_train_loss_avg``, ``final_train_error_avg``: means over the last 10 % of the steps run;
      ``final_test_error``: held-out error after the last update.
    - ``grad_norm_step0``, ``grad_norm_final``: per-block ||dL/dW|| at step 0 and the last record, with
      ``log10_grad_norm_step0`` (null where the gradient underflowed to exactly 0), the count of such
      blocks ``grad_underflow_blocks_step0``, and the first/last block ratios ``grad_ratio_step0``,
      ``grad_ratio_final``.
    - ``branch_ratio_final``: ||F(x)|| / ||x|| per block at the last record; ``branch_std_final``:
      std of F(x) per block (He et al. 2015, Fig. 7); ``shortcut_norm_final``: ||shortcut(x)||.
    - ``lesion_test_error``: test error with block l deleted; ``lesion_mean_increase``: its mean
      increase over ``final_test_error`` (Veit et al. 2016, Fig. 3).
    - ``input_grad_autocorr_lag1``: lag-1 autocorrelation of the input sweep gradient, [at init, after
      training] (Balduzzi et al. 2017).
    - ``path_length_fraction`` (residual runs): C(depth, k) / 2**depth, k = 0..depth.
    - ``diverged``, ``diverged_step``, ``diverged_layer``, ``diverged_pass``, ``nonfinite_per_layer``;
      ``initial_loss``: the loss at step 0 (:func:`loss_blew_up`: finite, but it ended far above it).

    An identity-fit run (an :class:`~simulation.config.IdentityFitConfig`): ``final_loss`` is the relative error
    ||h - x||^2 / ||x||^2 of the last step, ``final_train_loss_avg`` its mean over the last 10 %,
    ``branch_ratio_final`` [||F(x)|| / ||x||], ``tolerance_step``; the classifier figures are None or empty.

    A loss-landscape run (a :class:`~simulation.config.LandscapeConfig`): ``final_loss`` / ``final_train_loss_avg`` of its training
    curve, ``final_test_error``, and the slice's ``nonconvex_fraction``, ``mean_curvature_ratio`` and
    ``local_minima`` (:func:`slice_figures`).

    A hyper-connections run (a :class:`~simulation.config.HyperConfig`; it records no per-block gradient or branch
    norms): the loss and error figures of its curves, and the composite mapping's ``composite_row_gain_final`` and
    ``composite_col_gain_final`` after the last block at the last record (DeepSeek 2025, mHC: 1 when doubly
    stochastic); the per-block figures are empty.

    Every other run gives each figure from the arrays it is read from, None (or empty) where the run did not record
    them: a run watched in the user's own loop (``residual_lecture.watch``) has no ``error`` or ``test_error``.
    KeyError for a trace with neither ``loss`` nor ``loss_curve``.
    """
    a = trace.arrays
    try:
        config = trace.run_config
    except ConfigError:  # a config no registered kind reads (a run watched in its own loop: kind "watch")
        config = None
    if isinstance(config, IdentityFitConfig):
        return _identity_fit_summary(trace)
    if isinstance(config, LandscapeConfig):
        return _landscape_summary(trace)
    if isinstance(config, HyperConfig):
        return _hyper_summary(trace)
    # Any other run (an MLP, a Transformer, a user's model, a run watched in its own loop): each figure from the
    # arrays it is read from, None or empty where the run did not record them (a watched loop has no test error).
    if "loss" not in a and "loss_curve" not in a:  # not a run's trace: nothing a summary could say
        raise KeyError(f"trace has no array 'loss' or 'loss_curve'; it has {sorted(a)}")
    grad = a.get("grad_norm")
    test_error = a.get("test_error", np.zeros(0))
    finite_test = test_error[np.isfinite(test_error)]
    final_test = a.get("final_test_error")
    if final_test is None or not np.isfinite(final_test):
        final_test = finite_test[-1] if len(finite_test) else np.nan
    branch_ratio = []
    if "branch_norm" in a and "input_norm" in a:
        with np.errstate(divide="ignore", invalid="ignore"):
            branch_ratio = a["branch_norm"][-1].astype(np.float64) / a["input_norm"][-1]
    last = lambda key: _f(a[key][-1]) if key in a and len(a[key]) else None
    curve = a.get("loss_curve")
    has_grad = grad is not None and grad.ndim == 2 and grad.shape[1] > 0
    out: dict[str, Any] = {
        "config": trace.meta.config,
        "final_step": int(trace["step"][-1]),
        "final_loss": last("loss"),
        "final_error": last("error"),
        "final_train_loss_avg": _f(tail_mean(curve)) if curve is not None else None,
        "initial_loss": _f(curve[0]) if curve is not None and len(curve) else None,
        "final_train_error_avg": _f(tail_mean(a["error_curve"])) if "error_curve" in a else None,
        "final_test_error": _f(final_test),
        "grad_norm_step0": _list(grad[0]) if has_grad else [],
        "grad_norm_final": _list(grad[-1]) if has_grad else [],
        "log10_grad_norm_step0": safe_log10(grad[0]) if has_grad else [],
        "grad_underflow_blocks_step0": int((grad[0] == 0).sum()) if has_grad else 0,
        "grad_ratio_step0": _f(grad[0, 0] / grad[0, -1]) if has_grad and grad[0, -1] else None,
        "grad_ratio_final": _f(grad[-1, 0] / grad[-1, -1]) if has_grad and grad[-1, -1] else None,
        "branch_ratio_final": _list(branch_ratio),
        "branch_std_final": _list(a["branch_std"][-1]) if "branch_std" in a else [],
        "diverged": bool(trace.meta.diverged),
        "diverged_step": trace.meta.diverged_step,
        "diverged_layer": trace.meta.diverged_layer,
        "diverged_pass": trace.meta.diverged_pass,
        "nonfinite_per_layer": [int(v) for v in a["nonfinite"].sum(0)] if "nonfinite" in a else [],
    }
    if "shortcut_norm" in a:
        out["shortcut_norm_final"] = _list(a["shortcut_norm"][-1])
    if "lesion_test_error" in a:
        lesion = a["lesion_test_error"].astype(np.float64)
        out["lesion_test_error"] = _list(lesion)
        usable = lesion[np.isfinite(lesion)]
        out["lesion_mean_increase"] = (_f(usable.mean() - final_test)
                                       if len(usable) and np.isfinite(final_test) else None)
    if "input_grad_autocorr" in a:
        out["input_grad_autocorr_lag1"] = _list(a["input_grad_autocorr"][:, 1])
    if "path_length_fraction" in a:
        out["path_length_fraction"] = _list(a["path_length_fraction"])
    if "init_ffn_grad_norm" in a:  # Transformer runs (experiment layernorm): Xiong et al. 2020, Fig. 3
        out["layers"] = trace.meta.layers
        out["init_ffn_grad_norm"] = _list(a["init_ffn_grad_norm"].mean(0))
    return RunSummary(**out)


def _identity_fit_summary(trace: Trace) -> RunSummary:
    a = trace.arrays
    return RunSummary(
        config=trace.meta.config, final_step=int(len(a["loss_curve"]) - 1), final_loss=_f(a["loss_curve"][-1]),
        final_error=None, final_train_loss_avg=_f(tail_mean(a["loss_curve"])), final_train_error_avg=None,
        final_test_error=None, grad_norm_step0=[], grad_norm_final=[], log10_grad_norm_step0=[],
        grad_underflow_blocks_step0=0, grad_ratio_step0=None, grad_ratio_final=None,
        branch_ratio_final=_list(a["branch_ratio"][-1:]), branch_std_final=[], diverged=bool(trace.meta.diverged),
        diverged_step=None, diverged_layer=None, diverged_pass=None, nonfinite_per_layer=[],
        tolerance_step=int(a["tolerance_step"]))


def _curve_summary(trace: Trace, **figures: Any) -> RunSummary:
    """The summary of a run that records a per-step ``loss_curve`` and a ``final_test_error`` but no per-block
    norms (the loss landscape's nets, hyper-connections), with that kind's own ``figures``."""
    a = trace.arrays
    return RunSummary(
        config=trace.meta.config, final_step=int(len(a["loss_curve"]) - 1), final_loss=_f(a["loss_curve"][-1]),
        final_error=None, final_train_loss_avg=_f(tail_mean(a["loss_curve"])), final_train_error_avg=None,
        final_test_error=_f(a["final_test_error"]), grad_norm_step0=[], grad_norm_final=[], log10_grad_norm_step0=[],
        grad_underflow_blocks_step0=0, grad_ratio_step0=None, grad_ratio_final=None, branch_ratio_final=[],
        branch_std_final=[], diverged=bool(trace.meta.diverged), diverged_step=None, diverged_layer=None,
        diverged_pass=None, nonfinite_per_layer=[], **figures)


def _landscape_summary(trace: Trace) -> RunSummary:
    figures = slice_figures(trace)
    minima = figures["local_minima"]
    return _curve_summary(trace, nonconvex_fraction=_f(figures["nonconvex_fraction"]),
                          mean_curvature_ratio=_f(figures["mean_curvature_ratio"]),
                          local_minima=int(minima) if math.isfinite(minima) else None)


def _hyper_summary(trace: Trace) -> RunSummary:
    a = trace.arrays
    return _curve_summary(trace, initial_loss=_f(a["loss_curve"][0]),
                          composite_row_gain_final=_f(a["composite_row_gain"][-1, -1]),
                          composite_col_gain_final=_f(a["composite_col_gain"][-1, -1]))


def watch_summary(trace: Trace) -> dict[str, Any] | None:
    """What a run watched in the user's own loop (``residual_lecture.watch``, ``meta.watch``) recorded, for
    ``render.py inspect``; None for any other trace.

    ``complete`` (false: a partial trace, read from the parts of a run killed or still running), ``steps_run``
    (optimiser steps the loop took; of a partial trace, those it had taken when its writer last said, at most
    ``PROGRESS_SECONDS`` = 10 s before it stopped, or those its records hold), ``steps_recorded`` and the ``first_step`` / ``last_step`` recorded, ``every``,
    ``blocks`` with the ``first_block`` / ``last_block`` names, ``dtype`` (of the blocks' outputs), ``param_dtype``,
    ``norm_dtype``, ``world_size``, ``accumulation`` and ``micro_batches`` [fewest, most] per recorded step,
    ``wrappers``, ``model`` (its class); with a GradScaler ``scale`` [lowest, highest] at the records,
    ``scaler_skips_recorded`` (recorded steps it skipped) and ``scaler_skips`` (steps whose scale is below the
    step before's: a GradScaler backs off at each skipped step; the last step's skip is not seen);
    ``nonfinite_records`` (records with a non-finite value in a block), ``loss`` [first, last] recorded and, for a
    run watched with ``update_ratio=True``, ``update_ratio``: each block's median ||w_(k+1) - w_k|| / ||w_k|| over
    its records as ``{"median", "lowest": [block, value], "highest": [block, value]}`` over the blocks (None
    otherwise)."""
    info = trace.meta.watch if isinstance(getattr(trace.meta, "watch", None), dict) else None
    if info is None:
        return None
    a, layers = trace.arrays, trace.meta.layers or []
    steps = np.atleast_1d(np.asarray(trace["step"]))
    micro = np.asarray(a["micro_batches"]) if "micro_batches" in a else np.array([])
    curve = np.asarray(a.get("loss_curve", np.array([])))
    out: dict[str, Any] = {
        "complete": bool(info.get("complete")),
        "steps_run": int(trace.meta.config.get("steps") or len(curve)),
        "steps_recorded": int(len(steps)), "first_step": int(steps[0]), "last_step": int(steps[-1]),
        "every": info.get("every"), "blocks": len(layers),
        "first_block": layers[0] if layers else None, "last_block": layers[-1] if layers else None,
        **{key: info.get(key) for key in ("dtype", "param_dtype", "norm_dtype", "world_size", "accumulation",
                                          "wrappers", "model")},
        "micro_batches": [int(micro.min()), int(micro.max())] if micro.size else None,
        "scaler": bool(info.get("scaler")),
    }
    if out["scaler"]:
        scale = np.asarray(a.get("scale", np.array([])), np.float64)
        finite = scale[np.isfinite(scale)]
        out["scale"] = [float(finite.min()), float(finite.max())] if finite.size else None
        out["scaler_skips_recorded"] = int(np.nansum(np.asarray(a["skipped"]))) if "skipped" in a else None
        scales = np.asarray(a.get("scale_curve", np.array([])), np.float64)
        with np.errstate(invalid="ignore"):
            out["scaler_skips"] = int(np.sum(scales[1:] < scales[:-1])) if scales.size > 1 else 0
    counts = np.asarray(a["nonfinite"]) if "nonfinite" in a else np.zeros((len(steps), 0))
    out["nonfinite_records"] = int(np.sum(counts.reshape(len(steps), -1).sum(1) > 0))
    loss = np.asarray(a.get("loss", np.array([])), np.float64)
    finite_loss = loss[np.isfinite(loss)]
    out["loss"] = [float(finite_loss[0]), float(finite_loss[-1])] if finite_loss.size else None
    out["update_ratio"] = _update_summary(np.asarray(a["update_ratio"], np.float64), layers) if "update_ratio" in a else None
    return out


def _update_summary(ratio: np.ndarray, layers: list[str]) -> dict[str, Any] | None:
    """Each block's median update ratio over its records ([T, B] -> [B], NaN records left out): their median and
    the lowest and highest block with its name; None where nothing was recorded (``update_ratio=False``)."""
    ratio = ratio.reshape(len(ratio), -1)
    held = np.isfinite(ratio).any(axis=0)
    if not held.any():
        return None
    per_block = np.full(ratio.shape[1], np.nan)
    per_block[held] = np.nanmedian(ratio[:, held], axis=0)
    low, high = int(np.nanargmin(per_block)), int(np.nanargmax(per_block))
    name = lambda b: layers[b] if b < len(layers) else str(b)  # noqa: E731
    return {"median": float(np.nanmedian(per_block)), "lowest": [name(low), float(per_block[low])],
            "highest": [name(high), float(per_block[high])]}


def inspect_trace(path: str) -> dict[str, Any]:
    """What ``render.py inspect FILE`` prints: ``{"meta", "arrays": {key: shape}, "summary"}``, and ``"watch"``
    (:func:`watch_summary`) for a run watched in the user's own loop, partial or complete. Raises TraceError
    (one line) for a file that cannot be read or lacks what a summary needs."""
    from .trace import TraceError

    trace = Trace.load(path)
    try:
        summary = summarize(trace)
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise TraceError(f"trace {path} lacks what a summary needs ({type(exc).__name__}: {exc})") from None
    out = {"meta": trace.meta.to_dict(), "arrays": {k: list(v.shape) for k, v in trace.arrays.items()},
           "summary": summary.to_dict()}
    watched = watch_summary(trace)
    if watched is not None:
        out["watch"] = watched
    return out
