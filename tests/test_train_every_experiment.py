"""`render.py train EXPERIMENT` for every experiment of the table, with and without --json (issue 34): a summary
for every run, no traceback. Generated from simulation.experiments.EXPERIMENTS, so a new experiment is trained here
the day it is registered, and checked against simulation.runs.KINDS, so a new kind of run must name the case that
makes its runs (OTHER_KINDS); the default run trains one experiment of each kind, the slow set all of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulation.config import Range, param_range
from simulation.experiments import EXPERIMENTS
from cli.params import build_runs  # parses string values as --set does
from simulation.runkeys import key_texts
from simulation.runs import kind_of
from support import ROOT, invoke

# Tiny settings by parameter name, for whichever of them an experiment has (raised to the lower end of the
# parameter's range where it has one: the loss landscape's conv nets start at depth 8). A parameter not named here
# keeps its default: a new experiment still trains, if more slowly.
TINY = {"steps": 4, "depth": 3, "depths": (2, 3), "mlp_depths": (2, 3), "conv_depths": (8,), "record_every": 2,
        "batch_size": 16, "grid": 5, "eval_examples": 32, "init_batches": 1, "warmup_steps": 1, "width": 8,
        "ffn_width": 16, "seq_len": 4}
# --model: the model experiment trains the user's network (and its plain twin); the README's example network.
MODEL = {"spec": f"{ROOT / 'examples' / 'my_resnet.py'}:build", "data": "digits-image"}

# The default run: the first experiment of each run kind in the table's order (the user's model, the slowest to
# build, only in the slow set); the slow set trains every experiment.
FIRST_OF_KIND = {kind_of(e.base).name: name for name, e in reversed(EXPERIMENTS.items())}
CHEAP = {name for kind, name in FIRST_OF_KIND.items() if kind != "user_model"}
# Kinds no experiment's base config has, each with the experiment and settings that make its runs: a new kind
# fails test_the_parametrization_... until it is added here.
RECORDED = ROOT / "tests" / "data" / "model" / "resnet152_50"  # traces of a user's network recorded elsewhere
OTHER_KINDS = {"recorded": ("model", {"trace": str(RECORDED / "residual.npz"), "twin": str(RECORDED / "plain.npz")})}


def _tiny_value(name: str, key: str, value):
    experiment = EXPERIMENTS[name]
    cls = experiment.params_type if key in experiment.extra_defaults else type(experiment.base)
    limits = param_range(cls, key)
    if isinstance(limits, Range):
        value = tuple(dict.fromkeys(max(v, limits.low) for v in value)) if isinstance(value, tuple) \
            else max(value, limits.low)
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def tiny_settings(name: str) -> dict[str, str]:
    """``{key: value}`` (command-line text) that make every run of experiment ``name`` train in well under a second."""
    params = EXPERIMENTS[name].params()
    return {key: _tiny_value(name, key, value) for key, value in TINY.items() if key in params}


CASES = [pytest.param(name, {**tiny_settings(name), **(MODEL if name == "model" else {})}, id=name,
                      marks=() if name in CHEAP else pytest.mark.slow) for name in EXPERIMENTS]
CASES += [pytest.param(name, settings, id=f"{name}-{kind}") for kind, (name, settings) in OTHER_KINDS.items()]


def _command(name: str, settings: dict[str, str]) -> list[str]:
    return ["train", name, *(a for k, v in settings.items() for a in ("--set", f"{k}={v}"))]


def test_the_parametrization_is_the_table_render_py_list_shows():
    """Every experiment `render.py list` shows is trained below; every kind of run by the default run."""
    listed = json.loads(invoke("list", "--json").stdout)["experiments"]
    assert list(listed) == list(EXPERIMENTS) and len(listed) >= 20
    from simulation.runs import KINDS

    assert set(FIRST_OF_KIND) == {kind_of(e.base).name for e in EXPERIMENTS.values()}
    assert set(FIRST_OF_KIND) | set(OTHER_KINDS) == set(KINDS) and len(FIRST_OF_KIND) >= 6
    for kind, (name, settings) in OTHER_KINDS.items():  # each extra case makes runs of its kind
        assert {kind_of(c).name for c in build_runs(name, settings).values()} == {kind}


@pytest.mark.parametrize(("name", "settings"), CASES)
def test_train_summarizes_every_run_of_every_experiment(name, settings, isolated_cache):
    expected = key_texts(build_runs(name, settings))
    trained = invoke(*_command(name, settings), "--json")
    assert trained.exit_code == 0 and trained.exception is None, trained.output
    assert "Traceback" not in trained.output
    summary = json.loads(trained.stdout)
    assert summary["experiment"] == name and list(summary["runs"]) == list(expected.values())
    for run in summary["runs"].values():
        assert Path(run["trace"]).parent == isolated_cache and Path(run["trace"]).is_file()
        assert "steps" not in settings or run["final_step"] == int(settings["steps"]) - 1 or run["diverged"]
        assert "final_loss" in run and "final_test_error" in run
    assert set(summary["seeds"]) == set(expected.values())
    # Again without --json: from the cache now, one line per run, each starting with its name.
    shown = invoke(*_command(name, settings))
    assert shown.exit_code == 0 and shown.exception is None and "Traceback" not in shown.output, shown.output
    lines = shown.stdout.splitlines()
    for text in expected.values():
        assert sum(line.split()[:1] == [text] for line in lines) == 1, (text, shown.stdout)
    assert f"traces: 0 trained, {len(expected)} from the cache" in shown.stderr


def test_train_and_inspect_summarize_a_run_watched_in_its_own_loop(tmp_path, isolated_cache):
    """A run recorded by `watch` in a user's loop has no test error, no error curve and a config of kind "watch":
    `render.py train model --set trace=FILE` (the recorded kind) and `render.py inspect FILE` summarize what it
    recorded, the rest null, no traceback. Numbers against the file as numpy reads it."""
    import numpy as np
    import torch

    from watch_models import Net, batches, train_steps

    torch.manual_seed(0)
    path = tmp_path / "watched.npz"
    train_steps(Net(), path, [micro[0] for micro in batches(4, 1)], every=2)
    with np.load(path, allow_pickle=False) as data:
        assert "test_error" not in data.files and "error" not in data.files
        loss, grad = data["loss"].astype(np.float64), data["grad_norm"].astype(np.float64)
    for args in (["--json"], []):
        result = invoke("train", "model", "--set", f"trace={path}", *args)
        assert result.exit_code == 0 and result.exception is None and "Traceback" not in result.output, result.output
    summary = json.loads(invoke("train", "model", "--set", f"trace={path}", "--json").stdout)["runs"]["residual"]
    inspected = json.loads(invoke("inspect", str(path)).stdout)["summary"]
    for s in (summary, inspected):
        assert s["final_loss"] == pytest.approx(loss[-1], rel=1e-6) and s["final_test_error"] is None
        assert s["final_error"] is None and s["grad_ratio_step0"] == pytest.approx(grad[0, 0] / grad[0, -1], rel=1e-6)
