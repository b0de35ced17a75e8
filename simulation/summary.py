"""Summary figures of one trace, as plain JSON-able numbers (torch-free)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .trace import Trace

__all__ = ["summarize"]


def _f(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def summarize(trace: Trace) -> dict[str, Any]:
    """Final training loss and error (last recorded step), test error, per-layer grad_norm at step 0
    and at the end, their first/last ratio, and divergence (step, block). NaN/inf become null."""
    grad = trace["grad_norm"]
    finite_test = trace["test_error"][np.isfinite(trace["test_error"])]
    return {
        "config": trace.config,
        "final_step": int(trace["step"][-1]),
        "final_loss": _f(trace["loss"][-1]),
        "final_error": _f(trace["error"][-1]),
        "final_test_error": _f(finite_test[-1]) if len(finite_test) else None,
        "grad_norm_step0": [_f(v) for v in grad[0]],
        "grad_norm_final": [_f(v) for v in grad[-1]],
        "grad_ratio_step0": _f(grad[0, 0] / grad[0, -1]) if grad[0, -1] else None,
        "diverged": bool(trace.meta.get("diverged")),
        "diverged_step": trace.meta.get("diverged_step"),
        "diverged_layer": trace.meta.get("diverged_layer"),
        "nonfinite_per_layer": [int(v) for v in trace["nonfinite"].sum(0)],
    }
