"""The scenes' shared helpers against independent, naive computations."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from scenes.kit.helpers import (compare, fill_missing_arrays, fill_required_arrays, finite_runs, log_range, missing_runs, running_mean,
                            steps_run, strict_mean, tail_mean)
from simulation.trace import Trace


def _naive_running_mean(values, window):
    out = []
    for i in range(len(values)):
        part = values[max(0, i - window + 1): i + 1]
        out.append(math.nan if any(math.isnan(v) for v in part) else sum(part) / len(part))
    return out


@pytest.mark.parametrize("window", [1, 2, 5])
def test_running_mean_is_the_trailing_mean_and_a_gap_spans_its_window(window):
    rng = np.random.default_rng(0)
    values = list(rng.normal(size=30))
    values[7] = math.nan
    np.testing.assert_allclose(running_mean(values, window), _naive_running_mean(values, window), equal_nan=True)
    out = running_mean(values, window)
    assert np.isnan(out[7: 7 + window]).all() and np.isfinite(out[7 + window:]).all()  # the rest is intact


def test_tail_mean_stops_before_the_divergence_and_never_skips_a_missing_value():
    curve = [4.0, 3.0, 2.0, 1.0, math.inf, math.nan, math.nan, math.nan, math.nan, math.nan]
    assert tail_mean(curve, 0.5, stop=4) == pytest.approx(1.5)  # the last half of the 4 steps run
    assert math.isnan(tail_mean([1.0, math.nan, 3.0, 4.0], 0.75))  # a missing value in the window
    assert tail_mean([1.0, math.nan, 3.0, 4.0], 0.25) == 4.0
    assert math.isnan(tail_mean([], 0.1))
    trace = Trace({"diverged": True, "diverged_step": 4}, {})
    assert steps_run(trace, 10) == 4 and steps_run(Trace({"diverged": False}, {}), 10) == 10


def test_log_range_brackets_every_positive_value():
    values = [3e-9, 0.2, 0.0, -1.0, math.nan, 40.0]
    low, high = log_range(values, margin=1, top_at_least=None)
    assert (low, high) == (math.floor(math.log10(3e-9)) - 1, math.ceil(math.log10(40.0)))
    assert log_range([math.nan, 0.0]) == (-1, 0)


def test_gaps_and_verdicts():
    values = [math.nan, 1.0, 2.0, math.nan, math.nan, 3.0]
    assert finite_runs(values) == [(1, 3), (5, 6)] and missing_runs(values) == [(0, 1), (3, 5)]
    assert compare(2.0, 1.0) is True and compare(1.0, 2.0) is False and compare(math.nan, 1.0) is None
    assert math.isnan(strict_mean([1.0, math.nan])) and strict_mean([1.0, 3.0]) == 2.0


def test_a_missing_array_takes_the_shape_of_its_sibling_with_this_runs_sizes():
    shallow = Trace({"config": {"depth": 3, "steps": 20}}, {"step": np.arange(3), "grad_norm": np.ones((3, 3)),
                                                           "loss_curve": np.ones(20), "path_length_fraction": np.ones(4)})
    deep = Trace({"config": {"depth": 6, "steps": 20}}, {"step": np.arange(3), "loss_curve": np.ones(20)})
    added = fill_missing_arrays({"shallow": shallow, "deep": deep})
    assert added == {"deep": ["grad_norm"]}  # path_length_fraction belongs to residual runs only
    assert deep["grad_norm"].shape == (3, 6) and np.isnan(deep["grad_norm"]).all()


def test_a_required_array_of_a_lone_run_is_filled_with_its_own_sizes():
    lone = Trace({"config": {"depth": 4}}, {"step": np.arange(5), "loss": np.ones(5)})
    no_depth = Trace({"config": {}}, {"step": np.arange(2)})
    added = fill_required_arrays({"lone": lone, "no_depth": no_depth}, ("loss", "branch_norm"))
    assert added == {"lone": ["branch_norm"], "no_depth": ["loss"]}  # no depth: branch_norm cannot be sized
    assert lone["branch_norm"].shape == (5, 4) and np.isnan(lone["branch_norm"]).all()
    assert np.array_equal(lone["loss"], np.ones(5)) and "branch_norm" not in no_depth.arrays


def test_a_missing_array_takes_its_axes_from_the_table_even_when_depth_equals_the_records():
    """Guessing axes by size confused a [depth] array with a [records] one when depth = records (issue 19)."""
    full = Trace({"config": {"depth": 4, "steps": 30}}, {"step": np.arange(4), "lesion_test_error": np.ones(4),
                                                         "loss": np.ones(4), "act_norm": np.ones((4, 4))})
    other = Trace({"config": {"depth": 6, "steps": 30}}, {"step": np.arange(7)})
    fill_missing_arrays({"full": full, "other": other})
    assert other["lesion_test_error"].shape == (6,) and other["loss"].shape == (7,)
    assert other["act_norm"].shape == (7, 6)
    transformer = Trace({"config": {"depth": 2, "steps": 6, "init_batches": 3}, "layers": ["a", "b", "c", "d"],
                         "sublayers": list("0123456789")}, {"step": np.arange(4)})
    assert transformer.blank("branch_norm").shape == (4, 10) and transformer.blank("grad_norm").shape == (4, 4)
    assert transformer.blank("init_grad_norm").shape == (3, 4) and transformer.blank("no_such_array") is None


def test_every_array_of_the_committed_traces_is_in_the_table_with_its_axes():
    from simulation.trace import ARRAY_AXES

    paths = sorted((Path(__file__).parent / "data").rglob("*.npz"))
    assert len(paths) > 20
    for path in paths:
        trace = Trace.load(path)
        for key, value in trace.arrays.items():
            assert key in ARRAY_AXES, f"{path.name}: {key} is not in simulation.trace.ARRAY_AXES"
            assert trace.blank(key).shape == value.shape, f"{path}: {key} {value.shape} vs the table"
