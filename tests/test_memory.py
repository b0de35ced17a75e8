"""The memory guard: its estimate against the measured peak, the budget, and refusals before any work."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simulation import memory
from simulation.config import ConfigError, RunConfig, TransformerConfig
from simulation.memory import BUDGET_ENV, budget_bytes
from simulation.runs import check_memory, estimate

ROOT = Path(__file__).resolve().parent.parent

# Three MLP sizes, each dominated by another part of the estimate, and one Transformer.
MEASURED = [
    pytest.param({"width": 2048, "depth": 4, "steps": 2}, id="parameters: width 2048"),
    pytest.param({"width": 256, "depth": 40, "norm": "batchnorm", "activation": "relu", "arch": "residual",
                  "batch_size": 512, "steps": 2}, id="activations: BN residual, batch 512"),
    pytest.param({"width": 1024, "depth": 6, "optimizer": "adam", "arch": "residual", "steps": 2},
                 id="optimiser: adam, width 1024"),
    pytest.param({"kind": "transformer", "width": 128, "depth": 3, "ffn_width": 512, "batch_size": 64,
                  "seq_len": 32, "steps": 2, "init_batches": 1}, id="transformer: d_model 128, T 32"),
]


@pytest.mark.slow  # four fresh interpreters that import torch and train (~30 s each on a busy 2-core machine)
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc to reset the peak RSS")
@pytest.mark.parametrize("config", MEASURED)
def test_the_estimate_is_within_a_factor_of_two_of_the_measured_peak(config):
    out = subprocess.run([sys.executable, "-m", "simulation", "--measure", json.dumps(config)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    figures = json.loads(out.strip().splitlines()[-1])
    ratio = figures["estimate"] / figures["peak"]
    assert 0.5 <= ratio <= 2.0, f"estimate {figures['estimate']:,} B, measured peak {figures['peak']:,} B"
    assert figures["peak"] > 50e6, "too small to measure against the interpreter's noise"


def test_a_network_far_too_large_is_refused_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    huge = RunConfig(depth=1000, width=4096)
    assert estimate(huge).total > 100e9  # 33.5e9 parameters in float32, times four
    from simulation.kinds.mlp import run

    started = time.perf_counter()
    with pytest.raises(ConfigError, match="over the memory budget") as info:
        run(huge)
    assert time.perf_counter() - started < 5, "refused only after work began"
    message = str(info.value)
    assert "\n" not in message and "parameters 134 GB" in message and BUDGET_ENV in message


def test_get_traces_refuses_every_run_before_training_the_first(monkeypatch, isolated_cache):
    from simulation.cache import get_traces

    small, large = RunConfig(depth=2, width=8, steps=2), RunConfig(depth=200, width=2048, steps=2)
    monkeypatch.setenv(BUDGET_ENV, str(estimate(small).total * 10))
    with pytest.raises(ConfigError, match="over the memory budget"):
        get_traces([small, large])
    assert not list(isolated_cache.iterdir()), "the small run was trained before the large one was refused"


@pytest.mark.parametrize("setting, expected", [("0.25", 0.25), ("1", 1.0), ("", memory.DEFAULT_FRACTION)])
def test_budget_as_a_fraction_of_available_memory(monkeypatch, setting, expected):
    monkeypatch.setattr(memory, "available_bytes", lambda: 8 * 1024**3)
    monkeypatch.setenv(BUDGET_ENV, setting)
    assert budget_bytes()[0] == int(expected * 8 * 1024**3)


@pytest.mark.parametrize("setting, expected", [("6G", 6 * 1024**3), ("500M", 500 * 1024**2), ("2GiB", 2 * 1024**3),
                                               ("123456789", 123456789)])
def test_budget_as_a_size(monkeypatch, setting, expected):
    monkeypatch.setenv(BUDGET_ENV, setting)
    assert budget_bytes()[0] == expected


@pytest.mark.parametrize("setting", ["lots", "-1G", "0", "1.5", "0x10", "nan", "1e9"])
def test_a_bad_budget_is_one_clear_error(monkeypatch, setting):
    monkeypatch.setenv(BUDGET_ENV, setting)
    with pytest.raises(ConfigError, match=BUDGET_ENV):
        budget_bytes()


def test_an_explicit_budget_wins_and_the_estimate_grows_with_every_size_parameter():
    config = RunConfig(depth=4, width=64)
    needed = estimate(config).total
    assert check_memory(config, budget=needed).total == needed
    with pytest.raises(ConfigError, match="over the memory budget"):
        check_memory(config, budget=needed - 1)
    for change in ({"depth": 8}, {"width": 128}, {"batch_size": 1024}, {"norm": "batchnorm"}, {"optimizer": "adam"},
                   {"arch": "residual"}):
        assert estimate(config.replace(**change)).total > needed, change
    t = TransformerConfig()
    for change in ({"depth": 8}, {"width": 64}, {"seq_len": 16}, {"batch_size": 64}, {"ffn_width": 256}):
        assert estimate(t.replace(**change)).total > estimate(t).total, change


def test_the_estimate_knows_the_data_sets_and_the_sweep():
    from simulation.data import load_dataset
    from simulation.kinds.mlp import SWEEP_POINTS

    assert memory.SWEEP_POINTS == SWEEP_POINTS
    from simulation.config import TransformerConfig
    from simulation.kinds.transformer import TransformerTask

    task = TransformerTask(TransformerConfig(depth=1, width=8, ffn_width=16, steps=1))
    assert len(task.test_set[0]) == memory.TEST_SEQUENCES  # the held-out pass the Transformer estimate counts
    for name, (features, classes) in memory.DATA_SHAPES.items():
        data = load_dataset(name, seed=0)
        assert (data.n_features, data.n_classes) == (features, classes)


def test_identity_fit_runs_are_estimated_and_costed_without_a_depth_or_model():
    """IdentityFitConfig has neither ``model`` nor ``depth``: the guard and the sweep's cost must not ask."""
    from simulation.config import IdentityFitConfig
    from simulation.sweep import sweep_work

    config = IdentityFitConfig(steps=30)
    assert estimate(config).total > 0
    assert sweep_work(config) == 30


def _task_estimates():
    """(task class, config) for every Task the one training loop runs, at sizes where the estimates differ."""
    from simulation.config import HighwayConfig
    from simulation.kinds.highway import HighwayTask
    from simulation.kinds.mlp import ConvTask, MLPTask
    from simulation.kinds.transformer import TransformerTask

    return [(MLPTask, RunConfig(depth=6, width=32)), (ConvTask, RunConfig(model="conv", depth=8, width=8)),
            (HighwayTask, HighwayConfig(depth=6, width=32)), (TransformerTask, TransformerConfig(depth=2))]


def test_the_loop_refuses_with_the_estimate_the_table_gives():
    """The training loop gets the memory check from its task (Task.memory; it never imports the table of kinds):
    each task's estimate is the one simulation.runs lists for its kind. The twin: a conv task that kept the
    MLP's estimate it inherits would disagree."""
    from simulation.kinds.mlp import ConvTask, MLPTask
    from simulation.loop import check_fits

    for task, config in _task_estimates():
        assert task.memory(config) == estimate(config), task.__name__
        assert check_fits(task, config, budget=estimate(config).total) == estimate(config)
        with pytest.raises(ConfigError, match="over the memory budget"):
            check_fits(task, config, budget=estimate(config).total - 1)
    conv = dict(_task_estimates())[ConvTask]
    assert MLPTask.memory(conv) != estimate(conv)
