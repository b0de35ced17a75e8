"""The render planner (cli/plan.py) without click: the runs it trains are the runs each scene reads."""

from __future__ import annotations

import pytest

import scenes
from cli.params import RENDER_DEFAULTS
from cli.params import parameter_layers
from cli.plan import plan_render
from scenes.chain_rule import ChainRuleExploding, ChainRuleProduct
from simulation.cache import store
from simulation.config import ConfigError
from simulation.sweep import run_to_bytes

NAMES = [s.__name__ for s in scenes.SCENES_IN_ORDER]


def _plan(tmp_path, sets, scene_list, **options):
    layers = parameter_layers(None, None, sets, NAMES)
    return plan_render(scene_list, layers, {**RENDER_DEFAULTS, "output": str(tmp_path / "media"), **options})


def test_each_scene_trains_its_own_seeds_under_the_users_settings(tmp_path):
    # ChainRuleProduct reads three seeds (its experiment_defaults), ChainRuleExploding one: plain and residual
    # each, every run at the depth given, and the cache is empty, so all of them are to train.
    plan = _plan(tmp_path, ["depth=5"], [ChainRuleProduct, ChainRuleExploding])
    assert [job.scene for job in plan.todo] == ["ChainRuleProduct", "ChainRuleExploding"]
    product, exploding = plan.jobs
    assert len(product.traces) == 6 and len(exploding.traces) == len(set(exploding.traces.values()))
    assert sorted(c.seed for c in plan.configs if c.digest() in product.traces.values()) == [0, 0, 1, 1, 2, 2]
    assert all(c.depth == 5 for c in plan.configs) and plan.fresh == plan.configs
    assert {c.digest() for c in plan.configs} == {d for job in plan.jobs for d in job.traces.values()}
    assert "2 of 2 scenes would be rendered" in plan.summary()


def test_a_cached_run_is_not_planned_again(tmp_path):
    plan = _plan(tmp_path, ["depth=2", "width=4", "steps=2", "seeds=0"], [ChainRuleProduct])
    first = plan.configs[0]
    store(first, run_to_bytes(first.to_dict()))
    again = _plan(tmp_path, ["depth=2", "width=4", "steps=2", "seeds=0"], [ChainRuleProduct])
    assert again.configs == plan.configs and again.fresh == plan.configs[1:]


def test_bad_input_is_refused_before_any_plan(tmp_path):
    with pytest.raises(ConfigError, match="concat joins the whole lecture"):
        _plan(tmp_path, [], [ChainRuleProduct], concat=True)
    with pytest.raises(ConfigError, match="ChainRuleProduct .experiment chain_rule.: .*depth"):
        _plan(tmp_path, ["depth=0"], [ChainRuleProduct])
