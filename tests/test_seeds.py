"""``seeds`` on every experiment, run keys across seeds, per-seed summaries and the depth-sweep table
(formats of docs/how-to/sweeps.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulation.config import ConfigError, RunConfig, TransformerConfig
from simulation.experiments import EXPERIMENTS, FULL_SWEEP
from cli.params import build_runs  # parses string values as --set does
from simulation.runkeys import RunKey, by_name, key_texts, one_seed
from simulation.seeds import depth_sweep_summary, summarize_seeds
from simulation.summary import summarize
from simulation.trace import Trace


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_every_experiment_takes_seeds_and_keeps_the_first_seed_under_the_bare_name(name):
    single = one_seed(build_runs(name, {}))
    multi = build_runs(name, {"seeds": "3,1,4"})
    assert len(multi) == 3 * len(single)
    assert [key.seed for key in multi] == [s for s in (3, 1, 4) for _ in single], "seeds in order, each a run set"
    for key, config in multi.items():
        assert key.name in single
        assert config.seed == key.seed
        assert config == single[key.name].replace(seed=config.seed)
    texts = key_texts(multi)
    assert [texts[key] for key in multi][:len(single)] == list(single), "the first seed's runs: their bare names"
    assert len(set(texts.values())) == len(multi)
    assert one_seed(build_runs(name, {"seed": 7})) == {k: c.replace(seed=7) for k, c in single.items()}
    assert "seeds" in EXPERIMENTS[name].params()


@pytest.mark.parametrize("bad", ["1,1", "-1", "a,b", "1.5"])
def test_bad_seeds_are_refused(bad):
    with pytest.raises(ConfigError, match="seeds|integers"):
        build_runs("vanishing", {"seeds": bad})


def _fake_trace(config: RunConfig, first_grad: float, last_grad: float, error: float, diverged=False) -> Trace:
    steps = 10
    depth = config.depth
    grad = np.geomspace(first_grad, last_grad, depth)[None].repeat(2, 0) if first_grad else \
        np.r_[0.0, np.full(depth - 1, last_grad)][None].repeat(2, 0)
    arrays = {"step": np.array([0, steps - 1]), "loss": np.ones(2, np.float32), "error": np.full(2, error, np.float32),
              "test_error": np.full(2, error, np.float32), "loss_curve": np.ones(steps, np.float32),
              "error_curve": np.full(steps, error, np.float32), "grad_norm": grad,
              "branch_norm": np.ones((2, depth), np.float32), "input_norm": np.ones((2, depth), np.float32),
              "branch_std": np.ones((2, depth), np.float32), "nonfinite": np.zeros((2, depth), np.int64)}
    return Trace(meta={"config": config.to_dict(), "digest": config.digest(), "seed": config.seed,
                       "diverged": diverged}, arrays=arrays)


def test_summaries_keep_one_value_per_seed_in_seed_order():
    runs = build_runs("chain_rule", {"seeds": "2,0,5"})
    errors = {2: 0.1, 0: 0.2, 5: float("nan")}
    summaries = {k: summarize(_fake_trace(c, 1.0, 1.0, errors[c.seed])) for k, c in runs.items()}
    table = summarize_seeds(summaries)
    assert set(table) == {"plain", "residual"}
    assert table["plain"]["seeds"] == [2, 0, 5]
    assert table["plain"]["final_error"][:2] == pytest.approx([0.1, 0.2])
    assert table["plain"]["final_error"][2] is None  # NaN is kept as null, never dropped
    json.dumps(table)  # JSON-able
    assert list(by_name(runs)["residual"]) == [2, 0, 5]


def test_depth_sweep_table_follows_depths_then_seeds_and_marks_underflow():
    runs = build_runs("depth_sweep", {"models": "mlp", "mlp_depths": "8,2", "seeds": "0,1"})
    traces = {}
    for key, c in runs.items():
        if c.arch == "plain" and c.depth == 8 and c.seed == 1:
            traces[key] = _fake_trace(c, 0.0, 1e-3, 0.9)  # the first block's gradient underflowed to 0
        else:
            traces[key] = _fake_trace(c, 10.0 ** -c.depth if c.arch == "plain" else 1.0, 1.0, 0.25 * c.seed,
                                      diverged=(c.arch == "residual" and c.depth == 8 and c.seed == 0))
    table = depth_sweep_summary(traces)
    plain, residual = table["mlp"]["plain"], table["mlp"]["residual"]
    assert plain["depths"] == [2, 8] and plain["seeds"] == [0, 1]
    assert plain["log10_grad_ratio_step0"][0] == pytest.approx([-2, -2])
    assert plain["log10_grad_ratio_step0"][1][0] == pytest.approx(-8)
    assert plain["log10_grad_ratio_step0"][1][1] is None and plain["grad_underflow"][1] == [False, True]
    assert plain["final_train_error"][0] == pytest.approx([0.0, 0.25])
    assert residual["final_train_error"][1][0] is None  # diverged
    assert "conv" not in table
    json.dumps(table)
    other = TransformerConfig()  # a run of another experiment: its config says so, whatever its name
    with pytest.raises(ValueError, match="not a depth_sweep run"):
        depth_sweep_summary({RunKey("mlp_plain_d8", 0): Trace(meta={"config": other.to_dict(), "seed": 0},
                                                               arrays=traces[RunKey("mlp_plain_d8", 0)].arrays)})


def test_the_full_depth_sweep_has_ten_depths_from_2_to_110_for_each_model():
    runs = build_runs("depth_sweep", FULL_SWEEP)
    for model in ("mlp", "conv"):
        depths = {c.depth for c in runs.values() if c.model == model}
        assert len(depths) >= 10 and max(depths) == 110
    assert min(c.depth for c in runs.values() if c.model == "mlp") == 2
    assert {c.seed for c in runs.values()} == set(range(5))
    conv = [c for c in runs.values() if c.model == "conv"]
    assert {(c.activation, c.norm, c.width, c.shortcut) for c in conv} == {("relu", "batchnorm", 16, "zero_pad")}
