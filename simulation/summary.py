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

from .trace import ReadAsMapping, Trace

__all__ = ["summarize", "RunSummary", "autocorrelation", "path_length_fraction", "safe_log10", "tail_mean",
           "first_step_below", "ratio_course", "COURSES"]


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


def _only(kind: str) -> Any:
    """A summary field that only some runs have (``kind`` says which); None and left out of to_dict otherwise."""
    return field(default=None, metadata={"only": kind})


Floats = list[float | None]


@dataclass(frozen=True)
class RunSummary(ReadAsMapping):
    """The figures the scenes and ``render.py train`` show for one run; NaN and inf are None (JSON null).

    See :func:`summarize` for what each figure is. :meth:`to_dict` leaves out the fields a run of this kind
    does not have (or could not measure, such as ``lesion_mean_increase`` after a divergence)."""

    config: dict[str, Any]
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

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for f in dataclasses.fields(self):
            if "only" in f.metadata and out[f.name] is None:
                del out[f.name]
        return out


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
    - ``diverged``, ``diverged_step``, ``diverged_layer``, ``diverged_pass``, ``nonfinite_per_layer``.

    An identity-fit run (``config["kind"] == "identity_fit"``): ``final_loss`` is the relative error
    ||h - x||^2 / ||x||^2 of the last step, ``final_train_loss_avg`` its mean over the last 10 %,
    ``branch_ratio_final`` [||F(x)|| / ||x||], ``tolerance_step``; the classifier figures are None or empty.
    """
    a = trace.arrays
    if trace.config.get("kind") == "identity_fit":
        return _identity_fit_summary(trace)
    grad = trace["grad_norm"]
    finite_test = trace["test_error"][np.isfinite(trace["test_error"])]
    final_test = a.get("final_test_error")
    if final_test is None or not np.isfinite(final_test):
        final_test = finite_test[-1] if len(finite_test) else np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        branch_ratio = trace["branch_norm"][-1].astype(np.float64) / trace["input_norm"][-1]
    out: dict[str, Any] = {
        "config": trace.config,
        "final_step": int(trace["step"][-1]),
        "final_loss": _f(trace["loss"][-1]),
        "final_error": _f(trace["error"][-1]),
        "final_train_loss_avg": _f(tail_mean(trace["loss_curve"])),
        "final_train_error_avg": _f(tail_mean(a["error_curve"])) if "error_curve" in a else None,
        "final_test_error": _f(final_test),
        "grad_norm_step0": _list(grad[0]),
        "grad_norm_final": _list(grad[-1]),
        "log10_grad_norm_step0": safe_log10(grad[0]),
        "grad_underflow_blocks_step0": int((grad[0] == 0).sum()),
        "grad_ratio_step0": _f(grad[0, 0] / grad[0, -1]) if grad[0, -1] else None,
        "grad_ratio_final": _f(grad[-1, 0] / grad[-1, -1]) if grad[-1, -1] else None,
        "branch_ratio_final": _list(branch_ratio),
        "branch_std_final": _list(trace["branch_std"][-1]),
        "diverged": bool(trace.meta.diverged),
        "diverged_step": trace.meta.diverged_step,
        "diverged_layer": trace.meta.diverged_layer,
        "diverged_pass": trace.meta.diverged_pass,
        "nonfinite_per_layer": [int(v) for v in trace["nonfinite"].sum(0)],
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
        config=trace.config, final_step=int(len(a["loss_curve"]) - 1), final_loss=_f(a["loss_curve"][-1]),
        final_error=None, final_train_loss_avg=_f(tail_mean(a["loss_curve"])), final_train_error_avg=None,
        final_test_error=None, grad_norm_step0=[], grad_norm_final=[], log10_grad_norm_step0=[],
        grad_underflow_blocks_step0=0, grad_ratio_step0=None, grad_ratio_final=None,
        branch_ratio_final=_list(a["branch_ratio"][-1:]), branch_std_final=[], diverged=bool(trace.meta.diverged),
        diverged_step=None, diverged_layer=None, diverged_pass=None, nonfinite_per_layer=[],
        tolerance_step=int(a["tolerance_step"]))
