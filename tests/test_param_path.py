"""benchmarks/param_path.py's counts (issue 38's climbs back up a layer), on paths written out by hand."""

from __future__ import annotations

from benchmarks.param_path import count, layer_of


def test_climbs_count_every_step_up_a_layer_and_no_lateral_one():
    path = ["render.py", "cli/plan.py", "render.py", "cli/plan.py", "cli/params.py", "simulation/experiments.py",
            "simulation/config.py", "simulation/experiments.py", "cli/params.py", "cli/plan.py", "render.py"]
    figures = count(path)
    # up: plan -> render.py, experiments -> params, plan -> render.py (plan <-> params and the two simulation
    # modules are lateral); re-entered: render.py and cli/plan.py twice each, simulation/experiments.py, cli/params.py
    assert (figures["rooms"], figures["climbs"], figures["re_entries"]) == (11, 3, 6)
    assert [layer_of(m) for m in ("render.py", "cli/plan.py", "simulation/kinds/mlp.py")] == [0, 1, 2]


def test_the_count_can_fail():
    """The twin: one more trip up and down adds one climb and a merged repeat adds none."""
    path = ["render.py", "cli/plan.py", "render.py"]
    assert count(path)["climbs"] == 1
    assert count([*path, "cli/plan.py", "cli/plan.py", "render.py"])["climbs"] == 2
    assert count([*path, "cli/plan.py", "cli/plan.py", "render.py"])["rooms"] == 5
