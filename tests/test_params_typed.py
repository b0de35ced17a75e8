"""simulation/ receives typed values only: cli/params.py parses the command line's strings and a file's values
(issue 38). A spy on :func:`simulation.experiments.split_params`, which every run of every experiment goes through,
sees what simulation/ is handed; its twin shows that simulation/ refuses a raw string of every parameter."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simulation.experiments as experiments
from cli.params import build_runs
from simulation.config import ConfigError
from support import invoke

# Every experiment's parameters that are no string (a str parameter takes any string; "model" needs a network)
TYPED = {name: {key: default for key, (default, _) in exp.params().items()
                if not isinstance(default, str) and key != "seeds" and not (isinstance(default, tuple) and
                                                                            default and isinstance(default[0], str))}
         for name, exp in experiments.EXPERIMENTS.items() if name != "model"}


def _as_text(default) -> str:
    """A parameter's default as --set writes it: ``8,20`` for a tuple, ``yes``/``no`` for a bool."""
    if isinstance(default, tuple):
        return ",".join(_as_text(item) for item in default)
    if isinstance(default, bool):
        return "yes" if default else "no"
    return repr(default) if isinstance(default, float) else str(default)


def _raw_strings(experiment: str, values: dict) -> list[str]:
    """The keys of ``values`` whose value (or an item of it) is a string where the parameter is no string."""
    params = experiments.get_experiment(experiment).params()
    bad = []
    for key, value in values.items():
        default = () if key == "seeds" else params.get(key, ("",))[0]
        if isinstance(default, str):
            continue
        items = value if isinstance(value, (list, tuple)) else (value,)
        kinds = default if isinstance(default, tuple) and default else (default,)
        if any(isinstance(item, str) and not isinstance(kinds[0], str) for item in items):
            bad.append(key)
    return bad


@pytest.fixture
def handed(monkeypatch):
    """``[(experiment, values)]``: what every call of simulation.experiments.split_params received."""
    seen = []
    real = experiments.split_params

    def spy(experiment, values):
        seen.append((experiment.name, dict(values)))
        return real(experiment, values)

    monkeypatch.setattr(experiments, "split_params", spy)
    return seen


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_strings_are_parsed_before_simulation_sees_them(handed, data):
    """--set strings of any parameter of any experiment (its default, written as text, plus seeds) reach
    simulation/ typed: no value the spy sees is a string where the parameter is no string."""
    experiment = data.draw(st.sampled_from(sorted(TYPED)), label="experiment")
    keys = data.draw(st.lists(st.sampled_from(sorted(TYPED[experiment])), unique=True, max_size=4), label="keys")
    overrides = {key: _as_text(TYPED[experiment][key]) for key in keys}
    overrides["seeds"] = data.draw(st.sampled_from(["0", "0,1", "3, 1"]), label="seeds")
    handed.clear()
    build_runs(experiment, overrides)
    assert handed and all(not _raw_strings(name, values) for name, values in handed), handed


def test_the_command_line_hands_simulation_typed_values(handed, tmp_path):
    """The real commands: `list` (every experiment) and `render --check` with --set and a --config file."""
    config = tmp_path / "lecture.toml"
    config.write_text("[params]\nsteps = 30\n[experiments.vanishing]\ndepths = [8, 20]\n", encoding="utf-8")
    listed = invoke("list", "--config", config, "--set", "seeds=0,1", "--set", "vanishing.activations=tanh",
                    "--set", "exploding.large_lr=2")
    assert listed.exit_code == 0, listed.output
    checked = invoke("render", "ChainRuleProduct", "ShortcutScale", "--check", "--set", "depth=3", "--set", "seeds=0,2",
                     "--set", "shortcut_scale.scales=0.5,1", "-o", tmp_path / "o")
    assert checked.exit_code == 0, checked.output
    assert {name for name, _ in handed} >= set(TYPED)
    assert [(name, values) for name, values in handed if _raw_strings(name, values)] == []
    assert ("vanishing", {"steps": 30, "depths": (8, 20), "seeds": (0, 1), "activations": ("tanh",)}) in handed


@pytest.mark.parametrize("experiment", sorted(TYPED))
def test_simulation_refuses_a_raw_string(experiment):
    """The twin: handed straight to simulation/, the same strings are refused (one line each), so the spy's
    check above can fail; parsed by cli.params.build_runs first, they build."""
    for key, default in TYPED[experiment].items():
        with pytest.raises(ConfigError, match=key):
            experiments.build_runs(experiment, {key: _as_text(default)})
    with pytest.raises(ConfigError, match="seeds"):
        experiments.build_runs(experiment, {"seeds": "0,1"})
    assert _raw_strings(experiment, {key: _as_text(d) for key, d in TYPED[experiment].items()}) == list(TYPED[experiment])
    typed = build_runs(experiment, {**{key: _as_text(d) for key, d in TYPED[experiment].items()}, "seeds": "0,1"})
    assert typed == experiments.build_runs(experiment, {**TYPED[experiment], "seeds": (0, 1)})


def parser_uses(source: str) -> list[str]:
    """Where a module's ``source`` imports or calls the value parser (``convert_value``): the functions, and
    ``"<module>"`` for an import or a use outside any function. Where raw strings become values."""
    import ast

    found = set()

    def visit(node, owner: str) -> None:
        for child in ast.iter_child_nodes(node):
            if ((isinstance(child, ast.Name) and child.id == "convert_value")
                    or (isinstance(child, ast.Attribute) and child.attr == "convert_value")
                    or (isinstance(child, ast.ImportFrom) and any(a.name == "convert_value" for a in child.names))):
                found.add(owner)
            visit(child, child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else owner)

    visit(ast.parse(source), "<module>")
    return sorted(found)


def test_no_module_of_simulation_parses_a_string_by_its_type():
    """The value parser lives in cli/params.py; no module of simulation/ imports or calls it (its developer command
    lines, ``python -m simulation.kinds.mlp --set depth=20``, read a JSON literal: simulation.config.parse_value)."""
    from support import ROOT

    uses = {}
    for path in sorted((ROOT / "simulation").rglob("*.py")):
        if found := parser_uses(path.read_text(encoding="utf-8")):
            uses[path.relative_to(ROOT).as_posix()] = found
    assert uses == {} and not (ROOT / "simulation" / "values.py").exists()


def test_the_parser_scan_can_fail():
    planted = "from .values import convert_value\n\ndef split_params(e, v):\n    return convert_value('depth', 1, v)\n"
    assert parser_uses(planted) == ["<module>", "split_params"]
    assert parser_uses("import simulation.values as values\nx = values.convert_value('a', 1, '2')\n") == ["<module>"]


def test_a_scene_of_your_own_may_write_its_defaults_as_strings(tmp_path):
    """``experiment_defaults = {"seeds": "0,1"}`` (as --set writes it) is parsed like --set, before simulation/."""
    import scenes.chain_rule as chain_rule
    from cli.params import Layer, resolve_scenes

    own = type("OwnProduct", (chain_rule.ChainRuleProduct,), {"experiment_defaults": {"seeds": "0,1"}})
    typed = type("TypedProduct", (chain_rule.ChainRuleProduct,), {"experiment_defaults": {"seeds": (0, 1)}})
    resolved = resolve_scenes([Layer("--set", common={"steps": "20"})], [own, typed])
    assert resolved["OwnProduct"].params == resolved["TypedProduct"].params == {"seeds": (0, 1), "steps": 20}
    assert resolved["OwnProduct"].runs == resolved["TypedProduct"].runs and len(resolved["OwnProduct"].runs) == 4
