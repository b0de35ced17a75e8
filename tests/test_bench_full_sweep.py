"""benchmarks/bench_full_sweep.py: its count of the full sweep and its schedule, against independent ones.

Example::

    pytest tests/test_bench_full_sweep.py -q -n 0
"""

from __future__ import annotations

import itertools

import pytest

from benchmarks.bench_full_sweep import count, estimate, full_sweep_runs, representatives, schedule_wall
from simulation.config import RunConfig
from simulation.experiments import FULL_SWEEP, sweep_run
from simulation.runkeys import RunKey


def test_the_count_is_depths_times_archs_times_seeds():
    runs = full_sweep_runs()
    table = count(runs)
    seeds = len(FULL_SWEEP["seeds"])
    for model in ("mlp", "conv"):
        depths = list(FULL_SWEEP[f"{model}_depths"])  # typed (simulation/ sees no raw string)
        assert sorted(table[model]) == depths
        assert all(cell["runs"] == 2 * seeds for cell in table[model].values())
        for depth, cell in table[model].items():  # the work of one run: steps x blocks (conv: 20 per block)
            config = runs[RunKey(sweep_run(model, "plain", depth), 0)]
            assert config.steps == 300 and config.batch_size == 128
            blocks = (depth - 2) // 2 * 20 if model == "conv" else depth
            assert cell["work"] == 2 * seeds * config.steps * blocks
    assert sum(c["runs"] for d in table.values() for c in d.values()) == len(runs) == 220


def test_representatives_are_the_ends_and_middle_of_each_model_at_the_sweeps_settings():
    runs = full_sweep_runs()
    chosen = representatives(runs)
    assert sorted(chosen) == [("conv", 8), ("conv", 44), ("conv", 110), ("mlp", 2), ("mlp", 20), ("mlp", 110)]
    for (model, depth), config in chosen.items():
        assert config == runs[RunKey(sweep_run(model, "residual", depth), 0)] and config.seed == 0


def test_estimate_interpolates_in_depth_and_is_exact_at_the_measured_runs():
    cells = [("mlp", "plain", 2, 0), ("mlp", "plain", 6, 0), ("mlp", "residual", 10, 0), ("conv", "plain", 8, 3),
             ("mlp", "plain", 20, 0)]
    runs = {RunKey(sweep_run(m, a, d), s): RunConfig(model=m, arch=a, depth=d, seed=s) for m, a, d, s in cells}
    measured = {("mlp", 2): 1.0, ("mlp", 10): 5.0, ("conv", 8): 7.0}
    out = estimate(runs, measured)
    assert list(out.values()) == pytest.approx([1.0, 3.0, 5.0, 7.0, 10.0]) and list(out) == list(runs)


@pytest.mark.parametrize("seconds", [[5, 4, 3, 3, 2, 1], [10, 1, 1, 1], [2, 2, 2], [7]])
def test_schedule_wall_against_every_assignment(seconds):
    assert schedule_wall(seconds, 1) == pytest.approx(sum(seconds))
    best = min(max(sum(s for s, w in zip(seconds, pick) if w == k) for k in (0, 1))
               for pick in itertools.product((0, 1), repeat=len(seconds)))
    two = schedule_wall(seconds, 2)
    assert best <= two <= best * 7 / 6 + 1e-9  # longest-first is within 7/6 of the best on two workers (Graham)
    assert two >= max(max(seconds), sum(seconds) / 2)
