"""The data the scenes compute beside their beats, as plain functions (no Manim render): each against a
computation by hand on a tiny array.

Example::

    pytest tests/test_scene_data.py -q -n 0
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from scenes.depth_sweep import depth_spread, median_slope, ratio_decades
from scenes.layernorm import layer_labels, loss_ticks, seed_stack_ratios, trained_curve, verdict_stack

LAYERS = ["encoder.0", "encoder.1", "encoder.2", "decoder.0", "decoder.1", "decoder.2"]


class Trace(SimpleNamespace):
    """A stand-in for simulation.trace.Trace with only what these functions read: meta and arrays by name."""

    def __getitem__(self, key):
        return self.data[key]


def trace(loss=(), layers=LAYERS, diverged_step=None) -> Trace:
    meta = SimpleNamespace(layers=list(layers), diverged=diverged_step is not None, diverged_step=diverged_step)
    return Trace(meta=meta, data={"loss_curve": np.asarray(loss, np.float64)})


def test_layer_labels_and_verdict_stack():
    assert layer_labels(LAYERS) == ["E1", "E2", "E3", "D1", "D2", "D3"]
    assert layer_labels(["encoder.9"]) == ["E10"]
    assert verdict_stack("encoder_decoder") == "decoder"
    assert verdict_stack("encoder") == "encoder"


def test_seed_stack_ratios_are_last_over_first_of_the_stack_by_hand():
    traces = {0: {"post_ln": trace(), "pre_ln": trace()}, 1: {"post_ln": trace()}}
    grads = {"post_ln": {0: np.array([1.0, 2, 3, 2, 5, 8]), 1: np.array([4.0, 1, 1, 0.5, 1, 1])},
             "pre_ln": {0: np.array([1.0, 1, 1, 4, 4, 2])}, "none": {}}
    decoder = seed_stack_ratios(traces, grads, "decoder")
    assert decoder == {"post_ln": {0: pytest.approx(8 / 2), 1: pytest.approx(1 / 0.5)}, "pre_ln": {0: pytest.approx(2 / 4)}}
    encoder = seed_stack_ratios(traces, grads, "encoder")
    assert encoder["post_ln"][0] == pytest.approx(3.0) and encoder["post_ln"][1] == pytest.approx(0.25)
    assert "none" not in decoder  # a run no seed has is left out


def test_trained_curve_stops_at_the_divergence_and_is_a_trailing_mean():
    loss = np.arange(1.0, 31.0)
    steps, curve = trained_curve(trace(loss))
    by_hand = [loss[max(0, i - 9):i + 1].mean() for i in range(30)]  # window 10, fewer at the start
    assert steps == 30 and curve == pytest.approx(by_hand)
    steps, curve = trained_curve(trace(loss, diverged_step=12))
    assert steps == 12 and curve == pytest.approx(by_hand[:12])


def test_loss_ticks_cover_the_curves_and_chance():
    ticks = loss_ticks([np.array([0.5, np.nan, 3.3]), np.array([np.inf, 1.0])], chance=2.0)
    assert ticks[0] == 0 and ticks[-1] >= 3.3 and ticks[-2] < 3.3  # NaN / inf ignored, one step past the top
    assert np.allclose(np.diff(ticks), ticks[1] - ticks[0])
    ticks = loss_ticks([np.array([np.nan])], chance=np.log(16))
    assert ticks[-1] >= np.log(16) > ticks[-2]


# -- DepthSweep ----------------------------------------------------------------------------------------------------

def test_ratio_decades_widen_to_the_positive_ratios_only():
    assert ratio_decades([]) == (-1, 1)
    assert ratio_decades([0.0, np.nan, 2.0, 3.0]) == (-1, 1)  # the [-1, 1] minimum
    # one decade of margin below the smallest: floor(log10 min) - 1; the top: ceil(log10 max)
    assert ratio_decades([0.0, np.nan, 0.5, 3.0]) == (np.floor(np.log10(0.5)) - 1, 1)
    assert ratio_decades([2e-5, 0.0, 340.0, np.inf]) == (np.floor(np.log10(2e-5)) - 1, np.ceil(np.log10(340.0)))


def test_depth_spread_is_the_seed_range_with_the_median_withheld_when_a_seed_lacks_its_value():
    cells = {2: {"ratio": 4.0, "error": np.nan, "diverged": 1.0}, 0: {"ratio": 1.0, "error": 0.2, "diverged": 0.0},
             1: {"ratio": 2.0, "error": 0.4, "diverged": 0.0}}
    values, lacking, (low, mid, high) = depth_spread(cells, "ratio")
    assert values == [1.0, 2.0, 4.0] and lacking == [] and (low, mid, high) == (1.0, 2.0, 4.0)
    values, lacking, (low, mid, high) = depth_spread(cells, "error")  # a diverged run's NaN is not "lacking"
    assert lacking == [] and (low, mid, high) == pytest.approx((0.2, 0.3, 0.4))
    cells[1]["ratio"] = np.nan  # a missing ratio: the range of the others, no median
    values, lacking, (low, mid, high) = depth_spread(cells, "ratio")
    assert lacking == [1] and (low, high) == (1.0, 4.0) and np.isnan(mid)


def test_median_slope_is_the_least_squares_decades_per_block_by_hand():
    depths, ratios = np.array([2, 4, 8]), np.array([1.0, 0.1, 1e-4])
    y = np.log10(ratios)
    by_hand = np.sum((depths - depths.mean()) * (y - y.mean())) / np.sum((depths - depths.mean()) ** 2)
    assert median_slope(list(zip(depths.tolist(), ratios.tolist()))) == pytest.approx(by_hand)
    assert np.isnan(median_slope([(2, 1.0), (4, np.nan), (8, 1e-4)]))
